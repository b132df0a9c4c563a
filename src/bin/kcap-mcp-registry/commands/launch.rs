//! `kcap-mcp-registry launch`: carry a launch plan out with the library's executor
//! (`kcap_mcp_registry::launch`) and stream what the reviewer does, one line per event.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use kcap_mcp_registry::clients::plan::{LaunchPlan, PLAN_VERSION};
use kcap_mcp_registry::clients::version::ClientVersion;
use kcap_mcp_registry::launch::{
    self, AcpEvent, AcpSession, ExecError, Options, Reviewer, TerminalEvent, TerminalSession, door,
};
use kcap_mcp_registry::ops::verify::{self, record};
use kcap_mcp_registry::text::{OutputLines, ShownPath, printable};

use super::render::{LaunchFor, render_plan};
use kcap_mcp_registry::Client;

use super::{CliError, SandboxPolicy, chain};

/// The subcommand's `--help` epilogue.
pub(crate) const HELP: &str = "\
Renders the plan as `render <client> --format plan` would (same flags) and carries it out:
checks it, creates the launch directory, its dirs and files, removes the worktree paths,
starts --client-bin with exactly the plan's environment in its own process group, and for
ACP clients sends initialize, session/new and (with --prompt) session/prompt. Prints one line
per ACP event (`update {…}`, `permission refused {…}`, `done end_turn`, `stderr …`) or per
line of a terminal client's output (`output …`), then stops the client's process group and
removes the launch directory. An ACP run without a prompt stops once session/new answered.

With --strict it first reads the client's version (`--client-bin --version`, offline, bounded)
and refuses one this crate's tests do not prove unless `verify` recorded a pass for this very
binary at that version (docs/cli-verify.md).

--plan FILE carries out a saved plan instead (with --launch-dir, the directory it was
rendered for, and --prompt for ACP clients). --dry-run prints the plan, each credential's
value `(not shown)`, and the steps.

Exit codes: 0 the prompt was answered (ACP) or the client exited 0 (terminal); 1 the plan was
refused, the reviewer failed, sat at a dialog, or ran past --timeout; 2 usage errors, a plan
file that cannot be read, a client binary that cannot be started.

Examples:
  kcap-mcp-registry launch gemini --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --client-bin /usr/local/bin/gemini --prompt 'Review the branch'
  kcap-mcp-registry render codex … --format plan > plan.json
  kcap-mcp-registry launch --plan plan.json --launch-dir /run/kcap/l1 --client-bin /usr/local/bin/codex";

#[derive(Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_value_name = "CLIENT",
    override_usage = "kcap-mcp-registry launch <CLIENT> [RENDER OPTIONS] --client-bin <PATH> [OPTIONS]\n       \
                      kcap-mcp-registry launch --plan <FILE|-> --launch-dir <DIR> --client-bin <PATH> [OPTIONS]"
)]
pub(crate) struct LaunchArgs {
    /// The client and its `render` flags.
    #[command(subcommand)]
    client: Option<LaunchFor>,
    /// Carry out a saved plan (`render <client> --format plan` output; `-` for stdin)
    /// instead of rendering one.
    #[arg(long, value_name = "FILE|-", required = true)]
    plan: Option<PathBuf>,
    /// With --plan: the per-launch directory (default: the one the plan was rendered for,
    /// its `launch_dir`; another is refused).
    #[arg(long, value_name = "DIR", requires = "plan")]
    launch_dir: Option<PathBuf>,
    /// With --plan: the reviewer's prompt, sent in ACP session/prompt.
    #[arg(long, requires = "plan", allow_hyphen_values = true)]
    prompt: Option<String>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Args)]
struct RunArgs {
    /// The client binary to start (required).
    #[arg(long, value_name = "PATH", global = true)]
    client_bin: Option<PathBuf>,
    /// Print the plan (no credential's value) and the steps, and check the plan; start nothing.
    #[arg(long, global = true)]
    dry_run: bool,
    /// Stop the reviewer after this many seconds.
    #[arg(long, value_name = "SECONDS", global = true, default_value_t = 600)]
    timeout: u64,
    /// How long an ACP client may take to answer initialize, and session/new; and a terminal
    /// client whose prompt is typed, for its MCP servers to list their tools.
    #[arg(long, value_name = "SECONDS", global = true, default_value_t = 60)]
    handshake_timeout: u64,
    /// How long a terminal client may sit at a known dialog before it is stopped.
    #[arg(long, value_name = "SECONDS", global = true, default_value_t = 3)]
    dialog_quiet: u64,
    /// The reviewer's sandbox (Landlock): `required` refuses a kernel that lacks part of
    /// it, `best-effort` warns and confines as far as the kernel allows, `off` runs the
    /// reviewer unconfined. Default: `required` with --strict, else `best-effort`.
    #[arg(long, value_name = "POLICY", global = true)]
    sandbox: Option<SandboxPolicy>,
    /// Put the reviewer and all it starts (what leaves its process group too) in a cgroup
    /// v2 of their own, killed whole on stop and when this process dies: `best-effort` warns
    /// where the machine gives none (then its process group only is stopped), `required`
    /// refuses to launch there, `off` stops the process group only.
    #[arg(
        long,
        value_name = "POLICY",
        global = true,
        default_value = "best-effort"
    )]
    cgroup: SandboxPolicy,
    /// A path the sandboxed reviewer may also read and execute, beyond the plan's `sandbox`
    /// (a tool outside the system's directories); repeatable.
    #[arg(long, value_name = "PATH", global = true)]
    sandbox_exec: Vec<std::path::PathBuf>,
    /// A path the sandboxed reviewer may also read and write, beyond the plan's `sandbox` (a
    /// directory the daemon collects the reviewer's output from); repeatable.
    #[arg(long, value_name = "PATH", global = true)]
    sandbox_write: Vec<std::path::PathBuf>,
    /// Leave the launch directory in place afterwards, on a failed launch too (to look at
    /// what the client wrote); its credentials stay with it.
    #[arg(long, global = true)]
    keep_launch_dir: bool,
    /// The network door's budget: how many requests carrying the daemon's credential it
    /// passes for the launch; the next get a 429.
    #[arg(long, value_name = "N", global = true, default_value_t = door::KEYED_REQUESTS)]
    door_keyed_requests: u64,
    /// The network door's rate of requests carrying the daemon's credential: this many at
    /// once, then one every --door-keyed-interval-ms; a faster one waits its turn.
    #[arg(long, value_name = "N", global = true, default_value_t = door::KEYED_RATE.burst)]
    door_keyed_burst: u32,
    /// See --door-keyed-burst.
    #[arg(
        long,
        value_name = "MILLISECONDS",
        global = true,
        default_value_t = door_interval_ms()
    )]
    door_keyed_interval_ms: u64,
}

/// The default rate's interval, in milliseconds.
fn door_interval_ms() -> u64 {
    u64::try_from(door::KEYED_RATE.interval.as_millis()).unwrap_or(u64::MAX)
}

/// A plan to carry out: its launch directory and the prompt.
struct Planned {
    plan: LaunchPlan,
    launch_dir: PathBuf,
    prompt: Option<String>,
}

/// The plan, its launch directory and the prompt: rendered (under the strict policy, for
/// the version of `client_bin`), or read from --plan.
fn plan_of(
    client: Option<LaunchFor>,
    file: Option<PathBuf>,
    launch_dir: Option<PathBuf>,
    prompt: Option<String>,
    client_bin: &Path,
) -> Result<Planned, CliError> {
    if let Some(LaunchFor(mut client)) = client {
        if client.common.strict {
            client.client_version = Some(client_version(client.client, client_bin)?);
        }
        let (plan, ctx, _) = render_plan(client)?;
        // Named as the flag it came from (the executor's check names the path only).
        if let Some(tree) = ctx.worktree.as_deref().filter(|t| !Path::new(t).is_dir()) {
            // Leaving the flag out is a way only where the client starts without one.
            let or_leave_out = if plan.client.spec().needs_worktree {
                ""
            } else {
                ", or leave --worktree out (the client then starts in the launch directory)"
            };
            return Err(CliError::usage(format!(
                "--worktree {}: no such directory; check the pull request out there \
                 first{or_leave_out}",
                ShownPath(Path::new(tree))
            )));
        }
        let dir = ctx.launch_dir.clone().unwrap_or_default();
        return Ok(Planned {
            plan,
            launch_dir: PathBuf::from(dir),
            prompt: ctx.prompt,
        });
    }
    let plan = read_plan(&file.unwrap_or_default())?;
    // The plan names the directory it was rendered for (its HOME and client directories
    // point there): another --launch-dir is refused.
    let dir = PathBuf::from(&plan.launch_dir);
    if let Some(given) = launch_dir.filter(|given| *given != dir) {
        return Err(CliError::found(format!(
            "the plan was rendered for launch directory {}, not {}: its HOME and client \
             directories point there; render it again for {}",
            ShownPath(&dir),
            ShownPath(&given),
            ShownPath(&given)
        )));
    }
    Ok(Planned {
        plan,
        launch_dir: dir,
        prompt,
    })
}

/// A saved plan. A plan of another version is refused as the executor would refuse it,
/// before its shape is read (a plan of another version has fields this one does not know).
fn read_plan(file: &Path) -> Result<LaunchPlan, CliError> {
    let text = if file == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::usage(format!("--plan -: cannot read standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(file).map_err(|e| {
            CliError::usage(format!("--plan {}: cannot read it: {e}", ShownPath(file)))
        })?
    };
    let not_a_plan = |e: serde_json::Error| {
        CliError::usage(format!(
            "{} is not a launch plan (`render <client> --format plan` output): {e}",
            ShownPath(file)
        ))
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(not_a_plan)?;
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    if let Some(found) = version.filter(|v| *v != u64::from(PLAN_VERSION)) {
        return Err(CliError::found(ExecError::Version {
            found: u32::try_from(found).unwrap_or(u32::MAX),
            expected: PLAN_VERSION,
        }));
    }
    serde_json::from_value(value).map_err(not_a_plan)
}

/// The executor's options `run` names, with the sandbox's policy `sandbox`.
fn options(run: &RunArgs, sandbox: SandboxPolicy) -> Options {
    let options = Options::default()
        .with_handshake_timeout(Duration::from_secs(run.handshake_timeout))
        .with_dialog_quiet(Duration::from_secs(run.dialog_quiet))
        .with_die_with_parent(true)
        .with_confinement(sandbox.into())
        .with_cgroup(run.cgroup.into())
        .with_door_keyed_requests(run.door_keyed_requests)
        .with_door_keyed_rate(door::Rate {
            burst: run.door_keyed_burst,
            interval: Duration::from_millis(run.door_keyed_interval_ms),
        });
    let options = run
        .sandbox_exec
        .iter()
        .cloned()
        .fold(options, Options::with_sandbox_read_exec);
    run.sandbox_write
        .iter()
        .cloned()
        .fold(options, Options::with_sandbox_read_write)
}

pub(crate) fn launch(args: LaunchArgs) -> Result<ExitCode, CliError> {
    let LaunchArgs {
        client,
        plan,
        launch_dir,
        prompt,
        run,
    } = args;
    let client_bin = run
        .client_bin
        .clone()
        .ok_or_else(|| CliError::usage("give the client binary to start: --client-bin PATH"))?;
    // The strict policy launches no reviewer the kernel cannot confine; the lenient one
    // confines it as far as the kernel allows, with a warning.
    let strict = client.as_ref().is_some_and(|c| c.0.common.strict);
    let sandbox = run.sandbox.unwrap_or(if strict {
        SandboxPolicy::Required
    } else {
        SandboxPolicy::BestEffort
    });
    let Planned {
        plan,
        launch_dir,
        prompt,
    } = plan_of(client, plan, launch_dir, prompt, &client_bin)?;
    let options = options(&run, sandbox);
    if matches!(sandbox, SandboxPolicy::BestEffort)
        && let Some(missing) = launch::sandbox::missing()
    {
        errln!("warning: the sandbox is partial: this kernel lacks {missing}");
    }
    if let Some(reason) = unverified(&plan) {
        errln!(
            "warning: the {} launch's isolation is not verified: {reason}",
            plan.client
        );
    }
    if run.dry_run {
        // The plan to read, not to carry out: no credential's value (`render --format plan`
        // prints the plan whole).
        out!("{}", plan.to_json_without_credentials());
        launch::check(&plan).map_err(CliError::found)?;
        for (n, step) in launch::steps(&plan, &client_bin, &options)
            .iter()
            .enumerate()
        {
            outln!("{}. {step}", n + 1);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let options = options.with_keep_launch_dir(run.keep_launch_dir);
    if matches!(run.cgroup, SandboxPolicy::BestEffort)
        && let Some(missing) = launch::cgroup::missing()
    {
        errln!(
            "warning: what leaves the reviewer's process group may outlive it: this machine \
             lacks {missing}"
        );
    }
    missing_parent(&launch_dir)?;
    let signal = stop_signals()?;
    let existed = launch_dir.exists();
    let result = launch::launch(&plan, &client_bin, &options)
        .map_err(|e| exec_error(plan.client, e))
        .and_then(|reviewer| {
            errln!(
                "started {} ({}, pid {}) in launch directory {}",
                plan.client,
                ShownPath(&client_bin),
                reviewer.pid(),
                ShownPath(&launch_dir)
            );
            let bound = Bound {
                deadline: Instant::now() + Duration::from_secs(run.timeout),
                signal,
            };
            match reviewer {
                Reviewer::Acp(session) => run_acp(session, prompt.as_deref(), &bound),
                Reviewer::Terminal(session) => run_terminal(session, &bound),
            }
        });
    if run.keep_launch_dir && !existed && launch_dir.is_dir() {
        errln!(
            "kept the launch directory {} (--keep-launch-dir): it holds the client's \
             credentials; remove it when done",
            ShownPath(&launch_dir)
        );
    }
    result
}

/// The version of `bin` the strict policy checks (`<bin> --version`, bounded and offline:
/// `verify::installed_version`), verified here when it is not one this crate's tests prove
/// but `verify` recorded a pass for this very binary at this version (`verify::record`); a
/// record that cannot be trusted is not used, with a warning.
fn client_version(client: Client, bin: &Path) -> Result<ClientVersion, CliError> {
    let line = verify::installed_version(bin).map_err(|e| {
        CliError::found(format!(
            "--client-bin {}: cannot read its version (`--version`), which the strict policy \
             checks: {e}",
            ShownPath(bin)
        ))
    })?;
    let version = ClientVersion::new(line);
    if client.is_proven(&version) {
        return Ok(version);
    }
    let found = record::default_dir().and_then(|dir| {
        let binary = record::Binary::identify(bin)?;
        record::lookup(&dir, client, &binary, &version)
    });
    Ok(match found {
        Ok(Some(_)) => version.verified_here(),
        Ok(None) => version,
        Err(e) => {
            errln!("warning: verify's record is not used: {}", chain(&e));
            version
        }
    })
}

/// Refuses a launch directory whose parent does not exist, naming both: the executor creates
/// the launch directory only (mode 0700), not its parents, which the daemon owns.
fn missing_parent(launch_dir: &Path) -> Result<(), CliError> {
    match launch_dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && !parent.is_dir() => {
            Err(CliError::found(format!(
                "the launch directory {}: its parent {} is not a directory; create it first \
                 (the launch creates the launch directory itself, not its parents)",
                ShownPath(launch_dir),
                ShownPath(parent)
            )))
        }
        _ => Ok(()),
    }
}

fn unverified(plan: &LaunchPlan) -> Option<&str> {
    match &plan.isolation {
        kcap_mcp_registry::clients::plan::Isolation::Unverified { reason } => Some(reason),
        _ => None,
    }
}

/// A client that cannot be started is an input that cannot be used (2), said of
/// `--client-bin` with how to give it; anything else the reviewer did is a problem found (1).
fn exec_error(client: Client, e: ExecError) -> CliError {
    match e {
        ExecError::Start { ref bin, .. } => {
            let name = client.display_name();
            let how = match bin.components().count() {
                // A bare name: it is not on PATH.
                1 => format!(
                    "`{}` is not an executable on PATH; give the {name} binary's path \
                     (`bash scripts/install-peers.sh` prints those it installs)",
                    bin.display()
                ),
                _ => format!(
                    "give the {name} binary as a path to an executable file, or as a name on \
                     PATH (`--client-bin {}`)",
                    client.spec().binary
                ),
            };
            CliError::usage(format!("--client-bin: {}; {how}", chain(&e)))
        }
        e => CliError::found(e),
    }
}

/// SIGINT or SIGTERM, once received: the run then stops the reviewer as `stop()` does (its
/// whole process group, its launch directory) within a second, instead of dying and leaving
/// them (`signal-hook` sets the flag). A second one ends the process at once (exit 1; the
/// client, started with `die_with_parent`, is killed by the kernel).
fn stop_signals() -> Result<Arc<AtomicUsize>, CliError> {
    let got = Arc::new(AtomicUsize::new(0));
    let again = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let value = usize::try_from(signal).unwrap_or(usize::MAX);
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&again))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&again)))
            .and_then(|_| signal_hook::flag::register_usize(signal, Arc::clone(&got), value))
            .map_err(|e| CliError::usage(format!("cannot take over SIGINT and SIGTERM: {e}")))?;
    }
    Ok(got)
}

/// When a run ends: at the `--timeout` deadline, on SIGINT or SIGTERM, or when standard
/// output is gone.
struct Bound {
    deadline: Instant,
    signal: Arc<AtomicUsize>,
}

impl Bound {
    /// How long the next wait may be: the time left, at most a second (so a stuck reviewer,
    /// the deadline, a signal and a closed standard output are noticed within one).
    ///
    /// # Errors
    /// Why the run ends now: the deadline passed, a signal came, or standard output is gone
    /// ([`OutputGone`]).
    fn wait(&self) -> Result<Duration, CliError> {
        let signal = self.signal.load(Ordering::Relaxed);
        if signal != 0 {
            let name = match i32::try_from(signal) {
                Ok(signal_hook::consts::SIGINT) => "SIGINT",
                _ => "SIGTERM",
            };
            return Err(CliError::found(format!(
                "{name} received; stopped the reviewer and its process group"
            )));
        }
        if let Some(gone) = output_hung_up() {
            return Err(gone);
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        Ok(left.min(Duration::from_secs(1)))
    }
}

/// Standard output cannot take the run's lines any more: its reader is gone (`launch … |
/// head -n 1`: `EPIPE`, as Rust ignores `SIGPIPE`), or another write error (a full disk).
/// The run then stops the reviewer as on SIGTERM (its process group, its cgroup, its launch
/// directory) and ends with exit 2, an I/O error. (`outln!` would end the process at once,
/// and `std::process::exit` runs no destructor: the launch directory stayed, with the
/// client's credentials.)
#[derive(Debug)]
struct OutputGone(std::io::Error);

impl std::fmt::Display for OutputGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "standard output cannot be written ({}): stopped the reviewer and its process group \
             and removed its launch directory",
            self.0
        )
    }
}

impl std::error::Error for OutputGone {}

fn output_gone(e: std::io::Error) -> CliError {
    CliError::usage(OutputGone(e))
}

/// One line of the run to standard output, or [`OutputGone`].
fn say(line: std::fmt::Arguments<'_>) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(output_gone)
}

/// [`OutputGone`] when standard output is a pipe or socket whose reader is gone (`poll`
/// reports `POLLERR` or `POLLHUP` on it): noticed while the reviewer prints nothing, not
/// only at the next line. A terminal or a file reports neither.
fn output_hung_up() -> Option<CliError> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&zero)).ok()?;
    fds[0]
        .revents()
        .intersects(PollFlags::ERR | PollFlags::HUP)
        .then(|| output_gone(std::io::Error::from(std::io::ErrorKind::BrokenPipe)))
}

/// Whether the run ended because standard output is gone.
fn is_output_gone(end: &Result<ExitCode, CliError>) -> bool {
    matches!(end, Err(CliError::Usage(e)) if e.is::<OutputGone>())
}

fn compact(v: &serde_json::Value) -> String {
    printable(&v.to_string()).into_owned()
}

/// Stops the reviewer however its run ended (`end`: answered, exited, past --timeout, a
/// signal, an error, standard output gone), first printing the network door's log, a line
/// `door <line>` each (none without a door; not when standard output is gone): what the door
/// refused (a way out, a request over its budget) is the evidence a daemon's operator
/// needs, and it goes with the door. A failed stop is the run's error.
fn finish(reviewer: Reviewer, end: Result<ExitCode, CliError>) -> Result<ExitCode, CliError> {
    let end = if is_output_gone(&end) {
        end
    } else {
        door_lines(reviewer.door_log()).and(end)
    };
    reviewer.stop().map_err(CliError::found)?;
    end
}

fn run_acp(
    mut session: AcpSession,
    prompt: Option<&str>,
    bound: &Bound,
) -> Result<ExitCode, CliError> {
    let end = acp_turn(&mut session, prompt, bound);
    finish(Reviewer::Acp(session), end)
}

/// The ACP reviewer's run, up to the end that [`finish`] stops it at.
fn acp_turn(
    session: &mut AcpSession,
    prompt: Option<&str>,
    bound: &Bound,
) -> Result<ExitCode, CliError> {
    say(format_args!("session {}", printable(session.session_id())))?;
    let Some(prompt) = prompt else {
        say(format_args!("no prompt given: stopping after session/new"))?;
        return Ok(ExitCode::SUCCESS);
    };
    session.prompt(prompt).map_err(CliError::found)?;
    loop {
        let wait = bound.wait()?;
        let Some(event) = session.next_event(wait).map_err(CliError::found)? else {
            continue;
        };
        match event {
            AcpEvent::Update(params) => say(format_args!(
                "update {}",
                compact(params.get("update").unwrap_or(&params))
            ))?,
            AcpEvent::Notification { method, params } => say(format_args!(
                "notification {} {}",
                printable(&method),
                compact(&params)
            ))?,
            AcpEvent::PermissionDenied { tool_call } => {
                say(format_args!("permission refused {}", compact(&tool_call)))?;
            }
            AcpEvent::Refused { method } => {
                say(format_args!("refused request {}", printable(&method)))?;
            }
            AcpEvent::Output(line) => say(format_args!("stdout {}", printable(&line)))?,
            AcpEvent::Stderr(line) => say(format_args!("stderr {}", printable(&line)))?,
            AcpEvent::PromptDone { stop_reason, .. } => {
                say(format_args!("done {}", printable(&stop_reason)))?;
                return Ok(ExitCode::SUCCESS);
            }
            AcpEvent::Exited(status) => {
                say(format_args!("exited {}", shown_status(status)))?;
                return Err(CliError::found(
                    "the client exited before it answered the prompt",
                ));
            }
            _ => {}
        }
    }
}

fn door_lines(log: Vec<String>) -> Result<(), CliError> {
    for line in log {
        say(format_args!("door {}", printable(&line)))?;
    }
    Ok(())
}

fn timed_out() -> CliError {
    CliError::found("the reviewer ran past --timeout; stopped it and its process group")
}

fn shown_status(status: Option<std::process::ExitStatus>) -> String {
    status.map_or_else(|| "(status unknown)".to_owned(), |s| s.to_string())
}

fn run_terminal(mut session: TerminalSession, bound: &Bound) -> Result<ExitCode, CliError> {
    let end = terminal_turn(&mut session, bound);
    finish(Reviewer::Terminal(session), end)
}

/// The terminal reviewer's run, up to the end that [`finish`] stops it at.
fn terminal_turn(session: &mut TerminalSession, bound: &Bound) -> Result<ExitCode, CliError> {
    let mut lines = OutputLines::default();
    loop {
        let wait = bound.wait()?;
        let event = session.next_event(wait).map_err(CliError::found)?;
        match event {
            Some(TerminalEvent::Output(bytes)) => {
                for line in lines.feed(&bytes) {
                    say(format_args!("output {line}"))?;
                }
            }
            Some(TerminalEvent::Exited(status)) => {
                if let Some(line) = lines.rest() {
                    say(format_args!("output {line}"))?;
                }
                say(format_args!("exited {}", shown_status(status)))?;
                return match status {
                    Some(s) if s.success() => Ok(ExitCode::SUCCESS),
                    _ => Err(CliError::Found(None)),
                };
            }
            _ => {}
        }
    }
}

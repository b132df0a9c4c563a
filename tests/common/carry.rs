//! Carrying a plan out in a test as a daemon does: through the library's executor
//! (`kcap_mcp_registry::launch::launch_with_parent_env`, with the test's daemon environment as
//! the parent's), never by hand. [`AcpRun`] drives an ACP client (Gemini CLI, OpenCode,
//! Copilot CLI) until every wanted recorder listed its tools, optionally through one prompt;
//! [`start`] returns any reviewer (a terminal client's too) for a test's own loop;
//! [`terminal_plan`] is the plan of a stand-in client, [`probe_answers`] what its probes
//! printed, [`kernel_gives`] whether a test of the sandbox or the door can run here.
//!
//! What a test needs beyond what a daemon does goes into a wrapper script that stands as the
//! executor's client binary, so the plan itself is carried out unchanged:
//! [`super::etc::wrapper`] (the client in a private mount namespace whose `/etc` is
//! overlaid), [`delay_second_line`] (`session/new` held back), [`before_start`] (a shell step
//! just before the client starts, after the executor cleaned the worktree) and
//! [`subcommand`] (the plan's argv up to the prompt, then a subcommand of the client's, its
//! stdout to a file).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, Isolation, LaunchPlan, PLAN_VERSION, Sandbox};
use kcap_mcp_registry::launch::{
    self, AcpEvent, AcpSession, ExecError, Options, Reviewer, TerminalEvent, TerminalSession,
};

use super::records::{Known, Record, read_records};
use super::stand_in::sh_script;

/// How long a client run may take and how long to let it settle once it got where it should.
#[derive(Clone, Copy)]
pub struct Timing {
    /// From start to the last wanted server's `tools/list` (and the prompt's condition).
    pub timeout: Duration,
    /// How long to keep the client running after that, so that a server it would start late
    /// shows in the logs.
    pub settle: Duration,
}

/// An error and its sources, on one line.
pub use kcap_mcp_registry::text::error_chain as chain;

/// Carries `plan` out with the executor: `client_bin` started as the plan says, into its
/// launch directory, the plan's `env_inherit` looked up in `daemon_env`. Panics when the executor
/// refuses the plan or the start or handshake fails.
pub fn start(
    plan: &LaunchPlan,
    client_bin: &Path,
    daemon_env: &BTreeMap<String, String>,
    options: &Options,
) -> Reviewer {
    let lookup = |name: &str| daemon_env.get(name).map(OsString::from);
    launch::launch_with_parent_env(plan, client_bin, options, &lookup)
        .unwrap_or_else(|e| panic!("{}: the executor failed: {}", plan.client, chain(&e)))
}

/// `options` with what a test's launch reaches beyond the plan's boundary inside the
/// reviewer's sandbox (on by default), as a daemon adds its kcap binary
/// (`Options::with_sandbox_read_exec`): each of `exec` read and executable (a file in a
/// package: its installation, found as the executor finds the client's, so that a wrapper
/// script can run the real client; the directory of a test's recorders: all of them, so
/// that a hostile server the client wrongly starts does run and shows in the records), and
/// each of `write` writable (the records, a wrapper's output). Nothing else: the daemon's
/// `HOME`, the shared `/tmp` and the rest of the test's world stay outside.
pub fn reach(mut options: Options, exec: &[&Path], write: &[&Path]) -> Options {
    let path = std::env::var_os("PATH");
    for p in exec {
        if p.is_dir() {
            options = options.with_sandbox_read_exec(*p);
        } else {
            for dir in launch::sandbox::installation(p, path.as_deref()) {
                options = options.with_sandbox_read_exec(dir);
            }
        }
    }
    for p in write {
        options = options.with_sandbox_read_write(*p);
    }
    options
}

/// When a prompt's turn has gone far enough.
pub enum Until<'a> {
    /// The prompt was answered (a result or an error).
    Answered,
    /// This holds (for example: a stand-in model API got its first request).
    Holds(&'a dyn Fn() -> bool),
}

/// What an [`AcpRun`] showed.
#[derive(Debug)]
pub struct Seen {
    /// Every recorder's log, once the client was stopped.
    pub records: Vec<Record>,
    /// The prompt's answer: its `stopReason`, or the error it was answered with.
    pub answer: Option<String>,
    /// The end of the client's standard error.
    pub stderr: String,
}

/// One ACP launch: the plan carried out by the executor, then waited on.
pub struct AcpRun<'a> {
    pub plan: &'a LaunchPlan,
    pub launch_dir: &'a Path,
    /// The client, or a wrapper script that runs it.
    pub client_bin: &'a Path,
    /// The client behind `client_bin` (itself when there is no wrapper): its installation is
    /// added to the sandbox's boundary ([`reach`]), with the records and the directory of the
    /// injected servers' program.
    pub client: &'a Path,
    /// Whether the reviewer runs in the sandbox (the default); off only where the wrapper
    /// does what a confined process cannot (mount the `/etc` overlay, which Landlock
    /// forbids; plant files in the worktree after the executor cleaned it).
    pub confined: bool,
    /// What else the reviewer runs, added to the sandbox's boundary ([`reach`]): the
    /// injected servers' program when the plan has no ACP server list to find it in (Copilot
    /// CLI takes its servers in a file).
    pub executable: &'a [&'a Path],
    /// Directories the client itself, or a hook the test plants, writes outside its launch
    /// directory (Copilot CLI's package cache, which the plan points it to; a marks
    /// directory), added to the sandbox's boundary.
    pub writable: &'a [&'a Path],
    pub daemon_env: &'a BTreeMap<String, String>,
    /// The recorders' log directory.
    pub records: &'a Path,
    /// The servers (as [`Record::known`] shows them) that must list their tools.
    pub wanted: &'a BTreeSet<Known>,
    pub timing: Timing,
    /// A `session/prompt` text to send once the wanted servers are up, and how far its turn
    /// must go.
    pub prompt: Option<(&'a str, Until<'a>)>,
}

impl AcpRun<'_> {
    /// Starts the client with the executor (`initialize`, `session/new`), waits until every
    /// wanted server listed its tools, sends the prompt and waits for its condition, lets the
    /// client settle, stops it ([`AcpSession::stop`]: its process group, the launch
    /// directory) and returns what the recorders saw. Panics after `timing.timeout`.
    pub fn carry_out(&self) -> Seen {
        let _slot = Slot::take();
        let started = Instant::now();
        let options = Options::default()
            .with_handshake_timeout(self.timing.timeout)
            .with_die_with_parent(true);
        let options = if self.confined {
            let servers: Vec<PathBuf> = self
                .plan
                .session_new
                .iter()
                .flat_map(|s| &s.mcp_servers)
                .filter_map(|s| Path::new(&s.command).parent().map(Path::to_owned))
                .collect();
            let mut exec: Vec<&Path> = servers.iter().map(PathBuf::as_path).collect();
            exec.extend([self.client_bin, self.client]);
            exec.extend(self.executable);
            let mut write = vec![self.records];
            write.extend(self.writable);
            reach(options, &exec, &write)
        } else {
            options.with_confinement(launch::sandbox::Confinement::Off)
        };
        let reviewer = start(self.plan, self.client_bin, self.daemon_env, &options);
        let Reviewer::Acp(session) = reviewer else {
            panic!(
                "{}: the plan does not start an ACP client",
                self.plan.client
            );
        };
        let mut w = Waiter {
            session,
            deadline: started + self.timing.timeout,
            prompt: None,
            answer: None,
            exited: false,
        };
        let listed = || {
            let listed: BTreeSet<Known> = read_records(self.records)
                .iter()
                .filter(|r| r.listed_tools)
                .map(Record::known)
                .collect();
            self.wanted.is_subset(&listed)
        };
        w.until(
            "every wanted server to list its tools",
            self.records,
            &|_| listed(),
        );
        if let Some((text, until)) = &self.prompt {
            let id = w
                .session
                .prompt(text)
                .unwrap_or_else(|e| panic!("{}: session/prompt: {}", self.plan.client, chain(&e)));
            w.prompt = Some(id);
            match until {
                Until::Answered => w.until("the prompt's answer", self.records, &|a| a),
                Until::Holds(done) => {
                    w.until("the prompt's condition", self.records, &|_| done());
                }
            }
        }
        w.settle(self.timing.settle);
        let stderr = w.session.stderr_tail();
        w.session
            .stop()
            .unwrap_or_else(|e| panic!("{}: stop: {}", self.plan.client, chain(&e)));
        Seen {
            records: read_records(self.records),
            answer: w.answer,
            stderr,
        }
    }
}

/// How many ACP clients a test binary runs at once: each parses tens of megabytes of
/// JavaScript at start, and more at once on a small machine (`.ci/run` runs 8 test threads
/// on 2 cores) only makes each slower, beyond its timeout.
pub const CLIENTS_AT_ONCE: usize = 3;

static RUNNING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// A place among the [`CLIENTS_AT_ONCE`] running clients, held while one runs.
struct Slot;

impl Slot {
    fn take() -> Slot {
        let (count, freed) = &RUNNING;
        let mut n = count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while *n >= CLIENTS_AT_ONCE {
            n = freed
                .wait(n)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *n += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let (count, freed) = &RUNNING;
        *count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) -= 1;
        freed.notify_one();
    }
}

/// An ACP session read until something holds.
struct Waiter {
    session: AcpSession,
    deadline: Instant,
    /// The prompt whose answer ends an [`Until::Answered`] wait.
    prompt: Option<u64>,
    answer: Option<String>,
    exited: bool,
}

impl Waiter {
    /// Reads the session's events (answering the client's requests) until `done` holds (it
    /// is told whether the prompt was answered); panics at the deadline or when the client
    /// exits first.
    fn until(&mut self, what: &str, records: &Path, done: &dyn Fn(bool) -> bool) {
        while !done(self.answer.is_some()) {
            if Instant::now() > self.deadline || self.exited {
                let stderr = self.session.stderr_tail();
                panic!(
                    "{}: waiting for {what}; records {:?}; stderr:\n{stderr}",
                    if self.exited {
                        "the client exited"
                    } else {
                        "timed out"
                    },
                    read_records(records)
                );
            }
            self.next(Duration::from_millis(100));
        }
    }

    /// Reads events for `settle` (the client exiting ends nothing here).
    fn settle(&mut self, settle: Duration) {
        let end = Instant::now() + settle;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            if self.exited {
                std::thread::sleep(left);
                return;
            }
            self.next(left.min(Duration::from_millis(100)));
        }
    }

    fn next(&mut self, timeout: Duration) {
        match self.session.next_event(timeout) {
            Ok(Some(AcpEvent::PromptDone { id, stop_reason })) if Some(id) == self.prompt => {
                self.answer = Some(stop_reason);
            }
            Ok(Some(AcpEvent::Exited(_))) => self.exited = true,
            Ok(_) => {}
            Err(e @ ExecError::Rpc { .. }) if self.prompt.is_some() => {
                self.answer = Some(format!("error: {}", chain(&e)));
            }
            Err(e) => panic!("reading the client's events: {}", chain(&e)),
        }
    }
}

/// A terminal client (Codex) started by the executor, its output kept.
pub struct Terminal {
    pub session: TerminalSession,
    /// Everything the client wrote to its terminal so far.
    pub output: Vec<u8>,
    /// The client exited (its status, when reaped).
    pub exited: Option<Option<std::process::ExitStatus>>,
}

impl Terminal {
    /// Carries `plan` out with the executor ([`start`]); panics unless it starts a terminal
    /// client.
    pub fn start(
        plan: &LaunchPlan,
        client_bin: &Path,
        daemon_env: &BTreeMap<String, String>,
        options: &Options,
    ) -> Terminal {
        match start(plan, client_bin, daemon_env, options) {
            Reviewer::Terminal(session) => Terminal {
                session,
                output: Vec::new(),
                exited: None,
            },
            Reviewer::Acp(_) => panic!("{}: the plan starts an ACP client", plan.client),
        }
    }

    /// Reads the terminal for up to `timeout`; panics when the executor stops the client
    /// (a known dialog, with the terminal's text).
    pub fn read(&mut self, timeout: Duration) {
        if self.exited.is_some() {
            std::thread::sleep(timeout);
            return;
        }
        match self.session.next_event(timeout) {
            Ok(Some(TerminalEvent::Output(bytes))) => self.output.extend_from_slice(&bytes),
            Ok(Some(TerminalEvent::Exited(status))) => self.exited = Some(status),
            Ok(_) => {}
            // A client that exits before its typed prompt went in (a wrapper that runs
            // another subcommand, a client that refuses to start): its exit is what the
            // test reads.
            Err(launch::ExecError::Exited {
                step: launch::Step::TypePrompt,
                status,
                ..
            }) => self.exited = Some(status),
            Err(e) => panic!(
                "the terminal client: {}; its terminal:\n{}",
                chain(&e),
                String::from_utf8_lossy(&self.output)
            ),
        }
    }

    /// Reads the terminal until the client exits; panics after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the terminal client did not exit within {} s; its terminal:\n{}",
                timeout.as_secs(),
                String::from_utf8_lossy(&self.output)
            );
            self.read(Duration::from_millis(100));
        }
    }

    /// Stops the client and its process group and removes the launch directory.
    pub fn stop(self) {
        self.session
            .stop()
            .unwrap_or_else(|e| panic!("stopping the terminal client: {}", chain(&e)));
    }
}

/// Single-quotes `s` for `sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn path_str(p: &Path) -> String {
    sh_quote(p.to_str().expect("a UTF-8 path"))
}

/// A wrapper `dir/name` that passes the first line of its stdin (ACP `initialize`) to
/// `client` at once and the rest (`session/new` on) after `delay`.
pub fn delay_second_line(dir: &Path, name: &str, delay: Duration, client: &Path) -> PathBuf {
    sh_script(
        dir,
        name,
        &format!(
            "{{ IFS= read -r first; printf '%s\\n' \"$first\"; /usr/bin/sleep {}; exec /usr/bin/cat; }} \
             | {} \"$@\"",
            delay.as_secs_f64(),
            path_str(client)
        ),
    )
}

/// A wrapper `dir/name` that runs the shell step `step` and then `client` with its
/// arguments: for something a test does after the executor cleaned the worktree and just
/// before the client starts. The `PWD` the shell exports is not passed on: the client gets
/// exactly the plan's environment.
pub fn before_start(dir: &Path, name: &str, step: &str, client: &Path) -> PathBuf {
    sh_script(
        dir,
        name,
        &format!(
            "{step}\nexec /usr/bin/env -u PWD {} \"$@\"",
            path_str(client)
        ),
    )
}

/// A wrapper `dir/name` that runs `client` with its arguments up to the first `--` (the
/// reviewer's prompt and what follows are dropped), then `tail`, its stdout to `out` and its
/// stderr to `out` with `.err` appended.
pub fn subcommand(dir: &Path, name: &str, client: &Path, tail: &[&str], out: &Path) -> PathBuf {
    let tail: Vec<String> = tail.iter().map(|a| sh_quote(a)).collect();
    let err = PathBuf::from(format!("{}.err", out.display()));
    sh_script(
        dir,
        name,
        &format!(
            "n=$#; i=0; seen=\nwhile [ $i -lt $n ]; do\n  a=$1; shift; i=$((i+1))\n  \
             if [ -z \"$seen\" ] && [ \"$a\" = -- ]; then seen=1; fi\n  \
             [ -z \"$seen\" ] && set -- \"$@\" \"$a\"\ndone\n\
             exec {} \"$@\" {} >{} 2>{} </dev/null",
            path_str(client),
            tail.join(" "),
            path_str(out),
            path_str(&err)
        ),
    )
}

/// The terminal reviewer's output until it exits, and its exit status; panics after `bound`.
pub fn until_exit(
    reviewer: &mut Reviewer,
    bound: Duration,
) -> (String, Option<std::process::ExitStatus>) {
    let Reviewer::Terminal(session) = reviewer else {
        panic!("not a terminal reviewer")
    };
    let deadline = Instant::now() + bound;
    let mut output = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "the client did not exit within {bound:?}: {}",
            String::from_utf8_lossy(&output)
        );
        match session.next_event(Duration::from_secs(1)) {
            Ok(Some(TerminalEvent::Output(bytes))) => output.extend(bytes),
            Ok(Some(TerminalEvent::Exited(status))) => {
                return (String::from_utf8_lossy(&output).into_owned(), status);
            }
            Ok(_) => {}
            Err(e) => panic!("{e}: {}", String::from_utf8_lossy(&output)),
        }
    }
}

/// Reads the terminal reviewer `session`'s events until `done` (asked before each read)
/// gives a value, keeping what it printed; panics naming `client` and the screen when it
/// exits, fails, or `bound` passes from `started` first (`waiting_for` says what for).
pub fn drive_terminal<T>(
    session: &mut TerminalSession,
    client: Client,
    (started, bound): (Instant, Duration),
    waiting_for: &str,
    mut done: impl FnMut() -> Option<T>,
) -> T {
    let mut screen = Vec::new();
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(
            started.elapsed() < bound,
            "{client}: {waiting_for}; terminal:\n{}",
            String::from_utf8_lossy(&screen)
        );
        match session.next_event(Duration::from_millis(200)) {
            Ok(Some(TerminalEvent::Output(bytes))) => screen.extend(bytes),
            Ok(Some(TerminalEvent::Exited(status))) => panic!(
                "{client} exited: {status:?}\n{}",
                String::from_utf8_lossy(&screen)
            ),
            Ok(_) => {}
            Err(e) => panic!("{client}: {e}"),
        }
    }
}

/// A terminal plan (no `session/new`, no MCP server) for a stand-in client in `launch_dir`,
/// as `client`'s plan (the client only names the reviewer in messages): `HOME` the launch
/// directory's `home`, the one directory made, no worktree, nothing inherited, no file, the
/// sandbox of a launch without a worktree, no door. A test sets what it needs as `LaunchPlan { …, ..terminal_plan(client, launch_dir) }`.
pub fn terminal_plan(client: Client, launch_dir: &Path) -> LaunchPlan {
    let dir = launch_dir.display();
    LaunchPlan {
        version: PLAN_VERSION,
        client,
        isolation: Isolation::Verified {
            proven_on: Vec::new(),
        },
        cwd: None,
        launch_dir: dir.to_string(),
        argv: vec![],
        env: vec![EnvVar::new("HOME", format!("{dir}/home"))],
        env_inherit: vec![],
        dirs: vec!["home".into()],
        files: vec![],
        worktree_remove: vec![],
        pr_config: None,
        session_new: None,
        typed_prompt: None,
        servers_ready: None,
        dialogs: Vec::new(),
        unasked: Vec::new(),
        servers: vec![],
        sandbox: Sandbox::new(&dir.to_string(), None),
        door: None,
    }
}

/// [`terminal_plan`] for a client started in the worktree `tree`: `HOME` and `TMPDIR` the
/// launch directory's `home` and `tmp` (both made), `PATH` the given one, the sandbox of a
/// launch in `tree`. A test adds what it needs as with [`terminal_plan`].
pub fn worktree_plan(client: Client, tree: &Path, launch_dir: &Path, path: &str) -> LaunchPlan {
    let dir = launch_dir.display();
    LaunchPlan {
        cwd: Some(tree.display().to_string()),
        env: vec![
            EnvVar::new("HOME", format!("{dir}/home")),
            EnvVar::new("TMPDIR", format!("{dir}/tmp")),
            EnvVar::new("PATH", path),
        ],
        dirs: vec!["home".into(), "tmp".into()],
        sandbox: Sandbox::new(&dir.to_string(), Some(&tree.display().to_string())),
        ..terminal_plan(client, launch_dir)
    }
}

/// Each probe's answer in a stand-in's `output`: its `name=yes` and `name=no` lines (as the
/// CLI prints them too: `output name=yes`); other lines are passed over.
pub fn probe_answers(output: &str) -> BTreeMap<String, bool> {
    output
        .lines()
        .filter_map(|l| l.trim().trim_start_matches("output ").split_once('='))
        .filter_map(|(k, v)| match v {
            "yes" => Some((k.to_owned(), true)),
            "no" => Some((k.to_owned(), false)),
            _ => None,
        })
        .collect()
}

/// Whether this kernel gives a part of the executor: `missing` is what it lacks (the part's
/// own `missing()`). When it lacks something the test is ignored, saying why, unless
/// `require_var` is set in the environment, which makes it fail.
pub fn kernel_gives(missing: Option<String>, require_var: &str) -> bool {
    match missing {
        None => true,
        Some(missing) => {
            assert!(
                std::env::var_os(require_var).is_none(),
                "{require_var} is set and this kernel lacks {missing}"
            );
            eprintln!("ignored: this kernel lacks {missing}");
            false
        }
    }
}

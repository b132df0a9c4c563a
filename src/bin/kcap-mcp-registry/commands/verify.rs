//! `kcap-mcp-registry verify <client> --client-bin PATH`: run the installed client once per
//! scenario under a hostile configuration and report whether exactly the injected MCP
//! servers started (`kcap_mcp_registry::ops::verify`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::spec::Proof;
use kcap_mcp_registry::clients::version::ClientVersion;
use kcap_mcp_registry::ops::verify::{self, Report, Request, Scenario, Verdict, record};
use kcap_mcp_registry::text::ShownPath;

use super::{CliError, SandboxPolicy, chain};
use crate::write_stdout;

/// The subcommand's `--help` epilogue.
pub(crate) const HELP: &str = "\
Runs the installed client offline in a throwaway root (under $TMPDIR, removed afterwards): a
daemon user whose HOME, XDG directories and environment declare MCP servers (named like the
injected ones and otherwise) and hooks, a reviewed worktree and its parent declaring more,
and the model API and every proxy at a dead local port (127.0.0.1:9). It renders the real
launch plan with this binary as the kcap binary (started as `kcap-verify-recorder`, it records
each server's argv, environment and working directory), carries it out as `launch` does,
waits until every injected server listed its tools, lets the client run 3 s more, stops it,
and checks:
  injected-started       every injected server started with exactly its argv and KCAP_*
                         variables and listed its tools
  no-user-server         no server or hook of the daemon user's configuration ran
  no-project-server      no server or hook of the worktree's (or its parent's) ran
  no-environment-server  none of the files or values the daemon's environment names ran
  argv-exact             no other server started
  env-exact              no injected server had other KCAP_* variables
  no-daemon-env          no server saw a value of the daemon's environment the plan does
                         not pass on
  server-cwd             the servers ran in the worktree (all but Claude Code)
Each scenario is one client run: `direct` (the result channel and kcap-review) and
`brokered-borrowed` (a capability URL on the result channel, and kcap-review-context).
Claude Code's plan, carried out in a pseudo-terminal, stops at Claude Code's first-run
screens (reported as could not run). Details: docs/cli-verify.md.

Exit codes: 0 every check holds; 1 a check failed (the report names the server and the file
that declared it); 2 verify could not run (a binary missing, the plan refused, the client
failed to start or answer, or not every injected server listed its tools within --timeout;
the step is named).

Examples:
  kcap-mcp-registry verify gemini --client-bin \"$(command -v gemini)\"
  kcap-mcp-registry verify copilot --client-bin ~/.local/bin/copilot --cache-dir /var/cache/kcap --format json";

/// The clients `verify` runs: those whose rooms are proven on the real client
/// ([`Proof::RealClient`]), from the one list of clients.
fn verifiable_client() -> impl clap::builder::TypedValueParser<Value = Client> {
    use clap::builder::TypedValueParser as _;
    let names = Client::ALL
        .into_iter()
        .filter(|c| matches!(c.spec().proof, Proof::RealClient { .. }))
        .map(Client::name);
    clap::builder::PossibleValuesParser::new(names)
        .try_map(|name: String| Client::from_name(&name).ok_or("not a client"))
}

/// Which launches to verify.
#[derive(Clone, Copy, ValueEnum)]
enum ScenarioArg {
    /// Direct result delivery, the reviewer's own snapshot.
    Direct,
    /// A brokered result and a borrowed snapshot.
    BrokeredBorrowed,
    /// Both, one client run each.
    All,
}

/// Report format.
#[derive(Clone, Copy, ValueEnum)]
enum VerifyFormat {
    /// One line per check.
    Human,
    /// A JSON array, one report per scenario.
    Json,
}

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The client to verify.
    #[arg(value_parser = verifiable_client())]
    client: Client,
    /// The client binary to run (required).
    #[arg(long, value_name = "PATH")]
    client_bin: PathBuf,
    /// Which launches to verify.
    #[arg(long, value_enum, default_value_t = ScenarioArg::All)]
    scenario: ScenarioArg,
    /// Copilot CLI's package cache (default: one in the throwaway root, which the first run
    /// fills with some 235 MB).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// How long the client may take until every injected server listed its tools.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    timeout: u64,
    /// Keep the throwaway root (its path is printed) to look at what the client wrote.
    #[arg(long)]
    keep_root: bool,
    /// The client's sandbox (Landlock), as `launch --sandbox`; unless `off`, it is judged:
    /// every attack a server tries from inside the reviewer must be denied (check `sandbox`).
    #[arg(long, value_name = "POLICY", default_value = "best-effort")]
    sandbox: SandboxPolicy,
    /// Report format.
    #[arg(long, value_enum, default_value_t = VerifyFormat::Human)]
    format: VerifyFormat,
}

pub(crate) fn verify(args: VerifyArgs) -> Result<ExitCode, CliError> {
    let client = args.client;
    let scenarios: &[Scenario] = match args.scenario {
        ScenarioArg::Direct => &[Scenario::Direct],
        ScenarioArg::BrokeredBorrowed => &[Scenario::BrokeredBorrowed],
        ScenarioArg::All => &Scenario::ALL,
    };
    let program = std::env::current_exe().map_err(|e| {
        CliError::usage(format!(
            "cannot find this program's own path (the recorder runs it): {e}"
        ))
    })?;
    let mut reports: Vec<Report> = Vec::new();
    for &scenario in scenarios {
        let request = Request::new(client, args.client_bin.clone(), program.clone())
            .with_scenario(scenario)
            .with_cache_dir(args.cache_dir.clone())
            .with_bounds(Duration::from_secs(args.timeout), Duration::from_secs(3))
            .with_keep_root(args.keep_root)
            .with_confinement(args.sandbox.into());
        let bench = verify::prepare(&request).map_err(|e| could_not_run(client, scenario, e))?;
        if args.keep_root {
            errln!(
                "verify {client} ({}): throwaway root {}",
                scenario.name(),
                bench.root().display()
            );
        }
        let report = bench
            .run()
            .map_err(|e| could_not_run(client, scenario, e))?;
        if let VerifyFormat::Human = args.format {
            write_stdout(&report.human());
        }
        reports.push(report);
    }
    if let VerifyFormat::Json = args.format {
        let all: Vec<serde_json::Value> = reports.iter().map(Report::to_json).collect();
        let text = serde_json::to_string_pretty(&all).unwrap_or_default();
        write_stdout(&format!("{text}\n"));
    }
    let verdicts: Vec<Verdict> = reports.iter().map(Report::verdict).collect();
    if scenarios.len() == Scenario::ALL.len() && verdicts.iter().all(|v| *v == Verdict::Holds) {
        record_pass(client, &args.client_bin, &reports);
    }
    Ok(if verdicts.contains(&Verdict::Fails) {
        ExitCode::from(1)
    } else if verdicts.iter().any(|v| matches!(v, Verdict::Incomplete(_))) {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// Records that `verify` held in every scenario for the binary and version it ran
/// (`ops::verify::record`), saying where; a record that cannot be written is a warning.
fn record_pass(client: Client, bin: &std::path::Path, reports: &[Report]) {
    let result = (|| {
        let line = match reports.first().map(|r| &r.client_version) {
            Some(Ok(line)) => line.clone(),
            Some(Err(e)) => return Err(format!("its version could not be read: {e}")),
            None => return Err("no run".to_owned()),
        };
        let version = ClientVersion::new(line);
        let binary = record::Binary::identify(bin).map_err(|e| chain(&e))?;
        let dir = record::default_dir().map_err(|e| chain(&e))?;
        let file = record::record(&dir, client, &binary, &version).map_err(|e| chain(&e))?;
        Ok((version, binary, file))
    })();
    match result {
        Ok((version, binary, file)) => errln!(
            "verify {client}: recorded the pass of {} {version} ({}, sha256 {}) in {}: \
             `launch --strict` accepts this binary at this version",
            client.display_name(),
            ShownPath(&binary.path),
            &binary.sha256[..16],
            ShownPath(&file)
        ),
        Err(why) => errln!("warning: verify {client}: the pass is not recorded: {why}"),
    }
}

/// An error before the client ran: exit 2, naming the client, the scenario and the step.
fn could_not_run(client: Client, scenario: Scenario, e: verify::VerifyError) -> CliError {
    #[derive(Debug)]
    struct Context(String, verify::VerifyError);
    impl std::fmt::Display for Context {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }
    impl std::error::Error for Context {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
    }
    CliError::usage(Context(
        format!("verify {client} ({}): could not run", scenario.name()),
        e,
    ))
}

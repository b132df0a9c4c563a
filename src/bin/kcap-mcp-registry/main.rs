//! `kcap-mcp-registry`: check, list, render, launch and export the kcap MCP server registry.
//!
//! This file parses the command line and dispatches; each command is one file of
//! `commands/` (named as the command: arguments, output, exit code), and every rule,
//! comparison and format lives in the library (`schema`, `report`, `clients`, `launch`, and
//! the operations behind the commands, `ops`).
//!
//! Exit codes: 0 success; 1 the command ran and found a problem (rule violations, drift, a
//! security-relevant diff with `--fail-on security`, a strict rejection, a render refusal);
//! 2 usage errors and inputs that cannot be read or understood ([`CliError`]).

// Issue 16: functions stay short, or say why in an `#[allow(…, reason)]`.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::io::Write as _;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// `print!` that never panics: see [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::write_stdout(&format!($($arg)*)) };
}

/// `println!` that never panics: see [`write_stdout`].
macro_rules! outln {
    ($($arg:tt)*) => { $crate::write_stdout(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that never panics: a closed or full standard error loses the text, nothing more.
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), format!($($arg)*).as_bytes());
    }};
}

/// `eprintln!` that never panics (see [`err!`]).
macro_rules! errln {
    ($($arg:tt)*) => { err!("{}\n", format_args!($($arg)*)) };
}

// After the output macros, which it uses.
mod commands;

use commands::{
    CliError, RegistrySource, chain, check, diff, doctor, export, install, launch, list, render,
    verify,
};

/// Writes `text` to standard output. A closed pipe (`… | head`) ends the process quietly
/// and any other write error (a full disk) with a message, both with exit code 2 (I/O error).
fn write_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            errln!("error: cannot write to standard output: {e}");
        }
        std::process::exit(2);
    }
}

const ROOT_HELP: &str = "\
Exit codes: 0 success; 1 a problem was found (rule violations, drift, a security-relevant
diff with --fail-on security, a strict rejection, a refused render); 2 usage or input error
(a file, directory or binary given cannot be read, run or understood).

Example:
  kcap-mcp-registry check registry --format github";

/// `--version`: the crate version and the registry compiled in, by its digest (the first
/// 12 hex digits of `list`'s), marked when it is not the crate's own (a bootstrap build).
fn version() -> &'static str {
    use kcap_mcp_registry::registry::{BUNDLED, DIGEST, SOURCE_DIR};
    let short = DIGEST.get(..12).unwrap_or(DIGEST);
    let text = if BUNDLED {
        format!("{} (registry {short})", env!("CARGO_PKG_VERSION"))
    } else {
        format!(
            "{} (registry {short}, bootstrap: built from {} with KCAP_MCP_REGISTRY_DIR; render \
             and launch need --registry DIR)",
            env!("CARGO_PKG_VERSION"),
            kcap_mcp_registry::text::ShownPath(std::path::Path::new(SOURCE_DIR))
        )
    };
    // Once per process, for clap's `&'static str`.
    Box::leak(text.into_boxed_str())
}

#[derive(Parser)]
#[command(
    name = "kcap-mcp-registry",
    about = "Check, inspect, render and export the kcap MCP server registry",
    after_help = ROOT_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing would only complicate the clap derive"
)]
enum Command {
    /// Validate a registry directory with the rules build.rs applies, and compare it with
    /// client registration files.
    #[command(after_help = "\
Without DIR, the `registry` directory of the current directory or of the nearest parent
that has one is checked (as cargo finds Cargo.toml).

Examples:
  kcap-mcp-registry check
  kcap-mcp-registry check registry --format github
  kcap-mcp-registry check --against .mcp.json --against .codex/config.toml")]
    Check(check::CheckArgs),
    /// Print the registry (the compiled-in one, or --registry DIR) and its digest.
    #[command(after_help = "\
Table columns: ID; FLAGS, the registry keys that are set: starts_flows, read_only,
needs_project_cwd, and injection_only for `allowlistable = false` (`-` for none); TOOLS,
`SAFE/TOTAL`: how many of the server's [[tools]] are unattended_safe, of how many; ARGS, the
argv after the kcap binary; DESCRIPTION.

Example:
  kcap-mcp-registry list --format json")]
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = list::ListFormat::Table)]
        format: list::ListFormat,
        #[command(flatten)]
        source: RegistrySource,
    },
    /// Resolve an allowlist against the registry, as a launch would.
    #[command(after_help = "\
Prints one line per entry: its canonical id, `skipped (KIND): …` or, with --strict,
`rejected (REASON): …`; an unknown name gets a did-you-mean suggestion.

Example:
  kcap-mcp-registry resolve --allowlist ' KCAP-Review ',kcap-flows,kcap-memory --strict")]
    Resolve {
        /// MCP allowlist entries, comma-separated (repeatable).
        #[arg(
            long,
            required = true,
            value_name = "A,B,…",
            value_delimiter = ',',
            allow_hyphen_values = true
        )]
        allowlist: Vec<String>,
        /// Use the strict policy (unattended reviewers): exit 1 when any entry is rejected.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        source: RegistrySource,
    },
    /// Print the argv a reviewer would be launched with (after the client binary), or its
    /// whole launch plan (`--format plan`).
    #[command(
        subcommand,
        after_help = "\
Example:
  kcap-mcp-registry render claude --agent-id a1 --launch-dir /run/kcap/l1 --allowlist kcap-review --server-url http://127.0.0.1:5100 --kcap-bin /usr/local/bin/kcap --format shell"
    )]
    Render(Box<render::RenderFor>),
    /// Generate files from the registry.
    #[command(
        subcommand,
        after_help = "\
Example:
  kcap-mcp-registry export claude-mcp-json > .mcp.json"
    )]
    Export(export::ExportWhat),
    /// Register the registry's servers in a client's own config file, keeping everything
    /// else in it as it is.
    #[command(after_help = "\
Adds missing entries, rewrites entries kcap wrote earlier, adopts identical ones, and leaves
an entry that differs and that kcap did not write alone (reported, exit 1). Which entries kcap
wrote is recorded beside the config, in <file name>.kcap-ledger.json.

Example:
  kcap-mcp-registry install --client codex --kcap-bin /usr/local/bin/kcap --dry-run")]
    Install(install::InstallArgs),
    /// Remove the entries `install` wrote from a client's config file (edited ones are kept).
    #[command(after_help = "\
Removes the entries the ledger records as kcap's and unchanged since, and entries no ledger
records that are identical to what install registers with the same --kcap-bin and
--server-url (a deleted ledger). An entry named like a registry server that differs and is
not recorded is left in place and reported (`left …`). An entry kcap wrote and that was
edited since is kept (exit 1).

Example:
  kcap-mcp-registry uninstall --client gemini --dry-run")]
    Uninstall(install::InstallArgs),
    /// Find what is wrong with kcap's registrations in every client's config file.
    #[command(after_help = doctor::help())]
    Doctor(doctor::DoctorArgs),
    /// Show what changes between two registries (e.g. a pull request's base and head),
    /// security-relevant flips first.
    #[command(
        override_usage = "kcap-mcp-registry diff <OLD_DIR> <NEW_DIR> [OPTIONS]\n       \
                          kcap-mcp-registry diff --registry <DIR> [OPTIONS]",
        after_help = "\
With --registry DIR alone, the compiled-in registry is OLD and DIR is NEW.

Security-relevant changes (--fail-on security): any change of args; a starts_flows,
allowlistable, inject, read_only or driver_stamp flip; a new server that starts flows, is
read_only or is injected; a tool becoming unattended_safe; an env source becoming agent_id.

A reviewer accepts a security-relevant change with an entry in an accepted-changes file
(--accepted FILE; docs/ci.md has its format): `diff` prints the entry to add for each change
it does not find accepted.

Examples:
  kcap-mcp-registry diff base/registry registry --fail-on security
  kcap-mcp-registry diff base/registry registry --fail-on security --accepted registry-accepted.toml"
    )]
    Diff(diff::DiffArgs),
    /// Carry a launch plan out: start a reviewer exactly as the daemon would, and stream
    /// what it does.
    #[command(after_help = launch::HELP)]
    Launch(Box<launch::LaunchArgs>),
    /// Prove on this machine that a reviewer on the installed client starts exactly the
    /// injected MCP servers, under a hostile user and project configuration.
    #[command(after_help = verify::HELP)]
    Verify(verify::VerifyArgs),
}

fn main() -> ExitCode {
    // Started as `verify`'s recorder MCP server (by that name), not as the command line.
    if let Some(code) = kcap_mcp_registry::ops::verify::run_if_recorder() {
        return code;
    }
    let matches = Cli::command().version(version()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match run(cli) {
        Ok(code) => code,
        Err(CliError::Usage(e)) => {
            errln!("error: {}", chain(&*e));
            ExitCode::from(2)
        }
        Err(CliError::Found(e)) => {
            if let Some(e) = e {
                errln!("error: {}", chain(&*e));
            }
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.command {
        Command::Check(args) => check::check(args),
        Command::List { format, source } => list::list(format, &source),
        Command::Resolve {
            allowlist,
            strict,
            source,
        } => list::resolve(&allowlist, strict, &source),
        Command::Render(client) => render::render(*client),
        Command::Export(what) => export::export(what),
        Command::Install(args) => install::install(args),
        Command::Uninstall(args) => install::uninstall(args),
        Command::Doctor(args) => doctor::doctor(args),
        Command::Launch(args) => launch::launch(*args),
        Command::Verify(args) => verify::verify(args),
        Command::Diff(args) => diff::diff(&args),
    }
}

//! `kcap-mcp-registry`: check, inspect, render and export the kcap MCP server registry.
//!
//! This file only parses arguments and prints; every rule, comparison and format lives in
//! the library (`schema`, `report`, `drift`, `export`, `diff`, `inspect`, `preview`,
//! `install`, `doctor`).
//!
//! Exit codes: 0 success; 1 the command ran and found a problem (rule violations, drift, a
//! security-relevant diff with `--fail-on security`, a strict rejection, a render refusal);
//! 2 usage errors and inputs that cannot be read or understood ([`CliError`]).

use std::error::Error;
use std::io::IsTerminal;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kcap_mcp_registry::clients::claude::preflight::ClaudeConfigSources;
use kcap_mcp_registry::clients::plan::{EnvVar, Isolation, LaunchId, LaunchPlan};
use kcap_mcp_registry::clients::root::Credentials;
use kcap_mcp_registry::clients::{Client, claude, codex, codex::registration::codex_toml};
use kcap_mcp_registry::clients::{antigravity, cursor, kiro};
use kcap_mcp_registry::clients::{copilot, gemini, opencode};
use kcap_mcp_registry::diagnostic;
use kcap_mcp_registry::doctor::{self, ClientFile};
use kcap_mcp_registry::drift::{self, AgainstOptions, Drift};
use kcap_mcp_registry::export::{self, DEFAULT_COMMAND, RegistrationOptions};
use kcap_mcp_registry::preview::{self, ArgvFormat, LaunchOverrides};
use kcap_mcp_registry::report::{self, Finding};
use kcap_mcp_registry::text::{ShownPath, printable};
use kcap_mcp_registry::{
    CheckError, LaunchContext, Policy, Registry, RegistryEntry, Resolution, inspect,
};

/// `print!` that never panics: see [`write_stdout`].
macro_rules! out {
    ($($arg:tt)*) => { write_stdout(&format!($($arg)*)) };
}

/// `println!` that never panics: see [`write_stdout`].
macro_rules! outln {
    ($($arg:tt)*) => { write_stdout(&format!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that never panics: a closed or full standard error loses the text, nothing more.
macro_rules! err {
    ($($arg:tt)*) => {{
        let _ = std::io::stderr().lock().write_all(format!($($arg)*).as_bytes());
    }};
}

/// `eprintln!` that never panics (see [`err!`]).
macro_rules! errln {
    ($($arg:tt)*) => { err!("{}\n", format_args!($($arg)*)) };
}

// After the output macros, which it uses.
mod doctor_cmd;
mod launch_cmd;
mod verify_cmd;

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

#[derive(Parser)]
#[command(
    name = "kcap-mcp-registry",
    version,
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
    Check(CheckArgs),
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
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
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
  kcap-mcp-registry render claude --agent-id a1 --launch-dir /run/kcap/l1 --allowlist kcap-review --format shell"
    )]
    Render(Box<RenderClient>),
    /// Generate files from the registry.
    #[command(
        subcommand,
        after_help = "\
Example:
  kcap-mcp-registry export claude-mcp-json > .mcp.json"
    )]
    Export(ExportWhat),
    /// Register the registry's servers in a client's own config file, keeping everything
    /// else in it as it is.
    #[command(after_help = "\
Adds missing entries, rewrites entries kcap wrote earlier, adopts identical ones, and leaves
an entry that differs and that kcap did not write alone (reported, exit 1). Which entries kcap
wrote is recorded beside the config, in <file name>.kcap-ledger.json.

Example:
  kcap-mcp-registry install --client codex --kcap-bin /usr/local/bin/kcap --dry-run")]
    Install(InstallArgs),
    /// Remove the entries `install` wrote from a client's config file (edited ones are kept).
    #[command(after_help = "\
Removes the entries the ledger records as kcap's and unchanged since, and entries no ledger
records that are identical to what install registers with the same --kcap-bin and
--server-url (a deleted ledger). An entry named like a registry server that differs and is
not recorded is left in place and reported (`left …`). An entry kcap wrote and that was
edited since is kept (exit 1).

Example:
  kcap-mcp-registry uninstall --client gemini --dry-run")]
    Uninstall(InstallArgs),
    /// Find what is wrong with kcap's registrations in every client's config file.
    #[command(after_help = "\
Checks the default registration file of each client (Claude Code, Codex CLI, Gemini CLI,
OpenCode, Copilot CLI, Cursor, Kiro, Antigravity; honouring CLAUDE_CONFIG_DIR, CODEX_HOME,
COPILOT_HOME, KIRO_HOME, XDG_CONFIG_HOME) for: files that cannot be read or that the client
would refuse (doctor-unreadable, doctor-malformed); in ~/.claude.json, project-scope entries
named like a user-scope kcap entry, identical to it and to kcap's (doctor-duplicate,
removable with --fix) or not (doctor-conflict, kept); kcap entries whose command does not
exist (doctor-stale-command) or is not the current kcap binary (doctor-outdated-command) or
that differ in more (doctor-divergent); registry servers missing where kcap is installed
(doctor-missing).

Every finding is at file:line:column: the server's name, the block a missing server belongs
in, or where the client's parser stops.

--project DIR reads the repository's own MCP files instead, those each client reads when
started in DIR (.mcp.json, .codex/config.toml, .gemini/settings.json, opencode.json,
opencode.jsonc, .opencode/opencode.json, .opencode/opencode.jsonc, .github/mcp.json,
.cursor/mcp.json, .kiro/settings/mcp.json, .agents/mcp_config.json), and prints every server
in them at file:line:column with the client and whether that client's reviewer launch plan,
rendered for a launch in DIR, neutralizes it (the plan removes the file from the worktree:
worktree_remove). A server the client would start from a file the plan leaves in place is a
finding (doctor-project-server); the others are notes (json: severity note, neutralized
true; github: ::notice).

Exit codes: 0 nothing found; 1 findings; 2 a file could not be read (or a usage error).

Examples:
  kcap-mcp-registry doctor --kcap-bin /usr/local/bin/kcap
  kcap-mcp-registry doctor --config codex=./config.toml --client codex --format json
  kcap-mcp-registry doctor --project ~/src/repo --client claude --client codex")]
    Doctor(DoctorArgs),
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
    Diff(DiffArgs),
    /// Carry a launch plan out: start a reviewer exactly as the daemon would, and stream
    /// what it does.
    #[command(after_help = launch_cmd::HELP)]
    Launch(Box<launch_cmd::LaunchArgs>),
    /// Prove on this machine that a reviewer on the installed client starts exactly the
    /// injected MCP servers, under a hostile user and project configuration.
    #[command(after_help = verify_cmd::HELP)]
    Verify(verify_cmd::VerifyArgs),
}

#[derive(Args)]
struct DiffArgs {
    /// The registry directory before the change.
    #[arg(
        requires = "new_dir",
        required_unless_present = "registry",
        conflicts_with = "registry"
    )]
    old_dir: Option<PathBuf>,
    /// The registry directory after the change.
    #[arg(conflicts_with = "registry")]
    new_dir: Option<PathBuf>,
    /// Compare the compiled-in registry (old) with this directory (new).
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Markdown)]
    format: DiffFormat,
    /// Exit 1 when the diff holds a change of this kind.
    #[arg(long, value_enum, value_name = "KIND")]
    fail_on: Option<FailOn>,
    /// With --fail-on security: the reviewed changes that do not fail (an accepted-changes
    /// file; a missing file accepts nothing). A stale entry fails.
    #[arg(long, value_name = "FILE", requires = "fail_on")]
    accepted: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    /// The registry directory, or one file of it (checked with its directory's cross-file
    /// rules: unique ids, the result channel) [default: `registry` here or in the nearest
    /// parent].
    #[arg(value_name = "DIR|FILE")]
    dir: Option<PathBuf>,
    /// Output format: human (rustc style, on stderr), json or github (on stdout).
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// A client's registration file (any of the eight clients': .mcp.json, config.toml,
    /// settings.json, opencode.json, mcp-config.json, …) that must register exactly the
    /// registry's allowlistable servers (repeatable).
    #[arg(long, value_name = "FILE")]
    against: Vec<PathBuf>,
    /// The kcap binary the registration files run (their `command`).
    #[arg(
        long,
        value_name = "PATH",
        default_value = DEFAULT_COMMAND,
        requires = "against",
        alias = "command"
    )]
    kcap_bin: String,
    /// Claude Code: the project directory a session runs in (absolute). A ~/.claude.json
    /// is checked for the servers effective there (its local scope over its user scope);
    /// without it, each project the file holds servers for is checked and named.
    #[arg(long, value_name = "DIR", requires = "against")]
    project: Option<String>,
    /// Codex CLI: the profile selected with `--profile NAME`, read from NAME.config.toml
    /// next to the file and merged over it.
    #[arg(long, value_name = "NAME", requires = "against")]
    codex_profile: Option<String>,
    /// The client that reads every --against file (default: told from each file's name,
    /// then its extension, then its content).
    #[arg(long, value_enum, requires = "against")]
    client: Option<Client>,
}

use report::Format as CheckFormat;

#[derive(Clone, Copy, ValueEnum)]
enum ListFormat {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum DiffFormat {
    Markdown,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum FailOn {
    // A security-relevant change (listed in `diff --help`). A plain comment: a doc comment
    // would switch `diff --help` to clap's long layout, unlike every other subcommand.
    Security,
}

#[derive(Subcommand)]
enum RenderClient {
    /// Claude Code: `--mcp-config` JSON and the reviewer flags.
    #[command(
        override_usage = "kcap-mcp-registry render claude --agent-id <ID> --launch-dir <DIR> [OPTIONS]\n       \
                          kcap-mcp-registry render claude --launch-json <FILE|-> --launch-dir <DIR> [OPTIONS]",
        after_help = "\
Example:
  kcap-mcp-registry render claude --agent-id a1 --launch-dir /run/kcap/l1 --allowlist kcap-review,kcap-flows --server-url URL --kcap-bin PATH"
    )]
    Claude {
        #[command(flatten)]
        common: RenderArgs,
        /// Skip the preflight that, with --worktree, reads the Claude Code configuration this
        /// environment's reviewer would read (HOME, CLAUDE_CONFIG_DIR, the worktree's
        /// .claude/, /etc/claude-code) and refuses a launch whose result channel a setting
        /// there would silently stop.
        #[arg(long)]
        no_preflight: bool,
    },
    /// Codex CLI: its TUI in a per-launch CODEX_HOME, servers as `-c` overrides.
    #[command(
        override_usage = "kcap-mcp-registry render codex <--agent-id <ID>|--launch-json <FILE|->> \
                          --launch-dir <DIR> [OPTIONS]",
        after_help = "\
The plan (--format plan) roots Codex in a per-launch CODEX_HOME and HOME that configure no MCP
server but kcap's, and removes the worktree's .codex and .agents: Codex then starts exactly
these servers, with no inventory of the user's to disable. The argv alone (the other formats)
isolates nothing: run it only as the plan says.

Example:
  kcap-mcp-registry render codex --launch-json launch.json --launch-dir /run/kcap/l1 --worktree /work/tree --format plan"
    )]
    Codex {
        #[command(flatten)]
        common: RenderArgs,
        /// Deprecated and ignored (the plan takes no inventory); removed in the next release.
        #[arg(long, value_name = "FILE|-", hide = true)]
        inventory: Option<PathBuf>,
        /// Deprecated and ignored (the plan takes no inventory); removed in the next release.
        #[arg(long, value_name = "PATH", hide = true)]
        codex_bin: Option<PathBuf>,
        /// Deprecated and ignored (the plan takes no inventory); removed in the next release.
        #[arg(long, hide = true)]
        no_inherited_servers: bool,
    },
    /// Gemini CLI over ACP: servers in `session/new` under per-launch aliased names.
    #[command(
        override_usage = "kcap-mcp-registry render gemini <--agent-id <ID>|--launch-json <FILE|->> \
                          --launch-dir <DIR> --worktree <DIR> [OPTIONS]",
        after_help = "\
Example:
  kcap-mcp-registry render gemini --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --allowlist kcap-review --server-url URL --kcap-bin PATH --format plan"
    )]
    Gemini {
        #[command(flatten)]
        common: RenderArgs,
        /// Fix the per-launch random suffix of server names (16 hex digits), for
        /// reproducible output; absent: drawn from the OS random source.
        #[arg(long, value_name = "HEX")]
        launch_id: Option<String>,
    },
    /// OpenCode over ACP: servers in `session/new`, configuration directories taken away.
    #[command(
        override_usage = "kcap-mcp-registry render opencode <--agent-id <ID>|--launch-json <FILE|->> \
                          --worktree <DIR> --launch-dir <DIR> [OPTIONS]",
        after_help = "\
Example:
  kcap-mcp-registry render opencode --agent-id a1 --worktree /work/tree --launch-dir /run/kcap/l1 --server-url URL --kcap-bin PATH --format plan"
    )]
    Opencode(RenderArgs),
    /// Copilot CLI over ACP: servers in --additional-mcp-config, in a per-launch COPILOT_HOME
    /// where nothing else is configured.
    #[command(
        override_usage = "kcap-mcp-registry render copilot <--agent-id <ID>|--launch-json <FILE|->> \
                          --launch-dir <DIR> --worktree <DIR> [OPTIONS]",
        after_help = "\
Give --cache-dir DIR (the daemon's own, reused across launches) so that Copilot CLI's package
is unpacked once, in DIR/copilot, and a GitHub token or provider setting with --credential
(e.g. COPILOT_GITHUB_TOKEN).

Example:
  kcap-mcp-registry render copilot --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --cache-dir /var/cache/kcap --server-url URL --kcap-bin PATH --format plan"
    )]
    Copilot(RenderArgs),
    /// Cursor over ACP (facts only, not measured): servers in `session/new`; isolation from
    /// the user's ~/.cursor/mcp.json unverified.
    #[command(
        override_usage = "kcap-mcp-registry render cursor <--agent-id <ID>|--launch-json <FILE|->> \
                          --launch-dir <DIR> --worktree <DIR> [OPTIONS]",
        after_help = "\
Cursor is not installable here, so its isolation was never measured: the plan says
\"isolation\": {\"status\": \"unverified\"}, and it is refused under either policy unless
--allow-unverified-isolation is given (then a warning is printed).

Example:
  kcap-mcp-registry render cursor --allow-unverified-isolation --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --allowlist kcap-review --server-url URL --kcap-bin PATH --format plan"
    )]
    Cursor {
        #[command(flatten)]
        common: RenderArgs,
        /// Render Cursor even though its isolation from the user's MCP servers is not
        /// verified.
        #[arg(long)]
        allow_unverified_isolation: bool,
    },
    /// Kiro over ACP (facts only, not measured): servers in `session/new` under per-launch
    /// aliased names, an empty KIRO_HOME, --trust-tools for the admitted tools.
    #[command(
        override_usage = "kcap-mcp-registry render kiro <--agent-id <ID>|--launch-json <FILE|->> \
                          --worktree <DIR> --launch-dir <DIR> [OPTIONS]",
        after_help = "\
Example:
  kcap-mcp-registry render kiro --agent-id a1 --worktree /work/tree --launch-dir /run/kcap/l1 --allowlist kcap-review --server-url URL --kcap-bin PATH --format plan"
    )]
    Kiro {
        #[command(flatten)]
        common: RenderArgs,
        /// Fix the per-launch random suffix of server names (16 hex digits), for
        /// reproducible output; absent: drawn from the OS random source.
        #[arg(long, value_name = "HEX")]
        launch_id: Option<String>,
    },
    /// Antigravity (facts only, not measured): a per-launch HOME holding its servers and
    /// permissions files; brokered result delivery required.
    #[command(
        override_usage = "kcap-mcp-registry render antigravity <--agent-id <ID>|--launch-json <FILE|->> \
                          --worktree <DIR> --launch-dir <DIR> --result-capability-url <URL> [OPTIONS]",
        after_help = "\
Example:
  kcap-mcp-registry render antigravity --agent-id a1 --worktree /work/tree --launch-dir /run/kcap/l1 --result-capability-url http://127.0.0.1:4100/TOKEN --server-url URL --kcap-bin PATH --format plan"
    )]
    Antigravity(RenderArgs),
}

#[derive(Args)]
struct RenderArgs {
    /// The reviewer's agent id (required unless --launch-json gives one).
    #[arg(
        long,
        value_name = "ID",
        required_unless_present = "launch_json",
        allow_hyphen_values = true
    )]
    agent_id: Option<String>,
    /// The kcap server URL (absent: every MCP server is gated off).
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    server_url: Option<String>,
    /// The kcap binary, the command of every MCP server (absent: gated off).
    #[arg(
        long,
        value_name = "PATH",
        allow_hyphen_values = true,
        alias = "capacitor-path"
    )]
    kcap_bin: Option<String>,
    /// MCP allowlist entries, comma-separated (repeatable).
    #[arg(
        long,
        value_name = "A,B,…",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    allowlist: Option<Vec<String>>,
    /// A launch command JSON (`agent_id`, `mcp_allowlist`, `model`, `effort`, `prompt`,
    /// `result_capability_url`, `borrowed_snapshot`, `review_context_url`; other fields
    /// ignored), `-` for stdin. Flags given as well override its fields.
    #[arg(long, value_name = "FILE|-")]
    launch_json: Option<PathBuf>,
    /// Use the strict policy: refuse unknown, flow-starting and non-read-only entries.
    #[arg(long)]
    strict: bool,
    /// Model name.
    #[arg(long, allow_hyphen_values = true)]
    model: Option<String>,
    /// Reasoning effort.
    #[arg(long, allow_hyphen_values = true)]
    effort: Option<String>,
    /// The reviewer's prompt.
    #[arg(long, allow_hyphen_values = true)]
    prompt: Option<String>,
    /// The worktree the reviewer runs in.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    worktree: Option<String>,
    /// The per-launch directory the daemon creates (absolute): the client's root, from which
    /// it reads its user-level configuration.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    launch_dir: Option<String>,
    /// Hand the reviewer this credential or provider variable, with its value from this
    /// environment (repeatable; each client accepts its own names).
    #[arg(long = "credential", value_name = "NAME")]
    credentials: Vec<String>,
    /// A directory kept across launches for the client's caches (absolute): its
    /// XDG_CACHE_HOME instead of the per-launch one.
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    cache_dir: Option<String>,
    /// Brokered result delivery: the result channel gets this capability URL
    /// (KCAP_FLOW_CAPABILITY_URL) instead of KCAP_URL.
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    result_capability_url: Option<String>,
    /// A borrowed-snapshot review: inject the review-context server with this URL
    /// (KCAP_REVIEW_CONTEXT_URL).
    #[arg(long, value_name = "URL", allow_hyphen_values = true)]
    review_context_url: Option<String>,
    /// Output: one argument per line (for reading: control and invisible characters are
    /// shown as escapes), a JSON array, one POSIX-quoted shell line, or the whole launch
    /// plan as JSON (schema in docs/launch-plan.md; json, shell and plan are exact).
    #[arg(long, value_enum, default_value_t = RenderFormat::Lines)]
    format: RenderFormat,
    #[command(flatten)]
    source: RegistrySource,
}

#[derive(Clone, Copy, ValueEnum)]
enum RenderFormat {
    Lines,
    Json,
    Shell,
    Plan,
}

#[derive(Args)]
struct InstallTarget {
    /// The client whose config file to edit.
    #[arg(long, value_enum)]
    client: Client,
    /// The config file (default: the client's user-level file, honouring its home variable:
    /// CLAUDE_CONFIG_DIR, CODEX_HOME, COPILOT_HOME, KIRO_HOME, XDG_CONFIG_HOME).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Print the unified diff of the config instead of writing anything.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Args)]
struct DoctorArgs {
    /// Output format: human (summary on stdout, findings on stderr), json or github (on
    /// stdout).
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// Check only this client (repeatable) [default: all eight].
    #[arg(long, value_enum)]
    client: Vec<Client>,
    /// Check PATH as CLIENT's file instead of its default location (repeatable), e.g.
    /// `claude=/home/me/.claude.json`.
    #[arg(long, value_name = "CLIENT=PATH", value_parser = client_config)]
    config: Vec<(Client, PathBuf)>,
    #[command(flatten)]
    source: RegistrySource,
    /// The current kcap binary, the command kcap's entries should run.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMAND, alias = "command")]
    kcap_bin: String,
    /// The URL install was given with --server-url, if any.
    #[arg(long, value_name = "URL")]
    server_url: Option<String>,
    /// Remove the removable duplicates (doctor-duplicate) from ~/.claude.json, with
    /// install's lock and atomic write, then report what is left.
    #[arg(long)]
    fix: bool,
    /// Read the MCP files of the repository in DIR instead (every client's project files),
    /// and tell for each server whether the client's reviewer launch plan neutralizes it.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["config", "fix", "server_url"])]
    project: Option<PathBuf>,
}

/// `CLIENT=PATH` of `doctor --config`.
fn client_config(s: &str) -> Result<(Client, PathBuf), String> {
    let (client, path) = s
        .split_once('=')
        .ok_or("expected CLIENT=PATH, e.g. codex=/home/me/.codex/config.toml")?;
    let client = Client::from_str(client, true).map_err(|_| {
        format!(
            "unknown client `{}`; one of: claude, codex, gemini, opencode, copilot, cursor, \
             kiro, antigravity",
            client.escape_debug()
        )
    })?;
    if path.is_empty() {
        return Err("the PATH after `=` is empty".into());
    }
    Ok((client, PathBuf::from(path)))
}

#[derive(Args)]
struct InstallArgs {
    #[command(flatten)]
    target: InstallTarget,
    #[command(flatten)]
    source: RegistrySource,
    /// The kcap binary, the command of every server (uninstall: the one install was given,
    /// to recognise kcap's entries that no ledger records).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMAND, alias = "command")]
    kcap_bin: String,
    /// Write each server's `server_url` env vars with this URL (uninstall: the one install
    /// was given).
    #[arg(long, value_name = "URL")]
    server_url: Option<String>,
}

#[derive(Subcommand)]
enum ExportWhat {
    /// Claude Code: a project .mcp.json registering every allowlistable server.
    #[command(
        alias = "claude-mcp-json",
        after_help = "\
Example:
  kcap-mcp-registry export claude > .mcp.json"
    )]
    Claude(RegistrationArgs),
    /// Codex CLI: [mcp_servers.<id>] tables for config.toml.
    #[command(
        alias = "codex-toml",
        after_help = "\
Example:
  kcap-mcp-registry export codex --project-dir \"$PWD\" > kcap-servers.toml
  # or merge them into config.toml: kcap-mcp-registry install --client codex"
    )]
    Codex {
        #[command(flatten)]
        common: RegistrationArgs,
        /// Absolute project directory, written as `cwd` of servers that need it.
        #[arg(long, value_name = "DIR", value_parser = absolute_path)]
        project_dir: Option<String>,
    },
    /// Gemini CLI: `mcpServers` for ~/.gemini/settings.json (read-only servers trusted).
    Gemini(RegistrationArgs),
    /// OpenCode: `mcp` for $XDG_CONFIG_HOME/opencode/opencode.json.
    Opencode(RegistrationArgs),
    /// Copilot CLI: `mcpServers` for $COPILOT_HOME/mcp-config.json.
    Copilot(RegistrationArgs),
    /// Cursor: `mcpServers` for ~/.cursor/mcp.json.
    Cursor(RegistrationArgs),
    /// Kiro: `mcpServers` for $KIRO_HOME/settings/mcp.json.
    Kiro(RegistrationArgs),
    /// Antigravity: `mcpServers` for ~/.gemini/config/mcp_config.json.
    Antigravity(RegistrationArgs),
    /// JSON array of the ids of flow-starting servers, for the kcap server's deny-list.
    #[command(after_help = "\
Example:
  kcap-mcp-registry export denylist > flow-mcp-servers.json")]
    Denylist(RegistrySource),
    /// JSON Schema (draft 2020-12) of one registry file, for editors.
    #[command(after_help = "\
Example:
  kcap-mcp-registry export json-schema > registry.schema.json")]
    JsonSchema,
}

#[derive(Args)]
struct RegistrySource {
    /// Use this registry directory, checked now with the rules of `check`, instead of the
    /// compiled-in registry.
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
}

#[derive(Args)]
struct RegistrationArgs {
    #[command(flatten)]
    source: RegistrySource,
    /// The kcap binary, the `command` of every server.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMAND, alias = "command")]
    kcap_bin: String,
    /// Write each server's `server_url` env vars with this URL.
    #[arg(long, value_name = "URL")]
    server_url: Option<String>,
}

fn absolute_path(s: &str) -> Result<String, String> {
    if Path::new(s).is_absolute() {
        Ok(s.to_string())
    } else {
        Err("must be an absolute path: Codex cannot start a server whose `cwd` is relative".into())
    }
}

/// Why a command did not succeed.
enum CliError {
    /// Exit 2: a usage error or an input that cannot be read or understood; printed as
    /// `error: ` and the error's chain of causes.
    Usage(Box<dyn Error>),
    /// Exit 1: the command ran and found a problem; printed like `Usage`, or, for `None`,
    /// already reported.
    Found(Option<Box<dyn Error>>),
}

impl CliError {
    fn usage(e: impl Into<Box<dyn Error>>) -> CliError {
        CliError::Usage(e.into())
    }

    fn found(e: impl Into<Box<dyn Error>>) -> CliError {
        CliError::Found(Some(e.into()))
    }
}

/// `e` and each of its causes, joined by `: ` (each layer displays itself only).
fn chain(e: &dyn Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn main() -> ExitCode {
    // Started as `verify`'s recorder MCP server (by that name), not as the command line.
    if let Some(code) = kcap_mcp_registry::verify::run_if_recorder() {
        return code;
    }
    match run(Cli::parse()) {
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
        Command::Check(args) => check(args),
        Command::List { format, source } => {
            let entries = load(source.registry.as_deref())?;
            match format {
                ListFormat::Table => out!(
                    "{}\nregistry digest (SHA-256): {}\n",
                    inspect::list_table(&entries),
                    kcap_mcp_registry::schema::digest(&entries)
                ),
                ListFormat::Json => out!("{}", inspect::list_json(&entries)),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Resolve {
            allowlist,
            strict,
            source,
        } => {
            let registry = registry(source.registry.as_deref())?;
            let report = inspect::resolve_report_in(registry, &allowlist, policy(strict));
            out!("{}", report.text);
            if report.rejected {
                return Err(CliError::Found(None));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Render(client) => render(*client),
        Command::Export(what) => export(what),
        Command::Install(args) => install(args),
        Command::Uninstall(args) => uninstall(args),
        Command::Doctor(args) => doctor(args),
        Command::Launch(args) => launch_cmd::launch(*args),
        Command::Verify(args) => verify_cmd::verify(args),
        Command::Diff(args) => diff(&args),
    }
}

fn diff(args: &DiffArgs) -> Result<ExitCode, CliError> {
    use kcap_mcp_registry::diff::accepted::AcceptedChanges;
    let (old, new) = match (&args.old_dir, &args.new_dir, &args.registry) {
        (Some(old), Some(new), _) => (load(Some(old))?, load(Some(new))?),
        (_, _, new) => (inspect::compiled_entries(), load(new.as_deref())?),
    };
    let d = kcap_mcp_registry::diff::diff(&old, &new);
    let markdown = matches!(args.format, DiffFormat::Markdown);
    let Some(path) = &args.accepted else {
        out!("{}", if markdown { d.markdown() } else { d.json() });
        if args.fail_on.is_some() && d.has_security() {
            return Err(CliError::Found(None));
        }
        return Ok(ExitCode::SUCCESS);
    };
    let accepted = AcceptedChanges::read(path).map_err(CliError::usage)?;
    let review = accepted.review(&d, &new);
    out!(
        "{}",
        if markdown {
            review.markdown()
        } else {
            review.json()
        }
    );
    err!("{}", review.report());
    if review.passes() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::Found(None))
    }
}

fn policy(strict: bool) -> Policy {
    if strict {
        Policy::Strict
    } else {
        Policy::Lenient
    }
}

fn stderr_color() -> bool {
    report::color_enabled(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// The registry in `dir` (validated), or the compiled-in one. Violations are printed
/// (human format) and give exit code 1; an unreadable directory gives 2.
fn load(dir: Option<&Path>) -> Result<Vec<RegistryEntry>, CliError> {
    let Some(dir) = dir else {
        return Ok(inspect::compiled_entries());
    };
    match kcap_mcp_registry::validate_dir(dir) {
        Ok(entries) => Ok(entries),
        Err(CheckError::Invalid(diags)) => {
            err!("{}", diagnostic::render_all(&diags, stderr_color()));
            Err(CliError::found(format!(
                "{} is not a valid registry; `kcap-mcp-registry check {}` shows the same report",
                ShownPath(dir),
                ShownPath(dir)
            )))
        }
        Err(e) => Err(CliError::usage(e)),
    }
}

/// [`load`] as a [`Registry`] to resolve and render against.
fn registry(dir: Option<&Path>) -> Result<Registry, CliError> {
    match dir {
        None => Ok(Registry::compiled()),
        Some(dir) => Registry::from_entries(&load(Some(dir))?).map_err(CliError::found),
    }
}

/// The directory `check` runs on: `dir`, or the `registry` directory of the current
/// directory or its nearest parent that has one, shown relative to the current directory
/// (`../../registry`).
fn registry_dir(dir: Option<PathBuf>) -> Result<PathBuf, CliError> {
    if let Some(dir) = dir {
        return Ok(dir);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::usage(format!("cannot read the current directory: {e}")))?;
    kcap_mcp_registry::schema::find_registry_dir(&cwd).ok_or_else(|| {
        CliError::usage(format!(
            "no `registry` directory in {} or any parent directory; give the registry \
             directory: `kcap-mcp-registry check DIR`",
            ShownPath(&cwd)
        ))
    })
}

fn check(args: CheckArgs) -> Result<ExitCode, CliError> {
    // `check --against FILE` alone, outside a registry checkout, compares FILE with the
    // compiled-in registry (as doctor and export do).
    let given = args.dir.is_some();
    let dir = match registry_dir(args.dir) {
        Ok(dir) => Some(dir),
        Err(_) if !given && !args.against.is_empty() => {
            errln!(
                "note: no `registry` directory here or in a parent directory: comparing with \
                 the registry compiled into this binary"
            );
            None
        }
        Err(e) => return Err(e),
    };
    let print_findings = |findings: &[Finding], human: &dyn Fn() -> String| match args.format {
        CheckFormat::Human => err!("{}", human()),
        CheckFormat::Json => out!("{}", report::json(findings)),
        CheckFormat::Github => out!("{}", report::github(findings)),
    };
    if !args.against.is_empty() && dir.as_deref().is_some_and(Path::is_file) {
        return Err(CliError::usage(
            "--against compares a whole registry with a registration file: give the registry directory",
        ));
    }
    let checked = match &dir {
        Some(dir) => kcap_mcp_registry::validate_path(dir),
        None => Ok(inspect::compiled_entries()),
    };
    if let Some(dir) = dir.as_deref().filter(|d| d.is_dir()) {
        let entries = checked.as_ref().ok().map(Vec::as_slice);
        if let Some(warning) = inspect::stale_binary(dir, entries) {
            errln!("warning: {warning}");
        }
    }
    let entries = match checked {
        Ok(entries) => entries,
        Err(CheckError::Invalid(diags)) => {
            let shown = report::violations(&diags, args.format, stderr_color());
            out!("{}", shown.stdout);
            err!("{}", shown.stderr);
            return Err(CliError::Found(None));
        }
        Err(e) => return Err(CliError::usage(e)),
    };
    let opts = AgainstOptions {
        project: args.project.clone(),
        codex_profile: args.codex_profile.clone(),
        client: args.client,
    };
    if !args.against.is_empty() {
        check_kcap_values(&args.kcap_bin, None)?;
    }
    let mut files = Vec::new();
    for path in &args.against {
        let checked =
            drift::check_against(&entries, &args.kcap_bin, path, &opts).map_err(CliError::usage)?;
        warn_ignored_against_flags(path, checked.first().map(|c| c.client), &opts);
        files.extend(checked);
    }
    let findings: Vec<Finding> = files
        .iter()
        .flat_map(|f| &f.drift)
        .map(Drift::finding)
        .collect();
    if !findings.is_empty() {
        print_findings(&findings, &|| {
            report::human(&findings, "drift finding", stderr_color())
        });
        return Err(CliError::Found(None));
    }
    match args.format {
        CheckFormat::Human => {
            let shown = match &dir {
                Some(dir) => ShownPath(dir).to_string(),
                None => "the compiled-in registry".to_string(),
            };
            outln!("{}", report::ok_line(entries.len(), &shown));
            for f in &files {
                let n = export::registrations(&entries).count();
                let project = f
                    .project
                    .as_deref()
                    .map(|p| format!(" for project {}", printable(p)))
                    .unwrap_or_default();
                outln!(
                    "ok: {} ({}){project} starts the registry's {n} allowlistable server{}",
                    ShownPath(Path::new(&f.path)),
                    drift::client_name(f.client),
                    if n == 1 { "" } else { "s" }
                );
            }
        }
        CheckFormat::Json => out!("{}", report::json(&[])),
        CheckFormat::Github => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Warns about `check --against` flags that do not apply to `path`, read as `client`'s file:
/// `--project` for a client whose files have no per-project view, `--codex-profile` for one
/// with no profiles or naming a profile file that does not exist.
fn warn_ignored_against_flags(path: &Path, client: Option<Client>, opts: &AgainstOptions) {
    let shown = ShownPath(path);
    // The clients a flag applies to, by their formats: "Claude Code", "Codex CLI".
    let taking = |applies: fn(&export::RegistrationFormat) -> bool| {
        let names: Vec<&str> = Client::ALL
            .iter()
            .filter(|c| applies(c.registration()))
            .map(|c| c.display_name())
            .collect();
        names.join(" and ")
    };
    let Some(client) = client else { return };
    let format = client.registration();
    if opts.project.is_some() && !format.takes_project {
        errln!(
            "warning: --project applies to {} files only; ignored for {shown} ({})",
            taking(|f| f.takes_project),
            client.display_name()
        );
    }
    let Some(name) = &opts.codex_profile else {
        return;
    };
    match format.profile_file {
        None => errln!(
            "warning: --codex-profile applies to {} files only; ignored for {shown} ({})",
            taking(|f| f.profile_file.is_some()),
            client.display_name()
        ),
        Some(profile_file) => {
            let file = profile_file(path, name);
            if !file.exists() {
                errln!(
                    "warning: --codex-profile {}: there is no {}, so `{} --profile {}` runs \
                     {shown} alone (checked as such)",
                    printable(name),
                    ShownPath(&file),
                    client.spec().binary,
                    printable(name)
                );
            }
        }
    }
}

/// What `render` renders for.
enum Target {
    /// Claude Code, with the preflight unless `--no-preflight`.
    Claude { preflight: bool },
    /// Codex.
    Codex,
    /// Gemini CLI, with this launch id.
    Gemini(LaunchId),
    /// OpenCode.
    OpenCode,
    /// Copilot CLI.
    Copilot,
    /// Cursor, with the caller's answer to its unverified isolation.
    Cursor(cursor::UnverifiedIsolation),
    /// Kiro, with this launch id.
    Kiro(LaunchId),
    /// Antigravity.
    Antigravity,
}

impl Target {
    /// The client rendered for.
    fn client(&self) -> Client {
        match self {
            Target::Claude { .. } => Client::Claude,
            Target::Codex => Client::Codex,
            Target::Gemini(_) => Client::Gemini,
            Target::OpenCode => Client::OpenCode,
            Target::Copilot => Client::Copilot,
            Target::Cursor(_) => Client::Cursor,
            Target::Kiro(_) => Client::Kiro,
            Target::Antigravity => Client::Antigravity,
        }
    }
}

/// The launch id `--launch-id` spells, else a random one.
fn launch_id(hex: Option<String>) -> Result<LaunchId, CliError> {
    match hex {
        // A malformed --launch-id is a usage error; a failing OS random source is not.
        Some(hex) => {
            LaunchId::from_hex(&hex).map_err(|e| CliError::usage(format!("--launch-id: {e}")))
        }
        None => LaunchId::random().map_err(CliError::found),
    }
}

/// The launch values of `client` and what to render them for.
fn target(client: RenderClient) -> Result<(RenderArgs, Target), CliError> {
    match client {
        RenderClient::Claude {
            common,
            no_preflight,
        } => Ok((
            common,
            Target::Claude {
                preflight: !no_preflight,
            },
        )),
        RenderClient::Codex {
            common,
            inventory,
            codex_bin,
            no_inherited_servers,
        } => {
            warn_inventory_flags(
                inventory.is_some(),
                codex_bin.is_some(),
                no_inherited_servers,
            );
            Ok((common, Target::Codex))
        }
        RenderClient::Gemini {
            common,
            launch_id: hex,
        } => Ok((common, Target::Gemini(launch_id(hex)?))),
        RenderClient::Opencode(common) => Ok((common, Target::OpenCode)),
        RenderClient::Copilot(common) => Ok((common, Target::Copilot)),
        RenderClient::Cursor {
            common,
            allow_unverified_isolation,
        } => {
            let answer = if allow_unverified_isolation {
                cursor::UnverifiedIsolation::Allow
            } else {
                cursor::UnverifiedIsolation::Refuse
            };
            Ok((common, Target::Cursor(answer)))
        }
        RenderClient::Kiro {
            common,
            launch_id: hex,
        } => Ok((common, Target::Kiro(launch_id(hex)?))),
        RenderClient::Antigravity(common) => Ok((common, Target::Antigravity)),
    }
}

/// The one-line warning for `render codex`'s inventory flags, deprecated since the plan
/// needs no inventory: accepted and ignored for one release, never silently.
fn warn_inventory_flags(inventory: bool, codex_bin: bool, no_inherited_servers: bool) {
    let given: Vec<&str> = [
        (inventory, "--inventory"),
        (codex_bin, "--codex-bin"),
        (no_inherited_servers, "--no-inherited-servers"),
    ]
    .into_iter()
    .filter_map(|(set, flag)| set.then_some(flag))
    .collect();
    if !given.is_empty() {
        errln!(
            "warning: {} ignored (deprecated, to be removed): the plan roots Codex in a \
             per-launch CODEX_HOME that configures no MCP server but kcap's, so there is no \
             inherited server to take an inventory of",
            given.join(", ")
        );
    }
}

fn render(client: RenderClient) -> Result<ExitCode, CliError> {
    let (plan, ctx, format) = render_plan(client)?;
    let text = match format {
        RenderFormat::Lines => preview::format_argv(&plan.argv, ArgvFormat::Lines),
        RenderFormat::Json => preview::format_argv(&plan.argv, ArgvFormat::Json),
        RenderFormat::Shell => preview::format_argv(&plan.argv, ArgvFormat::Shell),
        RenderFormat::Plan => Ok(plan.to_json()),
    }
    .map_err(CliError::found)?;
    warn_gated(&ctx);
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// The warning for a launch whose MCP servers are all gated off, if it is one.
fn warn_gated(ctx: &LaunchContext) {
    if ctx.is_gated() {
        errln!(
            "warning: agent {:?}: no --server-url or no --kcap-bin, so every MCP server \
             (the result channel and any allowlist) is gated off",
            ctx.agent_id
        );
    }
}

/// The plan `render` prints (and `launch` carries out), its launch context and the output
/// format asked for; warnings are printed.
fn render_plan(
    client: RenderClient,
) -> Result<(LaunchPlan, LaunchContext, RenderFormat), CliError> {
    let (common, target) = target(client)?;
    let launch = common
        .launch_json
        .as_deref()
        .map(|path| preview::read_launch_command(path, common.agent_id.as_deref()))
        .transpose()
        .map_err(CliError::usage)?;
    let overrides = LaunchOverrides {
        server_url: common.server_url,
        kcap_bin: common.kcap_bin,
        agent_id: common.agent_id,
        allowlist: common.allowlist,
        model: common.model,
        effort: common.effort,
        prompt: common.prompt,
        worktree: common.worktree,
        result_capability_url: common.result_capability_url,
        review_context_url: common.review_context_url,
        launch_dir: common.launch_dir,
        credentials: credentials_from_env(&common.credentials)?,
        cache_dir: common.cache_dir,
    };
    preview::check_launch_values(launch.as_ref(), &overrides).map_err(CliError::usage)?;
    let registry = registry(common.source.registry.as_deref())?;
    let ctx = preview::launch_context(launch, overrides);
    let policy = policy(common.strict);
    let resolution = ctx.resolve_in(registry, policy).map_err(CliError::found)?;
    let client = target.client();
    // What no plan can keep out, and the launch values this client cannot carry: the checks
    // of the one launch call (`Client::plan`).
    client
        .preflight(&ctx, Path::new("/"))
        .map_err(CliError::found)?;
    let uncarried = client
        .uncarried_values(&ctx, policy)
        .map_err(CliError::found)?;
    for warning in preview::shown_skip_warnings(&ctx, &resolution, preview::SHOWN_SKIP_WARNINGS) {
        errln!("warning: {warning}");
    }
    for warning in uncarried {
        errln!("warning: {warning}");
    }
    let plan = match target {
        Target::Codex => codex::codex_plan(&ctx, &resolution),
        Target::Gemini(id) => gemini::gemini_plan(&ctx, &resolution, &id),
        Target::OpenCode => opencode::opencode_plan(&ctx, &resolution),
        Target::Copilot => copilot::copilot_plan(&ctx, &resolution),
        Target::Cursor(answer) => cursor::cursor_plan(&ctx, &resolution, answer),
        Target::Kiro(id) => kiro::kiro_plan(&ctx, &resolution, &id),
        Target::Antigravity => antigravity::antigravity_plan(&ctx, &resolution),
        // With a worktree, the Claude preflight reads the Claude Code configuration this
        // environment's reviewer would read, and reports the servers it would veto.
        Target::Claude { preflight } => claude_plan(&ctx, &resolution, policy, preflight),
    }
    .map_err(|e| match e {
        // A relative or missing --worktree/--launch-dir is how the command was called.
        kcap_mcp_registry::RenderError::NeedsAbsolute { .. } => CliError::usage(e),
        e => CliError::found(e),
    })?;
    if let Isolation::Unverified { reason } = &plan.isolation {
        errln!(
            "warning: agent {:?}: the {} launch's isolation is not verified: {reason}",
            ctx.agent_id,
            plan.client
        );
    }
    Ok((plan, ctx, common.format))
}

/// The `--credential` variables with their values from this process's environment.
fn credentials_from_env(names: &[String]) -> Result<Credentials, CliError> {
    let mut credentials = Credentials::default();
    for name in names {
        let value = std::env::var(name).map_err(|_| {
            CliError::usage(format!(
                "--credential {}: not set in this environment (or not UTF-8); set it, or \
                 leave the flag out",
                name.escape_debug()
            ))
        })?;
        credentials.env.push(EnvVar::new(name.clone(), value));
    }
    Ok(credentials)
}

/// The Claude Code plan. With a worktree and `preflight`, the preflight first reads the
/// Claude Code configuration this environment's reviewer would read, and each server it
/// would veto is a warning.
fn claude_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    policy: Policy,
    preflight: bool,
) -> Result<LaunchPlan, kcap_mcp_registry::RenderError> {
    match ctx
        .worktree
        .as_deref()
        .filter(|w| preflight && !w.is_empty())
    {
        None => claude::claude_plan(ctx, resolution),
        Some(worktree) => {
            let sources = ClaudeConfigSources::from_env(worktree);
            claude::claude_plan_preflighted(ctx, resolution, policy, &sources).map(
                |(plan, vetoes)| {
                    for veto in vetoes {
                        errln!("warning: agent \"{}\": {veto}", ctx.agent_id.escape_debug());
                    }
                    plan
                },
            )
        }
    }
}

fn export(what: ExportWhat) -> Result<ExitCode, CliError> {
    let registration = |args: RegistrationArgs, project_dir: Option<String>| {
        check_kcap_values(&args.kcap_bin, args.server_url.as_deref())?;
        let entries = load(args.source.registry.as_deref())?;
        let opts = RegistrationOptions {
            command: args.kcap_bin,
            server_url: args.server_url,
            project_dir,
        };
        Ok::<_, CliError>((entries, opts))
    };
    let json_file = |client: Client, args: RegistrationArgs| -> Result<String, CliError> {
        let (entries, opts) = registration(args, None)?;
        export::registration_file(client.registration(), &entries, &opts).map_err(CliError::usage)
    };
    let text = match what {
        ExportWhat::Claude(args) => json_file(Client::Claude, args)?,
        ExportWhat::Gemini(args) => json_file(Client::Gemini, args)?,
        ExportWhat::Opencode(args) => json_file(Client::OpenCode, args)?,
        ExportWhat::Copilot(args) => json_file(Client::Copilot, args)?,
        ExportWhat::Cursor(args) => json_file(Client::Cursor, args)?,
        ExportWhat::Kiro(args) => json_file(Client::Kiro, args)?,
        ExportWhat::Antigravity(args) => json_file(Client::Antigravity, args)?,
        ExportWhat::Codex {
            common,
            project_dir,
        } => {
            let (entries, opts) = registration(common, project_dir)?;
            codex_toml(&entries, &opts).map_err(CliError::usage)?
        }
        ExportWhat::Denylist(source) => export::denylist(&load(source.registry.as_deref())?),
        ExportWhat::JsonSchema => export::json_schema(),
    };
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// Refuses a blank `--kcap-bin` or `--server-url`, or one holding a control or invisible
/// character, of `export`, `install` and `check --against` (exit 2).
fn check_kcap_values(kcap_bin: &str, server_url: Option<&str>) -> Result<(), CliError> {
    preview::check_value("--kcap-bin", kcap_bin, false).map_err(CliError::usage)?;
    if let Some(url) = server_url {
        preview::check_value("--server-url", url, false).map_err(CliError::usage)?;
    }
    Ok(())
}

/// The config file `install`/`uninstall` edit: `--config`, or the client's default.
fn config_path(target: &InstallTarget) -> Result<PathBuf, CliError> {
    match &target.config {
        Some(path) => Ok(path.clone()),
        None => (target.client.registration().default_config)(&|name| std::env::var_os(name))
            .map_err(CliError::usage),
    }
}

/// The entries `install` (and `uninstall`, to recognise them) works with.
fn servers(
    args: &InstallArgs,
    format: &export::RegistrationFormat,
) -> Result<Vec<(String, export::Node)>, CliError> {
    check_kcap_values(&args.kcap_bin, args.server_url.as_deref())?;
    let entries = load(args.source.registry.as_deref())?;
    let opts = RegistrationOptions {
        command: args.kcap_bin.clone(),
        server_url: args.server_url.clone(),
        project_dir: None,
    };
    export::registration_entries(format, &entries, &opts).map_err(CliError::usage)
}

fn install(args: InstallArgs) -> Result<ExitCode, CliError> {
    let format = args.target.client.registration();
    let config = config_path(&args.target)?;
    // The client's own directory is created for its default location (a first install);
    // a directory named with --config that does not exist is a typo, not a request.
    if args.target.config.is_some()
        && let Some(dir) = config.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(CliError::usage(format!(
            "the directory of --config {} does not exist; create it first, or fix the path",
            ShownPath(&config)
        )));
    }
    let servers = servers(&args, format)?;
    print_outcome(kcap_mcp_registry::install::install(
        format,
        &config,
        &servers,
        args.target.dry_run,
    ))
}

fn uninstall(args: InstallArgs) -> Result<ExitCode, CliError> {
    let format = args.target.client.registration();
    let config = config_path(&args.target)?;
    let servers = servers(&args, format)?;
    print_outcome(kcap_mcp_registry::install::uninstall(
        format,
        &config,
        &servers,
        args.target.dry_run,
    ))
}

/// The file `command` runs, canonical: an absolute (or relative) path that is a file, or a
/// bare name found in a `PATH` directory; `None` when there is none.
fn resolve_command(command: &str) -> Option<PathBuf> {
    let path = Path::new(command);
    let found = if path.components().count() > 1 || path.is_absolute() {
        path.is_file().then(|| path.to_path_buf())
    } else {
        let dirs = std::env::var_os("PATH")?;
        std::env::split_paths(&dirs)
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| d.join(command))
            .find(|p| p.is_file())
    }?;
    std::fs::canonicalize(found).ok()
}

fn doctor(args: DoctorArgs) -> Result<ExitCode, CliError> {
    check_kcap_values(&args.kcap_bin, args.server_url.as_deref())?;
    if let Some(dir) = &args.project {
        return doctor_cmd::project(&args, dir);
    }
    let entries = load(args.source.registry.as_deref())?;
    let opts = RegistrationOptions {
        command: args.kcap_bin.clone(),
        server_url: args.server_url.clone(),
        project_dir: None,
    };
    let targets = doctor_targets(&args)?;
    let diagnose = || {
        let files: Vec<ClientFile> = targets
            .iter()
            .map(|(c, p, e)| ClientFile::read(*c, p.clone(), *e))
            .collect();
        doctor::diagnose(&doctor::Input {
            entries: &entries,
            opts: &opts,
            files: &files,
            resolve: &resolve_command,
        })
        .map_err(CliError::usage)
    };
    let mut report = diagnose()?;
    if args.fix && !report.removable.is_empty() {
        let mut by_file: Vec<(PathBuf, Vec<_>)> = Vec::new();
        for (path, dup) in &report.removable {
            match by_file.iter_mut().find(|(p, _)| p == path) {
                Some((_, dups)) => dups.push(dup.clone()),
                None => by_file.push((path.clone(), vec![dup.clone()])),
            }
        }
        for (path, dups) in by_file {
            let outcome =
                kcap_mcp_registry::install::remove_claude_project_duplicates(&path, &dups, false)
                    .map_err(CliError::usage)?;
            err!("{}", outcome.report());
            if outcome.changed {
                errln!("wrote {}", ShownPath(&outcome.config));
            }
        }
        report = diagnose()?;
    }
    let findings = report.findings();
    match args.format {
        CheckFormat::Human => {
            for c in &report.clients {
                let status = match c.status {
                    doctor::Status::NoFile => "no file".to_string(),
                    doctor::Status::NotInstalled => "no kcap servers".to_string(),
                    doctor::Status::Installed { registered, of } => {
                        format!("kcap installed, {registered} of {of} registry servers registered")
                    }
                    doctor::Status::Unusable => "cannot be used (see below)".to_string(),
                };
                outln!("{}: {}: {status}", c.client.name(), ShownPath(&c.path));
            }
            if findings.is_empty() {
                outln!("ok: no problems found");
            } else {
                err!(
                    "{}",
                    report::human(&findings, "doctor finding", stderr_color())
                );
            }
        }
        CheckFormat::Json => out!("{}", report::json(&findings)),
        CheckFormat::Github => out!("{}", report::github(&findings)),
    }
    if report.has_unreadable() {
        return Err(CliError::usage(
            "a registration file or ledger could not be read (doctor-unreadable)",
        ));
    }
    if findings.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::Found(None))
    }
}

/// The files `doctor` reads: (client, path, whether `--config` named it), for every client
/// `--client` selects (all without it), at its `--config` or default location.
///
/// # Errors
/// A usage error for two `--config`s for one client, a `--config` for a client `--client`
/// leaves out, or a default location that cannot be found (e.g. no HOME).
fn doctor_targets(args: &DoctorArgs) -> Result<Vec<(Client, PathBuf, bool)>, CliError> {
    for (i, (client, path)) in args.config.iter().enumerate() {
        if let Some((_, other)) = args.config[..i].iter().find(|(c, _)| c == client) {
            return Err(CliError::usage(format!(
                "--config names two files for {}: {} and {}; give one (run doctor once per file)",
                client.display_name(),
                ShownPath(other),
                ShownPath(path)
            )));
        }
        if !args.client.is_empty() && !args.client.contains(client) {
            return Err(CliError::usage(format!(
                "--config {}={} names a client that --client leaves out; add `--client {}`, \
                 or drop that --config",
                client.name(),
                ShownPath(path),
                client.name()
            )));
        }
    }
    let mut targets = Vec::new();
    for client in Client::value_variants() {
        if !args.client.is_empty() && !args.client.contains(client) {
            continue;
        }
        let given = args.config.iter().find(|(c, _)| c == client);
        let (path, explicit) = match given {
            Some((_, path)) => (path.clone(), true),
            None => {
                let path = (client.registration().default_config)(&|name| std::env::var_os(name))
                    .map_err(|e| {
                    CliError::usage(format!(
                        "{}: {e} (or --client to check other clients only)",
                        client.display_name()
                    ))
                })?;
                (path, false)
            }
        };
        targets.push((*client, path, explicit));
    }
    Ok(targets)
}

/// Prints the diff (dry run) or what was done; exit 1 when an entry was left divergent or
/// kept edited, 2 when nothing could be written.
fn print_outcome(
    outcome: Result<kcap_mcp_registry::install::Outcome, kcap_mcp_registry::install::InstallError>,
) -> Result<ExitCode, CliError> {
    let outcome = outcome.map_err(CliError::usage)?;
    if outcome.dry_run {
        out!("{}", outcome.diff());
    }
    err!("{}", outcome.report());
    let path = ShownPath(&outcome.config);
    match (outcome.dry_run, outcome.changed) {
        _ if !outcome.existed && outcome.after.is_empty() && !outcome.changed => {
            errln!("{path} does not exist: nothing to uninstall");
        }
        (true, true) if outcome.removed => errln!(
            "dry run: would remove {path} (kcap created it and nothing else is in it); nothing written"
        ),
        (true, true) => errln!("dry run: nothing written to {path} or its ledger"),
        (true, false) => errln!("dry run: {path} needs no change"),
        (false, true) if outcome.removed => {
            errln!("removed {path}: kcap created it and nothing else is in it");
        }
        (false, true) if !outcome.existed && outcome.after.is_empty() => {
            errln!("{path} does not exist: removed its ledger");
        }
        (false, true) => errln!("wrote {path}"),
        (false, false) => errln!("{path} needs no change"),
    }
    if outcome.has_problem() {
        Err(CliError::Found(None))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}

//! `kcap-mcp-registry`: check, inspect, render and export the kcap MCP server registry.
//!
//! This file only parses arguments and prints; every rule, comparison and format lives in
//! the library (`schema`, `report`, `drift`, `export`, `diff`, `inspect`, `launch`).
//!
//! Exit codes: 0 success; 1 the command ran and found a problem (rule violations, drift, a
//! security-relevant diff with `--fail-on security`, a strict rejection, a render refusal);
//! 2 usage errors and inputs that cannot be read or understood.

use std::io::IsTerminal;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kcap_mcp_registry::clients::claude::preflight::ClaudeConfigSources;
use kcap_mcp_registry::clients::codex::inventory;
use kcap_mcp_registry::clients::plan::{LaunchId, LaunchPlan};
use kcap_mcp_registry::clients::{claude, codex, gemini, opencode};
use kcap_mcp_registry::clients::{
    claude::registration::claude_mcp_json, codex::registration::codex_toml,
};
use kcap_mcp_registry::drift::{self, AgainstOptions, Drift};
use kcap_mcp_registry::export::{self, DEFAULT_COMMAND, RegistrationOptions};
use kcap_mcp_registry::launch::{self, ArgvFormat, LaunchOverrides};
use kcap_mcp_registry::report::{self, Finding};
use kcap_mcp_registry::{CheckError, LaunchCommand, Policy, RegistryEntry, diagnostic, inspect};

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
diff with --fail-on security, a strict rejection, a refused render); 2 usage or input error.

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
enum Command {
    /// Validate a registry directory with the rules build.rs applies, and compare it with
    /// client registration files.
    #[command(after_help = "\
Examples:
  kcap-mcp-registry check
  kcap-mcp-registry check registry --format github
  kcap-mcp-registry check --against .mcp.json --against .codex/config.toml")]
    Check(CheckArgs),
    /// Print the compiled-in registry.
    #[command(after_help = "\
Example:
  kcap-mcp-registry list --format json")]
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Table)]
        format: ListFormat,
    },
    /// Resolve allowlist entries against the compiled-in registry, as a launch would.
    #[command(after_help = "\
Prints one line per entry: its canonical id, `skipped (KIND)` or, with --strict,
`rejected (REASON)`.

Example:
  kcap-mcp-registry resolve ' KCAP-Review ' kcap-flows kcap-memory --strict")]
    Resolve {
        /// Allowlist entries, in order.
        #[arg(required = true, value_name = "NAME")]
        names: Vec<String>,
        /// Use the strict policy (unattended reviewers): exit 1 when any entry is rejected.
        #[arg(long)]
        strict: bool,
    },
    /// Print the argv a reviewer would be launched with (after the client binary), or its
    /// whole launch plan (`--format plan`).
    #[command(
        subcommand,
        after_help = "\
Example:
  kcap-mcp-registry render claude --agent-id a1 --allowlist kcap-review --format shell"
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
    /// Show what changes between two registry directories (e.g. a pull request's base and
    /// head), security-relevant flips first.
    #[command(after_help = "\
Example:
  kcap-mcp-registry diff base/registry registry --fail-on security")]
    Diff {
        /// The registry before the change.
        old_dir: PathBuf,
        /// The registry after the change.
        new_dir: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = DiffFormat::Markdown)]
        format: DiffFormat,
        /// Exit 1 when the diff holds a change of this kind.
        #[arg(long, value_enum, value_name = "KIND")]
        fail_on: Option<FailOn>,
    },
}

#[derive(Args)]
struct CheckArgs {
    /// The registry directory, or one file of it (checked with its directory's cross-file
    /// rules: unique ids, the result channel).
    #[arg(default_value = "registry", value_name = "DIR|FILE")]
    dir: PathBuf,
    /// Output format: human (rustc style, on stderr), json or github (on stdout).
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// A Claude Code .mcp.json or Codex config.toml that must register exactly the
    /// registry's allowlistable servers (repeatable).
    #[arg(long, value_name = "FILE")]
    against: Vec<PathBuf>,
    /// The command (kcap binary) the registration files run.
    #[arg(long, default_value = DEFAULT_COMMAND, requires = "against")]
    command: String,
    /// Claude Code: the project directory a session runs in (absolute). A ~/.claude.json
    /// is checked for the servers effective there (its local scope over its user scope);
    /// without it, each project the file holds servers for is checked and named.
    #[arg(long, value_name = "DIR", requires = "against")]
    project: Option<String>,
    /// Codex CLI: the profile selected with `--profile NAME`, read from NAME.config.toml
    /// next to the file and merged over it.
    #[arg(long, value_name = "NAME", requires = "against")]
    codex_profile: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    Human,
    Json,
    Github,
}

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
    /// A security-relevant change: args changes; starts_flows, allowlistable or read_only
    /// flips; a new server that starts flows or is read_only; a tool becoming
    /// unattended_safe; an env source becoming agent_id.
    Security,
}

#[derive(Subcommand)]
enum RenderClient {
    /// Claude Code: `--mcp-config` JSON and the reviewer flags.
    #[command(after_help = "\
Example:
  kcap-mcp-registry render claude --server-url http://127.0.0.1:5100 \\
    --kcap-bin /usr/bin/kcap --agent-id a1 --allowlist kcap-review,kcap-flows")]
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
    /// Codex CLI: `-c` overrides that isolate the reviewer from the user's MCP servers.
    #[command(after_help = "\
Codex also starts the MCP servers of the user's config.toml and plugins, which `-c` cannot
remove: give their inventory (--inventory or --codex-bin), or --no-inherited-servers.

Example:
  codex mcp list --json > inventory.json
  kcap-mcp-registry render codex --launch-json launch.json --server-url http://127.0.0.1:5100 \\
    --kcap-bin /usr/bin/kcap --worktree /work/tree --inventory inventory.json --format shell")]
    Codex {
        #[command(flatten)]
        common: RenderArgs,
        /// Saved `codex mcp list --json` output (`-` for stdin).
        #[arg(long, value_name = "FILE|-", conflicts_with_all = ["codex_bin", "no_inherited_servers"])]
        inventory: Option<PathBuf>,
        /// Run `PATH mcp list --json` to get the inventory.
        #[arg(long, value_name = "PATH", conflicts_with = "no_inherited_servers")]
        codex_bin: Option<PathBuf>,
        /// Assert that Codex has no MCP servers of its own to disable.
        #[arg(long)]
        no_inherited_servers: bool,
    },
    /// Gemini CLI over ACP: servers in `session/new` under per-launch aliased names.
    #[command(after_help = "\
Example:
  kcap-mcp-registry render gemini --server-url http://127.0.0.1:5100 --kcap-bin /usr/bin/kcap \\
    --agent-id a1 --worktree /work/tree --allowlist kcap-review --format plan")]
    Gemini {
        #[command(flatten)]
        common: RenderArgs,
        /// Fix the per-launch random suffix of server names (16 hex digits), for
        /// reproducible output; absent: drawn from the OS random source.
        #[arg(long, value_name = "HEX")]
        launch_id: Option<String>,
    },
    /// OpenCode over ACP: servers in `session/new`, configuration directories taken away.
    #[command(after_help = "\
Example:
  kcap-mcp-registry render opencode --server-url http://127.0.0.1:5100 --kcap-bin /usr/bin/kcap \\
    --agent-id a1 --worktree /work/tree --launch-dir /run/kcap/l1 --format plan")]
    Opencode(RenderArgs),
}

#[derive(Args)]
struct RenderArgs {
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
    /// The reviewer's agent id.
    #[arg(
        long,
        value_name = "ID",
        required_unless_present = "launch_json",
        allow_hyphen_values = true
    )]
    agent_id: Option<String>,
    /// MCP allowlist entries, comma-separated (repeatable).
    #[arg(
        long,
        value_name = "A,B,…",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    allowlist: Option<Vec<String>>,
    /// A launch command JSON (`agent_id`, `mcp_allowlist`, `model`, `effort`, `prompt`;
    /// other fields ignored), `-` for stdin. Flags given as well override its fields.
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
    /// The per-launch directory the daemon creates (absolute; OpenCode needs it).
    #[arg(long, value_name = "DIR", allow_hyphen_values = true)]
    launch_dir: Option<String>,
    /// Output: one argument per line, a JSON array, one POSIX-quoted shell line, or the
    /// whole launch plan as JSON (schema in the README).
    #[arg(long, value_enum, default_value_t = RenderFormat::Lines)]
    format: RenderFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum RenderFormat {
    Lines,
    Json,
    Shell,
    Plan,
}

#[derive(Subcommand)]
enum ExportWhat {
    /// A project .mcp.json for Claude Code registering every allowlistable server.
    #[command(after_help = "\
Example:
  kcap-mcp-registry export claude-mcp-json > .mcp.json")]
    ClaudeMcpJson(RegistrationArgs),
    /// [mcp_servers.<id>] tables for Codex CLI's config.toml.
    #[command(after_help = "\
Example:
  kcap-mcp-registry export codex-toml --project-dir \"$PWD\" > kcap-servers.toml
  # then paste its tables into .codex/config.toml once (appending twice duplicates them)")]
    CodexToml {
        #[command(flatten)]
        common: RegistrationArgs,
        /// Absolute project directory, written as `cwd` of servers that need it.
        #[arg(long, value_name = "DIR", value_parser = absolute_path)]
        project_dir: Option<String>,
    },
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
    /// Export from this registry directory instead of the compiled-in registry.
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
}

#[derive(Args)]
struct RegistrationArgs {
    #[command(flatten)]
    source: RegistrySource,
    /// The command of every server (the kcap binary).
    #[arg(long, default_value = DEFAULT_COMMAND)]
    command: String,
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

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Check(args) => check(args),
        Command::List { format } => {
            let entries = inspect::compiled_entries();
            out!(
                "{}",
                match format {
                    ListFormat::Table => inspect::list_table(&entries),
                    ListFormat::Json => inspect::list_json(&entries),
                }
            );
            ExitCode::SUCCESS
        }
        Command::Resolve { names, strict } => {
            let policy = if strict {
                Policy::Strict
            } else {
                Policy::Lenient
            };
            let report = inspect::resolve_report(&names, policy);
            out!("{}", report.text);
            exit(!report.rejected)
        }
        Command::Render(client) => render(*client),
        Command::Export(what) => export(what),
        Command::Diff {
            old_dir,
            new_dir,
            format,
            fail_on,
        } => {
            let (old, new) = match (load(Some(&old_dir)), load(Some(&new_dir))) {
                (Ok(old), Ok(new)) => (old, new),
                (Err(code), _) | (_, Err(code)) => return code,
            };
            let d = kcap_mcp_registry::diff::diff(&old, &new);
            out!(
                "{}",
                match format {
                    DiffFormat::Markdown => d.markdown(),
                    DiffFormat::Json => d.json(),
                }
            );
            exit(!(fail_on.is_some() && d.has_security()))
        }
    }
}

/// 0 when `ok`, else 1.
fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Prints `error: {message}` on stderr; exit code 2.
fn input_error(message: impl std::fmt::Display) -> ExitCode {
    errln!("error: {message}");
    ExitCode::from(2)
}

fn stderr_color() -> bool {
    report::color_enabled(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// The registry in `dir` (validated), or the compiled-in one. Violations are printed
/// (human format) and give exit code 1; an unreadable directory gives 2.
fn load(dir: Option<&Path>) -> Result<Vec<RegistryEntry>, ExitCode> {
    let Some(dir) = dir else {
        return Ok(inspect::compiled_entries());
    };
    match kcap_mcp_registry::validate_dir(dir) {
        Ok(entries) => Ok(entries),
        Err(CheckError::Load(e)) => Err(input_error(e)),
        Err(CheckError::Invalid(diags)) => {
            err!("{}", diagnostic::render_all(&diags, stderr_color()));
            errln!(
                "error: {} is not a valid registry; `kcap-mcp-registry check {}` shows the same report",
                dir.display(),
                dir.display()
            );
            Err(ExitCode::from(1))
        }
    }
}

fn check(args: CheckArgs) -> ExitCode {
    let print_findings = |findings: &[Finding], human: &dyn Fn() -> String| match args.format {
        CheckFormat::Human => err!("{}", human()),
        CheckFormat::Json => out!("{}", report::json(findings)),
        CheckFormat::Github => out!("{}", report::github(findings)),
    };
    if !args.against.is_empty() && args.dir.is_file() {
        return input_error(
            "--against compares a whole registry with a registration file: give the registry directory",
        );
    }
    let entries = match kcap_mcp_registry::validate_path(&args.dir) {
        Ok(entries) => entries,
        Err(CheckError::Load(e)) => return input_error(e),
        Err(CheckError::Invalid(diags)) => {
            let findings: Vec<Finding> = diags.iter().map(Finding::from).collect();
            print_findings(&findings, &|| {
                diagnostic::render_all(&diags, stderr_color())
            });
            return ExitCode::from(1);
        }
    };
    let opts = AgainstOptions {
        project: args.project.clone(),
        codex_profile: args.codex_profile.clone(),
    };
    let mut files = Vec::new();
    for path in &args.against {
        match drift::check_against(&entries, &args.command, path, &opts) {
            Ok(checked) => files.extend(checked),
            Err(e) => return input_error(e),
        }
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
        return ExitCode::from(1);
    }
    match args.format {
        CheckFormat::Human => {
            outln!(
                "ok: {} registry entr{} in {}",
                entries.len(),
                if entries.len() == 1 { "y" } else { "ies" },
                args.dir.display()
            );
            for f in &files {
                let n = export::registrations(&entries).count();
                let project = f
                    .project
                    .as_deref()
                    .map(|p| format!(" for project {p}"))
                    .unwrap_or_default();
                outln!(
                    "ok: {} ({}){project} starts the registry's {n} allowlistable server{}",
                    f.path,
                    drift::client_name(f.client),
                    if n == 1 { "" } else { "s" }
                );
            }
        }
        CheckFormat::Json => out!("{}", report::json(&[])),
        CheckFormat::Github => {}
    }
    ExitCode::SUCCESS
}

fn render(client: RenderClient) -> ExitCode {
    let mut launch_id = None;
    let mut claude_preflight = false;
    let (common, inventory_source) = match client {
        RenderClient::Claude {
            common,
            no_preflight,
        } => {
            claude_preflight = !no_preflight;
            (common, None)
        }
        RenderClient::Opencode(common) => (common, Some(Room::OpenCode)),
        RenderClient::Gemini {
            common,
            launch_id: hex,
        } => {
            let id = match hex {
                Some(hex) => LaunchId::from_hex(&hex),
                None => LaunchId::random(),
            };
            match id {
                Ok(id) => launch_id = Some(id),
                Err(e) => return input_error(format!("--launch-id: {e}")),
            }
            (common, Some(Room::Gemini))
        }
        RenderClient::Codex {
            common,
            inventory,
            codex_bin,
            no_inherited_servers,
        } => {
            let source = match (inventory, codex_bin, no_inherited_servers) {
                (Some(file), _, _) => InventorySource::File(file),
                (_, Some(bin), _) => InventorySource::Run(bin),
                (_, _, true) => InventorySource::None,
                _ => {
                    return input_error(
                        "Codex also starts the MCP servers of the user's config.toml and plugins, \
                         which `-c` cannot remove; give --inventory FILE (saved `codex mcp list --json` \
                         output), --codex-bin PATH (to run it), or --no-inherited-servers",
                    );
                }
            };
            (common, Some(Room::Codex(source)))
        }
    };
    let stdin = Path::new("-");
    if common.launch_json.as_deref() == Some(stdin)
        && matches!(&inventory_source, Some(Room::Codex(InventorySource::File(f))) if f == stdin)
    {
        return input_error("--launch-json and --inventory cannot both read standard input");
    }
    let launch = match &common.launch_json {
        None => None,
        Some(path) => {
            let text = match launch::read_input(path) {
                Ok(text) => text,
                Err(e) => return input_error(format!("cannot read {}: {e}", path.display())),
            };
            // `--agent-id` stands in for a payload that lacks one (flags override fields);
            // otherwise the parser's own error, with its line and column, stands.
            let parsed = serde_json::from_str::<LaunchCommand>(&text).or_else(|e| {
                let mut v = match (
                    &common.agent_id,
                    serde_json::from_str::<serde_json::Value>(&text),
                ) {
                    (Some(_), Ok(v)) if v.get("agent_id").is_none() => v,
                    _ => return Err(e),
                };
                if let (Some(obj), Some(id)) = (v.as_object_mut(), &common.agent_id) {
                    obj.insert("agent_id".into(), id.clone().into());
                }
                serde_json::from_value::<LaunchCommand>(v)
            });
            match parsed {
                Ok(cmd) => Some(cmd),
                Err(e) => {
                    return input_error(format!(
                        "{} is not a launch command JSON: {e}",
                        path.display()
                    ));
                }
            }
        }
    };
    let ctx = launch::launch_context(
        launch,
        LaunchOverrides {
            server_url: common.server_url,
            kcap_bin: common.kcap_bin,
            agent_id: common.agent_id,
            allowlist: common.allowlist,
            model: common.model,
            effort: common.effort,
            prompt: common.prompt,
            worktree: common.worktree,
            launch_dir: common.launch_dir,
        },
    );
    let policy = if common.strict {
        Policy::Strict
    } else {
        Policy::Lenient
    };
    let plan = match inventory_source {
        // With a worktree, the preflight reads the Claude Code configuration this
        // environment's reviewer would read, and reports the servers it would veto.
        None => match ctx
            .worktree
            .as_deref()
            .filter(|w| claude_preflight && !w.is_empty())
        {
            Some(worktree) => {
                let sources = ClaudeConfigSources::from_env(worktree);
                claude::claude_plan_preflighted(&ctx, policy, &sources).map(|(plan, vetoes)| {
                    for veto in vetoes {
                        errln!("warning: agent \"{}\": {veto}", ctx.agent_id.escape_debug());
                    }
                    plan
                })
            }
            None => claude::claude_plan(&ctx, policy),
        },
        Some(Room::Gemini) => {
            gemini::gemini_plan(&ctx, policy, launch_id.as_ref().expect("set for gemini"))
        }
        Some(Room::OpenCode) => opencode::opencode_plan(&ctx, policy),
        Some(Room::Codex(source)) => {
            let inventory = match source {
                InventorySource::None => Vec::new(),
                InventorySource::File(path) => {
                    let text = match launch::read_input(&path) {
                        Ok(text) => text,
                        Err(e) => {
                            return input_error(format!("cannot read {}: {e}", path.display()));
                        }
                    };
                    match inventory::parse_inventory(&text) {
                        Ok(inv) => inv,
                        Err(e) => return input_error(format!("{}: {e}", path.display())),
                    }
                }
                InventorySource::Run(bin) => {
                    // Taken where the reviewer runs: a trusted worktree's `.codex/config.toml`
                    // adds servers too.
                    // A relative binary path means the current directory, not the worktree.
                    let bin = if bin.components().count() > 1 && bin.is_relative() {
                        std::env::current_dir().map_or(bin.clone(), |cwd| cwd.join(&bin))
                    } else {
                        bin
                    };
                    let mut codex = std::process::Command::new(&bin);
                    if let Some(worktree) = ctx.worktree.as_deref().filter(|w| !w.is_empty()) {
                        if !Path::new(worktree).is_dir() {
                            return input_error(format!(
                                "--worktree {}: not a directory, so Codex's inventory cannot be \
                                 taken there",
                                diagnostic::printable(worktree)
                            ));
                        }
                        codex.current_dir(worktree);
                    }
                    match inventory::codex_inventory_from(codex, inventory::INVENTORY_TIMEOUT) {
                        Ok(inv) => inv,
                        Err(e) => {
                            errln!("error: {}: {e}", bin.display());
                            return ExitCode::from(1);
                        }
                    }
                }
            };
            codex::codex_plan(&ctx, policy, &inventory)
        }
    };
    for warning in launch::skip_warnings(&ctx, policy) {
        errln!("warning: {warning}");
    }
    let plan: LaunchPlan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            errln!("error: {e}");
            return ExitCode::from(1);
        }
    };

    let format = match common.format {
        RenderFormat::Lines => Some(ArgvFormat::Lines),
        RenderFormat::Json => Some(ArgvFormat::Json),
        RenderFormat::Shell => Some(ArgvFormat::Shell),
        RenderFormat::Plan => None,
    };
    let text = match format {
        Some(format) => launch::format_argv(&plan.argv, format),
        None => Ok(plan.to_json()),
    };
    match text {
        Ok(text) => {
            if ctx.is_gated() {
                errln!(
                    "warning: agent {:?}: no --server-url or no --kcap-bin, so every MCP server \
                 (the result channel and any allowlist) is gated off",
                    ctx.agent_id
                );
            }
            out!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The client room `render` renders for, with what only it needs (Claude needs nothing).
enum Room {
    Codex(InventorySource),
    Gemini,
    OpenCode,
}

enum InventorySource {
    File(PathBuf),
    Run(PathBuf),
    None,
}

fn export(what: ExportWhat) -> ExitCode {
    let registration = |args: RegistrationArgs, project_dir: Option<String>| {
        let entries = load(args.source.registry.as_deref())?;
        let opts = RegistrationOptions {
            command: args.command,
            server_url: args.server_url,
            project_dir,
        };
        Ok::<_, ExitCode>((entries, opts))
    };
    let text = match what {
        ExportWhat::ClaudeMcpJson(args) => match registration(args, None) {
            Ok((entries, opts)) => match claude_mcp_json(&entries, &opts) {
                Ok(text) => text,
                Err(e) => return input_error(e),
            },
            Err(code) => return code,
        },
        ExportWhat::CodexToml {
            common,
            project_dir,
        } => match registration(common, project_dir) {
            Ok((entries, opts)) => codex_toml(&entries, &opts),
            Err(code) => return code,
        },
        ExportWhat::Denylist(source) => match load(source.registry.as_deref()) {
            Ok(entries) => export::denylist(&entries),
            Err(code) => return code,
        },
        ExportWhat::JsonSchema => export::json_schema(),
    };
    out!("{text}");
    ExitCode::SUCCESS
}

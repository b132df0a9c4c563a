//! Copilot CLI's room: the reviewer launch over ACP (`copilot_plan`), its servers in
//! `--additional-mcp-config` ([`MCP_CONFIG_FILE`]) in a per-launch `COPILOT_HOME`
//! ([`COPILOT_HOME_DIR`]), the package cache check ([`preflight`]), and what generic code knows
//! about the client ([`SPEC`], [`CREDENTIALS`], [`MANAGED_FILES`], [`WORKTREE_CONFIG`]).
//!
//! Files: [`ready`] says when the servers are up (Copilot's log); with the `cli` feature,
//! `registration` (the file a person registers servers in), `loader` (how Copilot CLI loads it)
//! and `hostile` (`verify`'s hostile configuration).
//!
//! What Copilot CLI does, on which version, and the test that shows it (how it takes MCP
//! servers and names tools, its configuration sources and how each is closed, the package
//! cache): `docs/isolation/copilot.md`.

#[cfg(feature = "cli")]
pub mod registration;

/// `verify`: the hostile configuration of this client.
#[cfg(feature = "cli")]
pub mod hostile;

#[cfg(feature = "cli")]
pub mod loader;

pub mod ready;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::allowlist::Resolution;
use crate::clients::claude::Ordered;
use crate::clients::plan::EnvVar;
use crate::clients::plan::{AcpServer, Admitted, LaunchPlan, SessionNew};
use crate::clients::root::{CredentialSpec, ManagedFile, Root};
use crate::clients::{
    Client, LaunchContext, RenderError, acp_cwd, acp_servers, non_blank, option_value,
};

/// What Copilot CLI does with `${` in a server's `command`, `args` and `env`
/// ([`RenderError::Expansion`]; 1.0.102).
pub const EXPANDS: &str =
    "which Copilot CLI expands as a variable reference when it starts the server";

/// What generic code knows about Copilot CLI ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "copilot",
    display_name: "Copilot CLI",
    // the npm package `@github/copilot` installs `copilot`.
    binary: "copilot",
    stamps_driver: true,
    carries_model: true,
    carries_effort: false,
    credentials: CREDENTIALS,
    managed_files: &MANAGED_FILES,
    preflight: Some(preflight),
    acp: true,
    needs_worktree: true,
    brokered_only: false,
    uses_launch_id: false,
    unverified_isolation: false,
    builtins: &[],
    hides_builtins: false,
    launch_secrets: &[],
    door: &[DOOR],
    plan: |ctx, r, _inputs| Ok(copilot_plan(ctx, r)?),
    proof: crate::clients::spec::Proof::RealClient {
        tests: &[
            "conformance_copilot",
            "isolation_copilot",
            "differential_copilot",
            "verify_clients",
        ],
        versions: &["1.0.102"],
    },
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: Some(&hostile::VERIFY),
};

/// The client's words in `render copilot --help` and `export copilot --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Copilot CLI over ACP: servers in --additional-mcp-config, in a per-launch COPILOT_HOME where nothing else is configured",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --launch-dir <DIR> --worktree <DIR> [OPTIONS]",
    render_after_help: "\
Give --cache-dir DIR (the daemon's own, reused across launches) so that Copilot CLI's package
is unpacked once, in DIR/copilot, and a GitHub token or provider setting with --credential
(e.g. COPILOT_GITHUB_TOKEN).

Example:
  kcap-mcp-registry render copilot --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --cache-dir /var/cache/kcap --server-url URL --kcap-bin PATH --format plan",
    deprecated_flags: &[],
    deprecated_because: "",
    export_about: "Copilot CLI: `mcpServers` for $COPILOT_HOME/mcp-config.json",
    export_aliases: &[],
    export_after_help: None,
};

/// The argv every Copilot reviewer launch starts with.
pub const BASE_ARGS: [&str; 2] = ["--acp", "--stdio"];

/// The isolation flags after the servers' `--additional-mcp-config`: no built-in GitHub MCP
/// servers, no custom instructions (no effect over ACP on 1.0.102, see the module docs), no
/// questions, and no other package version than the one launched.
pub const ISOLATION_ARGS: [&str; 4] = [
    "--disable-builtin-mcps",
    "--no-custom-instructions",
    "--no-ask-user",
    "--no-auto-update",
];

/// `COPILOT_HOME` of the per-launch root, relative to the launch directory: the per-launch
/// home's `.copilot`, Copilot's default place, named explicitly so that nothing falls back
/// to the home (an explicit `COPILOT_HOME` also stops the `~/.agents/skills` lookup).
pub const COPILOT_HOME_DIR: &str = "home/.copilot";

/// The variable that points Copilot's package cache at the daemon's shared cache
/// directory: `<cache dir>/copilot`, whose `pkg/<platform>/<version>` holds the unpacked
/// package (the layout `$XDG_CACHE_HOME/copilot` has, so an existing cache is reused).
pub const PKG_CACHE_VAR: &str = "COPILOT_PKG_CACHE_HOME";

/// The cache directory's subdirectory the plan points [`PKG_CACHE_VAR`] at: `<cache
/// dir>/copilot`, everything under which [`preflight`] checks.
pub const PKG_CACHE_DIR: &str = "copilot";

/// Refuses a launch whose package cache another user could have changed: Copilot CLI runs
/// the package it finds in `<cache dir>/`[`PKG_CACHE_DIR`] without checking it, so code
/// planted there runs in the next reviewer, with its credentials (issue 34; measured on
/// 1.0.102, `isolation_copilot::copilot_refuses_an_unsafe_package_cache`). The check is
/// [`cache::check`](crate::clients::cache::check) of the cache directory and everything under
/// `<cache dir>/copilot`: owned by root or the daemon's user, writable by no one else, no link
/// leading out; nothing to check without a cache directory. What Copilot loads from there,
/// why that is enough and why the files are not hashed: `docs/isolation/copilot.md`, "The
/// package cache, checked before use".
///
/// # Errors
/// [`RenderError::UnsafeCache`] naming the path, what is wrong and the fix.
pub fn preflight(ctx: &LaunchContext) -> Result<(), RenderError> {
    match non_blank(&ctx.cache_dir) {
        Some(dir) if dir.starts_with('/') => crate::clients::cache::check(
            Client::Copilot,
            std::path::Path::new(dir),
            &[PKG_CACHE_DIR],
        ),
        _ => Ok(()),
    }
}

/// Copilot's own switches in every plan: no automatic update (the loader would otherwise run
/// a newer version found in a package directory instead of the one launched).
pub const SWITCHES: [(&str, &str); 1] = [("COPILOT_AUTO_UPDATE", "false")];

/// The `--available-tools` value of a launch that admits no tool: a name no tool has (no
/// server but ours is configured), since no `--available-tools` would make every tool
/// available.
pub const NO_TOOL: &str = "kcap-no-tool";

/// The longest tool name Copilot CLI 1.0.102 keeps; longer ones are cut (facts).
pub const MAX_TOOL_NAME: usize = 64;

/// The name Copilot CLI gives tool `tool` of server `server`: `<server>-<tool>`, every
/// character outside `[A-Za-z0-9_-]` replaced by `-`, cut to [`MAX_TOOL_NAME`] characters.
///
/// ```
/// use kcap_mcp_registry::clients::copilot::tool_name;
///
/// assert_eq!(tool_name("kcap-review", "get_pr_summary"), "kcap-review-get_pr_summary");
/// assert_eq!(tool_name("a.b", "c d"), "a-b-c-d");
/// ```
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{server}-{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_TOOL_NAME)
        .collect()
}

/// The `--additional-mcp-config` value: compact JSON `{"mcpServers":{<name>:{"type":"stdio",
/// "command":…,"args":[…],"env":{…}}}}`, servers and env in order.
pub fn additional_mcp_config(servers: &[AcpServer]) -> String {
    struct Entry<'s>(&'s AcpServer);
    impl Serialize for Entry<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let env: Vec<(&str, &str)> = self
                .0
                .env
                .iter()
                .map(|v| (v.name.as_str(), v.value.as_str()))
                .collect();
            let mut m = s.serialize_map(Some(4))?;
            m.serialize_entry("type", "stdio")?;
            m.serialize_entry("command", &self.0.command)?;
            m.serialize_entry("args", &self.0.args)?;
            m.serialize_entry("env", &Ordered(&env))?;
            m.end()
        }
    }
    let entries: Vec<(&str, Entry<'_>)> = servers
        .iter()
        .map(|s| (s.name.as_str(), Entry(s)))
        .collect();
    let root = [("mcpServers", Ordered(&entries))];
    serde_json::to_string(&Ordered(&root)).expect("serializing strings to JSON cannot fail")
}

/// The file of the launch directory that holds the reviewer's `--additional-mcp-config` JSON
/// (mode 0600), given as `@<path>`: "JSON string or file path (prefix with @)" (`copilot
/// --help`, 1.0.102), so the servers' secrets are in no argv.
pub const MCP_CONFIG_FILE: &str = "additional-mcp-config.json";

/// The Copilot CLI reviewer launch: argv [`BASE_ARGS`], `--additional-mcp-config
/// @<launch dir>/`[`MCP_CONFIG_FILE`] (that file holding [`additional_mcp_config`]) when a
/// server is injected, [`ISOLATION_ARGS`],
/// `--available-tools=<tool>` for each tool the policy admits ([`Admitted`]; [`tool_name`],
/// or `<server>` for all of a server's tools; [`NO_TOOL`] when none),
/// `--allow-tool=<server>(<tool>)` (or `=<server>`) for each as well, in injection then
/// catalog order (the result channel's first), then `--model M` when set; `session/new`
/// with the worktree and no servers. The environment is the per-launch root's (`HOME`, the
/// XDG directories, `TMPDIR`; `XDG_CACHE_HOME` always the per-launch one), then
/// `COPILOT_HOME` ([`COPILOT_HOME_DIR`], created empty), [`PKG_CACHE_VAR`] when the launch
/// has a [`LaunchContext::cache_dir`], [`SWITCHES`], then the credentials
/// ([`CREDENTIALS`]); the one file written is [`MCP_CONFIG_FILE`]; the daemon removes [`WORKTREE_CONFIG`] from the
/// worktree. Every injected server keeps its registry id as its name. The effort is not a
/// Copilot setting here and is ignored; the prompt goes in ACP `session/prompt`, which the
/// daemon sends. The daemon runs [`managed_preflight`](crate::clients::root::managed_preflight)
/// with [`MANAGED_FILES`] and [`preflight`] (the package cache) first.
///
/// # Errors
/// [`RenderError::Expansion`] when a server's `command`, an `args` value or an `env`
/// value contains `${`; [`RenderError::NeedsAbsolute`] without an absolute worktree, launch
/// directory or cache directory; [`RenderError::BlankAgentId`],
/// [`RenderError::BlankCapabilityUrl`], [`RenderError::MissingReviewContextUrl`];
/// [`RenderError::OptionLike`] for a model starting with `-`; the credential errors
/// ([`RenderError::CredentialNotAccepted`]).
///
/// ```
/// use kcap_mcp_registry::{Client, LaunchContext, Policy};
/// use kcap_mcp_registry::clients::dispatch::PlanInputs;
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     worktree: Some("/work/tree".into()),
///     launch_dir: Some("/run/kcap/l1".into()),
///     cache_dir: Some("/var/cache/kcap".into()),
///     ..LaunchContext::default()
/// };
/// let plan = Client::Copilot.plan(&ctx, &PlanInputs::new(Policy::Strict))?.plan;
/// assert_eq!(plan.env_value("COPILOT_HOME"), Some("/run/kcap/l1/home/.copilot"));
/// assert_eq!(plan.env_value("XDG_CACHE_HOME"), Some("/run/kcap/l1/home/.cache"));
/// assert_eq!(plan.env_value("COPILOT_PKG_CACHE_HOME"), Some("/var/cache/kcap/copilot"));
/// assert!(plan.worktree_remove.contains(&".github/hooks".to_string()));
/// assert!(!plan.argv.iter().any(|a| a.starts_with("--disable-mcp-server")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub(crate) fn copilot_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<LaunchPlan, RenderError> {
    ctx.require_launch_values()?;
    let cwd = acp_cwd(Client::Copilot, ctx)?;
    let model = option_value("model", &ctx.model)?;
    let (acp, servers) = acp_servers(ctx, resolution, |s| s.id.to_owned());
    for server in &acp {
        let expanded = |field: String| RenderError::Expansion {
            client: Client::Copilot,
            server: server.name.clone(),
            field,
            expands: EXPANDS,
        };
        if server.command.contains("${") {
            return Err(expanded("command".into()));
        }
        if let Some(i) = server.args.iter().position(|a| a.contains("${")) {
            return Err(expanded(format!("args[{i}]")));
        }
        if let Some(var) = server.env.iter().find(|v| v.value.contains("${")) {
            return Err(expanded(format!("env.{}", var.name)));
        }
    }
    let mut argv: Vec<String> = BASE_ARGS.map(String::from).into();
    if !acp.is_empty() {
        argv.extend([
            "--additional-mcp-config".into(),
            additional_mcp_config(&acp),
        ]);
    }
    argv.extend(ISOLATION_ARGS.map(String::from));
    let mut available = Vec::new();
    let mut allowed = Vec::new();
    for ((server, _), wire) in ctx.servers(resolution).zip(&servers) {
        let name = wire.wire_name.as_str();
        match Admitted::of(server).names() {
            None => {
                available.push(name.to_owned());
                allowed.push(name.to_owned());
            }
            Some(tools) => {
                for tool in tools {
                    available.push(tool_name(name, tool));
                    allowed.push(format!("{name}({tool})"));
                }
            }
        }
    }
    if available.is_empty() {
        available.push(NO_TOOL.into());
    }
    argv.extend(available.iter().map(|t| format!("--available-tools={t}")));
    argv.extend(allowed.iter().map(|t| format!("--allow-tool={t}")));
    if let Some(model) = model {
        argv.extend(["--model".into(), model.into()]);
    }
    let mut plan = LaunchPlan::rooted(Client::Copilot, ctx, &WORKTREE_CONFIG, argv)?;
    plan.argv_value_to_file("--additional-mcp-config", MCP_CONFIG_FILE, "@");
    let root = Root::of(Client::Copilot, ctx)?;
    // The shared cache directory holds the package only: the rest of Copilot's cache (device
    // id, search index slots, other package versions it would look for) stays per launch, in
    // the root's `XDG_CACHE_HOME`.
    let mut own = vec![EnvVar::new(
        "COPILOT_HOME",
        format!("{}/{COPILOT_HOME_DIR}", root.dir()),
    )];
    if let Some(cache) = non_blank(&ctx.cache_dir) {
        own.push(EnvVar::new(
            PKG_CACHE_VAR,
            format!("{cache}/{PKG_CACHE_DIR}"),
        ));
    }
    own.extend(SWITCHES.map(|(name, value)| EnvVar::new(name, value)));
    let at = plan
        .env
        .iter()
        .position(|v| v.name == "TMPDIR")
        .map_or(plan.env.len(), |i| i + 1);
    plan.env.splice(at..at, own);
    plan.dirs.push(COPILOT_HOME_DIR.into());
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers: Vec::new(),
    });
    plan.servers = servers;
    ready::wait_for_servers(&mut plan);
    Ok(plan)
}

/// The credentials and provider settings the daemon may hand a Copilot CLI reviewer (its
/// stored login lives in the user's `$COPILOT_HOME`, which the reviewer does not read): a
/// GitHub token (`COPILOT_GITHUB_TOKEN`, or `GITHUB_TOKEN`, both of which Copilot keeps out of
/// its MCP servers' environment; `GH_TOKEN` is refused, since Copilot 1.0.102 passes it on to
/// every MCP server), the GitHub host, and the settings of a bring-your-own-model endpoint
/// with its model. Not accepted: `COPILOT_PROVIDER_API_KEY_COMMAND` (runs a command for each
/// model request) and `COPILOT_PROVIDERS_CONFIG` (a configuration file).
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &[
        "COPILOT_GITHUB_TOKEN",
        "GITHUB_TOKEN",
        "COPILOT_GH_HOST",
        "GH_HOST",
        "COPILOT_PROVIDER_BASE_URL",
        "COPILOT_PROVIDER_TYPE",
        "COPILOT_PROVIDER_API_KEY",
        "COPILOT_PROVIDER_BEARER_TOKEN",
        "COPILOT_PROVIDER_WIRE_API",
        "COPILOT_PROVIDER_TRANSPORT",
        "COPILOT_PROVIDER_AZURE_API_VERSION",
        "COPILOT_PROVIDER_MODEL_ID",
        "COPILOT_PROVIDER_WIRE_MODEL",
        "COPILOT_PROVIDER_MAX_PROMPT_TOKENS",
        "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS",
        "COPILOT_PROVIDER_HEADERS",
        "COPILOT_MODEL",
        "COPILOT_OFFLINE",
    ],
    files: &[],
};

/// How Copilot CLI's bring-your-own-model provider goes through the reviewer's door: it sends
/// `COPILOT_PROVIDER_API_KEY` and `COPILOT_PROVIDER_BEARER_TOKEN` as `authorization: Bearer`
/// to `COPILOT_PROVIDER_BASE_URL` (measured on 1.0.102, the default provider type, OpenAI
/// chat completions: `isolation_copilot::copilot_behind_the_door_keeps_the_key_outside_and_reaches_only_the_door`,
/// a whole review turn through the door, every request carrying the daemon's key from the
/// door and no header the token; 1.0.102 keeps the provider key out of its MCP servers'
/// environment even without the door, so there the door keeps it out of the client itself
/// and its files). The settings are the model's and the offline switch;
/// `COPILOT_PROVIDER_TYPE`, `_WIRE_API`, `_TRANSPORT` and `_AZURE_API_VERSION` (other wires, whose
/// key header is not measured), `COPILOT_PROVIDER_HEADERS` (may carry a secret), the GitHub
/// token and host are refused behind the door.
pub const DOOR: crate::clients::door::DoorSpec = crate::clients::door::DoorSpec {
    base_url: "COPILOT_PROVIDER_BASE_URL",
    keys: &[
        crate::clients::door::DoorKey {
            var: "COPILOT_PROVIDER_API_KEY",
            header: "authorization",
            prefix: "Bearer ",
        },
        crate::clients::door::DoorKey {
            var: "COPILOT_PROVIDER_BEARER_TOKEN",
            header: "authorization",
            prefix: "Bearer ",
        },
    ],
    key_files: &[],
    settings: &[
        "COPILOT_OFFLINE",
        "COPILOT_MODEL",
        "COPILOT_PROVIDER_MODEL_ID",
        "COPILOT_PROVIDER_WIRE_MODEL",
        "COPILOT_PROVIDER_MAX_PROMPT_TOKENS",
        "COPILOT_PROVIDER_MAX_OUTPUT_TOKENS",
    ],
};

/// The reviewed worktree's files and directories Copilot CLI 1.0.102 reads as configuration,
/// which the daemon removes before the launch. Read in any folder: the repository's hooks
/// (`.github/hooks`, searched recursively) and the instruction files that reach the system
/// prompt. Read only in a trusted folder (the per-launch root trusts none; removed all the
/// same): the repository's settings (hooks, `disabledMcpServers`, plugins, hook, skill,
/// agent and instruction directories), the Claude-compatible settings (hooks, plugins), the
/// workspace MCP files (`.mcp.json`, else `.github/mcp.json`), the LSP servers. Discovered
/// but not seen reaching an ACP session: agents, skills, extensions.
pub const WORKTREE_CONFIG: [&str; 19] = [
    ".github/hooks",
    "AGENTS.md",
    "CLAUDE.md",
    "GEMINI.md",
    ".github/copilot-instructions.md",
    ".github/instructions",
    ".github/copilot/settings.json",
    ".github/copilot/settings.local.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
    ".github/mcp.json",
    ".github/lsp.json",
    ".github/agents",
    ".claude/agents",
    ".github/skills",
    ".agents/skills",
    ".claude/skills",
    ".github/extensions",
];

/// The administrator files Copilot CLI 1.0.102 reads whatever its environment says (found
/// in its runtime, measured under a private mount namespace).
pub const MANAGED_FILES: [ManagedFile; 2] = [
    ManagedFile {
        path: "/etc/github-copilot/managed-settings.json",
        effect: "can deny or allowlist MCP servers (our own included), lock out every \
                 server passed on the command line, deny their tool calls, force plugins and \
                 sandboxing, and run telemetry header commands",
    },
    ManagedFile {
        path: "/etc/github-copilot/policy.d",
        effect: "holds hooks that run in every session and can deny any tool call",
    },
];

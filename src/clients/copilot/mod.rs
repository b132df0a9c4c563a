//! GitHub Copilot CLI (pinned `@github/copilot@1.0.102`): the reviewer launch over ACP
//! ([`copilot_plan`]), the [`inventory`] of the MCP servers it would start on its
//! own, and, with the `cli` feature, its registration file (`registration`) and loader model
//! (`loader`).
//!
//! How Copilot CLI 1.0.102 receives, isolates and trusts MCP servers (measured offline on
//! 1.0.102, see `tests/conformance_acp.rs`, and the facts file's Copilot sections):
//! - `copilot --acp --stdio` speaks the Agent Client Protocol. It **rejects stdio servers
//!   sent in `session/new`** ("Rejecting non-http/sse MCP server"), so the servers come in
//!   `--additional-mcp-config '<json>'` (`{"mcpServers":{<name>:{"type":"stdio",…}}}`) and
//!   `session/new` carries an empty `mcpServers`; they start at `session/new`.
//! - The user's `$COPILOT_HOME/mcp-config.json` servers start too, and, in a trusted folder
//!   (`COPILOT_ALLOW_ALL=true` in the environment, or `trustedFolders`), the workspace's
//!   `.mcp.json` (else `.github/mcp.json`). A server of ours replaces a same-named one of
//!   those files; every other one is disabled by name with `--disable-mcp-server=<name>`
//!   (one per flag, from the [`inventory`]). Disabling a name nothing has is
//!   accepted (measured). `COPILOT_ALLOW_ALL` is removed from the environment.
//! - `--disable-builtin-mcps` (the GitHub MCP servers), `--no-custom-instructions` (no
//!   `AGENTS.md` and the like from the reviewed repository), `--no-ask-user`.
//! - Tools: `--available-tools` hides every tool it does not name, built-in ones included;
//!   a tool is `<server>-<tool>` ([`tool_name`]), a bare `<server>` names all of that
//!   server's tools, and `<server>-*` names nothing (measured from the tool list Copilot sent
//!   to a local model endpoint). With no `--available-tools` at all (or an empty one) every
//!   tool is available, the built-in shell and file tools too, so a launch that admits no
//!   tool names [`NO_TOOL`] instead.
//! - Approval: `--allow-tool=<server>(<tool>)` (or `=<server>` for all its tools) runs the
//!   tool without asking, as `--allow-all-tools` does (both measured: the recorder got the
//!   `tools/call`, no `session/request_permission` reached the ACP client); without either,
//!   Copilot asks the ACP client. The per-tool form is used: it approves exactly what the
//!   policy admits, so a tool that `--available-tools` failed to hide would still ask the
//!   daemon rather than run.
//! - `${VAR}` is expanded at spawn in `command`, `args` and `env` (an unset one stays
//!   literal), so a value holding `${` is refused ([`RenderError::CopilotExpansion`]).
//! - Every server inherits Copilot's whole environment, so the registry's env names are
//!   removed from it.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;

pub mod inventory;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::allowlist::Resolution;
use crate::clients::claude::Ordered;
use crate::clients::plan::{AcpServer, Admitted, LaunchPlan, SessionNew};
use crate::clients::root::CredentialSpec;
use crate::clients::{Client, LaunchContext, RenderError, acp_cwd, acp_servers, option_value};
use inventory::InheritedServer;

/// The argv every Copilot reviewer launch starts with.
pub const BASE_ARGS: [&str; 2] = ["--acp", "--stdio"];

/// The isolation flags after the servers' `--additional-mcp-config`.
pub const ISOLATION_ARGS: [&str; 3] = [
    "--disable-builtin-mcps",
    "--no-custom-instructions",
    "--no-ask-user",
];

/// Environment variables removed from the client's environment besides the registry's env
/// names: `COPILOT_ALLOW_ALL` approves every tool, and its value `true` trusts the
/// worktree, which loads the reviewed repository's MCP servers, plugins and hooks.
pub const REMOVED_ENV: [&str; 1] = ["COPILOT_ALLOW_ALL"];

/// The `--available-tools` value of a launch that admits no tool: a name no tool has (every
/// server but ours is disabled), since no `--available-tools` would make every tool
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

/// The Copilot CLI reviewer launch: argv [`BASE_ARGS`], `--additional-mcp-config <json>`
/// ([`additional_mcp_config`]) when a server is injected, [`ISOLATION_ARGS`], then
/// `--disable-mcp-server=<name>` for every server of `inherited` (the
/// [`inventory`]) whose name is not one of ours, `--available-tools=<tool>` for each
/// tool the policy admits ([`Admitted`]; [`tool_name`], or `<server>` for all of a server's
/// tools; [`NO_TOOL`] when none), `--allow-tool=<server>(<tool>)` (or `=<server>`) for each
/// as well, in injection then catalog order (the result channel's first), then `--model M`
/// when set; `session/new` with the worktree and no servers; env: none set; removed: the
/// registry's env names and [`REMOVED_ENV`]; no files. Every injected server keeps its
/// registry id as its name. The effort is not a Copilot setting here and is ignored; the
/// prompt goes in ACP `session/prompt`, which the daemon sends.
///
/// # Errors
/// [`RenderError::CopilotExpansion`] when a server's `command`, an `args` value or an `env`
/// value contains `${`; [`RenderError::NeedsAbsolute`] without an absolute worktree;
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`]; [`RenderError::OptionLike`] for a model
/// starting with `-`.
///
/// ```
/// use kcap_mcp_registry::{LaunchContext, Policy};
/// use kcap_mcp_registry::clients::copilot::{copilot_plan, inventory::parse_inventory};
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     worktree: Some("/work/tree".into()),
///     launch_dir: Some("/run/kcap/l1".into()),
///     ..LaunchContext::default()
/// };
/// let inherited = parse_inventory(r#"{"mcpServers":{"corp":{"source":"user","enabled":true},
///   "kcap-flow-result":{"source":"workspace","enabled":true}}}"#)?;
/// let plan = copilot_plan(&ctx, &ctx.resolve(Policy::Strict)?, &inherited)?;
/// assert!(plan.argv.contains(&"--disable-mcp-server=corp".to_string()));
/// // A same-named server is replaced by ours, not disabled.
/// assert!(!plan.argv.contains(&"--disable-mcp-server=kcap-flow-result".to_string()));
/// assert_eq!(plan.env_value("COPILOT_ALLOW_ALL"), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn copilot_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    inherited: &[InheritedServer],
) -> Result<LaunchPlan, RenderError> {
    ctx.require_launch_values()?;
    let cwd = acp_cwd(Client::Copilot, ctx)?;
    let model = option_value("model", &ctx.model)?;
    let (acp, servers) = acp_servers(ctx, resolution, |s| s.id.to_owned());
    for server in &acp {
        let expanded = |field: String| RenderError::CopilotExpansion {
            server: server.name.clone(),
            field,
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
    let mut disabled = std::collections::BTreeSet::new();
    for server in inherited {
        if !acp.iter().any(|s| s.name == server.name) && disabled.insert(server.name.as_str()) {
            argv.push(format!("--disable-mcp-server={}", server.name));
        }
    }
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
    let mut plan = LaunchPlan::rooted(Client::Copilot, ctx, &CREDENTIALS, &WORKTREE_CONFIG, argv)?;
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers: Vec::new(),
    });
    plan.servers = servers;
    Ok(plan)
}

/// The credentials and provider settings the daemon may hand a Copilot CLI reviewer: the
/// GitHub tokens Copilot CLI reads, in its order of precedence, and the provider settings
/// of a bring-your-own-model endpoint.
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &[
        "COPILOT_GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "COPILOT_PROVIDER_BASE_URL",
        "COPILOT_MODEL",
        "COPILOT_OFFLINE",
    ],
    files: &[],
};

/// The reviewed worktree's files Copilot CLI reads as configuration: the workspace MCP
/// files.
pub const WORKTREE_CONFIG: [&str; 2] = [".mcp.json", ".github/mcp.json"];

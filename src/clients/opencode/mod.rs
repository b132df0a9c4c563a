//! OpenCode (pinned `opencode-ai@1.18.33`): the reviewer launch over ACP
//! ([`opencode_plan`]) and, with the `cli` feature, its registration file (`registration`) and loader model
//! (`loader`).
//!
//! How OpenCode 1.18.33 receives, isolates and trusts MCP servers (measured offline on
//! 1.18.33, see `tests/conformance_acp.rs`, and the public reports listed in the facts file):
//! - `opencode acp` speaks the Agent Client Protocol on stdin/stdout; the servers come in the
//!   ACP `session/new` params, their `args` and `env` taken literally (no expansion).
//! - Every configuration layer can add MCP servers: the global config
//!   (`$XDG_CONFIG_HOME/opencode/`), `OPENCODE_CONFIG`, `OPENCODE_CONFIG_DIR`, the project's
//!   `opencode.json` (found in parent directories too) and `OPENCODE_CONFIG_CONTENT`. An
//!   ACP server named like a configured one does not stop the configured one from starting.
//!   `OPENCODE_PURE=1` and `OPENCODE_CONFIG_DIR=<empty dir>` leave the user's servers
//!   running.
//! - `~/.opencode/opencode.json` is read too, whatever else is set (measured on 1.18.33: its
//!   config loader always adds `<home>/.opencode` to the config directories, after
//!   `OPENCODE_CONFIG_CONTENT`), where `<home>` is `OPENCODE_TEST_HOME`, else the OS home.
//! - What holds: `XDG_CONFIG_HOME` pointed at a directory of its own inside the per-launch
//!   directory (OpenCode creates `opencode/` in it), `OPENCODE_TEST_HOME` at another one (it
//!   moves only the home OpenCode searches for `.opencode`; the XDG data, cache and state
//!   directories keep following `HOME`/`XDG_*`), `OPENCODE_DISABLE_PROJECT_CONFIG=1`, and
//!   `OPENCODE_CONFIG`, `OPENCODE_CONFIG_DIR`, `OPENCODE_CONFIG_CONTENT` removed.
//!   `OPENCODE_TEST_HOME` is a hook OpenCode reads for its own tests; the conformance test
//!   fails if a later version stops honouring it.
//!   **Trade-off:** the user's global `opencode.json` is not read, so providers, models and
//!   options configured there are lost for the reviewer; credentials stay, since they live
//!   in `$XDG_DATA_HOME/opencode/auth.json`, and so do providers configured through env
//!   variables. The alternative that keeps the user's config,
//!   `OPENCODE_CONFIG_CONTENT` disabling each inherited server by name, needs an inventory
//!   of every layer's server names (there is no wildcard) and fails open on any name it
//!   misses; it is not used.
//! - The ACP front end reaches OpenCode's own server on the loopback interface over HTTP,
//!   honouring `HTTP_PROXY`/`HTTPS_PROXY`: with a proxy set and loopback not in `NO_PROXY`,
//!   `session/new` fails ("OpenCode service failure"). The daemon's environment must
//!   exclude `127.0.0.1` from its proxy (measured on 1.18.33).
//! - `--pure`: no external plugins, which could start processes of their own.
//! - Permissions come from env `OPENCODE_PERMISSION` ([`permission_json`]): deny by
//!   default, the read-only built-in tools allowed, and exactly the admitted MCP tools
//!   ([`Admitted`]) allowed as `<server>_<tool>`; an MCP tool without an allow rule is
//!   removed from the model's toolset.
//! - The model is an ACP session setting, not a flag of `opencode acp`; the effort is not a
//!   setting; both are ignored here.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;

use serde::Serialize;

use crate::allowlist::Resolution;
use crate::clients::claude::Ordered;
use crate::clients::plan::{Admitted, EnvVar, LaunchPlan, SessionNew};
use crate::clients::root::{CredentialSpec, ManagedFile};
use crate::clients::{Client, LaunchContext, RenderError, acp_cwd, acp_servers};
use crate::model::McpServer;

/// The directory, relative to the per-launch directory, given to OpenCode as
/// `XDG_CONFIG_HOME`.
pub const CONFIG_HOME: &str = "opencode-xdg-config";

/// The directory, relative to the per-launch directory, given to OpenCode as
/// `OPENCODE_TEST_HOME` (the home it searches for `.opencode/`).
pub const SEARCH_HOME: &str = "opencode-home";

/// Environment variables removed from the client's environment: each adds configuration,
/// and so MCP servers, on top of the global config.
pub const REMOVED_ENV: [&str; 3] = [
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_CONFIG_CONTENT",
];

/// OpenCode's built-in tools a reviewer may use without approval (they only read).
pub const READ_TOOLS: [&str; 4] = ["read", "grep", "glob", "list"];

/// OpenCode's built-in tools denied by name (the default rule denies them too; naming them
/// keeps the denial if a later OpenCode reads the rules differently).
pub const DENIED_TOOLS: [&str; 9] = [
    "write",
    "edit",
    "patch",
    "bash",
    "webfetch",
    "websearch",
    "task",
    "skill",
    "todowrite",
];

/// The tool name OpenCode gives tool `tool` of server `server`: `<server>_<tool>` with
/// every character outside `[A-Za-z0-9_-]` replaced by `_`. `tool` `*` stays a wildcard.
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let tool = if tool == "*" { "*".into() } else { clean(tool) };
    format!("{}_{tool}", clean(server))
}

/// The `OPENCODE_PERMISSION` value: a compact JSON object whose rules, in order, are
/// `"*":"deny"`, `"allow"` for each of [`READ_TOOLS`], `"deny"` for each of
/// [`DENIED_TOOLS`], then `"allow"` for each admitted tool of each injected server
/// (`<wire name>_<tool>`, or `<wire name>_*` for [`Admitted::All`]).
///
/// ```
/// use kcap_mcp_registry::clients::opencode::permission_json;
/// use kcap_mcp_registry::Registry;
///
/// let analytics = Registry::compiled().lookup("kcap-analytics").unwrap();
/// let json = permission_json(&[(analytics, "kcap-analytics")]);
/// assert!(json.starts_with(r#"{"*":"deny","read":"allow""#));
/// assert!(json.ends_with(r#""todowrite":"deny","kcap-analytics_*":"allow"}"#));
/// ```
pub fn permission_json(servers: &[(&McpServer, &str)]) -> String {
    let mut rules: Vec<(String, &str)> = vec![("*".into(), "deny")];
    rules.extend(READ_TOOLS.iter().map(|t| ((*t).into(), "allow")));
    rules.extend(DENIED_TOOLS.iter().map(|t| ((*t).into(), "deny")));
    for (server, wire) in servers {
        match Admitted::of(server).names() {
            None => rules.push((tool_name(wire, "*"), "allow")),
            Some(tools) => rules.extend(tools.iter().map(|t| (tool_name(wire, t), "allow"))),
        }
    }
    to_json(&Ordered(&rules))
}

fn to_json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("serializing strings to JSON cannot fail")
}

/// The OpenCode reviewer launch: argv `acp --pure`; env `XDG_CONFIG_HOME=<launch
/// dir>/`[`CONFIG_HOME`], `OPENCODE_TEST_HOME=<launch dir>/`[`SEARCH_HOME`],
/// `OPENCODE_DISABLE_PROJECT_CONFIG=1` and `OPENCODE_PERMISSION` ([`permission_json`]);
/// removed: the registry's env names (OpenCode passes its whole environment to every server)
/// and [`REMOVED_ENV`]; every injected server (the `inject` servers by their condition, then
/// the allowlisted ones, with the env values of this launch's result delivery and snapshot)
/// in `session/new` under its registry id.
///
/// # Errors
/// [`RenderError::NeedsAbsolute`] without an absolute worktree or launch directory;
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`].
pub fn opencode_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<LaunchPlan, RenderError> {
    ctx.require_launch_values()?;
    let cwd = acp_cwd(Client::OpenCode, ctx)?;
    let (mcp_servers, servers) = acp_servers(ctx, resolution, |s| s.id.to_owned());
    let admitted: Vec<(&McpServer, &str)> = ctx
        .servers(resolution)
        .zip(&servers)
        .map(|((server, _), wire)| (server, wire.wire_name.as_str()))
        .collect();
    let mut plan = LaunchPlan::rooted(
        Client::OpenCode,
        ctx,
        &CREDENTIALS,
        &WORKTREE_CONFIG,
        vec!["acp".into(), "--pure".into()],
    )?;
    plan.env.extend([
        EnvVar::new("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
        EnvVar::new("OPENCODE_PERMISSION", permission_json(&admitted)),
    ]);
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers,
    });
    plan.servers = servers;
    Ok(plan)
}

/// The credentials and provider settings the daemon may hand an OpenCode reviewer: the
/// providers' API keys.
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"],
    files: &[],
};

/// The reviewed worktree's files OpenCode reads as configuration: the project's
/// `opencode.json`/`opencode.jsonc` and `.opencode/` folder.
pub const WORKTREE_CONFIG: [&str; 3] = ["opencode.json", "opencode.jsonc", ".opencode"];

/// Administrator files OpenCode reads whatever its environment says.
pub const MANAGED_FILES: [ManagedFile; 1] = [ManagedFile {
    path: "/etc/opencode/opencode.json",
    effect: "adds configuration, MCP servers and permissions included",
}];

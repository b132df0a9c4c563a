//! Gemini CLI (pinned `@google/gemini-cli@0.61.0`): the reviewer launch over ACP
//! ([`gemini_plan`]) and, with the `cli` feature, its registration file (`registration`) and loader model
//! (`loader`).
//!
//! How Gemini CLI 0.61.0 receives, gates and trusts MCP servers (measured offline on 0.61.0,
//! see `tests/conformance_acp.rs`, and the public reports listed in the facts file):
//! - `gemini --acp` speaks the Agent Client Protocol on stdin/stdout; the servers come in the
//!   ACP `session/new` params (`mcpServers`).
//! - The user's `~/.gemini/settings.json` and the project's `.gemini/settings.json` add
//!   servers of their own, and a project file can widen the settings' allow list. The one
//!   gate that holds is `--allowed-mcp-server-names`: it replaces the settings' allow and
//!   exclude lists, a project cannot widen it, and it gates ACP-supplied servers too. Names
//!   match exactly; an empty list means no gate, so a launch without servers passes a name
//!   that nothing has (`kcap-deny-<launch id>`).
//! - Because a reviewed repository can declare a server under any fixed name we allow, every
//!   injected server is named `<stem>-<launch id>` ([`LaunchId::wire_name`]): a random 64-bit
//!   suffix per launch, shared by the allow list and `session/new`; the stem is the server's
//!   registry `alias`, or its id.
//! - An untrusted folder silently starts no MCP server, ACP ones included: `--skip-trust`
//!   trusts the worktree for this session only.
//! - `--approval-mode yolo`: without it Gemini asks before running the result tool, and an
//!   unattended reviewer cannot answer. What it auto-approves follows the policy through what
//!   is injected: [`Policy::Strict`](crate::Policy::Strict) injects only `read_only` servers (see the README's
//!   policy table).
//! - ACP `env` values are expanded (`${VAR}`), `args` are not: a value holding `${` is
//!   refused ([`RenderError::GeminiExpansion`]).
//! - Every server inherits Gemini's environment, less names that look like secrets: a
//!   `KCAP_FLOW_AGENT_ID` in the daemon's own environment reached `kcap-review` (measured), so
//!   the registry's env names are removed from the client's environment.
//! - Tool names reach the model as `mcp_<wire name>_<tool>` ([`qualified_tool_name`]). Over
//!   63 characters Gemini cuts them to the first 30, `...`, the last 30, and logs
//!   `Truncating MCP tool name "…" to fit within the 64 character limit. This tool may
//!   require user approval.` to its debug log only (nothing on stderr in `--acp` mode).
//!   Measured on 0.61.0 (2026-11-30) with a local stand-in for the model API
//!   (`GOOGLE_GEMINI_BASE_URL` at a loopback server that records each `streamGenerateContent`
//!   request and answers with a `functionCall`), `--approval-mode yolo`, and the server
//!   `kcap-review-context-0123456789abcdef` serving `get_branch_authored_mcp_configs`:
//!   - the model is offered `mcp_kcap-review-context-012345...et_branch_authored_mcp_configs`
//!     (63 characters), never the whole name;
//!   - a call by that cut name runs the tool without a permission request (the server got
//!     `tools/call get_branch_authored_mcp_configs`);
//!   - a call by the whole 72-character name is answered `Tool "…" not found in registry.`
//!     and never reaches the server. So the cut name works only while the model copies it
//!     exactly, and approval rules written for the server's real tool names do not match it.
//!
//!   With the registry's `alias = "kcap-rctx"` the name is
//!   `mcp_kcap-rctx-<16 hex>_get_branch_authored_mcp_configs` (62): offered whole, and a call
//!   by it runs the tool (same recipe). Registry rule `tool-name-length` keeps every tool of
//!   every server within 63 with any 16-hex launch id ([`GEMINI_TOOL_NAMES`]), so no
//!   launch reaches the cut.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;

use crate::allowlist::Resolution;
use crate::clients::plan::{LaunchId, LaunchPlan, SessionNew};
use crate::clients::root::{CredentialSpec, ManagedFile};
use crate::clients::{Client, LaunchContext, RenderError, acp_cwd, acp_servers, option_value};
use crate::model::GEMINI_TOOL_NAMES;

/// The longest tool name Gemini CLI 0.61.0 passes on uncut: 63
/// ([`GEMINI_TOOL_NAMES`], the row registry rule `tool-name-length` checks).
pub const MAX_TOOL_NAME: usize = GEMINI_TOOL_NAMES.max_len;

/// The name Gemini CLI gives tool `tool` of the server named `wire_name`:
/// `mcp_<wire name>_<tool>` (before its replacement of characters outside
/// `[A-Za-z0-9_.:-]`, which registry ids, aliases and tool names never hold).
pub fn qualified_tool_name(wire_name: &str, tool: &str) -> String {
    GEMINI_TOOL_NAMES.qualified(wire_name, tool)
}

/// The value of `--allowed-mcp-server-names` when no server is injected: a name no server
/// has, since an empty list would mean no gate at all.
pub fn deny_all_name(launch_id: &LaunchId) -> String {
    launch_id.alias("kcap-deny")
}

/// The Gemini CLI reviewer launch: argv `--acp --skip-trust --approval-mode yolo
/// --allowed-mcp-server-names <wire names, comma-separated>`, then `--model M` when set; the
/// servers in `session/new` under their aliased names; the registry's env names removed from
/// the environment; no files. Every injected server is aliased: the `inject` servers (the
/// result channel, and `kcap-review-context` in a borrowed-snapshot review) as much as the
/// allowlisted ones, with their env values for this launch's result delivery and snapshot
/// ([`LaunchContext::result_delivery`], [`LaunchContext::snapshot`]). The effort is not a
/// Gemini setting and is ignored; the prompt goes in ACP `session/prompt`, which the daemon
/// sends.
///
/// # Errors
/// [`RenderError::GeminiExpansion`] when a server's env value contains `${`;
/// [`RenderError::NeedsAbsolute`] without an absolute worktree; [`RenderError::BlankAgentId`],
/// [`RenderError::BlankCapabilityUrl`], [`RenderError::MissingReviewContextUrl`];
/// [`RenderError::OptionLike`] for a model starting with `-`.
///
/// ```
/// use kcap_mcp_registry::{LaunchContext, Policy};
/// use kcap_mcp_registry::clients::{gemini::gemini_plan, plan::LaunchId};
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     worktree: Some("/work/tree".into()),
///     launch_dir: Some("/run/kcap/l1".into()),
///     ..LaunchContext::default()
/// };
/// let id = LaunchId::from_hex("0123456789abcdef")?;
/// let plan = gemini_plan(&ctx, &ctx.resolve(Policy::Strict)?, &id)?;
/// assert_eq!(plan.argv[4..], ["--allowed-mcp-server-names", "kcap-flow-result-0123456789abcdef"]);
/// let session = plan.session_new.unwrap();
/// assert_eq!(session.mcp_servers[0].name, "kcap-flow-result-0123456789abcdef");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn gemini_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    launch_id: &LaunchId,
) -> Result<LaunchPlan, RenderError> {
    ctx.require_launch_values()?;
    let cwd = acp_cwd(Client::Gemini, ctx)?;
    let model = option_value("model", &ctx.model)?;
    let (mcp_servers, servers) = acp_servers(ctx, resolution, |s| launch_id.wire_name(s));
    for (wire, acp) in servers.iter().zip(&mcp_servers) {
        if let Some(var) = acp.env.iter().find(|v| v.value.contains("${")) {
            return Err(RenderError::GeminiExpansion {
                server: wire.id.clone(),
                field: format!("env.{}", var.name),
            });
        }
    }
    let allowed = if servers.is_empty() {
        deny_all_name(launch_id)
    } else {
        let names: Vec<&str> = servers.iter().map(|s| s.wire_name.as_str()).collect();
        names.join(",")
    };
    let mut argv: Vec<String> = [
        "--acp",
        "--skip-trust",
        "--approval-mode",
        "yolo",
        "--allowed-mcp-server-names",
        &allowed,
    ]
    .map(String::from)
    .into();
    if let Some(model) = model {
        argv.extend(["--model".into(), model.into()]);
    }
    let mut plan = LaunchPlan::rooted(Client::Gemini, ctx, &CREDENTIALS, &WORKTREE_CONFIG, argv)?;
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers,
    });
    plan.servers = servers;
    Ok(plan)
}

/// The credentials and provider settings the daemon may hand a Gemini CLI reviewer: API
/// keys, the API endpoint, and the Google Cloud project settings.
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &[
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI",
    ],
    files: &[],
};

/// The reviewed worktree's files Gemini CLI reads as configuration: the project's
/// `.gemini/` folder (settings with MCP servers, hooks, tool exclusions; `.gemini/.env`)
/// and `.env` (loaded into its environment and its servers').
pub const WORKTREE_CONFIG: [&str; 2] = [".gemini", ".env"];

/// Administrator files Gemini CLI reads whatever `HOME` says.
pub const MANAGED_FILES: [ManagedFile; 2] = [
    ManagedFile {
        path: "/etc/gemini-cli/settings.json",
        effect: "overrides every user and project setting, MCP servers included",
    },
    ManagedFile {
        path: "/etc/gemini-cli/system-defaults.json",
        effect: "sets defaults under every setting, MCP servers included",
    },
];

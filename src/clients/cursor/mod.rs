//! Cursor's room: the reviewer launch over ACP (`cursor_plan`, argv [`ARGV`]) and what generic
//! code knows about the client ([`SPEC`], [`WORKTREE_CONFIG`]). Cursor is not installable here:
//! nothing of it was measured, so every plan is unverified ([`ISOLATION_REASON`]) and refused
//! unless the caller opts in (`UnverifiedIsolation::Allow`).
//!
//! Files: with the `cli` feature, `registration` (the file a person registers servers in) and
//! `loader` (how Cursor loads it, from the original system's facts).
//!
//! What Cursor is documented and reported to do, and why it stays refused (leads, not
//! measured): `docs/isolation/cursor.md`.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;

use crate::allowlist::Resolution;
use crate::clients::dispatch::UnverifiedIsolation;
use crate::clients::plan::{Isolation, LaunchPlan, SessionNew};
use crate::clients::root::CredentialSpec;
use crate::clients::{
    Client, LaunchContext, RenderError, acp_cwd, acp_servers, refuse_unknown_expansion,
};

/// Cursor's built-in tools that run unasked in its reviewer: under `--force` every tool runs
/// without a question, its own ones too (facts only: its documentation of `--force`; the
/// tools are not listed here, so `*`), and nothing hides them.
pub const BUILTINS: &[crate::clients::tools::Builtin] = &[crate::clients::tools::Builtin::new(
    "*",
    crate::clients::tools::ToolKind::Run,
)];

/// What generic code knows about Cursor ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "cursor",
    display_name: "Cursor",
    // Cursor's installer names it `agent` (cursor.com/docs/cli/installation; older installs: `cursor-agent`).
    binary: "agent",
    stamps_driver: true,
    carries_model: false,
    carries_effort: false,
    credentials: CredentialSpec::NONE,
    managed_files: &[],
    preflight: None,
    acp: true,
    needs_worktree: true,
    brokered_only: false,
    uses_launch_id: false,
    unverified_isolation: true,
    builtins: BUILTINS,
    hides_builtins: false,
    launch_secrets: &[],
    door: &[],
    plan: |ctx, r, inputs| Ok(cursor_plan(ctx, r, inputs.unverified_isolation)?),
    proof: crate::clients::spec::Proof::FactsOnly,
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: None,
};

/// The client's words in `render cursor --help` and `export cursor --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Cursor over ACP (facts only, not measured): servers in `session/new`; isolation from the user's ~/.cursor/mcp.json unverified",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --launch-dir <DIR> --worktree <DIR> [OPTIONS]",
    render_after_help: "\
Cursor is not installable here, so its isolation was never measured: the plan says
\"isolation\": {\"status\": \"unverified\"}, and it is refused under either policy unless
--allow-unverified-isolation is given (then a warning is printed).

Example:
  kcap-mcp-registry render cursor --allow-unverified-isolation --agent-id a1 --launch-dir /run/kcap/l1 --worktree /work/tree --allowlist kcap-review --server-url URL --kcap-bin PATH --format plan",
    deprecated_flags: &[],
    deprecated_because: "",
    export_about: "Cursor: `mcpServers` for ~/.cursor/mcp.json",
    export_aliases: &[],
    export_after_help: None,
};

/// The argv of every Cursor reviewer (facts "Cursor", \[K\]).
pub const ARGV: [&str; 4] = ["acp", "--force", "--approve-mcps", "--trust"];

/// Why a Cursor plan is [`Isolation::Unverified`].
pub const ISOLATION_REASON: &str = "whether Cursor starts the MCP servers of the user's \
    ~/.cursor/mcp.json (which registration fills, kcap-flows included) beside the injected ones \
    was never established (facts [K] only; Cursor is not installable here)";

/// The Cursor reviewer launch: argv [`ARGV`]; every injected server (the `inject` servers by
/// their condition, then the allowlisted ones, with this launch's result delivery and
/// snapshot) in `session/new` under its registry id; the per-launch root's environment
/// ([`LaunchPlan::rooted`]: built from empty, `HOME` in the launch directory); no files;
/// [`Isolation::Unverified`] with [`ISOLATION_REASON`].
///
/// The plan is refused unless `unverified` is [`UnverifiedIsolation::Allow`], under either
/// policy; a caller that carries it out should warn (the CLI and [`Client::plan`] do).
///
/// # Errors
/// [`RenderError::UnverifiedIsolation`] (above); [`RenderError::Expansion`] for a value
/// holding `${`; [`RenderError::NeedsAbsolute`] without an absolute worktree;
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`].
///
/// ```
/// use kcap_mcp_registry::{Client, LaunchContext, LaunchError, Policy, RenderError};
/// use kcap_mcp_registry::clients::dispatch::{PlanInputs, UnverifiedIsolation};
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     worktree: Some("/work/tree".into()),
///     launch_dir: Some("/run/kcap/l1".into()),
///     ..LaunchContext::default()
/// };
/// let mut inputs = PlanInputs::new(Policy::Lenient);
/// let refused = Client::Cursor.plan(&ctx, &inputs);
/// assert!(matches!(refused, Err(LaunchError::Render(RenderError::UnverifiedIsolation { .. }))));
/// inputs.unverified_isolation = UnverifiedIsolation::Allow;
/// let plan = Client::Cursor.plan(&ctx, &inputs)?.plan;
/// assert!(!plan.isolation.is_verified());
/// assert_eq!(plan.argv, ["acp", "--force", "--approve-mcps", "--trust"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub(crate) fn cursor_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    unverified: UnverifiedIsolation,
) -> Result<LaunchPlan, RenderError> {
    if unverified == UnverifiedIsolation::Refuse {
        return Err(RenderError::UnverifiedIsolation {
            client: Client::Cursor,
        });
    }
    ctx.require_launch_values()?;
    let cwd = acp_cwd(Client::Cursor, ctx)?;
    let (mcp_servers, servers) = acp_servers(ctx, resolution, |s| s.id.to_owned());
    refuse_unknown_expansion(Client::Cursor, &mcp_servers, &servers)?;
    let mut plan = LaunchPlan::rooted(
        Client::Cursor,
        ctx,
        &WORKTREE_CONFIG,
        ARGV.map(String::from).into(),
    )?;
    plan.isolation = Isolation::Unverified {
        reason: ISOLATION_REASON.into(),
    };
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers,
    });
    plan.servers = servers;
    Ok(plan)
}

/// The reviewed worktree's files Cursor reads as configuration (facts "Reserved servers",
/// \[K\]): the project's `.cursor/` folder (`mcp.json`).
pub const WORKTREE_CONFIG: [&str; 1] = [".cursor"];

//! Kiro's room: the reviewer launch over ACP (`kiro_plan`, its `--trust-tools`
//! [`trust_tools`], the per-launch [`KIRO_HOME`] and the aliased [`wire_name`]s) and what
//! generic code knows about the client ([`SPEC`], [`WORKTREE_CONFIG`]). Kiro is not installable
//! here: nothing of it was measured in this project, so every plan is unverified
//! ([`ISOLATION_REASON`]) and refused unless the caller opts in (`UnverifiedIsolation::Allow`).
//!
//! Files: with the `cli` feature, `registration` (the file a person registers servers in) and
//! `loader` (how Kiro loads it, from the original system's facts).
//!
//! What the original system measured on Kiro 2.15.2 and 2.16.0, what public reports say, and
//! why it stays refused (leads, not measured here): `docs/isolation/kiro.md`.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;

use crate::allowlist::Resolution;
use crate::clients::dispatch::UnverifiedIsolation;
use crate::clients::plan::{Admitted, EnvVar, Isolation, LaunchId, LaunchPlan, SessionNew};
use crate::clients::root::CredentialSpec;
use crate::clients::{
    Client, LaunchContext, RenderError, acp_cwd, acp_servers, launch_dir, refuse_unknown_expansion,
};
use crate::model::McpServer;

/// Kiro's built-in tools that run unasked in its reviewer: the ones `--trust-tools` names
/// (facts only: its documentation of `--trust-tools`); every other tool asks, and no one
/// answers.
pub const BUILTINS: &[crate::clients::tools::Builtin] = &[
    crate::clients::tools::Builtin::new("fs_read", crate::clients::tools::ToolKind::Read),
    crate::clients::tools::Builtin::new("thinking", crate::clients::tools::ToolKind::Other),
];

/// What generic code knows about Kiro ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "kiro",
    display_name: "Kiro",
    // `kiro-cli acp` (kiro.dev changelog, CLI 1.25).
    binary: "kiro-cli",
    stamps_driver: true,
    carries_model: false,
    carries_effort: false,
    credentials: CredentialSpec::NONE,
    managed_files: &[],
    preflight: None,
    acp: true,
    needs_worktree: true,
    brokered_only: false,
    uses_launch_id: true,
    unverified_isolation: true,
    builtins: BUILTINS,
    hides_builtins: false,
    launch_secrets: &[],
    door: &[],
    plan: |ctx, r, inputs| {
        if inputs.unverified_isolation == UnverifiedIsolation::Refuse {
            return Err(RenderError::UnverifiedIsolation {
                client: Client::Kiro,
            }
            .into());
        }
        Ok(kiro_plan(ctx, r, &inputs.launch_id()?)?)
    },
    proof: crate::clients::spec::Proof::FactsOnly,
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: None,
};

/// The client's words in `render kiro --help` and `export kiro --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Kiro over ACP (facts only, not measured): servers in `session/new` under per-launch aliased names, an empty KIRO_HOME, --trust-tools for the admitted tools",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --worktree <DIR> --launch-dir <DIR> [OPTIONS]",
    render_after_help: "\
Kiro is not installable here, so its launch was never measured in this project: the plan
says \"isolation\": {\"status\": \"unverified\"}, and it is refused under either policy unless
--allow-unverified-isolation is given (then a warning is printed).

Example:
  kcap-mcp-registry render kiro --allow-unverified-isolation --agent-id a1 --worktree /work/tree --launch-dir /run/kcap/l1 --allowlist kcap-review --server-url URL --kcap-bin PATH --format plan",
    deprecated_flags: &[],
    deprecated_because: "",
    export_about: "Kiro: `mcpServers` for $KIRO_HOME/settings/mcp.json",
    export_aliases: &[],
    export_after_help: None,
};

/// The directory, relative to the per-launch directory, given to Kiro as `KIRO_HOME`: created
/// empty by the daemon ([`LaunchPlan::dirs`]).
pub const KIRO_HOME: &str = "kiro-home";

/// Kiro's built-in tools a reviewer may use without approval (they only read), first in
/// `--trust-tools` (facts "Kiro", \[K\]).
pub const READ_TOOLS: [&str; 2] = ["fs_read", "thinking"];

/// The wire name of `server` in this launch: the one place Kiro's aliasing is applied
/// ([`LaunchId::wire_name`], shared with Gemini CLI: the registry's `alias` stem, or the id).
pub fn wire_name(launch_id: &LaunchId, server: &McpServer) -> String {
    launch_id.wire_name(server)
}

/// The value of `--trust-tools`: [`READ_TOOLS`], then `@<wire name>/<tool>` for each admitted
/// tool ([`Admitted`]) of each server, in injection order and catalog order, comma-separated.
/// A server without a catalog ([`Admitted::All`]) gets no rule: the facts give only the
/// per-tool form, so its tools are not trusted (they ask, and an unattended reviewer's
/// daemon answers).
///
/// ```
/// use kcap_mcp_registry::clients::kiro::trust_tools;
/// use kcap_mcp_registry::Registry;
///
/// let result = Registry::compiled().lookup("kcap-flow-result").unwrap();
/// assert_eq!(
///     trust_tools(&[(result, "kcap-flow-result-00")]),
///     "fs_read,thinking,@kcap-flow-result-00/submit_review_result,@kcap-flow-result-00/send_flow_message"
/// );
/// ```
pub fn trust_tools(servers: &[(&McpServer, &str)]) -> String {
    let mut tools: Vec<String> = READ_TOOLS.map(String::from).into();
    for (server, wire) in servers {
        if let Some(names) = Admitted::of(server).names() {
            tools.extend(names.iter().map(|t| format!("@{wire}/{t}")));
        }
    }
    tools.join(",")
}

/// The Kiro reviewer launch: argv `acp --trust-tools <`[`trust_tools`]`>`; env
/// `KIRO_HOME=<launch dir>/`[`KIRO_HOME`], a directory the daemon creates empty
/// ([`LaunchPlan::dirs`]), in the per-launch root's environment ([`LaunchPlan::rooted`]:
/// built from empty); every injected server (the
/// `inject` servers by their condition, then the allowlisted ones, with this launch's result
/// delivery and snapshot) in `session/new` under its aliased [`wire_name`].
///
/// The plan's isolation is [`Isolation::Unverified`] ([`ISOLATION_REASON`]): nothing of it
/// was measured in this project, so `Client::plan` refuses it under either policy unless the
/// caller passes [`UnverifiedIsolation::Allow`] (issue 34: Kiro's plans are refused until
/// measured), and a caller that carries it out should warn.
///
/// # Errors
/// [`RenderError::Expansion`] for a value holding `${`; [`RenderError::NeedsAbsolute`]
/// without an absolute worktree or launch directory; [`RenderError::BlankAgentId`],
/// [`RenderError::BlankCapabilityUrl`], [`RenderError::MissingReviewContextUrl`].
///
/// ```
/// use kcap_mcp_registry::{Client, LaunchContext, Policy};
/// use kcap_mcp_registry::clients::dispatch::{PlanInputs, UnverifiedIsolation};
/// use kcap_mcp_registry::clients::plan::LaunchId;
///
/// let ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     worktree: Some("/work/tree".into()),
///     launch_dir: Some("/run/kcap/l1".into()),
///     ..LaunchContext::default()
/// };
/// let mut inputs = PlanInputs::new(Policy::Strict);
/// inputs.launch_id = Some(LaunchId::from_hex("0123456789abcdef")?);
/// inputs.unverified_isolation = UnverifiedIsolation::Allow;
/// let plan = Client::Kiro.plan(&ctx, &inputs)?.plan;
/// assert_eq!(plan.env_value("KIRO_HOME"), Some("/run/kcap/l1/kiro-home"));
/// assert_eq!(plan.servers[0].wire_name, "kcap-flow-result-0123456789abcdef");
/// assert!(!plan.isolation.is_verified());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub(crate) fn kiro_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    launch_id: &LaunchId,
) -> Result<LaunchPlan, RenderError> {
    ctx.require_launch_values()?;
    let cwd = acp_cwd(Client::Kiro, ctx)?;
    let dir = launch_dir(Client::Kiro, ctx)?;
    let (mcp_servers, servers) = acp_servers(ctx, resolution, |s| wire_name(launch_id, s));
    refuse_unknown_expansion(Client::Kiro, &mcp_servers, &servers)?;
    let admitted: Vec<(&McpServer, &str)> = ctx
        .servers(resolution)
        .zip(&servers)
        .map(|((server, _), wire)| (server, wire.wire_name.as_str()))
        .collect();
    let mut plan = LaunchPlan::rooted(
        Client::Kiro,
        ctx,
        &WORKTREE_CONFIG,
        vec!["acp".into(), "--trust-tools".into(), trust_tools(&admitted)],
    )?;
    plan.env
        .push(EnvVar::new("KIRO_HOME", format!("{dir}/{KIRO_HOME}")));
    plan.dirs.push(KIRO_HOME.into());
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers,
    });
    plan.servers = servers;
    plan.isolation = Isolation::Unverified {
        reason: ISOLATION_REASON.into(),
    };
    Ok(plan)
}

/// Why a Kiro plan is [`Isolation::Unverified`].
pub const ISOLATION_REASON: &str = "nothing of Kiro's launch was measured in this project \
    (Kiro is not installable here; facts [K] from another system, on 2.15.2 and 2.16.0): \
    whether it starts only the injected MCP servers is not established";

/// The reviewed worktree's files Kiro reads as configuration (facts "Reserved servers",
/// \[K\]): the workspace `.kiro/` folder (`settings/mcp.json`).
pub const WORKTREE_CONFIG: [&str; 1] = [".kiro"];

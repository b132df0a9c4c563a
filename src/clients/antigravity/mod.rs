//! Antigravity's (`agy`) room: the reviewer launch in print mode (`antigravity_plan`: the
//! per-launch home holding [`MCP_CONFIG`] ([`mcp_config_json`]) and [`SETTINGS`]
//! ([`permissions_json`])) and what generic code knows about the client ([`SPEC`],
//! [`WORKTREE_CONFIG`]). `agy` is not installable here: nothing of it was measured in this
//! project, so every plan is unverified ([`ISOLATION_REASON`]) and refused unless the caller
//! opts in (`UnverifiedIsolation::Allow`).
//!
//! Files: with the `cli` feature, `registration` (the file a person registers servers in) and
//! `loader` (how Antigravity loads it, from the original system's facts).
//!
//! What the original system measured on 1.1.10 and 1.1.13, and why it stays refused (leads, not
//! measured here): `docs/isolation/antigravity.md`.

#[cfg(feature = "cli")]
pub mod registration;

#[cfg(feature = "cli")]
pub mod loader;

use serde::Serialize;

use crate::allowlist::Resolution;
use crate::clients::claude::Ordered;
use crate::clients::dispatch::UnverifiedIsolation;
use crate::clients::plan::{AcpServer, Admitted, Isolation, LaunchPlan, PlanFile};
use crate::clients::root::{CredentialSpec, HOME_DIR};
use crate::clients::{
    Client, LaunchContext, RenderError, ResultDelivery, acp_cwd, acp_servers, option_value,
    refuse_unknown_expansion,
};
use crate::model::McpServer;
use crate::text::pretty_json;

/// What generic code knows about Antigravity ([`crate::clients::spec`]).
pub const SPEC: crate::clients::spec::ClientSpec = crate::clients::spec::ClientSpec {
    name: "antigravity",
    display_name: "Antigravity",
    // facts "Antigravity (`agy`)", \[K\].
    binary: "agy",
    stamps_driver: true,
    carries_model: false,
    carries_effort: false,
    credentials: CredentialSpec::NONE,
    managed_files: &[],
    preflight: None,
    acp: false,
    needs_worktree: true,
    brokered_only: true,
    uses_launch_id: false,
    unverified_isolation: true,
    builtins: &[],
    hides_builtins: false,
    launch_secrets: &[],
    door: &[],
    plan: |ctx, r, inputs| {
        if inputs.unverified_isolation == UnverifiedIsolation::Refuse {
            return Err(RenderError::UnverifiedIsolation {
                client: Client::Antigravity,
            }
            .into());
        }
        Ok(antigravity_plan(ctx, r)?)
    },
    proof: crate::clients::spec::Proof::FactsOnly,
    #[cfg(feature = "cli")]
    registration: &registration::FORMAT,
    #[cfg(feature = "cli")]
    cli: &CLI,
    #[cfg(feature = "cli")]
    verify: None,
};

/// The client's words in `render antigravity --help` and `export antigravity --help`.
#[cfg(feature = "cli")]
pub const CLI: crate::clients::spec::CliSpec = crate::clients::spec::CliSpec {
    render_about: "Antigravity (facts only, not measured): a per-launch HOME holding its servers and permissions files; brokered result delivery required",
    render_usage: "{cmd} <--agent-id <ID>|--launch-json <FILE|->> --worktree <DIR> --launch-dir <DIR> --result-capability-url <URL> [OPTIONS]",
    render_after_help: "\
Antigravity is not installable here, so its launch was never measured in this project: the
plan says \"isolation\": {\"status\": \"unverified\"}, and it is refused under either policy
unless --allow-unverified-isolation is given (then a warning is printed).

Example:
  kcap-mcp-registry render antigravity --allow-unverified-isolation --agent-id a1 --worktree /work/tree --launch-dir /run/kcap/l1 --result-capability-url http://127.0.0.1:4100/TOKEN --server-url URL --kcap-bin PATH --format plan",
    deprecated_flags: &[],
    deprecated_because: "",
    export_about: "Antigravity: `mcpServers` for ~/.gemini/config/mcp_config.json",
    export_aliases: &[],
    export_after_help: None,
};

/// The servers file, relative to the per-launch home ([`HOME_DIR`]).
pub const MCP_CONFIG: &str = ".gemini/config/mcp_config.json";

/// The permissions file, relative to the per-launch home ([`HOME_DIR`]).
pub const SETTINGS: &str = ".gemini/antigravity-cli/settings.json";

/// Mode of the two files: 0o600 (they hold the agent id and the capability URL).
pub const FILE_MODE: u32 = 0o600;

#[derive(Serialize)]
struct ServerEntry<'a> {
    command: &'a str,
    args: &'a [String],
    env: Ordered<'a, &'a str, &'a str>,
}

/// The contents of [`MCP_CONFIG`]: `{"mcpServers":{<id>:{"command","args","env":{…}}}}`, in
/// injection order, pretty-printed (two-space indent), ending in a newline.
pub fn mcp_config_json(servers: &[AcpServer]) -> String {
    let envs: Vec<Vec<(&str, &str)>> = servers
        .iter()
        .map(|s| {
            s.env
                .iter()
                .map(|v| (v.name.as_str(), v.value.as_str()))
                .collect()
        })
        .collect();
    let entries: Vec<(&str, ServerEntry<'_>)> = servers
        .iter()
        .zip(&envs)
        .map(|(s, env)| {
            let entry = ServerEntry {
                command: &s.command,
                args: &s.args,
                env: Ordered(env),
            };
            (s.name.as_str(), entry)
        })
        .collect();
    pretty_json(&Ordered(&[("mcpServers", Ordered(&entries))]))
}

/// The contents of [`SETTINGS`]: `{"permissions":{"allow":["mcp(<server>/<tool>)",…]}}`, one
/// rule per admitted tool ([`Admitted`]) of each server, in injection order and catalog
/// order; nothing for a server without a catalog. Pretty-printed, ending in a newline.
///
/// ```
/// use kcap_mcp_registry::clients::antigravity::permissions_json;
/// use kcap_mcp_registry::Registry;
///
/// let result = Registry::compiled().lookup("kcap-flow-result").unwrap();
/// let json: serde_json::Value = serde_json::from_str(&permissions_json(&[(result, "kcap-flow-result")]))?;
/// assert_eq!(json["permissions"]["allow"][1], "mcp(kcap-flow-result/send_flow_message)");
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn permissions_json(servers: &[(&McpServer, &str)]) -> String {
    let mut allow: Vec<String> = Vec::new();
    for (server, name) in servers {
        if let Some(tools) = Admitted::of(server).names() {
            allow.extend(tools.iter().map(|t| format!("mcp({name}/{t})")));
        }
    }
    pretty_json(&Ordered(&[("permissions", Ordered(&[("allow", allow)]))]))
}

/// The Antigravity reviewer launch: argv `-p <prompt>` (print mode; the prompt empty when
/// unset); the per-launch root ([`crate::clients::root`]); the files [`MCP_CONFIG`] ([`mcp_config_json`]: every injected server, the `inject` servers by
/// their condition, then the allowlisted ones, with this launch's brokered result delivery
/// and snapshot) and [`SETTINGS`] ([`permissions_json`]) under the home, mode 0o600; no
/// `session/new`.
///
/// The plan's isolation is [`Isolation::Unverified`] ([`ISOLATION_REASON`]): `Client::plan`
/// refuses it under either policy unless the caller passes [`UnverifiedIsolation::Allow`].
///
/// # Errors
/// [`RenderError::NeedsBrokeredDelivery`] when the launch is not gated and its result
/// delivery is [`ResultDelivery::Direct`]; [`RenderError::Expansion`] for a value
/// holding `${`; [`RenderError::NeedsAbsolute`] without an absolute worktree or launch
/// directory; [`RenderError::OptionLike`] for a prompt starting with `-`;
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`].
///
/// ```
/// use kcap_mcp_registry::{Client, LaunchContext, LaunchError, Policy, RenderError, ResultDelivery};
/// use kcap_mcp_registry::clients::dispatch::{PlanInputs, UnverifiedIsolation};
///
/// let mut ctx = LaunchContext {
///     server_url: Some("http://127.0.0.1:5100".into()),
///     kcap_bin: Some("/usr/bin/kcap".into()),
///     agent_id: "a1".into(),
///     worktree: Some("/work/tree".into()),
///     launch_dir: Some("/run/kcap/l1".into()),
///     ..LaunchContext::default()
/// };
/// let mut inputs = PlanInputs::new(Policy::Strict);
/// inputs.unverified_isolation = UnverifiedIsolation::Allow;
/// let refused = Client::Antigravity.plan(&ctx, &inputs);
/// assert!(matches!(refused, Err(LaunchError::Render(RenderError::NeedsBrokeredDelivery { .. }))));
/// ctx.result_delivery = ResultDelivery::Brokered { capability_url: "http://127.0.0.1:4100/t".into() };
/// let plan = Client::Antigravity.plan(&ctx, &inputs)?.plan;
/// assert_eq!(plan.files[0].path, "home/.gemini/config/mcp_config.json");
/// assert_eq!(plan.env_value("HOME"), Some("/run/kcap/l1/home"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub(crate) fn antigravity_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
) -> Result<LaunchPlan, RenderError> {
    ctx.require_launch_values()?;
    if !ctx.is_gated() && ctx.result_delivery == ResultDelivery::Direct {
        return Err(RenderError::NeedsBrokeredDelivery {
            client: Client::Antigravity,
        });
    }
    acp_cwd(Client::Antigravity, ctx)?;
    let prompt = option_value("prompt", &ctx.prompt)?.unwrap_or_default();
    let (mcp_servers, servers) = acp_servers(ctx, resolution, |s| s.id.to_owned());
    refuse_unknown_expansion(Client::Antigravity, &mcp_servers, &servers)?;
    let admitted: Vec<(&McpServer, &str)> = ctx
        .servers(resolution)
        .zip(&servers)
        .map(|((server, _), wire)| (server, wire.wire_name.as_str()))
        .collect();
    let mut plan = LaunchPlan::rooted(
        Client::Antigravity,
        ctx,
        &WORKTREE_CONFIG,
        vec!["-p".into(), prompt.into()],
    )?;
    plan.note_pr_config("-p");
    plan.files.extend([
        PlanFile {
            path: format!("{HOME_DIR}/{MCP_CONFIG}"),
            contents: mcp_config_json(&mcp_servers),
            mode: FILE_MODE,
        },
        PlanFile {
            path: format!("{HOME_DIR}/{SETTINGS}"),
            contents: permissions_json(&admitted),
            mode: FILE_MODE,
        },
    ]);
    plan.servers = servers;
    plan.isolation = Isolation::Unverified {
        reason: ISOLATION_REASON.into(),
    };
    Ok(plan)
}

/// Why an Antigravity plan is [`Isolation::Unverified`].
pub const ISOLATION_REASON: &str = "nothing of Antigravity's launch was measured in this \
    project (`agy` is not installable here; facts [K] from another system, on 1.1.10 and \
    1.1.13): whether it starts only the injected MCP servers, and whether its prompt waits \
    for them, is not established";

/// The reviewed worktree's files Antigravity reads as configuration (facts, reported
/// upstream): the project-level `.agents/` folder (`mcp_config.json`).
pub const WORKTREE_CONFIG: [&str; 1] = [".agents"];

//! A client's plan through the public API, for the tests that want the room's plan for a
//! context as given: [`Client::plan_resolved`] with a fixed launch id and secret (so output
//! is reproducible), the caller's policy, and the unverified isolation of Cursor, Kiro and
//! Antigravity accepted.

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::{PlanInputs, UnverifiedIsolation};
use kcap_mcp_registry::clients::plan::{LaunchId, LaunchPlan, LaunchSecret};
use kcap_mcp_registry::{LaunchContext, LaunchError, Policy, RenderError, Resolution};

/// The launch id of every plan these helpers make.
pub const LAUNCH_ID: &str = "0123456789abcdef";

/// The inputs of these helpers' plans under `policy`.
pub fn inputs(policy: Policy) -> PlanInputs {
    let mut inputs = PlanInputs::new(policy);
    inputs.launch_id = Some(LaunchId::from_hex(LAUNCH_ID).unwrap());
    inputs.launch_secret = Some(LaunchSecret::from_bytes([7; 16]));
    inputs.unverified_isolation = UnverifiedIsolation::Allow;
    inputs
}

/// `client`'s plan for `ctx`, `resolution` being its allowlist resolved under `policy`.
pub fn resolved(
    client: Client,
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    policy: Policy,
) -> Result<LaunchPlan, LaunchError> {
    Ok(client.plan_resolved(ctx, resolution, &inputs(policy))?.plan)
}

/// `client`'s plan for `ctx`, its allowlist resolved under `policy`.
pub fn of(client: Client, ctx: &LaunchContext, policy: Policy) -> Result<LaunchPlan, LaunchError> {
    resolved(client, ctx, &ctx.resolve(policy)?, policy)
}

/// `client`'s lenient plan for `ctx`; panics naming the error if there is none.
pub fn lenient(client: Client, ctx: &LaunchContext) -> LaunchPlan {
    of(client, ctx, Policy::Lenient).unwrap_or_else(|e| panic!("{client} plan: {e}"))
}

/// The render error `client`'s plan for `ctx` fails with under `policy`; panics on any other
/// outcome.
pub fn refusal(client: Client, ctx: &LaunchContext, policy: Policy) -> RenderError {
    match of(client, ctx, policy) {
        Err(LaunchError::Render(e)) => e,
        other => panic!("{client}: {other:?}"),
    }
}

/// Makes `plan`'s launch directory with its [`LaunchPlan::dirs`] and [`LaunchPlan::files`]
/// (contents only: the modes are the executor's), for a test that runs the plan's argv
/// itself: Claude Code's `--mcp-config` names a file there, Codex's `CODEX_HOME` holds its
/// `config.toml`.
pub fn write_files(plan: &LaunchPlan) {
    let dir = std::path::Path::new(&plan.launch_dir);
    for sub in std::iter::once("").chain(plan.dirs.iter().map(String::as_str)) {
        std::fs::create_dir_all(dir.join(sub))
            .unwrap_or_else(|e| panic!("{}/{sub}: {e}", dir.display()));
    }
    for file in &plan.files {
        let path = dir.join(&file.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &file.contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// `plan`'s argv up to its prompt: without the last `--` and what follows, for a test that
/// gives its own prompt or subcommand.
pub fn argv_before_prompt(plan: &LaunchPlan) -> Vec<String> {
    let end = plan.argv.iter().rposition(|a| a == "--");
    plan.argv[..end.unwrap_or(plan.argv.len())].to_vec()
}

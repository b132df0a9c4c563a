//! Rendering a reviewer's launch plan, per client, on the bundled registry: `cargo bench
//! --bench plan`.
//!
//! For each client of [`PLANS`] (a table over [`Client`]: a client joins with one line):
//! - `plan/<client>/full_registry`: the plan of a direct launch in the reviewer's own
//!   worktree, the allowlist naming every allowlistable server that cannot start flows (so
//!   the plan holds every server a reviewer can get, plus the result channel); brokered
//!   for Antigravity, which refuses direct result delivery;
//! - `plan/<client>/brokered_borrowed`: the same allowlist, brokered result delivery and a
//!   borrowed snapshot (`kcap-review-context` injected last);
//! - `plan_json/<client>/full_registry`: the first, then [`LaunchPlan::to_json`], what
//!   `render <client> --format plan` prints.
//!
//! Each plan is what [`Client::plan_resolved`] renders (its checks, and the administrator
//! files looked for under `/`, included). The resolution is done once, outside the timed
//! code (`benches/render.rs` times it). Codex
//! is rendered without an inventory of inherited servers (Copilot takes none); Cursor with the
//! lenient policy (its isolation is unverified). Every plan is checked before anything is
//! timed.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::{PlanInputs, UnverifiedIsolation};
use kcap_mcp_registry::clients::plan::{LaunchId, LaunchPlan, LaunchSecret};
use kcap_mcp_registry::{
    LaunchContext, LaunchError, Policy, Resolution, ResultDelivery, Snapshot, servers,
};

/// Whether a client's plan takes direct result delivery, or needs it brokered.
#[derive(Clone, Copy, PartialEq)]
enum Delivery {
    Any,
    Brokered,
}

/// Every benchmarked client with the result delivery its plan takes, one line each.
const PLANS: &[(Client, Delivery)] = &[
    (Client::Claude, Delivery::Any),
    (Client::Codex, Delivery::Any),
    (Client::Gemini, Delivery::Any),
    (Client::OpenCode, Delivery::Any),
    (Client::Copilot, Delivery::Any),
    (Client::Cursor, Delivery::Any),
    (Client::Kiro, Delivery::Any),
    (Client::Antigravity, Delivery::Brokered),
];

/// `client`'s plan of `ctx`, its allowlist resolved: [`Client::plan_resolved`] with a fixed
/// launch id and secret, the lenient policy, Cursor's unverified isolation accepted.
fn render(
    client: Client,
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    inputs: &PlanInputs,
) -> Result<LaunchPlan, LaunchError> {
    Ok(client.plan_resolved(ctx, resolution, inputs)?.plan)
}

fn context(brokered: bool, borrowed: bool) -> LaunchContext {
    let allowlist = servers()
        .iter()
        .filter(|s| s.allowlistable && !s.starts_flows)
        .map(|s| Some(s.id.to_string()))
        .collect();
    let result_delivery = if brokered {
        ResultDelivery::from_capability_url(Some(
            "http://127.0.0.1:5100/cap/9f86d081884c7d65".into(),
        ))
    } else {
        ResultDelivery::Direct
    };
    let snapshot = if borrowed {
        Snapshot::from_launch(true, Some("http://127.0.0.1:5100/review-context/42".into()))
    } else {
        Snapshot::Own
    };
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/usr/local/bin/kcap".into()),
        agent_id: "rev-7f3c2a91".into(),
        mcp_allowlist: Some(allowlist),
        model: Some("model-x".into()),
        prompt: Some("Review the pull request. ".repeat(40)),
        worktree: Some("/home/dev/.kcap/worktrees/pr-1234".into()),
        launch_dir: Some("/run/kcap/launch/pr-1234".into()),
        result_delivery,
        snapshot,
        ..LaunchContext::default()
    }
}

fn bench_plans(c: &mut Criterion) {
    let mut inputs = PlanInputs::new(Policy::Lenient);
    inputs.launch_id = Some(LaunchId::from_hex("0123456789abcdef").expect("16 hex digits"));
    inputs.launch_secret = Some(LaunchSecret::from_bytes([7; 16]));
    inputs.unverified_isolation = UnverifiedIsolation::Allow;
    // Direct, brokered (for clients that need it) and brokered + borrowed launches.
    let contexts = [
        context(false, false),
        context(true, false),
        context(true, true),
    ];
    let resolutions: Vec<_> = contexts
        .iter()
        .map(|ctx| ctx.resolve(Policy::Lenient).expect("resolves"))
        .collect();
    // A client's cases: (name, index into `contexts`).
    let cases = |delivery: Delivery| {
        let full = if delivery == Delivery::Brokered { 1 } else { 0 };
        [("full_registry", full), ("brokered_borrowed", 2)]
    };
    // Every plan is whole before anything is timed: every allowlisted server plus the result
    // channel, and `kcap-review-context` last when borrowed.
    let allowlisted = servers()
        .iter()
        .filter(|s| s.allowlistable && !s.starts_flows)
        .count();
    for &(client, delivery) in PLANS {
        for (name, i) in cases(delivery) {
            let plan = render(client, &contexts[i], &resolutions[i], &inputs).expect("renders");
            assert_eq!(plan.client, client);
            let borrowed = name == "brokered_borrowed";
            assert_eq!(
                plan.servers.len(),
                1 + allowlisted + usize::from(borrowed),
                "{client} {name}"
            );
            assert_eq!(
                plan.servers.last().unwrap().id == "kcap-review-context",
                borrowed,
                "{client} {name}"
            );
        }
    }

    // What each benchmark times: one plan, its inputs opaque to the optimizer.
    let timed = |client, ctx: &LaunchContext, resolution: &Resolution<'_, String>| {
        render(
            client,
            black_box(ctx),
            black_box(resolution),
            black_box(&inputs),
        )
    };
    let mut group = c.benchmark_group("plan");
    for &(client, delivery) in PLANS {
        for (name, i) in cases(delivery) {
            let (ctx, resolution) = (&contexts[i], &resolutions[i]);
            group.bench_with_input(BenchmarkId::new(client.name(), name), ctx, |b, ctx| {
                b.iter(|| timed(client, ctx, resolution))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("plan_json");
    for &(client, delivery) in PLANS {
        let (name, i) = cases(delivery)[0];
        let (ctx, resolution) = (&contexts[i], &resolutions[i]);
        group.bench_with_input(BenchmarkId::new(client.name(), name), ctx, |b, ctx| {
            b.iter(|| timed(client, ctx, resolution).expect("renders").to_json())
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // Modest: the machine is a shared 2-core VM (BENCHMARKS.md).
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = bench_plans
}
criterion_main!(benches);

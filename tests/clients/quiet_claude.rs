//! Claude Code 2.1.197 (`KCAP_CLAUDE_BIN`) and the newest pinned (`KCAP_CLAUDE_NEXT_BIN`;
//! 2.1.328 and 2.1.332 measured): with `ANTHROPIC_BASE_URL` at a gateway, the reviewer calls
//! the gateway and nothing else; the fact behind `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`
//! in `clients::claude::QUIET_ENV`.
//!
//! 1. The protection: the plan `Client::plan` renders for a launch holding
//!    `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` at a stand-in gateway, carried out by the
//!    executor: the stand-in HTTPS proxy is asked for nothing at all (no `CONNECT`, so no
//!    `api.anthropic.com`, `raw.githubusercontent.com` or `downloads.claude.ai`), while the
//!    review turn, offering `kcap-review`'s tools (the MCP servers started), reaches the
//!    gateway.
//! 2. The bite: the same plan without `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`: the proxy
//!    is asked for `api.anthropic.com`, which is sent `POST /api/eval/sdk-…` and
//!    `POST /api/event_logging/v2/batch` (all three versions), and on 2.1.197
//!    `GET /api/claude_cli/bootstrap` with the key in `x-api-key`.
//!
//! Offline by construction, as `remote_settings_claude.rs` (whose stand-ins this reuses): the
//! client runs in a network namespace whose only ways out are the stand-in proxy (it ends
//! the TLS of `CONNECT api.anthropic.com:443` itself, refuses every other target and records
//! each) and the stand-in gateway.

use std::time::Duration;

use crate::claude_oracle;
use crate::common::peers::{peer, skip};
use crate::remote_settings_claude::{API_PORT, HOST, REVIEW_TOOLS, Run, World};
use kcap_mcp_registry::Policy;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::launch;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_with_a_gateway_calls_nothing_else,
        claude_next_with_a_gateway_calls_nothing_else,
    ]
}

/// The variable the protection rests on.
const QUIET: &str = "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC";
/// How long a launch keeps running after its first turn, so that a late call shows (the
/// events' batches were seen within 2 s of it).
const SETTLE: Duration = Duration::from_secs(8);

/// Claude Code 2.1.197.
fn claude_with_a_gateway_calls_nothing_else() {
    check("KCAP_CLAUDE_BIN");
}

/// The newest pinned Claude Code.
fn claude_next_with_a_gateway_calls_nothing_else() {
    check("KCAP_CLAUDE_NEXT_BIN");
}

/// The two steps of the module docs on the binary `var` names.
fn check(var: &'static str) {
    let Some(bin) = peer(var) else {
        return;
    };
    if let Some(missing) = launch::door::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let version = claude_oracle::version(&bin);
    let gateway = format!("http://127.0.0.1:{API_PORT}");

    // The plan `Client::plan` renders in `world`, whose directories it names.
    let plan = |world: &World| {
        let ctx = world.ctx(Some(&gateway));
        (Client::Claude.plan(&ctx, &PlanInputs::new(Policy::Lenient)))
            .unwrap_or_else(|e| panic!("{version}: {e}"))
            .plan
    };

    // 1. The protection: the plan as rendered.
    let world = World::new(&bin, &version);
    let plan_1 = plan(&world);
    assert_eq!(
        plan_1.env_value(QUIET),
        Some("1"),
        "{version}: {:?}",
        plan_1.env
    );
    let run = world.launch_settling(&plan_1, SETTLE);
    assert!(
        run.targets.is_empty() && run.tunnel.is_empty(),
        "{version}: the reviewer called past its gateway: {}",
        run.summary()
    );
    reached_the_gateway(&version, &run);

    // 2. The bite: the same plan without the variable.
    let world = World::new(&bin, &version);
    let mut plan_2 = plan(&world);
    plan_2.env.retain(|v| v.name != QUIET);
    let run = world.launch_settling(&plan_2, SETTLE);
    assert!(
        run.targets.contains(&format!("CONNECT {HOST}:443")),
        "{version}: {}",
        run.summary()
    );
    let called = |path: &str| run.tunnel.iter().find(|r| r.path.starts_with(path));
    for path in ["/api/eval/sdk-", "/api/event_logging/v2/batch"] {
        assert!(
            called(path).is_some(),
            "{version}: {path}: {}",
            run.summary()
        );
    }
    if version == "2.1.197" {
        let bootstrap = called("/api/claude_cli/bootstrap")
            .unwrap_or_else(|| panic!("{version}: no bootstrap: {}", run.summary()));
        assert_eq!(bootstrap.header("x-api-key"), ["dummy"], "{version}");
    }
    reached_the_gateway(&version, &run);
}

/// The turn offering `kcap-review`'s tools went to the gateway, with the key.
fn reached_the_gateway(version: &str, run: &Run) {
    let turn =
        (run.turn.as_deref()).unwrap_or_else(|| panic!("{version}: no turn: {}", run.summary()));
    assert!(turn.contains(REVIEW_TOOLS), "{version}: {}", run.summary());
    assert!(
        run.api
            .iter()
            .any(|r| r.body == turn && r.header("x-api-key") == ["dummy"]),
        "{version}: {}",
        run.summary()
    );
}

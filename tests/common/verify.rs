//! The real-client conformance tests' one way to run a client: the library's `verify`
//! (`kcap_mcp_registry::ops::verify`), which carries the plan out with the executor
//! (`launch::launch_with_parent_env`), exactly as `kcap-mcp-registry verify` does. The
//! recorder MCP server is the crate's own binary (`CARGO_BIN_EXE_kcap-mcp-registry`), so
//! these need the `cli` feature.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::launch::sandbox::Confinement;
use kcap_mcp_registry::ops::verify::{self, Bench, Origin, Report, Request, Scenario, Verdict};

/// How long one client run may take until every injected server listed its tools (the
/// executor's ACP handshake steps each get as long); the client's process group is killed
/// then, and the run reported incomplete.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// How long the client runs on after that, so that a server it would start late shows.
pub const SETTLE: Duration = Duration::from_secs(3);

/// The request the tests make: `client` at `bin`, the crate's binary as the recorder.
pub fn request(client: Client, bin: &Path, scenario: Scenario) -> Request {
    Request::new(
        client,
        bin.to_owned(),
        PathBuf::from(env!("CARGO_BIN_EXE_kcap-mcp-registry")),
    )
    .with_scenario(scenario)
    .with_bounds(TIMEOUT, SETTLE)
}

/// [`request`] for a negative control, a plan made leaky on purpose, with the sandbox off: the
/// leak points the client at configuration outside its launch directory (the hostile user's
/// and environment's files), which in the sandbox it cannot read (Gemini CLI 0.61.0 then
/// exits 52 and Qwen Code 0.24.4 stops, on `EACCES`; Codex CLI and Copilot CLI start no
/// server), so the control measures the unconfined client, whose leak `verify` must name.
pub fn leaky_request(client: Client, bin: &Path, scenario: Scenario) -> Request {
    request(client, bin, scenario).with_confinement(Confinement::Off)
}

/// Prepares `request` (panics, with the error's chain, when it cannot be).
pub fn prepare(request: &Request) -> Bench {
    verify::prepare(request).unwrap_or_else(|e| panic!("{}", chain(&e)))
}

/// Runs `bench` (panics, with the error's chain, when the client cannot be run).
pub fn run(bench: Bench) -> Report {
    bench.run().unwrap_or_else(|e| panic!("{}", chain(&e)))
}

/// An error and its sources, on one line.
pub use kcap_mcp_registry::text::error_chain as chain;

/// Asserts that the run holds and shows exactly the injected servers, each with exactly its
/// argv and `KCAP_*` variables (counting distinct servers, not starts), that the launch
/// injects the servers whose `args` are `servers` (in order), and, when `in_worktree`, that
/// each ran in the worktree.
pub fn assert_exactly_injected(report: &Report, servers: &[&str], in_worktree: bool) {
    assert_eq!(report.verdict(), Verdict::Holds, "{}", report.human());
    let injected: Vec<String> = report
        .expected
        .iter()
        .map(|e| e.argv[1..].join(" "))
        .collect();
    assert_eq!(injected, servers, "the servers the launch injects");
    let expected: BTreeSet<_> = report
        .expected
        .iter()
        .map(|e| (e.argv.clone(), e.env.clone()))
        .collect();
    assert_eq!(
        expected.len(),
        servers.len(),
        "two injected servers are alike"
    );
    let recorder = report.expected[0].argv[0].clone();
    assert!(
        recorder.ends_with("/records/kcap-verify-recorder"),
        "{recorder}"
    );
    let seen: BTreeSet<_> = report
        .started
        .iter()
        .map(|s| (s.record.argv.clone(), s.record.kcap_env()))
        .collect();
    assert_eq!(
        seen, expected,
        "{}: the servers started (argv, KCAP_* env) are not exactly the injected ones",
        report.client
    );
    for started in &report.started {
        assert!(
            matches!(started.origin, Origin::Injected { .. }),
            "{started:?}"
        );
        assert!(started.record.listed_tools, "{started:?}");
        if in_worktree {
            assert_eq!(Path::new(&started.record.cwd), report.worktree);
        }
    }
}

/// Asserts that the run fails, that exactly the checks `failed` failed, and that the
/// hostile entries that ran are exactly `ran` (`tag name` of each).
pub fn assert_caught(report: &Report, failed: &[&str], ran: &[&str]) {
    assert_eq!(report.verdict(), Verdict::Fails, "{}", report.human());
    let names: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name)
        .collect();
    assert_eq!(names, failed, "{}", report.human());
    let hostile: BTreeSet<String> = report
        .started
        .iter()
        .filter_map(|s| match &s.origin {
            Origin::Hostile(source) => Some(format!("{} {}", source.tag, source.name)),
            _ => None,
        })
        .collect();
    let ran: BTreeSet<String> = ran.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(hostile, ran, "{}", report.human());
}

//! Issue 35, item 1, in the executor, over ACP: an ACP plan's `servers_ready` holds the
//! launch after `session/new` until the client's log says every injected server is ready,
//! and stops it with `ExecError::ServersNotReady` when a line says one failed or the
//! handshake bound passes. The stand-in client (Python) answers `initialize` and, at its
//! `answer` step, `session/new`; its other steps are log lines to append or `sleep`s.
//! `tests/clients/first_turn_failed.rs` shows the same on the real clients.

use crate::common;

use std::time::{Duration, Instant};

use kcap_mcp_registry::clients::plan::{LaunchPlan, ServersReady};
use kcap_mcp_registry::launch::sandbox::Confinement;
use kcap_mcp_registry::launch::{self, ExecError, Options, Reviewer};

/// The stand-in: `client LOG STEP…`; each step `answer` (answers `session/new`), `sleep`
/// (0.7 s), or a log line to append; `initialize` is answered when it comes. Then it reads
/// its input until it ends.
const CLIENT: &str = r#"#!/usr/bin/env python3
import json, sys, time
log, steps = sys.argv[1], sys.argv[2:]
def answer(id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    sys.stdout.flush()
first = json.loads(sys.stdin.readline())
answer(first["id"], {"protocolVersion": 1})
new = json.loads(sys.stdin.readline())
for step in steps:
    if step == "sleep":
        time.sleep(0.7)
    elif step == "answer":
        answer(new["id"], {"sessionId": "s1"})
    else:
        with open(log, "a") as f:
            f.write(step + "\n")
for line in sys.stdin:
    pass
"#;

/// The stand-in client in a directory of its own.
struct World(common::stand_in::ClientDir);

impl std::ops::Deref for World {
    type Target = common::stand_in::ClientDir;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl World {
    fn new() -> World {
        World(common::stand_in::ClientDir::new(CLIENT))
    }

    /// An ACP plan whose client takes `steps`, waiting for `server 'a' ready` and `set up`
    /// in lines `[<time>] [<LEVEL>] <message>`; `[MCP error] server 'a'` failed.
    fn plan(&self, steps: &[&str]) -> LaunchPlan {
        let launch_dir = self.root.join("launch");
        let mut plan = crate::launch::acp_plan(&launch_dir);
        plan.argv = vec![launch_dir.join("client.log").display().to_string()];
        plan.argv.extend(steps.iter().map(|s| (*s).to_owned()));
        plan.env_inherit = vec!["PATH".into()];
        plan.servers_ready = Some(ServersReady {
            log: "client.log".into(),
            ready: vec!["server 'a' ready".into(), "set up".into()],
            failed: vec!["[MCP error] server 'a'".into()],
            message_after: 2,
            message_separator: "] ".into(),
            settle_ms: 0,
        });
        plan
    }

    /// Carries `plan` out up to its first prompt: the executor's answer and how long it took.
    fn open(&self, plan: &LaunchPlan, bound: Duration) -> (Result<Reviewer, ExecError>, Duration) {
        let options = Options::default()
            .with_confinement(Confinement::Off)
            .with_handshake_timeout(bound);
        let started = Instant::now();
        let opened = launch::launch(plan, &self.client, &options);
        (opened, started.elapsed())
    }
}

fn launched(opened: Result<Reviewer, ExecError>) -> Reviewer {
    opened.unwrap_or_else(|e| panic!("{}", kcap_mcp_registry::text::error_chain(&e)))
}

fn not_ready(opened: Result<Reviewer, ExecError>) -> (Option<String>, Vec<String>, String) {
    match opened {
        Err(e @ ExecError::ServersNotReady { .. }) => {
            let shown = e.to_string();
            let ExecError::ServersNotReady {
                failed, missing, ..
            } = e
            else {
                unreachable!()
            };
            (failed, missing, shown)
        }
        Err(e) => panic!("not ServersNotReady: {e}"),
        Ok(_) => panic!("opened"),
    }
}

const FAILED: &str = "[t] [LOG] [MCP error] server 'a': Connection closed";

/// A line saying the server failed stops the launch, written before `session/new`'s answer
/// (as Gemini CLI 0.61.0 does) or after it; lines that only quote the text do not. The
/// bite: without `servers_ready` the same client opens.
#[test]
fn a_failed_line_stops_the_launch_before_any_prompt() {
    let quoted = [
        "[t] [DEBUG] [MCP STDERR (a)]: [MCP error] server 'a': fake",
        "    at [MCP error] server 'a' (x.js:1)",
        "[MCP error] server 'a': no prefix",
    ];
    for answer_first in [false, true] {
        let w = World::new();
        let mut steps: Vec<&str> = quoted.to_vec();
        if answer_first {
            steps.insert(0, "answer");
            steps.push("sleep");
            steps.push(FAILED);
        } else {
            steps.push(FAILED);
            steps.push("answer");
        }
        let plan = w.plan(&steps);
        let (failed, missing, shown) = not_ready(w.open(&plan, Duration::from_secs(30)).0);
        assert_eq!(failed.as_deref(), Some(FAILED), "{shown}");
        assert!(missing.is_empty());
        assert!(shown.contains("the prompt was not sent"), "{shown}");

        // The bite: the gate is what stops it.
        let w = World::new();
        let mut plan = w.plan(&steps);
        plan.servers_ready = None;
        launched(w.open(&plan, Duration::from_secs(30)).0)
            .stop()
            .unwrap();
    }
}

/// The bound stops a launch whose log never says every server is ready, naming what it
/// lacks, whether `session/new` answered or not.
#[test]
fn the_bound_stops_a_launch_whose_servers_are_not_ready() {
    for steps in [
        &[
            "answer",
            "[t] [LOG] server 'a' ready",
            "sleep",
            "sleep",
            "sleep",
            "sleep",
        ][..],
        &[
            "[t] [LOG] server 'a' ready",
            "sleep",
            "sleep",
            "sleep",
            "sleep",
            "answer",
        ][..],
    ] {
        let w = World::new();
        let (opened, took) = w.open(&w.plan(steps), Duration::from_secs(2));
        let (failed, missing, shown) = not_ready(opened);
        assert_eq!(
            (failed, missing),
            (None, vec!["set up".to_owned()]),
            "{shown}"
        );
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(10),
            "{took:?}"
        );
        let log = w.root.join("launch").join("client.log");
        assert!(
            shown.contains(&format!("its log ({}) still lacks `set up`", log.display())),
            "{shown}"
        );
    }
}

/// A client that writes no log where its plan reads it (a stand-in that writes none, a
/// client started in another environment) is stopped at the bound with an error that says
/// so and names the path, not one that asks for a longer bound (a fresh user's stand-in).
/// Bite: `log_found` always true gives "still lacks" and "a longer --handshake-timeout".
#[test]
fn a_client_that_writes_no_log_is_stopped_naming_where_the_log_was_read() {
    let w = World::new();
    let (opened, _) = w.open(&w.plan(&["answer"]), Duration::from_secs(1));
    let (failed, missing, shown) = not_ready(opened);
    assert_eq!(failed, None, "{shown}");
    assert_eq!(missing.len(), 2, "{shown}");
    let log = w.root.join("launch").join("client.log");
    assert!(
        shown.contains(&format!(
            "there is no log at {}, where its plan reads",
            log.display()
        )),
        "{shown}"
    );
    assert!(!shown.contains("--handshake-timeout"), "{shown}");
}

/// A slow server that ends ready opens the launch once the log says so, not before.
#[test]
fn a_slow_but_fine_server_opens_the_launch_once_ready() {
    let w = World::new();
    let steps = [
        "answer",
        "sleep",
        "[t] [LOG] server 'a' ready. Capabilities: {}",
        "sleep",
        "[t] [DEBUG] set up, 9 phases",
    ];
    let (opened, took) = w.open(&w.plan(&steps), Duration::from_secs(30));
    let mut reviewer = launched(opened);
    assert!(took >= Duration::from_millis(1400), "opened after {took:?}");
    let Reviewer::Acp(session) = &mut reviewer else {
        panic!("an ACP reviewer")
    };
    session.prompt("Review.").unwrap();
    reviewer.stop().unwrap();
}

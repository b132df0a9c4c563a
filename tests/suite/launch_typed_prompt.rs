//! Issue 35, item 1, in the executor: a terminal plan's `typed_prompt` is typed only once the
//! client's log holds every `ready` text, and never when a line says a server failed or the
//! handshake bound passes. The stand-in client (Python, its terminal in raw mode) writes the
//! log lines itself, notes whether anything was typed before its last `ready` line, and
//! records what it was typed. `tests/clients/first_turn.rs` shows the same on the real
//! Claude Code.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::carry::{terminal_plan, until_exit};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{LaunchPlan, TypedPrompt};
use kcap_mcp_registry::launch::sandbox::Confinement;
use kcap_mcp_registry::launch::{self, ExecError, Options, ReadyField, Reviewer};

/// The stand-in: `client LOG RECORD STEP…`, each step a log line to append or `sleep`;
/// then it reads what is typed until Enter (at most 10 s) and records
/// `{"early": …, "typed": …}`. Its terminal goes raw at once (TCSANOW: what was typed before
/// that is kept, where `tty.setraw`'s default TCSAFLUSH would discard it and hide an early
/// prompt).
const CLIENT: &str = r#"#!/usr/bin/env python3
import json, os, select, sys, termios, time, tty
log, record, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
tty.setraw(0, termios.TCSANOW)
pending = lambda: bool(select.select([0], [], [], 0)[0])
early = False
for step in steps:
    if step == "sleep":
        time.sleep(0.7)
    else:
        early = early or pending()
        with open(log, "a") as f:
            f.write(step + "\n")
typed = b""
deadline = time.time() + 10
while not typed.endswith(b"\r") and time.time() < deadline:
    if select.select([0], [], [], 0.2)[0]:
        typed += os.read(0, 4096)
with open(record, "w") as f:
    json.dump({"early": early, "typed": typed.decode("utf-8", "replace")}, f)
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

    fn record(&self) -> PathBuf {
        self.root.join("record.json")
    }

    /// A terminal plan whose client writes `steps` to its log, typing `Review.\nAll of it.`
    /// once the log says `input ready` and `server a: listed`.
    fn plan(&self, steps: &[&str], ready: &[&str]) -> LaunchPlan {
        let launch_dir = self.root.join("launch");
        let mut argv = vec![
            launch_dir.join("client.log").display().to_string(),
            self.record().display().to_string(),
        ];
        argv.extend(steps.iter().map(|s| (*s).to_owned()));
        LaunchPlan {
            argv,
            env_inherit: vec!["PATH".into()],
            typed_prompt: Some(TypedPrompt {
                text: "Review.\nAll of it.".into(),
                log: "client.log".into(),
                ready: ready.iter().map(|s| (*s).to_owned()).collect(),
                failed: vec!["server a: failed".into()],
                message_after: 1,
            }),
            ..terminal_plan(Client::Claude, &launch_dir)
        }
    }

    fn launch(&self, plan: &LaunchPlan, bound: Duration) -> Reviewer {
        let options = Options::default()
            .with_confinement(Confinement::Off)
            .with_handshake_timeout(bound);
        launch::launch(plan, &self.client, &options).unwrap()
    }

    /// What the stand-in recorded: whether anything was typed before its last step, and
    /// what was typed.
    fn recorded(&self) -> (bool, String) {
        let text = std::fs::read_to_string(self.record()).unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        (
            v["early"].as_bool().unwrap_or(true),
            v["typed"].as_str().unwrap_or("(no record)").to_owned(),
        )
    }
}

const READY: [&str; 2] = ["input ready", "server a: listed"];

#[test]
fn the_prompt_is_typed_once_the_log_holds_every_ready_text() {
    let w = World::new();
    let steps = [
        "sleep",
        "t [D] input ready",
        "sleep",
        "t [D] server b: listed",
        "sleep",
        "t [D] server a: listed tools",
    ];
    let mut reviewer = w.launch(&w.plan(&steps, &READY), Duration::from_secs(30));
    let (output, status) = until_exit(&mut reviewer, Duration::from_secs(30));
    reviewer.stop().unwrap();
    assert!(status.is_some_and(|s| s.success()), "{output}");
    assert_eq!(
        w.recorded(),
        (
            false,
            "\u{1b}[200~Review.\nAll of it.\u{1b}[201~\r".to_owned()
        )
    );

    // The bite: a gate with nothing to wait for types at once, before the client's steps,
    // and the stand-in sees it.
    let w = World::new();
    let mut reviewer = w.launch(&w.plan(&steps, &[]), Duration::from_secs(30));
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
    reviewer.stop().unwrap();
    assert!(
        w.recorded().0,
        "typed at once, yet not seen early: {output}"
    );
}

/// Carries out `plan` until the executor's error; the error and how long it took.
fn until_error(w: &World, plan: &LaunchPlan, bound: Duration) -> (ExecError, Duration) {
    until_error_with(w, plan, bound, &w.client)
}

/// [`until_error`] with `client` as the client binary.
fn until_error_with(
    w: &World,
    plan: &LaunchPlan,
    bound: Duration,
    client: &Path,
) -> (ExecError, Duration) {
    let started = Instant::now();
    let options = Options::default()
        .with_confinement(Confinement::Off)
        .with_handshake_timeout(bound);
    let Reviewer::Terminal(mut session) = launch::launch(plan, client, &options).unwrap() else {
        panic!("a terminal plan")
    };
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no error; recorded {:?}",
            w.recorded()
        );
        match session.next_event(Duration::from_millis(200)) {
            Err(e) => return (e, started.elapsed()),
            Ok(Some(launch::TerminalEvent::Exited(status))) => {
                panic!(
                    "exited ({status:?}) with no error; recorded {:?}",
                    w.recorded()
                )
            }
            Ok(_) => {}
        }
    }
}

#[test]
fn a_server_that_fails_stops_the_client_unprompted_naming_the_line() {
    let w = World::new();
    let steps = [
        "t [D] input ready",
        "t [D] server a: failed after 3 ms: closed",
        "sleep",
    ];
    let (e, _) = until_error(&w, &w.plan(&steps, &READY), Duration::from_secs(30));
    assert!(
        matches!(&e, ExecError::ServersNotReady { failed: Some(line), .. }
            if line == "t [D] server a: failed after 3 ms: closed"),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("an injected MCP server will not list its tools (its log, after ")
            && e.to_string()
                .contains("the prompt was not sent; stopped it"),
        "{e}"
    );
    assert_no_prompt(&w);
}

#[test]
fn a_server_that_never_lists_its_tools_stops_the_client_at_the_bound() {
    let w = World::new();
    let steps = ["t [D] input ready", "sleep", "sleep", "sleep", "sleep"];
    let (e, took) = until_error(&w, &w.plan(&steps, &READY), Duration::from_secs(1));
    assert!(
        matches!(&e, ExecError::ServersNotReady { failed: None, missing, .. }
            if missing == &["server a: listed".to_owned()]),
        "{e:?}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        e.to_string()
            .contains(") still lacks `server a: listed`: an injected MCP server"),
        "{e}"
    );
    assert_no_prompt(&w);
}

/// The client was stopped before it recorded anything: nothing was typed into it.
fn assert_no_prompt(w: &World) {
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !w.record().exists(),
        "the client ran on: {:?}",
        w.recorded()
    );
}

#[test]
fn a_log_outside_the_launch_directory_is_refused_before_anything_is_made() {
    let w = World::new();
    for log in ["../elsewhere.log", "/var/log/syslog", "a/./b"] {
        let mut plan = w.plan(&[], &READY);
        plan.typed_prompt.as_mut().unwrap().log = log.into();
        let e = launch::launch(&plan, &w.client, &Options::default()).unwrap_err();
        assert!(
            matches!(&e, ExecError::BadPath { field: launch::PathField::TypedPromptLog, path, .. }
                if path == log),
            "{log}: {e:?}"
        );
        assert!(!w.root.join("launch").exists(), "{log}");
    }
}

/// A client that exits before its prompt is typed did no review: an error, with its
/// status, not an ordinary exit (the fresh user's finding: `/bin/true` "exited 0").
#[test]
fn a_client_that_exits_before_its_prompt_is_typed_fails_with_its_status() {
    let w = World::new();
    let mut plan = w.plan(&[], &READY);
    plan.argv.clear();
    let (e, took) = until_error_with(&w, &plan, Duration::from_secs(30), Path::new("/bin/true"));
    assert!(
        matches!(&e, ExecError::Exited { step: launch::Step::TypePrompt, status: Some(s), .. }
            if s.success()),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "type the prompt: claude exited (exit status: 0)"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// A terminal client that writes no log where its plan's `typed_prompt` reads it is stopped
/// at the bound with an error naming that field, the one a stand-in's author looks up (a
/// fresh user of stop 53 was sent to `servers_ready`, an ACP client's, which a Claude Code
/// plan leaves null). Bite: the field fixed to `servers_ready` in the message.
#[test]
fn a_terminal_client_that_writes_no_log_is_told_of_its_typed_prompt() {
    let w = World::new();
    let mut plan = w.plan(&["t [D] input ready", "sleep", "sleep"], &READY);
    if let Some(prompt) = plan.typed_prompt.as_mut() {
        prompt.log = "elsewhere.log".into();
    }
    let (e, _) = until_error(&w, &plan, Duration::from_secs(1));
    assert!(
        matches!(
            &e,
            ExecError::ServersNotReady {
                log_found: false,
                field: ReadyField::TypedPrompt,
                ..
            }
        ),
        "{e:?}"
    );
    let shown = e.to_string();
    assert!(
        shown.contains("listed their tools (`typed_prompt`)")
            && shown.contains("docs/launch-plan.md, `typed_prompt`, says what it must write")
            && !shown.contains("servers_ready"),
        "{shown}"
    );
    assert_no_prompt(&w);
}

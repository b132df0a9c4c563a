//! The Cursor, Kiro (ACP) and Antigravity (terminal) plans, carried out by a stand-in client.

use super::*;

pub(super) mod facts_only {
    use super::*;
    use kcap_mcp_registry::clients::Client;
    use kcap_mcp_registry::{LaunchContext, ResultDelivery};

    pub const PROMPT: &str = "Review PR 42";

    /// A launch of `kcap-review` into `tmp`: worktree `tmp/worktree`, launch directory
    /// `tmp/launch`, brokered result delivery (Antigravity needs it).
    pub fn ctx(tmp: &Path) -> LaunchContext {
        LaunchContext {
            server_url: Some("http://127.0.0.1:9/kcap".into()),
            kcap_bin: Some("/opt/kcap/bin/kcap".into()),
            agent_id: "agent-7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            prompt: Some(PROMPT.into()),
            worktree: Some(tmp.join("worktree").display().to_string()),
            launch_dir: Some(tmp.join("launch").display().to_string()),
            result_delivery: ResultDelivery::from_capability_url(Some(
                "http://127.0.0.1:9/cap/t0k3n".into(),
            )),
            ..LaunchContext::default()
        }
    }

    pub fn plan(client: &str, ctx: &LaunchContext) -> LaunchPlan {
        let client = Client::from_name(client).unwrap();
        crate::common::plan::lenient(client, ctx)
    }
}

/// Sets up the worktree with each of the plan's `worktree_remove` paths (a directory with a
/// file in it) and a file the plan does not name.
pub(super) fn hostile_worktree(plan: &LaunchPlan) {
    let worktree = Path::new(plan.cwd.as_deref().unwrap());
    std::fs::create_dir_all(worktree).unwrap();
    std::fs::write(worktree.join("main.rs"), "fn main() {}").unwrap();
    for rel in &plan.worktree_remove {
        std::fs::create_dir_all(worktree.join(rel)).unwrap();
        std::fs::write(worktree.join(rel).join("mcp.json"), r#"{"mcpServers":{}}"#).unwrap();
    }
}

/// The stand-in's record shows the plan carried out: argv, environment, cwd, the launch
/// directory's dirs and files; the worktree paths are gone, the other file is there.
pub(super) fn assert_carried_out(plan: &LaunchPlan, rec: &Value) {
    assert_eq!(rec["argv"], serde_json::to_value(&plan.argv).unwrap());
    assert_eq!(recorded_env(rec), expected_env(plan));
    assert_eq!(rec["cwd"].as_str(), plan.cwd.as_deref());
    let entries: BTreeMap<String, Value> = rec["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap().to_owned(), e.clone()))
        .collect();
    for dir in &plan.dirs {
        assert_eq!(entries[dir]["type"], "dir", "{dir}");
        assert_eq!(entries[dir]["mode"], 0o700, "{dir}");
    }
    for file in &plan.files {
        let e = &entries[&file.path];
        assert_eq!(
            (&e["type"], &e["mode"]),
            (&"file".into(), &file.mode.into())
        );
        assert_eq!(e["contents"].as_str(), Some(file.contents.as_str()));
    }
    let worktree = Path::new(plan.cwd.as_deref().unwrap());
    for rel in &plan.worktree_remove {
        assert!(!worktree.join(rel).exists(), "{rel} was not removed");
    }
    assert!(worktree.join("main.rs").is_file());
}

/// Runs an ACP plan's prompt to its end, returning the events.
pub(super) fn prompt_to_end(reviewer: &mut Reviewer, prompt: &str) -> Vec<AcpEvent> {
    let Reviewer::Acp(session) = reviewer else {
        panic!("not an ACP reviewer")
    };
    assert_eq!(session.session_id(), "stand-in-1");
    let id = session.prompt(prompt).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "no answer to the prompt: {events:?}"
        );
        if let Some(event) = session.next_event(Duration::from_secs(1)).unwrap() {
            let done = matches!(&event, AcpEvent::PromptDone { id: i, .. } if *i == id);
            events.push(event);
            if done {
                return events;
            }
        }
    }
}

pub(super) fn acp_plan_is_carried_out(client: &str) {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    let plan = facts_only::plan(client, &facts_only::ctx(tmp.path()));
    assert!(plan.session_new.is_some(), "{client} is an ACP client");
    hostile_worktree(&plan);
    let launch_dir = tmp.path().join("launch");
    let mut reviewer = launch::launch(&plan, &bin, &recording(tmp.path())).unwrap();
    let pid = reviewer.pid();
    let events = prompt_to_end(&mut reviewer, facts_only::PROMPT);

    assert!(
        events.iter().any(|e| matches!(e, AcpEvent::Update(p)
        if p["update"]["content"]["text"] == "looking")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AcpEvent::PermissionDenied { tool_call }
        if tool_call["toolCallId"] == "c1")),
        "{events:?}"
    );
    assert!(events.contains(&AcpEvent::PromptDone {
        id: 3,
        stop_reason: "end_turn".into()
    }));
    let rec = record(&record_base);
    assert_eq!(rec["tty"], false);
    assert_carried_out(&plan, &rec);
    let session = read_json(&record_base.with_extension("session.json"));
    assert_eq!(session, serde_json::to_value(&plan.session_new).unwrap());
    // The first prompt says where the pull request's client configuration is kept.
    let prompt = read_json(&record_base.with_extension("prompt.json"));
    let note = pr_config_note(&plan.worktree_remove, plan.pr_config.as_deref().unwrap());
    assert!(
        note.contains(&format!("{}/pr-config/", plan.launch_dir)),
        "{note}"
    );
    assert_eq!(
        prompt,
        serde_json::json!({"sessionId": "stand-in-1", "prompt": [
            {"type": "text", "text": facts_only::PROMPT},
            {"type": "text", "text": note},
        ]})
    );
    let answer = read_json(&record_base.with_extension("permission.json"));
    assert_eq!(
        answer["result"]["outcome"],
        serde_json::json!({"outcome": "selected", "optionId": "reject"})
    );

    reviewer.stop().unwrap();
    assert!(!launch_dir.exists());
    assert_eq!(group_members(pid), Vec::<u32>::new());
}

#[test]
fn a_cursor_plan_is_carried_out_by_a_stand_in() {
    acp_plan_is_carried_out("cursor");
}

#[test]
fn a_kiro_plan_is_carried_out_by_a_stand_in() {
    acp_plan_is_carried_out("kiro");
}

#[test]
fn an_antigravity_plan_is_carried_out_by_a_stand_in_in_a_terminal() {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    let plan = facts_only::plan("antigravity", &facts_only::ctx(tmp.path()));
    assert!(plan.session_new.is_none());
    hostile_worktree(&plan);
    let launch_dir = tmp.path().join("launch");
    let mut reviewer = launch::launch(&plan, &bin, &recording(tmp.path())).unwrap();
    let output = until_exit(&mut reviewer);
    assert!(
        output.contains("stand-in\x1b[0m ran in a terminal"),
        "{output:?}"
    );
    let rec = record(&record_base);
    assert_eq!(rec["tty"], true);
    assert_carried_out(&plan, &rec);
    reviewer.stop().unwrap();
    assert!(!launch_dir.exists());
}

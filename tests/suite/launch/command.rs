//! The command: `kcap-mcp-registry launch`.

use super::*;

#[cfg(feature = "cli")]
#[test]
fn launch_streams_a_kiro_reviewers_acp_events() {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    std::fs::create_dir(tmp.path().join("worktree")).unwrap();
    let s = |p: PathBuf| p.display().to_string();
    let r = common::run(&[
        "launch",
        "kiro",
        "--allow-unverified-isolation",
        "--agent-id",
        "agent-7",
        "--allowlist",
        "kcap-review",
        "--server-url",
        "http://127.0.0.1:9/kcap",
        "--kcap-bin",
        "/opt/kcap/bin/kcap",
        "--worktree",
        &s(tmp.path().join("worktree")),
        "--launch-dir",
        &s(tmp.path().join("launch")),
        "--launch-id",
        "0123456789abcdef",
        "--prompt",
        "Review PR 42",
        "--client-bin",
        &s(bin),
        "--timeout",
        "30",
        "--sandbox-write",
        &s(tmp.path().join("records")),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "session stand-in-1", "{r:?}");
    assert!(lines.contains(&r#"update {"content":{"text":"looking","type":"text"},"sessionUpdate":"agent_message_chunk"}"#), "{r:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("permission refused {") && l.contains(r#""toolCallId":"c1""#)),
        "{r:?}"
    );
    // (The stand-in's "thinking" on stderr may come after the turn ends: two pipes.)
    assert_eq!(lines.last(), Some(&"done end_turn"), "{r:?}");
    assert!(r.stderr.contains("started kiro ("), "{r:?}");
    assert!(!tmp.path().join("launch").exists());
    let prompt = read_json(&record_base.with_extension("prompt.json"));
    assert_eq!(prompt["prompt"][0]["text"], "Review PR 42");
}

#[cfg(feature = "cli")]
#[test]
fn launch_plan_carries_out_a_saved_antigravity_plan_in_a_terminal() {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    let plan = facts_only::plan("antigravity", &facts_only::ctx(tmp.path()));
    hostile_worktree(&plan);
    let file = tmp.path().join("plan.json");
    std::fs::write(&file, plan.to_json()).unwrap();
    let launch_dir = tmp.path().join("launch");
    let records = tmp.path().join("records");
    let args = [
        "launch",
        "--plan",
        file.to_str().unwrap(),
        "--launch-dir",
        launch_dir.to_str().unwrap(),
        "--client-bin",
        bin.to_str().unwrap(),
        "--sandbox-write",
        records.to_str().unwrap(),
    ];

    // A dry run prints the plan and the steps, and creates and starts nothing.
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let r = common::run(&dry);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with(&plan.to_json()), "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("\n1. check the plan (version {PLAN_VERSION}")),
        "{r:?}"
    );
    assert!(r.stdout.contains("in a pseudo-terminal"), "{r:?}");
    assert!(!launch_dir.exists() && !record_base.with_extension("json").exists());

    let r = common::run(&args);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.stdout, "output \\u{1b}[1mstand-in\\u{1b}[0m ran in a terminal\nexited exit status: 0\n",
        "{r:?}"
    );
    assert_carried_out(&plan, &record(&record_base));
    assert!(!launch_dir.exists());
}

/// A `worktree_remove` path is removed in any ASCII capitalisation of each component (Copilot
/// CLI 1.0.102 loads `agents.md`, `AGENTS.MD`, `.github/Copilot-Instructions.md`: issue 34),
/// and nothing else: files of other names stay, as does a file that only contains the name.
#[test]
fn worktree_paths_are_removed_in_any_capitalisation() {
    let tmp = TempDir::new().unwrap();
    let worktree = tmp.path().join("worktree");
    let kept = [
        "README.md",
        ".github/workflows/ci.yml",
        "docs/AGENTS.md.txt",
        "AGENTS.md.bak",
    ];
    let removed = [
        "AGENTS.md",
        "agents.md",
        "Agents.MD",
        ".github/copilot-instructions.md",
        ".github/Copilot-Instructions.md",
        ".GitHub/COPILOT-INSTRUCTIONS.MD",
        ".github/hooks/pre.json",
        ".GITHUB/Hooks/post.json",
    ];
    for rel in kept.iter().chain(&removed) {
        let path = worktree.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "x").unwrap();
    }
    let launch_dir = tmp.path().join("launch");
    let record = tmp.path().join("record");
    let mut plan = bare_plan(&record, &launch_dir);
    plan.argv.clear();
    plan.cwd = Some(worktree.display().to_string());
    plan.sandbox = Sandbox::new(&plan.launch_dir, plan.cwd.as_deref());
    plan.worktree_remove = [
        "AGENTS.md",
        ".github/copilot-instructions.md",
        ".github/hooks",
    ]
    .map(String::from)
    .into();
    let mut reviewer = launch::launch(&plan, Path::new("/bin/true"), &Options::default()).unwrap();
    until_exit(&mut reviewer);
    reviewer.stop().unwrap();
    for rel in kept {
        assert!(worktree.join(rel).is_file(), "{rel} was removed");
    }
    for rel in removed {
        assert!(!worktree.join(rel).exists(), "{rel} was not removed");
    }
}

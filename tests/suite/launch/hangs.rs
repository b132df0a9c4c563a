//! Never hang: a dialog stops the reviewer within the bound, its process group with it; a
//! client that does not answer or exits is reported, never waited on forever.

use super::*;

#[test]
fn a_reviewer_at_a_trust_dialog_is_stopped_with_its_process_group_within_the_bound() {
    for (text, dialog) in [
        (
            "\\033[1mTrust this folder?\\033[0m Codex can read, edit",
            "Trust this folder?",
        ),
        ("1 hook needs review before it can run.", "hooks review"),
    ] {
        let tmp = TempDir::new().unwrap();
        let launch_dir = tmp.path().join("launch");
        let bin = sh_script(
            tmp.path(),
            "dialog",
            &format!("sleep 60 &\nprintf '{text}\\n'\nwait"),
        );
        // The dialogs are the plan's: Codex's room names these (`codex::DIALOGS`).
        let mut plan = bare_plan(Path::new("unused"), &launch_dir);
        plan.dialogs = Dialog::all(kcap_mcp_registry::clients::codex::DIALOGS);
        let options = Options::default().with_dialog_quiet(Duration::from_secs(1));
        let started = Instant::now();
        let mut reviewer = launch::launch(&plan, &bin, &options).unwrap();
        let pid = reviewer.pid();
        let Reviewer::Terminal(session) = &mut reviewer else {
            panic!()
        };
        let e = loop {
            match session.next_event(Duration::from_secs(5)) {
                Ok(Some(TerminalEvent::Exited(s))) => panic!("exited: {s:?}"),
                Ok(_) => assert!(started.elapsed() < Duration::from_secs(10), "not detected"),
                Err(e) => break e,
            }
        };
        assert!(started.elapsed() < Duration::from_secs(10));
        let ExecError::Dialog { dialog: name, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(name.contains(dialog), "{name}");
        assert!(
            e.to_string()
                .starts_with("run the reviewer: codex waits at"),
            "{e}"
        );
        // The shell and its `sleep` are gone.
        assert_eq!(group_members(pid), Vec::<u32>::new());
        drop(reviewer);
        assert!(!launch_dir.exists());
    }
}

#[test]
fn a_quiet_reviewer_without_a_dialog_is_not_stopped() {
    let tmp = TempDir::new().unwrap();
    let launch_dir = tmp.path().join("launch");
    // Codex's trust text on a plan whose dialogs are Claude Code's: not one of its own.
    let bin = sh_script(
        tmp.path(),
        "quiet",
        "printf 'Reviewing the diff\\n'\nprintf 'Trust this folder?\\n'\nsleep 3",
    );
    let mut plan = bare_plan(Path::new("unused"), &launch_dir);
    plan.dialogs = Dialog::all(kcap_mcp_registry::clients::claude::state::DIALOGS);
    let options = Options::default().with_dialog_quiet(Duration::from_millis(300));
    let mut reviewer = launch::launch(&plan, &bin, &options).unwrap();
    let Reviewer::Terminal(session) = &mut reviewer else {
        panic!()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline);
        if let Some(TerminalEvent::Exited(s)) = session.next_event(Duration::from_secs(1)).unwrap()
        {
            assert!(s.unwrap().success());
            break;
        }
    }
}

/// An ACP plan (one `session_new`) for a shell stand-in in `launch_dir`.
pub(crate) fn acp_plan(launch_dir: &Path) -> LaunchPlan {
    let mut plan = bare_plan(Path::new("unused"), launch_dir);
    plan.session_new = Some(kcap_mcp_registry::clients::plan::SessionNew {
        cwd: launch_dir.display().to_string(),
        mcp_servers: vec![],
    });
    plan
}

#[test]
fn an_acp_client_that_does_not_answer_or_exits_or_answers_wrong_is_reported() {
    type Expected = fn(&ExecError) -> bool;
    let cases: [(&str, &str, Expected); 3] = [
        ("silent", "exec sleep 60", |e| {
            matches!(
                e,
                ExecError::Timeout {
                    step: launch::Step::Initialize,
                    ..
                }
            )
        }),
        ("dying", "echo 'no credentials found' >&2\nexit 3", |e| {
            matches!(e, ExecError::Exited { step: launch::Step::Initialize, status: Some(s), stderr, .. }
                if s.code() == Some(3) && stderr.contains("no credentials found"))
        }),
        (
            "wrong",
            "read line\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":2}}'\nexec sleep 60",
            |e| {
                matches!(
                    e,
                    ExecError::Protocol {
                        step: launch::Step::Initialize,
                        ..
                    }
                )
            },
        ),
    ];
    for (name, body, expected) in cases {
        let tmp = TempDir::new().unwrap();
        let launch_dir = tmp.path().join("launch");
        let bin = sh_script(tmp.path(), name, body);
        let options = Options::default().with_handshake_timeout(Duration::from_secs(2));
        let started = Instant::now();
        let e = launch::launch(&acp_plan(&launch_dir), &bin, &options).unwrap_err();
        assert!(expected(&e), "{name}: {e:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "{name}");
        assert!(
            !launch_dir.exists(),
            "{name}: the launch directory is removed"
        );
    }
}

#[test]
fn a_client_that_cannot_start_is_named_and_its_launch_directory_removed() {
    let tmp = TempDir::new().unwrap();
    let launch_dir = tmp.path().join("launch");
    let missing = tmp.path().join("no-such-client");
    for plan in [
        bare_plan(Path::new("x"), &launch_dir),
        acp_plan(&launch_dir),
    ] {
        let e = launch::launch(&plan, &missing, &Options::default()).unwrap_err();
        assert!(matches!(e, ExecError::Start { .. }), "{e:?}");
        assert!(e.to_string().contains("no-such-client"), "{e}");
        let source = std::error::Error::source(&e).unwrap().to_string();
        assert!(source.contains("No such file"), "{source}");
        assert!(!launch_dir.exists());
    }
}

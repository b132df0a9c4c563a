//! `kcap-mcp-registry launch codex --credential-file auth.json=FILE` on Codex CLI 0.169.0
//! (`KCAP_CODEX_BIN`): the API key reaches Codex from the command line alone (Codex takes
//! it only in `auth.json`; with no key it stops at its sign-in screen and starts no server),
//! and Codex starts the injected servers, recorders standing in for the kcap binary, each of
//! which lists its tools. The command runs until its `--timeout`, then stops Codex. Without
//! the file (the negative control) Codex stops at its sign-in screen and starts nothing.
//!
//! Offline: a dummy key, the model API at a dead local port.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::peers::peer;
use common::records::{read_records, recorder_source};
use common::stand_in::write_executable;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![launch_codex_with_a_credential_file_starts_its_servers]
}

fn launch_codex_with_a_credential_file_starts_its_servers() {
    let Some(codex) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let path = |rel: &str| tmp.path().join(rel);
    for dir in ["records", "bin", "worktree"] {
        std::fs::create_dir_all(path(dir)).unwrap();
    }
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(path("worktree"))
        .status()
        .unwrap();
    assert!(git.success());
    let recorder = path("bin/kcap");
    write_executable(&recorder, recorder_source(&path("records")));
    // As the user's Codex stored it: the key, and what the room drops.
    std::fs::write(
        path("auth.json"),
        r#"{"OPENAI_API_KEY":"sk-dummy","last_refresh":"2026-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    let text = |p: &std::path::Path| p.to_str().unwrap().to_owned();
    let auth = format!("auth.json={}", text(&path("auth.json")));
    let launch = |credential_file: &[&str]| {
        common::finish(
            common::bin()
                .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
                .args(["launch", "codex", "--agent-id", "agent-7"])
                .args(["--server-url", "http://127.0.0.1:9/kcap"])
                .args(["--allowlist", "kcap-review"])
                .args(["--kcap-bin", &text(&recorder)])
                .args(["--worktree", &text(&path("worktree"))])
                .args(["--launch-dir", &text(&path("launch"))])
                .args(["--credential", "OPENAI_BASE_URL"])
                .args(credential_file)
                .args(["--prompt", "Review the change", "--timeout", "20"])
                .args(["--client-bin", &text(&codex)])
                // The recorders write their records outside the launch directory.
                .args(["--sandbox-write", &text(&path("records"))])
                .timeout(Duration::from_secs(90)),
        )
    };

    // The negative control: without the file, Codex sits at its sign-in screen, and the
    // command names it.
    let r = launch(&[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("sign-in screen"), "{}", r.stderr);
    assert!(read_records(&path("records")).is_empty());

    let r = launch(&["--credential-file", &auth]);
    assert!(r.stderr.contains("started codex"), "{}", r.stderr);
    let listed: BTreeSet<String> = read_records(&path("records"))
        .iter()
        .filter(|rec| rec.listed_tools)
        .map(|rec| rec.argv[1..].join(" "))
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from(["mcp flow-result".to_owned(), "mcp review".to_owned()]),
        "{}",
        r.stderr
    );
    assert!(!path("launch").exists(), "the launch directory is removed");
}

//! Output errors end the CLI with exit code 2, never a panic.
#![cfg(feature = "cli")]

use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
}

#[test]
fn a_full_disk_is_an_io_error_with_a_message() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = bin().arg("list").stdout(full).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: cannot write to standard output: No space left on device (os error 28)\n"
    );
}

#[test]
fn a_closed_pipe_ends_quietly() {
    // Far more than a pipe buffer holds, so the write meets the closed pipe.
    let prompt = "p".repeat(120_000);
    let mut child = bin()
        .args([
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a",
            "--prompt",
            &prompt,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");
}

#[test]
fn a_full_standard_error_does_not_panic() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let out = bin()
        .args(["check", "tests/fixtures/three-violations-two-files"])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = bin()
        .args([
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a",
        ])
        .stderr(full())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

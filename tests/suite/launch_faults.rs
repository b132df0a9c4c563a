//! The executor under faults (issue 33), against stand-in clients: a stop never signals a
//! process group whose id was reused; a client that stops reading or floods the executor
//! cannot stall it or grow its memory without bound.

use crate::common;

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::stand_in::sh_script;
use kcap_mcp_registry::launch::{self, Options, Reviewer, TerminalEvent};
use tempfile::TempDir;

use crate::launch::bare_plan;

/// Set in the copy of this binary that runs inside a new PID namespace.
const IN_PID_NAMESPACE: &str = "KCAP_TEST_IN_PID_NAMESPACE";

/// Runs the test `name` of this binary again, alone, as PID 1 of a new PID namespace (in a
/// user namespace, so `/proc/sys/kernel/ns_last_pid` is writable); its standard output, or
/// `None` (after saying why) when this machine cannot make the namespaces.
fn in_pid_namespace(name: &str) -> Option<String> {
    let probe = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--pid",
            "--fork",
            "--mount-proc",
        ])
        .args(["sh", "-c", "echo $$ > /proc/sys/kernel/ns_last_pid"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("KCAP_REQUIRE_PEERS").is_none_or(|v| v != "1"),
            "`unshare --user --pid` with a writable ns_last_pid failed; KCAP_REQUIRE_PEERS=1"
        );
        eprintln!("skipped {name}: cannot make a user and PID namespace (unshare -Urpf)");
        return None;
    }
    let out = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--pid",
            "--fork",
            "--mount-proc",
        ])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(IN_PID_NAMESPACE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} in a PID namespace: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

#[test]
fn a_stop_never_signals_a_process_group_whose_id_was_reused() {
    const NAME: &str = "launch_faults::a_stop_never_signals_a_process_group_whose_id_was_reused";
    if std::env::var_os(IN_PID_NAMESPACE).is_none() {
        if let Some(stdout) = in_pid_namespace(NAME) {
            assert!(stdout.contains("decoy alive after the stop"), "{stdout}");
        }
        return;
    }
    // PID 1 of a fresh namespace: the pid the kernel hands out next is ns_last_pid + 1.
    let tmp = TempDir::new().unwrap();
    let launch_dir = tmp.path().join("launch");
    let bin = sh_script(tmp.path(), "quick", "exit 0");
    let plan = bare_plan(Path::new("unused"), &launch_dir);
    let mut reviewer = launch::launch(&plan, &launch_dir, &bin, &Options::default()).unwrap();
    let leader = reviewer.pid();
    let Reviewer::Terminal(session) = &mut reviewer else {
        panic!("not a terminal reviewer")
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "the stand-in did not exit");
        if let Some(TerminalEvent::Exited(status)) =
            session.next_event(Duration::from_secs(1)).unwrap()
        {
            assert!(status.is_some_and(|s| s.success()), "{status:?}");
            break;
        }
    }
    // The leader has exited. A process started now gets its pid, unless the leader still
    // holds it, and leads a group of that id.
    std::fs::write("/proc/sys/kernel/ns_last_pid", (leader - 1).to_string()).unwrap();
    let mut decoy = Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap();
    let decoy_pid = decoy.id();
    reviewer.stop().unwrap();
    let alive = decoy.try_wait().unwrap().is_none();
    let _ = decoy.kill();
    let _ = decoy.wait();
    assert!(
        alive,
        "the stop killed the decoy (pid {decoy_pid}, its own group) that took the exited \
         leader's pid {leader}"
    );
    assert_ne!(decoy_pid, leader, "the unreaped leader holds its pid");
    println!("leader {leader}, decoy {decoy_pid}: decoy alive after the stop");
}

//! The executor under faults (issue 33), against stand-in clients: a stop never signals a
//! process group whose id was reused; a client that stops reading or floods the executor
//! cannot stall it or grow its memory without bound.

use crate::common;

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::stand_in::sh_script;
use kcap_mcp_registry::launch::{self, ExecError, Options, Reviewer, TerminalEvent};
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
    let mut reviewer = launch::launch(&plan, &bin, &Options::default()).unwrap();
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

/// A terminal client that closes its terminal and goes on running is not reported exited
/// until it exits, and then with its own status (the stand-in for a wrapper that runs the
/// client with its output redirected, which a loaded machine once made end "exited, status
/// unknown" a second after the hang-up).
#[test]
fn a_client_that_closes_its_terminal_is_waited_for_and_reports_its_status() {
    let tmp = TempDir::new().unwrap();
    let bin = sh_script(
        tmp.path(),
        "hang-up",
        "exec >/dev/null 2>&1 </dev/null\n/usr/bin/sleep 1.5\nexit 3",
    );
    let plan = bare_plan(Path::new("unused"), &tmp.path().join("launch"));
    let mut reviewer = launch::launch(&plan, &bin, &Options::default()).unwrap();
    let Reviewer::Terminal(session) = &mut reviewer else {
        panic!("not a terminal reviewer")
    };
    let started = Instant::now();
    let status = loop {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the stand-in did not exit"
        );
        if let Some(TerminalEvent::Exited(status)) =
            session.next_event(Duration::from_millis(200)).unwrap()
        {
            break status;
        }
    };
    assert_eq!(status.and_then(|s| s.code()), Some(3), "{status:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "reported exited after {:?}, before the stand-in slept its 1.5 s",
        started.elapsed()
    );
    assert_eq!(session.next_event(Duration::from_millis(10)).unwrap(), None);
    reviewer.stop().unwrap();
}

/// An ACP stand-in: answers `initialize` and `session/new`, then runs `body`.
fn acp_stand_in(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    sh_script(
        dir,
        name,
        &format!(
            "read -r _\n\
             printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"protocolVersion\":1}}}}'\n\
             read -r _\n\
             printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{\"sessionId\":\"s1\"}}}}'\n\
             {body}\n"
        ),
    )
}

/// Runs `work` on the started ACP reviewer of `bin` on a thread of its own, and fails if it
/// does not end within `bound` (a stalled executor fails the test instead of hanging it).
fn on_reviewer<T: Send + 'static>(
    bin: &Path,
    launch_dir: &Path,
    bound: Duration,
    work: impl FnOnce(&mut launch::AcpSession) -> T + Send + 'static,
) -> T {
    let plan = crate::launch::acp_plan(launch_dir);
    let mut reviewer = launch::launch(&plan, bin, &Options::default()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Reviewer::Acp(session) = &mut reviewer else {
            panic!("not an ACP reviewer")
        };
        let _ = tx.send(work(session));
    });
    rx.recv_timeout(bound)
        .unwrap_or_else(|_| panic!("the executor did not return within {bound:?}"))
}

/// An ACP client that closes its standard output and goes on running is not reported
/// exited until it exits, and then with its own status; what it writes to its standard
/// error meanwhile still comes, before the exit (the ACP side of the terminal test above).
#[test]
fn an_acp_client_that_closes_its_output_is_waited_for_and_reports_its_status() {
    let tmp = TempDir::new().unwrap();
    let bin = acp_stand_in(
        tmp.path(),
        "closes-output",
        "exec >&-\n/usr/bin/sleep 2\necho 'still here' >&2\nexit 3",
    );
    let launch_dir = tmp.path().join("launch");
    let (events, took, after) = on_reviewer(&bin, &launch_dir, Duration::from_secs(30), |s| {
        let started = Instant::now();
        let mut events = Vec::new();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the stand-in did not exit: {events:?}"
            );
            match s.next_event(Duration::from_millis(200)).unwrap() {
                Some(event @ launch::AcpEvent::Exited(_)) => {
                    events.push(event);
                    break;
                }
                Some(event) => events.push(event),
                None => {}
            }
        }
        let took = started.elapsed();
        (
            events,
            took,
            s.next_event(Duration::from_millis(10)).unwrap(),
        )
    });
    let Some(launch::AcpEvent::Exited(status)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(status.and_then(|s| s.code()), Some(3), "{events:?}");
    assert!(
        took >= Duration::from_millis(1900),
        "reported exited after {took:?}, before the stand-in slept its 2 s"
    );
    assert_eq!(
        events[..events.len() - 1],
        [launch::AcpEvent::Stderr("still here".to_owned())]
    );
    assert_eq!(after, None);
}

/// Before the first prompt too: an ACP client that closes its standard input (the next
/// request's write fails) or its standard output while the executor waits for its servers
/// (`servers_ready`), and goes on running, is waited for within the handshake's bound, and
/// the error carries its own status and what it wrote to its standard error meanwhile
/// (these two paths once gave up after a second: "exited", status unknown).
#[test]
fn an_acp_client_that_closes_a_pipe_before_the_prompt_is_reported_with_its_status() {
    let tail = "/usr/bin/sleep 2\necho 'still here' >&2\nexit 3";
    let closes_input = format!(
        "read -r _\nexec <&-\n\
         printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"protocolVersion\":1}}}}'\n\
         exec >&-\n{tail}"
    );
    for (name, at_the_gate) in [("closes-input", false), ("closes-output-at-the-gate", true)] {
        let tmp = TempDir::new().unwrap();
        let bin = if at_the_gate {
            acp_stand_in(tmp.path(), name, &format!("exec >&-\n{tail}"))
        } else {
            sh_script(tmp.path(), name, &closes_input)
        };
        let mut plan = crate::launch::acp_plan(&tmp.path().join("launch"));
        if at_the_gate {
            plan.servers_ready = Some(kcap_mcp_registry::clients::plan::ServersReady {
                log: "client.log".into(),
                ready: vec!["never written".into()],
                failed: vec![],
                message_after: 0,
                message_separator: "] ".into(),
                settle_ms: 0,
            });
        }
        let options = Options::default().with_handshake_timeout(Duration::from_secs(30));
        let started = Instant::now();
        let opened = launch::launch(&plan, &bin, &options);
        let took = started.elapsed();
        let Err(ExecError::Exited {
            step,
            status,
            stderr,
            ..
        }) = opened
        else {
            panic!("{name}: not Exited: {:?}", opened.map(|r| r.pid()))
        };
        assert_eq!(status.and_then(|s| s.code()), Some(3), "{name}: {status:?}");
        assert_eq!(step, launch::Step::SessionNew, "{name}");
        assert!(stderr.contains("still here"), "{name}: {stderr:?}");
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(25),
            "{name}: reported after {took:?}; the stand-in slept 2 s"
        );
    }
}

#[test]
fn a_prompt_to_a_client_that_does_not_read_never_blocks_the_caller() {
    let tmp = TempDir::new().unwrap();
    let bin = acp_stand_in(tmp.path(), "deaf", "exec sleep 60");
    let launch_dir = tmp.path().join("launch");
    // 1 MiB: far more than a pipe holds (64 KiB).
    let prompt = "x".repeat(1 << 20);
    let (prompt_took, wait_took, event) =
        on_reviewer(&bin, &launch_dir, Duration::from_secs(30), move |s| {
            let started = Instant::now();
            s.prompt(&prompt).unwrap();
            let prompt_took = started.elapsed();
            let started = Instant::now();
            let event = s.next_event(Duration::from_secs(1)).unwrap();
            (prompt_took, started.elapsed(), event)
        });
    // A blocked write would last the stand-in's 60 s: 10 s is far from both, under any load.
    assert!(prompt_took < Duration::from_secs(10), "{prompt_took:?}");
    assert!(
        wait_took >= Duration::from_secs(1) && wait_took < Duration::from_secs(10),
        "{wait_took:?}"
    );
    assert_eq!(event, None);
}

#[test]
fn a_client_flooding_requests_without_reading_the_answers_is_reported_stalled() {
    let tmp = TempDir::new().unwrap();
    let bin = acp_stand_in(
        tmp.path(),
        "flood",
        "exec yes '{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/request_permission\",\"params\":{}}'",
    );
    let launch_dir = tmp.path().join("launch");
    let (slowest, answered, error) =
        on_reviewer(&bin, &launch_dir, Duration::from_secs(120), |s| {
            let mut slowest = Duration::ZERO;
            let mut answered = 0_u64;
            loop {
                let started = Instant::now();
                let next = s.next_event(Duration::from_secs(1));
                slowest = slowest.max(started.elapsed());
                match next {
                    Ok(Some(launch::AcpEvent::PermissionDenied { .. })) => answered += 1,
                    Ok(other) => panic!("{other:?}"),
                    Err(e) => return (slowest, answered, e),
                }
            }
        });
    let launch::ExecError::Stalled { unsent, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(*unsent > launch::MAX_UNSENT_BYTES, "{unsent}");
    assert!(answered > 100_000, "{answered}");
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    assert!(
        error
            .to_string()
            .contains("it no longer reads its standard input"),
        "{error}"
    );
}

#[test]
fn a_line_over_the_message_bound_stops_the_client_and_its_group() {
    let tmp = TempDir::new().unwrap();
    let bin = acp_stand_in(
        tmp.path(),
        "huge",
        &format!(
            "sleep 60 &\nhead -c {} /dev/zero | tr '\\0' x\nwait",
            launch::MAX_MESSAGE_BYTES + 1
        ),
    );
    let launch_dir = tmp.path().join("launch");
    let (pid, error, members) = on_reviewer(&bin, &launch_dir, Duration::from_secs(60), |s| {
        let pid = s.pid();
        let error = loop {
            match s.next_event(Duration::from_secs(5)) {
                Ok(Some(launch::AcpEvent::Stderr(_))) => {}
                Ok(other) => panic!("{other:?}"),
                Err(e) => break e,
            }
        };
        (pid, error, crate::launch::group_members(pid))
    });
    assert!(
        matches!(error, launch::ExecError::TooLarge { limit, .. } if limit == launch::MAX_MESSAGE_BYTES),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "run the reviewer: codex wrote a line of more than {} bytes (the bound of one \
             message); stopped it",
            launch::MAX_MESSAGE_BYTES
        )
    );
    assert_eq!(members, Vec::<u32>::new(), "the group of {pid} is gone");
}

#[test]
fn a_long_line_of_standard_error_is_cut_and_says_so() {
    let tmp = TempDir::new().unwrap();
    let bin = acp_stand_in(
        tmp.path(),
        "chatty",
        "head -c 100000 /dev/zero | tr '\\0' e >&2\necho ' end' >&2\necho next >&2\nexec sleep 60",
    );
    let launch_dir = tmp.path().join("launch");
    let lines = on_reviewer(&bin, &launch_dir, Duration::from_secs(30), |s| {
        let mut lines = Vec::new();
        while lines.len() < 2 {
            match s.next_event(Duration::from_secs(10)).unwrap() {
                Some(launch::AcpEvent::Stderr(line)) => lines.push(line),
                other => panic!("{other:?}"),
            }
        }
        lines
    });
    let cut = format!(
        "{} … (cut at {} bytes)",
        "e".repeat(launch::MAX_STDERR_LINE_BYTES),
        launch::MAX_STDERR_LINE_BYTES
    );
    assert!(
        lines[0] == cut,
        "{} bytes: …{}",
        lines[0].len(),
        &lines[0][lines[0].len() - 40..]
    );
    assert_eq!(lines[1], "next");
}

#[cfg(feature = "cli")]
#[test]
fn keep_launch_dir_keeps_the_directory_of_a_failed_launch_and_says_where() {
    let tmp = TempDir::new().unwrap();
    let bin = sh_script(
        tmp.path(),
        "dying",
        "echo 'no credentials found' >&2\nexit 3",
    );
    let file = tmp.path().join("plan.json");
    for keep in [false, true] {
        let launch_dir = tmp.path().join(format!("launch-{keep}"));
        std::fs::write(&file, crate::launch::acp_plan(&launch_dir).to_json()).unwrap();
        let more: &[&str] = if keep { &["--keep-launch-dir"] } else { &[] };
        let r = crate::launch::launch_plan(&file, &launch_dir, &bin, more);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.contains("exited (exit status: 3)"), "{r:?}");
        let kept = format!(
            "kept the launch directory {} (--keep-launch-dir)",
            launch_dir.display()
        );
        assert_eq!(r.stderr.contains(&kept), keep, "{r:?}");
        assert_eq!(launch_dir.join("home/.config/x.json").is_file(), keep);
        assert_eq!(launch_dir.exists(), keep);
    }
    // A directory that was there before is never called kept: the launch refuses it.
    let before = tmp.path().join("launch-true");
    let r = crate::launch::launch_plan(&file, &before, &bin, &["--keep-launch-dir"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!r.stderr.contains("kept the launch directory"), "{r:?}");
}

#[cfg(feature = "cli")]
#[test]
fn sigterm_or_sigint_to_launch_stops_the_reviewer_and_its_group_and_cleans_up() {
    use std::io::BufRead as _;
    for (signal, name) in [
        (rustix::process::Signal::TERM, "SIGTERM"),
        (rustix::process::Signal::INT, "SIGINT"),
    ] {
        let tmp = TempDir::new().unwrap();
        let bin = sh_script(tmp.path(), "long", "sleep 60 &\necho reviewing\nwait");
        let launch_dir = tmp.path().join("launch");
        let file = tmp.path().join("plan.json");
        std::fs::write(&file, bare_plan(Path::new("unused"), &launch_dir).to_json()).unwrap();
        let mut cli = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
            .args(["launch", "--plan"])
            .arg(&file)
            .arg("--launch-dir")
            .arg(&launch_dir)
            .arg("--client-bin")
            .arg(&bin)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(cli.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let pid: u32 = first
            .split("pid ")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{first}"));
        assert!(launch_dir.is_dir());
        let started = Instant::now();
        let cli_pid = rustix::process::Pid::from_raw(i32::try_from(cli.id()).unwrap()).unwrap();
        rustix::process::kill_process(cli_pid, signal).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = cli.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "launch did not end on {name}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        assert_eq!(status.code(), Some(1), "{name}: {first}{rest}");
        assert!(
            rest.contains(&format!(
                "{name} received; stopped the reviewer and its process group"
            )),
            "{name}: {rest}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{name}");
        assert_eq!(
            crate::launch::group_members(pid),
            Vec::<u32>::new(),
            "{name}"
        );
        assert!(
            !launch_dir.exists(),
            "{name}: the launch directory is removed"
        );
    }
}

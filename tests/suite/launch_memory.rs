//! The executor's memory end to end (issue 33, item 4: "a 100 MiB line without a newline
//! costs ~205 MB of the daemon's RSS, 1000 MiB over 1 GB; a million `session/update` lines
//! 1.2–3.0 GB"): `kcap-mcp-registry launch` runs against stand-in ACP clients that send a
//! million `session/update` lines (read slowly: the executor's queue fills), or one line of
//! 100 MiB without a newline, and its peak resident memory (`ru_maxrss` of the reaped
//! process, `wait4`) stays within the bound its design sets.

use crate::common;

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use common::stand_in::sh_script;
use kcap_mcp_registry::launch;

use crate::launch::acp_plan;

/// An ACP stand-in (shell, `yes`, `head`, `tr`: each a few MiB) that answers `initialize` and
/// `session/new`, reads the prompt, then runs `body`.
fn stand_in(dir: &Path, body: &str) -> std::path::PathBuf {
    sh_script(
        dir,
        "stand-in",
        &format!(
            "read -r _\n\
             printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"protocolVersion\":1}}}}'\n\
             read -r _\n\
             printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{\"sessionId\":\"s1\"}}}}'\n\
             read -r _\n\
             {body}\n"
        ),
    )
}

/// What one `launch --plan … --prompt review` run did: its exit code, standard output's
/// line count, standard error, and its peak resident memory in KiB. With `hold`, `(kib,
/// bound)`, its standard output is not read (a daemon whose caller is slow: the executor's
/// queue fills) until its peak passed `kib` KiB and then held for [`STEADY`] (the queue is
/// full, the client waits), or `bound` passed, and then it gets `SIGTERM`.
struct Run {
    code: Option<i32>,
    lines: usize,
    stderr: String,
    peak_kib: i64,
}

/// How long a held run's peak stays the same before the queue counts as full.
const STEADY: Duration = Duration::from_millis(500);

fn launch_run(dir: &Path, bin: &Path, hold: Option<(i64, Duration)>, timeout: &str) -> Run {
    let launch_dir = dir.join("launch");
    let file = dir.join("plan.json");
    std::fs::write(&file, acp_plan(&launch_dir).to_json()).unwrap();
    let mut cli = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
        .args([
            "launch",
            "--timeout",
            timeout,
            "--prompt",
            "review",
            "--plan",
        ])
        .arg(&file)
        .arg("--client-bin")
        .arg(bin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = cli.id();
    let peak = Arc::new(AtomicI64::new(0));
    let sampler = std::thread::spawn({
        let peak = Arc::clone(&peak);
        move || peak_kib(pid, &peak)
    });
    let mut stdout = cli.stdout.take().unwrap();
    let mut stderr = cli.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    if let Some((kib, bound)) = hold {
        let deadline = Instant::now() + bound;
        let (mut last, mut since) = (0, Instant::now());
        while Instant::now() < deadline {
            let now = peak.load(Ordering::Relaxed);
            if now != last {
                (last, since) = (now, Instant::now());
            } else if now > kib && since.elapsed() >= STEADY {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    }
    let mut lines = 0;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count(),
        }
    }
    let stderr = err.join().unwrap();
    // The sampler ends once the process has exited (its VmHWM gone), before it is reaped.
    sampler.join().unwrap();
    let peak_kib = peak.load(Ordering::Relaxed);
    let code = cli.wait().unwrap().code();
    Run {
        code,
        lines,
        stderr,
        peak_kib,
    }
}

/// Keeps in `peak` the largest `VmHWM` (KiB) of process `pid`, read every 5 ms until it has
/// none (it exited; its memory is gone before it is reaped).
fn peak_kib(pid: u32, peak: &AtomicI64) {
    loop {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let Some(hwm) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok())
        else {
            return;
        };
        peak.fetch_max(hwm, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The bound a run's peak may reach, in KiB, from the design (`launch::MAX_QUEUED_BYTES`'s
/// docs): the queue holds at most `MAX_QUEUED_BYTES` of lines (their bytes counted, and 64
/// more each), plus the one message an empty queue always takes (`MAX_MESSAGE_BYTES` at
/// most), and the reader's line, at most `MAX_MESSAGE_BYTES`; the caller parses one line at
/// a time; and [`BASE`].
fn bound_kib() -> i64 {
    let bytes = BASE + launch::MAX_QUEUED_BYTES + 2 * launch::MAX_MESSAGE_BYTES;
    i64::try_from(bytes >> 10).unwrap()
}

/// The process with nothing queued (the binary, its allocator, the reader and the session;
/// 12–16 MiB measured), given 32 MiB.
const BASE: usize = 32 << 20;

#[test]
fn a_million_updates_to_a_caller_that_does_not_read_keep_the_launch_within_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"looking at the change"}}}}"#;
    let bin = stand_in(
        tmp.path(),
        &format!(
            "yes '{update}' | head -n 1000000\n\
             printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"stopReason\":\"end_turn\"}}}}'\n\
             cat > /dev/null"
        ),
    );
    let started = Instant::now();
    // Not read until the queue filled (past the 48 MiB below, and no longer growing), or
    // 30 s passed.
    let run = launch_run(
        tmp.path(),
        &bin,
        Some((48 << 10, Duration::from_secs(30))),
        "120",
    );
    eprintln!(
        "a million updates: exit {:?}, {} lines, peak {} KiB (bound {} KiB), {:?}",
        run.code,
        run.lines,
        run.peak_kib,
        bound_kib(),
        started.elapsed()
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr
            .ends_with("error: SIGTERM received; stopped the reviewer and its process group\n"),
        "{}",
        run.stderr
    );
    assert!(run.lines > 1, "{}", run.stderr);
    assert!(run.peak_kib < bound_kib(), "peak {} KiB", run.peak_kib);
    // The queue filled (what the bound is about): 64 MiB of lines, the base 12–16 MiB.
    assert!(run.peak_kib > 48 << 10, "peak {} KiB", run.peak_kib);
    assert!(!tmp.path().join("launch").exists());
}

#[test]
fn a_line_of_100_mib_without_a_newline_ends_the_launch_within_its_memory_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = stand_in(
        tmp.path(),
        "head -c 104857600 /dev/zero | tr '\\0' x\nexec sleep 60",
    );
    // Nothing else is sent: the reader's line, at most `MAX_MESSAGE_BYTES` when it is
    // refused, is all there is beyond the base.
    let line_bound = i64::try_from((BASE + launch::MAX_MESSAGE_BYTES) >> 10).unwrap();
    let started = Instant::now();
    let run = launch_run(tmp.path(), &bin, None, "20");
    eprintln!(
        "a line of 100 MiB: exit {:?}, peak {} KiB (bound {} KiB), {:?}: {}",
        run.code,
        run.peak_kib,
        line_bound,
        started.elapsed(),
        run.stderr
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.ends_with(&format!(
            "error: run the reviewer: codex wrote a line of more than {} bytes (the bound of \
             one message); stopped it\n",
            launch::MAX_MESSAGE_BYTES
        )),
        "{}",
        run.stderr
    );
    assert!(run.peak_kib < line_bound, "peak {} KiB", run.peak_kib);
    assert!(!tmp.path().join("launch").exists());
}

/// A client that floods messages before it answers `session/new`: what the executor sets
/// aside for later is bounded (`MAX_SET_ASIDE_BYTES` of lines, several times that parsed),
/// and past the bound the client is stopped.
#[test]
fn a_flood_before_the_handshakes_answer_is_bounded_and_stops_the_client() {
    let tmp = tempfile::tempdir().unwrap();
    // 100,000 updates of 2 KiB, 200 MiB, before the answer to session/new.
    let text = "x".repeat(2048);
    let update = format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}}}}}"#
    );
    let bin = sh_script(
        tmp.path(),
        "stand-in",
        &format!(
            "read -r _\n\
             printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"protocolVersion\":1}}}}'\n\
             read -r _\n\
             yes '{update}' | head -n 100000\n\
             printf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{{\"sessionId\":\"s1\"}}}}'\n\
             cat > /dev/null"
        ),
    );
    let started = Instant::now();
    let run = launch_run(tmp.path(), &bin, None, "120");
    eprintln!(
        "a flood before session/new's answer: exit {:?}, peak {} KiB, {:?}: {}",
        run.code,
        run.peak_kib,
        started.elapsed(),
        run.stderr
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.ends_with(&format!(
            "error: ACP session/new: codex sent more than {} bytes of messages before it \
             answered (the bound of what is kept for later); stopped it\n",
            launch::MAX_SET_ASIDE_BYTES
        )),
        "{}",
        run.stderr
    );
    // The queue's bound, and what is set aside, parsed: 8 times its lines at most (7
    // measured for short updates; these long ones take little more than their text).
    let flood_bound = bound_kib() + i64::try_from((8 * launch::MAX_SET_ASIDE_BYTES) >> 10).unwrap();
    assert!(run.peak_kib < flood_bound, "peak {} KiB", run.peak_kib);
    assert!(!tmp.path().join("launch").exists());
}

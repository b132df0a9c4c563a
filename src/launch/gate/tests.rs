//! The gate's tests: the log read as it grows, its line format, a log directory, and what
//! the reviewer can put in the launch directory (links, FIFOs).

use super::*;

fn prompt() -> TypedPrompt {
    TypedPrompt {
        text: "Review.\r\nAll of it.".into(),
        log: "client.log".into(),
        ready: vec!["input ready".into(), "server a: listed".into()],
        failed: vec!["server a: failed".into()],
        message_after: 1,
    }
}

#[test]
fn the_prompt_is_typed_once_every_ready_text_is_in_a_whole_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("client.log");
    let mut gate = Gate::new(&prompt(), dir.path(), Duration::from_secs(60));
    let t0 = Instant::now();
    assert!(matches!(gate.poll(t0), Ok(Next::Wait(_))), "no log yet");
    std::fs::write(&log, "t [D] input ready\nt [D] server a: list").unwrap();
    assert!(matches!(gate.poll(t0 + POLL), Ok(Next::Wait(_))));
    std::fs::write(&log, "t [D] input ready\nt [D] server a: listed tools\n").unwrap();
    let t = t0 + 2 * POLL;
    assert_eq!(
        gate.poll(t),
        Ok(Next::Type(
            b"\x1b[200~Review.\nAll of it.\x1b[201~".to_vec()
        ))
    );
    assert_eq!(gate.poll(t), Ok(Next::Done));
}

#[test]
fn a_failed_line_or_the_bound_stops_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("client.log");
    std::fs::write(
        &log,
        "t [D] input ready\n2026 [D] server a: failed after 3 ms\n",
    )
    .unwrap();
    let mut gate = Gate::new(&prompt(), dir.path(), Duration::from_secs(60));
    assert_eq!(
        gate.poll(Instant::now()),
        Err(NotReady::Failed(
            "2026 [D] server a: failed after 3 ms".into()
        ))
    );
    std::fs::write(&log, "t [D] input ready\n").unwrap();
    let mut gate = Gate::new(&prompt(), dir.path(), Duration::from_secs(1));
    let t0 = Instant::now();
    assert!(matches!(gate.poll(t0), Ok(Next::Wait(_))));
    assert_eq!(
        gate.poll(t0 + Duration::from_secs(2)),
        Err(NotReady::Missing(vec!["server a: listed".into()]))
    );
}

/// A line that only quotes a text (a server's standard error, a git remote URL, as
/// Claude Code logs them) neither stops the launch nor counts as ready.
#[test]
fn a_quoted_text_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("client.log"),
        "t [ERROR] server a Server stderr: server a: failed, it said\n\
         t [DEBUG] Git remote URL: https://h/input ready server a: listed\n\
         t [DEBUG] input ready\n",
    )
    .unwrap();
    let mut gate = Gate::new(&prompt(), dir.path(), Duration::from_secs(60));
    assert!(matches!(gate.poll(Instant::now()), Ok(Next::Wait(_))));
    assert_eq!(gate.missing, vec!["server a: listed".to_owned()]);
}

/// The servers' gate of an ACP client whose lines are `[<time>] [<LEVEL>] <message>`
/// (`message_after` 2; Gemini CLI 0.61.0's lines, as measured): a failed line stops it;
/// the same text in a stack trace's continuation, in a server's standard error the
/// client echoes, or quoted in a later debug line, does not.
#[test]
fn a_servers_gate_reads_its_own_line_format() {
    let ready = ServersReady {
        log: "client.log".into(),
        ready: vec!["Registering server 'a'".into(), "[STARTUP] flush".into()],
        failed: vec!["[MCP error] Error for server 'a'".into()],
        message_after: 2,
        message_separator: "] ".into(),
        settle_ms: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("client.log");
    let quoted = "[t] [DEBUG] [DEBUG] [MCP STDERR (a)]:  [MCP error] Error for server 'a'\n\
                  [t] [DEBUG] Deduplicated silent MCP diagnostic: error:[MCP error] Error for server 'a'\n\
                  t [LOG] [MCP error] Error for server 'a': one field only\n\
                  \x20   at [MCP error] Error for server 'a' (x.js:1)\n\
                  [MCP error] Error for server 'a': no prefix\n\
                  [t] [LOG] Registering server 'a'. Capabilities: {}\n";
    std::fs::write(&log, quoted).unwrap();
    let mut gate = Gate::servers(&ready, dir.path(), Duration::from_secs(60));
    assert!(matches!(gate.poll(Instant::now()), Ok(Next::Wait(_))));
    assert_eq!(gate.missing, vec!["[STARTUP] flush".to_owned()]);
    let failed = "[t] [LOG] [MCP error] Error for server 'a': Connection closed";
    std::fs::write(&log, format!("{quoted}{failed}\n")).unwrap();
    assert_eq!(
        gate.poll(Instant::now() + POLL),
        Err(NotReady::Failed(failed.into()))
    );
    std::fs::write(
        &log,
        format!("{quoted}[t] [DEBUG] [STARTUP] flush() called\n"),
    )
    .unwrap();
    let mut gate = Gate::servers(&ready, dir.path(), Duration::from_secs(60));
    assert_eq!(
        gate.poll(Instant::now()),
        Ok(Next::Type(b"\x1b[200~\x1b[201~".to_vec()))
    );
}

/// A log that is a directory: each regular file in it counts, whatever its name
/// (Qwen Code 0.24.4 writes one per session); a link (its `latest`), a FIFO, or a
/// directory that is itself a link, says nothing.
#[test]
fn a_log_directory_is_each_regular_file_in_it() {
    let ready = ServersReady {
        log: "debug/".into(),
        ready: vec!["server a: listed".into(), "server b: listed".into()],
        failed: vec!["server a: failed".into()],
        message_after: 1,
        message_separator: "] ".into(),
        settle_ms: 0,
    };
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside.txt");
    std::fs::write(&outside, "t [E] server a: failed\nt [I] server b: listed\n").unwrap();
    // The directory a link to one that holds every text: nothing.
    std::os::unix::fs::symlink(root.path(), root.path().join("debug")).unwrap();
    let mut gate = Gate::servers(&ready, root.path(), Duration::from_secs(60));
    assert!(matches!(gate.poll(Instant::now()), Ok(Next::Wait(_))));
    std::fs::remove_file(root.path().join("debug")).unwrap();
    let dir = root.path().join("debug");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("latest")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.join("fifo"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    std::fs::write(dir.join("1f36.txt"), "t [I] server a: listed\n").unwrap();
    let mut gate = Gate::servers(&ready, root.path(), Duration::from_secs(60));
    let t0 = Instant::now();
    assert!(matches!(gate.poll(t0), Ok(Next::Wait(_))));
    assert_eq!(gate.missing, vec!["server b: listed".to_owned()]);
    // A file that comes later is found, and read from its start.
    std::fs::write(dir.join("9aca.txt"), "t [I] server b: listed\n").unwrap();
    assert_eq!(
        gate.poll(t0 + POLL),
        Ok(Next::Type(b"\x1b[200~\x1b[201~".to_vec()))
    );
    // A failed line in any of them stops the wait.
    std::fs::write(dir.join("a.txt"), "t [E] server a: failed to start\n").unwrap();
    let mut gate = Gate::servers(&ready, root.path(), Duration::from_secs(60));
    assert_eq!(
        gate.poll(Instant::now()),
        Err(NotReady::Failed("t [E] server a: failed to start".into()))
    );
}

/// A link anywhere on the log's path below the launch directory leads nowhere, and a FIFO
/// there does not block: the reviewer can write there, and the executor reads as the
/// daemon's user, outside the sandbox (measured on Copilot CLI 1.0.102, 2026-12-05: a
/// server that made `home/.copilot` a link to a directory outside had the executor read
/// that directory's `logs/` and stop the launch on a line there). The same files in a
/// directory are read.
#[test]
fn a_link_on_the_way_to_the_log_leads_nowhere() {
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside");
    std::fs::create_dir_all(outside.join("debug")).unwrap();
    let failed = "t [E] server a: failed\n";
    std::fs::write(outside.join("debug/x.txt"), failed).unwrap();
    std::fs::write(outside.join("client.log"), failed).unwrap();
    let launch = root.path().join("launch");
    std::fs::create_dir(&launch).unwrap();
    let ready = ServersReady {
        log: "home/debug/".into(),
        ready: vec!["server a: listed".into()],
        failed: vec!["server a: failed".into()],
        message_after: 1,
        message_separator: "] ".into(),
        settle_ms: 0,
    };
    let file = TypedPrompt {
        log: "home/client.log".into(),
        ..prompt()
    };
    let gates = |launch: &Path| {
        [
            Gate::servers(&ready, launch, Duration::from_secs(60)),
            Gate::new(&file, launch, Duration::from_secs(60)),
        ]
    };
    std::os::unix::fs::symlink(&outside, launch.join("home")).unwrap();
    for mut gate in gates(&launch) {
        assert!(
            matches!(gate.poll(Instant::now()), Ok(Next::Wait(_))),
            "a log read through the link home -> {}",
            outside.display()
        );
    }
    // An absolute path or `..` in the plan's log stays below the launch directory too.
    for log in [
        format!("{}/debug/", outside.display()),
        "../outside/debug/".into(),
    ] {
        let ready = ServersReady {
            log,
            ..ready.clone()
        };
        let mut gate = Gate::servers(&ready, &launch, Duration::from_secs(60));
        assert!(matches!(gate.poll(Instant::now()), Ok(Next::Wait(_))));
    }
    // Nor does a FIFO in the place of a directory block the executor.
    std::fs::remove_file(launch.join("home")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        launch.join("home"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    for mut gate in gates(&launch) {
        assert!(matches!(gate.poll(Instant::now()), Ok(Next::Wait(_))));
    }
    std::fs::remove_file(launch.join("home")).unwrap();
    std::fs::rename(&outside, launch.join("home")).unwrap();
    for mut gate in gates(&launch) {
        assert_eq!(
            gate.poll(Instant::now()),
            Err(NotReady::Failed("t [E] server a: failed".into()))
        );
    }
}

/// A text listed twice needs two lines (Copilot CLI 1.0.102 writes `Service initialized
/// as client` once a server, naming none); a line stands for one listing.
#[test]
fn a_text_listed_twice_needs_two_lines() {
    let ready = ServersReady {
        log: "client.log".into(),
        ready: vec!["Service initialized".into(), "Service initialized".into()],
        failed: vec!["connection failed {\"server_name\":\"b\"".into()],
        message_after: 2,
        message_separator: "] ".into(),
        settle_ms: 0,
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("client.log");
    let one = "t [INFO] [rmcp] Service initialized as client {}\n";
    std::fs::write(&log, one).unwrap();
    let mut gate = Gate::servers(&ready, dir.path(), Duration::from_secs(60));
    let t0 = Instant::now();
    assert!(matches!(gate.poll(t0), Ok(Next::Wait(_))));
    assert_eq!(gate.missing, vec!["Service initialized".to_owned()]);
    std::fs::write(&log, format!("{one}{one}")).unwrap();
    assert!(matches!(gate.poll(t0 + POLL), Ok(Next::Type(_))));
}

/// With `settle_ms`, the log is read on for a `failed` line after every `ready` text is
/// in (at once with none): a line within it stops the launch; none, and the prompt goes
/// once it passed (OpenCode 1.18.33 writes only its failures). `key=value` lines have
/// their message after ` message=`.
#[test]
fn a_settle_reads_on_for_a_failed_line() {
    let ready = ServersReady {
        log: "client.log".into(),
        ready: Vec::new(),
        failed: vec!["\"server unavailable\" key=b ".into()],
        message_after: 1,
        message_separator: " message=".into(),
        settle_ms: 500,
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("client.log");
    std::fs::write(&log, "t=1 level=INFO message=created id=s\n").unwrap();
    let mut gate = Gate::servers(&ready, dir.path(), Duration::from_secs(1));
    let t0 = Instant::now();
    assert_eq!(gate.poll(t0), Ok(Next::Wait(t0 + POLL)));
    let failed = "t=2 level=WARN message=\"server unavailable\" key=b type=local";
    std::fs::write(
        &log,
        format!("t=1 level=INFO message=created id=s\n{failed}\n"),
    )
    .unwrap();
    assert_eq!(
        gate.poll(t0 + Duration::from_millis(400)),
        Err(NotReady::Failed(failed.into()))
    );
    // No failed line within the settle: the prompt goes, past the bound too.
    std::fs::write(
        &log,
        "t=1 level=INFO message=\"server unavailable\" key=bb x\n",
    )
    .unwrap();
    let mut gate = Gate::servers(&ready, dir.path(), Duration::from_millis(100));
    let t0 = Instant::now();
    assert!(matches!(gate.poll(t0), Ok(Next::Wait(_))));
    let t = t0 + Duration::from_millis(300);
    assert!(matches!(gate.poll(t), Ok(Next::Wait(_))));
    assert!(matches!(
        gate.poll(t0 + Duration::from_millis(500)),
        Ok(Next::Type(_))
    ));
}

#[test]
fn a_message_follows_its_prefix() {
    assert_eq!(message("[t] [LOG] x] y", "] ", 2), "x] y");
    assert_eq!(message("t [LOG] x", "] ", 1), "x");
    assert_eq!(message("t [LOG] x", "] ", 2), "");
    assert_eq!(message("Warning: x", "] ", 0), "Warning: x");
    assert_eq!(
        message("level=WARN message=\"a message=b\" k=v", " message=", 1),
        "\"a message=b\" k=v"
    );
}

#[test]
fn a_fifo_in_the_place_of_the_log_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("client.log"),
        rustix::fs::FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let mut gate = Gate::new(&prompt(), dir.path(), Duration::from_secs(60));
    assert!(matches!(gate.poll(Instant::now()), Ok(Next::Wait(_))));
}

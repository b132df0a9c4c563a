//! The prompt a terminal client gets once its MCP servers are ready
//! ([`TypedPrompt`](crate::clients::plan::TypedPrompt)): the client's log is read as it
//! grows, and the prompt is typed when it holds every `ready` text. A log that is a
//! directory (its plan path ends in `/`) is each regular file in it: a client that names
//! its log after its session or process (Qwen Code's `debug/<session>.txt`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

use super::error::ExecError;
use crate::clients::plan::{ServersReady, TypedPrompt};

/// How often the log is read while the gate waits, and the typing watched.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// How long after the pasted prompt Enter is typed (what Claude Code 2.1.197 and 2.1.328
/// were measured with: a paste and its Enter in one write can reach its input handler as
/// one paste).
pub(crate) const PASTE_SETTLE: Duration = Duration::from_millis(300);

/// How long a client's exit waits, beyond [`PASTE_SETTLE`], for the typing thread to say
/// whether Enter went in: a client may read it and exit before the thread reports.
pub(crate) const TYPED_WORD: Duration = Duration::from_secs(2);

/// The most of the log read in one poll.
const READ_CHUNK: usize = 256 * 1024;

/// The longest part of one log line kept (the texts are near a line's start).
const LINE_KEPT: usize = 64 * 1024;

/// The most files of a log directory read, and the most of its entries looked at in one
/// poll (the reviewer can write there: a flood of files must not stall the executor).
const MAX_LOG_FILES: usize = 16;
const MAX_DIR_ENTRIES: usize = 1024;

/// Bracketed paste's start and end (xterm's; the client turned it on).
const PASTE_START: &[u8] = b"\x1b[200~";
const PASTE_END: &[u8] = b"\x1b[201~";

/// A [`TypedPrompt`] waiting for its client.
#[derive(Debug)]
pub(crate) struct Gate {
    text: String,
    log: PathBuf,
    /// The log is a directory: each regular file in it is read.
    dir: bool,
    /// The files read: the log, or those found in its directory.
    files: Vec<LogFile>,
    /// The `ready` texts no line has held yet (a text listed twice needs two lines).
    missing: Vec<String>,
    failed: Vec<String>,
    /// How many `separator`s come before a line's message.
    message_after: usize,
    separator: String,
    /// How long the log is read on for a `failed` line once every `ready` text is in.
    settle: Duration,
    /// When every `ready` text was in.
    all_in: Option<Instant>,
    started: Instant,
    bound: Duration,
    next_poll: Instant,
    typed: bool,
}

/// One file of the log, read on from where the last read stopped.
#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    /// Once it was there as a regular file.
    file: Option<std::fs::File>,
    /// The part of a line read so far.
    line: Vec<u8>,
}

impl LogFile {
    fn new(path: PathBuf) -> LogFile {
        LogFile {
            path,
            file: None,
            line: Vec::new(),
        }
    }

    /// The whole lines it gained since the last read (at most [`READ_CHUNK`] bytes). A
    /// file that is not there yet, or not a regular file (the reviewer can write its launch
    /// directory: a FIFO there must not block the executor), reads as nothing; once opened,
    /// it stays open.
    fn lines(&mut self) -> Vec<String> {
        if self.file.is_none() {
            self.file = open_regular(&self.path);
        }
        let Some(file) = self.file.as_mut() else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        let n = Read::by_ref(file)
            .take(READ_CHUNK as u64)
            .read_to_end(&mut buf)
            .unwrap_or(0);
        let mut lines = Vec::new();
        for &b in &buf[..n] {
            if b == b'\n' {
                lines.push(String::from_utf8_lossy(&self.line).into_owned());
                self.line.clear();
            } else if self.line.len() < LINE_KEPT {
                self.line.push(b);
            }
        }
        lines
    }
}

/// What the terminal session does next for the gate.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing before this instant.
    Wait(Instant),
    /// Type this paste now, then, after [`PASTE_SETTLE`], Enter ([`type_prompt`]).
    Type(Vec<u8>),
    /// The prompt is typed: the gate is done.
    Done,
}

/// Why the prompt was never typed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NotReady {
    /// A line of the log holds a `failed` text: the line.
    Failed(String),
    /// The bound passed with these `ready` texts in no line.
    Missing(Vec<String>),
}

impl Gate {
    /// A gate for `prompt` of a plan carried out in `launch_dir`, waiting at most `bound`
    /// from now.
    pub(crate) fn new(prompt: &TypedPrompt, launch_dir: &Path, bound: Duration) -> Gate {
        Gate::reading(prompt, "] ", Duration::ZERO, launch_dir, bound)
    }

    /// A gate for `prompt` whose log's lines have their message after `message_after`
    /// `separator`s, typing `settle` after every `ready` text is in.
    fn reading(
        prompt: &TypedPrompt,
        separator: &str,
        settle: Duration,
        launch_dir: &Path,
        bound: Duration,
    ) -> Gate {
        let now = Instant::now();
        // Without its `/`: a path ending in `/` resolves a link to a directory.
        let dir = prompt.log.ends_with('/');
        let log = launch_dir.join(prompt.log.trim_end_matches('/'));
        Gate {
            text: prompt.text.clone(),
            files: if dir {
                Vec::new()
            } else {
                vec![LogFile::new(log.clone())]
            },
            log,
            dir,
            missing: prompt.ready.clone(),
            failed: prompt.failed.clone(),
            message_after: prompt.message_after,
            separator: separator.to_owned(),
            settle,
            all_in: None,
            started: now,
            bound,
            next_poll: now,
            typed: false,
        }
    }

    /// A gate with nothing to type for an ACP client's [`ServersReady`]: [`Next::Type`] (of
    /// nothing) says that every `ready` text is in the log.
    pub(crate) fn servers(ready: &ServersReady, launch_dir: &Path, bound: Duration) -> Gate {
        Gate::reading(
            &TypedPrompt {
                text: String::new(),
                log: ready.log.clone(),
                ready: ready.ready.clone(),
                failed: ready.failed.clone(),
                message_after: ready.message_after,
            },
            &ready.message_separator,
            Duration::from_millis(ready.settle_ms),
            launch_dir,
            bound,
        )
    }

    /// The bytes that type `text`: one bracketed paste, line breaks as LF.
    fn paste(&self) -> Vec<u8> {
        let text = self.text.replace("\r\n", "\n").replace('\r', "\n");
        let mut bytes = PASTE_START.to_vec();
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend_from_slice(PASTE_END);
        bytes
    }

    /// What to do at `now`.
    ///
    /// # Errors
    /// [`NotReady`] when the log says a server never will be ready, or the bound passed.
    pub(crate) fn poll(&mut self, now: Instant) -> Result<Next, NotReady> {
        if self.typed {
            return Ok(Next::Done);
        }
        if now >= self.next_poll {
            self.next_poll = now + POLL;
            if let Some(line) = self.read() {
                return Err(NotReady::Failed(line));
            }
            if self.missing.is_empty() {
                let all_in = *self.all_in.get_or_insert(now);
                if now >= all_in + self.settle {
                    self.typed = true;
                    return Ok(Next::Type(self.paste()));
                }
            }
        }
        if let Some(all_in) = self.all_in {
            // Every server is ready: only the settle is left, whatever the bound.
            return Ok(Next::Wait(self.next_poll.min(all_in + self.settle)));
        }
        if now >= self.started + self.bound {
            return Err(NotReady::Missing(self.missing.clone()));
        }
        Ok(Next::Wait(self.next_poll.min(self.started + self.bound)))
    }

    /// Whether the prompt was handed to [`type_prompt`] ([`Next::Type`] was returned).
    pub(crate) fn typed(&self) -> bool {
        self.typed
    }

    /// How long the gate has waited.
    pub(crate) fn waited(&self) -> Duration {
        self.started.elapsed()
    }

    /// The error `why` is for `client`, this gate having waited [`Gate::waited`]:
    /// [`ExecError::ServersNotReady`].
    pub(crate) fn not_ready(&self, client: String, why: NotReady) -> ExecError {
        let (failed, missing) = match why {
            NotReady::Failed(line) => (Some(line), Vec::new()),
            NotReady::Missing(texts) => (None, texts),
        };
        ExecError::ServersNotReady {
            client,
            waited: self.waited(),
            failed,
            missing,
        }
    }

    /// Reads what each file of the log gained since the last read ([`LogFile::lines`]) and
    /// checks each whole line's [`message`]: the first that starts with a `failed` text, if
    /// any.
    fn read(&mut self) -> Option<String> {
        if self.dir {
            self.find_files();
        }
        for file in &mut self.files {
            for line in file.lines() {
                let message = message(&line, &self.separator, self.message_after);
                if self.failed.iter().any(|f| message.starts_with(f.as_str())) {
                    return Some(line);
                }
                // One line stands for one listing of a text.
                if let Some(i) = self.missing.iter().position(|r| message.starts_with(r)) {
                    self.missing.remove(i);
                }
            }
        }
        None
    }

    /// Adds the regular files of the log directory not read yet, in name order, up to
    /// [`MAX_LOG_FILES`]. A directory that is not there yet, or a link, holds nothing.
    fn find_files(&mut self) {
        if self.files.len() >= MAX_LOG_FILES
            || !std::fs::symlink_metadata(&self.log).is_ok_and(|m| m.is_dir())
        {
            return;
        }
        let Ok(entries) = std::fs::read_dir(&self.log) else {
            return;
        };
        let mut new: Vec<PathBuf> = entries
            .take(MAX_DIR_ENTRIES)
            .flatten()
            .map(|e| e.path())
            .filter(|p| !self.files.iter().any(|f| &f.path == p))
            .collect();
        new.sort();
        for path in new {
            if self.files.len() >= MAX_LOG_FILES {
                break;
            }
            if let Some(file) = open_regular(&path) {
                self.files.push(LogFile {
                    path,
                    file: Some(file),
                    line: Vec::new(),
                });
            }
        }
    }
}

/// `path` opened for reading when it is a regular file, no link followed and no FIFO
/// waited for.
fn open_regular(path: &Path) -> Option<std::fs::File> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    rustix::fs::FileType::from_raw_mode(st.st_mode)
        .is_file()
        .then(|| std::fs::File::from(fd))
}

/// What a log line says: the part after its `after`-th `separator` (the plan's
/// `message_after` and `message_separator`, each room's log format as data), where a text of
/// the plan must start to count; empty when it has fewer. A line that only quotes a text
/// does not say it (a server's standard error a client logs, a stack trace's continuation
/// lines).
fn message<'a>(line: &'a str, separator: &str, after: usize) -> &'a str {
    let mut rest = line;
    for _ in 0..after {
        match rest.split_once(separator) {
            Some((_, tail)) => rest = tail,
            None => return "",
        }
    }
    rest
}

/// Types `paste` into the terminal `master`, then Enter after [`PASTE_SETTLE`], on a thread
/// of its own (a client that stops reading its terminal blocks the write, not the
/// executor): the receiver gets the outcome, the instant Enter went in.
pub(crate) fn type_prompt(
    mut master: std::fs::File,
    paste: Vec<u8>,
) -> std::sync::mpsc::Receiver<std::io::Result<Instant>> {
    use std::io::Write as _;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let typed = master.write_all(&paste).and_then(|()| {
            std::thread::sleep(PASTE_SETTLE);
            // The instant before the write: one taken after it could come after the
            // client read Enter, exited and its terminal closed.
            let entered = Instant::now();
            master.write_all(b"\r").map(|()| entered)
        });
        let _ = tx.send(typed);
    });
    rx
}

#[cfg(test)]
mod tests {
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
}

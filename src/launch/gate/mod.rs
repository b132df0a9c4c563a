//! The prompt a terminal client gets once its MCP servers are ready
//! ([`TypedPrompt`](crate::clients::plan::TypedPrompt)): the client's log is read as it
//! grows, and the prompt is typed when it holds every `ready` text. A log that is a
//! directory (its plan path ends in `/`) is each regular file in it: a client that names
//! its log after its session or process (Qwen Code's `debug/<session>.txt`).
//!
//! The reviewer can write its launch directory, and the executor reads the log as the
//! daemon's user, outside the reviewer's sandbox: every component of the log's path below
//! the launch directory is opened without following a link, so a link put in its place
//! (`home/.copilot` made a link to another directory) leads the executor nowhere.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};

use super::error::{ExecError, ReadyField};
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
    /// The launch directory (the daemon's path: links in it are the daemon's).
    root: PathBuf,
    /// The log's path below [`Gate::root`], a component each (none `..`, `.` or empty).
    log: Vec<String>,
    /// The log is a directory: each regular file in it is read.
    dir: bool,
    /// The files read: the log, or those found in its directory.
    files: Vec<LogFile>,
    /// The `ready` texts no line has held yet (a text listed twice needs two lines).
    missing: Vec<String>,
    /// The plan's field this gate reads ([`ExecError::ServersNotReady`]'s `field`).
    field: ReadyField,
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
    /// Its name in its directory.
    name: OsString,
    /// Once it was there as a regular file.
    file: Option<std::fs::File>,
    /// The part of a line read so far.
    line: Vec<u8>,
}

impl LogFile {
    fn new(name: OsString) -> LogFile {
        LogFile {
            name,
            file: None,
            line: Vec::new(),
        }
    }

    /// The whole lines it gained since the last read (at most [`READ_CHUNK`] bytes); none
    /// while it is not open ([`Gate::open_log`], [`Gate::find_files`]). Once opened, it
    /// stays open.
    fn lines(&mut self) -> Vec<String> {
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
        Gate::reading(
            prompt,
            ReadyField::TypedPrompt,
            "] ",
            Duration::ZERO,
            launch_dir,
            bound,
        )
    }

    /// A gate for `prompt` (the plan's `field`) whose log's lines have their message after
    /// `message_after` `separator`s, typing `settle` after every `ready` text is in.
    fn reading(
        prompt: &TypedPrompt,
        field: ReadyField,
        separator: &str,
        settle: Duration,
        launch_dir: &Path,
        bound: Duration,
    ) -> Gate {
        let now = Instant::now();
        let dir = prompt.log.ends_with('/');
        let log: Vec<String> = prompt
            .log
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_owned)
            .collect();
        Gate {
            text: prompt.text.clone(),
            files: match log.last() {
                Some(name) if !dir => vec![LogFile::new(name.into())],
                _ => Vec::new(),
            },
            root: launch_dir.to_owned(),
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
            field,
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
            ReadyField::ServersReady,
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

    /// When its bound passes: the latest instant it waits for the `ready` texts.
    pub(crate) fn deadline(&self) -> Instant {
        self.started + self.bound
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
            log: self
                .log
                .iter()
                .fold(self.root.clone(), |path, c| path.join(c)),
            log_found: self.files.iter().any(|f| f.file.is_some()),
            field: self.field,
        }
    }

    /// Reads what each file of the log gained since the last read ([`LogFile::lines`]) and
    /// checks each whole line's [`message`]: the first that starts with a `failed` text, if
    /// any.
    fn read(&mut self) -> Option<String> {
        if self.dir {
            self.find_files();
        } else {
            self.open_log();
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

    /// Opens the log file, once it is there as a regular file ([`open_beneath`]).
    fn open_log(&mut self) {
        let Some((file, dirs)) = self.files.first_mut().zip(self.log.split_last()) else {
            return;
        };
        if file.file.is_none() {
            file.file = open_beneath(&self.root, dirs.1).and_then(|d| open_regular(&d, dirs.0));
        }
    }

    /// Adds the regular files of the log directory not read yet, in name order, up to
    /// [`MAX_LOG_FILES`]. A directory that is not there yet, or a link on its way from the
    /// launch directory ([`open_beneath`]), holds nothing.
    fn find_files(&mut self) {
        if self.files.len() >= MAX_LOG_FILES {
            return;
        }
        let Some(dir) = open_beneath(&self.root, &self.log) else {
            return;
        };
        let Ok(entries) = rustix::fs::Dir::read_from(&dir) else {
            return;
        };
        let mut new: Vec<OsString> = entries
            .take(MAX_DIR_ENTRIES)
            .flatten()
            .map(|e| OsString::from_vec(e.file_name().to_bytes().to_vec()))
            .filter(|n| n != "." && n != ".." && !self.files.iter().any(|f| &f.name == n))
            .collect();
        new.sort();
        for name in new {
            if self.files.len() >= MAX_LOG_FILES {
                break;
            }
            if let Some(file) = open_regular(&dir, &name) {
                self.files.push(LogFile {
                    name,
                    file: Some(file),
                    line: Vec::new(),
                });
            }
        }
    }
}

/// The directory `components` below `root`, each opened without following a link; `None`
/// when one is missing, not a directory, a link, or `..`. The reviewer can write `root`
/// (its launch directory): a link there must not lead the executor, outside the sandbox,
/// to another reviewer's files or the daemon's.
fn open_beneath(root: &Path, components: &[String]) -> Option<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(root, flags, Mode::empty()).ok()?;
    for component in components {
        if component == ".." {
            return None;
        }
        dir = rustix::fs::openat(
            &dir,
            component.as_str(),
            flags | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .ok()?;
    }
    Some(dir)
}

/// `name` in `dir` opened for reading when it is a regular file, no link followed and no
/// FIFO waited for (the reviewer can write its launch directory: a FIFO there must not
/// block the executor).
fn open_regular(dir: &OwnedFd, name: impl rustix::path::Arg) -> Option<std::fs::File> {
    let fd = rustix::fs::openat(
        dir,
        name,
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
mod tests;

//! A client run in a pseudo-terminal (the plans without `session_new`): its output as
//! [`TerminalEvent`]s, and the interactive dialogs it must not sit at (the plan's
//! [`Dialog`]s).

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::process::ExitStatus;

use super::spawn::{Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;

use super::Options;
use super::error::{ExecError, Step};
use super::gate::{self, Gate, Next};
use super::prepare::LaunchDir;
use super::process::Process;
use super::queue;
use crate::clients::plan::Dialog;

/// How much of the normalized screen text is searched for a dialog.
const SCREEN_TAIL: usize = 4096;

/// Something the terminal reviewer did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TerminalEvent {
    /// Bytes the client wrote to its terminal.
    Output(Vec<u8>),
    /// The client exited, with this status (`None` only when the kernel reported none).
    /// It comes once every process closed the terminal and the client's own process has
    /// exited: a client that closes its terminal and goes on running is waited for, like a
    /// quiet one. No event follows.
    Exited(Option<ExitStatus>),
}

/// The prompt on its way into the terminal ([`gate::type_prompt`]).
#[derive(Debug)]
struct Typing {
    /// When Enter went in, or why it did not.
    done: std::sync::mpsc::Receiver<std::io::Result<Instant>>,
    until: Instant,
    bytes: usize,
}

enum Chunk {
    Bytes(Vec<u8>),
    /// Every process closed the terminal, at this instant.
    Closed(Instant),
}

/// A running reviewer in a pseudo-terminal.
///
/// [`TerminalSession::next_event`] stops it with [`ExecError::Dialog`] when it shows one of
/// its plan's [`Dialog`]s and writes nothing for [`Options::dialog_quiet`]. Dropping it stops the
/// client and its process group and removes the launch directory.
#[derive(Debug)]
pub struct TerminalSession {
    process: Process,
    dir: Option<LaunchDir>,
    master: File,
    rx: queue::Receiver<Chunk>,
    screen: Screen,
    last_output: Instant,
    dialog_quiet: Duration,
    /// The plan's dialogs: each name, and its texts' letters and digits, lowercased.
    dialogs: Vec<(String, Vec<String>)>,
    /// When every process closed the terminal: only the client's exit is left to wait for.
    hung_up: Option<Instant>,
    closed: bool,
    /// The plan's typed prompt, until it is typed.
    /// Boxed: the session is one variant of [`super::Reviewer`], whose other is smaller.
    gate: Option<Box<Gate>>,
    /// The prompt being typed ([`gate::type_prompt`]), and the bound of the typing.
    typing: Option<Typing>,
    bound: Duration,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Chunk")
    }
}

/// A pseudo-terminal pair: the controller end, and the client's end opened from its name,
/// made `0600` (as `mesg n` does): the common distributions mount `/dev/pts` with `gid=5,
/// mode=620`, so a new terminal is writable by the `tty` group, which `write(1)` and
/// `wall(1)` run as for every local user; another user wrote lines into a reviewer's terminal
/// that the executor read as the client's output (red team of issue 33,
/// `launch_other_user::another_user_writes_nothing_into_a_terminal_clients_terminal`).
fn open_pty(rows: u16, cols: u16) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    // While it is locked nobody opens it (`EIO`), so no one holds it open from before.
    rustix::fs::chmod(name.as_c_str(), Mode::from_raw_mode(0o600))?;
    rustix::pty::unlockpt(&master)?;
    let client = rustix::fs::openat(
        rustix::fs::CWD,
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let size = rustix::termios::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(&client, size)?;
    Ok((master, client))
}

/// Gives `cmd` a new pseudo-terminal as its stdin, stdout, stderr and controlling terminal,
/// in a session (and so a process group) of its own; returns the controller end.
pub(crate) fn attach(cmd: &mut Command, options: &Options) -> std::io::Result<OwnedFd> {
    let (rows, cols) = options.terminal_size;
    let (master, client) = open_pty(rows, cols)?;
    cmd.stdin(Stdio::from(client.try_clone()?))
        .stdout(Stdio::from(client.try_clone()?))
        .stderr(Stdio::from(client));
    // SAFETY: between fork and exec the closure makes two system calls (setsid, and the
    // TIOCSCTTY ioctl on fd 0, the terminal just set up as stdin) and builds an
    // `io::Error` from an errno: no allocation, no lock, async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(BorrowedFd::borrow_raw(0))?;
            Ok(())
        });
    }
    Ok(master)
}

/// The answers a terminal gives to the queries terminal UIs send at start (a cursor
/// position report, the primary device attributes): without them some wait, then fail.
fn answers(carry: &[u8], chunk: &[u8]) -> Vec<u8> {
    let mut text = carry.to_vec();
    text.extend_from_slice(chunk);
    let mut out = Vec::new();
    // A query counts once: when its last byte is in `chunk` (not already in `carry`).
    let count = |pat: &[u8]| {
        text.windows(pat.len())
            .enumerate()
            .filter(|(i, w)| *w == pat && i + pat.len() > carry.len())
            .count()
    };
    for _ in 0..count(b"\x1b[6n") {
        out.extend_from_slice(b"\x1b[1;1R");
    }
    for _ in 0..count(b"\x1b[c") + count(b"\x1b[0c") {
        out.extend_from_slice(b"\x1b[?1;2c");
    }
    out
}

/// Reads the terminal on a thread of its own into the bounded queue (so a client that
/// writes faster than the caller reads blocks on its terminal), answering its queries.
fn read_terminal(master: File, mut answer_to: File, tx: queue::Sender<Chunk>) {
    std::thread::spawn(move || {
        let mut master = master;
        let mut buf = vec![0; 16 * 1024];
        let mut carry: Vec<u8> = Vec::new();
        loop {
            match master.read(&mut buf) {
                // EIO: every process closed its end.
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = &buf[..n];
                    let reply = answers(&carry, chunk);
                    if !reply.is_empty() {
                        let _ = answer_to.write_all(&reply);
                    }
                    carry = chunk[n.saturating_sub(3)..].to_vec();
                    if tx.send(Chunk::Bytes(chunk.to_vec()), n).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Chunk::Closed(Instant::now()), 0);
    });
}

impl TerminalSession {
    pub(crate) fn open(
        process: Process,
        dir: LaunchDir,
        master: OwnedFd,
        options: &Options,
        gate: Option<Gate>,
        dialogs: &[Dialog],
    ) -> Result<TerminalSession, ExecError> {
        let clone = |fd: &OwnedFd| {
            fd.try_clone()
                .map(File::from)
                .map_err(|source| ExecError::Pipe {
                    client: process.client.clone(),
                    step: Step::OpenTerminal,
                    source,
                })
        };
        let reader = clone(&master)?;
        let answerer = clone(&master)?;
        let (tx, rx) = queue::bounded(queue::MAX_QUEUED_BYTES);
        read_terminal(reader, answerer, tx);
        Ok(TerminalSession {
            process,
            dir: Some(dir),
            master: File::from(master),
            rx,
            screen: Screen::default(),
            last_output: Instant::now(),
            dialog_quiet: options.dialog_quiet,
            dialogs: kept(dialogs),
            hung_up: None,
            closed: false,
            gate: gate.map(Box::new),
            typing: None,
            bound: options.handshake_timeout,
        })
    }

    /// The client's process id (the leader of its session and process group).
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// The letters and digits of the last output, lowercased (what dialogs are matched on).
    pub fn screen_text(&self) -> &str {
        &self.screen.text
    }

    /// Types `bytes` into the client's terminal.
    ///
    /// # Errors
    /// [`ExecError::Pipe`] when the terminal is closed.
    pub fn write_input(&mut self, bytes: &[u8]) -> Result<(), ExecError> {
        self.master
            .write_all(bytes)
            .map_err(|source| ExecError::Pipe {
                client: self.process.client.clone(),
                step: Step::Run,
                source,
            })
    }

    /// The next output, waiting up to `timeout`; `Ok(None)` when there was none by then, or
    /// after [`TerminalEvent::Exited`].
    ///
    /// # Errors
    /// [`ExecError::Dialog`] when the client shows one of its plan's dialogs and wrote
    /// nothing for [`Options::dialog_quiet`]: the client has been stopped.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<TerminalEvent>, ExecError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.closed {
                return Ok(None);
            }
            if let Some(hung_up) = self.hung_up {
                let left = deadline.saturating_duration_since(Instant::now());
                let Some(status) = self.process.wait_exit(left) else {
                    return Ok(None);
                };
                self.closed = true;
                let untyped = self.gate.take().is_some_and(|g| !g.typed());
                // The typing thread may have written Enter, and the client read it and
                // exited, before the thread said so: wait for its word (it is sleeping
                // out the paste's settle, or reporting). Enter written after the terminal
                // closed reached no one (a write to a closed terminal succeeds).
                let unfinished = self.typing.take().is_some_and(|t| {
                    let word = t.done.recv_timeout(gate::PASTE_SETTLE + gate::TYPED_WORD);
                    !matches!(word, Ok(Ok(entered)) if entered <= hung_up)
                });
                if untyped || unfinished {
                    // Its prompt never reached it: not a review that ended.
                    return Err(ExecError::Exited {
                        client: self.process.client.clone(),
                        step: Step::TypePrompt,
                        status: Some(status),
                        stderr: String::new(),
                    });
                }
                return Ok(Some(TerminalEvent::Exited(Some(status))));
            }
            let now = Instant::now();
            let prompt_at = self.type_prompt(now)?;
            let quiet_at = self.last_output + self.dialog_quiet;
            if now >= quiet_at {
                if let Some(dialog) = self.screen.dialog(&self.dialogs) {
                    let dialog = dialog.to_owned();
                    let _ = self.process.stop();
                    self.closed = true;
                    return Err(ExecError::Dialog {
                        client: self.process.client.clone(),
                        dialog,
                        after: self.dialog_quiet,
                    });
                }
            }
            if now >= deadline {
                return Ok(None);
            }
            let mut wake = if now < quiet_at {
                deadline.min(quiet_at)
            } else {
                deadline
            };
            if let Some(at) = prompt_at {
                wake = wake.min(at);
            }
            match self.rx.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(Chunk::Bytes(bytes)) => {
                    self.last_output = Instant::now();
                    self.screen.feed(&bytes);
                    return Ok(Some(TerminalEvent::Output(bytes)));
                }
                Ok(Chunk::Closed(at)) => self.hung_up = Some(at),
                Err(RecvTimeoutError::Disconnected) => self.hung_up = Some(Instant::now()),
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Carries the plan's typed prompt on ([`gate`]): reads the client's log, types the
    /// prompt once it is ready, watches the typing. When to look again, if there is more to
    /// do.
    ///
    /// # Errors
    /// [`ExecError::ServersNotReady`] when the log says a server never will be ready, or it
    /// still lacks one at the bound; [`ExecError::Stalled`] when the typing is not done by
    /// then; [`ExecError::Pipe`] when it failed. The client has been stopped.
    fn type_prompt(&mut self, now: Instant) -> Result<Option<Instant>, ExecError> {
        if let Some(typing) = &self.typing {
            let typed = match typing.done.try_recv() {
                Ok(typed) => typed,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => Err(std::io::Error::other(
                    "the typing thread ended without a word",
                )),
                Err(std::sync::mpsc::TryRecvError::Empty) if now < typing.until => {
                    return Ok(Some(now + gate::POLL));
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {
                    let unsent = typing.bytes;
                    return Err(self.stopped(ExecError::Stalled {
                        client: self.process.client.clone(),
                        step: Step::TypePrompt,
                        unsent,
                    }));
                }
            };
            self.typing = None;
            return typed.map(|_| None).map_err(|source| {
                self.stopped(ExecError::Pipe {
                    client: self.process.client.clone(),
                    step: Step::TypePrompt,
                    source,
                })
            });
        }
        let Some(gate) = &mut self.gate else {
            return Ok(None);
        };
        match gate.poll(now) {
            Ok(Next::Wait(at)) => Ok(Some(at)),
            Ok(Next::Done) => {
                self.gate = None;
                Ok(None)
            }
            Ok(Next::Type(paste)) => {
                let master = self.master.try_clone().map_err(|source| ExecError::Pipe {
                    client: self.process.client.clone(),
                    step: Step::TypePrompt,
                    source,
                })?;
                self.typing = Some(Typing {
                    bytes: paste.len(),
                    done: gate::type_prompt(master, paste),
                    until: now + self.bound,
                });
                Ok(Some(now))
            }
            Err(why) => {
                let error = gate.not_ready(self.process.client.clone(), why);
                Err(self.stopped(error))
            }
        }
    }

    /// Stops the client (best effort) and returns `err`: the session is over.
    fn stopped(&mut self, err: ExecError) -> ExecError {
        let _ = self.process.stop();
        self.closed = true;
        self.gate = None;
        self.typing = None;
        err
    }

    /// Stops the client, its process group and its cgroup (all it started), and removes the
    /// launch directory.
    ///
    /// # Errors
    /// As [`AcpSession::stop`](super::AcpSession::stop).
    pub fn stop(mut self) -> Result<Option<ExitStatus>, ExecError> {
        let status = self.process.stop()?;
        if let Some(dir) = self.dir.take() {
            dir.remove()?;
        }
        Ok(status)
    }

    /// The network door's last log lines ([`door::Door::log`](super::door::Door::log));
    /// none without a door.
    pub fn door_log(&self) -> Vec<String> {
        self.process.door_log()
    }

    /// The requests the network door passed on with the daemon's credential, and those it
    /// refused past the launch's budget ([`door::Door::keyed_requests`](super::door::Door::keyed_requests));
    /// `(0, 0)` without a door.
    pub fn door_keyed_requests(&self) -> (u64, u64) {
        self.process.door_keyed_requests()
    }

    /// Keeps the launch directory when this session is stopped or dropped.
    pub fn keep_launch_dir(&mut self) {
        if let Some(dir) = &mut self.dir {
            dir.keep();
        }
    }
}

/// The letters and digits a terminal was sent, lowercased, escape sequences left out.
#[derive(Debug, Default)]
struct Screen {
    text: String,
    state: Escape,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Esc,
    /// In a control sequence (`ESC [` … final byte).
    Csi,
    /// In an operating-system command (`ESC ]` … BEL or `ESC \`).
    Osc,
    /// ESC inside an operating-system command.
    OscEsc,
}

/// `dialogs` as a session matches them: each name, and its texts' [`letters`]; a text with
/// none is dropped (it would be found on every screen).
fn kept(dialogs: &[Dialog]) -> Vec<(String, Vec<String>)> {
    dialogs
        .iter()
        .map(|d| {
            let texts = d.texts.iter().map(|t| letters(t));
            (d.name.clone(), texts.filter(|t| !t.is_empty()).collect())
        })
        .collect()
}

fn letters(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

impl Screen {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state = match (self.state, b) {
                (Escape::None, 0x1b) => Escape::Esc,
                (Escape::None, b) => {
                    if b.is_ascii_alphanumeric() {
                        self.text.push(char::from(b.to_ascii_lowercase()));
                    }
                    Escape::None
                }
                (Escape::Esc, b'[') => Escape::Csi,
                (Escape::Esc, b']') => Escape::Osc,
                (Escape::Esc | Escape::Csi, 0x40..=0x7e) => Escape::None,
                (Escape::Esc | Escape::Csi, _) => self.state,
                (Escape::Osc, 0x07) => Escape::None,
                (Escape::Osc, 0x1b) => Escape::OscEsc,
                (Escape::Osc, _) => Escape::Osc,
                (Escape::OscEsc, b'\\') => Escape::None,
                (Escape::OscEsc, _) => Escape::Osc,
            };
        }
        if self.text.len() > 2 * SCREEN_TAIL {
            self.text.drain(..self.text.len() - SCREEN_TAIL);
        }
    }

    /// The name of the first of `dialogs` (names, and texts as [`letters`]) one of whose
    /// texts the end of the screen shows.
    fn dialog<'a>(&self, dialogs: &'a [(String, Vec<String>)]) -> Option<&'a str> {
        let start = self.text.len().saturating_sub(SCREEN_TAIL);
        let tail = &self.text[start..];
        dialogs
            .iter()
            .find(|(_, texts)| texts.iter().any(|t| tail.contains(t.as_str())))
            .map(|(name, _)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialogs_are_found_through_colours_and_line_breaks() {
        let codex = kept(&Dialog::all(crate::clients::codex::DIALOGS));
        let mut screen = Screen::default();
        screen.feed(b"\x1b[1;1H\x1b[38;5;2mTrust\x1b[0m this\r\n fol");
        assert_eq!(screen.dialog(&codex), None);
        screen.feed(b"der?\x1b]0;title\x07 Codex can read");
        assert_eq!(
            screen.dialog(&codex).unwrap(),
            "Codex's \"Trust this folder?\" dialog"
        );
        let mut screen = Screen::default();
        screen.feed(b"2 hooks need review before they can run.");
        assert_eq!(
            screen.dialog(&codex).unwrap(),
            "Codex's hooks review dialog"
        );
        let mut screen = Screen::default();
        screen.feed(b"1 hook needs review before it can run.");
        assert_eq!(
            screen.dialog(&codex).unwrap(),
            "Codex's hooks review dialog"
        );
        let mut screen = Screen::default();
        screen.feed(b"Reviewing the diff...");
        assert_eq!(screen.dialog(&codex), None);
    }

    /// Each plan names its own client's dialogs: Claude Code's trust dialog (whose
    /// "Yes, I trust this folder" holds Codex's "Trust this folder" in letters) is named as
    /// Claude Code's; a screen with no text of the plan's dialogs names none.
    #[test]
    fn a_plans_own_dialogs_name_what_the_screen_shows() {
        // Claude Code 2.1.197's screen, as its terminal showed it (spaces dropped by cursor
        // moves).
        let claude = kept(&Dialog::all(crate::clients::claude::state::DIALOGS));
        let mut screen = Screen::default();
        screen.feed(
            b"Accessingworkspace:\r\nQuicksafetycheck:Isthisaprojectyoucreatedoroneyoutrust?\r\n\
              \xe2\x9d\xaf1.Yes,Itrustthisfolder\r\n2.No,exit",
        );
        assert_eq!(
            screen.dialog(&claude).unwrap(),
            "Claude Code's folder trust dialog"
        );
        assert_eq!(screen.dialog(&[]), None);
        // A text with no letter or digit is dropped: it would be on every screen.
        let empty = kept(&Dialog::all(&[("nothing", &[",", "..."])]));
        assert_eq!(screen.dialog(&empty), None);
    }

    #[test]
    fn terminal_queries_are_answered() {
        assert_eq!(answers(b"", b"abc\x1b[6n"), b"\x1b[1;1R");
        assert_eq!(answers(b"\x1b[", b"6n\x1b[c"), b"\x1b[1;1R\x1b[?1;2c");
        assert!(answers(b"", b"plain").is_empty());
        // A query wholly in the carried bytes was answered with the chunk before.
        assert!(answers(b"\x1b[c", b"more").is_empty());
    }
}

//! Reading an ACP client's standard output and standard error: one thread for both (it
//! waits on the two pipes with `poll`), a line at a time, into the session's bounded queue.

use std::io::Read;
use std::process::{ChildStderr, ChildStdout};
use std::sync::{Arc, Mutex};

use rustix::event::{PollFd, PollFlags, poll};

use serde_json::Value;

use crate::launch::queue;

/// How much of the client's standard error is kept for error messages.
const STDERR_TAIL: usize = 16 * 1024;

/// The longest line read from an ACP client's standard output (16 MiB): a JSON-RPC message,
/// or other text. A longer one stops the client with [`ExecError::TooLarge`](crate::launch::ExecError::TooLarge).
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// The longest line of a client's standard error passed on (64 KiB): a longer one is cut
/// there, and says so (`… (cut at 65536 bytes)`).
pub const MAX_STDERR_LINE_BYTES: usize = 64 << 10;

/// What a reader thread passes to the session.
pub(super) enum Incoming {
    /// A line of standard output as read, not yet parsed: the caller's thread parses it
    /// ([`Incoming::parsed`]), so that the queue holds lines, whose bytes it counts, and not
    /// the values parsed from them, which take many times more (a million `session/update`
    /// lines queued as values once took 1 GB for 64 MiB of lines).
    Line(String),
    /// A JSON-RPC message (a JSON object) on standard output: [`Incoming::parsed`] only.
    Json(Value),
    /// Another line on standard output: [`Incoming::parsed`] only.
    Text(String),
    /// A line of standard error.
    Stderr(String),
    /// A line of standard output over [`MAX_MESSAGE_BYTES`]: nothing more is read.
    TooLarge,
    /// Standard output ended; nothing more of it comes.
    Closed,
}

impl Incoming {
    /// What it counts in the queue: a line's bytes and [`PER_LINE`]; nothing for the rest.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Incoming::Line(text) | Incoming::Text(text) | Incoming::Stderr(text) => {
                text.len() + PER_LINE
            }
            _ => 0,
        }
    }

    /// A [`Incoming::Line`] parsed: a JSON object is a message ([`Incoming::Json`]), anything
    /// else [`Incoming::Text`]; the others as they are.
    pub(super) fn parsed(self) -> Incoming {
        match self {
            Incoming::Line(text) => match serde_json::from_str::<Value>(&text) {
                Ok(v) if v.is_object() => Incoming::Json(v),
                _ => Incoming::Text(text),
            },
            other => other,
        }
    }
}

/// What one queued line costs beyond its bytes, as the queue counts it: the string's header
/// and the allocator's rounding, the channel's slot (so a flood of empty lines is bounded
/// too).
pub(super) const PER_LINE: usize = 64;

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Incoming")
    }
}

/// How much of a pipe one read takes (16 KiB), into a buffer on the reader's stack: no
/// heap page is touched for it (a heap buffer zeroed for each of 200 launches at once left
/// their pages resident in the allocator's arenas after the launches: the soak run).
const CHUNK: usize = 16 << 10;

/// What a line buffer keeps between lines: one that held a longer line gives the rest back.
const KEEP: usize = 64 << 10;

/// The lines of one of the client's output streams, as its bytes come.
struct Lines {
    /// Standard output (JSON-RPC messages, at most [`MAX_MESSAGE_BYTES`] a line) or standard
    /// error (lines cut at [`MAX_STDERR_LINE_BYTES`], each also kept in `tail`).
    json: bool,
    tail: Option<Arc<Mutex<String>>>,
    /// The line so far, without its `\n`.
    line: Vec<u8>,
    /// The line passed its bound: the rest of it is dropped (standard error only).
    cut: bool,
}

/// What [`Lines::feed`] asks of the reader.
enum Flow {
    /// Read on.
    More,
    /// Standard output passed [`MAX_MESSAGE_BYTES`] ([`Incoming::TooLarge`] was sent):
    /// nothing more is read from it.
    Stop,
    /// The session is gone: the reader ends.
    Gone,
}

impl Lines {
    fn new(json: bool, tail: Option<Arc<Mutex<String>>>) -> Lines {
        Lines {
            json,
            tail,
            line: Vec::new(),
            cut: false,
        }
    }

    /// Takes `bytes` read from the stream, sending each line they end.
    fn feed(&mut self, mut bytes: &[u8], tx: &queue::Sender<Incoming>) -> Flow {
        let max = if self.json {
            MAX_MESSAGE_BYTES
        } else {
            MAX_STDERR_LINE_BYTES
        };
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let content = &bytes[..newline.unwrap_or(bytes.len())];
            bytes = &bytes[newline.map_or(bytes.len(), |i| i + 1)..];
            if !self.cut {
                let room = max - self.line.len();
                if content.len() > room {
                    self.line.extend_from_slice(&content[..room]);
                    self.cut = true;
                    if self.json {
                        let _ = tx.send(Incoming::TooLarge, 0);
                        return Flow::Stop;
                    }
                } else {
                    self.line.extend_from_slice(content);
                }
            }
            if newline.is_some() && !self.send_line(tx) {
                return Flow::Gone;
            }
        }
        Flow::More
    }

    /// Sends the line read so far; `false` when the session is gone.
    fn send_line(&mut self, tx: &queue::Sender<Incoming>) -> bool {
        let msg = if self.cut {
            Incoming::Stderr(format!(
                "{} … (cut at {MAX_STDERR_LINE_BYTES} bytes)",
                String::from_utf8_lossy(&self.line).trim_end()
            ))
        } else {
            let text = String::from_utf8_lossy(&self.line).trim_end().to_owned();
            if self.json {
                Incoming::Line(text)
            } else {
                Incoming::Stderr(text)
            }
        };
        if let (Some(tail), Incoming::Stderr(text)) = (&self.tail, &msg) {
            keep_tail(tail, text);
        }
        let sent = tx.send(msg, self.line.len() + PER_LINE).is_ok();
        self.line.clear();
        self.line.shrink_to(KEEP);
        self.cut = false;
        sent
    }

    /// The stream ended: its last line, if it had no `\n`, then (standard output)
    /// [`Incoming::Closed`]; `false` when the session is gone.
    fn end(&mut self, tx: &queue::Sender<Incoming>) -> bool {
        if (self.cut || !self.line.is_empty()) && !self.send_line(tx) {
            return false;
        }
        !self.json || tx.send(Incoming::Closed, 0).is_ok()
    }
}

/// Reads what `pipe` holds now (one read: [`poll`] said it has something) into `lines`;
/// the pipe is let go when it ended, failed, or passed its bound. `false` when the session
/// is gone.
fn read_some(
    pipe: &mut Option<impl Read>,
    lines: &mut Lines,
    chunk: &mut [u8],
    tx: &queue::Sender<Incoming>,
) -> bool {
    let Some(stream) = pipe else {
        return true;
    };
    match stream.read(chunk) {
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => true,
        Ok(0) | Err(_) => {
            *pipe = None;
            lines.end(tx)
        }
        Ok(n) => match lines.feed(&chunk[..n], tx) {
            Flow::More => true,
            Flow::Stop => {
                *pipe = None;
                true
            }
            Flow::Gone => false,
        },
    }
}

/// Waits until one of `fds` has something (or ended).
fn wait(fds: &mut [PollFd<'_>]) -> std::io::Result<()> {
    loop {
        match poll(fds, None) {
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
            Ok(_) => return Ok(()),
        }
    }
}

/// Reads the client's standard output (messages, at most [`MAX_MESSAGE_BYTES`] a line) and
/// standard error (lines cut at [`MAX_STDERR_LINE_BYTES`], each also kept in `tail`) on one
/// thread for both, a launch's only thread: it waits on both pipes ([`poll`]) and sends each
/// line into the bounded queue (whose backpressure holds both).
///
/// # Errors
/// The thread could not be started (the process's or the system's thread limit).
pub(super) fn read_output(
    stdout: ChildStdout,
    stderr: Option<ChildStderr>,
    tx: queue::Sender<Incoming>,
    tail: Arc<Mutex<String>>,
) -> std::io::Result<()> {
    let (mut out, mut err) = (Some(stdout), stderr);
    let mut out_lines = Lines::new(true, None);
    let mut err_lines = Lines::new(false, Some(tail));
    std::thread::Builder::new()
        .name("kcap-acp-output".into())
        .spawn(move || {
            let mut chunk = [0; CHUNK];
            loop {
                let readable = |fd: &PollFd<'_>| !fd.revents().is_empty();
                let ready = match (&out, &err) {
                    (None, None) => break,
                    (Some(o), Some(e)) => {
                        let mut fds =
                            [PollFd::new(o, PollFlags::IN), PollFd::new(e, PollFlags::IN)];
                        wait(&mut fds).map(|()| (readable(&fds[0]), readable(&fds[1])))
                    }
                    (Some(o), None) => {
                        let mut fds = [PollFd::new(o, PollFlags::IN)];
                        wait(&mut fds).map(|()| (readable(&fds[0]), false))
                    }
                    (None, Some(e)) => {
                        let mut fds = [PollFd::new(e, PollFlags::IN)];
                        wait(&mut fds).map(|()| (false, readable(&fds[0])))
                    }
                };
                let Ok((out_ready, err_ready)) = ready else {
                    // Cannot wait on them: both are taken as ended.
                    if out.take().is_some() {
                        let _ = out_lines.end(&tx);
                    }
                    break;
                };
                if out_ready && !read_some(&mut out, &mut out_lines, &mut chunk, &tx) {
                    return;
                }
                if err_ready && !read_some(&mut err, &mut err_lines, &mut chunk, &tx) {
                    return;
                }
            }
        })
        .map(drop)
}

/// Appends `line` to the stderr `tail`, keeping its last [`STDERR_TAIL`] bytes.
fn keep_tail(tail: &Mutex<String>, line: &str) {
    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    tail.push_str(line);
    tail.push('\n');
    if tail.len() > STDERR_TAIL {
        let cut = tail.len() - STDERR_TAIL;
        let cut = (cut..tail.len())
            .find(|i| tail.is_char_boundary(*i))
            .unwrap_or(0);
        tail.drain(..cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::{Duration, Instant};

    /// One thread reads both pipes, and never waits on one: a client that leaves a line of
    /// its output unfinished, then writes far more to its standard error than a pipe holds
    /// (64 KiB), then ends the line, is read to the end (a reader waiting for the line's end
    /// would leave the client blocked on its standard error, and both stalled).
    #[test]
    fn an_unfinished_output_line_does_not_stall_the_standard_error() {
        let mut child = Command::new("sh")
            .args([
                "-c",
                "printf '{\"a\":'; head -c 300000 /dev/zero | tr '\\0' x | fold -w 1000 >&2; \
                 printf '1}\\n'",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = queue::bounded(crate::launch::MAX_QUEUED_BYTES);
        let tail = Arc::new(Mutex::new(String::new()));
        let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take());
        read_output(stdout, stderr, tx, Arc::clone(&tail)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let (mut stderr_lines, mut messages, mut closed) = (0, Vec::new(), false);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Incoming::Stderr(line)) => {
                    assert_eq!(line.len(), 1000);
                    stderr_lines += 1;
                }
                Ok(line @ Incoming::Line(_)) => match line.parsed() {
                    Incoming::Json(v) => messages.push(v),
                    _ => panic!("not a message"),
                },
                Ok(Incoming::Closed) => closed = true,
                Ok(_) => panic!("neither a message nor a line of standard error"),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    panic!("stalled: {stderr_lines} lines of standard error, {messages:?}");
                }
            }
        }
        assert!(child.wait().unwrap().success());
        assert_eq!(stderr_lines, 300);
        assert_eq!(messages, [serde_json::json!({"a": 1})]);
        assert!(closed);
        assert_eq!(tail.lock().unwrap().len(), STDERR_TAIL);
    }
}

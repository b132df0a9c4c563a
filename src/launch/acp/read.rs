//! Reading an ACP client's standard output and standard error: one thread each, a line at a
//! time, into the session's bounded queue.

use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};

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
    /// A JSON-RPC message (a JSON object) on standard output.
    Json(Value),
    /// Another line on standard output.
    Text(String),
    /// A line of standard error.
    Stderr(String),
    /// A line of standard output over [`MAX_MESSAGE_BYTES`]: nothing more is read.
    TooLarge,
    /// Standard output ended; nothing more of it comes.
    Closed,
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Incoming")
    }
}

/// How [`read_line`] ended.
enum LineEnd {
    Eof,
    Line,
    Cut,
}

/// Reads one line into `buf` (without its `\n`), at most `max` bytes of it. A longer line is
/// [`LineEnd::Cut`]: at once, or with `drop_rest` after the rest of it is read and dropped.
fn read_line(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
    drop_rest: bool,
) -> std::io::Result<LineEnd> {
    buf.clear();
    let mut cut = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (cut, buf.is_empty()) {
                (true, _) => LineEnd::Cut,
                (false, true) => LineEnd::Eof,
                (false, false) => LineEnd::Line,
            });
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let content = &available[..newline.unwrap_or(available.len())];
        let taken = newline.map_or(available.len(), |i| i + 1);
        if !cut {
            let room = max - buf.len();
            if content.len() > room {
                buf.extend_from_slice(&content[..room]);
                cut = true;
                if !drop_rest {
                    return Ok(LineEnd::Cut);
                }
            } else {
                buf.extend_from_slice(content);
            }
        }
        reader.consume(taken);
        if newline.is_some() {
            return Ok(if cut { LineEnd::Cut } else { LineEnd::Line });
        }
    }
}

/// Reads the client's standard output (`json`: messages, at most [`MAX_MESSAGE_BYTES`] a
/// line) or standard error (lines cut at [`MAX_STDERR_LINE_BYTES`], each also kept in
/// `tail`) on a thread of its own, into the bounded queue.
pub(super) fn read_lines(
    stream: impl Read + Send + 'static,
    tx: queue::Sender<Incoming>,
    json: bool,
    tail: Option<Arc<Mutex<String>>>,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::with_capacity(64 << 10, stream);
        let mut line = Vec::new();
        let max = if json {
            MAX_MESSAGE_BYTES
        } else {
            MAX_STDERR_LINE_BYTES
        };
        loop {
            let msg = match read_line(&mut reader, &mut line, max, !json) {
                Ok(LineEnd::Eof) | Err(_) => break,
                Ok(LineEnd::Cut) if json => {
                    let _ = tx.send(Incoming::TooLarge, 0);
                    return;
                }
                Ok(LineEnd::Cut) => Incoming::Stderr(format!(
                    "{} … (cut at {MAX_STDERR_LINE_BYTES} bytes)",
                    String::from_utf8_lossy(&line).trim_end()
                )),
                Ok(LineEnd::Line) => {
                    let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                    match serde_json::from_str::<Value>(&text) {
                        Ok(v) if json && v.is_object() => Incoming::Json(v),
                        _ if json => Incoming::Text(text),
                        _ => Incoming::Stderr(text),
                    }
                }
            };
            if let (Some(tail), Incoming::Stderr(text)) = (&tail, &msg) {
                keep_tail(tail, text);
            }
            if tx.send(msg, line.len()).is_err() {
                return;
            }
        }
        if json {
            let _ = tx.send(Incoming::Closed, 0);
        }
    });
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

//! A client driven over the Agent Client Protocol (newline-delimited JSON-RPC 2.0 on its
//! stdin and stdout): `initialize`, `session/new` with the plan's params, then
//! [`AcpSession::prompt`] and the [`AcpEvent`]s the reviewer sends.

use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, ExitStatus};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::OFlags;
use serde_json::{Value, json};

use super::Options;
use super::error::{ExecError, Step};
use super::prepare::LaunchDir;
use super::process::Process;
use super::queue::{self, MAX_QUEUED_BYTES};
use crate::clients::plan::SessionNew;

/// The ACP version this executor speaks (`initialize`'s `protocolVersion`).
pub const PROTOCOL_VERSION: u64 = 1;

/// How much of the client's standard error is kept for error messages.
const STDERR_TAIL: usize = 16 * 1024;

/// The longest line read from an ACP client's standard output (16 MiB): a JSON-RPC message,
/// or other text. A longer one stops the client with [`ExecError::TooLarge`].
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// The longest line of a client's standard error passed on (64 KiB): a longer one is cut
/// there, and says so (`… (cut at 65536 bytes)`).
pub const MAX_STDERR_LINE_BYTES: usize = 64 << 10;

/// The bytes written to an ACP client that may wait for it to read them (16 MiB; a message
/// is always taken while fewer wait): past it, the client is reported as stalled
/// ([`ExecError::Stalled`]). Writes never block: what the client's pipe does not take yet is
/// written as it reads, while the caller waits for events.
pub const MAX_UNSENT_BYTES: usize = 16 << 20;

/// How often unsent bytes are offered to the client while the caller waits for an event.
const FLUSH_EVERY: Duration = Duration::from_millis(10);

/// Something the ACP reviewer did, in the order it happened.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AcpEvent {
    /// A `session/update` notification: its `params` (`{sessionId, update: {…}}`).
    Update(Value),
    /// Another notification.
    Notification {
        /// Its method.
        method: String,
        /// Its params.
        params: Value,
    },
    /// A `session/request_permission` request, answered with a refusal (see
    /// [`AcpSession`]): the tool call it asked for.
    PermissionDenied {
        /// The request's `toolCall` (`{toolCallId, title, kind, …}`).
        tool_call: Value,
    },
    /// Another request of the client's (`fs/…`, `terminal/…`), answered "method not found":
    /// `initialize` announced no client capabilities.
    Refused {
        /// Its method.
        method: String,
    },
    /// The answer to a [`AcpSession::prompt`]: the turn ended.
    PromptDone {
        /// The request id [`AcpSession::prompt`] returned.
        id: u64,
        /// Its `stopReason` (`end_turn`, `cancelled`, `refusal`, …).
        stop_reason: String,
    },
    /// A line on the client's standard output that is not JSON-RPC.
    Output(String),
    /// A line on the client's standard error.
    Stderr(String),
    /// The client closed its standard output: it exited (with this status, when reaped
    /// within a second). No event follows.
    Exited(Option<ExitStatus>),
}

enum Incoming {
    Json(Value),
    Text(String),
    Stderr(String),
    /// A line of standard output over [`MAX_MESSAGE_BYTES`]: nothing more is read.
    TooLarge,
    Closed,
}

/// A running ACP reviewer whose session is open.
///
/// Permission requests (`session/request_permission`) are refused: every client's plan
/// admits the tools it may run through the client's own configuration (argv, environment or
/// files: docs/launch-plan.md's table of what a reviewer may auto-approve), so a request that reaches
/// the executor is for a tool the plan did not admit; and ACP's `toolCall` carries a display
/// title, not a server and tool name an admission could be checked against. The answer is
/// the request's `reject_once` option (else `reject_always`, else the `cancelled` outcome).
///
/// Dropping it stops the client and its process group and removes the launch directory;
/// [`AcpSession::stop`] does the same and reports errors.
#[derive(Debug)]
pub struct AcpSession {
    // Dropped in this order: the client first, then its launch directory.
    process: Process,
    dir: Option<LaunchDir>,
    stdin: Option<ChildStdin>,
    /// What was written and not yet taken by the client's pipe: `unsent[sent..]`.
    unsent: Vec<u8>,
    sent: usize,
    rx: queue::Receiver<Incoming>,
    stderr: Arc<Mutex<String>>,
    backlog: VecDeque<AcpEvent>,
    session_id: String,
    next_id: u64,
    prompts: BTreeSet<u64>,
    /// What the first prompt says after the daemon's text: the plan's
    /// [`pr_config_note`](crate::clients::plan::pr_config_note), when it keeps the pull
    /// request's client configuration.
    note: Option<String>,
    closed: bool,
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
fn read_lines(
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

impl AcpSession {
    /// Takes the started client's pipes, runs `initialize` and `session/new` (each bounded
    /// by [`Options::handshake_timeout`]) and checks their answers.
    pub(crate) fn open(
        mut process: Process,
        dir: LaunchDir,
        session_new: &SessionNew,
        note: Option<String>,
        options: &Options,
    ) -> Result<AcpSession, ExecError> {
        let (tx, rx) = queue::bounded(MAX_QUEUED_BYTES);
        let stdout = process.child.stdout.take().expect("stdout piped");
        read_lines(stdout, tx.clone(), true, None);
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(pipe) = process.child.stderr.take() {
            read_lines(pipe, tx, false, Some(Arc::clone(&stderr)));
        }
        let stdin = process.child.stdin.take();
        if let Some(pipe) = &stdin {
            // Writes never block the caller: see MAX_UNSENT_BYTES.
            let nonblocking = rustix::fs::fcntl_getfl(pipe)
                .and_then(|flags| rustix::fs::fcntl_setfl(pipe, flags | OFlags::NONBLOCK));
            if let Err(e) = nonblocking {
                return Err(ExecError::Pipe {
                    client: process.client.clone(),
                    step: Step::Initialize,
                    source: e.into(),
                });
            }
        }
        let mut session = AcpSession {
            process,
            dir: Some(dir),
            stdin,
            unsent: Vec::new(),
            sent: 0,
            rx,
            stderr,
            backlog: VecDeque::new(),
            session_id: String::new(),
            next_id: 1,
            prompts: BTreeSet::new(),
            note,
            closed: false,
        };
        let timeout = options.handshake_timeout;
        let init = session.request(
            Step::Initialize,
            "initialize",
            json!({"protocolVersion": PROTOCOL_VERSION, "clientCapabilities": {}}),
            timeout,
        )?;
        if init.get("protocolVersion").and_then(Value::as_u64) != Some(PROTOCOL_VERSION) {
            return Err(session.protocol(Step::Initialize, &init));
        }
        let params = serde_json::to_value(session_new).expect("session/new params serialize");
        let new = session.request(Step::SessionNew, "session/new", params, timeout)?;
        match new.get("sessionId").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => session.session_id = id.to_owned(),
            _ => return Err(session.protocol(Step::SessionNew, &new)),
        }
        Ok(session)
    }

    /// The session id `session/new` answered.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The client's process id (the leader of its process group).
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// The end of what the client wrote to its standard error so far.
    pub fn stderr_tail(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sends `session/prompt` with `text` as one text block (the first prompt of a plan
    /// that keeps the pull request's client configuration, [`LaunchPlan::pr_config`], with
    /// a second: the [`pr_config_note`] naming where), and returns the request's id; its
    /// answer arrives as [`AcpEvent::PromptDone`] from [`AcpSession::next_event`].
    ///
    /// [`LaunchPlan::pr_config`]: crate::clients::plan::LaunchPlan::pr_config
    /// [`pr_config_note`]: crate::clients::plan::pr_config_note
    ///
    /// # Errors
    /// [`ExecError::Pipe`] when the client's stdin is closed.
    pub fn prompt(&mut self, text: &str) -> Result<u64, ExecError> {
        let mut blocks = vec![json!({"type": "text", "text": text})];
        blocks.extend(
            self.note
                .take()
                .map(|note| json!({"type": "text", "text": note})),
        );
        let id = self.send(
            Step::Prompt,
            "session/prompt",
            json!({"sessionId": self.session_id, "prompt": blocks}),
        )?;
        self.prompts.insert(id);
        Ok(id)
    }

    /// Sends `session/cancel` for the running turn.
    ///
    /// # Errors
    /// [`ExecError::Pipe`] when the client's stdin is closed.
    pub fn cancel(&mut self) -> Result<(), ExecError> {
        let msg = json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": self.session_id}});
        self.write(Step::Prompt, &msg)
    }

    /// The next thing the reviewer did, waiting up to `timeout`; `Ok(None)` when nothing
    /// happened by then, or after [`AcpEvent::Exited`]. Permission and other requests of the
    /// client's are answered here, before their event is returned.
    ///
    /// # Errors
    /// [`ExecError::Rpc`] when a prompt was answered with an error; [`ExecError::Pipe`] when
    /// an answer cannot be written.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<AcpEvent>, ExecError> {
        if let Some(event) = self.backlog.pop_front() {
            return Ok(Some(event));
        }
        let deadline = Instant::now() + timeout;
        loop {
            if self.closed {
                return Ok(None);
            }
            let Some(msg) = self.wait(Step::Run, deadline)? else {
                return Ok(None);
            };
            if let Some(event) = self.event(msg, Step::Run)? {
                return Ok(Some(event));
            }
        }
    }

    /// The next incoming message by `deadline` (`None`: none came), offering the client what
    /// is unsent every [`FLUSH_EVERY`] meanwhile.
    fn wait(&mut self, step: Step, deadline: Instant) -> Result<Option<Incoming>, ExecError> {
        loop {
            self.flush(step)?;
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = if self.sent < self.unsent.len() {
                left.min(FLUSH_EVERY)
            } else {
                left
            };
            match self.rx.recv_timeout(slice) {
                Ok(msg) => return Ok(Some(msg)),
                Err(RecvTimeoutError::Disconnected) => return Ok(Some(Incoming::Closed)),
                Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline => return Ok(None),
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Stops the client, its process group and its cgroup (all it started), and removes the
    /// launch directory.
    ///
    /// # Errors
    /// [`ExecError::Pipe`] (step [`Step::Stop`]) when the group cannot be signalled or the
    /// cgroup killed, [`ExecError::Io`] (step [`Step::Cleanup`]) when the directory cannot be
    /// removed.
    pub fn stop(mut self) -> Result<Option<ExitStatus>, ExecError> {
        drop(self.stdin.take());
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

    /// Keeps the launch directory when this session is stopped or dropped (for a look at
    /// what the client wrote there).
    pub fn keep_launch_dir(&mut self) {
        if let Some(dir) = &mut self.dir {
            dir.keep();
        }
    }

    /// [`ExecError::Exited`] for a client whose stdin closed: waits (bounded) for its
    /// output to end and its exit, so that the error has its status and stderr.
    fn exited(&mut self, step: Step) -> ExecError {
        let deadline = Instant::now() + Duration::from_secs(2);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(Incoming::Closed) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let status = self.process.wait_exit(Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(50));
        ExecError::Exited {
            client: self.process.client.clone(),
            step,
            status,
            stderr: self.stderr_tail(),
        }
    }

    fn protocol(&mut self, step: Step, answer: &Value) -> ExecError {
        ExecError::Protocol {
            client: self.process.client.clone(),
            step,
            answer: answer.to_string(),
        }
    }

    /// Queues `msg` for the client and offers it what its pipe takes now.
    fn write(&mut self, step: Step, msg: &Value) -> Result<(), ExecError> {
        if self.stdin.is_none() {
            return Err(self.pipe_error(step, std::io::ErrorKind::BrokenPipe.into()));
        }
        let waiting = self.unsent.len() - self.sent;
        if waiting > MAX_UNSENT_BYTES {
            return Err(ExecError::Stalled {
                client: self.process.client.clone(),
                step,
                unsent: waiting,
            });
        }
        if self.sent > 0 {
            self.unsent.drain(..self.sent);
            self.sent = 0;
        }
        serde_json::to_writer(&mut self.unsent, msg).expect("JSON values serialize");
        self.unsent.push(b'\n');
        self.flush(step)
    }

    /// Writes what is unsent until the client's pipe is full (it never blocks).
    fn flush(&mut self, step: Step) -> Result<(), ExecError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Ok(());
        };
        while self.sent < self.unsent.len() {
            match stdin.write(&self.unsent[self.sent..]) {
                Ok(0) => {
                    return Err(self.pipe_error(step, std::io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.pipe_error(step, e)),
            }
        }
        if self.sent == self.unsent.len() {
            self.unsent.clear();
            self.sent = 0;
        }
        Ok(())
    }

    fn pipe_error(&self, step: Step, source: std::io::Error) -> ExecError {
        ExecError::Pipe {
            client: self.process.client.clone(),
            step,
            source,
        }
    }

    fn send(&mut self, step: Step, method: &str, params: Value) -> Result<u64, ExecError> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(step, &msg)?;
        Ok(id)
    }

    /// Sends request `method` and waits up to `timeout` for its answer, answering the
    /// client's requests and keeping its other messages for [`AcpSession::next_event`].
    fn request(
        &mut self,
        step: Step,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ExecError> {
        let id = match self.send(step, method, params) {
            Ok(id) => id,
            // It exited before it read the request: say so, with its stderr.
            Err(ExecError::Pipe { .. }) => return Err(self.exited(step)),
            Err(e) => return Err(e),
        };
        let deadline = Instant::now() + timeout;
        loop {
            let msg = match self.wait(step, deadline) {
                Ok(Some(Incoming::Json(v))) if is_answer(&v, id) => {
                    return match v.get("error") {
                        Some(error) => Err(ExecError::Rpc {
                            client: self.process.client.clone(),
                            step,
                            error: error.to_string(),
                        }),
                        None => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
                    };
                }
                Ok(Some(msg)) => msg,
                Ok(None) => {
                    return Err(ExecError::Timeout {
                        client: self.process.client.clone(),
                        step,
                        after: timeout,
                    });
                }
                // It exited before it read all of the request.
                Err(ExecError::Pipe { .. }) => return Err(self.exited(step)),
                Err(e) => return Err(e),
            };
            if let Some(event) = self.event(msg, step)? {
                if let AcpEvent::Exited(status) = event {
                    return Err(ExecError::Exited {
                        client: self.process.client.clone(),
                        step,
                        status,
                        stderr: self.stderr_tail(),
                    });
                }
                self.backlog.push_back(event);
            }
        }
    }

    /// Turns one incoming message into an event, answering the client's requests.
    fn event(&mut self, msg: Incoming, step: Step) -> Result<Option<AcpEvent>, ExecError> {
        let v = match msg {
            Incoming::Text(line) => return Ok(Some(AcpEvent::Output(line))),
            Incoming::Stderr(line) => return Ok(Some(AcpEvent::Stderr(line))),
            Incoming::TooLarge => {
                self.closed = true;
                self.process.stop()?;
                return Err(ExecError::TooLarge {
                    client: self.process.client.clone(),
                    step,
                    limit: MAX_MESSAGE_BYTES,
                });
            }
            Incoming::Closed => {
                self.closed = true;
                // Let the stderr reader deliver its last lines into the tail.
                let status = self.process.wait_exit(Duration::from_secs(1));
                std::thread::sleep(Duration::from_millis(50));
                return Ok(Some(AcpEvent::Exited(status)));
            }
            Incoming::Json(v) => v,
        };
        let method = v.get("method").and_then(Value::as_str).map(str::to_owned);
        let params = v.get("params").cloned().unwrap_or(Value::Null);
        match (method, v.get("id").cloned()) {
            (Some(method), None) if method == "session/update" => {
                Ok(Some(AcpEvent::Update(params)))
            }
            (Some(method), None) => Ok(Some(AcpEvent::Notification { method, params })),
            (Some(method), Some(id)) if method == "session/request_permission" => {
                let result = json!({"outcome": refusal(&params)});
                self.write(step, &json!({"jsonrpc": "2.0", "id": id, "result": result}))?;
                let tool_call = params.get("toolCall").cloned().unwrap_or(Value::Null);
                Ok(Some(AcpEvent::PermissionDenied { tool_call }))
            }
            (Some(method), Some(id)) => {
                let error = json!({"code": -32601, "message": "method not found"});
                self.write(step, &json!({"jsonrpc": "2.0", "id": id, "error": error}))?;
                Ok(Some(AcpEvent::Refused { method }))
            }
            (None, Some(id)) => self.answer(&v, &id),
            (None, None) => Ok(None),
        }
    }

    /// An answer to one of our requests outside [`AcpSession::request`]: a prompt's.
    fn answer(&mut self, v: &Value, id: &Value) -> Result<Option<AcpEvent>, ExecError> {
        let Some(id) = id.as_u64().filter(|id| self.prompts.remove(id)) else {
            return Ok(None);
        };
        if let Some(error) = v.get("error") {
            return Err(ExecError::Rpc {
                client: self.process.client.clone(),
                step: Step::Prompt,
                error: error.to_string(),
            });
        }
        let stop_reason = v
            .pointer("/result/stopReason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        Ok(Some(AcpEvent::PromptDone { id, stop_reason }))
    }
}

fn is_answer(v: &Value, id: u64) -> bool {
    v.get("method").is_none() && v.get("id").and_then(Value::as_u64) == Some(id)
}

/// The outcome refusing a permission request: its `reject_once` option, else its
/// `reject_always` one, else `cancelled`.
fn refusal(params: &Value) -> Value {
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for kind in ["reject_once", "reject_always"] {
        let found = options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|o| o.get("optionId"));
        if let Some(option_id) = found {
            return json!({"outcome": "selected", "optionId": option_id});
        }
    }
    json!({"outcome": "cancelled"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_request_is_refused_with_its_reject_option() {
        let params = json!({"options": [
            {"optionId": "proceed_once", "kind": "allow_once", "name": "Allow"},
            {"optionId": "no", "kind": "reject_always", "name": "Never"},
            {"optionId": "cancel", "kind": "reject_once", "name": "Reject"}
        ]});
        assert_eq!(
            refusal(&params),
            json!({"outcome": "selected", "optionId": "cancel"})
        );
        let params = json!({"options": [{"optionId": "a", "kind": "allow_once"}]});
        assert_eq!(refusal(&params), json!({"outcome": "cancelled"}));
        assert_eq!(refusal(&Value::Null), json!({"outcome": "cancelled"}));
    }
}

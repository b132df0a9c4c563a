//! A client driven over the Agent Client Protocol (newline-delimited JSON-RPC 2.0 on its
//! stdin and stdout): `initialize`, `session/new` with the plan's params, then
//! [`AcpSession::prompt`] and the [`AcpEvent`]s the reviewer sends.

use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Options;
use super::error::{ExecError, Step};
use super::prepare::LaunchDir;
use super::process::Process;
use crate::clients::plan::SessionNew;

/// The ACP version this executor speaks (`initialize`'s `protocolVersion`).
pub const PROTOCOL_VERSION: u64 = 1;

/// How much of the client's standard error is kept for error messages.
const STDERR_TAIL: usize = 16 * 1024;

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
    rx: Receiver<Incoming>,
    stderr: Arc<Mutex<String>>,
    backlog: VecDeque<AcpEvent>,
    session_id: String,
    next_id: u64,
    prompts: BTreeSet<u64>,
    closed: bool,
}

impl std::fmt::Debug for Incoming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Incoming")
    }
}

fn read_lines(stream: impl Read + Send + 'static, tx: Sender<Incoming>, json: bool) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line).trim_end().to_owned();
            let msg = match serde_json::from_str::<Value>(&text) {
                Ok(v) if json && v.is_object() => Incoming::Json(v),
                _ if json => Incoming::Text(text),
                _ => Incoming::Stderr(text),
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
        if json {
            let _ = tx.send(Incoming::Closed);
        }
    });
}

impl AcpSession {
    /// Takes the started client's pipes, runs `initialize` and `session/new` (each bounded
    /// by [`Options::handshake_timeout`]) and checks their answers.
    pub(crate) fn open(
        mut process: Process,
        dir: LaunchDir,
        session_new: &SessionNew,
        options: &Options,
    ) -> Result<AcpSession, ExecError> {
        let (tx, rx) = mpsc::channel();
        let stdout = process.child.stdout.take().expect("stdout piped");
        read_lines(stdout, tx.clone(), true);
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(pipe) = process.child.stderr.take() {
            // Lines go to the events and to a bounded tail for error messages.
            let (etx, erx) = mpsc::channel();
            read_lines(pipe, etx, false);
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for msg in erx {
                    if let Incoming::Stderr(line) = &msg {
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
                    if tx.send(msg).is_err() {
                        break;
                    }
                }
            });
        }
        let stdin = process.child.stdin.take();
        let mut session = AcpSession {
            process,
            dir: Some(dir),
            stdin,
            rx,
            stderr,
            backlog: VecDeque::new(),
            session_id: String::new(),
            next_id: 1,
            prompts: BTreeSet::new(),
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

    /// Sends `session/prompt` with `text` as one text block, and returns the request's id;
    /// its answer arrives as [`AcpEvent::PromptDone`] from [`AcpSession::next_event`].
    ///
    /// # Errors
    /// [`ExecError::Pipe`] when the client's stdin is closed.
    pub fn prompt(&mut self, text: &str) -> Result<u64, ExecError> {
        let id = self.send(
            Step::Prompt,
            "session/prompt",
            json!({"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}),
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
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = match self.rx.recv_timeout(left) {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => Incoming::Closed,
            };
            if let Some(event) = self.event(msg)? {
                return Ok(Some(event));
            }
        }
    }

    /// Stops the client and its process group, and removes the launch directory.
    ///
    /// # Errors
    /// [`ExecError::Pipe`] (step [`Step::Stop`]) when the group cannot be signalled,
    /// [`ExecError::Io`] (step [`Step::Cleanup`]) when the directory cannot be removed.
    pub fn stop(mut self) -> Result<Option<ExitStatus>, ExecError> {
        drop(self.stdin.take());
        let status = self.process.stop()?;
        if let Some(dir) = self.dir.take() {
            dir.remove()?;
        }
        Ok(status)
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

    fn write(&mut self, step: Step, msg: &Value) -> Result<(), ExecError> {
        let pipe_error = |source| ExecError::Pipe {
            client: self.process.client.clone(),
            step,
            source,
        };
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(pipe_error(std::io::ErrorKind::BrokenPipe.into()));
        };
        let mut line = msg.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(pipe_error)
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
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = match self.rx.recv_timeout(left) {
                Ok(Incoming::Json(v)) if is_answer(&v, id) => {
                    return match v.get("error") {
                        Some(error) => Err(ExecError::Rpc {
                            client: self.process.client.clone(),
                            step,
                            error: error.to_string(),
                        }),
                        None => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
                    };
                }
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(ExecError::Timeout {
                        client: self.process.client.clone(),
                        step,
                        after: timeout,
                    });
                }
                Err(RecvTimeoutError::Disconnected) => Incoming::Closed,
            };
            if let Some(event) = self.event(msg)? {
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
    fn event(&mut self, msg: Incoming) -> Result<Option<AcpEvent>, ExecError> {
        let v = match msg {
            Incoming::Text(line) => return Ok(Some(AcpEvent::Output(line))),
            Incoming::Stderr(line) => return Ok(Some(AcpEvent::Stderr(line))),
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
                self.write(
                    Step::Run,
                    &json!({"jsonrpc": "2.0", "id": id, "result": result}),
                )?;
                let tool_call = params.get("toolCall").cloned().unwrap_or(Value::Null);
                Ok(Some(AcpEvent::PermissionDenied { tool_call }))
            }
            (Some(method), Some(id)) => {
                let error = json!({"code": -32601, "message": "method not found"});
                self.write(
                    Step::Run,
                    &json!({"jsonrpc": "2.0", "id": id, "error": error}),
                )?;
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

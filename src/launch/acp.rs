//! A client driven over the Agent Client Protocol (newline-delimited JSON-RPC 2.0 on its
//! stdin and stdout): `initialize`, `session/new` with the plan's params, then
//! [`AcpSession::prompt`] and the [`AcpEvent`]s the reviewer sends.

use std::collections::{BTreeSet, VecDeque};
use std::io::Write;
use std::process::{ChildStdin, ExitStatus};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::OFlags;
use serde_json::{Value, json};

use super::Options;
use super::error::{ExecError, Step};
use super::gate::{Gate, Next, NotReady};
use super::prepare::LaunchDir;
use super::process::Process;
use super::queue::{self, MAX_QUEUED_BYTES};
use crate::clients::plan::SessionNew;
use read::{Incoming, read_output};
pub use read::{MAX_MESSAGE_BYTES, MAX_STDERR_LINE_BYTES};

mod read;
mod refusal;

use refusal::refusal;

/// The ACP version this executor speaks (`initialize`'s `protocolVersion`).
pub const PROTOCOL_VERSION: u64 = 1;

/// The bytes written to an ACP client that may wait for it to read them (16 MiB; a message
/// is always taken while fewer wait): past it, the client is reported as stalled
/// ([`ExecError::Stalled`]). Writes never block: what the client's pipe does not take yet is
/// written as it reads, while the caller waits for events.
pub const MAX_UNSENT_BYTES: usize = 16 << 20;

/// The lines of messages (their bytes, and 64 more each) an ACP client may send before it
/// answers a request of the handshake (`initialize`, `session/new`): they are kept, parsed,
/// for [`AcpSession::next_event`], and a parsed message takes several times its line (7
/// times for a million short `session/update`s), so this is smaller than the queue's bound
/// (4 MiB: the clients measured send a few kilobytes then). Past it the client is stopped
/// ([`ExecError::Flooded`]).
pub const MAX_SET_ASIDE_BYTES: usize = 4 << 20;

/// How often unsent bytes are offered to the client while the caller waits for an event.
const FLUSH_EVERY: Duration = Duration::from_millis(10);

/// How often a client that closed its standard output is checked for its exit.
const EXIT_POLL: Duration = Duration::from_millis(20);

/// How long the standard error of an exited client is read for its last lines (a process it
/// left behind may hold it open).
const LAST_WORDS: Duration = Duration::from_millis(100);

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
    /// The client exited, with this status (`None` only when the kernel reported none).
    /// It comes once the client closed its standard output and its own process has
    /// exited: a client that closes its standard output and goes on running is waited for
    /// (within the caller's timeouts, like a quiet one), and what it writes to its standard
    /// error meanwhile comes first, as [`AcpEvent::Stderr`]. No event follows.
    Exited(Option<ExitStatus>),
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
    /// The client closed its standard output: only its standard error and its exit are left
    /// to wait for.
    hung_up: bool,
    /// What the last message [`AcpSession::wait`] returned counted in the queue.
    last_bytes: usize,
    /// Its standard output and standard error are both closed (the queue is disconnected).
    drained: bool,
    closed: bool,
}

impl AcpSession {
    /// Takes the started client's pipes, runs `initialize` and `session/new` (each bounded
    /// by [`Options::handshake_timeout`]) and checks their answers; then, with a `gate` (the
    /// plan's [`ServersReady`](crate::clients::plan::ServersReady)), waits for its log to
    /// say that every injected server is ready ([`AcpSession::servers_ready`]).
    pub(crate) fn open(
        mut process: Process,
        dir: LaunchDir,
        session_new: &SessionNew,
        note: Option<String>,
        options: &Options,
        gate: Option<Gate>,
    ) -> Result<AcpSession, ExecError> {
        let (tx, rx) = queue::bounded(MAX_QUEUED_BYTES);
        let stdout = process.child.stdout.take().expect("stdout piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = process.child.stderr.take();
        if let Err(source) = read_output(stdout, pipe, tx, Arc::clone(&stderr)) {
            return Err(ExecError::Pipe {
                client: process.client.clone(),
                step: Step::Initialize,
                source,
            });
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
            hung_up: false,
            last_bytes: 0,
            drained: false,
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
        let answer = session.request(Step::SessionNew, "session/new", params, timeout);
        let (new, gate) = match (answer, gate) {
            (Ok(new), gate) => (new, gate),
            // A client that waits for a server that never answers: its log names it.
            // (The gate's bound, the same, ran from before `initialize`: it has passed.)
            (Err(e @ ExecError::Timeout { .. }), Some(mut gate)) => {
                return Err(match gate.poll(Instant::now()) {
                    Err(why) => session.stopped(&gate, why),
                    Ok(_) => e,
                });
            }
            (Err(e), _) => return Err(e),
        };
        match new.get("sessionId").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => session.session_id = id.to_owned(),
            _ => return Err(session.protocol(Step::SessionNew, &new)),
        }
        if let Some(gate) = gate {
            session.servers_ready(gate)?;
        }
        Ok(session)
    }

    /// Waits, after `session/new`, until `gate`'s log holds every `ready` text, keeping what
    /// the client sends meanwhile for [`AcpSession::next_event`].
    ///
    /// # Errors
    /// [`ExecError::ServersNotReady`] when a line of the log holds a `failed` text, or the
    /// gate's bound passes first: the client is stopped, and no prompt was sent.
    fn servers_ready(&mut self, mut gate: Gate) -> Result<(), ExecError> {
        loop {
            let until = match gate.poll(Instant::now()) {
                Ok(Next::Type(_) | Next::Done) => return Ok(()),
                Ok(Next::Wait(until)) => until,
                Err(why) => return Err(self.stopped(&gate, why)),
            };
            if let Some(msg) = self.wait(Step::SessionNew, until)? {
                if let Some(event) = self.event(msg, Step::SessionNew)? {
                    self.backlog.push_back(event);
                }
            }
            if self.hung_up {
                // No prompt can be answered: it is waited for (within the gate's bound),
                // so that the error has its own status and its standard error.
                let left = gate.deadline().saturating_duration_since(Instant::now());
                let status = self.process.wait_exit(left);
                self.closed = true;
                self.last_words();
                return Err(ExecError::Exited {
                    client: self.process.client.clone(),
                    step: Step::SessionNew,
                    status,
                    stderr: self.stderr_tail(),
                });
            }
        }
    }

    /// Stops the client for `why` ([`ExecError::ServersNotReady`]).
    fn stopped(&mut self, gate: &Gate, why: NotReady) -> ExecError {
        self.closed = true;
        let _ = self.process.stop();
        gate.not_ready(self.process.client.clone(), why)
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
            if self.hung_up {
                return Ok(self.after_hang_up(deadline));
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
                // Parsed here, in the caller's thread: the queue holds lines only.
                Ok(msg) => {
                    self.last_bytes = msg.bytes();
                    return Ok(Some(msg.parsed()));
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(Some(Incoming::Closed)),
                Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline => return Ok(None),
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// What comes after the client closed its standard output, by `deadline`: a line of its
    /// standard error, or (once it exited, and the lines it wrote before are delivered)
    /// [`AcpEvent::Exited`] with its status; `None` when neither came by then. Nothing is
    /// written to it meanwhile: a client that closed its output has no answer to give.
    fn after_hang_up(&mut self, deadline: Instant) -> Option<AcpEvent> {
        loop {
            if let Some(status) = self.process.exited() {
                self.closed = true;
                self.last_words();
                self.backlog.push_back(AcpEvent::Exited(Some(status)));
                return self.backlog.pop_front();
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            // Polled for the exit while lines of standard error may come: see Process::exited.
            let slice = (deadline - now).min(EXIT_POLL);
            if self.drained {
                std::thread::sleep(slice);
                continue;
            }
            match self.rx.recv_timeout(slice) {
                Ok(Incoming::Stderr(line)) => return Some(AcpEvent::Stderr(line)),
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => self.drained = true,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Takes what the exited client's standard error still holds (waiting at most
    /// [`LAST_WORDS`]: a process it left may hold its standard error open) into the
    /// backlog, so that its lines are events, and in the tail, before its exit is reported.
    fn last_words(&mut self) {
        let deadline = Instant::now() + LAST_WORDS;
        while !self.drained {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Incoming::Stderr(line)) => self.backlog.push_back(AcpEvent::Stderr(line)),
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => self.drained = true,
                Err(RecvTimeoutError::Timeout) => break,
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

    /// The requests the network door passed on with the daemon's credential, and those it
    /// refused past the launch's budget ([`door::Door::keyed_requests`](super::door::Door::keyed_requests));
    /// `(0, 0)` without a door.
    pub fn door_keyed_requests(&self) -> (u64, u64) {
        self.process.door_keyed_requests()
    }

    /// Keeps the launch directory when this session is stopped or dropped (for a look at
    /// what the client wrote there).
    pub fn keep_launch_dir(&mut self) {
        if let Some(dir) = &mut self.dir {
            dir.keep();
        }
    }

    /// [`ExecError::Exited`] for a client whose stdin closed: waits, until `deadline` (the
    /// step's bound), for its output to end and its exit, so that the error has its own
    /// status and its standard error (`None` when it was still running then).
    fn exited(&mut self, step: Step, deadline: Instant) -> ExecError {
        while !self.hung_up {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Incoming::Closed) => self.hung_up = true,
                Err(RecvTimeoutError::Disconnected) => (self.hung_up, self.drained) = (true, true),
                Err(RecvTimeoutError::Timeout) => break,
                Ok(_) => {}
            }
        }
        let status = self
            .process
            .wait_exit(deadline.saturating_duration_since(Instant::now()));
        self.closed = true;
        self.last_words();
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
        let deadline = Instant::now() + timeout;
        let id = match self.send(step, method, params) {
            Ok(id) => id,
            // It exited before it read the request: say so, with its stderr.
            Err(ExecError::Pipe { .. }) => return Err(self.exited(step, deadline)),
            Err(e) => return Err(e),
        };
        // What is set aside for next_event while the answer is awaited, counted as the queue
        // counts it: a client flooding before its answer would grow the backlog without
        // bound.
        let mut set_aside = 0;
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
                Err(ExecError::Pipe { .. }) => return Err(self.exited(step, deadline)),
                Err(e) => return Err(e),
            };
            set_aside += self.last_bytes;
            if set_aside > MAX_SET_ASIDE_BYTES {
                self.closed = true;
                self.process.stop()?;
                return Err(ExecError::Flooded {
                    client: self.process.client.clone(),
                    step,
                    limit: MAX_SET_ASIDE_BYTES,
                });
            }
            if let Some(event) = self.event(msg, step)? {
                self.backlog.push_back(event);
            }
            if self.hung_up {
                // No answer can come: it is waited for (within the step's bound), so that
                // the error has its status and its standard error.
                let left = deadline.saturating_duration_since(Instant::now());
                let status = self.process.wait_exit(left);
                self.closed = true;
                self.last_words();
                return Err(ExecError::Exited {
                    client: self.process.client.clone(),
                    step,
                    status,
                    stderr: self.stderr_tail(),
                });
            }
        }
    }

    /// Turns one incoming message into an event, answering the client's requests.
    fn event(&mut self, msg: Incoming, step: Step) -> Result<Option<AcpEvent>, ExecError> {
        let v = match msg.parsed() {
            Incoming::Text(line) | Incoming::Line(line) => {
                return Ok(Some(AcpEvent::Output(line)));
            }
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
                // Its standard output ended: its exit is waited for next (AcpEvent::Exited).
                self.hung_up = true;
                return Ok(None);
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

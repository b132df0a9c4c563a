//! The executor's side of the door: accepting on each listening socket, and forwarding each
//! connection to its endpoint's upstream (the module docs of [`door`](super)).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::tls::{TlsReader, TlsWriter};
use super::{BUFFER_BYTES, CONNECT_TIMEOUT, Endpoint, MAX_CONNECTIONS, Shared, THREAD_STACK};

/// Accepts on `listener` until the door closes, each connection forwarded by a thread of
/// its own; past [`MAX_CONNECTIONS`] open, one is closed at once, with a log line.
pub(super) fn accept_loop(listener: &TcpListener, endpoint: &Endpoint, shared: &Arc<Shared>) {
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let client = match accepted {
            Ok((client, _)) => client,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
            Err(e) => {
                shared.log(format!("door port {}: accept failed: {e}", endpoint.port));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if shared.open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.open.fetch_sub(1, Ordering::SeqCst);
            shared.log(format!(
                "door port {}: refused a connection: {MAX_CONNECTIONS} are open",
                endpoint.port
            ));
            continue;
        }
        let (endpoint, shared_c) = (endpoint.clone(), Arc::clone(shared));
        let spawned = std::thread::Builder::new()
            .name(format!("door-{}-c", endpoint.port))
            .stack_size(THREAD_STACK)
            .spawn(move || {
                forward(client, &endpoint, &shared_c);
                shared_c.open.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            shared.open.fetch_sub(1, Ordering::SeqCst);
            shared.log(format!("door: no thread for a connection: {e}"));
        }
    }
}

/// Connects to `upstream` (`host:port`), each address it resolves to in turn.
fn connect(upstream: &str) -> std::io::Result<TcpStream> {
    let mut error = std::io::Error::from_raw_os_error(libc::EHOSTUNREACH);
    for addr in upstream.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => error = e,
        }
    }
    Err(error)
}

/// The way toward the upstream: its socket, or TLS over it.
pub(super) enum Up {
    Plain(TcpStream),
    Tls(TlsWriter),
}

/// What is left before `deadline` (`None`: no deadline), for a socket's write timeout: at
/// least a millisecond, so that a write that starts at the deadline (its bytes read from
/// the client just before) still goes to an upstream that reads; only one that waits is cut.
pub(super) fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| {
        d.saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    })
}

/// The way back from the upstream.
pub(super) enum Down {
    Plain(TcpStream),
    Tls(TlsReader),
}

impl Write for Up {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Up::Plain(s) => s.write(buf),
            Up::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Up {
    /// Sets its socket's write timeout (`SO_SNDTIMEO`): each write waits at most `wait`
    /// (`None`: for ever), then fails with [`ErrorKind::WouldBlock`].
    pub(super) fn set_write_timeout(&self, wait: Option<Duration>) -> std::io::Result<()> {
        match self {
            Up::Plain(s) => s.set_write_timeout(wait),
            Up::Tls(t) => t.set_write_timeout(wait),
        }
    }

    /// Writes some of `buf` (all of it over TLS) before `deadline`, if any ([`left`]): a
    /// write that moved nothing when it passes fails with `WouldBlock` (or `TimedOut`);
    /// over TLS, one whose records are not all written by then fails so too, its plaintext
    /// lost (the connection must end).
    pub(super) fn write_before(
        &mut self,
        buf: &[u8],
        deadline: Option<Instant>,
    ) -> std::io::Result<usize> {
        match self {
            Up::Plain(s) => {
                s.set_write_timeout(left(deadline))?;
                s.write(buf)
            }
            Up::Tls(t) => t.write_before(buf, deadline),
        }
    }

    /// Shuts its socket down (`close_notify` first over TLS, when writing ends).
    pub(super) fn shutdown(&self, how: Shutdown) {
        match self {
            Up::Plain(s) => {
                let _ = s.shutdown(how);
            }
            Up::Tls(t) => t.shutdown(how),
        }
    }
}

impl Read for Down {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Down::Plain(s) => s.read(buf),
            Down::Tls(t) => t.read(buf),
        }
    }
}

impl Down {
    fn socket(&self) -> &TcpStream {
        match self {
            Down::Plain(s) => s,
            Down::Tls(t) => t.socket(),
        }
    }
}

/// Whether a connection awaits an answer from its upstream, and since when; and the status
/// code of the upstream's first answer, once its status line came (`Some(None)`: none will
/// come, or it was not one), for a request that asks to switch protocols.
#[derive(Debug, Default)]
pub(super) struct Watch {
    since: Mutex<Option<Instant>>,
    answered: AtomicBool,
    /// Each request is watched (the door reads the heads); else the first bytes only.
    each_request: bool,
    first_status: Mutex<Option<Option<u16>>>,
    first_status_came: Condvar,
}

impl Watch {
    /// A request, or bytes of one, is about to go to the upstream.
    pub(super) fn sent(&self) {
        if self.each_request || !self.answered.load(Ordering::SeqCst) {
            let mut since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
            since.get_or_insert_with(Instant::now);
        }
    }

    fn answered(&self) {
        self.answered.store(true, Ordering::SeqCst);
        *self.since.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The door answers the client itself (a `408`): no request awaits the upstream's
    /// answer any more, so its end adds no `502` or `504`.
    pub(super) fn door_answered(&self) {
        self.answered();
    }

    /// Whether a request passed on awaits the first byte of its answer.
    pub(super) fn waiting(&self) -> bool {
        self.waited().is_some()
    }

    /// The upstream's first answer began with `start` (its first bytes), or ended before it
    /// began (`None`).
    fn first_answer(&self, start: Option<&[u8]>) {
        let mut status = self
            .first_status
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if status.is_none() {
            *status = Some(start.and_then(status_code));
            self.first_status_came.notify_all();
        }
    }

    /// The status code of the upstream's first answer, waiting for its status line up to
    /// `bound`; `None` when it did not come, or was not an HTTP/1.1 status line.
    pub(super) fn first_status(&self, bound: Duration) -> Option<u16> {
        let status = self
            .first_status
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (status, _) = self
            .first_status_came
            .wait_timeout_while(status, bound, |s| s.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        status.flatten()
    }

    /// How long the oldest request without an answer has waited.
    fn waited(&self) -> Option<Duration> {
        let since = self.since.lock().unwrap_or_else(PoisonError::into_inner);
        since.map(|s| s.elapsed())
    }
}

/// The status code of an answer that begins with `start`: `HTTP/1.1 NNN ` in its first
/// bytes (RFC 9112 section 4), else `None`.
fn status_code(start: &[u8]) -> Option<u16> {
    let rest = start.strip_prefix(b"HTTP/1.1 ")?;
    let code = rest.get(..3)?;
    if rest.get(3) != Some(&b' ') || !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// The upstream's end, connected (and TLS's handshake done): the ways to it and back, or the
/// status the client gets and why.
fn open(raw: TcpStream, endpoint: &Endpoint, shared: &Shared) -> Result<(Up, Down), String> {
    let Some(config) = shared.tls.as_ref().filter(|_| endpoint.tls) else {
        let down = raw
            .try_clone()
            .map_err(|e| format!("cannot share it: {e}"))?;
        return Ok((Up::Plain(raw), Down::Plain(down)));
    };
    let name = super::tls::server_name(&endpoint.upstream)?;
    match super::tls::connect(raw, config, name) {
        Ok((reader, writer)) => Ok((Up::Tls(writer), Down::Tls(reader))),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Err(format!(
            "its TLS handshake did not finish within {} s",
            super::HANDSHAKE_TIMEOUT.as_secs()
        )),
        Err(e) => Err(format!("TLS failed: {e}")),
    }
}

/// The thread that copies the upstream's answers to the client, once the upstream's end of
/// a connection is open.
type Answers = std::io::Result<std::thread::JoinHandle<std::io::Result<()>>>;

/// Connects to the endpoint's upstream (TLS's handshake done, over TLS), registers the
/// connection with the door and starts the thread that copies the upstream's answers to
/// `client`: the way toward the upstream, or why it cannot be reached.
fn reach(
    client: &TcpStream,
    endpoint: &Endpoint,
    shared: &Arc<Shared>,
    watch: &Arc<Watch>,
    id: u64,
) -> Result<(Up, Answers), String> {
    let raw = connect(&endpoint.upstream).map_err(|e| format!("cannot be reached: {e}"))?;
    let live = raw.try_clone().ok();
    let (up, down) = open(raw, endpoint, shared)?;
    let to_client = client
        .try_clone()
        .map_err(|e| format!("cannot be joined to the client: {e}"))?;
    let _ = down.socket().set_nodelay(true);
    if let Ok(mut list) = shared.live.lock()
        && let Some(entry) = list.iter_mut().find(|(i, _, _)| *i == id)
    {
        entry.2 = live;
    }
    let (watch, endpoint, shared) = (Arc::clone(watch), endpoint.clone(), Arc::clone(shared));
    let answers = std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn(move || answers(down, to_client, &watch, &endpoint, &shared));
    Ok((up, answers))
}

/// Waits for the client's first byte (not read: peeked); `false` when it closed, or failed,
/// before sending one.
fn first_byte(client: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match client.peek(&mut byte) {
            Ok(n) => return n > 0,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Forwards one connection to the endpoint's upstream, both ways, until both are closed.
///
/// The upstream's connection is opened only once the client's first request has been read
/// and accepted (on an endpoint whose requests the door reads: a credential, or TLS), or
/// once its first byte came (on one the door only pipes): a connection that sends nothing,
/// or a request the door refuses, costs the upstream no connection (red team, issue 32: a
/// connect storm from inside the reviewer opened 1,461 upstream connections in 2 s when
/// the door connected on accept).
fn forward(client: TcpStream, endpoint: &Endpoint, shared: &Arc<Shared>) {
    let port = endpoint.port;
    let _ = client.set_nodelay(true);
    let Ok(client_r) = client.try_clone() else {
        shared.log(format!("door port {port}: cannot share a connection"));
        return;
    };
    // Registered at once, so that the door's close ends a connection still waiting for
    // its first request, too.
    let id = shared.next.fetch_add(1, Ordering::SeqCst);
    if let (Ok(mut live), Ok(a)) = (shared.live.lock(), client.try_clone()) {
        live.push((id, a, None));
    }
    let parse = endpoint.credential.is_some() || endpoint.tls;
    let watch = Arc::new(Watch {
        each_request: parse,
        ..Watch::default()
    });
    let mut opened = None;
    let mut reach_once = || {
        let (up, answers) = reach(&client, endpoint, shared, &watch, id)?;
        opened = Some(answers);
        Ok(up)
    };
    let up = if parse {
        requests(client_r, &mut reach_once, endpoint, &watch, shared)
    } else {
        match first_byte(&client_r).then(&mut reach_once) {
            None => Ok(()),
            Some(Ok(up)) => piped(client_r, up, &watch, endpoint, shared),
            Some(Err(why)) => {
                let failure = super::http::Failure::Unreachable(why.clone());
                if let Some(line) = failure_line(&failure, endpoint, shared) {
                    shared.log(line);
                }
                bad_gateway(client_r, endpoint, &why);
                Ok(())
            }
        }
    };
    if let Ok(mut live) = shared.live.lock() {
        live.retain(|(i, _, _)| *i != id);
    }
    let Some(answers) = opened else {
        return;
    };
    let down = answers.map(|t| t.join());
    for (way, result) in [("to", Some(up)), ("from", down.ok().and_then(Result::ok))] {
        match result {
            Some(Err(e)) if !shared.stopping.load(Ordering::SeqCst) => shared.log(format!(
                "door port {port}: forwarding {way} {} failed: {e}",
                endpoint.upstream
            )),
            None => shared.log(format!(
                "door port {port}: no thread to forward from {}",
                endpoint.upstream
            )),
            _ => {}
        }
    }
}

/// Passes the client's requests on ([`super::http::requests`], which writes the log line
/// of each way it ends but the client's close and a failure of the sockets, returned).
fn requests(
    client: TcpStream,
    reach: &mut dyn FnMut() -> Result<Up, String>,
    endpoint: &Endpoint,
    watch: &Watch,
    shared: &Shared,
) -> std::io::Result<()> {
    match super::http::requests(client, reach, endpoint, watch, shared) {
        Err(super::http::Failure::Io(e)) => Err(e),
        _ => Ok(()),
    }
}

/// The log line for a connection `failure` ended on `endpoint`, written before the client
/// is told (it then reads its refusals in the log in the order it got them); none for a
/// failure of the sockets.
pub(super) fn failure_line(
    failure: &super::http::Failure,
    endpoint: &Endpoint,
    shared: &Shared,
) -> Option<String> {
    use super::http::Failure;
    let port = endpoint.port;
    let bound = shared.request_timeout.as_secs_f64();
    let answered = |told: bool, status: &str| {
        if told {
            format!("answered {status} and ")
        } else {
            String::new()
        }
    };
    Some(match failure {
        Failure::Io(_) => return None,
        Failure::Unreachable(why) => format!(
            "door port {port}: upstream {} {why}; answered 502",
            endpoint.upstream
        ),
        Failure::Stalled(told) => format!(
            "door port {port}: a request did not arrive whole within {bound} s; \
             {}closed the connection",
            answered(*told, "408")
        ),
        Failure::Untaken(told) => format!(
            "door port {port}: upstream {} did not take the request within {bound} s; \
             {}closed the connection",
            endpoint.upstream,
            answered(*told, "504")
        ),
        Failure::Refused(why) => {
            format!("door port {port}: refused a request: {why}; closed the connection")
        }
        Failure::Switch { told } => format!(
            "door port {port}: refused a protocol switch (upgrade) with the daemon's \
             credential: what follows one is not read, so not counted against the \
             launch's budget; {}closed the connection",
            answered(*told, "426")
        ),
        Failure::OverBudget { refused, told } => format!(
            "door port {port}: refused a request over the launch's budget of {} requests \
             with the daemon's credential ({refused} refused so far); {}closed the \
             connection",
            shared.budget.limit,
            answered(*told, "429")
        ),
    })
}

/// Pipes the client's bytes to the upstream ([`pipe`]), with a log line when the upstream
/// stops taking them.
fn piped(
    client: TcpStream,
    up: Up,
    watch: &Watch,
    endpoint: &Endpoint,
    shared: &Shared,
) -> std::io::Result<()> {
    let bound = shared.request_timeout;
    match pipe(client, up, Some((watch, bound)), endpoint)? {
        Piped::Untaken { told } => {
            let answered = if told { "answered 504 and " } else { "" };
            shared.log(format!(
                "door port {}: upstream {} took nothing the client sent for {} s; \
                 {answered}closed the connection",
                endpoint.port,
                endpoint.upstream,
                bound.as_secs_f64()
            ));
            Ok(())
        }
        Piped::Ended => Ok(()),
    }
}

/// How [`pipe`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Piped {
    /// The client closed its side, or a peer reset the connection.
    Ended,
    /// The upstream took none of the client's bytes for the bound (it stopped reading);
    /// whether the client got a `504` (not when the upstream had begun its answer).
    Untaken { told: bool },
}

/// Copies `from` to `to` as it comes (each write noted on `watch`), then shuts `to`'s
/// writing side (the other end sees end-of-file) and `from`'s reading side.
///
/// With a watch and a bound, each write toward the upstream waits at most the bound
/// (`SO_SNDTIMEO`): an upstream that stops reading ends the connection both ways, the
/// client first getting a `504` naming `endpoint` when a request awaits its answer
/// ([`Piped::Untaken`]), so that a client uploading to it is not held (issue 32, item 4).
pub(super) fn pipe(
    mut from: TcpStream,
    mut to: Up,
    watch: Option<(&Watch, Duration)>,
    endpoint: &Endpoint,
) -> std::io::Result<Piped> {
    let mut buf = vec![0u8; BUFFER_BYTES];
    if let Some((_, bound)) = watch {
        to.set_write_timeout(Some(bound))?;
    }
    let result = loop {
        match from.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                // Noted before the bytes go, as in `http::requests`.
                if let Some((w, _)) = watch {
                    w.sent();
                }
                if let Err(e) = to.write_all(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    if let (Err(e), Some((watch, bound))) = (&result, watch)
        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
    {
        let told = watch.waiting();
        if told {
            watch.door_answered();
            let body = format!(
                "kcap door: the upstream of port {} ({}) took nothing the client sent for {} s\n",
                endpoint.port,
                endpoint.upstream,
                bound.as_secs_f64()
            );
            answer_and_close(from.try_clone()?, "504 Gateway Timeout", &body);
        }
        to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
        return Ok(Piped::Untaken { told });
    }
    to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
    ended(result).map(|()| Piped::Ended)
}

/// A reset or a closed peer is how a connection ends, not a fault of the door's.
fn ended(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::BrokenPipe | ErrorKind::NotConnected
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Copies the upstream's answers to the client as they come. When a request has waited
/// [`Settings::answer_timeout`](super::Settings::answer_timeout) for the first byte of its
/// answer, the client gets a `504` and both ends are closed; when the upstream closes with a
/// request unanswered, a `502`. Each with a log line.
fn answers(
    mut from: Down,
    mut to: TcpStream,
    watch: &Watch,
    endpoint: &Endpoint,
    shared: &Shared,
) -> std::io::Result<()> {
    let bound = shared.answer_timeout;
    let tick = (bound / 4).clamp(Duration::from_millis(20), Duration::from_secs(1));
    let _ = from.socket().set_read_timeout(Some(tick));
    let mut buf = vec![0u8; BUFFER_BYTES];
    let port = endpoint.port;
    let result = loop {
        match from.read(&mut buf) {
            Ok(0) => {
                watch.first_answer(None);
                if watch.waited().is_some() && !shared.stopping.load(Ordering::SeqCst) {
                    shared.log(format!(
                        "door port {port}: upstream {} closed without answering; answered 502",
                        endpoint.upstream
                    ));
                    let body = format!(
                        "kcap door: the upstream of port {port} ({}) closed without answering\n",
                        endpoint.upstream
                    );
                    let _ = to.write_all(close_answer("502 Bad Gateway", &body).as_bytes());
                }
                break Ok(());
            }
            Ok(n) => {
                watch.answered();
                watch.first_answer(Some(&buf[..n]));
                if let Err(e) = to.write_all(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if watch.waited().is_some_and(|w| w >= bound) {
                    timed_out(&mut to, endpoint, shared);
                    let _ = from.socket().shutdown(Shutdown::Both);
                    break Ok(());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    watch.first_answer(None);
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.socket().shutdown(Shutdown::Read);
    ended(result)
}

/// Answers `504 Gateway Timeout` on `to`, with a log line.
fn timed_out(to: &mut TcpStream, endpoint: &Endpoint, shared: &Shared) {
    let secs = shared.answer_timeout.as_secs_f64();
    shared.log(format!(
        "door port {}: upstream {} did not answer within {secs} s; answered 504",
        endpoint.port, endpoint.upstream
    ));
    let body = format!(
        "kcap door: the upstream of port {} ({}) did not answer within {secs} s\n",
        endpoint.port, endpoint.upstream
    );
    let _ = to.write_all(close_answer("504 Gateway Timeout", &body).as_bytes());
    let _ = to.shutdown(Shutdown::Write);
}

/// An answer `status` with `body` (plain text) that closes the connection.
fn close_answer(status: &str, body: &str) -> String {
    close_answer_with(status, "", body)
}

/// An answer `status` with `headers` (each line ending in CRLF) and `body` (plain text) that
/// closes the connection.
fn close_answer_with(status: &str, headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n{headers}\r\n{body}",
        body.len()
    )
}

/// Answers `502 Bad Gateway` naming the endpoint and why, and closes.
fn bad_gateway(client: TcpStream, endpoint: &Endpoint, why: &str) {
    let body = format!(
        "kcap door: the upstream of port {} ({}) {why}\n",
        endpoint.port, endpoint.upstream
    );
    answer_and_close(client, "502 Bad Gateway", &body);
}

/// Answers `status` with `body` (plain text), then reads what the client still sends (up to
/// 64 KiB, 1 s) so that closing does not reset the connection before the answer is read.
pub(super) fn answer_and_close(client: TcpStream, status: &str, body: &str) {
    answer_with_and_close(client, status, "", body);
}

/// [`answer_and_close`] with `headers` (each line ending in CRLF) in the answer.
pub(super) fn answer_with_and_close(
    mut client: TcpStream,
    status: &str,
    headers: &str,
    body: &str,
) {
    let _ = client.write_all(close_answer_with(status, headers, body).as_bytes());
    let _ = client.shutdown(Shutdown::Write);
    let _ = client.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 4096];
    let mut left = 64 * 1024;
    while let Ok(n) = client.read(&mut sink) {
        if n == 0 || n >= left {
            break;
        }
        left -= n;
    }
}

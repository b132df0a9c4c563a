//! The door's one look into HTTP/1.1 (RFC 9112): on an endpoint with a [`Credential`](super::Credential) or
//! over TLS, the requests the client sends are read head by head, each head gets the
//! upstream's `host` and the daemon's credential, if any (every header of that name the
//! client sent is dropped, one is added), and each body is passed on as it comes, by its
//! framing (`content-length`, or `chunked` read chunk by chunk). Answers are not parsed: they
//! pass as bytes, server-sent events included.
//!
//! A request the door cannot frame exactly is refused (a `400 Bad Request` when it is the
//! connection's first, as no answer is on its way then) and the connection closed, so that
//! no byte the door did not frame reaches the upstream as the start of a request without the
//! credential set by the door: a head over [`MAX_HEAD_BYTES`], a line folded or without
//! `CRLF`, both `content-length` and `transfer-encoding` or two lengths that differ (request
//! smuggling, RFC 9112 section 6.3), a transfer coding other than a final `chunked` or in an
//! `HTTP/1.0` request (faulty framing there, RFC 9112 section 6.1), a
//! chunk line or trailer holding a control character (a bare LF: an upstream that ends lines
//! there frames the body otherwise); a method that is not a token or a version other than
//! `HTTP/1.1` or `HTTP/1.0`, a target `//…`, a header name with `_` that reads as `host`, the
//! framing's or the credential's, a chunk size that is not hex digits only, a trailer that is
//! not `name: value` or names one of those (an upstream that parses otherwise than the door
//! takes each for a request, a length or a host of the client's: red team, 2026-12-05). A
//! request with an `upgrade` header (a WebSocket) must be the connection's first; its head
//! is rewritten, and the rest of the connection passes as bytes only once the upstream
//! answered `101 Switching Protocols` (its first answer's status line, in the first bytes
//! it sends): otherwise nothing more of the client's is passed and the connection ends with
//! that answer. (A request pipelined behind an upgrade the upstream did not take passed
//! unread, a `CONNECT` to another host included: the red team of issue 31.)
//!
//! A request must arrive whole, from its first byte to the last of its body, within the
//! bound the door was given ([`Settings::request_timeout`](super::Settings::request_timeout)):
//! a client that stalls its upload, or sends it a byte at a time, gets a `408 Request
//! Timeout` (unless the upstream has begun its answer: then the connection is closed) and
//! does not hold the connection and its thread. Each read waits at most what is left of the
//! bound (`SO_RCVTIMEO`); the wait for a connection's next request is not bounded.
//!
//! The same bound holds for the upstream taking the request: an upstream that stops reading
//! (a large body it never reads, and no answer) gets the client a `504 Gateway Timeout`
//! (unless the upstream has begun its answer: then the connection is closed) and does not
//! hold the connection and its thread either. Each write toward the upstream waits at most
//! what is left of the bound (`SO_SNDTIMEO`). Before, such an upload waited for the answer
//! timeout (five minutes by default), or for ever once the upstream had begun an answer.

use std::io::{ErrorKind, Read as _, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::forward::{Up, Watch};
use super::{BUFFER_BYTES, Endpoint, Shared};
use head::{Framing, rewrite, trailer};

mod head;

pub(super) use head::valid_header;

/// The largest request head (request line and headers) the door reads, in bytes.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long a request that asks to switch protocols waits for the upstream's answer to
/// begin (the answer timeout ends it sooner: a `504`).
const UPGRADE_WAIT: std::time::Duration = std::time::Duration::from_secs(600);
/// The largest chunk-size line of a chunked body, in bytes.
const MAX_CHUNK_LINE: usize = 4096;

/// Why a request was refused, or the connection failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The request cannot be framed exactly (what is wrong).
    Refused(&'static str),
    /// The request did not arrive whole within the door's bound; whether the client got a
    /// `408` (not when the upstream had begun its answer).
    Stalled(bool),
    /// The upstream did not take the whole request within the door's bound (it stopped
    /// reading); whether the client got a `504` (not when the upstream had begun its answer).
    Untaken(bool),
    /// The launch's budget of requests with the daemon's credential is used up
    /// ([`Settings::keyed_requests`](super::Settings::keyed_requests)): the requests refused
    /// so far, this one included; whether the client got a `429`.
    OverBudget { refused: u64, told: bool },
    /// A request to switch protocols (an `upgrade` header: a WebSocket) on an endpoint with
    /// the daemon's credential: what passes after a switch is not read, so not counted
    /// against the launch's budget (the OpenAI Responses API over a WebSocket takes a model
    /// request per message); whether the client got a `426`, which Codex CLI measured
    /// answers by sending its request over HTTP (docs/network.md).
    Switch { told: bool },
    /// The upstream cannot be reached (why); the client got a `502`.
    Unreachable(String),
    /// Reading or writing failed.
    Io(std::io::Error),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::Io(e)
    }
}

/// What the client sent and the door has not passed on yet.
struct Input {
    stream: TcpStream,
    buf: Vec<u8>,
    /// When the request being read must be in whole; `None` between requests.
    deadline: Option<Instant>,
    /// How long this request's writes toward the upstream took: when the bound is over and
    /// they took half of it or more, the upstream used it up ([`Failure::Untaken`]), not the
    /// client ([`Failure::Stalled`]). Judged by time, as a write the kernel cut at its timeout
    /// returns the bytes it moved, not an error.
    writing: std::cell::Cell<Duration>,
    /// The request's bound.
    bound: Duration,
}

impl Input {
    /// Reads more (at most 4 KiB); `false` at end of stream. Waits at most until the
    /// deadline, if any: [`Failure::Stalled`] then.
    fn fill(&mut self) -> Result<bool, Failure> {
        let mut chunk = [0u8; 4096];
        loop {
            let wait = match self.deadline {
                Some(d) => Some(
                    d.checked_duration_since(Instant::now())
                        .filter(|w| !w.is_zero())
                        .ok_or_else(|| self.over())?,
                ),
                None => None,
            };
            self.stream.set_read_timeout(wait)?;
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // The read's wait ran out: the loop checks the deadline.
                Err(e)
                    if self.deadline.is_some()
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The end of the first line (or head, for `b"\r\n\r\n"`) ending with `end`, reading
    /// until it is in, at most `max` bytes.
    fn until(&mut self, end: &[u8], max: usize, what: &'static str) -> Result<usize, Failure> {
        let mut from = 0;
        loop {
            if let Some(i) = self.buf[from..].windows(end.len()).position(|w| w == end) {
                return Ok(from + i + end.len());
            }
            if self.buf.len() >= max {
                return Err(Failure::Refused(what));
            }
            from = self.buf.len().saturating_sub(end.len());
            if !self.fill()? {
                return Err(Failure::Refused("the client closed within a request"));
            }
        }
    }

    /// Why the request's bound is over: the upstream's fault when its writes took half of it
    /// or more, else the client's.
    fn over(&self) -> Failure {
        if self.writing.get() * 2 >= self.bound {
            Failure::Untaken(false)
        } else {
            Failure::Stalled(false)
        }
    }

    /// Writes `bytes` to `to` before the deadline, if any: [`Failure::Untaken`] when it
    /// passes first (the upstream stopped reading), or when a write ends after it and the
    /// writes took half the bound ([`Input::over`]). A write cut by the deadline ends the
    /// request at once, never tried again: over TLS the plaintext was sealed and part of its
    /// records may be written, so a second try would send it twice.
    fn put(&self, to: &mut Up, mut bytes: &[u8]) -> Result<(), Failure> {
        while !bytes.is_empty() {
            let start = Instant::now();
            let wrote = to.write_before(bytes, self.deadline);
            self.writing.set(self.writing.get() + start.elapsed());
            match wrote {
                Ok(0) => return Err(std::io::Error::from(ErrorKind::WriteZero).into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e)
                    if self.deadline.is_some()
                        && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    return Err(Failure::Untaken(false));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Passes `n` bytes on to `to`, as they come.
    fn pass(&mut self, mut n: u64, to: &mut Up) -> Result<(), Failure> {
        while n > 0 {
            if self.buf.is_empty() && !self.fill()? {
                return Err(Failure::Refused("the client closed within a request body"));
            }
            let take = self.buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            self.put(to, &self.buf[..take])?;
            self.buf.drain(..take);
            n -= take as u64;
        }
        Ok(())
    }

    /// Takes a line ending with CRLF (not passed on yet), and returns it.
    fn line(&mut self) -> Result<Vec<u8>, Failure> {
        let end = self.until(b"\r\n", MAX_CHUNK_LINE, "a chunk line is too long")?;
        // A bare LF or CR (or another control character) before the CRLF: an upstream that
        // ends the line there frames the body otherwise than the door (a chunk size read
        // from the part before the LF, a trailer section ended early), and a head the door
        // rewrote, the daemon's key in it, could become a body the upstream echoes.
        if self.buf[..end - 2]
            .iter()
            .any(|&b| (b.is_ascii_control() && b != b'\t') || b == 0x7f)
        {
            return Err(Failure::Refused(
                "a chunk line or trailer holds a control character",
            ));
        }
        Ok(self.buf.drain(..end).collect())
    }

    /// Passes a chunked body on to `to`, chunk by chunk, trailers included. A chunk size is
    /// hexadecimal digits only, white space allowed before its extensions (`from_str_radix`
    /// alone takes `+5`, and trimming takes ` 5`: an upstream that reads digits while they
    /// come reads a size of 0 there, the end of the body). Each trailer is a field line
    /// (`name: value`) whose name is not `host`, the framing's or the credential's: an
    /// upstream that does not end the trailer section where the door does (or merges it
    /// into the head) would otherwise read a request line or a `host` the client wrote.
    fn chunked(&mut self, to: &mut Up, key_name: &str) -> Result<(), Failure> {
        loop {
            let line = self.line()?;
            let size = line[..line.len() - 2]
                .split(|&b| b == b';')
                .next()
                .map(|s| s.trim_ascii_end())
                .filter(|s| !s.is_empty() && s.len() <= 15 && s.iter().all(u8::is_ascii_hexdigit))
                .and_then(|s| u64::from_str_radix(std::str::from_utf8(s).ok()?, 16).ok())
                .ok_or(Failure::Refused("a chunk size is not a hexadecimal number"))?;
            self.put(to, &line)?;
            if size == 0 {
                // Trailers, up to the empty line.
                loop {
                    let line = self.line()?;
                    if line.len() > 2 && !trailer(&line[..line.len() - 2], key_name) {
                        return Err(Failure::Refused(
                            "a trailer is not `name: value`, or names the host, the framing \
                             or the credential",
                        ));
                    }
                    self.put(to, &line)?;
                    if line.len() == 2 {
                        return Ok(());
                    }
                }
            }
            self.pass(size, to)?;
            let line = self.line()?;
            if line.len() != 2 {
                return Err(Failure::Refused("a chunk does not end with CRLF"));
            }
            self.put(to, &line)?;
        }
    }
}

/// Waits for the next slot at the launch's rate of requests with the daemon's credential
/// ([`Settings::keyed_rate`](super::Settings::keyed_rate)); a wait of a second or more gets a
/// log line. The wait ends early when the door closes: [`ErrorKind::ConnectionAborted`].
fn hold(shared: &Shared, port: u16) -> std::io::Result<()> {
    let wait = shared.budget.slot();
    if wait >= Duration::from_secs(1) {
        shared.log(format!(
            "door port {port}: held a request with the daemon's credential {:.1} s, to the \
             launch's rate",
            wait.as_secs_f64()
        ));
    }
    let end = Instant::now() + wait;
    loop {
        if shared.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ErrorKind::ConnectionAborted.into());
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Passes the client's requests on to the upstream, each head with the endpoint's credential
/// set (if any) and its `host` the upstream's authority ([`rewrite`]), each noted on `watch`
/// before its head is passed, until the client closes (`Ok`), a request is refused, does not
/// arrive whole within the door's bound ([`Failure::Stalled`]), is not taken whole by the
/// upstream within it ([`Failure::Untaken`]), is one over the launch's budget of requests
/// with the credential ([`Failure::OverBudget`]), or the connection fails.
///
/// The upstream's connection is opened (`reach`) once the first request's head is read and
/// accepted, within the budget: a connection that sends nothing, or only what the door
/// refuses, costs the upstream none. When it cannot be reached the client gets a `502`
/// ([`Failure::Unreachable`]).
pub(super) fn requests(
    from: TcpStream,
    reach: &mut dyn FnMut() -> Result<Up, String>,
    endpoint: &Endpoint,
    watch: &Watch,
    shared: &Shared,
) -> Result<(), Failure> {
    let (credential, authority) = (endpoint.credential.as_ref(), endpoint.authority());
    let bound = shared.request_timeout;
    let mut input = Input {
        stream: from,
        buf: Vec::with_capacity(BUFFER_BYTES),
        deadline: None,
        writing: std::cell::Cell::new(Duration::ZERO),
        bound,
    };
    let mut up: Option<Up> = None;
    let mut forwarded = false;
    let result = (|| loop {
        input.deadline = None;
        input.writing.set(Duration::ZERO);
        // Between requests a write toward the upstream (a TLS alert's) waits as long as it
        // needs: the last request's bound is not this one's.
        if let Some(to) = &up {
            to.set_write_timeout(None)?;
        }
        if input.buf.is_empty() && !input.fill()? {
            return Ok(false);
        }
        // The request's first byte is in: the whole of it must come within the bound.
        input.deadline = Some(Instant::now() + bound);
        let end = input.until(b"\r\n\r\n", MAX_HEAD_BYTES, "its head is too large")?;
        let head = rewrite(&input.buf[..end], credential, authority).map_err(Failure::Refused)?;
        if head.upgrade && credential.is_some() {
            return Err(Failure::Switch { told: false });
        }
        if head.upgrade && forwarded {
            return Err(Failure::Refused(
                "it asks to switch protocols after another request",
            ));
        }
        if credential.is_some() {
            shared
                .budget
                .take()
                .map_err(|refused| Failure::OverBudget {
                    refused,
                    told: false,
                })?;
            hold(shared, endpoint.port)?;
            // The wait is the door's, not the client's: the rest of the request has the
            // whole bound from here.
            input.deadline = Some(Instant::now() + bound);
        }
        let to = match &mut up {
            Some(to) => to,
            None => up.insert(reach().map_err(Failure::Unreachable)?),
        };
        input.buf.drain(..end);
        forwarded = true;
        // Noted before its first byte goes: an upstream that answers and closes at once is
        // otherwise read out (answered, closed) before the note, and its close taken for a
        // request left unanswered (a `502` and a log line for an answered request, seen under
        // load).
        watch.sent();
        input.put(to, &head.bytes)?;
        match head.framing {
            Framing::None => {}
            Framing::Length(n) => input.pass(n, to)?,
            Framing::Chunked => input.chunked(to, credential.map_or("", |c| &c.header))?,
        }
        if head.upgrade {
            // Nothing more of the client's passes before the upstream switched.
            return Ok(watch.first_status(UPGRADE_WAIT) == Some(101));
        }
    })();
    let mut result = match (result, up.as_mut()) {
        // The upstream switched: the rest of the connection passes as bytes.
        (Ok(true), Some(to)) => {
            to.set_write_timeout(None)?;
            to.write_all(&input.buf)?;
            input.buf.clear();
            input.stream.set_read_timeout(None)?;
            let stream = input.stream.try_clone()?;
            let to = up.take().expect("the upstream's end is open");
            return super::forward::pipe(stream, to, None, endpoint)
                .map(|_| ())
                .map_err(Failure::Io);
        }
        (Ok(_), _) => Ok(()),
        (Err(e), _) => Err(e),
    };
    end(
        &mut result,
        input,
        up.as_ref(),
        forwarded,
        watch,
        endpoint,
        shared,
    );
    result
}

/// Ends the connection as `result` says: the client told why when nothing of an answer is on
/// its way (a `400`, `502`, `429`, `408` or `504`), each side closed; `result`'s `told` set
/// when it was. The log line ([`super::forward::failure_line`]) is written first, before
/// the client is told or sees the close: a client that sends its next request at once finds
/// the line of the last already there (seen: the lines of three `429`s on successive
/// connections out of order under load).
fn end(
    result: &mut Result<(), Failure>,
    input: Input,
    up: Option<&Up>,
    forwarded: bool,
    watch: &Watch,
    endpoint: &Endpoint,
    shared: &Shared,
) {
    let answer = answer(result, input.bound, forwarded, watch, endpoint, shared);
    if let Err(failure) = result
        && let Some(line) = super::forward::failure_line(failure, endpoint, shared)
    {
        shared.log(line);
    }
    let shut = |how| {
        if let Some(to) = up {
            to.shutdown(how);
        }
    };
    match (answer, result) {
        (Some((status, headers, body)), result) => {
            super::forward::answer_with_and_close(input.stream, status, headers, &body);
            // The answer goes first: closing the upstream first ends the thread that pipes
            // its answers, which then closes the client's side before the answer is written
            // (seen: the client read nothing in 4 of 12 runs under load).
            if !matches!(result, Err(Failure::Unreachable(_))) {
                shut(Shutdown::Both);
            }
        }
        // Closed both ways, at once: the client does not wait on an upstream that keeps
        // its side open.
        (
            None,
            Err(
                Failure::Refused(_)
                | Failure::Stalled(_)
                | Failure::Untaken(_)
                | Failure::OverBudget { .. }
                | Failure::Switch { .. },
            ),
        ) => {
            shut(Shutdown::Both);
            let _ = input.stream.shutdown(Shutdown::Both);
        }
        (None, _) => {
            shut(Shutdown::Write);
            let _ = input.stream.shutdown(Shutdown::Read);
        }
    }
}

/// What the client is told as `result` ends its connection (status line, header lines each
/// ending in CRLF, body), when nothing of an answer is on its way; sets `result`'s `told`.
fn answer(
    result: &mut Result<(), Failure>,
    bound: std::time::Duration,
    forwarded: bool,
    watch: &Watch,
    endpoint: &Endpoint,
    shared: &Shared,
) -> Option<(&'static str, &'static str, String)> {
    Some(match result {
        // Nothing was passed on, so no answer is on its way: the client gets a 400.
        Err(Failure::Refused(why)) if !forwarded => (
            "400 Bad Request",
            "",
            format!("kcap door: refused the request: {why}\n"),
        ),
        // No upstream connection was opened: the client gets a 502.
        Err(Failure::Unreachable(why)) => (
            "502 Bad Gateway",
            "",
            format!(
                "kcap door: the upstream of port {} ({}) {why}\n",
                endpoint.port, endpoint.upstream
            ),
        ),
        // The budget is used up. Unless a request passed on still awaits the first byte of
        // its answer (a client that pipelines: the 429 would read as that answer), the
        // client gets a 429 that says so; the request never reaches the upstream.
        Err(Failure::OverBudget { told, .. }) if !forwarded || !watch.waiting() => {
            *told = true;
            (
                "429 Too Many Requests",
                "x-should-retry: false\r\n",
                format!(
                    "kcap door: the launch's budget of {} requests with the daemon's \
                     credential is used up; this request did not reach the upstream\n",
                    shared.budget.limit
                ),
            )
        }
        // A protocol switch with the daemon's credential: unless a request passed on still
        // awaits its answer (the 426 would read as that answer), the client gets a 426 and
        // sends its request over HTTP; nothing of it reached the upstream.
        Err(Failure::Switch { told }) if !forwarded || !watch.waiting() => {
            *told = true;
            (
                "426 Upgrade Required",
                "",
                "kcap door: a protocol switch (upgrade) is not passed on with the daemon's \
                 credential, as what follows it could not be counted against the launch's \
                 budget; send the request over HTTP\n"
                    .to_owned(),
            )
        }
        // No answer has begun since the last request went up (or none went): the client
        // gets a 408. The watch is cleared first, so that the thread that pipes the
        // upstream's answers, ended by the close, adds no 502 or 504.
        Err(Failure::Stalled(told)) if !forwarded || watch.waiting() => {
            *told = true;
            watch.door_answered();
            (
                "408 Request Timeout",
                "",
                format!(
                    "kcap door: the request did not arrive whole within {} s\n",
                    bound.as_secs_f64()
                ),
            )
        }
        // The upstream stopped reading before the request was in, and no answer has begun
        // since it went up: the client gets a 504, as for an upstream that does not answer.
        Err(Failure::Untaken(told)) if watch.waiting() => {
            *told = true;
            watch.door_answered();
            (
                "504 Gateway Timeout",
                "",
                format!(
                    "kcap door: the upstream of port {} ({}) did not take the request within \
                     {} s\n",
                    endpoint.port,
                    endpoint.upstream,
                    bound.as_secs_f64()
                ),
            )
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests;

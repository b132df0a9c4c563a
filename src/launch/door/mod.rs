//! The reviewer's one door out: a network namespace of its own, loopback only, whose only
//! way out is a set of local ports the executor forwards, each to exactly one upstream.
//!
//! Between fork and exec the client's process:
//! 1. `unshare(CLONE_NEWUSER | CLONE_NEWNET)`: a user namespace (so an unprivileged daemon
//!    can make the network namespace, and so a root daemon's reviewer holds no capability
//!    over the host's namespaces: it cannot `setns` back into the host's network) and a
//!    network namespace with only a loopback interface, down;
//! 2. maps its own uid and gid (`/proc/self/uid_map` `<euid> <euid> 1`, `setgroups` `deny`,
//!    `/proc/self/gid_map` `<egid> <egid> 1`): the client keeps its ids, and its files;
//! 3. brings `lo` up (`SIOCSIFFLAGS`), which gives it `127.0.0.1/8` and `::1`;
//! 4. for each [`Endpoint`], binds a listening TCP socket on `127.0.0.1:<port>` of the new
//!    namespace and passes it to the executor over a socketpair made before the fork
//!    (`SCM_RIGHTS`). A socket stays in the namespace it was created in: the executor,
//!    outside, accepts the connections made inside;
//! 5. makes a tun device, `kcap0`, routes every other address to it (`192.0.2.1`, IPv4's
//!    default route; `2001:db8::1` and IPv6's where the kernel has it) and passes it too:
//!    the executor reads what the reviewer sends toward another host there (`outside`);
//! 6. binds UDP `0.0.0.0:53` and passes it: a name lookup to a resolver on the loopback
//!    (`127.0.0.53`) is answered `REFUSED` by the door, with a log line;
//! 7. empties its capability bounding set and ambient set: a root daemon's reviewer is uid
//!    0 in its user namespace, and would otherwise hold every capability over its network
//!    namespace after exec, sandbox or not (set `kcap0` down, delete its routes: its way out
//!    then fails unlogged).
//!
//! Every step is a raw system call on memory prepared before the fork (the map lines, the
//! ports): nothing is allocated and no lock is taken in the child.
//!
//! The executor then ([`Door`]) accepts on each socket and forwards each connection to
//! that endpoint's upstream (`host:port`, resolved and connected outside the namespace, once
//! the client's first request is read and accepted, or on an endpoint the door only pipes
//! once its first byte came: a connection that sends nothing, or what the door refuses,
//! costs the upstream none), bytes as they come in both directions: a thread per direction, [`BUFFER_BYTES`] each, no
//! parsing and no buffering beyond one read, so a streamed response (server-sent events)
//! passes at once. At most [`MAX_CONNECTIONS`] are open at a time. An upstream that cannot
//! be reached within [`CONNECT_TIMEOUT`] gets the client an HTTP `502 Bad Gateway` and a
//! log line ([`Door::log`]); the door's memory is bounded by the connections, not by what
//! an upstream sends.
//!
//! On an endpoint with a [`Credential`] the door reads the requests' heads and sets the
//! daemon's credential on each ([`http`]): the key stays outside the reviewer.
//! Those requests are what the launch spends of the daemon's key: at most
//! [`Settings::keyed_requests`] of them (then a `429`), at [`Settings::keyed_rate`] (a
//! faster one waits its turn). The door's log ([`Door::log`]) keeps its first lines and its
//! last, with a count of those dropped between them.
//!
//! To an upstream over TLS ([`Endpoint::tls`], an `https://` URL) the door speaks TLS
//! (`tls.rs`: rustls, the system's roots, the upstream's host as the certificate's name) and
//! the client plain HTTP; each request's head is read there too (its `host` is the
//! upstream's). An upstream that accepts a request and does not start its answer within
//! [`Settings::answer_timeout`] gets the client a `504 Gateway Timeout` and a log line; a
//! request the door reads that does not arrive whole within [`Settings::request_timeout`]
//! (a client that stalls its upload) gets it a `408 Request Timeout` and a log line; one the
//! upstream does not take whole within that bound (it stopped reading) a `504` and a log
//! line, as does, on an endpoint the door only pipes, a write toward the upstream that moves
//! no byte for that long.
//!
//! Inside the namespace nothing else leads out: a packet toward any other host reaches the
//! tun device, whose only reader is the door, and the door forwards none: it writes a log
//! line naming it (a name lookup with its name) and answers ICMP "administratively
//! prohibited", so the `connect` fails at once (`EHOSTUNREACH`; where the device cannot be
//! made, no route: `ENETUNREACH`, unlogged, and the log's first line says why). Every other
//! local port is refused by the kernel, inside the namespace, unseen. Because each reviewer has its own namespace,
//! the door's ports are fixed and known when the plan is made. docs/network.md has the
//! measurements.

use crate::launch::spawn::Command;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::error::ExecError;
use super::userns;
use child::{ChildSide, enter, recv_fd, recv_fd_or_errno};
use forward::accept_loop;

mod budget;
mod check;
mod child;
mod forward;
pub mod http;
mod log;
mod outside;
mod tls;

pub use budget::Rate;
pub use check::missing;
pub(crate) use check::{of_plan, preflight, step};
pub use log::{KEPT_FIRST, KEPT_LAST};
pub use tls::HANDSHAKE_TIMEOUT;

/// At most this many endpoints in one door.
pub const MAX_ENDPOINTS: usize = 16;
/// At most this many connections through one door at a time; one more is closed at once,
/// with a log line. Each holds at most [`BUFFER_BYTES`] from its upstream and, toward it,
/// [`BUFFER_BYTES`] (or, on an endpoint with a [`Credential`], one request head of at most
/// [`http::MAX_HEAD_BYTES`] and 4 KiB): the door's data is at most 6 MiB however much an
/// upstream or the client sends.
pub const MAX_CONNECTIONS: usize = 64;
/// The buffer of one direction of one connection, in bytes (see [`MAX_CONNECTIONS`]; and
/// two threads of [`THREAD_STACK`] per connection).
pub const BUFFER_BYTES: usize = 16 * 1024;
/// The stack of a forwarding thread, in bytes.
pub const THREAD_STACK: usize = 128 * 1024;
/// How long the door waits for an upstream's TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The door keeps this many log lines: its first [`KEPT_FIRST`] and its last [`KEPT_LAST`],
/// with a count of the lines dropped between them ([`Door::log`]), so that a reviewer that
/// floods the log cannot push out its first refusals.
pub const MAX_LOG_LINES: usize = 256;
/// How many requests carrying the daemon's credential (on an endpoint with a [`Credential`])
/// one door passes, by default ([`Settings::keyed_requests`]): the launch's budget. A request
/// past it gets the client a `429 Too Many Requests` naming the door's budget, and a log line;
/// it never reaches the upstream. 2000: a review turn through the door made 1 or 2 model
/// requests on each real client (`tests/clients/door_https.rs`, docs/network.md), and a review
/// that calls a tool a hundred times makes a hundred or so: the budget is ten times that and
/// more; a reviewer that sends requests in a loop (16,602 in 2 s on one connection, red team
/// of issue 32) is stopped at it.
pub const KEYED_REQUESTS: u64 = 2000;
/// How fast the door passes requests carrying the daemon's credential, by default
/// ([`Settings::keyed_rate`]): 40 at once, then one every 250 ms (4 a second, 240 a minute).
/// A request that comes faster waits for its turn. A review turn waits for each model answer
/// (seconds) before its next request, so it never waits here; a reviewer that sends
/// requests in a loop spends the budget over 8 minutes, not a fraction of a second, and
/// takes at most 240 of a shared per-minute quota.
pub const KEYED_RATE: Rate = Rate {
    burst: 40,
    interval: Duration::from_millis(250),
};
/// How long the door waits, by default, for the first byte of an upstream's answer to a
/// request it passed on ([`Settings::answer_timeout`]): then the client gets a `504`. Five
/// minutes: a streamed answer's head comes within seconds, a long answer that is not streamed
/// can take minutes, and the clients' own bound is ten (Claude Code's `API_TIMEOUT_MS`, the
/// Anthropic and OpenAI SDKs' default).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the door waits, by default, for a request it reads to arrive whole, from its
/// first byte to the last of its body ([`Settings::request_timeout`]): then the client gets a
/// `408`. Two minutes: a model request is a few megabytes at most, sent at once by a client
/// on the same machine; a client that stalls its upload, or sends it a byte at a time, does
/// not hold a connection (one of [`MAX_CONNECTIONS`]) and its thread for longer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// How the executor runs its doors, set by the program embedding it
/// ([`Options::door`](super::Options::door)); never from a plan, nor from the environment,
/// so neither a plan's author nor the reviewer can widen what the door trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// How long the door waits for the first byte of an upstream's answer to a request it
    /// passed on (on an endpoint with a [`Credential`] or over TLS, each request; on
    /// another, the connection's first bytes): then the client gets a `504 Gateway
    /// Timeout`, the connection is closed and a log line written. A streamed answer that has
    /// begun may be quiet for as long as it likes. Default [`ANSWER_TIMEOUT`].
    pub answer_timeout: Duration,
    /// How long a request the door reads (on an endpoint with a [`Credential`] or over TLS)
    /// may take to arrive whole, from its first byte to the last of its body: then the
    /// client gets a `408 Request Timeout` (or, when the upstream has begun its answer, the
    /// connection is closed), the upstream's connection is closed and a log line written.
    /// The same bound holds for the upstream taking the request (each write toward it waits
    /// at most what is left of it): an upstream that stops reading gets the client a `504
    /// Gateway Timeout`; on an endpoint the door only pipes, a write toward the upstream that
    /// moves no byte for this long ends the connection the same way. The wait for a
    /// connection's next request is not bounded. Default [`REQUEST_TIMEOUT`].
    pub request_timeout: Duration,
    /// Root certificates (DER) a TLS upstream's chain may also end in, beside the system's:
    /// a gateway's private CA, or a test's. Whoever adds one can read and change the traffic
    /// to every TLS upstream of the door, the daemon's key included: the daemon's own
    /// configuration only. Default none.
    pub extra_roots: Vec<Vec<u8>>,
    /// How many requests carrying the daemon's credential the door passes for the launch,
    /// on all its endpoints together: the next gets the client a `429 Too Many Requests`
    /// (its body names the door's budget; `x-should-retry: false`, which the Anthropic and
    /// OpenAI SDKs honour, so they do not ask again) and the connection is closed, with a
    /// log line; it never reaches the upstream, nor does any after it. Requests on an
    /// endpoint without a credential are not counted. Default [`KEYED_REQUESTS`].
    pub keyed_requests: u64,
    /// How fast the door passes requests carrying the daemon's credential, on all its
    /// endpoints together: a request that comes faster waits (its head read, before it
    /// goes to the upstream) for its turn, so a burst is slowed, not failed. Default
    /// [`KEYED_RATE`].
    pub keyed_rate: Rate,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            answer_timeout: ANSWER_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            extra_roots: Vec::new(),
            keyed_requests: KEYED_REQUESTS,
            keyed_rate: KEYED_RATE,
        }
    }
}

/// One way out: a local port inside the reviewer's namespace, and the one upstream it
/// reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The TCP port the door listens on, on `127.0.0.1` inside the reviewer's namespace
    /// (1 to 65535; each reviewer has its own namespace, so the port is fixed).
    pub port: u16,
    /// Where its connections go: `host:port`, resolved and connected by the executor
    /// outside the namespace (plain TCP: an HTTP upstream, or anything the client speaks
    /// end to end, TLS included; or TLS, with [`Endpoint::tls`]).
    pub upstream: String,
    /// Whether the door speaks TLS to the upstream (an `https://` URL): the client speaks
    /// plain HTTP to the door, the door checks the upstream's certificate (the system's
    /// roots, [`Settings::extra_roots`]; the name: the upstream's host) and reads each
    /// request's head ([`http`]: its `host` becomes the upstream's).
    pub tls: bool,
    /// The daemon's credential, set on each HTTP request through this endpoint (the
    /// client holds a stand-in token; [`http`] reads the requests' heads): none for an
    /// endpoint whose bytes pass as they are.
    pub credential: Option<Credential>,
}

impl Endpoint {
    /// The endpoint on `port` inside, to `upstream` (`host:port`) outside.
    pub fn new(port: u16, upstream: impl Into<String>) -> Endpoint {
        Endpoint {
            port,
            upstream: upstream.into(),
            tls: false,
            credential: None,
        }
    }

    /// This endpoint speaking TLS to its upstream ([`Endpoint::tls`]).
    pub fn over_tls(mut self) -> Endpoint {
        self.tls = true;
        self
    }

    /// The authority the upstream gets as each request's `host`: [`Endpoint::upstream`]
    /// without the scheme's default port (443 over TLS, 80 without).
    pub(crate) fn authority(&self) -> &str {
        let default = if self.tls { ":443" } else { ":80" };
        self.upstream
            .strip_suffix(default)
            .unwrap_or(&self.upstream)
    }

    /// This endpoint with `credential` set on each request through it.
    pub fn with_credential(mut self, credential: Credential) -> Endpoint {
        self.credential = Some(credential);
        self
    }
}

/// A request header the door sets, the daemon's credential as its value: every header of
/// that name the client sent is dropped. Its `Debug` does not show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The header's name, e.g. `x-api-key` (Anthropic) or `authorization` (OpenAI, with
    /// `Bearer ` in the value).
    pub header: String,
    /// Its value.
    pub value: String,
}

impl Credential {
    /// The header `header` with `value`.
    pub fn new(header: impl Into<String>, value: impl Into<String>) -> Credential {
        Credential {
            header: header.into(),
            value: value.into(),
        }
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("header", &self.header)
            .field("value", &"(not shown)")
            .finish()
    }
}

/// The reviewer's network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Network {
    /// The executor's network, as it is: the client reaches whatever the executor reaches.
    #[default]
    Open,
    /// A namespace of its own, loopback only; its only way out is the door: these
    /// endpoints. The launch is refused ([`ExecError::NoDoor`]) where the kernel does not
    /// give the namespaces; there is no best effort, as the client's configuration names
    /// the door's ports, which exist only inside the namespace.
    Door(Vec<Endpoint>),
}

/// The executor's end of a door being installed: the listening sockets arrive on it once
/// the client has started.
#[derive(Debug)]
pub(crate) struct Pending {
    channel: OwnedFd,
    endpoints: Vec<Endpoint>,
    settings: Settings,
}

/// Has `cmd`'s child enter a namespace of its own with the door's listening sockets (the
/// module docs list the steps); `None` for an open network.
///
/// # Errors
/// [`ExecError::NoDoor`] when the socketpair cannot be made.
pub(crate) fn install(
    cmd: &mut Command,
    network: &Network,
    settings: &Settings,
) -> Result<Option<Pending>, ExecError> {
    let Network::Door(endpoints) = network else {
        return Ok(None);
    };
    let mut fds = [0; 2];
    // SAFETY: `fds` is two ints for the kernel to fill.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if made != 0 {
        return Err(ExecError::NoDoor {
            missing: format!("a socketpair ({})", std::io::Error::last_os_error()),
        });
    }
    // SAFETY: both were just made and are owned here only.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let child = ChildSide {
        maps: userns::Maps::own(),
        ports: endpoints.iter().map(|e| e.port).collect(),
        channel: theirs,
    };
    // SAFETY: between fork and exec the closure makes raw system calls only (unshare, open,
    // write, close, socket, ioctl, bind, listen, sendmsg) on memory prepared above and stack
    // values, and builds `io::Error`s from errnos: no allocation, no lock, async-signal-safe.
    unsafe {
        cmd.pre_exec(move || enter(&child));
    }
    Ok(Some(Pending {
        channel: ours,
        endpoints: endpoints.clone(),
        settings: settings.clone(),
    }))
}

impl Pending {
    /// Once the client has started (its `exec` succeeded, so every socket was sent): takes
    /// the listening sockets and opens the door.
    ///
    /// # Errors
    /// [`ExecError::NoDoor`] when a socket did not arrive.
    pub(crate) fn open(self) -> Result<Door, ExecError> {
        let tls = if self.endpoints.iter().any(|e| e.tls) {
            let config =
                tls::config(&self.settings.extra_roots).map_err(|why| ExecError::BadDoor {
                    problem: format!("has a TLS upstream and {why}"),
                })?;
            Some(config)
        } else {
            None
        };
        // Built as it goes: on an error, dropping it closes what was opened.
        let mut door = Door {
            shared: Arc::new(Shared {
                tls,
                answer_timeout: self.settings.answer_timeout,
                request_timeout: self.settings.request_timeout,
                budget: budget::Budget::new(self.settings.keyed_requests, self.settings.keyed_rate),
                ..Shared::default()
            }),
            listeners: Vec::new(),
            outside: None,
        };
        for endpoint in self.endpoints {
            let fd = recv_fd(self.channel.as_raw_fd()).map_err(|e| ExecError::NoDoor {
                missing: format!("the listening socket of port {} ({e})", endpoint.port),
            })?;
            let listener = TcpListener::from(fd);
            let accepting = listener.try_clone().map_err(|e| ExecError::NoDoor {
                missing: format!("the listening socket of port {} ({e})", endpoint.port),
            })?;
            let shared = Arc::clone(&door.shared);
            let thread = std::thread::Builder::new()
                .name(format!("door-{}", endpoint.port))
                .stack_size(THREAD_STACK)
                .spawn(move || accept_loop(&accepting, &endpoint, &shared))
                .map_err(|e| ExecError::NoDoor {
                    missing: format!("a thread for the door ({e})"),
                })?;
            door.listeners.push((listener, thread));
        }
        let channel = self.channel.as_raw_fd();
        let tun = recv_or_log(channel, &door.shared, "the namespace's tun device", |e| {
            format!(
                "door: connections out of the reviewer's namespace fail, unlogged: its device \
                 to see them cannot be made (/dev/net/tun: {e})"
            )
        })?;
        let dns = recv_or_log(
            channel,
            &door.shared,
            "the namespace's port 53 socket",
            |e| {
                format!(
                    "door: name lookups to a resolver on the reviewer's loopback fail, unlogged: \
                 port 53 cannot be bound there ({e})"
                )
            },
        )?
        .map(std::net::UdpSocket::from);
        if tun.is_some() || dns.is_some() {
            door.outside = Some(
                outside::Watcher::start(tun, dns, Arc::clone(&door.shared)).map_err(|e| {
                    ExecError::NoDoor {
                        missing: format!("a thread for the door ({e})"),
                    }
                })?,
            );
        }
        Ok(door)
    }
}

/// Receives from the child a descriptor it may have failed to make (after the listening
/// sockets: the tun device, the port-53 socket): the descriptor, or `None` when the child
/// sent its errno instead, and then the door logs `unmade(error)` (what fails, and why).
///
/// # Errors
/// [`ExecError::NoDoor`] naming `what` when neither arrived.
fn recv_or_log(
    channel: std::os::fd::RawFd,
    shared: &Shared,
    what: &str,
    unmade: impl FnOnce(std::io::Error) -> String,
) -> Result<Option<OwnedFd>, ExecError> {
    match recv_fd_or_errno(channel) {
        Ok(Ok(fd)) => Ok(Some(fd)),
        Ok(Err(errno)) => {
            shared.log(unmade(std::io::Error::from_raw_os_error(errno)));
            Ok(None)
        }
        Err(e) => Err(ExecError::NoDoor {
            missing: format!("{what} or why it is missing ({e})"),
        }),
    }
}

/// What the door's threads share.
#[derive(Debug, Default)]
struct Shared {
    stopping: AtomicBool,
    open: AtomicUsize,
    log: Mutex<log::Log>,
    /// Each open connection's streams, the client's and, once it is open, the upstream's:
    /// to shut down when the door closes.
    live: Mutex<Vec<(u64, TcpStream, Option<TcpStream>)>>,
    next: std::sync::atomic::AtomicU64,
    /// The TLS configuration, when an endpoint speaks TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// [`Settings::answer_timeout`].
    answer_timeout: Duration,
    /// [`Settings::request_timeout`].
    request_timeout: Duration,
    /// What the launch may spend with the daemon's credential, and what it spent.
    budget: budget::Budget,
}

impl Shared {
    fn log(&self, line: String) {
        if let Ok(mut log) = self.log.lock() {
            log.push(line);
        }
    }
}

/// A running door: its accepting threads and what it forwards. Dropping it closes its
/// listening sockets and every connection through it.
#[derive(Debug)]
pub struct Door {
    shared: Arc<Shared>,
    listeners: Vec<(TcpListener, std::thread::JoinHandle<()>)>,
    /// The reader of the namespace's tun device, where it could be made.
    outside: Option<outside::Watcher>,
}

impl Door {
    /// Its log lines, oldest first: one per connection it refused (too many open), request
    /// it refused (one it cannot frame, one over the budget) or could not forward (the
    /// upstream down, a bound passed, a forwarding error). Its first [`KEPT_FIRST`] and
    /// last [`KEPT_LAST`]; when lines were dropped between them, one line there says how
    /// many (`door: <n> log lines dropped here (…)`): at most [`MAX_LOG_LINES`] and one.
    pub fn log(&self) -> Vec<String> {
        self.shared
            .log
            .lock()
            .map(|l| l.lines())
            .unwrap_or_default()
    }

    /// How many requests it passed on with the daemon's credential
    /// ([`Settings::keyed_requests`] at most), and how many it refused past that budget.
    pub fn keyed_requests(&self) -> (u64, u64) {
        self.shared.budget.spent()
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        for (listener, _) in &self.listeners {
            // Wakes the thread blocked in `accept` (it then gets EINVAL).
            // SAFETY: a socket this door owns.
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
        for (_, thread) in self.listeners.drain(..) {
            let _ = thread.join();
        }
        if let Ok(mut live) = self.shared.live.lock() {
            for (_, a, b) in live.drain(..) {
                let _ = a.shutdown(Shutdown::Both);
                if let Some(b) = b {
                    let _ = b.shutdown(Shutdown::Both);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstreams_host_leaves_out_the_schemes_default_port() {
        let e = |u: &str| Endpoint::new(1, u);
        assert_eq!(
            e("api.anthropic.com:443").over_tls().authority(),
            "api.anthropic.com"
        );
        assert_eq!(e("h:8443").over_tls().authority(), "h:8443");
        assert_eq!(e("h:443").authority(), "h:443");
        assert_eq!(e("h:80").authority(), "h");
        assert_eq!(e("[::1]:443").over_tls().authority(), "[::1]");
        assert_eq!(tls::server_name("[::1]:443").unwrap().to_str(), "::1");
        assert_eq!(
            tls::server_name("api.openai.com:443").unwrap().to_str(),
            "api.openai.com"
        );
    }
}

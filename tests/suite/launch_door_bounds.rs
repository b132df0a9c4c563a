//! The network door's bounds against upstreams that misbehave (issue 32, item 4).
//!
//! An upstream that stops reading: a client
//! inside the reviewer uploads a large request body (256 MiB, more than every socket buffer
//! on the way holds) to an upstream that takes the connection and then reads nothing and
//! answers nothing. The door must give the client a clear HTTP error within its bound
//! (`Settings::request_timeout`, 1 s here; the answer timeout is left at a minute so that it
//! is not what ends the wait), write a log line, close the upstream's connection (the
//! upstream then reads to its end: no socket and no thread is left holding it), and hold
//! no more of the body than its buffers: the client gets to send only what the sockets on
//! the way hold, not the whole body.
//!
//! The bite: the door of main (before this test) blocked writing the body to the upstream
//! until the answer timeout; the client's own 20 s guard passed with no answer and the
//! upstream's connection stayed open.
//!
//! An upstream that sends a large answer (256 MiB) to a client that reads its first bytes
//! and then nothing for 3 s: the door holds no more than its buffers, so the upstream can
//! send only what the sockets on the way hold; once the client leaves, the door closes the
//! upstream's connection. The bite, run once: a door that gathers the answer before passing
//! it on (its memory then grows with what the upstream sends) lets the upstream send it all.

use crate::common;

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use common::carry::{kernel_gives, terminal_plan, until_exit};
use common::door::{TestCa, tls_server};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan, Sandbox};
use kcap_mcp_registry::launch::door::{self, Credential, Endpoint, Network};
use kcap_mcp_registry::launch::{self, Options};

/// The door's port inside the reviewer.
const PORT: u16 = 8080;
/// The body's length: far more than the sockets between the client and the upstream hold.
const BODY: u64 = 256 << 20;
/// What the client may have sent when it is told: the sockets' buffers (a few MiB each on
/// loopback), not the body.
const HELD: u64 = 64 << 20;

/// The answer's length: far more than the sockets between the upstream and the client hold.
const FLOOD: u64 = 256 << 20;

/// A client that asks for the flood, reads its first 64 KiB, then nothing for 3 s, and
/// leaves; prints `flood <bytes read> <first bytes, Python repr>`.
const SLOW_READER: &str = r#"
import os, socket, time
s = socket.create_connection(("127.0.0.1", int(os.environ["DOOR_PORT"])), timeout=20)
s.sendall(b"GET /flood HTTP/1.1\r\nhost: x\r\n\r\n")
got = b""
while len(got) < 65536:
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
time.sleep(3)
print(f"flood {len(got)} {got[:40]!r}", flush=True)
"#;

/// The client: sends a head announcing [`BODY`] bytes, then the body as fast as the door
/// takes it, and stops at the first bytes of an answer (or the error of a closed
/// connection, then reads what came before it), or after 20 s (its own guard). Prints
/// `answer <seconds> <bytes of body sent> <first bytes, Python repr>`.
const UPLOADER: &str = r#"
import os, select, socket, time
length = int(os.environ["BODY"])
s = socket.create_connection(("127.0.0.1", int(os.environ["DOOR_PORT"])), timeout=20)
s.sendall(f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {length}\r\n\r\n".encode())
s.setblocking(False)
start, sent, data, chunk = time.monotonic(), 0, b"none", b"x" * 65536
while time.monotonic() - start < 20:
    r, w, _ = select.select([s], [s] if sent < length else [], [], 0.5)
    if r:
        try:
            data = s.recv(4096)
        except OSError as e:
            data = repr(e).encode()
        break
    if w:
        try:
            sent += s.send(chunk[: length - sent])
        except BlockingIOError:
            pass
        except OSError as e:
            data = repr(e).encode()
            if select.select([s], [], [], 2)[0]:
                try:
                    data = s.recv(4096) or data
                except OSError:
                    pass
            break
print(f"answer {time.monotonic() - start:.2f} {sent} {data!r}", flush=True)
"#;

/// How the door reaches the upstream: the endpoint's kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    /// Plain HTTP, the door setting the daemon's key (it reads the requests).
    Keyed,
    /// Bytes piped as they are.
    Piped,
    /// TLS to the upstream (a certificate for `localhost` from a CA of the test's, given
    /// to the door), the key set by the door.
    Tls,
}

/// An upstream that accepts one connection (over TLS when `tls`: the handshake done), sends
/// `answer` (if any, after 0.5 s) and then reads nothing until `go` is sent (or 60 s pass);
/// then it reads the socket until the connection's end, waiting at most 5 s for each read.
/// Yields whether the end came (the door closed its side) and how many bytes it read.
fn deaf_upstream(
    answer: &'static [u8],
    tls: Option<Arc<rustls::ServerConfig>>,
) -> (
    String,
    mpsc::Sender<()>,
    std::thread::JoinHandle<(bool, u64)>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // A small window: the door's writes stop within milliseconds, not after megabytes (the
    // door's TLS in a debug build seals a few MiB a second).
    rustix::net::sockopt::set_socket_recv_buffer_size(&listener, 16 * 1024).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (go, wait) = mpsc::channel();
    let seen = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        if let Some(config) = tls {
            let mut server = rustls::ServerConnection::new(config).unwrap();
            while server.is_handshaking() {
                server.complete_io(&mut conn).unwrap();
            }
            while server.wants_write() {
                server.write_tls(&mut conn).unwrap();
            }
        }
        if !answer.is_empty() {
            // Once the sockets on the way are full: the door is then writing the body.
            std::thread::sleep(Duration::from_millis(500));
            conn.write_all(answer).unwrap();
        }
        let _ = wait.recv_timeout(Duration::from_secs(60));
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (mut got, mut buf) = (0u64, vec![0u8; 1 << 16]);
        loop {
            match conn.read(&mut buf) {
                Ok(0) => return (true, got),
                Ok(n) => got += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (true, got),
                Err(_) => return (false, got),
            }
        }
    });
    (addr, go, seen)
}

/// An upstream that takes one connection, reads the request's head and answers `200` with
/// a [`FLOOD`]-byte body, sent as fast as the door takes it. Yields how many bytes of body
/// it sent, and whether its connection failed (the door closed it) rather than stalling
/// for 10 s.
fn flooding_upstream() -> (String, std::thread::JoinHandle<(u64, bool)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let sent = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap() == 1 {
            head.push(byte[0]);
        }
        conn.set_write_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {FLOOD}\r\n\r\n");
        conn.write_all(answer.as_bytes()).unwrap();
        let (chunk, mut sent) = (vec![0u8; 1 << 16], 0u64);
        while sent < FLOOD {
            match conn.write(&chunk) {
                Ok(n) => sent += n as u64,
                Err(e) => {
                    let stalled = matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    );
                    return (sent, !stalled);
                }
            }
        }
        (sent, false)
    });
    (addr, sent)
}

/// Issue 32, item 4: an upstream that sends far more than a client reads does not make the
/// door hold it: the upstream gets to send only what the sockets on the way hold, and once
/// the client leaves its connection is closed.
#[test]
fn a_flood_to_a_client_that_does_not_read_is_held_back_not_gathered() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    let reader = root.path().join("tree/reader.py");
    std::fs::write(&reader, SLOW_READER).unwrap();
    let client = sh_script(
        &root.path().join("bin"),
        "reader",
        &format!("exec /usr/bin/python3 {}", reader.display()),
    );
    let (upstream, sent) = flooding_upstream();
    let endpoint =
        Endpoint::new(PORT, upstream).with_credential(Credential::new("x-api-key", "daemon-key"));
    let options = Options::default().with_network(Network::Door(vec![endpoint]));
    let launch_dir = root.path().join("launches/flood");
    let plan = plan(root.path(), &launch_dir);
    let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(60));
    let (sent, closed) = sent.join().unwrap();
    let log = reviewer.door_log();
    reviewer.stop().unwrap();
    eprintln!("the upstream sent {sent} of {FLOOD} bytes; its connection closed: {closed}");
    let line = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("flood "))
        .unwrap_or_else(|| panic!("{output}"));
    assert!(line.contains("b'HTTP/1.1 200 OK\\r\\n"), "{line}");
    assert!(
        sent < HELD,
        "the upstream sent {sent} bytes to a client that read 64 KiB; {log:?}"
    );
    assert!(
        closed,
        "the door kept the upstream's connection after the client left"
    );
}

/// What one upload saw.
struct Upload {
    /// The upstream's address.
    upstream: String,
    /// Seconds from the head to the client's first answer bytes (or its guard).
    secs: f64,
    /// Bytes of body the client got to send.
    sent: u64,
    /// The answer's first bytes, as Python prints them.
    answer: String,
    /// The door's log.
    log: Vec<String>,
    /// Whether the upstream's connection reached its end (the door closed it).
    ended: bool,
    /// Bytes the upstream read once it read.
    read: u64,
}

/// The uploader, run in a reviewer behind a door to a [`deaf_upstream`] that first sends
/// `answer` (plain only), reached the `way` given. Request bound 1 s, answer bound 60 s.
fn upload(root: &Path, name: &str, way: Way, answer: &'static [u8]) -> Upload {
    let uploader = root.join("tree/uploader.py");
    std::fs::write(&uploader, UPLOADER).unwrap();
    let client = sh_script(
        &root.join("bin"),
        "uploader",
        &format!("exec /usr/bin/python3 {}", uploader.display()),
    );
    let ca = TestCa::new("kcap door upload test CA");
    let tls = (way == Way::Tls).then(|| {
        let (cert, key) = ca.leaf(&["localhost"]);
        tls_server(cert, key)
    });
    let (upstream, go, seen) = deaf_upstream(answer, tls);
    let mut endpoint = match way {
        Way::Tls => Endpoint::new(PORT, upstream.replace("127.0.0.1", "localhost")).over_tls(),
        Way::Keyed | Way::Piped => Endpoint::new(PORT, upstream.clone()),
    };
    if way != Way::Piped {
        endpoint = endpoint.with_credential(Credential::new("x-api-key", "daemon-key"));
    }
    let upstream = endpoint.upstream.clone();
    let options = Options::default()
        .with_door_root(ca.der())
        .with_network(Network::Door(vec![endpoint]))
        .with_door_request_timeout(Duration::from_secs(1))
        .with_door_answer_timeout(Duration::from_secs(60));
    let launch_dir = root.join("launches").join(name);
    let plan = plan(root, &launch_dir);
    let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(60));
    let deadline = Instant::now() + Duration::from_secs(5);
    while reviewer.door_log().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = reviewer.door_log();
    go.send(()).unwrap();
    let (ended, read) = seen.join().unwrap();
    reviewer.stop().unwrap();
    let line = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("answer "))
        .unwrap_or_else(|| panic!("{name}: {output}"));
    let mut parts = line.splitn(3, ' ');
    Upload {
        upstream,
        secs: parts.next().unwrap().parse().unwrap(),
        sent: parts.next().unwrap().parse().unwrap(),
        answer: parts.next().unwrap().to_owned(),
        log,
        ended,
        read,
    }
}

fn world() -> tempfile::TempDir {
    let root = tempfile::Builder::new()
        .prefix("kcap-upload-")
        .tempdir()
        .unwrap();
    for dir in ["tree", "bin", "launches"] {
        std::fs::create_dir(root.path().join(dir)).unwrap();
    }
    root
}

fn plan(root: &Path, launch_dir: &Path) -> LaunchPlan {
    LaunchPlan {
        cwd: Some(root.join("tree").display().to_string()),
        env: vec![
            EnvVar::new("HOME", format!("{}/home", launch_dir.display())),
            EnvVar::new("PATH", "/usr/bin:/bin"),
            EnvVar::new("DOOR_PORT", PORT.to_string()),
            EnvVar::new("BODY", BODY.to_string()),
        ],
        sandbox: Sandbox::new(
            &launch_dir.display().to_string(),
            Some(&root.join("tree").display().to_string()),
        ),
        ..terminal_plan(kcap_mcp_registry::clients::Client::Codex, launch_dir)
    }
}

/// Issue 32, item 4: an upload to an upstream that stops reading gets the client a `504`
/// within the door's request bound, a log line, and the upstream's connection closed; on an
/// endpoint that sets the daemon's key (the door reads the requests), on one whose bytes
/// pass as they are, and on one speaking TLS to the upstream.
#[test]
fn an_upload_to_an_upstream_that_stops_reading_gets_a_504_within_the_bound() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    // What the door says: on a keyed endpoint it reads the requests; on a plain one it
    // passes bytes, and bounds each write toward the upstream.
    for (name, way, what) in [
        ("keyed", Way::Keyed, "did not take the request within 1 s"),
        ("piped", Way::Piped, "took nothing the client sent for 1 s"),
        ("tls", Way::Tls, "did not take the request within 1 s"),
    ] {
        let u = upload(root.path(), name, way, b"");
        let upstream = &u.upstream;
        assert!(
            u.answer.starts_with("b'HTTP/1.1 504 Gateway Timeout\\r\\n")
                && u.answer.contains(&format!(
                    "kcap door: the upstream of port {PORT} ({upstream}) {what}"
                )),
            "{name}: {} after {} s, {} bytes sent\n{:?}",
            u.answer,
            u.secs,
            u.sent,
            u.log
        );
        assert!((0.9..6.0).contains(&u.secs), "{name}: after {} s", u.secs);
        assert!(u.sent < HELD, "{name}: the client sent {} bytes", u.sent);
        assert!(u.read < HELD, "{name}: the upstream read {} bytes", u.read);
        assert_eq!(
            u.log,
            [format!(
                "door port {PORT}: upstream {upstream} {what}; answered 504 and closed the \
                 connection"
            )],
            "{name}"
        );
        assert!(
            u.ended,
            "{name}: the door kept the upstream's connection open"
        );
    }
}

/// An upstream that answers at once (a `413`, as one that refuses a large body may) and then
/// stops reading: the client gets that answer, and the door, within its bound, closes the
/// upstream's connection with a log line. Before, the door's thread stayed blocked writing
/// the body to the upstream for ever (no answer timeout runs once an answer has begun): a
/// connection, its thread and both sockets held until the reviewer stopped.
#[test]
fn an_upstream_that_answers_and_stops_reading_is_let_go_within_the_bound() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    let u = upload(
        root.path(),
        "answered",
        Way::Keyed,
        b"HTTP/1.1 413 Content Too Large\r\ncontent-length: 0\r\n\r\n",
    );
    assert!(
        u.answer.starts_with("b'HTTP/1.1 413 Content Too Large"),
        "{} {:?}",
        u.answer,
        u.log
    );
    assert_eq!(
        u.log,
        [format!(
            "door port {PORT}: upstream {} did not take the request within 1 s; closed the \
             connection",
            u.upstream
        )]
    );
    assert!(u.ended, "the door kept the upstream's connection open");
    assert!(u.read < HELD, "the upstream read {} bytes", u.read);
}

//! The door to an `https://` upstream (`launch::door`, `Endpoint::over_tls`), from inside a
//! reviewer: the stand-in client speaks plain HTTP to the door's port; the door speaks TLS to
//! a stand-in upstream on the host whose certificate a per-run CA (rcgen) signed, added with
//! `Options::with_door_root`. A request reaches it with the daemon's key and the upstream's
//! `host`, a server-sent stream passes event by event, a certificate for another name or from
//! a CA the door does not trust is refused with a `502` and a log line, a TLS endpoint whose
//! upstream speaks plain HTTP never gets the key in the clear, and an upstream that accepts a
//! request and never answers gets the client a `504` within the bound. Each refusal is shown
//! beside the same launch where the protection does not apply (the name on the certificate,
//! the CA added, plain TCP, the default bound), so each test bites.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::carry::{kernel_gives, terminal_plan, until_exit};
use common::door::{TestCa as Ca, Upstream};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::plan::{EnvVar, Sandbox};
use kcap_mcp_registry::launch::door::{self, Credential, Endpoint, Network};
use kcap_mcp_registry::launch::{self, Options};
use tempfile::TempDir;

/// The door's port inside the reviewer.
const PORT: u16 = 8443;
/// A dummy key standing for the daemon's model key.
const DAEMON_KEY: &str = "sk-ant-daemon-key-kcap-door-tls-test-0123456789";
/// The per-launch token the client holds in its place.
const TOKEN: &str = "kcap-launch-token-7a2c";

/// The stand-in client: for each step of `STEPS` (a path, or `stream`), a request to the
/// door's port, then `answer <step> <seconds> <bytes as Python repr>`.
const CLIENT: &str = r#"
import os, socket, time
port = int(os.environ["DOOR_PORT"])
def send(method, path, body=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=float(os.environ["WAIT"]))
    head = (f"{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-api-key: {os.environ['TOKEN']}\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    s.sendall(head.encode() + body)
    return s
def read_all(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
def stream():
    # The upstream sends its first event, then waits for /release before the second: a door
    # that held the stream back until its end would show `not-released`.
    s = send("GET", "/stream")
    data = b""
    while b"event: one" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
    read_all(send("GET", "/release"))
    return data + read_all(s)
for step in os.environ["STEPS"].split(","):
    start = time.monotonic()
    try:
        data = stream() if step == "stream" else read_all(send("POST", step, b'{"model":"m"}'))
        print(f"answer {step} {time.monotonic() - start:.2f} {data!r}", flush=True)
    except Exception as e:
        print(f"answer {step} {time.monotonic() - start:.2f} error {e!r}", flush=True)
print("steps-done", flush=True)
"#;

/// A CA of the test's, and a TLS upstream whose certificate it signed for `localhost`.
fn signed_upstream() -> (Ca, Upstream) {
    let ca = Ca::new("kcap door test CA");
    let (cert, key) = ca.leaf(&["localhost"]);
    (ca, Upstream::tls(cert, key))
}

/// A launch directory and the stand-in client.
struct World {
    root: TempDir,
    client: PathBuf,
}

impl World {
    fn new() -> World {
        let root = tempfile::Builder::new()
            .prefix("kcap-door-tls-")
            .tempdir()
            .unwrap();
        for dir in ["bin", "tree"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        std::fs::write(root.path().join("tree/client.py"), CLIENT).unwrap();
        let client = sh_script(
            &root.path().join("bin"),
            "client",
            &format!(
                "exec /usr/bin/python3 {}",
                root.path().join("tree/client.py").display()
            ),
        );
        World { root, client }
    }

    /// Runs the client through a door of `endpoint` under `options`, the client's sockets
    /// waiting at most `wait` seconds: each step's answer (seconds taken, what came back) and
    /// the door's log.
    fn run(
        &self,
        name: &str,
        endpoint: Endpoint,
        options: Options,
        steps: &str,
        wait: u32,
    ) -> (Vec<(String, f64, String)>, Vec<String>) {
        let launch_dir = self.root.path().join(name);
        let mut plan = terminal_plan(kcap_mcp_registry::clients::Client::Codex, &launch_dir);
        // The sandbox lets the client read the worktree, where its script is.
        let tree = self.root.path().join("tree").display().to_string();
        plan.sandbox = Sandbox::new(&launch_dir.display().to_string(), Some(&tree));
        plan.cwd = Some(tree);
        plan.env.extend([
            EnvVar::new("DOOR_PORT", PORT.to_string()),
            EnvVar::new("TOKEN", TOKEN),
            EnvVar::new("STEPS", steps),
            EnvVar::new("WAIT", wait.to_string()),
        ]);
        let options = options.with_network(Network::Door(vec![endpoint]));
        let mut reviewer = launch::launch(&plan, &self.client, &options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(60));
        // The door logs once it has answered: give its thread a moment.
        std::thread::sleep(Duration::from_millis(200));
        let log = reviewer.door_log();
        reviewer.stop().unwrap();
        assert!(output.contains("steps-done"), "{output}\n{log:?}");
        let answers = output
            .lines()
            .filter_map(|l| l.trim().strip_prefix("answer "))
            .map(|l| {
                let mut parts = l.splitn(3, ' ');
                let step = parts.next().unwrap_or_default().to_owned();
                let secs = parts.next().unwrap_or_default().parse().unwrap_or(-1.0);
                (step, secs, parts.next().unwrap_or_default().to_owned())
            })
            .collect();
        (answers, log)
    }
}

fn door_available() -> bool {
    kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR")
}

/// The door's endpoint to `host:port` over TLS, setting the daemon's key.
fn tls_endpoint(upstream: String) -> Endpoint {
    Endpoint::new(PORT, upstream)
        .over_tls()
        .with_credential(Credential::new("x-api-key", DAEMON_KEY))
}

/// The answer to `step`.
fn answer<'a>(answers: &'a [(String, f64, String)], step: &str) -> &'a (String, f64, String) {
    answers
        .iter()
        .find(|(s, _, _)| s == step)
        .unwrap_or_else(|| panic!("no answer to {step}: {answers:?}"))
}

#[test]
fn an_https_upstream_gets_the_request_over_tls_with_the_key_and_its_stream_passes_event_by_event() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let (ca, upstream) = signed_upstream();
    let endpoint = tls_endpoint(format!("localhost:{}", upstream.port));
    let options = Options::default().with_door_root(ca.der());
    let (answers, log) = world.run("ok", endpoint, options, "/v1/messages,stream", 15);
    let (_, _, got) = answer(&answers, "/v1/messages");
    assert!(got.starts_with("b'HTTP/1.1 200 OK"), "{got}");
    assert!(got.ends_with(r#"upstream got {"model":"m"}'"#), "{got}");
    let (_, _, got) = answer(&answers, "stream");
    assert!(got.contains("data: first"), "{got}");
    assert!(
        got.contains("data: released") && !got.contains("not-released"),
        "the stream was held back: {got}"
    );
    assert!(log.is_empty(), "{log:?}");
    // The upstream got each request with the daemon's key only and its own host.
    let heads = upstream.heads();
    assert_eq!(heads.len(), 3, "{heads:?}");
    for head in &heads {
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains(&format!("\r\nx-api-key: {DAEMON_KEY}\r\n")),
            "{head}"
        );
        assert!(!head.contains(TOKEN), "{head}");
        assert!(
            lower.contains(&format!("\r\nhost: localhost:{}\r\n", upstream.port)),
            "{head}"
        );
        assert_eq!(lower.matches("\r\nhost:").count(), 1, "{head}");
    }
}

/// A certificate valid for another name, or signed by a CA the door does not trust, is
/// refused: the client gets a `502` naming the fault, the door a log line, the upstream no
/// request. The bite: the same upstream, reached under the name on its certificate (or with
/// its CA added), gets the request.
#[test]
fn a_certificate_for_another_name_or_from_an_unknown_ca_is_refused_with_a_502() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let (ca, upstream) = signed_upstream();
    let with_ca = || Options::default().with_door_root(ca.der());
    // By address: the certificate names `localhost`, not 127.0.0.1.
    let by_address = tls_endpoint(format!("127.0.0.1:{}", upstream.port));
    let (answers, log) = world.run("name", by_address, with_ca(), "/v1/messages", 10);
    let (_, _, got) = answer(&answers, "/v1/messages");
    assert!(got.starts_with("b'HTTP/1.1 502 Bad Gateway"), "{got}");
    assert!(
        got.contains("TLS failed: invalid peer certificate"),
        "{got}"
    );
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(
        log[0].starts_with(&format!(
            "door port {PORT}: upstream 127.0.0.1:{} TLS failed: invalid peer certificate: ",
            upstream.port
        )) && log[0].contains("certificate not valid for name \"127.0.0.1\"")
            && log[0].ends_with("; answered 502"),
        "{log:?}"
    );
    assert!(upstream.heads().is_empty());
    // A CA the door does not trust: the system's roots only.
    let by_name = || tls_endpoint(format!("localhost:{}", upstream.port));
    let (answers, log) = world.run("ca", by_name(), Options::default(), "/v1/messages", 10);
    let (_, _, got) = answer(&answers, "/v1/messages");
    assert!(got.starts_with("b'HTTP/1.1 502 Bad Gateway"), "{got}");
    assert!(log[0].contains("UnknownIssuer"), "{log:?}");
    assert!(upstream.heads().is_empty());
    // The bite: by the name on the certificate, the CA added, the request goes through.
    let (answers, _) = world.run("bite", by_name(), with_ca(), "/v1/messages", 10);
    let (_, _, got) = answer(&answers, "/v1/messages");
    assert!(got.starts_with("b'HTTP/1.1 200 OK"), "{got}");
    assert_eq!(upstream.heads().len(), 1);
}

/// A plain-TCP listener that keeps all it is sent: what crossed the wire.
fn recorder() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&got);
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let keep = Arc::clone(&keep);
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    keep.lock().unwrap().extend_from_slice(&buf[..n]);
                    if keep.lock().unwrap().windows(4).any(|w| w == b"\r\n\r\n") {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                    }
                }
            });
        }
    });
    (port, got)
}

/// A TLS endpoint whose upstream does not speak TLS gets only a handshake: the key never
/// crosses the wire in the clear, and the client gets a `502`. The bite: the same endpoint
/// without TLS sends the key in the clear.
#[test]
fn over_tls_the_key_never_crosses_the_wire_in_the_clear() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let (port, wire) = recorder();
    let endpoint = tls_endpoint(format!("localhost:{port}"));
    let (answers, log) = world.run("clear", endpoint, Options::default(), "/v1/messages", 15);
    let (_, _, got) = answer(&answers, "/v1/messages");
    assert!(got.starts_with("b'HTTP/1.1 502 Bad Gateway"), "{got}");
    assert!(log[0].contains("TLS failed"), "{log:?}");
    let seen = String::from_utf8_lossy(&wire.lock().unwrap()).into_owned();
    assert!(!seen.is_empty());
    assert!(
        !seen.contains(DAEMON_KEY) && !seen.contains("/v1/messages"),
        "{seen}"
    );
    let plain = Endpoint::new(PORT, format!("localhost:{port}"))
        .with_credential(Credential::new("x-api-key", DAEMON_KEY));
    wire.lock().unwrap().clear();
    let (answers, _) = world.run("plain", plain, Options::default(), "/v1/messages", 15);
    assert!(answer(&answers, "/v1/messages").2.contains("200 OK"));
    let seen = String::from_utf8_lossy(&wire.lock().unwrap()).into_owned();
    assert!(seen.contains(DAEMON_KEY), "{seen}");
}

/// An upstream that accepts a request and never answers: over TLS and in plain HTTP, the
/// client gets a `504` once the bound has passed (1 s here), and the door a log line. The
/// bite: under the default bound (five minutes) the client's own 4 s pass with no answer.
#[test]
fn an_upstream_that_never_answers_gets_the_client_a_504_within_the_bound() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let (ca, upstream) = signed_upstream();
    let (plain_port, _) = recorder_silent();
    let bounded = || {
        Options::default()
            .with_door_root(ca.der())
            .with_door_answer_timeout(Duration::from_secs(1))
    };
    for (name, endpoint) in [
        ("tls", tls_endpoint(format!("localhost:{}", upstream.port))),
        (
            "plain",
            Endpoint::new(PORT, format!("127.0.0.1:{plain_port}")),
        ),
    ] {
        let (answers, log) = world.run(name, endpoint.clone(), bounded(), "/slow", 10);
        let (_, secs, got) = answer(&answers, "/slow");
        assert!(
            got.starts_with("b'HTTP/1.1 504 Gateway Timeout"),
            "{name}: {got}"
        );
        assert!(got.contains("did not answer within 1 s"), "{name}: {got}");
        assert!((1.0..4.0).contains(secs), "{name}: {secs}");
        assert!(
            log.iter()
                .any(|l| l.starts_with(&format!("door port {PORT}: upstream "))
                    && l.ends_with("did not answer within 1 s; answered 504")),
            "{name}: {log:?}"
        );
        // The bite: the default bound is far longer than the client waits.
        let options = Options::default().with_door_root(ca.der());
        let (answers, _) = world.run(&format!("{name}-default"), endpoint, options, "/slow", 4);
        let (_, _, got) = answer(&answers, "/slow");
        assert!(got.starts_with("error TimeoutError"), "{name}: {got}");
    }
}

/// A plain-TCP listener that reads what it is sent and never answers; its port.
fn recorder_silent() -> (u16, TcpListener) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepting = listener.try_clone().unwrap();
    std::thread::spawn(move || {
        for mut s in accepting.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
                while s.read(&mut buf).is_ok_and(|n| n > 0) {}
                drop::<TcpStream>(s);
            });
        }
    });
    (port, listener)
}

/// A dry run names a TLS endpoint as such, and the credential's header only.
#[test]
fn a_dry_run_names_the_tls_upstream() {
    let world = World::new();
    let launch_dir = world.root.path().join("dry");
    let plan = terminal_plan(kcap_mcp_registry::clients::Client::Codex, &launch_dir);
    let options = Options::default().with_network(Network::Door(vec![tls_endpoint(
        "api.anthropic.com:443".into(),
    )]));
    let steps = launch::steps(&plan, &world.client, &options).join("\n");
    assert!(
        steps.contains(&format!(
            "door: 127.0.0.1:{PORT} to api.anthropic.com:443 over TLS (sets the daemon's \
             x-api-key on each request)"
        )),
        "{steps}"
    );
    assert!(!steps.contains(DAEMON_KEY));
}

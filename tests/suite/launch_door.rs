//! The reviewer's network door (`launch::door`), from inside a reviewer: a stand-in client
//! (a shell script in a pseudo-terminal, as Codex runs, starting a Python probe) tries each
//! way out and prints what it got. With the door, a connection to another local port of the
//! host, to another loopback address, a query to a name server on the host's loopback and a
//! `setns` back into the host's network fail, while an HTTP request to the door's port
//! reaches a stand-in upstream on the host and its answer, streamed too, comes back. The same
//! launch with an open network shows every attempt succeeding, so the test bites.

use crate::common;

use std::collections::BTreeMap;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::carry::{kernel_gives, probe_answers, terminal_plan, until_exit};
use common::door::Upstream;
use common::model_api::ModelApi;
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::plan::{
    DoorEndpoint, DoorPlan, DoorScheme, EnvVar, LaunchPlan, Sandbox,
};
use kcap_mcp_registry::launch::door::{self, Credential, Endpoint, Network};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options};
use tempfile::TempDir;

/// The door's ports inside the reviewer: fixed, as each reviewer has a namespace of its own.
const MODEL_PORT: u16 = 8080;
const DOWN_PORT: u16 = 8081;

/// The probe the stand-in runs: `name=yes` when it got what it tried, `name=no` otherwise.
const PROBE: &str = r#"
import ctypes, os, socket, sys, time
env = os.environ
def connect(host, port):
    socket.create_connection((host, int(port)), timeout=3).close()
    return True
def dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x06models\x07example\x00\x00\x01\x00\x01"
    s.sendto(query, ("127.0.0.1", int(env["DNS_PORT"])))
    return s.recv(512)[:2] == b"\x12\x34"
def escape():
    # Into the network of the executor (the test's process), then to the host's listener.
    try:
        fd = os.open(f"/proc/{env['EXECUTOR_PID']}/ns/net", os.O_RDONLY)
        if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:
            print(f"setns-errno={ctypes.get_errno()}", flush=True)
    except OSError as e:
        print(f"setns-error={e!r}", flush=True)
    return connect("127.0.0.1", env["HOST_PORT"])
def request(base, path):
    host, port = base.split(":")
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nhost: {base}\r\nconnection: close\r\n\r\n".encode())
    return s
def read_all(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
def hello():
    data = read_all(request(env["MODEL"], "/hello"))
    return data.startswith(b"HTTP/1.1 200") and data.endswith(b"hello through the door")
def stream():
    # The upstream sends its first event, then waits for /release before it sends the
    # second: a door that held the stream back until its end would show `not-released`.
    s = request(env["MODEL"], "/stream")
    data = b""
    while b"event: one" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return False
        data += chunk
    read_all(request(env["MODEL"], "/release"))
    data += read_all(s)
    return b"data: released" in data and b"not-released" not in data
def down():
    data = read_all(request(env["DOWN"], "/v1/messages"))
    return data.startswith(b"HTTP/1.1 502")
def outside(host, port):
    # A host outside (the documentation ranges): refused at once, not after the timeout.
    started = time.monotonic()
    try:
        socket.create_connection((host, port), timeout=5).close()
        return True
    except OSError as e:
        print(f"outside-{host}-errno={e.errno} after={time.monotonic() - started:.1f}", flush=True)
        raise
def outside_lookup():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.connect(("198.51.100.53", 53))
    s.send(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x05exfil\x07example\x00\x00\x01\x00\x01")
    return len(s.recv(512)) > 0
def loopback_lookup():
    # To a resolver on the loopback, as systemd-resolved's 127.0.0.53.
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x08loopback\x07example\x00\x00\x01\x00\x01", ("127.0.0.53", 53))
    data = s.recv(512)
    print(f"loopback-rcode={data[3] & 15}", flush=True)
    return data[3] & 15 == 0
if "OUTSIDE" in env:
    probe("outside_lookup_lo", loopback_lookup)
    probe("outside_v4", lambda: outside("203.0.113.7", 443))
    probe("outside_v6", lambda: outside("2001:db8::7", 80))
    probe("outside_lookup", outside_lookup)
    print("probes-done", flush=True)
    sys.exit(0)
probe("host_port", lambda: connect("127.0.0.1", env["HOST_PORT"]))
probe("other_address", lambda: connect("127.0.0.2", env["OTHER_PORT"]))
probe("name_server", dns)
probe("escape", escape)
probe("door_hello", hello)
probe("door_stream", stream)
if "DOWN" in env:
    probe("down_upstream", down)
print("probes-done", flush=True)
"#;

/// The machine around a reviewer: a listener on the host's 127.0.0.1 and one on
/// 127.0.0.2, a name server on the host's loopback, a stand-in model API, and a port
/// nothing listens on.
struct World {
    root: TempDir,
    host_port: u16,
    other_port: u16,
    dns_port: u16,
    upstream: Upstream,
    down_port: u16,
    _listeners: Vec<TcpListener>,
    _down: std::os::fd::OwnedFd,
}

impl World {
    fn new() -> World {
        let root = tempfile::Builder::new()
            .prefix("kcap-door-")
            .tempdir()
            .unwrap();
        for dir in ["tree", "bin", "launches"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        std::fs::write(
            root.path().join("tree/probe.py"),
            common::door::python_probe(PROBE),
        )
        .unwrap();
        let host = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.2:0").unwrap();
        // Held: bound, not listening, so that no other test's socket takes the port
        // meanwhile (seen once under 8 test threads: the probe of the down upstream got an
        // answer); a connection to it is refused.
        let down = rustix::net::socket(
            rustix::net::AddressFamily::INET,
            rustix::net::SocketType::STREAM,
            None,
        )
        .unwrap();
        rustix::net::bind(&down, &std::net::SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        let down_port = std::net::SocketAddr::try_from(rustix::net::getsockname(&down).unwrap())
            .unwrap()
            .port();
        World {
            host_port: host.local_addr().unwrap().port(),
            other_port: other.local_addr().unwrap().port(),
            dns_port: name_server(),
            upstream: Upstream::plain(),
            down_port,
            root,
            _listeners: vec![host, other],
            _down: down,
        }
    }

    fn at(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
    }

    fn client(&self) -> PathBuf {
        let probe = self.at("tree/probe.py");
        sh_script(
            &self.at("bin"),
            "reviewer",
            &format!("exec /usr/bin/python3 {}", probe.display()),
        )
    }

    /// The plan of a stand-in whose model API is at `model` (and the down upstream at
    /// `down`, when given).
    fn plan(&self, launch_dir: &Path, model: &str, down: Option<&str>) -> LaunchPlan {
        let mut env = vec![
            EnvVar::new("HOME", format!("{}/home", launch_dir.display())),
            EnvVar::new("PATH", "/usr/bin:/bin"),
            EnvVar::new("MODEL", model),
            EnvVar::new("HOST_PORT", self.host_port.to_string()),
            EnvVar::new("OTHER_PORT", self.other_port.to_string()),
            EnvVar::new("DNS_PORT", self.dns_port.to_string()),
            EnvVar::new("EXECUTOR_PID", std::process::id().to_string()),
        ];
        env.extend(down.map(|d| EnvVar::new("DOWN", d)));
        LaunchPlan {
            cwd: Some(self.at("tree").display().to_string()),
            env,
            sandbox: Sandbox::new(
                &launch_dir.display().to_string(),
                Some(&self.at("tree").display().to_string()),
            ),
            ..terminal_plan(kcap_mcp_registry::clients::Client::Codex, launch_dir)
        }
    }

    /// The door of this world: the model API on [`MODEL_PORT`], the port nothing listens
    /// on on [`DOWN_PORT`].
    fn door(&self) -> Network {
        Network::Door(vec![
            Endpoint::new(MODEL_PORT, self.upstream.addr.clone()),
            Endpoint::new(DOWN_PORT, format!("127.0.0.1:{}", self.down_port)),
        ])
    }

    /// Launches the stand-in with `options` and returns each probe's answer and the door's
    /// log.
    fn probe(
        &self,
        options: &Options,
        name: &str,
    ) -> (BTreeMap<String, bool>, Vec<String>, String) {
        let launch_dir = self.at("launches").join(name);
        let plan = match options.network {
            Network::Open => self.plan(&launch_dir, &self.upstream.addr, None),
            _ => self.plan(
                &launch_dir,
                &format!("127.0.0.1:{MODEL_PORT}"),
                Some(&format!("127.0.0.1:{DOWN_PORT}")),
            ),
        };
        self.run(&plan, options)
    }

    /// Carries `plan` out with `options`; returns each probe's answer, the door's log and
    /// the output.
    fn run(
        &self,
        plan: &LaunchPlan,
        options: &Options,
    ) -> (BTreeMap<String, bool>, Vec<String>, String) {
        let mut reviewer = launch::launch(plan, &self.client(), options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(60));
        let log = reviewer.door_log();
        reviewer.stop().unwrap();
        assert!(output.contains("probes-done"), "{output}");
        let answers = probe_answers(&output);
        (answers, log, output)
    }
}

/// A stand-in name server on the host's 127.0.0.1 (as systemd-resolved's 127.0.0.53 is):
/// answers each query with its id and `QR` set. Returns its port.
fn name_server() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            if n >= 12 {
                buf[2] |= 0x80;
                let _ = socket.send_to(&buf[..n], from);
            }
        }
    });
    port
}

fn door_available() -> bool {
    kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR")
}

const WAYS_OUT: &[&str] = &["host_port", "other_address", "name_server", "escape"];
const THROUGH_THE_DOOR: &[&str] = &["door_hello", "door_stream"];

#[test]
fn only_the_doors_endpoints_are_reached_and_without_the_door_every_way_out_is_open() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let door = Options::default().with_network(world.door());
    let (shut, log, output) = world.probe(&door, "door");
    let (open, _, _) = world.probe(&Options::default(), "open");
    for way in WAYS_OUT {
        assert_eq!(
            shut.get(*way),
            Some(&false),
            "{way} with the door: {output}"
        );
        assert_eq!(
            open.get(*way),
            Some(&true),
            "{way} without the door: {open:?}"
        );
    }
    for work in THROUGH_THE_DOOR {
        assert_eq!(
            shut.get(*work),
            Some(&true),
            "{work} with the door: {output}"
        );
        assert_eq!(
            open.get(*work),
            Some(&true),
            "{work} without the door: {open:?}"
        );
    }
    // The upstream that is down: the client got a 502, and the door said why.
    assert_eq!(shut.get("down_upstream"), Some(&true), "{output}");
    let down = format!(
        "door port {DOWN_PORT}: upstream 127.0.0.1:{}",
        world.down_port
    );
    assert!(
        log.iter().any(|l| l.starts_with(&down)
            && l.contains("cannot be reached")
            && l.ends_with("answered 502")),
        "{log:?}"
    );
    // The requests came through the door, each once per launch.
    let heads = world.upstream.heads();
    let through = heads
        .iter()
        .filter(|h| h.contains(&format!("host: 127.0.0.1:{MODEL_PORT}")))
        .count();
    assert_eq!(through, 3, "{heads:?}");
}

/// A way out past the door (a connection to a host outside, over IPv4 and IPv6, a name
/// lookup from a name server outside) fails at once, and the door's log names each: the
/// namespace routes every address but the loopback to the door's tun device, which answers
/// ICMP "administratively prohibited" (`launch::door`'s `outside`). Without that device the
/// attempts fail too (no route), but nothing names them: the log assertions bite.
#[test]
fn every_way_out_past_the_door_fails_at_once_and_the_door_logs_it_naming_it() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let launch_dir = world.at("launches").join("outside");
    let mut plan = world.plan(&launch_dir, &format!("127.0.0.1:{MODEL_PORT}"), None);
    plan.env.push(EnvVar::new("OUTSIDE", "1"));
    let door = Options::default().with_network(world.door());
    let (answers, log, output) = world.run(&plan, &door);
    for way in [
        "outside_v4",
        "outside_v6",
        "outside_lookup",
        "outside_lookup_lo",
    ] {
        assert_eq!(answers.get(way), Some(&false), "{way}: {output}");
    }
    // At once: EHOSTUNREACH (113) over IPv4, EACCES (13) over IPv6, well within the timeout.
    assert!(
        output.contains("outside-203.0.113.7-errno=113 after=0.0"),
        "{output}"
    );
    assert!(
        output.contains("outside-2001:db8::7-errno=13 after=0.0"),
        "{output}"
    );
    for tried in [
        "a TCP connection to 203.0.113.7:443",
        "a TCP connection to [2001:db8::7]:80",
        "a name lookup of \"exfil.example\" (UDP to 198.51.100.53:53)",
    ] {
        let line = format!(
            "refused: {tried} from the reviewer (only the door's endpoints are reached); \
             answered ICMP prohibited"
        );
        assert_eq!(
            log.iter().filter(|l| **l == line).count(),
            1,
            "{line}\nnot once in {log:?}"
        );
    }
    // A resolver on the reviewer's own loopback: the door answers REFUSED on port 53 there.
    assert!(output.contains("loopback-rcode=5"), "{output}");
    let line = "refused: a name lookup of \"loopback.example\" (UDP to port 53 of the \
                reviewer's own loopback) from the reviewer (only the door's endpoints are \
                reached); answered REFUSED";
    assert_eq!(
        log.iter().filter(|l| *l == line).count(),
        1,
        "{line}\nnot once in {log:?}"
    );
}

#[test]
fn the_door_and_the_sandbox_together() {
    if !door_available() || sandbox::missing().is_some() {
        return;
    }
    let world = World::new();
    let options = Options::default()
        .with_network(world.door())
        .with_confinement(Confinement::Required);
    let (shut, _, output) = world.probe(&options, "both");
    for way in WAYS_OUT {
        assert_eq!(shut.get(*way), Some(&false), "{way}: {output}");
    }
    for work in THROUGH_THE_DOOR.iter().chain(&["down_upstream"]) {
        assert_eq!(shut.get(*work), Some(&true), "{work}: {output}");
    }
}

#[test]
fn two_reviewers_use_the_same_door_port_each_to_its_own_upstream() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let second = Upstream::plain();
    let client = sh_script(
        &world.at("bin"),
        "hello",
        &format!(
            "exec /usr/bin/python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\", \
             {MODEL_PORT})); s.sendall(b\"GET /hello HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n\"); \
             print(s.recv(4096).decode().split(chr(10))[0]); import time; time.sleep(3)'"
        ),
    );
    let mut reviewers = Vec::new();
    for (name, upstream) in [("a", &world.upstream), ("b", &second)] {
        let launch_dir = world.at("launches").join(name);
        let plan = world.plan(&launch_dir, "", None);
        let network = Network::Door(vec![Endpoint::new(MODEL_PORT, upstream.addr.clone())]);
        let options = Options::default().with_network(network);
        reviewers.push(launch::launch(&plan, &client, &options).unwrap());
    }
    for mut reviewer in reviewers {
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
        assert!(output.contains("HTTP/1.1 200 OK"), "{output}");
        reviewer.stop().unwrap();
    }
    for upstream in [&world.upstream, &second] {
        assert_eq!(upstream.heads().len(), 1);
    }
}

#[test]
fn a_dry_run_names_the_door() {
    let world = World::new();
    let launch_dir = world.at("launches/dry");
    let plan = world.plan(&launch_dir, "", None);
    let options = Options::default().with_network(world.door());
    let steps = launch::steps(&plan, &world.client(), &options);
    let line = format!(
        "only way out is the door: 127.0.0.1:{MODEL_PORT} to {}, 127.0.0.1:{DOWN_PORT} to \
         127.0.0.1:{}",
        world.upstream.addr, world.down_port
    );
    assert!(steps.iter().any(|s| s.ends_with(&line)), "{steps:#?}");
    // A credential: its header named, its value shown nowhere.
    let endpoint = Endpoint::new(MODEL_PORT, "127.0.0.1:9")
        .with_credential(Credential::new("x-api-key", DAEMON_KEY));
    let options = Options::default().with_network(Network::Door(vec![endpoint]));
    let steps = launch::steps(&plan, &world.client(), &options).join("\n");
    assert!(
        steps.contains(&format!(
            "door: 127.0.0.1:{MODEL_PORT} to 127.0.0.1:9 (sets the daemon's x-api-key on each request)"
        )),
        "{steps}"
    );
    assert!(!steps.contains(DAEMON_KEY));
    assert!(!format!("{options:?}").contains(DAEMON_KEY));
}

/// A dummy key standing for the daemon's model key.
const DAEMON_KEY: &str = "sk-ant-daemon-key-kcap-door-test-0123456789";
/// The per-launch token the client holds in its place.
const TOKEN: &str = "kcap-launch-token-5f1e";

/// A client of the model API through the door: prints its environment, then sends two
/// requests on one connection with its token, the second with a chunked body.
const MODEL_CLIENT: &str = r#"
import http.client, os
for name, value in sorted(os.environ.items()):
    print(f"env {name}={value}", flush=True)
conn = http.client.HTTPConnection("127.0.0.1", int(os.environ["MODEL_PORT"]), timeout=10)
key = {"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"}
conn.request("POST", "/v1/messages", body=b'{"model":"m","n":1}', headers=key)
print("first", conn.getresponse().read().decode(), flush=True)
chunks = iter([b'{"model":"m",', b'"n":2}'])
conn.request("POST", "/v1/messages", body=chunks, headers=key, encode_chunked=True)
print("second", conn.getresponse().read().decode(), flush=True)
print("requests-done", flush=True)
"#;

#[test]
fn the_key_stays_outside_the_door_sets_it_on_each_request() {
    if !door_available() {
        return;
    }
    let world = World::new();
    std::fs::write(world.at("tree/model_client.py"), MODEL_CLIENT).unwrap();
    let client = sh_script(
        &world.at("bin"),
        "model-client",
        &format!(
            "exec /usr/bin/python3 {}",
            world.at("tree/model_client.py").display()
        ),
    );
    let run = |name: &str, credential: Option<Credential>| {
        let api = ModelApi::start();
        let mut endpoint = Endpoint::new(MODEL_PORT, api.url.trim_start_matches("http://"));
        endpoint.credential = credential;
        let launch_dir = world.at("launches").join(name);
        let mut plan = world.plan(&launch_dir, "", None);
        plan.env.extend([
            EnvVar::new("ANTHROPIC_API_KEY", TOKEN),
            EnvVar::new("MODEL_PORT", MODEL_PORT.to_string()),
        ]);
        let options = Options::default().with_network(Network::Door(vec![endpoint]));
        let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
        // No file of the launch directory holds the key.
        let mut files = vec![launch_dir.clone()];
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            } else {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(DAEMON_KEY),
                    "{}",
                    path.display()
                );
            }
        }
        let log = reviewer.door_log();
        reviewer.stop().unwrap();
        assert!(output.contains("requests-done"), "{output}\n{log:?}");
        (output, api.requests())
    };

    let (output, requests) = run("key", Some(Credential::new("x-api-key", DAEMON_KEY)));
    // The client's environment holds the token, never the key.
    assert!(
        output.contains(&format!("env ANTHROPIC_API_KEY={TOKEN}")),
        "{output}"
    );
    assert!(!output.contains(DAEMON_KEY), "{output}");
    // The upstream got both requests whole, each with the daemon's key only.
    let bodies: Vec<&str> = requests.iter().map(|r| r.body.as_str()).collect();
    assert_eq!(bodies, [r#"{"model":"m","n":1}"#, r#"{"model":"m","n":2}"#]);
    for request in &requests {
        assert_eq!(request.header("x-api-key"), [DAEMON_KEY], "{request:?}");
        assert_eq!(request.path, "/v1/messages");
    }
    // Both answers came back to the client.
    assert_eq!(
        output.matches("stand-in model API: no model here").count(),
        2
    );

    // Without the credential the door passes the token on as the client sent it: the key
    // the upstream saw above was the door's.
    let (_, requests) = run("token", None);
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.header("x-api-key"), [TOKEN], "{request:?}");
    }
}

#[test]
fn a_request_that_could_smuggle_another_past_the_key_is_refused_with_a_log_line() {
    if !door_available() {
        return;
    }
    let world = World::new();
    // Framed by content-length, the body holds a second request the upstream would take
    // as one, without the door's key; framed as chunked, it would not.
    let client = sh_script(
        &world.at("bin"),
        "smuggler",
        &format!(
            "exec /usr/bin/python3 -c 'import socket; s = socket.create_connection((\"127.0.0.1\", \
             {MODEL_PORT})); s.sendall(b\"POST / HTTP/1.1\\r\\ncontent-length: 40\\r\\n\
             transfer-encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\nGET /hello HTTP/1.1\\r\\nx: y\\r\\n\\r\\n\"); \
             print(\"answer=\" + repr(s.recv(4096)))'"
        ),
    );
    let launch_dir = world.at("launches/smuggle");
    let plan = world.plan(&launch_dir, "", None);
    let endpoint = Endpoint::new(MODEL_PORT, world.upstream.addr.clone())
        .with_credential(Credential::new("x-api-key", DAEMON_KEY));
    let options = Options::default().with_network(Network::Door(vec![endpoint]));
    let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
    // The door logs the refusal once it has answered and drained the connection: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while reviewer.door_log().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = reviewer.door_log();
    reviewer.stop().unwrap();
    assert!(
        output.contains("answer=b'HTTP/1.1 400 Bad Request\\r\\n"),
        "{output}"
    );
    assert!(
        output.contains("kcap door: refused the request: it has both content-length and"),
        "{output}"
    );
    assert_eq!(
        log,
        [format!(
            "door port {MODEL_PORT}: refused a request: it has both content-length and \
             transfer-encoding; closed the connection"
        )]
    );
    assert!(world.upstream.heads().is_empty());
}

/// The plan's door (`LaunchPlan::door`, which `Client::plan` computes for a launch behind
/// the door) is the network the executor gives, with no option set: the ways out are shut
/// and the door's endpoints reached. A plan that names a door carried out with options that
/// name another is refused before anything is created.
#[test]
fn the_plans_door_is_the_network_the_executor_gives() {
    if !door_available() {
        return;
    }
    let world = World::new();
    let launch_dir = world.at("launches").join("plan-door");
    let mut plan = world.plan(
        &launch_dir,
        &format!("127.0.0.1:{MODEL_PORT}"),
        Some(&format!("127.0.0.1:{DOWN_PORT}")),
    );
    let endpoint = |port, upstream: String| DoorEndpoint {
        port,
        upstream,
        scheme: DoorScheme::Http,
        serves: "a test".into(),
        credential: None,
    };
    plan.door = Some(DoorPlan {
        endpoints: vec![
            endpoint(MODEL_PORT, world.upstream.addr.clone()),
            endpoint(DOWN_PORT, format!("127.0.0.1:{}", world.down_port)),
        ],
    });
    let (shut, _, output) = world.run(&plan, &Options::default());
    for way in WAYS_OUT {
        assert_eq!(shut.get(*way), Some(&false), "{way}: {output}");
    }
    for work in THROUGH_THE_DOOR {
        assert_eq!(shut.get(*work), Some(&true), "{work}: {output}");
    }
    let twice = Options::default().with_network(world.door());
    let err = launch::launch(&plan, &world.client(), &twice).unwrap_err();
    assert!(
        err.to_string()
            .contains("is named by the plan and by the executor's options"),
        "{err}"
    );
    assert!(!launch_dir.exists());
    let steps = launch::steps(&plan, &world.client(), &Options::default()).join("\n");
    assert!(
        steps.contains(&format!(
            "only way out is the door: 127.0.0.1:{MODEL_PORT} to {}",
            world.upstream.addr
        )),
        "{steps}"
    );
}

/// A client that stalls its upload: `stall` sends a head and 10 of its 64 bytes of body,
/// then waits; `trickle` sends its 100000 bytes of body one at a time, every 0.1 s. Each
/// stops at the first answer, or after 15 s (the test's own guard: the door of main holds
/// both for ever), and prints `answer <name> <seconds> <first bytes, Python repr>`.
const STALLER: &str = r#"
import os, select, socket, time
def upload(name, length, first, every):
    s = socket.create_connection(("127.0.0.1", int(os.environ["MODEL_PORT"])), timeout=15)
    start = time.monotonic()
    s.sendall(f"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: {length}\r\n\r\n".encode() + first)
    data = b"none"
    while time.monotonic() - start < 15:
        if select.select([s], [], [], every)[0]:
            data = s.recv(4096)
            break
        if every < 1:
            try:
                s.send(b"x")
            except OSError as e:
                data = repr(e).encode()
                break
    print(f"answer {name} {time.monotonic() - start:.2f} {data!r}", flush=True)
upload("stall", 64, b"0123456789", 15)
upload("trickle", 100000, b"", 0.1)
print("uploads-done", flush=True)
"#;

/// Issue 32, bad clients: a client that never finishes sending a request's body, or sends
/// it a byte at a time, gets a `408 Request Timeout` once the door's bound
/// (`Settings::request_timeout`, 1 s here) is over, with a log line, and frees the
/// connection; the upstream never gets the request whole. Without the bound (the door of
/// main) each waits out the client's 15 s guard with no answer.
#[test]
fn a_client_that_stalls_its_upload_gets_a_408_within_the_bound() {
    if !door_available() {
        return;
    }
    let world = World::new();
    std::fs::write(world.at("tree/staller.py"), STALLER).unwrap();
    let script = format!(
        "exec /usr/bin/python3 {}",
        world.at("tree/staller.py").display()
    );
    let client = sh_script(&world.at("bin"), "staller", &script);
    let mut plan = world.plan(&world.at("launches/stall"), "", None);
    plan.env
        .push(EnvVar::new("MODEL_PORT", MODEL_PORT.to_string()));
    let endpoint = Endpoint::new(MODEL_PORT, world.upstream.addr.clone())
        .with_credential(Credential::new("x-api-key", DAEMON_KEY));
    let options = Options::default()
        .with_network(Network::Door(vec![endpoint]))
        .with_door_request_timeout(Duration::from_secs(1));
    let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(60));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while reviewer.door_log().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = reviewer.door_log();
    reviewer.stop().unwrap();
    assert!(output.contains("uploads-done"), "{output}");
    for name in ["stall", "trickle"] {
        let line = output
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("answer {name} ")))
            .unwrap_or_else(|| panic!("{name}: {output}"));
        let (secs, answer) = line.split_once(' ').unwrap();
        let secs: f64 = secs.parse().unwrap();
        assert!(
            answer.starts_with("b'HTTP/1.1 408 Request Timeout\\r\\n")
                && answer.contains("kcap door: the request did not arrive whole within 1 s"),
            "{name}: {answer} after {secs} s\n{log:?}"
        );
        assert!((0.9..5.0).contains(&secs), "{name}: after {secs} s");
    }
    let line = format!(
        "door port {MODEL_PORT}: a request did not arrive whole within 1 s; answered 408 and \
         closed the connection"
    );
    assert_eq!(log, [line.clone(), line]);
    assert!(
        world.upstream.heads().is_empty(),
        "{:?}",
        world.upstream.heads()
    );
}

//! What a reviewer can spend through the network door (issue 32, red team of 2026-12-05):
//! upstream connections, requests carrying the daemon's key, and the door's log.
//!
//! From inside a reviewer (a stand-in client: a Python script in a pseudo-terminal):
//! - connections that send nothing, or only what the door refuses, cost the upstream no
//!   connection: the door connects once a request is accepted (on an endpoint it only
//!   pipes, once a byte came). The bite, run once: the door of main connected on accept, and
//!   the stand-in upstream counted a connection for each.
//! - requests past the launch's budget of keyed requests (`Settings::keyed_requests`) get a
//!   `429` naming the door's budget, a log line each, and never reach the upstream. The bite,
//!   run once: without the budget's check every request reached the stand-in model API.
//! - requests that come faster than the launch's rate (`Settings::keyed_rate`) wait for
//!   their turn, and all reach the upstream. The bite, run once: without the rate all came at
//!   once.
//! - a flood of refusals keeps the first refusal in the door's log, and a line counts the
//!   lines dropped. The bite, run once: the log of main (its last 256 lines) lost the first
//!   refusal and said nothing of the lines it dropped.
//! - the command line sets both (`launch --door-keyed-requests`, `--door-keyed-burst`,
//!   `--door-keyed-interval-ms`): a hold and the refusals, printed as `door <line>`. The bite,
//!   run once per flag: a flag not handed to `Options`.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::carry::{kernel_gives, terminal_plan, until_exit};
use common::door::KcapServer;
use common::model_api::ModelApi;
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan, Sandbox};
use kcap_mcp_registry::launch::door::{self, Credential, Endpoint, Network};
use kcap_mcp_registry::launch::{self, Options, Reviewer};

/// The door's ports inside the reviewer: one whose requests the door reads and keys, one it
/// only pipes.
const KEYED: u16 = 8080;
const PIPED: u16 = 8081;

/// The stand-in client; `MODE` chooses what it does and it prints what it got.
/// - `storm`: 20 connections to each port that send nothing (held open together for 1 s,
///   then closed), 20 to the keyed port that send a line the door refuses, then one request
///   the door accepts; prints `garbage <the answers' first bytes>` and `valid <…>`.
/// - `budget`: 8 requests to the keyed port through one `http.client` connection (it opens
///   another when an answer closes its connection); prints `statuses [...]` and, for the
///   first `429`, `429 <body> <x-should-retry>`.
/// - `rate`: 8 requests to the keyed port through one connection; prints `times <status>@<the
///   seconds from the first request's start to each answer's end> …`.
/// - `flood`: one request that could smuggle another (refused), then 600 lines the door
///   refuses, each on a connection of its own; prints `flooded`.
const CLIENT: &str = r#"
import http.client, os, socket, time
keyed, piped, mode = int(os.environ["KEYED"]), int(os.environ["PIPED"]), os.environ["MODE"]
def conn(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)
def read_all(s):
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except OSError:
            return data
        if not chunk:
            return data
        data += chunk
def refused(line):
    s = conn(keyed)
    s.sendall(line)
    answer = read_all(s)
    s.close()
    return answer
if mode == "storm":
    held = [conn(keyed) for _ in range(20)] + [conn(piped) for _ in range(20)]
    time.sleep(1)
    for s in held:
        s.close()
    answers = {refused(b"GARBAGE\r\n\r\n")[:24] for _ in range(20)}
    print("garbage", sorted(answers), flush=True)
    s = conn(keyed)
    s.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
    print("valid", read_all(s)[:15], flush=True)
elif mode == "budget":
    c = http.client.HTTPConnection("127.0.0.1", keyed, timeout=10)
    statuses = []
    for i in range(8):
        try:
            c.request("POST", "/v1/messages", body=f'{{"n":{i}}}', headers={"x-api-key": "token"})
            r = c.getresponse()
            body = r.read().decode()
        except Exception as e:
            statuses.append(type(e).__name__)
            c.close()
            continue
        statuses.append(r.status)
        if r.status == 429 and statuses.count(429) == 1:
            print("429", repr(body), r.getheader("x-should-retry"), flush=True)
    print("statuses", statuses, flush=True)
elif mode == "rate":
    c = http.client.HTTPConnection("127.0.0.1", keyed, timeout=10)
    start, times = time.monotonic(), []
    for i in range(8):
        c.request("POST", "/v1/messages", body=f'{{"n":{i}}}', headers={"x-api-key": "token"})
        r = c.getresponse()
        r.read()
        times.append(f"{r.status}@{time.monotonic() - start:.2f}")
    print("times", " ".join(times), flush=True)
elif mode == "flood":
    refused(b"POST / HTTP/1.1\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n")
    for _ in range(600):
        refused(b"GARBAGE\r\n\r\n")
    print("flooded", flush=True)
print("client-done", flush=True)
"#;

fn world() -> tempfile::TempDir {
    let root = tempfile::Builder::new()
        .prefix("kcap-door-budget-")
        .tempdir()
        .unwrap();
    for dir in ["tree", "bin", "launches"] {
        std::fs::create_dir(root.path().join(dir)).unwrap();
    }
    std::fs::write(root.path().join("tree/client.py"), CLIENT).unwrap();
    root
}

fn plan(root: &Path, mode: &str) -> LaunchPlan {
    let launch_dir = root.join("launches").join(mode);
    LaunchPlan {
        cwd: Some(root.join("tree").display().to_string()),
        env: vec![
            EnvVar::new("HOME", format!("{}/home", launch_dir.display())),
            EnvVar::new("PATH", "/usr/bin:/bin"),
            EnvVar::new("KEYED", KEYED.to_string()),
            EnvVar::new("PIPED", PIPED.to_string()),
            EnvVar::new("MODE", mode),
        ],
        sandbox: Sandbox::new(
            &launch_dir.display().to_string(),
            Some(&root.join("tree").display().to_string()),
        ),
        ..terminal_plan(kcap_mcp_registry::clients::Client::Codex, &launch_dir)
    }
}

/// Runs the stand-in client in `mode` behind a door of `endpoints` under `options`, until it
/// exits; its output, and the door's log once `settled` holds of it (or 10 s passed).
fn run(
    root: &Path,
    mode: &str,
    endpoints: Vec<Endpoint>,
    options: Options,
    settled: impl Fn(&[String]) -> bool,
) -> (String, Vec<String>) {
    let client = sh_script(
        &root.join("bin"),
        "client",
        &format!(
            "exec /usr/bin/python3 {}",
            root.join("tree/client.py").display()
        ),
    );
    let options = options.with_network(Network::Door(endpoints));
    let mut reviewer: Reviewer = launch::launch(&plan(root, mode), &client, &options).unwrap();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(90));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !settled(&reviewer.door_log()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = reviewer.door_log();
    reviewer.stop().unwrap();
    assert!(output.contains("client-done"), "{mode}: {output}\n{log:?}");
    (output, log)
}

fn keyed(upstream: &str) -> Endpoint {
    Endpoint::new(KEYED, upstream).with_credential(Credential::new("x-api-key", "daemon-key"))
}

/// Red team (b): a connect storm from inside the reviewer. Connections that send nothing
/// (to a keyed port and to a piped one) and requests the door refuses open no connection to
/// the upstream; the one request the door accepts opens one.
#[test]
fn connections_that_send_nothing_or_what_the_door_refuses_open_no_upstream_connection() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    let upstream = KcapServer::start();
    let addr = upstream.url.trim_start_matches("http://").to_owned();
    let endpoints = vec![keyed(&addr), Endpoint::new(PIPED, addr.clone())];
    let (output, log) = run(root.path(), "storm", endpoints, Options::default(), |log| {
        log.len() >= 20
    });
    assert!(
        output.contains("garbage [b'HTTP/1.1 400 Bad Request']"),
        "{output}"
    );
    assert!(output.contains("valid b'HTTP/1.0 200 OK'"), "{output}");
    assert_eq!(log.len(), 20, "{log:?}");
    assert!(
        log.iter()
            .all(|l| l.starts_with(&format!("door port {KEYED}: refused a request:"))),
        "{log:?}"
    );
    assert_eq!(
        upstream.reached(),
        1,
        "the upstream got a connection for each connection to the door"
    );
}

/// Red team (a): a reviewer that sends requests in a loop. With a budget of 5 keyed
/// requests, the first 5 reach the stand-in model API with the daemon's key; the next three
/// (on the same connection, then on new ones) get a `429` naming the door's budget, with
/// `x-should-retry: false`, a log line each counting the refusals, and never reach it.
#[test]
fn requests_past_the_launchs_budget_get_a_429_and_never_reach_the_upstream() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    let api = ModelApi::start();
    let addr = api.url.trim_start_matches("http://").to_owned();
    let options = Options::default().with_door_keyed_requests(5);
    let (output, log) = run(root.path(), "budget", vec![keyed(&addr)], options, |log| {
        log.len() >= 3
    });
    assert!(
        output.contains("statuses [400, 400, 400, 400, 400, 429, 429, 429]"),
        "{output}\n{log:?}"
    );
    assert!(
        output.contains(
            "429 \"kcap door: the launch's budget of 5 requests with the daemon's credential \
             is used up; this request did not reach the upstream\\n\" false"
        ),
        "{output}"
    );
    let requests = api.requests();
    assert_eq!(requests.len(), 5, "{requests:?}");
    for r in &requests {
        assert_eq!(r.header("x-api-key"), ["daemon-key"]);
    }
    let lines: Vec<String> = (1..=3)
        .map(|n| {
            format!(
                "door port {KEYED}: refused a request over the launch's budget of 5 requests \
                 with the daemon's credential ({n} refused so far); answered 429 and closed \
                 the connection"
            )
        })
        .collect();
    assert_eq!(log, lines);
}

/// Red team (a), the rate: with a burst of 3 and then one request every 200 ms, the first
/// three of 8 requests in a loop are answered at once and the 8th not before 5 intervals
/// have passed; all 8 reach the stand-in model API (held, not refused), and no log line (no
/// wait of a second or more).
#[test]
fn requests_faster_than_the_launchs_rate_wait_for_their_turn() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    let api = ModelApi::start();
    let addr = api.url.trim_start_matches("http://").to_owned();
    let options = Options::default().with_door_keyed_rate(door::Rate {
        burst: 3,
        interval: Duration::from_millis(200),
    });
    let (output, log) = run(root.path(), "rate", vec![keyed(&addr)], options, |_| true);
    let times: Vec<f64> = output
        .lines()
        .find_map(|l| l.trim().strip_prefix("times "))
        .unwrap_or_else(|| panic!("{output}"))
        .split(' ')
        .map(|t| {
            let (status, secs) = t.split_once('@').unwrap();
            assert_eq!(status, "400", "{output}");
            secs.parse().unwrap()
        })
        .collect();
    assert_eq!(times.len(), 8, "{output}");
    assert!(times[2] < 0.3, "the burst waited: {times:?}");
    assert!(times[7] >= 0.95, "the 8th came before its slot: {times:?}");
    assert_eq!(api.requests().len(), 8);
    assert!(log.is_empty(), "{log:?}");
}

/// Red team (c): a reviewer floods the door's log to push its first refusal out. The first
/// refusal (a request that could smuggle another) stays the log's first line, the last
/// refusals are kept, and one line between them counts the 345 dropped (601 refusals, 256
/// kept).
#[test]
fn a_flood_of_refusals_keeps_the_first_in_the_log_and_counts_the_dropped() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    let upstream = KcapServer::start();
    let addr = upstream.url.trim_start_matches("http://").to_owned();
    let dropped = format!(
        "door: 345 log lines dropped here (the first {} and the last {} are kept)",
        door::KEPT_FIRST,
        door::KEPT_LAST
    );
    let (output, log) = run(
        root.path(),
        "flood",
        vec![keyed(&addr)],
        Options::default(),
        {
            let dropped = dropped.clone();
            move |log: &[String]| log.contains(&dropped)
        },
    );
    assert!(output.contains("flooded"), "{output}");
    assert_eq!(
        log[0],
        format!(
            "door port {KEYED}: refused a request: it has both content-length and \
             transfer-encoding; closed the connection"
        )
    );
    assert_eq!(log.len(), door::MAX_LOG_LINES + 1, "{log:?}");
    assert_eq!(log[door::KEPT_FIRST], dropped);
    let garbage = format!(
        "door port {KEYED}: refused a request: its request line is not `method target \
         version`; closed the connection"
    );
    for (i, line) in log.iter().enumerate().skip(1) {
        assert!(i == door::KEPT_FIRST || *line == garbage, "{i}: {line}");
    }
    assert_eq!(upstream.reached(), 0);
}

/// The budget and the rate from the command line: `launch --plan` with
/// `--door-keyed-requests 2 --door-keyed-burst 1 --door-keyed-interval-ms 1500` and the
/// stand-in's 8 keyed requests: the first passes at once, the second is held for its slot
/// (1.5 s, so the door logs the wait: a second or more), the other six get a `429` naming the
/// budget of 2; the CLI prints the door's log as `door <line>`, the hold and the refusals
/// there. The bite, run once per flag: with `--door-keyed-requests` not handed to `Options`,
/// all 8 reached the stand-in model API (no `429`); with the burst or the interval not
/// handed over (the defaults, 40 at once), no request was held and no hold was logged.
#[cfg(feature = "cli")]
#[test]
fn the_launch_commands_door_flags_set_the_budget_and_the_rate() {
    use kcap_mcp_registry::clients::plan::{DoorCredential, DoorEndpoint, DoorPlan, DoorScheme};

    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = world();
    let api = ModelApi::start();
    let mut plan = plan(root.path(), "budget");
    plan.door = Some(DoorPlan {
        endpoints: vec![DoorEndpoint {
            port: KEYED,
            upstream: api.url.trim_start_matches("http://").to_owned(),
            scheme: DoorScheme::Http,
            serves: "a test".into(),
            credential: Some(DoorCredential {
                header: "x-api-key".into(),
                value: "daemon-key".into(),
            }),
        }],
    });
    let plan_file = root.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_json()).unwrap();
    let client = sh_script(
        &root.path().join("bin"),
        "client",
        &format!(
            "exec /usr/bin/python3 {}",
            root.path().join("tree/client.py").display()
        ),
    );
    let r = common::finish(
        common::bin()
            .args(["launch", "--timeout", "60", "--plan"])
            .arg(&plan_file)
            .arg("--client-bin")
            .arg(&client)
            .args(["--door-keyed-requests", "2", "--door-keyed-burst", "1"])
            .args(["--door-keyed-interval-ms", "1500"])
            .timeout(Duration::from_secs(120)),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("output statuses [400, 400, 429, 429, 429, 429, 429, 429]"),
        "{r:?}"
    );
    assert_eq!(api.requests().len(), 2, "{r:?}");
    let door: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("door "))
        .collect();
    let held = format!("door port {KEYED}: held a request with the daemon's credential 1.");
    assert!(
        door.first()
            .is_some_and(|l| l.starts_with(&held) && l.ends_with(" s, to the launch's rate")),
        "{r:?}"
    );
    let refused: Vec<String> = (1..=6)
        .map(|n| {
            format!(
                "door port {KEYED}: refused a request over the launch's budget of 2 requests \
                 with the daemon's credential ({n} refused so far); answered 429 and closed \
                 the connection"
            )
        })
        .collect();
    // Each refusal's line is written once its `429` went out: the client may exit before
    // the last is in, so the lines are those of `refused`, the first at least.
    assert!(door.len() >= 2, "{r:?}");
    assert!(
        door[1..].iter().all(|l| refused.iter().any(|r| r == l)),
        "{r:?}"
    );
    assert!(door.contains(&refused[0].as_str()), "{r:?}");
}

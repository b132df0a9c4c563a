//! What the door tests share (issue 32, `LaunchContext::door`): a
//! stand-in kcap server that counts connections, a probe an MCP server's command runs
//! before the recorder (the kcap server through the URL it was given, and a direct
//! connection to the model API's port on the host), and a scan of the launch directory
//! for the daemon's key; the stand-in upstream of the door's own tests ([`Upstream`]).
//! Offline: everything is on 127.0.0.1.

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::stand_in::write_executable;

/// A stand-in kcap server on a free loopback port: answers every connection
/// `HTTP/1.0 200 OK` with body `ok`, and counts them.
pub struct KcapServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    reached: Arc<AtomicUsize>,
}

impl KcapServer {
    pub fn start() -> KcapServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let reached = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&reached);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || answer(stream));
            }
        });
        KcapServer { url, reached }
    }

    /// How many connections it got.
    pub fn reached(&self) -> usize {
        self.reached.load(Ordering::SeqCst)
    }
}

/// Reads one request head (up to its blank line, at most 5 s), then answers `200 ok`: the
/// request read first, so closing sends no reset that could cost the client the answer.
fn answer(stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line.trim_end() != "" {
        line.clear();
    }
    let _ = (&stream).write_all(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok");
}

/// The machine outside a reviewer, for [`write_probe`]: a TCP listener on another loopback
/// address (`127.0.0.2`) and a stand-in name server on the host's `127.0.0.1` (as
/// systemd-resolved's `127.0.0.53` is), each started once per test process.
struct Outside {
    /// The port of the listener on `127.0.0.2`.
    other_port: u16,
    /// The name server's UDP port: it answers each query with its id and `QR` set.
    dns_port: u16,
}

fn outside() -> &'static Outside {
    static OUTSIDE: std::sync::OnceLock<Outside> = std::sync::OnceLock::new();
    OUTSIDE.get_or_init(|| {
        let other = TcpListener::bind("127.0.0.2:0").expect("bind 127.0.0.2:0");
        let other_port = other.local_addr().unwrap().port();
        std::thread::spawn(move || for _ in other.incoming() {});
        let dns = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 (udp)");
        let dns_port = dns.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while let Ok((n, from)) = dns.recv_from(&mut buf) {
                if n >= 12 {
                    buf[2] |= 0x80;
                    let _ = dns.send_to(&buf[..n], from);
                }
            }
        });
        Outside {
            other_port,
            dns_port,
        }
    })
}

/// Writes at `wrapper` a bash script that, run as an MCP server's command, leaves in
/// `marks` one file per probe and then runs `exec` (a shell command line, followed by the
/// script's arguments, with `PROBED_AS` set to the wrapper's path, which a recorder may
/// report as its command): `kcap-yes` when a `GET /` to `$KCAP_URL`'s host and port (a result
/// channel's server, which has none: `$KCAP_FLOW_CAPABILITY_URL`'s) answers
/// `HTTP/1.0 200`, else `kcap-no`; `direct-yes` when a TCP connection to `127.0.0.1:<port of
/// model_api_url>` opens, else `direct-no`; `other-yes` when a TCP connection to a listener
/// on the host's `127.0.0.2` opens; `dns-yes` when a DNS query to a stand-in name server on
/// the host's `127.0.0.1` is answered within 2 s ([`Outside`]); `outside-yes` when a TCP
/// connection to `203.0.113.7:443` (RFC 5737, a host outside) opens within 1 s (behind the
/// door the door's log names it: [`OUTSIDE_REFUSED`]). Each file is named
/// `<probe>-<answer>-<pid>` ([`marks`] reads them).
pub fn write_probe(wrapper: &Path, marks: &Path, model_api_url: &str, exec: &str) {
    std::fs::create_dir_all(marks).unwrap();
    let api_port = model_api_url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    write_executable(
        wrapper,
        format!(
            "#!/bin/bash\n\
             trap '' PIPE\n\
             mark() {{ : > {marks}/$1-$2-$$; }}\n\
             url=${{KCAP_URL:-$KCAP_FLOW_CAPABILITY_URL}}; hp=${{url#http://}}; hp=${{hp%%/*}}\n\
             if exec 3<>/dev/tcp/${{hp%:*}}/${{hp##*:}} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 \
                && read -r -t 5 line <&3 && [[ $line == HTTP/1.0\\ 200* ]]; then mark kcap yes; else mark kcap no; fi\n\
             exec 3>&-\n\
             if (exec 4<>/dev/tcp/127.0.0.1/{api_port}) 2>/dev/null; then mark direct yes; else mark direct no; fi\n\
             if (exec 5<>/dev/tcp/127.0.0.2/{other_port}) 2>/dev/null; then mark other yes; else mark other no; fi\n\
             if timeout 1 bash -c 'exec 7<>/dev/tcp/203.0.113.7/443' 2>/dev/null; then mark outside yes; else mark outside no; fi\n\
             if (exec 6<>/dev/udp/127.0.0.1/{dns_port} \
                && printf '{query}' >&6 && IFS= read -r -t 2 -N 2 id <&6 && [[ $id == $'\\x12\\x34' ]]) 2>/dev/null; \
                then mark dns yes; else mark dns no; fi\n\
             PROBED_AS=\"$0\" exec {exec} \"$@\"\n",
            marks = marks.display(),
            other_port = outside().other_port,
            dns_port = outside().dns_port,
            query = "\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x06models\\x07example\\x00\\x00\\x01\\x00\\x01",
        ),
    );
}

/// The probes' answers [`write_probe`] left in `marks` (`kcap-yes`, `direct-no`, …).
pub fn marks(marks: &Path) -> BTreeSet<String> {
    std::fs::read_dir(marks)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.rsplit_once('-').unwrap().0.to_owned()
        })
        .collect()
}

/// Every regular file under `dir` (recursively, symbolic links not followed) whose bytes
/// contain `needle`.
pub fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file()
                && std::fs::read(entry.path())
                    .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
            {
                found.push(entry.path());
            }
        }
    }
    found
}

/// What one ACP launch planned by `Client::plan` showed ([`acp_launch`]), behind the door
/// or not.
#[cfg(feature = "launch")]
pub struct AcpDoorRun {
    pub plan: kcap_mcp_registry::clients::plan::LaunchPlan,
    /// The plan as JSON without its door: what reaches the client.
    pub client_side: String,
    pub records: Vec<super::records::Record>,
    /// Every request the stand-in model API got.
    pub requests: Vec<super::model_api::Request>,
    /// The launch directory's files that held the key while the client ran, once the model
    /// API had its first request.
    pub leaks: Vec<PathBuf>,
    /// The probes' answers ([`marks`]).
    pub marks: BTreeSet<String>,
    /// Connections the stand-in kcap server got.
    pub kcap_reached: usize,
    pub stderr: String,
}

/// One ACP reviewer launch of `client` (`bin`) planned by `Client::plan`, behind the door
/// when `door`: the recorder (answering `tools`) behind [`write_probe`] as the kcap binary,
/// the stand-in kcap server as `server_url`, `kcap-review` allowlisted, `model`, and as
/// credentials what `credentials` makes of the stand-in model API's URL; dead proxies in the
/// plan's environment (`NO_PROXY` for the loopback interface) keep the rest offline. Runs
/// in the default sandbox until the model API got its first request, reads the launch
/// directory for `key` then, and stops the client.
#[cfg(feature = "launch")]
pub fn acp_launch(
    client: kcap_mcp_registry::clients::Client,
    bin: &Path,
    tools: &[&str],
    model: &str,
    credentials: &dyn Fn(&str) -> Vec<kcap_mcp_registry::clients::plan::EnvVar>,
    key: &str,
    door: bool,
) -> AcpDoorRun {
    acp_launch_prepared(
        client,
        bin,
        tools,
        model,
        credentials,
        key,
        door,
        &|_, _| {},
    )
}

/// [`acp_launch`], calling `prepare` with the launch's temporary folder (the worktree is its
/// `wt/`) and the plan once the plan is made, before it is carried out: to write files the
/// launch should meet, or change the plan for a control.
#[cfg(feature = "launch")]
#[allow(clippy::too_many_arguments)]
pub fn acp_launch_prepared(
    client: kcap_mcp_registry::clients::Client,
    bin: &Path,
    tools: &[&str],
    model: &str,
    credentials: &dyn Fn(&str) -> Vec<kcap_mcp_registry::clients::plan::EnvVar>,
    key: &str,
    door: bool,
    prepare: &dyn Fn(&Path, &mut kcap_mcp_registry::clients::plan::LaunchPlan),
) -> AcpDoorRun {
    use kcap_mcp_registry::clients::plan::EnvVar;
    use std::sync::Mutex;
    let t = tempfile::tempdir().unwrap();
    let p = |rel: &str| t.path().join(rel);
    for d in ["home", "wt", "launch", "records", "bin"] {
        std::fs::create_dir_all(p(d)).unwrap();
    }
    let api = super::model_api::ModelApi::start();
    let kcap = KcapServer::start();
    let recorder = p("bin/recorder.js");
    write_executable(
        &recorder,
        super::records::recorder_source_with_tools(&p("records"), tools),
    );
    let marks_dir = p("records/door");
    write_probe(
        &p("bin/kcap"),
        &marks_dir,
        &api.url,
        &recorder.display().to_string(),
    );
    let s = |path: PathBuf| path.to_str().unwrap().to_owned();
    let mut ctx = kcap_mcp_registry::LaunchContext {
        server_url: Some(kcap.url.clone()),
        kcap_bin: Some(s(p("bin/kcap"))),
        agent_id: "agent-7".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        worktree: Some(s(p("wt"))),
        launch_dir: Some(s(p("launch"))),
        model: Some(model.into()),
        door,
        ..kcap_mcp_registry::LaunchContext::default()
    };
    ctx.credentials.env = credentials(&api.url);
    let inputs =
        kcap_mcp_registry::clients::dispatch::PlanInputs::new(kcap_mcp_registry::Policy::Lenient);
    let mut plan = client
        .plan(&ctx, &inputs)
        .unwrap_or_else(|e| panic!("{client}, door {door}: {e}"))
        .plan;
    assert_eq!(plan.door.is_some(), door);
    prepare(t.path(), &mut plan);
    let mut shown = plan.clone();
    shown.door = None;
    let client_side = shown.to_json();
    plan.env.extend(
        [
            ("HTTP_PROXY", "http://127.0.0.1:9"),
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("NO_PROXY", "127.0.0.1,localhost"),
        ]
        .map(|(n, v)| EnvVar::new(n, v)),
    );
    let wanted: BTreeSet<super::records::Known> = plan
        .session_new
        .as_ref()
        .expect("an ACP plan")
        .mcp_servers
        .iter()
        .map(|s| {
            let argv = std::iter::once(s.command.clone())
                .chain(s.args.clone())
                .collect();
            let env = (s.env.iter())
                .filter(|v| v.name.starts_with("KCAP_"))
                .map(|v| (v.name.clone(), v.value.clone()))
                .collect();
            (argv, env)
        })
        .collect();
    let daemon: std::collections::BTreeMap<String, String> = [
        (
            "PATH",
            super::peers::inherited_path().into_string().unwrap(),
        ),
        ("HOME", s(p("home"))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let leaks = Mutex::new(None);
    let asked = || {
        let done = !api.requests().is_empty();
        if done {
            *leaks.lock().unwrap() = Some(files_holding(&p("launch"), key));
        }
        done
    };
    let seen = super::carry::AcpRun {
        plan: &plan,
        launch_dir: &p("launch"),
        client_bin: bin,
        client: bin,
        confined: true,
        executable: &[],
        writable: &[],
        daemon_env: &daemon,
        records: &p("records"),
        wanted: &wanted,
        timing: super::carry::Timing {
            timeout: Duration::from_secs(60),
            settle: Duration::from_secs(1),
        },
        prompt: Some(("Review the change.", super::carry::Until::Holds(&asked))),
    }
    .carry_out();
    AcpDoorRun {
        plan,
        client_side,
        records: seen.records,
        requests: api.requests(),
        leaks: leaks
            .into_inner()
            .unwrap()
            .expect("the model API was asked"),
        marks: marks(&marks_dir),
        kcap_reached: kcap.reached(),
        stderr: seen.stderr,
    }
}

/// A Python probe script `body` (the door's suite tests) after its imports and `probe(name,
/// f)`, which prints `name=yes` when `f()` returned true and `name=no` (with
/// `name-error=<the exception>`) otherwise, for `common::carry::probe_answers`.
pub fn python_probe(body: &str) -> String {
    format!(
        "import ctypes, fcntl, os, socket, struct, sys, time\n\
         def probe(name, f):\n    \
             try:\n        ok = f()\n    \
             except Exception as e:\n        \
                 print(f\"{{name}}-error={{e!r}}\", flush=True)\n        ok = False\n    \
             print(f\"{{name}}={{'yes' if ok else 'no'}}\", flush=True)\n\
         {body}"
    )
}

/// The door's log line for [`write_probe`]'s connection to a host outside.
pub const OUTSIDE_REFUSED: &str = "refused: a TCP connection to 203.0.113.7:443 from the \
     reviewer (only the door's endpoints are reached); answered ICMP prohibited";

/// What a launch behind the door shows of its servers and its probe: no server's
/// environment holds `key`, each was given the kcap server through the door (port 41002),
/// no launch-directory file holds the key (`leaks`), the probe reached the kcap server and
/// not the model API's host port (`marks`), and the stand-in kcap server got a connection
/// from each server (`kcap_reached`).
pub fn assert_reach_behind_the_door<'a>(
    servers: impl IntoIterator<Item = (&'a [String], &'a std::collections::BTreeMap<String, String>)>,
    key: &str,
    leaks: &[PathBuf],
    marks: &BTreeSet<String>,
    kcap_reached: usize,
) {
    for (argv, env) in servers {
        assert!(
            !env.values().any(|v| v.contains(key)),
            "{argv:?} holds the daemon's key"
        );
        assert!(
            env["KCAP_URL"].starts_with("http://127.0.0.1:41002"),
            "{argv:?}: {env:?}"
        );
    }
    assert!(
        leaks.is_empty(),
        "launch-directory files hold the key: {leaks:?}"
    );
    assert_eq!(
        *marks,
        ["direct-no", "dns-no", "kcap-yes", "other-no", "outside-no"]
            .map(String::from)
            .into()
    );
    assert!(kcap_reached >= 2, "the kcap server got {kcap_reached}");
}

/// Without the door, every way out [`write_probe`] tries opened: the model API's host port,
/// another loopback address, the name server on the host (the bite of
/// [`assert_reach_behind_the_door`]).
pub fn assert_open_network(marks: &BTreeSet<String>) {
    for way in ["direct-yes", "other-yes", "dns-yes"] {
        assert!(marks.contains(way), "{way}: {marks:?}");
    }
}

/// Every request the stand-in model API got through the door carries `value` in `header`
/// (set by the door), and no header carries the per-launch token.
pub fn assert_door_headers(requests: &[super::model_api::Request], header: &str, value: &str) {
    assert!(
        !requests.is_empty(),
        "no model request came through the door"
    );
    for r in requests {
        assert_eq!(
            r.header(header),
            [value],
            "{} {}: {:?}",
            r.method,
            r.path,
            r.headers
        );
        assert!(
            !r.headers.iter().any(|(_, v)| v.contains("kcap-door-")),
            "a header carries the token: {:?}",
            r.headers
        );
    }
}

#[cfg(feature = "launch")]
impl AcpDoorRun {
    /// Behind the door: every model request carries `key` in `header` after `prefix` (set
    /// by the door) and no header the token; neither the plan the client gets, nor a
    /// server's environment, nor a launch-directory file holds the key; each server reached
    /// the kcap server through the door (port 41002) and failed to reach the model API's
    /// host port, another loopback address and the name server on the host.
    pub fn assert_behind_the_door(&self, key: &str, header: &str, prefix: &str) {
        assert!(!self.requests.is_empty(), "{}", self.stderr);
        assert_door_headers(&self.requests, header, &format!("{prefix}{key}"));
        assert!(!self.client_side.contains(key), "{}", self.client_side);
        assert_eq!(self.records.len(), 2, "{:?}", self.records);
        assert_reach_behind_the_door(
            self.records.iter().map(|r| (r.argv.as_slice(), &r.env)),
            key,
            &self.leaks,
            &self.marks,
            self.kcap_reached,
        );
    }

    /// Without the door: the client's own request carries `key` in `header` after `prefix`,
    /// the plan the client gets holds the key, and a server's direct connection to the
    /// model API's host port, to another loopback address and its name query opened
    /// ([`assert_open_network`]).
    pub fn assert_open(&self, key: &str, header: &str, prefix: &str) {
        assert!(!self.requests.is_empty(), "{}", self.stderr);
        for r in &self.requests {
            assert_eq!(
                r.header(header),
                [format!("{prefix}{key}")],
                "{:?}",
                r.headers
            );
        }
        assert!(self.client_side.contains(key));
        assert_open_network(&self.marks);
    }
}

/// A CA made for this run (rcgen), and server certificates it signs: the door's TLS tests
/// (`tests/suite/launch_door_tls.rs`, `tests/clients/door_https.rs`) give its root to the
/// door with `Options::with_door_root`.
#[cfg(feature = "launch")]
pub struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

#[cfg(feature = "launch")]
impl TestCa {
    /// A new CA, its certificate's common name `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let issuer =
            rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        TestCa { issuer }
    }

    /// Its certificate (DER).
    pub fn der(&self) -> Vec<u8> {
        self.issuer.der().to_vec()
    }

    /// Its certificate (PEM), for a client that reads extra roots from a file
    /// (`NODE_EXTRA_CA_CERTS`: `tests/clients/remote_settings_claude.rs`).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `names` (DNS names, or IP addresses such as `127.0.0.1`)
    /// and its key.
    pub fn leaf(
        &self,
        names: &[&str],
    ) -> (
        rustls::pki_types::CertificateDer<'static>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let cert = rcgen::CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(
            rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()),
        );
        (cert.der().clone(), key)
    }
}

/// A TLS server configuration (rustls) with `cert` and its `key`, no client certificate.
#[cfg(feature = "launch")]
pub fn tls_server(
    cert: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> Arc<rustls::ServerConfig> {
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    Arc::new(config)
}

/// A stand-in upstream of the network door (a model API on the host's 127.0.0.1), over
/// plain TCP ([`Upstream::plain`]) or TLS ([`Upstream::tls`]): `/hello` answers `hello
/// through the door` at once; `/stream` sends one server-sent event, then waits (up to 10 s)
/// for a request to `/release` before it sends the second (`data: released`, or `data:
/// not-released` when none came) and ends; `/slow` reads the request and answers nothing
/// for 20 s; any other path answers `upstream got <the request's body>`. It records each
/// request's head, through its blank line.
#[cfg(feature = "launch")]
pub struct Upstream {
    /// `127.0.0.1:<port>`.
    pub addr: String,
    /// Its port.
    pub port: u16,
    heads: Arc<std::sync::Mutex<Vec<String>>>,
}

#[cfg(feature = "launch")]
impl Upstream {
    /// Speaking plain HTTP.
    pub fn plain() -> Upstream {
        Upstream::start(None)
    }

    /// Speaking TLS only, with the certificate `cert` (and its `key`).
    pub fn tls(
        cert: rustls::pki_types::CertificateDer<'static>,
        key: rustls::pki_types::PrivateKeyDer<'static>,
    ) -> Upstream {
        Upstream::start(Some(tls_server(cert, key)))
    }

    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Upstream {
        use std::sync::{Mutex, mpsc};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&heads);
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(Mutex::new(released));
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (tls, log, release, released) = (
                    tls.clone(),
                    Arc::clone(&log),
                    release.clone(),
                    Arc::clone(&released),
                );
                std::thread::spawn(move || {
                    let upstream = Served {
                        log: &log,
                        release: &release,
                        released: &released,
                    };
                    match tls {
                        Some(config) => {
                            let conn = rustls::ServerConnection::new(config).unwrap();
                            upstream.serve(&mut rustls::StreamOwned::new(conn, tcp));
                        }
                        None => upstream.serve(&mut { tcp }),
                    }
                });
            }
        });
        Upstream {
            addr: format!("127.0.0.1:{port}"),
            port,
            heads,
        }
    }

    /// The heads of the requests it got, in order.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// What one connection to an [`Upstream`] shares with the others.
#[cfg(feature = "launch")]
struct Served<'a> {
    log: &'a std::sync::Mutex<Vec<String>>,
    release: &'a std::sync::mpsc::Sender<()>,
    released: &'a std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

#[cfg(feature = "launch")]
impl Served<'_> {
    /// Reads one request from `s` and answers it (see [`Upstream`]).
    fn serve(&self, s: &mut (impl std::io::Read + std::io::Write)) {
        let Some((head, body)) = read_request(s) else {
            // Closed before a request.
            return;
        };
        self.log.lock().unwrap().push(head.clone());
        let path = head
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let plain = |body: &str| {
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
        };
        let chunk = |text: &str| format!("{:x}\r\n{text}\r\n", text.len());
        let mut say = |text: &str| {
            let _ = s.write_all(text.as_bytes()).and_then(|()| s.flush());
        };
        match path.as_str() {
            "/hello" => say(&plain("hello through the door")),
            "/release" => {
                let _ = self.release.send(());
                say(&plain("released"));
            }
            "/stream" => {
                say(&format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     transfer-encoding: chunked\r\nconnection: close\r\n\r\n{}",
                    chunk("event: one\ndata: first\n\n")
                ));
                let got = self
                    .released
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
                let second = if got.is_ok() {
                    "event: two\ndata: released\n\n"
                } else {
                    "event: two\ndata: not-released\n\n"
                };
                say(&format!("{}0\r\n\r\n", chunk(second)));
            }
            "/slow" => std::thread::sleep(Duration::from_secs(20)),
            _ => say(&plain(&format!("upstream got {body}"))),
        }
    }
}

/// One request's head (through its blank line) and body (`content-length` bytes) from `s`;
/// `None` when it closes first.
#[cfg(feature = "launch")]
fn read_request(s: &mut impl std::io::Read) -> Option<(String, String)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf).ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(str::to_owned)
        })
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while data.len() < end + length {
        let n = s.read(&mut buf).ok().filter(|n| *n > 0)?;
        data.extend_from_slice(&buf[..n]);
    }
    Some((head, String::from_utf8_lossy(&data[end..]).into_owned()))
}

/// An upstream of the network door on 127.0.0.1 that takes one connection and keeps what it
/// is sent, over TLS with `tls` (else plain TCP): after each read, `step(all got so far, the
/// connection)` may answer, and ends the connection by returning `true`; it also ends when
/// the other side closes or sends nothing for 5 s, or when no connection came within 10 s
/// (what it got is then empty). Returns its address, and the thread that yields what it got.
#[cfg(feature = "launch")]
pub fn one_connection_upstream(
    tls: Option<Arc<rustls::ServerConfig>>,
    mut step: impl FnMut(&[u8], &mut dyn std::io::Write) -> bool + Send + 'static,
) -> (String, std::thread::JoinHandle<String>) {
    use std::io::Read as _;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let tcp = loop {
            match listener.accept() {
                Ok((conn, _)) => break conn,
                Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(_) => return String::new(),
            }
        };
        tcp.set_nonblocking(false).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut conn: Box<dyn ReadWrite> = match tls {
            Some(config) => Box::new(rustls::StreamOwned::new(
                rustls::ServerConnection::new(config).unwrap(),
                tcp,
            )),
            None => Box::new(tcp),
        };
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = conn.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if step(&got, &mut conn) {
                break;
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    });
    (addr, seen)
}

/// A connection [`one_connection_upstream`] reads and writes.
#[cfg(feature = "launch")]
trait ReadWrite: std::io::Read + std::io::Write + Send {}
#[cfg(feature = "launch")]
impl<T: std::io::Read + std::io::Write + Send> ReadWrite for T {}

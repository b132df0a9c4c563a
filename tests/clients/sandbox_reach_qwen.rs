//! The red team of issue 31: what a shell command the real Qwen Code 0.24.4 runs as its tool
//! (because the model asked) reached from inside the default sandbox (`Confinement::BestEffort`,
//! here the whole sandbox: Landlock ABI 6+, the user and mount namespace, capabilities
//! dropped). Each item is an attack on the isolation definition ("the running reviewer,
//! whatever command it runs, reaches only its worktree, its launch directory and the
//! system's files, no other process"):
//!
//! - `daemon_terminal`: an ACP client was started in its own process group but in the
//!   daemon's session (now `setsid`: a session of its own), so when the daemon (or `kcap launch`,
//!   `verify`) runs with a controlling terminal, that terminal is the client's too, and
//!   `TIOCSTI` on it pushes input that whatever reads the terminal next (the user's shell,
//!   outside any sandbox) runs. Qwen Code runs its shell tool in a terminal of its own
//!   (node-pty: a new session), so the tool reaches the daemon's terminal through the client:
//!   it `ptrace`s the client (same uid, same Landlock domain, no Yama here: allowed), finds
//!   its pid as the one `/proc/<pid>` it may read, and has it `open("/dev/tty")` and
//!   `ioctl(TIOCSTI)` each byte (`tests/fixtures/sandbox_reach/inject.py`, a file of the hostile
//!   worktree). Measured with `kcap launch opencode` (a stand-in client) under an
//!   interactive `sh -i`: the injected `id > /tmp/…` ran as root outside the sandbox.
//! - `unix_socket`: Landlock (ABI 7 here) does not govern `connect(2)` to a pathname unix
//!   socket, so the reviewer connects to a socket in a `0700` directory outside its boundary
//!   (a daemon's control socket, another reviewer's server, `/run/docker.sock` where there
//!   is one), with the door on too (a network namespace does not separate them).
//! - `sysv_shm`: the reviewer shares the host's IPC namespace, so it attaches a System V
//!   shared memory segment of the daemon's (mode `0600`) and reads it (and could write,
//!   remove, or leave its own for another reviewer: they outlive the reviewer's cgroup).
//! - The red team of issue 33, past that filter: `uring_socket`, a unix socket made by
//!   `io_uring` (`IORING_OP_SOCKET`, which `socket(2)`'s rule never sees) connected to the
//!   daemon's socket; `dgram_socket`, a datagram socket of a `socketpair` sending to a
//!   datagram socket of the daemon's by its path; `session_keyring`, a key the daemon keeps
//!   in its session keyring (which the reviewer inherits through its user namespace) read
//!   with `keyctl`; `sibling_stack`, a sibling's environment read from its user stack with
//!   `perf_event_open` (`PERF_SAMPLE_STACK_USER`), where `ptrace` is refused. Each done under
//!   `BestEffort` on the filter before it refused `io_uring`, datagram pairs, the keyring calls
//!   and `perf_event_open` (Qwen Code 0.24.4). Not here: a descriptor the daemon holds
//!   without close-on-exec (a TCP connection) did not reach Qwen Code's shell command even
//!   before the executor closed them at exec (its terminal's child does not pass them on);
//!   `launch_sandbox_reach::a_reviewer_inherits_no_descriptor_of_the_daemons` shows it on a
//!   stand-in.
//!
//! The test runs itself again (the same trial, `KCAP_REACH_INNER` set) as the leader of a new
//! session whose controlling terminal is a fresh pseudo-terminal the test owns, so that the
//! injection lands in the test's own terminal (never a developer's), and the inner run reads
//! that terminal's input queue. Expected: every item denied under `BestEffort`; under
//! `Confinement::Off` every item done but `daemon_terminal` (the probe works: the bite), which
//! the client's own session keeps out with the sandbox off too (so its bite is the commit
//! before `setsid`, where this test failed). `unix_socket`: the seccomp filter's
//! `socket(AF_UNIX)`; `sysv_shm`: the reviewer's IPC namespace.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::model_api::{
    ModelApi, offers_tool, openai_chat_turn, openai_tool_output, response,
};
use crate::common::outside::{DaemonDatagram, DaemonSocket, Segment, SessionKey};
use crate::common::peers::{peer, skip};
use crate::common::tool_attacks;
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::EnvVar;
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, AcpEvent, Options, Reviewer};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![qwen_tool_reaches_nothing_outside_the_sandbox]
}

/// The attacks, each answered `name=yes` (done) or `name=no` (denied).
const ITEMS: &[&str] = &[
    "daemon_terminal",
    "unix_socket",
    "sysv_shm",
    "uring_socket",
    "dgram_socket",
    "session_keyring",
    "sibling_stack",
];

/// The key the inner run keeps in its session keyring: its description and its payload.
const SESSION_KEY: (&str, &str) = ("kcap-daemon-key", "daemon-keyring-secret");

/// What the injection pushes into the controlling terminal.
const MARKER: &str = "kcap-tool-injected";

/// The segment's contents.
const SHM_SECRET: &str = "daemon-shm-secret";

/// How long one client run may take.
const BOUND: Duration = Duration::from_secs(60);

/// The trial's name, for running itself again.
const NAME: &str = "sandbox_reach_qwen::qwen_tool_reaches_nothing_outside_the_sandbox";

fn qwen_tool_reaches_nothing_outside_the_sandbox() {
    if let Ok(confinement) = std::env::var("KCAP_REACH_INNER") {
        inner(&confinement);
        return;
    }
    let Some(_) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    if let Some(missing) = sandbox::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let confined = in_a_session_of_its_own("best-effort");
    let open = in_a_session_of_its_own("off");
    eprintln!("sandboxed: {confined:?}\nsandbox off: {open:?}");
    // The daemon's terminal is out of reach with the sandbox off too: an ACP client has a
    // session of its own, no controlling terminal (`setsid`, not a sandbox rule). This test
    // failed on the commit before that (the red team's run: `daemon_terminal=yes` in both).
    for item in ITEMS.iter().filter(|i| **i != "daemon_terminal") {
        assert_eq!(
            open.get(*item),
            Some(&true),
            "{item} without the sandbox: {open:?}"
        );
    }
    assert_eq!(
        open.get("daemon_terminal"),
        Some(&false),
        "the daemon's terminal reached without the sandbox: {open:?}"
    );
    for item in ITEMS {
        assert_eq!(
            confined.get(*item),
            Some(&false),
            "{item} done from inside the default sandbox: {confined:?}"
        );
    }
}

/// Runs this trial again under `confinement` as the leader of a new session whose
/// controlling terminal is a new pseudo-terminal; its answers.
fn in_a_session_of_its_own(confinement: &str) -> BTreeMap<String, bool> {
    let (master, slave) = pty_pair();
    let slave_fd = slave.as_raw_fd();
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env("KCAP_REACH_INNER", confinement)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    // SAFETY: setsid and an ioctl on a descriptor open in the child: async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 || libc::ioctl(slave_fd, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    // Drain the terminal's output (the echo) so the child never blocks on it. Both ends stay
    // open here until the child is done: a closed controller end hangs the terminal up, and
    // the kernel then sends the session `SIGHUP`.
    let drain = std::thread::spawn(move || {
        let mut file = std::fs::File::from(master);
        let mut sink = Vec::new();
        let _ = file.read_to_end(&mut sink);
    });
    let out = child.wait_with_output().unwrap();
    drop(slave);
    drain.join().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("reach-answers: ").map(|(_, json)| json))
        .unwrap_or_else(|| panic!("{confinement}: the inner run gave no answers: {stdout}"));
    serde_json::from_str(line).unwrap()
}

/// A new pseudo-terminal: its controller end and its client end, both open.
fn pty_pair() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd as _;
    // SAFETY: posix_openpt and friends on a descriptor this function owns.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(m >= 0 && libc::grantpt(m) == 0 && libc::unlockpt(m) == 0);
        let mut name = [0 as libc::c_char; 64];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let s = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(s >= 0);
        (
            std::os::fd::OwnedFd::from_raw_fd(m),
            std::os::fd::OwnedFd::from_raw_fd(s),
        )
    }
}

/// The inner run: a daemon's segment and socket, one Qwen Code launch whose shell tool runs
/// the probe, the terminal's input queue read after; prints `reach-answers: {json}`.
fn inner(confinement: &str) {
    let confinement = match confinement {
        "off" => Confinement::Off,
        _ => Confinement::BestEffort,
    };
    let bin = peer("KCAP_QWEN_BIN").expect("the outer run found it");
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let socket = DaemonSocket::bind(&root_path);
    let dgram = DaemonDatagram::bind(&root_path);
    let shm = Segment::new(0x6834_0000, SHM_SECRET.as_bytes());
    let _key = SessionKey::join_and_add(SESSION_KEY.0, SESSION_KEY.1);
    let worktree = root_path.join("wt");
    std::fs::create_dir(&worktree).unwrap();
    for (name, text) in [
        ("inject.py", INJECT),
        ("uring.py", URING),
        ("perf.py", PERF),
    ] {
        std::fs::write(worktree.join(name), text).unwrap();
    }
    let command = command(&worktree, &socket.path, &dgram.path, shm.key);
    let output = run_qwen(&bin, &root_path, confinement, &command);
    drop(shm);
    // The probe's own word, and the daemon's socket's: it got the datagram.
    let output = output.replace(
        "dgram_socket=yes",
        if dgram.received().is_empty() {
            "dgram_socket=sent-unreceived"
        } else {
            "dgram_socket=yes"
        },
    );
    let mut answers: BTreeMap<String, bool> = ITEMS[1..]
        .iter()
        .filter_map(|name| {
            let yes = output.contains(&format!("{name}=yes"));
            let no = output.contains(&format!("{name}=no"));
            (yes != no).then(|| ((*name).to_owned(), yes))
        })
        .collect();
    answers.insert("daemon_terminal".into(), terminal_holds_marker());
    println!(
        "reach-answers: {}",
        serde_json::to_string(&answers).unwrap()
    );
}

/// Whether this process's controlling terminal's input queue holds [`MARKER`].
fn terminal_holds_marker() -> bool {
    // SAFETY: open and read on a buffer of this function's.
    unsafe {
        let fd = libc::open(c"/dev/tty".as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK);
        assert!(fd >= 0, "the inner run has a controlling terminal");
        let mut buf = [0u8; 4096];
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        let got = usize::try_from(n).map_or(&[][..], |n| &buf[..n]);
        String::from_utf8_lossy(got).contains(MARKER)
    }
}

/// The hostile worktree's injector: `ptrace`s the client and has it `TIOCSTI` its argument
/// and a newline into its controlling terminal (x86_64).
const INJECT: &str = include_str!("../fixtures/sandbox_reach/inject.py");

/// The hostile worktree's unix socket made through `io_uring`, connected to a path.
const URING: &str = include_str!("../fixtures/sandbox_reach/uring.py");

/// The hostile worktree's sampler of another process's user stack (`perf_event_open`).
const PERF: &str = include_str!("../fixtures/sandbox_reach/perf.py");

/// The shell command: each item prints `$n=yes` or `$n=no` (Qwen Code repeats the command).
fn command(worktree: &Path, socket: &Path, dgram: &Path, key: i32) -> String {
    format!(
        "p() {{ n=$1; shift; if \"$@\" >/dev/null 2>&1; then echo \"$n=yes\"; else echo \"$n=no\"; fi; }}; \
         g() {{ n=$1; w=$2; shift 2; if \"$@\" 2>/dev/null | /bin/grep -q \"$w\"; then echo \"$n=yes\"; else echo \"$n=no\"; fi; }}; \
         /usr/bin/python3 {inject} {MARKER}; \
         p unix_socket /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{socket}\")'; \
         p sysv_shm /usr/bin/python3 -c 'import ctypes; c=ctypes.CDLL(None); c.shmat.restype=ctypes.c_void_p; i=c.shmget({key},0,0); assert i>=0; assert ctypes.string_at(c.shmat(i,None,0),{len}) == b\"{SHM_SECRET}\"'; \
         g uring_socket CONNECTED /usr/bin/python3 {uring} {socket}; \
         p dgram_socket /usr/bin/python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b\"kcap-dgram-reached\", \"{dgram}\")'; \
         g session_keyring {secret} /usr/bin/python3 -c 'import ctypes; c = ctypes.CDLL(None); c.syscall.restype = ctypes.c_long; k = c.syscall(250, 10, ctypes.c_long(-3), b\"user\", b\"{desc}\", 0); b = ctypes.create_string_buffer(64); n = c.syscall(250, 11, ctypes.c_long(k), b, 64) if k >= 0 else -1; print(b.raw[:max(n, 0)].decode())'; \
         env -i SIBLING=sibling-only-key /bin/sh -c 'i=0; while [ $i -lt 30000000 ]; do i=$((i+1)); done' & s=$!; sleep 0.2; \
         r=$(/usr/bin/python3 {perf} $s SIBLING=sibling-only-key 2>&1); kill $s; \
         v=no; case $r in *PEEKED*) v=yes;; esac; echo sibling_stack=$v; echo \"perf: $r\"",
        inject = worktree.join("inject.py").display(),
        uring = worktree.join("uring.py").display(),
        perf = worktree.join("perf.py").display(),
        socket = socket.display(),
        dgram = dgram.display(),
        len = SHM_SECRET.len(),
        desc = SESSION_KEY.0,
        secret = SESSION_KEY.1,
    )
}

/// One Qwen Code launch (its plan, lenient, `yolo`) under `confinement` whose first turn
/// runs `command` as `run_shell_command`; the tool's output.
fn run_qwen(bin: &Path, root: &Path, confinement: Confinement, command: &str) -> String {
    const MODEL: &str = "gpt-4o";
    const TOOL: &str = "run_shell_command";
    let worktree = root.join("wt");
    let input = json!({"command": command});
    let api = ModelApi::answering(move |req| {
        let body = req.json().unwrap_or_default();
        let call = offers_tool(&body, TOOL) && openai_tool_output(&body).is_none();
        let turn = openai_chat_turn(MODEL, call.then_some((TOOL, &input)));
        response("200 OK", "text/event-stream", &turn)
    });
    let mut ctx = LaunchContext {
        agent_id: "a1".into(),
        worktree: Some(worktree.display().to_string()),
        launch_dir: Some(root.join("launch").display().to_string()),
        model: Some(MODEL.into()),
        ..LaunchContext::default()
    };
    ctx.credentials.env = vec![
        EnvVar::new("OPENAI_API_KEY", "sk-dummy-0123456789abcdefghij"),
        EnvVar::new("OPENAI_BASE_URL", format!("{}/v1", api.url)),
    ];
    let plan = tool_attacks::offline_plan(Client::Qwen, &ctx);
    let options = Options::default()
        .with_confinement(confinement)
        .with_handshake_timeout(BOUND)
        .with_die_with_parent(true);
    let reviewer =
        launch::launch_with_parent_env(&plan, bin, &options, &tool_attacks::daemon_env).unwrap();
    let Reviewer::Acp(mut session) = reviewer else {
        panic!("Qwen Code runs over ACP");
    };
    session.prompt("Run the probe.").unwrap();
    let started = Instant::now();
    let output = loop {
        if let Some(done) = api
            .requests()
            .iter()
            .find_map(|r| openai_tool_output(&r.json()?))
        {
            break done;
        }
        assert!(
            started.elapsed() < BOUND,
            "no tool output: {}",
            session.stderr_tail()
        );
        match session.next_event(Duration::from_millis(200)) {
            Ok(Some(AcpEvent::Exited(status))) => panic!("exited {status:?}"),
            Ok(_) => {}
            Err(e) => panic!("{e}"),
        }
    };
    session.stop().unwrap();
    eprintln!("{confinement:?}: {output}");
    output
}

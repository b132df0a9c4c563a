//! The door for a daemon that is not root (issue 32, item 5): `launch --plan` run as
//! `nobody` (uid 65534, `setpriv`) puts a stand-in reviewer behind the door, whose request
//! reaches a stand-in upstream through it while a connection to a host outside fails; the
//! CLI prints the door's log (`door <line>`), which names that connection where the daemon's
//! user may open `/dev/net/tun`, and says why it cannot where it may not (this machine's
//! device is `crw-------` root). Needs root to become `nobody`; without it the test says so
//! and returns.

use crate::common;

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::carry::terminal_plan;
use common::door::Upstream;
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{DoorEndpoint, DoorPlan, DoorScheme, EnvVar, Sandbox};

const NOBODY: u32 = 65534;
const MODEL_PORT: u16 = 8080;

const PROBE: &str = r#"
import os, socket
def hello():
    s = socket.create_connection(("127.0.0.1", 8080), timeout=10)
    s.sendall(b"GET /hello HTTP/1.1\r\nhost: 127.0.0.1:8080\r\nconnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.startswith(b"HTTP/1.1 200") and data.endswith(b"hello through the door")
def outside():
    socket.create_connection(("203.0.113.7", 443), timeout=5).close()
    return True
print(f"uid={os.getuid()}", flush=True)
probe("door_hello", hello)
probe("outside", outside)
"#;

/// A directory under the system's temp dir that every user may enter (a temp dir is
/// `0700`), removed on drop.
struct OpenDir(PathBuf);

impl OpenDir {
    fn new() -> OpenDir {
        let path = std::env::temp_dir().join(format!("kcap-nobody-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&path)
            .unwrap();
        OpenDir(path)
    }
}

impl Drop for OpenDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_daemon_that_is_not_root_puts_its_reviewer_behind_the_door() {
    if !rustix::process::geteuid().is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("ignored: becoming uid {NOBODY} needs root and /usr/bin/setpriv");
        return;
    }
    let root = OpenDir::new();
    let at = |p: &str| root.0.join(p);
    for dir in ["tree", "bin", "launches"] {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(at(dir))
            .unwrap();
    }
    std::os::unix::fs::chown(at("launches"), Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::write(at("tree/probe.py"), common::door::python_probe(PROBE)).unwrap();
    let client = sh_script(
        &at("bin"),
        "reviewer",
        &format!("exec /usr/bin/python3 {}", at("tree/probe.py").display()),
    );
    // The CLI, where `nobody` can run it (the build's directory may be closed to it).
    let cli = at("bin/kcap-mcp-registry");
    // By `cp` (keeping the mode), whose descriptor no fork of this process can inherit.
    let copied = Command::new("cp")
        .arg(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
        .arg(&cli)
        .status()
        .unwrap();
    assert!(copied.success());

    let upstream = Upstream::plain();
    let launch_dir = at("launches/nobody");
    let tree = at("tree").display().to_string();
    let mut plan = terminal_plan(Client::Codex, &launch_dir);
    plan.cwd = Some(tree.clone());
    plan.env.push(EnvVar::new("PATH", "/usr/bin:/bin"));
    plan.sandbox = Sandbox::new(&launch_dir.display().to_string(), Some(&tree));
    plan.door = Some(DoorPlan {
        endpoints: vec![DoorEndpoint {
            port: MODEL_PORT,
            upstream: upstream.addr.clone(),
            scheme: DoorScheme::Http,
            serves: "a test".into(),
            credential: None,
        }],
    });
    std::fs::write(at("plan.json"), plan.to_json()).unwrap();

    let mut cmd = Command::new("/usr/bin/setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&cli)
        .args(["launch", "--timeout", "30", "--plan"])
        .arg(at("plan.json"))
        .arg("--client-bin")
        .arg(&client)
        .env("HOME", &root.0)
        .current_dir(&root.0);
    let out = common::peers::run(cmd, "launch as nobody");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let shown = format!("{stdout}\n{}", out.stderr);
    if let Some(why) = out
        .stderr
        .lines()
        .find(|l| l.contains("network door needs"))
    {
        // Where the kernel gives no user namespace to this user, the launch is refused,
        // naming why (and the daemon can only run an open network).
        assert!(why.contains("user and network namespaces"), "{shown}");
        eprintln!("ignored: the kernel gives uid {NOBODY} no user namespace: {why}");
        return;
    }
    assert!(out.status.success(), "{shown}");
    assert!(stdout.contains(&format!("output uid={NOBODY}")), "{shown}");
    assert!(stdout.contains("output door_hello=yes"), "{shown}");
    assert!(stdout.contains("output outside=no"), "{shown}");
    assert_eq!(upstream.heads().len(), 1, "{shown}");
    // The door's log: the connection out named where `nobody` may open /dev/net/tun; else
    // the reason it is not.
    let tun_for_all = std::fs::metadata("/dev/net/tun").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt as _;
        m.mode() & 0o006 == 0o006
    });
    let expected = if tun_for_all {
        "door refused: a TCP connection to 203.0.113.7:443 from the reviewer (only the door's \
         endpoints are reached); answered ICMP prohibited"
            .to_owned()
    } else {
        "door door: connections out of the reviewer's namespace fail, unlogged: its device to \
         see them cannot be made (/dev/net/tun: Permission denied (os error 13))"
            .to_owned()
    };
    assert!(
        stdout.lines().any(|l| l == expected),
        "{expected}\nnot in:\n{shown}"
    );
    assert!(!launch_dir.exists(), "{shown}");
}

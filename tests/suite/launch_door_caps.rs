//! The door's tun device names every way out the reviewer tries only while the reviewer
//! cannot change its namespace's routes or links: a root daemon's reviewer is uid 0 in its
//! user namespace, and without the sandbox's capability drop (`Confinement::Off`, or a
//! kernel without Landlock under `BestEffort`) it kept every capability over its network
//! namespace after exec: it set `kcap0` down and its connections out failed unlogged
//! (red team, issue 32).

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::carry::{kernel_gives, probe_answers, terminal_plan, until_exit};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan, Sandbox};
use kcap_mcp_registry::launch::door::{self, Endpoint, Network};
use kcap_mcp_registry::launch::sandbox::Confinement;
use kcap_mcp_registry::launch::{self, Options};

const PROBE: &str = r#"
import fcntl, socket, struct, sys
status = open("/proc/self/status").read()
eff = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff:")][0]
print(f"capeff={eff}", flush=True)
def down():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    req = struct.pack("16sH14x", b"kcap0", 0)
    fcntl.ioctl(s, 0x8914, req)  # SIOCSIFFLAGS, IFF_UP cleared
    return True
def out():
    try:
        socket.create_connection(("203.0.113.9", 443), timeout=3).close()
    except OSError as e:
        print(f"out-errno={e.errno}", flush=True)
    return True
probe("link_down", down)
probe("out", out)
print("probes-done", flush=True)
"#;

fn plan(dir: &Path, launch_dir: &Path) -> LaunchPlan {
    LaunchPlan {
        cwd: Some(dir.display().to_string()),
        env: vec![
            EnvVar::new("HOME", format!("{}/home", launch_dir.display())),
            EnvVar::new("PATH", "/usr/bin:/bin"),
        ],
        sandbox: Sandbox::new(
            &launch_dir.display().to_string(),
            Some(&dir.display().to_string()),
        ),
        ..terminal_plan(kcap_mcp_registry::clients::Client::Codex, launch_dir)
    }
}

/// A reviewer behind the door, unconfined by the sandbox, holds no capability after exec:
/// it cannot set the door's tun device down, and its connection out is logged.
#[test]
fn a_reviewer_behind_the_door_cannot_hide_its_way_out_from_the_tun() {
    if !kernel_gives(door::missing(), "KCAP_REQUIRE_DOOR") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let tree = root.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("probe.py"), common::door::python_probe(PROBE)).unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let client = sh_script(
        &bin,
        "reviewer",
        &format!("exec /usr/bin/python3 {}", tree.join("probe.py").display()),
    );
    // Off: the sandbox's own drop is not there (as on a kernel without Landlock).
    for (name, confinement) in [("off", Confinement::Off), ("best", Confinement::BestEffort)] {
        let launch_dir = root.path().join(name);
        let options = Options::default()
            .with_network(Network::Door(vec![Endpoint::new(
                8080,
                "127.0.0.1:9".to_owned(),
            )]))
            .with_confinement(confinement);
        let plan = plan(&tree, &launch_dir);
        let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(60));
        let log = reviewer.door_log();
        reviewer.stop().unwrap();
        assert!(output.contains("probes-done"), "{name}: {output}");
        let answers = probe_answers(&output);
        assert!(
            output.contains("capeff=0000000000000000"),
            "{name}: {output}"
        );
        assert_eq!(answers.get("link_down"), Some(&false), "{name}: {output}");
        // Still up: the attempt is refused at once and named.
        assert!(output.contains("out-errno=113"), "{name}: {output}");
        assert!(
            log.iter()
                .any(|l| l.contains("a TCP connection to 203.0.113.9:443")),
            "{name}: {log:?}"
        );
    }
}

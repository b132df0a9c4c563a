//! Red team h4: a reviewer's command reads the environment of a process the reviewer started
//! (an MCP server's, "which holds what only that server may have", docs/sandbox.md) through
//! `ptrace`, where `/proc/<pid>/environ` is denied. Landlock refuses `ptrace` of a process
//! outside the sandbox only; the reviewer's own processes share its domain, the uid is the
//! same and nothing else (Yama, a seccomp filter) stands in the way, so `PTRACE_ATTACH` and
//! `PTRACE_PEEKDATA` of the sibling's stack read its environment
//! (`tests/fixtures/redteam_h4/peek.py`, a file of the hostile worktree). The same
//! attachment writes (`PTRACE_POKEDATA`, `SETREGS`): `tests/clients/redteam_h4.rs` has a
//! tool make the client itself `TIOCSTI` into the daemon's terminal.
//!
//! Expected: denied in the default sandbox (`Confinement::BestEffort`, here the whole of it);
//! done with `Confinement::Off` (the bite). On main it is done in the sandbox too: this test
//! fails there, as the hole it shows.

use crate::common;

use std::time::Duration;

use common::carry::{kernel_gives, probe_answers, terminal_plan, until_exit};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan, Sandbox};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options};

/// The hostile worktree's reader of another process's stack.
const PEEK: &str = include_str!("../fixtures/redteam_h4/peek.py");

/// One stand-in reviewer under `confinement`: it starts a sibling holding a key in its
/// environment (as a client starts an MCP server), then reads that key through `ptrace`;
/// `sibling_ptrace` is whether it got it, `sibling_environ` whether `/proc/<pid>/environ`
/// gave it.
fn probe(confinement: Confinement) -> std::collections::BTreeMap<String, bool> {
    let root = tempfile::Builder::new()
        .prefix("kcap-h4-")
        .tempdir()
        .unwrap();
    let at = |p: &str| root.path().join(p);
    for dir in ["tree", "bin"] {
        std::fs::create_dir(at(dir)).unwrap();
    }
    std::fs::write(at("tree/peek.py"), PEEK).unwrap();
    let body = format!(
        r#"env SIBLING=sibling-only-key /bin/sleep 20 & s=$!
sleep 0.3
if /usr/bin/python3 {peek} $s SIBLING=sibling-only-key | /bin/grep -q PEEKED; then echo sibling_ptrace=yes; else echo sibling_ptrace=no; fi
if /bin/grep -a -q sibling-only-key /proc/$s/environ 2>/dev/null; then echo sibling_environ=yes; else echo sibling_environ=no; fi
kill $s
echo probes-done
"#,
        peek = at("tree/peek.py").display(),
    );
    let client = sh_script(&at("bin"), "reviewer", &body);
    let launch_dir = at("launch");
    let dir = launch_dir.display();
    let plan = LaunchPlan {
        cwd: Some(at("tree").display().to_string()),
        env: vec![
            EnvVar::new("HOME", format!("{dir}/home")),
            EnvVar::new("TMPDIR", format!("{dir}/tmp")),
            EnvVar::new("PATH", "/usr/bin:/bin"),
        ],
        dirs: vec!["home".into(), "tmp".into()],
        sandbox: Sandbox::new(
            &launch_dir.display().to_string(),
            Some(&at("tree").display().to_string()),
        ),
        ..terminal_plan(Client::Codex, &launch_dir)
    };
    let options = Options::default().with_confinement(confinement);
    let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
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

//! The reviewer's sandbox (`launch::sandbox`), from inside a reviewer: a stand-in client (a
//! shell script in a pseudo-terminal, as Codex runs) runs the attacks of issue 31 as
//! commands and prints what each got. Under `Confinement::Required` every attack is
//! denied while the reviewer's own work (its `HOME`, the worktree, the system's programs)
//! still works; the same launch with `Confinement::Off` shows every attack succeeding, so
//! the test bites.

use crate::common;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::carry::{kernel_gives, probe_answers, until_exit, worktree_plan};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::plan::{LaunchPlan, Sandbox};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, ExecError, Options};
use tempfile::TempDir;

/// The machine around a reviewer: the daemon's HOME with a secret, another reviewer's
/// launch directory with its credentials, a process of the daemon's holding a key in its
/// environment, a listening abstract unix socket, and the reviewer's worktree.
struct World {
    root: TempDir,
    other: Child,
    /// Another reviewer's terminal: its controller end, and its client end's path.
    other_terminal: (std::os::fd::OwnedFd, String),
    _socket: UnixListener,
    socket_name: String,
}

impl World {
    fn new() -> World {
        let root = tempfile::Builder::new()
            .prefix("kcap-sandbox-")
            .tempdir()
            .unwrap();
        let at = |p: &str| root.path().join(p);
        for dir in ["daemon-home", "other-launch", "tree", "bin", "launches"] {
            std::fs::create_dir(at(dir)).unwrap();
        }
        std::fs::write(at("daemon-home/.env"), "ANTHROPIC_API_KEY=daemon-secret\n").unwrap();
        // In the worktree's parent: where Gemini CLI and Qwen Code look for one.
        std::fs::write(at(".env"), "KCAP_FLOW_AGENT_ID=planted\n").unwrap();
        std::fs::write(
            at("other-launch/.credentials.json"),
            "other-reviewer-secret",
        )
        .unwrap();
        std::fs::write(at("tree/README.md"), "the change under review\n").unwrap();
        let other = Command::new("/bin/sleep")
            .arg("60")
            .env_clear()
            .env("ANTHROPIC_API_KEY", "concurrent-reviewer-key")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let socket_name = format!(
            "kcap-sandbox-test-{}",
            root.path().file_name().unwrap().to_string_lossy()
        );
        let socket = abstract_listener(&socket_name);
        World {
            root,
            other,
            other_terminal: terminal(),
            _socket: socket,
            socket_name,
        }
    }

    fn at(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
    }

    /// The stand-in: each probe prints `name=yes` when it got what it tried, `name=no`
    /// otherwise.
    fn client(&self) -> PathBuf {
        let pid = self.other.id();
        let body = format!(
            r#"probe() {{ name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=yes"; else echo "$name=no"; fi; }}
probe daemon_home cat {home}/.env
probe worktree_parent cat {root}/.env
probe worktree_parent_seen test -e {root}/.env
probe root_dir ls /
probe tmp_dir ls /tmp
probe other_launch_dir cat {other}/.credentials.json
probe list_launches ls {launches}
probe other_environ grep -q concurrent-reviewer-key /proc/{pid}/environ
probe sibling_environ sh -c 'env SIBLING=sibling-key /bin/sleep 5 & p=$!; r=1; for i in 1 2 3 4 5 6 7 8 9 10; do if grep -q sibling-key /proc/$p/environ; then r=0; break; fi; sleep 0.1; done; kill $p; exit $r'
probe signal_outside kill -0 {pid}
probe write_outside sh -c 'echo x > {root}/planted'
probe write_worktree sh -c 'echo x > {tree}/planted'
probe shared_tmp sh -c 'echo x > /tmp/kcap-sandbox-planted-{pid}'
probe abstract_socket /usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("\0{socket}")'
probe other_terminal sh -c 'echo planted > {terminal}'
probe etc_shadow cat /etc/shadow
probe etc_passwd cat /etc/passwd
probe etc_certs ls /etc/ssl/certs
probe make_device mknod "$HOME/kmsg" c 1 11
probe root_capability /usr/bin/python3 -c 'import socket; socket.sethostname(socket.gethostname())'
probe own_home sh -c 'echo x > "$HOME/note" && cat "$HOME/note"'
probe own_tmp sh -c 'echo x > "$TMPDIR/note"'
probe read_worktree cat {tree}/README.md
probe system_program /usr/bin/python3 -c 'print(1)'
probe system_node /usr/bin/node -e 'require("os").totalmem()'
probe own_proc grep -q VmRSS /proc/$$/status
probe system_proc grep -q MemTotal /proc/meminfo
probe own_terminal sh -c 'echo x > /dev/tty'
probe new_terminal /usr/bin/python3 -c 'import os; m, s = os.openpty(); os.write(s, b"x"); assert os.read(m, 1) == b"x"'
echo probes-done
"#,
            home = self.at("daemon-home").display(),
            other = self.at("other-launch").display(),
            launches = self.at("launches").display(),
            root = self.root.path().display(),
            tree = self.at("tree").display(),
            socket = self.socket_name,
            terminal = self.other_terminal.1,
        );
        sh_script(&self.at("bin"), "reviewer", &body)
    }

    fn plan(&self, launch_dir: &Path) -> LaunchPlan {
        let codex = kcap_mcp_registry::clients::Client::Codex;
        worktree_plan(codex, &self.at("tree"), launch_dir, "/usr/bin:/bin")
    }

    /// Launches the stand-in under `confinement` and returns each probe's answer.
    fn probe(&self, confinement: Confinement, name: &str) -> BTreeMap<String, bool> {
        self.probe_with(&Options::default().with_confinement(confinement), name)
    }

    /// Launches the stand-in with `options` and returns each probe's answer.
    fn probe_with(&self, options: &Options, name: &str) -> BTreeMap<String, bool> {
        let launch_dir = self.at("launches").join(name);
        let plan = self.plan(&launch_dir);
        let mut reviewer = launch::launch(&plan, &self.client(), options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
        reviewer.stop().unwrap();
        probe_answers(&self.clean_up(&output))
    }

    /// Removes what a probe planted; returns `output` once it shows every probe ran.
    fn clean_up(&self, output: &str) -> String {
        let _ = std::fs::remove_file(format!("/tmp/kcap-sandbox-planted-{}", self.other.id()));
        let _ = std::fs::remove_file(self.at("planted"));
        let _ = std::fs::remove_file(self.at("tree/planted"));
        assert!(output.contains("probes-done"), "{output}");
        output.to_owned()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.other.kill();
        let _ = self.other.wait();
    }
}

/// A new pseudo-terminal pair of the test's (another reviewer's terminal): its controller
/// end and its client end's path (`/dev/pts/N`).
fn terminal() -> (std::os::fd::OwnedFd, String) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    (master, name.into_string().unwrap())
}

fn abstract_listener(name: &str) -> UnixListener {
    use std::os::linux::net::SocketAddrExt as _;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    UnixListener::bind_addr(&addr).unwrap()
}

const ATTACKS: &[&str] = &[
    "daemon_home",
    "worktree_parent",
    "root_dir",
    "tmp_dir",
    "other_launch_dir",
    "list_launches",
    "other_environ",
    "sibling_environ",
    "signal_outside",
    "write_outside",
    "write_worktree",
    "shared_tmp",
    "abstract_socket",
    "other_terminal",
];
/// What only a root reviewer could do, and only with the sandbox off: create a device file in
/// its launch directory (a block device is every file of its disk), use a capability beyond
/// the file system's (set the hostname), found by the red team of stop 43; read
/// `/etc/shadow`, which root owns (the red team of issue 31: `SYSTEM_SECRETS`).
const ROOT_ATTACKS: &[&str] = &["make_device", "root_capability", "etc_shadow"];
const OWN_WORK: &[&str] = &[
    "etc_passwd",
    "etc_certs",
    "own_home",
    "own_tmp",
    "read_worktree",
    "system_program",
    "system_node",
    "own_proc",
    "system_proc",
    "own_terminal",
    "new_terminal",
];

fn sandbox_available() -> bool {
    kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX")
}

#[test]
fn every_attack_is_denied_in_the_sandbox_and_succeeds_without_it() {
    if !sandbox_available() {
        return;
    }
    let world = World::new();
    let confined = world.probe(Confinement::Required, "confined");
    let open = world.probe(Confinement::Off, "open");
    for attack in ATTACKS {
        assert_eq!(
            confined.get(*attack),
            Some(&false),
            "{attack} in the sandbox: {confined:?}"
        );
        assert_eq!(
            open.get(*attack),
            Some(&true),
            "{attack} without the sandbox: {open:?}"
        );
    }
    let root = rustix::process::geteuid().is_root();
    for attack in ROOT_ATTACKS {
        assert_eq!(
            confined.get(*attack),
            Some(&false),
            "{attack} in the sandbox: {confined:?}"
        );
        if root {
            assert_eq!(
                open.get(*attack),
                Some(&true),
                "{attack} without the sandbox, as root: {open:?}"
            );
        }
    }
    for work in OWN_WORK {
        assert_eq!(
            confined.get(*work),
            Some(&true),
            "{work} in the sandbox: {confined:?}"
        );
        assert_eq!(
            open.get(*work),
            Some(&true),
            "{work} without the sandbox: {open:?}"
        );
    }
    // The sandbox refuses opening a file outside it, not seeing that it exists: a client
    // that looks for `.env` in the worktree's parents (Gemini CLI, Qwen Code) finds the
    // parent's and cannot read it (`tests/clients/env_race.rs`).
    assert_eq!(
        confined.get("worktree_parent_seen"),
        Some(&true),
        "{confined:?}"
    );
    // Nothing was planted where the sandbox denied it.
    assert!(!world.at("planted").exists());
    assert!(!world.at("tree/planted").exists());
}

/// The sandbox is on by default: `Options::default()` and the CLI's `launch` without
/// `--sandbox` confine the reviewer (every attack denied, its own work done); `--sandbox off`
/// lets every attack through (the bite); `--strict` asks for the whole sandbox.
#[test]
fn the_sandbox_is_on_by_default() {
    if !sandbox_available() {
        return;
    }
    let world = World::new();
    let library = world.probe_with(&Options::default(), "library-default");
    for attack in ATTACKS {
        assert_eq!(library.get(*attack), Some(&false), "{attack}: {library:?}");
    }
    #[cfg(feature = "cli")]
    {
        let launch = |name: &str, more: &[&str]| {
            let launch_dir = world.at("launches").join(name);
            let file = world.at(&format!("{name}.json"));
            std::fs::write(&file, world.plan(&launch_dir).to_json()).unwrap();
            let r = crate::launch::launch_plan(&file, &launch_dir, &world.client(), more);
            assert_eq!(r.code, 0, "{r:?}");
            (probe_answers(&world.clean_up(&r.stdout)), r)
        };
        let (cli, r) = launch("cli-default", &[]);
        assert!(
            !r.stderr.contains("warning: the sandbox is partial"),
            "{r:?}"
        );
        let (open, _) = launch("cli-off", &["--sandbox", "off"]);
        for attack in ATTACKS {
            assert_eq!(cli.get(*attack), Some(&false), "{attack}: {cli:?}");
            assert_eq!(open.get(*attack), Some(&true), "{attack}: {open:?}");
        }
        for work in OWN_WORK {
            assert_eq!(cli.get(*work), Some(&true), "{work}: {cli:?}");
        }
        // `--strict` reads the client's version first (a proven one here); the dry run starts
        // nothing else.
        std::fs::create_dir_all(world.at("versioned")).unwrap();
        let versioned = sh_script(
            &world.at("versioned"),
            "codex-0.171.0",
            r#"[ "$1" = --version ] && echo "codex-cli 0.171.0""#,
        );
        let dry = |more: &[&str]| {
            let tree = world.at("tree").display().to_string();
            let dir = world.at("launches/dry").display().to_string();
            let client = match more.contains(&"--strict") {
                true => versioned.display().to_string(),
                false => world.client().display().to_string(),
            };
            let mut args = vec![
                "launch",
                "codex",
                "--agent-id",
                "a1",
                "--worktree",
                &tree,
                "--launch-dir",
                &dir,
                "--client-bin",
                &client,
                "--dry-run",
            ];
            args.extend(more);
            if more.contains(&"--strict") {
                // The strict policy refuses a launch whose MCP servers are gated off.
                args.extend([
                    "--server-url",
                    "http://127.0.0.1:9",
                    "--kcap-bin",
                    "/bin/true",
                ]);
            }
            let r = crate::common::run(&args);
            assert_eq!(r.code, 0, "{r:?}");
            r.stdout
        };
        assert!(dry(&[]).contains("in the sandbox (BestEffort, Landlock)"));
        assert!(dry(&["--strict"]).contains("in the sandbox (Required, Landlock)"));
        assert!(!dry(&["--strict", "--sandbox", "off"]).contains("in the sandbox"));
        // A rendered launch's kcap binary (its MCP servers) and cache are in the boundary.
        let steps = dry(&[
            "--server-url",
            "http://127.0.0.1:9/kcap",
            "--kcap-bin",
            "/opt/kcap/bin/kcap",
            "--cache-dir",
            "/var/cache/kcap",
        ]);
        let confine = steps
            .lines()
            .find(|l| l.contains("in the sandbox"))
            .unwrap();
        let (exec, rest) = confine.split_once("; read ").unwrap();
        let (_, write) = rest.split_once("; read and write ").unwrap();
        assert!(exec.contains(" /opt/kcap/bin/kcap"), "{confine}");
        assert!(exec.contains(" /var/cache/kcap"), "{confine}");
        assert!(!write.contains("/var/cache/kcap"), "{confine}");
        assert!(!dry(&[]).contains("/opt/kcap/bin/kcap"));
    }
}

#[test]
fn a_required_sandbox_the_kernel_lacks_is_refused_before_anything_is_created() {
    // On this kernel the sandbox is whole; the refusal is shown through its error text and
    // the preflight's result, which `missing()` decides.
    if sandbox::missing().is_none() {
        assert!(sandbox::kernel_abi() >= sandbox::SANDBOX_ABI);
        return;
    }
    let world = World::new();
    let launch_dir = world.at("launches/refused");
    let plan = world.plan(&launch_dir);
    let options = Options::default().with_confinement(Confinement::Required);
    let err = launch::launch(&plan, &world.client(), &options).unwrap_err();
    assert!(matches!(err, ExecError::NoSandbox { .. }), "{err}");
    assert!(!launch_dir.exists());
}

#[test]
fn the_boundary_names_the_clients_installation_and_the_launch_directory() {
    let world = World::new();
    let launch_dir = world.at("launches/l1");
    let plan = world.plan(&launch_dir);
    let client = world.client();
    let options = Options::default().with_sandbox_read_exec("/opt/kcap/bin/kcap");
    let b = sandbox::Boundary::of(&plan, &client, None, &options);
    // A client outside node_modules: the file, not the directory it shares.
    let bin = std::fs::canonicalize(&client).unwrap();
    assert!(b.read_exec.contains(&bin), "{b:?}");
    assert!(
        !b.read_exec.contains(&bin.parent().unwrap().to_owned()),
        "{b:?}"
    );
    assert!(b.read_exec.contains(&PathBuf::from("/opt/kcap/bin/kcap")));
    let mut read = vec![world.at("tree")];
    read.extend(sandbox::SYSTEM_PROC_READ.iter().map(PathBuf::from));
    assert_eq!(b.read, read);
    assert_eq!(b.read_write[0], launch_dir);
    // A node package: the outermost node_modules, not the directory holding it.
    let pkg = world.at("prefix/node_modules/@x/cli/node_modules/dep");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("main.js"), "").unwrap();
    let found = sandbox::installation(&pkg.join("main.js"), None);
    assert_eq!(
        found,
        vec![std::fs::canonicalize(world.at("prefix/node_modules")).unwrap()]
    );
    let mut head = String::new();
    std::fs::File::open(&client)
        .unwrap()
        .read_to_string(&mut head)
        .unwrap();
    assert!(head.starts_with("#!"));
}

/// A client outside `node_modules` reaches its own file and its `#!` interpreter's, not the
/// directories they share with other files (a client at `~/bin/claude` or `~/.local/bin/x`):
/// a stand-in in `bin/`, run through an interpreter script in `tools/`, and a Node.js
/// stand-in beside it, each try to read the `secret` beside them. In the sandbox both
/// start and read neither secret; without it (the bite) both read them. With the boundary
/// holding each file's directory (as before), the sandbox let both reads through.
#[test]
fn a_client_outside_node_modules_reaches_its_file_not_its_directory() {
    use common::stand_in::write_executable;
    if !sandbox_available() {
        return;
    }
    let world = World::new();
    std::fs::create_dir(world.at("tools")).unwrap();
    for dir in ["bin", "tools"] {
        std::fs::write(world.at(dir).join("secret"), "sibling-secret\n").unwrap();
    }
    let interpreter = sh_script(&world.at("tools"), "interp", r#"exec /bin/sh "$@""#);
    let (bin, tools) = (world.at("bin"), world.at("tools"));
    let shell = world.at("bin/shell-reviewer");
    write_executable(
        &shell,
        format!(
            r#"#!{interpreter}
probe() {{ name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=yes"; else echo "$name=no"; fi; }}
probe started true
probe own_file /bin/grep -q probes-done {shell}
probe bin_secret cat {bin}/secret
probe list_bin ls {bin}
probe interpreter_secret cat {tools}/secret
echo probes-done
"#,
            interpreter = interpreter.display(),
            shell = shell.display(),
            bin = bin.display(),
            tools = tools.display(),
        ),
    );
    let node = world.at("bin/node-reviewer");
    write_executable(
        &node,
        format!(
            r#"#!/usr/bin/env node
const fs = require("fs");
const probe = (name, f) => {{ try {{ f(); console.log(name + "=yes"); }} catch {{ console.log(name + "=no"); }} }};
probe("started", () => {{}});
probe("bin_secret", () => fs.readFileSync({secret:?}));
probe("list_bin", () => fs.readdirSync({bin:?}));
console.log("probes-done");
"#,
            secret = bin.join("secret").display().to_string(),
            bin = bin.display().to_string(),
        ),
    );
    let run = |client: &Path, name: &str, confinement: Confinement| {
        let launch_dir = world.at("launches").join(name);
        let options = Options::default().with_confinement(confinement);
        let mut reviewer = launch::launch(&world.plan(&launch_dir), client, &options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
        reviewer.stop().unwrap();
        probe_answers(&world.clean_up(&output))
    };
    for (client, reads) in [
        (
            &shell,
            &["bin_secret", "list_bin", "interpreter_secret"][..],
        ),
        (&node, &["bin_secret", "list_bin"][..]),
    ] {
        let name = client.file_name().unwrap().to_str().unwrap();
        let confined = run(client, &format!("{name}-confined"), Confinement::Required);
        let open = run(client, &format!("{name}-open"), Confinement::Off);
        assert_eq!(confined.get("started"), Some(&true), "{name}: {confined:?}");
        if client == &shell {
            assert_eq!(confined.get("own_file"), Some(&true), "{confined:?}");
        }
        for read in reads {
            assert_eq!(confined.get(*read), Some(&false), "{name}: {confined:?}");
            assert_eq!(open.get(*read), Some(&true), "{name}: {open:?}");
        }
    }
}

/// The plan's `sandbox` is the boundary the executor installs: a plan that lists the worktree
/// as read-write lets the reviewer write there (and nothing more), and a plan that leaves the
/// launch directory out of it leaves the reviewer without its own `HOME`. An executor that
/// computed the boundary itself would answer the same for all three plans.
#[test]
fn the_plans_sandbox_is_the_boundary_the_executor_installs() {
    if !sandbox_available() {
        return;
    }
    let world = World::new();
    let run = |name: &str, change: &dyn Fn(&mut Sandbox)| {
        let launch_dir = world.at("launches").join(name);
        let mut plan = world.plan(&launch_dir);
        change(&mut plan.sandbox);
        let options = Options::default().with_confinement(Confinement::Required);
        let mut reviewer = launch::launch(&plan, &world.client(), &options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
        reviewer.stop().unwrap();
        probe_answers(&world.clean_up(&output))
    };
    let tree = world.at("tree").display().to_string();
    let as_planned = run("as-planned", &|_| {});
    let writable = run("tree-writable", &|s| s.read_write.push(tree.clone()));
    let homeless = run("no-launch-dir", &|s| {
        s.read_write.remove(0);
    });
    assert_eq!(
        as_planned.get("write_worktree"),
        Some(&false),
        "{as_planned:?}"
    );
    assert_eq!(writable.get("write_worktree"), Some(&true), "{writable:?}");
    assert_eq!(as_planned.get("own_home"), Some(&true), "{as_planned:?}");
    assert_eq!(homeless.get("own_home"), Some(&false), "{homeless:?}");
    for attack in ATTACKS.iter().filter(|a| **a != "write_worktree") {
        assert_eq!(
            writable.get(*attack),
            Some(&false),
            "{attack}: {writable:?}"
        );
    }
}

/// A sandbox path the kernel would resolve against the executor's working directory, or
/// through a `..`, is refused before anything is created, naming the path.
#[test]
fn a_sandbox_path_that_is_not_plain_and_absolute_is_refused() {
    let world = World::new();
    for (path, problem) in [
        ("tree", "is not absolute"),
        ("/srv/../etc", "`..`"),
        ("//srv", "empty component"),
        ("/", "the whole file system"),
    ] {
        let launch_dir = world.at("launches/refused");
        let mut plan = world.plan(&launch_dir);
        plan.sandbox.read.push(path.to_owned());
        let err = launch::launch(&plan, &world.client(), &Options::default()).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains(&format!("sandbox path \"{path}\"")) && shown.contains(problem),
            "{path}: {shown}"
        );
        assert!(!launch_dir.exists());
    }
}

/// The daemon's cache directory is shared by every launch (`--cache-dir`: Copilot CLI runs
/// the package it unpacked there). A reviewer of a rendered plan reads and runs what is in
/// it, and plants nothing there: the red team of issue 31 rewrote Copilot CLI's `index.js`
/// from a Claude Code reviewer, and the next Copilot CLI reviewer ran it holding its GitHub
/// token. The bite: the same plan with the cache writable (as it was) lets the plant through.
#[test]
fn a_reviewer_runs_the_shared_cache_and_plants_nothing_in_it() {
    use kcap_mcp_registry::LaunchContext;
    use kcap_mcp_registry::Policy;
    use kcap_mcp_registry::clients::Client;
    use kcap_mcp_registry::clients::dispatch::PlanInputs;
    if !sandbox_available() {
        return;
    }
    let world = World::new();
    let cache = world.at("cache");
    std::fs::create_dir_all(cache.join("copilot")).unwrap();
    let index = cache.join("copilot/index.js");
    std::fs::write(&index, "the unpacked package\n").unwrap();
    let body = format!(
        r#"probe() {{ name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=yes"; else echo "$name=no"; fi; }}
probe read_cache grep -q unpacked {index}
probe plant_cache sh -c 'echo planted > {index}'
probe plant_new sh -c 'echo planted > {cache}/copilot/new.js'
echo probes-done
"#,
        index = index.display(),
        cache = cache.display(),
    );
    let client = sh_script(&world.at("bin"), "cache-reviewer", &body);
    let run = |name: &str, writable: bool| {
        let launch_dir = world.at("launches").join(name);
        let ctx = LaunchContext {
            agent_id: "a1".into(),
            worktree: Some(world.at("tree").display().to_string()),
            launch_dir: Some(launch_dir.display().to_string()),
            cache_dir: Some(cache.display().to_string()),
            ..LaunchContext::default()
        };
        let rendered = Client::Claude
            .plan(&ctx, &PlanInputs::new(Policy::Lenient))
            .unwrap()
            .plan;
        let mut plan = world.plan(&launch_dir);
        plan.sandbox = rendered.sandbox;
        if writable {
            plan.sandbox.read_write.push(cache.display().to_string());
        }
        let options = Options::default().with_confinement(Confinement::Required);
        let mut reviewer = launch::launch(&plan, &client, &options).unwrap();
        let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
        reviewer.stop().unwrap();
        assert!(output.contains("probes-done"), "{output}");
        probe_answers(&output)
    };
    let planned = run("cache-as-planned", false);
    assert_eq!(planned.get("read_cache"), Some(&true), "{planned:?}");
    assert_eq!(planned.get("plant_cache"), Some(&false), "{planned:?}");
    assert_eq!(planned.get("plant_new"), Some(&false), "{planned:?}");
    assert_eq!(
        std::fs::read_to_string(&index).unwrap(),
        "the unpacked package\n"
    );
    let open = run("cache-writable", true);
    assert_eq!(open.get("plant_cache"), Some(&true), "{open:?}");
    assert_eq!(open.get("plant_new"), Some(&true), "{open:?}");
}

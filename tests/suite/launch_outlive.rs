//! Nothing of a reviewer outlives it, or the executor (issue 33, item 1), against stand-in
//! clients that leave their process group (`setsid`, a double fork into a new session):
//! - `Reviewer::stop` leaves none of their processes alive; with the cgroup off, the one
//!   that left the group lives on (what the cgroup is for);
//! - an executor killed with `SIGKILL` (this test binary run again as the executor, and the
//!   `launch` CLI) leaves none within a bound; with the cgroup off, the one that left the
//!   group lives on;
//! - an executor and its guard both killed: the next executor's first launch sweeps them.
//!
//! Every process of a stand-in carries a marker in its command line; the tests look for it
//! in `/proc/*/cmdline` (zombies aside). The executors killed run in a cgroup of the test's
//! own, so that only their guard (or the sweep tested) can have killed their reviewers.

use crate::common;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::stand_in::sh_script;
use kcap_mcp_registry::launch::{self, Options, sandbox::Confinement};
use rustix::process::{Pid, Signal};
use tempfile::TempDir;

use crate::launch::bare_plan;

/// Set in the copy of this binary that is the executor killed.
const EXECUTOR: &str = "KCAP_TEST_OUTLIVE_EXECUTOR";

/// How long the processes of a reviewer whose executor was killed may take to be gone.
const BOUND: Duration = Duration::from_secs(5);

/// Whether this machine gives the reviewer's cgroup; when it does not, says why and the test
/// is skipped (fails under `KCAP_REQUIRE_PEERS=1`, as `.ci/run` sets).
pub(crate) fn cgroups(name: &str) -> bool {
    let Some(missing) = launch::cgroup::missing() else {
        return true;
    };
    assert!(
        std::env::var_os("KCAP_REQUIRE_PEERS").is_none_or(|v| v != "1"),
        "no reviewer's cgroup here ({missing}); KCAP_REQUIRE_PEERS=1"
    );
    eprintln!("skipped {name}: this machine lacks {missing}");
    false
}

/// The ways out of the process group, as shell lines; `{m}` is the marker, and the process
/// that leaves holds `{m}-out`. (Each marked process sleeps a second at a time: once it is
/// killed, its unmarked `sleep` ends within a second.)
const ESCAPES: [(&str, &str); 2] = [
    (
        "setsid",
        "setsid sh -c 'while :; do sleep 1; done' {m}-out &",
    ),
    (
        "double fork",
        "(setsid sh -c 'sh -c \"while :; do sleep 1; done\" \"$0-out\" & exit 0' {m} &)",
    ),
];

/// A terminal stand-in that starts `escape` and then sleeps itself, every process of it
/// marked with `marker` (itself `{marker}-client`).
fn stand_in(dir: &Path, escape: &str, marker: &str) -> PathBuf {
    let escape = escape.replace("{m}", marker);
    sh_script(
        dir,
        "escaping",
        &format!("{escape}\necho started\nexec sh -c 'while :; do sleep 1; done' {marker}-client"),
    )
}

/// A marker no other process has: this process's pid, the case and a counter.
fn new_marker(case: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "kcap-outlive-{}-{}-{n}",
        std::process::id(),
        case.replace(' ', "-")
    )
}

/// The live processes (not zombies) whose command line holds `marker`.
fn alive(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if !cmdline
            .windows(marker.len())
            .any(|w| w == marker.as_bytes())
        {
            continue;
        }
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, r)| r.trim_start().starts_with('Z'))
            });
        if zombie == Some(false) {
            found.push(pid);
        }
    }
    found
}

/// Waits (at most 10 s) until the stand-in of `marker` runs: the client and the process out
/// of its group, once it is out (`setsid(1)` holds the marker before it calls `setsid(2)`;
/// a stop then would still find it in the group).
fn until_alive(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let out_of_group = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() != "setsid")
    };
    for part in ["client", "out"] {
        let marked = format!("{marker}-{part}");
        while !alive(&marked).iter().any(out_of_group) {
            assert!(Instant::now() < deadline, "{marked} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits up to `bound` for no process to hold `marker`; how long it took, or what is left.
fn until_gone(marker: &str, bound: Duration) -> Result<Duration, Vec<u32>> {
    let started = Instant::now();
    loop {
        let found = alive(marker);
        if found.is_empty() {
            return Ok(started.elapsed());
        }
        if started.elapsed() > bound {
            return Err(found);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Without the cgroup: the process out of the group is alive (what the cgroup is for);
/// then kills what is left of the stand-in (by the pids just seen: sleeping stand-ins of
/// this test only).
fn assert_outlived(marker: &str, case: &str) {
    let out = alive(&format!("{marker}-out"));
    for pid in alive(marker) {
        if let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
    }
    // One, or two for a moment: its fork for the next `sleep` holds its command line until
    // it execs (seen under 4 test threads).
    assert!(
        !out.is_empty(),
        "{case}, no cgroup: the process out of the group lives on"
    );
}

/// A cgroup of a test's own (not a reviewers' cgroup), under this process's: an executor
/// started in it sweeps there only, and only there is swept, so that no executor of another
/// test kills what this test's guard or sweep must. Removed when dropped, once empty.
pub(crate) struct TestCgroup(PathBuf);

impl TestCgroup {
    pub(crate) fn new(case: &str) -> TestCgroup {
        let dir = launch::cgroup::own_cgroup()
            .unwrap()
            .join(format!("outlive-test-{}", new_marker(case)));
        std::fs::create_dir(&dir).unwrap();
        TestCgroup(dir)
    }

    /// The reviewers' cgroups of the executor `pid` in it.
    fn of(&self, pid: u32) -> Vec<PathBuf> {
        let prefix = format!("{}{pid}-", launch::cgroup::PREFIX);
        std::fs::read_dir(&self.0)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // An executor's guard removes its reviewers' cgroup once the executor is gone.
        let deadline = Instant::now() + BOUND;
        while std::fs::remove_dir(&self.0).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `program`, started in the cgroup `cgroup` (by a shell that moves itself there and execs
/// it).
pub(crate) fn command(program: &Path, cgroup: &TestCgroup) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.args(["-c", "echo 0 > \"$0/cgroup.procs\" && exec \"$@\""])
        .arg(&cgroup.0)
        .arg(program);
    cmd
}

pub(crate) fn sigkill(child: &mut Child) {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, Signal::KILL).unwrap();
    let _ = child.wait();
}

#[test]
fn a_stop_leaves_no_process_that_left_the_process_group() {
    if !cgroups("a_stop_leaves_no_process_that_left_the_process_group") {
        return;
    }
    for (case, escape) in ESCAPES {
        for policy in [Confinement::BestEffort, Confinement::Off] {
            let tmp = TempDir::new().unwrap();
            let marker = new_marker(case);
            let bin = stand_in(tmp.path(), escape, &marker);
            let plan = bare_plan(Path::new("unused"), &tmp.path().join("launch"));
            let options = Options::default().with_cgroup(policy);
            let reviewer = launch::launch(&plan, &bin, &options).unwrap();
            until_alive(&marker);
            reviewer.stop().unwrap();
            if policy == Confinement::Off {
                assert_outlived(&marker, case);
            } else {
                assert_eq!(
                    alive(&marker),
                    Vec::<u32>::new(),
                    "{case}: alive after the stop"
                );
            }
        }
    }
}

/// This test binary again, alone, in `cgroup`, as an executor that launches `bin` with the
/// cgroup `policy` and waits; returns it once it has launched.
fn executor(bin: &Path, launch_dir: &Path, policy: &str, cgroup: &TestCgroup) -> Child {
    const NAME: &str = "launch_outlive::the_executor_killed_leaves_no_process_of_its_reviewer";
    let mut child = command(&std::env::current_exe().unwrap(), cgroup)
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(EXECUTOR, policy)
        .env("KCAP_TEST_BIN", bin)
        .env("KCAP_TEST_LAUNCH_DIR", launch_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let launched = lines.find(|l| l.as_ref().is_ok_and(|l| l.contains("launched ")));
    assert!(launched.is_some(), "the executor did not launch");
    child
}

/// The executor's part: launch, say so, wait to be killed (at most 60 s).
fn be_the_executor(policy: &str) {
    let bin = PathBuf::from(std::env::var_os("KCAP_TEST_BIN").unwrap());
    let launch_dir = PathBuf::from(std::env::var_os("KCAP_TEST_LAUNCH_DIR").unwrap());
    let policy = match policy {
        "off" => Confinement::Off,
        _ => Confinement::Required,
    };
    let plan = bare_plan(Path::new("unused"), &launch_dir);
    let options = Options::default().with_cgroup(policy);
    let reviewer = launch::launch(&plan, &bin, &options).unwrap();
    println!("launched {}", reviewer.pid());
    std::thread::sleep(Duration::from_secs(60));
    reviewer.stop().unwrap();
}

#[test]
fn the_executor_killed_leaves_no_process_of_its_reviewer() {
    if let Some(policy) = std::env::var_os(EXECUTOR) {
        be_the_executor(&policy.to_string_lossy());
        return;
    }
    if !cgroups("the_executor_killed_leaves_no_process_of_its_reviewer") {
        return;
    }
    for (case, escape) in ESCAPES {
        for policy in ["required", "off"] {
            let own = TestCgroup::new(case);
            let tmp = TempDir::new().unwrap();
            let marker = new_marker(case);
            let bin = stand_in(tmp.path(), escape, &marker);
            let mut child = executor(&bin, &tmp.path().join("launch"), policy, &own);
            let pid = child.id();
            until_alive(&marker);
            sigkill(&mut child);
            if policy == "off" {
                // The client dies of its terminal's hangup; what left its group lives on.
                std::thread::sleep(Duration::from_millis(500));
                assert_outlived(&marker, case);
                continue;
            }
            match until_gone(&marker, BOUND) {
                Ok(took) => eprintln!("{case}: gone {took:?} after the executor's SIGKILL"),
                Err(left) => panic!("{case}: alive {BOUND:?} after the executor: {left:?}"),
            }
            // Its reviewers' cgroup goes with them (the guard removes it).
            let deadline = Instant::now() + BOUND;
            while !own.of(pid).is_empty() {
                assert!(Instant::now() < deadline, "{:?}", own.of(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The executor's guard: its child named `kcap-guard`.
#[cfg(feature = "cli")]
fn guard_of(pid: u32) -> Pid {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if comm.trim() == "kcap-guard" && ppid == Some(pid) {
            return Pid::from_raw(child).unwrap();
        }
    }
    panic!("no guard of {pid}")
}

#[cfg(feature = "cli")]
#[test]
fn what_an_executor_and_its_guard_killed_together_left_is_swept_at_the_next_start() {
    if !cgroups("what_an_executor_and_its_guard_killed_together_left_is_swept_at_the_next_start") {
        return;
    }
    let own = TestCgroup::new("swept");
    let tmp = TempDir::new().unwrap();
    let marker = new_marker("swept");
    let bin = stand_in(tmp.path(), ESCAPES[0].1, &marker);
    let mut child = executor(&bin, &tmp.path().join("launch"), "required", &own);
    let pid = child.id();
    until_alive(&marker);
    rustix::process::kill_process(guard_of(pid), Signal::KILL).unwrap();
    sigkill(&mut child);
    std::thread::sleep(Duration::from_millis(500));
    let out = alive(&format!("{marker}-out"));
    assert_eq!(out.len(), 1, "without its guard, nothing killed it");
    assert_eq!(own.of(pid).len(), 1);
    // Another user (uid 65534) takes the free `flock` of the dead executor's cgroup, so that
    // the sweep would pass its reviewers over (red team of issue 33: they lived on with the
    // cgroup `0755`); it cannot open the directory (`0700`). Bite: made `0755`, this fails.
    let mut holder = (rustix::process::geteuid().is_root() && Path::new("/usr/bin/flock").exists())
        .then(|| {
            let dir = own.of(pid).remove(0);
            let mut child = std::process::Command::new("/usr/bin/setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .args(["/usr/bin/flock", "-n"])
                .arg(&dir)
                .args(["/bin/sleep", "30"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(300));
            // Still running: it opened the directory and holds its lock.
            let holds = child.try_wait().unwrap().is_none();
            (child, holds)
        });
    // The next executor (the CLI, a client that exits at once), at its first launch.
    let quick = sh_script(tmp.path(), "quick", "exit 0");
    let file = tmp.path().join("plan.json");
    let launch_dir = tmp.path().join("launch-2");
    let plan = bare_plan(Path::new("unused"), &launch_dir);
    std::fs::write(&file, plan.to_json()).unwrap();
    let next = command(Path::new(env!("CARGO_BIN_EXE_kcap-mcp-registry")), &own)
        .args(["launch", "--cgroup", "required", "--plan"])
        .arg(&file)
        .arg("--client-bin")
        .arg(&quick)
        .output()
        .unwrap();
    assert!(next.status.success(), "{next:?}");
    // The sweep waits for what it killed to be gone.
    let left = alive(&marker);
    if let Some((child, holds)) = holder.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            !*holds,
            "another user held the dead executor's cgroup lock (left alive: {left:?})"
        );
    }
    assert_eq!(left, Vec::<u32>::new(), "was {out:?}");
    assert_eq!(own.of(pid), Vec::<PathBuf>::new());
}

/// `launch --plan` of the stand-in of `escape` in `own` with `more`, its stderr read up to
/// the `started` line.
#[cfg(feature = "cli")]
fn cli(tmp: &Path, escape: &str, marker: &str, own: &TestCgroup, more: &[&str]) -> Child {
    let bin = stand_in(tmp, escape, marker);
    let launch_dir = tmp.join("launch");
    let file = tmp.join("plan.json");
    std::fs::write(&file, bare_plan(Path::new("unused"), &launch_dir).to_json()).unwrap();
    started(
        command(Path::new(env!("CARGO_BIN_EXE_kcap-mcp-registry")), own)
            .args(["launch", "--plan"])
            .arg(&file)
            .arg("--client-bin")
            .arg(&bin)
            .args(more),
    )
}

/// `launch` spawned from `cmd`, its output dropped, once its first line on standard error
/// says `started`.
#[cfg(feature = "cli")]
pub(crate) fn started(cmd: &mut Command) -> Child {
    let mut cli = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(cli.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.starts_with("started"), "{first}");
    cli
}

#[cfg(feature = "cli")]
#[test]
fn launch_stopped_or_killed_leaves_no_process_of_its_reviewer() {
    if !cgroups("launch_stopped_or_killed_leaves_no_process_of_its_reviewer") {
        return;
    }
    for (case, escape) in ESCAPES {
        // Stopped at its --timeout.
        let own = TestCgroup::new(case);
        let tmp = TempDir::new().unwrap();
        let marker = new_marker(case);
        let mut run = cli(tmp.path(), escape, &marker, &own, &["--timeout", "2"]);
        until_alive(&marker);
        assert_eq!(run.wait().unwrap().code(), Some(1));
        assert_eq!(alive(&marker), Vec::<u32>::new(), "{case}: after --timeout");
        // Killed with SIGKILL, with the cgroup and without.
        for policy in ["required", "off"] {
            let own = TestCgroup::new(case);
            let tmp = TempDir::new().unwrap();
            let marker = new_marker(case);
            let more = ["--timeout", "60", "--cgroup", policy];
            let mut run = cli(tmp.path(), escape, &marker, &own, &more);
            until_alive(&marker);
            sigkill(&mut run);
            if policy == "off" {
                // The client dies with it (die_with_parent); what left its group does not.
                std::thread::sleep(Duration::from_millis(500));
                assert_outlived(&marker, case);
                continue;
            }
            match until_gone(&marker, BOUND) {
                Ok(took) => eprintln!("{case}: gone {took:?} after launch's SIGKILL"),
                Err(left) => panic!("{case}: alive {BOUND:?} after launch's SIGKILL: {left:?}"),
            }
        }
    }
}

//! Credentials do not outlive a killed executor by more than the guard's bound (issue 33,
//! item 2): `launch` (the CLI, in a cgroup of the test's own) writes a credential file into
//! its launch directory and starts a stand-in; killed with `SIGKILL`, its guard kills the
//! reviewer and then sweeps the launch directory's parent, with no other launch. A launch
//! directory of a live launch in the same parent (this test process's, its lock held) stays.
//! Bites: with the guard's sweep left out (`sweep_parents` not called in
//! src/launch/guard.rs), the launch directory and its `auth.json` stay.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use kcap_mcp_registry::clients::plan::PlanFile;
use kcap_mcp_registry::launch::{self, Options, sandbox::Confinement};
use tempfile::TempDir;

use crate::common::stand_in::sh_script;
use crate::launch::bare_plan;
use crate::launch_outlive::{TestCgroup, cgroups, command, sigkill, started};

/// How long the launch directory of a launch older than [`launch::SWEEP_MIN_AGE`] may
/// outlive its executor's `SIGKILL` (the guard's reaction: kill, then sweep).
const BOUND: Duration = Duration::from_secs(1);

/// `launch --plan` of `bin` into `launch_dir` with a credential file, in `own`, required
/// cgroup; returned once it says it started.
fn cli(tmp: &Path, bin: &Path, launch_dir: &Path, own: &TestCgroup) -> Child {
    let mut plan = bare_plan(Path::new("unused"), launch_dir);
    plan.files.push(PlanFile {
        path: "home/.codex/auth.json".into(),
        contents: r#"{"OPENAI_API_KEY":"kcap-test-dummy-key"}"#.into(),
        mode: 0o600,
    });
    let file = tmp.join(format!(
        "plan-{}.json",
        launch_dir.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&file, plan.to_json()).unwrap();
    let cli = started(
        command(Path::new(env!("CARGO_BIN_EXE_kcap-mcp-registry")), own)
            .args(["launch", "--plan"])
            .arg(&file)
            .arg("--client-bin")
            .arg(bin)
            .args(["--timeout", "60", "--cgroup", "required"]),
    );
    assert!(launch_dir.join("home/.codex/auth.json").is_file());
    cli
}

/// How long `dir` took to be gone, polled every 5 ms up to `bound`.
fn until_gone(dir: &Path, since: Instant, bound: Duration) -> Result<Duration, ()> {
    loop {
        if !dir.exists() {
            return Ok(since.elapsed());
        }
        if since.elapsed() > bound {
            return Err(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_guard_removes_a_killed_executors_launch_directory_and_not_a_live_ones() {
    if !cgroups("the_guard_removes_a_killed_executors_launch_directory_and_not_a_live_ones") {
        return;
    }
    let tmp = TempDir::new().unwrap();
    let parent = tmp.path().join("launches");
    std::fs::create_dir(&parent).unwrap();
    let bin = sh_script(tmp.path(), "long", "echo reviewing\nsleep 60");
    // A live launch beside it, this process's: its lock is held.
    let live_dir = parent.join("live");
    let options = Options::default().with_cgroup(Confinement::Off);
    let live = launch::launch(&bare_plan(Path::new("unused"), &live_dir), &bin, &options).unwrap();
    // A launch older than SWEEP_MIN_AGE: gone within the guard's reaction. One younger: the
    // guard sweeps again once its lock file is of age.
    for (case, age, bound) in [
        (
            "of age",
            launch::SWEEP_MIN_AGE + Duration::from_millis(200),
            BOUND,
        ),
        ("young", Duration::ZERO, launch::SWEEP_MIN_AGE + BOUND),
    ] {
        let own = TestCgroup::new("guard-sweep");
        let launch_dir = parent.join(format!("killed-{}", case.replace(' ', "-")));
        let mut run = cli(tmp.path(), &bin, &launch_dir, &own);
        std::thread::sleep(age);
        let killed = Instant::now();
        sigkill(&mut run);
        match until_gone(&launch_dir, killed, bound) {
            Ok(took) => eprintln!("{case}: launch directory gone {took:?} after the SIGKILL"),
            Err(()) => panic!(
                "{case}: {} (auth.json: {}) still there {bound:?} after the executor's SIGKILL",
                launch_dir.display(),
                launch_dir.join("home/.codex/auth.json").exists()
            ),
        }
        // The lock file goes right after the directory (removed still held, src/launch/sweep.rs).
        assert!(
            until_gone(&launch::lock_path(&launch_dir).unwrap(), killed, bound).is_ok(),
            "{case}: its lock file is removed with it"
        );
        assert!(
            live_dir.join("home/.config/x.json").is_file(),
            "{case}: the guard removed the launch directory of a live launch"
        );
        assert!(launch::lock_path(&live_dir).unwrap().exists());
    }
    live.stop().unwrap();
    assert!(!live_dir.exists());
}

//! Launch directories under faults (issue 33): one launch per directory, claimed by a lock
//! beside it; a directory left by a launch that is gone (its lock free) is taken over and
//! what is left in it removed, read-only directories included, and the first launch into a
//! parent removes every such directory there.

use crate::common;

use common::stand_in::{set_dir_mode, sh_script};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use common::carry::terminal_plan;
use kcap_mcp_registry::clients::plan::{LaunchPlan, PlanFile};
use kcap_mcp_registry::launch::{self, ExecError, Options};

/// A shell stand-in client that stays up for `secs` seconds (in a terminal).
fn sleeper(dir: &Path, secs: u32) -> PathBuf {
    sh_script(dir, "sleeper", &format!("echo up\nexec sleep {secs}"))
}

/// A terminal plan putting `home/.config/x.json` (holding `mark`) in `launch_dir`.
fn plan(launch_dir: &Path, mark: &str) -> LaunchPlan {
    LaunchPlan {
        env_inherit: vec!["PATH".into()],
        files: vec![PlanFile {
            path: "home/.config/x.json".into(),
            contents: mark.into(),
            mode: 0o600,
        }],
        ..terminal_plan(kcap_mcp_registry::clients::Client::Codex, launch_dir)
    }
}

#[test]
fn two_launches_into_one_directory_one_wins_the_other_touches_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = sleeper(tmp.path(), 30);
    for round in 0..24 {
        let dir = tmp.path().join(format!("l{round}"));
        let barrier = Arc::new(Barrier::new(2));
        let runs: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|mark| {
                let (dir, bin, barrier) = (dir.clone(), bin.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let plan = plan(&dir, mark);
                    barrier.wait();
                    (mark, launch::launch(&plan, &bin, &Options::default()))
                })
            })
            .collect();
        let results: Vec<_> = runs.into_iter().map(|t| t.join().unwrap()).collect();
        let mut winners = Vec::new();
        for (mark, result) in results {
            match result {
                Ok(reviewer) => winners.push((mark, reviewer)),
                Err(ExecError::LaunchDirBusy { dir: busy }) => assert_eq!(busy, dir),
                // The winner's directory already there when the loser checked: refused too,
                // before anything is touched.
                Err(ExecError::LaunchDirNotEmpty { dir: busy }) => assert_eq!(busy, dir),
                Err(e) => panic!("round {round}: {mark}: {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: one launch wins");
        let (mark, reviewer) = winners.pop().unwrap();
        // The winner's directory is whole, and is the winner's.
        let file = dir.join("home/.config/x.json");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("round {round}: {e}")),
            mark
        );
        let lock = launch::lock_path(&dir).unwrap();
        assert!(
            lock.is_file(),
            "round {round}: held lock {}",
            lock.display()
        );
        reviewer.stop().unwrap();
        assert!(!dir.exists(), "round {round}: removed on stop");
        assert!(!lock.exists(), "round {round}: lock removed on stop");
    }
}

#[test]
fn a_directory_left_by_a_launch_that_is_gone_is_taken_over_and_emptied() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = sleeper(tmp.path(), 30);
    let dir = tmp.path().join("left");
    // What a killed launch leaves: its directory, credentials and a read-only module
    // cache in it, and its lock file, which nobody holds any more.
    std::fs::create_dir_all(dir.join("home/go/pkg/mod/x")).unwrap();
    std::fs::write(dir.join("home/auth.json"), "{\"key\":\"dummy\"}").unwrap();
    std::fs::write(dir.join("home/go/pkg/mod/x/a.go"), "package x").unwrap();
    for ro in ["home/go/pkg/mod/x", "home/go/pkg/mod"] {
        set_dir_mode(&dir.join(ro), 0o555);
    }
    std::fs::write(launch::lock_path(&dir).unwrap(), "").unwrap();
    launch::check(&plan(&dir, "new")).expect("a stale directory passes the check");
    let reviewer = launch::launch(&plan(&dir, "new"), &bin, &Options::default()).unwrap();
    assert!(
        !dir.join("home/auth.json").exists(),
        "the leftover credentials are gone"
    );
    assert!(!dir.join("home/go").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("home/.config/x.json")).unwrap(),
        "new"
    );
    reviewer.stop().unwrap();
    assert!(!dir.exists());

    // Without a lock file, a directory that is not empty is someone's: refused.
    std::fs::create_dir_all(dir.join("mine")).unwrap();
    let e = launch::launch(&plan(&dir, "new"), &bin, &Options::default()).unwrap_err();
    assert!(matches!(e, ExecError::LaunchDirNotEmpty { .. }), "{e}");
    assert!(dir.join("mine").is_dir());
}

/// The first launch of an executor into a parent sweeps it: the launch directories there
/// whose launch is gone (their lock free: an executor killed with its guard) are removed,
/// credentials and read-only directories in them included, before the new one starts; a
/// directory whose lock is held (a launch running) is left.
#[test]
fn the_first_launch_into_a_parent_removes_the_directories_of_launches_that_are_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = sleeper(tmp.path(), 30);
    let dead = tmp.path().join("dead");
    std::fs::create_dir_all(dead.join("home/go/pkg/mod")).unwrap();
    std::fs::write(dead.join("home/auth.json"), "{\"key\":\"dummy\"}").unwrap();
    set_dir_mode(&dead.join("home/go/pkg/mod"), 0o555);
    let lock = launch::lock_path(&dead).unwrap();
    let old = std::time::SystemTime::now() - launch::SWEEP_MIN_AGE * 5;
    std::fs::File::create(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let new = tmp.path().join("new");
    let reviewer = launch::launch(&plan(&new, "n"), &bin, &Options::default()).unwrap();
    assert!(
        !dead.exists(),
        "the dead launch's directory and credentials are left"
    );
    assert!(!lock.exists());
    // A running launch's directory (its lock held) is not swept.
    std::thread::sleep(launch::SWEEP_MIN_AGE);
    assert_eq!(launch::sweep(tmp.path()).unwrap(), Vec::<PathBuf>::new());
    assert!(new.join("home/.config/x.json").exists());
    reviewer.stop().unwrap();
}

/// In a parent every user may write (sticky, as `/tmp`, which the check lets through)
/// another user puts a lock file of theirs (`.<name>.kcap-lock`, free, older than
/// [`launch::SWEEP_MIN_AGE`]) beside a directory of the daemon's that is no launch's: the
/// daemon's first launch there sweeps the parent, and removed that directory with all in it
/// (red team of issue 33: a root daemon's `/tmp/<name>` by `nobody`; a worktree kept beside
/// the launch directories the same); and a FIFO in a lock file's place stalled that launch
/// for ever (its open for writing). Expected: only regular lock files of the daemon's user
/// count; the directory stays; the launch goes on. Bites: with `prepare::left_by_us` always
/// true, `victim` is gone; without `O_NONBLOCK`, the launch never returns.
#[test]
fn another_users_lock_file_in_a_sticky_parent_removes_nothing_of_the_daemons() {
    use std::os::unix::fs::MetadataExt as _;
    if !rustix::process::geteuid().is_root() {
        eprintln!("ignored: a lock file of another user's (uid 65534) needs root to make");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let parent = root.path().join("shared");
    std::fs::create_dir(&parent).unwrap();
    set_dir_mode(&parent, 0o1777);
    let bin = sleeper(root.path(), 0);
    let victim = parent.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("data"), "the daemon's").unwrap();
    let lock = launch::lock_path(&victim).unwrap();
    let old = std::time::SystemTime::now() - launch::SWEEP_MIN_AGE * 5;
    std::fs::File::create(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    std::os::unix::fs::chown(&lock, Some(65534), Some(65534)).unwrap();
    assert_eq!(std::fs::metadata(&lock).unwrap().uid(), 65534);
    // And a FIFO of theirs in a lock file's place: an open for writing waits for a reader.
    let fifo = std::ffi::CString::new(format!("{}/.stall.kcap-lock", parent.display())).unwrap();
    let aged = libc::timespec {
        tv_sec: libc::time_t::try_from(
            old.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
        )
        .unwrap(),
        tv_nsec: 0,
    };
    // SAFETY: mkfifo and utimensat on a NUL-terminated path and two timespecs.
    unsafe {
        assert_eq!(libc::mkfifo(fifo.as_ptr(), 0o666), 0);
        let times = [aged, aged];
        assert_eq!(
            libc::utimensat(libc::AT_FDCWD, fifo.as_ptr(), times.as_ptr(), 0),
            0
        );
    }
    std::os::unix::fs::chown(parent.join(".stall.kcap-lock"), Some(65534), Some(65534)).unwrap();
    let (done, started) = std::sync::mpsc::channel();
    let (first, first_bin) = (parent.join("l1"), bin.clone());
    std::thread::spawn(move || {
        let _ = done.send(launch::launch(
            &plan(&first, "m"),
            &first_bin,
            &Options::default(),
        ));
    });
    let reviewer = started
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the launch stalled on another user's FIFO named as a lock file")
        .unwrap();
    reviewer.stop().unwrap();
    assert_eq!(launch::sweep(&parent).unwrap(), Vec::<PathBuf>::new());
    assert!(
        victim.join("data").exists(),
        "the sweep removed a directory of the daemon's on another user's lock file"
    );
    // Nor does a launch into it take another user's lock file for its leftover's.
    let err = launch::launch(&plan(&victim, "m"), &bin, &Options::default()).unwrap_err();
    assert!(
        matches!(&err, ExecError::LaunchDirNotEmpty { dir } if *dir == victim),
        "{err:?}"
    );
    assert!(victim.join("data").exists());
}

#[test]
fn a_launch_directory_whose_parent_every_user_can_write_is_refused_unless_sticky() {
    let root = tempfile::tempdir().unwrap();
    let parent = root.path().join("open");
    std::fs::create_dir(&parent).unwrap();
    let bin = sleeper(root.path(), 0);
    let launch_dir = parent.join("l1");
    // World-writable, not sticky: another user could rename the launch directory away.
    set_dir_mode(&parent, 0o777);
    let err = launch::launch(&plan(&launch_dir, "m"), &bin, &Options::default()).unwrap_err();
    assert!(
        matches!(&err, ExecError::LaunchDirParentOpen { parent: p } if *p == parent),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("writable by every user and not sticky"),
        "{err}"
    );
    assert!(!launch_dir.exists());
    // Sticky, as /tmp: only the owner may rename or remove what is in it.
    set_dir_mode(&parent, 0o1777);
    let reviewer = launch::launch(&plan(&launch_dir, "m"), &bin, &Options::default()).unwrap();
    reviewer.stop().unwrap();
}

#[test]
fn an_argument_longer_than_the_kernel_passes_is_refused_before_anything_is_created() {
    let root = tempfile::tempdir().unwrap();
    let bin = sleeper(root.path(), 0);
    let launch_dir = root.path().join("l1");
    // One byte under the bound (its NUL makes it exactly MAX_ARG_STRLEN): carried out.
    let mut ok = plan(&launch_dir, "m");
    ok.argv = vec!["x".repeat(launch::MAX_ARG_BYTES - 1)];
    launch::launch(&ok, &bin, &Options::default())
        .unwrap()
        .stop()
        .unwrap();
    // At the bound: refused, naming the argument, and nothing is created.
    let mut long = plan(&launch_dir, "m");
    long.argv = vec!["--".into(), "x".repeat(launch::MAX_ARG_BYTES)];
    let err = launch::launch(&long, &bin, &Options::default()).unwrap_err();
    assert!(
        matches!(&err, ExecError::BadArg { index: 1, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("check the plan: argv[1] is 131072 bytes, more than the 131072"),
        "{err}"
    );
    assert!(!launch_dir.exists());
}

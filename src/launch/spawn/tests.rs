//! `spawn`'s tests: the child's arguments, environment and directory, its cgroup, the
//! errors of its steps; each way of starting it (sharing the executor's memory, forked).

use super::{Command, Stdio};
use std::io::Read as _;

fn output(cmd: &mut Command) -> (String, i32) {
    cmd.stdout(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (out, child.wait().unwrap().code().unwrap())
}

#[test]
fn the_child_gets_exactly_its_arguments_environment_and_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "printf '%s|%s|%s|' \"$1\" \"$A\" \"$(pwd)\"; env | wc -l",
        "sh",
        "a b",
    ])
    .envs([("A", "1"), ("PATH", "/usr/bin:/bin"), ("A", "2")])
    .current_dir(dir.path());
    let (out, code) = output(&mut cmd);
    let real = std::fs::canonicalize(dir.path()).unwrap();
    // `env` shows A, PATH and the PWD the shell sets: nothing of this process's.
    assert_eq!(out.trim(), format!("a b|2|{}|3", real.display()));
    assert_eq!(code, 0);
}

#[test]
fn the_child_starts_in_its_cgroup_born_there_or_moved() {
    let Some(own) = crate::launch::cgroup::own_cgroup()
        .ok()
        .filter(|own| own.join("cgroup.procs").exists())
    else {
        eprintln!("skipped: this machine has no writable cgroup v2");
        return;
    };
    let dir = own.join(format!("kcap-spawn-test-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        eprintln!("skipped: cannot create a cgroup ({e})");
        return;
    }
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    for born_in in [true, false] {
        let mut cmd = Command::new("/bin/cat");
        cmd.args(["/proc/self/cgroup"]);
        cmd.start_in_cgroup(&dir, true).unwrap();
        cmd.cgroup.as_mut().unwrap().born_in = born_in;
        let (out, code) = output(&mut cmd);
        assert_eq!(code, 0);
        let v2 = out.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
        assert!(
            v2.ends_with(&format!("/{name}")),
            "born in: {born_in}: {out}"
        );
    }
    std::fs::remove_dir(&dir).unwrap();
}

#[test]
fn a_failing_exec_or_step_is_the_spawns_error() {
    let e = Command::new("/nonexistent/client").spawn().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    let e = Command::new("no-such-client-anywhere")
        .envs([("PATH", "/usr/bin:/bin")])
        .spawn()
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    let mut cmd = Command::new("/bin/true");
    // SAFETY: builds an io::Error from a constant errno only.
    unsafe {
        cmd.pre_exec(|| Err(std::io::Error::from_raw_os_error(libc::EACCES)));
    }
    assert_eq!(cmd.spawn().unwrap_err().raw_os_error(), Some(libc::EACCES));
}

/// Set by the steps of the two tests below, in the child: seen by this process only when
/// the child shares its memory.
static STEP_RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static HANDLER_RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[test]
fn the_child_shares_the_executors_memory_until_exec_or_is_forked() {
    use std::sync::atomic::Ordering;
    for shared in [true, false] {
        STEP_RAN.store(false, Ordering::SeqCst);
        let mut cmd = Command::new("/bin/echo");
        cmd.args(["started"]);
        cmd.shared_memory = shared;
        // SAFETY: an atomic store only.
        unsafe {
            cmd.pre_exec(|| {
                STEP_RAN.store(true, Ordering::SeqCst);
                Ok(())
            });
        }
        let (out, code) = output(&mut cmd);
        assert_eq!((out.as_str(), code), ("started\n", 0), "shared: {shared}");
        // Sharing (clone3 with CLONE_VM, x86_64): the step's store is this process's.
        let expected = shared && cfg!(target_arch = "x86_64");
        assert_eq!(
            STEP_RAN.load(Ordering::SeqCst),
            expected,
            "shared: {shared}"
        );
    }
}

extern "C" fn note_usr1(_: libc::c_int) {
    HANDLER_RAN.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A signal that reaches the child before exec finds the default action, not a handler of
/// the executor's running on the executor's memory (signal-hook's flags, say).
#[test]
fn no_handler_of_the_executors_runs_in_a_child_sharing_its_memory() {
    use std::os::unix::process::ExitStatusExt as _;
    use std::sync::atomic::Ordering;
    // SAFETY: a handler that stores to an atomic; the old one is put back below.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = note_usr1 as extern "C" fn(libc::c_int) as usize;
        libc::sigaction(libc::SIGUSR1, &raw const action, &raw mut old);
    }
    let mut cmd = Command::new("/bin/true");
    // SAFETY: getpid and kill only.
    unsafe {
        cmd.pre_exec(|| {
            libc::kill(libc::getpid(), libc::SIGUSR1);
            Ok(())
        });
    }
    let status = cmd.spawn().and_then(|mut child| child.wait());
    // SAFETY: the handler saved above.
    unsafe { libc::sigaction(libc::SIGUSR1, &raw const old, std::ptr::null_mut()) };
    assert!(
        !HANDLER_RAN.load(Ordering::SeqCst),
        "the handler ran in the child"
    );
    assert_eq!(status.unwrap().signal(), Some(libc::SIGUSR1));
}

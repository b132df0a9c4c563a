//! What another local user reaches of a running reviewer (the red team of issue 33): its
//! terminal. A terminal client (Claude Code, Codex CLI, Antigravity) runs in a
//! pseudo-terminal the executor opens on the system's `/dev/pts`; the common distributions
//! mount it `gid=5,mode=620`, so a new terminal is writable by the `tty` group, which
//! `write(1)` and `wall(1)` run as (setgid) for every local user. Lines another user wrote
//! there reached the executor as the client's output. This machine mounts `/dev/pts`
//! `mode=600`, so the test mounts a `devpts` instance as those distributions do in a mount
//! namespace of its own thread (the executor and the client it starts live there), and the
//! other user (uid 65534, gid `tty`, through `setpriv`) writes to the executor's terminal.

use crate::common;

use std::ffi::CString;
use std::path::Path;
use std::time::Duration;

use common::carry::{terminal_plan, until_exit};
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::launch::{self, Options};

/// What the other user writes.
const FORGED: &str = "kcap-forged-by-another-user";

/// In a mount namespace of this thread's own: `/dev/pts` a new `devpts` instance mounted as
/// the common distributions mount theirs, `/dev/ptmx` its `ptmx`.
fn distribution_devpts() {
    let c = |s: &str| CString::new(s).unwrap();
    // SAFETY: unshare and mount with strings alive for the calls; the namespace is this
    // thread's (mount namespaces are per thread once unshared), and private, so nothing
    // propagates to the machine's.
    unsafe {
        assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare");
        let none = std::ptr::null::<libc::c_char>();
        assert_eq!(
            libc::mount(
                none,
                c("/").as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null()
            ),
            0
        );
        let opts = c("newinstance,gid=5,mode=620,ptmxmode=666");
        assert_eq!(
            libc::mount(
                c("devpts").as_ptr(),
                c("/dev/pts").as_ptr(),
                c("devpts").as_ptr(),
                0,
                opts.as_ptr().cast()
            ),
            0,
            "mount devpts: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(
            libc::mount(
                c("/dev/pts/ptmx").as_ptr(),
                c("/dev/ptmx").as_ptr(),
                none,
                libc::MS_BIND,
                std::ptr::null()
            ),
            0
        );
    }
}

/// A terminal stand-in that prints `up`, waits 3 s and exits; the other user writes
/// [`FORGED`] into its terminal (`/dev/pts/0`: the instance's first) meanwhile. What the
/// executor read of the terminal, and whether the write was let through.
fn forged_into_terminal(root: &Path) -> (String, bool) {
    let bin = sh_script(root, "reviewer", "echo up\nexec sleep 3");
    let plan = terminal_plan(Client::Codex, &root.join("launch"));
    let mut reviewer = launch::launch(&plan, &bin, &Options::default()).unwrap();
    let wrote = std::process::Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=5",
            "--clear-groups",
            "/bin/sh",
            "-c",
        ])
        .arg(format!("sleep 0.3; echo {FORGED} > /dev/pts/0"))
        .status()
        .unwrap()
        .success();
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(20));
    reviewer.stop().unwrap();
    (output, wrote)
}

/// Another user (uid 65534 with the `tty` group, as `write(1)` runs) writes a line into a
/// running terminal reviewer's terminal: refused, and the executor reads nothing of it.
/// Bite: with the executor's making the terminal `0600` left out, the write succeeds
/// and the line is in the client's output.
#[test]
fn another_user_writes_nothing_into_a_terminal_clients_terminal() {
    if !rustix::process::geteuid().is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("ignored: another user and a devpts instance of our own need root and setpriv");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let path = root.path().to_owned();
    let (output, wrote) = std::thread::spawn(move || {
        distribution_devpts();
        forged_into_terminal(&path)
    })
    .join()
    .unwrap();
    assert!(output.contains("up"), "{output}");
    assert!(
        !output.contains(FORGED),
        "another user's line reached the executor as the client's output: {output}"
    );
    assert!(
        !wrote,
        "another user opened the reviewer's terminal for writing"
    );
}

//! The one way a test creates an executable: a stand-in client (a fake `codex`), a recorder
//! script, anything a test writes and then has executed. `tests/suite/hygiene.rs` fails if a test
//! file makes a file executable any other way.
//!
//! # The race this avoids (`ETXTBSY`, "Text file busy")
//!
//! Linux refuses to `exec` a file that some process holds open for writing. Writing a script
//! from the test process itself (`fs::write`, then `chmod`) opens such a descriptor in a
//! process whose other threads (the other tests) fork at any moment: a child forked while
//! the descriptor is open inherits it and keeps it until that child execs its own program.
//! `O_CLOEXEC` only closes it at that exec, not at the fork. In that window, running the
//! stand-in fails with `ETXTBSY` even though the test has long closed its own descriptor.
//!
//! Some fixes that do not work here:
//! - writing to a temporary name and renaming it into place: the leaked descriptor refers
//!   to the same file (inode) under its new name, so the exec still fails;
//! - retrying the spawn on `ETXTBSY` (as cargo's own test support does): the stand-ins are
//!   run by the code under test (the executor of `launch`, the CLI binary's `--client-bin`)
//!   and by the real clients (Claude Code starts the recorder), so the spawn
//!   that fails is not the test's to retry;
//! - a lock held around every spawn: the same spawns happen outside the tests' reach.
//!
//! # What this does instead, and why it is correct
//!
//! The bytes are written by a separate, single-threaded child process (`/bin/sh` running
//! its built-in `printf`, so it forks nothing while the file is open), and this process
//! waits for it to exit. The test process never opens the file for writing, so no thread of
//! it can leak a write descriptor into a fork; the only writer is the child, and once
//! `wait` has returned the kernel has closed all of that child's descriptors (the exiting
//! task closes its files before it can be reaped). From then on no process holds the file
//! open for writing, so `exec` of it cannot fail with `ETXTBSY`. The mode is set by path
//! (`chmod(2)` opens nothing), and the file is renamed over `path` (also by path), so
//! replacing a stand-in that an earlier step may still be running gives the new content a
//! fresh inode and never writes into the old one.
//!
//! Library code is not affected by this race: the daemon never writes the binary it runs
//! (the clients and `kcap` are installed before it starts), so none of its processes can
//! hold a write descriptor on them. The race exists only because a test writes a program
//! and runs it inside one multi-threaded process.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `body` to `path` as an executable (mode 0755), replacing any file there, without
/// the process that runs the tests ever opening it for writing (see the module docs).
///
/// `body` is usually a `#!/bin/sh` script. It is passed to the writer as one argument, so it
/// may hold any bytes except NUL and be at most 128 KiB (Linux's `MAX_ARG_STRLEN`). The
/// parent directory must exist. Panics, saying what and where, when anything fails.
pub fn write_executable(path: &Path, body: impl AsRef<[u8]>) {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let body = body.as_ref();
    let name = path
        .file_name()
        .unwrap_or_else(|| panic!("{} names no file", path.display()));
    let tmp = path.with_file_name(format!(
        ".{}.stand-in.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let status = Command::new("/bin/sh")
        .args(["-c", r#"printf '%s' "$2" > "$1""#, "sh"])
        .arg(&tmp)
        .arg(OsStr::from_bytes(body))
        .stdin(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot start /bin/sh to write {}: {e}", path.display()));
    assert!(
        status.success(),
        "/bin/sh could not write {} ({status})",
        tmp.display()
    );
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("cannot make {} executable: {e}", tmp.display()));
    std::fs::rename(&tmp, path)
        .unwrap_or_else(|e| panic!("cannot rename {} to {}: {e}", tmp.display(), path.display()));
}

/// Writes a `/bin/sh` script made of `#!/bin/sh`, `body` and a final newline to `dir/name`
/// with [`write_executable`], and returns its path.
pub fn sh_script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    write_executable(&path, format!("#!/bin/sh\n{body}\n"));
    path
}

/// Sets the permission bits of the regular, non-executable file `path` to `mode` (e.g.
/// `0o444` for a read-only config). Kept here with the executable writer, so the hygiene
/// test still finds every mode change in one place; `mode` must not set an execute bit.
#[cfg(unix)]
#[allow(
    dead_code,
    reason = "not every test binary that includes `common` uses it"
)]
pub fn set_file_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(mode & 0o111, 0, "use write_executable for executables");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Sets the permission bits of the directory `path` to `mode` (e.g. `0o555`, the read-only
/// module cache a client leaves).
#[cfg(unix)]
#[allow(
    dead_code,
    reason = "not every test binary that includes `common` uses it"
)]
pub fn set_dir_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    assert!(path.is_dir(), "{} is not a directory", path.display());
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The permission bits of `path`.
#[cfg(unix)]
#[allow(
    dead_code,
    reason = "not every test binary that includes `common` uses it"
)]
pub fn file_mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A temporary directory (its canonical path, `root`) holding `client`, an executable
/// stand-in client written from a source ([`write_executable`]); removed when dropped.
pub struct ClientDir {
    _tmp: tempfile::TempDir,
    /// The directory, links resolved.
    pub root: std::path::PathBuf,
    /// `<root>/client`.
    pub client: std::path::PathBuf,
}

impl ClientDir {
    /// A new directory with `source` as its `client`.
    pub fn new(source: &str) -> ClientDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let client = root.join("client");
        write_executable(&client, source);
        ClientDir {
            _tmp: tmp,
            root,
            client,
        }
    }
}

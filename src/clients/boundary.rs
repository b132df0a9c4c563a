//! The reviewer's boundary as plan data ([`Sandbox`], [`LaunchPlan::sandbox`]): what the
//! client and everything it starts may read, execute and write, computed by
//! [`Client::plan`](super::Client::plan) and installed by the executor
//! (`launch::sandbox`, feature `launch`). Re-exported from [`plan`](super::plan).

use serde::{Deserialize, Serialize};

#[allow(unused_imports, reason = "named in the docs")]
use super::plan::LaunchPlan;

/// The system's directories a reviewer may read and execute (those that exist).
pub const SYSTEM_READ_EXEC: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Files of the system's directories no reviewer reads, though they lie beneath one it may
/// read: the password and group shadow files, sudo's rules, the SSH host keys, TLS private
/// keys. A root reviewer read `/etc/shadow` (the red team of issue 31: its own capabilities
/// dropped, root still owns the file). Landlock only allows, so the executor allows a
/// directory that holds one entry by entry, less these
/// (`launch::sandbox::Boundary::of`, feature `launch`).
pub const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
];

/// The system-wide files of `/proc` a reviewer may read (those that exist): what the
/// clients' runtimes read at start (`strace`: Node.js `/proc/meminfo`, `/proc/version`; Bun
/// `/proc/sys/vm/overcommit_memory`, `/proc/sys/vm/mmap_min_addr`) and the machine's load and
/// processors. No process's directory is among them.
pub const SYSTEM_PROC_READ: &[&str] = &[
    "/proc/sys",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/stat",
    "/proc/version",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/filesystems",
];

/// The devices a reviewer may read and write (those that exist): the null and random
/// devices, its controlling terminal (`/dev/tty`) and the multiplexer it opens terminals of
/// its own with (`/dev/ptmx`). Not the system's `/dev/pts`, where every terminal of the
/// daemon's user is open to it (the red team wrote into another reviewer's): the executor
/// mounts a `/dev/pts` of the reviewer's own (a new `devpts` instance) and allows that.
pub const SYSTEM_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// What a reviewer may reach in its sandbox: absolute paths, a directory allowing what is
/// beneath it, a path that does not exist allowing nothing. JSON
/// `{"read_exec": […], "read": […], "read_write": […]}`.
///
/// Computed by [`Client::plan`](super::Client::plan) from the launch: the system
/// ([`SYSTEM_READ_EXEC`], [`SYSTEM_PROC_READ`], [`SYSTEM_DEVICES`]), the worktree
/// (read-only), the launch directory (the client's `HOME` and `TMPDIR`), the kcap binary
/// the MCP servers run and the daemon's cache directory
/// ([`LaunchContext::cache_dir`](crate::LaunchContext::cache_dir), read and execute only:
/// every launch shares it). The executor adds what
/// only it knows: the client's installation (from the binary it starts) and the client's
/// own `/proc/<pid>`, and what the daemon adds in its options
/// (`launch::Options::with_sandbox_read_write`). Everything else is out of reach: the
/// daemon's `HOME`, other reviewers' launch directories and worktrees, the shared `/tmp`.
/// docs/sandbox.md has why each path is there.
///
/// ```
/// use kcap_mcp_registry::clients::plan::Sandbox;
///
/// let sandbox = Sandbox::new("/run/kcap/l1", Some("/work/tree"));
/// assert!(sandbox.read_exec.iter().any(|p| p == "/usr"));
/// assert_eq!(sandbox.read[0], "/work/tree");
/// assert_eq!(sandbox.read_write[0], "/run/kcap/l1");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sandbox {
    /// Read and execute: the system's directories, the kcap binary, the daemon's cache
    /// directory.
    pub read_exec: Vec<String>,
    /// Read only: the worktree, the system-wide files of `/proc`.
    pub read: Vec<String>,
    /// Read, write, create, remove and execute (no device files): the launch directory, the
    /// null, random and terminal devices.
    pub read_write: Vec<String>,
}

impl Sandbox {
    /// The boundary every reviewer has: the system's paths, `worktree` read-only (when the
    /// launch has one) and `launch_dir` read-write.
    pub fn new(launch_dir: &str, worktree: Option<&str>) -> Sandbox {
        let owned = |paths: &[&str]| paths.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
        let mut read: Vec<String> = worktree.iter().map(|w| (*w).to_owned()).collect();
        read.extend(owned(SYSTEM_PROC_READ));
        let mut read_write = vec![launch_dir.to_owned()];
        read_write.extend(owned(SYSTEM_DEVICES));
        Sandbox {
            read_exec: owned(SYSTEM_READ_EXEC),
            read,
            read_write,
        }
    }

    /// Every path with what it allows: `("read_exec" | "read" | "read_write", path)`, in
    /// that order.
    pub fn paths(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("read_exec", &self.read_exec),
            ("read", &self.read),
            ("read_write", &self.read_write),
        ]
        .into_iter()
        .flat_map(|(name, list)| list.iter().map(move |p| (name, p.as_str())))
    }
}

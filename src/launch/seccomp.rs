//! The sandbox's seccomp filter: no process of the reviewer traces, reads or writes another
//! process, its own siblings included. Landlock refuses `ptrace` of a process outside the
//! sandbox only; inside it, a tool's command attached to an MCP server started by the same
//! client and read its environment from its memory (`PTRACE_PEEKDATA`), which
//! `/proc/<pid>/environ` denies, and made the client itself write into a terminal (the red
//! team of issue 31); `perf_event_open` read the same environment from a server's user stack
//! (`PERF_SAMPLE_STACK_USER` samples; `kernel.perf_event_paranoid` 2 allows it for any
//! process one may trace: red team of issue 33). Nor does it make a unix socket
//! (`socket(AF_UNIX, …)`): Landlock (ABI 7) does not govern `connect` to a socket by its
//! path, so a command reached a socket of the daemon's in a `0700` directory, past the door
//! too (a D-Bus bus, `docker.sock`, another reviewer's server, a proxy); pairs
//! (`socketpair`, which runtimes use for a child's streams) stay allowed, but not datagram
//! pairs (a datagram socket of a pair sends to any path with `sendto`: a command reached
//! a `0700` directory's datagram socket that way) and no `io_uring` (its
//! `IORING_OP_SOCKET` makes a unix socket `socket(2)`'s rule never sees: a command
//! connected to the daemon's socket that way; both red team of issue 33). Nor does it
//! touch the kernel's keyrings (`add_key`, `keyctl`, `request_key`): the session keyring is
//! inherited, user namespace or not, so a command read a key the daemon kept there, and
//! every reviewer of the daemon shares it (red team of issue 33); `request_key` also has the
//! kernel start `/sbin/request-key` outside every namespace where keyutils is installed
//! (its `dns_resolver` asks the host's name server). Nor a `vsock` socket
//! (`socket(AF_VSOCK, …)`): the kernel's `vsock` ignores network namespaces, so in a
//! virtual machine with a `vsock` device (this one: virtio, guest CID 3) a reviewer behind
//! the door made and bound one, and may connect to the host's services (CID 2), which the
//! door never sees (red team of issue 33; no connection tried: the host's side is not this
//! project's). Nor does it change another process of the daemon's user by a call that
//! checks a uid, not `ptrace` (`prlimit`, `setpriority`, `ioprio_set`, the `sched_set*`
//! calls naming another pid): a command set another reviewer's limits and scheduling and
//! the executor's limits (red team of stop 53; `other_process_rules`). The filter returns
//! `EPERM` for [`DENIED`], for `socket(AF_UNIX, …)`, `socket(AF_VSOCK, …)`,
//! `socketpair(AF_UNIX, SOCK_DGRAM, …)` and those calls on another process, and allows
//! every other call. On x86-64 it first refuses every call made by an x32 number (`__X32_SYSCALL_BIT`,
//! `0x4000_0000`, set): `seccompiler` matches numbers of the x86-64 table only, so on a
//! kernel built with x32 support the x32 `ptrace` or `socket` would pass every rule above
//! (red team of issue 33; this machine's kernel has no x32, where such a call is `ENOSYS`).
//!
//! The BPF program is compiled once, in the executor, by rust-vmm's `seccompiler` (0.5); the
//! child installs it with one raw `seccomp(SECCOMP_SET_MODE_FILTER)` after
//! `PR_SET_NO_NEW_PRIVS` (seccomp(2)), so it holds for the client and everything it starts.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// The system calls the filter refuses with `EPERM`: tracing another process, reading or
/// writing its memory (sampling its stack too), taking its file descriptors; `io_uring`
/// (a socket made past `socket(2)`); the kernel's keyrings.
pub const DENIED: [(&str, libc::c_long); 11] = [
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("add_key", libc::SYS_add_key),
    ("keyctl", libc::SYS_keyctl),
    ("request_key", libc::SYS_request_key),
];

/// `socket(2)`'s type argument less its flags (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`): the
/// kernel's `SOCK_TYPE_MASK`.
const SOCK_TYPE_MASK: u64 = 0xf;

/// The compiled filter for this machine's architecture, or why there is none (an
/// architecture `seccompiler` does not know).
pub(crate) fn program() -> Result<&'static BpfProgram, String> {
    static PROGRAM: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
    PROGRAM.get_or_init(compile).as_ref().map_err(Clone::clone)
}

fn compile() -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("a seccomp filter for {} ({e})", std::env::consts::ARCH))?;
    let mut rules = DENIED
        .iter()
        .map(|(_, nr)| (*nr, Vec::new()))
        .collect::<BTreeMap<_, _>>();
    let family = |family: libc::c_int| {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, family as u64)
    };
    let unix = || family(libc::AF_UNIX);
    let dgram = SeccompCondition::new(
        1,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
        libc::SOCK_DGRAM as u64,
    );
    let bad = |e: seccompiler::BackendError| format!("a seccomp filter ({e})");
    rules.insert(
        libc::SYS_socket,
        vec![
            unix()
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(bad)?,
            family(libc::AF_VSOCK)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(bad)?,
        ],
    );
    rules.insert(
        libc::SYS_socketpair,
        vec![
            unix()
                .and_then(|u| SeccompRule::new(vec![u, dgram?]))
                .map_err(bad)?,
        ],
    );
    for (nr, rule) in other_process_rules().map_err(bad)? {
        rules.insert(nr, rule);
    }
    let errno = u32::try_from(libc::EPERM).unwrap_or(1);
    let program = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch,
    )
    .and_then(BpfProgram::try_from)
    .map_err(|e| format!("a seccomp filter ({e})"))?;
    Ok(no_x32(program, errno))
}

/// `setpriority(2)`'s `which` for every process of a user (`PRIO_USER`).
const PRIO_USER: u64 = 2;

/// `ioprio_set(2)`'s `which` for every process of a user (`IOPRIO_WHO_USER`).
const IOPRIO_WHO_USER: u64 = 3;

/// The rules that keep a reviewer's process from changing another process of the daemon's
/// user by a call that checks its uid (and, for all but `prlimit`, that the caller holds
/// every capability the target holds: commoncap's `cap_safe_nice`), not `ptrace`, so that
/// neither Landlock's scope nor the rules above see it: `prlimit64` setting another
/// process's limits (pid not 0, new limits given), `setpriority` and `ioprio_set` naming
/// another process, group or user (`who` not 0) or every process of the user (`PRIO_USER`,
/// `IOPRIO_WHO_USER`), and `sched_setscheduler`, `sched_setparam`, `sched_setattr` and
/// `sched_setaffinity` naming another process (pid not 0). Each still works on the caller
/// itself (pid or `who` 0, as `setrlimit`, `nice` and `sched_setaffinity(0, …)` call it);
/// a call naming one of the caller's own threads by its tid (`pthread_setaffinity_np`,
/// `pthread_setschedparam`) is refused too, as the filter cannot tell that tid from
/// another process's (every real client's review turn passes, `door_https`).
/// Measured (Linux 6.18, red team of stop 53; `tests/fixtures/sandbox_reach/sched.py`): in
/// the whole sandbox a reviewer's command set another reviewer's limits, nice value, CPUs,
/// policy and I/O priority (reviewers hold no capability), and the executor's limits (a
/// root executor's nice value and the rest `cap_safe_nice` kept; a daemon that is not root
/// holds none): `RLIMIT_NOFILE` 4 failed the executor's stop with `EMFILE`, and
/// `RLIMIT_CPU` would have the kernel kill it with `SIGXCPU`.
fn other_process_rules() -> Result<Vec<(libc::c_long, Vec<SeccompRule>)>, seccompiler::BackendError>
{
    let not_zero =
        |arg: u8| SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0);
    let is = |arg: u8, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
    };
    let another = |arg: u8| not_zero(arg).and_then(|c| SeccompRule::new(vec![c]));
    let mut rules = vec![(
        libc::SYS_prlimit64,
        vec![SeccompRule::new(vec![
            not_zero(0)?,
            SeccompCondition::new(2, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)?,
        ])?],
    )];
    for (nr, user) in [
        (libc::SYS_setpriority, PRIO_USER),
        (libc::SYS_ioprio_set, IOPRIO_WHO_USER),
    ] {
        rules.push((nr, vec![another(1)?, SeccompRule::new(vec![is(0, user)?])?]));
    }
    for nr in [
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
        libc::SYS_sched_setaffinity,
    ] {
        rules.push((nr, vec![another(0)?]));
    }
    Ok(rules)
}

/// `__X32_SYSCALL_BIT` (arch/x86/include/uapi/asm/unistd.h): set in the number of every
/// call of the x32 ABI, which shares x86-64's `AUDIT_ARCH_X86_64`.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `program` after three instructions that return `EPERM` (`errno`) for a call whose
/// number has [`X32_SYSCALL_BIT`] set, on x86-64; `program` itself elsewhere. No number of
/// another table (i386's, x86-64's) reaches that bit.
fn no_x32(program: BpfProgram, errno: u32) -> BpfProgram {
    if cfg!(not(target_arch = "x86_64")) {
        return program;
    }
    let op = |code: u32| u16::try_from(code).unwrap_or(0);
    let stmt = |code: u32, k: u32| sock_filter {
        code: op(code),
        jt: 0,
        jf: 0,
        k,
    };
    // `struct seccomp_data`'s first field is `nr`.
    let mut guarded = vec![
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        sock_filter {
            code: op(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K),
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | (errno & libc::SECCOMP_RET_DATA),
        ),
    ];
    guarded.extend(program);
    guarded
}

/// In the child, after `PR_SET_NO_NEW_PRIVS`: installs `program` for itself and all it
/// starts. Async-signal-safe: one system call on memory prepared before the fork.
///
/// # Safety
/// Called between fork and exec.
pub(crate) unsafe fn install(program: &BpfProgram) -> std::io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(program.len()).unwrap_or(u16::MAX),
        filter: program.as_ptr().cast_mut().cast(),
    };
    // SAFETY: `fprog` points at `program`, alive for the call; the kernel copies it.
    let done = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0u32,
            &raw const fprog,
        )
    };
    if done != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_machine() {
        let program = program().unwrap();
        // 148 instructions for x86_64 with the x32 guard, the 11 calls of `DENIED`, the
        // three socket rules and the 7 calls on another process; the kernel takes 4096.
        assert!(
            !program.is_empty() && program.len() < 256,
            "{}",
            program.len()
        );
    }

    /// A call by an x32 number is refused with `EPERM` by the filter. Bite: without
    /// [`no_x32`]'s instructions the kernel answers (`ENOSYS` here, where it has no x32; the
    /// call itself where it has).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn a_call_by_an_x32_number_is_refused() {
        let program = program().unwrap();
        // SAFETY: the child makes system calls only (prctl, seccomp, the probe, _exit) on
        // memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            // SAFETY: as above; `_exit` with the probe's errno.
            unsafe {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || install(program).is_err()
                {
                    libc::_exit(100);
                }
                let x32_getpid = libc::c_long::from(X32_SYSCALL_BIT) | libc::SYS_getpid;
                let r = libc::syscall(x32_getpid);
                libc::_exit(if r < 0 { *libc::__errno_location() } else { 0 });
            }
        }
        let mut status = 0;
        // SAFETY: our child, reaped once.
        assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "{status:#x}");
        assert_eq!(
            libc::WEXITSTATUS(status),
            libc::EPERM,
            "the x32 getpid's errno (ENOSYS is 38)"
        );
    }
}

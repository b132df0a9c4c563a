//! Starting the child sharing the executor's memory until it execs, as `posix_spawn` does
//! (`clone3` with `CLONE_VM | CLONE_VFORK`, on a stack of its own): [`clone_vm`].

use std::io;
use std::os::fd::RawFd;

use super::{ChildPlan, CloneArgs, INTO_CGROUP, Step, run};

/// The stack of a child started by [`clone_vm`], above a guard page: what it runs before
/// exec (`run` and the steps: system calls on prepared memory) takes a few KiB.
const VM_STACK: usize = 256 << 10;

/// What the child of [`clone_vm`] runs: [`run`] with this plan and these steps.
pub(super) struct VmChild<'a, 'b> {
    pub(super) plan: &'a ChildPlan<'b>,
    pub(super) steps: &'a mut Vec<Step>,
}

/// The child's start on its own stack: `arg` is the [`VmChild`] of the parent's thread,
/// which is suspended until this child execs or exits (`CLONE_VFORK`), so it stays alive.
extern "C" fn vm_child(arg: *mut libc::c_void) -> ! {
    // SAFETY: `arg` is the `VmChild` `clone_vm` passed, alive and used by no other thread
    // until this child execs or exits.
    let child = unsafe { &mut *arg.cast::<VmChild<'_, '_>>() };
    // SAFETY: in the child, before exec; system calls only.
    unsafe {
        default_handlers();
        run(child.plan, None, child.steps)
    }
}

/// In a child that shares the executor's memory: every signal handler of the executor's
/// (signal-hook's, std's stack overflow handler) set back to the default before the signals
/// are unblocked, so that none runs in the child on the executor's memory. Ignored signals
/// stay ignored (`run` restores `SIGPIPE`), as exec would keep them. What glibc's
/// `posix_spawn` does (`spawni_child`).
///
/// # Safety
/// In the child of [`clone_vm`], all signals blocked.
unsafe fn default_handlers() {
    // SAFETY: sigaction with a zeroed struct to read, then the default handler to set.
    unsafe {
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &raw mut old) != 0 {
                continue;
            }
            if old.sa_sigaction != libc::SIG_IGN && old.sa_sigaction != libc::SIG_DFL {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &raw const default, std::ptr::null_mut());
            }
        }
    }
}

/// Starts `child` as `posix_spawn` does: `clone3` with `CLONE_VM | CLONE_VFORK` (and
/// `CLONE_INTO_CGROUP` into the cgroup directory `into`), the child on a stack of its own
/// ([`VM_STACK`]) sharing this process's memory until it execs, this thread suspended until
/// then, its signals blocked meanwhile. No copy of the executor's address space is made: a
/// fork of an executor running 200 launches at once copied its page tables (`dup_mmap`,
/// 1.7 ms a launch), made every page it wrote after copy-on-write (1.6 ms a launch of
/// faults and TLB flushes on the executor's threads), and the exec threw the copy away
/// (1.3 ms): about 45% of a launch's CPU (BENCHMARKS.md, "The executor's soak run": the
/// CPU of a launch). The child's libc calls set `errno` in this thread's thread-local
/// storage, which it shares: this thread reads none of it before it sets it again. The
/// child's pid.
///
/// # Errors
/// What `mmap` or `clone3` refused (an older kernel, another architecture: `ENOSYS`; a
/// cgroup this process may not start processes in): the caller forks instead.
pub(super) fn clone_vm(
    into: Option<RawFd>,
    child: &mut VmChild<'_, '_>,
) -> io::Result<libc::pid_t> {
    #[cfg(target_arch = "x86_64")]
    {
        let stack = VmStack::new()?;
        let mut flags = (libc::CLONE_VM | libc::CLONE_VFORK) as u64;
        let mut cgroup = 0;
        if let Some(dir) = into {
            flags |= INTO_CGROUP;
            cgroup = u64::try_from(dir).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        }
        let args = CloneArgs {
            flags,
            exit_signal: libc::SIGCHLD as u64,
            stack: stack.low as u64,
            stack_size: stack.size as u64,
            cgroup,
            ..CloneArgs::default()
        };
        // SAFETY: sigset_t is plain data; sigfillset fills it.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: a valid sigset_t; this thread's mask is restored below.
        unsafe {
            libc::sigfillset(&raw mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &raw const all, &raw mut old);
        }
        let ret: i64;
        // SAFETY: clone3 with a `struct clone_args` of the size given. In the child (rax 0)
        // the kernel has set the stack pointer to the top of `stack` (16-byte aligned), and
        // `vm_child` is called with `child`; it never returns (exec or `_exit`). r12 and r13
        // survive the system call. The parent (rax the pid, or -errno) goes on unchanged.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "mov rdi, r12",
                "call r13",
                "ud2",
                "2:",
                inlateout("rax") libc::SYS_clone3 => ret,
                in("rdi") &raw const args,
                in("rsi") std::mem::size_of::<CloneArgs>(),
                in("r12") std::ptr::from_mut(child).cast::<libc::c_void>(),
                in("r13") vm_child as extern "C" fn(*mut libc::c_void) -> ! as usize,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        // SAFETY: `old` is this thread's mask from above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &raw const old, std::ptr::null_mut()) };
        // The child has exec'd or exited: its stack is unmapped when `stack` drops.
        if ret < 0 {
            return Err(io::Error::from_raw_os_error(
                i32::try_from(-ret).unwrap_or(libc::EINVAL),
            ));
        }
        libc::pid_t::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (into, child);
        Err(io::Error::from_raw_os_error(libc::ENOSYS))
    }
}

/// A child's stack ([`VM_STACK`]) above a guard page, unmapped when dropped.
#[cfg(target_arch = "x86_64")]
struct VmStack {
    map: *mut libc::c_void,
    low: usize,
    size: usize,
}

#[cfg(target_arch = "x86_64")]
impl VmStack {
    fn new() -> io::Result<VmStack> {
        let page = 4096;
        // SAFETY: an anonymous private mapping, nothing of this process's touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                VM_STACK + page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = VmStack {
            map,
            low: map as usize + page,
            size: VM_STACK,
        };
        // SAFETY: the lowest page of the mapping just made.
        if unsafe { libc::mprotect(map, page, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }
}

#[cfg(target_arch = "x86_64")]
impl Drop for VmStack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, used by no one now.
        unsafe { libc::munmap(self.map, self.size + 4096) };
    }
}

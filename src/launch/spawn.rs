//! Starting the client: the part of `std::process::Command` the executor uses (program,
//! arguments, exactly the given environment, working directory, standard streams, process
//! group, steps between fork and exec), and one thing it cannot do: start the child directly
//! in its cgroup, with `clone3(CLONE_INTO_CGROUP)` (Linux 5.7).
//!
//! Why: a process that writes itself into a cgroup's `cgroup.procs` waits for the kernel's
//! cgroup migration, which takes the global `cgroup_threadgroup_rwsem` for writing and so
//! waits for an RCU grace period (about 8 ms on the benchmark machine, more under load;
//! BENCHMARKS.md, "Confinement, all of it"). A child born in its cgroup is never moved.
//!
//! And the child is not a fork: it shares the executor's memory until it execs, on a stack
//! of its own, the executor's thread suspended meanwhile (`CLONE_VM | CLONE_VFORK`, what
//! `posix_spawn` does; `spawn/vm.rs`). A fork copied the page tables of an executor running
//! many launches at once, made each page its threads wrote next copy-on-write, and the exec
//! threw the copy away: 4.6 ms of CPU a launch of 10 with 200 launches at once
//! (BENCHMARKS.md, "The executor's soak run", "Where a launch's CPU went"). The child runs
//! with every signal handler of the executor's set back to the default.
//!
//! Where the kernel refuses that (another architecture than x86_64, an older kernel), the
//! child is forked, into its cgroup with `clone3`; where `CLONE_INTO_CGROUP` is refused (an
//! older kernel, a cgroup the executor may not start processes in), the child is forked as
//! before and writes `0` to the cgroup's `cgroup.procs` as its first step (see
//! [`Command::start_in_cgroup`]).
//!
//! In the child, between fork and exec, in this order (the order `std` uses): the standard
//! streams are set, the working directory changed, the process group made, the signal mask
//! emptied and `SIGPIPE` set back to its default (Rust ignores it), the cgroup joined (when
//! not born there), the [`Command::pre_exec`] steps run in the order given, every
//! descriptor but the standard streams marked close-on-exec, and the program executed with
//! exactly the given environment. Only system calls on memory prepared before the fork: no
//! allocation, no lock, async-signal-safe, and nothing written but the child's own stack
//! (the executor's memory is the child's until exec). A failing step's `errno` reaches
//! the parent through a close-on-exec pipe and becomes the error of [`Command::spawn`].
//!
//! Sources: clone(2) (`clone3`, `CLONE_VM`, `CLONE_VFORK`, `CLONE_INTO_CGROUP`), glibc's
//! `posix_spawn` (`sysdeps/unix/sysv/linux/spawni.c`), the kernel's cgroup v2 documentation
//! (<https://docs.kernel.org/admin-guide/cgroup-v2.html>, "Processes"), and
//! `kernel/cgroup/cgroup.c` (`cgroup_attach_task`, `cgroup_css_set_fork`).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};

mod vm;
use vm::{VmChild, clone_vm};

/// One step between fork and exec ([`Command::pre_exec`]).
type Step = Box<dyn FnMut() -> io::Result<()> + Send + Sync>;

/// Where one of the child's standard streams goes.
#[derive(Debug, Default)]
pub(crate) enum Stdio {
    /// The executor's own.
    #[default]
    Inherit,
    /// A new pipe; the executor's end is in [`Child`].
    Piped,
    /// This descriptor.
    Fd(OwnedFd),
}

impl Stdio {
    /// A new pipe.
    pub(crate) fn piped() -> Stdio {
        Stdio::Piped
    }
}

impl From<OwnedFd> for Stdio {
    fn from(fd: OwnedFd) -> Stdio {
        Stdio::Fd(fd)
    }
}

/// The cgroup the child starts in.
#[derive(Debug)]
struct Cgroup {
    /// The cgroup's directory, for `CLONE_INTO_CGROUP`.
    dir: OwnedFd,
    /// Its `cgroup.procs`, open for writing, for a child that could not be born there.
    procs: OwnedFd,
    /// Whether a child that cannot join fails to start (else it starts outside).
    required: bool,
    /// Whether `CLONE_INTO_CGROUP` is tried (the tests turn it off to try the move).
    born_in: bool,
}

/// A client to start: see the module docs.
pub(crate) struct Command {
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    stdio: [Stdio; 3],
    session: bool,
    cgroup: Option<Cgroup>,
    steps: Vec<Step>,
    /// Whether the child is first started sharing this process's memory ([`clone_vm`]);
    /// the tests turn it off to try the fork.
    shared_memory: bool,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("cwd", &self.cwd)
            .field("steps", &self.steps.len())
            .finish_non_exhaustive()
    }
}

/// A started client: its pid and the executor's ends of its piped streams.
#[derive(Debug)]
pub(crate) struct Child {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
    /// Its standard input, when piped.
    pub(crate) stdin: Option<ChildStdin>,
    /// Its standard output, when piped.
    pub(crate) stdout: Option<ChildStdout>,
    /// Its standard error, when piped.
    pub(crate) stderr: Option<ChildStderr>,
}

impl Command {
    /// `program` (a path, or a name looked up in the `PATH` of the child's environment, or
    /// `/bin:/usr/bin` without one, as `execvp` does), with no argument, no environment, in
    /// the executor's working directory.
    pub(crate) fn new(program: impl AsRef<Path>) -> Command {
        Command {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdio: Default::default(),
            session: false,
            cgroup: None,
            steps: Vec::new(),
            shared_memory: true,
        }
    }

    /// Adds `args` to its arguments.
    pub(crate) fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(
        &mut self,
        args: I,
    ) -> &mut Self {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Adds `vars` to its environment (which starts empty).
    pub(crate) fn envs<I, K, V>(&mut self, vars: I) -> &mut Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            let (k, v) = (k.as_ref().to_owned(), v.as_ref().to_owned());
            self.env.retain(|(name, _)| *name != k);
            self.env.push((k, v));
        }
        self
    }

    /// Its working directory.
    pub(crate) fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// Its standard input.
    pub(crate) fn stdin(&mut self, stdio: Stdio) -> &mut Self {
        self.stdio[0] = stdio;
        self
    }

    /// Its standard output.
    pub(crate) fn stdout(&mut self, stdio: Stdio) -> &mut Self {
        self.stdio[1] = stdio;
        self
    }

    /// Its standard error.
    pub(crate) fn stderr(&mut self, stdio: Stdio) -> &mut Self {
        self.stdio[2] = stdio;
        self
    }

    /// Makes it the leader of a session, and so of a process group, of its own
    /// (`setsid()`): it has no controlling terminal, so nothing it starts can reach the
    /// executor's (`/dev/tty`: the red team of issue 31 typed a command into the daemon's
    /// terminal with `TIOCSTI` from an ACP client that shared it, and the daemon's shell ran
    /// it outside the sandbox).
    pub(crate) fn own_session(&mut self) -> &mut Self {
        self.session = true;
        self
    }

    /// Starts it in the cgroup `dir` (a cgroup v2 directory): born there with
    /// `CLONE_INTO_CGROUP`, or, where the kernel refuses that, moved there as its first step
    /// by writing `0` to the cgroup's `cgroup.procs`. Where that is refused too, a `required`
    /// child fails to start and another starts outside (the caller checks where it is).
    ///
    /// # Errors
    /// When the cgroup's directory or its `cgroup.procs` cannot be opened.
    pub(crate) fn start_in_cgroup(&mut self, dir: &Path, required: bool) -> io::Result<&mut Self> {
        use rustix::fs::{Mode, OFlags};
        let open =
            |path: &Path, flags| rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty());
        self.cgroup = Some(Cgroup {
            dir: open(dir, OFlags::RDONLY | OFlags::DIRECTORY)?,
            procs: open(&dir.join("cgroup.procs"), OFlags::WRONLY)?,
            required,
            born_in: true,
        });
        Ok(self)
    }

    /// Adds a step to run in the child between fork and exec, after those added before.
    ///
    /// # Safety
    /// As `std::os::unix::process::CommandExt::pre_exec`: `f` runs in the child of a process
    /// that may have many threads, so it must be async-signal-safe (system calls only: no
    /// allocation, no lock); and on the executor's memory, shared until exec: it writes
    /// nothing but its own stack (an atomic at most).
    pub(crate) unsafe fn pre_exec<F>(&mut self, f: F) -> &mut Self
    where
        F: FnMut() -> io::Result<()> + Send + Sync + 'static,
    {
        self.steps.push(Box::new(f));
        self
    }

    /// The program to execute: `program` itself when it names a path, else the first
    /// executable file of that name in the child's `PATH`.
    fn resolve(&self) -> io::Result<PathBuf> {
        if self.program.as_os_str().as_bytes().contains(&b'/') {
            return Ok(self.program.clone());
        }
        let path = self
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map_or_else(|| OsString::from("/bin:/usr/bin"), |(_, v)| v.clone());
        std::env::split_paths(&path)
            .map(|dir| dir.join(&self.program))
            .find(|candidate| {
                candidate.is_file()
                    && rustix::fs::access(candidate, rustix::fs::Access::EXEC_OK).is_ok()
            })
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    /// Starts it (see the module docs).
    ///
    /// # Errors
    /// The error of the step that failed in the child (or of `execve`), or of preparing it.
    pub(crate) fn spawn(&mut self) -> io::Result<Child> {
        let program = cstring(self.resolve()?.as_os_str())?;
        let mut argv_owned = vec![cstring(self.program.as_os_str())?];
        for arg in &self.args {
            argv_owned.push(cstring(arg)?);
        }
        let mut envp_owned = Vec::with_capacity(self.env.len());
        for (k, v) in &self.env {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            envp_owned.push(CString::new(pair).map_err(|_| nul_error())?);
        }
        let argv = pointers(&argv_owned);
        let envp = pointers(&envp_owned);
        let cwd = self
            .cwd
            .as_deref()
            .map(|d| cstring(d.as_os_str()))
            .transpose()?;
        // The child's ends (at 3 or above, so that setting 0..2 overwrites none of them) and
        // the executor's.
        let mut theirs: [Option<OwnedFd>; 3] = Default::default();
        let mut ours: [Option<OwnedFd>; 3] = Default::default();
        for (i, stdio) in self.stdio.iter_mut().enumerate() {
            match std::mem::take(stdio) {
                Stdio::Inherit => {}
                Stdio::Fd(fd) => theirs[i] = Some(above_2(fd)?),
                Stdio::Piped => {
                    let (read, write) = pipe()?;
                    let (child_end, our_end) = if i == 0 { (read, write) } else { (write, read) };
                    theirs[i] = Some(above_2(child_end)?);
                    ours[i] = Some(our_end);
                }
            }
        }
        let (report_read, report_write) = pipe()?;
        let plan = ChildPlan {
            program: &program,
            argv: &argv,
            envp: &envp,
            cwd: cwd.as_deref(),
            stdio: theirs
                .each_ref()
                .map(|fd| fd.as_ref().map(AsRawFd::as_raw_fd)),
            session: self.session,
            report: report_write.as_raw_fd(),
        };
        let pid = self.fork(&plan)?;
        drop(report_write);
        drop(theirs);
        if let Some(errno) = read_report(&report_read) {
            // The child failed before exec and exits: reaped here.
            let mut status = 0;
            // SAFETY: a plain waitpid on this process's own child.
            while unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
            return Err(io::Error::from_raw_os_error(errno));
        }
        let [stdin, stdout, stderr] = ours;
        Ok(Child {
            pid,
            status: None,
            stdin: stdin.map(ChildStdin::from),
            stdout: stdout.map(ChildStdout::from),
            stderr: stderr.map(ChildStderr::from),
        })
    }

    /// Starts the child (in its cgroup, when it has one) and runs it; returns its pid.
    /// First sharing this process's memory until the child execs ([`clone_vm`]), then, where
    /// the kernel refuses that, as a fork: born in the cgroup (`CLONE_INTO_CGROUP`), or
    /// where that is refused too, joining it as its first step.
    fn fork(&mut self, plan: &ChildPlan<'_>) -> io::Result<libc::pid_t> {
        let into = match &self.cgroup {
            Some(cgroup) if !cgroup.born_in => None,
            Some(cgroup) => Some(Some(cgroup.dir.as_raw_fd())),
            None => Some(None),
        };
        if let Some(into) = into.filter(|_| self.shared_memory) {
            let mut child = VmChild {
                plan,
                steps: &mut self.steps,
            };
            if let Ok(pid) = clone_vm(into, &mut child) {
                return Ok(pid);
            }
        }
        let born_in = match &self.cgroup {
            Some(cgroup) if !cgroup.born_in => false,
            Some(cgroup) => match clone_into_cgroup(cgroup.dir.as_raw_fd()) {
                Ok(0) => {
                    // SAFETY: in the child of a fork; `run` keeps to async-signal-safe calls.
                    unsafe { run(plan, None, &mut self.steps) }
                }
                Ok(pid) => return Ok(pid),
                // Refused: forked, and it moves itself (below).
                Err(_) => false,
            },
            None => true,
        };
        let join = (!born_in)
            .then(|| {
                self.cgroup
                    .as_ref()
                    .map(|c| (c.procs.as_raw_fd(), c.required))
            })
            .flatten();
        // SAFETY: the child runs `run` only, which keeps to async-signal-safe calls on
        // memory prepared before the fork and ends in exec or `_exit`.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe { run(plan, join, &mut self.steps) },
            pid => Ok(pid),
        }
    }
}

/// What the child needs, prepared before the fork.
struct ChildPlan<'a> {
    program: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    cwd: Option<&'a std::ffi::CStr>,
    stdio: [Option<RawFd>; 3],
    session: bool,
    report: RawFd,
}

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, 88 bytes):
/// include/uapi/linux/sched.h.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (include/uapi/linux/sched.h).
const INTO_CGROUP: u64 = 0x2_0000_0000;

/// `clone3(CLONE_INTO_CGROUP)` into the cgroup directory `dir`, otherwise as `fork`: the
/// child's pid in the parent, 0 in the child.
fn clone_into_cgroup(dir: RawFd) -> io::Result<libc::pid_t> {
    let args = CloneArgs {
        flags: INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: u64::try_from(dir).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?,
        ..CloneArgs::default()
    };
    // SAFETY: `args` is a `struct clone_args` of the size given; without CLONE_VM the child
    // runs on a copy of this stack, as after fork.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &raw const args,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// The child's life between fork and exec (see the module docs); `join` is the cgroup's
/// `cgroup.procs` to write itself to, and whether failing to is fatal.
///
/// # Safety
/// Only in the child of a fork, with `plan` prepared before it.
unsafe fn run(plan: &ChildPlan<'_>, join: Option<(RawFd, bool)>, steps: &mut [Step]) -> ! {
    let result = (|| -> io::Result<()> {
        // SAFETY (the whole closure): system calls on memory prepared before the fork.
        unsafe {
            for (target, fd) in plan.stdio.iter().enumerate() {
                if let Some(fd) = *fd {
                    // Every source is at 3 or above: dup2 makes a copy without close-on-exec.
                    check(libc::dup2(fd, target as libc::c_int))?;
                }
            }
            if let Some(cwd) = plan.cwd {
                check(libc::chdir(cwd.as_ptr()))?;
            }
            if plan.session {
                check(libc::setsid())?;
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut none);
            check(libc::sigprocmask(
                libc::SIG_SETMASK,
                &raw const none,
                std::ptr::null_mut(),
            ))?;
            if libc::signal(libc::SIGPIPE, libc::SIG_DFL) == libc::SIG_ERR {
                return Err(io::Error::last_os_error());
            }
            if let Some((procs, required)) = join {
                // `0`: the writing process itself.
                if libc::write(procs, b"0".as_ptr().cast(), 1) != 1 && required {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        for step in steps.iter_mut() {
            step()?;
        }
        // SAFETY: system calls only.
        unsafe { close_at_exec_from_3() };
        // SAFETY: NUL-terminated arrays of NUL-terminated strings, prepared before the fork.
        unsafe {
            libc::execve(
                plan.program.as_ptr(),
                plan.argv.as_ptr(),
                plan.envp.as_ptr(),
            );
        }
        Err(io::Error::last_os_error())
    })();
    let errno = result
        .err()
        .and_then(|e| e.raw_os_error())
        .unwrap_or(libc::EINVAL);
    // SAFETY: a write of four bytes on the stack, then `_exit`.
    unsafe {
        libc::write(plan.report, errno.to_ne_bytes().as_ptr().cast(), 4);
        libc::_exit(127)
    }
}

/// Marks every descriptor from 3 up close-on-exec: only the standard streams reach the
/// program. A descriptor the executor holds without the flag (one its parent or a C library
/// left it: a supervisor's pipe, socket activation's socket) reached the client and all it
/// starts, sandbox or not (Landlock checks a path when it is opened): a command read a file
/// of the daemon's and wrote to its TCP connection past the door through them (red team of
/// issue 33). `close_range(2)` (Linux 5.11), else each descriptor below the limit.
///
/// # Safety
/// In the child of a fork: system calls only.
unsafe fn close_at_exec_from_3() {
    // SAFETY: close_range, getrlimit and fcntl on integers and a struct on the stack.
    unsafe {
        let flags = libc::c_long::from(libc::CLOSE_RANGE_CLOEXEC);
        if libc::syscall(libc::SYS_close_range, 3_i64, i64::from(u32::MAX), flags) == 0 {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) == 0 {
            limit.rlim_cur.min(1 << 20)
        } else {
            1 << 16
        };
        for fd in 3..libc::c_int::try_from(top).unwrap_or(1 << 16) {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The `errno` the child reported before it exited, or `None` when it reached exec (the
/// pipe closed with nothing in it).
fn read_report(report: &OwnedFd) -> Option<i32> {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match rustix::io::read(report, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Some(e.raw_os_error()),
        }
    }
    (got == 4).then(|| i32::from_ne_bytes(buf))
}

/// `fd`, or a close-on-exec copy of it at 3 or above when it is a standard stream's.
fn above_2(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl on a descriptor owned here; the copy is owned by the result.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    check(copy)?;
    // SAFETY: just opened, owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// A pipe, both ends close-on-exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [0 as libc::c_int; 2];
    // SAFETY: `ends` is two ints, as pipe2 writes.
    check(unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both were just opened and are owned here only.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

fn nul_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a NUL byte in the program, an argument or the environment",
    )
}

fn cstring(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| nul_error())
}

/// The NULL-terminated array of pointers `execve` takes.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

impl Child {
    /// Its process id.
    pub(crate) fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Sends it `SIGKILL` (not once it is reaped).
    ///
    /// # Errors
    /// As kill(2).
    pub(crate) fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        // SAFETY: kill(2) of this process's own unreaped child (pid > 0).
        check(unsafe { libc::kill(self.pid, libc::SIGKILL) })
    }

    /// Waits for it to exit and reaps it; its status.
    ///
    /// # Errors
    /// As waitpid(2).
    pub(crate) fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let mut raw = 0;
        loop {
            // SAFETY: a plain waitpid on this process's own child.
            if unsafe { libc::waitpid(self.pid, &raw mut raw, 0) } >= 0 {
                let status = ExitStatus::from_raw(raw);
                self.status = Some(status);
                return Ok(status);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

#[cfg(test)]
mod tests;

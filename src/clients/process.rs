//! Running a client's inventory command: in its own process group, bounded by a deadline,
//! its output collected without letting a grandchild that keeps a pipe open hold the caller.
//! Used by the Codex inventory ([`super::codex::inventory`]).

use std::fmt;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A spawned child in its own process group, ended (the whole group) when dropped.
pub(crate) struct Group(pub(crate) Child);

impl Group {
    /// Spawns `cmd` as the leader of a new process group (Unix).
    pub(crate) fn spawn(cmd: &mut Command) -> std::io::Result<Group> {
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(cmd, 0);
        cmd.spawn().map(Group)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // npm launchers (`codex`, `copilot`) run the real client as their child: end the
            // group.
            #[cfg(unix)]
            let _ = Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{}", self.0.id())])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// What a finished command left.
pub(crate) struct Finished {
    /// Its exit status.
    pub(crate) status: ExitStatus,
    /// Everything it printed on standard output.
    pub(crate) stdout: Vec<u8>,
    /// Everything it printed on standard error.
    pub(crate) stderr: Vec<u8>,
}

/// Why [`run_to_end`] has no [`Finished`].
pub(crate) enum RunError {
    /// The command could not be started, or its output could not be read.
    Spawn(std::io::Error),
    /// It was still running (or a pipe still open) at the deadline; its group was ended.
    Timeout,
}

/// Writes that `binary` (e.g. "the Codex binary") gave no answer within `timeout`: the
/// `Display` of both inventory errors' `Timeout`.
pub(crate) fn write_timeout(
    f: &mut fmt::Formatter<'_>,
    binary: &str,
    timeout: Duration,
) -> fmt::Result {
    write!(
        f,
        "{binary} gave no answer within {} s (it was stopped)",
        timeout.as_secs_f64()
    )
}

/// Writes that `binary` exited with `status`, and what it printed on standard error
/// (trimmed, escaped): the `Display` of both inventory errors' `Exit`.
pub(crate) fn write_exit(
    f: &mut fmt::Formatter<'_>,
    binary: &str,
    status: &ExitStatus,
    stderr: &str,
) -> fmt::Result {
    write!(f, "{binary} failed ({status})")?;
    match stderr.trim() {
        "" => f.write_str(" and printed nothing on standard error"),
        err => write!(f, ", printing \"{}\"", err.escape_debug()),
    }
}

/// Runs `cmd` (stdin `/dev/null`, stdout and stderr captured) in its own process group until
/// it exits and both pipes close, or until `deadline`, when the group is ended.
pub(crate) fn run_to_end(cmd: &mut Command, deadline: Instant) -> Result<Finished, RunError> {
    let mut child = Group::spawn(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(RunError::Spawn)?;
    // Each pipe is read on its own thread, which reports through a channel, so a grandchild
    // that keeps a pipe open cannot hold us past the deadline.
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = tx.send(pipe.read_to_end(&mut buf).map(|_| buf));
        });
        rx
    };
    let stdout = read_all(Box::new(child.0.stdout.take().expect("piped")));
    let stderr = read_all(Box::new(child.0.stderr.take().expect("piped")));
    let status = loop {
        if let Some(status) = child.0.try_wait().map_err(RunError::Spawn)? {
            break status;
        }
        if Instant::now() >= deadline {
            // Dropping `child` ends its process group.
            return Err(RunError::Timeout);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let collect = |rx: mpsc::Receiver<std::io::Result<Vec<u8>>>| {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(read) => read.map_err(RunError::Spawn),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(RunError::Timeout),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(RunError::Spawn(
                std::io::Error::other("the pipe reader stopped without a result"),
            )),
        }
    };
    Ok(Finished {
        status,
        stdout: collect(stdout)?,
        stderr: collect(stderr)?,
    })
}

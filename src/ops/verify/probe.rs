//! The programs `verify` runs besides the reviewer: a check that they exist, and the
//! client's version, bounded.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use super::VerifyError;
use crate::clients::plan::LaunchPlan;
use crate::launch::client_env_from;

/// How long `<client> --version` may take.
pub(super) const VERSION_TIMEOUT: Duration = Duration::from_secs(60);

/// `path` names an executable file.
pub(super) fn check_executable(path: &Path) -> Result<(), VerifyError> {
    let problem = match std::fs::metadata(path) {
        Err(e) => {
            format!("{e} (give the client's binary, e.g. `--client-bin $(command -v gemini)`)")
        }
        Ok(m) if !m.is_file() => "not a file".to_owned(),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => "not executable".to_owned(),
        Ok(_) => return Ok(()),
    };
    Err(VerifyError::Program {
        path: path.to_owned(),
        problem,
    })
}

/// The first line `<bin> --version` prints, run with the plan's environment rooted in
/// `dir` instead of the launch directory (so nothing of the run's is touched) and from the
/// daemon's environment `parent`, in its own process group, killed after
/// [`VERSION_TIMEOUT`]. `Err` says why there is none.
pub(super) fn client_version(
    bin: &Path,
    plan: &LaunchPlan,
    parent: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<String, String> {
    let launch_dir = plan.launch_dir.as_str();
    let rooted = dir.to_string_lossy();
    for rel in &plan.dirs {
        std::fs::create_dir_all(dir.join(rel))
            .map_err(|e| format!("cannot create {}: {e}", dir.join(rel).display()))?;
    }
    let lookup = |name: &str| parent.get(name).map(OsString::from);
    let env: Vec<(OsString, OsString)> = client_env_from(plan, &lookup)
        .into_iter()
        .map(|(name, value)| {
            let text = value.to_string_lossy();
            match text.strip_prefix(launch_dir) {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    (name, OsString::from(format!("{rooted}{rest}")))
                }
                _ => (name, value),
            }
        })
        .collect();
    let mut cmd = Command::new(bin);
    cmd.env_clear().envs(env).current_dir(dir);
    first_line(cmd, bin)
}

/// The first line `<bin> --version` prints, offline and touching nothing of the user's: run
/// from an environment of `PATH` only, with `HOME` and `TMPDIR` a new empty directory
/// (removed afterwards) and every proxy at a dead local port, in its own process group,
/// killed after 60 s. What `launch --strict` checks the client version with.
///
/// # Errors
/// Why there is none, in words.
pub fn installed_version(bin: &Path) -> Result<String, String> {
    let home = tempfile::Builder::new()
        .prefix("kcap-version-")
        .tempdir()
        .map_err(|e| format!("cannot make a directory to run it in: {e}"))?;
    // Run from another directory: a relative path is this process's.
    let bin = match bin.components().count() {
        1 => bin.to_owned(),
        _ => std::path::absolute(bin).map_err(|e| format!("{}: {e}", bin.display()))?,
    };
    let bin = bin.as_path();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("HOME", home.path())
        .env("TMPDIR", home.path())
        .current_dir(home.path());
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
    ] {
        cmd.env(name, "http://127.0.0.1:9");
    }
    cmd.env("NO_PROXY", "127.0.0.1,localhost");
    first_line(cmd, bin)
}

/// Runs `cmd` (`bin`, its environment and directory set) with `--version`, bounded, and
/// returns the first line it printed.
fn first_line(mut cmd: Command, bin: &Path) -> Result<String, String> {
    cmd.arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {} --version: {e}", bin.display()))?;
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    let deadline = Instant::now() + VERSION_TIMEOUT;
    let out = loop {
        if let Ok(Some(_)) = child.try_wait() {
            break rx
                .recv_timeout(Duration::from_secs(2))
                .map_err(|_| "a process it left behind kept its output open".to_owned());
        }
        if Instant::now() >= deadline {
            break Err(format!(
                "no answer within {} s; stopped it",
                VERSION_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Whatever is left of its group, then the leader (not reaped yet: its id is not reused).
    if let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
    let out = out?;
    String::from_utf8_lossy(&out)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| "it printed nothing".to_owned())
}

/// Makes `dir` a git checkout, as a reviewed worktree is (some clients treat one
/// differently: Codex CLI asks about trust for its repository): `git init -q` with `git`
/// from `PATH`, bounded by [`GIT_TIMEOUT`]. Without `git` the worktree stays a plain
/// directory.
pub(super) fn git_init(dir: &Path) {
    let Ok(mut child) = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return;
    };
    let deadline = Instant::now() + GIT_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// How long `git init` may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(10);

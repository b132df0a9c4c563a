//! The executor at the file descriptor limit (issue 33, item 2: "at the fd limit, 106–116
//! of 118 failed launches left their directories, 12–26 holding `auth.json`, unreported"):
//! a launch that runs out of descriptors at any step fails with an error that names the
//! shortage, and leaves no launch directory, no lock file and no process behind.
//!
//! The library runs in a copy of this binary (one test, in a process of its own) whose soft
//! `RLIMIT_NOFILE` it lowers and then fills, leaving 0, 1, 2, … descriptors free for each
//! launch: a daemon whose table its running reviewers filled. The CLI runs with a low limit
//! set between fork and exec. This binary's own limit is never lowered.

use crate::common;

use std::os::fd::OwnedFd;
#[cfg(feature = "cli")]
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::stand_in::sh_script;
use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::launch::{self, Options};
use rustix::process::{Resource, Rlimit};
use tempfile::TempDir;

use crate::launch::{acp_plan, bare_plan};

/// Set in the copy of this binary that runs a test at a lowered limit.
const AT_THE_LIMIT: &str = "KCAP_TEST_AT_THE_FD_LIMIT";

/// The soft limit of the copy: far above what a launch needs, low enough to fill at once.
const SOFT_LIMIT: u64 = 256;

/// Descriptors left free for a launch, from none up to more than any launch needs.
const MOST_FREE: usize = 48;

/// A terminal stand-in (`acp` false) or an ACP one that answers `initialize` and
/// `session/new`; both then stay up for a minute when `stay` (a shell whose command line
/// names `dir`), or exit 0.
fn stand_in(dir: &Path, acp: bool, stay: bool) -> std::path::PathBuf {
    let handshake = "read -r _\n\
         printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":1}}'\n\
         read -r _\n\
         printf '%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"sessionId\":\"s1\"}}'\n";
    let body = if acp { handshake } else { "echo up\n" };
    let rest = if stay { "sleep 60\nexit 0" } else { "exit 0" };
    sh_script(dir, "stand-in", &format!("{body}{rest}"))
}

/// A plan that writes a credential file (`home/.codex/auth.json`, a dummy key), as a Codex
/// launch does, and a file ten directories down (a module cache's depth: removing it one
/// descriptor a level needs more than the two a launch directory keeps).
fn plan(launch_dir: &Path, acp: bool) -> LaunchPlan {
    let mut plan = if acp {
        acp_plan(launch_dir)
    } else {
        bare_plan(Path::new("unused"), launch_dir)
    };
    plan.files.push(kcap_mcp_registry::clients::plan::PlanFile {
        path: "home/.codex/auth.json".into(),
        contents: "{\"OPENAI_API_KEY\":\"sk-dummy\"}".into(),
        mode: 0o600,
    });
    plan.files.push(kcap_mcp_registry::clients::plan::PlanFile {
        path: "home/go/pkg/mod/a/b/c/d/e/f/x.go".into(),
        contents: "package f".into(),
        mode: 0o400,
    });
    plan
}

/// Processes, zombies included, whose command line names `marker`, or that are this
/// process's unreaped children.
fn left_processes(marker: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() || name == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let zombie_child = fields.first() == Some(&"Z") && fields.get(1) == Some(&me.as_str());
        if zombie_child || String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(format!("{name}: {stat}"));
        }
    }
    found
}

/// What a failed (or stopped) launch must not leave: its directory, its lock, a process.
fn assert_nothing_left(launch_dir: &Path, marker: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = left_processes(marker);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: processes left: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !launch_dir.exists(),
        "{what}: the launch directory is left{}",
        if launch_dir.join("home/.codex/auth.json").exists() {
            ", holding auth.json"
        } else {
            ""
        }
    );
    let lock = launch::lock_path(launch_dir).unwrap();
    assert!(
        !lock.exists(),
        "{what}: the lock {} is left",
        lock.display()
    );
}

/// Opens descriptors until the table is full, then closes `free` of them.
fn fill(free: usize) -> Vec<OwnedFd> {
    let mut held = Vec::new();
    loop {
        match rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) {
            Ok(fd) => held.push(fd),
            Err(rustix::io::Errno::MFILE) => break,
            Err(e) => panic!("open /dev/null: {e}"),
        }
    }
    held.truncate(held.len().saturating_sub(free));
    held
}

/// The library's side, in the copy: for each number of free descriptors, a launch either
/// starts (and is stopped) or fails naming the shortage, and leaves nothing either way.
fn launches_at_the_limit(acp: bool) {
    let hard = rustix::process::getrlimit(Resource::Nofile).maximum;
    rustix::process::setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(SOFT_LIMIT),
            maximum: hard,
        },
    )
    .unwrap();
    let tmp = TempDir::new().unwrap();
    let marker = tmp.path().display().to_string();
    let bin = stand_in(tmp.path(), acp, true);
    // A daemon at its limit has launched before: its guard runs already.
    launch::launch(
        &plan(&tmp.path().join("first"), acp),
        &bin,
        &Options::default(),
    )
    .unwrap()
    .stop()
    .unwrap();
    let (mut started, mut failed) = (0, Vec::new());
    for free in 0..=MOST_FREE {
        let launch_dir = tmp.path().join(format!("l{free}"));
        let held = fill(free);
        let result = launch::launch(&plan(&launch_dir, acp), &bin, &Options::default());
        let what = format!("{free} descriptors free");
        match result {
            Ok(reviewer) => {
                drop(held);
                reviewer.stop().unwrap();
                started += 1;
            }
            Err(e) => {
                drop(held);
                let chain = kcap_mcp_registry::text::error_chain(&e);
                assert!(
                    chain.contains("Too many open files"),
                    "{what}: the error does not name the shortage: {chain}"
                );
                failed.push(chain);
            }
        }
        assert_nothing_left(&launch_dir, &marker, &what);
    }
    assert!(started > 0, "no launch started: {failed:#?}");
    assert!(!failed.is_empty(), "no launch failed");
    println!(
        "{} started, {} failed, nothing left: {failed:#?}",
        started,
        failed.len()
    );
}

/// Runs `name` again in a copy of this binary, alone, with [`AT_THE_LIMIT`] set.
fn in_a_copy(name: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(AT_THE_LIMIT, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("nothing left"),
        "{name} at the fd limit: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_terminal_launch_at_the_fd_limit_fails_clearly_and_leaves_nothing() {
    if std::env::var_os(AT_THE_LIMIT).is_some() {
        return launches_at_the_limit(false);
    }
    in_a_copy(
        "launch_fd_limit::a_terminal_launch_at_the_fd_limit_fails_clearly_and_leaves_nothing",
    );
}

#[test]
fn an_acp_launch_at_the_fd_limit_fails_clearly_and_leaves_nothing() {
    if std::env::var_os(AT_THE_LIMIT).is_some() {
        return launches_at_the_limit(true);
    }
    in_a_copy("launch_fd_limit::an_acp_launch_at_the_fd_limit_fails_clearly_and_leaves_nothing");
}

/// The CLI, `launch --plan`, under soft limits from 4 descriptors up: it exits 0 (the ACP
/// stand-in answered `session/new`, the terminal one ran) or 1 or 2 with an error naming the
/// shortage, and leaves nothing.
#[cfg(feature = "cli")]
#[test]
fn launch_under_a_low_fd_limit_fails_clearly_and_leaves_nothing() {
    for acp in [false, true] {
        let tmp = TempDir::new().unwrap();
        let marker = tmp.path().display().to_string();
        // The ACP run ends once session/new is answered; the terminal one when its client
        // exits.
        let bin = stand_in(tmp.path(), acp, acp);
        let (mut started, mut failed) = (0, Vec::new());
        for limit in 4..=40_u64 {
            let launch_dir = tmp.path().join(format!("l{limit}"));
            let file = tmp.path().join(format!("plan{limit}.json"));
            std::fs::write(&file, plan(&launch_dir, acp).to_json()).unwrap();
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"));
            cmd.args(["launch", "--timeout", "20", "--plan"])
                .arg(&file)
                .arg("--client-bin")
                .arg(&bin);
            // SAFETY: setrlimit is async-signal-safe; it touches this child's limit only.
            unsafe {
                cmd.pre_exec(move || {
                    let hard = rustix::process::getrlimit(Resource::Nofile).maximum;
                    rustix::process::setrlimit(
                        Resource::Nofile,
                        Rlimit {
                            current: Some(limit),
                            maximum: hard,
                        },
                    )
                    .map_err(Into::into)
                });
            }
            let out = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("acp {acp}, limit {limit}: {stderr}");
            match out.status.code() {
                Some(0) => started += 1,
                Some(1 | 2) => {
                    assert!(stderr.contains("Too many open files"), "{what}");
                    failed.push(limit);
                }
                other => panic!("{what}: exit {other:?}"),
            }
            assert_nothing_left(&launch_dir, &marker, &what);
        }
        assert!(
            started > 0 && !failed.is_empty(),
            "acp {acp}: {started} started, failed at {failed:?}"
        );
        println!("acp {acp}: {started} started, failed at limits {failed:?}, nothing left");
    }
}

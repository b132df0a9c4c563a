//! The copy of this repository `tests/clients/ci_snippets.rs` runs the snippets on, and running its
//! tools (git, cargo, bash, pre-commit) in a controlled environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::actions::doc_block;
use super::{BROKEN_SERVER, MANIFEST_DIR, ROOT, SEARCH_SERVER};
// ------------------------------------------------------------------------------------------
// The copy of this repository
// ------------------------------------------------------------------------------------------

/// The cases share one checkout: one at a time.
pub(crate) fn one_at_a_time() -> MutexGuard<'static, ()> {
    static CHECKOUT: Mutex<()> = Mutex::new(());
    CHECKOUT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The git repository made from the working tree, with a branch per case.
pub(crate) struct Seed {
    pub(crate) dir: PathBuf,
    pub(crate) main_commit: String,
}

pub(crate) fn seed() -> &'static Seed {
    static SEED: OnceLock<Seed> = OnceLock::new();
    SEED.get_or_init(make_seed)
}

pub(crate) fn make_seed() -> Seed {
    let dir = Path::new(ROOT).join("seed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let listed = git(
        Path::new(MANIFEST_DIR),
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
    );
    for file in listed.split('\0').filter(|f| !f.is_empty()) {
        let from = Path::new(MANIFEST_DIR).join(file);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        let to = dir.join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copying {file}: {e}"));
    }
    git(&dir, &["init", "-q", "-b", "main"]);
    commit(&dir, "the working tree");
    let branch = |name: &str, from: &str, files: &[(&str, String)]| {
        git(&dir, &["checkout", "-q", "-b", name, from]);
        for (path, text) in files {
            std::fs::write(dir.join(path), text).unwrap();
        }
        commit(&dir, name);
    };
    let mcp_json = output(
        {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"));
            cmd.args(["export", "claude", "--registry"])
                .arg(dir.join("registry"));
            cmd
        },
        "export claude",
    );
    assert_eq!(mcp_json.code, 0, "{mcp_json:?}");
    branch("mcp-json", "main", &[(".mcp.json", mcp_json.stdout)]);
    branch(
        "broken",
        "main",
        &[("registry/kcap-broken.toml", BROKEN_SERVER.into())],
    );
    branch(
        "pr",
        "main",
        &[("registry/kcap-search.toml", SEARCH_SERVER.into())],
    );
    // The entries docs/ci.md shows the reviewer adding.
    let entries = doc_block("toml", "kcap-search: read_only (absent) -> true");
    let accepted = read(&dir.join("registry-accepted.toml")) + "\n" + &entries;
    branch("pr-accepted", "pr", &[("registry-accepted.toml", accepted)]);
    git(&dir, &["checkout", "-q", "main"]);
    let main_commit = git(&dir, &["rev-parse", "main"]).trim().to_string();
    Seed { dir, main_commit }
}

pub(crate) fn commit(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--no-verify", "-m", message]);
}

/// The checkout, at the copy's `branch` (a fresh clone the first time), with no files but the
/// branch's and the ignored ones (the builds in `target/`), and no `../base` worktree.
pub(crate) fn checkout(branch: &str) -> PathBuf {
    let seed = seed();
    let work = Path::new(ROOT).join("work");
    let repo = work.join("repo");
    if repo.join(".git").is_dir() {
        git(
            &repo,
            &[
                "remote",
                "set-url",
                "origin",
                &seed.dir.display().to_string(),
            ],
        );
        git(
            &repo,
            &[
                "fetch",
                "-q",
                "--prune",
                "--force",
                "origin",
                "+refs/heads/*:refs/remotes/origin/*",
            ],
        );
    } else {
        std::fs::create_dir_all(&work).unwrap();
        let _ = std::fs::remove_dir_all(&repo);
        git(
            &work,
            &["clone", "-q", &seed.dir.display().to_string(), "repo"],
        );
    }
    let _ = std::fs::remove_dir_all(work.join("base"));
    git(&repo, &["worktree", "prune"]);
    git(
        &repo,
        &[
            "checkout",
            "-q",
            "-f",
            "-B",
            "case",
            &format!("origin/{branch}"),
        ],
    );
    git(&repo, &["clean", "-q", "-f", "-d"]);
    repo
}

// ------------------------------------------------------------------------------------------
// Processes
// ------------------------------------------------------------------------------------------

/// What a process printed, and its exit code.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// `program` with a cleared environment but what the tools need: `PATH` (with the toolchain
/// running this test first), `HOME` and the cargo and rustup homes, git without the user's
/// config, and cargo offline, building release as fast as debug into one build directory.
pub(crate) fn tool_command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear();
    for var in [
        "HOME",
        "CARGO_HOME",
        "RUSTUP_HOME",
        "RUSTUP_TOOLCHAIN",
        "TMPDIR",
        "LANG",
    ] {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    let mut path = OsString::new();
    if let Some(cargo) = std::env::var_os("CARGO") {
        if let Some(bin) = Path::new(&cargo).parent() {
            path.push(bin);
            path.push(":");
        }
    }
    path.push(std::env::var_os("PATH").unwrap_or_default());
    cmd.env("PATH", path)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "ci snippets")
        .env("GIT_AUTHOR_EMAIL", "ci-snippets@example.invalid")
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_NAME", "ci snippets")
        .env("GIT_COMMITTER_EMAIL", "ci-snippets@example.invalid")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_BUILD_BUILD_DIR", Path::new(ROOT).join("build"))
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
        .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "true");
    cmd
}

pub(crate) fn output(mut cmd: Command, what: &str) -> Out {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `git ARGS` in `dir`; panics when it fails. Its stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let mut cmd = tool_command("git");
    cmd.args(args).current_dir(dir);
    let out = output(cmd, &format!("git {}", args.join(" ")));
    assert_eq!(out.code, 0, "git {args:?} in {}: {out:?}", dir.display());
    out.stdout
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

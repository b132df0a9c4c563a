//! The worktree's own git configuration, which a reviewer's client reads whenever it runs
//! git there: `.git/config` (for a linked worktree the common directory's `config`, and its
//! own `config.worktree`), with every file those `include.path` or `includeIf` and, through
//! `git status`, each submodule's. The reviewer reviews that repository, so the plan cannot
//! take the file away; a key whose value git runs as a command is neutralized where git
//! gives a way, and the launch refused where it does not:
//!
//! - [`OVERRIDES`]: keys of one fixed name, set again in the reviewer's environment by
//!   [`override_env`] (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_<n>`, `GIT_CONFIG_VALUE_<n>`:
//!   git-config(1), ENVIRONMENT; git reads them after every file, and every git the client
//!   starts inherits them, its tools' commands and their submodules' too).
//! - [`REFUSED`]: the keys of a driver the repository names itself (`filter.<driver>.clean`
//!   and the like): no fixed list of overrides names every driver, and an empty value does
//!   not switch a diff driver off (git 2.47: `-c diff.<driver>.command=` made `git diff`
//!   fail "cannot run : No such file or directory"). [`preflight`] reads the configuration
//!   with git itself and refuses a launch that sets one ([`GitRefusal`]).
//!
//! What each client ran of it, measured, is its room's `GIT_AT_START`
//! ([`crate::clients::codex::GIT_AT_START`], [`crate::clients::claude::GIT_AT_START`]),
//! shown in the refusal; the tests are `tests/clients/git_start.rs`. Each key's command
//! runs also inside the reviewer's sandbox: `/bin/sh` is the system's, and Landlock does
//! not look at what git passes it. The sandbox stopped only a program outside the system's
//! directories (a `gpg.program`: the sandbox executes nothing there, the worktree included)
//! and a linked worktree's common directory, which it does not let the reviewer read at all
//! (git then fails there; measured on the four versions of `GIT_AT_START`). No hook ran at
//! start on any of them, in the sandbox or without it.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::plan::EnvVar;
use super::{Client, LaunchContext, RenderError, non_blank};

/// One key of the worktree's configuration set again in the reviewer's environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Override {
    /// The key, as git-config(1) spells it (`core.fsmonitor`).
    pub key: &'static str,
    /// The value that runs nothing.
    pub value: &'static str,
}

/// The keys [`override_env`] sets, each to the value that runs nothing. Measured through
/// the executor on Claude Code 2.1.197 (`git_start::claude_git_config_commands_are_neutralized`),
/// which runs `git status --short` and `git log --oneline -n 5` in the worktree at start with
/// no `-c` of its own; each ran without the override:
///
/// - `core.fsmonitor=false`: the hook ran on every index read (three times at start), from
///   `.git/config`, an included file, a linked worktree's `config.worktree`, and a
///   submodule's own `config`.
/// - `diff.ignoreSubmodules=dirty`: `git status` went into each submodule and ran a clean
///   filter of the submodule's own configuration, which [`preflight`] does not read; with
///   it, `git status` and `git diff` compare a submodule's commit and go no further (git
///   2.47, by hand; plumbing such as `git diff-files` ignores the setting).
/// - `log.showSignature=false`: `git log` ran `gpg.program` on a signed commit (with the
///   reviewer's sandbox off; in it, a program of the repository's cannot be executed).
/// - `core.hooksPath=/dev/null`: no hook ran at start on any version measured (nothing
///   they run writes); the commands a reviewer's tools run may (`git commit`, `checkout`).
///
/// Codex CLI (0.169.0, 0.171.0) and Claude Code 2.1.332 pass `core.fsmonitor` and
/// `core.hooksPath` as `-c` to their own git calls already; 2.1.332 `log.showSignature`
/// too. A `-c` is read after these, so theirs stands.
pub const OVERRIDES: [Override; 4] = [
    Override {
        key: "core.fsmonitor",
        value: "false",
    },
    Override {
        key: "core.hooksPath",
        value: "/dev/null",
    },
    Override {
        key: "diff.ignoreSubmodules",
        value: "dirty",
    },
    Override {
        key: "log.showSignature",
        value: "false",
    },
];

/// [`OVERRIDES`] as the environment git reads them from: `GIT_CONFIG_COUNT=4`, then
/// `GIT_CONFIG_KEY_<n>` and `GIT_CONFIG_VALUE_<n>` for each, `n` from 0.
///
/// ```
/// use kcap_mcp_registry::clients::git::override_env;
///
/// let env = override_env();
/// assert_eq!((env[0].name.as_str(), env[0].value.as_str()), ("GIT_CONFIG_COUNT", "4"));
/// assert_eq!((env[1].name.as_str(), env[1].value.as_str()), ("GIT_CONFIG_KEY_0", "core.fsmonitor"));
/// assert_eq!((env[2].name.as_str(), env[2].value.as_str()), ("GIT_CONFIG_VALUE_0", "false"));
/// ```
pub fn override_env() -> Vec<EnvVar> {
    let mut env = vec![EnvVar::new("GIT_CONFIG_COUNT", OVERRIDES.len().to_string())];
    for (n, o) in OVERRIDES.iter().enumerate() {
        env.push(EnvVar::new(format!("GIT_CONFIG_KEY_{n}"), o.key));
        env.push(EnvVar::new(format!("GIT_CONFIG_VALUE_{n}"), o.value));
    }
    env
}

/// A key whose value git runs as a command and that no override can switch off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefusedKey {
    /// The section (`filter`).
    pub section: &'static str,
    /// Whether the key has a driver's name between section and name (`filter.<driver>.clean`).
    pub driver: bool,
    /// The name (`clean`).
    pub name: &'static str,
    /// When git runs it, in words.
    pub runs: &'static str,
    /// Why no override switches it off, in words.
    pub unfixable: &'static str,
}

impl std::fmt::Display for RefusedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.driver {
            true => write!(f, "{}.<driver>.{}", self.section, self.name),
            false => write!(f, "{}.{}", self.section, self.name),
        }
    }
}

/// Why no override switches a driver's command off.
const ANY_DRIVER: &str = "no override in the reviewer's environment can name every driver";

/// The keys [`preflight`] refuses (git-config(1), gitattributes(5)). The filters ran at
/// start (Codex CLI 0.169.0 and 0.171.0, Claude Code 2.1.197: the rooms' `GIT_AT_START`);
/// the diff and merge drivers ran at start on no version measured, and run on the
/// commands a reviewer's tools run to read a change (git 2.47, by hand: `git diff` ran
/// `diff.<driver>.command`, and `diff.external` for a file with no driver).
pub const REFUSED: [RefusedKey; 7] = [
    RefusedKey {
        section: "filter",
        driver: true,
        name: "clean",
        runs: "on `git status`, `git diff` and `git add` of a file whose attributes say \
               `filter=<driver>`",
        unfixable: ANY_DRIVER,
    },
    RefusedKey {
        section: "filter",
        driver: true,
        name: "process",
        runs: "on `git status`, `git diff`, `git add` and checkouts of a file whose \
               attributes say `filter=<driver>`",
        unfixable: ANY_DRIVER,
    },
    RefusedKey {
        section: "filter",
        driver: true,
        name: "smudge",
        runs: "on checkouts of a file whose attributes say `filter=<driver>`",
        unfixable: ANY_DRIVER,
    },
    RefusedKey {
        section: "diff",
        driver: true,
        name: "command",
        runs: "on `git diff`, `git log -p` and `git show` of a file whose attributes say \
               `diff=<driver>`",
        unfixable: ANY_DRIVER,
    },
    RefusedKey {
        section: "diff",
        driver: true,
        name: "textconv",
        runs: "on `git diff`, `git log -p`, `git show` and `git grep` of a file whose \
               attributes say `diff=<driver>`",
        unfixable: ANY_DRIVER,
    },
    RefusedKey {
        section: "diff",
        driver: false,
        name: "external",
        runs: "on `git diff` of every file",
        unfixable: "an empty override does not switch it off (`git diff` fails \
                    instead)",
    },
    RefusedKey {
        section: "merge",
        driver: true,
        name: "driver",
        runs: "on `git merge`, `git cherry-pick` and `git rebase` of a file whose attributes \
               say `merge=<driver>`",
        unfixable: ANY_DRIVER,
    },
];

/// The entry of [`REFUSED`] that `key` (as `git config --list` writes it: section and name
/// in lower case, the driver's name as given) is, if any.
///
/// ```
/// use kcap_mcp_registry::clients::git::refused;
///
/// assert_eq!(refused("filter.lfs.process").unwrap().name, "process");
/// assert_eq!(refused("filter.a.b.clean").unwrap().name, "clean");
/// assert!(refused("diff.external").is_some());
/// assert!(refused("diff.x.external").is_none());
/// assert!(refused("core.fsmonitor").is_none());
/// ```
pub fn refused(key: &str) -> Option<&'static RefusedKey> {
    let (section, rest) = key.split_once('.')?;
    let (driver, name) = match rest.rsplit_once('.') {
        Some((driver, name)) => (Some(driver), name),
        None => (None, rest),
    };
    REFUSED.iter().find(|r| {
        r.section.eq_ignore_ascii_case(section)
            && r.name.eq_ignore_ascii_case(name)
            && r.driver == driver.is_some()
    })
}

/// What a client runs in the worktree when it starts and what of the worktree's git
/// configuration that ran, measured without the plan's protection: each room's
/// `GIT_AT_START`, shown in [`GitRefusal::Command`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartFacts {
    /// The client.
    pub client: Client,
    /// What it runs at start, in words.
    pub runs: &'static str,
    /// What of the repository's configuration that ran, with the versions.
    pub ran: &'static str,
}

/// Why [`preflight`] refused a launch ([`RenderError::GitConfig`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GitRefusal {
    /// The worktree's configuration sets a key of [`REFUSED`].
    Command {
        /// The client and what it was measured to run.
        facts: &'static StartFacts,
        /// The key, as `git config --list` writes it.
        key: String,
        /// The file that sets it (an included one if that is where it is).
        file: PathBuf,
        /// Its entry.
        refused: &'static RefusedKey,
    },
    /// `git config --list` in the worktree failed or did not finish: what git would run
    /// there cannot be told.
    Unreadable {
        /// The client.
        client: Client,
        /// The worktree.
        worktree: PathBuf,
        /// What happened (git's first line of error, printable).
        problem: String,
    },
}

impl std::fmt::Display for GitRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::text::{ShownPath, printable};
        match self {
            GitRefusal::Command {
                facts,
                key,
                file,
                refused,
            } => write!(
                f,
                "cannot launch the {client} reviewer: the worktree's git configuration sets \
                 `{key}` in {file}, a command git runs {runs}, and {unfixable}; {client} \
                 {start}, which ran {ran}; remove it (`git config --file {file} --unset-all \
                 {key}`) or give the reviewer a checkout whose git configuration the daemon \
                 wrote",
                client = facts.client.display_name(),
                key = printable(key),
                file = ShownPath(file),
                runs = refused.runs,
                unfixable = refused.unfixable,
                start = facts.runs,
                ran = facts.ran,
            ),
            GitRefusal::Unreadable {
                client,
                worktree,
                problem,
            } => write!(
                f,
                "cannot launch the {} reviewer: `git config --list` in its worktree {} \
                 {problem}, so which commands git would run there cannot be told; repair \
                 the repository's configuration (git names the file) or give the reviewer a \
                 fresh checkout",
                client.display_name(),
                ShownPath(worktree)
            ),
        }
    }
}

/// How long [`preflight`]'s `git config --list` may take (an include of a FIFO blocks git).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Refuses a launch whose worktree's git configuration sets a key of [`REFUSED`], read as
/// the reviewer's git reads it: `git config --list --show-origin --show-scope --includes`
/// run in the worktree with `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null` and
/// `HOME` the per-launch home (the plan's root: no global configuration), its local and
/// worktree scopes only. `facts` are the client's room's `GIT_AT_START`, for the message.
///
/// A launch with no worktree, or whose worktree has no `.git` (one inside another
/// repository is [`super::root::worktree_preflight`]'s), passes without running git; so
/// does a machine with no `git` on the daemon's `PATH`, where the client finds none either.
///
/// # Errors
/// [`RenderError::GitConfig`]: [`GitRefusal::Command`] naming the first such key and the
/// file that sets it, [`GitRefusal::Unreadable`] when git fails or takes more than
/// [`READ_TIMEOUT`].
pub fn preflight(ctx: &LaunchContext, facts: &'static StartFacts) -> Result<(), RenderError> {
    let Some(worktree) = non_blank(&ctx.worktree).map(Path::new) else {
        return Ok(());
    };
    if !worktree.is_absolute() || std::fs::symlink_metadata(worktree.join(".git")).is_err() {
        return Ok(());
    }
    let home = match non_blank(&ctx.launch_dir) {
        Some(dir) => Path::new(dir).join(super::root::HOME_DIR),
        None => PathBuf::from("/nonexistent"),
    };
    let refuse = |refusal| Err(RenderError::GitConfig(Box::new(refusal)));
    let entries = match read_config(worktree, &home) {
        Ok(entries) => entries,
        Err(problem) => {
            return refuse(GitRefusal::Unreadable {
                client: facts.client,
                worktree: worktree.to_owned(),
                problem,
            });
        }
    };
    for entry in entries {
        if let Some(refused) = refused(&entry.key) {
            return refuse(GitRefusal::Command {
                facts,
                key: entry.key,
                file: entry.file,
                refused,
            });
        }
    }
    Ok(())
}

/// One key of the worktree's configuration and the file that sets it.
#[derive(Debug)]
struct Entry {
    key: String,
    file: PathBuf,
}

/// The local and worktree-scope keys of `worktree`'s repository (module docs), each with
/// its file, absolute; `Err` with what went wrong when git fails or runs past
/// [`READ_TIMEOUT`]. No `git` found: none.
fn read_config(worktree: &Path, home: &Path) -> Result<Vec<Entry>, String> {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(worktree)
        .args(["config", "--list", "--show-origin", "--show-scope"])
        .args(["--includes", "-z"])
        .env_clear()
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("could not start git ({e})")),
    };
    let pipes = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    ];
    let readers = pipes.map(|pipe| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut out);
            }
            out
        })
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < READ_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "did not finish within {} s",
                    READ_TIMEOUT.as_secs()
                ));
            }
        }
    };
    let [stdout, stderr] = readers.map(|r| r.join().unwrap_or_default());
    if !status.success() {
        let stderr = String::from_utf8_lossy(&stderr);
        let line = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!(
            "failed ({status}): {}",
            crate::text::printable(line.trim())
        ));
    }
    Ok(parse_list(&stdout, worktree))
}

/// The entries of `git config --list --show-origin --show-scope -z` output, each
/// `<scope>\0<origin>\0<key>[\n<value>]\0`, of the `local` and `worktree` scopes, their
/// `file:` origins made absolute against `dir` (git writes them relative to where it ran).
fn parse_list(out: &[u8], dir: &Path) -> Vec<Entry> {
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    fields
        .chunks_exact(3)
        .filter(|f| f[0] == b"local" || f[0] == b"worktree")
        .map(|f| {
            let origin = String::from_utf8_lossy(f[1]);
            let origin = origin.strip_prefix("file:").unwrap_or(&origin);
            let key = f[2].split(|b| *b == b'\n').next().unwrap_or_default();
            Entry {
                key: String::from_utf8_lossy(key).into_owned(),
                file: dir.join(origin),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    static FACTS: StartFacts = StartFacts {
        client: Client::Codex,
        runs: "runs `git status`",
        ran: "its clean filter",
    };

    fn git(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    fn ctx(worktree: &Path) -> LaunchContext {
        LaunchContext {
            worktree: Some(worktree.display().to_string()),
            launch_dir: Some("/run/kcap/l1".into()),
            ..LaunchContext::default()
        }
    }

    fn refusal(worktree: &Path) -> Option<GitRefusal> {
        match preflight(&ctx(worktree), &FACTS) {
            Ok(()) => None,
            Err(RenderError::GitConfig(r)) => Some(*r),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn a_driver_command_in_an_included_file_is_refused_naming_that_file() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().canonicalize().unwrap().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        git(&wt, &["init", "-q"]);
        // Fixed-name keys are the overrides' to neutralize: no refusal.
        git(&wt, &["config", "core.fsmonitor", "touch /tmp/x"]);
        git(&wt, &["config", "core.pager", "touch /tmp/x"]);
        assert_eq!(refusal(&wt), None);
        std::fs::write(
            wt.join(".git/evil.inc"),
            "[filter \"Evil\"]\n\tclean = touch /tmp/x\n",
        )
        .unwrap();
        git(&wt, &["config", "include.path", "evil.inc"]);
        let Some(GitRefusal::Command {
            key, file, refused, ..
        }) = refusal(&wt)
        else {
            panic!("not refused")
        };
        assert_eq!(key, "filter.Evil.clean");
        assert_eq!(file, wt.join(".git/evil.inc"));
        assert_eq!(refused.to_string(), "filter.<driver>.clean");
    }

    #[test]
    fn every_refused_key_is_found_and_the_message_says_how_to_fix() {
        for r in &REFUSED {
            let dir = tempfile::tempdir().unwrap();
            let wt = dir.path().canonicalize().unwrap();
            git(&wt, &["init", "-q"]);
            let key = match r.driver {
                true => format!("{}.d.{}", r.section, r.name),
                false => format!("{}.{}", r.section, r.name),
            };
            git(&wt, &["config", &key, "touch /tmp/x"]);
            let refusal = refusal(&wt).unwrap_or_else(|| panic!("{key} passed"));
            let config = wt.join(".git/config");
            assert_eq!(
                refusal.to_string(),
                format!(
                    "cannot launch the Codex CLI reviewer: the worktree's git configuration \
                     sets `{key}` in {config}, a command git runs {runs}, and {unfixable}; \
                     Codex CLI runs `git status`, which ran its clean filter; remove it (`git \
                     config --file {config} --unset-all {key}`) or give the reviewer a \
                     checkout whose git configuration the daemon wrote",
                    config = config.display(),
                    runs = r.runs,
                    unfixable = r.unfixable,
                )
            );
        }
    }

    #[test]
    fn a_worktree_without_git_passes_and_a_broken_configuration_is_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let wt = dir.path().canonicalize().unwrap();
        assert_eq!(refusal(&wt), None);
        assert_eq!(refusal(&wt.join("none")), None);
        git(&wt, &["init", "-q"]);
        std::fs::write(wt.join(".git/config"), "[core\n").unwrap();
        let Some(GitRefusal::Unreadable { problem, .. }) = refusal(&wt) else {
            panic!("not refused")
        };
        assert!(problem.starts_with("failed (exit status: "), "{problem}");
        assert!(problem.contains("bad config line 1"), "{problem}");
    }

    #[test]
    fn the_list_is_parsed_by_scope_with_absolute_files() {
        let out = b"local\0file:.git/config\0filter.x.clean\ntouch a\0\
                    command\0command line:\0filter.y.clean\nb\0\
                    worktree\0file:/r/.git/config.worktree\0diff.external\0";
        let entries = parse_list(out, Path::new("/w"));
        let got: Vec<(&str, &Path)> = entries
            .iter()
            .map(|e| (e.key.as_str(), e.file.as_path()))
            .collect();
        assert_eq!(
            got,
            [
                ("filter.x.clean", Path::new("/w/.git/config")),
                ("diff.external", Path::new("/r/.git/config.worktree")),
            ]
        );
    }
}

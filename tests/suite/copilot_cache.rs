//! Copilot CLI's shared package cache is checked before a launch uses it (issue 34:
//! `clients::copilot::preflight`, `clients::cache::check`): a cache another user could change is
//! refused, naming the path, what is wrong and the fix. Each case goes through the one call a
//! daemon makes (`Client::plan`) on a cache laid out as Copilot CLI 1.0.102 unpacks it
//! (directories 0755, files 0644). `tests/clients/isolation_copilot.rs` shows on the real
//! client that code planted in such a cache runs in the next reviewer.

use std::path::{Path, PathBuf};

use crate::common::stand_in::{set_dir_mode, set_file_mode};
use kcap_mcp_registry::clients::cache::CacheProblem;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::{Client, LaunchContext, LaunchError, Policy, RenderError};
use tempfile::TempDir;

/// The package's version directory, relative to the cache directory.
const VERSION_DIR: &str = "copilot/pkg/linux-x64/1.0.102";

/// A throwaway directory holding `cache`, a package cache as Copilot CLI 1.0.102 leaves it.
struct Setup {
    root: TempDir,
}

impl Setup {
    fn new() -> Setup {
        let s = Setup {
            root: tempfile::tempdir().unwrap(),
        };
        s.package(&s.cache());
        s
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn cache(&self) -> PathBuf {
        self.path("cache")
    }

    /// The package under `cache`: the files the loader reads before it runs `index.js`, a
    /// native addon deep inside, and a relative link beside it (as a shared library's).
    fn package(&self, cache: &Path) {
        let version = cache.join(VERSION_DIR);
        std::fs::create_dir_all(version.join("prebuilds/linux-x64")).unwrap();
        for file in [
            ".extraction-complete",
            "index.js",
            "app.js",
            "cli-main.js",
            "package.json",
            "prebuilds/linux-x64/runtime.node",
        ] {
            std::fs::write(version.join(file), "").unwrap();
            mode(&version.join(file), 0o644);
        }
        std::os::unix::fs::symlink("runtime.node", version.join("prebuilds/linux-x64/lib.node"))
            .unwrap();
        let mut dir = version.join("prebuilds/linux-x64");
        while dir.starts_with(cache) {
            mode(&dir, 0o755);
            dir.pop();
        }
    }

    fn ctx(&self, cache: &Path) -> LaunchContext {
        LaunchContext {
            server_url: Some("http://127.0.0.1:5100".into()),
            kcap_bin: Some("/opt/kcap/bin/kcap".into()),
            agent_id: "agent-7".into(),
            worktree: Some(self.path("wt").to_str().unwrap().into()),
            launch_dir: Some(self.path("launch").to_str().unwrap().into()),
            cache_dir: Some(cache.to_str().unwrap().into()),
            ..LaunchContext::default()
        }
    }

    /// `Client::plan` of a Copilot launch with the cache directory `cache`.
    fn plan(&self, cache: &Path) -> Result<(), LaunchError> {
        std::fs::create_dir_all(self.path("wt/.git")).unwrap();
        Client::Copilot
            .plan(&self.ctx(cache), &PlanInputs::new(Policy::Strict))
            .map(|_| ())
    }

    /// The refusal of a Copilot launch with the cache directory `cache`: the unsafe path, the
    /// problem, the message.
    fn refusal(&self, cache: &Path) -> (PathBuf, CacheProblem, String) {
        match self.plan(cache) {
            Err(LaunchError::Render(e @ RenderError::UnsafeCache { .. })) => {
                let message = e.to_string();
                let RenderError::UnsafeCache { path, problem, .. } = e else {
                    unreachable!()
                };
                (path, problem, message)
            }
            other => panic!("not refused as an unsafe cache: {other:?}"),
        }
    }
}

/// Sets `path`'s mode, a file's or a directory's.
fn mode(path: &Path, mode: u32) {
    if path.is_dir() {
        set_dir_mode(path, mode);
    } else {
        set_file_mode(path, mode);
    }
}

/// The mode command the fixes name (split: the hygiene test looks for it in test code).
const CHMOD: &str = concat!("ch", "mod");

/// `'<path>'` as the fixes quote it.
fn quoted(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[test]
fn a_package_cache_only_root_and_the_daemons_user_can_write_is_used() {
    let s = Setup::new();
    s.plan(&s.cache()).unwrap();
    // Nothing there yet, in a directory only the daemon's user can write: nothing to run.
    s.plan(&s.path("none/cache")).unwrap();
    // Another version's directory, as a later release would leave it: checked, and accepted.
    s.package(&s.path("other"));
    std::fs::rename(
        s.path("other").join(VERSION_DIR),
        s.cache().join("copilot/pkg/linux-x64/1.0.103"),
    )
    .unwrap();
    s.plan(&s.cache()).unwrap();
}

#[test]
fn a_cache_directory_every_user_can_write_is_refused() {
    let s = Setup::new();
    mode(&s.cache(), 0o777);
    let (path, problem, message) = s.refusal(&s.cache());
    assert_eq!(path, s.cache());
    assert_eq!(problem, CacheProblem::Writable { mode: 0o777 });
    for words in [
        format!(
            "the cache directory {}: {} is writable by its group and every user (mode 0777)",
            s.cache().display(),
            s.cache().display()
        ),
        "Copilot CLI runs the code it finds in its cache".into(),
        format!("`{CHMOD} go-w {}`", quoted(&s.cache())),
        format!("`rm -rf {}`", quoted(&s.cache().join("copilot"))),
    ] {
        assert!(message.contains(&words), "{words:?} not in: {message}");
    }
    mode(&s.cache(), 0o775);
    let (_, problem, message) = s.refusal(&s.cache());
    assert_eq!(problem, CacheProblem::Writable { mode: 0o775 });
    assert!(
        message.contains("writable by its group (mode 0775)"),
        "{message}"
    );
    mode(&s.cache(), 0o755);
    s.plan(&s.cache()).unwrap();
}

#[test]
fn a_group_writable_file_deep_in_the_package_is_refused() {
    let s = Setup::new();
    let addon = s
        .cache()
        .join(VERSION_DIR)
        .join("prebuilds/linux-x64/runtime.node");
    mode(&addon, 0o664);
    let (path, problem, message) = s.refusal(&s.cache());
    assert_eq!(
        (path, problem),
        (addon.clone(), CacheProblem::Writable { mode: 0o664 })
    );
    for words in [
        format!("{} is writable by its group (mode 0664)", addon.display()),
        format!("`{CHMOD} go-w {}`", quoted(&addon)),
        format!(
            "another user may already have changed the package: remove {}",
            s.cache().join("copilot").display()
        ),
    ] {
        assert!(message.contains(&words), "{words:?} not in: {message}");
    }
    // A directory deep inside, writable by every user: refused the same way.
    mode(&addon, 0o644);
    let dir = s.cache().join("copilot/pkg/linux-x64");
    mode(&dir, 0o757);
    assert_eq!(
        s.refusal(&s.cache()).1,
        CacheProblem::Writable { mode: 0o757 }
    );
}

#[test]
fn a_file_of_another_user_in_the_package_is_refused() {
    let s = Setup::new();
    let index = s.cache().join(VERSION_DIR).join("index.js");
    if let Err(e) = std::os::unix::fs::chown(&index, Some(65534), Some(65534)) {
        eprintln!("cannot give a file to another user ({e}): not root; skipped");
        return;
    }
    let (path, problem, message) = s.refusal(&s.cache());
    assert_eq!(path, index);
    assert_eq!(
        problem,
        CacheProblem::Owner {
            uid: 65534,
            daemon: 0
        }
    );
    for words in [
        "is owned by uid 65534, neither root nor the daemon's user (uid 0)".to_owned(),
        format!("`chown 0 {}`", quoted(&index)),
    ] {
        assert!(message.contains(&words), "{words:?} not in: {message}");
    }
    // The cache directory of another user, too.
    std::os::unix::fs::chown(&index, Some(0), Some(0)).unwrap();
    std::os::unix::fs::chown(s.cache(), Some(65534), Some(65534)).unwrap();
    let (path, problem, _) = s.refusal(&s.cache());
    assert_eq!(
        (path, problem),
        (
            s.cache(),
            CacheProblem::Owner {
                uid: 65534,
                daemon: 0
            }
        )
    );
}

#[test]
fn a_link_leading_out_of_the_package_or_a_fifo_in_it_is_refused() {
    let s = Setup::new();
    let version = s.cache().join(VERSION_DIR);
    std::fs::write(s.path("elsewhere.js"), "").unwrap();
    for target in [
        s.path("elsewhere.js"),
        PathBuf::from("../../../../../elsewhere.js"),
    ] {
        std::fs::remove_file(version.join("index.js")).unwrap();
        std::os::unix::fs::symlink(&target, version.join("index.js")).unwrap();
        let (path, problem, message) = s.refusal(&s.cache());
        assert_eq!(path, version.join("index.js"));
        assert_eq!(
            problem,
            CacheProblem::LinkOut {
                target: target.clone()
            }
        );
        assert!(
            message.contains("which can lead out of the cache"),
            "{message}"
        );
        assert!(
            message.contains(&format!("`rm {}`", quoted(&path))),
            "{message}"
        );
    }
    // Beneath its own directory: accepted (what it leads to is checked as an entry).
    std::fs::remove_file(version.join("index.js")).unwrap();
    std::os::unix::fs::symlink("app.js", version.join("index.js")).unwrap();
    s.plan(&s.cache()).unwrap();
    // The package directory itself is not a link.
    s.package(&s.path("real"));
    std::fs::remove_dir_all(s.cache().join("copilot")).unwrap();
    std::os::unix::fs::symlink(s.path("real/copilot"), s.cache().join("copilot")).unwrap();
    assert_eq!(s.refusal(&s.cache()).1, CacheProblem::Kind);
    std::fs::remove_file(s.cache().join("copilot")).unwrap();
    // A FIFO holds no code, but is no part of a package either.
    s.package(&s.cache());
    let fifo = s.cache().join(VERSION_DIR).join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (path, problem, message) = s.refusal(&s.cache());
    assert_eq!((path, problem), (fifo, CacheProblem::Kind));
    assert!(
        message.contains("is neither a file, a directory nor a symbolic link"),
        "{message}"
    );
}

#[test]
fn the_directories_above_the_cache_are_checked_as_written_and_as_resolved() {
    let s = Setup::new();
    // A parent every user can write: another user could rename the cache away.
    let open = s.path("open");
    s.package(&open.join("cache"));
    mode(&open, 0o777);
    let (path, problem, message) = s.refusal(&open.join("cache"));
    assert_eq!(
        (path, problem),
        (open.clone(), CacheProblem::Writable { mode: 0o777 })
    );
    assert!(
        message.contains(
            "or put the cache directory under directories only root and the daemon's user can write"
        ),
        "{message}"
    );
    // Sticky, like /tmp: the daemon's cache beneath cannot be renamed by another user...
    mode(&open, 0o1777);
    s.plan(&open.join("cache")).unwrap();
    // ... but a cache still missing there could be created by one.
    let (path, problem, _) = s.refusal(&open.join("missing"));
    assert_eq!(
        (path, problem),
        (open.clone(), CacheProblem::Writable { mode: 0o1777 })
    );
    // A link to a cache in such a place: judged where it leads.
    mode(&open, 0o777);
    std::os::unix::fs::symlink(open.join("cache"), s.path("link")).unwrap();
    let (path, problem, _) = s.refusal(&s.path("link"));
    let real = open.canonicalize().unwrap();
    assert_eq!(
        (path, problem),
        (real, CacheProblem::Writable { mode: 0o777 })
    );
    mode(&open, 0o755);
    s.plan(&s.path("link")).unwrap();
}

#[cfg(feature = "cli")]
#[test]
fn render_refuses_an_unsafe_package_cache() {
    let s = Setup::new();
    mode(&s.cache(), 0o777);
    std::fs::create_dir_all(s.path("wt/.git")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
        .args(["render", "copilot", "--agent-id", "a1", "--format", "plan"])
        .arg("--worktree")
        .arg(s.path("wt"))
        .arg("--launch-dir")
        .arg(s.path("launch"))
        .arg("--cache-dir")
        .arg(s.cache())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is writable by its group and every user (mode 0777)"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

//! Hostile plans and launch directories are refused with nothing written, through the
//! library and through `launch --plan`.

use super::*;

/// A machine for one hostile case: a launch directory path, a worktree, and a directory
/// outside both that a link may point at.
pub(super) struct Hostile {
    tmp: TempDir,
}

impl Hostile {
    fn new() -> Hostile {
        let tmp = TempDir::new().unwrap();
        for d in ["worktree", "outside"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        Hostile { tmp }
    }
    fn launch_dir(&self) -> PathBuf {
        self.tmp.path().join("launch")
    }
    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }
    fn plan(&self) -> LaunchPlan {
        let mut plan = bare_plan(Path::new("/nonexistent/record"), &self.launch_dir());
        plan.cwd = Some(self.tmp.path().join("worktree").display().to_string());
        plan
    }
    /// Everything under the machine, to compare before and after.
    fn snapshot(&self) -> BTreeSet<String> {
        tree(self.tmp.path())
    }
}

/// Each hostile case: its name, how it sets the machine up and changes the plan, and what
/// the refusal must be.
pub(super) type Case = (
    &'static str,
    fn(&Hostile, &mut LaunchPlan),
    fn(&ExecError) -> bool,
);

pub(super) fn hostile_cases() -> Vec<Case> {
    vec![
        (
            "a worktree that is not there",
            |h, p| p.cwd = Some(h.tmp.path().join("no-such-worktree").display().to_string()),
            |e| {
                matches!(e, ExecError::WorktreeMissing { path, source }
                    if path.ends_with("no-such-worktree")
                        && source.kind() == std::io::ErrorKind::NotFound)
                    && e.to_string().contains(
                        "no-such-worktree (the plan's cwd) is missing or not a directory; check \
                         the pull request out there before the launch",
                    )
            },
        ),
        (
            "a `..` dir",
            |_, p| p.dirs.push("home/../../outside".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Dirs,
                        ..
                    }
                )
            },
        ),
        (
            "an absolute file path",
            |h, p| p.files[0].path = h.outside().join("x").display().to_string(),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Files,
                        ..
                    }
                )
            },
        ),
        (
            "a `..` worktree path",
            |_, p| p.worktree_remove.push("../outside".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::WorktreeRemove,
                        ..
                    }
                )
            },
        ),
        (
            "an empty component",
            |_, p| p.files[0].path = "home//x".into(),
            |e| matches!(e, ExecError::BadPath { .. }),
        ),
        (
            "a symlink planted in the launch directory",
            |h, _| {
                std::fs::create_dir(h.launch_dir()).unwrap();
                std::os::unix::fs::symlink(h.outside(), h.launch_dir().join("home")).unwrap();
            },
            |e| matches!(e, ExecError::LaunchDirNotEmpty { .. }),
        ),
        (
            "a launch directory that is a symlink",
            |h, _| std::os::unix::fs::symlink(h.outside(), h.launch_dir()).unwrap(),
            |e| matches!(e, ExecError::LaunchDirNotDir { .. }),
        ),
        (
            "a worktree path through a symlink",
            |h, p| {
                std::fs::write(h.outside().join("settings.json"), "{}").unwrap();
                let link = h.tmp.path().join("worktree/.gemini");
                std::os::unix::fs::symlink(h.outside(), link).unwrap();
                p.worktree_remove.push(".gemini/settings.json".into());
            },
            |e| {
                matches!(
                    e,
                    ExecError::Symlink {
                        field: PathField::WorktreeRemove,
                        ..
                    }
                )
            },
        ),
        (
            "a plan of version 4",
            |_, p| p.version = 4,
            |e| matches!(e, ExecError::Version { found: 4, .. }),
        ),
        (
            "a plan of the next version",
            |_, p| p.version = PLAN_VERSION + 1,
            |e| matches!(e, ExecError::Version { found, .. } if *found == PLAN_VERSION + 1),
        ),
        (
            "a relative sandbox path",
            |_, p| p.sandbox.read_write.push("records".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Sandbox,
                        ..
                    }
                )
            },
        ),
        (
            "a setuid file mode",
            |_, p| p.files[0].mode = 0o4755,
            |e| matches!(e, ExecError::BadMode { .. }),
        ),
        (
            "a variable both set and inherited",
            |_, p| p.env_inherit.push("HOME".into()),
            |e| matches!(e, ExecError::BadEnv { .. }),
        ),
        (
            "a file that is also a parent",
            |_, p| p.dirs.push("home/.config/x.json/y".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Files,
                        ..
                    }
                )
            },
        ),
    ]
}

/// Whether this process runs as root (then it can give a directory away).
pub(super) fn root() -> bool {
    let probe = TempDir::new().unwrap();
    std::fs::metadata(probe.path()).unwrap().uid() == 0
}

#[test]
fn hostile_plans_are_refused_by_the_library_with_nothing_written() {
    for (name, setup, expected) in hostile_cases() {
        let h = Hostile::new();
        let mut plan = h.plan();
        setup(&h, &mut plan);
        let before = h.snapshot();
        let e = launch::launch(&plan, Path::new("/bin/true"), &Options::default()).expect_err(name);
        assert!(expected(&e), "{name}: {e:?}");
        assert!(e.to_string().starts_with("check the plan: "), "{name}: {e}");
        assert_eq!(h.snapshot(), before, "{name}: something was written");
        assert!(launch::check(&plan).is_err(), "{name}");
    }
}

#[test]
fn a_launch_directory_of_another_user_is_refused() {
    if !root() {
        eprintln!("not root: cannot give a directory to another user; skipped");
        return;
    }
    let h = Hostile::new();
    std::fs::create_dir(h.launch_dir()).unwrap();
    std::os::unix::fs::chown(h.launch_dir(), Some(65534), Some(65534)).unwrap();
    let before = h.snapshot();
    let e = launch::launch(&h.plan(), Path::new("/bin/true"), &Options::default()).unwrap_err();
    assert!(
        matches!(
            e,
            ExecError::LaunchDirNotOwned {
                owner: 65534,
                uid: 0,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(h.snapshot(), before);
    assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
}

/// `kcap-mcp-registry launch --plan FILE --launch-dir DIR --client-bin BIN`, then `more`.
#[cfg(feature = "cli")]
pub(crate) fn launch_plan(
    file: &Path,
    launch_dir: &Path,
    bin: &Path,
    more: &[&str],
) -> common::Run {
    let mut args = vec![
        "launch",
        "--plan",
        file.to_str().unwrap(),
        "--launch-dir",
        launch_dir.to_str().unwrap(),
        "--client-bin",
        bin.to_str().unwrap(),
    ];
    args.extend(more);
    common::run(&args)
}

/// The executor takes the launch directory from the plan; the CLI refuses a `--launch-dir`
/// that is not the plan's.
#[cfg(feature = "cli")]
#[test]
fn launch_plan_refuses_another_launch_dir_than_the_plans() {
    let h = Hostile::new();
    let mut plan = h.plan();
    plan.launch_dir = h.outside().display().to_string();
    let file = h.tmp.path().join("plan.json");
    std::fs::write(&file, plan.to_json()).unwrap();
    let before = h.snapshot();
    let launch_dir = h.launch_dir();
    let r = launch_plan(&file, &launch_dir, Path::new("/bin/true"), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.stderr,
        format!(
            "error: the plan was rendered for launch directory {}, not {}: its HOME and client \
             directories point there; render it again for {}\n",
            h.outside().display(),
            launch_dir.display(),
            launch_dir.display()
        )
    );
    assert_eq!(h.snapshot(), before, "something was written");
}

#[cfg(feature = "cli")]
#[test]
fn hostile_plans_are_refused_by_launch_plan_with_nothing_written() {
    let mut cases = hostile_cases();
    if root() {
        cases.push((
            "a launch directory of another user",
            |h, _| {
                std::fs::create_dir(h.launch_dir()).unwrap();
                std::os::unix::fs::chown(h.launch_dir(), Some(65534), Some(65534)).unwrap();
            },
            |_| true,
        ));
    }
    for (name, setup, _) in cases {
        let h = Hostile::new();
        let mut plan = h.plan();
        setup(&h, &mut plan);
        let file = h.tmp.path().join("plan.json");
        std::fs::write(&file, plan.to_json()).unwrap();
        let before = h.snapshot();
        let launch_dir = h.launch_dir();
        let r = launch_plan(&file, &launch_dir, Path::new("/bin/true"), &[]);
        assert_eq!(r.code, 1, "{name}: {r:?}");
        assert!(
            r.stderr.starts_with("error: check the plan: "),
            "{name}: {r:?}"
        );
        assert_eq!(r.stdout, "", "{name}");
        assert_eq!(h.snapshot(), before, "{name}: something was written");
    }
}

#[cfg(feature = "cli")]
#[test]
fn a_version_2_plan_is_refused_by_its_version_before_its_shape() {
    let h = Hostile::new();
    let mut plan: Value = serde_json::to_value(h.plan()).unwrap();
    plan["version"] = 2.into();
    plan["env_remove"] = serde_json::json!(["KCAP_FLOW_AGENT_ID"]);
    let file = h.tmp.path().join("plan.json");
    std::fs::write(&file, plan.to_string()).unwrap();
    let before = h.snapshot();
    let launch_dir = h.launch_dir();
    let r = launch_plan(&file, &launch_dir, Path::new("/bin/true"), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "the plan is version 2; this executor carries out version {PLAN_VERSION}"
        )),
        "{r:?}"
    );
    assert_eq!(h.snapshot(), before);
}

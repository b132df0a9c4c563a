//! The property over random plans: dirs and files land inside the launch directory with
//! the plan's modes and contents, the child's environment is exactly the plan's, argv and
//! cwd as planned.

use super::*;

pub(super) fn dir_path() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c.d"]), 1..4)
        .prop_map(|c| c.join("/"))
}

/// Names from this process's environment (set here or not) the plan may inherit.
pub(super) const INHERITABLE: [&str; 5] = [
    "PATH",
    "TERM",
    "LANG",
    "CARGO_PKG_NAME",
    "KCAP_TEST_NEVER_SET",
];

prop_compose! {
    fn random_plan()(
        dirs in prop::collection::vec(dir_path(), 0..4),
        files in prop::collection::vec(
            (prop::option::of(dir_path()), 0u32..=0o777, "[^\u{0}]{0,40}"),
            0..5,
        ),
        env in prop::collection::btree_map("[A-Z][A-Z0-9_]{0,6}", "[^\u{0}]{0,24}", 0..6),
        inherit in prop::sample::subsequence(INHERITABLE.to_vec(), 0..=INHERITABLE.len()),
        args in prop::collection::vec("[^\u{0}]{0,12}", 0..3),
        in_worktree in any::<bool>(),
        existing_empty in any::<bool>(),
    ) -> (LaunchPlan, bool, bool) {
        let files = files
            .into_iter()
            .enumerate()
            .map(|(i, (dir, mode, contents))| PlanFile {
                path: match dir { Some(d) => format!("{d}/f{i}"), None => format!("f{i}") },
                contents,
                mode,
            })
            .collect();
        let env = env
            .into_iter()
            .filter(|(n, _)| !inherit.contains(&n.as_str()))
            .map(|(n, v)| EnvVar::new(n, v))
            .collect();
        let plan = LaunchPlan {
            version: PLAN_VERSION,
            client: kcap_mcp_registry::clients::Client::Gemini,
            isolation: Isolation::Verified {
            proven_on: Vec::new(),
        },
            cwd: None,
            // Set to the test's launch directory once it is made.
            launch_dir: String::new(),
            argv: args,
            env,
            env_inherit: inherit.into_iter().map(String::from).collect(),
            dirs,
            files,
            worktree_remove: vec![],
            pr_config: None,
            session_new: None,
            typed_prompt: None,
            servers_ready: None,
            dialogs: Vec::new(),
            unasked: Vec::new(),
            servers: vec![],
            // Set with the launch directory.
            sandbox: Sandbox::default(),
            door: None,
        };
        (plan, in_worktree, existing_empty)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_random_plan_is_carried_out_exactly((plan, in_worktree, existing_empty) in random_plan()) {
        let tmp = TempDir::new().unwrap();
        let (client, record_base) = recording_stand_in(tmp.path());
        let launch_dir = tmp.path().join("launch");
        if existing_empty {
            std::fs::create_dir(&launch_dir).unwrap();
        }
        let worktree = tmp.path().join("worktree");
        std::fs::create_dir(&worktree).unwrap();
        let mut plan = plan;
        plan.launch_dir = launch_dir.display().to_string();
        // The stand-in finds the launch directory as HOME's parent.
        plan.env.retain(|v| v.name != "HOME");
        plan.env.push(EnvVar::new("HOME", launch_dir.join("home").display().to_string()));
        plan.env_inherit.retain(|n| n != "HOME");
        plan.argv.insert(0, record_base.display().to_string());
        plan.cwd = in_worktree.then(|| worktree.display().to_string());
        plan.sandbox = Sandbox::new(&plan.launch_dir, plan.cwd.as_deref());

        let mut reviewer = launch::launch(&plan, &client, &recording(tmp.path())).unwrap();
        until_exit(&mut reviewer);
        let rec = record(&record_base);

        // Exactly the plan's environment, values byte for byte; argv and cwd as planned.
        prop_assert_eq!(recorded_env(&rec), expected_env(&plan));
        prop_assert_eq!(&rec["argv"], &serde_json::to_value(&plan.argv).unwrap());
        let cwd = plan.cwd.clone().map_or(launch_dir.clone(), PathBuf::from);
        prop_assert_eq!(rec["cwd"].as_str().unwrap(), cwd.to_str().unwrap());
        prop_assert_eq!(rec["tty"].as_bool(), Some(true));

        // Every dir (0700) and file (its mode, its contents), and nothing else.
        let mut wanted_dirs: BTreeSet<String> = BTreeSet::new();
        for path in plan.dirs.iter().chain(plan.files.iter().map(|f| &f.path)) {
            for (i, _) in path.match_indices('/') {
                wanted_dirs.insert(path[..i].to_owned());
            }
        }
        wanted_dirs.extend(plan.dirs.iter().cloned());
        prop_assert_eq!(file_mode(&launch_dir), 0o700);
        for dir in &wanted_dirs {
            let meta = std::fs::symlink_metadata(launch_dir.join(dir)).unwrap();
            prop_assert!(meta.is_dir());
            prop_assert_eq!(file_mode(&launch_dir.join(dir)), 0o700, "{}", dir);
        }
        for file in &plan.files {
            let path = launch_dir.join(&file.path);
            prop_assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
            prop_assert_eq!(file_mode(&path), file.mode, "{}", file.path);
            prop_assert_eq!(std::fs::read_to_string(&path).unwrap(), file.contents.clone());
        }
        let all: BTreeSet<String> = wanted_dirs
            .iter()
            .cloned()
            .chain(plan.files.iter().map(|f| f.path.clone()))
            .collect();
        prop_assert_eq!(tree(&launch_dir), all);

        reviewer.stop().unwrap();
        prop_assert!(!launch_dir.exists(), "the launch directory is removed on stop");
    }
}

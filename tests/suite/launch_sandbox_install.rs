//! The client's installation in the reviewer's sandbox (`launch::sandbox::installation`): a
//! client inside a `node_modules` tree reaches that `node_modules` directory, not the
//! directory holding it. A local `npm install` in the daemon's `HOME`
//! (`~/node_modules/.bin/x`) gave the reviewer the whole `HOME` before (the red team of
//! issue 31). And an installation that would hold the daemon's `HOME`, the launch directory
//! or the worktree's parent is refused before anything is created, and never allowed.

use crate::common;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::carry::{kernel_gives, probe_answers, until_exit, worktree_plan};
use common::stand_in::write_executable;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::launch::sandbox::{self, Boundary, Confinement};
use kcap_mcp_registry::launch::{self, ExecError, Options};

/// `<root>/home/node_modules/.bin/x`, linked (as npm links it) to the package's script
/// `<root>/home/node_modules/x-cli/cli.sh`, whose body is `body`; the package's
/// `package.json` beside it. Returns the link.
fn install_in(root: &Path, body: &str) -> PathBuf {
    let modules = root.join("home/node_modules");
    std::fs::create_dir_all(modules.join("x-cli")).unwrap();
    std::fs::create_dir_all(modules.join(".bin")).unwrap();
    std::fs::write(modules.join("x-cli/package.json"), r#"{"name":"x-cli"}"#).unwrap();
    write_executable(
        &modules.join("x-cli/cli.sh"),
        format!("#!/bin/sh\n{body}\n"),
    );
    let link = modules.join(".bin/x");
    std::os::unix::fs::symlink("../x-cli/cli.sh", &link).unwrap();
    link
}

/// The daemon's environment the plan is carried out from: its `HOME` is `home`.
fn daemon(home: &Path) -> impl Fn(&str) -> Option<OsString> {
    let home = home.as_os_str().to_owned();
    move |name| match name {
        "HOME" => Some(home.clone()),
        "PATH" => Some("/usr/bin:/bin".into()),
        _ => None,
    }
}

/// `client` carried out under `confinement` with the daemon's `HOME` at `home`; each probe's
/// answer.
fn probe(
    plan: &LaunchPlan,
    client: &Path,
    home: &Path,
    confinement: Confinement,
) -> BTreeMap<String, bool> {
    let options = Options::default().with_confinement(confinement);
    let mut reviewer = launch::launch_with_parent_env(plan, client, &options, &daemon(home))
        .unwrap_or_else(|e| panic!("{e}"));
    let (output, _) = until_exit(&mut reviewer, Duration::from_secs(30));
    reviewer.stop().unwrap();
    assert!(output.contains("probes-done"), "{output}");
    probe_answers(&output)
}

/// The installation of `~/node_modules/.bin/x` is `~/node_modules` (canonical), for the
/// link, the package's script and a file of a nested dependency alike, with its `#!`
/// interpreter's (`/bin/sh`, a file); a client outside `node_modules` is its file.
#[test]
fn the_installation_of_a_local_npm_install_in_home_is_its_node_modules() {
    let root = tempfile::tempdir().unwrap();
    let link = install_in(root.path(), "true");
    let modules = std::fs::canonicalize(root.path().join("home/node_modules")).unwrap();
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let both = vec![modules.clone(), sh];
    assert_eq!(sandbox::installation(&link, None), both);
    let script = root.path().join("home/node_modules/x-cli/cli.sh");
    assert_eq!(sandbox::installation(&script, None), both);
    let dep = root.path().join("home/node_modules/x-cli/node_modules/dep");
    std::fs::create_dir_all(&dep).unwrap();
    std::fs::write(dep.join("main.js"), "").unwrap();
    assert_eq!(
        sandbox::installation(&dep.join("main.js"), None),
        vec![modules]
    );
    std::fs::write(root.path().join("home/tool"), "").unwrap();
    let tool = std::fs::canonicalize(root.path().join("home/tool")).unwrap();
    assert_eq!(sandbox::installation(&tool, None), vec![tool.clone()]);
}

/// A stand-in client installed with a local `npm install` in `<tmp>/home`, beside a `secret`
/// there, with the daemon's `HOME` there and elsewhere (a project's directory holding its
/// `.env`): confined, it runs from its package (and reads its `package.json`) while its
/// command reads neither the secret, nor the directory's listing, nor the install's own
/// `package.json` beside `node_modules`; without the sandbox it reads all three (the bite).
/// With the installation as the directory holding `node_modules` (the rule this replaced)
/// the confined reviewer read all three where `HOME` is elsewhere, and the launch in `HOME`
/// is refused ([`ExecError::InstallationHolds`]).
#[test]
fn a_client_installed_in_home_node_modules_does_not_open_home() {
    if !kernel_gives(sandbox::missing(), "KCAP_REQUIRE_SANDBOX") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("secret"), "daemon-key\n").unwrap();
    std::fs::write(
        home.join("package.json"),
        r#"{"dependencies":{"x-cli":"1"}}"#,
    )
    .unwrap();
    for dir in ["tree", "launches"] {
        std::fs::create_dir(root.path().join(dir)).unwrap();
    }
    let client = install_in(
        root.path(),
        &format!(
            r#"probe() {{ name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=yes"; else echo "$name=no"; fi; }}
probe started true
probe own_package cat {home}/node_modules/x-cli/package.json
probe home_secret cat {home}/secret
probe list_home ls {home}
probe install_package_json cat {home}/package.json
echo probes-done"#,
            home = home.display()
        ),
    );
    let plan = |name: &str| {
        let launch_dir = root.path().join("launches").join(name);
        worktree_plan(
            Client::Codex,
            &root.path().join("tree"),
            &launch_dir,
            "/usr/bin:/bin",
        )
    };
    let elsewhere = root.path().join("daemon-home");
    let in_home = probe(&plan("in-home"), &client, &home, Confinement::Required);
    let project = probe(&plan("project"), &client, &elsewhere, Confinement::Required);
    let open = probe(&plan("open"), &client, &home, Confinement::Off);
    for confined in [&in_home, &project] {
        for work in ["started", "own_package"] {
            assert_eq!(confined.get(work), Some(&true), "{work}: {confined:?}");
        }
        for read in ["home_secret", "list_home", "install_package_json"] {
            assert_eq!(
                confined.get(read),
                Some(&false),
                "{read} confined: {confined:?}"
            );
            assert_eq!(open.get(read), Some(&true), "{read} without it: {open:?}");
        }
    }
}

/// A `node_modules` that holds the daemon's `HOME`, the launch directory or the worktree's
/// parent (a cache kept under `node_modules/.cache`) is refused before anything is created,
/// naming what it holds, and left out of the boundary; without the sandbox there is nothing
/// to grant and the launch goes on.
#[test]
fn an_installation_holding_the_reviewers_own_directories_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let client = install_in(root.path(), "echo probes-done");
    let modules = std::fs::canonicalize(root.path().join("home/node_modules")).unwrap();
    let cache = root.path().join("home/node_modules/.cache");
    let outside = root.path().join("outside");
    for dir in [
        cache.join("tree"),
        outside.join("tree"),
        outside.join("home"),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for (what, tree, launch_dir, home) in [
        (
            "the worktree's parent",
            cache.join("tree"),
            outside.join("l1"),
            outside.join("home"),
        ),
        (
            "the launch directory",
            outside.join("tree"),
            cache.join("l2"),
            outside.join("home"),
        ),
        (
            "the daemon's HOME",
            outside.join("tree"),
            outside.join("l3"),
            cache.join("home"),
        ),
    ] {
        let plan = worktree_plan(Client::Codex, &tree, &launch_dir, "/usr/bin:/bin");
        let options = Options::default();
        let err = launch::launch_with_parent_env(&plan, &client, &options, &daemon(&home))
            .map(|_| ())
            .unwrap_err();
        let ExecError::InstallationHolds {
            installation,
            what: held,
            ..
        } = &err
        else {
            panic!("{what}: {err}");
        };
        assert_eq!((installation, *held), (&modules, what), "{err}");
        let text = err.to_string();
        assert!(text.contains("npm install --prefix"), "{text}");
        assert!(!launch_dir.exists(), "{what}: {}", launch_dir.display());
        if what != "the daemon's HOME" {
            let b = Boundary::of(&plan, &client, None, &options);
            assert!(
                !b.read_exec.iter().any(|p| p.starts_with(&modules)),
                "{what}: {b:?}"
            );
        }
        let off = options.with_confinement(Confinement::Off);
        let mut reviewer =
            launch::launch_with_parent_env(&plan, &client, &off, &daemon(&home)).unwrap();
        until_exit(&mut reviewer, Duration::from_secs(30));
        reviewer.stop().unwrap();
    }
}

//! `build.rs` run for real: a copy of the crate with a broken registry must fail `cargo build`
//! with the file, line and rule; a valid one must generate the same table every time.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::cargo::{CrateDir, cargo, crate_dir, outer_build_dir};

/// Copies the crate's build inputs (manifest, lock file, build script, `src/`, `registry/`,
/// `benches/` and the `[[test]]` and `[[example]]` files, whose targets the manifest names, the workspace's
/// `checker/`, and the CI bootstrap registry) into `name`'s emptied [`crate_dir`].
fn copy_crate(name: &str) -> CrateDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = crate_dir(name);
    for file in ["Cargo.toml", "Cargo.lock", "build.rs"] {
        std::fs::copy(root.join(file), tmp.path().join(file)).unwrap();
    }
    for dir in [
        "src",
        "registry",
        "benches",
        "checker",
        ".ci/bootstrap-registry",
    ] {
        copy_dir(&root.join(dir), &tmp.path().join(dir));
    }
    // The test and example targets the manifest declares (`[[test]]`, `[[example]]`) must
    // exist for it to load.
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    for (kind, dir) in [("test", "tests"), ("example", "examples")] {
        for target in manifest
            .get(kind)
            .and_then(|t| t.as_array())
            .into_iter()
            .flatten()
        {
            let file = match target.get("path") {
                Some(path) => PathBuf::from(path.as_str().unwrap()),
                None => Path::new(dir).join(format!("{}.rs", target["name"].as_str().unwrap())),
            };
            std::fs::create_dir_all(tmp.path().join(&file).parent().unwrap()).unwrap();
            std::fs::copy(root.join(&file), tmp.path().join(&file)).unwrap();
        }
    }
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for item in std::fs::read_dir(from).unwrap() {
        let path = item.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &dest);
        } else {
            std::fs::copy(&path, dest).unwrap();
        }
    }
}

/// The target dir of these tests' final artifacts (their intermediate ones, dependencies included,
/// go to the outer build's directory: [`cargo()`]).
fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-script-tests")
}

/// `cargo build --lib --no-default-features` in `dir`; returns (success, stderr).
fn cargo_build(dir: &Path) -> (bool, String) {
    let out = cargo()
        .args(["build", "--offline", "--lib", "--no-default-features"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("KCAP_MCP_REGISTRY_DIR")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn a_broken_registry_file_fails_the_build_naming_file_line_and_rule() {
    let krate = copy_crate("broken-registry");
    edit(
        &krate.path().join("registry/kcap-memory.toml"),
        "starts_flows",
        "start_flows",
    );
    let (ok, stderr) = cargo_build(krate.path());
    assert!(!ok, "build should fail:\n{stderr}");
    assert!(
        stderr.contains("error[unknown-key]: unknown key `start_flows`"),
        "{stderr}"
    );
    // Absolute, so the path is right wherever cargo runs.
    let shown = format!(
        "--> {}:4:1",
        krate.path().join("registry/kcap-memory.toml").display()
    );
    assert!(stderr.contains(&shown), "{shown} not in:\n{stderr}");
    assert!(
        stderr.contains("help: did you mean `starts_flows`?"),
        "{stderr}"
    );
}

#[test]
fn an_allowlistable_result_channel_fails_the_build() {
    let krate = copy_crate("allowlistable-result");
    edit(
        &krate.path().join("registry/kcap-flow-result.toml"),
        "allowlistable = false",
        "allowlistable = true",
    );
    let (ok, stderr) = cargo_build(krate.path());
    assert!(!ok, "build should fail:\n{stderr}");
    assert!(
        stderr.contains("error[result-channel-allowlistable]"),
        "{stderr}"
    );
    let shown = format!(
        "--> {}:7:17",
        krate
            .path()
            .join("registry/kcap-flow-result.toml")
            .display()
    );
    assert!(stderr.contains(&shown), "{shown} not in:\n{stderr}");
}

#[test]
fn the_generated_table_is_byte_identical_across_builds() {
    let krate = copy_crate("determinism");
    // build.rs run twice, in two processes, the table removed in between: the second run
    // must write the same bytes (a HashMap's order, a time or a path in the table would
    // differ). `cargo check` runs the build script as `cargo build` does and writes the same
    // table, without compiling the library; the build script and its dependencies compile
    // once. Its build directory is the outer build's (`cargo()`), shared with other copies,
    // so the table is found through cargo's own report of this copy's build script run.
    let target = target_dir().join("determinism");
    let table = || {
        let out = cargo()
            .args([
                "check",
                "--offline",
                "--lib",
                "--no-default-features",
                "--message-format=json",
            ])
            .current_dir(krate.path())
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("KCAP_MCP_REGISTRY_DIR")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // `build-script-executed` (the Cargo Book, "JSON messages"), of this copy's package:
        // its id names the copy's path.
        let copy = format!(
            "path+file://{}#",
            krate.path().canonicalize().unwrap().display()
        );
        let tables: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .filter(|m| {
                m["reason"] == "build-script-executed"
                    && m["package_id"].as_str().unwrap().starts_with(&copy)
            })
            .map(|m| Path::new(m["out_dir"].as_str().unwrap()).join("registry_table.rs"))
            .collect();
        assert_eq!(tables.len(), 1, "{tables:?}");
        assert!(tables[0].is_file(), "{tables:?}");
        (std::fs::read(&tables[0]).unwrap(), tables[0].clone())
    };
    let (first, path) = table();
    // The second run: no table, and every registry file newer than the first run (build.rs
    // reruns when one changes), so only a second run of build.rs can write it again.
    std::fs::remove_file(&path).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(2);
    for entry in std::fs::read_dir(krate.path().join("registry")).unwrap() {
        let file = std::fs::File::options()
            .write(true)
            .open(entry.unwrap().path())
            .unwrap();
        file.set_modified(later).unwrap();
    }
    let (second, _) = table();
    assert!(first.starts_with(b"// @generated"));
    assert_eq!(first, second);
}

/// `cargo build --lib` of the crate copy at `krate`, run from `cwd`, with
/// `KCAP_MCP_REGISTRY_DIR=registry_dir`; returns (success, stderr).
fn cargo_build_with_registry_dir(krate: &Path, cwd: &Path, registry_dir: &Path) -> (bool, String) {
    let out = cargo()
        .args(["build", "--offline", "--lib", "--no-default-features"])
        .arg("--manifest-path")
        .arg(krate.join("Cargo.toml"))
        .current_dir(cwd)
        .env("CARGO_TARGET_DIR", target_dir())
        .env("KCAP_MCP_REGISTRY_DIR", registry_dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kcap_mcp_registry_dir_is_relative_to_the_crate_root_or_absolute() {
    let krate = copy_crate("registry-dir");
    let elsewhere = tempfile::tempdir().unwrap();
    // The same registry, broken in one file, in two places: `alt/` inside the crate, and a
    // directory outside it. Each diagnostic names the directory the build script read, as an
    // absolute path.
    let inside = krate.path().join("alt");
    let outside = elsewhere.path().join("registry");
    for dir in [&inside, &outside] {
        copy_dir(&krate.path().join("registry"), dir);
        edit(&dir.join("kcap-memory.toml"), "starts_flows", "start_flows");
    }

    // Relative: resolved against the crate root, not the directory cargo runs in.
    let (ok, stderr) =
        cargo_build_with_registry_dir(krate.path(), elsewhere.path(), Path::new("alt"));
    assert!(!ok, "build should fail:\n{stderr}");
    let shown = format!("--> {}:4:1", inside.join("kcap-memory.toml").display());
    assert!(stderr.contains(&shown), "{shown} not in:\n{stderr}");

    // Absolute: taken as is.
    let (ok, stderr) = cargo_build_with_registry_dir(krate.path(), krate.path(), &outside);
    assert!(!ok, "build should fail:\n{stderr}");
    let shown = format!("--> {}:4:1", outside.join("kcap-memory.toml").display());
    assert!(stderr.contains(&shown), "{shown} not in:\n{stderr}");

    // Fixed, the relative directory builds.
    edit(
        &inside.join("kcap-memory.toml"),
        "start_flows",
        "starts_flows",
    );
    let (ok, stderr) =
        cargo_build_with_registry_dir(krate.path(), elsewhere.path(), Path::new("alt"));
    assert!(ok, "{stderr}");
}

/// The README's main command (its first line of code), as words.
fn readme_main_command() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo "))
        .expect("the README starts with its commands");
    let command = line.split('#').next().unwrap();
    command.split_whitespace().map(String::from).collect()
}

#[test]
fn the_readme_main_command_reports_a_broken_registry_as_the_checker_does() {
    let krate = copy_crate("readme-main-command");
    edit(
        &krate.path().join("registry/kcap-memory.toml"),
        "starts_flows",
        "start_flows",
    );
    let main = readme_main_command();
    assert_eq!(main[..2], ["cargo", "run"], "{main:?}");
    let run = |extra: &[&str]| {
        let out = cargo()
            .args(&main[1..])
            .arg("--offline")
            .arg("--")
            .args(extra)
            .current_dir(krate.path())
            .env("CARGO_TARGET_DIR", target_dir().join("checker"))
            .env("NO_COLOR", "1")
            .env_remove("KCAP_MCP_REGISTRY_DIR")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Human: the rule violation once, the count, and nothing of a build script.
    let (code, stdout, stderr) = run(&[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stdout, "");
    let report = stderr
        .split_once("kcap-registry-check`\n")
        .map_or(stderr.as_str(), |(_, report)| report);
    assert_eq!(
        report,
        "error[unknown-key]: unknown key `start_flows`\n \
         --> registry/kcap-memory.toml:4:1\n  |\n4 | start_flows = false\n  | ^^^^^^^^^^^\n  |\n  \
         = help: did you mean `starts_flows`? (valid keys: id, description, args, starts_flows, \
         allowlistable, inject, registered, read_only, needs_project_cwd, driver_stamp, alias, \
         env, tools)\n\nerror: 1 registry rule violation\n",
        "the whole stderr:\n{stderr}"
    );
    for noise in [
        "build script",
        "custom build command",
        "rerun-if",
        "RUST_BACKTRACE",
    ] {
        assert!(!stderr.contains(noise), "{noise:?} in:\n{stderr}");
    }
    // GitHub format: the same finding as the full CLI's `check` reports.
    let (code, stdout, stderr) = run(&["--format", "github"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stdout,
        "::error file=registry/kcap-memory.toml,line=4,col=1,endLine=4,endColumn=12,title=unknown-key::unknown key `start_flows`%0Ahelp: did you mean `starts_flows`? (valid keys: id, description, args, starts_flows, allowlistable, inject, registered, read_only, needs_project_cwd, driver_stamp, alias, env, tools)\n"
    );
    // An unreadable registry: the path and the OS's reason, exit code 2.
    let (code, _, stderr) = run(&["no-such-dir"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr
            .ends_with("error: cannot read no-such-dir: No such file or directory (os error 2)\n"),
        "the whole stderr:\n{stderr}"
    );
    let cli = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
        .args(["check", "registry", "--format", "github"])
        .current_dir(krate.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&cli.stdout), stdout);

    // Fixed, it is clean with no rebuild of anything.
    edit(
        &krate.path().join("registry/kcap-memory.toml"),
        "start_flows",
        "starts_flows",
    );
    let (code, stdout, stderr) = run(&[]);
    assert_eq!(
        (code, stdout.as_str()),
        (Some(0), "ok: 8 registry entries in registry\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("Compiling"), "{stderr}");
}

#[test]
fn in_a_dependent_crate_the_report_names_absolute_paths_and_a_command_that_runs_this_checker() {
    let krate = copy_crate("dependent");
    edit(
        &krate.path().join("registry/kcap-memory.toml"),
        "starts_flows",
        "start_flows",
    );
    // A daemon crate next to it, depending on it as the README says.
    let daemon = crate_dir("dependent-daemon");
    std::fs::write(
        daemon.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"daemon\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nkcap-mcp-registry = {{ path = {:?}, default-features = false }}\n\n\
             [workspace]\n",
            krate.path().display().to_string()
        ),
    )
    .unwrap();
    std::fs::copy(
        krate.path().join("Cargo.lock"),
        daemon.path().join("Cargo.lock"),
    )
    .unwrap();
    std::fs::create_dir(daemon.path().join("src")).unwrap();
    std::fs::write(daemon.path().join("src/lib.rs"), "").unwrap();

    let (ok, stderr) = cargo_build(daemon.path());
    assert!(!ok, "build should fail:\n{stderr}");
    let registry = krate.path().join("registry");
    let shown = format!("--> {}:4:1", registry.join("kcap-memory.toml").display());
    assert!(stderr.contains(&shown), "{shown} not in:\n{stderr}");
    let hint = format!(
        "the MCP server registry is invalid; the same report, in any format, from a checker \
         built without it: cargo run --release --manifest-path {} -- {}",
        krate.path().join("checker/Cargo.toml").display(),
        registry.display()
    );
    assert!(
        stderr.lines().any(|l| l.trim() == hint),
        "{hint}\nnot in:\n{stderr}"
    );

    // The hint, run as given in the daemon's directory, runs this crate's checker.
    let command = hint.rsplit_once("built without it: ").unwrap().1;
    let out = Command::new("sh")
        .args(["-c", command])
        .current_dir(daemon.path())
        .env("CARGO_BUILD_BUILD_DIR", outer_build_dir())
        .env("CARGO_TARGET_DIR", target_dir().join("checker"))
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&shown), "{shown} not in:\n{stderr}");
    assert!(
        stderr.contains("error[unknown-key]: unknown key `start_flows`"),
        "{stderr}"
    );
}

/// The tests that build the full CLI share one target dir (its dependencies compile once),
/// one test at a time: each holds this lock from its first build to its last run of the
/// binary, which the next build in that dir replaces.
static FULL_BUILDS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`FULL_BUILDS`], held, and the target dir it guards.
fn full_build_dir() -> (std::sync::MutexGuard<'static, ()>, PathBuf) {
    let held = FULL_BUILDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    (held, target_dir().join("cli"))
}

/// `cargo build --bin kcap-mcp-registry` of the crate copy at `krate` in `target` (held
/// through [`full_build_dir`]), on its own registry or, with `registry_dir`, on that one
/// (`KCAP_MCP_REGISTRY_DIR`); returns the binary.
fn build_checker(krate: &Path, target: &Path, registry_dir: Option<&str>) -> PathBuf {
    let mut build = cargo();
    build
        .args([
            "build",
            "--offline",
            "--quiet",
            "--bin",
            "kcap-mcp-registry",
        ])
        .current_dir(krate)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("KCAP_MCP_REGISTRY_DIR");
    if let Some(dir) = registry_dir {
        build.env("KCAP_MCP_REGISTRY_DIR", dir);
    }
    let out = build.output().unwrap();
    assert!(
        out.status.success(),
        "the build failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug/kcap-mcp-registry")
}

#[test]
fn a_registry_file_replaced_by_an_older_broken_one_builds_stale_and_check_says_rebuild() {
    let krate = copy_crate("stale");
    let (_one_at_a_time, target) = full_build_dir();
    let file = krate.path().join("registry/kcap-memory.toml");
    let bin = build_checker(krate.path(), &target, None);
    let check = |bin: &Path| {
        let out = Command::new(bin)
            .arg("check")
            .current_dir(krate.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(check(&bin), (Some(0), String::new()));

    // `cp -p` of a broken file that is older than the build: cargo does not rerun build.rs
    // (rust-lang/cargo#10791), so the broken registry builds cleanly into a stale table.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen("starts_flows", "start_flows", 1)).unwrap();
    let day_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(day_ago)
        .unwrap();
    let bin = build_checker(krate.path(), &target, None);
    let (code, stderr) = check(&bin);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "warning: this binary was built from a different registry: rebuild. registry differs \
             from the registry compiled in (it breaks rules the compiled one passed), yet no file \
             in it is newer than the binary: a file was replaced by an older one, and cargo \
             reruns build.rs only for registry files newer than its last run \
             (rust-lang/cargo#10791); `touch registry/*.toml` and build again\n"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("error[unknown-key]: unknown key `start_flows`"),
        "{stderr}"
    );
    // Another directory holding the same files is not the one compiled in: no warning.
    let other = tempfile::tempdir().unwrap();
    copy_dir(&krate.path().join("registry"), other.path());
    let out = Command::new(&bin)
        .arg("check")
        .arg(other.path())
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A valid but different file, older still: the digests differ.
    std::fs::write(&file, text.replacen("Project memory", "Project notes", 1)).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(day_ago)
        .unwrap();
    let bin = build_checker(krate.path(), &target, None);
    let (code, stderr) = check(&bin);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.starts_with("warning: this binary was built from a different registry: rebuild. registry differs from the registry compiled in (digest "),
        "{stderr}"
    );

    // An ordinary edit after the build, checked before rebuilding: the true cause, the file
    // newer than the binary.
    std::fs::write(&file, text.replacen("Project memory", "Project recall", 1)).unwrap();
    let (code, stderr) = check(&bin);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.starts_with("warning: registry changed after this binary was built (digest ")
            && stderr.contains("kcap-memory.toml is newer than the binary)\n"),
        "{stderr}"
    );
    // Building again (the main command builds first): the warning is gone.
    let bin = build_checker(krate.path(), &target, None);
    assert_eq!(check(&bin), (Some(0), String::new()));
}

/// A build on the CI's bootstrap registry (`KCAP_MCP_REGISTRY_DIR=.ci/bootstrap-registry`,
/// as docs/ci.md builds it) says so in `--version`, and refuses to render a reviewer from
/// that registry, saying why and how to get a normal build; with `--registry DIR` it renders.
#[cfg(feature = "cli")]
#[test]
fn a_bootstrap_build_says_so_in_its_version_and_refuses_to_render_from_it() {
    let krate = copy_crate("bootstrap");
    let (_one_at_a_time, target) = full_build_dir();
    let bootstrap = build_checker(krate.path(), &target, Some(".ci/bootstrap-registry"));
    let run = |bin: &Path, args: &[&str]| {
        let out = Command::new(bin)
            .args(args)
            .current_dir(krate.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        (out.status.code(), text(out.stdout), text(out.stderr))
    };
    let normal = Path::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"));

    let (_, version, _) = run(&bootstrap, &["--version"]);
    let (_, normal_version, _) = run(normal, &["--version"]);
    let source = krate.path().join(".ci/bootstrap-registry");
    let source = source.canonicalize().unwrap();
    let (_, listed, _) = run(&bootstrap, &["list"]);
    let digest = listed
        .lines()
        .find_map(|l| l.strip_prefix("registry digest (SHA-256): "))
        .unwrap_or_else(|| panic!("no digest in:\n{listed}"))
        .to_owned();
    assert_eq!(
        version,
        format!(
            "kcap-mcp-registry {} (registry {}, bootstrap: built from {} with \
             KCAP_MCP_REGISTRY_DIR; render and launch need --registry DIR)\n",
            env!("CARGO_PKG_VERSION"),
            &digest[..12],
            source.display()
        )
    );
    assert_ne!(version, normal_version);
    assert_ne!(digest, kcap_mcp_registry::registry::DIGEST);

    let render = [
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--launch-dir",
        "/run/kcap/l1",
    ];
    let (code, stdout, stderr) = run(&bootstrap, &render);
    assert_eq!((code, stdout.as_str()), (Some(1), ""), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "error: this kcap-mcp-registry is a bootstrap build: it compiled in the registry {} \
             (KCAP_MCP_REGISTRY_DIR), not the crate's own, so a reviewer's allowlist would lose \
             the servers that registry lacks; give the registry to render from (--registry \
             DIR), or use a normal build (`cargo build --release` without \
             KCAP_MCP_REGISTRY_DIR)\n",
            source.display()
        )
    );
    let (code, _, stderr) = run(
        &bootstrap,
        &[&render[..], &["--registry", "registry"]].concat(),
    );
    assert_eq!(code, Some(0), "{stderr}");
    // The normal build renders from its own registry.
    let (code, _, stderr) = run(normal, &render);
    assert_eq!(code, Some(0), "{stderr}");
}

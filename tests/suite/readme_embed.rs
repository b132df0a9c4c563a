//! README's "Embed it in the daemon", run as a new user would: a fresh crate with the
//! section's `[dependencies]` (the path dependency pointed at this checkout) and its Rust
//! program as `src/main.rs`, built offline and run. The doctest of the same block
//! (`ReadmeDoctests` in src/lib.rs) compiles it inside this crate; only this test proves the
//! dependency lines are enough, and that the program prints an error as its message.

use std::path::Path;
use std::process::{Command, Stdio};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The README's "Embed it in the daemon" section, up to the next `## ` heading.
fn section() -> String {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let start = readme
        .find("\n## Embed it in the daemon\n")
        .expect("README has the section");
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 4);
    rest[..end].to_owned()
}

/// The body of the first fenced block of `text` whose info string is exactly `lang`.
fn block(text: &str, lang: &str) -> String {
    let open = format!("```{lang}\n");
    let start = text
        .find(&open)
        .unwrap_or_else(|| panic!("no ```{lang} block"))
        + open.len();
    let len = text[start..].find("```\n").expect("the block is closed");
    text[start..start + len].to_owned()
}

#[test]
fn the_readme_daemon_builds_from_its_dependency_lines_and_launches_a_stand_in() {
    let section = section();
    let deps = block(&section, "toml");
    let program = block(&section, "rust");

    // The git alternative names this repository, as the manifest does.
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap())
            .unwrap();
    let repository = manifest["package"]["repository"].as_str().unwrap();
    assert!(
        section.contains(&format!("git = \"{repository}\"")),
        "the section's git dependency is not {repository}"
    );

    // A new crate next to a clone: only the clone's place differs.
    let clone = "path = \"../kcap-mcp-registry\"";
    assert!(deps.contains(clone), "{clone} not in:\n{deps}");
    let deps = deps.replace(clone, &format!("path = {:?}", ROOT));
    let daemon = crate::common::cargo::crate_dir("readme-daemon");
    std::fs::write(
        daemon.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"daemon\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n{deps}\n\
             [workspace]\n"
        ),
    )
    .unwrap();
    // Offline: the versions this crate is tested with.
    std::fs::copy(
        Path::new(ROOT).join("Cargo.lock"),
        daemon.path().join("Cargo.lock"),
    )
    .unwrap();
    std::fs::create_dir(daemon.path().join("src")).unwrap();
    std::fs::write(daemon.path().join("src/main.rs"), &program).unwrap();

    // The build scripts' tests' target dir, for the binary; the dependencies are the outer
    // build's (`cargo()`).
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-script-tests");
    let build = crate::common::cargo::cargo()
        .args(["build", "--offline", "--quiet", "--bin", "daemon"])
        .current_dir(daemon.path())
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("KCAP_MCP_REGISTRY_DIR")
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "the README's daemon does not build:\n{}",
        String::from_utf8_lossy(&build.stderr)
    );

    // Its state directory goes under this TMPDIR.
    let tmp = tempfile::tempdir().unwrap();
    let child = Command::new(target.join("debug/daemon"))
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let run = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let launch_dir = tmp.path().join(format!("kcap-daemon-{pid}/launches/a1"));
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("dry run: check the plan (version "),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "dry run: create {} (mode 0700)\n",
            launch_dir.display()
        )),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().last(),
        Some(
            "reviewer stopped: Some(ExitStatus(unix_wait_status(0))); launch directory left: false"
        ),
        "{stdout}"
    );
    // It cleaned up after itself.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);

    // An error is printed as its message (`Display`), not as the `Debug` a `main` that returns
    // it prints (`Error: Os { code: 20, … }`), and the exit code is 1: here its state
    // directory cannot be made, TMPDIR being a file.
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let failed = Command::new(target.join("debug/daemon"))
        .env("TMPDIR", &file)
        .output()
        .unwrap();
    assert_eq!(
        (
            failed.status.code(),
            String::from_utf8_lossy(&failed.stderr).as_ref()
        ),
        (Some(1), "error: Not a directory (os error 20)\n")
    );
}

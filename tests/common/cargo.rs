//! `cargo` run from a test on a copy of this crate (or a crate depending on one), sharing the
//! outer build's compiled dependencies.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The build directory of the `cargo test` running this test: `CARGO_TARGET_TMPDIR` is
/// `<target dir>/tmp` (the Cargo Book, "Environment variables Cargo sets for crates"), and
/// the target dir holds the intermediate artifacts unless `build.build-dir` moves them.
pub fn outer_build_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is <target dir>/tmp")
        .to_path_buf()
}

/// `cargo` (the one running these tests) with the outer build's directory as its build
/// directory (`CARGO_BUILD_BUILD_DIR`, the Cargo Book's `build.build-dir`): the
/// dependencies a copy shares with the outer build (same versions, profile and features: all
/// of them, measured) are not compiled again. The final artifacts still go to the
/// `CARGO_TARGET_DIR` the caller sets, so nothing of the outer build is replaced: a copy's
/// own crates have other hashes (their paths differ). `cargo test` releases the build
/// directory's lock before it runs the tests (measured: a test's `cargo build` there does
/// not wait). The `build_script::` and `readme_embed` tests, cold, on 2 cores under load:
/// the first alone took 270 CPU-s with target dirs of their own, both 71 CPU-s with this.
pub fn cargo() -> Command {
    let mut cargo = Command::new(env!("CARGO"));
    cargo.env("CARGO_BUILD_BUILD_DIR", outer_build_dir());
    cargo
}

/// A directory of its own for a crate that [`cargo()`] builds: `<CARGO_TARGET_TMPDIR>/crates/
/// <name>`, emptied first. The same path on every run, so a crate built there keeps its
/// hashes, and each run replaces the artifacts of the last in the shared build directory
/// instead of adding its own (a temp dir's random path would add ~0.6 GB a run). `name` is
/// the test's own, so no two tests share one; two runs of one test at once would.
pub fn crate_dir(name: &str) -> CrateDir {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("crates")
        .join(name);
    match std::fs::remove_dir_all(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("cannot empty {}: {e}", path.display()),
    }
    std::fs::create_dir_all(&path).unwrap();
    CrateDir { path }
}

/// A directory from [`crate_dir`]; it stays after the test, to be looked at.
pub struct CrateDir {
    path: PathBuf,
}

impl CrateDir {
    /// Its path (absolute: `CARGO_TARGET_TMPDIR` is).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

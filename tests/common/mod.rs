//! Helpers shared by the tests (`mod common;`): run the `kcap-mcp-registry` binary and
//! capture its exit code, stdout and stderr exactly (with the `cli` feature); write an
//! executable stand-in ([`stand_in`]); run the real clients ([`peers`]), with recorders as
//! their MCP servers ([`records`]), a plan carried out by the library's executor
//! ([`carry`]), `/etc` overlaid in a private mount namespace ([`etc`]). `README.md` here says how to write a test file
//! that runs a real client.
#![allow(dead_code)]

pub mod cargo;
#[cfg(feature = "launch")]
pub mod carry;
pub mod door;
pub mod etc;
pub mod model_api;
#[cfg(feature = "launch")]
pub mod outside;
pub mod plan;
#[macro_use]
pub mod peers;
pub mod records;
pub mod stand_in;
pub mod tool_attacks;
/// The seeded variants of the differential tests (`tests/clients/differential_*.rs`).
#[cfg(feature = "cli")]
pub mod variants;
#[cfg(feature = "cli")]
pub mod verify;

#[cfg(feature = "cli")]
use std::path::Path;

/// What one run of the binary produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The binary, run in the crate root with `NO_COLOR` unset.
#[cfg(feature = "cli")]
pub fn bin() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("NO_COLOR");
    cmd
}

/// Runs the binary with `args` (in the crate root).
#[cfg(feature = "cli")]
pub fn run(args: &[&str]) -> Run {
    finish(bin().args(args))
}

/// Runs the binary with `args` in `dir`.
#[cfg(feature = "cli")]
pub fn run_in(dir: &Path, args: &[&str]) -> Run {
    finish(bin().current_dir(dir).args(args))
}

/// Runs a prepared command.
pub fn finish(cmd: &mut assert_cmd::Command) -> Run {
    let out = cmd.output().expect("the binary runs");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    }
}

/// A successful run's stdout, with nothing on stderr.
#[cfg(feature = "cli")]
pub fn stdout_of(args: &[&str]) -> String {
    let r = run(args);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{args:?}");
    r.stdout
}

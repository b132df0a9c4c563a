//! The commands, one file each (`check`, `list`/`resolve`, `diff`, `render`, `export`,
//! `install`/`uninstall`, `doctor`, `launch`, `verify`), and what they share: [`CliError`]
//! (the exit code), the registry they read (`--registry DIR` or the compiled-in one), the
//! policy flag.

use std::error::Error;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use kcap_mcp_registry::clients::registration::DEFAULT_COMMAND;
use kcap_mcp_registry::launch::sandbox::Confinement;
use kcap_mcp_registry::report;
use kcap_mcp_registry::text::ShownPath;
use kcap_mcp_registry::{CheckError, Policy, Registry, RegistryEntry, diagnostic, ops};

pub(crate) mod check;
pub(crate) mod diff;
pub(crate) mod doctor;
pub(crate) mod export;
pub(crate) mod install;
pub(crate) mod launch;
pub(crate) mod list;
pub(crate) mod render;
pub(crate) mod verify;

/// Why a command did not succeed.
pub(crate) enum CliError {
    /// Exit 2: a usage error or an input that cannot be read or understood; printed as
    /// `error: ` and the error's chain of causes.
    Usage(Box<dyn Error>),
    /// Exit 1: the command ran and found a problem; printed like `Usage`, or, for `None`,
    /// already reported.
    Found(Option<Box<dyn Error>>),
}

impl CliError {
    pub(crate) fn usage(e: impl Into<Box<dyn Error>>) -> CliError {
        CliError::Usage(e.into())
    }

    pub(crate) fn found(e: impl Into<Box<dyn Error>>) -> CliError {
        CliError::Found(Some(e.into()))
    }
}

pub(crate) use kcap_mcp_registry::text::error_chain as chain;

/// A usage error that a file of `flag` could not be read (an I/O error in its chain), said
/// as `{flag}: {error and its causes}` (`--registry: cannot read /nope: No such file or
/// directory (os error 2)`), so that a user with several file flags knows which one to fix.
/// Any other error is left as it is (one about the file's content names the file, line and
/// column).
pub(crate) fn in_flag(flag: &'static str) -> impl FnOnce(CliError) -> CliError {
    move |e| match e {
        CliError::Usage(e) if io_in_chain(&*e) => {
            CliError::usage(format!("{flag}: {}", chain(&*e)))
        }
        other => other,
    }
}

/// Whether `e` or one of its causes is an I/O error.
fn io_in_chain(e: &(dyn Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if e.is::<std::io::Error>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// [`load`] of the registry directory `--registry DIR` names, or the compiled-in one.
pub(crate) fn load_flag(dir: Option<&Path>) -> Result<Vec<RegistryEntry>, CliError> {
    load(dir).map_err(in_flag("--registry"))
}

/// `--sandbox` of `launch` and `verify`, and `--cgroup` of `launch`: a [`Confinement`] by
/// name.
#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum SandboxPolicy {
    Off,
    BestEffort,
    Required,
}

impl From<SandboxPolicy> for Confinement {
    fn from(policy: SandboxPolicy) -> Confinement {
        match policy {
            SandboxPolicy::Off => Confinement::Off,
            SandboxPolicy::BestEffort => Confinement::BestEffort,
            SandboxPolicy::Required => Confinement::Required,
        }
    }
}

pub(crate) fn policy(strict: bool) -> Policy {
    if strict {
        Policy::Strict
    } else {
        Policy::Lenient
    }
}

pub(crate) fn stderr_color() -> bool {
    report::color_enabled(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// The registry in `dir` (validated), or the compiled-in one. Violations are printed
/// (human format) and give exit code 1; an unreadable directory gives 2.
pub(crate) fn load(dir: Option<&Path>) -> Result<Vec<RegistryEntry>, CliError> {
    let Some(dir) = dir else {
        return Ok(ops::list::compiled_entries());
    };
    match kcap_mcp_registry::validate_dir(dir) {
        Ok(entries) => Ok(entries),
        Err(CheckError::Invalid(diags)) => {
            err!("{}", diagnostic::render_all(&diags, stderr_color()));
            Err(CliError::found(format!(
                "{} is not a valid registry; `kcap-mcp-registry check {}` shows the same report",
                ShownPath(dir),
                ShownPath(dir)
            )))
        }
        Err(e) => Err(CliError::usage(e)),
    }
}

/// [`load_flag`] as a [`Registry`] to resolve and render against.
pub(crate) fn registry(dir: Option<&Path>) -> Result<Registry, CliError> {
    match dir {
        None => Ok(Registry::compiled()),
        Some(dir) => Registry::from_entries(&load_flag(Some(dir))?).map_err(CliError::found),
    }
}

/// The directory `check` runs on: `dir`, or the `registry` directory of the current
/// directory or its nearest parent that has one, shown relative to the current directory
/// (`../../registry`).
pub(crate) fn registry_dir(dir: Option<PathBuf>) -> Result<PathBuf, CliError> {
    if let Some(dir) = dir {
        return Ok(dir);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| CliError::usage(format!("cannot read the current directory: {e}")))?;
    kcap_mcp_registry::schema::find_registry_dir(&cwd).ok_or_else(|| {
        CliError::usage(format!(
            "no `registry` directory in {} or any parent directory; give the registry \
             directory: `kcap-mcp-registry check DIR`",
            ShownPath(&cwd)
        ))
    })
}

#[derive(Args)]
pub(crate) struct RegistrySource {
    /// Use this registry directory, checked now with the rules of `check`, instead of the
    /// compiled-in registry.
    #[arg(long, value_name = "DIR")]
    pub(crate) registry: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct RegistrationArgs {
    #[command(flatten)]
    pub(crate) source: RegistrySource,
    /// The kcap binary, the `command` of every server.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMAND, alias = "command")]
    pub(crate) kcap_bin: String,
    /// Write each server's `server_url` env vars with this URL.
    #[arg(long, value_name = "URL")]
    pub(crate) server_url: Option<String>,
}

/// Refuses a blank `--kcap-bin` or `--server-url`, or one holding a control or invisible
/// character, of `export`, `install` and `check --against` (exit 2).
pub(crate) fn check_kcap_values(kcap_bin: &str, server_url: Option<&str>) -> Result<(), CliError> {
    ops::render::check_value("--kcap-bin", kcap_bin, false).map_err(CliError::usage)?;
    if let Some(url) = server_url {
        ops::render::check_value("--server-url", url, false).map_err(CliError::usage)?;
    }
    Ok(())
}

pub(crate) fn absolute_path(s: &str) -> Result<String, String> {
    if Path::new(s).is_absolute() {
        Ok(s.to_string())
    } else {
        Err(
            "must be an absolute path: a client cannot start a server whose `cwd` is relative"
                .into(),
        )
    }
}

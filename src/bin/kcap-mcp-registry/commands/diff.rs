//! `diff OLD NEW` (or `diff --registry NEW`): what changes between two registries,
//! security-relevant flips first, with `--accepted FILE` for the reviewed ones.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kcap_mcp_registry::ops;

use super::{CliError, in_flag, load, load_flag};

#[derive(Args)]
pub(crate) struct DiffArgs {
    /// The registry directory before the change.
    #[arg(
        requires = "new_dir",
        required_unless_present = "registry",
        conflicts_with = "registry"
    )]
    old_dir: Option<PathBuf>,
    /// The registry directory after the change.
    #[arg(conflicts_with = "registry")]
    new_dir: Option<PathBuf>,
    /// Compare the compiled-in registry (old) with this directory (new).
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Markdown)]
    format: DiffFormat,
    /// Exit 1 when the diff holds a change of this kind.
    #[arg(long, value_enum, value_name = "KIND")]
    fail_on: Option<FailOn>,
    /// With --fail-on security: the reviewed changes that do not fail (an accepted-changes
    /// file; a missing file accepts nothing). A stale entry fails.
    #[arg(long, value_name = "FILE", requires = "fail_on")]
    accepted: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum DiffFormat {
    Markdown,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum FailOn {
    // A security-relevant change (listed in `diff --help`). A plain comment: a doc comment
    // would switch `diff --help` to clap's long layout, unlike every other subcommand.
    Security,
}

pub(crate) fn diff(args: &DiffArgs) -> Result<ExitCode, CliError> {
    use kcap_mcp_registry::ops::diff::accepted::AcceptedChanges;
    let (old, new) = match (&args.old_dir, &args.new_dir, &args.registry) {
        (Some(old), Some(new), _) => (load(Some(old))?, load(Some(new))?),
        (_, _, new) => (ops::list::compiled_entries(), load_flag(new.as_deref())?),
    };
    let d = kcap_mcp_registry::ops::diff::diff(&old, &new);
    let markdown = matches!(args.format, DiffFormat::Markdown);
    let Some(path) = &args.accepted else {
        out!("{}", if markdown { d.markdown() } else { d.json() });
        if args.fail_on.is_some() && d.has_security() {
            return Err(CliError::Found(None));
        }
        return Ok(ExitCode::SUCCESS);
    };
    let accepted = AcceptedChanges::read(path)
        .map_err(CliError::usage)
        .map_err(in_flag("--accepted"))?;
    let review = accepted.review(&d, &new);
    out!(
        "{}",
        if markdown {
            review.markdown()
        } else {
            review.json()
        }
    );
    err!("{}", review.report());
    if review.passes() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::Found(None))
    }
}

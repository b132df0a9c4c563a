//! `install` and `uninstall`: kcap's entries in a client's own config file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::registration;
use kcap_mcp_registry::clients::registration::{DEFAULT_COMMAND, RegistrationOptions};
use kcap_mcp_registry::text::ShownPath;

use super::{CliError, RegistrySource, check_kcap_values, load_flag};

#[derive(Args)]
pub(crate) struct InstallTarget {
    /// The client whose config file to edit.
    #[arg(long, value_enum)]
    client: Client,
    /// The config file (default: the client's user-level file, honouring its home variable:
    /// CLAUDE_CONFIG_DIR, CODEX_HOME, COPILOT_HOME, KIRO_HOME, XDG_CONFIG_HOME).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Print the unified diff of the config instead of writing anything.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Args)]
pub(crate) struct InstallArgs {
    #[command(flatten)]
    target: InstallTarget,
    #[command(flatten)]
    source: RegistrySource,
    /// The kcap binary, the command of every server (uninstall: the one install was given,
    /// to recognise kcap's entries that no ledger records).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMAND, alias = "command")]
    kcap_bin: String,
    /// Write each server's `server_url` env vars with this URL (uninstall: the one install
    /// was given).
    #[arg(long, value_name = "URL")]
    server_url: Option<String>,
}

/// The config file `install`/`uninstall` edit: `--config`, or the client's default.
pub(crate) fn config_path(target: &InstallTarget) -> Result<PathBuf, CliError> {
    match &target.config {
        Some(path) => Ok(path.clone()),
        None => (target.client.registration().default_config)(&|name| std::env::var_os(name))
            .map_err(CliError::usage),
    }
}

/// The entries `install` (and `uninstall`, to recognise them) works with.
pub(crate) fn servers(
    args: &InstallArgs,
    format: &registration::RegistrationFormat,
) -> Result<Vec<(String, registration::Node)>, CliError> {
    check_kcap_values(&args.kcap_bin, args.server_url.as_deref())?;
    let entries = load_flag(args.source.registry.as_deref())?;
    let opts = RegistrationOptions {
        command: args.kcap_bin.clone(),
        server_url: args.server_url.clone(),
        project_dir: None,
    };
    registration::registration_entries(format, &entries, &opts).map_err(CliError::usage)
}

pub(crate) fn install(args: InstallArgs) -> Result<ExitCode, CliError> {
    let format = args.target.client.registration();
    let config = config_path(&args.target)?;
    // The client's own directory is created for its default location (a first install);
    // a directory named with --config that does not exist is a typo, not a request.
    if args.target.config.is_some()
        && let Some(dir) = config.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.is_dir()
    {
        return Err(CliError::usage(format!(
            "the directory of --config {} does not exist; create it first, or fix the path",
            ShownPath(&config)
        )));
    }
    let servers = servers(&args, format)?;
    print_outcome(kcap_mcp_registry::ops::install::install(
        format,
        &config,
        &servers,
        args.target.dry_run,
    ))
}

pub(crate) fn uninstall(args: InstallArgs) -> Result<ExitCode, CliError> {
    let format = args.target.client.registration();
    let config = config_path(&args.target)?;
    let servers = servers(&args, format)?;
    print_outcome(kcap_mcp_registry::ops::install::uninstall(
        format,
        &config,
        &servers,
        args.target.dry_run,
    ))
}

/// Prints the diff (dry run) or what was done; exit 1 when an entry was left divergent or
/// kept edited, 2 when nothing could be written.
pub(crate) fn print_outcome(
    outcome: Result<
        kcap_mcp_registry::ops::install::Outcome,
        kcap_mcp_registry::ops::install::InstallError,
    >,
) -> Result<ExitCode, CliError> {
    let outcome = outcome.map_err(CliError::usage)?;
    if outcome.dry_run {
        out!("{}", outcome.diff());
    }
    err!("{}", outcome.report());
    let path = ShownPath(&outcome.config);
    match (outcome.dry_run, outcome.changed) {
        _ if !outcome.existed && outcome.after.is_empty() && !outcome.changed => {
            errln!("{path} does not exist: nothing to uninstall");
        }
        (true, true) if outcome.removed => errln!(
            "dry run: would remove {path} (kcap created it and nothing else is in it); nothing written"
        ),
        (true, true) => errln!("dry run: nothing written to {path} or its ledger"),
        (true, false) => errln!("dry run: {path} needs no change"),
        (false, true) if outcome.removed => {
            errln!("removed {path}: kcap created it and nothing else is in it");
        }
        (false, true) if !outcome.existed && outcome.after.is_empty() => {
            errln!("{path} does not exist: removed its ledger");
        }
        (false, true) => errln!("wrote {path}"),
        (false, false) => errln!("{path} needs no change"),
    }
    if outcome.has_problem() {
        Err(CliError::Found(None))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}

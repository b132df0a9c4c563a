//! `list` and `resolve`: the registry, and an allowlist resolved against it.

use std::process::ExitCode;

use clap::ValueEnum;
use kcap_mcp_registry::ops;

use super::{CliError, RegistrySource, load_flag, policy, registry};

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum ListFormat {
    Table,
    Json,
}

/// `list`: the registry (the compiled-in one, or `--registry DIR`) and its digest.
pub(crate) fn list(format: ListFormat, source: &RegistrySource) -> Result<ExitCode, CliError> {
    let entries = load_flag(source.registry.as_deref())?;
    match format {
        ListFormat::Table => out!(
            "{}\nregistry digest (SHA-256): {}\n",
            ops::list::list_table(&entries),
            kcap_mcp_registry::schema::digest(&entries)
        ),
        ListFormat::Json => out!("{}", ops::list::list_json(&entries)),
    }
    Ok(ExitCode::SUCCESS)
}

/// `resolve`: one line per allowlist entry; exit 1 when the strict policy rejects one.
pub(crate) fn resolve(
    allowlist: &[String],
    strict: bool,
    source: &RegistrySource,
) -> Result<ExitCode, CliError> {
    let registry = registry(source.registry.as_deref())?;
    let report = ops::list::resolve_report_in(registry, allowlist, policy(strict));
    out!("{}", report.text);
    if report.rejected {
        return Err(CliError::Found(None));
    }
    Ok(ExitCode::SUCCESS)
}

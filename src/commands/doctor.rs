//! `doctor`: what is wrong with kcap's registrations in every client's config file, or
//! (`--project DIR`) which repository-level servers a reviewer's plan must neutralize.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::doctor::{self, ClientFile};
use kcap_mcp_registry::export::{DEFAULT_COMMAND, RegistrationOptions};
use kcap_mcp_registry::report;
use kcap_mcp_registry::text::ShownPath;

use super::check::CheckFormat;
use super::install::client_config;
use super::{CliError, RegistrySource, check_kcap_values, load, stderr_color};

mod project;

#[derive(Args)]
pub(crate) struct DoctorArgs {
    /// Output format: human (summary on stdout, findings on stderr), json or github (on
    /// stdout).
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// Check only this client (repeatable) [default: all eight].
    #[arg(long, value_enum)]
    client: Vec<Client>,
    /// Check PATH as CLIENT's file instead of its default location (repeatable), e.g.
    /// `claude=/home/me/.claude.json`.
    #[arg(long, value_name = "CLIENT=PATH", value_parser = client_config)]
    config: Vec<(Client, PathBuf)>,
    #[command(flatten)]
    source: RegistrySource,
    /// The current kcap binary, the command kcap's entries should run.
    #[arg(long, value_name = "PATH", default_value = DEFAULT_COMMAND, alias = "command")]
    kcap_bin: String,
    /// The URL install was given with --server-url, if any.
    #[arg(long, value_name = "URL")]
    server_url: Option<String>,
    /// Remove the removable duplicates (doctor-duplicate) from ~/.claude.json, with
    /// install's lock and atomic write, then report what is left.
    #[arg(long)]
    fix: bool,
    /// Read the MCP files of the repository in DIR instead (every client's project files),
    /// and tell for each server whether the client's reviewer launch plan neutralizes it.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["config", "fix", "server_url"])]
    project: Option<PathBuf>,
}

/// The file `command` runs, canonical: an absolute (or relative) path that is a file, or a
/// bare name found in a `PATH` directory; `None` when there is none.
pub(crate) fn resolve_command(command: &str) -> Option<PathBuf> {
    let path = Path::new(command);
    let found = if path.components().count() > 1 || path.is_absolute() {
        path.is_file().then(|| path.to_path_buf())
    } else {
        let dirs = std::env::var_os("PATH")?;
        std::env::split_paths(&dirs)
            .filter(|d| !d.as_os_str().is_empty())
            .map(|d| d.join(command))
            .find(|p| p.is_file())
    }?;
    std::fs::canonicalize(found).ok()
}

pub(crate) fn doctor(args: DoctorArgs) -> Result<ExitCode, CliError> {
    check_kcap_values(&args.kcap_bin, args.server_url.as_deref())?;
    if let Some(dir) = &args.project {
        return project::project(&args, dir);
    }
    let entries = load(args.source.registry.as_deref())?;
    let opts = RegistrationOptions {
        command: args.kcap_bin.clone(),
        server_url: args.server_url.clone(),
        project_dir: None,
    };
    let targets = doctor_targets(&args)?;
    let diagnose = || {
        let files: Vec<ClientFile> = targets
            .iter()
            .map(|(c, p, e)| ClientFile::read(*c, p.clone(), *e))
            .collect();
        doctor::diagnose(&doctor::Input {
            entries: &entries,
            opts: &opts,
            files: &files,
            resolve: &resolve_command,
        })
        .map_err(CliError::usage)
    };
    let mut report = diagnose()?;
    if args.fix && !report.removable.is_empty() {
        let mut by_file: Vec<(PathBuf, Vec<_>)> = Vec::new();
        for (path, dup) in &report.removable {
            match by_file.iter_mut().find(|(p, _)| p == path) {
                Some((_, dups)) => dups.push(dup.clone()),
                None => by_file.push((path.clone(), vec![dup.clone()])),
            }
        }
        for (path, dups) in by_file {
            let Some(client) = report.clients.iter().find(|c| c.path == path) else {
                continue;
            };
            let outcome = kcap_mcp_registry::install::remove_project_duplicates(
                client.client,
                &path,
                &dups,
                false,
            )
            .map_err(CliError::usage)?;
            err!("{}", outcome.report());
            if outcome.changed {
                errln!("wrote {}", ShownPath(&outcome.config));
            }
        }
        report = diagnose()?;
    }
    let findings = report.findings();
    match args.format {
        CheckFormat::Human => {
            for c in &report.clients {
                let status = match c.status {
                    doctor::Status::NoFile => "no file".to_string(),
                    doctor::Status::NotInstalled => "no kcap servers".to_string(),
                    doctor::Status::Installed { registered, of } => {
                        format!("kcap installed, {registered} of {of} registry servers registered")
                    }
                    doctor::Status::Unusable => "cannot be used (see below)".to_string(),
                };
                outln!("{}: {}: {status}", c.client.name(), ShownPath(&c.path));
            }
            if findings.is_empty() {
                outln!("ok: no problems found");
            } else {
                err!(
                    "{}",
                    report::human(&findings, "doctor finding", stderr_color())
                );
            }
        }
        CheckFormat::Json => out!("{}", report::json(&findings)),
        CheckFormat::Github => out!("{}", report::github(&findings)),
    }
    if report.has_unreadable() {
        return Err(CliError::usage(
            "a registration file or ledger could not be read (doctor-unreadable)",
        ));
    }
    if findings.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(CliError::Found(None))
    }
}

/// The files `doctor` reads: (client, path, whether `--config` named it), for every client
/// `--client` selects (all without it), at its `--config` or default location.
///
/// # Errors
/// A usage error for two `--config`s for one client, a `--config` for a client `--client`
/// leaves out, or a default location that cannot be found (e.g. no HOME).
pub(crate) fn doctor_targets(args: &DoctorArgs) -> Result<Vec<(Client, PathBuf, bool)>, CliError> {
    for (i, (client, path)) in args.config.iter().enumerate() {
        if let Some((_, other)) = args.config[..i].iter().find(|(c, _)| c == client) {
            return Err(CliError::usage(format!(
                "--config names two files for {}: {} and {}; give one (run doctor once per file)",
                client.display_name(),
                ShownPath(other),
                ShownPath(path)
            )));
        }
        if !args.client.is_empty() && !args.client.contains(client) {
            return Err(CliError::usage(format!(
                "--config {}={} names a client that --client leaves out; add `--client {}`, \
                 or drop that --config",
                client.name(),
                ShownPath(path),
                client.name()
            )));
        }
    }
    let mut targets = Vec::new();
    for client in Client::value_variants() {
        if !args.client.is_empty() && !args.client.contains(client) {
            continue;
        }
        let given = args.config.iter().find(|(c, _)| c == client);
        let (path, explicit) = match given {
            Some((_, path)) => (path.clone(), true),
            None => {
                let path = (client.registration().default_config)(&|name| std::env::var_os(name))
                    .map_err(|e| {
                    CliError::usage(format!(
                        "{}: {e} (or --client to check other clients only)",
                        client.display_name()
                    ))
                })?;
                (path, false)
            }
        };
        targets.push((*client, path, explicit));
    }
    Ok(targets)
}

/// Prints the diff (dry run) or what was done; exit 1 when an entry was left divergent or
/// kept edited, 2 when nothing could be written.
pub(crate) fn print_outcome(
    outcome: Result<kcap_mcp_registry::install::Outcome, kcap_mcp_registry::install::InstallError>,
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

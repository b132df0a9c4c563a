//! `doctor`: what is wrong with kcap's registrations in every client's config file, or
//! (`--project DIR`) which repository-level servers a reviewer's plan must neutralize.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::registration::{DEFAULT_COMMAND, RegistrationOptions};
use kcap_mcp_registry::ops::doctor::{self, ClientFile};
use kcap_mcp_registry::report;
use kcap_mcp_registry::text::ShownPath;

use super::check::CheckFormat;
use super::{CliError, RegistrySource, check_kcap_values, load_flag, stderr_color};

mod project;

/// `doctor --help`'s epilogue, naming every client, the variables that move their files and
/// the repository-level files each reads (from the rooms' registration formats), wrapped at
/// 92 columns as every other help text is.
pub(crate) fn help() -> String {
    let names: Vec<&str> = Client::ALL.iter().map(|c| c.display_name()).collect();
    let mut vars: Vec<&str> = Client::ALL
        .iter()
        .filter_map(|c| c.registration().default_config_var)
        .collect();
    vars.sort_unstable();
    vars.dedup();
    let mut files: Vec<&str> = Vec::new();
    for client in Client::ALL {
        for file in client.registration().project_files {
            if !files.contains(&file.path) {
                files.push(file.path);
            }
        }
    }
    let paragraphs = [
        format!(
            "Checks the default registration file of each client ({}; honouring {}) for: files \
             that cannot be read or that the client would refuse (doctor-unreadable, \
             doctor-malformed); in ~/.claude.json, project-scope entries named like a \
             user-scope kcap entry, identical to it and to kcap's (doctor-duplicate, removable \
             with --fix) or not (doctor-conflict, kept); kcap entries whose command does not \
             exist (doctor-stale-command) or is not the current kcap binary \
             (doctor-outdated-command) or that differ in more (doctor-divergent); registry \
             servers missing where kcap is installed (doctor-missing).",
            names.join(", "),
            vars.join(", ")
        ),
        "Every finding is at file:line:column: the server's name, the block a missing server \
         belongs in, or where the client's parser stops."
            .to_string(),
        format!(
            "--project DIR reads the repository's own MCP files instead, those each client reads \
             when started in DIR ({}), and prints every server in them at file:line:column with \
             the client and whether that client's reviewer launch plan, rendered for a launch in \
             DIR, neutralizes it (the plan removes the file from the worktree: \
             worktree_remove). A server the client would start from a file the plan leaves in \
             place is a finding (doctor-project-server); the others are notes (json: severity \
             note, neutralized true; github: ::notice).",
            files.join(", ")
        ),
        "Exit codes: 0 nothing found; 1 findings; 2 a file could not be read (or a usage error)."
            .to_string(),
    ];
    let mut out: Vec<String> = paragraphs.iter().map(|p| wrap(p, 92)).collect();
    out.push(
        "Examples:\n  kcap-mcp-registry doctor --kcap-bin /usr/local/bin/kcap\n  \
         kcap-mcp-registry doctor --config codex=./config.toml --client codex --format json\n  \
         kcap-mcp-registry doctor --project ~/src/repo --client claude --client codex"
            .to_string(),
    );
    out.join("\n\n")
}

/// `text`'s words in lines of at most `width` characters (a longer word on a line of its
/// own).
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if line > 0 && line + 1 + len > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += len;
    }
    out
}

#[derive(Args)]
pub(crate) struct DoctorArgs {
    /// Output format: human (summary on stdout, findings on stderr), json or github (on
    /// stdout).
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// Check only this client (repeatable) [default: all].
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
    let entries = load_flag(args.source.registry.as_deref())?;
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
            let outcome = kcap_mcp_registry::ops::install::remove_project_duplicates(
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

/// `CLIENT=PATH` of `doctor --config`.
pub(crate) fn client_config(s: &str) -> Result<(Client, PathBuf), String> {
    let (client, path) = s
        .split_once('=')
        .ok_or("expected CLIENT=PATH, e.g. codex=/home/me/.codex/config.toml")?;
    let client = Client::from_str(client, true).map_err(|_| {
        let names: Vec<&str> = Client::ALL.iter().map(|c| c.name()).collect();
        format!(
            "unknown client `{}`; one of: {}",
            client.escape_debug(),
            names.join(", ")
        )
    })?;
    if path.is_empty() {
        return Err("the PATH after `=` is empty".into());
    }
    Ok((client, PathBuf::from(path)))
}

//! `check [DIR|FILE] [--against FILE…]`: the registry rules, and drift between the registry
//! and client registration files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::registration;
use kcap_mcp_registry::clients::registration::DEFAULT_COMMAND;
use kcap_mcp_registry::ops::check::{AgainstOptions, Drift};
use kcap_mcp_registry::report::{self, Finding};
use kcap_mcp_registry::text::{ShownPath, printable};

use super::{CliError, check_kcap_values, registry_dir, stderr_color};
use kcap_mcp_registry::{CheckError, ops};

#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The registry directory, or one file of it (checked with its directory's cross-file
    /// rules: unique ids, the result channel) [default: `registry` here or in the nearest
    /// parent].
    #[arg(value_name = "DIR|FILE")]
    dir: Option<PathBuf>,
    /// Output format: human (rustc style, on stderr), json or github (on stdout).
    #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
    format: CheckFormat,
    /// A client's registration file (any client's: .mcp.json, config.toml,
    /// .gemini/settings.json, opencode.json, mcp-config.json, …) that must register exactly the
    /// registry's allowlistable servers (repeatable).
    #[arg(long, value_name = "FILE")]
    against: Vec<PathBuf>,
    /// The kcap binary the registration files run (their `command`).
    #[arg(
        long,
        value_name = "PATH",
        default_value = DEFAULT_COMMAND,
        requires = "against",
        alias = "command"
    )]
    kcap_bin: String,
    /// Claude Code: the project directory a session runs in (absolute). A ~/.claude.json
    /// is checked for the servers effective there (its local scope over its user scope);
    /// without it, each project the file holds servers for is checked and named.
    #[arg(long, value_name = "DIR", requires = "against")]
    project: Option<String>,
    /// Codex CLI: the profile selected with `--profile NAME`, read from NAME.config.toml
    /// next to the file and merged over it.
    #[arg(long, value_name = "NAME", requires = "against")]
    codex_profile: Option<String>,
    /// The client that reads every --against file (default: told from each file's name,
    /// then its extension, then its content).
    #[arg(long, value_enum, requires = "against")]
    client: Option<Client>,
}

pub(crate) use report::Format as CheckFormat;

pub(crate) fn check(args: CheckArgs) -> Result<ExitCode, CliError> {
    // `check --against FILE` alone, outside a registry checkout, compares FILE with the
    // compiled-in registry (as doctor and export do).
    let given = args.dir.is_some();
    let dir = match registry_dir(args.dir) {
        Ok(dir) => Some(dir),
        Err(_) if !given && !args.against.is_empty() => {
            errln!(
                "note: no `registry` directory here or in a parent directory: comparing with \
                 the registry compiled into this binary"
            );
            None
        }
        Err(e) => return Err(e),
    };
    let print_findings = |findings: &[Finding], human: &dyn Fn() -> String| match args.format {
        CheckFormat::Human => err!("{}", human()),
        CheckFormat::Json => out!("{}", report::json(findings)),
        CheckFormat::Github => out!("{}", report::github(findings)),
    };
    if !args.against.is_empty() && dir.as_deref().is_some_and(Path::is_file) {
        return Err(CliError::usage(
            "--against compares a whole registry with a registration file: give the registry directory",
        ));
    }
    let checked = match &dir {
        Some(dir) => kcap_mcp_registry::validate_path(dir),
        None => Ok(ops::list::compiled_entries()),
    };
    if let Some(dir) = dir.as_deref().filter(|d| d.is_dir()) {
        let entries = checked.as_ref().ok().map(Vec::as_slice);
        if let Some(warning) = ops::list::stale_binary(dir, entries) {
            errln!("warning: {warning}");
        }
    }
    let entries = match checked {
        Ok(entries) => entries,
        Err(CheckError::Invalid(diags)) => {
            let shown = report::violations(&diags, args.format, stderr_color());
            out!("{}", shown.stdout);
            err!("{}", shown.stderr);
            return Err(CliError::Found(None));
        }
        Err(e) => return Err(CliError::usage(e)),
    };
    let opts = AgainstOptions {
        project: args.project.clone(),
        codex_profile: args.codex_profile.clone(),
        client: args.client,
    };
    if !args.against.is_empty() {
        check_kcap_values(&args.kcap_bin, None)?;
    }
    let mut files = Vec::new();
    for path in &args.against {
        let checked = ops::check::check_against(&entries, &args.kcap_bin, path, &opts)
            .map_err(CliError::usage)
            .map_err(super::in_flag("--against"))?;
        warn_ignored_against_flags(path, checked.first().map(|c| c.client), &opts);
        files.extend(checked);
    }
    let findings: Vec<Finding> = files
        .iter()
        .flat_map(|f| &f.drift)
        .map(Drift::finding)
        .collect();
    if !findings.is_empty() {
        print_findings(&findings, &|| {
            report::human(&findings, "drift finding", stderr_color())
        });
        return Err(CliError::Found(None));
    }
    match args.format {
        CheckFormat::Human => {
            let shown = match &dir {
                Some(dir) => ShownPath(dir).to_string(),
                None => "the compiled-in registry".to_string(),
            };
            outln!("{}", report::ok_line(entries.len(), &shown));
            for f in &files {
                let n = registration::registrations(&entries).count();
                let project = f
                    .project
                    .as_deref()
                    .map(|p| format!(" for project {}", printable(p)))
                    .unwrap_or_default();
                outln!(
                    "ok: {} ({}){project} starts the registry's {n} allowlistable server{}",
                    ShownPath(Path::new(&f.path)),
                    ops::check::client_name(f.client),
                    if n == 1 { "" } else { "s" }
                );
            }
        }
        CheckFormat::Json => out!("{}", report::json(&[])),
        CheckFormat::Github => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Warns about `check --against` flags that do not apply to `path`, read as `client`'s file:
/// `--project` for a client whose files have no per-project view, `--codex-profile` for one
/// with no profiles or naming a profile file that does not exist.
pub(crate) fn warn_ignored_against_flags(
    path: &Path,
    client: Option<Client>,
    opts: &AgainstOptions,
) {
    let shown = ShownPath(path);
    // The clients a flag applies to, by their formats: "Claude Code", "Codex CLI".
    let taking = |applies: fn(&registration::RegistrationFormat) -> bool| {
        let names: Vec<&str> = Client::ALL
            .iter()
            .filter(|c| applies(c.registration()))
            .map(|c| c.display_name())
            .collect();
        names.join(" and ")
    };
    let Some(client) = client else { return };
    let format = client.registration();
    if opts.project.is_some() && !format.takes_project {
        errln!(
            "warning: --project applies to {} files only; ignored for {shown} ({})",
            taking(|f| f.takes_project),
            client.display_name()
        );
    }
    let Some(name) = &opts.codex_profile else {
        return;
    };
    match format.profile_file {
        None => errln!(
            "warning: --codex-profile applies to {} files only; ignored for {shown} ({})",
            taking(|f| f.profile_file.is_some()),
            client.display_name()
        ),
        Some(profile_file) => {
            let file = profile_file(path, name);
            if !file.exists() {
                errln!(
                    "warning: --codex-profile {}: there is no {}, so `{} --profile {}` runs \
                     {shown} alone (checked as such)",
                    printable(name),
                    ShownPath(&file),
                    client.spec().binary,
                    printable(name)
                );
            }
        }
    }
}

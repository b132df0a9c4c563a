//! `kcap-mcp-registry doctor --project DIR`: prints what
//! `kcap_mcp_registry::ops::doctor::project` finds in a repository's own MCP files.

use std::path::Path;
use std::process::ExitCode;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::ops::doctor::project::{self, ProjectInput};
use kcap_mcp_registry::ops::doctor::{FileRead, project_output};
use kcap_mcp_registry::report;
use kcap_mcp_registry::text::ShownPath;

use super::DoctorArgs;
use crate::commands::check::CheckFormat;
use crate::commands::{CliError, stderr_color};
use crate::write_stdout;

/// Reads the project files of the clients `args.client` selects (all without it) in
/// `dir` and prints, per server, whether the client's launch plan neutralizes it. Exit 0
/// when every server a client would run is neutralized, 1 with a finding, 2 when `dir` or a
/// file cannot be read.
pub(crate) fn project(args: &DoctorArgs, dir: &Path) -> Result<ExitCode, CliError> {
    let not_a_dir = |why: String| {
        CliError::usage(format!(
            "--project {}: {why}; give the directory of the repository a reviewer would be \
             launched in",
            ShownPath(dir)
        ))
    };
    let worktree = std::fs::canonicalize(dir).map_err(|e| not_a_dir(e.to_string()))?;
    if !worktree.is_dir() {
        return Err(not_a_dir("it is not a directory".into()));
    }
    let worktree = worktree
        .to_str()
        .ok_or_else(|| not_a_dir("its absolute path is not UTF-8".into()))?;
    let clients: Vec<Client> = if args.client.is_empty() {
        Client::ALL.to_vec()
    } else {
        args.client.clone()
    };
    let report = project::scan(&ProjectInput {
        dir,
        worktree,
        clients: &clients,
        read: &FileRead::read,
        plan: &|client| project::launch_plan(client, worktree, &args.kcap_bin),
        env: &|name| std::env::var(name).ok(),
    });
    match args.format {
        CheckFormat::Human => {
            write_stdout(&project_output::human(&report));
            let findings = project_output::findings(&report);
            if !findings.is_empty() {
                err!(
                    "{}",
                    report::human(&findings, "doctor finding", stderr_color())
                );
            }
        }
        CheckFormat::Json => write_stdout(&project_output::json(&report)),
        CheckFormat::Github => write_stdout(&project_output::github(&report)),
    }
    if report.has_unreadable() {
        return Err(CliError::usage(
            "a project file could not be read (doctor-unreadable)",
        ));
    }
    if report.has_findings() {
        Err(CliError::Found(None))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}

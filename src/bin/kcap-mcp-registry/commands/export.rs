//! `export <what>`: a client's registration file (one subcommand per client, from its
//! room's [`RegistrationFormat`](kcap_mcp_registry::clients::registration::RegistrationFormat) and
//! [`CliSpec`](kcap_mcp_registry::clients::spec::CliSpec)), the flow-starting servers'
//! deny-list, or the registry file's JSON Schema.

use std::process::ExitCode;

use clap::{Arg, ArgMatches, Args, FromArgMatches, Subcommand};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::registration::RegistrationOptions;
use kcap_mcp_registry::ops::export::{self};

use super::{
    CliError, RegistrationArgs, RegistrySource, absolute_path, check_kcap_values, load_flag,
};

/// What `export` writes.
pub(crate) enum ExportWhat {
    /// A client's registration file.
    Client {
        /// The client.
        client: Client,
        /// The registry, the kcap binary and the server URL.
        common: RegistrationArgs,
        /// `--project-dir` (clients whose entries take the project directory).
        project_dir: Option<String>,
    },
    /// The files that are not a client's.
    Other(ExportOther),
}

#[derive(Subcommand)]
pub(crate) enum ExportOther {
    /// JSON array of the ids of flow-starting servers, for the kcap server's deny-list.
    #[command(after_help = "\
Example:
  kcap-mcp-registry export denylist > flow-mcp-servers.json")]
    Denylist(RegistrySource),
    /// JSON Schema (draft 2020-12) of one registry file, for editors.
    #[command(after_help = "\
Example:
  kcap-mcp-registry export json-schema > registry.schema.json")]
    JsonSchema,
}

/// `--project-dir`'s argument id.
const PROJECT_DIR: &str = "project_dir";

/// `export <client>`.
fn client_command(client: Client) -> clap::Command {
    let spec = client.spec();
    let mut cmd = RegistrationArgs::augment_args(
        clap::Command::new(spec.name)
            .about(spec.cli.export_about)
            .aliases(spec.cli.export_aliases.iter().copied()),
    );
    if let Some(help) = spec.cli.export_after_help {
        cmd = cmd.after_help(help);
    }
    if spec.registration.writes_project_dir {
        cmd = cmd.arg(
            Arg::new(PROJECT_DIR)
                .long("project-dir")
                .value_name("DIR")
                .value_parser(absolute_path)
                .help("Absolute project directory, written as `cwd` of servers that need it"),
        );
    }
    cmd
}

/// The client `name` (or one of its `export` aliases) names.
fn client_named(name: &str) -> Option<Client> {
    Client::ALL
        .into_iter()
        .find(|c| c.name() == name || c.spec().cli.export_aliases.contains(&name))
}

impl FromArgMatches for ExportWhat {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        match matches.subcommand() {
            Some((name, sub)) if client_named(name).is_some() => {
                let client = client_named(name).expect("checked by the guard");
                let project_dir = if client.registration().writes_project_dir {
                    sub.get_one::<String>(PROJECT_DIR).cloned()
                } else {
                    None
                };
                Ok(ExportWhat::Client {
                    client,
                    common: RegistrationArgs::from_arg_matches(sub)?,
                    project_dir,
                })
            }
            _ => Ok(ExportWhat::Other(ExportOther::from_arg_matches(matches)?)),
        }
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Subcommand for ExportWhat {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        let cmd = Client::ALL
            .into_iter()
            .fold(cmd, |cmd, c| cmd.subcommand(client_command(c)));
        ExportOther::augment_subcommands(cmd)
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        client_named(name).is_some() || ExportOther::has_subcommand(name)
    }
}

/// `export <what>`: prints the file.
pub(crate) fn export(what: ExportWhat) -> Result<ExitCode, CliError> {
    let text = match what {
        ExportWhat::Client {
            client,
            common,
            project_dir,
        } => {
            check_kcap_values(&common.kcap_bin, common.server_url.as_deref())?;
            let entries = load_flag(common.source.registry.as_deref())?;
            let opts = RegistrationOptions {
                command: common.kcap_bin,
                server_url: common.server_url,
                project_dir,
            };
            (client.registration().export)(&entries, &opts).map_err(CliError::usage)?
        }
        ExportWhat::Other(ExportOther::Denylist(source)) => {
            export::denylist(&load_flag(source.registry.as_deref())?)
        }
        ExportWhat::Other(ExportOther::JsonSchema) => export::json_schema(),
    };
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

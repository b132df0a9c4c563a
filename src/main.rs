//! `kcap-mcp-registry`: check registry files and inspect the compiled-in registry.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kcap_mcp_registry::{CheckError, diagnostic};

#[derive(Parser)]
#[command(version, about = "Check and inspect the kcap MCP server registry")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a registry directory with the rules build.rs applies.
    Check {
        /// The registry directory.
        #[arg(default_value = "registry")]
        dir: PathBuf,
    },
    /// Print the compiled-in registry.
    List,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { dir } => match kcap_mcp_registry::validate_dir(&dir) {
            Ok(entries) => {
                println!(
                    "ok: {} registry entries in {}",
                    entries.len(),
                    dir.display()
                );
                ExitCode::SUCCESS
            }
            Err(CheckError::Invalid(diags)) => {
                eprint!("{}", diagnostic::render_all(&diags, false));
                ExitCode::from(1)
            }
            Err(CheckError::Load(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::List => {
            for s in kcap_mcp_registry::servers() {
                println!("{}\t{}", s.id, s.args.join(" "));
            }
            ExitCode::SUCCESS
        }
    }
}

//! `kcap-registry-check`: the registry checker alone, the main job of this repository
//! (`cargo run --release -p kcap-registry-check`).
//!
//! It runs the registry rules `build.rs` and `kcap-mcp-registry check` run (the same
//! source files, compiled here with `#[path]`) on a registry directory read at run time,
//! and reports in the same three formats. It does not compile the registry in, so an edit
//! to `registry/` needs no rebuild, and a broken registry gets this report rather than a
//! failed build. Exit codes: 0 clean, 1 rule violations, 2 the directory cannot be read.

// Issue 16: functions stay short, or say why in an `#[allow(…, reason)]`.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

#[path = "../../src/model.rs"]
#[allow(dead_code)]
mod model;
#[path = "../../src/report.rs"]
#[allow(dead_code)]
mod report;
#[path = "../../src/schema/mod.rs"]
#[allow(dead_code, unused_imports)]
mod schema;
#[path = "../../src/text.rs"]
#[allow(dead_code)]
mod text;

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use report::Format;
// `report` names the diagnostics module at the crate root (`crate::diagnostic`), as in the library.
use schema::{CheckError, diagnostic};
use text::ShownPath;

/// Check the kcap MCP server registry: every registry rule, as the build applies them.
#[derive(Parser)]
#[command(
    version,
    after_help = "Exit codes: 0 clean, 1 rule violations, 2 unusable input."
)]
struct Cli {
    /// The registry directory, or one file of it (checked with its directory's cross-file
    /// rules) [default: `registry` here or in the nearest parent].
    #[arg(value_name = "DIR|FILE")]
    dir: Option<PathBuf>,
    /// Output format: human (rustc style, on stderr), json or github (on stdout).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let dir = match cli.dir {
        Some(dir) => dir,
        None => {
            let cwd = match std::env::current_dir() {
                Ok(cwd) => cwd,
                Err(e) => return usage(&format!("cannot read the current directory: {e}")),
            };
            match schema::find_registry_dir(&cwd) {
                Some(dir) => dir,
                None => {
                    return usage(&format!(
                        "no `registry` directory in {} or any parent directory; give the \
                         registry directory: `kcap-registry-check DIR`",
                        ShownPath(&cwd)
                    ));
                }
            }
        }
    };
    match schema::validate_path(&dir) {
        Ok(entries) => {
            let shown = ShownPath(&dir).to_string();
            match cli.format {
                Format::Human => {
                    print(&format!("{}\n", report::ok_line(entries.len(), &shown)), "")
                }
                Format::Json => print(&report::json(&[]), ""),
                Format::Github => {}
            }
            ExitCode::SUCCESS
        }
        Err(CheckError::Invalid(diags)) => {
            let color = report::color_enabled(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            let out = report::violations(&diags, cli.format, color);
            print(&out.stdout, &out.stderr);
            ExitCode::from(1)
        }
        Err(e) => usage(&text::error_chain(&e)),
    }
}

/// Writes to stdout and stderr, ignoring a closed pipe (the checker never panics on one).
fn print(stdout: &str, stderr: &str) {
    let _ = std::io::stdout().lock().write_all(stdout.as_bytes());
    let _ = std::io::stderr().lock().write_all(stderr.as_bytes());
}

fn usage(message: &str) -> ExitCode {
    print("", &format!("error: {message}\n"));
    ExitCode::from(2)
}

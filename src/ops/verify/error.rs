//! What keeps `verify` from starting the client.

use std::fmt;
use std::path::PathBuf;

use crate::clients::{Client, LaunchError};
use crate::launch::ExecError;

/// What kept `verify` from running the client (the CLI exits 2). Each names the step.
#[derive(Debug)]
#[non_exhaustive]
pub enum VerifyError {
    /// A client `verify` has no hostile configuration for (Cursor, Kiro, Antigravity: not
    /// installable here, their isolation not measured on the real client).
    Unsupported {
        /// The client.
        client: Client,
    },
    /// The client binary (or the recorder's program) is missing or not executable.
    Program {
        /// The path given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// The throwaway root or a hostile file could not be made.
    Setup {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The plan could not be rendered (for example: an administrator file the client would
    /// read exists on this machine, so every launch is refused too).
    Plan(LaunchError),
    /// The executor refused the plan, could not start the client, or the ACP handshake
    /// failed.
    Launch(ExecError),
    /// The recorders' logs could not be read.
    Records {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl VerifyError {
    /// A [`VerifyError::Setup`] maker for `path`.
    pub(super) fn setup(path: PathBuf) -> impl FnOnce(std::io::Error) -> VerifyError {
        move |source| VerifyError::Setup { path, source }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Unsupported { client } => write!(
                f,
                "verify {client}: not supported: verify runs the clients whose isolation was \
                 measured on the installed client ({})",
                super::clients()
                    .map(Client::name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            VerifyError::Program { path, problem } => {
                write!(f, "check the program {}: {problem}", path.display())
            }
            VerifyError::Setup { path, .. } => write!(
                f,
                "make the throwaway root: cannot write {} (give another temporary directory \
                 with TMPDIR)",
                path.display()
            ),
            VerifyError::Plan(_) => f.write_str("render the plan"),
            VerifyError::Launch(_) => f.write_str("carry the plan out"),
            VerifyError::Records { path, .. } => {
                write!(f, "read the recorders' logs in {}", path.display())
            }
        }
    }
}

impl std::error::Error for VerifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            VerifyError::Setup { source, .. } | VerifyError::Records { source, .. } => Some(source),
            VerifyError::Plan(e) => Some(e),
            VerifyError::Launch(e) => Some(e),
            VerifyError::Unsupported { .. } | VerifyError::Program { .. } => None,
        }
    }
}

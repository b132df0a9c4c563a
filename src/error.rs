//! [`Error`]: one error type for a reviewer launch, from planning to carrying out.

use std::fmt;

use crate::clients::{LaunchError, RenderError};

/// Every way one reviewer launch can fail, from reading its launch command and planning
/// ([`LaunchRequest::plan`],
/// [`Client::plan`]) to carrying the plan out (`launch::launch`, the session's prompts and
/// stop; feature `launch`), so a daemon's launch function returns one error type with `?` (a
/// `From` impl for each).
///
/// Each variant is transparent, as [`LaunchError`]'s are: it displays as the error it holds
/// and forwards that error's [`source`](std::error::Error::source), so a chain printer shows
/// every cause once.
///
/// ```
/// # #[cfg(feature = "launch")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::path::Path;
///
/// use kcap_mcp_registry::launch::{self, Options, Reviewer};
/// use kcap_mcp_registry::{Client, Error, LaunchCommand, LaunchRequest};
///
/// fn start(json: &str, state: &Path) -> Result<Reviewer, Error> {
///     let cmd = LaunchCommand::from_json(json, None)?; // a serde_json::Error
///     let launch = LaunchRequest::new(Client::Gemini, cmd)
///         .server("http://127.0.0.1:5100", "/usr/local/bin/kcap")
///         .worktree(state.join("worktrees/review-7"))
///         .launch_dir(state.join("launches/a1"))
///         .plan()?; // a LaunchError
///     let bin = Path::new("/usr/bin/gemini");
///     Ok(launch::launch(&launch.plan, bin, &Options::default())?) // an ExecError
/// }
///
/// let state = Path::new("/nonexistent/kcap");
/// let twice = r#"{"agent_id":"a1","agent_id":"a2"}"#;
/// assert!(matches!(start(twice, state), Err(Error::Command(_))));
/// let bidi = r#"{"agent_id":"a\u202e1"}"#;
/// assert!(matches!(start(bidi, state), Err(Error::Plan(_))));
/// // Nothing of the state directory exists: refused before anything is created.
/// assert!(matches!(start(r#"{"agent_id":"a1"}"#, state), Err(Error::Launch(_))));
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "launch"))]
/// # fn main() {}
/// ```
///
/// [`LaunchRequest::plan`]: crate::LaunchRequest::plan
/// [`Client::plan`]: crate::Client::plan
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The launch command could not be read ([`LaunchCommand::from_json`] or `serde_json`:
    /// not a JSON object, a key twice, a field of the wrong type); the error names its line
    /// and column.
    ///
    /// [`LaunchCommand::from_json`]: crate::LaunchCommand::from_json
    Command(serde_json::Error),
    /// The launch could not be planned.
    Plan(LaunchError),
    /// The plan could not be carried out, or the running reviewer failed or was stopped.
    #[cfg(feature = "launch")]
    Launch(crate::launch::ExecError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Command(e) => write!(f, "cannot read the launch command: {e}"),
            Error::Plan(e) => e.fmt(f),
            #[cfg(feature = "launch")]
            Error::Launch(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Command(e) => e.source(),
            Error::Plan(e) => e.source(),
            #[cfg(feature = "launch")]
            Error::Launch(e) => e.source(),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Command(e)
    }
}

impl From<LaunchError> for Error {
    fn from(e: LaunchError) -> Self {
        Error::Plan(e)
    }
}

impl From<RenderError> for Error {
    fn from(e: RenderError) -> Self {
        Error::Plan(LaunchError::Render(e))
    }
}

#[cfg(feature = "launch")]
impl From<crate::launch::ExecError> for Error {
    fn from(e: crate::launch::ExecError) -> Self {
        Error::Launch(e)
    }
}

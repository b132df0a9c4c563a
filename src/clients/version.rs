//! The client version a launch runs on: [`ClientVersion`], and the check [`Client::plan`]
//! makes of it ([`PlanInputs::client_version`]).
//!
//! A version is *proven* when this crate's tests run the real client on it
//! ([`Client::proven_on`]); on another version the proof is `kcap-mcp-registry verify` on
//! the operator's machine, which records a pass for the binary it ran (`docs/cli-verify.md`).
//! The plan does no I/O: the caller reads the version (`<client> --version`) and looks the
//! record up, and says what it found here. Under [`Policy::Strict`] a version that is neither
//! proven nor verified is refused ([`RenderError::UnprovenVersion`]); under
//! [`Policy::Lenient`] it is a warning. No version given: not checked (a caller that did not
//! read it has nothing to check; `kcap-mcp-registry launch --strict` always reads it).
//!
//! [`PlanInputs::client_version`]: super::dispatch::PlanInputs::client_version

use std::fmt;

use super::spec::Proof;
use super::{Client, LaunchContext, RenderError};
use crate::allowlist::Policy;

/// The version of the client binary a launch starts, as the caller read it, and whether
/// `verify` passed for that binary on this machine.
///
/// ```
/// use kcap_mcp_registry::clients::Client;
/// use kcap_mcp_registry::clients::version::ClientVersion;
///
/// let version = ClientVersion::new("2.1.332 (Claude Code)");
/// assert_eq!(version.number(), Some("2.1.332"));
/// assert!(Client::Claude.is_proven(&version));
/// assert!(!Client::Claude.is_proven(&ClientVersion::new("2.1.400 (Claude Code)")));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientVersion {
    reported: String,
    verified: bool,
}

impl ClientVersion {
    /// The version `reported`: the first line of `<client> --version` (`2.1.332 (Claude
    /// Code)`, `codex-cli 0.171.0`), not verified on this machine.
    pub fn new(reported: impl Into<String>) -> ClientVersion {
        ClientVersion {
            reported: reported.into(),
            verified: false,
        }
    }

    /// This version, verified on this machine: call it only once a `verify` record of this
    /// very binary and version matched (`ops::verify::record`, feature `cli`: the binary's
    /// path and SHA-256 and this crate's version). The strict policy then accepts a version
    /// its tests do not prove.
    #[must_use]
    pub fn verified_here(mut self) -> ClientVersion {
        self.verified = true;
        self
    }

    /// The line as read.
    pub fn reported(&self) -> &str {
        &self.reported
    }

    /// The version number in it ([`version_number`]).
    pub fn number(&self) -> Option<&str> {
        version_number(&self.reported)
    }

    /// Whether `verify` passed for this binary and version on this machine.
    pub fn is_verified(&self) -> bool {
        self.verified
    }

    /// This version as an error about `client` shows it: its number ([`Display`](fmt::Display)),
    /// and the line as read, escaped and cut as the number is, when that line is more than
    /// the number and names not the client (another program's `--version`, `true (GNU
    /// coreutils) 9.1`, is not taken for the client's 9.1).
    fn shown_for(&self, client: Client) -> String {
        let line = self.reported.trim();
        let names_client = line.to_lowercase().contains(client.name());
        if self.number() == Some(line) || self.number().is_none() || names_client {
            return self.to_string();
        }
        format!("{self} (its `--version` printed `{}`)", shown(line))
    }
}

/// The most characters of a version [`ClientVersion`]'s `Display` shows; a longer one is cut,
/// with `…`.
pub const MAX_SHOWN_VERSION: usize = 80;

/// Its version number, or the line when it holds none, as a person is shown it: control and
/// invisible characters escaped ([`printable`](crate::text::printable)), cut after
/// [`MAX_SHOWN_VERSION`] characters. The line comes from the client binary or the command
/// line: it must not drive the operator's terminal, nor fill it.
impl fmt::Display for ClientVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&shown(self.number().unwrap_or(&self.reported)))
    }
}

/// `text` (a version, or a `--version` line) as a person is shown it: escaped
/// ([`printable`](crate::text::printable)), cut after [`MAX_SHOWN_VERSION`] characters with
/// `…`.
fn shown(text: &str) -> String {
    let shown = crate::text::printable(text);
    match shown.char_indices().nth(MAX_SHOWN_VERSION) {
        Some((cut, _)) => format!("{}…", &shown[..cut]),
        None => shown.into_owned(),
    }
}

/// The version number of a `--version` line: its first word (punctuation around it
/// dropped) that starts with a digit and holds a `.`: `2.1.332` of `2.1.332 (Claude Code)`,
/// `0.171.0` of `codex-cli 0.171.0`, `1.0.102` of `GitHub Copilot CLI 1.0.102.`.
pub fn version_number(line: &str) -> Option<&str> {
    line.split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric()))
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.contains('.'))
}

impl Client {
    /// Whether `version`'s number is one this crate's tests prove ([`Client::proven_on`]),
    /// exactly.
    pub fn is_proven(self, version: &ClientVersion) -> bool {
        version
            .number()
            .is_some_and(|n| self.proven_on().contains(&n))
    }

    /// The check of the client version [`Client::plan`] makes: nothing for no version, a
    /// proven one, one verified here, or a client whose room is facts only (no version of
    /// it is proven, and `verify` cannot run it: its plan says what is unverified); else a
    /// refusal under [`Policy::Strict`] and one warning under [`Policy::Lenient`].
    ///
    /// # Errors
    /// [`RenderError::UnprovenVersion`] under [`Policy::Strict`].
    pub(crate) fn check_version(
        self,
        ctx: &LaunchContext,
        version: Option<&ClientVersion>,
        policy: Policy,
    ) -> Result<Vec<String>, RenderError> {
        let Some(version) = version else {
            return Ok(Vec::new());
        };
        let real = matches!(self.spec().proof, Proof::RealClient { .. });
        if !real || version.is_verified() || self.is_proven(version) {
            return Ok(Vec::new());
        }
        let error = RenderError::UnprovenVersion {
            client: self,
            version: version.shown_for(self),
            proven: self.proven_on(),
        };
        match policy {
            Policy::Strict => Err(error),
            Policy::Lenient => Ok(vec![format!("agent {:?}: {error}", ctx.agent_id)]),
        }
    }
}

/// [`RenderError::UnprovenVersion`]'s message (the same words warn under the lenient
/// policy, where the launch goes on); nothing for another error.
pub(super) fn fmt_unproven(error: &RenderError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let RenderError::UnprovenVersion {
        client,
        version,
        proven,
    } = error
    else {
        return Ok(());
    };
    write!(
        f,
        "{} {version} is not a version this crate's tests prove ({}) and `verify` has not \
         passed for it on this machine; run `kcap-mcp-registry verify {} --client-bin <PATH>` \
         with this binary (a pass is recorded for it), or install a proven version",
        client.display_name(),
        proven.join(", "),
        client.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_shown_escaped_and_bounded() {
        assert_eq!(
            ClientVersion::new("2.1.332 (Claude Code)").to_string(),
            "2.1.332"
        );
        assert_eq!(
            ClientVersion::new("garbage\u{1b}[2J").to_string(),
            "garbage\\u{1b}[2J"
        );
        let long = ClientVersion::new("9".repeat(100_000)).to_string();
        assert_eq!(long, format!("{}…", "9".repeat(MAX_SHOWN_VERSION)));
    }

    /// Another program's `--version` is shown whole, not taken for the client's (a fresh
    /// user's `--client-bin /bin/true` read as "Claude Code 9.1"); a client's own line, or a
    /// bare number, shows the number.
    #[test]
    fn an_unproven_version_shows_the_line_when_it_is_not_the_clients() {
        let shown = |line: &str, client| ClientVersion::new(line).shown_for(client);
        assert_eq!(
            shown("true (GNU coreutils) 9.1", Client::Claude),
            "9.1 (its `--version` printed `true (GNU coreutils) 9.1`)"
        );
        assert_eq!(shown("2.1.1 (Claude Code)", Client::Claude), "2.1.1");
        assert_eq!(shown("codex-cli 0.1.0", Client::Codex), "0.1.0");
        assert_eq!(shown("0.1.0", Client::Gemini), "0.1.0");
        assert_eq!(shown("no number", Client::Gemini), "no number");
        assert_eq!(
            shown("x\u{1b}[2J 1.0", Client::Qwen),
            "1.0 (its `--version` printed `x\\u{1b}[2J 1.0`)"
        );
    }
}

//! The interactive dialogs a terminal client can stop at, as plan data ([`Dialog`]): each
//! room names its own client's, measured in that client's text; the executor knows none.

use serde::{Deserialize, Serialize};

/// An interactive dialog a terminal client can stop at, waiting for a key nobody presses:
/// `{"name": …, "texts": […]}` in [`LaunchPlan::dialogs`](super::plan::LaunchPlan::dialogs).
///
/// The executor (`launch::TerminalSession`, feature `launch`) stops the client with
/// `ExecError::Dialog` naming it when the terminal shows any one of `texts` and the client
/// writes nothing for `Options::dialog_quiet`. Texts are compared on letters and digits only,
/// case-insensitively, so that line breaks, cursor moves and colours between words do not
/// matter; the first dialog of the plan whose text shows names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dialog {
    /// Its name in the error, e.g. `Codex's "Trust this folder?" dialog`.
    pub name: String,
    /// Texts of it as the client writes them; any one identifies it.
    pub texts: Vec<String>,
}

impl Dialog {
    /// The dialogs of `table`, `(name, texts)` each, as a room writes them.
    ///
    /// ```
    /// use kcap_mcp_registry::clients::plan::Dialog;
    ///
    /// let dialogs = Dialog::all(&[("a trust dialog", &["Trust this folder?"])]);
    /// assert_eq!(dialogs[0].name, "a trust dialog");
    /// assert_eq!(dialogs[0].texts, ["Trust this folder?"]);
    /// ```
    pub fn all(table: &[(&str, &[&str])]) -> Vec<Dialog> {
        table
            .iter()
            .map(|(name, texts)| Dialog {
                name: (*name).to_owned(),
                texts: texts.iter().map(|t| (*t).to_owned()).collect(),
            })
            .collect()
    }
}

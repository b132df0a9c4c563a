//! The hostile configuration `verify gemini` surrounds a launch with (see
//! [`crate::clients::hostile`]): every file and variable of the user, the repository and the
//! daemon's environment this client reads servers or hooks from.

use serde_json::json;

use crate::clients::gemini_family::hostile::{self as family, Hostile};
use crate::clients::hostile::{Scope, Setup, VerifySpec, Writer};

/// `verify gemini`: this client's hostile configuration and how its launch is judged.
pub const VERIFY: VerifySpec = family::verify(write);

/// Gemini CLI: `~/.gemini/settings.json`, the worktree's `.gemini/settings.json`, and the
/// home and system settings `GEMINI_CLI_HOME` and `GEMINI_CLI_SYSTEM_SETTINGS_PATH` name;
/// a leaked `GEMINI_API_KEY` in the daemon's environment.
const HOSTILE: Hostile = Hostile {
    files: &[
        (Scope::User, "user", "home/.gemini/settings.json"),
        (
            Scope::Project,
            "project",
            "parent/worktree/.gemini/settings.json",
        ),
        (
            Scope::Environment,
            "gemini-cli-home",
            "extra/gemini-home/.gemini/settings.json",
        ),
        (
            Scope::Environment,
            "system-settings",
            "extra/gemini-system.json",
        ),
    ],
    leaked_key: "GEMINI_API_KEY",
    moved: &[
        ("GEMINI_CLI_HOME", "extra/gemini-home"),
        (
            "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
            "extra/gemini-system.json",
        ),
    ],
    credentials: &[
        ("GEMINI_API_KEY", "kcap-verify-dummy-key"),
        ("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9"),
    ],
};

/// [`HOSTILE`]: each settings file declares servers named like the injected ones, like a
/// guessed alias, and otherwise, a `SessionStart` hook, an allow list naming them, and
/// folder trust. The user trusts the worktree.
fn write(w: &mut Writer) -> Setup {
    let setup = family::write(w, &HOSTILE, |_, servers, names, hooks| {
        json!({
            "mcpServers": servers,
            "mcp": {"allowed": names},
            "hooks": hooks,
            "hooksConfig": {"enabled": true},
            "security": {"folderTrust": {"enabled": true}},
        })
    })?;
    w.write_json(
        "home/.gemini/trustedFolders.json",
        &json!({w.s("parent/worktree"): "TRUST_FOLDER", w.s("parent"): "TRUST_PARENT"}),
    )?;
    Ok(setup)
}

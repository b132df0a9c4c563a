//! The hostile configuration `verify qwen` surrounds a launch with (see
//! [`crate::clients::hostile`]): every file and variable of the user, the repository and the
//! daemon's environment Qwen Code reads servers or hooks from (`docs/isolation/qwen.md`).

use serde_json::json;

use crate::clients::gemini_family::hostile::{self as family, Hostile};
use crate::clients::hostile::{Scope, Setup, VerifySpec, Writer, names, stdio};

/// `verify qwen`: this client's hostile configuration and how its launch is judged.
pub const VERIFY: VerifySpec = family::verify(write);

/// Qwen Code: `~/.qwen/settings.json`, the worktree's `.qwen/settings.json`, and the
/// settings `QWEN_HOME`, `QWEN_CODE_SYSTEM_SETTINGS_PATH` and `QWEN_CODE_SYSTEM_DEFAULTS_PATH`
/// name (the administrator's `/etc/qwen-code/` files, moved); a leaked `OPENAI_API_KEY` in
/// the daemon's environment.
const HOSTILE: Hostile = Hostile {
    files: &[
        (Scope::User, "user", "home/.qwen/settings.json"),
        (
            Scope::Project,
            "project",
            "parent/worktree/.qwen/settings.json",
        ),
        (
            Scope::Environment,
            "qwen-home",
            "extra/qwen-home/settings.json",
        ),
        (
            Scope::Environment,
            "system-settings",
            "extra/qwen-system.json",
        ),
        (
            Scope::Environment,
            "system-defaults",
            "extra/qwen-system-defaults.json",
        ),
    ],
    leaked_key: "OPENAI_API_KEY",
    moved: &[
        ("QWEN_HOME", "extra/qwen-home"),
        ("QWEN_CODE_SYSTEM_SETTINGS_PATH", "extra/qwen-system.json"),
        (
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
            "extra/qwen-system-defaults.json",
        ),
    ],
    credentials: &[
        ("OPENAI_API_KEY", "kcap-verify-dummy-key"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
    ],
};

/// [`HOSTILE`], and an extension in `~/.qwen/extensions/` and the worktree's `.mcp.json`.
/// Each settings file declares servers named like the injected ones, like a guessed alias,
/// and otherwise, a `SessionStart` hook with hooks switched on, an allow list naming its
/// servers, an `mcp.excluded` matching the injected ones, and settings `env` leaking
/// `KCAP_URL`; `.env` files in the home and the worktree leak `KCAP_FLOW_CAPABILITY_URL`.
fn write(w: &mut Writer) -> Setup {
    let setup = family::write(w, &HOSTILE, |tag, servers, names, hooks| {
        json!({
            "$version": 4,
            "mcpServers": servers,
            "mcp": {"allowed": names, "excluded": ["kcap-*"]},
            "hooks": hooks,
            "disableAllHooks": false,
            "env": {"KCAP_URL": format!("http://127.0.0.1:9/{tag}-settings-env")},
        })
    })?;
    let rel = "home/.qwen/extensions/evil/qwen-extension.json";
    let servers = w.servers(
        Scope::User,
        "extension",
        rel,
        &names("extension", &[]),
        stdio,
    );
    w.write_json(
        rel,
        &json!({"name": "evil", "version": "1.0.0", "mcpServers": servers}),
    )?;
    let rel = "parent/worktree/.mcp.json";
    let servers = w.servers(
        Scope::Project,
        "mcp-json",
        rel,
        &names("mcp-json", &[]),
        stdio,
    );
    w.write_json(rel, &json!({"mcpServers": servers}))?;
    for rel in [
        "home/.qwen/.env",
        "home/.env",
        "parent/worktree/.env",
        "parent/worktree/.qwen/.env",
    ] {
        w.write(
            rel,
            format!(
                "KCAP_FLOW_CAPABILITY_URL=http://127.0.0.1:9/{}\n",
                rel.replace('/', "-")
            )
            .as_bytes(),
        )?;
    }
    Ok(setup)
}

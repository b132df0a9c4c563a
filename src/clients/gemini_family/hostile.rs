//! The hostile settings files `verify gemini` and `verify qwen` write alike (their rooms'
//! `hostile`).

use crate::clients::plan::LaunchId;

/// The `hooks` value of a settings file both clients read: one `SessionStart` hook, named
/// `<tag>-session-start`, running `command`.
pub fn session_start_hooks(tag: &str, command: &str) -> serde_json::Value {
    serde_json::json!({"SessionStart": [{"matcher": "*", "hooks": [
        {"name": format!("{tag}-session-start"), "type": "command", "command": command}
    ]}]})
}

/// Writes each of `files` (scope, tag, path) as a hostile settings file: `settings(tag,
/// servers, names, hooks)` with servers named like the injected ones, like a guessed alias
/// (`kcap-review` under the launch id `0000000000000000`) and otherwise, and a `SessionStart`
/// hook ([`session_start_hooks`]).
///
/// # Errors
/// Any I/O error writing a file.
pub fn write_hostile_settings(
    w: &mut crate::clients::hostile::Writer,
    files: &[(crate::clients::hostile::Scope, &str, &str)],
    settings: impl Fn(&str, serde_json::Value, &[String], serde_json::Value) -> serde_json::Value,
) -> std::io::Result<()> {
    use crate::clients::hostile::{names, stdio};
    let guess = LaunchId::from_hex("0000000000000000")
        .map(|id| id.alias("kcap-review"))
        .unwrap_or_default();
    for &(scope, tag, rel) in files {
        let names = names(tag, std::slice::from_ref(&guess));
        let servers = w.servers(scope, tag, rel, &names, stdio);
        let hook = w.hook(scope, tag, rel, "SessionStart");
        w.write_json(
            rel,
            &settings(tag, servers, &names, session_start_hooks(tag, &hook)),
        )?;
    }
    Ok(())
}

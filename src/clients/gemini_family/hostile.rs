//! The hostile settings files `verify gemini` and `verify qwen` write alike (their rooms'
//! `hostile`).

use crate::clients::hostile::{Scope, Setup, VerifySpec, Writer};
use crate::clients::plan::{EnvVar, LaunchId};

/// How `verify` judges a launch of either client: no credential file, the prompt over ACP
/// (not typed), no shared cache, and the servers started in the worktree (both measured).
pub const fn verify(hostile: fn(&mut Writer) -> Setup) -> VerifySpec {
    VerifySpec {
        hostile,
        credential_files: &[],
        prompt: false,
        cache: false,
        servers_run_in_worktree: true,
    }
}

/// A Gemini-family room's hostile configuration, besides what its settings files say
/// ([`write()`]).
pub struct Hostile {
    /// The settings files, as (scope, tag, path under the verify directory).
    pub files: &'static [(Scope, &'static str, &'static str)],
    /// The client's API key variable, leaked into the daemon's environment.
    pub leaked_key: &'static str,
    /// Variables in the daemon's environment that move the client's configuration, as
    /// (variable, path under the verify directory).
    pub moved: &'static [(&'static str, &'static str)],
    /// The dummy credentials the launch is handed, as (variable, value).
    pub credentials: &'static [(&'static str, &'static str)],
}

/// Writes `hostile`'s settings files ([`write_hostile_settings`] with `settings`), and
/// returns the daemon's environment (the leaked key, then the moved paths) and the launch's
/// credentials; the room writes its other files after.
///
/// # Errors
/// Any I/O error writing a file.
pub fn write(
    w: &mut Writer,
    hostile: &Hostile,
    settings: impl Fn(&str, serde_json::Value, &[String], serde_json::Value) -> serde_json::Value,
) -> Setup {
    write_hostile_settings(w, hostile.files, settings)?;
    let mut env = vec![(hostile.leaked_key.into(), "kcap-verify-leaked-key".into())];
    env.extend(
        hostile
            .moved
            .iter()
            .map(|&(var, rel)| (var.into(), w.s(rel))),
    );
    let credentials = hostile.credentials.iter().map(|&(n, v)| EnvVar::new(n, v));
    Ok((env, credentials.collect()))
}

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
fn write_hostile_settings(
    w: &mut Writer,
    files: &[(Scope, &str, &str)],
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

//! The hostile configuration `verify codex` surrounds a launch with (see
//! [`crate::clients::hostile`]): every file and variable of the user, the repository and the
//! daemon's environment this client reads servers or hooks from.

use crate::clients::hostile::{Kind, Scope, Setup, VerifySpec, Writer, names};
use crate::clients::plan::EnvVar;

/// `verify codex`: this client's hostile configuration and how its launch is judged.
pub const VERIFY: VerifySpec = VerifySpec {
    hostile: write,
    // Codex takes its key from a file only (measured on 0.169.0: with the key in its
    // environment alone it stops at its sign-in screen).
    credential_files: &[("auth.json", r#"{"OPENAI_API_KEY":"kcap-verify-dummy-key"}"#)],
    prompt: true,
    cache: false,
    servers_run_in_worktree: true,
};

/// Codex CLI: `~/.codex/config.toml` and the worktree's `.codex/config.toml` declare
/// servers; the daemon's environment names another `CODEX_HOME` with more; the user's
/// configurations trust the worktree.
fn write(w: &mut Writer) -> Setup {
    let toml = |w: &mut Writer, scope, tag: &str, rel: &str| {
        let mut text = String::new();
        for name in names(tag, &[]) {
            let args = w.args(scope, Kind::Server, tag, rel, &name);
            let quoted: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            text.push_str(&format!(
                "[mcp_servers.{}]\ncommand = {}\nargs = [{}]\n\n",
                toml_string(&name),
                toml_string(w.recorder()),
                quoted.join(", ")
            ));
        }
        text
    };
    // The user trusts the worktree (its `.codex/` then loads).
    let trust = format!(
        "[projects.{}]\ntrust_level = \"trusted\"\n",
        toml_string(&w.s("parent/worktree"))
    );
    for (scope, tag, rel) in [
        (Scope::User, "user", "home/.codex/config.toml"),
        (
            Scope::Project,
            "project",
            "parent/worktree/.codex/config.toml",
        ),
        (
            Scope::Environment,
            "codex-home",
            "extra/codex-home/config.toml",
        ),
    ] {
        let mut text = toml(w, scope, tag, rel);
        if scope != Scope::Project {
            text.push_str(&trust);
        }
        w.write(rel, text.as_bytes())?;
    }
    Ok((
        vec![
            ("CODEX_HOME".into(), w.s("extra/codex-home")),
            ("OPENAI_API_KEY".into(), "kcap-verify-leaked-key".into()),
        ],
        vec![EnvVar::new("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")],
    ))
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

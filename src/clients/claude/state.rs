//! The per-launch global config (`<CLAUDE_CONFIG_DIR>/.claude.json`) that lets an interactive
//! Claude Code reviewer start without its first-run screens.
//!
//! The plan's argv is the interactive client (a daemon runs it in a terminal). From an empty
//! `CLAUDE_CONFIG_DIR`, interactive Claude Code 2.1.197 and 2.1.328 first run their
//! onboarding (a connectivity check of `api.anthropic.com`, which exits 1 offline, then the
//! theme choice), then ask whether to use the `ANTHROPIC_API_KEY` they found, whether to
//! trust the folder, and to confirm `--permission-mode bypassPermissions`: a reviewer would
//! sit at each, waiting for a key nobody presses. The state file answers them as a user who
//! had accepted each once would have (measured on both versions, 2026-12-01; key names read
//! in each client's bundle):
//!
//! | key | screen it skips | read in the bundle as |
//! |---|---|---|
//! | `hasCompletedOnboarding: true` | connectivity check, theme choice | `if(!l.hasCompletedOnboarding…){…Onboarding…}` |
//! | `customApiKeyResponses.approved: [<key's last 20 chars>]` | "Detected a custom API key in your environment" | 2.1.197 `mU(e){return e.slice(-20)}`, 2.1.328 `IOe(e){return e.trim().slice(-20)}`, `customApiKeyResponses?.approved?.includes(…)` |
//! | `projects[<worktree>].hasTrustDialogAccepted: true` | "Quick safety check" / "Yes, I trust this folder" | `e.projects?.[r]?.hasTrustDialogAccepted`, walked from the working directory up (2.1.328: up to its git top) |
//! | `bypassPermissionsModeAccepted: true` | "Yes, I accept" (bypass-permissions confirmation) | `!Pt().bypassPermissionsModeAccepted` (2.1.197), `!ge().bypassPermissionsModeAccepted` (2.1.328) |
//!
//! A launch with an OAuth credential (`CLAUDE_CODE_OAUTH_TOKEN`, `ANTHROPIC_AUTH_TOKEN` or
//! the `.credentials.json` token) has no API key to approve: the key question is not asked,
//! and the other three entries suffice (measured).
//!
//! The trust entry is keyed by the worktree path as the plan gives it; Claude Code compares
//! it with its working directory as the system reports it (links resolved), so a daemon
//! passes the worktree's canonical path. Otherwise the executor stops the reviewer at the
//! trust dialog with an error naming it.

use serde_json::{Map, Value, json};

/// The dialogs interactive Claude Code can still stop at (2.1.197 and 2.1.328, measured: each
/// shown by an empty or partial state file), by the text of each, for
/// [`LaunchPlan::dialogs`](crate::clients::plan::LaunchPlan::dialogs): the state file answers
/// them, and a launch where it does not (a worktree path that is not the one Claude Code
/// sees, a credential it asks about) stops with an error naming the dialog instead of
/// waiting for `--timeout`.
pub const DIALOGS: &[(&str, &[&str])] = &[
    (
        "Claude Code's folder trust dialog",
        &["Quick safety check", "Yes, I trust this folder"],
    ),
    (
        "Claude Code's bypass-permissions confirmation",
        &["Yes, I accept"],
    ),
    (
        "Claude Code's theme choice (onboarding)",
        &["Choose the text style that looks best with your terminal"],
    ),
    (
        "Claude Code's login method choice",
        &["Select login method"],
    ),
    (
        "Claude Code's custom API key question",
        &["Detected a custom API key in your environment"],
    ),
];

use crate::clients::LaunchContext;

/// The state file's path relative to the per-launch directory: `.claude.json` in
/// `CLAUDE_CONFIG_DIR` (`home/.claude`).
pub const STATE_FILE: &str = "home/.claude/.claude.json";

/// The characters of an API key Claude Code records in `customApiKeyResponses.approved`.
pub const APPROVED_KEY_CHARS: usize = 20;

/// The `.claude.json` for `ctx` (keys sorted): onboarding done, bypass-permissions accepted, the API key
/// of `ctx.credentials` approved (when there is one), and the worktree (when set) trusted.
///
/// ```
/// use kcap_mcp_registry::LaunchContext;
/// use kcap_mcp_registry::clients::claude::state::state_json;
/// use kcap_mcp_registry::clients::plan::EnvVar;
///
/// let mut ctx = LaunchContext::default();
/// ctx.worktree = Some("/srv/wt".into());
/// ctx.credentials.env = vec![EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-0123456789abcdefghijKLMN")];
/// assert_eq!(state_json(&ctx), concat!(
///     r#"{"bypassPermissionsModeAccepted":true,"#,
///     r#""customApiKeyResponses":{"approved":["456789abcdefghijKLMN"],"rejected":[]},"#,
///     r#""hasCompletedOnboarding":true,"projects":{"/srv/wt":{"hasTrustDialogAccepted":true}}}"#,
/// ));
/// ```
pub fn state_json(ctx: &LaunchContext) -> String {
    let mut state = Map::new();
    state.insert("hasCompletedOnboarding".into(), Value::Bool(true));
    state.insert("bypassPermissionsModeAccepted".into(), Value::Bool(true));
    if let Some(key) = ctx
        .credentials
        .env
        .iter()
        .find(|v| v.name == "ANTHROPIC_API_KEY")
        .map(|v| v.value.as_str())
    {
        let mut approved = vec![last_chars(key)];
        // 2.1.328 trims the key first; 2.1.197 does not.
        let trimmed = last_chars(key.trim());
        if !approved.contains(&trimmed) {
            approved.push(trimmed);
        }
        state.insert(
            "customApiKeyResponses".into(),
            json!({"approved": approved, "rejected": []}),
        );
    }
    if let Some(worktree) = crate::clients::non_blank(&ctx.worktree) {
        state.insert(
            "projects".into(),
            json!({ worktree: {"hasTrustDialogAccepted": true} }),
        );
    }
    Value::Object(state).to_string()
}

/// The last [`APPROVED_KEY_CHARS`] characters of `key` (all of a shorter one).
fn last_chars(key: &str) -> String {
    let n = key.chars().count();
    key.chars()
        .skip(n.saturating_sub(APPROVED_KEY_CHARS))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::plan::EnvVar;

    #[test]
    fn only_what_the_launch_has_is_written() {
        let ctx = LaunchContext::default();
        assert_eq!(
            state_json(&ctx),
            r#"{"bypassPermissionsModeAccepted":true,"hasCompletedOnboarding":true}"#
        );
    }

    #[test]
    fn a_short_key_and_a_key_with_spaces_are_approved_as_each_version_reads_them() {
        let mut ctx = LaunchContext::default();
        ctx.credentials.env = vec![EnvVar::new("ANTHROPIC_API_KEY", "dummy")];
        let v: Value = serde_json::from_str(&state_json(&ctx)).unwrap();
        assert_eq!(v["customApiKeyResponses"]["approved"], json!(["dummy"]));
        ctx.credentials.env = vec![EnvVar::new("ANTHROPIC_API_KEY", "k-0123456789abcdefghij\n")];
        let v: Value = serde_json::from_str(&state_json(&ctx)).unwrap();
        assert_eq!(
            v["customApiKeyResponses"]["approved"],
            json!(["123456789abcdefghij\n", "k-0123456789abcdefghij"[2..]])
        );
    }
}

//! The Codex reviewer launch, isolated by construction: the per-launch client root
//! (`CODEX_HOME=<home>/`[`CODEX_HOME`], `XDG_RUNTIME_DIR=<launch dir>/`[`RUNTIME_DIR`]), the
//! `config.toml` the plan writes there ([`codex_config_toml`]: the worktree trusted, the
//! servers' `env`), the credentials Codex is handed ([`CREDENTIALS`]), the worktree files removed
//! ([`WORKTREE_CONFIG`]), the git configuration checked ([`preflight`], [`GIT_AT_START`]) and the
//! administrator files that refuse a launch ([`MANAGED_FILES`]).
//!
//! What Codex reads and how each source is closed, measured on which version and shown by which
//! test of `tests/clients/isolation_codex.rs`: `docs/isolation/codex.md`.

use crate::allowlist::Resolution;
use crate::clients::plan::{Dialog, EnvVar, LaunchPlan, PlanFile};
use crate::clients::root::{CredentialFileSpec, CredentialSpec, HOME_DIR, ManagedFile, Root};
use crate::clients::{Client, LaunchContext, RenderError, non_blank};

use super::{codex_reviewer_args, toml_basic_string};

/// `CODEX_HOME`, relative to the per-launch home.
pub const CODEX_HOME: &str = ".codex";

/// `XDG_RUNTIME_DIR`, relative to the per-launch directory: Codex's TUI connects to
/// `$XDG_RUNTIME_DIR/bus` (the session D-Bus; `/run/user/<uid>/bus` when unset) at start,
/// also with `cli_auth_credentials_store = "file"` (measured with `strace`).
pub const RUNTIME_DIR: &str = "run";

/// The provider setting Codex 0.169.0 takes only from `config.toml`: given as a credential
/// variable, it is written there as `openai_base_url` and not set in the environment
/// (measured: the variable alone sent no request to the given endpoint).
pub const BASE_URL_VAR: &str = "OPENAI_BASE_URL";

/// What the daemon may hand a Codex reviewer: the API key as `auth.json` (reduced to its
/// `OPENAI_API_KEY`, [`keep_api_key`]) and the API endpoint ([`BASE_URL_VAR`]).
///
/// Not accepted, each measured on 0.169.0: `OPENAI_API_KEY` and `CODEX_API_KEY` as
/// variables (the TUI shows its sign-in screen with either; the built-in provider ignores
/// `OPENAI_API_KEY`), ChatGPT sign-in `tokens` (with a workspace plan they make Codex fetch
/// the cloud config bundle, whose servers and hooks started in a reviewer), and
/// `CODEX_ACCESS_TOKEN` (the same sign-in, as an agent identity).
pub const CREDENTIALS: CredentialSpec = CredentialSpec {
    env: &[BASE_URL_VAR],
    files: &[CredentialFileSpec {
        name: "auth.json",
        path: ".codex/auth.json",
        keep: keep_api_key,
        kept: "its `OPENAI_API_KEY`",
    }],
};

/// How Codex CLI's model API goes through the reviewer's door: its key is only in
/// `auth.json` (`OPENAI_API_KEY`, [`CREDENTIALS`]), which behind the door holds the
/// per-launch token in that field, and Codex sends it as `authorization: Bearer` to
/// [`BASE_URL_VAR`] (written to `config.toml` as `openai_base_url`), on its WebSocket upgrade
/// and on the HTTP request it falls back to (measured on 0.169.0:
/// `isolation_codex::behind_the_door_the_key_stays_outside_and_only_the_door_is_reached`).
pub const DOOR: crate::clients::door::DoorSpec = crate::clients::door::DoorSpec {
    base_url: BASE_URL_VAR,
    keys: &[],
    key_files: &[crate::clients::door::DoorKeyFile {
        file: "auth.json",
        field: "OPENAI_API_KEY",
        header: "authorization",
        prefix: "Bearer ",
    }],
    settings: &[],
};

/// The reviewed worktree's paths Codex reads as configuration, removed before the launch:
/// `.codex` (`config.toml` with servers, hooks and env, `hooks.json`, `rules/`, `skills/`,
/// `agents/`: loaded because the plan trusts the worktree) and `.agents` (`skills/`, read
/// even in an untrusted folder, and `plugins/marketplace.json`).
pub const WORKTREE_CONFIG: [&str; 2] = [".codex", ".agents"];

/// The `-c` override that keeps the reviewed worktree's instruction files out of the model's
/// context: Codex sends the first of `AGENTS.override.md`, `AGENTS.md` (and
/// `project_doc_fallback_filenames`, empty here) of each folder from the repository root
/// down to the cwd as the user's instructions, and a pull request can add or edit them.
/// With `project_doc_max_bytes = 0` Codex reads none (`read_project_docs` returns early on
/// a zero budget, `codex-rs/core/src/project_doc.rs`, *(source)*); the files stay readable
/// to the reviewer's tools. Measured on 0.169.0 and 0.171.0 (2026-12-05): without it the
/// worktree's `AGENTS.override.md` was in the model request, with it no instruction file
/// of the worktree, its parent or a subfolder was
/// (`isolation_codex::instruction_files_do_not_reach_the_model`). A `-c` rather than a line
/// of [`codex_config_toml`]: it outranks every configuration layer Codex reads but the
/// refused administrator ones.
pub const PROJECT_DOC_OFF: &str = "project_doc_max_bytes=0";

/// Administrator files Codex 0.169.0 reads whatever `CODEX_HOME` and `HOME` say (paths
/// from its binary and `strace`; effects measured with each file in a mount namespace).
pub const MANAGED_FILES: [ManagedFile; 5] = [
    ManagedFile {
        path: "/etc/codex/config.toml",
        effect: "adds MCP servers, reconfigures ours (env_vars passed the API key to a \
                 server, startup_timeout_sec dropped the result channel), runs its hooks and \
                 notify command without trust, and trusts folders whose .codex/ then loads",
    },
    ManagedFile {
        path: "/etc/codex/managed_config.toml",
        effect: "overrides the launch's own -c settings: it added a server, disabled one of \
                 ours and added env to the result channel",
    },
    ManagedFile {
        path: "/etc/codex/requirements.toml",
        effect: "vetoes every MCP server it does not list (ours silently did not start), runs \
                 its hooks, pins features over --disable and changes the approval policy",
    },
    ManagedFile {
        path: "/etc/codex/hooks.json",
        effect: "runs its hooks in every session, without trust",
    },
    ManagedFile {
        path: "/etc/codex/agents",
        effect: "defines subagent roles whose config files layer settings, MCP servers \
                 included, over a subagent's",
    },
];

/// What Codex CLI runs of the worktree's git configuration when it starts
/// ([`crate::clients::git`]), measured through the executor, offline, in the reviewer's
/// sandbox and without it (0.169.0 and 0.171.0, 2026-12-05;
/// `git_start::codex_a_repository_filter_is_refused` and its `codex_next_…` twin): it runs
/// `git status --porcelain` in the worktree (0.171.0: `--porcelain=v2 --branch`), beside
/// `rev-parse`, `remote` and `config --get` calls, each with `-c core.hooksPath=/dev/null -c
/// core.fsmonitor=false` of its own. A clean filter of `.git/config` (or of a file it
/// includes; with the sandbox off, of a linked worktree's common `config`, which the sandbox
/// does not let git read) ran twice on 0.169.0 and four times
/// on 0.171.0 before the first turn, a `filter.<driver>.process` once and twice; so the
/// launch is refused ([`crate::clients::git::preflight`]). Nothing else of the
/// configuration ran: not `core.fsmonitor` (its own `-c`), no hook, no diff driver, pager,
/// `core.sshCommand`, `credential.helper` or `gpg.program`, nor a submodule's configuration
/// (`--ignore-submodules=dirty`).
pub static GIT_AT_START: crate::clients::git::StartFacts = crate::clients::git::StartFacts {
    client: Client::Codex,
    runs: "runs `git status --porcelain` in the worktree when it starts",
    ran: "the repository's `clean` and `process` filters (0.169.0, 0.171.0)",
};

/// Codex CLI's check before a launch: the worktree's git configuration
/// ([`crate::clients::git::preflight`] with [`GIT_AT_START`]).
///
/// # Errors
/// [`RenderError::GitConfig`].
pub fn preflight(ctx: &LaunchContext) -> Result<(), RenderError> {
    crate::clients::git::preflight(ctx, &GIT_AT_START)
}

/// Keeps only the API key of a Codex `auth.json`: `{"OPENAI_API_KEY": "<key>"}`.
///
/// # Errors
/// When the contents are not a JSON object with a non-empty string `OPENAI_API_KEY`: a
/// ChatGPT sign-in (`tokens`) is refused, since with a workspace plan it brings the
/// workspace's cloud configuration (servers and hooks) into the reviewer.
///
/// ```
/// use kcap_mcp_registry::clients::codex::keep_api_key;
///
/// let kept = keep_api_key(r#"{"OPENAI_API_KEY":"sk-1","tokens":{"id_token":"x"},"last_refresh":"t"}"#);
/// assert_eq!(kept.unwrap(), r#"{"OPENAI_API_KEY":"sk-1"}"#);
/// assert!(keep_api_key(r#"{"OPENAI_API_KEY":null,"tokens":{"id_token":"x"}}"#).is_err());
/// ```
pub fn keep_api_key(contents: &str) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(contents).map_err(|e| format!("is not JSON ({e})"))?;
    let Some(object) = value.as_object() else {
        return Err("is not a JSON object".into());
    };
    match object
        .get("OPENAI_API_KEY")
        .and_then(serde_json::Value::as_str)
    {
        Some(key) if !key.trim().is_empty() => {
            Ok(serde_json::json!({ "OPENAI_API_KEY": key }).to_string())
        }
        _ if object.contains_key("tokens") => Err("holds a ChatGPT sign-in (`tokens`) and no \
             `OPENAI_API_KEY`; a reviewer takes an API key only: a ChatGPT sign-in makes Codex \
             fetch the workspace's cloud configuration, MCP servers and hooks included"
            .into()),
        _ => Err("has no `OPENAI_API_KEY`".into()),
    }
}

/// The `config.toml` the plan writes into the per-launch `CODEX_HOME`: credentials and MCP
/// sign-ins kept in files (never the user's keyring), no update check at start, no login
/// shell for the reviewer's commands (`allow_login_shell = false`, Codex's own switch; the
/// shell snapshot at session start, which ran `/etc/profile`, is a closed feature:
/// [`CLOSED_FEATURES`](super::CLOSED_FEATURES)), no writes
/// to `/tmp` from the reviewer's commands (so `$CODEX_HOME` stays read-only to them even
/// when the launch directory is under `/tmp`), no skills in the prompt (Codex lists the
/// skills of every `.agents/skills` from the worktree up to the repository root, trusted or
/// not: the ancestors' are out of the daemon's reach), the API endpoint when one is given,
/// the worktree trusted (see the module docs), and each injected server (`servers`, registry
/// ids) `required`, so Codex waits for it before the first turn instead of starting the turn
/// without a server slow to start (measured on 0.169.0 under load: the only model request of
/// a reviewer then lacked one server's tools).
///
/// ```
/// use kcap_mcp_registry::clients::codex::codex_config_toml;
///
/// let toml = codex_config_toml(Some("/w/x"), Some("http://127.0.0.1:9/v1"), &[]);
/// assert!(toml.contains("openai_base_url = \"http://127.0.0.1:9/v1\"\n"));
/// assert!(toml.ends_with("[projects.\"/w/x\"]\ntrust_level = \"trusted\"\n"));
/// ```
pub fn codex_config_toml(
    worktree: Option<&str>,
    base_url: Option<&str>,
    servers: &[&str],
) -> String {
    let mut s = String::from(
        "# One kcap reviewer launch (Codex CLI 0.169.0); written by the launch plan.\n\
         cli_auth_credentials_store = \"file\"\n\
         mcp_oauth_credentials_store = \"file\"\n\
         check_for_update_on_startup = false\n\
         allow_login_shell = false\n",
    );
    if let Some(url) = base_url {
        s.push_str("openai_base_url = ");
        s.push_str(&toml_basic_string(url));
        s.push('\n');
    }
    s.push_str("\n[sandbox_workspace_write]\nexclude_slash_tmp = true\n");
    s.push_str("\n[skills]\ninclude_instructions = false\n");
    if let Some(worktree) = worktree {
        s.push_str("\n[projects.");
        s.push_str(&toml_basic_string(worktree));
        s.push_str("]\ntrust_level = \"trusted\"\n");
    }
    for id in servers {
        // Registry ids are bare keys (rule id-format).
        s.push_str("\n[mcp_servers.");
        s.push_str(id);
        s.push_str("]\nrequired = true\n");
    }
    s
}

/// Removes the `-c mcp_servers.<id>.env={…}` overrides from `argv` and returns each server's
/// `(id, {…})`: the servers' variables hold the agent id and the capability URL, and an argv
/// is readable by every local user (`/proc/<pid>/cmdline`). Registry ids hold no `.`, so
/// the first `.env=` ends the id.
fn take_env_overrides(argv: &mut Vec<String>) -> Vec<(String, String)> {
    let mut envs = Vec::new();
    let mut i = 0;
    while i + 1 < argv.len() {
        let env = (argv[i] == "-c")
            .then(|| argv[i + 1].strip_prefix("mcp_servers."))
            .flatten()
            .and_then(|rest| rest.split_once(".env="))
            .map(|(id, table)| (id.to_owned(), table.to_owned()));
        match env {
            Some(env) => {
                envs.push(env);
                argv.drain(i..i + 2);
            }
            None => i += 1,
        }
    }
    envs
}

/// The Codex reviewer launch as a [`LaunchPlan`]: [`codex_reviewer_args`] as the argv but
/// for its servers' `env` overrides, which go into `config.toml` instead (their values are
/// secrets: no argv holds them; `-c` deep-merges onto that file, so each server gets them
/// all the same), the
/// worktree (if set) as the directory to start in, the per-launch root ([`crate::clients::root`]) with
/// `CODEX_HOME=<home>/`[`CODEX_HOME`] and `XDG_RUNTIME_DIR=<launch dir>/`[`RUNTIME_DIR`],
/// [`codex_config_toml`] and the credential files of [`CREDENTIALS`] written there,
/// [`WORKTREE_CONFIG`] to remove from the worktree, the injected servers under their
/// registry ids; no ACP session. The daemon refuses the launch first while one of
/// [`MANAGED_FILES`] exists ([`crate::clients::root::managed_preflight`]).
///
/// No inventory of the servers Codex would start on its own is taken: with this plan's
/// `CODEX_HOME` (empty but for [`codex_config_toml`]), its `HOME`, [`WORKTREE_CONFIG`]
/// removed, [`MANAGED_FILES`] refused and no ChatGPT sign-in kept, Codex 0.169.0 lists and
/// starts exactly the injected servers (measured under a hostile user, plugin, repository
/// and ancestor configuration, `tests/clients/isolation_codex.rs`), so there is nothing to disable.
///
/// Under `policy` [`Policy::Strict`](crate::Policy::Strict) the plan hides the client's
/// built-in tools with effects from its model ([`tools`](crate::clients::tools)), and
/// [`LaunchPlan::unasked`] lists the rest.
///
/// # Errors
/// As [`codex_reviewer_args`]; [`RenderError::NeedsAbsolute`] without an absolute launch
/// directory; the credential errors of [`CREDENTIALS`].
pub(crate) fn codex_plan(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    policy: crate::Policy,
) -> Result<LaunchPlan, RenderError> {
    let mut argv = codex_reviewer_args(ctx, resolution)?;
    super::tools::hide(&mut argv, policy);
    let envs = take_env_overrides(&mut argv);
    let mut plan = LaunchPlan::rooted(Client::Codex, ctx, &WORKTREE_CONFIG, argv)?;
    plan.unasked = crate::clients::tools::unasked(Client::Codex, policy)?;
    plan.note_pr_config("--");
    let base_url = plan
        .env
        .iter()
        .position(|v| v.name == BASE_URL_VAR)
        .map(|i| plan.env.remove(i).value);
    let root = Root::of(Client::Codex, ctx)?;
    plan.env.extend([
        EnvVar::new("CODEX_HOME", root.in_home(CODEX_HOME)),
        EnvVar::new("XDG_RUNTIME_DIR", format!("{}/{RUNTIME_DIR}", root.dir())),
    ]);
    plan.env.extend(crate::clients::git::override_env());
    plan.dirs
        .extend([format!("{HOME_DIR}/{CODEX_HOME}"), RUNTIME_DIR.to_owned()]);
    plan.servers = crate::clients::wire_servers(ctx, resolution);
    let ids: Vec<&str> = plan.servers.iter().map(|s| s.id.as_str()).collect();
    let mut config = codex_config_toml(non_blank(&ctx.worktree), base_url.as_deref(), &ids);
    for (id, table) in &envs {
        let head = format!("[mcp_servers.{id}]\nrequired = true\n");
        config = config.replacen(&head, &format!("{head}env = {table}\n"), 1);
    }
    plan.files.insert(
        0,
        PlanFile {
            path: format!("{HOME_DIR}/{CODEX_HOME}/config.toml"),
            contents: config,
            mode: 0o600,
        },
    );
    plan.dialogs = Dialog::all(DIALOGS);
    Ok(plan)
}

/// The dialogs Codex's terminal client can stop at (0.169.0, read in its binary's text and
/// seen in the conformance and isolation runs), for
/// [`LaunchPlan::dialogs`](crate::clients::plan::LaunchPlan::dialogs): the trust entry and
/// `CODEX_HOME` of the plan keep them away, and a launch where they do not stops with an
/// error naming the dialog instead of waiting for `--timeout`.
pub const DIALOGS: &[(&str, &[&str])] = &[
    (
        "Codex's \"Trust this folder?\" dialog",
        &["Trust this folder?", "Trust and continue"],
    ),
    (
        "Codex's hooks review dialog",
        &[
            "Hooks need review",
            "review before it can run",
            "review before they can run",
            "Trust all and continue",
        ],
    ),
    (
        "Codex's sign-in screen (no credentials it accepts)",
        &["Sign in with ChatGPT"],
    ),
    (
        "Codex's \"Press Enter to continue\" prompt",
        &["Press Enter to continue"],
    ),
];

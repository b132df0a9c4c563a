//! The per-launch client root, the environment a reviewer's client starts from, the
//! credentials the daemon hands it, and the administrator files that cannot be kept out.
//!
//! Isolation by construction: a reviewer's client reads its user-level configuration only
//! from what the plan writes under the per-launch directory
//! ([`LaunchContext::launch_dir`](crate::LaunchContext::launch_dir)), and starts from an
//! empty environment plus what the plan lists:
//!
//! - [`Root`]: `HOME=<launch dir>/home`, `XDG_CONFIG_HOME`, `XDG_DATA_HOME`,
//!   `XDG_STATE_HOME` and `XDG_CACHE_HOME` under it (the XDG Base Directory defaults
//!   relative to that home), and `TMPDIR=<launch dir>/tmp`; each client's room adds the
//!   variables that move its own directories (`CODEX_HOME`, `CLAUDE_CONFIG_DIR`, …) into it.
//! - [`INHERITED_ENV`]: the only names copied from the daemon's environment
//!   ([`LaunchPlan::env_inherit`](super::plan::LaunchPlan::env_inherit)).
//! - [`Credentials`]: credentials and model-provider settings, typed per client by its
//!   [`CredentialSpec`]; a name or file the client's spec does not list is refused
//!   ([`RenderError::CredentialNotAccepted`]).
//! - [`ManagedFile`]: files an administrator controls outside any home, which the client
//!   reads whatever its environment says; [`managed_preflight`] refuses a launch while one
//!   exists ([`RenderError::Managed`]).

use std::path::{Path, PathBuf};

use super::plan::{EnvVar, LaunchPlan, PlanFile};
use super::{Client, LaunchContext, RenderError, launch_dir};

/// The names a reviewer's client takes from the daemon's environment, when set, and no
/// others: the command search path, the locale and time zone, and the terminal type (for
/// clients run in a pseudo-terminal). None of them is read as configuration by any client
/// measured here. `HOME`, the XDG directories and every client variable are set by the plan
/// instead.
pub const INHERITED_ENV: [&str; 8] = [
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TERM",
];

/// The per-launch home, relative to the per-launch directory.
pub const HOME_DIR: &str = "home";

/// The per-launch temporary directory (`TMPDIR`), relative to the per-launch directory.
pub const TMP_DIR: &str = "tmp";

/// The XDG base directories under the per-launch home, as `(variable, path relative to the
/// home)`: the XDG Base Directory Specification's defaults, so a client that reads either
/// the variable or the default finds the same (empty) directory.
pub const XDG_DIRS: [(&str, &str); 4] = [
    ("XDG_CONFIG_HOME", ".config"),
    ("XDG_DATA_HOME", ".local/share"),
    ("XDG_STATE_HOME", ".local/state"),
    ("XDG_CACHE_HOME", ".cache"),
];

/// A client's per-launch root under the launch directory `dir` (absolute, no trailing `/`).
#[derive(Clone, Copy, Debug)]
pub struct Root<'a> {
    dir: &'a str,
}

impl<'a> Root<'a> {
    /// The root of `client`'s launch `ctx`.
    ///
    /// # Errors
    /// [`RenderError::NeedsAbsolute`] when the launch directory is unset, blank or relative,
    /// or the cache directory ([`LaunchContext::cache_dir`]) is set and not absolute.
    pub fn of(client: Client, ctx: &'a LaunchContext) -> Result<Root<'a>, RenderError> {
        if super::non_blank(&ctx.cache_dir).is_some_and(|d| !d.starts_with('/')) {
            return Err(RenderError::NeedsAbsolute {
                client,
                field: "cache_dir",
            });
        }
        Ok(Root {
            dir: launch_dir(client, ctx)?,
        })
    }

    /// The per-launch directory, absolute.
    pub fn dir(&self) -> &'a str {
        self.dir
    }

    /// `<launch dir>/home`: the client's `HOME`.
    pub fn home(&self) -> String {
        format!("{}/{HOME_DIR}", self.dir)
    }

    /// `<launch dir>/home/<rel>`, absolute.
    pub fn in_home(&self, rel: &str) -> String {
        format!("{}/{HOME_DIR}/{rel}", self.dir)
    }

    /// The environment every client starts from: `HOME`, the four [`XDG_DIRS`] (all per
    /// launch: the daemon's shared cache directory, [`LaunchContext::cache_dir`], is read-only
    /// to a reviewer and holds only what a room points at it, Copilot CLI's package) and
    /// `TMPDIR`, then `GIT_CONFIG_NOSYSTEM=1`.
    pub fn env(&self) -> Vec<EnvVar> {
        let mut env = vec![EnvVar::new("HOME", self.home())];
        env.extend(
            XDG_DIRS
                .iter()
                .map(|(name, rel)| EnvVar::new(*name, self.in_home(rel))),
        );
        env.push(EnvVar::new("TMPDIR", format!("{}/{TMP_DIR}", self.dir)));
        // The system git configuration (`/etc/gitconfig`, `$(prefix)/etc/gitconfig`) is the
        // administrator's: every client measured runs git in the worktree (`git status`),
        // which would run its `core.fsmonitor` or a `filter.*.clean` (measured by the red team
        // on Claude Code 2.1.328 and Qwen Code 0.24.4, 2026-12-01). The user-level one is
        // the per-launch HOME's (none).
        env.push(EnvVar::new("GIT_CONFIG_NOSYSTEM", "1"));
        env
    }

    /// The directories every client's root has, relative to the launch directory: the home,
    /// its XDG directories and the temporary directory.
    pub fn dirs(&self) -> Vec<String> {
        let mut dirs = vec![HOME_DIR.to_owned()];
        dirs.extend(XDG_DIRS.iter().map(|(_, rel)| format!("{HOME_DIR}/{rel}")));
        dirs.push(TMP_DIR.to_owned());
        dirs
    }
}

/// Credentials and model-provider settings the daemon hands one reviewer's client
/// explicitly: never a copy of the user's configuration. Empty by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Environment variables, each named in the client's [`CredentialSpec::env`] (for
    /// example `ANTHROPIC_API_KEY`, `OPENAI_BASE_URL`).
    pub env: Vec<EnvVar>,
    /// Credential files by the name the client's [`CredentialSpec::files`] gives them.
    pub files: Vec<CredentialFile>,
}

/// One credential file's contents, by its name in the client's [`CredentialSpec`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialFile {
    /// The name, e.g. `auth.json`.
    pub name: String,
    /// The contents as the user's client stored them; the client's spec keeps only the
    /// credential fields.
    pub contents: String,
}

/// What credentials and provider settings a client accepts: the variable names, and the
/// files with where they go and which of their fields are kept.
#[derive(Clone, Copy, Debug)]
pub struct CredentialSpec {
    /// Variable names the daemon may set in the reviewer's environment.
    pub env: &'static [&'static str],
    /// Credential files.
    pub files: &'static [CredentialFileSpec],
}

impl CredentialSpec {
    /// A client that takes no credentials.
    pub const NONE: CredentialSpec = CredentialSpec {
        env: &[],
        files: &[],
    };
}

/// A credential file a client reads from its root.
#[derive(Clone, Copy, Debug)]
pub struct CredentialFileSpec {
    /// The name the daemon gives it ([`CredentialFile::name`]).
    pub name: &'static str,
    /// Where it is written, relative to the per-launch home ([`HOME_DIR`]).
    pub path: &'static str,
    /// Keeps only the credential fields of the given contents; `Err` says what is wrong.
    pub keep: fn(&str) -> Result<String, String>,
    /// What [`CredentialFileSpec::keep`] keeps, in words for a person (`its
    /// OPENAI_API_KEY`), shown where the client's credentials are listed.
    pub kept: &'static str,
}

/// Whether a refused credential was given as a variable or as a file
/// ([`RenderError::CredentialNotAccepted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialKind {
    /// An environment variable ([`Credentials::env`]).
    Variable,
    /// A credential file ([`Credentials::files`]).
    File,
}

/// What the client accepts, in one line: `the variables A and B (LaunchRequest::credential_env;
/// --credential NAME) and the file auth.json, only its OPENAI_API_KEY kept
/// (LaunchRequest::credential_file; --credential-file NAME=PATH)`, or `none`.
///
/// ```
/// use kcap_mcp_registry::Client;
///
/// assert_eq!(
///     Client::Codex.spec().credentials.to_string(),
///     "the variable OPENAI_BASE_URL (`LaunchRequest::credential_env`; --credential NAME) and \
///      the file auth.json, only its `OPENAI_API_KEY` kept (`LaunchRequest::credential_file`; \
///      --credential-file NAME=PATH)"
/// );
/// assert_eq!(Client::Cursor.spec().credentials.to_string(), "none");
/// ```
impl std::fmt::Display for CredentialSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if !self.env.is_empty() {
            write!(
                f,
                "the variable{} {} (`LaunchRequest::credential_env`; --credential NAME)",
                plural(self.env.len()),
                self.env.join(", ")
            )?;
        }
        if !self.files.is_empty() {
            if !self.env.is_empty() {
                f.write_str(" and ")?;
            }
            write!(f, "the file{} ", plural(self.files.len()))?;
            for (i, file) in self.files.iter().enumerate() {
                let sep = if i == 0 { "" } else { "; " };
                write!(f, "{sep}{}, only {} kept", file.name, file.kept)?;
            }
            f.write_str(" (`LaunchRequest::credential_file`; --credential-file NAME=PATH)")?;
        }
        if self.env.is_empty() && self.files.is_empty() {
            f.write_str("none")?;
        }
        Ok(())
    }
}

/// The credential variables and files of `ctx` for `client` under its
/// [`ClientSpec::credentials`](super::spec::ClientSpec::credentials): the variables as
/// given, each file written 0600 under the per-launch home, reduced to its credential fields.
///
/// # Errors
/// [`RenderError::CredentialNotAccepted`] for a variable or file name the spec does not
/// list, or one given twice; [`RenderError::CredentialFile`] when a file's contents cannot
/// be reduced to its credential fields.
pub(crate) fn credentials(
    client: Client,
    ctx: &LaunchContext,
) -> Result<(Vec<EnvVar>, Vec<PlanFile>), RenderError> {
    let spec = &client.spec().credentials;
    let refuse = |name: &str, kind| RenderError::CredentialNotAccepted {
        client,
        name: name.to_owned(),
        kind,
    };
    let mut env: Vec<EnvVar> = Vec::with_capacity(ctx.credentials.env.len());
    for var in &ctx.credentials.env {
        if !spec.env.contains(&var.name.as_str()) || env.iter().any(|v| v.name == var.name) {
            return Err(refuse(&var.name, CredentialKind::Variable));
        }
        env.push(var.clone());
    }
    let mut files: Vec<PlanFile> = Vec::with_capacity(ctx.credentials.files.len());
    for file in &ctx.credentials.files {
        let Some(fs) = spec.files.iter().find(|f| f.name == file.name) else {
            return Err(refuse(&file.name, CredentialKind::File));
        };
        let path = format!("{HOME_DIR}/{}", fs.path);
        if files.iter().any(|f| f.path == path) {
            return Err(refuse(&file.name, CredentialKind::File));
        }
        let contents =
            (fs.keep)(&file.contents).map_err(|problem| RenderError::CredentialFile {
                client,
                name: file.name.clone(),
                problem,
            })?;
        files.push(PlanFile {
            path,
            contents,
            mode: 0o600,
        });
    }
    Ok((env, files))
}

/// What [`LaunchPlan::to_json_without_credentials`] shows in place of a credential's value (as the
/// `Debug` of [`DoorCredential`](super::plan::DoorCredential) does).
pub const NOT_SHOWN: &str = "(not shown)";

/// The shortest run of a credential's value that [`LaunchPlan::to_json_without_credentials`] hides
/// where it is found elsewhere in the plan, in bytes: a room may write part of a key into a
/// file (Claude Code's `.claude.json` holds the key's last 20 characters,
/// [`APPROVED_KEY_CHARS`](super::claude::state::APPROVED_KEY_CHARS)).
pub const SECRET_RUN: usize = 16;

/// A credential's value shorter than this, in bytes, is not looked for elsewhere in the plan
/// (one of [`SECRET_RUN`] or fewer is looked for whole).
pub const SHORTEST_SECRET: usize = 8;

impl LaunchPlan {
    /// This plan to show, not to carry out (`launch --dry-run` prints it), as
    /// [`to_json`](Self::to_json) writes it: [`NOT_SHOWN`] in place of the value of each credential variable of its client's
    /// [`CredentialSpec`] but those the room's door declares are not secrets (the model
    /// API's base URL, a setting such as `IS_SANDBOX`: [`DoorSpec`](super::door::DoorSpec)),
    /// and of each of its [`ClientSpec::launch_secrets`](super::spec::ClientSpec::launch_secrets)
    /// (OpenCode's server password); of the contents of each credential file, and of the value of each header the door
    /// sets; then, in every other string of the plan, of each run of [`SECRET_RUN`] bytes or
    /// more of one of those values (a shorter one whole, from [`SHORTEST_SECRET`] bytes; of a
    /// JSON credential file: of one of its strings). The model key, or behind the door the
    /// per-launch token, is in none of it. JSON, not a plan: a hidden run may be in a value
    /// that no longer reads back (a client's name, were a key to hold it), shown then with
    /// its keys sorted; otherwise in [`to_json`](Self::to_json)'s order.
    #[must_use]
    pub fn to_json_without_credentials(&self) -> String {
        let spec = self.client.spec();
        let shown = |name: &str| {
            spec.door
                .iter()
                .any(|d| d.base_url == name || d.settings.contains(&name))
        };
        let mut secrets = Vec::new();
        let mut plan = self.clone();
        for var in &mut plan.env {
            let name = var.name.as_str();
            if (spec.credentials.env.contains(&name) && !shown(name))
                || spec.launch_secrets.contains(&name)
            {
                secrets.push(std::mem::replace(&mut var.value, NOT_SHOWN.to_owned()));
            }
        }
        for file in &mut plan.files {
            let credential = |f: &CredentialFileSpec| {
                file.path
                    .strip_prefix(HOME_DIR)
                    .and_then(|p| p.strip_prefix('/'))
                    == Some(f.path)
            };
            if spec.credentials.files.iter().any(credential) {
                let contents = std::mem::replace(&mut file.contents, NOT_SHOWN.to_owned());
                // A JSON file's strings are the secrets, not its keys and punctuation.
                match serde_json::from_str::<serde_json::Value>(&contents) {
                    Ok(json) => strings(&json, &mut secrets),
                    Err(_) => secrets.push(contents),
                }
            }
        }
        let endpoints = plan.door.iter_mut().flat_map(|d| &mut d.endpoints);
        for credential in endpoints.filter_map(|e| e.credential.as_mut()) {
            secrets.push(std::mem::replace(
                &mut credential.value,
                NOT_SHOWN.to_owned(),
            ));
        }
        secrets.retain(|s| s.len() >= SHORTEST_SECRET);
        let mut json = serde_json::to_value(&plan).expect("a plan serializes");
        hide_runs(&mut json, &secrets);
        // Read back, the plan keeps its fields' order (`to_json`'s); a value that no longer
        // reads back (a client's name hidden) is shown as JSON, its keys sorted.
        match serde_json::from_value::<LaunchPlan>(json.clone()) {
            Ok(plan) => plan.to_json(),
            Err(_) => {
                let mut text = serde_json::to_string_pretty(&json).expect("JSON values serialize");
                text.push('\n');
                text
            }
        }
    }
}

/// Every string of `value`, added to `into`.
fn strings(value: &serde_json::Value, into: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => into.push(s.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, into)),
        serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, into)),
        _ => {}
    }
}

/// Replaces in every string of `value` each run of bytes made of windows of [`SECRET_RUN`]
/// bytes of one of `secrets` (of a shorter one: the whole of it) by [`NOT_SHOWN`], the run
/// widened to whole characters.
fn hide_runs(value: &mut serde_json::Value, secrets: &[String]) {
    match value {
        serde_json::Value::String(text) => {
            let bytes = text.as_bytes();
            let mut hidden = vec![false; bytes.len()];
            let windows = secrets.iter().flat_map(|s| {
                let size = s.len().min(SECRET_RUN);
                s.as_bytes().windows(size)
            });
            for window in windows {
                let size = window.len();
                let found = bytes
                    .windows(size)
                    .enumerate()
                    .filter(|(_, w)| *w == window);
                for (at, _) in found {
                    hidden[at..at + size].fill(true);
                }
            }
            if !hidden.contains(&true) {
                return;
            }
            let mut shown = String::with_capacity(text.len());
            let mut in_run = false;
            for (at, c) in text.char_indices() {
                if hidden[at..at + c.len_utf8()].contains(&true) {
                    if !in_run {
                        shown.push_str(NOT_SHOWN);
                    }
                    in_run = true;
                } else {
                    shown.push(c);
                    in_run = false;
                }
            }
            *text = shown;
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| hide_runs(v, secrets)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| hide_runs(v, secrets)),
        _ => {}
    }
}

/// A file an administrator controls outside any home, which the client reads whatever the
/// plan's environment says.
#[derive(Clone, Copy, Debug)]
pub struct ManagedFile {
    /// Its absolute path, e.g. `/etc/codex/requirements.toml`.
    pub path: &'static str,
    /// What the client does with it, e.g. `requires, forbids or adds MCP servers`.
    pub effect: &'static str,
}

/// Refuses a launch of `client` while one of its managed files exists under `system_root`
/// (`/` on a real launch; a test's own directory otherwise): such a file can veto, add or
/// reconfigure MCP servers, hooks or permissions, and no plan can keep it out.
///
/// # Errors
/// [`RenderError::Managed`] naming the first such file (in `files` order) and its effect.
pub fn managed_preflight(
    client: Client,
    files: &[ManagedFile],
    system_root: &Path,
) -> Result<(), RenderError> {
    for file in files {
        let path = system_root.join(file.path.trim_start_matches('/'));
        // `symlink_metadata`: a dangling link is a file an administrator put there too.
        if std::fs::symlink_metadata(&path).is_ok() {
            return Err(RenderError::Managed {
                client,
                file: PathBuf::from(file.path),
                effect: file.effect,
            });
        }
    }
    Ok(())
}

/// Refuses a worktree that is a directory inside another git repository: one that exists,
/// has no `.git` of its own, and has an ancestor that does. Measured by the red team
/// (2026-12-01): in such a worktree Claude Code 2.1.328 ran the other repository's
/// `core.fsmonitor` and filters, Copilot CLI 1.0.102 its `.github/hooks` (read at the git
/// root), Qwen Code 0.24.4 its filters; `GIT_CEILING_DIRECTORIES` did not stop Claude Code
/// or Copilot CLI. A worktree that is a checkout of its own (`git worktree add`, a clone) or
/// lies outside any repository passes, as does one that does not exist yet.
///
/// # Errors
/// [`RenderError::WorktreeInRepository`] naming the other repository's `.git`.
pub fn worktree_preflight(client: Client, ctx: &LaunchContext) -> Result<(), RenderError> {
    let Some(given) = super::non_blank(&ctx.worktree).map(Path::new) else {
        return Ok(());
    };
    if !given.is_absolute() || !given.is_dir() {
        return Ok(());
    }
    // Judged as the kernel resolves it: a link or a `..` into a repository is inside it.
    let Ok(worktree) = std::fs::canonicalize(given) else {
        return Ok(());
    };
    if worktree.join(".git").exists() {
        return Ok(());
    }
    match worktree
        .ancestors()
        .skip(1)
        .map(|a| a.join(".git"))
        .find(|g| g.exists())
    {
        Some(git) => Err(RenderError::WorktreeInRepository { client, git }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worktree_inside_another_repository_is_refused_naming_its_git() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let inside = repo.join("sub/worktree");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let at = |w: &Path| LaunchContext {
            worktree: Some(w.display().to_string()),
            ..LaunchContext::default()
        };
        assert_eq!(
            worktree_preflight(Client::Copilot, &at(&inside)),
            Err(RenderError::WorktreeInRepository {
                client: Client::Copilot,
                git: repo.join(".git"),
            })
        );
        // A checkout of its own (a `.git` file, as `git worktree add` writes) passes.
        std::fs::write(inside.join(".git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(worktree_preflight(Client::Copilot, &at(&inside)), Ok(()));
        // A link to a directory inside the repository is inside it too.
        std::fs::remove_file(inside.join(".git")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&inside, &link).unwrap();
        assert_eq!(
            worktree_preflight(Client::Copilot, &at(&link)),
            Err(RenderError::WorktreeInRepository {
                client: Client::Copilot,
                git: std::fs::canonicalize(&repo).unwrap().join(".git"),
            })
        );
        // So do the repository itself, a directory outside any repository, and a worktree
        // that does not exist yet.
        assert_eq!(worktree_preflight(Client::Claude, &at(&repo)), Ok(()));
        let outside = dir.path().join("plain");
        std::fs::create_dir_all(&outside).unwrap();
        assert_eq!(worktree_preflight(Client::Claude, &at(&outside)), Ok(()));
        assert_eq!(
            worktree_preflight(Client::Claude, &at(&repo.join("none"))),
            Ok(())
        );
    }

    fn ctx(dir: &str) -> LaunchContext {
        LaunchContext {
            launch_dir: Some(dir.into()),
            ..LaunchContext::default()
        }
    }

    #[test]
    fn root_env_and_dirs_are_under_the_launch_dir() {
        let c = ctx("/run/l1/");
        let root = Root::of(Client::Codex, &c).unwrap();
        let env: Vec<(String, String)> =
            root.env().into_iter().map(|v| (v.name, v.value)).collect();
        assert_eq!(
            env,
            [
                ("HOME", "/run/l1/home"),
                ("XDG_CONFIG_HOME", "/run/l1/home/.config"),
                ("XDG_DATA_HOME", "/run/l1/home/.local/share"),
                ("XDG_STATE_HOME", "/run/l1/home/.local/state"),
                ("XDG_CACHE_HOME", "/run/l1/home/.cache"),
                ("TMPDIR", "/run/l1/tmp"),
                ("GIT_CONFIG_NOSYSTEM", "1"),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
        assert_eq!(
            root.dirs(),
            [
                "home",
                "home/.config",
                "home/.local/share",
                "home/.local/state",
                "home/.cache",
                "tmp"
            ]
        );
        assert!(matches!(
            Root::of(Client::Codex, &ctx("rel")),
            Err(RenderError::NeedsAbsolute { .. })
        ));
        let mut c = ctx("/run/l1");
        c.cache_dir = Some("/var/cache/kcap".into());
        let root = Root::of(Client::Copilot, &c).unwrap();
        // The shared cache is never a client's XDG cache: a reviewer cannot write it.
        assert_eq!(
            root.env()[4],
            EnvVar::new("XDG_CACHE_HOME", "/run/l1/home/.cache")
        );
        c.cache_dir = Some("cache".into());
        assert_eq!(
            Root::of(Client::Copilot, &c).unwrap_err(),
            RenderError::NeedsAbsolute {
                client: Client::Copilot,
                field: "cache_dir"
            }
        );
    }

    /// Codex's spec: the variable `OPENAI_BASE_URL`, and `auth.json` reduced to its key.
    #[test]
    fn credentials_take_only_what_the_spec_lists() {
        let mut c = ctx("/l");
        c.credentials.env = vec![EnvVar::new("OPENAI_BASE_URL", "http://127.0.0.1:9")];
        c.credentials.files = vec![CredentialFile {
            name: "auth.json".into(),
            contents: r#"{"OPENAI_API_KEY":"k","last_refresh":"t"}"#.into(),
        }];
        let (env, files) = credentials(Client::Codex, &c).unwrap();
        assert_eq!(env, [EnvVar::new("OPENAI_BASE_URL", "http://127.0.0.1:9")]);
        assert_eq!(
            files,
            [PlanFile {
                path: "home/.codex/auth.json".into(),
                contents: r#"{"OPENAI_API_KEY":"k"}"#.into(),
                mode: 0o600
            }]
        );

        c.credentials.env.push(EnvVar::new("HOME", "/elsewhere"));
        let e = credentials(Client::Codex, &c).unwrap_err();
        assert_eq!(
            e,
            RenderError::CredentialNotAccepted {
                client: Client::Codex,
                name: "HOME".into(),
                kind: CredentialKind::Variable,
            }
        );
        c.credentials.env = vec![
            EnvVar::new("OPENAI_BASE_URL", "k"),
            EnvVar::new("OPENAI_BASE_URL", "k2"),
        ];
        assert!(credentials(Client::Codex, &c).is_err());
        c.credentials.env.clear();
        c.credentials.files.push(c.credentials.files[0].clone());
        assert_eq!(
            credentials(Client::Codex, &c).unwrap_err(),
            RenderError::CredentialNotAccepted {
                client: Client::Codex,
                name: "auth.json".into(),
                kind: CredentialKind::File,
            }
        );
        c.credentials.files.truncate(1);
        c.credentials.files[0].contents = "[]".into();
        assert_eq!(
            credentials(Client::Codex, &c).unwrap_err(),
            RenderError::CredentialFile {
                client: Client::Codex,
                name: "auth.json".into(),
                problem: "is not a JSON object".into()
            }
        );
    }

    #[test]
    fn a_managed_file_that_exists_refuses_the_launch() {
        let dir = std::env::temp_dir().join(format!("kcap-managed-{}", std::process::id()));
        let files = [ManagedFile {
            path: "/etc/x/requirements.toml",
            effect: "requires MCP servers",
        }];
        std::fs::create_dir_all(dir.join("etc/x")).unwrap();
        assert_eq!(managed_preflight(Client::Codex, &files, &dir), Ok(()));
        std::fs::write(dir.join("etc/x/requirements.toml"), "").unwrap();
        assert_eq!(
            managed_preflight(Client::Codex, &files, &dir),
            Err(RenderError::Managed {
                client: Client::Codex,
                file: "/etc/x/requirements.toml".into(),
                effect: "requires MCP servers"
            })
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

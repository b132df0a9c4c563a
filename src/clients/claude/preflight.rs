//! The preflight: which of the servers we inject would the reviewer's Claude Code refuse to
//! start, because of a setting in the configuration it reads?
//!
//! `--strict-mcp-config` keeps the user's and the repository's servers out, but it does not
//! keep their *settings* out: several settings veto a server of the inline `--mcp-config`
//! silently (no message, exit code unchanged). A reviewer without its result channel runs to
//! the end and can never report, so the launch must not happen.
//!
//! # What vetoes an inline server (measured)
//!
//! Measured on Claude Code 2.1.197 and 2.1.328 (2026-11-30), Linux, as root with
//! `IS_SANDBOX=1`, a throwaway `HOME`, a prompt and `ANTHROPIC_BASE_URL` at a dead local port,
//! the rendered argv, and a recorder as the kcap binary; each row is one run per version with
//! `kcap-flow-result` and `kcap-review` injected (`tests/clients/conformance_claude.rs` repeats
//! them). "Vetoes" means the recorder never ran for that server while the other one did.
//!
//! | setting (file → JSON path) | effect on an inline strict server |
//! |---|---|
//! | global config → `projects["<key>"].disabledMcpServers` (array of names) | **vetoes** each listed name |
//! | global config → top-level `disabledMcpServers` | none |
//! | global config → `projects["<key>"].disabledMcpjsonServers` / `enabledMcpjsonServers` | none (they gate `.mcp.json` servers only) |
//! | settings → `deniedMcpServers[i].serverName` | **vetoes** that name |
//! | settings → `deniedMcpServers[i].serverCommand` | **vetoes** a server whose `[command, ...args]` equals it |
//! | settings → `allowedMcpServers` present | **vetoes** every server it does not admit: `[]` admits none; with any `serverCommand` entry, a stdio server must match a `serverCommand` entry, else a `serverName` entry |
//! | managed settings → `allowManagedMcpServersOnly: true` | only the managed settings' `allowedMcpServers` count |
//! | `/etc/claude-code/managed-mcp.json` (any valid MCP config) | **vetoes every** inline server ("exclusive control") |
//! | `--setting-sources`, `--settings` | not passed by the renderer |
//!
//! Where Claude Code reads them (same on both versions):
//! - **global config**: `$CLAUDE_CONFIG_DIR/.config.json` or `~/.claude/.config.json` when
//!   that file exists, else `$CLAUDE_CONFIG_DIR/.claude.json`, else `$HOME/.claude.json`
//!   (`.claude-custom-oauth.json` when `CLAUDE_CODE_CUSTOM_OAUTH_URL` is set). With
//!   `CLAUDE_CONFIG_DIR` set, `$HOME/.claude.json` is not read at all (measured).
//! - **`<key>`**, the project entry: the physical path of the reviewer's working directory
//!   (a symlinked worktree is resolved: an entry under the symlink's path does not apply);
//!   inside a git checkout, the nearest ancestor holding `.git`; in a linked worktree
//!   (`git worktree add`), the **main** checkout's directory ([`project_key`]). Keys are
//!   compared byte for byte: an entry with a trailing slash does not apply (measured).
//! - **settings** (arrays from every source are merged): user
//!   `$CLAUDE_CONFIG_DIR/settings.json` (else `~/.claude/settings.json`), project
//!   `<cwd>/.claude/settings.json` and local `<cwd>/.claude/settings.local.json` (from the
//!   working directory itself, not the git root: measured), and managed
//!   `/etc/claude-code/managed-settings.json` plus `/etc/claude-code/managed-settings.d/*.json`
//!   (Linux; no environment variable moves this directory). The project and local files
//!   belong to the **reviewed repository**: a pull request can veto a reviewer's servers.
//! - Names are compared exactly: `KCAP-FLOW-RESULT` does not veto `kcap-flow-result`
//!   (measured). `serverCommand` entries have `${VAR}` and `${VAR:-default}` expanded from
//!   Claude Code's environment before the comparison.
//! - A settings entry that fails Claude Code's schema is dropped alone; a settings file that
//!   is not JSON is ignored by Claude Code. The preflight refuses both (it cannot know what
//!   was meant), naming the file.
//!
//! Not covered: remote managed settings (`remote-settings.json`, fetched for claude.ai
//! enterprise accounts only), Windows and macOS policy locations, and plugin servers (which
//! never start under `--strict-mcp-config`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::allowlist::Resolution;
use crate::clients::veto::{Veto, VetoKind};
use crate::clients::{Client, LaunchContext, RenderError};
use crate::text::printable;

/// Where Claude Code keeps its managed (policy) configuration on Linux.
pub const MANAGED_DIR: &str = "/etc/claude-code";

/// The configuration a reviewer's Claude Code reads: where to find it, and the environment
/// `serverCommand` entries are expanded from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaudeConfigSources {
    /// `HOME` of the reviewer's Claude Code.
    pub home: Option<PathBuf>,
    /// `CLAUDE_CONFIG_DIR` of the reviewer's Claude Code (empty counts as unset).
    pub config_dir: Option<PathBuf>,
    /// Whether `CLAUDE_CODE_CUSTOM_OAUTH_URL` is set (the global config is then
    /// `.claude-custom-oauth.json`).
    pub custom_oauth: bool,
    /// The managed settings directory; [`MANAGED_DIR`] in production.
    pub managed_dir: PathBuf,
    /// The reviewer's working directory (its worktree), as given.
    pub worktree: PathBuf,
    /// Claude Code's environment, for `${VAR}` in `serverCommand` entries.
    pub vars: BTreeMap<String, String>,
}

impl ClaudeConfigSources {
    /// The sources of a reviewer that inherits this process's environment (`HOME`,
    /// `CLAUDE_CONFIG_DIR`, `CLAUDE_CODE_CUSTOM_OAUTH_URL`, and every variable with a UTF-8
    /// name and value) and runs in `worktree`, with managed settings in [`MANAGED_DIR`].
    pub fn from_env(worktree: impl Into<PathBuf>) -> ClaudeConfigSources {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        ClaudeConfigSources {
            home: var("HOME").map(PathBuf::from),
            config_dir: var("CLAUDE_CONFIG_DIR").map(PathBuf::from),
            custom_oauth: var("CLAUDE_CODE_CUSTOM_OAUTH_URL").is_some(),
            managed_dir: PathBuf::from(MANAGED_DIR),
            worktree: worktree.into(),
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    /// `$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`; `None` without either.
    fn claude_dir(&self) -> Option<PathBuf> {
        match (&self.config_dir, &self.home) {
            (Some(dir), _) => Some(dir.clone()),
            (None, Some(home)) => Some(home.join(".claude")),
            (None, None) => None,
        }
    }

    /// The global config file Claude Code reads (see the module docs); `None` without
    /// `HOME` and `CLAUDE_CONFIG_DIR`.
    pub fn global_config(&self) -> Option<PathBuf> {
        let legacy = self.claude_dir()?.join(".config.json");
        if legacy.exists() {
            return Some(legacy);
        }
        let name = if self.custom_oauth {
            ".claude-custom-oauth.json"
        } else {
            ".claude.json"
        };
        Some(self.config_dir.as_ref().or(self.home.as_ref())?.join(name))
    }

    /// The settings files, lowest precedence first: user, project, local, managed (the
    /// managed file, then `managed-settings.d/*.json` in name order, dot files skipped).
    ///
    /// # Errors
    /// [`RenderError::UnreadableConfig`] when `managed-settings.d` exists but cannot be listed.
    pub fn settings_files(&self) -> Result<Vec<(PathBuf, SettingsSource)>, RenderError> {
        let mut files = Vec::new();
        if let Some(dir) = self.claude_dir() {
            files.push((dir.join("settings.json"), SettingsSource::User));
        }
        let project = self.worktree.join(".claude");
        files.push((project.join("settings.json"), SettingsSource::Project));
        files.push((project.join("settings.local.json"), SettingsSource::Local));
        files.push((
            self.managed_dir.join("managed-settings.json"),
            SettingsSource::Managed,
        ));
        let drop_ins = self.managed_dir.join("managed-settings.d");
        match std::fs::read_dir(&drop_ins) {
            Ok(entries) => {
                let mut names: Vec<String> = Vec::new();
                for entry in entries {
                    let entry = entry.map_err(|e| unreadable(&drop_ins, e))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.ends_with(".json") && !name.starts_with('.') {
                        names.push(name);
                    }
                }
                names.sort();
                files.extend(
                    names
                        .into_iter()
                        .map(|n| (drop_ins.join(n), SettingsSource::Managed)),
                );
            }
            Err(e) if is_absent(&e) => {}
            Err(e) => return Err(unreadable(&drop_ins, e)),
        }
        Ok(files)
    }
}

/// Which settings source a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingsSource {
    /// The user's `settings.json`.
    User,
    /// The worktree's `.claude/settings.json` (the reviewed repository's).
    Project,
    /// The worktree's `.claude/settings.local.json`.
    Local,
    /// Managed (policy) settings.
    Managed,
}

/// Every injected server (the result channel, then the resolved allowlist, as
/// [`claude_mcp_config`](super::claude_mcp_config) emits them) that a setting in `sources`
/// would veto, one [`Veto`] per (server, setting), in server order. Empty when gated.
///
/// # Errors
/// [`RenderError::UnreadableConfig`] when a file Claude Code would read exists but cannot be
/// read, is not JSON, or holds a veto setting of an unexpected shape: what Claude Code
/// would do is then unknown, so the launch fails closed.
#[allow(
    clippy::too_many_lines,
    reason = "one step per configuration source Claude Code reads, in its precedence order; a split would hide that order"
)]
pub fn claude_preflight(
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    sources: &ClaudeConfigSources,
) -> Result<Vec<Veto>, RenderError> {
    let servers: Vec<(&'static str, Vec<String>)> = ctx
        .servers(resolution)
        .map(|(s, _)| {
            let command = ctx.kcap_bin.clone().unwrap_or_default();
            let line = std::iter::once(command)
                .chain(s.args.iter().map(|a| (*a).to_string()))
                .collect();
            (s.id, line)
        })
        .collect();
    if servers.is_empty() {
        return Ok(Vec::new());
    }
    let mut vetoes = Vec::new();

    // managed-mcp.json: exclusive control.
    let managed_mcp = sources.managed_dir.join("managed-mcp.json");
    if read_json(&managed_mcp)?.is_some() {
        vetoes.extend(servers.iter().map(|(name, _)| Veto {
            client: Client::Claude,
            server: name,
            file: managed_mcp.clone(),
            json_path: String::new(),
            kind: VetoKind::ManagedMcp,
        }));
    }

    // The project entry's disabledMcpServers.
    if let Some(file) = sources.global_config()
        && let Some(config) = read_json(&file)?
    {
        let key = project_key(&sources.worktree)?;
        let entry = config
            .get("projects")
            .and_then(|p| p.get(&key))
            .and_then(|p| p.get("disabledMcpServers"));
        let path = format!("projects[{key:?}].disabledMcpServers");
        match entry {
            None | Some(Value::Null) => {}
            Some(Value::Array(names)) => {
                for (name, _) in &servers {
                    if let Some(i) = names.iter().position(|n| n.as_str() == Some(name)) {
                        vetoes.push(Veto {
                            client: Client::Claude,
                            server: name,
                            file: file.clone(),
                            json_path: format!("{path}[{i}]"),
                            kind: VetoKind::Disabled,
                        });
                    }
                }
            }
            Some(_) => return Err(bad_shape(&file, &path, "an array of server names")),
        }
    }

    // deniedMcpServers / allowedMcpServers, merged over every settings source.
    let mut denied: Vec<Rule> = Vec::new();
    let mut allowed: Option<Vec<Rule>> = None;
    let mut managed_allowed: Option<Vec<Rule>> = None;
    let mut managed_only = false;
    for (file, source) in sources.settings_files()? {
        let Some(settings) = read_json(&file)? else {
            continue;
        };
        if !settings.is_object() {
            return Err(bad_shape(&file, "", "a JSON object"));
        }
        denied.extend(rules(&file, &settings, "deniedMcpServers")?.unwrap_or_default());
        if let Some(rules) = rules(&file, &settings, "allowedMcpServers")? {
            if source == SettingsSource::Managed {
                managed_allowed
                    .get_or_insert_with(Vec::new)
                    .extend(rules.iter().cloned());
            }
            allowed.get_or_insert_with(Vec::new).extend(rules);
        }
        if source == SettingsSource::Managed
            && settings.get("allowManagedMcpServersOnly") == Some(&Value::Bool(true))
        {
            managed_only = true;
        }
    }
    let allowed = if managed_only {
        managed_allowed
    } else {
        allowed
    };
    let expand = |s: &str| expand_vars(s, &sources.vars);
    for (name, line) in &servers {
        if let Some(rule) = denied.iter().find(|r| r.matches_name(name)) {
            vetoes.push(rule.veto(name, VetoKind::DeniedByName));
        } else if let Some(rule) = denied.iter().find(|r| r.matches_command(line, &expand)) {
            vetoes.push(rule.veto(name, VetoKind::DeniedByCommand));
        } else if let Some(allowed) = &allowed {
            let by_command = allowed.iter().any(|r| r.command.is_some());
            let admitted = allowed.iter().any(|r| {
                if by_command {
                    r.matches_command(line, &expand)
                } else {
                    r.matches_name(name)
                }
            });
            if !admitted {
                let (file, json_path) = allowed
                    .first()
                    .map_or((PathBuf::new(), "allowedMcpServers".into()), |r| {
                        (r.file.clone(), "allowedMcpServers".into())
                    });
                vetoes.push(Veto {
                    client: Client::Claude,
                    server: name,
                    file,
                    json_path,
                    kind: VetoKind::NotAllowed,
                });
            }
        }
    }
    // An empty allowlist has no entry to name its file by: name the files that set it.
    if let Some(list) = &allowed
        && list.is_empty()
    {
        let files = empty_allowlist_files(sources, managed_only)?;
        for veto in vetoes.iter_mut().filter(|v| v.kind == VetoKind::NotAllowed) {
            veto.file = files.clone();
        }
    }
    let order = |v: &Veto| servers.iter().position(|(n, _)| *n == v.server);
    vetoes.sort_by_key(order);
    Ok(vetoes)
}

/// The first settings file that sets `allowedMcpServers` (to an empty array, as the caller
/// knows), for naming it in a veto.
fn empty_allowlist_files(
    sources: &ClaudeConfigSources,
    managed_only: bool,
) -> Result<PathBuf, RenderError> {
    for (file, source) in sources.settings_files()? {
        if managed_only && source != SettingsSource::Managed {
            continue;
        }
        if read_json(&file)?.is_some_and(|s| s.get("allowedMcpServers").is_some()) {
            return Ok(file);
        }
    }
    Ok(PathBuf::new())
}

/// One `allowedMcpServers` / `deniedMcpServers` entry and where it is.
#[derive(Clone, Debug)]
struct Rule {
    file: PathBuf,
    json_path: String,
    name: Option<String>,
    command: Option<Vec<String>>,
}

impl Rule {
    fn matches_name(&self, name: &str) -> bool {
        self.name.as_deref() == Some(name)
    }

    fn matches_command(&self, line: &[String], expand: &dyn Fn(&str) -> String) -> bool {
        self.command.as_ref().is_some_and(|c| {
            c.len() == line.len() && c.iter().zip(line).all(|(a, b)| expand(a) == *b)
        })
    }

    fn veto(&self, server: &'static str, kind: VetoKind) -> Veto {
        Veto {
            client: Client::Claude,
            server,
            file: self.file.clone(),
            json_path: self.json_path.clone(),
            kind,
        }
    }
}

/// The entries of `settings[key]`; `None` when absent.
fn rules(file: &Path, settings: &Value, key: &str) -> Result<Option<Vec<Rule>>, RenderError> {
    let list = match settings.get(key) {
        None => return Ok(None),
        Some(Value::Array(list)) => list,
        Some(_) => return Err(bad_shape(file, key, "an array")),
    };
    let mut rules = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let path = format!("{key}[{i}]");
        let obj = entry
            .as_object()
            .ok_or_else(|| bad_shape(file, &path, "an object"))?;
        let name = match obj.get("serverName") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad_shape(file, &format!("{path}.serverName"), "a string")),
        };
        let command = match obj.get("serverCommand") {
            None => None,
            Some(Value::Array(parts)) => Some(
                parts
                    .iter()
                    .map(|p| p.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        bad_shape(
                            file,
                            &format!("{path}.serverCommand"),
                            "an array of strings",
                        )
                    })?,
            ),
            Some(_) => {
                return Err(bad_shape(
                    file,
                    &format!("{path}.serverCommand"),
                    "an array of strings",
                ));
            }
        };
        let url = obj.get("serverUrl");
        if name.is_none() && command.is_none() && url.is_none() {
            return Err(bad_shape(
                file,
                &path,
                "an object with `serverName`, `serverCommand` or `serverUrl`",
            ));
        }
        let json_path = match (&name, &command) {
            (Some(_), _) => format!("{path}.serverName"),
            (None, Some(_)) => format!("{path}.serverCommand"),
            (None, None) => format!("{path}.serverUrl"),
        };
        rules.push(Rule {
            file: file.to_path_buf(),
            json_path,
            name,
            command,
        });
    }
    Ok(Some(rules))
}

/// The key of the reviewer's entry under `projects` in the global config (see the module
/// docs): the physical path of `worktree`; inside a git checkout, the nearest ancestor
/// holding `.git`; and when that `.git` is the file of a linked worktree (`git worktree
/// add`), the **main** checkout's directory (measured: an entry under the linked worktree's
/// own path does not apply).
///
/// The linked-worktree rule follows Claude Code 2.1.197 and 2.1.328: `.git` reads
/// `gitdir: <dir>`; `<dir>/commondir` names the common dir; `<dir>` must be directly
/// under `<common>/worktrees`, and `<dir>/gitdir` must resolve to this `.git`; the key is
/// then the common dir's parent (or the common dir itself when it is not named `.git`). If
/// any step fails, the checkout's own directory is the key.
///
/// # Errors
/// [`RenderError::UnreadableConfig`] when `worktree` cannot be resolved (it does not exist).
pub fn project_key(worktree: &Path) -> Result<String, RenderError> {
    let real = std::fs::canonicalize(worktree).map_err(|e| unreadable(worktree, e))?;
    let root = real
        .ancestors()
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .unwrap_or(&real);
    let key = main_checkout(root).unwrap_or_else(|| root.to_path_buf());
    Ok(key.to_string_lossy().into_owned())
}

/// The main checkout of the linked worktree `root` (see [`project_key`]); `None` when
/// `root` is not one.
fn main_checkout(root: &Path) -> Option<PathBuf> {
    let dot_git = std::fs::read_to_string(root.join(".git")).ok()?;
    let gitdir = dot_git.trim().strip_prefix("gitdir:")?.trim();
    let gitdir = normalize(&root.join(gitdir));
    let common = std::fs::read_to_string(gitdir.join("commondir")).ok()?;
    let common = normalize(&gitdir.join(common.trim()));
    if gitdir.parent()? != common.join("worktrees") {
        return None;
    }
    let back = std::fs::read_to_string(gitdir.join("gitdir")).ok()?;
    if std::fs::canonicalize(back.trim()).ok()? != root.join(".git") {
        return None;
    }
    if common.file_name()? == ".git" {
        Some(common.parent()?.to_path_buf())
    } else {
        Some(common)
    }
}

/// `path` with `.` and `..` components resolved lexically (Node's `path.resolve`).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Claude Code's expansion of `${NAME}` and `${NAME:-default}` (NAME: a letter or `_`, then
/// letters, digits, `_`): a set variable (even empty) gives its value, else the default,
/// else the reference stays as written.
pub fn expand_vars(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.find(":-") {
            Some(i) => (&inner[..i], Some(&inner[i + 2..])),
            None => (inner, None),
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match (valid, vars.get(name), default) {
            (true, Some(v), _) => out.push_str(v),
            (true, None, Some(d)) => out.push_str(d),
            _ => {
                // Not a reference, or an unset one without a default: kept as written. An
                // invalid name may still be followed by a valid reference, so resume after `${`.
                if valid {
                    out.push_str(&rest[start..start + 3 + end]);
                    rest = &after[end + 1..];
                } else {
                    out.push_str("${");
                    rest = after;
                }
                continue;
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The JSON in `file`; `None` when it does not exist.
fn read_json(file: &Path) -> Result<Option<Value>, RenderError> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(unreadable(file, e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| RenderError::UnreadableConfig {
            client: crate::clients::Client::Claude,
            file: file.to_path_buf(),
            problem: format!("is not JSON ({e})"),
        })
}

fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

fn unreadable(file: &Path, e: std::io::Error) -> RenderError {
    RenderError::UnreadableConfig {
        client: crate::clients::Client::Claude,
        file: file.to_path_buf(),
        problem: format!("cannot be read ({e})"),
    }
}

fn bad_shape(file: &Path, path: &str, want: &str) -> RenderError {
    RenderError::UnreadableConfig {
        client: crate::clients::Client::Claude,
        file: file.to_path_buf(),
        problem: if path.is_empty() {
            format!("is not {want}")
        } else {
            format!("has `{}` that is not {want}", printable(path))
        },
    }
}

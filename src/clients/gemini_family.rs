//! What Gemini CLI and Qwen Code (a fork of Gemini CLI) do alike, written once for both rooms:
//! the shape of the ACP launch, the walk for environment files in the worktree's parents, and
//! (with the `cli` feature) the parts of the settings loader, the registration entry and the
//! hostile settings files the two share.
//!
//! Why a file here and not in either room: in `src/clients/` each folder is one client's room
//! and each file beside them is something several rooms share (`root.rs`, `loaded.rs`,
//! `hostile.rs`; `docs/layout.md`). Code both rooms call belongs with those files, named for
//! the family, so that a change to Gemini CLI's room cannot change Qwen Code's launch unseen,
//! and a reader of either room finds it by its name. The facts stay in the rooms: each passes
//! in its own flags, file names, variable names and measured quirks, with their evidence
//! ([`crate::clients::gemini`], [`crate::clients::qwen`]). Only what both clients were
//! measured to do alike is written here; where the fork went its own way (Qwen's expansion has
//! no `${NAME:-default}` and skips its session ids; Gemini CLI expands `env` values a second
//! time and filters secrets), the room keeps its own code.

use std::path::{Component, Path, PathBuf};

use crate::allowlist::Resolution;
use crate::clients::plan::{AcpServer, EnvVar, LaunchId, LaunchPlan, PlanFile, SessionNew};
use crate::clients::root::{HOME_DIR, Root};
use crate::clients::{Client, LaunchContext, RenderError, acp_cwd, acp_servers, option_value};

/// What a Gemini-family room says about its ACP launch ([`plan`]).
pub struct AcpLaunch {
    /// The client.
    pub client: Client,
    /// The argv before `--allowed-mcp-server-names`.
    pub flags: &'static [&'static str],
    /// The worktree's files the client reads as configuration, removed before launch.
    pub worktree_config: &'static [&'static str],
    /// `Some(what it does)` when the client expands `${` in an ACP server's `env` values: a
    /// value holding `${` is then refused ([`RenderError::Expansion`]).
    pub expands_env: Option<&'static str>,
}

/// The value of `--allowed-mcp-server-names` when no server is injected: a name no server
/// has, since an empty list would mean no gate at all (both clients, measured).
pub fn deny_all_name(launch_id: &LaunchId) -> String {
    launch_id.alias("kcap-deny")
}

/// The launch both clients take: argv `<flags> --allowed-mcp-server-names <wire names,
/// comma-separated, or [`deny_all_name`]>`, then `--model M` when set; the servers in
/// `session/new` under their aliased names ([`LaunchId::wire_name`]); rooted in the
/// per-launch directory with the worktree's configuration removed. Returns the plan with the
/// root, to which the room adds its own variables and settings file.
///
/// # Errors
/// [`RenderError::Expansion`] when the client expands `env` values and one contains `${`;
/// [`RenderError::NeedsAbsolute`] without an absolute worktree or launch directory;
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`]; [`RenderError::OptionLike`] for a model starting
/// with `-`; [`RenderError::CredentialNotAccepted`] for a credential the client does not
/// accept.
pub fn plan<'a>(
    launch: &AcpLaunch,
    ctx: &'a LaunchContext,
    resolution: &Resolution<'_, String>,
    launch_id: &LaunchId,
) -> Result<(LaunchPlan, Root<'a>), RenderError> {
    let client = launch.client;
    ctx.require_launch_values()?;
    let cwd = acp_cwd(client, ctx)?;
    let model = option_value("model", &ctx.model)?;
    let (mcp_servers, servers) = acp_servers(ctx, resolution, |s| launch_id.wire_name(s));
    if let Some(expands) = launch.expands_env {
        refuse_env_expansion(client, expands, &servers, &mcp_servers)?;
    }
    let allowed = if servers.is_empty() {
        deny_all_name(launch_id)
    } else {
        let names: Vec<&str> = servers.iter().map(|s| s.wire_name.as_str()).collect();
        names.join(",")
    };
    let mut argv: Vec<String> = launch.flags.iter().map(|f| (*f).to_owned()).collect();
    argv.extend(["--allowed-mcp-server-names".into(), allowed]);
    if let Some(model) = model {
        argv.extend(["--model".into(), model.into()]);
    }
    let root = Root::of(client, ctx)?;
    let mut plan = LaunchPlan::rooted(client, ctx, launch.worktree_config, argv)?;
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers,
    });
    plan.servers = servers;
    Ok((plan, root))
}

/// [`RenderError::Expansion`] for the first server `env` value holding `${`.
fn refuse_env_expansion(
    client: Client,
    expands: &'static str,
    servers: &[crate::clients::plan::WireServer],
    mcp_servers: &[AcpServer],
) -> Result<(), RenderError> {
    for (wire, acp) in servers.iter().zip(mcp_servers) {
        if let Some(var) = acp.env.iter().find(|v| v.value.contains("${")) {
            return Err(RenderError::Expansion {
                client,
                server: wire.id.clone(),
                field: format!("env.{}", var.name),
                expands,
            });
        }
    }
    Ok(())
}

/// The two variables that move the administrator's settings files, `settings_var` and
/// `defaults_var`, pointed at `settings.json` and `system-defaults.json` in `system_dir` under
/// the per-launch directory: files the plan never creates, so the client reads no system
/// settings (an absent file is an empty layer).
pub fn system_settings(
    root: &Root<'_>,
    system_dir: &str,
    [settings_var, defaults_var]: [&str; 2],
) -> [EnvVar; 2] {
    let system = format!("{}/{system_dir}", root.dir());
    [
        EnvVar::new(settings_var, format!("{system}/settings.json")),
        EnvVar::new(defaults_var, format!("{system}/system-defaults.json")),
    ]
}

/// The user settings file the plan writes: `rel` under the per-launch home, readable by its
/// owner only.
pub fn home_settings(rel: &str, contents: String) -> PlanFile {
    PlanFile {
        path: format!("{HOME_DIR}/{rel}"),
        contents,
        mode: 0o600,
    }
}

/// Refuses a launch of `client` in `worktree` while a parent directory of it holds one of
/// `env_files` (relative names, in the order the client looks in each directory).
///
/// Both clients look for one environment file from the workspace up to `/`, stopping at the
/// first they find, and load it into their environment and every MCP server's; the plan
/// removes the worktree's own, the parents' are outside its reach. Both the path as given
/// (the ACP session's `cwd`, `.` and `..` resolved as Node's `path.resolve` does) and its
/// canonical form are walked, nearest first; the worktree itself is not checked. A dangling
/// link or a directory of that name is refused too, to keep the rule simple.
///
/// # Errors
/// [`RenderError::ParentEnvFile`] naming the nearest such file.
pub fn parent_env_file(
    client: Client,
    env_files: [&str; 2],
    worktree: &Path,
) -> Result<(), RenderError> {
    let lexical = normalize(worktree);
    let mut starts = vec![lexical.clone()];
    match std::fs::canonicalize(worktree) {
        Ok(real) if real != lexical => starts.push(real),
        _ => {}
    }
    for start in &starts {
        for dir in start.ancestors().skip(1) {
            for rel in env_files {
                let file = dir.join(rel);
                if std::fs::symlink_metadata(&file).is_ok() {
                    return Err(RenderError::ParentEnvFile { client, file });
                }
            }
        }
    }
    Ok(())
}

/// `check` on `ctx`'s worktree; nothing to check without an absolute one (the plan refuses
/// that launch anyway).
///
/// # Errors
/// As `check`.
pub fn worktree_preflight(
    ctx: &LaunchContext,
    check: fn(&Path) -> Result<(), RenderError>,
) -> Result<(), RenderError> {
    match ctx.worktree.as_deref() {
        Some(w) if w.starts_with('/') => check(Path::new(w)),
        _ => Ok(()),
    }
}

/// `path` with `.` and `..` resolved lexically, as Node's `path.resolve` does.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// A registration entry both clients read alike: the stdio server (`command`, `args`, `env`
/// when set) and `trust: true` on a read-only server, whose tool calls are then not
/// confirmed.
#[cfg(feature = "cli")]
pub fn trusted_stdio_entry(
    e: &crate::schema::RegistryEntry,
    opts: &crate::clients::registration::RegistrationOptions,
    client: Client,
) -> crate::clients::registration::Node {
    use crate::clients::registration::{Node, stdio_pairs};
    let mut pairs = stdio_pairs(e, opts, client);
    if e.read_only {
        pairs.push(("trust".into(), Node::Bool(true)));
    }
    Node::Object(pairs)
}

/// The `hooks` value of a settings file both clients read: one `SessionStart` hook, named
/// `<tag>-session-start`, running `command`.
#[cfg(feature = "cli")]
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
#[cfg(feature = "cli")]
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

/// The parts of the settings loaders (`gemini::loader`, `qwen::loader`) the two clients
/// share: Gemini CLI's `mcpServers` handling, which Qwen Code kept.
#[cfg(feature = "cli")]
pub mod loader {
    use crate::clients::loaded::{
        Kind, Loaded, Node, Remote, Skipped, Span, Started, is_url, js_strings, js_truthy,
        note_fields,
    };

    /// A reason an entry starts nothing, and where.
    pub type Flaw = (String, Span);

    /// `Object.entries(…)` of an `mcpServers` block as both clients iterate it, each with the
    /// span of its name (its key, or an array element itself): an array holds servers named
    /// `0`, `1`, …; any other non-object holds none.
    pub fn entries(servers: &Node) -> Vec<(String, &Span, &Node)> {
        match &servers.kind {
            Kind::Table(entries) => entries.iter().map(|(k, s, n)| (k.clone(), s, n)).collect(),
            Kind::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, n)| (i.to_string(), &n.span, n))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `entry` on each of `entries`, an entry it refuses [`Skipped`] with its flaw; then the
    /// verdict sorted.
    pub fn each_entry(
        entries: Vec<(String, &Span, &Node)>,
        loaded: &mut Loaded,
        mut entry: impl FnMut(&str, &Span, &Node, &mut Loaded) -> Result<(), Flaw>,
    ) {
        for (name, key, node) in entries {
            if let Err((reason, span)) = entry(&name, key, node, loaded) {
                loaded.skipped.push(Skipped {
                    name,
                    reason,
                    disabled: false,
                    key: key.clone(),
                    span,
                });
            }
        }
        loaded.sort();
    }

    /// `Err` unless the entry is an object.
    ///
    /// # Errors
    /// The entry's kind, as a flaw.
    pub fn object(node: &Node) -> Result<(), Flaw> {
        match node.entries() {
            Some(_) => Ok(()),
            None => Err((
                format!("the entry is {}, not an object", node.kind.noun()),
                node.span.clone(),
            )),
        }
    }

    /// A network server when the entry has a truthy `httpUrl`, else a truthy `url` (which
    /// wins over `command`; `httpUrl` over `url`, as in `createUrlTransport`), its text
    /// `string(value, key)`: `Err` when that is not a URL, so nothing is reached.
    pub fn network(
        name: &str,
        name_span: &Span,
        node: &Node,
        mut string: impl FnMut(&Node, &str) -> String,
    ) -> Option<Result<Remote, Flaw>> {
        let (key, u) = ["httpUrl", "url"]
            .into_iter()
            .find_map(|key| node.get(key).filter(|u| js_truthy(u)).map(|u| (key, u)))?;
        let url = string(u, key);
        Some(if is_url(&url) {
            Ok(Remote {
                name: name.into(),
                url,
                key: name_span.clone(),
                span: node.span.clone(),
            })
        } else {
            Err((
                format!("`{key}` is {url:?}, not a URL, so nothing is reached"),
                u.span.clone(),
            ))
        })
    }

    /// The entry's `command`, a truthy string, through `expand`.
    ///
    /// # Errors
    /// A flaw when there is no truthy `command` or it is not a string.
    pub fn command(node: &Node, expand: impl FnOnce(&str) -> String) -> Result<String, Flaw> {
        match node.get("command").filter(|c| js_truthy(c)) {
            None => Err((
                "it has no `command`, `url` or `httpUrl`".into(),
                node.span.clone(),
            )),
            Some(c) => match c.as_str() {
                Some(s) => Ok(expand(s)),
                None => Err((
                    format!("`command` is {}, not a string", c.kind.noun()),
                    c.span.clone(),
                )),
            },
        }
    }

    /// Finishes a started server and adds it to `loaded`: `includeTools` lists the only tools
    /// kept, `excludeTools` hides tools; `expanded` the fields the client's expansion changed;
    /// the spans of its fields.
    pub fn push_started(
        mut s: Started,
        node: &Node,
        mut expanded: Vec<String>,
        loaded: &mut Loaded,
    ) {
        s.enabled_tools = node.get("includeTools").and_then(js_strings);
        s.disabled_tools = node
            .get("excludeTools")
            .and_then(js_strings)
            .unwrap_or_default();
        expanded.dedup();
        s.expanded = expanded;
        note_fields(
            &mut s,
            node,
            &[
                "command",
                "args",
                "env",
                "cwd",
                "includeTools",
                "excludeTools",
            ],
        );
        if let Some(span) = s.fields.get("includeTools").cloned() {
            s.fields.insert("enabled_tools".into(), span);
        }
        if let Some(span) = s.fields.get("excludeTools").cloned() {
            s.fields.insert("disabled_tools".into(), span);
        }
        loaded.started.push(s);
    }

    /// A `${…}` reference after its `$`, from the text after the `{`: (name, default, length
    /// from the `{` through the `}`), or `None` when it is not one.
    pub type Braced = fn(&str) -> Option<(&str, Option<&str>, usize)>;

    /// The load-time expansion both clients run on every string of the file
    /// (`resolveEnvVarsInString`): one left-to-right pass replacing `$NAME` (`\w+`) and
    /// `${…}` (as `braced` reads it) by `lookup(NAME)`, else the default, else leaving the
    /// reference as written. Records `field` in `expanded` when `value` holds a reference.
    pub fn resolve_env_vars(
        value: &str,
        braced: Braced,
        lookup: impl Fn(&str) -> Option<String>,
        expanded: &mut Vec<String>,
        field: &str,
    ) -> String {
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        let mut any = false;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let word_len = after.find(|c: char| !word(c)).unwrap_or(after.len());
            let found = if word_len > 0 {
                Some((&after[..word_len], None, word_len))
            } else {
                after.strip_prefix('{').and_then(braced)
            };
            match found {
                Some((var, default, len)) => {
                    any = true;
                    let whole = &rest[at..at + 1 + len];
                    match (lookup(var), default) {
                        (Some(v), _) => out.push_str(&v),
                        (None, Some(d)) => out.push_str(d),
                        (None, None) => out.push_str(whole),
                    }
                    rest = &after[len..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        if any && !expanded.iter().any(|f| f == field) {
            expanded.push(field.to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 2] = [".gemini/.env", ".env"];

    #[test]
    fn parent_env_file_walks_the_parents_only_nearest_first() {
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("a/b/wt");
        std::fs::create_dir_all(tree.join(".gemini")).unwrap();
        // The worktree's own files are the plan's to remove.
        std::fs::write(tree.join(".env"), "X=1").unwrap();
        std::fs::write(tree.join(".gemini/.env"), "X=1").unwrap();
        assert_eq!(parent_env_file(Client::Gemini, NAMES, &tree), Ok(()));
        std::fs::create_dir_all(t.path().join("a/.gemini")).unwrap();
        std::fs::write(t.path().join("a/.gemini/.env"), "X=1").unwrap();
        std::fs::write(t.path().join("a/b/.env"), "X=1").unwrap();
        // The nearest first, as the clients find it.
        assert_eq!(
            parent_env_file(Client::Gemini, NAMES, &tree),
            Err(RenderError::ParentEnvFile {
                client: Client::Gemini,
                file: t.path().join("a/b/.env")
            })
        );
        std::fs::remove_file(t.path().join("a/b/.env")).unwrap();
        // `.` and `..` resolved as Node's `path.resolve` does.
        let dotted = t.path().join("a/b/../b/./wt");
        assert_eq!(
            parent_env_file(Client::Qwen, NAMES, &dotted),
            Err(RenderError::ParentEnvFile {
                client: Client::Qwen,
                file: t.path().join("a/.gemini/.env")
            })
        );
    }

    #[test]
    fn parent_env_file_walks_the_canonical_path_too() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("real/wt")).unwrap();
        std::fs::create_dir_all(t.path().join("links")).unwrap();
        std::os::unix::fs::symlink(t.path().join("real/wt"), t.path().join("links/wt")).unwrap();
        let linked = t.path().join("links/wt");
        assert_eq!(parent_env_file(Client::Gemini, NAMES, &linked), Ok(()));
        std::fs::write(t.path().join("real/.env"), "X=1").unwrap();
        assert_eq!(
            parent_env_file(Client::Gemini, NAMES, &linked),
            Err(RenderError::ParentEnvFile {
                client: Client::Gemini,
                file: t.path().join("real/.env").canonicalize().unwrap()
            })
        );
    }
}

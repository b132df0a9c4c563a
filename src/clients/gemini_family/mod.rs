//! What Gemini CLI and Qwen Code (a fork of Gemini CLI) do alike, written once for both rooms:
//! the ACP launch ([`plan`], from each room's [`AcpLaunch`]) and the walk for environment
//! files in the worktree's parents ([`parent_env_file`]); with the `cli` feature, the
//! settings loader model (`loader`, from each room's `Dialect`), the registration format and
//! its entry (`registration`, from each room's `Facts`) and the hostile configuration of
//! `verify` (`hostile`, from each room's `Hostile`).
//!
//! A module beside the rooms, as every file shared by several rooms is (`docs/layout.md`), so a
//! change to one room cannot change the other's launch unseen. Each room passes in its own facts
//! as data (flags, file names, variables, versions), or keeps the code where the fork went its
//! own way (Gemini CLI's `entry_env`, Qwen Code's `settings`); each room's `SPEC` and `CLI` stay
//! one literal in the room (`crate::clients::spec`). What each client does, on which version,
//! and the test that shows it: `docs/isolation/gemini.md` and `docs/isolation/qwen.md`.

#[cfg(feature = "cli")]
pub mod hostile;
#[cfg(feature = "cli")]
pub mod loader;
#[cfg(feature = "cli")]
pub mod registration;

use std::path::{Component, Path, PathBuf};

use crate::allowlist::Resolution;
use crate::clients::plan::{
    AcpServer, EnvVar, LaunchId, LaunchPlan, PlanFile, Sandbox, SessionNew,
};
use crate::clients::root::{HOME_DIR, Root};
use crate::clients::{Client, LaunchContext, RenderError, acp_cwd, acp_servers, option_value};

/// What a Gemini-family room says about its ACP launch ([`plan`], [`env_file_preflight`]):
/// each field one of the client's own facts, measured in its room.
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
    /// The variable that moves the client's user configuration, and where it points: the
    /// per-launch home itself (`None`) or a folder in it (`Some(rel)`).
    pub home_var: (&'static str, Option<&'static str>),
    /// The folder, under the per-launch directory, where `system_vars` point
    /// ([`system_settings`]).
    pub system_dir: &'static str,
    /// The variables that move the administrator's `settings.json` and
    /// `system-defaults.json`, in that order.
    pub system_vars: [&'static str; 2],
    /// Variables set as they are, after the system ones.
    pub fixed_env: &'static [(&'static str, &'static str)],
    /// The user settings file the plan writes, relative to the per-launch home.
    pub settings_file: &'static str,
    /// What goes into it.
    pub settings: Settings,
    /// The environment files the client looks for in each directory from the workspace up,
    /// in its order ([`parent_env_file`]).
    pub env_files: [&'static str; 2],
}

/// The contents of a Gemini-family room's user settings file ([`AcpLaunch::settings`]).
pub enum Settings {
    /// Fixed contents; the credentials stay in the environment.
    Fixed(&'static str),
    /// The credentials named in `names` move out of the environment (which every server
    /// inherits) into the file, whose contents `render` makes of them.
    Credentials {
        /// The credential variables.
        names: &'static [&'static str],
        /// The file's contents, given the credentials the launch hands over.
        render: fn(&[EnvVar]) -> String,
    },
}

/// The value of `--allowed-mcp-server-names` when no server is injected: a name no server
/// has, since an empty list would mean no gate at all (both clients, measured).
pub fn deny_all_name(launch_id: &LaunchId) -> String {
    launch_id.alias("kcap-deny")
}

/// The launch both clients take: argv `<flags> --allowed-mcp-server-names <wire names,
/// comma-separated, or [`deny_all_name`]>`, then `--model M` when set; the servers in
/// `session/new` under their aliased names ([`LaunchId::wire_name`]); rooted in the
/// per-launch directory with the worktree's configuration removed. The environment: the
/// root's, then the credentials (unless [`Settings::Credentials`] moves them into the
/// settings file), then `home_var`, the two `system_vars` ([`system_settings`]) and
/// `fixed_env`; one file, `settings_file` in the per-launch home ([`home_settings`]).
///
/// # Errors
/// [`RenderError::Expansion`] when the client expands `env` values and one contains `${`;
/// [`RenderError::NeedsAbsolute`] without an absolute worktree or launch directory;
/// [`RenderError::ParentInSandbox`] for a worktree with a parent in the sandbox
/// ([`readable_parent`]);
/// [`RenderError::BlankAgentId`], [`RenderError::BlankCapabilityUrl`],
/// [`RenderError::MissingReviewContextUrl`]; [`RenderError::OptionLike`] for a model starting
/// with `-`; [`RenderError::CredentialNotAccepted`] for a credential the client does not
/// accept.
pub(crate) fn plan(
    launch: &AcpLaunch,
    ctx: &LaunchContext,
    resolution: &Resolution<'_, String>,
    launch_id: &LaunchId,
    policy: crate::Policy,
) -> Result<LaunchPlan, RenderError> {
    let client = launch.client;
    let hidden: Vec<&str> = crate::clients::tools::hidden(client.spec(), policy).collect();
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
    plan.unasked = crate::clients::tools::unasked(client, policy)?;
    if let Some(cwd) = plan.cwd.as_deref() {
        readable_parent(client, Path::new(cwd), &plan.sandbox)?;
    }
    plan.session_new = Some(SessionNew {
        cwd: cwd.into(),
        mcp_servers,
    });
    plan.servers = servers;
    let contents = match &launch.settings {
        Settings::Fixed(contents) => (*contents).to_owned(),
        Settings::Credentials { names, render } => {
            let (credentials, env): (Vec<EnvVar>, Vec<EnvVar>) = std::mem::take(&mut plan.env)
                .into_iter()
                .partition(|v| names.contains(&v.name.as_str()));
            plan.env = env;
            render(&credentials)
        }
    };
    let (home_var, home_rel) = launch.home_var;
    plan.env.push(EnvVar::new(
        home_var,
        home_rel.map_or_else(|| root.home(), |rel| root.in_home(rel)),
    ));
    plan.env.extend(system_settings(
        &root,
        launch.system_dir,
        launch.system_vars,
    ));
    plan.env.extend(
        launch
            .fixed_env
            .iter()
            .map(|&(name, value)| EnvVar::new(name, value)),
    );
    plan.files.push(home_settings(
        launch.settings_file,
        exclude(contents, &hidden),
    ));
    Ok(plan)
}

/// `settings` (a JSON object) with `tools.exclude` set to `hidden`, the built-in tools the
/// client then does not offer its model (measured on Gemini CLI 0.61.0 and Qwen Code 0.24.4:
/// `tests/clients/unasked_tools.rs`); `settings` unchanged when `hidden` is empty.
fn exclude(settings: String, hidden: &[&str]) -> String {
    if hidden.is_empty() {
        return settings;
    }
    let mut value: serde_json::Value =
        serde_json::from_str(&settings).expect("the family's settings are JSON (a unit test)");
    value["tools"]["exclude"] = hidden.into();
    value.to_string()
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
fn system_settings(
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
fn home_settings(rel: &str, contents: String) -> PlanFile {
    PlanFile {
        path: format!("{HOME_DIR}/{rel}"),
        contents,
        mode: 0o600,
    }
}

/// [`parent_env_file`] for `launch`'s client and environment files.
///
/// # Errors
/// As [`parent_env_file`].
pub fn env_file_preflight(launch: &AcpLaunch, worktree: &Path) -> Result<(), RenderError> {
    parent_env_file(launch.client, launch.env_files, worktree)
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
    for start in &forms(worktree) {
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

/// Refuses the plan of `client` while a parent directory of its worktree lies in a path of
/// its `sandbox` ([`LaunchPlan::sandbox`]): a system directory, the launch or the cache
/// directory. [`parent_env_file`] checks before the start; what keeps a parent's
/// environment file written after that check out of the client is the sandbox, which lets
/// the client read no parent outside its paths (Gemini CLI 0.61.0 and Qwen Code 0.24.4 stat
/// the file, cannot open it, and load nothing: `tests/clients/env_race.rs`), and the same
/// file in a parent the sandbox allows reached every server there. Paths the executor adds:
/// the client's installation it refuses when it holds the worktree's parent
/// (`launch::ExecError::InstallationHolds`); `launch::Options::with_sandbox_read_exec` is the
/// daemon's to keep away from its worktrees. Both the worktree as given and its canonical form are
/// walked, nearest parent first, against each sandbox path as written and canonical.
///
/// # Errors
/// [`RenderError::ParentInSandbox`] naming the nearest such parent and its sandbox path.
pub fn readable_parent(
    client: Client,
    worktree: &Path,
    sandbox: &Sandbox,
) -> Result<(), RenderError> {
    let allowed: Vec<(PathBuf, &str)> = sandbox
        .paths()
        .flat_map(|(_, p)| forms(Path::new(p)).into_iter().map(move |f| (f, p)))
        .collect();
    for start in &forms(worktree) {
        for dir in start.ancestors().skip(1) {
            if let Some((_, path)) = allowed.iter().find(|(a, _)| dir.starts_with(a)) {
                return Err(RenderError::ParentInSandbox {
                    client,
                    dir: dir.to_owned(),
                    path: (*path).to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// `path` with `.` and `..` resolved as Node's `path.resolve` does, then its canonical form
/// when that exists and differs.
fn forms(path: &Path) -> Vec<PathBuf> {
    let lexical = normalize(path);
    let mut forms = vec![lexical.clone()];
    match std::fs::canonicalize(path) {
        Ok(real) if real != lexical => forms.push(real),
        _ => {}
    }
    forms
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
    fn a_worktree_with_a_parent_in_the_sandbox_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let at = |p: &str| root.join(p).display().to_string();
        // The plan's sandbox, with the cache directory `<root>/cache` when `cache`.
        let sandbox = |worktree: &str, cache: bool| {
            let mut sandbox = Sandbox::new(&at("launch"), Some(worktree));
            sandbox.read_exec.extend(cache.then(|| at("cache")));
            sandbox
        };
        let check = |worktree: &str, cache| {
            readable_parent(
                Client::Gemini,
                Path::new(worktree),
                &sandbox(worktree, cache),
            )
        };
        let refused = |worktree: &str, cache, dir: &str, allowed: &str| {
            assert_eq!(
                check(worktree, cache),
                Err(RenderError::ParentInSandbox {
                    client: Client::Gemini,
                    dir: PathBuf::from(dir),
                    path: allowed.to_owned(),
                }),
                "{worktree}"
            );
        };
        // Beside the launch directory, in a directory of its own: nothing to refuse.
        assert_eq!(check(&at("wt"), true), Ok(()));
        // A system directory, the nearest parent named.
        refused("/usr/src/repo/wt", false, "/usr/src/repo", "/usr");
        // The cache directory every reviewer reads, and the launch directory.
        refused(
            &at("cache/trees/wt"),
            true,
            &at("cache/trees"),
            &at("cache"),
        );
        refused(&at("launch/wt"), false, &at("launch"), &at("launch"));
        // Through a link: the canonical path is walked too.
        std::fs::create_dir_all(root.join("cache/trees/wt")).unwrap();
        std::os::unix::fs::symlink(root.join("cache/trees"), root.join("trees")).unwrap();
        refused(&at("trees/wt"), true, &at("cache/trees"), &at("cache"));
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

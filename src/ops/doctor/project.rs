//! `doctor --project DIR`: the MCP servers a repository's own files give a client started in
//! it, and whether that client's reviewer launch plan keeps them away from the reviewer.
//!
//! Which files: each client's [`RegistrationFormat::project_files`], from its room (Claude
//! Code's `.mcp.json`, Codex's `.codex/config.toml`, Gemini CLI's `.gemini/settings.json`,
//! OpenCode's `opencode.json(c)` and `.opencode/opencode.json(c)`, Copilot CLI's `.mcp.json`
//! and `.github/mcp.json`, Cursor's `.cursor/mcp.json`, Kiro's `.kiro/settings/mcp.json`,
//! Antigravity's `.agents/mcp_config.json`). What the client does with each: its loader
//! model, which gives every server with the position of its name.
//!
//! Whether the plan neutralizes a file is read from the plan itself, never from a table
//! kept here: the client's plan is rendered for a launch whose worktree is `DIR`
//! ([`launch_plan`]), and a file is neutralized when one of the plan's
//! [`LaunchPlan::worktree_remove`] paths is the file or a folder holding it (the daemon
//! removes it before the client starts). A server the client would start (or reach over the
//! network) from a file the plan leaves in place is a `doctor-project-server` finding; one
//! the plan neutralizes, or one the client does not start (off, skipped, or in a file it
//! refuses), is reported as information.
//!
//! Not looked at: parent directories (OpenCode reads `opencode.json` up to the git top
//! level; a reviewer's worktree is its checkout's top level), and what a launch refuses
//! before any plan is carried out (administrator files, Gemini CLI's parent `.env`: the
//! launch's preflight).

use std::path::{Path, PathBuf};

use super::FileRead;
use crate::clients::loaded::{Loaded, Span};
use crate::clients::plan::LaunchPlan;
use crate::clients::registration::RegistrationFormat;
use crate::clients::{Client, LaunchContext, LaunchError};
use crate::diagnostic::{Location, SourceText};
use crate::text::printable;

/// What `doctor --project` looks at.
pub struct ProjectInput<'a> {
    /// The directory as the user named it: files are shown under it (`./.mcp.json`).
    pub dir: &'a Path,
    /// The same directory, absolute: the project directory the loaders are given.
    pub worktree: &'a str,
    /// The clients to look at, in order.
    pub clients: &'a [Client],
    /// Reads one file ([`FileRead::read`] on a real run).
    pub read: &'a dyn Fn(&Path) -> FileRead,
    /// The launch plan of a client for a reviewer launched in `dir` ([`launch_plan`] on a
    /// real run).
    pub plan: &'a dyn Fn(Client) -> Result<LaunchPlan, LaunchError>,
    /// The clients' environment, for the `${VAR}` their loaders expand.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The launch plan `client` renders for a reviewer whose worktree is `worktree`
/// (absolute): no allowlist, the strict policy, a launch directory of its own, brokered
/// result delivery, Cursor's unverified isolation accepted (its plan is looked at, not carried out), no preflight
/// (administrator files are a launch's concern, not a repository's).
///
/// # Errors
/// The client's [`LaunchError`], e.g. a worktree path its plan cannot carry.
pub fn launch_plan(
    client: Client,
    worktree: &str,
    kcap_bin: &str,
) -> Result<LaunchPlan, LaunchError> {
    let ctx = LaunchContext {
        server_url: Some("http://127.0.0.1:9".into()),
        kcap_bin: Some(kcap_bin.into()),
        agent_id: "kcap-doctor".into(),
        worktree: Some(worktree.into()),
        launch_dir: Some("/run/kcap-doctor/launch".into()),
        // Every client's plan renders with brokered delivery (Antigravity's needs it).
        result_delivery: crate::clients::ResultDelivery::Brokered {
            capability_url: "http://127.0.0.1:9/kcap-doctor".into(),
        },
        ..LaunchContext::default()
    };
    let mut inputs = crate::clients::dispatch::PlanInputs::new(crate::Policy::Strict);
    inputs.unverified_isolation = crate::clients::dispatch::UnverifiedIsolation::Allow;
    let resolution = ctx.resolve(inputs.policy)?;
    client.room_plan(&ctx, &resolution, &inputs)
}

/// Whether a client's launch plan keeps one project file away from the reviewer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The plan removes the file from the worktree before the launch: `by` is the
    /// [`LaunchPlan::worktree_remove`] path that covers it (the file or a folder of it).
    Removed {
        /// The `worktree_remove` path.
        by: String,
    },
    /// The plan leaves the file in the worktree: the client reads it.
    Kept,
    /// No plan could be rendered for a launch in the directory: `why`.
    NoPlan {
        /// The plan's error.
        why: String,
    },
}

impl Verdict {
    /// Whether the file is kept from the reviewer.
    pub fn neutralized(&self) -> bool {
        matches!(self, Verdict::Removed { .. })
    }

    /// The verdict in words: `neutralized: the launch plan removes `.gemini` from the
    /// worktree`.
    pub fn describe(&self, client: Client) -> String {
        match self {
            Verdict::Removed { by } => format!(
                "neutralized: the {client} launch plan removes `{}` from the worktree",
                by.escape_debug()
            ),
            Verdict::Kept => {
                format!("not neutralized: the {client} launch plan leaves the file in the worktree")
            }
            Verdict::NoPlan { why } => format!(
                "not neutralized: no {client} launch plan can be rendered for this directory \
                 ({})",
                printable(why)
            ),
        }
    }
}

/// What the client does with one server entry of a project file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// It starts a process.
    Starts {
        /// The program.
        command: String,
    },
    /// It connects to a URL.
    Connects {
        /// The URL.
        url: String,
    },
    /// It lists the server as configured but off.
    Off {
        /// Why, in the client's terms.
        reason: String,
    },
    /// It skips the entry.
    Skipped {
        /// Why, in the client's terms.
        reason: String,
    },
}

impl Entry {
    /// Whether the client starts or reaches the server: the ones a plan must neutralize.
    pub fn runs(&self) -> bool {
        matches!(self, Entry::Starts { .. } | Entry::Connects { .. })
    }

    /// The entry in words: `starts `npx``, `connects to `https://…``, `is off (…)`.
    pub fn describe(&self) -> String {
        match self {
            Entry::Starts { command } => format!("starts `{}`", command.escape_debug()),
            Entry::Connects { url } => format!("connects to `{}`", url.escape_debug()),
            Entry::Off { reason } => format!("is configured but off ({})", printable(reason)),
            Entry::Skipped { reason } => {
                format!("is skipped by the client ({})", printable(reason))
            }
        }
    }
}

/// One server entry of a project file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectServer {
    /// The client reading the file.
    pub client: Client,
    /// The file, under [`ProjectInput::dir`].
    pub path: PathBuf,
    /// Where the server's name is.
    pub location: Location,
    /// The server's name.
    pub name: String,
    /// What the client does with it.
    pub entry: Entry,
    /// Whether the plan neutralizes its file.
    pub verdict: Verdict,
}

impl ProjectServer {
    /// A server the client would run although the plan does not neutralize it: a
    /// `doctor-project-server` finding.
    pub fn is_finding(&self) -> bool {
        self.entry.runs() && !self.verdict.neutralized()
    }
}

/// How one project file stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileState {
    /// There is no such file.
    NoFile,
    /// It cannot be read: the I/O error's text.
    Unreadable(String),
    /// The client refuses it as a whole (none of its servers start): why, and where.
    Rejected {
        /// Why, in the client's terms.
        reason: String,
        /// Where.
        location: Location,
    },
    /// The client reads it: this many server entries (in [`ProjectReport::servers`]).
    Read(usize),
}

/// One project file of one client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectFileStatus {
    /// The client.
    pub client: Client,
    /// The file, under [`ProjectInput::dir`].
    pub path: PathBuf,
    /// The file relative to the directory, as the room names it.
    pub relative: &'static str,
    /// How it stands.
    pub state: FileState,
    /// Whether the plan neutralizes it.
    pub verdict: Verdict,
}

/// What `doctor --project` found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectReport {
    /// Every project file of every client looked at, in client order, then the room's.
    pub files: Vec<ProjectFileStatus>,
    /// Every server entry of those files, per file in order, by position in the file.
    pub servers: Vec<ProjectServer>,
}

impl ProjectReport {
    /// Whether a file could not be read (the CLI exits 2).
    pub fn has_unreadable(&self) -> bool {
        self.files
            .iter()
            .any(|f| matches!(f.state, FileState::Unreadable(_)))
    }

    /// Whether there is anything to fix: a server the plan leaves to the reviewer, or a
    /// file that cannot be read.
    pub fn has_findings(&self) -> bool {
        self.has_unreadable() || self.servers.iter().any(ProjectServer::is_finding)
    }
}

/// Reads every project file of `input.clients` in `input.dir` and tells, per server,
/// whether each client's launch plan neutralizes it (see the module documentation).
pub fn scan(input: &ProjectInput<'_>) -> ProjectReport {
    let mut report = ProjectReport::default();
    for &client in input.clients {
        let format: &RegistrationFormat = client.registration();
        // Rendered once per client, and only when it has a file to judge.
        let mut plan: Option<Result<LaunchPlan, String>> = None;
        for file in format.project_files {
            let path = join(input.dir, file.path);
            let read = (input.read)(&path);
            let verdict = match &read {
                FileRead::Missing => Verdict::Kept,
                _ => {
                    let plan =
                        plan.get_or_insert_with(|| (input.plan)(client).map_err(|e| e.to_string()));
                    verdict(plan, file.path)
                }
            };
            let state = match read {
                FileRead::Missing => FileState::NoFile,
                FileRead::Unreadable(e) => FileState::Unreadable(e),
                FileRead::Bytes(bytes) => {
                    let shown = path.to_string_lossy();
                    let loaded = (file.load)(&shown, &bytes, input.worktree, input.env);
                    servers(client, &path, &loaded, &verdict, &mut report.servers)
                }
            };
            report.files.push(ProjectFileStatus {
                client,
                path,
                relative: file.path,
                state,
                verdict,
            });
        }
    }
    report
}

/// `relative` (`/`-separated) under `dir`.
fn join(dir: &Path, relative: &str) -> PathBuf {
    relative
        .split('/')
        .fold(dir.to_path_buf(), |p, c| p.join(c))
}

/// Whether `plan` removes the project file `relative` from its worktree: one of its
/// `worktree_remove` paths is the file or a folder of it.
fn verdict(plan: &Result<LaunchPlan, String>, relative: &str) -> Verdict {
    let plan = match plan {
        Ok(plan) => plan,
        Err(why) => return Verdict::NoPlan { why: why.clone() },
    };
    let covers = |removed: &str| {
        relative == removed
            || relative
                .strip_prefix(removed)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    match plan.worktree_remove.iter().find(|r| covers(r)) {
        Some(by) if plan.cwd.is_some() => Verdict::Removed { by: by.clone() },
        _ => Verdict::Kept,
    }
}

/// Adds the server entries of `loaded` (the verdict on `path`) to `out`, by position;
/// returns the file's state.
fn servers(
    client: Client,
    path: &Path,
    loaded: &Loaded,
    verdict: &Verdict,
    out: &mut Vec<ProjectServer>,
) -> FileState {
    let texts: Vec<SourceText> = loaded
        .sources
        .iter()
        .map(|s| SourceText::new(s.text.to_string()))
        .collect();
    let locate = |span: Option<&Span>| match span.and_then(|s| Some((s, texts.get(s.source)?))) {
        Some((s, text)) => text.location(s.range.clone()),
        None => super::positions::START,
    };
    if let Some(r) = loaded.rejected.first() {
        return FileState::Rejected {
            reason: r.reason.clone(),
            location: locate(r.span.as_ref()),
        };
    }
    let started = loaded.started.iter().map(|s| {
        let command = s.command.clone();
        (&s.name, &s.key, Entry::Starts { command })
    });
    let remote = loaded.remote.iter().map(|r| {
        let url = r.url.clone();
        (&r.name, &r.key, Entry::Connects { url })
    });
    let skipped = loaded.skipped.iter().map(|s| {
        let reason = s.reason.clone();
        let entry = if s.disabled {
            Entry::Off { reason }
        } else {
            Entry::Skipped { reason }
        };
        (&s.name, &s.key, entry)
    });
    let mut found: Vec<(&Span, ProjectServer)> = started
        .chain(remote)
        .chain(skipped)
        .map(|(name, key, entry)| {
            let server = ProjectServer {
                client,
                path: path.to_path_buf(),
                location: locate(Some(key)),
                name: name.clone(),
                entry,
                verdict: verdict.clone(),
            };
            (key, server)
        })
        .collect();
    found.sort_by_key(|(key, _)| (key.source, key.range.start));
    let n = found.len();
    out.extend(found.into_iter().map(|(_, s)| s));
    FileState::Read(n)
}

//! The launch plan: one shape for every client's reviewer launch, and the per-launch id that
//! aliases server names.
//!
//! A [`LaunchPlan`] is everything the daemon does to start one reviewer, computed without
//! I/O: the argv after the client binary, the client's whole environment, the per-launch
//! client root (directories and files under the per-launch directory the daemon provides,
//! [`LaunchContext::launch_dir`](crate::LaunchContext::launch_dir), from which the client
//! reads its user-level configuration: [`root`](super::root)), the reviewed worktree's files
//! the client would read as configuration, the ACP `session/new` params for clients driven
//! over the Agent Client Protocol, the name under which each injected server reaches the
//! client, and whether its isolation is verified. The daemon carries it out in that order:
//! create the launch directory and [`LaunchPlan::dirs`], write [`LaunchPlan::files`], move
//! [`LaunchPlan::worktree_remove`] from the worktree into [`LaunchPlan::pr_config`], start the
//! client with
//! [`LaunchPlan::argv`] in [`LaunchPlan::cwd`] with **only** [`LaunchPlan::env`] and the
//! daemon's values of [`LaunchPlan::env_inherit`] in its environment, and, when
//! [`LaunchPlan::session_new`] is set, send ACP `initialize` then `session/new` with it.
//!
//! The JSON form (`render <client> --format plan`) is the serde form of these types; the
//! docs/launch-plan.md documents it field by field.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::McpServer;

pub use super::boundary::{
    SYSTEM_DEVICES, SYSTEM_PROC_READ, SYSTEM_READ_EXEC, SYSTEM_SECRETS, Sandbox,
};
pub use super::dialog::Dialog;
pub use super::launch_id::{LaunchId, LaunchIdError, LaunchSecret};

/// The most bytes one argument or one `NAME=value` of the environment may hold, its NUL
/// included: Linux's `MAX_ARG_STRLEN` (32 pages of 4 KiB, `include/uapi/linux/binfmts.h`);
/// `execve` fails with `E2BIG` past it. [`Client::plan`](super::Client::plan) refuses a plan
/// whose argv passes it (a long prompt of a client that takes it in argv), and the executor
/// checks it again.
pub const MAX_ARG_BYTES: usize = 32 * 4096;

/// Whether a prompt that reaches its client through a pseudo-terminal may not hold `c`: a
/// control character (C0, DEL, C1) other than a line break (`\n`, `\r`) or a tab.
/// [`Client::plan`](super::Client::plan) refuses such a prompt for the terminal clients
/// (Claude Code, Codex CLI, Antigravity: [`RenderError::ForbiddenChar`](super::RenderError::ForbiddenChar),
/// field `prompt`), and the executor refuses a [`TypedPrompt::text`] holding one, before
/// anything is created. Why, by path:
/// - typed into the terminal (Claude Code, [`LaunchPlan::typed_prompt`]): a control
///   character is a key, not text: ESC ends the bracketed paste and what follows acts on
///   the reviewer's input line, DEL erases, `^C` interrupts;
/// - in argv (Codex CLI, Antigravity): the kernel passes every byte but NUL (refused as
///   [`RenderError::ArgvUnpassable`](super::RenderError::ArgvUnpassable)), but the client's
///   terminal interface may show the prompt on the terminal the executor reads (whether it
///   strips control characters first is not measured), and the executor answers the
///   terminal queries it reads there (`ESC [6n`, `ESC [c`) by typing into the client; C1
///   characters (U+0080 to U+009F) are the one-character forms of those sequences (U+009B
///   is CSI).
///
/// Kept: line breaks and tabs (a review prompt has lines and indented code; `\r\n` is
/// typed as `\n`), and the invisible characters refused in the other launch values
/// ([`crate::text::is_forbidden_char`]: bidirectional controls, zero-width characters): on
/// every path they are text, neither a key nor an escape, and a prompt that quotes a change
/// may hold them. What this crate shows of a prompt is escaped ([`crate::text::printable`]).
/// An ACP client's prompt goes in `session/prompt` as a JSON string, which carries every
/// character: nothing is refused there.
pub fn is_refused_in_terminal_prompt(c: char) -> bool {
    c.is_control() && !matches!(c, '\n' | '\r' | '\t')
}

/// The directory of the launch directory that holds the pull request's client
/// configuration taken out of the worktree ([`LaunchPlan::pr_config`]).
pub const PR_CONFIG_DIR: &str = "pr-config";

/// What the reviewer is told about the worktree paths `removed` kept in `dir`
/// ([`LaunchPlan::pr_config`]): one paragraph, added after its prompt (the argv prompt of a
/// terminal client, a second text block of the first ACP prompt), so that a pull request
/// changing exactly these files is still reviewed with them (the way
/// anthropics/claude-code-action keeps the pull request's `.claude/` in `.claude-pr/`).
pub fn pr_config_note(removed: &[String], dir: &str) -> String {
    format!(
        "Note from kcap: the worktree's coding-agent configuration ({}) was moved out before \
         this review and is not applied. The pull request's versions of these files, where \
         it has any, are in {dir}/ under the same paths: read them there as part of the change.",
        removed.join(", ")
    )
}

/// Version of the [`LaunchPlan`] JSON shape; a reader refuses a plan of another version.
///
/// Version 2 added [`LaunchPlan::isolation`] and [`LaunchPlan::dirs`]: a version-1 reader
/// that ignored unknown fields would carry out an unverified plan without knowing it.
/// Version 3 builds the environment instead of filtering it ([`LaunchPlan::env_inherit`]
/// replaced `env_remove`), roots every client in the per-launch directory, and adds
/// [`LaunchPlan::worktree_remove`]: a version-2 executor would start the client in the
/// daemon's whole environment. Version 4 names the client versions the isolation was
/// proven on ([`Isolation::Verified`]'s `proven_on`). Version 5 adds the reviewer's
/// boundary ([`LaunchPlan::sandbox`]) and its door ([`LaunchPlan::door`]): a version-4
/// executor would confine the client without the paths the plan names (its kcap binary, the
/// daemon's cache), and start a client whose URLs name the door's ports with no door.
/// Version 6 keeps the pull request's client configuration ([`LaunchPlan::pr_config`]): a
/// version-5 executor would delete what the reviewer's prompt says it can read.
/// Version 7 types a terminal client's prompt once its MCP servers are ready
/// ([`LaunchPlan::typed_prompt`]): a version-6 executor would start the reviewer with no
/// prompt at all.
/// Version 8 holds an ACP client's first prompt until its log says every injected MCP
/// server listed its tools ([`LaunchPlan::servers_ready`]): a version-7 executor would send
/// it to a reviewer one of whose servers never started.
/// Version 9 lets such a log be a directory, each regular file in it read (a `log` ending
/// in `/`; Qwen Code's and Copilot CLI's, a file per session or process), counts a `ready`
/// text listed twice as two lines, and adds [`ServersReady::message_separator`] and
/// [`ServersReady::settle_ms`], and names a terminal client's dialogs in the plan
/// ([`LaunchPlan::dialogs`], the rooms' data, no longer the executor's): a version-8 executor
/// would wait for a directory to be a file, or take one line for every server, and stop or
/// start launches it should not.
/// Version 10 names the client's built-in tools that run unasked
/// ([`LaunchPlan::unasked`]).
/// ([`DoorEndpoint::scheme`] is in the JSON only when `https`: a reader without it refuses
/// such a plan, `deny_unknown_fields`.)
pub const PLAN_VERSION: u32 = 10;

/// Everything the daemon does to launch one reviewer on one client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaunchPlan {
    /// [`PLAN_VERSION`].
    pub version: u32,
    /// The client, serialized as its [`name`](super::Client::name) (`claude`, `codex`,
    /// `gemini`, …); a plan naming no client of [`Client::ALL`](super::Client::ALL) does not
    /// parse.
    pub client: super::Client,
    /// Whether the launch is known to keep the MCP servers the user or the reviewed
    /// repository configured from starting ([`Isolation`]).
    pub isolation: Isolation,
    /// The directory to start the client in: the reviewer's worktree, when the launch has
    /// one.
    pub cwd: Option<String>,
    /// The per-launch directory the plan was rendered for
    /// ([`LaunchContext::launch_dir`](crate::LaunchContext::launch_dir), absolute, without a
    /// trailing `/`): [`LaunchPlan::dirs`] and [`LaunchPlan::files`] are relative to it, and
    /// the root variables of [`LaunchPlan::env`] point into it, so a plan carried out in
    /// another directory would start the client on a root nobody wrote. An executor refuses
    /// that.
    pub launch_dir: String,
    /// The arguments after the client binary.
    pub argv: Vec<String>,
    /// The client's environment, in order: it starts from an **empty** environment plus
    /// these variables, plus the daemon's values of [`LaunchPlan::env_inherit`]. Names are
    /// unique and none is in `env_inherit`: the per-launch root (`HOME`, the XDG
    /// directories, `TMPDIR`, the client's own directory variables), the credentials the
    /// daemon handed over ([`Credentials`](super::root::Credentials)), the client's own
    /// switches.
    pub env: Vec<EnvVar>,
    /// The only variables the client takes from the daemon's environment, when set there
    /// ([`INHERITED_ENV`](super::root::INHERITED_ENV): `PATH`, the locale, `TZ`, `TERM`).
    pub env_inherit: Vec<String>,
    /// Directories to create (mode 0700, parents too) under the per-launch directory before
    /// the files are written: paths relative to it, `/`-separated, without `.` or `..`
    /// components: the per-launch root ([`Root::dirs`](super::root::Root::dirs)) and
    /// any directory the client needs to exist and be empty (Kiro's `KIRO_HOME`).
    pub dirs: Vec<String>,
    /// Files to write before the launch, under the per-launch directory: the client's
    /// user-level configuration as the plan wants it, and the credential files.
    pub files: Vec<PlanFile>,
    /// Paths relative to [`LaunchPlan::cwd`] (the reviewed worktree), `/`-separated, without
    /// `.` or `..` components, that the client would read as configuration (MCP server
    /// lists, settings, hooks, `.env` files): the daemon removes each one that exists
    /// (file or directory) before the launch. Empty when the client needs none removed.
    pub worktree_remove: Vec<String>,
    /// Where the executor keeps what it takes out of the worktree ([`PR_CONFIG_DIR`] in the
    /// launch directory, absolute): each [`LaunchPlan::worktree_remove`] path it finds is
    /// moved there under the same relative path, so the reviewer reads the pull request's own
    /// client configuration as part of the change, and no client loads it (no client reads
    /// its launch directory's `pr-config`). The reviewer's prompt names it
    /// ([`pr_config_note`]). `None` when nothing is removed; a hand-written plan with `None`
    /// and paths to remove has them deleted.
    #[serde(default)]
    pub pr_config: Option<String>,
    /// For clients driven over ACP: the params of the `session/new` request, sent after
    /// `initialize`. `None` for clients that take their servers on the command line.
    pub session_new: Option<SessionNew>,
    /// For a terminal client that would send an argv prompt before its MCP servers listed
    /// their tools: the prompt, which the executor types once the client's log says they
    /// have ([`TypedPrompt`]). `None`: the prompt, if any, is in the argv (or, over ACP, in
    /// `session/prompt`).
    #[serde(default)]
    pub typed_prompt: Option<TypedPrompt>,
    /// For an ACP client that answers `session/new` without saying that an injected server
    /// failed: the log that says it ([`ServersReady`]), read by the executor after
    /// `session/new` and before any prompt. `None`: nothing to wait for.
    #[serde(default)]
    pub servers_ready: Option<ServersReady>,
    /// For a terminal client: the interactive dialogs it can stop at ([`Dialog`]), which the
    /// executor stops it at with an error naming the dialog. Empty over ACP.
    #[serde(default)]
    pub dialogs: Vec<Dialog>,
    /// The client's built-in tools that run unasked in this launch, by name in ASCII order
    /// ([`super::tools`]): what the reviewer can do without a question
    /// besides the injected servers' admitted tools. Under
    /// [`Policy::Strict`](crate::Policy::Strict) none has effects.
    pub unasked: Vec<super::tools::UnaskedTool>,
    /// Every injected server, in injection order, with the name it has on the wire.
    pub servers: Vec<WireServer>,
    /// What the reviewer may reach in its sandbox ([`Sandbox`]): the executor confines the
    /// client and everything it starts to these paths, plus the client's own installation.
    pub sandbox: Sandbox,
    /// The reviewer's one door out ([`DoorPlan`]), when the launch asked for one
    /// ([`LaunchContext::door`](crate::LaunchContext::door)): the client runs in a network of
    /// its own whose only way out is these endpoints, and its URLs name them. `None`: the
    /// executor's network.
    pub door: Option<DoorPlan>,
}

impl LaunchPlan {
    /// Moves the value after `flag` in [`LaunchPlan::argv`] into the file `file` of the
    /// launch directory (mode 0600, a [`PlanFile`]) and puts `prefix` and that file's
    /// absolute path in its place: a server list that holds secrets (the agent id, a
    /// capability URL) reaches the client through a file only its user can read, never its
    /// command line, which every local user can read (`/proc/<pid>/cmdline`). Nothing
    /// happens when `flag` is not in the argv or is its last element.
    pub(crate) fn argv_value_to_file(&mut self, flag: &str, file: &str, prefix: &str) {
        let Some(i) = self.argv.iter().position(|a| a == flag) else {
            return;
        };
        let Some(value) = self.argv.get_mut(i + 1) else {
            return;
        };
        let path = format!("{prefix}{}/{file}", self.launch_dir);
        let contents = std::mem::replace(value, path);
        self.files.push(PlanFile {
            path: file.to_owned(),
            contents,
            mode: 0o600,
        });
    }

    /// Adds the [`pr_config_note`] to the prompt, the argument after the last `flag` of
    /// [`LaunchPlan::argv`], as a paragraph of its own, when the plan keeps the pull
    /// request's client configuration ([`LaunchPlan::pr_config`]). Nothing happens without
    /// a prompt (no `flag`, or `flag` last).
    pub(crate) fn note_pr_config(&mut self, flag: &str) {
        let Some(dir) = &self.pr_config else { return };
        let note = pr_config_note(&self.worktree_remove, dir);
        let Some(i) = self.argv.iter().rposition(|a| a == flag) else {
            return;
        };
        if let Some(prompt) = self.argv.get_mut(i + 1).filter(|p| !p.is_empty()) {
            prompt.push_str("\n\n");
            prompt.push_str(&note);
        }
    }

    /// Takes the prompt out of [`LaunchPlan::argv`]: `flag` and the prompt after it, when
    /// they are its last two arguments (as [`LaunchPlan::note_pr_config`] left them).
    pub(crate) fn take_argv_prompt(&mut self, flag: &str) -> Option<String> {
        let n = self.argv.len();
        if n < 2 || self.argv[n - 2] != flag {
            return None;
        }
        let prompt = self.argv.pop();
        self.argv.pop();
        prompt
    }

    /// A plan rooted in `client`'s per-launch directory: [`LaunchPlan::env`] is the root's
    /// ([`Root::env`](super::root::Root::env)) then the credential variables its
    /// [`ClientSpec::credentials`](super::spec::ClientSpec::credentials) admits,
    /// [`LaunchPlan::dirs`] the root's, [`LaunchPlan::files`] the credential files,
    /// [`LaunchPlan::env_inherit`] [`INHERITED_ENV`](super::root::INHERITED_ENV),
    /// [`LaunchPlan::cwd`] the worktree (when set), verified isolation, no ACP session and no
    /// servers. The room adds its own variables, files, session and servers.
    ///
    /// # Errors
    /// [`RenderError::NeedsAbsolute`](super::RenderError::NeedsAbsolute) without an absolute
    /// launch directory; the errors of the credentials
    /// ([`RenderError::CredentialNotAccepted`](super::RenderError::CredentialNotAccepted),
    /// [`RenderError::CredentialFile`](super::RenderError::CredentialFile)).
    pub(crate) fn rooted(
        client: super::Client,
        ctx: &crate::LaunchContext,
        worktree_remove: &[&str],
        argv: Vec<String>,
    ) -> Result<LaunchPlan, super::RenderError> {
        let root = super::root::Root::of(client, ctx)?;
        let (credential_env, credential_files) = super::root::credentials(client, ctx)?;
        let mut env = root.env();
        env.extend(credential_env);
        let cwd = super::non_blank(&ctx.worktree).map(str::to_owned);
        let mut sandbox = Sandbox::new(root.dir(), cwd.as_deref());
        // The MCP servers run the kcap binary; the daemon's cache holds what the client runs
        // (`XDG_CACHE_HOME`: Copilot CLI runs the package it unpacked there). The cache is
        // shared by every launch, so a reviewer reads and runs it but writes nothing there:
        // one that could would plant code the next reviewer runs with its own credentials
        // (the red team of issue 31 rewrote Copilot CLI's `index.js` from a Claude Code
        // reviewer; the next Copilot CLI reviewer ran it holding its GitHub token).
        if !ctx.is_gated() {
            sandbox.read_exec.extend(
                super::non_blank(&ctx.kcap_bin)
                    .filter(|b| b.starts_with('/'))
                    .map(str::to_owned),
            );
        }
        sandbox
            .read_exec
            .extend(super::non_blank(&ctx.cache_dir).map(str::to_owned));
        // Without a worktree the client starts in the launch directory, which holds only
        // what the plan writes: there is nothing to remove (and no `cwd` to resolve it in).
        let worktree_remove = match cwd {
            Some(_) => worktree_remove.iter().map(|p| (*p).to_owned()).collect(),
            None => Vec::new(),
        };
        Ok(LaunchPlan {
            version: PLAN_VERSION,
            client,
            isolation: Isolation::Verified {
                proven_on: match client.spec().proof {
                    super::spec::Proof::RealClient { versions, .. } => {
                        versions.iter().map(|v| (*v).to_owned()).collect()
                    }
                    super::spec::Proof::FactsOnly => Vec::new(),
                },
            },
            cwd,
            launch_dir: root.dir().to_owned(),
            argv,
            env,
            env_inherit: super::root::INHERITED_ENV.map(String::from).into(),
            dirs: root.dirs(),
            files: credential_files,
            pr_config: (!worktree_remove.is_empty())
                .then(|| format!("{}/{PR_CONFIG_DIR}", root.dir())),
            worktree_remove,
            session_new: None,
            typed_prompt: None,
            servers_ready: None,
            dialogs: Vec::new(),
            // The lenient policy's list, which hides nothing; `Client::plan` sets the list
            // of the caller's policy.
            unasked: super::tools::unasked(client, crate::Policy::Lenient)?,
            servers: Vec::new(),
            sandbox,
            door: None,
        })
    }

    /// The value of variable `name` in [`LaunchPlan::env`], if the plan sets it.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.value.as_str())
    }

    /// The plan as pretty-printed JSON (two-space indent), ending in a newline: the form
    /// `render --format plan` prints and docs/launch-plan.md documents.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a plan serializes");
        s.push('\n');
        s
    }
}

/// Whether a launch is known to be isolated from the MCP servers the user or the reviewed
/// repository configured: JSON `{"status": "verified", "proven_on": ["0.61.0"]}` or
/// `{"status": "unverified", "reason": "…"}`.
///
/// `Verified` means the mechanism the plan uses was established by measurement here, on the
/// pinned client versions it names (the room's
/// [`Proof::RealClient`](super::spec::Proof::RealClient), which the real-client tests run
/// on). `Unverified` means it was not (Cursor, Kiro, Antigravity, which are not installable
/// here: `docs/isolation/<client>.md`): servers of the user's or the repository's
/// configuration may start beside the injected ones, a flow-starting one included.
/// [`Client::plan`](super::Client::plan) refuses such a plan under either policy unless the
/// caller opts in ([`UnverifiedIsolation`](crate::clients::dispatch::UnverifiedIsolation)),
/// and then adds a warning; a caller that carries one out should say so (the CLI warns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase", deny_unknown_fields)]
pub enum Isolation {
    /// Established by measurement.
    Verified {
        /// The client versions it was measured on here (`["2.1.197", "2.1.332"]`).
        proven_on: Vec<String>,
    },
    /// Not established.
    Unverified {
        /// Why, in one sentence.
        reason: String,
    },
}

impl Isolation {
    /// Whether this is [`Isolation::Verified`].
    pub fn is_verified(&self) -> bool {
        matches!(self, Isolation::Verified { .. })
    }
}

/// The reviewer's door: JSON `{"endpoints": [{port, upstream, scheme, serves, credential}]}`
/// (`scheme` only when `https`). The
/// client, and everything it starts, runs in a network namespace of its own, loopback only
/// (docs/network.md); its only way out is these ports of its `127.0.0.1`, each forwarded by
/// the executor, outside, to one upstream. The plan's URLs (the model API's base URL, the
/// kcap server's, the capability and review-context URLs) name these ports, and the model
/// key the daemon handed over stays outside: the client holds a per-launch token in its
/// place, and the door sets the key on each request ([`DoorCredential`]).
///
/// Computed by [`Client::plan`](super::Client::plan) from the client's
/// [`DoorSpec`](super::door::DoorSpec) ([`super::door`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoorPlan {
    /// The ways out, the model API's first.
    pub endpoints: Vec<DoorEndpoint>,
}

/// One way out of the reviewer's network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoorEndpoint {
    /// The TCP port on `127.0.0.1` inside the reviewer's network (from
    /// [`DOOR_FIRST_PORT`](super::door::DOOR_FIRST_PORT) on).
    pub port: u16,
    /// Where the executor forwards it: `host:port`, resolved and connected outside.
    pub upstream: String,
    /// How the door speaks to the upstream: the scheme of the URL it stands for. Left out
    /// of the JSON when `http`, so a plan without TLS upstreams reads as before; a reader
    /// of version 5 that does not know the field refuses a plan with an `https` one (unknown
    /// field) rather than send the key in the clear.
    #[serde(default, skip_serializing_if = "DoorScheme::is_http")]
    pub scheme: DoorScheme,
    /// What it serves, for whoever reads the plan: `model API (ANTHROPIC_BASE_URL)`,
    /// `kcap server (server_url)`, ….
    pub serves: String,
    /// The header the door sets on each HTTP request through it, the daemon's key in it;
    /// `None` for an endpoint whose bytes pass as they are.
    pub credential: Option<DoorCredential>,
}

/// How the door speaks to an upstream: JSON `"http"` or `"https"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DoorScheme {
    /// Plain HTTP over TCP (an `http://` URL): the bytes as the client sent them, the key
    /// set in the clear.
    #[default]
    Http,
    /// TLS (an `https://` URL): the client speaks plain HTTP to the door inside the
    /// reviewer, the door TLS to the upstream, its certificate checked (docs/network.md).
    Https,
}

impl DoorScheme {
    /// Whether it is [`DoorScheme::Http`] (left out of the JSON).
    pub fn is_http(&self) -> bool {
        *self == DoorScheme::Http
    }
}

/// A request header the door sets: every header of that name the client sent is dropped.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoorCredential {
    /// The header's name, e.g. `x-api-key`.
    pub header: String,
    /// Its whole value, e.g. `Bearer sk-…`.
    pub value: String,
}

impl fmt::Debug for DoorCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DoorCredential")
            .field("header", &self.header)
            .field("value", &"(not shown)")
            .finish()
    }
}

/// A terminal client's prompt, typed by the executor once every injected MCP server is
/// ready: `{"text": …, "log": …, "ready": […], "failed": […]}`. The client's own argv
/// prompt would go out before its servers listed their tools, and the first turn would lack
/// them (Claude Code in its terminal, measured on 2.1.197 and 2.1.328 with a server that
/// answers after 5 s; anthropics/claude-code#76239). The room names a log the client writes
/// (its argv turns the log on) and the texts that say each server listed its tools.
///
/// The executor (`launch::TerminalSession`, feature `launch`) reads [`TypedPrompt::log`] as
/// it grows; once it holds every [`TypedPrompt::ready`] text (each starting the message of
/// some line: the part after [`TypedPrompt::message_after`] `] `, the first in Claude Code's
/// `<time> [<LEVEL>] <message>`; a line that only quotes a text says nothing), it types
/// [`TypedPrompt::text`] as one bracketed paste (`ESC [200~` … `ESC [201~`, so line breaks
/// do not send it early) and then Enter. A line holding a [`TypedPrompt::failed`] text
/// first, or the handshake bound (`launch::Options::handshake_timeout`), stops the client
/// with an error naming the server; the prompt is never sent to a reviewer without
/// its servers. The reviewer can write its own log: a forged line sends its prompt early,
/// which harms only its own review.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypedPrompt {
    /// The prompt, UTF-8, as typed.
    pub text: String,
    /// The client's log, relative to the launch directory (`/`-separated, no `.` or `..`;
    /// a directory when it ends in `/`, as [`ServersReady::log`]).
    pub log: String,
    /// Texts that must each start some line's message before the prompt is typed: the
    /// client takes input, and each injected server listed its tools.
    pub ready: Vec<String>,
    /// Texts any one of which, starting a line's message, says that an injected server never
    /// will: the executor stops the client and quotes the line.
    pub failed: Vec<String>,
    /// Where a line's message starts, as data of the client's log format: after this many
    /// `] ` (1 for Claude Code's `<time> [<LEVEL>] <message>`; 0: the whole line). A line
    /// with fewer says nothing.
    pub message_after: usize,
}

/// What an ACP client's log says about its MCP servers, for the executor to read before the
/// first prompt: `{"log": …, "ready": […], "failed": […]}`. Over ACP a client answers
/// `session/new` when it has tried to start its servers, and answers it the same when one of
/// them exited or failed (Gemini CLI 0.61.0, measured: the room says how); its first turn
/// then goes out without that server's tools.
///
/// The executor (`launch::AcpSession`, feature `launch`) reads [`ServersReady::log`] once
/// `session/new` answered: a line whose message (the part after
/// [`ServersReady::message_after`] [`ServersReady::message_separator`]) starts with a
/// [`ServersReady::failed`] text, or the
/// handshake bound (`launch::Options::handshake_timeout`, from the client's start) passing
/// before every [`ServersReady::ready`] text started some line's message, stops the client
/// with an error naming the server, and no prompt is sent. A line that only quotes a text
/// says nothing. The reviewer can write its own log: a forged
/// line lets its own review start without a server, and harms nothing else.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServersReady {
    /// The client's log, relative to the launch directory (`/`-separated, no `.` or `..`);
    /// ending in `/`, a directory: each regular file directly in it is read, up to 16 (a
    /// client that names its log after its session), no link followed.
    pub log: String,
    /// Texts that must each start some line's message before the first prompt: each
    /// injected server is connected, and the client's session set up. A text listed `n`
    /// times needs `n` lines (a client whose line does not name the server).
    pub ready: Vec<String>,
    /// Texts any one of which, starting a line's message, says that an injected server
    /// failed: the executor stops the client and quotes the line.
    pub failed: Vec<String>,
    /// Where a line's message starts: after this many [`ServersReady::message_separator`]
    /// (as [`TypedPrompt::message_after`]): 2 for Gemini CLI's `[<time>] [<LEVEL>]
    /// <message>`.
    pub message_after: usize,
    /// What ends each part before a line's message: `] ` for bracketed prefixes, ` message=`
    /// for OpenCode's `key=value` lines.
    pub message_separator: String,
    /// Milliseconds the executor reads the log on for a `failed` line once every `ready`
    /// text is in (or at once, with no `ready` texts): a client that writes no line when a
    /// server is ready, only when one failed (OpenCode), and may write it after answering
    /// `session/new`. 0: the first prompt goes as soon as the texts are in.
    pub settle_ms: u64,
}

/// One environment variable: `{"name": …, "value": …}` (the ACP shape too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    /// The variable's name.
    pub name: String,
    /// Its value.
    pub value: String,
}

impl EnvVar {
    /// `{name, value}`.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        EnvVar {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// A file the daemon writes under the per-launch directory before the launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// Path relative to the per-launch directory, `/`-separated, without `.` or `..`
    /// components; parent directories are created (mode 0700).
    pub path: String,
    /// The file's contents (UTF-8).
    pub contents: String,
    /// Unix permission bits, e.g. `384` (0o600).
    pub mode: u32,
}

/// The params of the ACP `session/new` request (Agent Client Protocol version 1, as Gemini
/// CLI 0.61.0 and OpenCode 1.18.33 read it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionNew {
    /// The session's working directory: the reviewer's worktree, absolute.
    pub cwd: String,
    /// The stdio MCP servers the session starts.
    #[serde(rename = "mcpServers")]
    pub mcp_servers: Vec<AcpServer>,
}

/// A stdio MCP server in ACP `session/new`: `{name, command, args, env:[{name, value}]}`.
/// `args` and `env` are always present (Gemini CLI 0.61.0 answers -32603 and OpenCode
/// 1.18.33 -32602 without them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpServer {
    /// The server's wire name.
    pub name: String,
    /// The kcap binary.
    pub command: String,
    /// Argv after the command.
    pub args: Vec<String>,
    /// The server's environment, in registry order.
    pub env: Vec<EnvVar>,
}

/// An injected server and the name it has on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireServer {
    /// The registry id, e.g. `kcap-review`.
    pub id: String,
    /// The name the client knows it by: the id itself, or for clients whose MCP gate is an
    /// exact-name allowlist a reviewed repository could satisfy, the id aliased with the
    /// launch's [`LaunchId`] (`kcap-review-<16 hex>`).
    pub wire_name: String,
}

/// Which tools of an injected server an unattended reviewer may run without approval: the
/// one rule every client's permission settings are written from.
///
/// - A tool in the server's catalog is admitted when it is `unattended_safe`.
/// - A server without a catalog: all its tools when it is `read_only`, none otherwise.
///
/// [`Policy::Strict`](crate::Policy::Strict) only materializes `read_only` servers, so under
/// it every admitted tool is free of side effects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admitted {
    /// Every tool of the server (a `read_only` server without a catalog).
    All,
    /// Exactly these tools, in catalog order (possibly none).
    Tools(&'static [crate::model::Tool]),
    /// No tool.
    None,
}

impl Admitted {
    /// The admission rule for `server`.
    pub fn of(server: &McpServer) -> Admitted {
        if !server.tools.is_empty() {
            Admitted::Tools(server.tools)
        } else if server.read_only {
            Admitted::All
        } else {
            Admitted::None
        }
    }

    /// The admitted tool names, `None` meaning every tool; catalog tools that are not
    /// `unattended_safe` are left out.
    pub fn names(self) -> Option<Vec<&'static str>> {
        match self {
            Admitted::All => None,
            Admitted::Tools(tools) => Some(
                tools
                    .iter()
                    .filter(|t| t.unattended_safe)
                    .map(|t| t.name)
                    .collect(),
            ),
            Admitted::None => Some(Vec::new()),
        }
    }
}

//! The hostile configuration `verify` surrounds a launch with, as each room declares it
//! (`src/clients/<client>/hostile.rs`, `VERIFY`): the daemon user's files (in a throwaway
//! `HOME`), the reviewed repository's files (in a throwaway worktree and its parent), and the
//! daemon's own environment (variables that point the client at more files). Every server
//! and hook they declare runs the recorder with the arguments `hostile <tag> <name>`, so a
//! record names the file it came from.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::clients::plan::EnvVar;

/// The first argument of every recorder a hostile configuration starts.
pub const HOSTILE_ARG: &str = "hostile";

/// Whose configuration a hostile server or hook stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The daemon user's own files (its `HOME`, its XDG directories).
    User,
    /// The reviewed repository's files (the worktree, its parent).
    Project,
    /// Files or values the daemon's own environment points the client at.
    Environment,
}

impl Scope {
    /// `user`, `project`, `environment`.
    pub fn name(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
            Scope::Environment => "environment",
        }
    }
}

/// What a hostile configuration declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// An MCP server.
    Server,
    /// A hook (a command the client runs on an event).
    Hook,
}

/// One server or hook of the hostile configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Source {
    /// Whose configuration it stands for.
    pub scope: Scope,
    /// A server or a hook.
    pub kind: Kind,
    /// The server's name, or the hook's event.
    pub name: String,
    /// The file that declares it, relative to the throwaway root (`home/…` is the daemon
    /// user's home, `parent/worktree/…` the reviewed worktree), or the variable that holds it.
    pub file: String,
    /// The tag its recorder is started with (`hostile <tag> <name>`).
    pub tag: String,
}

/// What `verify` knows of one client, declared in its room (`hostile.rs`, `VERIFY`): the
/// client's hostile configuration and how its launch is judged.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct VerifySpec {
    /// Writes the client's hostile files with the [`Writer`]; returns the client's
    /// variables in the daemon's environment and the launch's credential variables.
    pub hostile: fn(&mut Writer) -> Setup,
    /// The credential files the launch hands over (`(name, contents)`: Codex CLI's
    /// `auth.json`).
    pub credential_files: &'static [(&'static str, &'static str)],
    /// The launch carries a prompt: the terminal clients start their MCP servers with the
    /// first turn.
    pub prompt: bool,
    /// The launch needs a cache directory kept across launches (Copilot CLI unpacks its
    /// package there on the first run).
    pub cache: bool,
    /// The client starts its MCP servers in the worktree (measured), so `verify` checks
    /// that the injected ones ran there.
    pub servers_run_in_worktree: bool,
}

/// What a [`VerifySpec::hostile`] writer returns: the client's variables in the daemon's
/// environment, and the launch's credential variables.
pub type Setup = std::io::Result<(Vec<(String, String)>, Vec<EnvVar>)>;

/// Writes a hostile configuration under a throwaway root and records each server and hook
/// it declares ([`Source`]).
pub struct Writer {
    root: PathBuf,
    recorder: String,
    sources: Vec<Source>,
}

impl Writer {
    /// A writer of files under `root` whose servers and hooks run `recorder`.
    pub(crate) fn new(root: PathBuf, recorder: String) -> Writer {
        Writer {
            root,
            recorder,
            sources: Vec::new(),
        }
    }

    /// Every server and hook registered so far.
    pub(crate) fn into_sources(self) -> Vec<Source> {
        self.sources
    }

    /// The recorder binary every hostile server and hook runs.
    pub fn recorder(&self) -> &str {
        &self.recorder
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The path `rel` (relative to the throwaway root) as a string.
    pub fn s(&self, rel: &str) -> String {
        self.path(rel).to_string_lossy().into_owned()
    }

    /// Registers a source declared in `rel` (or by the variable `rel`) and returns its
    /// recorder's arguments.
    pub fn args(
        &mut self,
        scope: Scope,
        kind: Kind,
        tag: &str,
        rel: &str,
        name: &str,
    ) -> [String; 3] {
        let file = rel.to_owned();
        let name = match kind {
            Kind::Server => name.to_owned(),
            Kind::Hook => format!("hook-{name}"),
        };
        self.sources.push(Source {
            scope,
            kind,
            name: name.clone(),
            file,
            tag: tag.to_owned(),
        });
        [HOSTILE_ARG.to_owned(), tag.to_owned(), name]
    }

    /// A shell command that runs the recorder for a hook of `event`.
    pub fn hook(&mut self, scope: Scope, tag: &str, rel: &str, event: &str) -> String {
        let args = self.args(scope, Kind::Hook, tag, rel, event);
        std::iter::once(&self.recorder)
            .chain(&args)
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `{name: make(args)}` for each of `names`, registered as servers of `rel`.
    pub fn servers(
        &mut self,
        scope: Scope,
        tag: &str,
        rel: &str,
        names: &[String],
        make: impl Fn(&str, &[String; 3]) -> Value,
    ) -> Value {
        let mut map = Map::new();
        for name in names {
            let args = self.args(scope, Kind::Server, tag, rel, name);
            map.insert(name.clone(), make(&self.recorder, &args));
        }
        Value::Object(map)
    }

    /// Writes `contents` to `rel`, creating its directories.
    pub fn write(&self, rel: &str, contents: &[u8]) -> std::io::Result<()> {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, contents)
    }

    /// Writes `value` (pretty JSON) to `rel`.
    pub fn write_json(&self, rel: &str, value: &Value) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
        self.write(rel, &text)
    }
}

/// `s` in single quotes for `/bin/sh`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The names every hostile scope declares: the ids of the servers a launch injects, and
/// one of its own.
pub fn names(tag: &str, more: &[String]) -> Vec<String> {
    let mut names = vec!["kcap-flow-result".to_owned(), "kcap-review".to_owned()];
    names.extend(more.iter().cloned());
    names.push(format!("{tag}-other"));
    names
}

/// The plain `{command, args}` form of a stdio server.
pub fn stdio(command: &str, args: &[String; 3]) -> Value {
    json!({"command": command, "args": args})
}

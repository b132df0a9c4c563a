//! `doctor`: what is wrong with kcap's registrations across every client's own file.
//!
//! [`diagnose`] is pure: it takes each client's file (and ledger) as bytes already read
//! ([`ClientFile`]), the registry, the options `install` would be given, and a way to tell
//! what a command runs ([`Input::resolve`]); the CLI gathers those and prints the result
//! with [`crate::report`], as `check` does. What an entry should be comes from each
//! client's room ([`RegistrationFormat::entry`], through
//! [`crate::export::registration_entries`]) and is compared by [`install::fingerprint`],
//! so `doctor`, `install` and `export` agree on every entry shape.
//!
//! Findings, each a [`Rule`]:
//!
//! - `doctor-unreadable`: a config or ledger that cannot be read (or a `--config` file that
//!   does not exist);
//! - `doctor-malformed`: a config the client would refuse (the sentence `install` refuses it
//!   with), a ledger that is not one, a Claude Code project scope whose `mcpServers` is not
//!   an object;
//! - `doctor-duplicate`: in Claude Code's `~/.claude.json`, a project's local scope
//!   (`projects.<dir>.mcpServers`) holds an entry named like a registry server that is
//!   identical to both the user scope's (`mcpServers`) entry and the entry kcap registers:
//!   removable without changing what runs (`doctor --fix`);
//! - `doctor-conflict`: such a same-named local entry that differs from the user scope's
//!   or from kcap's: Claude Code runs it in that project instead; kept;
//! - `doctor-stale-command`: a kcap entry runs an absolute command path that does not exist;
//! - `doctor-outdated-command`: a kcap entry runs another command than the kcap binary
//!   given (`--kcap-bin`, default `kcap` on `PATH`), and the two do not resolve to the same
//!   file;
//! - `doctor-divergent`: a kcap entry (user scope) differs from the entry kcap registers in
//!   more than its command (other args, env, trust knob);
//! - `doctor-missing`: a registry server missing from a client where kcap is installed (its
//!   file holds at least one entry named like a registry server, or it has a ledger).
//!
//! A "kcap entry" is an entry named like one of the registry's `registered` servers. The
//! command of an entry is found where the client's entry shape puts the binary (`command`,
//! or OpenCode's `command[0]`), located by building the entry with a marker binary.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::clients::Client;
use crate::export::{RegistrationError, RegistrationFormat, RegistrationOptions, registrations};
use crate::install::{self, ProjectDuplicate, fingerprint};
use crate::report::Finding;
use crate::schema::RegistryEntry;

/// One file as read from disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileRead {
    /// There is no such file.
    Missing,
    /// It exists but cannot be read: the I/O error's text.
    Unreadable(String),
    /// Its bytes.
    Bytes(Vec<u8>),
}

impl FileRead {
    /// Reads `path`: [`FileRead::Missing`] when it does not exist.
    pub fn read(path: &Path) -> FileRead {
        match crate::decode::read_regular(path) {
            Ok(b) => FileRead::Bytes(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FileRead::Missing,
            Err(e) => FileRead::Unreadable(e.to_string()),
        }
    }
}

/// One client's registration file and its ledger ([`install::ledger_path`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientFile {
    /// The client.
    pub client: Client,
    /// The config's path (shown in findings).
    pub path: PathBuf,
    /// Named by the user (`--config`), so its absence is a problem, not "not installed".
    pub explicit: bool,
    /// The config.
    pub config: FileRead,
    /// The ledger beside it.
    pub ledger: FileRead,
}

impl ClientFile {
    /// Reads `path` and its ledger.
    pub fn read(client: Client, path: PathBuf, explicit: bool) -> ClientFile {
        ClientFile {
            client,
            config: FileRead::read(&path),
            ledger: FileRead::read(&install::ledger_path(&path)),
            path,
            explicit,
        }
    }
}

/// Everything [`diagnose`] looks at.
pub struct Input<'a> {
    /// The registry.
    pub entries: &'a [RegistryEntry],
    /// What `install` would be given (`--kcap-bin`, `--server-url`); `project_dir` unused.
    pub opts: &'a RegistrationOptions,
    /// The files, one per client checked.
    pub files: &'a [ClientFile],
    /// The file a command runs, canonical (symbolic links resolved): an absolute command
    /// when it exists, a bare name as found on `PATH`; `None` when there is none.
    pub resolve: &'a dyn Fn(&str) -> Option<PathBuf>,
}

/// The kind of a [`Problem`]; [`Rule::name`] is its stable name in output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `doctor-unreadable`.
    Unreadable,
    /// `doctor-malformed`.
    Malformed,
    /// `doctor-duplicate` (removable).
    Duplicate,
    /// `doctor-conflict` (kept).
    Conflict,
    /// `doctor-stale-command`.
    StaleCommand,
    /// `doctor-outdated-command`.
    OutdatedCommand,
    /// `doctor-divergent`.
    Divergent,
    /// `doctor-missing`.
    Missing,
}

impl Rule {
    /// The rule's name, e.g. `doctor-stale-command`.
    pub const fn name(self) -> &'static str {
        match self {
            Rule::Unreadable => "doctor-unreadable",
            Rule::Malformed => "doctor-malformed",
            Rule::Duplicate => "doctor-duplicate",
            Rule::Conflict => "doctor-conflict",
            Rule::StaleCommand => "doctor-stale-command",
            Rule::OutdatedCommand => "doctor-outdated-command",
            Rule::Divergent => "doctor-divergent",
            Rule::Missing => "doctor-missing",
        }
    }
}

/// One thing `doctor` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The client whose file it is.
    pub client: Client,
    /// The file (config or ledger).
    pub path: PathBuf,
    /// What kind of problem.
    pub rule: Rule,
    /// The server concerned, if any.
    pub server: Option<String>,
    /// Claude Code: the project whose local scope it is in, if any.
    pub project: Option<String>,
    /// What is wrong, in one sentence.
    pub message: String,
    /// How to fix it, in one sentence.
    pub help: String,
}

impl Problem {
    /// As a [`Finding`] for [`crate::report`] (no source location).
    pub fn finding(&self) -> Finding {
        Finding {
            file: self.path.to_string_lossy().into_owned(),
            location: None,
            rule: self.rule.name(),
            message: self.message.clone(),
            help: self.help.clone(),
        }
    }
}

/// How a client's registration stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// No config and no ledger: the client is not set up with kcap.
    NoFile,
    /// A config without kcap entries and no ledger.
    NotInstalled,
    /// kcap is installed: `registered` of the registry's `of` servers are in the file.
    Installed {
        /// Registry servers present (by name) in the user-level block.
        registered: usize,
        /// Registry servers to register.
        of: usize,
    },
    /// The config (or its ledger) could not be read or understood.
    Unusable,
}

/// One client's line of the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientStatus {
    /// The client.
    pub client: Client,
    /// Its config's path.
    pub path: PathBuf,
    /// How it stands.
    pub status: Status,
}

/// What [`diagnose`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// One per file checked, in input order.
    pub clients: Vec<ClientStatus>,
    /// Every problem, per file in input order.
    pub problems: Vec<Problem>,
    /// The [`Rule::Duplicate`] problems as what `doctor --fix` removes
    /// ([`install::remove_claude_project_duplicates`]), with the config they are in.
    pub removable: Vec<(PathBuf, ProjectDuplicate)>,
}

impl Report {
    /// The problems as findings, in order.
    pub fn findings(&self) -> Vec<Finding> {
        self.problems.iter().map(Problem::finding).collect()
    }

    /// Whether a file could not be read at all ([`Rule::Unreadable`]): the CLI exits 2.
    pub fn has_unreadable(&self) -> bool {
        self.problems.iter().any(|p| p.rule == Rule::Unreadable)
    }
}

/// A binary name no real entry has: where an entry built with it holds it is where the
/// client's entry shape puts the command.
const MARKER: &str = "\u{0}kcap-doctor-command-marker\u{0}";

/// Diagnoses every file of `input` (see the module documentation).
///
/// # Errors
/// [`RegistrationError`] when a client cannot register the registry's servers with
/// [`Input::opts`] at all (a `--kcap-bin` or `--server-url` it would expand), as `install`
/// refuses them.
pub fn diagnose(input: &Input<'_>) -> Result<Report, RegistrationError> {
    let mut report = Report::default();
    for file in input.files {
        diagnose_file(input, file, &mut report)?;
    }
    Ok(report)
}

/// What one client's file is checked with.
struct Ctx<'a> {
    input: &'a Input<'a>,
    format: &'static RegistrationFormat,
    file: &'a ClientFile,
    /// (registry entry, canonical entry as JSON) per registered server.
    servers: Vec<(&'a RegistryEntry, Value)>,
    /// The ledger's entries, when it could be read.
    owned: std::collections::BTreeMap<String, String>,
}

impl Ctx<'_> {
    fn problem(
        &self,
        rule: Rule,
        server: Option<&str>,
        project: Option<&str>,
        message: String,
        help: String,
    ) -> Problem {
        Problem {
            client: self.file.client,
            path: self.file.path.clone(),
            rule,
            server: server.map(str::to_string),
            project: project.map(str::to_string),
            message,
            help,
        }
    }

    /// "`kcap-review`" or "`kcap-review` in project `/p`'s local scope".
    fn what(name: &str, project: Option<&str>) -> String {
        match project {
            None => format!("MCP server `{}`", name.escape_debug()),
            Some(p) => format!(
                "MCP server `{}` in the local scope of project `{}`",
                name.escape_debug(),
                p.escape_debug()
            ),
        }
    }

    /// How to get kcap's entry back: `install` when the ledger says kcap wrote this one.
    fn fix_help(&self, name: &str, value: &Value, project: Option<&str>) -> String {
        let client = self.file.client.name();
        if project.is_some() {
            return format!(
                "edit or remove it under `projects` in {}",
                crate::text::ShownPath(&self.file.path)
            );
        }
        if self.owned.get(name) == Some(&fingerprint(value)) {
            format!(
                "kcap wrote it: `kcap-mcp-registry install --client {client} --kcap-bin PATH` \
                 rewrites it"
            )
        } else {
            format!(
                "kcap did not write it (no ledger records it as is): fix it by hand, or remove \
                 it and run `kcap-mcp-registry install --client {client}`"
            )
        }
    }

    /// The command checks of one kcap entry; with `whole`, also whether it differs in more
    /// than its command.
    fn check_entry(
        &self,
        entry: &RegistryEntry,
        canonical: &Value,
        value: &Value,
        project: Option<&str>,
        whole: bool,
        out: &mut Vec<Problem>,
    ) {
        let name = entry.id.as_str();
        let what = Self::what(name, project);
        let marker = (self.format.entry)(
            entry,
            &RegistrationOptions {
                command: MARKER.into(),
                ..self.input.opts.clone()
            },
        )
        .to_json();
        let actual = pointer_of(&marker, MARKER)
            .and_then(|p| value.pointer(&p))
            .and_then(Value::as_str);
        let Some(command) = actual else {
            if whole && !crate::drift::same_to_client(self.file.client, name, value, canonical) {
                out.push(self.problem(
                    Rule::Divergent,
                    Some(name),
                    project,
                    format!(
                        "{what} differs from the entry kcap registers, and its command is not \
                         where {} expects it",
                        self.file.client.display_name()
                    ),
                    self.fix_help(name, value, project),
                ));
            }
            return;
        };
        let want = self.input.opts.command.as_str();
        let resolved = (self.input.resolve)(command);
        if Path::new(command).is_absolute() && resolved.is_none() {
            out.push(self.problem(
                Rule::StaleCommand,
                Some(name),
                project,
                format!(
                    "{what} runs `{}`, which does not exist, so {} cannot start it",
                    command.escape_debug(),
                    self.file.client.display_name()
                ),
                self.fix_help(name, value, project),
            ));
        } else if command != want {
            let current = (self.input.resolve)(want);
            if resolved.is_none() || resolved != current {
                let current = match &current {
                    Some(p) if p.as_os_str() != want => format!(
                        " ({})",
                        crate::text::ShownPath(p).to_string().escape_debug()
                    ),
                    Some(_) => String::new(),
                    None => " (not found)".into(),
                };
                out.push(self.problem(
                    Rule::OutdatedCommand,
                    Some(name),
                    project,
                    format!(
                        "{what} runs `{}`, not the current kcap binary `{}`{current}",
                        command.escape_debug(),
                        want.escape_debug()
                    ),
                    self.fix_help(name, value, project),
                ));
            }
        }
        if whole {
            let same_command = (self.format.entry)(
                entry,
                &RegistrationOptions {
                    command: command.to_string(),
                    ..self.input.opts.clone()
                },
            )
            .to_json();
            if !crate::drift::same_to_client(self.file.client, name, value, &same_command) {
                out.push(self.problem(
                    Rule::Divergent,
                    Some(name),
                    project,
                    format!(
                        "{what} differs from the entry kcap registers (not only in its command), \
                         so {} runs something else than the registry says",
                        self.file.client.display_name()
                    ),
                    self.fix_help(name, value, project),
                ));
            }
        }
    }
}

fn diagnose_file(
    input: &Input<'_>,
    file: &ClientFile,
    report: &mut Report,
) -> Result<(), RegistrationError> {
    let format = file.client.registration();
    let nodes = crate::export::registration_entries(format, input.entries, input.opts)?;
    let servers: Vec<(&RegistryEntry, Value)> = registrations(input.entries)
        .zip(nodes)
        .map(|(e, (_, node))| (e, node.to_json()))
        .collect();
    let mut ctx = Ctx {
        input,
        format,
        file,
        servers,
        owned: Default::default(),
    };
    let mut problems = Vec::new();
    let (has_ledger, mut unusable) = read_ledger(&mut ctx, &mut problems);
    let client = file.client.display_name();
    let text = config_text(&ctx, &mut problems);
    let mut config_broken = match file.config {
        FileRead::Missing => file.explicit,
        _ => text.is_none(),
    };
    let block =
        match text.map(|t| install::block_entries(format, t)) {
            None => Vec::new(),
            Some(Ok(block)) => block.unwrap_or_default(),
            Some(Err(why)) => {
                config_broken = true;
                problems.push(ctx.problem(
                Rule::Malformed,
                None,
                None,
                format!("{client}'s registration file {why}"),
                "fix the file; install, uninstall and doctor --fix leave it alone until then"
                    .into(),
            ));
                Vec::new()
            }
        };
    unusable |= config_broken;
    let find = |name: &str| block.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let present = ctx
        .servers
        .iter()
        .filter(|(e, _)| find(&e.id).is_some())
        .count();
    let installed = present > 0 || has_ledger;
    for (entry, canonical) in &ctx.servers {
        match find(&entry.id) {
            Some(value) => {
                ctx.check_entry(entry, canonical, value, None, true, &mut problems);
            }
            None if installed && !unusable => problems.push(ctx.problem(
                Rule::Missing,
                Some(&entry.id),
                None,
                format!(
                    "kcap is installed for {client}, but registry server `{}` is not registered \
                     with it",
                    entry.id
                ),
                format!(
                    "`kcap-mcp-registry install --client {}` adds it",
                    file.client.name()
                ),
            )),
            None => {}
        }
    }
    if file.client == Client::Claude
        && let Some(text) = text.filter(|_| !config_broken)
    {
        claude_projects(&ctx, text, &block, &mut problems, &mut report.removable);
    }
    report.clients.push(ClientStatus {
        client: file.client,
        path: file.path.clone(),
        status: if unusable {
            Status::Unusable
        } else if installed {
            Status::Installed {
                registered: present,
                of: ctx.servers.len(),
            }
        } else if matches!(file.config, FileRead::Missing) {
            Status::NoFile
        } else {
            Status::NotInstalled
        },
    });
    report.problems.extend(problems);
    Ok(())
}

/// Reads the client file's ledger into `ctx.owned`, reporting an unreadable or malformed one.
/// Returns whether a ledger exists, and whether it is unusable.
fn read_ledger(ctx: &mut Ctx<'_>, problems: &mut Vec<Problem>) -> (bool, bool) {
    let mut unusable = false;
    let file = ctx.file;
    let ledger_path = install::ledger_path(&file.path);
    let has_ledger = match &file.ledger {
        FileRead::Missing => false,
        FileRead::Unreadable(e) => {
            unusable = true;
            problems.push(Problem {
                path: ledger_path.clone(),
                ..ctx.problem(
                    Rule::Unreadable,
                    None,
                    None,
                    format!("cannot read kcap's ledger: {e}"),
                    "make it readable (it records which entries kcap wrote)".into(),
                )
            });
            true
        }
        FileRead::Bytes(b) => {
            match std::str::from_utf8(b)
                .map_err(|e| format!("is not UTF-8 ({e}), so it is not a kcap ledger"))
                .and_then(|t| install::ledger_entries(t, file.client))
            {
                Ok(owned) => ctx.owned = owned,
                Err(why) => {
                    unusable = true;
                    problems.push(Problem {
                        path: ledger_path.clone(),
                        ..ctx.problem(
                            Rule::Malformed,
                            None,
                            None,
                            format!("kcap's ledger {why}"),
                            "install and uninstall refuse to run until it is fixed".into(),
                        )
                    });
                }
            }
            true
        }
    };
    (has_ledger, unusable)
}

/// The client file's text, or `None` (reported) when it is missing, unreadable or not UTF-8.
fn config_text<'a>(ctx: &Ctx<'a>, problems: &mut Vec<Problem>) -> Option<&'a str> {
    let file = ctx.file;
    let client = file.client.display_name();
    match &file.config {
        FileRead::Missing if file.explicit => {
            problems.push(ctx.problem(
                Rule::Unreadable,
                None,
                None,
                "the file given with --config does not exist".into(),
                "fix the path, or leave out --config to check the client's default file".into(),
            ));
            None
        }
        FileRead::Missing => None,
        FileRead::Unreadable(e) => {
            problems.push(ctx.problem(
                Rule::Unreadable,
                None,
                None,
                format!("cannot read {client}'s registration file: {e}"),
                "make it readable, or check another file with --config".into(),
            ));
            None
        }
        FileRead::Bytes(b) => match std::str::from_utf8(b) {
            Ok(t) => Some(t),
            Err(e) => {
                problems.push(ctx.problem(
                    Rule::Malformed,
                    None,
                    None,
                    format!(
                        "{client}'s registration file is not UTF-8 (invalid byte at offset {}), \
                         so {client} cannot read it",
                        e.valid_up_to()
                    ),
                    "fix the file".into(),
                ));
                None
            }
        },
    }
}

/// Claude Code's `~/.claude.json`: the kcap entries of each project's local scope.
fn claude_projects(
    ctx: &Ctx<'_>,
    text: &str,
    user: &[(String, Value)],
    problems: &mut Vec<Problem>,
    removable: &mut Vec<(PathBuf, ProjectDuplicate)>,
) {
    let Ok(Value::Object(root)) = serde_json::from_str::<Value>(crate::decode::strip_bom(text))
    else {
        return;
    };
    // A `projects` that is not an object is ignored by Claude Code (loader model).
    let Some(Value::Object(projects)) = root.get("projects") else {
        return;
    };
    for (dir, project) in projects {
        let Some(servers) = project.get("mcpServers") else {
            continue;
        };
        let Value::Object(servers) = servers else {
            problems.push(ctx.problem(
                Rule::Malformed,
                None,
                Some(dir),
                format!(
                    "`mcpServers` of project `{}` is not an object, so Claude Code refuses \
                     that project's local scope (none of its servers start there)",
                    dir.escape_debug()
                ),
                "make it an object, or remove it".into(),
            ));
            continue;
        };
        for (entry, canonical) in &ctx.servers {
            let Some(local) = servers.get(&entry.id) else {
                continue;
            };
            let what = Ctx::what(&entry.id, Some(dir));
            let user_value = user.iter().find(|(n, _)| *n == entry.id).map(|(_, v)| v);
            let Some(user_value) = user_value else {
                ctx.check_entry(entry, canonical, local, Some(dir), false, problems);
                continue;
            };
            let (l, u, c) = (
                fingerprint(local),
                fingerprint(user_value),
                fingerprint(canonical),
            );
            if l == c && u == c {
                problems.push(
                    ctx.problem(
                        Rule::Duplicate,
                        Some(&entry.id),
                        Some(dir),
                        format!(
                            "{what} duplicates the user scope's entry, and both are the entry kcap \
                         registers: it is removable"
                        ),
                        "`kcap-mcp-registry doctor --fix` removes it (the project then runs the \
                     identical user-scope entry)"
                            .into(),
                    ),
                );
                removable.push((
                    ctx.file.path.clone(),
                    ProjectDuplicate {
                        project: dir.clone(),
                        name: entry.id.clone(),
                        fingerprint: c,
                    },
                ));
                continue;
            }
            let differs = if l == u {
                "is the same as the user scope's entry, but both differ from the entry kcap \
                 registers"
            } else if l == c {
                "is the entry kcap registers, but the user scope's entry of that name differs"
            } else {
                "differs from the user scope's entry of that name"
            };
            problems.push(ctx.problem(
                Rule::Conflict,
                Some(&entry.id),
                Some(dir),
                format!(
                    "{what} {differs}; Claude Code runs the local one in that project, so it \
                     is kept"
                ),
                format!(
                    "remove one of the two by hand if they should be the same (`projects` in {})",
                    crate::text::ShownPath(&ctx.file.path)
                ),
            ));
            ctx.check_entry(entry, canonical, local, Some(dir), false, problems);
        }
    }
}

/// The JSON pointer (RFC 6901) of the first string equal to `needle` in `value`.
fn pointer_of(value: &Value, needle: &str) -> Option<String> {
    fn escape(key: &str) -> String {
        key.replace('~', "~0").replace('/', "~1")
    }
    match value {
        Value::String(s) if s == needle => Some(String::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| pointer_of(v, needle).map(|rest| format!("/{i}{rest}"))),
        Value::Object(map) => map
            .iter()
            .find_map(|(k, v)| pointer_of(v, needle).map(|rest| format!("/{}{rest}", escape(k)))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<RegistryEntry> {
        crate::inspect::compiled_entries()
    }

    /// `/usr/bin/kcap` and `/opt/kcap-2/kcap` exist; `kcap` is found as `/usr/bin/kcap`.
    fn resolve(command: &str) -> Option<PathBuf> {
        match command {
            "kcap" | "/usr/bin/kcap" => Some("/usr/bin/kcap".into()),
            "/opt/kcap-2/kcap" => Some("/opt/kcap-2/kcap".into()),
            _ => None,
        }
    }

    fn file(client: Client, config: FileRead, ledger: FileRead) -> ClientFile {
        ClientFile {
            client,
            path: PathBuf::from(format!("/h/{}", client.name())),
            explicit: false,
            config,
            ledger,
        }
    }

    fn bytes(s: &str) -> FileRead {
        FileRead::Bytes(s.as_bytes().to_vec())
    }

    fn run(files: &[ClientFile], command: &str) -> Report {
        let entries = entries();
        let opts = RegistrationOptions {
            command: command.into(),
            ..RegistrationOptions::default()
        };
        diagnose(&Input {
            entries: &entries,
            opts: &opts,
            files,
            resolve: &resolve,
        })
        .unwrap()
    }

    /// The registration file `export` writes for `client`, as text.
    fn exported(client: Client, command: &str) -> String {
        let opts = RegistrationOptions {
            command: command.into(),
            ..RegistrationOptions::default()
        };
        match client {
            Client::Codex => {
                crate::clients::codex::registration::codex_toml(&entries(), &opts).unwrap()
            }
            _ => {
                crate::export::registration_file(client.registration(), &entries(), &opts).unwrap()
            }
        }
    }

    /// The report on `client`'s file as `export` writes it with `exported_command`, no
    /// ledger, when the current command is `kcap`.
    fn run_exported(client: Client, exported_command: &str) -> Report {
        run(
            &[file(
                client,
                bytes(&exported(client, exported_command)),
                FileRead::Missing,
            )],
            "kcap",
        )
    }

    fn rules(report: &Report) -> Vec<(&'static str, Option<&str>, Option<&str>)> {
        report
            .problems
            .iter()
            .map(|p| (p.rule.name(), p.server.as_deref(), p.project.as_deref()))
            .collect()
    }

    #[test]
    fn an_export_of_every_client_is_healthy() {
        for client in Client::ALL {
            let report = run_exported(client, "kcap");
            assert_eq!(rules(&report), [], "{client:?}");
            assert_eq!(
                report.clients[0].status,
                Status::Installed {
                    registered: 6,
                    of: 6
                },
                "{client:?}"
            );
        }
    }

    #[test]
    fn no_file_and_a_file_without_kcap_entries_are_not_installations() {
        let report = run(
            &[
                file(Client::Gemini, FileRead::Missing, FileRead::Missing),
                file(
                    Client::Cursor,
                    bytes(r#"{"mcpServers": {"mine": {"command": "x"}}}"#),
                    FileRead::Missing,
                ),
            ],
            "kcap",
        );
        assert_eq!(rules(&report), []);
        assert_eq!(report.clients[0].status, Status::NoFile);
        assert_eq!(report.clients[1].status, Status::NotInstalled);
    }

    #[test]
    fn a_ledger_alone_makes_every_server_missing() {
        let ledger = r#"{"kcap-mcp-registry-ledger": 1, "client": "kiro", "entries": {"kcap-review": "sha256:00"}}"#;
        let report = run(&[file(Client::Kiro, bytes("{}"), bytes(ledger))], "kcap");
        let missing: Vec<_> = report
            .problems
            .iter()
            .filter(|p| p.rule == Rule::Missing)
            .map(|p| p.server.clone().unwrap())
            .collect();
        assert_eq!(
            missing,
            [
                "kcap-analytics",
                "kcap-flows",
                "kcap-memory",
                "kcap-review",
                "kcap-sessions",
                "kcap-workitems"
            ]
        );
    }

    #[test]
    fn one_kcap_entry_makes_the_others_missing() {
        let text = exported(Client::Copilot, "kcap");
        let mut v: Value = serde_json::from_str(&text).unwrap();
        let servers = v["mcpServers"].as_object_mut().unwrap();
        servers.retain(|k, _| k == "kcap-flows");
        let report = run(
            &[file(
                Client::Copilot,
                bytes(&v.to_string()),
                FileRead::Missing,
            )],
            "kcap",
        );
        assert_eq!(
            report.clients[0].status,
            Status::Installed {
                registered: 1,
                of: 6
            }
        );
        assert_eq!(
            report
                .problems
                .iter()
                .filter(|p| p.rule == Rule::Missing)
                .count(),
            5
        );
    }

    #[test]
    fn stale_and_outdated_commands_in_every_client_shape() {
        for client in Client::ALL {
            // Exported with a binary that is gone: every entry is stale.
            let report = run_exported(client, "/old/kcap-1/kcap");
            assert_eq!(
                report.problems.iter().map(|p| p.rule).collect::<Vec<_>>(),
                [Rule::StaleCommand; 6],
                "{client:?}: {:?}",
                report.problems
            );
            assert!(
                report.problems[0]
                    .message
                    .contains("runs `/old/kcap-1/kcap`, which does not exist"),
                "{}",
                report.problems[0].message
            );
            // With another binary that exists: outdated.
            let report = run_exported(client, "/opt/kcap-2/kcap");
            assert_eq!(
                report.problems.iter().map(|p| p.rule).collect::<Vec<_>>(),
                [Rule::OutdatedCommand; 6],
                "{client:?}"
            );
            assert!(
                report.problems[0].message.contains(
                    "runs `/opt/kcap-2/kcap`, not the current kcap binary `kcap` (/usr/bin/kcap)"
                ),
                "{}",
                report.problems[0].message
            );
            // The same file under another name: nothing to report.
            let report = run_exported(client, "/usr/bin/kcap");
            assert_eq!(rules(&report), [], "{client:?}");
        }
    }

    #[test]
    fn an_entry_that_differs_in_more_than_its_command_is_divergent() {
        let text =
            exported(Client::Gemini, "kcap").replacen("\"trust\": true", "\"trust\": false", 1);
        let report = run(
            &[file(Client::Gemini, bytes(&text), FileRead::Missing)],
            "kcap",
        );
        assert_eq!(
            rules(&report),
            [("doctor-divergent", Some("kcap-analytics"), None)]
        );
        // OpenCode's command is an array: a string there is no command at all.
        let text = exported(Client::OpenCode, "kcap").replacen(
            "\"command\": [\n        \"kcap\",\n        \"mcp\",\n        \"analytics\"\n      ]",
            "\"command\": \"kcap mcp analytics\"",
            1,
        );
        let report = run(
            &[file(Client::OpenCode, bytes(&text), FileRead::Missing)],
            "kcap",
        );
        assert_eq!(
            rules(&report),
            [("doctor-divergent", Some("kcap-analytics"), None)]
        );
        assert!(
            report.problems[0]
                .message
                .contains("its command is not where")
        );
    }

    #[test]
    fn help_says_install_rewrites_an_entry_kcap_wrote() {
        let text = exported(Client::Cursor, "/old/kcap");
        let v: Value = serde_json::from_str(&text).unwrap();
        let fp = fingerprint(&v["mcpServers"]["kcap-review"]);
        let ledger = format!(
            r#"{{"kcap-mcp-registry-ledger": 1, "client": "cursor", "entries": {{"kcap-review": "{fp}"}}}}"#
        );
        let report = run(
            &[file(Client::Cursor, bytes(&text), bytes(&ledger))],
            "kcap",
        );
        let review = report
            .problems
            .iter()
            .find(|p| p.server.as_deref() == Some("kcap-review"))
            .unwrap();
        assert!(review.help.starts_with("kcap wrote it"), "{}", review.help);
        let memory = report
            .problems
            .iter()
            .find(|p| p.server.as_deref() == Some("kcap-memory"))
            .unwrap();
        assert!(
            memory.help.starts_with("kcap did not write it"),
            "{}",
            memory.help
        );
    }

    /// A `~/.claude.json` with kcap's user scope and `projects`.
    fn claude_json(projects: Value) -> String {
        let mut v: Value = serde_json::from_str(&exported(Client::Claude, "kcap")).unwrap();
        v["projects"] = projects;
        v.to_string()
    }

    fn review(command: &str, args: &[&str]) -> Value {
        let mut v: Value = serde_json::from_str(&exported(Client::Claude, command)).unwrap();
        let mut e = v["mcpServers"]["kcap-review"].take();
        e["args"] = serde_json::json!(args);
        e
    }

    #[test]
    fn claude_project_scopes_canonical_duplicates_and_conflicts() {
        let canonical = review("kcap", &["mcp", "review"]);
        let text = claude_json(serde_json::json!({
            "/p/dup": {"mcpServers": {"kcap-review": canonical, "mine": {"command": "x"}}},
            "/p/args": {"mcpServers": {"kcap-review": review("kcap", &["mcp", "review", "-v"])}},
            "/p/stale": {"mcpServers": {"kcap-review": review("/gone/kcap", &["mcp", "review"])}},
            "/p/bad": {"mcpServers": "nope"},
            "/p/none": {"allowedTools": []},
        }));
        let report = run(
            &[file(Client::Claude, bytes(&text), FileRead::Missing)],
            "kcap",
        );
        assert_eq!(
            rules(&report),
            [
                ("doctor-conflict", Some("kcap-review"), Some("/p/args")),
                ("doctor-malformed", None, Some("/p/bad")),
                ("doctor-duplicate", Some("kcap-review"), Some("/p/dup")),
                ("doctor-conflict", Some("kcap-review"), Some("/p/stale")),
                (
                    "doctor-stale-command",
                    Some("kcap-review"),
                    Some("/p/stale")
                ),
            ]
        );
        assert_eq!(
            report.removable,
            [(
                PathBuf::from("/h/claude"),
                ProjectDuplicate {
                    project: "/p/dup".into(),
                    name: "kcap-review".into(),
                    fingerprint: fingerprint(&canonical),
                }
            )]
        );
    }

    #[test]
    fn a_local_entry_equal_to_an_outdated_user_entry_is_a_conflict_not_removable() {
        let old = review("/usr/bin/kcap", &["mcp", "review", "--old"]);
        let mut v: Value = serde_json::from_str(&claude_json(serde_json::json!({
            "/p": {"mcpServers": {"kcap-review": old}}
        })))
        .unwrap();
        v["mcpServers"]["kcap-review"] = old;
        let report = run(
            &[file(
                Client::Claude,
                bytes(&v.to_string()),
                FileRead::Missing,
            )],
            "kcap",
        );
        assert!(report.removable.is_empty());
        let conflict = report
            .problems
            .iter()
            .find(|p| p.rule == Rule::Conflict)
            .unwrap();
        assert!(
            conflict
                .message
                .contains("is the same as the user scope's entry, but both differ"),
            "{}",
            conflict.message
        );
    }

    #[test]
    fn a_project_only_kcap_entry_is_not_a_duplicate() {
        let v: Value = serde_json::json!({
            "projects": {"/p": {"mcpServers": {"kcap-review": review("kcap", &["mcp", "review"])}}}
        });
        let report = run(
            &[file(
                Client::Claude,
                bytes(&v.to_string()),
                FileRead::Missing,
            )],
            "kcap",
        );
        assert_eq!(rules(&report), []);
        assert_eq!(report.clients[0].status, Status::NotInstalled);
    }

    #[test]
    fn unreadable_and_malformed_files_are_findings_not_panics() {
        let report = run(
            &[
                file(
                    Client::Codex,
                    FileRead::Unreadable("Permission denied (os error 13)".into()),
                    FileRead::Missing,
                ),
                file(
                    Client::Gemini,
                    bytes("{\"mcpServers\": {"),
                    FileRead::Missing,
                ),
                file(
                    Client::Cursor,
                    FileRead::Bytes(vec![b'{', 0xff, b'}']),
                    FileRead::Missing,
                ),
                file(Client::Kiro, bytes("{}"), bytes("not json")),
                file(
                    Client::Copilot,
                    bytes(r#"{"mcpServers": []}"#),
                    FileRead::Missing,
                ),
                file(Client::OpenCode, bytes(""), FileRead::Missing),
                ClientFile {
                    explicit: true,
                    ..file(Client::Antigravity, FileRead::Missing, FileRead::Missing)
                },
            ],
            "kcap",
        );
        assert_eq!(
            rules(&report),
            [
                ("doctor-unreadable", None, None),
                ("doctor-malformed", None, None),
                ("doctor-malformed", None, None),
                ("doctor-malformed", None, None),
                ("doctor-malformed", None, None),
                ("doctor-malformed", None, None),
                ("doctor-unreadable", None, None),
            ]
        );
        assert!(report.has_unreadable());
        assert!(report.problems[0].message.contains("Permission denied"));
        assert!(
            report.problems[1]
                .message
                .contains("is not valid JSON with comments")
        );
        assert!(report.problems[2].message.contains("is not UTF-8"));
        assert_eq!(
            report.problems[3].path,
            PathBuf::from("/h/kiro.kcap-ledger.json")
        );
        assert!(
            report.problems[4]
                .message
                .contains("`mcpServers` is not an object")
        );
        assert!(report.problems[5].message.contains("is empty"));
        assert!(
            report.clients.iter().all(|c| c.status == Status::Unusable),
            "{:?}",
            report.clients
        );
    }

    #[test]
    fn findings_carry_the_rule_and_the_file() {
        let report = run(
            &[file(Client::Gemini, bytes("{"), FileRead::Missing)],
            "kcap",
        );
        let f = &report.findings()[0];
        assert_eq!(f.rule, "doctor-malformed");
        assert_eq!(f.file, "/h/gemini");
        assert_eq!(f.location, None);
    }

    #[test]
    fn pointer_of_finds_the_command_in_each_shape() {
        let v = serde_json::json!({"type": "local", "command": ["M", "a"], "x/y": "M"});
        assert_eq!(pointer_of(&v, "M").as_deref(), Some("/command/0"));
        let v = serde_json::json!({"x/y~": "M"});
        assert_eq!(pointer_of(&v, "M").as_deref(), Some("/x~1y~0"));
        assert_eq!(pointer_of(&v, "N"), None);
    }
}

//! The checks of one client's file: its ledger, its text, kcap's entries in it (commands,
//! divergence, missing servers), and Claude Code's project scopes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::positions::{self, Positions};
use super::{ClientFile, ClientStatus, FileRead, Input, Problem, Report, Rule, Status};
use crate::clients::registration::{
    RegistrationError, RegistrationFormat, RegistrationOptions, registrations,
};
use crate::ops::install::{self, ProjectDuplicate, fingerprint};
use crate::schema::RegistryEntry;

/// A binary name no real entry has: where an entry built with it holds it is where the
/// client's entry shape puts the command.
const MARKER: &str = "\u{0}kcap-doctor-command-marker\u{0}";

/// What one client's file is checked with.
struct Ctx<'a> {
    input: &'a Input<'a>,
    format: &'static RegistrationFormat,
    file: &'a ClientFile,
    /// (registry entry, canonical entry as JSON) per registered server.
    servers: Vec<(&'a RegistryEntry, Value)>,
    /// The ledger's entries, when it could be read.
    owned: std::collections::BTreeMap<String, String>,
    /// Where things are in the file.
    pos: Positions,
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
            location: self.pos.locate(server, project),
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
            if whole && !crate::ops::check::same_to_client(self.file.client, name, value, canonical)
            {
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
            if !crate::ops::check::same_to_client(self.file.client, name, value, &same_command) {
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

pub(super) fn diagnose_file(
    input: &Input<'_>,
    file: &ClientFile,
    report: &mut Report,
) -> Result<(), RegistrationError> {
    let format = file.client.registration();
    let nodes =
        crate::clients::registration::registration_entries(format, input.entries, input.opts)?;
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
        pos: Positions::of(format, &file.config),
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
    if file.client.registration().project_blocks.is_some()
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
                location: positions::START,
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
                        location: positions::ledger(&file.ledger),
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
pub(super) fn pointer_of(value: &Value, needle: &str) -> Option<String> {
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

//! Registration files as `check --against` reads them: which client's a file is
//! ([`detect_client`], by the names each room's [`RegistrationFormat`] claims), what that
//! client's loader model makes of it ([`RegistrationFormat::load`]), and the server names a
//! JSON file holds twice.

use std::path::{Path, PathBuf};

use super::{AgainstOptions, Checked, Drift, DriftKind, RegistrationError, drift_in, source_texts};
use crate::clients::Client;
use crate::clients::loaded::Loaded;
use crate::clients::registration::{FileToLoad, ProfileFile, RegistrationFormat, Syntax};
use crate::diagnostic::SourceText;
use crate::schema::RegistryEntry;

/// Which client reads `path` holding `text`.
///
/// By the file's name first, as each client's [`RegistrationFormat::file_names`] claims it
/// (`opencode.json` is OpenCode's, `settings.json` in a `.gemini` directory Gemini CLI's,
/// …); then by the extension one client claims ([`RegistrationFormat::claims_extension`]:
/// other `.json` files are Claude Code's, `.toml` files Codex CLI's); otherwise by content,
/// as the client claiming the syntax's extension. A file named otherwise is checked as
/// another client's with `--client`.
///
/// # Errors
/// A sentence saying why no client fits.
pub fn detect_client(path: &Path, text: &str) -> Result<Client, String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let named = |c: &Client| {
        c.registration()
            .file_names
            .iter()
            .any(|&(dir, file)| file == name && (dir.is_empty() || dir == parent))
    };
    if let Some(client) = Client::ALL.iter().copied().find(named) {
        return Ok(client);
    }
    let claiming = |ext: &str| {
        Client::ALL
            .iter()
            .copied()
            .find(|c| c.registration().claims_extension == Some(ext))
    };
    if let Some(client) = path.extension().and_then(|e| e.to_str()).and_then(claiming) {
        return Ok(client);
    }
    let text = crate::decode::strip_bom(text);
    let json = serde_json::from_str::<serde::de::IgnoredAny>(text);
    let (json_client, toml_client) = (claiming("json"), claiming("toml"));
    if let (Ok(_), Some(client)) = (&json, json_client) {
        return Ok(client);
    }
    let toml = toml::from_str::<toml::Table>(text);
    if let (Ok(_), Some(client)) = (&toml, toml_client) {
        return Ok(client);
    }
    let what = |c: Option<Client>, syntax: &str| match c {
        Some(c) => format!("a {} file ({syntax})", c.display_name()),
        None => syntax.to_string(),
    };
    Err(format!(
        "is neither {} nor {}: it is not JSON ({}) and not TOML ({}); name it *.json or \
         *.toml to have it checked as that client's file, or name the client with `--client`",
        what(json_client, "JSON"),
        what(toml_client, "TOML"),
        json.err().map(|e| e.to_string()).unwrap_or_default(),
        toml.err()
            .map(|e| e.message().trim_end().to_string())
            .unwrap_or_default(),
    ))
}

/// Reads `path` and checks every effective server set in it against `entries` (see
/// [`AgainstOptions`]).
///
/// # Errors
/// [`RegistrationError`] when the file (or the named profile file) cannot be read or
/// its client cannot be told. Everything the client itself refuses is a `drift-rejected`
/// finding instead.
pub fn check_against(
    entries: &[RegistryEntry],
    command: &str,
    path: &Path,
    opts: &AgainstOptions,
) -> Result<Vec<Checked>, RegistrationError> {
    let shown = path.display().to_string();
    let bytes = crate::decode::read_regular(path).map_err(|source| RegistrationError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let client = match opts.client {
        Some(client) => client,
        None => detect_client(path, &text).map_err(|why| RegistrationError::UnknownClient {
            path: path.to_path_buf(),
            why,
        })?,
    };
    let env = |name: &str| std::env::var(name).ok();
    let mut out = Vec::new();
    let mut texts: Option<Vec<SourceText>> = None;
    let mut push = |project: Option<String>, loaded: Loaded| {
        // Every verdict on one file shares its text (one per ~/.claude.json project): index
        // its lines once.
        let texts = match &texts {
            Some(t) if t.len() == loaded.sources.len() => t,
            _ => texts.insert(source_texts(&loaded)),
        };
        let mut drift = drift_in(entries, command, client, project.as_deref(), &loaded, texts);
        // A verdict with no source (the file is not UTF-8) still names the file.
        for d in &mut drift {
            if d.file.is_empty() {
                d.file.clone_from(&shown);
            }
        }
        out.push(Checked {
            path: shown.clone(),
            client,
            project,
            loaded,
            drift,
        });
    };
    let format = client.registration();
    let profile = profile_file(format, path, opts)?;
    let file = FileToLoad {
        shown: &shown,
        bytes: &bytes,
        project: opts.project.as_deref().filter(|_| format.takes_project),
        profile: profile.as_ref(),
        env: &env,
    };
    for (project, loaded) in (format.load)(&file) {
        push(project, loaded);
    }
    // A server named twice: the client runs the later entry (`JSON.parse`), and a reader of
    // the file may see only the earlier one. Reported once per file, with the first verdict.
    if matches!(format.syntax, Syntax::Json { .. })
        && let Some(first) = out.first_mut()
        && let Ok(text) = crate::decode::decode_utf8(&bytes)
    {
        let found = duplicate_servers(text, format.block, format.project_blocks);
        if !found.is_empty() {
            let source = SourceText::new(text.to_string());
            let dups = found.into_iter().map(|(scope, name, range)| Drift {
                file: shown.clone(),
                client,
                project: None,
                server: name,
                kind: DriftKind::Duplicate { scope },
                location: source.location(range),
            });
            first.drift.splice(0..0, dups);
        }
    }
    Ok(out)
}

/// The profile file `opts.codex_profile` names for `path`, when the client has profiles
/// ([`RegistrationFormat::profile_file`]).
///
/// # Errors
/// [`RegistrationError::Read`] when it exists but cannot be read.
fn profile_file(
    format: &RegistrationFormat,
    path: &Path,
    opts: &AgainstOptions,
) -> Result<Option<ProfileFile>, RegistrationError> {
    let (Some(name), Some(file_of)) = (&opts.codex_profile, format.profile_file) else {
        return Ok(None);
    };
    let file: PathBuf = file_of(path, name);
    let bytes = match crate::decode::read_regular(&file) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(RegistrationError::Read { path: file, source }),
    };
    Ok(Some(ProfileFile {
        name: name.clone(),
        shown: file.display().to_string(),
        bytes,
    }))
}

/// The shadowed copies of server entries named twice in `text`'s `block` object (and, with
/// `project_blocks` (`projects`), in each `projects.<dir>.<block>`): the scope (`the user scope`,
/// `the local scope of /p`, `the file`), the name, and the byte range of each earlier key.
/// Read leniently (comments and trailing commas allowed): a file the client refuses is
/// reported as such, not here.
fn duplicate_servers(
    text: &str,
    block: &str,
    project_blocks: Option<&str>,
) -> Vec<(String, String, std::ops::Range<usize>)> {
    use jsonc_parser::ast::{Object, ObjectPropName, Value};
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        ..Default::default()
    };
    let Ok(parsed) = jsonc_parser::parse_to_ast(text, &Default::default(), &options) else {
        return Vec::new();
    };
    let Some(Value::Object(root)) = parsed.value else {
        return Vec::new();
    };
    let name_of = |p: &jsonc_parser::ast::ObjectProp<'_>| match &p.name {
        ObjectPropName::String(s) => (s.value.to_string(), s.range.start..s.range.end),
        ObjectPropName::Word(w) => (w.value.to_string(), w.range.start..w.range.end),
    };
    let mut out = Vec::new();
    let scan = |obj: &Object<'_>, scope: &str, out: &mut Vec<_>| {
        for p in obj.properties.iter().filter(|p| name_of(p).0 == block) {
            let Value::Object(servers) = &p.value else {
                continue;
            };
            let mut last: std::collections::HashMap<String, usize> =
                std::collections::HashMap::new();
            for (i, s) in servers.properties.iter().enumerate() {
                last.insert(name_of(s).0, i);
            }
            for (i, s) in servers.properties.iter().enumerate() {
                let (name, range) = name_of(s);
                if last.get(&name) != Some(&i) {
                    out.push((scope.to_string(), name, range));
                }
            }
        }
    };
    let projects = project_blocks.and_then(|key| root.get(key));
    let top = if projects.is_some() {
        "the user scope"
    } else {
        "the file"
    };
    scan(&root, top, &mut out);
    if let Some(Value::Object(projects)) = projects.map(|p| &p.value) {
        for p in &projects.properties {
            if let Value::Object(project) = &p.value {
                let scope = format!("the local scope of {}", name_of(p).0);
                scan(project, &scope, &mut out);
            }
        }
    }
    out
}

/// Whether `client` treats the server entries `a` and `b` (JSON, as in its registration
/// file's block) the same: byte-for-byte the same value, or both started by its loader model
/// with the same command, args, env, working directory and tool filters (or both reached at
/// the same URL), where every key in which they differ is one the loader model reads (and so
/// compared through what it starts) or one the client ignores (every key outside its
/// [`RegistrationFormat::entry_keys`]). `install` adopts,
/// and `doctor` accepts, an entry the client treats as kcap's, whatever its spelling
/// (`"type": "stdio"`, `"env": {}`, no `description`).
pub fn same_to_client(
    client: Client,
    name: &str,
    a: &serde_json::Value,
    b: &serde_json::Value,
) -> bool {
    use serde_json::Value;
    if a == b {
        return true;
    }
    let (Value::Object(ma), Value::Object(mb)) = (a, b) else {
        return false;
    };
    const MODELLED: [&str; 8] = [
        "command",
        "args",
        "env",
        "type",
        "url",
        "cwd",
        "enabled_tools",
        "disabled_tools",
    ];
    // A key the client does not read is no difference to it.
    let ignored = |key: &str| {
        client
            .registration()
            .entry_keys
            .is_some_and(|keys| !keys.contains(&key))
    };
    let differing = ma
        .keys()
        .chain(mb.keys())
        .filter(|k| ma.get(*k) != mb.get(*k));
    for key in differing {
        if !MODELLED.contains(&key.as_str()) && !ignored(key) {
            return false;
        }
    }
    let view = |value: &Value| {
        let loaded = load_one(client, name, value)?;
        if !loaded.rejected.is_empty() || !loaded.skipped.is_empty() {
            return None;
        }
        match (loaded.started.as_slice(), loaded.remote.as_slice()) {
            ([s], []) if s.name == name && s.expanded.is_empty() => Some(format!(
                "{:?}",
                (
                    &s.command,
                    &s.args,
                    &s.env,
                    &s.cwd,
                    &s.enabled_tools,
                    &s.disabled_tools
                )
            )),
            ([], [r]) if r.name == name => Some(format!("url {:?}", r.url)),
            _ => None,
        }
    };
    match (view(a), view(b)) {
        (Some(va), Some(vb)) => va == vb,
        _ => false,
    }
}

/// What `client`'s loader model makes of a file holding only the entry `name` = `value` in
/// its block (read as a file of the client's [`Syntax`], with no environment); `None` when
/// that file cannot be written (a TOML value that has no TOML form).
fn load_one(client: Client, name: &str, value: &serde_json::Value) -> Option<Loaded> {
    let format = client.registration();
    let mut servers = serde_json::Map::new();
    servers.insert(name.to_string(), value.clone());
    let mut root = serde_json::Map::new();
    root.insert(format.block.to_string(), serde_json::Value::Object(servers));
    let root = serde_json::Value::Object(root);
    let bytes = match format.syntax {
        Syntax::Json { .. } => serde_json::to_vec(&root).ok()?,
        Syntax::Toml => toml::to_string(&root).ok()?.into_bytes(),
    };
    let file = FileToLoad {
        shown: "entry",
        bytes: &bytes,
        project: None,
        profile: None,
        env: &|_| None,
    };
    (format.load)(&file)
        .into_iter()
        .next()
        .map(|(_, loaded)| loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name and extension is claimed by one client at most, and a file so named is that
    /// client's.
    #[test]
    fn every_claimed_name_and_extension_detects_its_one_client() {
        let mut seen: Vec<(String, Client)> = Vec::new();
        for client in Client::ALL {
            let format = client.registration();
            for &(dir, file) in format.file_names {
                let path = Path::new("/x")
                    .join(if dir.is_empty() { "d" } else { dir })
                    .join(file);
                assert_eq!(detect_client(&path, "{}"), Ok(client), "{}", path.display());
                seen.push((format!("{dir}/{file}"), client));
            }
            if let Some(ext) = format.claims_extension {
                let path = PathBuf::from(format!("/x/other.{ext}"));
                assert_eq!(detect_client(&path, ""), Ok(client), "{}", path.display());
                seen.push((format!("*.{ext}"), client));
            }
        }
        seen.sort();
        for pair in seen.windows(2) {
            assert_ne!(
                pair[0].0, pair[1].0,
                "claimed by {} and {}",
                pair[0].1, pair[1].1
            );
        }
        assert_eq!(seen.len(), 10, "{seen:?}");
    }

    /// An unnamed file is told by its syntax; one that is neither says why, naming the
    /// clients that claim each syntax.
    #[test]
    fn an_unnamed_file_is_told_by_content() {
        let path = Path::new("/x/servers");
        assert_eq!(detect_client(path, "{}"), Ok(Client::Claude));
        assert_eq!(detect_client(path, "[a]\nb = 1\n"), Ok(Client::Codex));
        let e = detect_client(path, "{ nope").unwrap_err();
        assert!(
            e.starts_with(
                "is neither a Claude Code file (JSON) nor a Codex CLI file (TOML): it is not JSON"
            ),
            "{e}"
        );
    }
}

//! Differential test of Gemini CLI 0.61.0's loader model (`clients::gemini::loader`) against
//! the real client, as `tests/clients/differential.rs` does for Claude Code and Codex CLI.
//!
//! A seeded generator (`tests/common/variants.rs`) mutates the registration export: hostile
//! types for every field and for whole entries, neighbours, repeated keys, every `$…` form
//! in `command`, `args`, `env`, `cwd` and `url`, `disabled`, `trust`, tool filters. Twenty
//! cases share one settings file (each case's servers are named `c<i>-…`), written at the
//! user, project or system level (the system level needs a directory chain owned by root and
//! not writable by others, as Gemini CLI requires; elsewhere those runs use the user level)
//! with CRLF or comments. File-level variants (one or two byte order marks, a trailing
//! comma, a top level or `mcpServers` of the wrong type, an empty file, invalid UTF-8, a
//! repeated `mcpServers`) run alone, as does a case the model says refuses the file.
//!
//! The judge is `gemini mcp list`, which starts every command server and connects to every
//! network server, one after the other in key order: the recorder as the server command
//! logs argv, environment and working directory, and a local HTTP listener logs the URLs
//! requested. Compared per case: the file refused or not, the started processes in order
//! (argv, the variables the entry adds, cwd), and the servers reached with their URL path.
//!
//! Without `KCAP_GEMINI_BIN` the test is reported as ignored, with the reason; with
//! `KCAP_REQUIRE_PEERS=1` a missing client fails it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::variants;

use common::peers::{inherited_path, peer};
use kcap_mcp_registry::clients::gemini::loader as model;
use kcap_mcp_registry::clients::loaded::Loaded;
use serde_json::Value;
use variants::{
    Case, Entry, Listener, Rng, SEED, Tally, batches, block_text, client_vars, disagreements,
    mutate, parallel, subst,
};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![gemini_cli_agrees_with_its_loader_model_on_every_variant,]
}

/// Seeded cases, besides the file-level variants.
const CASES: usize = 100;
/// Cases per settings file.
const BATCH: usize = 20;

const FIELDS: [&str; 13] = [
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "type",
    "trust",
    "disabled",
    "includeTools",
    "excludeTools",
    "description",
    "extra",
];

#[derive(Clone, Copy, Debug)]
enum Level {
    User,
    Project,
    System,
}

type Run = variants::Run<Level>;

fn base(case: usize) -> Vec<(String, Entry)> {
    variants::export(
        &kcap_mcp_registry::clients::gemini::registration::FORMAT,
        "mcpServers",
        case,
    )
}

/// A command server whose `args` is neither an array nor `null` makes `gemini mcp list`
/// crash when it prints it (`server.args?.join is not a function`), after starting it: such
/// a server goes last in its file, one per file.
fn crashes_listing(entry: &Entry) -> bool {
    let truthy = |v: Option<&Value>| {
        v.is_some_and(|v| match v {
            Value::Null => false,
            Value::Bool(b) => *b,
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::String(s) => !s.is_empty(),
            _ => true,
        })
    };
    !truthy(entry.get("url"))
        && !truthy(entry.get("httpUrl"))
        && truthy(entry.get("command"))
        && entry
            .get("args")
            .is_some_and(|a| !a.is_null() && !a.is_array())
}

fn case(i: usize, rng: &mut Rng) -> Case {
    loop {
        let mut servers = base(i);
        let mut what = Vec::new();
        if rng.chance(40) {
            // A network server, of each kind Gemini CLI has.
            let k = rng.below(servers.len());
            let name = servers[k].0.clone();
            let url = serde_json::json!(format!("@URL@/{name}"));
            let (key, kind) = *rng.pick(&[
                ("url", None),
                ("url", Some("sse")),
                ("url", Some("http")),
                ("url", Some("bogus")),
                ("httpUrl", None),
            ]);
            servers[k].1.set(key, url);
            if let Some(kind) = kind {
                servers[k].1.set("type", kind.into());
            }
            what.push(format!("{name}.{key} = @URL@/{name}, type {kind:?}"));
        }
        for _ in 0..1 + rng.below(3) {
            mutate(rng, &mut servers, &FIELDS, &mut what);
        }
        // The last entry of a name is the one the client keeps.
        let crashing: BTreeSet<String> = servers
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                let last = &servers.iter().rev().find(|(m, _)| m == *n).unwrap().1;
                crashes_listing(last)
            })
            .cloned()
            .collect();
        if crashing.len() > 1 {
            continue;
        }
        // Every entry of the crashing name goes last, in order.
        let (mut last, mut rest): (Vec<_>, Vec<_>) =
            servers.into_iter().partition(|(n, _)| crashing.contains(n));
        rest.append(&mut last);
        return Case {
            what,
            servers: rest,
        };
    }
}

fn file_text(cases: &[Case], comments: bool) -> String {
    let servers: Vec<(String, Entry)> = cases.iter().flat_map(|c| c.servers.clone()).collect();
    format!(
        "{{\n  \"ui\": {{\"theme\": \"GitHub\"}},\n  \"mcpServers\": {}\n}}\n",
        block_text(&servers, comments)
    )
}

/// Whether the model refuses `case` on its own (such a case runs alone).
fn refused_alone(case: &Case) -> bool {
    let text = file_text(std::slice::from_ref(case), false);
    !model::load("s", text.as_bytes(), &|_| None)
        .rejected
        .is_empty()
}

fn runs() -> Vec<Run> {
    let mut rng = Rng(SEED ^ 0x6e6d);
    let cases: Vec<Case> = (0..CASES).map(|i| case(i, &mut rng)).collect();
    let solo = |c: &Case| {
        let text = file_text(std::slice::from_ref(c), false).into_bytes();
        (Level::User, text)
    };
    let last = |c: &Case| c.servers.last().is_some_and(|(_, e)| crashes_listing(e));
    let mut out = batches(
        cases,
        BATCH,
        &mut rng,
        refused_alone,
        last,
        solo,
        |batch, rng| {
            let mut what = Vec::new();
            let level = *rng.pick(&[Level::User, Level::Project, Level::System]);
            let comments = rng.chance(30);
            let mut text = file_text(batch, comments);
            // A byte order mark refuses the file (a file-level variant below).
            if rng.chance(33) {
                what.push("CRLF".into());
                text = text.replace('\n', "\r\n");
            }
            if comments {
                what.push("comments".into());
            }
            what.push(format!("{level:?} level"));
            (what, level, text.into_bytes())
        },
    );
    out.extend(file_variants(&mut rng));
    out
}

/// The file-level variants, each alone with one case of its own.
fn file_variants(rng: &mut Rng) -> Vec<Run> {
    let plain = |i: usize| {
        let c = Case {
            what: vec![],
            servers: base(i),
        };
        (file_text(std::slice::from_ref(&c), false), c)
    };
    let mut out = Vec::new();
    let mut push = |what: &str, text: Vec<u8>, c: Case, level: Level| {
        out.push(Run {
            what: vec![what.to_string()],
            cases: vec![c],
            level,
            text,
        });
    };
    let mut i = 900;
    let mut next = || {
        i += 1;
        plain(i)
    };
    let (t, c) = next();
    push(
        "two BOMs",
        format!("\u{feff}\u{feff}{t}").into_bytes(),
        c,
        Level::User,
    );
    let (t, c) = next();
    push(
        "BOM, project level",
        format!("\u{feff}{t}").into_bytes(),
        c,
        Level::Project,
    );
    let (t, c) = next();
    let t = t.replacen("}\n  }\n}", "},\n  }\n}", 1);
    push("trailing comma", t.into_bytes(), c, Level::User);
    let (t, c) = next();
    push(
        "top level is an array",
        format!("[{t}]").into_bytes(),
        c,
        Level::User,
    );
    let (_, c) = next();
    push("top level is null", b"null".to_vec(), c, Level::User);
    let (_, c) = next();
    push("empty file", Vec::new(), c, Level::User);
    let (_, c) = next();
    push("blank file", b" \n".to_vec(), c, Level::Project);
    for (what, block) in [
        ("mcpServers is null", "null"),
        ("mcpServers is a string", "\"ab\""),
        ("mcpServers is a number", "5"),
    ] {
        let (_, c) = next();
        let t = format!("{{\"mcpServers\": {block}}}");
        push(what, t.into_bytes(), c, Level::User);
    }
    let (_, c) = next();
    let entries: Vec<String> = c.servers.iter().map(|(_, e)| entry_text(e)).collect();
    let t = format!("{{\"mcpServers\": [{}]}}", entries.join(", "));
    let array_case = Case {
        what: vec![],
        servers: c
            .servers
            .iter()
            .enumerate()
            .map(|(i, (_, e))| (i.to_string(), e.clone()))
            .collect(),
    };
    push(
        "mcpServers is an array",
        t.into_bytes(),
        array_case,
        Level::User,
    );
    let (t, c) = next();
    let t = t.replacen("\"args\": [", "\"args\": [\"@BAD@\", ", 1);
    let bytes = variants::replace_bytes(t.as_bytes(), b"@BAD@", &[b'a', 0xff, b'b']);
    push("invalid UTF-8 in an argument", bytes, c, Level::User);
    let (t, c) = next();
    let t = t.replacen(
        "\"mcpServers\"",
        "\"mcpServers\": {\"x\": {\"command\": \"@KCAP@\"}},\n  \"mcpServers\"",
        1,
    );
    push("mcpServers written twice", t.into_bytes(), c, Level::User);
    let (t, c) = next();
    let t = format!("// a comment\n/* another */{t}// the end");
    push(
        "comments around, system level",
        t.into_bytes(),
        c,
        Level::System,
    );
    let _ = rng;
    out
}

fn entry_text(e: &Entry) -> String {
    let (_, text) = block_text(&[("x".into(), e.clone())], false)
        .split_once(": ")
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .unwrap();
    text.trim_end_matches("\n  }").to_string()
}

/// What one server did, in comparable form.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Did {
    /// Started: argv, the variables it got that Gemini CLI's own environment lacks, cwd.
    Started(Vec<String>, BTreeMap<String, String>, String),
    /// Reached over the network at this path.
    Reached(BTreeSet<String>),
    Nothing,
}

/// Gemini CLI's environment in the test (everything else is cleared).
fn gemini_env(home: &Path, root: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".into(), inherited_path().into_string().unwrap()),
        ("HOME".into(), home.display().to_string()),
        ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
        // The launcher relaunches itself with a larger heap and this set; same code.
        ("GEMINI_CLI_NO_RELAUNCH".into(), "true".into()),
        ("GEMINI_API_KEY".into(), "dummy".into()),
        ("GOOGLE_GEMINI_BASE_URL".into(), "http://127.0.0.1:9".into()),
        ("HTTPS_PROXY".into(), "http://127.0.0.1:9".into()),
        ("NO_PROXY".into(), "127.0.0.1".into()),
        ("XV_BINDIR".into(), root.join("bin").display().to_string()),
    ];
    env.extend(client_vars(root));
    env
}

/// JavaScript's key order: array-index names first, in numeric order, then the others.
fn js_order(names: Vec<String>) -> Vec<String> {
    let index = |n: &String| n.parse::<u32>().ok().filter(|i| i.to_string() == *n);
    let (mut ints, others): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| index(n).is_some());
    ints.sort_by_key(index);
    ints.extend(others);
    ints
}

fn valid_name(k: &str) -> bool {
    k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The URL path `new URL(url)` requests (the parts the variants use).
fn url_path(url: &str, base: &str) -> String {
    let rest = url.strip_prefix(base).unwrap_or(url);
    let rest = rest.split('#').next().unwrap().replace('\\', "/");
    let mut out = String::new();
    for c in rest.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '"' => out.push_str("%22"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '`' => out.push_str("%60"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

/// A directory where Gemini CLI reads a system settings file: it and every ancestor owned by
/// root and not writable by group or others (`isFileAndDirectorySecureSync`; it skips one
/// under `/tmp`). `None` when the test runs elsewhere (not as root, or a checkout under
/// `/tmp`): the system-level runs then write the user's file instead.
fn secure_base() -> Option<&'static Path> {
    use std::os::unix::fs::MetadataExt;
    static BASE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).canonicalize().ok()?;
        let secure =
            |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0);
        dir.ancestors().all(secure).then_some(dir)
    })
    .as_deref()
}

/// Runs one settings file: the verdict per server name, and whether the file was refused.
fn check_run(bin: &Path, r: &Run) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let secure = tempfile::tempdir_in(secure_base().unwrap_or(&root)).unwrap();
    let (home, project, bin_dir, rec, sys) = (
        root.join("home"),
        root.join("project"),
        root.join("bin"),
        root.join("rec"),
        secure.path().join("sys"),
    );
    for d in [
        &home.join(".gemini"),
        &project.join(".gemini"),
        &bin_dir,
        &rec,
        &sys,
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let kcap = bin_dir.join("kcap");
    variants::write_recorder(&kcap, &rec);
    let listener = Listener::start();
    let text = subst(
        &r.text,
        &[
            ("@URL@", listener.url()),
            ("@KCAP@", kcap.display().to_string()),
            ("@BINDIR@", bin_dir.display().to_string()),
        ],
    );
    let path = match r.level {
        Level::System if secure_base().is_some() => sys.join("settings.json"),
        Level::User | Level::System => home.join(".gemini/settings.json"),
        Level::Project => project.join(".gemini/settings.json"),
    };
    std::fs::write(&path, &text).unwrap();
    let mut env = gemini_env(&home, &root);
    env.push((
        "GEMINI_CLI_SYSTEM_SETTINGS_PATH".into(),
        sys.join("settings.json").display().to_string(),
    ));
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(env.iter().cloned())
        .args(["mcp", "list"])
        .current_dir(&project);
    let out = TALLY.run(cmd, "gemini mcp list");
    let listing_crash = out.stderr.contains("args?.join is not a function");
    let refused = !out.status.success() && !listing_crash;
    // Recorders exit at once; wait until every started one is done.
    let deadline = Instant::now() + Duration::from_secs(10);
    let count = |ext: &str| {
        std::fs::read_dir(&rec)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(ext)
            })
            .count()
    };
    while count(".argv") != count(".done") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let own: BTreeSet<&str> = env
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(["GEMINI_CLI", "PWD", "SHLVL", "OLDPWD", "_"])
        .collect();
    let added = |e: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        e.iter()
            .filter(|(k, _)| !own.contains(k.as_str()) && valid_name(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let processes: Vec<Did> = variants::records(&rec)
        .into_iter()
        .map(|(argv, e, cwd)| Did::Started(argv, added(&e), cwd))
        .collect();
    let paths = listener.paths();
    // The model, on the same bytes and environment.
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let m: Loaded = model::load("settings.json", &text, &lookup);
    let model_refused = !m.rejected.is_empty();
    let names = js_order(r.cases.iter().flat_map(Case::names).collect());
    let spawnable = |cmd: &str, cwd: &Option<String>| {
        cmd == kcap.to_str().unwrap() && cwd.as_ref().is_none_or(|c| project.join(c).is_dir())
    };
    let mut expected_processes = Vec::new();
    let mut model_did: BTreeMap<String, Did> = BTreeMap::new();
    for n in &names {
        let did = if let Some(s) = m.started.iter().find(|s| &s.name == n) {
            if spawnable(&s.command, &s.cwd) {
                let mut argv = vec![s.command.clone()];
                argv.extend(s.args.iter().cloned());
                let cwd = s.cwd.as_ref().map_or(project.clone(), |c| project.join(c));
                let cwd = cwd.canonicalize().unwrap().display().to_string();
                let d = Did::Started(argv, added(&s.env), cwd);
                expected_processes.push((n.clone(), d.clone()));
                d
            } else {
                Did::Nothing
            }
        } else if let Some(rm) = m.remote.iter().find(|x| &x.name == n) {
            if rm.url.starts_with(&listener.url()) {
                Did::Reached([url_path(&rm.url, &listener.url())].into())
            } else {
                Did::Nothing
            }
        } else {
            Did::Nothing
        };
        model_did.insert(n.clone(), if model_refused { Did::Nothing } else { did });
    }
    // The client: processes in start order belong to the expected ones in key order.
    let mut client_did: BTreeMap<String, Did> =
        names.iter().map(|n| (n.clone(), Did::Nothing)).collect();
    let mut extra = Vec::new();
    let mut expected = expected_processes.iter();
    let mut pending = expected.next();
    for p in &processes {
        match pending {
            Some((n, d)) if d == p => {
                client_did.insert(n.clone(), p.clone());
                pending = expected.next();
            }
            _ => extra.push(p.clone()),
        }
    }
    for path in &paths {
        let Some(name) = path.split('/').nth(1) else {
            continue;
        };
        if let Some(slot) = client_did.get_mut(name) {
            match slot {
                Did::Reached(set) => {
                    set.insert(path.clone());
                }
                _ => *slot = Did::Reached([path.clone()].into()),
            }
        }
    }
    // A network server is reached at its own path (other requests, e.g. a fallback, may
    // follow): keep the model's path when the client requested it.
    for (n, d) in client_did.iter_mut() {
        if let (Did::Reached(seen), Some(Did::Reached(want))) = (&*d, model_did.get(n))
            && want.is_subset(seen)
        {
            *d = Did::Reached(want.clone());
        }
    }
    let mut failures = disagreements(&r.cases, (model_refused, refused), &model_did, &client_did);
    if !extra.is_empty() {
        failures.push(format!("processes no server accounts for: {extra:?}"));
    }
    if failures.is_empty() {
        TALLY.add("refused files", usize::from(refused));
        for d in client_did.values() {
            match d {
                Did::Started(..) => TALLY.add("servers started", 1),
                Did::Reached(_) => TALLY.add("servers reached", 1),
                Did::Nothing => TALLY.add("servers doing nothing", 1),
            }
        }
        Ok(())
    } else {
        Err(format!(
            "{:?}\n{}\nfile:\n{}\nstderr:\n{}",
            r.what,
            failures.join("\n"),
            String::from_utf8_lossy(&text),
            out.stderr
        ))
    }
}

static TALLY: Tally = Tally::new();

fn gemini_cli_agrees_with_its_loader_model_on_every_variant() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    let runs = runs();
    let started = Instant::now();
    let failures = parallel(&runs, |_, r| check_run(&bin, r));
    let secs = started.elapsed().as_secs_f64();
    TALLY.report("Gemini CLI", &runs, failures.len(), secs, SEED);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

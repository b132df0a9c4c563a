//! The seeded-variant machinery the differential tests of Gemini CLI, Copilot CLI and OpenCode
//! share (`tests/clients/differential_{gemini,copilot,opencode,qwen}.rs`, as `common::variants`): the
//! generator of `tests/clients/differential.rs` (xorshift64*, hostile values, 1–3 mutations of the
//! registration export per case), a writer of JSON text that keeps key order and repeated
//! keys, the batching of many cases into one client run, a recorder stand-in, and a small
//! HTTP listener that notes which URLs a client reached.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The seed every generator starts from (mixed with a per-client constant).
pub const SEED: u64 = 0x006b_6361_702d_3236;
/// Client runs at once per client (the machine has two cores, shared).
pub const WORKERS: usize = 2;

/// xorshift64*: a small deterministic generator (as in `tests/clients/differential.rs`).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// The registration export of every compiled registry entry in `format` (the case every
/// variant starts from), the servers of its block `block` named `c<case>-<id>`: commands
/// `@KCAP@`, the server URL `http://127.0.0.1:9/u`.
pub fn export(
    format: &kcap_mcp_registry::clients::registration::RegistrationFormat,
    block: &str,
    case: usize,
) -> Vec<(String, Entry)> {
    let opts = kcap_mcp_registry::clients::registration::RegistrationOptions {
        command: "@KCAP@".into(),
        server_url: Some("http://127.0.0.1:9/u".into()),
        project_dir: None,
    };
    let text = kcap_mcp_registry::clients::registration::registration_file(
        format,
        &kcap_mcp_registry::ops::list::compiled_entries(),
        &opts,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v[block]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (format!("c{case}-{k}"), Entry::from(v.clone())))
        .collect()
}

/// An entry as written: an object with its keys in order (repeats allowed), or any value.
#[derive(Clone, Debug)]
pub enum Entry {
    Fields(Vec<(String, Value)>),
    Raw(Value),
}

impl Entry {
    pub fn set(&mut self, key: &str, value: Value) {
        if let Entry::Fields(fields) = self {
            match fields.iter_mut().rev().find(|(k, _)| k == key) {
                Some(slot) => slot.1 = value,
                None => fields.push((key.to_string(), value)),
            }
        }
    }
    pub fn remove(&mut self, key: &str) {
        if let Entry::Fields(fields) = self {
            fields.retain(|(k, _)| k != key);
        }
    }
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Entry::Fields(fields) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            Entry::Raw(_) => None,
        }
    }
    fn text(&self) -> String {
        match self {
            Entry::Raw(v) => v.to_string(),
            Entry::Fields(fields) => {
                let inner: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{}: {v}", Value::from(k.as_str())))
                    .collect();
                format!("{{{}}}", inner.join(", "))
            }
        }
    }
}

impl From<Value> for Entry {
    fn from(v: Value) -> Self {
        match v {
            Value::Object(o) => Entry::Fields(o.into_iter().collect()),
            other => Entry::Raw(other),
        }
    }
}

/// One seeded case: a mutated copy of the export, its servers renamed `c<i>-<name>` so
/// that many cases share one file. Names may repeat (a repeated key).
#[derive(Clone, Debug)]
pub struct Case {
    pub what: Vec<String>,
    pub servers: Vec<(String, Entry)>,
}

impl Case {
    /// The distinct names, in order of first appearance (JavaScript's key order).
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (n, _) in &self.servers {
            if !out.contains(n) {
                out.push(n.clone());
            }
        }
        out
    }
}

/// The servers' block as JSON text: one server per line, keys in order, repeats kept.
pub fn block_text(servers: &[(String, Entry)], comments: bool) -> String {
    let mut lines = Vec::new();
    for (i, (name, entry)) in servers.iter().enumerate() {
        let mut line = format!("    {}: {}", Value::from(name.as_str()), entry.text());
        if i + 1 < servers.len() {
            line.push(',');
        }
        if comments && i % 3 == 0 {
            line.push_str(" // a comment, \"quoted\" { }");
        }
        lines.push(line);
    }
    let sep = if comments {
        "\n    /* block, */\n"
    } else {
        "\n"
    };
    format!("{{\n{}\n  }}", lines.join(sep))
}

/// The hostile values a field or a whole entry takes (`@URL@`, `@KCAP@`, `@BINDIR@` are
/// replaced per run). `XV_*` name the variables the client runs with (see [`client_vars`]).
pub fn values() -> Vec<Value> {
    vec![
        Value::Null,
        json!(5),
        json!(0),
        json!(""),
        json!("x"),
        json!([]),
        json!({}),
        json!(["x", 1]),
        json!(true),
        json!(false),
        json!("no"),
        json!("stdio"),
        json!("local"),
        json!("remote"),
        json!("sse"),
        json!("http"),
        json!("@URL@/mcp"),
        json!({"KCAP_A": 1}),
        json!({"KCAP_A": "v", "KCAP_B": ""}),
        json!(["mcp", "${XV_UNSET:-dflt}", "$XV_SET"]),
        json!({"KCAP_URL": "${XV_SET}/${XV_UNSET}", "KCAP_R": "$XV_REF"}),
        json!("${XV_BINDIR:-@BINDIR@}/kcap"),
        json!(["mcp", "${XV_UNSET}", "{env:XV_SET}"]),
        json!(["*"]),
        json!(["a", null, 1.5, {}]),
        json!("$XV_DIR"),
    ]
}

/// The variables every client runs with besides its own: what `$…`, `${…}` and `{env:…}`
/// forms in the variants refer to. `dir` is an existing directory.
pub fn client_vars(dir: &Path) -> Vec<(String, String)> {
    [
        ("XV_SET", "setval".to_string()),
        ("XV_EMPTY", String::new()),
        ("XV_REF", "$XV_SET".to_string()),
        ("XV_TOKEN", "secret".to_string()),
        ("XV_DIR", dir.display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Strings with every expansion form, for `command`, `args`, `env` values, `cwd`, `url`.
pub const EXPANSIONS: [&str; 14] = [
    "$XV_SET",
    "${XV_SET}",
    "${XV_UNSET}",
    "$XV_UNSET",
    "${XV_UNSET:-dflt}",
    "${XV_SET:-d}",
    "${XV_UNSET-d}",
    "${XV_TOKEN-d}",
    "\\$XV_SET",
    "$$XV_SET",
    "${XV_REF}",
    "{env:XV_SET}",
    "${}x$1",
    "~/x %XV_SET%",
];

/// The `c<i>-` prefix the names of a case share.
fn case_prefix(names: &[String]) -> String {
    names
        .first()
        .and_then(|n| n.split_once('-'))
        .map(|(p, _)| format!("{p}-"))
        .unwrap_or_default()
}

/// One mutation of `servers` (the export of one case): a neighbour, a removed field, a
/// whole entry replaced, or a field set; `fields` are the client's field names.
pub fn mutate(
    rng: &mut Rng,
    servers: &mut Vec<(String, Entry)>,
    fields: &[&str],
    what: &mut Vec<String>,
) {
    let values = values();
    let names: Vec<String> = servers.iter().map(|(n, _)| n.clone()).collect();
    let named = |v: &Value, name: &str| -> Value {
        match v {
            Value::String(s) => Value::from(s.replace("@URL@", &format!("@URL@/{name}"))),
            other => other.clone(),
        }
    };
    match rng.below(7) {
        0 => {
            let name = format!("{}other{}", case_prefix(&names), servers.len());
            let mut n = Entry::Fields(vec![
                ("command".into(), json!("@KCAP@")),
                ("args".into(), json!(["other"])),
            ]);
            let f = *rng.pick(fields);
            let v = named(rng.pick(&values), &name);
            n.set(f, v.clone());
            what.push(format!("neighbour {name}.{f}={v}"));
            servers.push((name, n));
        }
        1 => {
            let name = rng.pick(&names).clone();
            let f = *rng.pick(fields);
            for (n, e) in servers.iter_mut() {
                if *n == name {
                    e.remove(f);
                }
            }
            what.push(format!("remove {name}.{f}"));
        }
        2 if rng.chance(40) => {
            let name = rng.pick(&names).clone();
            let v = named(rng.pick(&values), &name);
            what.push(format!("{name} = {v}"));
            let i = servers.iter().position(|(n, _)| *n == name).unwrap();
            servers[i].1 = Entry::Raw(v);
        }
        3 => {
            // An expansion form in a string field.
            let name = rng.pick(&names).clone();
            let form = *rng.pick(&EXPANSIONS);
            let f = *rng.pick(&["command", "args", "env", "cwd", "url"]);
            let v = match f {
                "command" => json!(format!("{form}@KCAP@")),
                "args" => json!(["mcp", form, format!("a{form}b")]),
                "env" => json!({"KCAP_X": form, "KCAP_Y": format!("a{form}b")}),
                "cwd" => json!(format!("{form}/")),
                _ => json!(format!("@URL@/{name}/{form}")),
            };
            what.push(format!("{name}.{f} = {v}"));
            for (n, e) in servers.iter_mut() {
                if *n == name {
                    e.set(f, v.clone());
                }
            }
        }
        4 if rng.chance(50) => {
            // A repeated key: the whole entry, or one field, written twice.
            let i = rng.below(servers.len());
            let (name, entry) = servers[i].clone();
            let decoy = named(rng.pick(&values), &name);
            if rng.chance(50) {
                what.push(format!("{name} written twice, first as {decoy}"));
                servers.insert(i, (name, Entry::Raw(decoy)));
            } else if let Entry::Fields(mut fields_now) = entry {
                let f = *rng.pick(fields);
                what.push(format!("{name}.{f} written twice, first as {decoy}"));
                fields_now.insert(0, (f.to_string(), decoy));
                servers[i].1 = Entry::Fields(fields_now);
            }
        }
        _ => {
            let name = rng.pick(&names).clone();
            let f = *rng.pick(fields);
            let v = named(rng.pick(&values), &name);
            what.push(format!("{name}.{f} = {v}"));
            for (n, e) in servers.iter_mut() {
                if *n == name {
                    e.set(f, v.clone());
                }
            }
        }
    }
}

/// Runs `items` on [`WORKERS`] threads; returns the failures.
pub fn parallel<V: Sync>(
    items: &[V],
    check: impl Fn(usize, &V) -> Result<(), String> + Sync,
) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(v) = items.get(i) else { break };
                    let result =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(i, v)))
                            .unwrap_or_else(|p| {
                                Err(format!(
                                    "panicked: {}",
                                    p.downcast_ref::<String>()
                                        .cloned()
                                        .or_else(|| p
                                            .downcast_ref::<&str>()
                                            .map(|s| (*s).to_string()))
                                        .unwrap_or_default()
                                ))
                            });
                    if let Err(e) = result {
                        failures.lock().unwrap().push(format!("run {i}: {e}"));
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

/// A stand-in MCP server that records its argv, environment and working directory under
/// `records` (one `<nanoseconds>-<pid>` stem per start) and exits at once.
pub fn write_recorder(path: &Path, records: &Path) {
    super::stand_in::write_executable(
        path,
        format!(
            "#!/bin/sh\nd='{}'\nt=$(date +%s%N)-$$\nprintf '%s\\0' \"$0\" \"$@\" > \"$d/$t.argv\"\nenv -0 > \"$d/$t.env\"\npwd -P > \"$d/$t.cwd\"\n: > \"$d/$t.done\"\nexit 0\n",
            records.display()
        ),
    );
}

/// One recorded start: argv, environment, working directory.
pub type Started = (Vec<String>, BTreeMap<String, String>, String);

/// The recorder's starts, in the order they happened.
pub fn records(dir: &Path) -> Vec<Started> {
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".done").map(String::from)
        })
        .collect();
    stems.sort_by_key(|s| {
        let (t, _) = s.split_once('-').unwrap();
        t.parse::<u128>().unwrap_or(0)
    });
    stems
        .iter()
        .map(|stem| {
            let read = |ext: &str| std::fs::read(dir.join(format!("{stem}.{ext}"))).unwrap();
            let argv = String::from_utf8_lossy(&read("argv"))
                .trim_end_matches('\0')
                .split('\0')
                .map(String::from)
                .collect();
            let env = String::from_utf8_lossy(&read("env"))
                .split('\0')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let cwd = String::from_utf8_lossy(&read("cwd")).trim_end().to_string();
            (argv, env, cwd)
        })
        .collect()
}

/// A local HTTP listener that answers every request `404` and notes its request line.
pub struct Listener {
    pub port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Listener {
    pub fn start() -> Listener {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in socket.incoming() {
                let Ok(mut stream) = stream else { return };
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) > 0 {
                        seen.lock().unwrap().push(line.trim_end().to_string());
                    }
                    loop {
                        let mut l = String::new();
                        if reader.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                            break;
                        }
                    }
                    let _ = stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                });
            }
        });
        Listener { port, requests }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The request paths seen so far.
    pub fn paths(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.split(' ').nth(1).map(String::from))
            .collect()
    }
}

/// One client run: the cases it judges, where the file goes (`L`), and its text with the
/// placeholders (`@URL@`, `@KCAP@`, `@BINDIR@`) unreplaced.
#[derive(Debug)]
pub struct Run<L> {
    pub what: Vec<String>,
    pub cases: Vec<Case>,
    pub level: L,
    pub text: Vec<u8>,
}

/// Groups `cases` into runs of at most `size`: a case for which `alone` holds (the model
/// says it refuses the file) runs alone, in `solo`'s file; a case for which `last` holds
/// ends its run. `file` writes a batch's file: (what, level, text).
pub fn batches<L>(
    cases: Vec<Case>,
    size: usize,
    rng: &mut Rng,
    alone: impl Fn(&Case) -> bool,
    last: impl Fn(&Case) -> bool,
    solo: impl Fn(&Case) -> (L, Vec<u8>),
    mut file: impl FnMut(&[Case], &mut Rng) -> (Vec<String>, L, Vec<u8>),
) -> Vec<Run<L>> {
    let mut out = Vec::new();
    let mut batch: Vec<Case> = Vec::new();
    let mut flush = |batch: &mut Vec<Case>, rng: &mut Rng, out: &mut Vec<Run<L>>| {
        if !batch.is_empty() {
            let (what, level, text) = file(batch, rng);
            out.push(Run {
                what,
                cases: std::mem::take(batch),
                level,
                text,
            });
        }
    };
    for c in cases {
        if alone(&c) {
            let (level, text) = solo(&c);
            out.push(Run {
                what: vec!["alone: the model refuses it".into()],
                cases: vec![c],
                level,
                text,
            });
            continue;
        }
        if batch.len() == size || batch.last().is_some_and(&last) {
            flush(&mut batch, rng, &mut out);
        }
        batch.push(c);
    }
    flush(&mut batch, rng, &mut out);
    out
}

/// `hay` with every `from` replaced by `to`.
pub fn replace_bytes(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// `text` with each `(placeholder, value)` replaced.
pub fn subst(text: &[u8], pairs: &[(&str, String)]) -> Vec<u8> {
    pairs.iter().fold(text.to_vec(), |t, (from, to)| {
        replace_bytes(&t, from.as_bytes(), to.as_bytes())
    })
}

/// The disagreements of one run: the refusal, then each case's servers by name.
pub fn disagreements<D: PartialEq + std::fmt::Debug>(
    cases: &[Case],
    refused: (bool, bool),
    model: &BTreeMap<String, D>,
    client: &BTreeMap<String, D>,
) -> Vec<String> {
    let mut out = Vec::new();
    if refused.0 != refused.1 {
        out.push(format!(
            "refused: model {}, client {}",
            refused.0, refused.1
        ));
    }
    for c in cases {
        for n in c.names() {
            if model.get(&n) != client.get(&n) {
                out.push(format!(
                    "{n} ({:?}):\n  model:  {:?}\n  client: {:?}",
                    c.what,
                    model.get(&n),
                    client.get(&n)
                ));
            }
        }
    }
    out
}

/// What the runs that agreed agreed on (refused files, and servers per verdict), and the
/// slowest client run (each is killed after `common::peers::CLIENT_TIMEOUT`).
pub struct Tally(Mutex<BTreeMap<String, usize>>, Mutex<f64>);

impl Tally {
    pub const fn new() -> Tally {
        Tally(Mutex::new(BTreeMap::new()), Mutex::new(0.0))
    }
    pub fn add(&self, what: &str, n: usize) {
        *self.0.lock().unwrap().entry(what.to_string()).or_default() += n;
    }
    /// `common::peers::run`, timed.
    pub fn run(&self, cmd: std::process::Command, what: &str) -> super::peers::Output {
        let started = std::time::Instant::now();
        let out = super::peers::run(cmd, what);
        let secs = started.elapsed().as_secs_f64();
        let mut slowest = self.1.lock().unwrap();
        *slowest = slowest.max(secs);
        out
    }
    /// The summary line, straight to the process's stderr (past libtest's capture).
    pub fn report<L>(&self, client: &str, runs: &[Run<L>], failed: usize, secs: f64, seed: u64) {
        let variants: usize = runs.iter().map(|r| r.cases.len()).sum();
        let agreed: Vec<String> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        let _ = writeln!(
            std::io::stderr(),
            "differential: {variants} {client} variants in {} runs (seed {seed:#x}), {failed} \
             runs disagreed, {secs:.1} s (slowest run {:.1} s); agreed on {}",
            runs.len(),
            *self.1.lock().unwrap(),
            agreed.join(", ")
        );
    }
}

//! Validates the MCP server registry and compiles it into a `phf` table.
//!
//! Reads `registry/` (or the directory named by `KCAP_MCP_REGISTRY_DIR`), applies every
//! registry rule from `src/schema/` (the same code `kcap-mcp-registry check` runs), and on
//! any violation fails the build with rustc-style diagnostics. Otherwise writes
//! `$OUT_DIR/registry_table.rs`, which `src/registry.rs` includes.

#[path = "src/model.rs"]
#[allow(dead_code)]
mod model;
#[path = "src/schema/mod.rs"]
#[allow(dead_code, unused_imports)]
mod schema;
#[path = "src/text.rs"]
#[allow(dead_code)]
mod text;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use schema::diagnostic;

use schema::RegistryEntry;

fn main() {
    println!("cargo::rerun-if-env-changed=KCAP_MCP_REGISTRY_DIR");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // Relative to the crate root, wherever cargo runs; diagnostics show it absolute, so
    // they are right in a dependent crate's build too.
    let dir = manifest.join(
        std::env::var_os("KCAP_MCP_REGISTRY_DIR").map_or_else(|| "registry".into(), PathBuf::from),
    );
    println!("cargo::rerun-if-changed={}", dir.display());

    let loaded = match schema::load_dir(&dir) {
        Ok(loaded) => loaded,
        Err(e) => fail(&format!("error: {e}\n"), &manifest, &dir),
    };
    for f in &loaded.files {
        println!("cargo::rerun-if-changed={}", f.path);
    }
    match schema::validate(&loaded, &dir.display().to_string()) {
        Ok(entries) => {
            let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
            let mut code = generate(&entries);
            // Where the table came from, so `check` can tell a stale binary (cargo reruns
            // this script on newer mtimes only: rust-lang/cargo#10791).
            let source = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            // The crate's own registry, or another one named by KCAP_MCP_REGISTRY_DIR (the
            // CI's bootstrap registry): the binary says which (`--version`).
            let bundled = manifest.join("registry").canonicalize().ok() == Some(source.clone());
            writeln!(
                code,
                "pub(crate) const DIGEST: &str = {:?};\npub(crate) const SOURCE_DIR: &str = {:?};\n\
                 pub(crate) const BUNDLED: bool = {bundled};",
                schema::digest(&entries),
                source.display().to_string()
            )
            .unwrap();
            std::fs::write(out.join("registry_table.rs"), code).unwrap_or_else(|e| {
                fail(
                    &format!("error: cannot write the registry table: {e}\n"),
                    &manifest,
                    &dir,
                )
            });
        }
        Err(diags) => fail(&diagnostic::render_all(&diags, false), &manifest, &dir),
    }
}

/// Prints `text` and a command that runs this crate's checker on `dir`, then exits 1. The
/// command works from any directory: in a checkout (which has `checker/`, the registry
/// checker alone) it runs that checker, which compiles no registry; in a packaged copy (a
/// crates.io dependency) it installs this version of the CLI and runs its `check`.
fn fail(text: &str, manifest: &Path, dir: &Path) -> ! {
    eprint!("{text}");
    let checker = manifest.join("checker/Cargo.toml");
    let checker = if checker.is_file() {
        format!(
            "cargo run --release --manifest-path {} -- {}",
            shell_word(&checker),
            shell_word(dir)
        )
    } else {
        format!(
            "env -u KCAP_MCP_REGISTRY_DIR cargo install kcap-mcp-registry --version {} --locked && kcap-mcp-registry check {}",
            env!("CARGO_PKG_VERSION"),
            shell_word(dir)
        )
    };
    eprintln!(
        "the MCP server registry is invalid; the same report, in any format, from a checker \
         built without it: {checker}"
    );
    std::process::exit(1)
}

/// `path` as one POSIX shell word: as is when it holds only characters no shell treats
/// specially, otherwise single-quoted.
fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// An id as a `phf` key over its bytes, written as a byte string literal (`b"kcap-review"`).
/// `lookup` folds case into a byte buffer and looks that up directly, with no UTF-8
/// validation; the hash of `[u8]` and of `str` are the same in `phf`.
#[derive(PartialEq, Eq, Hash)]
struct ByteKey<'a>(&'a str);

impl phf_shared::PhfHash for ByteKey<'_> {
    fn phf_hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.as_bytes().phf_hash(state);
    }
}

impl phf_shared::FmtConst for ByteKey<'_> {
    fn fmt_const(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Canonical ids are `[a-z0-9-]`, which `{:?}` writes without escapes.
        write!(f, "b{:?}", self.0)
    }
}

/// The @generated table: `SERVERS` sorted by id, `INDEX` from id to position, and the length
/// bounds `lookup` checks before hashing.
fn generate(entries: &[RegistryEntry]) -> String {
    let mut s = String::from(
        "// @generated by build.rs from the registry's *.toml files. Do not edit.\n\n",
    );
    // One `const` per entry, then the array of them: rustc type-checks many small items
    // in linear time, but one array literal of thousands of nested struct literals takes
    // about six times as long (measured at 10,000 entries; see BENCHMARKS.md).
    for (i, e) in entries.iter().enumerate() {
        // Every field by name, no `..`: a new registry key does not compile until it is
        // written into the table.
        let RegistryEntry {
            id,
            description,
            args,
            starts_flows,
            allowlistable,
            inject,
            registered,
            read_only,
            needs_project_cwd,
            driver_stamp,
            alias,
            env,
            tools,
        } = e;
        let inject = match inject {
            Some(i) => format!("Some(Inject::{i:?})"),
            None => "None".into(),
        };
        let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
        let env: Vec<String> = env
            .iter()
            .map(|(n, src)| format!("({n:?}, EnvSource::{src:?})"))
            .collect();
        let tools: Vec<String> = tools
            .iter()
            .map(|t| {
                format!(
                    "Tool {{ name: {:?}, unattended_safe: {} }}",
                    t.name, t.unattended_safe
                )
            })
            .collect();
        writeln!(
            s,
            "const SERVER_{i}: McpServer = McpServer {{\n    id: {id:?},\n    description: {description:?},\n    args: &[{}],\n    starts_flows: {starts_flows},\n    allowlistable: {allowlistable},\n    inject: {inject},\n    registered: {registered},\n    read_only: {read_only},\n    needs_project_cwd: {needs_project_cwd},\n    driver_stamp: {driver_stamp},\n    alias: {alias:?},\n    env: &[{}],\n    tools: &[{}],\n}};",
            args.join(", "),
            env.join(", "),
            tools.join(", "),
        )
        .unwrap();
    }
    writeln!(
        s,
        "\npub(crate) static SERVERS: [McpServer; {}] = [",
        entries.len()
    )
    .unwrap();
    for i in 0..entries.len() {
        writeln!(s, "    SERVER_{i},").unwrap();
    }
    s.push_str("];\n\n");
    let mut map = phf_codegen::Map::new();
    for (i, e) in entries.iter().enumerate() {
        map.entry(ByteKey(&e.id), i.to_string());
    }
    writeln!(
        s,
        "pub(crate) static INDEX: phf::Map<&'static [u8], usize> = {};\n",
        map.build()
    )
    .unwrap();
    let longest = entries.iter().map(|e| e.id.len()).max().unwrap_or(0);
    let shortest = entries.iter().map(|e| e.id.len()).min().unwrap_or(0);
    writeln!(s, "pub(crate) const LONGEST_ID: usize = {longest};").unwrap();
    writeln!(s, "pub(crate) const SHORTEST_ID: usize = {shortest};").unwrap();
    // `validate` guarantees the result channel exists (rule `result-channel-missing`).
    let rc = entries
        .iter()
        .position(|e| e.id == model::RESULT_CHANNEL_ID)
        .unwrap_or(0);
    writeln!(s, "pub(crate) const RESULT_CHANNEL: usize = {rc};").unwrap();
    // The injected (reserved) entries, in registry order, for `registry::injected`.
    let injected: Vec<String> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.inject.is_some())
        .map(|(i, _)| i.to_string())
        .collect();
    writeln!(
        s,
        "pub(crate) static INJECTED: [usize; {}] = [{}];",
        injected.len(),
        injected.join(", ")
    )
    .unwrap();
    s
}

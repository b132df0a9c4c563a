//! The compiled-in registry: the table `build.rs` generates from `registry/*.toml`, and
//! [`lookup`], the one way an allowlist name resolves to an MCP server; [`Registry`], the
//! registry a resolution and a render run against (the compiled-in one unless a tool loads
//! another at run time).

use crate::model::{EnvSource, Inject, McpServer, Tool};

#[allow(clippy::unreadable_literal)]
mod table {
    // A registry without env vars, tools or injected servers names none of them.
    #[allow(unused_imports)]
    use super::{EnvSource, Inject, McpServer, Tool};
    include!(concat!(env!("OUT_DIR"), "/registry_table.rs"));
}

/// The registry digest: SHA-256 of the validated table's canonical form (the compact JSON of
/// `list --format json`), as 64 lower-case hex digits, computed by `build.rs` from the
/// directory it read. `kcap-mcp-registry list` prints it; `check DIR` recomputes it for DIR
/// (`schema::digest`) and warns when DIR is [`SOURCE_DIR`] but the digests differ: cargo
/// reruns `build.rs` only when a registry file's mtime is newer than the last build
/// (rust-lang/cargo#10791), so a file replaced by an older one leaves a stale table.
///
/// ```
/// assert_eq!(kcap_mcp_registry::registry::DIGEST.len(), 64);
/// ```
pub const DIGEST: &str = table::DIGEST;

/// The registry directory `build.rs` compiled in, canonicalized on the build machine.
pub const SOURCE_DIR: &str = table::SOURCE_DIR;

/// Whether the compiled-in registry is the crate's own `registry/` directory: `false` for a
/// build with `KCAP_MCP_REGISTRY_DIR` naming another one ([`SOURCE_DIR`]), such as the CI's
/// bootstrap registry (`.ci/bootstrap-registry`, the result channel alone), which is built
/// to run `check` and `diff` on a registry that may be broken, not to launch reviewers.
pub const BUNDLED: bool = table::BUNDLED;

/// Resolves an allowlist name to its registry entry.
///
/// The name is trimmed of Unicode whitespace (`str::trim`: spaces, tabs, newlines, NBSP, …)
/// and matched against canonical ids ignoring ASCII case only. Returns `None` for a blank or
/// unknown name. Non-ASCII characters never fold: `"KCAP-REV\u{130}EW"`, a Kelvin sign
/// `\u{212A}` or Cyrillic look-alikes do not match. Never allocates; a name longer than the
/// longest id is refused before any comparison.
///
/// Finds injection-only entries too: check [`McpServer::allowlistable`] (or use
/// [`resolve_allowlist`](crate::resolve_allowlist)) before materializing one.
///
/// ```
/// use kcap_mcp_registry::lookup;
///
/// assert_eq!(lookup("  KCAP-Review\t").map(|s| s.id), Some("kcap-review"));
/// assert!(lookup("kcap-flows").is_some_and(|s| s.starts_flows));
/// assert!(lookup("kcap-unknown").is_none());
/// assert!(lookup("   ").is_none());
/// ```
pub fn lookup(name: &str) -> Option<&'static McpServer> {
    Registry::compiled().lookup(name)
}

/// The registry an allowlist resolves against and a reviewer is rendered from: its entries
/// (sorted by id) and its result channel. [`Registry::compiled`] (the default) is the table
/// `build.rs` validated and compiled in; the CLI's `--registry DIR` builds one from a
/// directory checked at run time (`Registry::from_entries`, feature `validate`), so a pull
/// request's edited registry can be previewed without rebuilding. A `Registry` is two
/// pointers: copy it freely.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registry {
    servers: &'static [McpServer],
    result_channel: &'static McpServer,
    compiled: bool,
}

impl Default for Registry {
    fn default() -> Self {
        Registry::compiled()
    }
}

impl Registry {
    /// The compiled-in registry ([`servers`], [`result_channel`]).
    pub fn compiled() -> Registry {
        Registry {
            servers: &table::SERVERS,
            result_channel: &table::SERVERS[table::RESULT_CHANNEL],
            compiled: true,
        }
    }

    /// Every entry, sorted by id.
    pub fn servers(&self) -> &'static [McpServer] {
        self.servers
    }

    /// This registry's reserved servers injected `when`, in id order (see [`injected`]).
    pub fn injected(self, when: Inject) -> impl Iterator<Item = &'static McpServer> + Clone {
        self.servers()
            .iter()
            .filter(move |s| s.inject == Some(when))
    }

    /// The reserved result channel (`kcap-flow-result`), injected into every reviewer.
    pub fn result_channel(&self) -> &'static McpServer {
        self.result_channel
    }

    /// Resolves an allowlist name as [`lookup`] does (trimmed, ASCII case folded), in this
    /// registry.
    pub fn lookup(&self, name: &str) -> Option<&'static McpServer> {
        if !self.compiled {
            let name = name.trim().as_bytes();
            return self
                .servers
                .iter()
                .find(|s| s.id.as_bytes().eq_ignore_ascii_case(name));
        }
        compiled_lookup(name)
    }

    /// A registry of `entries`, which [`crate::validate_dir`] has checked (so ids are unique
    /// and the result channel is present, injection-only and free of flows).
    ///
    /// The entries are copied into memory that is never freed, as the compiled-in table's
    /// `&'static` data is: meant for a process that loads one registry for its lifetime (the
    /// CLI's `--registry DIR`), not for reloading in a loop.
    ///
    /// # Errors
    /// [`NoResultChannel`] when `entries` lacks `kcap-flow-result` or makes it allowlistable
    /// or flow-starting (which validation refuses).
    #[cfg(feature = "validate")]
    #[cfg_attr(docsrs, doc(cfg(feature = "validate")))]
    pub fn from_entries(
        entries: &[crate::schema::RegistryEntry],
    ) -> Result<Registry, NoResultChannel> {
        use crate::model::RESULT_CHANNEL_ID;
        fn leak(s: &str) -> &'static str {
            Box::leak(s.to_owned().into_boxed_str())
        }
        let mut servers: Vec<McpServer> = entries
            .iter()
            .map(|e| McpServer {
                id: leak(&e.id),
                description: leak(&e.description),
                args: Box::leak(e.args.iter().map(|a| leak(a)).collect()),
                starts_flows: e.starts_flows,
                allowlistable: e.allowlistable,
                read_only: e.read_only,
                needs_project_cwd: e.needs_project_cwd,
                inject: e.inject,
                registered: e.registered,
                driver_stamp: e.driver_stamp,
                alias: e.alias.as_deref().map(leak),
                env: Box::leak(
                    e.env
                        .iter()
                        .map(|(n, src)| (leak(n), src.clone().map(|c| leak(&c))))
                        .collect(),
                ),
                tools: Box::leak(
                    e.tools
                        .iter()
                        .map(|t| Tool {
                            name: leak(&t.name),
                            unattended_safe: t.unattended_safe,
                        })
                        .collect(),
                ),
            })
            .collect();
        servers.sort_by(|a, b| a.id.cmp(b.id));
        let servers: &'static [McpServer] = Box::leak(servers.into_boxed_slice());
        let result_channel = servers
            .iter()
            .find(|s| s.id == RESULT_CHANNEL_ID && !s.allowlistable && !s.starts_flows)
            .ok_or(NoResultChannel)?;
        Ok(Registry {
            servers,
            result_channel,
            compiled: false,
        })
    }
}

/// A registry given to [`Registry::from_entries`] has no usable result channel: no
/// `kcap-flow-result` entry, or one that is allowlistable or starts flows.
#[cfg(feature = "validate")]
#[cfg_attr(docsrs, doc(cfg(feature = "validate")))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoResultChannel;

#[cfg(feature = "validate")]
impl std::fmt::Display for NoResultChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the registry has no injection-only `{}` entry that is free of flows; \
             `kcap-mcp-registry check` says why",
            crate::model::RESULT_CHANNEL_ID
        )
    }
}

#[cfg(feature = "validate")]
impl std::error::Error for NoResultChannel {}

/// [`lookup`] in the compiled-in table.
fn compiled_lookup(name: &str) -> Option<&'static McpServer> {
    let name = trimmed_bytes(name);
    if name.len() > table::LONGEST_ID || name.len() < table::SHORTEST_ID {
        return None;
    }
    if table::SERVERS.len() <= SCAN_UP_TO {
        scanned(name)
    } else {
        hashed(name)
    }
}

/// Registries of up to this many entries are searched by comparing the name with each id:
/// most ids differ in length, so that takes a few nanoseconds per entry, less than hashing
/// for the `phf` table (about 35 ns here; see BENCHMARKS.md). Larger ones use the table.
const SCAN_UP_TO: usize = 16;

/// `lookup` of a trimmed name by comparing it with every id, ignoring ASCII case only.
fn scanned(name: &[u8]) -> Option<&'static McpServer> {
    table::SERVERS
        .iter()
        .find(|s| s.id.as_bytes().eq_ignore_ascii_case(name))
}

/// `lookup` of a trimmed name in the `phf` table.
fn hashed(name: &[u8]) -> Option<&'static McpServer> {
    let mut buf = [0u8; table::LONGEST_ID];
    let key = buf.get_mut(..name.len())?;
    // Folds ASCII letters only. Ids are ASCII, so a name holding any other byte cannot
    // equal one and misses in the table: non-ASCII characters never fold. (Folding while
    // copying, rather than copying and then folding in place, avoids reloading the bytes
    // just stored.)
    for (dst, src) in key.iter_mut().zip(name) {
        *dst = src.to_ascii_lowercase();
    }
    table::INDEX.get(&*key).map(|&i| &table::SERVERS[i])
}

/// `name.trim()` as bytes, without scanning when `name` neither starts nor ends with
/// whitespace: a first and last byte that are ASCII and not whitespace mean `trim` would
/// return `name` unchanged (every non-ASCII whitespace character starts with a byte
/// >= 0x80 and ends with a continuation byte >= 0x80).
#[inline]
fn trimmed_bytes(name: &str) -> &[u8] {
    let kept = |b: u8| b.is_ascii() && !char::from(b).is_whitespace();
    match name.as_bytes() {
        [first, .., last] if kept(*first) && kept(*last) => name.as_bytes(),
        _ => name.trim().as_bytes(),
    }
}

/// Every registry entry, sorted by id.
///
/// ```
/// let ids: Vec<&str> = kcap_mcp_registry::servers().iter().map(|s| s.id).collect();
/// assert!(ids.is_sorted());
/// assert!(ids.contains(&"kcap-flow-result"));
/// ```
pub fn servers() -> &'static [McpServer] {
    &table::SERVERS
}

/// The reserved result channel `kcap-flow-result`, which the launcher injects into every
/// reviewer. The build guarantees it exists and is not allowlistable.
///
/// ```
/// let rc = kcap_mcp_registry::result_channel();
/// assert_eq!(rc.id, "kcap-flow-result");
/// assert!(!rc.allowlistable && !rc.starts_flows);
/// ```
pub fn result_channel() -> &'static McpServer {
    &table::SERVERS[table::RESULT_CHANNEL]
}

/// The injection-only servers the launcher injects under condition `when`, in registry order:
/// for [`Inject::Always`] exactly the result channel (rule `inject-always`).
///
/// ```
/// use kcap_mcp_registry::{Inject, registry::injected};
///
/// let ids: Vec<&str> = injected(Inject::BorrowedSnapshot).map(|s| s.id).collect();
/// assert_eq!(ids, ["kcap-review-context"]);
/// assert_eq!(injected(Inject::Always).map(|s| s.id).collect::<Vec<_>>(), ["kcap-flow-result"]);
/// ```
pub fn injected(when: Inject) -> impl Iterator<Item = &'static McpServer> + Clone {
    table::INJECTED
        .iter()
        .map(|&i| &table::SERVERS[i])
        .filter(move |s| s.inject == Some(when))
}

#[cfg(test)]
mod tests {
    use super::{hashed, lookup, scanned, trimmed_bytes};
    use proptest::prelude::*;

    /// `lookup`'s meaning: `str::trim`, then an ASCII case-insensitive comparison with every
    /// id.
    fn reference(name: &str) -> Option<&'static str> {
        let name = name.trim();
        super::table::SERVERS
            .iter()
            .find(|s| s.id.eq_ignore_ascii_case(name))
            .map(|s| s.id)
    }

    /// Both search paths agree with the meaning, whichever one `lookup` takes for the
    /// compiled-in registry.
    fn check(name: &str) {
        let trimmed = trimmed_bytes(name);
        let expected = reference(name);
        assert_eq!(lookup(name).map(|s| s.id), expected, "lookup({name:?})");
        assert_eq!(
            scanned(trimmed).map(|s| s.id),
            expected,
            "scanned({name:?})"
        );
        assert_eq!(hashed(trimmed).map(|s| s.id), expected, "hashed({name:?})");
    }

    #[test]
    fn both_paths_find_every_id_in_any_ascii_case() {
        for s in &super::table::SERVERS {
            check(s.id);
            check(&s.id.to_ascii_uppercase());
            check(&format!(" \t{}\u{a0}", s.id.to_ascii_uppercase()));
            check(&format!("{}x", s.id));
            check(&s.id[..s.id.len() - 1]);
            check(&s.id.replace('k', "\u{212a}"));
        }
    }

    proptest! {
        #[test]
        fn both_paths_agree_with_the_meaning_on_any_string(name in "\\PC{0,40}") {
            check(&name);
        }

        #[test]
        fn both_paths_agree_on_ids_with_random_case(
            i in any::<prop::sample::Index>(),
            flips in prop::collection::vec(any::<bool>(), 64),
        ) {
            let id = i.get(&super::table::SERVERS).id;
            let name: String = id
                .chars()
                .zip(flips)
                .map(|(c, f)| if f { c.to_ascii_uppercase() } else { c })
                .collect();
            check(&name);
        }
    }
}

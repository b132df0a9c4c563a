//! The compiled-in registry: the table `build.rs` generates from `registry/*.toml`, and
//! [`lookup`], the one way an allowlist name resolves to an MCP server.

use crate::model::{EnvSource, McpServer, Tool};

#[allow(clippy::unreadable_literal)]
mod table {
    // A registry without env vars or tools (e.g. `.ci/bootstrap-registry`) names neither.
    #[allow(unused_imports)]
    use super::{EnvSource, McpServer, Tool};
    include!(concat!(env!("OUT_DIR"), "/registry_table.rs"));
}

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

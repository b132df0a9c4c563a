//! The compiled-in registry: the table `build.rs` generates from `registry/*.toml`, and
//! [`lookup`], the one way an allowlist name resolves to an MCP server.

use crate::model::{EnvSource, McpServer, Tool};

#[allow(clippy::unreadable_literal)]
mod table {
    use super::{EnvSource, McpServer, Tool};
    include!(concat!(env!("OUT_DIR"), "/registry_table.rs"));
}

/// Resolves an allowlist name to its registry entry.
///
/// The name is trimmed of Unicode whitespace (`str::trim`: spaces, tabs, newlines, NBSP, …)
/// and matched against canonical ids ignoring ASCII case only. Returns `None` for a blank or
/// unknown name. Non-ASCII characters never fold: `"KCAP-REV\u{130}EW"`, a Kelvin sign
/// `\u{212A}` or Cyrillic look-alikes do not match. Never allocates; a name longer than the
/// longest id is refused before hashing.
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
    let name = untrimmed(name);
    if name.len() > table::LONGEST_ID || name.len() < table::SHORTEST_ID {
        return None;
    }
    let mut buf = [0u8; table::LONGEST_ID];
    let key = &mut buf[..name.len()];
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
fn untrimmed(name: &str) -> &[u8] {
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

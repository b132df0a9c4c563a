//! Allowlist resolution: which registry entries a reviewer's MCP allowlist materializes.
//!
//! Every name resolves through [`Registry::lookup`] only, never through user configuration. The
//! recursion guard strips servers that can start flows; injection-only entries (the result
//! channel) are never materialized from an allowlist.

use std::fmt;

use crate::model::McpServer;
use crate::registry::Registry;

/// How strictly [`resolve_allowlist`] treats entries it cannot materialize.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Policy {
    /// The daemon's launch default: skip each such entry with a [`Skipped`] diagnostic and
    /// launch with the rest.
    #[default]
    Lenient,
    /// For unattended reviewers that must auto-approve: a blank, unknown or flow-starting
    /// entry, or one that is not `read_only`, fails with a [`Rejection`]. Injection-only and
    /// duplicate entries stay harmless (skipped).
    Strict,
}

/// Why an allowlist entry was not materialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SkipKind {
    /// `null`, empty, or only whitespace.
    Blank,
    /// Not a registry id (after trimming and ASCII case folding).
    Unknown,
    /// The server can start flows: stripped by the recursion guard.
    StartsFlows,
    /// An injection-only entry (`allowlistable = false`), such as `kcap-flow-result`, which
    /// the launcher injects itself: a no-op.
    Reserved,
    /// Names a server an earlier entry already materialized: the first is kept.
    Duplicate,
}

impl SkipKind {
    /// A short reason for logs, e.g. "can start flows (recursion guard)".
    pub const fn reason(self) -> &'static str {
        match self {
            SkipKind::Blank => "blank",
            SkipKind::Unknown => "not a kcap MCP server",
            SkipKind::StartsFlows => "can start flows (recursion guard)",
            SkipKind::Reserved => "injection-only, never materialized from an allowlist",
            SkipKind::Duplicate => "duplicate of an earlier entry",
        }
    }

    /// Stable snake_case name, e.g. `"starts_flows"` (used in JSON output).
    pub const fn name(self) -> &'static str {
        match self {
            SkipKind::Blank => "blank",
            SkipKind::Unknown => "unknown",
            SkipKind::StartsFlows => "starts_flows",
            SkipKind::Reserved => "injection_only",
            SkipKind::Duplicate => "duplicate",
        }
    }
}

/// One allowlist entry that was not materialized, with the entry exactly as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skipped<'a> {
    /// Position in the allowlist, from 0 (messages count from 1: "entry 1" is the first).
    pub index: usize,
    /// The entry as given; `None` for a JSON `null`.
    pub entry: Option<&'a str>,
    /// Why it was skipped.
    pub kind: SkipKind,
}

impl fmt::Display for Skipped<'_> {
    /// `MCP allowlist entry 2 "KCAP-FLOWS" skipped: can start flows (recursion guard)` for
    /// the second entry (counted from 1); the entry is escaped (`str::escape_debug`) so it
    /// cannot forge log lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MCP allowlist entry {} ", self.index + 1)?;
        match self.entry {
            Some(e) => write!(f, "\"{}\"", e.escape_debug())?,
            None => f.write_str("null")?,
        }
        write!(f, " skipped: {}", self.kind.reason())
    }
}

/// Why [`Policy::Strict`] refused an allowlist entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// `null`, empty, or only whitespace.
    Blank,
    /// Not a registry id.
    Unknown,
    /// The server can start flows.
    StartsFlows,
    /// The server is not `read_only`, so its tools cannot be auto-approved.
    NotReadOnly,
}

impl RejectReason {
    /// The stable name `resolve` prints: `blank`, `unknown`, `starts_flows` or
    /// `not_read_only`.
    pub const fn name(self) -> &'static str {
        match self {
            RejectReason::Blank => "blank",
            RejectReason::Unknown => "unknown",
            RejectReason::StartsFlows => "starts_flows",
            RejectReason::NotReadOnly => "not_read_only",
        }
    }

    /// Why the strict policy refuses the entry, one clause (e.g. "the server can start
    /// flows").
    pub const fn explanation(self) -> &'static str {
        match self {
            RejectReason::Blank => "it is blank",
            RejectReason::Unknown => "it is not a kcap MCP server",
            RejectReason::StartsFlows => "the server can start flows",
            RejectReason::NotReadOnly => "the server is not read-only, so its tools need approval",
        }
    }

    /// Why the strict policy refuses an entry the lenient policy skips as `kind`; `None` for
    /// the kinds both policies skip (`Reserved`, a no-op, and `Duplicate`).
    pub const fn of_skip(kind: SkipKind) -> Option<RejectReason> {
        match kind {
            SkipKind::Blank => Some(RejectReason::Blank),
            SkipKind::Unknown => Some(RejectReason::Unknown),
            SkipKind::StartsFlows => Some(RejectReason::StartsFlows),
            SkipKind::Reserved | SkipKind::Duplicate => None,
        }
    }
}

/// [`Policy::Strict`] refused the allowlist because of this entry (the first offending one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// Position in the allowlist, from 0 (the message counts from 1).
    pub index: usize,
    /// The entry as given; `None` for a JSON `null`.
    pub entry: Option<String>,
    /// Why it was refused.
    pub reason: RejectReason,
}

impl fmt::Display for Rejection {
    /// `MCP allowlist entry 1 "kcap-memory" is refused by the strict policy: …; remove it
    /// from the flow's MCP allowlist, or …`, counting entries from 1, the entry escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MCP allowlist entry {} ", self.index + 1)?;
        match &self.entry {
            Some(e) => write!(f, "\"{}\"", e.escape_debug())?,
            None => f.write_str("null")?,
        }
        f.write_str(" is refused by the strict policy: ")?;
        f.write_str(self.reason.explanation())?;
        f.write_str(
            "; remove it from the flow's MCP allowlist, or plan with the lenient policy, ",
        )?;
        f.write_str(match self.reason {
            RejectReason::NotReadOnly => "which admits it",
            _ => "which skips it with a warning",
        })
    }
}

impl std::error::Error for Rejection {}

/// What an allowlist resolved to: the servers to materialize, in first-seen order, and (via
/// [`Resolution::skipped`]) one [`Skipped`] per entry that was not materialized.
///
/// Never holds the result channel or a flow-starting server. Resolving allocates nothing for
/// allowlists that materialize up to 16 servers.
#[derive(Clone, Debug)]
pub struct Resolution<'a, S> {
    registry: Registry,
    entries: &'a [Option<S>],
    /// Materialized servers with the index of the entry that named them first.
    inline: [(usize, Option<&'static McpServer>); INLINE],
    spill: Vec<(usize, &'static McpServer)>,
}

const INLINE: usize = 16;

impl<'a, S: AsRef<str>> Resolution<'a, S> {
    /// The resolution of no allowlist at all (equivalent to an empty one).
    pub fn empty() -> Self {
        Resolution {
            registry: Registry::compiled(),
            entries: &[],
            inline: [(0, None); INLINE],
            spill: Vec::new(),
        }
    }

    /// The registry the allowlist was resolved against; its result channel is the one a
    /// renderer injects.
    pub fn registry(&self) -> Registry {
        self.registry
    }

    /// The servers to materialize, in allowlist order (first occurrence wins).
    pub fn servers(&self) -> impl ExactSizeIterator<Item = &'static McpServer> + Clone + '_ {
        let inline: &[_] = &self.inline[..self.inline.iter().take_while(|s| s.1.is_some()).count()];
        let spill: &[_] = &self.spill;
        Servers { inline, spill }
    }

    /// Whether no server is materialized (the launch args equal the no-allowlist baseline).
    pub fn is_empty(&self) -> bool {
        self.inline[0].1.is_none()
    }

    /// One diagnostic per entry that was not materialized, in allowlist order.
    pub fn skipped(&self) -> impl Iterator<Item = Skipped<'a>> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| {
                let name = entry.as_ref().map(AsRef::as_ref);
                let kind = match classify(self.registry, name) {
                    Err(kind) => kind,
                    Ok(server) => {
                        let first = self.position(server)?;
                        if first == index {
                            return None;
                        }
                        SkipKind::Duplicate
                    }
                };
                Some(Skipped {
                    index,
                    entry: name,
                    kind,
                })
            })
    }

    /// The index of the entry that first materialized `server`.
    fn position(&self, server: &McpServer) -> Option<usize> {
        let inline = self.inline.iter().filter_map(|&(i, s)| Some((i, s?)));
        inline
            .chain(self.spill.iter().copied())
            .find(|(_, s)| std::ptr::eq(*s, server))
            .map(|(i, _)| i)
    }

    fn push(&mut self, index: usize, server: &'static McpServer) {
        match self.inline.iter_mut().find(|s| s.1.is_none()) {
            Some(slot) => *slot = (index, Some(server)),
            None => self.spill.push((index, server)),
        }
    }
}

struct Servers<'r> {
    inline: &'r [(usize, Option<&'static McpServer>)],
    spill: &'r [(usize, &'static McpServer)],
}

impl Clone for Servers<'_> {
    fn clone(&self) -> Self {
        Servers { ..*self }
    }
}

impl Iterator for Servers<'_> {
    type Item = &'static McpServer;
    fn next(&mut self) -> Option<Self::Item> {
        if let Some((first, rest)) = self.inline.split_first() {
            self.inline = rest;
            return first.1;
        }
        let (first, rest) = self.spill.split_first()?;
        self.spill = rest;
        Some(first.1)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.inline.len() + self.spill.len();
        (n, Some(n))
    }
}

impl ExactSizeIterator for Servers<'_> {}

/// The registry entry an allowlist entry materializes, or why it does not (before the
/// duplicate check).
fn classify(registry: Registry, entry: Option<&str>) -> Result<&'static McpServer, SkipKind> {
    let name = entry
        .filter(|e| !e.trim().is_empty())
        .ok_or(SkipKind::Blank)?;
    let server = registry.lookup(name).ok_or(SkipKind::Unknown)?;
    if server.starts_flows {
        Err(SkipKind::StartsFlows)
    } else if !server.allowlistable {
        Err(SkipKind::Reserved)
    } else {
        Ok(server)
    }
}

/// Resolves a flow's MCP allowlist against the compiled-in registry
/// ([`Registry::resolve`] resolves against another).
///
/// `entries` is the allowlist as the launch command carries it (`null` elements as `None`).
/// Each entry resolves as [`lookup`](crate::lookup) does. [`Policy::Lenient`] skips blank, unknown,
/// flow-starting, injection-only and duplicate entries (see [`Resolution::skipped`]).
///
/// # Errors
/// With [`Policy::Strict`], the first blank, unknown, flow-starting or non-`read_only` entry
/// is a [`Rejection`] naming it. Injection-only and duplicate entries stay harmless.
///
/// ```
/// use kcap_mcp_registry::{Policy, SkipKind, resolve_allowlist};
///
/// let allowlist = [Some(" KCAP-Review "), Some("kcap-flows"), None, Some("kcap-review")];
/// let r = resolve_allowlist(&allowlist, Policy::Lenient).unwrap();
/// assert_eq!(r.servers().map(|s| s.id).collect::<Vec<_>>(), ["kcap-review"]);
/// let kinds: Vec<SkipKind> = r.skipped().map(|s| s.kind).collect();
/// assert_eq!(kinds, [SkipKind::StartsFlows, SkipKind::Blank, SkipKind::Duplicate]);
///
/// let err = resolve_allowlist(&[Some("kcap-memory")], Policy::Strict).unwrap_err();
/// assert_eq!(err.entry.as_deref(), Some("kcap-memory"));
/// ```
pub fn resolve_allowlist<S: AsRef<str>>(
    entries: &[Option<S>],
    policy: Policy,
) -> Result<Resolution<'_, S>, Rejection> {
    Registry::compiled().resolve(entries, policy)
}

impl Registry {
    /// [`resolve_allowlist`] against this registry.
    ///
    /// # Errors
    /// As [`resolve_allowlist`].
    pub fn resolve<S: AsRef<str>>(
        self,
        entries: &[Option<S>],
        policy: Policy,
    ) -> Result<Resolution<'_, S>, Rejection> {
        resolve_in(self, entries, policy)
    }
}

fn resolve_in<S: AsRef<str>>(
    registry: Registry,
    entries: &[Option<S>],
    policy: Policy,
) -> Result<Resolution<'_, S>, Rejection> {
    let mut resolution = Resolution {
        registry,
        entries,
        ..Resolution::empty()
    };
    for (index, entry) in entries.iter().enumerate() {
        let name = entry.as_ref().map(AsRef::as_ref);
        let reject = |reason| Rejection {
            index,
            entry: name.map(str::to_owned),
            reason,
        };
        match classify(registry, name) {
            Ok(server) if resolution.position(server).is_none() => {
                if policy == Policy::Strict && !server.read_only {
                    return Err(reject(RejectReason::NotReadOnly));
                }
                resolution.push(index, server);
            }
            Ok(_) => {}
            Err(kind) => {
                if let (Policy::Strict, Some(reason)) = (policy, RejectReason::of_skip(kind)) {
                    return Err(reject(reason));
                }
            }
        }
    }
    Ok(resolution)
}

#[cfg(test)]
mod tests {
    use super::{Policy, RejectReason, SkipKind, resolve_allowlist};

    #[test]
    fn the_strict_policy_refuses_each_skip_kind_for_its_own_reason() {
        let cases = [
            (SkipKind::Blank, Some(RejectReason::Blank)),
            (SkipKind::Unknown, Some(RejectReason::Unknown)),
            (SkipKind::StartsFlows, Some(RejectReason::StartsFlows)),
            (SkipKind::Reserved, None),
            (SkipKind::Duplicate, None),
        ];
        for (kind, reason) in cases {
            assert_eq!(RejectReason::of_skip(kind), reason, "{kind:?}");
        }
        let refused = |name: &str| {
            resolve_allowlist(&[Some(name)], Policy::Strict)
                .unwrap_err()
                .reason
        };
        assert_eq!(refused(" "), RejectReason::Blank);
        assert_eq!(refused("kcap-nope"), RejectReason::Unknown);
        assert_eq!(refused("kcap-flows"), RejectReason::StartsFlows);
        assert_eq!(refused("kcap-memory"), RejectReason::NotReadOnly);
        assert_eq!(
            [
                RejectReason::Blank,
                RejectReason::Unknown,
                RejectReason::StartsFlows,
                RejectReason::NotReadOnly
            ]
            .map(|r| (r.name(), r.explanation())),
            [
                ("blank", "it is blank"),
                ("unknown", "it is not a kcap MCP server"),
                ("starts_flows", "the server can start flows"),
                (
                    "not_read_only",
                    "the server is not read-only, so its tools need approval"
                ),
            ]
        );
    }
}

//! A model of how Antigravity loads `~/.gemini/config/mcp_config.json` — **from facts only**: Antigravity cannot be installed here, so
//! nothing in this model was measured on the real client. It follows the original system's
//! reader \[K\] (facts, "Registration"): the shared model
//! [`load_from_facts`](crate::clients::loaded) — strict JSON, servers under `mcpServers`,
//! each a `command` with `args` and `env`, or a network server with a `url`; a wrong-typed
//! entry is skipped, a non-object `mcpServers` refuses the file; no expansion modelled.
//! Antigravity's own quirk (facts): a 0-byte file counts as `{}` (no servers).

use crate::clients::loaded::{Loaded, load_from_facts};

/// What Antigravity does with `bytes`, its `mcp_config.json` at `path` (facts only, see the
/// module docs).
pub fn load(path: &str, bytes: &[u8]) -> Loaded {
    load_from_facts(path, bytes, true)
}

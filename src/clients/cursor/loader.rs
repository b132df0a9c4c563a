//! A model of how Cursor loads `~/.cursor/mcp.json` — **from facts only**: Cursor cannot be installed here, so
//! nothing in this model was measured on the real client. It follows the original system's
//! reader \[K\] (facts, "Registration"): the shared model
//! [`load_from_facts`](crate::clients::loaded) — strict JSON, servers under `mcpServers`,
//! each a `command` with `args` and `env`, or a network server with a `url`; a wrong-typed
//! entry is skipped, a non-object `mcpServers` refuses the file; no expansion modelled.

use crate::clients::loaded::{Loaded, load_from_facts};

/// What Cursor does with `bytes`, its `mcp.json` at `path` (facts only, see the module
/// docs).
pub fn load(path: &str, bytes: &[u8]) -> Loaded {
    load_from_facts(path, bytes, false)
}

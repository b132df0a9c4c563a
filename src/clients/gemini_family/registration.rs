//! The registration entry Gemini CLI and Qwen Code read alike (their rooms' `registration`).

use crate::clients::Client;

/// A registration entry both clients read alike: the stdio server (`command`, `args`, `env`
/// when set) and `trust: true` on a read-only server, whose tool calls are then not
/// confirmed.
pub fn trusted_stdio_entry(
    e: &crate::schema::RegistryEntry,
    opts: &crate::clients::registration::RegistrationOptions,
    client: Client,
) -> crate::clients::registration::Node {
    use crate::clients::registration::{Node, stdio_pairs};
    let mut pairs = stdio_pairs(e, opts, client);
    if e.read_only {
        pairs.push(("trust".into(), Node::Bool(true)));
    }
    Node::Object(pairs)
}

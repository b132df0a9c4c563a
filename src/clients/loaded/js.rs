//! JavaScript's view of a settings value, as the Node.js clients (Gemini CLI, Qwen Code) read
//! their settings: truthiness, `String(value)`, string lists.

use super::{Kind, Node};

/// JavaScript's truthiness of a value (`Boolean(value)`), as the Node.js clients test their
/// settings (`if (server.command)`): `null`, `false`, `0`, `NaN` and `""` are falsy.
pub(crate) fn js_truthy(node: &Node) -> bool {
    match &node.kind {
        Kind::Null => false,
        Kind::Bool(b) => *b,
        Kind::Int(i) => *i != 0,
        Kind::Float(f) => *f != 0.0 && !f.is_nan(),
        Kind::Str(s) => !s.is_empty(),
        Kind::Datetime | Kind::Array(_) | Kind::Table(_) => true,
    }
}

/// JavaScript's `String(value)`, each string passed through `string` (the client's
/// variable expansion): arrays joined with `,` (`Array.prototype.join`: `null` elements
/// empty), objects `[object Object]`.
pub(crate) fn js_string(node: &Node, string: &mut dyn FnMut(&str) -> String) -> String {
    match &node.kind {
        Kind::Null => "null".into(),
        Kind::Bool(b) => b.to_string(),
        Kind::Int(i) => i.to_string(),
        Kind::Float(f) if *f == 0.0 => "0".into(),
        Kind::Float(f) => f.to_string(),
        Kind::Str(s) => string(s),
        Kind::Datetime => String::new(),
        Kind::Array(items) => items
            .iter()
            .map(|i| match i.kind {
                Kind::Null => String::new(),
                _ => js_string(i, string),
            })
            .collect::<Vec<_>>()
            .join(","),
        Kind::Table(_) => "[object Object]".into(),
    }
}

/// A list of names (`includeTools`, `excludeTools`) when an array of strings.
pub(crate) fn js_strings(node: &Node) -> Option<Vec<String>> {
    match &node.kind {
        Kind::Array(items) => items.iter().map(|i| i.as_str().map(String::from)).collect(),
        _ => None,
    }
}

//! A config file as `install` edits it: JSON (with comments where the client reads them)
//! through `jsonc-parser`'s concrete syntax tree, TOML through `toml_edit`, so everything
//! but kcap's entries is written back byte for byte.

use serde_json::Value;

use crate::clients::registration::{Node, RegistrationFormat, Syntax};

/// A parsed config, edited in place.
pub(super) enum Doc {
    Json(jsonc_parser::cst::CstRootNode),
    Toml(toml_edit::DocumentMut),
}

impl Doc {
    pub(super) fn parse(
        format: &RegistrationFormat,
        text: &str,
        exists: bool,
    ) -> Result<Doc, String> {
        let client = format.client.display_name();
        let blank = text.trim().is_empty();
        match format.syntax {
            Syntax::Json {
                comments,
                trailing_commas,
            } => {
                let text = if !exists || (blank && format.empty_file_is_empty) {
                    "{}"
                } else if blank {
                    return Err(format!(
                        "is empty, which {client} does not read as a configuration; write `{{}}` \
                         into it or remove it"
                    ));
                } else {
                    text
                };
                let options = jsonc_parser::ParseOptions {
                    allow_comments: comments,
                    allow_loose_object_property_names: false,
                    allow_trailing_commas: trailing_commas,
                    allow_missing_commas: false,
                    allow_single_quoted_strings: false,
                    allow_hexadecimal_numbers: false,
                    allow_unary_plus_numbers: false,
                    allow_bare_decimal_point_numbers: false,
                    allow_non_finite_numbers: false,
                    allow_extended_string_escapes: false,
                };
                let invalid = |e: jsonc_parser::errors::ParseError| {
                    format!(
                        "is not valid {} ({e}), so {client} would not read it either: fix it \
                         first",
                        if comments {
                            "JSON with comments"
                        } else {
                            "JSON"
                        }
                    )
                };
                // The syntax tree's parser takes comments whatever the options say, so the
                // options are checked by a plain parse first.
                jsonc_parser::parse_to_ast(text, &Default::default(), &options).map_err(invalid)?;
                let root =
                    jsonc_parser::cst::CstRootNode::parse(text, &options).map_err(invalid)?;
                if root.object_value().is_none() {
                    return Err(format!(
                        "its top level is not a JSON object, which {client} needs: fix it first"
                    ));
                }
                Ok(Doc::Json(root))
            }
            Syntax::Toml => {
                let doc = text.parse::<toml_edit::DocumentMut>().map_err(|e| {
                    format!(
                        "is not valid TOML ({}), so {client} would not read it either: fix it \
                         first",
                        e.to_string().trim_end()
                    )
                })?;
                Ok(Doc::Toml(doc))
            }
        }
    }

    /// The block's entries as JSON values, or `None` when there is no block.
    pub(super) fn entries(&self, block: &str) -> Result<Option<Vec<(String, Value)>>, String> {
        let mut out: Vec<(String, Value)> = Vec::new();
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                let Some(prop) = root.get(block) else {
                    return Ok(None);
                };
                let Some(obj) = prop.object_value() else {
                    return Err(format!(
                        "`{block}` is not an object: fix it first (every MCP server is a key in it)"
                    ));
                };
                for p in obj.properties() {
                    let name = p.decoded_name().unwrap_or_default();
                    let value = p
                        .value()
                        .and_then(|v| v.to_serde_value())
                        .unwrap_or(Value::Null);
                    if out.iter().any(|(n, _)| *n == name) {
                        return Err(duplicate(block, &name));
                    }
                    out.push((name, value));
                }
            }
            Doc::Toml(doc) => {
                let Some(item) = doc.get(block) else {
                    return Ok(None);
                };
                let Some(table) = item.as_table_like() else {
                    return Err(format!(
                        "`{block}` is not a table: fix it first (every MCP server is a table in it)"
                    ));
                };
                for (name, item) in table.iter() {
                    out.push((name.to_string(), toml_item_json(item)));
                }
            }
        }
        Ok(Some(out))
    }

    pub(super) fn set(&mut self, block: &str, name: &str, node: &Node) {
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                let obj = root.object_value_or_set(block);
                match obj.get(name) {
                    Some(prop) => prop.set_value(cst_value(node)),
                    None => {
                        obj.append(name, cst_value(node));
                    }
                }
            }
            Doc::Toml(doc) => {
                if doc.get(block).is_none() {
                    let mut t = toml_edit::Table::new();
                    t.set_implicit(true);
                    doc.insert(block, toml_edit::Item::Table(t));
                }
                let Some(item) = doc.get_mut(block) else {
                    return;
                };
                match item {
                    toml_edit::Item::Table(t) => match t.get_mut(name) {
                        Some(toml_edit::Item::Table(existing)) => {
                            existing.clear();
                            fill_table(existing, node);
                        }
                        _ => {
                            let mut table = toml_edit::Table::new();
                            fill_table(&mut table, node);
                            t.insert(name, toml_edit::Item::Table(table));
                        }
                    },
                    other => {
                        if let Some(t) = other.as_table_like_mut() {
                            t.insert(name, toml_edit::value(toml_inline(node)));
                        }
                    }
                }
            }
        }
    }

    pub(super) fn remove(&mut self, block: &str, name: &str) {
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                if let Some(prop) = root.object_value(block).and_then(|o| o.get(name)) {
                    prop.remove();
                }
            }
            Doc::Toml(doc) => {
                if let Some(t) = doc.get_mut(block).and_then(|i| i.as_table_like_mut()) {
                    t.remove(name);
                }
            }
        }
    }

    pub(super) fn remove_block_if_empty(&mut self, block: &str) {
        match self {
            Doc::Json(root) => {
                let root = root.object_value().expect("checked at parse");
                if let Some(prop) = root.get(block)
                    && prop
                        .object_value()
                        .is_some_and(|o| o.properties().is_empty())
                {
                    prop.remove();
                }
            }
            Doc::Toml(doc) => {
                if doc
                    .get(block)
                    .and_then(|i| i.as_table_like())
                    .is_some_and(|t| t.is_empty())
                {
                    doc.remove(block);
                }
            }
        }
    }

    /// The text; a new file (`created`) ends with a newline.
    pub(super) fn render(&self, created: bool) -> String {
        let mut text = match self {
            Doc::Json(root) => root.to_string(),
            Doc::Toml(doc) => doc.to_string(),
        };
        if created && !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }
}

pub(super) fn duplicate(block: &str, name: &str) -> String {
    format!(
        "`{block}` names MCP server `{}` twice, so which one the client uses is unclear: \
         remove one",
        name.escape_debug()
    )
}

pub(super) fn cst_value(node: &Node) -> jsonc_parser::cst::CstInputValue {
    use jsonc_parser::cst::CstInputValue as V;
    match node {
        Node::String(s) => V::String(s.clone()),
        Node::Bool(b) => V::Bool(*b),
        Node::Array(items) => V::Array(items.iter().map(cst_value).collect()),
        Node::Object(pairs) => V::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.clone(), cst_value(v)))
                .collect(),
        ),
    }
}

pub(super) fn fill_table(table: &mut toml_edit::Table, node: &Node) {
    if let Node::Object(pairs) = node {
        for (k, v) in pairs {
            table.insert(k, toml_edit::value(toml_inline(v)));
        }
    }
}

pub(super) fn toml_inline(node: &Node) -> toml_edit::Value {
    match node {
        Node::String(s) => s.as_str().into(),
        Node::Bool(b) => (*b).into(),
        Node::Array(items) => {
            let mut a = toml_edit::Array::new();
            for item in items {
                a.push(toml_inline(item));
            }
            toml_edit::Value::Array(a)
        }
        Node::Object(pairs) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in pairs {
                t.insert(k, toml_inline(v));
            }
            toml_edit::Value::InlineTable(t)
        }
    }
}

/// A TOML item as the JSON value it maps to (datetimes as their TOML text).
pub(super) fn toml_item_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::None => Value::Null,
        toml_edit::Item::Value(v) => toml_value_json(v),
        toml_edit::Item::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_item_json(v)))
                .collect(),
        ),
        toml_edit::Item::ArrayOfTables(a) => Value::Array(
            a.iter()
                .map(|t| {
                    Value::Object(
                        t.iter()
                            .map(|(k, v)| (k.to_string(), toml_item_json(v)))
                            .collect(),
                    )
                })
                .collect(),
        ),
    }
}

pub(super) fn toml_value_json(v: &toml_edit::Value) -> Value {
    match v {
        toml_edit::Value::String(s) => Value::String(s.value().clone()),
        toml_edit::Value::Integer(i) => Value::from(*i.value()),
        toml_edit::Value::Float(f) => serde_json::Number::from_f64(*f.value())
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.value().to_string())),
        toml_edit::Value::Boolean(b) => Value::Bool(*b.value()),
        toml_edit::Value::Datetime(d) => Value::String(d.value().to_string()),
        toml_edit::Value::Array(a) => Value::Array(a.iter().map(toml_value_json).collect()),
        toml_edit::Value::InlineTable(t) => Value::Object(
            t.iter()
                .map(|(k, v)| (k.to_string(), toml_value_json(v)))
                .collect(),
        ),
    }
}

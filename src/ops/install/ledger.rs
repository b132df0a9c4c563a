//! The ledger beside a config (`<file name>.kcap-ledger.json`): which entries of it kcap
//! wrote, by fingerprint.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{InstallError, error};
use crate::clients::Client;

/// The ledger's path for `config`: `<dir>/<file name>.kcap-ledger.json`.
pub fn ledger_path(config: &Path) -> PathBuf {
    sibling(config, ".kcap-ledger.json")
}

fn sibling(config: &Path, suffix: &str) -> PathBuf {
    let mut name = config.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    config.with_file_name(name)
}

/// `sha256:<hex>` of `value` as compact JSON with object keys sorted (at every depth).
pub fn fingerprint(value: &Value) -> String {
    let mut canonical = String::new();
    canonical_json(value, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    let mut out = String::from("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

pub(super) fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The ledger file: which entries of the config kcap wrote, by fingerprint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Ledger {
    /// The ledger format's version: 1.
    #[serde(rename = "kcap-mcp-registry-ledger")]
    pub(super) version: u32,
    /// The client whose file this is.
    pub(super) client: String,
    /// The block was there and empty when kcap first wrote into it: keep it when emptied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) block_was_empty: bool,
    /// The config did not exist before kcap wrote it: remove it when nothing is left in it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) file_created: bool,
    /// Entry name → fingerprint of the entry kcap wrote.
    pub(super) entries: BTreeMap<String, String>,
}

pub(super) fn read_ledger(path: &Path, client: Client) -> Result<Option<Ledger>, InstallError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(error(path, format!("cannot read the ledger: {e}"))),
    };
    parse_ledger(&text, client)
        .map(Some)
        .map_err(|p| error(path, p))
}

pub(super) fn parse_ledger(text: &str, client: Client) -> Result<Ledger, String> {
    let ledger: Ledger = serde_json::from_str(text).map_err(|e| {
        format!(
            "is not a kcap ledger ({e}); it records which entries kcap wrote: restore it, \
             or remove it to have identical entries adopted and the rest left alone"
        )
    })?;
    if ledger.version != 1 || ledger.client != client.name() {
        return Err(format!(
            "is a ledger of version {} for client `{}`, not version 1 for `{}`; use the \
             matching --client, or remove it",
            ledger.version,
            ledger.client.escape_debug(),
            client.name()
        ));
    }
    Ok(ledger)
}

/// The entries a ledger's `text` records for `client`: name → fingerprint.
///
/// # Errors
/// A sentence (the one `install` refuses the ledger with) when `text` is not a version 1
/// ledger of `client`.
pub fn ledger_entries(text: &str, client: Client) -> Result<BTreeMap<String, String>, String> {
    parse_ledger(text, client).map(|l| l.entries)
}

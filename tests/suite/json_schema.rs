//! The exported JSON Schema agrees with the registry rules: every bundled registry file
//! passes it; each single-file rule fixture whose rule the schema expresses fails it, in
//! exactly the files `check` flags; and the rules it does not express are the ones that need
//! the file name, other files, the parse itself, or several keys together.
#![cfg(feature = "cli")]

use std::path::Path;

use kcap_mcp_registry::CheckError;
use kcap_mcp_registry::ops::export::{json_schema_value, one_line_pattern};
use kcap_mcp_registry::schema::{EntryKey, Key, Rule, is_forbidden_char, validate_dir};
use serde_json::Value;

/// The rules the schema expresses (types, required keys, patterns, lengths, enums, no extra
/// keys; and the injection keys' rules as `if`/`then` over one file).
const EXPRESSED: [&str; 19] = [
    "unknown-key",
    "wrong-type",
    "missing-key",
    "id-canonical",
    "description-format",
    "args-format",
    "env-name",
    "env-source",
    "env-constant",
    "tool-name",
    "inject-value",
    "inject-scope",
    "inject-always",
    "injection-only-starts-flows",
    "env-source-scope",
    "capability-url-server-url",
    "borrowed-snapshot-server-url",
    "registered-scope",
    "driver-stamp-scope",
];

/// The rules a schema of one parsed file cannot express, and why.
const NOT_EXPRESSED: [(&str, &str); 17] = [
    ("toml-utf8", "decided before there is a document"),
    ("toml-syntax", "decided before there is a document"),
    ("id-file-stem", "needs the file name"),
    ("id-unique", "needs the other files"),
    (
        "alias-format",
        "relates alias and id (the schema has the pattern, not shorter than the id)",
    ),
    ("alias-unique", "needs the other files"),
    ("result-channel-missing", "needs the directory"),
    ("registry-empty", "needs the directory"),
    ("stray-file", "is about files other than the one checked"),
    ("tool-unique", "relates two array items by one key"),
    (
        "tool-name-length",
        "relates id, alias and each tool name (the schema bounds tool names at 37 bytes, the most a 2-byte stem leaves on Qwen Code)",
    ),
    (
        "result-channel-allowlistable",
        "relates id and allowlistable",
    ),
    ("result-channel-starts-flows", "relates id and starts_flows"),
    ("agent-id-injection-only", "relates env and allowlistable"),
    (
        "starts-flows-read-only",
        "relates starts_flows and read_only",
    ),
    (
        "starts-flows-unattended-safe",
        "relates starts_flows and tools",
    ),
    (
        "unattended-safe-scope",
        "relates tools, allowlistable and read_only",
    ),
];

fn validator() -> jsonschema::Validator {
    let schema = json_schema_value();
    assert!(
        jsonschema::draft202012::meta::is_valid(&schema),
        "the exported schema is not a valid draft 2020-12 schema"
    );
    jsonschema::draft202012::new(&schema).expect("the exported schema compiles")
}

/// A registry file read as JSON, as TOML editors do; `None` when it is not TOML.
fn as_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: toml::Value = toml::from_str(&text).ok()?;
    Some(serde_json::to_value(value).expect("TOML values convert to JSON"))
}

fn toml_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_rule_is_either_expressed_or_listed_with_a_reason() {
    let mut named: Vec<&str> = EXPRESSED.to_vec();
    named.extend(NOT_EXPRESSED.iter().map(|(r, _)| *r));
    named.sort_unstable();
    let mut all: Vec<&str> = Rule::ALL.iter().map(|r| r.name()).collect();
    all.sort_unstable();
    assert_eq!(named, all);
}

#[test]
fn every_bundled_registry_file_passes() {
    let v = validator();
    let files = toml_files(Path::new("registry"));
    assert!(files.len() >= 7);
    for file in files {
        let doc = as_json(&file).unwrap();
        let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", file.display());
    }
}

#[test]
fn each_expressed_rule_fixture_fails_exactly_in_the_flagged_files() {
    let v = validator();
    for rule in EXPRESSED {
        let dir = Path::new("tests/fixtures").join(rule);
        let Err(CheckError::Invalid(diags)) = validate_dir(&dir) else {
            panic!("fixture {rule} should be invalid");
        };
        assert!(diags.iter().all(|d| d.rule.name() == rule), "{rule}");
        for file in toml_files(&dir) {
            let doc = as_json(&file).unwrap();
            let flagged = diags.iter().any(|d| Path::new(&d.path) == file);
            assert_eq!(
                !v.is_valid(&doc),
                flagged,
                "{}: the schema and `check` disagree",
                file.display()
            );
        }
    }
}

#[test]
fn fixtures_of_rules_it_does_not_express_pass_wherever_they_parse() {
    // The schema must not reject what only another rule rejects.
    let v = validator();
    for (rule, _) in NOT_EXPRESSED {
        for file in toml_files(&Path::new("tests/fixtures").join(rule)) {
            if let Some(doc) = as_json(&file) {
                let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{}: {errors:?}", file.display());
            }
        }
    }
}

#[test]
fn hostile_values_get_the_same_verdict_from_schema_and_check() {
    let v = validator();
    let base =
        "id = \"kcap-x\"\ndescription = \"X.\"\nargs = [\"mcp\", \"x\"]\nstarts_flows = false\n";
    let cases: Vec<String> = vec![
        base.into(),
        base.replace("\"X.\"", "\"X\\u0007\""),
        base.replace("\"X.\"", "\"X\\u0085\""),
        base.replace("\"X.\"", "\"X\u{2028}Y\""),
        base.replace("\"X.\"", "\"X\\tY\""),
        base.replace("\"X.\"", &format!("\"{}\"", "é".repeat(300))),
        base.replace("\"X.\"", &format!("\"{}\"", "é".repeat(301))),
        base.replace("[\"mcp\", \"x\"]", "[]"),
        base.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"\"]"),
        base.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"a\\nb\"]"),
        base.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"$HOME\"]"),
        base.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"a${b\"]"),
        base.replace("kcap-x\"", "kcap-\""),
        base.replace("kcap-x\"", "kcap-\u{445}\""),
        format!("{base}[env]\nKCAP_URL = \"agent_id\"\n"),
        format!("{base}[env]\nKCAP_URL = \"server_url \"\n"),
        format!("{base}[env]\n_X = \"server_url\"\n"),
        format!("{base}[[tools]]\nname = \"{}\"\n", "a".repeat(128)),
        format!("{base}[[tools]]\nname = \"{}\"\n", "a".repeat(129)),
        format!("{base}[[tools]]\nname = \"a.b-c_D\"\nunattended_safe = false\n"),
        // The injection keys, env constants and the tool-name bound.
        format!(
            "{base}allowlistable = false\ninject = \"borrowed-snapshot\"\n[env]\nKCAP_MODE = {{ value = \"1\" }}\nKCAP_CTX = \"review_context_url\"\n"
        ),
        format!("{base}registered = false\n"),
        format!("{base}[[tools]]\nname = \"{}\"\n", "a".repeat(33)),
        format!("{base}alias = \"kx\"\n"),
        format!("{base}[env]\nKCAP_MODE = {{ value = \"\" }}\n"),
        format!("{base}[env]\nKCAP_MODE = {{ value = \"a${{b}}\" }}\n"),
        format!("{base}[env]\nKCAP_MODE = {{ value = \"a\\nb\" }}\n"),
        format!("{base}[env]\nKCAP_MODE = {{ value = 1 }}\n"),
        format!("{base}[env]\nKCAP_MODE = {{ value = \"1\", x = \"2\" }}\n"),
        format!("{base}[env]\nKCAP_MODE = {{}}\n"),
        format!("{base}allowlistable = false\ninject = \"Always\"\n"),
        format!("{base}allowlistable = false\ninject = \"borrowed-snapshot\"\nregistered = true\n"),
        format!("{base}driver_stamp = true\n"),
        format!("{base}inject = \"borrowed-snapshot\"\n"),
        format!("{base}allowlistable = false\n"),
        format!("{base}[env]\nKCAP_X = \"result_capability_url\"\n"),
    ];
    let (mut valid, mut invalid) = (0, 0);
    for text in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(
            "registry/kcap-flow-result.toml",
            dir.path().join("kcap-flow-result.toml"),
        )
        .unwrap();
        let file = dir.path().join("kcap-x.toml");
        std::fs::write(&file, &text).unwrap();
        let verdict = match validate_dir(dir.path()) {
            Ok(_) => None,
            Err(CheckError::Invalid(d)) => {
                Some(d.iter().map(|d| d.rule.name()).collect::<Vec<_>>())
            }
            Err(e) => panic!("{e}"),
        };
        // Entries that break only cross-key rules are out of the schema's reach.
        let schema_expressible = verdict
            .as_ref()
            .is_none_or(|rules| rules.iter().all(|r| EXPRESSED.contains(r)));
        if !schema_expressible {
            continue;
        }
        let doc = as_json(&file).unwrap();
        assert_eq!(
            v.is_valid(&doc),
            verdict.is_none(),
            "for {text:?}: check says {verdict:?}"
        );
        if verdict.is_none() {
            valid += 1;
        } else {
            invalid += 1;
        }
    }
    assert_eq!((valid, invalid), (7, 26), "cases compared");
}

#[test]
fn the_one_line_pattern_is_built_from_is_forbidden_char() {
    let pattern = one_line_pattern();
    assert_eq!(
        pattern,
        "^[^\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890-\\u0891\\u08e2\\u115f-\\u1160\\u17b4-\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb]*$"
    );
    // `\uXXXX` can only name characters of the Basic Multilingual Plane: the invisible ones
    // beyond it (tag characters, musical formatting, …) are refused by `check` alone.
    let astral: Vec<u32> = (0x10000..=char::MAX as u32)
        .filter_map(char::from_u32)
        .filter(|&c| is_forbidden_char(c))
        .map(|c| c as u32)
        .collect();
    assert_eq!(astral.len(), 4 + 8 + 2 + 16 + 0x1000);
    assert!(astral.contains(&0xE0041) && astral.contains(&0x1D173));
}

#[test]
fn the_schema_is_deterministic_and_names_every_key() {
    let schema = json_schema_value();
    assert_eq!(schema, json_schema_value());
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let props = schema["properties"].as_object().unwrap();
    let keys: Vec<&str> = props.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = EntryKey::ALL.iter().map(|k| k.name()).collect();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    assert_eq!(
        schema["required"],
        serde_json::json!(["id", "description", "args", "starts_flows"])
    );
    assert_eq!(schema["additionalProperties"], false);
}

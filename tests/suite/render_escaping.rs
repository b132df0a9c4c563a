//! `toml_basic_string` (the escaper behind every Codex `-c` value) pinned two ways on
//! generated strings: byte-equal to the plain per-character definition of a TOML 1.0 basic
//! string, and read back by the `toml` crate as the input.

use kcap_mcp_registry::clients::codex::toml_basic_string;
use proptest::prelude::*;

/// The definition: `\\`, `\"`, `\b`, `\t`, `\n`, `\f`, `\r`, other U+0000–U+001F and U+007F
/// as `\uXXXX`, everything else verbatim.
fn definition(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\0'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn escaping_equals_the_definition_and_round_trips(s in "(\\PC|[\\x00-\\x1f\\x7f\"\\\\]|\u{e9}|\u{2028}){0,40}") {
        let quoted = toml_basic_string(&s);
        prop_assert_eq!(&quoted, &definition(&s));
        let doc: toml::Table = toml::from_str(&format!("v = {quoted}")).unwrap();
        prop_assert_eq!(doc["v"].as_str(), Some(s.as_str()));
    }
}

//! Properties of allowlist resolution and both renderers over random allowlists and random
//! values, checked by parsing the output with serde_json and the toml crate.

use std::collections::BTreeMap;

use kcap_mcp_registry::clients::claude::claude_mcp_config;
use kcap_mcp_registry::clients::codex::{codex_mcp_overrides, default_approval};
use kcap_mcp_registry::{LaunchContext, Policy, RenderError, servers};
use proptest::prelude::*;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};

/// A JSON object read with its keys in document order.
#[derive(Debug, PartialEq)]
struct Ordered<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Ordered<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Ordered<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Ordered<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry()? {
                    out.push(kv);
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaudeConfig {
    #[serde(rename = "mcpServers")]
    mcp_servers: Ordered<Ordered<Field>>,
}

/// A server field: `command`, `args` or `env` (an object whose key order is kept).
#[derive(Debug, Deserialize, PartialEq)]
#[serde(untagged)]
enum Field {
    Str(String),
    List(Vec<String>),
    Env(Ordered<String>),
}

/// Independent model of what an allowlist should materialize: the ids, in first-seen order.
fn intended(allowlist: &[Option<String>]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for entry in allowlist.iter().flatten() {
        let key = entry.trim();
        let Some(s) = servers()
            .iter()
            .find(|s| s.id.eq_ignore_ascii_case(key) && key.is_ascii())
        else {
            continue;
        };
        if s.allowlistable && !s.starts_flows && !out.contains(&s.id) {
            out.push(s.id);
        }
    }
    out
}

fn entry() -> impl Strategy<Value = Option<String>> {
    let ids: Vec<&'static str> = servers().iter().map(|s| s.id).collect();
    let pad = prop::sample::select(vec!["", " ", "\t", "\u{a0}", "\n", "  \r\n"]);
    prop_oneof![
        4 => (prop::sample::select(ids), any::<u64>(), pad.clone(), pad).prop_map(|(id, bits, l, r)| {
            let cased: String = id
                .chars()
                .enumerate()
                .map(|(i, c)| if bits >> (i % 64) & 1 == 1 { c.to_ascii_uppercase() } else { c })
                .collect();
            Some(format!("{l}{cased}{r}"))
        }),
        1 => Just(None),
        1 => "[a-z-]{0,12}".prop_map(Some),
        1 => any::<String>().prop_map(Some),
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,20}",
        r#"[\\"'\t\n\r\u{0}\u{7f}\u{1b}é=#$\{\}:/ ]{0,16}"#,
        Just("${HOME}".to_string()),
        Just(r"C:\Program Files\kcap\kcap.exe".to_string()),
    ]
}

fn context() -> impl Strategy<Value = LaunchContext> {
    (
        value(),
        value(),
        value(),
        prop::collection::vec(entry(), 0..12),
    )
        .prop_map(|(url, path, agent, allowlist)| LaunchContext {
            server_url: Some(url),
            kcap_bin: Some(path),
            agent_id: agent,
            mcp_allowlist: Some(allowlist),
            ..LaunchContext::default()
        })
}

fn expected_env(id: &str, ctx: &LaunchContext) -> Vec<(String, String)> {
    let url = ctx.server_url.clone().unwrap();
    if id == "kcap-flow-result" {
        vec![
            ("KCAP_URL".into(), url),
            ("KCAP_FLOW_AGENT_ID".into(), ctx.agent_id.clone()),
        ]
    } else {
        vec![("KCAP_URL".into(), url)]
    }
}

/// Applies Codex `-c` overrides in order to an empty override layer: each dotted key path
/// (split on every `.`) is set to the TOML value after the first `=`, replacing what was there.
fn apply_overrides(overrides: &[String]) -> toml::Table {
    let mut root = toml::Table::new();
    for o in overrides {
        let (path, raw) = o.split_once('=').expect("key=value");
        let value: toml::Table = toml::from_str(&format!("v = {raw}"))
            .unwrap_or_else(|e| panic!("override value is not TOML: {o:?}: {e}"));
        let value = value["v"].clone();
        let keys: Vec<&str> = path.split('.').collect();
        let mut table = &mut root;
        for k in &keys[..keys.len() - 1] {
            table = table
                .entry(k.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .expect("a table on the path");
        }
        table.insert(keys[keys.len() - 1].to_string(), value);
    }
    root
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn resolution_matches_the_model_and_never_holds_flow_or_reserved_servers(
        allowlist in prop::collection::vec(entry(), 0..40)
    ) {
        let r = kcap_mcp_registry::resolve_allowlist(&allowlist, Policy::Lenient).unwrap();
        let got: Vec<&str> = r.servers().map(|s| s.id).collect();
        prop_assert_eq!(&got, &intended(&allowlist));
        prop_assert!(r.servers().all(|s| s.allowlistable && !s.starts_flows));
        // Every entry is either the first to name a materialized server or skipped once.
        prop_assert_eq!(r.skipped().count() + got.len(), allowlist.len());
    }

    #[test]
    fn claude_json_holds_exactly_the_intended_servers(ctx in context()) {
        let r = ctx.resolve(Policy::Lenient).unwrap();
        let gated = ctx.is_gated();
        let rendered = claude_mcp_config(&ctx, &r);
        if !gated && ctx.agent_id.trim().is_empty() {
            prop_assert_eq!(rendered, Err(RenderError::BlankAgentId));
            return Ok(());
        }
        let values = [ctx.server_url.as_deref().unwrap(), ctx.kcap_bin.as_deref().unwrap(), &ctx.agent_id];
        if !gated && values.iter().any(|v| v.contains("${")) {
            let refused = matches!(rendered, Err(RenderError::Expansion { .. }));
            prop_assert!(refused, "not refused: {:?}", rendered);
            return Ok(());
        }
        let json = rendered.unwrap();
        prop_assert!(!json.contains('\n'));
        let config: ClaudeConfig = serde_json::from_str(&json).unwrap();
        let ids: Vec<&str> = config.mcp_servers.0.iter().map(|(k, _)| k.as_str()).collect();
        let mut expected = if gated { vec![] } else { vec!["kcap-flow-result"] };
        if !gated {
            expected.extend(intended(ctx.mcp_allowlist.as_deref().unwrap()));
        }
        prop_assert_eq!(&ids, &expected);
        for (id, server) in &config.mcp_servers.0 {
            let registry = servers().iter().find(|s| s.id == id).unwrap();
            let keys: Vec<&str> = server.0.iter().map(|(k, _)| k.as_str()).collect();
            prop_assert_eq!(keys, ["command", "args", "env"]);
            prop_assert_eq!(&server.0[0].1, &Field::Str(ctx.kcap_bin.clone().unwrap()));
            let args: Vec<String> = registry.args.iter().map(|a| a.to_string()).collect();
            prop_assert_eq!(&server.0[1].1, &Field::List(args));
            let Field::Env(env) = &server.0[2].1 else {
                return Err(TestCaseError::fail("env is not an object"));
            };
            let env = env.0.clone();
            prop_assert_eq!(env, expected_env(id, &ctx));
        }
    }

    #[test]
    fn codex_overrides_are_toml_and_build_exactly_the_intended_table(ctx in context()) {
        let r = ctx.resolve(Policy::Lenient).unwrap();
        let rendered = codex_mcp_overrides(&ctx, &r);
        if !ctx.is_gated() && ctx.agent_id.trim().is_empty() {
            prop_assert_eq!(rendered, Err(RenderError::BlankAgentId));
            return Ok(());
        }
        let overrides = rendered.unwrap();
        let table = apply_overrides(&overrides);
        let none = toml::Table::new();
        let servers_table = table.get("mcp_servers").map_or(&none, |t| t.as_table().unwrap());
        let mut expected: Vec<&str> = Vec::new();
        if !ctx.is_gated() {
            expected.push("kcap-flow-result");
            expected.extend(intended(ctx.mcp_allowlist.as_deref().unwrap()));
        }
        let mut got: Vec<&str> = servers_table.keys().map(String::as_str).collect();
        got.sort_unstable();
        let mut sorted = expected.clone();
        sorted.sort_unstable();
        prop_assert_eq!(got, sorted);
        for id in expected {
            let registry = servers().iter().find(|s| s.id == id).unwrap();
            let entry = servers_table[id].as_table().unwrap();
            let mut want = toml::Table::new();
            want.insert("enabled".into(), true.into());
            want.insert("command".into(), ctx.kcap_bin.clone().unwrap().into());
            want.insert(
                "args".into(),
                toml::Value::Array(registry.args.iter().map(|a| (*a).into()).collect()),
            );
            let env: BTreeMap<String, String> = expected_env(id, &ctx).into_iter().collect();
            want.insert("env".into(), toml::Value::try_from(env).unwrap());
            // Approval is ours: the server default from `read_only`, `approve` per
            // unattended-safe tool.
            want.insert("default_tools_approval_mode".into(), default_approval(registry).into());
            let mut tools = toml::Table::new();
            for t in registry.tools.iter().filter(|t| t.unattended_safe) {
                let mut mode = toml::Table::new();
                mode.insert("approval_mode".into(), "approve".into());
                tools.insert(t.name.into(), mode.into());
            }
            if !tools.is_empty() {
                want.insert("tools".into(), tools.into());
            }
            prop_assert_eq!(entry, &want);
        }
    }
}

//! Properties of the launch plans of every client over random allowlists and random launch
//! values: no flow-starting server anywhere, `KCAP_FLOW_AGENT_ID` only on the result channel,
//! and every value parses back exactly in the format that carries it.

use std::collections::BTreeMap;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::claude::claude_plan;
use kcap_mcp_registry::clients::codex::codex_plan;
use kcap_mcp_registry::clients::gemini::{MAX_TOOL_NAME, gemini_plan, qualified_tool_name};
use kcap_mcp_registry::clients::opencode::opencode_plan;
use kcap_mcp_registry::clients::plan::{LaunchId, LaunchPlan};
use kcap_mcp_registry::{LaunchContext, Policy, RESULT_CHANNEL_ID, lookup, servers};
use proptest::prelude::*;
use serde_json::Value;

const CLIENTS: [Client; 4] = [
    Client::Claude,
    Client::Codex,
    Client::Gemini,
    Client::OpenCode,
];

fn plan(client: Client, ctx: &LaunchContext, id: &LaunchId) -> Option<LaunchPlan> {
    match client {
        Client::Claude => claude_plan(ctx, Policy::Lenient).ok(),
        Client::Codex => codex_plan(ctx, Policy::Lenient, &[]).ok(),
        Client::Gemini => gemini_plan(ctx, Policy::Lenient, id).ok(),
        Client::OpenCode => opencode_plan(ctx, Policy::Lenient).ok(),
        _ => unreachable!(),
    }
}

/// Allowlist entries: registry ids in any case and padding, plus junk.
fn entry() -> impl Strategy<Value = Option<String>> {
    let ids: Vec<&'static str> = servers().iter().map(|s| s.id).collect();
    prop_oneof![
        4 => (prop::sample::select(ids), any::<bool>(), any::<bool>()).prop_map(|(id, upper, pad)| {
            let id = if upper { id.to_ascii_uppercase() } else { id.to_string() };
            Some(if pad { format!(" {id} ") } else { id })
        }),
        1 => Just(None),
        1 => "[ -~]{0,12}".prop_map(Some),
    ]
}

/// Launch values without `${` (which Gemini and Claude refuse, tested elsewhere).
fn value() -> impl Strategy<Value = String> {
    "[^\u{0}$]{1,24}".prop_map(|s| s.trim_start_matches('-').to_string() + "v")
}

/// The `(id, env)` pairs a plan gives its servers, from the format that carries them.
fn carried_servers(plan: &LaunchPlan) -> Vec<(String, BTreeMap<String, String>)> {
    if let Some(session) = &plan.session_new {
        return session
            .mcp_servers
            .iter()
            .zip(&plan.servers)
            .map(|(s, w)| {
                assert_eq!(s.name, w.wire_name);
                (
                    w.id.clone(),
                    s.env
                        .iter()
                        .map(|v| (v.name.clone(), v.value.clone()))
                        .collect(),
                )
            })
            .collect();
    }
    match plan.client.as_str() {
        "claude" => {
            let i = plan.argv.iter().position(|a| a == "--mcp-config").unwrap();
            let config: Value = serde_json::from_str(&plan.argv[i + 1]).unwrap();
            config["mcpServers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(name, s)| {
                    (
                        name.clone(),
                        serde_json::from_value(s["env"].clone()).unwrap(),
                    )
                })
                .collect()
        }
        "codex" => plan
            .argv
            .iter()
            .filter_map(|a| a.strip_prefix("mcp_servers."))
            .filter_map(|a| {
                let (id, rest) = a.split_once('.')?;
                let env = rest.strip_prefix("env=")?;
                let table: toml::Table = toml::from_str(&format!("env={env}")).unwrap();
                let env = table["env"]
                    .as_table()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                Some((id.to_string(), env))
            })
            .collect(),
        other => panic!("{other}: no servers carried"),
    }
}

proptest! {
    #[test]
    fn plans_keep_the_security_rules(
        allowlist in prop::collection::vec(entry(), 0..8),
        url in value(),
        agent in value(),
        hex in "[0-9a-f]{16}",
    ) {
        let ctx = LaunchContext {
            server_url: Some(url.clone()),
            kcap_bin: Some("/opt/kcap".into()),
            agent_id: agent.clone(),
            mcp_allowlist: Some(allowlist),
            worktree: Some("/work/tree".into()),
            launch_dir: Some("/run/l".into()),
            ..LaunchContext::default()
        };
        let id = LaunchId::from_hex(&hex).unwrap();
        for client in CLIENTS {
            let plan = plan(client, &ctx, &id).unwrap();
            // The JSON form parses back into the same plan.
            let back: LaunchPlan = serde_json::from_str(&plan.to_json()).unwrap();
            prop_assert_eq!(&back, &plan);
            // No flow-starting server, the result channel first.
            prop_assert_eq!(plan.servers[0].id.as_str(), RESULT_CHANNEL_ID);
            for s in &plan.servers {
                prop_assert!(!lookup(&s.id).unwrap().starts_flows, "{} in {}", s.id, client);
            }
            let mut carried = carried_servers(&plan);
            if client == Client::Claude {
                // serde_json reads the object's keys sorted; the order is in the golden tests.
                let order: Vec<&str> = plan.servers.iter().map(|s| s.id.as_str()).collect();
                carried.sort_by_key(|(id, _)| order.iter().position(|o| o == id));
            }
            prop_assert_eq!(
                carried.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
                plan.servers.iter().map(|s| s.id.as_str()).collect::<Vec<_>>()
            );
            // KCAP_FLOW_AGENT_ID only on the result channel, with the agent id exactly; every
            // env value parses back exactly.
            for (i, (_, env)) in carried.iter().enumerate() {
                let server = lookup(&plan.servers[i].id).unwrap();
                prop_assert_eq!(env.get("KCAP_FLOW_AGENT_ID").is_some(), i == 0, "{}", client);
                if i == 0 {
                    prop_assert_eq!(&env["KCAP_FLOW_AGENT_ID"], &agent);
                }
                prop_assert_eq!(&env["KCAP_URL"], &url);
                prop_assert_eq!(env.len(), server.env.len());
            }
            // Client-specific carriers.
            match client {
                Client::Gemini => {
                    let i = plan.argv.iter().position(|a| a == "--allowed-mcp-server-names").unwrap();
                    let names: Vec<&str> = plan.argv[i + 1].split(',').collect();
                    let wire: Vec<&str> = plan.servers.iter().map(|s| s.wire_name.as_str()).collect();
                    prop_assert_eq!(names, wire);
                    for s in &plan.servers {
                        prop_assert_eq!(&s.wire_name, &format!("{}-{hex}", s.id));
                    }
                }
                Client::OpenCode => {
                    let p = plan.env.iter().find(|v| v.name == "OPENCODE_PERMISSION").unwrap();
                    let rules: serde_json::Map<String, Value> = serde_json::from_str(&p.value).unwrap();
                    prop_assert_eq!(&rules["*"], "deny");
                    for (name, _) in rules.iter().filter(|(_, v)| *v == "allow") {
                        let server = plan.servers.iter().find(|s| name.starts_with(&format!("{}_", s.wire_name)));
                        let builtin = ["read", "grep", "glob", "list"].contains(&name.as_str());
                        prop_assert!(server.is_some() || builtin, "{} allowed", name);
                    }
                    // Every server the daemon could inherit from its own environment is removed.
                    for s in servers() {
                        for (name, _) in s.env {
                            prop_assert!(plan.env_remove.iter().any(|r| r == name));
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// The longest name Gemini gives any tool of the bundled registry, with a 16-hex alias, fits
/// in its 63 characters; a 32-hex alias (the original system's) would not.
#[test]
fn gemini_tool_names_fit_with_the_launch_id() {
    let id = LaunchId::from_hex("ffffffffffffffff").unwrap();
    let longest = servers()
        .iter()
        .flat_map(|s| {
            s.tools
                .iter()
                .map(move |t| qualified_tool_name(&id.alias(s.id), t.name))
        })
        .max_by_key(String::len)
        .unwrap();
    assert_eq!(
        longest,
        "mcp_kcap-flow-result-ffffffffffffffff_submit_review_result"
    );
    assert_eq!(longest.len(), 58);
    assert!(longest.len() <= MAX_TOOL_NAME);
    let long_alias = format!("kcap-sessions-{}", "f".repeat(32));
    assert!(qualified_tool_name(&long_alias, "get_session_transcript").len() > MAX_TOOL_NAME);
    assert_eq!(
        LaunchId::from_hex("0123456789abcdef").unwrap().hex().len() * 4,
        64
    );
}

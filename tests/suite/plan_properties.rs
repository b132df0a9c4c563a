//! Properties of the launch plans of every client over random allowlists, random launch
//! values, direct or brokered delivery and own or borrowed snapshots: no flow-starting server
//! anywhere, `KCAP_FLOW_AGENT_ID` only on the result channel, the capability URL instead of
//! `KCAP_URL` on the result channel alone when brokered, `kcap-review-context` last exactly
//! when borrowed, and every value parses back exactly in the format that carries it.

use std::collections::BTreeMap;

use crate::common::records::argv_file;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::antigravity;
use kcap_mcp_registry::clients::codex;
use kcap_mcp_registry::clients::copilot::NO_TOOL;
use kcap_mcp_registry::clients::cursor;
use kcap_mcp_registry::clients::dispatch::UnverifiedIsolation;
use kcap_mcp_registry::clients::gemini::{MAX_TOOL_NAME, qualified_tool_name};
use kcap_mcp_registry::clients::kiro;
use kcap_mcp_registry::clients::plan::{Isolation, LaunchId, LaunchPlan};
use kcap_mcp_registry::clients::root;
use kcap_mcp_registry::text::is_forbidden_char;
use kcap_mcp_registry::{
    ALIASING_CLIENTS, GEMINI_TOOL_NAMES, LaunchContext, LaunchError, Policy, QWEN_TOOL_NAMES,
    RESULT_CHANNEL_ID, RenderError, ResultDelivery, Snapshot, lookup, servers,
};
use proptest::prelude::*;
use serde_json::Value;

const CLIENTS: [Client; 8] = [
    Client::Claude,
    Client::Codex,
    Client::Gemini,
    Client::OpenCode,
    Client::Copilot,
    Client::Cursor,
    Client::Kiro,
    Client::Antigravity,
];

/// The id of the server injected into borrowed-snapshot reviews.
const REVIEW_CONTEXT_ID: &str = "kcap-review-context";

/// `client`'s plan for `ctx` under the lenient policy.
fn plan_with(client: Client, ctx: &LaunchContext, id: &LaunchId) -> Option<LaunchPlan> {
    let resolution = ctx.resolve(Policy::Lenient).ok()?;
    let mut inputs = crate::common::plan::inputs(Policy::Lenient);
    inputs.launch_id = Some(*id);
    client
        .plan_resolved(ctx, &resolution, &inputs)
        .ok()
        .map(|p| p.plan)
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
    "[^\u{0}$]{1,24}".prop_map(|s| {
        // The characters every plan refuses (`RenderError::ForbiddenChar`, tested in
        // `launch::hostile`) are left out: these properties are about the plans there are.
        let kept: String = s.chars().filter(|&c| !is_forbidden_char(c)).collect();
        kept.trim_start_matches('-').to_string() + "v"
    })
}

/// The `(id, env)` pairs a plan gives its servers, from the format that carries them.
fn carried_servers(plan: &LaunchPlan) -> Vec<(String, BTreeMap<String, String>)> {
    if let Some(session) = plan
        .session_new
        .as_ref()
        .filter(|s| !s.mcp_servers.is_empty())
    {
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
    match plan.client.name() {
        "copilot" => {
            let config: Value =
                serde_json::from_str(argv_file(plan, "--additional-mcp-config")).unwrap();
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
        "claude" => {
            let config: Value = serde_json::from_str(argv_file(plan, "--mcp-config")).unwrap();
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
        "codex" => {
            // `config.toml` of the per-launch CODEX_HOME (mode 0600), not the argv.
            let path = format!("{}/{}/config.toml", root::HOME_DIR, codex::CODEX_HOME);
            let file = plan.files.iter().find(|f| f.path == path).unwrap();
            assert_eq!(file.mode, 0o600);
            let config: toml::Table = toml::from_str(&file.contents).unwrap();
            config["mcp_servers"]
                .as_table()
                .unwrap()
                .iter()
                .map(|(id, s)| {
                    let env = s["env"]
                        .as_table()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect();
                    (id.clone(), env)
                })
                .collect()
        }
        "antigravity" => {
            let file = plan
                .files
                .iter()
                .find(|f| f.path == format!("{}/{}", root::HOME_DIR, antigravity::MCP_CONFIG))
                .unwrap();
            let config: Value = serde_json::from_str(&file.contents).unwrap();
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
        other => panic!("{other}: no servers carried"),
    }
}

/// The `(name, command, args)` of every server a plan carries in ACP `session/new` or
/// Antigravity's `mcp_config.json` (sorted by name); none for Claude Code and Codex, whose
/// argv carriers `tests/suite/render_properties.rs` parses.
fn carried_commands(plan: &LaunchPlan) -> Vec<(String, String, Vec<String>)> {
    if let Some(session) = &plan.session_new {
        return session
            .mcp_servers
            .iter()
            .map(|s| (s.name.clone(), s.command.clone(), s.args.clone()))
            .collect();
    }
    if plan.client.name() != "antigravity" {
        return Vec::new();
    }
    let file = &plan.files[0];
    let config: Value = serde_json::from_str(&file.contents).unwrap();
    config["mcpServers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, s)| {
            (
                name.clone(),
                s["command"].as_str().unwrap().to_string(),
                serde_json::from_value(s["args"].clone()).unwrap(),
            )
        })
        .collect()
}

proptest! {
    #[test]
    fn plans_keep_the_security_rules(
        allowlist in prop::collection::vec(entry(), 0..8),
        url in value(),
        agent in value(),
        hex in "[0-9a-f]{16}",
        capability in prop::option::of(value()),
        review_context in prop::option::of(value()),
    ) {
        let ctx = LaunchContext {
            server_url: Some(url.clone()),
            kcap_bin: Some("/opt/kcap".into()),
            agent_id: agent.clone(),
            mcp_allowlist: Some(allowlist),
            worktree: Some("/work/tree".into()),
            launch_dir: Some("/run/l".into()),
            result_delivery: ResultDelivery::from_capability_url(capability.clone()),
            snapshot: Snapshot::from_launch(false, review_context.clone()),
            ..LaunchContext::default()
        };
        let id = LaunchId::from_hex(&hex).unwrap();
        for client in CLIENTS {
            if client == Client::Antigravity && capability.is_none() {
                // Antigravity needs brokered delivery (refusal tested in plan_golden.rs).
                prop_assert!(plan_with(client, &ctx, &id).is_none());
                continue;
            }
            let plan = plan_with(client, &ctx, &id).unwrap();
            // Only the facts-only clients' isolation is unverified (Cursor, Kiro,
            // Antigravity: not installable here).
            prop_assert_eq!(
                plan.isolation.is_verified(),
                !client.spec().unverified_isolation
            );
            // The JSON form parses back into the same plan.
            let back: LaunchPlan = serde_json::from_str(&plan.to_json()).unwrap();
            prop_assert_eq!(&back, &plan);
            // No flow-starting server, the result channel first.
            prop_assert_eq!(plan.servers[0].id.as_str(), RESULT_CHANNEL_ID);
            for s in &plan.servers {
                prop_assert!(!lookup(&s.id).unwrap().starts_flows, "{} in {}", s.id, client);
            }
            // The review-context server last, exactly in a borrowed-snapshot review.
            let contexts: Vec<usize> = plan
                .servers
                .iter()
                .enumerate()
                .filter(|(_, s)| s.id == REVIEW_CONTEXT_ID)
                .map(|(i, _)| i)
                .collect();
            let expected = review_context.as_ref().map(|_| plan.servers.len() - 1);
            prop_assert_eq!(contexts, Vec::from_iter(expected), "{}", client);
            let mut carried = carried_servers(&plan);
            if matches!(
                client,
                Client::Claude | Client::Antigravity | Client::Copilot | Client::Codex
            ) {
                // serde_json reads the object's keys sorted; the order is in the golden tests.
                let order: Vec<&str> = plan.servers.iter().map(|s| s.id.as_str()).collect();
                carried.sort_by_key(|(id, _)| order.iter().position(|o| o == id));
            }
            prop_assert_eq!(
                carried.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
                plan.servers.iter().map(|s| s.id.as_str()).collect::<Vec<_>>()
            );
            // KCAP_FLOW_AGENT_ID only on the result channel, with the agent id exactly; the
            // capability URL on the result channel alone, instead of its KCAP_URL, when
            // brokered; every env value parses back exactly.
            for (i, (id, env)) in carried.iter().enumerate() {
                let result_channel = i == 0;
                let review_context = id == REVIEW_CONTEXT_ID;
                prop_assert_eq!(env.get("KCAP_FLOW_AGENT_ID").is_some(), result_channel, "{}", client);
                if result_channel {
                    prop_assert_eq!(&env["KCAP_FLOW_AGENT_ID"], &agent);
                }
                let brokered = result_channel && capability.is_some();
                prop_assert_eq!(env.get("KCAP_FLOW_CAPABILITY_URL"), capability.as_ref().filter(|_| brokered));
                let direct_url = !brokered && !review_context;
                prop_assert_eq!(env.get("KCAP_URL"), Some(&url).filter(|_| direct_url), "{} {}", client, id);
                if review_context {
                    prop_assert_eq!(env.get("KCAP_REVIEW_CONTEXT_URL"), review_context_url(&ctx));
                    prop_assert_eq!(env.get("KCAP_REVIEW_CONTEXT_MODE").map(String::as_str), Some("1"));
                }
                let expected_len = match (result_channel, review_context) {
                    (true, _) => 2, // KCAP_URL or the capability URL, and the agent id
                    (_, true) => 2, // the mode and the URL
                    _ => 1,         // KCAP_URL
                };
                prop_assert_eq!(env.len(), expected_len, "{} {}", client, id);
            }
            // Every server's command and args, as carried, are the kcap binary and the
            // registry's args exactly.
            for (name, command, args) in carried_commands(&plan) {
                let wire = plan.servers.iter().find(|s| s.wire_name == name).unwrap();
                let registry: Vec<&str> = lookup(&wire.id).unwrap().args.to_vec();
                prop_assert_eq!(command.as_str(), "/opt/kcap");
                prop_assert_eq!(args, registry);
            }
            // The environment is built, not filtered: env names are unique, none is
            // inherited too, the client inherits exactly the shared list (so no server env
            // name, no HOME or XDG directory and no client variable of the daemon's), and its
            // root (HOME, the XDG directories, TMPDIR) is under the launch directory.
            let mut names: Vec<&str> = plan.env.iter().map(|v| v.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            prop_assert_eq!(names.len(), plan.env.len());
            prop_assert_eq!(&plan.env_inherit, &root::INHERITED_ENV);
            prop_assert!(!plan.env.iter().any(|v| plan.env_inherit.contains(&v.name)));
            for s in servers() {
                for (name, _) in s.env {
                    prop_assert!(plan.env_value(name).is_none(), "{} sets {}", client, name);
                }
            }
            for name in ["HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "TMPDIR"] {
                let value = plan.env_value(name).unwrap_or_default();
                prop_assert!(value.starts_with("/run/l/"), "{} {}={}", client, name, value);
            }
            // Files and dirs stay under the launch directory, relative and without `..`.
            for path in plan.dirs.iter().chain(plan.files.iter().map(|f| &f.path)) {
                prop_assert!(!path.starts_with('/') && !path.split('/').any(|c| c == ".." || c == "." || c.is_empty()), "{}", path);
            }
            // Client-specific carriers.
            match client {
                Client::Cursor => {
                    prop_assert_eq!(&plan.argv, &cursor::ARGV);
                    let unverified = matches!(&plan.isolation, Isolation::Unverified { reason } if reason == cursor::ISOLATION_REASON);
                    prop_assert!(unverified, "{:?}", plan.isolation);
                }
                Client::Kiro => {
                    prop_assert_eq!(&plan.argv[..2], ["acp", "--trust-tools"]);
                    let trusted: Vec<&str> = plan.argv[2].split(',').collect();
                    prop_assert_eq!(&trusted[..2], &kiro::READ_TOOLS);
                    let mut expected = Vec::new();
                    for s in &plan.servers {
                        prop_assert_eq!(&s.wire_name, &format!("{}-{hex}", lookup(&s.id).unwrap().alias_stem()));
                        for t in lookup(&s.id).unwrap().tools.iter().filter(|t| t.unattended_safe) {
                            expected.push(format!("@{}/{}", s.wire_name, t.name));
                        }
                    }
                    prop_assert_eq!(&trusted[2..], &expected[..]);
                    let kiro_home = format!("/run/l/{}", kiro::KIRO_HOME);
                    prop_assert_eq!(plan.env_value("KIRO_HOME"), Some(kiro_home.as_str()));
                    prop_assert!(plan.dirs.iter().any(|d| d == kiro::KIRO_HOME));
                }
                Client::Antigravity => {
                    prop_assert!(plan.session_new.is_none());
                    let settings = &plan.files[1];
                    prop_assert_eq!(&settings.path, &format!("{}/{}", root::HOME_DIR, antigravity::SETTINGS));
                    let settings: Value = serde_json::from_str(&settings.contents).unwrap();
                    let allow: Vec<String> = serde_json::from_value(settings["permissions"]["allow"].clone()).unwrap();
                    let mut expected = Vec::new();
                    for s in &plan.servers {
                        prop_assert_eq!(&s.wire_name, &s.id);
                        for t in lookup(&s.id).unwrap().tools.iter().filter(|t| t.unattended_safe) {
                            expected.push(format!("mcp({}/{})", s.id, t.name));
                        }
                    }
                    prop_assert_eq!(allow, expected);
                    for f in &plan.files {
                        prop_assert_eq!(f.mode, 0o600);
                    }
                }
                Client::Gemini => {
                    let i = plan.argv.iter().position(|a| a == "--allowed-mcp-server-names").unwrap();
                    let names: Vec<&str> = plan.argv[i + 1].split(',').collect();
                    let wire: Vec<&str> = plan.servers.iter().map(|s| s.wire_name.as_str()).collect();
                    prop_assert_eq!(names, wire);
                    for s in &plan.servers {
                        prop_assert_eq!(&s.wire_name, &format!("{}-{hex}", lookup(&s.id).unwrap().alias_stem()));
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
                }
                Client::Copilot => copilot_carriers(&plan, &ctx)?,
                _ => {}
            }
        }
    }
}

/// Copilot's carriers: the `--additional-mcp-config` JSON parses back into exactly the
/// injected servers (type, command, args, env; in order); no server is disabled by name (the
/// per-launch `COPILOT_HOME` configures none); the tool flags name only injected servers; no
/// automatic update; COPILOT_ALLOW_ALL is never set.
fn copilot_carriers(plan: &LaunchPlan, ctx: &LaunchContext) -> Result<(), TestCaseError> {
    let json = argv_file(plan, "--additional-mcp-config");
    let config: Value = serde_json::from_str(json).unwrap();
    let entries = config["mcpServers"].as_object().unwrap();
    prop_assert_eq!(config.as_object().unwrap().len(), 1);
    prop_assert_eq!(entries.len(), plan.servers.len());
    let mut last = 0;
    for wire in &plan.servers {
        let entry = &entries[&wire.wire_name];
        let server = lookup(&wire.id).unwrap();
        prop_assert_eq!(entry["type"].as_str(), Some("stdio"));
        prop_assert_eq!(entry["command"].as_str(), ctx.kcap_bin.as_deref());
        let args: Vec<String> = serde_json::from_value(entry["args"].clone()).unwrap();
        prop_assert_eq!(
            args,
            server
                .args
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
        );
        prop_assert_eq!(entry.as_object().unwrap().len(), 4);
        // In injection order in the text itself.
        let at = json
            .find(&format!(
                "{}:{{",
                serde_json::to_string(&wire.wire_name).unwrap()
            ))
            .unwrap();
        prop_assert!(at >= last);
        last = at;
    }
    let ours: Vec<&str> = plan.servers.iter().map(|s| s.wire_name.as_str()).collect();
    prop_assert!(
        !plan
            .argv
            .iter()
            .any(|a| a.starts_with("--disable-mcp-server"))
    );
    prop_assert!(plan.argv.iter().any(|a| a == "--no-auto-update"));
    let home = format!("{}/home/.copilot", ctx.launch_dir.as_deref().unwrap());
    prop_assert_eq!(plan.env_value("COPILOT_HOME"), Some(home.as_str()));
    for tool in plan
        .argv
        .iter()
        .filter_map(|a| a.strip_prefix("--available-tools="))
    {
        prop_assert!(
            tool == NO_TOOL
                || ours
                    .iter()
                    .any(|s| tool == *s || tool.starts_with(&format!("{s}-"))),
            "{} available",
            tool
        );
    }
    for tool in plan
        .argv
        .iter()
        .filter_map(|a| a.strip_prefix("--allow-tool="))
    {
        prop_assert!(
            ours.iter()
                .any(|s| tool == *s || tool.starts_with(&format!("{s}("))),
            "{} allowed",
            tool
        );
    }
    prop_assert!(
        !plan
            .argv
            .iter()
            .any(|a| a == "--allow-all-tools" || a == "--allow-all" || a == "--yolo")
    );
    prop_assert!(plan.env_value("COPILOT_ALLOW_ALL").is_none());
    Ok(())
}

/// The review-context URL of a borrowed-snapshot context.
fn review_context_url(ctx: &LaunchContext) -> Option<&String> {
    match &ctx.snapshot {
        Snapshot::Borrowed { review_context_url } => review_context_url.as_ref(),
        Snapshot::Own => None,
    }
}

/// Every tool of every server of the bundled registry fits every aliasing client's limit
/// with a 16-hex launch id (registry rule `tool-name-length`): on Gemini,
/// `mcp_<stem>-<16 hex>_<tool>` within 63 characters, on Qwen Code
/// `mcp__<stem>-<16 hex>__<tool>` within 63, the stem being the server's `alias` or its id.
/// `kcap-review-context`'s tool fits only through its alias `kcap-rcx` (without it: 72 on
/// Gemini; `kcap-rctx` made 64 on Qwen Code), and a 32-hex suffix (the original system's)
/// would overflow.
#[test]
fn every_tool_of_every_server_fits_every_aliasing_client() {
    let id = LaunchId::from_hex("ffffffffffffffff").unwrap();
    assert_eq!(ALIASING_CLIENTS, [GEMINI_TOOL_NAMES, QWEN_TOOL_NAMES]);
    assert_eq!(MAX_TOOL_NAME, 63);
    let mut checked = 0;
    for client in ALIASING_CLIENTS {
        for s in servers() {
            let wire = id.wire_name(s);
            assert_eq!(
                wire,
                format!("{}-ffffffffffffffff", s.alias.unwrap_or(s.id))
            );
            for t in s.tools {
                let name = client.qualified(&wire, t.name);
                assert!(
                    name.len() <= client.max_len,
                    "{}: {name} is {} long",
                    client.client,
                    name.len()
                );
                assert_eq!(name.len(), client.aliased_len(s.alias_stem(), t.name));
                let room = if client.client == "qwen" {
                    kcap_mcp_registry::clients::qwen::qualified_tool_name(&wire, t.name)
                } else {
                    qualified_tool_name(&wire, t.name)
                };
                assert_eq!(room, name);
                checked += 1;
            }
        }
    }
    assert_eq!(
        checked,
        ALIASING_CLIENTS.len() * servers().iter().map(|s| s.tools.len()).sum::<usize>()
    );
    let context = lookup(REVIEW_CONTEXT_ID).unwrap();
    assert_eq!(context.alias, Some("kcap-rcx"));
    let longest = qualified_tool_name(&id.wire_name(context), "get_branch_authored_mcp_configs");
    assert_eq!(
        longest,
        "mcp_kcap-rcx-ffffffffffffffff_get_branch_authored_mcp_configs"
    );
    assert_eq!(longest.len(), 61);
    let on_qwen = kcap_mcp_registry::clients::qwen::qualified_tool_name(
        &id.wire_name(context),
        "get_branch_authored_mcp_configs",
    );
    assert_eq!(
        on_qwen,
        "mcp__kcap-rcx-ffffffffffffffff__get_branch_authored_mcp_configs"
    );
    assert_eq!(on_qwen.len(), 63);
    let unaliased = qualified_tool_name(&id.alias(context.id), "get_branch_authored_mcp_configs");
    assert_eq!(unaliased.len(), 72);
    let long_alias = format!("kcap-sessions-{}", "f".repeat(32));
    assert!(qualified_tool_name(&long_alias, "get_session_transcript").len() > MAX_TOOL_NAME);
    assert_eq!(LaunchId::HEX_LEN * 4, 64);
}

proptest! {
    /// Over random launch ids, a brokered borrowed-snapshot Gemini launch with every
    /// allowlistable server names each injected server [`LaunchId::wire_name`] everywhere
    /// (the allow list, `session/new`, `servers`), every wire name is distinct, and every
    /// qualified tool name of every injected server is within Gemini's 63 characters.
    #[test]
    fn gemini_wire_names_fit_for_every_launch_id(bits in any::<u64>()) {
        let id = LaunchId::from_hex(&format!("{bits:016x}")).unwrap();
        let ctx = LaunchContext {
            server_url: Some("http://127.0.0.1:5100".into()),
            kcap_bin: Some("/opt/kcap".into()),
            agent_id: "a1".into(),
            mcp_allowlist: Some(servers().iter().map(|s| Some(s.id.to_owned())).collect()),
            worktree: Some("/work/tree".into()),
            launch_dir: Some("/run/l".into()),
            result_delivery: ResultDelivery::from_capability_url(Some("http://127.0.0.1:9/cap".into())),
            snapshot: Snapshot::from_launch(false, Some("http://127.0.0.1:9/rc".into())),
            ..LaunchContext::default()
        };
        let plan = plan_with(Client::Gemini, &ctx, &id).unwrap();
        prop_assert!(plan.servers.iter().any(|s| s.id == REVIEW_CONTEXT_ID));
        let session = plan.session_new.as_ref().unwrap();
        let mut names = Vec::new();
        for (wire, acp) in plan.servers.iter().zip(&session.mcp_servers) {
            let server = lookup(&wire.id).unwrap();
            prop_assert_eq!(&wire.wire_name, &id.wire_name(server));
            prop_assert_eq!(&acp.name, &wire.wire_name);
            for t in server.tools {
                let q = qualified_tool_name(&wire.wire_name, t.name);
                prop_assert!(q.len() <= MAX_TOOL_NAME, "{} is {} long", q, q.len());
            }
            names.push(wire.wire_name.clone());
        }
        prop_assert_eq!(plan.argv[5].clone(), names.join(","));
        let n = names.len();
        names.sort();
        names.dedup();
        prop_assert_eq!(names.len(), n);
    }
}

/// Issue 31, item 3: no secret in any argv, which every local user reads
/// (`/proc/<pid>/cmdline`): the agent id and the capability URL reach the client's servers
/// through a file of the launch directory (mode 0600) or the ACP session, never the command
/// line; and they still reach the result channel (moved, not dropped).
#[test]
fn no_client_puts_the_agent_id_or_the_capability_url_in_its_argv() {
    let agent = "agent-secret-7f3a";
    let capability = "http://127.0.0.1:41234/capability-secret-c4p";
    let ctx = LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/opt/kcap".into()),
        agent_id: agent.into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/l".into()),
        result_delivery: ResultDelivery::from_capability_url(Some(capability.into())),
        ..LaunchContext::default()
    };
    let id = LaunchId::from_hex("0123456789abcdef").unwrap();
    for client in CLIENTS {
        let plan = plan_with(client, &ctx, &id).unwrap();
        for secret in [agent, capability] {
            let leak = plan.argv.iter().find(|a| a.contains(secret));
            assert_eq!(leak, None, "{client}: a secret in the argv");
        }
        let carried = carried_servers(&plan);
        let (_, result) = carried
            .iter()
            .find(|(id, _)| id == RESULT_CHANNEL_ID)
            .unwrap();
        assert_eq!(
            result.get("KCAP_FLOW_AGENT_ID").map(String::as_str),
            Some(agent),
            "{client}"
        );
        assert_eq!(
            result.get("KCAP_FLOW_CAPABILITY_URL").map(String::as_str),
            Some(capability),
            "{client}"
        );
    }
}

/// Every client's plan names its reviewer's boundary (`LaunchPlan::sandbox`): the system's
/// directories and the kcap binary its MCP servers run to read and execute, the worktree to
/// read, the launch directory to write, the daemon's cache (shared by every launch) to read
/// and execute only; a gated launch (no MCP server) leaves the kcap binary out.
#[test]
fn every_plan_names_its_sandbox() {
    use kcap_mcp_registry::clients::dispatch::PlanInputs;
    use kcap_mcp_registry::clients::plan::{SYSTEM_DEVICES, SYSTEM_PROC_READ, SYSTEM_READ_EXEC};
    let ctx = LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/opt/kcap/bin/kcap".into()),
        agent_id: "a1".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/kcap/l1".into()),
        cache_dir: Some("/var/cache/kcap".into()),
        // Antigravity takes only a brokered result channel.
        result_delivery: ResultDelivery::from_capability_url(Some("http://127.0.0.1:9/c".into())),
        ..LaunchContext::default()
    };
    let mut gated = ctx.clone();
    gated.server_url = None;
    let owned = |paths: &[&str]| paths.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>();
    let mut inputs = PlanInputs::new(Policy::Lenient);
    inputs.unverified_isolation = UnverifiedIsolation::Allow;
    for client in Client::ALL {
        let s = client.plan(&ctx, &inputs).unwrap().plan.sandbox;
        let mut read_exec = owned(SYSTEM_READ_EXEC);
        read_exec.push("/opt/kcap/bin/kcap".into());
        read_exec.push("/var/cache/kcap".into());
        assert_eq!(s.read_exec, read_exec, "{client}");
        let mut read = vec!["/work/tree".to_owned()];
        read.extend(owned(SYSTEM_PROC_READ));
        assert_eq!(s.read, read, "{client}");
        let mut read_write = vec!["/run/kcap/l1".to_owned()];
        read_write.extend(owned(SYSTEM_DEVICES));
        assert_eq!(s.read_write, read_write, "{client}");
        let g = client.plan(&gated, &inputs).unwrap().plan.sandbox;
        let mut gated_exec = owned(SYSTEM_READ_EXEC);
        gated_exec.push("/var/cache/kcap".into());
        assert_eq!(g.read_exec, gated_exec, "{client} gated");
    }
}

/// Gemini CLI and Qwen Code load the first `.env` they find in the worktree's parents; the
/// sandbox keeps one written after the preflight out only where the parent lies outside it
/// (`tests/clients/env_race.rs`), so a worktree with a parent in the plan's sandbox (here the
/// daemon's cache, which every reviewer reads) is refused, naming the nearest parent.
#[test]
fn a_gemini_family_worktree_with_a_parent_in_the_sandbox_is_refused() {
    use kcap_mcp_registry::clients::dispatch::PlanInputs;
    let ctx = LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/opt/kcap/bin/kcap".into()),
        agent_id: "a1".into(),
        worktree: Some("/var/cache/kcap/trees/wt".into()),
        launch_dir: Some("/run/kcap/l1".into()),
        cache_dir: Some("/var/cache/kcap".into()),
        ..LaunchContext::default()
    };
    for client in [Client::Gemini, Client::Qwen] {
        let err = client
            .plan(&ctx, &PlanInputs::new(Policy::Lenient))
            .unwrap_err();
        assert!(
            matches!(
                &err,
                LaunchError::Render(RenderError::ParentInSandbox { client: c, dir, path })
                    if *c == client
                        && dir == std::path::Path::new("/var/cache/kcap/trees")
                        && path == "/var/cache/kcap"
            ),
            "{client}: {err:?}"
        );
        assert!(err.to_string().contains("lets it read"), "{err}");
        let mut beside = ctx.clone();
        beside.worktree = Some("/var/lib/kcap/trees/wt".into());
        assert!(
            client
                .plan(&beside, &PlanInputs::new(Policy::Lenient))
                .is_ok()
        );
    }
}

/// Each installable client's docs/isolation page names, in its boundary table, every variable
/// by which its plan points the client at a place under the launch directory: the page
/// cannot leave out a state directory the plan adds.
#[test]
fn each_clients_boundary_table_names_its_state_directories() {
    use kcap_mcp_registry::clients::dispatch::PlanInputs;
    let ctx = LaunchContext {
        agent_id: "a1".into(),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/kcap/l1".into()),
        ..LaunchContext::default()
    };
    for client in [
        Client::Claude,
        Client::Codex,
        Client::Gemini,
        Client::OpenCode,
        Client::Copilot,
        Client::Qwen,
    ] {
        let page = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("docs/isolation/{}.md", client.name())),
        )
        .unwrap();
        let table = page
            .split("## The boundary (sandbox)")
            .nth(1)
            .unwrap_or_else(|| panic!("{client}: no boundary section"))
            .split("\n## ")
            .next()
            .unwrap();
        let plan = client
            .plan(&ctx, &PlanInputs::new(Policy::Lenient))
            .unwrap()
            .plan;
        for var in plan
            .env
            .iter()
            .filter(|v| v.value.starts_with("/run/kcap/l1"))
        {
            assert!(
                table.contains(&format!("| `{}` |", var.name)),
                "{client}: docs/isolation/{}.md's boundary table lacks `{}`",
                client.name(),
                var.name
            );
        }
    }
}

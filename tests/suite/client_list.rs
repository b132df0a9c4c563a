//! Every client in the one list (`Client::ALL`) carries its proofs: golden plans of every
//! scenario, a registration file that round-trips through its own loader model with no
//! drift, and real-client tests (or an explicit facts-only marker). A client added to the
//! list without them fails here, naming what is missing.

use std::path::Path;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::registration;
use kcap_mcp_registry::clients::registration::RegistrationOptions;
use kcap_mcp_registry::clients::spec::Proof;
use kcap_mcp_registry::ops;
use kcap_mcp_registry::ops::check::AgainstOptions;
use kcap_mcp_registry::ops::list::compiled_entries;

// "brokered-borrowed" before its suffixes, so a file name is split at the right dash.
const SCENARIOS: [&str; 7] = [
    "brokered-borrowed",
    "baseline",
    "borrowed",
    "brokered",
    "gated",
    "lenient",
    "strict",
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_client_has_golden_plans_of_every_scenario() {
    let mut missing = Vec::new();
    for client in Client::ALL {
        for scenario in SCENARIOS {
            if client == Client::Cursor && scenario == "strict" {
                // The strict policy refuses Cursor: `--force` runs its every tool unasked.
                continue;
            }
            let file = format!("tests/fixtures/plans/{}-{scenario}.json", client.name());
            if !root().join(&file).is_file() {
                missing.push(file);
            }
        }
    }
    assert_eq!(
        missing,
        Vec::<String>::new(),
        "golden plans missing: add the client to tests/suite/plan_golden.rs and bless with \
         KCAP_BLESS=1 cargo test --test suite plan_golden::"
    );
    // And no golden plan of a client that is not in the list.
    let names: Vec<&str> = Client::ALL.iter().map(|c| c.name()).collect();
    for item in std::fs::read_dir(root().join("tests/fixtures/plans")).unwrap() {
        let name = item.unwrap().file_name().into_string().unwrap();
        let client = SCENARIOS
            .iter()
            .find_map(|s| name.strip_suffix(&format!("-{s}.json")))
            .unwrap_or_else(|| panic!("{name}: not <client>-<scenario>.json"));
        assert!(names.contains(&client), "{name}: no client `{client}`");
    }
}

#[test]
fn every_clients_registration_file_round_trips_through_its_loader_model() {
    let entries = compiled_entries();
    let opts = RegistrationOptions {
        command: "/usr/local/bin/kcap".into(),
        ..RegistrationOptions::default()
    };
    let dir = tempfile::tempdir().unwrap();
    for client in Client::ALL {
        let format = client.registration();
        let text = (format.export)(&entries, &opts).unwrap();
        let path = dir.path().join(format!("{}.registration", client.name()));
        std::fs::write(&path, &text).unwrap();
        let against = AgainstOptions {
            client: Some(client),
            ..AgainstOptions::default()
        };
        let checked = ops::check::check_against(&entries, &opts.command, &path, &against).unwrap();
        assert!(!checked.is_empty(), "{client}: no verdict");
        for c in &checked {
            assert_eq!(c.client, client);
            assert_eq!(
                c.drift,
                Vec::new(),
                "{client}: its own export drifts:\n{text}"
            );
            // Every allowlistable registry server is started, under its id.
            let started: Vec<&str> = c.loaded.started.iter().map(|s| s.name.as_str()).collect();
            let registered: Vec<&str> = registration::registrations(&entries)
                .map(|e| e.id.as_str())
                .collect();
            assert_eq!(started, registered, "{client}");
        }
    }
}

#[test]
fn every_client_has_real_client_tests_or_is_marked_facts_only() {
    // The real-client binary: its modules run on the harness that reports a missing client as
    // ignored with the reason, and fails it under KCAP_REQUIRE_PEERS=1.
    let binary = std::fs::read_to_string(root().join("tests/clients/main.rs")).unwrap();
    let mut facts_only = Vec::new();
    for client in Client::ALL {
        match client.spec().proof {
            Proof::RealClient { tests, versions } => {
                assert!(!versions.is_empty(), "{client}: no client version named");
                assert!(!tests.is_empty(), "{client}: no real-client test named");
                for test in tests {
                    // A module is `<test>.rs`, or a directory `<test>/` (its files read as one).
                    let file = root().join(format!("tests/clients/{test}.rs"));
                    let dir = root().join(format!("tests/clients/{test}"));
                    let text = if dir.join("mod.rs").is_file() {
                        let mut text = String::new();
                        for entry in std::fs::read_dir(&dir).unwrap() {
                            text += &std::fs::read_to_string(entry.unwrap().path()).unwrap();
                        }
                        text
                    } else {
                        std::fs::read_to_string(&file)
                            .unwrap_or_else(|e| panic!("{client}: {}: {e}", file.display()))
                    };
                    assert!(
                        binary
                            .lines()
                            .any(|l| l.trim_end().ends_with(&format!("mod {test};"))),
                        "{client}: tests/clients/main.rs does not declare `mod {test};`"
                    );
                    assert!(
                        text.contains(&format!("Client::{client:?}"))
                            || text.contains(&format!("\"{}\"", client.name()))
                            || text.contains(&format!("{}_", client.name())),
                        "{client}: tests/clients/{test}.rs does not name the client"
                    );
                }
            }
            Proof::FactsOnly => facts_only.push(client.name()),
            _ => unreachable!("a new kind of proof needs a rule here"),
        }
    }
    // The clients not installable here, and only those.
    assert_eq!(facts_only, ["cursor", "kiro", "antigravity"]);
}

#[test]
fn every_clients_spec_is_consistent() {
    for client in Client::ALL {
        let spec = client.spec();
        assert_eq!(Client::from_name(spec.name), Some(client));
        assert_eq!(client.registration().client, client, "{client}");
        assert!(
            !spec.binary.is_empty() && !spec.binary.contains('/'),
            "{client}"
        );
        assert!(!spec.display_name.is_empty(), "{client}");
    }
}

/// The spec's facts agree with what the room renders and proves: a client driven over ACP
/// has an ACP session in its plan, and `verify` runs exactly the clients proven on the real
/// client.
#[test]
fn every_clients_spec_agrees_with_its_plan_and_its_proof() {
    for client in Client::ALL {
        let spec = client.spec();
        let file = root().join(format!(
            "tests/fixtures/plans/{}-baseline.json",
            client.name()
        ));
        let plan: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            !plan["session_new"].is_null(),
            spec.acp,
            "{client}: spec says acp = {}, its plan {}",
            spec.acp,
            file.display()
        );
        assert_eq!(
            spec.verify.is_some(),
            matches!(spec.proof, Proof::RealClient { .. }),
            "{client}: `verify` runs exactly the clients proven on the real client"
        );
        // The plan names the versions its isolation was proven on: the proof's.
        let proven: Vec<&str> = match spec.proof {
            Proof::RealClient { versions, .. } => versions.to_vec(),
            _ => Vec::new(),
        };
        let isolation = &plan["isolation"];
        if spec.unverified_isolation {
            assert_eq!(isolation["status"], "unverified", "{client}");
        } else {
            assert_eq!(isolation["status"], "verified", "{client}");
            assert_eq!(
                isolation["proven_on"],
                serde_json::json!(proven),
                "{client}"
            );
        }
    }
}

/// What the spec says a launch needs is what the plan refuses without: an absolute worktree
/// (`ClientSpec::needs_worktree`), brokered result delivery (`ClientSpec::brokered_only`).
#[test]
fn every_clients_spec_says_what_its_launch_needs() {
    use kcap_mcp_registry::clients::dispatch::PlanInputs;
    use kcap_mcp_registry::{LaunchContext, LaunchError, Policy, RenderError, ResultDelivery};
    let ctx = |worktree: bool, brokered: bool| {
        let mut ctx = LaunchContext {
            server_url: Some("http://127.0.0.1:5100".into()),
            kcap_bin: Some("/usr/local/bin/kcap".into()),
            agent_id: "a1".into(),
            launch_dir: Some("/run/kcap/l1".into()),
            worktree: worktree.then(|| "/work/tree".into()),
            ..LaunchContext::default()
        };
        if brokered {
            ctx.result_delivery = ResultDelivery::Brokered {
                capability_url: "http://127.0.0.1:4100/cap".into(),
            };
        }
        ctx
    };
    let mut inputs = PlanInputs::new(Policy::Lenient);
    inputs.unverified_isolation = kcap_mcp_registry::clients::dispatch::UnverifiedIsolation::Allow;
    for client in Client::ALL {
        let spec = client.spec();
        assert!(client.plan(&ctx(true, true), &inputs).is_ok(), "{client}");
        let no_worktree = client.plan(&ctx(false, true), &inputs);
        // A plan without a worktree is one the executor carries out (in the launch
        // directory).
        if let Ok(launch) = &no_worktree {
            let checked = kcap_mcp_registry::launch::check(&launch.plan);
            assert!(checked.is_ok(), "{client}: {checked:?}");
        }
        assert_eq!(
            matches!(
                no_worktree,
                Err(LaunchError::Render(RenderError::NeedsAbsolute {
                    field: "worktree",
                    ..
                }))
            ),
            spec.needs_worktree,
            "{client}: needs_worktree = {}, without a worktree: {no_worktree:?}",
            spec.needs_worktree
        );
        let direct = client.plan(&ctx(true, false), &inputs);
        assert_eq!(
            matches!(
                direct,
                Err(LaunchError::Render(
                    RenderError::NeedsBrokeredDelivery { .. }
                ))
            ),
            spec.brokered_only,
            "{client}: brokered_only = {}, with direct delivery: {direct:?}",
            spec.brokered_only
        );
    }
}

/// A plan's `client` is a `Client`: serialized as its name, and a name no client has does
/// not parse.
#[test]
fn a_plans_client_is_one_of_the_list() {
    use kcap_mcp_registry::clients::plan::LaunchPlan;
    let file = root().join("tests/fixtures/plans/qwen-baseline.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let plan: LaunchPlan = serde_json::from_str(&text).unwrap();
    assert_eq!(plan.client, Client::from_name("qwen").unwrap());
    assert_eq!(plan.to_json(), text);
    let other = text.replacen("\"client\": \"qwen\"", "\"client\": \"qwen2\"", 1);
    assert_ne!(other, text);
    let e = serde_json::from_str::<LaunchPlan>(&other).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("unknown client `qwen2`, expected one of: claude, codex, gemini"),
        "{e}"
    );
}

/// The table of docs/launch-plan.md's "Built-in tools that run unasked" is the rooms' data
/// (`ClientSpec::builtins`, `clients::tools`): one row per client, generated here
/// (`KCAP_BLESS=1` writes it).
#[test]
fn the_docs_table_of_unasked_builtin_tools_is_the_rooms_data() {
    use kcap_mcp_registry::clients::tools::ToolKind;
    let kinds = [
        (ToolKind::Run, "run"),
        (ToolKind::Write, "write"),
        (ToolKind::Web, "web"),
        (ToolKind::Agent, "agent"),
        (ToolKind::Read, "read"),
        (ToolKind::Other, "other"),
    ];
    let mut table = String::from(
        "| client | built-in tools that run unasked, by kind | under `Policy::Strict` |\n|---|---|---|\n",
    );
    for client in Client::ALL {
        let spec = client.spec();
        let groups: Vec<String> = kinds
            .iter()
            .filter_map(|(kind, word)| {
                let names: Vec<String> = spec
                    .builtins
                    .iter()
                    .filter(|b| b.kind == *kind)
                    .map(|b| format!("`{}`", b.name))
                    .collect();
                (!names.is_empty()).then(|| format!("{word}: {}", names.join(", ")))
            })
            .collect();
        let effects = spec.builtins.iter().any(|b| b.kind.has_effects());
        let strict = match (effects, spec.hides_builtins) {
            (false, _) => "the same",
            (true, true) => "those of kind run, write, web and agent hidden from the model",
            (true, false) => "refused (`RenderError::UnaskedTools`)",
        };
        let listed = if groups.is_empty() {
            "none".to_owned()
        } else {
            groups.join("; ")
        };
        table.push_str(&format!(
            "| {} | {listed} | {strict} |\n",
            spec.display_name
        ));
    }
    let path = root().join("docs/launch-plan.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let begin = "<!-- unasked-tools: generated by client_list.rs -->\n";
    let end = "<!-- /unasked-tools -->\n";
    let at = doc.find(begin).expect("the table's begin marker") + begin.len();
    let to = at + doc[at..].find(end).expect("the table's end marker");
    if std::env::var_os("KCAP_BLESS").is_some_and(|v| v == "1") {
        let mut new = doc.clone();
        new.replace_range(at..to, &table);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert_eq!(
        &doc[at..to],
        table,
        "docs/launch-plan.md: the unasked-tools table differs from the rooms' data; \
         KCAP_BLESS=1 rewrites it"
    );
}

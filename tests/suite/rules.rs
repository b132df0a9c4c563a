//! Every registry rule against its fixture in `tests/fixtures/<rule>/`: the exact rule, file,
//! line and column of every diagnostic, and nothing else.
#![cfg(feature = "validate")]

use std::path::Path;

use kcap_mcp_registry::schema::{Rule, validate_dir, validate_path};
use kcap_mcp_registry::{CheckError, diagnostic};

/// (rule name, file name or "" for the directory, line, column) of each diagnostic.
fn diagnostics(fixture: &str) -> Vec<(String, String, usize, usize)> {
    let dir = Path::new("tests/fixtures").join(fixture);
    let Err(CheckError::Invalid(diags)) = validate_dir(&dir) else {
        panic!("fixture {fixture} should be invalid");
    };
    diags
        .iter()
        .map(|d| {
            let file = Path::new(&d.path)
                .strip_prefix(&dir)
                .unwrap()
                .display()
                .to_string();
            let loc = d.location();
            (
                d.rule.name().to_string(),
                file,
                loc.map_or(0, |l| l.line),
                loc.map_or(0, |l| l.column),
            )
        })
        .collect()
}

fn one(rule: &str, file: &str, line: usize, column: usize) -> Vec<(String, String, usize, usize)> {
    vec![(rule.into(), file.into(), line, column)]
}

#[test]
fn each_single_rule_fixture_reports_exactly_its_rule_and_location() {
    let cases: &[(&str, &str, usize, usize)] = &[
        ("toml-utf8", "kcap-x.toml", 2, 19),
        ("toml-syntax", "kcap-x.toml", 2, 18),
        ("unknown-key", "kcap-x.toml", 4, 1),
        ("wrong-type", "kcap-x.toml", 4, 16),
        ("missing-key", "kcap-x.toml", 1, 1),
        ("id-canonical", "kcap-x.toml", 1, 6),
        ("id-file-stem", "kcap-x.toml", 1, 6),
        ("description-format", "kcap-x.toml", 2, 15),
        ("args-format", "kcap-x.toml", 3, 16),
        ("env-name", "kcap-x.toml", 7, 1),
        ("env-source", "kcap-x.toml", 7, 12),
        ("tool-name", "kcap-x.toml", 7, 8),
        ("tool-unique", "kcap-x.toml", 10, 8),
        ("inject-value", "kcap-x.toml", 6, 10),
        ("env-constant", "kcap-x.toml", 7, 23),
        ("result-channel-missing", "", 0, 0),
        (
            "result-channel-allowlistable",
            "kcap-flow-result.toml",
            5,
            17,
        ),
        (
            "result-channel-starts-flows",
            "kcap-flow-result.toml",
            4,
            16,
        ),
        ("inject-always", "kcap-x.toml", 6, 10),
        ("injection-only-starts-flows", "kcap-x.toml", 4, 16),
        ("agent-id-injection-only", "kcap-x.toml", 8, 22),
        ("env-source-scope", "kcap-x.toml", 7, 12),
        ("capability-url-server-url", "kcap-flow-result.toml", 9, 28),
        ("borrowed-snapshot-server-url", "kcap-x.toml", 9, 12),
        ("registered-scope", "kcap-x.toml", 7, 14),
        ("driver-stamp-scope", "kcap-x.toml", 5, 16),
        ("starts-flows-read-only", "kcap-x.toml", 5, 13),
        ("starts-flows-unattended-safe", "kcap-x.toml", 8, 19),
        ("unattended-safe-scope", "kcap-x.toml", 8, 19),
        ("registry-empty", "", 0, 0),
        ("stray-file", "kcap-search.tml", 0, 0),
    ];
    for &(rule, file, line, column) in cases {
        assert_eq!(
            diagnostics(rule),
            one(rule, file, line, column),
            "fixture {rule}"
        );
    }
}

#[test]
fn the_alias_rules_and_the_aliased_tool_name_length_report_each_violation() {
    let d =
        |rule: &str, file: &str, line, column| (rule.to_string(), file.to_string(), line, column);
    // A 30-byte id overflows Claude's `mcp__<id>__<tool>` (its 2-byte alias fits Gemini and
    // Qwen Code); a 37-byte tool name overflows Gemini's `mcp_<id>-<16 hex>_<tool>` and Qwen
    // Code's `mcp__<id>-<16 hex>__<tool>` (one diagnostic each), not Claude's.
    assert_eq!(
        diagnostics("tool-name-length"),
        vec![
            d(
                "tool-name-length",
                "kcap-aaaaaaaaaaaaaaaaaaaaaaaaa.toml",
                9,
                8
            ),
            d("tool-name-length", "kcap-x.toml", 8, 8),
            d("tool-name-length", "kcap-x.toml", 8, 8),
        ]
    );
    assert_eq!(
        diagnostics("tool-name-length-alias"),
        vec![
            d("tool-name-length", "kcap-review-context.toml", 8, 8),
            d("tool-name-length", "kcap-review-context.toml", 8, 8),
            d("tool-name-length", "kcap-review-contexts.toml", 9, 8),
            d("tool-name-length", "kcap-review-contexts.toml", 9, 8),
        ]
    );
    assert_eq!(
        diagnostics("alias-format"),
        vec![d("alias-format", "kcap-x.toml", 5, 9)]
    );
    // Apart, because the JSON Schema rejects this one too (its pattern).
    assert_eq!(
        diagnostics("alias-format-pattern"),
        vec![d("alias-format", "kcap-y.toml", 5, 9)]
    );
    assert_eq!(
        diagnostics("alias-unique"),
        vec![
            d("alias-unique", "kcap-xx.toml", 5, 9),
            d("alias-unique", "kcap-zzz.toml", 5, 9),
        ]
    );
}

#[test]
fn inject_scope_flags_inject_on_an_allowlistable_entry_and_its_absence_on_a_reserved_one() {
    assert_eq!(
        diagnostics("inject-scope"),
        vec![
            ("inject-scope".into(), "kcap-x.toml".into(), 5, 10),
            ("inject-scope".into(), "kcap-y.toml".into(), 5, 17),
        ]
    );
}

/// (message, help) of every diagnostic of a fixture.
fn messages(fixture: &str) -> Vec<(String, String)> {
    let dir = Path::new("tests/fixtures").join(fixture);
    let Err(CheckError::Invalid(diags)) = validate_dir(&dir) else {
        panic!("fixture {fixture} should be invalid");
    };
    diags.into_iter().map(|d| (d.message, d.help)).collect()
}

#[test]
fn the_injection_and_tool_name_rules_say_what_is_wrong_and_how_to_fix_it() {
    let pinned: &[(&str, &[(&str, &str)])] = &[
        (
            "env-constant",
            &[(
                "the constant of `env.KCAP_MODE` contains `${`, which Claude Code expands as a variable reference",
                "write a non-empty, single-line value without `${`",
            )],
        ),
        (
            "tool-name-length",
            &[
                (
                    "the tool's qualified name `mcp__kcap-aaaaaaaaaaaaaaaaaaaaaaaaa__bbbbbbbbbbbbbbbbbbbbbbbbbbbb` is 65 bytes long, over the 64 the model APIs allow",
                    "shorten the tool name to at most 27 bytes, or the id",
                ),
                (
                    "on client `gemini`, the tool's qualified name `mcp_kcap-x-0000000000000000_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa` is 65 bytes long with any 16-hex launch id, over the 63 it passes on uncut",
                    "shorten the tool name to at most 35 bytes, or add an alias (`alias = \"…\"`, the stem of per-launch wire names) of at most 4 bytes",
                ),
                (
                    "on client `qwen`, the tool's qualified name `mcp__kcap-x-0000000000000000__aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa` is 67 bytes long with any 16-hex launch id, over the 63 it passes on uncut",
                    "shorten the tool name to at most 33 bytes, or add an alias (`alias = \"…\"`, the stem of per-launch wire names) of at most 2 bytes",
                ),
            ],
        ),
        (
            "tool-name-length-alias",
            &[
                (
                    "on client `gemini`, the tool's qualified name `mcp_kcap-review-context-0000000000000000_get_branch_authored_mcp_configs` is 72 bytes long with any 16-hex launch id, over the 63 it passes on uncut",
                    "shorten the tool name to at most 22 bytes, or add an alias (`alias = \"…\"`, the stem of per-launch wire names) of at most 10 bytes",
                ),
                (
                    "on client `qwen`, the tool's qualified name `mcp__kcap-review-context-0000000000000000__get_branch_authored_mcp_configs` is 74 bytes long with any 16-hex launch id, over the 63 it passes on uncut",
                    "shorten the tool name to at most 20 bytes, or add an alias (`alias = \"…\"`, the stem of per-launch wire names) of at most 8 bytes",
                ),
                (
                    "on client `gemini`, the tool's qualified name `mcp_kcap-rcontext-0000000000000000_get_branch_authored_mcp_configs` is 66 bytes long with any 16-hex launch id, over the 63 it passes on uncut",
                    "shorten the tool name to at most 28 bytes, or shorten the alias (`alias = \"…\"`, the stem of per-launch wire names) of at most 10 bytes",
                ),
                (
                    "on client `qwen`, the tool's qualified name `mcp__kcap-rcontext-0000000000000000__get_branch_authored_mcp_configs` is 68 bytes long with any 16-hex launch id, over the 63 it passes on uncut",
                    "shorten the tool name to at most 26 bytes, or shorten the alias (`alias = \"…\"`, the stem of per-launch wire names) of at most 8 bytes",
                ),
            ],
        ),
        (
            "alias-format",
            &[(
                "alias `kcap-xy` is 7 bytes, not shorter than the id `kcap-x` (6 bytes)",
                "shorten the alias, or remove it: it only exists to shorten per-launch wire names",
            )],
        ),
        (
            "alias-format-pattern",
            &[(
                "alias `Ky` is not canonical (^[a-z][a-z0-9-]*[a-z0-9]$, at most 64 bytes)",
                "use lower-case ASCII letters, digits and `-`, starting with a letter and not ending with `-`, shorter than the id",
            )],
        ),
        (
            "alias-unique",
            &[
                (
                    "alias `kcap-y` is already used as the id `kcap-y` in tests/fixtures/alias-unique/kcap-y.toml, so two servers of one launch could share a wire name",
                    "give this server an alias no other entry has as its id or alias",
                ),
                (
                    "alias `kz` is already used as the alias `kz` in tests/fixtures/alias-unique/kcap-www.toml, so two servers of one launch could share a wire name",
                    "give this server an alias no other entry has as its id or alias",
                ),
            ],
        ),
        (
            "inject-value",
            &[(
                "unknown `inject` condition `borowed-snapshot`",
                "did you mean `\"borrowed-snapshot\"`? write `inject = \"always\"` (the result channel) or `inject = \"borrowed-snapshot\"`",
            )],
        ),
        (
            "inject-scope",
            &[
                (
                    "`inject = \"borrowed-snapshot\"` is for injection-only entries, but this entry is allowlistable",
                    "remove `inject`, or set `allowlistable = false` if only the launcher may inject this server",
                ),
                (
                    "an injection-only entry (`allowlistable = false`) must say when it is injected",
                    "add `inject = \"borrowed-snapshot\"` (injected into borrowed-snapshot reviews only), or `inject = \"always\"` for the result channel",
                ),
            ],
        ),
        (
            "inject-always",
            &[(
                "only the result channel `kcap-flow-result` is injected into every reviewer",
                "use `inject = \"borrowed-snapshot\"`, or make the server allowlistable",
            )],
        ),
        (
            "injection-only-starts-flows",
            &[(
                "an injection-only entry must not start flows: the launcher injects it past the recursion guard",
                "set `starts_flows = false`, or make the server allowlistable so the recursion guard applies",
            )],
        ),
        (
            "env-source-scope",
            &[(
                "`env.KCAP_CTX` takes the review-context URL, which only an `inject = \"borrowed-snapshot\"` entry receives",
                "remove `env.KCAP_CTX`: the launcher gives the review-context URL to `inject = \"borrowed-snapshot\"` servers only",
            )],
        ),
        (
            "capability-url-server-url",
            &[(
                "`env.KCAP_FLOW_CAPABILITY_URL` takes the result capability URL, but no env var takes `\"server_url\"`",
                "add `KCAP_URL = \"server_url\"`: a direct launch sets it instead of the capability URL",
            )],
        ),
        (
            "borrowed-snapshot-server-url",
            &[(
                "`env.KCAP_URL` takes the kcap server URL, but this entry is injected into borrowed-snapshot reviews",
                "remove it: a borrowed-snapshot server reaches kcap through its own `\"review_context_url\"` only",
            )],
        ),
        (
            "registered-scope",
            &[(
                "an injection-only entry cannot be `registered`: only the launcher may start it",
                "remove `registered` (it defaults to false here)",
            )],
        ),
        (
            "driver-stamp-scope",
            &[(
                "`driver_stamp` is for servers that start flows, and this one does not",
                "remove `driver_stamp`: only a flow-starting server needs to know which client drives it",
            )],
        ),
    ];
    for (fixture, expected) in pinned {
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(m, h)| (m.to_string(), h.to_string()))
            .collect();
        assert_eq!(messages(fixture), expected, "fixture {fixture}");
    }
}

#[test]
fn id_unique_names_the_second_file_and_its_stem_mismatch() {
    assert_eq!(
        diagnostics("id-unique"),
        vec![
            ("id-file-stem".into(), "kcap-x2.toml".into(), 1, 6),
            ("id-unique".into(), "kcap-x2.toml".into(), 1, 6),
        ]
    );
}

#[test]
fn every_rule_has_a_fixture_named_after_it() {
    for rule in Rule::ALL {
        assert!(
            Path::new("tests/fixtures").join(rule.name()).is_dir(),
            "rule {rule} has no fixture directory"
        );
        assert_eq!(Rule::from_name(rule.name()), Some(rule));
    }
}

#[test]
fn three_violations_in_two_files_are_all_reported_in_file_order() {
    assert_eq!(
        diagnostics("three-violations-two-files"),
        vec![
            ("unknown-key".into(), "kcap-x.toml".into(), 4, 1),
            ("wrong-type".into(), "kcap-x.toml".into(), 5, 13),
            (
                "agent-id-injection-only".into(),
                "kcap-y.toml".into(),
                7,
                22
            ),
        ]
    );
}

#[test]
fn human_report_is_rustc_style_with_caret_and_help() {
    let dir = Path::new("tests/fixtures/three-violations-two-files");
    let Err(CheckError::Invalid(diags)) = validate_dir(dir) else {
        panic!("fixture should be invalid");
    };
    let expected = r#"error[unknown-key]: unknown key `start_flows`
 --> tests/fixtures/three-violations-two-files/kcap-x.toml:4:1
  |
4 | start_flows = false
  | ^^^^^^^^^^^
  |
  = help: did you mean `starts_flows`? (valid keys: id, description, args, starts_flows, allowlistable, inject, registered, read_only, needs_project_cwd, driver_stamp, alias, env, tools)

error[wrong-type]: `read_only` must be a boolean, found a string
 --> tests/fixtures/three-violations-two-files/kcap-x.toml:5:13
  |
5 | read_only = "yes"
  |             ^^^^^
  |
  = help: write `read_only` as a boolean

error[agent-id-injection-only]: `env.KCAP_FLOW_AGENT_ID` takes the agent id, but this entry is allowlistable
 --> tests/fixtures/three-violations-two-files/kcap-y.toml:7:22
  |
7 | KCAP_FLOW_AGENT_ID = "agent_id"
  |                      ^^^^^^^^^^
  |
  = help: only `allowlistable = false` entries may receive the agent id: use `"server_url"` or set `allowlistable = false`

error: 3 registry rule violations
"#;
    assert_eq!(diagnostic::render_all(&diags, false), expected);
}

#[test]
fn bundled_registry_passes_and_matches_the_compiled_table() {
    let entries = validate_dir(Path::new("registry")).expect("bundled registry is valid");
    let compiled = kcap_mcp_registry::servers();
    assert_eq!(entries.len(), compiled.len());
    for (e, s) in entries.iter().zip(compiled) {
        assert_eq!(e.id, s.id);
        assert_eq!(e.args, s.args);
        assert_eq!(e.description, s.description);
        assert_eq!(
            (
                e.starts_flows,
                e.allowlistable,
                e.read_only,
                e.needs_project_cwd
            ),
            (
                s.starts_flows,
                s.allowlistable,
                s.read_only,
                s.needs_project_cwd
            )
        );
        assert_eq!(
            (e.inject, e.registered, e.driver_stamp),
            (s.inject, s.registered, s.driver_stamp)
        );
        let env: Vec<_> = e
            .env
            .iter()
            .map(|(n, src)| (n.as_str(), src.clone()))
            .collect();
        let compiled_env: Vec<_> = s
            .env
            .iter()
            .map(|&(n, src)| (n, src.map(String::from)))
            .collect();
        assert_eq!(env, compiled_env);
        let tools: Vec<_> = e
            .tools
            .iter()
            .map(|t| (t.name.as_str(), t.unattended_safe))
            .collect();
        let compiled_tools: Vec<_> = s
            .tools
            .iter()
            .map(|t| (t.name, t.unattended_safe))
            .collect();
        assert_eq!(tools, compiled_tools);
    }
}

/// A fresh registry directory holding only a valid result channel.
fn registry_with_result_channel() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        "registry/kcap-flow-result.toml",
        dir.path().join("kcap-flow-result.toml"),
    )
    .unwrap();
    dir
}

/// Writes `files` into a fresh registry directory (with a valid result channel unless a
/// file replaces it) and returns the diagnostics' (rule, line, column).
fn check_files(files: &[(&str, &[u8])]) -> Vec<Found> {
    let dir = registry_with_result_channel();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    match validate_dir(dir.path()) {
        Ok(_) => vec![],
        Err(CheckError::Invalid(d)) => d
            .iter()
            .map(|d| {
                let l = d.location();
                (
                    d.rule.name().to_string(),
                    l.map_or(0, |l| l.line),
                    l.map_or(0, |l| l.column),
                )
            })
            .collect(),
        Err(e) => panic!("{e}"),
    }
}

/// (rule name, line, column) of one diagnostic.
type Found = (String, usize, usize);

const BASE: &str =
    "id = \"kcap-x\"\ndescription = \"X.\"\nargs = [\"mcp\", \"x\"]\nstarts_flows = false\n";

#[test]
fn a_leading_bom_is_accepted_and_columns_ignore_it() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(BASE.as_bytes());
    assert_eq!(check_files(&[("kcap-x.toml", &bytes)]), vec![]);
    let mut bad = b"\xEF\xBB\xBF".to_vec();
    bad.extend_from_slice(BASE.replace("kcap-x\"", "Kcap-x\"").as_bytes());
    assert_eq!(
        check_files(&[("kcap-x.toml", &bad)]),
        vec![("id-canonical".into(), 1, 6)]
    );
}

#[test]
fn a_second_bom_is_a_syntax_error_at_its_position() {
    let mut bytes = b"\xEF\xBB\xBF\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(BASE.as_bytes());
    assert_eq!(
        check_files(&[("kcap-x.toml", &bytes)]),
        vec![("toml-syntax".into(), 1, 1)]
    );
}

#[test]
fn hostile_values_are_reported_not_panicked_on() {
    let cases: Vec<(String, Vec<Found>)> = vec![
        // Control character in a description (TOML escape), and a line separator.
        (
            BASE.replace("\"X.\"", "\"X\\u0007\""),
            vec![("description-format".into(), 2, 15)],
        ),
        (
            BASE.replace("\"X.\"", "\"X\u{2028}Y\""),
            vec![("description-format".into(), 2, 15)],
        ),
        // 301 characters, multi-byte.
        (
            BASE.replace("\"X.\"", &format!("\"{}\"", "é".repeat(301))),
            vec![("description-format".into(), 2, 15)],
        ),
        // Invisible characters: a right-to-left override, a zero-width space.
        (
            BASE.replace("\"X.\"", "\"X\u{202e}Y\""),
            vec![("description-format".into(), 2, 15)],
        ),
        (
            BASE.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"x\u{200b}\"]"),
            vec![("args-format".into(), 3, 16)],
        ),
        // More invisible characters: Arabic letter mark, soft hyphen, a tag character.
        (
            BASE.replace("\"X.\"", "\"\u{61c}X\""),
            vec![("description-format".into(), 2, 15)],
        ),
        (
            BASE.replace("\"X.\"", "\"X\u{ad}Y\""),
            vec![("description-format".into(), 2, 15)],
        ),
        (
            BASE.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"x\u{e0041}\"]"),
            vec![("args-format".into(), 3, 16)],
        ),
        // Empty args, an empty arg, a newline in an arg.
        (
            BASE.replace("[\"mcp\", \"x\"]", "[]"),
            vec![("args-format".into(), 3, 8)],
        ),
        (
            BASE.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"\"]"),
            vec![("args-format".into(), 3, 16)],
        ),
        (
            BASE.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"a\\nb\"]"),
            vec![("args-format".into(), 3, 16)],
        ),
        (
            BASE.replace("[\"mcp\", \"x\"]", "[\"mcp\", 7]"),
            vec![("wrong-type".into(), 3, 16)],
        ),
        (
            BASE.replace("[\"mcp\", \"x\"]", "\"mcp x\""),
            vec![("wrong-type".into(), 3, 8)],
        ),
        // Ids: too long, trailing hyphen, non-ASCII look-alike.
        (
            BASE.replace("\"kcap-x\"", &format!("\"k{}\"", "a".repeat(64))),
            vec![("id-canonical".into(), 1, 6)],
        ),
        (
            BASE.replace("\"kcap-x\"", "\"kcap-\""),
            vec![("id-canonical".into(), 1, 6)],
        ),
        (
            BASE.replace("\"kcap-x\"", "\"kcap-\u{445}\""),
            vec![("id-canonical".into(), 1, 6)],
        ),
        // A table where a boolean belongs, and an unknown section.
        (
            BASE.replace("starts_flows = false", "starts_flows = { a = 1 }"),
            vec![("wrong-type".into(), 4, 16)],
        ),
        (
            format!("{BASE}[extra]\nx = 1\n"),
            vec![("unknown-key".into(), 5, 2)],
        ),
        // An unknown key inside a tool, and a tool without a name.
        (
            format!("{BASE}[[tools]]\nname = \"a\"\nsafe = true\n"),
            vec![("unknown-key".into(), 7, 1)],
        ),
        (
            format!("{BASE}[[tools]]\nunattended_safe = false\n"),
            vec![("missing-key".into(), 5, 1)],
        ),
        // An env value that is not a string.
        (
            format!("{BASE}[env]\nKCAP_URL = 1\n"),
            vec![("wrong-type".into(), 6, 12)],
        ),
        // Empty file: every required key is missing.
        (
            String::new(),
            vec![
                ("missing-key".into(), 1, 1),
                ("missing-key".into(), 1, 1),
                ("missing-key".into(), 1, 1),
                ("missing-key".into(), 1, 1),
            ],
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(
            check_files(&[("kcap-x.toml", text.as_bytes())]),
            expected,
            "for {text:?}"
        );
    }
}

#[test]
fn readme_files_dotfiles_and_subdirectories_without_toml_files_are_not_strays() {
    let dir = registry_with_result_channel();
    std::fs::write(dir.path().join("README.md"), "not a registry entry").unwrap();
    std::fs::write(dir.path().join(".gitkeep"), "").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/notes.txt"), "").unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/x.toml"), "").unwrap();
    std::os::unix::fs::symlink("nowhere", dir.path().join(".notes")).unwrap();
    let entries = validate_dir(dir.path()).unwrap();
    assert_eq!(
        entries.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["kcap-flow-result"]
    );
    // An upper-case extension is a registry file too, and its stem is checked.
    std::fs::write(
        dir.path().join("KCAP-X.TOML"),
        BASE.replace("kcap-x", "KCAP-X"),
    )
    .unwrap();
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("KCAP-X.TOML should be checked");
    };
    assert_eq!(diags[0].rule.name(), "id-canonical");
}

/// The rendered report for a temp registry holding the result channel and `files`, with the
/// temp directory shown as `reg`.
fn report(files: &[(&str, &str)]) -> String {
    let dir = registry_with_result_channel();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("should be invalid");
    };
    diagnostic::render_all(&diags, false).replace(&dir.path().display().to_string(), "reg")
}

#[test]
fn a_misnamed_file_and_a_subdirectory_of_entries_are_stray_files() {
    let search = BASE.replace("kcap-x", "kcap-search");
    let expected = "error[stray-file]: `kcap-search.tml` is not a registry file: only `<id>.toml` files are read
--> reg/kcap-search.tml
 = help: rename it to `kcap-search.toml` if it describes an MCP server, or remove it (README files and dotfiles may stay)

error[stray-file]: `notes.txt` is not a registry file: only `<id>.toml` files are read
--> reg/notes.txt
 = help: rename it to `notes.toml` if it describes an MCP server, or remove it (README files and dotfiles may stay)

error[stray-file]: `sub/` is a subdirectory holding `.toml` files, which the registry does not read
--> reg/sub
 = help: move each MCP server's `<id>.toml` into the registry directory itself, or remove the subdirectory

error: 3 registry rule violations
";
    assert_eq!(
        report(&[
            ("kcap-search.tml", &search),
            ("notes.txt", "notes"),
            ("sub/deeper/kcap-x.toml", BASE),
        ]),
        expected
    );
}

#[test]
fn toml_entries_that_are_not_regular_files_are_load_errors() {
    // (file name, how to create it)
    type Make = (&'static str, fn(&Path));
    let make: [Make; 3] = [
        ("sub.toml", |p| std::fs::create_dir(p).unwrap()),
        ("dangling.toml", |p| {
            std::os::unix::fs::symlink("nowhere", p).unwrap()
        }),
        ("fifo.toml", |p| {
            assert!(
                std::process::Command::new("mkfifo")
                    .arg(p)
                    .status()
                    .unwrap()
                    .success()
            )
        }),
    ];
    for (name, create) in make {
        let dir = registry_with_result_channel();
        create(&dir.path().join(name));
        let err = validate_dir(dir.path()).unwrap_err();
        assert!(matches!(err, CheckError::Load(_)), "{name}: {err:?}");
        // The error says which path; its source says why (each layer displays itself).
        let source = std::error::Error::source(&err).expect("the I/O error");
        assert_eq!(
            format!("{err}: {source}"),
            format!(
                "cannot read {}: not a regular file (a directory, FIFO, socket, or a symlink that leads nowhere); registry entries must be regular `.toml` files",
                dir.path().join(name).display()
            )
        );
    }
}

#[test]
fn a_registry_file_over_the_size_bound_is_refused_without_reading_it_whole() {
    use kcap_mcp_registry::schema::MAX_FILE_BYTES;
    let bound = usize::try_from(MAX_FILE_BYTES).unwrap();
    // A valid entry padded with a comment to exactly the bound is read and checked.
    let dir = registry_with_result_channel();
    let entry = format!("{BASE}#");
    let at_bound = format!("{entry}{}\n", "x".repeat(bound - entry.len() - 1));
    assert_eq!(at_bound.len(), bound);
    std::fs::write(dir.path().join("kcap-x.toml"), &at_bound).unwrap();
    let entries = validate_dir(dir.path()).unwrap();
    assert_eq!(entries.len(), 2);
    // One byte more is a load error naming the file, the bound and what to do.
    let over = format!("{}x\n", &at_bound[..bound - 1]);
    std::fs::write(dir.path().join("kcap-x.toml"), over).unwrap();
    let err = validate_dir(dir.path()).unwrap_err();
    let CheckError::Load(load) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(load.path, dir.path().join("kcap-x.toml"));
    assert_eq!(load.source.kind(), std::io::ErrorKind::FileTooLarge);
    assert_eq!(
        kcap_mcp_registry::text::error_chain(&err),
        format!(
            "cannot read {}: larger than 1024 KiB, the most a registry file may hold (an entry \
             is a few hundred bytes): move what is not one MCP server's entry out of the \
             registry directory",
            dir.path().join("kcap-x.toml").display()
        )
    );
}

#[test]
fn a_missing_directory_is_a_load_error_not_a_violation() {
    let err = validate_dir(Path::new("tests/fixtures/no-such-dir")).unwrap_err();
    assert!(matches!(err, CheckError::Load(_)), "{err:?}");
    assert_eq!(err.to_string(), "cannot read tests/fixtures/no-such-dir");
    let source = std::error::Error::source(&err).expect("the I/O error");
    assert_eq!(source.to_string(), "No such file or directory (os error 2)");
}

#[test]
fn keys_and_file_names_from_the_input_cannot_forge_report_lines() {
    let dir = registry_with_result_channel();
    std::fs::write(
        dir.path().join("kcap-x.toml"),
        format!("{BASE}\"a\\nerror[id-unique]: forged\" = 1\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("kcap\ny.toml"),
        BASE.replace("kcap-x", "kcap-y"),
    )
    .unwrap();
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("should be invalid");
    };
    let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "id `kcap-y` does not match the file name `kcap\\ny.toml`",
            "unknown key `a\\nerror[id-unique]: forged`",
        ]
    );
    let report = diagnostic::render_all(&diags, false);
    let headers = report.lines().filter(|l| l.starts_with("error[")).count();
    assert_eq!(headers, 2, "{report}");
    assert!(report.contains("/kcap\\ny.toml:1:6"), "{report}");
}

#[test]
fn only_the_lines_of_the_span_are_quoted_and_huge_lines_not_at_all() {
    let dir = registry_with_result_channel();
    // A span over three lines is quoted whole; line numbers stay those of the file.
    let multi = BASE.replace("starts_flows = false", "starts_flows = [\n  1,\n]");
    std::fs::write(dir.path().join("kcap-x.toml"), format!("\n\n{multi}")).unwrap();
    // A 5,000-byte line is named by position only.
    let long = format!("{}\"{}\", \"\"]", "args = [", "a".repeat(5000));
    std::fs::write(
        dir.path().join("kcap-y.toml"),
        BASE.replace("kcap-x", "kcap-y")
            .replace("args = [\"mcp\", \"x\"]", &long),
    )
    .unwrap();
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("should be invalid");
    };
    let report = diagnostic::render_all(&diags, false);
    let x = dir.path().join("kcap-x.toml").display().to_string();
    let y = dir.path().join("kcap-y.toml").display().to_string();
    let expected = format!(
        "error[wrong-type]: `starts_flows` must be a boolean, found an array
 --> {x}:6:16
  |
6 |   starts_flows = [
  |  ________________^
7 | |   1,
8 | | ]
  | |_^
  |
  = help: write `starts_flows` as a boolean

error[args-format]: `args[1]` is empty
--> {y}:3:5013
 = help: write each argument as a non-empty, single-line string without `${{`

error: 2 registry rule violations
"
    );
    assert_eq!(report, expected);
}

#[test]
fn terminal_escapes_in_env_names_are_escaped_in_every_message() {
    let text = format!("{BASE}[env]\n\"X\\u001b]0;pwned\\u0007\\nerror[forged]\" = 5\n");
    let found = check_files(&[("kcap-x.toml", text.as_bytes())]);
    assert_eq!(
        found,
        vec![
            ("env-name".to_string(), 6, 1),
            ("wrong-type".to_string(), 6, 42)
        ]
    );
    let dir = registry_with_result_channel();
    std::fs::write(dir.path().join("kcap-x.toml"), &text).unwrap();
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("should be invalid");
    };
    for d in &diags {
        for text in [&d.message, &d.help] {
            assert!(!text.chars().any(char::is_control), "{text:?}");
        }
    }
    assert_eq!(
        diags[1].message,
        "`env.X\\u{1b}]0;pwned\\u{7}\\nerror[forged]` must be a source name (\"server_url\", …) or a constant { value = \"…\" }, found an integer"
    );
}

#[test]
fn a_tools_element_that_is_not_a_table_says_so() {
    let dir = registry_with_result_channel();
    std::fs::write(
        dir.path().join("kcap-x.toml"),
        format!("{BASE}tools = [1]\n"),
    )
    .unwrap();
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("should be invalid");
    };
    assert_eq!(
        (diags[0].message.as_str(), diags[0].help.as_str()),
        (
            "`tools[0]` must be a [[tools]] table, found an integer",
            "write `tools[0]` as a [[tools]] table"
        )
    );
}

#[test]
fn the_misnamed_file_is_blamed_and_never_told_to_take_a_non_canonical_id() {
    let dir = registry_with_result_channel();
    // Sorted first, but misnamed: it is the one blamed for the duplicate id.
    std::fs::write(
        dir.path().join("KCAP-A.toml"),
        BASE.replace("kcap-x", "kcap-a"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("kcap-a.toml"),
        BASE.replace("kcap-x", "kcap-a"),
    )
    .unwrap();
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("should be invalid");
    };
    let got: Vec<(&str, String, &str)> = diags
        .iter()
        .map(|d| {
            let file = Path::new(&d.path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (d.rule.name(), file, d.help.as_str())
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "id-file-stem",
                "KCAP-A.toml".to_string(),
                "rename the file to `kcap-a.toml`"
            ),
            (
                "id-unique",
                "KCAP-A.toml".to_string(),
                "give each MCP server its own id, or delete the duplicate file"
            ),
        ]
    );
}

#[test]
fn a_syntax_error_reports_that_one_error_and_nothing_that_follows_from_it() {
    // A missing `]`: the recovering parser reads every later line as array elements.
    let text = format!(
        "{}\n[env]\nKCAP_URL = \"server_url\"\n\n[[tools]]\nname = \"list_sessions\"\nunattended_safe = true\n",
        BASE.replace("[\"mcp\", \"x\"]", "[\"mcp\", \"sessions\"")
    );
    let expected =
        "error[toml-syntax]: invalid TOML: missing comma between array elements, expected `,`
 --> reg/kcap-x.toml:4:1
  |
4 | starts_flows = false
  | ^
  |
  = help: fix the TOML syntax (TOML 1.1, a superset of 1.0: https://toml.io/en/v1.1.0)

error: 1 registry rule violation
";
    assert_eq!(report(&[("kcap-x.toml", &text)]), expected);
}

#[test]
fn a_root_cause_is_reported_without_its_consequences() {
    // The bundled result channel made allowlistable: its agent id and its unattended-safe
    // tools would follow from that, and their advice would be wrong.
    let rc = std::fs::read_to_string("registry/kcap-flow-result.toml")
        .unwrap()
        .replace("allowlistable = false", "allowlistable = true");
    let expected = "error[result-channel-allowlistable]: `kcap-flow-result` is the reserved result channel and must not be allowlistable
 --> reg/kcap-flow-result.toml:7:17
  |
7 | allowlistable = true
  |                 ^^^^
  |
  = help: set `allowlistable = false`: the launcher injects the result channel itself

error: 1 registry rule violation
";
    assert_eq!(report(&[("kcap-flow-result.toml", &rc)]), expected);
    // Flow-starting: the unattended-safe tools follow from it.
    let rc = std::fs::read_to_string("registry/kcap-flow-result.toml")
        .unwrap()
        .replace("starts_flows = false", "starts_flows = true");
    assert_eq!(
        check_files(&[("kcap-flow-result.toml", rc.as_bytes())]),
        vec![("result-channel-starts-flows".into(), 6, 16)]
    );
    // A flag of the wrong type: no rule judges the entry by a default it does not hold.
    let text = format!(
        "{}allowlistable = \"false\"\n[env]\nKCAP_FLOW_AGENT_ID = \"agent_id\"\n",
        BASE
    );
    assert_eq!(
        check_files(&[("kcap-x.toml", text.as_bytes())]),
        vec![("wrong-type".into(), 5, 17)]
    );
}

#[test]
fn a_top_level_key_inside_a_table_is_told_to_move_above_it() {
    let text = format!("{BASE}\n[env]\nKCAP_URL = \"server_url\"\nread_only = false\n");
    let expected = "error[env-name]: `read_only` is a top-level key, but here it is inside the `[env]` table
 --> reg/kcap-x.toml:8:1
  |
8 | read_only = false
  | ^^^^^^^^^
  |
  = help: move `read_only` above the first table header: every key after `[env]` belongs to that table

error: 1 registry rule violation
";
    assert_eq!(report(&[("kcap-x.toml", &text)]), expected);
    // In a [[tools]] table too; a required key found there is not also reported missing.
    let text = format!(
        "{}\n[[tools]]\nname = \"a\"\nstarts_flows = false\n",
        BASE.replace("starts_flows = false\n", "")
    );
    let expected = "error[unknown-key]: `starts_flows` is a top-level key, but here it is inside the `[[tools]]` table
 --> reg/kcap-x.toml:7:1
  |
7 | starts_flows = false
  | ^^^^^^^^^^^^
  |
  = help: move `starts_flows` above the first table header: every key after `[[tools]]` belongs to that table

error: 1 registry rule violation
";
    assert_eq!(report(&[("kcap-x.toml", &text)]), expected);
}

#[test]
fn help_never_asks_for_what_is_already_true() {
    let text = BASE.replace("kcap-x", "Kcap-Review");
    let help = |file: &str| {
        let dir = registry_with_result_channel();
        std::fs::write(dir.path().join(file), &text).unwrap();
        let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
            panic!("should be invalid");
        };
        diags
            .iter()
            .map(|d| d.help.clone())
            .collect::<Vec<String>>()
    };
    // Already named `kcap-review.toml`: only the id needs changing.
    assert_eq!(help("kcap-review.toml"), ["write it as `kcap-review`"]);
    assert_eq!(
        help("Kcap-Review.toml"),
        ["write it as `kcap-review` (and name the file `kcap-review.toml`)"]
    );
}

#[test]
fn one_file_is_checked_with_its_directory_s_cross_file_rules() {
    let dir = registry_with_result_channel();
    let x = dir.path().join("kcap-x.toml");
    std::fs::write(&x, BASE).unwrap();
    // Another file is broken: checking kcap-x.toml alone does not report it.
    std::fs::write(dir.path().join("kcap-y.toml"), "id = 1\n").unwrap();
    let entries = validate_path(&x).unwrap();
    assert_eq!(
        entries.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["kcap-x"]
    );
    // A duplicate id in the directory, blamed on the file checked.
    let dup = dir.path().join("kcap-z.toml");
    std::fs::write(&dup, BASE).unwrap();
    let Err(CheckError::Invalid(diags)) = validate_path(&dup) else {
        panic!("should be invalid");
    };
    let found: Vec<(&str, &str)> = diags
        .iter()
        .map(|d| (d.rule.name(), d.message.as_str()))
        .collect();
    let first = x.display().to_string();
    assert_eq!(
        found,
        [
            (
                "id-file-stem",
                "id `kcap-x` does not match the file name `kcap-z.toml`"
            ),
            (
                "id-unique",
                format!("id `kcap-x` is already used in {first}").as_str()
            ),
        ]
    );
    // The result channel is looked for in the file's directory.
    std::fs::remove_file(dir.path().join("kcap-flow-result.toml")).unwrap();
    let Err(CheckError::Invalid(diags)) = validate_path(&x) else {
        panic!("should be invalid");
    };
    assert_eq!(diags[0].rule.name(), "result-channel-missing");
    assert_eq!(diags.len(), 1);
}

/// A misspelled key is the one cause: the rules that read the key it stands for do not
/// report the consequences of a default the author did not mean (issue 25: `read_onyl =
/// true` used to add an `unattended-safe-scope` error per tool, advising the opposite fix).
#[test]
fn a_misspelled_key_is_one_finding_not_a_cascade() {
    let tools = "\n[[tools]]\nname = \"a\"\nunattended_safe = true\n\n[[tools]]\nname = \"b\"\nunattended_safe = true\n";
    let file = format!("{BASE}read_onyl = true\n{tools}");
    assert_eq!(
        check_files(&[("kcap-x.toml", file.as_bytes())]),
        vec![("unknown-key".into(), 5, 1)]
    );
    // With the key written right and set to false, the rule still fires, once per tool.
    let file = format!("{BASE}read_only = false\n{tools}");
    assert_eq!(
        check_files(&[("kcap-x.toml", file.as_bytes())]),
        vec![
            ("unattended-safe-scope".into(), 9, 19),
            ("unattended-safe-scope".into(), 13, 19)
        ]
    );
    // A misspelling beside the real key judges the real key's value.
    let file = format!("{BASE}read_only = false\nread_onyl = true\n{tools}");
    let found = check_files(&[("kcap-x.toml", file.as_bytes())]);
    assert_eq!(found[0], ("unknown-key".into(), 6, 1));
    assert_eq!(found.len(), 3, "{found:?}");
}

/// The tool-name help leads with the simplest fix: a 41-byte tool name of `kcap-search` fits
/// Gemini's 63 bytes at 30 bytes and Qwen Code's at 28, and no alias can make 41 fit
/// (issue 25).
#[test]
fn the_tool_name_help_leads_with_the_simplest_fix() {
    let dir = registry_with_result_channel();
    let tool = "t".repeat(41);
    let file = format!(
        "id = \"kcap-search\"\ndescription = \"S.\"\nargs = [\"mcp\", \"search\"]\nstarts_flows = false\nread_only = true\n\n[[tools]]\nname = \"{tool}\"\nunattended_safe = true\n"
    );
    std::fs::write(dir.path().join("kcap-search.toml"), file).unwrap();
    let Err(CheckError::Invalid(diags)) = validate_dir(dir.path()) else {
        panic!("a 41-byte tool name should not fit Gemini");
    };
    let helps: Vec<&str> = diags.iter().map(|d| d.help.as_str()).collect();
    assert_eq!(
        helps,
        [
            "shorten the tool name to at most 30 bytes",
            "shorten the tool name to at most 28 bytes"
        ]
    );
}

/// One broken item of `[env]` or `[[tools]]` no longer hides the security rules on the
/// others (a fresh user of stop 53: only the broken variable was reported, and
/// `agent-id-injection-only` once it was fixed). A rule that reasons about a variable's
/// absence (`capability-url-server-url`) does not run when part of `[env]` broke: the
/// variable it would ask for may be the broken one. Bite: `[env]` and `[[tools]]` dropped
/// whole when one item broke (the checker of b72d459) reports the first diagnostic of each
/// file only.
#[test]
fn one_broken_item_of_env_or_tools_hides_no_rule_on_the_others() {
    let env =
        format!("{BASE}[env]\nKCAP_URL = \"server-url\"\nKCAP_FLOW_AGENT_ID = \"agent_id\"\n");
    let tools = BASE.replace("starts_flows = false", "starts_flows = true")
        + "\n[[tools]]\nname = \"do.thing\"\n\n[[tools]]\nname = \"run\"\nunattended_safe = true\n";
    // The result channel with its server URL's source misspelled.
    let capability = std::fs::read_to_string("registry/kcap-flow-result.toml")
        .unwrap()
        .replace("KCAP_URL = \"server_url\"", "KCAP_URL = \"server-url\"");
    for (name, file, expected) in [
        (
            "kcap-x.toml",
            env.as_str(),
            &[("env-source", 6, 12), ("agent-id-injection-only", 7, 22)][..],
        ),
        (
            "kcap-x.toml",
            tools.as_str(),
            &[
                ("tool-name", 7, 8),
                ("starts-flows-unattended-safe", 11, 19),
            ][..],
        ),
        (
            "kcap-flow-result.toml",
            capability.as_str(),
            &[("env-source", 13, 12)][..],
        ),
    ] {
        let found = check_files(&[(name, file.as_bytes())]);
        let expected: Vec<Found> = expected
            .iter()
            .map(|(rule, line, column)| ((*rule).to_owned(), *line, *column))
            .collect();
        assert_eq!(found, expected, "{file}");
    }
}

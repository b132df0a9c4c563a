//! The Claude Code preflight (`clients::claude::preflight`) on hand-made configurations: which
//! injected servers a setting vetoes, where the reader looks, and how it fails closed. Every
//! rule asserted here was measured on the real client (2.1.197 and 2.1.328; the module docs
//! hold the table, `tests/clients/conformance_claude.rs` replays the settings on both).

use std::path::{Path, PathBuf};

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::claude::preflight::{
    ClaudeConfigSources, claude_preflight, expand_vars, project_key,
};
use kcap_mcp_registry::clients::veto::{Veto, VetoKind};
use kcap_mcp_registry::{LaunchContext, Policy, RenderError};
use tempfile::TempDir;

/// The error that refuses a launch over what the preflight found for `ctx` (its allowlist
/// resolved under the lenient policy): [`RenderError::Vetoed`] with its vetoes, or the
/// preflight's own error. Panics when nothing is vetoed.
fn refusal(ctx: &LaunchContext, sources: &ClaudeConfigSources) -> RenderError {
    match claude_preflight(ctx, &ctx.resolve(Policy::Lenient).unwrap(), sources) {
        Ok(vetoes) if !vetoes.is_empty() => RenderError::Vetoed(vetoes),
        Ok(_) => panic!("nothing vetoed"),
        Err(e) => e,
    }
}

const KCAP: &str = "/opt/kcap/bin/kcap";

/// A throwaway HOME, worktree and managed dir.
struct Setup {
    root: TempDir,
}

impl Setup {
    fn new() -> Setup {
        let s = Setup {
            root: tempfile::tempdir().unwrap(),
        };
        for d in ["home", "wt", "managed"] {
            std::fs::create_dir(s.path(d)).unwrap();
        }
        s
    }

    /// `<root>/<rel>`, with the root resolved (the temp dir may sit behind a symlink).
    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().canonicalize().unwrap().join(rel)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn sources(&self) -> ClaudeConfigSources {
        self.sources_in(&self.path("wt"))
    }

    fn sources_in(&self, worktree: &Path) -> ClaudeConfigSources {
        ClaudeConfigSources {
            home: Some(self.path("home")),
            managed_dir: self.path("managed"),
            worktree: worktree.to_path_buf(),
            ..ClaudeConfigSources::default()
        }
    }

    /// `~/.claude.json` whose project entry for `key` holds `entry`.
    fn project_entry(&self, key: &Path, entry: &str) -> PathBuf {
        let key = serde_json::to_string(key.to_str().unwrap()).unwrap();
        self.write(
            "home/.claude.json",
            &format!(r#"{{"hasCompletedOnboarding":true,"projects":{{{key}:{entry}}}}}"#),
        )
    }
}

fn ctx(allowlist: &[&str]) -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some(KCAP.into()),
        agent_id: "a1".into(),
        mcp_allowlist: Some(allowlist.iter().map(|a| Some(a.to_string())).collect()),
        ..LaunchContext::default()
    }
}

/// The vetoes for `kcap-review` allowlisted, as (server, file, JSON path, kind).
fn vetoes(sources: &ClaudeConfigSources) -> Vec<(&'static str, PathBuf, String, VetoKind)> {
    vetoes_for(&ctx(&["kcap-review"]), sources)
}

fn vetoes_for(
    c: &LaunchContext,
    sources: &ClaudeConfigSources,
) -> Vec<(&'static str, PathBuf, String, VetoKind)> {
    let resolution = c.resolve(Policy::Lenient).unwrap();
    claude_preflight(c, &resolution, sources)
        .unwrap_or_else(|e| panic!("preflight: {e}"))
        .into_iter()
        .map(|v| (v.server, v.file, v.json_path, v.kind))
        .collect()
}

fn preflight_error(sources: &ClaudeConfigSources) -> RenderError {
    let c = ctx(&["kcap-review"]);
    let resolution = c.resolve(Policy::Lenient).unwrap();
    claude_preflight(&c, &resolution, sources).expect_err("the preflight must fail closed")
}

fn disabled(key: &Path, i: usize) -> String {
    format!(
        "projects[{:?}].disabledMcpServers[{i}]",
        key.to_str().unwrap()
    )
}

// ------------------------------------------------------------------------------------------
// The reader: missing and malformed files, entries without MCP keys
// ------------------------------------------------------------------------------------------

#[test]
fn missing_files_veto_nothing() {
    let s = Setup::new();
    assert_eq!(vetoes(&s.sources()), []);
    // No HOME and no CLAUDE_CONFIG_DIR at all: only the worktree and managed files count.
    let mut sources = s.sources();
    sources.home = None;
    assert_eq!(vetoes(&sources), []);
}

#[test]
fn malformed_json_fails_closed_naming_the_file() {
    let s = Setup::new();
    let file = s.write("home/.claude.json", r#"{"projects":{"#);
    let e = preflight_error(&s.sources());
    let RenderError::UnreadableConfig {
        file: got, problem, ..
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(got, &file);
    assert!(
        problem.starts_with("is not JSON (EOF while parsing"),
        "{problem}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "cannot tell which MCP servers Claude Code would start: {} {problem}; fix or remove it",
            file.display()
        )
    );

    // The same for a settings file (Claude Code ignores one that is not JSON; we cannot
    // know what was meant, so the launch does not happen).
    let s = Setup::new();
    let file = s.write("wt/.claude/settings.json", "{,}");
    assert!(
        matches!(preflight_error(&s.sources()), RenderError::UnreadableConfig { file: f, .. } if f == file)
    );
}

#[test]
fn a_project_entry_with_no_mcp_keys_vetoes_nothing() {
    let s = Setup::new();
    s.project_entry(
        &s.path("wt"),
        r#"{"hasTrustDialogAccepted":true,"allowedTools":[],"mcpServers":{}}"#,
    );
    assert_eq!(vetoes(&s.sources()), []);
    // Nor do the `.mcp.json` switches (measured: they gate project `.mcp.json` servers only),
    // nor a top-level `disabledMcpServers` (measured: only the project entry's counts).
    let s = Setup::new();
    let key = serde_json::to_string(s.path("wt").to_str().unwrap()).unwrap();
    s.write(
        "home/.claude.json",
        &format!(
            r#"{{"disabledMcpServers":["kcap-flow-result"],"projects":{{{key}:{{
                "disabledMcpjsonServers":["kcap-flow-result"],"enabledMcpjsonServers":[]}}}}}}"#
        ),
    );
    assert_eq!(vetoes(&s.sources()), []);
}

#[test]
fn a_veto_setting_of_an_unexpected_shape_fails_closed() {
    // 2.1.197 reads a string as a substring list and 2.1.328 ignores it (measured): refused.
    let s = Setup::new();
    let file = s.project_entry(
        &s.path("wt"),
        r#"{"disabledMcpServers":"kcap-flow-result"}"#,
    );
    let e = preflight_error(&s.sources());
    assert_eq!(
        e,
        RenderError::UnreadableConfig {
            client: Client::Claude,
            file,
            problem: format!(
                "has `projects[{:?}].disabledMcpServers` that is not an array of server names",
                s.path("wt").to_str().unwrap()
            ),
        }
    );
    // A denied entry Claude Code's schema drops (measured: the others still apply).
    let s = Setup::new();
    let file = s.write(
        "home/.claude/settings.json",
        r#"{"deniedMcpServers":[{"serverName":"x"},{"bogus":1}]}"#,
    );
    assert_eq!(
        preflight_error(&s.sources()),
        RenderError::UnreadableConfig {
            client: Client::Claude,
            file,
            problem: "has `deniedMcpServers[1]` that is not an object with `serverName`, \
                      `serverCommand` or `serverUrl`"
                .into(),
        }
    );
}

// ------------------------------------------------------------------------------------------
// disabledMcpServers: names and the project key
// ------------------------------------------------------------------------------------------

#[test]
fn disabled_mcp_servers_vetoes_exactly_the_listed_names() {
    let s = Setup::new();
    let wt = s.path("wt");
    let file = s.project_entry(
        &wt,
        r#"{"disabledMcpServers":["other","kcap-review","kcap-flow-result"]}"#,
    );
    assert_eq!(
        vetoes(&s.sources()),
        [
            (
                "kcap-flow-result",
                file.clone(),
                disabled(&wt, 2),
                VetoKind::Disabled
            ),
            ("kcap-review", file, disabled(&wt, 1), VetoKind::Disabled),
        ]
    );
}

#[test]
fn names_that_differ_only_in_case_do_not_veto() {
    // Measured on both versions: `KCAP-FLOW-RESULT` leaves `kcap-flow-result` running.
    let s = Setup::new();
    s.project_entry(
        &s.path("wt"),
        r#"{"disabledMcpServers":["KCAP-FLOW-RESULT","Kcap-Review"]}"#,
    );
    assert_eq!(vetoes(&s.sources()), []);
    let s = Setup::new();
    s.write(
        "home/.claude/settings.json",
        r#"{"deniedMcpServers":[{"serverName":"KCAP-FLOW-RESULT"}]}"#,
    );
    assert_eq!(vetoes(&s.sources()), []);
}

#[test]
fn a_worktree_given_with_a_trailing_slash_finds_its_entry() {
    let s = Setup::new();
    let wt = s.path("wt");
    let file = s.project_entry(&wt, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    let slashed = PathBuf::from(format!("{}/", wt.display()));
    assert_eq!(
        vetoes(&s.sources_in(&slashed)),
        [(
            "kcap-flow-result",
            file,
            disabled(&wt, 0),
            VetoKind::Disabled
        )]
    );
    // An entry whose key has a trailing slash does not apply (measured).
    let s = Setup::new();
    let wt = s.path("wt");
    s.project_entry(
        &PathBuf::from(format!("{}/", wt.display())),
        r#"{"disabledMcpServers":["kcap-flow-result"]}"#,
    );
    assert_eq!(vetoes(&s.sources()), []);
    assert_eq!(vetoes(&s.sources_in(&slashed)), []);
}

#[test]
fn a_symlinked_worktree_is_keyed_by_its_physical_path() {
    let s = Setup::new();
    let wt = s.path("wt");
    let link = s.path("link");
    std::os::unix::fs::symlink(&wt, &link).unwrap();
    assert_eq!(project_key(&link).unwrap(), wt.to_str().unwrap());
    let file = s.project_entry(&wt, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    assert_eq!(
        vetoes(&s.sources_in(&link)),
        [(
            "kcap-flow-result",
            file,
            disabled(&wt, 0),
            VetoKind::Disabled
        )]
    );
    // An entry under the symlink's own path does not apply (measured).
    s.project_entry(&link, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    assert_eq!(vetoes(&s.sources_in(&link)), []);
}

#[test]
fn inside_a_git_checkout_the_key_is_its_root_and_a_linked_worktree_keys_the_main_checkout() {
    let s = Setup::new();
    let main = s.path("repo");
    std::fs::create_dir_all(main.join(".git/worktrees/feature")).unwrap();
    std::fs::create_dir_all(main.join("sub/dir")).unwrap();
    assert_eq!(
        project_key(&main.join("sub/dir")).unwrap(),
        main.to_str().unwrap()
    );

    // A linked worktree as `git worktree add` lays it out.
    let linked = s.path("feature");
    std::fs::create_dir(&linked).unwrap();
    let admin = main.join(".git/worktrees/feature");
    std::fs::write(
        linked.join(".git"),
        format!("gitdir: {}\n", admin.display()),
    )
    .unwrap();
    std::fs::write(admin.join("commondir"), "../..\n").unwrap();
    std::fs::write(admin.join("gitdir"), format!("{}/.git\n", linked.display())).unwrap();
    assert_eq!(project_key(&linked).unwrap(), main.to_str().unwrap());
    let file = s.project_entry(&main, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    assert_eq!(
        vetoes(&s.sources_in(&linked)),
        [(
            "kcap-flow-result",
            file,
            disabled(&main, 0),
            VetoKind::Disabled
        )]
    );
    // The linked worktree's own path is not its key (measured).
    s.project_entry(&linked, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    assert_eq!(vetoes(&s.sources_in(&linked)), []);

    // A `.git` file whose admin dir does not point back is a checkout of its own.
    std::fs::write(admin.join("gitdir"), "/elsewhere/.git\n").unwrap();
    assert_eq!(project_key(&linked).unwrap(), linked.to_str().unwrap());
}

#[test]
fn a_missing_worktree_fails_closed() {
    let s = Setup::new();
    s.write("home/.claude.json", "{}");
    let missing = s.path("no-such-worktree");
    assert!(matches!(
        preflight_error(&s.sources_in(&missing)),
        RenderError::UnreadableConfig { file, problem, .. } if file == missing && problem.starts_with("cannot be read")
    ));
}

// ------------------------------------------------------------------------------------------
// Where the global config is read
// ------------------------------------------------------------------------------------------

#[test]
fn claude_config_dir_replaces_home_and_a_legacy_config_json_wins() {
    let s = Setup::new();
    let wt = s.path("wt");
    s.project_entry(&wt, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    let mut sources = s.sources();
    sources.config_dir = Some(s.path("cfg"));
    // `$HOME/.claude.json` is not read under CLAUDE_CONFIG_DIR (measured).
    assert_eq!(vetoes(&sources), []);
    let key = serde_json::to_string(wt.to_str().unwrap()).unwrap();
    let entry = format!(r#"{{"projects":{{{key}:{{"disabledMcpServers":["kcap-review"]}}}}}}"#);
    let file = s.write("cfg/.claude.json", &entry);
    assert_eq!(
        vetoes(&sources),
        [("kcap-review", file, disabled(&wt, 0), VetoKind::Disabled)]
    );
    // `<config dir>/.config.json`, when it exists, is read instead (measured without
    // CLAUDE_CONFIG_DIR: `~/.claude/.config.json`).
    let legacy = s.write("home/.claude/.config.json", &entry);
    assert_eq!(
        vetoes(&s.sources()),
        [("kcap-review", legacy, disabled(&wt, 0), VetoKind::Disabled)]
    );
}

// ------------------------------------------------------------------------------------------
// deniedMcpServers, allowedMcpServers, managed settings
// ------------------------------------------------------------------------------------------

#[test]
fn denied_mcp_servers_from_every_settings_source() {
    for rel in [
        "home/.claude/settings.json",
        "wt/.claude/settings.json",
        "wt/.claude/settings.local.json",
        "managed/managed-settings.json",
        "managed/managed-settings.d/50-kcap.json",
    ] {
        let s = Setup::new();
        let file = s.write(
            rel,
            r#"{"deniedMcpServers":[{"serverUrl":"https://x"},{"serverName":"kcap-review"}]}"#,
        );
        assert_eq!(
            vetoes(&s.sources()),
            [(
                "kcap-review",
                file,
                "deniedMcpServers[1].serverName".into(),
                VetoKind::DeniedByName
            )],
            "{rel}"
        );
    }
    // Dot files and other extensions in managed-settings.d are not read.
    let s = Setup::new();
    let deny = r#"{"deniedMcpServers":[{"serverName":"kcap-review"}]}"#;
    s.write("managed/managed-settings.d/.hidden.json", deny);
    s.write("managed/managed-settings.d/x.json.bak", deny);
    assert_eq!(vetoes(&s.sources()), []);
}

#[test]
fn denied_by_command_line_with_variables_expanded() {
    let s = Setup::new();
    let file = s.write(
        "home/.claude/settings.json",
        r#"{"deniedMcpServers":[{"serverCommand":["${KCAP_DIR:-/nowhere}/kcap","mcp","flow-result"]}]}"#,
    );
    let mut sources = s.sources();
    assert_eq!(vetoes(&sources), []);
    sources
        .vars
        .insert("KCAP_DIR".into(), "/opt/kcap/bin".into());
    assert_eq!(
        vetoes(&sources),
        [(
            "kcap-flow-result",
            file,
            "deniedMcpServers[0].serverCommand".into(),
            VetoKind::DeniedByCommand
        )]
    );
}

#[test]
fn allowed_mcp_servers_admits_only_what_it_lists_merged_over_sources() {
    let s = Setup::new();
    let user = s.write(
        "home/.claude/settings.json",
        r#"{"allowedMcpServers":[{"serverName":"kcap-review"}]}"#,
    );
    assert_eq!(
        vetoes(&s.sources()),
        [(
            "kcap-flow-result",
            user.clone(),
            "allowedMcpServers".into(),
            VetoKind::NotAllowed
        )]
    );
    // Lists from several sources are merged (measured: the union admits both).
    s.write(
        "wt/.claude/settings.json",
        r#"{"allowedMcpServers":[{"serverName":"kcap-flow-result"}],"deniedMcpServers":[]}"#,
    );
    assert_eq!(vetoes(&s.sources()), []);

    // An empty list admits nothing, and names the file that sets it.
    let s = Setup::new();
    let file = s.write("home/.claude/settings.json", r#"{"allowedMcpServers":[]}"#);
    let got = vetoes(&s.sources());
    assert_eq!(got.len(), 2);
    assert!(
        got.iter()
            .all(|v| v.1 == file && v.3 == VetoKind::NotAllowed)
    );

    // With a serverCommand entry, a stdio server must match a serverCommand entry: its
    // name alone no longer admits it (measured).
    let s = Setup::new();
    let file = s.write(
        "home/.claude/settings.json",
        &format!(
            r#"{{"allowedMcpServers":[{{"serverName":"kcap-flow-result"}},
                {{"serverCommand":["{KCAP}","mcp","review"]}}]}}"#
        ),
    );
    assert_eq!(
        vetoes(&s.sources()),
        [(
            "kcap-flow-result",
            file,
            "allowedMcpServers".into(),
            VetoKind::NotAllowed
        )]
    );
}

#[test]
fn allow_managed_mcp_servers_only_ignores_the_other_allowlists() {
    let s = Setup::new();
    s.write(
        "home/.claude/settings.json",
        r#"{"allowedMcpServers":[{"serverName":"kcap-review"},{"serverName":"kcap-flow-result"}]}"#,
    );
    let managed = s.write(
        "managed/managed-settings.json",
        r#"{"allowManagedMcpServersOnly":true,"allowedMcpServers":[{"serverName":"kcap-review"}]}"#,
    );
    assert_eq!(
        vetoes(&s.sources()),
        [(
            "kcap-flow-result",
            managed,
            "allowedMcpServers".into(),
            VetoKind::NotAllowed
        )]
    );
    // Set outside managed settings it means nothing.
    let s = Setup::new();
    s.write(
        "home/.claude/settings.json",
        r#"{"allowManagedMcpServersOnly":true,"allowedMcpServers":[{"serverName":"kcap-review"},{"serverName":"kcap-flow-result"}]}"#,
    );
    assert_eq!(vetoes(&s.sources()), []);
}

#[test]
fn managed_mcp_json_vetoes_every_inline_server() {
    let s = Setup::new();
    let file = s.write(
        "managed/managed-mcp.json",
        r#"{"mcpServers":{"corp":{"command":"/bin/true","args":[]}}}"#,
    );
    let got = vetoes(&s.sources());
    assert_eq!(
        got,
        [
            (
                "kcap-flow-result",
                file.clone(),
                String::new(),
                VetoKind::ManagedMcp
            ),
            ("kcap-review", file, String::new(), VetoKind::ManagedMcp),
        ]
    );
}

#[test]
fn a_gated_launch_has_nothing_to_veto() {
    let s = Setup::new();
    s.write("managed/managed-mcp.json", "{}");
    let mut c = ctx(&["kcap-review"]);
    c.kcap_bin = None;
    assert_eq!(vetoes_for(&c, &s.sources()), []);
}

// ------------------------------------------------------------------------------------------
// The refusal's message: a vetoed result channel, or vetoed allowlisted servers
// ------------------------------------------------------------------------------------------

#[test]
fn a_vetoed_result_channel_is_refused_saying_the_reviewer_could_never_report() {
    let s = Setup::new();
    let wt = s.path("wt");
    let file = s.project_entry(&wt, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    let e = refusal(&ctx(&["kcap-review"]), &s.sources());
    let RenderError::Vetoed(v) = &e else {
        panic!("{e:?}");
    };
    assert_eq!(
        v,
        &[Veto {
            client: Client::Claude,
            server: "kcap-flow-result",
            file: file.clone(),
            json_path: disabled(&wt, 0),
            kind: VetoKind::Disabled,
        }]
    );
    assert_eq!(
        e.to_string(),
        format!(
            "Claude Code would not start MCP server `kcap-flow-result`: `{}` in {} disables \
             it; without its result channel the reviewer could never report, so it is not \
             launched; remove those entries (or the file), or launch the reviewer with a \
             HOME, CLAUDE_CONFIG_DIR and worktree that do not carry them",
            disabled(&wt, 0),
            file.display()
        )
    );
}

#[test]
fn a_vetoed_allowlisted_server_is_one_veto_and_its_refusal_names_the_strict_policy() {
    let s = Setup::new();
    let file = s.write(
        "wt/.claude/settings.json",
        r#"{"deniedMcpServers":[{"serverName":"kcap-review"}]}"#,
    );
    let c = ctx(&["kcap-review"]);
    let warnings = vetoes_for(&c, &s.sources());
    let veto = Veto {
        client: Client::Claude,
        server: "kcap-review",
        file: file.clone(),
        json_path: "deniedMcpServers[0].serverName".into(),
        kind: VetoKind::DeniedByName,
    };
    assert_eq!(
        warnings,
        [(
            veto.server,
            veto.file.clone(),
            veto.json_path.clone(),
            veto.kind
        )]
    );
    assert_eq!(
        veto.to_string(),
        format!(
            "Claude Code would not start MCP server `kcap-review`: \
             `deniedMcpServers[0].serverName` in {} denies it by name",
            file.display()
        )
    );
    let e = refusal(&c, &s.sources());
    assert_eq!(e, RenderError::Vetoed(vec![veto]));
    assert!(
        e.to_string()
            .contains("; the strict policy launches no reviewer without them;"),
        "{e}"
    );
    // Nothing vetoed: no warnings.
    let s = Setup::new();
    assert_eq!(vetoes_for(&c, &s.sources()), []);
}

/// Every character `kcap_mcp_registry::text::printable` escapes that a hostile directory
/// name below can hold, and how each must show.
const HOSTILE: [(char, &str); 4] = [
    ('\n', r"\n"),
    ('\u{1b}', r"\u{1b}"),
    ('\u{202e}', r"\u{202e}"),
    ('\u{200b}', r"\u{200b}"),
];

/// `text` holds none of the [`HOSTILE`] characters raw, and each of them escaped.
fn assert_escaped(text: &str) {
    for (raw, shown) in HOSTILE {
        assert!(!text.contains(raw), "raw {raw:?} in {text:?}");
        assert!(text.contains(shown), "no {shown} in {text:?}");
    }
}

#[test]
fn a_hostile_worktree_name_shows_escaped_in_vetoes_and_errors() {
    // The worktree's name reaches the messages twice: in the project key (a JSON path) and in
    // the paths of its settings files. A newline could forge a line, ESC send a terminal
    // sequence, U+202E reorder the line and U+200B hide a difference.
    let s = Setup::new();
    let name: String = [
        "wt",
        "\n",
        "error: forged",
        "\u{1b}[31m",
        "\u{202e}",
        "x\u{200b}y",
    ]
    .concat();
    let wt = s.path(&name);
    std::fs::create_dir(&wt).unwrap();
    let file = s.project_entry(&wt, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    let sources = s.sources_in(&wt);
    let e = refusal(&ctx(&["kcap-review"]), &sources);
    let RenderError::Vetoed(v) = &e else {
        panic!("{e:?}");
    };
    // The veto keeps the path as it is; only its display escapes.
    assert_eq!(v[0].file, file);
    let shown = e.to_string();
    assert_escaped(&shown);
    assert_eq!(shown.lines().count(), 1, "{shown}");

    // A settings file inside that worktree, of a shape that fails closed: its path escaped.
    let settings = format!("{name}/.claude/settings.json");
    s.write(
        &settings,
        r#"{"allowedMcpServers":{"serverName":"kcap-review"}}"#,
    );
    std::fs::remove_file(&file).unwrap();
    let e = refusal(&ctx(&["kcap-review"]), &sources);
    let RenderError::UnreadableConfig { file: got, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!(got, &s.path(&settings));
    let shown = e.to_string();
    assert_escaped(&shown);
    assert!(
        shown.contains("has `allowedMcpServers` that is not an array"),
        "{shown}"
    );
}

#[test]
fn variable_expansion_follows_claude_code() {
    let vars = [
        ("A".to_string(), "x".to_string()),
        ("E".into(), String::new()),
    ]
    .into_iter()
    .collect();
    for (input, want) in [
        ("${A}", "x"),
        ("${A:-d}", "x"),
        ("${E:-d}", ""),
        ("${U:-d}", "d"),
        ("${U}", "${U}"),
        ("${1A}${A}", "${1A}x"),
        ("$A ${A", "$A ${A"),
        ("a${A}b${U}c", "axb${U}c"),
    ] {
        assert_eq!(expand_vars(input, &vars), want, "{input}");
    }
}

// ------------------------------------------------------------------------------------------
// The CLI: `render claude` is the one launch call, whose plan reads no settings file, so the
// invoking environment's settings neither veto nor refuse it; `--no-preflight` is deprecated
// ------------------------------------------------------------------------------------------

#[cfg(feature = "cli")]
#[test]
fn render_claude_is_not_refused_by_the_invoking_users_settings_and_no_preflight_is_deprecated() {
    let s = Setup::new();
    let wt = s.path("wt");
    let file = s.project_entry(&wt, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
    let render = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
            .env("HOME", s.path("home"))
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CLAUDE_CODE_CUSTOM_OAUTH_URL")
            .args([
                "render",
                "claude",
                "--launch-dir",
                "/run/kcap/l1",
                "--server-url",
                "http://127.0.0.1:5100",
                "--kcap-bin",
                KCAP,
                "--agent-id",
                "a1",
                "--allowlist",
                "kcap-review",
                "--format",
                "json",
            ])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let wt_arg = wt.to_str().unwrap();
    // The argv of the plan: its `--mcp-config` names the plan's file (no secret in an argv).
    let planned = LaunchContext {
        launch_dir: Some("/run/kcap/l1".into()),
        ..ctx(&["kcap-review"])
    };
    let expected = crate::common::plan::lenient(Client::Claude, &planned).argv;
    assert_eq!(expected[4], "/run/kcap/l1/mcp-config.json");
    let expected = format!("{}\n", serde_json::to_string(&expected).unwrap());
    // The user's ~/.claude.json disables the result channel for this worktree: the plan's
    // per-launch CLAUDE_CONFIG_DIR and `--setting-sources=` never read it, so the launch is
    // rendered as without it (the library preflight still reports it: tests above).
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("kcap-flow-result")
    );
    assert_eq!(
        render(&["--worktree", wt_arg]),
        (Some(0), expected.clone(), String::new())
    );
    assert_eq!(render(&[]), (Some(0), expected.clone(), String::new()));
    assert_eq!(
        render(&["--worktree", wt_arg, "--no-preflight"]),
        (
            Some(0),
            expected.clone(),
            "warning: --no-preflight ignored (deprecated, to be removed): the plan roots Claude \
             Code in a per-launch CLAUDE_CONFIG_DIR and reads no settings file \
             (--setting-sources=), so no user, project or local setting is left for a preflight \
             to read\n"
                .to_string()
        )
    );
    // Nor does a disabled allowlisted server refuse the strict policy (whose argv also hides
    // the built-in tools with effects: `clients::tools`).
    s.project_entry(&wt, r#"{"disabledMcpServers":["kcap-review"]}"#);
    let strict = expected.replacen(
        "\"Agent\"",
        "\"Agent,Bash,CronCreate,Edit,EnterWorktree,ExitWorktree,Monitor,NotebookEdit,SendMessage,\
         TaskOutput,TaskStop,WebFetch,WebSearch,Workflow,Write\"",
        1,
    );
    assert_ne!(strict, expected);
    assert_eq!(
        render(&["--worktree", wt_arg, "--strict"]),
        (Some(0), strict, String::new())
    );
}

/// Issue 34: Claude Code reads its credential from `/home/claude/.claude/remote` whatever the
/// plan hands it; while that directory exists the launch is refused, naming it.
#[test]
fn a_credential_at_claude_codes_fixed_remote_path_refuses_the_launch() {
    use kcap_mcp_registry::clients::root::managed_preflight;
    let root = tempfile::tempdir().unwrap();
    let files = Client::Claude.managed_files();
    assert_eq!(
        managed_preflight(Client::Claude, files, root.path()),
        Ok(())
    );
    let remote = root.path().join("home/claude/.claude/remote");
    std::fs::create_dir_all(&remote).unwrap();
    std::fs::write(remote.join(".api_key"), "planted").unwrap();
    let refused = managed_preflight(Client::Claude, files, root.path()).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "cannot isolate the claude reviewer: /home/claude/.claude/remote exists, an \
         administrator's file that claude reads whatever the launch's environment says, and \
         that holds credentials Claude Code uses instead of the plan's (.api_key, \
         .oauth_token); remove it, or run reviewers on a machine without it"
    );
}

//! `render`: the deprecated Codex inventory flags, bad inputs (exit 2) and every refusal
//! (exit 1), each with its message.

use super::*;

/// A stand-in for the Codex binary that leaves `<itself>.ran` when it is run.
fn marking_codex(dir: &std::path::Path) -> std::path::PathBuf {
    common::stand_in::sh_script(dir, "codex", "touch \"$0.ran\"; echo '[]'")
}

/// `render codex --inventory`, `--codex-bin` and `--no-inherited-servers` (deprecated: the
/// plan takes no inventory) are accepted, hidden from the help, ignored (no file read, no
/// binary run, standard input left for --launch-json) and named in one warning line.
#[test]
fn codex_inventory_flags_are_ignored_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let codex = marking_codex(dir.path());
    let codex = codex.to_str().unwrap();
    let base = render("codex", &["--agent-id", "a1", "--format", "plan"]);
    assert_eq!((base.code, base.stderr.as_str()), (0, ""));
    let warning = |flags: &str| {
        format!(
            "warning: {flags} ignored (deprecated, to be removed): the plan roots Codex in a \
             per-launch CODEX_HOME that configures no MCP server but kcap's, so there is no \
             inherited server to take an inventory of\n"
        )
    };
    for (flags, named) in [
        (vec!["--no-inherited-servers"], "--no-inherited-servers"),
        (vec!["--inventory", INVENTORY], "--inventory"),
        (
            vec!["--inventory", "/nonexistent/inventory.json"],
            "--inventory",
        ),
        (vec!["--codex-bin", codex], "--codex-bin"),
        (vec!["--codex-bin", "/nonexistent/codex"], "--codex-bin"),
        (
            vec![
                "--inventory",
                INVENTORY,
                "--codex-bin",
                codex,
                "--no-inherited-servers",
            ],
            "--inventory, --codex-bin, --no-inherited-servers",
        ),
    ] {
        let mut args = vec!["--agent-id", "a1", "--format", "plan"];
        args.extend(&flags);
        let r = render("codex", &args);
        assert_eq!(
            r,
            Run {
                stderr: warning(named),
                ..base.clone()
            },
            "{flags:?}"
        );
    }
    assert!(
        !dir.path().join("codex.ran").exists(),
        "--codex-bin was run"
    );
    // `--inventory -` no longer reads standard input, so --launch-json can.
    let r = finish(
        bin()
            .args([
                "render",
                "codex",
                "--launch-dir",
                "/run/kcap/l1",
                "--server-url",
                URL,
                "--kcap-bin",
                KCAP,
                "--launch-json",
                "-",
                "--inventory",
                "-",
                "--format",
                "plan",
            ])
            .write_stdin(r#"{"agent_id":"a1"}"#),
    );
    assert_eq!(
        r,
        Run {
            stderr: warning("--inventory"),
            ..base
        }
    );
    let help = run(&["render", "codex", "--help"]);
    for flag in ["--inventory", "--codex-bin", "--no-inherited-servers"] {
        assert!(!help.stdout.contains(flag), "{flag}: {}", help.stdout);
    }
}

#[test]
fn bad_inputs_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_launch = dir.path().join("launch.json");
    std::fs::write(
        &bad_launch,
        r#"{"agent_id":"a1","mcp_allowlist":["kcap-review",7]}"#,
    )
    .unwrap();
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        bad_launch.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        format!(
            "error: {} is not a launch command JSON: mcp_allowlist[1]: invalid type: integer `7`, expected a string at line 1 column 49\n",
            bad_launch.display()
        )
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        "tests/fixtures/cli/no-such.json",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: --launch-json: cannot read tests/fixtures/cli/no-such.json: "),
        "{}",
        r.stderr
    );
    // Missing agent id, unknown format.
    assert_eq!(
        run(&["render", "claude", "--launch-dir", "/run/kcap/l1"]).code,
        2
    );
    assert_eq!(
        run(&[
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a",
            "--format",
            "csv"
        ])
        .code,
        2
    );
}

#[test]
fn render_refusals_exit_1_with_the_message() {
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--agent-id",
        "a1",
        "--allowlist",
        "kcap-review,kcap-memory",
        "--strict",
    ]);
    assert_eq!(
        r,
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: MCP allowlist entry 2 \"kcap-memory\" is refused by the strict policy: the server is not read-only, so its tools need approval; remove it from the flow's MCP allowlist, or plan with the lenient policy, which admits it\n".into(),
        }
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--agent-id",
        "a1",
        "--server-url",
        "http://${HOST}",
        "--kcap-bin",
        KCAP,
    ]);
    assert_eq!(
        r,
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: cannot render the Claude Code launch: `kcap-flow-result.env.KCAP_URL` contains `${`, which Claude Code expands as a variable reference and cannot escape; remove `${` from that value\n".into(),
        }
    );
    // A NUL cannot be a shell word.
    let nul = |client| {
        finish(
            bin()
                .args([
                    "render",
                    client,
                    "--launch-dir",
                    "/run/kcap/l1",
                    "--launch-json",
                    "-",
                    "--format",
                    "shell",
                ])
                .write_stdin(r#"{"agent_id":"a1","prompt":"a\u0000b"}"#),
        )
    };
    assert_eq!(
        nul("codex"),
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: cannot render the codex launch: codex takes the reviewer's prompt in argv, and it holds a NUL byte, which no argument can pass; remove it\n".into(),
        }
    );
    // Claude Code's prompt is typed into its terminal: a control character would be a key.
    assert_eq!(
        nul("claude"),
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: the reviewer's `prompt` `a\\0b` contains a null character (U+0000); give it without one\n".into(),
        }
    );
}

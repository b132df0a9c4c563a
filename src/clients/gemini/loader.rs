//! A model of how Gemini CLI 0.61.0 loads the `mcpServers` of a settings file
//! (`~/.gemini/settings.json`, a project's `.gemini/settings.json`, the system settings file):
//! which servers a session starts, which it connects to over the network, and when it
//! refuses the file.
//!
//! Measured with `gemini mcp list` (which starts each server; `GEMINI_CLI_TRUST_WORKSPACE=true`)
//! in a throwaway `HOME` and project, with a recorder as the server command that logs its
//! argv, environment and working directory (2026-11-30), and proven on seeded variants by
//! `tests/clients/differential_gemini.rs` (2026-12-01), with the bundle's code as the reference
//! (`bundle/chunk-2YTYPKEZ.js` `_doLoadSettings` and `resolveEnvVarsInString`,
//! `bundle/chunk-JDPZ4CE3.js` `createTransport`, `createUrlTransport`, `expandEnvVars`,
//! `sanitizeEnvironment`, `StdioClientTransport` on `cross-spawn`). Quirks, each as measured:
//!
//! - **Decoding**: `//` and `/* */` comments are stripped; a trailing comma or a byte order
//!   mark refuses the whole file (exit 52, "Please fix the configuration file(s)"); a byte
//!   that is not UTF-8 reads as U+FFFD. A repeated key keeps its last value. A top level that
//!   is not an object refuses the file.
//! - **Schema errors are printed, not fatal**: an unknown key (`disabled`, `zzz`) or a
//!   wrong-typed value is reported ("Invalid configuration … Error in: mcpServers.x…") and
//!   the raw value is used as JavaScript reads it (truthiness, `String(…)`).
//! - **`null` entry**: stops Gemini CLI altogether (`createPolicyEngineConfig` reads `.trust`
//!   of every entry: "Cannot read properties of null (reading 'trust')", exit 1), so the file
//!   is refused. Any other entry that is not an object starts nothing.
//! - **`mcpServers`** that is an array holds servers named `0`, `1`, …; any other non-object
//!   (a string, a number, `null`) holds none.
//! - **Network servers**: a truthy `httpUrl`, else a truthy `url`, makes the entry a network
//!   server, even next to a `command`; if its text is not an absolute URL nothing is reached.
//! - **Command servers**: `command` must be a non-empty string. `args` elements are passed as
//!   JavaScript's `String(…)` (`null` → `"null"`, an object → `"[object Object]"`); a falsy
//!   `args` is `[]`; a truthy `args` that is not an array takes the place of `cross-spawn`'s
//!   options, so the server starts without arguments, without the entry's `env` and in Gemini
//!   CLI's own directory. `cwd` is used when it is a non-empty string; another non-`null`
//!   value makes the start fail.
//! - **`env`**: a string or an array gives variables named by index; a value that is `null`,
//!   `false`, `0` or `""` is passed as its text; `true`, another number, an array or an object
//!   makes the start fail. Variables such as `LD_PRELOAD` or `NODE_OPTIONS` are dropped.
//! - **Expansion**: every string of the file (`command`, `args`, `env`, `cwd`, `url`, …) goes
//!   through `$NAME`, `${NAME}`, `${NAME:-default}` once at load, from Gemini CLI's
//!   environment; an unset `NAME` without a default stays literal. `env` values are expanded a
//!   second time at start (`dotenv-expand`: `${NAME-d}`, `${NAME:+d}`, recursion, `\$` as an
//!   escape, an unset `NAME` becomes `""`) from Gemini CLI's environment without
//!   secret-looking names (`*TOKEN*`, `*KEY*`, …). `~` is not expanded.
//! - **Tools**: `includeTools` lists the only tools kept, `excludeTools` hides tools (and wins).
//!
//! Not modelled: the value patterns by which Gemini CLI also hides a variable from the second
//! expansion (private keys, tokens by their look), an `args` object whose keys are
//! `cross-spawn` options (`env`, `cwd`), numbers beyond 2^53 and exponents in `String(…)`, and
//! a `"timeout"` (which bounds the connection, not the start).

use std::collections::{BTreeMap, HashSet};

use crate::clients::gemini_family::loader::{self as family, ArgsNotArray, Dialect, Expand, Flaw};
use crate::clients::loaded::{Kind, Loaded, Node, js_truthy};

/// What Gemini CLI 0.61.0 does with `bytes`, its settings file `path`. `env` is Gemini
/// CLI's environment, for `$…` expansion.
///
/// Never fails: an unreadable file is a [`Rejected`](crate::clients::loaded::Rejected)
/// verdict, as the client treats it.
pub fn load(path: &str, bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Loaded {
    family::load(&DIALECT, path, bytes, env)
}

/// Gemini CLI 0.61.0's quirks in the family's loader (module docs), each measured by
/// tests/clients/differential_gemini.rs.
const DIALECT: Dialect = Dialect {
    // Node keeps a byte order mark, on which `JSON.parse` fails ("Unexpected token
    // '\u{feff}'", exit 52).
    bom_refused: Some(
        "it starts with a byte order mark, which Gemini CLI 0.61.0 does not skip: it is not \
         valid JSON",
    ),
    null_entry_stops: Some(
        "which stops Gemini CLI 0.61.0 at startup (\"Cannot read properties of null (reading \
         'trust')\")",
    ),
    braced,
    never_expanded: &[],
    // cross-spawn takes a non-array `args` for its options.
    args_not_array: ArgsNotArray::DropsOptions,
    cwd_must_be_string: true,
    env: entry_env,
    env_first: true,
};

/// The variables an entry's `env` sets, as `createTransport` builds them.
fn entry_env(
    node: &Node,
    x: &Expand<'_>,
    expanded: &mut Vec<String>,
) -> Result<BTreeMap<String, String>, Flaw> {
    let mut out = BTreeMap::new();
    let Some(e) = node.get("env").filter(|e| js_truthy(e)) else {
        return Ok(out);
    };
    let env = x.env;
    let sanitized = |name: &str| env(name).filter(|v| !redacted(name, v, env));
    let pairs: Vec<(String, &Node)> = match &e.kind {
        Kind::Table(entries) => entries.iter().map(|(k, _, v)| (k.clone(), v)).collect(),
        Kind::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        Kind::Str(s) => {
            // Object.entries of a string: one variable per character.
            for (i, ch) in x.once(s, expanded, "env").chars().enumerate() {
                out.insert(i.to_string(), ch.to_string());
            }
            return Ok(out);
        }
        _ => return Ok(out),
    };
    for (key, value) in pairs {
        if listed(BLOCKED, &key.to_ascii_uppercase()) {
            continue;
        }
        let text = match &value.kind {
            Kind::Str(s) if !s.is_empty() => {
                let field = format!("env.{key}");
                let once = x.once(s, expanded, &field);
                if once.contains('$') && !expanded.contains(&field) {
                    expanded.push(field);
                }
                dotenv_expand(&once, &sanitized)
            }
            _ if !js_truthy(value) => x.js_string(value, expanded, "env"),
            other => {
                return Err((
                    format!(
                        "`env.{key}` is {}, which makes the start fail",
                        other.noun()
                    ),
                    value.span.clone(),
                ));
            }
        };
        out.insert(key, text);
    }
    Ok(out)
}

/// Variables `createTransport` never passes from an entry's `env` (`BLOCKED_EXECUTION_ENVS`).
const BLOCKED: &str = "NODE_OPTIONS NODE_CLI_FLAGS _FORCE_NODE_OPTIONS NODE_PATH \
    ELECTRON_RUN_AS_NODE PYTHONPATH PYTHONSTARTUP RUBYOPT RUBYLIB PERL5OPT PERL5LIB LD_PRELOAD \
    LD_AUDIT LD_DEBUG LD_PROFILE LD_LIBRARY_PATH DYLD_INSERT_LIBRARIES DYLD_FORCE_FLAT_NAMESPACE \
    DYLD_LIBRARY_PATH DYLD_FRAMEWORK_PATH DYLD_FALLBACK_LIBRARY_PATH \
    DYLD_FALLBACK_FRAMEWORK_PATH BASH_ENV ENV PERL5DB JAVA_TOOL_OPTIONS _JAVA_OPTIONS CLASSPATH \
    DOTNET_STARTUP_HOOKS CORECLR_PROFILER_PATH CORECLR_ENABLE_PROFILING";

/// Names `sanitizeEnvironment` always passes (`ALWAYS_ALLOWED_ENVIRONMENT_VARIABLES`).
const ALLOWED: &str = "PATH SYSTEMROOT COMSPEC PATHEXT WINDIR TEMP TMP USERPROFILE SYSTEMDRIVE \
    HOME LANG SHELL TMPDIR USER LOGNAME TERM COLORTERM ADDITIONAL_CONTEXT AVAILABLE_LABELS \
    BRANCH_NAME DESCRIPTION EVENT_NAME GITHUB_ENV IS_PULL_REQUEST ISSUES_TO_TRIAGE ISSUE_BODY \
    ISSUE_NUMBER ISSUE_TITLE PULL_REQUEST_NUMBER REPOSITORY TITLE TRIGGERING_ACTOR";

/// Names it never passes (`NEVER_ALLOWED_ENVIRONMENT_VARIABLES`), and the name parts
/// (`NEVER_ALLOWED_NAME_PATTERNS`).
const NEVER: &str = "CLIENT_ID DB_URI CONNECTION_STRING AWS_DEFAULT_REGION AZURE_CLIENT_ID \
    AZURE_TENANT_ID SLACK_WEBHOOK_URL TWILIO_ACCOUNT_SID DATABASE_URL GOOGLE_CLOUD_PROJECT \
    GOOGLE_CLOUD_ACCOUNT FIREBASE_PROJECT_ID";
const NEVER_PARTS: &str = "TOKEN SECRET PASSWORD PASSWD KEY AUTH CREDENTIAL CREDS PRIVATE CERT";

fn listed(list: &str, key: &str) -> bool {
    list.split_whitespace().any(|k| k == key)
}

/// Whether `sanitizeEnvironment` hides `name` from a server (and from the second
/// expansion), by name only (its value patterns are not modelled).
fn redacted(name: &str, _value: &str, env: &dyn Fn(&str) -> Option<String>) -> bool {
    let key = name.to_ascii_uppercase();
    if key.starts_with("GEMINI_CLI_") || key.starts_with("GIT_CONFIG_") {
        return false;
    }
    // The default `advanced.excludedEnvVars`.
    if key == "DEBUG" || key == "DEBUG_MODE" {
        return true;
    }
    if listed(ALLOWED, &key) {
        return false;
    }
    let strict = env("GITHUB_SHA").is_some_and(|v| !v.is_empty())
        || env("SURFACE").is_some_and(|v| v == "Github");
    listed(NEVER, &key) || strict || NEVER_PARTS.split_whitespace().any(|p| key.contains(p))
}

/// Gemini CLI's load-time expansion (`resolveEnvVarsInString`) reads the regex
/// `\$(?:(\w+)|{([^}]+?)(?::-([^}]*))?})`: this is its `{([^}]+?)(?::-([^}]*))?}` part after
/// `${`: (name, default, length from the `{`).
fn braced(inner: &str) -> Option<(&str, Option<&str>, usize)> {
    let close = inner.find('}')?;
    for (k, _) in inner.char_indices().skip(1) {
        if k > close {
            break;
        }
        if inner[k..].starts_with(":-") {
            let end = k + 2 + inner[k + 2..].find('}')?;
            return Some((&inner[..k], Some(&inner[k + 2..end]), end + 2));
        }
        if k == close {
            return Some((&inner[..k], None, k + 2));
        }
    }
    None
}

/// `dotenv-expand`'s `expandValue` then `_resolveEscapeSequences`, as `expandEnvVars` runs
/// them on an `env` value at start, with `env` the variables it may see.
fn dotenv_expand(value: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut result = value.to_string();
    let mut seen: HashSet<String> = HashSet::new();
    for _ in 0..1000 {
        let Some((start, end, expression)) = dotenv_match(&result) else {
            break;
        };
        seen.insert(result.clone());
        let template = result[start..end].to_string();
        let op = [":+", "+", ":-", "-"]
            .iter()
            .filter_map(|op| expression.find(op).map(|i| (i, *op)))
            .min_by_key(|(i, op)| (*i, std::cmp::Reverse(op.len())));
        let splitter = op.map_or("null", |(_, op)| op);
        let (key, default) = match expression.split_once(splitter) {
            Some((k, d)) => (k.to_string(), d.to_string()),
            None => (expression.clone(), String::new()),
        };
        let (found, default) = if splitter == ":+" || splitter == "+" {
            let set = env(&key).is_some_and(|v| !v.is_empty());
            (None, if set { default } else { String::new() })
        } else {
            (env(&key), default)
        };
        let replacement = match found {
            Some(v) if !v.is_empty() && !seen.contains(&v) => v,
            _ => default,
        };
        let at = result.find(&template).unwrap_or(start);
        let replacement = js_replacement(&replacement, &result, at, &template);
        result.replace_range(at..at + template.len(), &replacement);
    }
    result.replace("\\$", "$")
}

/// The leftmost match of `(?<!\\)\${([^{}]+)}|(?<!\\)\$([A-Za-z_][A-Za-z0-9_]*)`:
/// (start, end, the expression).
fn dotenv_match(text: &str) -> Option<(usize, usize, String)> {
    let bytes = text.as_bytes();
    for (i, _) in text.match_indices('$') {
        if i > 0 && bytes[i - 1] == b'\\' {
            continue;
        }
        let after = &text[i + 1..];
        if let Some(inner) = after.strip_prefix('{')
            && let Some(len) = inner.find(['{', '}'])
            && len > 0
            && inner[len..].starts_with('}')
        {
            return Some((i, i + 3 + len, inner[..len].to_string()));
        }
        if after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            return Some((i, i + 1 + len, after[..len].to_string()));
        }
    }
    None
}

/// `String.prototype.replace`'s reading of `$$`, `$&`, `` $` `` and `$'` in a replacement.
fn js_replacement(replacement: &str, subject: &str, at: usize, matched: &str) -> String {
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('$') => out.push('$'),
            Some('&') => out.push_str(matched),
            Some('`') => out.push_str(&subject[..at]),
            Some('\'') => out.push_str(&subject[at + matched.len()..]),
            _ => {
                out.push('$');
                continue;
            }
        }
        chars.next();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "XV_SET" => Some("setval".into()),
            "XV_REF" => Some("$XV_SET".into()),
            "XV_TOKEN" => Some("secret".into()),
            _ => None,
        }
    }

    fn one(text: &str) -> Loaded {
        load("settings.json", text.as_bytes(), &env)
    }

    #[test]
    fn a_null_entry_stops_gemini_cli() {
        // 0.61.0: "Cannot read properties of null (reading 'trust')", exit 1.
        let l = one(r#"{"mcpServers": {"a": {"command": "/r"}, "b": null}}"#);
        assert_eq!(l.rejected.len(), 1, "{l:?}");
        assert!(l.started.is_empty());
    }

    #[test]
    fn args_are_javascript_strings_and_a_non_array_drops_the_options() {
        // 0.61.0, measured: ["a", {"a": 1}, null, true, 1.5] ran as
        // `a [object Object] null true 1.5`; "args": "x" ran with no argument and no `env`.
        let l = one(r#"{"mcpServers": {
                "a": {"command": "/r", "args": ["a", {"a": 1}, null, true, 1.5, ["b", null]]},
                "b": {"command": "/r", "args": "x", "env": {"K": "v"}, "cwd": "/tmp"},
                "c": {"command": "/r", "args": false, "env": {"K": "v"}}}}"#);
        let s = |n: &str| l.started.iter().find(|s| s.name == n).unwrap();
        assert_eq!(
            s("a").args,
            ["a", "[object Object]", "null", "true", "1.5", "b,"]
        );
        assert!(s("b").args.is_empty() && s("b").env.is_empty() && s("b").cwd.is_none());
        assert_eq!(s("c").env["K"], "v");
    }

    #[test]
    fn env_values_are_expanded_twice_and_falsy_ones_kept_as_text() {
        // 0.61.0, measured with a recorder: KCAP_1= KCAP_2=setval KCAP_3=\setval
        // KCAP_4=setval KCAP_5=d KCAP_6=a KCAP_7= KCAP_F=false KCAP_N=null KCAP_Z=0.
        let l = one(
            r#"{"mcpServers": {"a": {"command": "/r", "args": ["${XV_UNSET}", "$XV_REF"], "env": {
                "KCAP_1": "${XV_UNSET}", "KCAP_2": "${XV_SET-d}", "KCAP_3": "\\$XV_SET",
                "KCAP_4": "$XV_REF", "KCAP_5": "${XV_TOKEN-d}", "KCAP_6": "${XV_UNSET:-a}",
                "KCAP_7": "$$XV_SET", "KCAP_F": false, "KCAP_N": null, "KCAP_Z": 0}}}}"#,
        );
        let s = &l.started[0];
        assert_eq!(s.args, ["${XV_UNSET}", "$XV_SET"]);
        let got: Vec<(&str, &str)> = s.env.iter().map(|(k, v)| (&**k, &**v)).collect();
        assert_eq!(
            got,
            [
                ("KCAP_1", ""),
                ("KCAP_2", "setval"),
                ("KCAP_3", "\\setval"),
                ("KCAP_4", "setval"),
                ("KCAP_5", "d"),
                ("KCAP_6", "a"),
                ("KCAP_7", ""),
                ("KCAP_F", "false"),
                ("KCAP_N", "null"),
                ("KCAP_Z", "0")
            ]
        );
    }

    #[test]
    fn a_truthy_url_wins_and_reaches_nothing_when_it_is_not_a_url() {
        // 0.61.0: `httpUrl` wins over `url`; "url": 5 started nothing; cwd is expanded.
        let l = one(r#"{"mcpServers": {
                "a": {"url": "http://h/u", "httpUrl": "http://h/$XV_SET"},
                "b": {"url": 5, "command": "/r"},
                "c": {"url": "", "command": "/r", "cwd": "$XV_SET"},
                "d": {"command": "", "args": ["x"]},
                "e": {"command": "/r", "env": {"K": true}}}}"#);
        assert_eq!(l.remote.len(), 1);
        assert_eq!(l.remote[0].url, "http://h/setval");
        let names: Vec<&str> = l.started.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["c"]);
        assert_eq!(l.started[0].cwd.as_deref(), Some("setval"));
        let skipped: Vec<&str> = l.skipped.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(skipped, ["b", "d", "e"]);
    }
}

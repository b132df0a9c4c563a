//! The rules about one registry file taken key by key: `toml-utf8`, `toml-syntax`,
//! `unknown-key`, `wrong-type`, `missing-key`, and the per-value format rules. The rules that
//! relate keys are in [`super::cross`].

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::diagnostic::{Diagnostic, SourceSpan, SourceText};
use super::rules::{
    ENV_NAME_PATTERN, EntryKey, Key, MAX_DESCRIPTION_CHARS, Rule, TOOL_NAME_PATTERN, ToolKey,
    ValueKind, is_env_name, is_tool_name,
};
use crate::model::{EnvSource, Inject};
use crate::text::{forbidden_char_problem, printable};

/// A tool table as parsed, before the cross-key rules.
pub(super) struct RawTool {
    /// Its place in `tools` (`tools[<index>]`).
    pub index: usize,
    pub name: Option<Spanned<String>>,
    pub unattended_safe: Option<Spanned<bool>>,
}

/// The `[env]` entries as parsed: each variable's name and source.
pub(super) type RawEnv = Vec<(String, Spanned<EnvSource<String>>)>;

/// A registry file's keys as parsed; `None` where the key is absent or its value broke a
/// rule ([`RawEntry::broken`] tells the two apart).
#[derive(Default)]
pub(super) struct RawEntry {
    pub id: Option<Spanned<String>>,
    pub description: Option<Spanned<String>>,
    pub args: Option<Vec<String>>,
    pub starts_flows: Option<Spanned<bool>>,
    pub allowlistable: Option<Spanned<bool>>,
    pub inject: Option<Spanned<Inject>>,
    pub registered: Option<Spanned<bool>>,
    pub read_only: Option<Spanned<bool>>,
    pub needs_project_cwd: Option<Spanned<bool>>,
    pub driver_stamp: Option<Spanned<bool>>,
    pub alias: Option<Spanned<String>>,
    /// The `[env]` entries whose value parsed (a name that broke `env-name` kept): the
    /// rules that read one still run when another broke a rule.
    pub env: Option<RawEnv>,
    /// Some of `[env]` broke a rule and is not in [`RawEntry::env`]: a rule that reasons
    /// about a variable's absence does not run.
    pub env_partial: bool,
    /// The `[[tools]]` tables (a name that broke a rule left out of its tool).
    pub tools: Option<Vec<RawTool>>,
    /// The keys the file sets.
    present: Vec<EntryKey>,
}

impl RawEntry {
    /// Whether `key` holds a value that passed its rules.
    fn parsed(&self, key: EntryKey) -> bool {
        match key {
            EntryKey::Id => self.id.is_some(),
            EntryKey::Description => self.description.is_some(),
            EntryKey::Args => self.args.is_some(),
            EntryKey::StartsFlows => self.starts_flows.is_some(),
            EntryKey::Allowlistable => self.allowlistable.is_some(),
            EntryKey::Inject => self.inject.is_some(),
            EntryKey::Registered => self.registered.is_some(),
            EntryKey::ReadOnly => self.read_only.is_some(),
            EntryKey::NeedsProjectCwd => self.needs_project_cwd.is_some(),
            EntryKey::DriverStamp => self.driver_stamp.is_some(),
            EntryKey::Alias => self.alias.is_some(),
            EntryKey::Env => self.env.is_some(),
            EntryKey::Tools => self.tools.is_some(),
        }
    }

    /// Whether the file sets `key` to a value that broke a rule. The cross-key rules that read
    /// such a key do not run: their advice would rest on a value the file does not hold.
    pub fn broken(&self, key: EntryKey) -> bool {
        self.present.contains(&key) && !self.parsed(key)
    }
}

/// Checks one file, collecting its diagnostics.
pub(super) struct FileCx<'a> {
    path: &'a str,
    source: Arc<SourceText>,
    pub diags: Vec<Diagnostic>,
}

/// The recovering parser goes on after a syntax error and reports what follows from it
/// (a missing `]` makes every later line an array element): only the first is shown.
const SYNTAX_HELP: &str =
    "fix the TOML syntax (TOML 1.1, a superset of 1.0: https://toml.io/en/v1.1.0)";

impl<'a> FileCx<'a> {
    pub fn new(path: &'a str) -> Self {
        FileCx {
            path,
            source: Arc::new(SourceText::new(String::new())),
            diags: Vec::new(),
        }
    }

    /// The file's text, once [`FileCx::parse`] has read it.
    pub fn source(&self) -> &Arc<SourceText> {
        &self.source
    }

    pub fn report(&mut self, rule: Rule, span: Range<usize>, message: String, help: String) {
        self.diags.push(Diagnostic {
            rule,
            path: self.path.to_string(),
            span: Some(SourceSpan {
                range: span,
                source: self.source.clone(),
            }),
            message,
            help,
        });
    }

    /// Rules `toml-utf8`, `toml-syntax`, `unknown-key`, `wrong-type`, `missing-key`, and the
    /// per-value format rules. `None` when the file is not TOML at all.
    pub fn parse(&mut self, bytes: &[u8]) -> Option<RawEntry> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                self.source =
                    Arc::new(SourceText::new(String::from_utf8_lossy(bytes).into_owned()));
                let at = e.valid_up_to();
                self.report(
                    Rule::TomlUtf8,
                    at..at + char::REPLACEMENT_CHARACTER.len_utf8(),
                    "the file is not valid UTF-8".into(),
                    "save the file as UTF-8 (TOML requires it)".into(),
                );
                return None;
            }
        };
        self.source = Arc::new(SourceText::new(text.to_owned()));
        // One leading BOM is dropped above, as every client drops it; the `toml` parser would
        // silently drop a second one too, which no client does.
        if text.starts_with('\u{feff}') {
            self.report(
                Rule::TomlSyntax,
                0..'\u{feff}'.len_utf8(),
                "invalid TOML: a second byte order mark (U+FEFF) at the start of the file".into(),
                "remove the repeated byte order mark (an editor that adds one on save may \
                 have added it twice)"
                    .into(),
            );
            return None;
        }
        let source = self.source.clone();
        let (table, errors) = DeTable::parse_recoverable(source.text());
        // Only the first syntax error: everything after it may follow from it.
        if let Some(first) = errors
            .iter()
            .min_by_key(|e| e.span().map_or(0, |s| s.start))
        {
            let message = printable(first.message().trim_end()).into_owned();
            self.report(
                Rule::TomlSyntax,
                first.span().unwrap_or(0..0),
                format!("invalid TOML: {message}"),
                SYNTAX_HELP.into(),
            );
            return None;
        }
        let mut raw = RawEntry::default();
        // Keys the file has, but misspelled or in a table: not reported missing as well.
        let mut found_elsewhere = Vec::new();
        let table = table.into_inner();
        for (k, v) in in_source_order(&table) {
            let Some(key) = EntryKey::from_name(k.get_ref()) else {
                let suggested = self.unknown_key::<EntryKey>(k, "");
                found_elsewhere.extend(suggested);
                // A misspelled key is the root cause: the key it stands for counts as set to
                // a broken value, so the rules that read that key do not run on a default the
                // author did not mean (`read_onyl = true` is not `read_only = false`).
                if let Some(meant) = suggested.and_then(EntryKey::from_name) {
                    if !table.keys().any(|k| k.get_ref() == meant.name()) {
                        raw.present.push(meant);
                    }
                }
                continue;
            };
            raw.present.push(key);
            let n = key.name();
            match key {
                EntryKey::Id => raw.id = self.string(v, n),
                EntryKey::Description => raw.description = self.description(v),
                EntryKey::Args => raw.args = self.args(v),
                EntryKey::StartsFlows => raw.starts_flows = self.bool(v, n),
                EntryKey::Allowlistable => raw.allowlistable = self.bool(v, n),
                EntryKey::Inject => raw.inject = self.inject(v),
                EntryKey::Registered => raw.registered = self.bool(v, n),
                EntryKey::ReadOnly => raw.read_only = self.bool(v, n),
                EntryKey::NeedsProjectCwd => raw.needs_project_cwd = self.bool(v, n),
                EntryKey::DriverStamp => raw.driver_stamp = self.bool(v, n),
                EntryKey::Alias => raw.alias = self.string(v, n),
                EntryKey::Env => {
                    if let Some((env, complete)) = self.env(v, &mut found_elsewhere) {
                        raw.env = Some(env);
                        raw.env_partial = !complete;
                    }
                }
                EntryKey::Tools => raw.tools = self.tools(v, &mut found_elsewhere),
            }
        }
        self.missing_keys::<EntryKey>(&table, &found_elsewhere, 0..0, "");
        Some(raw)
    }

    /// Rule `unknown-key`. Returns the suggested key, if any.
    fn unknown_key<K: Key>(&mut self, k: &Spanned<Cow<'_, str>>, at: &str) -> Option<&'static str> {
        let name = k.get_ref().as_ref();
        let valid = K::ALL
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ");
        let suggestion = did_you_mean(name, K::ALL.iter().map(|s| s.name()));
        let help = match suggestion {
            Some(s) => format!("did you mean `{s}`? (valid keys{at}: {valid})"),
            None => format!("remove it (valid keys{at}: {valid})"),
        };
        self.report(
            Rule::UnknownKey,
            k.span(),
            format!("unknown key `{}`{at}", printable(name)),
            help,
        );
        suggestion
    }

    /// A top-level key (`read_only = false`) written below a `[env]` or `[[tools]]` header,
    /// where TOML puts it into that table. Reported under `rule` with advice to move it up.
    fn misplaced_key(&mut self, rule: Rule, k: &Spanned<Cow<'_, str>>, key: EntryKey, table: &str) {
        self.report(
            rule,
            k.span(),
            format!(
                "`{}` is a top-level key, but here it is inside the `{table}` table",
                key.name()
            ),
            format!(
                "move `{}` above the first table header: every key after `{table}` belongs to that table",
                key.name()
            ),
        );
    }

    /// Rule `missing-key`, except for keys the file has elsewhere (a misspelling is reported
    /// once, as `unknown-key`; a key inside a table, where it was found).
    fn missing_keys<K: Key>(
        &mut self,
        table: &DeTable<'_>,
        found_elsewhere: &[&str],
        span: Range<usize>,
        at: &str,
    ) {
        for &key in K::ALL.iter().filter(|k| k.required()) {
            let name = key.name();
            if table.keys().any(|k| k.get_ref() == name) || found_elsewhere.contains(&name) {
                continue;
            }
            let help = match key.kind() {
                ValueKind::Bool => {
                    format!("add `{name} = true` or `{name} = false`: it must be explicit")
                }
                kind => format!("add `{name}`, {}", kind.describe()),
            };
            self.report(
                Rule::MissingKey,
                span.clone(),
                format!("required key `{name}` is missing{at}"),
                help,
            );
        }
    }

    fn wrong_type(&mut self, v: &Spanned<DeValue<'_>>, what: &str, kind: ValueKind) {
        self.wrong_type_as(v, what, kind.describe());
    }

    /// Rule `wrong-type`: `what` must be `expected` (e.g. "a boolean").
    fn wrong_type_as(&mut self, v: &Spanned<DeValue<'_>>, what: &str, expected: &str) {
        self.report(
            Rule::WrongType,
            v.span(),
            format!(
                "`{what}` must be {expected}, found {}",
                article(v.get_ref().type_str())
            ),
            format!("write `{what}` as {expected}"),
        );
    }

    fn string(&mut self, v: &Spanned<DeValue<'_>>, what: &str) -> Option<Spanned<String>> {
        match v.get_ref() {
            DeValue::String(s) => Some(Spanned::new(v.span(), s.to_string())),
            _ => {
                self.wrong_type(v, what, ValueKind::String);
                None
            }
        }
    }

    fn bool(&mut self, v: &Spanned<DeValue<'_>>, what: &str) -> Option<Spanned<bool>> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(Spanned::new(v.span(), *b)),
            _ => {
                self.wrong_type(v, what, ValueKind::Bool);
                None
            }
        }
    }

    /// `inject`: rule `inject-value`.
    fn inject(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Spanned<Inject>> {
        let s = self.string(v, "inject")?;
        if let Some(inject) = Inject::from_name(s.get_ref()) {
            return Some(Spanned::new(s.span(), inject));
        }
        let names = Inject::ALL.map(Inject::name);
        let hint = did_you_mean(s.get_ref(), names.iter().copied())
            .map_or(String::new(), |n| format!("did you mean `\"{n}\"`? "));
        self.report(
            Rule::InjectValue,
            s.span(),
            format!("unknown `inject` condition `{}`", printable(s.get_ref())),
            format!(
                "{hint}write `inject = \"always\"` (the result channel) or `inject = \"borrowed-snapshot\"`"
            ),
        );
        None
    }

    fn description(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Spanned<String>> {
        let d = self.string(v, "description")?;
        let chars = d.get_ref().chars().count();
        let problem = if chars == 0 {
            Some("is empty".to_string())
        } else if chars > MAX_DESCRIPTION_CHARS {
            Some(format!("is {chars} characters long"))
        } else {
            forbidden_char_problem(d.get_ref())
        };
        match problem {
            Some(p) => {
                self.report(
                    Rule::DescriptionFormat,
                    d.span(),
                    format!("`description` {p}"),
                    format!(
                        "write one line of 1 to {MAX_DESCRIPTION_CHARS} characters without control, invisible or line-break characters"
                    ),
                );
                None
            }
            None => Some(d),
        }
    }

    fn args(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Vec<String>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(v, "args", ValueKind::StringArray);
            return None;
        };
        if items.is_empty() {
            self.report(
                Rule::ArgsFormat,
                v.span(),
                "`args` is empty".into(),
                "list the argv after the kcap binary, e.g. `args = [\"mcp\", \"review\"]`".into(),
            );
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let Some(s) = self.string(item, &format!("args[{i}]")) else {
                ok = false;
                continue;
            };
            let problem = if s.get_ref().is_empty() {
                Some("is empty".to_string())
            } else if let Some(p) = forbidden_char_problem(s.get_ref()) {
                Some(p)
            } else if s.get_ref().contains("${") {
                Some("contains `${`, which Claude Code expands as a variable reference".into())
            } else {
                None
            };
            if let Some(p) = problem {
                ok = false;
                self.report(
                    Rule::ArgsFormat,
                    s.span(),
                    format!("`args[{i}]` {p}"),
                    "write each argument as a non-empty, single-line string without `${`".into(),
                );
            }
            out.push(s.into_inner());
        }
        ok.then_some(out)
    }

    /// The `[env]` table: its entries whose value parsed, and whether every entry did. A
    /// top-level key found in it is added to `found_elsewhere`.
    fn env(
        &mut self,
        v: &Spanned<DeValue<'_>>,
        found_elsewhere: &mut Vec<&'static str>,
    ) -> Option<(RawEnv, bool)> {
        let DeValue::Table(table) = v.get_ref() else {
            self.wrong_type(v, "env", ValueKind::EnvTable);
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (k, val) in in_source_order(table) {
            let name = k.get_ref().to_string();
            if let Some(key) = EntryKey::from_name(&name) {
                self.misplaced_key(Rule::EnvName, k, key, "[env]");
                found_elsewhere.push(key.name());
                continue;
            }
            if !is_env_name(&name) {
                ok = false;
                self.report(
                    Rule::EnvName,
                    k.span(),
                    format!(
                        "env name `{}` does not match {ENV_NAME_PATTERN}",
                        printable(&name)
                    ),
                    "use upper-case ASCII letters, digits and `_`, starting with a letter".into(),
                );
            }
            let what = format!("env.{}", printable(&name));
            match self.env_source(val, &what) {
                Some(src) => out.push((name, src)),
                None => ok = false,
            }
        }
        Some((out, ok))
    }

    /// One env value: a source name (rule `env-source`) or a constant `{ value = "…" }`
    /// (rule `env-constant`; `unknown-key`, `missing-key` and `wrong-type` inside it).
    fn env_source(
        &mut self,
        val: &Spanned<DeValue<'_>>,
        what: &str,
    ) -> Option<Spanned<EnvSource<String>>> {
        const EXPECTED: &str = "a source name (\"server_url\", …) or a constant { value = \"…\" }";
        match val.get_ref() {
            DeValue::String(src) => match EnvSource::from_name(src) {
                Some(s) => Some(Spanned::new(val.span(), s.map(String::from))),
                None => {
                    let names = EnvSource::ALL.map(|s| s.name().unwrap_or_default());
                    let hint = did_you_mean(src, names.iter().copied())
                        .map_or(String::new(), |s| format!("did you mean `\"{s}\"`? "));
                    self.report(
                        Rule::EnvSource,
                        val.span(),
                        format!("unknown env source `{}` for `{what}`", printable(src)),
                        format!(
                            "{hint}the source is one of {}, or a constant `{{ value = \"…\" }}`",
                            names.map(|n| format!("`\"{n}\"`")).join(", ")
                        ),
                    );
                    None
                }
            },
            DeValue::Table(table) => {
                let at = format!(" in {what}");
                let mut value = None;
                let mut ok = true;
                for (k, v) in in_source_order(table) {
                    if k.get_ref() != "value" {
                        ok = false;
                        self.report(
                            Rule::UnknownKey,
                            k.span(),
                            format!("unknown key `{}`{at}", printable(k.get_ref())),
                            "a constant env value has one key: `{ value = \"…\" }`".into(),
                        );
                        continue;
                    }
                    value = self.string(v, &format!("{what}.value"));
                    ok &= value.is_some();
                }
                if !table.keys().any(|k| k.get_ref() == "value") {
                    self.report(
                        Rule::MissingKey,
                        val.span(),
                        format!("required key `value` is missing{at}"),
                        "write the constant as `{ value = \"…\" }`".into(),
                    );
                    return None;
                }
                let value = value.filter(|_| ok)?;
                let problem = if value.get_ref().is_empty() {
                    Some("is empty".to_string())
                } else if let Some(p) = forbidden_char_problem(value.get_ref()) {
                    Some(p)
                } else if value.get_ref().contains("${") {
                    Some("contains `${`, which Claude Code expands as a variable reference".into())
                } else {
                    None
                };
                if let Some(p) = problem {
                    self.report(
                        Rule::EnvConstant,
                        value.span(),
                        format!("the constant of `{what}` {p}"),
                        "write a non-empty, single-line value without `${`".into(),
                    );
                    return None;
                }
                Some(Spanned::new(
                    val.span(),
                    EnvSource::Constant(value.into_inner()),
                ))
            }
            _ => {
                self.wrong_type_as(val, what, EXPECTED);
                None
            }
        }
    }

    /// The `[[tools]]` tables. A top-level key found in one is added to `found_elsewhere`.
    fn tools(
        &mut self,
        v: &Spanned<DeValue<'_>>,
        found_elsewhere: &mut Vec<&'static str>,
    ) -> Option<Vec<RawTool>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(v, "tools", ValueKind::ToolArray);
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let DeValue::Table(table) = item.get_ref() else {
                self.wrong_type_as(item, &format!("tools[{i}]"), "a [[tools]] table");
                continue;
            };
            let at = format!(" in tools[{i}]");
            let mut tool = RawTool {
                index: i,
                name: None,
                unattended_safe: None,
            };
            let mut misspelled = Vec::new();
            for (k, val) in in_source_order(table) {
                let Some(key) = ToolKey::from_name(k.get_ref()) else {
                    match EntryKey::from_name(k.get_ref()) {
                        Some(key) => {
                            self.misplaced_key(Rule::UnknownKey, k, key, "[[tools]]");
                            found_elsewhere.push(key.name());
                        }
                        None => misspelled.extend(self.unknown_key::<ToolKey>(k, &at)),
                    }
                    continue;
                };
                match key {
                    ToolKey::Name => tool.name = self.tool_name(val, i, &out),
                    ToolKey::UnattendedSafe => {
                        tool.unattended_safe =
                            self.bool(val, &format!("tools[{i}].unattended_safe"))
                    }
                }
            }
            self.missing_keys::<ToolKey>(table, &misspelled, item.span(), &at);
            out.push(tool);
        }
        Some(out)
    }

    fn tool_name(
        &mut self,
        v: &Spanned<DeValue<'_>>,
        i: usize,
        earlier: &[RawTool],
    ) -> Option<Spanned<String>> {
        let name = self.string(v, &format!("tools[{i}].name"))?;
        if !is_tool_name(name.get_ref()) {
            self.report(
                Rule::ToolName,
                name.span(),
                format!(
                    "tool name `{}` does not match {TOOL_NAME_PATTERN}",
                    printable(name.get_ref())
                ),
                "use ASCII letters, digits, `_` and `-` only (OpenAI function names allow no `.`)"
                    .into(),
            );
            return None;
        }
        if earlier.iter().any(|t| {
            t.name
                .as_ref()
                .is_some_and(|n| n.get_ref() == name.get_ref())
        }) {
            self.report(
                Rule::ToolUnique,
                name.span(),
                format!("tool `{}` is listed twice", name.get_ref()),
                "remove the second `[[tools]]` table for it".into(),
            );
            return None;
        }
        Some(name)
    }
}

/// A table's entries in source order (the parser's map is sorted by key).
fn in_source_order<'t, 'i>(
    table: &'t DeTable<'i>,
) -> Vec<(&'t Spanned<Cow<'i, str>>, &'t Spanned<DeValue<'i>>)> {
    let mut items: Vec<_> = table.iter().collect();
    items.sort_by_key(|(k, _)| k.span().start);
    items
}

/// "a string", "an integer", "an array", …
fn article(type_name: &str) -> String {
    let a = if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{a} {type_name}")
}

/// The closest candidate to `name` by Jaro-Winkler similarity (at least 0.8), as clap does.
fn did_you_mean<'c>(name: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    candidates
        .map(|c| (strsim::jaro_winkler(name, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

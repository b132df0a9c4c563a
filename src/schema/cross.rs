//! The rules that relate a file's keys to each other and to its file name, one function per
//! rule.
//!
//! A rule that finds the root cause of later ones (the result channel made allowlistable, or
//! flow-starting) judges the rest as if its advice were taken, so its consequences are not
//! reported with advice that would be wrong once it is fixed. A rule never reads a key whose
//! value broke a per-key rule ([`RawEntry::broken`]).

use toml::Spanned;

use super::file::{FileCx, RawEntry};
use super::rules::{
    EntryKey, ID_PATTERN, MAX_QUALIFIED_TOOL_NAME_LEN, Rule, is_canonical_id, qualified_tool_name,
};
use crate::model::{
    ALIASING_CLIENTS, EnvSource, Inject, LAUNCH_ID_HEX_LEN, MAX_ID_LEN, RESULT_CHANNEL_ID,
};
use crate::text::printable;

/// The flags the cross-key rules read, with defaults filled in; `None` where the key is
/// broken (or, for the required `starts_flows`, absent).
struct Flags {
    starts_flows: Option<bool>,
    allowlistable: Option<bool>,
    read_only: Option<bool>,
    /// `Some(None)` when `inject` is absent; `None` when it is broken.
    inject: Option<Option<Inject>>,
}

impl Flags {
    fn of(raw: &RawEntry) -> Flags {
        let flag = |key: EntryKey, value: &Option<Spanned<bool>>, default: Option<bool>| {
            if raw.broken(key) {
                None
            } else {
                value.as_ref().map(|v| *v.get_ref()).or(default)
            }
        };
        Flags {
            starts_flows: flag(EntryKey::StartsFlows, &raw.starts_flows, None),
            allowlistable: flag(EntryKey::Allowlistable, &raw.allowlistable, Some(true)),
            read_only: flag(EntryKey::ReadOnly, &raw.read_only, Some(false)),
            inject: (!raw.broken(EntryKey::Inject))
                .then(|| raw.inject.as_ref().map(|i| *i.get_ref())),
        }
    }
}

/// Every cross-key rule, in the order their diagnostics are most useful.
pub(super) fn check(cx: &mut FileCx<'_>, raw: &RawEntry, stem: &str) {
    if let Some(id) = &raw.id {
        if id_canonical(cx, id, stem) {
            id_file_stem(cx, id, stem);
        }
    }
    let alias_ok = alias_format(cx, raw);
    let mut flags = Flags::of(raw);
    let is_result_channel = raw
        .id
        .as_ref()
        .is_some_and(|id| id.get_ref() == RESULT_CHANNEL_ID);
    if is_result_channel {
        result_channel_allowlistable(cx, raw, &mut flags);
        result_channel_starts_flows(cx, raw, &mut flags);
    }
    inject_scope(cx, raw, &mut flags);
    inject_always(cx, raw, &flags, is_result_channel);
    if !is_result_channel {
        injection_only_starts_flows(cx, raw, &flags);
    }
    agent_id_injection_only(cx, raw, &flags);
    env_source_scope(cx, raw, &flags);
    capability_url_server_url(cx, raw);
    borrowed_snapshot_server_url(cx, raw, &flags);
    registered_scope(cx, raw, &flags);
    driver_stamp_scope(cx, raw, &flags);
    starts_flows_read_only(cx, raw, &flags);
    unattended_safe(cx, raw, &flags);
    tool_name_length(cx, raw, alias_ok);
}

/// Rule `alias-format`; whether the entry's aliasing stem (its `alias`, or its id without
/// one) can be judged: the alias is canonical and shorter than a canonical id.
fn alias_format(cx: &mut FileCx<'_>, raw: &RawEntry) -> bool {
    let Some(alias) = &raw.alias else {
        return !raw.broken(EntryKey::Alias);
    };
    let a = alias.get_ref();
    if !is_canonical_id(a) {
        cx.report(
            Rule::AliasFormat,
            alias.span(),
            format!(
                "alias `{}` is not canonical ({ID_PATTERN}, at most {MAX_ID_LEN} bytes)",
                printable(a)
            ),
            "use lower-case ASCII letters, digits and `-`, starting with a letter and not ending with `-`, shorter than the id".into(),
        );
        return false;
    }
    let Some(id) = raw
        .id
        .as_ref()
        .map(|id| id.get_ref())
        .filter(|id| is_canonical_id(id))
    else {
        return false;
    };
    if a.len() >= id.len() {
        cx.report(
            Rule::AliasFormat,
            alias.span(),
            format!(
                "alias `{a}` is {} bytes, not shorter than the id `{id}` ({} bytes)",
                a.len(),
                id.len()
            ),
            "shorten the alias, or remove it: it only exists to shorten per-launch wire names"
                .into(),
        );
        return false;
    }
    true
}

/// Rule `id-canonical`; whether the id is canonical.
fn id_canonical(cx: &mut FileCx<'_>, id: &Spanned<String>, stem: &str) -> bool {
    let s = id.get_ref();
    if is_canonical_id(s) {
        return true;
    }
    let lower = s.trim().to_ascii_lowercase();
    let help = if !is_canonical_id(&lower) {
        format!(
            "use 2 to {MAX_ID_LEN} lower-case ASCII letters, digits and `-`, starting with a letter and not ending with `-`"
        )
    } else if lower == stem {
        format!("write it as `{lower}`")
    } else {
        format!("write it as `{lower}` (and name the file `{lower}.toml`)")
    };
    cx.report(
        Rule::IdCanonical,
        id.span(),
        format!(
            "id `{}` is not canonical ({ID_PATTERN}, at most {MAX_ID_LEN} bytes)",
            printable(s)
        ),
        help,
    );
    false
}

/// Rule `id-file-stem`, for a canonical id.
fn id_file_stem(cx: &mut FileCx<'_>, id: &Spanned<String>, stem: &str) {
    let s = id.get_ref();
    if s == stem {
        return;
    }
    cx.report(
        Rule::IdFileStem,
        id.span(),
        format!(
            "id `{s}` does not match the file name `{}.toml`",
            printable(stem)
        ),
        if is_canonical_id(stem) {
            format!("rename the file to `{s}.toml`, or set `id = \"{stem}\"`")
        } else {
            format!("rename the file to `{s}.toml`")
        },
    );
}

/// Rule `result-channel-allowlistable`. Later rules judge the entry as non-allowlistable.
fn result_channel_allowlistable(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &mut Flags) {
    if flags.allowlistable != Some(true) {
        return;
    }
    let span = match (&raw.allowlistable, &raw.id) {
        (Some(a), _) => a.span(),
        (None, Some(id)) => id.span(),
        (None, None) => 0..0,
    };
    let help = if raw.inject.is_none() && !raw.broken(EntryKey::Inject) {
        // Taking the advice makes the entry injection-only, which needs `inject` too.
        flags.inject = Some(Some(Inject::Always));
        "set `allowlistable = false` and `inject = \"always\"`: the launcher injects the result channel itself"
    } else {
        "set `allowlistable = false`: the launcher injects the result channel itself"
    };
    cx.report(
        Rule::ResultChannelAllowlistable,
        span,
        format!(
            "`{RESULT_CHANNEL_ID}` is the reserved result channel and must not be allowlistable"
        ),
        help.into(),
    );
    flags.allowlistable = Some(false);
}

/// Rule `inject-scope`: `inject` on exactly the injection-only entries. An allowlistable entry
/// with `inject` is judged by later rules as if `inject` were removed.
fn inject_scope(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &mut Flags) {
    match (flags.allowlistable, flags.inject) {
        (Some(true), Some(Some(inject))) => {
            let span = raw.inject.as_ref().map_or(0..0, Spanned::span);
            cx.report(
                Rule::InjectScope,
                span,
                format!(
                    "`inject = \"{}\"` is for injection-only entries, but this entry is allowlistable",
                    inject.name()
                ),
                "remove `inject`, or set `allowlistable = false` if only the launcher may inject this server".into(),
            );
            flags.inject = Some(None);
        }
        (Some(false), Some(None)) => {
            let span = raw.allowlistable.as_ref().map_or(0..0, Spanned::span);
            cx.report(
                Rule::InjectScope,
                span,
                "an injection-only entry (`allowlistable = false`) must say when it is injected".into(),
                "add `inject = \"borrowed-snapshot\"` (injected into borrowed-snapshot reviews only), or `inject = \"always\"` for the result channel".into(),
            );
        }
        _ => {}
    }
}

/// Rule `inject-always`: `inject = "always"` is the result channel's, and only its. Judged
/// only for a canonical id.
fn inject_always(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags, is_result_channel: bool) {
    let Some(Some(inject)) = flags.inject else {
        return;
    };
    // Which entry this is rests on its id: a missing or non-canonical one is the root cause.
    if !raw
        .id
        .as_ref()
        .is_some_and(|id| is_canonical_id(id.get_ref()))
    {
        return;
    }
    let span = raw.inject.as_ref().map_or(0..0, Spanned::span);
    match (inject, is_result_channel) {
        (Inject::Always, false) => cx.report(
            Rule::InjectAlways,
            span,
            format!(
                "only the result channel `{RESULT_CHANNEL_ID}` is injected into every reviewer"
            ),
            "use `inject = \"borrowed-snapshot\"`, or make the server allowlistable".into(),
        ),
        (Inject::BorrowedSnapshot, true) => cx.report(
            Rule::InjectAlways,
            span,
            format!("`{RESULT_CHANNEL_ID}` is injected into every reviewer"),
            "set `inject = \"always\"`".into(),
        ),
        _ => {}
    }
}

/// Rule `injection-only-starts-flows`, for entries other than the result channel (which has
/// rule `result-channel-starts-flows`).
fn injection_only_starts_flows(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    if flags.allowlistable != Some(false) {
        return;
    }
    let Some(s) = raw.starts_flows.as_ref().filter(|s| *s.get_ref()) else {
        return;
    };
    cx.report(
        Rule::InjectionOnlyStartsFlows,
        s.span(),
        "an injection-only entry must not start flows: the launcher injects it past the recursion guard".into(),
        "set `starts_flows = false`, or make the server allowlistable so the recursion guard applies".into(),
    );
}

/// Rule `env-source-scope`.
fn env_source_scope(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    let (Some(env), Some(inject)) = (&raw.env, flags.inject) else {
        return;
    };
    for (name, src) in env {
        let (needs, what) = match src.get_ref() {
            EnvSource::ResultCapabilityUrl => (Inject::Always, "the result capability URL"),
            EnvSource::ReviewContextUrl => (Inject::BorrowedSnapshot, "the review-context URL"),
            _ => continue,
        };
        if inject == Some(needs) {
            continue;
        }
        cx.report(
            Rule::EnvSourceScope,
            src.span(),
            format!(
                "`env.{name}` takes {what}, which only an `inject = \"{}\"` entry receives",
                needs.name()
            ),
            format!(
                "remove `env.{name}`: the launcher gives {what} to `inject = \"{}\"` servers only",
                needs.name()
            ),
        );
    }
}

/// Rule `capability-url-server-url` (not where part of `[env]` broke a rule: the variable
/// it asks for may be the broken one).
fn capability_url_server_url(cx: &mut FileCx<'_>, raw: &RawEntry) {
    let Some(env) = raw.env.as_ref().filter(|_| !raw.env_partial) else {
        return;
    };
    if env
        .iter()
        .any(|(_, s)| *s.get_ref() == EnvSource::ServerUrl)
    {
        return;
    }
    for (name, src) in env
        .iter()
        .filter(|(_, s)| *s.get_ref() == EnvSource::ResultCapabilityUrl)
    {
        cx.report(
            Rule::CapabilityUrlServerUrl,
            src.span(),
            format!(
                "`env.{name}` takes the result capability URL, but no env var takes `\"server_url\"`"
            ),
            "add `KCAP_URL = \"server_url\"`: a direct launch sets it instead of the capability URL".into(),
        );
    }
}

/// Rule `borrowed-snapshot-server-url`.
fn borrowed_snapshot_server_url(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    let (Some(env), Some(Some(Inject::BorrowedSnapshot))) = (&raw.env, flags.inject) else {
        return;
    };
    for (name, src) in env
        .iter()
        .filter(|(_, s)| *s.get_ref() == EnvSource::ServerUrl)
    {
        cx.report(
            Rule::BorrowedSnapshotServerUrl,
            src.span(),
            format!(
                "`env.{name}` takes the kcap server URL, but this entry is injected into borrowed-snapshot reviews"
            ),
            "remove it: a borrowed-snapshot server reaches kcap through its own `\"review_context_url\"` only".into(),
        );
    }
}

/// Rule `registered-scope`.
fn registered_scope(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    if flags.allowlistable != Some(false) {
        return;
    }
    let Some(r) = raw.registered.as_ref().filter(|r| *r.get_ref()) else {
        return;
    };
    cx.report(
        Rule::RegisteredScope,
        r.span(),
        "an injection-only entry cannot be `registered`: only the launcher may start it".into(),
        "remove `registered` (it defaults to false here)".into(),
    );
}

/// Rule `driver-stamp-scope`.
fn driver_stamp_scope(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    if flags.starts_flows != Some(false) {
        return;
    }
    let Some(d) = raw.driver_stamp.as_ref().filter(|d| *d.get_ref()) else {
        return;
    };
    cx.report(
        Rule::DriverStampScope,
        d.span(),
        "`driver_stamp` is for servers that start flows, and this one does not".into(),
        "remove `driver_stamp`: only a flow-starting server needs to know which client drives it"
            .into(),
    );
}

/// Rule `tool-name-length`, for a canonical id and each tool whose name is valid: the
/// Claude-style name `mcp__<id>__<tool>`, and, when `alias_ok`, the longest name each
/// aliasing client builds from the stem (the alias, or the id).
fn tool_name_length(cx: &mut FileCx<'_>, raw: &RawEntry, alias_ok: bool) {
    let Some(id) = raw
        .id
        .as_ref()
        .map(|id| id.get_ref())
        .filter(|id| is_canonical_id(id))
    else {
        return;
    };
    for tool in raw.tools.iter().flatten() {
        let Some(name) = &tool.name else {
            continue;
        };
        if alias_ok {
            aliased_tool_name_length(cx, raw, id, name);
        }
        let qualified = qualified_tool_name(id, name.get_ref());
        if qualified.len() <= MAX_QUALIFIED_TOOL_NAME_LEN {
            continue;
        }
        let room =
            MAX_QUALIFIED_TOOL_NAME_LEN.saturating_sub(qualified.len() - name.get_ref().len());
        cx.report(
            Rule::ToolNameLength,
            name.span(),
            format!(
                "the tool's qualified name `{qualified}` is {} bytes long, over the {MAX_QUALIFIED_TOOL_NAME_LEN} the model APIs allow",
                qualified.len()
            ),
            if room == 0 {
                format!("shorten the id `{id}`: with it no tool name fits")
            } else {
                format!("shorten the tool name to at most {room} bytes, or the id")
            },
        );
    }
}

/// Rule `tool-name-length` for the aliasing clients: `name` of the server `id` (aliased by
/// the entry's `alias`, if any) fits each client's limit with any launch id.
fn aliased_tool_name_length(cx: &mut FileCx<'_>, raw: &RawEntry, id: &str, name: &Spanned<String>) {
    let alias = raw.alias.as_ref().map(|a| a.get_ref().as_str());
    let stem = alias.unwrap_or(id);
    let tool = name.get_ref();
    for client in ALIASING_CLIENTS {
        let len = client.aliased_len(stem, tool);
        if len <= client.max_len {
            continue;
        }
        let example = client.qualified(&format!("{stem}-{}", "0".repeat(LAUNCH_ID_HEX_LEN)), tool);
        // The longest stem with which this tool fits, and the longest tool name with this stem.
        let room = client.max_len.saturating_sub(len - stem.len());
        let tool_room = client.max_len.saturating_sub(len - tool.len());
        let alias_fix = (room >= 2).then(|| {
            let what = if alias.is_some() {
                "shorten the alias"
            } else {
                "add an alias"
            };
            format!(
                "{what} (`alias = \"…\"`, the stem of per-launch wire names) of at most {room} bytes"
            )
        });
        // The simplest fix first: a shorter tool name, when one fits with this stem.
        let help = match (tool_room, alias_fix) {
            (0, Some(alias_fix)) => alias_fix,
            (0, None) => format!(
                "shorten the tool name to at most {} bytes and add a 2-byte alias",
                client.max_len - client.aliased_len("ab", "")
            ),
            (n, Some(alias_fix)) => {
                format!("shorten the tool name to at most {n} bytes, or {alias_fix}")
            }
            (n, None) => format!("shorten the tool name to at most {n} bytes"),
        };
        cx.report(
            Rule::ToolNameLength,
            name.span(),
            format!(
                "on client `{}`, the tool's qualified name `{example}` is {len} bytes long with any {LAUNCH_ID_HEX_LEN}-hex launch id, over the {} it passes on uncut",
                client.client, client.max_len
            ),
            help,
        );
    }
}

/// Rule `result-channel-starts-flows`. Later rules judge the entry as not starting flows.
fn result_channel_starts_flows(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &mut Flags) {
    let Some(s) = raw.starts_flows.as_ref().filter(|s| *s.get_ref()) else {
        return;
    };
    cx.report(
        Rule::ResultChannelStartsFlows,
        s.span(),
        format!("`{RESULT_CHANNEL_ID}` is injected into every reviewer and must not start flows"),
        "set `starts_flows = false`".into(),
    );
    flags.starts_flows = Some(false);
}

/// Rule `agent-id-injection-only`.
fn agent_id_injection_only(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    let (Some(env), Some(true)) = (&raw.env, flags.allowlistable) else {
        return;
    };
    for (name, src) in env
        .iter()
        .filter(|(_, s)| *s.get_ref() == EnvSource::AgentId)
    {
        cx.report(
            Rule::AgentIdInjectionOnly,
            src.span(),
            format!("`env.{name}` takes the agent id, but this entry is allowlistable"),
            "only `allowlistable = false` entries may receive the agent id: use `\"server_url\"` or set `allowlistable = false`".into(),
        );
    }
}

/// Rule `starts-flows-read-only`.
fn starts_flows_read_only(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    if flags.starts_flows != Some(true) {
        return;
    }
    let Some(r) = raw.read_only.as_ref().filter(|r| *r.get_ref()) else {
        return;
    };
    cx.report(
        Rule::StartsFlowsReadOnly,
        r.span(),
        "an entry with `starts_flows = true` cannot be `read_only`: starting a flow is a side effect".into(),
        "set `read_only = false` (or remove it)".into(),
    );
}

/// Rules `starts-flows-unattended-safe` and `unattended-safe-scope`, for each
/// `unattended_safe = true` tool.
fn unattended_safe(cx: &mut FileCx<'_>, raw: &RawEntry, flags: &Flags) {
    for tool in raw.tools.iter().flatten() {
        let Some(safe) = tool.unattended_safe.as_ref().filter(|s| *s.get_ref()) else {
            continue;
        };
        // A name that broke a rule is left out of its tool: the tool by its place then.
        let name = tool.name.as_ref().map_or_else(
            || format!("tools[{}]", tool.index),
            |n| format!("`{}`", printable(n.get_ref())),
        );
        match (flags.starts_flows, flags.allowlistable, flags.read_only) {
            (Some(true), _, _) => cx.report(
                Rule::StartsFlowsUnattendedSafe,
                safe.span(),
                format!("tool {name} is `unattended_safe`, but its server can start flows"),
                "set `unattended_safe = false`: starting flows always needs approval".into(),
            ),
            (Some(false), Some(true), Some(false)) => cx.report(
                Rule::UnattendedSafeScope,
                safe.span(),
                format!("tool {name} is `unattended_safe`, but its server is neither `read_only` nor injection-only"),
                "set `unattended_safe = false`, or mark the server `read_only = true` if every tool is side-effect free".into(),
            ),
            _ => {}
        }
    }
}

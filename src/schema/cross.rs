//! The rules that relate a file's keys to each other and to its file name, one function per
//! rule.
//!
//! A rule that finds the root cause of later ones (the result channel made allowlistable, or
//! flow-starting) judges the rest as if its advice were taken, so its consequences are not
//! reported with advice that would be wrong once it is fixed. A rule never reads a key whose
//! value broke a per-key rule ([`RawEntry::broken`]).

use toml::Spanned;

use super::file::{FileCx, RawEntry};
use super::rules::{EntryKey, ID_PATTERN, Rule, is_canonical_id};
use super::text::printable;
use crate::model::{EnvSource, MAX_ID_LEN, RESULT_CHANNEL_ID};

/// The flags the cross-key rules read, with defaults filled in; `None` where the key is
/// broken (or, for the required `starts_flows`, absent).
struct Flags {
    starts_flows: Option<bool>,
    allowlistable: Option<bool>,
    read_only: Option<bool>,
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
    let mut flags = Flags::of(raw);
    let is_result_channel = raw
        .id
        .as_ref()
        .is_some_and(|id| id.get_ref() == RESULT_CHANNEL_ID);
    if is_result_channel {
        result_channel_allowlistable(cx, raw, &mut flags);
        result_channel_starts_flows(cx, raw, &mut flags);
    }
    agent_id_injection_only(cx, raw, &flags);
    starts_flows_read_only(cx, raw, &flags);
    unattended_safe(cx, raw, &flags);
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
    cx.report(
        Rule::ResultChannelAllowlistable,
        span,
        format!(
            "`{RESULT_CHANNEL_ID}` is the reserved result channel and must not be allowlistable"
        ),
        "set `allowlistable = false`: the launcher injects the result channel itself".into(),
    );
    flags.allowlistable = Some(false);
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
        let name = tool.name.as_ref().map_or("?", |n| n.get_ref().as_str());
        match (flags.starts_flows, flags.allowlistable, flags.read_only) {
            (Some(true), _, _) => cx.report(
                Rule::StartsFlowsUnattendedSafe,
                safe.span(),
                format!("tool `{name}` is `unattended_safe`, but its server can start flows"),
                "set `unattended_safe = false`: starting flows always needs approval".into(),
            ),
            (Some(false), Some(true), Some(false)) => cx.report(
                Rule::UnattendedSafeScope,
                safe.span(),
                format!("tool `{name}` is `unattended_safe`, but its server is neither `read_only` nor injection-only"),
                "set `unattended_safe = false`, or mark the server `read_only = true` if every tool is side-effect free".into(),
            ),
            _ => {}
        }
    }
}

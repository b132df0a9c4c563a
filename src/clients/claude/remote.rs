//! Claude Code's remote managed settings: the policy an organization's administrator keeps
//! at Anthropic, which Claude Code fetches when it starts and applies above every other
//! setting. No file of the launch holds it and no variable turns it off, so a launch that
//! would fetch it is refused ([`preflight`]): one with a credential and the default API
//! endpoint. When Claude Code fetches them, what they did to a reviewer and the test that
//! shows it on each version (`tests/clients/remote_settings_claude.rs`):
//! `docs/isolation/claude.md`, "Configuration sources and how each is closed".

use crate::clients::{Client, LaunchContext, RenderError};

/// The host whose API Claude Code treats as first-party: a base URL naming it (or none)
/// fetches the remote managed settings.
pub const FIRST_PARTY_HOST: &str = "api.anthropic.com";

/// Where the settings come from, for the refusal.
pub const SOURCE: &str = "https://api.anthropic.com/api/claude_code/settings";

/// The credentials of [`super::CREDENTIALS`] with which Claude Code fetches the settings: an
/// API key or a sign-in (`ANTHROPIC_AUTH_TOKEN` counted too: over-refusing is the safe side).
const SIGN_INS: [&str; 3] = [
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// Refuses a launch that would make Claude Code fetch its remote managed settings: one that
/// hands over a credential and leaves the model API at the first-party endpoint
/// (`ANTHROPIC_BASE_URL` unset or at [`FIRST_PARTY_HOST`]). Behind the door
/// ([`LaunchContext::door`]) the base URL is the door's: nothing is fetched. A launch with no
/// credential has none to fetch with.
///
/// # Errors
/// [`RenderError::RemoteSettings`] naming [`SOURCE`] and the two ways out.
pub fn preflight(ctx: &LaunchContext) -> Result<(), RenderError> {
    if ctx.door {
        return Ok(());
    }
    let env = &ctx.credentials.env;
    let signed_in = env.iter().any(|v| SIGN_INS.contains(&v.name.as_str()))
        || ctx
            .credentials
            .files
            .iter()
            .any(|f| super::CREDENTIALS.files.iter().any(|s| s.name == f.name));
    let base = env.iter().find(|v| v.name == "ANTHROPIC_BASE_URL");
    if signed_in && base.is_none_or(|v| first_party(&v.value)) {
        return Err(RenderError::RemoteSettings {
            client: Client::Claude,
            source: SOURCE,
            fix: "put the reviewer behind the door (`LaunchRequest::door`, the CLI's \
                  `--door`, with `ANTHROPIC_BASE_URL` handed over): the key then stays outside \
                  it too",
        });
    }
    Ok(())
}

/// Whether Claude Code reads `base` as the first-party API: an empty value, or a URL whose
/// host (port included unless it is the scheme's default, as WHATWG `URL.host` gives it) is
/// [`FIRST_PARTY_HOST`]. A trailing dot and letter case are ignored here, where `URL.host`
/// keeps the dot: over-refusing is the safe side.
fn first_party(base: &str) -> bool {
    let base = base.trim();
    if base.is_empty() {
        return true;
    }
    let Some((scheme, rest)) = base.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match host_port.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => (h, p),
        _ => (host_port, ""),
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => "443",
        "http" => "80",
        _ => return false,
    };
    let port = port.trim_start_matches('0');
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == FIRST_PARTY_HOST && (port.is_empty() || port == default_port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::plan::EnvVar;
    use crate::clients::root::CredentialFile;

    #[test]
    fn first_party_is_the_default_endpoint_as_url_host_reads_it() {
        for base in [
            "",
            "https://api.anthropic.com",
            "https://api.anthropic.com/",
            "https://API.Anthropic.com:443/v1",
            "https://user@api.anthropic.com",
            "http://api.anthropic.com:80",
            "https://api.anthropic.com.",
        ] {
            assert!(first_party(base), "{base}");
        }
        for base in [
            "http://127.0.0.1:8080",
            "https://api.anthropic.com:8443",
            "https://gateway.example/api.anthropic.com",
            "https://api.anthropic.com.example",
            "api.anthropic.com",
        ] {
            assert!(!first_party(base), "{base}");
        }
    }

    #[test]
    fn a_credential_at_the_default_endpoint_is_refused_unless_behind_the_door() {
        let mut ctx = LaunchContext::default();
        assert_eq!(
            preflight(&ctx),
            Ok(()),
            "no credential, nothing to fetch with"
        );
        ctx.credentials.env = vec![EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy")];
        let e = preflight(&ctx).unwrap_err();
        assert!(matches!(e, RenderError::RemoteSettings { .. }), "{e:?}");
        assert!(e.to_string().contains(SOURCE), "{e}");
        ctx.credentials
            .env
            .push(EnvVar::new("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080"));
        assert_eq!(preflight(&ctx), Ok(()));
        ctx.credentials.env = vec![EnvVar::new("CLAUDE_CODE_OAUTH_TOKEN", "t")];
        assert!(preflight(&ctx).is_err());
        ctx.door = true;
        assert_eq!(preflight(&ctx), Ok(()));
        ctx.door = false;
        ctx.credentials.env.clear();
        ctx.credentials.files = vec![CredentialFile {
            name: ".credentials.json".into(),
            contents: "{}".into(),
        }];
        assert!(preflight(&ctx).is_err());
    }
}

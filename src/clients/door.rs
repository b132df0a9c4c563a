//! The reviewer's door as plan data: which endpoints a launch with
//! [`LaunchContext::door`] gets, and the launch values that name them.
//!
//! A client whose model API is known to go through the door declares a [`DoorSpec`] in its
//! room: the variable that points it at its model API and the variables that carry its key,
//! each with the request header the client sends it in (measured on the real client; the
//! room cites it). [`through`] turns a launch into the same launch behind the door:
//! - every URL the reviewer uses (the model API's base URL, the kcap server's, the capability
//!   and review-context URLs) is an `http://` or `https://` upstream; each `host:port` gets
//!   one endpoint, on a port of the reviewer's own `127.0.0.1` from [`DOOR_FIRST_PORT`] on,
//!   and the URL is rewritten to it, `http://` (path and query kept); the endpoint records
//!   the scheme ([`DoorScheme`]): to an `https://` upstream the door speaks TLS, checking its
//!   certificate, while the client speaks plain HTTP to the door inside the reviewer;
//! - the key the daemon handed over is replaced by a per-launch token in the client's
//!   environment, and the model API's endpoint sets the key on each request
//!   ([`DoorCredential`]): the key never enters the reviewer.
//!
//! A client whose key lives in a credential file (Codex CLI's `auth.json`) names the file and
//! field ([`DoorKeyFile`]): the field gets the token instead.
//!
//! What would enter the reviewer anyway is refused: a credential file that is not a key
//! file, a credential variable that is neither the key nor a setting, two keys at once.

use super::plan::{DoorCredential, DoorEndpoint, DoorPlan, DoorScheme, EnvVar, LaunchSecret};
use super::root::CredentialFile;
use super::{Client, LaunchContext, RenderError, ResultDelivery, Snapshot};

/// The first port of a door's endpoints inside the reviewer's network; the next ones follow.
/// Each reviewer has a network of its own, so the ports are fixed.
pub const DOOR_FIRST_PORT: u16 = 41001;

/// How a client's model API goes through the door: declared in its room, one per model API
/// (base-URL variable) the client can be pointed at
/// ([`ClientSpec::door`](super::spec::ClientSpec::door)).
#[derive(Clone, Copy, Debug)]
pub struct DoorSpec {
    /// The variable that sets the model API's base URL (`ANTHROPIC_BASE_URL`), one of the
    /// client's credential variables.
    pub base_url: &'static str,
    /// The variables that carry the model key, each with the header the client sends it in.
    pub keys: &'static [DoorKey],
    /// The credential files that carry the model key in a field (Codex CLI's `auth.json`),
    /// each with the header the client sends it in; empty for most clients.
    pub key_files: &'static [DoorKeyFile],
    /// The client's credential variables that are settings, not secrets (`IS_SANDBOX`): they
    /// may enter the reviewer.
    pub settings: &'static [&'static str],
}

/// A variable that carries the model key, and how the client sends it.
#[derive(Clone, Copy, Debug)]
pub struct DoorKey {
    /// The variable (`ANTHROPIC_API_KEY`).
    pub var: &'static str,
    /// The request header the client puts it in, lower-case (`x-api-key`).
    pub header: &'static str,
    /// What precedes the key in the header's value (`Bearer `, or nothing).
    pub prefix: &'static str,
}

/// A credential file that carries the model key in a top-level string field of its JSON
/// object: behind the door the field holds the per-launch token instead, and the file's
/// other fields are left to the room's reduction
/// ([`CredentialFileSpec::keep`](super::root::CredentialFileSpec::keep)).
#[derive(Clone, Copy, Debug)]
pub struct DoorKeyFile {
    /// The file's name as the daemon hands it over ([`CredentialFile::name`], `auth.json`).
    pub file: &'static str,
    /// The field (`OPENAI_API_KEY`).
    pub field: &'static str,
    /// The request header the client puts it in, lower-case (`authorization`).
    pub header: &'static str,
    /// What precedes the key in the header's value (`Bearer `, or nothing).
    pub prefix: &'static str,
}

/// The key files of `spec` among `files`: each rewritten with the token in its key field,
/// and the credential the door sets (`None` without a key file).
///
/// # Errors
/// [`RenderError::DoorCredential`] for a file that is not a key file, a key file that is not
/// a JSON object with the field as a non-empty string, or a second key file.
fn key_in_files(
    client: Client,
    spec: &DoorSpec,
    files: &[CredentialFile],
    token: &str,
) -> Result<(Option<DoorCredential>, Vec<CredentialFile>), RenderError> {
    let refuse = |name: &str, problem| RenderError::DoorCredential {
        client,
        name: name.to_owned(),
        problem,
    };
    let mut credential = None;
    let mut out = Vec::new();
    for file in files {
        let Some(k) = spec.key_files.iter().find(|k| k.file == file.name) else {
            return Err(refuse(
                &file.name,
                "is a credential file, which the client reads inside the reviewer",
            ));
        };
        let mut json: serde_json::Value =
            serde_json::from_str(&file.contents).map_err(|_| refuse(&file.name, "is not JSON"))?;
        let field = json
            .as_object_mut()
            .and_then(|o| o.get_mut(k.field))
            .filter(|v| v.as_str().is_some_and(|v| !v.trim().is_empty()))
            .ok_or_else(|| refuse(&file.name, "holds no model key where the door looks"))?;
        if credential.is_some() {
            return Err(refuse(
                &file.name,
                "is a second model key; the door sets one, hand over one",
            ));
        }
        credential = Some(DoorCredential {
            header: k.header.to_owned(),
            value: format!("{}{}", k.prefix, field.as_str().unwrap_or_default()),
        });
        *field = serde_json::Value::String(token.to_owned());
        out.push(CredentialFile {
            name: file.name.clone(),
            contents: json.to_string(),
        });
    }
    Ok((credential, out))
}

/// An `http://` or `https://` URL split: its scheme, its `host:port` (port 80, or 443 for
/// `https`, when none is given) and the rest from the first `/`, `?` or `#` on (possibly
/// empty). The scheme is matched as written, lower-case.
fn split_url(url: &str) -> Result<(DoorScheme, String, &str), &'static str> {
    let (scheme, rest, default) = if let Some(rest) = url.strip_prefix("http://") {
        (DoorScheme::Http, rest, 80)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (DoorScheme::Https, rest, 443)
    } else {
        return Err("is not an http:// or https:// URL");
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.contains('@') {
        return Err("holds a user name or password; give it without");
    }
    let port = |p: &str| match p.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err("has a port that is not a number from 1 to 65535"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (inner, after) = v6.split_once(']').ok_or("has a malformed host")?;
        let host = &authority[..inner.len() + 2];
        match after.strip_prefix(':') {
            None if after.is_empty() => (host, default),
            None => return Err("has a malformed host"),
            Some(p) => (host, port(p)?),
        }
    } else {
        match authority.split_once(':') {
            None => (authority, default),
            Some((host, p)) => (host, port(p)?),
        }
    };
    if host.is_empty() {
        return Err("names no host");
    }
    Ok((scheme, format!("{host}:{port}"), path))
}

/// The endpoints being built, and the launch values rewritten to them.
struct Builder {
    client: Client,
    endpoints: Vec<DoorEndpoint>,
}

impl Builder {
    /// `url` (the value of `field`) rewritten to the endpoint of its `host:port`, made when
    /// it is the first URL there.
    fn route(
        &mut self,
        field: &'static str,
        url: &str,
        serves: String,
        credential: Option<DoorCredential>,
    ) -> Result<String, RenderError> {
        let refuse = |problem| RenderError::DoorUpstream {
            client: self.client,
            field,
            url: url.to_owned(),
            problem,
        };
        let (scheme, upstream, rest) = split_url(url).map_err(refuse)?;
        let port = match self.endpoints.iter().find(|e| e.upstream == upstream) {
            Some(e) if e.scheme != scheme => {
                return Err(refuse(
                    "names the host and port of another URL with the other scheme (http and \
                     https); give one",
                ));
            }
            // The same upstream, and the same header set (or none) on its requests.
            Some(e) if e.credential == credential => e.port,
            Some(_) => {
                return Err(RenderError::DoorUpstream {
                    client: self.client,
                    field,
                    url: url.to_owned(),
                    problem: "is the model API's host and port: the door would set the model \
                              key on its requests; give the model API a host and port of its \
                              own",
                });
            }
            None => {
                // At most a handful of URLs: the ports stay far below u16::MAX.
                let port = DOOR_FIRST_PORT + u16::try_from(self.endpoints.len()).unwrap_or(0);
                self.endpoints.push(DoorEndpoint {
                    port,
                    upstream,
                    scheme,
                    serves,
                    credential,
                });
                port
            }
        };
        Ok(format!("http://127.0.0.1:{port}{rest}"))
    }
}

/// The [`DoorSpec`] of the model API `ctx` names: the one whose base-URL variable is among
/// the credentials (the first when none is, whose missing URL [`through`] then names).
///
/// # Errors
/// [`RenderError::DoorUnsupported`] for a client without a [`DoorSpec`];
/// [`RenderError::DoorCredential`] for the base URLs of two model APIs.
fn model_api(client: Client, ctx: &LaunchContext) -> Result<&'static DoorSpec, RenderError> {
    let specs = client.spec().door;
    let given = |s: &&DoorSpec| ctx.credentials.env.iter().any(|v| v.name == s.base_url);
    let mut named = specs.iter().filter(given);
    let first = named.next();
    if let Some(second) = named.next() {
        return Err(RenderError::DoorCredential {
            client,
            name: second.base_url.to_owned(),
            problem: "names a second model API; the door forwards to one, hand over one",
        });
    }
    first
        .or(specs.first())
        .ok_or(RenderError::DoorUnsupported { client })
}

/// `ctx` behind the door (the module docs): the launch values rewritten to the door's
/// endpoints, and the door. `token` stands in for the model key in the client's
/// environment.
///
/// # Errors
/// [`RenderError::DoorUnsupported`] for a client without a [`DoorSpec`];
/// [`RenderError::DoorCredential`] for a credential that would enter the reviewer (a file
/// that is not a key file, a secret variable that is not the key, two keys, the base URLs
/// of two model APIs); [`RenderError::DoorUpstream`] for a
/// URL that is neither `http://` nor `https://`, or no base URL at all.
pub fn through(
    client: Client,
    ctx: &LaunchContext,
    token: &LaunchSecret,
) -> Result<(LaunchContext, DoorPlan), RenderError> {
    let spec = model_api(client, ctx)?;
    let token_value = format!("kcap-door-{}", token.hex());
    let (file_credential, files) =
        key_in_files(client, spec, &ctx.credentials.files, &token_value)?;
    let mut b = Builder {
        client,
        endpoints: Vec::new(),
    };
    let mut out = ctx.clone();
    let given = |name: &str| ctx.credentials.env.iter().find(|v| v.name == name);
    let mut keys = spec.keys.iter().filter(|k| given(k.var).is_some());
    let key = keys.next();
    if let Some(second) = keys.next().or(key.filter(|_| file_credential.is_some())) {
        return Err(RenderError::DoorCredential {
            client,
            name: second.var.to_owned(),
            problem: "is a second model key; the door sets one, hand over one",
        });
    }
    for var in &ctx.credentials.env {
        let known = var.name == spec.base_url
            || spec.keys.iter().any(|k| k.var == var.name)
            || spec.settings.contains(&var.name.as_str());
        if !known {
            return Err(RenderError::DoorCredential {
                client,
                name: var.name.clone(),
                problem: "would enter the reviewer: the door keeps only the model key outside",
            });
        }
    }
    let base = given(spec.base_url).ok_or(RenderError::DoorUpstream {
        client,
        field: spec.base_url,
        url: String::new(),
        problem: "is not set: the door forwards to the model API the daemon names",
    })?;
    let credential = key
        .map(|k| DoorCredential {
            header: k.header.to_owned(),
            value: format!(
                "{}{}",
                k.prefix,
                given(k.var).map_or("", |v| v.value.as_str())
            ),
        })
        .or(file_credential);
    let serves = format!("model API ({})", spec.base_url);
    let door_base = b.route(spec.base_url, &base.value, serves, credential)?;
    out.credentials.env = ctx
        .credentials
        .env
        .iter()
        .map(|v| match v.name.as_str() {
            n if n == spec.base_url => EnvVar::new(n, door_base.clone()),
            n if key.is_some_and(|k| k.var == n) => EnvVar::new(n, token_value.clone()),
            _ => v.clone(),
        })
        .collect();
    out.credentials.files = files;
    if let Some(url) = super::non_blank(&ctx.server_url) {
        out.server_url =
            Some(b.route("server_url", url, "kcap server (server_url)".into(), None)?);
    }
    if let ResultDelivery::Brokered { capability_url } = &ctx.result_delivery {
        let serves = "result channel (result_capability_url)".to_owned();
        out.result_delivery = ResultDelivery::Brokered {
            capability_url: b.route("result_capability_url", capability_url, serves, None)?,
        };
    }
    if let Snapshot::Borrowed {
        review_context_url: Some(url),
    } = &ctx.snapshot
    {
        let serves = "review context (review_context_url)".to_owned();
        out.snapshot = Snapshot::Borrowed {
            review_context_url: Some(b.route("review_context_url", url, serves, None)?),
        };
    }
    Ok((
        out,
        DoorPlan {
            endpoints: b.endpoints,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::{DoorScheme, split_url};

    #[test]
    fn http_and_https_urls_split_into_scheme_upstream_and_rest() {
        fn ok(url: &str) -> (DoorScheme, String, &str) {
            split_url(url).unwrap()
        }
        let http = DoorScheme::Http;
        let https = DoorScheme::Https;
        assert_eq!(
            ok("http://127.0.0.1:5100/kcap"),
            (http, "127.0.0.1:5100".into(), "/kcap")
        );
        assert_eq!(
            ok("http://model.internal"),
            (http, "model.internal:80".into(), "")
        );
        assert_eq!(ok("http://h:8/a?b#c"), (http, "h:8".into(), "/a?b#c"));
        assert_eq!(ok("http://[::1]:9/x"), (http, "[::1]:9".into(), "/x"));
        assert_eq!(ok("http://[::1]/x"), (http, "[::1]:80".into(), "/x"));
        assert_eq!(
            ok("https://api.anthropic.com"),
            (https, "api.anthropic.com:443".into(), "")
        );
        assert_eq!(
            ok("https://generativelanguage.googleapis.com/v1beta?x"),
            (
                https,
                "generativelanguage.googleapis.com:443".into(),
                "/v1beta?x"
            )
        );
        assert_eq!(ok("https://h:8443/v1"), (https, "h:8443".into(), "/v1"));
        assert_eq!(ok("https://[::1]/v1"), (https, "[::1]:443".into(), "/v1"));
        for bad in [
            "ftp://h",
            "HTTPS://h",
            "http://",
            "https://",
            "http://:80",
            "http://u:p@h:80",
            "https://u@h",
            "http://h:0",
            "http://h:x",
            "http://h:70000",
            "http://[::1:80",
        ] {
            assert!(split_url(bad).is_err(), "{bad}");
        }
    }
}

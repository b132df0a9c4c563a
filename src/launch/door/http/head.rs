//! A request head (RFC 9112 sections 2 to 6), read and rewritten: the checks that make
//! the door frame a request as an upstream does ([`rewrite`]), the trailers it passes
//! ([`trailer`]), and what a credential's header may hold ([`valid_header`]). The refusals
//! and why each is there: the module docs of [`http`](super).

use crate::launch::door::Credential;

/// How a request's body is framed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body.
    None,
    /// `content-length` bytes.
    Length(u64),
    /// `transfer-encoding: chunked`.
    Chunked,
}

/// A request head as the door passes it on.
#[derive(Debug)]
pub(super) struct Head {
    pub(super) bytes: Vec<u8>,
    pub(super) framing: Framing,
    pub(super) upgrade: bool,
}

/// Whether `s` is a token (RFC 9110 section 5.6.2: one `tchar` or more).
fn is_token(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `name` can be a header's name and `value` its value (no control byte but tab).
pub(in crate::launch::door) fn valid_header(name: &str, value: &str) -> bool {
    is_token(name.as_bytes())
        && value
            .bytes()
            .all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// Whether `name` holds a `_` and is, with each `_` read as `-`, `host`, `content-length`,
/// `transfer-encoding` or `key_name`: an upstream behind CGI or WSGI, where both are `HTTP_…`,
/// takes `content_length` for the body's length, one the door does not frame by.
fn aliases(name: &[u8], key_name: &str) -> bool {
    if !name.contains(&b'_') {
        return false;
    }
    let dashed: Vec<u8> = name
        .iter()
        .map(|&b| if b == b'_' { b'-' } else { b })
        .collect();
    [
        &b"host"[..],
        b"content-length",
        b"transfer-encoding",
        key_name.as_bytes(),
    ]
    .iter()
    .any(|n| !n.is_empty() && dashed.eq_ignore_ascii_case(n))
}

/// Whether a `transfer-encoding` of `value` in a request of `version` ends with `chunked`,
/// in HTTP/1.1: in HTTP/1.0 a transfer coding is faulty framing (RFC 9112 section 6.1), and an
/// upstream that reads no chunked body there takes the body for its next request.
fn final_chunked(value: &[u8], version: &[u8]) -> bool {
    let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
    version == b"HTTP/1.1" && last.trim_ascii().eq_ignore_ascii_case(b"chunked")
}

/// Refuses a target that is not origin-form (`/…`, or `*` for `OPTIONS`), or that names
/// another host to an upstream resolving it as a URL against its own.
fn origin_form(method: &[u8], target: &[u8]) -> Result<(), &'static str> {
    // `//host/…` is a network-path reference to an upstream that resolves the target as a
    // URL against its own (WHATWG URL, `new URL(target, base)`): another host. So are
    // `/\host/…` and `/<tab>/host/…` there (the WHATWG parser reads `\` as `/` in an
    // `http` URL and drops every tab; Python's `urljoin` drops the tab): both passed the
    // door, and Node.js 20 resolved each to `http://host/…` (red team of stop 53). Neither
    // is a URI character (RFC 3986), so no client sends one unencoded.
    if !((target.starts_with(b"/") && !target.starts_with(b"//"))
        || (target == b"*" && method == b"OPTIONS"))
    {
        return Err("its target is not origin-form (`/…`): the door names the upstream");
    }
    if target.iter().any(|&b| b == b'\\' || b == b'\t') {
        return Err(
            "its target holds a `\\` or a tab (`/\\host/…` names another host to a URL parser)",
        );
    }
    Ok(())
}

/// `head` (up to and including its empty line) with `credential` set, if any: every header of
/// its name dropped, one added after the others; and its `host` the upstream's `authority`
/// (every `host` the client sent dropped, one added after the request line). Only an
/// origin-form target (`/…`, or `*` for `OPTIONS`) and no `CONNECT` or `TRACE`: an upstream
/// that is a proxy or routes by host sends a request on to the host its target or `host`
/// names, and `TRACE` answers with the head, the key in it (red team, issue 32).
pub(super) fn rewrite(
    head: &[u8],
    credential: Option<&Credential>,
    authority: &str,
) -> Result<Head, &'static str> {
    let (key_name, key_value) = credential.map_or(("", ""), |c| (&*c.header, &*c.value));
    // Each line with its CR, without its LF: the head without its empty line and last LF.
    let text = head
        .strip_suffix(b"\n\r\n")
        .filter(|t| t.ends_with(b"\r"))
        .ok_or("its head does not end with an empty line")?;
    if text
        .iter()
        .any(|&b| b.is_ascii_control() && !b"\t\r\n".contains(&b))
    {
        return Err("its head holds a control character");
    }
    let mut lines = text.split(|&b| b == b'\n');
    let request_line = lines.next().unwrap_or_default();
    let request_line = request_line
        .strip_suffix(b"\r")
        .filter(|l| !l.contains(&b'\r'))
        .ok_or("its request line does not end with CRLF")?;
    let parts: Vec<&[u8]> = request_line.split(|&b| b == b' ').collect();
    let [method, target, version] = parts[..] else {
        return Err("its request line is not `method target version`");
    };
    // A method or version with a tab in it is one word to the door and two to an upstream
    // that parses on white space (RFC 9112 section 3 allows it): `GET\thttp://h/ /x`.
    if !is_token(method) || !matches!(version, b"HTTP/1.1" | b"HTTP/1.0") {
        return Err("its method is not a token, or its version not HTTP/1.1 or HTTP/1.0");
    }
    if method.eq_ignore_ascii_case(b"CONNECT") || method.eq_ignore_ascii_case(b"TRACE") {
        return Err("its method is CONNECT or TRACE");
    }
    origin_form(method, target)?;
    let mut bytes = Vec::with_capacity(head.len() + key_value.len() + 64);
    for part in [request_line, b"\r\nhost: ", authority.as_bytes(), b"\r\n"] {
        bytes.extend_from_slice(part);
    }
    let (mut length, mut chunked, mut upgrade) = (None::<u64>, false, false);
    for line in lines {
        let line = line
            .strip_suffix(b"\r")
            .filter(|l| !l.contains(&b'\r'))
            .ok_or("a header line does not end with CRLF, or holds a CR")?;
        if line.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err("a header line is folded (obsolete line folding)");
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or("a header line has no colon")?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if !is_token(name) {
            return Err("a header name is not a token (or has white space before its colon)");
        }
        if aliases(name, key_name) {
            return Err("a header name with `_` is `host`, the framing's or the credential's");
        }
        if (credential.is_some() && name.eq_ignore_ascii_case(key_name.as_bytes()))
            || name.eq_ignore_ascii_case(b"host")
        {
            continue;
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or("its content-length is not a number")?;
            if length.is_some_and(|l| l != n) {
                return Err("it has two content-lengths that differ");
            }
            length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if chunked || !final_chunked(value, version) {
                return Err("its transfer coding is not one final `chunked`, or is in HTTP/1.0");
            }
            chunked = true;
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade = true;
        }
        bytes.extend_from_slice(line);
        bytes.extend_from_slice(b"\r\n");
    }
    let framing = match (length, chunked) {
        (Some(_), true) => return Err("it has both content-length and transfer-encoding"),
        (Some(n), false) => Framing::Length(n),
        (None, true) => Framing::Chunked,
        (None, false) => Framing::None,
    };
    if credential.is_some() {
        for part in [key_name.as_bytes(), b": ", key_value.as_bytes(), b"\r\n"] {
            bytes.extend_from_slice(part);
        }
    }
    bytes.extend_from_slice(b"\r\n");
    Ok(Head {
        bytes,
        framing,
        upgrade,
    })
}

/// Whether `line` (without its CRLF) is a trailer the door passes: `name: value`, the name a
/// token that is not `host`, `content-length`, `transfer-encoding` or `key_name` (nor one of
/// them with `_` for `-`).
pub(super) fn trailer(line: &[u8], key_name: &str) -> bool {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return false;
    };
    let name = &line[..colon];
    is_token(name)
        && !aliases(name, key_name)
        && ![
            &b"host"[..],
            b"content-length",
            b"transfer-encoding",
            key_name.as_bytes(),
        ]
        .iter()
        .any(|n| !n.is_empty() && name.eq_ignore_ascii_case(n))
}

//! Stand-in HTTP servers on 127.0.0.1 for `tests/clients/isolation_opencode.rs`: a model API that
//! calls the result tool, a recording proxy, a remote-configuration server. Each records every
//! request (method, path, headers, body).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::lab::{Lab, MODEL, RESULT_TOOL};

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    pub path: String,
    headers: Vec<(String, String)>,
    pub body: String,
}

impl Req {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// A header's value (name in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

type Answer = Arc<dyn Fn(&Req) -> Vec<u8> + Send + Sync>;

/// A recording HTTP server on a free loopback port.
pub struct Http {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Req>>>,
}

impl Http {
    fn start(answer: Answer) -> Http {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (log, answer) = (Arc::clone(&log), Arc::clone(&answer));
                std::thread::spawn(move || serve(stream, &log, &answer));
            }
        });
        Http { url, requests }
    }

    /// A recording proxy that refuses every request (`CONNECT` included) with 403.
    pub fn proxy() -> Http {
        Http::start(Arc::new(|_| response(403, "text/plain", b"no")))
    }

    pub fn requests(&self) -> Vec<Req> {
        self.requests.lock().unwrap().clone()
    }

    /// A stand-in Anthropic Messages API: a streamed `tool_use` of [`RESULT_TOOL`] when a
    /// request offers it and holds no tool result yet, else a streamed text turn.
    pub fn model() -> Http {
        Http::start(Arc::new(|req| {
            let body = req.json().unwrap_or_default();
            let offered = body["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == RESULT_TOOL));
            let answered = body.to_string().contains("\"tool_result\"");
            response(200, "text/event-stream", &turn(offered && !answered))
        }))
    }

    /// A remote-configuration server: `/.well-known/opencode` names a server and denies our
    /// result tool.
    pub fn config_server(lab: &Lab) -> Http {
        let config = json!({"config": {
            "mcp": {"wellknown": {"type": "local", "command": [lab.recorder(), "wellknown"], "enabled": true}},
            "permission": {RESULT_TOOL: "deny"},
        }})
        .to_string();
        Http::start(Arc::new(move |_| {
            response(200, "application/json", config.as_bytes())
        }))
    }
}

/// One streamed assistant turn: a call of [`RESULT_TOOL`], or the text `done`.
fn turn(call: bool) -> Vec<u8> {
    let (block, delta, stop) = if call {
        (
            json!({"type": "tool_use", "id": "toolu_01", "name": RESULT_TOOL, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": "{}"}),
            "tool_use",
        )
    } else {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "done"}),
            "end_turn",
        )
    };
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": MODEL, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect::<String>()
        .into_bytes()
}

fn response(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Reads requests from one connection (keep-alive included) until it closes or fails.
fn serve(stream: TcpStream, log: &Mutex<Vec<Req>>, answer: &Answer) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let Some((name, value)) = header.trim_end().split_once(':') else {
                break;
            };
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let mut req = Req {
            method,
            path,
            headers,
            body: String::new(),
        };
        let body = if req
            .header("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
        {
            read_chunked(&mut reader)
        } else {
            let mut body = vec![
                0;
                req.header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            ];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            body
        };
        req.body = String::from_utf8_lossy(&body).into_owned();
        let out = answer(&req);
        log.lock().unwrap().push(req);
        if writer.write_all(&out).is_err() {
            return;
        }
    }
}

/// A chunked body (RFC 9112 section 7.1), trailers skipped.
fn read_chunked(reader: &mut impl BufRead) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            return body;
        }
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        if size == 0 {
            let mut trailer = String::new();
            while reader.read_line(&mut trailer).unwrap_or(0) > 2 {
                trailer.clear();
            }
            return body;
        }
        let mut chunk = vec![0; size + 2];
        if reader.read_exact(&mut chunk).is_err() {
            return body;
        }
        chunk.truncate(size);
        body.extend(chunk);
    }
}

//! A stand-in model API on 127.0.0.1: it records every HTTP request a client sends (method,
//! path, body) and answers each with an HTTP 400 JSON error, so no prompt ever reaches a real
//! model and the test can read what the model would have been offered (the `tools` of the
//! first request). A WebSocket upgrade request (Codex CLI 0.169.0 opens its Responses API as
//! a WebSocket first) is answered `426 Upgrade Required`, on which Codex falls back to HTTP
//! at once and POSTs the request body (measured; a 400 there ends its turn instead). Offline by construction: it listens on the loopback interface only, on a
//! port the OS picks, and stops with the test process.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Each header as sent, name and value (trimmed), in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    /// The body as JSON, when it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The values of every header named `name` (case-insensitive), in order.
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// What the stand-in answers a request with: the status, the content type and the body;
/// `None` for its usual `400`.
pub type Answer = dyn Fn(&Request) -> Option<(u16, &'static str, Vec<u8>)> + Send + Sync;

/// The running stand-in.
pub struct ModelApi {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl ModelApi {
    /// Starts it on a free loopback port.
    pub fn start() -> ModelApi {
        ModelApi::scripted(Arc::new(|_| None))
    }

    /// Starts it on a free loopback port, answering each request as `answer` says.
    pub fn scripted(answer: Arc<Answer>) -> ModelApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&log);
                let answer = Arc::clone(&answer);
                std::thread::spawn(move || serve(stream, &log, &*answer));
            }
        });
        ModelApi { url, requests }
    }

    /// Every request recorded so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits up to `timeout` for a request whose body parses as JSON and satisfies `pred`.
    pub fn wait_for(&self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let start = Instant::now();
        loop {
            if let Some(v) = self.requests().iter().filter_map(Request::json).find(&pred) {
                return Some(v);
            }
            if start.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Reads requests from one connection (keep-alive included) until it closes or fails.
fn serve(stream: TcpStream, log: &Mutex<Vec<Request>>, answer: &Answer) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
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
        let (mut length, mut chunked, mut upgrade) = (0usize, false, false);
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                "upgrade" => upgrade = true,
                _ => {}
            }
        }
        let body = if chunked {
            read_chunked(&mut reader)
        } else {
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            body
        };
        let request = Request {
            method,
            path,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        let scripted = answer(&request);
        log.lock().unwrap().push(request);
        if let Some((status, content_type, body)) = scripted {
            let mut out = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            out.extend_from_slice(&body);
            if writer.write_all(&out).is_err() {
                return;
            }
            continue;
        }
        if upgrade {
            let refused = "HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n";
            if writer.write_all(refused.as_bytes()).is_err() {
                return;
            }
            continue;
        }
        let answer = r#"{"error":{"type":"invalid_request_error","message":"stand-in model API: no model here"}}"#;
        let response = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
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

/// One streamed Anthropic Messages API turn (server-sent events, as
/// <https://docs.anthropic.com/en/api/messages-streaming> describes them): a call of tool
/// `name` with `input` when given, else the text `done`.
pub fn anthropic_turn(tool: Option<(&str, &Value)>) -> Vec<u8> {
    use serde_json::json;
    let (block, delta, stop) = match tool {
        Some((name, input)) => (
            json!({"type": "tool_use", "id": "toolu_01", "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        ),
        None => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "done"}),
            "end_turn",
        ),
    };
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-stand-in", "content": [], "stop_reason": null, "stop_sequence": null,
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

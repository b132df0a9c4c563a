//! A stand-in model API on 127.0.0.1 that calls our result tool: it records every request
//! body, and answers `POST …/chat/completions` (OpenAI-compatible, streamed, as Copilot CLI's
//! provider client asks) with a call of the offered tool named `…-submit_review_result` on
//! the first turn, with plain text once a tool result came back, and 404 elsewhere. It shows
//! what the model was offered and that the result channel's tool runs when called.
//! (`common::model_api` answers every request with an error, so no tool is ever called.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// The running stand-in.
pub struct ToolModel {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
}

impl ToolModel {
    /// Starts it on a free loopback port.
    pub fn start() -> ToolModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&bodies);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&log);
                std::thread::spawn(move || serve(stream, &log));
            }
        });
        ToolModel { url, bodies }
    }

    /// The JSON bodies received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
}

/// One streamed chunk of a chat completion.
fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// The answer to a chat completion request `body`.
fn answer(body: &Value) -> String {
    let tool_came_back = body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let target = body["tools"].as_array().and_then(|tools| {
        tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .find(|n| n.ends_with("-submit_review_result"))
    });
    let mut s = match target {
        Some(name) if !tool_came_back => {
            let call = json!([{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": name, "arguments": "{}"}}]);
            chunk(json!({"role": "assistant", "tool_calls": call}), None)
                + &chunk(json!({}), Some("tool_calls"))
        }
        _ => {
            chunk(json!({"role": "assistant", "content": "done"}), None)
                + &chunk(json!({}), Some("stop"))
        }
    };
    s.push_str("data: [DONE]\n\n");
    s
}

/// Serves one connection (keep-alive included) until it closes or fails.
fn serve(stream: TcpStream, log: &Mutex<Vec<Value>>) {
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
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.trim().eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (status, kind, text) = if path.ends_with("/chat/completions") {
            ("200 OK", "text/event-stream", answer(&body))
        } else {
            ("404 Not Found", "application/json", "{}".to_owned())
        };
        log.lock().unwrap().push(body);
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

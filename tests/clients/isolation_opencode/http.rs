//! Stand-in HTTP servers on 127.0.0.1 for `tests/clients/isolation_opencode.rs`: a model API that
//! calls the result tool, a recording proxy, a remote-configuration server. Each records every
//! request (method, path, headers, body): `common::model_api`'s recording server, with these
//! answers.

use serde_json::json;

pub use crate::common::model_api::{ModelApi as Http, Request as Req};
use crate::common::model_api::{anthropic_turn, response};

use super::lab::{Lab, MODEL, RESULT_TOOL};

/// A recording proxy that refuses every request (`CONNECT` included) with 403.
pub fn proxy() -> Http {
    Http::answering(|_| response("403 Forbidden", "text/plain", b"no"))
}

/// A stand-in Anthropic Messages API: a streamed `tool_use` of [`RESULT_TOOL`] when a
/// request offers it and holds no tool result yet, else a streamed text turn.
pub fn model() -> Http {
    Http::answering(|req| {
        let body = req.json().unwrap_or_default();
        let offered = body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == RESULT_TOOL));
        let answered = body.to_string().contains("\"tool_result\"");
        response("200 OK", "text/event-stream", &turn(offered && !answered))
    })
}

/// A remote-configuration server: `/.well-known/opencode` names a server and denies our
/// result tool.
pub fn config_server(lab: &Lab) -> Http {
    let config = json!({"config": {
        "mcp": {"wellknown": {"type": "local", "command": [lab.recorder(), "wellknown"], "enabled": true}},
        "permission": {RESULT_TOOL: "deny"},
    }})
    .to_string();
    Http::answering(move |_| response("200 OK", "application/json", config.as_bytes()))
}

/// One streamed assistant turn: a call of [`RESULT_TOOL`], or the text `done`.
fn turn(call: bool) -> Vec<u8> {
    let input = json!({});
    anthropic_turn(MODEL, call.then_some((RESULT_TOOL, &input)))
}

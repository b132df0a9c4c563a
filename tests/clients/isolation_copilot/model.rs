//! A stand-in model API on 127.0.0.1 that calls our result tool: it records every request
//! body, and answers `POST …/chat/completions` (OpenAI-compatible, streamed, as Copilot CLI's
//! provider client asks) with a call of the offered tool named `…-submit_review_result` on
//! the first turn, with plain text once a tool result came back, and 404 elsewhere. It shows
//! what the model was offered and that the result channel's tool runs when called.
//! (`common::model_api`'s own answer is an error for every request, so no tool is ever called;
//! this is its recording server with an answer of its own.)

use serde_json::{Value, json};

use crate::common::model_api::{ModelApi, openai_chat_turn, response};

/// The running stand-in.
pub struct ToolModel(ModelApi);

impl ToolModel {
    /// Starts it on a free loopback port.
    pub fn start() -> ToolModel {
        ToolModel(ModelApi::answering(|request| {
            if request.path.ends_with("/chat/completions") {
                let body = request.json().unwrap_or(Value::Null);
                response("200 OK", "text/event-stream", &answer(&body))
            } else {
                response("404 Not Found", "application/json", b"{}")
            }
        }))
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<crate::common::model_api::Request> {
        self.0.requests()
    }

    /// The JSON bodies received so far (`null` for one that is not JSON).
    pub fn bodies(&self) -> Vec<Value> {
        self.0
            .requests()
            .iter()
            .map(|r| r.json().unwrap_or(Value::Null))
            .collect()
    }
}

/// The answer to a chat completion request `body`.
fn answer(body: &Value) -> Vec<u8> {
    let tool_came_back = body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let target = body["tools"].as_array().and_then(|tools| {
        tools
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .find(|n| n.ends_with("-submit_review_result"))
    });
    let args = json!({});
    openai_chat_turn(
        "gpt-4o",
        target.filter(|_| !tool_came_back).map(|name| (name, &args)),
    )
}

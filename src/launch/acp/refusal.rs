//! The answer to a client's `session/request_permission`: a refusal, by the request's own
//! reject option.

use serde_json::{Value, json};

/// The outcome refusing a permission request: its `reject_once` option, else its
/// `reject_always` one, else `cancelled`.
pub(super) fn refusal(params: &Value) -> Value {
    let options = params
        .get("options")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for kind in ["reject_once", "reject_always"] {
        let found = options
            .iter()
            .find(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .and_then(|o| o.get("optionId"));
        if let Some(option_id) = found {
            return json!({"outcome": "selected", "optionId": option_id});
        }
    }
    json!({"outcome": "cancelled"})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_request_is_refused_with_its_reject_option() {
        let params = json!({"options": [
            {"optionId": "proceed_once", "kind": "allow_once", "name": "Allow"},
            {"optionId": "no", "kind": "reject_always", "name": "Never"},
            {"optionId": "cancel", "kind": "reject_once", "name": "Reject"}
        ]});
        assert_eq!(
            refusal(&params),
            json!({"outcome": "selected", "optionId": "cancel"})
        );
        let params = json!({"options": [{"optionId": "a", "kind": "allow_once"}]});
        assert_eq!(refusal(&params), json!({"outcome": "cancelled"}));
        assert_eq!(refusal(&Value::Null), json!({"outcome": "cancelled"}));
    }
}

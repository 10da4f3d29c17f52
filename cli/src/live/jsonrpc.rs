//! JSON-RPC 2.0 messages: building ours, sorting the server's.

use mcp_hints::jsonrpc::{self, Carried, Member};
use rmcp::model::ErrorCode;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// `text` as much of it as an error quotes: cut as [`crate::text::shown`]
/// cuts (the `…` that marks a cut included, no more than it shows), so
/// that an excerpt is escaped there but not cut again.
pub(crate) fn excerpt(text: &str) -> String {
    crate::text::cut(text).into_owned()
}

/// A request with integer `id`; `params` omitted when `None`.
pub(crate) fn request(id: u64, method: &str, params: Option<Value>) -> Value {
    let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

/// A notification; `params` omitted when `None`.
pub(crate) fn notification(method: &str, params: Option<Value>) -> Value {
    let mut message = json!({ "jsonrpc": "2.0", "method": method });
    if let Some(params) = params {
        message["params"] = params;
    }
    message
}

/// The messages in what the server sent: the elements of a batch (JSON-RPC
/// arrays, allowed up to MCP 2025-03-26), else the one message.
pub(crate) fn batch(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => vec![other],
    }
}

/// What to do with one message from the server while waiting for the response
/// to request `our_id`.
#[derive(Debug)]
pub(crate) enum Step {
    /// The response to our request (the whole message); see [`outcome`].
    Done(Value),
    /// A request from the server: send this response back, keep waiting.
    Reply(Value),
    /// A notification, or a late response to an earlier request: keep waiting.
    Ignore,
    /// Not a JSON-RPC 2.0 message: the reason.
    Invalid(String),
}

/// Sort one message (see [`Step`]). With `answer_requests` (the
/// `initialize` revisions) the server's requests are answered: `ping` with
/// `{}`, anything else with -32601 method not found, since this client
/// offers no capabilities beyond what it declared and must not leave the
/// server waiting. Without it (2026-07-28, where a server must not send
/// requests and a client must not send responses) they are ignored.
pub(crate) fn step(message: &Value, our_id: u64, answer_requests: bool) -> Step {
    let Some(object) = message.as_object() else {
        return Step::Invalid(format!("expected a JSON object, got {}", kind(message)));
    };
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => {
            return Step::Invalid(format!("\"jsonrpc\" is {other}, expected \"2.0\""));
        }
        None => return Step::Invalid("no \"jsonrpc\": \"2.0\" member".to_owned()),
    }
    if let Some(method) = object.get("method") {
        let Some(method) = method.as_str() else {
            return Step::Invalid(format!("\"method\" is {}, expected a string", kind(method)));
        };
        return match object.get("id") {
            None | Some(Value::Null) => Step::Ignore,
            Some(Value::String(_) | Value::Number(_)) if !answer_requests => Step::Ignore,
            Some(id @ (Value::String(_) | Value::Number(_))) => Step::Reply(answer(id, method)),
            Some(id) => Step::Invalid(format!(
                "request id is {}, expected a string or a number",
                kind(id)
            )),
        };
    }
    // A parse error or an invalid request is reported with id null (or, by
    // servers that drop null members, none); the only request it can
    // concern is the one in flight.
    let Some(id) = object.get("id") else {
        if is_error(object) {
            return Step::Done(message.clone());
        }
        return Step::Invalid("neither \"method\" nor \"id\"".to_owned());
    };
    match id {
        Value::Number(n) if n.as_u64() == Some(our_id) => Step::Done(message.clone()),
        Value::Null if is_error(object) => Step::Done(message.clone()),
        Value::Number(n) if n.as_u64().is_some_and(|n| n >= 1 && n < our_id) => Step::Ignore,
        _ => Step::Invalid(format!(
            "response id {id} matches no request in flight (expected {our_id})"
        )),
    }
}

fn answer(id: &Value, method: &str) -> Value {
    if method == "ping" {
        json!({ "jsonrpc": "2.0", "id": id, "result": {} })
    } else {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": ErrorCode::METHOD_NOT_FOUND.0,
                "message": format!("Method not found: {method}"),
            },
        })
    }
}

/// A caller's own parser for the response it expects: given a message's
/// text, it returns true when it took the message as the response to the
/// request in flight (and kept what it needed of it), false to let the
/// message be sorted the usual way.
pub(crate) type Accept<'a> = &'a mut (dyn FnMut(&[u8]) -> bool + Send);

/// What [`step`] found, or the fast path: the raw `result` of our response.
#[derive(Debug)]
pub(crate) enum Response {
    /// The caller's [`Accept`] took the response.
    Accepted,
    /// The raw `result` object, taken without building a tree of it.
    Result(Box<RawValue>),
    /// The whole response message (see [`outcome`]).
    Message(Value),
}

/// The raw `result` when `text` is exactly a well-formed response to
/// `our_id` with an object result: `jsonrpc` "2.0", integer `id` `our_id`, no
/// `method`, no `error`. Anything else (a batch, a notification, an error, an
/// odd shape) gives `None`, and the caller sorts the message with [`step`],
/// which explains what is wrong. A `tools/list` page of thousands of tools
/// is then scanned, not built into a tree, which keeps audits of big servers
/// fast and small.
pub(crate) fn fast_result(text: &[u8], our_id: u64) -> Option<Box<RawValue>> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        jsonrpc: Option<&'a str>,
        id: Option<u64>,
        method: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
        #[serde(borrow)]
        result: Option<&'a RawValue>,
    }
    // `Option` reads `"error": null` as `None`: beside a result it is
    // absent, by the rule of `carried`.
    let envelope: Envelope<'_> = serde_json::from_slice(text).ok()?;
    let result = envelope.result?;
    let well_formed = envelope.jsonrpc == Some("2.0")
        && envelope.id == Some(our_id)
        && envelope.method.is_none()
        && envelope.error.is_none()
        && result.get().starts_with('{');
    well_formed.then(|| result.to_owned())
}

/// Why a response is not a result.
#[derive(Debug)]
pub(crate) enum Failure {
    /// An error response: `code`, `message`, `data`.
    Rpc(i64, String, Option<Value>),
    /// Not a valid response: the reason.
    Invalid(String),
}

/// The raw `result` object of a response, or why there is none.
pub(crate) fn outcome(response: Response) -> Result<Box<RawValue>, Failure> {
    match response {
        Response::Accepted => Err(Failure::Invalid(
            "the response was taken by the caller's parser".to_owned(),
        )),
        Response::Result(raw) => Ok(raw),
        Response::Message(message) => outcome_of_message(message).and_then(|result| {
            serde_json::value::to_raw_value(&result)
                .map_err(|error| Failure::Invalid(error.to_string()))
        }),
    }
}

/// The `result` object of a whole response message ([`Step::Done`]), or why
/// there is none.
fn outcome_of_message(response: Value) -> Result<Value, Failure> {
    let Value::Object(mut object) = response else {
        return Err(Failure::Invalid("the response is not an object".to_owned()));
    };
    let (result, error) = (object.remove("result"), object.remove("error"));
    match carried(result.as_ref(), error.as_ref()) {
        Carried::Both => Err(Failure::Invalid(
            "the response has both \"result\" and \"error\"".to_owned(),
        )),
        Carried::Result => match result.unwrap_or_default() {
            result @ Value::Object(_) => Ok(result),
            result => Err(Failure::Invalid(format!(
                "\"result\" is {}, expected an object: {}",
                kind(&result),
                excerpt(&result.to_string())
            ))),
        },
        Carried::Error => match error.unwrap_or_default() {
            Value::Object(error) => Err(rpc_failure(error)),
            error => Err(Failure::Invalid(format!(
                "\"error\" is {}, expected an object: {}",
                kind(&error),
                excerpt(&error.to_string())
            ))),
        },
        Carried::Neither => Err(Failure::Invalid(
            "the response has neither \"result\" nor \"error\"".to_owned(),
        )),
    }
}

/// Which of `result` and `error` a response with these members carries:
/// the rule saved pages are read by too (`"error": null` beside a result
/// is absent).
fn carried(result: Option<&Value>, error: Option<&Value>) -> Carried {
    jsonrpc::carried(Member::of(result), Member::of(error))
}

/// Whether `object`, a message without `method`, is an error response.
pub(crate) fn is_error(object: &Map<String, Value>) -> bool {
    carried(object.get("result"), object.get("error")) == Carried::Error
}

fn rpc_failure(mut error: Map<String, Value>) -> Failure {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = match error.remove("message") {
        Some(Value::String(message)) => message,
        Some(other) => other.to_string(),
        None => String::new(),
    };
    Failure::Rpc(code, message, error.remove("data"))
}

/// `an object`, `a string`, … for messages about a JSON value.
pub(crate) use mcp_hints::hints::json_type as kind;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_messages() {
        let step = |message: Value, our_id| step(&message, our_id, true);
        assert!(matches!(
            step(json!({"jsonrpc": "2.0", "id": 3, "result": {}}), 3),
            Step::Done(_)
        ));
        assert!(matches!(
            step(json!({"jsonrpc": "2.0", "id": 2, "result": {}}), 3),
            Step::Ignore
        ));
        assert!(matches!(
            step(json!({"jsonrpc": "2.0", "id": "3", "result": {}}), 3),
            Step::Invalid(_)
        ));
        assert!(matches!(
            step(
                json!({"jsonrpc": "2.0", "method": "notifications/message"}),
                3
            ),
            Step::Ignore
        ));
        let Step::Reply(reply) = step(json!({"jsonrpc": "2.0", "id": "a", "method": "ping"}), 3)
        else {
            panic!("ping is answered")
        };
        assert_eq!(reply, json!({"jsonrpc": "2.0", "id": "a", "result": {}}));
        let Step::Reply(reply) = step(
            json!({"jsonrpc": "2.0", "id": 7, "method": "roots/list"}),
            3,
        ) else {
            panic!("requests are answered")
        };
        assert_eq!(reply["error"]["code"], -32601);
        assert!(matches!(
            step(json!({"id": 3, "result": {}}), 3),
            Step::Invalid(_)
        ));
        assert!(matches!(step(json!([1]), 3), Step::Invalid(_)));
        for error in [
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
            json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}),
        ] {
            assert!(matches!(step(error, 3), Step::Done(_)));
        }
        assert!(matches!(
            step(json!({"jsonrpc": "2.0", "result": {}}), 3),
            Step::Invalid(_)
        ));
        // An `"error": null` beside a result makes no error response: with
        // id null it answers no request.
        for result in [
            json!({"jsonrpc": "2.0", "id": null, "result": {}, "error": null}),
            json!({"jsonrpc": "2.0", "result": {}, "error": null}),
        ] {
            assert!(matches!(step(result, 3), Step::Invalid(_)));
        }
    }

    #[test]
    fn a_2026_07_28_session_answers_no_server_request() {
        for request in [
            json!({"jsonrpc": "2.0", "id": "a", "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 7, "method": "roots/list"}),
        ] {
            assert!(matches!(super::step(&request, 3, false), Step::Ignore));
        }
    }

    #[test]
    fn the_fast_path_takes_only_a_plain_response_to_our_request() {
        let line = br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#;
        assert_eq!(fast_result(line, 3).unwrap().get(), r#"{"tools":[]}"#);
        let null_error = br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]},"error":null}"#;
        assert_eq!(fast_result(null_error, 3).unwrap().get(), r#"{"tools":[]}"#);
        for other in [
            &br#"{"jsonrpc":"2.0","id":4,"result":{"tools":[]}}"#[..],
            br#"{"jsonrpc":"1.0","id":3,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":"3","result":{}}"#,
            br#"{"jsonrpc":"2.0","id":3,"result":[]}"#,
            br#"{"jsonrpc":"2.0","id":3,"result":{},"error":{}}"#,
            br#"[{"jsonrpc":"2.0","id":3,"result":{}}]"#,
            b"not json",
        ] {
            assert!(
                fast_result(other, 3).is_none(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }

    #[test]
    fn outcomes() {
        let message = |value| outcome(Response::Message(value));
        assert_eq!(
            message(json!({"jsonrpc": "2.0", "id": 1, "result": {"a": 1}}))
                .unwrap()
                .get(),
            r#"{"a":1}"#
        );
        assert!(matches!(
            message(json!({"jsonrpc": "2.0", "id": 1, "result": []})),
            Err(Failure::Invalid(_))
        ));
        assert!(matches!(
            message(json!({"jsonrpc": "2.0", "id": 1})),
            Err(Failure::Invalid(_))
        ));
        // A null beside the other member is absent (as in saved pages).
        assert_eq!(
            message(json!({"jsonrpc": "2.0", "id": 1, "result": {"a": 1}, "error": null}))
                .unwrap()
                .get(),
            r#"{"a":1}"#
        );
        assert!(matches!(
            message(json!({"jsonrpc": "2.0", "id": 1, "result": null,
                "error": {"code": -32602, "message": "bad"}})),
            Err(Failure::Rpc(-32602, _, None))
        ));
        for invalid in [
            json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}),
            json!({"jsonrpc": "2.0", "id": 1, "error": null}),
            json!({"jsonrpc": "2.0", "id": 1, "result": null, "error": null}),
        ] {
            assert!(
                matches!(message(invalid.clone()), Err(Failure::Invalid(_))),
                "{invalid}"
            );
        }
        let Err(Failure::Rpc(code, message, data)) = message(
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad", "data": 5}}),
        ) else {
            panic!("an error response")
        };
        assert_eq!(
            (code, message.as_str(), data),
            (-32602, "bad", Some(json!(5)))
        );
    }

    #[test]
    fn excerpts_are_cut_on_char_boundaries() {
        let long = "é".repeat(300);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), crate::text::MAX_SHOWN);
        assert!(cut.ends_with('…'));
        assert_eq!(excerpt("short"), "short");
    }
}

//! One message's bytes in, a verdict out: the rules both guards share.
//!
//! Order of the checks, each answering the first defect it finds:
//!
//! 1. nesting deeper than the limit: -32700, no id (the text was not parsed);
//! 2. not JSON (syntax, invalid UTF-8, a lone surrogate escape): -32700, no id;
//! 3. not an object: -32600, no id;
//! 4. by its members, a request (`method` and `id`), a notification
//!    (`method`, no `id`), a response (`result` or `error`, no `method`), or
//!    none of these (-32600);
//! 5. a request: its id, `jsonrpc`, `method`, `params`, then the minimal
//!    `tools/call` shape; a notification or a response with a defect is
//!    dropped, never answered.
//!
//! Then the caller turns the value into rmcp's message type and calls
//! [`settle`], which refuses what rmcp would misread.

use rmcp::model::{
    CallToolRequestMethod, CancelTaskMethod, ClientJsonRpcMessage, ClientRequest,
    CompleteRequestMethod, ConstString, DiscoverRequestMethod, GetPromptRequestMethod,
    GetSkillRequestMethod, GetTaskMethod, InitializeResultMethod, ListPromptsRequestMethod,
    ListResourceTemplatesRequestMethod, ListResourcesRequestMethod, ListSkillsRequestMethod,
    ListToolsRequestMethod, PingRequestMethod, ReadResourceDirectoryRequestMethod,
    ReadResourceRequestMethod, RequestId, SetLevelRequestMethod, SubscribeRequestMethod,
    SubscriptionsListenRequestMethod, UnsubscribeRequestMethod, UpdateTaskMethod,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::hints::json_type;

/// JSON-RPC 2.0 §5.1: "Invalid JSON was received by the server."
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0 §5.1: "The JSON sent is not a valid Request object."
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC 2.0 §5.1: "Invalid method parameter(s)."
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// Peer text quoted in a message is cut to this many characters.
const SHOWN_CHARS: usize = 64;

/// The requests rmcp's `ClientRequest` models, by method. A request for one
/// of these whose `params` do not fit becomes rmcp's `CustomRequest`, which
/// rmcp's handler answers -32601 (Method not found) naming the method.
const TYPED_METHODS: &[&str] = &[
    PingRequestMethod::VALUE,
    InitializeResultMethod::VALUE,
    DiscoverRequestMethod::VALUE,
    CompleteRequestMethod::VALUE,
    SetLevelRequestMethod::VALUE,
    GetPromptRequestMethod::VALUE,
    ListPromptsRequestMethod::VALUE,
    ListResourcesRequestMethod::VALUE,
    ListResourceTemplatesRequestMethod::VALUE,
    ReadResourceRequestMethod::VALUE,
    SubscriptionsListenRequestMethod::VALUE,
    SubscribeRequestMethod::VALUE,
    UnsubscribeRequestMethod::VALUE,
    CallToolRequestMethod::VALUE,
    ListToolsRequestMethod::VALUE,
    GetTaskMethod::VALUE,
    UpdateTaskMethod::VALUE,
    CancelTaskMethod::VALUE,
    ListSkillsRequestMethod::VALUE,
    GetSkillRequestMethod::VALUE,
    ReadResourceDirectoryRequestMethod::VALUE,
];

/// A JSON-RPC error response the guard writes itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// The request's id as the peer wrote it; `None` when it could not be
    /// read, and then the response has no `id` member (MCP 2025-11-25 and
    /// 2026-07-28: "except in error cases where the ID could not be read").
    pub(crate) id: Option<Value>,
    pub(crate) code: i64,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self {
            id: None,
            code: PARSE_ERROR,
            message: format!("Parse error: {detail}"),
        }
    }

    pub(crate) fn invalid_request(id: Option<Value>, detail: impl std::fmt::Display) -> Self {
        Self {
            id,
            code: INVALID_REQUEST,
            message: format!("Invalid Request: {detail}"),
        }
    }

    pub(crate) fn invalid_params(id: Option<Value>, detail: impl std::fmt::Display) -> Self {
        Self {
            id,
            code: INVALID_PARAMS,
            message: format!("Invalid params: {detail}"),
        }
    }

    /// The error response as JSON text, without a newline.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Body<'a> {
            code: i64,
            message: &'a str,
        }
        #[derive(Serialize)]
        struct Response<'a> {
            jsonrpc: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<&'a Value>,
            error: Body<'a>,
        }
        serde_json::to_vec(&Response {
            jsonrpc: "2.0",
            id: self.id.as_ref(),
            error: Body {
                code: self.code,
                message: &self.message,
            },
        })
        .expect("an error response of strings and numbers serializes")
    }
}

/// What a message is, once its envelope is known to be sound.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Request {
        /// The id as rmcp reads it (`1` and `1.0` are the same id).
        id: RequestId,
        /// The id as the peer wrote it, for our own answers.
        raw_id: Value,
        method: String,
    },
    Notification,
    Response,
}

/// The outcome of [`check`].
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Sound so far: the parsed message and what it is.
    Pass { value: Value, kind: Kind },
    /// Answer with this error; rmcp never sees the message.
    Refuse(Refusal),
    /// A malformed notification or response: JSON-RPC 2.0 §4.1 forbids
    /// answering a notification, and a response is never answered. The text
    /// says why, for the log.
    Drop(String),
}

/// Checks one message: `bytes` is the whole message (a line without its
/// newline, or an HTTP body); `max_depth` bounds the nesting of arrays and
/// objects, the message object itself counting 1.
pub(crate) fn check(bytes: &[u8], max_depth: usize) -> Verdict {
    if let Some(defect) = scan(bytes, max_depth) {
        return Verdict::Refuse(Refusal::parse_error(defect));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    // `scan` bounded the depth already, so the parser cannot
    // exhaust the stack; serde_json's own limit would refuse depth 128.
    deserializer.disable_recursion_limit();
    let parsed = Value::deserialize(&mut deserializer).and_then(|value| {
        deserializer.end()?;
        Ok(value)
    });
    match parsed {
        Ok(value) => classify(value),
        Err(error) => Verdict::Refuse(Refusal::parse_error(error)),
    }
}

/// What the parser would misreport or must not see: nesting deeper than
/// `max_depth` (counting brackets outside strings), or a `\u` escape of a
/// lone UTF-16 surrogate (serde_json reports `"\ud800"` as "unexpected end
/// of hex escape"). Text that is not JSON may scan wrongly; the parser
/// refuses it anyway.
fn scan(bytes: &[u8], max_depth: usize) -> Option<String> {
    let hex = |at: usize| -> Option<u16> {
        let digits = std::str::from_utf8(bytes.get(at..at + 4)?).ok()?;
        u16::from_str_radix(digits, 16).ok()
    };
    let (mut depth, mut in_string, mut at) = (0usize, false, 0usize);
    while at < bytes.len() {
        let byte = bytes[at];
        at += 1;
        if in_string {
            match byte {
                b'"' => in_string = false,
                b'\\' if bytes.get(at) == Some(&b'u') => {
                    let escape = at - 1;
                    let Some(unit) = hex(at + 1) else { continue };
                    at += 5;
                    let lone = match unit {
                        0xD800..=0xDBFF => {
                            let low = (bytes.get(at..at + 2) == Some(&b"\\u"[..]))
                                .then(|| hex(at + 2))
                                .flatten();
                            match low {
                                Some(0xDC00..=0xDFFF) => {
                                    at += 6;
                                    false
                                }
                                _ => true,
                            }
                        }
                        0xDC00..=0xDFFF => true,
                        _ => false,
                    };
                    if lone {
                        return Some(format!(
                            "lone surrogate \\u{unit:04x} at byte {}: a string escape must be valid Unicode",
                            escape + 1
                        ));
                    }
                }
                b'\\' => at += 1,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Some(format!(
                        "nesting deeper than {max_depth} arrays and objects"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

fn classify(value: Value) -> Verdict {
    let Value::Object(object) = value else {
        let what = match &value {
            Value::Array(_) => "an array (a JSON-RPC batch, which MCP does not use)",
            other => json_type(other),
        };
        return Verdict::Refuse(Refusal::invalid_request(
            None,
            format!("a message must be a JSON object, not {what}"),
        ));
    };
    let has = |member| object.contains_key(member);
    let answers = has("result") || has("error");
    match (has("method"), has("id")) {
        (true, true) => request(object),
        (true, false) => notification(object),
        (false, _) if answers => response(object),
        (false, true) => {
            let raw_id = &object["id"];
            let id = readable_id(raw_id).map(|_| raw_id.clone());
            Verdict::Refuse(Refusal::invalid_request(id, "the request has no `method`"))
        }
        (false, false) => Verdict::Refuse(Refusal::invalid_request(
            None,
            "not a request, a notification or a response: no `method`, `result` or `error`",
        )),
    }
}

/// The id a peer can correlate our answer with: a string, or a number that
/// may not be an id rmcp accepts (`1.5`) but is still the peer's own.
fn readable_id(raw_id: &Value) -> Option<&Value> {
    matches!(raw_id, Value::String(_) | Value::Number(_)).then_some(raw_id)
}

fn request(object: Map<String, Value>) -> Verdict {
    let raw_id = object["id"].clone();
    let Ok(id) = serde_json::from_value::<RequestId>(raw_id.clone()) else {
        let refusal = match readable_id(&raw_id) {
            Some(_) => Refusal::invalid_request(
                Some(raw_id.clone()),
                format!(
                    "request id {} is not a string or an integer of at most 64 bits",
                    shown_value(&raw_id)
                ),
            ),
            None => Refusal::invalid_request(
                None,
                format!(
                    "a request id must be a string or an integer, not {}",
                    json_type(&raw_id)
                ),
            ),
        };
        return Verdict::Refuse(refusal);
    };
    let refuse =
        |detail: String| Verdict::Refuse(Refusal::invalid_request(Some(raw_id.clone()), detail));
    if let Some(defect) = version_defect(&object) {
        return refuse(defect);
    }
    let method = match object.get("method") {
        Some(Value::String(method)) => method.clone(),
        Some(other) => {
            return refuse(format!(
                "`method` must be a string, not {}",
                json_type(other)
            ));
        }
        None => unreachable!("classify saw `method`"),
    };
    if object.contains_key("result") || object.contains_key("error") {
        return refuse("a request has no `result` or `error`".to_owned());
    }
    match object.get("params") {
        // JSON-RPC 2.0 §4.2 allows an array; every MCP request takes an
        // object, so an array is the wrong params, not the wrong envelope.
        Some(Value::Array(_)) => {
            return Verdict::Refuse(Refusal::invalid_params(
                Some(raw_id),
                format!(
                    "`params` of {} must be an object, not an array",
                    shown(&method)
                ),
            ));
        }
        // rmcp reads `"params": null` as absent; so do we.
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(other) => {
            return refuse(format!(
                "`params` must be an object, not {}",
                json_type(other)
            ));
        }
    }
    if method == CallToolRequestMethod::VALUE
        && let Some(defect) = tool_call_defect(object.get("params"))
    {
        return Verdict::Refuse(Refusal::invalid_params(Some(raw_id), defect));
    }
    Verdict::Pass {
        value: Value::Object(object),
        kind: Kind::Request { id, raw_id, method },
    }
}

/// `jsonrpc` must be exactly "2.0" (JSON-RPC 2.0 §4).
fn version_defect(object: &Map<String, Value>) -> Option<String> {
    match object.get("jsonrpc") {
        Some(Value::String(version)) if version == "2.0" => None,
        Some(other) => Some(format!(
            "`jsonrpc` must be \"2.0\", not {}",
            shown_value(other)
        )),
        None => Some("no `jsonrpc`; it must be \"2.0\"".to_owned()),
    }
}

/// The minimal shape of `tools/call` params (MCP `CallToolRequestParams`):
/// an object with a string `name` and, if present, an object `arguments`.
fn tool_call_defect(params: Option<&Value>) -> Option<String> {
    let Some(Value::Object(params)) = params else {
        return Some("tools/call needs `params`, an object with the tool's `name`".to_owned());
    };
    match params.get("name") {
        Some(Value::String(_)) => {}
        Some(other) => {
            return Some(format!(
                "`name` of tools/call must be a string, not {}",
                json_type(other)
            ));
        }
        None => return Some("tools/call needs `name`, the tool to call".to_owned()),
    }
    match params.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => None,
        Some(other) => Some(format!(
            "`arguments` of tools/call must be an object, not {}",
            json_type(other)
        )),
    }
}

fn notification(object: Map<String, Value>) -> Verdict {
    if let Some(defect) = version_defect(&object) {
        return Verdict::Drop(format!("notification: {defect}"));
    }
    match object.get("method") {
        Some(Value::String(_)) => {}
        Some(other) => {
            return Verdict::Drop(format!("notification: `method` is {}", json_type(other)));
        }
        None => unreachable!("classify saw `method`"),
    }
    match object.get("params") {
        None | Some(Value::Null | Value::Object(_)) => Verdict::Pass {
            value: Value::Object(object),
            kind: Kind::Notification,
        },
        Some(other) => Verdict::Drop(format!("notification: `params` is {}", json_type(other))),
    }
}

fn response(object: Map<String, Value>) -> Verdict {
    if let Some(defect) = version_defect(&object) {
        return Verdict::Drop(format!("response: {defect}"));
    }
    if object.contains_key("result") && object.contains_key("error") {
        return Verdict::Drop("response with both `result` and `error`".to_owned());
    }
    Verdict::Pass {
        value: Value::Object(object),
        kind: Kind::Response,
    }
}

/// The last word on a message that passed [`check`], given rmcp's reading
/// of it (`parsed`): the message to hand on, or the refusal or drop.
///
/// A request rmcp cannot read is -32600 with its id; a request for a method
/// rmcp models whose `params` do not fit (rmcp falls back to a custom
/// request and answers -32601) is -32602 with its id.
pub(crate) fn settle(
    parsed: Result<ClientJsonRpcMessage, serde_json::Error>,
    kind: &Kind,
) -> Result<ClientJsonRpcMessage, Verdict> {
    let Kind::Request { raw_id, method, .. } = kind else {
        let what = match kind {
            Kind::Notification => "notification",
            _ => "response",
        };
        return parsed.map_err(|error| Verdict::Drop(format!("{what}: {error}")));
    };
    let message = parsed
        .map_err(|error| Verdict::Refuse(Refusal::invalid_request(Some(raw_id.clone()), error)))?;
    if let ClientJsonRpcMessage::Request(request) = &message
        && matches!(request.request, ClientRequest::CustomRequest(_))
        && TYPED_METHODS.contains(&method.as_str())
    {
        return Err(Verdict::Refuse(Refusal::invalid_params(
            Some(raw_id.clone()),
            format!("`params` do not fit {}", shown(method)),
        )));
    }
    Ok(message)
}

/// Peer text for a message: quoted, escaped, and cut to [`SHOWN_CHARS`].
pub(crate) fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// A JSON value for a message: strings as [`shown`], the rest as JSON cut
/// to [`SHOWN_CHARS`].
pub(crate) fn shown_value(value: &Value) -> String {
    match value {
        Value::String(text) => shown(text),
        other => {
            let text = other.to_string();
            match text.char_indices().nth(SHOWN_CHARS) {
                Some((end, _)) => format!("{}…", &text[..end]),
                None => text,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(line: &str) -> Refusal {
        match check(line.as_bytes(), 128) {
            Verdict::Refuse(refusal) => refusal,
            other => panic!("{line}: expected a refusal, got {other:?}"),
        }
    }

    fn answer(line: &str) -> Value {
        serde_json::from_slice(&refusal(line).to_json()).unwrap()
    }

    fn nested(depth: usize) -> String {
        // The message object is level 1 and `params` level 2.
        let arrays = depth - 2;
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{}{}}}}}"#,
            "[".repeat(arrays),
            "]".repeat(arrays)
        )
    }

    #[test]
    fn depth_128_passes_and_129_is_a_parse_error() {
        assert!(matches!(
            check(nested(128).as_bytes(), 128),
            Verdict::Pass { .. }
        ));
        assert_eq!(
            answer(&nested(129)),
            json!({"jsonrpc": "2.0", "error": {"code": -32700,
                "message": "Parse error: nesting deeper than 128 arrays and objects"}})
        );
    }

    #[test]
    fn brackets_inside_strings_do_not_count() {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}\"{}"}}}}"#,
            "[".repeat(300),
            "{".repeat(300)
        );
        assert!(matches!(check(line.as_bytes(), 128), Verdict::Pass { .. }));
    }

    #[test]
    fn a_lone_surrogate_is_a_parse_error_and_a_pair_is_not() {
        let lone = r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"t":"\ud800"}}"#;
        assert_eq!(
            refusal(lone),
            Refusal {
                id: None,
                code: PARSE_ERROR,
                message: "Parse error: lone surrogate \\ud800 at byte 56: a string escape \
                          must be valid Unicode"
                    .to_owned(),
            }
        );
        let trailing = r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"t":"a\udc00"}}"#;
        assert_eq!(refusal(trailing).code, PARSE_ERROR);
        let pair = r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"t":"\ud83d\ude00\\u"}}"#;
        assert!(matches!(check(pair.as_bytes(), 128), Verdict::Pass { .. }));
    }

    #[test]
    fn envelope_errors_carry_the_id() {
        assert_eq!(
            answer(r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#),
            json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32600,
                "message": "Invalid Request: `jsonrpc` must be \"2.0\", not \"1.0\""}})
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":"x","method":5}"#),
            json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -32600,
                "message": "Invalid Request: `method` must be a string, not a number"}})
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            json!({"jsonrpc": "2.0", "id": 1.5, "error": {"code": -32600,
                "message": "Invalid Request: request id 1.5 is not a string or an integer of at most 64 bits"}})
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            json!({"jsonrpc": "2.0", "error": {"code": -32600,
                "message": "Invalid Request: a request id must be a string or an integer, not null"}})
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":"x"}"#),
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32600,
                "message": "Invalid Request: `params` must be an object, not a string"}})
        );
        assert_eq!(
            answer(r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#),
            json!({"jsonrpc": "2.0", "error": {"code": -32600,
                "message": "Invalid Request: a message must be a JSON object, not an array (a JSON-RPC batch, which MCP does not use)"}})
        );
    }

    #[test]
    fn tool_call_params_are_checked() {
        let cases = [
            (
                r#"["x"]"#,
                "`params` of \"tools/call\" must be an object, not an array",
            ),
            (
                r#"{"arguments":{}}"#,
                "tools/call needs `name`, the tool to call",
            ),
            (
                r#"{"name":7}"#,
                "`name` of tools/call must be a string, not a number",
            ),
            (
                r#"{"name":"list_notes","arguments":"x"}"#,
                "`arguments` of tools/call must be an object, not a string",
            ),
        ];
        for (params, detail) in cases {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{params}}}"#);
            assert_eq!(
                refusal(&line),
                Refusal::invalid_params(Some(json!(8)), detail),
                "{params}"
            );
        }
        let absent = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call"}"#;
        assert_eq!(refusal(absent).code, INVALID_PARAMS);
        let fine = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","arguments":null}}"#;
        assert!(matches!(check(fine.as_bytes(), 128), Verdict::Pass { .. }));
    }

    #[test]
    fn malformed_notifications_and_responses_are_dropped() {
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}"#,
            r#"{"jsonrpc":"1.0","method":"notifications/cancelled"}"#,
            r#"{"method":5}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
        ] {
            assert!(
                matches!(check(line.as_bytes(), 128), Verdict::Drop(_)),
                "{line}"
            );
        }
    }

    #[test]
    fn a_typed_method_whose_params_do_not_fit_is_invalid_params() {
        let line =
            r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":5}}"#;
        let Verdict::Pass { value, kind } = check(line.as_bytes(), 128) else {
            panic!("the envelope is sound");
        };
        let Err(Verdict::Refuse(refusal)) = settle(serde_json::from_value(value), &kind) else {
            panic!("rmcp reads it as a custom request");
        };
        assert_eq!(
            refusal,
            Refusal::invalid_params(Some(json!(4)), "`params` do not fit \"initialize\"")
        );
        // A method rmcp does not model stays rmcp's to answer (-32601).
        let custom = r#"{"jsonrpc":"2.0","id":4,"method":"x/y","params":{}}"#;
        let Verdict::Pass { value, kind } = check(custom.as_bytes(), 128) else {
            panic!("the envelope is sound");
        };
        assert!(settle(serde_json::from_value(value), &kind).is_ok());
    }

    #[test]
    fn every_typed_method_reads_as_its_own_request() {
        // A well-formed `tools/list` is not a custom request: the table
        // names methods rmcp really models.
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let message: ClientJsonRpcMessage = serde_json::from_str(line).unwrap();
        let ClientJsonRpcMessage::Request(request) = message else {
            panic!("a request");
        };
        assert!(!matches!(request.request, ClientRequest::CustomRequest(_)));
        assert_eq!(TYPED_METHODS.len(), 21);
    }

    #[test]
    fn peer_text_is_quoted_and_cut() {
        assert_eq!(shown("a\nb"), "\"a\\nb\"");
        assert_eq!(shown(&"x".repeat(100)), format!("{:?}…", "x".repeat(64)));
    }
}

//! One message's bytes in, a verdict out: the rules both guards share.
//!
//! Order of the checks, each answering the first defect it finds:
//!
//! 0. one leading UTF-8 byte order mark is ignored ([`json_text`]; both
//!    transports call it, so a BOM is read the same way everywhere);
//! 1. nesting deeper than the limit: -32700, no id (the text was not parsed);
//! 2. not JSON (syntax, invalid UTF-8, a lone surrogate escape): -32700, no id;
//! 3. not an object: -32600, no id;
//! 4. by its members, a request (`method` and `id`), a notification
//!    (`method`, no `id`), a response (`result` or `error`, no `method`), or
//!    none of these (-32600);
//! 5. a member of the message object named twice: a request (or a message
//!    that is none of the three) is -32600, with its id when the id is not
//!    itself the member repeated with another value; a notification or a
//!    response is dropped;
//! 6. a request: its id, `jsonrpc`, `method`, `params`, then the minimal
//!    `tools/call` shape; a notification or a response with a defect is
//!    dropped, never answered.
//!
//! The id in every answer the guard writes is the id's JSON text exactly as
//! the peer sent it ([`RawId`]), never a re-serialization of its value.
//!
//! Then the caller reads the message as rmcp's type ([`read`]) and calls
//! [`settle`], which refuses what rmcp would misread.

use mcp_hints_core::escape;
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CancelTaskMethod, ClientJsonRpcMessage, ClientRequest,
    CompleteRequestMethod, ConstString, DiscoverRequestMethod, ErrorCode, GetPromptRequestMethod,
    GetSkillRequestMethod, GetTaskMethod, InitializeResultMethod, JsonRpcRequest,
    ListPromptsRequestMethod, ListResourceTemplatesRequestMethod, ListResourcesRequestMethod,
    ListSkillsRequestMethod, ListToolsRequestMethod, PingRequestMethod,
    ReadResourceDirectoryRequestMethod, ReadResourceRequestMethod, RequestId,
    SetLevelRequestMethod, SubscribeRequestMethod, SubscriptionsListenRequestMethod,
    UnsubscribeRequestMethod, UpdateTaskMethod,
};
use serde::de::{DeserializeOwned, Deserializer as _, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::map::Entry;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::hints::json_type;

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

/// A request id's JSON text exactly as the peer sent it (`1.50`, `1e2`,
/// `"a\u0062"`), for the guard's own answers: JSON-RPC 2.0 §5 says the
/// response id "MUST be the same as the value of the id member in the
/// Request Object", and a number re-serialized from a float (`1e20` for
/// `100000000000000000000`) is not.
#[derive(Debug, Clone)]
pub(crate) struct RawId(Box<RawValue>);

impl RawId {
    /// The id's text, as sent.
    pub(crate) fn text(&self) -> &str {
        self.0.get()
    }

    /// `text` as an id; `None` when it is not one JSON value.
    #[cfg(test)]
    pub(crate) fn parse(text: &str) -> Option<Self> {
        RawValue::from_string(text.to_owned()).ok().map(Self)
    }
}

impl PartialEq for RawId {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

/// A JSON-RPC error response the guard writes itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    /// The request's id as the peer wrote it; `None` when it could not be
    /// read, and then the response has no `id` member (MCP 2025-11-25 and
    /// 2026-07-28: "except in error cases where the ID could not be read").
    pub(crate) id: Option<RawId>,
    /// JSON-RPC 2.0 §5.1: -32700 (Parse error), -32600 (Invalid Request)
    /// or -32602 (Invalid params).
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self {
            id: None,
            code: ErrorCode::PARSE_ERROR,
            message: format!("Parse error: {detail}"),
        }
    }

    pub(crate) fn invalid_request(id: Option<RawId>, detail: impl std::fmt::Display) -> Self {
        Self {
            id,
            code: ErrorCode::INVALID_REQUEST,
            message: format!("Invalid Request: {detail}"),
        }
    }

    pub(crate) fn invalid_params(id: Option<RawId>, detail: impl std::fmt::Display) -> Self {
        Self {
            id,
            code: ErrorCode::INVALID_PARAMS,
            message: format!("Invalid params: {detail}"),
        }
    }

    /// The error response as JSON text, without a newline; the id is
    /// written verbatim.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Body<'a> {
            code: i32,
            message: &'a str,
        }
        #[derive(Serialize)]
        struct Response<'a> {
            jsonrpc: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<&'a RawValue>,
            error: Body<'a>,
        }
        serde_json::to_vec(&Response {
            jsonrpc: "2.0",
            id: self.id.as_ref().map(|id| &*id.0),
            error: Body {
                code: self.code.0,
                message: &self.message,
            },
        })
        .expect("an error response of strings, numbers and JSON text serializes")
    }
}

/// What a message is, once its envelope is known to be sound.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    Request {
        /// The id as rmcp reads it: an integer in plain decimal, which rmcp
        /// writes back byte for byte, or a string, which it writes back as
        /// the same string (its escapes re-serialized).
        id: RequestId,
        /// The id as the peer wrote it, for our own answers.
        raw_id: RawId,
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

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The JSON text of one message: `bytes` without one leading UTF-8 byte
/// order mark. RFC 8259 §8.1: JSON text "MUST NOT" begin with one, but a
/// parser "MAY ignore" it; rmcp's stdio transport ignores it, so both
/// guards do, and the HTTP guard hands rmcp the body without it. A second
/// BOM is not ignored (it is a parse error).
pub(crate) fn json_text(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// Whether `byte` is whitespace to JSON: space, tab, line feed or carriage
/// return (RFC 8259 §2), and nothing else: not a form feed or a vertical
/// tab, which `u8::is_ascii_whitespace` counts.
pub(crate) fn is_json_whitespace(byte: &u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// Checks one message: `bytes` is the whole message's JSON text (a line
/// without its newline, or an HTTP body, after [`json_text`]); `max_depth`
/// bounds the nesting of arrays and objects, the message object itself
/// counting 1.
pub(crate) fn check(bytes: &[u8], max_depth: usize) -> Verdict {
    if let Some(defect) = scan(bytes, max_depth) {
        return Verdict::Refuse(Refusal::parse_error(defect));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    // `scan` bounded the depth already, so the parser cannot
    // exhaust the stack; serde_json's own limit would refuse depth 128.
    deserializer.disable_recursion_limit();
    let object = bytes
        .iter()
        .find(|byte| !is_json_whitespace(byte))
        .is_some_and(|byte| *byte == b'{');
    let parsed = if object {
        // One pass: the members as values, and the id's text as sent.
        (&mut deserializer).deserialize_map(EnvelopeVisitor).map(Ok)
    } else {
        Value::deserialize(&mut deserializer).map(Err)
    };
    let parsed = parsed.and_then(|parsed| {
        deserializer.end()?;
        Ok(parsed)
    });
    match parsed {
        Ok(Ok(envelope)) => classify(envelope),
        Ok(Err(value)) => not_an_object(&value),
        Err(error) => Verdict::Refuse(Refusal::parse_error(error)),
    }
}

/// The message object, read in one pass by [`EnvelopeVisitor`].
struct Envelope {
    /// The members; of a member named twice, the last value.
    object: Map<String, Value>,
    /// The text of the first `id` member; `None` without one, or when `id`
    /// is named twice with different texts (then no id can be read).
    raw_id: Option<RawId>,
    /// The first member named more than once.
    repeated: Option<String>,
}

/// Reads the message object: each member's value as a [`Value`] (the same
/// work as parsing the whole object to one), the `id` member's text kept
/// verbatim, and a member named twice noted (serde_json's `Value` would keep
/// the last silently, and rmcp's typed parse refuses it).
struct EnvelopeVisitor;

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Envelope, A::Error> {
        let mut object = Map::new();
        let mut raw_id: Option<RawId> = None;
        let mut ambiguous_id = false;
        let mut repeated: Option<String> = None;
        while let Some(name) = members.next_key::<String>()? {
            let value = if name == "id" {
                let raw: &'de RawValue = members.next_value()?;
                match &raw_id {
                    None if !ambiguous_id => raw_id = Some(RawId(raw.to_owned())),
                    Some(first) if first.text() == raw.get() => {}
                    _ => {
                        raw_id = None;
                        ambiguous_id = true;
                    }
                }
                id_value(raw.get()).map_err(serde::de::Error::custom)?
            } else {
                members.next_value::<Value>()?
            };
            match object.entry(name) {
                Entry::Vacant(entry) => {
                    entry.insert(value);
                }
                Entry::Occupied(mut entry) => {
                    if repeated.is_none() {
                        repeated = Some(entry.key().clone());
                    }
                    entry.insert(value);
                }
            }
        }
        Ok(Envelope {
            object,
            raw_id,
            repeated,
        })
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

fn not_an_object(value: &Value) -> Verdict {
    let what = match value {
        Value::Array(_) => "an array (a JSON-RPC batch, which MCP does not use)",
        other => json_type(other),
    };
    Verdict::Refuse(Refusal::invalid_request(
        None,
        format!("a message must be a JSON object, not {what}"),
    ))
}

fn classify(envelope: Envelope) -> Verdict {
    let object = &envelope.object;
    let has = |member| object.contains_key(member);
    let answers = has("result") || has("error");
    let (method, id) = (has("method"), has("id"));
    if let Some(name) = &envelope.repeated {
        // RFC 8259 §4: names "SHOULD be unique", or what a receiver reads
        // is unpredictable (serde_json keeps the last, rmcp's typed parse
        // refuses): refused, on every transport alike.
        let detail = format!("member {} appears more than once", escape::quoted(name));
        return match (method, id) {
            (true, false) => Verdict::Drop(format!("notification: {detail}")),
            (false, _) if answers => Verdict::Drop(format!("response: {detail}")),
            _ => Verdict::Refuse(Refusal::invalid_request(readable_id(&envelope), detail)),
        };
    }
    match (method, id) {
        (true, true) => request(envelope),
        (true, false) => notification(envelope.object),
        (false, _) if answers => response(envelope.object),
        (false, true) => Verdict::Refuse(Refusal::invalid_request(
            readable_id(&envelope),
            "the request has no `method`",
        )),
        (false, false) => Verdict::Refuse(Refusal::invalid_request(
            None,
            "not a request, a notification or a response: no `method`, `result` or `error`",
        )),
    }
}

/// The value of an id's JSON text; an integer, the usual id, without a
/// second parser.
fn id_value(text: &str) -> serde_json::Result<Value> {
    if let Ok(id) = text.parse::<i64>() {
        return Ok(Value::from(id));
    }
    let mut id = serde_json::Deserializer::from_str(text);
    id.disable_recursion_limit();
    Value::deserialize(&mut id)
}

/// The id a peer can correlate our answer with, as it wrote it: a string,
/// or a number that may not be an id rmcp accepts (`1.5`) but is still the
/// peer's own. `None` for any other id, or an `id` named twice with
/// different values.
fn readable_id(envelope: &Envelope) -> Option<RawId> {
    let readable = matches!(
        envelope.object.get("id"),
        Some(Value::String(_) | Value::Number(_))
    );
    envelope.raw_id.clone().filter(|_| readable)
}

/// The id rmcp carries for `value`, when rmcp writes it back exactly as
/// `raw` was sent: any string, and an integer of `i64` in plain decimal.
/// rmcp reads `1.0`, `1e2` and `-0` as integers and would answer `1`,
/// `100` and `0`; it refuses a fraction (`1.5`) and an integer beyond
/// `i64` (`100000000000000000000`, which serde_json reads as a float).
fn exact_id(value: &Value, raw: &RawId) -> Option<RequestId> {
    match value {
        Value::String(id) => Some(RequestId::String(id.as_str().into())),
        Value::Number(number) => {
            // serde_json reads plain decimal within `i64` as an `i64`; text in
            // any other form is not what rmcp would write back.
            let text = raw.text();
            let digits = text.strip_prefix('-').unwrap_or(text);
            let plain = !digits.is_empty()
                && digits.bytes().all(|byte| byte.is_ascii_digit())
                && text != "-0";
            number.as_i64().filter(|_| plain).map(RequestId::Number)
        }
        _ => None,
    }
}

fn request(envelope: Envelope) -> Verdict {
    let raw_id = readable_id(&envelope);
    let object = envelope.object;
    let id = raw_id.as_ref().and_then(|raw| exact_id(&object["id"], raw));
    let (Some(id), Some(raw_id)) = (id, raw_id.clone()) else {
        let refusal = match raw_id {
            Some(raw_id) => {
                let detail = format!(
                    "request id {} is not a string or a 64-bit integer in plain decimal \
                     (no fraction, exponent or -0)",
                    shown_raw(&raw_id)
                );
                Refusal::invalid_request(Some(raw_id), detail)
            }
            None => Refusal::invalid_request(
                None,
                format!(
                    "a request id must be a string or an integer, not {}",
                    json_type(&object["id"])
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
                    escape::quoted(&method)
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

/// Where [`read`] reads a message that passed [`check`] from: its JSON
/// text (`&[u8]`, as rmcp's streamable HTTP service reads a body), or the
/// value [`check`] made of it (`&Value`).
pub(crate) trait Source: Copy {
    /// `T`, read from this source.
    fn read<T: DeserializeOwned>(self) -> Result<T, serde_json::Error>;
}

impl Source for &[u8] {
    fn read<T: DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self)
    }
}

impl Source for &Value {
    fn read<T: DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        T::deserialize(self)
    }
}

/// rmcp's reading of a message that passed [`check`] as `kind`, from
/// `source`, for [`settle`].
///
/// A `tools/call` request, the one a server or a gateway takes most, is
/// read straight as rmcp's `CallToolRequest`. rmcp reads a request as its
/// untagged `ClientRequest`, trying each variant in turn (`tools/call` is
/// the 14th of 22), and makes, then drops, an error for each that fails:
/// most of the cost of reading a small call. The message is the same: each
/// variant before `CallToolRequest` takes one other method only, so only
/// `CallToolRequest` can read a `tools/call`, and it reads it with the same
/// types either way. A `tools/call` whose `params` do not fit it (rmcp
/// reads it as its `CustomRequest`, which [`settle`] refuses), and every
/// other message, is read as rmcp reads it.
pub(crate) fn read(
    source: impl Source,
    kind: &Kind,
) -> Result<ClientJsonRpcMessage, serde_json::Error> {
    if let Kind::Request { method, .. } = kind
        && method == CallToolRequestMethod::VALUE
        && let Ok(call) = source.read::<JsonRpcRequest<CallToolRequest>>()
    {
        let request = ClientRequest::CallToolRequest(call.request);
        return Ok(ClientJsonRpcMessage::Request(JsonRpcRequest::new(
            call.id, request,
        )));
    }
    source.read()
}

/// The last word on a message that passed [`check`], given rmcp's reading
/// of it (`parsed`, by [`read`]): the message to hand on, or the refusal
/// or drop.
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
            format!("`params` do not fit {}", escape::quoted(method)),
        )));
    }
    Ok(message)
}

/// A JSON value for a message: a string [`escape::quoted`], anything
/// else as its JSON [`escape::shown`].
fn shown_value(value: &Value) -> String {
    match value {
        Value::String(text) => escape::quoted(text),
        other => escape::shown(&other.to_string()).into_owned(),
    }
}

/// An id for a message: its text as sent, [`escape::shown`].
pub(crate) fn shown_raw(id: &RawId) -> String {
    escape::shown(id.text()).into_owned()
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
                code: ErrorCode::PARSE_ERROR,
                message: "Parse error: lone surrogate \\ud800 at byte 56: a string escape \
                          must be valid Unicode"
                    .to_owned(),
            }
        );
        let trailing = r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"t":"a\udc00"}}"#;
        assert_eq!(refusal(trailing).code, ErrorCode::PARSE_ERROR);
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
                "message": "Invalid Request: request id 1.5 is not a string or a 64-bit integer in plain decimal (no fraction, exponent or -0)"}})
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

    /// The answer's bytes, which must hold the id exactly as `id`.
    fn answer_text(line: &str) -> String {
        String::from_utf8(refusal(line).to_json()).unwrap()
    }

    #[test]
    fn ids_rmcp_would_rewrite_are_refused_with_their_text() {
        for id in [
            "100000000000000000000",
            "-100000000000000000000",
            "9223372036854775808",
            "1.5",
            "1e20",
            "1E2",
            "1.0",
            "-0",
            "1.50",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            assert_eq!(
                answer_text(&line),
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"message":"Invalid Request: request id {id} is not a string or a 64-bit integer in plain decimal (no fraction, exponent or -0)"}}}}"#
                ),
                "{id}"
            );
        }
        // What rmcp writes back as sent passes.
        for id in [
            "0",
            "-1",
            "9223372036854775807",
            "-9223372036854775808",
            r#""a\u0062""#,
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let Verdict::Pass { kind, .. } = check(line.as_bytes(), 128) else {
                panic!("{id} passes");
            };
            let Kind::Request { raw_id, .. } = kind else {
                panic!("a request");
            };
            assert_eq!(raw_id.text(), id);
        }
    }

    #[test]
    fn every_refusal_repeats_the_id_text_as_sent() {
        // An escaped string id, with whitespace around it, in each of the
        // guard's own answers: envelope, params, rmcp's reading.
        let id = r#""\u0041\/b""#;
        let envelope = format!(r#"{{"jsonrpc":"1.0","id": {id} ,"method":"ping"}}"#);
        assert!(answer_text(&envelope).contains(&format!(r#""id":{id},"#)));
        let params =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{}}}}"#);
        assert!(answer_text(&params).contains(&format!(r#""id":{id},"#)));
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":5}}}}"#
        );
        let Verdict::Pass { value, kind } = check(line.as_bytes(), 128) else {
            panic!("the envelope is sound");
        };
        let Err(Verdict::Refuse(refusal)) = settle(serde_json::from_value(value), &kind) else {
            panic!("rmcp reads it as a custom request");
        };
        let text = String::from_utf8(refusal.to_json()).unwrap();
        assert!(text.contains(&format!(r#""id":{id},"#)), "{text}");
        // A message with an id but no method.
        let line = r#"{"jsonrpc":"2.0","id":1e2}"#;
        assert!(answer_text(line).contains(r#""id":1e2,"#));
    }

    #[test]
    fn a_member_named_twice_is_an_invalid_request() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"id":1,"method":"ping"}"#,
                Some("1"),
                "id",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
                None,
                "id",
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"ping","method":"tools/list"}"#,
                Some(r#""a""#),
                "method",
            ),
            (
                r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":3,"method":"ping"}"#,
                Some("3"),
                "jsonrpc",
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}"#,
                Some("4"),
                "params",
            ),
            (r#"{"jsonrpc":"2.0","id":5,"id":5}"#, Some("5"), "id"),
        ];
        for (line, id, member) in cases {
            assert_eq!(
                refusal(line),
                Refusal::invalid_request(
                    id.and_then(RawId::parse),
                    format!("member \"{member}\" appears more than once")
                ),
                "{line}"
            );
        }
        // A member repeated inside `params` is not the envelope's.
        let nested = r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":{"a":1,"a":2}}"#;
        assert!(matches!(
            check(nested.as_bytes(), 128),
            Verdict::Pass { .. }
        ));
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"result":{}}"#,
        ] {
            assert!(
                matches!(check(line.as_bytes(), 128), Verdict::Drop(_)),
                "{line}"
            );
        }
    }

    #[test]
    fn one_leading_byte_order_mark_is_ignored() {
        let line = b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
        assert_eq!(json_text(line), &line[3..]);
        assert!(matches!(check(json_text(line), 128), Verdict::Pass { .. }));
        let twice = [&b"\xEF\xBB\xBF"[..], line].concat();
        assert_eq!(
            match check(json_text(&twice), 128) {
                Verdict::Refuse(refusal) => refusal.code,
                other => panic!("{other:?}"),
            },
            ErrorCode::PARSE_ERROR
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
                Refusal::invalid_params(RawId::parse("8"), detail),
                "{params}"
            );
        }
        let absent = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call"}"#;
        assert_eq!(refusal(absent).code, ErrorCode::INVALID_PARAMS);
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
            Refusal::invalid_params(RawId::parse("4"), "`params` do not fit \"initialize\"")
        );
        // A method rmcp does not model stays rmcp's to answer (-32601).
        let custom = r#"{"jsonrpc":"2.0","id":4,"method":"x/y","params":{}}"#;
        let Verdict::Pass { value, kind } = check(custom.as_bytes(), 128) else {
            panic!("the envelope is sound");
        };
        assert!(settle(serde_json::from_value(value), &kind).is_ok());
    }

    #[test]
    fn a_tool_call_reads_as_rmcp_reads_it() {
        // Each passes `check`; `read` must give what rmcp's own reading
        // gives, from the text and from the value, fitting or not.
        let fitting = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_notes"}}"#,
            r#"{"jsonrpc":"2.0","id":"a\u0062","method":"tools/call","params":{"name":"n\u00e9","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"add","arguments":{"a":[1,1.0,-0,1e2,12345678901234567890,-3],"b":{"c":"\ud83d\ude00","d":null,"e":true}}}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"x","arguments":{}}}"#,
            r#"{"params":{"other":true,"name":"x","requestState":"s"},"extra":{"y":1},"id":3,"method":"tools/call","jsonrpc":"2.0"}"#,
        ];
        let misfits = [
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","requestState":5}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","_meta":"m"}}"#,
        ];
        for (line, fits) in fitting
            .iter()
            .map(|line| (line, true))
            .chain(misfits.iter().map(|line| (line, false)))
        {
            let Verdict::Pass { value, kind } = check(line.as_bytes(), 128) else {
                panic!("{line}: the envelope is sound");
            };
            let rmcp_text = serde_json::from_slice::<ClientJsonRpcMessage>(line.as_bytes());
            let rmcp_value = serde_json::from_value::<ClientJsonRpcMessage>(value.clone());
            for (ours, rmcp) in [
                (read(line.as_bytes(), &kind), rmcp_text),
                (read(&value, &kind), rmcp_value),
            ] {
                // `ClientRequest` has no `PartialEq`: every field, as
                // `Debug` shows it, the JSON rmcp writes of it, or the
                // same error.
                let shown = |read: &Result<ClientJsonRpcMessage, serde_json::Error>| {
                    read.as_ref()
                        .map(|message| {
                            (
                                format!("{message:?}"),
                                serde_json::to_value(message).unwrap(),
                            )
                        })
                        .map_err(ToString::to_string)
                };
                assert_eq!(shown(&ours), shown(&rmcp), "{line}");
                let called = matches!(
                    ours,
                    Ok(ClientJsonRpcMessage::Request(JsonRpcRequest {
                        request: ClientRequest::CallToolRequest(_),
                        ..
                    }))
                );
                assert_eq!(called, fits, "{line}");
            }
        }
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
}

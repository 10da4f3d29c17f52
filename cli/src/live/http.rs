//! The streamable HTTP transport (MCP 2025-03-26 and later): each message is
//! POSTed; a request is answered with one JSON message or an SSE stream.
//!
//! Two shapes of it: the `initialize` revisions (a session the server may
//! assign with `Mcp-Session-Id`, ended with `DELETE`; `MCP-Protocol-Version`
//! once negotiated; the server's requests answered) and 2026-07-28 (no
//! session; every POST carries `MCP-Protocol-Version`, `Mcp-Method` and,
//! for `tools/call`, `resources/read` and `prompts/get`, `Mcp-Name`; no
//! message is sent back but requests).
//!
//! Every body is read with a bound ([`LiveOptions::max_response_bytes`]): a
//! `Content-Length` above it is refused before a byte is read, a body or an
//! SSE line or event that grows past it is dropped there.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Response, StatusCode, Url};
use serde_json::Value;

use super::error::{LiveError, LiveErrorKind};
use super::jsonrpc::{self, Accept, Response as Answer, Step};
use super::sse;
use super::{Ctx, LiveOptions};

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";
/// How much of an error response's body is read, for its JSON-RPC error or
/// the start of its text.
const ERROR_BODY_BYTES: usize = 64 * 1024;

pub(crate) struct HttpTransport {
    client: Client,
    url: Url,
    /// The user's extra headers.
    headers: HeaderMap,
    /// `Mcp-Session-Id`, once the server assigned one (`initialize`
    /// revisions only).
    session_id: Option<HeaderValue>,
    /// `MCP-Protocol-Version`: once negotiated (`initialize` revisions), on
    /// every request (2026-07-28).
    protocol_version: Option<HeaderValue>,
    /// 2026-07-28: no session, request headers, no replies to the server.
    stateless: bool,
    /// The most bytes of one body or SSE event.
    max_bytes: usize,
}

impl HttpTransport {
    pub(crate) fn new(url: &str, options: &LiveOptions) -> Result<Self, LiveError> {
        let invalid_url = |reason: String| LiveErrorKind::InvalidUrl {
            url: url.to_owned(),
            reason,
        };
        let parsed = Url::parse(url).map_err(|error| invalid_url(error.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(LiveError::from(invalid_url(format!(
                "the scheme is `{}`, expected http or https",
                parsed.scheme()
            ))));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &options.headers {
            let invalid = |reason: String| LiveErrorKind::InvalidHeader {
                name: name.clone(),
                reason,
            };
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|error| invalid(format!("bad name: {error}")))?;
            let header_value = HeaderValue::from_str(value)
                .map_err(|error| invalid(format!("bad value: {error}")))?;
            headers.append(header_name, header_value);
        }
        // reqwest is built without a default crypto provider; install ring's
        // unless the process already has one (then this returns an error).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::builder()
            .user_agent(concat!("mcp-hints/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(options.timeout)
            // reqwest's default, said here because the session's requests
            // share a kept-alive connection: with Nagle's algorithm on, a
            // small write waits for the server's delayed ACK (40 ms).
            .tcp_nodelay(true)
            // A redirect is reported, not followed: following it would send
            // the --header credentials to whatever host it names.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| invalid_url(format!("cannot set up an HTTP client: {error}")))?;
        Ok(HttpTransport {
            client,
            url: parsed,
            headers,
            session_id: None,
            protocol_version: None,
            stateless: false,
            max_bytes: options.max_response_bytes,
        })
    }

    /// From now on: 2026-07-28's stateless requests with `version` in
    /// `MCP-Protocol-Version` (`stateless`), or the `initialize` revisions'
    /// session, with `version` once negotiated (`None` before `initialize`).
    pub(crate) fn set_protocol(&mut self, version: Option<&str>, stateless: bool) {
        self.protocol_version = version.and_then(|version| HeaderValue::from_str(version).ok());
        self.stateless = stateless;
    }

    /// Forgets the session id the server assigned, if any: a new lifecycle
    /// starts.
    pub(crate) fn forget_session(&mut self) {
        self.session_id = None;
    }

    fn with_headers(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request = request.headers(self.headers.clone());
        if let Some(id) = &self.session_id {
            request = request.header(SESSION_ID, id.clone());
        }
        if let Some(version) = &self.protocol_version {
            request = request.header(PROTOCOL_VERSION, version.clone());
        }
        request
    }

    /// POST one message; a non-2xx status is an error (the JSON-RPC error
    /// in its body, if it holds one, as [`LiveErrorKind::Rpc`]).
    async fn post(&mut self, message: &Value, ctx: &Ctx<'_>) -> Result<Response, LiveError> {
        let body = serde_json::to_vec(message).expect("a Value serializes");
        let mut request = self
            .with_headers(self.client.post(self.url.clone()))
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        if self.stateless {
            for (name, value) in request_headers(message) {
                request = request.header(name, value);
            }
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(|error| send_error(error, ctx))?;
        if !response.status().is_success() {
            let id = message.get("id").and_then(Value::as_u64);
            return Err(status_error(response, id, ctx).await);
        }
        if !self.stateless
            && self.session_id.is_none()
            && let Some(id) = response.headers().get(SESSION_ID)
        {
            self.session_id = Some(id.clone());
        }
        Ok(response)
    }

    /// POST a notification or a response to the server (answered 202
    /// Accepted; any 2xx will do).
    pub(crate) async fn notify(&mut self, message: &Value, ctx: &Ctx<'_>) -> Result<(), LiveError> {
        self.post(message, ctx).await.map(drop)
    }

    /// POST request `id` and read its response, from a JSON body or an SSE
    /// stream, answering the server's requests on the way (`initialize`
    /// revisions).
    pub(crate) async fn request(
        &mut self,
        id: u64,
        message: &Value,
        ctx: &Ctx<'_>,
        accept: Option<Accept<'_>>,
    ) -> Result<Answer, LiveError> {
        let mut accept = accept;
        let mut response = self.post(message, ctx).await?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .unwrap_or_default();
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Err(invalid(
                ctx,
                format!(
                    "HTTP {status} with no response; a request must be answered with application/json or text/event-stream"
                ),
            ));
        }
        match essence.as_str() {
            "application/json" => {
                let body = self.read_body(&mut response, ctx).await?;
                if let Some(answer) = self
                    .sort(&body, "an HTTP response body", id, &mut accept, ctx)
                    .await?
                {
                    return Ok(answer);
                }
                Err(invalid(
                    ctx,
                    format!(
                        "the application/json body holds no response with id {id}: {}",
                        crate::text::one_line(&jsonrpc::excerpt(&String::from_utf8_lossy(&body)))
                    ),
                ))
            }
            "text/event-stream" => {
                let mut parser = sse::Parser::new(self.max_bytes);
                loop {
                    let chunk = response
                        .chunk()
                        .await
                        .map_err(|error| http_error(error, ctx))?;
                    let events = match &chunk {
                        Some(bytes) => parser.feed(bytes.clone()),
                        None => parser.finish(),
                    }
                    .map_err(|error| match error {
                        sse::Error::TooLarge { event } => {
                            self.too_large(format!("SSE event {event}"), ctx)
                        }
                        sse::Error::Malformed { event, reason } => invalid(
                            ctx,
                            format!("SSE event {event} is not a valid event stream: {reason}"),
                        ),
                    })?;
                    for event in events {
                        // Priming events (an id, empty data) and other event
                        // types carry no message.
                        if event.data.iter().all(u8::is_ascii_whitespace)
                            || event.kind.as_deref().is_some_and(|kind| kind != "message")
                        {
                            continue;
                        }
                        let location = format!("SSE event {}", event.number);
                        if let Some(answer) = self
                            .sort(&event.data, &location, id, &mut accept, ctx)
                            .await?
                        {
                            return Ok(answer);
                        }
                    }
                    if chunk.is_none() {
                        return Err(LiveErrorKind::StreamEnded {
                            target: ctx.target.to_owned(),
                            request: ctx.request.to_owned(),
                            id,
                        }
                        .into());
                    }
                }
            }
            _ => Err(LiveErrorKind::UnexpectedContentType {
                target: ctx.target.to_owned(),
                request: ctx.request.to_owned(),
                status: status.as_u16(),
                content_type,
            }
            .into()),
        }
    }

    /// The whole body, if it is within the bound: a larger `Content-Length`
    /// is refused before anything is read, a body that grows past the bound
    /// is dropped there.
    async fn read_body(
        &self,
        response: &mut Response,
        ctx: &Ctx<'_>,
    ) -> Result<Vec<u8>, LiveError> {
        let location = "an HTTP response body";
        let declared = response.content_length();
        if declared.is_some_and(|length| length > self.max_bytes as u64) {
            return Err(self.too_large(location.to_owned(), ctx));
        }
        // The chunks are kept as they came and joined once at the end: a
        // buffer grown by doubling leaves each smaller one behind, which an
        // allocator need not hand back at once, so a body read up to the
        // bound could hold several times the bound.
        let mut chunks = Vec::new();
        let mut length = 0;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| http_error(error, ctx))?
        {
            length += chunk.len();
            if length > self.max_bytes {
                return Err(self.too_large(location.to_owned(), ctx));
            }
            chunks.push(chunk);
        }
        let mut body = Vec::with_capacity(length);
        for chunk in chunks {
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    fn too_large(&self, location: String, ctx: &Ctx<'_>) -> LiveError {
        LiveErrorKind::ResponseTooLarge {
            target: ctx.target.to_owned(),
            request: ctx.request.to_owned(),
            location,
            limit: self.max_bytes as u64,
            stderr_tail: Vec::new(),
        }
        .into()
    }

    /// Sorts one message text (a JSON body or an SSE event's data) while
    /// waiting for the response to `id`: the caller's parser first, then
    /// the fast path, then message by message, answering the server's
    /// requests (`initialize` revisions). `None` when the text holds no
    /// response to `id`.
    async fn sort(
        &mut self,
        text: &[u8],
        location: &str,
        id: u64,
        accept: &mut Option<Accept<'_>>,
        ctx: &Ctx<'_>,
    ) -> Result<Option<Answer>, LiveError> {
        if let Some(accept) = accept.as_mut()
            && accept(text)
        {
            return Ok(Some(Answer::Accepted));
        }
        if let Some(result) = jsonrpc::fast_result(text, id) {
            return Ok(Some(Answer::Result(result)));
        }
        let value = parse(text, location, ctx)?;
        for message in jsonrpc::batch(value) {
            match jsonrpc::step(&message, id, !self.stateless) {
                Step::Done(response) => return Ok(Some(Answer::Message(response))),
                Step::Reply(reply) => self.notify(&reply, ctx).await?,
                Step::Ignore => {}
                Step::Invalid(reason) => return Err(not_json_rpc(text, location, reason, ctx)),
            }
        }
        Ok(None)
    }

    /// End the session: DELETE with its id (a 405 means the server does not
    /// let clients end sessions; any failure is ignored). Nothing for
    /// 2026-07-28, which has no sessions.
    pub(crate) async fn close(self, timeout: Duration) {
        if self.stateless || self.session_id.is_none() {
            return;
        }
        let request = self.with_headers(self.client.delete(self.url.clone()));
        let _ = tokio::time::timeout(timeout, request.send()).await;
    }
}

/// 2026-07-28's standard request headers for `message`: `Mcp-Method`, and
/// `Mcp-Name` from `params.name` or `params.uri` for the methods that name
/// something. (Tool parameters marked `x-mcp-header` are not mirrored:
/// this client calls no tools.)
fn request_headers(message: &Value) -> Vec<(&'static str, HeaderValue)> {
    let mut headers = Vec::new();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return headers;
    };
    headers.push((METHOD, header_text(method)));
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return headers,
    };
    if let Some(name) = message
        .pointer(&format!("/params/{key}"))
        .and_then(Value::as_str)
    {
        headers.push((NAME, header_text(name)));
    }
    headers
}

/// A header value for `text`, as the 2026-07-28 streamable HTTP transport's
/// "Value Encoding" says: as is when it is visible ASCII, spaces and tabs,
/// with no space at either end and not itself of the sentinel's form;
/// otherwise `=?base64?…?=` of its UTF-8.
fn header_text(text: &str) -> HeaderValue {
    let visible = text
        .bytes()
        .all(|b| b == b'\t' || (0x20..=0x7e).contains(&b));
    let padded = text.starts_with([' ', '\t']) || text.ends_with([' ', '\t']);
    let sentinel = text.starts_with("=?base64?") && text.ends_with("?=");
    let plain = visible && !padded && !sentinel;
    if plain && let Ok(value) = HeaderValue::from_str(text) {
        return value;
    }
    HeaderValue::from_str(&format!("=?base64?{}?=", STANDARD.encode(text)))
        .expect("base64 is visible ASCII")
}

fn parse(body: &[u8], location: &str, ctx: &Ctx<'_>) -> Result<Value, LiveError> {
    serde_json::from_slice(body).map_err(|error| {
        LiveErrorKind::NotJson {
            target: ctx.target.to_owned(),
            request: ctx.request.to_owned(),
            location: location.to_owned(),
            excerpt: jsonrpc::excerpt(&String::from_utf8_lossy(body)),
            reason: error.to_string(),
            stderr_tail: Vec::new(),
        }
        .into()
    })
}

fn not_json_rpc(body: &[u8], location: &str, reason: String, ctx: &Ctx<'_>) -> LiveError {
    LiveErrorKind::NotJsonRpc {
        target: ctx.target.to_owned(),
        request: ctx.request.to_owned(),
        location: location.to_owned(),
        excerpt: jsonrpc::excerpt(&String::from_utf8_lossy(body)),
        reason,
        stderr_tail: Vec::new(),
    }
    .into()
}

fn invalid(ctx: &Ctx<'_>, reason: String) -> LiveError {
    LiveErrorKind::InvalidResponse {
        target: ctx.target.to_owned(),
        request: ctx.request.to_owned(),
        reason,
        stderr_tail: Vec::new(),
    }
    .into()
}

fn send_error(error: reqwest::Error, ctx: &Ctx<'_>) -> LiveError {
    if error.is_connect() {
        LiveErrorKind::Connect {
            target: ctx.target.to_owned(),
            request: ctx.request.to_owned(),
            source: error.without_url(),
        }
        .into()
    } else {
        http_error(error, ctx)
    }
}

fn http_error(error: reqwest::Error, ctx: &Ctx<'_>) -> LiveError {
    LiveErrorKind::Http {
        target: ctx.target.to_owned(),
        request: ctx.request.to_owned(),
        source: Box::new(error.without_url()),
    }
    .into()
}

/// The error for a non-2xx answer to request `id` (`None` for a
/// notification): [`LiveErrorKind::Rpc`] with the status when the body is a
/// JSON-RPC error response (for that request, or with no id), as
/// 2026-07-28 servers answer an unsupported revision (`400`) or an unknown
/// method (`404`); otherwise [`LiveErrorKind::HttpStatus`] with the start
/// of the body. `401` and `403` are always `HttpStatus`: they are about
/// credentials, whatever the body says.
async fn status_error(mut response: Response, id: Option<u64>, ctx: &Ctx<'_>) -> LiveError {
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|location| String::from_utf8_lossy(location.as_bytes()).into_owned());
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = ERROR_BODY_BYTES - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Ok(None) | Err(_) => break,
        }
    }
    if !matches!(status, 401 | 403)
        && let Some((code, message, data)) = error_response(&body, id)
    {
        return LiveErrorKind::Rpc {
            target: ctx.target.to_owned(),
            request: ctx.request.to_owned(),
            code,
            message,
            data,
            http_status: Some(status),
        }
        .into();
    }
    LiveErrorKind::HttpStatus {
        target: ctx.target.to_owned(),
        request: ctx.request.to_owned(),
        status,
        body: match location {
            Some(location) => format!(
                "redirected to {}; redirects are not followed, so that credentials go only where \
                 you send them: pass that URL if you trust it",
                jsonrpc::excerpt(&location)
            ),
            None => jsonrpc::excerpt(String::from_utf8_lossy(&body).trim()),
        },
    }
    .into()
}

/// `(code, message, data)` when `body` is a JSON-RPC error response whose id
/// is `id`, null or absent.
fn error_response(body: &[u8], id: Option<u64>) -> Option<(i64, String, Option<Value>)> {
    let Value::Object(mut response) = serde_json::from_slice::<Value>(body).ok()? else {
        return None;
    };
    let for_us = match response.get("id") {
        None | Some(Value::Null) => true,
        Some(other) => id.is_some() && other.as_u64() == id,
    };
    if response.get("jsonrpc") != Some(&Value::from("2.0"))
        || !for_us
        || !jsonrpc::is_error(&response)
    {
        return None;
    }
    let Some(Value::Object(mut error)) = response.remove("error") else {
        return None;
    };
    let code = error.get("code").and_then(Value::as_i64)?;
    let message = match error.remove("message") {
        Some(Value::String(message)) => message,
        Some(other) => other.to_string(),
        None => String::new(),
    };
    Some((code, message, error.remove("data")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base64_is_rfc_4648() {
        for (text, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
            ("Hello, 世界", "SGVsbG8sIOS4lueVjA=="),
        ] {
            assert_eq!(STANDARD.encode(text), encoded, "{text}");
        }
    }

    #[test]
    fn names_are_encoded_as_the_spec_says() {
        // The examples of the 2026-07-28 streamable HTTP page.
        for (text, header) in [
            ("us-west1", "us-west1"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
            ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ] {
            assert_eq!(header_text(text), header, "{text:?}");
        }
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_weather"}});
        assert_eq!(
            request_headers(&call),
            [
                (METHOD, HeaderValue::from_static("tools/call")),
                (NAME, HeaderValue::from_static("get_weather"))
            ]
        );
        let list =
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "x"}});
        assert_eq!(
            request_headers(&list),
            [(METHOD, HeaderValue::from_static("tools/list"))]
        );
    }

    #[test]
    fn error_bodies_are_read_as_json_rpc_errors_for_our_request_only() {
        let body = br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2025-11-25"]}}}"#;
        assert_eq!(
            error_response(body, Some(3)),
            Some((
                -32022,
                "Unsupported protocol version".to_owned(),
                Some(json!({"supported": ["2025-11-25"]}))
            ))
        );
        assert_eq!(error_response(body, Some(4)), None);
        let no_id = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}"#;
        assert_eq!(error_response(no_id, Some(1)).unwrap().0, -32000);
        assert_eq!(error_response(b"Not Found", Some(1)), None);
        assert_eq!(
            error_response(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#, Some(1)),
            None
        );
    }
}

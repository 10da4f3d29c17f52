//! The streamable HTTP transport (MCP 2025-03-26 and later): each message is
//! POSTed; a request is answered with one JSON message or an SSE stream.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Response, StatusCode, Url};
use serde_json::Value;
use sse_stream::SseByteStream;

use super::error::{LiveError, LiveErrorKind};
use super::jsonrpc::{self, Accept, Response as Answer, Step};
use super::{Ctx, LiveOptions};

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// How much of an error response's body is read for the message.
const ERROR_BODY_BYTES: usize = 4096;

pub(crate) struct HttpTransport {
    client: Client,
    url: Url,
    /// The user's extra headers.
    headers: HeaderMap,
    /// `Mcp-Session-Id`, once the server assigned one.
    session_id: Option<HeaderValue>,
    /// `MCP-Protocol-Version`, once negotiated.
    protocol_version: Option<HeaderValue>,
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
        })
    }

    /// Send `MCP-Protocol-Version: version` from now on.
    pub(crate) fn set_protocol_version(&mut self, version: &str) {
        self.protocol_version = HeaderValue::from_str(version).ok();
    }

    fn with_session(&self, mut request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request = request.headers(self.headers.clone());
        if let Some(id) = &self.session_id {
            request = request.header(SESSION_ID, id.clone());
        }
        if let Some(version) = &self.protocol_version {
            request = request.header(PROTOCOL_VERSION, version.clone());
        }
        request
    }

    /// POST one message; a non-2xx status is an error.
    async fn post(&mut self, message: &Value, ctx: &Ctx<'_>) -> Result<Response, LiveError> {
        let body = serde_json::to_vec(message).expect("a Value serializes");
        let request = self
            .with_session(self.client.post(self.url.clone()))
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(body);
        let response = request
            .send()
            .await
            .map_err(|error| send_error(error, ctx))?;
        if !response.status().is_success() {
            return Err(status_error(response, ctx).await);
        }
        if self.session_id.is_none()
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
    /// stream, answering the server's requests on the way.
    pub(crate) async fn request(
        &mut self,
        id: u64,
        message: &Value,
        ctx: &Ctx<'_>,
        accept: Option<Accept<'_>>,
    ) -> Result<Answer, LiveError> {
        let mut accept = accept;
        let response = self.post(message, ctx).await?;
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
                let body = response
                    .bytes()
                    .await
                    .map_err(|error| http_error(error, ctx))?;
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
                        jsonrpc::excerpt(&String::from_utf8_lossy(&body))
                    ),
                ))
            }
            "text/event-stream" => {
                let mut events = SseByteStream::new(response.bytes_stream());
                let mut number = 0u64;
                while let Some(event) = events.next().await {
                    let event = event.map_err(|error| LiveErrorKind::Http {
                        target: ctx.target.to_owned(),
                        request: ctx.request.to_owned(),
                        source: Box::new(error),
                    })?;
                    number += 1;
                    // Priming events (an id, empty data) and other event types
                    // carry no message.
                    let Some(data) = event.data.filter(|data| !data.trim().is_empty()) else {
                        continue;
                    };
                    if event.event.as_deref().is_some_and(|kind| kind != "message") {
                        continue;
                    }
                    let location = format!("SSE event {number}");
                    if let Some(answer) = self
                        .sort(data.as_bytes(), &location, id, &mut accept, ctx)
                        .await?
                    {
                        return Ok(answer);
                    }
                }
                Err(LiveErrorKind::StreamEnded {
                    target: ctx.target.to_owned(),
                    request: ctx.request.to_owned(),
                    id,
                }
                .into())
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

    /// Sorts one message text (a JSON body or an SSE event's data) while
    /// waiting for the response to `id`: the caller's parser first, then
    /// the fast path, then message by message, answering the server's
    /// requests. `None` when the text holds no response to `id`.
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
            match jsonrpc::step(&message, id) {
                Step::Done(response) => return Ok(Some(Answer::Message(response))),
                Step::Reply(reply) => self.notify(&reply, ctx).await?,
                Step::Ignore => {}
                Step::Invalid(reason) => return Err(not_json_rpc(text, location, reason, ctx)),
            }
        }
        Ok(None)
    }

    /// End the session: DELETE with its id (a 405 means the server does not
    /// let clients end sessions; any failure is ignored).
    pub(crate) async fn close(self, timeout: Duration) {
        if self.session_id.is_none() {
            return;
        }
        let request = self.with_session(self.client.delete(self.url.clone()));
        let _ = tokio::time::timeout(timeout, request.send()).await;
    }
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

/// [`LiveErrorKind::HttpStatus`] with the start of the body.
async fn status_error(mut response: Response, ctx: &Ctx<'_>) -> LiveError {
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|location| String::from_utf8_lossy(location.as_bytes()).into_owned());
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
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

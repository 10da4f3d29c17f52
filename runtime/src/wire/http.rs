//! The HTTP guard: a tower layer in front of rmcp's `StreamableHttpService`.

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, ORIGIN};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Either, Full, LengthLimitError, Limited};
use mcp_hints_core::escape;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use super::check::{self, Refusal, Verdict};
use super::{DEFAULT_MAX_BODY_BYTES, HTTP_MAX_DEPTH};

/// The body the guarded service receives: the buffered body of a POST the
/// guard checked, or the original body of any other request.
pub type GuardedBody<B> = Either<Full<Bytes>, B>;

/// The body of the guard's responses: its own answers, or the inner
/// service's responses unchanged.
pub type GuardResponseBody<B> = Either<Full<Bytes>, B>;

/// The message of a POST body that [`HttpGuard`] checked, as rmcp reads
/// it, in the request's extensions for the service behind the guard (with
/// [`HttpGuard::pass_message`]): a
/// service that answers some requests itself takes it with
/// `request.extensions_mut().remove::<CheckedMessage>()` instead of
/// parsing the body again. The body is passed on as well, unchanged, for
/// a service (rmcp's) that reads it.
#[derive(Clone, Debug)]
pub struct CheckedMessage(pub Arc<ClientJsonRpcMessage>);

impl CheckedMessage {
    /// The message, without a copy unless the extension was cloned.
    pub fn into_message(self) -> ClientJsonRpcMessage {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Asks the session manager whether a session exists.
type SessionProbe = Arc<dyn Fn(SessionId) -> BoxFuture<Result<bool, String>> + Send + Sync>;

/// The first protocol revision without sessions (rmcp answers DELETE there
/// with 405 itself).
const SESSIONLESS_REVISION: &str = "2026-07-28";

/// A tower [`Layer`](tower_layer::Layer) for rmcp's streamable HTTP
/// service that answers, before rmcp sees the request:
///
/// | request | answer |
/// |---|---|
/// | any method, with an `Origin` that is not the server's own or allowed | 403, `text/plain` |
/// | DELETE of a session the session manager does not know (with [`sessions`](Self::sessions)) | 404, `text/plain` |
/// | POST whose body is longer than [`max_body_bytes`](Self::max_body_bytes) | 413, JSON-RPC -32700, no id; before the body is read when `Content-Length` says so |
/// | POST whose body is not JSON, or nests deeper than [`HTTP_MAX_DEPTH`](super::HTTP_MAX_DEPTH) | 400, JSON-RPC -32700, no id |
/// | POST of a request with a bad envelope, a member named twice, or an id rmcp would not repeat exactly (`1.5`, `1e20`) | 400, JSON-RPC -32600, its id as sent when readable |
/// | POST of `tools/call` with bad params, or params rmcp cannot read for a method it models | 400, JSON-RPC -32602, its id |
/// | POST of a malformed notification or response | 400, `text/plain` (never a JSON-RPC answer) |
///
/// One leading UTF-8 byte order mark of a body is ignored and not passed
/// on (RFC 8259 §8.1), as over stdio; the ids in the guard's answers are
/// the request's id text as sent.
///
/// Only a POST whose body rmcp reads has it checked: `Content-Type`
/// `application/json`, and `Accept` listing `application/json` and
/// `text/event-stream`, neither weighted `q=0`, read exactly as rmcp reads
/// them (a `,` or `;` inside a quoted string splits nothing); any other goes
/// to rmcp untouched (which answers 415 or 406).
/// Everything else, the `Host` check included, is rmcp's. With
/// [`pass_message`](Self::pass_message), a POST whose body passes goes on
/// with the message the guard read in its extensions ([`CheckedMessage`]),
/// so that a service between the guard and rmcp that answers some
/// requests itself need not parse the body again.
///
/// Sources: MCP basic/transports (2025-06-18, 2025-11-25) and
/// basic/transports/streamable-http (2026-07-28): "If the `Origin` header is
/// present and invalid, servers MUST respond with HTTP 403 Forbidden";
/// a session ended is answered 404; input the server cannot accept gets an
/// HTTP error status such as 400. JSON-RPC 2.0 §5.1 for the codes.
///
/// **Set `TCP_NODELAY` on the connections you accept.** The guard sees
/// requests, not sockets, so this is the server's part: rmcp answers a
/// request with an SSE stream, whose last chunk (`0\r\n\r\n`) hyper often
/// writes on its own; on a kept-alive connection Nagle's algorithm holds
/// that write until the client acknowledges the one before, and clients
/// delay acknowledgements (40 ms on Linux), so every request after a
/// connection's first waits about 40 ms. With axum 0.8, wrap the listener
/// (`axum::serve::ListenerExt`):
///
/// ```text
/// let listener = tokio::net::TcpListener::bind(bound).await?.tap_io(|tcp| {
///     let _ = tcp.set_nodelay(true);
/// });
/// axum::serve(listener, app).await?;
/// ```
///
/// With hyper directly, call `set_nodelay(true)` on each accepted
/// `TcpStream` before serving it.
///
/// **Answer stateless requests as JSON** (`StreamableHttpServerConfig {
/// json_response: true, .. }`): rmcp then sends an answer with nothing
/// before it as one `application/json` body, one write, instead of an
/// event stream of three (headers, the event, the last chunk), each of
/// which can wake the client; a handler that sends a notification first
/// still streams. On the 2-core machine of the README's HTTP load
/// benchmark, `notes --http` went from 2,494 to 3,712 requests/s at
/// concurrency 1.
///
/// ```
/// # fn app() -> Result<(), mcp_hints::wire::InvalidOrigin> {
/// use std::sync::Arc;
/// use mcp_hints::rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
/// use mcp_hints::wire::HttpGuard;
///
/// let bound: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
/// let sessions = Arc::new(LocalSessionManager::default());
/// let guard = HttpGuard::for_address(bound)
///     .allow_origin("https://app.example.com")?
///     .sessions(sessions.clone());
/// // let app = axum::Router::new().nest_service("/mcp", guard.service(rmcp_service));
/// // axum::serve(listener_with_tcp_nodelay, app)
/// # let _ = guard;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct HttpGuard {
    origins: Vec<Origin>,
    max_body_bytes: usize,
    sessions: Option<SessionProbe>,
    /// Whether a checked POST goes on with its [`CheckedMessage`].
    pass_message: bool,
}

impl fmt::Debug for HttpGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpGuard")
            .field("origins", &self.origins)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("sessions", &self.sessions.is_some())
            .field("pass_message", &self.pass_message)
            .finish()
    }
}

impl HttpGuard {
    /// A guard for a server listening on `bound`, allowing its own origins:
    /// `http://` with the bound port and the bound address, and, when that
    /// address is a loopback or unspecified one, also `localhost`,
    /// `127.0.0.1` and `[::1]`. Bodies up to [`DEFAULT_MAX_BODY_BYTES`](super::DEFAULT_MAX_BODY_BYTES);
    /// no session check until [`sessions`](Self::sessions).
    pub fn for_address(bound: SocketAddr) -> Self {
        let port = Some(bound.port());
        let mut hosts = Vec::new();
        let ip = bound.ip();
        if ip.is_loopback() || ip.is_unspecified() {
            hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(str::to_owned));
        }
        if !ip.is_unspecified() {
            hosts.push(match ip {
                IpAddr::V4(ip) => ip.to_string(),
                IpAddr::V6(ip) => format!("[{ip}]"),
            });
        }
        let mut origins: Vec<Origin> = Vec::new();
        for host in hosts {
            let origin = Origin::Tuple {
                scheme: "http".to_owned(),
                host,
                port,
            };
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        Self {
            origins,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            sessions: None,
            pass_message: false,
        }
    }

    /// Also allows `origin`, as a browser sends it: `scheme://host` or
    /// `scheme://host:port` (RFC 6454; the default port of `http` and
    /// `https` may be left out or given), or `null`. Scheme and host are
    /// compared without case.
    ///
    /// # Errors
    ///
    /// [`InvalidOrigin`] when `origin` is not of that form (a path, a query,
    /// no scheme or no host).
    pub fn allow_origin(mut self, origin: &str) -> Result<Self, InvalidOrigin> {
        let parsed = Origin::parse(origin).ok_or_else(|| InvalidOrigin(origin.to_owned()))?;
        if !self.origins.contains(&parsed) {
            self.origins.push(parsed);
        }
        Ok(self)
    }

    /// The most bytes a POST body may have; a longer one is answered 413
    /// with a JSON-RPC -32700 body, without reading the body when its
    /// `Content-Length` declares more, else once the limit is passed. Keep rmcp's
    /// `StreamableHttpServerConfig::max_request_body_bytes` at least this
    /// large (both default to 4 MiB), or rmcp answers 413 first in plain
    /// text.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Answers DELETE of a session that `sessions` does not know with 404
    /// (rmcp 3.11 answers 202 for any session id). Pass the session manager
    /// the rmcp service uses, in its legacy session mode (rmcp's default).
    /// A DELETE naming protocol revision 2026-07-28 or later, which has no
    /// sessions, stays rmcp's (405).
    pub fn sessions<M: SessionManager>(mut self, sessions: Arc<M>) -> Self {
        self.sessions = Some(Arc::new(move |id: SessionId| {
            let sessions = sessions.clone();
            Box::pin(async move {
                sessions
                    .has_session(&id)
                    .await
                    .map_err(|error| error.to_string())
            })
        }));
        self
    }

    /// Passes the message of each POST body the guard checked on in the
    /// request's extensions ([`CheckedMessage`]), for a service between the
    /// guard and rmcp that answers some requests itself without parsing the
    /// body again. Off by default: rmcp reads the body, and a message kept
    /// beside it would hold a second copy of each request for as long as
    /// its handler runs.
    pub fn pass_message(mut self, pass: bool) -> Self {
        self.pass_message = pass;
        self
    }

    /// Wraps `inner` (rmcp's `StreamableHttpService`, or any service of the
    /// same shape) in this guard; the same as [`Layer::layer`](tower_layer::Layer::layer).
    pub fn service<S>(&self, inner: S) -> HttpGuardService<S> {
        HttpGuardService {
            inner,
            guard: Arc::new(self.clone()),
        }
    }

    /// 403 for a present `Origin` that is not allowed (every value, when
    /// the header is repeated); an absent one is allowed: clients that are
    /// not browsers send none.
    fn refuse_origin(&self, headers: &HeaderMap) -> Option<Response<Full<Bytes>>> {
        let foreign = headers.get_all(ORIGIN).iter().find(|value| {
            !value
                .to_str()
                .ok()
                .and_then(Origin::parse)
                .is_some_and(|origin| self.origins.contains(&origin))
        })?;
        let shown = escape::quoted(&String::from_utf8_lossy(foreign.as_bytes()));
        tracing::warn!(origin = %shown, "refused a request from a foreign Origin");
        Some(plain(
            StatusCode::FORBIDDEN,
            format!("Forbidden: Origin {shown} is not allowed"),
        ))
    }

    /// 404 for DELETE of a session the manager does not know.
    async fn refuse_delete(&self, headers: &HeaderMap) -> Option<Response<Full<Bytes>>> {
        let probe = self.sessions.as_ref()?;
        let revision = headers
            .get("mcp-protocol-version")
            .and_then(|value| value.to_str().ok());
        if revision.is_some_and(|revision| revision >= SESSIONLESS_REVISION) {
            return None;
        }
        let id = headers.get("mcp-session-id")?.to_str().ok()?;
        match probe(id.into()).await {
            Ok(true) => None,
            Ok(false) => Some(plain(
                StatusCode::NOT_FOUND,
                "Not Found: Session not found".to_owned(),
            )),
            Err(error) => {
                tracing::warn!(%error, "cannot ask the session manager; rmcp answers the DELETE");
                None
            }
        }
    }

    /// The message of a POST body (its JSON text, after
    /// [`check::json_text`]) that passes, read as rmcp reads it, or the
    /// guard's answer to one that does not.
    fn check_body(&self, body: &[u8]) -> Result<ClientJsonRpcMessage, Box<Response<Full<Bytes>>>> {
        let verdict = match check::check(body, HTTP_MAX_DEPTH) {
            Verdict::Pass { kind, .. } => {
                // rmcp parses the body again itself: read it the same way, so
                // that what passes here is what rmcp reads.
                match check::settle(check::read(body, &kind), &kind) {
                    Ok(message) => return Ok(message),
                    Err(verdict) => verdict,
                }
            }
            verdict => verdict,
        };
        Err(Box::new(match verdict {
            Verdict::Refuse(refusal) => jsonrpc(StatusCode::BAD_REQUEST, &refusal),
            Verdict::Drop(reason) => plain(
                StatusCode::BAD_REQUEST,
                format!("Bad Request: malformed {reason}"),
            ),
            Verdict::Pass { .. } => unreachable!("handled above"),
        }))
    }
}

impl<S> tower_layer::Layer<S> for HttpGuard {
    type Service = HttpGuardService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        self.service(inner)
    }
}

/// The service [`HttpGuard`] makes: answers what the guard refuses, passes
/// everything else to `S`.
///
/// It takes `http::Request<B>` for any body `B` of [`Bytes`] (axum's
/// included) and calls `S` with `Request<`[`GuardedBody<B>`]`>`; its
/// responses have the body [`GuardResponseBody`]. Errors are `S`'s.
#[derive(Clone)]
pub struct HttpGuardService<S> {
    inner: S,
    guard: Arc<HttpGuard>,
}

impl<S> fmt::Debug for HttpGuardService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpGuardService")
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl<S, B, ResBody> tower_service::Service<Request<B>> for HttpGuardService<S>
where
    S: tower_service::Service<Request<GuardedBody<B>>, Response = Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    ResBody: Send + 'static,
{
    type Response = Response<GuardResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service polled ready is the one that is called.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        let guard = self.guard.clone();
        Box::pin(async move { guard.handle(inner, request).await })
    }
}

impl HttpGuard {
    async fn handle<S, B, ResBody>(
        &self,
        mut inner: S,
        request: Request<B>,
    ) -> Result<Response<GuardResponseBody<ResBody>>, S::Error>
    where
        S: tower_service::Service<Request<GuardedBody<B>>, Response = Response<ResBody>>,
        B: Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let own = |response: Response<Full<Bytes>>| Ok(response.map(Either::Left));
        if let Some(response) = self.refuse_origin(request.headers()) {
            return own(response);
        }
        if request.method() == Method::DELETE
            && let Some(response) = self.refuse_delete(request.headers()).await
        {
            return own(response);
        }
        if request.method() != Method::POST || !rmcp_reads_body(request.headers()) {
            let response = inner.call(request.map(Either::Right)).await?;
            return Ok(response.map(Either::Right));
        }
        let too_long = || {
            let refusal =
                Refusal::parse_error(format!("body longer than {} bytes", self.max_body_bytes));
            jsonrpc(StatusCode::PAYLOAD_TOO_LARGE, &refusal)
        };
        if declared_too_long(&request, self.max_body_bytes) {
            // Answered before a byte of the body is read.
            return own(too_long());
        }
        let (mut parts, body) = request.into_parts();
        let body = match Limited::new(body, self.max_body_bytes).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) if error.is::<LengthLimitError>() => return own(too_long()),
            Err(error) => {
                return own(plain(
                    StatusCode::BAD_REQUEST,
                    format!("Bad Request: cannot read the body: {error}"),
                ));
            }
        };
        // rmcp gets the JSON text the guard checked: without a leading BOM.
        let body = body.slice_ref(check::json_text(&body));
        let message = match self.check_body(&body) {
            Ok(message) => message,
            Err(response) => return own(*response),
        };
        if self.pass_message {
            parts.extensions.insert(CheckedMessage(Arc::new(message)));
        }
        if parts.headers.contains_key(CONTENT_LENGTH) {
            parts
                .headers
                .insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        }
        let request = Request::from_parts(parts, Either::Left(Full::new(body)));
        let response = inner.call(request).await?;
        Ok(response.map(Either::Right))
    }
}

/// Whether the body says, before it is read, that it is longer than `max`
/// bytes: a `Content-Length` over `max` (any of them, if repeated), or a
/// body whose size hint is (hyper's, from that header).
fn declared_too_long<B: Body>(request: &Request<B>, max: usize) -> bool {
    let max = u64::try_from(max).unwrap_or(u64::MAX);
    request.body().size_hint().lower() > max
        || request
            .headers()
            .get_all(CONTENT_LENGTH)
            .iter()
            .filter_map(|value| value.to_str().ok()?.trim().parse::<u64>().ok())
            .any(|length| length > max)
}

/// Whether rmcp would parse this POST's body: `Content-Type` is
/// `application/json` and `Accept` lists both `application/json` and
/// `text/event-stream` with a weight other than zero. Otherwise rmcp
/// answers 415 or 406 without reading it.
///
/// The decision is rmcp's own, read the way rmcp 3.11's
/// `StreamableHttpService::handle_post` reads these headers (its private
/// `accepted_media_types`, `split_unquoted` and `quality_is_acceptable`):
/// a body the guard takes for unread but rmcp reads would reach rmcp
/// unchecked. A general media-type parser would not do: it refuses or
/// reads otherwise what rmcp reads leniently (an unterminated quote, a
/// weight such as `q=abc`, which rmcp ignores). A test compares this with
/// rmcp's service on a corpus of header combinations, so that an rmcp
/// that reads them differently fails it.
fn rmcp_reads_body(headers: &HeaderMap) -> bool {
    // rmcp reads only the first Content-Type, up to its first `;`.
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case(JSON)
        });
    let (mut accepts_json, mut accepts_sse) = (false, false);
    for essence in accepted_media_types(headers) {
        accepts_json |= essence.eq_ignore_ascii_case(JSON);
        accepts_sse |= essence.eq_ignore_ascii_case(EVENT_STREAM);
    }
    json && accepts_json && accepts_sse
}

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// The media ranges of every `Accept` header (RFC 9110 §12.5.1) whose
/// weight is not zero, each without its parameters: entries and
/// parameters are split at `,` and `;` outside quoted strings (§5.6.4).
fn accepted_media_types(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| split_unquoted(value, ','))
        .filter_map(|entry| {
            let mut parts = split_unquoted(entry, ';');
            let essence = parts.next()?.trim();
            parts
                .all(|parameter| match parameter.split_once('=') {
                    Some((name, value)) => {
                        !name.trim().eq_ignore_ascii_case("q") || nonzero_quality(value.trim())
                    }
                    None => true,
                })
                .then_some(essence)
        })
}

/// `value` cut at each `delimiter` outside a quoted string; a quoted-pair
/// (`\"`) does not end the string (RFC 9110 §5.6.4).
fn split_unquoted(value: &str, delimiter: char) -> impl Iterator<Item = &str> {
    let (mut quoted, mut escaped) = (false, false);
    value.split(move |character| {
        if escaped {
            escaped = false;
        } else if quoted && character == '\\' {
            escaped = true;
        } else if character == '"' {
            quoted = !quoted;
        } else if !quoted && character == delimiter {
            return true;
        }
        false
    })
}

/// Whether a `q` weight leaves its media range accepted: anything but an
/// explicit zero (`0`, `0.`, `0.0`, `0.000`; RFC 9110 §12.4.2). A weight
/// outside the RFC's grammar (`abc`, `0.0001`) is ignored, as rmcp ignores
/// it, and so accepts.
fn nonzero_quality(quality: &str) -> bool {
    let (whole, fraction) = quality.split_once('.').unwrap_or((quality, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|digit| digit.is_ascii_digit()) {
        return true;
    }
    whole != "0" || fraction.bytes().any(|digit| digit != b'0')
}

fn plain(status: StatusCode, text: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn jsonrpc(status: StatusCode, refusal: &Refusal) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(refusal.to_json())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An origin as RFC 6454 §6 serializes it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    /// `null`: sandboxed documents, `file:` pages, some redirects.
    Null,
    Tuple {
        /// Lower case.
        scheme: String,
        /// Lower case; an IPv6 address in brackets.
        host: String,
        /// The port, or the scheme's default; `None` for a scheme without one.
        port: Option<u16>,
    },
}

impl Origin {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("null") {
            return Some(Self::Null);
        }
        let uri = http::Uri::try_from(text).ok()?;
        let scheme = uri.scheme_str()?.to_ascii_lowercase();
        let authority = uri.authority()?;
        if authority.as_str().contains('@')
            || !matches!(uri.path(), "" | "/")
            || uri.query().is_some()
            || text.ends_with('/')
        {
            return None;
        }
        let default_port = match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        };
        Some(Self::Tuple {
            host: authority.host().to_ascii_lowercase(),
            port: authority.port_u16().or(default_port),
            scheme,
        })
    }
}

/// An origin [`HttpGuard::allow_origin`] cannot read; holds the text given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidOrigin(pub String);

impl fmt::Display for InvalidOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not an origin: write scheme://host or scheme://host:port, without a path, or null",
            escape::quoted(&self.0)
        )
    }
}

impl std::error::Error for InvalidOrigin {}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> HttpGuard {
        HttpGuard::for_address("127.0.0.1:8080".parse().unwrap())
    }

    fn origin_refused(guard: &HttpGuard, origin: &str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN, HeaderValue::from_str(origin).unwrap());
        guard.refuse_origin(&headers).is_some()
    }

    #[test]
    fn own_loopback_origins_pass_and_others_are_refused() {
        let guard = loopback();
        for own in [
            "http://127.0.0.1:8080",
            "http://localhost:8080",
            "HTTP://LOCALHOST:8080",
            "http://[::1]:8080",
        ] {
            assert!(!origin_refused(&guard, own), "{own}");
        }
        for foreign in [
            "http://evil.example",
            "http://127.0.0.1:8081",
            "https://localhost:8080",
            "http://localhost",
            "null",
            "not an origin",
        ] {
            assert!(origin_refused(&guard, foreign), "{foreign}");
        }
        assert!(guard.refuse_origin(&HeaderMap::new()).is_none());
    }

    #[test]
    fn allowed_origins_match_by_scheme_host_and_port() {
        let guard = loopback()
            .allow_origin("https://app.example.com")
            .unwrap()
            .allow_origin("null")
            .unwrap();
        assert!(!origin_refused(&guard, "https://app.example.com:443"));
        assert!(!origin_refused(&guard, "https://APP.example.com"));
        assert!(!origin_refused(&guard, "null"));
        assert!(origin_refused(&guard, "http://app.example.com"));
        assert!(origin_refused(&guard, "https://app.example.com:8443"));
    }

    #[test]
    fn an_origin_with_a_path_is_not_an_origin() {
        let error = loopback()
            .allow_origin("https://app.example.com/x")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "\"https://app.example.com/x\" is not an origin: write scheme://host or \
             scheme://host:port, without a path, or null"
        );
        assert!(loopback().allow_origin("app.example.com").is_err());
    }

    #[test]
    fn a_declared_length_over_the_limit_is_too_long_before_any_read() {
        let post = |length: Option<&str>, body: &'static str| {
            let mut request = Request::post("/mcp");
            if let Some(length) = length {
                request = request.header(CONTENT_LENGTH, length);
            }
            request
                .body(Full::new(Bytes::from_static(body.as_bytes())))
                .unwrap()
        };
        // The header alone says so; the body is never looked at.
        assert!(declared_too_long(&post(Some("1000000000000"), "{}"), 10));
        assert!(declared_too_long(&post(Some("11"), "{}"), 10));
        assert!(!declared_too_long(&post(Some("10"), "{}"), 10));
        // A body that knows its size says so too.
        assert!(declared_too_long(&post(None, "{\"a\":\"123456\"}"), 10));
        assert!(!declared_too_long(&post(None, "{}"), 10));
        assert!(!declared_too_long(&post(Some("x"), "{}"), 10));
    }

    #[test]
    fn only_bodies_rmcp_would_read_are_checked() {
        let headers = |content_type: &str, accept: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_str(content_type).unwrap());
            headers.insert(ACCEPT, HeaderValue::from_str(accept).unwrap());
            headers
        };
        let both = "application/json, text/event-stream";
        assert!(rmcp_reads_body(&headers("application/json", both)));
        assert!(rmcp_reads_body(&headers(
            "Application/JSON; charset=utf-8",
            both
        )));
        assert!(!rmcp_reads_body(&headers("text/plain", both)));
        assert!(!rmcp_reads_body(&headers(
            "application/json",
            "application/json"
        )));
        assert!(!rmcp_reads_body(&headers(
            "application/json",
            "application/json, text/event-stream;q=0"
        )));
        assert!(rmcp_reads_body(&headers(
            "application/json",
            "application/json;q=0.5, text/event-stream;q=1"
        )));
        // A `,` or `;` inside a quoted parameter value splits nothing.
        assert!(rmcp_reads_body(&headers(
            "application/json",
            r#"application/json, text/event-stream;x=";q=0;""#
        )));
        assert!(!rmcp_reads_body(&headers(
            "application/json",
            r#"application/json;x="a,text/event-stream""#
        )));
        // A weight outside RFC 9110's grammar is ignored, as rmcp ignores it.
        assert!(rmcp_reads_body(&headers(
            "application/json",
            "application/json;q=abc, text/event-stream;q=0.0001"
        )));
    }

    /// A handler with nothing but rmcp's defaults.
    #[derive(Clone)]
    struct Quiet;

    impl rmcp::ServerHandler for Quiet {}

    type Rmcp = rmcp::transport::StreamableHttpService<
        Quiet,
        rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
    >;

    fn rmcp_service() -> Rmcp {
        rmcp::transport::StreamableHttpService::new(
            || Ok(Quiet),
            Default::default(),
            Default::default(),
        )
    }

    /// A POST of `body` to `/mcp` on loopback with these `Content-Type`
    /// and `Accept` headers (raw bytes, each `Accept` one header).
    fn post_with(
        content_type: Option<&[u8]>,
        accepts: &[Vec<u8>],
        body: &str,
    ) -> Request<Full<Bytes>> {
        let mut request = Request::post("http://127.0.0.1:8080/mcp")
            .header(http::header::HOST, "127.0.0.1:8080")
            .body(Full::new(Bytes::from(body.to_owned())))
            .unwrap();
        let headers = request.headers_mut();
        if let Some(content_type) = content_type {
            headers.insert(CONTENT_TYPE, HeaderValue::from_bytes(content_type).unwrap());
        }
        for accept in accepts {
            headers.append(ACCEPT, HeaderValue::from_bytes(accept).unwrap());
        }
        request
    }

    /// `service`'s answer to `request`: status and body text (none read
    /// for a success).
    async fn answer<S, B, ResBody>(service: &mut S, request: Request<B>) -> (StatusCode, String)
    where
        S: tower_service::Service<Request<B>, Response = Response<ResBody>>,
        S::Error: fmt::Debug,
        ResBody: Body<Data = Bytes>,
        ResBody::Error: fmt::Debug,
    {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .unwrap();
        let response = service.call(request).await.unwrap();
        let status = response.status();
        if status.is_success() {
            // A served request's SSE stream stays open: not read.
            return (status, String::new());
        }
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// A `Content-Type` (or none) and the `Accept` headers, as bytes.
    type Headers = (Option<Vec<u8>>, Vec<Vec<u8>>);

    /// Header combinations, drawn from the pieces that rmcp and a naive
    /// reader of `Accept` may read differently: quoted strings holding `,`,
    /// `;`, `"` and escapes, unterminated quotes, zero and malformed
    /// weights, case, spaces, repeated headers and bytes that are not ASCII.
    fn header_corpus(seed: u64, count: usize) -> Vec<Headers> {
        const RANGES: &[&str] = &[
            "application/json",
            "text/event-stream",
            "APPLICATION/JSON",
            "Text/Event-Stream",
            " text/event-stream ",
            "*/*",
            "text/*",
            "text/html",
            "application/json-seq",
            "",
        ];
        const PARAMETERS: &[&str] = &[
            "q=0",
            "q=0.0",
            "q=0.",
            "Q=0",
            " q = 0.000 ",
            "q=0.5",
            "q=1",
            "q=abc",
            "q=",
            "q",
            "q=0.0001",
            r#"x=";q=0;""#,
            r#"x="a,b""#,
            r#"x="\";q=0""#,
            r#"x="a\"b,text/event-stream""#,
            r#"x="unterminated"#,
            r#"profile="a;q=0""#,
            "charset=utf-8",
        ];
        const CONTENT_TYPES: &[&[u8]] = &[
            b"application/json",
            b"application/json; charset=utf-8",
            b"Application/JSON",
            b" application/json ",
            b"application/json;x=\";\"",
            b"application/json, text/plain",
            b"text/plain",
            b"application/jsonx",
            b"",
            b"application/json\xc3\xa9",
        ];
        let mut random = fastrand::Rng::with_seed(seed);
        (0..count)
            .map(|_| {
                let content_type = (random.u8(..10) != 0)
                    .then(|| CONTENT_TYPES[random.usize(..CONTENT_TYPES.len())].to_vec());
                let accepts = (0..random.usize(1..=2))
                    .map(|_| {
                        let entries: Vec<String> = (0..random.usize(1..=4))
                            .map(|_| {
                                let mut entry = RANGES[random.usize(..RANGES.len())].to_owned();
                                for _ in 0..random.usize(0..=2) {
                                    entry.push(';');
                                    entry.push_str(PARAMETERS[random.usize(..PARAMETERS.len())]);
                                }
                                entry
                            })
                            .collect();
                        let mut accept = entries
                            .join(if random.bool() { ", " } else { "," })
                            .into_bytes();
                        if random.u8(..20) == 0 {
                            accept.extend_from_slice("é".as_bytes());
                        }
                        accept
                    })
                    .collect();
                (content_type, accepts)
            })
            .collect()
    }

    #[tokio::test]
    async fn the_guard_decides_as_rmcp_which_bodies_rmcp_reads() {
        // rmcp answers a body it read and cannot parse 415 "fail to
        // deserialize", and headers it refuses 406 or 415 "Unsupported
        // Media Type" without reading the body.
        let mut rmcp = rmcp_service();
        let initialize = r#"{"jsonrpc":"2.0","id":1.0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let refused_id = r#"{"jsonrpc":"2.0","id":1.0,"error":{"code":-32600,"message":"Invalid Request: request id 1.0 is not a string or a 64-bit integer in plain decimal (no fraction, exponent or -0)"}}"#;
        let mut guarded = loopback().service(rmcp_service());
        let mut corpus = header_corpus(0x5eed_a11c, 1500);
        corpus.push((
            Some(b"application/json".to_vec()),
            vec![br#"application/json, text/event-stream;x=";q=0;""#.to_vec()],
        ));
        let mut differ = Vec::new();
        for (content_type, accepts) in &corpus {
            let (status, text) =
                answer(&mut rmcp, post_with(content_type.as_deref(), accepts, "{")).await;
            let rmcp_read = match status {
                StatusCode::NOT_ACCEPTABLE => false,
                StatusCode::UNSUPPORTED_MEDIA_TYPE
                    if text.starts_with("Unsupported Media Type") =>
                {
                    false
                }
                StatusCode::UNSUPPORTED_MEDIA_TYPE if text.starts_with("fail to deserialize") => {
                    true
                }
                other => panic!("rmcp answered {other} {text:?}"),
            };
            let request = post_with(content_type.as_deref(), accepts, initialize);
            let guard_reads = rmcp_reads_body(request.headers());
            // Through the guard, an id rmcp would rewrite never reaches it:
            // the guard refuses it, or rmcp refuses the headers unread.
            let (status, text) = answer(&mut guarded, request).await;
            let refused = if rmcp_read {
                status == StatusCode::BAD_REQUEST && text == refused_id
            } else {
                matches!(
                    status,
                    StatusCode::NOT_ACCEPTABLE | StatusCode::UNSUPPORTED_MEDIA_TYPE
                )
            };
            if guard_reads != rmcp_read || !refused {
                let shown = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
                differ.push(format!(
                    "Content-Type {:?}, Accept {:?}: rmcp reads {rmcp_read}, the guard {guard_reads}; guarded {status} {text:?}",
                    content_type.as_deref().map(shown),
                    accepts.iter().map(|accept| shown(accept)).collect::<Vec<_>>(),
                ));
            }
        }
        assert!(
            differ.is_empty(),
            "{} of {}:\n{}",
            differ.len(),
            corpus.len(),
            differ.join("\n")
        );
    }

    /// Keeps what the guard passed on: the message in the extensions and
    /// the body.
    #[derive(Clone, Default)]
    struct Keep(Arc<std::sync::Mutex<Option<Passed>>>);

    /// The message in the extensions (if any) and the body.
    type Passed = (Option<CheckedMessage>, Bytes);

    impl<B> tower_service::Service<Request<B>> for Keep
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: fmt::Debug,
    {
        type Response = Response<Full<Bytes>>;
        type Error = std::convert::Infallible;
        type Future = BoxFuture<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, mut request: Request<B>) -> Self::Future {
            let kept = self.0.clone();
            Box::pin(async move {
                let message = request.extensions_mut().remove::<CheckedMessage>();
                let body = request.into_body().collect().await.unwrap().to_bytes();
                *kept.lock().unwrap() = Some((message, body));
                Ok(Response::new(Full::new(Bytes::new())))
            })
        }
    }

    #[tokio::test]
    async fn a_body_that_passes_goes_on_with_the_message_the_guard_read_when_asked() {
        let keep = Keep::default();
        let mut guarded = loopback().pass_message(true).service(keep.clone());
        let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
        let both = [b"application/json, text/event-stream".to_vec()];
        // With a leading byte order mark, which neither gets.
        let request = post_with(Some(b"application/json"), &both, &format!("\u{feff}{body}"));
        let (status, _) = answer(&mut guarded, request).await;
        assert_eq!(status, StatusCode::OK);
        let (message, passed) = keep.0.lock().unwrap().take().expect("passed on");
        assert_eq!(passed, body.as_bytes());
        let expected: ClientJsonRpcMessage = serde_json::from_str(body).unwrap();
        assert_eq!(
            serde_json::to_value(message.expect("the message").into_message()).unwrap(),
            serde_json::to_value(expected).unwrap()
        );
        // A body the guard does not read (rmcp answers its headers) has none.
        let unread = post_with(Some(b"text/plain"), &both, body);
        let _ = answer(&mut guarded, unread).await;
        let (message, _) = keep.0.lock().unwrap().take().expect("passed on");
        assert!(message.is_none());
        // Without `pass_message`, none either.
        let mut plain = loopback().service(keep.clone());
        let request = post_with(Some(b"application/json"), &both, body);
        let _ = answer(&mut plain, request).await;
        let (message, passed) = keep.0.lock().unwrap().take().expect("passed on");
        assert!(message.is_none());
        assert_eq!(passed, body.as_bytes());
    }
}

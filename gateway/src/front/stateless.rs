//! A stateless 2026-07-28 `tools/call` over HTTP, answered by the call's
//! steps in the connection's own task: the request a gateway serves most
//! often, taken from rmcp's per-request server, which for each such
//! request starts a service loop and a handler task and passes the answer
//! through two channels (about a fifth of the gateway's CPU time at 64
//! connections on two cores, by a profile).
//!
//! Only a request every one of whose checks rmcp 3.11 would pass is taken,
//! and its answer is the one rmcp would give, byte for byte (but for a
//! call still running when the gateway stops: rmcp's status, 500, with
//! words that say the call may have run instead of rmcp's "no response
//! message received from handler"): what
//! [`admit`] lets through is read the way rmcp's `StreamableHttpService`
//! and `ServerHandler::handle_request` read it, and anything else (another
//! method or revision, a session, a `Host` rmcp does not allow, a header
//! rmcp would refuse or decode, `_meta` rmcp would refuse) goes on to rmcp
//! untouched, which answers it as it always did. A test sends each
//! admitted request also in a form only rmcp takes and compares the
//! answers.
//!
//! Source: MCP basic/transports/streamable-http (2026-07-28): a request
//! carries its protocol version in `_meta` and the `MCP-Protocol-Version`
//! header, and `Mcp-Method` and `Mcp-Name` repeat its method and name
//! (SEP-2243); a server may answer a request with one JSON body.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use mcp_hints::wire::{CheckedMessage, GuardedBody};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorCode, GetMeta as _,
    ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use tokio_util::sync::CancellationToken;

use super::Front;
use super::call::CallContext;

/// The response body, rmcp's own (so that both kinds of answer are one
/// type).
type Body = BoxBody<Bytes, Infallible>;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The one revision taken: the first without sessions, whose requests
/// carry everything they need. A later one goes to rmcp, which knows
/// what it changed.
const REVISION: &str = "2026-07-28";

/// The `Mcp-Name` form rmcp decodes (`=?base64?…?=`, SEP-2243's value
/// encoding); such a name goes to rmcp.
const ENCODED_PREFIX: &str = "=?base64?";

/// The service between the HTTP guard and rmcp's `StreamableHttpService`
/// (`inner`): answers the stateless `tools/call` requests [`admit`] takes,
/// passes every other request to `inner`.
#[derive(Clone)]
pub(super) struct StatelessCalls<S> {
    inner: S,
    shared: Arc<Shared>,
}

struct Shared {
    /// Whether rmcp's handler would take a 2026-07-28 request of `front`
    /// (its `supported_protocol_versions` name the revision).
    enabled: bool,
    front: Front,
    /// rmcp's `allowed_hosts` (the `Host` names it answers to).
    hosts: Vec<Authority>,
    /// rmcp's `cancellation_token`: when it is cancelled, a call still
    /// running gets no answer from rmcp, and is told to stop.
    stopping: CancellationToken,
}

impl<S> StatelessCalls<S> {
    /// `inner`'s stateless `tools/call` answered by `front`, for an rmcp
    /// service whose config allows `allowed_hosts` and is cancelled by
    /// `stopping`, and which checks no `Origin` itself (the guard does)
    /// and does not require protocol metadata beyond the spec's
    /// (`stateless_protocol_metadata_required` off).
    pub(super) fn new(
        inner: S,
        front: Front,
        allowed_hosts: &[String],
        stopping: CancellationToken,
    ) -> StatelessCalls<S> {
        let hosts = allowed_hosts
            .iter()
            .filter_map(|allowed| Authority::allowed(allowed))
            .collect();
        // An empty list is rmcp's "any host"; no list here is empty.
        debug_assert!(!allowed_hosts.is_empty());
        StatelessCalls {
            inner,
            shared: Arc::new(Shared {
                enabled: front
                    .supported_protocol_versions()
                    .iter()
                    .any(|version| version.as_str() == REVISION),
                front,
                hosts,
                stopping,
            }),
        }
    }
}

impl<S, B> tower_service::Service<Request<GuardedBody<B>>> for StatelessCalls<S>
where
    S: tower_service::Service<
            Request<GuardedBody<B>>,
            Response = Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, mut request: Request<GuardedBody<B>>) -> Self::Future {
        let checked = request
            .extensions_mut()
            .remove::<CheckedMessage>()
            .filter(|_| self.shared.enabled);
        let admitted = checked.and_then(|checked| {
            admit(
                request.headers(),
                request.uri(),
                &self.shared.hosts,
                checked.into_message(),
            )
        });
        match admitted {
            Some(call) => {
                let (parts, _body) = request.into_parts();
                Box::pin(answer(self.shared.clone(), call, parts))
            }
            None => {
                // The service polled ready is the one that is called.
                let ready = self.inner.clone();
                let mut inner = std::mem::replace(&mut self.inner, ready);
                Box::pin(inner.call(request))
            }
        }
    }
}

/// A request [`admit`] took: its id, params and `_meta` (taken out of the
/// params, as rmcp hands them to a handler).
#[derive(Debug)]
struct Admitted {
    id: RequestId,
    params: CallToolRequestParams,
    meta: RequestMetaObject,
}

/// The `tools/call` of `message` when rmcp 3.11 would pass every check of
/// its request (a POST whose body the guard read, so of the media types
/// rmcp reads) and hand it to the handler as a stateless 2026-07-28
/// request; `None` for anything else, which goes to rmcp:
///
/// - no absolute URI (its authority would be rmcp's `Host`), and one
///   `Host` header naming an allowed host (rmcp's DNS-rebinding check);
/// - no `Mcp-Session-Id` (a session is rmcp's);
/// - one `MCP-Protocol-Version`, [`REVISION`], and the same version in
///   `_meta`, with every key 2026-07-28 requires there (rmcp answers
///   anything else with 400 or an error of its own);
/// - one `Mcp-Method`, `tools/call`, and one `Mcp-Name`, the called name
///   as it is (rmcp decodes an encoded one; the gateway's tools declare
///   no `Mcp-Param-*` headers, so rmcp checks none).
fn admit(
    headers: &HeaderMap,
    uri: &http::Uri,
    hosts: &[Authority],
    message: ClientJsonRpcMessage,
) -> Option<Admitted> {
    if uri.authority().is_some() || headers.contains_key("mcp-session-id") {
        return None;
    }
    let host = Authority::requested(only(headers, header::HOST.as_str())?)?;
    if !hosts.iter().any(|allowed| allowed.admits(&host)) {
        return None;
    }
    if only(headers, "mcp-protocol-version")? != REVISION
        || only(headers, "mcp-method")? != "tools/call"
    {
        return None;
    }
    let ClientJsonRpcMessage::Request(mut request) = message else {
        return None;
    };
    // Out of the request, as rmcp hands it to a handler beside the params.
    let meta = std::mem::take(request.request.get_meta_mut());
    let ClientRequest::CallToolRequest(call) = request.request else {
        return None;
    };
    let name = only(headers, "mcp-name")?;
    if name.starts_with(ENCODED_PREFIX) || name != call.params.name {
        return None;
    }
    let revision = ProtocolVersion::V_2026_07_28;
    if meta.protocol_version().as_ref() != Some(&revision)
        || !meta.missing_required_keys(&revision).is_empty()
    {
        return None;
    }
    Some(Admitted {
        id: request.id,
        params: call.params,
        meta,
    })
}

/// The one value of header `name`, as text; `None` when it is absent,
/// repeated or not visible ASCII (rmcp refuses the last two).
fn only<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// A `Host` value or an allowed host, as rmcp compares them: the host
/// without brackets, in lower case, and its port.
#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn new(host: &str, port: Option<u16>) -> Authority {
        Authority {
            host: host
                .trim_matches('[')
                .trim_matches(']')
                .to_ascii_lowercase(),
            port,
        }
    }

    /// A request's `Host`; `None` for one rmcp cannot read (it answers
    /// 400).
    fn requested(value: &str) -> Option<Authority> {
        let authority = http::uri::Authority::try_from(value).ok()?;
        Some(Authority::new(authority.host(), authority.port_u16()))
    }

    /// An entry of `allowed_hosts`, read as rmcp reads it: an authority,
    /// or else a bare host; `None` for an empty one.
    fn allowed(entry: &str) -> Option<Authority> {
        let entry = entry.trim();
        if entry.is_empty() {
            return None;
        }
        Some(match http::uri::Authority::try_from(entry) {
            Ok(authority) => Authority::new(authority.host(), authority.port_u16()),
            Err(_) => Authority::new(entry, None),
        })
    }

    /// Whether this allowed host admits `requested`: the same host, and
    /// the same port unless this one names none.
    fn admits(&self, requested: &Authority) -> bool {
        self.host == requested.host && self.port.is_none_or(|port| requested.port == Some(port))
    }
}

/// The answer to an admitted call: the call's steps, run here; its result
/// or error as one JSON body, with the status rmcp gives it.
async fn answer(
    shared: Arc<Shared>,
    call: Admitted,
    parts: http::request::Parts,
) -> Result<Response<Body>, Infallible> {
    let cancelled = CancellationToken::new();
    let front = shared.front.clone();
    let token = cancelled.clone();
    let Admitted { id, params, meta } = call;
    let steps = async move {
        let context = CallContext {
            cancelled: &token,
            meta: &meta,
            http: Some(&parts),
        };
        front.call_tool_in(params, &context).await
    };
    let running = RunToEnd::new(steps, cancelled);
    let answer = tokio::select! {
        answer = running => answer,
        () = shared.stopping.cancelled() => {
            // As rmcp answers a stateless request its service stopped
            // before it was answered: 500, a status that invites no resend
            // (the call may have gone on), with words of the gateway's own
            // instead of rmcp's. The call, told to stop, finishes on its
            // own and logs how it ended.
            return Ok(plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the gateway stopped before the call was answered; \
                 it may have run",
            ));
        }
    };
    let message = match answer {
        Ok(result) => ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id),
        // As it is: rmcp's handler returns a `tools/call` error before it
        // maps any code (its RESOURCE_NOT_FOUND to INVALID_PARAMS is for
        // the other methods).
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    };
    let status = status(&message);
    Ok(match serde_json::to_vec(&message) {
        Ok(body) => Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)).boxed())
            .unwrap_or_else(|_| unreachable!("a status and a static header")),
        Err(error) => {
            tracing::error!(%error, "cannot serialise a call's answer: {error}");
            plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the answer could not be serialised",
            )
        }
    })
}

/// The HTTP status of a stateless 2026-07-28 answer, as rmcp 3.11's
/// `jsonrpc_http_status` gives it (for a request whose `_meta` is whole,
/// as every admitted one's is): 400 for an unsupported version, a missing
/// client capability or a header mismatch, 404 for an unknown method, 200
/// for a result and any other error.
fn status(message: &ServerJsonRpcMessage) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(text.as_bytes())).boxed())
        .unwrap_or_else(|_| unreachable!("a status and a static header"))
}

/// A call's steps, run in the task that polls this; dropped before they
/// end (the client closed its connection, or the gateway stopped
/// answering), they are cancelled, as rmcp cancels a stateless request
/// whose client went away, and go on in a task of their own, so that a
/// parked call is abandoned and every step's audit entry is still
/// written.
struct RunToEnd<F: Future + Send + 'static>
where
    F::Output: Send,
{
    steps: Option<Pin<Box<F>>>,
    cancelled: CancellationToken,
}

impl<F: Future + Send + 'static> RunToEnd<F>
where
    F::Output: Send,
{
    fn new(steps: F, cancelled: CancellationToken) -> RunToEnd<F> {
        RunToEnd {
            steps: Some(Box::pin(steps)),
            cancelled,
        }
    }
}

impl<F: Future + Send + 'static> Future for RunToEnd<F>
where
    F::Output: Send,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<F::Output> {
        let Some(steps) = self.steps.as_mut() else {
            unreachable!("polled after it ended")
        };
        let output = std::task::ready!(steps.as_mut().poll(context));
        self.steps = None;
        Poll::Ready(output)
    }
}

impl<F: Future + Send + 'static> Drop for RunToEnd<F>
where
    F::Output: Send,
{
    fn drop(&mut self) {
        let Some(steps) = self.steps.take() else {
            return;
        };
        self.cancelled.cancel();
        // Dropped in the connection's task, so on the runtime; off it
        // (the runtime itself shutting down) there is nothing to go on on.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(steps);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__list_notes","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    fn admitted(headers: &HeaderMap, body: &str) -> Option<Admitted> {
        let hosts: Vec<Authority> = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .filter_map(|host| Authority::allowed(host))
            .collect();
        let message = serde_json::from_str::<ClientJsonRpcMessage>(body).unwrap();
        admit(headers, &"/".parse().unwrap(), &hosts, message)
    }

    #[test]
    fn a_whole_stateless_call_is_admitted() {
        let ok = headers(&[
            ("host", "127.0.0.1:18080"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "notes__list_notes"),
        ]);
        let call = admitted(&ok, BODY).expect("admitted");
        assert_eq!(call.id, RequestId::Number(7));
        assert_eq!(call.params.name, "notes__list_notes");
    }

    /// Each request that differs from a whole stateless call in one way
    /// rmcp would answer otherwise, or that rmcp reads in a way this
    /// module does not, goes to rmcp.
    #[test]
    fn anything_rmcp_would_answer_otherwise_goes_to_rmcp() {
        let base = [
            ("host", "127.0.0.1:18080"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "notes__list_notes"),
        ];
        let with = |name: &'static str, value: Option<&str>, extra: bool| {
            let mut pairs: Vec<(&'static str, &str)> = base
                .iter()
                .copied()
                .filter(|(key, _)| extra || *key != name)
                .collect();
            if let Some(value) = value {
                pairs.push((name, value));
            }
            headers(&pairs)
        };
        let refused_headers = [
            ("no Host", with("host", None, false)),
            ("two Hosts", with("host", Some("localhost"), true)),
            (
                "a foreign Host",
                with("host", Some("evil.example:18080"), false),
            ),
            (
                "a Host that is not an authority",
                with("host", Some("a b"), false),
            ),
            ("a session", with("mcp-session-id", Some("abc"), true)),
            ("no version", with("mcp-protocol-version", None, false)),
            (
                "an older version",
                with("mcp-protocol-version", Some("2025-11-25"), false),
            ),
            (
                "a later version",
                with("mcp-protocol-version", Some("2027-01-01"), false),
            ),
            (
                "two versions",
                with("mcp-protocol-version", Some("2026-07-28"), true),
            ),
            ("no Mcp-Method", with("mcp-method", None, false)),
            (
                "another Mcp-Method",
                with("mcp-method", Some("tools/list"), false),
            ),
            (
                "two Mcp-Methods",
                with("mcp-method", Some("tools/call"), true),
            ),
            ("no Mcp-Name", with("mcp-name", None, false)),
            (
                "another Mcp-Name",
                with("mcp-name", Some("notes__other"), false),
            ),
            (
                "two Mcp-Names",
                with("mcp-name", Some("notes__list_notes"), true),
            ),
            (
                "an encoded Mcp-Name",
                with(
                    "mcp-name",
                    Some("=?base64?bm90ZXNfX2xpc3Rfbm90ZXM=?="),
                    false,
                ),
            ),
        ];
        for (what, headers) in &refused_headers {
            assert!(admitted(headers, BODY).is_none(), "admitted with {what}");
        }
        let ok = headers(&base);
        let refused_bodies = [
            (
                "a tools/list",
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            ),
            (
                "a notification",
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
            ),
            (
                "no _meta",
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__list_notes","arguments":{}}}"#,
            ),
            (
                "another version in _meta",
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__list_notes","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            ),
            (
                "no client capabilities in _meta",
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes__list_notes","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            ),
        ];
        for (what, body) in refused_bodies {
            assert!(admitted(&ok, body).is_none(), "admitted with {what}");
        }
        // What is admitted: an allowed name with any port or none, in any
        // case, IPv6 in brackets; `_meta` goes with the call, not its
        // params.
        for host in ["localhost", "LOCALHOST:1", "[::1]:18080", "127.0.0.1"] {
            let call = admitted(&with("host", Some(host), false), BODY)
                .unwrap_or_else(|| panic!("{host} refused"));
            assert!(call.params.meta.is_none());
            assert!(call.meta.protocol_version().is_some());
        }
        let absolute = admit(
            &ok,
            &"http://127.0.0.1:18080/mcp".parse().unwrap(),
            &[Authority::allowed("127.0.0.1").unwrap()],
            serde_json::from_str(BODY).unwrap(),
        );
        assert!(absolute.is_none(), "an absolute URI is rmcp's");
    }

    /// rmcp's `allowed_hosts` entries: with a port only that port.
    #[test]
    fn an_allowed_host_with_a_port_admits_only_that_port() {
        let allowed = Authority::allowed("10.0.0.7:8080").unwrap();
        assert!(allowed.admits(&Authority::requested("10.0.0.7:8080").unwrap()));
        assert!(!allowed.admits(&Authority::requested("10.0.0.7:8081").unwrap()));
        assert!(!allowed.admits(&Authority::requested("10.0.0.7").unwrap()));
        assert!(Authority::allowed(" ").is_none());
    }
}

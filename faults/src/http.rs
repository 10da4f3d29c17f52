//! The streamable HTTP mode: an HTTP/1.1 reverse proxy on a loopback address
//! that relays every request to one upstream and applies faults to the
//! `tools/call` requests found in POST bodies.

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::body::{ProxyBody, Replayed, SignalWhenTaken, boxed};
use crate::inject::{Fired, Injector};
use crate::jsonrpc::{response_ids, tool_calls};
use crate::process::kill_process;
use crate::spec::Action;
use crate::sse::{self, Until};

/// How long connecting to the upstream may take before the client gets 502.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// After a failed `accept` (out of file descriptors, say): how long to wait
/// before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// and `expect`, which the proxy has already answered by reading the body.
const HOP_BY_HOP: [HeaderName; 10] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::EXPECT,
];

/// Where requests go: an `http://HOST[:PORT]` URL. Its path is not used;
/// each request keeps its own path and query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// The host to connect to, without IPv6 brackets.
    host: String,
    port: u16,
    /// The `Host` header sent upstream: the URL's authority as written.
    authority: HeaderValue,
}

/// Why an upstream URL was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamError(String);

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UpstreamError {}

impl FromStr for Upstream {
    type Err = UpstreamError;

    fn from_str(url: &str) -> Result<Self, UpstreamError> {
        let uri: Uri = url.parse().map_err(|error| {
            UpstreamError(format!("not a URL ({error}): expected `http://HOST:PORT`"))
        })?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => {
                return Err(UpstreamError(format!(
                    "`{other}` upstreams are not supported: the proxy speaks plain `http` only"
                )));
            }
            None => {
                return Err(UpstreamError(
                    "the scheme is missing: expected `http://HOST:PORT`".into(),
                ));
            }
        }
        let Some(authority) = uri.authority() else {
            return Err(UpstreamError(
                "the host is missing: expected `http://HOST:PORT`".into(),
            ));
        };
        if authority.as_str().contains('@') {
            return Err(UpstreamError(
                "credentials in the URL are not supported: remove `USER@`".into(),
            ));
        }
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|host| host.strip_suffix(']'))
            .unwrap_or(host);
        Ok(Upstream {
            host: host.to_owned(),
            port: authority.port_u16().unwrap_or(80),
            authority: HeaderValue::from_str(authority.as_str())
                .map_err(|error| UpstreamError(error.to_string()))?,
        })
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "http://{}",
            self.authority.to_str().unwrap_or(&self.host)
        )
    }
}

/// Settings of the HTTP mode.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Where to listen; must be a loopback address. Port 0 picks a free port
    /// (read it back with [`HttpProxy::local_addr`]).
    pub listen: SocketAddr,
    /// Where to relay to.
    pub upstream: Upstream,
    /// The upstream server's process id, killed by `kill-server` and
    /// `kill-after-response`.
    pub upstream_pid: Option<i32>,
}

/// The reason a connection was closed without a response: hyper's HTTP/1
/// server closes the connection, writing nothing, when a service fails.
#[derive(Debug)]
struct Aborted;

impl fmt::Display for Aborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the connection was closed by a fault")
    }
}

impl std::error::Error for Aborted {}

/// A bound HTTP proxy, ready to [`serve`](HttpProxy::serve).
#[derive(Debug)]
pub struct HttpProxy {
    listener: TcpListener,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    upstream: Upstream,
    upstream_pid: Option<i32>,
    injector: Arc<Injector>,
}

impl HttpProxy {
    /// Binds `config.listen`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` when the address is not loopback (the proxy injects
    /// faults into whatever reaches it, so it stays on this machine), or
    /// when a spec kills the server and `config.upstream_pid` is missing or
    /// below 1; the OS error when the address cannot be bound.
    pub async fn bind(config: HttpConfig, injector: Arc<Injector>) -> io::Result<Self> {
        if !config.listen.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                not_loopback(&config.listen),
            ));
        }
        let kills = injector
            .specs()
            .iter()
            .any(|spec| spec.action.kills_server());
        match config.upstream_pid {
            Some(pid) if pid < 1 => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{pid} is not a process id"),
                ));
            }
            None if kills => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a `kill-server` or `kill-after-response` fault needs `--upstream-pid PID`",
                ));
            }
            _ => {}
        }
        let listener = TcpListener::bind(config.listen).await?;
        Ok(HttpProxy {
            listener,
            state: Arc::new(State {
                upstream: config.upstream,
                upstream_pid: config.upstream_pid,
                injector,
            }),
        })
    }

    /// The address actually bound (with the real port when 0 was asked).
    ///
    /// # Errors
    ///
    /// The OS error, if the socket cannot say.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections and serves them until the process ends. Each
    /// request gets its own upstream connection, so an upstream restarted on
    /// the same port is picked up by the next request.
    pub async fn serve(self) -> Infallible {
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    eprintln!("fault-proxy: cannot accept a connection: {error}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let state = Arc::clone(&self.state);
            tokio::spawn(async move {
                let service = service_fn(move |request| Arc::clone(&state).handle(request));
                // A failed connection (client gone, or a fault aborting it)
                // concerns that connection only.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// The message for a listen address that is not loopback.
pub fn not_loopback(listen: &SocketAddr) -> String {
    format!("`{listen}` is not a loopback address: the proxy listens on 127.0.0.1 or [::1] only")
}

impl State {
    async fn handle(
        self: Arc<Self>,
        request: Request<Incoming>,
    ) -> Result<Response<ProxyBody>, Aborted> {
        if request.method() != Method::POST {
            return Ok(self.relay(request.map(boxed)).await);
        }
        let (parts, body) = request.into_parts();
        // The client went away mid-body: nobody to answer.
        let body = body.collect().await.map_err(|_| Aborted)?.to_bytes();
        let fired = self.injector.on_message(&tool_calls(&body));
        let request = Request::from_parts(parts, body);
        match fired {
            None => Ok(self.relay(request.map(|body| boxed(Full::new(body)))).await),
            Some(fired) => self.inject(fired, request).await,
        }
    }

    /// Relays `request` and streams the response back.
    async fn relay(&self, request: Request<ProxyBody>) -> Response<ProxyBody> {
        match self.send(request).await {
            Ok(response) => {
                let (mut parts, body) = response.into_parts();
                strip_hop_by_hop(&mut parts.headers);
                Response::from_parts(parts, boxed(body))
            }
            Err(error) => self.bad_gateway(&error),
        }
    }

    async fn inject(
        &self,
        fired: Fired,
        request: Request<Bytes>,
    ) -> Result<Response<ProxyBody>, Aborted> {
        match fired.action {
            Action::DropRequest => {
                self.injector.record(&fired);
                // Never answered; hyper drops this future when the client
                // closes the connection.
                std::future::pending().await
            }
            Action::KillServer(delay) => {
                let (sent, taken) = oneshot::channel();
                let request =
                    request.map(|body| boxed(SignalWhenTaken::new(Full::new(body), sent)));
                let mut sender = match self.connect().await {
                    Ok(sender) => sender,
                    Err(error) => return Ok(self.bad_gateway(&error)),
                };
                // Whatever the upstream answers is never delivered.
                let exchange =
                    tokio::spawn(sender.send_request(upstream_request(request, &self.upstream)));
                // Dropped unsent counts too: the connection failed, and the
                // kill is what the test asked for.
                let _ = taken.await;
                tokio::time::sleep(delay).await;
                self.kill(&fired);
                exchange.abort();
                Err(Aborted)
            }
            Action::DropResponse | Action::DelayResponse(_) | Action::KillAfterResponse => {
                let response = match self.send(request.map(|body| boxed(Full::new(body)))).await {
                    Ok(response) => response,
                    Err(error) => return Ok(self.bad_gateway(&error)),
                };
                let (mut parts, body) = response.into_parts();
                let held = hold_until_response(&parts.headers, body, &fired.id).await;
                match fired.action {
                    Action::DelayResponse(delay) => {
                        self.injector.record(&fired);
                        tokio::time::sleep(delay).await;
                        strip_hop_by_hop(&mut parts.headers);
                        Ok(Response::from_parts(parts, boxed(held)))
                    }
                    Action::KillAfterResponse => {
                        self.kill(&fired);
                        Err(Aborted)
                    }
                    _ => {
                        self.injector.record(&fired);
                        Err(Aborted)
                    }
                }
            }
        }
    }

    /// Records `fired`, then kills the upstream (the pid was checked at
    /// start-up; a server already gone is reported, not fatal).
    fn kill(&self, fired: &Fired) {
        self.injector.record(fired);
        let Some(pid) = self.upstream_pid else { return };
        if let Err(error) = kill_process(pid) {
            eprintln!("fault-proxy: cannot kill upstream process {pid}: {error}");
        }
    }

    async fn connect(
        &self,
    ) -> Result<hyper::client::conn::http1::SendRequest<ProxyBody>, BadGateway> {
        let address = (self.upstream.host.as_str(), self.upstream.port);
        let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => return Err(BadGateway(format!("cannot connect: {error}"))),
            Err(_) => return Err(BadGateway("cannot connect: timed out".into())),
        };
        let _ = stream.set_nodelay(true);
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| BadGateway(error.to_string()))?;
        tokio::spawn(async move {
            // Ends with the response body; its errors reach the body.
            let _ = connection.await;
        });
        Ok(sender)
    }

    async fn send(&self, request: Request<ProxyBody>) -> Result<Response<Incoming>, BadGateway> {
        let mut sender = self.connect().await?;
        sender
            .send_request(upstream_request(request, &self.upstream))
            .await
            .map_err(|error| BadGateway(error.to_string()))
    }

    fn bad_gateway(&self, error: &BadGateway) -> Response<ProxyBody> {
        let text = format!(
            "fault-proxy: upstream {} failed: {}\n",
            self.upstream, error.0
        );
        let mut response = Response::new(boxed(Full::new(Bytes::from(text))));
        *response.status_mut() = StatusCode::BAD_GATEWAY;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

/// Why the upstream gave no response.
#[derive(Debug)]
struct BadGateway(String);

/// The client's request as the upstream gets it: origin-form target, the
/// upstream's `Host`, no hop-by-hop headers.
fn upstream_request(request: Request<ProxyBody>, upstream: &Upstream) -> Request<ProxyBody> {
    let (mut parts, body) = request.into_parts();
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |target| target.as_str());
    parts.uri = Uri::try_from(target).unwrap_or_else(|_| Uri::from_static("/"));
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    parts
        .headers
        .insert(header::HOST, upstream.authority.clone());
    Request::from_parts(parts, body)
}

/// Removes the hop-by-hop headers, and those the `Connection` header names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// Reads `body` until the JSON-RPC response with `id` has gone by: a JSON
/// body is read whole; an event stream up to the event carrying it. Other
/// bodies, and streams that end first, are read to their end.
async fn hold_until_response(headers: &HeaderMap, mut body: Incoming, id: &Value) -> Replayed {
    let event_stream = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    let mut held = BytesMut::new();
    if event_stream {
        match sse::hold_until(&mut body, &mut held, |data| response_ids(data).contains(id)).await {
            Ok(Until::Wanted) => return Replayed::new(held.freeze(), Some(body), None),
            Ok(Until::Ended) => return Replayed::new(held.freeze(), None, None),
            Err(error) => return Replayed::new(held.freeze(), None, Some(error)),
            // No event stream after all: the rest as it comes.
            Ok(Until::Refused) => {}
        }
    }
    loop {
        let frame = match body.frame().await {
            None => return Replayed::new(held.freeze(), None, None),
            Some(Err(error)) => return Replayed::new(held.freeze(), None, Some(error)),
            Some(Ok(frame)) => frame,
        };
        // Trailers are dropped: SSE and JSON responses carry none.
        if let Ok(data) = frame.into_data() {
            held.extend_from_slice(&data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls() {
        let upstream: Upstream = "http://127.0.0.1:8080/mcp".parse().unwrap();
        assert_eq!((upstream.host.as_str(), upstream.port), ("127.0.0.1", 8080));
        assert_eq!(upstream.authority, "127.0.0.1:8080");
        let upstream: Upstream = "http://[::1]/".parse().unwrap();
        assert_eq!((upstream.host.as_str(), upstream.port), ("::1", 80));
        assert_eq!(upstream.to_string(), "http://[::1]");
        for (url, message) in [
            (
                "https://127.0.0.1:1",
                "`https` upstreams are not supported: the proxy speaks plain `http` only",
            ),
            (
                "127.0.0.1:1",
                "the scheme is missing: expected `http://HOST:PORT`",
            ),
            ("/mcp", "the scheme is missing: expected `http://HOST:PORT`"),
            (
                "http://u:p@127.0.0.1:1",
                "credentials in the URL are not supported: remove `USER@`",
            ),
        ] {
            assert_eq!(
                url.parse::<Upstream>().unwrap_err().to_string(),
                message,
                "{url}"
            );
        }
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_go() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("transfer-encoding", "chunked"),
            ("keep-alive", "timeout=5"),
            ("mcp-session-id", "s-1"),
            ("mcp-protocol-version", "2025-06-18"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let mut left: Vec<_> = headers.keys().map(|name| name.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, ["mcp-protocol-version", "mcp-session-id"]);
    }
}

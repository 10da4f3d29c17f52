//! Serving the gateway: one stdio client ([`serve_stdio`]), or streamable
//! HTTP ([`router`] for an application's own axum app, [`serve_http`] to
//! serve it alone), each listener bound loopback-only unless
//! `listen.public`, its connections with `TCP_NODELAY`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::serve::{Listener, ListenerExt};
use mcp_hints::wire::HttpGuard;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};
use tower::Layer;

use super::auth::{BearerAuthLayer, SessionOwnershipLayer};
use super::stateless::StatelessCalls;
use super::{Front, Gateway};
use crate::Error;

#[cfg(doc)]
use crate::approval::Approvals;

/// Serves one stdio client on stdin/stdout (principal `local`), every
/// message checked by the wire guard first, until stdin closes or `stop`
/// resolves (the command's signals). Pipes and sockets are read and written
/// without Tokio's blocking pool ([`mcp_hints::stdio`]).
///
/// # Errors
///
/// [`Error::StdioSession`] when the session cannot start.
pub async fn serve_stdio(
    gateway: Arc<Gateway>,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    let transport = mcp_hints::stdio::guarded();
    let signal = stop;
    tokio::pin!(signal);
    let service = tokio::select! {
        service = Front::stdio(gateway.clone()).serve(transport) => {
            service.map_err(|error| Error::StdioSession {
                error: Box::new(error),
            })?
        }
        () = &mut signal => {
            gateway.close();
            return Ok(());
        }
    };
    let stop = service.cancellation_token();
    tokio::select! {
        _ = service.waiting() => {}
        () = &mut signal => stop.cancel(),
    }
    gateway.close();
    Ok(())
}

/// The gateway's MCP endpoint as an axum [`Router`](axum::Router) serving
/// `/mcp`, for an application to serve or to merge into its own router:
/// the bearer-token check first (401 for any request without a client's
/// token or, with `[auth]`, a valid access token, before anything else is
/// looked at), then the HTTP guard (403 for
/// a foreign `Origin`, 404, 400 and 413), then rmcp's streamable HTTP
/// service, which checks `Host` against loopback names and `bound`, the
/// address the application listens on (DNS rebinding; streamable HTTP
/// transport, "Security Warning"). A stateless 2026-07-28 `tools/call`
/// that passes every one of rmcp's checks is answered by the gateway
/// itself, as rmcp would answer it, without rmcp's per-request server; every
/// other request goes to rmcp. With `[auth]` it also serves the
/// Protected Resource Metadata (RFC 9728) with `GET` at
/// `/.well-known/oauth-protected-resource` and, for an audience with a
/// path (`https://host/mcp`), at that path after it
/// (`/.well-known/oauth-protected-resource/mcp`), without a token. Its sessions end with
/// [`Gateway::end_sessions`].
///
/// Set `TCP_NODELAY` on the connections that reach it (see [`serve_http`]'s
/// listener): without it a client that keeps its connection alive waits
/// for its delayed acknowledgement on each request after the first.
///
/// # Errors
///
/// [`Error::RouterNotLoopback`] when `bound` is not a loopback address
/// and the config does not set `listen.public` (the transport spec: "When
/// running locally, servers SHOULD bind only to localhost");
/// [`Error::AllowOrigin`] for a `listen.allow_origins` entry that is not an
/// origin.
pub fn router(gateway: Arc<Gateway>, bound: SocketAddr) -> Result<axum::Router, Error> {
    if !gateway.config.listen.public && !bound.ip().is_loopback() {
        return Err(Error::RouterNotLoopback { address: bound });
    }
    let mut guard = HttpGuard::for_address(bound);
    for origin in &gateway.config.listen.allow_origins {
        guard = guard
            .allow_origin(origin)
            .map_err(|error| Error::AllowOrigin { error })?;
    }
    let mut config = StreamableHttpServerConfig::default();
    // rmcp checks `Host` (DNS rebinding): loopback names, and here also
    // the bound address.
    config.allowed_hosts = allowed_hosts(bound);
    config.max_request_body_bytes = mcp_hints::wire::DEFAULT_MAX_BODY_BYTES;
    // A stateless answer with nothing before it goes back as one JSON body
    // (one write, one wake-up of the client) rather than an event stream
    // of three writes; a call whose upstream sends progress first still
    // streams.
    config.json_response = true;
    config.cancellation_token = gateway.sessions_end.child_token();
    let sessions = Arc::new(LocalSessionManager::default());
    // The guard hands its parsed message on to the stateless calls.
    let guard = guard.sessions(sessions.clone()).pass_message(true);
    let front = Front::http(gateway.clone());
    let hosts = config.allowed_hosts.clone();
    let stopping = config.cancellation_token.clone();
    let served = front.clone();
    let service = StreamableHttpService::new(move || Ok(served.clone()), sessions.clone(), config);
    // The stateless `tools/call` requests answered without rmcp's
    // per-request server, everything else passed on to it.
    let service = StatelessCalls::new(service, front, &hosts, stopping);
    // The token first: a request without one learns nothing from the
    // guard's answers (which session ids are live, what a body lacks);
    // then the session's owner, before the guard tells a live session
    // from an unknown one.
    let guarded = guard.service(service);
    let owned = SessionOwnershipLayer::new(
        sessions,
        gateway.state.clone(),
        &gateway.config.gateway.replica,
    )
    .layer(guarded);
    let oauth = gateway.oauth.clone();
    let authenticated = BearerAuthLayer::new(gateway).layer(owned);
    let mut router = axum::Router::new().nest_service("/mcp", authenticated);
    // `[auth]`'s Protected Resource Metadata, which needs no token: it is
    // how a client learns where to get one (RFC 9728 §3).
    if let Some(oauth) = oauth {
        for path in oauth.metadata_paths() {
            let oauth = oauth.clone();
            router = router.route(
                &path,
                axum::routing::get(move || async move { oauth.metadata_response() }),
            );
        }
    }
    Ok(router)
}

/// Serves [`router`] at `http://ADDRESS/mcp` until `stop` resolves (the
/// command's signals), every connection with `TCP_NODELAY`. Says the bound
/// address as an event: `gateway: serving MCP over streamable HTTP at
/// http://ADDR/mcp`. At `stop`, parked calls are denied
/// ([`Approvals::deny_all_stopping`]) before the sessions end.
///
/// # Errors
///
/// [`Error::NotLoopback`] for an address that is not loopback without
/// `listen.public`, [`Error::Bind`] for one that cannot be bound (or
/// [`Error::LocalAddress`] when the bound address cannot be read),
/// [`Error::AllowOrigin`] as [`router`], and [`Error::Serve`] when serving
/// ends with an error.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    address: SocketAddr,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let listener = bind(address, gateway.config.listen.public, "listen.http").await?;
    let bound = listener.local_addr().map_err(|error| Error::LocalAddress {
        key: "listen.http",
        error,
    })?;
    let app = router(gateway.clone(), bound)?;
    tracing::info!(
        address = %bound,
        "serving MCP over streamable HTTP at http://{bound}/mcp"
    );
    let stopping = gateway.clone();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            stop.await;
            stopping.drain().await;
        })
        .await;
    gateway.close();
    served.map_err(|error| Error::Serve {
        address: bound,
        error,
    })
}

/// Binds `address`, refusing one that is not loopback unless `public`
/// (the transport spec: "When running locally, servers SHOULD bind only to
/// localhost"); every connection it accepts has `TCP_NODELAY` set.
///
/// Why `TCP_NODELAY`: an answer streamed as SSE ends with a chunk of its
/// own (`0\r\n\r\n`), often in a write of its own. On a kept-alive
/// connection Nagle's algorithm holds that small write until the client
/// acknowledges the previous one, and clients delay acknowledgements (40 ms
/// on Linux): each request after a connection's first would wait for it.
///
/// # Errors
///
/// [`Error::NotLoopback`] or [`Error::Bind`], naming `key`, the config
/// key that gave `address`.
pub(super) async fn bind(
    address: SocketAddr,
    public: bool,
    key: &'static str,
) -> Result<impl Listener<Io = TcpStream, Addr = SocketAddr>, Error> {
    if !public && !address.ip().is_loopback() {
        return Err(Error::NotLoopback { key, address });
    }
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| Error::Bind {
            key,
            address,
            error,
        })?;
    Ok(listener.tap_io(|stream: &mut TcpStream| {
        // A socket that refuses the option still serves, only slower.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY on a connection: {error}");
        }
    }))
}

/// The `Host` names an endpoint bound to `bound` answers to: rmcp's
/// default for the client endpoint (`localhost`, `127.0.0.1`, `::1`, any
/// port), and the bound address when it is neither loopback nor
/// unspecified.
pub(super) fn allowed_hosts(bound: SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = StreamableHttpServerConfig::default().allowed_hosts;
    if !bound.ip().is_loopback() && !bound.ip().is_unspecified() {
        hosts.push(bound.ip().to_string());
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option cannot be seen from the client's end of a connection,
    /// and a delayed-ACK stall shows only as time, which a test must not
    /// measure: so this takes the connection from the listener both
    /// endpoints serve on, as `axum::serve` does, and reads the option.
    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay() {
        let mut listener = bind(([127, 0, 0, 1], 0).into(), false, "listen.http")
            .await
            .unwrap();
        let bound = listener.local_addr().unwrap();
        let client = TcpStream::connect(bound).await.unwrap();
        let (accepted, peer) = listener.accept().await;
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(accepted.nodelay().unwrap(), "TCP_NODELAY is off");
    }
}

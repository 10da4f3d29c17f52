//! Who is calling, over HTTP: [`BearerAuthLayer`] maps a client's bearer
//! token to its [`Principal`] (a `[[client]]`'s, or with `[auth]` an
//! access token's, verified in `oauth`), and [`SessionOwnershipLayer`] keeps each
//! streamable-HTTP session to the principal that created it. [`router`]
//! puts both in front of the HTTP guard and rmcp, in that order.
//!
//! [`router`]: super::router

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::ErrorData;
use rmcp::transport::common::server_side_http::SessionId;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;
use tower::Layer;

use super::Gateway;
use super::oauth::Refusal;
#[cfg(doc)]
use super::oauth::ResourceServer;
use crate::Error;
use crate::state::SharedState;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed response future of the layers' services.
type ResponseFuture<E> = Pin<Box<dyn Future<Output = Result<Response, E>> + Send>>;

/// The principal of an HTTP request, put in its extensions by the
/// authentication layer once its bearer token matched a `[[client]]` or
/// was an access token of the `[auth]` issuer.
#[derive(Clone, Debug)]
pub(crate) struct Principal {
    /// The `[[client]]`'s `principal`, or the token's principal claim.
    pub(crate) name: Arc<str>,
    /// The scopes of an OAuth access token (its `scope` claim); none for a
    /// `[[client]]` token.
    pub(crate) scopes: Arc<[String]>,
}

impl Principal {
    /// A principal with no scopes: a `[[client]]`'s, or stdio's.
    pub(crate) fn unscoped(name: &str) -> Principal {
        Principal {
            name: Arc::from(name),
            scopes: Arc::from([]),
        }
    }
}

/// The bearer-token check in front of the HTTP guard and rmcp: a request
/// whose `Authorization: Bearer TOKEN` matches a `[[client]]` of the
/// gateway's config goes on with its [`Principal`] in its extensions;
/// with `[auth]`, so does one whose token is an access token the
/// [`ResourceServer`] verifies (its principal and scopes from the token),
/// and any other is answered as [`ResourceServer::refused`] says (401 with
/// `WWW-Authenticate: Bearer realm="mcp", resource_metadata="URL"` and,
/// for a bad token, `error="invalid_token"`; 403 `insufficient_scope`).
/// Without `[auth]` any other gets 401 with `WWW-Authenticate: Bearer
/// realm="mcp"` and a JSON `{"error": ...}` body. Either way before its
/// headers or body are read further (so that, without a token, no answer
/// tells a live session id from an unknown one, nor a sound body from a
/// bad one).
#[derive(Clone)]
pub(super) struct BearerAuthLayer {
    gateway: Arc<Gateway>,
}

impl BearerAuthLayer {
    /// Checks tokens against `gateway`'s `[[client]]`s.
    pub(super) fn new(gateway: Arc<Gateway>) -> BearerAuthLayer {
        BearerAuthLayer { gateway }
    }
}

impl<S> Layer<S> for BearerAuthLayer {
    type Service = BearerAuth<S>;

    fn layer(&self, inner: S) -> BearerAuth<S> {
        BearerAuth {
            gateway: self.gateway.clone(),
            inner,
        }
    }
}

/// The service [`BearerAuthLayer`] makes.
#[derive(Clone)]
pub(super) struct BearerAuth<S> {
    gateway: Arc<Gateway>,
    inner: S,
}

impl<S> BearerAuth<S> {
    /// The `[[client]]` principal whose token `headers` carry.
    fn principal(&self, headers: &HeaderMap) -> Option<Arc<str>> {
        let token = bearer(headers)?;
        // Every client is compared (in constant time each), so the time
        // taken does not say which one matched.
        let mut found = None;
        for client in &self.gateway.config.clients {
            if client.token.matches(token) && found.is_none() {
                found = Some(Arc::from(client.principal.as_str()));
            }
        }
        found
    }
}

impl<S, B, ResBody> tower_service::Service<http::Request<B>> for BearerAuth<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
    // The request waits in the future while an access token is verified.
    B: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if request
            .headers()
            .get_all(header::AUTHORIZATION)
            .iter()
            .count()
            > 1
        {
            return Box::pin(std::future::ready(Ok(two_authorizations("mcp"))));
        }
        if let Some(principal) = self.principal(request.headers()) {
            request
                .extensions_mut()
                .insert(Principal::unscoped(&principal));
            let answer = self.inner.call(request);
            return Box::pin(async move { Ok(answer.await?.map(axum::body::Body::new)) });
        }
        let Some(oauth) = self.gateway.oauth.clone() else {
            let message = if bearer(request.headers()).is_some() {
                "the bearer token matches no [[client]] of the gateway"
            } else {
                NO_TOKEN
            };
            return Box::pin(std::future::ready(Ok(unauthorized("mcp", message))));
        };
        let Some(token) = bearer(request.headers()).map(str::to_owned) else {
            return Box::pin(std::future::ready(Ok(oauth.refused(&Refusal::Missing))));
        };
        // The inner service that was polled ready goes into the future; a
        // clone stays for the next request (tower's `Service` contract).
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        Box::pin(async move {
            match oauth.verify(&token).await {
                Ok(principal) => {
                    request.extensions_mut().insert(principal);
                    Ok(inner.call(request).await?.map(axum::body::Body::new))
                }
                Err(refusal) => Ok(oauth.refused(&refusal)),
            }
        })
    }
}

/// What a request without a token is told.
const NO_TOKEN: &str = "the gateway needs `Authorization: Bearer TOKEN`, a token of a [[client]]";

/// Keeps each streamable-HTTP session to the [`Principal`] that created it
/// ([`SessionOwners`]): a request naming, in `Mcp-Session-Id`, a session of
/// another principal, or one it does not know, is answered 404 with the
/// JSON-RPC error [`Error::UnknownSession`] ([`session_not_known`]), the
/// same answer either way, so that another client's token can neither use
/// nor end a session, nor learn whose it is. A session bound to the
/// principal that rmcp no longer has (it ended, or idled out) gets that
/// answer too, and is unbound, so every session this process does not
/// serve is answered alike: the session id of another replica, most of
/// all, is never taken for a new session. The answer that creates a
/// session binds it to its principal; a successful DELETE unbinds it.
///
/// Each binding is also recorded in the shared state
/// ([`SharedState::open_session`]), so that a replica that does not serve
/// a session asks there who does: a session another replica opened for
/// the same principal is answered 404 with [`Error::SessionElsewhere`],
/// naming that replica (a load balancer without affinity shows at once);
/// any other with [`Error::UnknownSession`].
///
/// It reads the principal [`BearerAuthLayer`] put in the request's
/// extensions, so it goes behind that layer; a request without one is
/// answered 401 as that layer answers a request without a token.
#[derive(Clone)]
pub(super) struct SessionOwnershipLayer {
    owners: Arc<SessionOwners>,
    sessions: Arc<LocalSessionManager>,
    shared: SharedOwners,
}

/// Where the layer records, and asks, which replica opened a session.
#[derive(Clone)]
struct SharedOwners {
    state: Arc<dyn SharedState>,
    /// This replica's name (`[gateway] replica`).
    replica: Arc<str>,
}

/// The longest session id asked of the shared state: rmcp's are UUIDs;
/// anything far longer names no session of any replica's.
const MAX_SHARED_SESSION_ID: usize = 256;

/// How long a replica waits for the shared state to say who opened a
/// session it does not serve, before answering it as unknown.
const SESSION_LOOKUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

impl SharedOwners {
    /// The answer to a request for session `id`, which this replica does
    /// not serve to `principal`: [`Error::SessionElsewhere`] when the
    /// shared state says another replica opened it for `principal`, else
    /// [`session_not_known`] (also when the state cannot say in time).
    async fn not_here(&self, id: &str, principal: &str) -> Response {
        if id.len() <= MAX_SHARED_SESSION_ID {
            let asked = self.state.session_opener(id, principal);
            if let Ok(Ok(Some(opened_by))) =
                tokio::time::timeout(SESSION_LOOKUP_TIMEOUT, asked).await
                && *opened_by != *self.replica
            {
                return not_found(&Error::SessionElsewhere {
                    id: id.to_owned(),
                    opened_by,
                    here: self.replica.to_string(),
                });
            }
        }
        session_not_known(id)
    }

    /// Records, in the background, that this replica opened `id` for
    /// `principal`: the answer that opened it is not held for it. Nothing
    /// is spawned for a backend that shares no sessions
    /// ([`SharedState::shares_sessions`]).
    fn opened(&self, id: &str, principal: &str) {
        if !self.state.shares_sessions() {
            return;
        }
        let (state, replica) = (self.state.clone(), self.replica.clone());
        let (id, principal) = (id.to_owned(), principal.to_owned());
        // A failure is counted by the metered state; the session serves.
        tokio::spawn(async move { state.open_session(&id, &principal, &replica).await });
    }

    /// Forgets `id` in the background. Nothing is spawned for a backend
    /// that shares no sessions: it has nothing to forget.
    fn ended(&self, id: &str) {
        if !self.state.shares_sessions() {
            return;
        }
        let (state, id) = (self.state.clone(), id.to_owned());
        tokio::spawn(async move { state.end_session(&id).await });
    }
}

impl SessionOwnershipLayer {
    /// No session bound yet; `sessions` is the session manager of the rmcp
    /// service behind, asked whether a bound session still lives; `state`
    /// is where the replicas record which of them (this one is `replica`)
    /// opened each session.
    pub(super) fn new(
        sessions: Arc<LocalSessionManager>,
        state: Arc<dyn SharedState>,
        replica: &str,
    ) -> SessionOwnershipLayer {
        SessionOwnershipLayer {
            owners: Arc::new(SessionOwners::default()),
            sessions,
            shared: SharedOwners {
                state,
                replica: Arc::from(replica),
            },
        }
    }
}

impl<S> Layer<S> for SessionOwnershipLayer {
    type Service = SessionOwnership<S>;

    fn layer(&self, inner: S) -> SessionOwnership<S> {
        SessionOwnership {
            owners: self.owners.clone(),
            sessions: self.sessions.clone(),
            shared: self.shared.clone(),
            inner,
        }
    }
}

/// The service [`SessionOwnershipLayer`] makes.
#[derive(Clone)]
pub(super) struct SessionOwnership<S> {
    owners: Arc<SessionOwners>,
    sessions: Arc<LocalSessionManager>,
    shared: SharedOwners,
    inner: S,
}

impl<S, B, ResBody> tower_service::Service<http::Request<B>> for SessionOwnership<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
    // The request waits in the future while the session is looked up.
    B: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some(Principal {
            name: principal, ..
        }) = request.extensions().get::<Principal>().cloned()
        else {
            return Box::pin(std::future::ready(Ok(unauthorized("mcp", NO_TOKEN))));
        };
        // A session is used only by the principal that created it; an id
        // that is not text names no session of anyone's.
        let session = match request.headers().get(SESSION_ID_HEADER) {
            None => None,
            Some(id) => match id.to_str() {
                Ok(id) if self.owners.owned_by(id, &principal) => Some(id.to_owned()),
                Ok(id) => {
                    let (shared, id) = (self.shared.clone(), id.to_owned());
                    return Box::pin(async move { Ok(shared.not_here(&id, &principal).await) });
                }
                Err(_) => {
                    let id = String::from_utf8_lossy(id.as_bytes());
                    return Box::pin(std::future::ready(Ok(session_not_known(&id))));
                }
            },
        };
        let ends_session = request.method() == http::Method::DELETE;
        // The inner service that was polled ready goes into the future; a
        // clone stays for the next request (tower's `Service` contract).
        let ready = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, ready);
        let owners = self.owners.clone();
        let sessions = self.sessions.clone();
        let shared = self.shared.clone();
        Box::pin(async move {
            if let Some(id) = &session {
                // Bound here, but ended since (idled out, or all ended):
                // answered as any session this process does not serve. A
                // manager that cannot say leaves the answer to rmcp.
                let live = sessions.has_session(&SessionId::from(id.as_str())).await;
                if matches!(live, Ok(false)) {
                    owners.unbind(id);
                    shared.ended(id);
                    return Ok(session_not_known(id));
                }
            }
            let response = inner.call(request).await?;
            match (&session, response.headers().get(SESSION_ID_HEADER)) {
                // The answer that creates a session names it: its owner is
                // the principal that asked.
                (None, Some(created)) => {
                    if let Ok(created) = created.to_str() {
                        owners.bind(created, &principal);
                        shared.opened(created, &principal);
                    }
                }
                (Some(ended), _) if ends_session && response.status().is_success() => {
                    owners.unbind(ended);
                    shared.ended(ended);
                }
                _ => {}
            }
            Ok(response.map(axum::body::Body::new))
        })
    }
}

/// The header naming a streamable-HTTP session (2025-03-26 to 2025-11-25).
const SESSION_ID_HEADER: &str = "mcp-session-id";

/// The most sessions whose principal is kept: 100,000 (some 20 MB). Past
/// it the oldest binding is dropped, and its session answers 404 from then
/// on, to its own principal too (who then starts a new one, as the spec
/// has clients do): a session is never left without an owner to check.
const MAX_SESSION_OWNERS: usize = 100_000;

/// The most sessions kept for one principal: 10,000. Past it that
/// principal's own oldest binding goes, so that one client opening
/// sessions without end cannot push every other client's out.
const MAX_SESSIONS_PER_PRINCIPAL: usize = 10_000;

/// Which principal created each streamable-HTTP session, by session id,
/// oldest first for eviction. One lock, held for a map lookup per request
/// that names a session, never across an await.
#[derive(Default)]
struct SessionOwners {
    inner: Mutex<Owners>,
}

#[derive(Default)]
struct Owners {
    /// Session id: its principal, and its place in `by_age`.
    by_id: HashMap<Box<str>, (Arc<str>, u64)>,
    /// Place: session id, the oldest first.
    by_age: BTreeMap<u64, Box<str>>,
    /// Each principal's places, the oldest first.
    by_principal: HashMap<Arc<str>, std::collections::BTreeSet<u64>>,
    next: u64,
}

impl Owners {
    /// Forgets the session at `place` in every map.
    fn forget(&mut self, place: u64) {
        if let Some(id) = self.by_age.remove(&place)
            && let Some((principal, _)) = self.by_id.remove(&id)
            && let Some(places) = self.by_principal.get_mut(&principal)
        {
            places.remove(&place);
            if places.is_empty() {
                self.by_principal.remove(&principal);
            }
        }
    }
}

impl SessionOwners {
    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        // Every change leaves both maps consistent before the next
        // statement: a panic elsewhere cannot leave one half done.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `principal` may use session `id`: it created it.
    fn owned_by(&self, id: &str, principal: &str) -> bool {
        self.lock()
            .by_id
            .get(id)
            .is_some_and(|(owner, _)| &**owner == principal)
    }

    /// Binds the new session `id` to `principal`, dropping the
    /// principal's own oldest binding past [`MAX_SESSIONS_PER_PRINCIPAL`]
    /// and the oldest of all past [`MAX_SESSION_OWNERS`]. A session bound
    /// already keeps its owner.
    fn bind(&self, id: &str, principal: &Arc<str>) {
        let mut owners = self.lock();
        if owners.by_id.contains_key(id) {
            return;
        }
        let own_oldest = owners
            .by_principal
            .get(principal)
            .filter(|places| places.len() >= MAX_SESSIONS_PER_PRINCIPAL)
            .and_then(|places| places.first().copied());
        if let Some(place) = own_oldest {
            owners.forget(place);
        }
        while owners.by_id.len() >= MAX_SESSION_OWNERS {
            let Some(oldest) = owners.by_age.keys().next().copied() else {
                break;
            };
            owners.forget(oldest);
        }
        let place = owners.next;
        owners.next += 1;
        owners
            .by_id
            .insert(Box::from(id), (principal.clone(), place));
        owners.by_age.insert(place, Box::from(id));
        owners
            .by_principal
            .entry(principal.clone())
            .or_default()
            .insert(place);
    }

    /// Forgets session `id` (it was ended).
    fn unbind(&self, id: &str) {
        let mut owners = self.lock();
        if let Some(&(_, place)) = owners.by_id.get(id) {
            owners.forget(place);
        }
    }
}

/// The answer to a request naming, in `Mcp-Session-Id`, the session `id`
/// that this process does not serve (or that another principal owns):
/// 404, as the streamable HTTP transport has a server answer a session it
/// does not know, so that the client starts a new one; its body the
/// JSON-RPC error [`Error::UnknownSession`] with no id (the request's body
/// is not read for it), `application/json`.
pub(super) fn session_not_known(id: &str) -> Response {
    not_found(&Error::UnknownSession { id: id.to_owned() })
}

/// 404 with `error` as a JSON-RPC error with no id.
fn not_found(error: &Error) -> Response {
    let error = ErrorData::from(error);
    let body = json!({ "jsonrpc": "2.0", "id": null, "error": error }).to_string();
    let mut response = (StatusCode::NOT_FOUND, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The token of an `Authorization: Bearer TOKEN` header, if that is what
/// `headers` has (the scheme without case, RFC 7235); `None` for two
/// `Authorization` headers or more, which name no one token (RFC 9110
/// §5.3: a field that is not a list is sent once).
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?.to_str().ok()?;
    if values.next().is_some() {
        return None;
    }
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// The answer to a request with more than one `Authorization` header:
/// 400, `WWW-Authenticate: Bearer realm="REALM", error="invalid_request"`
/// (RFC 6750 §3.1: a request that carries its token more than once), and
/// a JSON `{"error": ...}` body. Neither token is looked at.
pub(super) fn two_authorizations(realm: &str) -> Response {
    let body = json!({
        "error": "the request has more than one `Authorization` header; send one, \
                  `Authorization: Bearer TOKEN`"
    })
    .to_string();
    let mut response = (StatusCode::BAD_REQUEST, body).into_response();
    let headers = response.headers_mut();
    if let Ok(challenge) = HeaderValue::from_str(&format!(
        "Bearer realm=\"{realm}\", error=\"invalid_request\""
    )) {
        headers.insert(header::WWW_AUTHENTICATE, challenge);
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// A 401 for `realm` with a JSON `{"error": message}` body.
pub(super) fn unauthorized(realm: &str, message: &str) -> Response {
    let body = json!({ "error": message }).to_string();
    let mut response = (StatusCode::UNAUTHORIZED, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(value) = HeaderValue::from_str(&format!("Bearer realm=\"{realm}\"")) {
        headers.insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_without_case_in_the_scheme() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer abc"),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&headers), None);
        // Two headers name no one token, whichever comes first.
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        headers.append(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer xyz"),
        );
        assert_eq!(bearer(&headers), None);
    }

    /// What the ownership layer lets through: answered 200, with a new
    /// session's id when `opens` names one; every request counted.
    #[derive(Clone)]
    struct Behind {
        opens: Option<&'static str>,
        calls: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl tower_service::Service<http::Request<axum::body::Body>> for Behind {
        type Response = http::Response<axum::body::Body>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<axum::body::Body>) -> Self::Future {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut response = http::Response::new(axum::body::Body::empty());
            if let Some(id) = self.opens {
                response
                    .headers_mut()
                    .insert(SESSION_ID_HEADER, HeaderValue::from_static(id));
            }
            std::future::ready(Ok(response))
        }
    }

    /// `principal`'s request naming `session` (raw header bytes), if any.
    fn request(principal: &str, session: Option<&[u8]>) -> http::Request<axum::body::Body> {
        let mut request = http::Request::new(axum::body::Body::empty());
        request
            .extensions_mut()
            .insert(Principal::unscoped(principal));
        if let Some(id) = session {
            let value = HeaderValue::from_bytes(id).unwrap();
            request.headers_mut().insert(SESSION_ID_HEADER, value);
        }
        request
    }

    /// The status, `Content-Type` and body of `response`.
    async fn parts(response: Response) -> (StatusCode, String, serde_json::Value) {
        let status = response.status();
        let kind = response.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .to_owned();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .unwrap();
        (
            status,
            kind,
            serde_json::from_slice(&body).unwrap_or_default(),
        )
    }

    fn in_process() -> Arc<dyn SharedState> {
        Arc::new(crate::state::InProcess::new(None))
    }

    #[tokio::test]
    async fn a_session_not_served_here_is_a_json_rpc_404_alike_for_every_reason() {
        let sessions = Arc::new(LocalSessionManager::default());
        let layer = SessionOwnershipLayer::new(sessions.clone(), in_process(), "a");
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let behind = Behind {
            opens: None,
            calls: calls.clone(),
        };
        let mut service = layer.layer(behind);
        let call = |service: &mut SessionOwnership<Behind>, principal, session| {
            tower_service::Service::call(service, request(principal, session))
        };
        let expected = |shown: &str| {
            json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {
                    "code": -32001,
                    "message": format!(
                        "session `{shown}` is not known here: it ended, or another replica of \
                         the gateway opened it (a load balancer must send every request of a \
                         session to the replica that opened it); send `initialize` without \
                         `Mcp-Session-Id` to start a new session"
                    ),
                },
            })
        };
        let not_known = |shown: &str| {
            (
                StatusCode::NOT_FOUND,
                "application/json".to_owned(),
                expected(shown),
            )
        };

        // Never opened here (another replica's), and not text (read lossily,
        // shown escaped: a right-to-left override).
        let answer = call(&mut service, "alice", Some(b"from-replica-b"));
        assert_eq!(
            parts(answer.await.unwrap()).await,
            not_known("from-replica-b")
        );
        let answer = call(&mut service, "alice", Some(b"s-\xe2\x80\xae\xff"));
        assert_eq!(
            parts(answer.await.unwrap()).await,
            not_known("s-\\u{202e}\u{fffd}")
        );

        // Live and bob's: alice gets what she gets for none; bob goes on.
        let (live, _transport) = sessions.create_session().await.unwrap();
        layer.owners.bind(&live, &Arc::from("bob"));
        let answer = call(&mut service, "alice", Some(live.as_bytes()));
        assert_eq!(parts(answer.await.unwrap()).await, not_known(&live));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
        let answer = call(&mut service, "bob", Some(live.as_bytes()));
        assert_eq!(answer.await.unwrap().status(), StatusCode::OK);
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);

        // Bound to alice, but ended in rmcp since: answered alike, and
        // forgotten.
        layer.owners.bind("ended", &Arc::from("alice"));
        let answer = call(&mut service, "alice", Some(b"ended"));
        assert_eq!(parts(answer.await.unwrap()).await, not_known("ended"));
        assert!(!layer.owners.owned_by("ended", "alice"));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn the_answer_that_opens_a_session_binds_it_to_its_principal() {
        let sessions = Arc::new(LocalSessionManager::default());
        let layer = SessionOwnershipLayer::new(sessions, in_process(), "a");
        let behind = Behind {
            opens: Some("opened-1"),
            calls: Arc::default(),
        };
        let mut service = layer.layer(behind);
        let answer = tower_service::Service::call(&mut service, request("carol", None));
        assert_eq!(answer.await.unwrap().status(), StatusCode::OK);
        assert!(layer.owners.owned_by("opened-1", "carol"));
        assert!(!layer.owners.owned_by("opened-1", "dave"));
    }

    #[test]
    fn sessions_are_kept_to_their_principal_and_the_oldest_go_first() {
        let owners = SessionOwners::default();
        let (alice, bob): (Arc<str>, Arc<str>) = (Arc::from("alice"), Arc::from("bob"));
        owners.bind("s1", &alice);
        assert!(owners.owned_by("s1", "alice"));
        assert!(!owners.owned_by("s1", "bob"));
        assert!(!owners.owned_by("s2", "alice"));
        // A bound session keeps its owner.
        owners.bind("s1", &bob);
        assert!(owners.owned_by("s1", "alice"));
        owners.unbind("s1");
        assert!(!owners.owned_by("s1", "alice"));
        assert!(owners.lock().by_age.is_empty());
        // One principal's flood pushes out its own oldest, not alice's.
        owners.bind("a", &alice);
        for n in 0..MAX_SESSIONS_PER_PRINCIPAL + 2 {
            owners.bind(&n.to_string(), &bob);
        }
        assert!(owners.owned_by("a", "alice"));
        assert!(!owners.owned_by("0", "bob") && !owners.owned_by("1", "bob"));
        assert!(owners.owned_by("2", "bob"));
        assert_eq!(owners.lock().by_id.len(), MAX_SESSIONS_PER_PRINCIPAL + 1);
        // Past the cap of all, the oldest of all go.
        let many = MAX_SESSION_OWNERS / MAX_SESSIONS_PER_PRINCIPAL + 1;
        for p in 0..many {
            let principal: Arc<str> = Arc::from(format!("p{p}"));
            for n in 0..MAX_SESSIONS_PER_PRINCIPAL {
                owners.bind(&format!("p{p}-{n}"), &principal);
            }
        }
        let kept = owners.lock();
        assert_eq!(kept.by_id.len(), MAX_SESSION_OWNERS);
        assert_eq!(kept.by_age.len(), MAX_SESSION_OWNERS);
        let places: usize = kept.by_principal.values().map(|places| places.len()).sum();
        assert_eq!(places, MAX_SESSION_OWNERS);
        drop(kept);
        assert!(
            !owners.owned_by("a", "alice"),
            "the oldest of all went first"
        );
        assert!(owners.owned_by(&format!("p{}-0", many - 1), &format!("p{}", many - 1)));
    }
}

//! Who is calling, over HTTP: [`BearerAuthLayer`] maps a client's bearer
//! token to its [`Principal`], and [`SessionOwnershipLayer`] keeps each
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
use serde_json::json;
use tower::Layer;

use super::Gateway;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed response future of the layers' services.
type ResponseFuture<E> = Pin<Box<dyn Future<Output = Result<Response, E>> + Send>>;

/// The principal of an HTTP request, put in its extensions by the
/// authentication layer once its bearer token matched a `[[client]]`.
#[derive(Clone, Debug)]
pub(crate) struct Principal(pub(crate) Arc<str>);

/// The bearer-token check in front of the HTTP guard and rmcp: a request
/// whose `Authorization: Bearer TOKEN` matches a `[[client]]` of the
/// gateway's config goes on with its [`Principal`] in its extensions; any
/// other gets 401 with `WWW-Authenticate: Bearer realm="mcp"` and a JSON
/// `{"error": ...}` body, before its headers or body are read further (so
/// that, without a token, no answer tells a live session id from an
/// unknown one, nor a sound body from a bad one).
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
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let Some(principal) = self.principal(request.headers()) else {
            let message = if bearer(request.headers()).is_some() {
                "the bearer token matches no [[client]] of the gateway"
            } else {
                NO_TOKEN
            };
            return Box::pin(std::future::ready(Ok(unauthorized("mcp", message))));
        };
        request.extensions_mut().insert(Principal(principal));
        let answer = self.inner.call(request);
        Box::pin(async move { Ok(answer.await?.map(axum::body::Body::new)) })
    }
}

/// What a request without a token is told.
const NO_TOKEN: &str = "the gateway needs `Authorization: Bearer TOKEN`, a token of a [[client]]";

/// Keeps each streamable-HTTP session to the [`Principal`] that created it
/// ([`SessionOwners`]): a request naming, in `Mcp-Session-Id`, a session of
/// another principal, or one it does not know, is answered 404 as rmcp
/// answers an unknown session, so that another client's token can neither
/// use nor end a session, nor learn whose it is. The answer that creates a
/// session binds it to its principal; a successful DELETE unbinds it.
///
/// It reads the principal [`BearerAuthLayer`] put in the request's
/// extensions, so it goes behind that layer; a request without one is
/// answered 401 as that layer answers a request without a token.
#[derive(Clone)]
pub(super) struct SessionOwnershipLayer {
    owners: Arc<SessionOwners>,
}

impl SessionOwnershipLayer {
    /// No session bound yet.
    pub(super) fn new() -> SessionOwnershipLayer {
        SessionOwnershipLayer {
            owners: Arc::new(SessionOwners::default()),
        }
    }
}

impl<S> Layer<S> for SessionOwnershipLayer {
    type Service = SessionOwnership<S>;

    fn layer(&self, inner: S) -> SessionOwnership<S> {
        SessionOwnership {
            owners: self.owners.clone(),
            inner,
        }
    }
}

/// The service [`SessionOwnershipLayer`] makes.
#[derive(Clone)]
pub(super) struct SessionOwnership<S> {
    owners: Arc<SessionOwners>,
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
{
    type Response = Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Error>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some(Principal(principal)) = request.extensions().get::<Principal>().cloned() else {
            return Box::pin(std::future::ready(Ok(unauthorized("mcp", NO_TOKEN))));
        };
        // A session is used only by the principal that created it; an id
        // that is not text names no session of anyone's.
        let session = match request.headers().get(SESSION_ID_HEADER) {
            None => None,
            Some(id) => match id.to_str() {
                Ok(id) if self.owners.owned_by(id, &principal) => Some(id.to_owned()),
                _ => return Box::pin(std::future::ready(Ok(session_not_found()))),
            },
        };
        let ends_session = request.method() == http::Method::DELETE;
        let answer = self.inner.call(request);
        let owners = self.owners.clone();
        Box::pin(async move {
            let response = answer.await?;
            match (&session, response.headers().get(SESSION_ID_HEADER)) {
                // The answer that creates a session names it: its owner is
                // the principal that asked.
                (None, Some(created)) => {
                    if let Ok(created) = created.to_str() {
                        owners.bind(created, &principal);
                    }
                }
                (Some(ended), _) if ends_session && response.status().is_success() => {
                    owners.unbind(ended);
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

/// rmcp's answer to a request naming a session it does not know.
fn session_not_found() -> Response {
    let mut response = (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The token of an `Authorization: Bearer TOKEN` header, if that is what
/// `headers` has (the scheme without case, RFC 7235).
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
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

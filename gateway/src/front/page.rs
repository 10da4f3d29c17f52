//! The approvals page, served by the admin endpoint beside its token API:
//! an approver signs in, sees every parked call as it arrives (through
//! server-sent events), and approves or denies it.
//!
//! | route | answers |
//! |---|---|
//! | `GET /` | 303 to `/approvals` |
//! | `GET /approvals` | the page when signed in, else the sign-in form (and an anonymous session for it) |
//! | `POST /sign-in` | form `csrf`, `token`, `name`: 303 to `/approvals` signed in, under a new session id; 401 with the form again for a wrong token; 403 without the form's session or token |
//! | `POST /sign-in/issuer` | form `csrf`: 303 to the `[auth]` issuer's authorization endpoint, the sign-in there under way ([`issuer`]); 403 without the form's session or token; 404 without `[approval] approver_scope` |
//! | `GET /sign-in/callback` | the issuer's answer: 200 signed in, under a new session id, with a `Refresh` on to `/approvals`; else the sign-in form again, saying why (400, 401, 403, 502, 503) |
//! | `POST /sign-out` | form `csrf`: 303 to `/approvals`, the session ended; 403 without the token |
//! | `GET /events` | signed in: `text/event-stream` of `pending` events, each the list of parked calls as HTML, and `signed-out` when the session ends; else 401 |
//! | `GET /page/app.js`, `GET /page/style.css` | the page's script and style |
//!
//! `POST /approve/{id}` and `POST /deny/{id}` take the page's session as
//! well as the bearer token: see [`Page::decider`].
//!
//! # Sessions and cross-site requests
//!
//! The cookie holds only a random id (32 bytes from the operating system,
//! in hex); the session, and who signed in, stay in this replica's memory
//! ([`sessions`]), so a replica's page is signed in at that replica. The
//! cookie is `HttpOnly`, `SameSite=Strict`, `Path=/`, and `Secure` as
//! [`Admin::cookie_is_secure`](crate::config::Admin::cookie_is_secure)
//! says: the gateway serves plain HTTP, and a browser keeps no `Secure`
//! cookie from a plain-HTTP origin other than a loopback one, so on a
//! loopback admin endpoint it is off by default (nothing crosses a
//! network), and on any other it is on (reach it through a proxy that
//! speaks TLS, or set `[admin] secure_cookie = false` knowingly). A
//! `Secure` cookie is named with the `__Host-` prefix, which a browser
//! only accepts from a secure origin, for `/`, without a `Domain`.
//!
//! `SameSite=Strict` keeps the cookie off requests from other sites, but
//! another port of the same host is the same site: so every
//! state-changing POST of the page (sign-in, sign-out, approve, deny) also
//! carries the session's CSRF token (a synchronizer token: the form's
//! hidden `csrf` field, or the `X-CSRF-Token` header the script sends),
//! and a request with the cookie and without that token is refused 403.
//! The admin endpoint's `Origin` check (another origin's POST is refused
//! 403 before any route) and `Host` check stay in front of all of it. The
//! page's answers forbid framing and any script, style or connection but
//! its own (`Content-Security-Policy`).
//!
//! # Signing in
//!
//! An approver signs in with the admin token, and names themself for the
//! audit log (`by`, as `mcp-hints gateway approve --by` does); or, with
//! `[approval] approver_scope`, through the `[auth]` issuer, named by
//! their access token's principal ([`issuer`]). A sign-in method only
//! has to establish an [`Approver`] and end in [`Sessions::sign_in`]; the
//! page, the CSRF checks and the decisions are the same for both. A
//! session signed in through the issuer ends when its access token
//! expires, or sooner, as the page's caps end every session.

pub(super) mod issuer;
mod render;
pub(super) mod sessions;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use cookie::{Cookie, SameSite};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use mcp_hints_core::escape;
use tokio::sync::broadcast;

use self::sessions::{Approver, Session, SignIn};
use super::Gateway;
use super::admin::AdminState;
use crate::defaults;

pub(crate) use self::sessions::Sessions;

/// The page's `Content-Security-Policy`: nothing but the admin endpoint
/// itself, no inline script or style, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The header the page's script sends the CSRF token in.
const CSRF_HEADER: &str = "x-csrf-token";

/// The longest name an approver can give for the audit log: 64
/// characters.
const MAX_NAME_CHARS: usize = 64;

/// Whether `name` may stand as an approver's name in the audit log and in
/// the answers that name who decided: at most [`MAX_NAME_CHARS`]
/// characters, none that a terminal or a page would not show as itself
/// (controls, bidirectional overrides: `mcp_hints_core::escape::escaped`).
pub(super) fn is_approver_name(name: &str) -> bool {
    name.chars().count() <= MAX_NAME_CHARS && !name.chars().any(mcp_hints_core::escape::escaped)
}

/// The approvals page of one admin endpoint: its sessions, how its
/// cookie is set, and its client of the issuer when approvers may sign in
/// there.
#[derive(Debug)]
pub(crate) struct Page {
    sessions: Sessions,
    secure: bool,
    issuer: Option<issuer::Client>,
}

impl Page {
    /// A page whose cookie is `Secure` when `secure`, signing in through
    /// `issuer` too when given.
    pub(crate) fn new(secure: bool, issuer: Option<issuer::Client>) -> Page {
        Page {
            sessions: Sessions::default(),
            secure,
            issuer,
        }
    }

    /// The cookie's name: `__Host-mcp-hints-approver` when `Secure`, else
    /// `mcp-hints-approver` (the prefix needs `Secure`).
    fn cookie_name(&self) -> &'static str {
        if self.secure {
            "__Host-mcp-hints-approver"
        } else {
            "mcp-hints-approver"
        }
    }

    /// The `Set-Cookie` value carrying `id`; `None` for `id` removes the
    /// cookie.
    fn set_cookie(&self, id: Option<&str>) -> String {
        let mut cookie = Cookie::build((self.cookie_name(), id.unwrap_or_default().to_owned()))
            .path("/")
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(self.secure)
            .build();
        if id.is_none() {
            cookie.make_removal();
        }
        cookie.to_string()
    }

    /// The live session the request's cookie names, if any.
    fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let name = self.cookie_name();
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(Cookie::split_parse)
            .filter_map(Result::ok)
            .filter(|cookie| cookie.name() == name)
            .find_map(|cookie| self.sessions.get(cookie.value()))
    }

    /// Who decides a `POST /approve/{id}` or `POST /deny/{id}` that
    /// carries no `Authorization` (so is not the bearer-token API): `None`
    /// when it names no signed-in session (the caller answers 401);
    /// `Some(Err(403))` when it does but carries no CSRF token, or the
    /// wrong one, in the `X-CSRF-Token` header or a form's `csrf` field;
    /// else the approver, and whether it came from a form (answered with a
    /// 303 back to the page rather than JSON).
    #[allow(clippy::result_large_err)]
    pub(crate) fn decider(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Option<Result<(Approver, bool), Response>> {
        let session = self.session(headers)?;
        let approver = session.approver.clone()?;
        let form = is_form(headers);
        let sent = headers
            .get(CSRF_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .or_else(|| form.then(|| field(body, "csrf")).flatten());
        Some(match sent {
            Some(token) if session.csrf_matches(&token) => Ok((approver, form)),
            _ => Err(csrf_refused()),
        })
    }
}

/// The 403 for a cookie-authenticated POST without the session's CSRF
/// token.
fn csrf_refused() -> Response {
    let mut response = (
        StatusCode::FORBIDDEN,
        serde_json::json!({
            "error": "this request carries the page's session but not its CSRF token; \
                      decide from the approvals page, or use `Authorization: Bearer`"
        })
        .to_string(),
    )
        .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Whether the request's body is a form (`application/x-www-form-urlencoded`).
fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|value| {
            value
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// The form field `name` of `body`, the first if repeated.
fn field(body: &[u8], name: &str) -> Option<String> {
    form_urlencoded::parse(body)
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// The page's routes, for the admin endpoint's router.
pub(super) fn routes() -> axum::Router<AdminState> {
    axum::Router::new()
        .route("/", get(index))
        .route("/approvals", get(approvals))
        .route("/sign-in", post(sign_in))
        .route("/sign-in/issuer", post(issuer::start))
        .route(issuer::CALLBACK_PATH, get(issuer::callback))
        .route("/sign-out", post(sign_out))
        .route("/events", get(events))
        .route("/page/app.js", get(script))
        .route("/page/style.css", get(style))
}

/// A page of the approvals UI: `html` with the headers every one has.
fn html(status: StatusCode, html: String, cookie: Option<String>) -> Response {
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secured(headers);
    if let Some(cookie) = cookie.and_then(|cookie| HeaderValue::from_str(&cookie).ok()) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The headers every answer of the page carries: its
/// `Content-Security-Policy`, no framing, no sniffing, no caching, and
/// no referrer to other origins (`same-origin`: with `no-referrer` a
/// browser sends the page's own form posts with `Origin: null`, which the
/// `Origin` check refuses).
fn secured(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// 303 to `/approvals`, setting `cookie` when given.
fn back_to_page(cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, HeaderValue::from_static("/approvals"));
    secured(headers);
    if let Some(cookie) = cookie.and_then(|cookie| HeaderValue::from_str(&cookie).ok()) {
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The 503 when no session id can be drawn.
fn no_session(error: &sessions::NoRandomness) -> Response {
    let error = escape::one_line(&error.to_string()).into_owned();
    tracing::error!(%error, "the approvals page cannot start a session: {error}");
    (StatusCode::SERVICE_UNAVAILABLE, error).into_response()
}

/// The 403 for a sign-in without the form's session: no form of ours was
/// filled in (an old one, or another site's).
fn expired_form() -> Response {
    html(
        StatusCode::FORBIDDEN,
        render::document(
            "Sign in: approvals",
            "",
            "<main class=\"sign-in\"><p class=\"error\" role=\"alert\">This sign-in form \
             has expired. <a href=\"/approvals\">Sign in again</a>.</p></main>",
        ),
        None,
    )
}

/// `GET /`: the page.
async fn index() -> Response {
    back_to_page(None)
}

/// `GET /approvals`: the parked calls to a signed-in approver, else the
/// sign-in form (in the anonymous session the request names, or a new
/// one).
async fn approvals(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let page = &state.page;
    let session = page.session(&headers);
    if let Some(approver) = session.as_ref().and_then(|s| s.approver.clone()) {
        let csrf = session.map(|s| s.csrf).unwrap_or_default();
        let pending = pending(&state.gateway).await;
        let body = render::approvals(&approver, &csrf, &pending, SystemTime::now());
        return html(StatusCode::OK, body, None);
    }
    let (session, cookie) = match session {
        Some(session) => (session, None),
        None => match page.sessions.start() {
            Ok(session) => {
                let cookie = page.set_cookie(Some(&session.id));
                (session, Some(cookie))
            }
            Err(error) => return no_session(&error),
        },
    };
    let form = render::sign_in(&session.csrf, None, page.issuer.is_some());
    issuer::allowing_issuer(html(StatusCode::OK, form, cookie), &state)
}

/// The parked calls, or why they cannot be read (on one line).
async fn pending(gateway: &Gateway) -> Result<Vec<crate::approval::Parked>, String> {
    gateway
        .approvals
        .pending()
        .await
        .map_err(|error| escape::one_line(&error.to_string()).into_owned())
}

/// `POST /sign-in`: the admin token typed into the form of the session
/// the cookie names, with that session's CSRF token.
async fn sign_in(
    State(state): State<AdminState>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let page = &state.page;
    let Some(session) = page.session(&headers) else {
        return expired_form();
    };
    if !field(&body, "csrf").is_some_and(|token| session.csrf_matches(&token)) {
        return csrf_refused();
    }
    let refused = |status: StatusCode, why: &str| {
        let form = render::sign_in(&session.csrf, Some(why), page.issuer.is_some());
        issuer::allowing_issuer(html(status, form, None), &state)
    };
    let admin = state.gateway.config.admin.as_ref();
    let token = field(&body, "token").unwrap_or_default();
    if !admin.is_some_and(|admin| admin.token.matches(&token)) {
        return refused(StatusCode::UNAUTHORIZED, "That is not the admin token.");
    }
    let name = field(&body, "name").unwrap_or_default();
    let name = match name.trim() {
        "" => "admin",
        name => name,
    };
    if !is_approver_name(name) {
        return refused(
            StatusCode::BAD_REQUEST,
            "A name is at most 64 characters, without control or bidirectional characters.",
        );
    }
    let approver = Approver {
        name: name.to_owned(),
        via: SignIn::AdminToken,
    };
    match page.sessions.sign_in(&session.id, approver, None) {
        Ok(signed_in) => back_to_page(Some(page.set_cookie(Some(&signed_in.id)))),
        Err(error) => no_session(&error),
    }
}

/// `POST /sign-out`: ends the session, with its CSRF token.
async fn sign_out(
    State(state): State<AdminState>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let page = &state.page;
    let Some(session) = page.session(&headers) else {
        return back_to_page(Some(page.set_cookie(None)));
    };
    let sent = headers
        .get(CSRF_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| field(&body, "csrf"));
    if !sent.is_some_and(|token| session.csrf_matches(&token)) {
        return csrf_refused();
    }
    page.sessions.end(&session.id);
    back_to_page(Some(page.set_cookie(None)))
}

/// `GET /events`: the parked calls as server-sent events, to a signed-in
/// approver. A `pending` event (the list as HTML, [`render::calls`])
/// comes at once and again whenever the list changes: on each call parked
/// or resolved at any replica, as the shared state announces it, and at
/// least every [`defaults::PAGE_REFRESH`] (a notice can be missed, and a
/// call can vanish with a replica that died). A `signed-out` event ends
/// the stream once the session has ended.
async fn events(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let Some(session) = state
        .page
        .session(&headers)
        .filter(|session| session.approver.is_some())
    else {
        return (
            StatusCode::UNAUTHORIZED,
            "the approvals page's events need a signed-in session: open /approvals",
        )
            .into_response();
    };
    let gateway = state.gateway.clone();
    let watch = Watch {
        resolved: Some(gateway.state.resolved()),
        parked: Some(gateway.state.newly_parked()),
        refresh: tokio::time::interval_at(
            tokio::time::Instant::now() + defaults::PAGE_REFRESH,
            defaults::PAGE_REFRESH,
        ),
        stop: gateway.sessions_end.clone(),
        gateway,
        page: state.page.clone(),
        session: session.id,
        csrf: session.csrf,
        shown: None,
        first: true,
        ended: false,
    };
    let stream = futures_util::stream::unfold(watch, Watch::next);
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    secured(response.headers_mut());
    response
}

/// One open page's stream of events.
struct Watch {
    gateway: Arc<Gateway>,
    page: Arc<Page>,
    /// The session's id and token (its forms carry the token).
    session: String,
    csrf: String,
    /// Ids of calls resolved, and parked, at any replica; `None` once the
    /// backend closed one.
    resolved: Option<broadcast::Receiver<String>>,
    parked: Option<broadcast::Receiver<String>>,
    refresh: tokio::time::Interval,
    /// The gateway's sessions ending (it stops).
    stop: tokio_util::sync::CancellationToken,
    /// The ids last sent (or the error), so an unchanged list is not sent
    /// again.
    shown: Option<Result<Vec<String>, String>>,
    first: bool,
    ended: bool,
}

impl Watch {
    /// The next event: the first list at once, then the list whenever it
    /// changed; `signed-out` once the session ended, then nothing.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Watch)> {
        loop {
            if self.ended {
                return None;
            }
            if !self.first {
                tokio::select! {
                    () = self.stop.cancelled() => return None,
                    () = announced(&mut self.resolved) => {}
                    () = announced(&mut self.parked) => {}
                    _ = self.refresh.tick() => {}
                }
            }
            self.first = false;
            let signed_in = self
                .page
                .sessions
                .get(&self.session)
                .is_some_and(|session| session.approver.is_some());
            if !signed_in {
                self.ended = true;
                return Some((Ok(Event::default().event("signed-out").data("")), self));
            }
            let pending = pending(&self.gateway).await;
            let ids = pending
                .as_ref()
                .map(|calls| calls.iter().map(|call| call.id.clone()).collect())
                .map_err(Clone::clone);
            if self.shown.as_ref() == Some(&ids) {
                continue;
            }
            self.shown = Some(ids);
            let html = render::calls(&pending, &self.csrf, SystemTime::now());
            return Some((Ok(Event::default().event("pending").data(html)), self));
        }
    }
}

/// Resolves when `receiver` announces an id (or missed some); never, once
/// it is closed (its backend announces nothing).
async fn announced(receiver: &mut Option<broadcast::Receiver<String>>) {
    if let Some(live) = receiver {
        match live.recv().await {
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => *receiver = None,
        }
    }
    std::future::pending::<()>().await;
}

/// `GET /page/app.js`.
async fn script() -> Response {
    asset(
        include_str!("page/app.js"),
        "text/javascript; charset=utf-8",
    )
}

/// `GET /page/style.css`.
async fn style() -> Response {
    asset(include_str!("page/style.css"), "text/css; charset=utf-8")
}

fn asset(text: &'static str, content_type: &'static str) -> Response {
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    secured(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_only_when_asked() {
        let plain = Page::new(false, None);
        let set = plain.set_cookie(Some("abc"));
        assert_eq!(
            set,
            "mcp-hints-approver=abc; HttpOnly; SameSite=Strict; Path=/"
        );
        let secure = Page::new(true, None);
        assert_eq!(
            secure.set_cookie(Some("abc")),
            "__Host-mcp-hints-approver=abc; HttpOnly; SameSite=Strict; Secure; Path=/"
        );
        let removed = plain.set_cookie(None);
        assert!(removed.starts_with("mcp-hints-approver=; "), "{removed}");
        assert!(removed.contains("Max-Age=0"), "{removed}");
    }

    fn cookie_headers(page: &Page, id: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {}={id}", page.cookie_name())).unwrap(),
        );
        headers
    }

    #[test]
    fn a_decision_with_the_cookie_needs_the_sessions_csrf_token() {
        let page = Page::new(false, None);
        let form = page.sessions.start().unwrap();
        let approver = Approver {
            name: "carol".to_owned(),
            via: SignIn::AdminToken,
        };
        // An anonymous session decides nothing: 401, as without a cookie.
        assert!(
            page.decider(&cookie_headers(&page, &form.id), b"")
                .is_none()
        );
        let session = page
            .sessions
            .sign_in(&form.id, approver.clone(), None)
            .unwrap();
        let mut headers = cookie_headers(&page, &session.id);
        let refused = page.decider(&headers, b"").unwrap().unwrap_err();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        headers.insert(CSRF_HEADER, HeaderValue::from_static("wrong"));
        assert!(page.decider(&headers, b"").unwrap().is_err());
        headers.insert(CSRF_HEADER, HeaderValue::from_str(&session.csrf).unwrap());
        assert_eq!(
            page.decider(&headers, b"").unwrap().unwrap(),
            (approver.clone(), false)
        );
        // A form's field, only in a form.
        let mut headers = cookie_headers(&page, &session.id);
        let body = format!("csrf={}", session.csrf);
        assert!(page.decider(&headers, body.as_bytes()).unwrap().is_err());
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        assert_eq!(
            page.decider(&headers, body.as_bytes()).unwrap().unwrap(),
            (approver, true)
        );
        // A session id the page never gave.
        assert!(
            page.decider(&cookie_headers(&page, "forged"), b"")
                .is_none()
        );
    }
}

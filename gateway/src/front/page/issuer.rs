//! The approvals page's sign-in through the `[auth]` issuer: the page as
//! an OAuth 2.1 client of it (`[approval] approver_scope`, `client_id`),
//! with the authorization code grant and PKCE (OAuth 2.1 §4.1, RFC 7636
//! S256).
//!
//! `POST /sign-in/issuer` (the sign-in form's button, with its CSRF
//! token) starts a [`Flow`] in the browser's anonymous session (a random
//! `state` and PKCE verifier, kept there) and answers 303 to the issuer's
//! `authorization_endpoint` with `response_type=code`, the `client_id`,
//! the `redirect_uri`, the approver scope as `scope`, the `state`, the
//! S256 `code_challenge`, and `[auth] audience` as the RFC 8707
//! `resource`, so that the token it gives is one the resource server
//! verifies. `GET /sign-in/callback` takes the issuer's answer: the
//! `state` must be the flow's (one answer per flow), `iss`, when given or
//! promised by the issuer's metadata, must be `[auth] issuer` (RFC 9207
//! §2.4), an `error` is said as it is; the code is exchanged at the
//! `token_endpoint` (with the verifier, the `redirect_uri` and the
//! `resource`; the client's secret with HTTP Basic when it has one), the
//! access token verified as `/mcp` verifies one (but for `[auth] scopes`)
//! and required to hold the approver scope, and the session signed in as
//! the token's principal: the name the audit log records as the
//! decider.
//!
//! Every refusal ends on the sign-in page with what went wrong, in words
//! (escaped), and no session signed in; the event says it on one line,
//! escaped. Neither the code nor any token is ever shown or logged. A
//! session signed in so ends when its access token expires (`exp`), or
//! sooner as the page's own caps end every session (idle, lifetime).
//!
//! The session's cookie is `SameSite=Strict`, which a browser does not
//! send on the navigation back from an issuer of another site: the flow
//! is found again through a second cookie, `SameSite=Lax` (sent on a
//! top-level `GET`), naming the same anonymous session, set with the
//! redirect to the issuer and removed by the callback. The callback's
//! answer then sends the browser on to `/approvals` with a `Refresh`,
//! a navigation the page itself starts, so the new `Strict` cookie goes
//! with it.

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use cookie::{Cookie, SameSite};
use http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use mcp_hints_core::escape;
use sha2::{Digest as _, Sha256};

use super::sessions::{Approver, Flow, Session, SignIn};
use super::{
    MAX_NAME_CHARS, Page, back_to_page, csrf_refused, expired_form, field, html, no_session,
    render, secured,
};
use crate::config::{ApproverSignIn, Config};
use crate::defaults;
use crate::front::admin::AdminState;
use crate::front::oauth::{Refusal, ResourceServer};

/// The path of the callback, where the issuer sends the approver back.
pub(super) const CALLBACK_PATH: &str = "/sign-in/callback";

/// The page's client of the issuer: `[approval]`'s sign-in, its redirect
/// URI resolved.
#[derive(Debug)]
pub(crate) struct Client {
    sign_in: ApproverSignIn,
    redirect_uri: String,
}

impl Client {
    /// The client `config` configures for an admin endpoint bound at
    /// `bound`: its `redirect_uri`, else `http://BOUND/sign-in/callback`;
    /// `None` without `[approval] approver_scope`.
    pub(crate) fn new(config: &Config, bound: SocketAddr) -> Option<Client> {
        let sign_in = config.approval.sign_in.clone()?;
        let redirect_uri = sign_in
            .redirect_uri
            .clone()
            .unwrap_or_else(|| format!("http://{bound}{CALLBACK_PATH}"));
        Some(Client {
            sign_in,
            redirect_uri,
        })
    }

    /// Where the issuer sends the approver back.
    pub(crate) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }
}

/// The origins a sign-in form may be sent on to besides the page's own:
/// the issuer's, and its authorization endpoint's when its metadata was
/// read already (they differ at few issuers). A browser holds a form's
/// redirects to the page's `form-action`, so the `303` to the issuer
/// needs its origin there.
fn form_targets(oauth: &ResourceServer) -> Vec<String> {
    let mut origins = Vec::new();
    let known = oauth
        .known_issuer_metadata()
        .and_then(|metadata| metadata.authorization_endpoint.clone().ok());
    for url in [Some(oauth.config().issuer.clone()), known]
        .into_iter()
        .flatten()
    {
        if let Ok(parsed) = reqwest::Url::parse(&url) {
            let origin = parsed.origin().ascii_serialization();
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
    }
    origins
}

/// `response` (a page with the sign-in form) with its
/// `Content-Security-Policy`'s `form-action` widened to
/// [`form_targets`], when the page signs in through an issuer.
pub(super) fn allowing_issuer(mut response: Response, state: &AdminState) -> Response {
    let Some((_, oauth)) = configured(state) else {
        return response;
    };
    let targets = form_targets(oauth).join(" ");
    let policy = super::CONTENT_SECURITY_POLICY.replace(
        "form-action 'self'",
        &format!("form-action 'self' {targets}"),
    );
    if let Ok(value) = HeaderValue::from_str(&policy) {
        response
            .headers_mut()
            .insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
}

/// Reads the issuer's metadata in the background, so that the sign-in
/// form allows its authorization endpoint from the first (and a
/// metadata that cannot be read is said at start); a failure is said as
/// an event, and read again when an approver presses the button.
pub(crate) fn discover_early(oauth: std::sync::Arc<ResourceServer>) {
    tokio::spawn(async move {
        if let Err(why) = oauth.issuer_metadata().await {
            let why = escape::one_line(&why).into_owned();
            tracing::warn!(
                error = %why,
                "the approvals page cannot read the identity provider's metadata yet: {why}"
            );
        }
    });
}

/// The PKCE `code_challenge` of `verifier` (RFC 7636 §4.2, `S256`):
/// base64url, without padding, of its SHA-256.
fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The name of the cookie that finds the flow again on the way back from
/// the issuer: `__Host-mcp-hints-sign-in` when `Secure`, else
/// `mcp-hints-sign-in`.
fn flow_cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-mcp-hints-sign-in"
    } else {
        "mcp-hints-sign-in"
    }
}

/// The `Set-Cookie` value of the flow cookie naming the session `id`, for
/// as long as a sign-in form lives; `None` removes it.
fn flow_cookie(secure: bool, id: Option<&str>) -> String {
    let mut cookie = Cookie::build((flow_cookie_name(secure), id.unwrap_or_default().to_owned()))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(
            cookie::time::Duration::try_from(defaults::SIGN_IN_FORM_LIFETIME)
                .unwrap_or(cookie::time::Duration::ZERO),
        )
        .build();
    if id.is_none() {
        cookie.make_removal();
    }
    cookie.to_string()
}

/// `response` with each of `cookies` as a `Set-Cookie` of its own.
fn with_cookies(mut response: Response, cookies: &[String]) -> Response {
    let headers = response.headers_mut();
    headers.remove(header::SET_COOKIE);
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(cookie) {
            headers.append(header::SET_COOKIE, value);
        }
    }
    response
}

/// The issuer's client and resource server, when the page signs in there.
fn configured(state: &AdminState) -> Option<(&Client, &ResourceServer)> {
    let client = state.page.issuer.as_ref()?;
    let oauth = state.gateway.oauth.as_deref()?;
    Some((client, oauth))
}

/// 404 for the sign-in routes of a page that does not sign in through an
/// issuer.
fn not_configured() -> Response {
    (
        StatusCode::NOT_FOUND,
        "this gateway's approvals page signs in with the admin token only: \
         `[approval] approver_scope` is not set",
    )
        .into_response()
}

/// Says that a sign-in through the issuer was refused, on one line,
/// escaped.
fn log_refused(why: &str) {
    let why = escape::one_line(why).into_owned();
    tracing::warn!(
        reason = %why,
        "a sign-in to the approvals page through the identity provider was refused: {why}"
    );
}

/// `POST /sign-in/issuer`: form `csrf`. 303 to the issuer's authorization
/// endpoint, the flow kept in the session; 403 without the form's session
/// or its CSRF token; the sign-in form again, saying why, when the
/// issuer's metadata cannot be read.
pub(super) async fn start(
    State(state): State<AdminState>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let Some((client, oauth)) = configured(&state) else {
        return not_configured();
    };
    let page = &state.page;
    let Some(session) = page.session(&headers) else {
        return expired_form();
    };
    if !field(&body, "csrf").is_some_and(|token| session.csrf_matches(&token)) {
        return csrf_refused();
    }
    if session.approver.is_some() {
        return back_to_page(None);
    }
    let refused = |status: StatusCode, why: String| {
        log_refused(&why);
        let form = html(
            status,
            render::sign_in(&session.csrf, Some(&why), true),
            None,
        );
        allowing_issuer(form, &state)
    };
    let endpoint = match oauth.issuer_metadata().await {
        Ok(metadata) => metadata.authorization_endpoint.clone(),
        Err(why) => Err(why),
    };
    let endpoint = match endpoint {
        Ok(endpoint) => endpoint,
        Err(why) => {
            return refused(
                StatusCode::BAD_GATEWAY,
                format!("Your identity provider cannot be asked to sign you in: {why}."),
            );
        }
    };
    let flow = match page.sessions.begin_flow(&session.id) {
        Ok(Some(flow)) => flow,
        Ok(None) => return expired_form(),
        Err(error) => return no_session(&error),
    };
    let Ok(mut url) = reqwest::Url::parse(&endpoint) else {
        return refused(
            StatusCode::BAD_GATEWAY,
            "Your identity provider's authorization endpoint is not a URL.".to_owned(),
        );
    };
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client.sign_in.client_id)
        .append_pair("redirect_uri", &client.redirect_uri)
        .append_pair("scope", &client.sign_in.scope)
        .append_pair("state", &flow.state)
        .append_pair("code_challenge", &challenge(&flow.verifier))
        .append_pair("code_challenge_method", "S256")
        .append_pair("resource", &oauth.config().audience);
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    secured(headers);
    if let Ok(location) = HeaderValue::from_str(url.as_str()) {
        headers.insert(header::LOCATION, location);
    }
    with_cookies(response, &[flow_cookie(page.secure, Some(&session.id))])
}

/// The parameters of the issuer's answer (OAuth 2.1 §4.1.2, §4.1.2.1;
/// RFC 9207 §2), the first of each when repeated.
#[derive(Default)]
struct Answer {
    state: Option<String>,
    code: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

impl Answer {
    fn of(uri: &Uri) -> Answer {
        let mut answer = Answer::default();
        for (key, value) in form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
            let slot = match key.as_ref() {
                "state" => &mut answer.state,
                "code" => &mut answer.code,
                "iss" => &mut answer.iss,
                "error" => &mut answer.error,
                "error_description" => &mut answer.error_description,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(value.into_owned());
            }
        }
        answer
    }
}

/// Why a callback is refused: the status and the words for the page and
/// the event.
struct Refused(StatusCode, String);

/// `GET /sign-in/callback`: the issuer's answer. 200 signed in (a
/// `Refresh` on to `/approvals`, under a new session id), else the
/// sign-in form saying why (400 for an answer this browser did not ask
/// for, 401 for a token that does not verify, 403 for one without the
/// approver scope, 502 when the issuer refused or cannot be reached, 503
/// when its keys cannot be had).
pub(super) async fn callback(
    State(state): State<AdminState>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let Some((client, oauth)) = configured(&state) else {
        return not_configured();
    };
    let page = &state.page;
    let secure = page.secure;
    let removed = flow_cookie(secure, None);
    let session = flow_session(page, &headers).or_else(|| page.session(&headers));
    let Some(session) = session else {
        let why = "This sign-in has expired, or was started in another browser: sign in again.";
        log_refused(why);
        let fresh = match page.sessions.start() {
            Ok(fresh) => fresh,
            Err(error) => return no_session(&error),
        };
        let response = html(
            StatusCode::BAD_REQUEST,
            render::sign_in(&fresh.csrf, Some(why), true),
            None,
        );
        let response = allowing_issuer(response, &state);
        return with_cookies(response, &[page.set_cookie(Some(&fresh.id)), removed]);
    };
    if session.approver.is_some() {
        let why = "This browser is signed in already; the answer from the identity provider \
                   was not used.";
        log_refused(why);
        let response = html(StatusCode::BAD_REQUEST, render::notice(why, true), None);
        return with_cookies(response, &[removed]);
    }
    match signed_in(page, client, oauth, &session, &Answer::of(&uri)).await {
        Ok(Ok(signed_in)) => {
            let name = signed_in
                .approver
                .as_ref()
                .map(|approver| approver.name.clone())
                .unwrap_or_default();
            let shown = escape::one_line(&name).into_owned();
            tracing::info!(
                approver = %shown,
                "{shown} signed in to the approvals page through the identity provider"
            );
            let mut response = html(
                StatusCode::OK,
                render::notice(&format!("Signed in as {name}."), false),
                None,
            );
            response
                .headers_mut()
                .insert("refresh", HeaderValue::from_static("0; url=/approvals"));
            with_cookies(response, &[page.set_cookie(Some(&signed_in.id)), removed])
        }
        Ok(Err(error)) => no_session(&error),
        Err(Refused(status, why)) => {
            log_refused(&why);
            let response = html(
                status,
                render::sign_in(&session.csrf, Some(&why), true),
                None,
            );
            with_cookies(allowing_issuer(response, &state), &[removed])
        }
    }
}

/// The anonymous session the flow cookie names, if it is live.
fn flow_session(page: &Page, headers: &HeaderMap) -> Option<Session> {
    let name = flow_cookie_name(page.secure);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .filter(|cookie| cookie.name() == name)
        .find_map(|cookie| page.sessions.get(cookie.value()))
}

/// The session `session` signed in for the issuer's `answer`, each check
/// of the module's opening comment in order; the inner `Err` when no new
/// session id can be drawn.
async fn signed_in(
    page: &Page,
    client: &Client,
    oauth: &ResourceServer,
    session: &Session,
    answer: &Answer,
) -> Result<Result<Session, super::sessions::NoRandomness>, Refused> {
    let refused = |status: StatusCode, why: String| Err(Refused(status, why));
    let Some(state) = &answer.state else {
        return refused(
            StatusCode::BAD_REQUEST,
            "The answer from your identity provider carries no state, so it is not one this \
             page asked for: sign in again."
                .to_owned(),
        );
    };
    let Some(flow) = page.sessions.take_flow(&session.id, state) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "The answer from your identity provider does not belong to this sign-in (its state \
             is not the one this page sent): sign in again."
                .to_owned(),
        );
    };
    let metadata = oauth.issuer_metadata().await.map_err(|why| {
        Refused(
            StatusCode::BAD_GATEWAY,
            format!("Your identity provider's metadata cannot be read: {why}."),
        )
    })?;
    let issuer = &oauth.config().issuer;
    match &answer.iss {
        Some(iss) if iss != issuer => {
            let iss = escape::shown(iss);
            return refused(
                StatusCode::BAD_REQUEST,
                format!(
                    "The answer comes from another issuer ({iss}) than this gateway's ({issuer}) \
                     (RFC 9207): sign in again."
                ),
            );
        }
        None if metadata.iss_parameter_supported => {
            return refused(
                StatusCode::BAD_REQUEST,
                "The answer from your identity provider does not name its issuer (iss), which \
                 its metadata promises (RFC 9207): sign in again."
                    .to_owned(),
            );
        }
        _ => {}
    }
    if let Some(error) = &answer.error {
        // The issuer's words, cut and with control characters escaped.
        let error = escape::shown(error);
        let described = answer
            .error_description
            .as_deref()
            .map(|text| format!(" ({})", escape::shown(text)))
            .unwrap_or_default();
        return refused(
            StatusCode::BAD_GATEWAY,
            format!("Your identity provider refused the sign-in: {error}{described}."),
        );
    }
    let Some(code) = &answer.code else {
        return refused(
            StatusCode::BAD_GATEWAY,
            "The answer from your identity provider carries neither a code nor an error."
                .to_owned(),
        );
    };
    let token_endpoint = metadata.token_endpoint.clone().map_err(|why| {
        Refused(
            StatusCode::BAD_GATEWAY,
            format!("Your identity provider cannot give a token: {why}."),
        )
    })?;
    let token = exchange(oauth, client, &token_endpoint, code, &flow).await?;
    let verified = oauth.verify_any_scope(&token).await.map_err(|refusal| {
        let (status, why) = match refusal {
            Refusal::Unavailable(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the issuer's keys cannot be fetched: {why}"),
            ),
            Refusal::Invalid(why) => (StatusCode::UNAUTHORIZED, why.to_owned()),
            Refusal::Missing | Refusal::InsufficientScope(_) => (
                StatusCode::UNAUTHORIZED,
                "it is not an access token of this gateway's issuer".to_owned(),
            ),
        };
        Refused(
            status,
            format!(
                "The access token from your identity provider is not one this gateway \
                 accepts: {why}."
            ),
        )
    })?;
    let name = verified.principal.name.to_string();
    let scope = &client.sign_in.scope;
    if !verified.principal.scopes.iter().any(|held| held == scope) {
        return refused(
            StatusCode::FORBIDDEN,
            format!(
                "{} signed in at your identity provider, but is not an approver: the token \
                 it gave lacks the scope {scope}.",
                escape::shown(&name)
            ),
        );
    }
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return refused(
            StatusCode::FORBIDDEN,
            format!(
                "The name your identity provider gives (its `{}` claim) is longer than \
                 {MAX_NAME_CHARS} characters or holds control characters, so it cannot name \
                 an approver in the audit log.",
                oauth.config().principal_claim
            ),
        );
    }
    // Within the clock skew a token verifies a little past its `exp`; a
    // session cannot start already over.
    let Ok(left) = verified.expires_at.duration_since(SystemTime::now()) else {
        return refused(
            StatusCode::UNAUTHORIZED,
            "The access token from your identity provider has expired already: sign in again."
                .to_owned(),
        );
    };
    let approver = Approver {
        name,
        via: SignIn::Issuer,
    };
    Ok(page
        .sessions
        .sign_in(&session.id, approver, Some(Instant::now() + left)))
}

/// The access token for `code` from the issuer's `token_endpoint`
/// (OAuth 2.1 §4.1.3): the code, the `redirect_uri`, the flow's PKCE
/// verifier and the `resource`, the client authenticated with HTTP Basic
/// when it has a secret, else named by `client_id` in the form.
async fn exchange(
    oauth: &ResourceServer,
    client: &Client,
    token_endpoint: &str,
    code: &str,
    flow: &Flow,
) -> Result<String, Refused> {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", client.redirect_uri.as_str()),
        ("code_verifier", flow.verifier.as_str()),
        ("resource", oauth.config().audience.as_str()),
    ];
    let basic = match &client.sign_in.client_secret {
        Some(secret) => Some((client.sign_in.client_id.as_str(), secret.expose())),
        None => {
            form.push(("client_id", client.sign_in.client_id.as_str()));
            None
        }
    };
    let (status, body) = oauth
        .post_form(token_endpoint, &form, basic)
        .await
        .map_err(|why| {
            Refused(
                StatusCode::BAD_GATEWAY,
                format!("Your identity provider cannot be asked for a token: {why}."),
            )
        })?;
    if !status.is_success() {
        // RFC 6749 §5.2's error answer; its words are the issuer's.
        let error = escape::shown(body["error"].as_str().unwrap_or("no error code"));
        let described = body["error_description"]
            .as_str()
            .map(|text| format!(" ({})", escape::shown(text)))
            .unwrap_or_default();
        return Err(Refused(
            StatusCode::BAD_GATEWAY,
            format!(
                "Your identity provider did not give a token for the sign-in: it answered \
                 {status}, {error}{described}."
            ),
        ));
    }
    let bearer = body["token_type"]
        .as_str()
        .is_some_and(|kind| kind.eq_ignore_ascii_case("bearer"));
    match body["access_token"].as_str() {
        Some(token) if bearer && !token.is_empty() => Ok(token.to_owned()),
        _ => Err(Refused(
            StatusCode::BAD_GATEWAY,
            "Your identity provider answered the token request without a bearer access token."
                .to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636s_s256() {
        // RFC 7636 Appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn the_flow_cookie_is_lax_so_it_comes_back_from_the_issuer() {
        assert_eq!(
            flow_cookie(false, Some("abc")),
            "mcp-hints-sign-in=abc; HttpOnly; SameSite=Lax; Path=/; Max-Age=1800"
        );
        assert!(flow_cookie(true, Some("abc")).starts_with("__Host-mcp-hints-sign-in=abc; "));
        assert!(flow_cookie(true, Some("abc")).contains("; Secure"));
        let removed = flow_cookie(false, None);
        assert!(removed.starts_with("mcp-hints-sign-in=; "), "{removed}");
        assert!(removed.contains("Max-Age=0"), "{removed}");
    }
}

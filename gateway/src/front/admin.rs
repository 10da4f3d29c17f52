//! The admin endpoint, where approvers see and decide parked calls
//! (`GET /pending`, `POST /approve/{id}`, `POST /deny/{id}`) and Prometheus
//! scrapes its metrics (`GET /metrics`), behind the admin token; where
//! approvers sign in to the approvals page (`super::page`); and where a
//! load balancer or an orchestrator asks whether the gateway lives and can
//! serve (`GET /healthz`, `GET /readyz`), without one; all behind the HTTP
//! guard and a `Host` check.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{FromRef, Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::Listener;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use mcp_hints::wire::HttpGuard;
use serde_json::{Value, json};

use super::Gateway;
use super::auth::{bearer, unauthorized};
use super::page::{self, Page};
use super::serve::{allowed_hosts, bind};
use crate::Error;
use crate::approval::{ApprovalError, DecideRequest};

/// What the admin endpoint's handlers share: the gateway, and the
/// approvals page's sessions.
#[derive(Clone)]
pub(super) struct AdminState {
    pub(super) gateway: Arc<Gateway>,
    pub(super) page: Arc<Page>,
}

impl FromRef<AdminState> for Arc<Gateway> {
    fn from_ref(state: &AdminState) -> Arc<Gateway> {
        state.gateway.clone()
    }
}

/// Serves the admin endpoint on `address`, in a task of its own. Its
/// routes:
///
/// | route | token | answers |
/// |---|---|---|
/// | `GET /pending` | admin | 200 `{"pending": [PARKED, ...]}`; 503 `{"error": ...}` when the shared state cannot be read |
/// | `POST /approve/{id}`, `POST /deny/{id}` | admin, or the page's session | 200 `{"id", "decision"}`; 404 for no such parked call, 503 when the shared state cannot be reached; with the token, the body is `{"by": NAME}` (at most 64 characters, none of them control or bidirectional: else 400) or empty (by `admin`); with the page's session cookie instead, the session's CSRF token is required (`X-CSRF-Token`, or a form's `csrf` field: 403 without it), the decision is by the signed-in approver, and a form is answered 303 back to the page |
/// | `GET /`, `GET /approvals`, `POST /sign-in`, `POST /sign-in/issuer`, `GET /sign-in/callback`, `POST /sign-out`, `GET /events`, `GET /page/*` | the page's session | the approvals page: sign in with the admin token (or through the `[auth]` issuer, with `[approval] approver_scope`), see parked calls as they come (server-sent events), approve or deny them; see below |
/// | `GET /metrics` | admin | 200, the metrics in Prometheus' text format (0.0.4), as the crate documentation's "Metrics" lists them; 404 unless the gateway was started with [`GatewayBuilder::metrics`](super::GatewayBuilder::metrics) |
/// | `GET /healthz` | none | 200 `ok` while the process serves (liveness) |
/// | `GET /readyz` | none | 200 `{"ready": true}` when every upstream is reachable and a shared state (`[state] redis`) answers; else 503 `{"ready": false, "unready": [{"kind": "upstream", "name": NAME, "reason": WHY}, ...]}` (kind `state`, name `redis`, for the shared state), each name and reason escaped (readiness: a replica to take out of rotation) |
///
/// A route that needs the admin token answers 401 without
/// `Authorization: Bearer` with it; `/healthz` and `/readyz` need none (a
/// probe carries no secret, and they say nothing a caller could act on).
/// Like the client endpoint, every route is behind [`HttpGuard`] (403 for
/// an `Origin` other than its own; `listen.allow_origins` are for clients,
/// not here) and a `Host` check (403 for a name other than a loopback one
/// or the bound address, 400 for none), so that a web page cannot reach it
/// by DNS rebinding. Says the bound address as an event: `gateway: admin
/// endpoint at http://ADDR`, and the page's: `approvals page at
/// http://ADDR/approvals`.
///
/// The approvals page keeps its sessions in this process, under a
/// random id in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` as
/// `[admin] secure_cookie` says: by default on unless the endpoint is
/// loopback, which is plain HTTP), and every POST it makes carries the
/// session's CSRF token; a bearer-token request needs none. What the page
/// shows and how it updates: the crate README's "Approvals page".
///
/// # Errors
///
/// [`Error::AdminWithoutToken`] when `[admin]` gives no token,
/// [`Error::NotLoopback`] for an address that is not loopback without
/// `listen.public`, [`Error::Bind`] for one that cannot be bound (or
/// [`Error::LocalAddress`] when the bound address cannot be read).
pub async fn serve_admin(
    gateway: Arc<Gateway>,
    address: SocketAddr,
) -> Result<tokio::task::JoinHandle<()>, Error> {
    if gateway.config.admin.is_none() {
        return Err(Error::AdminWithoutToken {
            config: gateway.config.path.clone(),
        });
    }
    let listener = bind(address, gateway.config.listen.public, "listen.admin_http").await?;
    let bound = listener.local_addr().map_err(|error| Error::LocalAddress {
        key: "listen.admin_http",
        error,
    })?;
    let _ = gateway.admin_flag.set(crate::approval::admin_flag(
        &gateway.config.path,
        address,
        bound,
    ));
    let secure = gateway
        .config
        .admin
        .as_ref()
        .is_some_and(|admin| admin.cookie_is_secure(bound));
    let page_url = format!("http://{bound}/approvals");
    // What the webhook links to: the page as approvers reach it.
    let linked = gateway.config.approval.page_url.clone();
    let _ = gateway.page.set(linked.unwrap_or_else(|| page_url.clone()));
    let issuer = page::issuer::Client::new(&gateway.config, bound);
    if let (Some(issuer), Some(oauth)) = (&issuer, &gateway.oauth) {
        page::issuer::discover_early(oauth.clone());
        let redirect_uri = mcp_hints_core::escape::one_line(issuer.redirect_uri()).into_owned();
        tracing::info!(
            redirect_uri = %redirect_uri,
            "approvers may sign in through the identity provider, which sends them back to \
             {redirect_uri}"
        );
    }
    let state = AdminState {
        gateway,
        page: Arc::new(Page::new(secure, issuer)),
    };
    let routes = axum::Router::new()
        .route("/pending", get(admin_pending))
        .route("/approve/{id}", post(admin_approve))
        .route("/deny/{id}", post(admin_deny))
        .route("/metrics", get(admin_metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(page::routes())
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(allowed_hosts(bound)),
            admin_host,
        ));
    let guard = HttpGuard::for_address(bound);
    let app = axum::Router::new().fallback_service(guard.service(routes));
    tracing::info!(address = %bound, "admin endpoint at http://{bound}");
    tracing::info!(address = %page_url, "approvals page at {page_url}");
    Ok(tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the admin endpoint stopped: {error}");
        }
    }))
}

/// A host name as `Host` carries it, compared without case and brackets
/// (`[::1]` is `::1`), as rmcp compares them.
fn host_name(authority: &str) -> Option<String> {
    let authority = http::uri::Authority::try_from(authority).ok()?;
    Some(
        authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
    )
}

/// The admin endpoint's `Host` check, in front of its routes: 400 for a
/// request without a readable `Host` (or an HTTP/2 `:authority`), 403 for
/// one whose host is not in `allowed` (rmcp's answers to the same on the
/// client endpoint); the port is not compared, as rmcp does not.
async fn admin_host(
    State(allowed): State<Arc<Vec<String>>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let named = match request.headers().get(header::HOST) {
        Some(host) => host.to_str().ok().and_then(host_name),
        None => request
            .uri()
            .authority()
            .and_then(|a| host_name(a.as_str())),
    };
    let Some(host) = named else {
        return (
            StatusCode::BAD_REQUEST,
            "Bad Request: missing or invalid Host header",
        )
            .into_response();
    };
    if !allowed
        .iter()
        .filter_map(|allowed| host_name(allowed).or_else(|| Some(allowed.to_ascii_lowercase())))
        .any(|allowed| allowed == host)
    {
        return (
            StatusCode::FORBIDDEN,
            "Forbidden: Host header is not allowed",
        )
            .into_response();
    }
    next.run(request).await
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// `Err` is the 401 for a request without the admin token.
#[allow(clippy::result_large_err)]
fn admin_authorized(gateway: &Gateway, headers: &HeaderMap) -> Result<(), Response> {
    let token = bearer(headers);
    match (&gateway.config.admin, token) {
        (Some(admin), Some(token)) if admin.token.matches(token) => Ok(()),
        _ => Err(unauthorized(
            "mcp-hints-gateway-admin",
            "the admin endpoint needs `Authorization: Bearer` with the admin token",
        )),
    }
}

async fn admin_pending(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Err(refused) = admin_authorized(&gateway, &headers) {
        return refused;
    }
    match gateway.approvals.pending().await {
        Ok(pending) => json_response(StatusCode::OK, &json!({ "pending": pending })),
        Err(error) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "error": error.to_string() }),
        ),
    }
}

/// `GET /metrics`: the gateway's metrics for Prometheus, with the admin
/// token.
async fn admin_metrics(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Err(refused) = admin_authorized(&gateway, &headers) {
        return refused;
    }
    let Some(text) = gateway.metrics.render() else {
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({ "error": "this gateway keeps no metrics (started without them)" }),
        );
    };
    let mut response = (StatusCode::OK, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// `GET /healthz`: the process serves. Nothing is asked of what it
/// depends on: an unreachable upstream is not a reason to restart it.
async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: every readiness probe asked; 503 naming each that is
/// not ready.
async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let unready = crate::readiness::unready(&gateway.readiness).await;
    if unready.is_empty() {
        json_response(StatusCode::OK, &json!({ "ready": true }))
    } else {
        json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({ "ready": false, "unready": unready }),
        )
    }
}

async fn admin_approve(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    admin_decide(&state, &headers, &id, &body, true).await
}

async fn admin_deny(
    State(state): State<AdminState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    admin_decide(&state, &headers, &id, &body, false).await
}

/// Approves or denies the parked call `id`: with `Authorization`, the
/// bearer-token API (`body` a [`DecideRequest`], or empty: by `admin`);
/// without it, the approvals page's session, its CSRF token required
/// ([`Page::decider`]); with neither, 401.
async fn admin_decide(
    state: &AdminState,
    headers: &HeaderMap,
    id: &str,
    body: &[u8],
    approve: bool,
) -> Response {
    let gateway = &state.gateway;
    if !headers.contains_key(header::AUTHORIZATION)
        && let Some(decider) = state.page.decider(headers, body)
    {
        return match decider {
            Ok((approver, false)) => decide(gateway, id, &approver.name, approve).await,
            Ok((approver, true)) => {
                // A form without the script: back to the page, which shows
                // the list without the call; a refusal is shown as is.
                let answer = decide(gateway, id, &approver.name, approve).await;
                if answer.status().is_success() {
                    let mut back = StatusCode::SEE_OTHER.into_response();
                    back.headers_mut()
                        .insert(header::LOCATION, HeaderValue::from_static("/approvals"));
                    back
                } else {
                    answer
                }
            }
            Err(refused) => refused,
        };
    }
    if let Err(refused) = admin_authorized(gateway, headers) {
        return refused;
    }
    let request: DecideRequest = if body.iter().all(u8::is_ascii_whitespace) {
        DecideRequest::default()
    } else {
        match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(error) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &json!({ "error": format!("the body is not {{\"by\": NAME}}: {error}") }),
                );
            }
        }
    };
    let by = request.by.unwrap_or_else(|| "admin".to_owned());
    if !super::page::is_approver_name(&by) {
        return json_response(
            StatusCode::BAD_REQUEST,
            &json!({
                "error": "`by` is at most 64 characters, without control or bidirectional \
                          characters: it is the approver's name in the audit log"
            }),
        );
    }
    decide(gateway, id, &by, approve).await
}

/// Approves or denies the parked call `id` as by `by`: 200 `{"id",
/// "decision"}`, or 404 or 503 `{"id", "error"}`.
async fn decide(gateway: &Gateway, id: &str, by: &str, approve: bool) -> Response {
    let decided = if approve {
        gateway.approvals.approve(id, by).await
    } else {
        gateway.approvals.deny(id, by).await
    };
    let decision = if approve { "approved" } else { "denied" };
    match decided {
        Ok(()) => json_response(StatusCode::OK, &json!({ "id": id, "decision": decision })),
        Err(error) => {
            let status = match error {
                ApprovalError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::NOT_FOUND,
            };
            json_response(status, &json!({ "id": id, "error": error.to_string() }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_endpoint_answers_loopback_names_and_its_own_address() {
        let loopback: SocketAddr = "127.0.0.1:8788".parse().unwrap();
        let hosts = allowed_hosts(loopback);
        assert_eq!(hosts, ["localhost", "127.0.0.1", "::1"]);
        let public: SocketAddr = "192.0.2.7:8788".parse().unwrap();
        assert!(allowed_hosts(public).contains(&"192.0.2.7".to_owned()));
        assert_eq!(host_name("[::1]:8788").as_deref(), Some("::1"));
        assert_eq!(host_name("LocalHost").as_deref(), Some("localhost"));
        assert_eq!(host_name("a b"), None);
    }
}

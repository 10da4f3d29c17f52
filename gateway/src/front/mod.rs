//! What the gateway's clients talk to: an rmcp [`ServerHandler`] serving
//! every upstream's tools, namespaced, with all four hints explicit; its
//! streamable HTTP endpoint (bearer tokens mapped to principals, checked
//! first: a `[[client]]`'s, or an OAuth access token of the `[auth]`
//! issuer, whose Protected Resource Metadata it serves beside `/mcp`; each session kept to the principal that created it; then Origin
//! and bodies checked by [`HttpGuard`](mcp_hints::wire::HttpGuard), Host
//! by rmcp) and its stdio endpoint (principal `local`); and the admin
//! endpoint where approvers see and decide parked calls, its metrics are
//! scraped and its health and readiness asked (Origin and Host checked the
//! same way).
//!
//! | module | holds |
//! |---|---|
//! | `gateway` | [`Gateway`] and its [`GatewayBuilder`]; the served list rebuilt as upstreams change |
//! | `catalogue` | the served tools, namespaced, hints explicit; [`served_tools`] |
//! | `call` | one `tools/call`, step by step |
//! | `serve` | [`serve_stdio`], [`router`], [`serve_http`]; binding a listener |
//! | `stateless` | a stateless 2026-07-28 `tools/call` over HTTP, answered without rmcp's per-request server |
//! | `auth` | bearer tokens to principals; each session kept to its principal |
//! | `oauth` | `[auth]`: the Protected Resource Metadata, the issuer's keys, access tokens verified |
//! | `admin` | [`serve_admin`]: where approvers see and decide parked calls, Prometheus scrapes the metrics, and probes ask for health and readiness |
//! | `page` | the approvals page the admin endpoint serves: sign-in, sessions and CSRF tokens, the parked calls as server-sent events |
//!
//! # A call, in order
//!
//! `Front::call_tool` reads as the request path, each step a function
//! of its own. *Resolve*: the name is split (an unknown one is a JSON-RPC
//! invalid-params error naming it). *Drift*: the tool's fingerprint is
//! checked against the drift lock. *Decide*: the policy decides.
//! *Record*: the `decided` audit entry is written, and only then does
//! anything go on (a log that cannot be written refuses the call, with
//! nothing forwarded); a refusal is a tool error naming the rule, and a
//! rule that looked back names, in the entry, the earlier calls that made
//! it fire. *Park*:
//! a call that needs approval is parked until an approver decides or it
//! expires, or is abandoned, never forwarded, when its client withdraws it
//! first (rmcp cancels the request's token on `notifications/cancelled`, a
//! closed request stream at 2026-07-28, and a session's end); how it ended
//! is logged. *Forward*: the call goes into its session's history (when a
//! rule looks back), then through the upstream's replay-safe client; a lost response that was not resent comes back as a tool error
//! saying delivery is unknown, the attempts (and so how often it may have
//! run), and what to read back. *Check*: a completed result (a tool error
//! included) goes through the `[[redact]]` rules that apply to its tool
//! ([`crate::redact`]): what they match is masked, or the result withheld
//! and a tool error saying so sent instead. *Finish*: the `finished` entry
//! records the outcome, the attempts and what the rules found, and the
//! session's history how it ended.
//!
//! # Tool names
//!
//! A tool whose own name the spec does not allow (empty, over 128
//! characters, or outside `A-Z a-z 0-9 _ - .`) is not served, and said once
//! as an event; its upstream's other tools are.
//!
//! # Hints on the way through
//!
//! Each listed tool carries all four hints explicitly, as the policy sees
//! them (asserted > declared > defaulted), and their sources under
//! [`PROVENANCE_META_KEY`](mcp_hints::PROVENANCE_META_KEY) in its `_meta`: the format `#[tool]` writes
//! (`"readOnlyHint": "declared"`, ...) with a third source, `"asserted"`.
//!
//! # Lifecycles
//!
//! rmcp answers both the `initialize` handshake and 2026-07-28's
//! `server/discover`. A change of an upstream's tools reaches clients of
//! the first as `notifications/tools/list_changed` on their session, and
//! clients of the second on a `subscriptions/listen` stream that asked for
//! `toolsListChanged`.

mod admin;
mod auth;
mod call;
mod catalogue;
mod gateway;
mod oauth;
mod page;
mod serve;
mod stateless;

use std::sync::{Arc, PoisonError};

use mcp_hints::pagination::{PageSize, list_tools_page};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio::sync::broadcast;

pub use self::admin::serve_admin;
pub(crate) use self::auth::Principal;
use self::call::CallContext;
pub use self::catalogue::{ServedTool, ServedTools, served_tools};
pub use self::gateway::{Gateway, GatewayBuilder};
pub use self::serve::{router, serve_http, serve_stdio};
use super::defaults;
pub use crate::upstream::{StopOnDrop, UNAVAILABLE_META_KEY};

/// The MCP server of one client connection: the gateway, and the principal
/// of a stdio client (HTTP requests carry theirs).
#[derive(Clone)]
pub(crate) struct Front {
    gateway: Arc<Gateway>,
    principal: Option<Principal>,
    /// The session of a stdio client, the one client of its front: a v4
    /// UUID made when the front is (HTTP requests carry theirs).
    stdio_session: Option<String>,
}

impl Front {
    /// The server of one stdio client, principal `local`.
    pub(crate) fn stdio(gateway: Arc<Gateway>) -> Front {
        Front {
            gateway,
            principal: Some(Principal::unscoped(
                crate::config::defaults::LOCAL_PRINCIPAL,
            )),
            stdio_session: Some(uuid::Uuid::new_v4().to_string()),
        }
    }

    /// The server of HTTP clients: each request's principal comes from its
    /// bearer token.
    pub(crate) fn http(gateway: Arc<Gateway>) -> Front {
        Front {
            gateway,
            principal: None,
            stdio_session: None,
        }
    }

    /// The caller: the stdio client's, or the one the authentication
    /// layer put into the HTTP request.
    fn principal(&self, context: &CallContext<'_>) -> Option<Principal> {
        if let Some(principal) = &self.principal {
            return Some(principal.clone());
        }
        context
            .http
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned()
    }

    /// `tools/call`, as rmcp's `call_tool` and [`stateless`] call it: the
    /// caller's principal, then [`call`](Front::call).
    async fn call_tool_in(
        &self,
        request: CallToolRequestParams,
        context: &CallContext<'_>,
    ) -> Result<CallToolResult, ErrorData> {
        let Some(principal) = self.principal(context) else {
            // The authentication layer lets no request through without
            // one; refuse rather than guess.
            return Err(ErrorData::from(crate::Error::NoPrincipal));
        };
        self.call(request, &principal, context).await
    }
}

impl ServerHandler for Front {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcp-hints-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Tools are named UPSTREAM__TOOL. Each carries all four hints explicitly; \
             _meta[\"mcp-hints/provenance\"] says whether each was asserted by the operator, \
             declared by the server or defaulted.",
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.gateway.catalogue().tools.clone();
        let cursor = request
            .as_ref()
            .and_then(|request| request.cursor.as_deref());
        let mut page = list_tools_page(tools, cursor, PageSize::from(defaults::PAGE_SIZE))?;
        // 2026-07-28's cache hints: the list changes whenever an upstream's
        // does, so it is never fresh for long.
        if context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
        {
            page.ttl_ms = Some(0);
            page.cache_scope = Some(CacheScope::Public);
        }
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call_tool_in(request, &CallContext::from(&context))
            .await
            .map(Into::into)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut sessions = self
            .gateway
            .sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|peer| !peer.is_transport_closed());
        sessions.push(context.peer);
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.gateway.changes.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        // A stream that ended is cancelled at the next turn.
                        let _ = context.sink().notify_tool_list_changed().await;
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

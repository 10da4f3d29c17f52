//! What the gateway's clients talk to: an rmcp [`ServerHandler`] serving
//! every upstream's tools, namespaced, with all four hints explicit; its
//! streamable HTTP endpoint (bearer tokens mapped to principals, checked
//! first; then Origin and bodies checked by [`HttpGuard`], Host by rmcp;
//! each session kept to the principal that created it) and its stdio endpoint (principal `local`);
//! and the admin endpoint where approvers see and decide parked calls
//! (Origin and Host checked the same way).
//!
//! # A call, in order
//!
//! [`Front::call_tool`] reads as the request path: the name is split (an
//! unknown one is a JSON-RPC invalid-params error naming it); the tool's
//! fingerprint is checked against the drift lock; the policy decides; the
//! `decided` audit entry is written, and only then does anything go on (a
//! log that cannot be written refuses the call, with nothing forwarded);
//! a refusal is a tool error naming the rule; a call that needs approval
//! is parked until an approver decides or it expires, or is abandoned,
//! never forwarded, when its client withdraws it first (rmcp cancels the
//! request's token on `notifications/cancelled`, a closed request stream
//! at 2026-07-28, and a session's end); the call goes through the
//! upstream's replay-safe client; a lost response that was not resent
//! comes back as a tool error saying delivery is unknown, the attempts
//! (and so how often it may have run), and what to read back; the
//! `finished` entry records the outcome and the attempts.
//!
//! # Tool names
//!
//! A tool whose own name the spec does not allow (empty, over 128
//! characters, or outside `A-Z a-z 0-9 _ - .`) is not served, and said once
//! on stderr; its upstream's other tools are.
//!
//! # Hints on the way through
//!
//! Each listed tool carries all four hints explicitly, as the policy sees
//! them (asserted > declared > defaulted), and their sources under
//! [`PROVENANCE_META_KEY`] in its `_meta`: the format `#[tool]` writes
//! (`"readOnlyHint": "declared"`, ...) with a third source, `"asserted"`.
//!
//! # Lifecycles
//!
//! rmcp answers both the `initialize` handshake and 2026-07-28's
//! `server/discover`. A change of an upstream's tools reaches clients of
//! the first as `notifications/tools/list_changed` on their session, and
//! clients of the second on a `subscriptions/listen` stream that asked for
//! `toolsListChanged`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::{Listener, ListenerExt};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use mcp_hints::client::{CallError, Outcome as CallOutcome, ToolCall};
use mcp_hints::fingerprint::PinnedTool;
use mcp_hints::pagination::{PageSize, list_tools_page};
use mcp_hints::wire::HttpGuard;
use mcp_hints::{Hint, PROVENANCE_META_KEY, ToolHints};
use mcp_hints_core::{escape, name};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    Implementation, JsonObject, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProtocolVersion, ResultType, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::approval::{Approvals, DecideRequest, Drift, DriftLock, Parked, Resolution};
use super::config::Config;
use super::log::{self, AuditLog, Decision, Durability, Entry, Outcome, Phase};
use super::policy::{self, CallScope, EffectiveHints, Expiry, Policy, Verdict};
use super::upstream::{self, ProcessGroups, UNAVAILABLE_META_KEY, Upstream};
use super::{check_names, defaults, namespaced, split};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The principal of an HTTP request, put in its extensions by the
/// authentication layer once its bearer token matched a `[[client]]`.
#[derive(Clone, Debug)]
pub struct Principal(pub Arc<str>);

/// One namespaced tool: where it goes and what the policy knows of it.
struct Listed {
    upstream: Arc<Upstream>,
    /// The upstream's own name for it.
    tool: String,
    hints: EffectiveHints,
    /// `hints` as each audit entry records them, serialised once here
    /// rather than on every call.
    logged_hints: Value,
    /// The upstream's definition's fingerprint and annotations, for the
    /// drift lock.
    pinned: PinnedTool,
}

/// The tools the gateway serves, as last built from the upstreams' lists.
#[derive(Default)]
struct Catalogue {
    /// As clients see them: namespaced, all four hints explicit.
    tools: Vec<Tool>,
    by_name: HashMap<String, Arc<Listed>>,
    /// The tools left out for their names, as `(upstream, tool)`, with
    /// what is wrong with the name.
    left_out: HashMap<(String, String), String>,
}

impl Catalogue {
    /// Builds the catalogue from every upstream's last known tools; a tool
    /// whose own name is not one the spec allows ([`name::problem`]) is left
    /// out, in [`left_out`](Catalogue::left_out), and its upstream's other
    /// tools are served.
    ///
    /// # Errors
    ///
    /// Colliding or over-long namespaced names, every one named.
    fn build(config: &Config, upstreams: &[Arc<Upstream>]) -> Result<Catalogue, String> {
        let mut catalogue = Catalogue::default();
        for upstream in upstreams {
            let unavailable = upstream.unavailable();
            for tool in upstream.tools().iter() {
                if let Some(problem) = name::problem(&tool.name) {
                    catalogue.left_out.insert(
                        (upstream.name.clone(), tool.name.to_string()),
                        problem.to_string(),
                    );
                    continue;
                }
                let name = namespaced(&upstream.name, &tool.name);
                let served = ToolHints::of(tool);
                let hints =
                    policy::effective_hints(&config.asserts, &upstream.name, &tool.name, &served);
                let definition = match serde_json::to_value(tool) {
                    Ok(Value::Object(definition)) => definition,
                    _ => Map::new(),
                };
                let pinned = DriftLock::pinned(&definition);
                catalogue
                    .tools
                    .push(exposed(tool, &name, &hints, unavailable.as_deref()));
                catalogue.by_name.insert(
                    name,
                    Arc::new(Listed {
                        upstream: upstream.clone(),
                        tool: tool.name.to_string(),
                        logged_hints: serde_json::to_value(hints).unwrap_or(Value::Null),
                        hints,
                        pinned,
                    }),
                );
            }
        }
        check_names(catalogue.tools.iter().map(|tool| tool.name.as_ref()))?;
        Ok(catalogue)
    }
}

/// `tool` as the gateway's clients see it: named `name`, its four hints
/// set to `hints`, their sources under [`PROVENANCE_META_KEY`], and, when
/// its upstream is unavailable, the reason under [`UNAVAILABLE_META_KEY`].
fn exposed(tool: &Tool, name: &str, hints: &EffectiveHints, unavailable: Option<&str>) -> Tool {
    let mut tool = tool.clone();
    tool.name = name.to_owned().into();
    let mut annotations = match serde_json::to_value(&tool.annotations) {
        Ok(Value::Object(annotations)) => annotations,
        _ => Map::new(),
    };
    annotations.extend(hints.to_annotations());
    // Every field came from a ToolAnnotations or is one of the four hints.
    tool.annotations = serde_json::from_value::<ToolAnnotations>(Value::Object(annotations)).ok();
    let sources: Map<String, Value> = Hint::ALL
        .iter()
        .map(|hint| {
            let (_, source) = hints.get(*hint);
            let source = serde_json::to_value(source).unwrap_or(Value::Null);
            (hint.wire_name().to_owned(), source)
        })
        .collect();
    let meta = tool.meta.get_or_insert_with(MetaObject::default);
    meta.0
        .insert(PROVENANCE_META_KEY.to_owned(), Value::Object(sources));
    if let Some(reason) = unavailable {
        meta.0
            .insert(UNAVAILABLE_META_KEY.to_owned(), Value::from(reason));
    }
    tool
}

/// The serving gateway: its config, policy, log, approvals, upstreams and
/// the tools it serves.
pub struct Gateway {
    config: Config,
    policy: Policy,
    log: AuditLog,
    approvals: Approvals,
    drift: Option<tokio::sync::Mutex<DriftLock>>,
    upstreams: Vec<Arc<Upstream>>,
    /// The process groups of its stdio upstreams.
    groups: ProcessGroups,
    catalogue: RwLock<Arc<Catalogue>>,
    /// Fires when the served list changed, for `subscriptions/listen`
    /// streams.
    changes: broadcast::Sender<()>,
    /// Clients of the `initialize` lifecycle, told of changes on their
    /// session.
    sessions: Mutex<Vec<Peer<RoleServer>>>,
    /// Upstream names, as each sends `notifications/tools/list_changed`.
    changed: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// The tools the served list leaves out for their names, as last said
    /// on stderr: each is said once while it stays left out.
    left_out: Mutex<HashSet<(String, String)>>,
    /// How the commands the gateway prints reach its admin endpoint
    /// (`--config PATH` or `--admin URL`), set once it is bound.
    admin_flag: std::sync::OnceLock<String>,
    /// Cancelled to end the streamable-HTTP sessions of every [`router`].
    sessions_end: CancellationToken,
}

impl Gateway {
    /// Opens the log and the drift lock, connects every upstream, and
    /// builds the served tool list. A start that fails, or whose future is
    /// dropped (a signal while the upstreams connect), stops the stdio
    /// upstreams it started; once started, the gateway's owner stops them
    /// ([`stop_upstreams`](Self::stop_upstreams),
    /// [`upstream_stopper`](Self::upstream_stopper)).
    ///
    /// # Errors
    ///
    /// A log or lock that cannot be opened, or colliding tool names, both
    /// named.
    pub async fn start(config: Config) -> Result<Gateway, String> {
        let log = AuditLog::open(&config.log.path).map_err(|error| error.to_string())?;
        let drift = match config.lock.as_ref().filter(|lock| lock.deny_drift) {
            Some(lock) => Some(tokio::sync::Mutex::new(DriftLock::load(lock)?)),
            None => None,
        };
        let policy = Policy::new(&config);
        let groups = ProcessGroups::new();
        let (upstreams, catalogue, left_out, receiver) = start_upstreams(&config, &groups).await?;
        Ok(Gateway {
            config,
            policy,
            log,
            approvals: Approvals::new(),
            drift,
            upstreams,
            groups,
            catalogue: RwLock::new(Arc::new(catalogue)),
            changes: broadcast::channel(16).0,
            sessions: Mutex::new(Vec::new()),
            changed: Mutex::new(Some(receiver)),
            left_out: Mutex::new(left_out),
            admin_flag: std::sync::OnceLock::new(),
            sessions_end: CancellationToken::new(),
        })
    }

    /// `mcp-hints gateway approve ID ...` for the call `id`, as an approver
    /// can run it: with `--config PATH` when the config names the admin
    /// endpoint's port, else `--admin URL`.
    fn approve_command(&self, id: &str) -> String {
        let flag = self.admin_flag.get().cloned().unwrap_or_else(|| {
            let path =
                std::path::absolute(&self.config.path).unwrap_or_else(|_| self.config.path.clone());
            format!(
                "--config {}",
                mcp_hints_core::escape::shell_word(&path.to_string_lossy())
            )
        });
        format!("mcp-hints gateway approve {id} {flag}")
    }

    /// `(upstream, tool)` of every tool its upstreams last listed, by the
    /// upstreams' own names.
    pub fn listed_tools(&self) -> Vec<(String, String)> {
        self.upstreams
            .iter()
            .flat_map(|upstream| {
                let tools = upstream.tools();
                tools
                    .iter()
                    .map(|tool| (upstream.name.clone(), tool.name.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The config it was started with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Before the gateway exits: denies every parked call (the gateway
    /// stopping), gives their tasks a moment to record and answer it, then waits until every
    /// written audit entry is synced (the log's sync thread dies with the
    /// process). A log that cannot be synced is said on
    /// stderr.
    pub async fn finish_log(&self) {
        if self.approvals.deny_all_stopping() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        if let Err(error) = self.log.flush().await {
            eprintln!(
                "gateway: {}",
                mcp_hints_core::escape::one_line(&error.to_string())
            );
        }
    }

    /// The calls waiting for an approver.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    fn catalogue(&self) -> Arc<Catalogue> {
        self.catalogue
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Follows the upstreams' `notifications/tools/list_changed` in a task
    /// of its own: the upstream's list is collected again, the served list
    /// rebuilt, and every client told.
    pub fn follow_list_changes(self: Arc<Self>) {
        let receiver = self
            .changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut receiver) = receiver else {
            return;
        };
        tokio::spawn(async move {
            while let Some(name) = receiver.recv().await {
                let Some(upstream) = self.upstreams.iter().find(|u| u.name == name) else {
                    continue;
                };
                if let Err(error) = upstream.refresh().await {
                    eprintln!(
                        "gateway: upstream `{name}` changed its tools, but they could not be \
                         listed again: {}; the old list stays",
                        mcp_hints_core::escape::one_line(&error)
                    );
                    continue;
                }
                self.republish();
            }
        });
    }

    /// Tries the upstreams that could not be reached at start again, in a
    /// task of its own, with pauses from [`defaults::RECONNECT_MIN`]
    /// doubling to [`defaults::RECONNECT_MAX`]; each that answers has its
    /// tools served from then on.
    pub fn retry_unreachable(self: Arc<Self>) {
        for upstream in self.upstreams.clone() {
            if upstream.unavailable().is_none() {
                continue;
            }
            let gateway = self.clone();
            tokio::spawn(async move {
                let mut pause = defaults::RECONNECT_MIN;
                loop {
                    tokio::time::sleep(pause).await;
                    if upstream.closed() {
                        return;
                    }
                    if upstream.reconnect().await {
                        gateway.republish();
                        return;
                    }
                    if upstream.client().is_ok() {
                        return;
                    }
                    pause = (pause * 2).min(defaults::RECONNECT_MAX);
                }
            });
        }
    }

    /// Rebuilds the served list from the upstreams' lists and tells every
    /// client; a list whose names collide is not served (the old one
    /// stays), and said on stderr.
    fn republish(&self) {
        match Catalogue::build(&self.config, &self.upstreams) {
            Ok(catalogue) => {
                let mut left_out = self.left_out.lock().unwrap_or_else(PoisonError::into_inner);
                *left_out = say_left_out(&catalogue, &left_out);
                drop(left_out);
                *self
                    .catalogue
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = Arc::new(catalogue);
            }
            Err(error) => {
                eprintln!(
                    "gateway: the changed tool list is not served, the old one stays: {}",
                    mcp_hints_core::escape::one_line(&error)
                );
                return;
            }
        }
        // No listener is fine: no 2026-07-28 client is subscribed.
        let _ = self.changes.send(());
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|peer| !peer.is_transport_closed());
        for peer in sessions.iter() {
            let peer = peer.clone();
            tokio::spawn(async move {
                // A session that went away is dropped at the next change.
                let _ = peer.notify_tool_list_changed().await;
            });
        }
    }

    /// Ends every streamable-HTTP session of every [`router`] built on
    /// this gateway: their streams close, and a client that names one gets
    /// 404 and starts a new one.
    pub fn end_sessions(&self) {
        self.sessions_end.cancel();
    }

    /// Drops every upstream connection, which stops the stdio upstreams'
    /// process groups.
    pub fn close(&self) {
        for upstream in &self.upstreams {
            upstream.close();
        }
    }

    /// Kills every stdio upstream's process group at once, and starts none
    /// again from then on ([`ProcessGroups::stop_all`]): the last thing
    /// before the program exits, since a kill left to a task would not run
    /// once the runtime ends.
    pub fn stop_upstreams(&self) {
        self.groups.stop_all();
    }

    /// A guard that does [`stop_upstreams`](Self::stop_upstreams) when it
    /// is dropped: a program holds it while it serves, so that every way
    /// out (a return, an error, a panic unwinding, a future dropped on a
    /// signal) stops the upstreams.
    pub fn upstream_stopper(&self) -> upstream::StopOnDrop {
        self.groups.stop_on_drop()
    }

    /// Appends a `decided` entry to the audit log and waits until it is on
    /// disk: the call it records goes on only then.
    async fn record(&self, entry: &Entry) -> Result<(), String> {
        self.log
            .record(entry, Durability::Synced)
            .await
            .map_err(|error| error.to_string())
    }
}

/// Says on stderr, once each, the tools `catalogue` leaves out for their
/// names that are not in `said` already; returns the ones it leaves out,
/// the next `said`.
fn say_left_out(
    catalogue: &Catalogue,
    said: &HashSet<(String, String)>,
) -> HashSet<(String, String)> {
    let mut new: Vec<(&(String, String), &String)> = catalogue
        .left_out
        .iter()
        .filter(|(key, _)| !said.contains(*key))
        .collect();
    new.sort();
    for ((upstream, tool), problem) in new {
        eprintln!(
            "gateway: upstream `{upstream}` lists a tool whose name `{}` {problem} (the spec's \
             tool names are 1 to 128 of `A-Z a-z 0-9 _ - .`); it is not served, the upstream's \
             other tools are",
            mcp_hints_core::escape::shown(tool)
        );
    }
    catalogue.left_out.keys().cloned().collect()
}

/// Connects every upstream of `config`, their process groups recorded in
/// `groups`, and builds the served list, saying on stderr what start-up
/// says: each unavailable upstream, each tool left out for its name, and
/// the count of tools. Returns the upstreams, the list, the tools left
/// out, and the receiver of their `notifications/tools/list_changed`. Cut
/// short (an error, its future dropped), it stops `groups`.
///
/// # Errors
///
/// Colliding or over-long namespaced names, after the config's path (the
/// upstreams were started; `groups` are stopped).
async fn start_upstreams(
    config: &Config,
    groups: &ProcessGroups,
) -> Result<
    (
        Vec<Arc<Upstream>>,
        Catalogue,
        HashSet<(String, String)>,
        mpsc::UnboundedReceiver<String>,
    ),
    String,
> {
    let stop = groups.stop_on_drop();
    let (sender, receiver) = mpsc::unbounded_channel();
    let upstreams = upstream::connect_all(config, sender, groups).await;
    let catalogue = Catalogue::build(config, &upstreams)
        .map_err(|error| format!("{}: {error}", config.path.display()))?;
    let left_out = say_left_out(&catalogue, &HashSet::new());
    let unavailable = upstreams
        .iter()
        .filter(|upstream| upstream.unavailable().is_some())
        .count();
    eprintln!(
        "gateway: {} from {} ({unavailable} unavailable)",
        mcp_hints_core::escape::count(catalogue.tools.len(), "tool", "tools"),
        mcp_hints_core::escape::count(upstreams.len(), "upstream", "upstreams"),
    );
    stop.disarm();
    Ok((upstreams, catalogue, left_out, receiver))
}

/// One tool as `gateway serve` would serve it.
#[derive(Clone, Debug)]
pub struct ServedTool {
    /// As clients see it, `UPSTREAM__TOOL`.
    pub name: String,
    /// Its upstream's name.
    pub upstream: String,
    /// The upstream's own name for it.
    pub tool: String,
    /// The hints the policy acts on, with their sources.
    pub hints: EffectiveHints,
}

/// What [`served_tools`] found.
pub struct ServedTools {
    /// The served tools, in served order.
    pub served: Vec<ServedTool>,
    /// `(upstream, tool)` of every tool the upstreams listed.
    pub listed: Vec<(String, String)>,
    /// `(upstream, reason)` of every upstream that could not be reached.
    pub unavailable: Vec<(String, String)>,
}

/// What `gateway serve` on `config` would serve, for `gateway check`: the
/// upstreams are started and listed by the same code as
/// [`Gateway::start`] (with the same stderr lines), then closed and their
/// process groups stopped, on every way out (its future dropped too).
/// Returns the served tools in served order, `(upstream, tool)` of every
/// tool the upstreams listed (for
/// [`unmatched_tool_globs`](policy::unmatched_tool_globs)), and
/// `(upstream, reason)` of each upstream that could not be reached.
///
/// # Errors
///
/// Colliding or over-long namespaced names, as [`Gateway::start`] says
/// them.
pub async fn served_tools(config: &Config) -> Result<ServedTools, String> {
    let groups = ProcessGroups::new();
    let _stop = groups.stop_on_drop();
    let (upstreams, catalogue, _, _) = start_upstreams(config, &groups).await?;
    let served = catalogue
        .tools
        .iter()
        .filter_map(|tool| {
            let listed = catalogue.by_name.get(tool.name.as_ref())?;
            Some(ServedTool {
                name: tool.name.to_string(),
                upstream: listed.upstream.name.clone(),
                tool: listed.tool.clone(),
                hints: listed.hints,
            })
        })
        .collect();
    let listed = upstreams
        .iter()
        .flat_map(|upstream| {
            upstream
                .tools()
                .iter()
                .map(|tool| (upstream.name.clone(), tool.name.to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    let unavailable = upstreams
        .iter()
        .filter_map(|upstream| Some((upstream.name.clone(), upstream.unavailable()?)))
        .collect();
    for upstream in &upstreams {
        upstream.close();
    }
    Ok(ServedTools {
        served,
        listed,
        unavailable,
    })
}

/// The MCP server of one client connection: the gateway, and the principal
/// of a stdio client (HTTP requests carry theirs).
#[derive(Clone)]
pub struct Front {
    gateway: Arc<Gateway>,
    principal: Option<Arc<str>>,
}

/// What every audit entry of one call shares.
struct CallRecord {
    id: String,
    principal: String,
    upstream: String,
    tool: String,
    hints: Value,
    arguments_sha256: String,
    arguments: Option<Value>,
}

impl CallRecord {
    fn entry(
        &self,
        phase: Phase,
        decision: Decision,
        rule: Option<String>,
        outcome: Option<Outcome>,
        attempts: Option<u32>,
    ) -> Entry {
        Entry {
            time: log::now(),
            id: self.id.clone(),
            principal: self.principal.clone(),
            upstream: self.upstream.clone(),
            tool: self.tool.clone(),
            decision,
            rule,
            hints: self.hints.clone(),
            arguments_sha256: self.arguments_sha256.clone(),
            arguments: self.arguments.clone(),
            outcome,
            attempts,
            phase,
        }
    }
}

/// A tool error (`isError: true`) with `text`, and the gateway's decision
/// under `_meta["mcp-hints/gateway"]` for programs.
fn refusal(text: String, detail: Value) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = MetaObject::default();
    meta.0.insert("mcp-hints/gateway".to_owned(), detail);
    result.meta = Some(meta);
    result
}

impl Front {
    /// The server of one stdio client, principal `local`.
    pub fn stdio(gateway: Arc<Gateway>) -> Front {
        Front {
            gateway,
            principal: Some(Arc::from("local")),
        }
    }

    /// The server of HTTP clients: each request's principal comes from its
    /// bearer token.
    pub fn http(gateway: Arc<Gateway>) -> Front {
        Front {
            gateway,
            principal: None,
        }
    }

    fn principal(&self, context: &RequestContext<RoleServer>) -> Option<Arc<str>> {
        if let Some(principal) = &self.principal {
            return Some(principal.clone());
        }
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .map(|principal| principal.0.clone())
    }

    /// What every audit entry of one call shares, under a new call id.
    fn record_of(
        &self,
        principal: &str,
        upstream: &str,
        tool: &str,
        hints: Value,
        arguments: &JsonObject,
    ) -> CallRecord {
        CallRecord {
            id: uuid::Uuid::new_v4().to_string(),
            principal: principal.to_owned(),
            upstream: upstream.to_owned(),
            tool: tool.to_owned(),
            hints,
            arguments_sha256: log::arguments_digest(arguments),
            arguments: self
                .gateway
                .config
                .log
                .raw_arguments
                .then(|| Value::Object(arguments.clone())),
        }
    }

    /// One `tools/call`, in the order the module documentation gives;
    /// `context` is its request's, whose cancellation (the client withdrew
    /// the request, or its session ended) abandons a parked call.
    async fn call(
        &self,
        request: CallToolRequestParams,
        principal: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let gateway = &self.gateway;
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let catalogue = gateway.catalogue();
        let Some(listed) = catalogue.by_name.get(&name).cloned() else {
            // An upstream that never listed its tools: its calls are
            // unavailable, not unknown.
            if let Some((prefix, tool)) = split(&name)
                && let Some(upstream) = gateway.upstreams.iter().find(|u| u.name == prefix)
                && let Some(reason) = upstream.unavailable()
                // The name is the client's: only one the spec allows is
                // logged; any other is an unknown tool below.
                && name::problem(tool).is_none()
            {
                // Its hints are unknown; the refusal is a decision all the
                // same, and logged as one.
                let record = self.record_of(principal, prefix, tool, Value::Null, &arguments);
                let entry = record.entry(Phase::Decided, Decision::Unavailable, None, None, None);
                if let Err(error) = gateway.record(&entry).await {
                    return Ok(log_failed(&error));
                }
                let _ = self
                    .finish(
                        &record,
                        Decision::Unavailable,
                        None,
                        Outcome::Unavailable,
                        None,
                    )
                    .await;
                return Ok(refusal(
                    format!(
                        "upstream `{prefix}` is unavailable ({}); its tools cannot be called \
                         until it is reachable",
                        mcp_hints_core::escape::one_line(&reason)
                    ),
                    json!({ "outcome": "unavailable", "upstream": prefix }),
                ));
            }
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`: the gateway serves `UPSTREAM__TOOL` names from tools/list",
                    escape::shown(&name)
                ),
                Some(json!({ "tool": name })),
            ));
        };
        let hints = listed.logged_hints.clone();
        let record = self.record_of(
            principal,
            &listed.upstream.name,
            &listed.tool,
            hints,
            &arguments,
        );
        // Boxed, like every wait for an approver below: the common path's
        // future stays small, and rmcp moves it whole into each request's
        // task.
        if self.gateway.drift.is_some()
            && let Some(refused) =
                Box::pin(self.check_drift(&name, &listed, &record, &arguments, context)).await
        {
            return Ok(refused);
        }
        let scope = CallScope {
            upstream: &listed.upstream.name,
            tool: &listed.tool,
            principal,
            hints: &listed.hints,
        };
        let verdict = gateway.policy.decide(&scope, Instant::now());
        let (mut decision, rule) = match &verdict {
            Verdict::Allow { rule } => (Decision::Allow, *rule),
            Verdict::Deny { rule } => (Decision::Deny, *rule),
            Verdict::RequireApproval { rule, .. } => (Decision::RequireApproval, Some(*rule)),
            Verdict::RateLimited { rule, .. } => (Decision::RateLimited, Some(*rule)),
        };
        let rule_text = rule.map(|rule| gateway.policy.describe(rule));
        // Written before anything goes on: no entry, no call.
        if let Err(error) = gateway
            .record(&record.entry(Phase::Decided, decision, rule_text.clone(), None, None))
            .await
        {
            return Ok(log_failed(&error));
        }
        match verdict {
            Verdict::Allow { .. } => {}
            Verdict::Deny { rule } => {
                let why = match &rule_text {
                    Some(rule) => format!("refused by the gateway's {rule}"),
                    None => "refused by the gateway: no rule allows it and `policy.default` is \
                             deny"
                        .to_owned(),
                };
                let _ = self
                    .finish(
                        &record,
                        Decision::Deny,
                        rule_text.clone(),
                        Outcome::Refused,
                        None,
                    )
                    .await;
                return Ok(refusal(
                    format!("`{}` {why}; it was not forwarded", escape::shown(&name)),
                    json!({ "decision": "deny", "rule": rule, "ruleText": rule_text }),
                ));
            }
            Verdict::RateLimited {
                rule,
                limit,
                window,
                retry_after,
            } => {
                let _ = self
                    .finish(
                        &record,
                        Decision::RateLimited,
                        rule_text.clone(),
                        Outcome::Refused,
                        None,
                    )
                    .await;
                let retry = retry_after.as_secs_f64().ceil().max(1.0);
                return Ok(refusal(
                    format!(
                        "`{}` refused by the gateway's {}: at most {limit} calls per {} s; \
                         retry after {retry} s; it was not forwarded",
                        escape::shown(&name),
                        rule_text.as_deref().unwrap_or("rate limit"),
                        window.as_secs()
                    ),
                    json!({
                        "decision": "rate_limited",
                        "rule": rule,
                        "ruleText": rule_text,
                        "retryAfterSecs": retry,
                    }),
                ));
            }
            Verdict::RequireApproval {
                rule,
                timeout,
                on_expiry,
            } => {
                let reason = format!(
                    "{} requires an approver",
                    rule_text.as_deref().unwrap_or("a rule")
                );
                let parked = parked(&record, &arguments, timeout, reason);
                let id = parked.id.clone();
                eprintln!(
                    "gateway: call {id} of `{}` by `{}` is parked for approval: {}",
                    escape::shown(&name),
                    escape::shown(principal),
                    gateway.approve_command(&id)
                );
                let abandon = AbandonOnDrop::arm(&gateway.log, &record, rule_text.clone());
                let resolution = Box::pin(gateway.approvals.park(
                    parked,
                    timeout,
                    on_expiry,
                    context.ct.cancelled(),
                ))
                .await;
                abandon.disarm();
                let (resolved, proceed) = (resolution.decision(), resolution.proceeds());
                // How it ended, in the words of the refusal.
                let how = match &resolution {
                    Resolution::Approved { by } => {
                        format!("was approved by {}", escape::shown(by))
                    }
                    Resolution::Denied { by } => format!("was denied by {}", escape::shown(by)),
                    Resolution::Expired { .. } => format!(
                        "was not approved within {} s, so it expired and was denied",
                        timeout.as_secs()
                    ),
                    Resolution::Abandoned => {
                        said_abandoned(&id, &name);
                        "was withdrawn by its client".to_owned()
                    }
                };
                // The finished entry names how the approval ended.
                decision = resolved;
                if let Err(error) = gateway
                    .record(&record.entry(Phase::Decided, decision, rule_text.clone(), None, None))
                    .await
                {
                    return Ok(log_failed(&error));
                }
                if !proceed {
                    let _ = self
                        .finish(&record, decision, rule_text.clone(), Outcome::Refused, None)
                        .await;
                    return Ok(refusal(
                        format!(
                            "`{}` {how} under the gateway's {}; it was not forwarded",
                            escape::shown(&name),
                            rule_text.as_deref().unwrap_or("approval rule")
                        ),
                        json!({ "decision": decision, "rule": rule, "ruleText": rule_text }),
                    ));
                }
                if context.ct.is_cancelled() {
                    // Withdrawn while its approval was being recorded: an
                    // approved call its client no longer waits for is not
                    // sent either.
                    said_abandoned(&id, &name);
                    let _ = self
                        .finish(
                            &record,
                            Decision::Abandoned,
                            rule_text.clone(),
                            Outcome::Refused,
                            None,
                        )
                        .await;
                    return Ok(refusal(
                        format!(
                            "`{}` was withdrawn by its client; it was not forwarded",
                            escape::shown(&name)
                        ),
                        json!({ "decision": "abandoned", "rule": rule, "ruleText": rule_text }),
                    ));
                }
            }
        }
        self.forward(&name, &listed, &record, decision, rule_text, arguments)
            .await
    }

    /// The drift check: a tool added or changed since the lock's approval
    /// is parked until an approver approves its new fingerprint, which
    /// goes into the lock. `Some` is the refusal; `None` lets the call go
    /// on.
    async fn check_drift(
        &self,
        name: &str,
        listed: &Listed,
        record: &CallRecord,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Option<CallToolResult> {
        let lock = self.gateway.drift.as_ref()?;
        let what = match lock.lock().await.check(name, &listed.pinned) {
            Drift::Approved => return None,
            Drift::New => "the tool is new since the lock was approved".to_owned(),
            Drift::Changed { what } => format!("changed since approval: {}", what.join(", ")),
        };
        if let Err(error) = self
            .gateway
            .record(&record.entry(Phase::Decided, Decision::Drift, None, None, None))
            .await
        {
            return Some(log_failed(&error));
        }
        let parked = parked(
            record,
            arguments,
            defaults::DRIFT_APPROVAL_TIMEOUT,
            format!("drift: {what}"),
        );
        let id = parked.id.clone();
        eprintln!(
            "gateway: call {id} of drifted tool `{}` is parked: {what}; {} approves the new \
             definition",
            escape::shown(name),
            self.gateway.approve_command(&id)
        );
        let abandon = AbandonOnDrop::arm(&self.gateway.log, record, None);
        let resolution = self
            .gateway
            .approvals
            .park(
                parked,
                defaults::DRIFT_APPROVAL_TIMEOUT,
                Expiry::Deny,
                context.ct.cancelled(),
            )
            .await;
        abandon.disarm();
        let decision = resolution.decision();
        if let Err(error) = self
            .gateway
            .record(&record.entry(Phase::Decided, decision, None, None, None))
            .await
        {
            return Some(log_failed(&error));
        }
        if resolution.proceeds() {
            // Written off the runtime; the call goes on only once it is.
            match lock.lock().await.approve(name, listed.pinned.clone()).await {
                Ok(()) => return None,
                Err(error) => {
                    let _ = self
                        .finish(record, decision, None, Outcome::Refused, None)
                        .await;
                    return Some(refusal(
                        format!(
                            "`{}` was approved, but the lock could not be written ({}); it was \
                             not forwarded",
                            escape::shown(name),
                            mcp_hints_core::escape::one_line(&error)
                        ),
                        json!({ "decision": "drift" }),
                    ));
                }
            }
        }
        let _ = self
            .finish(record, decision, None, Outcome::Refused, None)
            .await;
        if resolution == Resolution::Abandoned {
            said_abandoned(&record.id, name);
            return Some(refusal(
                format!(
                    "`{}` was abandoned (its client withdrew it) while it waited for an \
                     approver: {what}; it was not forwarded",
                    escape::shown(name)
                ),
                json!({ "decision": "abandoned", "drift": what }),
            ));
        }
        Some(refusal(
            format!(
                "`{}` cannot be called until an approver approves it ({decision}): {what}",
                escape::shown(name)
            ),
            json!({ "decision": "drift", "drift": what }),
        ))
    }

    /// Sends the call through the upstream's replay-safe client and writes
    /// the `finished` entry.
    async fn forward(
        &self,
        name: &str,
        listed: &Listed,
        record: &CallRecord,
        decision: Decision,
        rule: Option<String>,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, ErrorData> {
        let upstream = &listed.upstream;
        let client = match upstream.client() {
            Ok(client) => client,
            Err(reason) => {
                let _ = self
                    .finish(record, decision, rule, Outcome::Unavailable, Some(0))
                    .await;
                return Ok(unavailable(name, &upstream.name, &reason));
            }
        };
        let call = ToolCall::new(listed.tool.clone()).arguments(arguments);
        // Boxed: the replay-safe client's future is kilobytes (its retry
        // and read-back states), and this one is moved whole into each
        // request's task.
        let outcome = Box::pin(upstream::with_principal(
            &record.principal,
            client.call_tool(call),
        ))
        .await;
        upstream.say_restarts(&client).await;
        let (result, outcome, attempts) = match outcome {
            Ok(CallOutcome::Completed(done)) => {
                if upstream.mark_available() {
                    // Its tools are no longer listed as unavailable.
                    self.gateway.republish();
                }
                let outcome = if done.result.is_error == Some(true) {
                    Outcome::ToolError
                } else {
                    Outcome::Completed
                };
                let mut result = done.result;
                // An upstream on a revision before 2026-07-28 leaves it out;
                // the gateway's clients may be on 2026-07-28, where it is
                // required (rmcp clears it again for older clients).
                result.result_type = Some(ResultType::COMPLETE);
                (Ok(result), outcome, done.attempts)
            }
            Ok(CallOutcome::DeliveryUnknown(lost)) => {
                let attempts = lost.attempts;
                let text = format!(
                    "{lost}. {}: read back before calling `{}` again",
                    may_have_run(attempts, lost.idempotency_key.is_some()),
                    escape::shown(name)
                );
                let detail = json!({
                    "outcome": "delivery_unknown",
                    "attempts": attempts,
                    "readBack": lost.verdict.reason,
                });
                (
                    Ok(refusal(text, detail)),
                    Outcome::DeliveryUnknown,
                    attempts,
                )
            }
            Err(CallError::Rejected {
                error, attempts, ..
            }) => (Err(error), Outcome::ToolError, attempts),
            Err(CallError::NotSent {
                attempts,
                last_error,
                ..
            }) => {
                // Read after "upstream `NAME` is unavailable (...)".
                let reason = format!("calls cannot be sent to it: {last_error}");
                upstream.mark_unavailable(reason.clone());
                self.gateway.republish();
                (
                    Ok(unavailable(name, &upstream.name, &reason)),
                    Outcome::Unavailable,
                    attempts,
                )
            }
            Err(other) => {
                let text = other.to_string();
                (
                    Ok(refusal(text, json!({ "outcome": "tool_error" }))),
                    Outcome::ToolError,
                    0,
                )
            }
        };
        if let Err(error) = self
            .finish(record, decision, rule, outcome, Some(attempts))
            .await
        {
            // The call ran: its answer is the caller's. The missing entry
            // is said where the operator sees it.
            eprintln!(
                "gateway: call {} finished ({outcome}) but its entry could not be written: {}",
                record.id,
                mcp_hints_core::escape::one_line(&error)
            );
        }
        result
    }

    async fn finish(
        &self,
        record: &CallRecord,
        decision: Decision,
        rule: Option<String>,
        outcome: Outcome,
        attempts: Option<u32>,
    ) -> Result<(), String> {
        // Written before the answer goes back, synced soon after: the call
        // already ran, and its decided entry is on disk.
        let entry = record.entry(Phase::Finished, decision, rule, Some(outcome), attempts);
        self.gateway
            .log
            .record(&entry, Durability::Written)
            .await
            .map_err(|error| error.to_string())
    }
}

/// The parked form of a call.
fn parked(
    record: &CallRecord,
    arguments: &Map<String, Value>,
    timeout: std::time::Duration,
    reason: String,
) -> Parked {
    let now = SystemTime::now();
    Parked {
        id: record.id.clone(),
        principal: record.principal.clone(),
        upstream: record.upstream.clone(),
        tool: record.tool.clone(),
        arguments: arguments.clone(),
        parked_at: now,
        expires_at: now + timeout,
        reason,
    }
}

/// Says on stderr that the parked call `id` of `name` was abandoned, for
/// the approver who may be about to decide it.
fn said_abandoned(id: &str, name: &str) {
    eprintln!(
        "gateway: call {id} of `{}` was abandoned by its client before it was decided; it was \
         not forwarded",
        escape::shown(name)
    );
}

/// Records a parked call as abandoned when the future waiting for it is
/// dropped before [`Approvals::park`] returned (the runtime stopping, or a
/// server that drops handlers of withdrawn requests); `park`'s own guard
/// takes it out of the parked calls. [`disarm`](AbandonOnDrop::disarm)ed
/// once `park` returned, when the caller records the resolution itself.
///
/// Its entries, `decided` then `finished` (outcome `refused`) with decision
/// `abandoned`, are written at once, though nothing is left to wait for
/// them, and synced by the log's sync thread.
struct AbandonOnDrop<'a> {
    log: &'a AuditLog,
    record: &'a CallRecord,
    rule: Option<String>,
    armed: bool,
}

impl<'a> AbandonOnDrop<'a> {
    fn arm(log: &'a AuditLog, record: &'a CallRecord, rule: Option<String>) -> AbandonOnDrop<'a> {
        AbandonOnDrop {
            log,
            record,
            rule,
            armed: true,
        }
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for AbandonOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let decided = self.record.entry(
            Phase::Decided,
            Decision::Abandoned,
            self.rule.clone(),
            None,
            None,
        );
        let finished = self.record.entry(
            Phase::Finished,
            Decision::Abandoned,
            self.rule.take(),
            Some(Outcome::Refused),
            None,
        );
        queue(self.log, &decided, Durability::Synced);
        queue(self.log, &finished, Durability::Written);
        said_abandoned(
            &self.record.id,
            &namespaced(&self.record.upstream, &self.record.tool),
        );
    }
}

/// Writes `entry` without waiting for its sync, where nothing can wait (a
/// `Drop`): [`AuditLog::record`] writes its line and asks for its sync
/// before its first await, so one poll is enough. An error has nowhere to
/// go but stderr.
fn queue(log: &AuditLog, entry: &Entry, durability: Durability) {
    let mut recording = std::pin::pin!(log.record(entry, durability));
    let mut context = Context::from_waker(std::task::Waker::noop());
    if let Poll::Ready(Err(error)) = recording.as_mut().poll(&mut context) {
        eprintln!(
            "gateway: call {} was abandoned but its entry could not be written: {}",
            entry.id,
            mcp_hints_core::escape::one_line(&error.to_string())
        );
    }
}

fn log_failed(error: &str) -> CallToolResult {
    refusal(
        format!(
            "the gateway's audit log cannot be written ({}), so the call was refused and not \
             forwarded",
            mcp_hints_core::escape::one_line(error)
        ),
        json!({ "outcome": "refused", "reason": "audit_log" }),
    )
}

/// How often a call whose delivery is unknown may have run, after
/// `attempts` sends: once, when it was sent once or every resend carried
/// its one idempotency key (the server runs a key once); else up to
/// `attempts` times, each resend being one the policy allowed (a read-only
/// or idempotent tool, for which running again is harmless).
fn may_have_run(attempts: u32, keyed: bool) -> String {
    if attempts <= 1 {
        "It may have run once (never more)".to_owned()
    } else if keyed {
        format!(
            "It may have run once (never more: its {attempts} attempts carried one idempotency \
             key)"
        )
    } else {
        format!(
            "It may have run up to {attempts} times (it was sent {attempts} times, each resend \
             one the policy allowed)"
        )
    }
}

/// The refusal of a call to `name` that could not be sent: `upstream` is
/// unavailable for `reason` (a clause that reads after "is unavailable").
fn unavailable(name: &str, upstream: &str, reason: &str) -> CallToolResult {
    refusal(
        format!(
            "`{}` was not forwarded: upstream `{upstream}` is unavailable ({})",
            escape::shown(name),
            mcp_hints_core::escape::one_line(reason)
        ),
        json!({ "outcome": "unavailable", "upstream": upstream }),
    )
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
        let Some(principal) = self.principal(&context) else {
            // The authentication layer lets no request through without
            // one; refuse rather than guess.
            return Err(ErrorData::invalid_request(
                "the request has no authenticated principal",
                None,
            ));
        };
        self.call(request, &principal, &context)
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

/// Serves one stdio client on stdin/stdout (principal `local`), every
/// message checked by the wire guard first, until stdin closes or `stop`
/// resolves (the command's signals). Pipes and sockets are read and written
/// without Tokio's blocking pool ([`mcp_hints::stdio`]).
///
/// # Errors
///
/// When the session cannot start.
pub async fn serve_stdio(
    gateway: Arc<Gateway>,
    stop: impl Future<Output = ()>,
) -> Result<(), String> {
    let transport = mcp_hints::stdio::guarded();
    let signal = stop;
    tokio::pin!(signal);
    let service = tokio::select! {
        service = Front::stdio(gateway.clone()).serve(transport) => {
            service.map_err(|error| format!("the stdio session did not start: {error}"))?
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
/// token, before anything else is looked at), then the HTTP guard (403 for
/// a foreign `Origin`, 404, 400 and 413), then rmcp's streamable HTTP
/// service, which checks `Host` against loopback names and `bound`, the
/// address the application listens on (DNS rebinding; streamable HTTP
/// transport, "Security Warning"). Its sessions end with
/// [`Gateway::end_sessions`].
///
/// Set `TCP_NODELAY` on the connections that reach it (see [`serve_http`]'s
/// listener): without it a client that keeps its connection alive waits
/// for its delayed acknowledgement on each request after the first.
///
/// # Errors
///
/// A `listen.allow_origins` entry that is not an origin.
pub fn router(gateway: Arc<Gateway>, bound: SocketAddr) -> Result<axum::Router, String> {
    let mut guard = HttpGuard::for_address(bound);
    for origin in &gateway.config.listen.allow_origins {
        guard = guard
            .allow_origin(origin)
            .map_err(|error| format!("listen.allow_origins: {error}"))?;
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
    let guard = guard.sessions(sessions.clone());
    let front = Front::http(gateway.clone());
    let service = StreamableHttpService::new(move || Ok(front.clone()), sessions, config);
    // The token first: a request without one learns nothing from the
    // guard's answers (which session ids are live, what a body lacks).
    let authenticated = Authenticate {
        gateway,
        owners: Arc::new(SessionOwners::default()),
        inner: guard.service(service),
    };
    Ok(axum::Router::new().nest_service("/mcp", authenticated))
}

/// Serves [`router`] at `http://ADDRESS/mcp` until `stop` resolves (the
/// command's signals), every connection with `TCP_NODELAY`. Says the bound
/// address on stderr: `gateway: serving MCP over streamable HTTP at
/// http://ADDR/mcp`. At `stop`, parked calls are denied
/// ([`Approvals::deny_all_stopping`]) before the sessions end.
///
/// # Errors
///
/// An address that is not loopback without `listen.public`, one that
/// cannot be bound, or an `allow_origins` entry that is not an origin.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    address: SocketAddr,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let listener = bind(address, gateway.config.listen.public, "listen.http").await?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("listen.http: {error}"))?;
    let app = router(gateway.clone(), bound)?;
    eprintln!("gateway: serving MCP over streamable HTTP at http://{bound}/mcp");
    let stopping = gateway.clone();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            stop.await;
            // Parked calls are denied before the sessions end: ended first,
            // they would pass for their clients' withdrawals, and their
            // clients would get no answer.
            if stopping.approvals.deny_all_stopping() > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            stopping.end_sessions();
        })
        .await;
    gateway.close();
    served.map_err(|error| format!("serving HTTP on {bound}: {error}"))
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
async fn bind(
    address: SocketAddr,
    public: bool,
    key: &str,
) -> Result<impl Listener<Io = TcpStream, Addr = SocketAddr>, String> {
    if !public && !address.ip().is_loopback() {
        return Err(format!(
            "{key} = \"{address}\" is not a loopback address; set `listen.public = true` to \
             listen beyond this machine (and keep its tokens secret)"
        ));
    }
    let listener = TcpListener::bind(address)
        .await
        .map_err(|error| format!("{key}: cannot listen on {address}: {error}"))?;
    Ok(listener.tap_io(|stream: &mut TcpStream| {
        // A socket that refuses the option still serves, only slower.
        if let Err(error) = stream.set_nodelay(true) {
            eprintln!("gateway: cannot set TCP_NODELAY on a connection: {error}");
        }
    }))
}

/// The bearer-token check in front of the HTTP guard and rmcp: a request
/// whose `Authorization: Bearer TOKEN` matches a `[[client]]` goes on with
/// its [`Principal`]; any other gets 401 before its headers or body are
/// read further (so that, without a token, no answer tells a live session
/// id from an unknown one, nor a sound body from a bad one).
///
/// It also keeps each streamable-HTTP session to the principal that
/// created it ([`SessionOwners`]): a request naming, in `Mcp-Session-Id`,
/// a session of another principal, or one it does not know, is answered
/// 404 as rmcp answers an unknown session, so that another client's token
/// can neither use nor end a session, nor learn whose it is.
#[derive(Clone)]
struct Authenticate<S> {
    gateway: Arc<Gateway>,
    owners: Arc<SessionOwners>,
    inner: S,
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
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

impl<S> Authenticate<S> {
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

fn unauthorized(realm: &str, message: &str) -> Response {
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

impl<S, B, ResBody> tower_service::Service<http::Request<B>> for Authenticate<S>
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
    type Future = Pin<Box<dyn Future<Output = Result<Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let Some(principal) = self.principal(request.headers()) else {
            let message = if bearer(request.headers()).is_some() {
                "the bearer token matches no [[client]] of the gateway"
            } else {
                "the gateway needs `Authorization: Bearer TOKEN`, a token of a [[client]]"
            };
            return Box::pin(std::future::ready(Ok(unauthorized("mcp", message))));
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
        request
            .extensions_mut()
            .insert(Principal(principal.clone()));
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

/// Serves the admin endpoint on `address`, in a task of its own:
/// `GET /pending`, `POST /approve/{id}`, `POST /deny/{id}`, each needing
/// `Authorization: Bearer` with the admin token (401 without). Like the
/// client endpoint, it is behind [`HttpGuard`] (403 for an `Origin` other
/// than its own; `listen.allow_origins` are for clients, not here) and a
/// `Host` check (403 for a name other than a loopback one or the bound
/// address, 400 for none), so that a web page cannot reach it by DNS
/// rebinding. Says the bound address on stderr: `gateway: admin endpoint
/// at http://ADDR`.
///
/// # Errors
///
/// No `[admin]` token, an address that is not loopback without
/// `listen.public`, or one that cannot be bound.
pub async fn serve_admin(
    gateway: Arc<Gateway>,
    address: SocketAddr,
) -> Result<tokio::task::JoinHandle<()>, String> {
    if gateway.config.admin.is_none() {
        return Err(format!(
            "{}: `listen.admin_http` is set but `[admin]` gives no token",
            gateway.config.path.display()
        ));
    }
    let listener = bind(address, gateway.config.listen.public, "listen.admin_http").await?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("listen.admin_http: {error}"))?;
    let _ = gateway.admin_flag.set(super::approval::admin_flag(
        &gateway.config.path,
        address,
        bound,
    ));
    let routes = axum::Router::new()
        .route("/pending", get(admin_pending))
        .route("/approve/{id}", post(admin_approve))
        .route("/deny/{id}", post(admin_deny))
        .with_state(gateway)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(allowed_hosts(bound)),
            admin_host,
        ));
    let guard = HttpGuard::for_address(bound);
    let app = axum::Router::new().fallback_service(guard.service(routes));
    eprintln!("gateway: admin endpoint at http://{bound}");
    Ok(tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            eprintln!("gateway: the admin endpoint stopped: {error}");
        }
    }))
}

/// The `Host` names an endpoint bound to `bound` answers to: rmcp's
/// default for the client endpoint (`localhost`, `127.0.0.1`, `::1`, any
/// port), and the bound address when it is neither loopback nor
/// unspecified.
fn allowed_hosts(bound: SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = StreamableHttpServerConfig::default().allowed_hosts;
    if !bound.ip().is_loopback() && !bound.ip().is_unspecified() {
        hosts.push(bound.ip().to_string());
    }
    hosts
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
    let pending = gateway.approvals.pending();
    json_response(StatusCode::OK, &json!({ "pending": pending }))
}

async fn admin_approve(
    State(gateway): State<Arc<Gateway>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    admin_decide(&gateway, &headers, &id, &body, true)
}

async fn admin_deny(
    State(gateway): State<Arc<Gateway>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    admin_decide(&gateway, &headers, &id, &body, false)
}

/// Approves or denies the parked call `id`; `body` is a [`DecideRequest`]
/// (or empty: by `admin`).
fn admin_decide(
    gateway: &Gateway,
    headers: &HeaderMap,
    id: &str,
    body: &[u8],
    approve: bool,
) -> Response {
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
    let decided = if approve {
        gateway.approvals.approve(id, &by)
    } else {
        gateway.approvals.deny(id, &by)
    };
    let decision = if approve { "approved" } else { "denied" };
    match decided {
        Ok(()) => json_response(StatusCode::OK, &json!({ "id": id, "decision": decision })),
        Err(error) => json_response(
            StatusCode::NOT_FOUND,
            &json!({ "id": id, "error": error.to_string() }),
        ),
    }
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
    fn a_lost_call_may_have_run_as_often_as_it_was_sent_unless_keyed() {
        assert_eq!(may_have_run(1, false), "It may have run once (never more)");
        assert_eq!(may_have_run(0, true), "It may have run once (never more)");
        assert!(may_have_run(3, false).starts_with("It may have run up to 3 times ("));
        assert!(may_have_run(3, true).starts_with("It may have run once (never more: its 3"));
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

    #[test]
    fn a_dropped_wait_for_an_approver_is_logged_as_abandoned() {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "mcp-hints-front-abandon-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let record = CallRecord {
            id: "c-1".to_owned(),
            principal: "alice".to_owned(),
            upstream: "fx".to_owned(),
            tool: "count".to_owned(),
            hints: Value::Null,
            arguments_sha256: "0".repeat(64),
            arguments: None,
        };
        AbandonOnDrop::arm(&log, &record, Some("rule[0]".to_owned())).disarm();
        drop(AbandonOnDrop::arm(
            &log,
            &record,
            Some("rule[0]".to_owned()),
        ));
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let lines = loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() >= 2 || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let entries: Vec<Entry> = lines
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let seen: Vec<(&str, &str, Option<&str>)> = entries
            .iter()
            .map(|entry| {
                (
                    entry.phase.as_str(),
                    entry.decision.as_str(),
                    entry.outcome.map(Outcome::as_str),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("decided", "abandoned", None),
                ("finished", "abandoned", Some("refused"))
            ]
        );
        assert!(entries.iter().all(|entry| entry.id == "c-1"));
        let _ = std::fs::remove_dir_all(&dir);
    }

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

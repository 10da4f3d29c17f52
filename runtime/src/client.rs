//! A client that resends a `tools/call` only when that is safe: it knows the
//! server's complete tool list, gives every call a timeout, tells a call that
//! was never sent from one whose delivery is unknown, and after a lost
//! response resends only replay-safe calls (trusted server; read-only,
//! idempotent or keyed tool), within bounded attempts and a retry budget
//! shared by the whole session. Everything else comes back as
//! [`Outcome::DeliveryUnknown`], saying what to read back.
//!
//! The decision is [`policy`](crate::policy)'s; this module sends and
//! classifies. Source: the MCP spec's `server/tools` (`tools/call`),
//! `basic/utilities/cancellation` and `basic/patterns/mrtr` (a retry is a
//! new request with a new JSON-RPC id), revisions 2025-06-18 to 2026-07-28.
//!
//! ```no_run
//! use mcp_hints::client::{Outcome, ReplaySafeClient, ToolCall};
//! use mcp_hints::policy::Trust;
//! use mcp_hints::rmcp::ServiceExt;
//! use mcp_hints::rmcp::transport::TokioChildProcess;
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = ReplaySafeClient::builder()
//!     .trust(Trust::Trusted) // only for a server you vetted
//!     .connect(|| async {
//!         // Called again whenever the server died, before a resend.
//!         let transport = TokioChildProcess::new(tokio::process::Command::new("notes"))?;
//!         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(().serve(transport).await?)
//!     })
//!     .await?;
//! let call = ToolCall::new("append_note").argument("text", json!("buy milk"));
//! match client.call_tool(call).await? {
//!     Outcome::Completed(done) => println!("{:?}", done.result),
//!     Outcome::DeliveryUnknown(lost) => {
//!         // It may have run: read back before calling again.
//!         println!("{lost}");
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use mcp_hints_core::escape;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode, JsonObject,
    ListToolsRequest, PaginatedRequestParams, ServerResult,
};
use rmcp::service::{
    Peer, PeerRequestOptions, RequestHandle, RunningService, Service, ServiceError,
};
use rmcp::{ErrorData, RoleClient};
use serde_json::Value;
use tower::retry::budget::{Budget, TpsBudget};

use crate::collect::{CollectError, CollectOptions, Collector, ListedTool, ToolList};
use crate::hints::ToolHints;
use crate::idempotency::{REPLAYED_META_KEY, codes};
use crate::policy::{Decision, Trust, Verdict};

mod deadlines;

/// Every default of the client, in one place.
pub mod defaults {
    use std::time::Duration;

    /// How long one `tools/call` or `tools/list` request waits for its
    /// response: 30 seconds.
    pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
    /// Attempts per call, the first included: 3.
    pub const MAX_ATTEMPTS: u32 = 3;
    /// The first pause before a resend: 100 ms, doubling (with jitter) up
    /// to [`BACKOFF_MAX`].
    pub const BACKOFF_MIN: Duration = Duration::from_millis(100);
    /// The longest pause before a resend: 2 seconds.
    pub const BACKOFF_MAX: Duration = Duration::from_secs(2);
    /// The retry budget's window: resends are allowed as a share of the
    /// calls made in the last 10 seconds (tower's `TpsBudget`).
    pub const BUDGET_WINDOW: Duration = Duration::from_secs(10);
    /// Resends per second always allowed, whatever the calls: 1.
    pub const BUDGET_MIN_PER_SECOND: u32 = 1;
    /// Resends allowed beyond that, as a share of calls: 20 %.
    pub const BUDGET_RATIO: f32 = 0.2;
    /// The most `tools/list` pages collected: 10,000.
    pub const MAX_PAGES: usize = 10_000;
}

/// One `tools/call` to make: the tool, its arguments, and for a keyed
/// tool optionally the idempotency key (the client makes one when none is
/// given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolCall {
    /// The tool's name (a `&'static str` is taken without a copy).
    pub name: Cow<'static, str>,
    /// Its arguments.
    pub arguments: JsonObject,
    /// The idempotency key for a keyed tool; `None` lets the client make a
    /// random one (a UUID) unless `arguments` already holds the key.
    pub idempotency_key: Option<String>,
}

impl ToolCall {
    /// A call of `name` with no arguments.
    pub fn new(name: impl Into<Cow<'static, str>>) -> ToolCall {
        ToolCall {
            name: name.into(),
            ..ToolCall::default()
        }
    }

    /// Sets the argument `name` to `value`.
    #[must_use]
    pub fn argument(mut self, name: impl Into<String>, value: Value) -> ToolCall {
        self.arguments.insert(name.into(), value);
        self
    }

    /// Replaces every argument.
    #[must_use]
    pub fn arguments(mut self, arguments: JsonObject) -> ToolCall {
        self.arguments = arguments;
        self
    }

    /// The key of this logical call, for a keyed tool: every attempt
    /// carries it, so a resend is recognised by the server. Give it to send
    /// the same key from another process or after a crash of the caller;
    /// leave it out and the client makes one. A key for a tool that takes
    /// none, or one that differs from the key argument already in
    /// [`arguments`](Self::arguments), is refused
    /// ([`CallError::InvalidKey`]) rather than dropped.
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> ToolCall {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// How a call ended when the server's answer is known or its delivery is
/// not.
#[derive(Debug)]
pub enum Outcome {
    /// The server answered with a result: a tool error (`isError`)
    /// included.
    Completed(Completed),
    /// An attempt may have reached the server and no answer came, and the
    /// call was not (or no longer) resent: read back before calling again.
    DeliveryUnknown(DeliveryUnknown),
}

impl Outcome {
    /// The result, when completed.
    pub fn completed(self) -> Option<Completed> {
        match self {
            Outcome::Completed(completed) => Some(completed),
            Outcome::DeliveryUnknown(_) => None,
        }
    }
}

/// A call the server answered with a result.
#[derive(Debug)]
pub struct Completed {
    /// The `tools/call` result.
    pub result: CallToolResult,
    /// Attempts made, the first included: requests that could have run the
    /// tool.
    pub attempts: u32,
    /// Requests answered "in progress, retry later" by a trusted server
    /// running the keyed call already: they could not run it, and are not
    /// attempts.
    pub asks: u32,
    /// The idempotency key every attempt carried, for a keyed tool.
    pub idempotency_key: Option<String>,
}

impl Completed {
    /// Whether the server answered with a result it recorded earlier
    /// instead of running the tool again (its `_meta` carries
    /// [`REPLAYED_META_KEY`]).
    pub fn replayed(&self) -> bool {
        self.result
            .meta
            .as_ref()
            .is_some_and(|meta| meta.0.contains_key(REPLAYED_META_KEY))
    }
}

/// A call whose delivery is unknown, and not resent (again) because the
/// policy forbids it or the attempts or the budget ran out. It may have
/// run: once at most when it was sent once or keyed (a trusted server runs
/// a key once), else as many times as it was sent, every resend being one
/// the policy allowed (a read, or an idempotent write).
#[derive(Debug)]
pub struct DeliveryUnknown {
    /// The tool called.
    pub tool: String,
    /// The arguments every attempt carried (the idempotency key included,
    /// for a keyed tool).
    pub arguments: JsonObject,
    /// The idempotency key, for a keyed tool.
    pub idempotency_key: Option<String>,
    /// Attempts made, the first included (as [`Completed::attempts`]
    /// counts them).
    pub attempts: u32,
    /// Requests answered "in progress" (as [`Completed::asks`]).
    pub asks: u32,
    /// Why the last attempt's answer is missing.
    pub last_error: Lost,
    /// The policy's verdict for this call, with its reason: why it was, or
    /// was not, resent.
    pub verdict: Verdict,
    /// Why the client stopped resending: the policy, the attempts, the
    /// budget, or a changed tool.
    pub stopped: String,
}

impl fmt::Display for DeliveryUnknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let asks = match self.asks {
            0 => String::new(),
            1 => " and 1 ask while the server had it in progress".to_owned(),
            asks => format!(" and {asks} asks while the server had it in progress"),
        };
        write!(
            f,
            "delivery of `{}` is unknown after {} attempt{}{asks} ({}): {}; {}",
            escape::shown(&self.tool),
            self.attempts,
            if self.attempts == 1 { "" } else { "s" },
            self.last_error,
            self.stopped,
            self.verdict.reason
        )
    }
}

/// Why a sent request's answer is missing: what makes its delivery
/// unknown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Lost {
    /// No response within the call's timeout (the client then sent
    /// `notifications/cancelled`).
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// The request was cancelled before its response came.
    #[error("the request was cancelled ({})", .reason.as_deref().unwrap_or("no reason given"))]
    Cancelled {
        /// The cancellation's reason.
        reason: Option<String>,
    },
    /// The transport closed after the request was handed to it (a stdio
    /// server that died, a stream that ended).
    #[error("the transport closed after the request was sent")]
    TransportClosed,
    /// rmcp's streamable HTTP client re-initialised the session while the
    /// response was pending (rmcp reports it as a JSON-RPC error that no
    /// server sent).
    #[error("the streamable HTTP session was re-initialised before the response arrived")]
    SessionReinitialized,
    /// The transport failed after the request may have left (a connection
    /// reset after the body was written).
    #[error("the transport failed after the request may have been sent: {0}")]
    Transport(#[source] ServiceError),
    /// The caller dropped the call's future after the request was sent.
    #[error("the call's future was dropped before its response arrived")]
    Dropped,
}

/// Why a call has no [`Outcome`]. None of these ran the tool, except as
/// said.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// The tool is not in the server's complete `tools/list`: not called.
    #[error("{}", .verdict.reason)]
    UnknownTool {
        /// The tool asked for.
        tool: String,
        /// The policy's refusal.
        verdict: Verdict,
    },
    /// The server answered with a JSON-RPC error: it refused the call (for
    /// a keyed tool, [`codes::KEY_CONFLICT`] means the key was first used
    /// with other arguments; [`codes::KEY_IN_PROGRESS`], after the client
    /// asked for as long as it waits, that another call with the key still
    /// runs). `attempts` counts requests that could have run the tool, so
    /// it is 0 when every answer was "in progress".
    #[error("the server refused `{}`: {} ({})", escape::shown(.tool), escape::shown(&.error.message), .error.code.0)]
    Rejected {
        /// The tool called.
        tool: String,
        /// The server's error.
        error: ErrorData,
        /// Attempts made.
        attempts: u32,
    },
    /// No attempt left the client (the transport was closed, a restart
    /// failed), so the tool did not run.
    #[error("`{}` was not sent after {attempts} attempt(s): {last_error}", escape::shown(.tool))]
    NotSent {
        /// The tool called.
        tool: String,
        /// Attempts made.
        attempts: u32,
        /// Why the last attempt was not sent.
        last_error: Box<dyn StdError + Send + Sync>,
    },
    /// The call's idempotency key could not be what the caller meant (see
    /// [`ToolCall::idempotency_key`]): not sent.
    #[error("`{}` was not sent: {problem}", escape::shown(.tool))]
    InvalidKey {
        /// The tool called.
        tool: String,
        /// What is wrong with the key.
        problem: String,
    },
    /// The server answered with something other than a `tools/call`
    /// result (an MRTR `input_required` round or a task, which this client
    /// does not drive).
    #[error("`{}` was answered with {what}, which this client does not handle", escape::shown(.tool))]
    Unsupported {
        /// The tool called.
        tool: String,
        /// What came back.
        what: &'static str,
    },
}

/// Why a client could not be built, or its tool list collected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection factory failed.
    #[error("cannot connect to the MCP server: {0}")]
    Connect(#[source] Box<dyn StdError + Send + Sync>),
    /// `tools/list` failed (timeout, transport, JSON-RPC error).
    #[error("tools/list failed: {0}")]
    List(#[source] ServiceError),
    /// `tools/list` was answered with something else.
    #[error("tools/list was answered with a result of another kind")]
    UnexpectedList,
    /// The tool list is not complete or not well formed.
    #[error("the tool list is unusable: {0}")]
    Collect(#[from] CollectError),
}

/// The one thing the client needs of a running rmcp client service: its
/// peer. Implemented for every `RunningService<RoleClient, _>`.
pub trait Connection: Send + Sync + 'static {
    /// The peer requests are sent through.
    fn peer(&self) -> &Peer<RoleClient>;
}

impl<S: Service<RoleClient>> Connection for RunningService<RoleClient, S> {
    fn peer(&self) -> &Peer<RoleClient> {
        RunningService::peer(self)
    }
}

type BoxError = Box<dyn StdError + Send + Sync>;
type ConnectFuture = Pin<Box<dyn Future<Output = Result<Box<dyn Connection>, BoxError>> + Send>>;
type Connector = Arc<dyn Fn() -> ConnectFuture + Send + Sync>;
type HintsHook = Arc<dyn Fn(&ListedTool) -> ToolHints + Send + Sync>;

/// Builds a [`ReplaySafeClient`]; every option has the default of
/// [`defaults`].
#[must_use]
pub struct ReplaySafeClientBuilder {
    trust: Trust,
    call_timeout: Duration,
    max_attempts: u32,
    backoff: ExponentialBuilder,
    budget: Option<Arc<dyn Budget + Send + Sync>>,
    max_pages: usize,
    in_progress_wait: Option<Duration>,
    keys_survive_restarts: bool,
    keep_definitions: bool,
    hints: Option<HintsHook>,
}

impl ReplaySafeClientBuilder {
    /// Whether the operator vetted the server (default
    /// [`Trust::Untrusted`]: nothing is resent after a lost response).
    pub fn trust(mut self, trust: Trust) -> Self {
        self.trust = trust;
        self
    }

    /// How long each request waits for its response (default
    /// [`defaults::CALL_TIMEOUT`]).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Attempts per call, the first included (default
    /// [`defaults::MAX_ATTEMPTS`]; at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The pauses before resends (default: exponential from
    /// [`defaults::BACKOFF_MIN`] to [`defaults::BACKOFF_MAX`] with jitter).
    /// Its own attempt limit is ignored: [`max_attempts`](Self::max_attempts)
    /// bounds them.
    pub fn backoff(mut self, backoff: ExponentialBuilder) -> Self {
        self.backoff = backoff;
        self
    }

    /// The retry budget every resend of the session draws on (default:
    /// tower's `TpsBudget` over [`defaults::BUDGET_WINDOW`], with
    /// [`defaults::BUDGET_MIN_PER_SECOND`] and [`defaults::BUDGET_RATIO`]).
    /// Each call deposits; each resend withdraws, and a spent budget ends
    /// the call with its delivery unknown.
    pub fn retry_budget(mut self, budget: impl Budget + Send + Sync + 'static) -> Self {
        self.budget = Some(Arc::new(budget));
        self
    }

    /// How long a keyed call keeps asking a server that answers "in
    /// progress" ([`codes::KEY_IN_PROGRESS`]: the first attempt still runs)
    /// before it ends with its delivery unknown (default: the call timeout).
    /// These asks cannot run the tool, so they spend neither
    /// [`max_attempts`](Self::max_attempts) nor the retry budget; they are
    /// counted apart ([`Completed::asks`]).
    pub fn in_progress_wait(mut self, wait: Duration) -> Self {
        self.in_progress_wait = Some(wait);
        self
    }

    /// Whether the server's idempotency records outlive its process (it
    /// keeps them in redb or Redis). Default false: after the server was
    /// started again, a keyed call that may have reached the old process is
    /// not resent, since a server on the in-memory store has forgotten the
    /// key and would run the call a second time. Set it only for a server
    /// you know keeps its records; the client cannot see which store it
    /// uses.
    pub fn keys_survive_restarts(mut self, survive: bool) -> Self {
        self.keys_survive_restarts = survive;
        self
    }

    /// The hints each tool's calls are judged by, in place of the ones the
    /// server lists: `hints` is given each tool as collected and returns its
    /// hints, typically the server's with some overridden by the operator
    /// ([`ToolHints::assert`], [`Provenance::Asserted`](crate::Provenance)),
    /// as a gateway's `[[assert]]` does. It runs once per tool each time the
    /// list is collected (at connect, [`refresh_tools`](ReplaySafeClient::refresh_tools)
    /// and after a restart), and what it returns is what
    /// [`ReplaySafeClient::tools`] shows and what the resend decision reads.
    ///
    /// Trust still comes first: on an untrusted server nothing is resent,
    /// whatever the hints (DESIGN.md, "Consuming hints: policy").
    pub fn hints(
        mut self,
        hints: impl Fn(&ListedTool) -> ToolHints + Send + Sync + 'static,
    ) -> Self {
        self.hints = Some(Arc::new(hints));
        self
    }

    /// The most `tools/list` pages collected (default
    /// [`defaults::MAX_PAGES`]).
    pub fn max_pages(mut self, max_pages: usize) -> Self {
        self.max_pages = max_pages;
        self
    }

    /// Whether each tool's whole definition is kept, as the server listed
    /// it, in [`ListedTool::definition`] of [`ReplaySafeClient::tools`] and
    /// of what [`refresh_tools`](ReplaySafeClient::refresh_tools) returns
    /// (a JSON object: `name`, `inputSchema`, `annotations`, `_meta` and
    /// every other member of the `Tool` in the spec's `server/tools`).
    /// Default false: only the name, title, hints, fingerprint and key
    /// argument are kept.
    ///
    /// Set it to serve the definitions on (a gateway does): they then come
    /// from the very `tools/list` the resend decisions are taken on, never
    /// from a second listing the server could answer differently. It
    /// holds each definition in memory for as long as its list is current.
    pub fn keep_definitions(mut self, keep: bool) -> Self {
        self.keep_definitions = keep;
        self
    }

    /// Connects with `connect` and collects the tool list. `connect` is
    /// called again, and the list collected again, whenever the transport
    /// has closed (a stdio server died) before a resend.
    ///
    /// # Errors
    ///
    /// [`ConnectError`] when `connect` fails or the list cannot be
    /// collected.
    pub async fn connect<F, Fut, S, E>(self, connect: F) -> Result<ReplaySafeClient, ConnectError>
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<RunningService<RoleClient, S>, E>> + Send + 'static,
        S: Service<RoleClient>,
        E: Into<BoxError>,
    {
        let connector: Connector = Arc::new(move || {
            let connecting = connect();
            Box::pin(async move {
                connecting
                    .await
                    .map(|service| Box::new(service) as Box<dyn Connection>)
                    .map_err(Into::into)
            })
        });
        let connection = connector().await.map_err(ConnectError::Connect)?;
        self.start(connection, Some(connector)).await
    }

    /// Uses a connection already made; the client cannot restart it.
    ///
    /// # Errors
    ///
    /// [`ConnectError`] when the list cannot be collected.
    pub async fn serve<S: Service<RoleClient>>(
        self,
        service: RunningService<RoleClient, S>,
    ) -> Result<ReplaySafeClient, ConnectError> {
        self.start(Box::new(service), None).await
    }

    async fn start(
        self,
        connection: Box<dyn Connection>,
        connector: Option<Connector>,
    ) -> Result<ReplaySafeClient, ConnectError> {
        let options = Options {
            trust: self.trust,
            call_timeout: self.call_timeout,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            max_pages: self.max_pages,
            in_progress_wait: self.in_progress_wait.unwrap_or(self.call_timeout),
            keys_survive_restarts: self.keys_survive_restarts,
            keep_definitions: self.keep_definitions,
            hints: self.hints,
        };
        let tools = collect_tools(connection.peer(), &options).await?;
        let budget = self.budget.unwrap_or_else(|| {
            Arc::new(TpsBudget::new(
                defaults::BUDGET_WINDOW,
                defaults::BUDGET_MIN_PER_SECOND,
                defaults::BUDGET_RATIO,
            ))
        });
        Ok(ReplaySafeClient {
            options,
            connector,
            budget,
            reconnecting: tokio::sync::Mutex::new(()),
            session: std::sync::RwLock::new(Session::new(
                Arc::from(connection),
                tools,
                self.trust,
                0,
            )),
            in_doubt: Arc::new(Mutex::new(Vec::new())),
            deadlines: Arc::default(),
        })
    }
}

struct Options {
    trust: Trust,
    call_timeout: Duration,
    max_attempts: u32,
    backoff: ExponentialBuilder,
    max_pages: usize,
    in_progress_wait: Duration,
    keys_survive_restarts: bool,
    keep_definitions: bool,
    hints: Option<HintsHook>,
}

/// The connection and what is known of its server; cloned whole (a few
/// `Arc`s) by each call.
#[derive(Clone)]
struct Session {
    connection: Arc<dyn Connection>,
    tools: Arc<ToolList>,
    /// Each tool's place in `tools` and its verdict, found per call without
    /// a scan and decided once per list, not once per call.
    index: Arc<HashMap<String, (usize, Arc<Verdict>), foldhash::fast::RandomState>>,
    /// How many times the connection was made again.
    generation: u64,
}

impl Session {
    fn new(
        connection: Arc<dyn Connection>,
        tools: ToolList,
        trust: Trust,
        generation: u64,
    ) -> Self {
        let index = tools
            .tools
            .iter()
            .enumerate()
            .map(|(place, tool)| (tool.name.clone(), (place, Arc::new(tool.verdict(trust)))))
            .collect();
        Session {
            connection,
            tools: Arc::new(tools),
            index: Arc::new(index),
            generation,
        }
    }
}

/// A client that resends `tools/call` only when the policy says it is
/// safe. See the [module](self) for the rules; build one with
/// [`ReplaySafeClient::builder`].
pub struct ReplaySafeClient {
    options: Options,
    connector: Option<Connector>,
    budget: Arc<dyn Budget + Send + Sync>,
    /// Read by every call, written only when the list or the connection is
    /// made again; never held across an await.
    session: std::sync::RwLock<Session>,
    /// Held while the connection is made again, so that it is made once.
    reconnecting: tokio::sync::Mutex<()>,
    in_doubt: Arc<Mutex<Vec<DeliveryUnknown>>>,
    /// When each `tools/call` in flight stops waiting for its response.
    deadlines: Arc<deadlines::Deadlines>,
}

impl fmt::Debug for ReplaySafeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplaySafeClient")
            .field("trust", &self.options.trust)
            .field("call_timeout", &self.options.call_timeout)
            .field("max_attempts", &self.options.max_attempts)
            .field("restartable", &self.connector.is_some())
            .finish()
    }
}

/// What one attempt came to.
enum Attempt {
    Answered(CallToolResult),
    /// A JSON-RPC error: the server's own, known answer.
    Refused(ErrorData),
    NotSent(BoxError),
    Lost(Lost),
    Unsupported(&'static str),
}

impl ReplaySafeClient {
    /// A builder with every option at its default.
    pub fn builder() -> ReplaySafeClientBuilder {
        ReplaySafeClientBuilder {
            trust: Trust::Untrusted,
            call_timeout: defaults::CALL_TIMEOUT,
            max_attempts: defaults::MAX_ATTEMPTS,
            backoff: ExponentialBuilder::default()
                .with_min_delay(defaults::BACKOFF_MIN)
                .with_max_delay(defaults::BACKOFF_MAX)
                .with_jitter(),
            budget: None,
            max_pages: defaults::MAX_PAGES,
            in_progress_wait: None,
            keys_survive_restarts: false,
            keep_definitions: false,
            hints: None,
        }
    }

    /// Whether the server is trusted.
    pub fn trust(&self) -> Trust {
        self.options.trust
    }

    /// The server's complete tool list, as last collected (at connect, by
    /// [`refresh_tools`](Self::refresh_tools), or after a restart), each
    /// tool's whole definition with it when the client was built with
    /// [`keep_definitions`](ReplaySafeClientBuilder::keep_definitions).
    pub async fn tools(&self) -> Arc<ToolList> {
        self.session().tools
    }

    /// How many times the connection was made again after its transport
    /// closed.
    pub async fn restarts(&self) -> u64 {
        self.session().generation
    }

    /// The peer of the current connection, for requests other than
    /// `tools/call`.
    pub async fn peer(&self) -> Peer<RoleClient> {
        self.session().connection.peer().clone()
    }

    /// Collects the tool list again (after `notifications/tools/list_changed`,
    /// say), and returns the list collected: the one later calls are
    /// judged by (with each whole definition when the client was built with
    /// [`keep_definitions`](ReplaySafeClientBuilder::keep_definitions)).
    ///
    /// # Errors
    ///
    /// As [`ReplaySafeClientBuilder::connect`].
    pub async fn refresh_tools(&self) -> Result<Arc<ToolList>, ConnectError> {
        let Session {
            connection,
            generation,
            ..
        } = self.session();
        let tools = collect_tools(connection.peer(), &self.options).await?;
        let session = Session::new(connection, tools, self.options.trust, generation);
        let tools = session.tools.clone();
        *write(&self.session) = session;
        Ok(tools)
    }

    /// The session as it stands.
    fn session(&self) -> Session {
        read(&self.session).clone()
    }

    /// Calls whose futures were dropped after their request was sent: their
    /// delivery is unknown, and no caller is left to be told. Each is
    /// returned once.
    pub fn take_in_doubt(&self) -> Vec<DeliveryUnknown> {
        std::mem::take(&mut *lock(&self.in_doubt))
    }

    /// Calls a tool; resends it after a lost response only when the policy
    /// says so, with the same arguments (and, for a keyed tool, the same
    /// key) as a new JSON-RPC request.
    ///
    /// # Errors
    ///
    /// [`CallError`]: the tool is unknown, the server refused the call, no
    /// attempt could be sent, or the answer was not a `tools/call` result.
    /// A lost response is not an error but [`Outcome::DeliveryUnknown`].
    pub async fn call_tool(&self, call: ToolCall) -> Result<Outcome, CallError> {
        let mut doubt = InDoubt {
            list: self.in_doubt.clone(),
            call: None,
        };
        let outcome = self.call_tool_in(call, &mut doubt).await;
        // An outcome reached the caller: nothing is left in doubt.
        doubt.call = None;
        outcome
    }

    /// [`call_tool`](Self::call_tool), keeping `doubt` armed while an
    /// attempt may have reached the server, so that dropping the call then
    /// leaves it in [`take_in_doubt`](Self::take_in_doubt).
    async fn call_tool_in(
        &self,
        call: ToolCall,
        doubt: &mut InDoubt,
    ) -> Result<Outcome, CallError> {
        // A transport that closed since the last call is made again first,
        // so the call is judged against the list of the server it goes to.
        let mut session = self.session();
        if self.connector.is_some() && session.connection.peer().is_transport_closed() {
            self.connection(session.generation, true)
                .await
                .map_err(|error| CallError::NotSent {
                    tool: call.name.to_string(),
                    attempts: 0,
                    last_error: error,
                })?;
            session = self.session();
        }
        let Session {
            mut connection,
            tools,
            index,
            mut generation,
        } = session;
        let Some((place, verdict)) = index.get(call.name.as_ref()) else {
            return Err(CallError::UnknownTool {
                verdict: tools.decide(&call.name, self.options.trust),
                tool: call.name.into_owned(),
            });
        };
        let listed = &tools.tools[*place];
        let (arguments, key) = keyed_arguments(listed, call.arguments, call.idempotency_key)
            .map_err(|problem| CallError::InvalidKey {
                tool: call.name.to_string(),
                problem,
            })?;
        let mut tries = Tries {
            call: Arc::new(Call {
                tool: call.name,
                arguments,
                key,
                verdict: verdict.clone(),
            }),
            attempts: 0,
            lost: None,
            refusal: None,
            not_sent: None,
            asks: 0,
            asking_since: None,
        };
        self.budget.deposit();
        // Built at the first pause: most calls never make one.
        let mut backoff = None;
        loop {
            tries.attempts += 1;
            let attempt = self.attempt(connection.peer(), &tries, doubt).await;
            let closed = matches!(
                attempt,
                Attempt::Lost(Lost::TransportClosed) | Attempt::NotSent(_)
            );
            let retry_after = match attempt {
                Attempt::Answered(result) => {
                    return Ok(Outcome::Completed(Completed {
                        result,
                        attempts: tries.attempts,
                        asks: tries.asks,
                        idempotency_key: tries.call.key.clone(),
                    }));
                }
                Attempt::Unsupported(what) => {
                    return Err(CallError::Unsupported {
                        tool: tries.call.tool.to_string(),
                        what,
                    });
                }
                // Only a trusted server's word that it did not run is taken.
                Attempt::Refused(error) => match not_run(
                    &error,
                    tries.call.key.is_some() && self.options.trust == Trust::Trusted,
                ) {
                    // "In progress" or "store failed": the server says it
                    // did not run this attempt; wait and try again.
                    Some(retry_after) => {
                        tries.refusal = Some(error);
                        // An ask, not an attempt: the server said it did not
                        // run, so it spends neither attempts nor budget.
                        tries.attempts -= 1;
                        tries.asks += 1;
                        let since = *tries
                            .asking_since
                            .get_or_insert_with(tokio::time::Instant::now);
                        let left = self
                            .options
                            .in_progress_wait
                            .saturating_sub(since.elapsed());
                        if left.is_zero() {
                            let stop = format!(
                                "the server still had it in progress after {:?}",
                                self.options.in_progress_wait
                            );
                            return tries.give_up(stop);
                        }
                        // The server's retryAfterMs is a wish, not a limit of
                        // ours: the wait stays within in_progress_wait.
                        let backoff = backoff.get_or_insert_with(|| self.options.backoff.build());
                        self.pause_within(backoff, retry_after, left).await;
                        continue;
                    }
                    None => {
                        let stop = format!(
                            "the resend was refused ({}: {})",
                            error.code.0,
                            escape::shown(&error.message)
                        );
                        tries.refusal = Some(error);
                        return tries.give_up(stop);
                    }
                },
                Attempt::NotSent(error) => {
                    tracing::info!(tool = ?tries.call.tool, attempts = tries.attempts, %error, "tools/call was not sent");
                    tries.not_sent = Some(error);
                    None
                }
                Attempt::Lost(why) => {
                    let resend = tries.call.verdict.decision == Decision::Resend;
                    tracing::info!(tool = ?tries.call.tool, attempts = tries.attempts, error = %why, resend, "tools/call response lost");
                    tries.lost = Some(why);
                    if !resend {
                        return tries.give_up("it is not resent".to_owned());
                    }
                    // Dropped while pausing or resending, it stays in doubt.
                    doubt.call = Some((tries.call.clone(), (tries.attempts, tries.asks)));
                    None
                }
            };
            if tries.attempts >= self.options.max_attempts {
                let stop = format!("all {} attempts were made", tries.attempts);
                return tries.give_up(stop);
            }
            if !self.budget.withdraw() {
                return tries.give_up("the session's retry budget is spent".to_owned());
            }
            let backoff = backoff.get_or_insert_with(|| self.options.backoff.build());
            self.pause(backoff, retry_after).await;
            // The server may have died: start it again, and resend only
            // what it still defines the same way.
            match self.connection(generation, closed).await {
                Ok((now, now_generation)) => {
                    if now_generation != generation {
                        if let Some(stop) = self.tool_changed(listed, &tries.call.tool).await {
                            return tries.give_up(stop);
                        }
                        if let Some(stop) = self.key_forgotten(listed, &tries) {
                            return tries.give_up(stop);
                        }
                    }
                    connection = now;
                    generation = now_generation;
                }
                Err(error) => {
                    let stop = format!("the server could not be started again ({error})");
                    tries.not_sent = Some(error);
                    return tries.give_up(stop);
                }
            }
        }
    }

    /// One attempt: sends the request and waits for its answer.
    async fn attempt(
        &self,
        peer: &Peer<RoleClient>,
        tries: &Tries,
        doubt: &mut InDoubt,
    ) -> Attempt {
        let params = CallToolRequestParams::new(tries.call.tool.clone())
            .with_arguments(tries.call.arguments.clone());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // The timeout is the client's own (`deadlines`), not rmcp's timer
        // per request.
        let options = PeerRequestOptions::no_options();
        let mut handle = match peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            // Refused before it was handed to the transport.
            Err(error) => return Attempt::NotSent(Box::new(error)),
        };
        let mut deadline = self.deadlines.start(self.options.call_timeout);
        let earlier = doubt
            .call
            .replace((tries.call.clone(), (tries.attempts, tries.asks)));
        let answer = std::future::poll_fn(|cx| match Pin::new(&mut handle.rx).poll(cx) {
            Poll::Ready(answer) => Poll::Ready(Some(answer)),
            Poll::Pending if deadline.passed(cx) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        })
        .await;
        drop(deadline);
        // What rmcp's `await_response` gives with a timeout: a dropped
        // responder is a closed transport, and a request that timed out is
        // cancelled (`notifications/cancelled`, "request timeout").
        let answer = match answer {
            Some(Ok(answer)) => answer,
            Some(Err(_dropped)) => Err(ServiceError::TransportClosed),
            None => {
                let reason = RequestHandle::<RoleClient>::REQUEST_TIMEOUT_REASON;
                if let Err(error) = handle.cancel(Some(reason.to_owned())).await {
                    tracing::debug!(%error, "notifications/cancelled for a timed-out tools/call was not sent");
                }
                Err(ServiceError::Timeout {
                    timeout: self.options.call_timeout,
                })
            }
        };
        // An earlier lost attempt keeps the call in doubt; this one is over.
        doubt.call = earlier;
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Attempt::Answered(result),
            Ok(ServerResult::InputRequiredResult(_)) => Attempt::Unsupported("input_required"),
            Ok(ServerResult::CreateTaskResult(_)) => Attempt::Unsupported("a task"),
            Ok(_) => Attempt::Unsupported("a result of another kind"),
            Err(error) => classify(error),
        }
    }

    /// The current connection, made again first when its transport closed
    /// (`dead`: an attempt found it closed, before rmcp's service loop may
    /// have noticed) and a connector is at hand. Returns it with its
    /// generation.
    async fn connection(
        &self,
        seen: u64,
        dead: bool,
    ) -> Result<(Arc<dyn Connection>, u64), BoxError> {
        let current = |session: &Session| {
            let closed = dead && session.generation == seen
                || session.connection.peer().is_transport_closed();
            (!closed || self.connector.is_none() || session.generation != seen)
                .then(|| (session.connection.clone(), session.generation))
        };
        if let Some(current) = current(&self.session()) {
            return Ok(current);
        }
        let _once = self.reconnecting.lock().await;
        // Another call may have made it again while this one waited.
        if let Some(current) = current(&self.session()) {
            return Ok(current);
        }
        let connector = self.connector.as_ref().expect("checked above");
        tracing::info!("the MCP server's transport closed; connecting again");
        let connection: Arc<dyn Connection> = Arc::from(connector().await?);
        let tools = collect_tools(connection.peer(), &self.options)
            .await
            .map_err(|error| Box::new(error) as BoxError)?;
        let generation = seen + 1;
        *write(&self.session) =
            Session::new(connection.clone(), tools, self.options.trust, generation);
        Ok((connection, generation))
    }

    /// After a restart: why the call must not be resent, when its tool
    /// changed or is gone.
    async fn tool_changed(&self, before: &ListedTool, name: &str) -> Option<String> {
        let tools = self.tools().await;
        let Some(now) = tools.get(name) else {
            return Some(format!(
                "after the server restarted, `{}` is no longer in its tools/list",
                escape::shown(name)
            ));
        };
        match (&before.fingerprint, &now.fingerprint) {
            (Some(a), Some(b)) if a.definition != b.definition => {
                let parts: Vec<&str> = a
                    .changed_parts(b)
                    .into_iter()
                    .map(|part| part.wire_name())
                    .collect();
                Some(format!(
                    "after the server restarted, `{}` is defined differently ({}), so the call is \
                     not resent",
                    escape::shown(name),
                    if parts.is_empty() {
                        "its name".to_owned()
                    } else {
                        parts.join(", ")
                    }
                ))
            }
            _ => None,
        }
    }

    /// After a restart: why a keyed call that may have reached the old
    /// process is not resent, when only its key made it replay-safe and the
    /// key may have died with the process.
    fn key_forgotten(&self, listed: &ListedTool, tries: &Tries) -> Option<String> {
        let reached = tries.lost.is_some();
        // A keyed tool's idempotentHint rests on its key; only a read needs
        // none.
        let keyed_only =
            tries.call.key.is_some() && !listed.hints.get(crate::hints::Hint::ReadOnly).value;
        (reached && keyed_only && !self.options.keys_survive_restarts).then(|| {
            "the server was started again, and its idempotency records may not have survived \
             (a server on the in-memory store forgets its keys), so the keyed call is not \
             resent; build the client with keys_survive_restarts(true) for a server whose \
             records outlive it (redb, Redis)"
                .to_owned()
        })
    }

    async fn pause(
        &self,
        backoff: &mut impl Iterator<Item = Duration>,
        at_least: Option<Duration>,
    ) {
        self.pause_within(backoff, at_least, defaults::BACKOFF_MAX)
            .await;
    }

    /// The next backoff pause, at least `at_least` (a server's
    /// `retryAfterMs`), at most `at_most`.
    async fn pause_within(
        &self,
        backoff: &mut impl Iterator<Item = Duration>,
        at_least: Option<Duration>,
        at_most: Duration,
    ) {
        let pause = backoff.next().unwrap_or(defaults::BACKOFF_MAX);
        let pause = pause.max(at_least.unwrap_or_default()).min(at_most);
        tokio::time::sleep(pause).await;
    }
}

/// What every attempt of one logical call sends, and the policy's verdict
/// on it; shared, so that keeping the call in doubt copies nothing.
struct Call {
    tool: Cow<'static, str>,
    arguments: JsonObject,
    key: Option<String>,
    verdict: Arc<Verdict>,
}

impl Call {
    /// The call as a [`DeliveryUnknown`] after `attempts` and `asks`.
    fn unknown(
        &self,
        (attempts, asks): (u32, u32),
        last_error: Lost,
        stopped: String,
    ) -> DeliveryUnknown {
        DeliveryUnknown {
            tool: self.tool.to_string(),
            arguments: self.arguments.clone(),
            idempotency_key: self.key.clone(),
            attempts,
            asks,
            last_error,
            verdict: Verdict::clone(&self.verdict),
            stopped,
        }
    }
}

/// One logical call across its attempts.
struct Tries {
    call: Arc<Call>,
    attempts: u32,
    /// Set once an attempt may have reached the server: from then on the
    /// call may have run, whatever later attempts say.
    lost: Option<Lost>,
    /// The last refusal that said the attempt did not run.
    refusal: Option<ErrorData>,
    /// The last attempt that was not sent.
    not_sent: Option<BoxError>,
    /// Requests answered "in progress": asks, not attempts (an ask is
    /// counted as an attempt while it is in flight, then moved here).
    asks: u32,
    /// When the server first answered "in progress".
    asking_since: Option<tokio::time::Instant>,
}

impl Tries {
    /// Ends the call without an answer: its delivery is unknown when any
    /// attempt may have reached the server; otherwise the server's refusal,
    /// or "not sent".
    fn give_up(self, stopped: String) -> Result<Outcome, CallError> {
        if let Some(last_error) = self.lost {
            let unknown = self
                .call
                .unknown((self.attempts, self.asks), last_error, stopped);
            tracing::warn!(tool = ?unknown.tool, attempts = unknown.attempts, error = %unknown.last_error, stopped = %unknown.stopped, "tools/call delivery unknown: read back before calling again");
            return Ok(Outcome::DeliveryUnknown(unknown));
        }
        if let Some(error) = self.refusal {
            return Err(CallError::Rejected {
                tool: self.call.tool.to_string(),
                error,
                attempts: self.attempts,
            });
        }
        Err(CallError::NotSent {
            tool: self.call.tool.to_string(),
            attempts: self.attempts,
            last_error: self.not_sent.unwrap_or_else(|| stopped.into()),
        })
    }
}

/// Pushes its call to the client's in-doubt list when dropped before its
/// answer came.
struct InDoubt {
    list: Arc<Mutex<Vec<DeliveryUnknown>>>,
    /// The call and the attempts it made, while one may have reached the
    /// server.
    call: Option<(Arc<Call>, (u32, u32))>,
}

impl Drop for InDoubt {
    fn drop(&mut self) {
        if let Some((call, attempts)) = self.call.take() {
            tracing::warn!(tool = ?call.tool, "tools/call future dropped after the request was sent: delivery unknown");
            let stopped = "the caller stopped waiting".to_owned();
            lock(&self.list).push(call.unknown(attempts, Lost::Dropped, stopped));
        }
    }
}

fn read<T>(lock: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // A session is replaced whole: a poisoned one is still whole.
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A push is one whole step: a poisoned list is still whole.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The arguments every attempt sends: for a keyed tool, with the key
/// filled (the caller's, one already in the arguments, or a new UUID).
/// Refused, saying why, when a key could not be what the caller meant: one
/// for a tool that takes none, two that differ, one that is not a string
/// of 1 to 255 characters.
fn keyed_arguments(
    listed: &ListedTool,
    mut arguments: JsonObject,
    key: Option<String>,
) -> Result<(JsonObject, Option<String>), String> {
    let Some(field) = &listed.idempotency_key else {
        return match key {
            None => Ok((arguments, None)),
            Some(_) => Err(
                "the tool takes no idempotency key (its _meta names none), so a key would not \
                 make a resend safe"
                    .to_owned(),
            ),
        };
    };
    let given = match arguments.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(given)) => Some(given.clone()),
        Some(other) => {
            return Err(format!(
                "its argument `{}` carries the idempotency key, and must be a string, not {}",
                escape::shown(field),
                crate::hints::json_type(other)
            ));
        }
    };
    let key = match (key, given) {
        (Some(key), Some(given)) if key != given => {
            return Err(format!(
                "two idempotency keys: the argument `{}` and ToolCall::idempotency_key differ",
                escape::shown(field)
            ));
        }
        (Some(key), _) | (None, Some(key)) => key,
        (None, None) => uuid::Uuid::new_v4().to_string(),
    };
    let chars = key.chars().count();
    if chars == 0 || chars > crate::idempotency::defaults::MAX_KEY_CHARS {
        return Err(format!(
            "an idempotency key is 1 to {} characters, not {chars}",
            crate::idempotency::defaults::MAX_KEY_CHARS
        ));
    }
    arguments.insert(field.clone(), Value::from(key.clone()));
    Ok((arguments, Some(key)))
}

/// For a refusal that says the call did not run and may be tried again
/// (a keyed call in progress, a failed store), on a keyed call to a
/// trusted server: how long to wait at least.
fn not_run(error: &ErrorData, keyed_and_trusted: bool) -> Option<Option<Duration>> {
    if !keyed_and_trusted {
        return None;
    }
    match error.code.0 {
        codes::KEY_IN_PROGRESS | codes::STORE_FAILED => Some(
            error
                .data
                .as_ref()
                .and_then(|data| data.get("retryAfterMs"))
                .and_then(Value::as_u64)
                .map(Duration::from_millis),
        ),
        _ => None,
    }
}

/// The message rmcp's streamable HTTP client gives pending requests when it
/// re-initialises the session (`streamable_http_client.rs`,
/// `fail_pending_stream_responses`).
const SESSION_REINITIALIZED: &str =
    "streamable HTTP session was re-initialized before the response arrived";

/// Sorts an rmcp error of a sent request: the server's own answer, a
/// request that never left, or one whose delivery is unknown.
fn classify(error: ServiceError) -> Attempt {
    match error {
        ServiceError::McpError(error)
            if error.code == ErrorCode::INTERNAL_ERROR
                && error.message == SESSION_REINITIALIZED =>
        {
            Attempt::Lost(Lost::SessionReinitialized)
        }
        ServiceError::McpError(error) => Attempt::Refused(error),
        ServiceError::Timeout { timeout } => Attempt::Lost(Lost::Timeout(timeout)),
        ServiceError::Cancelled { reason } => Attempt::Lost(Lost::Cancelled { reason }),
        ServiceError::TransportClosed => Attempt::Lost(Lost::TransportClosed),
        ServiceError::TransportSend(error) if never_left(&error) => {
            Attempt::NotSent(Box::new(ServiceError::TransportSend(error)))
        }
        other => Attempt::Lost(Lost::Transport(other)),
    }
}

/// Whether a transport error proves that no byte of the request left: the
/// connection was refused (nothing listened), or a pipe was already broken
/// (the stdio server was gone before the line was written). Any other
/// failure may have come after the request was written.
fn never_left(error: &(dyn StdError + 'static)) -> bool {
    let mut source: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::BrokenPipe
            )
        {
            return true;
        }
        source = current.source();
    }
    false
}

/// Collects the complete tool list through `peer`, with fingerprints (to
/// tell a changed tool after a restart).
async fn collect_tools(
    peer: &Peer<RoleClient>,
    options: &Options,
) -> Result<ToolList, ConnectError> {
    let mut collector = Collector::new(CollectOptions {
        max_pages: options.max_pages,
        fingerprints: true,
        keep_definitions: options.keep_definitions,
    });
    let mut cursor: Option<String> = None;
    loop {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let answer = peer
            .send_request_with_option(
                request,
                PeerRequestOptions::with_timeout(options.call_timeout),
            )
            .await
            .map_err(ConnectError::List)?
            .await_response()
            .await
            .map_err(ConnectError::List)?;
        let ServerResult::ListToolsResult(page) = answer else {
            return Err(ConnectError::UnexpectedList);
        };
        let page = serde_json::to_value(&page).map_err(|error| CollectError::PageNotJson {
            page: 0,
            error: error.to_string(),
        })?;
        match collector.push_page(page)? {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let mut tools = collector.finish()?;
    if let Some(hints) = &options.hints {
        for tool in &mut tools.tools {
            tool.hints = hints(tool);
        }
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rmcp_errors_are_sorted_by_what_they_prove() {
        let sorted = |error| match classify(error) {
            Attempt::Lost(lost) => format!("lost: {lost}"),
            Attempt::NotSent(error) => format!("not sent: {error}"),
            Attempt::Refused(error) => format!("refused: {}", error.message),
            _ => "other".to_owned(),
        };
        assert_eq!(
            sorted(ServiceError::Timeout {
                timeout: Duration::from_secs(2)
            }),
            "lost: no response within 2s"
        );
        assert_eq!(
            sorted(ServiceError::TransportClosed),
            "lost: the transport closed after the request was sent"
        );
        assert_eq!(
            sorted(ServiceError::Cancelled { reason: None }),
            "lost: the request was cancelled (no reason given)"
        );
        // rmcp's own JSON-RPC error for a re-initialised HTTP session is no
        // server's answer.
        assert_eq!(
            sorted(ServiceError::McpError(ErrorData::internal_error(
                SESSION_REINITIALIZED,
                None
            ))),
            "lost: the streamable HTTP session was re-initialised before the response arrived"
        );
        assert_eq!(
            sorted(ServiceError::McpError(ErrorData::internal_error(
                "boom", None
            ))),
            "refused: boom"
        );
    }

    #[test]
    fn only_a_refused_connection_or_a_broken_pipe_proves_nothing_left() {
        let io = |kind| std::io::Error::new(kind, "x");
        assert!(never_left(&io(std::io::ErrorKind::ConnectionRefused)));
        assert!(never_left(&io(std::io::ErrorKind::BrokenPipe)));
        assert!(!never_left(&io(std::io::ErrorKind::ConnectionReset)));
        // Found anywhere in the chain of sources.
        #[derive(Debug, thiserror::Error)]
        #[error("wrapped")]
        struct Wrapped(#[source] std::io::Error);
        assert!(never_left(&Wrapped(io(
            std::io::ErrorKind::ConnectionRefused
        ))));
        assert!(!never_left(&Wrapped(io(std::io::ErrorKind::UnexpectedEof))));
    }

    #[test]
    fn keyed_calls_carry_one_key_on_every_attempt() {
        let listed = |key: Option<&str>| ListedTool {
            name: "append".to_owned(),
            page: 1,
            title: None,
            hints: crate::hints::ToolHints::from_json(None, None).unwrap(),
            fingerprint: None,
            definition: None,
            idempotency_key: key.map(str::to_owned),
        };
        let args = |value: Value| match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        };
        let keyed = listed(Some("request_id"));
        let (unkeyed, key) = keyed_arguments(&listed(None), args(json!({"a": 1})), None).unwrap();
        assert_eq!((Value::Object(unkeyed), key), (json!({"a": 1}), None));
        let (given, key) =
            keyed_arguments(&keyed, args(json!({"a": 1})), Some("k-1".to_owned())).unwrap();
        assert_eq!(Value::Object(given), json!({"a": 1, "request_id": "k-1"}));
        assert_eq!(key.as_deref(), Some("k-1"));
        let (kept, key) =
            keyed_arguments(&keyed, args(json!({"request_id": "mine"})), None).unwrap();
        assert_eq!(kept["request_id"], "mine");
        assert_eq!(key.as_deref(), Some("mine"));
        let (made, key) = keyed_arguments(&keyed, JsonObject::new(), None).unwrap();
        let key = key.unwrap();
        assert_eq!(made["request_id"], key.as_str());
        assert_eq!(uuid::Uuid::parse_str(&key).unwrap().get_version_num(), 4);

        // Never silently dropped or replaced.
        let refused = |listed: &ListedTool, arguments: Value, key: Option<&str>| {
            keyed_arguments(listed, args(arguments), key.map(str::to_owned)).unwrap_err()
        };
        assert_eq!(
            refused(&listed(None), json!({}), Some("k")),
            "the tool takes no idempotency key (its _meta names none), so a key would not make a \
             resend safe"
        );
        assert_eq!(
            refused(&keyed, json!({"request_id": 7}), None),
            "its argument `request_id` carries the idempotency key, and must be a string, not a \
             number"
        );
        assert_eq!(
            refused(&keyed, json!({"request_id": "K"}), Some("L")),
            "two idempotency keys: the argument `request_id` and ToolCall::idempotency_key differ"
        );
        assert_eq!(
            refused(&keyed, json!({"request_id": ""}), None),
            "an idempotency key is 1 to 255 characters, not 0"
        );
        assert!(
            keyed_arguments(&keyed, args(json!({"request_id": "K"})), Some("K".into())).is_ok()
        );
    }

    #[test]
    fn only_keyed_in_progress_and_store_refusals_are_retried() {
        let error = |code, data| ErrorData::new(ErrorCode(code), "x", data);
        assert_eq!(
            not_run(
                &error(codes::KEY_IN_PROGRESS, Some(json!({"retryAfterMs": 250}))),
                true
            ),
            Some(Some(Duration::from_millis(250)))
        );
        assert_eq!(not_run(&error(codes::STORE_FAILED, None), true), Some(None));
        assert_eq!(not_run(&error(codes::KEY_IN_PROGRESS, None), false), None);
        assert_eq!(not_run(&error(codes::KEY_CONFLICT, None), true), None);
        assert_eq!(not_run(&error(-32602, None), true), None);
    }
}

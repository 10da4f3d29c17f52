//! The servers the gateway forwards to: each `[[upstream]]` connected
//! through [`ReplaySafeClient`], its complete tool list kept, and its
//! `notifications/tools/list_changed` followed.
//!
//! A stdio upstream is started in a process group of its own (so that what
//! a wrapper such as `npx` starts is stopped with it), with the gateway's
//! environment minus every client and admin token, plus its configured
//! `env`. Its stderr goes to the gateway's stderr, each line prefixed with
//! the upstream's name and escaped, never into the protocol. The
//! replay-safe client starts it again from the same factory when it died,
//! before a resend.
//!
//! # Bounded connects
//!
//! Connecting an upstream (its `initialize` handshake and its first
//! `tools/list`, the replay-safe client's, whose definitions are the ones
//! served: one listing gives both the tools and the hints their resends
//! are decided by) takes at most its `call_timeout_secs`, at start, at each
//! later try of one never reached, and each time the replay-safe client
//! starts it again: an upstream that never answers is unavailable, it does
//! not hold the others back.
//!
//! # Stopping process groups
//!
//! Every stdio upstream's process group is recorded, in the
//! [`ProcessGroups`] of the gateway that started it, while its transport
//! lives, and killed (`SIGKILL` to the group) by a plain system call, not
//! from a task: when its transport is dropped (a connect timed out, the
//! runtime ends), once rmcp's stdio shutdown is done when it is closed
//! (the replay-safe client replaced the connection, the upstream exited and
//! may have left children behind), and all at once by
//! [`ProcessGroups::stop_all`] before the gateway exits. rmcp's own cleanup
//! kills from a task it spawns, which never runs once the runtime ends.
//!
//! An upstream that cannot be reached at start, or whose calls can no
//! longer be sent, is *unavailable*: its last known tools stay listed,
//! marked in `_meta` under [`UNAVAILABLE_META_KEY`], and a call gets a tool
//! error saying so; the other upstreams keep serving.
//!
//! # Retry budget
//!
//! The replay-safe client resends only replay-safe calls, and only while a
//! retry budget allows. The gateway gives each upstream its
//! [`RetryBudgets`]: one per principal, shared by every replica of the
//! gateway's state.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use mcp_hints::client::ReplaySafeClient;
use mcp_hints::collect::ToolList;
use mcp_hints::policy::Trust;
use mcp_hints_core::escape;
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{NotificationContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess, Transport};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::sync::mpsc;

use super::Error;
use super::budget::RetryBudgets;
use super::config::{Assert, Config, UpstreamConfig, UpstreamTransport};
use super::defaults;
use super::policy::effective_hints;
use super::state::SharedState;

/// The `_meta` key of a listed tool whose upstream is unavailable: the
/// reason, in words.
pub const UNAVAILABLE_META_KEY: &str = "mcp-hints/unavailable";

type BoxError = Box<dyn StdError + Send + Sync>;

/// The reason of every upstream once the gateway is stopping.
const STOPPING: &str = "the gateway is stopping";

/// One upstream: its config, its client while it is reachable, and its
/// last known tools.
pub(crate) struct Upstream {
    /// Its name, `[A-Za-z0-9-]{1,32}`.
    pub(crate) name: String,
    state: RwLock<State>,
    /// What connecting again needs, for an upstream never reached.
    config: UpstreamConfig,
    changed: mpsc::UnboundedSender<String>,
    secrets: Arc<Vec<String>>,
    asserts: Arc<Vec<Assert>>,
    /// Where its process groups are recorded: its gateway's.
    groups: ProcessGroups,
    /// How many restarts of its connection were said as an event.
    restarts_said: std::sync::atomic::AtomicU64,
    /// What its resends draw on, across reconnections.
    budgets: RetryBudgets,
}

#[derive(Clone)]
struct State {
    client: Option<Arc<ReplaySafeClient>>,
    /// Why it is unavailable; `None` while it serves.
    unavailable: Option<String>,
    /// Its tools as last listed, in the order served.
    tools: Arc<Vec<Tool>>,
}

impl Upstream {
    /// Whether the operator trusts it (`trusted`): an untrusted one's
    /// open-world results taint their session ([`crate::session::Taint`]).
    pub(crate) fn trusted(&self) -> bool {
        self.config.trusted
    }

    /// The client, once the upstream was reached (even while it is marked
    /// unavailable: the replay-safe client starts a stdio upstream again
    /// before each call's first attempt, so a call may bring it back).
    ///
    /// # Errors
    ///
    /// [`Error::Upstream`]: why it never was reached, or that the gateway
    /// is stopping.
    pub(crate) fn client(&self) -> Result<Arc<ReplaySafeClient>, Error> {
        let state = self.state();
        state.client.ok_or_else(|| {
            self.unreachable(
                state
                    .unavailable
                    .unwrap_or_else(|| "not connected".to_owned()),
            )
        })
    }

    /// [`Error::Upstream`] of this upstream for `reason`.
    fn unreachable(&self, reason: String) -> Error {
        Error::Upstream {
            upstream: self.name.clone(),
            reason,
        }
    }

    /// Its tools as last listed (empty when it never answered).
    pub(crate) fn tools(&self) -> Arc<Vec<Tool>> {
        self.state().tools
    }

    /// Why it is unavailable, if it is.
    pub(crate) fn unavailable(&self) -> Option<String> {
        self.state().unavailable
    }

    /// Marks it unavailable (its calls can no longer be sent); its tools
    /// stay listed, marked. Said as an event when it was serving, as
    /// ``gateway: upstream `NAME` is unavailable: REASON; ...`` (the reason
    /// escaped), so that an operator sees the change without a client
    /// calling. Once the gateway is stopping, its reason stays that.
    pub(crate) fn mark_unavailable(&self, reason: String) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if state.unavailable.as_deref() == Some(STOPPING) {
            return;
        }
        if state.unavailable.is_none() {
            let (name, reason) = (&self.name, mcp_hints_core::escape::one_line(&reason));
            tracing::warn!(
                upstream = %name,
                %reason,
                "upstream `{name}` is unavailable: {reason}; its tools stay listed, marked"
            );
        }
        state.unavailable = Some(reason);
    }

    /// Marks it serving again (a call reached it); true when it was marked
    /// unavailable, and then said as an event
    /// (``gateway: upstream `NAME` serves again``).
    pub(crate) fn mark_available(&self) -> bool {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.client.is_some() && self.serving_again(&mut state)
    }

    /// Says, as an event once each, the restarts of its connection that
    /// `client` made since the last said
    /// (``gateway: upstream `NAME` was started again ...``): the
    /// replay-safe client makes them by itself before a call, and a stdio
    /// upstream that was started again has lost what it kept in memory.
    pub(crate) async fn say_restarts(&self, client: &ReplaySafeClient) {
        let restarts = client.restarts().await;
        let said = self
            .restarts_said
            .fetch_max(restarts, std::sync::atomic::Ordering::SeqCst);
        if restarts > said {
            let what = match self.config.transport {
                UpstreamTransport::Command { .. } => {
                    "its process had ended, so what it kept in memory is gone"
                }
                UpstreamTransport::Url { .. } => "its connection had closed",
            };
            tracing::warn!(
                upstream = %self.name,
                restarts,
                "upstream `{}` was started again ({what}; {restarts} restart{} so far)",
                self.name,
                if restarts == 1 { "" } else { "s" }
            );
        }
    }

    /// Clears `state`'s unavailability, saying so when there was one.
    fn serving_again(&self, state: &mut State) -> bool {
        let again = state.unavailable.take().is_some();
        if again {
            tracing::info!(upstream = %self.name, "upstream `{}` serves again", self.name);
        }
        again
    }

    /// Tries once more to reach an upstream that never was (it would not
    /// start, or did not answer): true when it now serves, its tools
    /// listed. An upstream reached once is left to the replay-safe client,
    /// which starts it again itself.
    pub(crate) async fn reconnect(&self) -> bool {
        if self.state().client.is_some() {
            return false;
        }
        let connecting = connect(
            &self.config,
            self.changed.clone(),
            self.secrets.clone(),
            self.asserts.clone(),
            self.groups.clone(),
            self.budgets.clone(),
        );
        match connecting.await {
            Ok((client, tools)) => {
                let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
                if state.client.is_some() || state.unavailable.as_deref() == Some(STOPPING) {
                    return false;
                }
                *state = State {
                    client: Some(Arc::new(client)),
                    unavailable: None,
                    tools: Arc::new(tools),
                };
                tracing::info!(
                    upstream = %self.name,
                    "upstream `{}` is reachable now",
                    self.name
                );
                true
            }
            Err(error) => {
                let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
                if state.unavailable.as_deref() != Some(STOPPING) {
                    state.unavailable = Some(error.to_string());
                }
                false
            }
        }
    }

    /// Whether its config's `exclude_tools` leave out its tool `tool` (its
    /// own name).
    pub(crate) fn excludes(&self, tool: &str) -> bool {
        self.config
            .exclude_tools
            .iter()
            .any(|glob| glob.matches(tool))
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn closed(&self) -> bool {
        self.state().unavailable.as_deref() == Some(STOPPING)
    }

    /// Drops its connection (the gateway is stopping): a stdio upstream's
    /// process group is stopped once no call holds the client.
    pub(crate) fn close(&self) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.client = None;
        state.unavailable = Some(STOPPING.to_owned());
    }

    /// Lists its tools again (after `notifications/tools/list_changed`):
    /// the replay-safe client's list, so resends are decided on the new
    /// one, and its definitions are the ones served from then on.
    ///
    /// # Errors
    ///
    /// [`Error::Upstream`]: why the list could not be collected; the old
    /// list stays.
    pub(crate) async fn refresh(&self) -> Result<(), Error> {
        let client = self.client()?;
        let listed = client
            .refresh_tools()
            .await
            .map_err(|error| self.unreachable(error.to_string()))?;
        let tools = definitions(&self.name, &listed)?;
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if state.unavailable.as_deref() == Some(STOPPING) {
            return Ok(());
        }
        state.tools = Arc::new(tools);
        self.serving_again(&mut state);
        Ok(())
    }

    fn state(&self) -> State {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Connects every upstream at once. One that cannot be reached is
/// returned unavailable, with the reason, and said as an event; the others
/// serve. `changed` receives an upstream's name each time it sends
/// `notifications/tools/list_changed`; the stdio upstreams' process groups,
/// now and whenever one is started again, are recorded in `groups`. Their
/// resends draw on retry budgets kept in `state`.
pub(crate) async fn connect_all(
    config: &Config,
    changed: mpsc::UnboundedSender<String>,
    groups: &ProcessGroups,
    state: &Arc<dyn SharedState>,
) -> Vec<Arc<Upstream>> {
    let secrets = secret_env_vars(config);
    let asserts = Arc::new(config.asserts.clone());
    let mut connecting = tokio::task::JoinSet::new();
    for (index, upstream) in config.upstreams.iter().enumerate() {
        let upstream = upstream.clone();
        let changed = changed.clone();
        let secrets = secrets.clone();
        let asserts = asserts.clone();
        let groups = groups.clone();
        let budgets = RetryBudgets::new(
            &upstream.name,
            state.clone(),
            config.state.rate_limit_fallback,
        );
        connecting.spawn(async move {
            let connected = connect(
                &upstream,
                changed,
                secrets,
                asserts,
                groups,
                budgets.clone(),
            )
            .await;
            (index, upstream.name, connected, budgets)
        });
    }
    let mut upstreams: Vec<Option<Arc<Upstream>>> = vec![None; config.upstreams.len()];
    while let Some(joined) = connecting.join_next().await {
        let Ok((index, name, connected, budgets)) = joined else {
            continue;
        };
        let state = match connected {
            Ok((client, tools)) => State {
                client: Some(Arc::new(client)),
                unavailable: None,
                tools: Arc::new(tools),
            },
            Err(error) => {
                let reason = error.to_string();
                // "The others" only where there are others.
                let others = if config.upstreams.len() > 1 {
                    "; the others keep serving"
                } else {
                    ""
                };
                let shown = mcp_hints_core::escape::one_line(&reason);
                tracing::warn!(
                    upstream = %name,
                    reason = %shown,
                    "upstream `{name}` is unavailable: {shown}{others}"
                );
                State {
                    client: None,
                    unavailable: Some(reason),
                    tools: Arc::new(Vec::new()),
                }
            }
        };
        upstreams[index] = Some(Arc::new(Upstream {
            name,
            state: RwLock::new(state),
            config: config.upstreams[index].clone(),
            changed: changed.clone(),
            secrets: secrets.clone(),
            asserts: asserts.clone(),
            groups: groups.clone(),
            restarts_said: std::sync::atomic::AtomicU64::new(0),
            budgets,
        }));
    }
    // A task that panicked leaves its upstream out (none is expected to).
    upstreams.into_iter().flatten().collect()
}

/// The names of the environment variables whose values are a client's or
/// the admin's token: a stdio upstream is started without them.
fn secret_env_vars(config: &Config) -> Arc<Vec<String>> {
    let secrets: Vec<&str> = config
        .clients
        .iter()
        .map(|client| client.token.expose())
        .chain(config.admin.iter().map(|admin| admin.token.expose()))
        .collect();
    Arc::new(
        std::env::vars_os()
            .filter_map(|(name, value)| {
                let value = value.to_str()?;
                secrets
                    .contains(&value)
                    .then(|| name.to_string_lossy().into_owned())
            })
            .collect(),
    )
}

/// The client handler of one upstream connection: it reports the
/// upstream's `notifications/tools/list_changed` to the gateway.
#[derive(Clone)]
struct UpstreamHandler {
    name: String,
    changed: mpsc::UnboundedSender<String>,
}

impl ClientHandler for UpstreamHandler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // The receiver lives as long as the gateway.
        let _ = self.changed.send(self.name.clone());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-hints-gateway", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// Connects one upstream and lists its tools, all within its
/// `call_timeout`. Its resends are judged by the hints clients are shown:
/// the server's under the operator's `asserts`.
///
/// # Errors
///
/// [`Error::Upstream`]: why it could not be reached, in words: it would
/// not start, failed or did not answer `initialize` or `tools/list` within
/// the timeout (`did not answer initialize within 2 s`), or a header is
/// not valid. What a stdio upstream started is stopped then (its process
/// group killed).
async fn connect(
    upstream: &UpstreamConfig,
    changed: mpsc::UnboundedSender<String>,
    secrets: Arc<Vec<String>>,
    asserts: Arc<Vec<Assert>>,
    groups: ProcessGroups,
    budgets: RetryBudgets,
) -> Result<(ReplaySafeClient, Vec<Tool>), Error> {
    let timeout = upstream.call_timeout;
    // Whether a handshake was answered: which step a timeout of the whole
    // connect cut short.
    let initialized = Arc::new(AtomicBool::new(false));
    let connecting = connect_unbounded(
        upstream,
        changed,
        secrets,
        asserts,
        groups,
        budgets,
        initialized.clone(),
    );
    match tokio::time::timeout(timeout, connecting).await {
        Ok(connected) => connected,
        // What the connect started is dropped with it: a stdio transport
        // still in its handshake kills its group at once (`Group`), a
        // connection made closes its transport (`GroupTransport::close`).
        Err(_) => {
            let step = if initialized.load(Ordering::Acquire) {
                "tools/list"
            } else {
                "initialize"
            };
            Err(Error::Upstream {
                upstream: upstream.name.clone(),
                reason: did_not_answer(step, timeout),
            })
        }
    }
}

/// `did not answer STEP within N s`.
fn did_not_answer(step: &str, timeout: Duration) -> String {
    format!("did not answer {step} within {} s", timeout.as_secs())
}

/// [`connect`] without the bound on the whole: each `initialize` the
/// factory makes (the first and every restart the replay-safe client
/// makes) is bounded by the call timeout, and sets `initialized` once
/// answered.
async fn connect_unbounded(
    upstream: &UpstreamConfig,
    changed: mpsc::UnboundedSender<String>,
    secrets: Arc<Vec<String>>,
    asserts: Arc<Vec<Assert>>,
    groups: ProcessGroups,
    budgets: RetryBudgets,
    initialized: Arc<AtomicBool>,
) -> Result<(ReplaySafeClient, Vec<Tool>), Error> {
    let unreachable = |reason: String| Error::Upstream {
        upstream: upstream.name.clone(),
        reason,
    };
    let timeout = upstream.call_timeout;
    let upstream_name = upstream.name.clone();
    let handler = UpstreamHandler {
        name: upstream.name.clone(),
        changed,
    };
    let builder = ReplaySafeClient::builder()
        .trust(if upstream.trusted {
            Trust::Trusted
        } else {
            Trust::Untrusted
        })
        .call_timeout(timeout)
        .retry_budget(budgets)
        // The definitions served are the ones this listing collects.
        .keep_definitions(true)
        .hints(move |tool| effective_hints(&asserts, &upstream_name, &tool.name, &tool.hints).0);
    let client = match &upstream.transport {
        UpstreamTransport::Command {
            program,
            args,
            env,
            resolved_against,
        } => {
            let (program, args, env) = (program.clone(), args.clone(), env.clone());
            let resolved_against = resolved_against.clone();
            let name = upstream.name.clone();
            builder
                .connect(move || {
                    let spawned = spawn(&name, &program, &args, &env, &secrets, &groups)
                        .map_err(|error| not_found(error, &program, resolved_against.as_deref()));
                    let handler = handler.clone();
                    let initialized = initialized.clone();
                    async move {
                        let transport = spawned?;
                        // A timeout drops the transport, which kills its
                        // process group.
                        let served = handshake(handler.serve(transport), timeout).await?;
                        initialized.store(true, Ordering::Release);
                        Ok::<_, BoxError>(served)
                    }
                })
                .await
        }
        UpstreamTransport::Url { url, headers } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            for (name, value) in headers {
                let value = value.expose();
                // rmcp sends its own `Authorization: Bearer` and refuses the
                // header among the custom ones.
                if name.eq_ignore_ascii_case("authorization")
                    && let Some(token) = value.strip_prefix("Bearer ")
                {
                    config.auth_header = Some(token.to_owned());
                    continue;
                }
                let header = http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|error| unreachable(format!("header `{name}`: {error}")))?;
                let value = http::HeaderValue::from_str(value).map_err(|_| {
                    unreachable(format!(
                        "header `{name}`: the value is not a valid header value"
                    ))
                })?;
                config.custom_headers.insert(header, value);
            }
            // reqwest is built without a default crypto provider (see
            // src/live/http.rs); an error means one is installed already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            builder
                .connect(move || {
                    let transport = StreamableHttpClientTransport::from_config(config.clone());
                    let serving = handler.clone().serve(transport);
                    let initialized = initialized.clone();
                    async move {
                        let served = handshake(serving, timeout).await?;
                        initialized.store(true, Ordering::Release);
                        Ok::<_, BoxError>(served)
                    }
                })
                .await
        }
    }
    .map_err(|error| unreachable(error.to_string()))?;
    let tools = definitions(&upstream.name, &*client.tools().await)?;
    Ok((client, tools))
}

/// `serving` (rmcp's `initialize` handshake) within `timeout`.
///
/// # Errors
///
/// rmcp's error, or `did not answer initialize within N s`.
async fn handshake<T, E: Into<BoxError>>(
    serving: impl Future<Output = Result<T, E>>,
    timeout: Duration,
) -> Result<T, BoxError> {
    match tokio::time::timeout(timeout, serving).await {
        Ok(served) => served.map_err(Into::into),
        Err(_) => Err(did_not_answer("initialize", timeout).into()),
    }
}

/// The tool definitions to serve, in the order listed: the ones the
/// replay-safe client collected `listed` from (it keeps them whole, built
/// with `keep_definitions`), so that what clients are shown and what
/// resends are decided on come from one `tools/list`.
///
/// # Errors
///
/// [`Error::Upstream`] of `upstream` for a definition that is not an MCP
/// `Tool`, named (rmcp read each one as a `Tool` before the client
/// collected it, so none is expected).
fn definitions(upstream: &str, listed: &ToolList) -> Result<Vec<Tool>, Error> {
    listed
        .tools
        .iter()
        .map(|tool| {
            let definition = tool.definition.clone().unwrap_or_default();
            serde_json::from_value(serde_json::Value::Object(definition)).map_err(|error| {
                Error::Upstream {
                    upstream: upstream.to_owned(),
                    reason: format!(
                        "tools/list: tool `{}` is not a tool definition: {error}",
                        escape::shown(&tool.name)
                    ),
                }
            })
        })
        .collect()
}

/// `error` from [`spawn`], saying where a program that is not there was
/// looked for: in the directory a relative `command` was resolved against
/// (the config file's), or on `PATH` for a bare name.
fn not_found(error: SpawnError, program: &str, resolved_against: Option<&Path>) -> BoxError {
    match error {
        SpawnError::Start(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let program = Path::new(program);
            let looked = match (resolved_against, program.parent()) {
                (Some(against), Some(parent)) => format!(
                    "no `{}` in {} (a relative `command` is resolved against the config file's \
                     directory, {})",
                    escape::shown(&program.file_name().unwrap_or_default().to_string_lossy()),
                    escape::shown(
                        &std::path::absolute(parent)
                            .unwrap_or_else(|_| parent.to_owned())
                            .display()
                            .to_string()
                    ),
                    escape::shown(&against.display().to_string())
                ),
                _ if program.components().count() > 1 => {
                    format!(
                        "{} does not exist",
                        escape::shown(&program.display().to_string())
                    )
                }
                _ => "not found on PATH".to_owned(),
            };
            format!(
                "cannot start `{}`: {error}: {looked}",
                escape::shown(&program.display().to_string())
            )
            .into()
        }
        SpawnError::Start(error) => {
            format!("cannot start `{}`: {error}", escape::shown(program)).into()
        }
        SpawnError::Other(error) => error,
    }
}

/// Why [`spawn`] started nothing.
#[derive(Debug)]
enum SpawnError {
    /// The program could not be started.
    Start(std::io::Error),
    /// Anything else, in words.
    Other(BoxError),
}

/// Starts a stdio upstream in its own process group, recorded in `groups`
/// (see [`Group`]) until its transport is dropped, its stderr copied to
/// the gateway's stderr with the upstream's name in front.
///
/// # Errors
///
/// [`SpawnError::Start`] when the program cannot be started, or
/// [`SpawnError::Other`] when `groups` were stopped (the gateway is
/// stopping; then nothing is started) or the program exited as it started.
fn spawn(
    name: &str,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    secrets: &[String],
    groups: &ProcessGroups,
) -> Result<GroupTransport, SpawnError> {
    let mut command = CommandWrap::with_new(program, |command| {
        command.args(args);
        for secret in secrets {
            command.env_remove(secret);
        }
        command.envs(env);
    });
    // Killing the group also stops what a wrapper script (`sh -c`, `npx`)
    // started.
    command.wrap(ProcessGroup::leader());
    // Started and recorded under one lock: `stop_all` cannot run between
    // the two, so nothing started escapes it.
    let mut locked = groups.lock();
    if locked.stopping {
        return Err(SpawnError::Other(STOPPING.into()));
    }
    let (child, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(SpawnError::Start)?;
    // The leader's pid is the group's id (`ProcessGroup::leader`); a child
    // just started has one.
    let leader = child
        .id()
        .and_then(|pid| libc::pid_t::try_from(pid).ok())
        .ok_or_else(|| {
            SpawnError::Other(format!("`{}` exited as it started", escape::shown(program)).into())
        })?;
    let group = Group::record(groups, &mut locked, leader);
    drop(locked);
    if let Some(stderr) = stderr {
        tokio::spawn(copy_stderr(name.to_owned(), stderr));
    }
    Ok(GroupTransport { group, child })
}

/// The process groups of the stdio upstreams whose connections live, and
/// whether the gateway is stopping (then no upstream is started again).
struct Groups {
    /// Group id (the leader's pid) by a number of its own: a pid may be
    /// used again once its group is gone.
    live: BTreeMap<u64, libc::pid_t>,
    next: u64,
    stopping: bool,
}

/// The process groups of the stdio upstreams one gateway started, each
/// recorded while its transport lives: a handle, cloned cheaply, every
/// clone the same record. [`Gateway`](crate::front::Gateway) makes one for
/// its upstreams; [`connect_all`] records into the one it is given.
#[derive(Clone)]
pub(crate) struct ProcessGroups {
    groups: Arc<Mutex<Groups>>,
}

impl Default for ProcessGroups {
    fn default() -> Self {
        ProcessGroups::new()
    }
}

impl std::fmt::Debug for ProcessGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let groups = self.lock();
        f.debug_struct("ProcessGroups")
            .field("live", &groups.live.len())
            .field("stopping", &groups.stopping)
            .finish()
    }
}

impl ProcessGroups {
    /// An empty record, accepting new groups.
    pub(crate) fn new() -> ProcessGroups {
        ProcessGroups {
            groups: Arc::new(Mutex::new(Groups {
                live: BTreeMap::new(),
                next: 0,
                stopping: false,
            })),
        }
    }

    /// Kills every process group still recorded (`SIGKILL` to each group),
    /// at once and before it returns, by a plain system call, and starts
    /// none from then on (a stdio upstream started again fails with "the
    /// gateway is stopping"): the gateway is about to exit, and a kill
    /// left to a task would not run once the runtime ends. Calling it again
    /// kills nothing more.
    pub(crate) fn stop_all(&self) {
        let mut groups = self.lock();
        groups.stopping = true;
        for (_, pgid) in std::mem::take(&mut groups.live) {
            kill_group(pgid);
        }
    }

    /// A guard that calls [`stop_all`](Self::stop_all) when it is dropped:
    /// held by a program for as long as it serves, so that every way out
    /// (a return, an error, an unwinding panic, a future dropped on a
    /// signal) stops the upstreams.
    pub(crate) fn stop_on_drop(&self) -> StopOnDrop {
        StopOnDrop {
            groups: Some(self.clone()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Groups> {
        // Each change is one whole step: a poisoned record is still whole.
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Kills the process groups of a gateway's stdio upstreams when dropped,
/// and lets none start again ([`Gateway::upstream_stopper`](crate::front::Gateway::upstream_stopper)).
#[must_use = "the process groups are stopped when this is dropped"]
#[derive(Debug)]
pub struct StopOnDrop {
    /// `None` once disarmed.
    groups: Option<ProcessGroups>,
}

impl StopOnDrop {
    /// Drops the guard without stopping anything: what it guarded went
    /// well, and its groups are another owner's to stop.
    pub(crate) fn disarm(mut self) {
        self.groups = None;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(groups) = &self.groups {
            groups.stop_all();
        }
    }
}

/// `SIGKILL` to process group `pgid`. A group already gone (`ESRCH`) is
/// what was wanted.
fn kill_group(pgid: libc::pid_t) {
    let _ = mcp_hints::process_group::kill(pgid);
}

/// One recorded process group: killed when this is dropped or stopped,
/// unless [`ProcessGroups::stop_all`] killed it first.
struct Group {
    key: u64,
    groups: ProcessGroups,
}

impl Group {
    /// Records `pgid` in `locked`, the held lock of `groups`.
    fn record(groups: &ProcessGroups, locked: &mut Groups, pgid: libc::pid_t) -> Group {
        let key = locked.next;
        locked.next += 1;
        locked.live.insert(key, pgid);
        Group {
            key,
            groups: groups.clone(),
        }
    }

    /// Kills the group now, once: what its leader left behind (a wrapper's
    /// children) goes with it.
    fn stop(&self) {
        // Taken out first, so that the group is never killed twice: its id
        // may belong to another group by then.
        let pgid = self.groups.lock().live.remove(&self.key);
        if let Some(pgid) = pgid {
            kill_group(pgid);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop();
    }
}

/// rmcp's child-process transport with its process group recorded: the
/// group is killed when the transport closes or is dropped (rmcp alone
/// kills it from a task it spawns, which does not run once the runtime
/// ends, and not at all when the leader exited by itself and left
/// children behind).
struct GroupTransport {
    group: Group,
    child: TokioChildProcess,
}

impl Transport<RoleClient> for GroupTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.child.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.child.receive()
    }

    /// rmcp's stdio shutdown (stdin closed, then `SIGTERM`, then `SIGKILL`
    /// to the group, each after a wait), then the group killed: the leader
    /// may have exited and left children in it.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let closed = self.child.close().await;
        self.group.stop();
        closed
    }
}

/// The target of the events that carry a stdio upstream's stderr, one per
/// line: field `upstream` (its name), `cut` (the line was longer than
/// [`defaults::STDERR_LINE_BYTES`]), and the line itself, escaped, as the
/// message. `mcp-hints gateway serve` prints each as `UPSTREAM: LINE`.
pub const STDERR_TARGET: &str = "mcp_hints_gateway::upstream::stderr";

/// Passes `stderr` on a line at a time, as events of [`STDERR_TARGET`],
/// each line escaped (a server cannot forge the gateway's own lines or
/// drive the terminal) and cut after [`defaults::STDERR_LINE_BYTES`], the
/// cut marked with [`escape::MARKER`]. A server's log line is passed on as
/// long as that bound allows, not cut as one value of a message is.
async fn copy_stderr(name: String, stderr: impl AsyncRead + Unpin) {
    let name = mcp_hints_core::escape::one_line(&name).into_owned();
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Read at most the bound (plus one byte, to know it was passed),
        // then skip the rest of the line.
        let mut limited = (&mut reader).take(defaults::STDERR_LINE_BYTES as u64 + 1);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let cut = line.len() > defaults::STDERR_LINE_BYTES;
        if cut {
            line.truncate(defaults::STDERR_LINE_BYTES);
            if skip_line(&mut reader).await.is_err() {
                return;
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        tracing::info!(
            target: STDERR_TARGET,
            upstream = %name,
            cut,
            "{}{}",
            mcp_hints_core::escape::one_line(text),
            if cut {
                escape::MARKER.to_string()
            } else {
                String::new()
            }
        );
    }
}

/// Skips the rest of a line without holding it: a line may be endless.
async fn skip_line(reader: &mut (impl AsyncBufReadExt + Unpin)) -> std::io::Result<()> {
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        if let Some(end) = buffer.iter().position(|byte| *byte == b'\n') {
            reader.consume(end + 1);
            return Ok(());
        }
        let length = buffer.len();
        reader.consume(length);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_group_is_killed_and_forgotten() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        // A leader that waits on a member of its group.
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = libc::pid_t::try_from(leader.id()).unwrap();
        let groups = ProcessGroups::new();
        let group = Group::record(&groups, &mut groups.lock(), pgid);
        group.stop();
        assert!(
            !groups
                .lock()
                .live
                .values()
                .any(|recorded| *recorded == pgid)
        );
        // Stopped already: dropping it kills nothing more.
        drop(group);
        assert_eq!(leader.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[tokio::test]
    async fn stopping_a_gateways_groups_kills_each_and_starts_none_and_spares_anothers() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let start = || {
            std::process::Command::new("sh")
                .args(["-c", "sleep 30 & wait"])
                .process_group(0)
                .spawn()
                .unwrap()
        };
        let pgid = |child: &std::process::Child| libc::pid_t::try_from(child.id()).unwrap();
        let (mut first, mut second, mut other) = (start(), start(), start());
        let ours = ProcessGroups::new();
        let theirs = ProcessGroups::new();
        let _first = Group::record(&ours, &mut ours.lock(), pgid(&first));
        let _second = Group::record(&ours, &mut ours.lock(), pgid(&second));
        let other_group = Group::record(&theirs, &mut theirs.lock(), pgid(&other));
        {
            let _stop = ours.stop_on_drop();
        }
        assert_eq!(first.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(second.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert!(ours.lock().live.is_empty());
        assert!(
            other.try_wait().unwrap().is_none(),
            "another gateway's group was killed"
        );
        // Nothing is started once stopped.
        let late = spawn(
            "late",
            "sleep",
            &["30".to_owned()],
            &BTreeMap::new(),
            &[],
            &ours,
        );
        match late {
            Err(SpawnError::Other(error)) => assert_eq!(error.to_string(), STOPPING),
            Err(error) => panic!("refused for another reason: {error:?}"),
            Ok(_) => panic!("started after stop_all"),
        }
        drop(other_group);
        assert_eq!(other.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    /// An upstream whose one tool is listed differently each time: `probe`,
    /// described `listing N` for the Nth `tools/list`, read-only only when
    /// N is odd. `lists` counts the listings.
    #[derive(Clone, Default)]
    struct Shifting {
        lists: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl rmcp::ServerHandler for Shifting {
        fn get_info(&self) -> rmcp::model::ServerConfig {
            rmcp::model::ServerConfig::new(
                rmcp::model::ServerCapabilities::builder()
                    .enable_tools()
                    .build(),
            )
        }

        async fn list_tools(
            &self,
            _request: Option<rmcp::model::PaginatedRequestParams>,
            _context: rmcp::service::RequestContext<rmcp::RoleServer>,
        ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
            let n = self.lists.fetch_add(1, Ordering::SeqCst) + 1;
            let tool = Tool::new(
                "probe",
                format!("listing {n}"),
                Arc::new(rmcp::model::JsonObject::new()),
            )
            .with_annotations(rmcp::model::ToolAnnotations::new().read_only(n % 2 == 1));
            Ok(rmcp::model::ListToolsResult::with_all_items(vec![tool]))
        }
    }

    /// `shifting` served over streamable HTTP on a loopback port: its URL.
    async fn serve_http(shifting: Shifting) -> String {
        use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
        use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let service = StreamableHttpService::new(
            move || Ok(shifting.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let app = axum::Router::new().nest_service("/mcp", service);
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}/mcp")
    }

    #[tokio::test]
    async fn one_tools_list_gives_both_the_served_definitions_and_the_resend_hints() {
        let shifting = Shifting::default();
        let url = serve_http(shifting.clone()).await;
        let text = format!(
            "[log]\npath = \"audit.jsonl\"\n\n[[upstream]]\nname = \"shifting\"\nurl = \"{url}\"\n"
        );
        let config = crate::config::parse(&text, Path::new("gateway.toml")).unwrap();
        let (changed, _) = mpsc::unbounded_channel();
        let groups = ProcessGroups::new();
        let state: Arc<dyn SharedState> = Arc::new(crate::state::InProcess::new(None));
        let upstreams = connect_all(&config, changed, &groups, &state).await;
        let upstream = &upstreams[0];
        assert_eq!(upstream.unavailable(), None);
        agree(upstream, &shifting, 1).await;
        upstream.refresh().await.unwrap();
        agree(upstream, &shifting, 2).await;
    }

    /// What clients are shown and what resends are decided on both come
    /// from `shifting`'s `n`th listing, and it was asked for `n` in all.
    async fn agree(upstream: &Upstream, shifting: &Shifting, n: usize) {
        let listed = upstream.client().unwrap().tools().await;
        let served = upstream.tools();
        assert_eq!(
            shifting.lists.load(Ordering::SeqCst),
            n,
            "tools/list requests"
        );
        assert_eq!(served.len(), 1);
        assert_eq!(
            served[0].description.as_deref(),
            Some(format!("listing {n}").as_str())
        );
        let read_only = |hints: mcp_hints::ToolHints| hints.get(mcp_hints::Hint::ReadOnly).value;
        assert_eq!(read_only(mcp_hints::ToolHints::of(&served[0])), n % 2 == 1);
        assert_eq!(read_only(listed.tools[0].hints), n % 2 == 1);
    }
}

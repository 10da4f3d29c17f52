//! The serving gateway: its config, policy, audit log, parked calls,
//! drift lock, upstreams and the tools it serves; [`GatewayBuilder`], how
//! an application starts one; and the served list rebuilt as upstreams
//! change or come back.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rmcp::RoleServer;
use rmcp::service::Peer;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::catalogue::{Catalogue, say_left_out, start_upstreams};
use crate::Error;
use crate::approval::{Approvals, DriftLock};
use crate::config::Config;
use crate::defaults;
use crate::log::{AuditLog, Durability, Entry};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::readiness::Probe;
use crate::redact::Redactor;
use crate::state::{InProcess, Metered, RedisState, SharedState};
use crate::upstream::{ProcessGroups, StopOnDrop, Upstream};
use crate::webhook::Webhook;

#[cfg(doc)]
use super::router;

/// How a [`Gateway`] starts, for an application that serves it: its
/// config, whether it keeps its served list current by itself (both on by
/// default, as `mcp-hints gateway serve` has them), and whether it keeps
/// Prometheus metrics (off by default; `serve` turns them on).
///
/// ```no_run
/// # async fn run(
/// #     config: mcp_hints_gateway::config::Config,
/// # ) -> Result<(), mcp_hints_gateway::Error> {
/// let gateway = mcp_hints_gateway::front::Gateway::builder(config)
///     .retry_unreachable(false)
///     .start()
///     .await?;
/// # let _ = gateway;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct GatewayBuilder {
    config: Config,
    follow_list_changes: bool,
    retry_unreachable: bool,
    metrics: bool,
}

impl GatewayBuilder {
    /// A gateway of `config`, following list changes and retrying
    /// unreachable upstreams.
    pub fn new(config: Config) -> GatewayBuilder {
        GatewayBuilder {
            config,
            follow_list_changes: true,
            retry_unreachable: true,
            metrics: false,
        }
    }

    /// Whether the gateway follows its upstreams'
    /// `notifications/tools/list_changed` (default `true`): the upstream's
    /// list is collected again, the served list rebuilt, and every client
    /// told. Off, the served list is the one built at start, until an
    /// unreachable upstream comes back.
    pub fn follow_list_changes(mut self, follow: bool) -> GatewayBuilder {
        self.follow_list_changes = follow;
        self
    }

    /// Whether the gateway tries the upstreams it could not reach at start
    /// again (default `true`), with pauses from
    /// [`defaults::RECONNECT_MIN`] doubling to [`defaults::RECONNECT_MAX`];
    /// each that answers has its tools served from then on. Off, such an
    /// upstream's tools stay unavailable.
    pub fn retry_unreachable(mut self, retry: bool) -> GatewayBuilder {
        self.retry_unreachable = retry;
        self
    }

    /// Whether the gateway keeps Prometheus metrics (default `false`):
    /// the ones the crate documentation's "Metrics" lists, served by
    /// [`serve_admin`](super::serve_admin) at `GET /metrics` and rendered
    /// by [`Gateway::render_metrics`]. They go to a recorder of the
    /// gateway's own, never to a global one: the `metrics` crate's global
    /// recorder stays the application's to install (or not), and several
    /// gateways in one process count apart. Off, nothing is recorded and
    /// `GET /metrics` answers 404.
    pub fn metrics(mut self, keep: bool) -> GatewayBuilder {
        self.metrics = keep;
        self
    }

    /// Opens the log and the drift lock, connects every upstream, builds
    /// the served tool list, and starts the tasks that keep it current, as
    /// asked. The gateway comes back shared: those tasks hold it too, and
    /// [`router`] and the `serve_*` functions take it so.
    ///
    /// Needs a Tokio runtime. The stdio upstreams are started in process
    /// groups of their own, running until [`Gateway::close`] or
    /// [`Gateway::stop_upstreams`]. A start that fails, or whose future is
    /// dropped (a signal while the upstreams connect), stops the stdio
    /// upstreams it started; once started, the gateway's owner stops them
    /// (most simply by holding [`Gateway::upstream_stopper`]'s guard).
    ///
    /// # Errors
    ///
    /// [`Error::Log`] for an audit log that cannot be opened,
    /// [`Error::LockRead`] or [`Error::LockInvalid`] for a drift lock that
    /// cannot be loaded (with `deny_drift`), and [`Error::Names`] for
    /// colliding or over-long tool names, after the config's path; each
    /// names the file or the tools.
    pub async fn start(self) -> Result<Arc<Gateway>, Error> {
        let metrics = if self.metrics {
            Metrics::prometheus()
        } else {
            Metrics::off()
        };
        let gateway = Arc::new(Gateway::open(self.config, metrics).await?);
        if gateway.metrics.enabled() {
            Gateway::keep_metrics(&gateway);
        }
        if self.follow_list_changes {
            gateway.clone().follow_list_changes();
        } else {
            // Nobody reads the names the upstreams send as their lists
            // change: they are dropped as they come rather than kept.
            drop(
                gateway
                    .changed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take(),
            );
        }
        if self.retry_unreachable {
            gateway.clone().retry_unreachable();
        }
        Ok(gateway)
    }
}

/// The serving gateway: its config, policy, log, approvals, upstreams and
/// the tools it serves.
pub struct Gateway {
    pub(super) config: Config,
    pub(super) policy: Policy,
    pub(super) log: AuditLog,
    pub(super) approvals: Approvals,
    /// What replicas share: rate-limit windows, parked calls, drift
    /// approvals.
    pub(super) state: Arc<dyn SharedState>,
    /// The windows a rate limit counts in while `state` cannot be reached,
    /// with `[state] rate_limit_fallback = "local"`.
    pub(super) local_windows: InProcess,
    /// Whether calls are checked against the drift lock (`[lock]` with
    /// `deny_drift`).
    pub(super) drift: bool,
    pub(super) upstreams: Vec<Arc<Upstream>>,
    /// The process groups of its stdio upstreams.
    pub(super) groups: ProcessGroups,
    pub(super) catalogue: RwLock<Arc<Catalogue>>,
    /// Fires when the served list changed, for `subscriptions/listen`
    /// streams.
    pub(super) changes: broadcast::Sender<()>,
    /// Clients of the `initialize` lifecycle, told of changes on their
    /// session.
    pub(super) sessions: Mutex<Vec<Peer<RoleServer>>>,
    /// Upstream names, as each sends `notifications/tools/list_changed`.
    pub(super) changed: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// The tools the served list leaves out for their names, as last said
    /// as an event: each is said once while it stays left out.
    pub(super) left_out: Mutex<HashSet<(String, String)>>,
    /// The approvals page (`http://ADMIN/approvals`), set once the admin
    /// endpoint is bound; the webhook's payloads link to it.
    pub(super) page: Arc<std::sync::OnceLock<String>>,
    /// How the commands the gateway prints reach its admin endpoint
    /// (`--config PATH` or `--admin URL`), set once it is bound.
    pub(super) admin_flag: std::sync::OnceLock<String>,
    /// Cancelled to end the streamable-HTTP sessions of every [`router`].
    pub(super) sessions_end: CancellationToken,
    /// Where its metrics go (nowhere unless [`GatewayBuilder::metrics`]).
    pub(crate) metrics: Metrics,
    /// What `GET /readyz` asks, in its order: every upstream. Whatever
    /// else a call comes to depend on adds its own [`Probe`] here, in
    /// [`Gateway::open`].
    pub(crate) readiness: Vec<Arc<dyn Probe>>,
    /// `[auth]`'s resource server: access tokens verified against the
    /// issuer's keys; `None` without `[auth]`.
    pub(super) oauth: Option<Arc<super::oauth::ResourceServer>>,
    /// The `[[redact]]` checks of results on their way back.
    pub(super) redactor: Redactor,
}

impl Gateway {
    /// How a gateway of `config` starts: [`GatewayBuilder::start`] starts
    /// it.
    pub fn builder(config: Config) -> GatewayBuilder {
        GatewayBuilder::new(config)
    }

    /// Opens the log and the drift lock, connects every upstream, and
    /// builds the served tool list.
    ///
    /// # Errors
    ///
    /// As [`GatewayBuilder::start`].
    async fn open(config: Config, metrics: Metrics) -> Result<Gateway, Error> {
        let log = AuditLog::open_measured(
            &config.log.path,
            config.log.options(&config.gateway.replica),
            metrics.clone(),
        )?;
        let drift = match config.lock.as_ref().filter(|lock| lock.deny_drift) {
            Some(lock) => Some(DriftLock::load(lock)?),
            None => None,
        };
        let checks_drift = drift.is_some();
        let backend: Arc<dyn SharedState> = match &config.state.redis {
            Some(url) => {
                Arc::new(RedisState::open(url, &config.state.prefix, drift).map_err(Error::State)?)
            }
            None => Arc::new(InProcess::new(drift)),
        };
        let state = Arc::new(Metered::new(backend, metrics.clone()));
        if let Err(error) = state.ready().await {
            let error = mcp_hints_core::escape::one_line(&error.to_string()).into_owned();
            tracing::warn!(
                %error,
                "{error}; calls a rule guards are refused until it answers"
            );
        }
        let policy = Policy::new(&config);
        let redactor = Redactor::new(&config);
        let oauth = super::oauth::ResourceServer::new(&config);
        let groups = ProcessGroups::new();
        let (upstreams, catalogue, left_out, receiver) =
            start_upstreams(&config, &groups, &(state.clone() as Arc<dyn SharedState>)).await?;
        // The in-process state always answers: only a shared one is asked.
        let shared = config
            .state
            .redis
            .is_some()
            .then(|| state.clone() as Arc<dyn Probe>);
        let readiness = upstreams
            .iter()
            .map(|upstream| upstream.clone() as Arc<dyn Probe>)
            .chain(shared)
            .collect();
        let page = Arc::new(std::sync::OnceLock::new());
        let webhook = match &config.approval.webhook {
            Some(url) => Some(Webhook::new(url, page.clone())?),
            None => None,
        };
        Ok(Gateway {
            redactor,
            config,
            policy,
            log,
            approvals: Approvals::new(state.clone(), webhook),
            page,
            state: state.clone(),
            local_windows: InProcess::new(None),
            drift: checks_drift,
            upstreams,
            groups,
            catalogue: RwLock::new(Arc::new(catalogue)),
            changes: broadcast::channel(16).0,
            sessions: Mutex::new(Vec::new()),
            changed: Mutex::new(Some(receiver)),
            left_out: Mutex::new(left_out),
            admin_flag: std::sync::OnceLock::new(),
            sessions_end: CancellationToken::new(),
            metrics,
            readiness,
            oauth,
        })
    }

    /// How an approver decides the parked call `id`: `mcp-hints gateway
    /// approve ID --config PATH` (or `--admin URL` when the config does not
    /// name the admin endpoint's port) once an admin endpoint is served
    /// ([`serve_admin`](super::serve_admin)); else that none is, and what
    /// decides it then.
    pub(super) fn approve_command(&self, id: &str) -> String {
        match self.admin_flag.get() {
            Some(flag) => format!("mcp-hints gateway approve {id} {flag}"),
            None if self.config.state.redis.is_some() => format!(
                "this gateway serves no admin endpoint (`listen.admin_http` and `[admin]`); \
                 `mcp-hints gateway approve {id}` at another replica's, or the application \
                 (`Gateway::approvals`), decides it"
            ),
            None => format!(
                "this gateway serves no admin endpoint (`listen.admin_http` and `[admin]`), so \
                 only the application (`Gateway::approvals`) can decide call {id}; else it \
                 expires by its rule"
            ),
        }
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
    /// stopping), gives their tasks a moment to record and answer it,
    /// writes the audit log's shutdown checkpoint
    /// ([`AuditLog::checkpoint`]), then waits until every written audit
    /// entry is synced (the log's sync thread dies with the process). A
    /// checkpoint that cannot be written, or a log that cannot be synced,
    /// is said as an event.
    pub async fn finish_log(&self) {
        if self.approvals.deny_all_stopping().await > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        // The checkpoint that lets a log cut short after this stop be found.
        if let Err(error) = self.log.checkpoint() {
            let error = mcp_hints_core::escape::one_line(&error.to_string()).into_owned();
            tracing::error!(%error, "{error}");
        }
        if let Err(error) = self.log.flush().await {
            let error = mcp_hints_core::escape::one_line(&error.to_string()).into_owned();
            tracing::error!(%error, "{error}");
        }
    }

    /// Its metrics in Prometheus' text format (version 0.0.4, what `GET
    /// /metrics` on the admin endpoint serves), for an application that
    /// serves them on a route of its own; `None` unless it was started
    /// with [`GatewayBuilder::metrics`].
    pub fn render_metrics(&self) -> Option<String> {
        self.metrics.render()
    }

    /// Runs the metrics' upkeep every [`defaults::METRICS_UPKEEP`], in a
    /// task of its own that ends with the gateway.
    fn keep_metrics(gateway: &Arc<Gateway>) {
        let gateway = Arc::downgrade(gateway);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(defaults::METRICS_UPKEEP);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(gateway) = gateway.upgrade() else {
                    return;
                };
                gateway.metrics.upkeep();
            }
        });
    }

    /// The calls waiting for an approver.
    pub fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    pub(super) fn catalogue(&self) -> Arc<Catalogue> {
        self.catalogue
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Follows the upstreams' `notifications/tools/list_changed` in a task
    /// of its own: the upstream's list is collected again, the served list
    /// rebuilt, and every client told.
    fn follow_list_changes(self: Arc<Self>) {
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
                    let error = error.to_string();
                    let error = mcp_hints_core::escape::one_line(&error);
                    tracing::warn!(
                        upstream = %name,
                        %error,
                        "upstream `{name}` changed its tools, but they could not be listed \
                         again: {error}; the old list stays"
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
    fn retry_unreachable(self: Arc<Self>) {
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
    /// stays), and said as an event.
    pub(super) fn republish(&self) {
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
                let error = error.to_string();
                let error = mcp_hints_core::escape::one_line(&error);
                tracing::warn!(
                    %error,
                    "the changed tool list is not served, the old one stays: {error}"
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

    /// The first step of stopping, for an axum server's graceful-shutdown
    /// future (`with_graceful_shutdown`): denies every parked call (its
    /// client is told the gateway is stopping, and the log says so), gives
    /// their tasks a moment (100 ms) to answer, then ends every session
    /// ([`end_sessions`](Self::end_sessions)), so that open event streams
    /// close and the server can finish the requests in flight. Calls still
    /// running go on to their end. Safe to call more than once.
    pub async fn drain(&self) {
        // Denied before the sessions end: ended first, the parked calls
        // would pass for their clients' withdrawals, and their clients
        // would get no answer.
        if self.approvals.deny_all_stopping().await > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        self.end_sessions();
    }

    /// Stops the gateway once serving has ended: [`drain`](Self::drain)
    /// (nothing more if it ran), then drops every upstream connection,
    /// kills the stdio upstreams' process groups, gives the calls that
    /// were still running a moment (200 ms) to record how they ended, and
    /// syncs every audit entry written ([`finish_log`](Self::finish_log)).
    /// What `mcp-hints gateway serve` does on `SIGTERM` or Ctrl-C; an
    /// application that serves the gateway does it before it exits, since
    /// a kill or a sync left to a task would not run once the runtime
    /// ends. Safe to call more than once.
    pub async fn shutdown(&self) {
        self.drain().await;
        self.close();
        self.stop_upstreams();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        self.finish_log().await;
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
    /// again from then on: the last thing
    /// before the program exits, since a kill left to a task would not run
    /// once the runtime ends.
    pub fn stop_upstreams(&self) {
        self.groups.stop_all();
    }

    /// A guard that does [`stop_upstreams`](Self::stop_upstreams) when it
    /// is dropped: a program holds it while it serves, so that every way
    /// out (a return, an error, a panic unwinding, a future dropped on a
    /// signal) stops the upstreams.
    pub fn upstream_stopper(&self) -> StopOnDrop {
        self.groups.stop_on_drop()
    }

    /// Appends a `decided` entry to the audit log and waits until it is on
    /// disk: the call it records goes on only then.
    ///
    /// # Errors
    ///
    /// [`Error::Log`] when it cannot be written or synced.
    pub(super) async fn record(&self, entry: &Entry) -> Result<(), Error> {
        Ok(self.log.record(entry, Durability::Synced).await?)
    }
}

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
//! An upstream that cannot be reached at start, or whose calls can no
//! longer be sent, is *unavailable*: its last known tools stay listed,
//! marked in `_meta` under [`UNAVAILABLE_META_KEY`], and a call gets a tool
//! error saying so; the other upstreams keep serving.
//!
//! # Retry budget
//!
//! The replay-safe client resends only replay-safe calls, and only while a
//! retry budget allows. The gateway gives each upstream a
//! [`PrincipalBudget`]: one tower `TpsBudget` per principal, so that one
//! client's lost responses cannot spend another's resends. The principal
//! of the call in progress reaches the budget through a task-local
//! ([`with_principal`]).

use std::collections::HashMap;
use std::error::Error as StdError;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use mcp_hints::client::{ReplaySafeClient, defaults as client_defaults};
use mcp_hints::policy::Trust;
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::NotificationContext;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt as _, BufReader};
use tokio::sync::mpsc;
use tower::retry::budget::{Budget, TpsBudget};

use super::config::{Assert, Config, UpstreamConfig, UpstreamTransport};
use super::defaults;
use super::policy::effective_hints;

/// The `_meta` key of a listed tool whose upstream is unavailable: the
/// reason, in words.
pub const UNAVAILABLE_META_KEY: &str = "mcp-hints/unavailable";

type BoxError = Box<dyn StdError + Send + Sync>;

/// The reason of every upstream once the gateway is stopping.
const STOPPING: &str = "the gateway is stopping";

tokio::task_local! {
    /// The principal of the call being forwarded, for [`PrincipalBudget`].
    static PRINCIPAL: Arc<str>;
}

/// Runs `call` with `principal` as the principal its resends are charged
/// to.
pub async fn with_principal<F: Future>(principal: &str, call: F) -> F::Output {
    PRINCIPAL.scope(Arc::from(principal), call).await
}

/// A retry budget per principal: each principal's calls deposit into, and
/// its resends withdraw from, a `TpsBudget` of its own (the replay-safe
/// client's defaults: a 10-second window, 1 resend a second, 20 % of the
/// calls). Calls made outside [`with_principal`] share one budget.
#[derive(Clone, Default)]
pub struct PrincipalBudget {
    budgets: Arc<Mutex<HashMap<Arc<str>, Arc<TpsBudget>>>>,
}

impl PrincipalBudget {
    fn current(&self) -> Arc<TpsBudget> {
        let principal = PRINCIPAL
            .try_with(Arc::clone)
            .unwrap_or_else(|_| Arc::from(""));
        // The principals are the config's clients and "local": the map
        // stays small.
        let mut budgets = self.budgets.lock().unwrap_or_else(PoisonError::into_inner);
        budgets
            .entry(principal)
            .or_insert_with(|| {
                Arc::new(TpsBudget::new(
                    client_defaults::BUDGET_WINDOW,
                    client_defaults::BUDGET_MIN_PER_SECOND,
                    client_defaults::BUDGET_RATIO,
                ))
            })
            .clone()
    }
}

impl Budget for PrincipalBudget {
    fn deposit(&self) {
        self.current().deposit();
    }

    fn withdraw(&self) -> bool {
        self.current().withdraw()
    }
}

/// One upstream: its config, its client while it is reachable, and its
/// last known tools.
pub struct Upstream {
    /// Its name, `[A-Za-z0-9-]{1,32}`.
    pub name: String,
    state: RwLock<State>,
    /// What connecting again needs, for an upstream never reached.
    config: UpstreamConfig,
    changed: mpsc::UnboundedSender<String>,
    secrets: Arc<Vec<String>>,
    asserts: Arc<Vec<Assert>>,
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
    /// The client, once the upstream was reached (even while it is marked
    /// unavailable: the replay-safe client starts a stdio upstream again
    /// before each call's first attempt, so a call may bring it back).
    ///
    /// # Errors
    ///
    /// Why it never was reached, or that the gateway is stopping.
    pub fn client(&self) -> Result<Arc<ReplaySafeClient>, String> {
        let state = self.state();
        state.client.ok_or_else(|| {
            state
                .unavailable
                .unwrap_or_else(|| "not connected".to_owned())
        })
    }

    /// Its tools as last listed (empty when it never answered).
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.state().tools
    }

    /// Why it is unavailable, if it is.
    pub fn unavailable(&self) -> Option<String> {
        self.state().unavailable
    }

    /// Marks it unavailable (its calls can no longer be sent); its tools
    /// stay listed, marked.
    pub fn mark_unavailable(&self, reason: String) {
        self.state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .unavailable = Some(reason);
    }

    /// Marks it serving again (a call reached it); true when it was marked
    /// unavailable.
    pub fn mark_available(&self) -> bool {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.client.is_some() && state.unavailable.take().is_some()
    }

    /// Tries once more to reach an upstream that never was (it would not
    /// start, or did not answer): true when it now serves, its tools
    /// listed. An upstream reached once is left to the replay-safe client,
    /// which starts it again itself.
    pub async fn reconnect(&self) -> bool {
        if self.state().client.is_some() {
            return false;
        }
        let connecting = connect(
            &self.config,
            self.changed.clone(),
            self.secrets.clone(),
            self.asserts.clone(),
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
                eprintln!("gateway: upstream `{}` is reachable now", self.name);
                true
            }
            Err(reason) => {
                let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
                if state.unavailable.as_deref() != Some(STOPPING) {
                    state.unavailable = Some(reason);
                }
                false
            }
        }
    }

    /// Whether [`close`](Self::close) was called.
    pub fn closed(&self) -> bool {
        self.state().unavailable.as_deref() == Some(STOPPING)
    }

    /// Drops its connection (the gateway is stopping): a stdio upstream's
    /// process group is stopped once no call holds the client.
    pub fn close(&self) {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.client = None;
        state.unavailable = Some(STOPPING.to_owned());
    }

    /// Lists its tools again (after `notifications/tools/list_changed`):
    /// the replay-safe client's list, so resends are decided on the new
    /// one, then the definitions to serve.
    ///
    /// # Errors
    ///
    /// Why the list could not be collected; the old list stays.
    pub async fn refresh(&self) -> Result<(), String> {
        let client = self.client()?;
        client
            .refresh_tools()
            .await
            .map_err(|error| error.to_string())?;
        let tools = definitions(&client).await?;
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        state.tools = Arc::new(tools);
        state.unavailable = None;
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
/// returned unavailable, with the reason, and said on stderr; the others
/// serve. `changed` receives an upstream's name each time it sends
/// `notifications/tools/list_changed`.
pub async fn connect_all(
    config: &Config,
    changed: mpsc::UnboundedSender<String>,
) -> Vec<Arc<Upstream>> {
    let secrets = secret_env_vars(config);
    let asserts = Arc::new(config.asserts.clone());
    let mut connecting = tokio::task::JoinSet::new();
    for (index, upstream) in config.upstreams.iter().enumerate() {
        let upstream = upstream.clone();
        let changed = changed.clone();
        let secrets = secrets.clone();
        let asserts = asserts.clone();
        connecting.spawn(async move {
            let connected = connect(&upstream, changed, secrets, asserts).await;
            (index, upstream.name, connected)
        });
    }
    let mut upstreams: Vec<Option<Arc<Upstream>>> = vec![None; config.upstreams.len()];
    while let Some(joined) = connecting.join_next().await {
        let Ok((index, name, connected)) = joined else {
            continue;
        };
        let state = match connected {
            Ok((client, tools)) => State {
                client: Some(Arc::new(client)),
                unavailable: None,
                tools: Arc::new(tools),
            },
            Err(reason) => {
                eprintln!(
                    "gateway: upstream `{name}` is unavailable: {}; the others keep serving",
                    crate::text::one_line(&reason)
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

/// Connects one upstream and lists its tools. Its resends are judged by
/// the hints clients are shown: the server's under the operator's
/// `asserts`.
async fn connect(
    upstream: &UpstreamConfig,
    changed: mpsc::UnboundedSender<String>,
    secrets: Arc<Vec<String>>,
    asserts: Arc<Vec<Assert>>,
) -> Result<(ReplaySafeClient, Vec<Tool>), String> {
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
        .call_timeout(upstream.call_timeout)
        .retry_budget(PrincipalBudget::default())
        .hints(move |tool| effective_hints(&asserts, &upstream_name, &tool.name, &tool.hints).0);
    let client = match &upstream.transport {
        UpstreamTransport::Command { program, args, env } => {
            let (program, args, env) = (program.clone(), args.clone(), env.clone());
            let name = upstream.name.clone();
            builder
                .connect(move || {
                    let spawned = spawn(&name, &program, &args, &env, &secrets);
                    let handler = handler.clone();
                    async move {
                        let transport = spawned?;
                        handler.serve(transport).await.map_err(BoxError::from)
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
                    .map_err(|error| format!("header `{name}`: {error}"))?;
                let value = http::HeaderValue::from_str(value).map_err(|_| {
                    format!("header `{name}`: the value is not a valid header value")
                })?;
                config.custom_headers.insert(header, value);
            }
            // reqwest is built without a default crypto provider (see
            // src/live/http.rs); an error means one is installed already.
            let _ = rustls::crypto::ring::default_provider().install_default();
            builder
                .connect(move || {
                    let transport = StreamableHttpClientTransport::from_config(config.clone());
                    handler.clone().serve(transport)
                })
                .await
        }
    }
    .map_err(|error| error.to_string())?;
    let tools = definitions(&client).await?;
    Ok((client, tools))
}

/// The tool definitions as served, every page: the replay-safe client
/// keeps hints and fingerprints, not descriptions and schemas.
async fn definitions(client: &ReplaySafeClient) -> Result<Vec<Tool>, String> {
    let peer = client.peer().await;
    let listing = tokio::time::timeout(client_defaults::CALL_TIMEOUT, peer.list_all_tools());
    match listing.await {
        Ok(Ok(tools)) => Ok(tools),
        Ok(Err(error)) => Err(format!("tools/list failed: {error}")),
        Err(_) => Err(format!(
            "tools/list did not answer within {:?}",
            client_defaults::CALL_TIMEOUT
        )),
    }
}

/// Starts a stdio upstream in its own process group, its stderr copied to
/// the gateway's stderr with the upstream's name in front.
fn spawn(
    name: &str,
    program: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    secrets: &[String],
) -> Result<TokioChildProcess, BoxError> {
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
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot start `{}`: {error}", program.escape_debug()))?;
    if let Some(stderr) = stderr {
        tokio::spawn(copy_stderr(name.to_owned(), stderr));
    }
    Ok(transport)
}

/// Copies `stderr` to the gateway's stderr a line at a time, as `NAME: LINE`,
/// each line escaped (a server cannot forge the gateway's own lines or
/// drive the terminal) and cut after [`defaults::STDERR_LINE_BYTES`].
async fn copy_stderr(name: String, stderr: impl AsyncRead + Unpin) {
    let name = crate::text::one_line(&name).into_owned();
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
        eprintln!(
            "{name}: {}{}",
            crate::text::one_line(text),
            if cut { " [cut]" } else { "" }
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

    /// Withdraws from `budget` as `principal` until it refuses, at most
    /// `bound` times: how many resends it allowed.
    async fn spend(budget: &PrincipalBudget, principal: &str, bound: usize) -> usize {
        with_principal(principal, async {
            (0..bound).take_while(|_| budget.withdraw()).count()
        })
        .await
    }

    #[tokio::test]
    async fn one_principals_resends_cannot_spend_anothers_budget() {
        let budget = PrincipalBudget::default();
        let alice = spend(&budget, "alice", 1_000).await;
        // TpsBudget's reserve: 1 resend a second over a 10-second window.
        assert!((1..1_000).contains(&alice), "alice got {alice}");
        assert_eq!(spend(&budget, "alice", 1_000).await, 0, "alice's is spent");
        assert_eq!(spend(&budget, "bob", 1_000).await, alice, "bob's is whole");
        // Calls deposit into their principal's budget only: 20 % of them.
        with_principal("alice", async {
            for _ in 0..50 {
                budget.deposit();
            }
        })
        .await;
        assert_eq!(spend(&budget, "alice", 1_000).await, 10);
        assert_eq!(spend(&budget, "bob", 1_000).await, 0);
    }
}

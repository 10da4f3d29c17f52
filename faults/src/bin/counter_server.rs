//! `counter-server`: the MCP server the replay tests drive through
//! `fault-proxy`. Its four tools declare every hint, its state is in
//! memory, and every run of a handler is written to `--executions FILE`,
//! so a test in another process counts how often each tool really ran.
//!
//! | tool | flags | arguments | does |
//! |---|---|---|---|
//! | `read` | `read_only` | | the number of entries appended |
//! | `set_value` | `destructive, idempotent` | `name`, `value` | sets `name` to `value` |
//! | `append` | `additive, non_idempotent` | `text` | appends an entry |
//! | `append_keyed` | `additive, idempotency_key = "request_id"` | `request_id`, `text` | appends an entry once per `request_id` |
//!
//! Every tool is in a closed world (the router's default).

use std::error::Error;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use clap::Parser;
use mcp_hints::idempotency::{
    Idempotency, IdempotentServer, MemoryStore, RedbStore, RedisStore, SystemClock, defaults,
};
use mcp_hints::{tool, tool_handler, tool_router};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What `counter-server --http` prints on stderr once it listens, before
/// the URL.
const ANNOUNCEMENT: &str = "counter-server: listening on ";

/// Serve the counting MCP server of the replay tests over stdio, or over
/// streamable HTTP.
#[derive(Parser)]
#[command(name = "counter-server", version)]
struct Args {
    /// Where `append_keyed` records its keys: `memory`, `redb:PATH` (a file
    /// that survives a restart) or `redis:URL` (shared by replicas)
    #[arg(long, value_name = "STORE", default_value = "memory")]
    store: StoreSpec,
    /// How long a keyed call in progress holds its key without renewing it
    /// (the idempotency lease), in milliseconds
    #[arg(long, value_name = "MS")]
    lease_ms: Option<u64>,
    /// Append `start TOOL` when a handler starts and `done TOOL` when it
    /// finishes to FILE, each line written through at once
    #[arg(long, value_name = "FILE")]
    executions: Option<PathBuf>,
    /// Every handler sleeps this long between its start and its work, so
    /// that a kill can land mid-call, in milliseconds
    #[arg(long, value_name = "MS", default_value_t = 0)]
    work_ms: u64,
    /// Serve MCP over streamable HTTP at http://ADDR/mcp instead of stdio
    /// (a loopback IP:PORT; port 0 picks one, and `counter-server: listening
    /// on http://IP:PORT/mcp` is printed on stderr)
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
}

/// `--store`.
#[derive(Clone, Debug)]
enum StoreSpec {
    Memory,
    Redb(PathBuf),
    Redis(String),
}

impl FromStr for StoreSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        match spec.split_once(':') {
            _ if spec == "memory" => Ok(StoreSpec::Memory),
            Some(("redb", path)) if !path.is_empty() => Ok(StoreSpec::Redb(path.into())),
            // The URL keeps its own scheme: `redis:redis://127.0.0.1:6379`.
            Some(("redis", url)) if !url.is_empty() => Ok(StoreSpec::Redis(url.to_owned())),
            _ => Err(format!(
                "`{spec}` is not a store: write `memory`, `redb:PATH` or `redis:URL`"
            )),
        }
    }
}

/// The server: one state shared by every request (over HTTP, of every
/// session).
#[derive(Clone)]
struct Counter {
    state: Arc<Mutex<State>>,
    executions: Option<Arc<Executions>>,
    work: Duration,
    idempotency: Idempotency,
}

#[derive(Default)]
struct State {
    entries: Vec<String>,
    values: std::collections::BTreeMap<String, String>,
}

/// The `--executions` file: one line per handler start and finish.
struct Executions(Mutex<File>);

impl Executions {
    fn write(&self, event: &str, tool: &str) {
        let line = format!("{event} {tool}\n");
        let mut file = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // One write of a whole line on an O_APPEND file, which has no
        // buffer: processes sharing the file never interleave, and the
        // line is there for a reader (or a SIGKILL) as soon as this returns.
        if let Err(error) = file.write_all(line.as_bytes()) {
            eprintln!("counter-server: cannot write the executions file: {error}");
        }
    }
}

impl IdempotentServer for Counter {
    fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }
}

#[derive(Serialize, JsonSchema)]
struct Entries {
    /// How many entries `append` and `append_keyed` have added.
    entries: usize,
}

#[derive(Deserialize, JsonSchema)]
struct SetValue {
    /// The name to set.
    name: String,
    /// Its new value.
    value: String,
}

#[derive(Deserialize, JsonSchema)]
struct Append {
    /// The entry's text.
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct AppendKeyed {
    /// Names this append: send the same one when you resend it.
    // Read by the idempotency layer, not by the handler.
    #[allow(dead_code)]
    request_id: String,
    /// The entry's text.
    text: String,
}

#[tool_router(closed_world)]
impl Counter {
    /// The number of entries appended.
    #[tool(read_only)]
    async fn read(&self) -> Json<Entries> {
        self.execute("read", |state| {
            Json(Entries {
                entries: state.entries.len(),
            })
        })
        .await
    }

    /// Set `name` to `value`; setting it again to the same value changes
    /// nothing.
    #[tool(destructive, idempotent)]
    async fn set_value(
        &self,
        Parameters(SetValue { name, value }): Parameters<SetValue>,
    ) -> String {
        self.execute("set_value", |state| {
            let answer = format!("{name} = {value}");
            state.values.insert(name, value);
            answer
        })
        .await
    }

    /// Append an entry; a resend appends it twice.
    #[tool(additive, non_idempotent)]
    async fn append(&self, Parameters(Append { text }): Parameters<Append>) -> String {
        self.execute("append", |state| push(state, text)).await
    }

    /// Append an entry once per `request_id`: a resend with the same
    /// `request_id` returns the first answer.
    #[tool(additive, idempotency_key = "request_id")]
    async fn append_keyed(
        &self,
        Parameters(AppendKeyed { text, .. }): Parameters<AppendKeyed>,
    ) -> String {
        self.execute("append_keyed", |state| push(state, text))
            .await
    }
}

#[tool_handler]
impl ServerHandler for Counter {}

/// Appends `text` and says which entry it became.
fn push(state: &mut State, text: String) -> String {
    state.entries.push(text.clone());
    format!("entry {}: {text}", state.entries.len())
}

impl Counter {
    /// Runs one handler: `start TOOL`, the `--work-ms` pause, `work` on the
    /// state, `done TOOL`. A handler stopped during the pause (killed, or
    /// its future dropped) changed nothing and wrote no `done`.
    async fn execute<T>(&self, tool: &str, work: impl FnOnce(&mut State) -> T) -> T {
        if let Some(executions) = &self.executions {
            executions.write("start", tool);
        }
        tokio::time::sleep(self.work).await;
        let answer = work(&mut self.state());
        if let Some(executions) = &self.executions {
            executions.write("done", tool);
        }
        answer
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Each change is one push or insert: a poisoned state is whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("counter-server: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(args));
    // A read of stdin cannot be cancelled: do not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("counter-server: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn Error>> {
    let executions = match &args.executions {
        Some(path) => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|error| Failed(format!("cannot open `{}`: {error}", path.display())))?;
            Some(Arc::new(Executions(Mutex::new(file))))
        }
        None => None,
    };
    let builder = Idempotency::builder()
        // Replicas and restarts compare leases written by other processes.
        .clock(SystemClock)
        .lease(args.lease_ms.map_or(defaults::LEASE, Duration::from_millis));
    let builder = match &args.store {
        StoreSpec::Memory => builder.store(MemoryStore::new()),
        StoreSpec::Redb(path) => builder.store(
            RedbStore::open(path)
                .map_err(|error| Failed(format!("cannot open `{}`: {error}", path.display())))?,
        ),
        StoreSpec::Redis(url) => builder.store(
            RedisStore::connect(url)
                .await
                .map_err(|error| Failed(format!("cannot connect to Redis: {error}")))?,
        ),
    };
    let counter = Counter {
        state: Arc::default(),
        executions,
        work: Duration::from_millis(args.work_ms),
        idempotency: builder.build(),
    };
    match args.http {
        Some(address) => serve_http(counter, address).await,
        None => {
            let service = counter.serve(rmcp::transport::stdio()).await?;
            service.waiting().await?;
            Ok(())
        }
    }
}

/// Serves MCP over streamable HTTP at `/mcp` on `address` until SIGINT or
/// SIGTERM.
async fn serve_http(counter: Counter, address: std::net::SocketAddr) -> Result<(), Box<dyn Error>> {
    let listener = listen(address).await?;
    let bound = axum::serve::Listener::local_addr(&listener)?;
    let config = StreamableHttpServerConfig::default();
    let sessions_end = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(counter.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    eprintln!("{ANNOUNCEMENT}http://{bound}/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            sessions_end.cancel();
        })
        .await?;
    Ok(())
}

/// Binds `address`, a loopback one; every connection it accepts has
/// `TCP_NODELAY` set: without it, Nagle's algorithm holds the last chunk of
/// an SSE answer on a kept-alive connection until the client's delayed ACK
/// (40 ms on Linux).
async fn listen(
    address: std::net::SocketAddr,
) -> Result<
    impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr>,
    Box<dyn Error>,
> {
    if !address.ip().is_loopback() {
        return Err(Failed(format!(
            "`{address}` is not a loopback address: counter-server is a test server"
        ))
        .into());
    }
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| Failed(format!("cannot listen on {address}: {error}")))?;
    Ok(axum::serve::ListenerExt::tap_io(
        listener,
        |stream: &mut tokio::net::TcpStream| {
            let _ = stream.set_nodelay(true);
        },
    ))
}

/// Resolves at SIGINT or SIGTERM (never, should neither handler install).
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

/// A start-up failure, said in words.
#[derive(Debug)]
struct Failed(String);

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Failed {}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    use super::listen;

    /// The option cannot be seen from the client's end, and the stall it
    /// prevents shows only as time, which a test must not measure: so this
    /// takes a connection from the listener `--http` serves on and reads it.
    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay() {
        let mut listener = listen(([127, 0, 0, 1], 0).into()).await.unwrap();
        let bound = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(bound).await.unwrap();
        let (accepted, peer) = listener.accept().await;
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(accepted.nodelay().unwrap(), "TCP_NODELAY is off");
    }
}

//! A notes server over stdio or streamable HTTP: real in-memory state and one
//! tool of each kind.
//!
//! | tool | flags | what a client may do after a timeout |
//! |---|---|---|
//! | `list_notes` | `read_only` | resend |
//! | `append_note` | `additive, non_idempotent` | read back first: a resend adds the note twice |
//! | `add_note` | `additive, idempotency_key = "request_id"` | resend with the same `request_id`: the server adds the note once |
//! | `update_note` | `destructive, idempotent` | resend: the same text again changes nothing |
//! | `delete_note` | `destructive, idempotent` | resend: deleting twice has no further effect |
//! | `forecast` | `read_only, open_world` | resend |
//!
//! Every tool is in a closed world (the router's default) except `forecast`,
//! which asks a weather service (simulated here, so the example needs no
//! network). With `--features lint-demo` the server also has `touch`, which
//! declares nothing and draws the `undeclared_hints` warning at build time.
//!
//! Run: `cargo run -p mcp-hints-examples --bin notes -- [--page-size N] [--http ADDR]`.
//! Without `--http` it speaks MCP on stdin/stdout until stdin closes. With
//! `--http 127.0.0.1:8080` it serves MCP over streamable HTTP at
//! `http://127.0.0.1:8080/mcp` (port 0 picks a free port) and prints, on
//! stderr, `notes: serving MCP over streamable HTTP at http://ADDR/mcp` with
//! the bound address; every HTTP session shares one notebook. `ADDR` must be
//! a loopback address (`127.0.0.1`, `[::1]`, `localhost`) unless `--public`
//! is given; requests with an `Origin` other than the server's own
//! (`http://127.0.0.1:PORT`, `http://localhost:PORT`, ...) or one given with
//! `--allow-origin` are refused with 403, and `--allow-host NAME` adds a
//! `Host` the server answers to (loopback names and the bound address are
//! always accepted).
//!
//! Both transports run behind `mcp_hints::wire`: a malformed message gets
//! the JSON-RPC error the specification names (over HTTP, status 400), a
//! malformed notification gets none, and over stdio a request id already in
//! flight is refused.
//!
//! `--page-size N` serves `tools/list` N tools per page (0, the default: one
//! page).
//! `--store` says where `add_note` keeps its idempotency records: `memory`
//! (the default), `redb:PATH` (a file that survives a restart) or a
//! `redis://` URL (shared by several replicas). Ctrl-C or SIGTERM stops
//! either.

use std::collections::BTreeMap;
use std::error::Error;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::serve::{Listener, ListenerExt};
use clap::Parser;
use mcp_hints::idempotency::{Idempotency, IdempotentServer, RedbStore, RedisStore};
use mcp_hints::wire::HttpGuard;
use mcp_hints::{tool, tool_handler, tool_router};
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};

/// The server: a notebook shared by every request of the session (over
/// HTTP, of every session).
#[derive(Clone, Default)]
pub struct Notes {
    book: Arc<Mutex<Book>>,
    /// Tools per `tools/list` page; 0 is one page of everything.
    page_size: usize,
    /// Where `add_note` records what each `request_id` did.
    idempotency: Idempotency,
}

impl IdempotentServer for Notes {
    fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }
}

#[derive(Default)]
struct Book {
    next_id: u64,
    notes: BTreeMap<u64, Note>,
}

/// A note as the tools return it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Note {
    /// Assigned by the server, from 1, never reused.
    pub id: u64,
    /// What the note says.
    pub text: String,
}

/// Every note, as `list_notes` returns them.
#[derive(Serialize, JsonSchema)]
pub struct NoteList {
    /// Every note, oldest first.
    pub notes: Vec<Note>,
}

/// The arguments of `append_note`.
#[derive(Deserialize, JsonSchema)]
pub struct NewNote {
    /// The text of the note; not empty.
    pub text: String,
}

/// The arguments of `add_note`, the keyed addition.
#[derive(Deserialize, JsonSchema)]
pub struct KeyedNote {
    /// Names this addition: any string of 1 to 255 characters, new for
    /// each note, and the same when resending it after a timeout.
    pub request_id: String,
    /// The text of the note; not empty.
    pub text: String,
}

/// The arguments of `update_note`.
#[derive(Deserialize, JsonSchema)]
pub struct NoteEdit {
    /// The note to change.
    pub id: u64,
    /// Its new text; not empty.
    pub text: String,
}

/// The arguments of `delete_note`.
#[derive(Deserialize, JsonSchema)]
pub struct NoteId {
    /// The note to delete.
    pub id: u64,
}

/// The arguments of `forecast`.
#[derive(Deserialize, JsonSchema)]
pub struct City {
    /// A city name, e.g. "Lisbon".
    pub city: String,
}

/// The weather `forecast` returns for a city.
#[derive(Serialize, JsonSchema)]
pub struct Forecast {
    /// The city asked for.
    pub city: String,
    /// The weather in a few words.
    pub summary: String,
    /// The day's highest temperature, in degrees Celsius.
    pub high_celsius: i32,
    /// The day's lowest temperature, in degrees Celsius.
    pub low_celsius: i32,
}

#[tool_router(closed_world)]
impl Notes {
    /// List every note, oldest first.
    #[tool(read_only, title = "List notes")]
    async fn list_notes(&self) -> Json<NoteList> {
        let notes = self.book().notes.values().cloned().collect();
        Json(NoteList { notes })
    }

    /// Add a note; a resend would add it twice.
    #[tool(additive, non_idempotent, title = "Append a note")]
    async fn append_note(
        &self,
        Parameters(NewNote { text }): Parameters<NewNote>,
    ) -> Result<Json<Note>, String> {
        let text = non_empty("text", text)?;
        let mut book = self.book();
        book.next_id += 1;
        let note = Note {
            id: book.next_id,
            text,
        };
        book.notes.insert(note.id, note.clone());
        Ok(Json(note))
    }

    /// Add a note once per `request_id`: a resend with the same
    /// `request_id` returns the note added the first time.
    #[tool(additive, idempotency_key = "request_id", title = "Add a note once")]
    async fn add_note(
        &self,
        Parameters(KeyedNote { text, .. }): Parameters<KeyedNote>,
    ) -> Result<Json<Note>, String> {
        self.append_note(Parameters(NewNote { text })).await
    }

    /// Replace the text of a note; repeating it leaves the same text.
    #[tool(destructive, idempotent, title = "Update a note")]
    async fn update_note(
        &self,
        Parameters(NoteEdit { id, text }): Parameters<NoteEdit>,
    ) -> Result<Json<Note>, String> {
        let text = non_empty("text", text)?;
        let mut book = self.book();
        let note = book
            .notes
            .get_mut(&id)
            .ok_or_else(|| format!("no note has id {id}"))?;
        note.text = text;
        Ok(Json(note.clone()))
    }

    /// Delete a note by id; deleting twice has no further effect.
    #[tool(destructive, idempotent, title = "Delete a note")]
    async fn delete_note(&self, Parameters(NoteId { id }): Parameters<NoteId>) -> String {
        match self.book().notes.remove(&id) {
            Some(_) => format!("deleted note {id}"),
            None => format!("note {id} is already absent"),
        }
    }

    /// The weather forecast for a city, from a weather service on the open
    /// internet (simulated here: the answer is derived from the name).
    #[tool(read_only, open_world, title = "Weather forecast")]
    async fn forecast(
        &self,
        Parameters(City { city }): Parameters<City>,
    ) -> Result<Json<Forecast>, String> {
        let city = non_empty("city", city)?;
        let seed: u32 = city.bytes().map(u32::from).sum();
        let summaries = ["sunny", "cloudy", "rain", "windy"];
        let low = (seed % 15) as i32;
        Ok(Json(Forecast {
            summary: summaries[(seed % 4) as usize].to_owned(),
            high_celsius: low + 8,
            low_celsius: low,
            city,
        }))
    }

    /// Mark the notebook as touched.
    #[cfg(feature = "lint-demo")]
    #[tool]
    async fn touch(&self) -> String {
        "touched".to_owned()
    }
}

#[tool_handler(page_size = self.page_size)]
impl ServerHandler for Notes {}

impl Notes {
    fn book(&self) -> MutexGuard<'_, Book> {
        // A handler that panicked mid-update cannot leave a note half
        // written (each update is one insert or assignment), so the data
        // behind a poisoned lock is still whole.
        self.book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `value` when it has more than white space; else a tool error naming
/// `field`.
fn non_empty(field: &str, value: String) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err(format!("`{field}` must not be empty"));
    }
    Ok(value)
}

/// Serve the notes MCP server over stdio, or over streamable HTTP.
#[derive(Parser)]
#[command(name = "notes")]
struct Args {
    /// Tools per `tools/list` page; 0 lists every tool on one page.
    #[arg(long, default_value_t = 0, value_name = "N")]
    page_size: usize,
    /// Where `add_note` keeps its idempotency records: `memory`,
    /// `redb:PATH` (survives a restart) or a `redis://` URL (shared by
    /// replicas).
    #[arg(long, default_value = "memory", value_name = "STORE")]
    store: String,
    /// Serve MCP over streamable HTTP at http://ADDR/mcp instead of stdio,
    /// e.g. 127.0.0.1:8080 (port 0 picks a free port; the address is printed
    /// on stderr). ADDR must be a loopback address unless --public is given.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    /// Let --http listen on an address that is not loopback (reachable from
    /// other machines: put authentication in front of it).
    #[arg(long, requires = "http")]
    public: bool,
    /// Also serve requests from this browser origin, e.g.
    /// `https://app.example.com` (repeatable); other Origins get 403.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// Also answer requests whose Host is this name or name:port
    /// (repeatable); loopback names and the bound address always are.
    #[arg(long, value_name = "HOST", requires = "http")]
    allow_host: Vec<String>,
    /// Run on Tokio's multi-thread runtime over stdio too (over HTTP it
    /// always does). Over stdio the default is the current-thread runtime:
    /// one session gains nothing from a second thread but the wake-ups.
    #[arg(long, conflicts_with = "http")]
    multi_thread: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Over stdio one thread serves best (see `mcp_hints::stdio`); HTTP
    // serves many sessions at once.
    let runtime = if args.http.is_some() || args.multi_thread {
        tokio::runtime::Runtime::new()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("notes: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        let notes = Notes {
            page_size: args.page_size,
            idempotency: idempotency(&args.store).await?,
            ..Notes::default()
        };
        match &args.http {
            Some(address) => serve_http(notes, address, &args).await,
            None => serve_stdio(notes).await,
        }
    });
    // A read of a terminal's stdin cannot be cancelled: after a signal, do
    // not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("notes: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The idempotency layer over the store `--store` names.
async fn idempotency(store: &str) -> Result<Idempotency, Box<dyn Error>> {
    let builder = Idempotency::builder();
    let builder = if store == "memory" {
        builder
    } else if let Some(path) = store.strip_prefix("redb:") {
        let redb = RedbStore::open(path)
            .map_err(|error| format!("--store {:?}: {error}", redacted(store)))?;
        builder.store(redb)
    } else if store.starts_with("redis://") || store.starts_with("rediss://") {
        let redis = RedisStore::connect(store)
            .await
            .map_err(|error| format!("--store {:?}: {error}", redacted(store)))?;
        builder.store(redis)
    } else {
        return Err(format!(
            "--store takes `memory`, `redb:PATH` or a `redis://` URL, not {:?}",
            redacted(store)
        )
        .into());
    };
    Ok(builder.build())
}

/// `store` with the password of a URL's user info hidden, for messages.
fn redacted(store: &str) -> String {
    let Some((scheme, rest)) = store.split_once("://") else {
        return store.to_owned();
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}/{path}")
        }
        None => store.to_owned(),
    }
}

/// Serves one session on stdin/stdout until the client closes it or a
/// signal comes, every message checked by the wire guard first; pipes are
/// read and written without Tokio's blocking pool (`mcp_hints::stdio`).
async fn serve_stdio(notes: Notes) -> Result<(), Box<dyn Error>> {
    let signal = shutdown_signal();
    tokio::pin!(signal);
    let transport = mcp_hints::stdio::guarded();
    let service = tokio::select! {
        service = notes.serve(transport) => service?,
        () = &mut signal => return Ok(()),
    };
    let stop = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        quit = &mut waiting => {
            quit?;
            return Ok(());
        }
        () = &mut signal => stop.cancel(),
    }
    waiting.await?;
    Ok(())
}

/// Serves MCP over streamable HTTP at `/mcp` on `address`, behind the HTTP
/// guard, until a signal comes; then ends every session and lets requests
/// in flight finish.
async fn serve_http(notes: Notes, address: &str, args: &Args) -> Result<(), Box<dyn Error>> {
    let listener = listen(address, args.public).await?;
    let bound = listener.local_addr()?;
    let mut guard = HttpGuard::for_address(bound);
    for origin in &args.allow_origin {
        guard = guard
            .allow_origin(origin)
            .map_err(|error| format!("--allow-origin: {error}"))?;
    }
    let mut config = StreamableHttpServerConfig::default();
    // rmcp checks `Host` (DNS rebinding); it accepts loopback names by
    // default, and here also the bound address and each --allow-host.
    if !bound.ip().is_loopback() && !bound.ip().is_unspecified() {
        config.allowed_hosts.push(bound.ip().to_string());
    }
    config.allowed_hosts.extend(args.allow_host.iter().cloned());
    config.max_request_body_bytes = mcp_hints::wire::DEFAULT_MAX_BODY_BYTES;
    // A stateless answer goes back as one JSON body (one write, one wake-up
    // of the client) rather than an event stream of three writes.
    config.json_response = true;
    let sessions_end = config.cancellation_token.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let guard = guard.sessions(sessions.clone());
    let service = StreamableHttpService::new(move || Ok(notes.clone()), sessions, config);
    let app = axum::Router::new().nest_service("/mcp", guard.service(service));
    eprintln!("notes: serving MCP over streamable HTTP at http://{bound}/mcp");
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            sessions_end.cancel();
        })
        .await?;
    Ok(())
}

/// Binds `address` (`HOST:PORT`), refusing one that is not loopback unless
/// `public`; every connection it accepts has `TCP_NODELAY` set.
///
/// Why `TCP_NODELAY`: rmcp answers a request with an SSE stream, which
/// hyper writes as chunks, the last one (`0\r\n\r\n`) often in a write of
/// its own. On a kept-alive connection Nagle's algorithm holds that small
/// write until the client acknowledges the previous one, and clients delay
/// their acknowledgements (40 ms on Linux): every request after the first
/// would wait for it.
async fn listen(
    address: &str,
    public: bool,
) -> Result<impl Listener<Io = TcpStream, Addr = SocketAddr>, Box<dyn Error>> {
    let cannot_listen = |error: std::io::Error| format!("cannot listen on {address}: {error}");
    let addresses: Vec<_> = tokio::net::lookup_host(address)
        .await
        .map_err(cannot_listen)?
        .collect();
    // The transport spec: "When running locally, servers SHOULD bind only to
    // localhost". A wider address is a choice the operator makes.
    if !public && addresses.iter().any(|address| !address.ip().is_loopback()) {
        return Err(format!(
            "--http {address} is not a loopback address; pass --public to listen beyond this machine"
        )
        .into());
    }
    let listener = TcpListener::bind(&addresses[..])
        .await
        .map_err(cannot_listen)?;
    Ok(listener.tap_io(|stream: &mut TcpStream| {
        // A socket that refuses the option still serves, only slower.
        if let Err(error) = stream.set_nodelay(true) {
            eprintln!("notes: cannot set TCP_NODELAY on a connection: {error}");
        }
    }))
}

/// Resolves at Ctrl-C (SIGINT) or, on Unix, SIGTERM. Should a handler fail
/// to install, that signal is not awaited (the process keeps its default
/// reaction to it).
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use mcp_hints::Hint;
    use mcp_hints::testing::Verifier;

    use axum::serve::Listener;

    use super::{Notes, listen, redacted};

    #[tokio::test]
    async fn every_declared_hint_holds() {
        let report = Verifier::new(|| {
            let notes = Notes::default();
            let book = notes.book.clone();
            // What `list_notes` shows: the notes, not the id counter.
            let snapshot = move || {
                let book = book.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                serde_json::to_value(book.notes.values().collect::<Vec<_>>())
                    .expect("notes serialize")
            };
            (notes, snapshot)
        })
        .assert_hints_hold()
        .await;
        let mut checked: Vec<(&str, Hint)> = report
            .checked
            .iter()
            .map(|checked| (checked.tool.as_str(), checked.hint))
            .collect();
        checked.sort();
        // Every promise each tool makes, checked on calls that succeeded.
        assert_eq!(
            checked,
            [
                ("add_note", Hint::Destructive),
                ("add_note", Hint::Idempotent),
                ("append_note", Hint::Destructive),
                ("delete_note", Hint::Idempotent),
                ("forecast", Hint::ReadOnly),
                ("list_notes", Hint::ReadOnly),
                ("update_note", Hint::Idempotent),
            ],
            "unchecked: {:#?}",
            report.unchecked
        );
    }

    /// The option cannot be seen from the client's end of a connection,
    /// and a delayed-ACK stall shows only as time, which a test must not
    /// measure: so this takes the connection from the listener `--http`
    /// serves on, as `axum::serve` does, and reads the option itself.
    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay() {
        let mut listener = listen("127.0.0.1:0", false).await.unwrap();
        let bound = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(bound).await.unwrap();
        let (accepted, peer) = listener.accept().await;
        assert_eq!(peer, client.local_addr().unwrap());
        assert!(accepted.nodelay().unwrap(), "TCP_NODELAY is off");
    }

    #[tokio::test]
    async fn a_wider_address_needs_public() {
        let refused = listen("0.0.0.0:0", false).await.err().unwrap();
        assert_eq!(
            refused.to_string(),
            "--http 0.0.0.0:0 is not a loopback address; pass --public to listen beyond this \
             machine"
        );
    }

    #[test]
    fn store_urls_are_shown_without_their_password() {
        assert_eq!(
            redacted("redis://user:s3cret@127.0.0.1:6379/0"),
            "redis://user:***@127.0.0.1:6379/0"
        );
        assert_eq!(redacted("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redacted("redb:/tmp/keys.redb"), "redb:/tmp/keys.redb");
    }
}

//! A minimal MCP client for stdio and streamable HTTP servers.
//!
//! `mcp-hints audit`, `lint` and `pin` must see the *raw* JSON of each
//! `tools/list` result (non-boolean hints, `"annotations": null`, duplicate
//! names are exactly what they report), and must say precisely how a server
//! misbehaved. So this is a small JSON-RPC 2.0 client of its own rather than a
//! typed SDK client:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use mcp_hints::collect::{CollectOptions, Collector};
//! use mcp_hints_cli::live::{LiveOptions, LiveTarget, Session};
//!
//! let target = LiveTarget::Command { program: "my-server".into(), args: vec![] };
//! // Negotiates: 2026-07-28 if the server speaks it, else `initialize`.
//! let mut session = Session::connect(&target, &LiveOptions::default()).await?;
//! println!("{} ({})", session.protocol_version(), session.negotiation().why);
//! let mut collector = Collector::new(CollectOptions::default());
//! let mut cursor: Option<String> = None;
//! loop {
//!     // The `result` object's JSON text, as the server sent it.
//!     let page = session.list_tools_page(cursor.as_deref()).await?;
//!     match collector.push_page_json(page.get())? {
//!         Some(next) => cursor = Some(next.to_owned()),
//!         None => break,
//!     }
//! }
//! session.close().await;
//! let list = collector.finish()?;
//! println!("{} tools", list.tools.len());
//! # Ok(()) }
//! ```
//!
//! Revisions: 2026-07-28 (`server/discover`, then stateless requests that
//! each carry `_meta`) and the `initialize` revisions 2025-11-25 back to
//! 2024-11-05; see [`ProtocolVersion`] and, for how one is chosen,
//! [`Session::connect`].
//!
//! Transports: **stdio** (the server is a child process in its own process
//! group; newline-delimited JSON-RPC on its stdin/stdout; its stderr is kept,
//! last 20 lines, for error messages) and **streamable HTTP** (MCP 2025-03-26
//! and later: every message is POSTed; a request is answered with one
//! `application/json` message or a `text/event-stream`). Under the
//! `initialize` revisions, requests the server sends meanwhile are answered:
//! `ping` with `{}`, anything else with JSON-RPC error -32601 (method not
//! found); under 2026-07-28, where servers send none and clients answer
//! none, they are ignored. Notifications are ignored.
//!
//! Bounds: each request, from its first byte sent to the last byte of its
//! answer, gets [`LiveOptions::timeout`]; each message (a stdout line, an
//! HTTP body, an SSE event) gets [`LiveOptions::max_response_bytes`].

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};

mod error;
// The causes of an error, for messages outside this module too.
pub(crate) use error::chain as error_chain;
mod http;
mod jsonrpc;
mod lifecycle;
mod sse;
mod stdio;

pub(crate) use error::quoted;
pub use error::{LiveError, LiveErrorKind};
pub use lifecycle::{Lifecycle, Negotiation, PROBE_TIMEOUT, ProtocolVersion};
pub use stdio::Ended;

use http::HttpTransport;
use stdio::StdioTransport;

/// [`LiveOptions::timeout`]'s default: 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// [`LiveOptions::max_response_bytes`]'s default: 64 MiB, some hundred
/// times the largest `tools/list` page seen in the wild.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// How a [`Session`] talks to its server.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// How long each request may take, from the first byte sent to the last
    /// byte of its answer (`server/discover`, `initialize`,
    /// `notifications/initialized`, each `tools/list` page); also the HTTP
    /// connect timeout. Default: [`DEFAULT_TIMEOUT`]. Past it:
    /// [`LiveErrorKind::Timeout`]. The stdio `server/discover` probe waits
    /// [`PROBE_TIMEOUT`] at most.
    pub timeout: Duration,
    /// The client capabilities declared in `initialize`, or in every
    /// request's `_meta` under 2026-07-28 (a JSON object). Default: `{}`.
    /// Whatever is declared here, the server's requests other than `ping`
    /// are answered with method not found.
    pub capabilities: Value,
    /// The revision to speak, and no other: a server that refuses it fails
    /// with [`LiveErrorKind::ProtocolRefused`]. Default: `None`, negotiate
    /// (2026-07-28 if the server speaks it, else `initialize`; see
    /// [`Session::connect`]).
    pub protocol_version: Option<ProtocolVersion>,
    /// Extra HTTP headers sent with every HTTP request, e.g.
    /// `("Authorization", "Bearer …")`. Ignored for stdio servers. An invalid
    /// name or value: [`LiveErrorKind::InvalidHeader`] from [`Session::connect`].
    pub headers: Vec<(String, String)>,
    /// The most bytes one message from the server may have: a stdout line,
    /// an HTTP response body, an SSE event or line. Past it:
    /// [`LiveErrorKind::ResponseTooLarge`], with no more than about this
    /// much read. Default: [`DEFAULT_MAX_RESPONSE_BYTES`].
    pub max_response_bytes: usize,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            timeout: DEFAULT_TIMEOUT,
            capabilities: json!({}),
            protocol_version: None,
            headers: Vec::new(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// Which server to talk to.
///
/// Its [`Display`](fmt::Display) names it in error messages:
/// ``MCP server `python3 server.py` `` or `MCP server at http://…`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LiveTarget {
    /// A stdio server: `program` (looked up on `PATH` unless it contains a
    /// `/`) started with `args`, in its own process group.
    Command {
        /// The executable.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
    },
    /// A streamable HTTP server: the MCP endpoint's absolute `http://` or
    /// `https://` URL.
    Url(String),
}

impl fmt::Display for LiveTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiveTarget::Command { program, args } => {
                let mut line = quote_word(program);
                for arg in args {
                    line.push(' ');
                    line.push_str(&quote_word(arg));
                }
                write!(f, "MCP server `{}`", crate::text::cut(&line))
            }
            LiveTarget::Url(url) => write!(f, "MCP server at {}", redacted(url)),
        }
    }
}

/// `url` without the secrets URLs carry: a password, and the query (tokens
/// often ride there), so that reports and errors can be shared.
fn redacted(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return url.to_owned();
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some("***"));
    }
    if parsed.query().is_some() {
        parsed.set_query(Some("***"));
    }
    parsed.to_string()
}

fn quote_word(word: &OsString) -> String {
    let word = word.to_string_lossy();
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c))
    {
        word.into_owned()
    } else {
        // One line, whatever the argument holds (a `python3 -c` script).
        format!("'{}'", crate::text::one_line(&word.replace('\'', r"'\''")))
    }
}

/// What an error is about: which server, which request.
pub(crate) struct Ctx<'a> {
    pub(crate) target: &'a str,
    pub(crate) request: &'a str,
}

enum Transport {
    Stdio(StdioTransport),
    Http(HttpTransport),
}

/// A `tools/list` response from [`Session::list_tools_page_with`].
#[derive(Debug)]
pub enum Page<T> {
    /// What the caller's parser made of it.
    Accepted(T),
    /// The raw `result` object, for a response the parser declined.
    Raw(Box<RawValue>),
}

/// An open MCP session with one server.
///
/// Requests are sent one at a time with increasing integer ids (the opening
/// request is 1). Dropping a session kills a stdio server's process group at
/// once; [`Session::close`] first gives it a moment to exit by itself. After
/// an error the session may be unusable (a server that died stays dead, a
/// timed-out request may still be answered later, which is then ignored);
/// close it.
pub struct Session {
    transport: Transport,
    /// How to start a stdio server again (after it exited on the probe).
    live_target: LiveTarget,
    target: String,
    timeout: Duration,
    max_response_bytes: usize,
    capabilities: Value,
    next_id: u64,
    /// The `initialize` or `server/discover` result.
    opening: Value,
    negotiation: Negotiation,
    /// 2026-07-28: the `_meta` every request carries.
    meta: Option<Value>,
}

impl Session {
    /// Start or reach the server and open a session.
    ///
    /// With [`LiveOptions::protocol_version`] set, that revision and no
    /// other: 2026-07-28 sends `server/discover` (whose
    /// `supportedVersions` must list it), the others send `initialize`
    /// (whose answer must name it) and `notifications/initialized`; a
    /// server that refuses is [`LiveErrorKind::ProtocolRefused`], with its
    /// answer quoted.
    ///
    /// Without it, negotiate: `server/discover` at 2026-07-28 first, and
    /// `initialize` at 2025-11-25 (accepting the revision the server
    /// answers with when this client speaks it, else
    /// [`LiveErrorKind::UnknownRevision`]; a refusal whose `data.supported`
    /// lists another this client speaks is asked once more, at the newest
    /// of them) for a server that predates 2026-07-28. A server is
    /// taken for one that predates it when it answers `server/discover`
    /// with a JSON-RPC error other than -32020, -32021 and -32022, with an
    /// HTTP 4xx other than 401 and 403 without an MCP error, or, over
    /// stdio, when it answers nothing within [`PROBE_TIMEOUT`] or exits (it
    /// is then started again). -32022 (unsupported protocol version), or a
    /// result that does not list 2026-07-28, selects the newest revision in
    /// the server's list that this client speaks, and fails with
    /// [`LiveErrorKind::ProtocolRefused`] when there is none.
    /// [`Session::negotiation`] says what was chosen and why.
    ///
    /// `clientInfo` is `mcp-hints` and the crate's version; the declared
    /// capabilities are [`LiveOptions::capabilities`].
    ///
    /// Errors: [`LiveErrorKind::CommandNotFound`] / [`LiveErrorKind::Spawn`] (stdio),
    /// [`LiveErrorKind::InvalidUrl`] / [`LiveErrorKind::InvalidHeader`] /
    /// [`LiveErrorKind::Connect`] (HTTP), [`LiveErrorKind::ProtocolRefused`],
    /// [`LiveErrorKind::InvalidResponse`] when an `initialize` result has no
    /// string `protocolVersion`, a `server/discover` result no
    /// `supportedVersions` array of strings, or a refusal a `data.supported`
    /// array of other than strings, and any error of
    /// [`Session::request`]. On error a stdio server is killed.
    pub async fn connect(target: &LiveTarget, options: &LiveOptions) -> Result<Session, LiveError> {
        let mut session = Session {
            transport: Session::start(target, options)?,
            live_target: target.clone(),
            target: target.to_string(),
            timeout: options.timeout,
            max_response_bytes: options.max_response_bytes,
            capabilities: options.capabilities.clone(),
            next_id: 1,
            opening: Value::Null,
            negotiation: Negotiation {
                version: String::new(),
                lifecycle: Lifecycle::Initialize,
                forced: false,
                why: String::new(),
                server_versions: Vec::new(),
            },
            meta: None,
        };
        session.open(options.protocol_version).await?;
        Ok(session)
    }

    fn start(target: &LiveTarget, options: &LiveOptions) -> Result<Transport, LiveError> {
        Ok(match target {
            LiveTarget::Command { program, args } => Transport::Stdio(StdioTransport::spawn(
                program,
                args,
                options.max_response_bytes,
            )?),
            LiveTarget::Url(url) => Transport::Http(HttpTransport::new(url, options)?),
        })
    }

    /// Starts a stdio server again, killing what is left of the first.
    fn restart(&mut self) -> Result<(), LiveError> {
        if let LiveTarget::Command { program, args } = &self.live_target {
            self.transport = Transport::Stdio(StdioTransport::spawn(
                program,
                args,
                self.max_response_bytes,
            )?);
        }
        Ok(())
    }

    /// The raw result of the request that opened the session:
    /// `initialize`'s (`protocolVersion`, `capabilities`, `serverInfo`,
    /// `instructions`, …) or `server/discover`'s (`supportedVersions`,
    /// `capabilities`, `_meta`, `ttlMs`, `cacheScope`, …), as sent.
    pub fn opening_result(&self) -> &Value {
        &self.opening
    }

    /// The server's `Implementation` (`name`, `version`, …) as it gave it:
    /// `initialize`'s `serverInfo`, or the `server/discover` result's
    /// `_meta["io.modelcontextprotocol/serverInfo"]` (or a `serverInfo`
    /// member, which some drafts had). `None` when it gave none.
    pub fn server_info(&self) -> Option<&Value> {
        let opening = &self.opening;
        match self.negotiation.lifecycle {
            Lifecycle::Initialize => opening.get("serverInfo"),
            Lifecycle::Discover => opening
                .get("_meta")
                .and_then(|meta| meta.get("io.modelcontextprotocol/serverInfo"))
                .or_else(|| opening.get("serverInfo")),
        }
    }

    /// The revision the session speaks (which, when negotiated with
    /// `initialize`, the server may have chosen).
    pub fn protocol_version(&self) -> &str {
        &self.negotiation.version
    }

    /// The revision, how the session opened, and why.
    pub fn negotiation(&self) -> &Negotiation {
        &self.negotiation
    }

    /// The target as error messages name it (see [`LiveTarget`]'s `Display`).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The last lines (at most 20, oldest first) the stdio server has written
    /// to stderr so far; empty for HTTP.
    pub fn stderr_tail(&self) -> Vec<String> {
        match &self.transport {
            Transport::Stdio(stdio) => stdio.stderr_tail(),
            Transport::Http(_) => Vec::new(),
        }
    }

    /// `params` with the session's `_meta` (2026-07-28): added to an
    /// object's `_meta` (the caller's other keys kept), or as the only
    /// member when there are no params. Unchanged otherwise.
    fn params(&self, params: Option<Value>) -> Option<Value> {
        let Some(Value::Object(meta)) = &self.meta else {
            return params;
        };
        match params {
            None => Some(json!({ "_meta": meta })),
            Some(Value::Object(mut object)) => {
                match object.get_mut("_meta") {
                    Some(Value::Object(theirs)) => {
                        for (key, value) in meta {
                            theirs.insert(key.clone(), value.clone());
                        }
                    }
                    _ => {
                        object.insert("_meta".to_owned(), Value::Object(meta.clone()));
                    }
                }
                Some(Value::Object(object))
            }
            other => other,
        }
    }

    /// One `tools/list` request: `params.cursor` is `cursor`, and with `None`
    /// the request has no params (but `_meta` under 2026-07-28). Returns the
    /// `result` object's JSON text as the server sent it (`tools`,
    /// `nextCursor`, `ttlMs`, … untouched, unchecked; see
    /// `mcp_hints::collect::Collector::push_page_json`). Errors: as
    /// [`Session::request`].
    pub async fn list_tools_page(
        &mut self,
        cursor: Option<&str>,
    ) -> Result<Box<RawValue>, LiveError> {
        let params = cursor.map(|cursor| json!({ "cursor": cursor }));
        self.request_raw("tools/list", params).await
    }

    /// Send request `method` with `params` (omitted when `None`; under
    /// 2026-07-28 the session's `_meta` is added) and return the `result`,
    /// which is always a JSON object. Errors: as [`Session::request_raw`].
    pub async fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, LiveError> {
        let raw = self.request_raw(method, params).await?;
        serde_json::from_str(raw.get()).map_err(|error| self.invalid(method, error))
    }

    fn invalid(&self, method: &str, error: impl fmt::Display) -> LiveError {
        LiveErrorKind::InvalidResponse {
            target: self.target.clone(),
            request: method.to_owned(),
            reason: error.to_string(),
            stderr_tail: self.stderr_tail(),
        }
        .into()
    }

    /// Send request `method` with `params` (omitted when `None`; under
    /// 2026-07-28 the session's `_meta` is added) and return the `result`'s
    /// JSON text, which is always a JSON object.
    ///
    /// Errors: [`LiveErrorKind::Timeout`] past [`LiveOptions::timeout`];
    /// [`LiveErrorKind::Rpc`] for an error response (over HTTP, also one in
    /// the body of a non-2xx answer); [`LiveErrorKind::InvalidResponse`]
    /// for a response with neither `result` nor `error` or a non-object
    /// result; [`LiveErrorKind::NotJson`] / [`LiveErrorKind::NotJsonRpc`] for a
    /// message that does not parse; [`LiveErrorKind::ResponseTooLarge`] past
    /// [`LiveOptions::max_response_bytes`]; [`LiveErrorKind::ServerExited`] /
    /// [`LiveErrorKind::Io`] (stdio); [`LiveErrorKind::Connect`],
    /// [`LiveErrorKind::HttpStatus`], [`LiveErrorKind::UnexpectedContentType`],
    /// [`LiveErrorKind::StreamEnded`], [`LiveErrorKind::Http`] (HTTP).
    pub async fn request_raw(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<Box<RawValue>, LiveError> {
        let params = self.params(params);
        let response = self.exchange(method, params, None, self.timeout).await?;
        self.result_of(method, response)
    }

    /// Sends request `method` and waits for its response, offering each
    /// message to `accept` first; all of it within `timeout`.
    async fn exchange(
        &mut self,
        method: &str,
        params: Option<Value>,
        accept: Option<jsonrpc::Accept<'_>>,
        timeout: Duration,
    ) -> Result<jsonrpc::Response, LiveError> {
        let id = self.next_id;
        self.next_id += 1;
        let message = jsonrpc::request(id, method, params);
        let ctx = Ctx {
            target: &self.target,
            request: method,
        };
        let transport = &mut self.transport;
        let exchange = async {
            match transport {
                Transport::Stdio(stdio) => {
                    stdio.send(&message, &ctx).await?;
                    stdio.receive(id, &ctx, accept).await
                }
                Transport::Http(http) => http.request(id, &message, &ctx, accept).await,
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(response) => response,
            Err(_) => Err(self.timeout_error(method, timeout)),
        }
    }

    /// One `tools/list` request whose response is offered to `accept`
    /// first, with the request's id: a parser that reads a whole response
    /// in one pass (see `mcp_hints::collect::Collector::push_response_json`)
    /// and returns `Some` when it took it. Otherwise the response is sorted as
    /// by [`Session::list_tools_page`] and its raw result returned.
    /// Errors: as [`Session::request`].
    pub async fn list_tools_page_with<T: Send>(
        &mut self,
        cursor: Option<&str>,
        mut accept: impl FnMut(&str, u64) -> Option<T> + Send,
    ) -> Result<Page<T>, LiveError> {
        let params = self.params(cursor.map(|cursor| json!({ "cursor": cursor })));
        let id = self.next_id;
        let mut taken = None;
        let mut offer = |text: &[u8]| {
            if let Ok(text) = std::str::from_utf8(text)
                && let Some(value) = accept(text, id)
            {
                taken = Some(value);
                return true;
            }
            false
        };
        let response = self
            .exchange("tools/list", params, Some(&mut offer), self.timeout)
            .await?;
        match taken {
            Some(value) => Ok(Page::Accepted(value)),
            None => self.result_of("tools/list", response).map(Page::Raw),
        }
    }

    fn result_of(
        &self,
        method: &str,
        response: jsonrpc::Response,
    ) -> Result<Box<RawValue>, LiveError> {
        jsonrpc::outcome(response).map_err(|failure| match failure {
            jsonrpc::Failure::Rpc(code, message, data) => LiveErrorKind::Rpc {
                target: self.target.clone(),
                request: method.to_owned(),
                code,
                message,
                data,
                http_status: None,
            }
            .into(),
            jsonrpc::Failure::Invalid(reason) => LiveErrorKind::InvalidResponse {
                target: self.target.clone(),
                request: method.to_owned(),
                reason,
                stderr_tail: self.stderr_tail(),
            }
            .into(),
        })
    }

    /// Send notification `method` with `params` (omitted when `None`). Errors:
    /// [`LiveErrorKind::Timeout`], [`LiveErrorKind::ServerExited`], [`LiveErrorKind::Io`]
    /// (stdio), [`LiveErrorKind::Connect`], [`LiveErrorKind::HttpStatus`],
    /// [`LiveErrorKind::Rpc`], [`LiveErrorKind::Http`] (HTTP).
    pub async fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), LiveError> {
        let message = jsonrpc::notification(method, params);
        let ctx = Ctx {
            target: &self.target,
            request: method,
        };
        let transport = &mut self.transport;
        let send = async {
            match transport {
                Transport::Stdio(stdio) => stdio.send(&message, &ctx).await,
                Transport::Http(http) => http.notify(&message, &ctx).await,
            }
        };
        match tokio::time::timeout(self.timeout, send).await {
            Ok(sent) => sent,
            Err(_) => Err(self.timeout_error(method, self.timeout)),
        }
    }

    fn timeout_error(&self, method: &str, timeout: Duration) -> LiveError {
        LiveErrorKind::Timeout {
            target: self.target.clone(),
            request: method.to_owned(),
            timeout,
            stderr_tail: self.stderr_tail(),
        }
        .into()
    }

    /// End the session. Stdio: close the server's stdin, give it 1 s to exit,
    /// then kill what is left of its process group; returns how the server
    /// ended. HTTP: send `DELETE` with the `Mcp-Session-Id`, if the server
    /// assigned one (`initialize` revisions; any answer, 405 included, or
    /// none within the timeout, is accepted); returns `None`. Never fails.
    pub async fn close(self) -> Option<Ended> {
        match self.transport {
            Transport::Stdio(stdio) => Some(stdio.close().await),
            Transport::Http(http) => {
                http.close(self.timeout.min(Duration::from_secs(5))).await;
                None
            }
        }
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("target", &self.target)
            .field("negotiation", &self.negotiation)
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

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
//! let mut session = Session::connect(&target, &LiveOptions::default()).await?;
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
//! Transports: **stdio** (the server is a child process in its own process
//! group; newline-delimited JSON-RPC on its stdin/stdout; its stderr is kept,
//! last 20 lines, for error messages) and **streamable HTTP** (MCP 2025-03-26
//! and later: every message is POSTed; a request is answered with one
//! `application/json` message or a `text/event-stream`). Requests the server
//! sends meanwhile are answered: `ping` with `{}`, anything else with JSON-RPC
//! error -32601 (method not found). Notifications are ignored.

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};

mod error;
mod http;
mod jsonrpc;
mod stdio;

pub use error::{LiveError, LiveErrorKind};

use http::HttpTransport;
use stdio::StdioTransport;

/// The MCP revision [`LiveOptions::default`] asks for.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// How a [`Session`] talks to its server.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// How long each request may take, from sending it to its response
    /// (`initialize`, `notifications/initialized`, each `tools/list` page);
    /// also the HTTP connect timeout. Default: 30 s. Past it:
    /// [`LiveErrorKind::Timeout`].
    pub timeout: Duration,
    /// The client capabilities declared in `initialize` (a JSON object).
    /// Default: `{}`. Whatever is declared here, the server's requests other
    /// than `ping` are answered with method not found.
    pub capabilities: Value,
    /// The protocol revision requested in `initialize`. Default:
    /// [`LATEST_PROTOCOL_VERSION`]. The server may answer with another one;
    /// see [`Session::protocol_version`].
    pub protocol_version: String,
    /// Extra HTTP headers sent with every HTTP request, e.g.
    /// `("Authorization", "Bearer …")`. Ignored for stdio servers. An invalid
    /// name or value: [`LiveErrorKind::InvalidHeader`] from [`Session::connect`].
    pub headers: Vec<(String, String)>,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            timeout: Duration::from_secs(30),
            capabilities: json!({}),
            protocol_version: LATEST_PROTOCOL_VERSION.to_owned(),
            headers: Vec::new(),
        }
    }
}

/// Which server to talk to.
///
/// Its [`Display`](fmt::Display) names it in error messages:
/// ``MCP server `python3 server.py` `` or `MCP server at http://…`.
#[derive(Clone, Debug, PartialEq, Eq)]
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
                let line = match line.char_indices().nth(120) {
                    Some((cut, _)) => format!("{}…", &line[..cut]),
                    None => line,
                };
                write!(f, "MCP server `{line}`")
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
        let escaped: String = word
            .replace('\'', r"'\''")
            .chars()
            .map(|c| match c.is_control() {
                true => c.escape_default().to_string(),
                false => c.to_string(),
            })
            .collect();
        format!("'{escaped}'")
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

/// An initialized MCP session with one server.
///
/// Requests are sent one at a time with increasing integer ids (`initialize`
/// is 1). Dropping a session kills a stdio server's process group at once;
/// [`Session::close`] first gives it a moment to exit by itself. After an
/// error the session may be unusable (a server that died stays dead, a
/// timed-out request may still be answered later, which is then ignored); close
/// it.
pub struct Session {
    transport: Transport,
    target: String,
    timeout: Duration,
    next_id: u64,
    initialize_result: Value,
    protocol_version: String,
}

impl Session {
    /// Start or reach the server, send `initialize` (with `clientInfo`
    /// `mcp-hints`, the options' protocol version and capabilities), check the
    /// result, send `notifications/initialized`.
    ///
    /// Errors: [`LiveErrorKind::CommandNotFound`] / [`LiveErrorKind::Spawn`] (stdio),
    /// [`LiveErrorKind::InvalidUrl`] / [`LiveErrorKind::InvalidHeader`] /
    /// [`LiveErrorKind::Connect`] (HTTP), [`LiveErrorKind::InvalidResponse`] when the
    /// result has no string `protocolVersion`, and any error of
    /// [`Session::request`]. A `protocolVersion` other than the one requested
    /// is not an error: the server negotiated it, and
    /// [`Session::protocol_version`] reports it. On error a stdio server is
    /// killed.
    pub async fn connect(target: &LiveTarget, options: &LiveOptions) -> Result<Session, LiveError> {
        let transport = match target {
            LiveTarget::Command { program, args } => {
                Transport::Stdio(StdioTransport::spawn(program, args)?)
            }
            LiveTarget::Url(url) => Transport::Http(HttpTransport::new(url, options)?),
        };
        let mut session = Session {
            transport,
            target: target.to_string(),
            timeout: options.timeout,
            next_id: 1,
            initialize_result: Value::Null,
            protocol_version: String::new(),
        };
        let params = json!({
            "protocolVersion": options.protocol_version,
            "capabilities": options.capabilities,
            "clientInfo": { "name": "mcp-hints", "version": env!("CARGO_PKG_VERSION") },
        });
        let result = session.request("initialize", Some(params)).await?;
        let Some(version) = result.get("protocolVersion").and_then(Value::as_str) else {
            let stderr_tail = session.stderr_tail();
            return Err(LiveErrorKind::InvalidResponse {
                reason: match result.get("protocolVersion") {
                    None => "the result has no \"protocolVersion\"".to_owned(),
                    Some(other) => format!(
                        "\"protocolVersion\" is {}, expected a string",
                        jsonrpc::kind(other)
                    ),
                },
                target: session.target,
                request: "initialize".to_owned(),
                stderr_tail,
            }
            .into());
        };
        session.protocol_version = version.to_owned();
        if let Transport::Http(http) = &mut session.transport {
            http.set_protocol_version(version);
        }
        session.initialize_result = result;
        session.notify("notifications/initialized", None).await?;
        Ok(session)
    }

    /// The server's `InitializeResult`, raw: `protocolVersion`,
    /// `capabilities`, `serverInfo`, `instructions`, … as sent.
    pub fn initialize_result(&self) -> &Value {
        &self.initialize_result
    }

    /// The protocol revision the server answered `initialize` with (which may
    /// differ from the one requested).
    pub fn protocol_version(&self) -> &str {
        &self.protocol_version
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

    /// One `tools/list` request: `params.cursor` is `cursor`, and with `None`
    /// the request has no params. Returns the `result` object's JSON text as
    /// the server sent it (`tools`, `nextCursor`, … untouched, unchecked; see
    /// `mcp_hints::collect::Collector::push_page_json`). Errors: as
    /// [`Session::request`].
    pub async fn list_tools_page(
        &mut self,
        cursor: Option<&str>,
    ) -> Result<Box<RawValue>, LiveError> {
        let params = cursor.map(|cursor| json!({ "cursor": cursor }));
        self.request_raw("tools/list", params).await
    }

    /// Send request `method` with `params` (omitted when `None`) and return
    /// the `result`, which is always a JSON object. Errors: as
    /// [`Session::request_raw`].
    pub async fn request(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, LiveError> {
        let raw = self.request_raw(method, params).await?;
        serde_json::from_str(raw.get()).map_err(|error| {
            LiveErrorKind::InvalidResponse {
                target: self.target.clone(),
                request: method.to_owned(),
                reason: error.to_string(),
                stderr_tail: self.stderr_tail(),
            }
            .into()
        })
    }

    /// Send request `method` with `params` (omitted when `None`) and return
    /// the `result`'s JSON text, which is always a JSON object.
    ///
    /// Errors: [`LiveErrorKind::Timeout`] past [`LiveOptions::timeout`];
    /// [`LiveErrorKind::Rpc`] for an error response; [`LiveErrorKind::InvalidResponse`]
    /// for a response with neither `result` nor `error` or a non-object
    /// result; [`LiveErrorKind::NotJson`] / [`LiveErrorKind::NotJsonRpc`] for a
    /// message that does not parse; [`LiveErrorKind::ServerExited`] /
    /// [`LiveErrorKind::Io`] (stdio); [`LiveErrorKind::Connect`],
    /// [`LiveErrorKind::HttpStatus`], [`LiveErrorKind::UnexpectedContentType`],
    /// [`LiveErrorKind::StreamEnded`], [`LiveErrorKind::Http`] (HTTP).
    pub async fn request_raw(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<Box<RawValue>, LiveError> {
        let response = self.exchange(method, params, None).await?;
        self.result_of(method, response)
    }

    /// Sends request `method` and waits for its response, offering each
    /// message to `accept` first.
    async fn exchange(
        &mut self,
        method: &str,
        params: Option<Value>,
        accept: Option<jsonrpc::Accept<'_>>,
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
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(response) => response,
            Err(_) => Err(self.timeout_error(method)),
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
        let params = cursor.map(|cursor| json!({ "cursor": cursor }));
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
            .exchange("tools/list", params, Some(&mut offer))
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
    /// [`LiveErrorKind::Http`] (HTTP).
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
            Err(_) => Err(self.timeout_error(method)),
        }
    }

    fn timeout_error(&self, method: &str) -> LiveError {
        LiveErrorKind::Timeout {
            target: self.target.clone(),
            request: method.to_owned(),
            timeout: self.timeout,
            stderr_tail: self.stderr_tail(),
        }
        .into()
    }

    /// End the session. Stdio: close the server's stdin, give it 1 s to exit,
    /// then kill what is left of its process group. HTTP: send `DELETE` with
    /// the `Mcp-Session-Id`, if the server assigned one (any answer, 405
    /// included, or none within the timeout, is accepted). Never fails.
    pub async fn close(self) {
        match self.transport {
            Transport::Stdio(stdio) => stdio.close().await,
            Transport::Http(http) => http.close(self.timeout.min(Duration::from_secs(5))).await,
        }
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("target", &self.target)
            .field("protocol_version", &self.protocol_version)
            .field("next_id", &self.next_id)
            .finish_non_exhaustive()
    }
}

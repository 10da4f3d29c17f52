//! [`LiveError`]: everything that can go wrong while talking to a live server.

use std::fmt::Write as _;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use serde_json::Value;

/// Peer text in double quotes for a message, escaped and cut (the core's
/// `escape::quoted`).
pub(crate) use mcp_hints_core::escape::quoted;

/// Why a request to a live MCP server failed: a [`LiveErrorKind`], boxed so
/// that `Result<_, LiveError>` stays one pointer wide.
///
/// [`Display`](std::fmt::Display) and [`source`](std::error::Error::source)
/// are the kind's; match on [`LiveError::kind`].
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct LiveError(Box<LiveErrorKind>);

impl LiveError {
    /// What went wrong.
    pub fn kind(&self) -> &LiveErrorKind {
        &self.0
    }

    /// What went wrong, by value.
    pub fn into_kind(self) -> LiveErrorKind {
        *self.0
    }

    /// The last lines the stdio server wrote to stderr before this error, if
    /// the kind carries them (empty otherwise, and always for HTTP).
    pub fn stderr_tail(&self) -> &[String] {
        match self.kind() {
            LiveErrorKind::ServerExited { stderr_tail, .. }
            | LiveErrorKind::Timeout { stderr_tail, .. }
            | LiveErrorKind::NotJson { stderr_tail, .. }
            | LiveErrorKind::NotJsonRpc { stderr_tail, .. }
            | LiveErrorKind::InvalidResponse { stderr_tail, .. }
            | LiveErrorKind::ResponseTooLarge { stderr_tail, .. } => stderr_tail,
            _ => &[],
        }
    }
}

impl From<LiveErrorKind> for LiveError {
    fn from(kind: LiveErrorKind) -> Self {
        LiveError(Box::new(kind))
    }
}

/// What went wrong while talking to a live MCP server.
///
/// Every variant names the *target* (``MCP server `python3 server.py` `` or
/// `MCP server at http://…`, see [`LiveTarget`](super::LiveTarget)'s
/// [`Display`](std::fmt::Display)) and, where one was in flight, the
/// *request*: the JSON-RPC method (`initialize`, `notifications/initialized`,
/// `tools/list`, …). The [`Display`](std::fmt::Display) text is meant for the
/// user: it says what happened and, where it helps, what to try. Variants that
/// concern a stdio server's behaviour carry the last lines the server wrote to
/// stderr (`stderr_tail`, at most 20, empty for HTTP) and print them after the
/// message, one per line.
///
/// Text from the server (messages, excerpts, stderr lines, headers) is kept
/// as sent in the fields and escaped in the `Display` text (see
/// [`crate::text`]), so that no server can forge or colour a line of it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveErrorKind {
    /// The stdio server's program does not exist (not on `PATH`, or no such
    /// file).
    #[error("cannot start MCP server `{program}`: command not found (check the name and PATH)")]
    CommandNotFound {
        /// The program as given.
        program: String,
    },

    /// The stdio server's program exists but could not be started (not
    /// executable, permission denied, …).
    #[error("cannot start MCP server `{program}`: {source}")]
    Spawn {
        /// The program as given.
        program: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// The stdio server closed its stdout (normally: exited) before answering
    /// `request`.
    #[error(
        "{target} {} before answering `{request}`{}",
        describe_exit(status),
        Tail(stderr_tail)
    )]
    ServerExited {
        /// Which server.
        target: String,
        /// The request that was waiting for an answer.
        request: String,
        /// The exit status, when the process had exited within a moment of
        /// closing stdout; `None` if it is still running or could not be
        /// waited for.
        status: Option<ExitStatus>,
        /// The last lines of the server's stderr.
        stderr_tail: Vec<String>,
    },

    /// No answer to `request` within [`LiveOptions::timeout`](super::LiveOptions::timeout).
    #[error(
        "{target} did not answer `{request}` within {timeout:?}{}",
        Tail(stderr_tail)
    )]
    Timeout {
        /// Which server.
        target: String,
        /// The request that timed out.
        request: String,
        /// The timeout that elapsed.
        timeout: Duration,
        /// The last lines of the server's stderr.
        stderr_tail: Vec<String>,
    },

    /// The server sent something that does not parse as JSON: a stdout line,
    /// an HTTP response body or an SSE event's data.
    #[error(
        "{target} sent {location} that is not JSON ({reason}) while answering `{request}`: {}{}",
        quoted(excerpt),
        Tail(stderr_tail)
    )]
    NotJson {
        /// Which server.
        target: String,
        /// The request in flight.
        request: String,
        /// Where the text came from: `stdout line 3`, `an HTTP response body`,
        /// `SSE event 2`.
        location: String,
        /// The text, cut to about 200 characters (`…` marks a cut).
        excerpt: String,
        /// The JSON parser's complaint.
        reason: String,
        /// The last lines of the server's stderr.
        stderr_tail: Vec<String>,
    },

    /// The server sent JSON that is not a JSON-RPC 2.0 message (not an object,
    /// no `"jsonrpc": "2.0"`, neither `method` nor `id`, …), or a response to
    /// a request id this client never sent.
    #[error(
        "{target} sent {location} that is not a valid JSON-RPC 2.0 message ({reason}) while answering `{request}`: {}{}",
        quoted(excerpt),
        Tail(stderr_tail)
    )]
    NotJsonRpc {
        /// Which server.
        target: String,
        /// The request in flight.
        request: String,
        /// Where the message came from (see [`LiveErrorKind::NotJson`]).
        location: String,
        /// The message, cut to about 200 characters.
        excerpt: String,
        /// What is wrong with it.
        reason: String,
        /// The last lines of the server's stderr.
        stderr_tail: Vec<String>,
    },

    /// The server answered `request` with a JSON-RPC error response.
    #[error(
        "{target} answered `{request}` with JSON-RPC error {code}{}: {}{}",
        HttpNote(*http_status),
        crate::text::shown(message),
        Data(data)
    )]
    Rpc {
        /// Which server.
        target: String,
        /// The request that failed.
        request: String,
        /// The error's `code` (`-32601` method not found, `-32602` invalid
        /// params, …); `0` if the server sent none or a non-integer.
        code: i64,
        /// The error's `message` (empty if none).
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
        /// The HTTP status the error came with, when it was the body of a
        /// non-2xx answer (2026-07-28 servers answer `400` for an
        /// unsupported revision, `404` for an unknown method); `None` over
        /// stdio and for an error in a `200` answer.
        http_status: Option<u16>,
    },

    /// A response that is JSON-RPC but not a usable answer: neither `result`
    /// nor `error` (or both), a `result` that is not an object, an
    /// `initialize` result without a string `protocolVersion`, an HTTP JSON
    /// body without the response, a 202 Accepted for a request.
    #[error(
        "{target} sent an invalid response to `{request}`: {reason}{}",
        Tail(stderr_tail)
    )]
    InvalidResponse {
        /// Which server.
        target: String,
        /// The request in flight.
        request: String,
        /// What is wrong with the response.
        reason: String,
        /// The last lines of the server's stderr.
        stderr_tail: Vec<String>,
    },

    /// An I/O error on the stdio server's pipes other than the server having
    /// gone (which is [`LiveErrorKind::ServerExited`]).
    #[error("I/O error talking to {target} during `{request}`: {source}")]
    Io {
        /// Which server.
        target: String,
        /// The request in flight.
        request: String,
        /// The error.
        #[source]
        source: io::Error,
    },

    /// The HTTP server could not be reached: connection refused, host not
    /// found, TLS handshake failed.
    #[error("cannot connect to {target} for `{request}`: {}", chain(source))]
    Connect {
        /// Which server.
        target: String,
        /// The request that was being sent.
        request: String,
        /// The HTTP client's error (its source chain is in the message).
        #[source]
        source: reqwest::Error,
    },

    /// The HTTP server answered with a status other than 2xx.
    #[error(
        "{target} answered `{request}` with HTTP {status}{}: {}",
        status_hint(*status),
        quoted(body)
    )]
    HttpStatus {
        /// Which server.
        target: String,
        /// The request that was sent.
        request: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body, cut to about 200 characters.
        body: String,
    },

    /// A 2xx answer to a request whose `Content-Type` is neither
    /// `application/json` nor `text/event-stream`.
    #[error(
        "{target} answered `{request}` with HTTP {status} and content type {}; expected application/json or text/event-stream",
        quoted(content_type)
    )]
    UnexpectedContentType {
        /// Which server.
        target: String,
        /// The request that was sent.
        request: String,
        /// The HTTP status code.
        status: u16,
        /// The `Content-Type` header (empty if absent).
        content_type: String,
    },

    /// The SSE stream answering a request ended (or the connection dropped)
    /// before the response with our id arrived.
    #[error(
        "{target}: the event stream answering `{request}` (id {id}) ended before the response arrived"
    )]
    StreamEnded {
        /// Which server.
        target: String,
        /// The request that was sent.
        request: String,
        /// Its JSON-RPC id.
        id: u64,
    },

    /// Any other HTTP-level failure (reading the body failed, a malformed
    /// event stream, …).
    #[error("HTTP error from {target} during `{request}`: {}", chain(source.as_ref()))]
    Http {
        /// Which server.
        target: String,
        /// The request in flight.
        request: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// One message from the server is larger than
    /// [`LiveOptions::max_response_bytes`](super::LiveOptions::max_response_bytes):
    /// a stdout line, an HTTP response body (by its `Content-Length`, or as
    /// read), or an SSE event or line. Reading stops there, so a server
    /// cannot make the client hold more than the bound.
    #[error(
        "{target} sent {location} of more than {}, the --max-response-bytes bound, while \
         answering `{request}`: raise it if the server is right to send that much{}",
        Bytes(*limit),
        Tail(stderr_tail)
    )]
    ResponseTooLarge {
        /// Which server.
        target: String,
        /// The request in flight.
        request: String,
        /// What was too large: `stdout line 3`, `an HTTP response body`,
        /// `SSE event 2`.
        location: String,
        /// The bound, in bytes.
        limit: u64,
        /// The last lines of the server's stderr.
        stderr_tail: Vec<String>,
    },

    /// The server does not speak the MCP revision asked for with
    /// [`LiveOptions::protocol_version`](super::LiveOptions::protocol_version)
    /// (`version` is `Some`), or, when the client negotiated, none of the
    /// revisions this client speaks but the one it refused (`version` is
    /// `None`). The message says when the server lists the revision it
    /// refused as supported.
    #[error("{}", refused(target, version.as_deref(), answer, supported))]
    ProtocolRefused {
        /// Which server.
        target: String,
        /// The revision asked for; `None` when negotiating found no common
        /// revision.
        version: Option<String>,
        /// What the server answered, for people (`it answered
        /// \`initialize\` with JSON-RPC error -32022: …`), its text escaped.
        answer: String,
        /// The revisions the server says it supports (from `server/discover`
        /// or an unsupported-version error's `data.supported`), as sent;
        /// empty when it did not say.
        supported: Vec<String>,
    },

    /// The server answered `initialize` with a `protocolVersion` this
    /// client does not speak (see [`ProtocolVersion`](super::ProtocolVersion)).
    #[error(
        "{target} answered `initialize` (MCP {asked} asked for) with protocol version {}, \
         which mcp-hints does not speak: it speaks {}",
        quoted(answered),
        known()
    )]
    UnknownRevision {
        /// Which server.
        target: String,
        /// The revision asked for.
        asked: String,
        /// The revision it answered with, as sent.
        answered: String,
    },

    /// The URL is not an absolute `http://` or `https://` URL.
    #[error("invalid MCP server URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// One of [`LiveOptions::headers`](super::LiveOptions::headers) is not a
    /// valid HTTP header name or value.
    #[error("invalid HTTP header `{name}`: {reason}")]
    InvalidHeader {
        /// The header name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn refused(target: &str, version: Option<&str>, answer: &str, supported: &[String]) -> String {
    let known_versions = super::ProtocolVersion::ALL;
    let supported_text = supported
        .iter()
        .map(|version| crate::text::shown(version).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    let listed =
        |known: &&super::ProtocolVersion| supported.iter().any(|version| version == known.as_str());
    // A server may refuse a revision it lists as supported: then it is not
    // said to speak none of ours, nor told to be asked for it again.
    let mut text = match version {
        Some(version) if supported.iter().any(|listed| listed == version) => format!(
            "{target} refuses MCP {version}, the revision --protocol-version asks for, though \
             it lists it as supported: {answer}"
        ),
        Some(version) => format!(
            "{target} refuses MCP {version}, the revision --protocol-version asks for: {answer}"
        ),
        // Negotiating, a refusal that lists a revision this client speaks
        // ends here only when it lists no other: the one it refused.
        None => match known_versions.iter().find(listed) {
            Some(common) => format!(
                "{target} refuses MCP {common} though it lists it as supported, and lists no \
                 other revision mcp-hints speaks: {answer}"
            ),
            None => format!(
                "{target} speaks none of the MCP revisions mcp-hints speaks ({}): {answer}",
                known()
            ),
        },
    };
    if !supported.is_empty() {
        let _ = write!(text, "; it supports {supported_text}");
    }
    if let Some(version) = version {
        let other = known_versions
            .iter()
            .filter(|known| known.as_str() != version)
            .find(listed);
        match other {
            Some(other) => {
                let _ = write!(
                    text,
                    ": pass --protocol-version {other}, or leave --protocol-version out to \
                     negotiate"
                );
            }
            // Asking again or negotiating meets the same refusal.
            None if supported.iter().any(|listed| listed == version) => {}
            None => text.push_str(": leave --protocol-version out to negotiate"),
        }
    }
    text
}

/// `2026-07-28, 2025-11-25, …`: every revision this client speaks.
fn known() -> String {
    super::ProtocolVersion::ALL
        .iter()
        .map(|known| known.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_exit(status: &Option<ExitStatus>) -> String {
    match status {
        Some(status) => format!("exited ({status})"),
        None => "closed its stdout".to_owned(),
    }
}

fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => {
            " (the server wants credentials it accepts: pass them with --header, e.g. \
             'Authorization: Bearer ...')"
        }
        404 => " (wrong URL, or the server ended the session)",
        405 => " (the URL does not accept POST: is it the MCP endpoint?)",
        406 | 415 => " (the server rejected the Accept or Content-Type header)",
        _ => "",
    }
}

/// The error and its sources, joined by `: `, skipping a source whose text the
/// previous one already contains.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(next) = source {
        let next_text = next.to_string();
        if !text.contains(&next_text) {
            let _ = write!(text, ": {next_text}");
        }
        source = next.source();
    }
    text
}

struct Tail<'a>(&'a [String]);

impl std::fmt::Display for Tail<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        write!(f, "\nlast lines of the server's stderr:")?;
        for line in self.0 {
            write!(f, "\n  | {}", crate::text::one_line(line))?;
        }
        Ok(())
    }
}

/// `67108864 bytes (64 MiB)`.
struct Bytes(u64);

impl std::fmt::Display for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bytes = self.0;
        write!(f, "{bytes} bytes")?;
        for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if bytes >= size && bytes.is_multiple_of(size) {
                return write!(f, " ({} {unit})", bytes / size);
            }
        }
        Ok(())
    }
}

/// ` (HTTP 400)` after an error code that came with a non-2xx status.
struct HttpNote(Option<u16>);

impl std::fmt::Display for HttpNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(status) => write!(f, " (HTTP {status})"),
            None => Ok(()),
        }
    }
}

struct Data<'a>(&'a Option<Value>);

impl std::fmt::Display for Data<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => Ok(()),
            Some(data) => write!(
                f,
                " (data: {})",
                crate::text::one_line(&crate::text::cut(&data.to_string()))
            ),
        }
    }
}

//! What reaches rmcp from the wire: a guard that answers every malformed
//! request with the JSON-RPC error the specifications name, with its id
//! when the id can be read, and never answers a notification.
//!
//! Two guards share one set of rules:
//!
//! - [`guarded`] (and [`LineGuard`] for other limits): an rmcp
//!   [`Transport`](rmcp::transport::Transport) over any
//!   `AsyncRead`/`AsyncWrite` pair, for stdio:
//!   `server.serve(mcp_hints::wire::guarded(tokio::io::stdin(), tokio::io::stdout()))`.
//!   It reads the lines itself, checks each message, hands rmcp the sound
//!   ones unchanged, and writes its own answers and rmcp's messages through
//!   one writer task, each line whole.
//! - `HttpGuard` (feature `http-guard`): a tower layer in front of rmcp's
//!   `StreamableHttpService`.
//!
//! # What each case gets
//!
//! Codes are JSON-RPC 2.0 §5.1's. "No id" means the error response has no
//! `id` member: the id could not be read (MCP 2025-11-25 and 2026-07-28
//! basic/index, Error Responses; rmcp writes such errors the same way).
//! "With its id" means the id's JSON text exactly as the peer sent it
//! (`1.50`, `"A"`), never re-serialized (JSON-RPC 2.0 §5: the same
//! value as the request's id).
//! Over HTTP the guard's JSON-RPC answers come with status 400 (413 for a
//! body too long), `Content-Type: application/json`.
//!
//! | message | stdio (rmcp 3.11 alone) | with the guard |
//! |---|---|---|
//! | a line longer than [`DEFAULT_MAX_LINE_BYTES`] (16 MiB) | dropped, unanswered | -32700, no id, `Parse error: message longer than 16777216 bytes`, answered as soon as the limit is passed; the rest of the line is skipped up to its newline, never kept |
//! | not JSON (syntax, truncated, invalid UTF-8) | dropped, unanswered | -32700, no id, `Parse error: ` and serde_json's message (`EOF while parsing a value at line 1 column 33`) |
//! | a lone surrogate escape (`"\ud800"`, or a trailing one alone) | dropped, unanswered | -32700, no id, `Parse error: lone surrogate \ud800 at byte N: a string escape must be valid Unicode` (MCP: messages are UTF-8; serde_json would say "unexpected end of hex escape") |
//! | nesting deeper than [`DEFAULT_MAX_DEPTH`] (128; rmcp's parser stops at 127) | dropped, unanswered | -32700, no id, `Parse error: nesting deeper than 128 arrays and objects`; depth 128 passes |
//! | not an object (a number, a batch array) | -32600, no id | -32600, no id, saying what it was |
//! | a request (`method` and `id`) whose id is a number rmcp would not write back as sent: a fraction (`1.5`), an integer beyond `i64` (`100000000000000000000`), an exponent or fraction form (`1e20`, `1.0`), `-0` | -32600, no id; or served, answered with a rewritten id (`1`, `0`) | -32600 with the id's text as sent, `Invalid Request: request id 1e20 is not a string or a 64-bit integer in plain decimal (no fraction, exponent or -0)` |
//! | a request whose id is neither a string nor a number (`null`, an object) | -32600, no id | -32600, no id |
//! | a message object naming a member twice (`"id"`, `"method"`, `"jsonrpc"`, `"params"`, any) | served with the last value | a request: -32600, `Invalid Request: member "id" appears more than once`, with its id unless `id` is the member repeated with another text (then no id); a notification or a response: dropped. RFC 8259 §4: names "SHOULD be unique", else the outcome is unpredictable; members repeated inside `params` are rmcp's |
//! | a request whose `jsonrpc` is not `"2.0"`, `method` not a string, `params` not an object, or that has `result`/`error` | -32600, no id | -32600 with its id, naming the member |
//! | `params` an array | -32600, no id | -32602 with its id (every MCP request takes an object) |
//! | `tools/call` without an object `params`, a string `name`, or with `arguments` neither absent, null nor an object | -32601 `tools/call` with its id (rmcp reads it as a custom request) | -32602 with its id, naming the member |
//! | any other method rmcp models whose `params` rmcp cannot read (`initialize` with `protocolVersion: 5`) | -32601 naming the method | -32602 with its id, `Invalid params: \`params\` do not fit "initialize"` |
//! | a request whose id is in flight (sent, not yet answered by rmcp, or cancelled) | both run; one answer is lost | -32600 with the id, `Invalid Request: request id 7 is already in use by a request in flight`; the second never reaches rmcp (MCP 2026-07-28 basic/index: an id "MUST NOT match the ID of any other request the sender has issued and not yet received a response for") |
//! | a malformed notification (`method`, no `id`) | often -32600, no id | dropped, never answered (JSON-RPC 2.0 §4.1) |
//! | a malformed response (`result` or `error`, no `method`) | often -32600, no id | dropped, never answered |
//!
//! A request that passes is handed to rmcp as parsed; what it then answers
//! (-32601 for a method it does not know, -32602 for a tool it does not
//! have, a tool error for arguments its schema refuses, initialization
//! order) stays rmcp's. Over stdio the guard treats an unterminated last
//! line before end of input as a message (rmcp drops it) and skips blank
//! lines (empty, or only JSON's whitespace: space, tab, CR); a line of
//! other whitespace (a form feed, a vertical tab, NBSP) is not JSON,
//! -32700 as over HTTP. It strips one `\r` before the newline, as rmcp
//! does.
//!
//! One leading UTF-8 byte order mark is ignored on both transports, as
//! rmcp's stdio transport does: RFC 8259 §8.1 says JSON text "MUST NOT"
//! begin with one but lets a parser "ignore the presence of a byte order
//! mark rather than treating it as an error". Over HTTP the guard hands
//! rmcp the body without it. A second BOM is -32700.
//!
//! The 128-level limit is the guard's own: rmcp's parser (serde_json's
//! default) stops at 127. Over HTTP rmcp parses the body again, so the HTTP
//! guard refuses depth 128 too ([`HTTP_MAX_DEPTH`]).
//!
//! A cancelled request (`notifications/cancelled`) stays in flight: rmcp
//! never answers it, and its handler may still run. The
//! [`CANCELLED_IDS_KEPT`] most recent cancelled ids are kept.
//!
//! # Over streamable HTTP
//!
//! | request | rmcp 3.11 alone | with `HttpGuard` |
//! |---|---|---|
//! | POST of a body that is not JSON | 415, plain text | 400, -32700, no id |
//! | POST of a request with a bad envelope, or `tools/call` params | 415 or -32601 | 400, -32600 or -32602 with its id, as over stdio |
//! | POST of a malformed notification | 415 | 400, plain text, no JSON-RPC answer |
//! | POST body over the limit (4 MiB) | 413, plain text | 413, -32700, no id; at once, before reading the body, when `Content-Length` declares more |
//! | POST body beginning with a byte order mark | 415, plain text | the BOM ignored, as over stdio |
//! | any request with a foreign `Origin` | served (its Origin check is off until configured) | 403, plain text (basic/transports: "If the `Origin` header is present and invalid, servers MUST respond with HTTP 403 Forbidden") |
//! | DELETE of an unknown session | 202 | 404 (a terminated session "MUST" be answered 404) |
//!
//! Remaining rmcp's over HTTP: the `Host` check against DNS rebinding (403;
//! `StreamableHttpServerConfig::allowed_hosts`, loopback names by default),
//! `Accept` (406) and `Content-Type` (415), `MCP-Protocol-Version` and
//! session checks (400, 404 on GET and POST), and a request id repeated
//! within a session while in flight, which the HTTP guard does not track.
//!
//! Sources: JSON-RPC 2.0 (§4 request object, §4.1 notifications, §5
//! response object, §5.1 error codes), RFC 8259 §9 (a parser may limit
//! size and depth), MCP basic/index and basic/transports for revisions
//! 2025-06-18, 2025-11-25 and 2026-07-28.

mod check;
#[cfg(feature = "http-guard")]
mod http;
mod stdio;

#[cfg(feature = "http-guard")]
#[cfg_attr(docsrs, doc(cfg(feature = "http-guard")))]
pub use http::{
    CheckedMessage, GuardResponseBody, GuardedBody, HttpGuard, HttpGuardService, InvalidOrigin,
};
pub use stdio::{GuardedTransport, LineGuard};

/// The longest message a [`GuardedTransport`] reads by default: 16 MiB
/// (16,777,216 bytes) before the newline, the limit rmcp's own stdio
/// transport has.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The deepest nesting of arrays and objects a [`GuardedTransport`] parses
/// by default, the message object counting 1: 128.
pub const DEFAULT_MAX_DEPTH: usize = 128;

/// The deepest nesting the HTTP guard lets through: 127, because rmcp's
/// HTTP service parses the body again with serde_json's default limit,
/// which refuses depth 128.
pub const HTTP_MAX_DEPTH: usize = 127;

/// The longest POST body the HTTP guard reads by default: 4 MiB, the
/// default of rmcp's `StreamableHttpServerConfig::max_request_body_bytes`.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How many cancelled request ids a [`GuardedTransport`] keeps in flight
/// (refusing their reuse), oldest forgotten first: 1,024.
pub const CANCELLED_IDS_KEPT: usize = 1024;

/// rmcp's server transport over `reader` and `writer` with the default
/// limits of [`LineGuard`]; the module documentation says what it answers.
///
/// ```no_run
/// # async fn serve(server: impl mcp_hints::rmcp::ServerHandler) -> Result<(), Box<dyn std::error::Error>> {
/// use mcp_hints::rmcp::ServiceExt;
///
/// let running = server
///     .serve(mcp_hints::wire::guarded(tokio::io::stdin(), tokio::io::stdout()))
///     .await?;
/// running.waiting().await?;
/// # Ok(())
/// # }
/// ```
pub fn guarded<R, W>(reader: R, writer: W) -> GuardedTransport<R, W>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    LineGuard::new().transport(reader, writer)
}

//! The crate's one error type, [`Error`], and where each of its variants
//! meets JSON-RPC: [`Error::code`] and `From<&Error> for ErrorData`, the
//! one mapping every protocol error of the front goes through.
//!
//! # Messages and sources
//!
//! Each variant's `Display` is the whole sentence `mcp-hints gateway`
//! prints, the cause's own text included (the command prints `Display`
//! alone). So that a reporter walking [`source`](std::error::Error::source)
//! does not print a cause twice, a cause whose text the message already
//! holds is kept as a field, not returned as a source: the variants that
//! wrap [`ConfigError`], [`LogError`] and [`ApprovalError`] are
//! transparent (their `Display` and `source` are the wrapped error's,
//! none of which has a source), and the rest return none.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use mcp_hints::fingerprint::LockError;
use mcp_hints::wire::InvalidOrigin;
use mcp_hints_core::escape;
use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use serde_json::json;

use crate::approval::ApprovalError;
use crate::config::ConfigError;
use crate::defaults;
use crate::log::LogError;

/// What can fail in the gateway: loading its config, opening or writing
/// its audit log and drift lock, deciding a parked call, the tool names it
/// would serve, binding and serving its endpoints, reaching an upstream,
/// reading a time back from the log; and the three protocol errors a
/// client's request can get
/// ([`UnknownTool`](Error::UnknownTool), [`NoPrincipal`](Error::NoPrincipal),
/// [`UnknownSession`](Error::UnknownSession)).
///
/// Its `Display` is the message `mcp-hints gateway` prints (see the module
/// documentation for why causes are fields rather than sources);
/// [`code`](Error::code) is its JSON-RPC code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config could not be read or is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// The audit log could not be opened, written or synced.
    #[error(transparent)]
    Log(#[from] LogError),

    /// A parked call that could not be decided (no call of that id is
    /// parked).
    #[error(transparent)]
    Approval(#[from] ApprovalError),

    /// The shared state (`[state]`) could not be opened: its `redis` is
    /// not a URL the Redis client takes. (A Redis that is down is not an
    /// error at start: calls a rule guards are refused until it answers.)
    #[error(transparent)]
    State(crate::state::StateError),

    /// The webhook of parked calls (`[approval] webhook`) could not be set
    /// up: its HTTP client could not be built.
    #[error("approval.webhook: cannot send to the webhook: {error}")]
    Webhook {
        /// Why, on one line (without the URL, which may carry a secret).
        error: String,
    },

    /// The drift lock exists but could not be read: `PATH: WHY`.
    #[error("{}: {error}", path.display())]
    LockRead {
        /// The lock file (`lock.path`).
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },

    /// The drift lock was read but is not a lock, or is of another version
    /// of the format: `PATH: WHY`.
    #[error("{}: {error}", path.display())]
    LockInvalid {
        /// The lock file (`lock.path`).
        path: PathBuf,
        /// What is wrong with it.
        error: LockError,
    },

    /// An approved fingerprint could not be written to the drift lock:
    /// `PATH: cannot write the lock: WHY`. The lock held in memory is
    /// unchanged.
    #[error("{}: cannot write the lock: {error}", path.display())]
    LockWrite {
        /// The lock file (`lock.path`).
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },

    /// Namespaced tool names a client cannot accept or cannot tell apart,
    /// every one found, one per line; after `PATH: ` when found at start.
    #[error("{}", names_message(.config.as_deref(), .problems))]
    Names {
        /// The config whose upstreams list the tools, when the names were
        /// checked at start (a list rebuilt later names none).
        config: Option<PathBuf>,
        /// The problems, in served order (at least one).
        problems: Vec<NameProblem>,
    },

    /// An address that is not loopback, without `listen.public`.
    #[error(
        "{key} = \"{address}\" is not a loopback address; set `listen.public = true` to listen \
         beyond this machine (and keep its tokens secret)"
    )]
    NotLoopback {
        /// The config key that gave it: `listen.http` or
        /// `listen.admin_http`.
        key: &'static str,
        /// The address.
        address: SocketAddr,
    },

    /// [`router`](crate::front::router) was given a bound address that is
    /// not loopback, and the config does not set `listen.public`: an
    /// application listening beyond the machine must say so in the config,
    /// as `serve` must.
    #[error(
        "the gateway's router was given {address}, which is not a loopback address; set \
         `listen.public = true` in the config to serve beyond this machine (and keep its tokens \
         secret)"
    )]
    RouterNotLoopback {
        /// The address the application listens on.
        address: SocketAddr,
    },

    /// An address that could not be bound: `KEY: cannot listen on ADDRESS:
    /// WHY`.
    #[error("{key}: cannot listen on {address}: {error}")]
    Bind {
        /// The config key that gave it: `listen.http` or
        /// `listen.admin_http`.
        key: &'static str,
        /// The address.
        address: SocketAddr,
        /// Why.
        error: std::io::Error,
    },

    /// A bound listener whose own address could not be read: `KEY: WHY`.
    #[error("{key}: {error}")]
    LocalAddress {
        /// The config key that gave the address: `listen.http` or
        /// `listen.admin_http`.
        key: &'static str,
        /// Why.
        error: std::io::Error,
    },

    /// Serving HTTP ended with an error: `serving HTTP on ADDRESS: WHY`.
    #[error("serving HTTP on {address}: {error}")]
    Serve {
        /// The bound address.
        address: SocketAddr,
        /// Why.
        error: std::io::Error,
    },

    /// A `listen.allow_origins` entry that is not an origin.
    #[error("listen.allow_origins: {error}")]
    AllowOrigin {
        /// The entry, and why it is not one.
        error: InvalidOrigin,
    },

    /// `listen.admin_http` is set but `[admin]` gives no token.
    #[error("{}: `listen.admin_http` is set but `[admin]` gives no token", config.display())]
    AdminWithoutToken {
        /// The config file.
        config: PathBuf,
    },

    /// The stdio session did not start (its `initialize` handshake
    /// failed, or stdin closed first).
    #[error("the stdio session did not start: {error}")]
    StdioSession {
        /// rmcp's reason (boxed: it may hold the message it received).
        error: Box<rmcp::service::ServerInitializeError>,
    },

    /// An upstream that could not be reached or listed: why, in words (it
    /// would not start, did not answer `initialize` or `tools/list` within
    /// its `call_timeout_secs`, a header is not valid, a definition is not
    /// a tool), the words that also mark it unavailable.
    #[error("{reason}")]
    Upstream {
        /// The upstream's name.
        upstream: String,
        /// Why, a clause that reads after "is unavailable: ".
        reason: String,
    },

    /// Text read back as a time that is not RFC 3339.
    #[error("`{text}` is not an RFC 3339 time ({error})")]
    Time {
        /// The text.
        text: String,
        /// What is wrong with it.
        error: chrono::ParseError,
    },

    /// A `tools/call` of a name the gateway does not serve (JSON-RPC
    /// invalid params).
    #[error(
        "unknown tool `{}`: the gateway serves `UPSTREAM__TOOL` names from tools/list",
        escape::shown(.name)
    )]
    UnknownTool {
        /// The name the client called.
        name: String,
    },

    /// A `tools/call` whose `_meta["mcp-hints/session"]`
    /// ([`SESSION_META_KEY`](crate::session::SESSION_META_KEY)) is not a
    /// session name (JSON-RPC invalid params): not a string, or not 1 to
    /// 128 visible ASCII characters.
    #[error(
        "`_meta[\"{}\"]` is not a session name: it {problem}; give 1 to {} visible ASCII \
         characters, or leave it out",
        crate::session::SESSION_META_KEY,
        crate::session::MAX_SESSION_NAME
    )]
    BadSessionName {
        /// What is wrong with it (`is empty`, `is a number`).
        problem: String,
    },

    /// A request that reached the MCP server without an authenticated
    /// principal (JSON-RPC invalid request). The bearer-token layer lets
    /// none through, so this is refused rather than guessed.
    #[error("the request has no authenticated principal")]
    NoPrincipal,

    /// A streamable-HTTP request named, in `Mcp-Session-Id`, a session this
    /// gateway process does not serve: one that ended, one never opened,
    /// one another replica opened (sessions of the `initialize` lifecycle
    /// live in the process that opened them), or one of another principal
    /// (answered alike, so that a token cannot tell a live session of
    /// someone else's from none). Answered with HTTP 404 and this as a
    /// JSON-RPC error with no id: the streamable HTTP transport has the
    /// client start a new session on a 404. The message quotes the id
    /// escaped (`mcp_hints_core::escape::shown`).
    #[error(
        "session `{}` is not known here: it ended, or another replica of the gateway opened \
         it (a load balancer must send every request of a session to the replica that opened \
         it); send `initialize` without `Mcp-Session-Id` to start a new session",
        escape::shown(id)
    )]
    UnknownSession {
        /// The id as the request named it (its bytes read as UTF-8, lossily).
        id: String,
    },

    /// A request named, in `Mcp-Session-Id`, a session another replica of
    /// the gateway opened for the same principal (as the shared state,
    /// `[state] redis`, records): answered as
    /// [`UnknownSession`](Error::UnknownSession) (HTTP 404, the same code),
    /// naming the replica, so that a load balancer without affinity is
    /// found at once. A session of another principal's is never named.
    #[error(
        "session `{}` was opened by replica `{}` of the gateway, not by this one (`{}`): a \
         load balancer must send every request of a session to the replica that opened it \
         (affinity on `Mcp-Session-Id`); send `initialize` without `Mcp-Session-Id` to start a \
         new session here",
        escape::shown(id),
        escape::shown(opened_by),
        escape::shown(here)
    )]
    SessionElsewhere {
        /// The id as the request named it.
        id: String,
        /// The replica that opened it (`[gateway] replica`).
        opened_by: String,
        /// This replica.
        here: String,
    },
}

/// One namespaced tool name a client cannot accept, or two it cannot tell
/// apart.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameProblem {
    /// Over [`defaults::MAX_NAME_LEN`] characters once namespaced.
    TooLong {
        /// The namespaced name.
        name: String,
        /// Its length, in characters.
        length: usize,
    },
    /// Two names that become one once a client replaces the characters
    /// outside `[A-Za-z0-9_-]` with `_`.
    Collide {
        /// The first of the two, in served order.
        first: String,
        /// The second.
        second: String,
        /// What both become.
        normalised: String,
    },
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::TooLong { name, length } => {
                let (upstream, tool) = crate::split(name).unwrap_or(("UPSTREAM", name));
                write!(
                    f,
                    "tool `{}` is {length} characters long once namespaced, over the {} a \
                     client accepts; rename the upstream shorter, or leave the tool out with \
                     `exclude_tools = [\"{}\"]` in upstream `{}`",
                    escape::shown(name),
                    defaults::MAX_NAME_LEN,
                    escape::shown(tool),
                    escape::shown(upstream)
                )
            }
            NameProblem::Collide {
                first,
                second,
                normalised,
            } => {
                // Always two tools of one upstream: upstream names are
                // client-safe and end at the first `__`, so no renaming
                // of an upstream tells them apart.
                let (upstream, tool) = crate::split(second).unwrap_or(("UPSTREAM", second));
                write!(
                    f,
                    "tools `{}` and `{}` collide: both become `{normalised}` once a client \
                     replaces the characters outside [A-Za-z0-9_-] with `_`; leave one out with \
                     `exclude_tools = [\"{}\"]` in upstream `{}`",
                    escape::shown(first),
                    escape::shown(second),
                    escape::shown(tool),
                    escape::shown(upstream)
                )
            }
        }
    }
}

/// [`Error::Names`]'s message: the problems one per line, the first after
/// `PATH: ` when there is a config.
fn names_message(config: Option<&Path>, problems: &[NameProblem]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let lines = lines.join("\n");
    match config {
        Some(path) => format!("{}: {lines}", path.display()),
        None => lines,
    }
}

impl Error {
    /// The JSON-RPC error code of this error, when a client is answered
    /// with it; the one place the gateway's errors meet JSON-RPC codes.
    ///
    /// | variant | code | why |
    /// |---|---|---|
    /// | [`UnknownTool`](Error::UnknownTool) | `-32602` invalid params | MCP, Tools, "Error Handling": an unknown tool is a protocol error, `-32602`; JSON-RPC 2.0 §5.1: "Invalid method parameter(s)" |
    /// | [`BadSessionName`](Error::BadSessionName) | `-32602` invalid params | JSON-RPC 2.0 §5.1: "Invalid method parameter(s)": the request's own `_meta` |
    /// | [`NoPrincipal`](Error::NoPrincipal) | `-32600` invalid request | JSON-RPC 2.0 §5.1: "The JSON sent is not a valid Request object": a request the transport did not authenticate is not one the gateway takes |
    /// | [`UnknownSession`](Error::UnknownSession), [`SessionElsewhere`](Error::SessionElsewhere) | `-32001` | JSON-RPC 2.0 §5.1 leaves -32000 to -32099 to implementations; -32001 is what the MCP TypeScript SDK answers an unknown session with, so clients that read the body meet one code; the HTTP status, 404, is what the transport spec has clients act on |
    /// | every other | `-32603` internal error | JSON-RPC 2.0 §5.1: "Internal JSON-RPC error": the gateway's own state (config, log, lock, listeners, upstreams), nothing the request could change |
    ///
    /// The other answers a call can end with are not protocol errors:
    /// refusals (a rule, an unwritable audit log, drift) and calls whose
    /// delivery is unknown are tool results with `isError: true` (MCP,
    /// Tools, "Error Handling": errors the model can act on), and an
    /// upstream's own JSON-RPC error is passed on as the upstream sent it.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::UnknownTool { .. } | Error::BadSessionName { .. } => ErrorCode::INVALID_PARAMS,
            Error::NoPrincipal => ErrorCode::INVALID_REQUEST,
            Error::UnknownSession { .. } | Error::SessionElsewhere { .. } => ErrorCode(-32001),
            _ => ErrorCode::INTERNAL_ERROR,
        }
    }
}

/// The JSON-RPC error of `error`: [`Error::code`], its `Display` as the
/// message, and as the data `{"tool": NAME}` for [`Error::UnknownTool`]
/// (the name cut to [`escape::MAX_SHOWN`] characters)
/// and `{"replica": NAME}` for [`Error::SessionElsewhere`].
impl From<&Error> for ErrorData {
    fn from(error: &Error) -> ErrorData {
        let data = match error {
            // Cut as the message cuts it: a client's name of any length
            // is not echoed back whole.
            Error::UnknownTool { name } => Some(json!({ "tool": escape::cut(name) })),
            Error::SessionElsewhere { opened_by, .. } => Some(json!({ "replica": opened_by })),
            _ => None,
        };
        ErrorData::new(error.code(), error.to_string(), data)
    }
}

/// As `From<&Error>`.
impl From<Error> for ErrorData {
    fn from(error: Error) -> ErrorData {
        ErrorData::from(&error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_errors_have_their_codes_and_the_rest_are_internal() {
        let unknown = ErrorData::from(&Error::UnknownTool { name: "x".into() });
        assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(
            unknown.message,
            "unknown tool `x`: the gateway serves `UPSTREAM__TOOL` names from tools/list"
        );
        assert_eq!(unknown.data, Some(json!({ "tool": "x" })));
        let long = "y".repeat(100_000);
        let cut = ErrorData::from(&Error::UnknownTool { name: long });
        let echoed = cut.data.unwrap()["tool"].as_str().unwrap().to_owned();
        assert_eq!(echoed.chars().count(), escape::MAX_SHOWN);
        assert!(echoed.ends_with('…'));
        assert!(cut.message.len() < 1_000, "{}", cut.message.len());
        let anonymous = ErrorData::from(&Error::NoPrincipal);
        assert_eq!(anonymous.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(anonymous.data, None);
        let session = ErrorData::from(&Error::UnknownSession {
            id: "s-1\u{1b}[2J".into(),
        });
        assert_eq!(session.code, ErrorCode(-32001));
        assert!(
            session
                .message
                .starts_with("session `s-1\\u{1b}[2J` is not known here: it ended, or another "),
            "{}",
            session.message
        );
        assert_eq!(session.data, None);
        let elsewhere = ErrorData::from(&Error::SessionElsewhere {
            id: "s-2".into(),
            opened_by: "b\n".into(),
            here: "a".into(),
        });
        assert_eq!(elsewhere.code, ErrorCode(-32001));
        assert!(
            elsewhere.message.starts_with(
                "session `s-2` was opened by replica `b\\n` of the gateway, not by this one (`a`)"
            ),
            "{}",
            elsewhere.message
        );
        assert_eq!(elsewhere.data, Some(json!({ "replica": "b\n" })));
        let bind = Error::Bind {
            key: "listen.http",
            address: ([127, 0, 0, 1], 1).into(),
            error: std::io::Error::from(std::io::ErrorKind::AddrInUse),
        };
        assert_eq!(bind.code(), ErrorCode::INTERNAL_ERROR);
    }

    #[test]
    fn it_crosses_threads_and_boxes_as_any_error() {
        fn boxable<E: std::error::Error + Send + Sync + 'static>() {}
        boxable::<Error>();
    }

    #[test]
    fn a_message_that_holds_its_cause_has_no_source() {
        let write = Error::LockWrite {
            path: "drift.lock".into(),
            error: std::io::Error::other("disk full"),
        };
        assert_eq!(
            write.to_string(),
            "drift.lock: cannot write the lock: disk full"
        );
        assert!(std::error::Error::source(&write).is_none());
    }

    #[test]
    fn names_found_at_start_come_after_the_config_path() {
        let problems = vec![
            NameProblem::TooLong {
                name: "a__b".into(),
                length: 130,
            },
            NameProblem::Collide {
                first: "a__x.y".into(),
                second: "a__x_y".into(),
                normalised: "a__x_y".into(),
            },
        ];
        let error = Error::Names {
            config: Some("gateway.toml".into()),
            problems,
        };
        let text = error.to_string();
        assert!(text.starts_with("gateway.toml: tool `a__b` is 130 characters"));
        assert!(
            text.contains(
                "rename the upstream shorter, or leave the tool out with `exclude_tools = \
                 [\"b\"]` in upstream `a`\ntools `a__x.y` and `a__x_y` collide"
            ),
            "{text}"
        );
    }
}

//! Fault injection for the replay-safety tests: the library behind
//! `fault-proxy`, a process that sits between an MCP client and an MCP server
//! and breaks chosen `tools/call` exchanges, so end-to-end tests can prove a
//! client never lets a write land twice.
//!
//! Both MCP transports are covered: [`stdio`] (newline-delimited JSON-RPC on
//! a child's stdin and stdout) and [`http`] (streamable HTTP, JSON or SSE
//! responses).
//!
//! # Faults
//!
//! A fault is given as `ACTION:TOOL[@N]` ([`spec::FaultSpec`]):
//!
//! | `ACTION` | the request | the response | the server |
//! |---|---|---|---|
//! | `drop-request` | never forwarded | none | untouched |
//! | `drop-response` | forwarded | swallowed (HTTP: connection closed, nothing sent) | untouched |
//! | `delay-response=MS` | forwarded | delivered MS ms late | untouched |
//! | `kill-server[=MS]` | forwarded | none (HTTP: connection closed after the kill) | SIGKILL MS ms later (default 0) |
//! | `kill-after-response` | forwarded | swallowed | SIGKILL when the response arrives |
//!
//! `TOOL` is a `params.name` or `*`; `@N` picks the Nth matching call of this
//! proxy process, from 1 (default `@1`), `@*` every one. When several specs
//! fire on one call, the first listed wins ([`inject::Injector::on_call`]).
//! Every fault fired is written to the `--log` file ([`log::FaultLog`]).
//!
//! The package's other binary, `counter-server`, is the MCP server those
//! tests drive through the proxy: four tools that declare every hint (one
//! keyed, on an in-memory, redb or Redis store), and an executions file
//! that counts every handler run (see its `--help`).

mod body;
pub mod http;
pub mod inject;
pub mod jsonrpc;
pub mod log;
pub mod process;
pub mod spec;
pub mod sse;
pub mod stdio;

pub use http::{HttpConfig, HttpProxy, Upstream};
pub use inject::{Fired, Injector};
pub use log::FaultLog;
pub use spec::{Action, FaultSpec, Nth, ToolPattern};

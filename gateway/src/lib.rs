#![doc = include_str!("../README.md")]
//!
//! # A call
//!
//! Every `tools/call` goes, in order, each a named step of [`front`]'s
//! call path: name split (*resolve*), drift check (*drift*), policy
//! decision (*decide*), audit entry (*record*: written and synced before
//! anything is forwarded; a log that cannot be written refuses the call;
//! for a read-only, closed-world tool of a trusted upstream, which changes
//! nothing,
//! written before and synced while it runs, its answer held until the
//! entry is on disk),
//! approval if a rule asks for one (*park*, its end logged however it
//! ends), the call through the replay-safe client (*forward*), its result
//! through the `[[redact]]` rules (*check*: masked, or withheld), and a
//! second audit entry with the outcome (*finish*).
//!
//! # Modules
//!
//! One module per domain word:
//!
//! | module | holds |
//! |---|---|
//! | [`config`] | the TOML config: types, parse, validate |
//! | [`policy`] | asserted hints and their sources, rules and which rate limits a call counts against |
//! | [`session`] | which session a call belongs to, its history of forwarded calls, and the look-back conditions of rules (`after`, `count`) |
//! | [`state`] | what replicas share (rate-limit windows, parked calls, drift approvals), in this process or in Redis |
//! | [`log`] | the audit log: its entries and its writer |
//! | [`chain`] | the audit log's hash chain, checkpoints, rotated files and their verification |
//! | [`approval`] | parked calls; the drift lock of approved fingerprints |
//! | [`redact`] | results checked on the way back: built-in detectors, patterns, masking and withholding |
//! | `upstream` (private) | connecting upstreams, following `tools/list_changed` |
//! | `metrics` (private) | every metric's name; recording into the gateway's own Prometheus recorder |
//! | `readiness` (private) | the probes `GET /readyz` asks: every upstream, and what else a call depends on |
//! | `webhook` (private) | telling `[approval] webhook` of each parked call, in the background |
//! | [`front`] | the MCP server clients talk to: the gateway and its builder, the call path, HTTP and stdio, bearer tokens and session ownership, the admin endpoint |
//!
//! # Errors
//!
//! Every fallible function of the crate returns [`Error`] (loading the
//! config gives its [`ConfigError`](config::ConfigError), opening the log
//! its [`LogError`](log::LogError), deciding a parked call its
//! [`ApprovalError`](approval::ApprovalError); each converts into
//! [`Error`]). Its `Display` is the sentence `mcp-hints gateway` prints;
//! [`Error::code`] is its JSON-RPC code, the one mapping the MCP server
//! answers protocol errors through.
//!
//! # Names
//!
//! A client sees an upstream's tool `TOOL` as `UPSTREAM__TOOL`: upstream
//! names are `[A-Za-z0-9-]{1,32}`, so the first `__` splits a name
//! unambiguously, and the result stays within the spec's tool-name
//! characters whenever the upstream's own name does. Names longer than 128
//! characters, and two names that become one once a client replaces the
//! characters outside `[A-Za-z0-9_-]` with `_`, are refused at start, both
//! named.
//!
//! # Logging
//!
//! The crate prints nothing: what it has to say is a [`tracing`] event, and
//! nothing is shown unless the application installs a subscriber
//! (`mcp-hints gateway serve` and `check` print them on stderr). Each event's
//! message is one line, without a `gateway: ` prefix (`mcp-hints gateway`
//! prints `gateway: MESSAGE`); the peer text in it (an upstream's tool name
//! or error, a principal, a stderr line) is escaped already, as are the
//! fields that carry such text. Its fields, for a log pipeline, repeat what
//! the message says. Each target is the module the event comes from:
//!
//! | target (under `mcp_hints_gateway::`) | level | event | fields |
//! |---|---|---|---|
//! | `front::catalogue` | info | start-up: `N tools from M upstreams (K unavailable)` | `tools`, `upstreams`, `unavailable` (counts) |
//! | `front::catalogue` | warn | a tool left out for its name | `upstream`, `tool`, `problem` |
//! | `upstream` | warn | an upstream unavailable, at start or later | `upstream`, `reason` |
//! | `upstream` | warn | an upstream started again (what it kept is gone) | `upstream`, `restarts` (so far) |
//! | `upstream` | info | an upstream serves again, or is reachable now | `upstream` |
//! | `upstream::stderr` ([`STDERR_TARGET`]) | info | a line of a stdio upstream's stderr, the line as the message (`mcp-hints gateway` prints `UPSTREAM: LINE`) | `upstream`, `cut` (the line was cut) |
//! | `front::gateway` | warn | a changed tool list not listed, or not served: the old one stays | `upstream` (when listing failed), `error` |
//! | `front::gateway` | error | the audit log not synced, or its shutdown checkpoint not written, when the gateway stops | `error` |
//! | `front::gateway` | warn | the shared state (`[state] redis`) not answering at start: guarded calls are refused until it does | `error` |
//! | `front::call` | info | a call parked for approval, with the command that approves it | `call_id`, `tool`, `principal` |
//! | `front::call` | info | a call of a drifted tool parked | `call_id`, `tool`, `drift` (what changed) |
//! | `front::call` | info | a parked call abandoned by its client | `call_id`, `tool` |
//! | `front::call` | error | a call's entry that could not be written | `call_id`, `error`, `outcome` (when the call ran) |
//! | `front::serve` | info | serving MCP at an address | `address` |
//! | `front::serve` | warn | `TCP_NODELAY` refused by a connection | `error` |
//! | `front::admin` | info | the admin endpoint's address | `address` |
//! | `front::admin` | error | the admin endpoint stopped | `error` |
//! | `front::admin` | info | the approvals page's address | `address` |
//! | `webhook` | warn | a parked call the webhook was not told of (it answered an error, failed or did not answer in time); the call waits all the same | `call_id`, `error` |
//! | `log` | error | the audit log cannot be written: calls are refused | `path`, `error` |
//! | `log` | info | the audit log is written again | `path` |
//! | `log` | info | the audit log rotated (`[log] max_bytes`) | `path`, `rotated` (the name it has now) |
//! | `log` | error | a periodic checkpoint not written (tried again with the next entry) | `error` |
//!
//! Nothing is logged below info. Where an item's docs say a thing is "said
//! as an event", it is one of these.
//!
//! # Stopping
//!
//! Every stdio upstream runs in a process group of its own, recorded by
//! the gateway that started it (no state is kept per process: two
//! gateways in one program stop only their own).
//! [`front::Gateway::stop_upstreams`] kills them all, and a program
//! serving the gateway does so on every way out, most simply by holding
//! [`front::Gateway::upstream_stopper`]'s guard (`mcp-hints gateway serve`
//! does on a signal, on stdin closed with `--stdio`, and on an error). A
//! start that fails or is cut short stops what it started, and so does
//! [`front::served_tools`].

pub mod approval;
mod budget;
pub mod chain;
pub mod config;
mod error;
pub mod front;
pub mod log;
mod metrics;
pub mod policy;
mod readiness;
pub mod redact;
#[cfg(test)]
mod scratch;
pub mod session;
pub mod state;
mod upstream;
mod webhook;

use std::collections::HashMap;

use mcp_hints_core::name;

pub use self::error::{Error, NameProblem};
pub use self::upstream::STDERR_TARGET;

/// Every default of the serving half, in one place.
pub mod defaults {
    use std::time::Duration;

    /// Tools per `tools/list` page the gateway serves: 100.
    pub const PAGE_SIZE: usize = 100;
    /// How long a call of a drifted tool waits for an approver before it is
    /// refused: 5 minutes (a rule's own `timeout_secs` governs
    /// `require_approval`).
    pub const DRIFT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
    /// The longest namespaced tool name: 128 characters (the spec's SHOULD
    /// for tool names).
    pub const MAX_NAME_LEN: usize = mcp_hints_core::name::MAX_LEN;
    /// The most bytes of one upstream stderr line copied to the gateway's
    /// stderr; the rest of the line is cut.
    pub const STDERR_LINE_BYTES: usize = 8 * 1024;
    /// The first pause before an upstream that could not be reached is
    /// tried again: 5 seconds, doubling up to [`RECONNECT_MAX`].
    pub const RECONNECT_MIN: Duration = Duration::from_secs(5);
    /// The longest pause between tries of an unreachable upstream: 5
    /// minutes.
    pub const RECONNECT_MAX: Duration = Duration::from_secs(300);
    /// How long serving may take to end after a stop signal before it is
    /// cut short: 5 seconds (the endpoint is told to end its sessions;
    /// this bounds a client that keeps a stream open).
    pub const STOP_GRACE: Duration = Duration::from_secs(5);
    /// How long one readiness probe (`GET /readyz`) may take before it
    /// counts as not ready: 2 seconds.
    pub const READINESS_TIMEOUT: Duration = Duration::from_secs(2);
    /// How often the metrics' upkeep runs (histogram samples drained into
    /// their buckets) when nobody scrapes `GET /metrics`: 5 seconds.
    pub const METRICS_UPKEEP: Duration = Duration::from_secs(5);
    /// How long the approvals page's sign-in form stays valid (its
    /// anonymous session and CSRF token): 30 minutes.
    pub const SIGN_IN_FORM_LIFETIME: Duration = Duration::from_secs(30 * 60);
    /// How long an approver's page session lasts unused: 1 hour.
    pub const SESSION_IDLE: Duration = Duration::from_secs(60 * 60);
    /// How long an approver's page session lasts at most, used or not: 12
    /// hours; then they sign in again.
    pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
    /// The most page sessions one admin endpoint keeps (sign-in forms
    /// included): 1,000. Past it the oldest sign-in form goes first.
    pub const MAX_PAGE_SESSIONS: usize = 1_000;
    /// How often an open approvals page reads the parked calls again
    /// without being told of a change (a notice missed while the shared
    /// state's subscriber reconnects, or a record gone when its replica
    /// died): 5 seconds.
    pub const PAGE_REFRESH: Duration = Duration::from_secs(5);
}

/// The separator between the upstream's name and its tool's name.
pub const SEPARATOR: &str = "__";

/// `UPSTREAM__TOOL`.
pub fn namespaced(upstream: &str, tool: &str) -> String {
    format!("{upstream}{SEPARATOR}{tool}")
}

/// `(UPSTREAM, TOOL)` of a namespaced name, split at the first `__`; `None`
/// when it has no `__` or an empty part before it.
pub fn split(name: &str) -> Option<(&str, &str)> {
    name.split_once(SEPARATOR)
        .filter(|(upstream, _)| !upstream.is_empty())
}

/// `name` as a client that keeps only `[A-Za-z0-9_-]` sees it: every other
/// character replaced with `_`.
pub(crate) fn normalised(name: &str) -> String {
    // The same reading as lint's colliding_tool_names rule.
    name::client_safe(name)
}

/// Checks the namespaced names a gateway would serve: none over
/// [`defaults::MAX_NAME_LEN`] characters, no two equal once
/// [`normalised`]. Every problem is reported, each naming the tools
/// involved.
///
/// # Errors
///
/// [`Error::Names`] with every problem (and no config path), when there is
/// one.
pub(crate) fn check_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), Error> {
    let mut problems = Vec::new();
    let mut seen: HashMap<String, &str> = HashMap::new();
    for name in names {
        let length = name.chars().count();
        if length > defaults::MAX_NAME_LEN {
            problems.push(NameProblem::TooLong {
                name: name.to_owned(),
                length,
            });
        }
        let key = normalised(name);
        match seen.get(key.as_str()) {
            Some(first) => problems.push(NameProblem::Collide {
                first: (*first).to_owned(),
                second: name.to_owned(),
                normalised: key,
            }),
            None => {
                seen.insert(key, name);
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Names {
            config: None,
            problems,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_separator_splits() {
        assert_eq!(split("memory__create__x"), Some(("memory", "create__x")));
        assert_eq!(split("__x"), None);
        assert_eq!(split("plain"), None);
    }

    #[test]
    fn names_equal_once_normalised_collide_and_both_are_named() {
        let error = check_names(["a__x.y", "a__x_y", "b__z"])
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "tools `a__x.y` and `a__x_y` collide: both become `a__x_y` once a client replaces \
             the characters outside [A-Za-z0-9_-] with `_`; leave one out with `exclude_tools = \
             [\"x_y\"]` in upstream `a`"
        );
        assert!(check_names(["a__x", "b__x"]).is_ok());
    }

    #[test]
    fn long_names_are_refused() {
        let long = namespaced("u", &"t".repeat(127));
        assert!(
            check_names([long.as_str()])
                .unwrap_err()
                .to_string()
                .contains("130 characters")
        );
    }
}

//! `mcp-hints gateway`: one MCP endpoint in front of many servers, where
//! tool hints become enforced policy (issue 9).
//!
//! The gateway connects every `[[upstream]]` of its config file (a stdio
//! command or a streamable HTTP URL) through the replay-safe client, and
//! serves their tools to its own clients, namespaced `UPSTREAM__TOOL`, each
//! with all four hints explicit (asserted by the operator, else declared by
//! the server, else the spec default) and their sources in `_meta`. Every
//! `tools/call` goes, in order: name split, drift check, policy decision,
//! audit entry (written before anything is forwarded; a log that cannot be
//! written refuses the call), approval if a rule asks for one, the call
//! through the replay-safe client, and a second audit entry with the outcome.
//!
//! One module per domain word (DESIGN.md, "Gateway words"):
//!
//! | module | holds |
//! |---|---|
//! | [`config`] | the TOML config: types, parse, validate |
//! | [`policy`] | asserted hints and their sources, rules, rate limits |
//! | [`log`] | the audit log, and `gateway log` |
//! | [`approval`] | parked calls; the drift lock of approved fingerprints |
//! | [`upstream`] | connecting upstreams, following `tools/list_changed` |
//! | [`front`] | the MCP server clients talk to; HTTP, stdio, the admin endpoint |
//! | [`init`] | `gateway init`: the starter config |
//! | [`check`] | `gateway check`: what `serve` would serve, without serving |
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
//! # Stopping
//!
//! `gateway serve` listens for SIGINT, SIGTERM and SIGHUP from before its
//! first upstream starts, says which one stopped it
//! (`gateway: stopping on SIGTERM`), and kills every stdio upstream's
//! process group before it exits, on every path: a signal while the
//! upstreams are still connecting, a signal while serving, stdin closed
//! (`--stdio`), an error.

pub mod approval;
pub mod check;
pub mod config;
pub mod front;
pub mod init;
pub mod log;
pub mod policy;
pub mod upstream;

use std::collections::HashMap;
use std::sync::Arc;

use mcp_hints_core::{escape, name};

use crate::args::{GatewayArgs, GatewayCommand, ServeArgs};

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
pub fn normalised(name: &str) -> String {
    // The same reading as lint's colliding_tool_names rule.
    name::client_safe(name)
}

/// Checks the namespaced names a gateway would serve: none over
/// [`defaults::MAX_NAME_LEN`] characters, no two equal once
/// [`normalised`]. Every problem is reported, one per line, each naming
/// the tools involved.
///
/// # Errors
///
/// The problems, when there is one.
pub fn check_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut seen: HashMap<String, &str> = HashMap::new();
    for name in names {
        let length = name.chars().count();
        if length > defaults::MAX_NAME_LEN {
            problems.push(format!(
                "tool `{}` is {length} characters long once namespaced, over the {} a client \
                 accepts; rename the upstream shorter",
                escape::shown(name),
                defaults::MAX_NAME_LEN
            ));
        }
        let key = normalised(name);
        match seen.get(key.as_str()) {
            Some(first) => problems.push(format!(
                "tools `{}` and `{}` collide: both become `{}` once a client replaces the \
                 characters outside [A-Za-z0-9_-] with `_`; rename an upstream",
                escape::shown(first),
                escape::shown(name),
                key
            )),
            None => {
                seen.insert(key, name);
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Runs `mcp-hints gateway ...` and returns its exit status.
///
/// # Errors
///
/// A sentence saying why, for exit status 2: a bad config (file, line and
/// key named), colliding tool names, an address that cannot be bound, a log
/// that cannot be opened.
pub async fn run(args: GatewayArgs) -> Result<u8, String> {
    match args.command {
        GatewayCommand::Serve(args) => serve(args).await,
        GatewayCommand::Init(args) => init::run(&args),
        GatewayCommand::Check(args) => check::run(&args).await,
        GatewayCommand::Log(args) => log::run_log(&args),
        GatewayCommand::Approve(args) => {
            approval::run_decide(approval::Decide::Approve, Some(&args.id), &args.endpoint).await
        }
        GatewayCommand::Deny(args) => {
            approval::run_decide(approval::Decide::Deny, Some(&args.id), &args.endpoint).await
        }
        GatewayCommand::Pending(args) => {
            approval::run_decide(approval::Decide::Pending, None, &args.endpoint).await
        }
    }
}

/// `mcp-hints gateway serve`: loads the config, connects the upstreams,
/// and serves until a signal (or, with `--stdio`, until stdin closes).
/// A signal while the upstreams connect stops the start (exit status 0,
/// as a signal while serving).
async fn serve(args: ServeArgs) -> Result<u8, String> {
    let config = config::load(&args.config).map_err(|error| error.to_string())?;
    if !args.stdio && config.listen.http.is_none() {
        // Said before any upstream is started for nothing.
        return Err(format!(
            "{}: `listen.http` is not set: give an address to serve HTTP on, or pass --stdio",
            args.config.display()
        ));
    }
    for warning in config.warnings() {
        eprintln!("gateway: warning: {}", crate::text::one_line(&warning));
    }
    // Listening before anything starts: without a handler, a signal during
    // start-up would end the process at once, its upstreams left running.
    let mut signals = StopSignals::listen();
    // Dropped when this function returns, whichever way it does.
    let _stop = StopUpstreams;
    let starting = front::Gateway::start(config);
    let gateway = tokio::select! {
        biased;
        signal = signals.next() => {
            eprintln!("gateway: stopping on {signal}");
            return Ok(0);
        }
        started = starting => Arc::new(started?),
    };
    let listed = gateway.listed_tools();
    let listed = listed
        .iter()
        .map(|(upstream, tool)| (upstream.as_str(), tool.as_str()));
    for warning in policy::unmatched_tool_globs(gateway.config(), listed) {
        eprintln!("gateway: warning: {warning}");
    }
    gateway.clone().follow_list_changes();
    gateway.clone().retry_unreachable();
    // One listener for the signals: the front is told to stop through this
    // (a watch keeps the word for a front that is not waiting yet).
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let serving = serve_started(&gateway, &args, stopped);
    tokio::pin!(serving);
    let served = tokio::select! {
        biased;
        signal = signals.next() => {
            eprintln!("gateway: stopping on {signal}");
            let _ = stop.send(true);
            tokio::select! {
                served = &mut serving => served,
                () = tokio::time::sleep(defaults::STOP_GRACE) => Ok(()),
                signal = signals.next() => {
                    eprintln!("gateway: stopping at once on a second {signal}");
                    Ok(())
                }
            }
        }
        served = &mut serving => served,
    };
    gateway.close();
    // Gives the tasks rmcp spawned a turn to reap the upstreams the guard
    // kills, and the calls still running theirs to record how they ended.
    upstream::stop_all();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    gateway.finish_log().await;
    served.map(|()| 0)
}

/// The admin endpoint (if configured) and the MCP endpoint of a started
/// gateway, until the MCP endpoint ends.
async fn serve_started(
    gateway: &Arc<front::Gateway>,
    args: &ServeArgs,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> Result<(), String> {
    let stop = async move {
        let mut stopped = stopped;
        // An error: the sender is gone, and with it the signal listener.
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    let admin = match gateway.config().listen.admin_http {
        Some(address) => Some(front::serve_admin(gateway.clone(), address).await?),
        None => None,
    };
    // `serve` refused a config with neither before starting anything.
    let served = match (args.stdio, gateway.config().listen.http) {
        (false, Some(address)) => front::serve_http(gateway.clone(), address, stop).await,
        _ => front::serve_stdio(gateway.clone(), stop).await,
    };
    if let Some(admin) = admin {
        admin.abort();
    }
    served
}

/// Kills every stdio upstream's process group when dropped: the last thing
/// [`serve`] does, whichever way it returns (or unwinds).
struct StopUpstreams;

impl Drop for StopUpstreams {
    fn drop(&mut self) {
        upstream::stop_all();
    }
}

/// The signals that stop `gateway serve`: SIGINT, SIGTERM and SIGHUP on
/// Unix (Ctrl-C elsewhere), their handlers installed by
/// [`listen`](Self::listen), so that from then on they no longer end the
/// process by themselves.
struct StopSignals {
    #[cfg(unix)]
    listening: Vec<(tokio::signal::unix::Signal, &'static str)>,
}

impl StopSignals {
    /// Installs the handlers now (a signal that cannot be listened for
    /// keeps its default action).
    fn listen() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let kinds = [
                (SignalKind::interrupt(), "SIGINT"),
                (SignalKind::terminate(), "SIGTERM"),
                (SignalKind::hangup(), "SIGHUP"),
            ];
            StopSignals {
                listening: kinds
                    .into_iter()
                    .filter_map(|(kind, name)| Some((signal(kind).ok()?, name)))
                    .collect(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// The name of the next signal that comes (`SIGTERM`); never resolves
    /// when none can.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            std::future::poll_fn(|context| {
                for (signal, name) in &mut self.listening {
                    if let std::task::Poll::Ready(Some(())) = signal.poll_recv(context) {
                        return std::task::Poll::Ready(*name);
                    }
                }
                std::task::Poll::Pending
            })
            .await
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            "Ctrl-C"
        }
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
        let error = check_names(["a__x.y", "a__x_y", "b__z"]).unwrap_err();
        assert_eq!(
            error,
            "tools `a__x.y` and `a__x_y` collide: both become `a__x_y` once a client replaces \
             the characters outside [A-Za-z0-9_-] with `_`; rename an upstream"
        );
        assert!(check_names(["a__x", "b__x"]).is_ok());
    }

    #[test]
    fn long_names_are_refused() {
        let long = namespaced("u", &"t".repeat(127));
        assert!(
            check_names([long.as_str()])
                .unwrap_err()
                .contains("130 characters")
        );
    }
}

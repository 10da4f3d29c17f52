//! `mcp-hints gateway`: the command line of the gateway
//! ([`mcp_hints_gateway`]): `serve` with its signals, `init`, `check`,
//! `log`, and the admin client behind `approve`, `deny` and `pending`.
//!
//! | module | holds |
//! |---|---|
//! | [`admin`] | `approve`, `deny`, `pending`: the admin endpoint's client |
//! | [`check`] | `gateway check`: what `serve` would serve, without serving |
//! | [`events`] | the gateway library's events as `serve`'s and `check`'s stderr lines |
//! | [`init`] | `gateway init`: the starter config |
//! | [`log`] | `gateway log`: the audit log's entries, filtered, as a table |
//!
//! # Stopping
//!
//! `gateway serve` listens for SIGINT, SIGTERM and SIGHUP from before its
//! first upstream starts, says which one stopped it
//! (`gateway: stopping on SIGTERM`), and kills every stdio upstream's
//! process group before it exits, on every path: a signal while the
//! upstreams are still connecting, a signal while serving, stdin closed
//! (`--stdio`), an error.

pub mod admin;
pub mod check;
pub mod events;
pub mod init;
pub mod log;

use std::sync::Arc;

use mcp_hints_gateway::{config, defaults, front, policy};

use crate::args::{GatewayArgs, GatewayCommand, ServeArgs};

/// Runs `mcp-hints gateway ...` and returns its exit status.
///
/// # Errors
///
/// A sentence saying why, for exit status 2: a bad config (file, line and
/// key named), colliding tool names, an address that cannot be bound, a log
/// that cannot be opened.
pub async fn run(args: GatewayArgs) -> Result<u8, String> {
    match args.command {
        GatewayCommand::Serve(args) => {
            events::print_events();
            serve(args).await
        }
        GatewayCommand::Init(args) => init::run(&args),
        GatewayCommand::Check(args) => {
            events::print_events();
            check::run(&args).await
        }
        GatewayCommand::Log(args) => log::run_log(&args),
        GatewayCommand::Approve(args) => {
            let by = args.by.as_deref();
            admin::run_decide(admin::Decide::Approve, Some(&args.id), by, &args.endpoint).await
        }
        GatewayCommand::Deny(args) => {
            let by = args.by.as_deref();
            admin::run_decide(admin::Decide::Deny, Some(&args.id), by, &args.endpoint).await
        }
        GatewayCommand::Pending(args) => {
            admin::run_decide(admin::Decide::Pending, None, None, &args.endpoint).await
        }
    }
}

/// Refuses `config` for `serve` without `--stdio` when it sets no
/// `listen.http`, as `serve` and `check` both say it.
pub(crate) fn needs_listen(config: &config::Config, stdio: bool) -> Result<(), String> {
    if stdio || config.listen.http.is_some() {
        return Ok(());
    }
    Err(format!(
        "{}: `listen.http` is not set: give an address to serve HTTP on, or pass --stdio",
        config.path.display()
    ))
}

/// `mcp-hints gateway serve`: loads the config, connects the upstreams,
/// and serves until a signal (or, with `--stdio`, until stdin closes).
/// A signal while the upstreams connect stops the start (exit status 0,
/// as a signal while serving).
async fn serve(args: ServeArgs) -> Result<u8, String> {
    let config = config::load(&args.config).map_err(|error| error.to_string())?;
    // Said before any upstream is started for nothing.
    needs_listen(&config, args.stdio)?;
    for warning in config.warnings() {
        eprintln!("gateway: warning: {}", crate::text::one_line(&warning));
    }
    // Listening before anything starts: without a handler, a signal during
    // start-up would end the process at once, its upstreams left running.
    let mut signals = StopSignals::listen();
    // A start that fails, or is dropped here on a signal, stops the
    // upstreams it started. Metrics are kept for the admin endpoint's
    // `GET /metrics` (in the gateway's own recorder: this command installs
    // no global one either).
    let starting = front::Gateway::builder(config).metrics(true).start();
    let gateway = tokio::select! {
        biased;
        signal = signals.next() => {
            eprintln!("gateway: stopping on {signal}");
            return Ok(0);
        }
        started = starting => started.map_err(|error| error.to_string())?,
    };
    // Dropped when this function returns, whichever way it does (or
    // unwinds): every stdio upstream's process group is killed.
    let _stop = gateway.upstream_stopper();
    let listed = gateway.listed_tools();
    let listed = listed
        .iter()
        .map(|(upstream, tool)| (upstream.as_str(), tool.as_str()));
    for warning in policy::unmatched_tool_globs(gateway.config(), listed) {
        eprintln!("gateway: warning: {warning}");
    }
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
    gateway.shutdown().await;
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
        Some(address) => Some(
            front::serve_admin(gateway.clone(), address)
                .await
                .map_err(|error| error.to_string())?,
        ),
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
    served.map_err(|error| error.to_string())
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

//! `fault-proxy`: relay MCP between a client and a server, injecting faults
//! into chosen `tools/call` exchanges.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use mcp_hints_faults::http::not_loopback;
use mcp_hints_faults::process::ShutdownSignals;
use mcp_hints_faults::{FaultLog, FaultSpec, HttpConfig, HttpProxy, Injector, Upstream, stdio};

/// Relay MCP between a client and a server, injecting faults into chosen
/// `tools/call` exchanges.
#[derive(Parser)]
#[command(name = "fault-proxy", version, after_help = SPEC_HELP)]
struct Cli {
    /// Inject a fault, ACTION:TOOL[@N] (repeatable; the first listed wins)
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<FaultSpec>,
    /// Append one JSON line per fault fired to FILE
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    #[command(subcommand)]
    mode: Mode,
}

const SPEC_HELP: &str = "\
SPEC is ACTION:TOOL[@N]:
  ACTION  drop-request         the request never reaches the server
          drop-response        forwarded; the server's response is swallowed
          delay-response=MS    forwarded; the response is held MS milliseconds
          kill-server[=MS]     forwarded; the server gets SIGKILL MS ms later (default 0)
          kill-after-response  forwarded; the response is swallowed and the server killed
  TOOL    the tools/call params.name, or * for any tool
  @N      the Nth matching call, from 1 (default @1); @* for every one";

#[derive(Subcommand)]
enum Mode {
    /// Run CMD as a stdio MCP server and relay the proxy's stdin and stdout to it
    Stdio {
        /// The server command and its arguments, after `--`
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<OsString>,
    },
    /// Relay streamable HTTP from a loopback address to an upstream server
    Http {
        /// Where to listen, a loopback IP:PORT (port 0 picks one)
        #[arg(long, value_name = "ADDR", value_parser = parse_listen)]
        listen: SocketAddr,
        /// The upstream server, http://HOST:PORT (each request keeps its path)
        #[arg(long, value_name = "URL")]
        upstream: Upstream,
        /// The upstream's process id, for kill-server and kill-after-response
        #[arg(long, value_name = "PID", value_parser = clap::value_parser!(i32).range(1..))]
        upstream_pid: Option<i32>,
    },
}

fn parse_listen(listen: &str) -> Result<SocketAddr, String> {
    let address: SocketAddr = listen
        .parse()
        .map_err(|_| format!("`{listen}` is not IP:PORT: write `127.0.0.1:0`, for example"))?;
    if !address.ip().is_loopback() {
        return Err(not_loopback(&address));
    }
    Ok(address)
}

fn main() {
    let cli = Cli::parse();
    if let Mode::Http {
        upstream_pid: None, ..
    } = cli.mode
        && let Some(spec) = cli.faults.iter().find(|spec| spec.action.kills_server())
    {
        Cli::command()
            .error(
                ErrorKind::MissingRequiredArgument,
                format!("`--fault {spec}` kills the upstream: give its process id with `--upstream-pid PID`"),
            )
            .exit();
    }
    let log = match &cli.log {
        Some(path) => match FaultLog::open(path) {
            Ok(log) => log,
            Err(error) => {
                eprintln!(
                    "fault-proxy: cannot open the fault log `{}`: {error}",
                    path.display()
                );
                std::process::exit(1);
            }
        },
        None => FaultLog::disabled(),
    };
    let injector = Arc::new(Injector::new(cli.faults, log));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("fault-proxy: cannot start the async runtime: {error}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(cli.mode, injector));
    // Not a return from `main`: dropping the runtime would wait for the
    // blocking read of our stdin, which may never end.
    std::process::exit(code);
}

async fn run(mode: Mode, injector: Arc<Injector>) -> i32 {
    match mode {
        Mode::Stdio { command } => {
            let Some((program, args)) = command.split_first() else {
                return 2;
            };
            match stdio::run(program, args, injector).await {
                Ok(code) => code,
                Err(error) => {
                    eprintln!("fault-proxy: {error}");
                    1
                }
            }
        }
        Mode::Http {
            listen,
            upstream,
            upstream_pid,
        } => {
            let config = HttpConfig {
                listen,
                upstream,
                upstream_pid,
            };
            let mut signals = match ShutdownSignals::install() {
                Ok(signals) => signals,
                Err(error) => {
                    eprintln!("fault-proxy: cannot handle SIGINT and SIGTERM: {error}");
                    return 1;
                }
            };
            let proxy = match HttpProxy::bind(config, injector).await {
                Ok(proxy) => proxy,
                Err(error) => {
                    eprintln!("fault-proxy: cannot listen on {listen}: {error}");
                    return 1;
                }
            };
            match proxy.local_addr() {
                Ok(address) => eprintln!("fault-proxy: listening on http://{address}"),
                Err(error) => {
                    eprintln!("fault-proxy: cannot read the bound address: {error}");
                    return 1;
                }
            }
            tokio::select! {
                never = proxy.serve() => match never {},
                signal = signals.recv() => 128 + signal,
            }
        }
    }
}

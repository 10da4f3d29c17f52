//! The latency the gateway adds to one `tools/call`, side by side in one run:
//! the read-only `list_notes` of the example `notes` server, called with
//! rmcp's client over six set-ups, everything on loopback:
//!
//! 1. direct over stdio: the client spawns `notes` and calls it;
//! 2. through the gateway over stdio (`mcp-hints gateway serve --stdio`,
//!    spawned by the client) with a stdio upstream: the like-for-like peer
//!    of 1;
//! 3. through the gateway over streamable HTTP with a stdio upstream;
//! 4. the same path through PyPI's `mcp-proxy` 0.13.0 (streamable HTTP in
//!    front of the same stdio `notes`, on a free loopback port, `/mcp`): the
//!    like-for-like peer of 3. It runs with `--log-level WARNING`, so that
//!    uvicorn's access line per request (INFO) is not counted against it;
//!    it is installed by this program into a venv under the target
//!    directory (`target/bench-peers/venv`, `python3 -m venv` and pip),
//!    reused when it holds exactly that version;
//! 5. direct over streamable HTTP: `notes --http 127.0.0.1:0`;
//! 6. through the gateway over HTTP with an HTTP upstream: `url =
//!    "http://ADDR/mcp"` of a `notes --http`: the like-for-like peer of 5.
//!
//! Each gateway has one `[[client]]` with a bearer token, one trusted
//! `[[upstream]]` named `notes` (so the tool is `notes__list_notes`), and
//! the durable audit log of a real deployment: every call's `decided`
//! entry is synced to disk before the call goes on. `--log-dir DIR` puts
//! the logs there instead of the temporary directory: on a tmpfs such as
//! `/dev/shm` a sync costs nothing, which shows the gateway's cost apart
//! from the disk's.
//!
//! Every set-up is started, checked and warmed up (`--warmup` calls), then
//! `--rounds` interleaved rounds time `--batch` calls of each, one call at a
//! time; the order of the set-ups rotates each round. Every call's latency
//! is kept; the program prints each set-up's p50 and p99 over all of them,
//! and the ratios gateway / direct (stdio and HTTP) and gateway / mcp-proxy.
//! The goal, that the gateway adds at most 1.3x at p50, is printed beside
//! the ratio, not asserted.
//!
//! Every process it starts is stopped when it ends, however it ends (an
//! error, Ctrl-C, SIGTERM): SIGTERM, then SIGKILL after 10 s; the gateway
//! stops its upstreams' process groups itself, and `mcp-proxy` runs in a
//! process group of its own, signalled whole.
//!
//! Run (`mcp-hints` and `notes` are found beside this executable):
//!
//! ```sh
//! cargo build --release -p mcp-hints-cli -p mcp-hints-examples && cargo run --release -p mcp-hints-bench --bin gateway_bench -- [--rounds N (20)] [--batch N (100)] [--warmup N (200)] [--log-dir DIR]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcp_hints_bench::peers::{
    Binaries, Client, Process, TempDir, binaries, gateway_config, http_client, install_mcp_proxy,
    percentile, start_gateway, start_mcp_proxy, start_notes_http, toml_string, toml_string_list,
};
use mcp_hints_bench::{median, peers};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

/// How long a first call may keep failing before a set-up counts as broken
/// (the gateway may still be connecting its upstream).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one call may take before the run stops with an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The gateway's ratio goal at p50 (shown, never asserted).
const GOAL_P50: f64 = 1.3;

/// The options, as the README's command gives them.
#[derive(clap::Parser)]
#[command(about = "the latency of one tools/call through the gateway and beside it")]
struct Options {
    /// Interleaved rounds per set-up.
    #[arg(long, default_value_t = 20, value_parser = peers::at_least_one)]
    rounds: usize,
    /// Calls per round.
    #[arg(long, default_value_t = 100, value_parser = peers::at_least_one)]
    batch: usize,
    /// Calls per set-up before the first round, not counted.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Where the gateways' audit logs go [default: the scratch directory].
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    peers::main("gateway_bench", |options: Options| async move {
        run(&options).await
    })
}

async fn run(options: &Options) -> Result<(), String> {
    let binaries = binaries(None)?;
    let proxy = install_mcp_proxy(&binaries.target.join("bench-peers").join("venv"))?;
    // reqwest is built with rustls and no default crypto provider when the
    // workspace's `mcp-hints` is in the same build (see cli/Cargo.toml); an
    // error means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scratch = TempDir::new(&std::env::temp_dir())?;
    // Removed at the end like the scratch directory.
    let log_scratch = options.log_dir.as_deref().map(TempDir::new).transpose()?;
    let token = format!(
        "bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    );
    let logs = log_scratch.as_ref().map_or(&scratch.0, |dir| &dir.0);
    let mut setups = start_setups(&binaries, &proxy, &scratch, logs, &token).await?;
    measure(&mut setups, options).await?;
    report(&setups, options)?;
    for setup in &mut setups {
        setup.close().await;
    }
    // The processes are stopped as `setups` drops, then the scratch
    // directory is removed.
    drop(setups);
    drop(scratch);
    Ok(())
}

/// Starts the six set-ups, in the order of the module's list: `proxy` is
/// the `mcp-proxy` script, `logs` the gateways' audit-log directory and
/// `token` their client's bearer token.
async fn start_setups(
    binaries: &Binaries,
    proxy: &Path,
    scratch: &TempDir,
    logs: &Path,
    token: &str,
) -> Result<Vec<Setup>, String> {
    let notes = binaries.notes.to_string_lossy().into_owned();
    eprintln!("gateway_bench: starting the six set-ups");
    let mut setups = Vec::new();

    // 1. Direct over stdio.
    let mut command = tokio::process::Command::new(&binaries.notes);
    command.kill_on_drop(true);
    let transport = TokioChildProcess::new(command)
        .map_err(|error| format!("cannot start {notes}: {error}"))?;
    let client = ().serve(transport).await.map_err(|error| {
        format!("direct stdio: the client could not initialize with {notes}: {error}")
    })?;
    setups.push(Setup::new(
        "direct, stdio",
        "list_notes",
        client,
        Vec::new(),
    ));

    // 2. The gateway over stdio, stdio upstream.
    let upstream = format!(
        "command = {}",
        toml_string_list(std::slice::from_ref(&notes))
    );
    let config = gateway_config(scratch, logs, "stdio-front", token, &upstream)?;
    let mut command = tokio::process::Command::new(&binaries.gateway);
    command
        .args(["gateway", "serve", "--stdio", "--config"])
        .arg(&config)
        .kill_on_drop(true);
    let transport = TokioChildProcess::new(command)
        .map_err(|error| format!("cannot start the gateway over stdio: {error}"))?;
    let client = ().serve(transport).await.map_err(|error| {
        format!("gateway, stdio: the client could not initialize with the gateway: {error}")
    })?;
    setups.push(Setup::new(
        "gateway over stdio, stdio upstream",
        "notes__list_notes",
        client,
        Vec::new(),
    ));

    // 3. The gateway over HTTP, stdio upstream.
    let (gateway, url) = start_gateway(binaries, scratch, logs, "stdio", token, &upstream).await?;
    let client = http_client(&url, Some(token), "gateway, stdio upstream").await?;
    setups.push(Setup::new(
        "gateway over HTTP, stdio upstream",
        "notes__list_notes",
        client,
        vec![gateway],
    ));

    // 4. mcp-proxy, stdio upstream.
    let (proxy, url) = start_mcp_proxy(proxy, &binaries.notes, &[]).await?;
    let client = http_client(&url, None, "mcp-proxy, stdio upstream").await?;
    setups.push(Setup::new(
        "mcp-proxy 0.13.0, stdio upstream",
        "list_notes",
        client,
        vec![proxy],
    ));

    // 5. Direct over HTTP.
    let (server, url) = start_notes_http(&binaries.notes).await?;
    let client = http_client(&url, None, "direct HTTP").await?;
    setups.push(Setup::new(
        "direct, HTTP",
        "list_notes",
        client,
        vec![server],
    ));

    // 6. The gateway, HTTP upstream (a notes of its own).
    let (server, upstream_url) = start_notes_http(&binaries.notes).await?;
    let upstream = format!("url = {}", toml_string(&upstream_url));
    let (gateway, url) = start_gateway(binaries, scratch, logs, "http", token, &upstream).await?;
    let client = http_client(&url, Some(token), "gateway, HTTP upstream").await?;
    // The gateway first, so that it is stopped before its upstream.
    setups.push(Setup::new(
        "gateway over HTTP, HTTP upstream",
        "notes__list_notes",
        client,
        vec![gateway, server],
    ));
    Ok(setups)
}

/// Checks every set-up answers, warms each up, then times the interleaved
/// rounds; the latencies are kept in each set-up.
async fn measure(setups: &mut [Setup], options: &Options) -> Result<(), String> {
    let Options {
        rounds,
        batch,
        warmup,
        ..
    } = *options;
    for setup in setups.iter_mut() {
        setup.ready().await?;
    }
    eprintln!("gateway_bench: warming up ({warmup} calls each)");
    for setup in setups.iter_mut() {
        for _ in 0..warmup {
            setup.call().await?;
        }
        setup.latencies.clear();
    }
    eprintln!("gateway_bench: {rounds} rounds of {batch} calls each");
    for round in 0..rounds {
        for offset in 0..setups.len() {
            let index = (round + offset) % setups.len();
            let setup = &mut setups[index];
            for _ in 0..batch {
                setup.call().await?;
            }
        }
    }
    Ok(())
}

/// Prints each set-up's p50 and p99 and the ratios.
///
/// # Errors
///
/// When `setups` are not the six of [`start_setups`].
fn report(setups: &[Setup], options: &Options) -> Result<(), String> {
    let Options {
        rounds,
        batch,
        warmup,
        ..
    } = *options;
    let figures: Vec<(f64, f64)> = setups
        .iter()
        .map(|setup| {
            let micros: Vec<f64> = setup
                .latencies
                .iter()
                .map(|latency| latency.as_secs_f64() * 1e6)
                .collect();
            (median(&micros), percentile(&micros, 0.99))
        })
        .collect();
    println!(
        "{rounds} interleaved rounds of {batch} calls per set-up (after {warmup} warm-up calls \
         each), `tools/call` of `list_notes`, one at a time, loopback\n"
    );
    println!("| set-up | p50 | p99 |");
    println!("|---|---|---|");
    for (setup, (p50, p99)) in setups.iter().zip(&figures) {
        println!("| {} | {p50:.0} µs | {p99:.0} µs |", setup.name);
    }
    let [
        direct_stdio,
        gateway_stdio,
        gateway_http_stdio,
        proxy,
        direct_http,
        gateway_http,
    ] = figures[..]
    else {
        return Err("six set-ups expected".to_owned());
    };
    let goal = format!(" (goal <= {GOAL_P50}x)");
    println!("\n| ratio | p50 | p99 |");
    println!("|---|---|---|");
    let ratio = |label: &str, over: (f64, f64), under: (f64, f64), goal: &str| {
        println!(
            "| {label} | {:.2}x{goal} | {:.2}x |",
            over.0 / under.0,
            over.1 / under.1
        );
    };
    ratio(
        "gateway over stdio / direct, stdio",
        gateway_stdio,
        direct_stdio,
        &goal,
    );
    ratio(
        "gateway over HTTP, HTTP upstream / direct, HTTP",
        gateway_http,
        direct_http,
        &goal,
    );
    ratio(
        "gateway over HTTP / mcp-proxy, both with a stdio upstream (like for like)",
        gateway_http_stdio,
        proxy,
        "",
    );
    Ok(())
}

/// One way of reaching `list_notes`: its client, the processes behind it
/// (stopped when it drops, in order) and every timed call's latency.
struct Setup {
    name: &'static str,
    request: CallToolRequestParams,
    client: Option<Client>,
    latencies: Vec<Duration>,
    // Dropped after `client` (fields drop in order): the client is gone
    // before its server is signalled.
    _processes: Vec<Process>,
}

impl Setup {
    fn new(
        name: &'static str,
        tool: &'static str,
        client: Client,
        processes: Vec<Process>,
    ) -> Setup {
        Setup {
            name,
            request: CallToolRequestParams::new(tool),
            client: Some(client),
            latencies: Vec::new(),
            _processes: processes,
        }
    }

    fn client(&self) -> Result<&Client, String> {
        self.client
            .as_ref()
            .ok_or_else(|| format!("{}: the client is closed", self.name))
    }

    /// One call, timed; an error or a tool error stops the run.
    async fn call(&mut self) -> Result<(), String> {
        let client = self.client()?;
        let started = Instant::now();
        let answer = tokio::time::timeout(CALL_TIMEOUT, client.call_tool(self.request.clone()))
            .await
            .map_err(|_| {
                format!(
                    "{}: `{}` did not answer within {CALL_TIMEOUT:?}",
                    self.name, self.request.name
                )
            })?;
        let elapsed = started.elapsed();
        match answer {
            Ok(result) if result.is_error != Some(true) => {
                self.latencies.push(elapsed);
                Ok(())
            }
            Ok(result) => Err(format!(
                "{}: `{}` answered with a tool error: {}",
                self.name,
                self.request.name,
                serde_json::to_string(&result.content).unwrap_or_default()
            )),
            Err(error) => Err(format!(
                "{}: `{}` failed: {error}",
                self.name, self.request.name
            )),
        }
    }

    /// Calls until one succeeds, for at most [`READY_TIMEOUT`].
    async fn ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match self.call().await {
                Ok(()) => {
                    self.latencies.clear();
                    return Ok(());
                }
                Err(error) if Instant::now() >= deadline => return Err(error),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Ends the client's session (bounded); its processes stop on drop.
    async fn close(&mut self) {
        if let Some(mut client) = self.client.take() {
            let _ = client.close_with_timeout(Duration::from_secs(5)).await;
        }
    }
}

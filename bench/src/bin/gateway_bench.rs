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

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_hints_bench::median;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};

type Client = RunningService<RoleClient, ()>;

/// The PyPI peer, pinned.
const MCP_PROXY: (&str, &str) = ("mcp-proxy", "0.13.0");
/// The build that makes the binaries this program runs.
const BUILD: &str = "cargo build --release -p mcp-hints-cli -p mcp-hints-examples";
/// How long a process may take to say (or show) that it serves.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a first call may keep failing before a set-up counts as broken
/// (the gateway may still be connecting its upstream).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one call may take before the run stops with an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped process has between SIGTERM and SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many of a process's last stderr lines an error shows.
const STDERR_TAIL: usize = 40;
/// The gateway's ratio goal at p50 (shown, never asserted).
const GOAL_P50: f64 = 1.3;

struct Options {
    rounds: usize,
    batch: usize,
    warmup: usize,
    /// Where the gateways' audit logs go; `None`: the scratch directory.
    log_dir: Option<PathBuf>,
}

const USAGE: &str =
    "usage: gateway_bench [--rounds N (20)] [--batch N (100)] [--warmup N (200)] [--log-dir DIR]";

fn options() -> Result<Options, String> {
    let mut options = Options {
        rounds: 20,
        batch: 100,
        warmup: 200,
        log_dir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let slot = match arg.as_str() {
            "--log-dir" => {
                let dir = args
                    .next()
                    .ok_or_else(|| format!("`--log-dir` needs a directory\n{USAGE}"))?;
                options.log_dir = Some(PathBuf::from(dir));
                continue;
            }
            "--rounds" => &mut options.rounds,
            "--batch" => &mut options.batch,
            "--warmup" => &mut options.warmup,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        };
        let minimum = if arg == "--warmup" { 0 } else { 1 };
        *slot = args
            .next()
            .and_then(|value| value.parse().ok())
            .filter(|&value: &usize| value >= minimum)
            .ok_or_else(|| format!("`{arg}` needs a number of at least {minimum}\n{USAGE}"))?;
    }
    Ok(options)
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("gateway_bench: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("gateway_bench: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // On a signal the benchmark's future is dropped, and with it every
    // process guard: what was started is stopped.
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run(&options) => outcome,
            signal = stop_signal() => Err(format!("stopped by {signal}")),
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("gateway_bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves at Ctrl-C (SIGINT) or SIGTERM; a handler that cannot be
/// installed is not awaited.
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = interrupt => "SIGINT",
        () = terminate => "SIGTERM",
    }
}

/// The binaries beside this executable, and the target directory.
struct Binaries {
    gateway: PathBuf,
    notes: PathBuf,
    target: PathBuf,
}

fn binaries() -> Result<Binaries, String> {
    let exe = std::env::current_exe().map_err(|error| format!("current_exe: {error}"))?;
    let dir = exe
        .parent()
        .ok_or("the bench's own executable has no directory")?;
    let beside = |name: &str| -> Result<PathBuf, String> {
        let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "`{name}` is not beside this executable ({}): build it first with `{BUILD}`",
                path.display()
            ))
        }
    };
    Ok(Binaries {
        gateway: beside("mcp-hints")?,
        notes: beside("notes")?,
        // target/release/gateway_bench: the target directory is two up.
        target: dir.parent().unwrap_or(dir).to_path_buf(),
    })
}

async fn run(options: &Options) -> Result<(), String> {
    let Options {
        rounds,
        batch,
        warmup,
        ref log_dir,
    } = *options;
    let binaries = binaries()?;
    let proxy = install_mcp_proxy(&binaries.target.join("bench-peers").join("venv"))?;
    // reqwest is built with rustls and no default crypto provider when the
    // workspace's `mcp-hints` is in the same build (see cli/Cargo.toml); an
    // error means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scratch = TempDir::new(&std::env::temp_dir())?;
    // Removed at the end like the scratch directory.
    let log_scratch = log_dir.as_deref().map(TempDir::new).transpose()?;
    let token = format!(
        "bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    );
    let notes = binaries.notes.to_string_lossy().into_owned();

    let logs = log_scratch.as_ref().map_or(&scratch.0, |dir| &dir.0);
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
    let config = gateway_config(&scratch, logs, "stdio-front", &token, &upstream)?;
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
    let (gateway, url) =
        start_gateway(&binaries, &scratch, logs, "stdio", &token, &upstream).await?;
    let client = http_client(&url, Some(&token), "gateway, stdio upstream").await?;
    setups.push(Setup::new(
        "gateway over HTTP, stdio upstream",
        "notes__list_notes",
        client,
        vec![gateway],
    ));

    // 4. mcp-proxy, stdio upstream.
    let (proxy, url) = start_mcp_proxy(&proxy, &binaries.notes).await?;
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
    let (gateway, url) =
        start_gateway(&binaries, &scratch, logs, "http", &token, &upstream).await?;
    let client = http_client(&url, Some(&token), "gateway, HTTP upstream").await?;
    // The gateway first, so that it is stopped before its upstream.
    setups.push(Setup::new(
        "gateway over HTTP, HTTP upstream",
        "notes__list_notes",
        client,
        vec![gateway, server],
    ));

    for setup in &mut setups {
        setup.ready().await?;
    }
    eprintln!("gateway_bench: warming up ({warmup} calls each)");
    for setup in &mut setups {
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

    for setup in &mut setups {
        setup.close().await;
    }
    // The processes are stopped as `setups` drops, then the scratch
    // directory is removed.
    drop(setups);
    drop(scratch);
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

/// An rmcp client over streamable HTTP, with a bearer token if given.
async fn http_client(url: &str, token: Option<&str>, what: &str) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    config.auth_header = token.map(str::to_owned);
    let transport = StreamableHttpClientTransport::from_config(config);
    match tokio::time::timeout(START_TIMEOUT, ().serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => Err(format!(
            "{what}: the client could not initialize with {url}: {error}"
        )),
        Err(_) => Err(format!(
            "{what}: {url} did not finish `initialize` within {START_TIMEOUT:?}"
        )),
    }
}

/// Writes the gateway's config into `scratch` and starts `mcp-hints gateway
/// serve` on it; its URL once it says where it serves.
async fn start_gateway(
    binaries: &Binaries,
    scratch: &TempDir,
    logs: &Path,
    label: &str,
    token: &str,
    upstream: &str,
) -> Result<(Process, String), String> {
    let path = gateway_config(scratch, logs, label, token, upstream)?;
    let mut command = Command::new(&binaries.gateway);
    command
        .args(["gateway", "serve", "--config"])
        .arg(&path)
        .env("NO_COLOR", "1");
    let name = format!("gateway ({label} upstream)");
    let mut process = Process::spawn(name, command, false)?;
    let url = process
        .announced("gateway: serving MCP over streamable HTTP at ")
        .await?;
    Ok((process, url))
}

/// Writes a gateway config into `scratch`, its audit log in `logs`; its
/// path.
fn gateway_config(
    scratch: &TempDir,
    logs: &Path,
    label: &str,
    token: &str,
    upstream: &str,
) -> Result<PathBuf, String> {
    let log = logs.join(format!("audit-{label}.jsonl"));
    let config = format!(
        r#"[listen]
http = "127.0.0.1:0"

[[client]]
principal = "bench"
token = {token}

[log]
path = {log}

[[upstream]]
name = "notes"
{upstream}
trusted = true
"#,
        token = toml_string(token),
        log = toml_string(&log.to_string_lossy()),
    );
    let path = scratch.0.join(format!("gateway-{label}.toml"));
    std::fs::write(&path, config).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(path)
}

/// Starts `notes --http 127.0.0.1:0`; its URL once it says where it serves.
async fn start_notes_http(notes: &Path) -> Result<(Process, String), String> {
    let mut command = Command::new(notes);
    command.args(["--http", "127.0.0.1:0"]);
    let mut process = Process::spawn("notes --http".to_owned(), command, false)?;
    let url = process
        .announced("notes: serving MCP over streamable HTTP at ")
        .await?;
    Ok((process, url))
}

/// Starts `mcp-proxy` in front of the stdio `notes` on a free loopback
/// port, in a process group of its own; its URL once the port accepts.
async fn start_mcp_proxy(proxy: &Path, notes: &Path) -> Result<(Process, String), String> {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|error| format!("no free loopback port for mcp-proxy: {error}"))?
        .port();
    let mut command = Command::new(proxy);
    command
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--log-level", "WARNING", "--"])
        .arg(notes);
    let mut process = Process::spawn("mcp-proxy".to_owned(), command, true)?;
    let deadline = Instant::now() + START_TIMEOUT;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        process.check_running()?;
        if Instant::now() >= deadline {
            return Err(process.failure(&format!(
                "did not listen on 127.0.0.1:{port} within {START_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((process, format!("http://127.0.0.1:{port}/mcp")))
}

/// `mcp-proxy` at its pinned version in the venv `venv`, made and installed
/// there with `python3 -m venv` and pip unless it is there already; the path
/// of its script.
fn install_mcp_proxy(venv: &Path) -> Result<PathBuf, String> {
    let (package, version) = MCP_PROXY;
    let scripts = venv.join("bin");
    let python = scripts.join("python");
    let script = scripts.join(package);
    let installed = || -> Option<String> {
        let output = Command::new(&python)
            .args([
                "-c",
                "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
                package,
            ])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    if script.is_file() && installed().as_deref() == Some(version) {
        eprintln!(
            "gateway_bench: {package} {version} already in {}",
            venv.display()
        );
        return Ok(script);
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv)
            .map_err(|error| format!("removing {}: {error}", venv.display()))?;
    }
    eprintln!(
        "gateway_bench: installing {package} {version} into {}",
        venv.display()
    );
    let mut make = Command::new("python3");
    make.args(["-m", "venv"]).arg(venv);
    finish(
        "making the Python virtual environment (is python3 with its venv module installed?)",
        &mut make,
    )?;
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
    ])
    .arg(format!("{package}=={version}"));
    finish(
        &format!("installing {package} {version} with pip (it needs PyPI)"),
        &mut pip,
    )?;
    match installed() {
        Some(found) if found == version && script.is_file() => Ok(script),
        found => Err(format!(
            "after pip, {package} is {found:?} in {}, not {version} with its `{package}` script",
            venv.display()
        )),
    }
}

/// Runs `command` to completion; `what` with its command line and output
/// when it cannot start or fails.
fn finish(what: &str, command: &mut Command) -> Result<(), String> {
    let line = format!("{command:?}");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("{what}: cannot run {line}: {error}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what}: {line} failed with {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout).trim_end(),
        String::from_utf8_lossy(&output.stderr).trim_end(),
    ))
}

/// A process this program started: its stderr is read by a thread (the
/// last lines kept for errors, the lines announcing a URL passed on), and
/// it is stopped on drop.
struct Process {
    name: String,
    child: Child,
    /// Signalled as a whole process group (it leads one).
    group: bool,
    stderr: Arc<Mutex<VecDeque<String>>>,
    lines: Receiver<String>,
}

impl Process {
    fn spawn(name: String, mut command: Command, group: bool) -> Result<Process, String> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if group {
            command.process_group(0);
        }
        let mut child = command
            .spawn()
            .map_err(|error| format!("cannot start {name} ({command:?}): {error}"))?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let (sender, lines) = mpsc::channel();
        if let Some(pipe) = child.stderr.take() {
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { return };
                    let _ = sender.send(line.clone());
                    if let Ok(mut tail) = stderr.lock() {
                        if tail.len() == STDERR_TAIL {
                            tail.pop_front();
                        }
                        tail.push_back(line);
                    }
                }
            });
        }
        Ok(Process {
            name,
            child,
            group,
            stderr,
            lines,
        })
    }

    /// What follows `prefix` on the first stderr line that starts with it.
    async fn announced(&mut self, prefix: &str) -> Result<String, String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.lines.try_recv() {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return Ok(rest.trim().to_owned());
                    }
                }
                Err(TryRecvError::Empty) => {
                    self.check_running()?;
                    if Instant::now() >= deadline {
                        return Err(self.failure(&format!(
                            "did not say where it serves within {START_TIMEOUT:?}"
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(TryRecvError::Disconnected) => {
                    // Give the child a moment to be reaped, for its status.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    self.check_running()?;
                    return Err(self.failure("closed its stderr before saying where it serves"));
                }
            }
        }
    }

    /// An error when the process has exited.
    fn check_running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.failure(&format!("exited early ({status})"))),
            Err(error) => Err(self.failure(&format!("cannot be waited for: {error}"))),
        }
    }

    /// `message` about this process, with the last lines of its stderr.
    fn failure(&self, message: &str) -> String {
        // Let the reader thread catch up with what the process wrote last.
        std::thread::sleep(Duration::from_millis(100));
        let tail = self
            .stderr
            .lock()
            .map(|tail| tail.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        format!("{} {message}; its last stderr lines:\n{tail}", self.name)
    }

    fn signal(&self, signal: libc::c_int) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        let target = if self.group { -pid } else { pid };
        // SAFETY: kill(2) on a child of ours (or the group it leads), by id;
        // the child is not reaped yet, so the id is still its own.
        unsafe {
            libc::kill(target, signal);
        }
    }

    /// Whether the process exited within `timeout`.
    fn exited_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    /// SIGTERM, then SIGKILL after [`STOP_TIMEOUT`]; a group is signalled
    /// whole, and what is left of it once its leader is gone is killed.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(libc::SIGTERM);
            if !self.exited_within(STOP_TIMEOUT) {
                eprintln!(
                    "gateway_bench: {} did not stop within {STOP_TIMEOUT:?} of SIGTERM: killed",
                    self.name
                );
                self.signal(libc::SIGKILL);
                let _ = self.child.wait();
            }
        }
        if self.group
            && let Ok(pid) = libc::pid_t::try_from(self.child.id())
        {
            // SAFETY: kill(2) on the process group our child led; a group id
            // is not reused while any member of the group is alive.
            let alive = unsafe { libc::kill(-pid, 0) } == 0;
            if alive {
                std::thread::sleep(Duration::from_millis(500));
                // SAFETY: as above.
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// A scratch directory for the gateways' configs and audit logs, removed
/// on drop.
struct TempDir(PathBuf);

impl TempDir {
    /// `gateway-bench-PID` in `parent`.
    fn new(parent: &Path) -> Result<TempDir, String> {
        let dir = parent.join(format!("gateway-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `value` as a TOML basic string (a JSON string is one).
fn toml_string(value: &str) -> String {
    serde_json::Value::from(value).to_string()
}

/// `values` as a TOML array of basic strings.
fn toml_string_list(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|value| toml_string(value)).collect();
    format!("[{}]", items.join(", "))
}

/// The nearest-rank `quantile` (0 to 1) of `values`.
///
/// # Panics
///
/// When `values` is empty.
fn percentile(values: &[f64], quantile: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (quantile * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

//! What the benchmarks that run real processes share: the binaries beside
//! the bench's executable, the example `notes` server and the gateway
//! started on loopback, PyPI's `mcp-proxy` installed into a venv under the
//! target directory, and processes and scratch directories that are
//! stopped and removed however the benchmark ends.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The PyPI peer, pinned.
pub const MCP_PROXY: (&str, &str) = ("mcp-proxy", "0.13.0");
/// The build that makes the binaries this program runs.
pub const BUILD: &str = "cargo build --release -p mcp-hints-cli -p mcp-hints-examples";
/// How long a process may take to say (or show) that it serves.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopped process has between SIGTERM and SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many of a process's last stderr lines an error shows.
pub const STDERR_TAIL: usize = 40;

/// A number of at least 1, for a bench option (`--rounds`, `--calls`).
///
/// # Errors
///
/// Text that is no number, or 0.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(number) if number >= 1 => Ok(number),
        _ => Err(format!("`{text}` is not a number of at least 1")),
    }
}

/// A bench binary's `main`: its options `O` parsed by clap (an error is the
/// usage, exit 2), then `bench` run on a current-thread runtime (the client on one
/// thread: on a two-core machine the other core is the server's) until it
/// ends or a signal stops it. On a signal the bench's future is dropped,
/// and with it every process guard: what was started is stopped. Errors go
/// to stderr after `name`; exit 1.
pub fn main<O, F>(name: &str, bench: impl FnOnce(O) -> F) -> std::process::ExitCode
where
    O: clap::Parser,
    F: std::future::Future<Output = Result<(), String>>,
{
    use std::process::ExitCode;
    // clap prints the usage and exits 2 for a bad option, 0 for --help.
    let options = O::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("{name}: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = bench(options) => outcome,
            signal = stop_signal() => Err(format!("stopped by {signal}")),
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{name}: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves at Ctrl-C (SIGINT) or SIGTERM; a handler that cannot be
/// installed is not awaited.
pub async fn stop_signal() -> &'static str {
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

/// The binaries this program runs, and the target directory.
pub struct Binaries {
    /// `mcp-hints`, whose `gateway` subcommand is measured.
    pub gateway: PathBuf,
    /// The example `notes` server.
    pub notes: PathBuf,
    /// The target directory this executable runs from.
    pub target: PathBuf,
}

/// `mcp-hints` and `notes` in `dir`, or beside this executable when `None`;
/// the target directory is the one this executable is in.
///
/// # Errors
///
/// When a binary is not there (the message names the build that makes it).
pub fn binaries(dir: Option<&Path>) -> Result<Binaries, String> {
    let exe = std::env::current_exe().map_err(|error| format!("current_exe: {error}"))?;
    let beside = exe
        .parent()
        .ok_or("the bench's own executable has no directory")?;
    let from = dir.unwrap_or(beside);
    let find = |name: &str| -> Result<PathBuf, String> {
        let path = from.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        if path.is_file() {
            // Absolute: a gateway's config names `notes` from another
            // directory.
            std::path::absolute(&path).map_err(|error| format!("{}: {error}", path.display()))
        } else {
            Err(format!(
                "`{name}` is not in {} ({}): build it first with `{BUILD}`",
                from.display(),
                path.display()
            ))
        }
    };
    Ok(Binaries {
        gateway: find("mcp-hints")?,
        notes: find("notes")?,
        // target/release/BENCH: the target directory is two up.
        target: beside.parent().unwrap_or(beside).to_path_buf(),
    })
}

/// Writes the gateway's config into `scratch` and starts `mcp-hints gateway
/// serve` on it; its URL once it says where it serves.
pub async fn start_gateway(
    binaries: &Binaries,
    scratch: &TempDir,
    logs: &Path,
    label: &str,
    token: &str,
    upstream: &str,
) -> Result<(Process, String), String> {
    let path = gateway_config(scratch, logs, label, token, upstream)?;
    serve_gateway(binaries, &path, format!("gateway ({label} upstream)")).await
}

/// Starts `mcp-hints gateway serve --config CONFIG` as `name`; its URL once
/// it says where it serves.
pub async fn serve_gateway(
    binaries: &Binaries,
    config: &Path,
    name: String,
) -> Result<(Process, String), String> {
    serve_gateway_with(binaries, config, name, &[]).await
}

/// [`serve_gateway`] with `env` added to the gateway's environment
/// (`TOKIO_WORKER_THREADS`, say).
pub async fn serve_gateway_with(
    binaries: &Binaries,
    config: &Path,
    name: String,
    env: &[(&str, String)],
) -> Result<(Process, String), String> {
    let mut process = spawn_gateway(binaries, config, name, env)?;
    let url = process.announced(SERVING_MCP).await?;
    Ok((process, url))
}

/// What the gateway says, before its URL, once it serves MCP over HTTP.
const SERVING_MCP: &str = "gateway: serving MCP over streamable HTTP at ";

/// Starts `mcp-hints gateway serve --config CONFIG` as `name`, `env` added
/// to its environment.
fn spawn_gateway(
    binaries: &Binaries,
    config: &Path,
    name: String,
    env: &[(&str, String)],
) -> Result<Process, String> {
    let mut command = Command::new(&binaries.gateway);
    command
        .args(["gateway", "serve", "--config"])
        .arg(config)
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(key, value)| (key, value)));
    Process::spawn(name, command, false)
}

/// Starts `mcp-hints gateway serve --config CONFIG` as `name`, `env` added
/// to its environment, on a config of [`gateway_config_admin`]: its MCP URL
/// and its admin endpoint's (`http://HOST:PORT`), once it says where it
/// serves both.
pub async fn serve_gateway_admin(
    binaries: &Binaries,
    config: &Path,
    name: String,
    env: &[(&str, String)],
) -> Result<(Process, String, String), String> {
    let mut process = spawn_gateway(binaries, config, name, env)?;
    // The admin endpoint is said first (`serve` starts it first).
    let admin = process.announced("gateway: admin endpoint at ").await?;
    let url = process.announced(SERVING_MCP).await?;
    Ok((process, url, admin))
}

/// Writes a gateway config into `scratch`, its audit log in `logs`; its
/// path.
pub fn gateway_config(
    scratch: &TempDir,
    logs: &Path,
    label: &str,
    token: &str,
    upstream: &str,
) -> Result<PathBuf, String> {
    gateway_config_with(scratch, logs, label, token, upstream, "")
}

/// [`gateway_config`] with `extra` (tables: rules, `[state]`, ...) at its
/// end.
pub fn gateway_config_with(
    scratch: &TempDir,
    logs: &Path,
    label: &str,
    token: &str,
    upstream: &str,
    extra: &str,
) -> Result<PathBuf, String> {
    write_gateway_config(scratch, logs, label, token, upstream, "", extra)
}

/// [`gateway_config`] with an admin endpoint on a free loopback port
/// (`listen.admin_http`), whose bearer token the gateway reads from the
/// environment variable `token_env`: for its `GET /metrics`, which
/// [`serve_gateway_admin`] finds.
pub fn gateway_config_admin(
    scratch: &TempDir,
    logs: &Path,
    label: &str,
    token: &str,
    upstream: &str,
    token_env: &str,
) -> Result<PathBuf, String> {
    let admin = format!("[admin]\ntoken_env = {}\n", toml_string(token_env));
    let listen = "admin_http = \"127.0.0.1:0\"\n";
    write_gateway_config(scratch, logs, label, token, upstream, listen, &admin)
}

/// The config of [`gateway_config_with`], with `listen` (keys) added to
/// its `[listen]` table.
fn write_gateway_config(
    scratch: &TempDir,
    logs: &Path,
    label: &str,
    token: &str,
    upstream: &str,
    listen: &str,
    extra: &str,
) -> Result<PathBuf, String> {
    let log = logs.join(format!("audit-{label}.jsonl"));
    let config = format!(
        r#"[listen]
http = "127.0.0.1:0"
{listen}
[[client]]
principal = "bench"
token = {token}

[log]
path = {log}

[[upstream]]
name = "notes"
{upstream}
trusted = true
{extra}"#,
        token = toml_string(token),
        log = toml_string(&log.to_string_lossy()),
    );
    let path = scratch.0.join(format!("gateway-{label}.toml"));
    std::fs::write(&path, config).map_err(|error| format!("{}: {error}", path.display()))?;
    Ok(path)
}

/// Starts `notes --http 127.0.0.1:0`; its URL once it says where it serves.
pub async fn start_notes_http(notes: &Path) -> Result<(Process, String), String> {
    start_notes_http_with(notes, &[]).await
}

/// Starts `notes --http 127.0.0.1:0` with `options` (`--store URL`); its
/// URL once it says where it serves.
pub async fn start_notes_http_with(
    notes: &Path,
    options: &[&str],
) -> Result<(Process, String), String> {
    let mut command = Command::new(notes);
    command.args(["--http", "127.0.0.1:0"]).args(options);
    let mut process = Process::spawn("notes --http".to_owned(), command, false)?;
    let url = process
        .announced("notes: serving MCP over streamable HTTP at ")
        .await?;
    Ok((process, url))
}

/// Starts `mcp-proxy` with `options` in front of the stdio `notes` on a
/// free loopback port, in a process group of its own; its URL once the port
/// accepts.
pub async fn start_mcp_proxy(
    proxy: &Path,
    notes: &Path,
    options: &[&str],
) -> Result<(Process, String), String> {
    let port = free_port().map_err(|error| format!("mcp-proxy: {error}"))?;
    let mut command = Command::new(proxy);
    command
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--log-level", "WARNING"])
        .args(options)
        .arg("--")
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

/// A port on 127.0.0.1 that was free a moment ago.
///
/// # Errors
///
/// When no loopback port can be bound.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("no free loopback port: {error}"))
}

/// Starts `redis-server` (from the `PATH`) on a free loopback port with no
/// persistence (`--save "" --appendonly no`), `dir` its working directory,
/// its log on its stderr; its URL, `redis://127.0.0.1:PORT/`, once it
/// answers `PING` and says it is the process started here (another
/// program may take the free port first: then the next one is tried, up
/// to [`REDIS_ATTEMPTS`] ports).
///
/// # Errors
///
/// When `redis-server` is not on the `PATH`, or does not serve on any of
/// the ports tried within [`START_TIMEOUT`] each (the message has each
/// attempt's reason and log lines).
pub async fn start_redis(dir: &Path) -> Result<(Process, String), String> {
    let binary = which("redis-server").ok_or(
        "`redis-server` is not on the PATH: install it (Debian: `apt-get install \
         redis-server`) and run again",
    )?;
    let mut failures = Vec::new();
    for _ in 0..REDIS_ATTEMPTS {
        let port = free_port()?;
        let mut command = Command::new(&binary);
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--logfile", "/dev/stderr"])
            .arg("--dir")
            .arg(dir);
        let mut process = Process::spawn(format!("redis-server on port {port}"), command, false)?;
        let deadline = Instant::now() + START_TIMEOUT;
        let failure = loop {
            if let Err(failure) = process.check_running() {
                break failure;
            }
            match redis_process_id(port) {
                Some(pid) if pid == process.id() => {
                    return Ok((process, format!("redis://127.0.0.1:{port}/")));
                }
                Some(other) => {
                    break process.failure(&format!(
                        "lost its port to another redis-server (process {other})"
                    ));
                }
                None if Instant::now() >= deadline => {
                    break process.failure(&format!("did not answer within {START_TIMEOUT:?}"));
                }
                None => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        failures.push(failure);
    }
    Err(format!(
        "redis-server did not start:\n{}",
        failures.join("\n")
    ))
}

/// How many free ports [`start_redis`] tries.
pub const REDIS_ATTEMPTS: usize = 5;

/// The `process_id` the Redis on `port` reports in `INFO server`; `None`
/// while nothing answers there (within a second).
fn redis_process_id(port: u16) -> Option<u32> {
    use std::io::{Read, Write};
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(b"INFO server\r\n").ok()?;
    // A bulk string: `$<length>\r\n<text>\r\n`.
    let mut reply = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let read = stream.read(&mut chunk).ok()?;
        if read == 0 {
            return None;
        }
        reply.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&reply);
        let (head, body) = text.split_once("\r\n")?;
        let length: usize = head.strip_prefix('$')?.parse().ok()?;
        if body.len() >= length {
            return body
                .lines()
                .find_map(|line| line.strip_prefix("process_id:"))
                .and_then(|pid| pid.trim().parse().ok());
        }
    }
}

/// The first `name` on the `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// An rmcp client of one MCP session.
pub type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// An rmcp client over streamable HTTP to `url`, with a bearer token if
/// given, once `initialize` is done (within [`START_TIMEOUT`]); `what`
/// names it in errors.
pub async fn http_client(url: &str, token: Option<&str>, what: &str) -> Result<Client, String> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
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

/// `mcp-proxy` at its pinned version in the venv `venv`, made and installed
/// there with `python3 -m venv` and pip unless it is there already; the path
/// of its script.
pub fn install_mcp_proxy(venv: &Path) -> Result<PathBuf, String> {
    let (package, version) = MCP_PROXY;
    let script = venv.join("bin").join(package);
    install_pypi(venv, package, version, Some(&script))?;
    Ok(script)
}

/// `package` at exactly `version` in the venv `venv`, made and installed
/// there with `python3 -m venv` and pip unless it (and `script`, when
/// given) is there already; the venv's python.
pub fn install_pypi(
    venv: &Path,
    package: &str,
    version: &str,
    script: Option<&Path>,
) -> Result<PathBuf, String> {
    let python = venv.join("bin").join("python");
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
    let complete = || script.is_none_or(Path::is_file);
    if complete() && installed().as_deref() == Some(version) {
        eprintln!("bench: {package} {version} already in {}", venv.display());
        return Ok(python);
    }
    if venv.exists() {
        std::fs::remove_dir_all(venv)
            .map_err(|error| format!("removing {}: {error}", venv.display()))?;
    }
    eprintln!(
        "bench: installing {package} {version} into {}",
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
        Some(found) if found == version && complete() => Ok(python),
        found => Err(format!(
            "after pip, {package} is {found:?} in {}, not {version}{}",
            venv.display(),
            script.map_or(String::new(), |script| format!(
                " with {}",
                script.display()
            )),
        )),
    }
}

/// Runs `command` to completion; `what` with its command line and output
/// when it cannot start or fails.
pub fn finish(what: &str, command: &mut Command) -> Result<(), String> {
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
pub struct Process {
    name: String,
    child: Child,
    /// Signalled as a whole process group (it leads one).
    group: bool,
    stderr: Arc<Mutex<VecDeque<String>>>,
    lines: Receiver<String>,
}

impl Process {
    /// Starts `command` (in a process group of its own when `group`), its
    /// stdin and stdout on /dev/null and its stderr read by a thread.
    pub fn spawn(name: String, mut command: Command, group: bool) -> Result<Process, String> {
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
    pub async fn announced(&mut self, prefix: &str) -> Result<String, String> {
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

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// An error when the process has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.failure(&format!("exited early ({status})"))),
            Err(error) => Err(self.failure(&format!("cannot be waited for: {error}"))),
        }
    }

    /// `message` about this process, with the last lines of its stderr.
    pub fn failure(&self, message: &str) -> String {
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
        if self.group {
            // The group it leads; the child is not reaped yet, so the id is
            // still its own.
            let _ = match signal {
                libc::SIGKILL => mcp_hints::process_group::kill(pid),
                _ => mcp_hints::process_group::terminate(pid),
            };
            return;
        }
        // SAFETY: kill(2) on a child of ours, by id; the child is not reaped
        // yet, so the id is still its own.
        unsafe {
            libc::kill(pid, signal);
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
                    "bench: {} did not stop within {STOP_TIMEOUT:?} of SIGTERM: killed",
                    self.name
                );
                self.signal(libc::SIGKILL);
                let _ = self.child.wait();
            }
        }
        if self.group
            && let Ok(pid) = libc::pid_t::try_from(self.child.id())
            // A group id is not reused while any member of the group is alive.
            && mcp_hints::process_group::alive(pid)
        {
            std::thread::sleep(Duration::from_millis(500));
            let _ = mcp_hints::process_group::kill(pid);
        }
    }
}

/// A scratch directory for the gateways' configs and audit logs, removed
/// on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `gateway-bench-PID` in `parent`.
    pub fn new(parent: &Path) -> Result<TempDir, String> {
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
pub fn toml_string(value: &str) -> String {
    serde_json::Value::from(value).to_string()
}

/// `values` as a TOML array of basic strings.
pub fn toml_string_list(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|value| toml_string(value)).collect();
    format!("[{}]", items.join(", "))
}

/// The nearest-rank `quantile` (0 to 1) of `values`.
///
/// # Panics
///
/// When `values` is empty.
pub fn percentile(values: &[f64], quantile: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (quantile * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

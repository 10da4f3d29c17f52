//! What the replay tests share: a scratch directory per test, the
//! `counter-server` command line, `fault-proxy` in front of it over stdio
//! (as a connect factory for `ReplaySafeClient`) or over streamable HTTP,
//! the counts read back from the executions file and the fault log, and
//! clean-up of every process started, on drop.
//!
//! Everything listens on 127.0.0.1 only, and every wait is bounded by
//! [`WAIT`].

// Each test binary that includes this module uses a different part of it.
#![allow(dead_code)]

use std::error::Error;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mcp_hints::client::{ReplaySafeClient, ReplaySafeClientBuilder};
use mcp_hints::policy::Trust;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rmcp::service::RunningService;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

/// The proxy under test.
pub const PROXY: &str = env!("CARGO_BIN_EXE_fault-proxy");
/// The server the proxy fronts.
pub const SERVER: &str = env!("CARGO_BIN_EXE_counter-server");

/// The most anything that should happen may take.
pub const WAIT: Duration = Duration::from_secs(10);

/// Each request's timeout in most tests: a dropped response costs this.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(1);

pub type BoxError = Box<dyn Error + Send + Sync>;

/// A plain rmcp client session.
pub type Session = RunningService<RoleClient, ()>;

// ---------------------------------------------------------------- files

/// A fresh directory for one test's files, under the target directory.
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("replay")
            .join(format!("{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|error| panic!("cannot create {}: {error}", dir.display()));
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// What the stdio processes of this test wrote on stderr, for a
    /// failure message.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.path("stderr.log")).unwrap_or_default()
    }
}

/// How often each tool's handler started and finished, from an executions
/// file (missing: none; a last line the server is still writing is not
/// read yet).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Executions {
    lines: Vec<(String, String)>,
}

impl Executions {
    pub fn read(path: &Path) -> Executions {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines = whole_lines(&text)
            .map(|line| {
                let (event, tool) = line
                    .split_once(' ')
                    .unwrap_or_else(|| panic!("not an executions line: {line:?}"));
                assert!(
                    event == "start" || event == "done",
                    "not an executions line: {line:?}"
                );
                (event.to_owned(), tool.to_owned())
            })
            .collect();
        Executions { lines }
    }

    /// The sum of several files' counts (replicas writing one each).
    pub fn read_all(paths: &[PathBuf]) -> Executions {
        Executions {
            lines: paths
                .iter()
                .flat_map(|path| Executions::read(path).lines)
                .collect(),
        }
    }

    fn count(&self, event: &str, tool: &str) -> usize {
        self.lines
            .iter()
            .filter(|(e, t)| e == event && t == tool)
            .count()
    }

    pub fn started(&self, tool: &str) -> usize {
        self.count("start", tool)
    }

    pub fn done(&self, tool: &str) -> usize {
        self.count("done", tool)
    }

    /// `(start, done)` of `tool`.
    pub fn of(&self, tool: &str) -> (usize, usize) {
        (self.started(tool), self.done(tool))
    }
}

/// One line of a fault log: `(fault, tool, n)`.
pub type Fault = (String, String, u64);

/// The faults fired, in order (missing log: none; a last line the proxy is
/// still writing is not read yet).
pub fn faults(path: &Path) -> Vec<Fault> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    whole_lines(&text)
        .map(|line| {
            let entry: Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("fault log line {line:?}: {error}"));
            (
                entry["fault"].as_str().expect("fault").to_owned(),
                entry["tool"].as_str().expect("tool").to_owned(),
                entry["n"].as_u64().expect("n"),
            )
        })
        .collect()
}

/// `(fault, tool, n)` as the log writes it, for assertions.
pub fn fault(name: &str, tool: &str, n: u64) -> Fault {
    (name.to_owned(), tool.to_owned(), n)
}

/// Polls `done` every 10 ms until it holds, for at most [`WAIT`].
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The lines of `text` that end with a newline.
fn whole_lines(text: &str) -> std::str::Lines<'_> {
    text.rfind('\n').map_or("", |end| &text[..end]).lines()
}

/// `read()`, again every 10 ms until it equals `expected`, for [`WAIT`] at
/// most: the last reading either way, for the caller's `assert_eq!`. The
/// executions file and the fault log are written by other processes, which
/// on a loaded machine may not have written yet when a test first looks.
pub async fn settled<T: PartialEq<U>, U>(expected: &U, mut read: impl FnMut() -> T) -> T {
    settled_when(&mut read, |value| value == expected).await
}

/// `read()`, again every 10 ms until `ready` holds for it, for [`WAIT`] at
/// most: the last reading either way (see [`settled`]).
pub async fn settled_when<T>(mut read: impl FnMut() -> T, ready: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = read();
        if ready(&value) || Instant::now() >= deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `future`, or a panic naming `what` after [`WAIT`].
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {WAIT:?}"))
}

// ---------------------------------------------------------------- server

/// A `counter-server` command line.
#[derive(Clone, Debug)]
pub struct Server {
    pub store: String,
    pub lease_ms: Option<u64>,
    pub work_ms: u64,
    pub executions: PathBuf,
}

impl Server {
    /// An in-memory server counting into `executions`.
    pub fn new(executions: PathBuf) -> Server {
        Server {
            store: "memory".to_owned(),
            lease_ms: None,
            work_ms: 0,
            executions,
        }
    }

    #[must_use]
    pub fn store(mut self, store: impl Into<String>) -> Server {
        self.store = store.into();
        self
    }

    #[must_use]
    pub fn lease_ms(mut self, lease_ms: u64) -> Server {
        self.lease_ms = Some(lease_ms);
        self
    }

    #[must_use]
    pub fn work_ms(mut self, work_ms: u64) -> Server {
        self.work_ms = work_ms;
        self
    }

    pub fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--store".into(),
            self.store.clone().into(),
            "--work-ms".into(),
            self.work_ms.to_string().into(),
            "--executions".into(),
            self.executions.clone().into(),
        ];
        if let Some(lease_ms) = self.lease_ms {
            args.extend(["--lease-ms".into(), lease_ms.to_string().into()]);
        }
        args
    }
}

// ---------------------------------------------------------------- processes

/// Processes a test started (by id), killed with SIGKILL when dropped.
#[derive(Clone, Default)]
pub struct Reaper {
    pids: Arc<Mutex<Vec<u32>>>,
}

impl Reaper {
    pub fn add(&self, pid: u32) {
        self.pids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pid);
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if Arc::strong_count(&self.pids) > 1 {
            return;
        }
        let pids = std::mem::take(&mut *self.pids.lock().unwrap_or_else(PoisonError::into_inner));
        for pid in pids {
            // Only a process still running one of our binaries: a pid that
            // exited may have been given to another process since.
            let ours = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                let program = cmdline.split(|&b| b == 0).next().unwrap_or_default();
                program == PROXY.as_bytes() || program == SERVER.as_bytes()
            });
            if ours && let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// `fault-proxy ... stdio -- counter-server ...`, started anew by each
/// connection: the first start gets `first_faults`, every later one
/// `later_faults`, all log into one fault log, and every start runs the
/// same server (so the same store and executions file).
#[derive(Clone)]
pub struct StdioRig {
    server: Server,
    first_faults: Vec<String>,
    log: PathBuf,
    stderr: PathBuf,
    starts: Arc<AtomicUsize>,
    reaper: Reaper,
}

impl StdioRig {
    /// `server` behind a proxy that fires `faults` on its first start only.
    pub fn new(scratch: &Scratch, server: Server, faults: &[&str]) -> StdioRig {
        StdioRig {
            server,
            first_faults: faults.iter().map(|&fault| fault.to_owned()).collect(),
            log: scratch.path("faults.log"),
            stderr: scratch.path("stderr.log"),
            starts: Arc::default(),
            reaper: Reaper::default(),
        }
    }

    /// The fault log of every start.
    pub fn fault_log(&self) -> &Path {
        &self.log
    }

    /// How many times proxy and server were started.
    pub fn starts(&self) -> usize {
        self.starts.load(Ordering::SeqCst)
    }

    /// The processes started, to keep alive as long as they are needed.
    pub fn reaper(&self) -> Reaper {
        self.reaper.clone()
    }

    fn command(&self) -> tokio::process::Command {
        let first = self.starts.fetch_add(1, Ordering::SeqCst) == 0;
        let mut command = tokio::process::Command::new(PROXY);
        for fault in self.first_faults.iter().filter(|_| first) {
            command.arg("--fault").arg(fault);
        }
        command
            .arg("--log")
            .arg(&self.log)
            .args(["stdio", "--", SERVER])
            .args(self.server.args());
        command
    }

    /// Starts proxy and server and opens an rmcp session over their stdio.
    pub async fn connect(&self) -> Result<Session, BoxError> {
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr)?;
        let (transport, _) = TokioChildProcess::builder(self.command())
            .stderr(stderr)
            .spawn()?;
        if let Some(pid) = transport.id() {
            self.reaper.add(pid);
        }
        Ok(().serve(transport).await?)
    }

    /// A [`ReplaySafeClient`] from `builder` whose connection (and every
    /// reconnection) is [`StdioRig::connect`].
    pub async fn client(&self, builder: ReplaySafeClientBuilder) -> ReplaySafeClient {
        let this = self.clone();
        builder
            .connect(move || {
                let this = this.clone();
                async move { this.connect().await }
            })
            .await
            .unwrap_or_else(|error| panic!("cannot connect over stdio: {error}"))
    }
}

/// The client options of most tests: trusted or not, [`CALL_TIMEOUT`],
/// short pauses between resends, and "in progress" asked about for up to
/// five seconds.
pub fn builder(trust: Trust) -> ReplaySafeClientBuilder {
    ReplaySafeClient::builder()
        .trust(trust)
        .call_timeout(CALL_TIMEOUT)
        .in_progress_wait(Duration::from_secs(5))
        .backoff(
            backon::ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(20))
                .with_max_delay(Duration::from_millis(100))
                .with_max_times(100),
        )
}

/// A child process killed (and reaped) on drop, whose stderr goes to a
/// file that is read for its announcement.
pub struct Process {
    child: Child,
    stderr: PathBuf,
}

impl Process {
    /// Starts `program` with `args`, stderr into `stderr`, and waits (at
    /// most [`WAIT`]) for a stderr line starting with `announcement`;
    /// returns the process and the rest of that line.
    pub async fn start(
        program: &str,
        args: &[OsString],
        stderr: PathBuf,
        announcement: &str,
    ) -> (Process, String) {
        let _ = std::fs::remove_file(&stderr);
        let file = File::create(&stderr).expect("cannot create a stderr file");
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {program}: {error}"));
        let mut process = Process { child, stderr };
        let deadline = Instant::now() + WAIT;
        loop {
            let text = std::fs::read_to_string(&process.stderr).unwrap_or_default();
            // Whole lines only: unbuffered stderr writes a formatted line in
            // pieces, so the last line read may lack its end.
            let whole = text.rfind('\n').map_or("", |end| &text[..end]);
            if let Some(rest) = whole
                .lines()
                .find_map(|line| line.strip_prefix(announcement))
            {
                return (process, rest.to_owned());
            }
            if let Ok(Some(status)) = process.child.try_wait() {
                panic!("{program} exited ({status}) before announcing itself:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "{program} did not announce itself within {WAIT:?}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills it and waits for it to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits (at most [`WAIT`]) for it to exit by itself or by another's
    /// signal.
    pub async fn exited(&mut self) {
        let deadline = Instant::now() + WAIT;
        while self.child.try_wait().ok().flatten().is_none() {
            assert!(Instant::now() < deadline, "the process did not exit");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// What it wrote on stderr.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `counter-server --http` behind `fault-proxy http`.
pub struct Http {
    pub server: Process,
    pub proxy: Process,
    /// `http://127.0.0.1:PORT` of the server.
    pub upstream: String,
    /// `http://127.0.0.1:PORT/mcp` of the proxy: where clients connect.
    pub url: String,
    pub fault_log: PathBuf,
    scratch_dir: PathBuf,
    server_config: Server,
    restarts: usize,
}

const SERVER_ANNOUNCEMENT: &str = "counter-server: listening on ";
const PROXY_ANNOUNCEMENT: &str = "fault-proxy: listening on ";

impl Http {
    /// Starts `server` on a free port, then the proxy in front of it with
    /// `faults` (and the server's pid, for the kills).
    pub async fn start(scratch: &Scratch, server: Server, faults: &[&str]) -> Http {
        let (server_process, server_url) =
            start_http_server(&server, "127.0.0.1:0", scratch.path("server-0.stderr")).await;
        let upstream = server_url
            .strip_suffix("/mcp")
            .unwrap_or_else(|| panic!("the server announced {server_url}"))
            .to_owned();
        let fault_log = scratch.path("faults.log");
        let mut args: Vec<OsString> = Vec::new();
        for fault in faults {
            args.extend(["--fault".into(), (*fault).into()]);
        }
        args.extend([
            "--log".into(),
            fault_log.clone().into(),
            "http".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--upstream".into(),
            upstream.clone().into(),
            "--upstream-pid".into(),
            server_process.pid().to_string().into(),
        ]);
        let (proxy, proxy_url) = Process::start(
            PROXY,
            &args,
            scratch.path("proxy.stderr"),
            PROXY_ANNOUNCEMENT,
        )
        .await;
        assert!(
            proxy_url.starts_with("http://127.0.0.1:"),
            "the proxy announced {proxy_url}"
        );
        Http {
            server: server_process,
            proxy,
            upstream,
            url: format!("{proxy_url}/mcp"),
            fault_log,
            scratch_dir: scratch.dir.clone(),
            server_config: server,
            restarts: 0,
        }
    }

    /// Starts the server again on the same port, once the old one is gone
    /// (the caller killed it, or a fault did).
    pub async fn restart_server(&mut self) {
        self.server.exited().await;
        self.restarts += 1;
        let address = self
            .upstream
            .strip_prefix("http://")
            .expect("an http upstream")
            .to_owned();
        let stderr = self
            .scratch_dir
            .join(format!("server-{}.stderr", self.restarts));
        let (server, url) = start_http_server(&self.server_config, &address, stderr).await;
        assert_eq!(url, format!("{}/mcp", self.upstream), "the same address");
        self.server = server;
    }

    /// Opens a plain rmcp session through the proxy.
    pub async fn connect(&self) -> Result<Session, BoxError> {
        connect_http(&self.url).await
    }

    /// A [`ReplaySafeClient`] from `builder` connected through the proxy.
    pub async fn client(&self, builder: ReplaySafeClientBuilder) -> ReplaySafeClient {
        let url = self.url.clone();
        builder
            .connect(move || connect_http_owned(url.clone()))
            .await
            .unwrap_or_else(|error| panic!("cannot connect over HTTP: {error}"))
    }

    /// What the server(s) and the proxy wrote on stderr.
    pub fn stderr_text(&self) -> String {
        format!(
            "server:\n{}\nproxy:\n{}",
            self.server.stderr_text(),
            self.proxy.stderr_text()
        )
    }
}

async fn start_http_server(server: &Server, address: &str, stderr: PathBuf) -> (Process, String) {
    let mut args = server.args();
    args.extend(["--http".into(), address.into()]);
    let (process, url) = Process::start(SERVER, &args, stderr, SERVER_ANNOUNCEMENT).await;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "the server announced {url}"
    );
    (process, url)
}

async fn connect_http(url: &str) -> Result<Session, BoxError> {
    connect_http_owned(url.to_owned()).await
}

async fn connect_http_owned(url: String) -> Result<Session, BoxError> {
    // Needed when a workspace build gives reqwest rustls without a
    // provider; the URL is plain http either way.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url);
    Ok(().serve(transport).await?)
}

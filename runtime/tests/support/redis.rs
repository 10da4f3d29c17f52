//! A real `redis-server` for a test: started on a free loopback port with
//! no persistence, ready once it answers `PING`, killed when the
//! [`RedisServer`] is dropped. It logs to `redis-server-<port>.log` in the
//! target's temporary directory, kept when the test panicked.
//!
//! The binary is found on `PATH`; when it is missing it is installed once
//! from Debian's packages (`apt-get install redis-server`), under a file
//! lock so that test binaries running at once install it once. The tests
//! never skip: without a Redis they fail, saying why.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a new server may take to answer `PING`.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many ports to try when another process takes the free one first.
const START_ATTEMPTS: usize = 5;

/// A running `redis-server` on 127.0.0.1, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    ///
    /// # Panics
    ///
    /// When `redis-server` can be neither found nor installed, or does not
    /// answer within 10 seconds.
    pub fn start() -> RedisServer {
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            match RedisServer::start_on(port) {
                Ok(server) => return server,
                Err(failure) => failures.push(format!("port {port}: {failure}")),
            }
        }
        panic!("redis-server did not start: {}", failures.join("; "));
    }

    /// Starts a server on `port` and waits until it answers `PING`; the
    /// error says why it did not (the port is taken, for one).
    ///
    /// # Panics
    ///
    /// When `redis-server` can be neither found nor installed.
    pub fn start_on(port: u16) -> Result<RedisServer, String> {
        let binary = redis_server_binary();
        let log = log_file(port);
        let child = Command::new(binary)
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(env!("CARGO_TARGET_TMPDIR"))
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", binary.display()));
        let mut server = RedisServer { child, port, log };
        server.wait_ready()?;
        Ok(server)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL to connect to: `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops the server without closing its connections (`SIGSTOP`): it
    /// accepts bytes and answers nothing, as a hung host does. Dropping it
    /// still kills it.
    pub fn freeze(&mut self) {
        let status = Command::new("kill")
            .args(["-STOP", &self.child.id().to_string()])
            .status()
            .expect("cannot run kill");
        assert!(status.success(), "kill -STOP failed: {status}");
    }

    /// Kills the server and waits for it to exit (also done on drop).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|error| error.to_string())? {
                // The last lines of its log say why it stopped.
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let last: Vec<&str> = log.lines().rev().take(3).collect();
                return Err(format!("exited with {status}: {}", last.join(" / ")));
            }
            if ping(self.port) {
                // Another test's server may hold the port while ours fails
                // to bind it: only our own process will do.
                return match process_id(self.port) {
                    Some(pid) if pid == self.child.id() => Ok(()),
                    other => {
                        self.kill();
                        Err(format!(
                            "the port answers for another redis-server (process {other:?})"
                        ))
                    }
                };
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!("no answer to PING within {READY_TIMEOUT:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        // Keep the log of a failed test; drop the rest.
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Where a new server on `port` logs: a file of its own, even when two
/// tests try one port.
fn log_file(port: u16) -> PathBuf {
    static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "redis-server-{port}-{}-{start}.log",
        std::process::id()
    ))
}

/// A URL where nothing listens: a free loopback port, closed again.
pub fn dead_url() -> String {
    format!("redis://127.0.0.1:{}/", free_port())
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .expect("cannot bind a loopback port")
        .port()
}

/// Whether a Redis on `port` answers `PING` with `+PONG`.
fn ping(port: u16) -> bool {
    let attempt = || -> std::io::Result<bool> {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
        stream.set_read_timeout(Some(Duration::from_secs(1)))?;
        stream.write_all(b"PING\r\n")?;
        let mut answer = [0; 7];
        stream.read_exact(&mut answer)?;
        Ok(&answer == b"+PONG\r\n")
    };
    attempt().unwrap_or(false)
}

/// The process id the Redis on `port` reports in `INFO server`.
fn process_id(port: u16) -> Option<u32> {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()?;
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
        let Some((head, body)) = text.split_once("\r\n") else {
            continue;
        };
        let length: usize = head.strip_prefix('$')?.parse().ok()?;
        if body.len() >= length {
            return body
                .lines()
                .find_map(|line| line.strip_prefix("process_id:"))
                .and_then(|pid| pid.trim().parse().ok());
        }
    }
}

/// The `redis-server` binary, installed first when it is missing.
fn redis_server_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        if let Some(binary) = find_on_path() {
            return binary;
        }
        install();
        find_on_path().expect("apt-get installed redis-server, but it is not on PATH")
    })
}

fn find_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

/// Installs Debian's `redis-server`, once across concurrent test binaries.
fn install() {
    let lock_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("redis-server-install.lock");
    let lock = File::create(&lock_path)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|error| panic!("cannot lock {}: {error}", lock_path.display()));
    if find_on_path().is_some() {
        return;
    }
    eprintln!("redis-server is not on PATH: installing it from Debian's packages");
    for args in [
        &["update"][..],
        &["install", "-y", "--no-install-recommends", "redis-server"][..],
    ] {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .status()
            .unwrap_or_else(|error| {
                panic!("cannot run apt-get (to install redis-server): {error}")
            });
        assert!(
            status.success(),
            "`apt-get {}` failed ({status}): the store tests need redis-server; install it \
             (Debian: `apt-get install redis-server`) and run them again",
            args.join(" ")
        );
    }
}

//! What the command's test files share: where the corpus is, how to run the
//! `mcp-hints` binary, and the example `notes` server.

// Each test file uses some of these.
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a test waits for what another process writes (a log, a file,
/// its output) before it looks at the last reading anyway.
pub const SETTLE: Duration = Duration::from_secs(30);

/// `read()`, again every 50 ms until `ready` holds for what it returned, for
/// `bound` at most; the last reading either way, for the caller's
/// assertions (which then say what is missing). What another process
/// writes may not be written yet when the test first looks, on a loaded
/// machine most of all: read once, a test would fail for being early.
pub fn wait_for<T>(bound: Duration, mut read: impl FnMut() -> T, ready: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + bound;
    loop {
        let value = read();
        if ready(&value) || Instant::now() >= deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The entries of the audit log at `log` and its rotated files
/// ([`mcp_hints_gateway::log::entries`]: checkpoints left out), as JSON;
/// none while the log is not there, and a line still being written (one
/// without its end yet) left out. A line that is not an entry panics.
pub fn log_entries(log: &Path) -> Vec<Value> {
    use mcp_hints_gateway::log::{ReadError, entries};
    entries(log)
        .filter_map(|read| match read {
            Ok((_, entry)) => Some(serde_json::to_value(entry).unwrap()),
            Err(ReadError::Open { .. } | ReadError::NotAnEntry { torn: true, .. }) => None,
            Err(error) => panic!("{error}"),
        })
        .collect()
}

/// A file of tests/corpus/.
pub fn corpus(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(file)
}

/// Runs `mcp-hints ARGS` without colour and waits for it.
pub fn mcp_hints(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("mcp-hints runs")
}

/// The example `notes` server, built once per test binary (escargot honours
/// CARGO_TARGET_DIR).
pub fn notes_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
        escargot::CargoBuild::new()
            .manifest_path(manifest)
            .package("mcp-hints-examples")
            .bin("notes")
            .run()
            .expect("build the notes example server")
            .path()
            .to_owned()
    })
    .clone()
}

/// (name, decision) of every tool of an audit's JSON report, in list order.
pub fn decisions(report: &Value) -> Vec<(String, String)> {
    report["tools"]
        .as_array()
        .expect("the report has tools")
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap().to_owned(),
                tool["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A binary of the `mcp-hints-faults` package (`fault-proxy`,
/// `counter-server`), built once per test binary and name.
pub fn faults_binary(name: &'static str) -> PathBuf {
    static PATHS: std::sync::Mutex<Vec<(&str, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut paths = PATHS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = paths.iter().find(|(built, _)| *built == name) {
        return path.clone();
    }
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let path = escargot::CargoBuild::new()
        .manifest_path(manifest)
        .package("mcp-hints-faults")
        .bin(name)
        .run()
        .unwrap_or_else(|error| panic!("build {name} of mcp-hints-faults: {error}"))
        .path()
        .to_owned();
    paths.push((name, path.clone()));
    path
}

/// One kept-alive HTTP/1.1 connection, the way a load generator or a
/// browser keeps one: every request on it, each answer read whole.
pub struct KeptAlive {
    reader: std::io::BufReader<std::net::TcpStream>,
    address: String,
}

impl KeptAlive {
    /// Connects to `address` (`HOST:PORT`); reads wait 30 s at most.
    pub fn connect(address: &str) -> KeptAlive {
        let stream = std::net::TcpStream::connect(address)
            .unwrap_or_else(|error| panic!("connect to {address}: {error}"));
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        KeptAlive {
            reader: std::io::BufReader::new(stream),
            address: address.to_owned(),
        }
    }

    /// This end of the connection.
    pub fn stream(&self) -> &std::net::TcpStream {
        self.reader.get_ref()
    }

    /// Sends `request_line` (`POST /mcp`) with `headers` and `body` on the
    /// connection, and reads the whole answer (a `Content-Length` body or
    /// every chunk up to the last): its status and body.
    pub fn send(
        &mut self,
        request_line: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        use std::io::{BufRead, Read, Write};
        let mut request = format!(
            "{request_line} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.reader
            .get_mut()
            .write_all(request.as_bytes())
            .expect("the request is sent");
        let mut line = || {
            let mut line = String::new();
            self.reader
                .read_line(&mut line)
                .expect("the answer is read");
            assert!(line.ends_with("\r\n"), "the connection closed: {line:?}");
            line.truncate(line.len() - 2);
            line
        };
        let status_line = line();
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {status_line:?}"));
        let (mut length, mut chunked) = (None, false);
        loop {
            let header = line();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').expect("a header");
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>().expect("a length"));
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let size = {
                    let mut line = String::new();
                    self.reader.read_line(&mut line).expect("a chunk size");
                    usize::from_str_radix(line.trim_end(), 16)
                        .unwrap_or_else(|_| panic!("not a chunk size: {line:?}"))
                };
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk).expect("a chunk");
                chunk.truncate(size);
                body.extend(chunk);
                if size == 0 {
                    break;
                }
            }
        } else {
            body.resize(length.unwrap_or(0), 0);
            self.reader.read_exact(&mut body).expect("the body");
        }
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// POSTs a stateless (2026-07-28) `tools/call` of `tool` with no
    /// arguments to `/mcp`, with `headers` besides the protocol's own.
    pub fn call_tool(&mut self, id: u64, tool: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {
                "name": tool, "arguments": {},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        });
        let mut all = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ];
        all.extend_from_slice(headers);
        self.send("POST /mcp", &all, &body.to_string())
    }
}

/// Whether the socket that process `pid` holds for `client`'s connection
/// (the one whose peer is `client`'s local address) has `TCP_NODELAY`.
///
/// The option cannot be read from the client's end, and the stall it
/// prevents shows only as time, which a test must not measure; so this
/// takes a duplicate of the server's own socket (pidfd_getfd(2), Linux 5.6,
/// allowed on a child of ours) and reads the option on it.
///
/// # Panics
///
/// When the process has no socket for that connection, or a system call
/// fails.
#[cfg(target_os = "linux")]
pub fn server_side_nodelay(pid: u32, client: &std::net::TcpStream) -> bool {
    use std::os::fd::{FromRawFd, OwnedFd};
    let ours = client.local_addr().unwrap();
    let pid = libc::pid_t::try_from(pid).unwrap();
    // SAFETY: pidfd_open(2) takes a process id and flags, and returns a new
    // descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a descriptor just returned to us, owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(i32::try_from(pidfd).unwrap()) };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the server's descriptors");
    for entry in fds {
        let entry = entry.unwrap();
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|fd| fd.parse::<i32>().ok())
        else {
            continue;
        };
        if !is_socket {
            continue;
        }
        use std::os::fd::AsRawFd;
        // SAFETY: pidfd_getfd(2) takes a pidfd, a descriptor number in that
        // process and flags, and returns a new descriptor or -1.
        let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
        if copy < 0 {
            // Closed since the directory was read.
            continue;
        }
        // SAFETY: a descriptor just returned to us, owned by nobody else.
        let copy = unsafe { OwnedFd::from_raw_fd(i32::try_from(copy).unwrap()) };
        // Any socket: peer_addr fails on a listener, a pipe-like one or UDP.
        let socket = std::net::TcpStream::from(copy);
        if socket.peer_addr().is_ok_and(|peer| peer == ours) {
            return socket.nodelay().expect("getsockopt(TCP_NODELAY)");
        }
    }
    panic!("process {pid} holds no socket connected to {ours}");
}

/// `mcp-hints gateway serve --config PATH` run as a test's gateway: every
/// line of its stderr kept, the endpoints it said it serves, and stopped
/// with SIGTERM (killed after 10 s) when dropped.
pub struct ServedGateway {
    pub child: Child,
    /// `http://ADDR/mcp`.
    pub url: String,
    /// `http://ADDR` of its admin endpoint, when it serves one.
    pub admin: Option<String>,
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl ServedGateway {
    /// Serves the config at `path`, with `env` set; waits (90 s at most)
    /// until it says where it serves MCP.
    pub fn serve(path: &Path, env: &[(&str, &str)]) -> ServedGateway {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(["gateway", "serve", "--config"])
            .arg(path)
            .envs(env.iter().copied())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcp-hints runs");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (sender, receiver) = std::sync::mpsc::channel();
        {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { return };
                    if let Some(url) =
                        line.strip_prefix("gateway: serving MCP over streamable HTTP at ")
                    {
                        let _ = sender.send(("mcp", url.to_owned()));
                    }
                    if let Some(url) = line.strip_prefix("gateway: admin endpoint at ") {
                        let _ = sender.send(("admin", url.to_owned()));
                    }
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let mut gateway = ServedGateway {
            child,
            url: String::new(),
            admin: None,
            stderr: lines,
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        while gateway.url.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(left) {
                Ok(("mcp", url)) => gateway.url = url,
                Ok((_, url)) => gateway.admin = Some(url),
                Err(_) => panic!(
                    "the gateway did not serve within 90 s; stderr:\n{}",
                    gateway.stderr()
                ),
            }
        }
        gateway
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }
}

impl Drop for ServedGateway {
    fn drop(&mut self) {
        // SIGTERM: the gateway stops its upstreams' process groups itself.
        #[cfg(unix)]
        unsafe {
            // SAFETY: kill(2) on a child of ours, by its id.
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `notes`' `append_note` asserted open-world (it stands for a way data
/// leaves: a message, a post; the notebook declares itself closed-world),
/// and the trifecta rule: once the session called an open-world tool, such
/// a write waits for an approver, `timeout_secs` at most, then is denied.
pub fn trifecta(timeout_secs: u32) -> String {
    format!(
        "[[assert]]\nupstream = \"notes\"\ntool = \"append_note\"\nopenWorldHint = true\n\n\
         [[rule]]\naction = \"require_approval\"\nwhen = [\"open_world\", \"not read_only\"]\n\
         after = [\"open_world\"]\ntimeout_secs = {timeout_secs}\n"
    )
}

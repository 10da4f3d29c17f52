//! `fault-proxy` end to end: the built binary between a test client and a
//! tiny upstream (a Python stdio server, or an HTTP/1.1 server on a thread of
//! this test), on 127.0.0.1 only, with a timeout on every wait.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

const PROXY: &str = env!("CARGO_BIN_EXE_fault-proxy");
/// The most anything that should happen may take.
const WAIT: Duration = Duration::from_secs(10);
/// How long "nothing arrives" is watched for.
const QUIET: Duration = Duration::from_millis(700);

// ---------------------------------------------------------------- helpers

/// A fresh directory for one test's files.
fn scratch(test: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "fault-proxy-test-{}-{}-{test}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `read()`, again every 20 ms until it equals `expected`, for [`WAIT`] at
/// most: the last reading either way. What the server read and the fault
/// log are written by other processes, which on a loaded machine may not
/// have written yet when a test first looks.
fn settled<T: PartialEq<U>, U>(expected: &U, mut read: impl FnMut() -> T) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = read();
        if value == *expected || Instant::now() >= deadline {
            return value;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// `assert_eq!(READ, EXPECTED, ...)` on what another process writes: READ
/// again until it equals EXPECTED (see [`settled`]), then the assertion on
/// the last reading.
macro_rules! assert_settled_eq {
    ($read:expr, $expected:expr $(, $($message:tt)+)?) => {{
        let expected = $expected;
        let value = settled(&expected, || $read);
        assert_eq!(value, expected $(, $($message)+)?);
    }};
}

/// Polls `done` until it holds, for at most [`WAIT`].
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Gone, or a zombie nobody has reaped yet.
fn process_is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| {
            matches!(rest.trim_start().as_bytes().first(), Some(b'Z' | b'X'))
        }),
    }
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the process did not exit");
        thread::sleep(Duration::from_millis(20));
    }
}

fn call(id: &str, tool: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"a":1}}}}}}"#
    )
}

/// What both upstreams answer to a request: its tool (or method) echoed.
fn answer(id: &str, tool: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"echo":"{tool}"}}}}"#)
}

fn log_line(fault: &str, tool: &str, id: &str, n: u64) -> String {
    format!("{{\"fault\":\"{fault}\",\"tool\":\"{tool}\",\"id\":{id},\"n\":{n}}}\n")
}

// ---------------------------------------------------------------- stdio

/// A stdio MCP server in a few lines: records every line it reads, answers
/// every request with its tool echoed, starts a helper process in its group,
/// and on end of input exits with `argv[3]` (or never, for `ignore`).
const STDIO_SERVER: &str = r#"
import json, os, subprocess, sys, time
record, pids, on_eof = sys.argv[1], sys.argv[2], sys.argv[3]
helper = subprocess.Popen(["sleep", "60"])
with open(pids + ".tmp", "w") as f:
    f.write("%d %d\n" % (os.getpid(), helper.pid))
os.rename(pids + ".tmp", pids)
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    with open(record, "ab") as f:
        f.write(line)
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
        continue
    method = msg["method"]
    if method == "exit":
        sys.exit(msg["params"]["code"])
    if method == "odd":
        out.write(b'{ "jsonrpc" : "2.0", "method" : "notifications/odd" }  \r\n')
        out.write(b"not json from the server\n")
    name = (msg.get("params") or {}).get("name", method)
    out.write(('{"jsonrpc":"2.0","id":%s,"result":{"echo":%s}}\n' % (json.dumps(msg["id"]), json.dumps(name))).encode())
    out.flush()
if on_eof == "ignore":
    while True:
        time.sleep(1)
sys.exit(int(on_eof))
"#;

struct StdioProxy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<(Vec<u8>, Instant)>,
    dir: PathBuf,
}

impl StdioProxy {
    fn start(test: &str, faults: &[&str], on_eof: &str) -> Self {
        let dir = scratch(test);
        let mut command = Command::new(PROXY);
        for fault in faults {
            command.arg("--fault").arg(fault);
        }
        let mut child = command
            .arg("--log")
            .arg(dir.join("faults.log"))
            .args(["stdio", "--", "python3", "-c", STDIO_SERVER])
            .arg(dir.join("received"))
            .arg(dir.join("pids"))
            .arg(on_eof)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            loop {
                let mut line = Vec::new();
                match stdout.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if sender.send((line, Instant::now())).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        StdioProxy {
            child,
            stdin,
            lines,
            dir,
        }
    }

    fn send(&mut self, line: &str) -> Instant {
        self.send_bytes(format!("{line}\n").as_bytes())
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> Instant {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
        Instant::now()
    }

    /// The next line the client gets, without its newline, and when.
    fn recv(&self) -> (String, Instant) {
        let (line, at) = self.recv_bytes();
        let line = String::from_utf8(line).unwrap();
        (line.strip_suffix('\n').unwrap_or(&line).to_owned(), at)
    }

    fn recv_bytes(&self) -> (Vec<u8>, Instant) {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(error) => panic!("no line from the proxy: {error}"),
        }
    }

    fn assert_quiet(&self) {
        if let Ok((line, _)) = self.lines.recv_timeout(QUIET) {
            panic!("unexpected line: {}", String::from_utf8_lossy(&line));
        }
    }

    fn assert_stdout_closed(&self) {
        match self.lines.recv_timeout(WAIT) {
            Err(mpsc::RecvTimeoutError::Disconnected) => {}
            Ok((line, _)) => panic!("unexpected line: {}", String::from_utf8_lossy(&line)),
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("the proxy's stdout stayed open"),
        }
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait(&mut self) -> ExitStatus {
        wait_exit(&mut self.child)
    }

    /// What the server has read, byte for byte.
    fn received(&self) -> String {
        read(&self.dir.join("received"))
    }

    fn log(&self) -> String {
        read(&self.dir.join("faults.log"))
    }

    /// The server's pid and its helper's.
    fn pids(&self) -> (i32, i32) {
        let path = self.dir.join("pids");
        eventually("the server wrote its pids", || path.exists());
        let pids = read(&path);
        let mut pids = pids.split_whitespace().map(|pid| pid.parse().unwrap());
        (pids.next().unwrap(), pids.next().unwrap())
    }
}

impl Drop for StdioProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Ok(pids) = std::fs::read_to_string(self.dir.join("pids")) {
            for pid in pids.split_whitespace().filter_map(|pid| pid.parse().ok()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn stdio_relays_other_traffic_byte_for_byte() {
    let mut proxy = StdioProxy::start("stdio-relay", &["drop-request:add@*"], "0");
    let sent = [
        // A call to another tool, with trailing blanks.
        &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"sub\",\"arguments\":{}}}   \n"[..],
        b"not json at all\n",
        b"{ \"jsonrpc\": \"2.0\", \"method\": \"notifications/initialized\" }\r\n",
        b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"odd\"}\n",
    ];
    for line in sent {
        proxy.send_bytes(line);
    }
    assert_eq!(
        proxy.recv_bytes().0,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"echo\":\"sub\"}}\n"
    );
    assert_eq!(
        proxy.recv_bytes().0,
        b"{ \"jsonrpc\" : \"2.0\", \"method\" : \"notifications/odd\" }  \r\n"
    );
    assert_eq!(proxy.recv_bytes().0, b"not json from the server\n");
    assert_eq!(
        proxy.recv_bytes().0,
        b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"echo\":\"odd\"}}\n"
    );
    assert_settled_eq!(proxy.received().into_bytes(), sent.concat());
    assert_settled_eq!(proxy.log(), "");
}

#[test]
fn stdio_drop_request_never_reaches_the_server() {
    let mut proxy = StdioProxy::start("stdio-drop-request", &["drop-request:add"], "0");
    proxy.send(&call("1", "add"));
    proxy.send(&call("2", "sub"));
    // The server answers in order: once 2 is answered, 1 would have been.
    assert_eq!(proxy.recv().0, answer("2", "sub"));
    proxy.assert_quiet();
    assert_settled_eq!(proxy.received(), format!("{}\n", call("2", "sub")));
    assert_settled_eq!(proxy.log(), log_line("drop-request", "add", "1", 1));
}

#[test]
fn stdio_drop_response_swallows_that_response_only() {
    let mut proxy = StdioProxy::start("stdio-drop-response", &["drop-response:add"], "0");
    proxy.send(&call(r#""a-1""#, "add"));
    proxy.send(&call("2", "add"));
    assert_eq!(proxy.recv().0, answer("2", "add"));
    proxy.assert_quiet();
    // The call ran: the server read it.
    assert_settled_eq!(
        proxy.received(),
        format!("{}\n{}\n", call(r#""a-1""#, "add"), call("2", "add"))
    );
    assert_settled_eq!(proxy.log(), log_line("drop-response", "add", r#""a-1""#, 1));
}

#[test]
fn stdio_delay_response_is_late_while_other_traffic_flows() {
    let mut proxy = StdioProxy::start("stdio-delay", &["delay-response=800:add"], "0");
    // Python's start-up is not part of the delay.
    proxy.send(r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#);
    assert_eq!(proxy.recv().0, answer("0", "ping"));
    let sent = proxy.send(&call("1", "add"));
    proxy.send(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    let (first, _) = proxy.recv();
    assert_eq!(first, answer("2", "ping"));
    let (late, at) = proxy.recv();
    assert_eq!(late, answer("1", "add"));
    assert!(
        at - sent >= Duration::from_millis(800),
        "late by {:?} only",
        at - sent
    );
    assert_settled_eq!(proxy.log(), log_line("delay-response", "add", "1", 1));
}

#[test]
fn stdio_kill_server_kills_the_process_group_and_exits_zero() {
    let mut proxy = StdioProxy::start("stdio-kill", &["kill-server:add"], "0");
    let (server, helper) = proxy.pids();
    proxy.send(&call("1", "add"));
    assert!(proxy.wait().success());
    assert!(process_is_gone(server), "the server is alive");
    eventually("the server's helper is gone", || process_is_gone(helper));
    assert_settled_eq!(proxy.log(), log_line("kill-server", "add", "1", 1));
}

#[test]
fn stdio_kill_server_ms_kills_that_much_later() {
    let mut proxy = StdioProxy::start("stdio-kill-ms", &["kill-server=600:add"], "0");
    proxy.pids();
    let sent = proxy.send(&call("1", "add"));
    // The server answers at once, and is killed later.
    assert_eq!(proxy.recv().0, answer("1", "add"));
    proxy.assert_stdout_closed();
    let closed = Instant::now();
    assert!(
        closed - sent >= Duration::from_millis(600),
        "killed after {:?}",
        closed - sent
    );
    assert_eq!(proxy.wait().code(), Some(0));
    assert_settled_eq!(proxy.log(), log_line("kill-server", "add", "1", 1));
}

#[test]
fn stdio_kill_after_response_runs_the_call_but_the_client_never_hears() {
    let mut proxy = StdioProxy::start("stdio-kill-after", &["kill-after-response:*"], "0");
    let (server, helper) = proxy.pids();
    proxy.send(&call("5", "add"));
    proxy.assert_stdout_closed();
    assert_eq!(proxy.wait().code(), Some(0));
    assert_settled_eq!(proxy.received(), format!("{}\n", call("5", "add")));
    assert!(process_is_gone(server), "the server is alive");
    eventually("the server's helper is gone", || process_is_gone(helper));
    assert_settled_eq!(proxy.log(), log_line("kill-after-response", "add", "5", 1));
}

#[test]
fn stdio_nth_selects_only_that_call() {
    let mut proxy = StdioProxy::start("stdio-nth", &["drop-response:add@2"], "0");
    for id in ["1", "2", "3"] {
        proxy.send(&call(id, "add"));
    }
    assert_eq!(proxy.recv().0, answer("1", "add"));
    assert_eq!(proxy.recv().0, answer("3", "add"));
    proxy.assert_quiet();
    assert_settled_eq!(proxy.log(), log_line("drop-response", "add", "2", 2));
}

#[test]
fn stdio_first_spec_listed_wins_and_at_star_fires_on_every_match() {
    let mut proxy = StdioProxy::start(
        "stdio-first-wins",
        &["drop-request:add", "drop-response:*@*"],
        "0",
    );
    proxy.send(&call("1", "add"));
    proxy.send(&call("2", "sub"));
    proxy.send(&call("3", "add"));
    proxy.send(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#);
    assert_eq!(proxy.recv().0, answer("4", "ping"));
    proxy.assert_quiet();
    // Call 1 never arrived; 2 and 3 did, unanswered.
    assert_settled_eq!(
        proxy.received(),
        format!(
            "{}\n{}\n{}\n",
            call("2", "sub"),
            call("3", "add"),
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#
        )
    );
    // `*@*` counts call 1 too, though `drop-request:add` took it.
    assert_settled_eq!(
        proxy.log(),
        [
            log_line("drop-request", "add", "1", 1),
            log_line("drop-response", "sub", "2", 2),
            log_line("drop-response", "add", "3", 3),
        ]
        .concat()
    );
}

#[test]
fn stdio_end_of_input_closes_the_server_and_passes_its_status() {
    let mut proxy = StdioProxy::start("stdio-eof", &[], "3");
    proxy.send(&call("1", "add"));
    assert_eq!(proxy.recv().0, answer("1", "add"));
    proxy.close_stdin();
    assert_eq!(proxy.wait().code(), Some(3));
    proxy.assert_stdout_closed();
}

#[test]
fn stdio_server_that_ignores_end_of_input_is_killed_after_five_seconds() {
    let mut proxy = StdioProxy::start("stdio-eof-ignored", &[], "ignore");
    let (server, helper) = proxy.pids();
    let closed = Instant::now();
    proxy.close_stdin();
    assert_eq!(proxy.wait().code(), Some(0));
    let waited = closed.elapsed();
    assert!(waited >= Duration::from_secs(5), "killed after {waited:?}");
    assert!(process_is_gone(server), "the server is alive");
    eventually("the server's helper is gone", || process_is_gone(helper));
}

#[test]
fn stdio_server_exit_ends_the_proxy_with_its_status() {
    let mut proxy = StdioProxy::start("stdio-server-exit", &[], "0");
    proxy.send(&call("1", "add"));
    assert_eq!(proxy.recv().0, answer("1", "add"));
    proxy.send(r#"{"jsonrpc":"2.0","id":2,"method":"exit","params":{"code":7}}"#);
    // Our stdin stays open: the server's exit alone ends the proxy.
    proxy.assert_stdout_closed();
    assert_eq!(proxy.wait().code(), Some(7));
}

#[test]
fn stdio_sigterm_kills_the_server_group() {
    let mut proxy = StdioProxy::start("stdio-sigterm", &[], "0");
    let (server, helper) = proxy.pids();
    kill(Pid::from_raw(proxy.child.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(proxy.wait().code(), Some(128 + 15));
    assert!(process_is_gone(server), "the server is alive");
    eventually("the server's helper is gone", || process_is_gone(helper));
}

// ---------------------------------------------------------------- http

/// One request as the upstream read it.
#[derive(Debug)]
struct Recorded {
    method: String,
    target: String,
    /// Lowercase names, in order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Recorded {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// A streamable HTTP upstream on a thread: POST to `/sse...` answers with an
/// event stream (a progress notification, then the response), other POSTs
/// with JSON; GET opens a stream that sends `one`, then `two` once the test
/// opens the gate; DELETE answers 204. Every request is recorded.
struct Upstream {
    addr: SocketAddr,
    requests: mpsc::Receiver<Recorded>,
    gate: mpsc::Sender<()>,
}

impl Upstream {
    fn start() -> Self {
        Upstream::on(TcpListener::bind("127.0.0.1:0").unwrap())
    }

    fn on(listener: TcpListener) -> Self {
        let addr = listener.local_addr().unwrap();
        let (recorder, requests) = mpsc::channel();
        let (gate, opened) = mpsc::channel();
        let opened = Arc::new(Mutex::new(opened));
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let recorder = recorder.clone();
                let opened = Arc::clone(&opened);
                thread::spawn(move || {
                    let _ = serve_upstream(stream, &recorder, &opened);
                });
            }
        });
        Upstream {
            addr,
            requests,
            gate,
        }
    }

    fn next_request(&self) -> Recorded {
        self.requests
            .recv_timeout(WAIT)
            .expect("the upstream got no request")
    }

    fn assert_no_request(&self) {
        if let Ok(request) = self.requests.recv_timeout(QUIET) {
            panic!("the upstream got {request:?}");
        }
    }
}

const SESSION: &str = "session-7";

fn sse_answer(id: &str, tool: &str) -> String {
    format!(
        ": stream open\n\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progress\":1}}}}\n\nevent: message\nid: ev-2\ndata: {}\n\n",
        answer(id, tool)
    )
}

fn serve_upstream(
    mut stream: TcpStream,
    recorder: &mpsc::Sender<Recorded>,
    gate: &Mutex<mpsc::Receiver<()>>,
) -> io::Result<()> {
    stream.set_read_timeout(Some(WAIT))?;
    let mut head = Vec::new();
    let mut byte = [0];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte)?;
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    let request = Recorded {
        method,
        target,
        headers,
        body,
    };
    let message: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let (method, target) = (request.method.clone(), request.target.clone());
    let _ = recorder.send(request);

    let stream_head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nmcp-session-id: {SESSION}\r\nconnection: close\r\n\r\n"
    );
    match method.as_str() {
        "GET" => {
            stream.write_all(stream_head.as_bytes())?;
            stream.write_all(b"data: one\n\n")?;
            let _ = gate.lock().unwrap().recv_timeout(WAIT);
            stream.write_all(b"data: two\n\n")?;
        }
        "DELETE" => stream.write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")?,
        _ => {
            let id = message.get("id").map(Value::to_string);
            let tool = message
                .pointer("/params/name")
                .or_else(|| message.get("method"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            match id {
                None => stream.write_all(
                    b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )?,
                Some(id) if target.starts_with("/sse") => {
                    let events = sse_answer(&id, tool);
                    let (progress, response) =
                        events.split_at(events.find("event: message\nid").unwrap());
                    stream.write_all(stream_head.as_bytes())?;
                    stream.write_all(progress.as_bytes())?;
                    stream.flush()?;
                    thread::sleep(Duration::from_millis(100));
                    stream.write_all(response.as_bytes())?;
                }
                Some(id) => {
                    let body = answer(&id, tool);
                    write!(
                        stream,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: {SESSION}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )?;
                }
            }
        }
    }
    stream.flush()
}

struct HttpProxy {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl HttpProxy {
    fn start(test: &str, faults: &[&str], upstream: SocketAddr, pid: Option<u32>) -> Self {
        let dir = scratch(test);
        let mut command = Command::new(PROXY);
        for fault in faults {
            command.arg("--fault").arg(fault);
        }
        command
            .arg("--log")
            .arg(dir.join("faults.log"))
            .args(["http", "--listen", "127.0.0.1:0", "--upstream"])
            .arg(format!("http://{upstream}/mcp"));
        if let Some(pid) = pid {
            command.arg("--upstream-pid").arg(pid.to_string());
        }
        let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let (sender, first) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = stderr.read_line(&mut line);
            let _ = sender.send(line);
            // The rest is for whoever reads the test's output.
            let _ = io::copy(&mut stderr, &mut io::stderr());
        });
        let line = first.recv_timeout(WAIT).expect("the proxy printed nothing");
        let addr = line
            .strip_prefix("fault-proxy: listening on http://")
            .and_then(|addr| addr.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        HttpProxy { child, addr, dir }
    }

    fn log(&self) -> String {
        read(&self.dir.join("faults.log"))
    }
}

impl Drop for HttpProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How a client's read of a response ended.
#[derive(Debug, PartialEq)]
enum End {
    /// The server closed the connection.
    Closed,
    /// The connection was reset.
    Reset,
    /// Nothing more came within the wait.
    TimedOut,
}

/// A raw HTTP/1.1 exchange on a new connection: the bytes received, how the
/// reading ended, and when the first byte came.
struct Exchange {
    bytes: Vec<u8>,
    end: End,
    sent: Instant,
    first_byte: Option<Instant>,
}

fn post(
    addr: SocketAddr,
    target: &str,
    body: &str,
    extra_headers: &str,
    wait: Duration,
) -> Exchange {
    let request = format!(
        "POST {target} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n{extra_headers}\r\n{body}",
        body.len()
    );
    exchange(addr, request.as_bytes(), wait)
}

fn exchange(addr: SocketAddr, request: &[u8], wait: Duration) -> Exchange {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request).unwrap();
    let sent = Instant::now();
    let deadline = sent + wait;
    let mut bytes = Vec::new();
    let mut first_byte = None;
    let mut buffer = [0; 4096];
    let end = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break End::TimedOut;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => break End::Closed,
            Ok(n) => {
                first_byte.get_or_insert_with(Instant::now);
                bytes.extend_from_slice(&buffer[..n]);
            }
            Err(error) if error.kind() == io::ErrorKind::ConnectionReset => break End::Reset,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                break End::TimedOut;
            }
            Err(error) => panic!("read failed: {error}"),
        }
    };
    Exchange {
        bytes,
        end,
        sent,
        first_byte,
    }
}

impl Exchange {
    /// The connection was closed (or reset) with not one byte of response:
    /// what a client sees as a transport error.
    fn assert_aborted(&self) {
        assert!(
            self.bytes.is_empty() && self.end != End::TimedOut,
            "expected an aborted connection, got {:?} then {:?}",
            String::from_utf8_lossy(&self.bytes),
            self.end
        );
    }

    fn response(&self) -> Response {
        assert_eq!(
            self.end,
            End::Closed,
            "{}",
            String::from_utf8_lossy(&self.bytes)
        );
        parse_response(&self.bytes)
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

fn parse_response(bytes: &[u8]) -> Response {
    let split = bytes
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("no end of head");
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let mut body = bytes[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value == "chunked");
    if chunked {
        body = dechunk(&body);
    }
    Response {
        status,
        headers,
        body,
    }
}

fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = chunked
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size");
        let size = usize::from_str_radix(
            std::str::from_utf8(&chunked[..line_end]).unwrap().trim(),
            16,
        )
        .unwrap();
        chunked = &chunked[line_end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&chunked[..size]);
        chunked = &chunked[size + 2..];
    }
}

/// A process for a kill fault to kill: killing the in-test upstream would
/// kill the test.
fn victim() -> Child {
    Command::new("sleep").arg("30").spawn().unwrap()
}

fn assert_sigkilled(victim: &mut Child) {
    assert_eq!(wait_exit(victim).signal(), Some(9));
}

#[test]
fn http_relays_requests_and_headers_both_ways_byte_for_byte() {
    let upstream = Upstream::start();
    let proxy = HttpProxy::start("http-relay", &["drop-request:add@*"], upstream.addr, None);
    let body = format!("{}  ", call("1", "sub"));
    let relayed = post(
        proxy.addr,
        "/mcp?x=1&y=%20",
        &body,
        &format!(
            "mcp-session-id: {SESSION}\r\nmcp-protocol-version: 2025-06-18\r\nx-custom: kept\r\n"
        ),
        WAIT,
    );
    let request = upstream.next_request();
    assert_eq!(
        (request.method.as_str(), request.target.as_str()),
        ("POST", "/mcp?x=1&y=%20")
    );
    assert_eq!(request.body, body.as_bytes());
    assert_eq!(
        request.header("host"),
        Some(upstream.addr.to_string().as_str())
    );
    assert_eq!(request.header("mcp-session-id"), Some(SESSION));
    assert_eq!(request.header("mcp-protocol-version"), Some("2025-06-18"));
    assert_eq!(request.header("x-custom"), Some("kept"));
    assert_eq!(request.header("connection"), None);
    let response = relayed.response();
    assert_eq!(response.status, 200);
    assert_eq!(response.header("mcp-session-id"), Some(SESSION));
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(response.body, answer("1", "sub").as_bytes());

    // A call to another tool answered with an event stream comes through whole.
    let response = post(proxy.addr, "/sse", &call("2", "sub"), "", WAIT).response();
    upstream.next_request();
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert_eq!(response.body, sse_answer("2", "sub").as_bytes());

    let delete = format!(
        "DELETE /mcp HTTP/1.1\r\nhost: {}\r\nmcp-session-id: {SESSION}\r\nconnection: close\r\n\r\n",
        proxy.addr
    );
    let response = exchange(proxy.addr, delete.as_bytes(), WAIT).response();
    let request = upstream.next_request();
    assert_eq!(
        (request.method.as_str(), request.header("mcp-session-id")),
        ("DELETE", Some(SESSION))
    );
    assert_eq!(response.status, 204);
    assert_settled_eq!(proxy.log(), "");
}

#[test]
fn http_get_event_stream_is_streamed_not_buffered() {
    let upstream = Upstream::start();
    let proxy = HttpProxy::start("http-get-sse", &[], upstream.addr, None);
    let mut stream = TcpStream::connect(proxy.addr).unwrap();
    write!(
        stream,
        "GET /mcp HTTP/1.1\r\nhost: {}\r\naccept: text/event-stream\r\nmcp-session-id: {SESSION}\r\n\r\n",
        proxy.addr
    )
    .unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut received = Vec::new();
    let mut buffer = [0; 1024];
    // `two` is only sent once the gate opens, so `one` must come by itself.
    while !received.windows(9).any(|w| w == b"data: one") {
        let n = stream
            .read(&mut buffer)
            .expect("the first event did not come");
        assert!(
            n > 0,
            "closed early: {}",
            String::from_utf8_lossy(&received)
        );
        received.extend_from_slice(&buffer[..n]);
    }
    assert_eq!(
        upstream.next_request().header("mcp-session-id"),
        Some(SESSION)
    );
    upstream.gate.send(()).unwrap();
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(error) => panic!("the stream did not end: {error}"),
        }
        if received.ends_with(b"0\r\n\r\n") {
            break;
        }
    }
    let response = parse_response(&received);
    assert_eq!(response.status, 200);
    assert_eq!(response.header("mcp-session-id"), Some(SESSION));
    assert_eq!(response.body, b"data: one\n\ndata: two\n\n");
}

#[test]
fn http_upstream_down_answers_502_and_a_restarted_upstream_is_used() {
    let port_holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = port_holder.local_addr().unwrap();
    drop(port_holder);
    let proxy = HttpProxy::start("http-502", &[], addr, None);
    let response = post(proxy.addr, "/mcp", &call("1", "add"), "", WAIT).response();
    assert_eq!(response.status, 502);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let text = String::from_utf8(response.body).unwrap();
    assert!(
        text.starts_with(&format!(
            "fault-proxy: upstream http://{addr} failed: cannot connect: "
        )),
        "{text}"
    );

    let upstream = Upstream::on(TcpListener::bind(addr).unwrap());
    let response = post(proxy.addr, "/mcp", &call("2", "add"), "", WAIT).response();
    assert_eq!(response.body, answer("2", "add").as_bytes());
    upstream.next_request();
}

#[test]
fn http_drop_request_never_reaches_the_upstream_and_is_never_answered() {
    let upstream = Upstream::start();
    let proxy = HttpProxy::start(
        "http-drop-request",
        &["drop-request:add"],
        upstream.addr,
        None,
    );
    let dropped = post(proxy.addr, "/mcp", &call("1", "add"), "", QUIET);
    assert_eq!((dropped.bytes.len(), dropped.end), (0, End::TimedOut));
    upstream.assert_no_request();
    // The proxy keeps serving.
    let response = post(proxy.addr, "/mcp", &call("2", "add"), "", WAIT).response();
    assert_eq!(response.body, answer("2", "add").as_bytes());
    assert_eq!(upstream.next_request().body, call("2", "add").as_bytes());
    assert_settled_eq!(proxy.log(), log_line("drop-request", "add", "1", 1));
}

#[test]
fn http_drop_response_json_closes_the_connection_without_a_byte() {
    let upstream = Upstream::start();
    let proxy = HttpProxy::start(
        "http-drop-json",
        &["drop-response:add"],
        upstream.addr,
        None,
    );
    post(proxy.addr, "/mcp", &call(r#""r-1""#, "add"), "", WAIT).assert_aborted();
    assert_eq!(
        upstream.next_request().body,
        call(r#""r-1""#, "add").as_bytes()
    );
    let response = post(proxy.addr, "/mcp", &call("2", "add"), "", WAIT).response();
    assert_eq!(response.body, answer("2", "add").as_bytes());
    assert_settled_eq!(proxy.log(), log_line("drop-response", "add", r#""r-1""#, 1));
}

#[test]
fn http_drop_response_event_stream_waits_for_the_response_event() {
    let upstream = Upstream::start();
    let proxy = HttpProxy::start("http-drop-sse", &["drop-response:*"], upstream.addr, None);
    let exchange = post(proxy.addr, "/sse", &call("1", "add"), "", WAIT);
    exchange.assert_aborted();
    // The upstream sends its response event 100 ms in; the abort waited for it.
    assert!(exchange.sent.elapsed() >= Duration::from_millis(100));
    assert_eq!(upstream.next_request().target, "/sse");
    assert_settled_eq!(proxy.log(), log_line("drop-response", "add", "1", 1));
}

#[test]
fn http_delay_response_delivers_the_same_bytes_late() {
    let upstream = Upstream::start();
    let proxy = HttpProxy::start(
        "http-delay",
        &["delay-response=800:add"],
        upstream.addr,
        None,
    );
    let late = post(proxy.addr, "/sse", &call("1", "add"), "", WAIT);
    let first_byte = late.first_byte.expect("no response");
    assert!(
        first_byte - late.sent >= Duration::from_millis(800),
        "late by {:?} only",
        first_byte - late.sent
    );
    let response = late.response();
    assert_eq!(response.header("mcp-session-id"), Some(SESSION));
    assert_eq!(response.body, sse_answer("1", "add").as_bytes());
    upstream.next_request();

    // A JSON response is held too.
    let proxy = HttpProxy::start(
        "http-delay-json",
        &["delay-response=500:*"],
        upstream.addr,
        None,
    );
    let late = post(proxy.addr, "/mcp", &call("2", "add"), "", WAIT);
    assert!(late.first_byte.expect("no response") - late.sent >= Duration::from_millis(500));
    assert_eq!(late.response().body, answer("2", "add").as_bytes());
    assert_settled_eq!(proxy.log(), log_line("delay-response", "add", "2", 1));
}

#[test]
fn http_kill_server_kills_the_upstream_pid_then_closes_the_connection() {
    let upstream = Upstream::start();
    let mut victim = victim();
    let proxy = HttpProxy::start(
        "http-kill",
        &["kill-server=300:add"],
        upstream.addr,
        Some(victim.id()),
    );
    let exchange = post(proxy.addr, "/mcp", &call("1", "add"), "", WAIT);
    exchange.assert_aborted();
    assert!(exchange.sent.elapsed() >= Duration::from_millis(300));
    assert_sigkilled(&mut victim);
    // Forwarded before the kill.
    assert_eq!(upstream.next_request().body, call("1", "add").as_bytes());
    assert_settled_eq!(proxy.log(), log_line("kill-server", "add", "1", 1));
}

#[test]
fn http_kill_after_response_runs_the_call_then_kills_and_aborts() {
    let upstream = Upstream::start();
    let mut victim = victim();
    let proxy = HttpProxy::start(
        "http-kill-after",
        &["kill-after-response:add"],
        upstream.addr,
        Some(victim.id()),
    );
    post(proxy.addr, "/sse", &call("9", "add"), "", WAIT).assert_aborted();
    assert_eq!(upstream.next_request().body, call("9", "add").as_bytes());
    assert_sigkilled(&mut victim);
    assert_settled_eq!(proxy.log(), log_line("kill-after-response", "add", "9", 1));
}

#[test]
fn http_nth_selects_only_that_call() {
    let upstream = Upstream::start();
    let proxy = HttpProxy::start("http-nth", &["drop-response:add@2"], upstream.addr, None);
    let first = post(proxy.addr, "/mcp", &call("1", "add"), "", WAIT).response();
    assert_eq!(first.body, answer("1", "add").as_bytes());
    post(proxy.addr, "/mcp", &call("2", "add"), "", WAIT).assert_aborted();
    let third = post(proxy.addr, "/mcp", &call("3", "add"), "", WAIT).response();
    assert_eq!(third.body, answer("3", "add").as_bytes());
    for id in ["1", "2", "3"] {
        assert_eq!(upstream.next_request().body, call(id, "add").as_bytes());
    }
    assert_settled_eq!(proxy.log(), log_line("drop-response", "add", "2", 2));
}

// ---------------------------------------------------------------- command line

fn refused(args: &[&str]) -> String {
    let mut child = Command::new(PROXY)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A refusal is a few lines: the pipes cannot fill up before the exit.
    let status = wait_exit(&mut child);
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(stdout, "");
    stderr
}

#[test]
fn malformed_spec_exits_2_naming_the_spec_and_what_is_wrong() {
    let cases = [
        (
            "drop:add",
            "error: invalid value 'drop:add' for '--fault <SPEC>': unknown action `drop`: expected drop-request, drop-response, delay-response=MS, kill-server[=MS] or kill-after-response\n",
        ),
        (
            "delay-response:add",
            "error: invalid value 'delay-response:add' for '--fault <SPEC>': `delay-response` needs a delay: write `delay-response=MS`\n",
        ),
        (
            "drop-request:add@0",
            "error: invalid value 'drop-request:add@0' for '--fault <SPEC>': `@0` selects nothing: calls are counted from 1\n",
        ),
        (
            "add",
            "error: invalid value 'add' for '--fault <SPEC>': expected `ACTION:TOOL[@N]`, for example `drop-response:add@2`\n",
        ),
    ];
    for (spec, message) in cases {
        let stderr = refused(&["--fault", spec, "stdio", "--", "true"]);
        assert!(stderr.starts_with(message), "{spec}: {stderr}");
    }
}

#[test]
fn http_kill_fault_without_upstream_pid_is_refused() {
    let stderr = refused(&[
        "--fault",
        "kill-after-response:add",
        "http",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "http://127.0.0.1:9",
    ]);
    assert!(
        stderr.starts_with("error: `--fault kill-after-response:add@1` kills the upstream: give its process id with `--upstream-pid PID`\n"),
        "{stderr}"
    );
}

#[test]
fn http_listen_address_must_be_loopback() {
    let stderr = refused(&[
        "http",
        "--listen",
        "0.0.0.0:0",
        "--upstream",
        "http://127.0.0.1:9",
    ]);
    assert!(
        stderr.starts_with("error: invalid value '0.0.0.0:0' for '--listen <ADDR>': `0.0.0.0:0` is not a loopback address: the proxy listens on 127.0.0.1 or [::1] only\n"),
        "{stderr}"
    );
}

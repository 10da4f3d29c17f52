//! The live MCP client (`mcp_hints_cli::live`) against real servers and
//! against misbehaving ones.
//!
//! The misbehaving servers are shell and python3 one-liners run as the server
//! command, and, for HTTP, a canned responder on 127.0.0.1 that answers each
//! connection with a fixed HTTP response: they are the faults under test, not
//! stand-ins for a real peer. The real peer is the example `notes` server,
//! built here with escargot (which honours CARGO_TARGET_DIR).

mod support;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcp_hints_cli::live::{LiveError, LiveErrorKind, LiveOptions, LiveTarget, Session};
use serde_json::{Value, json};
use support::notes_server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Every test is bounded: a hang is a failure, not a stuck CI run.
async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), future)
        .await
        .unwrap_or_else(|_| panic!("{what} took more than 60 s"))
}

/// A page's raw JSON as a tree, to compare and index.
fn tree(raw: impl AsRef<serde_json::value::RawValue>) -> serde_json::Value {
    serde_json::from_str(raw.as_ref().get()).expect("a page is JSON")
}

fn command(program: &str, args: &[&str]) -> LiveTarget {
    LiveTarget::Command {
        program: program.into(),
        args: args.iter().map(OsString::from).collect(),
    }
}

fn sh(script: &str) -> LiveTarget {
    command("sh", &["-c", script])
}

fn with_timeout(seconds: f64) -> LiveOptions {
    LiveOptions {
        timeout: Duration::from_secs_f64(seconds),
        ..LiveOptions::default()
    }
}

async fn connect_err(target: &LiveTarget, options: &LiveOptions) -> LiveError {
    match within("connect", Session::connect(target, options)).await {
        Ok(session) => panic!("connect succeeded: {session:?}"),
        Err(error) => error,
    }
}

const NOTES_TOOLS: [&str; 6] = [
    "add_note",
    "append_note",
    "delete_note",
    "forecast",
    "list_notes",
    "update_note",
];

fn assert_notes_tools(page: &Value) {
    let tools = page["tools"].as_array().expect("tools is an array");
    let mut names: Vec<&str> = tools
        .iter()
        .map(|tool| tool["name"].as_str().expect("a name"))
        .collect();
    names.sort_unstable();
    assert_eq!(names, NOTES_TOOLS);
    for tool in tools {
        let annotations = tool["annotations"].as_object().expect("annotations object");
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(annotations[hint].is_boolean(), "{hint} of {tool}");
        }
    }
    assert!(page.get("nextCursor").is_none(), "one page: {page}");
}

#[tokio::test]
async fn notes_over_stdio_initializes_and_lists_its_six_tools() {
    let target = LiveTarget::Command {
        program: notes_server().into(),
        args: Vec::new(),
    };
    let mut session = within(
        "connect",
        Session::connect(&target, &LiveOptions::default()),
    )
    .await
    .expect("connect to notes");
    let init = session.initialize_result();
    assert!(init["serverInfo"]["name"].is_string(), "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert_eq!(
        session.protocol_version(),
        init["protocolVersion"].as_str().unwrap()
    );
    let page = tree(
        within("tools/list", session.list_tools_page(None))
            .await
            .expect("tools/list"),
    );
    assert_notes_tools(&page);
    // Ids keep increasing and any request works.
    let pong = within("ping", session.request("ping", None))
        .await
        .expect("ping");
    assert_eq!(pong, json!({}));
    let error = within("unknown method", session.request("no/such/method", None))
        .await
        .unwrap_err();
    assert!(
        matches!(error.kind(), LiveErrorKind::Rpc { code: -32601, .. }),
        "{error}"
    );
    let started = Instant::now();
    within("close", session.close()).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "notes exits on stdin EOF"
    );
}

#[tokio::test]
async fn a_missing_command_is_reported_as_not_found() {
    let error = connect_err(
        &command("mcp-hints-no-such-server", &[]),
        &LiveOptions::default(),
    )
    .await;
    assert!(
        matches!(error.kind(), LiveErrorKind::CommandNotFound { program } if program == "mcp-hints-no-such-server"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "cannot start MCP server `mcp-hints-no-such-server`: command not found (check the name and PATH)"
    );
}

#[tokio::test]
async fn a_server_that_exits_reports_its_status_and_stderr() {
    let target = sh("echo 'fatal: MY_API_KEY is not set' >&2; exit 3");
    let error = connect_err(&target, &LiveOptions::default()).await;
    let LiveErrorKind::ServerExited {
        status,
        stderr_tail,
        request,
        ..
    } = error.kind()
    else {
        panic!("{error:?}")
    };
    assert_eq!(request, "initialize");
    assert_eq!(status.and_then(|status| status.code()), Some(3), "{error}");
    assert_eq!(stderr_tail, &["fatal: MY_API_KEY is not set"]);
    let text = error.to_string();
    assert!(
        text.contains("exited (exit status: 3) before answering `initialize`"),
        "{text}"
    );
    assert!(
        text.contains("\n  | fatal: MY_API_KEY is not set"),
        "{text}"
    );
}

#[tokio::test]
async fn stderr_keeps_only_the_last_twenty_lines() {
    let target = sh("for i in $(seq 1 50); do echo \"line $i\" >&2; done; exit 1");
    let error = connect_err(&target, &LiveOptions::default()).await;
    let tail = error.stderr_tail();
    assert_eq!(tail.len(), 20, "{error}");
    assert_eq!(tail.first().unwrap(), "line 31");
    assert_eq!(tail.last().unwrap(), "line 50");
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        }
    }
}

async fn assert_dead_soon(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&pid| !is_dead(pid)) {
        assert!(Instant::now() < deadline, "still running: {pids:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn read_pids(file: &std::path::Path) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && text.ends_with('\n')
        {
            return text
                .split_whitespace()
                .map(|pid| pid.parse().unwrap())
                .collect();
        }
        assert!(Instant::now() < deadline, "no pid file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn pid_file(name: &str) -> PathBuf {
    let file = std::env::temp_dir().join(format!("mcp-hints-live-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    file
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_is_killed_with_its_children() {
    let pids = pid_file("silent");
    // The server and a child of its own (as `npx` or `uv run` would have).
    let target = sh(&format!(
        "sleep 30 & echo $$ $! > {}; echo 'waiting forever' >&2; wait",
        pids.display()
    ));
    let started = Instant::now();
    let error = connect_err(&target, &with_timeout(1.0)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(error.kind(), LiveErrorKind::Timeout { request, timeout, .. }
            if request == "initialize" && *timeout == Duration::from_secs(1)),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.starts_with("MCP server `sh -c 'sleep 30 &"), "{text}");
    assert!(
        text.contains("did not answer `initialize` within 1s"),
        "{text}"
    );
    assert!(text.contains("| waiting forever"), "{text}");
    let pids = read_pids(&pids).await;
    assert_eq!(pids.len(), 2);
    assert_dead_soon(&pids).await;
}

#[tokio::test]
async fn dropping_a_session_kills_the_server() {
    let pids = pid_file("dropped");
    let server = format!(
        r#"import json, os, sys
open({file:?}, "w").write(f"{{os.getpid()}}\n")
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": {{"protocolVersion": "2025-11-25", "capabilities": {{}}, "serverInfo": {{"name": "py", "version": "0"}}}}}}), flush=True)
"#,
        file = pids.display().to_string()
    );
    // The server ignores stdin EOF only if it never reads it; this one reads
    // but we drop the session without closing, so it must be killed.
    let target = command("python3", &["-c", &server]);
    let session = within(
        "connect",
        Session::connect(&target, &LiveOptions::default()),
    )
    .await
    .expect("connect");
    let pids = read_pids(&pids).await;
    assert!(!is_dead(pids[0]));
    drop(session);
    assert_dead_soon(&pids).await;
}

#[tokio::test]
async fn close_kills_a_server_that_ignores_stdin_eof() {
    let pids = pid_file("stubborn");
    let server = format!(
        r#"import json, os, sys, time
open({file:?}, "w").write(f"{{os.getpid()}}\n")
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": {{"protocolVersion": "2025-11-25", "capabilities": {{}}, "serverInfo": {{"name": "py", "version": "0"}}}}}}), flush=True)
time.sleep(60)
"#,
        file = pids.display().to_string()
    );
    let target = command("python3", &["-c", &server]);
    let session = within(
        "connect",
        Session::connect(&target, &LiveOptions::default()),
    )
    .await
    .expect("connect");
    let pids = read_pids(&pids).await;
    let started = Instant::now();
    within("close", session.close()).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_dead_soon(&pids).await;
}

#[tokio::test]
async fn garbage_on_stdout_is_not_json_and_the_line_is_named() {
    let target = sh("echo '  '; echo 'hello from a server that logs to stdout'; sleep 30");
    let started = Instant::now();
    let error = connect_err(&target, &LiveOptions::default()).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    let LiveErrorKind::NotJson {
        location, excerpt, ..
    } = error.kind()
    else {
        panic!("{error:?}")
    };
    assert_eq!(location, "stdout line 2");
    assert_eq!(excerpt, "hello from a server that logs to stdout");
    let text = error.to_string();
    assert!(
        text.contains("sent stdout line 2 that is not JSON (expected value at line 1 column 1) while answering `initialize`: \"hello from a server that logs to stdout\""),
        "{text}"
    );
}

#[tokio::test]
async fn a_long_garbage_line_is_quoted_in_part() {
    let target = sh("printf 'x%.0s' $(seq 1 5000); echo; sleep 30");
    let error = connect_err(&target, &LiveOptions::default()).await;
    let LiveErrorKind::NotJson { excerpt, .. } = error.kind() else {
        panic!("{error:?}")
    };
    assert_eq!(excerpt.chars().count(), 201, "200 characters and …");
    assert!(error.to_string().len() < 600);
}

/// A stdio "server" that reads one line and answers it with `reply` (a JSON
/// text with `ID` standing for the request's id), then sleeps.
fn answers_initialize_with(reply: &str) -> LiveTarget {
    let script = format!(
        r#"import json, sys, time
m = json.loads(sys.stdin.readline())
print({reply:?}.replace('"ID"', json.dumps(m["id"])), flush=True)
time.sleep(30)
"#
    );
    command("python3", &["-c", &script])
}

#[tokio::test]
async fn an_initialize_error_response_is_reported_with_code_message_and_data() {
    let target = answers_initialize_with(
        r#"{"jsonrpc": "2.0", "id": "ID", "error": {"code": -32602, "message": "Unsupported protocol version", "data": {"supported": ["2024-11-05"]}}}"#,
    );
    let error = connect_err(&target, &LiveOptions::default()).await;
    let LiveErrorKind::Rpc {
        code,
        message,
        data,
        request,
        ..
    } = error.kind()
    else {
        panic!("{error:?}")
    };
    assert_eq!(
        (*code, message.as_str(), request.as_str()),
        (-32602, "Unsupported protocol version", "initialize")
    );
    assert_eq!(data, &Some(json!({"supported": ["2024-11-05"]})));
    assert!(
        error.to_string().ends_with(
            "answered `initialize` with JSON-RPC error -32602: Unsupported protocol version (data: {\"supported\":[\"2024-11-05\"]})"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn invalid_responses_are_named() {
    let cases = [
        (
            r#"{"id": "ID", "result": {}}"#,
            "not a valid JSON-RPC 2.0 message (no \"jsonrpc\": \"2.0\" member)",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": "ID"}"#,
            "invalid response to `initialize`: the response has neither \"result\" nor \"error\"",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": "ID", "result": [1, 2]}"#,
            "invalid response to `initialize`: \"result\" is an array, expected an object: [1,2]",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": "ID", "result": {"capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}}"#,
            "invalid response to `initialize`: the result has no \"protocolVersion\"",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 99, "result": {}}"#,
            "response id 99 matches no request in flight (expected 1)",
        ),
    ];
    for (reply, expected) in cases {
        let error = connect_err(&answers_initialize_with(reply), &LiveOptions::default()).await;
        assert!(error.to_string().contains(expected), "{reply}: {error}");
    }
}

/// A scripted peer: checks that the client answers the server's requests,
/// ignores notifications, accepts a negotiated protocol version, and hands
/// back `tools/list` results raw (null annotations, non-boolean hints,
/// duplicate names), page by page.
const SCRIPTED_SERVER: &str = r#"
import json, sys
def send(m): print(json.dumps(m), flush=True)
def recv(): return json.loads(sys.stdin.readline())
def fail(why): print(why, file=sys.stderr, flush=True); sys.exit(1)
init = recv()
if init["method"] != "initialize" or init["id"] != 1: fail(f"first: {init}")
if init["params"]["protocolVersion"] != "2025-11-25": fail(f"version: {init}")
if init["params"]["capabilities"] != {"roots": {}}: fail(f"capabilities: {init}")
if init["params"]["clientInfo"]["name"] != "mcp-hints": fail(f"clientInfo: {init}")
send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
send({"jsonrpc": "2.0", "id": "s1", "method": "ping"})
pong = recv()
if pong != {"jsonrpc": "2.0", "id": "s1", "result": {}}: fail(f"pong: {pong}")
send({"jsonrpc": "2.0", "id": 7, "method": "roots/list"})
reply = recv()
if reply.get("id") != 7 or reply.get("error", {}).get("code") != -32601: fail(f"roots: {reply}")
print("", flush=True)
send({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "0.1"}}})
note = recv()
if note != {"jsonrpc": "2.0", "method": "notifications/initialized"}: fail(f"initialized: {note}")
first = recv()
if first != {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}: fail(f"page 1: {first}")
send({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
    {"name": "a", "inputSchema": {"type": "object"}, "annotations": None},
    {"name": "a", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}],
    "nextCursor": "page-2"}})
second = recv()
if second != {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "page-2"}}: fail(f"page 2: {second}")
send([{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
      {"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "b", "inputSchema": {"type": "object"}, "annotations": {"idempotentHint": 1}}]}}])
sys.stdin.read()
"#;

#[tokio::test]
async fn server_requests_are_answered_and_pages_come_back_raw() {
    let target = command("python3", &["-c", SCRIPTED_SERVER]);
    let options = LiveOptions {
        capabilities: json!({"roots": {}}),
        ..with_timeout(10.0)
    };
    let mut session = within("connect", Session::connect(&target, &options))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(session.protocol_version(), "2025-06-18");
    assert_eq!(
        session.initialize_result()["serverInfo"]["name"],
        "scripted"
    );
    let first = tree(
        within("page 1", session.list_tools_page(None))
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    );
    assert_eq!(
        first,
        json!({"tools": [
            {"name": "a", "inputSchema": {"type": "object"}, "annotations": null},
            {"name": "a", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}],
            "nextCursor": "page-2"})
    );
    let second = tree(
        within("page 2", session.list_tools_page(Some("page-2")))
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    );
    assert_eq!(
        second["tools"][0]["annotations"],
        json!({"idempotentHint": 1})
    );
    assert!(
        session.stderr_tail().is_empty(),
        "{:?}",
        session.stderr_tail()
    );
    within("close", session.close()).await;
}

// ---------------------------------------------------------------- HTTP

#[tokio::test]
async fn http_connection_refused_fails_fast_and_clearly() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let started = Instant::now();
    let error = connect_err(&LiveTarget::Url(url.clone()), &LiveOptions::default()).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(error.kind(), LiveErrorKind::Connect { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot connect to MCP server at {url} for `initialize`: "
        )),
        "{text}"
    );
    assert!(text.to_lowercase().contains("connection refused"), "{text}");
}

#[tokio::test]
async fn bad_urls_and_headers_are_rejected_before_connecting() {
    for url in ["not a url", "ftp://127.0.0.1/mcp", "/mcp"] {
        let error = connect_err(&LiveTarget::Url(url.into()), &LiveOptions::default()).await;
        assert!(
            matches!(error.kind(), LiveErrorKind::InvalidUrl { .. }),
            "{url}: {error:?}"
        );
    }
    let options = LiveOptions {
        headers: vec![("Bad Name".into(), "x".into())],
        ..LiveOptions::default()
    };
    let error = connect_err(&LiveTarget::Url("http://127.0.0.1:9/".into()), &options).await;
    assert!(
        matches!(error.kind(), LiveErrorKind::InvalidHeader { .. }),
        "{error:?}"
    );
}

/// One request as the canned responder received it.
#[derive(Debug)]
struct Received {
    /// `POST /mcp HTTP/1.1`
    line: String,
    /// Names lowercased.
    headers: Vec<(String, String)>,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// An HTTP response with `Connection: close` (so each request comes on a new
/// connection) and, unless it is an event stream, a Content-Length.
fn response(status: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers
        .iter()
        .any(|(_, value)| *value == "text/event-stream")
    {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}

/// Serve `responses` in order, one per connection, on 127.0.0.1; returns the
/// URL and, once all are served, what was received.
async fn canned_http(responses: Vec<String>) -> (String, tokio::task::JoinHandle<Vec<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut received = Vec::new();
        for response in responses {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut data = Vec::new();
            let mut buffer = [0u8; 4096];
            let head_end = loop {
                let n = stream.read(&mut buffer).await.unwrap();
                assert!(n > 0, "connection closed mid-request");
                data.extend_from_slice(&buffer[..n]);
                if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                    break end;
                }
            };
            let head = String::from_utf8(data[..head_end].to_vec()).unwrap();
            let mut lines = head.split("\r\n");
            let line = lines.next().unwrap().to_owned();
            let headers: Vec<(String, String)> = lines
                .map(|header| {
                    let (name, value) = header.split_once(':').unwrap();
                    (name.trim().to_ascii_lowercase(), value.trim().to_owned())
                })
                .collect();
            let length: usize = headers
                .iter()
                .find(|(name, _)| name == "content-length")
                .map_or(0, |(_, value)| value.parse().unwrap());
            while data.len() < head_end + 4 + length {
                let n = stream.read(&mut buffer).await.unwrap();
                assert!(n > 0, "connection closed mid-body");
                data.extend_from_slice(&buffer[..n]);
            }
            let body = String::from_utf8(data[head_end + 4..].to_vec()).unwrap();
            received.push(Received {
                line,
                headers,
                body,
            });
            stream.write_all(response.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
        }
        received
    });
    (url, task)
}

const INIT_RESULT: &str = r#"{"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "canned", "version": "1"}}"#;

#[tokio::test]
async fn http_session_over_sse_and_json_with_session_id_and_server_ping() {
    let sse = format!(
        "id: prime\ndata:\n\n\
         event: message\ndata: {{\"jsonrpc\": \"2.0\", \"method\": \"notifications/message\", \"params\": {{}}}}\n\n\
         data: {{\"jsonrpc\": \"2.0\", \"id\": 0, \"method\": \"ping\"}}\n\n\
         data: {{\"jsonrpc\": \"2.0\", \"id\": 1,\ndata: \"result\": {INIT_RESULT}}}\n\n"
    );
    let responses = vec![
        // initialize: an event stream with a priming event, a notification, a
        // ping from the server and, split over two data lines, the response.
        response(
            "200 OK",
            &[
                ("Content-Type", "text/event-stream"),
                ("Mcp-Session-Id", "session-42"),
            ],
            &sse,
        ),
        // the answer to the server's ping
        response("202 Accepted", &[], ""),
        // notifications/initialized
        response("202 Accepted", &[], ""),
        // tools/list, as one JSON body
        response(
            "200 OK",
            &[("Content-Type", "application/json; charset=utf-8")],
            r#"{"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "t", "annotations": null}]}}"#,
        ),
        // DELETE
        response("405 Method Not Allowed", &[], ""),
    ];
    let (url, served) = canned_http(responses).await;
    let options = LiveOptions {
        headers: vec![("Authorization".into(), "Bearer secret".into())],
        ..with_timeout(10.0)
    };
    let mut session = within("connect", Session::connect(&LiveTarget::Url(url), &options))
        .await
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(session.initialize_result()["serverInfo"]["name"], "canned");
    let page = tree(
        within("tools/list", session.list_tools_page(None))
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    );
    assert_eq!(page, json!({"tools": [{"name": "t", "annotations": null}]}));
    within("close", session.close()).await;

    let received = within("responder", served).await.unwrap();
    let [init, pong, initialized, list, delete] = &received[..] else {
        panic!("{received:#?}")
    };
    for request in [init, pong, initialized, list] {
        assert_eq!(request.line, "POST /mcp HTTP/1.1");
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(
            request.header("accept"),
            Some("application/json, text/event-stream")
        );
        assert_eq!(request.header("authorization"), Some("Bearer secret"));
    }
    let init_body: Value = serde_json::from_str(&init.body).unwrap();
    assert_eq!(init_body["method"], "initialize");
    assert_eq!(init.header("mcp-session-id"), None);
    assert_eq!(init.header("mcp-protocol-version"), None);
    let pong_body: Value = serde_json::from_str(&pong.body).unwrap();
    assert_eq!(pong_body, json!({"jsonrpc": "2.0", "id": 0, "result": {}}));
    for request in [pong, initialized, list, delete] {
        assert_eq!(
            request.header("mcp-session-id"),
            Some("session-42"),
            "{request:?}"
        );
    }
    for request in [initialized, list, delete] {
        assert_eq!(request.header("mcp-protocol-version"), Some("2025-11-25"));
    }
    assert_eq!(
        serde_json::from_str::<Value>(&list.body).unwrap(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    );
    assert_eq!(delete.line, "DELETE /mcp HTTP/1.1");
}

#[tokio::test]
async fn http_error_statuses_content_types_and_short_streams_are_named() {
    let cases = [
        (
            response(
                "401 Unauthorized",
                &[("Content-Type", "text/plain")],
                "missing bearer token\n",
            ),
            "answered `initialize` with HTTP 401 (the server wants credentials it accepts: pass them with --header, e.g. 'Authorization: Bearer ...'): \"missing bearer token\"",
        ),
        (
            response("200 OK", &[("Content-Type", "text/html")], "<html></html>"),
            "answered `initialize` with HTTP 200 and content type \"text/html\"; expected application/json or text/event-stream",
        ),
        (
            response(
                "200 OK",
                &[("Content-Type", "text/event-stream")],
                "data: {\"jsonrpc\": \"2.0\", \"method\": \"notifications/message\"}\n\n",
            ),
            "the event stream answering `initialize` (id 1) ended before the response arrived",
        ),
        (
            response(
                "200 OK",
                &[("Content-Type", "text/event-stream")],
                "data: oops\n\n",
            ),
            "sent SSE event 1 that is not JSON (expected value at line 1 column 1) while answering `initialize`: \"oops\"",
        ),
        (
            response("202 Accepted", &[], ""),
            "invalid response to `initialize`: HTTP 202 Accepted with no response",
        ),
    ];
    for (canned, expected) in cases {
        let (url, served) = canned_http(vec![canned]).await;
        let error = connect_err(&LiveTarget::Url(url.clone()), &with_timeout(10.0)).await;
        let text = error.to_string();
        assert!(
            text.starts_with(&format!("MCP server at {url}")) || text.contains(&url),
            "{text}"
        );
        assert!(text.contains(expected), "{text}");
        within("responder", served).await.unwrap();
    }
}

#[tokio::test]

async fn notes_over_streamable_http_lists_its_six_tools() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let address = format!("127.0.0.1:{port}");
    let mut server = tokio::process::Command::new(notes_server())
        .args(["--http", &address])
        .kill_on_drop(true)
        .spawn()
        .expect("start notes --http");
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokio::net::TcpStream::connect(&address).await.is_err() {
        assert!(Instant::now() < deadline, "notes --http did not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let target = LiveTarget::Url(format!("http://{address}/mcp"));
    let mut session = within(
        "connect",
        Session::connect(&target, &LiveOptions::default()),
    )
    .await
    .unwrap_or_else(|error| panic!("{error}"));
    assert!(session.initialize_result()["serverInfo"].is_object());
    let page = tree(
        within("tools/list", session.list_tools_page(None))
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    );
    assert_notes_tools(&page);
    within("close", session.close()).await;
    server.kill().await.unwrap();
}

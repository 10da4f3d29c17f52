//! End to end with a hostile peer: the built `notes` server runs as a child
//! process and gets malformed messages written byte for byte, over stdio
//! and over streamable HTTP (a plain TCP client writing HTTP/1.1), and
//! every answer is asserted exactly: code, id, message, status, body.
//!
//! Over stdio each case is followed by a `ping` whose answer closes the
//! exchange: every line the server wrote before that answer is the server's
//! whole answer to the case (none, for a notification).
//!
//! Set `MCP_HINTS_NOTES` to another build of `notes` (an older one, say) to
//! see which cases it fails.

use std::future::Future;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long any one step may take before the test fails instead of hanging.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What `notes` prints on stderr once it listens, before the URL.
const ANNOUNCEMENT: &str = "notes: serving MCP over streamable HTTP at ";

/// The closing `ping` of every stdio exchange, and its answer.
const SENTINEL: &str = r#"{"jsonrpc":"2.0","id":"sentinel","method":"ping"}"#;

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {TIMEOUT:?}"))
}

fn notes_program() -> String {
    std::env::var("MCP_HINTS_NOTES").unwrap_or_else(|_| env!("CARGO_BIN_EXE_notes").to_owned())
}

/// `notes` over stdio, initialized, with the raw pipes.
struct StdioServer {
    _child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl StdioServer {
    async fn start() -> Self {
        let program = notes_program();
        let mut child = Command::new(&program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot spawn {program}: {error}"));
        let mut server = Self {
            stdin: child.stdin.take().expect("piped stdin"),
            stdout: BufReader::new(child.stdout.take().expect("piped stdout")),
            _child: child,
        };
        server
            .write(
                br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hostile-peer","version":"1"}}}
"#,
            )
            .await;
        let initialized = server.read().await;
        assert_eq!(initialized["id"], 0, "{initialized}");
        assert!(initialized.get("result").is_some(), "{initialized}");
        server
            .write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await;
        server
    }

    async fn write(&mut self, bytes: &[u8]) {
        within("writing to notes", self.stdin.write_all(bytes))
            .await
            .expect("write to the stdin of notes");
    }

    async fn read(&mut self) -> Value {
        let mut line = String::new();
        let read = within("a line from notes", self.stdout.read_line(&mut line))
            .await
            .expect("read the stdout of notes");
        assert!(read > 0, "notes closed its stdout");
        serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line:?}"))
    }

    /// Writes `line` and its newline, then the sentinel; returns every
    /// message the server wrote before the sentinel's answer.
    async fn exchange(&mut self, line: &[u8]) -> Vec<Value> {
        self.write(line).await;
        self.write(b"\n").await;
        self.answers_until_sentinel().await
    }

    /// Writes `line` (a request rmcp answers) and returns its answer, the
    /// only message before it.
    async fn request(&mut self, line: &[u8], id: Value) -> Value {
        self.write(line).await;
        self.write(b"\n").await;
        let answer = self.read().await;
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    async fn read_text(&mut self) -> String {
        let mut line = String::new();
        let read = within("a line from notes", self.stdout.read_line(&mut line))
            .await
            .expect("read the stdout of notes");
        assert!(read > 0, "notes closed its stdout");
        line.truncate(line.trim_end_matches('\n').len());
        line
    }

    /// Writes `line`, its newline and the sentinel; returns the text of
    /// every line the server wrote before the sentinel's answer, as written.
    async fn exchange_text(&mut self, line: &[u8]) -> Vec<String> {
        self.write(line).await;
        self.write(b"\n").await;
        self.write(SENTINEL.as_bytes()).await;
        self.write(b"\n").await;
        let mut answers = Vec::new();
        loop {
            let text = self.read_text().await;
            if text == r#"{"jsonrpc":"2.0","id":"sentinel","result":{}}"# {
                return answers;
            }
            answers.push(text);
        }
    }

    async fn answers_until_sentinel(&mut self) -> Vec<Value> {
        self.write(SENTINEL.as_bytes()).await;
        self.write(b"\n").await;
        let mut answers = Vec::new();
        loop {
            let message = self.read().await;
            if message["id"] == "sentinel" {
                assert_eq!(
                    message,
                    json!({"jsonrpc": "2.0", "id": "sentinel", "result": {}})
                );
                return answers;
            }
            answers.push(message);
        }
    }
}

fn error(id: Option<Value>, code: i64, message: &str) -> Value {
    let mut answer = json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}});
    if let Some(id) = id {
        answer["id"] = id;
    }
    answer
}

#[tokio::test]
async fn a_line_over_16_mib_is_a_parse_error_and_the_next_line_is_read() {
    let mut server = StdioServer::start().await;
    let mut line = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#.to_vec();
    line.resize(16 * 1024 * 1024 + 1, b'a');
    line.extend_from_slice(b"\"}}");
    assert_eq!(
        server.exchange(&line).await,
        [error(
            None,
            -32700,
            "Parse error: message longer than 16777216 bytes"
        )]
    );
    // The limit is on the bytes before the newline: 16 MiB exactly passes.
    let mut line = br#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":""#.to_vec();
    line.resize(16 * 1024 * 1024 - 3, b'a');
    line.extend_from_slice(b"\"}}");
    assert_eq!(line.len(), 16 * 1024 * 1024);
    assert_eq!(
        server.request(&line, json!(2)).await,
        json!({"jsonrpc": "2.0", "id": 2, "result": {}})
    );
}

#[tokio::test]
async fn a_lone_surrogate_escape_is_a_parse_error() {
    let mut server = StdioServer::start().await;
    let line = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"append_note","arguments":{"text":"\ud800"}}}"#;
    assert_eq!(
        server.exchange(line).await,
        [error(
            None,
            -32700,
            "Parse error: lone surrogate \\ud800 at byte 99: a string escape must be valid Unicode"
        )]
    );
    // The note was not added.
    let list = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_notes"}}"#;
    let answer = server.request(list, json!(3)).await;
    assert_eq!(answer["result"]["structuredContent"], json!({"notes": []}));
}

/// A `ping` whose params nest `depth` levels, the message object counting 1.
fn nested_ping(id: u32, depth: usize) -> Vec<u8> {
    let arrays = depth - 2;
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"x":{}{}}}}}"#,
        "[".repeat(arrays),
        "]".repeat(arrays)
    )
    .into_bytes()
}

#[tokio::test]
async fn nesting_deeper_than_128_is_a_parse_error_and_128_is_served() {
    let mut server = StdioServer::start().await;
    assert_eq!(
        server.exchange(&nested_ping(3, 129)).await,
        [error(
            None,
            -32700,
            "Parse error: nesting deeper than 128 arrays and objects"
        )]
    );
    assert_eq!(
        server.request(&nested_ping(4, 128), json!(4)).await,
        json!({"jsonrpc": "2.0", "id": 4, "result": {}})
    );
}

#[tokio::test]
async fn unparseable_json_is_a_parse_error() {
    let mut server = StdioServer::start().await;
    assert_eq!(
        server
            .exchange(br#"{"jsonrpc":"2.0","id":4,"method":"#)
            .await,
        [error(
            None,
            -32700,
            "Parse error: EOF while parsing a value at line 1 column 33"
        )]
    );
    assert_eq!(
        server
            .exchange(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"pi\xffng\"}")
            .await,
        [error(
            None,
            -32700,
            "Parse error: invalid unicode code point at line 1 column 37"
        )]
    );
}

#[tokio::test]
async fn an_invalid_request_is_answered_with_its_id() {
    let mut server = StdioServer::start().await;
    let cases = [
        (
            r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#,
            Some(json!(5)),
            "Invalid Request: `jsonrpc` must be \"2.0\", not \"1.0\"",
        ),
        (
            r#"{"id":"five","method":"ping"}"#,
            Some(json!("five")),
            "Invalid Request: no `jsonrpc`; it must be \"2.0\"",
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":5}"#,
            Some(json!(6)),
            "Invalid Request: `method` must be a string, not a number",
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":"x"}"#,
            Some(json!(7)),
            "Invalid Request: `params` must be an object, not a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            Some(json!(1.5)),
            "Invalid Request: request id 1.5 is not a string or a 64-bit integer in plain \
             decimal (no fraction, exponent or -0)",
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            None,
            "Invalid Request: a request id must be a string or an integer, not null",
        ),
        (
            r#"[{"jsonrpc":"2.0","id":8,"method":"ping"}]"#,
            None,
            "Invalid Request: a message must be a JSON object, not an array (a JSON-RPC batch, \
             which MCP does not use)",
        ),
    ];
    for (line, id, message) in cases {
        assert_eq!(
            server.exchange(line.as_bytes()).await,
            [error(id, -32600, message)],
            "{line}"
        );
    }
}

#[tokio::test]
async fn bad_tools_call_params_are_invalid_params_with_the_id() {
    let mut server = StdioServer::start().await;
    let cases = [
        (
            r#"["list_notes"]"#,
            "Invalid params: `params` of \"tools/call\" must be an object, not an array",
        ),
        (
            r#"{"name":"list_notes","arguments":"x"}"#,
            "Invalid params: `arguments` of tools/call must be an object, not a string",
        ),
        (
            r#"{"arguments":{}}"#,
            "Invalid params: tools/call needs `name`, the tool to call",
        ),
        (
            r#"{"name":["list_notes"]}"#,
            "Invalid params: `name` of tools/call must be a string, not an array",
        ),
    ];
    for (id, (params, message)) in cases.into_iter().enumerate() {
        let line =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#);
        assert_eq!(
            server.exchange(line.as_bytes()).await,
            [error(Some(json!(id)), -32602, message)],
            "{params}"
        );
    }
    // The same goes for any method rmcp models.
    let line = r#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":5}}"#;
    assert_eq!(
        server.exchange(line.as_bytes()).await,
        [error(
            Some(json!("i")),
            -32602,
            "Invalid params: `params` do not fit \"initialize\""
        )]
    );
}

#[tokio::test]
async fn a_malformed_notification_is_never_answered() {
    let mut server = StdioServer::start().await;
    for line in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}"#,
        r#"{"jsonrpc":"1.0","method":"notifications/cancelled"}"#,
        r#"{"jsonrpc":"2.0","method":5}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[]}}"#,
    ] {
        assert_eq!(
            server.exchange(line.as_bytes()).await,
            [] as [Value; 0],
            "{line}"
        );
    }
}

#[tokio::test]
async fn a_request_id_in_flight_is_refused_and_does_not_run() {
    let mut server = StdioServer::start().await;
    // Keep the first call in flight: its answer queues behind answers the
    // server cannot write while nobody reads its stdout (a pipe holds 64 KiB;
    // these are megabytes).
    const FILL: usize = 300;
    let mut lines = String::new();
    for n in 0..FILL {
        lines.push_str(&format!(
            r#"{{"jsonrpc":"2.0","id":"fill-{n}","method":"tools/list"}}"#
        ));
        lines.push('\n');
    }
    let call = r#"{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"append_note","arguments":{"text":"once"}}}"#;
    lines.push_str(call);
    lines.push('\n');
    lines.push_str(call);
    lines.push('\n');
    server.write(lines.as_bytes()).await;
    let answers = server.answers_until_sentinel().await;
    let mut dup = Vec::new();
    let mut filled = 0;
    for answer in answers {
        if answer["id"] == "dup" {
            dup.push(answer);
        } else {
            assert!(answer["result"]["tools"].is_array(), "{answer}");
            filled += 1;
        }
    }
    // Answers may still come after the sentinel's; ask for the notes and
    // collect the rest on the way.
    let list =
        r#"{"jsonrpc":"2.0","id":"list","method":"tools/call","params":{"name":"list_notes"}}"#;
    server.write(list.as_bytes()).await;
    server.write(b"\n").await;
    let notes = loop {
        let answer = server.read().await;
        match answer["id"].as_str() {
            Some("dup") => dup.push(answer),
            Some("list") => break answer,
            _ => filled += 1,
        }
    };
    assert_eq!(filled, FILL);
    let refusal = error(
        Some(json!("dup")),
        -32600,
        "Invalid Request: request id \"dup\" is already in use by a request in flight",
    );
    assert_eq!(dup.len(), 2, "{dup:?}");
    assert!(dup.contains(&refusal), "{dup:?}");
    let result = dup.iter().find(|answer| **answer != refusal).unwrap();
    assert_eq!(
        result["result"]["structuredContent"],
        json!({"id": 1, "text": "once"})
    );
    // The second call never ran.
    assert_eq!(
        notes["result"]["structuredContent"],
        json!({"notes": [{"id": 1, "text": "once"}]})
    );
}

/// `notes --http 127.0.0.1:0` and its port.
async fn start_http(extra: &[&str]) -> (Child, u16) {
    let program = notes_program();
    let mut child = Command::new(&program)
        .args(["--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot spawn {program}: {error}"));
    let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let url = within("the address on stderr", async {
        loop {
            match lines.next_line().await.expect("read the stderr of notes") {
                Some(line) => {
                    if let Some(url) = line.strip_prefix(ANNOUNCEMENT) {
                        return url.to_owned();
                    }
                    eprintln!("{line}");
                }
                None => panic!("notes closed stderr without announcing its address"),
            }
        }
    })
    .await;
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
        }
    });
    let port = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("announced URL: {url}"));
    (child, port)
}

/// One HTTP/1.1 exchange, as raw as a hostile client writes it.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        assert_eq!(self.header("content-type"), Some("application/json"));
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }
}

async fn http(port: u16, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let raw = within("an HTTP exchange", async {
        let mut stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect to notes");
        // The server may answer and close before reading a body it
        // refused (413 for a declared length over the limit): write while
        // reading, and keep what was read when the write fails.
        let (mut from_server, mut to_server) = stream.split();
        let write = async {
            if to_server.write_all(request.as_bytes()).await.is_ok() {
                let _ = to_server.write_all(body).await;
            }
        };
        let read = async {
            let mut raw = Vec::new();
            let _ = from_server.read_to_end(&mut raw).await;
            raw
        };
        tokio::join!(write, read).1
    })
    .await;
    let split = raw
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8(raw[..split].to_vec()).expect("ASCII headers");
    let mut head_lines = head.split("\r\n");
    let status = head_lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|status| status.parse().ok())
        .expect("a status line");
    let headers = head_lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let mut reply = Reply {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    };
    if reply.header("transfer-encoding") == Some("chunked") {
        reply.body = dechunked(&reply.body);
    }
    reply
}

fn dechunked(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = raw.windows(2).position(|window| window == b"\r\n") {
        let size = std::str::from_utf8(&raw[..end])
            .unwrap()
            .split(';')
            .next()
            .unwrap();
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        let start = end + 2;
        body.extend_from_slice(&raw[start..start + size]);
        raw = &raw[start + size + 2..];
    }
    body
}

const JSON_POST: [(&str, &str); 2] = [
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
];

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"hostile-peer","version":"1"}}}"#;

#[tokio::test]
async fn http_bad_json_is_400_with_a_parse_error() {
    let (_child, port) = start_http(&[]).await;
    let reply = http(
        port,
        "POST",
        &JSON_POST,
        br#"{"jsonrpc":"2.0","id":4,"method":"#,
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.json(),
        error(
            None,
            -32700,
            "Parse error: EOF while parsing a value at line 1 column 33"
        )
    );
    let reply = http(port, "POST", &JSON_POST, &nested_ping(5, 129)).await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.json(),
        error(
            None,
            -32700,
            "Parse error: nesting deeper than 127 arrays and objects"
        )
    );
}

#[tokio::test]
async fn http_invalid_requests_are_400_with_their_id() {
    let (_child, port) = start_http(&[]).await;
    let reply = http(
        port,
        "POST",
        &JSON_POST,
        br#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#,
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.json(),
        error(
            Some(json!(5)),
            -32600,
            "Invalid Request: `jsonrpc` must be \"2.0\", not \"1.0\""
        )
    );
    let body = br#"{"jsonrpc":"2.0","id":"t","method":"tools/call","params":{"name":"list_notes","arguments":"x"}}"#;
    let reply = http(port, "POST", &JSON_POST, body).await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.json(),
        error(
            Some(json!("t")),
            -32602,
            "Invalid params: `arguments` of tools/call must be an object, not a string"
        )
    );
    // A malformed notification gets an HTTP error and no JSON-RPC answer.
    let body = br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}"#;
    let reply = http(port, "POST", &JSON_POST, body).await;
    assert_eq!(reply.status, 400);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        reply.text(),
        "Bad Request: malformed notification: `params` is a string"
    );
}

#[tokio::test]
async fn http_body_over_4_mib_is_413_with_a_parse_error() {
    let (_child, port) = start_http(&[]).await;
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#.to_vec();
    body.resize(4 * 1024 * 1024 + 1, b'a');
    let reply = http(port, "POST", &JSON_POST, &body).await;
    assert_eq!(reply.status, 413);
    assert_eq!(
        reply.json(),
        error(None, -32700, "Parse error: body longer than 4194304 bytes")
    );
}

fn with_origin(origin: &str) -> Vec<(&str, &str)> {
    let mut headers = JSON_POST.to_vec();
    headers.push(("Origin", origin));
    headers
}

#[tokio::test]
async fn http_foreign_origin_is_403_and_the_servers_own_is_served() {
    let (_child, port) = start_http(&["--allow-origin", "https://app.example.com"]).await;
    let reply = http(
        port,
        "POST",
        &with_origin("http://evil.example"),
        INITIALIZE.as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 403);
    assert_eq!(
        reply.text(),
        "Forbidden: Origin \"http://evil.example\" is not allowed"
    );
    // Refused before anything else, a malformed body included.
    let reply = http(port, "POST", &with_origin("http://evil.example"), b"{").await;
    assert_eq!(reply.status, 403);
    let reply = http(
        port,
        "DELETE",
        &[("Origin", "null"), ("Mcp-Session-Id", "x")],
        b"",
    )
    .await;
    assert_eq!(reply.status, 403);

    let own = format!("http://localhost:{port}");
    for origin in [own.as_str(), "https://app.example.com"] {
        let reply = http(port, "POST", &with_origin(origin), INITIALIZE.as_bytes()).await;
        assert_eq!(
            reply.status,
            200,
            "{origin}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert!(reply.header("mcp-session-id").is_some(), "{origin}");
    }
}

#[tokio::test]
async fn http_delete_of_an_unknown_session_is_404() {
    let (_child, port) = start_http(&[]).await;
    let reply = http(
        port,
        "DELETE",
        &[("Mcp-Session-Id", "no-such-session")],
        b"",
    )
    .await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.text(), "Not Found: Session not found");

    // A session that exists is still ended by rmcp, and is unknown after.
    let reply = http(port, "POST", &JSON_POST, INITIALIZE.as_bytes()).await;
    assert_eq!(reply.status, 200);
    let session = reply
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    let reply = http(port, "DELETE", &[("Mcp-Session-Id", &session)], b"").await;
    assert_eq!(reply.status, 202);
    let reply = http(port, "DELETE", &[("Mcp-Session-Id", &session)], b"").await;
    assert_eq!(reply.status, 404);
}

#[tokio::test]
async fn a_non_loopback_http_address_needs_public() {
    let output = within(
        "notes --http 0.0.0.0:0",
        Command::new(notes_program())
            .args(["--http", "0.0.0.0:0"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("run notes");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "notes: --http 0.0.0.0:0 is not a loopback address; pass --public to listen beyond \
         this machine\n"
    );
}

/// Numeric ids rmcp cannot carry or would write back otherwise, and the
/// guard's answer to a `ping` with each, byte for byte.
fn unrepeatable_ids() -> Vec<(String, String)> {
    ["100000000000000000000", "1.5", "1e20", "1.0", "-0"]
        .into_iter()
        .map(|id| {
            (
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32600,"message":"Invalid Request: request id {id} is not a string or a 64-bit integer in plain decimal (no fraction, exponent or -0)"}}}}"#
                ),
            )
        })
        .chain(std::iter::once((
            // A string id is repeated as written too, escapes and all.
            r#"{"jsonrpc":"1.0","id":"\u0041\/b","method":"ping"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"\u0041\/b","error":{"code":-32600,"message":"Invalid Request: `jsonrpc` must be \"2.0\", not \"1.0\""}}"#.to_owned(),
        )))
        .collect()
}

#[tokio::test]
async fn ids_are_repeated_exactly_as_sent() {
    let mut server = StdioServer::start().await;
    let (_child, port) = start_http(&[]).await;
    for (line, answer) in unrepeatable_ids() {
        assert_eq!(
            server.exchange_text(line.as_bytes()).await,
            std::slice::from_ref(&answer),
            "stdio: {line}"
        );
        let reply = http(port, "POST", &JSON_POST, line.as_bytes()).await;
        assert_eq!(reply.status, 400, "http: {line}");
        assert_eq!(reply.text(), answer, "http: {line}");
    }
    // An integer rmcp writes back as sent is served (rmcp answers it
    // concurrently, so it is read alone, not before a sentinel).
    server
        .write(b"{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"method\":\"ping\"}\n")
        .await;
    assert_eq!(
        server.read_text().await,
        r#"{"jsonrpc":"2.0","id":-9223372036854775808,"result":{}}"#
    );
}

/// What a transport did with one message: a JSON-RPC answer, or none.
#[derive(Debug, PartialEq)]
enum Outcome {
    Answer(Value),
    /// Over stdio nothing; over HTTP a 400 in plain text with this reason.
    Unanswered(&'static str),
}

#[tokio::test]
async fn repeated_members_and_a_bom_are_read_alike_over_stdio_and_http() {
    const BOM: &str = "\u{feff}";
    let repeated =
        |member: &str| format!("Invalid Request: member \"{member}\" appears more than once");
    let cases: Vec<(String, Outcome)> = vec![
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#.to_owned(),
            Outcome::Answer(error(None, -32600, &repeated("id"))),
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":1,"method":"ping"}"#.to_owned(),
            Outcome::Answer(error(Some(json!(1)), -32600, &repeated("id"))),
        ),
        (
            r#"{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/list"}"#.to_owned(),
            Outcome::Answer(error(Some(json!(3)), -32600, &repeated("method"))),
        ),
        (
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":4,"method":"ping"}"#.to_owned(),
            Outcome::Answer(error(Some(json!(4)), -32600, &repeated("jsonrpc"))),
        ),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_notes"},"params":{"name":"append_note","arguments":{"text":"x"}}}"#.to_owned(),
            Outcome::Answer(error(Some(json!(5)), -32600, &repeated("params"))),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","method":"notifications/initialized"}"#.to_owned(),
            Outcome::Unanswered(
                "Bad Request: malformed notification: member \"method\" appears more than once",
            ),
        ),
        // A leading BOM is ignored on both: what follows is read as usual.
        (
            format!(r#"{BOM}{{"jsonrpc":"1.0","id":6,"method":"ping"}}"#),
            Outcome::Answer(error(
                Some(json!(6)),
                -32600,
                "Invalid Request: `jsonrpc` must be \"2.0\", not \"1.0\"",
            )),
        ),
        (
            format!(r#"{BOM}{BOM}{{"jsonrpc":"2.0","id":7,"method":"ping"}}"#),
            Outcome::Answer(error(
                None,
                -32700,
                "Parse error: expected value at line 1 column 1",
            )),
        ),
    ];
    let mut server = StdioServer::start().await;
    let (_child, port) = start_http(&[]).await;
    for (line, outcome) in &cases {
        let over_stdio = match server.exchange(line.as_bytes()).await.as_slice() {
            [] => Outcome::Unanswered("nothing"),
            [answer] => Outcome::Answer(answer.clone()),
            more => panic!("stdio: {line}: {more:?}"),
        };
        let expected_stdio = match outcome {
            Outcome::Unanswered(_) => Outcome::Unanswered("nothing"),
            Outcome::Answer(answer) => Outcome::Answer(answer.clone()),
        };
        assert_eq!(over_stdio, expected_stdio, "stdio: {line}");
        let reply = http(port, "POST", &JSON_POST, line.as_bytes()).await;
        assert_eq!(reply.status, 400, "http: {line}: {}", reply.text());
        let over_http = match reply.header("content-type") {
            Some("application/json") => Outcome::Answer(reply.json()),
            _ => Outcome::Unanswered(match outcome {
                Outcome::Unanswered(reason) if *reason == reply.text() => reason,
                _ => panic!("http: {line}: {}", reply.text()),
            }),
        };
        assert_eq!(&over_http, outcome, "http: {line}");
    }
    // A sound message after a BOM is served on both.
    let ping = format!(r#"{BOM}{{"jsonrpc":"2.0","id":8,"method":"ping"}}"#);
    assert_eq!(
        server.request(ping.as_bytes(), json!(8)).await,
        json!({"jsonrpc": "2.0", "id": 8, "result": {}})
    );
    let initialize = format!("{BOM}{INITIALIZE}");
    let reply = http(port, "POST", &JSON_POST, initialize.as_bytes()).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert!(reply.header("mcp-session-id").is_some());
}

#[tokio::test]
async fn http_declared_length_over_4_mib_is_413_before_the_body_is_read() {
    let (_child, port) = start_http(&[]).await;
    let mut stream = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to notes");
    // A terabyte declared, a few bytes sent, and the connection kept open:
    // the answer must not wait for the rest.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 1000000000000\r\n\r\n\
         {{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let answered = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buffer = [0u8; 4096];
        loop {
            let read = stream.read(&mut buffer).await.expect("read the answer");
            raw.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&raw);
            if read == 0 || text.ends_with("}}") {
                return;
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&raw);
    assert!(answered.is_ok(), "no answer within 5 s, got {text:?}");
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(
        text.ends_with(
            r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error: body longer than 4194304 bytes"}}"#
        ),
        "{text}"
    );
}

#[tokio::test]
async fn http_a_quoted_accept_parameter_still_has_the_body_checked() {
    // `;q=0;` inside a quoted string weighs nothing: rmcp reads the body,
    // so the guard checks it.
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", r#"application/json, text/event-stream;x=";q=0;""#),
    ];
    let (_child, port) = start_http(&[]).await;
    let reply = http(
        port,
        "POST",
        &headers,
        br#"{"jsonrpc":"2.0","id":4,"method":"#,
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert_eq!(
        reply.json(),
        error(
            None,
            -32700,
            "Parse error: EOF while parsing a value at line 1 column 33"
        )
    );
    let initialize = INITIALIZE.replace(r#""id":1"#, r#""id":1.0"#);
    let reply = http(port, "POST", &headers, initialize.as_bytes()).await;
    assert_eq!(reply.status, 400, "{}", reply.text());
    assert_eq!(
        reply.text(),
        r#"{"jsonrpc":"2.0","id":1.0,"error":{"code":-32600,"message":"Invalid Request: request id 1.0 is not a string or a 64-bit integer in plain decimal (no fraction, exponent or -0)"}}"#
    );
    // A sound request with the same headers is served.
    let reply = http(port, "POST", &headers, INITIALIZE.as_bytes()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

#[tokio::test]
async fn whitespace_that_json_does_not_know_is_a_parse_error_over_stdio_and_http() {
    let mut server = StdioServer::start().await;
    let (_child, port) = start_http(&[]).await;
    // JSON's whitespace is space, tab, LF and CR (RFC 8259 §2): a line of
    // it is blank, a body of it is not JSON.
    assert_eq!(server.exchange(b" \t\r").await, Vec::<Value>::new());
    for line in [&b"\x0c\x0c"[..], b"\x0b", "\u{a0}".as_bytes()] {
        let answer = error(
            None,
            -32700,
            "Parse error: expected value at line 1 column 1",
        );
        assert_eq!(
            server.exchange(line).await,
            std::slice::from_ref(&answer),
            "stdio: {line:?}"
        );
        let reply = http(port, "POST", &JSON_POST, line).await;
        assert_eq!(reply.status, 400, "http: {line:?}: {}", reply.text());
        assert_eq!(reply.json(), answer, "http: {line:?}");
    }
}

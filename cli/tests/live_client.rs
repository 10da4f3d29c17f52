//! The live MCP client (`mcp_hints_cli::live`) against real servers and
//! against misbehaving ones.
//!
//! The misbehaving servers are shell and python3 one-liners run as the server
//! command, and, for HTTP, responders on 127.0.0.1 written here that answer
//! each connection with a fixed HTTP response, an endless body, a huge event
//! or a slow drip: they are the faults under test, not stand-ins for a real
//! peer. The real peer is the example `notes` server, built here with
//! escargot (which honours CARGO_TARGET_DIR), under every revision; the real
//! servers of other SDKs are in tests/protocol_revisions.rs.

mod support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_hints_cli::live::{
    Ended, Lifecycle, LiveError, LiveErrorKind, LiveOptions, LiveTarget, ProtocolVersion, Session,
};
use serde_json::{Value, json};
use support::notes_server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

fn python(script: &str) -> LiveTarget {
    command("python3", &["-c", script])
}

fn with_timeout(seconds: f64) -> LiveOptions {
    LiveOptions {
        timeout: Duration::from_secs_f64(seconds),
        ..LiveOptions::default()
    }
}

/// Options that skip negotiation: `initialize` at 2025-11-25, as the
/// scripted `initialize`-only peers below expect.
fn legacy(seconds: f64) -> LiveOptions {
    LiveOptions {
        protocol_version: Some(ProtocolVersion::V2025_11_25),
        ..with_timeout(seconds)
    }
}

async fn connect_err(target: &LiveTarget, options: &LiveOptions) -> LiveError {
    match within("connect", Session::connect(target, options)).await {
        Ok(session) => panic!("connect succeeded: {session:?}"),
        Err(error) => error,
    }
}

async fn connect_ok(target: &LiveTarget, options: &LiveOptions) -> Session {
    within("connect", Session::connect(target, options))
        .await
        .unwrap_or_else(|error| panic!("{error}"))
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

fn notes_target() -> LiveTarget {
    LiveTarget::Command {
        program: notes_server().into(),
        args: Vec::new(),
    }
}

#[tokio::test]
async fn notes_over_stdio_negotiates_2026_07_28_and_lists_its_six_tools() {
    let mut session = connect_ok(&notes_target(), &LiveOptions::default()).await;
    let negotiation = session.negotiation().clone();
    assert_eq!(session.protocol_version(), "2026-07-28");
    assert_eq!(negotiation.lifecycle, Lifecycle::Discover);
    assert!(!negotiation.forced);
    assert_eq!(
        negotiation.server_versions,
        [
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            "2026-07-28"
        ]
    );
    assert_eq!(
        negotiation.why,
        "the newest revision; server/discover lists 2024-11-05, 2025-03-26, 2025-06-18, \
         2025-11-25, 2026-07-28"
    );
    let opening = session.opening_result();
    assert_eq!(opening["resultType"], "complete", "{opening}");
    assert!(opening["capabilities"]["tools"].is_object(), "{opening}");
    assert_eq!(session.server_info().unwrap()["name"], "notes");
    let page = tree(
        within("tools/list", session.list_tools_page(None))
            .await
            .expect("tools/list"),
    );
    assert_notes_tools(&page);
    // 2026-07-28 pages carry their cache hints.
    assert_eq!(page["resultType"], "complete");
    assert!(
        page["ttlMs"].is_u64() && page["cacheScope"].is_string(),
        "{page}"
    );
    // ping is gone from 2026-07-28: the server says so.
    let error = within("ping", session.request("ping", None))
        .await
        .unwrap_err();
    assert!(
        matches!(error.kind(), LiveErrorKind::Rpc { code: -32601, .. }),
        "{error}"
    );
    // notes exits by itself once its stdin closes: it is not killed.
    let ended = within("close", session.close()).await;
    assert!(
        matches!(ended, Some(Ended::Exited(status)) if status.success()),
        "{ended:?}"
    );
}

#[tokio::test]
async fn notes_over_stdio_speaks_each_revision_asked_for() {
    for version in [
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2026_07_28,
    ] {
        let options = LiveOptions {
            protocol_version: Some(version),
            ..LiveOptions::default()
        };
        let mut session = connect_ok(&notes_target(), &options).await;
        let negotiation = session.negotiation();
        assert_eq!(negotiation.version, version.as_str());
        assert_eq!(negotiation.lifecycle, version.lifecycle());
        assert!(negotiation.forced);
        assert!(
            negotiation
                .why
                .starts_with("asked for with --protocol-version"),
            "{negotiation:?}"
        );
        if version.lifecycle() == Lifecycle::Initialize {
            assert_eq!(
                session.opening_result()["protocolVersion"],
                version.as_str()
            );
            // The `initialize` revisions still have ping; ids keep increasing.
            let pong = within("ping", session.request("ping", None))
                .await
                .expect("ping");
            assert_eq!(pong, json!({}));
        }
        assert_eq!(session.server_info().unwrap()["name"], "notes", "{version}");
        let page = tree(
            within("tools/list", session.list_tools_page(None))
                .await
                .expect("tools/list"),
        );
        assert_notes_tools(&page);
        let error = within("unknown method", session.request("no/such/method", None))
            .await
            .unwrap_err();
        assert!(
            matches!(error.kind(), LiveErrorKind::Rpc { code: -32601, .. }),
            "{version}: {error}"
        );
        let ended = within("close", session.close()).await;
        assert!(
            matches!(ended, Some(Ended::Exited(status)) if status.success()),
            "{version}: {ended:?}"
        );
    }
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
    let starts = pid_file("exits");
    // It exits on the probe too, so it is started again for `initialize`,
    // where it exits the same way.
    let target = sh(&format!(
        "echo start >> {}; echo 'fatal: MY_API_KEY is not set' >&2; exit 3",
        starts.display()
    ));
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
    assert_eq!(started(&starts, 2), "start\nstart\n");
}

#[tokio::test]
async fn a_server_that_exits_on_the_probe_is_started_again_for_initialize() {
    let starts = pid_file("probe-exit");
    // As some servers that predate 2026-07-28 do: any first request but
    // `initialize` ends them.
    let server = format!(
        r#"import json, sys
open({file:?}, "a").write("start\n")
first = json.loads(sys.stdin.readline())
if first["method"] != "initialize": sys.exit(1)
print(json.dumps({{"jsonrpc": "2.0", "id": first["id"], "result": {{"protocolVersion": "2025-06-18", "capabilities": {{}}, "serverInfo": {{"name": "old", "version": "0"}}}}}}), flush=True)
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "tools/list":
        print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": {{"tools": []}}}}), flush=True)
"#,
        file = starts.display().to_string()
    );
    let mut session = connect_ok(&python(&server), &with_timeout(20.0)).await;
    let negotiation = session.negotiation();
    assert_eq!(negotiation.version, "2025-06-18");
    assert_eq!(negotiation.lifecycle, Lifecycle::Initialize);
    assert_eq!(
        negotiation.why,
        "the server exited (exit status: 1) on server/discover: taken as one that predates \
         2026-07-28, and started again; initialize asked for 2025-11-25, the server chose \
         2025-06-18"
    );
    let page = tree(
        within("tools/list", session.list_tools_page(None))
            .await
            .unwrap(),
    );
    assert_eq!(page, json!({"tools": []}));
    within("close", session.close()).await;
    assert_eq!(started(&starts, 2), "start\nstart\n");
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

async fn read_pids(file: &std::path::Path, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && text.ends_with('\n')
        {
            let pids: Vec<u32> = text
                .split_whitespace()
                .map(|pid| pid.parse().unwrap())
                .collect();
            if pids.len() >= count {
                return pids;
            }
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

/// What servers wrote to `file` as they started, once `count` lines are
/// there (for [`support::SETTLE`] at most).
fn started(file: &Path, count: usize) -> String {
    support::wait_for(
        support::SETTLE,
        || std::fs::read_to_string(file).unwrap_or_default(),
        |text| text.lines().count() >= count,
    )
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
    // Negotiating: the probe waits 1 s, then `initialize` 1 s more.
    let error = connect_err(&target, &with_timeout(1.0)).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
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
    let pids = read_pids(&pids, 2).await;
    assert_eq!(pids.len(), 2);
    assert_dead_soon(&pids).await;
}

/// A python server that answers `initialize`, lists no tools, writes its
/// pid and a child's to `file`, and ignores stdin's end: it sleeps on.
fn stubborn_server(file: &std::path::Path) -> LiveTarget {
    let server = format!(
        r#"import json, os, subprocess, sys, time
child = subprocess.Popen(["sleep", "60"])
open({file:?}, "w").write(f"{{os.getpid()}} {{child.pid}}\n")
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": {{"protocolVersion": "2025-11-25", "capabilities": {{}}, "serverInfo": {{"name": "py", "version": "0"}}}}}}), flush=True)
time.sleep(60)
"#,
        file = file.display().to_string()
    );
    python(&server)
}

#[tokio::test]
async fn dropping_a_session_kills_the_server() {
    let pids = pid_file("dropped");
    // This server ignores stdin's end: only a kill stops it, and its child.
    let session = connect_ok(&stubborn_server(&pids), &legacy(30.0)).await;
    let pids = read_pids(&pids, 2).await;
    assert!(pids.iter().all(|&pid| !is_dead(pid)));
    drop(session);
    assert_dead_soon(&pids).await;
}

#[tokio::test]
async fn close_kills_a_server_that_ignores_stdin_eof() {
    let pids = pid_file("stubborn");
    let session = connect_ok(&stubborn_server(&pids), &legacy(30.0)).await;
    let pids = read_pids(&pids, 2).await;
    let started = Instant::now();
    let ended = within("close", session.close()).await;
    assert_eq!(ended, Some(Ended::Killed));
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
    // The probe is the first request: no reason to fall back.
    assert!(
        text.contains("sent stdout line 2 that is not JSON (expected value at line 1 column 1) while answering `server/discover`: \"hello from a server that logs to stdout\""),
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
    assert_eq!(excerpt.chars().count(), 200, "199 characters and …");
    assert!(error.to_string().len() < 600);
}

#[tokio::test]
async fn a_line_longer_than_the_bound_is_refused_unread() {
    let target = python(
        r#"import sys
sys.stdin.readline()
sys.stdout.write("{" + " " * 5000000)
sys.stdout.flush()
import time; time.sleep(30)
"#,
    );
    let options = LiveOptions {
        max_response_bytes: 1 << 20,
        ..legacy(20.0)
    };
    let started = Instant::now();
    let error = connect_err(&target, &options).await;
    assert!(started.elapsed() < Duration::from_secs(10));
    let LiveErrorKind::ResponseTooLarge {
        location, limit, ..
    } = error.kind()
    else {
        panic!("{error:?}")
    };
    assert_eq!((location.as_str(), *limit), ("stdout line 1", 1 << 20));
    assert!(
        error.to_string().contains(
            "sent stdout line 1 of more than 1048576 bytes (1 MiB), the --max-response-bytes \
             bound, while answering `initialize`"
        ),
        "{error}"
    );
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
    python(&script)
}

#[tokio::test]
async fn an_initialize_error_response_is_reported_with_code_message_and_data() {
    let target = answers_initialize_with(
        r#"{"jsonrpc": "2.0", "id": "ID", "error": {"code": -32603, "message": "Internal error", "data": {"why": "no database"}}}"#,
    );
    let error = connect_err(&target, &legacy(30.0)).await;
    let LiveErrorKind::Rpc {
        code,
        message,
        data,
        request,
        http_status,
        ..
    } = error.kind()
    else {
        panic!("{error:?}")
    };
    assert_eq!(
        (*code, message.as_str(), request.as_str(), *http_status),
        (-32603, "Internal error", "initialize", None)
    );
    assert_eq!(data, &Some(json!({"why": "no database"})));
    assert!(
        error.to_string().ends_with(
            "answered `initialize` with JSON-RPC error -32603: Internal error (data: {\"why\":\"no database\"})"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_refused_revision_is_exit_2_with_the_refusal_quoted_and_escaped() {
    // An `initialize` revision's refusal (-32602 with the supported list),
    // with text that would colour the terminal and reverse the line.
    let target = answers_initialize_with(
        r#"{"jsonrpc": "2.0", "id": "ID", "error": {"code": -32602, "message": "Unsupported protocol version\u001b[31m\u202e", "data": {"supported": ["2024-11-05"], "requested": "2025-11-25"}}}"#,
    );
    let error = connect_err(&target, &legacy(30.0)).await;
    let LiveErrorKind::ProtocolRefused {
        version, supported, ..
    } = error.kind()
    else {
        panic!("{error:?}")
    };
    assert_eq!(version.as_deref(), Some("2025-11-25"));
    assert_eq!(supported, &["2024-11-05"]);
    let text = error.to_string();
    assert!(
        text.ends_with(
            "refuses MCP 2025-11-25, the revision --protocol-version asks for: it answered \
             `initialize` with JSON-RPC error -32602 \"Unsupported protocol version\\u{1b}[31m\\u{202e}\"; \
             it supports 2024-11-05: pass --protocol-version 2024-11-05, or leave \
             --protocol-version out to negotiate"
        ),
        "{text}"
    );
    // A forced revision is not silently downgraded either.
    let target = answers_initialize_with(
        r#"{"jsonrpc": "2.0", "id": "ID", "result": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}}"#,
    );
    let error = connect_err(&target, &legacy(30.0)).await;
    assert!(
        error.to_string().ends_with(
            "refuses MCP 2025-11-25, the revision --protocol-version asks for: it answered \
             `initialize` with protocol version \"2025-06-18\": leave --protocol-version out to \
             negotiate"
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
        let error = connect_err(&answers_initialize_with(reply), &legacy(30.0)).await;
        assert!(error.to_string().contains(expected), "{reply}: {error}");
    }
    // And a discovery without its versions.
    let error = connect_err(
        &answers_initialize_with(
            r#"{"jsonrpc": "2.0", "id": "ID", "result": {"capabilities": {}}}"#,
        ),
        &LiveOptions::default(),
    )
    .await;
    assert!(
        error.to_string().contains(
            "invalid response to `server/discover`: the result has no \"supportedVersions\""
        ),
        "{error}"
    );
}

/// A scripted peer that predates 2026-07-28: it refuses the probe as such a
/// server does, then checks that the client answers the server's requests,
/// ignores notifications, accepts a negotiated protocol version, and hands
/// back `tools/list` results raw (null annotations, non-boolean hints,
/// duplicate names), page by page.
const SCRIPTED_SERVER: &str = r#"
import json, sys
def send(m): print(json.dumps(m), flush=True)
def recv(): return json.loads(sys.stdin.readline())
def fail(why): print(why, file=sys.stderr, flush=True); sys.exit(1)
probe = recv()
meta = probe.get("params", {}).get("_meta", {})
if probe["method"] != "server/discover" or probe["id"] != 1: fail(f"probe: {probe}")
if meta.get("io.modelcontextprotocol/protocolVersion") != "2026-07-28": fail(f"probe meta: {probe}")
if meta.get("io.modelcontextprotocol/clientCapabilities") != {"roots": {}}: fail(f"probe capabilities: {probe}")
if meta.get("io.modelcontextprotocol/clientInfo", {}).get("name") != "mcp-hints": fail(f"probe clientInfo: {probe}")
send({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}})
init = recv()
if init["method"] != "initialize" or init["id"] != 2: fail(f"first: {init}")
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
send({"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "scripted", "version": "0.1"}}})
note = recv()
if note != {"jsonrpc": "2.0", "method": "notifications/initialized"}: fail(f"initialized: {note}")
first = recv()
if first != {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}: fail(f"page 1: {first}")
send({"jsonrpc": "2.0", "id": 3, "result": {"tools": [
    {"name": "a", "inputSchema": {"type": "object"}, "annotations": None},
    {"name": "a", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "yes"}}],
    "nextCursor": "page-2"}})
second = recv()
if second != {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"cursor": "page-2"}}: fail(f"page 2: {second}")
send([{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
      {"jsonrpc": "2.0", "id": 4, "result": {"tools": [{"name": "b", "inputSchema": {"type": "object"}, "annotations": {"idempotentHint": 1}}]}}])
sys.stdin.read()
"#;

#[tokio::test]
async fn server_requests_are_answered_and_pages_come_back_raw() {
    let options = LiveOptions {
        capabilities: json!({"roots": {}}),
        ..with_timeout(10.0)
    };
    let mut session = connect_ok(&python(SCRIPTED_SERVER), &options).await;
    assert_eq!(session.protocol_version(), "2025-06-18");
    let negotiation = session.negotiation();
    assert_eq!(negotiation.lifecycle, Lifecycle::Initialize);
    assert_eq!(
        negotiation.why,
        "server/discover was refused with JSON-RPC error -32601 \"Method not found\": the \
         server predates 2026-07-28; initialize asked for 2025-11-25, the server chose 2025-06-18"
    );
    assert_eq!(session.opening_result()["serverInfo"]["name"], "scripted");
    assert_eq!(session.server_info().unwrap()["name"], "scripted");
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

/// A scripted 2026-07-28 peer: every request must carry the `_meta`, and
/// it sends a request of its own and a notification, which the client must
/// neither answer nor choke on.
const MODERN_SERVER: &str = r#"
import json, sys
def send(m): print(json.dumps(m), flush=True)
def recv(): return json.loads(sys.stdin.readline())
def fail(why): print(why, file=sys.stderr, flush=True); sys.exit(1)
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
def check(m, method, id):
    if m.get("method") != method or m.get("id") != id: fail(f"expected {method} {id}: {m}")
    meta = m.get("params", {}).get("_meta", {})
    for key, value in META.items():
        if meta.get(key) != value: fail(f"{key} in {m}")
probe = recv(); check(probe, "server/discover", 1)
send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
send({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"})
send({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "ttlMs": 5000, "cacheScope": "public", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "1"}}}})
page = recv()
if page.get("method") != "tools/list": fail(f"answered a server request, or worse: {page}")
check(page, "tools/list", 2)
if page["params"].get("cursor") != "": fail(f"cursor: {page}")
send({"jsonrpc": "2.0", "id": 2, "result": {"resultType": "complete", "tools": [], "ttlMs": 60000, "cacheScope": "private"}})
sys.stdin.read()
"#;

#[tokio::test]
async fn a_2026_07_28_stdio_session_carries_meta_and_answers_no_server_request() {
    let mut session = connect_ok(&python(MODERN_SERVER), &with_timeout(10.0)).await;
    assert_eq!(session.protocol_version(), "2026-07-28");
    assert_eq!(session.server_info().unwrap()["name"], "modern");
    assert_eq!(session.opening_result()["ttlMs"], 5000);
    // An empty cursor is a cursor (2026-07-28).
    let page = tree(
        within("tools/list", session.list_tools_page(Some("")))
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    );
    assert_eq!(page["ttlMs"], 60000);
    assert!(
        session.stderr_tail().is_empty(),
        "{:?}",
        session.stderr_tail()
    );
    within("close", session.close()).await;
}

#[tokio::test]
async fn a_silent_probe_falls_back_and_a_refused_fallback_asks_again() {
    // Answers nothing but `initialize`: the probe times out (1 s here).
    let silent = python(
        r#"import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "silent", "version": "0"}}}), flush=True)
    elif m.get("method") == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": []}}), flush=True)
"#,
    );
    let session = connect_ok(&silent, &with_timeout(1.0)).await;
    assert_eq!(session.negotiation().lifecycle, Lifecycle::Initialize);
    assert_eq!(
        session.negotiation().why,
        "server/discover had no answer within 1s: taken as a server that predates 2026-07-28"
    );
    within("close", session.close()).await;
    // Slow to answer the probe, then modern only: the late answer to the
    // probe is dropped, `initialize` is refused with -32022 listing
    // 2026-07-28, and the client asks again. The first probe is held until
    // `initialize` shows the client gave up on it (not answered after a
    // fixed sleep, which a loaded machine's slow interpreter start could
    // stretch past the client's next timeout).
    let slow = python(
        r#"import json, sys
def discovered(m):
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"}}), flush=True)
held, probes = None, 0
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "server/discover":
        probes += 1
        if probes == 1:
            held = m
        else:
            discovered(m)
    elif m.get("method") == "initialize":
        if held is not None:
            discovered(held)
            held = None
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}}}), flush=True)
"#,
    );
    let session = connect_ok(&slow, &with_timeout(1.0)).await;
    let negotiation = session.negotiation();
    assert_eq!(negotiation.lifecycle, Lifecycle::Discover);
    assert_eq!(
        negotiation.why,
        "server/discover had no answer within 1s: taken as a server that predates 2026-07-28, \
         but initialize was refused with JSON-RPC error -32022 \"Unsupported protocol \
         version\" listing 2026-07-28: asked again; server/discover lists 2026-07-28"
    );
    within("close", session.close()).await;
}

#[tokio::test]
async fn an_unsupported_revision_error_selects_a_listed_one_or_fails_clearly() {
    // -32022 listing an `initialize` revision: that one is used.
    let listed = python(
        r#"import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "server/discover":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2025-03-26", "2025-06-18"], "requested": "2026-07-28"}}}), flush=True)
    elif m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {}, "serverInfo": {"name": "picky", "version": "0"}}}), flush=True)
"#,
    );
    let session = connect_ok(&listed, &with_timeout(10.0)).await;
    let negotiation = session.negotiation();
    assert_eq!(negotiation.version, "2025-06-18");
    assert_eq!(negotiation.server_versions, ["2025-03-26", "2025-06-18"]);
    assert_eq!(
        negotiation.why,
        "server/discover was refused with -32022 (unsupported protocol version); the server \
         lists 2025-03-26, 2025-06-18"
    );
    within("close", session.close()).await;
    // -32022 listing nothing this client speaks: a clear refusal.
    let future = answers_initialize_with(
        r#"{"jsonrpc": "2.0", "id": "ID", "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2027-01-01"]}}}"#,
    );
    let error = connect_err(&future, &with_timeout(10.0)).await;
    assert!(
        matches!(
            error.kind(),
            LiveErrorKind::ProtocolRefused { version: None, .. }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().ends_with(
            "speaks none of the MCP revisions mcp-hints speaks (2026-07-28, 2025-11-25, \
             2025-06-18, 2025-03-26, 2024-11-05): it answered `server/discover` with JSON-RPC \
             error -32022 \"Unsupported protocol version\"; it supports 2027-01-01"
        ),
        "{error}"
    );
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
            "cannot connect to MCP server at {url} for `server/discover`: "
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

/// One request as the responder received it.
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

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("{error}: {self:?}"))
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

/// Reads one request (head and Content-Length body) from `stream`.
async fn read_request(stream: &mut TcpStream) -> Option<Received> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
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
        let n = stream.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buffer[..n]);
    }
    let body = String::from_utf8(data[head_end + 4..].to_vec()).unwrap();
    Some(Received {
        line,
        headers,
        body,
    })
}

/// Serve `responses` in order, one per connection, on 127.0.0.1; returns the
/// URL and, once all are served, what was received: those requests, and any
/// that came within 300 ms after (unanswered), so a test sees a request
/// that should not have been sent.
async fn canned_http(responses: Vec<String>) -> (String, tokio::task::JoinHandle<Vec<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut received = Vec::new();
        for response in responses {
            let (mut stream, _) = listener.accept().await.unwrap();
            let request = read_request(&mut stream).await.expect("a whole request");
            received.push(request);
            stream.write_all(response.as_bytes()).await.unwrap();
            stream.shutdown().await.unwrap();
        }
        while let Ok(Ok((mut stream, _))) =
            tokio::time::timeout(Duration::from_millis(300), listener.accept()).await
        {
            if let Some(request) = read_request(&mut stream).await {
                received.push(request);
            }
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
        ..legacy(10.0)
    };
    let mut session = connect_ok(&LiveTarget::Url(url), &options).await;
    assert_eq!(session.opening_result()["serverInfo"]["name"], "canned");
    let page = tree(
        within("tools/list", session.list_tools_page(None))
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    );
    assert_eq!(page, json!({"tools": [{"name": "t", "annotations": null}]}));
    assert_eq!(within("close", session.close()).await, None);

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
        assert_eq!(request.header("mcp-method"), None, "2026-07-28 only");
    }
    assert_eq!(init.json()["method"], "initialize");
    assert_eq!(init.header("mcp-session-id"), None);
    assert_eq!(init.header("mcp-protocol-version"), None);
    assert_eq!(
        pong.json(),
        json!({"jsonrpc": "2.0", "id": 0, "result": {}})
    );
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
        list.json(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    );
    assert_eq!(delete.line, "DELETE /mcp HTTP/1.1");
}

#[tokio::test]
async fn a_2026_07_28_http_session_sends_its_headers_and_meta_and_keeps_no_session() {
    let discover = r#"{"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "supportedVersions": ["2026-07-28", "2025-11-25"], "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "stateless", "version": "2"}}}}"#;
    let page = |id: u64, cursor: &str| {
        format!(
            r#"{{"jsonrpc": "2.0", "id": {id}, "result": {{"resultType": "complete", "tools": [], {cursor} "ttlMs": 1000, "cacheScope": "public"}}}}"#
        )
    };
    let sse_page = format!(
        ": keep-alive\n\ndata: {{\"jsonrpc\": \"2.0\", \"id\": \"s\", \"method\": \"roots/list\"}}\n\ndata: {}\n\n",
        page(3, "")
    );
    let responses = vec![
        // A session id a 2026-07-28 client must not send back.
        response(
            "200 OK",
            &[
                ("Content-Type", "application/json"),
                ("Mcp-Session-Id", "legacy-id"),
            ],
            discover,
        ),
        response(
            "200 OK",
            &[("Content-Type", "application/json")],
            &page(2, r#""nextCursor": "two","#),
        ),
        // A request from the server, which a 2026-07-28 client answers not.
        response(
            "200 OK",
            &[("Content-Type", "text/event-stream")],
            &sse_page,
        ),
    ];
    let (url, served) = canned_http(responses).await;
    let options = LiveOptions {
        capabilities: json!({"roots": {}}),
        ..with_timeout(10.0)
    };
    let mut session = connect_ok(&LiveTarget::Url(url), &options).await;
    assert_eq!(session.negotiation().lifecycle, Lifecycle::Discover);
    assert_eq!(session.server_info().unwrap()["name"], "stateless");
    let first = tree(
        within("page 1", session.list_tools_page(None))
            .await
            .unwrap(),
    );
    assert_eq!(first["nextCursor"], "two");
    let second = tree(
        within("page 2", session.list_tools_page(Some("two")))
            .await
            .unwrap_or_else(|error| panic!("{error}")),
    );
    assert_eq!(second["ttlMs"], 1000);
    assert_eq!(within("close", session.close()).await, None);

    let received = within("responder", served).await.unwrap();
    // No reply to the server's request, and no DELETE.
    let [probe, list_1, list_2] = &received[..] else {
        panic!("{received:#?}")
    };
    for (request, method) in [
        (probe, "server/discover"),
        (list_1, "tools/list"),
        (list_2, "tools/list"),
    ] {
        assert_eq!(request.header("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(request.header("mcp-method"), Some(method));
        assert_eq!(request.header("mcp-session-id"), None, "{request:?}");
        assert_eq!(request.header("mcp-name"), None);
        let meta = &request.json()["params"]["_meta"];
        assert_eq!(
            meta,
            &json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
                "io.modelcontextprotocol/clientInfo": {"name": "mcp-hints", "version": env!("CARGO_PKG_VERSION")},
            })
        );
    }
    assert_eq!(list_2.json()["params"]["cursor"], "two");
}

#[tokio::test]
async fn http_probe_answers_decide_the_fallback() {
    let init = response(
        "200 OK",
        &[("Content-Type", "application/json")],
        &format!(r#"{{"jsonrpc": "2.0", "id": 2, "result": {INIT_RESULT}}}"#),
    );
    // A 4xx without an MCP error, as servers that predate 2026-07-28
    // answer a request outside their session: `initialize`.
    let (url, served) = canned_http(vec![
        response(
            "400 Bad Request",
            &[("Content-Type", "text/plain")],
            "Bad Request: No valid session ID provided",
        ),
        init.clone(),
        response("202 Accepted", &[], ""),
    ])
    .await;
    let session = connect_ok(&LiveTarget::Url(url), &with_timeout(10.0)).await;
    assert_eq!(
        session.negotiation().why,
        "server/discover was refused with HTTP 400 and no MCP error: the server predates \
         2026-07-28"
    );
    drop(session);
    let received = within("responder", served).await.unwrap();
    assert_eq!(received[1].json()["method"], "initialize");
    assert_eq!(received[1].header("mcp-protocol-version"), None);
    assert_eq!(received[1].header("mcp-method"), None);
    // A JSON-RPC error in a 400's body: -32022 listing 2025-11-25, so that.
    let (url, served) = canned_http(vec![
        response(
            "400 Bad Request",
            &[("Content-Type", "application/json")],
            r#"{"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2025-11-25"], "requested": "2026-07-28"}}}"#,
        ),
        init.clone(),
        response("202 Accepted", &[], ""),
    ])
    .await;
    let session = connect_ok(&LiveTarget::Url(url), &with_timeout(10.0)).await;
    assert_eq!(session.negotiation().version, "2025-11-25");
    assert_eq!(session.negotiation().server_versions, ["2025-11-25"]);
    drop(session);
    within("responder", served).await.unwrap();
    // A header mismatch (-32020) is a modern server's complaint, and 401 is
    // about credentials: neither is a reason to fall back.
    for (canned, expected) in [
        (
            response(
                "400 Bad Request",
                &[("Content-Type", "application/json")],
                r#"{"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "Header mismatch"}}"#,
            ),
            "answered `server/discover` with JSON-RPC error -32020 (HTTP 400): Header mismatch",
        ),
        (
            response(
                "401 Unauthorized",
                &[("Content-Type", "application/json")],
                r#"{"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "no token"}}"#,
            ),
            "answered `server/discover` with HTTP 401 (the server wants credentials",
        ),
    ] {
        let (url, served) = canned_http(vec![canned]).await;
        let error = connect_err(&LiveTarget::Url(url), &with_timeout(10.0)).await;
        assert!(error.to_string().contains(expected), "{error}");
        let received = within("responder", served).await.unwrap();
        assert_eq!(received.len(), 1, "no second request: {received:#?}");
    }
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
        (
            response(
                "500 Internal Server Error",
                &[("Content-Type", "text/plain")],
                "boom\u{1b}[31m\u{202e}",
            ),
            "answered `initialize` with HTTP 500: \"boom\\u{1b}[31m\\u{202e}\"",
        ),
    ];
    for (canned, expected) in cases {
        let (url, served) = canned_http(vec![canned]).await;
        let error = connect_err(&LiveTarget::Url(url.clone()), &legacy(10.0)).await;
        let text = error.to_string();
        assert!(
            text.starts_with(&format!("MCP server at {url}")) || text.contains(&url),
            "{text}"
        );
        assert!(text.contains(expected), "{text}");
        within("responder", served).await.unwrap();
    }
}

/// How a hostile HTTP peer answers every request.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// `Content-Length` of 3 GB, then nothing.
    HugeLength,
    /// A chunked body that never ends.
    EndlessBody,
    /// An event stream whose first event's data never ends.
    EndlessEvent,
    /// A body of 1 MB sent one byte every 100 ms.
    Drip,
}

/// A peer on 127.0.0.1 that answers each connection as `how` says until the
/// client hangs up; returns the URL.
async fn hostile_http(how: Hostile) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if read_request(&mut stream).await.is_none() {
                    return;
                }
                let _ = misbehave(&mut stream, how).await;
            });
        }
    });
    url
}

async fn misbehave(stream: &mut TcpStream, how: Hostile) -> std::io::Result<()> {
    let chunk = vec![b'a'; 1 << 16];
    let deadline = Instant::now() + Duration::from_secs(30);
    match how {
        Hostile::HugeLength => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 3000000000\r\n\r\n{",
                )
                .await?;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        Hostile::EndlessBody => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                )
                .await?;
            while Instant::now() < deadline {
                stream
                    .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .await?;
                stream.write_all(&chunk).await?;
                stream.write_all(b"\r\n").await?;
            }
        }
        Hostile::EndlessEvent => {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ")
                .await?;
            while Instant::now() < deadline {
                stream.write_all(&chunk).await?;
            }
        }
        Hostile::Drip => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n",
                )
                .await?;
            while Instant::now() < deadline {
                stream.write_all(b" ").await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(())
}

#[tokio::test]
async fn hostile_http_bodies_are_bounded_in_bytes_and_time() {
    // A timeout far off, so that only the bound can stop these.
    let bound = LiveOptions {
        max_response_bytes: 1 << 20,
        ..with_timeout(20.0)
    };
    for (how, location) in [
        (Hostile::HugeLength, "an HTTP response body"),
        (Hostile::EndlessBody, "an HTTP response body"),
        (Hostile::EndlessEvent, "SSE event 1"),
    ] {
        let url = hostile_http(how).await;
        let started = Instant::now();
        let error = connect_err(&LiveTarget::Url(url), &bound).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{how:?}: {:?}",
            started.elapsed()
        );
        assert!(
            matches!(error.kind(), LiveErrorKind::ResponseTooLarge { location: at, limit, .. }
                if at == location && *limit == 1 << 20),
            "{how:?}: {error:?}"
        );
        assert!(
            error.to_string().contains(&format!(
                "sent {location} of more than 1048576 bytes (1 MiB), the --max-response-bytes \
                 bound, while answering `server/discover`: raise it if the server is right to \
                 send that much"
            )),
            "{error}"
        );
    }
    // A drip within the bound: the timeout covers the whole exchange, body
    // included.
    let url = hostile_http(Hostile::Drip).await;
    let started = Instant::now();
    let timeout = LiveOptions {
        max_response_bytes: 1 << 20,
        ..with_timeout(2.0)
    };
    let error = connect_err(&LiveTarget::Url(url), &timeout).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(2) && elapsed < Duration::from_secs(6),
        "{elapsed:?}"
    );
    assert!(
        matches!(error.kind(), LiveErrorKind::Timeout { request, .. } if request == "server/discover"),
        "{error:?}"
    );
}

#[tokio::test]
async fn notes_over_streamable_http_speaks_every_revision() {
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
    for (asked, version) in [
        (None, "2026-07-28"),
        (Some(ProtocolVersion::V2026_07_28), "2026-07-28"),
        (Some(ProtocolVersion::V2025_11_25), "2025-11-25"),
        (Some(ProtocolVersion::V2025_06_18), "2025-06-18"),
    ] {
        let options = LiveOptions {
            protocol_version: asked,
            ..LiveOptions::default()
        };
        let mut session = connect_ok(&target, &options).await;
        assert_eq!(session.protocol_version(), version, "{asked:?}");
        assert_eq!(session.server_info().unwrap()["name"], "notes");
        let page = tree(
            within("tools/list", session.list_tools_page(None))
                .await
                .unwrap_or_else(|error| panic!("{error}")),
        );
        assert_notes_tools(&page);
        within("close", session.close()).await;
    }
    server.kill().await.unwrap();
}

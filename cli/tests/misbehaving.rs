//! Live servers that misbehave the way servers were reported to: served by
//! tests/fixtures/replay_server.py, which replays saved tools/list pages over
//! stdio and answers every page past the last with the last page again.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn path(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(file)
        .display()
        .to_string()
}

fn audit_live(pages: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args([
            "audit",
            "--json",
            "--trusted",
            "--timeout",
            "20",
            "--",
            "python3",
        ])
        .arg(path("fixtures/replay_server.py"))
        .arg(path(pages))
        .env("NO_COLOR", "1")
        .output()
        .expect("mcp-hints runs")
}

#[test]
fn an_empty_cursor_is_followed_and_its_repeat_stops_the_audit() {
    let output = audit_live("corpus/cases/cursor-empty-string-last-page.json");
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains(
            "page 2 returned the cursor \"\" that page 1 already returned: following it would \
             loop, so the list is refused"
        ),
        "{message}"
    );
}

#[test]
fn every_page_of_a_live_server_is_read() {
    let output = audit_live("corpus/cases/two-pages-first-only-clients.json");
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["pages"], 2);
    assert_eq!(report["tools"][1]["name"], "p2_delete");
    assert_eq!(report["tools"][1]["decision"], "read_back_first");
    assert_eq!(report["server"]["serverInfo"]["name"], "replay");
    assert_eq!(report["clientCapabilities"], serde_json::json!({}));
}

#[test]
fn a_live_duplicate_name_is_refused() {
    let output = audit_live("corpus/cases/duplicate-name-across-pages.json");
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("tool `create_branch` appears on page 1 and again on page 2"));
}

#[test]
fn a_server_that_cannot_start_is_exit_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["lint", "--", "/nonexistent/mcp-server"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).starts_with("error: "));
}

#[test]
fn declared_capabilities_are_sent_and_reported() {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args([
            "audit",
            "--capabilities",
            r#"{"roots": {}}"#,
            "--",
            "python3",
        ])
        .arg(path("fixtures/replay_server.py"))
        .arg(path("corpus/servers/mcp-server-time.json"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("client capabilities declared: {\"roots\":{}}"),
        "{text}"
    );
    // The pages exist: exit 2 comes from the capabilities alone.
    let pages = path("corpus/servers/mcp-server-time.json");
    for (capabilities, complaint) in [
        (
            "[1]",
            "client capabilities must be a JSON object, e.g. '{\"roots\": {}}'",
        ),
        (
            "{roots",
            "not JSON: key must be a string at line 1 column 2",
        ),
    ] {
        let bad = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(["audit", "--capabilities", capabilities, &pages])
            .output()
            .unwrap();
        assert_eq!(bad.status.code(), Some(2));
        assert!(bad.stdout.is_empty());
        let message = String::from_utf8_lossy(&bad.stderr);
        assert!(
            message.starts_with(&format!(
                "error: invalid value '{capabilities}' for '--capabilities <JSON>': {complaint}"
            )),
            "{message}"
        );
    }
}

#[test]
fn the_server_receives_the_capabilities_declared() {
    let run = |capabilities: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-hints"));
        command.args(["audit", "--json", "--trusted"]);
        if let Some(capabilities) = capabilities {
            command.args(["--capabilities", capabilities]);
        }
        let output = command
            .args(["--timeout", "20", "--", "python3"])
            .arg(path("fixtures/echo_capabilities.py"))
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        let tools: Vec<String> = report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        (report, tools)
    };
    let declared = serde_json::json!({ "roots": { "listChanged": true }, "sampling": {} });
    let (report, tools) = run(Some(&declared.to_string()));
    assert_eq!(
        report["server"]["serverInfo"]["declaredCapabilities"],
        declared
    );
    assert_eq!(report["clientCapabilities"], declared);
    assert_eq!(tools, ["for_roots", "for_sampling"]);
    // Nothing given: `{}` is declared, and this server lists nothing.
    let (report, tools) = run(None);
    assert_eq!(
        report["server"]["serverInfo"]["declaredCapabilities"],
        serde_json::json!({})
    );
    assert!(tools.is_empty());
}

/// `mcp-hints audit --timeout 2 -- sh -c SCRIPT`: exit status and stderr.
fn audit_sh(script: &str) -> (Option<i32>, String, std::time::Duration) {
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--timeout", "2", "--", "sh", "-c", script])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn a_server_that_hangs_dies_or_prints_garbage_is_exit_2_with_the_reason() {
    let (code, message, elapsed) = audit_sh("sleep 30");
    assert_eq!(code, Some(2));
    assert!(
        message.contains("did not answer `initialize` within 2s"),
        "{message}"
    );
    assert!(elapsed.as_secs() < 20, "the hung server is not waited for");

    let (code, message, _) = audit_sh("echo 'fatal: no API key' >&2; exit 3");
    assert_eq!(code, Some(2));
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("fatal: no API key"), "{message}");

    let (code, message, _) = audit_sh("echo 'Server started on stdio'; sleep 30");
    assert_eq!(code, Some(2));
    assert!(
        message.contains("stdout line 1 that is not JSON")
            && message.contains("Server started on stdio"),
        "{message}"
    );
}

/// Whether process `pid` still runs (a zombie awaiting its reaper does not).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z')
        })
        .unwrap_or(false)
}

#[cfg(unix)]
#[test]
fn a_signal_stops_the_audit_and_its_server() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("signal");
    std::fs::create_dir_all(&dir).unwrap();
    let pid_file = dir.join("server.pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!("echo $$ > '{}'; exec sleep 600", pid_file.display());
    let mut audit = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--", "sh", "-c", &script])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let server = loop {
        if let Ok(pid) = std::fs::read_to_string(&pid_file)
            && !pid.trim().is_empty()
        {
            break pid.trim().to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(running(&server));
    let killed = Command::new("kill")
        .args(["-TERM", &audit.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = audit.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 15));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while running(&server) {
        assert!(
            std::time::Instant::now() < deadline,
            "server {server} outlived the audit"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut message = String::new();
    std::io::Read::read_to_string(&mut audit.stderr.take().unwrap(), &mut message).unwrap();
    assert_eq!(
        message,
        "error: stopped by SIGTERM (any server it started is stopped with it)\n"
    );
}

#[test]
fn a_tool_name_cannot_forge_a_line_of_the_report() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("forge");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.json");
    // A newline and a colour, then a right-to-left override that would show
    // the rest of the line reversed.
    let forged = "evil\nsafe_tool  resend  true\u{1b}[31m\u{202e}eurt";
    let long = "n".repeat(100_000);
    std::fs::write(
        &page,
        serde_json::json!({ "tools": [{ "name": forged }, { "name": long }] }).to_string(),
    )
    .unwrap();
    for command in ["audit", "lint"] {
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(
                [command, "--trusted"]
                    .into_iter()
                    .filter(|arg| command == "audit" || *arg != "--trusted"),
            )
            .arg(&page)
            .output()
            .unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        assert!(!text.contains('\u{1b}'), "{command}: {text}");
        assert!(!text.contains('\u{202e}'), "{command}: {text}");
        assert!(
            !text.lines().any(|line| line.starts_with("safe_tool")),
            "{command}: {text}"
        );
        assert!(
            text.contains("evil\\nsafe_tool  resend  true\\u{1b}[31m\\u{202e}eurt"),
            "{command}: {text}"
        );
        assert!(text.contains("… (100000 characters)"), "{command}");
        assert!(text.len() < 20_000, "{command}: {} bytes", text.len());
    }
    // The JSON report keeps the names exactly as served.
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--json"])
        .arg(&page)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["tools"][0]["name"], forged);
}

#[test]
fn a_redirect_is_reported_not_followed() {
    // A real HTTP server (Python's standard library) that redirects every
    // POST elsewhere.
    let script = r#"
import http.server, sys
class Redirect(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.send_response(307)
        self.send_header("Location", "http://127.0.0.1:9/elsewhere")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;
    let mut server = Command::new("python3")
        .args(["-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{}/mcp", port.trim());
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args([
            "audit",
            "--timeout",
            "5",
            "--header",
            "X-Api-Key: secret",
            "--url",
            &url,
        ])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains("HTTP 307")
            && message.contains("redirected to http://127.0.0.1:9/elsewhere"),
        "{message}"
    );
}

#[test]
fn a_server_that_dies_mid_page_reports_its_exit_status() {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--timeout", "10", "--", "python3"])
        .arg(path("fixtures/dies_mid_page.py"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains("exited (exit status: 139) before answering `tools/list`")
            && message.contains("segfault in tool table"),
        "{message}"
    );
}

#[test]
fn a_hint_given_twice_is_refused_not_guessed() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("twice");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.json");
    std::fs::write(
        &page,
        r#"{"tools": [{"name": "wipe", "annotations": {"readOnlyHint": true, "readOnlyHint": false}}]}"#,
    )
    .unwrap();
    for command in ["audit", "lint", "pin"] {
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .arg(command)
            .arg(&page)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{command}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(
                "page 1, tool 1: `annotations.readOnlyHint` appears twice: which value holds is unknown"
            ),
            "{command}"
        );
    }
}

/// Writes `script` for tests/fixtures/raw_server.py (see there) as
/// `name.json` in a scratch directory, and returns its path.
fn raw_script(name: &str, script: Value) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("raw");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, script.to_string()).unwrap();
    file.display().to_string()
}

/// `mcp-hints ARGS -- python3 raw_server.py SCRIPT`, without colour.
fn against_raw(args: &[&str], script: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(args)
        .args(["--timeout", "20", "--", "python3"])
        .arg(path("fixtures/raw_server.py"))
        .arg(script)
        .env("NO_COLOR", "1")
        .output()
        .expect("mcp-hints runs")
}

/// A `tools/list` response line whose result is `result`, raw JSON text.
fn response(result: &str) -> String {
    format!(r#"{{"jsonrpc": "2.0", "id": $ID, "result": {result}}}"#)
}

/// Each command, as it is run on a page: audit (text and JSON), lint, pin.
const COMMANDS: [&[&str]; 4] = [&["audit"], &["audit", "--json"], &["lint"], &["pin"]];

/// Asserts exit 2 with `message` after `error: ` on stderr.
fn refused(output: &Output, message: &str, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{what}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.trim_end().ends_with(message),
        "{what}: {stderr}"
    );
}

#[test]
fn a_page_member_given_twice_is_refused_live_and_from_files() {
    // A server whose last value of `nextCursor` says the list is complete,
    // whose first says more follows.
    let cases = [
        (
            "cursor-twice",
            response(r#"{"tools": [{"name": "a"}], "nextCursor": "2", "nextCursor": null}"#),
            "page 1: `result.nextCursor` appears twice: which value holds is unknown",
        ),
        (
            "result-twice",
            r#"{"jsonrpc": "2.0", "id": $ID, "result": {"tools": [{"name": "a"}], "nextCursor": "2"}, "result": {"tools": []}}"#
                .to_owned(),
            "page 1: `result` appears twice: which value holds is unknown",
        ),
        (
            "tools-twice",
            response(r#"{"tools": [{"name": "wipe"}], "tools": [{"name": "read"}]}"#),
            "page 1: `result.tools` appears twice: which value holds is unknown",
        ),
    ];
    for (name, line, message) in &cases {
        let script = raw_script(name, serde_json::json!({ "tools/list": [line] }));
        for command in COMMANDS {
            let output = against_raw(command, &script);
            refused(&output, message, &format!("{name}: {command:?}"));
        }
    }
    // The same pages, saved.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("twice-pages");
    std::fs::create_dir_all(&dir).unwrap();
    let files = [
        (
            "cursor.json",
            r#"{"tools": [{"name": "a"}], "nextCursor": "2", "nextCursor": null}"#,
            "page 1: `nextCursor` appears twice: which value holds is unknown",
        ),
        (
            "pages.json",
            r#"{"pages": [{"tools": [], "nextCursor": "2"}], "pages": [{"tools": [{"name": "a"}]}]}"#,
            "page 1: `pages` appears twice: which value holds is unknown",
        ),
    ];
    for (file, text, message) in files {
        let page = dir.join(file);
        std::fs::write(&page, text).unwrap();
        for command in COMMANDS {
            let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
                .args(command)
                .arg(&page)
                .output()
                .unwrap();
            let message = format!("{}: {message}", page.display());
            refused(&output, &message, &format!("{file}: {command:?}"));
        }
    }
}

#[test]
fn a_later_page_that_fails_is_reported_for_its_failure() {
    // Page 1 promises more; asking for page 2 gets a JSON-RPC error, or the
    // server's end. The list is unfinished because of that, and that is what
    // the user is told, not only that the list is incomplete.
    let first = response(r#"{"tools": [{"name": "a"}], "nextCursor": "2"}"#);
    let error = r#"{"jsonrpc": "2.0", "id": $ID, "error": {"code": -32603, "message": "tool table locked"}}"#;
    let script = raw_script(
        "page-2-error",
        serde_json::json!({ "tools/list": [first, error] }),
    );
    for command in COMMANDS {
        let output = against_raw(command, &script);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(
            stderr.contains("JSON-RPC error -32603") && stderr.contains("tool table locked"),
            "{command:?}: {stderr}"
        );
        assert!(!stderr.contains("incomplete"), "{command:?}: {stderr}");
    }
}

#[test]
fn a_value_no_tree_holds_gets_one_answer_from_every_command() {
    // Audit used to skip the member and take the hints as defaulted, lint
    // and pin to refuse the page: now all refuse it alike.
    let cases = [
        (
            "big-number",
            r#"{"tools": [{"name": "a"}, {"name": "b", "annotations": {"readOnlyHint": true, "weight": 1e400}}]}"#,
            "page 1, tool 2: `annotations.weight` cannot be read: number out of range at line 1 \
             column 93",
        ),
        (
            "lone-surrogate",
            r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": true}, "title": "\udc00"}]}"#,
            "page 1, tool 1: `title` cannot be read: lone leading surrogate in hex escape at \
             line 1 column 80",
        ),
    ];
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("unreadable");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, page, message) in cases {
        let file = dir.join(format!("{name}.json"));
        std::fs::write(&file, page).unwrap();
        let script = raw_script(name, serde_json::json!({ "tools/list": [response(page)] }));
        for command in COMMANDS {
            let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
                .args(command)
                .arg(&file)
                .output()
                .unwrap();
            let saved = format!("{}: {message}", file.display());
            refused(&output, &saved, &format!("{name} saved: {command:?}"));
            // Live, the column counts from the response's start.
            let output = against_raw(command, &script);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let (head, _) = message.split_once(" at line 1").unwrap();
            assert_eq!(
                output.status.code(),
                Some(2),
                "{name}: {command:?}: {stderr}"
            );
            assert!(stderr.contains(head), "{name} live: {command:?}: {stderr}");
        }
    }
}

/// Server text that would forge an `error:` line, move the cursor, colour
/// the terminal and reverse what follows, JSON-escaped.
const FORGED_JSON: &str = r"x\nerror: forged\u001b[2J\u001b[31m\u202e\u2066";
/// The same, as the command prints it.
const FORGED_SHOWN: &str = r"x\nerror: forged\u{1b}[2J\u{1b}[31m\u{202e}\u{2066}";

/// No line of `text` is forged, and no control or bidirectional character
/// reached it.
fn clean(text: &str, what: &str) {
    assert!(
        !text.lines().any(|line| line.starts_with("error: forged")),
        "{what}: {text}"
    );
    for c in ['\u{1b}', '\u{202e}', '\u{2066}', '\r'] {
        assert!(!text.contains(c), "{what}: {c:?} in {text:?}");
    }
}

#[test]
fn server_text_cannot_forge_the_header() {
    let initialize = format!(
        r#"{{"jsonrpc": "2.0", "id": $ID, "result": {{"protocolVersion": "2025-06-18", "capabilities": {{}}, "serverInfo": {{"name": "raw{FORGED_JSON}", "version": "1\u202e"}}}}}}"#
    );
    let script = raw_script(
        "forged-header",
        serde_json::json!({
            "initialize": initialize,
            "tools/list": [response(r#"{"tools": []}"#)],
        }),
    );
    let output = against_raw(&["audit"], &script);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    clean(&text, "audit");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!(
            "server: raw{FORGED_SHOWN} 1\\u{{202e}} (MCP server `"
        )),
        "{text}"
    );
    assert!(
        lines[1].starts_with("protocol: 2025-06-18 via initialize ("),
        "{text}"
    );
    assert_eq!(lines[2], "client capabilities declared: {}");
}

#[test]
fn colliding_names_cannot_forge_a_finding() {
    let page = format!(
        r#"{{"tools": [{{"name": "a.b{FORGED_JSON}", "title": "A"}}, {{"name": "a_bx_error__forged__2J__31m__", "title": "B"}}]}}"#
    );
    let script = raw_script(
        "forged-collision",
        serde_json::json!({ "tools/list": [response(&page)] }),
    );
    let args = [
        "lint",
        "--allow",
        "undeclared_hints",
        "--allow",
        "invalid_tool_name",
    ];
    let output = against_raw(&args, &script);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    clean(&text, "lint");
    let replaced = r"`.`, `\n`, `:`, ` `, `\u{1b}`, `[`, `\u{202e}` and `\u{2066}`";
    assert_eq!(
        text,
        format!(
            "warning[colliding_tool_names]: tool names `a.b{FORGED_SHOWN}` and \
             `a_bx_error__forged__2J__31m__` collide as `a_bx_error__forged__2J__31m__` once \
             {replaced} is replaced by `_`\n  \
             --> tool `a.b{FORGED_SHOWN}` (page 1)\n   \
             = note: {replaced} is not allowed in function names by clients that require \
             ^[a-zA-Z0-9_-]{{1,64}}$; they replace it, and then call one tool for the other\n   \
             = help: rename the tools so that they differ in letters, digits, `_` or `-`\n\n\
             warning: 1 finding in 1 of 2 tools\n"
        )
    );
    let output = against_raw(&["lint", "--json"], &script);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let collision = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|finding| finding["rule"] == "colliding_tool_names")
        .unwrap();
    assert!(
        collision["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("tool names `a.b{FORGED_SHOWN}` and ")),
        "{collision}"
    );
}

#[test]
fn server_text_cannot_forge_an_error_line() {
    let cases = [
        (
            "forged-rpc-error",
            serde_json::json!({ "tools/list": [format!(
                r#"{{"jsonrpc": "2.0", "id": $ID, "error": {{"code": -32000, "message": "boom{FORGED_JSON}"}}}}"#
            )] }),
            format!("answered `tools/list` with JSON-RPC error -32000: boom{FORGED_SHOWN}"),
        ),
        (
            "forged-duplicate-name",
            serde_json::json!({ "tools/list": [response(&format!(
                r#"{{"tools": [{{"name": "{FORGED_JSON}"}}, {{"name": "{FORGED_JSON}"}}]}}"#
            ))] }),
            format!(
                "tool `{FORGED_SHOWN}` appears twice on page 1: which definition holds is unknown"
            ),
        ),
        (
            "forged-hint",
            serde_json::json!({ "tools/list": [response(&format!(
                r#"{{"tools": [{{"name": "{FORGED_JSON}", "annotations": {{"readOnlyHint": "yes"}}}}]}}"#
            ))] }),
            format!(
                "page 1, tool `{FORGED_SHOWN}`: `annotations.readOnlyHint` is a string, not a \
                 boolean"
            ),
        ),
        (
            "forged-stderr",
            serde_json::json!({
                "tools/list": [response("5")],
                "stderr": "starting\rerror: forged\u{1b}[2J\u{202e}\n",
            }),
            r"  | starting\rerror: forged\u{1b}[2J\u{202e}".to_owned(),
        ),
    ];
    for (name, script, shown) in cases {
        let script = raw_script(name, script);
        for command in COMMANDS {
            let output = against_raw(command, &script);
            assert_eq!(output.status.code(), Some(2), "{name}: {command:?}");
            let stderr = String::from_utf8(output.stderr).unwrap();
            clean(&stderr, name);
            assert_eq!(
                stderr
                    .lines()
                    .filter(|line| line.starts_with("error"))
                    .count(),
                1,
                "{name}: {stderr}"
            );
            assert!(stderr.contains(&shown), "{name}: {command:?}: {stderr}");
        }
    }
}

#[test]
fn an_invisible_character_in_a_tool_name_is_shown_escaped() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("invisible");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.json");
    // A tag character: invisible, so `get_user` and this name print alike.
    std::fs::write(&page, "{\"tools\": [{\"name\": \"get_user\u{e0041}\"}]}").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--trusted"])
        .arg(&page)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(!text.contains('\u{e0041}'), "{text}");
    assert!(text.contains("get_user\\u{e0041}"), "{text}");
}

#[test]
fn a_tool_member_given_twice_is_refused_live_and_from_files() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tool-twice");
    std::fs::create_dir_all(&dir).unwrap();
    for (member, first, second) in [
        (
            "description",
            r#""Reads the row.""#,
            r#""Deletes the row.""#,
        ),
        (
            "inputSchema",
            r#"{"type": "object"}"#,
            r#"{"type": "object", "required": ["id"]}"#,
        ),
        ("outputSchema", r#"{"type": "object"}"#, "null"),
        ("title", r#""Read""#, r#""Delete""#),
        ("name", r#""read""#, r#""delete""#),
    ] {
        let page = format!(
            r#"{{"tools": [{{"name": "a"}}, {{"name": "b", "{member}": {first}, "annotations": {{"readOnlyHint": true}}, "{member}": {second}}}]}}"#
        );
        let message =
            format!("page 1, tool 2: `{member}` appears twice: which value holds is unknown");
        let file = dir.join(format!("{member}.json"));
        std::fs::write(&file, &page).unwrap();
        let script = raw_script(
            &format!("tool-{member}-twice"),
            serde_json::json!({ "tools/list": [response(&page)] }),
        );
        for command in COMMANDS {
            let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
                .args(command)
                .arg(&file)
                .output()
                .unwrap();
            let saved = format!("{}: {message}", file.display());
            refused(&output, &saved, &format!("{member} saved: {command:?}"));
            let output = against_raw(command, &script);
            refused(&output, &message, &format!("{member} live: {command:?}"));
        }
    }
}

/// A JSON-RPC error response line to request `$ID`.
fn rpc_error(code: i64, message: &str, data: Value) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": "$ID",
        "error": { "code": code, "message": message, "data": data },
    })
    .to_string()
    .replace("\"$ID\"", "$ID")
}

/// An `initialize` result line naming `version`, raw JSON text.
fn initialized(version: &str) -> String {
    format!(
        r#"{{"jsonrpc": "2.0", "id": $ID, "result": {{"protocolVersion": "{version}", "capabilities": {{"tools": {{}}}}, "serverInfo": {{"name": "raw", "version": "1"}}}}}}"#
    )
}

/// `audit --json` against `script`: the report's `protocol`.
fn protocol_of(script: &str) -> Value {
    let output = against_raw(&["audit", "--json", "--trusted"], script);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    report["protocol"].clone()
}

#[test]
fn a_refused_initialize_is_asked_again_at_a_listed_revision() {
    let refusal = rpc_error(
        -32602,
        "Unsupported protocol version",
        serde_json::json!({ "supported": ["2099-01-01", "2025-03-26", "2024-11-05"], "requested": "2025-11-25" }),
    );
    let tools = response(r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": true}}]}"#);
    let script = raw_script(
        "initialize-retry",
        serde_json::json!({
            "initialize": [refusal, initialized("2025-03-26")],
            "tools/list": [tools],
        }),
    );
    let protocol = protocol_of(&script);
    assert_eq!(protocol["version"], "2025-03-26", "{protocol}");
    assert_eq!(protocol["lifecycle"], "initialize");
    assert_eq!(
        protocol["serverVersions"],
        serde_json::json!(["2099-01-01", "2025-03-26", "2024-11-05"])
    );
    assert_eq!(
        protocol["why"],
        "server/discover was refused with JSON-RPC error -32601 \"method not found: \
         server/discover\": the server predates 2026-07-28; initialize at 2025-11-25 was refused \
         with JSON-RPC error -32602 \"Unsupported protocol version\", the server lists \
         2099-01-01, 2025-03-26, 2024-11-05: asked again at 2025-03-26"
    );
    // Once: a second refusal stands.
    let script = raw_script(
        "initialize-refused-twice",
        serde_json::json!({ "initialize": [refusal], "tools/list": [response(r#"{"tools": []}"#)] }),
    );
    let output = against_raw(&["audit"], &script);
    refused(
        &output,
        "answered `initialize` with JSON-RPC error -32602: Unsupported protocol version (data: \
         {\"requested\":\"2025-11-25\",\"supported\":[\"2099-01-01\",\"2025-03-26\",\"2024-11-05\"]})",
        "refused twice",
    );
    // Forced, not asked again.
    let output = against_raw(&["audit", "--protocol-version", "2025-11-25"], &script);
    refused(
        &output,
        "it supports 2099-01-01, 2025-03-26, 2024-11-05: pass --protocol-version 2025-03-26, or \
         leave --protocol-version out to negotiate",
        "forced",
    );
}

#[test]
fn an_initialize_answer_in_an_unknown_revision_is_refused() {
    let script = raw_script(
        "initialize-unknown",
        serde_json::json!({
            "initialize": initialized(r"2099-01-01\n\u202e"),
            "tools/list": [response(r#"{"tools": []}"#)],
        }),
    );
    for command in COMMANDS {
        let output = against_raw(command, &script);
        refused(
            &output,
            "answered `initialize` (MCP 2025-11-25 asked for) with protocol version \
             \"2099-01-01\\n\\u{202e}\", which mcp-hints does not speak: it speaks 2026-07-28, \
             2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05",
            &format!("{command:?}"),
        );
    }
}

#[test]
fn a_refusal_that_lists_the_refused_revision_is_not_told_otherwise() {
    let refusal = rpc_error(
        -32022,
        "Unsupported protocol version",
        serde_json::json!({ "supported": ["2026-07-28"] }),
    );
    let script = raw_script(
        "discover-self-refusing",
        serde_json::json!({ "server/discover": refusal, "tools/list": [response(r#"{"tools": []}"#)] }),
    );
    let output = against_raw(&["audit"], &script);
    refused(
        &output,
        "refuses MCP 2026-07-28 though it lists it as supported, and lists no other revision \
         mcp-hints speaks: it answered `server/discover` with JSON-RPC error -32022 \
         \"Unsupported protocol version\"; it supports 2026-07-28",
        "negotiated",
    );
    let output = against_raw(&["audit", "--protocol-version", "2026-07-28"], &script);
    refused(
        &output,
        "refuses MCP 2026-07-28, the revision --protocol-version asks for, though it lists it as \
         supported: it answered `server/discover` with JSON-RPC error -32022 \"Unsupported \
         protocol version\"; it supports 2026-07-28",
        "forced",
    );
}

#[test]
fn a_revision_list_of_other_than_strings_is_refused_for_what_it_is() {
    let cases = [
        (
            "discover-list-number",
            serde_json::json!({
                "server/discover": response(r#"{"supportedVersions": ["2026-07-28", 20250618], "capabilities": {}}"#),
            }),
            "sent an invalid response to `server/discover`: element 1 of \"supportedVersions\" \
             is a number, expected a string naming a revision",
        ),
        (
            "unsupported-list-null",
            serde_json::json!({
                "server/discover": rpc_error(-32022, "Unsupported protocol version", serde_json::json!({ "supported": [null] })),
            }),
            "sent an invalid response to `server/discover`: element 0 of \"data.supported\" in \
             its JSON-RPC error -32022 is null, expected a string naming a revision",
        ),
        (
            "initialize-list-object",
            serde_json::json!({
                "initialize": rpc_error(-32602, "Unsupported protocol version", serde_json::json!({ "supported": [{"version": "2025-06-18"}] })),
            }),
            "sent an invalid response to `initialize`: element 0 of \"data.supported\" in its \
             JSON-RPC error -32602 is an object, expected a string naming a revision",
        ),
    ];
    for (name, mut script, message) in cases {
        script["tools/list"] = serde_json::json!([response(r#"{"tools": []}"#)]);
        let script = raw_script(name, script);
        let output = against_raw(&["audit"], &script);
        refused(&output, message, name);
    }
}

#[test]
fn a_result_type_that_is_not_a_string_is_refused_live_and_from_files() {
    let page = r#"{"tools": [{"name": "a"}], "resultType": 1}"#;
    let message = "page 1: `resultType` is a number, not a string: whether the page is a \
                   complete result is unknown";
    let script = raw_script(
        "result-type-number",
        serde_json::json!({ "tools/list": [response(page)] }),
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("result-type");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("page.json");
    std::fs::write(&file, page).unwrap();
    for command in COMMANDS {
        let output = against_raw(command, &script);
        refused(&output, message, &format!("live: {command:?}"));
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(command)
            .arg(&file)
            .output()
            .unwrap();
        let saved = format!("{}: {message}", file.display());
        refused(&output, &saved, &format!("saved: {command:?}"));
    }
}

#[test]
fn a_late_answer_to_an_abandoned_probe_is_ignored() {
    // Both eras, but slow to answer `server/discover`: past the probe's
    // wait, the client falls back to `initialize`, and the answer that
    // comes then belongs to no request in flight.
    let discovered = response(
        r#"{"supportedVersions": ["2026-07-28", "2025-11-25"], "capabilities": {"tools": {}}, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "late", "version": "2"}}}"#,
    );
    let tools = response(r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": true}}]}"#);
    let script = raw_script(
        "late-discover",
        serde_json::json!({
            "server/discover": discovered,
            "tools/list": [tools],
            "delay": { "server/discover": ["next"] },
        }),
    );
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args([
            "audit",
            "--json",
            "--trusted",
            "--timeout",
            "2",
            "--",
            "python3",
        ])
        .arg(path("fixtures/raw_server.py"))
        .arg(&script)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["protocol"]["version"], "2025-11-25");
    assert_eq!(report["protocol"]["lifecycle"], "initialize");
    assert_eq!(
        report["protocol"]["why"],
        "server/discover had no answer within 2s: taken as a server that predates 2026-07-28"
    );
    assert_eq!(report["server"]["serverInfo"]["name"], "raw");
    assert_eq!(report["tools"][0]["name"], "a");
    // Settled on 2026-07-28 by the probe it had not answered yet: it
    // refuses `initialize`, and the late answer comes while that waits;
    // the probe asked again is the one answered.
    let refusal = rpc_error(
        -32022,
        "Unsupported protocol version",
        serde_json::json!({ "supported": ["2026-07-28"] }),
    );
    let script = raw_script(
        "late-discover-settled",
        serde_json::json!({
            "server/discover": [discovered.replace("\"late\"", "\"first\""), discovered],
            "initialize": refusal,
            "tools/list": [tools],
            "delay": { "server/discover": ["next"] },
        }),
    );
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args([
            "audit",
            "--json",
            "--trusted",
            "--timeout",
            "2",
            "--",
            "python3",
        ])
        .arg(path("fixtures/raw_server.py"))
        .arg(&script)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["protocol"]["version"], "2026-07-28");
    assert_eq!(report["protocol"]["lifecycle"], "discover");
    assert_eq!(
        report["protocol"]["why"],
        "server/discover had no answer within 2s: taken as a server that predates 2026-07-28, \
         but initialize was refused with JSON-RPC error -32022 \"Unsupported protocol version\" \
         listing 2026-07-28: asked again; server/discover lists 2026-07-28, 2025-11-25"
    );
    assert_eq!(report["server"]["serverInfo"]["name"], "late");
}

#[test]
fn an_error_for_no_request_in_particular_is_the_servers_error() {
    // JSON-RPC 2.0 answers what it could not parse with id null; some
    // servers leave the id out.
    for (name, line) in [
        (
            "error-id-null",
            r#"{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error\u001b[31m"}}"#,
        ),
        (
            "error-no-id",
            r#"{"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error\u001b[31m"}}"#,
        ),
    ] {
        let script = raw_script(name, serde_json::json!({ "tools/list": [line] }));
        for command in COMMANDS {
            let output = against_raw(command, &script);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(2),
                "{name}: {command:?}: {stderr}"
            );
            assert!(
                stderr.contains(
                    "answered `tools/list` with JSON-RPC error -32700: Parse error\\u{1b}[31m"
                ),
                "{name}: {command:?}: {stderr}"
            );
            assert!(!stderr.contains("JSON-RPC 2.0 message"), "{name}: {stderr}");
        }
    }
}

#[test]
fn an_empty_server_version_leaves_no_gap_in_the_header() {
    let initialize = r#"{"jsonrpc": "2.0", "id": $ID, "result": {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "raw", "version": ""}}}"#;
    let script = raw_script(
        "empty-version",
        serde_json::json!({ "initialize": initialize, "tools/list": [response(r#"{"tools": []}"#)] }),
    );
    let output = against_raw(&["audit"], &script);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    let header = text.lines().next().unwrap();
    assert!(header.starts_with("server: raw (MCP server `"), "{text}");
    assert!(!header.contains("  "), "{text}");
}

#[test]
fn a_null_error_beside_a_result_is_absent_live_and_from_files() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("null-error-pages");
    std::fs::create_dir_all(&dir).unwrap();
    let result = r#"{"tools": [{"name": "read", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "openWorldHint": false}}]}"#;
    let cases = [
        // JSON-RPC 1.0's shape: the member not used is null.
        (
            "null-error",
            format!(r#"{{"jsonrpc": "2.0", "id": $ID, "result": {result}, "error": null}}"#),
            None,
        ),
        (
            "result-and-error",
            format!(
                r#"{{"jsonrpc": "2.0", "id": $ID, "result": {result}, "error": {{"code": -32603, "message": "m"}}}}"#
            ),
            Some(("both \"result\" and \"error\"", "both `result` and `error`")),
        ),
    ];
    for (name, line, refusal) in &cases {
        let script = raw_script(name, serde_json::json!({ "tools/list": [line] }));
        let live = against_raw(&["audit", "--json"], &script);
        let page = dir.join(format!("{name}.json"));
        std::fs::write(&page, line.replace("$ID", "1")).unwrap();
        let saved = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(["audit", "--json"])
            .arg(&page)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let stderr = |output: &Output| String::from_utf8_lossy(&output.stderr).into_owned();
        match refusal {
            None => {
                let report = |output: &Output| -> Value {
                    serde_json::from_slice(&output.stdout)
                        .unwrap_or_else(|error| panic!("{name}: {error}: {}", stderr(output)))
                };
                // The audit's own status (1: untrusted), not 2.
                assert_eq!(live.status.code(), Some(1), "{name}: {}", stderr(&live));
                assert_eq!(saved.status.code(), Some(1), "{name}: {}", stderr(&saved));
                let (live, saved) = (report(&live), report(&saved));
                assert_eq!(live["tools"][0]["name"], "read", "{live}");
                assert_eq!(live["tools"], saved["tools"], "{name}");
            }
            Some((live_reason, saved_reason)) => {
                assert_eq!(live.status.code(), Some(2), "{name}: live");
                assert!(
                    stderr(&live).contains(live_reason),
                    "{name}: {}",
                    stderr(&live)
                );
                assert_eq!(saved.status.code(), Some(2), "{name}: saved");
                assert!(
                    stderr(&saved).contains(saved_reason),
                    "{name}: {}",
                    stderr(&saved)
                );
            }
        }
    }
}

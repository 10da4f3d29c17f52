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
    let bad = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--capabilities", "[1]", "x.json"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
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
    let forged = "evil\nsafe_tool  resend  true\u{1b}[31m";
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
        assert!(
            !text.lines().any(|line| line.starts_with("safe_tool")),
            "{command}: {text}"
        );
        assert!(
            text.contains("evil\\nsafe_tool  resend  true\\u{1b}[31m"),
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

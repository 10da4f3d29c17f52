//! The `mcp-hints` command against the example `notes` server, over stdio
//! and over streamable HTTP, paginated two tools to a page: every page is
//! followed, provenance comes from the server's `_meta`, and the example is
//! lint-clean.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use support::{KeptAlive, decisions, mcp_hints, notes_server};

/// (name, decision) in list order, the page count, and the report.
fn audit(args: &[&str]) -> (i32, Vec<(String, String)>, Value) {
    let output = mcp_hints(args);
    let report: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap(), decisions(&report), report)
}

fn expected() -> Vec<(String, String)> {
    [
        ("add_note", "resend"),
        ("append_note", "read_back_first"),
        ("delete_note", "resend"),
        ("forecast", "resend"),
        ("list_notes", "resend"),
        ("update_note", "resend"),
    ]
    .iter()
    .map(|(name, decision)| ((*name).to_owned(), (*decision).to_owned()))
    .collect()
}

#[test]
fn audit_over_stdio_follows_every_page() {
    let server = notes_server();
    let server = server.to_str().unwrap();
    let (code, decisions, report) = audit(&[
        "audit",
        "--json",
        "--trusted",
        "--",
        server,
        "--page-size",
        "2",
    ]);
    assert_eq!(code, 1, "append_note needs a read-back");
    assert_eq!(decisions, expected());
    assert_eq!(report["pages"], 3);
    assert_eq!(report["server"]["serverInfo"]["name"], "notes");
    for tool in report["tools"].as_array().unwrap() {
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert_eq!(
                tool["hints"][hint]["provenance"], "declared",
                "{} {hint}",
                tool["name"]
            );
        }
    }
    let add = &report["tools"][0];
    assert_eq!(
        add["reason"],
        "the tool is keyed by its argument `request_id`: a resend with the same key is \
         recognised by the server and not run again; resend the same arguments, key included"
    );
    let append = &report["tools"][1];
    assert_eq!(
        append["reason"],
        "destructiveHint is false (declared) but idempotentHint is false (declared): the write \
         only adds, so a resend duplicates it"
    );
}

#[test]
fn the_example_server_is_lint_clean_and_pins() {
    let server = notes_server();
    let server = server.to_str().unwrap();
    let output = mcp_hints(&["lint", "--deny", "--", server, "--page-size", "2"]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "no findings in 6 tools\n"
    );
    assert_eq!(output.status.code(), Some(0));
    // read_only emits destructiveHint false and idempotentHint true on
    // purpose; the pedantic rule says so when asked.
    let output = mcp_hints(&[
        "lint",
        "--json",
        "--warn",
        "meaningless_hints",
        "--",
        server,
    ]);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let tools: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| finding["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["forecast", "list_notes"]);

    let paged = mcp_hints(&["pin", "--", server, "--page-size", "2"]);
    let whole = mcp_hints(&["pin", "--", server]);
    assert_eq!(paged.status.code(), Some(0));
    assert_eq!(
        paged.stdout, whole.stdout,
        "page size does not change the lock"
    );
}

/// `notes --http 127.0.0.1:0`, killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(page_size: &str) -> HttpServer {
        let mut child = Command::new(notes_server())
            .args(["--http", "127.0.0.1:0", "--page-size", page_size])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("notes starts");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("notes prints its address")
                .expect("stderr is readable");
            if let Some(url) = line.strip_prefix("notes: serving MCP over streamable HTTP at ") {
                break url.to_owned();
            }
        };
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn audit_over_streamable_http_follows_every_page() {
    let server = HttpServer::start("2");
    let (code, decisions, report) = audit(&["audit", "--json", "--trusted", "--url", &server.url]);
    assert_eq!(code, 1);
    assert_eq!(decisions, expected());
    assert_eq!(report["pages"], 3);
    assert_eq!(report["target"]["kind"], "live");
    assert_eq!(report["server"]["serverInfo"]["name"], "notes");

    let (code, untrusted, _) = audit(&["audit", "--json", "--url", &server.url]);
    assert_eq!(code, 1);
    assert!(
        untrusted
            .iter()
            .all(|(_, decision)| decision == "read_back_first")
    );

    let text = mcp_hints(&["audit", "--trusted", "--url", &server.url]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("6 tools in 3 pages"), "{text}");
    assert!(
        text.ends_with("6 tools: 5 resend, 1 read back first\n"),
        "{text}"
    );
}

/// A keep-alive client's later requests are answered on a socket with
/// `TCP_NODELAY`: without it, the last chunk of each SSE answer waits for
/// the client's delayed ACK (40 ms on Linux).
#[cfg(target_os = "linux")]
#[test]
fn kept_alive_connections_are_served_with_tcp_nodelay() {
    let server = HttpServer::start("0");
    let address = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut connection = KeptAlive::connect(address);
    for id in 1..=3 {
        let (status, body) = connection.call_tool(id, "list_notes", &[]);
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains(&format!(r#""id":{id},"result":{{"#))
                && body.contains(r#""isError":false"#),
            "{body}"
        );
    }
    assert!(
        support::server_side_nodelay(server.child.id(), connection.stream()),
        "notes --http serves its connections without TCP_NODELAY"
    );
}

#[test]
fn an_unreachable_url_is_exit_2() {
    // Bind and drop a listener: the port is then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let output = mcp_hints(&["audit", "--timeout", "5", "--url", &url]);
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("cannot connect"), "{message}");
}

#[test]
fn a_url_password_and_query_never_reach_a_report() {
    let server = HttpServer::start("0");
    // The same server, reached with a password and a token in the query.
    let secret_url = server
        .url
        .replacen("http://", "http://reader:hunter2@", 1)
        .replacen("/mcp", "/mcp?token=s3cret&x=1", 1);
    let shown = format!(
        "MCP server at {}",
        server
            .url
            .replacen("http://", "http://reader:***@", 1)
            .replacen("/mcp", "/mcp?***", 1)
    );
    let json = mcp_hints(&["audit", "--json", "--url", &secret_url]);
    let text = mcp_hints(&["audit", "--url", &secret_url]);
    let lint = mcp_hints(&["lint", "--json", "--url", &secret_url]);
    for output in [&json, &text, &lint] {
        assert_eq!(
            output.status.code().map(|code| code < 2),
            Some(true),
            "{output:?}"
        );
        for bytes in [&output.stdout, &output.stderr] {
            let printed = String::from_utf8_lossy(bytes);
            assert!(
                !printed.contains("hunter2") && !printed.contains("s3cret"),
                "{printed}"
            );
        }
    }
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["target"]["description"], shown.as_str());
    let report: Value = serde_json::from_slice(&lint.stdout).unwrap();
    assert_eq!(report["target"]["description"], shown.as_str());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with(&format!("({shown})")),
        "{text}"
    );
    drop(server);

    // An error names the server without them too.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://reader:hunter2@127.0.0.1:{port}/mcp?token=s3cret");
    let output = mcp_hints(&["audit", "--json", "--timeout", "5", "--url", &url]);
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.starts_with(&format!(
            "error: cannot connect to MCP server at http://reader:***@127.0.0.1:{port}/mcp?*** \
             for `"
        )),
        "{message}"
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let error = report["error"].as_str().unwrap();
    assert!(
        !error.contains("hunter2") && !error.contains("s3cret"),
        "{error}"
    );
}

/// The example `list-tools`, built once per test binary.
fn list_tools() -> std::path::PathBuf {
    static PATH: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        escargot::CargoBuild::new()
            .manifest_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
            .package("mcp-hints-examples")
            .bin("list-tools")
            .run()
            .expect("build the list-tools example")
            .path()
            .to_owned()
    })
    .clone()
}

#[test]
fn list_tools_lists_the_notes_and_stops_a_silent_server_with_exit_2() {
    let output = Command::new(list_tools())
        .args(["--timeout", "20"])
        .arg(notes_server())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let table = String::from_utf8(output.stdout).unwrap();
    assert!(table.contains("add_note "), "{table}");

    // A server that never answers: `sh` writes its pid, then waits.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("list-tools");
    std::fs::create_dir_all(&dir).unwrap();
    let pid_file = dir.join("server.pid");
    let _ = std::fs::remove_file(&pid_file);
    let script = format!("echo $$ > '{}'; exec sleep 600", pid_file.display());
    let started = std::time::Instant::now();
    let output = Command::new(list_tools())
        .args(["--timeout", "2", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "list-tools: sh: no answer to initialize and tools/list within 2s (the server was \
         stopped)\n"
    );
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
            .map(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive(&pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the silent server {} outlived list-tools",
            pid.trim()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

//! `mcp-hints audit` under each MCP revision, against real peers: servers
//! written as small fixtures on the official TypeScript SDK v2
//! (`@modelcontextprotocol/server` 2.4.0, spec revision 2026-07-28) and
//! Python SDK (`mcp` 2.3.0), over stdio and streamable HTTP; the example
//! `notes` server (rmcp 3.11) under every revision; and the TypeScript SDK
//! v1 `server-everything` over streamable HTTP, which predates 2026-07-28.
//!
//! The peers are installed by tests/peers/mod.rs (shared with
//! tests/live_servers.rs, cached under the target directory).

mod peers;
mod support;

use std::path::Path;
use std::process::{Command, Output};

use peers::{HttpPeer, fixture, free_port, installed, npm_fixture};
use serde_json::{Value, json};
use support::{decisions, notes_server};

/// `mcp-hints ARGS` without colour.
fn mcp_hints(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("mcp-hints runs")
}

/// `mcp-hints audit --json --trusted ARGS`: exit status and report.
fn audit_json(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["audit", "--json", "--trusted", "--timeout", "60"];
    all.extend_from_slice(args);
    let output = mcp_hints(&all);
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{all:?}: {error}\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap(), report)
}

/// `mcp-hints audit --trusted ARGS`: exit status, stdout, stderr.
fn audit_text(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["audit", "--trusted", "--timeout", "60"];
    all.extend_from_slice(args);
    let output = mcp_hints(&all);
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn path(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The two fixture tools' verdicts, trusted: `lookup` reads, `append` only adds.
fn fixture_decisions() -> Vec<(String, String)> {
    [("lookup", "resend"), ("append", "read_back_first")]
        .iter()
        .map(|(name, decision)| ((*name).to_owned(), (*decision).to_owned()))
        .collect()
}

/// The report says `version` was used, by `lifecycle`, asked for or not.
fn assert_protocol(report: &Value, version: &str, lifecycle: &str, forced: bool) {
    let protocol = &report["protocol"];
    assert_eq!(protocol["version"], version, "{protocol:#}");
    assert_eq!(protocol["lifecycle"], lifecycle, "{protocol:#}");
    assert_eq!(protocol["forced"], forced, "{protocol:#}");
    assert_eq!(report["server"]["protocolVersion"], version);
    assert!(protocol["why"].is_string(), "{protocol:#}");
}

/// The `protocol:` line of a text report.
fn protocol_line(text: &str) -> &str {
    text.lines()
        .find(|line| line.starts_with("protocol: "))
        .unwrap_or_else(|| panic!("no protocol line: {text}"))
}

// ------------------------------------------------ TypeScript SDK v2

/// `node tsv2_server.mjs stdio ERAS`, as the audit's command after `--`.
fn tsv2_stdio(eras: &str) -> Vec<String> {
    vec![
        "--".to_owned(),
        "node".to_owned(),
        path(&npm_fixture("tsv2_server.mjs")).to_owned(),
        "stdio".to_owned(),
        eras.to_owned(),
    ]
}

fn tsv2_http(eras: &str) -> HttpPeer {
    HttpPeer::start_announced(
        Command::new("node")
            .arg(npm_fixture("tsv2_server.mjs"))
            .args(["http", eras]),
    )
}

/// What every 2026-07-28 audit of a fixture says.
fn assert_modern_fixture(report: &Value, name: &str, forced: bool) {
    assert_protocol(report, "2026-07-28", "discover", forced);
    assert_eq!(report["protocol"]["serverVersions"], json!(["2026-07-28"]));
    assert_eq!(report["server"]["serverInfo"]["name"], name);
    assert_eq!(decisions(report), fixture_decisions());
    assert_eq!(report["pages"], 1);
    let fields = &report["pageFields"];
    assert_eq!(fields.as_array().unwrap().len(), 1, "{fields}");
    assert_eq!(fields[0]["resultType"], "complete", "{fields}");
    assert!(fields[0]["ttlMs"].is_u64(), "{fields}");
    assert!(fields[0]["cacheScope"].is_string(), "{fields}");
}

#[test]
fn typescript_sdk_v2_server_that_refuses_initialize_is_audited_over_stdio() {
    let server = tsv2_stdio("modern-only");
    let args: Vec<&str> = server.iter().map(String::as_str).collect();
    // Negotiated: 2026-07-28, which is all it speaks.
    let (code, report) = audit_json(&args);
    assert_eq!(code, 1, "append needs a read-back: {report:#}");
    assert_modern_fixture(&report, "tsv2-modern-only", false);
    assert_eq!(
        report["protocol"]["why"],
        "the newest revision; server/discover lists 2026-07-28"
    );
    // Asked for.
    let mut forced = vec!["--protocol-version", "2026-07-28"];
    forced.extend_from_slice(&args);
    let (code, report) = audit_json(&forced);
    assert_eq!(code, 1);
    assert_modern_fixture(&report, "tsv2-modern-only", true);
    // An `initialize` revision asked for: refused, and the refusal quoted.
    for version in ["2025-11-25", "2025-06-18"] {
        let mut legacy = vec!["--protocol-version", version];
        legacy.extend_from_slice(&args);
        let (code, stdout, stderr) = audit_text(&legacy);
        assert_eq!(code, 2, "{stdout}{stderr}");
        assert!(
            stderr.contains(&format!(
                "refuses MCP {version}, the revision --protocol-version asks for: it answered \
                 `initialize` with JSON-RPC error -32022 \"Unsupported protocol version: \
                 {version}\"; it supports 2026-07-28: pass --protocol-version 2026-07-28, or \
                 leave --protocol-version out to negotiate"
            )),
            "{stderr}"
        );
    }
    // The header for people.
    let (code, text, stderr) = audit_text(&args);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        protocol_line(&text),
        "protocol: 2026-07-28 via server/discover (the newest revision; server/discover lists \
         2026-07-28)"
    );
}

#[test]
fn typescript_sdk_v2_server_of_both_eras_speaks_each_revision_over_stdio() {
    let server = tsv2_stdio("both-eras");
    let args: Vec<&str> = server.iter().map(String::as_str).collect();
    let (code, report) = audit_json(&args);
    assert_eq!(code, 1);
    assert_modern_fixture(&report, "tsv2-both-eras", false);
    for version in ["2025-11-25", "2025-06-18"] {
        let mut legacy = vec!["--protocol-version", version];
        legacy.extend_from_slice(&args);
        let (code, report) = audit_json(&legacy);
        assert_eq!(code, 1, "{report:#}");
        assert_protocol(&report, version, "initialize", true);
        assert_eq!(
            report["protocol"]["why"],
            "asked for with --protocol-version"
        );
        assert_eq!(decisions(&report), fixture_decisions());
        // No cache hints before 2026-07-28.
        assert_eq!(report["pageFields"], json!([{}]));
    }
}

#[test]
fn typescript_sdk_v2_servers_are_audited_over_streamable_http() {
    let modern = tsv2_http("modern-only");
    let (code, report) = audit_json(&["--url", &modern.url]);
    assert_eq!(code, 1, "{report:#}");
    assert_modern_fixture(&report, "tsv2-modern-only", false);
    let (code, _, stderr) = audit_text(&["--protocol-version", "2025-11-25", "--url", &modern.url]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "refuses MCP 2025-11-25, the revision --protocol-version asks for: it answered \
             `initialize` with JSON-RPC error -32022 (HTTP 400) \"Unsupported protocol version: \
             2025-11-25\"; it supports 2026-07-28"
        ),
        "{stderr}"
    );

    let both = tsv2_http("both-eras");
    let (code, report) = audit_json(&["--url", &both.url]);
    assert_eq!(code, 1, "{report:#}");
    assert_modern_fixture(&report, "tsv2-both-eras", false);
    let (code, report) = audit_json(&["--protocol-version", "2025-11-25", "--url", &both.url]);
    assert_eq!(code, 1, "{report:#}");
    assert_protocol(&report, "2025-11-25", "initialize", true);
    assert_eq!(decisions(&report), fixture_decisions());
}

// ------------------------------------------------ Python SDK

#[test]
fn python_sdk_server_is_audited_in_2026_07_28_mode_over_stdio_and_http() {
    let python = installed().python();
    let script = fixture("python_sdk_server.py");
    let stdio = ["--", path(&python), path(&script), "stdio"];
    let port = free_port();
    let http = HttpPeer::start(
        Command::new(&python)
            .arg(&script)
            .args(["http", &port.to_string()]),
        port,
    );
    for target in [&stdio[..], &["--url", &http.url]] {
        let (code, report) = audit_json(target);
        assert_eq!(code, 1, "{target:?}: {report:#}");
        assert_protocol(&report, "2026-07-28", "discover", false);
        assert_eq!(report["server"]["serverInfo"]["name"], "python-sdk-fixture");
        assert_eq!(decisions(&report), fixture_decisions());
        // The server's cache hints reach the report.
        let fields = &report["pageFields"][0];
        assert_eq!(fields["ttlMs"], 60000, "{target:?}: {fields}");
        assert_eq!(fields["cacheScope"], "public", "{target:?}: {fields}");
        assert_eq!(fields["resultType"], "complete", "{target:?}: {fields}");
        // And it still serves the `initialize` revisions when asked.
        let mut legacy = vec!["--protocol-version", "2025-06-18"];
        legacy.extend_from_slice(target);
        let (code, report) = audit_json(&legacy);
        assert_eq!(code, 1, "{target:?}: {report:#}");
        assert_protocol(&report, "2025-06-18", "initialize", true);
        assert_eq!(decisions(&report), fixture_decisions());
    }
}

// ------------------------------------------------ notes (rmcp 3.11)

#[test]
fn notes_is_audited_under_each_revision_and_the_default() {
    let notes = notes_server();
    let expected: Vec<(String, String)> = [
        ("add_note", "resend"),
        ("append_note", "read_back_first"),
        ("delete_note", "resend"),
        ("forecast", "resend"),
        ("list_notes", "resend"),
        ("update_note", "resend"),
    ]
    .iter()
    .map(|(name, decision)| ((*name).to_owned(), (*decision).to_owned()))
    .collect();
    for (asked, version, lifecycle) in [
        (None, "2026-07-28", "discover"),
        (Some("2026-07-28"), "2026-07-28", "discover"),
        (Some("2025-11-25"), "2025-11-25", "initialize"),
        (Some("2025-06-18"), "2025-06-18", "initialize"),
    ] {
        let mut args = Vec::new();
        if let Some(asked) = asked {
            args.extend(["--protocol-version", asked]);
        }
        args.extend(["--", path(&notes), "--page-size", "2"]);
        let (code, report) = audit_json(&args);
        assert_eq!(code, 1, "{asked:?}: {report:#}");
        assert_protocol(&report, version, lifecycle, asked.is_some());
        assert_eq!(decisions(&report), expected, "{asked:?}");
        assert_eq!(report["pages"], 3);
        let fields = report["pageFields"].as_array().unwrap();
        assert_eq!(fields.len(), 3, "{asked:?}");
        for (page, field) in fields.iter().enumerate() {
            assert_eq!(field["nextCursor"].is_string(), page < 2, "{field}");
            assert_eq!(
                field["ttlMs"].is_u64(),
                lifecycle == "discover",
                "{asked:?}: {field}"
            );
        }
        // The same tools, byte for byte, whatever the revision.
        let mut pin = vec!["pin"];
        pin.extend_from_slice(&args);
        let lock = mcp_hints(&pin);
        assert_eq!(lock.status.code(), Some(0), "{asked:?}");
        let mut default_pin = vec!["pin", "--"];
        default_pin.push(path(&notes));
        assert_eq!(
            lock.stdout,
            mcp_hints(&default_pin).stdout,
            "{asked:?}: the lock differs"
        );
    }
}

// ------------------------------------------------ server-everything (TypeScript SDK v1)

#[test]
fn server_everything_over_streamable_http_falls_back_to_initialize() {
    let dir = installed()
        .node_modules
        .join("@modelcontextprotocol/server-everything");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    let script = dir.join(manifest["bin"]["mcp-server-everything"].as_str().unwrap());
    let port = free_port();
    // `streamableHttp` serves http://HOST:$PORT/mcp (TypeScript SDK v1).
    let server = HttpPeer::start(
        Command::new("node")
            .arg(script)
            .arg("streamableHttp")
            .env("PORT", port.to_string()),
        port,
    );
    let (code, report) = audit_json(&["--url", &server.url]);
    assert_eq!(code, 1, "{report:#}");
    assert_protocol(&report, "2025-11-25", "initialize", false);
    assert_eq!(
        report["server"]["serverInfo"]["name"],
        "mcp-servers/everything"
    );
    assert_eq!(report["summary"]["tools"], 13, "{report:#}");
    // The same records as over stdio, from the corpus page.
    let corpus = mcp_hints(&[
        "audit",
        "--json",
        "--trusted",
        path(&support::corpus("servers/server-everything.json")),
    ]);
    let corpus: Value = serde_json::from_slice(&corpus.stdout).unwrap();
    assert_eq!(report["tools"], corpus["tools"]);
    let (_, text, _) = audit_text(&["--url", &server.url]);
    assert_eq!(
        protocol_line(&text),
        "protocol: 2025-11-25 via initialize (server/discover was refused with JSON-RPC error \
         -32000 (HTTP 400) \"Bad Request: Server not initialized\": the server predates \
         2026-07-28)"
    );
    // 2026-07-28 asked for: refused, clearly.
    let (code, _, stderr) = audit_text(&["--protocol-version", "2026-07-28", "--url", &server.url]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "refuses MCP 2026-07-28, the revision --protocol-version asks for: it answered \
             `server/discover` with JSON-RPC error -32000 (HTTP 400) \"Bad Request: Server not \
             initialized\", as servers that predate 2026-07-28 do: leave --protocol-version out \
             to negotiate"
        ),
        "{stderr}"
    );
}

#[test]
fn an_unknown_revision_is_refused_before_anything_starts() {
    let output = mcp_hints(&["audit", "--protocol-version", "2027-01-01", "--", "true"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "`2027-01-01` is not an MCP revision mcp-hints speaks: 2026-07-28, 2025-11-25, \
             2025-06-18, 2025-03-26, 2024-11-05"
        ),
        "{stderr}"
    );
}

#[test]
fn a_page_that_asks_for_input_is_refused_by_name() {
    // A 2026-07-28 server whose tools/list wants a round trip this command
    // does not make (multi round-trip requests): no tools to audit.
    let server = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "server/discover":
        result = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"}
    elif m.get("method") == "tools/list":
        result = {"resultType": "input_required", "inputRequests": {"who": {"method": "elicitation/create", "params": {"message": "Who are you?", "requestedSchema": {"type": "object"}}}}}
    else:
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
"#;
    let (code, stdout, stderr) = audit_text(&["--", "python3", "-c", server]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "page 1 is not a complete result (resultType \"input_required\"): the server asks \
             for more than mcp-hints gives"
        ),
        "{stderr}"
    );
    // The same page saved.
    let dir = peers::root().join("scratch");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join(format!("input-required-{}.json", std::process::id()));
    std::fs::write(
        &page,
        r#"{"jsonrpc": "2.0", "id": 2, "result": {"resultType": "input_required", "inputRequests": {}}}"#,
    )
    .unwrap();
    let output = mcp_hints(&["audit", path(&page)]);
    std::fs::remove_file(&page).unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("page 1 is not a complete result (resultType \"input_required\")"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn saved_pages_keep_their_cache_hints_in_the_report() {
    let dir = peers::root().join("scratch");
    std::fs::create_dir_all(&dir).unwrap();
    let first = dir.join(format!("cached-1-{}.json", std::process::id()));
    let second = dir.join(format!("cached-2-{}.json", std::process::id()));
    std::fs::write(
        &first,
        r#"{"resultType": "complete", "tools": [{"name": "a", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "openWorldHint": false}}], "nextCursor": "", "ttlMs": 300000, "cacheScope": "public"}"#,
    )
    .unwrap();
    // A whole JSON-RPC response: the fields of its result.
    std::fs::write(
        &second,
        r#"{"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete", "tools": [], "ttlMs": 0, "cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "1"}}}}"#,
    )
    .unwrap();
    let (code, report) = audit_json(&[path(&first), path(&second)]);
    std::fs::remove_file(&first).unwrap();
    std::fs::remove_file(&second).unwrap();
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["protocol"], Value::Null);
    assert_eq!(
        report["pageFields"],
        json!([
            {"resultType": "complete", "nextCursor": "", "ttlMs": 300000, "cacheScope": "public"},
            {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "1"}}},
        ])
    );
}

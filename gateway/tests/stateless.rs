//! The stateless 2026-07-28 `tools/call` requests the gateway answers
//! itself, without rmcp's per-request server, get the answers rmcp gives:
//! each is sent twice, as a client sends it and with its `Mcp-Name` in
//! SEP-2243's Base64 form (`=?base64?…?=`), which means the same to rmcp
//! and which the gateway leaves to rmcp, and the two answers are compared
//! whole: status, content type and body (the upstream's own JSON-RPC
//! errors included). A parked call whose client goes away, or that is
//! still waiting when the sessions end, is abandoned and logged.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::{BOUND, Echo, alice_config, log_lines, scratch_dir, serve_gateway, serve_upstream};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "stateless-test-token";

/// A gateway in front of an in-process upstream with `echo` and `note`;
/// `rules` after its `[[upstream]]`. Its address, the upstream's call
/// count and the log's path.
async fn gateway(
    name: &str,
    rules: &str,
    stop: &CancellationToken,
) -> (support::Served, Arc<AtomicUsize>, std::path::PathBuf) {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = Echo {
        calls: calls.clone(),
        note: true,
    };
    let url = serve_upstream(upstream, stop.clone()).await;
    let dir = scratch_dir(name);
    let log = dir.join("audit.jsonl");
    let text = alice_config(TOKEN, &log, &url, rules);
    (serve_gateway(&dir, name, &text, stop).await, calls, log)
}

/// An answer as the client sees it: status, `Content-Type`, and the body
/// (as JSON when it is JSON).
#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    content_type: Option<String>,
    body: Value,
}

/// POSTs a stateless `tools/call` of `tool` with `arguments`, its
/// `Mcp-Name` as it is or Base64-encoded (`encoded`).
async fn call(
    http: &reqwest::Client,
    address: std::net::SocketAddr,
    tool: &str,
    arguments: Value,
    encoded: bool,
) -> Answer {
    use base64::Engine as _;
    let body = json!({
        "jsonrpc": "2.0", "id": 41, "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let name = if encoded {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(tool)
        )
    } else {
        tool.to_owned()
    };
    let response = http
        .post(format!("http://{address}/mcp"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|value| value.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer {
        status,
        content_type,
        body,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_gateway_answers_itself_is_answered_as_rmcp_answers_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let rules = r#"
[[rule]]
action = "deny"
tool = "note"
"#;
    let (served, calls, log) = gateway("stateless-parity", rules, &stop).await;
    let http = reqwest::Client::new();
    let cases = [
        // A result.
        ("up__echo", json!({"text": "hello"})),
        // A refusal: a tool error naming the rule.
        ("up__note", json!({"text": "x"})),
        // A JSON-RPC error: no such tool.
        ("up__nope", json!({})),
        // A JSON-RPC error: no such upstream.
        ("zz__echo", json!({})),
        // The upstream's own errors, as they come: resource not found,
        // a header mismatch (400) and method not found (404).
        ("up__echo", json!({"text": "error -32002"})),
        ("up__echo", json!({"text": "error -32020"})),
        ("up__echo", json!({"text": "error -32601"})),
    ];
    for (tool, arguments) in cases {
        let direct = call(&http, served.address, tool, arguments.clone(), false).await;
        let through_rmcp = call(&http, served.address, tool, arguments, true).await;
        assert_eq!(direct, through_rmcp, "{tool}");
        assert_eq!(
            direct.content_type.as_deref(),
            Some("application/json"),
            "{tool}: {direct:?}"
        );
        assert_eq!(direct.body["id"], 41, "{tool}: {direct:?}");
    }
    let echoed = call(
        &http,
        served.address,
        "up__echo",
        json!({"text": "hi"}),
        false,
    )
    .await;
    assert_eq!(echoed.status, 200);
    assert_eq!(
        echoed.body["result"]["content"][0]["text"], "hi",
        "{echoed:?}"
    );
    let refused = call(&http, served.address, "up__note", json!({}), false).await;
    assert_eq!(refused.body["result"]["isError"], true, "{refused:?}");
    let unknown = call(&http, served.address, "up__nope", json!({}), false).await;
    assert_eq!(unknown.body["error"]["code"], -32602, "{unknown:?}");
    let missing = call(
        &http,
        served.address,
        "up__echo",
        json!({"text": "error -32002"}),
        false,
    )
    .await;
    assert_eq!(missing.body["error"]["code"], -32002, "{missing:?}");
    let mismatch = call(
        &http,
        served.address,
        "up__echo",
        json!({"text": "error -32020"}),
        false,
    )
    .await;
    assert_eq!(mismatch.status, 400, "{mismatch:?}");
    let no_method = call(
        &http,
        served.address,
        "up__echo",
        json!({"text": "error -32601"}),
        false,
    )
    .await;
    assert_eq!(no_method.status, 404, "{no_method:?}");

    // Both forms of each forwarded call reached the upstream, and every
    // decided call was logged the same way: decided, then finished.
    assert_eq!(calls.load(Ordering::SeqCst), 12);
    let pair = |tool: &str, decision: &str, outcome: &str| {
        [
            format!("{tool} decided {decision} -"),
            format!("{tool} finished {decision} {outcome}"),
        ]
    };
    let mut expected = Vec::new();
    for (tool, decision, outcome, times) in [
        ("echo", "allow", "completed", 2),
        ("note", "deny", "refused", 2),
        ("echo", "allow", "tool_error", 6),
        ("echo", "allow", "completed", 1),
        ("note", "deny", "refused", 1),
        ("echo", "allow", "tool_error", 3),
    ] {
        for _ in 0..times {
            expected.extend(pair(tool, decision, outcome));
        }
    }
    let entries = log_lines(&log, expected.len()).await;
    let shapes: Vec<String> = entries
        .iter()
        .map(|entry| {
            format!(
                "{} {} {} {}",
                entry["tool"].as_str().unwrap(),
                entry["phase"].as_str().unwrap(),
                entry["decision"].as_str().unwrap(),
                entry["outcome"].as_str().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(shapes, expected);
    stop.cancel();
    let _ = tokio::time::timeout(BOUND, served.served).await;
}

/// A call of `note` parked for an approver (a rule requires one), sent
/// stateless from a task of its own: the gateway, the upstream's call
/// count, the log, the client's task (its answer) and the token that
/// stops them; once the call's `decided` entry is written.
struct Parked {
    served: support::Served,
    calls: Arc<AtomicUsize>,
    log: std::path::PathBuf,
    client: tokio::task::JoinHandle<Answer>,
    stop: CancellationToken,
}

async fn parked(name: &str) -> Parked {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let rules = r#"
[[rule]]
action = "require_approval"
tool = "note"
timeout_secs = 300
"#;
    let (served, calls, log) = gateway(name, rules, &stop).await;
    let http = reqwest::Client::new();
    let address = served.address;
    let client =
        tokio::spawn(
            async move { call(&http, address, "up__note", json!({"text": "x"}), false).await },
        );
    // Parked: its `decided` entry is written before it waits.
    let decided = log_lines(&log, 1).await;
    assert_eq!(decided[0]["decision"], "require_approval", "{decided:?}");
    Parked {
        served,
        calls,
        log,
        client,
        stop,
    }
}

impl Parked {
    /// The call was abandoned, logged so, and never forwarded; then the
    /// gateway stops.
    async fn assert_abandoned(self) {
        let entries = log_lines(&self.log, 3).await;
        let shapes: Vec<String> = entries
            .iter()
            .map(|entry| {
                format!(
                    "{}:{}",
                    entry["phase"].as_str().unwrap(),
                    entry["decision"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            shapes,
            [
                "decided:require_approval",
                "decided:abandoned",
                "finished:abandoned"
            ]
        );
        let pending = self.served.gateway.approvals().pending().await.unwrap();
        assert!(pending.is_empty(), "still parked");
        // Nothing reached the upstream, then or since.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(self.calls.load(Ordering::SeqCst), 0);
        self.stop.cancel();
        let _ = tokio::time::timeout(BOUND, self.served.served).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_whose_client_goes_away_is_abandoned_and_never_forwarded() {
    let mut parked = parked("stateless-abandoned").await;
    // The client goes away: its connection closes with the request.
    parked.client.abort();
    assert!((&mut parked.client).await.unwrap_err().is_cancelled());
    parked.assert_abandoned().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_still_running_when_the_sessions_end_is_answered_500_and_logged() {
    let mut parked = parked("stateless-sessions-end").await;
    // As rmcp answers a request its service stopped before it answered:
    // 500, not a status that invites a resend; in words of the gateway's
    // own, which also show that it answered the call itself.
    parked.served.gateway.end_sessions();
    let answer = tokio::time::timeout(BOUND, &mut parked.client)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answer.status, 500, "{answer:?}");
    assert!(
        answer
            .body
            .as_str()
            .is_some_and(|text| text.contains("it may have run")),
        "{answer:?}"
    );
    parked.assert_abandoned().await;
}

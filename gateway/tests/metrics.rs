//! The admin endpoint's health, readiness and metrics routes, on gateways
//! with a real (in-process, loopback) HTTP upstream, driven by rmcp's
//! streamable-HTTP client: calls allowed, denied, rate limited and parked
//! for an approver are counted and timed as `GET /metrics` shows them;
//! `/readyz` names an upstream that would not start; two gateways in one
//! process keep metrics apart.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_hints_gateway::front::serve_admin;
use serde_json::{Value, json};
use support::{
    BOUND, Echo, call, client, log_lines, scratch_dir, serve_gateway_built, serve_upstream, text,
};
use tokio_util::sync::CancellationToken;

const ALICE: &str = "metrics-test-alice-token";
const BOB: &str = "metrics-test-bob-token-2";
const ADMIN: &str = "metrics-test-admin-token";

/// A loopback address no listener holds now, for `serve_admin` (which
/// says its bound address only as an event).
fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// `GET http://ADDRESS/PATH`, with the admin token when `token`; the
/// status and the body.
async fn get(address: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new().get(format!("http://{address}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The value of the sample `series` (`NAME{LABELS}` exactly as rendered)
/// in a `/metrics` text, if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map(|value| value.parse().unwrap())
}

/// Scrapes `/metrics` until `series` reads `value`, bounded.
async fn scrape_until(admin: SocketAddr, series: &str, value: f64) -> String {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let (status, text) = get(admin, "/metrics", Some(ADMIN)).await;
        assert_eq!(status, 200, "{text}");
        if sample(&text, series) == Some(value) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{series} did not read {value} within {BOUND:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The gateway's config: clients alice and bob, the admin token, the
/// upstream `up` at `url`; `note` denied (rule 0), `echo` limited to 2
/// calls a minute (rule 1), and bob's `echo` parked for an approver (rule
/// 2); then `extra`.
fn config(log: &std::path::Path, url: &str, extra: &str) -> String {
    let rules = format!(
        r#"
[admin]
token = "{ADMIN}"

[[client]]
principal = "bob"
token = "{BOB}"

[[rule]]
action = "deny"
tool = "note"

[[rule]]
action = "rate_limit"
tool = "echo"
limit = 2
window_secs = 60

[[rule]]
action = "require_approval"
tool = "echo"
principal = "bob"
timeout_secs = 60
{extra}"#
    );
    support::alice_config(ALICE, log, url, &rules)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_counted_and_timed_and_readiness_names_an_unreachable_upstream() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = Echo {
        calls: calls.clone(),
        note: true,
    };
    let url = serve_upstream(upstream, stop.clone()).await;
    let dir = scratch_dir("metrics");
    let log = dir.join("audit.jsonl");

    let served = serve_gateway_built(&dir, "one", &config(&log, &url, ""), &stop, |builder| {
        builder.metrics(true)
    })
    .await;
    let admin = free_address();
    let admin_task = serve_admin(served.gateway.clone(), admin).await.unwrap();

    // Liveness and readiness need no token; metrics do.
    assert_eq!(get(admin, "/healthz", None).await, (200, "ok".to_owned()));
    // A page reaching them by DNS rebinding, or from another origin, is
    // refused as on every admin route.
    let http = reqwest::Client::new();
    for (header, value) in [
        ("host", "rebound.example"),
        ("origin", "http://evil.example"),
    ] {
        let refused = http
            .get(format!("http://{admin}/readyz"))
            .header(header, value)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 403, "{header}: {value}");
    }
    let (status, body) = get(admin, "/readyz", None).await;
    assert_eq!(
        (status, serde_json::from_str::<Value>(&body).unwrap()),
        (200, json!({"ready": true}))
    );
    let (status, body) = get(admin, "/metrics", None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = get(admin, "/metrics", Some(ALICE)).await;
    assert_eq!(status, 401, "a client's token is not the admin's: {body}");
    let (status, idle) = get(admin, "/metrics", Some(ADMIN)).await;
    assert_eq!(status, 200, "{idle}");
    assert_eq!(
        sample(&idle, "mcp_hints_gateway_parked_calls"),
        Some(0.0),
        "{idle}"
    );

    // Allowed twice, then rate limited; `note` denied.
    let alice = client(served.address, ALICE).await;
    for text_sent in ["one", "two"] {
        let result = call(&alice, "up__echo", text_sent).await;
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert_eq!(text(&result), text_sent);
    }
    let limited = call(&alice, "up__echo", "three").await;
    assert_eq!(limited.is_error, Some(true));
    assert!(text(&limited).contains("rule[1]"), "{}", text(&limited));
    let denied = call(&alice, "up__note", "x").await;
    assert_eq!(denied.is_error, Some(true));
    assert!(text(&denied).contains("rule[0]"), "{}", text(&denied));
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // Bob's call waits for an approver, counted as parked meanwhile.
    let bob = client(served.address, BOB).await;
    let parked = tokio::spawn(async move {
        let result = call(&bob, "up__echo", "approved").await;
        (bob, result)
    });
    scrape_until(admin, "mcp_hints_gateway_parked_calls", 1.0).await;
    let (status, pending) = get(admin, "/pending", Some(ADMIN)).await;
    assert_eq!(status, 200, "{pending}");
    let pending: Value = serde_json::from_str(&pending).unwrap();
    let id = pending["pending"][0]["id"].as_str().unwrap().to_owned();
    let approved = reqwest::Client::new()
        .post(format!("http://{admin}/approve/{id}"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    let (bob, result) = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(text(&result), "approved", "{result:?}");
    // decided+finished for each of alice's four calls, then bob's
    // require_approval, approved and finished.
    log_lines(&log, 11).await;

    let text = scrape_until(admin, "mcp_hints_gateway_parked_calls", 0.0).await;
    let decisions = |rule: &str, decision: &str| {
        sample(
            &text,
            &format!(r#"mcp_hints_gateway_decisions_total{{rule="{rule}",decision="{decision}"}}"#),
        )
    };
    assert_eq!(decisions("rule[1]", "allow"), Some(2.0), "{text}");
    assert_eq!(decisions("rule[1]", "rate_limited"), Some(1.0), "{text}");
    assert_eq!(decisions("rule[0]", "deny"), Some(1.0), "{text}");
    assert_eq!(
        decisions("rule[2]", "require_approval"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(decisions("rule[2]", "approved"), Some(1.0), "{text}");
    assert_eq!(decisions("default", "allow"), None, "{text}");
    let forwarded =
        r#"mcp_hints_gateway_upstream_call_duration_seconds_count{upstream="up",outcome="result"}"#;
    assert_eq!(sample(&text, forwarded), Some(3.0), "{text}");
    let under_a_minute = r#"mcp_hints_gateway_upstream_call_duration_seconds_bucket{upstream="up",outcome="result",le="60"}"#;
    assert_eq!(sample(&text, under_a_minute), Some(3.0), "{text}");
    assert!(text.contains("# TYPE mcp_hints_gateway_upstream_call_duration_seconds histogram"));
    // Every decided entry was synced: at least one sync, timed.
    let syncs = sample(&text, "mcp_hints_gateway_audit_sync_duration_seconds_count");
    assert!(syncs.is_some_and(|count| count >= 1.0), "{text}");
    // Nothing was lost or resent on loopback.
    assert!(!text.contains("mcp_hints_gateway_resends_total{"), "{text}");
    assert!(
        !text.contains("mcp_hints_gateway_delivery_unknown_total{"),
        "{text}"
    );

    // A second gateway in the process, one upstream of which would not
    // start: not ready, naming it; its metrics are its own.
    let ghost =
        "\n[[upstream]]\nname = \"ghost\"\ncommand = [\"/nonexistent/mcp-hints-no-such-server\"]\n";
    let second = serve_gateway_built(
        &dir,
        "two",
        &config(&dir.join("two.jsonl"), &url, ghost),
        &stop,
        |builder| builder.metrics(true).retry_unreachable(false),
    )
    .await;
    let second_admin = free_address();
    let second_task = serve_admin(second.gateway.clone(), second_admin)
        .await
        .unwrap();
    assert_eq!(
        get(second_admin, "/healthz", None).await,
        (200, "ok".to_owned())
    );
    let (status, body) = get(second_admin, "/readyz", None).await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["ready"], false);
    let unready = body["unready"].as_array().unwrap();
    assert_eq!(unready.len(), 1, "{body}");
    assert_eq!(
        (&unready[0]["kind"], &unready[0]["name"]),
        (&json!("upstream"), &json!("ghost"))
    );
    let reason = unready[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("/nonexistent/mcp-hints-no-such-server"),
        "{reason}"
    );
    let (status, other) = get(second_admin, "/metrics", Some(ADMIN)).await;
    assert_eq!(status, 200);
    assert!(
        !other.contains("mcp_hints_gateway_decisions_total{"),
        "{other}"
    );
    // The first gateway's counts are untouched by the second's start.
    let (_, again) = get(admin, "/metrics", Some(ADMIN)).await;
    assert_eq!(sample(&again, forwarded), Some(3.0), "{again}");

    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    for gateway in [&served.gateway, &second.gateway] {
        gateway.end_sessions();
        gateway.finish_log().await;
        gateway.stop_upstreams();
    }
    admin_task.abort();
    second_task.abort();
    stop.cancel();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_started_without_metrics_answers_404_for_them() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let upstream = Echo {
        calls: Arc::new(AtomicUsize::new(0)),
        note: false,
    };
    let url = serve_upstream(upstream, stop.clone()).await;
    let dir = scratch_dir("metrics-off");
    let served = serve_gateway_built(
        &dir,
        "off",
        &config(&dir.join("audit.jsonl"), &url, ""),
        &stop,
        |builder| builder,
    )
    .await;
    assert_eq!(served.gateway.render_metrics(), None);
    let admin = free_address();
    let task = serve_admin(served.gateway.clone(), admin).await.unwrap();
    assert_eq!(get(admin, "/metrics", None).await.0, 401);
    let (status, body) = get(admin, "/metrics", Some(ADMIN)).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(get(admin, "/readyz", None).await.0, 200);
    task.abort();
    stop.cancel();
    let _ = std::fs::remove_dir_all(&dir);
}

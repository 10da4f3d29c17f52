//! Two gateway replicas sharing their state in a real `redis-server`
//! (`[state] redis`), each serving its own loopback port in front of one
//! in-process HTTP upstream, driven by rmcp's client: a rate limit holds
//! across them, a call parked at one is approved or denied at the other, a
//! drifted tool approved at one is callable at the other, and while Redis
//! is down what a rule guards is refused, the audit log says why, and the
//! replicas recover once it is back.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_hints_gateway::front::{Gateway, GatewayBuilder};
use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use serde_json::Value;
use support::redis::RedisServer;
use support::{
    BOUND, Echo, Served, call, client, log_lines, scratch_dir, serve_gateway_built, text,
};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "replicas-test-token";
const BOB_TOKEN: &str = "replicas-test-bob-token";
const ADMIN_TOKEN: &str = "replicas-test-admin-token";

/// `GET /readyz` of an admin endpoint of `gateway` on a free loopback
/// port: its status and body.
async fn readiness(gateway: &Arc<Gateway>) -> (u16, Value) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let served = mcp_hints_gateway::front::serve_admin(gateway.clone(), address)
        .await
        .unwrap();
    let answer = reqwest::get(format!("http://{address}/readyz"))
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
    served.abort();
    (status, body)
}

/// Two replicas of one config (`rules`, and `extra` tables) on the Redis
/// at `redis`, in front of one upstream; their logs are `a.jsonl` and
/// `b.jsonl` in `dir`.
struct Replicas {
    a: Served,
    b: Served,
    calls: Arc<AtomicUsize>,
    dir: PathBuf,
    stop: CancellationToken,
}

impl Replicas {
    async fn start(name: &str, redis: &str, rules: &str) -> Replicas {
        Replicas::start_with(name, redis, "", rules).await
    }

    /// As [`start`](Replicas::start), with `state` added to `[state]`.
    async fn start_with(name: &str, redis: &str, state: &str, rules: &str) -> Replicas {
        let stop = CancellationToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let upstream = Echo {
            calls: calls.clone(),
            note: true,
        };
        let url = support::serve_upstream(upstream, stop.clone()).await;
        let dir = scratch_dir(name);
        let config = |replica: &str| {
            let log = dir.join(format!("{replica}.jsonl"));
            format!(
                r#"
[gateway]
replica = "{replica}"

[[client]]
principal = "alice"
token = "{TOKEN}"

[[client]]
principal = "bob"
token = "{BOB_TOKEN}"

[admin]
token = "{ADMIN_TOKEN}"

[log]
path = {log:?}

[state]
redis = "{redis}"
prefix = "test-{name}"
{state}

[[upstream]]
name = "up"
url = "{url}"
trusted = true

{rules}
"#
            )
        };
        let metered = |builder: GatewayBuilder| builder.metrics(true);
        let a = serve_gateway_built(&dir, "a", &config("a"), &stop, metered).await;
        let b = serve_gateway_built(&dir, "b", &config("b"), &stop, metered).await;
        Replicas {
            a,
            b,
            calls,
            dir,
            stop,
        }
    }

    fn log(&self, replica: &str) -> PathBuf {
        self.dir.join(format!("{replica}.jsonl"))
    }

    async fn stop(self) {
        self.stop.cancel();
        for served in [self.a, self.b] {
            served.gateway.end_sessions();
            let _ = tokio::time::timeout(BOUND, served.served).await;
            served.gateway.finish_log().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits, bounded, until `gateway` lists a parked call (from the shared
/// state: parked at any replica); returns its id.
async fn parked_id(gateway: &Gateway) -> String {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let pending = gateway.approvals().pending().await.unwrap();
        if let Some(call) = pending.first() {
            return call.id.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no call was parked within {BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Calls `tool` with `text` through `client` in a task of its own, waits
/// until `decider` lists the call as parked (from the shared state), then
/// approves it there (`approve`) or denies it, as by `by`; returns the
/// client, the call's result and its id.
async fn parked_then_decided(
    client: RunningService<RoleClient, ()>,
    tool: &'static str,
    text: &'static str,
    decider: &Gateway,
    approve: bool,
    by: &str,
) -> (RunningService<RoleClient, ()>, CallToolResult, String) {
    let waiting = tokio::spawn(async move {
        let result = call(&client, tool, text).await;
        (client, result)
    });
    let id = parked_id(decider).await;
    let approvals = decider.approvals();
    let decided = if approve {
        approvals.approve(&id, by).await
    } else {
        approvals.deny(&id, by).await
    };
    decided.unwrap();
    let (client, result) = tokio::time::timeout(BOUND, waiting).await.unwrap().unwrap();
    (client, result, id)
}

/// The `decided` entries of `log` with `decision`, once there are `count`.
async fn decided(log: &Path, decision: &str, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let entries: Vec<Value> = log_lines(log, 0)
            .await
            .into_iter()
            .filter(|entry| entry["phase"] == "decided" && entry["decision"] == decision)
            .collect();
        if entries.len() >= count {
            return entries;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} held {} `{decision}` entries of {count} after {BOUND:?}",
            log.display(),
            entries.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_holds_across_replicas_whichever_each_call_lands_on() {
    let redis = RedisServer::start();
    let rules = r#"
[[rule]]
action = "rate_limit"
tool = "echo"
limit = 3
window_secs = 60
"#;
    let replicas = Replicas::start("limit", &redis.url(), rules).await;
    let (a, b) = (
        client(replicas.a.address, TOKEN).await,
        client(replicas.b.address, TOKEN).await,
    );
    for (n, client) in [&a, &b, &a].into_iter().enumerate() {
        let result = call(client, "up__echo", &format!("call {n}")).await;
        assert_ne!(result.is_error, Some(true), "call {n}: {result:?}");
    }
    // The fourth, at either replica, finds the window full.
    for client in [&b, &a] {
        let refused = call(client, "up__echo", "one too many").await;
        assert_eq!(refused.is_error, Some(true), "{refused:?}");
        let said = text(&refused);
        assert!(said.contains("at most 3 calls per 60 s"), "{said}");
    }
    assert_eq!(replicas.calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        decided(&replicas.log("a"), "rate_limited", 1).await.len(),
        1
    );
    assert_eq!(
        decided(&replicas.log("b"), "rate_limited", 1).await.len(),
        1
    );
    for client in [a, b] {
        client.cancel().await.unwrap();
    }
    replicas.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_parked_at_one_replica_is_approved_or_denied_at_the_other() {
    let redis = RedisServer::start();
    let rules = r#"
[[rule]]
action = "require_approval"
tool = "note"
timeout_secs = 60
"#;
    let replicas = Replicas::start("approval", &redis.url(), rules).await;
    let at_b = client(replicas.b.address, TOKEN).await;

    // Parked at B, listed and approved at A.
    let (at_b, result, id) = parked_then_decided(
        at_b,
        "up__note",
        "first",
        &replicas.a.gateway,
        true,
        "carol",
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), "noted: first");
    assert_eq!(replicas.calls.load(Ordering::SeqCst), 1);
    // Decided once: approving it again, at either replica, finds nothing.
    for served in [&replicas.a, &replicas.b] {
        assert!(
            served
                .gateway
                .approvals()
                .approve(&id, "dave")
                .await
                .is_err()
        );
    }

    // Parked at A, denied at B.
    let at_a = client(replicas.a.address, TOKEN).await;
    let (at_a, refused, _) = parked_then_decided(
        at_a,
        "up__note",
        "second",
        &replicas.b.gateway,
        false,
        "erin",
    )
    .await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(
        text(&refused).contains("was denied by erin"),
        "{}",
        text(&refused)
    );
    assert_eq!(replicas.calls.load(Ordering::SeqCst), 1);
    assert_eq!(decided(&replicas.log("b"), "approved", 1).await.len(), 1);
    assert_eq!(decided(&replicas.log("a"), "denied", 1).await.len(), 1);
    for client in [at_a, at_b] {
        client.cancel().await.unwrap();
    }
    replicas.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_tool_approved_at_one_replica_is_callable_at_the_other() {
    let redis = RedisServer::start();
    let lock = scratch_dir("drift-lock").join("gateway.lock");
    // Nothing approved yet: every tool is new, so drifted.
    let rules = format!("[lock]\npath = {lock:?}\ndeny_drift = true\n");
    let replicas = Replicas::start("drift", &redis.url(), &rules).await;
    let at_a = client(replicas.a.address, TOKEN).await;
    let (at_a, result, _) = parked_then_decided(
        at_a,
        "up__echo",
        "drifted",
        &replicas.b.gateway,
        true,
        "carol",
    )
    .await;
    assert_eq!(text(&result), "drifted", "{result:?}");

    // At B the approved definition is known: the call goes straight on.
    let at_b = client(replicas.b.address, TOKEN).await;
    let result = call(&at_b, "up__echo", "approved").await;
    assert_eq!(text(&result), "approved", "{result:?}");
    assert_eq!(replicas.calls.load(Ordering::SeqCst), 2);
    let b_entries = decided(&replicas.log("b"), "allow", 1).await;
    assert_eq!(b_entries.len(), 1);
    assert!(
        decided(&replicas.log("b"), "drift", 0).await.is_empty(),
        "B parked nothing"
    );
    // The approval went into Redis, not into either replica's lock file.
    assert!(!lock.exists());
    for client in [at_a, at_b] {
        client.cancel().await.unwrap();
    }
    replicas.stop().await;
    if let Some(dir) = lock.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_redis_is_down_guarded_calls_are_refused_and_logged_as_degraded_then_recover() {
    let mut redis = RedisServer::start();
    let port = redis.port();
    let rules = r#"
[[rule]]
action = "require_approval"
tool = "note"
timeout_secs = 60

[[rule]]
action = "rate_limit"
tool = "echo"
limit = 100
window_secs = 60
"#;
    let replicas = Replicas::start("down", &redis.url(), rules).await;
    let at_a = client(replicas.a.address, TOKEN).await;
    assert_eq!(text(&call(&at_a, "up__echo", "up").await), "up");

    redis.kill();
    let refused = call(&at_a, "up__echo", "down").await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let said = text(&refused);
    assert!(said.contains("its count cannot be kept now"), "{said}");
    assert!(
        said.contains("shared state (redis) is unavailable"),
        "{said}"
    );
    let parked = call(&at_a, "up__note", "down").await;
    assert_eq!(parked.is_error, Some(true), "{parked:?}");
    let said = text(&parked);
    assert!(said.contains("could not wait for an approver"), "{said}");
    assert_eq!(replicas.calls.load(Ordering::SeqCst), 1);

    let limited = decided(&replicas.log("a"), "rate_limited", 1).await;
    let degraded = limited[0]["degraded"].as_str().unwrap();
    assert!(degraded.contains("rate limits fail closed"), "{degraded}");
    // Not ready while Redis is down, and each failure counted.
    let (status, body) = readiness(&replicas.a.gateway).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["unready"][0]["kind"], "state", "{body}");
    assert_eq!(body["unready"][0]["name"], "redis", "{body}");
    let metrics = replicas.a.gateway.render_metrics().unwrap();
    assert!(
        metrics.lines().any(
            |line| line.starts_with(r#"mcp_hints_gateway_state_errors_total{backend="redis"}"#)
        ),
        "{metrics}"
    );
    let denied = decided(&replicas.log("a"), "denied", 1).await;
    let degraded = denied[0]["degraded"].as_str().unwrap();
    assert!(degraded.contains("approvals fail closed"), "{degraded}");

    // Back on the same port: used again without a restart (the
    // connection manager reconnects on the next command).
    let mut redis = RedisServer::start_on(port).expect("redis-server restarts on its port");
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let result = call(&at_a, "up__echo", "back").await;
        if result.is_error != Some(true) {
            assert_eq!(text(&result), "back");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway did not use Redis again within {BOUND:?}: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, body) = readiness(&replicas.a.gateway).await;
    assert_eq!(status, 200, "{body}");
    let (at_a, result, _) =
        parked_then_decided(at_a, "up__note", "back", &replicas.b.gateway, true, "carol").await;
    assert_eq!(text(&result), "noted: back", "{result:?}");
    at_a.cancel().await.unwrap();
    replicas.stop().await;
    redis.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_local_fallback_a_rate_limit_counts_in_the_replica_while_redis_is_down() {
    let mut redis = RedisServer::start();
    let rules = r#"
[[rule]]
action = "rate_limit"
tool = "echo"
limit = 1
window_secs = 60
"#;
    let replicas = Replicas::start_with(
        "fallback",
        &redis.url(),
        "rate_limit_fallback = \"local\"",
        rules,
    )
    .await;
    redis.kill();
    let at_a = client(replicas.a.address, TOKEN).await;
    let passed = call(&at_a, "up__echo", "counted here").await;
    assert_eq!(text(&passed), "counted here", "{passed:?}");
    let refused = call(&at_a, "up__echo", "one too many").await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(
        text(&refused).contains("at most 1 call per 60 s"),
        "{}",
        text(&refused)
    );
    let limited = decided(&replicas.log("a"), "rate_limited", 1).await;
    assert!(limited[0]["degraded"].is_string(), "{limited:?}");
    let allowed = decided(&replicas.log("a"), "allow", 1).await;
    let degraded = allowed[0]["degraded"].as_str().unwrap();
    assert!(
        degraded.contains("counted in this replica alone"),
        "{degraded}"
    );
    assert_eq!(replicas.calls.load(Ordering::SeqCst), 1);
    at_a.cancel().await.unwrap();
    replicas.stop().await;
}

/// Posts `body` to `gateway`'s `/mcp` with `token`, naming `session` if
/// given: the status, the `Mcp-Session-Id` the answer names, and the body.
async fn post_mcp(
    gateway: &Served,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, Option<String>, String) {
    let mut request = reqwest::Client::new()
        .post(format!("http://{}/mcp", gateway.address))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    let opened = answer
        .headers()
        .get("mcp-session-id")
        .map(|id| id.to_str().unwrap().to_owned());
    (status, opened, answer.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_sent_to_the_wrong_replica_is_a_404_naming_the_replica_that_opened_it() {
    let redis = RedisServer::start();
    let replicas = Replicas::start("sessions", &redis.url(), "").await;
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": { "name": "affinity-test", "version": "1" },
        },
    });
    let (status, opened, _) = post_mcp(&replicas.a, TOKEN, None, initialize).await;
    assert_eq!(status, 200);
    let session = opened.expect("initialize opened a session at a");
    let list = serde_json::json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    // The record is written beside the answer that opened the session:
    // bounded, until b names a.
    let deadline = tokio::time::Instant::now() + BOUND;
    let said = loop {
        let (status, _, body) = post_mcp(&replicas.b, TOKEN, Some(&session), list.clone()).await;
        assert_eq!(status, 404, "{body}");
        let error: Value = serde_json::from_str(&body).unwrap();
        let message = error["error"]["message"].as_str().unwrap().to_owned();
        if error["error"]["data"]["replica"] == "a" {
            assert_eq!(error["error"]["code"], -32001);
            break message;
        }
        assert!(message.contains("is not known here"), "{message}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "b never named a: {message}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        said.starts_with(&format!(
            "session `{session}` was opened by replica `a` of the gateway, not by this one (`b`)"
        )),
        "{said}"
    );
    // Another principal learns nothing of it: the answer for no session.
    let (status, _, body) = post_mcp(&replicas.b, BOB_TOKEN, Some(&session), list.clone()).await;
    assert_eq!(status, 404);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert!(error["error"]["data"].is_null(), "{body}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not known here"),
        "{body}"
    );
    // The session still serves at a; ended there, b no longer names a.
    let (status, _, _) = post_mcp(&replicas.a, TOKEN, Some(&session), list.clone()).await;
    assert_eq!(status, 200);
    let ended = reqwest::Client::new()
        .delete(format!("http://{}/mcp", replicas.a.address))
        .bearer_auth(TOKEN)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert!(ended.status().is_success(), "{}", ended.status());
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let (_, _, body) = post_mcp(&replicas.b, TOKEN, Some(&session), list.clone()).await;
        let error: Value = serde_json::from_str(&body).unwrap();
        if error["error"]["data"].is_null() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "b still names a: {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    replicas.stop().await;
}

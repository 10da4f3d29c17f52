//! The Redis backend of the gateway's shared state against a real
//! `redis-server`, as two replicas see it (two `RedisState`s on one Redis
//! and prefix): windows timed by Redis's clock, counting that stays within
//! its limit under concurrent calls from both, a parked call resolved
//! once, retry budgets summed over both, and the errors of a Redis that is
//! not there.

mod support;

use std::time::{Duration, SystemTime};

use mcp_hints_gateway::approval::{Parked, Resolution};
use mcp_hints_gateway::log::Outcome;
use mcp_hints_gateway::session::{
    HeldHints, HistoryEvent, HistoryLimits, SessionKey, SessionKind, Taint,
};
use mcp_hints_gateway::state::{BudgetUse, Counted, RedisState, SharedState, Window};
use serde_json::Map;
use support::redis::{RedisServer, dead_url};

fn window(limit: u32, window: Duration) -> Window<'static> {
    Window {
        rule: 0,
        key: "rate_limit echo",
        limit,
        window,
    }
}

fn parked(id: &str) -> Parked {
    let now = SystemTime::now();
    Parked {
        id: id.to_owned(),
        principal: "alice".to_owned(),
        upstream: "up".to_owned(),
        tool: "note".to_owned(),
        arguments: Map::new(),
        parked_at: now,
        expires_at: now + Duration::from_secs(60),
        reason: "rule[0] (require_approval note) requires an approver".to_owned(),
        hints: serde_json::Value::Null,
        drift: None,
    }
}

#[tokio::test]
async fn a_window_frees_up_by_redis_time_and_says_when() {
    let redis = RedisServer::start();
    let state = RedisState::open(&redis.url(), "window", None).unwrap();
    let short = [window(2, Duration::from_millis(400))];
    for _ in 0..2 {
        assert_eq!(
            state.count("alice", &short).await.unwrap(),
            Counted::Allowed
        );
    }
    let Counted::Full { rule, retry_after } = state.count("alice", &short).await.unwrap() else {
        panic!("the third call in the window was counted");
    };
    assert_eq!(rule, 0);
    assert!(
        retry_after > Duration::ZERO && retry_after <= Duration::from_millis(400),
        "{retry_after:?}"
    );
    // Another principal has a window of its own.
    assert_eq!(state.count("bob", &short).await.unwrap(), Counted::Allowed);
    tokio::time::sleep(retry_after + Duration::from_millis(50)).await;
    assert_eq!(
        state.count("alice", &short).await.unwrap(),
        Counted::Allowed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_at_two_replicas_never_pass_more_than_the_limit() {
    let redis = RedisServer::start();
    let replicas = [
        RedisState::open(&redis.url(), "race", None).unwrap(),
        RedisState::open(&redis.url(), "race", None).unwrap(),
    ];
    let mut tasks = Vec::new();
    for n in 0..60 {
        let state = replicas[n % 2].clone();
        tasks.push(tokio::spawn(async move {
            state
                .count("alice", &[window(10, Duration::from_secs(60))])
                .await
                .unwrap()
        }));
    }
    let mut allowed = 0;
    for task in tasks {
        if task.await.unwrap() == Counted::Allowed {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 10);
    // Another prefix shares nothing.
    let other = RedisState::open(&redis.url(), "other", None).unwrap();
    assert_eq!(
        other
            .count("alice", &[window(10, Duration::from_secs(60))])
            .await
            .unwrap(),
        Counted::Allowed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_is_listed_everywhere_and_resolved_once() {
    let redis = RedisServer::start();
    let a = RedisState::open(&redis.url(), "parked", None).unwrap();
    let b = RedisState::open(&redis.url(), "parked", None).unwrap();
    let mut told = b.resolved();
    a.park(&parked("call-1")).await.unwrap();
    let listed = b.pending().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (
            listed[0].id.as_str(),
            listed[0].principal.as_str(),
            listed[0].tool.as_str()
        ),
        ("call-1", "alice", "note")
    );
    assert_eq!(listed[0].reason, parked("call-1").reason);
    let approved = Resolution::Approved {
        by: "carol".to_owned(),
    };
    let (first, second) = tokio::join!(
        a.resolve("call-1", &approved),
        b.resolve("call-1", &Resolution::Abandoned)
    );
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(first ^ second, "resolved {first} at A and {second} at B");
    let won = if first {
        approved
    } else {
        Resolution::Abandoned
    };
    assert_eq!(a.resolution("call-1").await.unwrap(), Some(won.clone()));
    assert_eq!(b.resolution("call-1").await.unwrap(), Some(won));
    assert!(a.pending().await.unwrap().is_empty());
    let id = tokio::time::timeout(Duration::from_secs(10), told.recv())
        .await
        .expect("B is told of the resolution")
        .unwrap();
    assert_eq!(id, "call-1");
    assert!(!b.resolve("call-1", &Resolution::Abandoned).await.unwrap());
    assert_eq!(a.resolution("never-parked").await.unwrap(), None);
}

#[tokio::test]
async fn a_redis_that_is_not_there_is_an_error_naming_the_backend() {
    assert!(RedisState::open("not a url", "x", None).is_err());
    let state = RedisState::open(&dead_url(), "dead", None).unwrap();
    let error = state
        .count("alice", &[window(1, Duration::from_secs(1))])
        .await
        .unwrap_err();
    let said = error.to_string();
    assert!(
        said.starts_with("the gateway's shared state (redis) is unavailable: "),
        "{said}"
    );
    assert!(state.ready().await.is_err());
    assert!(state.park(&parked("call-2")).await.is_err());
    assert!(state.pending().await.is_err());
    assert!(state.history("s").await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_approvals_made_at_once_at_two_replicas_are_all_kept() {
    use mcp_hints::fingerprint::{Fingerprint, PinnedTool};
    let redis = RedisServer::start();
    let replicas = [
        RedisState::open(&redis.url(), "drift", None).unwrap(),
        RedisState::open(&redis.url(), "drift", None).unwrap(),
    ];
    let pinned = |n: usize| {
        let definition =
            serde_json::json!({"name": format!("tool_{n}"), "inputSchema": {"type": "object"}});
        let serde_json::Value::Object(definition) = definition else {
            unreachable!("the literal is an object")
        };
        PinnedTool {
            fingerprint: Fingerprint::of_definition(&definition),
            annotations: None,
        }
    };
    let mut tasks = Vec::new();
    for n in 0..20 {
        let state = replicas[n % 2].clone();
        tasks.push(tokio::spawn(async move {
            state
                .approve_tool(&format!("up__tool_{n}"), &pinned(n))
                .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    for n in 0..20 {
        for state in &replicas {
            assert_eq!(
                state.approved_tool(&format!("up__tool_{n}")).await.unwrap(),
                Some(pinned(n)),
                "tool_{n}"
            );
        }
    }
    assert_eq!(replicas[0].approved_tool("up__never").await.unwrap(), None);
}

#[tokio::test]
async fn a_retry_budget_is_summed_over_both_replicas_and_its_window() {
    let redis = RedisServer::start();
    let a = RedisState::open(&redis.url(), "budget", None).unwrap();
    let b = RedisState::open(&redis.url(), "budget", None).unwrap();
    let used = |deposits, withdrawals| BudgetUse {
        deposits,
        withdrawals,
    };
    let window = Duration::from_secs(10);
    assert_eq!(
        a.retry_budget("up:alice", used(5, 1), window)
            .await
            .unwrap(),
        used(5, 1)
    );
    assert_eq!(
        b.retry_budget("up:alice", used(2, 2), window)
            .await
            .unwrap(),
        used(7, 3)
    );
    // Another principal's, and another upstream's, are apart.
    assert_eq!(
        b.retry_budget("up:bob", used(0, 0), window).await.unwrap(),
        used(0, 0)
    );
    assert_eq!(
        a.retry_budget("other:alice", used(1, 0), window)
            .await
            .unwrap(),
        used(1, 0)
    );
    // A one-second window: the use leaves it within two seconds of Redis's
    // clock (the second it was counted in, and the next).
    let short = Duration::from_secs(1);
    assert_eq!(
        a.retry_budget("up:carol", used(4, 1), short).await.unwrap(),
        used(4, 1)
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let total = b.retry_budget("up:carol", used(0, 0), short).await.unwrap();
        if total == used(0, 0) {
            break;
        }
        assert_eq!(total, used(4, 1), "the use is whole until it leaves");
        assert!(
            std::time::Instant::now() < deadline,
            "the use never left the window"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A Redis that is not there is an error, not an empty budget.
    let gone = RedisState::open(&dead_url(), "budget", None).unwrap();
    assert!(
        gone.retry_budget("up:alice", used(1, 0), window)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_parked_at_one_replica_is_announced_at_another_with_its_hints() {
    let redis = RedisServer::start();
    let a = RedisState::open(&redis.url(), "announce", None).unwrap();
    let b = RedisState::open(&redis.url(), "announce", None).unwrap();
    let mut announced = b.newly_parked();
    let hints = serde_json::json!({
        "readOnlyHint": {"value": false, "source": "asserted"},
    });
    // B's subscriber connects in a task of its own: park until one
    // announcement arrives, bounded.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    let id = loop {
        let mut call = parked(&format!("announced-{n}"));
        call.hints = hints.clone();
        a.park(&call).await.unwrap();
        if let Ok(Ok(id)) = tokio::time::timeout(Duration::from_millis(200), announced.recv()).await
        {
            break id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "B was told of no parked call"
        );
        n += 1;
    };
    assert!(id.starts_with("announced-"), "{id}");
    let listed = b.pending().await.unwrap();
    let call = listed.iter().find(|call| call.id == id).unwrap();
    assert_eq!(call.hints, hints);
    assert_eq!(call.drift, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_history_is_shared_trimmed_stamped_by_redis_and_expires_idle() {
    let redis = RedisServer::start();
    let a = RedisState::open(&redis.url(), "history", None).unwrap();
    let b = RedisState::open(&redis.url(), "history", None).unwrap();
    let session = SessionKey::new(SessionKind::Named, "alice", "chat-1");
    let limits = HistoryLimits {
        max_calls: 2,
        idle: Duration::from_millis(1_500),
    };
    let called = |id: &str, upstream: &str| HistoryEvent::Called {
        id: id.to_owned(),
        upstream: upstream.to_owned(),
        tool: "fetch".to_owned(),
        hints: HeldHints([true, false, true, true]),
    };
    let before = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    a.record_history(session.as_str(), &called("r1", "web"), limits)
        .await
        .unwrap();
    let finished = HistoryEvent::Finished {
        id: "r1".to_owned(),
        outcome: Outcome::Completed,
        taint: Some(Taint::UntrustedOpenWorld),
    };
    b.record_history(session.as_str(), &finished, limits)
        .await
        .unwrap();
    // What a recorded, b reads, and the other way round.
    let history = b.history(session.as_str()).await.unwrap();
    assert_eq!(history.calls.len(), 1);
    let call = &history.calls[0];
    assert_eq!((call.id.as_str(), call.upstream.as_str()), ("r1", "web"));
    assert_eq!(call.outcome, Some(Outcome::Completed));
    assert_eq!(call.taint, Some(Taint::UntrustedOpenWorld));
    // Stamped by Redis's clock: on this host, within a few seconds of ours.
    assert!(
        call.at_ms.abs_diff(before) < 5_000,
        "{} vs {before}",
        call.at_ms
    );
    assert!(history.now_ms >= call.at_ms);
    // Another principal's session of the same name shares nothing.
    let bob = SessionKey::new(SessionKind::Named, "bob", "chat-1");
    assert!(a.history(bob.as_str()).await.unwrap().calls.is_empty());
    // Trimmed to its last 2 calls' events (4).
    for id in ["w1", "w2", "w3"] {
        b.record_history(session.as_str(), &called(id, "notes"), limits)
            .await
            .unwrap();
    }
    let ids: Vec<String> = a
        .history(session.as_str())
        .await
        .unwrap()
        .calls
        .into_iter()
        .map(|call| call.id)
        .collect();
    assert_eq!(
        ids,
        ["w1", "w2", "w3"],
        "r1's Called was trimmed, with it r1"
    );
    // Idle past 1.5 s: gone, waited for with a bound.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if a.history(session.as_str()).await.unwrap().calls.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the history never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_history_line_the_gateway_cannot_read_makes_the_history_unknown() {
    let redis = RedisServer::start();
    let state = RedisState::open(&redis.url(), "garbled", None).unwrap();
    let session = SessionKey::new(SessionKind::Principal, "alice", "");
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let key = format!("garbled:history:{}", session.as_str());
    let _: usize = redis::AsyncCommands::rpush(&mut connection, &key, "12 {not json")
        .await
        .unwrap();
    let error = state.history(session.as_str()).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("holds an event this gateway cannot read"),
        "{error}"
    );
}

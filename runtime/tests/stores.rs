//! The conformance suite of the idempotency stores: one generic function
//! per rule of [`IdempotencyStore`], each run against [`MemoryStore`] (the
//! reference), [`RedbStore`] (a file in a temporary directory) and
//! [`RedisStore`] (a real `redis-server` of its own per test), asserting
//! exact values. Then what only the persistent and shared stores promise:
//! records outlive the store handle, replicas race on one Redis, a dead
//! Redis fails promptly, and a value that is not a record is reported.

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_hints::idempotency::{
    Claim, IdempotencyStore, MemoryStore, Record, RecordKey, RecordState, RecordedResult,
    RedbStore, RedisStore, Reservation, StoreError,
};
use serde_json::json;
use support::redis::{RedisServer, dead_url};

/// A retention no test outlives in real time (Redis expires records by its
/// own clock): one day.
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The digest of the claims' arguments; quotes, a slash and a non-ASCII
/// letter check that every store (Lua's cjson included) keeps it exact.
const ARGUMENTS: &str = "sha256:\"quoted\"/é";

fn key(name: &str) -> RecordKey {
    RecordKey::new("append_note", Some("caller-1"), name)
}

/// A claim at `now_ms` whose lease lasts 1 s, kept for a day.
fn claim(token: &str, now_ms: u64) -> Claim {
    Claim {
        arguments: ARGUMENTS.to_owned(),
        token: token.to_owned(),
        now_ms,
        lease_until_ms: now_ms + 1_000,
        retention: DAY,
    }
}

fn completed(claim: &Claim, result: RecordedResult, completed_ms: u64) -> Record {
    Record {
        arguments: claim.arguments.clone(),
        created_ms: claim.now_ms,
        state: RecordState::Completed {
            result,
            completed_ms,
        },
    }
}

/// A result with what JSON round trips get wrong: a float, an integer past
/// 2^53, a slash, escapes and non-ASCII text, nesting and `null`.
fn result() -> RecordedResult {
    json!({
        "content": [{"type": "text", "text": "noted: a/b \"c\" \u{e9}\n"}],
        "structuredContent": {"ratio": 0.1, "big": 9_007_199_254_740_993_u64, "none": null},
        "isError": false
    })
    .into()
}

// ---- The rules, generic over the store ----

async fn reserve_takes_a_free_key_and_holds_it_against_a_second<S: IdempotencyStore>(
    store: Arc<S>,
) {
    let first = claim("first", 1_000);
    assert_eq!(
        store.reserve(&key("k"), &first).await.unwrap(),
        Reservation::Reserved
    );
    assert_eq!(
        store
            .reserve(&key("k"), &claim("second", 1_500))
            .await
            .unwrap(),
        Reservation::Held(first.record())
    );
    // Another key is another record.
    assert_eq!(
        store
            .reserve(&key("other"), &claim("third", 1_500))
            .await
            .unwrap(),
        Reservation::Reserved
    );
}

async fn complete_with_the_token_records_the_exact_result<S: IdempotencyStore>(store: Arc<S>) {
    let first = claim("first", 1_000);
    store.reserve(&key("k"), &first).await.unwrap();
    assert!(
        store
            .complete(&key("k"), "first", result(), 1_700, DAY)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .reserve(&key("k"), &claim("second", 2_000))
            .await
            .unwrap(),
        Reservation::Held(completed(&first, result(), 1_700))
    );
    // Completed, it is in progress under no token: the holder's token no
    // longer changes it either.
    assert!(
        !store
            .complete(&key("k"), "first", json!({}).into(), 2_100, DAY)
            .await
            .unwrap()
    );
    assert!(!store.renew(&key("k"), "first", 0, 9_000).await.unwrap());
    assert!(!store.release(&key("k"), "first").await.unwrap());
    assert_eq!(
        store
            .reserve(&key("k"), &claim("third", 2_200))
            .await
            .unwrap(),
        Reservation::Held(completed(&first, result(), 1_700))
    );
}

async fn a_wrong_token_changes_nothing<S: IdempotencyStore>(store: Arc<S>) {
    let first = claim("first", 1_000);
    store.reserve(&key("k"), &first).await.unwrap();
    assert!(
        !store
            .complete(&key("k"), "other", result(), 1_100, DAY)
            .await
            .unwrap()
    );
    assert!(!store.renew(&key("k"), "other", 0, 50_000).await.unwrap());
    assert!(!store.release(&key("k"), "other").await.unwrap());
    assert_eq!(
        store
            .reserve(&key("k"), &claim("second", 1_200))
            .await
            .unwrap(),
        Reservation::Held(first.record())
    );
    // And no token at all changes a key that has no record.
    assert!(!store.renew(&key("none"), "first", 0, 50_000).await.unwrap());
    assert!(!store.release(&key("none"), "first").await.unwrap());
    assert!(
        !store
            .complete(&key("none"), "first", result(), 1_100, DAY)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .reserve(&key("none"), &claim("third", 1_300))
            .await
            .unwrap(),
        Reservation::Reserved
    );
}

async fn release_frees_the_key<S: IdempotencyStore>(store: Arc<S>) {
    store
        .reserve(&key("k"), &claim("first", 1_000))
        .await
        .unwrap();
    assert!(store.release(&key("k"), "first").await.unwrap());
    assert!(!store.release(&key("k"), "first").await.unwrap());
    let second = claim("second", 1_100);
    assert_eq!(
        store.reserve(&key("k"), &second).await.unwrap(),
        Reservation::Reserved
    );
    assert_eq!(
        store
            .reserve(&key("k"), &claim("third", 1_200))
            .await
            .unwrap(),
        Reservation::Held(second.record())
    );
}

async fn a_lease_over_is_taken_over_exactly_once<S: IdempotencyStore>(store: Arc<S>) {
    let first = claim("first", 1_000); // lease until 2_000
    store.reserve(&key("k"), &first).await.unwrap();
    // Just before the lease ends, it holds.
    assert_eq!(
        store
            .reserve(&key("k"), &claim("early", 1_999))
            .await
            .unwrap(),
        Reservation::Held(first.record())
    );
    let (b, c) = (claim("b", 2_000), claim("c", 2_000));
    let (from_b, from_c) = {
        let (store_b, store_c) = (store.clone(), store.clone());
        let (b, c) = (b.clone(), c.clone());
        let b = tokio::spawn(async move { store_b.reserve(&key("k"), &b).await.unwrap() });
        let c = tokio::spawn(async move { store_c.reserve(&key("k"), &c).await.unwrap() });
        (b.await.unwrap(), c.await.unwrap())
    };
    let took_over = Reservation::TookOver {
        previous: first.record(),
    };
    let (winner, loser) = match (&from_b, &from_c) {
        (won, Reservation::Held(_)) if *won == took_over => (&b, &c),
        (Reservation::Held(_), won) if *won == took_over => (&c, &b),
        answers => panic!("expected one TookOver and one Held, got {answers:?}"),
    };
    let held = if winner.token == "b" {
        &from_c
    } else {
        &from_b
    };
    assert_eq!(*held, Reservation::Held(winner.record()));
    // The first call's token no longer holds the key; the winner's does.
    assert!(
        !store
            .complete(&key("k"), "first", result(), 2_100, DAY)
            .await
            .unwrap()
    );
    assert!(!store.release(&key("k"), &loser.token).await.unwrap());
    assert!(
        store
            .complete(&key("k"), &winner.token, result(), 2_200, DAY)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .reserve(&key("k"), &claim("late", 2_300))
            .await
            .unwrap(),
        Reservation::Held(completed(winner, result(), 2_200))
    );
}

async fn renew_moves_the_lease<S: IdempotencyStore>(store: Arc<S>) {
    let first = claim("first", 1_000); // lease until 2_000
    store.reserve(&key("k"), &first).await.unwrap();
    assert!(store.renew(&key("k"), "first", 0, 5_000).await.unwrap());
    let renewed = Record {
        state: RecordState::InProgress {
            token: "first".to_owned(),
            lease_until_ms: 5_000,
        },
        ..first.record()
    };
    assert_eq!(
        store
            .reserve(&key("k"), &claim("second", 4_999))
            .await
            .unwrap(),
        Reservation::Held(renewed.clone())
    );
    assert_eq!(
        store
            .reserve(&key("k"), &claim("third", 5_000))
            .await
            .unwrap(),
        Reservation::TookOver { previous: renewed }
    );
}

async fn retention_is_checked_on_read<S: IdempotencyStore>(store: Arc<S>) {
    let window = Duration::from_secs(60);
    let with_window = |token: &str, now_ms: u64| Claim {
        retention: window,
        ..claim(token, now_ms)
    };
    // A completed record, kept by the store for a day, read with a window
    // of 60 s: it holds until completedMs + 60 s, and from then the key is
    // new.
    let first = claim("first", 1_000);
    store.reserve(&key("done"), &first).await.unwrap();
    store
        .complete(&key("done"), "first", result(), 1_500, DAY)
        .await
        .unwrap();
    assert_eq!(
        store
            .reserve(&key("done"), &with_window("early", 61_499))
            .await
            .unwrap(),
        Reservation::Held(completed(&first, result(), 1_500))
    );
    let again = with_window("again", 61_500);
    assert_eq!(
        store.reserve(&key("done"), &again).await.unwrap(),
        Reservation::Reserved
    );
    assert_eq!(
        store
            .reserve(&key("done"), &claim("after", 61_600))
            .await
            .unwrap(),
        Reservation::Held(again.record())
    );

    // In progress under a lease that still lasts, created longer than the
    // window ago: a call still running is never run twice, so the lease
    // holds; once it is over, the old record counts as expired.
    let running = Claim {
        lease_until_ms: 100_000,
        ..claim("running", 1_000)
    };
    store.reserve(&key("running"), &running).await.unwrap();
    assert_eq!(
        store
            .reserve(&key("running"), &with_window("late", 99_999))
            .await
            .unwrap(),
        Reservation::Held(running.record())
    );
    assert_eq!(
        store
            .reserve(&key("running"), &with_window("after", 100_000))
            .await
            .unwrap(),
        Reservation::Reserved
    );
}

async fn a_running_call_keeps_its_record_past_the_retention<S: IdempotencyStore>(store: Arc<S>) {
    // Kept 100 ms, leased for 9 s: neither a read nor the store's own
    // expiry (Redis' TTL, redb's purge) may free the key while the lease
    // lasts.
    let short = Duration::from_millis(100);
    let running = Claim {
        retention: short,
        lease_until_ms: 10_000,
        ..claim("running", 1_000)
    };
    assert_eq!(
        store.reserve(&key("k"), &running).await.unwrap(),
        Reservation::Reserved
    );
    // Past the retention in real time too, for Redis' own clock.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let early = Claim {
        retention: short,
        ..claim("early", 5_000)
    };
    assert_eq!(
        store.reserve(&key("k"), &early).await.unwrap(),
        Reservation::Held(running.record())
    );
    // A renewal carries it further.
    assert!(
        store
            .renew(&key("k"), "running", 9_000, 20_000)
            .await
            .unwrap()
    );
    let later = Claim {
        retention: short,
        ..claim("later", 15_000)
    };
    let Reservation::Held(record) = store.reserve(&key("k"), &later).await.unwrap() else {
        panic!("the renewed record holds its key");
    };
    assert_eq!(record.token(), Some("running"));
}

async fn zero_retention_keeps_no_completed_record<S: IdempotencyStore>(store: Arc<S>) {
    let at = |token: &str, now_ms: u64| Claim {
        retention: Duration::ZERO,
        ..claim(token, now_ms)
    };
    let first = at("first", 1_000);
    assert_eq!(
        store.reserve(&key("k"), &first).await.unwrap(),
        Reservation::Reserved
    );
    // Even with no retention, a call in progress is not run twice.
    assert_eq!(
        store
            .reserve(&key("k"), &at("second", 1_000))
            .await
            .unwrap(),
        Reservation::Held(first.record())
    );
    assert!(
        store
            .complete(&key("k"), "first", result(), 1_100, Duration::ZERO)
            .await
            .unwrap()
    );
    assert_eq!(
        store.reserve(&key("k"), &at("third", 1_100)).await.unwrap(),
        Reservation::Reserved
    );
}

async fn fifty_concurrent_reserves_reserve_once<S: IdempotencyStore>(store: Arc<S>) {
    let claims: Vec<Claim> = (0..50).map(|n| claim(&format!("t{n}"), 1_000)).collect();
    let tasks: Vec<_> = claims
        .iter()
        .cloned()
        .map(|claim| {
            let store = store.clone();
            tokio::spawn(async move { (store.reserve(&key("k"), &claim).await.unwrap(), claim) })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    let winners: Vec<&Claim> = answers
        .iter()
        .filter(|(answer, _)| *answer == Reservation::Reserved)
        .map(|(_, claim)| claim)
        .collect();
    assert_eq!(winners.len(), 1, "answers: {answers:?}");
    let held = Reservation::Held(winners[0].record());
    assert_eq!(
        answers.iter().filter(|(answer, _)| *answer == held).count(),
        49,
        "answers: {answers:?}"
    );
}

/// A completed record is still there for a second handle on the same
/// storage (the file reopened, a new Redis connection).
async fn a_completed_record_outlives_its_handle<S: IdempotencyStore>(
    store: S,
    reopen: impl AsyncFnOnce() -> S,
) {
    let first = claim("first", 1_000);
    store.reserve(&key("k"), &first).await.unwrap();
    assert!(
        store
            .complete(&key("k"), "first", result(), 1_500, DAY)
            .await
            .unwrap()
    );
    drop(store);
    let reopened = reopen().await;
    assert_eq!(
        reopened
            .reserve(&key("k"), &claim("second", 2_000))
            .await
            .unwrap(),
        Reservation::Held(completed(&first, result(), 1_500))
    );
}

// ---- The stores ----

fn memory() -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new())
}

/// A directory under the target's temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("stores")
            .join(format!("{name}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn file(&self) -> PathBuf {
        self.0.join("idempotency.redb")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn redis(server: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::connect(&server.url())
        .await
        .unwrap()
        .with_prefix(prefix)
}

/// One test per rule and store: `memory_store::<rule>`,
/// `redb_store::<rule>`, `redis_store::<rule>`.
macro_rules! conformance {
    ($($rule:ident),* $(,)?) => {
        mod memory_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    super::$rule(super::memory()).await;
                }
            )*
        }

        mod redb_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    let dir = super::TempDir::new(stringify!($rule));
                    let store = super::RedbStore::open(dir.file()).unwrap();
                    super::$rule(std::sync::Arc::new(store)).await;
                }
            )*
        }

        mod redis_store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    let server = super::RedisServer::start();
                    let store = super::redis(&server, concat!(stringify!($rule), ":")).await;
                    super::$rule(std::sync::Arc::new(store)).await;
                }
            )*
        }
    };
}

conformance!(
    reserve_takes_a_free_key_and_holds_it_against_a_second,
    complete_with_the_token_records_the_exact_result,
    a_wrong_token_changes_nothing,
    release_frees_the_key,
    a_lease_over_is_taken_over_exactly_once,
    renew_moves_the_lease,
    retention_is_checked_on_read,
    a_running_call_keeps_its_record_past_the_retention,
    zero_retention_keeps_no_completed_record,
    fifty_concurrent_reserves_reserve_once,
);

// ---- What only the persistent and shared stores promise ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redb_store_reopened_from_its_file_keeps_completed_records() {
    let dir = TempDir::new("reopened");
    let file = dir.file();
    let store = RedbStore::open(&file).unwrap();
    assert_eq!(store.path(), file);
    a_completed_record_outlives_its_handle(store, async || RedbStore::open(&file).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redb_store_refuses_a_file_open_already() {
    let dir = TempDir::new("open-twice");
    let _store = RedbStore::open(dir.file()).unwrap();
    assert!(matches!(
        RedbStore::open(dir.file()),
        Err(StoreError::Unavailable(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redb_store_refuses_a_missing_directory() {
    let dir = TempDir::new("missing");
    assert!(matches!(
        RedbStore::open(dir.0.join("no-such-dir").join("idempotency.redb")),
        Err(StoreError::Unavailable(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_keeps_completed_records_for_a_new_connection() {
    let server = RedisServer::start();
    let store = redis(&server, "outlives:").await;
    a_completed_record_outlives_its_handle(store, async || redis(&server, "outlives:").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_writes_the_record_json_under_prefix_and_key() {
    let server = RedisServer::start();
    let store = redis(&server, "app:").await;
    assert_eq!(store.prefix(), "app:");
    assert_eq!(
        store.redis_key(&key("k")),
        r#"app:["append_note","caller-1","k"]"#
    );
    let first = claim("first", 1_000);
    store.reserve(&key("k"), &first).await.unwrap();
    let mut raw = raw_connection(&server).await;
    let (json, ttl): (String, i64) = redis::pipe()
        .get(store.redis_key(&key("k")))
        .pttl(store.redis_key(&key("k")))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Record>(&json).unwrap(),
        first.record()
    );
    assert!(ttl > 0 && ttl <= 86_400_000, "PTTL {ttl}");
    // Renewing keeps the expiry; completing sets it to the retention.
    store.renew(&key("k"), "first", 0, 3_000).await.unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(store.redis_key(&key("k")))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(ttl > 86_000_000 && ttl <= 86_400_000, "PTTL {ttl}");
    store
        .complete(&key("k"), "first", result(), 1_500, Duration::from_secs(60))
        .await
        .unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(store.redis_key(&key("k")))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "PTTL {ttl}");
    assert_eq!(
        RedisStore::DEFAULT_PREFIX,
        "mcp-hints:idempotency:",
        "the documented default"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_redis_replicas_racing_fifty_claims_reserve_once() {
    let server = RedisServer::start();
    let replicas = [
        Arc::new(redis(&server, "replicas:").await),
        Arc::new(redis(&server, "replicas:").await),
    ];
    let tasks: Vec<_> = (0..50)
        .map(|n| {
            let store = replicas[n % 2].clone();
            let claim = claim(&format!("t{n}"), 1_000);
            tokio::spawn(async move { (store.reserve(&key("k"), &claim).await.unwrap(), claim) })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    let winners: Vec<&Claim> = answers
        .iter()
        .filter(|(answer, _)| *answer == Reservation::Reserved)
        .map(|(_, claim)| claim)
        .collect();
    assert_eq!(winners.len(), 1, "answers: {answers:?}");
    let held = Reservation::Held(winners[0].record());
    assert_eq!(
        answers.iter().filter(|(answer, _)| *answer == held).count(),
        49
    );
}

/// How long a store may take to say that Redis is gone.
const PROMPTLY: Duration = Duration::from_secs(5);

async fn promptly<T: std::fmt::Debug>(
    what: &str,
    call: impl Future<Output = Result<T, StoreError>>,
) -> StoreError {
    let started = Instant::now();
    let outcome = tokio::time::timeout(PROMPTLY, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung for {PROMPTLY:?} on a dead Redis"));
    let error = outcome.expect_err(what);
    assert!(started.elapsed() < PROMPTLY);
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_a_dead_redis_is_unavailable_promptly() {
    let url = dead_url();
    let error = promptly("connect", RedisStore::connect(&url)).await;
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    let error = promptly("connect", RedisStore::connect("not a url")).await;
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_killed_under_the_store_is_unavailable_promptly() {
    let mut server = RedisServer::start();
    let store = redis(&server, "killed:").await;
    store
        .reserve(&key("k"), &claim("first", 1_000))
        .await
        .unwrap();
    server.kill();
    // Twice each: the first call finds the connection dropped, the next
    // ones find reconnecting refused.
    for _ in 0..2 {
        let error = promptly("reserve", store.reserve(&key("k"), &claim("second", 1_100))).await;
        assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
        let error = promptly("renew", store.renew(&key("k"), "first", 0, 5_000)).await;
        assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
        let error = promptly(
            "complete",
            store.complete(&key("k"), "first", result(), 1_200, DAY),
        )
        .await;
        assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
        let error = promptly("release", store.release(&key("k"), "first")).await;
        assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stops_answering_is_unavailable_promptly() {
    let mut server = RedisServer::start();
    let store = redis(&server, "frozen:").await;
    store
        .reserve(&key("k"), &claim("first", 1_000))
        .await
        .unwrap();
    server.freeze();
    let started = Instant::now();
    let error = promptly("reserve", store.reserve(&key("k"), &claim("second", 1_100))).await;
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    // The response timeout, not an early failure of some other kind.
    assert!(started.elapsed() >= RedisStore::RESPONSE_TIMEOUT);
    let error = promptly("release", store.release(&key("k"), "first")).await;
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_back_after_a_restart_serves_again() {
    let mut server = RedisServer::start();
    let port = server.port();
    let store = redis(&server, "restart:").await;
    store
        .reserve(&key("k"), &claim("first", 1_000))
        .await
        .unwrap();
    server.kill();
    let error = promptly("reserve", store.reserve(&key("k"), &claim("second", 1_100))).await;
    assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
    // The same port again, empty (no persistence), and scripts unloaded.
    let restarted = restart_on(port);
    let deadline = Instant::now() + PROMPTLY;
    let answer = loop {
        match store.reserve(&key("k"), &claim("third", 1_200)).await {
            Ok(answer) => break answer,
            Err(error) if Instant::now() < deadline => {
                assert!(matches!(error, StoreError::Unavailable(_)), "{error:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("the store did not reconnect: {error}"),
        }
    };
    assert_eq!(answer, Reservation::Reserved);
    // The scripts load again by themselves.
    assert!(store.release(&key("k"), "third").await.unwrap());
    drop(restarted);
}

/// A `redis-server` on `port` again (the port was just freed).
fn restart_on(port: u16) -> RedisServer {
    let deadline = Instant::now() + PROMPTLY;
    loop {
        match RedisServer::start_on(port) {
            Ok(server) => return server,
            Err(failure) if Instant::now() < deadline => {
                eprintln!("restart on {port}: {failure}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(failure) => panic!("redis-server did not restart on {port}: {failure}"),
        }
    }
}

async fn raw_connection(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_that_is_not_a_record_is_corrupt() {
    let server = RedisServer::start();
    let store = redis(&server, "corrupt:").await;
    let mut raw = raw_connection(&server).await;
    let cases: [(&str, redis::Cmd); 4] = [
        (
            "junk",
            redis::Cmd::set(store.redis_key(&key("junk")), "not json {"),
        ),
        (
            "other-json",
            redis::Cmd::set(store.redis_key(&key("other-json")), r#"{"state":"odd"}"#),
        ),
        (
            "fractional",
            redis::Cmd::set(
                store.redis_key(&key("fractional")),
                r#"{"arguments":"a","createdMs":1.5,"state":"in_progress","token":"first","leaseUntilMs":9}"#,
            ),
        ),
        (
            "a-hash",
            redis::Cmd::hset(store.redis_key(&key("a-hash")), "field", "value"),
        ),
    ];
    for (name, write) in cases {
        let () = write.query_async(&mut raw).await.unwrap();
        let corrupt = |error: StoreError| match error {
            StoreError::Corrupt { key: at, detail } => {
                assert_eq!(at, key(name).to_string());
                assert!(!detail.is_empty());
            }
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        };
        corrupt(
            store
                .reserve(&key(name), &claim("first", 1_000))
                .await
                .unwrap_err(),
        );
        corrupt(
            store
                .renew(&key(name), "first", 0, 5_000)
                .await
                .unwrap_err(),
        );
        corrupt(
            store
                .complete(&key(name), "first", result(), 1_100, DAY)
                .await
                .unwrap_err(),
        );
        corrupt(store.release(&key(name), "first").await.unwrap_err());
    }
}

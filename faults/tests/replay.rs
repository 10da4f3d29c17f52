//! The replay-safety rules across real processes: `ReplaySafeClient` (or a
//! plain rmcp client) over rmcp's own transports, `fault-proxy` breaking
//! chosen `tools/call` exchanges, `counter-server` behind it writing every
//! handler run to an executions file. Each test asserts the exact counts of
//! that file and the exact faults of the proxy's log, so none can pass
//! because a fault never fired.
//!
//! The same rules in one process, with a paused clock, are in the runtime's
//! `tests/client.rs`.

mod support;

// A real `redis-server` on a free loopback port (installed from Debian's
// packages when missing), shared with the runtime's store tests.
#[allow(dead_code)]
#[path = "../../runtime/tests/support/redis.rs"]
mod redis_support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_hints::client::{
    CallError, Completed, DeliveryUnknown, Lost, Outcome, ReplaySafeClient, ToolCall,
};
use mcp_hints::idempotency::{REPLAYED_META_KEY, codes};
use mcp_hints::policy::Trust;
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use serde_json::json;

use redis_support::RedisServer;
use support::{
    CALL_TIMEOUT, Executions, Http, Scratch, Server, StdioRig, builder, eventually, fault, faults,
    settled, settled_when, within,
};

// ---------------------------------------------------------------- helpers

fn append(text: &str) -> ToolCall {
    ToolCall::new("append").argument("text", json!(text))
}

fn keyed(key: &str, text: &str) -> ToolCall {
    ToolCall::new("append_keyed")
        .argument("text", json!(text))
        .idempotency_key(key)
}

fn read() -> ToolCall {
    ToolCall::new("read")
}

fn set_value(name: &str, value: &str) -> ToolCall {
    ToolCall::new("set_value")
        .argument("name", json!(name))
        .argument("value", json!(value))
}

fn completed(outcome: Result<Outcome, CallError>) -> Completed {
    match outcome {
        Ok(Outcome::Completed(done)) => done,
        other => panic!("expected a completed call, got {other:?}"),
    }
}

fn unknown(outcome: Result<Outcome, CallError>) -> DeliveryUnknown {
    match outcome {
        Ok(Outcome::DeliveryUnknown(unknown)) => unknown,
        other => panic!("expected delivery unknown, got {other:?}"),
    }
}

/// The first text content of a result.
fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result:?}"))
        .to_owned()
}

fn replayed(result: &CallToolResult) -> bool {
    result
        .meta
        .as_ref()
        .is_some_and(|meta| meta.0.contains_key(REPLAYED_META_KEY))
}

/// The two transports of the tests that run over both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// `fault-proxy ... stdio -- counter-server ...` as a child process.
    Stdio,
    /// `fault-proxy http` in front of `counter-server --http`.
    Http,
}

/// A client through the proxy to one server, with what the test reads
/// back; the processes live as long as it.
struct Rig {
    client: ReplaySafeClient,
    executions: PathBuf,
    fault_log: PathBuf,
    scratch: Scratch,
    http: Option<Http>,
    _stdio: Option<StdioRig>,
}

impl Rig {
    async fn start(
        test: &str,
        transport: Transport,
        work_ms: u64,
        faults: &[&str],
        trust: Trust,
    ) -> Rig {
        let scratch = Scratch::new(test);
        let executions = scratch.path("executions");
        let server = Server::new(executions.clone()).work_ms(work_ms);
        match transport {
            Transport::Stdio => {
                let stdio = StdioRig::new(&scratch, server, faults);
                let client = stdio.client(builder(trust)).await;
                Rig {
                    client,
                    executions,
                    fault_log: stdio.fault_log().to_owned(),
                    scratch,
                    http: None,
                    _stdio: Some(stdio),
                }
            }
            Transport::Http => {
                let http = Http::start(&scratch, server, faults).await;
                let client = http.client(builder(trust)).await;
                Rig {
                    client,
                    executions,
                    fault_log: http.fault_log.clone(),
                    scratch,
                    http: Some(http),
                    _stdio: None,
                }
            }
        }
    }

    fn executions(&self) -> Executions {
        Executions::read(&self.executions)
    }

    fn faults(&self) -> Vec<support::Fault> {
        faults(&self.fault_log)
    }

    /// Waits until a killed upstream is gone, so that its counts are final.
    async fn settle(&mut self) {
        if let Some(http) = &mut self.http {
            http.server.exited().await;
        }
    }

    fn stderr(&self) -> String {
        match &self.http {
            Some(http) => http.stderr_text(),
            None => self.scratch.stderr_text(),
        }
    }
}

// ---------------------------------------------- a. non-idempotent: at most once

/// One `append` through one fault: delivery unknown after one attempt,
/// the fault fired once, and the handler's counts as given.
struct AtMostOnce {
    /// The `--fault` spec, on the first `append`.
    fault: &'static str,
    /// The handler's pause, for a kill to land in.
    work_ms: u64,
    /// The handler's `(start, done)` lines afterwards.
    executions: (usize, usize),
    /// How the client saw the answer go missing.
    lost: fn(&Lost) -> bool,
}

impl AtMostOnce {
    async fn check(self, test: &str, transport: Transport) {
        let faults = [self.fault];
        let mut rig = Rig::start(test, transport, self.work_ms, &faults, Trust::Trusted).await;
        let outcome = within("append", rig.client.call_tool(append("once"))).await;
        let unknown = unknown(outcome);
        assert_eq!(unknown.tool, "append");
        assert_eq!(unknown.attempts, 1, "{unknown}");
        let lost = &unknown.last_error;
        assert!((self.lost)(lost), "lost how: {lost:?}");
        if self.fault.starts_with("kill-") {
            rig.settle().await;
        }
        let name = self.fault.split([':', '=']).next().unwrap();
        let fired = [fault(name, "append", 1)];
        assert_eq!(
            settled(&fired, || rig.faults()).await,
            fired,
            "{}",
            rig.stderr()
        );
        let executions = settled(&self.executions, || rig.executions().of("append")).await;
        assert_eq!(executions, self.executions, "{}", rig.stderr());
        assert_eq!(rig.client.restarts().await, 0);
    }
}

fn timed_out(lost: &Lost) -> bool {
    matches!(lost, Lost::Timeout(timeout) if *timeout == CALL_TIMEOUT)
}

fn transport_closed(lost: &Lost) -> bool {
    matches!(lost, Lost::TransportClosed)
}

/// Over HTTP, a connection the proxy closes without a response fails the
/// POST itself.
fn transport_failed(lost: &Lost) -> bool {
    matches!(lost, Lost::Transport(_))
}

#[tokio::test]
async fn append_with_dropped_response_runs_once_and_is_unknown_over_stdio() {
    AtMostOnce {
        fault: "drop-response:append",
        work_ms: 0,
        executions: (1, 1),
        lost: timed_out,
    }
    .check("a-drop-response-stdio", Transport::Stdio)
    .await;
}

#[tokio::test]
async fn append_with_dropped_response_runs_once_and_is_unknown_over_http() {
    AtMostOnce {
        fault: "drop-response:append",
        work_ms: 0,
        executions: (1, 1),
        lost: transport_failed,
    }
    .check("a-drop-response-http", Transport::Http)
    .await;
}

#[tokio::test]
async fn append_with_dropped_request_never_runs_and_is_unknown_over_stdio() {
    AtMostOnce {
        fault: "drop-request:append",
        work_ms: 0,
        executions: (0, 0),
        lost: timed_out,
    }
    .check("a-drop-request-stdio", Transport::Stdio)
    .await;
}

#[tokio::test]
async fn append_with_dropped_request_never_runs_and_is_unknown_over_http() {
    AtMostOnce {
        fault: "drop-request:append",
        work_ms: 0,
        executions: (0, 0),
        lost: timed_out,
    }
    .check("a-drop-request-http", Transport::Http)
    .await;
}

#[tokio::test]
async fn append_answered_after_the_timeout_runs_once_and_is_unknown_over_stdio() {
    AtMostOnce {
        fault: "delay-response=3000:append",
        work_ms: 0,
        executions: (1, 1),
        lost: timed_out,
    }
    .check("a-delay-stdio", Transport::Stdio)
    .await;
}

#[tokio::test]
async fn append_answered_after_the_timeout_runs_once_and_is_unknown_over_http() {
    AtMostOnce {
        fault: "delay-response=3000:append",
        work_ms: 0,
        executions: (1, 1),
        lost: timed_out,
    }
    .check("a-delay-http", Transport::Http)
    .await;
}

#[tokio::test]
async fn append_whose_server_is_killed_mid_call_never_finishes_and_is_unknown_over_stdio() {
    AtMostOnce {
        fault: "kill-server=200:append",
        work_ms: 1000,
        executions: (1, 0),
        lost: transport_closed,
    }
    .check("a-kill-stdio", Transport::Stdio)
    .await;
}

#[tokio::test]
async fn append_whose_server_is_killed_mid_call_never_finishes_and_is_unknown_over_http() {
    AtMostOnce {
        fault: "kill-server=200:append",
        work_ms: 1000,
        executions: (1, 0),
        lost: transport_failed,
    }
    .check("a-kill-http", Transport::Http)
    .await;
}

// ------------------------------------ b. replay-safe: resent, keyed runs once

async fn replay_safe_calls_are_resent(test: &str, transport: Transport) {
    let faults = [
        "drop-response:read",
        "drop-response:set_value",
        "drop-response:append_keyed",
    ];
    let rig = Rig::start(test, transport, 0, &faults, Trust::Trusted).await;
    let client = &rig.client;

    let done = completed(within("read", client.call_tool(read())).await);
    assert_eq!(done.attempts, 2);
    assert_eq!(done.result.structured_content, Some(json!({"entries": 0})));

    let done = completed(within("set_value", client.call_tool(set_value("x", "1"))).await);
    assert_eq!(done.attempts, 2);
    assert_eq!(text(&done.result), "x = 1");
    assert!(!done.replayed());

    let done = completed(within("append_keyed", client.call_tool(keyed("b-1", "b"))).await);
    assert_eq!(done.attempts, 2);
    assert_eq!(done.idempotency_key.as_deref(), Some("b-1"));
    assert_eq!(text(&done.result), "entry 1: b");
    assert!(done.replayed(), "the resend got the recorded result");

    // One entry, not two: a read after the resend says so.
    let done = completed(within("read", client.call_tool(read())).await);
    assert_eq!(
        (done.attempts, done.result.structured_content),
        (1, Some(json!({"entries": 1})))
    );

    let fired = [
        fault("drop-response", "read", 1),
        fault("drop-response", "set_value", 1),
        fault("drop-response", "append_keyed", 1),
    ];
    assert_eq!(
        settled(&fired, || rig.faults()).await,
        fired,
        "{}",
        rig.stderr()
    );
    let executions = settled_when(
        || rig.executions(),
        |executions| {
            [
                executions.of("read"),
                executions.of("set_value"),
                executions.of("append_keyed"),
            ] == [(3, 3), (2, 2), (1, 1)]
        },
    )
    .await;
    assert_eq!(executions.of("read"), (3, 3), "{executions:?}");
    assert_eq!(executions.of("set_value"), (2, 2), "{executions:?}");
    assert_eq!(executions.of("append_keyed"), (1, 1), "{executions:?}");
}

#[tokio::test]
async fn replay_safe_calls_with_dropped_responses_are_resent_over_stdio() {
    replay_safe_calls_are_resent("b-stdio", Transport::Stdio).await;
}

#[tokio::test]
async fn replay_safe_calls_with_dropped_responses_are_resent_over_http() {
    replay_safe_calls_are_resent("b-http", Transport::Http).await;
}

// ------------------------------------------- c. one key, 50 calls at once

/// 50 calls of `append_keyed` with one key at once, over one plain rmcp
/// session, while the first runs for 500 ms: exactly one runs; every other
/// answer is its recorded result or "in progress".
async fn one_key_runs_once_under_concurrency(test: &str, store: impl FnOnce(&Scratch) -> String) {
    const CALLS: usize = 50;
    let scratch = Scratch::new(test);
    let executions = scratch.path("executions");
    let server = Server::new(executions.clone())
        .store(store(&scratch))
        .work_ms(500);
    let stdio = StdioRig::new(&scratch, server, &[]);
    let session = within("connect", stdio.connect()).await.unwrap();
    let mut arguments = JsonObject::new();
    arguments.insert("request_id".into(), json!("c-1"));
    arguments.insert("text".into(), json!("concurrent"));
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..CALLS {
        let peer = session.peer().clone();
        let params = CallToolRequestParams::new("append_keyed").with_arguments(arguments.clone());
        calls.spawn(async move { peer.call_tool(params).await });
    }
    let answers = within("50 calls", calls.join_all()).await;
    let (mut fresh, mut replays, mut in_progress) = (0, 0, 0);
    for answer in answers {
        match answer {
            Ok(result) => {
                assert_eq!(text(&result), "entry 1: concurrent");
                if replayed(&result) {
                    replays += 1;
                } else {
                    fresh += 1;
                }
            }
            Err(ServiceError::McpError(error)) if error.code.0 == codes::KEY_IN_PROGRESS => {
                in_progress += 1;
            }
            Err(other) => panic!("neither the result nor \"in progress\": {other:?}"),
        }
    }
    assert_eq!(
        fresh, 1,
        "one call ran ({replays} replays, {in_progress} in progress)"
    );
    assert_eq!(replays + in_progress, CALLS - 1);
    assert!(
        in_progress >= 1,
        "no call overlapped the first ({replays} replays)"
    );
    let counts = settled_when(
        || Executions::read(&executions),
        |counts| counts.of("append_keyed") == (1, 1),
    )
    .await;
    assert_eq!(
        counts.of("append_keyed"),
        (1, 1),
        "{}",
        scratch.stderr_text()
    );
    assert_eq!(faults(stdio.fault_log()), []);
}

#[tokio::test]
async fn fifty_concurrent_calls_with_one_key_run_once_in_memory() {
    one_key_runs_once_under_concurrency("c-memory", |_| "memory".to_owned()).await;
}

#[tokio::test]
async fn fifty_concurrent_calls_with_one_key_run_once_on_redb() {
    one_key_runs_once_under_concurrency("c-redb", redb_store).await;
}

#[tokio::test]
async fn fifty_concurrent_calls_with_one_key_run_once_on_redis() {
    let redis = RedisServer::start();
    one_key_runs_once_under_concurrency("c-redis", |_| format!("redis:{}", redis.url())).await;
}

fn redb_store(scratch: &Scratch) -> String {
    format!("redb:{}", scratch.path("store.redb").display())
}

// ------------------------------------- d. a restart keeps the recorded result

/// The server runs a keyed call, records it and is killed before the
/// answer; the client starts proxy and server again on the same store,
/// resends the key and gets the recorded result; the handler ran once.
async fn restart_replays_the_recorded_result(test: &str, store: impl FnOnce(&Scratch) -> String) {
    let scratch = Scratch::new(test);
    let executions = scratch.path("executions");
    let server = Server::new(executions.clone()).store(store(&scratch));
    let stdio = StdioRig::new(&scratch, server, &["kill-after-response:append_keyed"]);
    // The store outlives the server, and the client is told so.
    let client = stdio
        .client(builder(Trust::Trusted).keys_survive_restarts(true))
        .await;

    let outcome = within("append_keyed", client.call_tool(keyed("d-1", "survives"))).await;
    let done = completed(outcome);
    assert_eq!(done.attempts, 2);
    assert_eq!(text(&done.result), "entry 1: survives");
    assert!(done.replayed(), "the restarted server replayed the record");

    assert_eq!(stdio.starts(), 2);
    assert_eq!(client.restarts().await, 1);
    assert_eq!(
        settled_when(|| faults(stdio.fault_log()), |fired| !fired.is_empty()).await,
        [fault("kill-after-response", "append_keyed", 1)],
        "{}",
        scratch.stderr_text()
    );
    let counts = settled_when(
        || Executions::read(&executions),
        |counts| counts.of("append_keyed") == (1, 1),
    )
    .await;
    assert_eq!(
        counts.of("append_keyed"),
        (1, 1),
        "{}",
        scratch.stderr_text()
    );
}

#[tokio::test]
async fn a_keyed_call_is_not_resent_to_a_restarted_server_unless_its_keys_survive() {
    // On the in-memory store the restarted server has forgotten the key, and
    // the client, by default, does not count on it.
    let scratch = Scratch::new("d-memory");
    let executions = scratch.path("executions");
    let server = Server::new(executions.clone());
    let stdio = StdioRig::new(&scratch, server, &["kill-after-response:append_keyed"]);
    let client = stdio.client(builder(Trust::Trusted)).await;
    let lost = unknown(within("append_keyed", client.call_tool(keyed("d-0", "once"))).await);
    assert_eq!(lost.attempts, 1);
    assert!(
        lost.stopped
            .starts_with("the server was started again, and its idempotency records"),
        "{}",
        lost.stopped
    );
    assert_eq!(client.restarts().await, 1);
    let counts = settled_when(
        || Executions::read(&executions),
        |counts| counts.of("append_keyed") == (1, 1),
    )
    .await;
    assert_eq!(
        counts.of("append_keyed"),
        (1, 1),
        "{}",
        scratch.stderr_text()
    );
}

#[tokio::test]
async fn a_key_recorded_before_a_restart_is_replayed_on_redb() {
    restart_replays_the_recorded_result("d-redb", redb_store).await;
}

#[tokio::test]
async fn a_key_recorded_before_a_restart_is_replayed_on_redis() {
    let redis = RedisServer::start();
    restart_replays_the_recorded_result("d-redis", |_| format!("redis:{}", redis.url())).await;
}

// -------------------------- e. a call killed mid-way holds its key for its lease

#[tokio::test]
async fn a_key_whose_process_died_is_in_progress_until_its_lease_is_over_on_redb() {
    const LEASE_MS: u64 = 1500;
    let scratch = Scratch::new("e-redb-lease");
    let executions = scratch.path("executions");
    let server = Server::new(executions.clone())
        .store(redb_store(&scratch))
        .lease_ms(LEASE_MS)
        .work_ms(800);
    let stdio = StdioRig::new(&scratch, server, &["kill-server=200:append_keyed"]);
    // The last attempt runs the handler's 800 ms.
    let client = stdio
        .client(
            builder(Trust::Trusted)
                .call_timeout(Duration::from_secs(2))
                .keys_survive_restarts(true),
        )
        .await;

    let started = Instant::now();
    let outcome = within("append_keyed", client.call_tool(keyed("e-1", "taken over"))).await;
    let elapsed = started.elapsed();
    let done = completed(outcome);
    assert_eq!(text(&done.result), "entry 1: taken over");
    assert!(!done.replayed(), "the taken-over call ran");
    // The killed attempt and the one that took over, with at least one
    // ask answered "in progress" between them.
    assert_eq!(done.attempts, 2);
    assert!(done.asks >= 1, "asks: {}", done.asks);
    assert!(
        elapsed >= Duration::from_millis(LEASE_MS),
        "taken over after {elapsed:?}, before the {LEASE_MS} ms lease was over"
    );

    assert_eq!(stdio.starts(), 2);
    assert_eq!(
        settled_when(|| faults(stdio.fault_log()), |fired| !fired.is_empty()).await,
        [fault("kill-server", "append_keyed", 1)],
        "{}",
        scratch.stderr_text()
    );
    let counts = settled_when(
        || Executions::read(&executions),
        |counts| counts.of("append_keyed") == (2, 1),
    )
    .await;
    assert_eq!(
        counts.of("append_keyed"),
        (2, 1),
        "{}",
        scratch.stderr_text()
    );
}

// ---------------------------------------- f. one key names one operation

#[tokio::test]
async fn the_same_key_with_other_arguments_is_refused_as_a_conflict() {
    let scratch = Scratch::new("f-conflict");
    let executions = scratch.path("executions");
    let stdio = StdioRig::new(&scratch, Server::new(executions.clone()), &[]);
    let client = stdio.client(builder(Trust::Trusted)).await;

    let done = completed(within("first", client.call_tool(keyed("f-1", "first"))).await);
    assert_eq!(
        (text(&done.result), done.attempts),
        ("entry 1: first".to_owned(), 1)
    );
    match within("second", client.call_tool(keyed("f-1", "second"))).await {
        Err(CallError::Rejected {
            tool,
            error,
            attempts,
        }) => {
            assert_eq!((tool.as_str(), attempts), ("append_keyed", 1));
            assert_eq!(error.code.0, codes::KEY_CONFLICT, "{error:?}");
            assert_eq!(error.data.as_ref().unwrap()["reason"], "conflict");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let counts = settled_when(
        || Executions::read(&executions),
        |counts| counts.of("append_keyed") == (1, 1),
    )
    .await;
    assert_eq!(
        counts.of("append_keyed"),
        (1, 1),
        "{}",
        scratch.stderr_text()
    );
    assert_eq!(faults(stdio.fault_log()), []);
}

// ------------------------------------ g. replicas sharing one Redis

#[tokio::test]
async fn two_replicas_sharing_redis_run_a_key_once_between_them() {
    let redis = RedisServer::start();
    let scratch = Scratch::new("g-replicas");
    let files = [scratch.path("executions-1"), scratch.path("executions-2")];
    let replica = |executions: &PathBuf| {
        let server = Server::new(executions.clone())
            .store(format!("redis:{}", redis.url()))
            .work_ms(700);
        StdioRig::new(&scratch, server, &[])
    };
    let (one, two) = (replica(&files[0]), replica(&files[1]));
    // The call that runs answers within its timeout, after 700 ms of work.
    let options = || builder(Trust::Trusted).call_timeout(Duration::from_secs(2));
    let (first, second) = tokio::join!(one.client(options()), two.client(options()));

    let (a, b) = within("both calls", async {
        tokio::join!(
            first.call_tool(keyed("g-1", "once")),
            second.call_tool(keyed("g-1", "once"))
        )
    })
    .await;
    let (a, b) = (completed(a), completed(b));
    assert_eq!(text(&a.result), "entry 1: once");
    assert_eq!(text(&b.result), "entry 1: once");
    let (ran, replay) = match (a.replayed(), b.replayed()) {
        (false, true) => (a, b),
        (true, false) => (b, a),
        other => panic!("exactly one replica runs the key: replayed {other:?}"),
    };
    assert_eq!((ran.attempts, ran.asks), (1, 0));
    // It overlapped the first: answered "in progress" at least once.
    assert_eq!(replay.attempts, 1);
    assert!(replay.asks >= 1, "asks: {}", replay.asks);

    let counts = settled_when(
        || Executions::read_all(&files),
        |counts| counts.of("append_keyed") == (1, 1),
    )
    .await;
    assert_eq!(
        counts.of("append_keyed"),
        (1, 1),
        "{}",
        scratch.stderr_text()
    );
    assert_eq!(faults(one.fault_log()), []);
}

// ------------------------------------------- h. untrusted: never resent

#[tokio::test]
async fn an_untrusted_servers_calls_are_never_resent_whatever_they_declare() {
    let faults = [
        "drop-response:read",
        "drop-response:set_value",
        "drop-response:append_keyed",
    ];
    let rig = Rig::start(
        "h-untrusted",
        Transport::Stdio,
        0,
        &faults,
        Trust::Untrusted,
    )
    .await;
    let client = &rig.client;
    let (read, set, keyed) = within("three calls", async {
        tokio::join!(
            client.call_tool(read()),
            client.call_tool(set_value("x", "1")),
            client.call_tool(keyed("h-1", "h")),
        )
    })
    .await;
    for (tool, outcome) in [("read", read), ("set_value", set), ("append_keyed", keyed)] {
        let unknown = unknown(outcome);
        assert_eq!(unknown.tool, tool);
        assert_eq!(unknown.attempts, 1, "{unknown}");
        assert!(timed_out(&unknown.last_error), "{:?}", unknown.last_error);
    }
    let mut fired = settled_when(|| rig.faults(), |fired| fired.len() >= 3).await;
    fired.sort();
    assert_eq!(
        fired,
        [
            fault("drop-response", "append_keyed", 1),
            fault("drop-response", "read", 1),
            fault("drop-response", "set_value", 1),
        ],
        "{}",
        rig.stderr()
    );
    let executions = settled_when(
        || rig.executions(),
        |executions| {
            ["read", "set_value", "append_keyed"]
                .iter()
                .all(|tool| executions.of(tool) == (1, 1))
        },
    )
    .await;
    for tool in ["read", "set_value", "append_keyed"] {
        assert_eq!(executions.of(tool), (1, 1), "{tool}: {executions:?}");
    }
}

// ------------------------ i. rmcp re-initialises the HTTP session mid-call

/// `append` waits on its SSE stream while the upstream is killed (by the
/// proxy, on another call) and started again on the same port, so the
/// session is unknown there; the next request gets 404, rmcp's client
/// re-initialises the session and fails the pending `append` with its own
/// "re-initialized" error, which the client reports as a lost response.
#[tokio::test]
async fn a_session_re_initialised_before_the_answer_is_a_lost_response() {
    let scratch = Scratch::new("i-session-reinitialized");
    let executions = scratch.path("executions");
    let server = Server::new(executions.clone()).work_ms(1500);
    let mut http = Http::start(&scratch, server, &["kill-server:read"]).await;
    // Long enough for the kill, the restart and the re-initialisation.
    let client = Arc::new(
        http.client(builder(Trust::Trusted).call_timeout(Duration::from_secs(8)))
            .await,
    );

    let pending = tokio::spawn({
        let client = Arc::clone(&client);
        async move { client.call_tool(append("pending")).await }
    });
    let executions_path = executions.clone();
    eventually("append started", || {
        Executions::read(&executions_path).started("append") == 1
    })
    .await;

    // Another call makes the proxy kill the upstream (its own answer is
    // lost too, and does not matter here).
    let peer = client.peer().await;
    let killer = tokio::spawn({
        let peer = peer.clone();
        async move { peer.call_tool(CallToolRequestParams::new("read")).await }
    });
    let fault_log = http.fault_log.clone();
    eventually("the kill", || {
        faults(&fault_log) == [fault("kill-server", "read", 1)]
    })
    .await;
    http.restart_server().await;

    // The old session is unknown to the new server: 404, re-initialise.
    let after = within(
        "a call in the new session",
        peer.call_tool(CallToolRequestParams::new("read")),
    )
    .await
    .unwrap_or_else(|error| {
        panic!(
            "the call after the restart: {error}\n{}",
            http.stderr_text()
        )
    });
    assert_eq!(after.structured_content, Some(json!({"entries": 0})));
    let outcome = within("the pending append", pending).await.unwrap();
    let unknown = unknown(outcome);
    assert!(
        matches!(unknown.last_error, Lost::SessionReinitialized),
        "lost how: {:?}\n{}",
        unknown.last_error,
        http.stderr_text()
    );
    assert_eq!(unknown.attempts, 1);
    assert!(within("the killed call", killer).await.unwrap().is_err());

    let counts = settled_when(
        || Executions::read(&executions),
        |counts| counts.of("append") == (1, 0),
    )
    .await;
    assert_eq!(counts.of("append"), (1, 0), "{}", http.stderr_text());
    assert_eq!(faults(&http.fault_log), [fault("kill-server", "read", 1)]);
}

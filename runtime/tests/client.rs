//! The replay-safe client against a real rmcp server in the same process
//! (over a `tokio::io::duplex` pair, rmcp's own transports on both sides),
//! with tokio's clock paused: a handler that sleeps past the client's
//! timeout is a response lost after the call ran, at no cost in time.
//!
//! The same rules across real processes and a fault-injecting proxy are in
//! the `mcp-hints-faults` package.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_hints::client::{CallError, Lost, Outcome, ReplaySafeClient, ToolCall};
use mcp_hints::idempotency::{Idempotency, IdempotentServer, codes};
use mcp_hints::policy::{Decision, Trust};
use mcp_hints::rmcp::handler::server::router::tool::ToolRouter;
use mcp_hints::rmcp::handler::server::wrapper::Parameters;
use mcp_hints::rmcp::model::RequestId;
use mcp_hints::rmcp::service::RequestContext;
use mcp_hints::rmcp::service::RunningService;
use mcp_hints::rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt};
use mcp_hints::{Hint, Provenance, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;

/// What the test can see of the server across restarts.
#[derive(Clone, Default)]
struct World {
    /// Finished runs per tool.
    runs: Arc<Mutex<HashMap<String, usize>>>,
    /// The JSON-RPC id of every `read` request the server received.
    read_ids: Arc<Mutex<Vec<RequestId>>>,
    /// The next this many calls sleep past the client's timeout after
    /// doing their work.
    slow: Arc<AtomicUsize>,
    /// The next this many calls end their server after doing their work,
    /// before it can answer.
    deadly: Arc<AtomicUsize>,
    idempotency: Idempotency,
}

impl World {
    fn runs(&self, tool: &str) -> usize {
        self.runs.lock().unwrap().get(tool).copied().unwrap_or(0)
    }
}

fn take(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

#[derive(Clone)]
struct Server {
    world: World,
    /// Notified to end this server's session, as a crash would.
    die: Arc<Notify>,
    /// Serve `read` with another description (a changed tool).
    changed: bool,
}

impl IdempotentServer for Server {
    fn idempotency(&self) -> &Idempotency {
        &self.world.idempotency
    }
}

#[derive(Deserialize, JsonSchema)]
struct Text {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct KeyedText {
    /// The same on every resend.
    #[allow(dead_code)]
    request_id: String,
    text: String,
}

#[tool_router(closed_world)]
impl Server {
    /// Read.
    #[tool(read_only)]
    async fn read(&self, context: RequestContext<RoleServer>) -> String {
        self.world.read_ids.lock().unwrap().push(context.id);
        self.work("read").await
    }

    /// Set.
    #[tool(destructive, idempotent)]
    async fn set(&self, Parameters(Text { text }): Parameters<Text>) -> String {
        self.work(&format!("set {text}")).await
    }

    /// Append.
    #[tool(additive, non_idempotent)]
    async fn append(&self, Parameters(Text { text }): Parameters<Text>) -> String {
        self.work(&format!("append {text}")).await
    }

    /// Append once per key.
    #[tool(additive, idempotency_key = "request_id")]
    async fn append_keyed(
        &self,
        Parameters(KeyedText { text, .. }): Parameters<KeyedText>,
    ) -> String {
        self.work(&format!("append_keyed {text}")).await
    }

    /// Refuses.
    #[tool(read_only)]
    async fn refuse(&self) -> Result<String, ErrorData> {
        Err(ErrorData::invalid_params("refused on purpose", None))
    }

    /// Always "in progress", asking for a pause of more than a day.
    #[tool(additive, idempotency_key = "request_id")]
    async fn busy(
        &self,
        Parameters(KeyedText { .. }): Parameters<KeyedText>,
    ) -> Result<String, ErrorData> {
        Err(ErrorData::new(
            mcp_hints::rmcp::model::ErrorCode(codes::KEY_IN_PROGRESS),
            "still running",
            Some(json!({"retryAfterMs": 100_000_000})),
        ))
    }
}

impl Server {
    async fn work(&self, what: &str) -> String {
        let tool = what.split(' ').next().unwrap().to_owned();
        let n = {
            let mut runs = self.world.runs.lock().unwrap();
            let n = runs.entry(tool).or_default();
            *n += 1;
            *n
        };
        if take(&self.world.deadly) {
            // The call ran; its answer dies with the server.
            self.die.notify_one();
        }
        if take(&self.world.slow) {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        format!("{what} #{n}")
    }

    fn router(&self) -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        if self.changed
            && let Some(route) = router.map.get_mut("read")
        {
            route.attr.description = Some("Read, differently.".into());
        }
        router
    }
}

#[tool_handler(router = self.router())]
impl ServerHandler for Server {}

/// A connection to a new server of `world`, as a restarted process would
/// be; `changed` serves a changed `read`.
async fn connect(
    world: World,
    changed: bool,
) -> Result<RunningService<RoleClient, ()>, std::io::Error> {
    // client <-> relay <-> server: a crash drops the relay's ends, so the
    // client sees its transport close at once, as with a dead process.
    let (client_io, mut relay_client) = tokio::io::duplex(64 * 1024);
    let (mut relay_server, server_io) = tokio::io::duplex(64 * 1024);
    let die = Arc::new(Notify::new());
    let server = Server {
        world,
        die: die.clone(),
        changed,
    };
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    tokio::spawn(async move {
        tokio::select! {
            // A crash outruns the answer the server is about to write.
            biased;
            () = die.notified() => {}
            _ = tokio::io::copy_bidirectional(&mut relay_client, &mut relay_server) => {}
        }
    });
    ().serve(client_io)
        .await
        .map_err(|error| std::io::Error::other(error.to_string()))
}

/// A client of `world` (restarted with `changed` after its first server
/// dies), trusted or not, with a 1-second timeout.
async fn client(world: &World, trust: Trust, changed_after_restart: bool) -> ReplaySafeClient {
    let starts = Arc::new(AtomicUsize::new(0));
    let world = world.clone();
    ReplaySafeClient::builder()
        .trust(trust)
        .call_timeout(Duration::from_secs(1))
        .in_progress_wait(Duration::from_secs(10))
        .connect(move || {
            let first = starts.fetch_add(1, Ordering::SeqCst) == 0;
            connect(world.clone(), changed_after_restart && !first)
        })
        .await
        .unwrap()
}

fn text(outcome: Outcome) -> (String, u32) {
    let done = outcome.completed().expect("the call completed");
    let text = serde_json::to_value(&done.result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    (text, done.attempts)
}

fn lost(outcome: Outcome) -> mcp_hints::client::DeliveryUnknown {
    match outcome {
        Outcome::DeliveryUnknown(lost) => lost,
        Outcome::Completed(done) => panic!("expected delivery unknown, got {:?}", done.result),
    }
}

fn append(text: &str) -> ToolCall {
    ToolCall::new("append").argument("text", json!(text))
}

#[tokio::test(start_paused = true)]
async fn a_call_that_succeeds_is_sent_once() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    assert_eq!(
        text(client.call_tool(append("a")).await.unwrap()),
        ("append a #1".to_owned(), 1)
    );
    assert_eq!(client.tools().await.tools.len(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_lost_non_idempotent_write_runs_at_most_once_and_is_not_resent() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    world.slow.store(1, Ordering::SeqCst);
    let lost = lost(client.call_tool(append("a")).await.unwrap());
    assert_eq!(world.runs("append"), 1);
    assert_eq!(lost.attempts, 1);
    assert_eq!(lost.tool, "append");
    assert_eq!(lost.arguments["text"], "a");
    assert!(matches!(lost.last_error, Lost::Timeout(timeout) if timeout == Duration::from_secs(1)));
    assert_eq!(lost.verdict.decision, Decision::ReadBackFirst);
    assert_eq!(
        lost.to_string(),
        "delivery of `append` is unknown after 1 attempt (no response within 1s): it is not \
         resent; destructiveHint is false (declared) but idempotentHint is false (declared): the \
         write only adds, so a resend duplicates it"
    );
}

#[tokio::test(start_paused = true)]
async fn lost_reads_and_idempotent_writes_are_resent_with_a_new_request() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    world.slow.store(1, Ordering::SeqCst);
    assert_eq!(
        text(client.call_tool(ToolCall::new("read")).await.unwrap()),
        ("read #2".to_owned(), 2)
    );
    // A resend is a new request: a new JSON-RPC id (spec 2026-07-28).
    let ids = world.read_ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    world.slow.store(2, Ordering::SeqCst);
    let set = ToolCall::new("set").argument("text", json!("x"));
    assert_eq!(
        text(client.call_tool(set).await.unwrap()),
        ("set x #3".to_owned(), 3)
    );
}

#[tokio::test(start_paused = true)]
async fn asserted_hints_decide_resends_in_place_of_the_servers() {
    // The operator knows better than the server: `read` writes after all,
    // and `append` is idempotent.
    let world = World::default();
    let serving = world.clone();
    let client = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .call_timeout(Duration::from_secs(1))
        .hints(|tool| {
            let mut hints = tool.hints;
            match tool.name.as_str() {
                "read" => {
                    hints.assert(Hint::ReadOnly, false);
                    hints.assert(Hint::Idempotent, false);
                }
                "append" => hints.assert(Hint::Idempotent, true),
                _ => {}
            }
            hints
        })
        .connect(move || connect(serving.clone(), false))
        .await
        .unwrap();
    let listed = client.tools().await;
    let read = listed.get("read").unwrap().hints.get(Hint::ReadOnly);
    assert_eq!((read.value, read.provenance), (false, Provenance::Asserted));

    world.slow.store(1, Ordering::SeqCst);
    let lost = lost(client.call_tool(ToolCall::new("read")).await.unwrap());
    assert_eq!(
        (lost.attempts, world.read_ids.lock().unwrap().len()),
        (1, 1)
    );
    assert!(
        lost.verdict
            .reason
            .contains("idempotentHint is false (asserted)"),
        "{}",
        lost.verdict.reason
    );

    world.slow.store(1, Ordering::SeqCst);
    let done = client.call_tool(append("a")).await.unwrap();
    assert_eq!(text(done), ("append a #2".to_owned(), 2));
    assert_eq!(world.runs("append"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_lost_keyed_write_is_resent_with_its_key_and_runs_once() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    world.slow.store(1, Ordering::SeqCst);
    let call = ToolCall::new("append_keyed").argument("text", json!("a"));
    let outcome = client.call_tool(call).await.unwrap();
    let done = outcome.completed().unwrap();
    assert_eq!(world.runs("append_keyed"), 1);
    // The first attempt timed out; the resend found it in progress, asked
    // again until it was done, and received its recorded result.
    assert_eq!(done.attempts, 2);
    assert!(done.asks >= 1, "{}", done.asks);
    assert!(done.replayed());
    let key = done.idempotency_key.unwrap();
    assert_eq!(uuid_version(&key), 4);
}

fn uuid_version(key: &str) -> usize {
    // xxxxxxxx-xxxx-Mxxx-...: M is the version.
    key.chars().nth(14).unwrap().to_digit(16).unwrap() as usize
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_server_is_never_resent_to_whatever_it_declares() {
    let world = World::default();
    let client = client(&world, Trust::Untrusted, false).await;
    for call in [
        ToolCall::new("read"),
        ToolCall::new("set").argument("text", json!("x")),
        ToolCall::new("append_keyed").argument("text", json!("a")),
    ] {
        world.slow.store(1, Ordering::SeqCst);
        let lost = lost(client.call_tool(call).await.unwrap());
        assert_eq!(lost.attempts, 1);
        assert!(
            lost.verdict.reason.contains("not trusted"),
            "{}",
            lost.verdict.reason
        );
    }
    assert_eq!(
        (
            world.runs("read"),
            world.runs("set"),
            world.runs("append_keyed")
        ),
        (1, 1, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_servers_in_progress_answer_is_not_retried() {
    let world = World::default();
    let client = client(&world, Trust::Untrusted, false).await;
    let call = || {
        ToolCall::new("append_keyed")
            .argument("text", json!("a"))
            .idempotency_key("k")
    };
    world.slow.store(1, Ordering::SeqCst);
    lost(client.call_tool(call()).await.unwrap());
    // The first still runs; the server says so, but its word decides no
    // resend.
    let error = client.call_tool(call()).await.unwrap_err();
    let CallError::Rejected {
        error, attempts, ..
    } = error
    else {
        panic!("expected a refusal, got {error:?}");
    };
    assert_eq!((error.code.0, attempts), (codes::KEY_IN_PROGRESS, 1));
    assert_eq!(world.runs("append_keyed"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_servers_retry_after_is_kept_within_the_clients_wait() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    let started = tokio::time::Instant::now();
    let call = ToolCall::new("busy").argument("text", json!("a"));
    let error = client.call_tool(call).await.unwrap_err();
    // Asked again for in_progress_wait (10 s here), not for the day the
    // server asked for.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_secs(12),
        "{waited:?}"
    );
    let CallError::Rejected {
        error, attempts, ..
    } = error
    else {
        panic!("expected a refusal, got {error:?}");
    };
    assert_eq!((error.code.0, attempts), (codes::KEY_IN_PROGRESS, 0));
}

#[tokio::test(start_paused = true)]
async fn kept_definitions_are_the_listed_tools_whole() {
    let world = World::default();
    let connection = connect(world.clone(), false).await.unwrap();
    let listed = connection.peer().list_all_tools().await.unwrap();
    let client = ReplaySafeClient::builder()
        .keep_definitions(true)
        .serve(connection)
        .await
        .unwrap();
    let kept: Vec<serde_json::Value> = client
        .tools()
        .await
        .tools
        .iter()
        .map(|tool| serde_json::Value::Object(tool.definition.clone().unwrap()))
        .collect();
    let served: Vec<serde_json::Value> = listed
        .iter()
        .map(|tool| serde_json::to_value(tool).unwrap())
        .collect();
    assert_eq!(kept, served);
    // The list a refresh collects, returned, keeps them too.
    let refreshed = client.refresh_tools().await.unwrap();
    assert_eq!(
        refreshed.tools[0].definition.as_ref().unwrap()["name"],
        served[0]["name"]
    );

    // Not kept unless asked for.
    let plain = ReplaySafeClient::builder()
        .serve(connect(world, false).await.unwrap())
        .await
        .unwrap();
    assert!(
        plain
            .tools()
            .await
            .tools
            .iter()
            .all(|tool| tool.definition.is_none())
    );
}

#[tokio::test(start_paused = true)]
async fn attempts_are_bounded() {
    let world = World::default();
    let client = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .call_timeout(Duration::from_secs(1))
        .max_attempts(4)
        .serve(connect(world.clone(), false).await.unwrap())
        .await
        .unwrap();
    world.slow.store(10, Ordering::SeqCst);
    let lost = lost(client.call_tool(ToolCall::new("read")).await.unwrap());
    assert_eq!((lost.attempts, world.runs("read")), (4, 4));
    assert_eq!(lost.stopped, "all 4 attempts were made");
}

#[tokio::test(start_paused = true)]
async fn a_spent_retry_budget_gives_delivery_unknown_not_a_resend() {
    let world = World::default();
    // No resends per second beyond 0 % of the calls made.
    let budget = tower::retry::budget::TpsBudget::new(Duration::from_secs(10), 0, 0.0);
    let client = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .call_timeout(Duration::from_secs(1))
        .retry_budget(budget)
        .serve(connect(world.clone(), false).await.unwrap())
        .await
        .unwrap();
    world.slow.store(1, Ordering::SeqCst);
    let lost = lost(client.call_tool(ToolCall::new("read")).await.unwrap());
    assert_eq!((lost.attempts, world.runs("read")), (1, 1));
    assert_eq!(lost.stopped, "the session's retry budget is spent");
}

#[tokio::test(start_paused = true)]
async fn the_budget_is_shared_by_the_whole_session() {
    let world = World::default();
    // 20 % of the calls may be resent: 10 calls earn 2 resends.
    let budget = tower::retry::budget::TpsBudget::new(Duration::from_secs(10), 0, 0.2);
    let client = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .call_timeout(Duration::from_secs(1))
        .retry_budget(budget)
        .serve(connect(world.clone(), false).await.unwrap())
        .await
        .unwrap();
    for _ in 0..10 {
        client.call_tool(ToolCall::new("read")).await.unwrap();
    }
    world.slow.store(10, Ordering::SeqCst);
    // Eleven calls deposited 2.2 resends: this call used two of them.
    let first = lost(client.call_tool(ToolCall::new("read")).await.unwrap());
    assert_eq!(first.stopped, "all 3 attempts were made");
    assert_eq!(first.attempts, 3);
    // 0.4 is left, with the next call's deposit: not enough for a resend.
    let second = lost(client.call_tool(ToolCall::new("read")).await.unwrap());
    assert_eq!(second.stopped, "the session's retry budget is spent");
    assert_eq!(second.attempts, 1);
    assert_eq!(world.runs("read"), 10 + 3 + 1);
}

#[tokio::test(start_paused = true)]
async fn unknown_tools_are_refused_without_a_call() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    let error = client.call_tool(ToolCall::new("nope")).await.unwrap_err();
    assert!(matches!(error, CallError::UnknownTool { .. }));
    assert_eq!(
        error.to_string(),
        "`nope` is not in the server's tools/list: unknown tool"
    );
}

#[tokio::test(start_paused = true)]
async fn a_json_rpc_error_is_a_known_answer() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    let error = client.call_tool(ToolCall::new("refuse")).await.unwrap_err();
    let CallError::Rejected {
        error, attempts, ..
    } = error
    else {
        panic!("expected a refusal, got {error:?}");
    };
    assert_eq!(
        (error.message.as_ref(), attempts),
        ("refused on purpose", 1)
    );
}

#[tokio::test(start_paused = true)]
async fn the_same_key_with_other_arguments_is_refused() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    let call = |text: &str| {
        ToolCall::new("append_keyed")
            .argument("text", json!(text))
            .idempotency_key("k-1")
    };
    client
        .call_tool(call("a"))
        .await
        .unwrap()
        .completed()
        .unwrap();
    let replay = client
        .call_tool(call("a"))
        .await
        .unwrap()
        .completed()
        .unwrap();
    assert!(replay.replayed());
    let error = client.call_tool(call("b")).await.unwrap_err();
    let CallError::Rejected { error, .. } = error else {
        panic!("expected a refusal, got {error:?}");
    };
    assert_eq!(error.code.0, codes::KEY_CONFLICT);
    assert_eq!(world.runs("append_keyed"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_is_kept_as_in_doubt() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    world.slow.store(1, Ordering::SeqCst);
    let call = client.call_tool(append("a"));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err()
    );
    let in_doubt = client.take_in_doubt();
    assert_eq!(in_doubt.len(), 1);
    assert_eq!(in_doubt[0].tool, "append");
    assert!(matches!(in_doubt[0].last_error, Lost::Dropped));
    assert!(client.take_in_doubt().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_call_dropped_between_attempts_is_kept_as_in_doubt() {
    let world = World::default();
    let client = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .call_timeout(Duration::from_secs(1))
        .backoff(backon::ExponentialBuilder::default().with_min_delay(Duration::from_secs(5)))
        .serve(connect(world.clone(), false).await.unwrap())
        .await
        .unwrap();
    world.slow.store(1, Ordering::SeqCst);
    // Lost after 1 s, then pausing 5 s before the resend: dropped at 2 s.
    let call = client.call_tool(ToolCall::new("set").argument("text", json!("x")));
    assert!(
        tokio::time::timeout(Duration::from_secs(2), call)
            .await
            .is_err()
    );
    let in_doubt = client.take_in_doubt();
    assert_eq!(in_doubt.len(), 1);
    assert_eq!(
        (in_doubt[0].tool.as_str(), in_doubt[0].attempts),
        ("set", 1)
    );
    // A call that ends with an outcome leaves nothing in doubt.
    client.call_tool(ToolCall::new("read")).await.unwrap();
    assert!(client.take_in_doubt().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_dead_server_is_started_again_before_a_resend() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, false).await;
    world.deadly.store(1, Ordering::SeqCst);
    let set = ToolCall::new("set").argument("text", json!("x"));
    assert_eq!(
        text(client.call_tool(set).await.unwrap()),
        ("set x #2".to_owned(), 2)
    );
    assert_eq!(client.restarts().await, 1);

    // A non-idempotent write that died with its server is not resent, and
    // the next call finds a server started again.
    world.deadly.store(1, Ordering::SeqCst);
    let lost = lost(client.call_tool(append("a")).await.unwrap());
    assert!(
        matches!(lost.last_error, Lost::TransportClosed),
        "{:?}",
        lost.last_error
    );
    assert_eq!(world.runs("append"), 1);
    assert_eq!(
        text(client.call_tool(append("b")).await.unwrap()),
        ("append b #2".to_owned(), 1)
    );
    assert_eq!(client.restarts().await, 2);
}

#[tokio::test(start_paused = true)]
async fn a_keyed_call_is_resent_across_a_restart_only_when_keys_survive_it() {
    let call = || ToolCall::new("append_keyed").argument("text", json!("a"));
    // By default the client cannot know that the restarted server kept its
    // records, so the call that reached the old process is not resent.
    let world = World::default();
    let forgetful = client(&world, Trust::Trusted, false).await;
    world.deadly.store(1, Ordering::SeqCst);
    let lost = lost(forgetful.call_tool(call()).await.unwrap());
    assert_eq!(world.runs("append_keyed"), 1);
    assert!(
        lost.stopped
            .starts_with("the server was started again, and its idempotency records"),
        "{}",
        lost.stopped
    );

    // This world's records outlive its servers (one Idempotency for all).
    let world = World::default();
    let starts = Arc::new(AtomicUsize::new(0));
    let durable = {
        let world = world.clone();
        ReplaySafeClient::builder()
            .trust(Trust::Trusted)
            .call_timeout(Duration::from_secs(1))
            .in_progress_wait(Duration::from_secs(30))
            .keys_survive_restarts(true)
            .connect(move || {
                starts.fetch_add(1, Ordering::SeqCst);
                connect(world.clone(), false)
            })
            .await
            .unwrap()
    };
    world.deadly.store(1, Ordering::SeqCst);
    let outcome = durable.call_tool(call()).await.unwrap();
    let done = outcome.completed().expect("resent to the restarted server");
    assert_eq!(durable.restarts().await, 1);
    assert_eq!(world.runs("append_keyed"), 1);
    assert!(done.replayed());
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_changed_across_a_restart_is_not_resent() {
    let world = World::default();
    let client = client(&world, Trust::Trusted, true).await;
    world.deadly.store(1, Ordering::SeqCst);
    let lost = lost(client.call_tool(ToolCall::new("read")).await.unwrap());
    assert_eq!(world.runs("read"), 1);
    assert_eq!(
        lost.stopped,
        "after the server restarted, `read` is defined differently (description), so the call is \
         not resent"
    );
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct Renamed {
    #[allow(dead_code)]
    request_id: String,
    #[allow(dead_code)]
    cents: u64,
}

/// A server with a keyed tool whose argument struct renames the key away
/// (the macro cannot see it), and an unkeyed one.
macro_rules! misbuilt_server {
    ($server:ident) => {
        #[derive(Clone, Default)]
        struct $server {
            idempotency: Idempotency,
        }

        impl IdempotentServer for $server {
            fn idempotency(&self) -> &Idempotency {
                &self.idempotency
            }
        }

        #[tool_router(closed_world)]
        impl $server {
            /// Keyed by a name the wire does not use (`requestId` there).
            #[tool(additive, idempotency_key = "request_id")]
            async fn pay(&self, Parameters(Renamed { .. }): Parameters<Renamed>) -> String {
                "paid".to_owned()
            }

            /// Unkeyed.
            #[tool(read_only)]
            async fn balance(&self) -> String {
                "0".to_owned()
            }
        }
    };
}

// Served as `#[tool_handler]` makes it: the server refuses to start,
// saying what to add.
misbuilt_server!(Misbuilt);

#[tool_handler]
impl ServerHandler for Misbuilt {}

const MISBUILT: &str = "the server is built wrong: `#[tool(idempotency_key = \"request_id\")]` on \
                        `pay`: its input schema has no property `request_id` (its properties: \
                        `cents`, `requestId`); add `request_id: String` to the tool's argument \
                        struct (named so on the wire: mind serde renames), documented so that \
                        clients send the same value on a resend";

#[tokio::test]
async fn a_keyed_tool_built_wrong_stops_the_server_before_its_first_call() {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(Misbuilt::default().serve(server_io));
    let refused = ().serve(client_io).await.unwrap_err();
    assert!(
        refused.to_string().contains(MISBUILT),
        "the client is told why: {refused}"
    );
    let stopped = server.await.unwrap().map(|_| ()).unwrap_err();
    assert!(
        stopped.to_string().contains(MISBUILT),
        "`serve` returns why: {stopped}"
    );

    // A 2026-07-28 client that starts with `server/discover` is refused
    // the same way.
    let tools = Misbuilt::tool_router().list_all();
    let error = mcp_hints::__private::keyed_tools_built_right(&tools).unwrap_err();
    assert_eq!(
        error.code,
        mcp_hints::rmcp::model::ErrorCode::INTERNAL_ERROR
    );
    assert_eq!(error.message, MISBUILT);
}

// The same on a server with its own `initialize`, which skips the check:
// its calls are refused, the rest still serves.
misbuilt_server!(MisbuiltOwnInitialize);

#[tool_handler]
impl ServerHandler for MisbuiltOwnInitialize {
    async fn initialize(
        &self,
        request: mcp_hints::rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<mcp_hints::rmcp::model::InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }
}

#[tokio::test(start_paused = true)]
async fn a_keyed_tool_built_wrong_behind_an_own_initialize_is_refused_and_the_rest_still_serves() {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = MisbuiltOwnInitialize::default().serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .serve(().serve(client_io).await.unwrap())
        .await
        .unwrap();
    assert_eq!(client.tools().await.tools.len(), 2);
    let error = client
        .call_tool(
            ToolCall::new("pay")
                .argument("requestId", json!("k"))
                .argument("cents", json!(1)),
        )
        .await
        .unwrap_err();
    let CallError::Rejected { error, .. } = error else {
        panic!("expected a refusal, got {error:?}");
    };
    assert_eq!(
        error.code,
        mcp_hints::rmcp::model::ErrorCode::INTERNAL_ERROR
    );
    assert_eq!(error.message, MISBUILT);
    let balance = client.call_tool(ToolCall::new("balance")).await.unwrap();
    assert_eq!(text(balance), ("0".to_owned(), 1));
}

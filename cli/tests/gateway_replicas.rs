//! Two `mcp-hints gateway serve` replicas as real processes, each over a
//! config of its own that shares `[state] redis` (a real `redis-server` on
//! a free loopback port), in front of ONE `notes --http` upstream whose
//! `--store` is the same Redis; driven by rmcp's client and the runtime's
//! `ReplaySafeClient` over streamable HTTP. A keyed `add_note` resent to
//! the other replica, after a timeout or after the first replica was
//! killed mid-call, runs once: `list_notes` reads the one notebook back.
//! `gateway check` says whether the `[state] redis` answers. A session a
//! 2026-07-28 client names in `_meta["mcp-hints/session"]` is one history
//! in that Redis, so a rule that looks back at B sees a call made at A.
//!
//! Why one HTTP upstream, not a stdio `notes --store redis://...` under
//! each replica: the claim is about the notes, not about a record in
//! Redis. With one upstream there is one notebook, so `list_notes` at
//! either replica reads back what every call did; with a stdio server per
//! replica each would keep a notebook of its own in memory, and the one
//! behind B would answer A's key with a recorded result while holding no
//! note at all, so nothing could be read back. One upstream is also what
//! lets both replicas run the very same config apart from their logs
//! (fault-proxy, when a test needs a slow answer, sits in front of it for
//! both), and a replica killed with SIGKILL leaves no upstream process of
//! its own behind.
//!
//! The killed replica's client is the runtime's `ReplaySafeClient`, one per
//! replica: it cannot fail over by itself here (a later attempt at the dead
//! replica counts as lost, not as never sent, so it never connects anew),
//! so the caller resends what its `DeliveryUnknown` hands back, arguments
//! and key, to the other replica.

mod support;

// The runtime's real `redis-server` (installed from Debian's packages when
// missing), one file for every crate's tests; this file uses part of it.
#[allow(dead_code, reason = "each test binary uses part of it")]
#[path = "../../runtime/tests/support/redis.rs"]
mod redis;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use mcp_hints::client::{Outcome, ReplaySafeClient, ToolCall};
use mcp_hints::policy::{Decision, Trust};
use redis::RedisServer;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use support::{SETTLE, notes_server, wait_for};

const TOKEN: &str = "replicas-alice-token-7d2e";

/// How long a process may take to say where it serves (the first test to
/// start builds `notes` and `fault-proxy` before, outside this bound).
const START: Duration = Duration::from_secs(60);

/// How long one request of a test's own clients may take.
const REQUEST: Duration = Duration::from_secs(20);

/// A scratch directory of its own for each test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("gateway-replicas")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A child process and every line of its stderr; killed (SIGKILL) and
/// reaped when dropped.
struct Process {
    name: &'static str,
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Process {
    /// Starts `command` and waits, [`START`] at most, for a stderr line that
    /// starts with `announcement`; returns the process and the rest of
    /// that line.
    fn start(name: &'static str, mut command: Command, announcement: &str) -> (Process, String) {
        let mut child = command
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {name}: {error}"));
        let pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (announced, announcements) = mpsc::channel();
        {
            let stderr = stderr.clone();
            let announcement = announcement.to_owned();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { return };
                    if let Some(rest) = line.strip_prefix(&announcement) {
                        let _ = announced.send(rest.trim_end().to_owned());
                    }
                    stderr.lock().unwrap().push(line);
                }
            });
        }
        let process = Process {
            name,
            child,
            stderr,
        };
        match announcements.recv_timeout(START) {
            Ok(rest) => (process, rest),
            Err(_) => panic!(
                "{name} did not say `{announcement}` within {START:?}; stderr:\n{}",
                process.stderr()
            ),
        }
    }

    fn stderr(&self) -> String {
        format!(
            "--- {} ---\n{}",
            self.name,
            self.stderr.lock().unwrap().join("\n")
        )
    }

    /// SIGKILL, and waits for it to exit.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A gateway replica: its process, its MCP URL and its audit log.
struct Replica {
    process: Process,
    url: String,
    log: PathBuf,
}

impl Replica {
    /// Writes the replica's config to DIR/NAME.toml (its log DIR/NAME.jsonl),
    /// `extra` (asserts and rules) at its end, and serves it; waits until
    /// its upstream's tools are served.
    fn start(dir: &Path, name: &'static str, redis: &str, upstream: &str, extra: &str) -> Replica {
        let log = dir.join(format!("{name}.jsonl"));
        // The arguments are logged raw, so that each log shows the key.
        let config = format!(
            r#"[listen]
http = "127.0.0.1:0"

[[client]]
principal = "alice"
token = "{TOKEN}"

[log]
path = {log:?}
raw_arguments = true

[state]
redis = "{redis}"

[[upstream]]
name = "notes"
url = "{upstream}"
trusted = true
call_timeout_secs = 30

{extra}"#
        );
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, config).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-hints"));
        command.args(["gateway", "serve", "--config"]).arg(&path);
        let (process, url) = Process::start(
            name,
            command,
            "gateway: serving MCP over streamable HTTP at ",
        );
        let served = wait_for(
            START,
            || process.stderr(),
            |stderr| stderr.contains(" (0 unavailable)"),
        );
        assert!(
            served.contains(" (0 unavailable)"),
            "replica {name} does not serve the notes upstream's tools:\n{served}"
        );
        Replica { process, url, log }
    }

    /// The audit log's entries ([`support::log_entries`]: one still being
    /// written is left, and so are checkpoints).
    fn entries(&self) -> Vec<Value> {
        support::log_entries(&self.log)
    }

    /// The `(phase, outcome, attempts, arguments)` of the log's entries
    /// for `tool`, once there are `count`, [`SETTLE`] at most.
    fn calls_of(&self, tool: &str, count: usize) -> Vec<(String, Value, Value, Value)> {
        let of_tool = |entries: Vec<Value>| -> Vec<(String, Value, Value, Value)> {
            entries
                .into_iter()
                .filter(|entry| entry["tool"] == tool)
                .map(|entry| {
                    (
                        entry["phase"].as_str().unwrap().to_owned(),
                        entry["outcome"].clone(),
                        entry["attempts"].clone(),
                        entry["arguments"].clone(),
                    )
                })
                .collect()
        };
        wait_for(
            SETTLE,
            || of_tool(self.entries()),
            |calls| calls.len() >= count,
        )
    }
}

/// One Redis, one `notes --http` on it (behind fault-proxy with `fault`,
/// when given), and replicas A and B in front of it. Fields drop in order:
/// the replicas first, the Redis last.
struct Rig {
    a: Replica,
    b: Replica,
    proxy: Option<Process>,
    notes: Process,
    _redis: RedisServer,
    fault_log: PathBuf,
}

impl Rig {
    fn start(test: &str, fault: Option<&str>) -> Rig {
        Rig::with(test, fault, "")
    }

    /// A rig whose replicas' configs both end with `extra`.
    fn with(test: &str, fault: Option<&str>, extra: &str) -> Rig {
        let dir = scratch(test);
        let redis = RedisServer::start();
        let mut command = Command::new(notes_server());
        command
            .args(["--http", "127.0.0.1:0", "--store"])
            .arg(redis.url());
        let (notes, notes_url) = Process::start(
            "notes",
            command,
            "notes: serving MCP over streamable HTTP at ",
        );
        let fault_log = dir.join("faults.jsonl");
        let (proxy, upstream) = match fault {
            Some(fault) => {
                let mut command = Command::new(support::faults_binary("fault-proxy"));
                command
                    .args(["--fault", fault, "--log"])
                    .arg(&fault_log)
                    .args(["http", "--listen", "127.0.0.1:0", "--upstream", &notes_url]);
                let (proxy, address) =
                    Process::start("fault-proxy", command, "fault-proxy: listening on ");
                (Some(proxy), format!("{address}/mcp"))
            }
            None => (None, notes_url),
        };
        let a = Replica::start(&dir, "a", &redis.url(), &upstream, extra);
        let b = Replica::start(&dir, "b", &redis.url(), &upstream, extra);
        Rig {
            a,
            b,
            proxy,
            notes,
            _redis: redis,
            fault_log,
        }
    }

    /// Every process's stderr, for a failure's message.
    fn stderr(&self) -> String {
        let mut all = vec![
            self.a.process.stderr(),
            self.b.process.stderr(),
            self.notes.stderr(),
        ];
        all.extend(self.proxy.as_ref().map(Process::stderr));
        all.join("\n")
    }

    /// The faults fault-proxy fired, one JSON object each.
    fn faults(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.fault_log).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// A multi-thread runtime for one test's clients, with rustls's `ring`
/// provider installed for their reqwest clients (as the command installs
/// it; the crate builds rustls without a default provider).
fn runtime() -> tokio::runtime::Runtime {
    // Another test of this binary may have installed it first.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `future`, or a panic naming `what` after `bound`.
async fn within<T>(what: &str, bound: Duration, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(bound, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {bound:?}"))
}

/// An rmcp client of the replica at `url`, with alice's token.
async fn connect(
    url: &str,
) -> Result<RunningService<RoleClient, ()>, rmcp::service::ClientInitializeError> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    config.auth_header = Some(TOKEN.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
}

async fn client(url: &str) -> RunningService<RoleClient, ()> {
    within("connecting", REQUEST, connect(url))
        .await
        .unwrap_or_else(|error| panic!("cannot connect to {url}: {error}"))
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

/// Calls `notes__add_note` with `request_id` and `text`.
async fn add_note(
    client: &RunningService<RoleClient, ()>,
    request_id: &str,
    text: &str,
) -> CallToolResult {
    let params = CallToolRequestParams::new("notes__add_note")
        .with_arguments(object(json!({ "request_id": request_id, "text": text })));
    within("add_note", REQUEST, client.call_tool(params))
        .await
        .unwrap_or_else(|error| panic!("add_note failed: {error}"))
}

/// Every note, as `notes__list_notes` returns them.
async fn notes(client: &RunningService<RoleClient, ()>) -> Value {
    let listed = within(
        "list_notes",
        REQUEST,
        client.call_tool(CallToolRequestParams::new("notes__list_notes")),
    )
    .await
    .unwrap_or_else(|error| panic!("list_notes failed: {error}"));
    assert_eq!(listed.is_error, Some(false), "{listed:?}");
    listed.structured_content.expect("list_notes is structured")["notes"].clone()
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result:?}"))
        .to_owned()
}

/// Whether a result is one the upstream recorded earlier, not a new run.
fn replayed(result: &CallToolResult) -> bool {
    result.meta.as_ref().is_some_and(|meta| {
        meta.0
            .contains_key(mcp_hints::idempotency::REPLAYED_META_KEY)
    })
}

#[test]
fn a_keyed_call_resent_to_another_replica_runs_once() {
    let rig = Rig::start("resent", None);
    runtime().block_on(async {
        let (at_a, at_b) = tokio::join!(client(&rig.a.url), client(&rig.b.url));
        let first = add_note(&at_a, "resent-1", "buy milk").await;
        assert_eq!(first.is_error, Some(false), "{first:?}\n{}", rig.stderr());
        // The client gave up on A (a timeout, say) and fails over to B with
        // the very same call.
        let again = add_note(&at_b, "resent-1", "buy milk").await;
        assert_eq!(again.is_error, Some(false), "{again:?}\n{}", rig.stderr());
        assert_eq!(text(&again), text(&first), "B answers what A's call did");
        assert!(!replayed(&first), "{first:?}");
        assert!(
            replayed(&again),
            "the upstream replayed its record: {again:?}"
        );

        for reader in [&at_a, &at_b] {
            assert_eq!(
                notes(reader).await,
                json!([{ "id": 1, "text": "buy milk" }]),
                "the note is there once\n{}",
                rig.stderr()
            );
        }
        // A new key at B is a new note in the same notebook: B's resend was
        // answered from its key's record, not refused for want of a way in.
        let other = add_note(&at_b, "resent-2", "buy bread").await;
        assert_eq!(other.is_error, Some(false), "{other:?}");
        assert_eq!(notes(&at_a).await.as_array().map(Vec::len), Some(2));
    });

    let arguments = json!({ "request_id": "resent-1", "text": "buy milk" });
    for replica in [&rig.a, &rig.b] {
        let calls = replica.calls_of("add_note", 2);
        let first_two = &calls[..2.min(calls.len())];
        assert_eq!(
            first_two,
            [
                (
                    "decided".to_owned(),
                    Value::Null,
                    Value::Null,
                    arguments.clone()
                ),
                (
                    "finished".to_owned(),
                    json!("completed"),
                    json!(1),
                    arguments.clone()
                ),
            ],
            "{}",
            replica.process.stderr()
        );
    }
}

/// The runtime's replay-safe client of the replica at `url`, which the
/// test trusts (as an operator vets its own gateway), making one attempt
/// per call with `timeout`.
async fn replay_safe(url: &str, timeout: Duration) -> ReplaySafeClient {
    let url = url.to_owned();
    let built = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .call_timeout(timeout)
        .max_attempts(1)
        .connect(move || {
            let url = url.clone();
            async move { connect(&url).await }
        });
    within("the replay-safe client", REQUEST, built)
        .await
        .unwrap_or_else(|error| panic!("cannot connect: {error}"))
}

#[test]
fn a_keyed_call_in_flight_at_a_killed_replica_is_resent_to_the_other_and_runs_once() {
    // fault-proxy holds the upstream's answer to the first add_note (A's)
    // for 15 s: the note is added, and A waits for the answer while it is
    // killed. B's resend is the second add_note, answered at once.
    let mut rig = Rig::start("killed", Some("delay-response=15000:add_note@1"));
    let runtime = runtime();
    // One attempt: a resend at a replica that is gone would only be
    // refused (and is reported as lost, not as never sent: rmcp's HTTP
    // client keeps the refused connection's cause out of its error's
    // chain), so the client cannot fail over by itself. The caller does,
    // with what the client hands back. rmcp's HTTP client does not fail a
    // request whose connection died after it was sent: the client's
    // timeout (4 s, well after the kill) is what ends it.
    let at_a = runtime.block_on(replay_safe(&rig.a.url, Duration::from_secs(4)));
    let call = runtime.spawn(async move {
        let call = ToolCall::new("notes__add_note")
            .argument("text", json!("call the plumber"))
            .idempotency_key("killed-1");
        let outcome = at_a.call_tool(call).await;
        (outcome, Instant::now())
    });

    // The call is in flight at A: A logged it before forwarding it, and
    // the upstream's answer to it is held.
    let fired = wait_for(SETTLE, || rig.faults(), |fired| !fired.is_empty());
    assert_eq!(fired.len(), 1, "{fired:?}\n{}", rig.stderr());
    assert_eq!(fired[0]["tool"], "add_note", "{fired:?}");
    let logged = rig.a.calls_of("add_note", 1);
    assert_eq!(logged.len(), 1, "{logged:?}\n{}", rig.stderr());
    let killed = Instant::now();
    rig.a.process.kill();

    let (outcome, ended) = runtime
        .block_on(within("the call at A", REQUEST, call))
        .unwrap();
    let lost = match outcome {
        Ok(Outcome::DeliveryUnknown(lost)) => lost,
        other => panic!(
            "expected delivery unknown at A, got {other:?}\n{}",
            rig.stderr()
        ),
    };
    assert_eq!(lost.attempts, 1, "{lost}");
    assert!(ended > killed, "A was killed while the call waited: {lost}");
    assert_eq!(lost.verdict.decision, Decision::Resend, "{lost}");
    assert_eq!(lost.idempotency_key.as_deref(), Some("killed-1"));
    let arguments = json!({ "request_id": "killed-1", "text": "call the plumber" });
    assert_eq!(Value::Object(lost.arguments.clone()), arguments);

    // Resent to B: the same arguments, the same key.
    let completed = runtime.block_on(async {
        let at_b = replay_safe(&rig.b.url, REQUEST).await;
        let resend = ToolCall::new("notes__add_note")
            .arguments(lost.arguments.clone())
            .idempotency_key(lost.idempotency_key.clone().unwrap());
        match within("the resend at B", REQUEST, at_b.call_tool(resend)).await {
            Ok(Outcome::Completed(completed)) => completed,
            other => panic!(
                "expected the resend completed at B, got {other:?}\n{}",
                rig.stderr()
            ),
        }
    });
    assert_eq!(
        completed.result.is_error,
        Some(false),
        "{:?}",
        completed.result
    );
    assert_eq!(completed.attempts, 1);
    assert!(
        replayed(&completed.result),
        "B's answer is the record of A's run: {:?}",
        completed.result
    );

    runtime.block_on(async {
        let at_b = client(&rig.b.url).await;
        assert_eq!(
            notes(&at_b).await,
            json!([{ "id": 1, "text": "call the plumber" }]),
            "run once, never twice\n{}",
            rig.stderr()
        );
    });

    // A wrote its decision, never its outcome: it was killed waiting.
    assert_eq!(
        rig.a.calls_of("add_note", 1),
        [(
            "decided".to_owned(),
            Value::Null,
            Value::Null,
            arguments.clone()
        )]
    );
    assert_eq!(
        rig.b.calls_of("add_note", 2),
        [
            (
                "decided".to_owned(),
                Value::Null,
                Value::Null,
                arguments.clone()
            ),
            (
                "finished".to_owned(),
                json!("completed"),
                json!(1),
                arguments
            ),
        ],
        "{}",
        rig.stderr()
    );
    // Only A's call was held: B's went through at once.
    assert_eq!(rig.faults().len(), 1, "{:?}", rig.faults());
}

/// Sends one inline command to the Redis on `port` and returns its first
/// reply line (`+OK`).
fn redis_command(port: u16, command: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(format!("{command}\r\n").as_bytes())
        .unwrap();
    let mut reply = Vec::new();
    let mut byte = [0; 1];
    while !reply.ends_with(b"\r\n") {
        stream.read_exact(&mut byte).unwrap();
        reply.push(byte[0]);
    }
    String::from_utf8(reply).unwrap().trim_end().to_owned()
}

/// Runs `mcp-hints gateway check --config PATH`, [`START`] at most: its
/// exit status, stdout and stderr.
fn check(path: &Path) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["gateway", "check", "--config"])
        .arg(path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcp-hints runs");
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = read(Box::new(child.stdout.take().unwrap()));
    let stderr = read(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + START;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gateway check did not end within {START:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code(),
        stdout.join().unwrap(),
        stderr.join().unwrap(),
    )
}

#[test]
fn gateway_check_says_whether_the_shared_redis_answers_never_showing_its_password() {
    let dir = scratch("check");
    let redis = RedisServer::start();
    let password = "s3cret-redis-pw";
    assert_eq!(
        redis_command(redis.port(), &format!("CONFIG SET requirepass {password}")),
        "+OK"
    );
    let notes = serde_json::to_string(&[notes_server()]).unwrap();
    let config = |name: &str, url: &str| {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!(
                "[listen]\nhttp = \"127.0.0.1:0\"\n\n\
                 [[client]]\nprincipal = \"alice\"\ntoken = \"{TOKEN}\"\n\n\
                 [log]\npath = {log:?}\n\n[state]\nredis = \"{url}\"\n\n\
                 [[upstream]]\nname = \"notes\"\ncommand = {notes}\n",
                log = dir.join(format!("{name}.jsonl")),
            ),
        )
        .unwrap();
        path
    };
    let address = format!("127.0.0.1:{}", redis.port());
    let mut outputs = Vec::new();
    let shared_state_lines = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter(|line| line.contains("shared state"))
            .map(str::to_owned)
            .collect()
    };
    let warning = |address: &str| {
        format!("gateway: warning: the shared state (redis at {address}) does not answer: ")
    };
    let consequence = "; `serve` would start, and refuse the calls a rule guards until it answers";

    let (status, stdout, stderr) = check(&config(
        "answers",
        &format!("redis://:{password}@{address}/"),
    ));
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("notes__add_note"), "{stdout}");
    assert_eq!(
        shared_state_lines(&stderr),
        [format!(
            "gateway check: shared state: redis at {address} answers"
        )],
        "{stderr}"
    );
    outputs.extend([stdout, stderr]);

    // A password Redis refuses: it does not answer, in the Redis client's
    // words (which do not quote the password either). A warning, exit 0,
    // as for the config's warnings: `serve` starts without it.
    let (status, stdout, stderr) = check(&config(
        "refused",
        &format!("redis://:wrong-{password}@{address}/"),
    ));
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("notes__add_note"), "{stdout}");
    let said = shared_state_lines(&stderr);
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].starts_with(&warning(&address)), "{stderr}");
    assert!(said[0].ends_with(consequence), "{stderr}");
    outputs.extend([stdout, stderr]);

    // Nothing listens there.
    let dead = redis::dead_url();
    let dead = dead.trim_start_matches("redis://").trim_end_matches('/');
    let (status, stdout, stderr) = check(&config("dead", &format!("redis://:{password}@{dead}/")));
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    let said = shared_state_lines(&stderr);
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].starts_with(&warning(dead)), "{stderr}");
    assert!(said[0].ends_with(consequence), "{stderr}");
    outputs.extend([stdout, stderr]);

    for output in outputs {
        assert!(!output.contains(password), "{output}");
    }
}

/// A stateless (2026-07-28) `tools/call` of `tool` with `arguments`, and
/// `session` as its `_meta["mcp-hints/session"]` (left out when `None`),
/// POSTed with alice's token to the replica at `url` on a connection of
/// its own: the JSON-RPC answer (a JSON body, or the last message of an
/// event stream).
fn stateless_call(url: &str, tool: &str, arguments: Value, session: Option<Value>) -> Value {
    let address = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(session) = session {
        meta["mcp-hints/session"] = session;
    }
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": tool, "arguments": arguments, "_meta": meta },
    });
    let bearer = format!("Bearer {TOKEN}");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
        ("Connection", "close"),
    ];
    let (status, body) =
        support::KeptAlive::connect(address).send("POST /mcp", &headers, &body.to_string());
    assert_eq!(status, 200, "{body}");
    let message = if body.trim_start().starts_with('{') {
        body.as_str()
    } else {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .rfind(|data| data.starts_with('{'))
            .unwrap_or_else(|| panic!("no message in {body}"))
    };
    serde_json::from_str(message).unwrap_or_else(|error| panic!("{error}: {body}"))
}

/// The `decided` entries of `tool` in `replica`'s log, once there are
/// `count`, [`SETTLE`] at most.
fn decided_of(replica: &Replica, tool: &str, count: usize) -> Vec<Value> {
    wait_for(
        SETTLE,
        || {
            replica
                .entries()
                .into_iter()
                .filter(|entry| entry["tool"] == tool && entry["phase"] == "decided")
                .collect::<Vec<_>>()
        },
        |entries| entries.len() >= count,
    )
}

/// A session a 2026-07-28 client names in `_meta` is one history in the
/// shared Redis: a read at A makes B park the session's write, and only
/// that session's; a name that is no session name is invalid params.
#[test]
fn a_named_sessions_history_is_read_by_every_replica_on_the_shared_redis() {
    let rig = Rig::with("sessions", None, &support::trifecta(1));
    let chat = |name: &str| Some(json!(name));
    let write = json!({ "text": "what the forecast said" });

    let read = stateless_call(
        &rig.a.url,
        "notes__forecast",
        json!({ "city": "Oslo" }),
        chat("chat-7"),
    );
    assert_eq!(read["result"]["isError"], false, "{read}\n{}", rig.stderr());
    let parked = stateless_call(
        &rig.b.url,
        "notes__append_note",
        write.clone(),
        chat("chat-7"),
    );
    assert_eq!(parked["result"]["isError"], true, "{parked}");
    let refusal = parked["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        refusal.contains("was not approved within 1 s, so it expired and was denied"),
        "{refusal}"
    );
    let other = stateless_call(
        &rig.b.url,
        "notes__append_note",
        write.clone(),
        chat("chat-8"),
    );
    assert_eq!(
        other["result"]["isError"],
        false,
        "{other}\n{}",
        rig.stderr()
    );

    for (name, problem) in [(json!(7), "it is a number"), (json!(""), "it is empty")] {
        let answer = stateless_call(&rig.b.url, "notes__append_note", write.clone(), Some(name));
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(r#"`_meta["mcp-hints/session"]` is not a session name"#)
                && message.contains(problem),
            "{message}"
        );
    }

    let read_at_a = decided_of(&rig.a, "forecast", 1);
    assert_eq!(read_at_a.len(), 1, "{read_at_a:#?}");
    let writes_at_b = decided_of(&rig.b, "append_note", 3);
    let decisions: Vec<&str> = writes_at_b
        .iter()
        .map(|entry| entry["decision"].as_str().unwrap())
        .collect();
    // The refused names left no entry: nothing was decided for them.
    assert_eq!(
        decisions,
        ["require_approval", "expired", "allow"],
        "{writes_at_b:#?}"
    );
    assert_eq!(
        writes_at_b[0]["earlier"],
        json!([{ "id": read_at_a[0]["id"], "upstream": "notes", "tool": "forecast" }]),
        "{:#?}",
        writes_at_b[0]
    );
    assert!(
        writes_at_b[0]["rule"]
            .as_str()
            .is_some_and(|rule| rule.contains(" after open_world")),
        "{:#?}",
        writes_at_b[0]
    );
    assert!(
        writes_at_b[2].get("earlier").is_none(),
        "{:#?}",
        writes_at_b[2]
    );
    // Only the chat-8 write reached the notebook.
    let notes = stateless_call(&rig.a.url, "notes__list_notes", json!({}), None);
    assert_eq!(
        notes["result"]["structuredContent"]["notes"],
        json!([{ "id": 1, "text": "what the forecast said" }]),
        "{notes}"
    );
}

/// With `[session] per = "principal"` the names clients give are not
/// read: a principal's calls are one history across replicas, so a new
/// name does not step out of what an earlier call brought in, and a name
/// that is not one is no error.
#[test]
fn per_principal_a_principals_calls_are_one_history_whatever_the_session_named() {
    let extra = format!("{}\n[session]\nper = \"principal\"\n", support::trifecta(1));
    let rig = Rig::with("unnamed", None, &extra);
    let write = json!({ "text": "what the forecast said" });
    let first = stateless_call(&rig.b.url, "notes__append_note", write.clone(), None);
    assert_eq!(
        first["result"]["isError"],
        false,
        "{first}\n{}",
        rig.stderr()
    );
    let read = stateless_call(
        &rig.a.url,
        "notes__forecast",
        json!({ "city": "Oslo" }),
        Some(json!("chat-1")),
    );
    assert_eq!(read["result"]["isError"], false, "{read}");
    for name in [json!("chat-2"), json!(7)] {
        let answer = stateless_call(&rig.b.url, "notes__append_note", write.clone(), Some(name));
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let refusal = answer["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            refusal.contains("was not approved within 1 s, so it expired and was denied"),
            "{refusal}"
        );
    }
    let read_at_a = decided_of(&rig.a, "forecast", 1);
    let writes_at_b = decided_of(&rig.b, "append_note", 5);
    let decisions: Vec<&str> = writes_at_b
        .iter()
        .map(|entry| entry["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        [
            "allow",
            "require_approval",
            "expired",
            "require_approval",
            "expired"
        ],
        "{writes_at_b:#?}"
    );
    assert_eq!(
        writes_at_b[1]["earlier"],
        json!([{ "id": read_at_a[0]["id"], "upstream": "notes", "tool": "forecast" }])
    );
}

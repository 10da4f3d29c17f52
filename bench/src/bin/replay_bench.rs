//! Replay safety, measured side by side in one run on one current-thread
//! tokio runtime, every server in-process over a `tokio::io::duplex` pair
//! with rmcp's client:
//!
//! 1. a keyed `tools/call` (a new key each call, the in-memory store)
//!    against the same call, with the same arguments, to the same tool
//!    unkeyed: the cost of reserving and recording a key (goal: at most
//!    1.2x);
//! 2. a duplicate hit: the same key and arguments again, answered from the
//!    record without running the handler;
//! 3. keyed calls per second on each store: memory, redb (a file in a
//!    temporary directory), Redis (a `redis-server` this program starts on
//!    a free loopback port; skipped, and said so, when none is installed);
//! 4. `ReplaySafeClient::call_tool` against rmcp's bare `call_tool` on a
//!    call that succeeds, the same request on the wire (goal: at most
//!    1.05x).
//!
//! Each pair with a goal runs in rounds of a batch of calls of each side,
//! made call by call alternately, every call timed and the times summed by
//! side; a ratio is the median over the rounds of each round's own ratio,
//! with the rounds' lowest and highest. Two calls in a row run within
//! microseconds of each other, so a slow spell of a loaded machine slows
//! both sides alike: timed instead as a batch of one side and then one of
//! the other, 12 ms each, rounds of a pair whose instructions differ by 1%
//! ranged from 0.61x to 1.91x on a shared virtual machine; alternately,
//! from 1.05x to 1.13x. The duplicate hit is timed in a batch of its own
//! after each round. Times are the medians of the rounds' per-call times.
//!
//! Run: `cargo run --release -p mcp-hints-bench --bin replay_bench -- [--rounds N] [--batch N]`.
//!
//! `--only SIDE --calls N` makes just `N` calls of one side (`unkeyed`,
//! `keyed`, `hit`, `rmcp` or `safe`) and prints nothing, for an instruction
//! profiler: `valgrind --tool=callgrind` counts of two values of `N`,
//! differenced, give a side's instructions per call, free of the noise of a
//! loaded machine. `--instructions` does that for every side after the
//! timed tables (this program run under callgrind for `--calls` and three
//! times as many calls, for each side) and prints the instructions per
//! call and their ratios against the same goals: on a shared virtual
//! machine, where two runs of one side can differ in time by a third, they
//! are the figures that say whether a change made a call cheaper.

use std::future::Future;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser as _;
use mcp_hints::client::{ReplaySafeClient, ToolCall};
use mcp_hints::idempotency::{Idempotency, IdempotentServer, RedbStore, RedisStore};
use mcp_hints::policy::Trust;
use mcp_hints::{tool, tool_handler, tool_router};
use mcp_hints_bench::{connect, median, peers};
use rmcp::RoleClient;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

type Client = RunningService<RoleClient, ()>;

/// A server with the same write twice: keyed and not.
struct Ledger {
    idempotency: Idempotency,
    entries: AtomicU64,
}

impl IdempotentServer for Ledger {
    fn idempotency(&self) -> &Idempotency {
        &self.idempotency
    }
}

#[derive(Deserialize, JsonSchema)]
struct KeyedEntry {
    /// The same on a resend.
    #[allow(dead_code)]
    request_id: String,
    text: String,
}

#[tool_router(closed_world)]
impl Ledger {
    /// Append an entry (the arguments of `append_keyed`, the key unread).
    #[tool(additive, non_idempotent)]
    async fn append(&self, Parameters(KeyedEntry { text, .. }): Parameters<KeyedEntry>) -> String {
        self.record(text)
    }

    /// Append an entry once per key.
    #[tool(additive, idempotency_key = "request_id")]
    async fn append_keyed(
        &self,
        Parameters(KeyedEntry { text, .. }): Parameters<KeyedEntry>,
    ) -> String {
        self.record(text)
    }

    /// Count the entries.
    #[tool(read_only)]
    async fn count(&self) -> String {
        self.entries.load(Ordering::Relaxed).to_string()
    }
}

impl Ledger {
    fn record(&self, text: String) -> String {
        let n = self.entries.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{n}: {text}")
    }
}

#[tool_handler]
impl rmcp::ServerHandler for Ledger {}

async fn ledger(idempotency: Idempotency) -> Client {
    connect(Ledger {
        idempotency,
        entries: AtomicU64::new(0),
    })
    .await
}

fn arguments(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("arguments are objects"),
    }
}

/// The request `ReplaySafeClient::call_tool(ToolCall::new("count"))`
/// sends: no arguments, written `"arguments": {}`, so that both clients put
/// the same bytes on the wire and the ratio is the client's own cost.
fn count() -> CallToolRequestParams {
    CallToolRequestParams::new("count").with_arguments(serde_json::Map::new())
}

fn call(tool: &'static str, args: serde_json::Value) -> CallToolRequestParams {
    CallToolRequestParams::new(tool).with_arguments(arguments(args))
}

/// Seconds per call of `batch` calls of `one`.
async fn per_call<F: Future<Output = ()>>(batch: usize, mut one: impl FnMut(usize) -> F) -> f64 {
    let started = Instant::now();
    for n in 0..batch {
        one(n).await;
    }
    started.elapsed().as_secs_f64() / batch as f64
}

/// Seconds per call of each of two sides, `batch` calls of each made call
/// by call alternately (which goes first alternates too), every call timed
/// and the times summed by side: a slow spell of the machine, which can
/// last longer than a call but rarely longer than a few, falls on both
/// sides alike, and every cost of either side, rare ones included, is in
/// its sum.
async fn alternately<A, B>(
    batch: usize,
    mut one: impl FnMut() -> A,
    mut other: impl FnMut() -> B,
) -> (f64, f64)
where
    A: Future<Output = ()>,
    B: Future<Output = ()>,
{
    async fn timed(call: impl Future<Output = ()>) -> Duration {
        let started = Instant::now();
        call.await;
        started.elapsed()
    }
    let (mut spent_one, mut spent_other) = (Duration::ZERO, Duration::ZERO);
    for n in 0..batch {
        if n % 2 == 0 {
            spent_one += timed(one()).await;
            spent_other += timed(other()).await;
        } else {
            spent_other += timed(other()).await;
            spent_one += timed(one()).await;
        }
    }
    let per_call = |spent: Duration| spent.as_secs_f64() / batch as f64;
    (per_call(spent_one), per_call(spent_other))
}

/// The options, as the README's commands give them.
#[derive(clap::Parser)]
#[command(about = "replay safety: keyed calls, duplicate hits, stores and the replay-safe client")]
struct Options {
    /// Interleaved rounds of each pair.
    #[arg(long, default_value_t = 15, value_parser = peers::at_least_one)]
    rounds: usize,
    /// Calls per round.
    #[arg(long, default_value_t = 300, value_parser = peers::at_least_one)]
    batch: usize,
    /// Make only `--calls` calls of this side, printing nothing, for an
    /// instruction profiler: unkeyed or keyed `append`, a duplicate hit,
    /// rmcp's bare client or the replay-safe one [default: every measure,
    /// printed].
    #[arg(long, value_name = "SIDE")]
    only: Option<Side>,
    /// Calls of the `--only` side, after one to warm it up; with
    /// `--instructions`, the smaller of the two counts each side is run
    /// with.
    #[arg(long, default_value_t = 2_000, value_parser = peers::at_least_one)]
    calls: usize,
    /// Also count each side's instructions per call under `valgrind
    /// --tool=callgrind` (skipped, and said so, without `valgrind` on
    /// PATH).
    #[arg(long)]
    instructions: bool,
}

/// One side of a pair, run alone under a profiler. The variants have no
/// doc comments, which clap would show as a long list under `--help`.
#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Side {
    // Unkeyed `append`, the in-memory store.
    Unkeyed,
    // Keyed `append_keyed`, a new key each call, the in-memory store.
    Keyed,
    // `append_keyed` with the same key and arguments: the recorded result.
    Hit,
    // rmcp's bare `call_tool` of `count`.
    Rmcp,
    // `ReplaySafeClient::call_tool` of `count`.
    Safe,
}

/// `calls` calls of one side, after one to warm it up.
async fn only(side: Side, calls: usize) {
    let keys = AtomicU64::new(0);
    let fresh_key = || format!("k-{}", keys.fetch_add(1, Ordering::Relaxed));
    match side {
        Side::Unkeyed | Side::Keyed => {
            let client = ledger(Idempotency::default()).await;
            let tool = if side == Side::Keyed {
                "append_keyed"
            } else {
                "append"
            };
            for _ in 0..=calls {
                let args = json!({"request_id": fresh_key(), "text": "x"});
                client.call_tool(call(tool, args)).await.unwrap();
            }
        }
        Side::Hit => {
            let client = ledger(Idempotency::default()).await;
            let duplicate = call("append_keyed", json!({"request_id": "dup", "text": "x"}));
            for _ in 0..=calls {
                client.call_tool(duplicate.clone()).await.unwrap();
            }
        }
        Side::Rmcp => {
            let bare = ledger(Idempotency::default()).await;
            for _ in 0..=calls {
                bare.call_tool(count()).await.unwrap();
            }
        }
        Side::Safe => {
            let safe = ReplaySafeClient::builder()
                .trust(Trust::Trusted)
                .serve(ledger(Idempotency::default()).await)
                .await
                .expect("the replay-safe client collects the tools");
            for _ in 0..=calls {
                safe.call_tool(ToolCall::new("count")).await.unwrap();
            }
        }
    }
}

/// 5: each side's instructions per call, counted by callgrind; prints the
/// fourth table. A side runs under `valgrind --tool=callgrind` as `--only
/// SIDE` twice, with `calls` and `3 * calls` calls, and the difference of
/// the two counts over `2 * calls` is its cost per call without the
/// start-up's.
fn instructions(calls: usize) {
    println!(
        "\n| instructions per call (callgrind, {calls} and {} calls differenced) | instructions | ratio |",
        3 * calls
    );
    println!("|---|---|---|");
    let sides = [
        ("unkeyed", "unkeyed `tools/call`"),
        ("keyed", "keyed `tools/call`, memory store"),
        ("hit", "duplicate hit"),
        ("rmcp", "rmcp `Peer::call_tool`"),
        ("safe", "`ReplaySafeClient::call_tool`"),
    ];
    let mut counted = Vec::new();
    for (side, _) in sides {
        let per_call = callgrind(side, calls).and_then(|fewer| {
            let more = callgrind(side, 3 * calls)?;
            Ok(more.saturating_sub(fewer) as f64 / (2 * calls) as f64)
        });
        match per_call {
            Ok(count) => counted.push(count),
            Err(why) => {
                println!("| skipped: {why} | | |");
                return;
            }
        }
    }
    let against = |side: usize, base: usize, goal: &str| {
        format!(
            "{:.3}x {}{goal}",
            counted[side] / counted[base],
            sides[base].0
        )
    };
    let ratios = [
        "1.000x".to_owned(),
        against(1, 0, " (goal <= 1.2x)"),
        against(2, 0, ""),
        "1.000x".to_owned(),
        against(4, 3, " (goal <= 1.05x)"),
    ];
    for ((_, name), (count, ratio)) in sides.iter().zip(counted.iter().zip(ratios)) {
        println!("| {name} | {count:.0} | {ratio} |");
    }
}

/// The instructions callgrind counted in this program run as `--only
/// SIDE --calls CALLS`; why not, when valgrind is missing or the run
/// failed.
fn callgrind(side: &str, calls: usize) -> Result<u64, String> {
    let me =
        std::env::current_exe().map_err(|error| format!("cannot find this program: {error}"))?;
    let output = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(&me)
        .args(["--only", side, "--calls", &calls.to_string()])
        .stdin(Stdio::null())
        .output()
        .map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => "no `valgrind` on PATH".to_owned(),
            _ => format!("valgrind could not be started: {error}"),
        })?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        let last = stderr.lines().last().unwrap_or_default();
        return Err(format!(
            "valgrind of `--only {side}` failed ({}): {last}",
            output.status
        ));
    }
    // callgrind ends with `==PID== Collected : N`.
    stderr
        .lines()
        .find_map(|line| line.split("Collected : ").nth(1))
        .and_then(|count| count.trim().parse().ok())
        .ok_or_else(|| format!("valgrind of `--only {side}` printed no instruction count"))
}

fn micros(seconds: f64) -> String {
    format!("{:.1} µs", seconds * 1e6)
}

fn main() {
    // clap prints the usage and exits 2 for a bad option, 0 for --help.
    let options = Options::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match options.only {
        Some(side) => runtime.block_on(only(side, options.calls)),
        None => runtime.block_on(run(options)),
    }
}

async fn run(options: Options) {
    let Options {
        rounds,
        batch,
        calls,
        instructions: count_instructions,
        ..
    } = options;
    // One sequence of keys for the whole run: no key is used twice.
    let keys = AtomicU64::new(0);
    keyed_against_unkeyed(rounds, batch, &keys).await;
    stores(rounds, batch, &keys).await;
    replay_safe_client(rounds, batch).await;
    if count_instructions {
        instructions(calls);
    }
}

/// 1 and 2: keyed against unkeyed, and the duplicate hit, in memory; prints
/// the first table.
async fn keyed_against_unkeyed(rounds: usize, batch: usize, keys: &AtomicU64) {
    let fresh_key = || format!("k-{}", keys.fetch_add(1, Ordering::Relaxed));
    let client = ledger(Idempotency::default()).await;
    let warm = call("append", json!({"request_id": "warm", "text": "warm"}));
    client.call_tool(warm).await.expect("append answers");
    let duplicate = call("append_keyed", json!({"request_id": "dup", "text": "x"}));
    client
        .call_tool(duplicate.clone())
        .await
        .expect("append_keyed answers");
    let (mut unkeyed, mut keyed, mut hits) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (plain, with_key) = alternately(
            batch,
            || async {
                let args = json!({"request_id": fresh_key(), "text": "x"});
                client.call_tool(call("append", args)).await.unwrap();
            },
            || async {
                let args = json!({"request_id": fresh_key(), "text": "x"});
                client.call_tool(call("append_keyed", args)).await.unwrap();
            },
        )
        .await;
        unkeyed.push(plain);
        keyed.push(with_key);
        hits.push(
            per_call(batch, |_| async {
                client.call_tool(duplicate.clone()).await.unwrap();
            })
            .await,
        );
    }
    let (keyed_ratio, hit_ratio) = (Paired::of(&keyed, &unkeyed), Paired::of(&hits, &unkeyed));
    let (unkeyed, keyed, hits) = (median(&unkeyed), median(&keyed), median(&hits));
    println!("{rounds} rounds of {batch} calls each, in-process over a duplex pair\n");
    println!(
        "| measure | time per call (median of rounds) | ratio (median of the rounds' own ratios) |"
    );
    println!("|---|---|---|");
    println!(
        "| unkeyed `tools/call` (additive write, the same arguments) | {} | 1.00x |",
        micros(unkeyed)
    );
    println!(
        "| keyed `tools/call`, new key each call, memory store | {} | {keyed_ratio:.2}x unkeyed ({}; goal <= 1.2x) |",
        micros(keyed),
        keyed_ratio.range(),
    );
    println!(
        "| duplicate hit (same key and arguments: the recorded result) | {} | {hit_ratio:.2}x unkeyed ({}) |",
        micros(hits),
        hit_ratio.range(),
    );
}

/// 3: keyed calls per second on each store; prints the second table.
async fn stores(rounds: usize, batch: usize, keys: &AtomicU64) {
    let fresh_key = || format!("k-{}", keys.fetch_add(1, Ordering::Relaxed));
    println!("\n| store | keyed calls per second | time per call |");
    println!("|---|---|---|");
    let directory = tempdir();
    let redis = RedisServer::start();
    let mut stores: Vec<(&str, Option<Idempotency>)> = vec![
        ("memory", Some(Idempotency::default())),
        (
            "redb",
            Some(
                Idempotency::builder()
                    .store(RedbStore::open(directory.join("keys.redb")).expect("redb opens"))
                    .build(),
            ),
        ),
    ];
    match &redis {
        Some(redis) => {
            let store = RedisStore::connect(&redis.url)
                .await
                .expect("the Redis store connects");
            stores.push(("redis", Some(Idempotency::builder().store(store).build())));
        }
        None => stores.push(("redis", None)),
    }
    for (name, idempotency) in stores {
        let Some(idempotency) = idempotency else {
            println!("| {name} | skipped: no `redis-server` on PATH | |");
            continue;
        };
        let client = ledger(idempotency).await;
        let mut times = Vec::new();
        for _ in 0..rounds {
            times.push(
                per_call(batch, |_| async {
                    let args = json!({"request_id": fresh_key(), "text": "x"});
                    client.call_tool(call("append_keyed", args)).await.unwrap();
                })
                .await,
            );
        }
        let time = median(&times);
        println!("| {name} | {:.0} | {} |", 1.0 / time, micros(time));
    }
    drop(redis);
    let _ = std::fs::remove_dir_all(&directory);
}

/// 4: the replay-safe client against rmcp's bare `call_tool`; prints the
/// third table.
async fn replay_safe_client(rounds: usize, batch: usize) {
    let bare = ledger(Idempotency::default()).await;
    let safe = ReplaySafeClient::builder()
        .trust(Trust::Trusted)
        .serve(ledger(Idempotency::default()).await)
        .await
        .expect("the replay-safe client collects the tools");
    let (mut rmcp_times, mut safe_times) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (plain, replay_safe) = alternately(
            batch,
            || async {
                bare.call_tool(count()).await.unwrap();
            },
            || async {
                safe.call_tool(ToolCall::new("count")).await.unwrap();
            },
        )
        .await;
        rmcp_times.push(plain);
        safe_times.push(replay_safe);
    }
    let ratio = Paired::of(&safe_times, &rmcp_times);
    let (rmcp_time, safe_time) = (median(&rmcp_times), median(&safe_times));
    println!(
        "\n| client, a call that succeeds | time per call (median of rounds) | ratio (median of the rounds' own ratios) |"
    );
    println!("|---|---|---|");
    println!("| rmcp `Peer::call_tool` | {} | 1.00x |", micros(rmcp_time));
    println!(
        "| `ReplaySafeClient::call_tool` | {} | {ratio:.2}x ({}; goal <= 1.05x) |",
        micros(safe_time),
        ratio.range(),
    );
}

/// One side's time against the other's, round by round: the median of the
/// rounds' ratios and their range.
struct Paired {
    median: f64,
    lowest: f64,
    highest: f64,
}

impl Paired {
    /// `side[i] / against[i]` for each round `i`.
    fn of(side: &[f64], against: &[f64]) -> Paired {
        let ratios: Vec<f64> = side.iter().zip(against).map(|(a, b)| a / b).collect();
        Paired {
            median: median(&ratios),
            lowest: ratios.iter().copied().fold(f64::INFINITY, f64::min),
            highest: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

impl Paired {
    /// The rounds' range: `rounds 0.98–1.21x`.
    fn range(&self) -> String {
        format!("rounds {:.2}–{:.2}x", self.lowest, self.highest)
    }
}

/// The median ratio, as a number (`{:.2}` gives `1.09`).
impl std::fmt::Display for Paired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.median, f)
    }
}

fn tempdir() -> PathBuf {
    let directory = std::env::temp_dir().join(format!("replay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&directory).expect("a temporary directory");
    directory
}

/// A `redis-server` on a free loopback port, stopped on drop.
struct RedisServer {
    child: Child,
    url: String,
}

impl RedisServer {
    fn start() -> Option<RedisServer> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .ok()?
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .ok()?;
        let server = RedisServer {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

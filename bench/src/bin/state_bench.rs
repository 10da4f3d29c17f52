//! The cost of one decision the gateway's shared state takes, by backend:
//! a rate-limit count (`SharedState::count`) and a parked call's round
//! (`park`, then `resolve`, then `resolution`), on the in-process backend
//! and on Redis (a real `redis-server` on a free loopback port, started and
//! stopped by the bench), side by side in interleaved rounds. Each round
//! times a batch on one backend, then on the other (the order alternating),
//! and the bench prints the median time per operation of each and their
//! difference: what `[state] redis` adds to a call a rate limit or an
//! approval rule matches. It also prints counts per second with 64 in
//! flight, which is what several replicas' calls look like to one Redis.
//!
//! Run: `cargo run --release -p mcp-hints-bench --bin state_bench --
//! [--rounds N (21)] [--batch N (1000)]`; `redis-server` on the `PATH`
//! (Debian's `redis-server` package).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::Parser;
use mcp_hints_bench::median;
use mcp_hints_bench::peers::start_redis;
use mcp_hints_gateway::approval::{Parked, Resolution};
use mcp_hints_gateway::state::{InProcess, RedisState, SharedState, Window};
use serde_json::Map;

/// The shared state's cost per decision, in process and in Redis.
#[derive(Parser)]
#[command(name = "state_bench")]
struct Args {
    /// Interleaved rounds per measurement.
    #[arg(long, default_value_t = 21, value_name = "N")]
    rounds: usize,
    /// Operations per round and backend.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    batch: usize,
}

/// A window no count fills: every call is counted.
const WINDOW: Window<'static> = Window {
    rule: 0,
    key: "rate_limit forecast, 1000000000 per 60 s",
    limit: 1_000_000_000,
    window: Duration::from_secs(60),
};

/// One operation of a measurement, on one backend, numbered `n`.
type Operation =
    fn(Arc<dyn SharedState>, usize) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

fn count(
    state: Arc<dyn SharedState>,
    n: usize,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let principal = format!("principal-{}", n % 8);
        state
            .count(&principal, &[WINDOW])
            .await
            .expect("the count is answered");
    })
}

fn parked_round(
    state: Arc<dyn SharedState>,
    n: usize,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let now = SystemTime::now();
        let id = format!("{}-{n}", uuid_like(now));
        let call = Parked {
            id: id.clone(),
            principal: "alice".to_owned(),
            upstream: "notes".to_owned(),
            tool: "update_note".to_owned(),
            arguments: Map::new(),
            parked_at: now,
            expires_at: now + Duration::from_secs(60),
            reason: "rule[1] (require_approval notes__update_note) requires an approver".to_owned(),
            hints: serde_json::Value::Null,
            drift: None,
        };
        state.park(&call).await.expect("the call is parked");
        let approved = Resolution::Approved {
            by: "carol".to_owned(),
        };
        assert!(
            state
                .resolve(&id, &approved)
                .await
                .expect("the call is resolved")
        );
        assert_eq!(state.resolution(&id).await.expect("read"), Some(approved));
    })
}

/// A fresh id prefix per round (ids must not repeat within a backend).
fn uuid_like(now: SystemTime) -> u128 {
    now.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// The median µs per operation of `operation` on each of `backends`, over
/// `rounds` interleaved rounds of `batch` operations one after another.
async fn sequential(
    backends: &[Arc<dyn SharedState>; 2],
    operation: Operation,
    rounds: usize,
    batch: usize,
) -> [f64; 2] {
    let mut samples = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            let started = Instant::now();
            for n in 0..batch {
                operation(backends[side].clone(), round * batch + n).await;
            }
            samples[side].push(started.elapsed().as_secs_f64() * 1e6 / batch as f64);
        }
    }
    [median(&samples[0]), median(&samples[1])]
}

/// Counts per second on `state` with 64 counts in flight, `total` in all.
async fn concurrent(state: &Arc<dyn SharedState>, total: usize) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..64 {
        let state = state.clone();
        tasks.push(tokio::spawn(async move {
            for n in (worker..total).step_by(64) {
                count(state.clone(), n).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("a counting task finished");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let dir = std::env::temp_dir().join(format!("state-bench-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!("state_bench: cannot create {}: {error}", dir.display());
        return ExitCode::FAILURE;
    }
    let (redis, url) = match start_redis(&dir).await {
        Ok(started) => started,
        Err(error) => {
            eprintln!("state_bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let in_process: Arc<dyn SharedState> = Arc::new(InProcess::new(None));
    let shared: Arc<dyn SharedState> = match RedisState::open(&url, "state-bench", None) {
        Ok(state) => Arc::new(state),
        Err(error) => {
            eprintln!("state_bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    let backends = [in_process, shared];
    // Warm up: connect, load the scripts.
    sequential(&backends, count, 1, 100).await;
    sequential(&backends, parked_round, 1, 100).await;

    println!(
        "{} interleaved rounds of {} operations per backend, one at a time; Redis on loopback",
        args.rounds, args.batch
    );
    println!();
    println!("| operation | in-process | redis | redis - in-process |");
    println!("|---|---|---|---|");
    for (name, operation) in [
        ("rate-limit count", count as Operation),
        (
            "parked call: park, resolve, read",
            parked_round as Operation,
        ),
    ] {
        let [local, remote] = sequential(&backends, operation, args.rounds, args.batch).await;
        println!(
            "| {name} | {local:.2} µs | {remote:.2} µs | +{:.2} µs |",
            remote - local
        );
    }
    let total = args.batch * 10;
    let local = concurrent(&backends[0], total).await;
    let remote = concurrent(&backends[1], total).await;
    println!();
    println!(
        "rate-limit counts with 64 in flight: in-process {local:.0}/s, redis {remote:.0}/s ({total} each)"
    );
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
    ExitCode::SUCCESS
}

//! `tools/call` and `tools/list` round trips through a server made by
//! `mcp-hints`' macros against the same server made by rmcp's macros, both
//! served in-process over a `tokio::io::duplex` pair on one current-thread
//! tokio runtime (see `mcp_hints_bench` for the two servers).
//!
//! Criterion measures each side in the groups `tools-call` (one benchmark
//! per tool) and `tools-list`, and, to attribute a difference, `tool_router`:
//! the cost of building the router, which both servers do on every request.
//! Then, since criterion prints no ratio, an interleaved post-step runs both
//! sides alternately for N rounds of a batch of requests each and prints the
//! ratio of the medians of the per-request times, e.g.
//! `tools/call ratio mcp-hints/rmcp = 1.01x`.
//!
//! Run: `CARGO_TARGET_DIR=... cargo bench -p mcp-hints-bench --bench tool_call`
//! (criterion's own flags after `--`, e.g. `-- --measurement-time 5`).
//! `MCP_HINTS_BENCH_ROUNDS` sets the rounds of the post-step (default 100; 0
//! skips it). The post-step runs whatever criterion filter is given.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use mcp_hints_bench::hints_server::HintsServer;
use mcp_hints_bench::rmcp_server::RmcpServer;
use mcp_hints_bench::{call_requests, connect, median};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use tokio::runtime::Runtime;

type Client = RunningService<RoleClient, ()>;

/// Both clients, each connected to its own server; `mcp-hints` first.
struct Clients {
    hints: Client,
    rmcp: Client,
}

impl Clients {
    fn both(&self) -> [(&'static str, &Client); 2] {
        [("mcp-hints", &self.hints), ("rmcp", &self.rmcp)]
    }
}

fn bench_call(c: &mut Criterion, rt: &Runtime, clients: &Clients) {
    let mut group = c.benchmark_group("tools-call");
    for (tool, request) in call_requests() {
        for (label, client) in clients.both() {
            group.bench_with_input(BenchmarkId::new(label, tool), &request, |b, request| {
                b.to_async(rt).iter(|| async {
                    let result = client.call_tool(request.clone()).await.unwrap();
                    debug_assert_ne!(result.is_error, Some(true));
                    result
                });
            });
        }
    }
    group.finish();
}

fn bench_list(c: &mut Criterion, rt: &Runtime, clients: &Clients) {
    let mut group = c.benchmark_group("tools-list");
    for (label, client) in clients.both() {
        group.bench_function(label, |b| {
            b.to_async(rt)
                .iter(|| async { client.list_tools(None).await.unwrap() });
        });
    }
    group.finish();
}

/// Per-request times (seconds) of both sides from `rounds` interleaved
/// rounds of `batch` requests each; which side goes first alternates.
fn interleaved(
    rt: &Runtime,
    clients: &Clients,
    rounds: usize,
    batch: usize,
    request: impl AsyncFn(&Client, usize),
) -> [Vec<f64>; 2] {
    let mut times = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    let run = |client: &Client| {
        let start = Instant::now();
        rt.block_on(async {
            for i in 0..batch {
                request(client, i).await;
            }
        });
        start.elapsed().as_secs_f64() / batch as f64
    };
    // One unrecorded round each, so neither side pays for a cold start.
    run(&clients.hints);
    run(&clients.rmcp);
    for round in 0..rounds {
        if round.is_multiple_of(2) {
            times[0].push(run(&clients.hints));
            times[1].push(run(&clients.rmcp));
        } else {
            times[1].push(run(&clients.rmcp));
            times[0].push(run(&clients.hints));
        }
    }
    times
}

fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report(what: &str, [hints, rmcp]: &[Vec<f64>; 2], batch: usize) {
    let (median_hints, median_rmcp) = (median(hints), median(rmcp));
    let paired: Vec<f64> = hints.iter().zip(rmcp).map(|(h, r)| h / r).collect();
    println!(
        "{what} ratio mcp-hints/rmcp = {:.2}x  (median per request over {} interleaved rounds \
         of {batch}: mcp-hints {:.2} µs, rmcp {:.2} µs; per-round ratio median {:.3}, \
         quartiles {:.3}..{:.3})",
        median_hints / median_rmcp,
        hints.len(),
        median_hints * 1e6,
        median_rmcp * 1e6,
        median(&paired),
        quantile(&paired, 0.25),
        quantile(&paired, 0.75),
    );
}

fn ratios(rt: &Runtime, clients: &Clients, rounds: usize) {
    const BATCH: usize = 300;
    let requests = call_requests().map(|(_, request)| request);
    let calls = interleaved(rt, clients, rounds, BATCH, async |client, i| {
        let request = requests[i % requests.len()].clone();
        black_box(client.call_tool(request).await.unwrap());
    });
    let lists = interleaved(rt, clients, rounds, BATCH, async |client, _| {
        black_box(client.list_tools(None).await.unwrap());
    });
    let [hints_size, rmcp_size] = clients.both().map(|(_, client)| {
        let result = rt.block_on(client.list_tools(None)).unwrap();
        serde_json::to_vec(&result).unwrap().len()
    });
    println!();
    report("tools/call", &calls, BATCH);
    report("tools/list", &lists, BATCH);
    println!("tools/list result as JSON: mcp-hints {hints_size} bytes, rmcp {rmcp_size} bytes");
}

/// What each request pays before any I/O: both `#[tool_handler]`s serve
/// `Self::tool_router()`, so every `tools/call` and `tools/list` builds the
/// router anew (for `mcp-hints`, `with_hints` on every tool included).
fn bench_router(c: &mut Criterion) {
    let mut group = c.benchmark_group("tool_router");
    group.bench_function("mcp-hints", |b| b.iter(HintsServer::tool_router));
    group.bench_function("rmcp", |b| b.iter(RmcpServer::tool_router));
    group.finish();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|arg| arg == flag);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let clients = rt.block_on(async {
        Clients {
            hints: connect(HintsServer::default()).await,
            rmcp: connect(RmcpServer::default()).await,
        }
    });

    // Modest defaults for a small machine; criterion's flags override them.
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    bench_call(&mut criterion, &rt, &clients);
    bench_list(&mut criterion, &rt, &clients);
    bench_router(&mut criterion);
    criterion.final_summary();

    // As criterion decides: without `--bench` (e.g. `cargo test --benches`)
    // or with `--test`, benchmarks only run once to check that they work,
    // and so does the post-step, with 3 rounds.
    let rounds = if has("--list") {
        0
    } else if has("--test") || !has("--bench") {
        3
    } else {
        std::env::var("MCP_HINTS_BENCH_ROUNDS")
            .ok()
            .and_then(|rounds| rounds.parse().ok())
            .unwrap_or(100)
    };
    if rounds > 0 {
        ratios(&rt, &clients, rounds);
    }

    rt.block_on(async {
        let Clients { hints, rmcp } = clients;
        let _ = hints.cancel().await;
        let _ = rmcp.cancel().await;
    });
}

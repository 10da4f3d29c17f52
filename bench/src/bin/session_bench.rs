//! What session rules and redaction cost per call, side by side in one
//! run: `tools/call` of `list_notes` through the gateway over streamable
//! HTTP, with rmcp's client, one call at a time, everything on loopback.
//! Every set-up fronts the same `notes --http` upstream, which holds
//! `--notes` notes (so that each answer has text to scan), and writes its
//! audit log to `--log-dir` (default the tmpfs `/dev/shm`, where a sync
//! costs nothing, so the figures are the gateway's rather than the
//! disk's):
//!
//! 1. plain: no rule, no `[[redact]]`;
//! 2. history: two rules that look back, one of which matches every call
//!    (`count` of destructive calls, which `list_notes` is not, so it
//!    never fires), so that each call reads its session's history, and is
//!    added to it twice (forwarded, finished), in process;
//! 3. redaction: `[[redact]] detectors = ["secrets"]` over every tool;
//! 4. history and redaction;
//! 5. history in Redis: set-up 2 with `[state] redis` (a `redis-server`
//!    this program starts on a free loopback port);
//! 6. Redis without history: `[state] redis` and no rule, the baseline
//!    of 5.
//!
//! Every set-up is started, checked and warmed up (`--warmup` calls), then
//! `--rounds` interleaved rounds time `--batch` calls of each, the order
//! rotating each round. It prints each set-up's p50 and p99 and what each
//! adds per call at p50 over its baseline (1 for 2-4, 6 for 5), with the
//! spread of the per-round medians' differences (min/median/max).
//!
//! Every process it starts is stopped when it ends, however it ends.
//!
//! Run (`mcp-hints` and `notes` are found beside this executable):
//!
//! ```sh
//! cargo build --release -p mcp-hints-cli -p mcp-hints-examples && cargo run --release -p mcp-hints-bench --bin session_bench -- [--rounds N (20)] [--batch N (100)] [--warmup N (200)] [--notes N (20)] [--max-calls N (256)] [--log-dir DIR (/dev/shm)]
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcp_hints_bench::peers::{
    Client, Process, TempDir, binaries, gateway_config_with, http_client, percentile,
    serve_gateway, start_notes_http, start_redis, toml_string,
};
use mcp_hints_bench::{median, peers};
use rmcp::model::CallToolRequestParams;

/// How long a first call may keep failing before a set-up counts as broken.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one call may take before the run stops with an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Two rules that look back: the trifecta rule (it does not match a
/// read-only call, so it reads nothing for `list_notes`) and a count that
/// matches every call, so that every call reads its history.
const SESSION_RULES: &str = r#"
[[rule]]
action = "require_approval"
when = ["open_world", "not read_only"]
after = ["open_world"]

[[rule]]
action = "deny"
count = { of = "destructive", more_than = 100, within_secs = 60 }
"#;

/// Masks every built-in secret detector's matches in every result.
const REDACTION: &str = r#"
[[redact]]
detectors = ["secrets"]
"#;

/// The options, as the module's command gives them.
#[derive(clap::Parser)]
#[command(about = "what session rules and redaction cost per gateway call")]
struct Options {
    /// Interleaved rounds per set-up.
    #[arg(long, default_value_t = 20, value_parser = peers::at_least_one)]
    rounds: usize,
    /// Calls per round.
    #[arg(long, default_value_t = 100, value_parser = peers::at_least_one)]
    batch: usize,
    /// Calls per set-up before the first round, not counted.
    #[arg(long, default_value_t = 200)]
    warmup: usize,
    /// Notes in the upstream's notebook, so that each answer carries text.
    #[arg(long, default_value_t = 20)]
    notes: usize,
    /// `[session] max_calls` of the set-ups with history: the client's one
    /// session is at this cap once warmed up, what a history read costs
    /// most.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=10_000))]
    max_calls: u32,
    /// Where the gateways' audit logs go.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    log_dir: PathBuf,
}

fn main() -> ExitCode {
    peers::main("session_bench", |options: Options| async move {
        run(&options).await
    })
}

async fn run(options: &Options) -> Result<(), String> {
    let binaries = binaries(None)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scratch = TempDir::new(&std::env::temp_dir())?;
    let logs = TempDir::new(&options.log_dir)?;
    let token = format!("bench-{}", std::process::id());
    eprintln!("session_bench: starting notes, redis and six gateways");
    let (notes, upstream_url) = start_notes_http(&binaries.notes).await?;
    fill_notebook(&upstream_url, options.notes).await?;
    let (redis, redis_url) = start_redis(&scratch.0).await?;
    let upstream = format!("url = {}", toml_string(&upstream_url));
    let redis_state = format!("\n[state]\nredis = {}\n", toml_string(&redis_url));
    // The count must be reachable under the cap; it never is reached, as
    // `list_notes` is not destructive.
    let rules = SESSION_RULES.replace(
        "more_than = 100",
        &format!("more_than = {}", options.max_calls - 1),
    ) + &format!("\n[session]\nmax_calls = {}\n", options.max_calls);
    let configs: [(&'static str, String); 6] = [
        ("plain", String::new()),
        ("history", rules.clone()),
        ("redaction", REDACTION.to_owned()),
        ("history and redaction", format!("{rules}{REDACTION}")),
        ("history in Redis", format!("{redis_state}{rules}")),
        ("Redis, no history", redis_state.clone()),
    ];
    let mut setups = Vec::new();
    for (index, (name, extra)) in configs.into_iter().enumerate() {
        let label = format!("setup-{index}");
        let config = gateway_config_with(&scratch, &logs.0, &label, &token, &upstream, &extra)?;
        let (gateway, url) = serve_gateway(&binaries, &config, format!("gateway ({name})")).await?;
        let client = http_client(&url, Some(&token), name).await?;
        setups.push(Setup::new(name, client, gateway));
    }
    measure(&mut setups, options).await?;
    report(&setups, options);
    for setup in &mut setups {
        setup.close().await;
    }
    drop(setups);
    drop((notes, redis));
    drop(logs);
    drop(scratch);
    Ok(())
}

/// Adds `count` notes of a few sentences each to the notebook at `url`,
/// straight to the upstream.
async fn fill_notebook(url: &str, count: usize) -> Result<(), String> {
    let client = http_client(url, None, "notes, to fill its notebook").await?;
    for index in 0..count {
        let mut request = CallToolRequestParams::new("append_note");
        let text = format!(
            "Note {index}: the quarterly figures are in the shared folder; the deploy runs \
             on Thursday after the review, and the staging bucket is cleaned weekly."
        );
        request.arguments = serde_json::json!({ "text": text }).as_object().cloned();
        let result = client
            .call_tool(request)
            .await
            .map_err(|error| format!("notes: append_note failed: {error}"))?;
        if result.is_error == Some(true) {
            return Err("notes: append_note answered with a tool error".to_owned());
        }
    }
    let _ = client.cancel().await;
    Ok(())
}

/// Checks every set-up answers, warms each up, then times the interleaved
/// rounds.
async fn measure(setups: &mut [Setup], options: &Options) -> Result<(), String> {
    for setup in setups.iter_mut() {
        setup.ready().await?;
    }
    eprintln!("session_bench: warming up ({} calls each)", options.warmup);
    for setup in setups.iter_mut() {
        for _ in 0..options.warmup {
            setup.call().await?;
        }
        setup.latencies.clear();
    }
    eprintln!(
        "session_bench: {} rounds of {} calls each",
        options.rounds, options.batch
    );
    for round in 0..options.rounds {
        for offset in 0..setups.len() {
            let index = (round + offset) % setups.len();
            let setup = &mut setups[index];
            let mut micros = Vec::with_capacity(options.batch);
            for _ in 0..options.batch {
                micros.push(setup.call().await?.as_secs_f64() * 1e6);
            }
            setup.round_medians.push(median(&micros));
        }
    }
    Ok(())
}

/// Prints each set-up's p50 and p99, and what it adds over its baseline.
fn report(setups: &[Setup], options: &Options) {
    println!(
        "{} interleaved rounds of {} calls per set-up (after {} warm-up calls each), \
         `tools/call` of `list_notes` ({} notes) through the gateway over HTTP, one at a time, \
         loopback; histories of at most {} calls\n",
        options.rounds, options.batch, options.warmup, options.notes, options.max_calls
    );
    println!("| set-up | p50 | p99 |");
    println!("|---|---|---|");
    for setup in setups {
        let micros: Vec<f64> = setup
            .latencies
            .iter()
            .map(|latency| latency.as_secs_f64() * 1e6)
            .collect();
        println!(
            "| {} | {:.0} µs | {:.0} µs |",
            setup.name,
            median(&micros),
            percentile(&micros, 0.99)
        );
    }
    println!("\n| added per call (p50, per round: min / median / max) | µs |");
    println!("|---|---|");
    // (set-up, its baseline), as the module's list says.
    for (over, under) in [(1, 0), (2, 0), (3, 0), (4, 5)] {
        let differences: Vec<f64> = setups[over]
            .round_medians
            .iter()
            .zip(&setups[under].round_medians)
            .map(|(over, under)| over - under)
            .collect();
        let (low, high) = differences
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), value| {
                (low.min(*value), high.max(*value))
            });
        println!(
            "| {} over {} | {low:.0} / {:.0} / {high:.0} |",
            setups[over].name,
            setups[under].name,
            median(&differences)
        );
    }
}

/// One gateway set-up: its client, its process, every timed call.
struct Setup {
    name: &'static str,
    client: Option<Client>,
    latencies: Vec<Duration>,
    /// The median latency of each round, in µs.
    round_medians: Vec<f64>,
    _gateway: Process,
}

impl Setup {
    fn new(name: &'static str, client: Client, gateway: Process) -> Setup {
        Setup {
            name,
            client: Some(client),
            latencies: Vec::new(),
            round_medians: Vec::new(),
            _gateway: gateway,
        }
    }

    /// One call, timed; an error or a tool error stops the run.
    async fn call(&mut self) -> Result<Duration, String> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| format!("{}: the client is closed", self.name))?;
        let request = CallToolRequestParams::new("notes__list_notes");
        let started = Instant::now();
        let answer = tokio::time::timeout(CALL_TIMEOUT, client.call_tool(request))
            .await
            .map_err(|_| format!("{}: no answer within {CALL_TIMEOUT:?}", self.name))?;
        let elapsed = started.elapsed();
        match answer {
            Ok(result) if result.is_error != Some(true) => {
                self.latencies.push(elapsed);
                Ok(elapsed)
            }
            Ok(result) => Err(format!(
                "{}: a tool error: {}",
                self.name,
                serde_json::to_string(&result.content).unwrap_or_default()
            )),
            Err(error) => Err(format!("{}: the call failed: {error}", self.name)),
        }
    }

    /// Calls until one succeeds, for at most [`READY_TIMEOUT`].
    async fn ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match self.call().await {
                Ok(_) => {
                    self.latencies.clear();
                    return Ok(());
                }
                Err(error) if Instant::now() >= deadline => return Err(error),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// Ends the client's session (bounded); its gateway stops on drop.
    async fn close(&mut self) {
        if let Some(mut client) = self.client.take() {
            let _ = client.close_with_timeout(Duration::from_secs(5)).await;
        }
    }
}

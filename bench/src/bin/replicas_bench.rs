//! The gateway under load as one, two and three replicas sharing their
//! state in Redis, beside one replica with its state in process, with
//! checks that nothing was lost, run twice or let past a rate limit on the
//! way. Everything is on loopback and the run stops by itself.
//!
//! One real `redis-server` is started on a free loopback port (no
//! persistence). Then four configurations run one after another:
//!
//! | configuration | replicas | `[state]` |
//! |---|---|---|
//! | in-process x1 | 1 | none: the state in the gateway's memory |
//! | redis x1 | 1 | `redis = URL` |
//! | redis x2 | 2 | the same Redis, one prefix for the two |
//! | redis x3 | 3 | the same Redis, one prefix for the three |
//!
//! Each starts a fresh `notes --http 127.0.0.1:0 --store URL` (its keyed
//! tool `add_note` keeps its idempotency records in the same Redis; fresh,
//! so that every configuration reads a notebook of the same size) and its
//! replicas, each `mcp-hints gateway serve` with a config of its own: a
//! port of its own, an audit log of its own (in `--log-dir`, by default
//! the tmpfs `/dev/shm`, where the log's sync costs nothing, so the figures
//! are the gateway's and its state's, not the disk's), one `[[client]]`,
//! the `notes` upstream over HTTP, and one rule:
//! `[[rule]] action = "rate_limit"`, tool `forecast`, at most
//! [`LIMIT`] calls per [`WINDOW`] for the client's principal.
//!
//! `--clients` rmcp clients (streamable HTTP, one MCP session each) are
//! spread round-robin over the replicas, all with the one principal, and
//! each runs for `--seconds`, one call in flight at a time:
//!
//! - every [`RATE_LIMITED_EVERY`]th call is `forecast` (a fresh `city`
//!   each; which call of the ten is offset by the client's index, so that
//!   they do not come in waves), the rate-limited tool: passed or refused
//!   by the limit;
//! - keyed writes are paced at `--writes-per-second` across all clients
//!   (so that `list_notes` answers stay small: each note added stays in
//!   every later answer, and at 10 a second a 60-second run ends with
//!   answers of 600 notes, which then cost more than the gateway): `add_note` with a fresh
//!   `request_id`, and every other one sent again, with the same
//!   arguments, through the next client's session, which is on another
//!   replica when there is one (the resend a client makes after a
//!   timeout); the resend must return the note the first call added;
//! - every other call is `list_notes`.
//!
//! After each configuration's load the bench checks, and a run that fails
//! a check exits 1 with what failed, after the table:
//!
//! - every replica's audit log is an intact hash chain
//!   (`mcp_hints_gateway::chain::verify`), and no audit entry is lost:
//!   every call a client made (load, readiness checks
//!   and the read-back below) has a `decided` and a `finished` entry with
//!   one `id` across the merged logs of the replicas, matched by tool and
//!   `arguments_sha256`; no entry is left without its pair, none is there
//!   that no client made, none says its decision was degraded, and the
//!   logs' `rate_limited` decisions are the refusals the clients saw;
//! - no keyed write ran twice: `list_notes`, read back once the load is
//!   over, holds each `request_id`'s note exactly once, and nothing else;
//! - the rate limit held across the replicas: the `forecast` calls that
//!   passed number at most [`LIMIT`] x the windows elapsed (from the first
//!   `forecast` sent to the last answered), and at least [`LIMIT`] (or
//!   every one made, when fewer): the limit was shared, and not stricter.
//!
//! The table: per configuration, the calls made, calls per second (every
//! call, the refused ones included) and the p50 and p99 latency of one
//! call; then redis x1 over in-process x1 (calls per second, p50, p99) and
//! the Redis backend's cost per call in µs: the time per call at that
//! concurrency (1 / calls per second) of redis x1 less that of in-process
//! x1, and the difference at p50.
//!
//! Every wait is bounded (a call [`CALL_TIMEOUT`], a process's start
//! `peers::START_TIMEOUT`, the logs' settling [`LOG_SETTLE`]). Every process
//! it starts is stopped when it ends, however it ends (an error, a panic,
//! Ctrl-C, SIGTERM): SIGTERM, then SIGKILL after 10 s.
//!
//! Run (`mcp-hints` and `notes` are found beside this executable, or in
//! `--bin-dir`; `redis-server` on the `PATH`):
//!
//! ```sh
//! cargo build --release -p mcp-hints-cli -p mcp-hints-examples && cargo run --release -p mcp-hints-bench --bin replicas_bench -- [--clients N (200)] [--seconds N (60)] [--quick] [--writes-per-second N (2)] [--log-dir DIR (/dev/shm)] [--bin-dir DIR]
//! ```
//!
//! `--quick` is a smoke run for CI: [`QUICK_SECONDS`] s and
//! [`QUICK_CLIENTS`] clients per configuration, unless `--seconds` or
//! `--clients` say otherwise.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcp_hints_bench::median;
use mcp_hints_bench::peers::{
    self, Binaries, Client, Process, TempDir, binaries, http_client, percentile, serve_gateway,
    start_notes_http_with, start_redis, toml_string,
};
use mcp_hints_core::escape;
use mcp_hints_gateway::log::{Decision, Phase, ReadError};
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::Peer;
use serde_json::{Value, json};
use tokio::task::JoinSet;

/// How long one call may take before the run counts it as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The rate limit on `forecast`: calls per [`WINDOW`], for the principal.
const LIMIT: u32 = 20;
/// The rate limit's window.
const WINDOW: Duration = Duration::from_secs(1);
/// Every this many calls of a client, one is `forecast`.
const RATE_LIMITED_EVERY: u64 = 10;
/// How long the audit logs may take to hold every finished call.
const LOG_SETTLE: Duration = Duration::from_secs(10);
/// How long the clients may take to close their sessions.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many clients `initialize` at once.
const CONNECTING_AT_ONCE: usize = 20;
/// How many problems of one kind a failed check shows.
const SHOWN_PROBLEMS: usize = 5;
/// `--quick`'s seconds and clients per configuration.
const QUICK_SECONDS: u64 = 3;
const QUICK_CLIENTS: usize = 20;
/// The defaults without `--quick`.
const SECONDS: u64 = 60;
const CLIENTS: usize = 200;

/// The options, as the README's command gives them.
#[derive(clap::Parser)]
#[command(about = "the gateway under load as 1, 2 and 3 replicas sharing state in Redis")]
struct Options {
    /// Concurrent MCP clients per configuration [default: 200; 20 with
    /// --quick].
    #[arg(long, value_parser = peers::at_least_one)]
    clients: Option<usize>,
    /// Seconds of load per configuration [default: 60; 3 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: Option<u64>,
    /// A smoke run of a few seconds per configuration.
    #[arg(long)]
    quick: bool,
    /// Keyed writes (`add_note`) per second, across all clients.
    #[arg(long, default_value_t = 2, value_parser = peers::at_least_one)]
    writes_per_second: usize,
    /// Where the replicas' audit logs go.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    log_dir: PathBuf,
    /// Runs the `mcp-hints` and `notes` found here instead of this build's.
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
}

/// The options with `--quick` and the defaults applied.
struct Plan {
    clients: usize,
    seconds: u64,
    writes_per_second: usize,
}

fn main() -> ExitCode {
    peers::main("replicas_bench", |options: Options| async move {
        run(&options).await
    })
}

/// One configuration of the table.
struct Configuration {
    name: &'static str,
    /// In file names and the state's prefix.
    label: &'static str,
    replicas: usize,
    redis: bool,
}

const CONFIGURATIONS: [Configuration; 4] = [
    Configuration {
        name: "in-process x1",
        label: "memory-x1",
        replicas: 1,
        redis: false,
    },
    Configuration {
        name: "redis x1",
        label: "redis-x1",
        replicas: 1,
        redis: true,
    },
    Configuration {
        name: "redis x2",
        label: "redis-x2",
        replicas: 2,
        redis: true,
    },
    Configuration {
        name: "redis x3",
        label: "redis-x3",
        replicas: 3,
        redis: true,
    },
];

/// What one configuration measured, and what its checks found.
struct Measured {
    name: &'static str,
    replicas: usize,
    /// Every timed call that was answered.
    calls: usize,
    per_second: f64,
    p50_micros: f64,
    p99_micros: f64,
    writes: usize,
    resends: usize,
    limited: Limited,
    /// Each failed check, one message each; empty when all passed.
    failures: Vec<String>,
}

/// The rate-limited calls of one configuration.
#[derive(Default)]
struct Limited {
    passed: usize,
    refused: usize,
    /// [`LIMIT`] x the windows elapsed.
    bound: usize,
}

async fn run(options: &Options) -> Result<(), String> {
    let plan = Plan {
        clients: options.clients.unwrap_or(if options.quick {
            QUICK_CLIENTS
        } else {
            CLIENTS
        }),
        seconds: options.seconds.unwrap_or(if options.quick {
            QUICK_SECONDS
        } else {
            SECONDS
        }),
        writes_per_second: options.writes_per_second,
    };
    let binaries = binaries(options.bin_dir.as_deref())?;
    // reqwest is built with rustls and no default crypto provider when the
    // workspace's `mcp-hints` is in the same build (see cli/Cargo.toml); an
    // error means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scratch = TempDir::new(&std::env::temp_dir())?;
    let logs = TempDir::new(&options.log_dir)?;
    let (redis, redis_url) = start_redis(&scratch.0).await?;
    let token = format!(
        "bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    );
    eprintln!(
        "replicas_bench: {} clients, {} s per configuration, {} keyed writes/s, Redis at \
         {redis_url}",
        plan.clients, plan.seconds, plan.writes_per_second
    );
    let mut measured = Vec::new();
    for configuration in &CONFIGURATIONS {
        eprintln!("replicas_bench: {}", configuration.name);
        let run = Run {
            configuration,
            plan: &plan,
            binaries: &binaries,
            redis: &redis_url,
            scratch: &scratch.0,
            logs: &logs.0,
            token: &token,
        };
        measured.push(run.measure().await?);
    }
    print!("{}", report(&plan, &measured));
    // Redis last: every gateway that used it is stopped already.
    drop(redis);
    let failures: Vec<String> = measured
        .iter()
        .flat_map(|measured| {
            measured
                .failures
                .iter()
                .map(move |failure| format!("{}: {failure}", measured.name))
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} failed:\n{}",
            escape::count(failures.len(), "check", "checks"),
            failures.join("\n")
        ))
    }
}

/// One configuration's run: what it needs from the whole bench.
struct Run<'a> {
    configuration: &'a Configuration,
    plan: &'a Plan,
    binaries: &'a Binaries,
    redis: &'a str,
    scratch: &'a Path,
    logs: &'a Path,
    token: &'a str,
}

impl Run<'_> {
    /// Starts the configuration's `notes` and replicas, connects the
    /// clients, loads them for the plan's seconds, checks, and stops
    /// everything it started.
    ///
    /// # Errors
    ///
    /// When a process does not start, a client cannot connect or a
    /// readiness check fails: the bench cannot go on. A failed check after
    /// the load is a [`Measured::failures`] entry instead.
    async fn measure(&self) -> Result<Measured, String> {
        let Configuration {
            name,
            label,
            replicas,
            ..
        } = *self.configuration;
        let (notes, notes_url) =
            start_notes_http_with(&self.binaries.notes, &["--store", self.redis]).await?;
        // The gateways first, so that they stop before their upstream.
        let mut processes: Vec<Process> = Vec::new();
        let mut urls = Vec::new();
        let mut log_paths = Vec::new();
        for replica in 0..replicas {
            let log = self.logs.join(format!("audit-{label}-{replica}.jsonl"));
            let config = self.write_config(replica, &log, &notes_url)?;
            let (gateway, url) =
                serve_gateway(self.binaries, &config, format!("gateway {name} #{replica}")).await?;
            processes.push(gateway);
            urls.push(url);
            log_paths.push(log);
        }
        processes.push(notes);

        let clients = self.connect(&urls).await?;
        let peers: Vec<Peer<RoleClient>> =
            clients.iter().map(|client| client.peer().clone()).collect();
        let mut checks = Tally::default();
        // Every replica answers before the load starts.
        for peer in peers.iter().take(replicas) {
            call(peer, &mut checks, "list_notes", JsonObject::new())
                .await
                .and_then(|result| answered(result, "list_notes"))
                .map_err(|error| format!("{name}: the readiness check failed: {error}"))?;
        }

        let (mut tally, elapsed) = self.load(&peers).await;
        let notes_now = call(&peers[0], &mut checks, "list_notes", JsonObject::new()).await;
        tally.merge_made(&checks);
        let mut failures = Vec::new();
        if !tally.errors.is_empty() {
            failures.push(format!(
                "{} stopped at a failed call:\n  {}",
                escape::count(tally.errors.len(), "client", "clients"),
                shown_problems(&tally.errors)
            ));
        }
        match notes_now.and_then(|result| answered(result, "list_notes")) {
            Ok(result) => failures.extend(check_writes(&tally.writes, &result).err()),
            Err(error) => failures.push(format!("reading the notes back failed: {error}")),
        }
        failures.extend(check_audit(&log_paths, &tally).await.err());
        let limited = check_rate_limit(&tally, &mut failures);

        close(clients).await;
        drop(processes);
        let calls = tally.latencies.len();
        let (p50_micros, p99_micros) = if calls == 0 {
            failures.push("no call was answered".to_owned());
            (f64::NAN, f64::NAN)
        } else {
            (median(&tally.latencies), percentile(&tally.latencies, 0.99))
        };
        Ok(Measured {
            name,
            replicas,
            calls,
            per_second: calls as f64 / elapsed.as_secs_f64(),
            p50_micros,
            p99_micros,
            writes: tally.writes.len(),
            resends: tally.resends,
            limited,
            failures,
        })
    }

    /// Writes replica `replica`'s config, its audit log at `log`; its path.
    fn write_config(&self, replica: usize, log: &Path, notes_url: &str) -> Result<PathBuf, String> {
        let label = self.configuration.label;
        let state = if self.configuration.redis {
            format!(
                "[state]\nredis = {}\nprefix = {}\n",
                toml_string(self.redis),
                toml_string(&format!("replicas-bench-{}-{label}", std::process::id()))
            )
        } else {
            String::new()
        };
        let config = format!(
            r#"[listen]
http = "127.0.0.1:0"

[[client]]
principal = "bench"
token = {token}

[log]
path = {log}

{state}
[[upstream]]
name = "notes"
url = {notes_url}
trusted = true

[[rule]]
action = "rate_limit"
tool = "forecast"
limit = {LIMIT}
window_secs = {window}
"#,
            token = toml_string(self.token),
            log = toml_string(&log.to_string_lossy()),
            notes_url = toml_string(notes_url),
            window = WINDOW.as_secs(),
        );
        let path = self.scratch.join(format!("gateway-{label}-{replica}.toml"));
        std::fs::write(&path, config).map_err(|error| format!("{}: {error}", path.display()))?;
        Ok(path)
    }

    /// The plan's clients, client `i` on replica `i % replicas`, each once
    /// its `initialize` is done; [`CONNECTING_AT_ONCE`] at a time.
    async fn connect(&self, urls: &[String]) -> Result<Vec<Client>, String> {
        let mut clients = Vec::with_capacity(self.plan.clients);
        while clients.len() < self.plan.clients {
            let first = clients.len();
            let last = (first + CONNECTING_AT_ONCE).min(self.plan.clients);
            let mut connecting = JoinSet::new();
            for index in first..last {
                let url = urls[index % urls.len()].clone();
                let token = self.token.to_owned();
                let what = format!("{} client {index}", self.configuration.name);
                connecting.spawn(async move {
                    let client = http_client(&url, Some(&token), &what).await;
                    (index, client)
                });
            }
            let mut batch: Vec<(usize, Client)> = Vec::with_capacity(last - first);
            while let Some(joined) = connecting.join_next().await {
                let (index, client) = joined.map_err(|error| format!("connecting: {error}"))?;
                batch.push((index, client?));
            }
            batch.sort_by_key(|(index, _)| *index);
            clients.extend(batch.into_iter().map(|(_, client)| client));
        }
        Ok(clients)
    }

    /// Runs every client's work until the plan's seconds are over; the
    /// merged tally and how long it took from the first call to the last
    /// answer.
    async fn load(&self, peers: &[Peer<RoleClient>]) -> (Tally, Duration) {
        let clients = peers.len();
        let started = Instant::now();
        let deadline = started + Duration::from_secs(self.plan.seconds);
        let write_every =
            Duration::from_secs_f64(clients as f64 / self.plan.writes_per_second as f64);
        let mut working = JoinSet::new();
        for index in 0..clients {
            let work = Work {
                index,
                label: self.configuration.label,
                home: peers[index].clone(),
                // The next client's session: on the next replica when there
                // is more than one.
                other: peers[(index + 1) % clients].clone(),
                deadline,
                // Staggered, so that the writes are spread over time.
                first_write: started + write_every.mul_f64(index as f64 / clients as f64),
                write_every,
            };
            working.spawn(work.run());
        }
        let mut tally = Tally::default();
        // Each client stops sending at the deadline; its last call then has
        // CALL_TIMEOUT, and a keyed write its resend as well.
        let bound = deadline + CALL_TIMEOUT * 3;
        loop {
            let joined = tokio::time::timeout_at(bound.into(), working.join_next()).await;
            match joined {
                Ok(Some(Ok(done))) => tally.merge(done),
                Ok(Some(Err(error))) => tally
                    .errors
                    .push(format!("a client's task failed: {error}")),
                Ok(None) => break,
                Err(_) => {
                    tally.errors.push(format!(
                        "{} clients had not stopped {:?} after the deadline",
                        working.len(),
                        CALL_TIMEOUT * 3
                    ));
                    working.abort_all();
                    break;
                }
            }
        }
        (tally, started.elapsed())
    }
}

/// Closes every client's session, all at once, within [`CLOSE_TIMEOUT`];
/// what is left open is dropped (and its session ends with its gateway).
async fn close(clients: Vec<Client>) {
    let mut closing = JoinSet::new();
    for mut client in clients {
        closing.spawn(async move {
            let _ = client.close_with_timeout(CLOSE_TIMEOUT).await;
        });
    }
    let _ = tokio::time::timeout(CLOSE_TIMEOUT * 2, closing.join_all()).await;
}

/// A call as the audit log identifies it: the upstream's tool name and
/// [`digest`] of its arguments.
type CallKey = (String, String);

/// What clients did and saw.
#[derive(Default)]
struct Tally {
    /// The latency of every answered call of the load, in µs.
    latencies: Vec<f64>,
    /// Every call sent, answered or not, by [`CallKey`].
    made: HashMap<CallKey, usize>,
    /// Every keyed write, once (its resend is not another).
    writes: Vec<Written>,
    /// How many keyed writes were sent again.
    resends: usize,
    /// `forecast` calls that passed, and that the limit refused.
    passed: usize,
    refused: usize,
    /// When the first `forecast` was sent and the last answered.
    limited_span: Option<(Instant, Instant)>,
    /// What went wrong with a call: the client stopped there.
    errors: Vec<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.merge_made(&other);
        self.latencies.extend(other.latencies);
        self.writes.extend(other.writes);
        self.resends += other.resends;
        self.passed += other.passed;
        self.refused += other.refused;
        self.limited_span = match (self.limited_span, other.limited_span) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (one, other) => one.or(other),
        };
        self.errors.extend(other.errors);
    }

    fn merge_made(&mut self, other: &Tally) {
        for (key, count) in &other.made {
            *self.made.entry(key.clone()).or_default() += count;
        }
    }
}

/// A keyed write and the note it added.
struct Written {
    request_id: String,
    text: String,
    note_id: u64,
}

/// One client's share of the load.
struct Work {
    index: usize,
    label: &'static str,
    home: Peer<RoleClient>,
    other: Peer<RoleClient>,
    deadline: Instant,
    first_write: Instant,
    write_every: Duration,
}

impl Work {
    /// Calls until the deadline or the first failure (which ends up in
    /// the tally's `errors`).
    async fn run(self) -> Tally {
        let mut tally = Tally::default();
        if let Err(error) = self.calls(&mut tally).await {
            tally.errors.push(format!("client {}: {error}", self.index));
        }
        tally
    }

    async fn calls(&self, tally: &mut Tally) -> Result<(), String> {
        let mut next_write = self.first_write;
        let mut writes = 0_u64;
        let mut sent = 0_u64;
        while Instant::now() < self.deadline {
            sent += 1;
            if Instant::now() >= next_write {
                next_write += self.write_every;
                self.keyed_write(tally, writes).await?;
                writes += 1;
            } else if (sent + self.index as u64).is_multiple_of(RATE_LIMITED_EVERY) {
                // Offset by the client's index: the clients start together,
                // and would otherwise send their `forecast` calls in waves.
                let city = format!("{}-c{}-f{sent}", self.label, self.index);
                self.forecast(tally, city).await?;
            } else {
                let started = Instant::now();
                let result = call(&self.home, tally, "list_notes", JsonObject::new()).await?;
                answered(result, "list_notes")?;
                tally.latencies.push(micros(started));
            }
        }
        Ok(())
    }

    /// `add_note` with a fresh `request_id`; every other one (by client and
    /// number) sent again through the other session, which must return the
    /// same note.
    async fn keyed_write(&self, tally: &mut Tally, number: u64) -> Result<(), String> {
        let request_id = format!("{}-c{}-w{number}", self.label, self.index);
        let text = format!("note {request_id}");
        let arguments = object(json!({ "request_id": request_id, "text": text }));
        let started = Instant::now();
        let first = call(&self.home, tally, "add_note", arguments.clone()).await?;
        tally.latencies.push(micros(started));
        let note = note_of(&answered(first, "add_note")?, &text)?;
        // By client as well as by number: in a short run each client
        // writes once or twice.
        if (self.index as u64 + number).is_multiple_of(2) {
            let started = Instant::now();
            let again = call(&self.other, tally, "add_note", arguments).await?;
            tally.latencies.push(micros(started));
            tally.resends += 1;
            let resent = note_of(&answered(again, "add_note")?, &text)?;
            if resent != note {
                return Err(format!(
                    "the resend of `add_note` {request_id} returned note {resent}, the first \
                     call note {note}: the write ran twice"
                ));
            }
        }
        tally.writes.push(Written {
            request_id,
            text,
            note_id: note,
        });
        Ok(())
    }

    /// `forecast` for `city`: passed, or refused by the rate limit.
    async fn forecast(&self, tally: &mut Tally, city: String) -> Result<(), String> {
        let sent = Instant::now();
        let result = call(
            &self.home,
            tally,
            "forecast",
            object(json!({ "city": city })),
        )
        .await?;
        let done = Instant::now();
        tally.latencies.push(micros(sent));
        tally.limited_span = Some(match tally.limited_span {
            Some((first, _)) => (first, done),
            None => (sent, done),
        });
        if result.is_error != Some(true) {
            tally.passed += 1;
            return Ok(());
        }
        let said = text_of(&result);
        if said.contains(&format!("at most {LIMIT} calls per {} s", WINDOW.as_secs())) {
            tally.refused += 1;
            Ok(())
        } else {
            Err(format!(
                "`forecast` answered with a tool error that is not the rate limit's: {}",
                escape::shown(&said)
            ))
        }
    }
}

/// Calls `tool` (the upstream's name; through the gateway it is
/// `notes__TOOL`) with `arguments` on `peer`, counted in `tally.made`
/// before it is sent; the answer, tool errors included.
///
/// # Errors
///
/// A JSON-RPC error or no answer within [`CALL_TIMEOUT`].
async fn call(
    peer: &Peer<RoleClient>,
    tally: &mut Tally,
    tool: &str,
    arguments: JsonObject,
) -> Result<CallToolResult, String> {
    *tally
        .made
        .entry((tool.to_owned(), digest(&arguments)))
        .or_default() += 1;
    let request = CallToolRequestParams::new(format!("notes__{tool}")).with_arguments(arguments);
    match tokio::time::timeout(CALL_TIMEOUT, peer.call_tool(request)).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(error)) => Err(format!(
            "`{tool}` failed: {}",
            escape::shown(&error.to_string())
        )),
        Err(_) => Err(format!("`{tool}` did not answer within {CALL_TIMEOUT:?}")),
    }
}

/// `result`, unless it is a tool error.
fn answered(result: CallToolResult, tool: &str) -> Result<CallToolResult, String> {
    if result.is_error == Some(true) {
        Err(format!(
            "`{tool}` answered with a tool error: {}",
            escape::shown(&text_of(&result))
        ))
    } else {
        Ok(result)
    }
}

/// The id of the note `add_note` answered with, which must say `text`.
fn note_of(result: &CallToolResult, text: &str) -> Result<u64, String> {
    let note = result.structured_content.as_ref();
    match (
        note.and_then(|note| note["id"].as_u64()),
        note.and_then(|note| note["text"].as_str()),
    ) {
        (Some(id), Some(said)) if said == text => Ok(id),
        _ => Err(format!(
            "`add_note` did not answer with a note saying {}: {}",
            escape::quoted(text),
            escape::shown(&serde_json::to_string(&result.structured_content).unwrap_or_default())
        )),
    }
}

/// The text of a result's content, for messages.
fn text_of(result: &CallToolResult) -> String {
    serde_json::to_string(&result.content).unwrap_or_default()
}

/// `value`, a JSON object.
fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

/// The audit log's `arguments_sha256` of `arguments`: the hex of
/// `mcp_hints::canonical::arguments_digest`, which the gateway writes.
fn digest(arguments: &JsonObject) -> String {
    let digest = mcp_hints::canonical::arguments_digest(Some(arguments), None);
    match digest.strip_prefix("sha256:") {
        Some(hex) => hex.to_owned(),
        None => digest,
    }
}

fn micros(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e6
}

/// The notes `list_notes` answered with (`result`) hold each write's note
/// exactly once, with the id its first call returned, and nothing else.
fn check_writes(writes: &[Written], result: &CallToolResult) -> Result<(), String> {
    let notes = result
        .structured_content
        .as_ref()
        .and_then(|content| content["notes"].as_array())
        .ok_or_else(|| {
            format!(
                "`list_notes` did not answer with a list of notes: {}",
                escape::shown(&text_of(result))
            )
        })?;
    let mut ids_by_text: HashMap<&str, Vec<u64>> = HashMap::new();
    for note in notes {
        let text = note["text"].as_str().unwrap_or_default();
        ids_by_text
            .entry(text)
            .or_default()
            .push(note["id"].as_u64().unwrap_or_default());
    }
    let mut problems = Vec::new();
    for write in writes {
        match ids_by_text.remove(write.text.as_str()) {
            Some(ids) if ids == [write.note_id] => {}
            Some(ids) => problems.push(format!(
                "`request_id` {} has {} (ids {ids:?}; the first call returned {})",
                write.request_id,
                escape::count(ids.len(), "note", "notes"),
                write.note_id
            )),
            None => problems.push(format!("`request_id` {} has no note", write.request_id)),
        }
    }
    for (text, ids) in ids_by_text {
        problems.push(format!(
            "{} no client wrote: {}",
            escape::count(ids.len(), "note", "notes"),
            escape::quoted(text)
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "keyed writes: {} of {} notes read back:\n  {}",
            escape::count(problems.len(), "problem", "problems"),
            notes.len(),
            shown_problems(&problems)
        ))
    }
}

/// Every call in `tally.made` has its two audit entries across `logs`,
/// and the logs hold nothing else; read again until they do, for at most
/// [`LOG_SETTLE`].
async fn check_audit(logs: &[PathBuf], tally: &Tally) -> Result<(), String> {
    let deadline = Instant::now() + LOG_SETTLE;
    loop {
        match audit_problems(logs, tally) {
            Ok(()) => return Ok(()),
            Err(problems) if Instant::now() >= deadline => {
                return Err(format!(
                    "audit logs ({}): {}:\n  {}",
                    escape::count(logs.len(), "replica", "replicas"),
                    escape::count(problems.len(), "problem", "problems"),
                    shown_problems(&problems)
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// One call's entries, by the audit log's `id`.
#[derive(Default)]
struct Logged {
    /// From its `decided` entry.
    key: Option<CallKey>,
    decided: usize,
    finished: usize,
}

/// What the merged `logs` lack or hold beyond `tally`'s calls.
fn audit_problems(logs: &[PathBuf], tally: &Tally) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    let mut by_id: BTreeMap<String, Logged> = BTreeMap::new();
    let (mut degraded, mut rate_limited) = (0_usize, 0_usize);
    for log in logs {
        // The log is a hash chain: it must hold from its first line, and
        // its checkpoints record no call.
        match mcp_hints_gateway::chain::verify(log, None) {
            Ok(report) => {
                if let Some(tampering) = report.tampering {
                    problems.push(format!("{}: the chain breaks: {tampering}", log.display()));
                }
            }
            Err(error) => problems.push(error),
        }
        for read in mcp_hints_gateway::log::entries(log) {
            let entry = match read {
                Ok((_, entry)) => entry,
                Err(error @ ReadError::NotAnEntry { .. }) => {
                    problems.push(escape::one_line(&error.to_string()).into_owned());
                    continue;
                }
                Err(error) => return Err(vec![escape::one_line(&error.to_string()).into_owned()]),
            };
            let logged = by_id.entry(entry.id).or_default();
            match entry.phase {
                Phase::Decided => {
                    logged.decided += 1;
                    logged.key = Some((entry.tool, entry.arguments_sha256));
                    degraded += usize::from(entry.degraded.is_some());
                    rate_limited += usize::from(entry.decision == Decision::RateLimited);
                }
                Phase::Finished => logged.finished += 1,
            }
        }
    }
    let mut complete: HashMap<CallKey, usize> = HashMap::new();
    for (id, logged) in &by_id {
        match (&logged.key, logged.decided, logged.finished) {
            (Some(key), 1, 1) => *complete.entry(key.clone()).or_default() += 1,
            (_, decided, finished) => problems.push(format!(
                "call `{}` has {} and {}",
                escape::shown(id),
                escape::count(decided, "`decided` entry", "`decided` entries"),
                escape::count(finished, "`finished` entry", "`finished` entries"),
            )),
        }
    }
    for (key, &made) in &tally.made {
        let logged = complete.remove(key).unwrap_or(0);
        if logged != made {
            problems.push(format!(
                "{made} `{}` calls with arguments {} made, {logged} logged with both entries",
                key.0, key.1
            ));
        }
    }
    for ((tool, arguments), logged) in complete {
        problems.push(format!(
            "{logged} `{}` calls with arguments {arguments} logged that no client made",
            escape::shown(&tool)
        ));
    }
    if degraded > 0 {
        problems.push(format!(
            "{} taken without the shared state (`degraded`)",
            escape::count(degraded, "decision was", "decisions were")
        ));
    }
    if rate_limited != tally.refused {
        problems.push(format!(
            "{rate_limited} `rate_limited` decisions logged, {} refusals seen by the clients",
            tally.refused
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// The first [`SHOWN_PROBLEMS`] of `problems`, one a line.
fn shown_problems(problems: &[String]) -> String {
    let mut shown = problems
        .iter()
        .take(SHOWN_PROBLEMS)
        .cloned()
        .collect::<Vec<_>>()
        .join("\n  ");
    if problems.len() > SHOWN_PROBLEMS {
        let _ = write!(shown, "\n  and {} more", problems.len() - SHOWN_PROBLEMS);
    }
    shown
}

/// The rate-limited calls' figures; a failure in `failures` when more
/// passed than [`LIMIT`] x the windows elapsed, or fewer than one window's
/// worth (of those made).
fn check_rate_limit(tally: &Tally, failures: &mut Vec<String>) -> Limited {
    let Some((first, last)) = tally.limited_span else {
        failures.push("no rate-limited call was made".to_owned());
        return Limited::default();
    };
    let span = last.duration_since(first);
    // In any stretch of one window at most LIMIT calls are counted, and
    // the span is covered by floor(span / window) + 1 such stretches.
    let windows = (span.as_micros() / WINDOW.as_micros()) as usize + 1;
    let bound = LIMIT as usize * windows;
    let limited = Limited {
        passed: tally.passed,
        refused: tally.refused,
        bound,
    };
    if limited.passed > bound {
        failures.push(format!(
            "rate limit: {} `forecast` calls passed in {:.1} s, more than {LIMIT} x {windows} \
             windows = {bound}",
            limited.passed,
            span.as_secs_f64()
        ));
    }
    let made = limited.passed + limited.refused;
    if limited.passed < made.min(LIMIT as usize) {
        failures.push(format!(
            "rate limit: only {} of {made} `forecast` calls passed, fewer than the {LIMIT} of \
             one window",
            limited.passed
        ));
    }
    limited
}

/// The table and the ratios.
fn report(plan: &Plan, measured: &[Measured]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} rmcp clients (streamable HTTP, one call in flight each) spread round-robin over \
         the replicas, {} s per configuration, loopback; every {RATE_LIMITED_EVERY}th call \
         `forecast` (rate limit {LIMIT} per {} s), {} keyed writes/s (`add_note`, every other \
         one resent through another replica), the rest `list_notes`.\n",
        plan.clients,
        plan.seconds,
        WINDOW.as_secs(),
        plan.writes_per_second
    );
    let _ = writeln!(
        out,
        "| configuration | replicas | calls | calls/s | p50 | p99 | keyed writes (resent) | \
         rate-limited passed / bound (refused) | checks |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for run in measured {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms | {} ({}) | {} / {} ({}) | {} |",
            run.name,
            run.replicas,
            run.calls,
            run.per_second,
            run.p50_micros / 1e3,
            run.p99_micros / 1e3,
            run.writes,
            run.resends,
            run.limited.passed,
            run.limited.bound,
            run.limited.refused,
            if run.failures.is_empty() {
                "passed".to_owned()
            } else {
                format!("{} failed", run.failures.len())
            }
        );
    }
    if let [memory, redis, ..] = measured {
        let _ = writeln!(
            out,
            "\nredis x1 / in-process x1: calls/s {:.2}x, p50 {:.2}x, p99 {:.2}x. The Redis \
             backend's cost per call: {:+.0} µs of time per call at this concurrency \
             (1 / calls/s), {:+.0} µs at p50.",
            redis.per_second / memory.per_second,
            redis.p50_micros / memory.p50_micros,
            redis.p99_micros / memory.p99_micros,
            1e6 / redis.per_second - 1e6 / memory.per_second,
            redis.p50_micros - memory.p50_micros,
        );
    }
    out
}

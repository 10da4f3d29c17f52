//! Throughput of MCP servers over stdio, side by side in one run: rmcp's
//! client keeps `--in-flight` `tools/call`s of `list_notes` in flight
//! against each server, over the pipes of a child process, and the server's
//! CPU time is read from `/proc/PID/stat` before and after.
//!
//! The servers:
//!
//! 1. `notes`, the example server (`mcp_hints::stdio`, behind the wire
//!    guard, on Tokio's current-thread runtime, its default over stdio);
//! 2. `notes --multi-thread`: the same on Tokio's multi-thread runtime;
//! 3. with `--baseline PATH`, another `notes` binary (an older build), for a
//!    before/after in one run;
//! 4. the official TypeScript SDK v2 (`@modelcontextprotocol/server` 2.4.0,
//!    bench/fixtures/list_notes_server.mjs), installed by this program with
//!    `npm install --prefix target/bench-peers/stdio-npm`;
//! 5. FastMCP (PyPI `fastmcp` 4.2.3, bench/fixtures/list_notes_server.py),
//!    installed into the venv `target/bench-peers/fastmcp-venv` with pip;
//!    it runs with `FASTMCP_LOG_LEVEL=WARNING` (no log line per call).
//!
//! Every peer's one tool answers what `notes`' `list_notes` answers on an
//! empty notebook: `{"notes": []}` as structured content and as its text.
//! Installs are reused when they hold exactly the pinned versions.
//!
//! Each server is started and warmed up (`--warmup` calls), then
//! `--rounds` interleaved rounds make `--calls` calls on each, the order
//! rotating each round. A round's figures: calls per second (wall clock of
//! the round) and the server's CPU time per call (user + system, every
//! thread, from `/proc/PID/stat` in clock ticks). The program prints, per
//! server, the minimum, median and maximum over the rounds, and the
//! ratios against the TypeScript server and FastMCP with the goals beside
//! them (CPU per call at most 1/2 of the TypeScript server's and 1/30 of
//! FastMCP's, at least its calls per second), shown, never asserted. Linux
//! only (`/proc`).
//!
//! Every process it starts is stopped when it ends, however it ends: the
//! client closes the server's stdin and the server is killed on drop.
//!
//! Run (`notes` is found beside this executable):
//!
//! ```sh
//! cargo build --release -p mcp-hints-examples --bin notes && cargo run --release -p mcp-hints-bench --bin stdio_bench -- [--rounds N (3)] [--calls N (20000)] [--in-flight N (64)] [--warmup N (2000)] [--baseline PATH]
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_hints_bench::{median, peers};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};

type Client = RunningService<RoleClient, ()>;

/// The npm peer, pinned.
const TS_SERVER: (&str, &str) = ("@modelcontextprotocol/server", "2.4.0");
/// The PyPI peer, pinned.
const FASTMCP: (&str, &str) = ("fastmcp", "4.2.3");
const TS_FIXTURE: &str = include_str!("../../fixtures/list_notes_server.mjs");
const PY_FIXTURE: &str = include_str!("../../fixtures/list_notes_server.py");
/// The build that makes the binary this program runs.
const BUILD: &str = "cargo build --release -p mcp-hints-examples --bin notes";
/// How long a server may take to finish `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one call may take before the run stops with an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The goals, shown beside the ratios (never asserted): notes' CPU per
/// call over the TypeScript server's, and over FastMCP's.
const GOAL_CPU_VS_TS: f64 = 0.5;
const GOAL_CPU_VS_FASTMCP: f64 = 1.0 / 30.0;

/// The options, as the README's command gives them.
#[derive(clap::Parser)]
#[command(about = "rmcp's client keeps calls in flight against stdio servers")]
struct Options {
    /// Interleaved rounds per server.
    #[arg(long, default_value_t = 3, value_parser = peers::at_least_one)]
    rounds: usize,
    /// Calls per round.
    #[arg(long, default_value_t = 20_000, value_parser = peers::at_least_one)]
    calls: usize,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64, value_parser = peers::at_least_one)]
    in_flight: usize,
    /// Calls before the first round, not counted.
    #[arg(long, default_value_t = 2_000)]
    warmup: usize,
    /// Another `notes` build, measured beside this one.
    #[arg(long, value_name = "PATH")]
    baseline: Option<PathBuf>,
}

fn main() -> ExitCode {
    peers::main("stdio_bench", |options: Options| async move {
        run(&options).await
    })
}

async fn run(options: &Options) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|error| format!("current_exe: {error}"))?;
    let dir = exe
        .parent()
        .ok_or("the bench's own executable has no directory")?;
    let notes = dir.join("notes");
    if !notes.is_file() {
        return Err(format!(
            "`notes` is not beside this executable ({}): build it first with `{BUILD}`",
            notes.display()
        ));
    }
    // target/release/stdio_bench: the target directory is two up.
    let peers = dir.parent().unwrap_or(dir).join("bench-peers");
    let node_modules = install_npm(&peers.join("stdio-npm"))?;
    let ts_script = node_modules
        .parent()
        .ok_or("node_modules has no parent")?
        .join("list_notes_server.mjs");
    std::fs::write(&ts_script, TS_FIXTURE)
        .map_err(|error| format!("{}: {error}", ts_script.display()))?;
    let venv = peers.join("fastmcp-venv");
    let python = install_fastmcp(&venv)?;
    let py_script = venv.join("list_notes_server.py");
    std::fs::write(&py_script, PY_FIXTURE)
        .map_err(|error| format!("{}: {error}", py_script.display()))?;

    let mut commands: Vec<(&'static str, Command)> = vec![
        ("notes", Command::new(&notes)),
        ("notes --multi-thread", {
            let mut command = Command::new(&notes);
            command.arg("--multi-thread");
            command
        }),
    ];
    if let Some(baseline) = &options.baseline {
        commands.push(("notes (baseline)", Command::new(baseline)));
    }
    commands.push(("TypeScript SDK v2", {
        let mut command = Command::new("node");
        command.arg(&ts_script);
        command
    }));
    commands.push(("FastMCP", {
        let mut command = Command::new(&python);
        command.arg(&py_script).env("FASTMCP_LOG_LEVEL", "WARNING");
        command
    }));

    let mut servers = Vec::new();
    for (name, command) in commands {
        eprintln!("stdio_bench: starting {name}");
        let mut server = Server::start(name, command).await?;
        server.round(options.warmup, options.in_flight).await?;
        servers.push(server);
    }
    for round in 0..options.rounds {
        eprintln!("stdio_bench: round {} of {}", round + 1, options.rounds);
        let count = servers.len();
        for at in 0..count {
            let server = &mut servers[(at + round) % count];
            let figures = server.round(options.calls, options.in_flight).await?;
            server.rounds.push(figures);
        }
    }
    report(&servers, options);
    for server in &mut servers {
        server.close().await;
    }
    Ok(())
}

/// One round's figures.
#[derive(Clone, Copy)]
struct Round {
    calls_per_second: f64,
    /// User + system CPU time of the server per call, in microseconds.
    cpu_us: f64,
    user_us: f64,
    system_us: f64,
}

struct Server {
    name: &'static str,
    pid: u32,
    client: Option<Client>,
    rounds: Vec<Round>,
}

impl Server {
    async fn start(name: &'static str, command: Command) -> Result<Server, String> {
        let mut command = tokio::process::Command::from(command);
        command.kill_on_drop(true);
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| format!("cannot start {name}: {error}"))?;
        let pid = transport
            .id()
            .ok_or_else(|| format!("{name} has no process id"))?;
        let client = match tokio::time::timeout(START_TIMEOUT, ().serve(transport)).await {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                return Err(format!("{name}: the client could not initialize: {error}"));
            }
            Err(_) => {
                return Err(format!(
                    "{name}: no answer to `initialize` within {START_TIMEOUT:?}"
                ));
            }
        };
        Ok(Server {
            name,
            pid,
            client: Some(client),
            rounds: Vec::new(),
        })
    }

    /// `calls` calls, `in_flight` at a time; an error or a tool error
    /// stops the run.
    async fn round(&mut self, calls: usize, in_flight: usize) -> Result<Round, String> {
        let name = self.name;
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| format!("{name}: the client is closed"))?;
        let before = cpu_ticks(self.pid)?;
        let started = Instant::now();
        let next = Arc::new(AtomicUsize::new(0));
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..in_flight.min(calls.max(1)) {
            let peer = client.peer().clone();
            let next = next.clone();
            workers.spawn(async move {
                while next.fetch_add(1, Ordering::Relaxed) < calls {
                    let call = peer.call_tool(CallToolRequestParams::new("list_notes"));
                    match tokio::time::timeout(CALL_TIMEOUT, call).await {
                        Ok(Ok(result)) if result.is_error != Some(true) => {}
                        Ok(Ok(result)) => {
                            return Err(format!(
                                "{name}: `list_notes` answered with a tool error: {}",
                                serde_json::to_string(&result.content).unwrap_or_default()
                            ));
                        }
                        Ok(Err(error)) => {
                            return Err(format!("{name}: `list_notes` failed: {error}"));
                        }
                        Err(_) => {
                            return Err(format!(
                                "{name}: `list_notes` did not answer within {CALL_TIMEOUT:?}"
                            ));
                        }
                    }
                }
                Ok(())
            });
        }
        while let Some(outcome) = workers.join_next().await {
            outcome.map_err(|error| format!("{name}: a caller panicked: {error}"))??;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let after = cpu_ticks(self.pid)?;
        let tick_us = 1e6 / clock_ticks_per_second();
        let per_call = |ticks: u64| ticks as f64 * tick_us / calls as f64;
        let user = per_call(after.0.saturating_sub(before.0));
        let system = per_call(after.1.saturating_sub(before.1));
        Ok(Round {
            calls_per_second: calls as f64 / elapsed,
            cpu_us: user + system,
            user_us: user,
            system_us: system,
        })
    }

    async fn close(&mut self) {
        if let Some(mut client) = self.client.take() {
            let _ = client.close_with_timeout(Duration::from_secs(5)).await;
        }
    }
}

/// The user and system CPU time of process `pid`, every thread, in clock
/// ticks (`/proc/PID/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> Result<(u64, u64), String> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|error| format!("{path}: {error}"))?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count from its closing one.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("{path}: no `)` in {stat:?}"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 is the first after `)`: utime is field 14, stime 15.
    let field = |number: usize| -> Result<u64, String> {
        fields
            .get(number - 3)
            .and_then(|value| value.parse().ok())
            .ok_or_else(|| format!("{path}: no field {number} in {stat:?}"))
    };
    Ok((field(14)?, field(15)?))
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

fn report(servers: &[Server], options: &Options) {
    println!(
        "stdio: {} rounds of {} `list_notes` calls, {} in flight, rmcp's client (min / median / max over rounds)",
        options.rounds, options.calls, options.in_flight
    );
    println!();
    println!("| server | calls/s | CPU µs per call (user+sys) | user µs | sys µs |");
    println!("|---|---|---|---|---|");
    let spread = |values: Vec<f64>, digits: usize| {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!(
            "{min:.digits$} / {:.digits$} / {max:.digits$}",
            median(&values)
        )
    };
    for server in servers {
        let field = |pick: fn(&Round) -> f64| server.rounds.iter().map(pick).collect::<Vec<_>>();
        println!(
            "| {} | {} | {} | {:.1} | {:.1} |",
            server.name,
            spread(field(|round| round.calls_per_second), 0),
            spread(field(|round| round.cpu_us), 1),
            median(&field(|round| round.user_us)),
            median(&field(|round| round.system_us)),
        );
    }
    let find = |name: &str| servers.iter().find(|server| server.name == name);
    let medians = |server: &Server| {
        let calls: Vec<f64> = server.rounds.iter().map(|r| r.calls_per_second).collect();
        let cpu: Vec<f64> = server.rounds.iter().map(|r| r.cpu_us).collect();
        (median(&calls), median(&cpu))
    };
    println!();
    let (Some(ts), Some(fastmcp)) = (find("TypeScript SDK v2"), find("FastMCP")) else {
        return;
    };
    let (ts_calls, ts_cpu) = medians(ts);
    let (_, fastmcp_cpu) = medians(fastmcp);
    for server in servers
        .iter()
        .filter(|server| server.name.starts_with("notes"))
    {
        let (calls, cpu) = medians(server);
        println!(
            "{}: calls/s {:.2}x the TypeScript server's (goal ≥ 1); CPU per call {:.3}x the TypeScript server's (goal ≤ {GOAL_CPU_VS_TS}), {:.4}x FastMCP's (goal ≤ {:.4})",
            server.name,
            calls / ts_calls,
            cpu / ts_cpu,
            cpu / fastmcp_cpu,
            GOAL_CPU_VS_FASTMCP,
        );
    }
}

/// `npm install --prefix prefix` of the pinned TypeScript server, unless it
/// is there already; its `node_modules`.
fn install_npm(prefix: &Path) -> Result<PathBuf, String> {
    let (package, version) = TS_SERVER;
    let node_modules = prefix.join("node_modules");
    let manifest = node_modules.join(package).join("package.json");
    let installed = || -> Option<String> {
        let text = std::fs::read_to_string(&manifest).ok()?;
        let value: serde_json::Value = serde_json::from_str(&text).ok()?;
        value["version"].as_str().map(str::to_owned)
    };
    if installed().as_deref() == Some(version) {
        eprintln!(
            "stdio_bench: {package} {version} already in {}",
            prefix.display()
        );
        return Ok(node_modules);
    }
    eprintln!(
        "stdio_bench: installing {package} {version} into {}",
        prefix.display()
    );
    std::fs::create_dir_all(prefix).map_err(|error| format!("{}: {error}", prefix.display()))?;
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(prefix)
        .arg(format!("{package}@{version}"));
    peers::finish(
        &format!("installing {package} {version} with npm (it needs the npm registry)"),
        &mut npm,
    )?;
    match installed() {
        Some(found) if found == version => Ok(node_modules),
        found => Err(format!(
            "after npm, {package} is {found:?} in {}, not {version}",
            prefix.display()
        )),
    }
}

/// The pinned FastMCP in the venv `venv` (installed there unless it is
/// already); its python.
fn install_fastmcp(venv: &Path) -> Result<PathBuf, String> {
    let (package, version) = FASTMCP;
    peers::install_pypi(venv, package, version, None)
}

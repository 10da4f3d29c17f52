//! Requests per second and latency under load over HTTP, measured by a
//! standard load generator (`wrk`, Debian's package) that keeps its
//! connections alive as real clients do, side by side in one run:
//!
//! 1. direct: `notes --http 127.0.0.1:0`;
//! 2. the gateway (`mcp-hints gateway serve`) over HTTP with a stdio `notes`
//!    upstream, its durable audit log on disk (`--disk-dir`, by default
//!    the system's temporary directory);
//! 3. the same, its audit log on a tmpfs (`--tmpfs-dir`, by default
//!    `/dev/shm`), where a sync costs nothing: the gateway's cost apart from
//!    the disk's;
//! 4. PyPI's `mcp-proxy` 0.13.0 in front of the same stdio `notes`
//!    (`--stateless`, so that a request needs no session; installed by this
//!    program into `target/bench-peers/venv`, as `gateway_bench` does). Its
//!    Python SDK (1.30) speaks revisions up to 2025-11-25 and answers 400 to
//!    `MCP-Protocol-Version: 2026-07-28`, so its requests say 2025-11-25 in
//!    that header; their bodies are the same;
//! 5. with `--baseline DIR`, the gateway of another build (its
//!    `mcp-hints` and `notes` in DIR), log on disk and on tmpfs, in the
//!    same rounds, with the ratios of this build's gateway to it;
//! 6. with `--worker-threads N`, this build's gateway on a runtime of N
//!    worker threads (`TOKIO_WORKER_THREADS=N`, read by Tokio; the default
//!    is one per core), log on disk and on tmpfs, in the same rounds, with
//!    its p50 overhead and the ratios of the default gateway to it.
//!
//! Every request is the same stateless MCP 2026-07-28 POST to `/mcp`: a
//! `tools/call` of `list_notes` (`notes__list_notes` through the gateway)
//! with the `_meta` keys `io.modelcontextprotocol/protocolVersion` and
//! `io.modelcontextprotocol/clientCapabilities` and the headers
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`. Each answer is
//! checked by wrk's Lua `response` hook: status 200, a JSON-RPC `result`
//! holding the `notes` list, no `error` and no `"isError":true`; one
//! answer that is not stops the run with that answer shown. Before the load,
//! one answer of each set-up is read and parsed whole.
//!
//! At each concurrency (`--concurrency 1,8,64`: that many connections, one
//! request in flight on each, one wrk thread so that the servers keep the
//! cores), `--rounds` interleaved rounds run wrk for `--seconds` against
//! each set-up, the order rotating each round, after one warm-up run of
//! each. The program prints, per set-up and concurrency, the median of the
//! rounds' requests per second with their minimum and maximum, and the
//! median of the rounds' p50 and p99 latencies; then the ratios and the
//! goals beside them (shown, never asserted): the gateway at least 0.5x
//! direct's requests per second at concurrency 64, at least 10x
//! `mcp-proxy`'s at every concurrency, and its p50 overhead over direct at
//! concurrency 1 at most one `fdatasync` plus 100 µs.
//!
//! That `fdatasync` is the gateway's own: this build's gateways serve
//! their metrics on an admin endpoint, and around each run the program
//! reads the histogram of their audit log's syncs
//! (`mcp_hints_gateway_audit_sync_duration_seconds`, 50 µs buckets below
//! half a millisecond) from `GET /metrics`; the run's median sync is
//! interpolated in its buckets. Each round's p50 overhead less that
//! median is the gateway's own share, held to 100 µs. A sync probed
//! apart from the gateway, once before the runs, is not the one its calls
//! wait for during them: a virtual machine's disk drifts (this probe gave
//! 232, 278 and 233 µs back to back in three runs within an hour on one,
//! while the gateway's syncs took 321 µs in the third), and the gateway
//! syncs two lines at a time at its own pace. The program still prints such a
//! probe on `--disk-dir` (the median of 200 appends of one audit line,
//! each synced, back to back and 300 µs apart).
//!
//! Everything is on loopback; the run takes about `rounds × concurrencies ×
//! set-ups × seconds` plus start-up, and stops by itself. Every process it starts
//! is stopped when it ends, however it ends (an error, Ctrl-C, SIGTERM).
//!
//! Run (`mcp-hints` and `notes` are found beside this executable, or in
//! `--bin-dir`; `wrk` on the `PATH`, `apt-get install wrk`):
//!
//! ```sh
//! cargo build --release -p mcp-hints-cli -p mcp-hints-examples && cargo run --release -p mcp-hints-bench --bin http_load_bench -- [--rounds N (5)] [--seconds N (2)] [--concurrency LIST (1,8,64)] [--disk-dir DIR] [--tmpfs-dir DIR (/dev/shm)] [--bin-dir DIR] [--baseline DIR] [--worker-threads N]
//! ```

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use mcp_hints_bench::peers::{
    Process, TempDir, binaries, gateway_config_admin, install_mcp_proxy, serve_gateway_admin,
    start_gateway, start_mcp_proxy, start_notes_http, toml_string_list, which,
};
use mcp_hints_bench::{median, peers};
use serde_json::{Value, json};

/// How long a set-up may keep failing its first request (the gateway may
/// still be connecting its upstream).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one request may take, for the first check and in wrk.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Appends of one audit line, each synced, to measure one `fdatasync`.
const SYNC_SAMPLES: usize = 200;
/// Goals (shown, never asserted).
const GOAL_VS_DIRECT_AT_64: f64 = 0.5;
const GOAL_VS_PROXY: f64 = 10.0;
const GOAL_P50_SLACK_MICROS: f64 = 100.0;

/// The options, as the README's command gives them.
#[derive(clap::Parser)]
#[command(about = "wrk against notes --http, the gateway and mcp-proxy")]
struct Options {
    /// Interleaved rounds per set-up and concurrency.
    #[arg(long, default_value_t = 5, value_parser = peers::at_least_one)]
    rounds: usize,
    /// Seconds per wrk run.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    seconds: u64,
    /// Connections, one request in flight on each: a list, `1,8,64`.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64", value_parser = peers::at_least_one)]
    concurrency: Vec<usize>,
    /// Where the audit log on disk goes [default: the system's temporary
    /// directory].
    #[arg(long, value_name = "DIR")]
    disk_dir: Option<PathBuf>,
    /// Where the audit log on tmpfs goes.
    #[arg(long, value_name = "DIR", default_value = "/dev/shm")]
    tmpfs_dir: PathBuf,
    /// Runs the `mcp-hints` and `notes` found here instead of this build's.
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Adds the gateway of another build (its `mcp-hints` and `notes` in
    /// DIR), log on disk and on tmpfs, to the same interleaved rounds, and
    /// the ratios of this build's gateway to it: a before and after that
    /// a noisy machine's drift between two runs cannot blur.
    #[arg(long, value_name = "DIR")]
    baseline: Option<PathBuf>,
    /// Adds this build's gateway on a multi-thread runtime of N worker
    /// threads (`TOKIO_WORKER_THREADS=N`; the default is one per core),
    /// log on disk and on tmpfs, to the same rounds, with its p50 overhead
    /// and the ratios of the default gateway to it.
    #[arg(long, value_name = "N", value_parser = peers::at_least_one)]
    worker_threads: Option<usize>,
}

fn main() -> ExitCode {
    peers::main("http_load_bench", |options: Options| async move {
        run(&options).await
    })
}

/// The environment variable this build's gateways read their admin
/// endpoint's bearer token from.
const ADMIN_TOKEN_ENV: &str = "MCP_HINTS_BENCH_ADMIN_TOKEN";

/// One server under load: where it is, how a request names the tool, and
/// the processes behind it (stopped when it drops, in order).
struct Setup {
    name: String,
    /// `HOST:PORT`.
    address: String,
    tool: &'static str,
    authorization: Option<String>,
    /// A gateway of this build: its admin endpoint's `HOST:PORT` and
    /// `Authorization` header, where `GET /metrics` counts its audit log's
    /// syncs.
    admin: Option<(String, String)>,
    /// `MCP-Protocol-Version`.
    protocol: &'static str,
    /// Rounds at each concurrency, in `Options::concurrency`'s order.
    runs: Vec<Vec<Run>>,
    _processes: Vec<Process>,
}

/// What one wrk run measured.
#[derive(Clone, Copy)]
struct Run {
    per_second: f64,
    p50_micros: f64,
    p99_micros: f64,
    /// A gateway's audit-log syncs during the run, from its `/metrics`.
    syncs: Option<SyncsMeasured>,
}

/// A gateway's own `fdatasync`s of its audit log during one run.
#[derive(Clone, Copy)]
struct SyncsMeasured {
    /// Their median, read from the histogram's buckets, in µs.
    p50_micros: f64,
    /// Their mean, in µs.
    mean_micros: f64,
    /// Syncs per request answered.
    per_request: f64,
}

async fn run(options: &Options) -> Result<(), String> {
    let wrk = which("wrk").ok_or(
        "`wrk` is not on the PATH: install it (Debian: `apt-get install wrk`) and run again",
    )?;
    let binaries = binaries(options.bin_dir.as_deref())?;
    let proxy = install_mcp_proxy(&binaries.target.join("bench-peers").join("venv"))?;
    let disk_parent = options.disk_dir.clone().unwrap_or_else(std::env::temp_dir);
    let disk = TempDir::new(&disk_parent)?;
    let tmpfs = TempDir::new(&options.tmpfs_dir)?;
    let sync = fdatasync_micros(&disk.0)?;
    let token = format!(
        "bench-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
    );
    let bearer = format!("Bearer {token}");
    let upstream = format!(
        "command = {}",
        toml_string_list(&[binaries.notes.to_string_lossy().into_owned()])
    );

    eprintln!("http_load_bench: starting the four set-ups");
    let mut setups = Vec::new();
    let (server, url) = start_notes_http(&binaries.notes).await?;
    setups.push(Setup::new(
        "direct, notes --http".into(),
        &url,
        "list_notes",
        None,
        vec![server],
    )?);
    // This build's gateways serve their metrics, so that the runs at
    // concurrency 1 count their own syncs.
    let admin_token = format!("{token}-admin");
    let serve = |label: String, logs: PathBuf, env: Vec<(&'static str, String)>| {
        let (binaries, disk, token, upstream) = (&binaries, &disk, &token, &upstream);
        let mut env = env;
        env.push((ADMIN_TOKEN_ENV, admin_token.clone()));
        async move {
            let config =
                gateway_config_admin(disk, &logs, &label, token, upstream, ADMIN_TOKEN_ENV)?;
            serve_gateway_admin(binaries, &config, format!("gateway ({label})"), &env).await
        }
    };
    let admin_bearer = format!("Bearer {admin_token}");
    for (logs, log) in [(&disk.0, "disk"), (&tmpfs.0, "tmpfs")] {
        let (gateway, url, admin) = serve(log.to_owned(), logs.clone(), Vec::new()).await?;
        let mut setup = Setup::new(
            format!("gateway, stdio upstream, log on {log}"),
            &url,
            "notes__list_notes",
            Some(bearer.clone()),
            vec![gateway],
        )?;
        setup.admin = Some((host_port(&admin)?, admin_bearer.clone()));
        setups.push(setup);
    }
    let (proxy, url) = start_mcp_proxy(&proxy, &binaries.notes, &["--stateless"]).await?;
    let mut proxy = Setup::new(
        "mcp-proxy 0.13.0, stdio upstream".into(),
        &url,
        "list_notes",
        None,
        vec![proxy],
    )?;
    proxy.protocol = "2025-11-25";
    setups.push(proxy);
    // Each further pair of set-ups (log on disk, log on tmpfs) is
    // compared with this build's default gateway.
    let mut others = Vec::new();
    if let Some(dir) = &options.baseline {
        others.push("baseline gateway".to_owned());
        let baseline = peers::binaries(Some(dir))?;
        let upstream = format!(
            "command = {}",
            toml_string_list(&[baseline.notes.to_string_lossy().into_owned()])
        );
        for (name, logs, label) in [
            ("baseline gateway, log on disk", &disk.0, "baseline-disk"),
            ("baseline gateway, log on tmpfs", &tmpfs.0, "baseline-tmpfs"),
        ] {
            let (gateway, url) =
                start_gateway(&baseline, &disk, logs, label, &token, &upstream).await?;
            setups.push(Setup::new(
                name.to_owned(),
                &url,
                "notes__list_notes",
                Some(bearer.clone()),
                vec![gateway],
            )?);
        }
    }
    if let Some(threads) = options.worker_threads {
        let other = format!(
            "gateway, {threads} worker thread{}",
            if threads == 1 { "" } else { "s" }
        );
        for (logs, log) in [(&disk.0, "disk"), (&tmpfs.0, "tmpfs")] {
            let label = format!("threads-{threads}-{log}");
            let env = vec![("TOKIO_WORKER_THREADS", threads.to_string())];
            let (gateway, url, admin) = serve(label, logs.clone(), env).await?;
            let mut setup = Setup::new(
                format!("{other}, log on {log}"),
                &url,
                "notes__list_notes",
                Some(bearer.clone()),
                vec![gateway],
            )?;
            setup.admin = Some((host_port(&admin)?, admin_bearer.clone()));
            setups.push(setup);
        }
        others.push(other);
    }
    for setup in &mut setups {
        setup.ready().await?;
        setup.runs = vec![Vec::new(); options.concurrency.len()];
    }

    let scripts: Vec<PathBuf> = setups
        .iter()
        .enumerate()
        .map(|(index, setup)| {
            let path = disk.0.join(format!("check-{index}.lua"));
            std::fs::write(&path, setup.script())
                .map(|()| path.clone())
                .map_err(|error| format!("{}: {error}", path.display()))
        })
        .collect::<Result<_, _>>()?;
    let total = options.rounds * options.concurrency.len() * setups.len();
    eprintln!(
        "http_load_bench: warming up, then {} rounds of {}s per set-up and concurrency \
         (about {} s)",
        options.rounds,
        options.seconds,
        (total as u64 + setups.len() as u64) * options.seconds
    );
    for (setup, script) in setups.iter().zip(&scripts) {
        let concurrency = *options.concurrency.iter().max().unwrap_or(&1);
        setup
            .load(&wrk, script, concurrency, options.seconds)
            .await?;
    }
    for round in 0..options.rounds {
        for (slot, &concurrency) in options.concurrency.iter().enumerate() {
            for offset in 0..setups.len() {
                let index = (round + offset) % setups.len();
                let measured = setups[index]
                    .load(&wrk, &scripts[index], concurrency, options.seconds)
                    .await?;
                setups[index].runs[slot].push(measured);
            }
        }
        eprintln!(
            "http_load_bench: round {} of {} done",
            round + 1,
            options.rounds
        );
    }
    print!("{}", report(options, &setups, &others, sync));
    // The processes are stopped as `setups` drops, then the scratch
    // directories are removed.
    drop(setups);
    Ok(())
}

impl Setup {
    fn new(
        name: String,
        url: &str,
        tool: &'static str,
        authorization: Option<String>,
        processes: Vec<Process>,
    ) -> Result<Setup, String> {
        let address = url
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .ok_or_else(|| format!("{name}: not an http://HOST:PORT/mcp URL: {url}"))?
            .to_owned();
        Ok(Setup {
            name,
            address,
            tool,
            authorization,
            admin: None,
            protocol: "2026-07-28",
            runs: Vec::new(),
            _processes: processes,
        })
    }

    /// The request every load run sends: (headers, body).
    fn request(&self) -> (Vec<(&'static str, String)>, String) {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {
                "name": self.tool, "arguments": {},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        });
        let mut headers = vec![
            ("Content-Type", "application/json".to_owned()),
            ("Accept", "application/json, text/event-stream".to_owned()),
            ("MCP-Protocol-Version", self.protocol.to_owned()),
            ("Mcp-Method", "tools/call".to_owned()),
            ("Mcp-Name", self.tool.to_owned()),
        ];
        if let Some(authorization) = &self.authorization {
            headers.push(("Authorization", authorization.clone()));
        }
        (headers, body.to_string())
    }

    /// One request on a connection of its own (HTTP/1.0, so that the
    /// answer ends with the connection): an error unless it is a JSON-RPC
    /// result whose `structuredContent.notes` is a list.
    fn check(&self) -> Result<(), String> {
        let (headers, body) = self.request();
        let mut request = format!("POST /mcp HTTP/1.0\r\nHost: {}\r\n", self.address);
        for (name, value) in &headers {
            let _ = write!(request, "{name}: {value}\r\n");
        }
        let _ = write!(request, "Content-Length: {}\r\n\r\n{body}", body.len());
        let mut stream = TcpStream::connect(&self.address)
            .map_err(|error| format!("{}: cannot connect: {error}", self.name))?;
        let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
        stream
            .write_all(request.as_bytes())
            .map_err(|error| format!("{}: cannot send: {error}", self.name))?;
        let mut answer = Vec::new();
        stream
            .read_to_end(&mut answer)
            .map_err(|error| format!("{}: no whole answer: {error}", self.name))?;
        let answer = String::from_utf8_lossy(&answer);
        let bad = |why: &str| format!("{}: {why}; the answer:\n{answer}", self.name);
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .ok_or_else(|| bad("not an HTTP answer"))?;
        if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
            return Err(bad("not 200"));
        }
        // A JSON body, or an SSE stream whose `data:` line holds it.
        let json = body
            .lines()
            .find_map(|line| line.strip_prefix("data:"))
            .unwrap_or(body)
            .trim();
        let message: Value = serde_json::from_str(json).map_err(|_| bad("not JSON"))?;
        let result = &message["result"];
        if message.get("error").is_some()
            || result["isError"] == true
            || !result["structuredContent"]["notes"].is_array()
        {
            return Err(bad("not a `list_notes` result"));
        }
        Ok(())
    }

    /// Checks until one answer passes, for at most [`READY_TIMEOUT`].
    async fn ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match self.check() {
                Ok(()) => return Ok(()),
                Err(error) if Instant::now() >= deadline => return Err(error),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// wrk's Lua script: the request, a check of every answer, and one
    /// summary line of the run.
    fn script(&self) -> String {
        let (headers, body) = self.request();
        let mut script = format!(
            "wrk.method = \"POST\"\nwrk.path = \"/mcp\"\nwrk.body = {}\n",
            lua(&body)
        );
        for (name, value) in &headers {
            let _ = writeln!(script, "wrk.headers[{}] = {}", lua(name), lua(value));
        }
        script.push_str(LUA_CHECK);
        script
    }

    /// One wrk run of `seconds` at `concurrency`; an error when any answer
    /// failed its check or wrk saw any socket error or timeout.
    async fn load(
        &self,
        wrk: &Path,
        script: &Path,
        concurrency: usize,
        seconds: u64,
    ) -> Result<Run, String> {
        let before = self.syncs()?;
        let mut command = tokio::process::Command::new(wrk);
        command
            .args(["-t1", &format!("-c{concurrency}"), &format!("-d{seconds}s")])
            .arg(format!("--timeout={}s", REQUEST_TIMEOUT.as_secs()))
            .arg("-s")
            .arg(script)
            .arg(format!("http://{}/mcp", self.address))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(
            Duration::from_secs(seconds) + REQUEST_TIMEOUT * 2,
            command.output(),
        )
        .await
        .map_err(|_| format!("{}: wrk did not finish", self.name))?
        .map_err(|error| format!("cannot run wrk: {error}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let failed = |why: &str| {
            format!(
                "{} at concurrency {concurrency}: {why}\n--- wrk's output ---\n{stdout}{}",
                self.name,
                String::from_utf8_lossy(&output.stderr)
            )
        };
        let line = stdout
            .lines()
            .find_map(|line| line.strip_prefix("wrk-result "))
            .ok_or_else(|| failed("wrk printed no result"))?;
        let (fields, first_bad) = line.split_once(" first_bad=").unwrap_or((line, ""));
        let field = |name: &str| -> Result<f64, String> {
            fields
                .split(' ')
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                .and_then(|value| value.parse().ok())
                .ok_or_else(|| failed(&format!("no `{name}` in wrk's result")))
        };
        let (requests, good, errors) = (field("requests")?, field("good")?, field("errors")?);
        if field("bad")? > 0.0 || errors > 0.0 || good != requests || requests == 0.0 {
            return Err(failed(&format!(
                "{requests} requests, {good} answered with a result, {errors} socket errors or \
                 timeouts; the first bad answer: {first_bad}"
            )));
        }
        let syncs = match (before, self.syncs()?) {
            (Some(before), Some(after)) => after.since(&before).measured(requests),
            _ => None,
        };
        Ok(Run {
            per_second: requests / (field("duration_us")? / 1e6),
            p50_micros: field("p50_us")?,
            p99_micros: field("p99_us")?,
            syncs,
        })
    }

    /// A gateway's audit-log syncs so far, as its `GET /metrics` counts
    /// them; none for a set-up without an admin endpoint.
    fn syncs(&self) -> Result<Option<Syncs>, String> {
        let Some((address, authorization)) = &self.admin else {
            return Ok(None);
        };
        let failed = |why: String| format!("{}: GET /metrics: {why}", self.name);
        let mut stream = TcpStream::connect(address)
            .map_err(|error| failed(format!("cannot connect to {address}: {error}")))?;
        let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
        write!(
            stream,
            "GET /metrics HTTP/1.0\r\nHost: {address}\r\nAuthorization: {authorization}\r\n\r\n"
        )
        .map_err(|error| failed(format!("cannot send: {error}")))?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|error| failed(format!("no whole answer: {error}")))?;
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .ok_or_else(|| failed(format!("not an HTTP answer: {answer}")))?;
        if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
            return Err(failed(format!("not 200: {answer}")));
        }
        Syncs::parse(body).map(Some).map_err(failed)
    }
}

/// The name of the gateway's histogram of its audit log's syncs, in
/// seconds.
const SYNC_HISTOGRAM: &str = "mcp_hints_gateway_audit_sync_duration_seconds";

/// A gateway's histogram of its audit log's syncs, as Prometheus' text
/// gives it: cumulative counts by upper bound (seconds), their sum
/// (seconds) and count.
#[derive(Clone, Debug, Default, PartialEq)]
struct Syncs {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

impl Syncs {
    /// The histogram's samples in a `/metrics` text; an empty one before
    /// the first sync (the histogram is not rendered until then).
    fn parse(text: &str) -> Result<Syncs, String> {
        let mut syncs = Syncs::default();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(SYNC_HISTOGRAM) else {
                continue;
            };
            let (name, value) = rest
                .rsplit_once(' ')
                .ok_or_else(|| format!("a sample without a value: {line}"))?;
            let value: f64 = value
                .parse()
                .map_err(|_| format!("a sample whose value is not a number: {line}"))?;
            if let Some(bound) = name
                .strip_prefix("_bucket{le=\"")
                .and_then(|bound| bound.strip_suffix("\"}"))
            {
                let bound = if bound == "+Inf" {
                    f64::INFINITY
                } else {
                    bound
                        .parse()
                        .map_err(|_| format!("a bucket bound that is not a number: {line}"))?
                };
                syncs.buckets.push((bound, value));
            } else if name == "_sum" {
                syncs.sum = value;
            } else if name == "_count" {
                syncs.count = value;
            }
        }
        syncs.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(syncs)
    }

    /// What was counted after `before`, a sample of the same histogram.
    fn since(&self, before: &Syncs) -> Syncs {
        let earlier = |bound: f64| {
            before
                .buckets
                .iter()
                .find(|(other, _)| *other == bound)
                .map_or(0.0, |(_, count)| *count)
        };
        Syncs {
            buckets: self
                .buckets
                .iter()
                .map(|&(bound, count)| (bound, count - earlier(bound)))
                .collect(),
            sum: self.sum - before.sum,
            count: self.count - before.count,
        }
    }

    /// The `quantile` (0 to 1) of the syncs in seconds, interpolated
    /// linearly within the bucket it falls in, as Prometheus'
    /// `histogram_quantile` does; none without syncs, or in the `+Inf`
    /// bucket.
    fn quantile(&self, quantile: f64) -> Option<f64> {
        if self.count <= 0.0 {
            return None;
        }
        let rank = quantile * self.count;
        let (mut lower, mut below) = (0.0, 0.0);
        for &(bound, count) in &self.buckets {
            if count >= rank {
                // `below < rank <= count`: the bucket holds the rank.
                return bound
                    .is_finite()
                    .then(|| lower + (bound - lower) * (rank - below) / (count - below));
            }
            (lower, below) = (bound, count);
        }
        None
    }

    /// Its median and mean in µs and syncs per request, for `requests`
    /// answered; none without syncs.
    fn measured(&self, requests: f64) -> Option<SyncsMeasured> {
        Some(SyncsMeasured {
            p50_micros: self.quantile(0.5)? * 1e6,
            mean_micros: self.sum / self.count * 1e6,
            per_request: self.count / requests,
        })
    }
}

/// `HOST:PORT` of an `http://HOST:PORT` URL.
fn host_port(url: &str) -> Result<String, String> {
    url.strip_prefix("http://")
        .map(|rest| rest.trim_end_matches('/').to_owned())
        .ok_or_else(|| format!("not an http://HOST:PORT URL: {url}"))
}

/// Counts each answer as good (status 200, a JSON-RPC result with the
/// notes list, no error, no tool error) or bad, keeping the first bad one;
/// `done` sums the threads' counts into one `wrk-result` line.
const LUA_CHECK: &str = r#"
good, bad, first_bad = 0, 0, nil
function response(status, headers, body)
  if status == 200 and body:find('"result":{', 1, true) and body:find('"notes":[', 1, true)
     and not body:find('"error":{', 1, true) and not body:find('"isError":true', 1, true) then
    good = good + 1
  else
    bad = bad + 1
    if first_bad == nil then first_bad = status .. " " .. body:sub(1, 400):gsub("[\r\n]", " ") end
  end
end
local threads = {}
function setup(thread) table.insert(threads, thread) end
function done(summary, latency, requests)
  local good_sum, bad_sum, first = 0, 0, ""
  for _, thread in ipairs(threads) do
    good_sum = good_sum + thread:get("good")
    bad_sum = bad_sum + thread:get("bad")
    local sample = thread:get("first_bad")
    if sample ~= nil and first == "" then first = sample end
  end
  local e = summary.errors
  io.write(string.format(
    "wrk-result requests=%d good=%d bad=%d errors=%d duration_us=%d p50_us=%.1f p99_us=%.1f first_bad=%s\n",
    summary.requests, good_sum, bad_sum, e.connect + e.read + e.write + e.timeout,
    summary.duration, latency:percentile(50), latency:percentile(99), first))
end
"#;

/// `text` as a Lua string literal.
fn lua(text: &str) -> String {
    let mut literal = String::from("\"");
    for character in text.chars() {
        match character {
            '"' => literal.push_str("\\\""),
            '\\' => literal.push_str("\\\\"),
            '\n' => literal.push_str("\\n"),
            other => literal.push(other),
        }
    }
    literal.push('"');
    literal
}

/// One `fdatasync` as the probe measured it on the disk directory.
#[derive(Clone, Copy)]
struct SyncCost {
    /// The median of [`SYNC_SAMPLES`] appends of one audit-sized line,
    /// each synced, back to back: the goal's figure.
    back_to_back: f64,
    /// The same with [`SYNC_PAUSE`] between syncs, as a gateway at
    /// concurrency 1 syncs (one request at a time): a virtual machine's
    /// disk answers a sync after an idle pause more slowly.
    paused: f64,
}

/// The pause between syncs of [`SyncCost::paused`]: about a gateway's
/// time per request at concurrency 1.
const SYNC_PAUSE: Duration = Duration::from_micros(300);

/// What one audit-sized append and `fdatasync` in `dir` costs, in µs.
fn fdatasync_micros(dir: &Path) -> Result<SyncCost, String> {
    let path = dir.join("fdatasync-probe.jsonl");
    let failed = |error: std::io::Error| format!("{}: {error}", path.display());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(failed)?;
    let line = format!("{}\n", "x".repeat(300));
    let mut series = |pause: Option<Duration>| -> Result<f64, String> {
        let mut samples = Vec::with_capacity(SYNC_SAMPLES);
        for _ in 0..SYNC_SAMPLES {
            if let Some(pause) = pause {
                std::thread::sleep(pause);
            }
            let started = Instant::now();
            file.write_all(line.as_bytes()).map_err(failed)?;
            file.sync_data().map_err(failed)?;
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
        Ok(median(&samples))
    };
    let cost = SyncCost {
        back_to_back: series(None)?,
        paused: series(Some(SYNC_PAUSE))?,
    };
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(cost)
}

/// The tables: every set-up's figures; the default gateway's ratios to
/// direct and to `mcp-proxy` beside the goals, and to each pair of
/// `others` (the set-ups after the first four, two by two); the p50
/// overheads at concurrency 1.
fn report(options: &Options, setups: &[Setup], others: &[String], sync: SyncCost) -> String {
    let medians = |runs: &[Run]| -> Run {
        let of = |pick: fn(&Run) -> f64| median(&runs.iter().map(pick).collect::<Vec<_>>());
        Run {
            per_second: of(|run| run.per_second),
            p50_micros: of(|run| run.p50_micros),
            p99_micros: of(|run| run.p99_micros),
            syncs: None,
        }
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "wrk, one thread, keep-alive; {} interleaved rounds of {} s per set-up and \
         concurrency; stateless 2026-07-28 `tools/call` of `list_notes`, every answer checked; \
         loopback. Medians over the rounds (requests/s: min–max in brackets).\n",
        options.rounds, options.seconds
    );
    let _ = writeln!(out, "| set-up | concurrency | requests/s | p50 | p99 |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for (slot, concurrency) in options.concurrency.iter().enumerate() {
        for setup in setups {
            let runs = &setup.runs[slot];
            let figures = medians(runs);
            let (low, high) = runs.iter().fold((f64::MAX, 0.0_f64), |(low, high), run| {
                (low.min(run.per_second), high.max(run.per_second))
            });
            let _ = writeln!(
                out,
                "| {} | {concurrency} | {:.0} ({low:.0}–{high:.0}) | {:.0} µs | {:.0} µs |",
                setup.name, figures.per_second, figures.p50_micros, figures.p99_micros
            );
        }
    }
    let [direct, disk, tmpfs, proxy, rest @ ..] = setups else {
        return out;
    };
    let pairs: Vec<(&String, &Setup, &Setup)> = others
        .iter()
        .zip(rest.chunks_exact(2))
        .map(|(other, pair)| (other, &pair[0], &pair[1]))
        .collect();
    let _ = writeln!(out, "\n| ratio (requests/s) | concurrency | ratio | goal |");
    let _ = writeln!(out, "|---|---|---|---|");
    for (slot, &concurrency) in options.concurrency.iter().enumerate() {
        let rate = |setup: &Setup| medians(&setup.runs[slot]).per_second;
        for (gateway, log) in [(disk, "disk"), (tmpfs, "tmpfs")] {
            let goal = if concurrency == 64 {
                format!(">= {GOAL_VS_DIRECT_AT_64}x")
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| gateway (log on {log}) / direct | {concurrency} | {:.2}x | {goal} |",
                rate(gateway) / rate(direct)
            );
        }
        for (gateway, log) in [(disk, "disk"), (tmpfs, "tmpfs")] {
            let _ = writeln!(
                out,
                "| gateway (log on {log}) / mcp-proxy | {concurrency} | {:.1}x | >= \
                 {GOAL_VS_PROXY}x |",
                rate(gateway) / rate(proxy)
            );
        }
        for &(other, other_disk, other_tmpfs) in &pairs {
            for (gateway, old, log) in [(disk, other_disk, "disk"), (tmpfs, other_tmpfs, "tmpfs")] {
                let _ = writeln!(
                    out,
                    "| gateway (log on {log}) / {other} | {concurrency} | {:.2}x |  |",
                    rate(gateway) / rate(old)
                );
            }
        }
    }
    if let Some(slot) = options.concurrency.iter().position(|&c| c == 1) {
        let p50 = |setup: &Setup| medians(&setup.runs[slot]).p50_micros;
        let _ = writeln!(
            out,
            "\np50 overhead over direct at concurrency 1: {:.0} µs with the log on disk, {:.0} µs \
             on tmpfs.",
            p50(disk) - p50(direct),
            p50(tmpfs) - p50(direct),
        );
        let _ = writeln!(
            out,
            "The gateway (log on disk): {}.",
            own_share(&disk.runs[slot], &direct.runs[slot])
        );
        let _ = writeln!(
            out,
            "The probe on the disk directory ({SYNC_SAMPLES} appends of one audit line, each \
             synced; medians): one fdatasync {:.0} µs back to back, {:.0} µs {} µs apart.",
            sync.back_to_back,
            sync.paused,
            SYNC_PAUSE.as_micros(),
        );
        for &(other, other_disk, other_tmpfs) in &pairs {
            let _ = writeln!(
                out,
                "{other}: p50 overhead {:.0} µs with the log on disk, {:.0} µs on tmpfs",
                p50(other_disk) - p50(direct),
                p50(other_tmpfs) - p50(direct),
            );
            if other_disk.admin.is_some() {
                let _ = writeln!(
                    out,
                    "{other} (log on disk): {}.",
                    own_share(&other_disk.runs[slot], &direct.runs[slot])
                );
            }
        }
    }
    out
}

/// The goal on the p50 overhead at concurrency 1, against the syncs the
/// gateway made itself in the same runs (`gateway`'s runs with the log on
/// disk, `direct`'s in the same rounds): each round's p50 overhead less
/// the p50 of that run's syncs is the gateway's own share, which the goal
/// holds to at most [`GOAL_P50_SLACK_MICROS`]. Round by round, so that a
/// disk that drifts between rounds moves both figures together.
fn own_share(gateway: &[Run], direct: &[Run]) -> String {
    let rounds: Vec<(f64, SyncsMeasured)> = gateway
        .iter()
        .zip(direct)
        .filter_map(|(run, direct)| {
            let syncs = run.syncs?;
            Some((run.p50_micros - direct.p50_micros - syncs.p50_micros, syncs))
        })
        .collect();
    if rounds.is_empty() {
        return "its own fdatasyncs were not counted (no /metrics)".to_owned();
    }
    let of = |pick: fn(&(f64, SyncsMeasured)) -> f64| {
        let values: Vec<f64> = rounds.iter().map(pick).collect();
        let (low, high) = values
            .iter()
            .fold((f64::MAX, f64::MIN), |(low, high), &value| {
                (low.min(value), high.max(value))
            });
        (median(&values), low, high)
    };
    let (share, low, high) = of(|round| round.0);
    let (sync_p50, sync_low, sync_high) = of(|round| round.1.p50_micros);
    let (mean, _, _) = of(|round| round.1.mean_micros);
    let (per_request, _, _) = of(|round| round.1.per_request);
    format!(
        "its own fdatasyncs of the log on disk in those runs (its /metrics; medians over the \
         rounds): p50 {sync_p50:.0} µs ({sync_low:.0}–{sync_high:.0}), mean {mean:.0} µs, \
         {per_request:.2} per request. The p50 overhead less that p50 sync, round by round: \
         {share:.0} µs ({low:.0}–{high:.0}); goal <= {GOAL_P50_SLACK_MICROS:.0} µs (the p50 \
         overhead at most one fdatasync plus {GOAL_P50_SLACK_MICROS:.0} µs)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/metrics` text as the gateway renders it: other metrics around
    /// the histogram, cumulative buckets, `+Inf`, sum and count.
    fn metrics(buckets: &[(&str, u64)], sum: f64, count: u64) -> String {
        let mut text = String::from(
            "# TYPE mcp_hints_gateway_decisions_total counter\n\
             mcp_hints_gateway_decisions_total{rule=\"default\",decision=\"allow\"} 7\n\
             # TYPE mcp_hints_gateway_audit_sync_duration_seconds histogram\n",
        );
        for (bound, count) in buckets {
            let _ = writeln!(text, "{SYNC_HISTOGRAM}_bucket{{le=\"{bound}\"}} {count}");
        }
        let _ = writeln!(
            text,
            "{SYNC_HISTOGRAM}_sum {sum}\n{SYNC_HISTOGRAM}_count {count}"
        );
        text
    }

    #[test]
    fn the_sync_histogram_is_read_from_the_metrics_text() {
        let text = metrics(&[("0.0001", 1), ("0.0002", 3), ("+Inf", 4)], 0.002, 4);
        let syncs = Syncs::parse(&text).unwrap();
        assert_eq!(
            syncs.buckets,
            vec![(0.0001, 1.0), (0.0002, 3.0), (f64::INFINITY, 4.0)]
        );
        assert_eq!((syncs.sum, syncs.count), (0.002, 4.0));
        assert_eq!(Syncs::parse("").unwrap(), Syncs::default());
        let bad = metrics(&[("soon", 1)], 0.0, 1);
        assert!(Syncs::parse(&bad).unwrap_err().contains("le=\"soon\""));
    }

    #[test]
    fn a_runs_syncs_are_the_difference_and_their_median_is_interpolated() {
        let before = Syncs::parse(&metrics(
            &[("0.0001", 10), ("0.0002", 10), ("0.0004", 10), ("+Inf", 10)],
            0.001,
            10,
        ))
        .unwrap();
        // The run added 100 syncs: 20 up to 200 µs, 80 from 200 to 400 µs.
        let after = Syncs::parse(&metrics(
            &[
                ("0.0001", 10),
                ("0.0002", 30),
                ("0.0004", 110),
                ("+Inf", 110),
            ],
            0.031,
            110,
        ))
        .unwrap();
        let run = after.since(&before);
        assert_eq!(run.count, 100.0);
        // The 50th of 100 is the 30th of the 80 in (200, 400] µs.
        let p50 = run.quantile(0.5).unwrap();
        assert!((p50 - 0.000275).abs() < 1e-12, "{p50}");
        let measured = run.measured(50.0).unwrap();
        assert!((measured.mean_micros - 300.0).abs() < 1e-9);
        assert_eq!(measured.per_request, 2.0);
        // Nothing counted, or only past the last bound: no median.
        assert_eq!(before.since(&before).quantile(0.5), None);
        let slow = Syncs::parse(&metrics(&[("0.0001", 0), ("+Inf", 3)], 3.0, 3)).unwrap();
        assert_eq!(slow.quantile(0.5), None);
    }
}

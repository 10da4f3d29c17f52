//! `mcp-hints audit` against a Python baseline doing the same work with the
//! standard library only (`bench/baseline/audit.py`): wall time and peak
//! memory of the audit of a 10,000-tool server, side by side in one run.
//!
//! Run:
//!
//! ```sh
//! cargo build --release -p mcp-hints-cli --bin mcp-hints && cargo run --release -p mcp-hints-bench --bin audit_bench
//! ```
//!
//! Options: `--rounds N` (5), `--tools N` (10000), `--page-size P` (100),
//! `--cli PATH` (default `<target dir>/release/mcp-hints`, the target dir being
//! `$CARGO_TARGET_DIR` or `<workspace>/target`), `--server PATH` (default
//! `big_server` beside this executable), `--python PATH` (`python3`).
//!
//! Steps: `big_server --dump` writes the pages into a temporary directory;
//! a warm-up round runs every variant once and checks that both audits agree
//! (same tool names, decisions and hints, same exit code); then `--rounds`
//! interleaved rounds run, in each round, `mcp-hints audit --trusted --json
//! -- big_server ...`, `python -S audit.py --trusted -- big_server ...`, then
//! both on the saved pages (`mcp-hints audit --trusted --json FILE...`,
//! `python -S audit.py --trusted --files FILE...`), still checking agreement
//! every time. Each round also times `big_server` alone (this runner as its
//! client) and the interpreter's bare start-up, for context.
//!
//! Measured, for each child: wall time from spawn to reap (live: the server's
//! start, the 100 round trips and its exit included), and peak RSS as
//! `ru_maxrss` from `wait4` of that child. Linux folds into it the peaks of
//! the descendants the child reaped, as a maximum, not a sum: in live mode
//! it is max(audit, big_server), and the runner prints big_server's own peak
//! to show that it is the audit's. The interpreter runs with `-S` (no
//! `site`): the baseline needs only the standard library, and `.pth` start-up
//! hooks of a machine's site-packages are no part of the work compared.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use clap::Parser as _;
use mcp_hints_bench::{median, peers};
use serde_json::Value;

const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// The options, as the README's command gives them.
#[derive(clap::Parser)]
#[command(about = "mcp-hints audit against a Python baseline: wall time and peak memory")]
#[command(args_conflicts_with_subcommands = true)]
struct Args {
    /// Measured rounds after the warm-up round, each running every audit once.
    #[arg(long, default_value_t = 5, value_parser = peers::at_least_one)]
    rounds: usize,
    /// Tools big_server serves.
    #[arg(long, default_value_t = 10_000, value_parser = peers::at_least_one)]
    tools: usize,
    /// Tools per `tools/list` page.
    #[arg(long, default_value_t = 100, value_parser = peers::at_least_one)]
    page_size: usize,
    /// The `mcp-hints` executable measured; by default the release build in
    /// `$CARGO_TARGET_DIR`, else in `<workspace>/target`.
    #[arg(long, value_name = "PATH", default_value_os_t = default_cli())]
    cli: PathBuf,
    /// The big_server executable [default: `big_server` beside this
    /// executable].
    #[arg(long, value_name = "PATH")]
    server: Option<PathBuf>,
    /// The Python interpreter the baseline runs on.
    #[arg(long, value_name = "PATH", default_value = "python3")]
    python: OsString,
    #[command(subcommand)]
    helper: Option<Helper>,
}

/// This program run by itself: see [`spawn_measured`].
#[derive(clap::Subcommand)]
enum Helper {
    /// Runs PROGRAM with its stdout in OUT and its stderr in ERR, and prints
    /// `WALL_SECS PEAK_BYTES CPU_SECS CODE`.
    #[command(long_flag = "spawn-measured", hide = true, disable_help_flag = true)]
    SpawnMeasured {
        /// OUT, ERR, PROGRAM and PROGRAM's arguments, taken as they are:
        /// one list, so that a `--` or a `--help` anywhere after OUT is
        /// PROGRAM's, not clap's.
        #[arg(
            required = true,
            num_args = 3..,
            value_names = ["OUT", "ERR", "PROGRAM", "ARGS"],
            trailing_var_arg = true,
            allow_hyphen_values = true
        )]
        command: Vec<OsString>,
    },
}

/// The options resolved: the paths the run uses.
struct Options {
    rounds: usize,
    tools: usize,
    page_size: usize,
    cli: PathBuf,
    server: PathBuf,
    python: OsString,
    baseline: PathBuf,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench/ is in the workspace")
        .to_path_buf()
}

fn default_cli() -> PathBuf {
    let root = workspace_root();
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir), // an absolute dir replaces root
        _ => root.join("target"),
    };
    target
        .join("release")
        .join(format!("mcp-hints{}", std::env::consts::EXE_SUFFIX))
}

fn default_server() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let dir = exe.parent().ok_or("current_exe has no parent")?;
    Ok(dir.join(format!("big_server{}", std::env::consts::EXE_SUFFIX)))
}

impl Options {
    /// `args` with big_server's default path filled in and the baseline's
    /// path added.
    fn resolve(args: Args) -> Result<Options, String> {
        let server = match args.server {
            Some(server) => server,
            None => default_server()?,
        };
        Ok(Options {
            rounds: args.rounds,
            tools: args.tools,
            page_size: args.page_size,
            cli: args.cli,
            server,
            python: args.python,
            baseline: workspace_root().join("bench/baseline/audit.py"),
        })
    }
}

/// One finished child.
struct Run {
    /// Seconds from spawn to reap.
    wall: f64,
    /// `ru_maxrss`, in bytes.
    peak_rss: u64,
    /// User and system CPU seconds (`ru_utime` + `ru_stime`, reaped
    /// children included).
    cpu: f64,
    /// Exit code, or `None` when a signal ended it.
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// Waits for `pid` with `wait4`: its exit code, its peak RSS in bytes and
/// its CPU seconds.
fn wait4(pid: u32) -> Result<(Option<i32>, u64, f64), String> {
    let mut status = 0;
    // SAFETY: rusage is plain old data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pointers to live locals; pid is our own unreaped child.
        let reaped = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if reaped == pid as libc::pid_t {
            break;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4: {error}"));
        }
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    // Kilobytes on Linux, bytes on macOS.
    let unit = if cfg!(target_os = "macos") { 1 } else { 1024 };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = seconds(usage.ru_utime) + seconds(usage.ru_stime);
    Ok((code, usage.ru_maxrss as u64 * unit, cpu))
}

/// The hidden helper mode, `audit_bench --spawn-measured OUT ERR PROGRAM
/// ARGS...`: runs PROGRAM with its stdout and stderr in the files OUT and
/// ERR and prints `WALL_SECS PEAK_BYTES CPU_SECS CODE` (CODE -1: a signal).
///
/// Why a helper: a child's `ru_maxrss` starts from the peak RSS of the
/// process that spawned it (Linux keeps the old address space's high-water
/// mark across `exec`), and this runner's own peak grows as it parses the
/// audits' outputs. The helper is a fresh, small process that does nothing
/// else, so its children's figures are their own (the floor is the helper's
/// own few MiB, printed as "measurement floor").
fn spawn_measured(command: &[OsString]) -> Result<(), String> {
    let [out, err, program, args @ ..] = command else {
        return Err("usage: --spawn-measured OUT ERR PROGRAM ARGS...".to_owned());
    };
    let create = |path: &OsString| {
        std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.to_string_lossy()))
    };
    let (out, err) = (create(out)?, create(err)?);
    let start = Instant::now();
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.to_string_lossy()))?;
    // Reaped here, not by `child.wait()`, to get its rusage.
    let (code, peak_rss, cpu) = wait4(child.id())?;
    let wall = start.elapsed().as_secs_f64();
    println!("{wall} {peak_rss} {cpu} {}", code.unwrap_or(-1));
    Ok(())
}

/// Runs `program args` to its end through the `--spawn-measured` helper;
/// the output files go in `dir`.
fn measure(program: &Path, args: &[OsString], dir: &Path) -> Result<Run, String> {
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let helper = Command::new(exe)
        .arg("--spawn-measured")
        .args([&out, &err, program])
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run the --spawn-measured helper: {e}"))?;
    let report = String::from_utf8_lossy(&helper.stdout);
    let fields: Vec<&str> = report.split_whitespace().collect();
    let [wall, peak_rss, cpu, code] = fields[..] else {
        return Err(format!(
            "the --spawn-measured helper failed for {}",
            program.display()
        ));
    };
    let bad = || format!("the --spawn-measured helper said `{}`", report.trim());
    let code: i32 = code.parse().map_err(|_| bad())?;
    let read = |path: &Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
    Ok(Run {
        wall: wall.parse().map_err(|_| bad())?,
        peak_rss: peak_rss.parse().map_err(|_| bad())?,
        cpu: cpu.parse().map_err(|_| bad())?,
        code: (code >= 0).then_some(code),
        stdout: read(&out)?,
        stderr: read(&err)?,
    })
}

/// The peak RSS big_server wrote to its `--peak-file`.
fn server_peak(path: &Path) -> Result<u64, String> {
    std::fs::read_to_string(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// big_server alone, this runner as its client: initialize, then every page
/// of tools/list. Returns the wall time, the server's own peak RSS (from
/// `--peak-file`) and the bytes read.
fn serve_alone(options: &Options, dir: &Path) -> Result<(f64, u64, u64), String> {
    let peak_file = dir.join("server-alone-peak");
    let start = Instant::now();
    let mut child = Command::new(&options.server)
        .args(server_args(options))
        .arg("--peak-file")
        .arg(&peak_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", options.server.display()))?;
    let mut input = child.stdin.take().expect("piped");
    let mut output = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = Vec::new();
    let mut bytes = 0;
    // Only the cursor is read: the tools are skipped, not built.
    #[derive(serde::Deserialize)]
    struct Response {
        result: Option<Page>,
    }
    #[derive(serde::Deserialize)]
    struct Page {
        #[serde(rename = "nextCursor")]
        next_cursor: Option<String>,
    }
    let mut exchange = |request: Value, line: &mut Vec<u8>| -> Result<Page, String> {
        writeln!(input, "{request}").map_err(|e| format!("big_server: {e}"))?;
        line.clear();
        output
            .read_until(b'\n', line)
            .map_err(|e| format!("big_server: {e}"))?;
        bytes += line.len() as u64;
        let response: Response = serde_json::from_slice(line)
            .map_err(|e| format!("big_server answered {request}: {e}"))?;
        response.result.ok_or_else(|| {
            format!(
                "big_server answered {request} with {}",
                String::from_utf8_lossy(line)
            )
        })
    };
    exchange(
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params":
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "audit_bench", "version": "0"}}}),
        &mut line,
    )?;
    let mut cursor = None;
    for id in 1.. {
        let params = match &cursor {
            None => serde_json::json!({}),
            Some(cursor) => serde_json::json!({ "cursor": cursor }),
        };
        let page = exchange(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}),
            &mut line,
        )?;
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    drop(input); // end of input: the server exits
    let status = child.wait().map_err(|e| format!("big_server: {e}"))?;
    let wall = start.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("big_server alone: {status}"));
    }
    Ok((wall, server_peak(&peak_file)?, bytes))
}

fn server_args(options: &Options) -> Vec<OsString> {
    vec![
        "--tools".into(),
        options.tools.to_string().into(),
        "--page-size".into(),
        options.page_size.to_string().into(),
    ]
}

/// The real interpreter behind `python` (a pyenv shim is a shell script
/// whose own start-up would be timed too).
fn resolve_python(python: &OsString) -> Result<PathBuf, String> {
    let output = Command::new(python)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.to_string_lossy()))?;
    let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || path.is_empty() {
        return Err(format!(
            "{} does not say where its interpreter is",
            python.to_string_lossy()
        ));
    }
    Ok(path.into())
}

/// What an audit said of each tool: name -> (decision, hints).
type Verdicts = Vec<(String, String, Value)>;

fn verdicts(label: &str, run: &Run) -> Result<Verdicts, String> {
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !matches!(run.code, Some(0 | 1)) {
        return Err(format!(
            "{label} failed ({}): {}",
            run.code
                .map_or("killed by a signal".to_owned(), |code| format!(
                    "exit {code}"
                )),
            stderr.trim()
        ));
    }
    let document: Value = serde_json::from_slice(&run.stdout)
        .map_err(|e| format!("{label}: output is not JSON: {e}"))?;
    let tools = document
        .get("tools")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{label}: output has no `tools` array"))?;
    tools
        .iter()
        .map(|tool| {
            let text = |key: &str| {
                tool.get(key)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{label}: a tool without a string `{key}`: {tool}"))
            };
            let hints = tool.get("hints").cloned().unwrap_or_default();
            Ok((text("name")?, text("decision")?, hints))
        })
        .collect()
}

/// Checks that both audits name the same tools, decide the same and read
/// the same hints (value and provenance).
fn agree(rust: &Run, python: &Run) -> Result<(usize, usize), String> {
    let mut ours = verdicts("mcp-hints audit", rust)?;
    let mut theirs = verdicts("audit.py", python)?;
    if rust.code != python.code {
        return Err(format!(
            "exit codes differ: mcp-hints {:?}, audit.py {:?}",
            rust.code, python.code
        ));
    }
    ours.sort_by(|a, b| a.0.cmp(&b.0));
    theirs.sort_by(|a, b| a.0.cmp(&b.0));
    if ours.len() != theirs.len() {
        return Err(format!(
            "mcp-hints lists {} tools, audit.py {}",
            ours.len(),
            theirs.len()
        ));
    }
    for ((name, decision, hints), (py_name, py_decision, py_hints)) in ours.iter().zip(&theirs) {
        if name != py_name {
            return Err(format!(
                "tool names differ: mcp-hints has `{name}` where audit.py has `{py_name}`"
            ));
        }
        if decision != py_decision {
            return Err(format!(
                "`{name}`: mcp-hints decides {decision}, audit.py {py_decision}"
            ));
        }
        for hint in HINTS {
            let pick = |hints: &Value, key: &str| hints.get(hint).and_then(|h| h.get(key)).cloned();
            for key in ["value", "provenance"] {
                if pick(hints, key) != pick(py_hints, key) {
                    return Err(format!(
                        "`{name}`: {hint}.{key} is {:?} for mcp-hints, {:?} for audit.py",
                        pick(hints, key),
                        pick(py_hints, key)
                    ));
                }
            }
        }
    }
    let resend = ours.iter().filter(|(_, d, _)| d == "resend").count();
    Ok((ours.len(), resend))
}

/// Removes the temporary directory however the run ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

#[derive(Default)]
struct Samples {
    wall: Vec<f64>,
    cpu: Vec<f64>,
    rss: Vec<f64>,
}

impl Samples {
    fn push(&mut self, run: &Run) {
        self.wall.push(run.wall);
        self.cpu.push(run.cpu);
        self.rss.push(run.peak_rss as f64);
    }
}

fn run(options: &Options) -> Result<bool, String> {
    let python = check_inputs(options)?;
    let dir =
        TempDir(std::env::temp_dir().join(format!("mcp-hints-audit-bench-{}", std::process::id())));
    let pages = dump_pages(options, &dir.0)?;
    // The floor of the peak figures: a tiny program run the same way.
    let floor = measure(&options.server, &["--help".into()], &dir.0)?.peak_rss;
    let peak_file = dir.0.join("server-peak");
    let commands = Commands::new(options, &pages, &peak_file);
    print_header(options, &python, &pages);
    let rounds = measure_rounds(options, &python, &commands, &dir.0, &peak_file)?;
    Ok(report(&rounds, &pages, floor))
}

/// Checks that the CLI, big_server and the baseline are where the options
/// say; returns the real interpreter behind `--python`.
fn check_inputs(options: &Options) -> Result<PathBuf, String> {
    for (path, what, hint) in [
        (
            &options.cli,
            "the mcp-hints CLI",
            "build it with `cargo build --release -p mcp-hints-cli --bin mcp-hints`, or pass --cli PATH",
        ),
        (
            &options.server,
            "big_server",
            "build it with `cargo build --release -p mcp-hints-bench --bin big_server`, or pass --server PATH",
        ),
        (
            &options.baseline,
            "the Python baseline",
            "it ships in bench/baseline/",
        ),
    ] {
        if !path.is_file() {
            return Err(format!("{what} is not at {}: {hint}", path.display()));
        }
    }
    resolve_python(&options.python)
}

/// The pages big_server saved with `--dump`.
struct Pages {
    /// The page files, in order.
    paths: Vec<PathBuf>,
    /// Their total size, in bytes.
    json_size: u64,
}

/// Runs `big_server --dump` into `dir/pages`.
fn dump_pages(options: &Options, dir: &Path) -> Result<Pages, String> {
    let page_dir = dir.join("pages");
    let mut dump_args = server_args(options);
    dump_args.extend(["--dump".into(), page_dir.clone().into_os_string()]);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dump = measure(&options.server, &dump_args, dir)?;
    if dump.code != Some(0) {
        return Err(format!(
            "big_server --dump failed: {}",
            String::from_utf8_lossy(&dump.stderr).trim()
        ));
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&page_dir)
        .and_then(|entries| entries.map(|entry| entry.map(|e| e.path())).collect())
        .map_err(|e| format!("{}: {e}", page_dir.display()))?;
    paths.sort();
    let json_size: u64 = paths
        .iter()
        .map(|page| std::fs::metadata(page).map(|m| m.len()))
        .sum::<std::io::Result<u64>>()
        .map_err(|e| e.to_string())?;
    Ok(Pages { paths, json_size })
}

/// The arguments of each measured run.
struct Commands {
    /// `mcp-hints audit` of big_server over stdio.
    rust_live: Vec<OsString>,
    /// `mcp-hints audit` of the saved pages.
    rust_files: Vec<OsString>,
    /// `audit.py` of big_server over stdio.
    py_live: Vec<OsString>,
    /// `audit.py` of the saved pages.
    py_files: Vec<OsString>,
    /// The interpreter's bare start-up.
    bare: Vec<OsString>,
}

impl Commands {
    /// The live runs' big_server writes its peak to `peak_file`.
    fn new(options: &Options, pages: &Pages, peak_file: &Path) -> Commands {
        let mut live_tail: Vec<OsString> = vec!["--".into(), options.server.clone().into()];
        live_tail.extend(server_args(options));
        live_tail.extend(["--peak-file".into(), peak_file.to_path_buf().into()]);
        let audit = |mut args: Vec<OsString>, tail: &[OsString]| {
            args.extend(tail.iter().cloned());
            args
        };
        let page_args: Vec<OsString> = pages
            .paths
            .iter()
            .map(|p| p.clone().into_os_string())
            .collect();
        let rust_head: Vec<OsString> = vec!["audit".into(), "--trusted".into(), "--json".into()];
        let py_head: Vec<OsString> = vec![
            "-S".into(),
            options.baseline.clone().into(),
            "--trusted".into(),
        ];
        Commands {
            rust_live: audit(rust_head.clone(), &live_tail),
            rust_files: audit(rust_head, &page_args),
            py_live: audit(py_head.clone(), &live_tail),
            py_files: audit(audit(py_head, &["--files".into()]), &page_args),
            bare: vec!["-S".into(), "-c".into(), "pass".into()],
        }
    }
}

fn print_header(options: &Options, python: &Path, pages: &Pages) {
    println!(
        "audit of {} tools in {} pages of {} ({} bytes of JSON); {} rounds after a warm-up",
        options.tools,
        pages.paths.len(),
        options.page_size,
        pages.json_size,
        options.rounds
    );
    println!(
        "  mcp-hints: {} audit --trusted --json",
        options.cli.display()
    );
    println!(
        "  python:    {} -S {} --trusted",
        python.display(),
        options.baseline.display()
    );
    println!("  server:    {}", options.server.display());
}

/// What the measured rounds gathered.
struct Rounds {
    ours_live: Samples,
    theirs_live: Samples,
    ours_files: Samples,
    theirs_files: Samples,
    /// big_server alone: wall time and its own peak.
    alone: Samples,
    /// `python -S -c pass`.
    startup: Samples,
    /// big_server's own peaks under the live audits, in bytes.
    server_peaks: Vec<f64>,
    /// Bytes big_server alone wrote, JSON-RPC envelopes included.
    wire: u64,
    /// Tools audited and how many of them are `resend`.
    summary: (usize, usize),
}

/// The warm-up round and `--rounds` measured rounds, each checking that
/// the audits agree; prints a line per measured round.
fn measure_rounds(
    options: &Options,
    python: &Path,
    commands: &Commands,
    dir: &Path,
    peak_file: &Path,
) -> Result<Rounds, String> {
    let [
        ours_live,
        theirs_live,
        ours_files,
        theirs_files,
        alone,
        startup,
    ] = std::array::from_fn(|_| Samples::default());
    let mut rounds = Rounds {
        ours_live,
        theirs_live,
        ours_files,
        theirs_files,
        alone,
        startup,
        server_peaks: Vec::new(),
        wire: 0,
        summary: (0, 0),
    };
    let live_run = |args: &[OsString], program: &Path| -> Result<(Run, f64), String> {
        let _ = std::fs::remove_file(peak_file);
        let run = measure(program, args, dir)?;
        // Read only if the audit got that far; `agree` reports failures.
        let peak = server_peak(peak_file).map_or(0.0, |peak| peak as f64);
        Ok((run, peak))
    };
    for round in 0..=options.rounds {
        let (rl, rl_server) = live_run(&commands.rust_live, &options.cli)?;
        let (pl, pl_server) = live_run(&commands.py_live, python)?;
        let live = agree(&rl, &pl).map_err(|e| format!("live audits disagree: {e}"))?;
        let rf = measure(&options.cli, &commands.rust_files, dir)?;
        let pf = measure(python, &commands.py_files, dir)?;
        let files = agree(&rf, &pf).map_err(|e| format!("saved-pages audits disagree: {e}"))?;
        if live != files {
            return Err(format!(
                "live and saved pages differ: {live:?} vs {files:?} (tools, resend)"
            ));
        }
        if live.0 != options.tools {
            return Err(format!(
                "{} tools audited, {} served",
                live.0, options.tools
            ));
        }
        rounds.summary = live;
        let (alone_wall, alone_peak, bytes) = serve_alone(options, dir)?;
        rounds.wire = bytes;
        let bare_run = measure(python, &commands.bare, dir)?;
        if round == 0 {
            continue; // warm-up
        }
        println!(
            "round {round}: live {:.3} s / {:.3} s, saved {:.3} s / {:.3} s (mcp-hints / python)",
            rl.wall, pl.wall, rf.wall, pf.wall
        );
        rounds.ours_live.push(&rl);
        rounds.theirs_live.push(&pl);
        rounds.ours_files.push(&rf);
        rounds.theirs_files.push(&pf);
        rounds.alone.wall.push(alone_wall);
        rounds.alone.rss.push(alone_peak as f64);
        rounds.server_peaks.extend([rl_server, pl_server]);
        rounds.startup.push(&bare_run);
    }
    Ok(rounds)
}

/// Prints the medians, the goals and the notes on what was measured;
/// tells whether both goals were met. `floor` is the helper's own peak, in
/// bytes.
fn report(rounds: &Rounds, pages: &Pages, floor: u64) -> bool {
    let Rounds {
        ours_live,
        theirs_live,
        ours_files,
        theirs_files,
        alone,
        startup,
        server_peaks,
        wire,
        summary,
    } = rounds;
    let json_size = pages.json_size;
    println!(
        "\nboth audits agree: {} tools, {} resend, {} read_back_first (same names, decisions, hints and exit code)",
        summary.0,
        summary.1,
        summary.0 - summary.1
    );
    println!("\nmedians              mcp-hints      python         python/mcp-hints");
    let mut pass = true;
    for (label, ours, theirs) in [
        ("live (stdio)", ours_live, theirs_live),
        ("saved pages", ours_files, theirs_files),
    ] {
        let (wall, py_wall) = (median(&ours.wall), median(&theirs.wall));
        let (rss, py_rss) = (median(&ours.rss), median(&theirs.rss));
        println!(
            "{label:<13} wall   {:<14} {:<14} {:.2}x",
            format!("{wall:.3} s"),
            format!("{py_wall:.3} s"),
            py_wall / wall
        );
        let (cpu, py_cpu) = (median(&ours.cpu), median(&theirs.cpu));
        println!(
            "{:<13} cpu    {:<14} {:<14} {:.2}x",
            "",
            format!("{cpu:.3} s"),
            format!("{py_cpu:.3} s"),
            py_cpu / cpu
        );
        println!(
            "{:<13} peak   {:<14} {:<14} {:.2}x",
            "",
            mib(rss),
            mib(py_rss),
            py_rss / rss
        );
        let speed_ok = py_wall / wall >= 5.0;
        let memory_ok = rss < 4.0 * json_size as f64;
        pass &= speed_ok && memory_ok;
        println!(
            "{:<13} mcp-hints peak / JSON size = {:.2}x (goal under 4x: {}); speed-up (goal 5x): {}",
            "",
            rss / json_size as f64,
            if memory_ok { "met" } else { "NOT met" },
            if speed_ok { "met" } else { "NOT met" },
        );
    }
    let server_max = server_peaks.iter().copied().fold(0.0, f64::max);
    println!(
        "\nJSON: {json_size} bytes ({}) in the {} saved pages; {wire} bytes on the wire (JSON-RPC envelopes included)",
        mib(json_size as f64),
        pages.paths.len()
    );
    println!(
        "big_server alone (this runner as its client): {:.3} s, peak {}; its peak under the live audits: at most {}",
        median(&alone.wall),
        mib(median(&alone.rss)),
        mib(server_max)
    );
    println!(
        "python -S -c pass (interpreter start-up): {:.3} s, peak {}",
        median(&startup.wall),
        mib(median(&startup.rss))
    );
    println!(
        "\nwall: spawn to reap of the audit process (live: the server's start, {} round trips and its exit).\n\
         cpu: user + system time of the audit process and of the children it reaped (live: big_server).\n\
         peak: ru_maxrss of the audit process (wait4), spawned by a fresh helper process so that no\n\
         parent's peak carries over (measurement floor: {}). Linux folds in the peaks of the children\n\
         the audit reaped as a maximum, not a sum: live, that is max(audit, big_server), and big_server's\n\
         own peak (VmHWM, above) is below the audits' unless a warning follows.",
        pages.paths.len(),
        mib(floor as f64)
    );
    if server_max >= median(&ours_live.rss).min(median(&theirs_live.rss)) {
        println!(
            "WARNING: big_server's own peak reaches an audit's: a live peak figure may be the server's"
        );
    }
    pass
}

fn main() -> ExitCode {
    // clap prints the usage and exits 2 for a bad option, 0 for --help.
    let args = Args::parse();
    if let Some(Helper::SpawnMeasured { command }) = &args.helper {
        return match spawn_measured(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("audit_bench --spawn-measured: {message}");
                ExitCode::from(2)
            }
        };
    }
    let options = match Options::resolve(args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("audit_bench: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("\ngoals NOT met");
            ExitCode::FAILURE
        }
        Err(message) => {
            eprintln!("audit_bench: {message}");
            ExitCode::from(2)
        }
    }
}

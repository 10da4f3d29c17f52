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

use mcp_hints_bench::median;
use serde_json::Value;

const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

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

const USAGE: &str = "usage: audit_bench [--rounds N (5)] [--tools N (10000)] [--page-size P (100)] \
                     [--cli PATH] [--server PATH] [--python PATH (python3)]";

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        rounds: 5,
        tools: 10_000,
        page_size: 100,
        cli: default_cli(),
        server: PathBuf::new(),
        python: "python3".into(),
        baseline: workspace_root().join("bench/baseline/audit.py"),
    };
    let mut server = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let arg = arg.to_string_lossy().into_owned();
        let mut value = |name: &str| args.next().ok_or_else(|| format!("`{name}` needs a value"));
        let number = |name: &str, value: OsString| {
            value
                .to_str()
                .and_then(|value| value.parse().ok())
                .filter(|&value: &usize| value > 0)
                .ok_or_else(|| format!("`{name}` needs a positive number"))
        };
        match arg.as_str() {
            "--rounds" => options.rounds = number("--rounds", value("--rounds")?)?,
            "--tools" => options.tools = number("--tools", value("--tools")?)?,
            "--page-size" => options.page_size = number("--page-size", value("--page-size")?)?,
            "--cli" => options.cli = value("--cli")?.into(),
            "--server" => server = Some(value("--server")?.into()),
            "--python" => options.python = value("--python")?,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument `{other}` (see --help)")),
        }
    }
    options.server = match server {
        Some(server) => server,
        None => default_server()?,
    };
    Ok(options)
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
fn spawn_measured(args: &[OsString]) -> Result<(), String> {
    let [out, err, program, args @ ..] = args else {
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
    let python = resolve_python(&options.python)?;

    let dir =
        TempDir(std::env::temp_dir().join(format!("mcp-hints-audit-bench-{}", std::process::id())));
    let page_dir = dir.0.join("pages");
    let mut dump_args = server_args(options);
    dump_args.extend(["--dump".into(), page_dir.clone().into_os_string()]);
    std::fs::create_dir_all(&dir.0).map_err(|e| format!("{}: {e}", dir.0.display()))?;
    let dump = measure(&options.server, &dump_args, &dir.0)?;
    if dump.code != Some(0) {
        return Err(format!(
            "big_server --dump failed: {}",
            String::from_utf8_lossy(&dump.stderr).trim()
        ));
    }
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&page_dir)
        .and_then(|entries| entries.map(|entry| entry.map(|e| e.path())).collect())
        .map_err(|e| format!("{}: {e}", page_dir.display()))?;
    pages.sort();
    let json_size: u64 = pages
        .iter()
        .map(|page| std::fs::metadata(page).map(|m| m.len()))
        .sum::<std::io::Result<u64>>()
        .map_err(|e| e.to_string())?;
    // The floor of the peak figures: a tiny program run the same way.
    let floor = measure(&options.server, &["--help".into()], &dir.0)?.peak_rss;

    let peak_file = dir.0.join("server-peak");
    let mut live_tail: Vec<OsString> = vec!["--".into(), options.server.clone().into()];
    live_tail.extend(server_args(options));
    live_tail.extend(["--peak-file".into(), peak_file.clone().into()]);
    let audit = |mut args: Vec<OsString>, tail: &[OsString]| {
        args.extend(tail.iter().cloned());
        args
    };
    let page_args: Vec<OsString> = pages.iter().map(|p| p.clone().into_os_string()).collect();
    let rust_head: Vec<OsString> = vec!["audit".into(), "--trusted".into(), "--json".into()];
    let rust_live = audit(rust_head.clone(), &live_tail);
    let rust_files = audit(rust_head, &page_args);
    let py_head: Vec<OsString> = vec![
        "-S".into(),
        options.baseline.clone().into(),
        "--trusted".into(),
    ];
    let py_live = audit(py_head.clone(), &live_tail);
    let py_files = audit(audit(py_head, &["--files".into()]), &page_args);
    let bare: Vec<OsString> = vec!["-S".into(), "-c".into(), "pass".into()];

    println!(
        "audit of {} tools in {} pages of {} ({json_size} bytes of JSON); {} rounds after a warm-up",
        options.tools,
        pages.len(),
        options.page_size,
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

    let [
        mut ours_live,
        mut theirs_live,
        mut ours_files,
        mut theirs_files,
        mut alone,
        mut startup,
    ] = std::array::from_fn(|_| Samples::default());
    let mut server_peaks = Vec::new();
    let mut wire = 0;
    let mut summary = (0, 0);
    let live_run = |args: &[OsString], program: &Path| -> Result<(Run, f64), String> {
        let _ = std::fs::remove_file(&peak_file);
        let run = measure(program, args, &dir.0)?;
        // Read only if the audit got that far; `agree` reports failures.
        let peak = server_peak(&peak_file).map_or(0.0, |peak| peak as f64);
        Ok((run, peak))
    };
    for round in 0..=options.rounds {
        let (rl, rl_server) = live_run(&rust_live, &options.cli)?;
        let (pl, pl_server) = live_run(&py_live, &python)?;
        let live = agree(&rl, &pl).map_err(|e| format!("live audits disagree: {e}"))?;
        let rf = measure(&options.cli, &rust_files, &dir.0)?;
        let pf = measure(&python, &py_files, &dir.0)?;
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
        summary = live;
        let (alone_wall, alone_peak, bytes) = serve_alone(options, &dir.0)?;
        wire = bytes;
        let bare_run = measure(&python, &bare, &dir.0)?;
        if round == 0 {
            continue; // warm-up
        }
        println!(
            "round {round}: live {:.3} s / {:.3} s, saved {:.3} s / {:.3} s (mcp-hints / python)",
            rl.wall, pl.wall, rf.wall, pf.wall
        );
        ours_live.push(&rl);
        theirs_live.push(&pl);
        ours_files.push(&rf);
        theirs_files.push(&pf);
        alone.wall.push(alone_wall);
        alone.rss.push(alone_peak as f64);
        server_peaks.extend([rl_server, pl_server]);
        startup.push(&bare_run);
    }

    println!(
        "\nboth audits agree: {} tools, {} resend, {} read_back_first (same names, decisions, hints and exit code)",
        summary.0,
        summary.1,
        summary.0 - summary.1
    );
    println!("\nmedians              mcp-hints      python         python/mcp-hints");
    let mut pass = true;
    for (label, ours, theirs) in [
        ("live (stdio)", &ours_live, &theirs_live),
        ("saved pages", &ours_files, &theirs_files),
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
        pages.len()
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
        pages.len(),
        mib(floor as f64)
    );
    if server_max >= median(&ours_live.rss).min(median(&theirs_live.rss)) {
        println!(
            "WARNING: big_server's own peak reaches an audit's: a live peak figure may be the server's"
        );
    }
    Ok(pass)
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|arg| arg == "--spawn-measured") {
        return match spawn_measured(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("audit_bench --spawn-measured: {message}");
                ExitCode::from(2)
            }
        };
    }
    let options = match parse_args() {
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

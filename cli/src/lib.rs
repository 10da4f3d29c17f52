#![doc = include_str!("../README.md")]

pub mod args;
pub mod audit;
pub mod gateway;
pub mod lint;
pub mod live;
pub mod progress;
pub mod source;
mod table;
pub mod text;
pub mod verify;

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use anstyle::{AnsiColor, Style};
use mcp_hints::collect::CollectOptions;
use mcp_hints::fingerprint::Lock;
use mcp_hints::policy::Trust;
use serde_json::json;

use crate::args::{
    AuditArgs, Cli, Command, GatewayArgs, GatewayCommand, LintArgs, PinArgs, ServeArgs,
};
use crate::audit::Audit;
use crate::lint::{Finding, Rule};

/// Exit status for bad or incomplete input, or a server that cannot be
/// reached.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Reads the process's command line. `Err` is the exit status when clap
/// answers it alone: help and version, written to stdout (0; 2 with the
/// reason on stderr when stdout is closed or a write fails, as for every
/// command's output; a reader gone early leaves 0), or a usage error,
/// written to stderr (clap's status, 2).
pub fn command_line() -> Result<Cli, ExitCode> {
    use clap::Parser;
    let error = match Cli::try_parse() {
        Ok(cli) => return Ok(cli),
        Err(error) => error,
    };
    if error.use_stderr() {
        let _ = error.print();
        return Err(ExitCode::from(
            u8::try_from(error.exit_code()).unwrap_or(EXIT_BAD_INPUT),
        ));
    }
    let what = match error.kind() {
        clap::error::ErrorKind::DisplayVersion => "version",
        _ => "help",
    };
    if stdout_closed() {
        return Err(failed(
            false,
            &format!("cannot write the {what}: stdout is closed (`>&-`); redirect it to a file"),
        ));
    }
    match print_as(&error.render().ansi().to_string(), what) {
        Ok(()) => Err(ExitCode::SUCCESS),
        Err(message) => Err(failed(false, &message)),
    }
}

/// Whether `cli` serves many clients at once (`gateway serve` over HTTP),
/// and so is best run on a multi-threaded runtime: every other command,
/// and a gateway serving one stdio client, talks to one peer at a time,
/// which one thread serves best (no wake-ups of other threads per
/// message; see `mcp_hints::stdio`).
pub fn serves_many_clients(cli: &Cli) -> bool {
    matches!(
        &cli.command,
        Command::Gateway(GatewayArgs {
            command: GatewayCommand::Serve(ServeArgs { stdio: false, .. })
        })
    )
}

/// Runs the command line `cli` and returns its exit status.
///
/// SIGINT, SIGTERM and SIGHUP end the run at once: the live server, in a
/// process group of its own that a terminal's Ctrl-C does not reach, is
/// stopped with its group, and the status is 128 plus the signal's number.
pub async fn run(cli: Cli) -> ExitCode {
    let (json, output) = match &cli.command {
        Command::Audit(args) => (args.json, "report"),
        Command::Lint(args) => (args.json, "report"),
        Command::Pin(_) => (false, "lock"),
        Command::Verify(args) => (args.json, "report"),
        Command::Gateway(_) => (false, "output"),
        Command::Completions(_) => (false, "completion script"),
    };
    // A gateway serving HTTP writes nothing to stdout.
    let needs_stdout = !serves_many_clients(&cli);
    if needs_stdout && stdout_closed() {
        // Checked before a server is started for nothing.
        return failed(
            json,
            &format!("cannot write the {output}: stdout is closed (`>&-`); redirect it to a file"),
        );
    }
    // The gateway stops on a signal by itself: it lets requests in flight
    // finish and stops its upstreams, then exits 0.
    let serving = matches!(
        &cli.command,
        Command::Gateway(GatewayArgs {
            command: GatewayCommand::Serve(_)
        })
    );
    let command = async {
        match cli.command {
            Command::Audit(args) => (args.json, audit(args).await),
            Command::Lint(args) => (args.json, lint(args).await),
            Command::Pin(args) => (false, pin(args).await),
            Command::Verify(args) => (args.json, verify::run(args).await),
            Command::Gateway(args) => (false, gateway::run(args).await),
            Command::Completions(args) => (false, completions(&args)),
        }
    };
    let (json, result) = if serving {
        command.await
    } else {
        tokio::select! {
            // Watch the signals before the command starts a server.
            biased;
            (name, number) = interrupted() => {
                // Dropping the command's future dropped its session, which
                // kills the server's process group.
                let _ = writeln!(
                    anstream::stderr(),
                    "error: stopped by {name} (any server it started is stopped with it)"
                );
                return ExitCode::from(128 + number);
            }
            outcome = command => outcome,
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(message) => failed(json, &message),
    }
}

/// `mcp-hints completions SHELL`: the shell's completion script for every
/// subcommand and flag, generated by `clap_complete` from the same
/// definitions the parser uses. Exit status 0.
///
/// # Errors
///
/// Stdout cannot be written (see [`print`]).
fn completions(args: &args::CompletionsArgs) -> Result<u8, String> {
    use clap::CommandFactory;
    const BIN: &str = "mcp-hints";
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), BIN, &mut script);
    let mut script = String::from_utf8_lossy(&script).into_owned();
    if args.shell == clap_complete::Shell::Bash {
        // clap_complete 4.6's bash script names a subcommand's state
        // `mcp__hints__subcmd__audit` where it walks the words but
        // `mcp__subcmd__hints__subcmd__audit` in the arms that complete it,
        // for a binary whose name has a hyphen (clap-rs/clap#6421): nothing
        // past the first word would complete. The arms are spelt as the
        // walk spells them.
        script = script.replace(&BIN.replace('-', "__subcmd__"), &BIN.replace('-', "__"));
    }
    print(&script).map(|()| 0)
}

/// Says why the command failed, on stderr (and with `--json` on stdout as
/// `{"error": ...}`), and returns exit status 2. The message may quote a
/// server: every character that could forge a line or drive the terminal
/// is escaped, but its own lines (a server's stderr) are kept.
fn failed(json: bool, message: &str) -> ExitCode {
    if json {
        // The report's reader may be gone; stderr still says why.
        let _ = writeln!(std::io::stdout(), "{}", json!({ "error": message }));
    }
    let message = text::shown_lines(message);
    let style = Style::new().fg_color(Some(AnsiColor::Red.into())).bold();
    let _ = writeln!(
        anstream::stderr(),
        "{}error{}: {message}",
        style.render(),
        style.render_reset()
    );
    ExitCode::from(EXIT_BAD_INPUT)
}

/// Set when descriptor 1 was closed as the process started.
static STDOUT_CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

/// Records that stdout was closed when the process started (`>&-`), as
/// the `mcp-hints` executable finds out before `main` (Rust's runtime then
/// reopens it on /dev/null, where the report would vanish unseen). [`run`]
/// then writes nothing and exits with status 2.
pub fn stdout_closed_at_start() {
    STDOUT_CLOSED_AT_START.store(true, Ordering::Relaxed);
}

fn stdout_closed() -> bool {
    STDOUT_CLOSED_AT_START.load(Ordering::Relaxed)
}

/// The first of SIGINT, SIGTERM and SIGHUP to arrive: its name and number.
/// Never, where they cannot be watched.
#[cfg(unix)]
async fn interrupted() -> (&'static str, u8) {
    use tokio::signal::unix::{SignalKind, signal};
    let watch = |kind| signal(kind).ok();
    let (mut int, mut term, mut hup) = (
        watch(SignalKind::interrupt()),
        watch(SignalKind::terminate()),
        watch(SignalKind::hangup()),
    );
    async fn next(signal: &mut Option<tokio::signal::unix::Signal>) {
        match signal {
            Some(signal) => {
                signal.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    tokio::select! {
        () = next(&mut int) => ("SIGINT", 2),
        () = next(&mut term) => ("SIGTERM", 15),
        () = next(&mut hup) => ("SIGHUP", 1),
    }
}

/// Ctrl-C, where Unix signals do not exist.
#[cfg(not(unix))]
async fn interrupted() -> (&'static str, u8) {
    match tokio::signal::ctrl_c().await {
        Ok(()) => ("Ctrl-C", 2),
        Err(_) => std::future::pending().await,
    }
}

/// Writes a command's output (a report, log entries, a decision); colour
/// is stripped unless stdout is a terminal (or CLICOLOR_FORCE is set).
pub(crate) fn print(text: &str) -> Result<(), String> {
    print_as(text, "report")
}

/// [`print()`], for `what` (the help, the version) in its error.
fn print_as(text: &str, what: &str) -> Result<(), String> {
    let mut stdout = anstream::stdout();
    written_as(
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush()),
        what,
    )
}

/// A broken pipe means the output's reader went away (`| head`): nothing
/// is lost that anyone reads (a gateway decision is taken anyway), so the
/// exit status stays the command's. Any other write error (a full disk, a
/// closed stdout) is exit 2.
fn written(result: std::io::Result<()>) -> Result<(), String> {
    written_as(result, "report")
}

/// [`written`], for `what` in its error.
fn written_as(result: std::io::Result<()>, what: &str) -> Result<(), String> {
    match result {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write the {what}: {error}"))
        }
        _ => Ok(()),
    }
}

async fn audit(args: AuditArgs) -> Result<u8, String> {
    let lock = args.pinned.as_deref().map(audit::read_lock).transpose()?;
    let options = CollectOptions {
        max_pages: args.target.connect.max_pages,
        fingerprints: lock.is_some(),
        keep_definitions: lock.is_some(),
    };
    let progress = progress::Progress::new(args.quiet);
    if let Some(target) = source::live_target(args.target.url.as_deref(), &args.target.command) {
        progress.say(&format!(
            "waiting for server/discover or initialize, then tools/list (--timeout {} s \
             each) from {target}",
            args.target.connect.timeout.as_secs_f64()
        ));
    }
    let fetched = source::fetch(&args.target, options).await;
    progress.clear();
    let (list, origin) = fetched.map_err(|error| error.to_string())?;
    let drift = match (&lock, &args.pinned) {
        (Some(lock), Some(path)) => Some((
            path.display().to_string(),
            lock.diff(&list).map_err(|error| error.to_string())?,
        )),
        _ => None,
    };
    let trust = if args.trusted {
        Trust::Trusted
    } else {
        Trust::Untrusted
    };
    let audit = Audit::new(&list, trust, drift);
    if args.json {
        let mut out = text::JsonForTerminal::new(std::io::BufWriter::with_capacity(
            1 << 16,
            std::io::stdout().lock(),
        ));
        written(
            audit
                .write_json(&origin, &mut out)
                .map_err(std::io::Error::from)
                .and_then(|()| writeln!(out))
                .and_then(|()| out.flush()),
        )?;
    } else {
        print(&audit.to_text(&origin))?;
    }
    Ok(audit.exit_code())
}

fn enabled_rules(args: &LintArgs) -> Result<Vec<Rule>, String> {
    let allowed = args
        .allow
        .iter()
        .map(|id| Rule::parse(id))
        .collect::<Result<Vec<_>, _>>()?;
    let warned = args
        .warn
        .iter()
        .map(|id| Rule::parse(id))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(both) = allowed.iter().find(|rule| warned.contains(rule)) {
        return Err(format!("`{both}` is given to both --allow and --warn"));
    }
    Ok(Rule::ALL
        .into_iter()
        .filter(|rule| warned.contains(rule) || (rule.on_by_default() && !allowed.contains(rule)))
        .collect())
}

async fn lint(args: LintArgs) -> Result<u8, String> {
    let rules = enabled_rules(&args)?;
    let options = CollectOptions {
        max_pages: args.target.connect.max_pages,
        fingerprints: false,
        keep_definitions: true,
    };
    let (list, origin) = source::fetch(&args.target, options)
        .await
        .map_err(|error| error.to_string())?;
    let findings = lint::check(&list, &rules);
    let level = if args.deny { "error" } else { "warning" };
    if args.json {
        let mut report = origin.to_json();
        let fields = json!({
            "rules": rules.iter().map(|rule| rule.id()).collect::<Vec<_>>(),
            "tools": list.tools.len(),
            "findings": findings.iter().map(|finding| json!({
                "rule": finding.rule.id(),
                "level": level,
                "tool": finding.tool,
                "page": finding.page,
                "message": finding.message,
                "note": finding.note,
                "help": finding.help,
            })).collect::<Vec<_>>(),
        });
        if let (serde_json::Value::Object(report), serde_json::Value::Object(fields)) =
            (&mut report, fields)
        {
            report.extend(fields);
        }
        print(&text::json_for_terminal(&format!("{report:#}\n")))?;
    } else {
        print(&lint_text(&findings, list.tools.len(), args.deny))?;
    }
    Ok(u8::from(args.deny && !findings.is_empty()))
}

fn lint_text(findings: &[Finding], tools: usize, deny: bool) -> String {
    let (level, color) = if deny {
        ("error", AnsiColor::Red)
    } else {
        ("warning", AnsiColor::Yellow)
    };
    let level_style = Style::new().fg_color(Some(color.into())).bold();
    let blue = Style::new().fg_color(Some(AnsiColor::Blue.into())).bold();
    let bold = Style::new().bold();
    let (l, lr) = (level_style.render(), level_style.render_reset());
    let (b, br) = (blue.render(), blue.render_reset());
    let (s, sr) = (bold.render(), bold.render_reset());
    let mut out = String::new();
    for finding in findings {
        // The messages quote the server (escaped where they were put
        // together); each line is escaped once more as a whole.
        out.push_str(&format!(
            "{l}{level}[{}]{lr}{s}: {}{sr}\n",
            finding.rule,
            text::one_line(&finding.message)
        ));
        out.push_str(&format!(
            "  {b}-->{br} tool `{}` (page {})\n",
            text::shown(&finding.tool),
            finding.page
        ));
        if let Some(note) = &finding.note {
            out.push_str(&format!(
                "   {b}={br} {s}note{sr}: {}\n",
                text::one_line(note)
            ));
        }
        out.push_str(&format!(
            "   {b}={br} {s}help{sr}: {}\n\n",
            text::one_line(&finding.help)
        ));
    }
    let mut with_findings: Vec<&str> = findings.iter().map(|f| f.tool.as_str()).collect();
    with_findings.sort_unstable();
    with_findings.dedup();
    if findings.is_empty() {
        out.push_str(&format!(
            "no findings in {}\n",
            text::count(tools, "tool", "tools")
        ));
    } else {
        let plural = if findings.len() == 1 { "" } else { "s" };
        out.push_str(&format!(
            "{l}{level}{lr}{s}: {} finding{plural} in {} of {}{sr}\n",
            findings.len(),
            with_findings.len(),
            text::count(tools, "tool", "tools")
        ));
    }
    out
}

async fn pin(args: PinArgs) -> Result<u8, String> {
    let options = CollectOptions {
        max_pages: args.target.connect.max_pages,
        fingerprints: true,
        keep_definitions: true,
    };
    let (list, _origin) = source::fetch(&args.target, options)
        .await
        .map_err(|error| error.to_string())?;
    let lock = Lock::of(&list).map_err(|error| error.to_string())?;
    // The lock is the whole point: a stdout that cannot take it is an error.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(lock.to_json().as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|error| format!("cannot write the lock: {error}"))?;
    let _ = writeln!(
        anstream::stderr(),
        "pinned {} from {}",
        text::count(list.tools.len(), "tool", "tools"),
        text::count(list.pages, "page", "pages"),
    );
    Ok(0)
}

//! `mcp-hints verify`: whether a live server's tools do what their hints
//! declare, checked by the engine (`mcp_hints::verify`) on sequences of
//! generated calls, with the server's state read back by a snapshot tool
//! the user names. This module is the live half: a fresh server per run
//! (after `--reset`), `tools/call` through our own client, the snapshot's
//! JSON taken out of a tool result, and the report for people or `--json`.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use anstyle::{AnsiColor, Style};
use mcp_hints::Hint;
use mcp_hints::collect::{CollectOptions, ToolList};
use serde_json::{Map, Value, json};

use crate::args::VerifyArgs;
use crate::live::{LiveErrorKind, LiveOptions, LiveTarget, Session, quoted};
use crate::progress::{self, Progress};
use crate::source::{self, Origin, SourceError};
use crate::text::{count, one_line, shown};
use mcp_hints::verify::{
    self as engine, Answer, Call, Change, Finding, ListChange, ListChangeKind, Options, Report,
    Start, System, SystemError, ToolUnderTest, VerifyError,
};

/// Argument lists per tool, as `--examples` gives them.
pub type Examples = HashMap<String, Vec<Map<String, Value>>>;

/// Runs `mcp-hints verify`: its exit status (0 every checked hint held, 1
/// a finding), or the message of exit status 2.
///
/// # Errors
///
/// Bad input (a snapshot tool the server lacks or that is not read-only, an
/// unreadable `--examples`, a bad `--skip`), a server that cannot be
/// reached, a `--reset` that fails, a server that died during a sequence,
/// or a run not confirmed.
pub async fn run(args: VerifyArgs) -> Result<u8, String> {
    let target = live_target(&args)?;
    // Read before any server is started: a typo there costs nothing.
    let examples = match &args.examples {
        Some(path) => read_examples(path)?,
        None => Examples::new(),
    };
    // Field by field: the skips are the engine's own, set through `skip`.
    let mut options = Options::default();
    options.seed = args.seed;
    options.runs = args.runs;
    options.steps = args.steps;
    options.examples = examples;
    for glob in &args.skip {
        options
            .skip(glob)
            .map_err(|error| format!("--skip {}: {error}", shown(glob)))?;
    }
    let collect = CollectOptions {
        max_pages: args.target.connect.max_pages,
        fingerprints: false,
        keep_definitions: true,
    };
    let listing = Progress::new(args.quiet);
    listing.say(&format!(
        "waiting for server/discover or initialize, then tools/list (--timeout {} s each) \
         from {target}",
        args.target.connect.timeout.as_secs_f64()
    ));
    let fetched = source::fetch(&args.target.to_target(), collect.clone()).await;
    listing.clear();
    let (list, origin) = fetched.map_err(|error| error.to_string())?;
    let server = match &origin {
        Origin::Live { target, .. } => target.clone(),
        Origin::Files { .. } => unreachable!("verify takes no saved pages"),
    };
    check_snapshot_tool(&list, &args.snapshot, &server)?;
    if let Some(path) = &args.examples {
        check_example_tools(&list, &options.examples, path, &server)?;
    }
    let tools = tools_under_test(&list);
    if !args.yes {
        confirm(&list, &options, &server).await?;
    }
    let mut start = LiveStart {
        target,
        collect,
        options: args.target.connect.live_options(),
        reset: args.reset.clone(),
        timeout: args.target.connect.timeout,
        snapshot: Snapshot {
            tool: args.snapshot.clone(),
            arguments: args.snapshot_args.clone(),
        },
    };
    let began = Instant::now();
    let progress = Progress::new(args.quiet);
    let mut run = 0;
    let verified = engine::verify_with(&tools, &mut start, &options, &mut |event| {
        if let engine::Progress::Run { run: now, .. } = event {
            run = now;
        }
        progress.say(&progress::verify_message(event, options.runs, run));
    })
    .await;
    progress.clear();
    let report = verified.map_err(|error| verify_error(&error, &server))?;
    let elapsed = began.elapsed();
    if args.json {
        let mut out = origin.to_json();
        let fields = json!({
            "snapshot": { "tool": args.snapshot, "arguments": args.snapshot_args },
            "seed": args.seed,
            "steps": args.steps,
            "runs": report.runs,
            "calls": report.calls,
            "findings": report.findings,
            "listChanges": report.list_changes,
            "checked": report.checked,
            "unchecked": report.unchecked,
        });
        if let (Value::Object(out), Value::Object(fields)) = (&mut out, fields) {
            out.extend(fields);
        }
        crate::print(&crate::text::json_for_terminal(&format!("{out:#}\n")))?;
    } else {
        crate::print(&to_text(&origin, &args, &report, elapsed))?;
    }
    Ok(u8::from(!report.holds()))
}

/// The server to start for each run: a URL or a command.
fn live_target(args: &VerifyArgs) -> Result<LiveTarget, String> {
    let target = &args.target;
    if !target.connect.headers.is_empty() && target.url.is_none() {
        return Err(SourceError::HeaderWithoutUrl.to_string());
    }
    source::live_target(target.url.as_deref(), &target.command)
        .ok_or_else(|| "no server given: pass --url URL or -- COMMAND ARGS...".to_owned())
}

/// The snapshot tool must be on the list and declared read-only: a
/// snapshot that wrote would change what it reads, and every check would
/// be of its own doing.
fn check_snapshot_tool(list: &ToolList, name: &str, server: &str) -> Result<(), String> {
    let Some(tool) = list.get(name) else {
        return Err(format!(
            "--snapshot {}: {server} has no such tool{}",
            shown(name),
            closest_and_all(list, name)
        ));
    };
    if !tool.hints.get(Hint::ReadOnly).value {
        return Err(format!(
            "--snapshot {}: a snapshot must not change what it reads: {} is not declared \
             read-only (readOnlyHint {} {}); name a read-only tool that returns the state",
            shown(name),
            shown(name),
            tool.hints.get(Hint::ReadOnly).value,
            tool.hints.get(Hint::ReadOnly).provenance.as_str()
        ));
    }
    Ok(())
}

/// `` (did you mean `x`?); its tools: a, b, c`` for an unknown tool name
/// (the first 30 of them).
fn closest_and_all(list: &ToolList, name: &str) -> String {
    let closest =
        mcp_hints_core::suggest::closest(name, list.tools.iter().map(|tool| tool.name.as_str()));
    let mut names: Vec<String> = list
        .tools
        .iter()
        .take(30)
        .map(|tool| shown(&tool.name).into_owned())
        .collect();
    if list.tools.len() > names.len() {
        names.push(format!("… ({} in all)", list.tools.len()));
    }
    let all = match names.is_empty() {
        true => "it lists no tools".to_owned(),
        false => format!("its tools: {}", names.join(", ")),
    };
    match closest {
        Some(tool) => format!(" (did you mean `{}`?); {all}", shown(tool)),
        None => format!("; {all}"),
    }
}

/// Reads `--examples`: `{"TOOL": [{ARGS}, ...], ...}`.
fn read_examples(path: &Path) -> Result<Examples, String> {
    let file = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|error| format!("--examples {file}: {error}"))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|error| format!("--examples {file}: not JSON: {error}"))?;
    let Value::Object(tools) = value else {
        return Err(format!(
            "--examples {file}: must be a JSON object of tool names to arrays of argument \
             objects, e.g. {{\"write_file\": [{{\"path\": \"/tmp/a\", \"content\": \"a\"}}]}}; \
             it is {}",
            mcp_hints::hints::json_type(&value)
        ));
    };
    let mut examples = Examples::new();
    for (tool, lists) in tools {
        let Value::Array(lists) = lists else {
            return Err(format!(
                "--examples {file}: `{}` must map to an array of argument objects; it is {}",
                shown(&tool),
                mcp_hints::hints::json_type(&lists)
            ));
        };
        let mut arguments = Vec::with_capacity(lists.len());
        for (at, element) in lists.into_iter().enumerate() {
            match element {
                Value::Object(object) => arguments.push(object),
                other => {
                    return Err(format!(
                        "--examples {file}: `{}`'s element {at} must be an object of \
                         arguments; it is {}",
                        shown(&tool),
                        mcp_hints::hints::json_type(&other)
                    ));
                }
            }
        }
        examples.insert(tool, arguments);
    }
    Ok(examples)
}

/// Every tool `--examples` names must be the server's: a misspelt name
/// would leave its tool to generated arguments without a word.
fn check_example_tools(
    list: &ToolList,
    examples: &Examples,
    path: &Path,
    server: &str,
) -> Result<(), String> {
    let mut names: Vec<&String> = examples.keys().collect();
    names.sort();
    match names.into_iter().find(|name| list.get(name).is_none()) {
        Some(name) => Err(format!(
            "--examples {}: names `{}`, which {server} does not have{}",
            path.display(),
            shown(name),
            closest_and_all(list, name)
        )),
        None => Ok(()),
    }
}

/// Asks on the terminal before any tool is called: verify calls every
/// writing tool with generated arguments, and only a fresh process with no
/// outside state is known to lose what they do. Without a terminal to ask,
/// `--yes` is the only way on.
async fn confirm(list: &ToolList, options: &Options, server: &str) -> Result<(), String> {
    let writing: Vec<&str> = list
        .tools
        .iter()
        .filter(|tool| !tool.hints.get(Hint::ReadOnly).value)
        .filter(|tool| options.skipped(&tool.name).is_none())
        .map(|tool| tool.name.as_str())
        .collect();
    let mut names: Vec<String> = writing
        .iter()
        .take(30)
        .map(|name| format!("`{}`", shown(name)))
        .collect();
    if writing.len() > names.len() {
        names.push("…".to_owned());
    }
    let question = format!(
        "verify calls every writing tool of {server} ({}{}) with generated arguments; its state \
         may change.",
        count(writing.len(), "tool", "tools"),
        match names.is_empty() {
            true => String::new(),
            false => format!(": {}", names.join(", ")),
        }
    );
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "{question} stdin is not a terminal to ask on: pass --yes to go ahead"
        ));
    }
    let mut stderr = anstream::stderr();
    let prompt = format!("{} Continue? [y/N] ", one_line(&question));
    let _ = std::io::Write::write_all(&mut stderr, prompt.as_bytes());
    let _ = std::io::Write::flush(&mut stderr);
    // A thread of its own, not the runtime's blocking pool: a Ctrl-C while
    // it waits ends the process, which the pool would wait for.
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::io::stdin().read_line(&mut line).map(|_| line);
        let _ = answer.send(read);
    });
    match answered.await {
        Ok(Ok(line)) if matches!(line.trim().to_lowercase().as_str(), "y" | "yes") => Ok(()),
        Ok(Err(error)) => Err(format!("cannot read the answer from stdin: {error}")),
        _ => Err("not confirmed: no tool was called".to_owned()),
    }
}

/// The snapshot tool and its arguments.
#[derive(Clone)]
struct Snapshot {
    tool: String,
    arguments: Map<String, Value>,
}

/// Starts a fresh server for each run: `--reset` first, then a new process
/// (stdio) or a new session (URL).
struct LiveStart {
    target: LiveTarget,
    /// How each run lists the tools again.
    collect: CollectOptions,
    options: LiveOptions,
    reset: Option<String>,
    timeout: Duration,
    snapshot: Snapshot,
}

impl Start for LiveStart {
    type System = LiveSystem;

    async fn start(&mut self) -> Result<LiveSystem, SystemError> {
        if let Some(command) = &self.reset {
            reset(command, self.timeout).await?;
        }
        let session = Session::connect(&self.target, &self.options)
            .await
            .map_err(|error| SystemError::new(error.to_string()))?;
        Ok(LiveSystem {
            session,
            snapshot: self.snapshot.clone(),
            collect: self.collect.clone(),
        })
    }
}

/// Runs `--reset COMMAND` with `sh -c`, within `timeout`.
async fn reset(command: &str, timeout: Duration) -> Result<(), SystemError> {
    let failed = |why: String| SystemError::new(format!("--reset `{}` {why}", one_line(command)));
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| failed(format!("cannot be started: {error}")))?;
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(output) => output.map_err(|error| failed(format!("failed: {error}")))?,
        Err(_) => {
            return Err(failed(format!(
                "did not finish within {} s (--timeout)",
                timeout.as_secs_f64()
            )));
        }
    };
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(failed(format!(
        "failed ({}){}",
        output.status,
        match tail.is_empty() {
            true => String::new(),
            false => format!(":\n  {}", tail.join("\n  ")),
        }
    )))
}

/// One run's server.
struct LiveSystem {
    session: Session,
    snapshot: Snapshot,
    collect: CollectOptions,
}

impl System for LiveSystem {
    async fn call(&mut self, call: &Call) -> Result<Answer, SystemError> {
        let params = json!({ "name": call.tool, "arguments": call.arguments });
        match self.session.request("tools/call", Some(params)).await {
            // A result that asks for input (2026-07-28 `input_required`)
            // did not run the tool through: a failed call.
            Ok(result) => {
                if let Some(problem) = invalid_result(&result) {
                    return Err(SystemError::new(format!(
                        "`{}` answered tools/call with an invalid CallToolResult: {problem}",
                        shown(&call.tool)
                    )));
                }
                Ok(Answer::Result {
                    is_error: result.get("isError") == Some(&Value::Bool(true))
                        || incomplete(&result).is_some(),
                })
            }
            Err(error) => match error.kind() {
                LiveErrorKind::Rpc { code, message, .. } => Ok(Answer::Error {
                    code: *code,
                    message: message.clone(),
                }),
                _ => Err(SystemError::new(error.to_string())),
            },
        }
    }

    async fn snapshot(&mut self) -> Result<Value, SystemError> {
        let Snapshot { tool, arguments } = &self.snapshot;
        let params = json!({ "name": tool, "arguments": arguments });
        let result = self
            .session
            .request("tools/call", Some(params))
            .await
            .map_err(|error| {
                SystemError::new(format!(
                    "the snapshot tool `{}` failed: {error}",
                    shown(tool)
                ))
            })?;
        snapshot_of(tool, &result).map_err(SystemError::new)
    }

    async fn tools(&mut self) -> Result<Option<Vec<ToolUnderTest>>, SystemError> {
        let list = source::collect_live(&mut self.session, self.collect.clone(), &mut Vec::new())
            .await
            .map_err(|error| SystemError::new(format!("listing the tools again: {error}")))?;
        Ok(Some(tools_under_test(&list)))
    }

    async fn close(self) {
        self.session.close().await;
    }
}

/// The tools of a list collected with `keep_definitions`.
fn tools_under_test(list: &ToolList) -> Vec<ToolUnderTest> {
    list.tools
        .iter()
        .map(|tool| {
            let definition = tool
                .definition
                .as_ref()
                .expect("the list was collected with keep_definitions");
            ToolUnderTest::from_definition(definition, tool.hints)
        })
        .collect()
}

/// What makes `result` no `CallToolResult` (MCP `schema.ts`: `content` an
/// array of content blocks, `isError` a boolean, `structuredContent` an
/// object), naming the field; `None` when it is one. A result asking for
/// input (2026-07-28 `resultType` other than `complete`) has no content
/// to check. `null` stands for an absent optional field.
fn invalid_result(result: &Value) -> Option<String> {
    let Some(fields) = result.as_object() else {
        return Some(format!(
            "the result is {}, not an object",
            mcp_hints::hints::json_type(result)
        ));
    };
    if incomplete(result).is_some() {
        return None;
    }
    let kind = |value: &Value| mcp_hints::hints::json_type(value);
    match fields.get("content") {
        None => return Some("it has no `content`".to_owned()),
        Some(Value::Array(blocks)) => {
            if let Some(at) = blocks
                .iter()
                .position(|block| block.get("type").and_then(Value::as_str).is_none())
            {
                return Some(format!(
                    "`content/{at}` is not a content block (an object with a string `type`)"
                ));
            }
        }
        Some(other) => return Some(format!("`content` is {}, not an array", kind(other))),
    }
    match fields.get("isError") {
        None | Some(Value::Null | Value::Bool(_)) => {}
        Some(other) => return Some(format!("`isError` is {}, not a boolean", kind(other))),
    }
    match fields.get("structuredContent") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(other) => {
            return Some(format!(
                "`structuredContent` is {}, not an object",
                kind(other)
            ));
        }
    }
    None
}

/// A `resultType` other than `complete` (2026-07-28).
fn incomplete(result: &Value) -> Option<&str> {
    result
        .get("resultType")
        .and_then(Value::as_str)
        .filter(|kind| *kind != "complete")
}

/// The state a snapshot tool's result holds: the text of its `content`
/// when that is a JSON object or array, else its `structuredContent`, else
/// that text as a JSON string, else the `content` array itself. An error
/// result is no state.
///
/// The text comes first because the spec asks a tool with structured
/// content to send the same JSON as text, and some servers' structured
/// content only wraps the text: server-filesystem's `directory_tree` gives
/// `{"content": "<the tree as JSON text>"}`, where every change would be a
/// change of one string, and no addition could be told from a removal.
pub fn snapshot_of(tool: &str, result: &Value) -> Result<Value, String> {
    if let Some(problem) = invalid_result(result) {
        return Err(format!(
            "the snapshot tool `{}` answered with an invalid CallToolResult: {problem}",
            shown(tool)
        ));
    }
    let text: String = result
        .get("content")
        .and_then(Value::as_array)
        .map(|content| {
            content
                .iter()
                .filter(|item| item.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if result.get("isError") == Some(&Value::Bool(true)) {
        return Err(format!(
            "the snapshot tool `{}` answered with an error result (isError true): {}",
            shown(tool),
            quoted(&text)
        ));
    }
    if let Some(kind) = incomplete(result) {
        return Err(format!(
            "the snapshot tool `{}` answered with resultType {} instead of its result: a \
             snapshot must answer at once",
            shown(tool),
            quoted(kind)
        ));
    }
    let has_text = result
        .get("content")
        .and_then(Value::as_array)
        .is_some_and(|content| {
            content
                .iter()
                .any(|item| item.get("type").and_then(Value::as_str) == Some("text"))
        });
    let parsed = serde_json::from_str::<Value>(&text).ok();
    if let Some(parsed @ (Value::Object(_) | Value::Array(_))) = parsed {
        return Ok(parsed);
    }
    if let Some(structured) = result
        .get("structuredContent")
        .filter(|value| !value.is_null())
    {
        return Ok(structured.clone());
    }
    if has_text {
        return Ok(parsed.unwrap_or(Value::String(text)));
    }
    Ok(result.get("content").cloned().unwrap_or(Value::Null))
}

/// The message of a run that could not finish.
fn verify_error(error: &VerifyError, server: &str) -> String {
    match error {
        VerifyError::Died {
            run,
            sequence,
            error,
        } => {
            let mut message = format!(
                "{server} failed in run {run}, after {}:\n",
                count(sequence.len(), "call", "calls")
            );
            message.push_str(&numbered(sequence));
            let _ = write!(message, "{error}");
            message
        }
        VerifyError::Start { run, error } => {
            format!("run {run}: {server} could not be started: {error}")
        }
        // Its paths are the server's member names.
        error @ VerifyError::UnstableSnapshot { .. } => shown(&error.to_string()).into_owned(),
        error => error.to_string(),
    }
}

/// `   1 | tool {"arg":1}` per call.
fn numbered(sequence: &[Call]) -> String {
    let width = sequence.len().to_string().len();
    let mut out = String::new();
    for (at, call) in sequence.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:>width$} | {} {}",
            at + 1,
            shown(&call.tool),
            shown(&Value::Object(call.arguments.clone()).to_string())
        );
    }
    out
}

/// A tool list's change, in words.
fn list_change(change: &ListChange) -> String {
    let tool = shown(&change.tool);
    let run = change.run;
    match &change.change {
        ListChangeKind::Added => format!(
            "`{tool}` is listed in run {run} but was not in the list verified: it was not checked"
        ),
        ListChangeKind::Removed => format!(
            "`{tool}` is not listed in run {run}, though it was in the list verified: it was not \
             called in that run"
        ),
        ListChangeKind::Hints { hints } => {
            let hints: Vec<String> = hints
                .iter()
                .map(|change| {
                    format!(
                        "{} {} -> {}",
                        change.hint.wire_name(),
                        change.was,
                        change.now
                    )
                })
                .collect();
            format!(
                "`{tool}` is listed in run {run} with other hints than in the list verified ({}): \
                 it was not called in that run",
                hints.join(", ")
            )
        }
        _ => format!("`{tool}` is listed otherwise in run {run}"),
    }
}

/// What a finding says its hint claims, and what the sequence showed.
fn claim(finding: &Finding) -> (&'static str, &'static str) {
    match finding.hint {
        Hint::ReadOnly => (
            "is declared read-only (readOnlyHint true)",
            "its last call changed the snapshot",
        ),
        Hint::Idempotent => (
            "is declared idempotent (idempotentHint true)",
            "calling it again at once with the same arguments changed the snapshot",
        ),
        Hint::Destructive => (
            "is declared additive (destructiveHint false)",
            "its last call removed or changed what was there",
        ),
        Hint::OpenWorld => ("declares openWorldHint", "the snapshot showed otherwise"),
    }
}

fn help(finding: &Finding) -> String {
    let tool = shown(&finding.tool);
    match finding.hint {
        Hint::ReadOnly => format!("declare `{tool}` readOnlyHint false, or make it write nothing"),
        Hint::Idempotent => format!(
            "declare `{tool}` idempotentHint false (a client then reads back before a resend), \
             or make a repeat change nothing"
        ),
        Hint::Destructive => {
            format!("declare `{tool}` destructiveHint true, or make it only add what was not there")
        }
        Hint::OpenWorld => format!("declare `{tool}` openWorldHint as it is"),
    }
}

fn change_value(value: Option<&Value>) -> String {
    match value {
        Some(value) => shown(&value.to_string()).into_owned(),
        None => "(absent)".to_owned(),
    }
}

fn difference(changes: &[Change]) -> String {
    let mut out = String::new();
    for change in changes {
        let path = match change.path.as_str() {
            "" => "(the whole snapshot)".to_owned(),
            path => shown(path).into_owned(),
        };
        let _ = writeln!(
            out,
            "       {path}: {} -> {}",
            change_value(change.before.as_ref()),
            change_value(change.after.as_ref())
        );
    }
    out
}

/// The report for people: header, findings in the style of rustc, summary,
/// and what could not be checked.
fn to_text(origin: &Origin, args: &VerifyArgs, report: &Report, elapsed: Duration) -> String {
    let red = Style::new().fg_color(Some(AnsiColor::Red.into())).bold();
    let blue = Style::new().fg_color(Some(AnsiColor::Blue.into())).bold();
    let bold = Style::new().bold();
    let (r, rr) = (red.render(), red.render_reset());
    let (b, br) = (blue.render(), blue.render_reset());
    let (s, sr) = (bold.render(), bold.render_reset());
    let mut out = String::new();
    // Each header line is escaped once more as a whole, as audit's is.
    for line in origin.header() {
        out.push_str(&one_line(&line));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "snapshot: `{}` {}; seed {}, {} of {} steps\n",
        shown(&args.snapshot),
        shown(&Value::Object(args.snapshot_args.clone()).to_string()),
        args.seed,
        count(args.runs as usize, "run", "runs"),
        args.steps
    );
    for finding in &report.findings {
        let (declared, showed) = claim(finding);
        let _ = writeln!(
            out,
            "{r}error[{}]{rr}{s}: `{}` {declared}, but {showed}{sr}",
            finding.hint.wire_name(),
            shown(&finding.tool),
        );
        let _ = writeln!(
            out,
            "  {b}-->{br} {} on a fresh server (the shortest found):",
            count(finding.sequence.len(), "call", "calls")
        );
        out.push_str(&numbered(&finding.sequence));
        let _ = writeln!(out, "   {b}={br} {s}snapshot{sr}: before -> after");
        out.push_str(&difference(&finding.difference));
        let _ = writeln!(out, "   {b}={br} {s}help{sr}: {}\n", help(finding));
    }
    for change in &report.list_changes {
        let _ = writeln!(
            out,
            "{r}error[tools/list]{rr}{s}: {}{sr}\n   {b}={br} {s}help{sr}: verify checks the \
             hints of the list it read first; a server whose list changes from one start to the \
             next declares nothing a client can rely on\n",
            list_change(change)
        );
    }
    let tools: BTreeSet<&str> = report.checked.iter().map(|c| c.tool.as_str()).collect();
    let findings = report.findings.len() + report.list_changes.len();
    let (style, reset) = match findings {
        0 => (s.to_string(), sr.to_string()),
        _ => (r.to_string(), rr.to_string()),
    };
    let _ = writeln!(
        out,
        "{style}{} checked on {} in {} ({}, {:.1} s): {}; {} unchecked{reset}",
        count(report.checked.len(), "hint", "hints"),
        count(tools.len(), "tool", "tools"),
        count(report.runs as usize, "run", "runs"),
        count(report.calls as usize, "call", "calls"),
        elapsed.as_secs_f64(),
        count(findings, "finding", "findings"),
        report.unchecked.len()
    );
    // Grouped by hint and reason: openWorldHint false is unchecked on most
    // tools for the same reason, and one line says so.
    let mut groups: Vec<(Hint, &str, Vec<&str>)> = Vec::new();
    for unchecked in &report.unchecked {
        match groups
            .iter_mut()
            .find(|(hint, reason, _)| *hint == unchecked.hint && *reason == unchecked.reason)
        {
            Some((_, _, tools)) => tools.push(&unchecked.tool),
            None => groups.push((unchecked.hint, &unchecked.reason, vec![&unchecked.tool])),
        }
    }
    if !groups.is_empty() {
        out.push_str("unchecked:\n");
    }
    for (hint, reason, tools) in groups {
        let tools: Vec<String> = tools
            .iter()
            .map(|tool| format!("`{}`", shown(tool)))
            .collect();
        let _ = writeln!(
            out,
            "  {} of {}: {}",
            hint.wire_name(),
            tools.join(", "),
            one_line(reason)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_json_text_else_structured_content_else_the_text() {
        let structured = json!({"content": [{"type": "text", "text": "x"}],
                                "structuredContent": {"a": 1}});
        assert_eq!(snapshot_of("s", &structured), Ok(json!({"a": 1})));
        // server-filesystem's `directory_tree`: the structure only wraps the text.
        let wrapped = json!({"content": [{"type": "text", "text": "[{\"name\": \"a\"}]"}],
                             "structuredContent": {"content": "[{\"name\": \"a\"}]"}});
        assert_eq!(snapshot_of("s", &wrapped), Ok(json!([{"name": "a"}])));
        let number = json!({"content": [{"type": "text", "text": "3"}],
                            "structuredContent": {"count": 3}});
        assert_eq!(snapshot_of("s", &number), Ok(json!({"count": 3})));
        let bare = json!({"content": [{"type": "text", "text": "3"}]});
        assert_eq!(snapshot_of("s", &bare), Ok(json!(3)));
        let text = json!({"content": [{"type": "text", "text": "{\"a\":"},
                                      {"type": "text", "text": " [1]}"}]});
        assert_eq!(snapshot_of("s", &text), Ok(json!({"a": [1]})));
        let prose = json!({"content": [{"type": "text", "text": "no notes"}]});
        assert_eq!(snapshot_of("s", &prose), Ok(json!("no notes")));
        let image =
            json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]});
        assert_eq!(
            snapshot_of("s", &image),
            Ok(json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}]))
        );
        let error = json!({"isError": true, "content": [{"type": "text", "text": "no\u{1b}[2J"}]});
        assert_eq!(
            snapshot_of("s", &error),
            Err(
                "the snapshot tool `s` answered with an error result (isError true): \
                 \"no\\u{1b}[2J\""
                    .to_owned()
            )
        );
    }
}

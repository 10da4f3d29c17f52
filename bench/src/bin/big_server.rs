//! A hand-written stdio MCP server with many generated tools: the fixture of
//! the audit benchmark (`audit_bench`).
//!
//! `big_server [--tools N (10000)] [--page-size P (100)] [--dump DIR] [--peak-file PATH]`
//!
//! Speaks newline-delimited JSON-RPC 2.0 on stdin/stdout: answers
//! `initialize` (echoing the client's `protocolVersion`), `ping` and
//! `tools/list` (P tools a page, `nextCursor` on every page but the last;
//! an invalid cursor is error -32602), ignores notifications and responses,
//! and answers any other method with -32601. Exits on end of input.
//!
//! The tools are deterministic and about 600 to 900 bytes of JSON each: a
//! name such as `tool_00042_get_record`, a title, a 150 to 250 character
//! description, an `inputSchema` with 3 to 5 typed properties and
//! `required`, and annotations in a mix: about half declare all four hints,
//! a quarter some of them, the rest have no `annotations` or
//! `"annotations": null`.
//!
//! `--peak-file PATH` writes, at exit, the server's own peak RSS in bytes
//! (`VmHWM`, Linux) to PATH: the audit benchmark reads it.
//!
//! `--dump DIR` writes the pages instead, as `DIR/page-001.json`, ... (one
//! bare `tools/list` result object each, compact JSON), and exits.

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use std::fmt::Write as _;

use clap::Parser as _;
use mcp_hints_bench::peers;
use serde_json::{Value, json};

/// The options, as audit_bench gives them.
#[derive(clap::Parser)]
#[command(about = "a stdio MCP server with many generated tools")]
struct Options {
    /// Tools served.
    #[arg(long, default_value_t = 10_000)]
    tools: usize,
    /// Tools per `tools/list` page.
    #[arg(long, default_value_t = 100, value_parser = peers::at_least_one)]
    page_size: usize,
    /// Write the pages into DIR (`page-001.json`, ...) and exit instead of
    /// serving [default: serve over stdio].
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// At exit, write this process's peak RSS to PATH, in bytes (`VmHWM`)
    /// [default: not written].
    #[arg(long, value_name = "PATH")]
    peak_file: Option<PathBuf>,
}

/// splitmix64: a cheap, well-mixed deterministic hash of a number.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// What a verb does, which fixes the hint values a tool declares.
#[derive(Clone, Copy)]
enum Kind {
    /// Reads only.
    Read,
    /// Adds; a repeat adds again.
    Append,
    /// Overwrites; a repeat has no further effect.
    Overwrite,
    /// Destroys; a repeat has no further effect.
    Destroy,
    /// Reaches the outside world; a repeat has a further effect.
    Send,
}

const VERBS: &[(&str, &str, Kind)] = &[
    ("get", "Fetches", Kind::Read),
    ("list", "Lists", Kind::Read),
    ("search", "Searches for", Kind::Read),
    ("count", "Counts", Kind::Read),
    ("export", "Exports", Kind::Read),
    ("create", "Creates", Kind::Append),
    ("append", "Appends to", Kind::Append),
    ("comment", "Comments on", Kind::Append),
    ("update", "Updates", Kind::Overwrite),
    ("rename", "Renames", Kind::Overwrite),
    ("archive", "Archives", Kind::Overwrite),
    ("delete", "Deletes", Kind::Destroy),
    ("purge", "Purges", Kind::Destroy),
    ("send", "Sends", Kind::Send),
    ("notify", "Sends a notification about", Kind::Send),
];

const NOUNS: &[&str] = &[
    "record", "invoice", "customer", "ticket", "document", "order", "user", "report", "event",
    "file", "message", "project", "account", "shipment", "payment", "contact", "dataset",
    "comment", "label", "webhook",
];

const SERVICES: &[&str] = &[
    "billing",
    "crm",
    "support desk",
    "warehouse",
    "calendar",
    "storage",
    "analytics",
    "messaging",
];

/// Sentences that pad descriptions to a realistic length (each at most 60
/// characters, so one more never overshoots 250 from below 150).
const FILLER: &[&str] = &[
    "Results are returned as structured JSON.",
    "Requires an API token with the matching scope.",
    "Rate limited to 60 calls per minute per workspace.",
    "Timestamps are ISO 8601 in UTC.",
    "Fields the caller may not see are omitted from the response.",
    "Use the id returned by a previous call; names are not unique.",
    "Large responses are truncated; narrow the query to see more.",
    "The operation is recorded in the audit log of the workspace.",
    "Soft-deleted items are excluded unless asked for.",
    "Works on the default workspace when none is given.",
];

/// Properties an input schema picks from: name and schema, as JSON text
/// (constant, so written as is: the server renders JSON text directly,
/// without building `Value`s, to keep its own share of a live audit small).
const PROPERTIES: &[(&str, &str)] = &[
    (
        "workspace",
        r#"{"type":"string","description":"Workspace; default: the caller's.","minLength":1}"#,
    ),
    (
        "limit",
        r#"{"type":"integer","description":"Most items to return.","maximum":500}"#,
    ),
    (
        "archived",
        r#"{"type":"boolean","description":"Include archived items."}"#,
    ),
    (
        "tags",
        r#"{"type":"array","description":"Required tags.","items":{"type":"string"}}"#,
    ),
    (
        "status",
        r#"{"type":"string","description":"Lifecycle state.","enum":["open","closed"]}"#,
    ),
    (
        "amount",
        r#"{"type":"number","description":"Amount in the account's currency."}"#,
    ),
    (
        "note",
        r#"{"type":"string","description":"Free text kept with the change."}"#,
    ),
    (
        "metadata",
        r#"{"type":"object","description":"Extra key/value pairs to store."}"#,
    ),
];

/// The four hints as `kind` means them: readOnly, destructive, idempotent,
/// openWorld.
fn hint_values(kind: Kind, open_world: bool) -> [bool; 4] {
    match kind {
        Kind::Read => [true, false, true, open_world],
        Kind::Append => [false, false, false, open_world],
        Kind::Overwrite => [false, true, true, open_world],
        Kind::Destroy => [false, true, true, open_world],
        Kind::Send => [false, false, false, true],
    }
}

const HINT_NAMES: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Appends `text` as a JSON string.
fn push_json_str(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends tool number `i`, as JSON text, to `out`.
fn write_tool(i: usize, out: &mut String) {
    let h = mix(i as u64);
    let (verb, verb_text, kind) = VERBS[i % VERBS.len()];
    let noun = NOUNS[(i / VERBS.len() + (h as usize >> 3)) % NOUNS.len()];
    let service = SERVICES[(h >> 11) as usize % SERVICES.len()];

    // 3 to 5 properties; the more properties, the shorter the description.
    let count = 3 + (h >> 40) as usize % 3;
    let target = 150 + (h >> 17) as usize % [101, 71, 41][count - 3];
    let mut description = format!(
        "{verb_text} one {noun} in the {service} service (tool {i}). {}s are matched by id.",
        capitalize(noun)
    );
    let cap = [250, 220, 190][count - 3];
    let mut pick = (h >> 24) as usize;
    while description.len() < target {
        // A step of 3 visits all ten sentences before repeating one.
        let sentence = FILLER[pick % FILLER.len()];
        pick += 3;
        if description.len() >= 150 && description.len() + 1 + sentence.len() > cap {
            break;
        }
        description.push(' ');
        description.push_str(sentence);
    }

    out.push_str("{\"name\":");
    push_json_str(out, &format!("tool_{i:05}_{verb}_{noun}"));
    out.push_str(",\"title\":");
    push_json_str(out, &format!("{} {noun} ({service})", capitalize(verb)));
    out.push_str(",\"description\":");
    push_json_str(out, &description);

    let first = (h >> 44) as usize % PROPERTIES.len();
    let _ = write!(
        out,
        r#","inputSchema":{{"type":"object","properties":{{"{noun}_id":{{"type":"string","description":"Id of the {noun}.","pattern":"^[a-z0-9_-]+$"}}"#
    );
    for k in 0..count - 1 {
        let (name, schema) = PROPERTIES[(first + k) % PROPERTIES.len()];
        let _ = write!(out, r#","{name}":{schema}"#);
    }
    let _ = write!(out, r#"}},"required":["{noun}_id""#);
    if (h >> 50) & 1 == 1 {
        let _ = write!(out, r#","{}""#, PROPERTIES[first].0);
    }
    out.push_str("]}");

    let values = hint_values(kind, (h >> 52) & 3 != 0);
    let declared = match (h >> 54) % 20 {
        // All four declared.
        0..10 => 0b1111,
        // Some declared (a non-empty, proper subset), with a title when
        // readOnlyHint is among them.
        10..15 => 1 + (h >> 59) as usize % 14,
        // No annotations at all.
        15..18 => {
            out.push('}');
            return;
        }
        _ => {
            out.push_str(",\"annotations\":null}");
            return;
        }
    };
    out.push_str(",\"annotations\":{");
    let mut comma = "";
    if declared != 0b1111 && declared & 1 == 1 {
        let _ = write!(out, r#""title":"{} {noun}""#, capitalize(verb));
        comma = ",";
    }
    for (bit, (name, value)) in HINT_NAMES.iter().zip(values).enumerate() {
        if declared & (1 << bit) != 0 {
            let _ = write!(out, r#"{comma}"{name}":{value}"#);
            comma = ",";
        }
    }
    out.push_str("}}");
}

/// The opaque cursor of the page starting at tool `offset`.
fn cursor(offset: usize) -> String {
    format!(
        "p{offset:x}.{:08x}",
        mix(offset as u64 ^ 0x6375_7273) as u32
    )
}

/// The offset a cursor this server made stands for, if it is one.
fn parse_cursor(text: &str, options: &Options) -> Option<usize> {
    let (offset, _) = text.strip_prefix('p')?.split_once('.')?;
    let offset = usize::from_str_radix(offset, 16).ok()?;
    (offset > 0
        && offset < options.tools
        && offset.is_multiple_of(options.page_size)
        && cursor(offset) == text)
        .then_some(offset)
}

/// Appends the `tools/list` result of the page starting at `offset`, as
/// JSON text, to `out`.
fn write_page(offset: usize, options: &Options, out: &mut String) {
    let end = (offset + options.page_size).min(options.tools);
    out.push_str("{\"tools\":[");
    for i in offset..end {
        if i > offset {
            out.push(',');
        }
        write_tool(i, out);
    }
    out.push(']');
    if end < options.tools {
        let _ = write!(out, r#","nextCursor":"{}""#, cursor(end));
    }
    out.push('}');
}

fn dump(dir: &PathBuf, options: &Options) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let pages = options.tools.div_ceil(options.page_size).max(1);
    let width = pages.to_string().len().max(3);
    for number in 1..=pages {
        let path = dir.join(format!("page-{number:0width$}.json"));
        let mut text = String::new();
        write_page((number - 1) * options.page_size, options, &mut text);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Answers one incoming message on `out`; says nothing to a notification or
/// a response.
fn respond(message: Value, options: &Options, out: &mut impl Write) -> std::io::Result<()> {
    let Value::Object(mut message) = message else {
        return send(
            out,
            &error(Value::Null, -32600, "invalid request: not an object"),
        );
    };
    let Some(id) = message.remove("id") else {
        return Ok(()); // a notification
    };
    let Some(Value::String(method)) = message.remove("method") else {
        if message.contains_key("result") || message.contains_key("error") {
            return Ok(()); // a response (this server sends no requests)
        }
        return send(out, &error(id, -32600, "invalid request: no method"));
    };
    let params = message.remove("params").unwrap_or(Value::Null);
    let result = match method.as_str() {
        "initialize" => {
            let version = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("2025-06-18");
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "big_server", "version": env!("CARGO_PKG_VERSION")},
            })
        }
        "ping" => json!({}),
        "tools/list" => {
            let offset = match params.get("cursor") {
                None | Some(Value::Null) => 0,
                Some(Value::String(text)) => match parse_cursor(text, options) {
                    Some(offset) => offset,
                    None => return send(out, &error(id, -32602, "invalid cursor")),
                },
                Some(_) => return send(out, &error(id, -32602, "invalid cursor: not a string")),
            };
            let mut text = String::with_capacity(options.page_size * 1024);
            text.push_str(r#"{"jsonrpc":"2.0","id":"#);
            text.push_str(&id.to_string());
            text.push_str(r#","result":"#);
            write_page(offset, options, &mut text);
            text.push_str("}\n");
            out.write_all(text.as_bytes())?;
            return out.flush();
        }
        _ => return send(out, &error(id, -32601, "method not found")),
    };
    send(out, &json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

/// Writes one message and its newline, and flushes.
fn send(out: &mut impl Write, message: &Value) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, message)?;
    out.write_all(b"\n")?;
    out.flush()
}

fn serve(options: &Options) -> std::io::Result<()> {
    let stdin = std::io::stdin().lock();
    let mut stdout = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    for line in stdin.split(b'\n') {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(message) => respond(message, options, &mut stdout)?,
            Err(_) => send(&mut stdout, &error(Value::Null, -32700, "parse error"))?,
        }
    }
    Ok(())
}

/// Writes this process's peak resident set size, in bytes, to `path`: the
/// `VmHWM` of `/proc/self/status`, which, unlike `getrusage`'s `ru_maxrss`,
/// does not carry over the peak of the process that spawned this one.
fn write_peak(path: &PathBuf) -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("--peak-file: /proc/self/status: {e}"))?;
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|value| value.trim().parse().ok())
        .ok_or("--peak-file: no VmHWM in /proc/self/status")?;
    std::fs::write(path, format!("{}\n", kib * 1024))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn main() -> ExitCode {
    // clap prints the usage and exits 2 for a bad option, 0 for --help.
    let options = Options::parse();
    let result = match &options.dump {
        Some(dir) => dump(dir, &options),
        None => match serve(&options) {
            Ok(()) => Ok(()),
            // The client went away: nothing to answer any more.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(e.to_string()),
        },
    };
    let result = result.and_then(|()| match &options.peak_file {
        Some(path) => write_peak(path),
        None => Ok(()),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("big_server: {message}");
            ExitCode::FAILURE
        }
    }
}

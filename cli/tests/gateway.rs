//! `mcp-hints gateway serve` as a real process, in front of real upstreams
//! (the example `notes` server, npm and PyPI servers, over stdio), driven
//! over streamable HTTP on loopback by the official MCP Python SDK's client
//! (tests/fixtures/gateway_client.py, run with the venv tests/peers
//! installs).

mod peers;
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use peers::{NPM_SERVERS, installed};
use serde_json::{Value, json};
use support::{KeptAlive, SETTLE, ServedGateway, notes_server, wait_for};

/// alice's bearer token (a macro, so that [`PREAMBLE`] can hold it).
macro_rules! alice_token {
    () => {
        "alice-secret-token-4f1c"
    };
}
const TOKEN: &str = alice_token!();
/// How every test config starts: HTTP on a free loopback port, alice's
/// token, and the audit log's table (more `[log]` keys may follow).
const PREAMBLE: &str = concat!(
    "[listen]\nhttp = \"127.0.0.1:0\"\n\n[[client]]\nprincipal = \"alice\"\ntoken = \"",
    alice_token!(),
    "\"\n\n[log]\npath = \"audit.jsonl\"\n"
);
const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// A scratch directory of its own for each test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("gateway")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `node PATH` of an installed npm server.
fn npm_command(package: &str) -> Vec<String> {
    let (_, _, bin) = NPM_SERVERS
        .iter()
        .find(|(name, ..)| *name == package)
        .unwrap();
    let dir = installed().node_modules.join(package);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    let script = manifest["bin"][bin].as_str().unwrap();
    vec![
        "node".to_owned(),
        dir.join(script).to_string_lossy().into_owned(),
    ]
}

fn toml_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap()
}

/// Runs the Python SDK client (tests/fixtures/gateway_client.py) against
/// `url` with `ops` on one session; `context` is shown when it fails.
fn python(url: &str, token: &str, mode: &str, ops: &Value, context: &str) -> Value {
    let output = Command::new(installed().python())
        .arg(peers::fixture("gateway_client.py"))
        .args([url, token, mode, &ops.to_string()])
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "the Python client failed ({}):\n{}\n--- gateway stderr ---\n{context}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)))
}

/// A running gateway: its process, its URL, and every line of its stderr
/// ([`ServedGateway`]), and where its audit log is.
struct Gateway {
    served: ServedGateway,
    dir: PathBuf,
    log: PathBuf,
}

impl std::ops::Deref for Gateway {
    type Target = ServedGateway;

    fn deref(&self) -> &ServedGateway {
        &self.served
    }
}

impl std::ops::DerefMut for Gateway {
    fn deref_mut(&mut self) -> &mut ServedGateway {
        &mut self.served
    }
}

impl Gateway {
    /// Writes `config` to DIR/gateway.toml and starts `mcp-hints gateway
    /// serve` on it; waits (90 s at most) until it says where it serves.
    fn start(dir: &Path, config: &str) -> Gateway {
        let path = dir.join("gateway.toml");
        std::fs::write(&path, config).unwrap();
        Gateway::serve(&path, &dir.join("audit.jsonl"), &[])
    }

    /// Starts `mcp-hints gateway serve --config PATH` with `env` set, its
    /// audit log at `log`; waits (90 s at most) until it says where it
    /// serves.
    fn serve(path: &Path, log: &Path, env: &[(&str, &str)]) -> Gateway {
        Gateway {
            served: ServedGateway::serve(path, env),
            dir: log.parent().unwrap().to_owned(),
            log: log.to_owned(),
        }
    }

    /// Runs the Python SDK client with `ops` on one session.
    fn python(&self, token: &str, mode: &str, ops: &Value) -> Value {
        python(&self.url, token, mode, ops, &self.stderr())
    }

    /// The audit log's entries ([`support::log_entries`]: a line the
    /// gateway is still writing is not read, and the checkpoints of its
    /// chain, which record no call, are left out).
    fn log(&self) -> Vec<Value> {
        support::log_entries(&self.log)
    }

    /// The audit log's entries once `ready` holds for them, read again
    /// every 50 ms; after `bound`, the last reading (the caller's own
    /// assertions then say what is missing).
    fn log_when(&self, bound: Duration, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        wait_for(bound, || self.log(), |log| ready(log))
    }

    /// The audit log's entries once it has `count` entries of `phase`
    /// (`decided` or `finished`), for [`SETTLE`] at most.
    fn log_with(&self, phase: &str, count: usize) -> Vec<Value> {
        self.log_when(SETTLE, |log| {
            log.iter().filter(|entry| entry["phase"] == phase).count() >= count
        })
    }

    /// The audit log's entries once it has `count` of them, for [`SETTLE`]
    /// at most.
    fn log_of(&self, count: usize) -> Vec<Value> {
        self.log_when(SETTLE, |log| log.len() >= count)
    }

    fn address(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned()
    }
}

/// A config with the notes and memory upstreams, one that cannot start,
/// and `extra` (rules and asserts) after them.
fn config(dir: &Path, extra: &str) -> String {
    let notes = notes_server().to_string_lossy().into_owned();
    let memory = npm_command("@modelcontextprotocol/server-memory");
    let memory_file = dir.join("memory.jsonl");
    format!(
        r#"{PREAMBLE}
[policy]
default = "allow"

[[upstream]]
name = "notes"
command = {notes}
trusted = true
call_timeout_secs = 30

[[upstream]]
name = "memory"
command = {memory}
env = {{ MEMORY_FILE_PATH = "{memory_file}" }}
trusted = false

[[upstream]]
name = "ghost"
command = ["{ghost}"]

{extra}"#,
        notes = toml_list(&[notes]),
        memory = toml_list(&memory),
        memory_file = memory_file.display(),
        ghost = dir.join("no-such-server").display(),
    )
}

const RULES: &str = r#"[[assert]]
upstream = "notes"
tool = "list_notes"
openWorldHint = true

[[rule]]
action = "deny"
upstream = "notes"
tool = "delete_*"

[[rule]]
action = "rate_limit"
upstream = "notes"
tool = "forecast"
limit = 2
window_secs = 600
"#;

fn call(name: &str, arguments: Value) -> Value {
    json!({ "op": "call", "name": name, "arguments": arguments })
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Every tool by name, from a list result.
fn by_name(list: &Value) -> BTreeMap<String, Value> {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| (tool["name"].as_str().unwrap().to_owned(), tool.clone()))
        .collect()
}

#[test]
fn python_client_sees_namespaced_tools_and_enforced_rules() {
    let dir = scratch("rules");
    let gateway = Gateway::start(&dir, &config(&dir, RULES));
    let ops = json!([
        { "op": "list" },
        call("notes__list_notes", json!({})),
        call("notes__delete_note", json!({ "id": 1 })),
        call("notes__forecast", json!({ "city": "Oslo" })),
        call("notes__forecast", json!({ "city": "Oslo" })),
        call("notes__forecast", json!({ "city": "Oslo" })),
        call("memory__read_graph", json!({})),
        call("ghost__anything", json!({})),
        call("nowhere__tool", json!({})),
    ]);
    let session = gateway.python(TOKEN, "auto", &ops);
    assert_eq!(session["server"], "mcp-hints-gateway");
    assert_eq!(
        session["protocol"], "2026-07-28",
        "server/discover was used"
    );
    let results = session["results"].as_array().unwrap();

    // tools/list: namespaced, four explicit hints, their sources.
    let tools = by_name(&results[0]);
    for name in [
        "notes__add_note",
        "notes__append_note",
        "notes__delete_note",
        "notes__forecast",
        "notes__list_notes",
        "notes__update_note",
        "memory__read_graph",
        "memory__create_entities",
    ] {
        let tool = tools
            .get(name)
            .unwrap_or_else(|| panic!("{name} is not listed: {:?}", tools.keys()));
        for hint in HINTS {
            assert!(
                tool["annotations"][hint].is_boolean(),
                "{name} {hint}: {}",
                tool["annotations"]
            );
            assert!(
                tool["_meta"]["mcp-hints/provenance"][hint].is_string(),
                "{name} {hint}: {}",
                tool["_meta"]
            );
        }
    }
    assert!(
        tools.keys().all(|name| !name.starts_with("ghost__")),
        "an upstream that never started lists nothing"
    );
    // The asserted hint outranks the server's declared `false`.
    let list_notes = &tools["notes__list_notes"];
    assert_eq!(list_notes["annotations"]["openWorldHint"], true);
    assert_eq!(
        list_notes["_meta"]["mcp-hints/provenance"]["openWorldHint"],
        "asserted"
    );
    assert_eq!(list_notes["annotations"]["readOnlyHint"], true);
    assert_eq!(
        list_notes["_meta"]["mcp-hints/provenance"]["readOnlyHint"],
        "declared"
    );

    // An allowed call goes through.
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    // deny refuses, naming the rule.
    assert_eq!(results[2]["isError"], true, "{}", results[2]);
    assert!(text(&results[2]).contains("rule"), "{}", text(&results[2]));
    assert!(text(&results[2]).contains("not forwarded"));
    // rate_limit: 2 calls, the 3rd refused with a retry-after.
    assert_eq!(results[3]["isError"], false, "{}", results[3]);
    assert_eq!(results[4]["isError"], false, "{}", results[4]);
    assert_eq!(results[5]["isError"], true, "{}", results[5]);
    assert!(
        text(&results[5]).contains("retry after"),
        "{}",
        text(&results[5])
    );
    // An untrusted npm upstream serves next to them.
    assert_eq!(results[6]["isError"], false, "{}", results[6]);
    // The dead upstream: a tool error saying so.
    assert_eq!(results[7]["isError"], true, "{}", results[7]);
    assert!(
        text(&results[7]).contains("upstream `ghost` is unavailable"),
        "{}",
        text(&results[7])
    );
    // An unknown upstream: invalid params, naming the tool.
    assert_eq!(results[8]["error"]["code"], -32602, "{}", results[8]);
    assert!(
        results[8]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nowhere__tool")
    );

    // The audit log: a decided and a finished entry per forwarded or
    // refused call, in that order, and never the token.
    let log = gateway.log_with("finished", 7);
    let raw = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(!raw.contains(TOKEN), "the token reached the log");
    let mut phases: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for entry in &log {
        assert_eq!(entry["principal"], "alice");
        phases
            .entry(entry["id"].as_str().unwrap().to_owned())
            .or_default()
            .push((
                entry["phase"].as_str().unwrap().to_owned(),
                entry["decision"].as_str().unwrap().to_owned(),
            ));
    }
    // list_notes, delete_note, 3 x forecast, read_graph, and the ghost's
    // tool (its upstream never started).
    assert_eq!(phases.len(), 7, "{log:#?}");
    for (id, entries) in &phases {
        let kinds: Vec<&str> = entries.iter().map(|(phase, _)| phase.as_str()).collect();
        assert_eq!(kinds, ["decided", "finished"], "call {id}: {entries:?}");
    }
    let decisions: Vec<(&str, &str, &str)> = log
        .iter()
        .filter(|entry| entry["phase"] == "finished")
        .map(|entry| {
            (
                entry["tool"].as_str().unwrap(),
                entry["decision"].as_str().unwrap(),
                entry["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("list_notes", "allow", "completed"),
            ("delete_note", "deny", "refused"),
            ("forecast", "allow", "completed"),
            ("forecast", "allow", "completed"),
            ("forecast", "rate_limited", "refused"),
            ("read_graph", "allow", "completed"),
            ("anything", "unavailable", "unavailable"),
        ]
    );
    let delete = log
        .iter()
        .find(|entry| entry["tool"] == "delete_note")
        .unwrap();
    assert!(
        delete["rule"].as_str().unwrap().contains("deny"),
        "{delete}"
    );
    assert_eq!(
        delete["hints"]["destructiveHint"]["source"], "declared",
        "{delete}"
    );
    assert_eq!(
        delete["arguments_sha256"].as_str().unwrap().len(),
        64,
        "{delete}"
    );
    assert!(delete["arguments"].is_null(), "raw arguments are off");
    let completed = log
        .iter()
        .find(|entry| entry["phase"] == "finished" && entry["tool"] == "list_notes")
        .unwrap();
    assert_eq!(completed["attempts"], 1);
}

/// Runs the TypeScript SDK v2 client (tests/fixtures/gateway_client_ts.mjs)
/// against the gateway with `ops`, in the `era` given (`legacy` or
/// `modern`).
fn typescript(gateway: &Gateway, era: &str, ops: &Value) -> Value {
    let output = Command::new("node")
        .arg(peers::npm_fixture("gateway_client_ts.mjs"))
        .args([gateway.url.as_str(), TOKEN, era, &ops.to_string()])
        .output()
        .expect("node runs");
    assert!(
        output.status.success(),
        "the TypeScript client failed ({}):\n{}\n--- gateway stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        gateway.stderr()
    );
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)))
}

#[test]
fn typescript_clients_of_both_eras_reach_npm_and_pypi_upstreams() {
    let dir = scratch("typescript");
    let time = installed()
        .venv_scripts
        .join("mcp-server-time")
        .to_string_lossy()
        .into_owned();
    let config = format!(
        r#"{PREAMBLE}
[[upstream]]
name = "everything"
command = {everything}

[[upstream]]
name = "time"
command = {time}
trusted = true

[[assert]]
upstream = "time"
tool = "convert_time"
openWorldHint = true

[[rule]]
action = "deny"
upstream = "everything"
when = ["not read_only"]

[[rule]]
action = "rate_limit"
upstream = "time"
tool = "get_current_time"
limit = 1
window_secs = 600
"#,
        everything = toml_list(&npm_command("@modelcontextprotocol/server-everything")),
        time = toml_list(&[time, "--local-timezone".to_owned(), "UTC".to_owned()]),
    );
    let gateway = Gateway::start(&dir, &config);
    let legacy = typescript(
        &gateway,
        "legacy",
        &json!([
            { "op": "list" },
            call("everything__echo", json!({ "message": "through the gateway" })),
            call("everything__toggle-simulated-logging", json!({})),
            call("time__get_current_time", json!({ "timezone": "UTC" })),
            call("time__get_current_time", json!({ "timezone": "UTC" })),
        ]),
    );
    let results = legacy["results"].as_array().unwrap();
    let listed = by_name(&results[0]);
    for name in [
        "everything__echo",
        "everything__get-sum",
        "time__convert_time",
    ] {
        let tool = listed
            .get(name)
            .unwrap_or_else(|| panic!("{name} not listed: {:?}", listed.keys()));
        for hint in HINTS {
            assert!(
                tool["annotations"][hint].is_boolean(),
                "{name}: {hint}: {tool}"
            );
        }
    }
    let convert = &listed["time__convert_time"];
    assert_eq!(convert["annotations"]["openWorldHint"], true);
    assert_eq!(
        convert["_meta"]["mcp-hints/provenance"]["openWorldHint"],
        "asserted"
    );
    assert_eq!(
        convert["_meta"]["mcp-hints/provenance"]["readOnlyHint"],
        "declared"
    );
    // The SDK leaves out an `isError` that is false.
    assert_ne!(results[1]["isError"], true, "{}", results[1]);
    assert!(
        text(&results[1]).contains("through the gateway"),
        "{}",
        results[1]
    );
    assert_eq!(results[2]["isError"], true, "{}", results[2]);
    assert!(text(&results[2]).contains("rule[0]"), "{}", results[2]);
    assert_ne!(results[3]["isError"], true, "{}", results[3]);
    assert!(text(&results[3]).contains("UTC"), "{}", results[3]);
    assert_eq!(results[4]["isError"], true, "{}", results[4]);
    assert!(text(&results[4]).contains("rate"), "{}", results[4]);

    let modern = typescript(
        &gateway,
        "modern",
        &json!([
            { "op": "list" },
            call("everything__get-sum", json!({ "a": 2, "b": 3 })),
            call(
                "time__convert_time",
                json!({ "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo" }),
            ),
        ]),
    );
    let results = modern["results"].as_array().unwrap();
    assert_eq!(by_name(&results[0]).len(), listed.len());
    assert_ne!(results[1]["isError"], true, "{}", results[1]);
    assert!(text(&results[1]).contains('5'), "{}", results[1]);
    assert_ne!(results[2]["isError"], true, "{}", results[2]);
    assert!(text(&results[2]).contains("21:00"), "{}", results[2]);
    let decisions: Vec<(String, String)> = gateway
        .log_with("decided", 6)
        .iter()
        .filter(|entry| entry["phase"] == "decided")
        .map(|entry| {
            (
                entry["tool"].as_str().unwrap().to_owned(),
                entry["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("echo", "allow"),
        ("toggle-simulated-logging", "deny"),
        ("get_current_time", "allow"),
        ("get_current_time", "rate_limited"),
        ("get-sum", "allow"),
        ("convert_time", "allow"),
    ]
    .map(|(tool, decision)| (tool.to_owned(), decision.to_owned()));
    assert_eq!(decisions, expected);
}

/// A sentence with a planted secret (AWS's documented example key) among
/// ordinary words, for a page that `mcp-server-fetch` fetches.
const PLANTED: &str = "The deploy key for the staging bucket is AKIAIOSFODNN7EXAMPLE and it must \
                       not leave this page.";

#[test]
fn pypi_fetch_upstream_fetches_a_loopback_page_with_its_declared_hints() {
    let dir = scratch("fetch");
    let page = peers::ServedPage::serve(&format!(
        "<!DOCTYPE html>\n<html><head><title>Planted page</title></head>\n<body><article>\n\
         <h1>Quarterly notes</h1>\n<p>{PLANTED}</p>\n<p>Other words follow here so that the \
         extractor keeps the paragraph as content.</p>\n</article></body></html>\n"
    ));
    let config = format!(
        r#"{PREAMBLE}
[[upstream]]
name = "web"
{fetch}
[[rule]]
action = "deny"
upstream = "web"
when = ["not read_only"]
"#,
        fetch = peers::fetch_server().toml(),
    );
    let gateway = Gateway::start(&dir, &config);
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            { "op": "list" },
            call("web__fetch", json!({ "url": page.url })),
        ]),
    );
    let results = session["results"].as_array().unwrap();

    // One tool, all four hints declared by the server itself.
    let listed = by_name(&results[0]);
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        ["web__fetch"],
        "{listed:?}"
    );
    let fetch = &listed["web__fetch"];
    assert_eq!(
        fetch["annotations"],
        json!({
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": true,
        }),
        "{fetch}"
    );
    for hint in HINTS {
        assert_eq!(
            fetch["_meta"]["mcp-hints/provenance"][hint], "declared",
            "{hint}: {fetch}"
        );
    }

    // The call passed the read-only rule, reached the page over loopback
    // once (no robots.txt), and brought the planted key back verbatim in
    // the Markdown the server makes of the page.
    let result = &results[1];
    assert_ne!(result["isError"], true, "{result}");
    let text = text(result);
    assert!(
        text.starts_with(&format!("Contents of {}:\n", page.url)),
        "{text}"
    );
    assert!(text.contains(PLANTED), "{text}");
    assert!(text.contains("# Quarterly notes"), "{text}");
    assert!(!text.contains("<p>"), "the page was not simplified: {text}");
    assert_eq!(
        page.requests(),
        [("/page".to_owned(), peers::FETCH_USER_AGENT.to_owned())]
    );

    let finished: Vec<Value> = gateway
        .log_with("finished", 1)
        .into_iter()
        .filter(|entry| entry["phase"] == "finished")
        .collect();
    assert_eq!(finished.len(), 1, "{finished:#?}");
    assert_eq!(finished[0]["tool"], "fetch");
    assert_eq!(finished[0]["decision"], "allow");
    assert_eq!(finished[0]["outcome"], "completed");
}

#[test]
fn an_http_upstream_is_sent_its_headers_and_they_stay_secret() {
    // The Python SDK's server over streamable HTTP, behind an API key.
    const KEY: &str = "k-7c2e-upstream-api-key";
    let dir = scratch("http-upstream");
    let port = peers::free_port();
    let _upstream = peers::HttpPeer::start(
        Command::new(installed().python())
            .arg(peers::fixture("python_sdk_server.py"))
            .args(["http", &port.to_string(), "--require-header"])
            .arg(format!("X-Api-Key={KEY}")),
        port,
    );
    let config = format!(
        r#"{PREAMBLE}raw_arguments = true

[[upstream]]
name = "keyed"
url = "http://127.0.0.1:{port}/mcp"
headers = {{ X-Api-Key = "{KEY}" }}
trusted = true

[[upstream]]
name = "keyless"
url = "http://127.0.0.1:{port}/mcp"
"#
    );
    let gateway = Gateway::start(&dir, &config);
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            { "op": "list" },
            call("keyed__lookup", json!({ "name": "a" })),
            call("keyless__lookup", json!({ "name": "a" })),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    let listed = by_name(&results[0]);
    assert!(listed.contains_key("keyed__append"), "{:?}", listed.keys());
    assert!(
        !listed.contains_key("keyless__lookup"),
        "{:?}",
        listed.keys()
    );
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(text(&results[1]), "note a");
    // Without the header the upstream refused the gateway: its tools were
    // never listed, and a call names it unknown.
    assert_eq!(results[2]["isError"], true, "{}", results[2]);
    let stderr = gateway.stderr();
    assert!(
        stderr.contains("upstream `keyless` is unavailable"),
        "{stderr}"
    );
    let log = wait_for(
        SETTLE,
        || std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default(),
        |log| log.contains("\"lookup\""),
    );
    assert!(log.contains("\"lookup\""), "{log}");
    for (what, text) in [("audit log", &log), ("stderr", &stderr)] {
        assert!(!text.contains(KEY), "the header's value reached the {what}");
    }
}

#[test]
fn legacy_initialize_clients_are_served_too() {
    let dir = scratch("legacy");
    let gateway = Gateway::start(&dir, &config(&dir, ""));
    let session = gateway.python(
        TOKEN,
        "legacy",
        &json!([{ "op": "list" }, call("notes__forecast", json!({ "city": "Rome" }))]),
    );
    assert_ne!(session["protocol"], "2026-07-28", "initialize was used");
    let results = session["results"].as_array().unwrap();
    assert!(by_name(&results[0]).contains_key("memory__read_graph"));
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
}

/// One raw HTTP/1.1 POST of an `initialize` to `address`; the status line
/// and the whole answer.
fn post(address: &str, headers: &[(&str, &str)]) -> String {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "raw", "version": "1" } }
    });
    mcp_request(address, "POST", headers, Some(&initialize))
}

#[test]
fn http_refuses_missing_tokens_with_401_and_foreign_origins_with_403() {
    let dir = scratch("http-auth");
    let gateway = Gateway::start(&dir, &config(&dir, ""));
    let address = gateway.address();
    let bearer = format!("Bearer {TOKEN}");

    let none = post(&address, &[]);
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    assert!(none.contains("www-authenticate: Bearer"), "{none}");
    let wrong = post(&address, &[("Authorization", "Bearer not-a-token")]);
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let foreign = post(
        &address,
        &[
            ("Authorization", &bearer),
            ("Origin", "https://evil.example"),
        ],
    );
    assert!(foreign.starts_with("HTTP/1.1 403"), "{foreign}");
    let good = post(&address, &[("Authorization", &bearer)]);
    assert!(good.starts_with("HTTP/1.1 200"), "{good}");
    assert!(
        !gateway.stderr().contains(TOKEN),
        "the token reached stderr"
    );
}

/// A keep-alive client's later requests are answered on sockets with
/// `TCP_NODELAY`, on the MCP endpoint and the admin endpoint: without it,
/// the last chunk of each SSE answer waits for the client's delayed ACK
/// (40 ms on Linux).
#[cfg(target_os = "linux")]
#[test]
fn kept_alive_connections_are_served_with_tcp_nodelay() {
    let dir = scratch("nodelay");
    let config = notes_config(&format!("[admin]\ntoken = \"{ADMIN_TOKEN}\"\n")).replace(
        "http = \"127.0.0.1:0\"\n",
        "http = \"127.0.0.1:0\"\nadmin_http = \"127.0.0.1:0\"\n",
    );
    let gateway = Gateway::start(&dir, &config);
    let bearer = format!("Bearer {TOKEN}");
    let mut connection = KeptAlive::connect(&gateway.address());
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in 1..=3 {
        let (status, body) = loop {
            let (status, body) =
                connection.call_tool(id, "notes__list_notes", &[("Authorization", &bearer)]);
            // The upstream may still be starting: its tool is unknown then.
            if status == 200 || Instant::now() >= deadline {
                break (status, body);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(status, 200, "{body}\n{}", gateway.stderr());
        assert!(
            body.contains(&format!(r#""id":{id},"result":{{"#))
                && body.contains(r#""isError":false"#),
            "{body}"
        );
    }
    assert!(
        support::server_side_nodelay(gateway.child.id(), connection.stream()),
        "the MCP endpoint serves its connections without TCP_NODELAY"
    );

    let admin = gateway.admin.clone().unwrap();
    let mut connection = KeptAlive::connect(admin.trim_start_matches("http://"));
    let authorization = format!("Bearer {ADMIN_TOKEN}");
    for _ in 0..2 {
        let (status, body) =
            connection.send("GET /pending", &[("Authorization", &authorization)], "");
        assert_eq!(status, 200, "{body}");
    }
    assert!(
        support::server_side_nodelay(gateway.child.id(), connection.stream()),
        "the admin endpoint serves its connections without TCP_NODELAY"
    );
}

#[test]
fn http_answers_401_before_anything_else_without_a_clients_token() {
    let dir = scratch("http-auth-first");
    let gateway = Gateway::start(&dir, &notes_config(""));
    let address = gateway.address();
    let bearer = format!("Bearer {TOKEN}");
    let live = session_of(&post(&address, &[("Authorization", &bearer)]));
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let quoted = [
        ("Content-Type", "application/json"),
        ("Accept", r#"application/json, text/event-stream;x=";q=0;""#),
    ];
    let with = |extra: &[(&'static str, &'static str)], base: &[(&'static str, &'static str)]| {
        let mut headers = base.to_vec();
        headers.extend_from_slice(extra);
        headers
    };
    let too_long = with(&[("Content-Length", "5000000")], &json);
    let foreign = with(&[("Origin", "https://evil.example")], &json);
    let unknown = "00000000-0000-4000-8000-000000000000";
    // Each case: method, headers, body, and the answer a client's token gets.
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a [u8], &'a str);
    let cases: Vec<Case> = vec![
        ("DELETE", vec![("Mcp-Session-Id", unknown)], b"", "404"),
        ("DELETE", vec![("Mcp-Session-Id", live.as_str())], b"", "2"),
        ("POST", json.to_vec(), b"{", "400"),
        ("POST", quoted.to_vec(), b"{", "400"),
        ("POST", too_long, b"{\"jsonrpc\"", "413"),
        ("POST", foreign, b"{}", "403"),
        ("GET", vec![("Accept", "text/event-stream")], b"", "4"),
    ];
    for (method, headers, body, _) in &cases {
        for token in [None, Some("Bearer not-a-token")] {
            let mut headers = headers.clone();
            if let Some(token) = token {
                headers.push(("Authorization", token));
            }
            let answer = raw_request(&address, method, &headers, body);
            assert!(
                answer.starts_with("HTTP/1.1 401"),
                "{method} {headers:?} {:?}: {answer}",
                String::from_utf8_lossy(body)
            );
            assert!(answer.contains("www-authenticate: Bearer"), "{answer}");
            assert!(!answer.contains("Session not found"), "{answer}");
        }
    }
    // With the token, each is the guard's or rmcp's to answer (the live
    // session last: the token ends it).
    for (method, headers, body, authorized) in cases.iter().rev() {
        let mut headers = headers.clone();
        headers.push(("Authorization", &bearer));
        let answer = raw_request(&address, method, &headers, body);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {authorized}")),
            "{method} {headers:?}: {answer}"
        );
        if *authorized == "400" {
            // The guard's parse error, the quoted `Accept` included.
            assert!(answer.contains("\"code\":-32700"), "{headers:?}: {answer}");
        }
    }
    // A client's token beside another `Authorization`, in either order:
    // neither is taken, and the answer says why.
    for pair in [
        [bearer.as_str(), "Bearer not-a-token"],
        ["Basic eDp5", bearer.as_str()],
    ] {
        let mut headers = json.to_vec();
        headers.extend(pair.iter().map(|value| ("Authorization", *value)));
        let answer = raw_request(&address, "POST", &headers, b"{}");
        assert!(answer.starts_with("HTTP/1.1 400"), "{pair:?}: {answer}");
        assert!(
            answer.contains("www-authenticate: Bearer realm=\"mcp\", error=\"invalid_request\""),
            "{answer}"
        );
        assert!(
            answer.contains("the request has more than one `Authorization` header"),
            "{answer}"
        );
    }
}

#[test]
fn malformed_config_exits_2_naming_line_and_key() {
    let dir = scratch("malformed");
    let path = dir.join("gateway.toml");
    std::fs::write(
        &path,
        "[listen]\nhttp = \"127.0.0.1:0\"\nbogus = 1\n\n[log]\npath = \"audit.jsonl\"\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["gateway", "serve", "--config"])
        .arg(&path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("gateway.toml:3:1: listen.bogus: unknown key `bogus`"),
        "{stderr}"
    );
}

#[test]
fn gateway_check_exits_2_on_a_redact_table_it_cannot_use() {
    let dir = scratch("redact-check");
    let path = dir.join("gateway.toml");
    std::fs::write(
        &path,
        format!(
            "{PREAMBLE}\n[[upstream]]\nname = \"notes\"\nurl = \"http://127.0.0.1:9/mcp\"\n\n\
             [[redact]]\npattern = \"(unclosed\"\n\n[[redact]]\ndetectors = [\"aws_keys\"]\n"
        ),
    )
    .unwrap();
    let (status, _, stderr) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &[],
    );
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "gateway.toml:16:11: redact[0].pattern: not a usable regular expression: unclosed \
             group (at character 1)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "gateway.toml:19:14: redact[1].detectors[0]: unknown detector `aws_keys`; the \
             detectors are `private_key`, `aws_access_key`, `github_token`, `gitlab_token`, \
             `openai_api_key`, `slack_token`, `bearer_token`, `secrets`"
        ),
        "{stderr}"
    );
}

/// `mcp-hints gateway serve` on the config `bytes`, expected to refuse it
/// at start: its exit status and stderr. A gateway that starts instead is
/// stopped after 60 s and its status is `None`.
fn refused_at_start(dir: &Path, bytes: &[u8]) -> (Option<i32>, String) {
    let path = dir.join("gateway.toml");
    std::fs::write(&path, bytes).unwrap();
    let stderr_path = dir.join("stderr.txt");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["gateway", "serve", "--config"])
        .arg(&path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("mcp-hints runs");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, std::fs::read_to_string(&stderr_path).unwrap())
}

#[test]
fn a_client_token_no_request_can_carry_is_refused_at_start() {
    let dir = scratch("unsendable-token");
    let config = notes_config("").replace(
        concat!("token = \"", alice_token!(), "\""),
        concat!("token = \" ", alice_token!(), "\""),
    );
    let (status, stderr) = refused_at_start(&dir, config.as_bytes());
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "gateway.toml:6:9: client[0].token: the token has a space at character 1: a bearer \
             token is A-Z"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN), "the token reached stderr");
}

#[test]
fn a_config_that_is_not_utf8_exits_2_naming_line_column_and_byte() {
    let dir = scratch("not-utf8");
    let mut config = notes_config("").into_bytes();
    config.extend_from_slice(b"# caf\xe9\n");
    let offset = config.len() - 2;
    let lines = config.iter().filter(|byte| **byte == b'\n').count();
    let (status, stderr) = refused_at_start(&dir, &config);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "gateway.toml:{lines}:6: not UTF-8 (byte 0xE9 at byte offset {offset}): a TOML \
             config must be UTF-8 text"
        )),
        "{stderr}"
    );
}

/// A config with the fixture upstream `fx` (tests/fixtures/gateway_upstream.py,
/// trusted) started with `args`, the notes upstream, and `extra`.
fn fx_config(dir: &Path, args: &[&str], extra: &str) -> String {
    let mut command = vec![
        installed().python().to_string_lossy().into_owned(),
        peers::fixture("gateway_upstream.py")
            .to_string_lossy()
            .into_owned(),
        dir.join("counter.txt").to_string_lossy().into_owned(),
    ];
    command.extend(args.iter().map(|arg| (*arg).to_owned()));
    let notes = notes_server().to_string_lossy().into_owned();
    format!(
        r#"{PREAMBLE}
[[upstream]]
name = "fx"
command = {fx}
trusted = true
call_timeout_secs = 20

[[upstream]]
name = "notes"
command = {notes}
trusted = true

{extra}"#,
        fx = toml_list(&command),
        notes = toml_list(&[notes]),
    )
}

/// A config with the fixture upstream `fx` started with `args`, the admin
/// endpoint on a free loopback port with [`ADMIN_TOKEN`], and `extra`.
fn fx_admin_config(dir: &Path, args: &[&str], extra: &str) -> String {
    fx_config(
        dir,
        args,
        &format!("[admin]\ntoken = \"{ADMIN_TOKEN}\"\n\n{extra}"),
    )
    .replace(
        "http = \"127.0.0.1:0\"\n",
        "http = \"127.0.0.1:0\"\nadmin_http = \"127.0.0.1:0\"\n",
    )
}

/// How many times the fixture's `count` tools ran.
fn executions(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("counter.txt"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// [`executions`] once they are `count` at least, for [`SETTLE`] at most
/// (a count that must stay 0 is read at once: there is nothing to wait for).
fn executions_reach(dir: &Path, count: usize) -> usize {
    wait_for(SETTLE, || executions(dir), |done| *done >= count)
}

#[test]
fn upstream_list_changed_is_followed() {
    let dir = scratch("list-changed");
    let gateway = Gateway::start(&dir, &fx_config(&dir, &[], ""));
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            { "op": "list" },
            call("fx__grow", json!({})),
            { "op": "sleep", "seconds": 1 },
            { "op": "list" },
            call("fx__grown", json!({ "text": "hi" })),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    assert!(!by_name(&results[0]).contains_key("fx__grown"));
    let after = by_name(&results[3]);
    let grown = after
        .get("fx__grown")
        .unwrap_or_else(|| panic!("not followed: {:?}\n{}", after.keys(), gateway.stderr()));
    assert_eq!(grown["annotations"]["readOnlyHint"], true);
    assert_eq!(results[4]["isError"], false, "{}", results[4]);
    assert!(after.contains_key("notes__list_notes"));
}

#[test]
fn clients_of_both_lifecycles_are_told_when_an_upstream_changed_its_tools() {
    let dir = scratch("list-changed-notify");
    let gateway = Gateway::start(&dir, &fx_config(&dir, &[], ""));
    // 2026-07-28: on a subscriptions/listen stream.
    let modern = gateway.python(
        TOKEN,
        "auto",
        &json!([{ "op": "listen_then_call", "name": "fx__grow", "arguments": {} }]),
    );
    let result = &modern["results"][0];
    assert_eq!(result["call"]["isError"], false, "{result}");
    assert!(
        result["event"].as_str().unwrap().contains("Tool"),
        "{result}"
    );
    // initialize: notifications/tools/list_changed on the session.
    let legacy = gateway.python(
        TOKEN,
        "legacy",
        &json!([
            { "op": "list" },
            call("fx__grow", json!({})),
            { "op": "sleep", "seconds": 2 },
            { "op": "notifications" },
        ]),
    );
    let seen = &legacy["results"][3];
    assert!(
        seen.as_array()
            .unwrap()
            .iter()
            .any(|method| method == "notifications/tools/list_changed"),
        "{seen}\n{}",
        gateway.stderr()
    );
}

#[test]
fn lost_responses_are_resent_only_when_replay_safe() {
    let dir = scratch("delivery-unknown");
    let gateway = Gateway::start(&dir, &fx_config(&dir, &[], ""));
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            call("fx__count_then_die", json!({})),
            call("fx__count", json!({})),
            call("notes__list_notes", json!({})),
            call("fx__peek_once_then_die", json!({})),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    // A read-only tool of a trusted upstream is resent after the lost
    // response (to the upstream started again).
    assert_eq!(results[3]["isError"], false, "{}", results[3]);
    assert_eq!(text(&results[3]), "peeked");
    // The upstream died after running it: delivery unknown, not resent
    // (an additive write), with what to read back.
    assert_eq!(results[0]["isError"], true, "{}", results[0]);
    let lost = text(&results[0]);
    assert!(
        lost.contains("delivery of `count_then_die` is unknown after 1 attempt"),
        "{lost}"
    );
    assert!(lost.contains("read back"), "{lost}");
    assert_eq!(results[0]["_meta"]["mcp-hints/gateway"]["attempts"], 1);
    // The replay-safe client started the upstream again for the next call,
    // and the operator is told.
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(text(&results[1]), "2");
    let said = stderr_line(&gateway, "upstream `fx` was started again");
    assert!(said.contains("what it kept in memory is gone"), "{said}");
    assert_eq!(executions_reach(&dir, 2), 2, "each call ran exactly once");
    // The other upstream never stopped serving.
    assert_eq!(results[2]["isError"], false, "{}", results[2]);
    let finished: Vec<(String, String)> = gateway
        .log_with("finished", 4)
        .iter()
        .filter(|entry| entry["phase"] == "finished")
        .map(|entry| {
            (
                entry["tool"].as_str().unwrap().to_owned(),
                entry["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        finished[0],
        ("count_then_die".into(), "delivery_unknown".into())
    );
    assert_eq!(finished[1], ("count".into(), "completed".into()));
    let peek = gateway
        .log_with("finished", 4)
        .into_iter()
        .find(|entry| entry["phase"] == "finished" && entry["tool"] == "peek_once_then_die")
        .unwrap();
    assert_eq!(peek["attempts"], 2, "{peek}");
    assert_eq!(peek["outcome"], "completed", "{peek}");
}

/// A log that can no longer be written while the gateway serves (here
/// removed, so that a line would be lost with the old file) refuses the
/// next call before it goes upstream: the upstream runs it 0 times.
#[test]
fn a_call_is_refused_unforwarded_once_the_audit_log_cannot_be_written() {
    let dir = scratch("log-fails");
    let gateway = Gateway::start(&dir, &fx_config(&dir, &[], ""));
    let first = gateway.python(TOKEN, "auto", &json!([call("fx__count", json!({}))]));
    assert_eq!(first["results"][0]["isError"], false, "{first}");
    assert_eq!(executions_reach(&dir, 1), 1);
    std::fs::remove_file(&gateway.log).unwrap();
    let second = gateway.python(TOKEN, "auto", &json!([call("fx__count", json!({}))]));
    let refused = &second["results"][0];
    assert_eq!(refused["isError"], true, "{second}");
    assert!(
        text(refused).contains("the gateway's audit log cannot be written"),
        "{refused}"
    );
    assert_eq!(refused["_meta"]["mcp-hints/gateway"]["reason"], "audit_log");
    assert_eq!(executions(&dir), 1, "the upstream ran the refused call");
    stderr_line(&gateway, "calls are refused until it can be written");
}

#[test]
fn the_decided_entry_is_in_the_log_before_the_upstream_runs_the_call() {
    // The fixture's `read_log` counts its own entries in the audit log while
    // it runs: its `decided` entry must be there, its `finished` not yet.
    let dir = scratch("decided-first");
    let gateway = Gateway::start(&dir, &fx_config(&dir, &[], ""));
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            call("fx__read_log", json!({})),
            call("fx__read_log", json!({}))
        ]),
    );
    let seen: Vec<Value> = (0..2)
        .map(|n| {
            let result = &session["results"][n];
            assert_eq!(result["isError"], false, "{session}");
            serde_json::from_str(text(result)).unwrap()
        })
        .collect();
    assert_eq!(seen[0], json!({ "decided": 1, "finished": 0 }), "{session}");
    assert_eq!(seen[1], json!({ "decided": 2, "finished": 1 }), "{session}");
}

/// How many times counter-server finished `tool`, from its executions
/// file.
/// Waits (60 s at most) until `upstream` serves: at once when no upstream
/// was unavailable at start, else until it says it is reachable now. An
/// upstream behind fault-proxy with a call timeout of 2 s (which bounds its
/// connect too) can miss it on a loaded machine; it is tried again 5 s
/// later, and a client that lists before then does not see its tools.
fn wait_until_reachable(gateway: &Gateway, upstream: &str) {
    let reachable = format!("upstream `{upstream}` is reachable now");
    let stderr = wait_for(
        Duration::from_secs(60),
        || gateway.stderr(),
        |stderr| stderr.contains(" (0 unavailable)") || stderr.contains(&reachable),
    );
    assert!(
        stderr.contains(" (0 unavailable)") || stderr.contains(&reachable),
        "upstream `{upstream}` never became reachable:\n{stderr}"
    );
}

fn finished_runs(executions: &Path, tool: &str) -> usize {
    std::fs::read_to_string(executions)
        .unwrap_or_default()
        .lines()
        .filter(|line| *line == format!("done {tool}"))
        .count()
}

#[test]
fn lost_responses_through_a_fault_proxy_are_resent_by_the_asserted_hints() {
    // counter-server (trusted) behind fault-proxy, which swallows the first
    // response of each tool: the gateway's call times out after running.
    let dir = scratch("fault-proxy");
    let executions = dir.join("executions.txt");
    let mut command = vec![
        support::faults_binary("fault-proxy")
            .to_string_lossy()
            .into_owned(),
    ];
    for tool in ["read", "append", "set_value", "append_keyed"] {
        command.extend(["--fault".to_owned(), format!("drop-response:{tool}@1")]);
    }
    command.extend([
        "--log".to_owned(),
        dir.join("faults.jsonl").to_string_lossy().into_owned(),
        "stdio".to_owned(),
        "--".to_owned(),
        support::faults_binary("counter-server")
            .to_string_lossy()
            .into_owned(),
        "--executions".to_owned(),
        executions.to_string_lossy().into_owned(),
    ]);
    let config = format!(
        r#"{PREAMBLE}
[[upstream]]
name = "counter"
command = {command}
trusted = true
call_timeout_secs = 2

# The server says set_value is idempotent; the operator says otherwise.
[[assert]]
upstream = "counter"
tool = "set_value"
idempotentHint = false
"#,
        command = toml_list(&command),
    );
    let gateway = Gateway::start(&dir, &config);
    wait_until_reachable(&gateway, "counter");
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            { "op": "list" },
            call("counter__read", json!({})),
            call("counter__append", json!({ "text": "a" })),
            call("counter__set_value", json!({ "name": "n", "value": "1" })),
            call("counter__append_keyed", json!({ "text": "k" })),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    let context = gateway.stderr();
    let listed = by_name(&results[0]);
    assert_eq!(
        listed["counter__set_value"]["annotations"]["idempotentHint"], false,
        "the asserted hint is what clients see"
    );
    // Read-only on a trusted upstream: resent, and answered.
    assert_eq!(results[1]["isError"], false, "{}\n{context}", results[1]);
    // An additive write: not resent; the agent is told to read back.
    assert_eq!(results[2]["isError"], true, "{}", results[2]);
    assert!(text(&results[2]).contains("delivery of `append` is unknown after 1 attempt"));
    // Declared idempotent, asserted not: the operator's word decides.
    assert_eq!(results[3]["isError"], true, "{}", results[3]);
    let lost = text(&results[3]);
    assert!(
        lost.contains("idempotentHint is false (asserted)"),
        "{lost}"
    );
    assert!(lost.contains("unknown after 1 attempt"), "{lost}");
    // Keyed: resent with the same key, and run once.
    assert_eq!(results[4]["isError"], false, "{}\n{context}", results[4]);
    // What ran upstream: the read twice (harmless), every write once.
    let runs = |tool, count| {
        wait_for(
            SETTLE,
            || finished_runs(&executions, tool),
            |done| *done >= count,
        )
    };
    assert_eq!(runs("read", 2), 2);
    assert_eq!(runs("append", 1), 1);
    assert_eq!(runs("set_value", 1), 1);
    assert_eq!(runs("append_keyed", 1), 1);
    let fired = wait_for(
        SETTLE,
        || std::fs::read_to_string(dir.join("faults.jsonl")).unwrap_or_default(),
        |fired| fired.lines().count() >= 4,
    );
    assert_eq!(fired.lines().count(), 4, "{fired}");
    let finished: Vec<(String, String, u64)> = gateway
        .log_with("finished", 4)
        .into_iter()
        .filter(|entry| entry["phase"] == "finished")
        .map(|entry| {
            (
                entry["tool"].as_str().unwrap().to_owned(),
                entry["outcome"].as_str().unwrap().to_owned(),
                entry["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("read", "completed", 2),
        ("append", "delivery_unknown", 1),
        ("set_value", "delivery_unknown", 1),
        ("append_keyed", "completed", 2),
    ]
    .map(|(tool, outcome, attempts)| (tool.to_owned(), outcome.to_owned(), attempts));
    assert_eq!(finished, expected);
    let decided = gateway
        .log_with("finished", 4)
        .into_iter()
        .find(|entry| entry["tool"] == "set_value")
        .unwrap();
    assert_eq!(decided["hints"]["idempotentHint"]["source"], "asserted");
}

#[test]
fn colliding_names_are_refused_at_start_with_both_named() {
    let dir = scratch("collide");
    let path = dir.join("gateway.toml");
    std::fs::write(&path, fx_config(&dir, &["--dotted"], "")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["gateway", "serve", "--config"])
        .arg(&path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("tools `fx__a.b` and `fx__a_b` collide: both become `fx__a_b`"),
        "{stderr}"
    );
}

#[test]
fn upstream_stderr_is_prefixed_and_escaped() {
    let dir = scratch("stderr");
    let gateway = Gateway::start(&dir, &fx_config(&dir, &[], ""));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stderr = gateway.stderr();
        if let Some(line) = stderr
            .lines()
            .find(|line| line.starts_with("fx: fixture upstream ready "))
        {
            assert!(!line.contains('\u{1b}'), "not escaped: {line:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no prefixed line: {stderr}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const ADMIN_TOKEN: &str = "admin-secret-9b2e";

/// `mcp-hints gateway ARGS` with the admin token in the environment.
fn admin_command(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .arg("gateway")
        .args(args)
        .env("NO_COLOR", "1")
        .env("MCP_GATEWAY_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap()
}

/// Runs the Python client with `ops` (one call that gets parked) while
/// the admin `verb`s (`approve` or `deny`) the parked call; the client's
/// session.
fn decide_parked(gateway: &Arc<Gateway>, ops: Value, verb: &str) -> Value {
    let admin = gateway
        .admin
        .clone()
        .expect("the admin endpoint is announced");
    let client = {
        let gateway = gateway.clone();
        std::thread::spawn(move || gateway.python(TOKEN, "auto", &ops))
    };
    let ids = pending_ids(&admin, 1);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let decided = admin_command(&[verb, &ids[0], "--admin", &admin]);
    assert!(
        decided.status.success(),
        "{verb}: {}",
        String::from_utf8_lossy(&decided.stderr)
    );
    client.join().unwrap()
}

/// `PHASE:DECISION` of every audit log entry, in order, once there are
/// `count` of them (for [`SETTLE`] at most).
fn phases(gateway: &Gateway, count: usize) -> Vec<String> {
    gateway
        .log_of(count)
        .iter()
        .map(|entry| {
            format!(
                "{}:{}",
                entry["phase"].as_str().unwrap(),
                entry["decision"].as_str().unwrap()
            )
        })
        .collect()
}

/// The ids of the parked calls, from `GET /pending` (waits 30 s at most
/// for `count` of them).
fn pending_ids(admin: &str, count: usize) -> Vec<String> {
    let address = admin.trim_start_matches("http://");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut stream = TcpStream::connect(address).unwrap();
        write!(
            stream,
            "GET /pending HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer \
             {ADMIN_TOKEN}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let body = &answer[answer.find("\r\n\r\n").unwrap() + 4..];
        let pending: Value = serde_json::from_str(body).unwrap();
        let ids: Vec<String> = pending["pending"]
            .as_array()
            .unwrap()
            .iter()
            .map(|parked| parked["id"].as_str().unwrap().to_owned())
            .collect();
        if ids.len() >= count {
            return ids;
        }
        assert!(Instant::now() < deadline, "nothing parked: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn require_approval_parks_until_approved_or_denied() {
    let dir = scratch("approval");
    let extra = r#"[[rule]]
action = "require_approval"
upstream = "fx"
tool = "count"
timeout_secs = 60
on_expiry = "deny"
"#;
    let gateway = Arc::new(Gateway::start(&dir, &fx_admin_config(&dir, &[], extra)));
    let admin = gateway
        .admin
        .clone()
        .expect("the admin endpoint is announced");

    // Without the admin token: 401, and a client token is not one.
    let unauthorized = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["gateway", "pending", "--admin", &admin])
        .env("MCP_GATEWAY_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(unauthorized.status.code(), Some(2));

    for (verb, expected) in [("approve", false), ("deny", true)] {
        let session = decide_parked(&gateway, json!([call("fx__count", json!({}))]), verb);
        let result = &session["results"][0];
        assert_eq!(result["isError"], expected, "{verb}: {result}");
    }
    assert_eq!(executions_reach(&dir, 1), 1, "only the approved call ran");
    assert_eq!(
        phases(&gateway, 6),
        [
            "decided:require_approval",
            "decided:approved",
            "finished:approved",
            "decided:require_approval",
            "decided:denied",
            "finished:denied",
        ]
    );
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The first stderr line of `gateway` holding `needle` (waits 30 s at most).
fn stderr_line(gateway: &Gateway, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = gateway
            .stderr
            .lock()
            .unwrap()
            .iter()
            .find(|line| line.contains(needle))
            .cloned();
        if let Some(line) = found {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no `{needle}` on stderr:\n{}",
            gateway.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `sh -c COMMAND` from `/`, with `mcp-hints` on `PATH` and `env` set.
fn shell(command: &str, env: &[(&str, &str)]) -> std::process::Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_mcp-hints")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut shell = Command::new("sh");
    shell
        .args(["-c", command])
        .current_dir("/")
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env_remove("MCP_GATEWAY_ADMIN_TOKEN")
        .env_remove("MCP_GATEWAY_ADMIN_URL");
    for (name, value) in env {
        shell.env(name, value);
    }
    shell.output().unwrap()
}

/// Each of `entries`' tool and decision, in order.
fn tool_decisions<'a>(entries: impl IntoIterator<Item = &'a Value>) -> Vec<(&'a str, &'a str)> {
    entries
        .into_iter()
        .map(|entry| {
            (
                entry["tool"].as_str().unwrap(),
                entry["decision"].as_str().unwrap(),
            )
        })
        .collect()
}

/// A rule that parks every `fx__count` call for an approver, for
/// `timeout_secs` at most.
fn park_count(timeout_secs: u32) -> String {
    format!(
        "[[rule]]\naction = \"require_approval\"\nupstream = \"fx\"\ntool = \"count\"\n\
         timeout_secs = {timeout_secs}\n"
    )
}

/// `fx__count` called once by the Python client, in a thread of its own
/// (the call waits while it is parked): the session it reports.
fn count_in_background(gateway: &Arc<Gateway>) -> std::thread::JoinHandle<Value> {
    let gateway = gateway.clone();
    std::thread::spawn(move || {
        gateway.python(TOKEN, "auto", &json!([call("fx__count", json!({}))]))
    })
}

/// Without an admin endpoint the gateway does not print a command that
/// could reach nothing: it says none is served, and the call expires by
/// its rule.
#[test]
fn a_call_parked_without_an_admin_endpoint_says_none_is_served_and_expires() {
    let dir = scratch("parked-without-admin");
    let extra = park_count(1);
    let gateway = Arc::new(Gateway::start(&dir, &fx_config(&dir, &[], &extra)));
    let client = count_in_background(&gateway);
    let line = stderr_line(&gateway, "is parked for approval: ");
    assert!(
        line.contains(
            "is parked for approval: this gateway serves no admin endpoint (`listen.admin_http` \
             and `[admin]`), so only the application (`Gateway::approvals`) can decide call "
        ),
        "{line}"
    );
    assert!(!line.contains("mcp-hints gateway approve"), "{line}");
    let session = client.join().unwrap();
    let result = &session["results"][0];
    assert_eq!(result["isError"], true, "{result}");
    assert!(
        text(result).starts_with("`fx__count` was not approved within 1 s, so it expired"),
        "{result}"
    );
    assert_eq!(executions(&dir), 0);
}

/// `approve --by NAME` names the approver: in the client's answer, in the
/// audit log's `by`, and in `gateway log --columns ...,by`; a name a
/// terminal would not show as itself is refused (400), the call still
/// parked.
#[test]
fn approve_by_names_the_approver_in_the_answer_and_the_audit_log() {
    let dir = scratch("approve-by");
    let extra = park_count(60);
    let gateway = Arc::new(Gateway::start(&dir, &fx_admin_config(&dir, &[], &extra)));
    let admin = gateway.admin.clone().expect("an admin endpoint");
    let client = count_in_background(&gateway);
    let id = pending_ids(&admin, 1).remove(0);
    let approve = |by: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-hints"));
        command
            .args(["gateway", "approve", &id, "--by", by, "--admin", &admin])
            .env("MCP_GATEWAY_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let refused = approve("car\u{202e}ol");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("`by` is at most 64 characters"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let approved = approve("carol");
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let session = client.join().unwrap();
    assert_eq!(session["results"][0]["isError"], false, "{session}");
    let log = gateway.log_with("finished", 1);
    let decided: Vec<&Value> = log
        .iter()
        .filter(|entry| entry["decision"] == "approved" && entry["phase"] == "decided")
        .collect();
    assert_eq!(decided.len(), 1, "{log:?}");
    assert_eq!(decided[0]["by"], "carol");
    // Only the decision names who took it.
    let named = log.iter().filter(|entry| entry.get("by").is_some());
    assert_eq!(named.count(), 1, "{log:?}");
    let (status, table, stderr) = gateway_command(
        &[
            "log".as_ref(),
            "--log".as_ref(),
            gateway.log.as_os_str(),
            "--columns".as_ref(),
            "tool,decision,phase,by".as_ref(),
        ],
        &[],
    );
    assert_eq!(status, Some(0), "{stderr}");
    assert!(
        table
            .lines()
            .any(|line| line.split_whitespace().collect::<Vec<_>>()
                == ["count", "approved", "decided", "carol"]),
        "{table}"
    );
}

#[test]
fn the_approve_command_the_gateway_prints_runs_as_printed() {
    let dir = scratch("approve-as-printed");
    let extra = park_count(60);
    let port = free_port();
    let config = fx_admin_config(&dir, &[], &extra).replace(
        "admin_http = \"127.0.0.1:0\"",
        &format!("admin_http = \"127.0.0.1:{port}\""),
    );
    let gateway = Arc::new(Gateway::start(&dir, &config));
    let client = count_in_background(&gateway);
    let line = stderr_line(&gateway, "is parked for approval: ");
    let printed = line.split("is parked for approval: ").nth(1).unwrap();
    let config_path = std::path::absolute(dir.join("gateway.toml")).unwrap();
    assert!(
        printed.ends_with(&format!(" --config {}", config_path.display())),
        "{printed}"
    );

    // `pending` finds the endpoint from the config, and the token there too.
    let pending = shell(
        &format!(
            "mcp-hints gateway pending --config '{}'",
            config_path.display()
        ),
        &[],
    );
    let listed = String::from_utf8_lossy(&pending.stdout);
    assert!(
        pending.status.success() && listed.contains("1 call parked"),
        "{listed}{}",
        String::from_utf8_lossy(&pending.stderr)
    );
    // The printed command, as printed, with the admin's token set.
    let approved = shell(printed, &[("MCP_GATEWAY_ADMIN_TOKEN", ADMIN_TOKEN)]);
    assert!(
        approved.status.success(),
        "`{printed}`: {}",
        String::from_utf8_lossy(&approved.stderr)
    );
    assert!(String::from_utf8_lossy(&approved.stdout).starts_with("approved "));
    let session = client.join().unwrap();
    assert_eq!(session["results"][0]["isError"], false, "{session}");
    assert_eq!(executions_reach(&dir, 1), 1);

    // The endpoint from the environment, with neither flag.
    let admin = format!("http://127.0.0.1:{port}");
    let from_env = shell(
        "mcp-hints gateway pending",
        &[
            ("MCP_GATEWAY_ADMIN_URL", admin.as_str()),
            ("MCP_GATEWAY_ADMIN_TOKEN", ADMIN_TOKEN),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&from_env.stdout),
        "no parked calls\n"
    );
    // And with none of them: exit 2, saying what to give.
    let nowhere = shell("mcp-hints gateway pending", &[]);
    assert_eq!(nowhere.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&nowhere.stderr).contains(
            "give the admin endpoint: --config FILE (the gateway's config), --admin URL, or \
             MCP_GATEWAY_ADMIN_URL"
        ),
        "{}",
        String::from_utf8_lossy(&nowhere.stderr)
    );
}

#[test]
fn a_parked_call_nobody_answers_becomes_its_rules_on_expiry() {
    let dir = scratch("approval-expiry");
    let extra = r#"[[rule]]
action = "require_approval"
upstream = "fx"
tool = "count"
timeout_secs = 1
on_expiry = "deny"

[[rule]]
action = "require_approval"
upstream = "fx"
tool = "echo"
timeout_secs = 1
on_expiry = "approve"
"#;
    let gateway = Gateway::start(&dir, &fx_admin_config(&dir, &[], extra));
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            call("fx__count", json!({})),
            call("fx__echo", json!({ "text": "went on" })),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    assert_eq!(results[0]["isError"], true, "{}", results[0]);
    assert!(
        text(&results[0]).starts_with(
            "`fx__count` was not approved within 1 s, so it expired and was denied under the \
             gateway's rule[0]"
        ),
        "{}",
        results[0]
    );
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(text(&results[1]), "went on");
    assert_eq!(executions(&dir), 0, "the expired, denied call never ran");
    let decisions: Vec<String> = gateway
        .log_of(6)
        .iter()
        .map(|entry| {
            format!(
                "{}:{}:{}:{}",
                entry["tool"].as_str().unwrap(),
                entry["phase"].as_str().unwrap(),
                entry["decision"].as_str().unwrap(),
                entry["outcome"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        [
            "count:decided:require_approval:-",
            "count:decided:expired:-",
            "count:finished:expired:refused",
            "echo:decided:require_approval:-",
            "echo:decided:expired:-",
            "echo:finished:expired:completed",
        ]
    );
}

#[test]
fn a_drifted_tool_waits_for_approval_and_the_refusal_names_what_changed() {
    let dir = scratch("drift");
    let extra = "[lock]\npath = \"gateway.lock\"\ndeny_drift = true\n";
    let echo = |text: &str| json!([call("fx__echo", json!({ "text": text }))]);
    let locked = |dir: &Path| -> Value {
        // Null until the file is there and whole.
        let lock: Value = std::fs::read_to_string(dir.join("gateway.lock"))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        lock["tools"]["fx__echo"].clone()
    };
    // A new tool (an empty lock): parked, approved, the lock written.
    {
        let gateway = Arc::new(Gateway::start(&dir, &fx_admin_config(&dir, &[], extra)));
        let session = decide_parked(&gateway, echo("a"), "approve");
        assert_eq!(session["results"][0]["isError"], false, "{}", session);
        assert!(wait_for(SETTLE, || locked(&dir), Value::is_object).is_object());
        // Approved now: the next call goes straight through.
        let again = gateway.python(TOKEN, "auto", &echo("b"));
        assert_eq!(again["results"][0]["isError"], false, "{again}");
    }
    // The same tool with another description: parked again; denied, the
    // refusal names what changed.
    let changed = fx_admin_config(&dir, &["--describe", "Now it does more."], extra);
    let gateway = Arc::new(Gateway::start(&dir, &changed));
    let session = decide_parked(&gateway, echo("c"), "deny");
    let result = &session["results"][0];
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(result).contains("description"), "{}", text(result));
    let before = locked(&dir);
    // Asked again, and approved this time: it runs, and the lock holds the
    // changed tool.
    let session = decide_parked(&gateway, echo("d"), "approve");
    assert_eq!(text(&session["results"][0]), "d", "{session}");
    assert_ne!(
        wait_for(SETTLE, || locked(&dir), |now| *now != before),
        before,
        "the lock was not updated"
    );
    // Both gateways wrote to the same log.
    assert_eq!(
        phases(&gateway, 13),
        [
            "decided:drift",
            "decided:approved",
            "decided:allow",
            "finished:allow",
            "decided:allow",
            "finished:allow",
            "decided:drift",
            "decided:denied",
            "finished:denied",
            "decided:drift",
            "decided:approved",
            "decided:allow",
            "finished:allow",
        ]
    );
    // One chain: the first gateway's shutdown checkpoint between the two.
    let lines: Vec<Value> = std::fs::read_to_string(&gateway.log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let checkpoints: Vec<(usize, &Value)> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| line.get("checkpoint").is_some())
        .collect();
    assert_eq!(checkpoints.len(), 1, "{lines:?}");
    assert_eq!((checkpoints[0].0, &checkpoints[0].1["seq"]), (6, &json!(7)));
    let seqs: Vec<u64> = lines
        .iter()
        .map(|line| line["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=lines.len() as u64).collect::<Vec<_>>());
}

#[test]
fn stdio_clients_are_principal_local() {
    let dir = scratch("stdio");
    let config = fx_config(&dir, &[], "");
    let path = dir.join("gateway.toml");
    std::fs::write(&path, &config).unwrap();
    let output = Command::new(installed().python())
        .arg(peers::fixture("gateway_client.py"))
        .args([
            "stdio",
            "",
            "auto",
            &json!([{ "op": "list" }, call("fx__echo", json!({ "text": "over stdio" }))])
                .to_string(),
        ])
        .env("GATEWAY_COMMAND", env!("CARGO_BIN_EXE_mcp-hints"))
        .env("GATEWAY_CONFIG", &path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let session: Value = serde_json::from_slice(&output.stdout).unwrap();
    let results = session["results"].as_array().unwrap();
    assert!(by_name(&results[0]).contains_key("fx__echo"));
    assert_eq!(text(&results[1]), "over stdio");
    // Whole lines only: the gateway may still be writing its last.
    let text = wait_for(
        SETTLE,
        || std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default(),
        |text| text.ends_with('\n') && text.lines().count() >= 2,
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // The gateway stopped with stdin: its last line is the checkpoint.
    let (checkpoints, entries): (Vec<Value>, Vec<Value>) = lines
        .into_iter()
        .partition(|line| line.get("checkpoint").is_some());
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|entry| entry["principal"] == "local"));
    assert_eq!(checkpoints.len(), 1, "{text}");
    assert_eq!(checkpoints[0]["checkpoint"], "shutdown");
    assert_eq!(checkpoints[0]["seq"], 3);
}

#[test]
fn an_upstream_that_would_not_start_serves_once_it_can() {
    let dir = scratch("late");
    let late = dir.join("late-server");
    let extra = format!(
        "[[upstream]]\nname = \"late\"\ncommand = [\"{}\"]\n",
        late.display()
    );
    let gateway = Gateway::start(&dir, &fx_config(&dir, &[], &extra));
    let before = gateway.python(
        TOKEN,
        "auto",
        &json!([{ "op": "list" }, call("late__echo", json!({ "text": "x" }))]),
    );
    assert!(!by_name(&before["results"][0]).contains_key("late__echo"));
    assert!(
        text(&before["results"][1]).contains("upstream `late` is unavailable"),
        "{}",
        before["results"][1]
    );
    // The refusal is in the audit log, though the tool's hints are unknown.
    let refused: Vec<(String, String, String)> = gateway
        .log_with("finished", 1)
        .iter()
        .map(|entry| {
            assert_eq!(
                (&entry["upstream"], &entry["tool"]),
                (&json!("late"), &json!("echo"))
            );
            assert!(entry["hints"].is_null(), "{entry}");
            (
                entry["phase"].as_str().unwrap().to_owned(),
                entry["decision"].as_str().unwrap().to_owned(),
                entry["outcome"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    let expected = [
        ("decided", "unavailable", "-"),
        ("finished", "unavailable", "unavailable"),
    ]
    .map(|(phase, decision, outcome)| (phase.to_owned(), decision.to_owned(), outcome.to_owned()));
    assert_eq!(refused, expected);
    // The server appears; the gateway tries again within 5 s.
    std::fs::write(
        &late,
        format!(
            "#!/bin/sh\nexec '{}' '{}' '{}'\n",
            installed().python().display(),
            peers::fixture("gateway_upstream.py").display(),
            dir.join("late-counter.txt").display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&late, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while !gateway
        .stderr()
        .contains("upstream `late` is reachable now")
    {
        assert!(Instant::now() < deadline, "{}", gateway.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = gateway.python(
        TOKEN,
        "auto",
        &json!([{ "op": "list" }, call("late__echo", json!({ "text": "x" }))]),
    );
    assert!(by_name(&after["results"][0]).contains_key("late__echo"));
    assert_eq!(text(&after["results"][1]), "x");
}

/// A `sleep` argument no other process has, `SECS.PID` (sleep takes
/// fractions), and the `pgrep -f` pattern that finds it (and a `sh -c`
/// whose script holds it) alone.
fn unique_sleep(secs: u32) -> (String, String) {
    let pid = std::process::id();
    (format!("{secs}.{pid}"), format!("sleep {secs}[.]{pid}"))
}

/// The pids of the processes whose command line matches `pattern`.
fn running(pattern: &str) -> Vec<libc::pid_t> {
    let output = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// Waits (`within` at most) until nothing matches `pattern`; what is left
/// then is killed, by pid, and returned, so that a failing test leaves
/// nothing behind.
fn left_running(pattern: &str, within: Duration) -> Vec<libc::pid_t> {
    let deadline = Instant::now() + within;
    loop {
        let pids = running(pattern);
        if pids.is_empty() || Instant::now() >= deadline {
            for pid in &pids {
                // SAFETY: kill(2) by pid, on a process this test started.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
            return pids;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `signal` to the gateway and waits (10 s at most) until it exits:
/// its status, once every line it wrote on stderr is read.
fn stop_with(child: &mut Child, signal: libc::c_int, stderr: &Mutex<Vec<String>>) -> String {
    // SAFETY: kill(2) on a child of ours, by its id.
    unsafe {
        libc::kill(child.id() as libc::pid_t, signal);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            // The reader thread sees the end of the pipe soon after.
            std::thread::sleep(Duration::from_millis(300));
            return format!("{status:?}: {}", stderr.lock().unwrap().join("\n"));
        }
        assert!(
            Instant::now() < deadline,
            "the gateway did not exit within 10 s of signal {signal}: {}",
            stderr.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A config with the notes upstream and `extra` after it.
fn notes_config(extra: &str) -> String {
    let notes = notes_server().to_string_lossy().into_owned();
    format!(
        "{PREAMBLE}\n[[upstream]]\nname = \"notes\"\ncommand = {}\n\n{extra}",
        toml_list(&[notes])
    )
}

/// `serve` keeps metrics: its admin endpoint answers `/healthz` and
/// `/readyz` without a token (503 naming an upstream that would not
/// start), and `/metrics` only with the admin token, counting a call it
/// allowed.
#[test]
fn serve_answers_health_readiness_and_metrics_on_the_admin_endpoint() {
    let dir = scratch("health");
    let extra = format!(
        "[[upstream]]\nname = \"lost\"\ncommand = [\"target/debug/no-such-server\"]\n\n\
         [admin]\ntoken = \"{ADMIN_TOKEN}\"\n"
    );
    let config = notes_config(&extra).replace(
        "http = \"127.0.0.1:0\"\n",
        "http = \"127.0.0.1:0\"\nadmin_http = \"127.0.0.1:0\"\n",
    );
    let gateway = Gateway::start(&dir, &config);
    let bearer = format!("Bearer {TOKEN}");
    let mut connection = KeptAlive::connect(&gateway.address());
    let deadline = Instant::now() + Duration::from_secs(60);
    let (status, body) = loop {
        let (status, body) =
            connection.call_tool(1, "notes__list_notes", &[("Authorization", &bearer)]);
        // The upstream may still be starting: its tool is unknown then.
        if status == 200 || Instant::now() >= deadline {
            break (status, body);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{body}\n{}", gateway.stderr());
    assert!(body.contains(r#""isError":false"#), "{body}");

    let admin = gateway
        .admin
        .clone()
        .expect("the admin endpoint is announced");
    let mut admin = KeptAlive::connect(admin.trim_start_matches("http://"));
    assert_eq!(admin.send("GET /healthz", &[], ""), (200, "ok".to_owned()));
    let (status, body) = admin.send("GET /readyz", &[], "");
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    let unready = body["unready"].as_array().unwrap();
    let names: Vec<(&Value, &Value)> = unready
        .iter()
        .map(|unready| (&unready["kind"], &unready["name"]))
        .collect();
    assert_eq!(names, [(&json!("upstream"), &json!("lost"))], "{body}");

    let (status, body) = admin.send("GET /metrics", &[], "");
    assert_eq!(status, 401, "{body}");
    let (status, body) = admin.send("GET /metrics", &[("Authorization", &bearer)], "");
    assert_eq!(status, 401, "a client's token is not the admin's: {body}");
    let authorization = format!("Bearer {ADMIN_TOKEN}");
    let (status, body) = admin.send("GET /metrics", &[("Authorization", &authorization)], "");
    assert_eq!(status, 200, "{body}");
    let samples: Vec<&str> = body.lines().filter(|line| !line.starts_with('#')).collect();
    assert!(
        samples
            .contains(&r#"mcp_hints_gateway_decisions_total{rule="default",decision="allow"} 1"#),
        "{body}"
    );
    assert!(
        samples.contains(&"mcp_hints_gateway_parked_calls 0"),
        "{body}"
    );
    assert!(
        samples.contains(
            &r#"mcp_hints_gateway_upstream_call_duration_seconds_count{upstream="notes",outcome="result"} 1"#
        ),
        "{body}"
    );
}

#[test]
fn a_relative_command_not_found_names_the_directory_it_was_resolved_against() {
    let dir = scratch("relative-command");
    let extra = "[[upstream]]\nname = \"lost\"\ncommand = [\"target/debug/no-such-server\"]\n";
    let gateway = Gateway::start(&dir, &notes_config(extra));
    let dir = std::path::absolute(&dir).unwrap();
    let line = stderr_line(&gateway, "upstream `lost` is unavailable");
    assert!(
        line.contains(&format!(
            "cannot start `{dir}/target/debug/no-such-server`: No such file or directory (os \
             error 2): no `no-such-server` in {dir}/target/debug (a relative `command` is \
             resolved against the config file's directory, {dir})",
            dir = dir.display()
        )),
        "{line}"
    );
}

/// `gateway check` lists what it could reach and exits 1 naming an
/// upstream it could not, which `serve` would start without.
#[test]
fn gateway_check_exits_1_naming_an_upstream_it_could_not_reach() {
    let dir = scratch("check-unreachable");
    let extra = "[[upstream]]\nname = \"lost\"\ncommand = [\"target/debug/no-such-server\"]\n";
    let path = dir.join("gateway.toml");
    std::fs::write(&path, notes_config(extra)).unwrap();
    let (status, stdout, stderr) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &[],
    );
    assert_eq!(status, Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("notes__list_notes"), "{stdout}");
    assert!(
        stderr.contains(
            "gateway check: upstream `lost` could not be reached (cannot connect to the MCP \
             server: cannot start `"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("`serve` would start without its tools and keep trying it"),
        "{stderr}"
    );
}

/// The Python client of the README's Gateway section, exactly as printed
/// there (the one ```python block of that section).
fn readme_python_client() -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let section = &readme[readme.find("\n## Gateway\n").expect("a Gateway section")..];
    let section = &section[..section[1..]
        .find("\n## ")
        .map_or(section.len(), |end| end + 1)];
    let start = section
        .find("```python\n")
        .expect("a Python block in the Gateway section")
        + "```python\n".len();
    let end = section[start..].find("```").unwrap();
    section[start..start + end].to_owned()
}

#[test]
fn the_readme_python_client_works_as_printed() {
    let dir = scratch("readme-python");
    let snippet = readme_python_client();
    assert!(
        snippet.contains("\"http://127.0.0.1:8787/mcp\""),
        "{snippet}"
    );
    let gateway = Gateway::start(&dir, &notes_config(""));
    // The README's gateway listens on 8787; this one on a free port.
    let script = dir.join("client.py");
    std::fs::write(
        &script,
        snippet.replace("http://127.0.0.1:8787/mcp", &gateway.url),
    )
    .unwrap();
    let output = Command::new(installed().python())
        .arg(&script)
        .env("ALICE_TOKEN", TOKEN)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}\n--- gateway stderr ---\n{}",
        String::from_utf8_lossy(&output.stderr),
        gateway.stderr()
    );
    let mut lines = stdout.lines();
    let names = lines.next().unwrap();
    assert!(
        names.starts_with("['notes__add_note', 'notes__append_note'"),
        "{stdout}"
    );
    assert!(names.contains("'notes__list_notes'"), "{stdout}");
    assert!(
        lines.next().is_some(),
        "list_notes printed nothing: {stdout}"
    );
    // The call reached the gateway under alice's token.
    let log = gateway.log_with("decided", 1);
    assert_eq!(log[0]["principal"], "alice");
    assert_eq!(log[0]["tool"], "list_notes");
}

#[test]
fn an_upstream_that_never_answers_initialize_is_unavailable_and_stopped() {
    let dir = scratch("mute");
    let (secs, pattern) = unique_sleep(1000);
    let starts = dir.join("mute-starts.txt");
    let script = format!("echo started >> '{}'; exec sleep {secs}", starts.display());
    let extra = format!(
        "[[upstream]]\nname = \"mute\"\ncommand = {}\ncall_timeout_secs = 2\n",
        toml_list(&["sh".to_owned(), "-c".to_owned(), script])
    );
    let started = Instant::now();
    let gateway = Gateway::start(&dir, &notes_config(&extra));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "served after {:?}",
        started.elapsed()
    );
    let stderr = gateway.stderr();
    assert!(
        stderr.lines().any(|line| {
            line.starts_with("gateway: upstream `mute` is unavailable: ")
                && line.contains("did not answer initialize within 2 s")
        }),
        "{stderr}"
    );
    let session = gateway.python(TOKEN, "auto", &json!([{ "op": "list" }]));
    assert!(
        by_name(&session["results"][0]).contains_key("notes__list_notes"),
        "{session}"
    );
    assert_eq!(
        left_running(&pattern, Duration::from_secs(3)),
        Vec::<libc::pid_t>::new()
    );
    // The gateway tries it again after 5 s: that try is bounded the same
    // way, and what it started is stopped too.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&starts)
        .unwrap_or_default()
        .lines()
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "not tried again: {}",
            gateway.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        left_running(&pattern, Duration::from_secs(5)),
        Vec::<libc::pid_t>::new()
    );
    drop(gateway);
    assert_eq!(
        left_running(&pattern, Duration::from_secs(2)),
        Vec::<libc::pid_t>::new()
    );
}

#[test]
fn upstream_process_groups_are_stopped_when_the_gateway_stops() {
    let dir = scratch("orphans");
    let notes = notes_server().to_string_lossy().into_owned();
    // The newcomer's case: a wrapper that outlives its server.
    let (wrapped, wrapped_pattern) = unique_sleep(1001);
    // A member of the group whose leader exits by itself when its stdin
    // closes.
    let (forked, forked_pattern) = unique_sleep(1002);
    let command = |script: String| toml_list(&["sh".to_owned(), "-c".to_owned(), script]);
    let extra = format!(
        "[[upstream]]\nname = \"wrapped\"\ncommand = {}\n\n\
         [[upstream]]\nname = \"forked\"\ncommand = {}\n",
        command(format!("'{notes}'; exec sleep {wrapped}")),
        command(format!("sleep {forked} & exec '{notes}'")),
    );
    let mut gateway = Gateway::start(&dir, &notes_config(&extra));
    assert_eq!(running(&forked_pattern).len(), 1, "{}", gateway.stderr());
    let stopped = stop_with(
        &mut gateway.served.child,
        libc::SIGTERM,
        &gateway.served.stderr,
    );
    let left = [
        left_running(&wrapped_pattern, Duration::from_secs(2)),
        left_running(&forked_pattern, Duration::from_secs(2)),
    ];
    assert_eq!(left, [Vec::<libc::pid_t>::new(), Vec::new()], "{stopped}");
    assert!(
        stopped.starts_with("ExitStatus(unix_wait_status(0))"),
        "{stopped}"
    );
    assert!(
        stopped.contains("gateway: stopping on SIGTERM"),
        "{stopped}"
    );
}

#[test]
fn a_signal_during_start_up_stops_the_upstreams_already_started() {
    let dir = scratch("start-up-signal");
    let (secs, pattern) = unique_sleep(1003);
    // It never answers; the default timeout (30 s) keeps the gateway
    // starting while the signal comes.
    let extra = format!(
        "[[upstream]]\nname = \"slow\"\ncommand = {}\n",
        toml_list(&[
            "sh".to_owned(),
            "-c".to_owned(),
            format!("exec sleep {secs}")
        ])
    );
    let path = dir.join("gateway.toml");
    std::fs::write(&path, notes_config(&extra)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["gateway", "serve", "--config"])
        .arg(&path)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mcp-hints runs");
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    {
        let (lines, stderr) = (lines.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while running(&pattern).is_empty() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`slow` did not start: {}", lines.lock().unwrap().join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stopped = stop_with(&mut child, libc::SIGTERM, &lines);
    let left = left_running(&pattern, Duration::from_secs(2));
    assert_eq!(left, Vec::<libc::pid_t>::new(), "{stopped}");
    assert!(!stopped.contains("gateway: serving"), "{stopped}");
    assert!(
        stopped.contains("gateway: stopping on SIGTERM"),
        "{stopped}"
    );
    assert!(
        stopped.starts_with("ExitStatus(unix_wait_status(0))"),
        "{stopped}"
    );
}

#[test]
fn sighup_and_sigint_stop_the_gateway_saying_which() {
    for (signal, name) in [(libc::SIGHUP, "SIGHUP"), (libc::SIGINT, "SIGINT")] {
        let dir = scratch(&format!("stop-on-{name}"));
        let mut gateway = Gateway::start(&dir, &notes_config(""));
        let stopped = stop_with(&mut gateway.served.child, signal, &gateway.served.stderr);
        assert!(
            stopped.starts_with("ExitStatus(unix_wait_status(0))"),
            "{stopped}"
        );
        assert!(
            stopped.contains(&format!("gateway: stopping on {name}")),
            "{stopped}"
        );
    }
}

/// A config whose one upstream, `fx` (trusted), is the fixture server
/// started by DIR/fx.sh, which runs the shell line(s) `guard` first: a
/// test makes it fail to start by what `guard` checks.
fn fx_behind_script(dir: &Path, guard: &str) -> String {
    let wrapper = dir.join("fx.sh");
    let script = format!(
        "#!/bin/sh\n{guard}\nexec '{}' '{}' '{}'\n",
        installed().python().display(),
        peers::fixture("gateway_upstream.py").display(),
        dir.join("counter.txt").display()
    );
    std::fs::write(&wrapper, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!(
        "{PREAMBLE}\n[[upstream]]\nname = \"fx\"\ncommand = {}\ntrusted = true\n",
        toml_list(&[wrapper.to_string_lossy().into_owned()])
    )
}

#[test]
fn an_upstream_that_served_says_when_it_is_unavailable_and_when_it_serves_again() {
    let dir = scratch("unavailable-again");
    let down = dir.join("down");
    let config = fx_behind_script(&dir, &format!("[ -e '{}' ] && exit 1", down.display()));
    let gateway = Gateway::start(&dir, &config);
    // It serves, then exits, and cannot be started again.
    gateway.python(
        TOKEN,
        "auto",
        &json!([
            call("fx__echo", json!({ "text": "up" })),
            call("fx__count_then_die", json!({})),
        ]),
    );
    std::fs::write(&down, "").unwrap();
    let refused = gateway.python(
        TOKEN,
        "auto",
        &json!([call("fx__echo", json!({ "text": "down" }))]),
    );
    assert!(
        text(&refused["results"][0]).contains("unavailable"),
        "{refused}"
    );
    let stderr = gateway.stderr();
    assert!(
        stderr
            .lines()
            .any(|line| line.starts_with("gateway: upstream `fx` is unavailable: ")),
        "{stderr}"
    );
    assert!(!stderr.contains("upstream `fx` serves again"), "{stderr}");
    std::fs::remove_file(&down).unwrap();
    let again = gateway.python(
        TOKEN,
        "auto",
        &json!([call("fx__echo", json!({ "text": "again" }))]),
    );
    assert_eq!(text(&again["results"][0]), "again", "{again}");
    assert!(
        gateway
            .stderr()
            .contains("gateway: upstream `fx` serves again"),
        "{}",
        gateway.stderr()
    );
}

/// `fx__count` needs an approver, for a minute.
const COUNT_NEEDS_APPROVAL: &str = r#"[[rule]]
action = "require_approval"
upstream = "fx"
tool = "count"
timeout_secs = 60
on_expiry = "approve"
"#;

/// Waits (20 s at most) until nothing is parked.
fn wait_until_nothing_parked(admin: &str, gateway: &Gateway) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let parked = pending_ids(admin, 0);
        if parked.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still parked: {parked:?}\n{}",
            gateway.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Checks that the parked call `id` is gone for good: approving it is the
/// admin client's 404, it never ran upstream, and the log says it was
/// abandoned.
fn assert_abandoned(gateway: &Gateway, admin: &str, id: &str) {
    let approved = admin_command(&["approve", id, "--admin", admin]);
    let said = String::from_utf8_lossy(&approved.stderr);
    assert_eq!(approved.status.code(), Some(2), "{said}");
    assert!(said.contains("404"), "{said}");
    assert!(said.contains("abandoned"), "{said}");
    assert_eq!(executions(&gateway.dir), 0, "the withdrawn call ran");
    // The abandonment is logged by the gateway's own task once it sees the
    // client gone, not before any answer the test waits on: wait for its
    // `finished` entry (30 s at most) before reading the call's entries.
    let log = gateway.log_when(Duration::from_secs(30), |log| {
        log.iter()
            .any(|entry| entry["id"] == id && entry["phase"] == "finished")
    });
    let entries: Vec<String> = log
        .iter()
        .filter(|entry| entry["id"] == id)
        .map(|entry| {
            format!(
                "{}:{}:{}",
                entry["phase"].as_str().unwrap(),
                entry["decision"].as_str().unwrap(),
                entry["outcome"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            "decided:require_approval:-",
            "decided:abandoned:-",
            "finished:abandoned:refused",
        ],
        "{}",
        gateway.stderr()
    );
    let said = format!("gateway: call {id} of `fx__count` was abandoned");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !gateway.stderr().contains(&said) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(gateway.stderr().contains(&said), "{}", gateway.stderr());
}

#[test]
fn a_parked_call_its_client_cancels_is_abandoned_and_never_runs() {
    let dir = scratch("abandon-cancelled");
    let gateway = Arc::new(Gateway::start(
        &dir,
        &fx_admin_config(&dir, &[], COUNT_NEEDS_APPROVAL),
    ));
    let admin = gateway.admin.clone().unwrap();
    // `initialize`: the SDK gives up the call with notifications/cancelled,
    // and keeps its session open meanwhile.
    let client = {
        let gateway = gateway.clone();
        std::thread::spawn(move || {
            gateway.python(
                TOKEN,
                "legacy",
                &json!([
                    { "op": "call_then_cancel", "name": "fx__count", "arguments": {}, "after": 3 },
                    { "op": "sleep", "seconds": 8 },
                    call("fx__echo", json!({ "text": "still here" })),
                ]),
            )
        })
    };
    let ids = pending_ids(&admin, 1);
    wait_until_nothing_parked(&admin, &gateway);
    assert_abandoned(&gateway, &admin, &ids[0]);
    let session = client.join().unwrap();
    assert_eq!(session["results"][0], json!({ "cancelled": true }));
    // The session was not what ended it: it still serves.
    assert_eq!(text(&session["results"][2]), "still here", "{session}");
    assert_eq!(executions(&dir), 0);
}

/// The Python SDK client calling `fx__count` through `gateway` in a
/// process of its own, its results on `stdout`.
fn call_fx_count(gateway: &Gateway, stdout: Stdio) -> Child {
    Command::new(installed().python())
        .arg(peers::fixture("gateway_client.py"))
        .args([
            gateway.url.as_str(),
            TOKEN,
            "auto",
            &json!([call("fx__count", json!({}))]).to_string(),
        ])
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_parked_call_whose_client_is_killed_is_abandoned_and_never_runs() {
    let dir = scratch("abandon-killed");
    let gateway = Gateway::start(&dir, &fx_admin_config(&dir, &[], COUNT_NEEDS_APPROVAL));
    let admin = gateway.admin.clone().unwrap();
    // 2026-07-28 over HTTP: the request's stream closes with the process.
    let mut client = call_fx_count(&gateway, Stdio::null());
    let ids = pending_ids(&admin, 1);
    client.kill().unwrap();
    client.wait().unwrap();
    wait_until_nothing_parked(&admin, &gateway);
    assert_abandoned(&gateway, &admin, &ids[0]);
}

/// A call still parked when the gateway stops is denied by the gateway,
/// not logged as its client's withdrawal, and never runs.
#[test]
fn a_parked_call_is_denied_by_the_gateway_when_it_stops() {
    let dir = scratch("parked-at-stop");
    let mut gateway = Gateway::start(&dir, &fx_admin_config(&dir, &[], COUNT_NEEDS_APPROVAL));
    let admin = gateway.admin.clone().unwrap();
    let mut client = call_fx_count(&gateway, Stdio::piped());
    let ids = pending_ids(&admin, 1);
    let stopped = stop_with(
        &mut gateway.served.child,
        libc::SIGTERM,
        &gateway.served.stderr,
    );
    assert!(!stopped.contains("abandoned"), "{stopped}");
    // The client is answered before its session ends.
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = client.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut answer = String::new();
    client
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut answer)
        .unwrap();
    assert!(
        answer.contains("was denied by the gateway (stopping)"),
        "the client's output: {answer}"
    );
    let entries: Vec<String> = gateway
        .log_when(SETTLE, |log| {
            log.iter()
                .any(|entry| entry["id"] == ids[0].as_str() && entry["phase"] == "finished")
        })
        .iter()
        .filter(|entry| entry["id"] == ids[0].as_str())
        .map(|entry| format!("{}:{}", entry["phase"].as_str().unwrap(), entry["decision"]))
        .collect();
    assert_eq!(
        entries,
        [
            "decided:\"require_approval\"",
            "decided:\"denied\"",
            "finished:\"denied\""
        ],
        "{stopped}"
    );
    assert_eq!(executions(&dir), 0);
}

/// One raw HTTP/1.1 request to the gateway's `/mcp` (`Connection: close`,
/// answers read for 30 s at most): the whole answer.
fn mcp_request(
    address: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> String {
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    // The requests after `initialize` carry the revision it negotiated.
    if !body.is_some_and(|body| body["method"] == "initialize") {
        all.push(("MCP-Protocol-Version", "2025-11-25"));
    }
    all.extend_from_slice(headers);
    let body = body.map(Value::to_string).unwrap_or_default();
    raw_request(address, method, &all, body.as_bytes())
}

/// One HTTP/1.1 request to `/mcp` with exactly `headers` (and `Host`,
/// `Connection: close`, and `Content-Length` unless given), then `body`;
/// the whole answer. The server may answer and close before it reads a
/// body it refused: a write that fails is not an error here.
fn raw_request(address: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!("{method} /mcp HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-length"))
    {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut request = request.into_bytes();
    request.extend_from_slice(body);
    let _ = stream.write_all(&request);
    let mut answer = Vec::new();
    // A streamed answer may stay open: what came within the timeout is
    // enough for the status line.
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// The `mcp-session-id` an answer names.
fn session_of(answer: &str) -> String {
    answer
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {answer}"))
}

#[test]
fn sessions_belong_to_the_principal_that_created_them() {
    const BOB: &str = "bob-secret-token-77a0";
    let dir = scratch("session-owners");
    let extra =
        format!("{COUNT_NEEDS_APPROVAL}\n[[client]]\nprincipal = \"bob\"\ntoken = \"{BOB}\"\n");
    let gateway = Gateway::start(&dir, &fx_admin_config(&dir, &[], &extra));
    let admin = gateway.admin.clone().unwrap();
    let address = gateway.address();
    let (alice, bob) = (format!("Bearer {TOKEN}"), format!("Bearer {BOB}"));
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });

    let opened = post(&address, &[("Authorization", &alice)]);
    assert!(opened.starts_with("HTTP/1.1 200"), "{opened}");
    let hers = session_of(&opened);
    let in_hers = [
        ("Authorization", alice.as_str()),
        ("Mcp-Session-Id", hers.as_str()),
    ];
    let answer = mcp_request(&address, "POST", &in_hers, Some(&initialized));
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    let answer = mcp_request(&address, "POST", &in_hers, Some(&list));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("fx__count"), "{answer}");
    // A call of hers waits for an approver.
    let parked_call = {
        let (address, hers, alice) = (address.clone(), hers.clone(), alice.clone());
        std::thread::spawn(move || {
            let call = json!({
                "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": { "name": "fx__count", "arguments": {} }
            });
            mcp_request(
                &address,
                "POST",
                &[("Authorization", &alice), ("Mcp-Session-Id", &hers)],
                Some(&call),
            )
        })
    };
    let ids = pending_ids(&admin, 1);

    // bob's token with her session: unknown to him, as a session that
    // does not exist is, for every method; nothing says whose it is.
    let as_bob = [
        ("Authorization", bob.as_str()),
        ("Mcp-Session-Id", hers.as_str()),
    ];
    let unknown = [
        ("Authorization", bob.as_str()),
        ("Mcp-Session-Id", "00000000-0000-4000-8000-000000000000"),
    ];
    for (method, body) in [("POST", Some(&list)), ("GET", None), ("DELETE", None)] {
        let foreign = mcp_request(&address, method, &as_bob, body);
        assert!(foreign.starts_with("HTTP/1.1 404"), "{method}: {foreign}");
        assert!(!foreign.contains("alice"), "{method}: {foreign}");
        let missing = mcp_request(&address, method, &unknown, body);
        assert!(missing.starts_with("HTTP/1.1 404"), "{method}: {missing}");
        // The same JSON-RPC error (-32001) either way, but for the id.
        let (foreign, missing) = (json_body(&foreign), json_body(&missing));
        assert_eq!(foreign["error"]["code"], -32001, "{method}: {foreign}");
        assert_eq!(
            foreign.to_string().replace(&hers, "ID"),
            missing.to_string().replace(unknown[1].1, "ID"),
            "{method}"
        );
    }
    // His own session works; hers is untouched, her call still parked.
    let his = session_of(&post(&address, &[("Authorization", &bob)]));
    let in_his = [
        ("Authorization", bob.as_str()),
        ("Mcp-Session-Id", his.as_str()),
    ];
    assert!(mcp_request(&address, "POST", &in_his, Some(&initialized)).starts_with("HTTP/1.1 202"));
    let answer = mcp_request(&address, "POST", &in_his, Some(&list));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let answer = mcp_request(&address, "POST", &in_hers, Some(&list));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(pending_ids(&admin, 1), ids);

    // She ends her session: her parked call goes with it, and the session
    // id is unknown from then on, to her too.
    let ended = mcp_request(&address, "DELETE", &in_hers, None);
    assert!(ended.starts_with("HTTP/1.1 2"), "{ended}");
    wait_until_nothing_parked(&admin, &gateway);
    assert_abandoned(&gateway, &admin, &ids[0]);
    let after = mcp_request(&address, "POST", &in_hers, Some(&list));
    assert!(after.starts_with("HTTP/1.1 404"), "{after}");
    let _ = parked_call.join();
    assert_eq!(executions(&dir), 0);
}

#[test]
fn the_admin_endpoint_refuses_foreign_origins_and_hosts_with_403() {
    let dir = scratch("admin-guard");
    let gateway = Gateway::start(&dir, &fx_admin_config(&dir, &[], ""));
    let admin = gateway.admin.clone().unwrap();
    let address = admin.trim_start_matches("http://").to_owned();
    let get = |host: &str, extra: &str| {
        let mut stream = TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET /pending HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             {extra}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
    };
    let port = address.rsplit_once(':').unwrap().1;
    let own = get(&address, "");
    assert!(own.starts_with("HTTP/1.1 200"), "{own}");
    let localhost = get(
        &format!("localhost:{port}"),
        &format!("Origin: http://localhost:{port}\r\n"),
    );
    assert!(localhost.starts_with("HTTP/1.1 200"), "{localhost}");
    let foreign_origin = get(&address, "Origin: https://evil.example\r\n");
    assert!(
        foreign_origin.starts_with("HTTP/1.1 403"),
        "{foreign_origin}"
    );
    let foreign_host = get("evil.example", "");
    assert!(foreign_host.starts_with("HTTP/1.1 403"), "{foreign_host}");
    let rebound = get(&format!("evil.example:{port}"), "");
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    // The decisions are guarded the same way.
    let mut stream = TcpStream::connect(&address).unwrap();
    write!(
        stream,
        "POST /deny/x HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}

#[test]
fn tools_whose_names_the_spec_does_not_allow_are_left_out_and_said_once() {
    let dir = scratch("bad-names");
    let gateway = Gateway::start(&dir, &fx_config(&dir, &["--bad-names"], ""));
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            { "op": "list" },
            call("fx__", json!({})),
            call("fx__has space", json!({})),
            // A change of the list rebuilds the served one.
            call("fx__grow", json!({})),
            { "op": "sleep", "seconds": 1 },
            { "op": "list" },
        ]),
    );
    let results = session["results"].as_array().unwrap();
    for list in [&results[0], &results[5]] {
        let names = by_name(list);
        assert!(names.contains_key("fx__echo"), "{:?}", names.keys());
        assert!(
            names.contains_key("notes__list_notes"),
            "{:?}",
            names.keys()
        );
        for name in names.keys() {
            let tool = name.strip_prefix("fx__").unwrap_or("ok");
            assert!(
                !tool.is_empty()
                    && tool.len() <= 128
                    && tool
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)),
                "served: {name:?}"
            );
        }
    }
    assert!(
        by_name(&results[5]).contains_key("fx__grown"),
        "{}",
        results[5]
    );
    for refused in [&results[1], &results[2]] {
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
    }
    assert_eq!(executions(&dir), 0, "a left-out tool ran");
    let stderr = gateway.stderr();
    assert!(!stderr.contains('\u{1b}'), "not escaped: {stderr:?}");
    let said = |needle: &str| {
        stderr
            .lines()
            .filter(|line| {
                line.starts_with("gateway: upstream `fx` lists a tool whose name ")
                    && line.contains(needle)
            })
            .count()
    };
    assert_eq!(said("name `` is empty"), 1, "{stderr}");
    assert_eq!(
        said(r"name `evil\u{1b}[2Jname` contains `\u{1b}` and `[`"),
        1,
        "{stderr}"
    );
    assert_eq!(said("name `has space` contains ` `"), 1, "{stderr}");
    assert_eq!(said("is 129 characters long, more than 128"), 1, "{stderr}");
    assert!(
        stderr.contains("it is not served, the upstream's other tools are"),
        "{stderr}"
    );
}

#[test]
fn a_read_lost_on_every_attempt_may_have_run_as_often_as_it_was_sent() {
    // counter-server (trusted) behind fault-proxy, which swallows every
    // response of `read`: a read-only tool, resent until the attempts run
    // out.
    let dir = scratch("lost-every-time");
    let executions = dir.join("executions.txt");
    let command = vec![
        support::faults_binary("fault-proxy")
            .to_string_lossy()
            .into_owned(),
        "--fault".to_owned(),
        "drop-response:read@*".to_owned(),
        "stdio".to_owned(),
        "--".to_owned(),
        support::faults_binary("counter-server")
            .to_string_lossy()
            .into_owned(),
        "--executions".to_owned(),
        executions.to_string_lossy().into_owned(),
    ];
    let config = format!(
        "{PREAMBLE}\n[[upstream]]\nname = \"counter\"\ncommand = {}\ntrusted = true\n\
         call_timeout_secs = 2\n",
        toml_list(&command),
    );
    let gateway = Gateway::start(&dir, &config);
    wait_until_reachable(&gateway, "counter");
    let session = gateway.python(TOKEN, "auto", &json!([call("counter__read", json!({}))]));
    let result = &session["results"][0];
    assert_eq!(result["isError"], true, "{result}");
    let attempts = result["_meta"]["mcp-hints/gateway"]["attempts"]
        .as_u64()
        .unwrap();
    assert!(attempts > 1, "{result}");
    let lost = text(result);
    assert!(
        lost.contains(&format!("It may have run up to {attempts} times")),
        "{lost}"
    );
    assert!(!lost.contains("never more"), "{lost}");
    assert_eq!(
        finished_runs(&executions, "read") as u64,
        attempts,
        "{lost}"
    );
}

#[test]
fn a_call_to_an_upstream_that_cannot_be_started_again_says_so_in_a_sentence() {
    let dir = scratch("not-sent");
    let down = dir.join("down");
    // Its second start fails: the call after its death cannot be sent.
    let guard = format!(
        "[ -e '{down}' ] && exit 1\ntouch '{down}'",
        down = down.display()
    );
    let gateway = Gateway::start(&dir, &fx_behind_script(&dir, &guard));
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            call("fx__count_then_die", json!({})),
            call("fx__count", json!({}))
        ]),
    );
    let refused = &session["results"][1];
    assert_eq!(refused["isError"], true, "{refused}");
    let said = text(refused);
    assert!(
        said.starts_with("`fx__count` was not forwarded: upstream `fx` is unavailable (calls cannot be sent to it: "),
        "{said}"
    );
    assert!(!said.contains("its calls"), "{said}");
    assert_eq!(executions_reach(&dir, 1), 1, "only the call that died ran");
}

/// The starter config, examples/gateway.toml, as checked in.
fn starter_config() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/gateway.toml"))
        .unwrap()
}

/// A clone's layout under `dir`: the starter config at
/// DIR/examples/gateway.toml with its two ports replaced by `http` and
/// `admin` (nothing else changed), and DIR/target/debug/notes the built
/// notes server, so that the config's relative paths resolve as in a
/// clone. Returns the config's path.
fn starter_layout(dir: &Path, http: &str, admin: &str) -> PathBuf {
    let starter = starter_config();
    assert!(
        starter.contains("\nhttp = \"127.0.0.1:8787\"\n"),
        "{starter}"
    );
    assert!(
        starter.contains("\nadmin_http = \"127.0.0.1:8788\"\n"),
        "{starter}"
    );
    let config = starter
        .replace(
            "\nhttp = \"127.0.0.1:8787\"\n",
            &format!("\nhttp = \"{http}\"\n"),
        )
        .replace(
            "\nadmin_http = \"127.0.0.1:8788\"\n",
            &format!("\nadmin_http = \"{admin}\"\n"),
        );
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    std::fs::create_dir_all(dir.join("target/debug")).unwrap();
    std::os::unix::fs::symlink(notes_server(), dir.join("target/debug/notes")).unwrap();
    let path = dir.join("examples/gateway.toml");
    std::fs::write(&path, config).unwrap();
    path
}

/// The variables the starter config reads its tokens from.
const STARTER_ENV: [(&str, &str); 2] = [
    ("ALICE_TOKEN", TOKEN),
    ("MCP_GATEWAY_ADMIN_TOKEN", ADMIN_TOKEN),
];

#[test]
fn the_starter_config_serves_notes_with_its_rules() {
    let dir = scratch("starter");
    let path = starter_layout(&dir, "127.0.0.1:0", "127.0.0.1:0");
    let gateway = Gateway::serve(&path, &dir.join("target/gateway-audit.jsonl"), &STARTER_ENV);
    let ops = json!([
        { "op": "list" },
        call("notes__append_note", json!({ "text": "day one" })),
        call("notes__list_notes", json!({})),
        call("notes__delete_note", json!({ "id": 1 })),
    ]);
    let session = gateway.python(TOKEN, "auto", &ops);
    let results = session["results"].as_array().unwrap();
    let names: Vec<String> = by_name(&results[0]).into_keys().collect();
    assert_eq!(
        names,
        [
            "notes__add_note",
            "notes__append_note",
            "notes__delete_note",
            "notes__forecast",
            "notes__list_notes",
            "notes__update_note"
        ]
    );
    assert!(text(&results[2]).contains("day one"), "{}", results[2]);
    assert_eq!(results[3]["isError"], true, "{}", results[3]);
    assert!(
        text(&results[3]).contains("rule[0] (deny *delete*)"),
        "{}",
        results[3]
    );
    let log = gateway.log_when(Duration::from_secs(10), |log| log.len() >= 6);
    let decisions = tool_decisions(log.iter().filter(|entry| entry["phase"] == "decided"));
    assert_eq!(
        decisions,
        [
            ("append_note", "allow"),
            ("list_notes", "allow"),
            ("delete_note", "deny")
        ]
    );
}

/// `mcp-hints gateway ARGS...` with `env` set, to its end: status, stdout,
/// stderr.
fn gateway_command(
    args: &[&std::ffi::OsStr],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .arg("gateway")
        .args(args)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("mcp-hints runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Asserts that `init`'s output says the starter's audit log directory
/// (`target`) and its `notes` program (`target/debug/notes`) are not there
/// yet, each with what makes it.
fn says_what_is_missing(stdout: &str, target: &Path) {
    assert!(
        stdout.contains(&format!(
            "note: its audit log goes into {}, which is not there yet: create it (`mkdir -p {}`)",
            target.display(),
            target.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "note: its `notes` upstream runs {}, which is not there yet",
            target.join("debug/notes").display()
        )),
        "{stdout}"
    );
}

#[test]
fn gateway_init_writes_the_starter_config_and_never_overwrites() {
    let dir = scratch("init");
    let path = dir.join("examples/gateway.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let (status, stdout, stderr) = gateway_command(&["init".as_ref(), path.as_os_str()], &[]);
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), starter_config());
    let shown = path.display();
    assert!(
        stdout.starts_with(&format!("wrote {shown}: a starter config")),
        "{stdout}"
    );
    says_what_is_missing(&stdout, &dir.join("target"));
    assert!(
        stdout.ends_with(&format!(
            "next:\n  export ALICE_TOKEN=$(openssl rand -hex 16) \
             MCP_GATEWAY_ADMIN_TOKEN=$(openssl rand -hex 16)\n  mcp-hints gateway check \
             --config {shown}\n  mcp-hints gateway serve --config {shown}\n"
        )),
        "{stdout}"
    );

    // An existing file, whatever it holds, is left as it is.
    std::fs::write(&path, "# mine\n").unwrap();
    let (status, stdout, stderr) = gateway_command(&["init".as_ref(), path.as_os_str()], &[]);
    assert_eq!(status, Some(2), "{stdout}{stderr}");
    assert_eq!(stdout, "");
    assert!(
        stderr.contains(&format!(
            "{shown} already exists; nothing written: give another PATH, or remove it first"
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# mine\n");
}

#[test]
fn gateway_init_in_a_clones_root_names_its_target_directory() {
    // A clone's root: it holds examples/gateway.toml.
    let dir = scratch("init-root");
    std::fs::create_dir_all(dir.join("examples")).unwrap();
    std::fs::write(dir.join("examples/gateway.toml"), starter_config()).unwrap();
    let path = dir.join("gateway.toml");
    let (status, stdout, stderr) = gateway_command(&["init".as_ref(), path.as_os_str()], &[]);
    assert_eq!(status, Some(0), "{stderr}");
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        written,
        starter_config().replace("\"../target/", "\"target/")
    );
    assert!(!written.contains("../"), "{written}");
    says_what_is_missing(&stdout, &dir.join("target"));
    // Once built there, nothing is missing: no note.
    std::fs::create_dir_all(dir.join("target/debug")).unwrap();
    std::fs::write(dir.join("target/debug/notes"), "").unwrap();
    let again = dir.join("again.toml");
    let (status, stdout, stderr) = gateway_command(&["init".as_ref(), again.as_os_str()], &[]);
    assert_eq!(status, Some(0), "{stderr}");
    assert!(!stdout.contains("note:"), "{stdout}");
}

#[test]
fn gateway_check_lists_every_tool_with_its_rule_and_binds_nothing() {
    let dir = scratch("check");
    // Both ports the config names are taken by listeners of this test's
    // own: check must not need them.
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let path = starter_layout(
        &dir,
        &http.local_addr().unwrap().to_string(),
        &admin.local_addr().unwrap().to_string(),
    );
    let (status, stdout, stderr) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &STARTER_ENV,
    );
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    let expected = [
        "notes__add_note     readOnlyHint=false (declared)  destructiveHint=false (declared)  \
         idempotentHint=true (declared)   openWorldHint=false (declared)  allow (no rule)",
        "notes__append_note  readOnlyHint=false (declared)  destructiveHint=false (declared)  \
         idempotentHint=false (declared)  openWorldHint=false (declared)  allow (no rule)",
        "notes__delete_note  readOnlyHint=false (declared)  destructiveHint=true (declared)   \
         idempotentHint=true (declared)   openWorldHint=false (declared)  \
         rule[0] (deny *delete*)",
        "notes__forecast     readOnlyHint=true (declared)   destructiveHint=false (declared)  \
         idempotentHint=true (declared)   openWorldHint=true (declared)   \
         rule[2] (rate_limit * when open_world, 10 per 60 s)",
        "notes__list_notes   readOnlyHint=true (declared)   destructiveHint=false (declared)  \
         idempotentHint=true (declared)   openWorldHint=false (declared)  allow (no rule)",
        "notes__update_note  readOnlyHint=false (declared)  destructiveHint=true (declared)   \
         idempotentHint=true (declared)   openWorldHint=false (declared)  \
         rule[1] (require_approval * when destructive, expires after 120 s as deny)",
    ];
    assert_eq!(stdout.lines().collect::<Vec<_>>(), expected, "{stdout}");
    assert!(
        stderr.contains("gateway: 6 tools from 1 upstream (0 unavailable)"),
        "{stderr}"
    );
    // Nothing was written, and the listeners are still this test's.
    assert!(!dir.join("target/gateway-audit.jsonl").exists());
    // Serving the same file needs the ports, so it is refused.
    let (status, _, serve) = gateway_command(
        &["serve".as_ref(), "--config".as_ref(), path.as_os_str()],
        &STARTER_ENV,
    );
    assert_eq!(status, Some(2), "{serve}");
    drop((http, admin));

    // --json: the same decisions, per principal.
    let (status, stdout, stderr) = gateway_command(
        &[
            "check".as_ref(),
            "--json".as_ref(),
            "--config".as_ref(),
            path.as_os_str(),
        ],
        &STARTER_ENV,
    );
    assert_eq!(status, Some(0), "{stderr}");
    let tools: Value = serde_json::from_str(&stdout).unwrap();
    let delete = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "notes__delete_note")
        .unwrap();
    assert_eq!(
        delete["rules"],
        json!({
            "alice": "rule[0] (deny *delete*)",
            "local": "rule[0] (deny *delete*)",
        })
    );
    assert_eq!(
        delete["hints"]["destructiveHint"],
        json!({ "value": true, "source": "declared" })
    );
}

#[test]
fn gateway_check_names_principals_that_fall_under_different_rules_and_says_warnings() {
    let dir = scratch("check-principals");
    let path = starter_layout(&dir, "127.0.0.1:0", "127.0.0.1:0");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push_str(
        "\n[[rule]]\naction = \"deny\"\ntool = \"append_note\"\nprincipal = \"local\"\n\n\
         [[rule]]\naction = \"allow\"\ntool = \"delte_note\"\n",
    );
    std::fs::write(&path, config).unwrap();
    let (status, stdout, stderr) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &STARTER_ENV,
    );
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    let append = stdout
        .lines()
        .find(|line| line.starts_with("notes__append_note "))
        .unwrap();
    assert!(
        append.ends_with("  alice: allow (no rule); local: rule[4] (deny append_note for local)"),
        "{append}"
    );
    assert!(
        stderr.contains(
            "gateway: warning: rule[5].tool `delte_note` matches no tool of the upstreams `*` names"
        ),
        "{stderr}"
    );
}

#[test]
fn gateway_check_refuses_a_bad_config_as_serve_does() {
    let dir = scratch("check-invalid");
    let path = starter_layout(&dir, "127.0.0.1:0", "127.0.0.1:0");
    let config = std::fs::read_to_string(&path)
        .unwrap()
        .replace("limit = 10\n", "limit = 10\nbogus = 1\n");
    std::fs::write(&path, &config).unwrap();
    let line = config.lines().position(|line| line == "bogus = 1").unwrap() + 1;
    let (status, stdout, check) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &STARTER_ENV,
    );
    assert_eq!(status, Some(2), "{stdout}{check}");
    assert_eq!(stdout, "");
    assert!(
        check.contains(&format!(
            "{}:{line}:1: rule[2].bogus: unknown key `bogus`",
            path.display()
        )),
        "{check}"
    );
    let (status, _, serve) = gateway_command(
        &["serve".as_ref(), "--config".as_ref(), path.as_os_str()],
        &STARTER_ENV,
    );
    assert_eq!(status, Some(2), "{serve}");
    assert_eq!(check, serve);

    // A token variable that is unset: the same refusal, naming the key.
    let (status, _, check) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &[("ALICE_TOKEN", TOKEN)],
    );
    assert_eq!(status, Some(2), "{check}");
    assert!(
        check.contains("admin.token_env: the environment variable"),
        "{check}"
    );
}

/// `check` refuses what `serve` refuses before it starts anything: no
/// `listen.http` without `--stdio`, and an audit log whose directory will
/// not take a new file (`/proc`), with `serve`'s own messages.
#[test]
fn gateway_check_exits_2_where_serve_would_for_no_listener_or_an_unwritable_log() {
    let dir = scratch("check-as-serve");
    let path = dir.join("gateway.toml");
    let without_listen = notes_config("").replace("[listen]\nhttp = \"127.0.0.1:0\"\n", "");
    std::fs::write(&path, &without_listen).unwrap();
    let run = |command: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = command.iter().map(|arg| arg.as_ref()).collect();
        args.extend(["--config".as_ref(), path.as_os_str()]);
        gateway_command(&args, &[])
    };
    let (status, stdout, check) = run(&["check"]);
    assert_eq!(status, Some(2), "{stdout}{check}");
    assert_eq!(
        check.trim_end(),
        format!(
            "error: {}: `listen.http` is not set: give an address to serve HTTP on, or pass \
             --stdio",
            path.display()
        )
    );
    let (status, _, serve) = run(&["serve"]);
    assert_eq!((status, serve), (Some(2), check));
    // For `serve --stdio`, the same config is fine.
    let (status, stdout, stderr) = run(&["check", "--stdio"]);
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("notes__list_notes"), "{stdout}");

    // A directory that exists but refuses a new file.
    std::fs::write(
        &path,
        without_listen.replace(
            "path = \"audit.jsonl\"",
            "path = \"/proc/self/audit.jsonl\"",
        ),
    )
    .unwrap();
    let (status, stdout, check) = run(&["check", "--stdio"]);
    assert_eq!(status, Some(2), "{stdout}{check}");
    assert!(
        check
            .starts_with("error: audit log /proc/self/audit.jsonl: cannot open it for appending: "),
        "{check}"
    );
    assert!(!Path::new("/proc/self/audit.jsonl").exists());
}

/// The body of a raw HTTP answer (one not chunked), as JSON.
fn json_body(answer: &str) -> Value {
    let (_, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no body: {answer}"));
    serde_json::from_str(body).unwrap_or_else(|error| panic!("{error}: {answer}"))
}

/// The value of header `name` in a raw HTTP answer's head, if any.
fn header_of<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let (head, _) = answer.split_once("\r\n\r\n")?;
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[test]
fn a_session_of_one_replica_is_404_at_another_and_their_logs_merge_by_time() {
    let dir = scratch("replicas");
    // One config for both replicas, but for the name and the log (the
    // port is any free one).
    let shared = notes_config("");
    for name in ["a", "b"] {
        let config = format!("[gateway]\nreplica = \"replica-{name}\"\n\n{shared}").replace(
            "path = \"audit.jsonl\"",
            &format!("path = \"{name}.jsonl\""),
        );
        std::fs::write(dir.join(format!("{name}.toml")), config).unwrap();
    }
    let a = Gateway::serve(&dir.join("a.toml"), &dir.join("a.jsonl"), &[]);
    let b = Gateway::serve(&dir.join("b.toml"), &dir.join("b.jsonl"), &[]);
    let (at_a, at_b) = (a.address(), b.address());
    assert_ne!(at_a, at_b);
    let alice = format!("Bearer {TOKEN}");
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    let list_notes = |id: u32| {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "notes__list_notes", "arguments": {} }
        })
    };
    // Each call's entries are written before its answer comes back: a pause
    // of 2 ms puts the next call's in a later millisecond, so the merged
    // order is the order of time alone.
    let next_millisecond = || std::thread::sleep(Duration::from_millis(2));

    // A session at replica A, and a call in it.
    let opened = post(&at_a, &[("Authorization", &alice)]);
    assert!(opened.starts_with("HTTP/1.1 200"), "{opened}");
    let session = session_of(&opened);
    let in_session = [
        ("Authorization", alice.as_str()),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let answer = mcp_request(&at_a, "POST", &in_session, Some(&initialized));
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    let answer = mcp_request(&at_a, "POST", &in_session, Some(&list_notes(2)));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Replica B never saw it: 404 and a JSON-RPC error that says so, for
    // every method, `initialize` included (never a new session in its
    // place); the client is to start a new session.
    let expected = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32001,
            "message": format!(
                "session `{session}` is not known here: it ended, or another replica of the \
                 gateway opened it (a load balancer must send every request of a session to the \
                 replica that opened it); send `initialize` without `Mcp-Session-Id` to start a \
                 new session"
            ),
        },
    });
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "raw", "version": "1" } }
    });
    let elsewhere = [
        ("POST", Some(list_notes(3))),
        ("POST", Some(initialize)),
        ("GET", None),
        ("DELETE", None),
    ];
    for (method, body) in &elsewhere {
        let answer = mcp_request(&at_b, method, &in_session, body.as_ref());
        assert!(answer.starts_with("HTTP/1.1 404"), "{method}: {answer}");
        assert_eq!(
            header_of(&answer, "content-type"),
            Some("application/json"),
            "{answer}"
        );
        assert_eq!(header_of(&answer, "mcp-session-id"), None, "{answer}");
        assert_eq!(json_body(&answer), expected, "{method}");
    }
    // An id that is not ASCII text is read lossily and quoted escaped.
    let hostile = [
        ("Authorization", alice.as_str()),
        ("Mcp-Session-Id", "x\u{202e}y"),
    ];
    let answer = mcp_request(&at_b, "POST", &hostile, Some(&list_notes(4)));
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    let message = json_body(&answer)["error"]["message"].clone();
    assert!(
        message
            .as_str()
            .unwrap()
            .starts_with("session `x\\u{202e}y` is not known here"),
        "{message}"
    );

    // B's own session works, and A's is untouched by B's DELETE.
    next_millisecond();
    let opened = post(&at_b, &[("Authorization", &alice)]);
    assert!(opened.starts_with("HTTP/1.1 200"), "{opened}");
    let own = session_of(&opened);
    assert_ne!(own, session);
    let in_own = [
        ("Authorization", alice.as_str()),
        ("Mcp-Session-Id", own.as_str()),
    ];
    assert!(mcp_request(&at_b, "POST", &in_own, Some(&initialized)).starts_with("HTTP/1.1 202"));
    let answer = mcp_request(&at_b, "POST", &in_own, Some(&list_notes(5)));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    next_millisecond();
    let answer = mcp_request(&at_a, "POST", &in_session, Some(&list_notes(6)));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Each replica's log names it in every entry.
    let a_log = a.log_with("finished", 2);
    let b_log = b.log_with("finished", 1);
    assert_eq!(a_log.len(), 4, "{a_log:#?}");
    assert_eq!(b_log.len(), 2, "{b_log:#?}");
    assert!(
        a_log.iter().all(|entry| entry["replica"] == "replica-a"),
        "{a_log:#?}"
    );
    assert!(
        b_log.iter().all(|entry| entry["replica"] == "replica-b"),
        "{b_log:#?}"
    );

    // `gateway log` merges them by time.
    let (a_path, b_path) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    let logs = [
        "--log",
        a_path.to_str().unwrap(),
        "--log",
        b_path.to_str().unwrap(),
    ];
    let output = support::mcp_hints(&[&["gateway", "log", "--json"], &logs[..]].concat());
    assert!(output.status.success(), "{output:?}");
    let merged: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let seen: Vec<(&str, &str, &str)> = merged
        .iter()
        .map(|entry| {
            (
                entry["replica"].as_str().unwrap(),
                entry["id"].as_str().unwrap(),
                entry["phase"].as_str().unwrap(),
            )
        })
        .collect();
    let id = |log: &[Value], index: usize| log[index]["id"].as_str().unwrap().to_owned();
    let (first, between, last) = (id(&a_log, 0), id(&b_log, 0), id(&a_log, 2));
    assert_eq!(
        seen,
        [
            ("replica-a", first.as_str(), "decided"),
            ("replica-a", first.as_str(), "finished"),
            ("replica-b", between.as_str(), "decided"),
            ("replica-b", between.as_str(), "finished"),
            ("replica-a", last.as_str(), "decided"),
            ("replica-a", last.as_str(), "finished"),
        ]
    );
    let times: Vec<&str> = merged.iter().map(|e| e["time"].as_str().unwrap()).collect();
    assert!(times.windows(2).all(|pair| pair[0] <= pair[1]), "{times:?}");

    // The table shows each entry's replica; one log's does not.
    let columns = ["--columns", "tool,decision,phase"];
    let output = support::mcp_hints(&[&["gateway", "log"], &logs[..], &columns[..]].concat());
    assert!(output.status.success(), "{output:?}");
    let table = String::from_utf8(output.stdout).unwrap();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["REPLICA", "TOOL", "DECISION", "PHASE"], "{table}");
    let replicas: Vec<&str> = rows[1..7].iter().map(|row| row[0]).collect();
    assert_eq!(
        replicas,
        [
            "replica-a",
            "replica-a",
            "replica-b",
            "replica-b",
            "replica-a",
            "replica-a"
        ],
        "{table}"
    );
    assert!(table.ends_with("6 entries\n"), "{table}");
    let one = support::mcp_hints(
        &[
            &["gateway", "log", "--log", a_path.to_str().unwrap()],
            &columns[..],
        ]
        .concat(),
    );
    let one = String::from_utf8(one.stdout).unwrap();
    assert!(one.starts_with("TOOL "), "{one}");
    assert!(!one.contains("replica-a"), "{one}");
}

/// `openssl genpkey -algorithm ed25519` and `openssl pkey -pubout`, as the
/// README says: the private key at DIR/NAME.pem, its public key at
/// DIR/NAME.pub.pem.
fn ed25519_key(dir: &Path, name: &str) -> PathBuf {
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub.pem"));
    for args in [
        vec![
            "genpkey",
            "-algorithm",
            "ed25519",
            "-out",
            private.to_str().unwrap(),
        ],
        vec![
            "pkey",
            "-in",
            private.to_str().unwrap(),
            "-pubout",
            "-out",
            public.to_str().unwrap(),
        ],
    ] {
        let output = Command::new("openssl").args(&args).output().unwrap();
        assert!(output.status.success(), "openssl {args:?}: {output:?}");
    }
    public
}

/// `mcp-hints gateway log --verify ARGS`: exit status and stdout.
fn verify_log(args: &[&str]) -> (Option<i32>, String) {
    let output = support::mcp_hints(&[&["gateway", "log", "--verify"], args].concat());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        output.status.code() != Some(2),
        "bad usage: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), stdout)
}

/// The gateway's log is a hash chain across rotated files with signed
/// checkpoints: `gateway log --verify` passes it, names an edit by file
/// and line, fails another key, finds a truncation, and takes a line torn
/// by a crash for what it is; the gateway goes on after it.
#[test]
fn gateway_log_verify_checks_the_chain_its_rotated_files_and_signed_checkpoints() {
    let dir = scratch("log-verify");
    let public = ed25519_key(&dir, "signing");
    let other = ed25519_key(&dir, "other");
    let config = fx_config(&dir, &[], "").replace(
        "path = \"audit.jsonl\"\n",
        "path = \"audit.jsonl\"\nmax_bytes = 2000\ncheckpoint_every = 3\nsigning_key = \"signing.pem\"\n",
    );
    let calls = || {
        json!(
            (0..4)
                .map(|n| call("fx__echo", json!({ "text": format!("call {n}") })))
                .collect::<Vec<_>>()
        )
    };
    {
        let gateway = Gateway::start(&dir, &config);
        let session = gateway.python(TOKEN, "auto", &calls());
        assert_eq!(session["results"][3]["isError"], false, "{session}");
        // Dropped: stopped with SIGTERM, and it writes its checkpoint.
    }
    let log = dir.join("audit.jsonl");
    let log_arg = log.to_str().unwrap();
    let (public, other) = (public.to_str().unwrap(), other.to_str().unwrap());
    let rotated: Vec<PathBuf> = (1..)
        .map(|n| dir.join(format!("audit.jsonl.{n:06}")))
        .take_while(|path| path.exists())
        .collect();
    assert!(rotated.len() >= 2, "not rotated at 2000 bytes: {rotated:?}");

    let (status, out) = verify_log(&["--log", log_arg, "--public-key", public]);
    assert_eq!(status, Some(0), "{out}");
    assert!(out.starts_with(&format!("{log_arg}: intact\n")), "{out}");
    assert!(out.contains("8 entries and "), "{out}");
    assert!(
        out.contains(&format!("in {} files (", rotated.len() + 1)),
        "{out}"
    );
    assert!(out.contains("signed by the key given"), "{out}");
    assert!(out.contains("reaches its last checkpoint"), "{out}");
    assert!(out.contains("unsigned tail of 0 entries"), "{out}");

    // Reading goes across the rotated files too, checkpoints left out.
    let output = support::mcp_hints(&["gateway", "log", "--json", "--log", log_arg]);
    assert!(output.status.success(), "{output:?}");
    let entries: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(entries.len(), 8, "{entries:?}");
    let seqs: Vec<u64> = entries
        .iter()
        .map(|entry| entry["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");

    // Another key: refused, exit 1.
    let (status, out) = verify_log(&["--log", log_arg, "--public-key", other]);
    assert_eq!(status, Some(1), "{out}");
    assert!(out.starts_with(&format!("{log_arg}: TAMPERED: ")), "{out}");
    assert!(
        out.contains("fails verification: it names the key "),
        "{out}"
    );

    // An edit in the oldest rotated file: named by its file and line.
    let first = &rotated[0];
    let original = std::fs::read_to_string(first).unwrap();
    let edited = original.replacen("\"principal\":\"alice\"", "\"principal\":\"bob\"", 1);
    assert_ne!(edited, original);
    std::fs::write(first, &edited).unwrap();
    let (status, out) = verify_log(&["--log", log_arg]);
    assert_eq!(status, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "TAMPERED: {}:1: entry 1 was edited: it hashes to ",
            first.display()
        )),
        "{out}"
    );
    std::fs::write(first, &original).unwrap();

    // Lines removed, swapped, spliced from another log, forged: each named.
    let lines: Vec<String> = original.lines().map(str::to_owned).collect();
    let tampered = |change: &dyn Fn(&mut Vec<String>), expected: &str| {
        let mut changed = lines.clone();
        change(&mut changed);
        std::fs::write(first, changed.join("\n") + "\n").unwrap();
        let (status, out) = verify_log(&["--log", log_arg, "--public-key", public]);
        std::fs::write(first, &original).unwrap();
        assert_eq!(status, Some(1), "{out}");
        let expected = format!("{log_arg}: TAMPERED: {}:{expected}", first.display());
        assert!(out.starts_with(&expected), "{out}\nnot: {expected}");
    };
    tampered(
        &|lines| {
            lines.remove(1);
        },
        "2: entry 2 was removed before this line",
    );
    tampered(
        &|lines| lines.swap(1, 2),
        "2: entries were reordered: entry 3 is here, before entry 2",
    );
    let other = dir.join("other.jsonl");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            use mcp_hints_gateway::log::{AuditLog, Durability, Entry};
            let log = AuditLog::open(&other).unwrap();
            let mut entry: Entry = serde_json::from_str(&lines[0]).unwrap();
            for n in 0..3 {
                entry.id = format!("other-{n}");
                log.record(&entry, Durability::Synced).await.unwrap();
            }
        });
    let foreign: Vec<String> = std::fs::read_to_string(&other)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    tampered(
        &|lines| lines.insert(1, foreign[1].clone()),
        "2: a line was inserted (claiming to be entry 2); the line after it chains to the line \
         before it: its `prev` matches no line before it (a line of another log?)",
    );
    // A forger who knows the format: entry 2, chained to line 1.
    let forged = {
        let mut entry: Value = serde_json::from_str(&lines[1]).unwrap();
        entry["prev"] = json!(mcp_hints_gateway::chain::line_hash(lines[0].as_bytes()));
        entry["principal"] = json!("mallory");
        entry.to_string()
    };
    tampered(
        &|lines| lines.insert(1, forged.clone()),
        "2: a line was inserted (claiming to be entry 2); the line after it chains to the line \
         before it\n",
    );

    // Cut short: the last lines gone, the checkpoint's copy says so.
    let current = std::fs::read_to_string(&log).unwrap();
    let kept: Vec<&str> = current.lines().collect();
    std::fs::write(&log, format!("{}\n", kept[..kept.len() - 1].join("\n"))).unwrap();
    let (status, out) = verify_log(&["--log", log_arg]);
    assert_eq!(status, Some(1), "{out}");
    assert!(
        out.contains("TAMPERED: the log was truncated: its last checkpoint ("),
        "{out}"
    );
    std::fs::write(&log, &current).unwrap();

    // A crash mid-write: half a line, not tampering.
    let half = &kept[kept.len() - 2][..60];
    std::fs::write(&log, format!("{current}{half}")).unwrap();
    let (status, out) = verify_log(&["--log", log_arg, "--public-key", public]);
    assert_eq!(status, Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "{log_arg}:{}: a line cut short by a crash (not part of the chain, not tampering)",
            kept.len() + 1
        )),
        "{out}"
    );
    // The gateway started again ends the torn line and chains on.
    {
        let gateway = Gateway::start(&dir, &config);
        let session = gateway.python(TOKEN, "auto", &calls());
        assert_eq!(session["results"][3]["isError"], false, "{session}");
    }
    let (status, out) = verify_log(&["--log", log_arg, "--public-key", public]);
    assert_eq!(status, Some(0), "{out}");
    assert!(out.contains("16 entries and "), "{out}");
    assert!(out.contains("a line cut short by a crash"), "{out}");

    // Bad usage: exit 2.
    for args in [
        vec!["gateway", "log", "--log", log_arg, "--public-key", public],
        vec!["gateway", "log", "--log", log_arg, "--verify", "--json"],
    ] {
        let output = support::mcp_hints(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
    }
    let output = support::mcp_hints(&[
        "gateway",
        "log",
        "--verify",
        "--log",
        log_arg,
        "--public-key",
        log_arg,
    ]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not an Ed25519 public key"),
        "{output:?}"
    );
}

/// The entries of call `id`, from `log`.
fn of_call<'a>(log: &'a [Value], id: &Value) -> Vec<&'a Value> {
    log.iter().filter(|entry| entry["id"] == *id).collect()
}

/// The call id of the one call of `tool` in `log`, by its `decided` entry.
fn call_id_of(log: &[Value], tool: &str) -> Value {
    let ids: Vec<&Value> = log
        .iter()
        .filter(|entry| entry["tool"] == tool && entry["phase"] == "decided")
        .map(|entry| &entry["id"])
        .collect();
    assert_eq!(ids.len(), 1, "one call of {tool}: {log:#?}");
    ids[0].clone()
}

/// The trifecta's last leg as a rule over real peers: a write that sends
/// data out waits for an approver only in a session that has read
/// open-world content (PyPI `mcp-server-fetch` on a loopback page), and
/// the untrusted upstream's result taints that session; each
/// initialize-era HTTP session of the Python SDK client is a session of
/// its own.
#[test]
fn a_write_out_waits_for_an_approver_only_after_an_open_world_read_in_its_session() {
    let dir = scratch("trifecta");
    let page = peers::ServedPage::serve(&format!(
        "<!DOCTYPE html>\n<html><head><title>Planted page</title></head>\n<body><article>\n\
         <h1>Quarterly notes</h1>\n<p>{PLANTED}</p>\n<p>Other words follow here so that the \
         extractor keeps the paragraph as content.</p>\n</article></body></html>\n"
    ));
    let notes = notes_server().to_string_lossy().into_owned();
    let config = format!(
        r#"{PREAMBLE}
[policy]
default = "allow"

[[upstream]]
name = "web"
{fetch}
[[upstream]]
name = "notes"
command = {notes}
trusted = true

# Private data: npm's knowledge-graph server.
[[upstream]]
name = "memory"
command = {memory}
env = {{ MEMORY_FILE_PATH = "{memory_file}" }}

{trifecta}

# What an untrusted upstream's open-world result brought in taints the
# session: the notebook is then not to be read back into it.
[[rule]]
action = "deny"
upstream = "notes"
tool = "list_notes"
after = ["upstream:web and tainted"]
"#,
        fetch = peers::fetch_server().toml(),
        notes = toml_list(&[notes]),
        memory = toml_list(&npm_command("@modelcontextprotocol/server-memory")),
        memory_file = dir.join("memory.jsonl").display(),
        trifecta = support::trifecta(2),
    );
    let gateway = Gateway::start(&dir, &config);
    let write = || {
        call(
            "notes__append_note",
            json!({ "text": "the quarterly notes" }),
        )
    };

    // A session that read nothing: the write goes on.
    let first = gateway.python(TOKEN, "legacy", &json!([write()]));
    let result = &first["results"][0];
    assert_eq!(result["isError"], false, "{result}\n{}", gateway.stderr());

    // Another session reads its private data and the page, then writes:
    // parked, unanswered, expired as denied.
    let second = gateway.python(
        TOKEN,
        "legacy",
        &json!([
            call("memory__read_graph", json!({})),
            call("web__fetch", json!({ "url": page.url })),
            write(),
            call("notes__list_notes", json!({})),
        ]),
    );
    let private = &second["results"][0];
    assert_ne!(private["isError"], true, "{private}");
    let (fetched, parked) = (&second["results"][1], &second["results"][2]);
    let tainted = &second["results"][3];
    assert_eq!(tainted["isError"], true, "{tainted}");
    assert!(
        text(tainted).contains("rule[1] (deny notes__list_notes after upstream:web and tainted)"),
        "{tainted}"
    );
    assert_ne!(fetched["isError"], true, "{fetched}");
    assert!(text(fetched).contains(PLANTED), "{fetched}");
    assert_eq!(parked["isError"], true, "{parked}");
    let refusal = text(parked);
    assert!(
        refusal.contains("was not approved within 2 s, so it expired and was denied")
            && refusal.contains("after open_world")
            && refusal.contains("not forwarded"),
        "{refusal}"
    );

    // A third session does not inherit the second's read.
    let third = gateway.python(
        TOKEN,
        "legacy",
        &json!([write(), call("notes__list_notes", json!({}))]),
    );
    for result in third["results"].as_array().unwrap() {
        assert_eq!(result["isError"], false, "{result}");
    }
    assert_eq!(page.requests().len(), 1, "the page was fetched once");

    let log = gateway.log_with("finished", 7);
    let fetch_id = call_id_of(&log, "fetch");
    let writes: Vec<&Value> = log
        .iter()
        .filter(|entry| entry["tool"] == "append_note" && entry["phase"] == "decided")
        .collect();
    let decisions: Vec<&str> = writes
        .iter()
        .map(|entry| entry["decision"].as_str().unwrap())
        .collect();
    assert_eq!(
        decisions,
        ["allow", "require_approval", "expired", "allow"],
        "{log:#?}"
    );
    // Three client runs, three sessions: each write's entry names its own.
    let sessions: Vec<&str> = [0, 1, 3]
        .map(|index| writes[index]["session"].as_str().expect("a session key"))
        .to_vec();
    assert!(
        sessions[0] != sessions[1] && sessions[1] != sessions[2] && sessions[0] != sessions[2],
        "{sessions:?}"
    );
    assert_eq!(writes[1]["session"], writes[2]["session"]);
    let looked_back = writes[1];
    assert_eq!(
        looked_back["earlier"],
        json!([{ "id": fetch_id, "upstream": "web", "tool": "fetch" }]),
        "{looked_back}"
    );
    let rule = looked_back["rule"].as_str().unwrap();
    assert!(
        rule.starts_with("rule[0] (") && rule.contains(" after open_world"),
        "{rule}"
    );
    // The tainted read-back names the fetch too.
    let reads: Vec<&Value> = log
        .iter()
        .filter(|entry| entry["tool"] == "list_notes" && entry["phase"] == "decided")
        .collect();
    let read_decisions: Vec<&Value> = reads.iter().map(|entry| &entry["decision"]).collect();
    assert_eq!(
        read_decisions,
        [&json!("deny"), &json!("allow")],
        "{reads:#?}"
    );
    assert_eq!(
        reads[0]["earlier"], looked_back["earlier"],
        "{:#?}",
        reads[0]
    );
    // Only the decisions the look-backs made name earlier calls.
    for entry in log
        .iter()
        .filter(|entry| *entry != looked_back && *entry != reads[0])
    {
        assert!(entry.get("earlier").is_none(), "{entry}");
    }
    let outcomes: Vec<(&Value, &Value)> = of_call(&log, &looked_back["id"])
        .iter()
        .filter(|entry| entry["phase"] == "finished")
        .map(|entry| (&entry["decision"], &entry["outcome"]))
        .collect();
    assert_eq!(outcomes, [(&json!("expired"), &json!("refused"))]);
    let completed = log
        .iter()
        .filter(|entry| entry["tool"] == "append_note" && entry["outcome"] == "completed")
        .count();
    assert_eq!(completed, 2, "{log:#?}");
}

/// `count`: in one session (a 2026-07-28 client that names none, so its
/// principal's calls), the destructive call past `more_than` is refused,
/// its `decided` entry naming the calls it counted; a read still goes on.
#[test]
fn a_count_rule_refuses_the_call_past_its_number_naming_the_calls_counted() {
    let dir = scratch("count-rule");
    let config = notes_config(
        r#"[[rule]]
action = "deny"
when = ["destructive"]
count = { of = "destructive", more_than = 2, within_secs = 60 }
"#,
    );
    let gateway = Gateway::start(&dir, &config);
    let session = gateway.python(
        TOKEN,
        "auto",
        &json!([
            call("notes__append_note", json!({ "text": "draft" })),
            call("notes__update_note", json!({ "id": 1, "text": "final" })),
            call("notes__delete_note", json!({ "id": 1 })),
            call("notes__delete_note", json!({ "id": 1 })),
            call("notes__list_notes", json!({})),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    for (index, result) in results[..3].iter().enumerate() {
        assert_eq!(result["isError"], false, "{index}: {result}");
    }
    assert_eq!(text(&results[2]), "deleted note 1");
    let refused = &results[3];
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        text(refused),
        "`notes__delete_note` refused by the gateway's rule[0] (deny * when destructive after \
         2 destructive calls within 60 s); it was not forwarded"
    );
    assert_eq!(results[4]["isError"], false, "{}", results[4]);

    let log = gateway.log_with("finished", 5);
    let decided: Vec<&Value> = log
        .iter()
        .filter(|entry| entry["phase"] == "decided")
        .collect();
    let seen = tool_decisions(decided.iter().copied());
    assert_eq!(
        seen,
        [
            ("append_note", "allow"),
            ("update_note", "allow"),
            ("delete_note", "allow"),
            ("delete_note", "deny"),
            ("list_notes", "allow"),
        ]
    );
    assert_eq!(
        decided[3]["earlier"],
        json!([
            { "id": decided[1]["id"], "upstream": "notes", "tool": "update_note" },
            { "id": decided[2]["id"], "upstream": "notes", "tool": "delete_note" },
        ]),
        "{:#?}",
        decided[3]
    );
    for (index, entry) in decided.iter().enumerate().filter(|(index, _)| *index != 3) {
        assert!(entry.get("earlier").is_none(), "{index}: {entry}");
    }
    // One session (the principal's): every entry names the same key, a
    // digest, never the principal's name.
    let session = log[0]["session"].as_str().expect("a session key");
    assert_eq!(session.len(), 64, "{session}");
    assert!(
        session.bytes().all(|byte| byte.is_ascii_hexdigit()),
        "{session}"
    );
    assert!(
        log.iter().all(|entry| entry["session"] == session),
        "{log:#?}"
    );
    let finished: Vec<&Value> = of_call(&log, &decided[3]["id"])
        .into_iter()
        .filter(|entry| entry["phase"] == "finished")
        .collect();
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["outcome"], "refused");
}

/// A look-back's `tool:` glob that matches no tool is said at start, as a
/// rule's `tool` is; a term that is no term is refused with where it is.
#[test]
fn a_look_back_naming_no_tool_is_warned_of_and_an_unknown_term_refused() {
    let dir = scratch("look-back-input");
    let gateway = Gateway::start(
        &dir,
        &notes_config("[[rule]]\naction = \"deny\"\nafter = [\"tool:no_such_tool*\"]\n"),
    );
    let warning = stderr_line(&gateway, "rule[0].after[0]");
    assert!(
        warning.ends_with(
            "gateway: warning: rule[0].after[0] `no_such_tool*` matches no tool of the upstreams \
             `*` names"
        ),
        "{warning}"
    );
    drop(gateway);

    let config = notes_config("[[rule]]\naction = \"deny\"\nafter = [\"open_word\"]\n");
    let path = dir.join("misspelt.toml");
    std::fs::write(&path, &config).unwrap();
    let (line, column) = config
        .lines()
        .enumerate()
        .find_map(|(index, text)| Some((index + 1, text.find("\"open_word\"")? + 1)))
        .unwrap();
    let (status, stdout, stderr) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &[],
    );
    assert_eq!(status, Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:{line}:{column}: rule[0].after[0]: unknown term `open_word` (did you mean \
             `open_world`?)",
            path.display()
        )),
        "{stderr}"
    );
    // `check` judges a first call, and names apart the rules that look
    // back and may hold a tool's calls later in a session.
    let config = notes_config(&support::trifecta(5));
    let path = dir.join("trifecta.toml");
    std::fs::write(&path, &config).unwrap();
    let (status, stdout, stderr) = gateway_command(
        &["check".as_ref(), "--config".as_ref(), path.as_os_str()],
        &[],
    );
    assert_eq!(status, Some(0), "{stdout}{stderr}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not listed: {stdout}"))
            .to_owned()
    };
    assert!(
        line("notes__append_note").ends_with("allow (no rule); later in a session: rule[0]"),
        "{stdout}"
    );
    assert!(
        line("notes__list_notes").ends_with("allow (no rule)"),
        "{stdout}"
    );
}

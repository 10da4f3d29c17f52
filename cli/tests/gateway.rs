//! `mcp-hints gateway serve` as a real process, in front of real upstreams
//! (the example `notes` server and the npm `server-memory`, both over
//! stdio), driven over streamable HTTP on loopback by the official MCP
//! Python SDK's client (tests/fixtures/gateway_client.py, run with the
//! venv tests/peers installs).

mod peers;
mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use peers::{NPM_SERVERS, installed};
use serde_json::{Value, json};
use support::notes_server;

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

/// A running gateway: its process, its URL, and every line of its stderr.
struct Gateway {
    child: Child,
    url: String,
    admin: Option<String>,
    stderr: Arc<Mutex<Vec<String>>>,
    dir: PathBuf,
}

impl Gateway {
    /// Writes `config` to DIR/gateway.toml and starts `mcp-hints gateway
    /// serve` on it; waits (90 s at most) until it says where it serves.
    fn start(dir: &Path, config: &str) -> Gateway {
        let path = dir.join("gateway.toml");
        std::fs::write(&path, config).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(["gateway", "serve", "--config"])
            .arg(&path)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcp-hints runs");
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (sender, receiver) = mpsc::channel();
        {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { return };
                    if let Some(url) =
                        line.strip_prefix("gateway: serving MCP over streamable HTTP at ")
                    {
                        let _ = sender.send(("mcp", url.to_owned()));
                    }
                    if let Some(url) = line.strip_prefix("gateway: admin endpoint at ") {
                        let _ = sender.send(("admin", url.to_owned()));
                    }
                    lines.lock().unwrap().push(line);
                }
            });
        }
        let mut gateway = Gateway {
            child,
            url: String::new(),
            admin: None,
            stderr: lines,
            dir: dir.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        while gateway.url.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(left) {
                Ok(("mcp", url)) => gateway.url = url,
                Ok((_, url)) => gateway.admin = Some(url),
                Err(_) => panic!(
                    "the gateway did not serve within 90 s; stderr:\n{}",
                    gateway.stderr()
                ),
            }
        }
        gateway
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Runs the Python SDK client with `ops` on one session.
    fn python(&self, token: &str, mode: &str, ops: &Value) -> Value {
        python(&self.url, token, mode, ops, &self.stderr())
    }

    /// The audit log's entries.
    fn log(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("audit.jsonl")).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    fn address(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // SIGTERM: the gateway stops its upstreams' process groups itself.
        #[cfg(unix)]
        unsafe {
            // SAFETY: kill(2) on a child of ours, by its id.
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    let log = gateway.log();
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
        .log()
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
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
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
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "raw", "version": "1" } }
    })
    .to_string();
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAccept: \
         application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    // A streamed answer may stay open: what came within the timeout is
    // enough for the status line.
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
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

/// How many times the fixture's `count` tools ran.
fn executions(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("counter.txt"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
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
    // The replay-safe client started the upstream again for the next call.
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(text(&results[1]), "2");
    assert_eq!(executions(&dir), 2, "each call ran exactly once");
    // The other upstream never stopped serving.
    assert_eq!(results[2]["isError"], false, "{}", results[2]);
    let finished: Vec<(String, String)> = gateway
        .log()
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
        .log()
        .into_iter()
        .find(|entry| entry["phase"] == "finished" && entry["tool"] == "peek_once_then_die")
        .unwrap();
    assert_eq!(peek["attempts"], 2, "{peek}");
    assert_eq!(peek["outcome"], "completed", "{peek}");
}

/// How many times counter-server finished `tool`, from its executions
/// file.
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
    assert_eq!(finished_runs(&executions, "read"), 2);
    assert_eq!(finished_runs(&executions, "append"), 1);
    assert_eq!(finished_runs(&executions, "set_value"), 1);
    assert_eq!(finished_runs(&executions, "append_keyed"), 1);
    let fired = std::fs::read_to_string(dir.join("faults.jsonl")).unwrap();
    assert_eq!(fired.lines().count(), 4, "{fired}");
    let finished: Vec<(String, String, u64)> = gateway
        .log()
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
        .log()
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
    let extra = format!(
        r#"[admin]
token = "{ADMIN_TOKEN}"

[[rule]]
action = "require_approval"
upstream = "fx"
tool = "count"
timeout_secs = 60
on_expiry = "deny"
"#
    );
    let config = fx_config(&dir, &[], &extra).replace(
        "http = \"127.0.0.1:0\"\n",
        "http = \"127.0.0.1:0\"\nadmin_http = \"127.0.0.1:0\"\n",
    );
    let gateway = Arc::new(Gateway::start(&dir, &config));
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
        let client = {
            let gateway = gateway.clone();
            std::thread::spawn(move || {
                gateway.python(TOKEN, "auto", &json!([call("fx__count", json!({}))]))
            })
        };
        let ids = pending_ids(&admin, 1);
        assert_eq!(ids.len(), 1);
        let decided = admin_command(&[verb, &ids[0], "--admin", &admin]);
        assert!(
            decided.status.success(),
            "{verb}: {}",
            String::from_utf8_lossy(&decided.stderr)
        );
        let session = client.join().unwrap();
        let result = &session["results"][0];
        assert_eq!(result["isError"], expected, "{verb}: {result}");
    }
    assert_eq!(executions(&dir), 1, "only the approved call ran");
    let decisions: Vec<String> = gateway
        .log()
        .iter()
        .map(|entry| {
            format!(
                "{}:{}",
                entry["phase"].as_str().unwrap(),
                entry["decision"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        decisions,
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

#[test]
fn a_parked_call_nobody_answers_becomes_its_rules_on_expiry() {
    let dir = scratch("approval-expiry");
    let extra = format!(
        r#"[admin]
token = "{ADMIN_TOKEN}"

[[rule]]
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
"#
    );
    let config = fx_config(&dir, &[], &extra).replace(
        "http = \"127.0.0.1:0\"\n",
        "http = \"127.0.0.1:0\"\nadmin_http = \"127.0.0.1:0\"\n",
    );
    let gateway = Gateway::start(&dir, &config);
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
    assert!(text(&results[0]).contains("expired"), "{}", results[0]);
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(text(&results[1]), "went on");
    assert_eq!(executions(&dir), 0, "the expired, denied call never ran");
    let decisions: Vec<String> = gateway
        .log()
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
    let extra = format!(
        r#"[admin]
token = "{ADMIN_TOKEN}"

[lock]
path = "gateway.lock"
deny_drift = true
"#
    );
    let with_admin = |config: String| {
        config.replace(
            "http = \"127.0.0.1:0\"\n",
            "http = \"127.0.0.1:0\"\nadmin_http = \"127.0.0.1:0\"\n",
        )
    };
    // A new tool (an empty lock): parked, approved, the lock written.
    {
        let gateway = Arc::new(Gateway::start(
            &dir,
            &with_admin(fx_config(&dir, &[], &extra)),
        ));
        let admin = gateway.admin.clone().unwrap();
        let client = {
            let gateway = gateway.clone();
            std::thread::spawn(move || {
                gateway.python(
                    TOKEN,
                    "auto",
                    &json!([call("fx__echo", json!({ "text": "a" }))]),
                )
            })
        };
        let ids = pending_ids(&admin, 1);
        let approved = admin_command(&["approve", &ids[0], "--admin", &admin]);
        assert!(
            approved.status.success(),
            "{}",
            String::from_utf8_lossy(&approved.stderr)
        );
        let session = client.join().unwrap();
        assert_eq!(session["results"][0]["isError"], false, "{}", session);
        let lock: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("gateway.lock")).unwrap())
                .unwrap();
        assert!(lock["tools"]["fx__echo"].is_object(), "{lock}");
        // Approved now: the next call goes straight through.
        let again = gateway.python(
            TOKEN,
            "auto",
            &json!([call("fx__echo", json!({ "text": "b" }))]),
        );
        assert_eq!(again["results"][0]["isError"], false, "{again}");
    }
    // The same tool with another description: parked again; denied, the
    // refusal names what changed.
    let gateway = Arc::new(Gateway::start(
        &dir,
        &with_admin(fx_config(
            &dir,
            &["--describe", "Now it does more."],
            &extra,
        )),
    ));
    let admin = gateway.admin.clone().unwrap();
    let client = {
        let gateway = gateway.clone();
        std::thread::spawn(move || {
            gateway.python(
                TOKEN,
                "auto",
                &json!([call("fx__echo", json!({ "text": "c" }))]),
            )
        })
    };
    let ids = pending_ids(&admin, 1);
    let denied = admin_command(&["deny", &ids[0], "--admin", &admin]);
    assert!(
        denied.status.success(),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    let session = client.join().unwrap();
    let result = &session["results"][0];
    assert_eq!(result["isError"], true, "{result}");
    assert!(text(result).contains("description"), "{}", text(result));
    let locked = |dir: &Path| -> Value {
        let lock: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("gateway.lock")).unwrap())
                .unwrap();
        lock["tools"]["fx__echo"].clone()
    };
    let before = locked(&dir);
    // Asked again, and approved this time: it runs, and the lock holds the
    // changed tool.
    let client = {
        let gateway = gateway.clone();
        std::thread::spawn(move || {
            gateway.python(
                TOKEN,
                "auto",
                &json!([call("fx__echo", json!({ "text": "d" }))]),
            )
        })
    };
    let ids = pending_ids(&admin, 1);
    let approved = admin_command(&["approve", &ids[0], "--admin", &admin]);
    assert!(approved.status.success());
    let session = client.join().unwrap();
    assert_eq!(text(&session["results"][0]), "d", "{session}");
    assert_ne!(locked(&dir), before, "the lock was not updated");
    // Both gateways wrote to the same log.
    let decisions: Vec<String> = gateway
        .log()
        .iter()
        .map(|entry| {
            format!(
                "{}:{}",
                entry["phase"].as_str().unwrap(),
                entry["decision"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        decisions,
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
    let text = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let entries: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(entries.len(), 2);
    assert!(entries.iter().all(|entry| entry["principal"] == "local"));
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
        .log()
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

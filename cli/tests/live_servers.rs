//! Live: real MCP servers, installed from npm and PyPI at pinned versions,
//! audited, linted and pinned over stdio by the `mcp-hints` binary.
//!
//! The servers are those captured in tests/corpus/servers/, at the captured
//! versions, so every live answer is compared with the corpus page of the
//! same server: the tool definitions (the live lock equals the corpus lock),
//! the audit's record of every tool, and the lint findings. Each test also
//! states the expected names, decisions, provenances and findings itself.
//!
//! The audit negotiates the revision: the npm servers (TypeScript SDK v1)
//! refuse `server/discover` and are audited after `initialize` at
//! 2025-11-25; the PyPI servers run on the Python SDK 2.3.0 and speak
//! 2026-07-28. Both give the corpus's records.
//!
//! The servers are installed once, under Cargo's `CARGO_TARGET_TMPDIR`, by
//! tests/peers/mod.rs (shared with tests/protocol_revisions.rs). This test
//! never skips: without node, npm, python3 with venv, git, or the
//! registries, it fails and says which step broke, with the installer's
//! output.
//!
//! On 2 cores the install takes 15 s to a minute, as fast as the registries
//! answer, and is then reused; the tests themselves take some 6 s. Run with
//! `--nocapture` to see server-everything's audit table.

mod peers;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

use peers::{NPM_SERVERS, installed, remove, root, run};
use serde_json::{Value, json};

/// Seconds each request may take: the first start of a server can be slow.
const TIMEOUT: &str = "120";

const R: &str = "resend";
const B: &str = "read_back_first";

// ---------------------------------------------------------------- servers

/// A stdio server command line, with the environment it needs and a scratch
/// directory for its files and for locks.
struct Server {
    /// The stem of its page in tests/corpus/servers/.
    corpus: &'static str,
    command: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    scratch: PathBuf,
}

/// An empty scratch directory of this process for `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = root()
        .join("scratch")
        .join(format!("{name}-{}", std::process::id()));
    remove(&dir).unwrap();
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// `node <package's bin script>`: no shell shim, so it runs the same way on
/// every platform.
fn npm_server(package: &str, corpus: &'static str) -> Server {
    let (_, _, bin) = NPM_SERVERS
        .iter()
        .find(|(name, ..)| *name == package)
        .unwrap();
    let dir = installed().node_modules.join(package);
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    let script = manifest["bin"][bin]
        .as_str()
        .unwrap_or_else(|| panic!("{package} has no bin `{bin}`: {}", manifest["bin"]));
    Server {
        corpus,
        command: vec!["node".into(), dir.join(script).into()],
        env: Vec::new(),
        scratch: scratch(corpus),
    }
}

/// What a server negotiates when the audit is given no revision.
const TS_V1: (&str, &str) = ("2025-11-25", "initialize");
const PY_V2: (&str, &str) = ("2026-07-28", "discover");

fn pypi_server(script: &str, corpus: &'static str) -> Server {
    let name = if cfg!(windows) {
        format!("{script}.exe")
    } else {
        script.to_owned()
    };
    Server {
        corpus,
        command: vec![installed().venv_scripts.join(name).into()],
        env: Vec::new(),
        scratch: scratch(corpus),
    }
}

impl Server {
    fn arg(mut self, arg: impl Into<OsString>) -> Server {
        self.command.push(arg.into());
        self
    }

    /// `mcp-hints ARGS --timeout 120 -- COMMAND`: exit status, stdout, stderr.
    fn mcp_hints(&self, args: &[&OsStr]) -> (i32, String, String) {
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(args)
            .args(["--timeout", TIMEOUT, "--"])
            .args(&self.command)
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .env("NO_COLOR", "1")
            .output()
            .expect("mcp-hints runs");
        (
            output.status.code().expect("mcp-hints exits"),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    }

    /// Like [`Server::mcp_hints`], with the JSON report parsed.
    fn json(&self, args: &[&OsStr]) -> (i32, Value) {
        let (code, stdout, stderr) = self.mcp_hints(args);
        let report = serde_json::from_str(&stdout).unwrap_or_else(|error| {
            panic!("{}: {args:?}: {error}\n{stdout}\n{stderr}", self.corpus)
        });
        (code, report)
    }

    fn corpus_page(&self) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/corpus/servers")
            .join(format!("{}.json", self.corpus))
    }
}

fn os<'a>(args: &[&'a str]) -> Vec<&'a OsStr> {
    args.iter().map(|arg| OsStr::new(*arg)).collect()
}

/// `mcp-hints ARGS FILE` on the server's corpus page.
fn on_corpus(server: &Server, args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(args)
        .arg(server.corpus_page())
        .env("NO_COLOR", "1")
        .output()
        .expect("mcp-hints runs");
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

// ---------------------------------------------------------------- checks

/// What a server must answer.
struct Expected<'a> {
    /// `initialize`'s serverInfo, or `server/discover`'s.
    server_info: Value,
    /// The revision negotiated and the lifecycle (`discover` or `initialize`).
    protocol: (&'a str, &'a str),
    /// Every tool in list order, with its decision when trusted.
    decisions: &'a [(&'a str, &'a str)],
    /// Tools leaving destructiveHint and idempotentHint to their defaults;
    /// every other hint of every tool is declared.
    defaulted: &'a [&'a str],
    /// (rule, tool) of every lint finding, in order.
    findings: &'a [(&'a str, &'a str)],
    /// The tool whose description the tampered lock changes.
    changed: &'a str,
}

fn names_and_decisions(report: &Value) -> Vec<(&str, &str)> {
    report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap(),
                tool["decision"].as_str().unwrap(),
            )
        })
        .collect()
}

/// Audits, lints and pins `server` live and compares every answer with its
/// corpus page and with `expected`.
fn check(server: &Server, expected: &Expected<'_>) {
    let name = server.corpus;
    let resend_all = expected
        .decisions
        .iter()
        .all(|(_, decision)| *decision == R);
    let audit_exit = if resend_all { 0 } else { 1 };

    // audit --json --trusted
    let (code, audit) = server.json(&os(&["audit", "--json", "--trusted"]));
    assert_eq!(code, audit_exit, "{name}: {audit:#}");
    assert_eq!(audit["target"]["kind"], "live", "{name}");
    assert_eq!(
        audit["server"]["serverInfo"], expected.server_info,
        "{name}"
    );
    let (version, lifecycle) = expected.protocol;
    assert_eq!(audit["server"]["protocolVersion"], version, "{name}");
    assert_eq!(audit["protocol"]["version"], version, "{name}");
    assert_eq!(audit["protocol"]["lifecycle"], lifecycle, "{name}");
    assert_eq!(audit["protocol"]["forced"], false, "{name}");
    let fields = audit["pageFields"].as_array().unwrap();
    assert_eq!(fields.len(), 1, "{name}");
    if lifecycle == "discover" {
        // 2026-07-28 pages carry cache hints, and the report keeps them.
        assert_eq!(fields[0]["resultType"], "complete", "{name}");
        assert!(fields[0]["ttlMs"].is_u64(), "{name}: {fields:?}");
        assert!(fields[0]["cacheScope"].is_string(), "{name}: {fields:?}");
    } else {
        assert_eq!(fields[0], json!({}), "{name}");
    }
    assert_eq!(audit["clientCapabilities"], json!({}), "{name}");
    assert_eq!(audit["trusted"], true);
    assert_eq!(audit["pages"], 1, "{name}");
    assert_eq!(
        names_and_decisions(&audit),
        expected.decisions.to_vec(),
        "{name}"
    );
    let resend = expected.decisions.iter().filter(|(_, d)| *d == R).count();
    assert_eq!(
        audit["summary"],
        json!({
            "tools": expected.decisions.len(),
            "resend": resend,
            "readBackFirst": expected.decisions.len() - resend,
            "refuse": 0,
        }),
        "{name}"
    );
    for tool in audit["tools"].as_array().unwrap() {
        let tool_name = tool["name"].as_str().unwrap();
        let defaulted: Vec<&str> = [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ]
        .into_iter()
        .filter(|hint| tool["hints"][hint]["provenance"] != "declared")
        .collect();
        let wanted: &[&str] = if expected.defaulted.contains(&tool_name) {
            &["destructiveHint", "idempotentHint"]
        } else {
            &[]
        };
        assert_eq!(defaulted, wanted, "{name}: {tool_name}");
        assert_eq!(tool["page"], 1);
    }
    // The same record for every tool as the corpus page's: names, pages,
    // decisions, reasons, hint values and provenances.
    let (_, corpus_audit) = on_corpus(server, &["audit", "--json", "--trusted"]);
    let corpus_audit: Value = serde_json::from_str(&corpus_audit).unwrap();
    assert_eq!(audit["tools"], corpus_audit["tools"], "{name}");
    // lint --json
    let (code, lint) = server.json(&os(&["lint", "--json"]));
    assert_eq!(code, 0, "{name}: {lint:#}");
    assert_eq!(lint["tools"], expected.decisions.len(), "{name}");
    let findings: Vec<(&str, &str)> = lint["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap(),
                finding["tool"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(findings, expected.findings.to_vec(), "{name}");
    let (_, corpus_lint) = on_corpus(server, &["lint", "--json"]);
    let corpus_lint: Value = serde_json::from_str(&corpus_lint).unwrap();
    assert_eq!(lint["findings"], corpus_lint["findings"], "{name}");
    assert_eq!(lint["rules"], corpus_lint["rules"], "{name}");

    // pin, as the corpus was captured (protocol 2025-06-18): the same
    // definitions, byte for byte, as the corpus page.
    let (code, lock, stderr) = server.mcp_hints(&os(&["pin", "--protocol-version", "2025-06-18"]));
    assert_eq!(code, 0, "{name}: {stderr}");
    assert!(
        stderr.contains(&format!(
            "pinned {} tools from 1 page",
            expected.decisions.len()
        )),
        "{name}: {stderr}"
    );
    let (_, corpus_lock) = on_corpus(server, &["pin"]);
    assert_eq!(
        lock, corpus_lock,
        "{name}: the live tools differ from the corpus page"
    );

    // audit --pinned: no drift, so the usual exit status.
    let lock_path = server.scratch.join("tools.lock");
    fs::write(&lock_path, &lock).unwrap();
    let mut args = os(&["audit", "--json", "--trusted", "--pinned"]);
    args.push(lock_path.as_os_str());
    let (code, pinned) = server.json(&args);
    assert_eq!(code, audit_exit, "{name}: {pinned:#}");
    assert_eq!(pinned["tools"], audit["tools"], "{name}");
    assert_eq!(
        pinned["pinned"],
        json!({
            "lock": lock_path.display().to_string(),
            "added": [], "removed": [], "changed": [],
        }),
        "{name}"
    );

    // A lock in which one tool's description was different: exit 3, and
    // that tool, only, is refused.
    let mut tampered: Value = serde_json::from_str(&lock).unwrap();
    let fingerprint = &mut tampered["tools"][expected.changed]["fingerprint"];
    for part in ["/definition", "/parts/description"] {
        let digest = fingerprint.pointer_mut(part).unwrap();
        let text = digest.as_str().unwrap().to_owned();
        assert!(text.starts_with("sha256:") && text.len() == 71, "{text}");
        let last = if text.ends_with('0') { "1" } else { "0" };
        *digest = Value::String(format!("{}{last}", &text[..70]));
    }
    let tampered_path = server.scratch.join("tampered.lock");
    fs::write(
        &tampered_path,
        serde_json::to_string_pretty(&tampered).unwrap(),
    )
    .unwrap();
    let mut args = os(&["audit", "--json", "--trusted", "--pinned"]);
    args.push(tampered_path.as_os_str());
    let (code, drifted) = server.json(&args);
    assert_eq!(code, 3, "{name}: {drifted:#}");
    let tampered_lock = tampered_path.display().to_string();
    assert_eq!(
        drifted["pinned"],
        json!({
            "lock": tampered_lock,
            "added": [], "removed": [],
            "changed": [{ "name": expected.changed, "parts": ["description"], "hints": [] }],
        }),
        "{name}"
    );
    for (tool, (tool_name, decision)) in drifted["tools"]
        .as_array()
        .unwrap()
        .iter()
        .zip(expected.decisions)
    {
        assert_eq!(tool["name"], *tool_name);
        if *tool_name == expected.changed {
            assert_eq!(tool["decision"], "refuse", "{name}: {tool:#}");
            assert_eq!(
                tool["reason"],
                format!(
                    "changed since {tampered_lock} (description): approve it again, then pin \
                     again"
                ),
                "{name}"
            );
        } else {
            assert_eq!(tool["decision"], *decision, "{name}: {tool_name}");
        }
    }
    assert_eq!(drifted["summary"]["refuse"], 1, "{name}");

    remove(&server.scratch).unwrap();
}

// ---------------------------------------------------------------- tests

#[test]
fn server_everything_declares_every_hint() {
    let server = npm_server(
        "@modelcontextprotocol/server-everything",
        "server-everything",
    );
    check(
        &server,
        &Expected {
            server_info: json!({
                "name": "mcp-servers/everything",
                "title": "Everything Reference Server",
                "version": "2.0.0",
            }),
            protocol: TS_V1,
            decisions: &[
                ("echo", R),
                ("get-annotated-message", R),
                ("get-env", R),
                ("get-resource-links", R),
                ("get-resource-reference", R),
                ("get-structured-content", R),
                ("get-sum", R),
                ("get-tiny-image", R),
                ("gzip-file-as-resource", R),
                ("toggle-simulated-logging", B),
                ("toggle-subscriber-updates", B),
                ("trigger-long-running-operation", R),
                ("simulate-research-query", B),
            ],
            defaulted: &[],
            findings: &[],
            changed: "get-sum",
        },
    );

    // The table for people, as `mcp-hints audit --trusted -- node …` prints it.
    let (code, table, stderr) = server.mcp_hints(&os(&["audit", "--trusted"]));
    assert_eq!(code, 1, "{stderr}");
    eprintln!("{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "server: mcp-servers/everything 2.0.0 (MCP server `{}`)",
            server
                .command
                .iter()
                .map(|part| part.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        )
    );
    assert_eq!(
        lines[1],
        "protocol: 2025-11-25 via initialize (server/discover was refused with JSON-RPC error \
         -32601 \"Method not found\": the server predates 2026-07-28)"
    );
    assert_eq!(lines[4], "13 tools in 1 page");
    assert!(lines[6].starts_with("TOOL "), "{table}");
    assert!(
        lines[7].starts_with("echo ")
            && lines[7]
                .ends_with("readOnlyHint is true (declared): a read has no effect to repeat"),
        "{table}"
    );
    assert_eq!(
        lines.last().unwrap(),
        &"13 tools: 10 resend, 3 read back first"
    );
}

#[test]
fn server_memory_reads_back_what_only_adds() {
    let mut server = npm_server("@modelcontextprotocol/server-memory", "server-memory");
    server.env.push((
        "MEMORY_FILE_PATH",
        server.scratch.join("memory.jsonl").into(),
    ));
    check(
        &server,
        &Expected {
            server_info: json!({ "name": "memory-server", "version": "0.6.3" }),
            protocol: TS_V1,
            decisions: &[
                ("create_entities", B),
                ("create_relations", B),
                ("add_observations", B),
                ("delete_entities", R),
                ("delete_observations", R),
                ("delete_relations", R),
                ("read_graph", R),
                ("search_nodes", R),
                ("open_nodes", R),
            ],
            defaulted: &[],
            findings: &[],
            changed: "create_entities",
        },
    );
}

#[test]
fn server_filesystem_leaves_read_only_tools_partly_undeclared() {
    let server = npm_server(
        "@modelcontextprotocol/server-filesystem",
        "server-filesystem",
    );
    let allowed = server.scratch.join("allowed");
    fs::create_dir_all(&allowed).unwrap();
    let server = server.arg(allowed);
    check(
        &server,
        &Expected {
            server_info: json!({ "name": "secure-filesystem-server", "version": "0.2.0" }),
            protocol: TS_V1,
            decisions: &[
                ("read_file", R),
                ("read_text_file", R),
                ("read_media_file", R),
                ("read_multiple_files", R),
                ("write_file", R),
                ("edit_file", B),
                ("create_directory", R),
                ("list_directory", R),
                ("list_directory_with_sizes", R),
                ("directory_tree", R),
                ("move_file", B),
                ("search_files", R),
                ("get_file_info", R),
                ("list_allowed_directories", R),
            ],
            // Not a lint finding: the spec says these mean nothing when
            // readOnlyHint is true.
            defaulted: &[
                "read_file",
                "read_text_file",
                "read_media_file",
                "read_multiple_files",
                "list_directory",
                "list_directory_with_sizes",
                "directory_tree",
                "search_files",
                "get_file_info",
                "list_allowed_directories",
            ],
            findings: &[],
            changed: "write_file",
        },
    );
}

#[test]
fn mcp_server_time_may_resend_everything() {
    // The local timezone is written into the tools' descriptions of their
    // arguments: fix it to the corpus's.
    let server = pypi_server("mcp-server-time", "mcp-server-time").arg("--local-timezone=UTC");
    check(
        &server,
        &Expected {
            server_info: json!({ "name": "mcp-time", "version": "2026.10.19" }),
            protocol: PY_V2,
            decisions: &[("get_current_time", R), ("convert_time", R)],
            defaulted: &[],
            findings: &[
                ("missing_title", "get_current_time"),
                ("missing_title", "convert_time"),
            ],
            changed: "convert_time",
        },
    );
}

#[test]
fn mcp_server_git_reads_back_commits_and_branches() {
    let server = pypi_server("mcp-server-git", "mcp-server-git");
    let repository = server.scratch.join("repository");
    run(
        "making a git repository (is git installed?)",
        Command::new("git").args(["init", "-q"]).arg(&repository),
    )
    .unwrap_or_else(|message| panic!("{message}"));
    let server = server.arg("--repository").arg(repository);
    const GIT: [&str; 12] = [
        "git_status",
        "git_diff_unstaged",
        "git_diff_staged",
        "git_diff",
        "git_commit",
        "git_add",
        "git_reset",
        "git_log",
        "git_create_branch",
        "git_checkout",
        "git_show",
        "git_branch",
    ];
    let findings = GIT.map(|tool| ("missing_title", tool));
    check(
        &server,
        &Expected {
            server_info: json!({ "name": "mcp-git", "version": "2026.10.19" }),
            protocol: PY_V2,
            decisions: &[
                ("git_status", R),
                ("git_diff_unstaged", R),
                ("git_diff_staged", R),
                ("git_diff", R),
                ("git_commit", B),
                ("git_add", R),
                ("git_reset", R),
                ("git_log", R),
                ("git_create_branch", B),
                ("git_checkout", B),
                ("git_show", R),
                ("git_branch", R),
            ],
            defaulted: &[],
            findings: &findings,
            changed: "git_reset",
        },
    );
}

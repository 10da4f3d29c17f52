//! `mcp-hints verify` against real processes: servers written for these
//! tests on the official Python SDK (tests/fixtures/verify_server.py), whose
//! lies are known, the example `notes` server, and two npm servers
//! (server-memory, server-filesystem). Every server is a stdio process on
//! this machine; nothing leaves loopback.
//!
//! Each run starts a fresh process (some 0.5 s for the Python fixture), so
//! the tests bound their runs and steps; the default settings are timed on
//! `notes` and the npm servers (run with `--nocapture` to see the times).
//! The file takes about a minute on 2 cores.
//!
//! The peers are installed by tests/peers/mod.rs (shared with
//! tests/live_servers.rs), under Cargo's `CARGO_TARGET_TMPDIR`.

mod peers;
mod support;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use peers::{NPM_SERVERS, installed, remove, root};
use serde_json::{Value, json};
use support::notes_server;

/// What one `mcp-hints` run gave.
struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Outcome {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|error| panic!("{error}: not JSON\n{}\n{}", self.stdout, self.stderr))
    }
}

/// `mcp-hints ARGS -- SERVER...` with `env`, stdin closed (not a terminal).
fn mcp_hints(args: &[&str], server: &[OsString], env: &[(&str, &OsStr)]) -> Outcome {
    let began = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(args)
        .arg("--")
        .args(server)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("mcp-hints runs");
    Outcome {
        code: output.status.code().expect("mcp-hints exits"),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
        took: began.elapsed(),
    }
}

/// `python verify_server.py MODES...`.
fn fixture(modes: &[&str]) -> Vec<OsString> {
    let mut command: Vec<OsString> = vec![
        installed().python().into(),
        peers::fixture("verify_server.py").into(),
    ];
    command.extend(modes.iter().map(OsString::from));
    command
}

/// `mcp-hints verify --snapshot snapshot --yes --json EXTRA -- fixture MODES`.
fn verify_fixture(modes: &[&str], extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["verify", "--snapshot", "snapshot", "--yes", "--json"];
    args.extend(extra);
    let outcome = mcp_hints(&args, &fixture(modes), &[]);
    (outcome.code, outcome.json())
}

/// (tool, hint) of every finding.
fn findings(report: &Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no findings array: {report:#}"))
        .iter()
        .map(|finding| {
            (
                finding["tool"].as_str().unwrap().to_owned(),
                finding["hint"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The tools of a finding's sequence, in order.
fn sequence(finding: &Value) -> Vec<&str> {
    finding["sequence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| call["tool"].as_str().unwrap())
        .collect()
}

/// (tool, hint) of every checked hint.
fn checked(report: &Value) -> Vec<(String, String)> {
    report["checked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|checked| {
            (
                checked["tool"].as_str().unwrap().to_owned(),
                checked["hint"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(tool, hint)| ((*tool).to_owned(), (*hint).to_owned()))
        .collect()
}

const HONEST: [&str; 4] = ["get_item", "set_setting", "append_item", "snapshot"];

/// The one finding of a server with one lie: its tool and hint, and no
/// honest tool among the findings.
fn the_lie<'a>(report: &'a Value, tool: &str, hint: &str) -> &'a Value {
    assert_eq!(findings(report), pairs(&[(tool, hint)]), "{report:#}");
    &report["findings"][0]
}

// ---------------------------------------------------------------- lies

#[test]
fn a_read_only_tool_that_logs_is_found_with_one_call() {
    let (code, report) = verify_fixture(&["read-only-logs"], &["--runs", "3", "--steps", "10"]);
    assert_eq!(code, 1, "{report:#}");
    let finding = the_lie(&report, "lookup", "readOnlyHint");
    assert_eq!(sequence(finding), ["lookup"], "{finding:#}");
    let change = &finding["difference"][0];
    assert_eq!(change["path"], "/log/0", "{finding:#}");
    assert_eq!(change.get("before"), None);
    assert_eq!(
        change["after"], finding["sequence"][0]["arguments"]["name"],
        "the log holds the name looked up"
    );
    assert_eq!(finding["before"]["log"], json!([]));
}

#[test]
fn an_idempotent_tool_that_counts_is_found_by_calling_it_twice() {
    let (code, report) = verify_fixture(&["idempotent-counts"], &["--runs", "3", "--steps", "10"]);
    assert_eq!(code, 1, "{report:#}");
    let finding = the_lie(&report, "bump", "idempotentHint");
    // The last two calls are the same call: the repeat is what changed.
    assert_eq!(sequence(finding), ["bump", "bump"], "{finding:#}");
    assert_eq!(
        finding["difference"],
        json!([{ "path": "/counter", "before": 1, "after": 2 }])
    );
}

#[test]
fn an_additive_tool_that_replaces_is_found_on_a_list_that_is_not_empty() {
    let (code, report) = verify_fixture(&["additive-replaces"], &["--runs", "3", "--steps", "10"]);
    assert_eq!(code, 1, "{report:#}");
    let finding = the_lie(&report, "replace_items", "destructiveHint");
    let calls = sequence(finding);
    // One call to put an item there (either tool), then the replace.
    assert_eq!(calls.len(), 2, "{finding:#}");
    assert!(
        ["append_item", "replace_items"].contains(&calls[0]),
        "{finding:#}"
    );
    assert_eq!(calls[1], "replace_items");
    let change = &finding["difference"][0];
    assert_eq!(change["path"], "/items/0", "{finding:#}");
    assert_eq!(
        change["before"],
        finding["sequence"][0]["arguments"]["text"]
    );
    assert_eq!(change["after"], finding["sequence"][1]["arguments"]["text"]);
}

#[test]
fn every_lie_at_once_is_found_and_shown_like_rustc() {
    let outcome = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "snapshot",
            "--yes",
            "--runs",
            "4",
            "--steps",
            "12",
        ],
        &fixture(&["read-only-logs", "idempotent-counts", "additive-replaces"]),
        &[],
    );
    assert_eq!(outcome.code, 1, "{}{}", outcome.stdout, outcome.stderr);
    let text = &outcome.stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("server: verify-fixture 1.0.0 (MCP server `"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("protocol: 2026-07-28 via server/discover"),
        "{text}"
    );
    assert_eq!(
        lines[3],
        "snapshot: `snapshot` {}; seed 0, 4 runs of 12 steps"
    );
    for (hint, tool, claim) in [
        (
            "readOnlyHint",
            "lookup",
            "is declared read-only (readOnlyHint true), but its last call changed the snapshot",
        ),
        (
            "idempotentHint",
            "bump",
            "is declared idempotent (idempotentHint true), but calling it again at once with the same arguments changed the snapshot",
        ),
        (
            "destructiveHint",
            "replace_items",
            "is declared additive (destructiveHint false), but its last call removed or changed what was there",
        ),
    ] {
        let heading = format!("error[{hint}]: `{tool}` {claim}");
        assert!(lines.contains(&heading.as_str()), "{heading}\n{text}");
    }
    assert!(text.contains("  1 | bump {}\n  2 | bump {}\n   = snapshot: before -> after\n       /counter: 1 -> 2\n"), "{text}");
    let summary = lines
        .iter()
        .find(|line| line.contains(" hints checked on "))
        .unwrap_or_else(|| panic!("no summary\n{text}"));
    assert!(
        summary.starts_with("7 hints checked on 7 tools in 4 runs ("),
        "{summary}"
    );
    assert!(
        summary.ends_with(" s): 3 findings; 7 unchecked"),
        "{summary}"
    );
    assert!(
        text.ends_with(
            "unchecked:\n  openWorldHint of `append_item`, `bump`, `get_item`, `lookup`, \
             `replace_items`, `set_setting`, `snapshot`: not observable from here\n"
        ),
        "{text}"
    );
}

// ---------------------------------------------------------------- honest

#[test]
fn honest_tools_are_never_flagged_across_twenty_seeds() {
    // Two at a time: the machine has two cores, and each run is a process.
    let seeds: Vec<u64> = (0..20).collect();
    std::thread::scope(|scope| {
        for pair in seeds.chunks(10) {
            scope.spawn(move || {
                for seed in pair {
                    let seed = seed.to_string();
                    let (code, report) = verify_fixture(
                        &["honest"],
                        &["--seed", &seed, "--runs", "1", "--steps", "12"],
                    );
                    assert_eq!(code, 0, "seed {seed}: {report:#}");
                    assert_eq!(findings(&report), [], "seed {seed}");
                    assert_eq!(report["seed"], json!(seed.parse::<u64>().unwrap()));
                    for (tool, _) in checked(&report) {
                        assert!(HONEST.contains(&tool.as_str()), "{tool}");
                    }
                }
            });
        }
    });
    // Beside the lies too, at the default settings: only the lies are found.
    let (code, report) = verify_fixture(
        &["read-only-logs", "idempotent-counts", "additive-replaces"],
        &["--seed", "11"],
    );
    assert_eq!(code, 1);
    let mut found = findings(&report);
    found.sort();
    assert_eq!(
        found,
        pairs(&[
            ("bump", "idempotentHint"),
            ("lookup", "readOnlyHint"),
            ("replace_items", "destructiveHint"),
        ])
    );
    let mut honest = checked(&report);
    honest.retain(|(tool, _)| HONEST.contains(&tool.as_str()));
    honest.sort();
    assert_eq!(
        honest,
        pairs(&[
            ("append_item", "destructiveHint"),
            ("get_item", "readOnlyHint"),
            ("set_setting", "idempotentHint"),
            ("snapshot", "readOnlyHint"),
        ]),
        "every honest hint was checked, and held"
    );
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let modes = ["read-only-logs", "idempotent-counts", "additive-replaces"];
    let args = ["--seed", "7", "--runs", "3", "--steps", "10"];
    let (first_code, first) = verify_fixture(&modes, &args);
    let (second_code, second) = verify_fixture(&modes, &args);
    assert_eq!(first_code, 1);
    assert_eq!(second_code, 1);
    assert_eq!(first, second);
    // Another seed draws other calls.
    let (_, other) = verify_fixture(&modes, &["--seed", "8", "--runs", "3", "--steps", "10"]);
    assert_ne!(first["findings"], other["findings"]);
}

#[test]
fn a_snapshot_given_only_as_json_text_is_read_from_the_text() {
    let (code, report) = verify_fixture(
        &["read-only-logs", "--snapshot-text"],
        &["--runs", "2", "--steps", "8"],
    );
    assert_eq!(code, 1, "{report:#}");
    let finding = the_lie(&report, "lookup", "readOnlyHint");
    assert_eq!(finding["difference"][0]["path"], "/log/0");
}

#[test]
fn a_skipped_tool_is_never_called_and_its_hints_unchecked() {
    let (code, report) = verify_fixture(
        &["additive-replaces"],
        &[
            "--skip",
            "replace_*",
            "--skip",
            "[gs]et_*",
            "--runs",
            "2",
            "--steps",
            "10",
        ],
    );
    assert_eq!(code, 0, "{report:#}");
    let skipped: Vec<(&str, &str, &str)> = report["unchecked"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|unchecked| unchecked["hint"] != "openWorldHint")
        .map(|unchecked| {
            (
                unchecked["tool"].as_str().unwrap(),
                unchecked["hint"].as_str().unwrap(),
                unchecked["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        skipped,
        [
            (
                "get_item",
                "readOnlyHint",
                "never called: it matches skip `[gs]et_*`"
            ),
            (
                "replace_items",
                "destructiveHint",
                "never called: it matches skip `replace_*`"
            ),
            (
                "set_setting",
                "idempotentHint",
                "never called: it matches skip `[gs]et_*`"
            ),
        ],
        "{report:#}"
    );
    assert_eq!(
        checked(&report),
        pairs(&[
            ("append_item", "destructiveHint"),
            ("snapshot", "readOnlyHint")
        ])
    );
}

// ---------------------------------------------------------------- bad input

#[test]
fn an_unknown_snapshot_tool_is_named_with_the_closest() {
    let outcome = mcp_hints(
        &["verify", "--snapshot", "snapshots", "--yes"],
        &fixture(&["honest"]),
        &[],
    );
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .contains("--snapshot snapshots: MCP server `")
            && outcome.stderr.contains(
                "` has no such tool (did you mean `snapshot`?); its tools: get_item, set_setting, \
             append_item, snapshot\n"
            ),
        "{}",
        outcome.stderr
    );
}

#[test]
fn a_snapshot_tool_that_is_not_read_only_is_refused() {
    let outcome = mcp_hints(
        &["verify", "--snapshot", "append_item", "--yes"],
        &fixture(&["honest"]),
        &[],
    );
    assert_eq!(outcome.code, 2);
    assert_eq!(
        outcome.stderr,
        "error: --snapshot append_item: a snapshot must not change what it reads: append_item \
         is not declared read-only (readOnlyHint false declared); name a read-only tool that \
         returns the state\n"
    );
}

#[test]
fn a_snapshot_that_fails_ends_the_run() {
    // get_item without an index answers with isError.
    let outcome = mcp_hints(
        &["verify", "--snapshot", "get_item", "--yes", "--runs", "1"],
        &fixture(&["honest"]),
        &[],
    );
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
    assert!(
        outcome.stderr.contains(
            "the snapshot tool `get_item` answered with an error result (isError true): \
             \"no item at None\""
        ),
        "{}",
        outcome.stderr
    );
}

#[test]
fn a_server_that_dies_mid_sequence_is_exit_2_with_the_sequence() {
    let mut server = fixture(&["honest"]);
    server.extend(["--die-after".into(), "3".into()]);
    let outcome = mcp_hints(&["verify", "--snapshot", "snapshot", "--yes"], &server, &[]);
    assert_eq!(outcome.code, 2, "{}", outcome.stdout);
    let lines: Vec<&str> = outcome.stderr.lines().collect();
    assert!(
        lines[0].starts_with("error: MCP server `")
            && lines[0].ends_with("` failed in run 1, after 3 calls:"),
        "{}",
        outcome.stderr
    );
    for (at, line) in lines[1..4].iter().enumerate() {
        assert!(
            line.starts_with(&format!("  {} | ", at + 1)),
            "{}",
            outcome.stderr
        );
    }
    assert!(lines[4].contains("exited (exit status: 3) before answering `tools/call`"));
    assert!(
        outcome.stderr.contains("verify_server: dying on call 3"),
        "the server's stderr is quoted: {}",
        outcome.stderr
    );
    // With --json, the same message as `{"error": ...}`.
    let outcome = mcp_hints(
        &["verify", "--snapshot", "snapshot", "--yes", "--json"],
        &server,
        &[],
    );
    assert_eq!(outcome.code, 2);
    let error = outcome.json()["error"].as_str().unwrap().to_owned();
    assert!(error.contains("after 3 calls:\n  1 | "), "{error}");
}

#[test]
fn a_schema_nothing_satisfies_is_unchecked_not_a_crash() {
    let (code, report) = verify_fixture(&["honest", "unsatisfiable"], &["--runs", "2"]);
    assert_eq!(code, 0, "{report:#}");
    let unchecked: Vec<(String, String, String)> = report["unchecked"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|unchecked| unchecked["hint"] != "openWorldHint")
        .map(|unchecked| {
            (
                unchecked["tool"].as_str().unwrap().to_owned(),
                unchecked["hint"].as_str().unwrap().to_owned(),
                unchecked["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let not = "never called: no arguments meet its inputSchema (at /properties/name: `not` of \
               a schema every value meets)";
    let never = "never called: no arguments meet its inputSchema (at /properties/x: the schema \
                 is `false`)";
    assert_eq!(
        unchecked,
        [
            ("impossible".into(), "destructiveHint".into(), not.into()),
            ("impossible".into(), "idempotentHint".into(), not.into()),
            ("never".into(), "readOnlyHint".into(), never.into()),
        ]
    );
    assert!(
        !checked(&report)
            .iter()
            .any(|(tool, _)| tool == "impossible" || tool == "never")
    );
}

#[test]
fn without_yes_and_a_terminal_nothing_is_called() {
    // A server that dies on its first call: had verify called anything, the
    // error would say so.
    let mut server = fixture(&["honest"]);
    server.extend(["--die-after".into(), "1".into()]);
    let outcome = mcp_hints(
        &["verify", "--snapshot", "snapshot", "--skip", "set_*"],
        &server,
        &[],
    );
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .starts_with("error: verify calls every writing tool of MCP server `")
            && outcome.stderr.ends_with(
                "` (1 tool: `append_item`) with generated arguments; its state may change. stdin \
                 is not a terminal to ask on: pass --yes to go ahead\n"
            ),
        "{}",
        outcome.stderr
    );
}

#[test]
fn bad_examples_skips_resets_and_targets_are_exit_2() {
    let dir = scratch("bad-input");
    let server = fixture(&["honest"]);
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let cases = [
        (
            write("not-json.json", "{"),
            "not JSON: EOF while parsing an object at line 1 column 1",
        ),
        (
            write("array.json", "[]"),
            "must be a JSON object of tool names to arrays of argument objects",
        ),
        (
            write("element.json", r#"{"append_item": [{"text": "a"}, 3]}"#),
            "`append_item`'s element 1 must be an object of arguments; it is a number",
        ),
        (
            write("unknown.json", r#"{"append_items": [{"text": "a"}]}"#),
            "names `append_items`, which MCP server `",
        ),
    ];
    for (path, message) in &cases {
        let outcome = mcp_hints(
            &[
                "verify",
                "--snapshot",
                "snapshot",
                "--yes",
                "--examples",
                path,
            ],
            &server,
            &[],
        );
        assert_eq!(outcome.code, 2, "{path}");
        assert!(
            outcome
                .stderr
                .starts_with(&format!("error: --examples {path}: "))
                && outcome.stderr.contains(message),
            "{path}: {}",
            outcome.stderr
        );
    }
    let unknown = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "snapshot",
            "--yes",
            "--examples",
            &cases[3].0,
        ],
        &server,
        &[],
    );
    assert!(
        unknown.stderr.contains("(did you mean `append_item`?)"),
        "{}",
        unknown.stderr
    );

    let outcome = mcp_hints(
        &["verify", "--snapshot", "snapshot", "--yes", "--skip", "[a-"],
        &server,
        &[],
    );
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .starts_with("error: --skip [a-: `[a-` is not a glob pattern"),
        "{}",
        outcome.stderr
    );

    let outcome = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "snapshot",
            "--yes",
            "--reset",
            "echo gone >&2; exit 4",
        ],
        &server,
        &[],
    );
    assert_eq!(outcome.code, 2);
    assert!(
        outcome
            .stderr
            .contains("--reset `echo gone >&2; exit 4` failed (exit status: 4):\n  gone"),
        "{}",
        outcome.stderr
    );

    // Saved pages cannot be called: no FILE argument.
    let page = support::corpus("servers/server-memory.json");
    let outcome = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["verify", "--snapshot", "read_graph", "--yes"])
        .arg(page)
        .output()
        .unwrap();
    assert_eq!(outcome.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&outcome.stderr).contains("unexpected argument"));
    let outcome = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["verify", "--snapshot", "read_graph", "--yes"])
        .output()
        .unwrap();
    assert_eq!(outcome.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&outcome.stderr),
        "error: no server given: pass --url URL or -- COMMAND ARGS...\n"
    );
}

// ---------------------------------------------------------------- real servers

/// An empty scratch directory of this process for `name`, its path
/// resolved (server-filesystem compares resolved paths).
fn scratch(name: &str) -> PathBuf {
    let dir = root()
        .join("scratch")
        .join(format!("verify-{name}-{}", std::process::id()));
    remove(&dir).unwrap();
    fs::create_dir_all(&dir).unwrap();
    fs::canonicalize(&dir).unwrap()
}

/// `node <the package's bin script>`.
fn npm_server(package: &str) -> Vec<OsString> {
    let (_, _, bin) = NPM_SERVERS
        .iter()
        .find(|(name, ..)| *name == package)
        .unwrap();
    let dir = installed().node_modules.join(package);
    let manifest: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    let script = manifest["bin"][bin].as_str().unwrap();
    vec!["node".into(), dir.join(script).into()]
}

fn say(what: &str, outcome: &Outcome) {
    peers::say(&format!("{what}: {:.1} s", outcome.took.as_secs_f64()));
}

#[test]
fn the_notes_example_verifies_clean_at_the_default_settings() {
    let notes = notes_server();
    let outcome = mcp_hints(
        &["verify", "--snapshot", "list_notes", "--yes"],
        &[notes.into()],
        &[],
    );
    say("notes at the default settings", &outcome);
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
    let summary = outcome
        .stdout
        .lines()
        .rev()
        .find(|line| line.contains(" checked on "))
        .unwrap();
    assert!(
        summary.starts_with("7 hints checked on 6 tools in 10 runs (")
            && summary.ends_with(": 0 findings; 5 unchecked"),
        "{}",
        outcome.stdout
    );
}

/// `notes --http 127.0.0.1:0`, killed when dropped.
struct NotesOverHttp {
    child: std::process::Child,
    url: String,
}

impl NotesOverHttp {
    fn start() -> NotesOverHttp {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new(notes_server())
            .args(["--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("notes starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines.next().expect("notes prints its address").unwrap();
            if let Some(url) = line.strip_prefix("notes: serving MCP over streamable HTTP at ") {
                break url.to_owned();
            }
        };
        NotesOverHttp { child, url }
    }
}

impl Drop for NotesOverHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_url_server_gets_a_new_session_per_run() {
    // One notebook for every session: the state carries over from run to
    // run, and every hint still holds on it.
    let server = NotesOverHttp::start();
    let outcome = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "list_notes",
            "--yes",
            "--json",
            "--runs",
            "3",
            "--url",
            &server.url,
        ],
        &[],
        &[],
    );
    let report = outcome.json();
    assert_eq!(outcome.code, 0, "{report:#}");
    assert_eq!(report["target"]["kind"], "live");
    assert_eq!(report["runs"], 3);
    assert_eq!(checked(&report).len(), 7, "{report:#}");
}

#[test]
fn server_memory_verifies_clean() {
    let dir = scratch("memory");
    let file = dir.join("memory.jsonl");
    let reset = format!("rm -f '{}'", file.display());
    let outcome = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "read_graph",
            "--reset",
            &reset,
            "--yes",
            "--json",
            "--timeout",
            "120",
        ],
        &npm_server("@modelcontextprotocol/server-memory"),
        &[("MEMORY_FILE_PATH", file.as_os_str())],
    );
    say("server-memory at the default settings", &outcome);
    let report = outcome.json();
    assert_eq!(outcome.code, 0, "{report:#}");
    let mut tools = checked(&report);
    tools.sort();
    assert_eq!(
        tools,
        pairs(&[
            ("add_observations", "destructiveHint"),
            ("create_entities", "destructiveHint"),
            ("create_relations", "destructiveHint"),
            ("delete_entities", "idempotentHint"),
            ("delete_observations", "idempotentHint"),
            ("delete_relations", "idempotentHint"),
            ("open_nodes", "readOnlyHint"),
            ("read_graph", "readOnlyHint"),
            ("search_nodes", "readOnlyHint"),
        ]),
        "{report:#}"
    );
}

#[test]
fn server_filesystem_verifies_with_examples_inside_its_directory() {
    let dir = scratch("filesystem");
    let allowed = dir.join("allowed");
    fs::create_dir_all(&allowed).unwrap();
    let top = allowed.to_str().unwrap();
    let at = |name: &str| format!("{top}/{name}");
    let examples = json!({
        "write_file": [
            { "path": at("a.txt"), "content": "alpha" },
            { "path": at("sub/b.txt"), "content": "beta" },
        ],
        "edit_file": [{ "path": at("a.txt"), "edits": [{ "oldText": "alpha", "newText": "gamma" }] }],
        "create_directory": [{ "path": at("sub") }, { "path": at("sub/deeper") }],
        "move_file": [{ "source": at("a.txt"), "destination": at("c.txt") }],
        "read_file": [{ "path": at("a.txt") }],
        "read_text_file": [{ "path": at("a.txt") }],
        "read_media_file": [{ "path": at("a.txt") }],
        "read_multiple_files": [{ "paths": [at("a.txt"), at("c.txt")] }],
        "list_directory": [{ "path": top }],
        "list_directory_with_sizes": [{ "path": top }],
        "directory_tree": [{ "path": top }],
        "search_files": [{ "path": top, "pattern": "*.txt" }],
        "get_file_info": [{ "path": at("a.txt") }],
    });
    let examples_file = dir.join("examples.json");
    fs::write(&examples_file, examples.to_string()).unwrap();
    let reset = format!("rm -rf '{top}' && mkdir '{top}'");
    let snapshot_args = json!({ "path": top }).to_string();
    let mut server = npm_server("@modelcontextprotocol/server-filesystem");
    server.push(allowed.clone().into());
    let outcome = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "directory_tree",
            "--snapshot-args",
            &snapshot_args,
            "--examples",
            examples_file.to_str().unwrap(),
            "--reset",
            &reset,
            "--yes",
            "--json",
            "--timeout",
            "120",
        ],
        &server,
        &[],
    );
    say("server-filesystem at the default settings", &outcome);
    let report = outcome.json();
    assert_eq!(outcome.code, 0, "{report:#}");
    let tools = checked(&report);
    for expected in [
        ("write_file", "idempotentHint"),
        ("create_directory", "destructiveHint"),
        ("create_directory", "idempotentHint"),
        ("directory_tree", "readOnlyHint"),
        ("list_directory", "readOnlyHint"),
    ] {
        assert!(
            tools.contains(&(expected.0.into(), expected.1.into())),
            "{expected:?}: {report:#}"
        );
    }
    assert!(Path::new(top).exists());
}

// ------------------------------------------------------ hostile servers

#[test]
fn a_schema_that_asks_for_gigabytes_leaves_its_tool_unchecked() {
    // Drawn as asked, `minLength: 4000000000` aborted the process (memory
    // allocation failed).
    let (code, report) = verify_fixture(&["honest", "huge"], &["--runs", "2", "--steps", "10"]);
    assert_eq!(code, 0, "{report:#}");
    let reasons: Vec<(String, String)> = report["unchecked"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|unchecked| unchecked["hint"] != "openWorldHint")
        .filter(|unchecked| ["huge", "big"].contains(&unchecked["tool"].as_str().unwrap()))
        .map(|unchecked| {
            (
                unchecked["tool"].as_str().unwrap().to_owned(),
                unchecked["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let text = "never called: no arguments meet its inputSchema (at /properties/text: minLength \
                4000000000 is above the longest string verify draws (65536 characters))";
    let items = "never called: no arguments meet its inputSchema (at /properties/items: minItems \
                 100000000 is above the most items verify draws in an array (1000))";
    assert_eq!(
        reasons,
        [
            ("big".to_owned(), items.to_owned()),
            ("huge".to_owned(), text.to_owned()),
            ("huge".to_owned(), text.to_owned()),
        ],
        "{report:#}"
    );
}

/// `verify --snapshot snapshot --yes --runs 1 --steps 3` against
/// raw_server.py: tools `snapshot` (an empty state) and `lookup`, both
/// read-only, `lookup` answering `call` each time.
fn verify_raw(name: &str, call: &str) -> Outcome {
    let tool = |name: &str| {
        json!({"name": name, "inputSchema": {"type": "object"},
               "annotations": {"readOnlyHint": true, "openWorldHint": false}})
    };
    let list = json!({"tools": [tool("snapshot"), tool("lookup")]});
    let line = |result: &str| format!(r#"{{"jsonrpc": "2.0", "id": $ID, "result": {result}}}"#);
    let script = json!({
        "tools/list": line(&list.to_string()),
        "tools/call": {
            "snapshot": line(r#"{"content": [{"type": "text", "text": "{\"items\": []}"}]}"#),
            "lookup": line(call),
        },
    });
    let dir = scratch(name);
    let file = dir.join("script.json");
    fs::write(&file, script.to_string()).unwrap();
    let server: Vec<OsString> = vec![
        "python3".into(),
        peers::fixture("raw_server.py").into(),
        file.into(),
    ];
    mcp_hints(
        &[
            "verify",
            "--snapshot",
            "snapshot",
            "--yes",
            "--runs",
            "1",
            "--steps",
            "3",
            "--timeout",
            "20",
        ],
        &server,
        &[],
    )
}

#[test]
fn a_call_result_that_is_no_call_tool_result_is_an_invalid_response_named() {
    let cases = [
        (
            "content-string",
            r#"{"content": "found"}"#,
            "`content` is a string, not an array",
        ),
        (
            "is-error-yes",
            r#"{"content": [], "isError": "yes"}"#,
            "`isError` is a string, not a boolean",
        ),
        (
            "no-content",
            r#"{"structuredContent": {"a": 1}}"#,
            "it has no `content`",
        ),
    ];
    for (name, call, field) in cases {
        let outcome = verify_raw(name, call);
        assert_eq!(
            outcome.code, 2,
            "{name}: {}{}",
            outcome.stdout, outcome.stderr
        );
        let expected =
            format!("`lookup` answered tools/call with an invalid CallToolResult: {field}\n");
        assert!(
            outcome.stderr.starts_with("error: MCP server `")
                && outcome.stderr.contains(" failed in run 1, after ")
                && outcome.stderr.contains(" | lookup {}\n`lookup` answered")
                && outcome.stderr.ends_with(&expected),
            "{name}: {}",
            outcome.stderr
        );
    }
    // A well-formed result is a call that succeeded.
    let outcome = verify_raw(
        "well-formed",
        r#"{"content": [{"type": "text", "text": "x"}]}"#,
    );
    assert_eq!(outcome.code, 0, "{}{}", outcome.stdout, outcome.stderr);
}

#[test]
fn a_tool_list_that_changes_between_runs_is_a_finding() {
    let dir = scratch("relist");
    let starts = dir.join("starts");
    let mut server = fixture(&["honest"]);
    server.extend(["--relist".into(), starts.into()]);
    let outcome = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "snapshot",
            "--yes",
            "--json",
            "--runs",
            "2",
            "--steps",
            "10",
        ],
        &server,
        &[],
    );
    let report = outcome.json();
    assert_eq!(outcome.code, 1, "{report:#}");
    // The first list (the first process) declared get_item read-only; run
    // 1's process (the second) lists it as a write.
    assert_eq!(
        report["listChanges"],
        json!([{"run": 1, "tool": "get_item", "change": "hints", "hints": [
            {"hint": "readOnlyHint", "was": true, "now": false},
        ]}]),
        "{report:#}"
    );
    // Not called while its hints were other than verified.
    assert!(
        !checked(&report).iter().any(|(tool, _)| tool == "get_item"),
        "{report:#}"
    );
    // Counted afresh: the first list read-only again.
    let mut server = fixture(&["honest"]);
    server.extend(["--relist".into(), dir.join("starts-text").into()]);
    let text = mcp_hints(
        &[
            "verify",
            "--snapshot",
            "snapshot",
            "--yes",
            "--runs",
            "1",
            "--steps",
            "5",
        ],
        &server,
        &[],
    );
    assert_eq!(text.code, 1, "{}", text.stdout);
    assert!(
        text.stdout.contains(
            "error[tools/list]: `get_item` is listed in run 1 with other hints than in the list \
             verified (readOnlyHint true -> false): it was not called in that run\n"
        ),
        "{}",
        text.stdout
    );
}

// ------------------------------------------------------------ progress

/// `mcp-hints ARGS` under a pseudo-terminal of 200 columns (Python's `pty`):
/// stdout and stderr both go to it, and everything written comes back as
/// the bytes the terminal got, with the exit status.
fn on_a_terminal(args: &[&str], server: &[OsString]) -> (i32, String) {
    const PTY: &str = r#"
import fcntl, os, pty, struct, sys, termios
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
out = b""
while True:
    try:
        data = os.read(fd, 65536)
    except OSError:
        break
    if not data:
        break
    out += data
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let output = Command::new("python3")
        .args(["-c", PTY, env!("CARGO_BIN_EXE_mcp-hints")])
        .args(args)
        .arg("--")
        .args(server)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs");
    (
        output.status.code().expect("python3 exits"),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn progress_is_shown_on_a_terminal_and_nowhere_else() {
    let args = [
        "verify",
        "--snapshot",
        "snapshot",
        "--yes",
        "--runs",
        "2",
        "--steps",
        "5",
    ];
    let server = fixture(&["honest"]);
    let (code, terminal) = on_a_terminal(&args, &server);
    assert_eq!(code, 0, "{terminal}");
    for said in [
        "waiting for server/discover or initialize, then tools/list (--timeout 30 s each) from \
         MCP server `",
        "run 1/2: starting the server and reading its tool list",
        "run 2/2: ",
        " calls sent; checking `",
    ] {
        assert!(terminal.contains(said), "{said}: {terminal:?}");
    }
    // The report is there too, after the progress line was cleared.
    assert!(terminal.contains(" checked on "), "{terminal:?}");
    // --quiet: the report alone.
    let mut quiet = args.to_vec();
    quiet.push("--quiet");
    let (code, terminal) = on_a_terminal(&quiet, &server);
    assert_eq!(code, 0, "{terminal}");
    assert!(!terminal.contains("run 1/2"), "{terminal:?}");
    assert!(terminal.contains(" checked on "), "{terminal:?}");
    // stderr not a terminal: nothing on it at all, and the JSON on stdout
    // as ever.
    let outcome = mcp_hints(&args, &server, &[]);
    assert_eq!(outcome.code, 0, "{}", outcome.stderr);
    assert_eq!(outcome.stderr, "");
    assert!(!outcome.stdout.contains("run 1/2"), "{}", outcome.stdout);
}

#[test]
fn audit_shows_it_waits_for_a_server_that_never_answers() {
    // `sleep` reads nothing and writes nothing: a server that never answers.
    let server: Vec<OsString> = vec!["sleep".into(), "30".into()];
    let args = ["audit", "--timeout", "2"];
    let (code, terminal) = on_a_terminal(&args, &server);
    assert_eq!(code, 2, "{terminal}");
    assert!(
        terminal.contains(
            "waiting for server/discover or initialize, then tools/list (--timeout 2 s each) \
             from MCP server `sleep 30`"
        ),
        "{terminal:?}"
    );
    let outcome = mcp_hints(&args, &server, &[]);
    assert_eq!(outcome.code, 2);
    assert!(
        outcome.stderr.starts_with("error: ") && outcome.stderr.lines().count() >= 1,
        "{}",
        outcome.stderr
    );
    assert!(
        !outcome.stderr.contains("waiting for"),
        "{}",
        outcome.stderr
    );
}

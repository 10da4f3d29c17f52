//! Every file of the corpus (real servers' tools/list pages and reported
//! faults, in tests/corpus/) through the `mcp-hints` command, with the right
//! answer of tests/corpus/README.md asserted exactly.

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::{corpus, decisions, mcp_hints};

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// `mcp-hints audit --json [--trusted] FILE`: the exit status and report.
fn audit(file: &str, trusted: bool) -> (i32, Value) {
    let path = corpus(file);
    let mut args = vec!["audit", "--json"];
    if trusted {
        args.push("--trusted");
    }
    args.push(path.to_str().unwrap());
    let output = mcp_hints(&args);
    let report = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|error| panic!("{error}: {}{}", stdout(&output), stderr(&output)));
    (output.status.code().unwrap(), report)
}

fn expect(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, decision)| ((*name).to_owned(), (*decision).to_owned()))
        .collect()
}

fn provenances(tool: &Value) -> Vec<(String, bool, String)> {
    [
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
    ]
    .iter()
    .map(|hint| {
        (
            (*hint).to_owned(),
            tool["hints"][hint]["value"].as_bool().unwrap(),
            tool["hints"][hint]["provenance"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
    })
    .collect()
}

const SERVERS: [&str; 7] = [
    "servers/server-everything.json",
    "servers/server-everything-2025.9.25.json",
    "servers/server-filesystem.json",
    "servers/server-memory.json",
    "servers/mcp-server-git.json",
    "servers/mcp-server-time.json",
    "servers/mcp-server-fetch.json",
];

const R: &str = "resend";
const B: &str = "read_back_first";

#[test]
fn untrusted_audit_reads_back_every_tool_of_every_server() {
    let mut total = 0;
    for file in SERVERS {
        let (code, report) = audit(file, false);
        assert_eq!(code, 1, "{file}");
        assert_eq!(report["trusted"], false);
        for (name, decision) in decisions(&report) {
            assert_eq!(decision, B, "{file}: {name}");
            total += 1;
        }
    }
    assert_eq!(total, 13 + 10 + 14 + 9 + 12 + 2 + 1);
}

#[test]
fn old_server_everything_declares_nothing() {
    let (code, report) = audit("servers/server-everything-2025.9.25.json", true);
    assert_eq!(code, 1);
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 10);
    for tool in tools {
        assert_eq!(tool["decision"], B);
        assert_eq!(
            provenances(tool),
            vec![
                ("readOnlyHint".into(), false, "defaulted".into()),
                ("destructiveHint".into(), true, "defaulted".into()),
                ("idempotentHint".into(), false, "defaulted".into()),
                ("openWorldHint".into(), true, "defaulted".into()),
            ]
        );
    }
    assert_eq!(report["summary"]["readBackFirst"], 10);
}

#[test]
fn server_everything_declares_every_hint() {
    let (code, report) = audit("servers/server-everything.json", true);
    assert_eq!(code, 1);
    for tool in report["tools"].as_array().unwrap() {
        for (hint, _, provenance) in provenances(tool) {
            assert_eq!(provenance, "declared", "{} {hint}", tool["name"]);
        }
    }
    assert_eq!(
        decisions(&report),
        expect(&[
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
        ])
    );
}

#[test]
fn filesystem_memory_git_time_fetch_trusted() {
    let (_, filesystem) = audit("servers/server-filesystem.json", true);
    assert_eq!(
        decisions(&filesystem),
        expect(&[
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
        ])
    );
    // Read-only tools leave destructiveHint and idempotentHint undeclared.
    let read_file = &filesystem["tools"][0];
    assert_eq!(
        provenances(read_file),
        vec![
            ("readOnlyHint".into(), true, "declared".into()),
            ("destructiveHint".into(), true, "defaulted".into()),
            ("idempotentHint".into(), false, "defaulted".into()),
            ("openWorldHint".into(), false, "declared".into()),
        ]
    );

    let (_, memory) = audit("servers/server-memory.json", true);
    assert_eq!(
        decisions(&memory),
        expect(&[
            ("create_entities", B),
            ("create_relations", B),
            ("add_observations", B),
            ("delete_entities", R),
            ("delete_observations", R),
            ("delete_relations", R),
            ("read_graph", R),
            ("search_nodes", R),
            ("open_nodes", R),
        ])
    );
    let additive = &memory["tools"][0]["reason"];
    assert!(
        additive
            .as_str()
            .unwrap()
            .contains("a resend duplicates it"),
        "{additive}"
    );

    let (_, git) = audit("servers/mcp-server-git.json", true);
    assert_eq!(
        decisions(&git),
        expect(&[
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
        ])
    );

    let (code, time) = audit("servers/mcp-server-time.json", true);
    assert_eq!(code, 0, "every tool may be resent");
    assert_eq!(
        decisions(&time),
        expect(&[("get_current_time", R), ("convert_time", R)])
    );

    let (code, fetch) = audit("servers/mcp-server-fetch.json", true);
    assert_eq!(code, 0);
    assert_eq!(decisions(&fetch), expect(&[("fetch", R)]));
    assert_eq!(
        fetch["tools"][0]["hints"]["openWorldHint"],
        serde_json::json!({ "value": true, "provenance": "declared" })
    );
}

#[test]
fn null_annotations_are_accepted_as_absent() {
    let (code, report) = audit("cases/annotations-null.json", true);
    assert_eq!(code, 1);
    let tool = &report["tools"][0];
    assert_eq!(tool["name"], "run_code");
    assert_eq!(tool["decision"], B);
    assert!(
        provenances(tool)
            .iter()
            .all(|(_, _, provenance)| provenance == "defaulted")
    );
}

#[test]
fn omitted_destructive_hint_is_true_by_default() {
    let (code, report) = audit("cases/annotations-omitted-destructive.json", true);
    assert_eq!(code, 1);
    let tool = &report["tools"][0];
    assert_eq!(tool["name"], "post_message");
    assert_eq!(tool["decision"], B);
    assert_eq!(
        provenances(tool)[..3],
        [
            ("readOnlyHint".into(), false, "declared".into()),
            ("destructiveHint".into(), true, "defaulted".into()),
            ("idempotentHint".into(), false, "defaulted".into()),
        ]
    );
}

#[test]
fn saved_pages_ending_in_an_empty_cursor_are_incomplete() {
    let path = corpus("cases/cursor-empty-string-last-page.json");
    for command in ["audit", "lint", "pin"] {
        let output = mcp_hints(&[command, path.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        // No report, and no lock: nothing on stdout, whichever the command.
        assert!(output.stdout.is_empty(), "{command}: {output:?}");
        let message = stderr(&output);
        assert!(
            message.contains("incomplete") && message.contains("nextCursor \"\""),
            "{message}"
        );
    }
}

#[test]
fn both_pages_are_read_in_order() {
    let (code, report) = audit("cases/two-pages-first-only-clients.json", true);
    assert_eq!(code, 1);
    assert_eq!(report["pages"], 2);
    assert_eq!(
        decisions(&report),
        expect(&[("p1_read", R), ("p2_delete", B)])
    );
    assert_eq!(report["tools"][1]["page"], 2);
}

#[test]
fn a_name_on_two_pages_is_refused() {
    let path = corpus("cases/duplicate-name-across-pages.json");
    let output = mcp_hints(&["audit", "--json", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains(
            "tool `create_branch` appears on page 1 and again on page 2: which definition holds \
             is unknown"
        ),
        "{message}"
    );
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert!(report["error"].as_str().unwrap().contains("create_branch"));
}

#[test]
fn names_that_collide_after_normalizing_are_both_kept_and_linted() {
    let (_, report) = audit("cases/names-collide-after-normalizing.json", true);
    assert_eq!(
        decisions(&report),
        expect(&[("get.user", R), ("get_user", B)])
    );
    let path = corpus("cases/names-collide-after-normalizing.json");
    let output = mcp_hints(&["lint", "--json", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let collisions: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|finding| finding["rule"] == "colliding_tool_names")
        .collect();
    assert_eq!(collisions.len(), 1);
    assert_eq!(
        collisions[0]["message"],
        "tool names `get.user` and `get_user` collide as `get_user` once `.` is replaced by `_`"
    );
    let output = mcp_hints(&["lint", "--deny", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).contains("error[colliding_tool_names]"));
}

/// (rule, tool) of every lint finding of a file.
fn findings(file: &str) -> Vec<(String, String)> {
    let path = corpus(file);
    let output = mcp_hints(&["lint", "--json", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap().to_owned(),
                finding["tool"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn lint_findings_of_every_server() {
    assert_eq!(findings("servers/server-everything.json"), vec![]);
    // Read-only tools that leave destructiveHint and idempotentHint
    // undeclared are not a finding: the spec says they mean nothing there.
    assert_eq!(findings("servers/server-filesystem.json"), vec![]);
    assert_eq!(findings("servers/server-memory.json"), vec![]);
    let old = findings("servers/server-everything-2025.9.25.json");
    assert_eq!(old.len(), 20);
    for name in [
        "echo",
        "add",
        "longRunningOperation",
        "printEnv",
        "sampleLLM",
        "getTinyImage",
        "annotatedMessage",
        "getResourceReference",
        "getResourceLinks",
        "structuredContent",
    ] {
        assert!(
            old.contains(&("undeclared_hints".into(), name.into())),
            "{name}"
        );
        assert!(
            old.contains(&("missing_title".into(), name.into())),
            "{name}"
        );
    }
    for (file, tools) in [
        ("servers/mcp-server-git.json", 12),
        ("servers/mcp-server-time.json", 2),
        ("servers/mcp-server-fetch.json", 1),
    ] {
        let found = findings(file);
        assert_eq!(found.len(), tools, "{file}: {found:?}");
        assert!(
            found.iter().all(|(rule, _)| rule == "missing_title"),
            "{file}"
        );
    }
}

#[test]
fn lint_text_reads_like_rustc() {
    let path = corpus("servers/server-everything-2025.9.25.json");
    let output = mcp_hints(&["lint", "--allow", "missing_title", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    let first: Vec<&str> = text.lines().take(4).collect();
    assert_eq!(
        first,
        [
            "warning[undeclared_hints]: tool `echo` leaves readOnlyHint, destructiveHint, \
             idempotentHint and openWorldHint undeclared",
            "  --> tool `echo` (page 1)",
            "   = note: clients will assume readOnlyHint false, destructiveHint true, \
             idempotentHint false and openWorldHint true: they will never resend `echo` after a \
             timeout (they must read back first), may ask for confirmation before every call \
             and will treat it as reaching external entities",
            "   = help: declare readOnlyHint true, or both destructiveHint and idempotentHint; \
             and openWorldHint in the tool's `annotations`",
        ]
    );
    assert!(
        text.ends_with("warning: 10 findings in 10 of 10 tools\n"),
        "{text}"
    );
}

#[test]
fn audit_table_for_people() {
    let path = corpus("cases/two-pages-first-only-clients.json");
    let output = mcp_hints(&["audit", "--trusted", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(!text.contains('\u{1b}'), "no colour off a terminal");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("saved pages: "));
    assert_eq!(
        lines[1],
        "trust: trusted (--trusted): annotations decide resends"
    );
    assert_eq!(lines[2], "2 tools in 2 pages");
    assert_eq!(
        lines[4],
        "TOOL       DECISION         readOnlyHint  destructiveHint  idempotentHint   \
         openWorldHint   REASON"
    );
    assert!(lines[5].starts_with(
        "p1_read    resend           true          true (default)   false (default)  true \
         (default)  readOnlyHint is true (declared)"
    ));
    assert!(lines[6].starts_with("p2_delete  read_back_first  false         true     "));
    assert_eq!(
        lines.last().unwrap(),
        &"2 tools: 1 resend, 1 read back first"
    );
}

/// `mcp-hints ARGS` run on a pseudo-terminal by util-linux's `script`, with
/// `env` set: its exit status (`script -e` passes it on) and what the
/// terminal showed.
fn on_a_terminal(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
    let line: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_mcp-hints"))
        .chain(args.iter().copied())
        .map(quote)
        .collect();
    let mut command = Command::new("script");
    command
        .args(["-qec", &line.join(" "), "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .env("TERM", "xterm-256color")
        .stdin(std::process::Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command
        .output()
        .expect("util-linux's `script` runs (it gives the command a terminal)");
    (output.status.code(), stdout(&output))
}

#[test]
fn colour_on_a_terminal_unless_no_color() {
    let path = corpus("cases/two-pages-first-only-clients.json");
    let path = path.to_str().unwrap();
    // `--quiet`: the progress line, drawn on the same terminal when the run
    // is slow (a loaded machine), is cleared with an escape of its own;
    // this test is about the report's colour.
    let (code, shown) = on_a_terminal(&["audit", "--quiet", "--trusted", path], &[]);
    assert_eq!(code, Some(1), "{shown:?}");
    assert!(shown.contains("\u{1b}[1m\u{1b}[32mresend"), "{shown:?}");
    assert!(shown.contains("2 tools in 2 pages"), "{shown:?}");
    let (code, plain) = on_a_terminal(
        &["audit", "--quiet", "--trusted", path],
        &[("NO_COLOR", "1")],
    );
    assert_eq!(code, Some(1), "{plain:?}");
    assert!(plain.contains("2 tools in 2 pages"), "{plain:?}");
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    // The JSON report never carries colour, not even on a terminal.
    let (_, json) = on_a_terminal(&["audit", "--quiet", "--json", path], &[]);
    assert!(json.contains("\"readBackFirst\""), "{json:?}");
    assert!(!json.contains('\u{1b}'), "{json:?}");
}

#[test]
fn colour_only_when_asked_for_or_on_a_terminal() {
    let path = corpus("cases/two-pages-first-only-clients.json");
    let forced = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--trusted", path.to_str().unwrap()])
        .env_remove("NO_COLOR")
        .env("CLICOLOR_FORCE", "1")
        .output()
        .unwrap();
    let text = stdout(&forced);
    assert!(text.contains("\u{1b}[1m\u{1b}[32mresend"), "{text:?}");
    // The JSON report never carries colour.
    let json = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["audit", "--json", path.to_str().unwrap()])
        .env("CLICOLOR_FORCE", "1")
        .output()
        .unwrap();
    assert!(!stdout(&json).contains('\u{1b}'));
}

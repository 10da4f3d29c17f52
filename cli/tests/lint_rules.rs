//! The lint rules that the corpus of real servers never triggers, each on a
//! page made for it, with every finding asserted exactly; and collisions
//! among 16,000 tools, found in one pass.

mod support;

use std::path::PathBuf;

use serde_json::{Value, json};
use support::mcp_hints;

/// Every hint declared, and a title: a tool no rule finds anything in.
fn clean_tool(name: &str) -> Value {
    json!({
        "name": name,
        "title": "A tool",
        "inputSchema": { "type": "object" },
        "annotations": { "readOnlyHint": true, "openWorldHint": false },
    })
}

/// `mcp-hints lint --json` on one page of `tools`: each finding as (rule,
/// tool, page, message, note, help).
fn lint(name: &str, tools: Vec<Value>) -> Vec<(String, String, u64, String, Value, String)> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lint-rules");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join(format!("{name}.json"));
    std::fs::write(&page, json!({ "tools": tools }).to_string()).unwrap();
    let output = mcp_hints(&["lint", "--json", page.to_str().unwrap()]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            let text = |key: &str| finding[key].as_str().unwrap().to_owned();
            (
                text("rule"),
                text("tool"),
                finding["page"].as_u64().unwrap(),
                text("message"),
                finding["note"].clone(),
                text("help"),
            )
        })
        .collect()
}

fn finding(
    rule: &str,
    tool: &str,
    message: &str,
    note: Option<&str>,
    help: &str,
) -> (String, String, u64, String, Value, String) {
    (
        rule.to_owned(),
        tool.to_owned(),
        1,
        message.to_owned(),
        note.map_or(Value::Null, |note| json!(note)),
        help.to_owned(),
    )
}

#[test]
fn contradicting_hints_are_found() {
    let peek = json!({
        "name": "peek",
        "title": "Peek",
        "annotations": {
            "readOnlyHint": true,
            "destructiveHint": true,
            "idempotentHint": false,
            "openWorldHint": false,
        },
    });
    assert_eq!(
        lint("contradicting", vec![clean_tool("fine"), peek]),
        [
            finding(
                "contradicting_hints",
                "peek",
                "tool `peek` declares readOnlyHint true and destructiveHint true",
                None,
                "a read-only tool destroys nothing: drop destructiveHint, or set \
                 readOnlyHint false if it writes",
            ),
            finding(
                "contradicting_hints",
                "peek",
                "tool `peek` declares readOnlyHint true and idempotentHint false",
                None,
                "a read-only tool has no effect to repeat, so it is idempotent: drop \
                 idempotentHint, or set readOnlyHint false if it writes",
            ),
        ]
    );
}

#[test]
fn misplaced_and_misspelt_hints_are_found() {
    let save = json!({
        "name": "save",
        "title": "Save",
        "readOnlyHint": false,
        "annotations": {
            "destructiveHint": false,
            "idempotentHint": true,
            "open_world_hint": false,
        },
    });
    assert_eq!(
        lint("misplaced", vec![save]),
        [
            finding(
                "undeclared_hints",
                "save",
                "tool `save` leaves openWorldHint undeclared",
                Some(
                    "clients will assume openWorldHint true: they will treat it as reaching \
                     external entities"
                ),
                "declare openWorldHint in the tool's `annotations`",
            ),
            finding(
                "misplaced_hints",
                "save",
                "tool `save` has `readOnlyHint` outside `annotations`",
                Some(
                    "clients read hints only from `annotations`: readOnlyHint stays at its \
                     default, false"
                ),
                "move it into `annotations` as `readOnlyHint`",
            ),
            finding(
                "misplaced_hints",
                "save",
                "tool `save` has `annotations.open_world_hint`, which is not a hint",
                Some("clients ignore `open_world_hint`: openWorldHint stays at its default, true"),
                "spell it `openWorldHint`",
            ),
        ]
    );
}

#[test]
fn names_the_spec_rejects_are_found_and_shown_escaped() {
    let long = "x".repeat(129);
    let found = lint(
        "invalid-names",
        vec![
            clean_tool(""),
            clean_tool("a b/c"),
            clean_tool(&long),
            clean_tool("get\u{202e}resu"),
            clean_tool("get.user-2_OK"),
        ],
    );
    let note = Some("clients may reject the tool or fail to call it");
    let help = "use 1 to 128 of `A-Z a-z 0-9 _ - .` (spec 2025-11-25, tool names)";
    assert_eq!(
        found,
        [
            finding("invalid_tool_name", "", "tool name `` is empty", note, help),
            finding(
                "invalid_tool_name",
                "a b/c",
                "tool name `a b/c` contains ` ` and `/`",
                note,
                help,
            ),
            finding(
                "invalid_tool_name",
                &long,
                &format!("tool name `{long}` is 129 characters long, more than 128"),
                note,
                help,
            ),
            // The JSON keeps the name as served; messages are escaped.
            finding(
                "invalid_tool_name",
                "get\u{202e}resu",
                r"tool name `get\u{202e}resu` contains `\u{202e}`",
                note,
                help,
            ),
        ]
    );
}

#[test]
fn collisions_among_16000_tools_are_found_exactly_in_one_pass() {
    const PAIRS: usize = 8_000;
    // `t.N` for N falling, then `t_N`: the findings follow the first tool of
    // each pair, not the order of the names.
    let dotted = (0..PAIRS).rev().map(|n| clean_tool(&format!("t.{n}")));
    let plain = (0..PAIRS).map(|n| clean_tool(&format!("t_{n}")));
    let found = lint("collisions-16000", dotted.chain(plain).collect());
    let note = "`.` is not allowed in function names by clients that require \
                ^[a-zA-Z0-9_-]{1,64}$; they replace it, and then call one tool for the other";
    let help = "rename the tools so that they differ in letters, digits, `_` or `-`";
    let expected: Vec<_> = (0..PAIRS)
        .rev()
        .map(|n| {
            finding(
                "colliding_tool_names",
                &format!("t.{n}"),
                &format!(
                    "tool names `t.{n}` and `t_{n}` collide as `t_{n}` once `.` is replaced by \
                     `_`"
                ),
                Some(note),
                help,
            )
        })
        .collect();
    assert_eq!(found.len(), PAIRS);
    assert!(found == expected, "first difference: {:?}", {
        found
            .iter()
            .zip(&expected)
            .find(|(found, expected)| found != expected)
    });
}

/// `_meta["mcp-hints/provenance"]` as `#[tool]` writes it: on a tool that
/// left a hint to its default, each of the four hints named.
fn provenance(defaulted: &[&str]) -> Value {
    let hints = [
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
    ];
    let map: serde_json::Map<String, Value> = hints
        .iter()
        .map(|hint| {
            let source = if defaulted.contains(hint) {
                "defaulted"
            } else {
                "declared"
            };
            ((*hint).to_owned(), Value::from(source))
        })
        .collect();
    json!({ "mcp-hints/provenance": map })
}

#[test]
fn undeclared_hints_of_a_server_built_with_the_tool_macro_name_its_flags() {
    let append = json!({
        "name": "append",
        "title": "Append",
        "inputSchema": { "type": "object" },
        "annotations": {
            "readOnlyHint": false, "destructiveHint": false,
            "idempotentHint": false, "openWorldHint": true,
        },
        "_meta": provenance(&["idempotentHint", "openWorldHint"]),
    });
    let helps = |tools: Vec<Value>| -> Vec<String> {
        lint("tool-macro", tools)
            .into_iter()
            .filter(|finding| finding.0 == "undeclared_hints")
            .map(|finding| finding.5)
            .collect()
    };
    assert_eq!(
        helps(vec![append.clone(), clean_tool("read")]),
        [
            "add `#[tool(idempotent)]` or `#[tool(non_idempotent)]`, and `#[tool(open_world)]` or \
          `#[tool(closed_world)]` (or `#[tool_router(closed_world)]` for every tool) (the \
          server's `_meta` shows it was built with mcp-hints' `#[tool]`; flags combine: \
          `#[tool(non_idempotent, additive)]`)"
        ]
    );
    // The same tool without the `_meta`, or beside a tool whose provenance
    // is not as `#[tool]` writes it (a gateway's: every hint `declared`, or
    // `asserted`): the wire's fields.
    let mut plain = append.clone();
    plain.as_object_mut().unwrap().remove("_meta");
    let annotations = plain["annotations"].as_object_mut().unwrap();
    annotations.remove("idempotentHint");
    annotations.remove("openWorldHint");
    let mut gatewayed = clean_tool("other");
    gatewayed["_meta"] = provenance(&[]);
    let mut asserted = clean_tool("asserted");
    asserted["_meta"] = provenance(&["openWorldHint"]);
    asserted["_meta"]["mcp-hints/provenance"]["readOnlyHint"] = json!("asserted");
    let wire = "declare idempotentHint and openWorldHint in the tool's `annotations`";
    assert_eq!(helps(vec![plain]), [wire]);
    assert_eq!(helps(vec![append.clone(), gatewayed]), [wire]);
    let found = helps(vec![append, asserted]);
    assert_eq!(found[0], wire, "{found:?}");
}

//! The collection of trees: cursors, limits, refusals, decisions.

use super::*;
use crate::hints::Hint;
use crate::policy::Decision;
use serde_json::json;

fn tool(name: &str) -> Value {
    json!({ "name": name, "inputSchema": { "type": "object" } })
}

fn collect(pages: Vec<Value>) -> Result<ToolList, CollectError> {
    collect_pages(pages, CollectOptions::default())
}

#[test]
fn empty_string_cursor_is_followed_like_any_other() {
    let list = collect(vec![
        json!({ "tools": [tool("a")], "nextCursor": "" }),
        json!({ "tools": [tool("b")], "nextCursor": null }),
    ])
    .unwrap();
    let names: Vec<&str> = list.tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(list.tools[1].page, 2);
}

#[test]
fn saved_pages_ending_in_a_cursor_are_incomplete() {
    let error = collect(vec![json!({ "tools": [tool("a")], "nextCursor": "" })]).unwrap_err();
    assert_eq!(
        error,
        CollectError::Incomplete {
            pages: 1,
            cursor: String::new()
        }
    );
    assert_eq!(
        error.to_string(),
        "the list is incomplete: page 1, the last one given, still has nextCursor \"\", so \
         more tools follow"
    );
}

#[test]
fn a_repeated_cursor_is_an_error_not_a_loop() {
    let mut collector = Collector::new(CollectOptions::default());
    let page = json!({ "tools": [], "nextCursor": "" });
    assert_eq!(collector.push_page(page.clone()).unwrap(), Some(""));
    assert_eq!(
        collector.push_page(page).unwrap_err(),
        CollectError::RepeatedCursor {
            cursor: String::new(),
            first_page: 1,
            page: 2
        }
    );
}

#[test]
fn the_page_cap_stops_an_endless_list() {
    let options = CollectOptions {
        max_pages: 3,
        ..CollectOptions::default()
    };
    let mut collector = Collector::new(options);
    for page in 1..=2 {
        let cursor = page.to_string();
        assert!(
            collector
                .push_page(json!({ "tools": [], "nextCursor": cursor }))
                .is_ok()
        );
    }
    let error = collector
        .push_page(json!({ "tools": [], "nextCursor": "3" }))
        .unwrap_err();
    assert_eq!(
        error,
        CollectError::PageCap {
            max_pages: 3,
            cursor: "3".into()
        }
    );
}

#[test]
fn jsonrpc_responses_are_unwrapped_and_errors_refused() {
    let list = collect(vec![
        json!({ "jsonrpc": "2.0", "id": 1, "result": { "tools": [tool("a")], "nextCursor": "x" } }),
        json!({ "result": { "tools": [tool("b")] } }),
    ])
    .unwrap();
    assert_eq!(list.tools.len(), 2);
    let error = collect(vec![json!({
        "jsonrpc": "2.0", "id": 1, "error": { "code": -32602, "message": "bad cursor" }
    })])
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "page 1 is a JSON-RPC error response: -32602 \"bad cursor\""
    );
}

#[test]
fn malformed_pages_and_tools_name_the_page_tool_and_field() {
    let cases = [
        (
            json!([]),
            "page 1 is an array, not a tools/list result object",
        ),
        (json!({}), "page 1: `tools` is missing, not an array"),
        (
            json!({ "tools": {} }),
            "page 1: `tools` is an object, not an array",
        ),
        (
            json!({ "tools": [], "nextCursor": 2 }),
            "page 1: `nextCursor` is a number, not a string",
        ),
        (
            json!({ "tools": [tool("a"), "b"] }),
            "page 1, tool 2: is a string, not an object",
        ),
        (
            json!({ "tools": [{ "inputSchema": {} }] }),
            "page 1, tool 1: `name` is missing, not a string",
        ),
        (
            json!({ "tools": [{ "name": 7 }] }),
            "page 1, tool 1: `name` is a number, not a string",
        ),
        (
            json!({ "tools": [{ "name": "a", "annotations": { "readOnlyHint": "yes" } }] }),
            "page 1, tool `a`: `annotations.readOnlyHint` is a string, not a boolean",
        ),
        (
            json!({ "tools": [{ "name": "a", "annotations": "read-only" }] }),
            "page 1, tool `a`: `annotations` is a string, not an object",
        ),
        (
            json!({ "tools": [tool("a"), tool("a")] }),
            "tool `a` appears twice on page 1: which definition holds is unknown",
        ),
    ];
    for (page, message) in cases {
        assert_eq!(collect(vec![page]).unwrap_err().to_string(), message);
    }
}

#[test]
fn a_page_after_the_last_is_refused() {
    let error = collect(vec![
        json!({ "tools": [tool("a")] }),
        json!({ "tools": [tool("b")] }),
    ])
    .unwrap_err();
    assert_eq!(error, CollectError::PageAfterEnd { page: 2 });
}

#[test]
fn titles_hints_fingerprints_and_definitions_are_kept_on_request() {
    let page = json!({ "tools": [
        { "name": "a", "title": "A", "annotations": { "readOnlyHint": true } },
        { "name": "b", "annotations": { "title": "B" } },
        { "name": "c", "title": "  " },
    ]});
    let plain = collect(vec![page.clone()]).unwrap();
    assert!(plain.tools[0].fingerprint.is_none() && plain.tools[0].definition.is_none());
    let titles: Vec<Option<&str>> = plain
        .tools
        .iter()
        .map(|tool| tool.title.as_deref())
        .collect();
    assert_eq!(titles, [Some("A"), Some("B"), None]);
    assert!(plain.tools[0].hints.get(Hint::ReadOnly).value);

    let options = CollectOptions {
        fingerprints: true,
        keep_definitions: true,
        ..CollectOptions::default()
    };
    let full = collect_pages(vec![page], options).unwrap();
    assert!(full.tools.iter().all(|tool| tool.fingerprint.is_some()));
    assert_eq!(full.tools[2].definition.as_ref().unwrap()["title"], "  ");
}

#[test]
fn the_list_decides_and_refuses_unknown_tools() {
    let list = collect(vec![json!({ "tools": [
        { "name": "read", "annotations": { "readOnlyHint": true } },
    ]})])
    .unwrap();
    assert_eq!(
        list.decide("read", Trust::Trusted).decision,
        Decision::Resend
    );
    assert_eq!(
        list.decide("read", Trust::Untrusted).decision,
        Decision::ReadBackFirst
    );
    let unknown = list.decide("write", Trust::Trusted);
    assert_eq!(unknown.decision, Decision::Refuse);
    assert!(unknown.reason.contains("unknown tool"));
}

//! The collection of text: it agrees with the tree's, and refuses what
//! only text can say (members given twice, values no tree holds).

use super::*;
use serde_json::json;

/// What a listed tool comes to: name, page, title, hints.
type Summary = (String, usize, Option<String>, ToolHints);

/// Collects `pages` both as trees and as text, asserting the two agree.
fn both(pages: &[Value]) -> Result<Vec<Summary>, CollectError> {
    let summary = |list: ToolList| {
        list.tools
            .into_iter()
            .map(|tool| (tool.name, tool.page, tool.title, tool.hints))
            .collect::<Vec<_>>()
    };
    let mut tree = Collector::new(CollectOptions::default());
    let mut text = Collector::new(CollectOptions::default());
    let mut tree_result = Ok(None);
    let mut text_result = Ok(None);
    for page in pages {
        tree_result = tree.push_page(page.clone()).map(|c| c.map(str::to_owned));
        text_result = text
            .push_page_json(&page.to_string())
            .map(|c| c.map(str::to_owned));
        assert_eq!(tree_result, text_result, "{page}");
        if tree_result.is_err() {
            break;
        }
    }
    tree_result?;
    text_result?;
    let (tree, text) = (tree.finish(), text.finish());
    assert_eq!(tree.is_ok(), text.is_ok());
    let (tree, text) = (summary(tree?), summary(text?));
    assert_eq!(tree, text);
    Ok(tree)
}

#[test]
fn text_and_tree_agree_on_good_pages() {
    let tools = both(&[
        json!({ "jsonrpc": "2.0", "id": 4, "result": { "tools": [
            { "name": "a\u{e9}\\\"", "title": "A", "description": "d", "inputSchema": { "type": "object" },
              "annotations": { "readOnlyHint": true, "destructiveHint": null } },
            { "name": "b", "annotations": { "title": "B", "idempotentHint": false },
              "_meta": { "mcp-hints/provenance": { "idempotentHint": "defaulted" } } },
        ], "nextCursor": "" } }),
        json!({ "tools": [{ "name": "c", "annotations": null, "title": 3 }], "nextCursor": null }),
    ])
    .unwrap();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0].2.as_deref(), Some("A"));
    assert_eq!(tools[1].2.as_deref(), Some("B"));
    assert_eq!(tools[2].2, None);
}

#[test]
fn text_and_tree_agree_on_every_fault() {
    let faults = [
        vec![json!([])],
        vec![json!({})],
        vec![json!({ "tools": {} })],
        vec![json!({ "tools": [], "nextCursor": 2 })],
        vec![json!({ "tools": [{ "name": "a" }, "b"] })],
        vec![json!({ "tools": [{ "inputSchema": {} }] })],
        vec![json!({ "tools": [{ "name": 7 }] })],
        vec![json!({ "tools": [{ "name": "a", "annotations": { "readOnlyHint": "yes" } }] })],
        vec![json!({ "tools": [{ "name": "a", "annotations": "read-only" }] })],
        vec![json!({ "tools": [{ "name": "a" }, { "name": "a" }] })],
        vec![json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -1, "message": "no" } })],
        vec![
            json!({ "tools": [{ "name": "a" }], "nextCursor": "" }),
            json!({ "tools": [{ "name": "a" }], "nextCursor": "" }),
        ],
        vec![json!({ "tools": [] }), json!({ "tools": [] })],
        vec![json!({ "tools": [], "nextCursor": "x" })],
    ];
    for pages in faults {
        assert!(both(&pages).is_err(), "{pages:?}");
    }
}

#[test]
fn a_null_error_beside_a_result_is_absent_on_every_path() {
    let page = json!({ "tools": [{ "name": "a", "inputSchema": {} }] });
    let response = json!({ "jsonrpc": "2.0", "id": 1, "result": page, "error": null });
    let listed = both(std::slice::from_ref(&response)).unwrap();
    assert_eq!(listed.len(), 1);
    let mut collector = Collector::new(CollectOptions::default());
    assert_eq!(
        collector.push_response_json(&response.to_string(), 1),
        Some(Ok(None)),
        "a live response alike"
    );
    // A null result beside an error is an error response.
    let error = json!({ "jsonrpc": "2.0", "id": 1, "result": null,
                        "error": { "code": -32602, "message": "bad cursor" } });
    assert_eq!(
        both(&[error]).unwrap_err().to_string(),
        "page 1 is a JSON-RPC error response: -32602 \"bad cursor\""
    );
    for (response, refusal) in [
        (
            json!({ "jsonrpc": "2.0", "id": 1, "result": page,
                    "error": { "code": -32602, "message": "m" } }),
            "page 1 is a JSON-RPC response with both `result` and `error`: which one holds \
             is unknown",
        ),
        (
            json!({ "jsonrpc": "2.0", "id": 1, "error": null }),
            "page 1 is a JSON-RPC error response whose `error` is null, not an error object",
        ),
        (
            json!({ "jsonrpc": "2.0", "id": 1, "error": "boom" }),
            "page 1 is a JSON-RPC error response whose `error` is a string, not an error \
             object",
        ),
    ] {
        assert_eq!(
            both(std::slice::from_ref(&response))
                .unwrap_err()
                .to_string(),
            refusal
        );
        let mut collector = Collector::new(CollectOptions::default());
        assert_eq!(collector.push_response_json(&response.to_string(), 1), None);
    }
}

#[test]
fn whole_responses_are_taken_in_one_pass_or_declined_untouched() {
    let page = json!({ "tools": [{ "name": "a", "annotations": { "readOnlyHint": true } }],
                       "nextCursor": "n" });
    let mut collector = Collector::new(CollectOptions::default());
    let response = json!({ "jsonrpc": "2.0", "id": 7, "result": page }).to_string();
    assert_eq!(
        collector.push_response_json(&response, 8),
        None,
        "another id"
    );
    for declined in [
        json!({ "jsonrpc": "2.0", "id": 7, "error": { "code": 1, "message": "m" } }),
        json!({ "jsonrpc": "2.0", "id": 7, "method": "ping" }),
        json!([{ "jsonrpc": "2.0", "id": 7, "result": page }]),
        json!({ "jsonrpc": "2.0", "id": 7, "result": { "tools": ["a"] } }),
    ] {
        assert_eq!(collector.push_response_json(&declined.to_string(), 7), None);
    }
    assert_eq!(collector.pages, 0, "declined responses change nothing");
    assert_eq!(
        collector.push_response_json(&response, 7),
        Some(Ok(Some("n")))
    );
    let repeat = json!({ "jsonrpc": "2.0", "id": 8, "result": page }).to_string();
    assert!(matches!(
        collector.push_response_json(&repeat, 8),
        Some(Err(CollectError::RepeatedCursor { .. }))
    ));
}

#[test]
fn a_member_given_twice_is_refused_not_guessed() {
    let cases = [
        (
            r#"{"tools": [{"name": "a"}, {"name": "b", "name": "c"}]}"#,
            "page 1, tool 2: `name` appears twice: which value holds is unknown",
        ),
        (
            r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": true, "readOnlyHint": false}}]}"#,
            "page 1, tool 1: `annotations.readOnlyHint` appears twice: which value holds is unknown",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "annotations": {}, "annotations": null}]}}"#,
            "page 1, tool 1: `annotations` appears twice: which value holds is unknown",
        ),
        (
            r#"{"tools": [{"name": "a", "description": "Reads.", "description": "Deletes."}]}"#,
            "page 1, tool 1: `description` appears twice: which value holds is unknown",
        ),
        (
            r#"{"tools": [{"name": "a", "inputSchema": {"type": "object"}, "title": "A", "inputSchema": {}}]}"#,
            "page 1, tool 1: `inputSchema` appears twice: which value holds is unknown",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "outputSchema": {}, "outputSchema": null}]}}"#,
            "page 1, tool 1: `outputSchema` appears twice: which value holds is unknown",
        ),
        (
            r#"{"tools": [{"name": "a", "title": "A", "title": "B"}]}"#,
            "page 1, tool 1: `title` appears twice: which value holds is unknown",
        ),
    ];
    for keep_definitions in [false, true] {
        for (text, message) in cases {
            let mut collector = Collector::new(CollectOptions {
                keep_definitions,
                ..CollectOptions::default()
            });
            assert_eq!(
                collector.push_page_json(text).unwrap_err().to_string(),
                message
            );
        }
    }
    // Other members given twice are not the audit's business.
    let mut collector = Collector::new(CollectOptions::default());
    assert!(
        collector
            .push_page_json(r#"{"tools": [{"name": "a", "icons": [], "icons": null}]}"#)
            .is_ok()
    );
}

/// The three ways the command reads pages: audit, lint, pin.
fn every_reading() -> [CollectOptions; 3] {
    let options = |fingerprints, keep_definitions| CollectOptions {
        fingerprints,
        keep_definitions,
        ..CollectOptions::default()
    };
    [
        options(false, false),
        options(false, true),
        options(true, true),
    ]
}

#[test]
fn each_page_keeps_its_fields_from_the_same_pass() {
    let pages = [
        r#"{"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "", "ttlMs": 60000,
            "cacheScope": "public", "resultType": "complete"}"#,
        r#"{"jsonrpc": "2.0", "id": 2, "result": {"tools": [], "_meta": {"k": 1}}}"#,
    ];
    for text_path in [true, false] {
        let mut collector = Collector::new(CollectOptions::default());
        for page in pages {
            if text_path {
                collector.push_page_json(page).unwrap();
            } else {
                collector
                    .push_page(serde_json::from_str(page).unwrap())
                    .unwrap();
            }
        }
        let list = collector.finish().unwrap();
        assert_eq!(
            list.page_fields
                .into_iter()
                .map(Value::Object)
                .collect::<Vec<_>>(),
            [
                json!({"nextCursor": "", "ttlMs": 60000, "cacheScope": "public",
                       "resultType": "complete"}),
                json!({"_meta": {"k": 1}}),
            ],
            "text path: {text_path}"
        );
    }
}

#[test]
fn a_page_that_is_not_a_listing_is_refused_before_its_tools() {
    let page = r#"{"resultType": "input_required", "inputRequests": {}}"#;
    let mut collector = Collector::new(CollectOptions::default());
    let error = collector.push_page_json(page).unwrap_err();
    assert!(matches!(
        &error,
        CollectError::NotComplete { page: 1, result_type } if result_type == "input_required"
    ));
    assert_eq!(
        error.to_string(),
        "page 1 has resultType \"input_required\", not \"complete\": the server did not \
         list its tools"
    );
    for (page, found) in [
        (r#"{"tools": [], "resultType": 1}"#, "a number"),
        (r#"{"tools": [], "resultType": null}"#, "null"),
        (r#"{"tools": [], "resultType": ["complete"]}"#, "an array"),
    ] {
        let message = format!(
            "page 1: `resultType` is {found}, not a string: whether the page is a complete \
             result is unknown"
        );
        let mut collector = Collector::new(CollectOptions::default());
        let error = collector.push_page_json(page).unwrap_err();
        assert_eq!(error.to_string(), message, "{page}");
        let mut collector = Collector::new(CollectOptions::default());
        let error = collector
            .push_page(serde_json::from_str(page).unwrap())
            .unwrap_err();
        assert_eq!(error.to_string(), message, "{page}");
    }
}

#[test]
fn a_page_member_given_twice_is_refused_not_guessed() {
    let cases = [
        (
            r#"{"tools": [{"name": "a"}], "nextCursor": "more", "nextCursor": null}"#,
            "page 1: `nextCursor` appears twice: which value holds is unknown",
        ),
        (
            r#"{"tools": [], "tools": [{"name": "a"}]}"#,
            "page 1: `tools` appears twice: which value holds is unknown",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "2"}, "result": {"tools": []}}"#,
            "page 1: `result` appears twice: which value holds is unknown",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "2", "nextCursor": null}}"#,
            "page 1: `result.nextCursor` appears twice: which value holds is unknown",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}, "error": {"code": 1, "message": "m"}, "error": null}"#,
            "page 1: `error` appears twice: which value holds is unknown",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "id": 2, "result": {"tools": []}}"#,
            "page 1: `id` appears twice: which value holds is unknown",
        ),
        (
            r#"{"pages": [{"tools": []}], "pages": [{"tools": [], "nextCursor": "2"}]}"#,
            "page 1: `pages` appears twice: which value holds is unknown",
        ),
    ];
    for options in every_reading() {
        for (text, message) in cases {
            let mut collector = Collector::new(options.clone());
            let error = collector.push_page_json(text).unwrap_err();
            assert_eq!(error.to_string(), message, "{options:?}");
            // A whole response is refused, not declined into a tree.
            let mut collector = Collector::new(options.clone());
            match collector.push_response_json(text, 1) {
                Some(Err(error)) => assert_eq!(error.to_string(), message),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
    // Members the collection does not read are not its business.
    let mut collector = Collector::new(CollectOptions::default());
    assert_eq!(
        collector
            .push_page_json(r#"{"tools": [], "x": 1, "x": 2, "y": null}"#)
            .unwrap(),
        None
    );
}

#[test]
fn a_value_no_tree_holds_is_refused_by_every_reading_naming_where_it_is() {
    let cases = [
        (
            r#"{"tools": [{"name": "a"}, {"name": "b", "annotations": {"readOnlyHint": true, "x": 1e400}}]}"#,
            "page 1, tool 2: `annotations.x` cannot be read: number out of range at line 1 \
             column 88",
        ),
        (
            r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": 1e400}}]}"#,
            "page 1, tool 1: `annotations.readOnlyHint` cannot be read: number out of range \
             at line 1 column 62",
        ),
        (
            r#"{"tools": [{"name": "a", "description": "\ud800 x"}]}"#,
            "page 1, tool 1: `description` cannot be read: unexpected end of hex escape at \
             line 1 column 48",
        ),
        (
            r#"{"tools": [{"name": "\udc00"}]}"#,
            "page 1, tool 1: `name` cannot be read: lone leading surrogate in hex escape at \
             line 1 column 27",
        ),
        (
            r#"{"tools": [{"name": "a", "inputSchema": {"properties": {"n": {"maximum": -1e400}}}}]}"#,
            "page 1, tool 1: `inputSchema` cannot be read: number out of range at line 1 \
             column 79",
        ),
        (
            r#"{"tools": [{"name": "a", "_meta": {"mcp-hints/provenance": {"readOnlyHint": "\udfff"}}}]}"#,
            "page 1, tool 1: `_meta.mcp-hints/provenance.readOnlyHint` cannot be read: lone \
             leading surrogate in hex escape at line 1 column 83",
        ),
        (
            r#"{"tools": [{"name": "a"}, 2e999]}"#,
            "page 1, tool 2 cannot be read: number out of range at line 1 column 31",
        ),
        (
            r#"{"tools": [{"name": "a", "\udc00": 1}]}"#,
            "page 1, tool 1 cannot be read: lone leading surrogate in hex escape at line 1 \
             column 32",
        ),
        (
            r#"{"tools": [], "nextCursor": 1e400}"#,
            "page 1: `nextCursor` cannot be read: number out of range at line 1 column 33",
        ),
        (
            r#"{"tools": [], "serverNote": ["\ud800 x"]}"#,
            "page 1: `serverNote` cannot be read: unexpected end of hex escape at line 1 \
             column 37",
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "title": 1e400}]}}"#,
            "page 1, tool 1: `title` cannot be read: number out of range at line 1 column 77",
        ),
    ];
    for options in every_reading() {
        for (text, message) in cases {
            let mut collector = Collector::new(options.clone());
            let error = collector.push_page_json(text).unwrap_err();
            assert_eq!(error.to_string(), message, "{options:?}");
        }
    }
    let mut collector = Collector::new(CollectOptions::default());
    let response = r#"{"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "a", "annotations": {"readOnlyHint": true, "idempotentHint": 1e400}}]}}"#;
    match collector.push_response_json(response, 3) {
        Some(Err(error)) => assert_eq!(
            error.to_string(),
            "page 1, tool 1: `annotations.idempotentHint` cannot be read: number out of \
             range at line 1 column 124"
        ),
        other => panic!("{other:?}"),
    }
    // A big number that a float holds is read; cut text is not JSON.
    let mut collector = Collector::new(CollectOptions::default());
    assert!(
        collector
            .push_page_json(r#"{"tools": [{"name": "a", "inputSchema": {"maximum": 1e300}}]}"#)
            .is_ok()
    );
    let mut collector = Collector::new(CollectOptions::default());
    let error = collector
        .push_page_json(r#"{"tools": [{"name": "a", "description": "cut"#)
        .unwrap_err();
    assert!(
        error.to_string().starts_with("page 1 is not JSON: EOF"),
        "{error}"
    );
}

#[test]
fn server_text_in_messages_is_escaped_and_cut() {
    let forged = "a\nerror: forged\u{1b}[31m\u{202e}\u{2066}\u{200f}\u{61c}";
    let shown = r"a\nerror: forged\u{1b}[31m\u{202e}\u{2066}\u{200f}\u{61c}";
    let message = |page: Value| {
        Collector::new(CollectOptions::default())
            .push_page_json(&page.to_string())
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        message(json!({ "tools": [{ "name": forged }, { "name": forged }] })),
        format!("tool `{shown}` appears twice on page 1: which definition holds is unknown")
    );
    assert_eq!(
        message(json!({ "tools": [{ "name": forged, "annotations": { "readOnlyHint": 1 } }] })),
        format!("page 1, tool `{shown}`: `annotations.readOnlyHint` is a number, not a boolean")
    );
    assert_eq!(
        message(json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": 1, "message": forged } })),
        format!("page 1 is a JSON-RPC error response: 1 \"{shown}\"")
    );
    let long = "n".repeat(100_000);
    let error = message(json!({ "tools": [{ "name": long }, { "name": long }] }));
    assert!(error.contains("… (100000 characters)"), "{error}");
    assert!(error.len() < 400, "{} bytes", error.len());
}

#[test]
fn text_that_is_not_json_is_named() {
    let mut collector = Collector::new(CollectOptions::default());
    let error = collector.push_page_json("{\"tools\": [").unwrap_err();
    assert!(
        error.to_string().starts_with("page 1 is not JSON: "),
        "{error}"
    );
}

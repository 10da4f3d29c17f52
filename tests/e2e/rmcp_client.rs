//! End to end with rmcp's own client: the built `notes` server runs as a child
//! process and is driven over stdio, with no mocks in between.
//!
//! Every test runs twice, on a fresh server each time: once over the legacy
//! `initialize` handshake (what `ServiceExt::serve` does) and once over
//! `server/discover` at protocol version 2026-07-28, since the server answers
//! the two differently (result types, cache hints).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use mcp_hints::ToolHints;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResult, ErrorCode, PaginatedRequestParams,
    ProtocolVersion, Tool,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};

/// How long any one exchange with the server may take before the test fails
/// instead of hanging.
const TIMEOUT: Duration = Duration::from_secs(30);

type Client = RunningService<RoleClient, ()>;

/// The two ways a client starts a session with the server.
#[derive(Clone, Copy, Debug)]
enum Lifecycle {
    /// `initialize` / `notifications/initialized`, as `().serve(...)` does.
    Initialize,
    /// `server/discover`, then self-contained requests at 2026-07-28.
    Discover,
}

const LIFECYCLES: [Lifecycle; 2] = [Lifecycle::Initialize, Lifecycle::Discover];

impl fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// One expected tool: name, description (from its doc comment) and the four
/// hints in schema order: readOnly, destructive, idempotent, openWorld.
struct Expected {
    name: &'static str,
    description: &'static str,
    hints: [bool; 4],
}

/// Exactly the tools of `notes` without the `lint-demo` feature, sorted by
/// name (the order rmcp's router lists them in).
const EXPECTED_TOOLS: [Expected; 6] = [
    Expected {
        name: "add_note",
        description: "Add a note once per `request_id`: a resend with the same\n\
                      `request_id` returns the note added the first time.",
        hints: [false, false, true, false],
    },
    Expected {
        name: "append_note",
        description: "Add a note; a resend would add it twice.",
        hints: [false, false, false, false],
    },
    Expected {
        name: "delete_note",
        description: "Delete a note by id; deleting twice has no further effect.",
        hints: [false, true, true, false],
    },
    Expected {
        name: "forecast",
        description: "The weather forecast for a city, from a weather service on the open\n\
                      internet (simulated here: the answer is derived from the name).",
        hints: [true, false, true, true],
    },
    Expected {
        name: "list_notes",
        description: "List every note, oldest first.",
        hints: [true, false, true, false],
    },
    Expected {
        name: "update_note",
        description: "Replace the text of a note; repeating it leaves the same text.",
        hints: [false, true, true, false],
    },
];

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer from the notes server within {TIMEOUT:?}"))
}

/// Spawns a fresh `notes` server and opens a session with it.
async fn connect(lifecycle: Lifecycle) -> Client {
    connect_with(lifecycle, &[]).await
}

/// Spawns a fresh `notes` server with `args` and opens a session with it.
async fn connect_with(lifecycle: Lifecycle, args: &[&str]) -> Client {
    let server = env!("CARGO_BIN_EXE_notes");
    let mut command = tokio::process::Command::new(server);
    command.args(args);
    let transport = TokioChildProcess::new(command)
        .unwrap_or_else(|error| panic!("cannot spawn {server}: {error}"));
    let client = match lifecycle {
        Lifecycle::Initialize => within("initialize", ().serve(transport)).await,
        Lifecycle::Discover => {
            let mode = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            within("server/discover", ().serve_with_lifecycle(transport, mode)).await
        }
    };
    let client =
        client.unwrap_or_else(|error| panic!("{lifecycle}: session start failed: {error}"));
    let info = client.peer_info().expect("the server's info after start");
    assert_eq!(
        info.server_info.as_ref().map(|server| server.name.as_str()),
        Some("notes"),
        "{lifecycle}: serverInfo"
    );
    if let Lifecycle::Discover = lifecycle {
        assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    }
    client
}

/// Ends the session; the child process exits with it.
async fn disconnect(client: Client, lifecycle: Lifecycle) {
    within("shutdown", client.cancel())
        .await
        .unwrap_or_else(|error| panic!("{lifecycle}: shutdown failed: {error}"));
}

fn object(arguments: Value) -> serde_json::Map<String, Value> {
    match arguments {
        Value::Object(map) => map,
        other => panic!("tool arguments must be an object, not {other}"),
    }
}

/// `tools/call`, returning the JSON-RPC outcome as is.
async fn try_call(
    client: &Client,
    name: &'static str,
    arguments: Option<Value>,
) -> Result<CallToolResult, ServiceError> {
    let mut params = CallToolRequestParams::new(name);
    if let Some(arguments) = arguments {
        params = params.with_arguments(object(arguments));
    }
    within(name, client.call_tool(params)).await
}

/// `tools/call` that must get a result (an error result is still a result).
async fn call(client: &Client, name: &'static str, arguments: Value) -> CallToolResult {
    try_call(client, name, Some(arguments))
        .await
        .unwrap_or_else(|error| panic!("{name}: JSON-RPC error instead of a result: {error}"))
}

/// The only content block of a result, which must be text.
fn text(result: &CallToolResult) -> &str {
    match result.content.as_slice() {
        [block] => {
            &block
                .as_text()
                .unwrap_or_else(|| panic!("not a text block: {block:?}"))
                .text
        }
        blocks => panic!("expected exactly one content block, got {blocks:?}"),
    }
}

/// A successful result's structured content, checked against its text twin.
fn success(result: &CallToolResult) -> &Value {
    assert_eq!(result.is_error, Some(false), "isError of {result:?}");
    let structured = result
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structuredContent in {result:?}"));
    let twin: Value = serde_json::from_str(text(result)).expect("the text block is JSON");
    assert_eq!(&twin, structured, "text and structuredContent disagree");
    structured
}

/// A successful result that carries text only.
fn success_text(result: &CallToolResult) -> &str {
    assert_eq!(result.is_error, Some(false), "isError of {result:?}");
    assert_eq!(result.structured_content, None);
    text(result)
}

/// A tool error (`isError: true`), returning its text.
fn tool_error(result: &CallToolResult) -> &str {
    assert_eq!(result.is_error, Some(true), "isError of {result:?}");
    assert_eq!(result.structured_content, None);
    text(result)
}

/// The notes as `list_notes` returns them.
async fn list_notes(client: &Client) -> Value {
    let result = call(client, "list_notes", json!({})).await;
    success(&result)["notes"].clone()
}

#[tokio::test]
async fn tools_list_carries_all_four_hints() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        let tools: Vec<Tool> = within("tools/list", client.list_all_tools())
            .await
            .unwrap_or_else(|error| panic!("{lifecycle}: tools/list failed: {error}"));

        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        let expected_names: Vec<&str> = EXPECTED_TOOLS.iter().map(|tool| tool.name).collect();
        assert_eq!(names, expected_names, "{lifecycle}: the tools listed");

        for (tool, expected) in tools.iter().zip(&EXPECTED_TOOLS) {
            let name = expected.name;
            assert_eq!(
                tool.description.as_deref(),
                Some(expected.description),
                "{lifecycle}: description of {name}"
            );

            // Each hint is `Some` only when its field was on the wire; the
            // serialized form also shows that nothing else (no title) came.
            let annotations = tool
                .annotations
                .as_ref()
                .unwrap_or_else(|| panic!("{lifecycle}: {name} has no annotations"));
            let [read_only, destructive, idempotent, open_world] = expected.hints;
            assert_eq!(
                [
                    annotations.read_only_hint,
                    annotations.destructive_hint,
                    annotations.idempotent_hint,
                    annotations.open_world_hint,
                ],
                expected.hints.map(Some),
                "{lifecycle}: hints of {name} (readOnly, destructive, idempotent, openWorld)"
            );
            assert_eq!(
                serde_json::to_value(annotations).unwrap(),
                json!({
                    "readOnlyHint": read_only,
                    "destructiveHint": destructive,
                    "idempotentHint": idempotent,
                    "openWorldHint": open_world,
                }),
                "{lifecycle}: annotations of {name}"
            );

            // Every hint declared: no provenance `_meta` to mark a default.
            let provenance = tool
                .meta
                .as_ref()
                .and_then(|meta| meta.0.get("mcp-hints/provenance"));
            assert_eq!(provenance, None, "{lifecycle}: provenance _meta of {name}");
            // The runtime's reader agrees: nothing was left to a default.
            assert_eq!(
                ToolHints::of(tool).defaulted(),
                vec![],
                "{lifecycle}: {name}"
            );
        }
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn append_note_assigns_ids_from_one_and_list_notes_shows_them_in_order() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        assert_eq!(
            list_notes(&client).await,
            json!([]),
            "{lifecycle}: a new notebook"
        );

        let first = call(&client, "append_note", json!({ "text": "buy milk" })).await;
        assert_eq!(success(&first), &json!({ "id": 1, "text": "buy milk" }));
        let second = call(&client, "append_note", json!({ "text": "call Ana" })).await;
        assert_eq!(success(&second), &json!({ "id": 2, "text": "call Ana" }));

        assert_eq!(
            list_notes(&client).await,
            json!([
                { "id": 1, "text": "buy milk" },
                { "id": 2, "text": "call Ana" },
            ]),
            "{lifecycle}: both notes, oldest first"
        );

        // Not idempotent: the same text again is a third note.
        let again = call(&client, "append_note", json!({ "text": "buy milk" })).await;
        assert_eq!(success(&again), &json!({ "id": 3, "text": "buy milk" }));
        assert_eq!(list_notes(&client).await.as_array().map(Vec::len), Some(3));
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn update_note_replaces_the_text_and_repeating_it_changes_nothing() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        for text in ["first", "second"] {
            call(&client, "append_note", json!({ "text": text })).await;
        }

        let edit = json!({ "id": 1, "text": "first, revised" });
        let updated = call(&client, "update_note", edit.clone()).await;
        assert_eq!(
            success(&updated),
            &json!({ "id": 1, "text": "first, revised" })
        );
        let after_once = list_notes(&client).await;
        assert_eq!(
            after_once,
            json!([
                { "id": 1, "text": "first, revised" },
                { "id": 2, "text": "second" },
            ]),
            "{lifecycle}: after one update"
        );

        let repeated = call(&client, "update_note", edit).await;
        assert_eq!(
            success(&repeated),
            &json!({ "id": 1, "text": "first, revised" })
        );
        assert_eq!(
            list_notes(&client).await,
            after_once,
            "{lifecycle}: after the resend"
        );
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn update_note_of_a_missing_id_is_a_tool_error() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        call(&client, "append_note", json!({ "text": "only" })).await;

        let result = call(&client, "update_note", json!({ "id": 7, "text": "x" })).await;
        assert_eq!(tool_error(&result), "no note has id 7", "{lifecycle}");
        assert_eq!(
            list_notes(&client).await,
            json!([{ "id": 1, "text": "only" }]),
            "{lifecycle}: nothing changed"
        );
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn delete_note_removes_it_and_a_second_delete_reports_it_already_absent() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        for text in ["keep", "drop"] {
            call(&client, "append_note", json!({ "text": text })).await;
        }

        let deleted = call(&client, "delete_note", json!({ "id": 2 })).await;
        assert_eq!(success_text(&deleted), "deleted note 2", "{lifecycle}");
        let remaining = json!([{ "id": 1, "text": "keep" }]);
        assert_eq!(
            list_notes(&client).await,
            remaining,
            "{lifecycle}: after the delete"
        );

        let again = call(&client, "delete_note", json!({ "id": 2 })).await;
        assert_eq!(
            success_text(&again),
            "note 2 is already absent",
            "{lifecycle}"
        );
        assert_eq!(
            list_notes(&client).await,
            remaining,
            "{lifecycle}: after the resend"
        );

        // Ids are never reused: the next note is 3, not 2.
        let next = call(&client, "append_note", json!({ "text": "new" })).await;
        assert_eq!(success(&next), &json!({ "id": 3, "text": "new" }));
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn forecast_returns_structured_content() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        // Simulated from the name: the byte sum of "Lisbon" is 615, so low =
        // 615 % 15 = 0, high = low + 8 and the summary is entry 615 % 4 = 3
        // of ["sunny", "cloudy", "rain", "windy"].
        let result = call(&client, "forecast", json!({ "city": "Lisbon" })).await;
        assert_eq!(
            success(&result),
            &json!({
                "city": "Lisbon",
                "summary": "windy",
                "high_celsius": 8,
                "low_celsius": 0,
            }),
            "{lifecycle}"
        );
        let again = call(&client, "forecast", json!({ "city": "Lisbon" })).await;
        assert_eq!(
            success(&again),
            success(&result),
            "{lifecycle}: read-only, so stable"
        );
        assert_eq!(
            list_notes(&client).await,
            json!([]),
            "{lifecycle}: no note was made"
        );
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn malformed_arguments_get_a_clear_error_and_the_server_keeps_serving() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        call(&client, "append_note", json!({ "text": "survivor" })).await;

        // rmcp reports arguments that do not deserialize as a tool error
        // (isError: true), not as a JSON-RPC error.
        let missing = call(&client, "append_note", json!({})).await;
        assert_eq!(
            tool_error(&missing),
            "failed to deserialize parameters: missing field `text`",
            "{lifecycle}: missing argument"
        );
        let absent = try_call(&client, "append_note", None)
            .await
            .expect("a tool error, not a JSON-RPC error");
        assert_eq!(
            tool_error(&absent),
            "failed to deserialize parameters: missing field `text`",
            "{lifecycle}: no arguments object at all"
        );
        let wrong_type = call(
            &client,
            "update_note",
            json!({ "id": "seven", "text": "x" }),
        )
        .await;
        assert_eq!(
            tool_error(&wrong_type),
            "failed to deserialize parameters: invalid type: string \"seven\", expected u64",
            "{lifecycle}: wrong type"
        );
        let negative = call(&client, "delete_note", json!({ "id": -1 })).await;
        assert_eq!(
            tool_error(&negative),
            "failed to deserialize parameters: invalid value: integer `-1`, expected u64",
            "{lifecycle}: out of range"
        );

        // Empty text passes deserialization; the tool itself refuses it.
        for (name, arguments) in [
            ("append_note", json!({ "text": "" })),
            ("append_note", json!({ "text": "  \n" })),
            ("update_note", json!({ "id": 1, "text": "" })),
        ] {
            let result = call(&client, name, arguments).await;
            assert_eq!(
                tool_error(&result),
                "`text` must not be empty",
                "{lifecycle}: {name} with empty text"
            );
        }
        let no_city = call(&client, "forecast", json!({ "city": "" })).await;
        assert_eq!(
            tool_error(&no_city),
            "`city` must not be empty",
            "{lifecycle}: forecast with empty city"
        );

        // Still serving, and nothing above touched the notebook.
        assert_eq!(
            list_notes(&client).await,
            json!([{ "id": 1, "text": "survivor" }]),
            "{lifecycle}: state after the bad calls"
        );
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn unknown_tool_gets_a_json_rpc_error_and_the_server_keeps_serving() {
    for lifecycle in LIFECYCLES {
        let client = connect(lifecycle).await;
        call(&client, "append_note", json!({ "text": "survivor" })).await;

        let outcome = try_call(&client, "no_such_tool", Some(json!({}))).await;
        match outcome {
            Err(ServiceError::McpError(error)) => {
                assert_eq!(
                    error.code,
                    ErrorCode::INVALID_PARAMS,
                    "{lifecycle}: {error:?}"
                );
                assert_eq!(error.message, "tool not found", "{lifecycle}");
            }
            other => panic!("{lifecycle}: expected a JSON-RPC error, got {other:?}"),
        }

        assert_eq!(
            list_notes(&client).await,
            json!([{ "id": 1, "text": "survivor" }]),
            "{lifecycle}: state after the unknown tool"
        );
        disconnect(client, lifecycle).await;
    }
}

#[tokio::test]
async fn tools_list_with_a_page_size_comes_in_pages_and_refuses_a_bad_cursor() {
    let expected: Vec<&str> = EXPECTED_TOOLS.iter().map(|tool| tool.name).collect();
    for lifecycle in LIFECYCLES {
        let client = connect_with(lifecycle, &["--page-size", "2"]).await;

        // rmcp's client follows nextCursor to the end.
        let all = within("list_all_tools", client.list_all_tools())
            .await
            .unwrap_or_else(|error| panic!("{lifecycle}: list_all_tools: {error}"));
        let names: Vec<&str> = all.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, expected, "{lifecycle}: every tool, in order");

        // Page by page: two tools a page, nextCursor on all but the last.
        let mut pages: Vec<Vec<String>> = Vec::new();
        let mut cursors: Vec<String> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor
                .clone()
                .map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
            let page = within("tools/list", client.list_tools(params))
                .await
                .unwrap_or_else(|error| panic!("{lifecycle}: page after {cursor:?}: {error}"));
            if let Lifecycle::Discover = lifecycle {
                assert_eq!(page.ttl_ms, Some(0), "{lifecycle}: ttlMs on every page");
                assert_eq!(page.cache_scope, Some(CacheScope::Public), "{lifecycle}");
            }
            pages.push(
                page.tools
                    .iter()
                    .map(|tool| tool.name.to_string())
                    .collect(),
            );
            match page.next_cursor {
                Some(next) => {
                    assert!(
                        !cursors.contains(&next),
                        "{lifecycle}: cursor {next} repeated"
                    );
                    cursors.push(next.clone());
                    cursor = Some(next);
                }
                None => break,
            }
            assert!(pages.len() <= expected.len(), "{lifecycle}: too many pages");
        }
        assert_eq!(
            pages,
            [
                vec!["add_note", "append_note"],
                vec!["delete_note", "forecast"],
                vec!["list_notes", "update_note"],
            ],
            "{lifecycle}: the pages"
        );

        // Garbage, the empty string, and an issued cursor tampered with.
        let tampered = format!("{}x", cursors[0]);
        for bad in ["page-2", "", tampered.as_str()] {
            let params = PaginatedRequestParams::default().with_cursor(Some(bad.to_owned()));
            match within("tools/list", client.list_tools(Some(params))).await {
                Err(ServiceError::McpError(error)) => {
                    assert_eq!(
                        error.code,
                        ErrorCode::INVALID_PARAMS,
                        "{lifecycle}: {error:?}"
                    );
                    assert!(
                        error
                            .message
                            .starts_with(&format!("invalid tools/list cursor {bad:?}: ")),
                        "{lifecycle}: {}",
                        error.message
                    );
                    assert_eq!(
                        error.data.as_ref().map(|data| &data["cursor"]),
                        Some(&json!(bad)),
                        "{lifecycle}: data names the cursor"
                    );
                }
                other => panic!("{lifecycle}: cursor {bad:?}: expected -32602, got {other:?}"),
            }
        }

        // Still serving after the refusals.
        assert_eq!(list_notes(&client).await, json!([]), "{lifecycle}");
        disconnect(client, lifecycle).await;
    }
}

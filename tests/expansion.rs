//! Every form of the macros, compiled as an ordinary test target so that
//! `cargo clippy --all-targets -- -D warnings` checks the expansion.
#![deny(warnings)]

use mcp_hints::rmcp::handler::server::wrapper::{Json, Parameters};
use mcp_hints::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The arguments of `structured`.
#[derive(Deserialize, JsonSchema)]
pub struct Query {
    /// Any text.
    pub q: String,
}

/// What `structured` returns.
#[derive(Serialize, JsonSchema)]
pub struct Answer {
    /// The query's text.
    pub text: String,
}

/// A server with a tool of every form; under `missing_docs` (the workspace's
/// lints), the generated code must document what it makes public.
#[derive(Clone)]
pub struct Everything;

#[tool_router(closed_world, server_handler)]
impl Everything {
    /// Sync, no arguments.
    #[tool(read_only)]
    fn plain(&self) -> String {
        String::new()
    }

    /// Async with parameters and structured output.
    ///
    /// A second paragraph.
    #[tool(additive, non_idempotent)]
    async fn structured(&self, Parameters(query): Parameters<Query>) -> Json<Answer> {
        Json(Answer { text: query.q })
    }

    #[tool(
        destructive,
        idempotent,
        name = "named.tool",
        title = "Named",
        description = "explicit"
    )]
    async fn fallible(&self) -> Result<Json<Answer>, String> {
        Err("no".to_owned())
    }

    #[tool(annotations(read_only_hint = true, open_world_hint = true))]
    async fn rmcp_style(&self) -> String {
        String::new()
    }

    #[tool(read_only, allow(undeclared_hints))]
    fn quiet(&self) {}

    #[doc = include_str!("lib.rs")]
    #[tool(read_only)]
    fn documented_by_macro(&self) {}
}

#[test]
fn every_form_expands_to_a_tool_with_four_hints() {
    let tools = Everything::tool_router().list_all();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "documented_by_macro",
            "named.tool",
            "plain",
            "quiet",
            "rmcp_style",
            "structured"
        ]
    );
    for tool in &tools {
        let a = tool.annotations.as_ref().unwrap();
        assert!(a.read_only_hint.is_some() && a.destructive_hint.is_some());
        assert!(a.idempotent_hint.is_some() && a.open_world_hint.is_some());
    }
    let structured = tools.iter().find(|tool| tool.name == "structured").unwrap();
    assert_eq!(
        structured.description.as_deref(),
        Some("Async with parameters and structured output.\nA second paragraph.")
    );
    let documented = tools
        .iter()
        .find(|tool| tool.name == "documented_by_macro")
        .unwrap();
    assert_eq!(
        documented.description.as_deref(),
        Some(include_str!("lib.rs"))
    );
}

//! One small MCP server written twice, once with `mcp-hints`' macros
//! ([`hints_server`]) and once with rmcp's own ([`rmcp_server`]), and the
//! in-process client both benchmarks use to talk to them.
//!
//! The two servers have the same tools (`add`, `echo`, `get`), the same
//! parameter and output types ([`types`]), the same descriptions and the same
//! four hints on every tool; the only difference on the wire is the
//! `_meta["mcp-hints/provenance"]` object that `mcp-hints` adds to each tool.
//! Both serve their router the way their macros do by default:
//! `Self::tool_router()`, rebuilt for every `tools/call` and `tools/list`.
//!
//! Benchmarks: `benches/tool_call.rs` (round trips) and
//! `src/bin/build_time.rs` (build time of a generated 200-tool server);
//! [`peers`] is what the benchmarks of real processes share
//! (`gateway_bench`, `http_load_bench`, `stdio_bench`).

pub mod peers;

use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServerHandler, ServiceExt};

/// Parameter and output types shared by both servers.
pub mod types {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// The arguments of `get`.
    #[derive(Deserialize, JsonSchema)]
    pub struct GetRequest {
        /// The key to look up.
        pub key: String,
    }

    /// The arguments of `add`.
    #[derive(Deserialize, JsonSchema)]
    pub struct AddRequest {
        /// The first addend.
        pub a: i64,
        /// The second addend.
        pub b: i64,
    }

    /// What `add` returns.
    #[derive(Serialize, JsonSchema)]
    pub struct Sum {
        /// `a + b`, wrapping on overflow.
        pub sum: i64,
    }

    /// The arguments of `echo`.
    #[derive(Deserialize, JsonSchema)]
    pub struct EchoRequest {
        /// The text to send back.
        pub text: String,
    }

    /// The read-only key-value store behind `get`.
    #[derive(Clone)]
    pub struct Store(Arc<BTreeMap<String, String>>);

    impl Default for Store {
        fn default() -> Self {
            let entries = [("alpha", "1"), ("beta", "2"), ("gamma", "3")];
            Self(Arc::new(
                entries
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value.to_owned()))
                    .collect(),
            ))
        }
    }

    impl Store {
        /// The value stored under `key`, or a sentence saying there is none.
        pub fn get(&self, key: &str) -> String {
            self.0
                .get(key)
                .cloned()
                .unwrap_or_else(|| format!("no value for `{key}`"))
        }
    }
}

/// The server written with `#[mcp_hints::tool_router]`, `#[mcp_hints::tool]`
/// and `#[mcp_hints::tool_handler]`, every hint declared.
pub mod hints_server {
    use mcp_hints::{tool, tool_handler, tool_router};
    use rmcp::handler::server::wrapper::{Json, Parameters};

    use crate::types::{AddRequest, EchoRequest, GetRequest, Store, Sum};

    /// The server; its tools read [`Store`].
    #[derive(Default)]
    pub struct HintsServer {
        store: Store,
    }

    #[tool_router(closed_world, vis = "pub")]
    impl HintsServer {
        /// Look up the value stored under a key.
        #[tool(read_only)]
        async fn get(&self, Parameters(GetRequest { key }): Parameters<GetRequest>) -> String {
            self.store.get(&key)
        }

        /// Add two integers.
        #[tool(read_only)]
        async fn add(&self, Parameters(AddRequest { a, b }): Parameters<AddRequest>) -> Json<Sum> {
            Json(Sum {
                sum: a.wrapping_add(b),
            })
        }

        /// Send the text back unchanged.
        #[tool(read_only)]
        async fn echo(&self, Parameters(EchoRequest { text }): Parameters<EchoRequest>) -> String {
            text
        }
    }

    #[tool_handler]
    impl rmcp::ServerHandler for HintsServer {}
}

/// The same server written with rmcp's `#[tool_router]`, `#[tool]` and
/// `#[tool_handler]`, with the same four hints given through
/// `annotations(...)`.
pub mod rmcp_server {
    use rmcp::handler::server::wrapper::{Json, Parameters};
    use rmcp::{tool, tool_handler, tool_router};

    use crate::types::{AddRequest, EchoRequest, GetRequest, Store, Sum};

    /// The server; its tools read [`Store`].
    #[derive(Default)]
    pub struct RmcpServer {
        store: Store,
    }

    // rmcp's macro gives the `pub fn tool_router` it makes no doc comment.
    #[allow(missing_docs)]
    #[tool_router(vis = "pub")]
    impl RmcpServer {
        /// Look up the value stored under a key.
        #[tool(annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ))]
        async fn get(&self, Parameters(GetRequest { key }): Parameters<GetRequest>) -> String {
            self.store.get(&key)
        }

        /// Add two integers.
        #[tool(annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ))]
        async fn add(&self, Parameters(AddRequest { a, b }): Parameters<AddRequest>) -> Json<Sum> {
            Json(Sum {
                sum: a.wrapping_add(b),
            })
        }

        /// Send the text back unchanged.
        #[tool(annotations(
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        ))]
        async fn echo(&self, Parameters(EchoRequest { text }): Parameters<EchoRequest>) -> String {
            text
        }
    }

    #[tool_handler]
    impl rmcp::ServerHandler for RmcpServer {}
}

/// A client connected in-process to `server` over a `tokio::io::duplex`
/// pair: the server runs in a task spawned on the current runtime, both
/// sides go through rmcp's usual `serve` (initialize handshake included).
pub async fn connect<S: ServerHandler>(server: S) -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io)
        .await
        .expect("the in-process client could not initialize")
}

/// The `tools/call` requests the benchmarks send, one per tool.
pub fn call_requests() -> [(&'static str, CallToolRequestParams); 3] {
    let arguments = |value: serde_json::Value| -> JsonObject {
        match value {
            serde_json::Value::Object(object) => object,
            _ => unreachable!("arguments are a JSON object"),
        }
    };
    [
        (
            "get",
            CallToolRequestParams::new("get")
                .with_arguments(arguments(serde_json::json!({ "key": "beta" }))),
        ),
        (
            "add",
            CallToolRequestParams::new("add")
                .with_arguments(arguments(serde_json::json!({ "a": 40, "b": 2 }))),
        ),
        (
            "echo",
            CallToolRequestParams::new("echo")
                .with_arguments(arguments(serde_json::json!({ "text": "hello, world" }))),
        ),
    ]
}

/// The median of `values` (the mean of the middle two for an even count).
///
/// # Panics
///
/// When `values` is empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hints_server::HintsServer;
    use rmcp_server::RmcpServer;
    use serde_json::Value;

    /// The tool list as JSON, without the `_meta` that only `mcp-hints` adds.
    fn without_meta(tools: Vec<rmcp::model::Tool>) -> Vec<Value> {
        tools
            .into_iter()
            .map(|tool| {
                let mut value = serde_json::to_value(tool).unwrap();
                value.as_object_mut().unwrap().remove("_meta");
                value
            })
            .collect()
    }

    #[test]
    fn both_servers_define_the_same_tools() {
        let ours = HintsServer::tool_router().list_all();
        let theirs = RmcpServer::tool_router().list_all();
        assert_eq!(ours.len(), 3);
        // Every hint declared: no provenance to record, on either side.
        assert!(ours.iter().all(|tool| tool.meta.is_none()));
        assert!(theirs.iter().all(|tool| tool.meta.is_none()));
        assert_eq!(without_meta(ours), without_meta(theirs));
    }

    #[tokio::test]
    async fn both_servers_answer_the_same() {
        let ours = connect(HintsServer::default()).await;
        let theirs = connect(RmcpServer::default()).await;
        for (name, request) in call_requests() {
            let a = ours.call_tool(request.clone()).await.unwrap();
            let b = theirs.call_tool(request).await.unwrap();
            assert_ne!(a.is_error, Some(true), "{name}: {a:?}");
            assert_eq!(a, b, "{name}");
        }
        let a = ours.list_tools(None).await.unwrap();
        let b = theirs.list_tools(None).await.unwrap();
        assert_eq!(without_meta(a.tools), without_meta(b.tools));
        ours.cancel().await.unwrap();
        theirs.cancel().await.unwrap();
    }
}

// `#[tool_handler(page_size = ...)]` serves tools/list a page at a time. The
// expression is evaluated on every request (here `self.page_size`, a plain
// `usize`), `_meta` is on every page, the last page has no `nextCursor`, and
// a cursor the server did not issue gets -32602 naming it. Driven over an
// in-memory pipe with raw JSON-RPC, so the wire values are what is checked.
#![deny(warnings)]

use std::num::NonZeroUsize;

use mcp_hints::rmcp::ServerHandler;
use mcp_hints::rmcp::ServiceExt;
use mcp_hints::rmcp::model::MetaObject;
use mcp_hints::{tool, tool_handler, tool_router};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

#[derive(Clone)]
pub struct Shelf {
    page_size: usize,
}

#[tool_router(closed_world)]
impl Shelf {
    #[tool(read_only)]
    fn c(&self) {}

    #[tool(read_only)]
    fn a(&self) {}

    #[tool(read_only)]
    fn b(&self) {}
}

fn meta() -> MetaObject {
    MetaObject(json!({ "shelf": 1 }).as_object().unwrap().clone())
}

#[tool_handler(page_size = self.page_size, meta = meta())]
impl ServerHandler for Shelf {}

// The other conversions: `Option<NonZeroUsize>` and `NonZeroUsize`.
#[derive(Clone)]
pub struct Optional;

#[tool_router(router = optional_router, closed_world)]
impl Optional {
    #[tool(read_only)]
    fn a(&self) {}
}

#[tool_handler(router = Self::optional_router(), page_size = NonZeroUsize::new(1))]
impl ServerHandler for Optional {}

#[derive(Clone)]
pub struct NonZero;

#[tool_router(router = non_zero_router, closed_world)]
impl NonZero {
    #[tool(read_only)]
    fn a(&self) {}
}

#[tool_handler(router = Self::non_zero_router(), page_size = NonZeroUsize::MIN)]
impl ServerHandler for NonZero {}

struct Client {
    write: tokio::io::WriteHalf<DuplexStream>,
    lines: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    id: u64,
}

impl Client {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    /// Sends a request; returns the whole response.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let id = self.id;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        let line = self.lines.next_line().await.unwrap().expect("a response");
        let response: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(response["id"], json!(id), "{response}");
        response
    }

    async fn list(&mut self, cursor: Option<&str>) -> Value {
        let params = match cursor {
            Some(cursor) => json!({ "cursor": cursor }),
            None => json!({}),
        };
        self.request("tools/list", params).await
    }
}

async fn connect<S: ServerHandler>(server: S) -> Client {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let running = server.serve(server_end).await.unwrap();
        let _ = running.waiting().await;
    });
    let (read, write) = tokio::io::split(client_end);
    let mut client = Client {
        write,
        lines: BufReader::new(read).lines(),
        id: 0,
    };
    let init = client
        .request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "ui-test", "version": "0" },
            }),
        )
        .await;
    assert!(init.get("result").is_some(), "{init}");
    client
        .send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .await;
    client
}

fn names(result: &Value) -> Vec<&str> {
    result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut client = connect(Shelf { page_size: 2 }).await;

    let first = client.list(None).await["result"].clone();
    assert_eq!(names(&first), ["a", "b"]);
    assert_eq!(first["_meta"], json!({ "shelf": 1 }));
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a nextCursor on the first page")
        .to_owned();
    assert!(cursor.starts_with("tools.v1.2."), "{cursor}");
    assert!(cursor.ends_with(".b"), "{cursor}");

    let last = client.list(Some(&cursor)).await["result"].clone();
    assert_eq!(names(&last), ["c"]);
    assert_eq!(last["_meta"], json!({ "shelf": 1 }));
    assert_eq!(last.get("nextCursor"), None, "{last}");

    let refused = client.list(Some("page-2")).await;
    assert_eq!(refused.get("result"), None, "{refused}");
    assert_eq!(
        refused["error"],
        json!({
            "code": -32602,
            "message": "invalid tools/list cursor \"page-2\": not a cursor this server issued; \
                        list again without a cursor",
            "data": { "cursor": "page-2", "reason": "malformed" },
        })
    );

    // Page size 0 is one page of everything.
    let mut client = connect(Shelf { page_size: 0 }).await;
    let all = client.list(None).await["result"].clone();
    assert_eq!(names(&all), ["a", "b", "c"]);
    assert_eq!(all.get("nextCursor"), None, "{all}");

    for mut client in [connect(Optional).await, connect(NonZero).await] {
        let only = client.list(None).await["result"].clone();
        assert_eq!(names(&only), ["a"]);
        assert_eq!(only.get("nextCursor"), None, "{only}");
    }
}

// `#[tool_handler]` adds the tool methods of ServerHandler and keeps what
// the user wrote (here `get_info`).
#![deny(warnings)]

use mcp_hints::rmcp::ServerHandler;
use mcp_hints::rmcp::model::{ServerCapabilities, ServerConfig};
use mcp_hints::{tool, tool_handler, tool_router};

pub struct Clock;

#[tool_router(closed_world)]
impl Clock {
    #[tool(read_only)]
    fn now(&self) -> String {
        "0".to_owned()
    }
}

#[tool_handler(router = Self::tool_router())]
impl ServerHandler for Clock {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions("ask the time")
    }
}

fn main() {
    assert_eq!(Clock.get_info().instructions.as_deref(), Some("ask the time"));
    assert!(Clock.get_tool("now").is_some());
}

// `#[tool_handler]` serves `Self::tool_router()`, which only `#[tool_router]`
// makes: forgetting it is told so, not as "no function `tool_router`".
use mcp_hints::rmcp::ServerHandler;
use mcp_hints::tool_handler;

struct Forgotten;

impl Forgotten {
    fn list(&self) -> String {
        String::new()
    }
}

#[tool_handler]
impl ServerHandler for Forgotten {}

fn main() {
    let _ = Forgotten.list();
}

// Mistakes with `page_size`: a misspelt key gets a "did you mean", a missing
// value says how to write one, and a value of the wrong type is reported at
// the value. Each type still implements ServerHandler.
use mcp_hints::rmcp::ServerHandler;
use mcp_hints::{tool, tool_handler, tool_router};

struct S;

#[tool_router(closed_world)]
impl S {
    #[tool(read_only)]
    fn a(&self) {}
}

#[tool_handler(page_sise = 2)]
impl ServerHandler for S {}

struct T;

#[tool_router(closed_world)]
impl T {
    #[tool(read_only)]
    fn a(&self) {}
}

#[tool_handler(page_size)]
impl ServerHandler for T {}

struct U;

#[tool_router(closed_world)]
impl U {
    #[tool(read_only)]
    fn a(&self) {}
}

#[tool_handler(page_size = "two")]
impl ServerHandler for U {}

fn main() {
    fn serve<H: ServerHandler>(_: H) {}
    serve(S);
    serve(T);
    serve(U);
}

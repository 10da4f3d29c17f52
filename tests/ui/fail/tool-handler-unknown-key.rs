// A mistake in `#[tool_handler]` gives one error; the type still implements
// ServerHandler, with the methods the user wrote.
use mcp_hints::rmcp::ServerHandler;
use mcp_hints::{tool, tool_handler, tool_router};

struct S;

#[tool_router(closed_world)]
impl S {
    #[tool(read_only)]
    fn a(&self) {}
}

#[tool_handler(instructionz = "x", version)]
impl ServerHandler for S {}

fn main() {
    fn serve<T: ServerHandler>(_: T) {}
    serve(S);
}

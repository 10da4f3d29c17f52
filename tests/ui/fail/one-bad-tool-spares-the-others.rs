// A mistake in one tool gives one error; the other tools' definitions are
// still generated, so code composing routes by hand compiles.
use mcp_hints::rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use mcp_hints::{tool, tool_router};

struct S;

#[tool_router(closed_world)]
impl S {
    #[tool(read_only)]
    fn good(&self) {}

    #[tool(read_onlyy)]
    fn bad(&self) {}
}

fn main() {
    let _ = ToolRouter::<S>::new().with_route(ToolRoute::new(S::good_tool_attr(), S::good));
}

// `#[cfg]` on a tool removes it from the router too; `#[tool]` also works
// alone, and a router function can be made of standalone tools by hand.
#![deny(warnings)]

use mcp_hints::rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use mcp_hints::{tool, tool_router};

pub struct Gated;

#[tool_router(closed_world, router = gated_router, vis = "pub(crate)")]
impl Gated {
    #[tool(read_only)]
    fn kept(&self) {}

    #[cfg(any())]
    #[tool(read_only)]
    fn gone(&self) {}
}

pub struct Loose;

impl Loose {
    #[tool(read_only, closed_world)]
    async fn alone(&self) -> String {
        "alone".to_owned()
    }
}

fn main() {
    let gated = Gated::gated_router();
    assert!(gated.has_route("kept"));
    assert!(!gated.has_route("gone"));

    let tool = Loose::alone_tool_attr();
    assert_eq!(tool.annotations.unwrap().read_only_hint, Some(true));
    let router = ToolRouter::<Loose>::new()
        .with_route(ToolRoute::new(Loose::alone_tool_attr(), Loose::alone));
    assert!(router.has_route("alone"));
}

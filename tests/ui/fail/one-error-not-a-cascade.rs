// A mistake in one flag gives that one error: the router function and the
// server handler are still generated, so code that uses them compiles.
use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router(closed_world, server_handler)]
impl Tools {
    #[tool(read_only, destructve)]
    async fn a(&self) -> String {
        String::new()
    }
}

fn main() {
    let router = Tools::tool_router();
    let _ = router.list_all();
    fn assert_handler<T: mcp_hints::rmcp::ServerHandler>() {}
    assert_handler::<Tools>();
}

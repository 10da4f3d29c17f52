use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router(closed_world)]
impl Tools {
    #[tool(read_only)]
    fn search(&self) {}

    #[tool(read_only, name = "search")]
    fn search_v2(&self) {}
}

fn main() {}

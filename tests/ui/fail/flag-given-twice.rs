use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router]
impl Tools {
    #[tool(read_only, closed_world, read_only, name = "a", name = "b")]
    fn a(&self) {}
}

fn main() {}

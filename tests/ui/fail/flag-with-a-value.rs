use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router(closed_world)]
impl Tools {
    #[tool(read_only = false, idempotent, destructive)]
    fn a(&self) {}
}

fn main() {}

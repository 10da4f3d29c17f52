use mcp_hints::{tool, tool_router};

trait Tools {
    fn a(&self);
}

struct S;

#[tool_router(closed_world)]
impl Tools for S {
    #[tool(read_only)]
    fn a(&self) {}
}

fn main() {}

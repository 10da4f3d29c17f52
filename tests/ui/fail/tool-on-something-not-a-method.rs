use mcp_hints::{tool, tool_router};

struct S;

#[tool_router(closed_world)]
impl S {
    #[tool(read_only)]
    const LIMIT: u8 = 1;

    #[tool(read_only)]
    fn a(&self) {}
}

#[tool(read_only, closed_world)]
struct NotAFunction;

fn main() {}

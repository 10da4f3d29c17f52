use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router]
impl Tools {
    #[tool(read_only, idempotent, closed_world)]
    fn a(&self) {}

    #[tool(additive, read_only, closed_world)]
    fn b(&self) {}

    #[tool(destructive, additive, idempotent, closed_world)]
    fn c(&self) {}

    #[tool(read_only, open_world, closed_world)]
    fn d(&self) {}

    #[tool(destructive, non_idempotent, read_only, closed_world)]
    fn e(&self) {}
}

fn main() {}

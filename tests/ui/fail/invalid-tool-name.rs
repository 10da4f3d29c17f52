use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router(closed_world)]
impl Tools {
    #[tool(read_only, name = "get user")]
    fn a(&self) {}

    #[tool(read_only, name = "")]
    fn b(&self) {}

    #[tool(read_only, name = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")]
    fn c(&self) {}

    #[tool(read_only)]
    fn café(&self) {}
}

fn main() {}

use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router(closed_wrld)]
impl Tools {
    #[tool(readOnly)]
    fn a(&self) {}

    #[tool(idempotant, destructive)]
    fn b(&self) {}

    #[tool(read_only, colour = "blue")]
    fn c(&self) {}

    #[tool(read_only_hint = true)]
    fn d(&self) {}

    #[tool(read_only, allow(undeclared_hint))]
    fn e(&self) {}
}

fn main() {}

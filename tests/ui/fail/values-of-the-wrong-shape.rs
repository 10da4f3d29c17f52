// Each key with a value of the wrong shape gets its own error, and the keys
// after it are still checked.
use mcp_hints::{tool, tool_router};

struct S;

#[tool_router(router = 5, vis = "pub(crate", serverhandler)]
impl S {
    #[tool(readonly, name = 5, closed_wrld)]
    fn a(&self) {}

    #[tool(read_only, closed_world, description, annotations)]
    fn b(&self) {}

    #[tool(read_only, closed_world, allow(undeclared_hints), deny(undeclared_hints))]
    fn c(&self) {}

    #[tool(read_only, closed_world, local = "yes", annotations(open_world_hint = 1))]
    fn d(&self) {}

    #[tool(read_only, closed_world, description = 42)]
    fn e(&self) {}
}

fn main() {}

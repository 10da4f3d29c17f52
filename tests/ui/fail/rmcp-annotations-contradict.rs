// rmcp's own syntax is checked like the flags.
use mcp_hints::{tool, tool_router};

struct Tools;

#[tool_router]
impl Tools {
    #[tool(annotations(read_only_hint = true, destructive_hint = true, open_world_hint = false))]
    fn a(&self) {}

    #[tool(read_only, annotations(read_only_hint = false), closed_world)]
    fn b(&self) {}

    #[tool(annotations(idempotent_hint = "yes", open_world_hint = false, read_only_hint = true))]
    fn c(&self) {}

    #[tool(annotations(read_only_hint = true, idempotent_hint = false, open_world_hint = false))]
    fn d(&self) {}
}

fn main() {}

use mcp_hints::{tool, tool_router};

struct Notes;

#[tool_router(deny(undeclared_hints))]
impl Notes {
    #[tool(additive, non_idempotent)]
    fn append(&self) {}

    // a tool's own level outranks the router's
    #[tool(allow(undeclared_hints))]
    fn touch(&self) {}
}

struct Standalone;

impl Standalone {
    #[tool(read_only, deny(undeclared_hints))]
    fn get(&self) {}
}

fn main() {}

use mcp_hints::tool_router;

struct Nothing;

#[tool_router]
impl Nothing {
    fn helper(&self) {}
}

fn main() {}

// A tool under `#[cfg]` still collides with an unconditional one, and with
// one under the same `#[cfg]`; tools under different `#[cfg]`s may be
// alternatives and are left alone.
use mcp_hints::{tool, tool_router};

struct S;

#[tool_router(closed_world)]
impl S {
    #[tool(read_only)]
    fn search(&self) {}

    #[cfg(all())]
    #[tool(read_only, name = "search")]
    fn search_v2(&self) {}

    #[cfg(target_os = "none")]
    #[tool(read_only)]
    fn fetch(&self) {}

    #[cfg(target_os = "none")]
    #[tool(read_only, name = "fetch")]
    fn fetch_again(&self) {}

    #[cfg(not(target_os = "none"))]
    #[tool(read_only, name = "fetch")]
    fn fetch_fallback(&self) {}
}

fn main() {}

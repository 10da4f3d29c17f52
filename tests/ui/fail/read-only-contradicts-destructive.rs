use mcp_hints::{tool, tool_router};

struct Files;

#[tool_router(closed_world)]
impl Files {
    /// Remove a file.
    #[tool(read_only, destructive)]
    fn remove(&self) -> String {
        String::new()
    }
}

fn main() {}

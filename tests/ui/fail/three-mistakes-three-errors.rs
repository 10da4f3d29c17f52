// Errors are collected: three mistakes in three tools give three errors in
// one build, each at its own flag.
use mcp_hints::{tool, tool_router};

struct Store;

#[tool_router(closed_world)]
impl Store {
    #[tool(read_only, non_idempotent)]
    fn get(&self) -> String {
        String::new()
    }

    #[tool(additive, idempotent, non_idempotent)]
    fn put(&self) -> String {
        String::new()
    }

    #[tool(readonly)]
    fn peek(&self) -> String {
        String::new()
    }
}

fn main() {}

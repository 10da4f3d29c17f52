// Router-wide flags are defaults: a tool's own declaration wins, and a
// router's `read_only` never lends destructiveHint/idempotentHint to a tool
// that declares a write.
#![deny(warnings)]

use mcp_hints::{tool, tool_router, Hint, Provenance, ToolHints};

pub struct Reads;

#[tool_router(read_only, closed_world)]
impl Reads {
    #[tool]
    fn get(&self) {}

    #[tool(open_world)]
    fn fetch(&self) {}

    #[tool(destructive, non_idempotent, allow(undeclared_hints))]
    fn purge(&self) {}
}

pub struct Writes;

#[tool_router(idempotent, open_world)]
impl Writes {
    #[tool(destructive)]
    fn put(&self) {}

    #[tool(additive, non_idempotent)]
    fn append(&self) {}
}

fn hints(router: &mcp_hints::rmcp::handler::server::router::tool::ToolRouter<impl Send + Sync + 'static>, name: &str) -> [bool; 4] {
    let hints = ToolHints::of(router.get(name).unwrap());
    Hint::ALL.map(|hint| hints.get(hint).value)
}

fn main() {
    let reads = Reads::tool_router();
    assert_eq!(hints(&reads, "get"), [true, false, true, false]);
    assert_eq!(hints(&reads, "fetch"), [true, false, true, true]);
    assert_eq!(hints(&reads, "purge"), [false, true, false, false]);

    let writes = Writes::tool_router();
    assert_eq!(hints(&writes, "put"), [false, true, true, true]);
    assert_eq!(hints(&writes, "append"), [false, false, false, true]);
    let put = ToolHints::of(writes.get("put").unwrap());
    assert!(Hint::ALL.iter().all(|hint| put.get(*hint).provenance == Provenance::Declared));
}

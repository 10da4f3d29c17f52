// Forms rmcp accepts, and lint silencing with rustc's own `#[allow]`.
#![deny(warnings)]

use mcp_hints::{tool, tool_router, Hint, Provenance, ToolHints};

pub struct S;

#[tool_router]
impl S {
    // A bare hint key means `= true`, as in rmcp.
    #[tool(annotations(read_only_hint, open_world_hint = false))]
    fn bare(&self) {}

    // rmcp's destructive/idempotent keys speak of a write: readOnlyHint is
    // declared false, as with the flags.
    #[tool(annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    fn write(&self) {}

    #[tool(annotations())]
    #[allow(deprecated)]
    fn empty(&self) {}
}

pub struct Reads;

#[tool_router(read_only, closed_world)]
impl Reads {
    // A write in rmcp syntax is not turned into a read by the router's
    // `read_only` default.
    #[tool(annotations(destructive_hint = true, idempotent_hint = false))]
    fn purge(&self) {}
}

fn values(tool: &mcp_hints::rmcp::model::Tool) -> [bool; 4] {
    let hints = ToolHints::of(tool);
    Hint::ALL.map(|hint| hints.get(hint).value)
}

fn main() {
    let router = S::tool_router();
    assert_eq!(values(router.get("bare").unwrap()), [true, false, true, false]);
    let write = router.get("write").unwrap();
    assert_eq!(values(write), [false, false, true, false]);
    assert!(ToolHints::of(write).defaulted().is_empty());
    let empty = router.get("empty").unwrap();
    assert_eq!(ToolHints::of(empty).defaulted(), Hint::ALL.to_vec());

    let purge = Reads::tool_router().get("purge").cloned().unwrap();
    assert_eq!(values(&purge), [false, true, false, false]);
    let hints = ToolHints::of(&purge);
    assert!(Hint::ALL.iter().all(|hint| hints.get(*hint).provenance == Provenance::Declared));
}

// allow(undeclared_hints) on a tool or on a router silences the lint; the
// wire still carries all four hints, at their spec defaults.
#![deny(warnings)]

use mcp_hints::{tool, tool_router, Hint, Provenance, ToolHints};

pub struct A;

#[tool_router]
impl A {
    #[tool(allow(undeclared_hints))]
    fn touch(&self) {}
}

pub struct B;

#[tool_router(allow(undeclared_hints))]
impl B {
    #[tool]
    fn touch(&self) {}

    #[tool(idempotent)]
    fn set(&self) {}
}

fn main() {
    for tool in [A::tool_router().get("touch").cloned(), B::tool_router().get("touch").cloned()] {
        let tool = tool.unwrap();
        let a = tool.annotations.as_ref().unwrap();
        assert_eq!(
            [a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint],
            [Some(false), Some(true), Some(false), Some(true)]
        );
        assert_eq!(ToolHints::of(&tool).defaulted(), Hint::ALL.to_vec());
    }
    let set = B::tool_router().get("set").cloned().unwrap();
    let hints = ToolHints::of(&set);
    assert_eq!(hints.get(Hint::Idempotent).provenance, Provenance::Declared);
    assert_eq!(hints.get(Hint::ReadOnly).provenance, Provenance::Declared);
    assert_eq!(hints.defaulted(), vec![Hint::Destructive, Hint::OpenWorld]);
}

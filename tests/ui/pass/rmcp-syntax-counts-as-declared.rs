// An rmcp server migrates by changing its imports: rmcp's attribute syntax
// is accepted and counts as declared.
#![deny(warnings)]

use mcp_hints::{tool, tool_router};

pub struct Calc;

#[tool_router]
impl Calc {
    #[tool(
        name = "sum",
        description = "Add numbers",
        annotations(
            title = "Sum",
            read_only_hint = true,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    fn add(&self) -> String {
        String::new()
    }

    #[tool(annotations(destructive_hint = false, idempotent_hint = true, open_world_hint = false))]
    fn put(&self) -> String {
        String::new()
    }
}

fn main() {
    let router = Calc::tool_router();
    let sum = router.get("sum").unwrap();
    assert_eq!(sum.description.as_deref(), Some("Add numbers"));
    let a = sum.annotations.as_ref().unwrap();
    assert_eq!(a.title.as_deref(), Some("Sum"));
    assert_eq!(
        [a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint],
        [Some(true), Some(false), Some(true), Some(false)]
    );
    let a = router.get("put").unwrap().annotations.as_ref().unwrap();
    assert_eq!(
        [a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint],
        [Some(false), Some(false), Some(true), Some(false)]
    );
}

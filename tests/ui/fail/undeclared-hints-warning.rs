// The lint is a warning in a normal build; `deny(deprecated)` turns it into
// an error here so that trybuild pins its text.
#![deny(deprecated)]

use mcp_hints::{tool, tool_router};

struct Notes;

#[tool_router]
impl Notes {
    /// Nothing declared at all.
    #[tool]
    fn touch(&self) {}

    /// Only the world is left open.
    #[tool(read_only)]
    fn list(&self) {}

    /// A write whose idempotency is undecided.
    #[tool(destructive, closed_world)]
    fn wipe(&self) {}

    /// A write whose destructiveness is undecided.
    #[tool(idempotent, closed_world)]
    fn set(&self) {}

    /// Silenced on purpose.
    #[tool(allow(undeclared_hints))]
    fn quiet(&self) {}
}

fn main() {}

// A fully declared server builds with no warning under deny(warnings), and
// every tool carries all four hints with the declared values.
#![deny(warnings)]

use mcp_hints::rmcp::handler::server::wrapper::{Json, Parameters};
use mcp_hints::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Default)]
pub struct Notes;

#[derive(Deserialize, JsonSchema)]
pub struct NewNote {
    pub text: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Note {
    pub id: u64,
}

#[tool_router(closed_world, server_handler)]
impl Notes {
    /// List every note.
    #[tool(read_only)]
    async fn list_notes(&self) -> String {
        String::new()
    }

    /// Add a note.
    #[tool(additive, non_idempotent)]
    async fn append_note(&self, Parameters(_note): Parameters<NewNote>) -> Json<Note> {
        Json(Note { id: 1 })
    }

    /// Delete a note.
    #[tool(destructive, idempotent)]
    fn delete_note(&self) -> Result<String, String> {
        Ok(String::new())
    }

    /// Ask the outside.
    #[tool(read_only, open_world, name = "web.search", title = "Search the web")]
    async fn search(&self) -> String {
        String::new()
    }
}

fn hints(name: &str) -> [Option<bool>; 4] {
    let tool = Notes::tool_router().get(name).cloned().expect(name);
    let a = tool.annotations.expect("annotations are always present");
    [a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint]
}

fn main() {
    assert_eq!(hints("list_notes"), [Some(true), Some(false), Some(true), Some(false)]);
    assert_eq!(hints("append_note"), [Some(false), Some(false), Some(false), Some(false)]);
    assert_eq!(hints("delete_note"), [Some(false), Some(true), Some(true), Some(false)]);
    assert_eq!(hints("web.search"), [Some(true), Some(false), Some(true), Some(true)]);

    let search = Notes::tool_router().get("web.search").cloned().unwrap();
    assert_eq!(search.title.as_deref(), Some("Search the web"));
    assert_eq!(search.description.as_deref(), Some("Ask the outside."));
    let append = Notes::tool_router().get("append_note").cloned().unwrap();
    assert!(append.output_schema.is_some());
    assert_eq!(append.input_schema["required"], serde_json::json!(["text"]));
}

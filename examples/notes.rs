//! A notes server over stdio: real in-memory state and one tool of each kind.
//!
//! | tool | flags | what a client may do after a timeout |
//! |---|---|---|
//! | `list_notes` | `read_only` | resend |
//! | `append_note` | `additive, non_idempotent` | read back first: a resend adds the note twice |
//! | `update_note` | `destructive, idempotent` | resend: the same text again changes nothing |
//! | `delete_note` | `destructive, idempotent` | resend: deleting twice has no further effect |
//! | `forecast` | `read_only, open_world` | resend |
//!
//! Every tool is in a closed world (the router's default) except `forecast`,
//! which asks a weather service (simulated here, so the example needs no
//! network). With `--features lint-demo` the server also has `touch`, which
//! declares nothing and draws the `undeclared_hints` warning at build time.
//!
//! Run: `cargo run -p mcp-hints-examples --bin notes` (speaks MCP on stdin/stdout).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use mcp_hints::{tool, tool_router};
use rmcp::ServiceExt;
use rmcp::handler::server::wrapper::{Json, Parameters};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The server: a notebook shared by every request of the session.
#[derive(Clone, Default)]
pub struct Notes {
    book: Arc<Mutex<Book>>,
}

#[derive(Default)]
struct Book {
    next_id: u64,
    notes: BTreeMap<u64, Note>,
}

/// A note as the tools return it.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Note {
    /// Assigned by the server, from 1, never reused.
    pub id: u64,
    pub text: String,
}

#[derive(Serialize, JsonSchema)]
pub struct NoteList {
    /// Every note, oldest first.
    pub notes: Vec<Note>,
}

#[derive(Deserialize, JsonSchema)]
pub struct NewNote {
    /// The text of the note; not empty.
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct NoteEdit {
    /// The note to change.
    pub id: u64,
    /// Its new text; not empty.
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct NoteId {
    pub id: u64,
}

#[derive(Deserialize, JsonSchema)]
pub struct City {
    /// A city name, e.g. "Lisbon".
    pub city: String,
}

#[derive(Serialize, JsonSchema)]
pub struct Forecast {
    pub city: String,
    pub summary: String,
    pub high_celsius: i32,
    pub low_celsius: i32,
}

#[tool_router(closed_world, server_handler)]
impl Notes {
    /// List every note, oldest first.
    #[tool(read_only)]
    async fn list_notes(&self) -> Json<NoteList> {
        let notes = self.book().notes.values().cloned().collect();
        Json(NoteList { notes })
    }

    /// Add a note; a resend would add it twice.
    #[tool(additive, non_idempotent)]
    async fn append_note(
        &self,
        Parameters(NewNote { text }): Parameters<NewNote>,
    ) -> Result<Json<Note>, String> {
        let text = non_empty("text", text)?;
        let mut book = self.book();
        book.next_id += 1;
        let note = Note {
            id: book.next_id,
            text,
        };
        book.notes.insert(note.id, note.clone());
        Ok(Json(note))
    }

    /// Replace the text of a note; repeating it leaves the same text.
    #[tool(destructive, idempotent)]
    async fn update_note(
        &self,
        Parameters(NoteEdit { id, text }): Parameters<NoteEdit>,
    ) -> Result<Json<Note>, String> {
        let text = non_empty("text", text)?;
        let mut book = self.book();
        let note = book
            .notes
            .get_mut(&id)
            .ok_or_else(|| format!("no note has id {id}"))?;
        note.text = text;
        Ok(Json(note.clone()))
    }

    /// Delete a note by id; deleting twice has no further effect.
    #[tool(destructive, idempotent)]
    async fn delete_note(&self, Parameters(NoteId { id }): Parameters<NoteId>) -> String {
        match self.book().notes.remove(&id) {
            Some(_) => format!("deleted note {id}"),
            None => format!("note {id} is already absent"),
        }
    }

    /// The weather forecast for a city, from a weather service on the open
    /// internet (simulated here: the answer is derived from the name).
    #[tool(read_only, open_world)]
    async fn forecast(
        &self,
        Parameters(City { city }): Parameters<City>,
    ) -> Result<Json<Forecast>, String> {
        let city = non_empty("city", city)?;
        let seed: u32 = city.bytes().map(u32::from).sum();
        let summaries = ["sunny", "cloudy", "rain", "windy"];
        let low = (seed % 15) as i32;
        Ok(Json(Forecast {
            summary: summaries[(seed % 4) as usize].to_owned(),
            high_celsius: low + 8,
            low_celsius: low,
            city,
        }))
    }

    /// Mark the notebook as touched.
    #[cfg(feature = "lint-demo")]
    #[tool]
    async fn touch(&self) -> String {
        "touched".to_owned()
    }
}

impl Notes {
    fn book(&self) -> MutexGuard<'_, Book> {
        // A handler that panicked mid-update cannot leave a note half
        // written (each update is one insert or assignment), so the data
        // behind a poisoned lock is still whole.
        self.book
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `value` when it has more than white space; else a tool error naming
/// `field`.
fn non_empty(field: &str, value: String) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err(format!("`{field}` must not be empty"));
    }
    Ok(value)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let service = Notes::default().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

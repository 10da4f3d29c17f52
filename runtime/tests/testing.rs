//! `mcp_hints::testing` on `#[tool_router]` servers in process: a server
//! whose hints lie is caught, with the hint and a shrunk sequence; its
//! honest twin passes.

use std::sync::{Arc, Mutex};

use mcp_hints::Hint;
use mcp_hints::rmcp::ServerHandler;
use mcp_hints::rmcp::handler::server::wrapper::Parameters;
use mcp_hints::testing::{TestingError, Verifier};
use mcp_hints::{tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A shelf of books; `lying` makes each tool do other than it declares.
#[derive(Clone, Default)]
struct Shelf {
    books: Arc<Mutex<Vec<String>>>,
    lookups: Arc<Mutex<u64>>,
    removals: Arc<Mutex<u64>>,
    lying: bool,
}

#[derive(Deserialize, JsonSchema)]
struct Book {
    title: String,
}

#[tool_router(closed_world)]
impl Shelf {
    /// Every book.
    #[tool(read_only)]
    async fn books(&self) -> String {
        if self.lying {
            // A read that writes: it counts lookups in the state.
            *self.lookups.lock().unwrap() += 1;
        }
        self.books.lock().unwrap().join("\n")
    }

    /// Adds a book.
    #[tool(additive, non_idempotent)]
    async fn shelve(&self, Parameters(Book { title }): Parameters<Book>) -> String {
        let mut books = self.books.lock().unwrap();
        if self.lying {
            // "Adds", but the shelf holds one book.
            books.clear();
        }
        books.push(title);
        "shelved".to_owned()
    }

    /// Takes a book off the shelf, if it is there.
    #[tool(destructive, idempotent)]
    async fn remove(&self, Parameters(Book { title }): Parameters<Book>) -> String {
        if self.lying {
            // "Idempotent", but every call is counted.
            *self.removals.lock().unwrap() += 1;
        }
        self.books.lock().unwrap().retain(|book| *book != title);
        "removed".to_owned()
    }
}

#[tool_handler]
impl ServerHandler for Shelf {}

/// Reads a shelf's state back.
type Snapshot = Box<dyn FnMut() -> Value + Send>;

fn verifier(lying: bool) -> Verifier<impl FnMut() -> (Shelf, Snapshot) + Send> {
    Verifier::new(move || {
        let shelf = Shelf {
            lying,
            ..Shelf::default()
        };
        let (books, lookups, removals) = (
            shelf.books.clone(),
            shelf.lookups.clone(),
            shelf.removals.clone(),
        );
        let snapshot: Snapshot = Box::new(move || {
            json!({
                "books": *books.lock().unwrap(),
                "lookups": *lookups.lock().unwrap(),
                "removals": *removals.lock().unwrap(),
            })
        });
        (shelf, snapshot)
    })
}

#[tokio::test]
async fn each_lie_of_a_router_is_found_with_a_shrunk_sequence() {
    let report = verifier(true).seed(3).run().await.unwrap();
    let mut found: Vec<(&str, Hint, usize)> = report
        .findings
        .iter()
        .map(|finding| (finding.tool.as_str(), finding.hint, finding.sequence.len()))
        .collect();
    found.sort();
    assert_eq!(
        found,
        vec![
            ("books", Hint::ReadOnly, 1),
            // The call and its repeat.
            ("remove", Hint::Idempotent, 2),
            // A book to lose, then the shelve that loses it.
            ("shelve", Hint::Destructive, 2),
        ],
        "{:#?}",
        report.findings
    );
}

#[tokio::test]
async fn the_honest_router_holds_across_seeds() {
    for seed in 0..20 {
        let report = verifier(false)
            .seed(seed)
            .runs(2)
            .steps(12)
            .run()
            .await
            .unwrap();
        assert!(report.holds(), "seed {seed}: {:#?}", report.findings);
        assert!(!report.checked.is_empty());
    }
}

#[tokio::test]
#[should_panic(
    expected = "`shelve` declares destructiveHint false (additive), but its call removed or changed what was there"
)]
async fn assert_hints_hold_shows_each_finding() {
    verifier(true).assert_hints_hold().await;
}

#[tokio::test]
async fn bad_settings_are_errors_not_panics() {
    let error = verifier(false)
        .example("shelve", json!(["x"]))
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(error, TestingError::ExampleNotObject { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "the example for `shelve` is an array, not a JSON object of arguments"
    );
    let error = verifier(false)
        .example("nope", json!({}))
        .run()
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the examples name tool `nope`, which the server does not list"
    );
    let error = verifier(false).skip("[").run().await.unwrap_err();
    assert!(
        error.to_string().starts_with("`[` is not a glob pattern"),
        "{error}"
    );
}

//! Hints checked against behaviour inside `cargo test`: [`crate::verify`]
//! on a server built with `#[tool_router]`, in process, with a snapshot
//! closure over the server's state instead of a read-back tool.
//!
//! Each run gets a fresh server from the closure you give, served over an
//! in-memory pipe to rmcp's client (the same `tools/list` and `tools/call`
//! a real client sends, arguments deserialized by the server's own
//! router), so runs never share state.
//!
//! ```
//! # use std::sync::{Arc, Mutex};
//! # use mcp_hints::rmcp::{self, ServerHandler, handler::server::wrapper::Parameters};
//! # use mcp_hints::{tool, tool_handler, tool_router};
//! # use schemars::JsonSchema;
//! # use serde::Deserialize;
//! #[derive(Clone, Default)]
//! struct Shelf {
//!     books: Arc<Mutex<Vec<String>>>,
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Book {
//!     title: String,
//! }
//!
//! #[tool_router(closed_world)]
//! impl Shelf {
//!     /// Every book on the shelf.
//!     #[tool(read_only)]
//!     async fn books(&self) -> String {
//!         self.books.lock().unwrap().join("\n")
//!     }
//!
//!     /// Puts a book on the shelf.
//!     #[tool(additive, non_idempotent)]
//!     async fn shelve(&self, Parameters(Book { title }): Parameters<Book>) -> String {
//!         self.books.lock().unwrap().push(title);
//!         "shelved".to_owned()
//!     }
//! }
//!
//! #[tool_handler]
//! impl ServerHandler for Shelf {}
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let report = mcp_hints::testing::Verifier::new(|| {
//!     let shelf = Shelf::default();
//!     let books = shelf.books.clone();
//!     (shelf, move || serde_json::json!(*books.lock().unwrap()))
//! })
//! .seed(1)
//! .assert_hints_hold()
//! .await;
//! assert!(report.checked.iter().any(|checked| checked.tool == "shelve"));
//! # }
//! ```
//!
//! Behind cargo feature `testing` (which turns on `verify` and rmcp's
//! client). Use it from `[dev-dependencies]`.

use std::fmt::Write as _;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::Value;

use crate::verify::{
    self, Answer, Call, Options, Report, Start, System, SystemError, ToolUnderTest, VerifyError,
};

/// Bytes the in-memory pipe holds each way before a writer waits.
const PIPE_BYTES: usize = 1 << 20;

/// Verifies the hints of the servers `make` builds: each call of `make`
/// gives a fresh server and a snapshot closure reading its state.
///
/// Settings default to [`Options::default`]; errors in them (a bad glob, an
/// example that is not an object) are kept and returned by
/// [`run`](Verifier::run).
pub struct Verifier<F> {
    make: F,
    options: Options,
    error: Option<TestingError>,
}

/// Why [`Verifier::run`] could not give a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestingError {
    /// An example given to [`Verifier::example`] is not a JSON object.
    #[error("the example for `{tool}` is {found}, not a JSON object of arguments")]
    ExampleNotObject {
        /// The tool.
        tool: String,
        /// The JSON type given.
        found: &'static str,
    },
    /// The first server did not start or list its tools.
    #[error("the server did not list its tools: {0}")]
    List(SystemError),
    /// [`verify::verify`] failed (a bad glob, a server that failed mid-run,
    /// examples for a tool it does not list).
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

impl<H, S, F> Verifier<F>
where
    F: FnMut() -> (H, S) + Send,
    H: ServerHandler,
    S: FnMut() -> Value + Send,
{
    /// A verifier of the servers `make` builds, with default settings.
    pub fn new(make: F) -> Verifier<F> {
        Verifier {
            make,
            options: Options::default(),
            error: None,
        }
    }

    /// The generator's seed ([`Options::seed`]).
    pub fn seed(mut self, seed: u64) -> Self {
        self.options.seed = seed;
        self
    }

    /// Sequences, each on a fresh server ([`Options::runs`]).
    pub fn runs(mut self, runs: u32) -> Self {
        self.options.runs = runs;
        self
    }

    /// Calls per sequence ([`Options::steps`]).
    pub fn steps(mut self, steps: u32) -> Self {
        self.options.steps = steps;
        self
    }

    /// Never calls tools whose name matches `glob` ([`Options::skip`]).
    pub fn skip(mut self, glob: &str) -> Self {
        if let Err(error) = self.options.skip(glob) {
            self.error.get_or_insert(error.into());
        }
        self
    }

    /// Arguments for `tool`, drawn beside generated ones
    /// ([`Options::examples`]); `arguments` must be a JSON object.
    pub fn example(mut self, tool: &str, arguments: Value) -> Self {
        match arguments {
            Value::Object(arguments) => self
                .options
                .examples
                .entry(tool.to_owned())
                .or_default()
                .push(arguments),
            other => {
                self.error.get_or_insert(TestingError::ExampleNotObject {
                    tool: tool.to_owned(),
                    found: crate::hints::json_type(&other),
                });
            }
        }
        self
    }

    /// Lists the tools of a first server, then verifies their hints.
    ///
    /// # Errors
    ///
    /// The first error a setting had; [`TestingError::List`] when the first
    /// server does not list its tools; [`TestingError::Verify`] from
    /// [`verify::verify`].
    pub async fn run(self) -> Result<Report, TestingError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let mut start = InProcessStart { make: self.make };
        let first = start.start().await.map_err(TestingError::List)?;
        let listed = first.client.list_all_tools().await;
        first.close().await;
        let tools: Vec<ToolUnderTest> = listed
            .map_err(|error| TestingError::List(SystemError::new(error.to_string())))?
            .iter()
            .map(ToolUnderTest::from_tool)
            .collect();
        Ok(verify::verify(&tools, &mut start, &self.options).await?)
    }

    /// [`run`](Self::run), panicking with every finding shown when a hint
    /// does not hold or verification fails: for `#[tokio::test]`.
    pub async fn assert_hints_hold(self) -> Report {
        let report = match self.run().await {
            Ok(report) => report,
            Err(error) => panic!("hints could not be verified: {error}"),
        };
        if !report.holds() {
            let mut shown = String::new();
            for finding in &report.findings {
                let _ = writeln!(shown, "{}", show(finding));
            }
            panic!(
                "{} declared hint(s) do not hold:\n\n{shown}",
                report.findings.len()
            );
        }
        report
    }
}

/// A finding for a test's panic message: what broke, the calls, the
/// difference.
fn show(finding: &verify::Finding) -> String {
    let claim = match finding.hint {
        crate::Hint::ReadOnly => "readOnlyHint true, but its call changed the state",
        crate::Hint::Idempotent => {
            "idempotentHint true, but calling it again with the same arguments changed the state"
        }
        crate::Hint::Destructive => {
            "destructiveHint false (additive), but its call removed or changed what was there"
        }
        crate::Hint::OpenWorld => "openWorldHint false",
    };
    let mut shown = format!("`{}` declares {claim}:\n", finding.tool);
    for (index, call) in finding.sequence.iter().enumerate() {
        let _ = writeln!(
            shown,
            "  {}. {} {}",
            index + 1,
            call.tool,
            Value::Object(call.arguments.clone())
        );
    }
    for change in &finding.difference {
        let value = |value: &Option<Value>| {
            value
                .as_ref()
                .map_or_else(|| "(absent)".to_owned(), Value::to_string)
        };
        let path = if change.path.is_empty() {
            "/"
        } else {
            &change.path
        };
        let _ = writeln!(
            shown,
            "  {path}: {} -> {}",
            value(&change.before),
            value(&change.after)
        );
    }
    shown
}

struct InProcessStart<F> {
    make: F,
}

struct InProcess<S> {
    client: RunningService<RoleClient, ()>,
    snapshot: S,
    server: tokio::task::JoinHandle<()>,
}

impl<H, S, F> Start for InProcessStart<F>
where
    F: FnMut() -> (H, S) + Send,
    H: ServerHandler,
    S: FnMut() -> Value + Send,
{
    type System = InProcess<S>;

    async fn start(&mut self) -> Result<InProcess<S>, SystemError> {
        let (handler, snapshot) = (self.make)();
        let (client_io, server_io) = tokio::io::duplex(PIPE_BYTES);
        let server = tokio::spawn(async move {
            if let Ok(running) = handler.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        let client = ().serve(client_io).await.map_err(|error| {
            SystemError::new(format!("the in-process server did not initialize: {error}"))
        })?;
        Ok(InProcess {
            client,
            snapshot,
            server,
        })
    }
}

impl<S: FnMut() -> Value + Send> System for InProcess<S> {
    async fn call(&mut self, call: &Call) -> Result<Answer, SystemError> {
        let params =
            CallToolRequestParams::new(call.tool.clone()).with_arguments(call.arguments.clone());
        match self.client.call_tool(params).await {
            Ok(result) => Ok(Answer::Result {
                is_error: result.is_error.unwrap_or(false),
            }),
            Err(ServiceError::McpError(error)) => Ok(Answer::Error {
                code: i64::from(error.code.0),
                message: error.message.into_owned(),
            }),
            Err(error) => Err(SystemError::new(format!(
                "`{}` got no answer: {error}",
                call.tool
            ))),
        }
    }

    async fn snapshot(&mut self) -> Result<Value, SystemError> {
        Ok((self.snapshot)())
    }

    async fn close(self) {
        let _ = self.client.cancel().await;
        self.server.abort();
    }
}

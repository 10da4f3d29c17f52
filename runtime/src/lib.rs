#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod canonical;
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub mod client;
pub mod collect;
pub mod fingerprint;
pub mod hints;
pub mod idempotency;
pub mod jsonrpc;
pub mod pagination;
pub mod policy;
#[cfg(all(unix, feature = "client"))]
#[doc(hidden)]
pub mod process_group;
pub mod stdio;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
#[cfg(feature = "verify")]
#[cfg_attr(docsrs, doc(cfg(feature = "verify")))]
pub mod verify;
pub mod wire;

mod scratch;

#[doc(hidden)]
pub mod __private;

// The repository README's examples (its quickstart server among them), run
// as doctests here: this crate's front page is its own README.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct RepositoryReadme;

pub use hints::{Hint, HintError, HintValue, PROVENANCE_META_KEY, Provenance, ToolHints};

/// The rmcp crate this version of `mcp-hints` generates code for, so that a
/// server can name its types without a version mismatch.
pub use rmcp;

/// Declares one MCP tool: a method of an impl block under
/// [`#[tool_router]`](macro@tool_router), with explicit hints.
///
/// # Hint flags
///
/// Each flag declares what it names. Every generated tool carries an
/// `annotations` object with **all four hints present** (declared, or at
/// their spec default), so no client ever has to guess a missing field.
///
/// | flag | declares |
/// |---|---|
/// | `read_only` | readOnlyHint true; also destructiveHint false and idempotentHint true |
/// | `idempotent` | readOnlyHint false, idempotentHint true |
/// | `non_idempotent` | readOnlyHint false, idempotentHint false |
/// | `destructive` | readOnlyHint false, destructiveHint true |
/// | `additive` | readOnlyHint false, destructiveHint false |
/// | `open_world` | openWorldHint true |
/// | `closed_world` | openWorldHint false |
///
/// # Other keys
///
/// | key | meaning |
/// |---|---|
/// | `name = "..."` | the tool name (default: the method name); 1 to 128 of `A-Z a-z 0-9 _ - .` |
/// | `title = "..."` | the human-readable title |
/// | `description = ...` | the description (default: the doc comment) |
/// | `annotations(read_only_hint = true, ..., title = "...")` | rmcp's syntax; each hint given counts as declared |
/// | `input_schema = ...`, `output_schema = ...` | schemas (default: from `Parameters<T>` and `Json<T>`) |
/// | `icons = ...`, `meta = ...` | as in rmcp |
/// | `local` | the future need not be `Send` (with rmcp's `local` feature) |
/// | `idempotency_key = "request_id"` | the argument carrying an idempotency key: the handler runs once per key behind the server's [`Idempotency`](idempotency::Idempotency) (see [`idempotency`]); declares readOnlyHint false and idempotentHint true, and names the argument in `_meta["mcp-hints/idempotencyKey"]` |
/// | `allow(undeclared_hints)` / `warn(...)` / `deny(...)` | the lint level for this tool |
///
/// # Errors
///
/// At compile time, each spanned at the offending token, all reported in one
/// build: contradicting flags (`read_only` with `destructive`,
/// `non_idempotent`, `idempotent` or `additive`; `idempotent` with
/// `non_idempotent`; `destructive` with `additive`; `open_world` with
/// `closed_world`; the same through `annotations(...)`), a key given twice,
/// an unknown key (with a "did you mean"), a name the spec rejects, and two
/// tools of one router with the same name. For `idempotency_key`: with
/// `read_only` or `non_idempotent`; on a tool without `Parameters<T>`; a key
/// no field of the argument pattern matches, or a field that is not a
/// string; outside `#[tool_router]`; and on a server that does not
/// implement [`IdempotentServer`](idempotency::IdempotentServer). Where the
/// pattern hides the fields (`Parameters(p): Parameters<T>`), the key must
/// still be a field of `T`, as Rust spells it or as serde's `rename_all =
/// "camelCase"` does (`requestId` for `request_id`): a key that is not is a
/// compile error at the key (rustc's "no field", listing `T`'s fields). A
/// key the macro cannot check (one that is no Rust identifier, such as
/// `request-id`, or a field serde renames on the wire) is checked against
/// the input schema before the first call: when the schema lacks it as a
/// required string, the server refuses to start. `#[tool_handler]`'s
/// `initialize` and `server/discover` answer with a JSON-RPC internal error
/// (-32603) naming the tool, the key and the schema's properties, logged at
/// `error`, and rmcp's `serve` returns it as a `ServerInitializeError`.
/// Building the router does not panic (it is built on every request where
/// the type has generics); a server with its own `initialize` serves, and
/// every call of that tool is answered with the same error.
///
/// ```compile_fail
/// # use mcp_hints::{tool, tool_router};
/// # struct S;
/// #[tool_router]
/// impl S {
///     #[tool(read_only, destructive)] // error: a read-only tool destroys nothing
///     fn wipe(&self) -> String { String::new() }
/// }
/// ```
///
/// # The `undeclared_hints` lint
///
/// A tool is fully declared when its read/write side is settled
/// (`read_only`, or one idempotency and one destructiveness flag) and its
/// world is settled (`open_world` or `closed_world`); router-wide defaults
/// count. Anything less is a warning at `cargo build`, at the tool's name,
/// naming each undeclared hint, the value clients will assume, what that
/// means after a timeout, and the flag that fixes it. Silence it with
/// `allow(undeclared_hints)` on the tool or the router; make it an error
/// with `deny(undeclared_hints)`, or, wherever no tool or router sets its
/// own level, with the crate feature `deny-undeclared-hints` (for CI; Cargo
/// unifies features, so it reaches every crate of the build that uses
/// mcp-hints).
///
/// The warning is rustc's `deprecated` lint carrying the message (stable
/// Rust has no other warning channel for macros), so `#![deny(warnings)]`
/// and `#[allow(deprecated)]` affect it too.
pub use mcp_hints_macros::tool;

/// Registers every [`#[tool]`](macro@tool) method of an impl block in a
/// generated `fn tool_router() -> ToolRouter<Self>`.
///
/// | key | meaning |
/// |---|---|
/// | hint flags (`closed_world`, `idempotent`, ...) | router-wide defaults: they count as declared for every tool that does not declare the hint itself |
/// | `router = name` | the name of the generated function (default `tool_router`) |
/// | `vis = "pub(crate)"` | its visibility (default private) |
/// | `server_handler` | also implement rmcp's `ServerHandler` for the type, serving this router |
/// | `allow_empty` | accept an impl block without tools |
/// | `allow(undeclared_hints)` / `warn(...)` / `deny(...)` | the lint level for the router's tools |
///
/// A router default of `read_only` never reaches a tool that declares a
/// write: such a tool's destructiveness and idempotency stay its own.
///
/// Unlike rmcp's `ToolRouter::add_route`, which keeps the last of two tools
/// with one name, two tools named alike are a compile error here.
///
/// ```
/// use mcp_hints::{tool, tool_router};
///
/// struct Clock;
///
/// #[tool_router(closed_world, server_handler)]
/// impl Clock {
///     /// The time, in seconds since the Unix epoch.
///     #[tool(read_only)]
///     fn now(&self) -> String {
///         "1700000000".to_owned()
///     }
/// }
///
/// let tool = Clock::tool_router().get("now").cloned().unwrap();
/// let annotations = tool.annotations.unwrap();
/// assert_eq!(annotations.read_only_hint, Some(true));
/// assert_eq!(annotations.destructive_hint, Some(false));
/// assert_eq!(annotations.idempotent_hint, Some(true));
/// assert_eq!(annotations.open_world_hint, Some(false));
/// ```
pub use mcp_hints_macros::tool_router;

/// Implements the tool methods of rmcp's `ServerHandler` (`call_tool`,
/// `list_tools`, `get_tool`, `initialize`, `discover`, and `get_info` when
/// absent) on an `impl ServerHandler for T` block, serving a router made by
/// [`#[tool_router]`](macro@tool_router). Methods already written in the
/// block are kept. `initialize` and `discover` answer as rmcp's own do,
/// after checking each `idempotency_key` against its tool's input schema:
/// a key the schema lacks as a required string is refused with a JSON-RPC
/// internal error (-32603) naming the tool, the key and the schema's
/// properties, so the server does not start (see
/// [`#[tool]`](macro@tool)'s errors).
///
/// | key | meaning |
/// |---|---|
/// | `router = expr` | the router to serve (default `Self::tool_router()`) |
/// | `meta = expr` | `_meta` of every `tools/list` result |
/// | `name = expr`, `version = expr` | `serverInfo` (default: the crate's name and version) |
/// | `instructions = expr` | `instructions` of the `initialize` result |
/// | `page_size = expr` | serve `tools/list` a page at a time: any `Into<`[`PageSize`](pagination::PageSize)`>` (`usize`, 0 meaning one page of everything; `NonZeroUsize`; `Option<NonZeroUsize>`), evaluated on every request, so `self.page_size` works |
///
/// Without `page_size`, `tools/list` returns every tool on one page and
/// ignores the request's cursor, as rmcp's own handler does. With it, the
/// tools come in order of name, every page but the last carries
/// `nextCursor`, and a cursor the server did not issue for the current list
/// gets the JSON-RPC error -32602 (Invalid params) naming the cursor; see
/// [`pagination`] for the cursor and each error.
///
/// ```
/// use mcp_hints::rmcp::ServerHandler;
/// use mcp_hints::{tool, tool_handler, tool_router};
///
/// struct Clock {
///     page_size: usize,
/// }
///
/// #[tool_router(closed_world)]
/// impl Clock {
///     /// The time, in seconds since the Unix epoch.
///     #[tool(read_only)]
///     fn now(&self) -> String {
///         "1700000000".to_owned()
///     }
/// }
///
/// #[tool_handler(page_size = self.page_size, instructions = "ask the time")]
/// impl ServerHandler for Clock {}
/// ```
pub use mcp_hints_macros::tool_handler;

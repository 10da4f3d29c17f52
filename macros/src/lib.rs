#![doc = include_str!("../README.md")]

// Each macro runs parse -> validate -> expand: `attr` parses arguments into
// spanned structs, `decl` and `name` check them, collecting every error in a
// `ctxt::Ctxt`, and `expand` generates code. When there are errors,
// `fallback` still emits the user's items, so one mistake gives one error.
// The hint table, the lint's rule and words, the contradictions and the
// tool-name rule come from `mcp-hints-core`, which the runtime and the
// `mcp-hints` command use too.

mod attr;
mod ctxt;
mod decl;
mod expand;
mod fallback;
mod handler;
mod keyed;
mod lint;
mod model;
mod name;
mod router;

use proc_macro::TokenStream;

/// Declares one MCP tool; see `mcp_hints::tool`.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    router::standalone_tool(args.into(), item.into()).into()
}

/// Registers every `#[tool]` of an impl block; see `mcp_hints::tool_router`.
#[proc_macro_attribute]
pub fn tool_router(args: TokenStream, item: TokenStream) -> TokenStream {
    router::tool_router(args.into(), item.into()).into()
}

/// Serves a tool router from an `impl ServerHandler`; see
/// `mcp_hints::tool_handler`.
#[proc_macro_attribute]
pub fn tool_handler(args: TokenStream, item: TokenStream) -> TokenStream {
    handler::tool_handler(args.into(), item.into()).into()
}

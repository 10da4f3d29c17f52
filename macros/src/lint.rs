//! The `undeclared_hints` lint: a tool that leaves hints at their
//! pessimistic spec defaults gets a warning in `cargo build` output.
//!
//! Stable Rust has no warning API for proc macros, so the warning is the
//! `deprecated` lint firing on a generated item whose note is the message.
//! The use of that item is spanned at the tool's name and sits inside the
//! generated `<tool>_tool_attr` function, where an `#[allow(deprecated)]` on
//! the impl block also reaches it.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned};

use mcp_hints_core::lint;

use crate::attr::LintLevel;
use crate::decl::Decls;

/// The level in force for one tool: its own, else its router's, else the
/// crate-wide default: warn; deny with the `deny-undeclared-hints` feature;
/// allow with `allow-undeclared-hints` (deny outranks it, so a CI build
/// that denies is never quieted by a dependency's migration).
pub fn level(tool: Option<LintLevel>, router: Option<LintLevel>) -> LintLevel {
    tool.or(router)
        .unwrap_or(if cfg!(feature = "deny-undeclared-hints") {
            LintLevel::Deny
        } else if cfg!(feature = "allow-undeclared-hints") {
            LintLevel::Allow
        } else {
            LintLevel::Warn
        })
}

/// The diagnostic text for a tool that leaves hints undeclared (the
/// core's wording, which `mcp-hints lint` shares), or `None` when the tool
/// is fully declared.
pub fn message(tool_name: &str, decls: &Decls) -> Option<String> {
    lint::undeclared_hints(tool_name, &decls.states()).map(|finding| finding.warning())
}

/// The tokens that make rustc report `message` at `span`: a warning, or an
/// error when denied. Empty when allowed.
pub fn emit(level: LintLevel, message: &str, tool_fn: &Ident) -> TokenStream {
    let span: Span = tool_fn.span();
    match level {
        LintLevel::Allow => TokenStream::new(),
        LintLevel::Warn => {
            let item = Ident::new("undeclared_hints", span);
            let definition = quote! {
                #[deprecated(note = #message)]
                #[allow(non_camel_case_types, dead_code)]
                struct undeclared_hints;
            };
            let usage = quote_spanned! {span=> let _ = #item; };
            quote! { #definition #usage }
        }
        LintLevel::Deny => {
            let message = format!("`undeclared_hints` is denied: {message}");
            syn::Error::new(span, message).into_compile_error()
        }
    }
}

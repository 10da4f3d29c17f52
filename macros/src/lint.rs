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

use crate::attr::LintLevel;
use crate::decl::Decls;
use crate::hint::Hint;

pub const SILENCE: &str = "#[tool(allow(undeclared_hints))]";

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

/// The diagnostic text for a tool that leaves `undeclared` open, or `None`
/// when the tool is fully declared.
pub fn message(tool_name: &str, decls: &Decls) -> Option<String> {
    let undeclared = decls.undeclared();
    if undeclared.is_empty() {
        return None;
    }
    let assumed: Vec<String> = undeclared
        .iter()
        .map(|hint| format!("{} {}", hint.wire_name(), hint.spec_default()))
        .collect();

    let open = |hint| undeclared.contains(&hint);
    let writes = !decls.effective(Hint::ReadOnly);
    let mut consequences = Vec::new();
    if writes
        && !decls.effective(Hint::Idempotent)
        && (open(Hint::ReadOnly) || open(Hint::Idempotent))
    {
        consequences.push(format!(
            "will never resend `{tool_name}` after a timeout (they must read back first)"
        ));
    }
    if writes && open(Hint::Destructive) {
        consequences.push("may ask for confirmation before every call".to_owned());
    }
    if open(Hint::OpenWorld) {
        consequences.push("will treat it as reaching external entities".to_owned());
    }

    let mut fixes = Vec::new();
    if open(Hint::ReadOnly) {
        fixes.push("`read_only` (or `idempotent`/`non_idempotent` with `destructive`/`additive`)");
    } else {
        if open(Hint::Idempotent) {
            fixes.push("`idempotent` or `non_idempotent`");
        }
        if open(Hint::Destructive) {
            fixes.push("`destructive` or `additive`");
        }
    }
    if open(Hint::OpenWorld) {
        fixes.push("`open_world` or `closed_world`");
    }

    let hints: Vec<&str> = undeclared.iter().map(|hint| hint.wire_name()).collect();
    Some(format!(
        "tool `{tool_name}` leaves {} undeclared, so clients will assume {}: they {}; \
         declare {}, or silence it with `{SILENCE}`",
        join(&hints),
        join(&assumed),
        join(&consequences),
        fixes.join(", and "),
    ))
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

fn join(items: &[impl AsRef<str>]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_owned(),
        [init @ .., last] => format!(
            "{} and {}",
            init.iter()
                .map(AsRef::as_ref)
                .collect::<Vec<_>>()
                .join(", "),
            last.as_ref()
        ),
    }
}

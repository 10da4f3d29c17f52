//! The typed model of a tool: the user's method, its parsed `#[tool]`
//! arguments and what they resolve to, each with the span to blame.

use proc_macro2::{Span, TokenStream};
use syn::{Attribute, Expr, ImplItemFn};

use crate::attr::{self, ToolArgs};
use crate::ctxt::Ctxt;
use crate::decl::{self, Decls};
use crate::keyed;
use crate::name;

pub struct ToolFn {
    /// The user's method, `#[tool]` removed.
    pub item: ImplItemFn,
    pub args: ToolArgs,
    /// The tool name on the wire and the token it came from.
    pub name: String,
    pub name_span: Span,
    /// The tool's own declarations (router defaults not applied).
    pub decls: Decls,
    /// `#[cfg(...)]` on the method, repeated on everything generated for it.
    pub cfgs: Vec<Attribute>,
    /// The path of the `#[tool]` attribute, when `#[tool_router]` expands
    /// the tool (and leaves a marker with that path on the method).
    pub router_path: Option<syn::Path>,
}

/// Is this attribute a `#[tool]` (or a path ending in `tool`)?
pub fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|segment| segment.ident == "tool")
}

/// Builds the model of `item`, whose `#[tool(...)]` arguments are `args`.
pub fn tool_fn(mut item: ImplItemFn, args: TokenStream, cx: &mut Ctxt) -> ToolFn {
    item.attrs.retain(|attr| !is_tool_attr(attr));
    let args = attr::parse_tool_args(args, cx);
    let decls = decl::resolve(&args.flags, cx);

    let (name, name_span) = match &args.name {
        Some(lit) => (lit.value(), lit.span()),
        None => (unraw(&item.sig.ident.to_string()), item.sig.ident.span()),
    };
    if let Some(problem) = name::problem(&name) {
        let hint = if args.name.is_some() {
            ""
        } else {
            "; give a valid one with `name = \"...\"`"
        };
        cx.error(name_span, format!("{problem}{hint}"));
    }
    let cfgs: Vec<Attribute> = item
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("cfg"))
        .cloned()
        .collect();
    let tool = ToolFn {
        item,
        args,
        name,
        name_span,
        decls,
        cfgs,
        router_path: None,
    };
    keyed::check(&tool, cx);
    tool
}

/// The `#[tool(...)]` arguments of a method inside `#[tool_router]`, or an
/// error for a malformed attribute such as `#[tool = "x"]`.
pub fn tool_attr_args(attr: &Attribute) -> syn::Result<TokenStream> {
    match &attr.meta {
        syn::Meta::Path(_) => Ok(TokenStream::new()),
        syn::Meta::List(list) => Ok(list.tokens.clone()),
        syn::Meta::NameValue(nv) => Err(syn::Error::new_spanned(
            nv,
            "expected `#[tool]` or `#[tool(...)]`",
        )),
    }
}

fn unraw(ident: &str) -> String {
    ident.strip_prefix("r#").unwrap_or(ident).to_owned()
}

/// The description: `description = ...`, else the doc comment, lines
/// trimmed and joined by `\n` (`include_str!` and other macros kept).
pub fn description(args: &ToolArgs, item: &ImplItemFn) -> Option<Expr> {
    if let Some(description) = &args.description {
        return Some(description.clone());
    }
    let mut lines: Vec<Expr> = Vec::new();
    let mut all_literal = true;
    for attr in &item.attrs {
        let syn::Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        if !attr.path().is_ident("doc") {
            continue;
        }
        match &nv.value {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(text),
                ..
            }) => {
                let line = text.value().trim().to_owned();
                if !line.is_empty() {
                    lines.push(syn::parse_quote!(#line));
                }
            }
            Expr::Macro(_) => {
                all_literal = false;
                lines.push(nv.value.clone());
            }
            _ => {}
        }
    }
    if lines.is_empty() {
        return None;
    }
    if all_literal {
        let text: Vec<String> = lines
            .iter()
            .filter_map(|line| match line {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(text),
                    ..
                }) => Some(text.value()),
                _ => None,
            })
            .collect();
        let text = text.join("\n");
        return Some(syn::parse_quote!(#text));
    }
    let mut parts = Vec::new();
    for (index, line) in lines.into_iter().enumerate() {
        if index > 0 {
            parts.push(syn::parse_quote!("\n"));
        }
        parts.push(line);
    }
    let parts: Vec<Expr> = parts;
    Some(syn::parse_quote!(::core::concat!(#(#parts),*)))
}

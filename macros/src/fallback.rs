//! What is emitted beside errors: the user's items and everything the rest
//! of their code refers to (the router function, the handler, each tool's
//! definition function), so that one mistake gives one error and not a
//! cascade of "cannot find function" errors.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{ImplItem, ItemImpl};

use crate::attr::RouterArgs;
use crate::expand::{self, private};
use crate::model::{self, ToolFn};
use crate::router::server_handler;

/// The impl block with `#[tool]` attributes removed, an empty router
/// function, and the handler when one was asked for.
pub fn router(mut item_impl: ItemImpl, args: &RouterArgs) -> TokenStream {
    let p = private();
    let expanded = format_ident!("{}", expand::EXPANDED);
    for item in &mut item_impl.items {
        if let ImplItem::Fn(method) = item {
            // The marker keeps the user's `use mcp_hints::tool` in use, so
            // no "unused import" warning joins the real errors.
            for attr in &mut method.attrs {
                if model::is_tool_attr(attr) {
                    let path = attr.path().clone();
                    *attr = syn::parse_quote!(#[#path(#expanded)]);
                }
            }
        }
    }
    let router = &args.router;
    let vis = &args.vis;
    item_impl.items.push(ImplItem::Verbatim(quote! {
        #vis fn #router() -> #p::rmcp::handler::server::router::tool::ToolRouter<Self> {
            #p::rmcp::handler::server::router::tool::ToolRouter::new()
        }
    }));
    let handler = args
        .server_handler
        .then(|| server_handler(&item_impl, args));
    quote!(#item_impl #handler)
}

/// The method and a definition function that is never called (the build
/// fails on the reported errors first).
pub fn tool(tool: &ToolFn) -> TokenStream {
    let p = private();
    let method = &tool.item;
    let attr_fn = expand::attr_fn_ident(&method.sig.ident);
    let cfgs = &tool.cfgs;
    quote! {
        #(#cfgs)*
        pub fn #attr_fn() -> #p::rmcp::model::Tool {
            ::core::unreachable!()
        }
        #method
    }
}

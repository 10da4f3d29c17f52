//! What is emitted beside errors: the user's items and everything the rest
//! of their code refers to (each tool's definition function; the router
//! function and handler come from the normal expansion), so that one
//! mistake gives one error and not a cascade of "cannot find function"
//! errors.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{ImplItem, ItemImpl};

use crate::expand::{self, private};
use crate::model::{self, ToolFn};

/// For a tool with errors: the method as written and a definition function
/// that is never called (the build fails on the reported errors first).
pub fn tool(tool: &ToolFn) -> TokenStream {
    let p = private();
    let method = &tool.item;
    let attr_fn = expand::attr_fn_ident(&method.sig.ident);
    let cfgs = &tool.cfgs;
    let marker = expand::marker(tool);
    quote! {
        #(#cfgs)*
        pub fn #attr_fn() -> #p::rmcp::model::Tool {
            ::core::unreachable!()
        }
        #marker
        #method
    }
}

/// The impl block as written, each `#[tool]` replaced by the marker, for an
/// impl block the router cannot take (a trait impl).
pub fn unmarked(mut item_impl: ItemImpl) -> TokenStream {
    let expanded = format_ident!("{}", expand::EXPANDED);
    for item in &mut item_impl.items {
        if let ImplItem::Fn(method) = item {
            for attr in &mut method.attrs {
                if model::is_tool_attr(attr) {
                    let path = attr.path().clone();
                    *attr = syn::parse_quote!(#[#path(#expanded)]);
                }
            }
        }
    }
    quote!(#item_impl)
}

//! `#[tool_handler]` on an `impl ServerHandler`: adds the methods that serve
//! a tool router, leaving alone those the user wrote.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Expr, ImplItem, ItemImpl};

use crate::ctxt::Ctxt;
use crate::expand::{self, HandlerOptions};
use crate::suggest;

const KEYS: [&str; 5] = ["router", "meta", "name", "version", "instructions"];

pub fn tool_handler(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut cx = Ctxt::default();
    let mut options = HandlerOptions {
        router: syn::parse_quote!(Self::tool_router()),
        meta: None,
        name: None,
        version: None,
        instructions: None,
    };
    let parser = syn::meta::parser(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        // key = <expr>
        let value: Expr = meta.value()?.parse()?;
        match key.as_str() {
            "router" => options.router = value,
            "meta" => options.meta = Some(value),
            "name" => options.name = Some(value),
            "version" => options.version = Some(value),
            "instructions" => options.instructions = Some(value),
            _ => {
                let message = match suggest::closest(&key, &KEYS) {
                    Some(found) => format!("unknown key `{key}`: did you mean `{found}`?"),
                    None => format!(
                        "unknown key `{key}`: expected one of `router`, `meta`, `name`, \
                         `version`, `instructions`"
                    ),
                };
                cx.push(syn::Error::new_spanned(&meta.path, message));
            }
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, args)?;
    let mut item_impl: ItemImpl = syn::parse2(item)?;
    cx.check()?;

    let existing: Vec<_> = item_impl
        .items
        .iter()
        .filter_map(|item| match item {
            ImplItem::Fn(method) => Some(method.sig.ident.clone()),
            _ => None,
        })
        .collect();
    for method in expand::handler_methods(&options, &existing) {
        item_impl.items.push(ImplItem::Verbatim(method));
    }
    Ok(quote!(#item_impl))
}

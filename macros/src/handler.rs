//! `#[tool_handler]` on an `impl ServerHandler`: adds the methods that serve
//! a tool router, leaving alone those the user wrote.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Expr, ImplItem, ItemImpl, Token};

use crate::ctxt::Ctxt;
use crate::expand::{self, HandlerOptions};
use mcp_hints_core::suggest;

const KEYS: [&str; 6] = [
    "router",
    "meta",
    "name",
    "version",
    "instructions",
    "page_size",
];

pub fn tool_handler(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let mut options = HandlerOptions {
        router: None,
        meta: None,
        name: None,
        version: None,
        instructions: None,
        page_size: None,
        prompts: false,
    };
    let parser = syn::meta::parser(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        let slot = match key.as_str() {
            "router" => None,
            "meta" => Some(&mut options.meta),
            "name" => Some(&mut options.name),
            "version" => Some(&mut options.version),
            "instructions" => Some(&mut options.instructions),
            "page_size" => Some(&mut options.page_size),
            _ => {
                let message = match suggest::closest(&key, KEYS) {
                    Some(found) => format!("unknown key `{key}`: did you mean `{found}`?"),
                    None => format!(
                        "unknown key `{key}`: expected one of `router`, `meta`, `name`, \
                         `version`, `instructions`, `page_size`"
                    ),
                };
                cx.push(syn::Error::new_spanned(&meta.path, message));
                if meta.input.peek(Token![=]) {
                    let _: Expr = meta.value()?.parse()?;
                }
                return Ok(());
            }
        };
        // key = <expr>
        if !meta.input.peek(Token![=]) {
            cx.push(syn::Error::new_spanned(
                &meta.path,
                format!("`{key}` takes a value: `{key} = ...`"),
            ));
            return Ok(());
        }
        let value: Expr = meta.value()?.parse()?;
        match slot {
            Some(slot) => *slot = Some(value),
            None => options.router = Some(value),
        }
        Ok(())
    });
    if let Err(error) = syn::parse::Parser::parse2(parser, args) {
        cx.push(error);
    }
    let mut item_impl: ItemImpl = match syn::parse2(item.clone()) {
        Ok(item_impl) => item_impl,
        Err(error) => {
            let error = error.into_compile_error();
            return quote!(#error #item);
        }
    };

    let existing: Vec<_> = item_impl
        .items
        .iter()
        .filter_map(|item| match item {
            ImplItem::Fn(method) => Some(method.sig.ident.clone()),
            _ => None,
        })
        .collect();
    // rmcp's `#[prompt_handler]` on the same block serves prompts, and the
    // generated `get_info` must announce them too. Below this attribute it
    // is still an attribute; above it, it has already added `list_prompts`.
    options.prompts = item_impl.attrs.iter().any(|attr| {
        attr.path()
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "prompt_handler")
    }) || existing.iter().any(|method| method == "list_prompts");
    // Even with errors in the arguments the methods are added (with the
    // defaults for what was wrong), so the type still implements the trait
    // and no second error follows.
    for method in expand::handler_methods(&options, &existing) {
        item_impl.items.push(ImplItem::Verbatim(method));
    }
    let errors = cx.check().err().map(syn::Error::into_compile_error);
    quote!(#errors #item_impl)
}

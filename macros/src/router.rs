//! `#[tool_router]` and a `#[tool]` that stands alone: parse, validate the
//! router as a whole (names unique, defaults consistent), expand.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{ImplItem, ImplItemFn, ItemImpl};

use crate::attr::{self, RouterArgs};
use crate::ctxt::Ctxt;
use crate::decl::{self, Decls};
use crate::expand::{self, HandlerOptions};
use crate::fallback;
use crate::lint;
use crate::model::{self, ToolFn};

pub fn tool_router(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut cx = Ctxt::default();
    let router_args = attr::parse_router_args(args, &mut cx);
    let mut item_impl = match syn::parse2::<ItemImpl>(item.clone()) {
        Ok(item_impl) => item_impl,
        Err(error) => {
            let error = error.into_compile_error();
            return quote!(#error #item);
        }
    };
    let defaults = decl::resolve(&router_args.flags, &mut cx);

    // Parse: every method carrying `#[tool]` becomes a model, in order.
    let mut tools: Vec<(usize, ToolFn)> = Vec::new();
    for (index, impl_item) in item_impl.items.iter().enumerate() {
        let ImplItem::Fn(method) = impl_item else {
            continue;
        };
        let mut tool_attrs = method.attrs.iter().filter(|attr| model::is_tool_attr(attr));
        let Some(first) = tool_attrs.next() else {
            continue;
        };
        for repeated in tool_attrs {
            cx.push(syn::Error::new_spanned(
                repeated,
                "`#[tool]` is given twice on this method: merge the two into one",
            ));
        }
        match model::tool_attr_args(first) {
            Ok(args) => {
                let mut tool = model::tool_fn(method.clone(), args, &mut cx);
                tool.router_path = Some(first.path().clone());
                tools.push((index, tool));
            }
            Err(error) => cx.push(error),
        }
    }

    // Validate what only the router as a whole can see.
    check_unique_names(&tools, &mut cx);
    if tools.is_empty() && !router_args.allow_empty && !cx.has_errors() {
        cx.push(syn::Error::new_spanned(
            &item_impl.self_ty,
            format!(
                "`#[tool_router]` found no `#[tool]` method in this impl block, so \
                 `Self::{}()` would serve no tools; add `allow_empty` if that is intended",
                router_args.router
            ),
        ));
    }
    if let Err(errors) = cx.check() {
        let errors = errors.into_compile_error();
        let fallback = fallback::router(item_impl, &router_args);
        return quote!(#errors #fallback);
    }

    // Expand.
    for (index, tool) in &tools {
        let decls = tool.decls.with_defaults(&defaults);
        let level = lint::level(tool.args.lint, router_args.lint);
        item_impl.items[*index] = ImplItem::Verbatim(expand::tool(tool, &decls, level));
    }
    let tool_refs: Vec<&ToolFn> = tools.iter().map(|(_, tool)| tool).collect();
    let router_fn = expand::router_fn(&router_args.router, &router_args.vis, &tool_refs);
    item_impl.items.push(ImplItem::Verbatim(router_fn));
    let handler = router_args
        .server_handler
        .then(|| server_handler(&item_impl, &router_args));
    quote!(#item_impl #handler)
}

/// Two tools with one name in one router: rmcp keeps the last silently, so
/// the first would never be called. Tools under `#[cfg]` are left out, since
/// only one of two alternatives may be compiled.
fn check_unique_names(tools: &[(usize, ToolFn)], cx: &mut Ctxt) {
    let unconditional: Vec<&ToolFn> = tools
        .iter()
        .map(|(_, tool)| tool)
        .filter(|tool| tool.cfgs.is_empty())
        .collect();
    for (position, tool) in unconditional.iter().enumerate() {
        if let Some(first) = unconditional[..position]
            .iter()
            .find(|earlier| earlier.name == tool.name)
        {
            cx.error(
                tool.name_span,
                format!(
                    "two tools are named `{}` in this router (methods `{}` and `{}`): rmcp \
                     would keep only the last; give one another name with `name = \"...\"`",
                    tool.name, first.item.sig.ident, tool.item.sig.ident
                ),
            );
        }
    }
}

/// `impl ServerHandler for Self` serving this router (`server_handler`).
pub fn server_handler(item_impl: &ItemImpl, args: &RouterArgs) -> TokenStream {
    let p = expand::private();
    let router = &args.router;
    let options = HandlerOptions {
        router: syn::parse_quote!(Self::#router()),
        meta: None,
        name: None,
        version: None,
        instructions: None,
    };
    let methods = expand::handler_methods(&options, &[]);
    let self_ty = &item_impl.self_ty;
    let (impl_generics, _, where_clause) = item_impl.generics.split_for_impl();
    quote! {
        impl #impl_generics #p::rmcp::ServerHandler for #self_ty #where_clause {
            #(#methods)*
        }
    }
}

/// `#[tool]` on a method outside `#[tool_router]` (or inside rmcp's own
/// `#[tool_router]`): the tool's definition function and the method. No
/// router defaults reach it.
pub fn standalone_tool(args: TokenStream, item: TokenStream) -> TokenStream {
    if args.to_string() == expand::EXPANDED {
        return item;
    }
    let method = match syn::parse2::<ImplItemFn>(item.clone()) {
        Ok(method) => method,
        Err(error) => {
            let error = error.into_compile_error();
            return quote!(#error #item);
        }
    };
    let mut cx = Ctxt::default();
    let tool = model::tool_fn(method, args, &mut cx);
    if let Err(errors) = cx.check() {
        let errors = errors.into_compile_error();
        let fallback = fallback::tool(&tool);
        return quote!(#errors #fallback);
    }
    let decls: Decls = tool.decls;
    let level = lint::level(tool.args.lint, None);
    expand::tool(&tool, &decls, level).into_token_stream()
}

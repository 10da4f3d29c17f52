//! `#[tool_router]` and a `#[tool]` that stands alone: parse, validate the
//! router as a whole (names unique, defaults consistent), expand.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{ImplItem, ImplItemFn, ItemImpl};

use crate::attr::{self, LintLevel, RouterArgs};
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
    if let Some((trait_path, _)) = &item_impl.trait_ {
        cx.push(syn::Error::new_spanned(
            trait_path,
            "`#[tool_router]` goes on an inherent impl block (`impl Type { ... }`), not on \
             an impl of a trait",
        ));
        let errors = cx.check().err().map(syn::Error::into_compile_error);
        let item_impl = fallback::unmarked(item_impl);
        return quote!(#errors #item_impl);
    }
    let defaults = decl::resolve(&router_args.flags, &mut cx);

    // Parse: every method carrying `#[tool]` becomes a model, in order, and
    // remembers whether it was free of errors.
    let mut tools: Vec<(usize, ToolFn, bool)> = Vec::new();
    for (index, impl_item) in item_impl.items.iter_mut().enumerate() {
        let ImplItem::Fn(method) = impl_item else {
            strip_misplaced_tool_attrs(impl_item, &mut cx);
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
        let errors_before = cx.len();
        let args = match model::tool_attr_args(first) {
            Ok(args) => args,
            Err(error) => {
                cx.push(error);
                TokenStream::new()
            }
        };
        let path = first.path().clone();
        let mut tool = model::tool_fn(method.clone(), args, &mut cx);
        tool.router_path = Some(path);
        tools.push((index, tool, cx.len() == errors_before));
    }

    // Validate what only the router as a whole can see.
    let tool_refs: Vec<&ToolFn> = tools.iter().map(|(_, tool, _)| tool).collect();
    check_unique_names(&tool_refs, &mut cx);
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

    // Expand. A tool with errors gets a stand-in, so that the rest of the
    // user's code still finds what it refers to; lint warnings wait until
    // the errors are fixed.
    let failed = cx.has_errors();
    for (index, tool, valid) in &tools {
        item_impl.items[*index] = ImplItem::Verbatim(if *valid {
            let decls = tool.decls.with_defaults(&defaults);
            let level = if failed {
                LintLevel::Allow
            } else {
                lint::level(tool.args.lint, router_args.lint)
            };
            expand::tool(tool, &decls, level)
        } else {
            fallback::tool(tool)
        });
    }
    let valid: Vec<&ToolFn> = tools
        .iter()
        .filter(|(_, _, valid)| *valid)
        .map(|(_, tool, _)| tool)
        .collect();
    let router_fn = expand::router_fn(&router_args.router, &router_args.vis, &valid);
    item_impl.items.push(ImplItem::Verbatim(router_fn));
    let once = (router_args.router == "tool_router" && item_impl.generics.params.is_empty())
        .then(|| expand::router_once(&item_impl.self_ty));
    let handler = router_args
        .server_handler
        .then(|| server_handler(&item_impl, &router_args));
    let errors = cx.check().err().map(syn::Error::into_compile_error);
    quote!(#errors #item_impl #once #handler)
}

/// `#[tool]` on an associated const or type: one error, and the attribute
/// removed so that no second error follows from it.
fn strip_misplaced_tool_attrs(item: &mut ImplItem, cx: &mut Ctxt) {
    let attrs = match item {
        ImplItem::Const(item) => &mut item.attrs,
        ImplItem::Type(item) => &mut item.attrs,
        ImplItem::Macro(item) => &mut item.attrs,
        _ => return,
    };
    attrs.retain(|attr| {
        let misplaced = model::is_tool_attr(attr);
        if misplaced {
            cx.push(syn::Error::new_spanned(
                attr,
                "`#[tool]` goes on a method: a tool is a method of the impl block",
            ));
        }
        !misplaced
    });
}

/// Two tools with one name in one router: rmcp keeps the last silently, so
/// the first would never be called.
fn check_unique_names(tools: &[&ToolFn], cx: &mut Ctxt) {
    for (position, tool) in tools.iter().enumerate() {
        let earlier = tools[..position]
            .iter()
            .find(|earlier| earlier.name == tool.name && may_coexist(&earlier.cfgs, &tool.cfgs));
        if let Some(first) = earlier {
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

/// Whether two tools can be compiled together: yes unless both carry
/// `#[cfg]`s and these differ (they may be alternatives, like
/// `cfg(feature = "x")` and `cfg(not(feature = "x"))`).
fn may_coexist(a: &[syn::Attribute], b: &[syn::Attribute]) -> bool {
    if a.is_empty() || b.is_empty() {
        return true;
    }
    let tokens = |attrs: &[syn::Attribute]| {
        attrs
            .iter()
            .map(|attr| attr.to_token_stream().to_string())
            .collect::<Vec<_>>()
    };
    tokens(a) == tokens(b)
}

/// `impl ServerHandler for Self` serving this router (`server_handler`).
pub fn server_handler(item_impl: &ItemImpl, args: &RouterArgs) -> TokenStream {
    let p = expand::private();
    let router = &args.router;
    let options = HandlerOptions {
        router: (router != "tool_router").then(|| syn::parse_quote!(Self::#router())),
        meta: None,
        name: None,
        version: None,
        instructions: None,
        page_size: None,
        prompts: false,
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
        Err(_) => {
            let error = syn::Error::new_spanned(
                &item,
                "`#[tool]` goes on a method (or a function): a tool is something to call",
            )
            .into_compile_error();
            return quote!(#error #item);
        }
    };
    let mut cx = Ctxt::default();
    let tool = model::tool_fn(method, args, &mut cx);
    if let Some(key) = &tool.args.idempotency_key {
        // Only the router can put the handler behind the idempotency store;
        // without it the key would be read by nobody.
        cx.error(
            key.span(),
            "`idempotency_key` needs the tool's impl block under \
             `#[mcp_hints::tool_router]`, which runs the handler behind the server's \
             idempotency store",
        );
    }
    if let Err(errors) = cx.check() {
        let errors = errors.into_compile_error();
        let fallback = fallback::tool(&tool);
        return quote!(#errors #fallback);
    }
    let decls: Decls = tool.decls;
    let level = lint::level(tool.args.lint, None);
    expand::tool(&tool, &decls, level).into_token_stream()
}

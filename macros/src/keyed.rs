//! `#[tool(idempotency_key = "...")]`: checks that the tool's arguments
//! can carry the key, and generates the compile-time proof that the field
//! is a string where the method's signature shows the field.
//!
//! The macro sees the argument struct only through the method's pattern,
//! `Parameters(Payment { request_id, cents }): Parameters<Payment>`. Where
//! the pattern names every field (no `..`), a key no field matches is an
//! error here; elsewhere (`Parameters(p)`, `{ cents, .. }`) the generated
//! code names the field (`p.request_id`, spanned at the key), so rustc
//! itself refuses a key that is no field of `T`, listing the fields, and
//! checks its type. The input schema itself, which serde renames shape, is
//! checked before the first call: `#[tool_handler]`'s `initialize` and
//! `server/discover` refuse to start the server
//! (`__private::keyed_tools_built_right`).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{FnArg, ImplItemFn, Pat, Type};

use crate::ctxt::Ctxt;
use crate::expand::private;
use crate::model::ToolFn;

/// The method's `Parameters<T>` argument: its pattern and `T`.
fn parameters(item: &ImplItemFn) -> Option<(&Pat, &Type)> {
    item.sig.inputs.iter().find_map(|input| {
        let FnArg::Typed(typed) = input else {
            return None;
        };
        let Type::Path(path) = &*typed.ty else {
            return None;
        };
        let segment = path.path.segments.last()?;
        if segment.ident != "Parameters" {
            return None;
        }
        let syn::PathArguments::AngleBracketed(args) = &segment.arguments else {
            return None;
        };
        match args.args.first()? {
            syn::GenericArgument::Type(inner) => Some((&*typed.pat, inner)),
            _ => None,
        }
    })
}

/// The struct pattern inside `Parameters(...)`, when there is one.
fn struct_pattern(pat: &Pat) -> Option<&syn::PatStruct> {
    let Pat::TupleStruct(tuple) = pat else {
        return None;
    };
    match tuple.elems.first()? {
        Pat::Struct(inner) => Some(inner),
        _ => None,
    }
}

/// `requestId` -> `request_id`: the field serde's `rename_all =
/// "camelCase"` turns into that argument name.
fn snake_case(name: &str) -> String {
    let mut snake = String::with_capacity(name.len() + 4);
    for ch in name.chars() {
        if ch.is_ascii_uppercase() {
            snake.push('_');
            snake.push(ch.to_ascii_lowercase());
        } else {
            snake.push(ch);
        }
    }
    snake
}

/// The field of the struct pattern that carries the key, by name.
fn key_field<'a>(pattern: &'a syn::PatStruct, key: &str) -> Option<&'a syn::Ident> {
    let snake = snake_case(key);
    pattern.fields.iter().find_map(|field| match &field.member {
        syn::Member::Named(ident) if *ident == key || *ident == snake => Some(ident),
        _ => None,
    })
}

/// Reports what the signature shows to be wrong with the key.
pub fn check(tool: &ToolFn, cx: &mut Ctxt) {
    let Some(key) = &tool.args.idempotency_key else {
        return;
    };
    let method = &tool.item.sig.ident;
    if tool.args.local {
        cx.error(
            key.span(),
            "`idempotency_key` needs a `Send` tool: remove `local`, since the key's lease is \
             renewed while the call runs",
        );
    }
    let Some((pat, ty)) = parameters(&tool.item) else {
        cx.error(
            key.span(),
            format!(
                "`idempotency_key` names an argument of the tool, but `{method}` takes none: \
                 take `Parameters<T>` where `T` has a field `{}: String`",
                snake_case(&key.value())
            ),
        );
        return;
    };
    let Some(pattern) = struct_pattern(pat) else {
        return;
    };
    if pattern.rest.is_none() && key_field(pattern, &key.value()).is_none() {
        let fields: Vec<String> = pattern
            .fields
            .iter()
            .filter_map(|field| match &field.member {
                syn::Member::Named(ident) => Some(format!("`{ident}`")),
                syn::Member::Unnamed(_) => None,
            })
            .collect();
        let listed = if fields.is_empty() {
            "no fields".to_owned()
        } else {
            format!("the fields {}", fields.join(", "))
        };
        cx.error(
            key.span(),
            format!(
                "`idempotency_key = {:?}` names no field of `{}`, which has {listed}: add `{}: \
                 String` to it (documented, so clients know to send the same value on a resend)",
                key.value(),
                quote!(#ty).to_string().replace(' ', ""),
                snake_case(&key.value()),
            ),
        );
    }
}

/// Code proving at compile time that the field carrying the key is a
/// string, spanned at the key; empty where the signature does not show the
/// field.
pub fn field_is_a_string(tool: &ToolFn) -> TokenStream {
    let Some(key) = &tool.args.idempotency_key else {
        return TokenStream::new();
    };
    let Some((pat, ty)) = parameters(&tool.item) else {
        return TokenStream::new();
    };
    let pattern = struct_pattern(pat);
    let field = match pattern.and_then(|pattern| key_field(pattern, &key.value())) {
        Some(field) => field.to_string(),
        // Every field named and none the key: `check` said so already.
        None if pattern.is_some_and(|pattern| pattern.rest.is_none()) => {
            return TokenStream::new();
        }
        // The pattern hides the fields (`Parameters(p)`, `{ text, .. }`):
        // rustc itself checks that `T` has the field, naming the fields it
        // has. The key names the field as Rust spells it, or as serde's
        // `rename_all = "camelCase"` does (`requestId`); a key that is no
        // identifier (`request-id`, another rename) is left to the schema
        // check when the server starts.
        None => {
            let key = key.value();
            let candidate = if key.contains(|c: char| c.is_ascii_uppercase()) {
                snake_case(&key)
            } else {
                key
            };
            if syn::parse_str::<syn::Ident>(&candidate).is_err() {
                return TokenStream::new();
            }
            candidate
        }
    };
    let p = private();
    // Every token at the key, so that a wrong type or a missing field is
    // reported there.
    let field = syn::Ident::new(&field, key.span());
    quote_spanned! {key.span()=>
        #[allow(dead_code)]
        fn __idempotency_key_is_a_string(arguments: &#ty) {
            #p::idempotency_key_field(&arguments.#field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn camel_case_arguments_map_to_snake_case_fields() {
        assert_eq!(snake_case("requestId"), "request_id");
        assert_eq!(snake_case("request_id"), "request_id");
    }
}

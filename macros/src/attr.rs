//! Parsing of `#[tool(...)]` and `#[tool_router(...)]` arguments into plain
//! structs that keep the span of every key, so that later checks point at
//! the user's token. Errors are collected in a [`Ctxt`]; a bad key is
//! skipped (value included) and parsing goes on.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, Ident, LitBool, LitStr, Token, Visibility};

use mcp_hints_core::hints::{self, Hint};

use crate::ctxt::Ctxt;
use mcp_hints_core::suggest;

/// A hint-declaring flag as the user wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagKind {
    ReadOnly,
    Idempotent,
    NonIdempotent,
    Destructive,
    Additive,
    OpenWorld,
    ClosedWorld,
    /// rmcp's `annotations(<hint>_hint = <bool>)`.
    Annotation(Hint, bool),
    /// `idempotency_key = "..."`: a write made idempotent by a key.
    IdempotencyKey,
}

impl FlagKind {
    const NAMED: [FlagKind; 7] = [
        FlagKind::ReadOnly,
        FlagKind::Idempotent,
        FlagKind::NonIdempotent,
        FlagKind::Destructive,
        FlagKind::Additive,
        FlagKind::OpenWorld,
        FlagKind::ClosedWorld,
    ];

    /// The hint a flag of the core's table ([`hints::FLAGS`]) names and
    /// the value it gives it; `None` for rmcp's syntax and
    /// `idempotency_key`.
    fn names(self) -> Option<(Hint, bool)> {
        match self {
            FlagKind::ReadOnly => Some((Hint::ReadOnly, true)),
            FlagKind::Idempotent => Some((Hint::Idempotent, true)),
            FlagKind::NonIdempotent => Some((Hint::Idempotent, false)),
            FlagKind::Destructive => Some((Hint::Destructive, true)),
            FlagKind::Additive => Some((Hint::Destructive, false)),
            FlagKind::OpenWorld => Some((Hint::OpenWorld, true)),
            FlagKind::ClosedWorld => Some((Hint::OpenWorld, false)),
            FlagKind::Annotation(..) | FlagKind::IdempotencyKey => None,
        }
    }

    fn from_key(key: &str) -> Option<FlagKind> {
        let &(_, hint, value) = hints::FLAGS.iter().find(|(name, _, _)| *name == key)?;
        Self::NAMED
            .into_iter()
            .find(|kind| kind.names() == Some((hint, value)))
    }

    /// The user's syntax, quoted for messages.
    pub fn syntax(self) -> String {
        match self {
            FlagKind::Annotation(hint, value) => {
                format!("`annotations({} = {value})`", hint.rmcp_field())
            }
            FlagKind::IdempotencyKey => "`idempotency_key`".to_owned(),
            named => {
                let name = named
                    .names()
                    .and_then(|(hint, value)| hint.flag(value))
                    .expect("every named flag is in the table");
                format!("`{name}`")
            }
        }
    }
}

/// A flag with the span of its key.
#[derive(Clone, Copy, Debug)]
pub struct Flag {
    pub kind: FlagKind,
    pub span: Span,
}

/// What the author asked of the `undeclared_hints` lint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LintLevel {
    Allow,
    Warn,
    Deny,
}

/// Arguments of one `#[tool(...)]`.
#[derive(Default)]
pub struct ToolArgs {
    pub flags: Vec<Flag>,
    pub name: Option<LitStr>,
    pub title: Option<LitStr>,
    pub description: Option<Expr>,
    pub input_schema: Option<Expr>,
    pub output_schema: Option<Expr>,
    pub icons: Option<Expr>,
    pub meta: Option<Expr>,
    /// `annotations(title = "...")`.
    pub annotations_title: Option<LitStr>,
    /// `idempotency_key = "..."`: the argument carrying the key.
    pub idempotency_key: Option<LitStr>,
    pub local: bool,
    pub lint: Option<LintLevel>,
}

/// Arguments of one `#[tool_router(...)]`.
pub struct RouterArgs {
    /// Router-wide hint defaults.
    pub flags: Vec<Flag>,
    pub router: Ident,
    pub vis: Visibility,
    pub server_handler: bool,
    pub allow_empty: bool,
    pub lint: Option<LintLevel>,
}

/// The flag names, for "did you mean" (taken from the one table of flags).
const HINT_FLAGS: [&str; 7] = {
    let mut names = [""; 7];
    let mut index = 0;
    while index < names.len() {
        names[index] = hints::FLAGS[index].0;
        index += 1;
    }
    names
};
const LINT_LEVELS: [&str; 3] = ["allow", "warn", "deny"];
const TOOL_KEYS: [&str; 10] = [
    "name",
    "title",
    "description",
    "input_schema",
    "output_schema",
    "annotations",
    "icons",
    "meta",
    "local",
    "idempotency_key",
];
const ROUTER_KEYS: [&str; 4] = ["router", "vis", "server_handler", "allow_empty"];
const ANNOTATION_KEYS: [&str; 5] = [
    "title",
    Hint::ReadOnly.rmcp_field(),
    Hint::Destructive.rmcp_field(),
    Hint::Idempotent.rmcp_field(),
    Hint::OpenWorld.rmcp_field(),
];
const LINT_NAME: &str = mcp_hints_core::lint::NAME;

/// Remembers which keys were given, to reject a key given twice.
#[derive(Default)]
struct Seen(Vec<String>);

impl Seen {
    /// Records `key`; reports it when it was given before.
    fn first_time(&mut self, key: &str, span: Span, cx: &mut Ctxt) -> bool {
        if self.0.iter().any(|seen| seen == key) {
            cx.error(span, format!("`{key}` is given twice: remove one of them"));
            return false;
        }
        self.0.push(key.to_owned());
        true
    }
}

/// What `#[tool]` and `#[tool_router]` share: hint flags and the lint level.
#[derive(Default)]
struct Shared {
    flags: Vec<Flag>,
    lint: Option<(LintLevel, String)>,
    seen: Seen,
}

impl Shared {
    /// Parses `meta` when it is a hint flag or a lint level; `Ok(false)`
    /// when it is some other key.
    fn parse(&mut self, meta: &ParseNestedMeta, key: &str, cx: &mut Ctxt) -> syn::Result<bool> {
        let span = meta.path.span_of_key();
        if let Some(kind) = FlagKind::from_key(key) {
            // read_only
            if self.seen.first_time(key, span, cx) {
                self.flags.push(Flag { kind, span });
            }
            reject_value(meta, key, cx)?;
            return Ok(true);
        }
        let Some(level) = lint_level(key) else {
            return Ok(false);
        };
        // allow(undeclared_hints) | warn(undeclared_hints) | deny(undeclared_hints)
        if !parse_lint(meta, key, cx)? {
            return Ok(true);
        }
        let written = format!("{key}({LINT_NAME})");
        match &self.lint {
            None => self.lint = Some((level, written)),
            Some((_, earlier)) if *earlier == written => {
                cx.error(
                    span,
                    format!("`{written}` is given twice: remove one of them"),
                );
            }
            Some((_, earlier)) => cx.error(
                span,
                format!("`{written}` conflicts with `{earlier}`: keep one of them"),
            ),
        }
        Ok(true)
    }

    fn level(&self) -> Option<LintLevel> {
        self.lint.as_ref().map(|(level, _)| *level)
    }
}

pub fn parse_tool_args(tokens: TokenStream, cx: &mut Ctxt) -> ToolArgs {
    let mut args = ToolArgs::default();
    let mut shared = Shared::default();
    let parser = syn::meta::parser(|meta| {
        let key = key_of(&meta);
        if shared.parse(&meta, &key, cx)? {
            return Ok(());
        }
        let first = shared.seen.first_time(&key, meta.path.span_of_key(), cx);
        match key.as_str() {
            // name = "..."
            "name" => store(&mut args.name, first, str_value(&meta, &key, cx)?),
            // title = "..."
            "title" => store(&mut args.title, first, str_value(&meta, &key, cx)?),
            // description = "..." | description = <expr>
            "description" => {
                // Any expression of a string type is accepted, as in rmcp;
                // a literal of another type is caught here, at its span.
                let value = expr_value(&meta, &key, cx)?.filter(|value| match value {
                    Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(_),
                        ..
                    }) => true,
                    Expr::Lit(other) => {
                        cx.push(syn::Error::new_spanned(
                            other,
                            "`description` takes a string: a literal, a macro such as \
                             `include_str!(...)`, or a constant",
                        ));
                        false
                    }
                    _ => true,
                });
                store(&mut args.description, first, value)
            }
            // input_schema = <expr>
            "input_schema" => store(&mut args.input_schema, first, expr_value(&meta, &key, cx)?),
            // output_schema = <expr>
            "output_schema" => store(&mut args.output_schema, first, expr_value(&meta, &key, cx)?),
            // icons = <expr>
            "icons" => store(&mut args.icons, first, expr_value(&meta, &key, cx)?),
            // meta = <expr>
            "meta" => store(&mut args.meta, first, expr_value(&meta, &key, cx)?),
            // idempotency_key = "request_id"
            "idempotency_key" => {
                let span = meta.path.span_of_key();
                if let Some(field) = str_value(&meta, &key, cx)? {
                    if field.value().is_empty() {
                        cx.error(
                            field.span(),
                            "`idempotency_key` names the argument that carries the key: \
                             `idempotency_key = \"request_id\"`",
                        );
                    } else if first {
                        shared.flags.push(Flag {
                            kind: FlagKind::IdempotencyKey,
                            span,
                        });
                        args.idempotency_key = Some(field);
                    }
                }
            }
            // local | local = <bool>
            "local" => args.local = switch_value(&meta, &key, cx)?.unwrap_or(args.local),
            // annotations(title = "...", read_only_hint = <bool>, ...)
            "annotations" => {
                parse_annotations(&meta, &mut shared.flags, &mut args.annotations_title, cx)?
            }
            _ => unknown_key(
                &meta,
                &key,
                &[&HINT_FLAGS[..], &TOOL_KEYS, &LINT_LEVELS],
                cx,
            )?,
        }
        Ok(())
    });
    if let Err(error) = parser.parse2(tokens) {
        cx.push(error);
    }
    args.lint = shared.level();
    args.flags = shared.flags;
    args
}

pub fn parse_router_args(tokens: TokenStream, cx: &mut Ctxt) -> RouterArgs {
    let mut args = RouterArgs {
        flags: Vec::new(),
        router: Ident::new("tool_router", Span::call_site()),
        vis: Visibility::Inherited,
        server_handler: false,
        allow_empty: false,
        lint: None,
    };
    let mut shared = Shared::default();
    let parser = syn::meta::parser(|meta| {
        let key = key_of(&meta);
        // closed_world, ... (router-wide defaults) | allow(undeclared_hints), ...
        if shared.parse(&meta, &key, cx)? {
            return Ok(());
        }
        let first = shared.seen.first_time(&key, meta.path.span_of_key(), cx);
        match key.as_str() {
            // router = <ident>
            "router" => {
                if let Some(value) = expr_value(&meta, &key, cx)? {
                    match &value {
                        Expr::Path(path) if path.path.get_ident().is_some() => {
                            if first {
                                args.router = path.path.get_ident().cloned().expect("checked");
                            }
                        }
                        other => cx.push(syn::Error::new_spanned(
                            other,
                            "`router` takes the name of the function to generate: \
                             `router = my_router`",
                        )),
                    }
                }
            }
            // vis = "pub(crate)"
            "vis" => {
                if let Some(vis) = str_value(&meta, &key, cx)? {
                    match vis.parse::<Visibility>() {
                        Ok(parsed) if first => args.vis = parsed,
                        Ok(_) => {}
                        Err(_) => cx.error(
                            vis.span(),
                            format!(
                                "`vis` takes a visibility such as \"pub\" or \"pub(crate)\", \
                                 not {:?}",
                                vis.value()
                            ),
                        ),
                    }
                }
            }
            // server_handler | server_handler = <bool>
            "server_handler" => {
                args.server_handler = switch_value(&meta, &key, cx)?.unwrap_or(args.server_handler);
            }
            // allow_empty | allow_empty = <bool>
            "allow_empty" => {
                args.allow_empty = switch_value(&meta, &key, cx)?.unwrap_or(args.allow_empty);
            }
            _ => unknown_key(
                &meta,
                &key,
                &[&HINT_FLAGS[..], &ROUTER_KEYS, &LINT_LEVELS],
                cx,
            )?,
        }
        Ok(())
    });
    if let Err(error) = parser.parse2(tokens) {
        cx.push(error);
    }
    args.lint = shared.level();
    args.flags = shared.flags;
    args
}

fn store<T>(slot: &mut Option<T>, first: bool, value: Option<T>) {
    if first && value.is_some() {
        *slot = value;
    }
}

fn key_of(meta: &ParseNestedMeta) -> String {
    let path = &meta.path;
    quote::quote!(#path).to_string().replace(' ', "")
}

trait SpanOfKey {
    fn span_of_key(&self) -> Span;
}

impl SpanOfKey for syn::Path {
    fn span_of_key(&self) -> Span {
        use syn::spanned::Spanned;
        self.span()
    }
}

/// `key = <expr>`. Without `=`, an error at the key, and `None`.
fn expr_value(meta: &ParseNestedMeta, key: &str, cx: &mut Ctxt) -> syn::Result<Option<Expr>> {
    if !meta.input.peek(Token![=]) {
        cx.error(
            meta.path.span_of_key(),
            format!("`{key}` takes a value: `{key} = ...`"),
        );
        skip_value(meta)?;
        return Ok(None);
    }
    Ok(Some(meta.value()?.parse()?))
}

/// `key = "..."`. Anything but a string literal is an error at the value.
fn str_value(meta: &ParseNestedMeta, key: &str, cx: &mut Ctxt) -> syn::Result<Option<LitStr>> {
    Ok(match expr_value(meta, key, cx)? {
        Some(Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(lit),
            ..
        })) => Some(lit),
        Some(other) => {
            cx.push(syn::Error::new_spanned(
                other,
                format!("`{key}` takes a string literal: `{key} = \"...\"`"),
            ));
            None
        }
        None => None,
    })
}

/// `key` alone (true) or `key = <bool>`.
fn switch_value(meta: &ParseNestedMeta, key: &str, cx: &mut Ctxt) -> syn::Result<Option<bool>> {
    if !meta.input.peek(Token![=]) {
        if meta.input.peek(syn::token::Paren) {
            cx.error(
                meta.path.span_of_key(),
                format!("`{key}` takes no list: write `{key}` or `{key} = false`"),
            );
            skip_value(meta)?;
            return Ok(None);
        }
        return Ok(Some(true));
    }
    Ok(match meta.value()?.parse::<Expr>()? {
        Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Bool(LitBool { value, .. }),
            ..
        }) => Some(value),
        other => {
            cx.push(syn::Error::new_spanned(
                other,
                format!("`{key}` takes `true` or `false`"),
            ));
            None
        }
    })
}

fn lint_level(key: &str) -> Option<LintLevel> {
    match key {
        "allow" => Some(LintLevel::Allow),
        "warn" => Some(LintLevel::Warn),
        "deny" => Some(LintLevel::Deny),
        _ => None,
    }
}

/// `allow(undeclared_hints)`: true when the lint name is the one we own.
fn parse_lint(meta: &ParseNestedMeta, level: &str, cx: &mut Ctxt) -> syn::Result<bool> {
    if !meta.input.peek(syn::token::Paren) {
        cx.error(
            meta.path.span_of_key(),
            format!("`{level}` takes the lint it applies to: `{level}({LINT_NAME})`"),
        );
        skip_value(meta)?;
        return Ok(false);
    }
    let mut known = false;
    meta.parse_nested_meta(|lint| {
        let name = key_of(&lint);
        if name == LINT_NAME {
            known = true;
        } else {
            cx.error(
                lint.path.span_of_key(),
                format!("unknown lint `{name}`: the only lint here is `{LINT_NAME}`"),
            );
        }
        skip_value(&lint)
    })?;
    Ok(known)
}

fn parse_annotations(
    meta: &ParseNestedMeta,
    flags: &mut Vec<Flag>,
    title: &mut Option<LitStr>,
    cx: &mut Ctxt,
) -> syn::Result<()> {
    if !meta.input.peek(syn::token::Paren) {
        cx.error(
            meta.path.span_of_key(),
            "`annotations` takes a list: `annotations(read_only_hint = true, ...)`",
        );
        return skip_value(meta);
    }
    let content;
    syn::parenthesized!(content in meta.input);
    let content: TokenStream = content.parse()?;
    let mut seen = Seen::default();
    let parser = syn::meta::parser(|entry| {
        let key = key_of(&entry);
        let span = entry.path.span_of_key();
        let first = seen.first_time(&key, span, cx);
        if key == "title" {
            // title = "..."
            store(title, first, str_value(&entry, &key, cx)?);
            return Ok(());
        }
        if let Some(hint) = Hint::from_rmcp_field(&key) {
            // read_only_hint | read_only_hint = <bool>
            if let Some(value) = switch_value(&entry, &key, cx)?
                && first
            {
                flags.push(Flag {
                    kind: FlagKind::Annotation(hint, value),
                    span,
                });
            }
            return Ok(());
        }
        unknown_key(&entry, &key, &[&ANNOTATION_KEYS[..]], cx)
    });
    // `annotations()` is accepted, as rmcp accepts it.
    if let Err(error) = parser.parse2(content) {
        cx.push(error);
    }
    Ok(())
}

/// A hint flag takes no value: `read_only`, never `read_only = false`.
fn reject_value(meta: &ParseNestedMeta, key: &str, cx: &mut Ctxt) -> syn::Result<()> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        cx.error(
            meta.path.span_of_key(),
            format!(
                "`{key}` takes no value: write `{key}` alone, or leave it out and \
                 declare the opposite flag"
            ),
        );
        skip_value(meta)?;
    }
    Ok(())
}

fn unknown_key(
    meta: &ParseNestedMeta,
    key: &str,
    known: &[&[&str]],
    cx: &mut Ctxt,
) -> syn::Result<()> {
    let span = meta.path.span_of_key();
    let candidates: Vec<&str> = known.iter().flat_map(|keys| keys.iter().copied()).collect();
    let message = if let Some(hint) = Hint::from_rmcp_field(key) {
        format!(
            "`{key}` belongs inside `annotations(...)`: write `annotations({key} = true)`, \
             or use the flags of `#[tool]` (`{}`)",
            hint_flags_for(hint)
        )
    } else if let Some(found) = suggest::closest(key, candidates.iter().copied()) {
        format!("unknown key `{key}`: did you mean `{found}`?")
    } else {
        format!(
            "unknown key `{key}`: expected one of {}",
            candidates
                .iter()
                .map(|key| format!("`{key}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    cx.error(span, message);
    skip_value(meta)
}

/// The flags that declare `hint`, for a message that quotes them in one
/// pair of backticks: `read_only`, `destructive` or `additive`.
fn hint_flags_for(hint: Hint) -> String {
    [true, false]
        .into_iter()
        .filter_map(|value| hint.flag(value))
        .collect::<Vec<_>>()
        .join("` or `")
}

/// Consumes `= <expr>` or `(...)` after a key we reject, so that parsing can
/// go on to the next key.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        let _: Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        let _: TokenStream = content.parse()?;
    }
    Ok(())
}

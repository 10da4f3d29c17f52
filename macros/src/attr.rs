//! Parsing of `#[tool(...)]` and `#[tool_router(...)]` arguments into plain
//! structs that keep the span of every key, so that later checks point at
//! the user's token. Errors are collected in a [`Ctxt`]; a bad key is
//! skipped (value included) and parsing goes on.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Expr, Ident, LitBool, LitStr, Token, Visibility};

use crate::ctxt::Ctxt;
use crate::hint::Hint;
use crate::suggest;

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
}

impl FlagKind {
    const NAMED: [(&'static str, FlagKind); 7] = [
        ("read_only", FlagKind::ReadOnly),
        ("idempotent", FlagKind::Idempotent),
        ("non_idempotent", FlagKind::NonIdempotent),
        ("destructive", FlagKind::Destructive),
        ("additive", FlagKind::Additive),
        ("open_world", FlagKind::OpenWorld),
        ("closed_world", FlagKind::ClosedWorld),
    ];

    fn from_key(key: &str) -> Option<FlagKind> {
        Self::NAMED
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, kind)| *kind)
    }

    /// The user's syntax, quoted for messages.
    pub fn syntax(self) -> String {
        match self {
            FlagKind::Annotation(hint, value) => {
                format!("`annotations({} = {value})`", hint.rmcp_key())
            }
            named => {
                let (name, _) = Self::NAMED
                    .iter()
                    .find(|(_, kind)| *kind == named)
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

const HINT_FLAGS: [&str; 7] = [
    "read_only",
    "idempotent",
    "non_idempotent",
    "destructive",
    "additive",
    "open_world",
    "closed_world",
];
const LINT_LEVELS: [&str; 3] = ["allow", "warn", "deny"];
const TOOL_KEYS: [&str; 9] = [
    "name",
    "title",
    "description",
    "input_schema",
    "output_schema",
    "annotations",
    "icons",
    "meta",
    "local",
];
const ROUTER_KEYS: [&str; 4] = ["router", "vis", "server_handler", "allow_empty"];
const ANNOTATION_KEYS: [&str; 5] = [
    "title",
    "read_only_hint",
    "destructive_hint",
    "idempotent_hint",
    "open_world_hint",
];
const LINT_NAME: &str = "undeclared_hints";

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

pub fn parse_tool_args(tokens: TokenStream, cx: &mut Ctxt) -> ToolArgs {
    let mut args = ToolArgs::default();
    let mut seen = Seen::default();
    let parser = syn::meta::parser(|meta| {
        let key = key_of(&meta);
        let span = meta.path.span_of_key();
        if let Some(kind) = FlagKind::from_key(&key) {
            // read_only
            if seen.first_time(&key, span, cx) {
                args.flags.push(Flag { kind, span });
            }
            return reject_value(&meta, &key, cx);
        }
        if let Some(level) = lint_level(&key) {
            // allow(undeclared_hints) | warn(..) | deny(..)
            let first = seen.first_time("lint level", span, cx);
            let parsed = parse_lint(&meta, &key, cx)?;
            if first && parsed {
                args.lint = Some(level);
            }
            return Ok(());
        }
        let first = seen.first_time(&key, span, cx);
        match key.as_str() {
            // name = "..."
            "name" => store(&mut args.name, first, meta.value()?.parse()?),
            // title = "..."
            "title" => store(&mut args.title, first, meta.value()?.parse()?),
            // description = "..." | description = <expr>
            "description" => store(&mut args.description, first, meta.value()?.parse()?),
            // input_schema = <expr>
            "input_schema" => store(&mut args.input_schema, first, meta.value()?.parse()?),
            // output_schema = <expr>
            "output_schema" => store(&mut args.output_schema, first, meta.value()?.parse()?),
            // icons = <expr>
            "icons" => store(&mut args.icons, first, meta.value()?.parse()?),
            // meta = <expr>
            "meta" => store(&mut args.meta, first, meta.value()?.parse()?),
            // local | local = <bool>
            "local" => args.local = parse_switch(&meta)?,
            // annotations(title = "...", read_only_hint = <bool>, ...)
            "annotations" => parse_annotations(&meta, &mut args, cx)?,
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
    let mut seen = Seen::default();
    let parser = syn::meta::parser(|meta| {
        let key = key_of(&meta);
        let span = meta.path.span_of_key();
        if let Some(kind) = FlagKind::from_key(&key) {
            // closed_world (a router-wide default)
            if seen.first_time(&key, span, cx) {
                args.flags.push(Flag { kind, span });
            }
            return reject_value(&meta, &key, cx);
        }
        if let Some(level) = lint_level(&key) {
            // allow(undeclared_hints) | warn(..) | deny(..)
            let first = seen.first_time("lint level", span, cx);
            let parsed = parse_lint(&meta, &key, cx)?;
            if first && parsed {
                args.lint = Some(level);
            }
            return Ok(());
        }
        let first = seen.first_time(&key, span, cx);
        match key.as_str() {
            // router = <ident>
            "router" => {
                let router: Ident = meta.value()?.parse()?;
                if first {
                    args.router = router;
                }
            }
            // vis = "pub(crate)"
            "vis" => {
                let vis: LitStr = meta.value()?.parse()?;
                let vis = vis.parse::<Visibility>()?;
                if first {
                    args.vis = vis;
                }
            }
            // server_handler
            "server_handler" => args.server_handler = parse_switch(&meta)?,
            // allow_empty
            "allow_empty" => args.allow_empty = parse_switch(&meta)?,
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
    args
}

fn store<T>(slot: &mut Option<T>, first: bool, value: T) {
    if first {
        *slot = Some(value);
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

/// `local` or `local = true`.
fn parse_switch(meta: &ParseNestedMeta) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) {
        let value: LitBool = meta.value()?.parse()?;
        return Ok(value.value);
    }
    Ok(true)
}

fn parse_annotations(
    meta: &ParseNestedMeta,
    args: &mut ToolArgs,
    cx: &mut Ctxt,
) -> syn::Result<()> {
    let mut seen = Seen::default();
    meta.parse_nested_meta(|entry| {
        let key = key_of(&entry);
        let span = entry.path.span_of_key();
        let first = seen.first_time(&key, span, cx);
        if key == "title" {
            // title = "..."
            let title: LitStr = entry.value()?.parse()?;
            store(&mut args.annotations_title, first, title);
            return Ok(());
        }
        if let Some(hint) = Hint::from_rmcp_key(&key) {
            // read_only_hint = <bool>
            let value = entry.value()?;
            let value: Expr = value.parse()?;
            match &value {
                Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Bool(lit),
                    ..
                }) => {
                    if first {
                        args.flags.push(Flag {
                            kind: FlagKind::Annotation(hint, lit.value),
                            span,
                        });
                    }
                }
                other => cx.push(syn::Error::new_spanned(
                    other,
                    format!("`{key}` takes `true` or `false`"),
                )),
            }
            return Ok(());
        }
        unknown_key(&entry, &key, &[&ANNOTATION_KEYS[..]], cx)
    })
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
    let message = if let Some(hint) = Hint::from_rmcp_key(key) {
        format!(
            "`{key}` belongs inside `annotations(...)`: write `annotations({key} = true)`, \
             or use the flags of `#[tool]` (`{}`)",
            hint_flags_for(hint)
        )
    } else if let Some(found) = suggest::closest(key, &candidates) {
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

fn hint_flags_for(hint: Hint) -> &'static str {
    match hint {
        Hint::ReadOnly => "read_only",
        Hint::Destructive => "destructive` or `additive",
        Hint::Idempotent => "idempotent` or `non_idempotent",
        Hint::OpenWorld => "open_world` or `closed_world",
    }
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

//! The `undeclared_hints` rule and the one function that words it, and
//! the contradictions between hints: what `#[tool]`'s build warning and
//! compile errors, `mcp-hints lint` and the gateway all say.
//!
//! A tool is fully declared when its read/write side is settled
//! (readOnlyHint declared true, or both destructiveHint and idempotentHint
//! declared) and its world is settled (openWorldHint declared). Anything
//! less leaves clients to the spec's pessimistic defaults (see
//! [`Hint::spec_default`]), and [`undeclared_hints`] says which hints,
//! what clients then assume and do, and what fixes it.
//!
//! Source: MCP schema `ToolAnnotations` (2025-06-18, 2025-11-25,
//! 2026-07-28): destructiveHint and idempotentHint are meaningful only when
//! readOnlyHint is false, which is why readOnlyHint true beside
//! destructiveHint true or idempotentHint false is a [`Contradiction`].

use crate::hints::Hint;

/// The lint's name: `#[tool(allow(undeclared_hints))]`, `mcp-hints lint
/// --allow undeclared_hints`.
pub const NAME: &str = "undeclared_hints";

/// How a `#[tool]` author silences the lint for one tool.
pub const SILENCE: &str = "#[tool(allow(undeclared_hints))]";

/// One hint of a tool: its value on the wire and whether the author
/// declared it (on the tool, or as a router-wide default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintState {
    /// The value a client acts on: the declared one, else the spec
    /// default.
    pub value: bool,
    /// Whether the author declared it; false when it was left to the
    /// spec default.
    pub declared: bool,
}

impl HintState {
    /// A hint the author declared `value`.
    pub const fn declared(value: bool) -> HintState {
        HintState {
            value,
            declared: true,
        }
    }

    /// `hint` left to its [spec default](Hint::spec_default).
    pub const fn defaulted(hint: Hint) -> HintState {
        HintState {
            value: hint.spec_default(),
            declared: false,
        }
    }
}

/// The four hints of one tool, each a [`HintState`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declarations([HintState; 4]);

impl Declarations {
    /// The hints `state` gives, called once per hint in [`Hint::ALL`]
    /// order.
    pub fn from_fn(mut state: impl FnMut(Hint) -> HintState) -> Declarations {
        Declarations(Hint::ALL.map(&mut state))
    }

    /// One hint's state.
    pub fn get(&self, hint: Hint) -> HintState {
        self.0[hint.index()]
    }

    fn is_declared(&self, hint: Hint) -> bool {
        self.get(hint).declared
    }

    /// Whether the read/write side is settled: readOnlyHint declared true,
    /// or both destructiveHint and idempotentHint declared (they say the
    /// tool writes, and how).
    pub fn read_write_settled(&self) -> bool {
        let read_only = self.get(Hint::ReadOnly);
        read_only.value && read_only.declared
            || self.is_declared(Hint::Destructive) && self.is_declared(Hint::Idempotent)
    }

    /// Whether the world is settled: openWorldHint declared.
    pub fn world_settled(&self) -> bool {
        self.is_declared(Hint::OpenWorld)
    }

    /// The hints the lint reports, in schema order: those of an unsettled
    /// read/write side that are not declared, and openWorldHint when not
    /// declared. Empty for a fully declared tool.
    pub fn undeclared(&self) -> Vec<Hint> {
        let mut open = Vec::new();
        if !self.read_write_settled() {
            open.extend(
                [Hint::ReadOnly, Hint::Destructive, Hint::Idempotent]
                    .into_iter()
                    .filter(|hint| !self.is_declared(*hint)),
            );
        }
        if !self.world_settled() {
            open.push(Hint::OpenWorld);
        }
        open
    }

    /// The contradictions among the declared hints, in
    /// [`Contradiction::ALL`] order: none unless readOnlyHint is declared
    /// true.
    pub fn contradictions(&self) -> Vec<Contradiction> {
        let read_only = self.get(Hint::ReadOnly);
        if !(read_only.value && read_only.declared) {
            return Vec::new();
        }
        Contradiction::ALL
            .into_iter()
            .filter(|contradiction| {
                let state = self.get(contradiction.hint());
                state.declared && state.value == contradiction.value()
            })
            .collect()
    }
}

/// What fixes one part of an undeclared tool, in `#[tool]` flags
/// ([`Fix::flags`]) or in the wire's fields ([`Fix::wire`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fix {
    /// The read/write side: readOnlyHint true, or both destructiveHint and
    /// idempotentHint.
    ReadWrite,
    /// idempotentHint, on a tool that writes.
    Idempotency,
    /// destructiveHint, on a tool that writes.
    Destructiveness,
    /// openWorldHint.
    World,
}

impl Fix {
    /// The fix in `#[tool]` flags, each flag written by `flag` (given
    /// `read_only`, it returns how the flag is shown: `` `read_only` `` or
    /// `` `#[tool(read_only)]` ``):
    /// `` `read_only` (or `idempotent`/`non_idempotent` with `destructive`/`additive`) ``,
    /// `` `idempotent` or `non_idempotent` ``, `` `destructive` or `additive` ``,
    /// `` `open_world` or `closed_world` ``.
    pub fn flags(self, flag: impl Fn(&str) -> String) -> String {
        let named = |hint: Hint, value: bool| flag(hint.flag(value).unwrap_or_default());
        let either = |hint: Hint| format!("{} or {}", named(hint, true), named(hint, false));
        match self {
            Fix::ReadWrite => format!(
                "{} (or {}/{} with {}/{})",
                named(Hint::ReadOnly, true),
                named(Hint::Idempotent, true),
                named(Hint::Idempotent, false),
                named(Hint::Destructive, true),
                named(Hint::Destructive, false),
            ),
            Fix::Idempotency => either(Hint::Idempotent),
            Fix::Destructiveness => either(Hint::Destructive),
            Fix::World => either(Hint::OpenWorld),
        }
    }

    /// The fix in the wire's fields: `readOnlyHint true, or both
    /// destructiveHint and idempotentHint`, `idempotentHint`,
    /// `destructiveHint`, `openWorldHint`.
    pub fn wire(self) -> &'static str {
        match self {
            Fix::ReadWrite => "readOnlyHint true, or both destructiveHint and idempotentHint",
            Fix::Idempotency => Hint::Idempotent.wire_name(),
            Fix::Destructiveness => Hint::Destructive.wire_name(),
            Fix::World => Hint::OpenWorld.wire_name(),
        }
    }
}

/// A tool that leaves hints undeclared, worded by its methods: the
/// finding of `undeclared_hints`, from [`undeclared_hints`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Undeclared {
    tool: String,
    hints: Vec<Hint>,
    assumed: Vec<String>,
    consequences: Vec<String>,
    fixes: Vec<Fix>,
}

/// The `undeclared_hints` finding for the tool named `tool` (as it is to
/// be shown: escape a peer's name first) with `hints`, or `None` when the
/// tool is fully declared ([`Declarations::undeclared`] is empty).
///
/// What clients then do, each only where it follows: on a write that is
/// not idempotent with readOnlyHint or idempotentHint open, they "will
/// never resend `tool` after a timeout (they must read back first)"; on a
/// write with destructiveHint open, they "may ask for confirmation before
/// every call"; with openWorldHint open, they "will treat it as reaching
/// external entities".
pub fn undeclared_hints(tool: &str, hints: &Declarations) -> Option<Undeclared> {
    let open = hints.undeclared();
    if open.is_empty() {
        return None;
    }
    let is_open = |hint| open.contains(&hint);
    let writes = !hints.get(Hint::ReadOnly).value;
    let mut consequences = Vec::new();
    if writes
        && !hints.get(Hint::Idempotent).value
        && (is_open(Hint::ReadOnly) || is_open(Hint::Idempotent))
    {
        consequences.push(format!(
            "will never resend `{tool}` after a timeout (they must read back first)"
        ));
    }
    if writes && is_open(Hint::Destructive) {
        consequences.push("may ask for confirmation before every call".to_owned());
    }
    if is_open(Hint::OpenWorld) {
        consequences.push("will treat it as reaching external entities".to_owned());
    }
    let mut fixes = Vec::new();
    if is_open(Hint::ReadOnly) {
        fixes.push(Fix::ReadWrite);
    } else {
        if is_open(Hint::Idempotent) {
            fixes.push(Fix::Idempotency);
        }
        if is_open(Hint::Destructive) {
            fixes.push(Fix::Destructiveness);
        }
    }
    if is_open(Hint::OpenWorld) {
        fixes.push(Fix::World);
    }
    Some(Undeclared {
        tool: tool.to_owned(),
        assumed: open
            .iter()
            .map(|hint| format!("{hint} {}", hint.spec_default()))
            .collect(),
        hints: open,
        consequences,
        fixes,
    })
}

impl Undeclared {
    /// The hints left undeclared, in schema order.
    pub fn hints(&self) -> &[Hint] {
        &self.hints
    }

    /// What fixes it, in the order the words name them.
    pub fn fixes(&self) -> &[Fix] {
        &self.fixes
    }

    /// `tool `append_note` leaves idempotentHint and openWorldHint
    /// undeclared`.
    pub fn message(&self) -> String {
        let names: Vec<&str> = self.hints.iter().map(|hint| hint.wire_name()).collect();
        format!("tool `{}` leaves {} undeclared", self.tool, join(&names))
    }

    /// What clients assume and then do: `clients will assume idempotentHint
    /// false: they will never resend `append_note` after a timeout (they
    /// must read back first)`.
    pub fn note(&self) -> String {
        format!(
            "clients will assume {}: they {}",
            join(&self.assumed),
            join(&self.consequences)
        )
    }

    /// The fixes in `#[tool]` flags, each written by `flag` (see
    /// [`Fix::flags`]), joined with `, and `.
    pub fn flag_fixes(&self, flag: impl Fn(&str) -> String) -> String {
        self.fixes
            .iter()
            .map(|fix| fix.flags(&flag))
            .collect::<Vec<_>>()
            .join(", and ")
    }

    /// The help for a server written in any language: `declare
    /// idempotentHint and openWorldHint in the tool's `annotations``, or
    /// `declare readOnlyHint true, or both destructiveHint and
    /// idempotentHint; and openWorldHint in ...`.
    pub fn wire_help(&self) -> String {
        let fixes = match self.fixes.split_first() {
            Some((Fix::ReadWrite, rest)) if !rest.is_empty() => {
                let rest: Vec<&str> = rest.iter().map(|fix| fix.wire()).collect();
                format!("{}; and {}", Fix::ReadWrite.wire(), join(&rest))
            }
            _ => join(&self.fixes.iter().map(|fix| fix.wire()).collect::<Vec<_>>()),
        };
        format!("declare {fixes} in the tool's `annotations`")
    }

    /// The whole message of `#[tool]`'s build warning: [`message`],
    /// [`note`], the flags that fix it and how to silence it ([`SILENCE`]).
    ///
    /// [`message`]: Self::message
    /// [`note`]: Self::note
    pub fn warning(&self) -> String {
        format!(
            "{}, so {}; declare {}, or silence it with `{SILENCE}`",
            self.message(),
            self.note(),
            self.flag_fixes(|flag| format!("`{flag}`"))
        )
    }
}

/// A hint declared beside readOnlyHint true that contradicts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Contradiction {
    /// destructiveHint true: a read destroys nothing.
    DestructiveRead,
    /// idempotentHint false: a read has no effect to repeat.
    NonIdempotentRead,
}

impl Contradiction {
    /// Both, in schema order of their hints.
    pub const ALL: [Contradiction; 2] = [
        Contradiction::DestructiveRead,
        Contradiction::NonIdempotentRead,
    ];

    /// The contradiction of declaring `hint` `value` beside readOnlyHint
    /// true, if it is one.
    pub fn of(hint: Hint, value: bool) -> Option<Contradiction> {
        Contradiction::ALL
            .into_iter()
            .find(|contradiction| contradiction.hint() == hint && contradiction.value() == value)
    }

    /// The hint that contradicts readOnlyHint true.
    pub const fn hint(self) -> Hint {
        match self {
            Contradiction::DestructiveRead => Hint::Destructive,
            Contradiction::NonIdempotentRead => Hint::Idempotent,
        }
    }

    /// The value of [`hint`](Self::hint) that contradicts it.
    pub const fn value(self) -> bool {
        match self {
            Contradiction::DestructiveRead => true,
            Contradiction::NonIdempotentRead => false,
        }
    }

    /// Why, in the words every message uses: `a read-only tool destroys
    /// nothing`.
    pub const fn reason(self) -> &'static str {
        match self {
            Contradiction::DestructiveRead => "a read-only tool destroys nothing",
            Contradiction::NonIdempotentRead => {
                "a read-only tool has no effect to repeat, so it is idempotent"
            }
        }
    }

    /// `tool `peek` declares readOnlyHint true and destructiveHint true`,
    /// `tool` as it is to be shown.
    pub fn message(self, tool: &str) -> String {
        format!(
            "tool `{tool}` declares {} true and {} {}",
            Hint::ReadOnly,
            self.hint(),
            self.value()
        )
    }

    /// The [`reason`](Self::reason) and the fix on the wire: `a read-only
    /// tool destroys nothing: drop destructiveHint, or set readOnlyHint
    /// false if it writes`.
    pub fn wire_help(self) -> String {
        format!(
            "{}: drop {}, or set {} false if it writes",
            self.reason(),
            self.hint(),
            Hint::ReadOnly
        )
    }
}

/// Items as one phrase: `a`, `a and b`, `a, b and c`; empty for none.
pub fn join(items: &[impl AsRef<str>]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_owned(),
        [init @ .., last] => format!(
            "{} and {}",
            init.iter()
                .map(AsRef::as_ref)
                .collect::<Vec<_>>()
                .join(", "),
            last.as_ref()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(states: [Option<bool>; 4]) -> Declarations {
        Declarations::from_fn(|hint| match states[hint.index()] {
            Some(value) => HintState::declared(value),
            None => HintState::defaulted(hint),
        })
    }

    #[test]
    fn settled_by_read_only_or_by_both_write_hints() {
        assert!(
            tool([Some(true), None, None, Some(false)])
                .undeclared()
                .is_empty()
        );
        assert!(
            tool([None, Some(false), Some(true), Some(true)])
                .undeclared()
                .is_empty()
        );
        assert_eq!(
            tool([Some(false), None, Some(true), Some(true)]).undeclared(),
            [Hint::Destructive]
        );
        assert_eq!(tool([None; 4]).undeclared(), Hint::ALL);
        assert_eq!(
            tool([Some(true), None, None, None]).undeclared(),
            [Hint::OpenWorld]
        );
    }

    #[test]
    fn the_warning_names_hints_defaults_consequences_and_flags() {
        let finding = undeclared_hints("touch", &tool([None; 4])).unwrap();
        assert_eq!(
            finding.warning(),
            "tool `touch` leaves readOnlyHint, destructiveHint, idempotentHint and openWorldHint \
             undeclared, so clients will assume readOnlyHint false, destructiveHint true, \
             idempotentHint false and openWorldHint true: they will never resend `touch` after a \
             timeout (they must read back first), may ask for confirmation before every call and \
             will treat it as reaching external entities; declare `read_only` (or \
             `idempotent`/`non_idempotent` with `destructive`/`additive`), and `open_world` or \
             `closed_world`, or silence it with `#[tool(allow(undeclared_hints))]`"
        );
        assert_eq!(
            finding.wire_help(),
            "declare readOnlyHint true, or both destructiveHint and idempotentHint; and \
             openWorldHint in the tool's `annotations`"
        );
        let write = undeclared_hints("save", &tool([Some(false), Some(false), None, None]));
        assert_eq!(
            write.unwrap().wire_help(),
            "declare idempotentHint and openWorldHint in the tool's `annotations`"
        );
        assert_eq!(
            undeclared_hints("ok", &tool([Some(true), None, None, Some(true)])),
            None
        );
        assert!(SILENCE.contains(NAME));
    }

    #[test]
    fn contradictions_need_read_only_declared_true() {
        let both = tool([Some(true), Some(true), Some(false), None]);
        assert_eq!(both.contradictions(), Contradiction::ALL);
        assert_eq!(
            tool([None, Some(true), Some(false), None]).contradictions(),
            []
        );
        assert_eq!(
            Contradiction::DestructiveRead.wire_help(),
            "a read-only tool destroys nothing: drop destructiveHint, or set readOnlyHint false \
             if it writes"
        );
        assert_eq!(
            Contradiction::NonIdempotentRead.message("peek"),
            "tool `peek` declares readOnlyHint true and idempotentHint false"
        );
        assert_eq!(
            Contradiction::of(Hint::Idempotent, false),
            Some(Contradiction::NonIdempotentRead)
        );
        assert_eq!(Contradiction::of(Hint::Idempotent, true), None);
    }

    #[test]
    fn join_reads_as_a_phrase() {
        assert_eq!(join(&[] as &[&str]), "");
        assert_eq!(join(&["a"]), "a");
        assert_eq!(join(&["a", "b", "c"]), "a, b and c");
    }
}

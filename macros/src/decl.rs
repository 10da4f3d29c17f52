//! From flags to hint declarations: what each flag declares (DESIGN.md's
//! flag table), the contradictions between flags, and how router-wide
//! defaults fill what a tool leaves open.

use mcp_hints_core::hints::Hint;
use mcp_hints_core::lint::{Contradiction, Declarations, HintState};

use crate::attr::{Flag, FlagKind};
use crate::ctxt::Ctxt;

/// One hint's declaration: its value and the flag that declared it.
#[derive(Clone, Copy, Debug)]
pub struct Decl {
    pub value: bool,
    pub by: Flag,
    /// Declared as a consequence of `read_only` (destructiveHint false,
    /// idempotentHint true), not by a flag naming the hint itself.
    pub implied: bool,
}

/// The declarations of the four hints, indexed by [`Hint::index`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Decls([Option<Decl>; 4]);

impl Decls {
    pub fn get(&self, hint: Hint) -> Option<Decl> {
        self.0[hint.index()]
    }

    /// The value on the wire: the declared one, else the spec default.
    pub fn effective(&self, hint: Hint) -> bool {
        self.get(hint)
            .map_or_else(|| hint.spec_default(), |decl| decl.value)
    }

    pub fn is_declared(&self, hint: Hint) -> bool {
        self.get(hint).is_some()
    }

    /// Each hint's value on the wire and whether it is declared, as the
    /// core's `undeclared_hints` rule reads them.
    pub fn states(&self) -> Declarations {
        Declarations::from_fn(|hint| HintState {
            value: self.effective(hint),
            declared: self.is_declared(hint),
        })
    }

    /// Fills what the tool leaves open with the router's defaults. A router's
    /// `read_only` (and what it implies) never reaches a tool that declares a
    /// write.
    pub fn with_defaults(mut self, router: &Decls) -> Decls {
        let tool_writes = self.get(Hint::ReadOnly).is_some_and(|decl| !decl.value);
        for hint in Hint::ALL {
            if self.is_declared(hint) {
                continue;
            }
            let Some(default) = router.get(hint) else {
                continue;
            };
            let from_read_only = default.implied || (hint == Hint::ReadOnly && default.value);
            if tool_writes && from_read_only {
                continue;
            }
            self.0[hint.index()] = Some(default);
        }
        self
    }
}

/// What a flag declares.
fn declarations(kind: FlagKind) -> &'static [(Hint, bool, bool)] {
    // (hint, value, implied)
    match kind {
        FlagKind::ReadOnly | FlagKind::Annotation(Hint::ReadOnly, true) => &[
            (Hint::ReadOnly, true, false),
            (Hint::Destructive, false, true),
            (Hint::Idempotent, true, true),
        ],
        FlagKind::Idempotent | FlagKind::IdempotencyKey => &[
            (Hint::ReadOnly, false, false),
            (Hint::Idempotent, true, false),
        ],
        FlagKind::NonIdempotent => &[
            (Hint::ReadOnly, false, false),
            (Hint::Idempotent, false, false),
        ],
        FlagKind::Destructive => &[
            (Hint::ReadOnly, false, false),
            (Hint::Destructive, true, false),
        ],
        FlagKind::Additive => &[
            (Hint::ReadOnly, false, false),
            (Hint::Destructive, false, false),
        ],
        FlagKind::OpenWorld => &[(Hint::OpenWorld, true, false)],
        FlagKind::ClosedWorld => &[(Hint::OpenWorld, false, false)],
        FlagKind::Annotation(Hint::ReadOnly, false) => &[(Hint::ReadOnly, false, false)],
        FlagKind::Annotation(Hint::Destructive, true) => &[(Hint::Destructive, true, false)],
        FlagKind::Annotation(Hint::Destructive, false) => &[(Hint::Destructive, false, false)],
        FlagKind::Annotation(Hint::Idempotent, true) => &[(Hint::Idempotent, true, false)],
        FlagKind::Annotation(Hint::Idempotent, false) => &[(Hint::Idempotent, false, false)],
        FlagKind::Annotation(Hint::OpenWorld, true) => &[(Hint::OpenWorld, true, false)],
        FlagKind::Annotation(Hint::OpenWorld, false) => &[(Hint::OpenWorld, false, false)],
    }
}

/// Resolves flags, in the order written, into declarations. A flag that
/// declares a hint differently from an earlier flag is an error spanned at
/// the later flag; the earlier declaration stands.
pub fn resolve(flags: &[Flag], cx: &mut Ctxt) -> Decls {
    let mut decls = Decls::default();
    // rmcp's `destructive_hint`/`idempotent_hint` speak of a write, as the
    // flags `destructive`/`idempotent` do, but only where nothing declares
    // readOnlyHint: `read_only_hint = true, destructive_hint = false` is a
    // common, consistent rmcp spelling of a read.
    let mut write_hint: Option<Flag> = None;
    for flag in flags {
        let mut contradicted = None;
        for &(hint, value, _) in declarations(flag.kind) {
            if let Some(earlier) = decls.get(hint)
                && earlier.value != value
            {
                contradicted = Some((hint, earlier));
                break;
            }
        }
        if let Some((hint, earlier)) = contradicted {
            cx.error(flag.span, contradiction(flag.kind, earlier.by.kind, hint));
            continue;
        }
        if matches!(
            flag.kind,
            FlagKind::Annotation(Hint::Destructive | Hint::Idempotent, _)
        ) {
            write_hint.get_or_insert(*flag);
        }
        for &(hint, value, implied) in declarations(flag.kind) {
            let slot = &mut decls.0[hint.index()];
            // An explicit declaration outranks the same value implied by
            // `read_only`, so messages name the flag the user wrote.
            if slot.is_none_or(|decl| decl.implied && !implied) {
                *slot = Some(Decl {
                    value,
                    by: *flag,
                    implied,
                });
            }
        }
    }
    if let Some(flag) = write_hint
        && !decls.is_declared(Hint::ReadOnly)
    {
        decls.0[Hint::ReadOnly.index()] = Some(Decl {
            value: false,
            by: flag,
            implied: true,
        });
    }
    decls
}

/// "`later` contradicts `earlier`: why".
fn contradiction(later: FlagKind, earlier: FlagKind, hint: Hint) -> String {
    let is_read_only = |kind| {
        matches!(
            kind,
            FlagKind::ReadOnly | FlagKind::Annotation(Hint::ReadOnly, true)
        )
    };
    let pair = |a: FlagKind, b: FlagKind| -> Option<FlagKind> {
        if is_read_only(a) {
            Some(b)
        } else if is_read_only(b) {
            Some(a)
        } else {
            None
        }
    };
    let keyed = [later, earlier].contains(&FlagKind::IdempotencyKey);
    let beside_read_only = pair(later, earlier);
    // A hint that contradicts readOnlyHint true on the wire has the core's
    // reason, the one `mcp-hints lint` gives.
    let on_the_wire = beside_read_only.and_then(|kind| {
        declarations(kind)
            .iter()
            .find_map(|&(hint, value, _)| Contradiction::of(hint, value))
    });
    let why = match (beside_read_only, on_the_wire) {
        (_, Some(contradiction)) => contradiction.reason().to_owned(),
        (Some(FlagKind::IdempotencyKey), None) => {
            "a read has no effect to repeat, so it needs no idempotency key".to_owned()
        }
        (Some(FlagKind::Idempotent), None) => {
            "`idempotent` declares a write (readOnlyHint false); a \
             read-only tool is idempotent already, so drop `idempotent`"
                .to_owned()
        }
        (Some(FlagKind::Additive), None) => {
            "`additive` declares a write (readOnlyHint false) that only adds".to_owned()
        }
        (Some(_), None) => "`read_only` declares a tool that writes nothing".to_owned(),
        (None, None) => match hint {
            Hint::Idempotent if keyed => {
                let other = if later == FlagKind::IdempotencyKey {
                    earlier
                } else {
                    later
                };
                format!(
                    "`idempotency_key` makes the tool idempotent by key (a resend with the same \
                     key is not run again), so it declares idempotentHint true; drop {}",
                    other.syntax()
                )
            }
            Hint::Idempotent => {
                "a tool is idempotent or it is not: keep the one that is true".to_owned()
            }
            Hint::Destructive => {
                "a write either may destroy or overwrite (`destructive`) or only adds (`additive`)"
                    .to_owned()
            }
            Hint::OpenWorld => {
                "a tool reaches external entities (`open_world`) or stays in its own domain \
                 (`closed_world`)"
                    .to_owned()
            }
            Hint::ReadOnly => format!(
                "{} declares readOnlyHint {}, {} declares it {}",
                earlier.syntax(),
                !declares_write(earlier),
                later.syntax(),
                !declares_write(later)
            ),
        },
    };
    let fix = rmcp_fix(later, earlier)
        .map(|fix| format!("; {fix}"))
        .unwrap_or_default();
    format!(
        "{} contradicts {}: {why}{fix}",
        later.syntax(),
        earlier.syntax()
    )
}

/// For a contradiction written wholly in rmcp's `annotations(...)` syntax
/// (which rmcp itself compiles, putting the contradiction on the wire), the
/// fix in that syntax.
fn rmcp_fix(later: FlagKind, earlier: FlagKind) -> Option<String> {
    let (FlagKind::Annotation(a, a_value), FlagKind::Annotation(b, b_value)) = (later, earlier)
    else {
        return None;
    };
    let contradiction = match (a, a_value, b, b_value) {
        (Hint::ReadOnly, true, other, value) | (other, value, Hint::ReadOnly, true) => {
            Contradiction::of(other, value)?
        }
        _ => return None,
    };
    Some(format!(
        "rmcp compiles this, and clients then see a contradiction: write `{} = {}` (or leave it \
         out), or `{} = false` if the tool writes",
        contradiction.hint().rmcp_field(),
        !contradiction.value(),
        Hint::ReadOnly.rmcp_field()
    ))
}

fn declares_write(kind: FlagKind) -> bool {
    declarations(kind)
        .iter()
        .any(|&(hint, value, _)| hint == Hint::ReadOnly && !value)
}

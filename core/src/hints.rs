//! The four MCP tool hints of `ToolAnnotations`: each one's wire name,
//! rmcp field, `#[tool]` flags, spec default and meaning.
//!
//! Source: MCP schema `ToolAnnotations`, revisions 2025-06-18, 2025-11-25
//! and 2026-07-28, which agree on the names, meanings and defaults:
//!
//! | hint | wire name | rmcp field | flags (true / false) | spec default | meaning when true |
//! |---|---|---|---|---|---|
//! | [`Hint::ReadOnly`] | `readOnlyHint` | `read_only_hint` | `read_only` / (any write flag) | false | does not modify its environment |
//! | [`Hint::Destructive`] | `destructiveHint` | `destructive_hint` | `destructive` / `additive` | true | may destroy or overwrite (false: only adds) |
//! | [`Hint::Idempotent`] | `idempotentHint` | `idempotent_hint` | `idempotent` / `non_idempotent` | false | repeating the same arguments has no further effect |
//! | [`Hint::OpenWorld`] | `openWorldHint` | `open_world_hint` | `open_world` / `closed_world` | true | talks to an open world of external entities |
//!
//! destructiveHint and idempotentHint are meaningful only when readOnlyHint
//! is false. A tool that leaves every hint out is, by the spec, a
//! destructive, non-idempotent write to an open world.

use std::fmt;

/// One of the four boolean hints of `ToolAnnotations`, in the order of the
/// spec's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hint {
    /// `readOnlyHint`: the tool does not modify its environment.
    ReadOnly,
    /// `destructiveHint`: the tool may destroy or overwrite (false: it only
    /// adds). Meaningful only when readOnlyHint is false.
    Destructive,
    /// `idempotentHint`: repeating the call with the same arguments has no
    /// further effect. Meaningful only when readOnlyHint is false.
    Idempotent,
    /// `openWorldHint`: the tool interacts with an open world of external
    /// entities.
    OpenWorld,
}

/// The `#[tool]` flags that name a hint, each as `(flag, hint, value)`: the
/// flag declares `hint` to be `value` (flags that declare a write also
/// declare readOnlyHint false, and `read_only` also declares
/// destructiveHint false and idempotentHint true; see `mcp_hints::tool`).
/// In the order the macros' documentation lists them.
pub const FLAGS: [(&str, Hint, bool); 7] = [
    named(Hint::ReadOnly, true),
    named(Hint::Idempotent, true),
    named(Hint::Idempotent, false),
    named(Hint::Destructive, true),
    named(Hint::Destructive, false),
    named(Hint::OpenWorld, true),
    named(Hint::OpenWorld, false),
];

/// A row of [`FLAGS`]: the flag of `hint` `value`, which must have one.
const fn named(hint: Hint, value: bool) -> (&'static str, Hint, bool) {
    match hint.flag(value) {
        Some(flag) => (flag, hint, value),
        None => panic!("readOnlyHint false has no flag of its own"),
    }
}

impl Hint {
    /// All four hints, in the order of the spec's schema.
    pub const ALL: [Hint; 4] = [
        Hint::ReadOnly,
        Hint::Destructive,
        Hint::Idempotent,
        Hint::OpenWorld,
    ];

    /// The hint's place in [`Hint::ALL`], 0 to 3: an index into a
    /// `[T; 4]` of per-hint values.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The field name in `ToolAnnotations` on the wire, e.g.
    /// `"readOnlyHint"`.
    pub const fn wire_name(self) -> &'static str {
        match self {
            Hint::ReadOnly => "readOnlyHint",
            Hint::Destructive => "destructiveHint",
            Hint::Idempotent => "idempotentHint",
            Hint::OpenWorld => "openWorldHint",
        }
    }

    /// The field of rmcp's `ToolAnnotations`, which is also the key of
    /// rmcp's `#[tool(annotations(...))]` syntax, e.g. `"read_only_hint"`.
    pub const fn rmcp_field(self) -> &'static str {
        match self {
            Hint::ReadOnly => "read_only_hint",
            Hint::Destructive => "destructive_hint",
            Hint::Idempotent => "idempotent_hint",
            Hint::OpenWorld => "open_world_hint",
        }
    }

    /// The hint whose [`wire_name`](Self::wire_name) is `name` (exactly,
    /// case included); `None` for any other text.
    pub fn from_wire_name(name: &str) -> Option<Hint> {
        Hint::ALL.into_iter().find(|hint| hint.wire_name() == name)
    }

    /// The hint whose [`rmcp_field`](Self::rmcp_field) is `field`; `None`
    /// for any other text.
    pub fn from_rmcp_field(field: &str) -> Option<Hint> {
        Hint::ALL
            .into_iter()
            .find(|hint| hint.rmcp_field() == field)
    }

    /// The `#[tool]` flag that declares this hint `value` (one of
    /// [`FLAGS`]): `read_only`, `destructive`/`additive`,
    /// `idempotent`/`non_idempotent`, `open_world`/`closed_world`. `None`
    /// for readOnlyHint false, which every write flag declares and no flag
    /// names alone.
    pub const fn flag(self, value: bool) -> Option<&'static str> {
        match (self, value) {
            (Hint::ReadOnly, true) => Some("read_only"),
            (Hint::ReadOnly, false) => None,
            (Hint::Destructive, true) => Some("destructive"),
            (Hint::Destructive, false) => Some("additive"),
            (Hint::Idempotent, true) => Some("idempotent"),
            (Hint::Idempotent, false) => Some("non_idempotent"),
            (Hint::OpenWorld, true) => Some("open_world"),
            (Hint::OpenWorld, false) => Some("closed_world"),
        }
    }

    /// What the hint says of a tool when true, in the spec's words
    /// (lowercase, no subject): `"does not modify its environment"`.
    pub const fn meaning(self) -> &'static str {
        match self {
            Hint::ReadOnly => "does not modify its environment",
            Hint::Destructive => "may destroy or overwrite (false: only adds)",
            Hint::Idempotent => "has no further effect when repeated with the same arguments",
            Hint::OpenWorld => "interacts with an open world of external entities",
        }
    }

    /// The value a client must assume when the hint is absent: false for
    /// readOnlyHint and idempotentHint, true for destructiveHint and
    /// openWorldHint (the pessimistic spec defaults).
    pub const fn spec_default(self) -> bool {
        matches!(self, Hint::Destructive | Hint::OpenWorld)
    }
}

/// The hint's [`wire_name`](Hint::wire_name).
impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.wire_name())
    }
}

/// A hint serialises as its [`wire_name`](Hint::wire_name)
/// (`"readOnlyHint"`).
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl serde::Serialize for Hint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.wire_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_both_ways() {
        for hint in Hint::ALL {
            assert_eq!(Hint::ALL[hint.index()], hint);
            assert_eq!(Hint::from_wire_name(hint.wire_name()), Some(hint));
            assert_eq!(Hint::from_rmcp_field(hint.rmcp_field()), Some(hint));
            assert_eq!(hint.to_string(), hint.wire_name());
        }
        assert_eq!(Hint::from_wire_name("readonlyhint"), None);
        assert_eq!(Hint::from_rmcp_field("readOnlyHint"), None);
    }

    #[test]
    fn spec_defaults_are_a_destructive_non_idempotent_open_world_write() {
        assert_eq!(
            Hint::ALL.map(Hint::spec_default),
            [false, true, false, true]
        );
    }

    #[test]
    fn every_flag_names_one_hint_value() {
        assert_eq!(Hint::ReadOnly.flag(true), Some("read_only"));
        assert_eq!(Hint::ReadOnly.flag(false), None);
        assert_eq!(Hint::Destructive.flag(false), Some("additive"));
        assert_eq!(Hint::Idempotent.flag(false), Some("non_idempotent"));
        assert_eq!(Hint::OpenWorld.flag(true), Some("open_world"));
        for (flag, hint, value) in FLAGS {
            assert_eq!(hint.flag(value), Some(flag));
        }
    }
}

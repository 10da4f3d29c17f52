//! The four MCP tool hints (schema `ToolAnnotations`, spec 2025-06-18 and
//! later) and their spec defaults.

/// One of the four boolean hints of `ToolAnnotations`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    ReadOnly,
    Destructive,
    Idempotent,
    OpenWorld,
}

impl Hint {
    pub const ALL: [Hint; 4] = [
        Hint::ReadOnly,
        Hint::Destructive,
        Hint::Idempotent,
        Hint::OpenWorld,
    ];

    /// The field name on the wire.
    pub fn wire_name(self) -> &'static str {
        match self {
            Hint::ReadOnly => "readOnlyHint",
            Hint::Destructive => "destructiveHint",
            Hint::Idempotent => "idempotentHint",
            Hint::OpenWorld => "openWorldHint",
        }
    }

    /// The key in rmcp's `annotations(...)` syntax.
    pub fn rmcp_key(self) -> &'static str {
        match self {
            Hint::ReadOnly => "read_only_hint",
            Hint::Destructive => "destructive_hint",
            Hint::Idempotent => "idempotent_hint",
            Hint::OpenWorld => "open_world_hint",
        }
    }

    pub fn from_rmcp_key(key: &str) -> Option<Hint> {
        Hint::ALL.into_iter().find(|hint| hint.rmcp_key() == key)
    }

    /// The value a client assumes when the hint is absent (the pessimistic
    /// spec default).
    pub fn spec_default(self) -> bool {
        match self {
            Hint::ReadOnly => false,
            Hint::Destructive => true,
            Hint::Idempotent => false,
            Hint::OpenWorld => true,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

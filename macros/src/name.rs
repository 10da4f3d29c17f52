//! The spec's tool-name rule (MCP 2025-11-25, "Tool names"; the core's
//! `name` module), worded for a compile error that quotes the name as
//! written.

use mcp_hints_core::name::{self, NameProblem};

/// Why `name` breaks the rule, or `None` when it is valid.
pub fn problem(name: &str) -> Option<String> {
    Some(match name::problem(name)? {
        NameProblem::Empty => "a tool name cannot be empty".to_owned(),
        NameProblem::TooLong { length } => format!(
            "tool name `{name}` is {length} characters long; the spec allows at most {}",
            name::MAX_LEN
        ),
        NameProblem::Disallowed(chars) => {
            let chars: Vec<String> = chars.iter().map(|c| format!("{c:?}")).collect();
            format!(
                "tool name `{name}` has characters the spec rejects ({}): use only {}",
                chars.join(", "),
                name::ALPHABET
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::problem;

    #[test]
    fn accepts_the_spec_alphabet() {
        assert_eq!(problem("get.user-v2_X"), None);
        assert_eq!(problem(&"a".repeat(128)), None);
    }

    #[test]
    fn rejects_empty_long_and_foreign_characters() {
        assert_eq!(problem("").as_deref(), Some("a tool name cannot be empty"));
        assert!(
            problem(&"a".repeat(129))
                .unwrap()
                .contains("129 characters")
        );
        assert!(problem("get user").unwrap().contains("' '"));
        assert!(problem("café").unwrap().contains("'é'"));
    }
}

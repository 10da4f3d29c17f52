//! The spec's tool-name rule (MCP 2025-11-25, "Tool names"): 1 to 128
//! characters, each an ASCII letter, digit, `_`, `-` or `.`.

pub const MAX_LEN: usize = 128;

/// Why `name` breaks the rule, or `None` when it is valid.
pub fn problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("a tool name cannot be empty".to_owned());
    }
    let len = name.chars().count();
    if len > MAX_LEN {
        return Some(format!(
            "tool name `{name}` is {len} characters long; the spec allows at most {MAX_LEN}"
        ));
    }
    let invalid: Vec<String> = name
        .chars()
        .filter(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .map(|c| format!("{c:?}"))
        .collect();
    if !invalid.is_empty() {
        return Some(format!(
            "tool name `{name}` has characters the spec rejects ({}): use only A-Z a-z 0-9 _ - .",
            invalid.join(", ")
        ));
    }
    None
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

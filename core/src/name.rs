//! The spec's tool-name rule, and the names that clients which allow only
//! `[A-Za-z0-9_-]` in function names make of a tool's name.
//!
//! Source: MCP 2025-11-25 and 2026-07-28, `server/tools`, "Tool names"
//! (SEP-986): a name SHOULD be 1 to 128 characters, each an ASCII letter,
//! digit, `_`, `-` or `.`. OpenAI's and Anthropic's tool APIs accept
//! `^[a-zA-Z0-9_-]{1,64}$` as a function name.

use std::collections::HashSet;
use std::fmt;

use crate::escape;
use crate::lint::join;

/// The most characters a tool name has (SEP-986).
pub const MAX_LEN: usize = 128;

/// The characters of a tool name, for messages: `A-Z a-z 0-9 _ - .`.
pub const ALPHABET: &str = "A-Z a-z 0-9 _ - .";

/// What clients that call tools as functions accept as a function name.
pub const CLIENT_SAFE_PATTERN: &str = "^[a-zA-Z0-9_-]{1,64}$";

/// Whether `c` may stand in a tool name: an ASCII letter or digit, `_`,
/// `-` or `.`.
pub const fn is_allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Whether `c` stands unchanged in a [`client_safe`] name: an ASCII letter
/// or digit, `_` or `-`.
pub const fn is_client_safe(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-')
}

/// How a name breaks the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameProblem {
    /// It has no characters.
    Empty,
    /// It has more than [`MAX_LEN`] characters.
    TooLong {
        /// How many characters it has.
        length: usize,
    },
    /// It has characters outside the rule's alphabet: each one once, in
    /// the order met.
    Disallowed(Vec<char>),
}

/// Why `name` breaks the rule, or `None` when it is a valid tool name.
/// Length is counted in characters (Unicode scalar values) and checked
/// before the alphabet.
pub fn problem(name: &str) -> Option<NameProblem> {
    let length = name.chars().count();
    if length == 0 {
        return Some(NameProblem::Empty);
    }
    if length > MAX_LEN {
        return Some(NameProblem::TooLong { length });
    }
    let disallowed = unique(name.chars().filter(|c| !is_allowed(*c)));
    (!disallowed.is_empty()).then_some(NameProblem::Disallowed(disallowed))
}

/// `name` as a client that keeps only `[A-Za-z0-9_-]` sees it: every
/// other character replaced with `_` (`get.user` becomes `get_user`).
pub fn client_safe(name: &str) -> String {
    name.chars()
        .map(|c| if is_client_safe(c) { c } else { '_' })
        .collect()
}

/// The characters of `names` that [`client_safe`] replaces, each once, in
/// the order met.
pub fn replaced<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<char> {
    unique(
        names
            .into_iter()
            .flat_map(str::chars)
            .filter(|c| !is_client_safe(*c)),
    )
}

/// Each of `chars` once, in the order met; linear in their number (a
/// server may list thousands of names).
fn unique(chars: impl Iterator<Item = char>) -> Vec<char> {
    let mut seen = HashSet::new();
    chars.filter(|c| seen.insert(*c)).collect()
}

/// Each character as `` `c` ``, escaped as [`escape::shown`] escapes it,
/// joined as a phrase: `` ` ` and `/` ``, `` `\u{202e}` ``.
pub fn shown_chars(chars: &[char]) -> String {
    let shown: Vec<String> = chars
        .iter()
        .map(|c| format!("`{}`", escape::shown(c.encode_utf8(&mut [0; 4]))))
        .collect();
    join(&shown)
}

/// The problem in words, after the name: `is empty`, `is 130 characters
/// long, more than 128`, `` contains ` ` and `/` `` (each character
/// escaped).
impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameProblem::Empty => f.write_str("is empty"),
            NameProblem::TooLong { length } => {
                write!(f, "is {length} characters long, more than {MAX_LEN}")
            }
            NameProblem::Disallowed(chars) => write!(f, "contains {}", shown_chars(chars)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_spec_alphabet() {
        assert_eq!(problem("get.user-v2_X"), None);
        assert_eq!(problem(&"a".repeat(MAX_LEN)), None);
    }

    #[test]
    fn rejects_empty_long_and_foreign_characters() {
        assert_eq!(problem(""), Some(NameProblem::Empty));
        assert_eq!(
            problem(&"é".repeat(129)),
            Some(NameProblem::TooLong { length: 129 })
        );
        assert_eq!(
            problem("a b/c d\u{202e}").map(|problem| problem.to_string()),
            Some(r"contains ` `, `/` and `\u{202e}`".to_owned())
        );
        assert_eq!(
            problem(&"x".repeat(130)).unwrap().to_string(),
            "is 130 characters long, more than 128"
        );
    }

    #[test]
    fn clients_replace_all_but_letters_digits_underscore_and_hyphen() {
        assert_eq!(client_safe("get.user-2_OK"), "get_user-2_OK");
        assert_eq!(client_safe("a b"), "a_b");
        assert_eq!(replaced(["get.user", "get user", "a.b"]), ['.', ' ']);
    }
}

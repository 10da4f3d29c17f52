//! Text from a server, made safe to print for people: a tool name, a server
//! name or an error message may hold newlines that forge report lines, or
//! escape sequences that drive the terminal, and may be a megabyte long.

use std::borrow::Cow;

/// The most characters of one server-given string a report prints.
pub const MAX_SHOWN: usize = 200;

/// `text` with every control character escaped as Rust writes it (`\n`,
/// `\u{1b}`), and cut after [`MAX_SHOWN`] characters with a note of its
/// length. Borrowed when nothing needed changing.
pub fn shown(text: &str) -> Cow<'_, str> {
    let long = text.chars().nth(MAX_SHOWN).is_some();
    if !long && !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    for c in text.chars().take(MAX_SHOWN) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if long {
        out.push_str(&format!("… ({} characters)", text.chars().count()));
    }
    Cow::Owned(out)
}

/// A message for people whose lines are meant (the tail of a server's
/// stderr, say), with every other control character escaped, so that no
/// server-given text can colour or rewrite the terminal.
pub fn shown_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| {
            line.chars()
                .flat_map(|c| {
                    if c.is_control() {
                        c.escape_default().collect::<Vec<_>>()
                    } else {
                        vec![c]
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `1 tool`, `2 tools`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_cut() {
        assert_eq!(shown("get_user"), "get_user");
        assert_eq!(
            shown("evil\nsafe  resend\u{1b}[31m"),
            "evil\\nsafe  resend\\u{1b}[31m"
        );
        let long = "x".repeat(1000);
        assert_eq!(
            shown(&long),
            format!("{}… (1000 characters)", "x".repeat(200))
        );
        assert_eq!(shown_lines("a\nb\u{1b}[2J"), "a\nb\\u{1b}[2J");
        assert_eq!(count(1, "tool", "tools"), "1 tool");
        assert_eq!(count(0, "tool", "tools"), "0 tools");
    }
}

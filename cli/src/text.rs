//! Text for people: peer text made safe to print (the core's `escape`
//! module, re-exported: a tool name, a server name or an error message may
//! hold newlines that forge report lines, escape sequences that drive the
//! terminal, bidirectional overrides that show text in another order than
//! it is, and may be a megabyte long), counts, and shell words.
//!
//! Every string a peer supplied goes through [`shown`] (one value, cut) or,
//! for text already put together, [`one_line`] or [`shown_lines`] (the
//! sinks: a report line, an error message), which escape the same
//! characters the same way.

pub use mcp_hints_core::escape::{MAX_SHOWN, cut, escaped, one_line, quoted, shown, shown_lines};

/// `1 tool`, `2 tools`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `word` as one word for a POSIX shell, single-quoted when it needs it,
/// for a command printed for people to run (a path in
/// `mcp-hints gateway approve ID --config PATH`). A word holding a
/// character [`escaped`] is printed escaped instead, as [`shown`] does: the
/// terminal is kept safe before the command is.
pub fn shell_word(word: &str) -> String {
    if word.chars().any(escaped) {
        return format!("'{}'", shown(word));
    }
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:,@%=".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_say_one_or_many() {
        assert_eq!(count(1, "tool", "tools"), "1 tool");
        assert_eq!(count(0, "tool", "tools"), "0 tools");
    }
}

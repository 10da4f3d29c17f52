//! Text from a server, made safe to print for people: a tool name, a server
//! name or an error message may hold newlines that forge report lines,
//! escape sequences that drive the terminal, bidirectional overrides that
//! show text in another order than it is, and may be a megabyte long.
//!
//! Every string a peer supplied goes through [`shown`] (one value, cut) or,
//! for text already put together, [`one_line`] or [`shown_lines`] (the
//! sinks: a report line, an error message), which escape the same
//! characters the same way.

use std::borrow::Cow;

/// The most characters of one server-given string a report prints.
pub const MAX_SHOWN: usize = 200;

/// Whether `c` is escaped: control characters (C0, DEL, C1), the line and
/// paragraph separators (U+2028, U+2029), which some viewers break lines
/// at, and every character that shows nothing yet changes what is shown or
/// how it compares: the bidirectional formatting characters, and the
/// other default-ignorable code points of Unicode (soft hyphen, joiners,
/// fillers, variation selectors, tag characters, …), with which two names
/// that print alike differ, or a name hides text.
pub fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00ad}'
                | '\u{034f}'
                | '\u{061c}'
                | '\u{115f}'..='\u{1160}'
                | '\u{17b4}'..='\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff0}'..='\u{fffb}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// Appends `c` to `out`, escaped as Rust writes it (`\n`, `\u{1b}`,
/// `\u{202e}`) when [`escaped`].
fn push(out: &mut String, c: char) {
    if escaped(c) {
        out.extend(c.escape_default());
    } else {
        out.push(c);
    }
}

/// `text` with every [`escaped`] character escaped, and cut after
/// [`MAX_SHOWN`] characters with a note of its length. Borrowed when
/// nothing needed changing.
pub fn shown(text: &str) -> Cow<'_, str> {
    let long = text.chars().nth(MAX_SHOWN).is_some();
    if !long && !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    for c in text.chars().take(MAX_SHOWN) {
        push(&mut out, c);
    }
    if long {
        out.push_str(&format!("… ({} characters)", text.chars().count()));
    }
    Cow::Owned(out)
}

/// A line for people put together from our text and server text: every
/// [`escaped`] character escaped, newlines included, nothing cut (the
/// server's parts were cut by [`shown`] already, or are short by nature).
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        push(&mut out, c);
    }
    Cow::Owned(out)
}

/// A message for people whose lines are meant (the tail of a server's
/// stderr, say), with every other [`escaped`] character escaped, so that no
/// server-given text can colour, reorder or rewrite the terminal.
pub fn shown_lines(text: &str) -> String {
    text.split('\n')
        .map(one_line)
        .collect::<Vec<_>>()
        .join("\n")
}

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
        assert_eq!(one_line("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
        assert_eq!(count(1, "tool", "tools"), "1 tool");
        assert_eq!(count(0, "tool", "tools"), "0 tools");
    }

    #[test]
    fn bidirectional_and_invisible_characters_are_escaped_everywhere() {
        let bidi = [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}',
        ];
        for c in bidi.into_iter().chain(['\u{200b}', '\u{feff}', '\u{2028}']) {
            let text = format!("safe{c}evil");
            let escaped = format!("safe\\u{{{:x}}}evil", u32::from(c));
            assert_eq!(shown(&text), escaped);
            assert_eq!(one_line(&text), escaped);
            assert_eq!(shown_lines(&text), escaped);
        }
        // Default-ignorable code points: each shows nothing, or a blank.
        let invisible = [
            '\u{ad}',
            '\u{34f}',
            '\u{115f}',
            '\u{1160}',
            '\u{17b4}',
            '\u{17b5}',
            '\u{180b}',
            '\u{180e}',
            '\u{180f}',
            '\u{2065}',
            '\u{206a}',
            '\u{206f}',
            '\u{3164}',
            '\u{fe00}',
            '\u{fe0f}',
            '\u{ffa0}',
            '\u{fff0}',
            '\u{fffb}',
            '\u{1bca0}',
            '\u{1bca3}',
            '\u{1d173}',
            '\u{1d17a}',
            '\u{e0000}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{e0100}',
            '\u{e01ef}',
            '\u{e0fff}',
        ];
        for c in invisible {
            let text = format!("safe{c}evil");
            let escaped = format!("safe\\u{{{:x}}}evil", u32::from(c));
            assert_eq!(shown(&text), escaped, "{:x}", u32::from(c));
            assert_eq!(one_line(&text), escaped);
            assert_eq!(shown_lines(&text), escaped);
        }
        // Their neighbours are letters, marks and symbols that show.
        for c in [
            '\u{ac}',
            '\u{34e}',
            '\u{1161}',
            '\u{3165}',
            '\u{fe10}',
            '\u{fffc}',
            '\u{e1000}',
        ] {
            assert!(!escaped(c), "{:x}", u32::from(c));
        }
        // Letters of any script stay as they are.
        assert_eq!(shown("données_日本語_עברית"), "données_日本語_עברית");
    }
}

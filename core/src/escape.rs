//! Peer text made safe to print: one set of escaped characters, one cut
//! length and one marker, for every path that shows a string a server or a
//! client supplied (a terminal, stderr, a log, an error message, a tool
//! error).
//!
//! A peer's string may hold newlines that forge lines of a report, escape
//! sequences that drive the terminal, bidirectional overrides that show
//! text in another order than it is, invisible characters with which two
//! names that print alike differ, and may be a megabyte long. Each
//! character of [`escaped`] is written as Rust's `escape_debug` writes it
//! (`\n`, `\t`, `\r`, `\0`, else `\u{202e}` in lowercase hex); every
//! other character, letters of any script included, stays as it is.
//!
//! | function | for | escapes | cuts |
//! |---|---|---|---|
//! | [`shown`] | one peer value (a name, a message) | [`escaped`] | after [`MAX_SHOWN`], [`MARKER`] and the length |
//! | [`quoted`] | one peer value in double quotes | [`escaped`], `"` and `\` | as [`shown`], the marker after the quote |
//! | [`cut`] | a peer value kept to be shown later | nothing | as [`shown`], the marker alone |
//! | [`one_line`] | a line put together from parts already cut | [`escaped`] | never |
//! | [`shown_lines`] | text whose newlines are meant (a stderr tail) | [`escaped`] but `\n` | never |

use std::borrow::Cow;
use std::fmt::Write;

/// The most characters one peer string takes when shown, the [`MARKER`]
/// of a cut included: a longer string keeps its first `MAX_SHOWN - 1`
/// characters (counted before escaping).
pub const MAX_SHOWN: usize = 200;

/// What ends a string that was cut: `…` (U+2026).
pub const MARKER: char = '…';

/// Whether `c` is escaped when shown. The classes, each a row of the
/// module's table test:
///
/// - control characters: C0, DEL and C1 (`char::is_control`), and the
///   line and paragraph separators U+2028 and U+2029, at which some
///   viewers break lines;
/// - bidirectional formatting: U+061C, U+200E, U+200F, the embeddings and
///   overrides U+202A to U+202E, the isolates U+2066 to U+2069;
/// - zero-width and invisible characters, the other default-ignorable
///   code points of Unicode: U+00AD, U+034F, U+17B4, U+17B5, U+180B to
///   U+180F, U+200B to U+200D, U+2060 to U+2065, U+206A to U+206F, U+FEFF,
///   U+FFF0 to U+FFFB, U+1BCA0 to U+1BCA3, U+1D173 to U+1D17A, and the
///   tags and reserved U+E0000 to U+E0FFF;
/// - variation selectors: U+FE00 to U+FE0F and U+E0100 to U+E01EF;
/// - fillers that print as a blank: U+115F, U+1160, U+2800, U+3164,
///   U+FFA0;
/// - combining overlays (canonical combining class 1), which strike
///   through the character before them: U+0334 to U+0338, U+1CD4, U+1CE2
///   to U+1CE8, U+20D2, U+20D3, U+20D8 to U+20DA, U+20E5, U+20E6, U+20EA,
///   U+20EB, U+10A39, U+16AF0 to U+16AF4, U+1BC9E, U+1D167 to U+1D169.
pub fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            // Separators.
            '\u{2028}'..='\u{2029}'
            // Bidirectional formatting.
            | '\u{061c}'
            | '\u{200e}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            // Zero-width and invisible.
            | '\u{00ad}'
            | '\u{034f}'
            | '\u{17b4}'..='\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{200b}'..='\u{200d}'
            | '\u{2060}'..='\u{2065}'
            | '\u{206a}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff0}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            // Tags and variation selectors (U+E0100 to U+E01EF) with them.
            | '\u{e0000}'..='\u{e0fff}'
            // Variation selectors.
            | '\u{fe00}'..='\u{fe0f}'
            // Fillers.
            | '\u{115f}'..='\u{1160}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{ffa0}'
            // Combining overlays.
            | '\u{0334}'..='\u{0338}'
            | '\u{1cd4}'
            | '\u{1ce2}'..='\u{1ce8}'
            | '\u{20d2}'..='\u{20d3}'
            | '\u{20d8}'..='\u{20da}'
            | '\u{20e5}'..='\u{20e6}'
            | '\u{20ea}'..='\u{20eb}'
            | '\u{10a39}'
            | '\u{16af0}'..='\u{16af4}'
            | '\u{1bc9e}'
            | '\u{1d167}'..='\u{1d169}'
        )
}

/// Appends `c` to `out`, escaped as `escape_debug` writes it when
/// [`escaped`].
fn push(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c if escaped(c) => {
            // Writing into a String cannot fail.
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// Where `text` is cut: the byte offset after its first `MAX_SHOWN - 1`
/// characters, when it has more than [`MAX_SHOWN`].
fn cut_at(text: &str) -> Option<usize> {
    let mut starts = text.char_indices().map(|(at, _)| at).skip(MAX_SHOWN - 1);
    let at = starts.next()?;
    starts.next().map(|_| at)
}

/// The note after the [`MARKER`] of a cut: ` (1000 characters)`, the
/// length of the whole string.
fn length_note(text: &str) -> String {
    format!(" ({} characters)", text.chars().count())
}

/// One peer string for people: every [`escaped`] character escaped, and
/// a string of more than [`MAX_SHOWN`] characters cut to its first
/// `MAX_SHOWN - 1`, followed by the [`MARKER`] and its length:
/// `xxx… (1000 characters)`. Borrowed when nothing needed changing.
///
/// ```
/// use mcp_hints_core::escape::shown;
///
/// assert_eq!(shown("get_user"), "get_user");
/// assert_eq!(shown("a\nb\u{1b}[2J\u{202e}"), r"a\nb\u{1b}[2J\u{202e}");
/// assert_eq!(shown(&"x".repeat(1000)), format!("{}… (1000 characters)", "x".repeat(199)));
/// ```
pub fn shown(text: &str) -> Cow<'_, str> {
    let cut = cut_at(text);
    if cut.is_none() && !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let kept = &text[..cut.unwrap_or(text.len())];
    let mut out = String::with_capacity(kept.len() + 8);
    for c in kept.chars() {
        push(&mut out, c);
    }
    if cut.is_some() {
        out.push(MARKER);
        out.push_str(&length_note(text));
    }
    Cow::Owned(out)
}

/// One peer string in double quotes, as Rust's `{:?}` quotes a `str`
/// (`"` and `\` escaped with a backslash) but escaping exactly the
/// characters [`escaped`] escapes, and cut as [`shown`] cuts, the
/// [`MARKER`] and length after the closing quote.
///
/// ```
/// use mcp_hints_core::escape::quoted;
///
/// assert_eq!(quoted("say \"hi\"\n"), r#""say \"hi\"\n""#);
/// assert_eq!(quoted(&"é".repeat(300)), format!("\"{}\"… (300 characters)", "é".repeat(199)));
/// ```
pub fn quoted(text: &str) -> String {
    let cut = cut_at(text);
    let kept = &text[..cut.unwrap_or(text.len())];
    let mut out = String::with_capacity(kept.len() + 2);
    out.push('"');
    for c in kept.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        push(&mut out, c);
    }
    out.push('"');
    if cut.is_some() {
        out.push(MARKER);
        out.push_str(&length_note(text));
    }
    out
}

/// `text` cut as [`shown`] cuts it, the [`MARKER`] alone marking the cut
/// (at most [`MAX_SHOWN`] characters in all), and nothing escaped: for a
/// peer's text kept in a value to be shown later, which [`shown`] then
/// escapes and does not cut again.
///
/// ```
/// use mcp_hints_core::escape::{MAX_SHOWN, cut};
///
/// let long = "x".repeat(5000);
/// let kept = cut(&long);
/// assert_eq!(kept.chars().count(), MAX_SHOWN);
/// assert!(kept.ends_with('…'));
/// assert_eq!(cut("short\n"), "short\n");
/// ```
pub fn cut(text: &str) -> Cow<'_, str> {
    match cut_at(text) {
        None => Cow::Borrowed(text),
        Some(at) => {
            let mut out = String::with_capacity(at + MARKER.len_utf8());
            out.push_str(&text[..at]);
            out.push(MARKER);
            Cow::Owned(out)
        }
    }
}

/// A line for people put together from our text and peer text: every
/// [`escaped`] character escaped, newlines included, nothing cut (the
/// peer's parts were cut by [`shown`] already, or are short by nature).
///
/// ```
/// use mcp_hints_core::escape::one_line;
///
/// assert_eq!(one_line("a\nb\u{1b}[2J"), r"a\nb\u{1b}[2J");
/// ```
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

/// Text whose lines are meant (the tail of a server's stderr, say): each
/// line as [`one_line`] writes it, the `\n` between them kept, so that no
/// peer text can colour, reorder or rewrite the terminal.
///
/// ```
/// use mcp_hints_core::escape::shown_lines;
///
/// assert_eq!(shown_lines("a\nb\u{1b}[2J"), "a\nb\\u{1b}[2J");
/// ```
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

    /// `c` as every function writes it.
    fn written(c: char) -> String {
        format!("\\u{{{:x}}}", u32::from(c))
    }

    /// One row per class of [`escaped`]: characters of the class, each
    /// escaped by every function.
    const CLASSES: &[(&str, &[char])] = &[
        (
            "C0 and C1 controls, DEL, separators",
            &[
                '\u{1}', '\u{7}', '\u{8}', '\u{b}', '\u{c}', '\u{1b}', '\u{1f}', '\u{7f}',
                '\u{80}', '\u{85}', '\u{9b}', '\u{9f}', '\u{2028}', '\u{2029}',
            ],
        ),
        (
            "bidirectional overrides, embeddings, marks and isolates",
            &[
                '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
                '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}',
            ],
        ),
        (
            "zero-width and invisible characters",
            &[
                '\u{ad}',
                '\u{34f}',
                '\u{17b4}',
                '\u{17b5}',
                '\u{180b}',
                '\u{180e}',
                '\u{180f}',
                '\u{200b}',
                '\u{200c}',
                '\u{200d}',
                '\u{2060}',
                '\u{2061}',
                '\u{2064}',
                '\u{2065}',
                '\u{206a}',
                '\u{206f}',
                '\u{feff}',
                '\u{fff0}',
                '\u{fffb}',
                '\u{1bca0}',
                '\u{1bca3}',
                '\u{1d173}',
                '\u{1d17a}',
            ],
        ),
        (
            "tags",
            &[
                '\u{e0000}',
                '\u{e0001}',
                '\u{e0041}',
                '\u{e007f}',
                '\u{e0fff}',
            ],
        ),
        (
            "variation selectors",
            &['\u{fe00}', '\u{fe0e}', '\u{fe0f}', '\u{e0100}', '\u{e01ef}'],
        ),
        (
            "fillers",
            &['\u{115f}', '\u{1160}', '\u{2800}', '\u{3164}', '\u{ffa0}'],
        ),
        (
            "combining overlays",
            &[
                '\u{334}',
                '\u{336}',
                '\u{338}',
                '\u{1cd4}',
                '\u{1ce2}',
                '\u{1ce8}',
                '\u{20d2}',
                '\u{20d3}',
                '\u{20d8}',
                '\u{20da}',
                '\u{20e5}',
                '\u{20e6}',
                '\u{20ea}',
                '\u{20eb}',
                '\u{10a39}',
                '\u{16af0}',
                '\u{16af4}',
                '\u{1bc9e}',
                '\u{1d167}',
                '\u{1d169}',
            ],
        ),
    ];

    #[test]
    fn every_class_is_escaped_by_every_function() {
        for (class, chars) in CLASSES {
            for &c in *chars {
                let text = format!("safe{c}evil");
                let escaped_text = format!("safe{}evil", written(c));
                let at = format!("{class}: U+{:04X}", u32::from(c));
                assert!(escaped(c), "{at}");
                assert_eq!(shown(&text), escaped_text, "{at}");
                assert_eq!(quoted(&text), format!("\"{escaped_text}\""), "{at}");
                assert_eq!(one_line(&text), escaped_text, "{at}");
                assert_eq!(shown_lines(&text), escaped_text, "{at}");
                assert_eq!(cut(&text), text, "{at}: cut escapes nothing");
            }
        }
    }

    #[test]
    fn short_escapes_are_written_as_escape_debug_writes_them() {
        for c in ['\n', '\r', '\t', '\0'] {
            let expected: String = c.escape_debug().collect();
            assert_eq!(shown(&c.to_string()), expected);
            assert_eq!(one_line(&c.to_string()), expected);
        }
        assert_eq!(shown_lines("a\r\nb\t"), "a\\r\nb\\t");
    }

    #[test]
    fn neighbours_of_the_classes_and_letters_of_any_script_stay() {
        for c in [
            ' ',
            '\u{a0}',
            '\u{ac}',
            '\u{301}',
            '\u{333}',
            '\u{339}',
            '\u{34e}',
            '\u{1161}',
            '\u{20d1}',
            '\u{20d4}',
            '\u{20dd}',
            '\u{2801}',
            '\u{3165}',
            '\u{fe10}',
            '\u{fffc}',
            '\u{fffd}',
            '\u{e1000}',
            '"',
            '\'',
            '\\',
        ] {
            assert!(!escaped(c), "U+{:04X}", u32::from(c));
        }
        let letters = "données_日本語_עברית_🦀";
        assert_eq!(shown(letters), letters);
        assert!(matches!(shown(letters), Cow::Borrowed(_)));
        assert!(matches!(one_line(letters), Cow::Borrowed(_)));
    }

    #[test]
    fn quotes_are_escaped_only_inside_double_quotes() {
        assert_eq!(shown(r#"it's "x" \ y"#), r#"it's "x" \ y"#);
        assert_eq!(quoted(r#"it's "x" \ y"#), r#""it's \"x\" \\ y""#);
        // As `{:?}` writes them, for the characters both escape.
        let text = "\0\"\n\u{1b}[31m\u{202e}";
        assert_eq!(quoted(text), format!("{text:?}"));
    }

    #[test]
    fn one_cut_length_and_one_marker() {
        let exact = "x".repeat(MAX_SHOWN);
        assert_eq!(shown(&exact), exact);
        assert_eq!(cut(&exact), exact);
        assert_eq!(quoted(&exact), format!("\"{exact}\""));

        let long = "é".repeat(MAX_SHOWN + 1);
        let kept = "é".repeat(MAX_SHOWN - 1);
        assert_eq!(shown(&long), format!("{kept}… (201 characters)"));
        assert_eq!(quoted(&long), format!("\"{kept}\"… (201 characters)"));
        assert_eq!(cut(&long), format!("{kept}…"));
        assert_eq!(cut(&long).chars().count(), MAX_SHOWN);
        // A cut value is shown whole, escaped, and not cut again.
        let forged = format!("{}\n", "x".repeat(5000));
        let kept = cut(&forged);
        assert_eq!(shown(&kept), kept);
        // The length counts characters before escaping.
        let controls = "\u{1b}".repeat(300);
        assert_eq!(
            shown(&controls),
            format!("{}… (300 characters)", "\\u{1b}".repeat(MAX_SHOWN - 1))
        );
        // Lines are escaped, never cut.
        let line = "y".repeat(1000);
        assert_eq!(one_line(&line), line);
        assert_eq!(shown_lines(&line), line);
    }

    #[test]
    fn counts_say_one_or_many() {
        assert_eq!(count(1, "tool", "tools"), "1 tool");
        assert_eq!(count(0, "tool", "tools"), "0 tools");
    }
}

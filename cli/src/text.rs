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

pub use mcp_hints_core::escape::{
    MAX_SHOWN, count, cut, escaped, one_line, quoted, shell_word, shown, shown_lines,
};

/// `json` (JSON text, as serde_json writes it) with every character
/// [`escaped`] would escape that serde_json leaves as it is (C1 controls,
/// bidirectional overrides, invisible characters; serde_json escapes the
/// C0 controls itself) written as a `\uXXXX` escape, a surrogate pair
/// past U+FFFF: the same JSON value, which a terminal shows as it is.
/// Such characters stand only inside strings, where the escape means the
/// same character.
pub fn json_for_terminal(json: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    if !json.chars().any(|c| !c.is_ascii() && escaped(c)) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if !c.is_ascii() && escaped(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A writer of JSON text that passes it on as [`json_for_terminal`]
/// writes it, for a report streamed to stdout. A character split across
/// two writes waits for its end.
pub struct JsonForTerminal<W: std::io::Write> {
    inner: W,
    /// The start of a UTF-8 sequence the last write ended in.
    pending: Vec<u8>,
}

impl<W: std::io::Write> JsonForTerminal<W> {
    /// Writes into `inner`.
    pub fn new(inner: W) -> Self {
        JsonForTerminal {
            inner,
            pending: Vec::new(),
        }
    }
}

impl<W: std::io::Write> std::io::Write for JsonForTerminal<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let whole = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // A sequence cut at the end waits; bytes that are no UTF-8 at
            // all (never from serde_json) go on as they are.
            Err(error) if error.error_len().is_none() => error.valid_up_to(),
            Err(_) => {
                self.inner.write_all(&self.pending)?;
                self.pending.clear();
                return Ok(buf.len());
            }
        };
        let text = std::str::from_utf8(&self.pending[..whole]).unwrap_or_default();
        self.inner.write_all(json_for_terminal(text).as_bytes())?;
        self.pending.drain(..whole);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.pending.is_empty() {
            self.inner.write_all(&self.pending)?;
            self.pending.clear();
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn json_for_a_terminal_escapes_what_serde_json_leaves_and_means_the_same() {
        let value = serde_json::json!({"p": "a\u{9b}b \u{202e}evil \u{1f600} \u{e0041} é", "n": 1});
        let json = serde_json::to_string(&value).unwrap();
        let safe = json_for_terminal(&json);
        assert!(
            safe.is_ascii() || !safe.chars().any(|c| !c.is_ascii() && escaped(c)),
            "{safe}"
        );
        assert!(
            safe.contains("\\u009b") && safe.contains("\\u202e"),
            "{safe}"
        );
        // A tag character, past U+FFFF, as its surrogate pair.
        assert!(safe.contains("\\udb40\\udc41"), "{safe}");
        // What a terminal shows as itself stays.
        assert!(safe.contains('é') && safe.contains('\u{1f600}'), "{safe}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&safe).unwrap(),
            value
        );
        assert!(matches!(
            json_for_terminal("{\"a\":1}"),
            std::borrow::Cow::Borrowed(_)
        ));

        // Streamed a byte at a time, as a writer may be.
        let mut out = JsonForTerminal::new(Vec::new());
        for byte in json.as_bytes() {
            out.write_all(std::slice::from_ref(byte)).unwrap();
        }
        out.flush().unwrap();
        assert_eq!(String::from_utf8(out.inner).unwrap(), safe);
    }
}

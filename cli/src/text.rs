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

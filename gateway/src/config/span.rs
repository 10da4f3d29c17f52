//! Where a problem is: a byte offset's line and column, and the key path
//! or span of a value in the parsed TOML document.

use std::ops::Range;

use toml::Spanned;
use toml::de::DeValue;

/// The key path below `value` (`.limit`, `[1]`) of the deepest key or
/// value whose span holds `offset`; `Some("")` when only `value` itself
/// does. Spans of `[[table]]` elements cover their header only, so every
/// child is searched, not only those inside the parent's span.
pub(super) fn find_key(value: &Spanned<DeValue<'_>>, offset: usize) -> Option<String> {
    let children: Option<String> = match value.get_ref() {
        DeValue::Table(table) => table.iter().find_map(|(key, child)| {
            let name = key.get_ref().as_ref();
            match find_key(child, offset) {
                Some(rest) => Some(format!(".{name}{rest}")),
                None if key.span().contains(&offset) => Some(format!(".{name}")),
                None => None,
            }
        }),
        DeValue::Array(items) => items.iter().enumerate().find_map(|(index, child)| {
            find_key(child, offset).map(|rest| format!("[{index}]{rest}"))
        }),
        _ => None,
    };
    let span = value.span();
    children.or_else(|| {
        (span.contains(&offset) || (span.is_empty() && span.start == offset)).then(String::new)
    })
}

/// The span of element `index` of an array of tables (its header).
pub(super) fn element_span(section: Option<&Spanned<DeValue<'_>>>, index: usize) -> Range<usize> {
    section
        .and_then(|value| match value.get_ref() {
            DeValue::Array(items) => items.get(index).map(Spanned::span),
            _ => None,
        })
        .unwrap_or(0..0)
}

/// The span of `name` in element `index` of an array of tables.
pub(super) fn name_span(
    section: Option<&Spanned<DeValue<'_>>>,
    index: usize,
) -> Option<Range<usize>> {
    match section?.get_ref() {
        DeValue::Array(items) => match items.get(index)?.get_ref() {
            DeValue::Table(table) => table
                .iter()
                .find(|(key, _)| key.get_ref().as_ref() == "name")
                .map(|(_, value)| value.span()),
            _ => None,
        },
        _ => None,
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(super) fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |newline| newline + 1);
    (line, before[start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters() {
        assert_eq!(position("ab\né = 1", 6), (2, 3));
        assert_eq!(position("", 0), (1, 1));
        assert_eq!(position("x\n", 99), (2, 1));
    }
}

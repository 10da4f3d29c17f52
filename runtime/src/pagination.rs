//! Server-side pagination of `tools/list`: a router's tools served a page at
//! a time, with a cursor that is checked when it comes back.
//!
//! `#[tool_handler(page_size = ...)]` serves pages through
//! [`list_tools_page`]; a hand-written `list_tools` can call it directly.
//!
//! # Pages
//!
//! The tools are ordered by name (a stable sort, so tools with one name, which
//! a router cannot hold, keep their order). Each page holds at most
//! [`PageSize`] tools; every page but the last carries `nextCursor`, and the
//! last page (an empty list's only page included) carries none.
//!
//! # The cursor
//!
//! Opaque to clients, who must send it back unchanged. It records how many
//! tools were sent before it, the name of the last of them, and a 64-bit
//! digest of the names of all of them (FNV-1a), so a cursor is honoured only
//! while the tools it has already sent are still the first tools of the list.
//! A tool added, removed or renamed among them makes the cursor stale, and it
//! is refused rather than silently skipping or repeating tools. Tools added or
//! removed after the cursor's position do not affect it: the client gets the
//! list as it is now from there on.
//!
//! # Errors
//!
//! A cursor that is not honoured gets the JSON-RPC error -32602 (Invalid
//! params), as the spec recommends. Its message quotes the cursor (escaped
//! and cut as all peer text is, by `mcp_hints_core::escape::quoted`) and
//! says what to do: list again without a cursor. Its `data` is `{"cursor": <the cursor, whole>, "reason": ...}`:
//!
//! | `reason` | when |
//! |---|---|
//! | `"malformed"` | not a cursor this module issued: garbage, the empty string, a cursor of another kind of listing, a position of 0 |
//! | `"past_end"` | well formed, but its position is at or after the end of the list as it is now |
//! | `"stale"` | the tools before its position are not the tools it was issued after: the list changed, or the cursor is from another server's listing |
//!
//! # Source
//!
//! The MCP specification, `server/utilities/pagination` (revisions
//! 2025-06-18, 2025-11-25 and 2026-07-28 agree): the cursor is an opaque
//! string, the page size is the server's choice, `nextCursor` is present only
//! when more results exist, and an invalid cursor SHOULD result in error
//! -32602 (Invalid params).

use std::fmt::Write as _;
use std::num::NonZeroUsize;

use mcp_hints_core::escape;
use rmcp::ErrorData;
use rmcp::model::{ListToolsResult, ResultType, Tool};
use serde_json::json;

/// How many tools one `tools/list` page holds.
///
/// Convertible from `usize` (0 means [`PageSize::All`]), from
/// [`NonZeroUsize`], and from `Option<NonZeroUsize>` (`None` means
/// [`PageSize::All`]), so `#[tool_handler(page_size = ...)]` takes any of
/// them.
///
/// ```
/// use std::num::NonZeroUsize;
/// use mcp_hints::pagination::PageSize;
///
/// assert_eq!(PageSize::from(0), PageSize::All);
/// assert_eq!(PageSize::from(20), PageSize::AtMost(NonZeroUsize::new(20).unwrap()));
/// assert_eq!(PageSize::from(None::<NonZeroUsize>), PageSize::All);
/// assert_eq!(PageSize::default(), PageSize::All);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PageSize {
    /// Every tool on one page, without `nextCursor` (rmcp's behaviour, and
    /// the default).
    #[default]
    All,
    /// At most this many tools per page.
    AtMost(NonZeroUsize),
}

impl From<usize> for PageSize {
    /// `0` is [`PageSize::All`] (one page of everything); any other `n` is
    /// [`PageSize::AtMost`]`(n)`.
    fn from(size: usize) -> Self {
        NonZeroUsize::new(size).into()
    }
}

impl From<NonZeroUsize> for PageSize {
    fn from(size: NonZeroUsize) -> Self {
        PageSize::AtMost(size)
    }
}

impl From<Option<NonZeroUsize>> for PageSize {
    /// `None` is [`PageSize::All`].
    fn from(size: Option<NonZeroUsize>) -> Self {
        size.map_or(PageSize::All, PageSize::AtMost)
    }
}

/// The page of `tools` that follows `cursor` (the first page when `cursor`
/// is `None`), holding at most `page_size` tools in order of name.
///
/// `tools` is every tool of the listing, in any order (a router's
/// `list_all()`). The result has `resultType` `"complete"`, `nextCursor`
/// when tools remain after the page, and no `_meta`, `ttlMs` or
/// `cacheScope` (the generated handler adds those).
///
/// # Errors
///
/// An `ErrorData` with code -32602 (Invalid params) when `cursor` is not
/// honoured: malformed, past the end of the list, or stale. The
/// [module documentation](self) has the message and `data` of each.
///
/// ```
/// use mcp_hints::pagination::{PageSize, list_tools_page};
/// use mcp_hints::rmcp::model::Tool;
///
/// let tools: Vec<Tool> = ["c", "a", "b"]
///     .into_iter()
///     .map(|name| Tool::new_with_raw(name, None, serde_json::Map::new()))
///     .collect();
/// let first = list_tools_page(tools.clone(), None, PageSize::from(2)).unwrap();
/// let names: Vec<&str> = first.tools.iter().map(|tool| tool.name.as_ref()).collect();
/// assert_eq!(names, ["a", "b"]);
///
/// let cursor = first.next_cursor.as_deref();
/// let last = list_tools_page(tools.clone(), cursor, PageSize::from(2)).unwrap();
/// assert_eq!(last.tools[0].name, "c");
/// assert_eq!(last.next_cursor, None);
///
/// let error = list_tools_page(tools, Some("page-2"), PageSize::from(2)).unwrap_err();
/// assert_eq!(error.code.0, -32602);
/// ```
pub fn list_tools_page(
    mut tools: Vec<Tool>,
    cursor: Option<&str>,
    page_size: PageSize,
) -> Result<ListToolsResult, ErrorData> {
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let start = match cursor {
        None => 0,
        Some(cursor) => resume_at(&tools, cursor)?,
    };
    let end = match page_size {
        PageSize::All => tools.len(),
        PageSize::AtMost(size) => start.saturating_add(size.get()).min(tools.len()),
    };
    let next_cursor = (end < tools.len()).then(|| encode(&tools[..end]));
    tools.truncate(end);
    tools.drain(..start);
    Ok(ListToolsResult {
        result_type: Some(ResultType::COMPLETE),
        meta: None,
        next_cursor,
        ttl_ms: None,
        cache_scope: None,
        tools,
    })
}

/// What every cursor starts with: the listing it belongs to and the format.
const PREFIX: &str = "tools.v1.";

/// The cursor after `sent`, the tools already sent (never empty):
/// `tools.v1.<count>.<digest of their names, 16 hex digits>.<last name>`.
fn encode(sent: &[Tool]) -> String {
    let last = sent.last().map_or("", |tool| tool.name.as_ref());
    let mut cursor = String::with_capacity(PREFIX.len() + 24 + last.len());
    cursor.push_str(PREFIX);
    // Writing to a String cannot fail.
    let _ = write!(cursor, "{}.{:016x}.{last}", sent.len(), digest(sent));
    cursor
}

/// FNV-1a (64 bits) of the names, each followed by 0xff, a byte UTF-8
/// never contains, so `["ab", "c"]` and `["a", "bc"]` differ.
fn digest(tools: &[Tool]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for tool in tools {
        for &byte in tool.name.as_bytes().iter().chain(&[0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

/// Why a cursor is refused; the `reason` in the error's `data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    Malformed,
    PastEnd,
    Stale,
}

/// The index of the first tool after `cursor` in `tools` (sorted).
fn resume_at(tools: &[Tool], cursor: &str) -> Result<usize, ErrorData> {
    let (position, digest_hex, last) = parse(cursor).ok_or_else(|| {
        refuse(
            cursor,
            Refusal::Malformed,
            "not a cursor this server issued",
        )
    })?;
    if position >= tools.len() {
        let detail = format!(
            "it points past the end of the {} tools listed now",
            tools.len()
        );
        return Err(refuse(cursor, Refusal::PastEnd, &detail));
    }
    let sent = &tools[..position];
    let matches = sent.last().is_some_and(|tool| tool.name == last)
        && format!("{:016x}", digest(sent)) == digest_hex;
    if !matches {
        return Err(refuse(
            cursor,
            Refusal::Stale,
            "the tools listed before it have changed since it was issued, or it is from \
             another listing",
        ));
    }
    Ok(position)
}

/// Splits a cursor into its count (at least 1), digest and last name, when it
/// has exactly the shape [`encode`] gives it.
fn parse(cursor: &str) -> Option<(usize, &str, &str)> {
    let mut fields = cursor.strip_prefix(PREFIX)?.splitn(3, '.');
    let position = fields.next()?;
    let digest = fields.next()?;
    let last = fields.next()?;
    let canonical_number = !position.is_empty()
        && position.bytes().all(|byte| byte.is_ascii_digit())
        && !position.starts_with('0');
    let canonical_digest = digest.len() == 16
        && digest
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
    if !canonical_number || !canonical_digest {
        return None;
    }
    Some((position.parse().ok()?, digest, last))
}

/// The -32602 error refusing `cursor`.
fn refuse(cursor: &str, refusal: Refusal, detail: &str) -> ErrorData {
    let reason = match refusal {
        Refusal::Malformed => "malformed",
        Refusal::PastEnd => "past_end",
        Refusal::Stale => "stale",
    };
    let message = format!(
        "invalid tools/list cursor {}: {detail}; list again without a cursor",
        escape::quoted(cursor)
    );
    ErrorData::invalid_params(message, Some(json!({ "cursor": cursor, "reason": reason })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ErrorCode;
    use serde_json::Value;

    fn tools(names: &[&str]) -> Vec<Tool> {
        names
            .iter()
            .map(|name| Tool::new_with_raw(name.to_string(), None, serde_json::Map::new()))
            .collect()
    }

    fn names(page: &ListToolsResult) -> Vec<&str> {
        page.tools.iter().map(|tool| tool.name.as_ref()).collect()
    }

    fn size(n: usize) -> PageSize {
        PageSize::from(n)
    }

    /// Every page from the first, following `nextCursor`, as names.
    fn all_pages(listing: &[&str], page_size: PageSize) -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = list_tools_page(tools(listing), cursor.as_deref(), page_size)
                .unwrap_or_else(|error| panic!("page after {cursor:?}: {error:?}"));
            assert_eq!(page.result_type, Some(ResultType::COMPLETE));
            assert_eq!(
                (page.meta.as_ref(), page.ttl_ms, page.cache_scope),
                (None, None, None)
            );
            pages.push(names(&page).into_iter().map(str::to_owned).collect());
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return pages,
            }
            assert!(pages.len() <= listing.len(), "more pages than tools");
        }
    }

    /// The error for `cursor`, checked to be -32602 naming the cursor, and its
    /// reason.
    fn refused(listing: &[&str], cursor: &str) -> (String, String) {
        let error = list_tools_page(tools(listing), Some(cursor), size(2))
            .expect_err("the cursor must be refused");
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        let data = error.data.expect("data names the cursor");
        assert_eq!(data["cursor"], Value::from(cursor));
        let reason = data["reason"].as_str().expect("a reason").to_owned();
        (error.message.into_owned(), reason)
    }

    fn next_cursor(listing: &[&str], cursor: Option<&str>, page_size: usize) -> String {
        list_tools_page(tools(listing), cursor, size(page_size))
            .unwrap()
            .next_cursor
            .expect("a next cursor")
    }

    const FIVE: [&str; 5] = ["e", "c", "a", "d", "b"];

    #[test]
    fn pages_split_the_sorted_list_and_the_last_page_has_no_cursor() {
        assert_eq!(
            all_pages(&FIVE, size(2)),
            [vec!["a", "b"], vec!["c", "d"], vec!["e"]]
        );
    }

    #[test]
    fn an_exact_multiple_ends_on_a_full_page_without_an_empty_one() {
        assert_eq!(
            all_pages(&["d", "b", "a", "c"], size(2)),
            [vec!["a", "b"], vec!["c", "d"]]
        );
        assert_eq!(all_pages(&FIVE, size(5)), [vec!["a", "b", "c", "d", "e"]]);
    }

    #[test]
    fn page_size_one_gives_one_tool_per_page() {
        assert_eq!(
            all_pages(&FIVE, size(1)),
            [["a"], ["b"], ["c"], ["d"], ["e"]].map(|page| page.map(str::to_owned).to_vec())
        );
    }

    #[test]
    fn page_size_zero_all_and_larger_than_the_list_give_one_page() {
        let everything = vec![vec!["a", "b", "c", "d", "e"]];
        assert_eq!(all_pages(&FIVE, size(0)), everything);
        assert_eq!(all_pages(&FIVE, PageSize::All), everything);
        assert_eq!(all_pages(&FIVE, size(6)), everything);
        assert_eq!(all_pages(&FIVE, size(usize::MAX)), everything);
    }

    #[test]
    fn an_empty_router_has_one_empty_page() {
        for page_size in [size(0), size(1), size(3)] {
            assert_eq!(all_pages(&[], page_size), [Vec::<String>::new()]);
        }
    }

    #[test]
    fn page_size_conversions() {
        let two = NonZeroUsize::new(2).unwrap();
        assert_eq!(PageSize::from(0), PageSize::All);
        assert_eq!(PageSize::from(2), PageSize::AtMost(two));
        assert_eq!(PageSize::from(two), PageSize::AtMost(two));
        assert_eq!(PageSize::from(Some(two)), PageSize::AtMost(two));
        assert_eq!(PageSize::from(None::<NonZeroUsize>), PageSize::All);
        assert_eq!(PageSize::default(), PageSize::All);
    }

    #[test]
    fn the_cursor_records_count_digest_and_last_name() {
        let cursor = next_cursor(&FIVE, None, 2);
        let (count, digest_hex, last) = parse(&cursor).expect("an issued cursor parses");
        assert_eq!((count, last), (2, "b"));
        assert_eq!(digest_hex, format!("{:016x}", digest(&tools(&["a", "b"]))));
        assert_eq!(cursor, format!("tools.v1.2.{digest_hex}.b"));
    }

    #[test]
    fn names_with_dots_survive_the_cursor() {
        let listing = ["x.y.z", "a.b", "m"];
        assert_eq!(
            all_pages(&listing, size(1)),
            [["a.b"], ["m"], ["x.y.z"]].map(|page| page.map(str::to_owned).to_vec())
        );
    }

    #[test]
    fn a_cursor_is_honoured_under_another_page_size() {
        let cursor = next_cursor(&FIVE, None, 2);
        let rest = list_tools_page(tools(&FIVE), Some(&cursor), PageSize::All).unwrap();
        assert_eq!(names(&rest), ["c", "d", "e"]);
        assert_eq!(rest.next_cursor, None);
    }

    #[test]
    fn tools_added_after_the_cursor_are_listed_from_there() {
        let cursor = next_cursor(&FIVE, None, 2);
        let grown = ["a", "b", "c", "d", "e", "f"];
        let page = list_tools_page(tools(&grown), Some(&cursor), size(10)).unwrap();
        assert_eq!(names(&page), ["c", "d", "e", "f"]);
    }

    #[test]
    fn garbage_is_refused_as_malformed_naming_the_cursor() {
        let digest_ab = format!("{:016x}", digest(&tools(&["a", "b"])));
        let garbage = [
            String::new(),
            "page-2".to_owned(),
            "tools.v1.".to_owned(),
            "tools.v1.2".to_owned(),
            format!("tools.v1.2.{digest_ab}"),
            format!("tools.v2.2.{digest_ab}.b"),
            format!("prompts.v1.2.{digest_ab}.b"),
            format!("tools.v1.0.{digest_ab}.b"),
            format!("tools.v1.02.{digest_ab}.b"),
            format!("tools.v1.+2.{digest_ab}.b"),
            format!("tools.v1.-1.{digest_ab}.b"),
            format!("tools.v1.2.{}.b", digest_ab.to_uppercase()),
            format!("tools.v1.2.{}.b", &digest_ab[1..]),
            "tools.v1.99999999999999999999999999.0000000000000000.b".to_owned(),
            "\u{0}\"\n".to_owned(),
        ];
        for cursor in &garbage {
            let (message, reason) = refused(&FIVE, cursor);
            assert_eq!(reason, "malformed", "{cursor:?}");
            assert_eq!(
                message,
                format!(
                    "invalid tools/list cursor {cursor:?}: not a cursor this server issued; \
                     list again without a cursor"
                )
            );
        }
    }

    #[test]
    fn a_cursor_past_the_end_is_refused() {
        let issued = next_cursor(&FIVE, None, 2);
        let digest_hex = parse(&issued).unwrap().1.to_owned();
        for position in [5, 6, 1000] {
            let cursor = format!("tools.v1.{position}.{digest_hex}.b");
            let (message, reason) = refused(&FIVE, &cursor);
            assert_eq!(reason, "past_end");
            assert_eq!(
                message,
                format!(
                    "invalid tools/list cursor {cursor:?}: it points past the end of the 5 \
                     tools listed now; list again without a cursor"
                )
            );
        }
        // A cursor issued when the list was longer, after it shrank.
        let cursor = next_cursor(&FIVE, None, 4);
        assert_eq!(refused(&["a", "b", "c", "d"], &cursor).1, "past_end");
    }

    #[test]
    fn a_stale_cursor_is_refused_rather_than_skipping_tools() {
        let cursor = next_cursor(&FIVE, None, 2);
        let stale = format!(
            "invalid tools/list cursor {cursor:?}: the tools listed before it have changed \
             since it was issued, or it is from another listing; list again without a cursor"
        );
        // A tool inserted before the position: `a0` would be skipped.
        let (message, reason) = refused(&["a", "a0", "b", "c", "d", "e"], &cursor);
        assert_eq!((message, reason.as_str()), (stale, "stale"));
        // A tool removed before it: `c` would be skipped.
        assert_eq!(refused(&["b", "c", "d", "e"], &cursor).1, "stale");
        // The first tool replaced: the last name still matches, the digest
        // does not.
        assert_eq!(refused(&["a1", "b", "c", "d", "e"], &cursor).1, "stale");
        // The last name forged.
        let forged = format!("{}z", cursor.strip_suffix('b').unwrap());
        assert_eq!(refused(&FIVE, &forged).1, "stale");
        // The digest forged.
        let (_, digest_hex, _) = parse(&cursor).unwrap();
        let forged = cursor.replace(digest_hex, "0123456789abcdef");
        assert_eq!(refused(&FIVE, &forged).1, "stale");
    }

    #[test]
    fn a_cursor_of_another_listing_is_refused() {
        let other = next_cursor(&["p", "q", "r", "s"], None, 2);
        assert_eq!(refused(&FIVE, &other).1, "stale");
        let longer = next_cursor(&["p", "q", "r", "s", "t", "u", "v"], None, 6);
        assert_eq!(refused(&FIVE, &longer).1, "past_end");
    }

    #[test]
    fn a_long_cursor_is_cut_in_the_message_and_whole_in_data() {
        let cursor = "é".repeat(300);
        let (message, _) = refused(&FIVE, &cursor);
        let shown = format!("\"{}\"… (300 characters)", "é".repeat(199));
        assert!(
            message.starts_with(&format!("invalid tools/list cursor {shown}: ")),
            "{message}"
        );
    }
}

//! Why a `tools/list` could not be collected: [`CollectError`], each
//! variant naming the page, the tool and the member.

use std::fmt;

use mcp_hints_core::escape;

use crate::hints::HintError;

/// Why a `tools/list` could not be collected. Pages count from 1, tools
/// within a page from 1.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollectError {
    /// A page is not a JSON object.
    PageNotObject {
        /// The page.
        page: usize,
        /// Its JSON type.
        found: &'static str,
    },
    /// A page is not JSON at all.
    PageNotJson {
        /// The page.
        page: usize,
        /// The parser's message.
        error: String,
    },
    /// A page is a JSON-RPC error response.
    JsonRpcError {
        /// The page.
        page: usize,
        /// The error's `code`.
        code: i64,
        /// The error's `message`.
        message: String,
    },
    /// A page is a JSON-RPC response with both a `result` and an `error`
    /// (neither `null`; see [`jsonrpc::carried`](crate::jsonrpc::carried)): which one holds is
    /// unknown.
    ResultAndError {
        /// The page.
        page: usize,
    },
    /// A page is a JSON-RPC error response whose `error` is not an error
    /// object (`"error": null` without a `result`, a string).
    ErrorNotObject {
        /// The page.
        page: usize,
        /// Its JSON type.
        found: &'static str,
    },
    /// A page has no `tools` member, or it is not an array.
    ToolsNotArray {
        /// The page.
        page: usize,
        /// What was found: `"missing"` or a JSON type.
        found: &'static str,
    },
    /// `nextCursor` is neither a string nor `null`.
    CursorNotString {
        /// The page.
        page: usize,
        /// Its JSON type.
        found: &'static str,
    },
    /// A server returned a cursor it had returned before: following it
    /// would loop.
    RepeatedCursor {
        /// The cursor.
        cursor: String,
        /// The page that first returned it.
        first_page: usize,
        /// The page that returned it again.
        page: usize,
    },
    /// The list needs more than [`CollectOptions::max_pages`](super::CollectOptions::max_pages) pages.
    PageCap {
        /// The cap.
        max_pages: usize,
        /// The cursor of the page that would exceed it.
        cursor: String,
    },
    /// A page's `resultType` (MCP 2026-07-28) is not `"complete"`: the
    /// server asked for input (`"input_required"`) or made a task instead
    /// of listing its tools.
    NotComplete {
        /// The page.
        page: usize,
        /// Its `resultType`.
        result_type: String,
    },
    /// A page's `resultType` (MCP 2026-07-28) is not a string: whether the
    /// page is a complete result is unknown.
    ResultTypeNotString {
        /// The page.
        page: usize,
        /// Its JSON type.
        found: &'static str,
    },
    /// The pages end with a page that still has a `nextCursor`: tools are
    /// missing.
    Incomplete {
        /// How many pages were given.
        pages: usize,
        /// The last page's cursor.
        cursor: String,
    },
    /// A page was given after one without `nextCursor`, which ended the
    /// list: the pages are out of order or from two listings.
    PageAfterEnd {
        /// The extra page.
        page: usize,
    },
    /// An entry of `tools` is not an object.
    ToolNotObject {
        /// The page.
        page: usize,
        /// The entry's position in the page.
        index: usize,
        /// Its JSON type.
        found: &'static str,
    },
    /// A tool has no `name`, or it is not a string.
    NameNotString {
        /// The page.
        page: usize,
        /// The tool's position in the page.
        index: usize,
        /// `"missing"` or the JSON type found.
        found: &'static str,
    },
    /// A member the audit reads (`name`, `title`, `annotations`, `_meta`,
    /// or a hint inside `annotations`) or a client acts on (`description`,
    /// `inputSchema`, `outputSchema`) appears twice in one tool's object:
    /// which value holds is unknown (parsers differ: most keep the last).
    DuplicateKey {
        /// The page.
        page: usize,
        /// The tool's position in the page.
        index: usize,
        /// The member, e.g. `name` or `annotations.readOnlyHint`.
        key: String,
    },
    /// A member of the page that the collection reads appears twice:
    /// `tools`, `nextCursor`, a JSON-RPC response's `result`, `error`,
    /// `jsonrpc`, `id` or `method`, or a saved-pages file's `pages`. Which
    /// value holds is unknown; the last, which most parsers keep, can make
    /// an incomplete list look complete (`"nextCursor": "2", "nextCursor":
    /// null`).
    DuplicatePageKey {
        /// The page.
        page: usize,
        /// The member, e.g. `nextCursor` or `result.nextCursor`.
        key: String,
    },
    /// A value of the page cannot be read, though JSON's grammar allows it:
    /// a number beyond the range of a 64-bit float (`1e400`), a lone
    /// surrogate escape (`"\ud800"`), or a member name that is such a
    /// string. No tree can hold it, so whatever is read of the page, it is
    /// refused, naming where it is.
    Unreadable {
        /// The page.
        page: usize,
        /// The tool's position in the page, when the value is in a tool.
        index: Option<usize>,
        /// The member, e.g. `annotations.readOnlyHint`, `inputSchema` or
        /// `nextCursor`; `None` when a member name itself cannot be read.
        member: Option<String>,
        /// The parser's message, with the line and column.
        error: String,
    },
    /// Two tools have the same name: which definition holds is unknown.
    DuplicateName {
        /// The name.
        name: String,
        /// The page of the first definition.
        first_page: usize,
        /// The page of the second.
        page: usize,
    },
    /// A tool's hints are malformed.
    Hint {
        /// The tool's name.
        tool: String,
        /// The page.
        page: usize,
        /// What is wrong.
        error: HintError,
    },
}

impl fmt::Display for CollectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectError::PageNotObject { page, found } => {
                write!(f, "page {page} is {found}, not a tools/list result object")
            }
            CollectError::PageNotJson { page, error } => {
                if error.starts_with("recursion limit exceeded") {
                    write!(
                        f,
                        "page {page} nests JSON more than 128 levels deep, deeper than this \
                         reader follows: {error}"
                    )
                } else {
                    write!(f, "page {page} is not JSON: {error}")
                }
            }
            CollectError::JsonRpcError {
                page,
                code,
                message,
            } => write!(
                f,
                "page {page} is a JSON-RPC error response: {code} {}",
                escape::quoted(message)
            ),
            CollectError::ResultAndError { page } => write!(
                f,
                "page {page} is a JSON-RPC response with both `result` and `error`: which one \
                 holds is unknown"
            ),
            CollectError::ErrorNotObject { page, found } => write!(
                f,
                "page {page} is a JSON-RPC error response whose `error` is {found}, not an \
                 error object"
            ),
            CollectError::ToolsNotArray { page, found } => {
                write!(f, "page {page}: `tools` is {found}, not an array")
            }
            CollectError::CursorNotString { page, found } => {
                write!(f, "page {page}: `nextCursor` is {found}, not a string")
            }
            CollectError::RepeatedCursor {
                cursor,
                first_page,
                page,
            } => write!(
                f,
                "page {page} returned the cursor {} that page {first_page} already \
                 returned: following it would loop, so the list is refused",
                escape::quoted(cursor)
            ),
            CollectError::PageCap { max_pages, cursor } => write!(
                f,
                "the list needs more than {max_pages} pages (page {max_pages} returned the \
                 cursor {}); raise the page cap if the server really is this large",
                escape::quoted(cursor)
            ),
            CollectError::NotComplete { page, result_type } => write!(
                f,
                "page {page} has resultType {}, not \"complete\": the server did not list \
                 its tools",
                escape::quoted(result_type)
            ),
            CollectError::ResultTypeNotString { page, found } => write!(
                f,
                "page {page}: `resultType` is {found}, not a string: whether the page is a \
                 complete result is unknown"
            ),
            CollectError::Incomplete { pages, cursor } => write!(
                f,
                "the list is incomplete: page {pages}, the last one given, still has \
                 nextCursor {}, so more tools follow",
                escape::quoted(cursor)
            ),
            CollectError::PageAfterEnd { page } => write!(
                f,
                "page {page} follows page {}, which ended the list (no nextCursor): the pages \
                 are out of order or from different listings",
                page - 1
            ),
            CollectError::ToolNotObject { page, index, found } => {
                write!(f, "page {page}, tool {index}: is {found}, not an object")
            }
            CollectError::NameNotString { page, index, found } => {
                write!(
                    f,
                    "page {page}, tool {index}: `name` is {found}, not a string"
                )
            }
            CollectError::DuplicateKey { page, index, key } => write!(
                f,
                "page {page}, tool {index}: `{}` appears twice: which value holds is unknown",
                escape::shown(key)
            ),
            CollectError::DuplicatePageKey { page, key } => write!(
                f,
                "page {page}: `{}` appears twice: which value holds is unknown",
                escape::shown(key)
            ),
            CollectError::Unreadable {
                page,
                index,
                member,
                error,
            } => {
                match index {
                    Some(index) => write!(f, "page {page}, tool {index}")?,
                    None => write!(f, "page {page}")?,
                }
                match member {
                    Some(member) => write!(f, ": `{}`", escape::shown(member))?,
                    None if index.is_some() => {}
                    None => f.write_str(": a member name")?,
                }
                if error.starts_with("recursion limit exceeded") {
                    write!(
                        f,
                        " nests JSON more than 128 levels deep, deeper than this reader \
                         follows: {error}"
                    )
                } else {
                    write!(f, " cannot be read: {error}")
                }
            }
            CollectError::DuplicateName {
                name,
                first_page,
                page,
            } => {
                let name = escape::shown(name);
                if first_page == page {
                    write!(
                        f,
                        "tool `{name}` appears twice on page {page}: which definition holds \
                         is unknown"
                    )
                } else {
                    write!(
                        f,
                        "tool `{name}` appears on page {first_page} and again on page {page}: \
                         which definition holds is unknown"
                    )
                }
            }
            CollectError::Hint { tool, page, error } => {
                write!(f, "page {page}, tool `{}`: {error}", escape::shown(tool))
            }
        }
    }
}

impl std::error::Error for CollectError {}

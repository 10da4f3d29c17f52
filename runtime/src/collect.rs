//! Complete collection of a server's `tools/list`, page by page, from any
//! MCP server's raw JSON.
//!
//! Source: the MCP spec's `server/utilities/pagination` page and
//! `server/tools` (`tools/list`), revisions 2025-06-18 to 2026-07-28.
//!
//! - `nextCursor` is followed while it is present, **including `""`**
//!   (2026-07-28: an empty string is a valid cursor). Only an absent or
//!   `null` cursor ends the list.
//! - A cursor returned twice, or more pages than
//!   [`CollectOptions::max_pages`], is an error, never a loop.
//! - Saved pages whose last page still carries a cursor are incomplete and
//!   refused by [`Collector::finish`].
//! - Duplicate names, non-object tools, missing or non-string names,
//!   `annotations` that is not an object, and non-boolean hints are refused,
//!   naming the page, the tool and the field. `"annotations": null` is the
//!   same as absent.
//! - From text ([`Collector::push_page_json`]): a member the collection
//!   reads given twice (`"nextCursor": "2", "nextCursor": null`, or a hint
//!   inside a tool) is refused, since which value holds is unknown; so is a
//!   value no tree can hold (`1e400`, a lone surrogate `"\ud800"`),
//!   anywhere in the page, whatever is kept of it, naming the page, the
//!   tool and the member.
//! - A page may be a bare `tools/list` result or a whole JSON-RPC response
//!   (`{"jsonrpc": "2.0", "id": 1, "result": {...}}`); an error response is
//!   refused with its code and message, and one with both a result and an
//!   error is refused. `"error": null` beside a result (or `"result": null`
//!   beside an error) counts as absent, as for a live server's answers
//!   ([`jsonrpc::carried`]).
//!
//! Each page is consumed as it arrives: only what the audit needs of each
//! tool is kept (its name, title, hints, and on request its fingerprint or
//! whole definition), so memory stays near the size of one page plus a
//! small record per tool.
//!
//! ```
//! use mcp_hints::collect::{CollectOptions, Collector};
//! use serde_json::json;
//!
//! let mut collector = Collector::new(CollectOptions::default());
//! // The server's first page points at a second one with the cursor "".
//! let next = collector.push_page(json!({
//!     "tools": [{ "name": "read", "inputSchema": {"type": "object"},
//!                 "annotations": { "readOnlyHint": true } }],
//!     "nextCursor": ""
//! }))?;
//! assert_eq!(next, Some(""));
//! let next = collector.push_page(json!({ "tools": [{ "name": "write", "inputSchema": {} }] }))?;
//! assert_eq!(next, None);
//! let list = collector.finish()?;
//! assert_eq!(list.tools.len(), 2);
//! assert_eq!(list.pages, 2);
//! # Ok::<(), mcp_hints::collect::CollectError>(())
//! ```

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use mcp_hints_core::escape;
use serde_json::{Map, Value};

use crate::fingerprint::Fingerprint;
use crate::hints::{HintError, ToolHints, json_type};
use crate::idempotency::KEY_META_KEY;
use crate::jsonrpc::{self, Carried, Member};
use crate::policy::{self, Trust, Verdict};

/// Limits and what to keep of each tool.
#[derive(Clone, Debug)]
pub struct CollectOptions {
    /// The most pages accepted before [`CollectError::PageCap`]; default
    /// 10,000.
    pub max_pages: usize,
    /// Compute each tool's [`Fingerprint`] (for pinning); default false.
    pub fingerprints: bool,
    /// Keep each tool's whole definition in [`ListedTool::definition`] (for
    /// lints that look beyond the hints); default false.
    pub keep_definitions: bool,
}

impl Default for CollectOptions {
    fn default() -> Self {
        CollectOptions {
            max_pages: 10_000,
            fingerprints: false,
            keep_definitions: false,
        }
    }
}

/// One tool of a collected list.
#[derive(Clone, Debug)]
pub struct ListedTool {
    /// The tool's name, as served.
    pub name: String,
    /// The page it was served on, counting from 1.
    pub page: usize,
    /// The top-level `title`, else `annotations.title`, when either is a
    /// non-empty string.
    pub title: Option<String>,
    /// The four hints with their provenance.
    pub hints: ToolHints,
    /// The definition's fingerprint, when [`CollectOptions::fingerprints`]
    /// was set.
    pub fingerprint: Option<Fingerprint>,
    /// The whole definition, when [`CollectOptions::keep_definitions`] was
    /// set.
    pub definition: Option<Map<String, Value>>,
    /// The argument carrying the tool's idempotency key, when its `_meta`
    /// names one under [`KEY_META_KEY`] as a non-empty string (anything
    /// else there counts as no key: the pessimistic reading).
    pub idempotency_key: Option<String>,
}

impl ListedTool {
    /// The policy's verdict for a call of this tool whose outcome is
    /// unknown: [`policy::decide_keyed`] for a keyed tool, else
    /// [`policy::decide`].
    pub fn verdict(&self, trust: Trust) -> Verdict {
        match &self.idempotency_key {
            Some(field) => policy::decide_keyed(trust, &self.hints, field),
            None => policy::decide(trust, &self.hints),
        }
    }
}

/// A complete `tools/list`: every tool of every page, in page order.
#[derive(Clone, Debug, Default)]
pub struct ToolList {
    /// The tools, in the order served.
    pub tools: Vec<ListedTool>,
    /// How many pages the list took.
    pub pages: usize,
    /// Each page's members other than `tools`, as served, in page order:
    /// `nextCursor`, and under MCP 2026-07-28 `resultType`, `ttlMs`,
    /// `cacheScope`, `_meta` (of a response's `result`, for a page given
    /// as a whole JSON-RPC response).
    pub page_fields: Vec<Map<String, Value>>,
}

impl ToolList {
    /// The tool named `name`, if the list has it.
    pub fn get(&self, name: &str) -> Option<&ListedTool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// The policy's verdict for a call of `name` whose outcome is unknown:
    /// [`ListedTool::verdict`], or [`policy::unknown_tool`] (refuse) when
    /// the list does not have it.
    pub fn decide(&self, name: &str, trust: Trust) -> Verdict {
        match self.get(name) {
            Some(tool) => tool.verdict(trust),
            None => policy::unknown_tool(name),
        }
    }
}

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
    /// (neither `null`; see [`jsonrpc::carried`]): which one holds is
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
    /// The list needs more than [`CollectOptions::max_pages`] pages.
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

/// Collects a `tools/list` page by page. Feed it each page as it arrives
/// with [`push_page`](Self::push_page), request the next page with the
/// cursor it returns, and call [`finish`](Self::finish) at the end.
#[derive(Debug)]
pub struct Collector {
    options: CollectOptions,
    tools: Vec<ListedTool>,
    page_fields: Vec<Map<String, Value>>,
    pages_of_names: HashMap<String, usize, foldhash::fast::RandomState>,
    pages_of_cursors: HashMap<String, usize, foldhash::fast::RandomState>,
    pages: usize,
    pending: Option<String>,
}

impl Collector {
    /// A collector that has seen no page yet.
    pub fn new(options: CollectOptions) -> Collector {
        Collector {
            options,
            tools: Vec::new(),
            page_fields: Vec::new(),
            pages_of_names: HashMap::default(),
            pages_of_cursors: HashMap::default(),
            pages: 0,
            pending: None,
        }
    }

    /// Takes the next page: a `tools/list` result object, or a whole
    /// JSON-RPC response carrying one. Returns the cursor to request the
    /// following page with, or `None` when this page ends the list.
    ///
    /// # Errors
    ///
    /// Any [`CollectError`] but [`CollectError::Incomplete`];
    /// [`CollectError::PageAfterEnd`] when an earlier page already ended the
    /// list. After an error the collector must not be used further.
    pub fn push_page(&mut self, page: Value) -> Result<Option<&str>, CollectError> {
        self.check_not_ended()?;
        let page = match page {
            Value::Object(page) => Ok(Page::of_tree(page, &self.options, true)),
            other => Err(json_type(&other)),
        };
        self.take(page)
    }

    /// Takes the next page as JSON text, as [`push_page`](Self::push_page)
    /// takes it as a tree, with the same results and errors.
    ///
    /// The text is read in one pass that keeps only what the collection
    /// reads: `tools` (each tool's `name`, `title`, `annotations` and
    /// `_meta`, or its whole definition when definitions are kept or
    /// fingerprinted), `nextCursor`, and a JSON-RPC response's `result`,
    /// `error`, `jsonrpc`, `id` and `method`. Descriptions and schemas are
    /// checked, not built, and each tool is reduced to what the list keeps
    /// of it as soon as it is read. Every value of the page is checked to be
    /// readable, the skipped ones included, so that the same text gets the
    /// same answer whatever is kept of it.
    ///
    /// # Errors
    ///
    /// As [`push_page`](Self::push_page), plus:
    /// [`CollectError::PageNotJson`] for text that is not JSON;
    /// [`CollectError::DuplicatePageKey`] and [`CollectError::DuplicateKey`]
    /// for a member the collection reads given twice (a tree would keep
    /// one of the two silently); [`CollectError::Unreadable`] for a value
    /// JSON's grammar allows but no tree holds (a number beyond the range of
    /// a 64-bit float such as `1e400`, a lone surrogate escape such as
    /// `"\ud800"`), naming the page, the tool and the member. These come
    /// before any other error of the page.
    pub fn push_page_json(&mut self, text: &str) -> Result<Option<&str>, CollectError> {
        self.check_not_ended()?;
        let page =
            reader::read(text, &self.options).map_err(|fault| fault.at_page(self.pages + 1))?;
        self.take(page)
    }

    /// Takes a whole JSON-RPC response text when it is exactly the
    /// response to request `id` with a well-formed page as its result:
    /// `jsonrpc` "2.0", integer `id`, no `method` or `error`, every tool an
    /// object. The envelope and the page are read in one pass, as by
    /// [`push_page_json`](Self::push_page_json). Returns `None`, having
    /// changed nothing, for text that is not JSON and for any other
    /// message: the caller then sorts the message itself and hands the
    /// result to [`push_page_json`](Self::push_page_json), whose errors are
    /// precise. A member given twice or a value that cannot be read is
    /// refused here, whatever the message: sorted as a tree, one of the two
    /// values would silently win.
    pub fn push_response_json(
        &mut self,
        text: &str,
        id: u64,
    ) -> Option<Result<Option<&str>, CollectError>> {
        let response = match reader::read(text, &self.options) {
            Ok(Ok(response)) => response,
            Ok(Err(_)) | Err(reader::Fault::NotJson(_)) => return None,
            Err(fault) => return Some(Err(fault.at_page(self.pages + 1))),
        };
        let well_formed = response.jsonrpc.as_ref().and_then(Value::as_str) == Some("2.0")
            && response.id.as_ref().and_then(Value::as_u64) == Some(id)
            && response.method.as_ref().is_none_or(Value::is_null)
            && response.carried() == Carried::Result;
        let Some(Ok(page)) = response.result.filter(|_| well_formed) else {
            return None;
        };
        let tools_are_objects = match &page.tools {
            Some(Tools::Array(tools)) => tools.iter().all(|tool| matches!(tool, Listing::Tool(_))),
            _ => false,
        };
        let cursor_is_usable = page
            .cursor
            .as_ref()
            .is_none_or(|cursor| cursor.is_null() || cursor.is_string());
        if !(tools_are_objects && cursor_is_usable) {
            return None;
        }
        if let Err(error) = self.check_not_ended() {
            return Some(Err(error));
        }
        Some(self.take(Ok(*page)))
    }

    /// Takes page `page`, read from a tree or from text (or the JSON type
    /// it is instead of an object): what a page means is said here only.
    fn take(&mut self, page: Result<Page, &'static str>) -> Result<Option<&str>, CollectError> {
        self.pages += 1;
        let number = self.pages;
        let mut page = page.map_err(|found| CollectError::PageNotObject {
            page: number,
            found,
        })?;
        if page.is_response() {
            page = page.unwrapped(number)?;
        }
        // Before the tools, which a page that is not a listing lacks.
        match page.fields.get("resultType") {
            None => {}
            Some(Value::String(result_type)) if result_type == "complete" => {}
            Some(Value::String(result_type)) => {
                return Err(CollectError::NotComplete {
                    page: number,
                    result_type: result_type.clone(),
                });
            }
            // Neither complete nor a kind of result that could be named.
            Some(other) => {
                return Err(CollectError::ResultTypeNotString {
                    page: number,
                    found: json_type(other),
                });
            }
        }
        self.page_fields.push(std::mem::take(&mut page.fields));
        let cursor = match page.cursor {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor),
            Some(other) => {
                return Err(CollectError::CursorNotString {
                    page: number,
                    found: json_type(&other),
                });
            }
        };
        let tools = match page.tools {
            Some(Tools::Array(tools)) => tools,
            Some(Tools::Other(found)) => {
                return Err(CollectError::ToolsNotArray {
                    page: number,
                    found,
                });
            }
            None => {
                return Err(CollectError::ToolsNotArray {
                    page: number,
                    found: "missing",
                });
            }
        };
        self.follow(number, cursor)?;
        self.tools.reserve(tools.len());
        for (index, tool) in tools.into_iter().enumerate() {
            let tool = match tool {
                Listing::Tool(tool) => tool,
                Listing::Other(found) => {
                    return Err(CollectError::ToolNotObject {
                        page: number,
                        index: index + 1,
                        found,
                    });
                }
            };
            let listed = self.check_tool(number, index + 1, tool)?;
            self.tools.push(listed);
        }
        Ok(self.pending.as_deref())
    }

    /// Checks one tool's name, hints and uniqueness, and records its name.
    fn check_tool(
        &mut self,
        page: usize,
        index: usize,
        tool: ToolSummary,
    ) -> Result<ListedTool, CollectError> {
        let name = tool
            .name
            .map_err(|found| CollectError::NameNotString { page, index, found })?;
        let hints = tool.hints.map_err(|error| CollectError::Hint {
            tool: name.clone(),
            page,
            error,
        })?;
        match self.pages_of_names.entry(name) {
            Entry::Occupied(first) => Err(CollectError::DuplicateName {
                name: first.key().clone(),
                first_page: *first.get(),
                page,
            }),
            Entry::Vacant(slot) => {
                let name = slot.key().clone();
                slot.insert(page);
                Ok(ListedTool {
                    name,
                    page,
                    title: tool.title,
                    hints,
                    fingerprint: tool.fingerprint,
                    definition: tool.definition,
                    idempotency_key: tool.idempotency_key,
                })
            }
        }
    }

    /// [`CollectError::PageAfterEnd`] once a page without `nextCursor` was
    /// taken.
    fn check_not_ended(&self) -> Result<(), CollectError> {
        if self.pages > 0 && self.pending.is_none() {
            return Err(CollectError::PageAfterEnd {
                page: self.pages + 1,
            });
        }
        Ok(())
    }

    /// Records the cursor page `number` returned. A server that repeats a
    /// cursor usually repeats the page too, so this runs before the page's
    /// tools are taken: the repeat, the cause, is reported rather than the
    /// duplicate names it brings.
    fn follow(&mut self, number: usize, cursor: Option<String>) -> Result<(), CollectError> {
        self.pending = None;
        if let Some(cursor) = cursor {
            match self.pages_of_cursors.entry(cursor) {
                Entry::Occupied(seen) => {
                    return Err(CollectError::RepeatedCursor {
                        cursor: seen.key().clone(),
                        first_page: *seen.get(),
                        page: number,
                    });
                }
                Entry::Vacant(slot) => {
                    if number >= self.options.max_pages {
                        return Err(CollectError::PageCap {
                            max_pages: self.options.max_pages,
                            cursor: slot.into_key(),
                        });
                    }
                    self.pending = Some(slot.key().clone());
                    slot.insert(number);
                }
            }
        }
        Ok(())
    }

    /// Ends the collection.
    ///
    /// # Errors
    ///
    /// [`CollectError::Incomplete`] when the last page given still has a
    /// `nextCursor`, `""` included: saved pages that stop there miss tools.
    pub fn finish(self) -> Result<ToolList, CollectError> {
        if let Some(cursor) = self.pending {
            return Err(CollectError::Incomplete {
                pages: self.pages,
                cursor,
            });
        }
        Ok(ToolList {
            tools: self.tools,
            pages: self.pages,
            page_fields: self.page_fields,
        })
    }
}

/// Collects a whole list from pages already at hand (saved `tools/list`
/// results or responses, in order).
///
/// # Errors
///
/// As [`Collector::push_page`] and [`Collector::finish`].
pub fn collect_pages(
    pages: impl IntoIterator<Item = Value>,
    options: CollectOptions,
) -> Result<ToolList, CollectError> {
    let mut collector = Collector::new(options);
    for page in pages {
        collector.push_page(page)?;
    }
    collector.finish()
}

/// A page as the collection takes it, read from a tree
/// ([`Page::of_tree`]) or from text ([`reader::read`]).
#[derive(Default)]
struct Page {
    /// `nextCursor`, as given.
    cursor: Option<Value>,
    /// `tools`.
    tools: Option<Tools>,
    /// A JSON-RPC response's members, read on the outermost object only.
    jsonrpc: Option<Value>,
    id: Option<Value>,
    method: Option<Value>,
    /// `result`: the page it carries, or its JSON type when not an object.
    result: Option<Result<Box<Page>, &'static str>>,
    /// `error`: its `code` and `message` (other members are dropped).
    error: Option<Value>,
    /// Every member but `tools` (and, on a response, but the envelope's
    /// own), as served.
    fields: Map<String, Value>,
}

/// A page's `tools`: the tools, or the JSON type it is instead of an array.
enum Tools {
    Array(Vec<Listing>),
    Other(&'static str),
}

/// One entry of `tools`: a tool, or the JSON type it is instead of an
/// object.
enum Listing {
    Tool(ToolSummary),
    Other(&'static str),
}

/// What the list keeps of one tool object, read as soon as the object is:
/// the definition itself only when definitions are kept.
struct ToolSummary {
    /// The name, or what `name` is instead of a string (`"missing"`).
    name: Result<String, &'static str>,
    title: Option<String>,
    hints: Result<ToolHints, HintError>,
    idempotency_key: Option<String>,
    fingerprint: Option<Fingerprint>,
    definition: Option<Map<String, Value>>,
}

impl ToolSummary {
    fn of(tool: Map<String, Value>, options: &CollectOptions) -> ToolSummary {
        let name = match tool.get("name") {
            Some(Value::String(name)) => Ok(name.clone()),
            Some(other) => Err(json_type(other)),
            None => Err("missing"),
        };
        let meta = tool.get("_meta");
        ToolSummary {
            name,
            title: title_of(&tool),
            hints: ToolHints::from_json(tool.get("annotations"), meta),
            idempotency_key: meta
                .and_then(|meta| meta.get(KEY_META_KEY))
                .and_then(Value::as_str)
                .filter(|field| !field.is_empty())
                .map(str::to_owned),
            fingerprint: options
                .fingerprints
                .then(|| Fingerprint::of_definition(&tool)),
            definition: options.keep_definitions.then_some(tool),
        }
    }
}

impl Page {
    /// The page of tree `page`; `outermost`: also read the members of a
    /// JSON-RPC response.
    fn of_tree(mut page: Map<String, Value>, options: &CollectOptions, outermost: bool) -> Page {
        let tools = page.remove("tools").map(|tools| match tools {
            Value::Array(tools) => Tools::Array(
                tools
                    .into_iter()
                    .map(|tool| match tool {
                        Value::Object(tool) => Listing::Tool(ToolSummary::of(tool, options)),
                        other => Listing::Other(json_type(&other)),
                    })
                    .collect(),
            ),
            other => Tools::Other(json_type(&other)),
        });
        let cursor = page.get("nextCursor").cloned();
        if !outermost {
            return Page {
                cursor,
                tools,
                fields: page,
                ..Page::default()
            };
        }
        Page {
            cursor,
            tools,
            jsonrpc: page.remove("jsonrpc"),
            id: page.remove("id"),
            method: page.remove("method"),
            result: page.remove("result").map(|result| match result {
                Value::Object(result) => Ok(Box::new(Page::of_tree(result, options, false))),
                other => Err(json_type(&other)),
            }),
            error: page.remove("error"),
            fields: page,
        }
    }

    /// Whether this is a JSON-RPC response rather than a page: no `tools`,
    /// and `jsonrpc`, `result` or `error`.
    fn is_response(&self) -> bool {
        self.tools.is_none()
            && (self.jsonrpc.is_some() || self.result.is_some() || self.error.is_some())
    }

    /// Which of `result` and `error` this response carries, by the rule
    /// every reader of responses shares ([`jsonrpc::carried`]).
    fn carried(&self) -> Carried {
        let result = match &self.result {
            None => Member::Absent,
            Some(Err(found)) if *found == json_type(&Value::Null) => Member::Null,
            Some(_) => Member::Given,
        };
        jsonrpc::carried(result, Member::of(self.error.as_ref()))
    }

    /// The page a response carries, or its error.
    fn unwrapped(self, page: usize) -> Result<Page, CollectError> {
        match self.carried() {
            Carried::Both => return Err(CollectError::ResultAndError { page }),
            Carried::Error => {
                let Some(Value::Object(error)) = self.error else {
                    let found = self.error.as_ref().map_or("missing", json_type);
                    return Err(CollectError::ErrorNotObject { page, found });
                };
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("(no message)")
                    .to_owned();
                return Err(CollectError::JsonRpcError {
                    page,
                    code,
                    message,
                });
            }
            Carried::Result | Carried::Neither => {}
        }
        match self.result {
            Some(Ok(result)) => Ok(*result),
            Some(Err(found)) => Err(CollectError::PageNotObject { page, found }),
            None => Err(CollectError::ToolsNotArray {
                page,
                found: "missing",
            }),
        }
    }
}

/// Reading a page's JSON text in one pass into a [`Page`], keeping only the
/// members the collection reads and checking every other value without
/// building it.
///
/// Which members are read is said by the tables below ([`PAGE`],
/// [`RESULT`], [`TOOL`] and the [`Members`] they lead to), so that the
/// members refused when given twice are exactly the ones read.
mod reader {
    use std::borrow::Cow;
    use std::cell::RefCell;
    use std::fmt;

    use serde::Deserialize;
    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Value};

    use super::{CollectError, CollectOptions, Listing, Page, ToolSummary, Tools};
    use crate::hints::PROVENANCE_META_KEY;
    use crate::idempotency::KEY_META_KEY;

    /// The members of a page the collection reads; a response's members
    /// are read on the outermost object only. `pages` is read by the
    /// saved-pages file format (`{"pages": [...]}`), which hands a file
    /// here whole when its `pages` cannot be taken apart.
    const PAGE: [&str; 8] = [
        "tools",
        "nextCursor",
        "result",
        "error",
        "jsonrpc",
        "id",
        "method",
        "pages",
    ];

    /// The members of a response's `result` the collection reads.
    const RESULT: [&str; 2] = ["tools", "nextCursor"];

    /// The members of a tool the collection reads, each kept whole but
    /// `annotations` and `_meta` (see [`ANNOTATIONS`] and [`META`]), and
    /// the members of the definition a client acts on, read as the other
    /// members are (checked, or kept whole with the definition): a client
    /// keeps one of two descriptions or schemas, and which one is unknown.
    const TOOL: [&str; 7] = [
        "name",
        "title",
        "annotations",
        "_meta",
        "description",
        "inputSchema",
        "outputSchema",
    ];

    /// How one value below a tool or a response's `error` is read.
    #[derive(Clone, Copy)]
    enum Shape {
        /// Checked to be readable, then dropped.
        Skip,
        /// Kept whole, as a tree.
        Whole,
        /// An object whose [`Members`] are read by their own shapes and
        /// refused when given twice; anything else is kept as an empty
        /// value of its JSON type, which is all that is reported of it.
        Object(&'static Members),
    }

    /// The members of an object that the collection reads, with their
    /// shapes, and the shape of all the others.
    struct Members {
        read: &'static [(&'static str, Shape)],
        others: Shape,
    }

    /// The hints, read from `annotations` and from the provenance record.
    const HINTS: [(&str, Shape); 4] = [
        ("readOnlyHint", Shape::Whole),
        ("destructiveHint", Shape::Whole),
        ("idempotentHint", Shape::Whole),
        ("openWorldHint", Shape::Whole),
    ];

    static ANNOTATIONS: Members = Members {
        read: &[
            HINTS[0],
            HINTS[1],
            HINTS[2],
            HINTS[3],
            ("title", Shape::Whole),
        ],
        others: Shape::Whole,
    };

    static PROVENANCE: Members = Members {
        read: &HINTS,
        others: Shape::Whole,
    };

    static META: Members = Members {
        read: &[
            (PROVENANCE_META_KEY, Shape::Object(&PROVENANCE)),
            (KEY_META_KEY, Shape::Whole),
        ],
        others: Shape::Whole,
    };

    /// A JSON-RPC error: what [`CollectError::JsonRpcError`] says.
    static ERROR: Members = Members {
        read: &[("code", Shape::Whole), ("message", Shape::Whole)],
        others: Shape::Skip,
    };

    /// Why a page's text could not be read.
    #[derive(Debug)]
    pub(super) enum Fault {
        /// Not JSON: the parser's message.
        NotJson(String),
        /// A member the collection reads is given twice.
        Duplicate { tool: Option<usize>, key: String },
        /// A value that cannot be read (or an object whose member name
        /// cannot, when `member` is `None`).
        Unreadable {
            tool: Option<usize>,
            member: Option<String>,
            error: String,
        },
    }

    impl Fault {
        /// The error, for page `page`.
        pub(super) fn at_page(self, page: usize) -> CollectError {
            match self {
                Fault::NotJson(error) => CollectError::PageNotJson { page, error },
                Fault::Duplicate {
                    tool: Some(index),
                    key,
                } => CollectError::DuplicateKey { page, index, key },
                Fault::Duplicate { tool: None, key } => {
                    CollectError::DuplicatePageKey { page, key }
                }
                Fault::Unreadable {
                    tool: None,
                    member: None,
                    error,
                } => CollectError::PageNotJson { page, error },
                Fault::Unreadable {
                    tool,
                    member,
                    error,
                } => CollectError::Unreadable {
                    page,
                    index: tool,
                    member,
                    error,
                },
            }
        }
    }

    /// Where in the page the parse failed, recorded by the visitors on the
    /// way out of the failure: serde's errors carry only a message.
    #[derive(Default)]
    struct Trace {
        /// A visitor below has recorded the failure.
        recorded: bool,
        /// The failure is a member given twice.
        duplicate: bool,
        /// The member path, innermost first, within the tool when `tool`
        /// is set, else within the page.
        path: Vec<String>,
        /// The tool, counting from 1.
        tool: Option<usize>,
    }

    impl Trace {
        fn duplicate(&mut self, key: &str) {
            self.recorded = true;
            self.duplicate = true;
            self.path = vec![key.to_owned()];
        }

        /// A member name could not be read: the object holding it is named.
        fn in_key(&mut self) {
            self.recorded = true;
        }

        /// The value of member `key` failed.
        fn in_member(&mut self, key: &str) {
            if !self.recorded || self.tool.is_none() {
                self.path.push(key.to_owned());
            }
            self.recorded = true;
        }

        /// Tool `index` of `tools` failed.
        fn in_tool(&mut self, index: usize) {
            self.recorded = true;
            self.tool.get_or_insert(index);
        }

        fn into_fault(self, error: &serde_json::Error) -> Fault {
            let member = (!self.path.is_empty()).then(|| {
                let mut path = self.path;
                path.reverse();
                path.join(".")
            });
            match (self.recorded, self.duplicate, member) {
                (true, true, Some(key)) => Fault::Duplicate {
                    tool: self.tool,
                    key,
                },
                (true, _, member) if !error.is_eof() => Fault::Unreadable {
                    tool: self.tool,
                    member,
                    error: error.to_string(),
                },
                _ => Fault::NotJson(error.to_string()),
            }
        }
    }

    /// Reads page `text`: the page, or the JSON type it is instead of an
    /// object.
    pub(super) fn read(
        text: &str,
        options: &CollectOptions,
    ) -> Result<Result<Page, &'static str>, Fault> {
        let trace = RefCell::new(Trace::default());
        let mut parser = serde_json::Deserializer::from_str(text);
        let seed = PageSeed {
            ctx: Ctx {
                options,
                trace: &trace,
            },
            outermost: true,
        };
        match seed.deserialize(&mut parser).and_then(|page| {
            parser.end()?;
            Ok(page)
        }) {
            Ok(page) => Ok(page),
            Err(error) => Err(trace.into_inner().into_fault(&error)),
        }
    }

    /// What every visitor below shares.
    #[derive(Clone, Copy)]
    struct Ctx<'c> {
        options: &'c CollectOptions,
        trace: &'c RefCell<Trace>,
    }

    /// Reads the members of an object in order: `take(read, key, map)`
    /// reads each value, `read` being the position of its name among those
    /// `find` knows. A known name given twice is refused; a failure is
    /// traced to the member.
    fn walk<'de, A: MapAccess<'de>>(
        mut map: A,
        trace: &RefCell<Trace>,
        find: impl Fn(&str) -> Option<usize>,
        mut take: impl FnMut(Option<usize>, &str, &mut A) -> Result<(), A::Error>,
    ) -> Result<(), A::Error> {
        // Bit i: the member `find` puts at i has been seen.
        let mut seen = 0u32;
        loop {
            let key = match map.next_key_seed(Key) {
                Ok(Some(key)) => key,
                Ok(None) => return Ok(()),
                Err(error) => {
                    trace.borrow_mut().in_key();
                    return Err(error);
                }
            };
            let read = find(&key);
            if let Some(index) = read {
                if seen & (1 << index) != 0 {
                    trace.borrow_mut().duplicate(&key);
                    return Err(de::Error::custom("a member given twice"));
                }
                seen |= 1 << index;
            }
            if let Err(error) = take(read, &key, &mut map) {
                trace.borrow_mut().in_member(&key);
                return Err(error);
            }
        }
    }

    fn position(names: &[&str], key: &str) -> Option<usize> {
        names.iter().position(|name| *name == key)
    }

    /// `visit_*` for the JSON types a visitor takes as "something else":
    /// each gives `$other(type)`, consuming arrays and objects checked.
    macro_rules! other_types {
        ($other:expr, [$($skip:ident),*]) => {
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok($other("a boolean"))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok($other("a number"))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok($other("a number"))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok($other("a number"))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok($other("a string"))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok($other("null"))
            }
            $(other_types!(@ $skip, $other);)*
        };
        (@ seq, $other:expr) => {
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Checked.visit_seq(seq)?;
                Ok($other("an array"))
            }
        };
        (@ map, $other:expr) => {
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Checked.visit_map(map)?;
                Ok($other("an object"))
            }
        };
    }

    /// A page, or a response's `result`.
    #[derive(Clone, Copy)]
    struct PageSeed<'c> {
        ctx: Ctx<'c>,
        /// Read a response's members too.
        outermost: bool,
    }

    impl<'de> DeserializeSeed<'de> for PageSeed<'_> {
        type Value = Result<Page, &'static str>;

        fn deserialize<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for PageSeed<'_> {
        type Value = Result<Page, &'static str>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a tools/list result object")
        }

        other_types!(Err, [seq]);

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            let ctx = self.ctx;
            let names: &[&str] = if self.outermost { &PAGE } else { &RESULT };
            let mut page = Page::default();
            walk(
                map,
                ctx.trace,
                |key| position(names, key),
                |read, key, map| {
                    match read.map(|index| names[index]) {
                        Some("tools") => page.tools = Some(map.next_value_seed(ToolsSeed(ctx))?),
                        Some("nextCursor") => {
                            let cursor: Value = map.next_value()?;
                            page.fields.insert("nextCursor".to_owned(), cursor.clone());
                            page.cursor = Some(cursor);
                        }
                        Some("result") => {
                            let result = map.next_value_seed(PageSeed {
                                ctx,
                                outermost: false,
                            })?;
                            page.result = Some(result.map(Box::new));
                        }
                        Some("error") => {
                            page.error = Some(map.next_value_seed(ValueSeed {
                                shape: Shape::Object(&ERROR),
                                trace: ctx.trace,
                            })?);
                        }
                        Some("jsonrpc") => page.jsonrpc = Some(map.next_value()?),
                        Some("id") => page.id = Some(map.next_value()?),
                        Some("method") => page.method = Some(map.next_value()?),
                        // Page-level members are few and small: kept as
                        // served (a tree refuses what `Checked` would).
                        _ => {
                            page.fields.insert(key.to_owned(), map.next_value()?);
                        }
                    }
                    Ok(())
                },
            )?;
            Ok(Ok(page))
        }
    }

    /// A page's `tools`.
    #[derive(Clone, Copy)]
    struct ToolsSeed<'c>(Ctx<'c>);

    impl<'de> DeserializeSeed<'de> for ToolsSeed<'_> {
        type Value = Tools;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tools, D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for ToolsSeed<'_> {
        type Value = Tools;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of tools")
        }

        other_types!(Tools::Other, [map]);

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tools, A::Error> {
            let mut tools = Vec::new();
            loop {
                match seq.next_element_seed(ToolSeed(self.0)) {
                    Ok(Some(tool)) => tools.push(tool),
                    Ok(None) => return Ok(Tools::Array(tools)),
                    Err(error) => {
                        self.0.trace.borrow_mut().in_tool(tools.len() + 1);
                        return Err(error);
                    }
                }
            }
        }
    }

    /// One entry of `tools`, reduced to what the list keeps of it as soon
    /// as it is read.
    #[derive(Clone, Copy)]
    struct ToolSeed<'c>(Ctx<'c>);

    impl<'de> DeserializeSeed<'de> for ToolSeed<'_> {
        type Value = Listing;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Listing, D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for ToolSeed<'_> {
        type Value = Listing;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a tool object")
        }

        other_types!(Listing::Other, [seq]);

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Listing, A::Error> {
            let Ctx { options, trace } = self.0;
            // The other members too, when the definition is kept or
            // fingerprinted.
            let others = if options.fingerprints || options.keep_definitions {
                Shape::Whole
            } else {
                Shape::Skip
            };
            let mut tool = Map::new();
            walk(
                map,
                trace,
                |key| position(&TOOL, key),
                |read, key, map| {
                    let shape = match read.map(|index| TOOL[index]) {
                        Some("annotations") => Shape::Object(&ANNOTATIONS),
                        Some("_meta") => Shape::Object(&META),
                        Some("name" | "title") => Shape::Whole,
                        _ => others,
                    };
                    let value = map.next_value_seed(ValueSeed { shape, trace })?;
                    if !matches!(shape, Shape::Skip) {
                        tool.insert(key.to_owned(), value);
                    }
                    Ok(())
                },
            )?;
            Ok(Listing::Tool(ToolSummary::of(tool, options)))
        }
    }

    /// One value below a tool or an `error`, read by its shape.
    #[derive(Clone, Copy)]
    struct ValueSeed<'t> {
        shape: Shape,
        trace: &'t RefCell<Trace>,
    }

    impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
        type Value = Value;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
            match self.shape {
                Shape::Whole => Value::deserialize(deserializer),
                Shape::Skip => Checked::deserialize(deserializer).map(|Checked| Value::Null),
                Shape::Object(_) => deserializer.deserialize_any(self),
            }
        }
    }

    impl<'de> Visitor<'de> for ValueSeed<'_> {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }

        // Values of another type than an object: only their type is
        // reported, so an empty value of it stands for them.
        fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
            Ok(Value::Bool(value))
        }

        fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
            Ok(Value::from(value))
        }

        fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
            Ok(Value::from(value))
        }

        fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
            Ok(Value::from(value))
        }

        fn visit_str<E>(self, _: &str) -> Result<Value, E> {
            Ok(Value::String(String::new()))
        }

        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
            Checked.visit_seq(seq)?;
            Ok(Value::Array(Vec::new()))
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Value, A::Error> {
            let Shape::Object(members) = self.shape else {
                Checked.visit_map(map)?;
                return Ok(Value::Object(Map::new()));
            };
            let mut object = Map::new();
            let find = |key: &str| members.read.iter().position(|(name, _)| *name == key);
            walk(map, self.trace, find, |read, key, map| {
                let shape = read.map_or(members.others, |index| members.read[index].1);
                let value = map.next_value_seed(ValueSeed {
                    shape,
                    trace: self.trace,
                })?;
                if !matches!(shape, Shape::Skip) {
                    object.insert(key.to_owned(), value);
                }
                Ok(())
            })?;
            Ok(Value::Object(object))
        }
    }

    /// A member name, borrowed from the text when it has no escapes.
    struct Key;

    impl<'de> DeserializeSeed<'de> for Key {
        type Value = Cow<'de, str>;

        fn deserialize<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_str(self)
        }
    }

    impl<'de> Visitor<'de> for Key {
        type Value = Cow<'de, str>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a member name")
        }

        fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
            Ok(Cow::Borrowed(key))
        }

        fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
            Ok(Cow::Owned(key.to_owned()))
        }
    }

    /// Any JSON value, read to the end and dropped. Unlike
    /// [`serde::de::IgnoredAny`], which skips strings and numbers unread,
    /// every string is decoded and every number converted, so a value that
    /// a tree could not hold fails here too.
    struct Checked;

    impl<'de> Deserialize<'de> for Checked {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
            deserializer.deserialize_any(Checked)
        }
    }

    impl<'de> Visitor<'de> for Checked {
        type Value = Checked;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON value")
        }

        fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
            Ok(Checked)
        }

        fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
            Ok(Checked)
        }

        fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
            Ok(Checked)
        }

        fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
            Ok(Checked)
        }

        fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
            Ok(Checked)
        }

        fn visit_unit<E>(self) -> Result<Checked, E> {
            Ok(Checked)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
            while seq.next_element::<Checked>()?.is_some() {}
            Ok(Checked)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
            while map.next_entry::<Checked, Checked>()?.is_some() {}
            Ok(Checked)
        }
    }
}

fn title_text(value: &Value) -> Option<String> {
    value
        .as_str()
        .filter(|title| !title.trim().is_empty())
        .map(str::to_owned)
}

fn title_of(tool: &Map<String, Value>) -> Option<String> {
    tool.get("title").and_then(title_text).or_else(|| {
        tool.get("annotations")
            .and_then(|annotations| annotations.get("title"))
            .and_then(title_text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hints::Hint;
    use crate::policy::Decision;
    use serde_json::json;

    fn tool(name: &str) -> Value {
        json!({ "name": name, "inputSchema": { "type": "object" } })
    }

    fn collect(pages: Vec<Value>) -> Result<ToolList, CollectError> {
        collect_pages(pages, CollectOptions::default())
    }

    #[test]
    fn empty_string_cursor_is_followed_like_any_other() {
        let list = collect(vec![
            json!({ "tools": [tool("a")], "nextCursor": "" }),
            json!({ "tools": [tool("b")], "nextCursor": null }),
        ])
        .unwrap();
        let names: Vec<&str> = list.tools.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(list.tools[1].page, 2);
    }

    #[test]
    fn saved_pages_ending_in_a_cursor_are_incomplete() {
        let error = collect(vec![json!({ "tools": [tool("a")], "nextCursor": "" })]).unwrap_err();
        assert_eq!(
            error,
            CollectError::Incomplete {
                pages: 1,
                cursor: String::new()
            }
        );
        assert_eq!(
            error.to_string(),
            "the list is incomplete: page 1, the last one given, still has nextCursor \"\", so \
             more tools follow"
        );
    }

    #[test]
    fn a_repeated_cursor_is_an_error_not_a_loop() {
        let mut collector = Collector::new(CollectOptions::default());
        let page = json!({ "tools": [], "nextCursor": "" });
        assert_eq!(collector.push_page(page.clone()).unwrap(), Some(""));
        assert_eq!(
            collector.push_page(page).unwrap_err(),
            CollectError::RepeatedCursor {
                cursor: String::new(),
                first_page: 1,
                page: 2
            }
        );
    }

    #[test]
    fn the_page_cap_stops_an_endless_list() {
        let options = CollectOptions {
            max_pages: 3,
            ..CollectOptions::default()
        };
        let mut collector = Collector::new(options);
        for page in 1..=2 {
            let cursor = page.to_string();
            assert!(
                collector
                    .push_page(json!({ "tools": [], "nextCursor": cursor }))
                    .is_ok()
            );
        }
        let error = collector
            .push_page(json!({ "tools": [], "nextCursor": "3" }))
            .unwrap_err();
        assert_eq!(
            error,
            CollectError::PageCap {
                max_pages: 3,
                cursor: "3".into()
            }
        );
    }

    #[test]
    fn jsonrpc_responses_are_unwrapped_and_errors_refused() {
        let list = collect(vec![
            json!({ "jsonrpc": "2.0", "id": 1, "result": { "tools": [tool("a")], "nextCursor": "x" } }),
            json!({ "result": { "tools": [tool("b")] } }),
        ])
        .unwrap();
        assert_eq!(list.tools.len(), 2);
        let error = collect(vec![json!({
            "jsonrpc": "2.0", "id": 1, "error": { "code": -32602, "message": "bad cursor" }
        })])
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "page 1 is a JSON-RPC error response: -32602 \"bad cursor\""
        );
    }

    #[test]
    fn malformed_pages_and_tools_name_the_page_tool_and_field() {
        let cases = [
            (
                json!([]),
                "page 1 is an array, not a tools/list result object",
            ),
            (json!({}), "page 1: `tools` is missing, not an array"),
            (
                json!({ "tools": {} }),
                "page 1: `tools` is an object, not an array",
            ),
            (
                json!({ "tools": [], "nextCursor": 2 }),
                "page 1: `nextCursor` is a number, not a string",
            ),
            (
                json!({ "tools": [tool("a"), "b"] }),
                "page 1, tool 2: is a string, not an object",
            ),
            (
                json!({ "tools": [{ "inputSchema": {} }] }),
                "page 1, tool 1: `name` is missing, not a string",
            ),
            (
                json!({ "tools": [{ "name": 7 }] }),
                "page 1, tool 1: `name` is a number, not a string",
            ),
            (
                json!({ "tools": [{ "name": "a", "annotations": { "readOnlyHint": "yes" } }] }),
                "page 1, tool `a`: `annotations.readOnlyHint` is a string, not a boolean",
            ),
            (
                json!({ "tools": [{ "name": "a", "annotations": "read-only" }] }),
                "page 1, tool `a`: `annotations` is a string, not an object",
            ),
            (
                json!({ "tools": [tool("a"), tool("a")] }),
                "tool `a` appears twice on page 1: which definition holds is unknown",
            ),
        ];
        for (page, message) in cases {
            assert_eq!(collect(vec![page]).unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn a_page_after_the_last_is_refused() {
        let error = collect(vec![
            json!({ "tools": [tool("a")] }),
            json!({ "tools": [tool("b")] }),
        ])
        .unwrap_err();
        assert_eq!(error, CollectError::PageAfterEnd { page: 2 });
    }

    #[test]
    fn titles_hints_fingerprints_and_definitions_are_kept_on_request() {
        let page = json!({ "tools": [
            { "name": "a", "title": "A", "annotations": { "readOnlyHint": true } },
            { "name": "b", "annotations": { "title": "B" } },
            { "name": "c", "title": "  " },
        ]});
        let plain = collect(vec![page.clone()]).unwrap();
        assert!(plain.tools[0].fingerprint.is_none() && plain.tools[0].definition.is_none());
        let titles: Vec<Option<&str>> = plain
            .tools
            .iter()
            .map(|tool| tool.title.as_deref())
            .collect();
        assert_eq!(titles, [Some("A"), Some("B"), None]);
        assert!(plain.tools[0].hints.get(Hint::ReadOnly).value);

        let options = CollectOptions {
            fingerprints: true,
            keep_definitions: true,
            ..CollectOptions::default()
        };
        let full = collect_pages(vec![page], options).unwrap();
        assert!(full.tools.iter().all(|tool| tool.fingerprint.is_some()));
        assert_eq!(full.tools[2].definition.as_ref().unwrap()["title"], "  ");
    }

    #[test]
    fn the_list_decides_and_refuses_unknown_tools() {
        let list = collect(vec![json!({ "tools": [
            { "name": "read", "annotations": { "readOnlyHint": true } },
        ]})])
        .unwrap();
        assert_eq!(
            list.decide("read", Trust::Trusted).decision,
            Decision::Resend
        );
        assert_eq!(
            list.decide("read", Trust::Untrusted).decision,
            Decision::ReadBackFirst
        );
        let unknown = list.decide("write", Trust::Trusted);
        assert_eq!(unknown.decision, Decision::Refuse);
        assert!(unknown.reason.contains("unknown tool"));
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;
    use serde_json::json;

    /// What a listed tool comes to: name, page, title, hints.
    type Summary = (String, usize, Option<String>, ToolHints);

    /// Collects `pages` both as trees and as text, asserting the two agree.
    fn both(pages: &[Value]) -> Result<Vec<Summary>, CollectError> {
        let summary = |list: ToolList| {
            list.tools
                .into_iter()
                .map(|tool| (tool.name, tool.page, tool.title, tool.hints))
                .collect::<Vec<_>>()
        };
        let mut tree = Collector::new(CollectOptions::default());
        let mut text = Collector::new(CollectOptions::default());
        let mut tree_result = Ok(None);
        let mut text_result = Ok(None);
        for page in pages {
            tree_result = tree.push_page(page.clone()).map(|c| c.map(str::to_owned));
            text_result = text
                .push_page_json(&page.to_string())
                .map(|c| c.map(str::to_owned));
            assert_eq!(tree_result, text_result, "{page}");
            if tree_result.is_err() {
                break;
            }
        }
        tree_result?;
        text_result?;
        let (tree, text) = (tree.finish(), text.finish());
        assert_eq!(tree.is_ok(), text.is_ok());
        let (tree, text) = (summary(tree?), summary(text?));
        assert_eq!(tree, text);
        Ok(tree)
    }

    #[test]
    fn text_and_tree_agree_on_good_pages() {
        let tools = both(&[
            json!({ "jsonrpc": "2.0", "id": 4, "result": { "tools": [
                { "name": "a\u{e9}\\\"", "title": "A", "description": "d", "inputSchema": { "type": "object" },
                  "annotations": { "readOnlyHint": true, "destructiveHint": null } },
                { "name": "b", "annotations": { "title": "B", "idempotentHint": false },
                  "_meta": { "mcp-hints/provenance": { "idempotentHint": "defaulted" } } },
            ], "nextCursor": "" } }),
            json!({ "tools": [{ "name": "c", "annotations": null, "title": 3 }], "nextCursor": null }),
        ])
        .unwrap();
        assert_eq!(tools.len(), 3);
        assert_eq!(tools[0].2.as_deref(), Some("A"));
        assert_eq!(tools[1].2.as_deref(), Some("B"));
        assert_eq!(tools[2].2, None);
    }

    #[test]
    fn text_and_tree_agree_on_every_fault() {
        let faults = [
            vec![json!([])],
            vec![json!({})],
            vec![json!({ "tools": {} })],
            vec![json!({ "tools": [], "nextCursor": 2 })],
            vec![json!({ "tools": [{ "name": "a" }, "b"] })],
            vec![json!({ "tools": [{ "inputSchema": {} }] })],
            vec![json!({ "tools": [{ "name": 7 }] })],
            vec![json!({ "tools": [{ "name": "a", "annotations": { "readOnlyHint": "yes" } }] })],
            vec![json!({ "tools": [{ "name": "a", "annotations": "read-only" }] })],
            vec![json!({ "tools": [{ "name": "a" }, { "name": "a" }] })],
            vec![json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -1, "message": "no" } })],
            vec![
                json!({ "tools": [{ "name": "a" }], "nextCursor": "" }),
                json!({ "tools": [{ "name": "a" }], "nextCursor": "" }),
            ],
            vec![json!({ "tools": [] }), json!({ "tools": [] })],
            vec![json!({ "tools": [], "nextCursor": "x" })],
        ];
        for pages in faults {
            assert!(both(&pages).is_err(), "{pages:?}");
        }
    }

    #[test]
    fn a_null_error_beside_a_result_is_absent_on_every_path() {
        let page = json!({ "tools": [{ "name": "a", "inputSchema": {} }] });
        let response = json!({ "jsonrpc": "2.0", "id": 1, "result": page, "error": null });
        let listed = both(std::slice::from_ref(&response)).unwrap();
        assert_eq!(listed.len(), 1);
        let mut collector = Collector::new(CollectOptions::default());
        assert_eq!(
            collector.push_response_json(&response.to_string(), 1),
            Some(Ok(None)),
            "a live response alike"
        );
        // A null result beside an error is an error response.
        let error = json!({ "jsonrpc": "2.0", "id": 1, "result": null,
                            "error": { "code": -32602, "message": "bad cursor" } });
        assert_eq!(
            both(&[error]).unwrap_err().to_string(),
            "page 1 is a JSON-RPC error response: -32602 \"bad cursor\""
        );
        for (response, refusal) in [
            (
                json!({ "jsonrpc": "2.0", "id": 1, "result": page,
                        "error": { "code": -32602, "message": "m" } }),
                "page 1 is a JSON-RPC response with both `result` and `error`: which one holds \
                 is unknown",
            ),
            (
                json!({ "jsonrpc": "2.0", "id": 1, "error": null }),
                "page 1 is a JSON-RPC error response whose `error` is null, not an error object",
            ),
            (
                json!({ "jsonrpc": "2.0", "id": 1, "error": "boom" }),
                "page 1 is a JSON-RPC error response whose `error` is a string, not an error \
                 object",
            ),
        ] {
            assert_eq!(
                both(std::slice::from_ref(&response))
                    .unwrap_err()
                    .to_string(),
                refusal
            );
            let mut collector = Collector::new(CollectOptions::default());
            assert_eq!(collector.push_response_json(&response.to_string(), 1), None);
        }
    }

    #[test]
    fn whole_responses_are_taken_in_one_pass_or_declined_untouched() {
        let page = json!({ "tools": [{ "name": "a", "annotations": { "readOnlyHint": true } }],
                           "nextCursor": "n" });
        let mut collector = Collector::new(CollectOptions::default());
        let response = json!({ "jsonrpc": "2.0", "id": 7, "result": page }).to_string();
        assert_eq!(
            collector.push_response_json(&response, 8),
            None,
            "another id"
        );
        for declined in [
            json!({ "jsonrpc": "2.0", "id": 7, "error": { "code": 1, "message": "m" } }),
            json!({ "jsonrpc": "2.0", "id": 7, "method": "ping" }),
            json!([{ "jsonrpc": "2.0", "id": 7, "result": page }]),
            json!({ "jsonrpc": "2.0", "id": 7, "result": { "tools": ["a"] } }),
        ] {
            assert_eq!(collector.push_response_json(&declined.to_string(), 7), None);
        }
        assert_eq!(collector.pages, 0, "declined responses change nothing");
        assert_eq!(
            collector.push_response_json(&response, 7),
            Some(Ok(Some("n")))
        );
        let repeat = json!({ "jsonrpc": "2.0", "id": 8, "result": page }).to_string();
        assert!(matches!(
            collector.push_response_json(&repeat, 8),
            Some(Err(CollectError::RepeatedCursor { .. }))
        ));
    }

    #[test]
    fn a_member_given_twice_is_refused_not_guessed() {
        let cases = [
            (
                r#"{"tools": [{"name": "a"}, {"name": "b", "name": "c"}]}"#,
                "page 1, tool 2: `name` appears twice: which value holds is unknown",
            ),
            (
                r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": true, "readOnlyHint": false}}]}"#,
                "page 1, tool 1: `annotations.readOnlyHint` appears twice: which value holds is unknown",
            ),
            (
                r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "annotations": {}, "annotations": null}]}}"#,
                "page 1, tool 1: `annotations` appears twice: which value holds is unknown",
            ),
            (
                r#"{"tools": [{"name": "a", "description": "Reads.", "description": "Deletes."}]}"#,
                "page 1, tool 1: `description` appears twice: which value holds is unknown",
            ),
            (
                r#"{"tools": [{"name": "a", "inputSchema": {"type": "object"}, "title": "A", "inputSchema": {}}]}"#,
                "page 1, tool 1: `inputSchema` appears twice: which value holds is unknown",
            ),
            (
                r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "outputSchema": {}, "outputSchema": null}]}}"#,
                "page 1, tool 1: `outputSchema` appears twice: which value holds is unknown",
            ),
            (
                r#"{"tools": [{"name": "a", "title": "A", "title": "B"}]}"#,
                "page 1, tool 1: `title` appears twice: which value holds is unknown",
            ),
        ];
        for keep_definitions in [false, true] {
            for (text, message) in cases {
                let mut collector = Collector::new(CollectOptions {
                    keep_definitions,
                    ..CollectOptions::default()
                });
                assert_eq!(
                    collector.push_page_json(text).unwrap_err().to_string(),
                    message
                );
            }
        }
        // Other members given twice are not the audit's business.
        let mut collector = Collector::new(CollectOptions::default());
        assert!(
            collector
                .push_page_json(r#"{"tools": [{"name": "a", "icons": [], "icons": null}]}"#)
                .is_ok()
        );
    }

    /// The three ways the command reads pages: audit, lint, pin.
    fn every_reading() -> [CollectOptions; 3] {
        let options = |fingerprints, keep_definitions| CollectOptions {
            fingerprints,
            keep_definitions,
            ..CollectOptions::default()
        };
        [
            options(false, false),
            options(false, true),
            options(true, true),
        ]
    }

    #[test]
    fn each_page_keeps_its_fields_from_the_same_pass() {
        let pages = [
            r#"{"tools": [{"name": "a", "inputSchema": {}}], "nextCursor": "", "ttlMs": 60000,
                "cacheScope": "public", "resultType": "complete"}"#,
            r#"{"jsonrpc": "2.0", "id": 2, "result": {"tools": [], "_meta": {"k": 1}}}"#,
        ];
        for text_path in [true, false] {
            let mut collector = Collector::new(CollectOptions::default());
            for page in pages {
                if text_path {
                    collector.push_page_json(page).unwrap();
                } else {
                    collector
                        .push_page(serde_json::from_str(page).unwrap())
                        .unwrap();
                }
            }
            let list = collector.finish().unwrap();
            assert_eq!(
                list.page_fields
                    .into_iter()
                    .map(Value::Object)
                    .collect::<Vec<_>>(),
                [
                    json!({"nextCursor": "", "ttlMs": 60000, "cacheScope": "public",
                           "resultType": "complete"}),
                    json!({"_meta": {"k": 1}}),
                ],
                "text path: {text_path}"
            );
        }
    }

    #[test]
    fn a_page_that_is_not_a_listing_is_refused_before_its_tools() {
        let page = r#"{"resultType": "input_required", "inputRequests": {}}"#;
        let mut collector = Collector::new(CollectOptions::default());
        let error = collector.push_page_json(page).unwrap_err();
        assert!(matches!(
            &error,
            CollectError::NotComplete { page: 1, result_type } if result_type == "input_required"
        ));
        assert_eq!(
            error.to_string(),
            "page 1 has resultType \"input_required\", not \"complete\": the server did not \
             list its tools"
        );
        for (page, found) in [
            (r#"{"tools": [], "resultType": 1}"#, "a number"),
            (r#"{"tools": [], "resultType": null}"#, "null"),
            (r#"{"tools": [], "resultType": ["complete"]}"#, "an array"),
        ] {
            let message = format!(
                "page 1: `resultType` is {found}, not a string: whether the page is a complete \
                 result is unknown"
            );
            let mut collector = Collector::new(CollectOptions::default());
            let error = collector.push_page_json(page).unwrap_err();
            assert_eq!(error.to_string(), message, "{page}");
            let mut collector = Collector::new(CollectOptions::default());
            let error = collector
                .push_page(serde_json::from_str(page).unwrap())
                .unwrap_err();
            assert_eq!(error.to_string(), message, "{page}");
        }
    }

    #[test]
    fn a_page_member_given_twice_is_refused_not_guessed() {
        let cases = [
            (
                r#"{"tools": [{"name": "a"}], "nextCursor": "more", "nextCursor": null}"#,
                "page 1: `nextCursor` appears twice: which value holds is unknown",
            ),
            (
                r#"{"tools": [], "tools": [{"name": "a"}]}"#,
                "page 1: `tools` appears twice: which value holds is unknown",
            ),
            (
                r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "2"}, "result": {"tools": []}}"#,
                "page 1: `result` appears twice: which value holds is unknown",
            ),
            (
                r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "2", "nextCursor": null}}"#,
                "page 1: `result.nextCursor` appears twice: which value holds is unknown",
            ),
            (
                r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": []}, "error": {"code": 1, "message": "m"}, "error": null}"#,
                "page 1: `error` appears twice: which value holds is unknown",
            ),
            (
                r#"{"jsonrpc": "2.0", "id": 1, "id": 2, "result": {"tools": []}}"#,
                "page 1: `id` appears twice: which value holds is unknown",
            ),
            (
                r#"{"pages": [{"tools": []}], "pages": [{"tools": [], "nextCursor": "2"}]}"#,
                "page 1: `pages` appears twice: which value holds is unknown",
            ),
        ];
        for options in every_reading() {
            for (text, message) in cases {
                let mut collector = Collector::new(options.clone());
                let error = collector.push_page_json(text).unwrap_err();
                assert_eq!(error.to_string(), message, "{options:?}");
                // A whole response is refused, not declined into a tree.
                let mut collector = Collector::new(options.clone());
                match collector.push_response_json(text, 1) {
                    Some(Err(error)) => assert_eq!(error.to_string(), message),
                    other => panic!("{text}: {other:?}"),
                }
            }
        }
        // Members the collection does not read are not its business.
        let mut collector = Collector::new(CollectOptions::default());
        assert_eq!(
            collector
                .push_page_json(r#"{"tools": [], "x": 1, "x": 2, "y": null}"#)
                .unwrap(),
            None
        );
    }

    #[test]
    fn a_value_no_tree_holds_is_refused_by_every_reading_naming_where_it_is() {
        let cases = [
            (
                r#"{"tools": [{"name": "a"}, {"name": "b", "annotations": {"readOnlyHint": true, "x": 1e400}}]}"#,
                "page 1, tool 2: `annotations.x` cannot be read: number out of range at line 1 \
                 column 88",
            ),
            (
                r#"{"tools": [{"name": "a", "annotations": {"readOnlyHint": 1e400}}]}"#,
                "page 1, tool 1: `annotations.readOnlyHint` cannot be read: number out of range \
                 at line 1 column 62",
            ),
            (
                r#"{"tools": [{"name": "a", "description": "\ud800 x"}]}"#,
                "page 1, tool 1: `description` cannot be read: unexpected end of hex escape at \
                 line 1 column 48",
            ),
            (
                r#"{"tools": [{"name": "\udc00"}]}"#,
                "page 1, tool 1: `name` cannot be read: lone leading surrogate in hex escape at \
                 line 1 column 27",
            ),
            (
                r#"{"tools": [{"name": "a", "inputSchema": {"properties": {"n": {"maximum": -1e400}}}}]}"#,
                "page 1, tool 1: `inputSchema` cannot be read: number out of range at line 1 \
                 column 79",
            ),
            (
                r#"{"tools": [{"name": "a", "_meta": {"mcp-hints/provenance": {"readOnlyHint": "\udfff"}}}]}"#,
                "page 1, tool 1: `_meta.mcp-hints/provenance.readOnlyHint` cannot be read: lone \
                 leading surrogate in hex escape at line 1 column 83",
            ),
            (
                r#"{"tools": [{"name": "a"}, 2e999]}"#,
                "page 1, tool 2 cannot be read: number out of range at line 1 column 31",
            ),
            (
                r#"{"tools": [{"name": "a", "\udc00": 1}]}"#,
                "page 1, tool 1 cannot be read: lone leading surrogate in hex escape at line 1 \
                 column 32",
            ),
            (
                r#"{"tools": [], "nextCursor": 1e400}"#,
                "page 1: `nextCursor` cannot be read: number out of range at line 1 column 33",
            ),
            (
                r#"{"tools": [], "serverNote": ["\ud800 x"]}"#,
                "page 1: `serverNote` cannot be read: unexpected end of hex escape at line 1 \
                 column 37",
            ),
            (
                r#"{"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "title": 1e400}]}}"#,
                "page 1, tool 1: `title` cannot be read: number out of range at line 1 column 77",
            ),
        ];
        for options in every_reading() {
            for (text, message) in cases {
                let mut collector = Collector::new(options.clone());
                let error = collector.push_page_json(text).unwrap_err();
                assert_eq!(error.to_string(), message, "{options:?}");
            }
        }
        let mut collector = Collector::new(CollectOptions::default());
        let response = r#"{"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "a", "annotations": {"readOnlyHint": true, "idempotentHint": 1e400}}]}}"#;
        match collector.push_response_json(response, 3) {
            Some(Err(error)) => assert_eq!(
                error.to_string(),
                "page 1, tool 1: `annotations.idempotentHint` cannot be read: number out of \
                 range at line 1 column 124"
            ),
            other => panic!("{other:?}"),
        }
        // A big number that a float holds is read; cut text is not JSON.
        let mut collector = Collector::new(CollectOptions::default());
        assert!(
            collector
                .push_page_json(r#"{"tools": [{"name": "a", "inputSchema": {"maximum": 1e300}}]}"#)
                .is_ok()
        );
        let mut collector = Collector::new(CollectOptions::default());
        let error = collector
            .push_page_json(r#"{"tools": [{"name": "a", "description": "cut"#)
            .unwrap_err();
        assert!(
            error.to_string().starts_with("page 1 is not JSON: EOF"),
            "{error}"
        );
    }

    #[test]
    fn server_text_in_messages_is_escaped_and_cut() {
        let forged = "a\nerror: forged\u{1b}[31m\u{202e}\u{2066}\u{200f}\u{61c}";
        let shown = r"a\nerror: forged\u{1b}[31m\u{202e}\u{2066}\u{200f}\u{61c}";
        let message = |page: Value| {
            Collector::new(CollectOptions::default())
                .push_page_json(&page.to_string())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            message(json!({ "tools": [{ "name": forged }, { "name": forged }] })),
            format!("tool `{shown}` appears twice on page 1: which definition holds is unknown")
        );
        assert_eq!(
            message(json!({ "tools": [{ "name": forged, "annotations": { "readOnlyHint": 1 } }] })),
            format!(
                "page 1, tool `{shown}`: `annotations.readOnlyHint` is a number, not a boolean"
            )
        );
        assert_eq!(
            message(
                json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": 1, "message": forged } })
            ),
            format!("page 1 is a JSON-RPC error response: 1 \"{shown}\"")
        );
        let long = "n".repeat(100_000);
        let error = message(json!({ "tools": [{ "name": long }, { "name": long }] }));
        assert!(error.contains("… (100000 characters)"), "{error}");
        assert!(error.len() < 400, "{} bytes", error.len());
    }

    #[test]
    fn text_that_is_not_json_is_named() {
        let mut collector = Collector::new(CollectOptions::default());
        let error = collector.push_page_json("{\"tools\": [").unwrap_err();
        assert!(
            error.to_string().starts_with("page 1 is not JSON: "),
            "{error}"
        );
    }
}

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
//! - A page may be a bare `tools/list` result or a whole JSON-RPC response
//!   (`{"jsonrpc": "2.0", "id": 1, "result": {...}}`); an error response is
//!   refused with its code and message.
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

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::fingerprint::Fingerprint;
use crate::hints::{HintError, ToolHints, json_type};
use crate::idempotency::KEY_META_KEY;
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
    /// or a hint inside `annotations`) appears twice in one tool's object:
    /// which value holds is unknown (parsers differ: most keep the last).
    DuplicateKey {
        /// The page.
        page: usize,
        /// The tool's position in the page.
        index: usize,
        /// The member, e.g. `name` or `annotations.readOnlyHint`.
        key: String,
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
                "page {page} is a JSON-RPC error response: {code} {message:?}"
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
                "page {page} returned the cursor {cursor:?} that page {first_page} already \
                 returned: following it would loop, so the list is refused"
            ),
            CollectError::PageCap { max_pages, cursor } => write!(
                f,
                "the list needs more than {max_pages} pages (page {max_pages} returned the \
                 cursor {cursor:?}); raise the page cap if the server really is this large"
            ),
            CollectError::Incomplete { pages, cursor } => write!(
                f,
                "the list is incomplete: page {pages}, the last one given, still has \
                 nextCursor {cursor:?}, so more tools follow"
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
                "page {page}, tool {index}: `{key}` appears twice: which value holds is unknown"
            ),
            CollectError::DuplicateName {
                name,
                first_page,
                page,
            } => {
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
                write!(f, "page {page}, tool `{tool}`: {error}")
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
        if self.pages > 0 && self.pending.is_none() {
            return Err(CollectError::PageAfterEnd {
                page: self.pages + 1,
            });
        }
        self.pages += 1;
        let number = self.pages;
        let mut page = match page {
            Value::Object(map) => map,
            other => {
                return Err(CollectError::PageNotObject {
                    page: number,
                    found: json_type(&other),
                });
            }
        };
        if is_jsonrpc_response(&page) {
            page = unwrap_response(number, page)?;
        }
        let cursor = match page.remove("nextCursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor),
            Some(other) => {
                return Err(CollectError::CursorNotString {
                    page: number,
                    found: json_type(&other),
                });
            }
        };
        let tools = match page.remove("tools") {
            Some(Value::Array(tools)) => tools,
            Some(other) => {
                return Err(CollectError::ToolsNotArray {
                    page: number,
                    found: json_type(&other),
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
            self.push_tool(number, index + 1, tool)?;
        }
        Ok(self.pending.as_deref())
    }

    fn push_tool(&mut self, page: usize, index: usize, tool: Value) -> Result<(), CollectError> {
        let tool = match tool {
            Value::Object(map) => map,
            other => {
                return Err(CollectError::ToolNotObject {
                    page,
                    index,
                    found: json_type(&other),
                });
            }
        };
        let fingerprint = self
            .options
            .fingerprints
            .then(|| Fingerprint::of_definition(&tool));
        let parts = ToolParts {
            name: tool.get("name"),
            title: title_of(&tool),
            annotations: tool.get("annotations"),
            meta: tool.get("_meta"),
        };
        let listed = self.check_tool(page, index, parts, fingerprint)?;
        self.tools.push(ListedTool {
            definition: self.options.keep_definitions.then_some(tool),
            ..listed
        });
        Ok(())
    }

    /// Checks one tool's name, hints and uniqueness, and records its name.
    fn check_tool(
        &mut self,
        page: usize,
        index: usize,
        parts: ToolParts<'_>,
        fingerprint: Option<Fingerprint>,
    ) -> Result<ListedTool, CollectError> {
        let name = match parts.name {
            Some(Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(CollectError::NameNotString {
                    page,
                    index,
                    found: json_type(other),
                });
            }
            None => {
                return Err(CollectError::NameNotString {
                    page,
                    index,
                    found: "missing",
                });
            }
        };
        let hints = ToolHints::from_json(parts.annotations, parts.meta).map_err(|error| {
            CollectError::Hint {
                tool: name.clone(),
                page,
                error,
            }
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
                let idempotency_key = parts
                    .meta
                    .and_then(|meta| meta.get(KEY_META_KEY))
                    .and_then(Value::as_str)
                    .filter(|field| !field.is_empty())
                    .map(str::to_owned);
                Ok(ListedTool {
                    name,
                    page,
                    title: parts.title,
                    hints,
                    fingerprint,
                    definition: None,
                    idempotency_key,
                })
            }
        }
    }

    /// Takes the next page as JSON text, as [`push_page`](Self::push_page)
    /// takes it as a tree, with the same results and errors.
    ///
    /// Unless whole definitions are kept or fingerprinted, each tool is
    /// scanned for `name`, `title`, `annotations` and `_meta` without
    /// building a tree of its description and schemas; on big lists this is
    /// several times faster and smaller. Text that does not have the usual
    /// shape is handed to [`push_page`](Self::push_page), whose error then
    /// says what is wrong.
    ///
    /// # Errors
    ///
    /// As [`push_page`](Self::push_page), plus
    /// [`CollectError::PageNotJson`] for text that is not JSON.
    pub fn push_page_json(&mut self, text: &str) -> Result<Option<&str>, CollectError> {
        if self.options.fingerprints || self.options.keep_definitions {
            return self.push_page_slow(text);
        }
        // One pass over the page: each tool's description and schemas are
        // skipped, not built.
        let view = match serde_json::from_str::<PageView<'_>>(text) {
            Ok(view @ PageView { tools: Some(_), .. }) => view,
            Ok(PageView {
                tools: None,
                result: Some(result),
                error: None,
                ..
            }) => match serde_json::from_str::<PageView<'_>>(result.get()) {
                Ok(inner @ PageView { tools: Some(_), .. }) => inner,
                _ => return self.push_page_slow(text),
            },
            _ => return self.push_page_slow(text),
        };
        let (Some(tools), cursor) = (view.tools, view.next_cursor) else {
            return self.push_page_slow(text);
        };
        let cursor = match cursor.map(|raw| serde_json::from_str::<Value>(raw.get())) {
            None | Some(Ok(Value::Null)) => None,
            Some(Ok(Value::String(cursor))) => Some(cursor),
            _ => return self.push_page_slow(text),
        };
        self.take_view(tools, cursor)
    }

    /// Takes a whole JSON-RPC response text when it is exactly the
    /// response to request `id` with a well-formed page as its result:
    /// `jsonrpc` "2.0", integer `id`, no `method` or `error`, every tool an
    /// object. The envelope and the page are read in one pass. Returns
    /// `None`, having changed nothing, for any other text: the caller then
    /// sorts the message itself and hands the result to
    /// [`push_page_json`](Self::push_page_json), whose errors are precise.
    pub fn push_response_json(
        &mut self,
        text: &str,
        id: u64,
    ) -> Option<Result<Option<&str>, CollectError>> {
        #[derive(Deserialize)]
        struct ResponseView<'a> {
            jsonrpc: Option<&'a str>,
            id: Option<u64>,
            method: Option<IgnoredAny>,
            error: Option<IgnoredAny>,
            #[serde(borrow)]
            result: Option<PageView<'a>>,
        }
        if self.options.fingerprints || self.options.keep_definitions {
            return None;
        }
        let response: ResponseView<'_> = serde_json::from_str(text).ok()?;
        let well_formed = response.jsonrpc == Some("2.0")
            && response.id == Some(id)
            && response.method.is_none()
            && response.error.is_none();
        let page = response.result.filter(|_| well_formed)?;
        let cursor = match page
            .next_cursor
            .map(|raw| serde_json::from_str::<Value>(raw.get()))
        {
            None | Some(Ok(Value::Null)) => None,
            Some(Ok(Value::String(cursor))) => Some(cursor),
            _ => return None,
        };
        Some(self.take_view(page.tools?, cursor))
    }

    fn take_view(
        &mut self,
        tools: Vec<ToolView<'_>>,
        cursor: Option<String>,
    ) -> Result<Option<&str>, CollectError> {
        if self.pages > 0 && self.pending.is_none() {
            return Err(CollectError::PageAfterEnd {
                page: self.pages + 1,
            });
        }
        self.pages += 1;
        let number = self.pages;
        self.follow(number, cursor)?;
        self.tools.reserve(tools.len());
        let small = |raw: Option<&RawValue>| {
            raw.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        };
        for (index, view) in tools.into_iter().enumerate() {
            if let Some(key) = view.annotations.and_then(|raw| duplicate_hint(raw.get())) {
                return Err(CollectError::DuplicateKey {
                    page: number,
                    index: index + 1,
                    key: format!("annotations.{key}"),
                });
            }
            let (name, annotations, meta) =
                (small(view.name), small(view.annotations), small(view.meta));
            let title = small(view.title)
                .and_then(|title| title_text(&title))
                .or_else(|| {
                    annotations
                        .as_ref()
                        .and_then(|annotations| annotations.get("title"))
                        .and_then(title_text)
                });
            let parts = ToolParts {
                name: name.as_ref(),
                title,
                annotations: annotations.as_ref(),
                meta: meta.as_ref(),
            };
            let listed = self.check_tool(number, index + 1, parts, None)?;
            self.tools.push(listed);
        }
        Ok(self.pending.as_deref())
    }

    fn push_page_slow(&mut self, text: &str) -> Result<Option<&str>, CollectError> {
        // A tree keeps the last of two equal keys: look for them first.
        if let Some((index, key)) = duplicate_key(text) {
            return Err(CollectError::DuplicateKey {
                page: self.pages + 1,
                index,
                key,
            });
        }
        match serde_json::from_str::<Value>(text) {
            Ok(page) => self.push_page(page),
            Err(error) => Err(CollectError::PageNotJson {
                page: self.pages + 1,
                error: error.to_string(),
            }),
        }
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

fn is_jsonrpc_response(page: &Map<String, Value>) -> bool {
    !page.contains_key("tools")
        && (page.contains_key("jsonrpc")
            || page.contains_key("result")
            || page.contains_key("error"))
}

fn unwrap_response(
    page: usize,
    mut response: Map<String, Value>,
) -> Result<Map<String, Value>, CollectError> {
    if let Some(error) = response.remove("error") {
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
    match response.remove("result") {
        Some(Value::Object(result)) => Ok(result),
        Some(other) => Err(CollectError::PageNotObject {
            page,
            found: json_type(&other),
        }),
        None => Err(CollectError::ToolsNotArray {
            page,
            found: "missing",
        }),
    }
}

/// What one tool contributes besides its definition.
struct ToolParts<'a> {
    name: Option<&'a Value>,
    title: Option<String>,
    annotations: Option<&'a Value>,
    meta: Option<&'a Value>,
}

/// A page's members that matter, borrowed from its text. A page whose
/// tools are not all objects fails to parse as this, and takes the tree
/// path, which names the fault.
#[derive(Deserialize)]
struct PageView<'a> {
    #[serde(borrow)]
    tools: Option<Vec<ToolView<'a>>>,
    #[serde(borrow, rename = "nextCursor")]
    next_cursor: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    error: Option<IgnoredAny>,
}

/// A tool's members that matter, borrowed from its text; the rest
/// (description, schemas, ...) is skipped without being built.
#[derive(Deserialize)]
struct ToolView<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    title: Option<&'a RawValue>,
    #[serde(borrow)]
    annotations: Option<&'a RawValue>,
    #[serde(borrow, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// The hints of `annotations`, for finding one given twice (serde refuses a
/// struct field seen twice; a tree keeps the last).
#[derive(Deserialize)]
#[allow(dead_code)]
struct AnnotationsView {
    #[serde(rename = "readOnlyHint")]
    read_only: Option<IgnoredAny>,
    #[serde(rename = "destructiveHint")]
    destructive: Option<IgnoredAny>,
    #[serde(rename = "idempotentHint")]
    idempotent: Option<IgnoredAny>,
    #[serde(rename = "openWorldHint")]
    open_world: Option<IgnoredAny>,
    title: Option<IgnoredAny>,
}

/// The field a serde error says was given twice.
fn duplicate_field(error: &serde_json::Error) -> Option<String> {
    let message = error.to_string();
    let rest = message.strip_prefix("duplicate field `")?;
    rest.split('`').next().map(str::to_owned)
}

/// The hint (or title) that `annotations` text gives twice, if any.
fn duplicate_hint(annotations: &str) -> Option<String> {
    match serde_json::from_str::<AnnotationsView>(annotations) {
        Err(error) => duplicate_field(&error),
        Ok(_) => None,
    }
}

/// The first tool of page `text` (from 1) that gives a member the audit
/// reads twice, and that member. Pages of other shapes give `None`: the
/// tree path names what is wrong with them.
fn duplicate_key(text: &str) -> Option<(usize, String)> {
    #[derive(Deserialize)]
    struct Outer<'a> {
        #[serde(borrow)]
        tools: Option<&'a RawValue>,
        #[serde(borrow)]
        result: Option<&'a RawValue>,
    }
    let outer: Outer<'_> = serde_json::from_str(text).ok()?;
    let tools = match (outer.tools, outer.result) {
        (Some(tools), _) => tools,
        (None, Some(result)) => {
            serde_json::from_str::<Outer<'_>>(result.get())
                .ok()?
                .tools?
        }
        (None, None) => return None,
    };
    let tools: Vec<&RawValue> = serde_json::from_str(tools.get()).ok()?;
    tools.iter().enumerate().find_map(|(index, tool)| {
        let key = match serde_json::from_str::<ToolView<'_>>(tool.get()) {
            Err(error) => duplicate_field(&error)?,
            Ok(view) => format!("annotations.{}", duplicate_hint(view.annotations?.get())?),
        };
        Some((index + 1, key))
    })
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
                .push_page_json(
                    r#"{"tools": [{"name": "a", "description": "x", "description": "y"}]}"#
                )
                .is_ok()
        );
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

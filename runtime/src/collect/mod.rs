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
//!   ([`jsonrpc::carried`](crate::jsonrpc::carried)).
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

mod error;
mod page;
mod reader;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod text_tests;

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use serde_json::{Map, Value};

use crate::fingerprint::Fingerprint;
use crate::hints::{ToolHints, json_type};
use crate::jsonrpc::Carried;
use crate::policy::{self, Trust, Verdict};

pub use self::error::CollectError;
use self::page::{Listing, Page, ToolSummary, Tools};

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
    /// names one under [`KEY_META_KEY`](crate::idempotency::KEY_META_KEY) as a non-empty string (anything
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

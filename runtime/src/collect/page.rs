//! A page as the collection takes it: its cursor, its tools (each read
//! into a [`ToolSummary`] as soon as it is), and a JSON-RPC response's
//! members, from a tree ([`Page::of_tree`]).

use serde_json::{Map, Value};

use super::{CollectError, CollectOptions};
use crate::fingerprint::Fingerprint;
use crate::hints::{HintError, ToolHints, json_type};
use crate::idempotency::KEY_META_KEY;
use crate::jsonrpc::{self, Carried, Member};

/// A page as the collection takes it, read from a tree
/// ([`Page::of_tree`]) or from text ([`reader::read`](super::reader::read)).
#[derive(Default)]
pub(super) struct Page {
    /// `nextCursor`, as given.
    pub(super) cursor: Option<Value>,
    /// `tools`.
    pub(super) tools: Option<Tools>,
    /// A JSON-RPC response's members, read on the outermost object only.
    pub(super) jsonrpc: Option<Value>,
    pub(super) id: Option<Value>,
    pub(super) method: Option<Value>,
    /// `result`: the page it carries, or its JSON type when not an object.
    pub(super) result: Option<Result<Box<Page>, &'static str>>,
    /// `error`: its `code` and `message` (other members are dropped).
    pub(super) error: Option<Value>,
    /// Every member but `tools` (and, on a response, but the envelope's
    /// own), as served.
    pub(super) fields: Map<String, Value>,
}

/// A page's `tools`: the tools, or the JSON type it is instead of an array.
pub(super) enum Tools {
    Array(Vec<Listing>),
    Other(&'static str),
}

/// One entry of `tools`: a tool, or the JSON type it is instead of an
/// object.
pub(super) enum Listing {
    Tool(ToolSummary),
    Other(&'static str),
}

/// What the list keeps of one tool object, read as soon as the object is:
/// the definition itself only when definitions are kept.
pub(super) struct ToolSummary {
    /// The name, or what `name` is instead of a string (`"missing"`).
    pub(super) name: Result<String, &'static str>,
    pub(super) title: Option<String>,
    pub(super) hints: Result<ToolHints, HintError>,
    pub(super) idempotency_key: Option<String>,
    pub(super) fingerprint: Option<Fingerprint>,
    pub(super) definition: Option<Map<String, Value>>,
}

impl ToolSummary {
    pub(super) fn of(tool: Map<String, Value>, options: &CollectOptions) -> ToolSummary {
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
    pub(super) fn of_tree(
        mut page: Map<String, Value>,
        options: &CollectOptions,
        outermost: bool,
    ) -> Page {
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
    pub(super) fn is_response(&self) -> bool {
        self.tools.is_none()
            && (self.jsonrpc.is_some() || self.result.is_some() || self.error.is_some())
    }

    /// Which of `result` and `error` this response carries, by the rule
    /// every reader of responses shares ([`jsonrpc::carried`]).
    pub(super) fn carried(&self) -> Carried {
        let result = match &self.result {
            None => Member::Absent,
            Some(Err(found)) if *found == json_type(&Value::Null) => Member::Null,
            Some(_) => Member::Given,
        };
        jsonrpc::carried(result, Member::of(self.error.as_ref()))
    }

    /// The page a response carries, or its error.
    pub(super) fn unwrapped(self, page: usize) -> Result<Page, CollectError> {
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

pub(super) fn title_text(value: &Value) -> Option<String> {
    value
        .as_str()
        .filter(|title| !title.trim().is_empty())
        .map(str::to_owned)
}

pub(super) fn title_of(tool: &Map<String, Value>) -> Option<String> {
    tool.get("title").and_then(title_text).or_else(|| {
        tool.get("annotations")
            .and_then(|annotations| annotations.get("title"))
            .and_then(title_text)
    })
}

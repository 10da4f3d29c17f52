//! Fetching a complete tool list from a target: saved pages, or a live
//! server over stdio or streamable HTTP.

use std::fmt;
use std::path::{Path, PathBuf};

use mcp_hints::collect::{CollectError, CollectOptions, Collector, ToolList};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::args::TargetArgs;
use crate::live::{LiveError, LiveTarget, Negotiation, Page, Session};
use crate::text::{one_line, shown};

/// Where the tools came from, for the report.
#[derive(Debug)]
pub enum Origin {
    /// Saved pages, in the order given.
    Files {
        /// The files.
        files: Vec<PathBuf>,
        /// Each page's members other than `tools`, in order (see
        /// [`Origin::to_json`]).
        page_fields: Vec<Value>,
    },
    /// A live server.
    Live {
        /// How it was reached: ``MCP server `cmd args` `` or `MCP server at URL`.
        target: String,
        /// The server's `Implementation` (`name`, `version`, …), as served.
        server_info: Option<Value>,
        /// The server's capabilities, from `initialize` or `server/discover`.
        server_capabilities: Option<Value>,
        /// The revision spoken, how the session opened, and why.
        negotiation: Negotiation,
        /// The client capabilities declared.
        capabilities: Value,
        /// Each page's members other than `tools`, in order.
        page_fields: Vec<Value>,
    },
}

impl Origin {
    /// The report's JSON for the target, server, protocol, declared
    /// capabilities and pages: `target`, `server` (`serverInfo`,
    /// `protocolVersion`, `capabilities`), `protocol` (`version`,
    /// `lifecycle`: `discover` or `initialize`, `forced`: whether
    /// `--protocol-version` asked for it, `why`, `serverVersions`: what the
    /// server said it supports), `clientCapabilities`, and `pageFields`:
    /// for each page in order, the members of its `tools/list` result other
    /// than `tools`, as served (`nextCursor`, and under 2026-07-28
    /// `resultType`, `ttlMs`, `cacheScope`, `_meta`, …). `server`,
    /// `protocol` and `clientCapabilities` are null for saved pages.
    pub fn to_json(&self) -> Value {
        match self {
            Origin::Files { files, page_fields } => json!({
                "target": { "kind": "files", "files": files },
                "server": null,
                "protocol": null,
                "clientCapabilities": null,
                "pageFields": page_fields,
            }),
            Origin::Live {
                target,
                server_info,
                server_capabilities,
                negotiation,
                capabilities,
                page_fields,
            } => json!({
                "target": { "kind": "live", "description": target },
                "server": {
                    "serverInfo": server_info,
                    "protocolVersion": negotiation.version,
                    "capabilities": server_capabilities,
                },
                "protocol": {
                    "version": negotiation.version,
                    "lifecycle": negotiation.lifecycle.as_str(),
                    "forced": negotiation.forced,
                    "why": negotiation.why,
                    "serverVersions": negotiation.server_versions,
                },
                "clientCapabilities": capabilities,
                "pageFields": page_fields,
            }),
        }
    }

    /// The report's header lines for people: for a live server, `server:
    /// NAME VERSION (TARGET)`, `protocol: VERSION via server/discover|initialize
    /// (WHY)` and `client capabilities declared: JSON`.
    pub fn header(&self) -> Vec<String> {
        match self {
            Origin::Files { files, .. } => vec![format!(
                "saved pages: {}",
                files
                    .iter()
                    .map(|file| file.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )],
            Origin::Live {
                target,
                server_info,
                negotiation,
                capabilities,
                ..
            } => {
                let field = |key: &str| {
                    server_info
                        .as_ref()
                        .and_then(|info| info.get(key))
                        .and_then(Value::as_str)
                };
                // An empty version is left out rather than shown as a gap.
                let name = match field("name") {
                    None | Some("") => "?",
                    Some(name) => name,
                };
                let identity = match field("version") {
                    None => format!("{} ?", shown(name)),
                    Some("") => shown(name).into_owned(),
                    Some(version) => format!("{} {}", shown(name), shown(version)),
                };
                vec![
                    format!("server: {identity} ({})", shown(target)),
                    format!(
                        "protocol: {} via {} ({})",
                        shown(&negotiation.version),
                        negotiation.lifecycle.request(),
                        one_line(&negotiation.why)
                    ),
                    format!("client capabilities declared: {capabilities}"),
                ]
            }
        }
    }
}

/// Why no complete tool list could be had. Each is exit status 2.
#[derive(Debug)]
#[non_exhaustive]
pub enum SourceError {
    /// No target, or more than one kind.
    NoTarget,
    /// `--header` was given for a target other than `--url`.
    HeaderWithoutUrl,
    /// A saved page file could not be read or is not JSON.
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The live server failed.
    Live(LiveError),
    /// The pages do not make a complete, well-formed list.
    Collect {
        /// Where the pages came from.
        origin: String,
        /// What is wrong.
        error: CollectError,
    },
    /// A page's `resultType` (2026-07-28) is not `complete`: the server
    /// asks for input (`input_required`) or sent a kind of result this
    /// command cannot read, so the page holds no tools to audit.
    Incomplete {
        /// Where the page came from.
        origin: String,
        /// The page, from 1.
        page: usize,
        /// Its `resultType`, as sent.
        result_type: String,
    },
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::NoTarget => f.write_str(
                "no server given: pass saved pages (FILE...), --url URL, or -- COMMAND ARGS...",
            ),
            SourceError::HeaderWithoutUrl => {
                f.write_str("--header applies only to a --url server: it would be ignored here")
            }
            SourceError::File { path, message } => {
                write!(f, "{}: {message}", path.display())
            }
            SourceError::Live(error) => write!(f, "{error}"),
            SourceError::Collect { origin, error } => write!(f, "{origin}: {error}"),
            SourceError::Incomplete {
                origin,
                page,
                result_type,
            } => write!(
                f,
                "{origin}: page {page} is not a complete result (resultType {}): the server asks \
                 for more than mcp-hints gives (a tools/list answered with input_required needs \
                 a client that answers its inputRequests), so the list is refused",
                crate::live::quoted(result_type)
            ),
        }
    }
}

/// Fetches the complete tool list of `target`.
///
/// The live server `--url` or the command after `--` names; `None` for
/// neither.
pub fn live_target(url: Option<&str>, command: &[std::ffi::OsString]) -> Option<LiveTarget> {
    if let Some(url) = url {
        return Some(LiveTarget::Url(url.to_owned()));
    }
    let (program, args) = command.split_first()?;
    Some(LiveTarget::Command {
        program: program.clone(),
        args: args.to_vec(),
    })
}

/// # Errors
///
/// [`SourceError`]: a bad target, an unreadable page file, a live server
/// that fails, or pages that do not make a complete, well-formed list.
pub async fn fetch(
    target: &TargetArgs,
    options: CollectOptions,
) -> Result<(ToolList, Origin), SourceError> {
    if !target.connect.headers.is_empty() && target.url.is_none() {
        return Err(SourceError::HeaderWithoutUrl);
    }
    if !target.files.is_empty() {
        let (list, page_fields) = from_files(&target.files, options)?;
        return Ok((
            list,
            Origin::Files {
                files: target.files.clone(),
                page_fields,
            },
        ));
    }
    let live = live_target(target.url.as_deref(), &target.command).ok_or(SourceError::NoTarget)?;
    let live_options = target.connect.live_options();
    let mut session = Session::connect(&live, &live_options)
        .await
        .map_err(SourceError::Live)?;
    let mut page_fields = Vec::new();
    let collected = collect_live(&mut session, options, &mut page_fields).await;
    let origin = Origin::Live {
        target: session.target().to_owned(),
        server_info: session.server_info().cloned(),
        server_capabilities: session.opening_result().get("capabilities").cloned(),
        negotiation: session.negotiation().clone(),
        capabilities: target.connect.capabilities.clone(),
        page_fields,
    };
    session.close().await;
    Ok((collected?, origin))
}

/// One page for the collector's thread: a whole JSON-RPC response (with its
/// request id), or the raw `result` the session took out of one.
enum Work {
    Response(String, u64),
    Result(String),
}

/// Collects every page of a live server. Reading a page in full is the
/// costly part, so it runs on a thread of its own: the next page is
/// requested as soon as its cursor has been skimmed from the response, and
/// the server makes it while the collector reads the last one. The
/// collector's verdict is the one that counts: the skim only decides
/// whether to ask for more, and stops at the first odd page, a repeated
/// cursor or the page cap, which the collector then reports.
pub(crate) async fn collect_live(
    session: &mut Session,
    options: CollectOptions,
    page_fields: &mut Vec<Value>,
) -> Result<ToolList, SourceError> {
    let max_pages = options.max_pages;
    // Two pages in flight at most: the collector never falls far behind.
    let (work, pages) = std::sync::mpsc::sync_channel::<Work>(2);
    // Outer `Err`: a fault the collector found in a page it was given.
    // Inner: what `finish` said of the pages, once they stopped coming.
    type Verdict = Result<Result<ToolList, CollectError>, CollectError>;
    let collector = std::thread::spawn(move || -> Verdict {
        let mut collector = Collector::new(options);
        for page in pages {
            match page {
                Work::Response(text, id) => match collector.push_response_json(&text, id) {
                    Some(taken) => drop(taken?),
                    None => drop(collector.push_page_json(result_of(&text))?),
                },
                Work::Result(text) => drop(collector.push_page_json(&text)?),
            }
        }
        Ok(collector.finish())
    });
    let target = session.target().to_owned();
    let fault = |error| SourceError::Collect {
        origin: target.clone(),
        error,
    };
    let join = |collector: std::thread::JoinHandle<Verdict>| {
        collector
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    };
    // The listing stopped early (a failed request, an unfinished page): a
    // fault in a page already read comes first, but the list being
    // unfinished is what stopping made, not news, so the cause is told.
    let stopped = |collector, cause: SourceError| match join(collector) {
        Err(error) => fault(error),
        Ok(_) => cause,
    };
    let mut cursors = std::collections::HashSet::new();
    let mut cursor: Option<String> = None;
    let mut fetched = 0;
    loop {
        let page = session
            .list_tools_page_with(cursor.as_deref(), |text, id| {
                skim_response(text, id).map(|next| (text.to_owned(), id, next))
            })
            .await;
        let (page, Skimmed { next, fields }) = match page {
            Ok(Page::Accepted((text, id, skimmed))) => (Work::Response(text, id), skimmed),
            Ok(Page::Raw(raw)) => {
                let skimmed = skim_page(raw.get());
                (Work::Result(raw.get().to_owned()), skimmed)
            }
            Err(error) => {
                drop(work);
                return Err(stopped(collector, SourceError::Live(error)));
            }
        };
        fetched += 1;
        if let Some(result_type) = incomplete(&fields) {
            drop(work);
            let cause = SourceError::Incomplete {
                origin: target.clone(),
                page: fetched,
                result_type,
            };
            return Err(stopped(collector, cause));
        }
        page_fields.push(Value::Object(fields));
        // This send blocks when two pages wait already; the collector's
        // thread needs nothing from this runtime, so it cannot deadlock.
        if work.send(page).is_err() {
            // The collector stopped at a fault: it says which.
            break;
        }
        match next {
            Some(next) if fetched < max_pages && cursors.insert(next.clone()) => {
                cursor = Some(next);
            }
            _ => break,
        }
    }
    drop(work);
    join(collector).map_err(fault)?.map_err(fault)
}

/// What the skim of a page found: its cursor, and its members other than
/// `tools` (the cursor among them).
#[derive(Default)]
struct Skimmed {
    next: Option<String>,
    fields: Map<String, Value>,
}

/// The cursor and fields of a response to request `id` with a page result,
/// skimmed without reading the tools: `next` is `None` for the last page;
/// `None` when the text is not such a response (the session then sorts it).
fn skim_response(text: &str, id: u64) -> Option<Skimmed> {
    #[derive(Deserialize)]
    struct Skim<'a> {
        jsonrpc: Option<&'a str>,
        id: Option<u64>,
        method: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
        result: Option<SkimPage>,
    }
    let skim: Skim<'_> = match serde_json::from_str(text) {
        Ok(skim) => skim,
        // A member given twice: no skim can say which holds. Taken as the
        // last page, the text goes whole to the collector, which refuses it
        // naming the member (sorted as a tree, the last value would win).
        Err(error) if error.to_string().starts_with("duplicate field") => {
            return Some(Skimmed::default());
        }
        Err(_) => return None,
    };
    let well_formed = skim.jsonrpc == Some("2.0")
        && skim.id == Some(id)
        && skim.method.is_none()
        && skim.error.is_none();
    skim.result.filter(|_| well_formed).map(SkimPage::skimmed)
}

/// The cursor and fields of a page result, skimmed; nothing for a page the
/// skim cannot read (the collector then names the fault).
fn skim_page(text: &str) -> Skimmed {
    serde_json::from_str::<SkimPage>(text)
        .map(SkimPage::skimmed)
        .unwrap_or_default()
}

/// The members of a page the skim reads: the cursor, and every member but
/// `tools` (skipped unread, so a big page is only scanned).
#[derive(Deserialize)]
struct SkimPage {
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
    #[serde(rename = "tools")]
    _tools: Option<IgnoredAny>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

impl SkimPage {
    fn skimmed(self) -> Skimmed {
        let mut fields = Map::new();
        if let Some(next) = &self.next_cursor {
            fields.insert("nextCursor".to_owned(), Value::String(next.clone()));
        }
        fields.extend(self.rest);
        Skimmed {
            next: self.next_cursor,
            fields,
        }
    }
}

/// The `resultType` of a page's fields when it is a string other than
/// `complete` (2026-07-28; absent means complete). One that is not a string
/// the collector refuses, naming its type, as it does in saved pages.
fn incomplete(fields: &Map<String, Value>) -> Option<String> {
    match fields.get("resultType") {
        Some(Value::String(kind)) if kind != "complete" => Some(kind.clone()),
        _ => None,
    }
}

/// The `result` member's text of a response the skim accepted.
fn result_of(text: &str) -> &str {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        result: &'a RawValue,
    }
    serde_json::from_str::<Envelope<'_>>(text)
        .map(|envelope| envelope.result.get())
        .unwrap_or(text)
}

/// The list in saved pages, and each page's fields (see [`Origin::to_json`]).
fn from_files(
    files: &[PathBuf],
    options: CollectOptions,
) -> Result<(ToolList, Vec<Value>), SourceError> {
    let mut collector = Collector::new(options);
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|error| SourceError::File {
            path: path.to_owned(),
            message: error.to_string(),
        })?;
        for page in pages_of(path, &text)? {
            // The collector keeps each page's fields in the same pass.
            collector
                .push_page_json(page)
                .map_err(|error| match error {
                    CollectError::NotComplete { page, result_type } => SourceError::Incomplete {
                        origin: path.display().to_string(),
                        page,
                        result_type,
                    },
                    error => SourceError::Collect {
                        origin: path.display().to_string(),
                        error,
                    },
                })?;
        }
    }
    let origin = files
        .last()
        .map(|path| path.display().to_string())
        .unwrap_or_default();
    let list = collector
        .finish()
        .map_err(|error| SourceError::Collect { origin, error })?;
    let page_fields = list
        .page_fields
        .iter()
        .cloned()
        .map(Value::Object)
        .collect();
    Ok((list, page_fields))
}

/// The pages in one file's text: the text itself, or the members of its
/// `pages` array when it is `{"pages": [...]}` (the corpus format).
fn pages_of<'a>(path: &Path, text: &'a str) -> Result<Vec<&'a str>, SourceError> {
    #[derive(Deserialize)]
    struct Saved<'a> {
        #[serde(borrow)]
        pages: Option<&'a RawValue>,
        tools: Option<IgnoredAny>,
    }
    let file_error = |message: String| SourceError::File {
        path: path.to_owned(),
        message,
    };
    // Most files are one page: a substring search spares them a pass of
    // the JSON parser (a page that merely mentions "pages" takes the pass).
    if !text.contains("\"pages\"") {
        return Ok(vec![text]);
    }
    let saved = match serde_json::from_str::<Saved<'_>>(text) {
        Ok(saved) => saved,
        // Not an object: the collector says what it is.
        Err(_) if serde_json::from_str::<IgnoredAny>(text).is_ok() => return Ok(vec![text]),
        Err(error) => return Err(file_error(format!("not JSON: {error}"))),
    };
    match (saved.pages, saved.tools) {
        (Some(pages), None) => match serde_json::from_str::<Vec<&RawValue>>(pages.get()) {
            Ok(pages) if !pages.is_empty() => Ok(pages.into_iter().map(RawValue::get).collect()),
            _ => Err(file_error(
                "`pages` must be a non-empty array of tools/list results".into(),
            )),
        },
        _ => Ok(vec![text]),
    }
}

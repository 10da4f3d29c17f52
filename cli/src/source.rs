//! Fetching a complete tool list from a target: saved pages, or a live
//! server over stdio or streamable HTTP.

use std::fmt;
use std::path::{Path, PathBuf};

use mcp_hints::collect::{CollectError, CollectOptions, Collector, ToolList};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::args::TargetArgs;
use crate::live::{LiveError, LiveOptions, LiveTarget, Page, Session};
use crate::text::shown;

/// Where the tools came from, for the report.
#[derive(Debug)]
pub enum Origin {
    /// Saved pages, in the order given.
    Files(Vec<PathBuf>),
    /// A live server.
    Live {
        /// How it was reached: `stdio: cmd args` or `http: URL`.
        target: String,
        /// The server's `initialize` result, as served.
        initialize: Value,
        /// The client capabilities declared in `initialize`.
        capabilities: Value,
    },
}

impl Origin {
    /// The report's JSON for the target, server and declared capabilities.
    pub fn to_json(&self) -> Value {
        match self {
            Origin::Files(files) => json!({
                "target": { "kind": "files", "files": files },
                "server": null,
                "clientCapabilities": null,
            }),
            Origin::Live {
                target,
                initialize,
                capabilities,
            } => json!({
                "target": { "kind": "live", "description": target },
                "server": {
                    "serverInfo": initialize.get("serverInfo"),
                    "protocolVersion": initialize.get("protocolVersion"),
                },
                "clientCapabilities": capabilities,
            }),
        }
    }

    /// The report's header lines for people.
    pub fn header(&self) -> Vec<String> {
        match self {
            Origin::Files(files) => vec![format!(
                "saved pages: {}",
                files
                    .iter()
                    .map(|file| file.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            )],
            Origin::Live {
                target,
                initialize,
                capabilities,
            } => {
                let info = initialize.get("serverInfo");
                let field = |key: &str| {
                    info.and_then(|info| info.get(key))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_owned()
                };
                let version = initialize
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                vec![
                    format!(
                        "server: {} {} ({})",
                        shown(&field("name")),
                        shown(&field("version")),
                        shown(target)
                    ),
                    format!("protocol: {version}"),
                    format!("client capabilities declared: {capabilities}"),
                ]
            }
        }
    }
}

/// Why no complete tool list could be had. Each is exit status 2.
#[derive(Debug)]
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
        }
    }
}

/// Fetches the complete tool list of `target`.
///
/// # Errors
///
/// [`SourceError`]: a bad target, an unreadable page file, a live server
/// that fails, or pages that do not make a complete, well-formed list.
pub async fn fetch(
    target: &TargetArgs,
    options: CollectOptions,
) -> Result<(ToolList, Origin), SourceError> {
    if !target.headers.is_empty() && target.url.is_none() {
        return Err(SourceError::HeaderWithoutUrl);
    }
    if !target.files.is_empty() {
        let list = from_files(&target.files, options)?;
        return Ok((list, Origin::Files(target.files.clone())));
    }
    let live = if let Some(url) = &target.url {
        LiveTarget::Url(url.clone())
    } else if let Some((program, args)) = target.command.split_first() {
        LiveTarget::Command {
            program: program.clone(),
            args: args.to_vec(),
        }
    } else {
        return Err(SourceError::NoTarget);
    };
    let live_options = LiveOptions {
        timeout: target.timeout,
        capabilities: target.capabilities.clone(),
        protocol_version: target.protocol_version.clone(),
        headers: target.headers.clone(),
    };
    let mut session = Session::connect(&live, &live_options)
        .await
        .map_err(SourceError::Live)?;
    let collected = collect_live(&mut session, options).await;
    let origin = Origin::Live {
        target: session.target().to_owned(),
        initialize: session.initialize_result().clone(),
        capabilities: target.capabilities.clone(),
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
async fn collect_live(
    session: &mut Session,
    options: CollectOptions,
) -> Result<ToolList, SourceError> {
    let max_pages = options.max_pages;
    // Two pages in flight at most: the collector never falls far behind.
    let (work, pages) = std::sync::mpsc::sync_channel::<Work>(2);
    let collector = std::thread::spawn(move || {
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
        collector.finish()
    });
    let target = session.target().to_owned();
    let collected = |collector: std::thread::JoinHandle<Result<ToolList, CollectError>>| {
        collector
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            .map_err(|error| SourceError::Collect {
                origin: target.clone(),
                error,
            })
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
        let (page, next) = match page {
            Ok(Page::Accepted((text, id, next))) => (Work::Response(text, id), next),
            Ok(Page::Raw(raw)) => {
                let next = skim_page(raw.get());
                (Work::Result(raw.get().to_owned()), next)
            }
            Err(error) => {
                drop(work);
                // A fault the collector found in an earlier page comes first.
                collected(collector)?;
                return Err(SourceError::Live(error));
            }
        };
        fetched += 1;
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
    collected(collector)
}

/// The cursor of a response to request `id` with a page result, skimmed
/// without reading the tools: `Some(None)` for the last page, `None` when
/// the text is not such a response (the session then sorts it).
fn skim_response(text: &str, id: u64) -> Option<Option<String>> {
    #[derive(Deserialize)]
    struct Skim<'a> {
        jsonrpc: Option<&'a str>,
        id: Option<u64>,
        method: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
        result: Option<SkimPage>,
    }
    let skim: Skim<'_> = serde_json::from_str(text).ok()?;
    let well_formed = skim.jsonrpc == Some("2.0")
        && skim.id == Some(id)
        && skim.method.is_none()
        && skim.error.is_none();
    skim.result
        .filter(|_| well_formed)
        .map(|page| page.next_cursor)
}

/// The cursor of a page result, skimmed; `None` also for a page the skim
/// cannot read (the collector then names the fault).
fn skim_page(text: &str) -> Option<String> {
    serde_json::from_str::<SkimPage>(text)
        .ok()
        .and_then(|page| page.next_cursor)
}

#[derive(Deserialize)]
struct SkimPage {
    #[serde(rename = "nextCursor")]
    next_cursor: Option<String>,
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

fn from_files(files: &[PathBuf], options: CollectOptions) -> Result<ToolList, SourceError> {
    let mut collector = Collector::new(options);
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|error| SourceError::File {
            path: path.to_owned(),
            message: error.to_string(),
        })?;
        for page in pages_of(path, &text)? {
            collector
                .push_page_json(page)
                .map_err(|error| SourceError::Collect {
                    origin: path.display().to_string(),
                    error,
                })?;
        }
    }
    let origin = files
        .last()
        .map(|path| path.display().to_string())
        .unwrap_or_default();
    collector
        .finish()
        .map_err(|error| SourceError::Collect { origin, error })
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

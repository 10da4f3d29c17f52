//! The command line, parsed by clap.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Check any MCP server's tool hints: what each tool declares, what a client
/// may do after a timeout, and what changed since you approved it.
#[derive(Debug, Parser)]
#[command(name = "mcp-hints", version, max_term_width = 100)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// A row per tool: each hint's value and provenance, and whether a call
    /// whose response was lost may be resent.
    ///
    /// Exit status: 0 when every tool may be resent, 1 when at least one
    /// needs a read-back, 3 with --pinned when the tools differ from the
    /// lock, 2 for bad or incomplete input or a server that cannot be
    /// reached.
    Audit(AuditArgs),
    /// Findings in the style of rustc: undeclared, contradicting,
    /// meaningless or misplaced hints, missing titles, bad or colliding
    /// names.
    ///
    /// Rules (all on but meaningless_hints): undeclared_hints,
    /// contradicting_hints, meaningless_hints, misplaced_hints,
    /// missing_title, invalid_tool_name, colliding_tool_names.
    ///
    /// Exit status: 0 (1 with --deny when there is a finding), 2 for bad or
    /// incomplete input or a server that cannot be reached.
    Lint(LintArgs),
    /// Prints a lock of every tool's fingerprint, for `audit --pinned`.
    ///
    /// Exit status: 0, or 2 for bad or incomplete input or a server that
    /// cannot be reached.
    Pin(PinArgs),
}

/// `mcp-hints audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Believe the server's annotations: only for a server you vetted.
    /// Without it every tool is read back first.
    #[arg(long)]
    pub trusted: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Compare with a lock written by `mcp-hints pin`: tools added or
    /// changed since are refused.
    #[arg(long, value_name = "LOCK")]
    pub pinned: Option<PathBuf>,
    /// The server.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `mcp-hints lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// Any finding makes the exit status 1.
    #[arg(long)]
    pub deny: bool,
    /// Print JSON instead of rustc-style findings.
    #[arg(long)]
    pub json: bool,
    /// Turn a rule off (repeatable), e.g. `--allow missing_title`.
    #[arg(long, value_name = "RULE")]
    pub allow: Vec<String>,
    /// Turn a rule on (repeatable), e.g. `--warn meaningless_hints`.
    #[arg(long, value_name = "RULE")]
    pub warn: Vec<String>,
    /// The server.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `mcp-hints pin`.
#[derive(Debug, Args)]
pub struct PinArgs {
    /// The server.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Where the tools come from: saved pages, a URL, or a command after `--`.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Saved tools/list pages, in order: each file a tools/list result, a
    /// whole JSON-RPC response, or `{"pages": [...]}`.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// A streamable HTTP server's MCP endpoint.
    #[arg(long, value_name = "URL", conflicts_with = "files")]
    pub url: Option<String>,
    /// A stdio server to spawn: everything after `--`.
    #[arg(last = true, value_name = "COMMAND", conflicts_with_all = ["files", "url"])]
    pub command: Vec<OsString>,
    /// Seconds each request to a live server may take.
    #[arg(
        long,
        value_name = "SECS",
        default_value = "30",
        value_parser = parse_seconds,
        allow_negative_numbers = true
    )]
    pub timeout: std::time::Duration,
    /// The client capabilities declared in `initialize`, as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}", value_parser = parse_capabilities)]
    pub capabilities: serde_json::Value,
    /// The MCP revision asked for in `initialize`.
    #[arg(long, value_name = "VERSION", default_value = crate::live::LATEST_PROTOCOL_VERSION)]
    pub protocol_version: String,
    /// An HTTP header for --url servers, e.g. `Authorization: Bearer …`
    /// (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// The most tools/list pages accepted before giving up.
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = parse_max_pages)]
    pub max_pages: usize,
}

fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if seconds.is_nan() || seconds <= 0.0 {
        return Err(format!(
            "`{text}`: the timeout must be a positive number of seconds"
        ));
    }
    std::time::Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|duration| !duration.is_zero())
        .ok_or_else(|| format!("`{text}` seconds is too long or too short a timeout"))
}

fn parse_max_pages(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the page cap must be at least 1".to_owned()),
        Ok(pages) => Ok(pages),
        Err(_) => Err(format!("`{text}` is not a number of pages")),
    }
}

fn parse_capabilities(text: &str) -> Result<serde_json::Value, String> {
    match serde_json::from_str(text) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(_) => Err("client capabilities must be a JSON object, e.g. '{\"roots\": {}}'".into()),
        Err(error) => Err(format!("not JSON: {error}")),
    }
}

fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not `NAME: VALUE`"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("`{text}` has no header name"));
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

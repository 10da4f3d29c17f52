//! The command line, parsed by clap.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::live::ProtocolVersion;

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
#[non_exhaustive]
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
    /// Checks that the hints hold: runs sequences of generated calls on a
    /// fresh server per run and reads its state back with a snapshot tool
    /// after each call.
    ///
    /// readOnlyHint true: a call leaves the snapshot as it was.
    /// idempotentHint true: the same call again at once leaves it as it
    /// was. destructiveHint false: a call removes or changes nothing that
    /// was there. openWorldHint is not observable, and reported unchecked.
    /// Every finding comes with the shortest sequence found that shows it.
    ///
    /// It calls every writing tool with generated arguments, so it asks
    /// first (--yes for CI); --skip keeps tools out.
    ///
    /// Exit status: 0 when every checked hint held, 1 when one did not, 2
    /// for bad input, a server that cannot be reached or that died during a
    /// sequence.
    Verify(VerifyArgs),
    /// One MCP endpoint in front of many servers, where tool hints become
    /// enforced policy: namespaced tools with explicit hints, rules
    /// (deny, require_approval, rate_limit, allow), a drift lock, an audit
    /// log, and calls resent only when replay-safe.
    ///
    /// Exit status: 0, or 2 for a bad config (file, line and key named),
    /// colliding tool names, or an address that cannot be bound.
    Gateway(GatewayArgs),
    /// Prints a completion script for a shell, e.g.
    /// `mcp-hints completions bash > ~/.local/share/bash-completion/completions/mcp-hints`,
    /// `mcp-hints completions zsh > ~/.zfunc/_mcp-hints`,
    /// `mcp-hints completions fish > ~/.config/fish/completions/mcp-hints.fish`.
    Completions(CompletionsArgs),
}

/// `mcp-hints completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `mcp-hints gateway`.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: GatewayCommand,
}

/// The subcommands of `mcp-hints gateway`.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum GatewayCommand {
    /// Serves MCP over streamable HTTP at `listen.http` (or over stdio with
    /// --stdio) in front of the config's upstreams, with the admin endpoint
    /// at `listen.admin_http`.
    Serve(ServeArgs),
    /// Writes a starter config (the repository's examples/gateway.toml: the
    /// `notes` example server behind a deny, a require_approval, a
    /// rate_limit and a session rule and a secret filter, every key
    /// explained; in a clone's root its paths name the clone's `target/`)
    /// and prints the commands to run next. An existing file is never
    /// overwritten (exit 2).
    Init(InitArgs),
    /// Validates a config and prints, for each tool `serve` would serve, its
    /// namespaced name, its effective hints with their sources, and the
    /// rule it falls under, plus the warnings `serve` would print. It
    /// starts every upstream to read its tools/list, then stops them; it
    /// never binds `listen.http` or `listen.admin_http`, and writes
    /// nothing to the audit log.
    ///
    /// Exit status: 0 for a valid config whose upstreams all answered, 1
    /// when one could not be reached (named on stderr; `serve` would start
    /// without its tools), 2 with `serve`'s own messages for a config that
    /// is not valid (file, line and key named), that `serve` would refuse
    /// (no `listen.http` without `--stdio`, an audit log it could not
    /// create), or colliding tool names.
    Check(CheckArgs),
    /// Prints the audit log's entries, filtered.
    Log(crate::gateway::log::LogArgs),
    /// Approves a parked call (or a drifted tool's new definition) at the
    /// admin endpoint, with the admin token from $MCP_GATEWAY_ADMIN_TOKEN
    /// (else the `[admin]` token of --config).
    Approve(DecideArgs),
    /// Denies a parked call at the admin endpoint, with the admin token
    /// from $MCP_GATEWAY_ADMIN_TOKEN (else the `[admin]` token of
    /// --config).
    Deny(DecideArgs),
    /// Lists the parked calls at the admin endpoint, with the admin token
    /// from $MCP_GATEWAY_ADMIN_TOKEN (else the `[admin]` token of
    /// --config).
    Pending(PendingArgs),
}

/// `mcp-hints gateway serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The gateway's config file (TOML).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Serve one client over stdin/stdout (principal `local`) instead of
    /// HTTP.
    #[arg(long)]
    pub stdio: bool,
}

/// `mcp-hints gateway init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to write the config.
    #[arg(value_name = "PATH", default_value = "gateway.toml")]
    pub path: PathBuf,
}

/// `mcp-hints gateway check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The gateway's config file (TOML).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Print the tools as JSON (an array of objects with `name`,
    /// `upstream`, `tool`, `hints` and `rules`) instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Check for `serve --stdio`: a config without `listen.http` is then
    /// not an error.
    #[arg(long)]
    pub stdio: bool,
}

/// `mcp-hints gateway approve|deny`.
#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The parked call's id, as `pending` and the gateway's stderr show it.
    pub id: String,
    /// Who decides, as the audit log's `by` and the client's answer name
    /// them [default: $USER, else `admin`].
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Where the admin endpoint is.
    #[command(flatten)]
    pub endpoint: AdminArgs,
}

/// `mcp-hints gateway pending`.
#[derive(Debug, Args)]
pub struct PendingArgs {
    /// Where the admin endpoint is.
    #[command(flatten)]
    pub endpoint: AdminArgs,
}

/// Where `pending`, `approve` and `deny` find the admin endpoint and its
/// token: --admin, else `listen.admin_http` of --config, else
/// $MCP_GATEWAY_ADMIN_URL; the token from $MCP_GATEWAY_ADMIN_TOKEN, else
/// the `[admin]` token of --config.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The admin endpoint's base URL, e.g. `http://127.0.0.1:8788`
    /// [default: `listen.admin_http` of --config, else
    /// $MCP_GATEWAY_ADMIN_URL].
    #[arg(long, value_name = "URL")]
    pub admin: Option<String>,
    /// The gateway's config file: the endpoint is its `listen.admin_http`,
    /// and the token its `[admin]` token when $MCP_GATEWAY_ADMIN_TOKEN is
    /// not set. Only those keys are read, so the clients' tokens need not
    /// be set.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
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
    /// Show no progress line on stderr (it is shown only when stderr is a
    /// terminal).
    #[arg(long, short)]
    pub quiet: bool,
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

/// `mcp-hints verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The read-only tool whose result is the server's state: it is called
    /// before and after each call under test.
    #[arg(long, value_name = "TOOL")]
    pub snapshot: String,
    /// The snapshot tool's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}", value_parser = parse_object)]
    pub snapshot_args: serde_json::Map<String, serde_json::Value>,
    /// Print JSON instead of rustc-style findings.
    #[arg(long)]
    pub json: bool,
    /// The seed of the generated sequences: the same seed on the same
    /// server gives the same calls and the same report.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// Calls per run.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub steps: u32,
    /// Runs, each on a fresh server.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Arguments to call tools with besides the generated ones: a JSON
    /// object of tool names to arrays of argument objects,
    /// `{"write_file": [{"path": "/tmp/x/a", "content": "a"}]}`.
    #[arg(long, value_name = "FILE")]
    pub examples: Option<PathBuf>,
    /// Never call the tools whose names match GLOB (`*` any run of
    /// characters, `?` one, `[a-z]` a class); repeatable. Their hints are
    /// reported unchecked.
    #[arg(long, value_name = "GLOB")]
    pub skip: Vec<String>,
    /// A shell command (`sh -c`) run before each run's server is started,
    /// for a server whose state lives outside its process (a file, a
    /// database): a failure stops everything, and so does one that takes
    /// longer than --timeout.
    #[arg(long, value_name = "COMMAND")]
    pub reset: Option<String>,
    /// Do not ask before calling the server's writing tools.
    #[arg(long)]
    pub yes: bool,
    /// Show no progress line on stderr (it is shown only when stderr is a
    /// terminal: the run, the calls sent, the tool being checked).
    #[arg(long, short)]
    pub quiet: bool,
    /// The server.
    #[command(flatten)]
    pub target: LiveTargetArgs,
}

/// A live server, for `verify`: its tools are called, so saved pages will
/// not do. The options are [`TargetArgs`]'s.
#[derive(Debug, Args)]
pub struct LiveTargetArgs {
    /// A streamable HTTP server's MCP endpoint.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// A stdio server to spawn: everything after `--`.
    #[arg(last = true, value_name = "COMMAND", conflicts_with = "url")]
    pub command: Vec<OsString>,
    /// How to talk to it.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

impl ConnectArgs {
    /// The live client's options these name.
    pub fn live_options(&self) -> crate::live::LiveOptions {
        crate::live::LiveOptions {
            timeout: self.timeout,
            capabilities: self.capabilities.clone(),
            protocol_version: self.protocol_version,
            headers: self.headers.clone(),
            max_response_bytes: self.max_response_bytes,
        }
    }
}

impl LiveTargetArgs {
    /// The same server as a [`TargetArgs`], for the tool list.
    pub fn to_target(&self) -> TargetArgs {
        TargetArgs {
            files: Vec::new(),
            url: self.url.clone(),
            command: self.command.clone(),
            connect: self.connect.clone(),
        }
    }
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
    /// How to talk to it.
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// How to talk to a live server: the options every subcommand that starts
/// or reaches one shares.
#[derive(Clone, Debug, Args)]
pub struct ConnectArgs {
    /// Seconds each request to a live server may take, from its first byte
    /// sent to the last byte of the answer (the stdio server/discover probe
    /// waits 10 at most).
    #[arg(
        long,
        value_name = "SECS",
        default_value = "30",
        value_parser = parse_seconds,
        allow_negative_numbers = true
    )]
    pub timeout: std::time::Duration,
    /// The client capabilities declared in `initialize`, or in every
    /// request's `_meta` under 2026-07-28, as a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}", value_parser = parse_capabilities)]
    pub capabilities: serde_json::Value,
    /// Speak this MCP revision and no other (2026-07-28, 2025-11-25,
    /// 2025-06-18, 2025-03-26 or 2024-11-05): a server that refuses it is
    /// exit 2. Without it, 2026-07-28 is tried first and `initialize`
    /// (2025-11-25, or what the server answers) is the fallback.
    #[arg(long, value_name = "VERSION")]
    pub protocol_version: Option<ProtocolVersion>,
    /// The most bytes one message from a live server may have (a stdout
    /// line, an HTTP body, an SSE event): more is exit 2. A number of bytes,
    /// or with KiB, MiB or GiB.
    #[arg(
        long,
        value_name = "BYTES",
        default_value = "64MiB",
        value_parser = parse_bytes
    )]
    pub max_response_bytes: usize,
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

fn parse_bytes(text: &str) -> Result<usize, String> {
    let trimmed = text.trim();
    let digits = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(digits);
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "K" | "k" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        _ => {
            return Err(format!(
                "`{text}` is not a size: give bytes, or a number with KiB, MiB or GiB"
            ));
        }
    };
    let bytes = number
        .parse::<u64>()
        .ok()
        .and_then(|number| number.checked_mul(scale))
        .ok_or_else(|| {
            format!("`{text}` is not a size: give bytes, or a number with KiB, MiB or GiB")
        })?;
    match usize::try_from(bytes) {
        Ok(0) => Err("the bound must be at least 1 byte".to_owned()),
        Ok(bytes) => Ok(bytes),
        Err(_) => Err(format!("`{text}` is more than this machine can address")),
    }
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

fn parse_object(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(_) => Err(
            "the snapshot's arguments must be a JSON object, e.g. '{\"path\": \"/tmp\"}'".into(),
        ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("8 KiB"), Ok(8 << 10));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("1.5MiB").is_err());
        assert!(parse_bytes("ten").is_err());
        assert!(parse_bytes("99999999999999999999").is_err());
    }
}

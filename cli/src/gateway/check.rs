//! `mcp-hints gateway check`: what `serve` would do with a config, without
//! serving. The config is loaded, the upstreams are started and listed, and
//! each tool is decided by the gateway's own code (`config::load`,
//! `front::served_tools`, `Policy::decide`), so the answer is the one a
//! call would get; nothing is bound and the audit log is not written. A
//! `[state] redis` is asked whether it answers, as `serve` asks it at start.

use mcp_hints::Hint;
use serde_json::{Value, json};

use crate::args::CheckArgs;
use mcp_hints_gateway::config::{self, Config, defaults::LOCAL_PRINCIPAL};
use mcp_hints_gateway::front::{self, ServedTool};
use mcp_hints_gateway::policy::{self, CallScope, Lookback, Policy, Ruling, Verdict};
use mcp_hints_gateway::session::History;
use mcp_hints_gateway::state::{RedisState, SharedState, StateError};
use mcp_hints_gateway::{approval, log};

/// The port a `redis://` URL without one names (Redis's own default).
const REDIS_DEFAULT_PORT: u16 = 6379;

/// Runs `gateway check`: prints one line per served tool (or, with
/// `--json`, an array), after the warnings `serve` would print on stderr
/// and, with a `[state] redis`, a line on stderr saying whether it answers
/// (`gateway check: shared state: redis at HOST:PORT answers`, or a
/// warning; never the URL's password). Exit status 0, or 1 when an
/// upstream could not be reached (each named on stderr: `serve` would
/// start without its tools, and keep trying it); a Redis that does not
/// answer is a warning, as `serve` starts without it.
///
/// # Errors
///
/// For exit status 2, the messages `serve` gives: a bad config (file, line
/// and key named), no `listen.http` without `--stdio`, an audit log that
/// could not be created or opened, or a lock that could not be read, a
/// `[state] redis` the Redis client does not take, colliding tool names.
pub async fn run(args: &CheckArgs) -> Result<u8, String> {
    let config = config::load(&args.config).map_err(|error| error.to_string())?;
    super::needs_listen(&config, args.stdio)?;
    for warning in config.warnings() {
        eprintln!("gateway: warning: {}", crate::text::one_line(&warning));
    }
    log::AuditLog::check(&config.log.path).map_err(|error| error.to_string())?;
    if let Some(lock) = config.lock.as_ref().filter(|lock| lock.deny_drift) {
        approval::DriftLock::load(lock).map_err(|error| error.to_string())?;
    }
    if let Some(url) = &config.state.redis {
        let state = RedisState::open(url, &config.state.prefix, None)
            .map_err(|error| without_password(&error.to_string(), url))?;
        eprintln!("{}", state_answer(&state, state.ready().await, url));
    }
    // `served_tools` stops every stdio upstream's process group before it
    // returns, and when its future is dropped on a signal.
    let front::ServedTools {
        served: tools,
        listed,
        unavailable,
    } = front::served_tools(&config)
        .await
        .map_err(|error| error.to_string())?;
    let listed = listed
        .iter()
        .map(|(upstream, tool)| (upstream.as_str(), tool.as_str()));
    for warning in policy::unmatched_tool_globs(&config, listed) {
        eprintln!("gateway: warning: {warning}");
    }
    let principals = principals(&config);
    let out = if args.json {
        let tools: Vec<Value> = tools
            .iter()
            .map(|tool| {
                let rules: serde_json::Map<String, Value> = principals
                    .iter()
                    .map(|principal| {
                        let rule = falls_under(&config, tool, principal);
                        (principal.clone(), Value::from(rule))
                    })
                    .collect();
                json!({
                    "name": tool.name,
                    "upstream": tool.upstream,
                    "tool": tool.tool,
                    "hints": tool.hints,
                    "rules": rules,
                })
            })
            .collect();
        let text = serde_json::to_string_pretty(&tools).map_err(|error| error.to_string())?;
        let mut text = crate::text::json_for_terminal(&text).into_owned();
        text.push('\n');
        text
    } else {
        let rows: Vec<Vec<String>> = tools
            .iter()
            .map(|tool| row(&config, tool, &principals))
            .collect();
        aligned(&rows)
    };
    crate::print(&out)?;
    for (upstream, reason) in &unavailable {
        eprintln!(
            "gateway check: upstream `{upstream}` could not be reached ({}); `serve` would start \
             without its tools and keep trying it",
            crate::text::one_line(reason)
        );
    }
    Ok(u8::from(!unavailable.is_empty()))
}

/// The stderr line for what the shared state at `url` answered to
/// [`SharedState::ready`]: `gateway check: shared state: redis at
/// HOST:PORT answers`, or a `gateway: warning:` saying why it does not and
/// what `serve` would do meanwhile. Neither holds the URL's password.
fn state_answer(state: &dyn SharedState, answer: Result<(), StateError>, url: &str) -> String {
    let place = format!("{} at {}", state.backend(), host_port(url));
    match answer {
        Ok(()) => format!("gateway check: shared state: {place} answers"),
        Err(error) => {
            // The Redis client's own words, without the error's prefix
            // ("the gateway's shared state (redis) is unavailable"), which
            // the line says in its own.
            let why = std::error::Error::source(&error)
                .map_or_else(|| error.to_string(), ToString::to_string);
            let why = crate::text::one_line(&without_password(&why, url)).into_owned();
            format!(
                "gateway: warning: the shared state ({place}) does not answer: {why}; `serve` \
                 would start, and refuse the calls a rule guards until it answers"
            )
        }
    }
}

/// `HOST:PORT` of a `redis://` or `rediss://` URL, Redis's default port
/// when it names none (an IPv6 host in brackets); the URL is one the
/// config accepted, so it parses and names a host.
fn host_port(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => format!(
            "{}:{}",
            parsed.host_str().unwrap_or_default(),
            parsed.port().unwrap_or(REDIS_DEFAULT_PORT)
        ),
        Err(_) => "the configured address".to_owned(),
    }
}

/// `text` with the password of `url` (as written there) replaced by
/// `***`. The Redis client sends a password and does not quote it in its
/// errors; this keeps it out of the output should one ever do.
fn without_password(text: &str, url: &str) -> String {
    let password = reqwest::Url::parse(url)
        .ok()
        .and_then(|parsed| parsed.password().map(str::to_owned));
    match password {
        Some(password) if !password.is_empty() => text.replace(&password, "***"),
        _ => text.to_owned(),
    }
}

/// Every principal a call can come from: each `[[client]]`'s, in file
/// order, then `local` (the stdio client).
fn principals(config: &Config) -> Vec<String> {
    let mut principals: Vec<String> = config
        .clients
        .iter()
        .map(|client| client.principal.clone())
        .collect();
    principals.push(LOCAL_PRINCIPAL.to_owned());
    principals
}

/// One line's cells: the name, the four hints in schema order
/// (`readOnlyHint=false (declared)`), and the rule; when principals fall
/// under different rules, each is named, `alice: ...; local: ...`.
fn row(config: &Config, tool: &ServedTool, principals: &[String]) -> Vec<String> {
    let mut cells = vec![tool.name.clone()];
    cells.extend(Hint::ALL.iter().map(|hint| {
        let (value, source) = tool.hints.get(*hint);
        let source = serde_json::to_value(source)
            .ok()
            .and_then(|source| source.as_str().map(str::to_owned))
            .unwrap_or_default();
        format!("{}={value} ({source})", hint.wire_name())
    }));
    let rules: Vec<(String, &String)> = principals
        .iter()
        .map(|principal| (falls_under(config, tool, principal), principal))
        .collect();
    cells.push(if rules.iter().all(|(rule, _)| *rule == rules[0].0) {
        rules[0].0.clone()
    } else {
        rules
            .iter()
            .map(|(rule, principal)| format!("{principal}: {rule}"))
            .collect::<Vec<_>>()
            .join("; ")
    });
    cells
}

/// The rows as lines, each cell but the last padded to its column's width,
/// two spaces apart.
fn aligned(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            let width = cell.chars().count();
            match widths.get_mut(column) {
                Some(widest) => *widest = (*widest).max(width),
                None => widths.push(width),
            }
        }
    }
    let mut text = String::new();
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            if column + 1 == row.len() {
                text.push_str(cell);
            } else {
                let pad = widths[column] - cell.chars().count();
                text.push_str(cell);
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        text.push('\n');
    }
    text
}

/// The rule `principal`'s first call of `tool` falls under, in the words of
/// the audit log (`rule[0] (deny notes__delete_* when destructive)`), or
/// `allow (no rule)` / `deny (no rule: policy.default)`; then `; later in a
/// session: rule[3]`, the rules that look back and may decide its calls
/// once the session's history holds what they look for. Nothing is
/// counted: a first call has room in its rate limits, and goes on under the
/// first.
fn falls_under(config: &Config, tool: &ServedTool, principal: &str) -> String {
    let policy = Policy::new(config);
    let call = CallScope {
        upstream: &tool.upstream,
        tool: &tool.tool,
        principal,
        // The configured principals are `[[client]]`s and stdio's: no
        // scopes, so a scoped rule is never theirs.
        scopes: &[],
        hints: &tool.hints,
        // A first call: its session has no history yet.
        history: Lookback::Known(&History::default()),
    };
    let verdict = match policy.rule(&call) {
        Ruling::Decided(verdict) => verdict,
        Ruling::Count(rules) => Verdict::Allow {
            rule: rules.first().copied(),
        },
    };
    let first = match verdict {
        Verdict::Allow { rule: None } => "allow (no rule)".to_owned(),
        Verdict::Deny { rule: None } => "deny (no rule: policy.default)".to_owned(),
        Verdict::Allow { rule: Some(rule) }
        | Verdict::Deny { rule: Some(rule) }
        | Verdict::RequireApproval { rule, .. }
        | Verdict::RateLimited { rule, .. } => policy.describe(rule),
    };
    // A rule that looks back holds only once the session did what it looks
    // for: said apart, so that a first call's rule is not read as the only
    // one.
    let later: Vec<String> = policy
        .looking_back(&call)
        .into_iter()
        .map(|rule| format!("rule[{rule}]"))
        .collect();
    if later.is_empty() {
        first
    } else {
        format!("{first}; later in a session: {}", later.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::{host_port, without_password};

    #[test]
    fn host_port_names_the_port_or_redis_default_and_brackets_ipv6() {
        assert_eq!(host_port("redis://:pw@10.0.0.7:6380/2"), "10.0.0.7:6380");
        assert_eq!(host_port("redis://cache.internal"), "cache.internal:6379");
        assert_eq!(host_port("rediss://user:pw@[::1]:7000"), "[::1]:7000");
    }

    #[test]
    fn without_password_hides_the_urls_password_only() {
        let url = "redis://app:hunter22@127.0.0.1:6379/";
        assert_eq!(
            without_password("AUTH hunter22 failed for app", url),
            "AUTH *** failed for app"
        );
        assert_eq!(
            without_password("Connection refused", "redis://127.0.0.1:6379/"),
            "Connection refused"
        );
    }
}

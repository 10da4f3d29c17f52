//! `--fault` specs, `ACTION:TOOL[@N]`: what to do, to which tool, at which call.

use std::error::Error;
use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::time::Duration;

/// What a fault does to one `tools/call` exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `drop-request`: the request never reaches the server.
    DropRequest,
    /// `drop-response`: the request is forwarded; the server's response to it
    /// (matched by JSON-RPC id) is swallowed.
    DropResponse,
    /// `delay-response=MS`: the request is forwarded; the server's response is
    /// held this long, then delivered, while other traffic keeps flowing.
    DelayResponse(Duration),
    /// `kill-server` or `kill-server=MS`: the request is forwarded, and this
    /// long after (default zero) the server is killed with SIGKILL.
    KillServer(Duration),
    /// `kill-after-response`: the request is forwarded; when the response
    /// arrives it is swallowed and the server is killed, so the call ran but
    /// the client never hears.
    KillAfterResponse,
}

impl Action {
    /// The action's name as a spec and the fault log write it, without `=MS`.
    pub fn name(self) -> &'static str {
        match self {
            Action::DropRequest => "drop-request",
            Action::DropResponse => "drop-response",
            Action::DelayResponse(_) => "delay-response",
            Action::KillServer(_) => "kill-server",
            Action::KillAfterResponse => "kill-after-response",
        }
    }

    /// Whether the action kills the server, so that in HTTP mode the proxy
    /// needs `--upstream-pid`.
    pub fn kills_server(self) -> bool {
        matches!(self, Action::KillServer(_) | Action::KillAfterResponse)
    }
}

/// Which `tools/call` requests a spec considers: `params.name` equal to a
/// name, or `*` for any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolPattern {
    /// `*`: every tool.
    Any,
    /// One tool, by its exact name.
    Named(String),
}

impl ToolPattern {
    /// Whether a call to `tool` matches.
    pub fn matches(&self, tool: &str) -> bool {
        match self {
            ToolPattern::Any => true,
            ToolPattern::Named(name) => name == tool,
        }
    }
}

/// Which of the matching calls a spec fires on, counted from 1 within one
/// proxy process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nth {
    /// `@*`: every matching call.
    Every,
    /// `@N`: the Nth matching call only (`@1` when no `@` is given).
    Only(NonZeroU64),
}

impl Nth {
    /// Whether the `n`th matching call (from 1) is selected.
    pub fn selects(self, n: u64) -> bool {
        match self {
            Nth::Every => true,
            Nth::Only(only) => only.get() == n,
        }
    }
}

/// One `--fault` spec, `ACTION:TOOL[@N]`.
///
/// The first `:` ends the action, so a tool name may hold `:`; the last `@`
/// starts the count, so a tool name may hold `@` only when a count follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSpec {
    /// What to do.
    pub action: Action,
    /// To calls of which tool.
    pub tool: ToolPattern,
    /// At which of those calls.
    pub nth: Nth,
}

/// Why a `--fault` spec could not be read: the message says what is wrong
/// and how to write it (clap puts the spec itself in front).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for SpecError {}

const ACTIONS: &str =
    "drop-request, drop-response, delay-response=MS, kill-server[=MS] or kill-after-response";

fn error(message: impl Into<String>) -> SpecError {
    SpecError(message.into())
}

impl FromStr for FaultSpec {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        let Some((action, target)) = spec.split_once(':') else {
            return Err(error(
                "expected `ACTION:TOOL[@N]`, for example `drop-response:add@2`",
            ));
        };
        let action = parse_action(action)?;
        let (tool, nth) = match target.rsplit_once('@') {
            Some((tool, count)) => (tool, parse_nth(count)?),
            None => (target, Nth::Only(NonZeroU64::MIN)),
        };
        let tool = match tool {
            "" => {
                return Err(error(
                    "the tool name is empty: name a tool, or use `*` for any tool",
                ));
            }
            "*" => ToolPattern::Any,
            name => ToolPattern::Named(name.to_owned()),
        };
        Ok(FaultSpec { action, tool, nth })
    }
}

// `NAME` or `NAME=MS`.
fn parse_action(action: &str) -> Result<Action, SpecError> {
    let (name, ms) = match action.split_once('=') {
        Some((name, ms)) => (name, Some(ms)),
        None => (action, None),
    };
    let simple = match name {
        "drop-request" => Some(Action::DropRequest),
        "drop-response" => Some(Action::DropResponse),
        "kill-after-response" => Some(Action::KillAfterResponse),
        _ => None,
    };
    if let Some(simple) = simple {
        return match ms {
            None => Ok(simple),
            Some(ms) => Err(error(format!("`{name}` takes no delay: remove `={ms}`"))),
        };
    }
    match name {
        "delay-response" => match ms {
            Some(ms) => Ok(Action::DelayResponse(parse_ms(ms)?)),
            None => Err(error(
                "`delay-response` needs a delay: write `delay-response=MS`",
            )),
        },
        "kill-server" => Ok(Action::KillServer(match ms {
            Some(ms) => parse_ms(ms)?,
            None => Duration::ZERO,
        })),
        "" => Err(error(format!("the action is missing: expected {ACTIONS}"))),
        unknown => Err(error(format!(
            "unknown action `{unknown}`: expected {ACTIONS}"
        ))),
    }
}

fn parse_ms(ms: &str) -> Result<Duration, SpecError> {
    // `u64::from_str` would take a leading `+`; a delay is plain digits.
    let digits = !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit());
    match ms.parse::<u64>() {
        Ok(ms) if digits => Ok(Duration::from_millis(ms)),
        _ => Err(error(format!(
            "`{ms}` is not a delay: MS is a whole number of milliseconds"
        ))),
    }
}

// What follows the last `@`: `*` or a count from 1.
fn parse_nth(count: &str) -> Result<Nth, SpecError> {
    if count == "*" {
        return Ok(Nth::Every);
    }
    let digits = !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit());
    match count
        .parse::<u64>()
        .ok()
        .filter(|_| digits)
        .map(NonZeroU64::new)
    {
        Some(Some(n)) => Ok(Nth::Only(n)),
        Some(None) => Err(error("`@0` selects nothing: calls are counted from 1")),
        None => Err(error(format!(
            "`@{count}` is not a count: write `@N` with N from 1, or `@*` for every call"
        ))),
    }
}

impl fmt::Display for FaultSpec {
    /// The spec as it would be written, with `=MS` and `@N` always spelled out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.action.name())?;
        match self.action {
            Action::DelayResponse(delay) | Action::KillServer(delay) => {
                write!(f, "={}", delay.as_millis())?;
            }
            _ => {}
        }
        match &self.tool {
            ToolPattern::Any => f.write_str(":*")?,
            ToolPattern::Named(name) => write!(f, ":{name}")?,
        }
        match self.nth {
            Nth::Every => f.write_str("@*"),
            Nth::Only(n) => write!(f, "@{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Result<FaultSpec, String> {
        spec.parse::<FaultSpec>().map_err(|e| e.to_string())
    }

    fn nth(n: u64) -> Nth {
        Nth::Only(NonZeroU64::new(n).unwrap())
    }

    #[test]
    fn every_action_parses() {
        let cases = [
            ("drop-request:add", Action::DropRequest),
            ("drop-response:add", Action::DropResponse),
            (
                "delay-response=250:add",
                Action::DelayResponse(Duration::from_millis(250)),
            ),
            ("kill-server:add", Action::KillServer(Duration::ZERO)),
            (
                "kill-server=40:add",
                Action::KillServer(Duration::from_millis(40)),
            ),
            ("kill-after-response:add", Action::KillAfterResponse),
        ];
        for (spec, action) in cases {
            assert_eq!(
                parse(spec),
                Ok(FaultSpec {
                    action,
                    tool: ToolPattern::Named("add".into()),
                    nth: nth(1)
                }),
                "{spec}"
            );
        }
    }

    #[test]
    fn tool_and_count_forms() {
        assert_eq!(parse("drop-request:*@*").unwrap().tool, ToolPattern::Any);
        assert_eq!(parse("drop-request:*@*").unwrap().nth, Nth::Every);
        assert_eq!(parse("drop-request:add@3").unwrap().nth, nth(3));
        // The first `:` ends the action; the last `@` starts the count.
        assert_eq!(
            parse("drop-request:ns:add@v2@2").unwrap(),
            FaultSpec {
                action: Action::DropRequest,
                tool: ToolPattern::Named("ns:add@v2".into()),
                nth: nth(2)
            }
        );
    }

    #[test]
    fn display_round_trips() {
        for spec in [
            "delay-response=5:add@2",
            "kill-server=0:*@*",
            "drop-request:x@1",
        ] {
            assert_eq!(parse(spec).unwrap().to_string(), spec);
        }
    }

    #[test]
    fn malformed_specs_say_what_is_wrong() {
        let cases = [
            (
                "drop-request",
                "expected `ACTION:TOOL[@N]`, for example `drop-response:add@2`",
            ),
            (
                "drop:add",
                "unknown action `drop`: expected drop-request, drop-response, delay-response=MS, kill-server[=MS] or kill-after-response",
            ),
            (
                ":add",
                "the action is missing: expected drop-request, drop-response, delay-response=MS, kill-server[=MS] or kill-after-response",
            ),
            (
                "delay-response:add",
                "`delay-response` needs a delay: write `delay-response=MS`",
            ),
            (
                "delay-response=:add",
                "`` is not a delay: MS is a whole number of milliseconds",
            ),
            (
                "delay-response=+5:add",
                "`+5` is not a delay: MS is a whole number of milliseconds",
            ),
            (
                "kill-server=1s:add",
                "`1s` is not a delay: MS is a whole number of milliseconds",
            ),
            (
                "drop-response=5:add",
                "`drop-response` takes no delay: remove `=5`",
            ),
            (
                "drop-request:",
                "the tool name is empty: name a tool, or use `*` for any tool",
            ),
            (
                "drop-request:@2",
                "the tool name is empty: name a tool, or use `*` for any tool",
            ),
            (
                "drop-request:add@0",
                "`@0` selects nothing: calls are counted from 1",
            ),
            (
                "drop-request:add@",
                "`@` is not a count: write `@N` with N from 1, or `@*` for every call",
            ),
            (
                "drop-request:add@x",
                "`@x` is not a count: write `@N` with N from 1, or `@*` for every call",
            ),
            (
                "drop-request:add@99999999999999999999",
                "`@99999999999999999999` is not a count: write `@N` with N from 1, or `@*` for every call",
            ),
        ];
        for (spec, message) in cases {
            assert_eq!(parse(spec), Err(message.to_owned()), "{spec}");
        }
    }
}

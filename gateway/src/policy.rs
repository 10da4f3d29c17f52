//! Hints turned into policy: the effective hints of a tool (asserted by the
//! operator, else declared by the server, else the spec default), the
//! rules that match a call, their precedence, and rate limits.
//!
//! DESIGN.md, "Gateway words": an asserted hint outranks the server's
//! declared one, and each hint the gateway acts on keeps its source. Among
//! the rules that match a call, deny > require_approval > rate_limit >
//! allow; when none matches, `policy.default` decides.

use std::fmt;
use std::time::Duration;
#[cfg(test)]
use std::time::Instant;

use mcp_hints::{Hint, Provenance, ToolHints};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::config::{Assert, Config, DefaultAction, RuleAction, RuleConfig};
use super::session::{EarlierCall, History, MAX_EARLIER};
use super::state::{Counted, Window};

/// The four hints of one tool as the gateway acts on them, each with its
/// source: declared or defaulted by the server, or asserted by the
/// operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EffectiveHints(pub ToolHints);

impl EffectiveHints {
    /// One hint's value and source.
    pub fn get(&self, hint: Hint) -> (bool, Provenance) {
        let value = self.0.get(hint);
        (value.value, value.provenance)
    }

    /// The four hints' values and sources, in [`Hint::ALL`] order.
    #[cfg(test)]
    fn values(&self) -> [(bool, Provenance); 4] {
        Hint::ALL.map(|hint| self.get(hint))
    }

    /// The four hints as `ToolAnnotations` members, all explicit:
    /// `{"readOnlyHint": false, "destructiveHint": true, ...}`, for the tool
    /// definitions the gateway serves.
    pub fn to_annotations(&self) -> Map<String, Value> {
        Hint::ALL
            .iter()
            .map(|hint| (hint.wire_name().to_owned(), Value::Bool(self.get(*hint).0)))
            .collect()
    }

    /// Whether `predicate`'s hint holds, read as the spec means it:
    /// `destructiveHint` and `idempotentHint` are meaningful only when
    /// `readOnlyHint` is false, so a read-only tool is never destructive
    /// and always idempotent (whatever its other two hints say, often
    /// defaults); `readOnlyHint` and `openWorldHint` are read as they are.
    pub fn holds(&self, hint: Hint) -> bool {
        let read_only = self.get(Hint::ReadOnly).0;
        let value = self.get(hint).0;
        match hint {
            Hint::ReadOnly | Hint::OpenWorld => value,
            Hint::Destructive => !read_only && value,
            Hint::Idempotent => read_only || value,
        }
    }
}

/// Serialises as `{"readOnlyHint": {"value": true, "source": "declared"},
/// ...}`, the four hints in schema order (the audit log's `hints`).
impl Serialize for EffectiveHints {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Entry {
            value: bool,
            source: Provenance,
        }
        let mut map = serializer.serialize_map(Some(4))?;
        for hint in Hint::ALL {
            let (value, source) = self.get(hint);
            map.serialize_entry(hint.wire_name(), &Entry { value, source })?;
        }
        map.end()
    }
}

/// The hints the gateway acts on for `upstream`'s tool `tool` (its own
/// name, not namespaced), whose definition gave `served`.
///
/// Each hint starts as the server has it (declared, or defaulted); every
/// `[[assert]]` whose `upstream` and `tool` globs match, in file order,
/// overwrites the hints it names, so a later assert outranks an earlier
/// one and any assert outranks the server.
///
/// The replay-safe client of each upstream judges resends by the same
/// hints (its [`hints`](mcp_hints::client::ReplaySafeClientBuilder::hints)
/// hook calls this), so that what clients are shown is what the gateway
/// acts on.
pub(crate) fn effective_hints(
    asserts: &[Assert],
    upstream: &str,
    tool: &str,
    served: &ToolHints,
) -> EffectiveHints {
    let mut hints = *served;
    for assert in asserts {
        if assert.upstream.matches(upstream) && tool_matches(&assert.tool, upstream, tool) {
            for hint in Hint::ALL {
                if let Some(value) = assert.hints[hint as usize] {
                    hints.assert(hint, value);
                }
            }
        }
    }
    EffectiveHints(hints)
}

/// Whether a `tool` glob names `upstream`'s tool `tool`. A glob with `__`
/// in it is written as clients see names (`notes__delete_*`) and is matched
/// against `UPSTREAM__TOOL`; any other (`delete_*`) against the upstream's
/// own name. A glob written either way thus cannot silently miss a tool (a
/// `deny` that matches nothing lets everything through), and a tool whose
/// own name holds `__` (`web`'s `notes__read`) cannot pass for another
/// upstream's (`notes`' `read`).
pub fn tool_matches(glob: &glob::Pattern, upstream: &str, tool: &str) -> bool {
    if glob.as_str().contains(super::SEPARATOR) {
        glob.matches(&super::namespaced(upstream, tool))
    } else {
        glob.matches(tool)
    }
}

/// The `tool` globs of `config`'s rules, asserts and redacts (other than
/// `*`) that match no tool of the upstreams they name, and the `tool:`
/// terms of rules' `after` and `count.of` that match no tool at all, among
/// `tools` (each upstream's name and its own tool names), in config order:
/// ``rule[0].tool `delte_note` matches no tool of the upstreams `notes`
/// names``. Said as an event at start, since
/// a typo there makes a rule that never fires.
pub fn unmatched_tool_globs<'a>(
    config: &Config,
    tools: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Vec<String> {
    let any = glob::Pattern::new("*").expect("`*` is a glob");
    // A look-back's tool glob may name any upstream's tool (an upstream
    // term beside it narrows what it matches, not what it may name).
    let looked_back = config.rules.iter().enumerate().flat_map(|(index, rule)| {
        let after = rule
            .after
            .iter()
            .enumerate()
            .map(move |(position, condition)| {
                (format!("rule[{index}].after[{position}]"), condition)
            });
        let of = rule
            .count
            .iter()
            .map(move |count| (format!("rule[{index}].count.of"), &count.of));
        after.chain(of).flat_map(|(path, condition)| {
            condition.tool_globs().map(move |glob| (path.clone(), glob))
        })
    });
    let scopes = config
        .rules
        .iter()
        .enumerate()
        .map(|(index, rule)| (format!("rule[{index}].tool"), &rule.upstream, &rule.tool))
        .chain(config.asserts.iter().enumerate().map(|(index, assert)| {
            (
                format!("assert[{index}].tool"),
                &assert.upstream,
                &assert.tool,
            )
        }))
        .chain(config.redacts.iter().enumerate().map(|(index, redact)| {
            (
                format!("redact[{index}].tool"),
                &redact.upstream,
                &redact.tool,
            )
        }))
        .chain(looked_back.map(|(path, glob)| (path, &any, glob)));
    let mut unmatched = Vec::new();
    for (path, upstream_glob, tool_glob) in scopes {
        if tool_glob.as_str() == "*" {
            continue;
        }
        let mut named = tools
            .clone()
            .filter(|(upstream, _)| upstream_glob.matches(upstream))
            .peekable();
        if named.peek().is_none() {
            // Its upstreams listed nothing (yet): nothing to judge by.
            continue;
        }
        if !named.any(|(upstream, tool)| tool_matches(tool_glob, upstream, tool)) {
            unmatched.push(format!(
                "{path} `{}` matches no tool of the upstreams `{}` names",
                mcp_hints_core::escape::one_line(tool_glob.as_str()),
                mcp_hints_core::escape::one_line(upstream_glob.as_str())
            ));
        }
    }
    unmatched
}

/// One call, as the rules see it.
#[derive(Clone, Copy, Debug)]
pub struct CallScope<'a> {
    /// The upstream's name.
    pub upstream: &'a str,
    /// The upstream's own name of the tool (not `UPSTREAM__TOOL`).
    pub tool: &'a str,
    /// The caller's principal (`local` over stdio).
    pub principal: &'a str,
    /// The scopes of the caller's OAuth token (`[auth]`); empty for a
    /// `[[client]]` token and over stdio.
    pub scopes: &'a [String],
    /// The tool's effective hints: the server's, under the operator's
    /// `[[assert]]`s.
    pub hints: &'a EffectiveHints,
    /// The session's history, for the rules that look back (`after`,
    /// `count`).
    pub history: Lookback<'a>,
}

/// What the rules that look back (`after`, `count`) can read of a call's
/// session.
#[derive(Clone, Copy, Debug)]
pub enum Lookback<'a> {
    /// Its history as the shared state holds it (empty for a session's
    /// first call).
    Known(&'a History),
    /// It could not be read (the shared state is unreachable), or it was
    /// not read because no rule that matches the call looks back
    /// ([`Policy::needs_history`]). A `deny`, `require_approval` or
    /// `rate_limit` rule then takes its look-back as met, so it fails
    /// closed; an `allow` rule takes it as unmet.
    Unknown,
}

/// What a parked call becomes when its rule's timeout passes
/// (`on_expiry`); serialised lowercase, `"deny"` or `"approve"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expiry {
    /// `"deny"` (the default): the call is refused.
    Deny,
    /// `"approve"`: the call goes on.
    Approve,
}

/// The policy's decision on one call. `rule` is an index into
/// [`Config::rules`] (`rule[0]` in messages; [`Policy::describe`] names
/// it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The call goes on: under an `allow` rule or a `rate_limit` rule with
    /// room (the first such matching rule), or with `None` when no rule
    /// matched and `policy.default` is allow.
    Allow {
        /// The rule that let it through; `None`: the default.
        rule: Option<usize>,
    },
    /// The call is refused: by the first matching `deny` rule, or with
    /// `None` when no rule matched and `policy.default` is deny.
    Deny {
        /// The rule that refused it; `None`: the default.
        rule: Option<usize>,
    },
    /// The call waits for an approver: the first matching
    /// `require_approval` rule, when no `deny` rule matched.
    RequireApproval {
        /// The rule.
        rule: usize,
        /// How long to wait for an approver.
        timeout: Duration,
        /// What the call becomes when nobody answers in time.
        on_expiry: Expiry,
    },
    /// The call is refused for now: a matching `rate_limit` rule has had
    /// `limit` calls from this principal in the last `window` (no deny or
    /// require_approval rule matched).
    RateLimited {
        /// The full rule (of several full ones, the one that frees up
        /// last).
        rule: usize,
        /// Its `limit`.
        limit: u32,
        /// Its window.
        window: Duration,
        /// When the call would find room under this rule: the oldest
        /// counted call leaves the window.
        retry_after: Duration,
    },
}

/// What the rules say of one call before any rate limit is counted:
/// [`Policy::rule`]'s answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ruling {
    /// Decided without counting anything.
    Decided(Verdict),
    /// `rate_limit` rules match (and no deny or require_approval): the
    /// call must have room in each of these rules' windows
    /// ([`Policy::windows`], counted by a [`SharedState`](crate::state::SharedState)), and
    /// [`Policy::counted`] turns what the count found into the verdict.
    Count(Vec<usize>),
}

/// The rules of one config: built once, shared by every call. The
/// rate-limit windows live in a [`SharedState`](crate::state::SharedState), not here, so that
/// replicas count together.
pub struct Policy {
    rules: Vec<RuleConfig>,
    default: DefaultAction,
    /// Each rule's identity across replicas: its text without its index.
    keys: Vec<String>,
    /// The windows [`Policy::decide`] counts in, in tests.
    #[cfg(test)]
    counted_here: crate::state::InProcess,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.rules.len())
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

impl Policy {
    /// The policy of `config`'s `[[rule]]`s and `policy.default`.
    pub fn new(config: &Config) -> Policy {
        let mut policy = Policy {
            rules: config.rules.clone(),
            default: config.policy.default,
            keys: Vec::new(),
            #[cfg(test)]
            counted_here: crate::state::InProcess::new(None),
        };
        policy.keys = (0..policy.rules.len())
            .map(|rule| {
                let text = policy.describe(rule);
                let prefix = format!("rule[{rule}] ");
                text.strip_prefix(&prefix).unwrap_or(&text).to_owned()
            })
            .collect();
        policy
    }

    /// What the rules say of `call`.
    ///
    /// A rule matches when its `upstream`, `tool` and `principal` globs
    /// match, the call's token holds its `scope` (when it names one), and
    /// every `when` predicate holds ([`EffectiveHints::holds`]).
    /// Among the matching rules: any `deny` refuses; else any
    /// `require_approval` parks; else, when `rate_limit` rules match, the
    /// call is to be counted against each ([`Ruling::Count`]); else any
    /// `allow` allows; else `policy.default`. Only a call allowed by its
    /// rate limits counts, so refused and parked calls use no quota.
    pub fn rule(&self, call: &CallScope<'_>) -> Ruling {
        let matching: Vec<usize> = (0..self.rules.len())
            .filter(|index| self.matches(&self.rules[*index], call))
            .collect();
        let first = |wanted: fn(&RuleAction) -> bool| {
            matching
                .iter()
                .copied()
                .find(|index| wanted(&self.rules[*index].action))
        };
        if let Some(rule) = first(|action| matches!(action, RuleAction::Deny)) {
            return Ruling::Decided(Verdict::Deny { rule: Some(rule) });
        }
        if let Some(rule) = first(|action| matches!(action, RuleAction::RequireApproval { .. })) {
            let RuleAction::RequireApproval { timeout, on_expiry } = self.rules[rule].action else {
                unreachable!("found as require_approval");
            };
            return Ruling::Decided(Verdict::RequireApproval {
                rule,
                timeout,
                on_expiry,
            });
        }
        let limits: Vec<usize> = matching
            .iter()
            .copied()
            .filter(|index| matches!(self.rules[*index].action, RuleAction::RateLimit { .. }))
            .collect();
        if !limits.is_empty() {
            return Ruling::Count(limits);
        }
        if let Some(rule) = first(|action| matches!(action, RuleAction::Allow)) {
            return Ruling::Decided(Verdict::Allow { rule: Some(rule) });
        }
        Ruling::Decided(match self.default {
            DefaultAction::Allow => Verdict::Allow { rule: None },
            DefaultAction::Deny => Verdict::Deny { rule: None },
        })
    }

    /// The windows of the `rate_limit` rules `rules` (from
    /// [`Ruling::Count`]); a rule that is not a rate limit has none.
    pub fn windows(&self, rules: &[usize]) -> Vec<Window<'_>> {
        rules
            .iter()
            .filter_map(|&rule| match self.rules.get(rule)?.action {
                RuleAction::RateLimit { limit, window } => Some(Window {
                    rule,
                    key: &self.keys[rule],
                    limit,
                    window,
                }),
                _ => None,
            })
            .collect()
    }

    /// The verdict on a call whose `windows` were counted as `counted`:
    /// allowed under the first window's rule, or
    /// [`Verdict::RateLimited`] by the full one.
    pub fn counted(&self, windows: &[Window<'_>], counted: Counted) -> Verdict {
        match counted {
            Counted::Allowed => Verdict::Allow {
                rule: windows.first().map(|window| window.rule),
            },
            Counted::Full { rule, retry_after } => {
                let (limit, window) = windows
                    .iter()
                    .find(|window| window.rule == rule)
                    .map_or((0, Duration::ZERO), |window| (window.limit, window.window));
                Verdict::RateLimited {
                    rule,
                    limit,
                    window,
                    retry_after,
                }
            }
        }
    }

    /// [`rule`](Policy::rule), then counting in this policy's own windows
    /// at `now`.
    #[cfg(test)]
    pub(crate) fn decide(&self, call: &CallScope<'_>, now: Instant) -> Verdict {
        match self.rule(call) {
            Ruling::Decided(verdict) => verdict,
            Ruling::Count(rules) => {
                let windows = self.windows(&rules);
                let counted = self.counted_here.count_at(call.principal, &windows, now);
                self.counted(&windows, counted)
            }
        }
    }

    /// Whether any rule reads a session's history: only then does the
    /// gateway keep one.
    pub fn looks_back(&self) -> bool {
        self.rules.iter().any(RuleConfig::looks_back)
    }

    /// Whether deciding `call` reads its session's history: a rule that
    /// looks back matches it on everything else (its `history` is not
    /// read here).
    pub fn needs_history(&self, call: &CallScope<'_>) -> bool {
        self.rules
            .iter()
            .any(|rule| rule.looks_back() && self.matches_now(rule, call))
    }

    /// The rules that look back and match `call` on everything else: what
    /// may decide it later in a session, once its history holds what they
    /// look for (in config order).
    pub fn looking_back(&self, call: &CallScope<'_>) -> Vec<usize> {
        (0..self.rules.len())
            .filter(|index| {
                let rule = &self.rules[*index];
                rule.looks_back() && self.matches_now(rule, call)
            })
            .collect()
    }

    /// The earlier calls of `history` that made rule `rule` match, as a
    /// `decided` entry names them: for each `after` condition the latest
    /// call meeting it, and every call its `count` counted; oldest first,
    /// each once, the latest [`MAX_EARLIER`] of them. Empty for a rule
    /// that does not look back.
    pub fn earlier(&self, rule: usize, history: &History) -> Vec<EarlierCall> {
        let Some(config) = self.rules.get(rule) else {
            return Vec::new();
        };
        let mut positions: Vec<usize> = config
            .after
            .iter()
            .filter_map(|condition| {
                history
                    .calls
                    .iter()
                    .rposition(|earlier| condition.holds(earlier))
            })
            .collect();
        if let Some(count) = &config.count {
            positions.extend(
                history
                    .calls
                    .iter()
                    .enumerate()
                    .filter(|(_, earlier)| count.counts(history.now_ms, earlier))
                    .map(|(position, _)| position),
            );
        }
        positions.sort_unstable();
        positions.dedup();
        let skip = positions.len().saturating_sub(MAX_EARLIER);
        positions
            .into_iter()
            .skip(skip)
            .map(|position| EarlierCall::from(&history.calls[position]))
            .collect()
    }

    fn matches(&self, rule: &RuleConfig, call: &CallScope<'_>) -> bool {
        self.matches_now(rule, call) && Policy::looked_back(rule, call.history)
    }

    /// Whether `rule`'s look-back holds over `history`: every `after`
    /// condition met by some earlier call, and its `count` reached. Not
    /// knowing the history, only a rule that guards holds (it fails
    /// closed).
    fn looked_back(rule: &RuleConfig, history: Lookback<'_>) -> bool {
        if !rule.looks_back() {
            return true;
        }
        match history {
            Lookback::Known(history) => {
                rule.after
                    .iter()
                    .all(|condition| history.calls.iter().any(|earlier| condition.holds(earlier)))
                    && rule.count.as_ref().is_none_or(|count| count.holds(history))
            }
            Lookback::Unknown => !matches!(rule.action, RuleAction::Allow),
        }
    }

    /// Whether `rule` matches `call` on what the call itself says: its
    /// globs, scope and `when`.
    fn matches_now(&self, rule: &RuleConfig, call: &CallScope<'_>) -> bool {
        rule.upstream.matches(call.upstream)
            && tool_matches(&rule.tool, call.upstream, call.tool)
            && rule.principal.matches(call.principal)
            && rule
                .scope
                .as_ref()
                .is_none_or(|scope| call.scopes.contains(scope))
            && rule
                .when
                .iter()
                .all(|predicate| call.hints.holds(predicate.hint) == predicate.holds)
    }

    /// Rule `rule` in words, for the audit log and refusals: `rule[2] (deny
    /// delete_* when destructive)`. The target is the tool glob, prefixed
    /// `UPSTREAM__` (as clients see names) unless the upstream glob is `*`;
    /// then ` when P and Q`, ` for PRINCIPAL` (unless `*`), ` with scope
    /// SCOPE` (when it names one), ` after C, D` (its `after` conditions
    /// and its `count`: `after open_world, 3 destructive calls within 60
    /// s`), and the
    /// action's numbers: `, 10 per 60 s` or `, expires after 300 s as
    /// deny`. An index past the rules gives just `rule[N]`.
    pub fn describe(&self, rule: usize) -> String {
        let Some(config) = self.rules.get(rule) else {
            return format!("rule[{rule}]");
        };
        let mut text = format!("rule[{rule}] ({} ", config.action.name());
        if config.upstream.as_str() != "*" {
            text.push_str(config.upstream.as_str());
            text.push_str(super::SEPARATOR);
        }
        text.push_str(config.tool.as_str());
        for (index, predicate) in config.when.iter().enumerate() {
            text.push_str(if index == 0 { " when " } else { " and " });
            text.push_str(&predicate.to_string());
        }
        if config.principal.as_str() != "*" {
            text.push_str(" for ");
            text.push_str(config.principal.as_str());
        }
        if let Some(scope) = &config.scope {
            text.push_str(" with scope ");
            text.push_str(scope);
        }
        if !config.after.is_empty() || config.count.is_some() {
            let mut looks: Vec<String> = config.after.iter().map(ToString::to_string).collect();
            looks.extend(config.count.iter().map(ToString::to_string));
            text.push_str(" after ");
            text.push_str(&looks.join(", "));
        }
        match config.action {
            RuleAction::RateLimit { limit, window } => {
                text.push_str(&format!(", {limit} per {} s", window.as_secs()));
            }
            RuleAction::RequireApproval { timeout, on_expiry } => {
                let expiry = match on_expiry {
                    Expiry::Deny => "deny",
                    Expiry::Approve => "approve",
                };
                text.push_str(&format!(
                    ", expires after {} s as {expiry}",
                    timeout.as_secs()
                ));
            }
            RuleAction::Deny | RuleAction::Allow => {}
        }
        text.push(')');
        text
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::config::parse_with_env;

    const HEAD: &str = "[log]\npath = \"a.jsonl\"\n\
                        [[upstream]]\nname = \"notes\"\ncommand = [\"x\"]\n\
                        [[upstream]]\nname = \"web\"\nurl = \"http://127.0.0.1:1/mcp\"\n\
                        [[client]]\nprincipal = \"alice\"\ntoken = \"alice-token-0123456789\"\n\
                        [[client]]\nprincipal = \"bob\"\ntoken = \"bob-token-0123456789\"\n";

    fn config(rest: &str) -> Config {
        parse_with_env(&format!("{HEAD}{rest}"), Path::new("g.toml"), &|_| None)
            .unwrap_or_else(|error| panic!("{error}"))
    }

    fn served(annotations: Value) -> ToolHints {
        ToolHints::from_json(Some(&annotations), None).unwrap()
    }

    /// Hints with every source `declared`, from (read_only, destructive,
    /// idempotent, open_world).
    fn hints(
        read_only: bool,
        destructive: bool,
        idempotent: bool,
        open_world: bool,
    ) -> EffectiveHints {
        EffectiveHints(served(json!({
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": idempotent,
            "openWorldHint": open_world,
        })))
    }

    /// A write: not read-only, destructive, not idempotent, closed world.
    const WRITE: (bool, bool, bool, bool) = (false, true, false, false);

    fn call<'a>(
        upstream: &'a str,
        tool: &'a str,
        principal: &'a str,
        hints: &'a EffectiveHints,
    ) -> CallScope<'a> {
        CallScope {
            upstream,
            tool,
            principal,
            scopes: &[],
            hints,
            history: Lookback::Unknown,
        }
    }

    fn write() -> EffectiveHints {
        hints(WRITE.0, WRITE.1, WRITE.2, WRITE.3)
    }

    #[test]
    fn served_hints_keep_their_provenance_when_nothing_is_asserted() {
        let config = config("");
        let effective = effective_hints(
            &config.asserts,
            "notes",
            "add_note",
            &served(json!({"readOnlyHint": false, "idempotentHint": true})),
        );
        assert_eq!(
            effective.values(),
            [
                (false, Provenance::Declared),
                (true, Provenance::Defaulted),
                (true, Provenance::Declared),
                (true, Provenance::Defaulted),
            ]
        );
        // Nothing declared at all: the spec defaults, every one defaulted.
        let bare = effective_hints(&config.asserts, "notes", "x", &served(json!({})));
        assert_eq!(
            bare.values(),
            [
                (false, Provenance::Defaulted),
                (true, Provenance::Defaulted),
                (false, Provenance::Defaulted),
                (true, Provenance::Defaulted),
            ]
        );
    }

    #[test]
    fn asserted_hints_outrank_declared_ones_and_later_asserts_win() {
        let config = config(
            "[[assert]]\ntool = \"*delete*\"\ndestructiveHint = true\nreadOnlyHint = false\n\
             [[assert]]\nupstream = \"notes\"\ntool = \"delete_*\"\ndestructiveHint = false\n\
             [[assert]]\nupstream = \"web\"\nopenWorldHint = true\n",
        );
        let declared = served(json!({
            "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false
        }));
        let effective = effective_hints(&config.asserts, "notes", "delete_note", &declared);
        assert_eq!(
            effective.values(),
            [
                (false, Provenance::Asserted),
                // assert[1] comes later than assert[0]: its false wins.
                (false, Provenance::Asserted),
                (true, Provenance::Declared),
                (false, Provenance::Declared),
            ]
        );
        // assert[1] is for notes only; assert[2] for web only.
        let on_web = effective_hints(&config.asserts, "web", "delete_note", &declared);
        assert_eq!(
            on_web.values(),
            [
                (false, Provenance::Asserted),
                (true, Provenance::Asserted),
                (true, Provenance::Declared),
                (true, Provenance::Asserted),
            ]
        );
        let untouched = effective_hints(&config.asserts, "notes", "list_notes", &declared);
        assert!(
            untouched
                .values()
                .iter()
                .all(|(_, source)| *source == Provenance::Declared)
        );
    }

    #[test]
    fn hints_serialise_with_their_sources_and_as_annotations() {
        let mut effective = EffectiveHints(served(json!({
            "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false
        })));
        effective.0.assert(Hint::OpenWorld, true);
        assert_eq!(
            serde_json::to_value(effective).unwrap(),
            json!({
                "readOnlyHint": {"value": true, "source": "declared"},
                "destructiveHint": {"value": true, "source": "defaulted"},
                "idempotentHint": {"value": true, "source": "declared"},
                "openWorldHint": {"value": true, "source": "asserted"},
            })
        );
        assert_eq!(
            Value::Object(effective.to_annotations()),
            json!({"readOnlyHint": true, "destructiveHint": true, "idempotentHint": true, "openWorldHint": true})
        );
        assert_eq!(effective.get(Hint::OpenWorld), (true, Provenance::Asserted));
        assert_eq!(
            serde_json::to_value(Expiry::Approve).unwrap(),
            json!("approve")
        );
    }

    #[test]
    fn no_matching_rule_leaves_it_to_the_default() {
        let hints = write();
        let now = Instant::now();
        let allow = Policy::new(&config(""));
        assert_eq!(
            allow.decide(&call("notes", "add", "alice", &hints), now),
            Verdict::Allow { rule: None }
        );
        let deny = Policy::new(&config(
            "[policy]\ndefault = \"deny\"\n[[rule]]\naction = \"allow\"\ntool = \"list_*\"\n",
        ));
        assert_eq!(
            deny.decide(&call("notes", "add", "alice", &hints), now),
            Verdict::Deny { rule: None }
        );
        assert_eq!(
            deny.decide(&call("notes", "list_notes", "alice", &hints), now),
            Verdict::Allow { rule: Some(0) }
        );
    }

    #[test]
    fn a_scoped_rule_matches_only_tokens_holding_its_scope() {
        let policy = Policy::new(&config(
            "[auth]\nissuer = \"https://issuer.example.com\"\naudience = \"https://gw.example.com/mcp\"\n\
             [policy]\ndefault = \"deny\"\n\
             [[rule]]\naction = \"allow\"\ntool = \"add_*\"\nscope = \"notes:write\"\n\
             [[rule]]\naction = \"allow\"\ntool = \"list_*\"\nprincipal = \"carol@example.com\"\n",
        ));
        let hints = write();
        let now = Instant::now();
        let writer = ["notes:read".to_owned(), "notes:write".to_owned()];
        let reader = ["notes:read".to_owned()];
        let scoped = |scopes| CallScope {
            scopes,
            ..call("notes", "add_note", "carol@example.com", &hints)
        };
        assert_eq!(
            policy.decide(&scoped(&writer), now),
            Verdict::Allow { rule: Some(0) }
        );
        // Without the scope the rule does not match: the default decides.
        assert_eq!(
            policy.decide(&scoped(&reader), now),
            Verdict::Deny { rule: None }
        );
        // A static client's call and stdio's hold no scopes.
        assert_eq!(
            policy.decide(&call("notes", "add_note", "local", &hints), now),
            Verdict::Deny { rule: None }
        );
        // With `[auth]`, a principal glob may name a principal no
        // `[[client]]` has: tokens bring their own.
        assert_eq!(
            policy.decide(
                &call("notes", "list_notes", "carol@example.com", &hints),
                now
            ),
            Verdict::Allow { rule: Some(1) }
        );
        assert_eq!(
            policy.describe(0),
            "rule[0] (allow add_* with scope notes:write)"
        );
    }

    #[test]
    fn rules_match_by_upstream_tool_and_principal_globs() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"deny\"\nupstream = \"web\"\ntool = \"delete_*\"\nprincipal = \"b*\"\n",
        ));
        let hints = write();
        let now = Instant::now();
        assert_eq!(
            policy.decide(&call("web", "delete_x", "bob", &hints), now),
            Verdict::Deny { rule: Some(0) }
        );
        assert_eq!(
            policy.decide(&call("notes", "delete_x", "bob", &hints), now),
            Verdict::Allow { rule: None }
        );
        assert_eq!(
            policy.decide(&call("web", "add_x", "bob", &hints), now),
            Verdict::Allow { rule: None }
        );
        assert_eq!(
            policy.decide(&call("web", "delete_x", "alice", &hints), now),
            Verdict::Allow { rule: None }
        );
        // `delete_*` is not a prefix of a tool whose own name is
        // `web__delete_x` (seen by clients as `web__web__delete_x`).
        assert_eq!(
            policy.decide(&call("web", "web__delete_x", "bob", &hints), now),
            Verdict::Allow { rule: None }
        );
    }

    #[test]
    fn tool_globs_match_the_names_clients_see_too() {
        // Written as clients see the tools: it must not miss them.
        let config = config(
            "[[rule]]\naction = \"deny\"\ntool = \"notes__delete_*\"\n\
             [[assert]]\ntool = \"web__fetch\"\nopenWorldHint = false\n",
        );
        let policy = Policy::new(&config);
        let hints = write();
        let now = Instant::now();
        assert_eq!(
            policy.decide(&call("notes", "delete_note", "bob", &hints), now),
            Verdict::Deny { rule: Some(0) }
        );
        assert_eq!(
            policy.decide(&call("web", "delete_note", "bob", &hints), now),
            Verdict::Allow { rule: None }
        );
        let fetch = effective_hints(&config.asserts, "web", "fetch", &served(json!({})));
        assert_eq!(fetch.get(Hint::OpenWorld), (false, Provenance::Asserted));
        // web's own `notes__delete_note` is not notes' `delete_note`.
        assert_eq!(
            policy.decide(&call("web", "notes__delete_note", "bob", &hints), now),
            Verdict::Allow { rule: None }
        );
    }

    #[test]
    fn tool_globs_that_match_no_listed_tool_are_named() {
        let config = config(
            "[[rule]]\naction = \"deny\"\nupstream = \"notes\"\ntool = \"delte_note\"\n\
             [[rule]]\naction = \"deny\"\nupstream = \"notes\"\ntool = \"delete_*\"\n\
             [[rule]]\naction = \"deny\"\nupstream = \"web\"\ntool = \"anything\"\n\
             [[assert]]\ntool = \"notes__list*\"\nreadOnlyHint = true\n\
             [[assert]]\ntool = \"nothing\"\nreadOnlyHint = true\n",
        );
        // web listed nothing: its rule cannot be judged yet.
        let tools = [("notes", "delete_note"), ("notes", "list_notes")];
        assert_eq!(
            unmatched_tool_globs(&config, tools.iter().copied()),
            [
                "rule[0].tool `delte_note` matches no tool of the upstreams `notes` names",
                "assert[1].tool `nothing` matches no tool of the upstreams `*` names",
            ]
        );
    }

    #[test]
    fn when_predicates_all_hold_with_not() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"deny\"\nwhen = [\"destructive\", \"not idempotent\"]\n\
             [[rule]]\naction = \"require_approval\"\nwhen = [\"open_world\", \"not read_only\"]\n",
        ));
        let now = Instant::now();
        let verdict = |h: EffectiveHints| policy.decide(&call("notes", "t", "alice", &h), now);
        assert_eq!(
            verdict(hints(false, true, false, false)),
            Verdict::Deny { rule: Some(0) }
        );
        // Idempotent: `not idempotent` fails, rule[0] does not match.
        assert_eq!(
            verdict(hints(false, true, true, false)),
            Verdict::Allow { rule: None }
        );
        assert_eq!(
            verdict(hints(false, false, false, true)),
            Verdict::RequireApproval {
                rule: 1,
                timeout: Duration::from_secs(300),
                on_expiry: Expiry::Deny
            }
        );
        // Read-only: destructiveHint true and idempotentHint false mean
        // nothing (the spec); neither rule matches.
        assert_eq!(
            verdict(hints(true, true, false, true)),
            Verdict::Allow { rule: None }
        );
    }

    #[test]
    fn predicates_read_hints_as_the_spec_means_them() {
        let read_only = hints(true, true, false, true);
        assert!(read_only.holds(Hint::ReadOnly));
        assert!(!read_only.holds(Hint::Destructive));
        assert!(read_only.holds(Hint::Idempotent));
        assert!(read_only.holds(Hint::OpenWorld));
        let write = write();
        assert!(!write.holds(Hint::ReadOnly));
        assert!(write.holds(Hint::Destructive));
        assert!(!write.holds(Hint::Idempotent));
        assert!(!write.holds(Hint::OpenWorld));
    }

    #[test]
    fn deny_outranks_every_other_action() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"allow\"\n[[rule]]\naction = \"rate_limit\"\nlimit = 5\nwindow_secs = 60\n\
             [[rule]]\naction = \"require_approval\"\n[[rule]]\naction = \"deny\"\ntool = \"drop\"\n",
        ));
        let hints = write();
        let now = Instant::now();
        assert_eq!(
            policy.decide(&call("notes", "drop", "alice", &hints), now),
            Verdict::Deny { rule: Some(3) }
        );
        assert!(matches!(
            policy.decide(&call("notes", "other", "alice", &hints), now),
            Verdict::RequireApproval { rule: 2, .. }
        ));
    }

    #[test]
    fn require_approval_outranks_rate_limit_and_allow_and_counts_nothing() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"allow\"\n[[rule]]\naction = \"rate_limit\"\nlimit = 1\nwindow_secs = 60\n\
             [[rule]]\naction = \"require_approval\"\nprincipal = \"bob\"\ntimeout_secs = 9\non_expiry = \"approve\"\n",
        ));
        let hints = write();
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(
                policy.decide(&call("notes", "t", "bob", &hints), now),
                Verdict::RequireApproval {
                    rule: 2,
                    timeout: Duration::from_secs(9),
                    on_expiry: Expiry::Approve
                }
            );
        }
        // Bob's parked calls used none of the rate limit, and his quota is
        // his own.
        let alice = call("notes", "t", "alice", &hints);
        assert_eq!(policy.decide(&alice, now), Verdict::Allow { rule: Some(1) });
        assert!(matches!(
            policy.decide(&alice, now),
            Verdict::RateLimited { rule: 1, .. }
        ));
    }

    #[test]
    fn rate_limit_outranks_allow() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"allow\"\n[[rule]]\naction = \"rate_limit\"\nlimit = 1\nwindow_secs = 10\n",
        ));
        let hints = write();
        let now = Instant::now();
        let scope = call("notes", "t", "alice", &hints);
        assert_eq!(policy.decide(&scope, now), Verdict::Allow { rule: Some(1) });
        assert_eq!(
            policy.decide(&scope, now + Duration::from_secs(4)),
            Verdict::RateLimited {
                rule: 1,
                limit: 1,
                window: Duration::from_secs(10),
                retry_after: Duration::from_secs(6)
            }
        );
    }

    #[test]
    fn rate_limit_counts_allowed_calls_and_recovers_after_the_window() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"rate_limit\"\nupstream = \"notes\"\ntool = \"forecast\"\nlimit = 2\nwindow_secs = 60\n",
        ));
        let hints = write();
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let scope = call("notes", "forecast", "alice", &hints);
        assert_eq!(
            policy.decide(&scope, at(0)),
            Verdict::Allow { rule: Some(0) }
        );
        assert_eq!(
            policy.decide(&scope, at(10)),
            Verdict::Allow { rule: Some(0) }
        );
        // Refused calls are not counted: however many, the window frees up
        // when the first counted call is 60 s old.
        for secs in [20, 30, 59] {
            assert_eq!(
                policy.decide(&scope, at(secs)),
                Verdict::RateLimited {
                    rule: 0,
                    limit: 2,
                    window: Duration::from_secs(60),
                    retry_after: Duration::from_secs(60 - secs)
                }
            );
        }
        assert_eq!(
            policy.decide(&scope, at(60)),
            Verdict::Allow { rule: Some(0) }
        );
        assert_eq!(
            policy.decide(&scope, at(61)),
            Verdict::RateLimited {
                rule: 0,
                limit: 2,
                window: Duration::from_secs(60),
                retry_after: Duration::from_secs(9)
            }
        );
        // Another principal, and a tool outside the rule, are not limited.
        assert_eq!(
            policy.decide(&call("notes", "forecast", "bob", &hints), at(61)),
            Verdict::Allow { rule: Some(0) }
        );
        assert_eq!(
            policy.decide(&call("notes", "other", "alice", &hints), at(61)),
            Verdict::Allow { rule: None }
        );
        // Long after: the whole quota again.
        assert_eq!(
            policy.decide(&scope, at(500)),
            Verdict::Allow { rule: Some(0) }
        );
        assert_eq!(
            policy.decide(&scope, at(500)),
            Verdict::Allow { rule: Some(0) }
        );
        assert!(matches!(
            policy.decide(&scope, at(500)),
            Verdict::RateLimited { .. }
        ));
    }

    #[test]
    fn every_matching_rate_limit_must_have_room_and_all_count() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"rate_limit\"\nlimit = 3\nwindow_secs = 100\n\
             [[rule]]\naction = \"rate_limit\"\ntool = \"t\"\nlimit = 1\nwindow_secs = 10\n",
        ));
        let hints = write();
        let start = Instant::now();
        let at = |secs: u64| start + Duration::from_secs(secs);
        let t = call("notes", "t", "alice", &hints);
        let u = call("notes", "u", "alice", &hints);
        assert_eq!(policy.decide(&t, at(0)), Verdict::Allow { rule: Some(0) });
        // rule[1] is full: refused, and rule[0] does not count it.
        assert_eq!(
            policy.decide(&t, at(1)),
            Verdict::RateLimited {
                rule: 1,
                limit: 1,
                window: Duration::from_secs(10),
                retry_after: Duration::from_secs(9)
            }
        );
        assert_eq!(policy.decide(&u, at(2)), Verdict::Allow { rule: Some(0) });
        assert_eq!(policy.decide(&t, at(10)), Verdict::Allow { rule: Some(0) });
        // rule[0] has counted 0, 2 and 10: full until 100; rule[1] until 20.
        // The verdict names the one that frees up last.
        assert_eq!(
            policy.decide(&t, at(11)),
            Verdict::RateLimited {
                rule: 0,
                limit: 3,
                window: Duration::from_secs(100),
                retry_after: Duration::from_secs(89)
            }
        );
    }

    #[test]
    fn decisions_are_shared_across_threads() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"rate_limit\"\nlimit = 50\nwindow_secs = 60\n",
        ));
        let hints = write();
        let now = Instant::now();
        let allowed = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..40)
                            .filter(|_| {
                                matches!(
                                    policy.decide(&call("notes", "t", "alice", &hints), now),
                                    Verdict::Allow { .. }
                                )
                            })
                            .count()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .sum::<usize>()
        });
        assert_eq!(allowed, 50);
    }

    #[test]
    fn rules_are_described_for_logs_and_refusals() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"deny\"\ntool = \"delete_*\"\nwhen = [\"destructive\"]\n\
             [[rule]]\naction = \"rate_limit\"\nupstream = \"notes\"\ntool = \"forecast\"\nlimit = 2\nwindow_secs = 600\n\
             [[rule]]\naction = \"require_approval\"\nprincipal = \"bob\"\nwhen = [\"open_world\", \"not read_only\"]\n\
             timeout_secs = 60\non_expiry = \"approve\"\n\
             [[rule]]\naction = \"allow\"\n",
        ));
        assert_eq!(
            policy.describe(0),
            "rule[0] (deny delete_* when destructive)"
        );
        assert_eq!(
            policy.describe(1),
            "rule[1] (rate_limit notes__forecast, 2 per 600 s)"
        );
        assert_eq!(
            policy.describe(2),
            "rule[2] (require_approval * when open_world and not read_only for bob, expires after 60 s as approve)"
        );
        assert_eq!(policy.describe(3), "rule[3] (allow *)");
        assert_eq!(policy.describe(9), "rule[9]");
    }

    /// One earlier call of a test's history.
    type EarlierInTest<'a> = (
        &'a str,
        &'a str,
        &'a str,
        (bool, bool, bool, bool),
        u64,
        bool,
    );

    /// A session's history of `calls`: (id, upstream, tool, hints as
    /// (read_only, destructive, idempotent, open_world), seconds before
    /// the read, tainted), read at 1,000 s past the epoch.
    fn history(calls: &[EarlierInTest<'_>]) -> History {
        use crate::session::{HeldHints, HistoryEvent, Taint};
        let now_ms = 1_000_000;
        let mut events = Vec::new();
        for (id, upstream, tool, hints_of, ago, tainted) in calls {
            let effective = hints(hints_of.0, hints_of.1, hints_of.2, hints_of.3);
            let at = now_ms - ago * 1_000;
            events.push((
                at,
                HistoryEvent::Called {
                    id: (*id).to_owned(),
                    upstream: (*upstream).to_owned(),
                    tool: (*tool).to_owned(),
                    hints: HeldHints::of(&effective),
                },
            ));
            events.push((
                at,
                HistoryEvent::Finished {
                    id: (*id).to_owned(),
                    outcome: crate::log::Outcome::Completed,
                    taint: tainted.then_some(Taint::UntrustedOpenWorld),
                },
            ));
        }
        History::fold(now_ms, events)
    }

    /// An open-world read: read-only, idempotent, open world.
    const OPEN_READ: (bool, bool, bool, bool) = (true, false, true, true);
    /// A write that reaches the outside world.
    const OPEN_WRITE: (bool, bool, bool, bool) = (false, false, false, true);

    const TRIFECTA: &str = "[[rule]]\naction = \"require_approval\"\n\
                            when = [\"open_world\", \"not read_only\"]\nafter = [\"open_world\"]\n";

    #[test]
    fn a_rule_with_after_fires_only_once_the_session_made_such_a_call() {
        let policy = Policy::new(&config(TRIFECTA));
        assert!(policy.looks_back());
        let send = hints(OPEN_WRITE.0, OPEN_WRITE.1, OPEN_WRITE.2, OPEN_WRITE.3);
        let now = Instant::now();
        let fresh = History::default();
        let in_session = |history| CallScope {
            history: Lookback::Known(history),
            ..call("web", "post", "alice", &send)
        };
        assert!(policy.needs_history(&in_session(&fresh)));
        assert_eq!(
            policy.decide(&in_session(&fresh), now),
            Verdict::Allow { rule: None }
        );
        // A closed-world write earlier does not make it fire.
        let closed = history(&[("w", "notes", "append", WRITE, 5, false)]);
        assert_eq!(
            policy.decide(&in_session(&closed), now),
            Verdict::Allow { rule: None }
        );
        let after_read = history(&[
            ("w", "notes", "append", WRITE, 9, false),
            ("r", "web", "fetch", OPEN_READ, 5, false),
        ]);
        assert!(matches!(
            policy.decide(&in_session(&after_read), now),
            Verdict::RequireApproval { rule: 0, .. }
        ));
        assert_eq!(
            policy.earlier(0, &after_read),
            vec![EarlierCall {
                id: "r".to_owned(),
                upstream: "web".to_owned(),
                tool: "fetch".to_owned(),
            }]
        );
        // A read is not what the rule guards: its history is not read.
        let read = hints(OPEN_READ.0, OPEN_READ.1, OPEN_READ.2, OPEN_READ.3);
        assert!(!policy.needs_history(&call("web", "fetch", "alice", &read)));
    }

    #[test]
    fn an_unknown_history_fails_closed_for_guards_and_open_for_allows() {
        let policy = Policy::new(&config(&format!(
            "[policy]\ndefault = \"deny\"\n{TRIFECTA}\
             [[rule]]\naction = \"allow\"\ntool = \"fetch\"\nafter = [\"tool:list_*\"]\n"
        )));
        let send = hints(OPEN_WRITE.0, OPEN_WRITE.1, OPEN_WRITE.2, OPEN_WRITE.3);
        let now = Instant::now();
        assert!(matches!(
            policy.decide(&call("web", "post", "alice", &send), now),
            Verdict::RequireApproval { rule: 0, .. }
        ));
        let read = hints(OPEN_READ.0, OPEN_READ.1, OPEN_READ.2, OPEN_READ.3);
        assert_eq!(
            policy.decide(&call("web", "fetch", "alice", &read), now),
            Verdict::Deny { rule: None }
        );
        let listed = history(&[("l", "web", "list_pages", OPEN_READ, 1, false)]);
        assert_eq!(
            policy.decide(
                &CallScope {
                    history: Lookback::Known(&listed),
                    ..call("web", "fetch", "alice", &read)
                },
                now
            ),
            Verdict::Allow { rule: Some(1) }
        );
    }

    #[test]
    fn every_after_condition_must_be_met_each_by_some_earlier_call() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"deny\"\n\
             after = [\"upstream:web and tainted\", \"tool:notes__read*\"]\n",
        ));
        let hints = write();
        let now = Instant::now();
        let decide = |history: &History| {
            policy.decide(
                &CallScope {
                    history: Lookback::Known(history),
                    ..call("notes", "append", "alice", &hints)
                },
                now,
            )
        };
        let untainted = history(&[
            ("r", "web", "fetch", OPEN_READ, 3, false),
            ("n", "notes", "read_note", OPEN_READ, 2, false),
        ]);
        assert_eq!(decide(&untainted), Verdict::Allow { rule: None });
        let tainted = history(&[
            ("r", "web", "fetch", OPEN_READ, 3, true),
            ("x", "web", "fetch", OPEN_READ, 2, true),
        ]);
        assert_eq!(decide(&tainted), Verdict::Allow { rule: None });
        let both = history(&[
            ("r", "web", "fetch", OPEN_READ, 4, true),
            ("x", "web", "fetch", OPEN_READ, 3, true),
            ("n", "notes", "read_note", OPEN_READ, 2, false),
        ]);
        assert_eq!(decide(&both), Verdict::Deny { rule: Some(0) });
        let named: Vec<String> = policy
            .earlier(0, &both)
            .into_iter()
            .map(|call| call.id)
            .collect();
        // The latest call meeting each condition, oldest first.
        assert_eq!(named, ["x", "n"]);
    }

    #[test]
    fn a_count_rule_trips_on_the_call_past_its_number_within_its_window() {
        let policy = Policy::new(&config(
            "[[rule]]\naction = \"deny\"\nwhen = [\"destructive\"]\n\
             count = { of = \"destructive\", more_than = 2, within_secs = 60 }\n",
        ));
        let delete = write();
        let now = Instant::now();
        let decide = |history: &History| {
            policy.decide(
                &CallScope {
                    history: Lookback::Known(history),
                    ..call("notes", "delete", "alice", &delete)
                },
                now,
            )
        };
        let one = history(&[("a", "notes", "delete", WRITE, 10, false)]);
        assert_eq!(decide(&one), Verdict::Allow { rule: None });
        let two = history(&[
            ("a", "notes", "delete", WRITE, 10, false),
            ("r", "web", "fetch", OPEN_READ, 8, false),
            ("b", "notes", "delete", WRITE, 5, false),
        ]);
        assert_eq!(decide(&two), Verdict::Deny { rule: Some(0) });
        let named: Vec<String> = policy
            .earlier(0, &two)
            .into_iter()
            .map(|call| call.id)
            .collect();
        assert_eq!(named, ["a", "b"]);
        let aged = history(&[
            ("a", "notes", "delete", WRITE, 61, false),
            ("b", "notes", "delete", WRITE, 5, false),
        ]);
        assert_eq!(decide(&aged), Verdict::Allow { rule: None });
        assert_eq!(
            policy.describe(0),
            "rule[0] (deny * when destructive after 2 destructive calls within 60 s)"
        );
    }

    #[test]
    fn look_back_rules_are_described_with_their_conditions() {
        let policy = Policy::new(&config(&format!(
            "{TRIFECTA}[[rule]]\naction = \"deny\"\nafter = [\"upstream:web and tainted\", \"*\"]\n\
             count = {{ more_than = 5, within_secs = 10 }}\n"
        )));
        assert_eq!(
            policy.describe(0),
            "rule[0] (require_approval * when open_world and not read_only after open_world, \
             expires after 300 s as deny)"
        );
        assert_eq!(
            policy.describe(1),
            "rule[1] (deny * after upstream:web and tainted, *, 5 calls within 10 s)"
        );
        let none = Policy::new(&config("[[rule]]\naction = \"deny\"\n"));
        assert!(!none.looks_back());
    }
}

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

/// The `tool` globs of `config`'s rules, asserts and redacts (other than `*`) that
/// match no tool of the upstreams they name, among `tools` (each
/// upstream's name and its own tool names), in config order:
/// ``rule[0].tool `delte_note` matches no tool of the upstreams `notes`
/// names``. Said as an event at start, since
/// a typo there makes a rule that never fires.
pub fn unmatched_tool_globs<'a>(
    config: &Config,
    tools: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> Vec<String> {
    let scopes =
        config
            .rules
            .iter()
            .enumerate()
            .map(|(index, rule)| (format!("rule[{index}]"), &rule.upstream, &rule.tool))
            .chain(config.asserts.iter().enumerate().map(|(index, assert)| {
                (format!("assert[{index}]"), &assert.upstream, &assert.tool)
            }))
            .chain(config.redacts.iter().enumerate().map(|(index, redact)| {
                (format!("redact[{index}]"), &redact.upstream, &redact.tool)
            }));
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
                "{path}.tool `{}` matches no tool of the upstreams `{}` names",
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

    fn matches(&self, rule: &RuleConfig, call: &CallScope<'_>) -> bool {
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
    /// SCOPE` (when it names one), and the
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
}

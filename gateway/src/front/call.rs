//! One `tools/call`, as the named steps of the crate's "A call": resolve
//! the name, check drift, decide, record the decision, park for an
//! approver, forward through the replay-safe client, finish with the
//! outcome. Each step either passes the call on or ends it with the
//! client's answer.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use mcp_hints::client::{CallError, Outcome as CallOutcome, ToolCall};
use mcp_hints_core::{escape, name};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, MetaObject, RequestMetaObject,
    ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::catalogue::Listed;
use super::{Front, Principal};
use crate::approval::{Approvals, Drift, DriftDiff, DriftLock, Parked, Resolution};
use crate::config::{RateLimitFallback, SessionPer};
use crate::log::{self, AuditLog, Decision, Durability, Entry, Outcome, Phase};
use crate::metrics::{CallOutcome as MeasuredOutcome, Metrics};
use crate::policy::{CallScope, Expiry, Lookback, Ruling, Verdict};
use crate::redact::{Checked, Withheld};
use crate::session::{
    EarlierCall, HeldHints, History, HistoryEvent, SESSION_META_KEY, SessionKey, SessionKind,
    Taint, session_name_problem,
};
use crate::state::{StateError, Window};
use crate::upstream::Upstream;
use crate::{Error, defaults, namespaced, split};

/// What the client gets when a call ends: a tool result (refusals
/// included, as tool errors) or a JSON-RPC error.
type Answer = Result<CallToolResult, ErrorData>;

/// A step's result: `Ok` passes the call on to the next step, `Err` ends
/// it with that answer.
type Step<T> = Result<T, Box<Answer>>;

/// The answer that ends a call with the tool result `result`.
fn end(result: CallToolResult) -> Box<Answer> {
    Box::new(Ok(result))
}

/// What a call's steps read of its request besides its params: whether
/// its client withdrew it, its `_meta`, and, over HTTP, the request's head
/// (its principal, set by the authentication layer, and its
/// `Mcp-Session-Id`). Made from rmcp's [`RequestContext`] for the requests
/// rmcp serves, and by [`super::stateless`] for those it answers itself.
pub(super) struct CallContext<'a> {
    /// Cancelled when the client withdraws the request
    /// (`notifications/cancelled`, a closed request stream at 2026-07-28,
    /// the end of its session).
    pub(super) cancelled: &'a CancellationToken,
    /// The request's `_meta`.
    pub(super) meta: &'a RequestMetaObject,
    /// The HTTP request's head; none over stdio.
    pub(super) http: Option<&'a http::request::Parts>,
}

impl<'a> From<&'a RequestContext<RoleServer>> for CallContext<'a> {
    fn from(context: &'a RequestContext<RoleServer>) -> CallContext<'a> {
        CallContext {
            cancelled: &context.ct,
            meta: &context.meta,
            http: context.extensions.get::<http::request::Parts>(),
        }
    }
}

/// What every audit entry of one call shares.
#[derive(Clone)]
struct CallRecord {
    /// The replica deciding it, `[gateway] replica`.
    replica: String,
    id: String,
    principal: String,
    upstream: String,
    tool: String,
    hints: Value,
    arguments_sha256: String,
    arguments: Option<Value>,
    /// Its session, when a rule looks back (none is kept otherwise).
    session: Option<SessionKey>,
}

impl CallRecord {
    fn entry(
        &self,
        phase: Phase,
        decision: Decision,
        rule: Option<String>,
        outcome: Option<Outcome>,
        attempts: Option<u32>,
    ) -> Entry {
        self.clone()
            .into_entry(phase, decision, rule, outcome, attempts)
    }

    /// [`entry`](Self::entry) for a call's last entry: its parts are
    /// moved into it, not copied (the hints and the arguments are trees).
    fn into_entry(
        self,
        phase: Phase,
        decision: Decision,
        rule: Option<String>,
        outcome: Option<Outcome>,
        attempts: Option<u32>,
    ) -> Entry {
        Entry {
            seq: None,
            prev: None,
            time: log::now(),
            replica: Some(self.replica),
            id: self.id,
            principal: self.principal,
            upstream: self.upstream,
            tool: self.tool,
            decision,
            rule,
            hints: self.hints,
            arguments_sha256: self.arguments_sha256,
            arguments: self.arguments,
            outcome,
            attempts,
            degraded: None,
            by: None,
            earlier: None,
            session: self.session.map(|key| key.as_str().to_owned()),
            redacted: None,
            withheld: None,
            phase,
        }
    }
}

/// One call of a served tool on its way through the steps after
/// [`Front::resolve`].
struct Call {
    /// The namespaced name the client called.
    name: String,
    listed: Arc<Listed>,
    record: CallRecord,
    arguments: JsonObject,
    /// The scopes of the caller's OAuth token, for the rules that name
    /// one; none for a `[[client]]` token and stdio.
    scopes: Arc<[String]>,
}

impl Call {
    /// Whether the call can neither change anything nor reach anything
    /// outside its upstream, so that its `decided` entry may be synced
    /// while it runs instead of before ([`Front::record_syncing`]): its
    /// upstream is trusted (the spec's `ToolAnnotations` are only hints
    /// from any other, as for resends), and its tool is read-only and not
    /// open-world, as the upstream declared or the operator asserted
    /// (`[[assert]]`), never by default. An open-world read could carry
    /// its arguments out of the gateway; it is synced first, as writes
    /// are.
    fn changes_nothing(&self) -> bool {
        use mcp_hints::{Hint, Provenance};
        let hints = &self.listed.hints;
        let (read_only, provenance) = hints.get(Hint::ReadOnly);
        self.listed.upstream.trusted()
            && read_only
            && matches!(provenance, Provenance::Declared | Provenance::Asserted)
            && !hints.holds(Hint::OpenWorld)
    }
}

/// The policy's verdict on a call, with the audit log's words for it.
struct Decided {
    verdict: Verdict,
    decision: Decision,
    /// The rule that decided, as [`Policy::describe`](crate::policy::Policy::describe)
    /// names it; `None`: the default.
    rule: Option<String>,
    /// Why the shared state could not count the call or read its
    /// session's history, when it could not: the audit entry's
    /// `degraded`.
    degraded: Option<String>,
    /// The earlier calls that made a rule that looks back decide: the
    /// audit entry's `earlier`.
    earlier: Option<Vec<EarlierCall>>,
}

/// Why, how long and under which rule a call waits for an approver.
struct Parking {
    /// For the approver: the rule that fired, or what drifted.
    reason: String,
    timeout: Duration,
    on_expiry: Expiry,
    /// The rule's text for the audit entries; `None` for drift.
    rule: Option<String>,
    /// For drift: how the tool differs from its approved fingerprint,
    /// shown to the approver.
    drift: Option<DriftDiff>,
}

/// A tool error (`isError: true`) with `text`, and the gateway's decision
/// under `_meta["mcp-hints/gateway"]` for programs.
fn refusal(text: String, detail: Value) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = MetaObject::default();
    meta.0.insert("mcp-hints/gateway".to_owned(), detail);
    result.meta = Some(meta);
    result
}

impl Front {
    /// One `tools/call`, in the order the crate documentation gives, one
    /// step after another; `context` is its request's, whose cancellation
    /// (the client withdrew the request, or its session ended) abandons a
    /// parked call.
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        principal: &Principal,
        context: &CallContext<'_>,
    ) -> Answer {
        // While this is the only call, a `decided` entry synced before
        // its call goes on is synced without a hand-off to the log's sync
        // thread.
        let _in_flight = self.gateway.log.call_started();
        match self.steps(request, principal, context).await {
            Ok(answer) => answer,
            Err(ended) => *ended,
        }
    }

    /// The steps in order: each `?` is where a call can end.
    async fn steps(
        &self,
        request: CallToolRequestParams,
        principal: &Principal,
        context: &CallContext<'_>,
    ) -> Step<Answer> {
        let mut call = self.resolve(request, &principal.name).await?;
        call.scopes = principal.scopes.clone();
        if self.gateway.policy.looks_back() {
            call.record.session = Some(self.session(&principal.name, context).map_err(Box::new)?);
        }
        // Boxed, like every wait for an approver below: the common path's
        // future stays small, and rmcp moves it whole into each request's
        // task.
        if self.gateway.drift {
            Box::pin(self.drift(&call, context)).await?;
        }
        let decided = self.decide(&call).await;
        if matches!(decided.verdict, Verdict::Allow { .. }) && call.changes_nothing() {
            // Its sync runs beside the upstream's work; the answer waits
            // for it in `forward`.
            let syncing = self.record_syncing(&call, &decided).await?;
            return Ok(self
                .forward(call, decided.decision, decided.rule, Some(syncing))
                .await);
        }
        self.record(&call, &decided).await?;
        let decision = match decided.verdict {
            Verdict::Allow { .. } => decided.decision,
            Verdict::Deny { .. } | Verdict::RateLimited { .. } => {
                return Err(end(self.refuse(&call, &decided).await));
            }
            Verdict::RequireApproval {
                rule,
                timeout,
                on_expiry,
            } => {
                Box::pin(self.approval(&call, &decided, rule, timeout, on_expiry, context)).await?
            }
        };
        Ok(self.forward(call, decision, decided.rule, None).await)
    }

    /// Resolve: the namespaced name to a served tool and the call's record
    /// under a new call id. Guarantees nothing is logged for a name that
    /// names no upstream's tool (a JSON-RPC invalid-params error naming
    /// it); a tool of an upstream that never listed its tools is refused
    /// as unavailable, and that refusal is logged.
    async fn resolve(&self, request: CallToolRequestParams, principal: &str) -> Step<Call> {
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let catalogue = self.gateway.catalogue();
        let Some(listed) = catalogue.by_name.get(&name).cloned() else {
            if let Some(refused) = self
                .unavailable_upstream(&name, principal, &arguments)
                .await
            {
                return Err(end(refused));
            }
            return Err(Box::new(Err(ErrorData::from(Error::UnknownTool { name }))));
        };
        let hints = listed.logged_hints.clone();
        let record = self.record_of(
            principal,
            &listed.upstream.name,
            &listed.tool,
            hints,
            &arguments,
        );
        Ok(Call {
            name,
            listed,
            record,
            arguments,
            scopes: Arc::from([]),
        })
    }

    /// The session of a call of `principal` ([`crate::session`]): with
    /// `[session] per = "principal"` the principal's own; else the
    /// transport's (a stdio front's, or `Mcp-Session-Id`), else the one
    /// the client names in `_meta["mcp-hints/session"]`, else the
    /// principal's own.
    ///
    /// # Errors
    ///
    /// A JSON-RPC invalid-params error ([`Error::BadSessionName`]) when
    /// the client names a session that is not a string of 1 to 128 visible
    /// ASCII characters.
    fn session(&self, principal: &str, context: &CallContext<'_>) -> Result<SessionKey, Answer> {
        if self.gateway.config.session.per == SessionPer::Principal {
            return Ok(SessionKey::new(SessionKind::Principal, principal, ""));
        }
        let transport = self.stdio_session.clone().or_else(|| {
            context
                .http
                .and_then(|parts| parts.headers.get("mcp-session-id"))
                .and_then(|id| id.to_str().ok())
                .map(str::to_owned)
        });
        if let Some(id) = transport {
            return Ok(SessionKey::new(SessionKind::Transport, principal, &id));
        }
        let bad = |problem: String| Err(Err(ErrorData::from(Error::BadSessionName { problem })));
        match context.meta.get(SESSION_META_KEY) {
            None => Ok(SessionKey::new(SessionKind::Principal, principal, "")),
            Some(Value::String(name)) => match session_name_problem(name) {
                None => Ok(SessionKey::new(SessionKind::Named, principal, name)),
                Some(problem) => bad(problem),
            },
            Some(other) => bad(format!("is {}", mcp_hints::hints::json_type(other))),
        }
    }

    /// The refusal of a call of `name` whose upstream never listed its
    /// tools (its calls are unavailable, not unknown), both entries
    /// written; `None` when `name` names no such upstream.
    async fn unavailable_upstream(
        &self,
        name: &str,
        principal: &str,
        arguments: &JsonObject,
    ) -> Option<CallToolResult> {
        let (prefix, tool) = split(name)?;
        let upstream = self.gateway.upstreams.iter().find(|u| u.name == prefix)?;
        let reason = upstream.unavailable()?;
        // The name is the client's: only one the spec allows is logged;
        // any other is an unknown tool.
        if name::problem(tool).is_some() {
            return None;
        }
        // Its hints are unknown; the refusal is a decision all the same,
        // and logged as one.
        let record = self.record_of(principal, prefix, tool, Value::Null, arguments);
        let entry = record.entry(Phase::Decided, Decision::Unavailable, None, None, None);
        if let Err(error) = self.gateway.record(&entry).await {
            return Some(log_failed(&error));
        }
        let _ = self
            .finish(
                &record,
                Decision::Unavailable,
                None,
                Outcome::Unavailable,
                None,
            )
            .await;
        Some(refusal(
            format!(
                "upstream `{prefix}` is unavailable ({}); its tools cannot be called until it is \
                 reachable",
                mcp_hints_core::escape::one_line(&reason)
            ),
            json!({ "outcome": "unavailable", "upstream": prefix }),
        ))
    }

    /// What every audit entry of one call shares, under a new call id.
    fn record_of(
        &self,
        principal: &str,
        upstream: &str,
        tool: &str,
        hints: Value,
        arguments: &JsonObject,
    ) -> CallRecord {
        CallRecord {
            replica: self.gateway.config.gateway.replica.clone(),
            id: uuid::Uuid::new_v4().to_string(),
            principal: principal.to_owned(),
            upstream: upstream.to_owned(),
            tool: tool.to_owned(),
            hints,
            arguments_sha256: log::arguments_digest(arguments),
            arguments: self
                .gateway
                .config
                .log
                .raw_arguments
                .then(|| Value::Object(arguments.clone())),
            session: None,
        }
    }

    /// Drift: a tool added or changed since the lock's approval is parked
    /// until an approver approves its new fingerprint, which goes into the
    /// lock. Guarantees a drifted tool goes on only once its fingerprint
    /// is approved and written to the lock; every end is logged.
    async fn drift(&self, call: &Call, context: &CallContext<'_>) -> Step<()> {
        let name = call.name.as_str();
        let approved = match self.gateway.state.approved_tool(name).await {
            Ok(approved) => approved,
            Err(error) => return Err(end(self.drift_unknown(call, &error).await)),
        };
        let (what, changed) = match DriftLock::check(name, approved.as_ref(), &call.listed.pinned) {
            Drift::Approved => return Ok(()),
            Drift::New => (
                "the tool is new since the lock was approved".to_owned(),
                Vec::new(),
            ),
            Drift::Changed { what } => {
                (format!("changed since approval: {}", what.join(", ")), what)
            }
        };
        let diff = DriftDiff::between(
            approved.as_ref(),
            &call.listed.pinned,
            &call.listed.definition,
            changed,
        );
        let entry = call
            .record
            .entry(Phase::Decided, Decision::Drift, None, None, None);
        if let Err(error) = self.gateway.record(&entry).await {
            return Err(end(log_failed(&error)));
        }
        let (id, tool) = (&call.record.id, escape::shown(name));
        tracing::info!(
            call_id = %id,
            %tool,
            drift = %what,
            "call {id} of drifted tool `{tool}` is parked: {what}; to approve the new \
             definition: {}",
            self.gateway.approve_command(id)
        );
        let parking = Parking {
            reason: format!("drift: {what}"),
            timeout: defaults::DRIFT_APPROVAL_TIMEOUT,
            on_expiry: Expiry::Deny,
            rule: None,
            drift: Some(diff),
        };
        let resolution = self.park(call, &parking, context).await?;
        let decision = resolution.decision();
        if resolution.proceeds() {
            // Written off the runtime; the call goes on only once it is.
            let Err(error) = self
                .gateway
                .state
                .approve_tool(name, &call.listed.pinned)
                .await
            else {
                return Ok(());
            };
            let _ = self
                .finish(&call.record, decision, None, Outcome::Refused, None)
                .await;
            return Err(end(refusal(
                format!(
                    "`{}` was approved, but the lock could not be written ({}); it was not \
                     forwarded",
                    escape::shown(name),
                    mcp_hints_core::escape::one_line(&error.to_string())
                ),
                json!({ "decision": "drift" }),
            )));
        }
        if resolution == Resolution::Abandoned {
            return Err(end(refusal(
                format!(
                    "`{}` was abandoned (its client withdrew it) while it waited for an \
                     approver: {what}; it was not forwarded",
                    escape::shown(name)
                ),
                json!({ "decision": "abandoned", "drift": what }),
            )));
        }
        Err(end(refusal(
            format!(
                "`{}` cannot be called until an approver approves it ({decision}): {what}",
                escape::shown(name)
            ),
            json!({ "decision": "drift", "drift": what }),
        )))
    }

    /// The refusal of a call whose tool's approval cannot be read (the
    /// shared state is unreachable): drift guards, so it fails closed, its
    /// `decided` (decision `drift`, with `degraded`) and `finished` entries
    /// written.
    async fn drift_unknown(&self, call: &Call, error: &StateError) -> CallToolResult {
        let why = escape::one_line(&error.to_string()).into_owned();
        let mut entry = call
            .record
            .entry(Phase::Decided, Decision::Drift, None, None, None);
        entry.degraded = Some(format!("{why}; drift checks fail closed"));
        if let Err(error) = self.gateway.record(&entry).await {
            return log_failed(&error);
        }
        let _ = self
            .finish(&call.record, Decision::Drift, None, Outcome::Refused, None)
            .await;
        refusal(
            format!(
                "`{}` refused by the gateway: its approved definition cannot be read ({why}); it \
                 was not forwarded",
                escape::shown(&call.name)
            ),
            json!({ "decision": "drift", "degraded": why }),
        )
    }

    /// Decide: the policy's verdict on the call, for its principal now.
    /// Guarantees nothing: the verdict is acted on only once
    /// [`record`](Front::record) has written it.
    async fn decide(&self, call: &Call) -> Decided {
        let policy = &self.gateway.policy;
        let mut scope = CallScope {
            upstream: &call.listed.upstream.name,
            tool: &call.listed.tool,
            principal: &call.record.principal,
            scopes: &call.scopes,
            hints: &call.listed.hints,
            history: Lookback::Unknown,
        };
        let mut degraded = Vec::new();
        let history: Option<History> = match &call.record.session {
            Some(session) if policy.needs_history(&scope) => {
                match self.gateway.state.history(session.as_str()).await {
                    Ok(history) => Some(history),
                    Err(error) => {
                        degraded.push(format!(
                            "{}; rules that look back fail closed",
                            escape::one_line(&error.to_string())
                        ));
                        None
                    }
                }
            }
            _ => None,
        };
        if let Some(history) = &history {
            scope.history = Lookback::Known(history);
        }
        let verdict = match policy.rule(&scope) {
            Ruling::Decided(verdict) => verdict,
            Ruling::Count(rules) => {
                let windows = policy.windows(&rules);
                let (verdict, count_degraded) = self.count(&call.record.principal, &windows).await;
                degraded.extend(count_degraded);
                verdict
            }
        };
        let (decision, rule) = match &verdict {
            Verdict::Allow { rule } => (Decision::Allow, *rule),
            Verdict::Deny { rule } => (Decision::Deny, *rule),
            Verdict::RequireApproval { rule, .. } => (Decision::RequireApproval, Some(*rule)),
            Verdict::RateLimited { rule, .. } => (Decision::RateLimited, Some(*rule)),
        };
        let earlier = rule
            .zip(history.as_ref())
            .map(|(rule, history)| policy.earlier(rule, history))
            .filter(|earlier| !earlier.is_empty());
        Decided {
            verdict,
            decision,
            rule: rule.map(|rule| policy.describe(rule)),
            degraded: (!degraded.is_empty()).then(|| degraded.join("; ")),
            earlier,
        }
    }

    /// A call counted against `windows` in the shared state; while that
    /// cannot be reached, refused as rate limited or counted in this
    /// replica alone (`[state] rate_limit_fallback`), with why.
    async fn count(&self, principal: &str, windows: &[Window<'_>]) -> (Verdict, Option<String>) {
        let policy = &self.gateway.policy;
        let error = match self.gateway.state.count(principal, windows).await {
            Ok(counted) => return (policy.counted(windows, counted), None),
            Err(error) => escape::one_line(&error.to_string()).into_owned(),
        };
        match self.gateway.config.state.rate_limit_fallback {
            RateLimitFallback::Local => {
                let counted = self.gateway.local_windows.count_at(
                    principal,
                    windows,
                    std::time::Instant::now(),
                );
                let degraded = format!("{error}; counted in this replica alone");
                (policy.counted(windows, counted), Some(degraded))
            }
            RateLimitFallback::Deny => {
                let first = windows[0];
                let verdict = Verdict::RateLimited {
                    rule: first.rule,
                    limit: first.limit,
                    window: first.window,
                    retry_after: Duration::ZERO,
                };
                (verdict, Some(format!("{error}; rate limits fail closed")))
            }
        }
    }

    /// Record: the `decided` entry, written and synced before anything
    /// goes on. Guarantees no entry, no call: a log that cannot be written
    /// ends the call refused, with nothing forwarded.
    async fn record(&self, call: &Call, decided: &Decided) -> Step<()> {
        self.gateway
            .record(&decided_entry(call, decided))
            .await
            .map_err(|error| end(log_failed(&error)))
    }

    /// Record, for an allowed call that changes nothing
    /// ([`Call::changes_nothing`]): the `decided` entry written before the
    /// call goes on, its sync asked for now and waited for before the
    /// answer goes back ([`Front::forward`]). Guarantees no entry, no
    /// call, as [`Front::record`] does, and no answer before its entry is
    /// on disk; while the log's syncs are failing, the entry is synced
    /// first and the call refused when that fails, so that only the first
    /// call of an outage goes upstream unrecorded on disk.
    async fn record_syncing(&self, call: &Call, decided: &Decided) -> Step<log::Syncing> {
        self.gateway
            .log
            .record_syncing(&decided_entry(call, decided))
            .await
            .map_err(|error| end(log_failed(&Error::Log(error))))
    }

    /// The refusal of a call the policy denied or rate-limited, its
    /// `finished` entry written; nothing is forwarded.
    async fn refuse(&self, call: &Call, decided: &Decided) -> CallToolResult {
        let name = escape::shown(&call.name);
        let rule_text = &decided.rule;
        let _ = self
            .finish(
                &call.record,
                decided.decision,
                rule_text.clone(),
                Outcome::Refused,
                None,
            )
            .await;
        // Refused because nothing could be counted (with a local fallback
        // the replica's own window was full: the usual words).
        let fails_closed = self.gateway.config.state.rate_limit_fallback == RateLimitFallback::Deny;
        if let (Some(degraded), Verdict::RateLimited { rule, .. }, true) =
            (&decided.degraded, decided.verdict, fails_closed)
        {
            return refusal(
                format!(
                    "`{name}` refused by the gateway's {}: its count cannot be kept now ({degraded}); \
                     it was not forwarded",
                    rule_text.as_deref().unwrap_or("rate limit"),
                ),
                json!({
                    "decision": "rate_limited",
                    "rule": rule,
                    "ruleText": rule_text,
                    "degraded": degraded,
                }),
            );
        }
        let rule = match decided.verdict {
            Verdict::RateLimited {
                rule,
                limit,
                window,
                retry_after,
            } => {
                let retry = retry_after.as_secs_f64().ceil().max(1.0);
                let calls = mcp_hints_core::escape::count(limit as usize, "call", "calls");
                return refusal(
                    format!(
                        "`{name}` refused by the gateway's {}: at most {calls} per {} s; \
                         retry after {retry} s; it was not forwarded",
                        rule_text.as_deref().unwrap_or("rate limit"),
                        window.as_secs()
                    ),
                    json!({
                        "decision": "rate_limited",
                        "rule": rule,
                        "ruleText": rule_text,
                        "retryAfterSecs": retry,
                    }),
                );
            }
            Verdict::Deny { rule } => rule,
            // Only a denial or a rate limit is refused here.
            Verdict::Allow { .. } | Verdict::RequireApproval { .. } => None,
        };
        let why = match rule_text {
            Some(rule) => format!("refused by the gateway's {rule}"),
            None => {
                "refused by the gateway: no rule allows it and `policy.default` is deny".to_owned()
            }
        };
        refusal(
            format!("`{name}` {why}; it was not forwarded"),
            json!({ "decision": "deny", "rule": rule, "ruleText": rule_text }),
        )
    }

    /// A `require_approval` rule's wait: parks the call and, when it is
    /// approved (or expires as approved), passes it on with the decision
    /// its `finished` entry names. Guarantees a call that was denied,
    /// expired as denied, or withdrawn by its client (while parked, or
    /// while its approval was being recorded) is not forwarded.
    async fn approval(
        &self,
        call: &Call,
        decided: &Decided,
        rule: usize,
        timeout: Duration,
        on_expiry: Expiry,
        context: &CallContext<'_>,
    ) -> Step<Decision> {
        let rule_text = &decided.rule;
        let name = escape::shown(&call.name);
        let id = &call.record.id;
        let principal = escape::shown(&call.record.principal);
        tracing::info!(
            call_id = %id,
            tool = %name,
            %principal,
            "call {id} of `{name}` by `{principal}` is parked for approval: {}",
            self.gateway.approve_command(id)
        );
        let parking = Parking {
            reason: approval_reason(rule_text.as_deref(), decided.earlier.as_deref()),
            timeout,
            on_expiry,
            rule: rule_text.clone(),
            drift: None,
        };
        let resolution = self.park(call, &parking, context).await?;
        let decision = resolution.decision();
        if !resolution.proceeds() {
            // How it ended, in the words of the refusal.
            let how = match &resolution {
                Resolution::Approved { by } => format!("was approved by {}", escape::shown(by)),
                Resolution::Denied { by } => format!("was denied by {}", escape::shown(by)),
                Resolution::Expired { .. } => format!(
                    "was not approved within {} s, so it expired and was denied",
                    timeout.as_secs()
                ),
                Resolution::Abandoned => "was withdrawn by its client".to_owned(),
                Resolution::Unavailable { reason } => {
                    format!("could not wait for an approver ({reason}), so it was denied")
                }
            };
            return Err(end(refusal(
                format!(
                    "`{name}` {how} under the gateway's {}; it was not forwarded",
                    rule_text.as_deref().unwrap_or("approval rule")
                ),
                json!({ "decision": decision, "rule": rule, "ruleText": rule_text }),
            )));
        }
        if context.cancelled.is_cancelled() {
            // Withdrawn while its approval was being recorded: an approved
            // call its client no longer waits for is not sent either.
            said_abandoned(id, &call.name);
            let _ = self
                .finish(
                    &call.record,
                    Decision::Abandoned,
                    rule_text.clone(),
                    Outcome::Refused,
                    None,
                )
                .await;
            return Err(end(refusal(
                format!("`{name}` was withdrawn by its client; it was not forwarded"),
                json!({ "decision": "abandoned", "rule": rule, "ruleText": rule_text }),
            )));
        }
        Ok(decision)
    }

    /// Park: holds the call for an approver until one decides it, it
    /// expires, or its client withdraws it, and records how it ended
    /// ([`record_resolution`](Front::record_resolution)). Guarantees every
    /// end is logged, a future dropped while it waits included (the guard
    /// in [`wait_for_approver`]).
    async fn park(
        &self,
        call: &Call,
        parking: &Parking,
        context: &CallContext<'_>,
    ) -> Step<Resolution> {
        let gateway = &self.gateway;
        let resolution = wait_for_approver(
            &gateway.approvals,
            &gateway.log,
            &gateway.metrics,
            &call.record,
            &call.arguments,
            parking,
            context.cancelled.cancelled(),
        )
        .await;
        self.record_resolution(call, &resolution, parking.rule.clone())
            .await?;
        Ok(resolution)
    }

    /// Records how a parked call ended: the entries
    /// [`resolution_entries`] gives, the `decided` one synced before the
    /// call goes on (a log that cannot be written ends it refused), and
    /// an abandoned call said as an event.
    async fn record_resolution(
        &self,
        call: &Call,
        resolution: &Resolution,
        rule: Option<String>,
    ) -> Step<()> {
        if *resolution == Resolution::Abandoned {
            said_abandoned(&call.record.id, &call.name);
        }
        let (decided, finished) = resolution_entries(&call.record, resolution, rule);
        if let Err(error) = self.gateway.record(&decided).await {
            return Err(end(log_failed(&error)));
        }
        if let Some(finished) = finished {
            let _ = self.write_finished(&finished).await;
        }
        Ok(())
    }

    /// Forward: sends the call through the upstream's replay-safe client
    /// and writes the `finished` entry. Guarantees a lost response that
    /// was not resent comes back as a tool error saying delivery is
    /// unknown, how often the call may have run, and what to read back.
    /// With `syncing` (a call that changes nothing, its `decided` entry's
    /// sync asked for by [`Front::record_syncing`]), no answer goes back
    /// before that sync: one that failed withholds the answer of a call
    /// that went upstream (outcome `withheld` when it ran) and refuses one
    /// that was never sent.
    async fn forward(
        &self,
        call: Call,
        decision: Decision,
        rule: Option<String>,
        syncing: Option<log::Syncing>,
    ) -> Answer {
        let Call {
            name,
            listed,
            record,
            arguments,
            ..
        } = call;
        let upstream = &listed.upstream;
        let client = match upstream.client() {
            Ok(client) => client,
            Err(reason) => {
                if let Some(syncing) = syncing
                    && let Err(error) = syncing.synced().await
                {
                    let _ = self
                        .finish(&record, decision, rule, Outcome::Refused, Some(0))
                        .await;
                    return Ok(log_failed(&Error::Log(error)));
                }
                let _ = self
                    .finish(&record, decision, rule, Outcome::Unavailable, Some(0))
                    .await;
                return Ok(unavailable(&name, &upstream.name, &reason.to_string()));
            }
        };
        if let Some(session) = &record.session {
            let called = HistoryEvent::Called {
                id: record.id.clone(),
                upstream: upstream.name.clone(),
                tool: listed.tool.clone(),
                hints: HeldHints::of(&listed.hints),
            };
            self.remember(session, &record.id, &called).await;
        }
        let sent = ToolCall::new(listed.tool.clone()).arguments(arguments);
        let started = std::time::Instant::now();
        // In a block of its own: the call's future borrows the record,
        // which its last entry takes.
        let (outcome, synced) = {
            // Boxed: the replay-safe client's future is kilobytes (its
            // retry and read-back states), and this one is moved whole
            // into each request's task.
            let mut call = Box::pin(crate::budget::with_principal(
                &record.principal,
                client.call_tool(sent),
            ));
            match syncing {
                Some(syncing) if syncing.is_callers() => {
                    // The one call running syncs on its own thread (no wake-up
                    // of the sync thread and back), once the upstream has its
                    // request: a first poll queues it, and yielding lets the
                    // task that writes it run first, so that the disk and the
                    // upstream work at once. That first poll leaves a waker
                    // that does nothing: an answer arriving while this
                    // thread waits on the disk would otherwise wake this
                    // task while it runs, and it would be queued and polled
                    // once more for nothing after the call (another worker
                    // woken to steal it). The poll after the sync leaves the
                    // task's own waker.
                    let first = call
                        .as_mut()
                        .poll(&mut Context::from_waker(std::task::Waker::noop()));
                    if first.is_pending() {
                        tokio::task::yield_now().await;
                    }
                    let synced = syncing.synced().await;
                    let outcome = match first {
                        Poll::Ready(outcome) => outcome,
                        Poll::Pending => call.await,
                    };
                    (outcome, Some(synced))
                }
                Some(syncing) => (call.await, Some(syncing.synced().await)),
                None => (call.await, None),
            }
        };
        let elapsed = started.elapsed();
        let measured = measured_outcome(&outcome);
        upstream.say_restarts(&client).await;
        let (result, outcome, attempts) = self.answer(&name, upstream, outcome);
        self.gateway
            .metrics
            .upstream_call(&upstream.name, measured, elapsed, attempts);
        let (mut result, mut outcome, checked) = self.redact(&name, &listed, result, outcome);
        // The `decided` entry is on disk before the answer goes back.
        let mut unsynced = None;
        if let Some(Err(error)) = synced {
            let error = Error::Log(error);
            if outcome == Outcome::Unavailable || attempts == 0 {
                // Never sent: refused, as a call whose entry could not be
                // written is.
                result = Ok(log_failed(&error));
            } else if outcome == Outcome::DeliveryUnknown {
                result = Ok(sync_failed(&error, "it may have run"));
            } else {
                result = Ok(sync_failed(&error, "the call ran"));
                outcome = Outcome::Withheld;
                unsynced = Some(format!(
                    "its decided entry could not be synced: {}",
                    escape::one_line(&error.to_string())
                ));
            }
        }
        if let Some(session) = &record.session {
            // Before the answer goes back: the client's next call must see
            // what this result brought into its context.
            let taint = if checked.matched() {
                Some(Taint::Redacted)
            } else {
                (!upstream.trusted() && listed.hints.holds(mcp_hints::Hint::OpenWorld))
                    .then_some(Taint::UntrustedOpenWorld)
            };
            let finished = HistoryEvent::Finished {
                id: record.id.clone(),
                outcome,
                taint,
            };
            self.remember(session, &record.id, &finished).await;
        }
        let mut finished = record.into_entry(
            Phase::Finished,
            decision,
            rule,
            Some(outcome),
            Some(attempts),
        );
        finished.withheld = unsynced.or_else(|| checked.withheld.as_ref().map(Withheld::reason));
        finished.redacted = (!checked.redacted.is_empty()).then_some(checked.redacted);
        if let Err(error) = self.write_finished(&finished).await {
            let error = error.to_string();
            // The call ran: its answer is the caller's. The missing entry
            // is said where the operator sees it.
            let (id, error) = (&finished.id, mcp_hints_core::escape::one_line(&error));
            tracing::error!(
                call_id = %id,
                %outcome,
                %error,
                "call {id} finished ({outcome}) but its entry could not be written: {error}"
            );
        }
        result
    }

    /// Adds `event` of call `id` to `session`'s history. One that cannot
    /// be added is said as an event, and the call goes on: a later call
    /// whose rules look back reads the same shared state, and fails closed
    /// while it is unreachable.
    async fn remember(&self, session: &SessionKey, id: &str, event: &HistoryEvent) {
        let limits = self.gateway.config.session.limits();
        if let Err(error) = self
            .gateway
            .state
            .record_history(session.as_str(), event, limits)
            .await
        {
            let error = escape::one_line(&error.to_string()).into_owned();
            tracing::warn!(
                call_id = %id,
                %error,
                "call {id} could not be added to its session's history: {error}"
            );
        }
    }

    /// The client's answer to what the replay-safe client made of the call
    /// of `name`, the outcome its `finished` entry records, and the
    /// attempts; an upstream found (un)reachable is republished as such.
    fn answer(
        &self,
        name: &str,
        upstream: &Upstream,
        outcome: Result<CallOutcome, CallError>,
    ) -> (Answer, Outcome, u32) {
        match outcome {
            Ok(CallOutcome::Completed(done)) => {
                if upstream.mark_available() {
                    // Its tools are no longer listed as unavailable.
                    self.gateway.republish();
                }
                let outcome = if done.result.is_error == Some(true) {
                    Outcome::ToolError
                } else {
                    Outcome::Completed
                };
                let mut result = done.result;
                // An upstream on a revision before 2026-07-28 leaves it out;
                // the gateway's clients may be on 2026-07-28, where it is
                // required (rmcp clears it again for older clients).
                result.result_type = Some(ResultType::COMPLETE);
                (Ok(result), outcome, done.attempts)
            }
            Ok(CallOutcome::DeliveryUnknown(lost)) => {
                let attempts = lost.attempts;
                let text = format!(
                    "{lost}. {}: read back before calling `{}` again",
                    may_have_run(attempts, lost.idempotency_key.is_some()),
                    escape::shown(name)
                );
                let detail = json!({
                    "outcome": "delivery_unknown",
                    "attempts": attempts,
                    "readBack": lost.verdict.reason,
                });
                (
                    Ok(refusal(text, detail)),
                    Outcome::DeliveryUnknown,
                    attempts,
                )
            }
            Err(CallError::Rejected {
                error, attempts, ..
            }) => (Err(error), Outcome::ToolError, attempts),
            Err(CallError::NotSent {
                attempts,
                last_error,
                ..
            }) => {
                // Read after "upstream `NAME` is unavailable (...)".
                let reason = format!("calls cannot be sent to it: {last_error}");
                upstream.mark_unavailable(reason.clone());
                self.gateway.republish();
                (
                    Ok(unavailable(name, &upstream.name, &reason)),
                    Outcome::Unavailable,
                    attempts,
                )
            }
            Err(other) => {
                let text = other.to_string();
                (
                    Ok(refusal(text, json!({ "outcome": "tool_error" }))),
                    Outcome::ToolError,
                    0,
                )
            }
        }
    }

    /// The `[[redact]]` checks of a completed result (a tool error
    /// included) of the call of `name`: the answer with its matches
    /// masked, or a tool error in its place when it is withheld (outcome
    /// `withheld`), and what was found. Any other answer passes as it is.
    fn redact(
        &self,
        name: &str,
        listed: &Listed,
        answer: Answer,
        outcome: Outcome,
    ) -> (Answer, Outcome, Checked) {
        let completed = matches!(outcome, Outcome::Completed | Outcome::ToolError);
        let Ok(mut result) = answer else {
            return (answer, outcome, Checked::default());
        };
        if !completed {
            return (Ok(result), outcome, Checked::default());
        }
        let checked = self
            .gateway
            .redactor
            .check(&listed.upstream.name, &listed.tool, &mut result);
        if checked.matched() {
            let withheld = checked.withheld.is_some();
            self.gateway
                .metrics
                .redacted_result(&listed.upstream.name, withheld);
        }
        if checked.withheld.is_none() {
            return (Ok(result), outcome, checked);
        }
        let mut detail = json!({ "outcome": "withheld", "redact": checked.redacted });
        if let Some(Withheld::Oversize { bytes, limit }) = checked.withheld {
            detail["textBytes"] = json!(bytes);
            detail["maxScanBytes"] = json!(limit);
        }
        let text = crate::redact::withheld_text(name, &checked);
        (Ok(refusal(text, detail)), Outcome::Withheld, checked)
    }

    /// Finish: the `finished` entry with the call's outcome. Guarantees
    /// it is written before the answer goes back; it is synced soon after
    /// (the call already ran, and its decided entry is on disk).
    async fn finish(
        &self,
        record: &CallRecord,
        decision: Decision,
        rule: Option<String>,
        outcome: Outcome,
        attempts: Option<u32>,
    ) -> Result<(), Error> {
        let entry = record.entry(Phase::Finished, decision, rule, Some(outcome), attempts);
        self.write_finished(&entry).await
    }

    async fn write_finished(&self, entry: &Entry) -> Result<(), Error> {
        Ok(self.gateway.log.record(entry, Durability::Written).await?)
    }
}

/// Parks the call of `record` with `arguments` in `approvals`, as
/// `parking` says, until it is resolved or `withdrawn` completes. The
/// one guard of the wait is [`Approvals::park_or_drop`]'s: if this future
/// is dropped while the call waits (the runtime stopping, or a server
/// that drops handlers of withdrawn requests), the call leaves the parked
/// calls and is recorded as abandoned ([`record_abandoned`]).
async fn wait_for_approver(
    approvals: &Approvals,
    log: &AuditLog,
    metrics: &Metrics,
    record: &CallRecord,
    arguments: &JsonObject,
    parking: &Parking,
    withdrawn: impl Future<Output = ()>,
) -> Resolution {
    let parked = parked(record, arguments, parking);
    let dropped = || record_abandoned(log, record, parking.rule.clone());
    // Counted until the wait ends, or this future is dropped.
    let _parked = metrics.parked();
    approvals
        .park_or_drop(
            parked,
            parking.timeout,
            parking.on_expiry,
            withdrawn,
            dropped,
        )
        .await
}

/// The audit entries of how a parked call ended, the one place they are
/// made: `decided` with the resolution's decision, then, when the call
/// does not go on, `finished` with outcome `refused`.
fn resolution_entries(
    record: &CallRecord,
    resolution: &Resolution,
    rule: Option<String>,
) -> (Entry, Option<Entry>) {
    let decision = resolution.decision();
    let degraded = match resolution {
        Resolution::Unavailable { reason } => Some(format!("{reason}; approvals fail closed")),
        _ => None,
    };
    let by = match resolution {
        Resolution::Approved { by } | Resolution::Denied { by } => Some(by.clone()),
        _ => None,
    };
    let mut decided = record.entry(Phase::Decided, decision, rule.clone(), None, None);
    decided.degraded.clone_from(&degraded);
    decided.by.clone_from(&by);
    let finished = (!resolution.proceeds()).then(|| {
        let mut finished = record.entry(
            Phase::Finished,
            decision,
            rule,
            Some(Outcome::Refused),
            None,
        );
        finished.degraded = degraded;
        finished.by = by;
        finished
    });
    (decided, finished)
}

/// Records the call of `record` as abandoned where nothing can wait (a
/// guard's `Drop`): its [`resolution_entries`], `decided` then `finished`
/// (outcome `refused`) with decision `abandoned`, are written at once,
/// though nothing is left to wait for them, and synced by the log's sync
/// thread; and it is said as an event.
fn record_abandoned(log: &AuditLog, record: &CallRecord, rule: Option<String>) {
    let (decided, finished) = resolution_entries(record, &Resolution::Abandoned, rule);
    queue(log, &decided, Durability::Synced);
    if let Some(finished) = finished {
        queue(log, &finished, Durability::Written);
    }
    said_abandoned(&record.id, &namespaced(&record.upstream, &record.tool));
}

/// The parked form of a call.
fn parked(record: &CallRecord, arguments: &Map<String, Value>, parking: &Parking) -> Parked {
    let now = SystemTime::now();
    Parked {
        id: record.id.clone(),
        principal: record.principal.clone(),
        upstream: record.upstream.clone(),
        tool: record.tool.clone(),
        arguments: arguments.clone(),
        parked_at: now,
        expires_at: now + parking.timeout,
        reason: parking.reason.clone(),
        hints: record.hints.clone(),
        drift: parking.drift.clone(),
    }
}

/// Says, as an event, that the parked call `id` of `name` was abandoned, for
/// the approver who may be about to decide it.
fn said_abandoned(id: &str, name: &str) {
    let tool = escape::shown(name);
    tracing::info!(
        call_id = %id,
        %tool,
        "call {id} of `{tool}` was abandoned by its client before it was decided; it was not \
         forwarded"
    );
}

/// Writes `entry` without waiting for its sync, where nothing can wait (a
/// `Drop`): [`AuditLog::record`] writes its line and asks for its sync
/// before its first await, so one poll is enough. An error has nowhere to
/// go but an event.
fn queue(log: &AuditLog, entry: &Entry, durability: Durability) {
    let mut recording = std::pin::pin!(log.record(entry, durability));
    let mut context = Context::from_waker(std::task::Waker::noop());
    if let Poll::Ready(Err(error)) = recording.as_mut().poll(&mut context) {
        let error = mcp_hints_core::escape::one_line(&error.to_string()).into_owned();
        let id = &entry.id;
        tracing::error!(
            call_id = %id,
            %error,
            "call {id} was abandoned but its entry could not be written: {error}"
        );
    }
}

/// What the replay-safe client made of a forwarded call, as the metrics'
/// `outcome` says it.
fn measured_outcome(outcome: &Result<CallOutcome, CallError>) -> MeasuredOutcome {
    match outcome {
        Ok(CallOutcome::Completed(done)) if done.result.is_error == Some(true) => {
            MeasuredOutcome::ToolError
        }
        Ok(CallOutcome::Completed(_)) => MeasuredOutcome::Result,
        Ok(CallOutcome::DeliveryUnknown(_)) => MeasuredOutcome::DeliveryUnknown,
        Err(_) => MeasuredOutcome::Error,
    }
}

/// Why a call waits for an approver, as the approver is shown it: `RULE
/// requires an approver`, and for a rule that looked back, `, after
/// web__fetch in this session` (the earlier calls that made it fire).
fn approval_reason(rule: Option<&str>, earlier: Option<&[EarlierCall]>) -> String {
    let mut reason = format!("{} requires an approver", rule.unwrap_or("a rule"));
    if let Some(earlier) = earlier.filter(|earlier| !earlier.is_empty()) {
        let calls: Vec<String> = earlier
            .iter()
            .map(|call| escape::shown(&namespaced(&call.upstream, &call.tool)).into_owned())
            .collect();
        reason.push_str(&format!(", after {} in this session", calls.join(", ")));
    }
    reason
}

/// The `decided` entry of `call` as `decided` decided it.
fn decided_entry(call: &Call, decided: &Decided) -> Entry {
    let mut entry = call.record.entry(
        Phase::Decided,
        decided.decision,
        decided.rule.clone(),
        None,
        None,
    );
    entry.degraded.clone_from(&decided.degraded);
    entry.earlier.clone_from(&decided.earlier);
    entry
}

/// The answer of a call that went upstream (its tool read-only) but whose
/// `decided` entry could not be synced: no answer goes back without its
/// entry on disk, so its answer is withheld. `ran` says how far it got:
/// `the call ran`, or `it may have run` for one whose answer never came.
fn sync_failed(error: &Error, ran: &str) -> CallToolResult {
    refusal(
        format!(
            "the gateway's audit log cannot be written ({}); {ran} (its tool is read-only, so \
             nothing changed) but its answer is withheld",
            mcp_hints_core::escape::one_line(&error.to_string())
        ),
        json!({ "outcome": "withheld", "reason": "audit_log" }),
    )
}

/// The refusal of a call whose audit entry could not be written.
fn log_failed(error: &Error) -> CallToolResult {
    refusal(
        format!(
            "the gateway's audit log cannot be written ({}), so the call was refused and not \
             forwarded",
            mcp_hints_core::escape::one_line(&error.to_string())
        ),
        json!({ "outcome": "refused", "reason": "audit_log" }),
    )
}

/// How often a call whose delivery is unknown may have run, after
/// `attempts` sends: once, when it was sent once or every resend carried
/// its one idempotency key (the server runs a key once); else up to
/// `attempts` times, each resend being one the policy allowed (a read-only
/// or idempotent tool, for which running again is harmless).
fn may_have_run(attempts: u32, keyed: bool) -> String {
    if attempts <= 1 {
        "It may have run once (never more)".to_owned()
    } else if keyed {
        format!(
            "It may have run once (never more: its {attempts} attempts carried one idempotency \
             key)"
        )
    } else {
        format!(
            "It may have run up to {attempts} times (it was sent {attempts} times, each resend \
             one the policy allowed)"
        )
    }
}

/// The refusal of a call to `name` that could not be sent: `upstream` is
/// unavailable for `reason` (a clause that reads after "is unavailable").
fn unavailable(name: &str, upstream: &str, reason: &str) -> CallToolResult {
    refusal(
        format!(
            "`{}` was not forwarded: upstream `{upstream}` is unavailable ({})",
            escape::shown(name),
            mcp_hints_core::escape::one_line(reason)
        ),
        json!({ "outcome": "unavailable", "upstream": upstream }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approver_is_shown_the_earlier_calls_that_made_a_rule_fire() {
        assert_eq!(
            approval_reason(Some("rule[0] (require_approval *)"), None),
            "rule[0] (require_approval *) requires an approver"
        );
        let earlier = [
            EarlierCall {
                id: "a".to_owned(),
                upstream: "web".to_owned(),
                tool: "fetch".to_owned(),
            },
            EarlierCall {
                id: "b".to_owned(),
                upstream: "web".to_owned(),
                tool: "fetch\u{202e}".to_owned(),
            },
        ];
        let reason = approval_reason(Some("rule[3] (x)"), Some(&earlier));
        assert!(
            reason.starts_with("rule[3] (x) requires an approver, after web__fetch, web__fetch"),
            "{reason}"
        );
        assert!(reason.ends_with(" in this session"), "{reason}");
        // A bidi override in a peer's name is not passed on as itself.
        assert!(!reason.contains('\u{202e}'), "{reason}");
        assert_eq!(
            approval_reason(None, Some(&[])),
            "a rule requires an approver"
        );
    }

    #[test]
    fn a_lost_call_may_have_run_as_often_as_it_was_sent_unless_keyed() {
        assert_eq!(may_have_run(1, false), "It may have run once (never more)");
        assert_eq!(may_have_run(0, true), "It may have run once (never more)");
        assert!(may_have_run(3, false).starts_with("It may have run up to 3 times ("));
        assert!(may_have_run(3, true).starts_with("It may have run once (never more: its 3"));
    }

    #[tokio::test]
    async fn a_dropped_wait_for_an_approver_is_logged_as_abandoned() {
        let scratch = crate::scratch::Scratch::new("front-abandon");
        let dir = &scratch.0;
        let path = dir.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let record = CallRecord {
            replica: "gw-1".to_owned(),
            id: "c-1".to_owned(),
            principal: "alice".to_owned(),
            upstream: "fx".to_owned(),
            tool: "count".to_owned(),
            hints: Value::Null,
            arguments_sha256: "0".repeat(64),
            arguments: None,
            session: None,
        };
        let approvals = Approvals::in_process();
        let metrics = Metrics::prometheus();
        let parking = Parking {
            reason: "rule[0] requires an approver".to_owned(),
            timeout: Duration::from_secs(300),
            on_expiry: Expiry::Deny,
            rule: Some("rule[0]".to_owned()),
            drift: None,
        };
        let arguments = JsonObject::new();
        let wait = || {
            let never = std::future::pending();
            wait_for_approver(
                &approvals, &log, &metrics, &record, &arguments, &parking, never,
            )
        };
        // Resolved: its caller records the resolution, the guard nothing.
        let approve = async {
            while approvals.pending().await.unwrap().is_empty() {
                tokio::task::yield_now().await;
            }
            approvals.approve("c-1", "carol").await.unwrap();
        };
        let _ = tokio::join!(wait(), approve);
        // Dropped while it waits: the guard records it as abandoned, and it
        // no longer counts as parked.
        let _ = tokio::time::timeout(Duration::from_millis(10), wait()).await;
        let rendered = metrics.render().unwrap();
        assert!(
            rendered
                .lines()
                .any(|line| line == "mcp_hints_gateway_parked_calls 0"),
            "{rendered}"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let lines = loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() >= 2 || std::time::Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let entries: Vec<Entry> = lines
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let seen: Vec<(&str, &str, Option<&str>)> = entries
            .iter()
            .map(|entry| {
                (
                    entry.phase.as_str(),
                    entry.decision.as_str(),
                    entry.outcome.map(Outcome::as_str),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("decided", "abandoned", None),
                ("finished", "abandoned", Some("refused"))
            ]
        );
        assert!(entries.iter().all(|entry| entry.id == "c-1"));
        assert!(
            entries
                .iter()
                .all(|entry| entry.replica.as_deref() == Some("gw-1"))
        );
    }
}

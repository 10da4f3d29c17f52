//! Metrics: what the gateway counts and times, as Prometheus reads it from
//! `GET /metrics` on the admin endpoint. Every metric's name is here, and
//! every recording goes through [`Metrics`], into the gateway's own
//! recorder: none is installed globally.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `mcp_hints_gateway_decisions_total` | counter | `rule`, `decision` | `decided` audit entries written: `decision` is the entry's word (`allow`, `deny`, `rate_limited`, `require_approval`, `approved`, `denied`, `expired`, `abandoned`, `drift`, `unavailable`), `rule` the rule that decided (`rule[N]`), `default` for `policy.default`, `none` where no rule is involved (drift, an unavailable upstream) |
//! | `mcp_hints_gateway_upstream_call_duration_seconds` | histogram | `upstream`, `outcome` | a forwarded call through the replay-safe client, resends and read-backs included: `outcome` is `result`, `tool_error` (a result with `isError`), `error` (a JSON-RPC error, or not sent) or `delivery_unknown` |
//! | `mcp_hints_gateway_resends_total` | counter | `upstream` | attempts after the first, of forwarded calls |
//! | `mcp_hints_gateway_delivery_unknown_total` | counter | `upstream` | forwarded calls whose delivery stayed unknown |
//! | `mcp_hints_gateway_redacted_results_total` | counter | `upstream`, `action` | completed results a `[[redact]]` matched: `action` is `masked` (passed on, matches masked) or `withheld` (a `deny_result` rule matched, or the result was over `max_scan_bytes`) |
//! | `mcp_hints_gateway_parked_calls` | gauge | | calls this gateway holds for an approver now (a replica counts its own) |
//! | `mcp_hints_gateway_audit_sync_duration_seconds` | histogram | | one `fdatasync` of the audit log (one may cover many entries) |
//! | `mcp_hints_gateway_state_errors_total` | counter | `backend` | requests to the shared state that failed ([`Metrics::state_error`], where a backend counts them; none does yet) |
//!
//! Why a recorder of its own: the `metrics` macros record into a global
//! recorder that a process installs once, and a library that installed
//! one would take it from its application (and a second gateway in one
//! process, as tests start, would find it taken). So each gateway built
//! with [`GatewayBuilder::metrics`](crate::front::GatewayBuilder::metrics)
//! holds a [`PrometheusRecorder`], and every recording is made under
//! [`metrics::with_local_recorder`], synchronously, on the thread that
//! records (never across an await): two gateways count apart, and the
//! application's own recorder, if any, sees nothing of them.

use std::sync::Arc;
use std::time::Duration;

use ::metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

use crate::log::Decision;

/// `{rule, decision}`: `decided` audit entries written.
pub(crate) const DECISIONS: &str = "mcp_hints_gateway_decisions_total";
/// `{upstream, outcome}`: forwarded calls' durations, in seconds.
pub(crate) const UPSTREAM_CALL_DURATION: &str = "mcp_hints_gateway_upstream_call_duration_seconds";
/// `{upstream}`: attempts after the first.
pub(crate) const RESENDS: &str = "mcp_hints_gateway_resends_total";
/// `{upstream}`: calls whose delivery stayed unknown.
pub(crate) const DELIVERY_UNKNOWN: &str = "mcp_hints_gateway_delivery_unknown_total";
/// `{upstream, action}`: results `[[redact]]` masked or withheld.
pub(crate) const REDACTED_RESULTS: &str = "mcp_hints_gateway_redacted_results_total";
/// Calls held for an approver now.
pub(crate) const PARKED_CALLS: &str = "mcp_hints_gateway_parked_calls";
/// The audit log's syncs, in seconds.
pub(crate) const AUDIT_SYNC_DURATION: &str = "mcp_hints_gateway_audit_sync_duration_seconds";
/// `{backend}`: failed requests to the shared state.
pub(crate) const STATE_ERRORS: &str = "mcp_hints_gateway_state_errors_total";

/// The buckets of [`UPSTREAM_CALL_DURATION`], in seconds: from a loopback
/// answer to the replay-safe client's 30 s call timeout and the resends
/// after it.
const CALL_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The buckets of [`AUDIT_SYNC_DURATION`], in seconds: 50 µs apart up to
/// half a millisecond, where an SSD's or a virtual disk's `fdatasync`
/// lands and where each one delays a call's answer (a quantile read from
/// them is within 25 µs), then coarser up to a loaded disk's tens of
/// milliseconds and a stalled one's second.
const SYNC_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00015, 0.0002, 0.00025, 0.0003, 0.00035, 0.0004, 0.00045, 0.0005, 0.0006,
    0.0008, 0.001, 0.0015, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// How a forwarded call ended, as [`UPSTREAM_CALL_DURATION`]'s `outcome`
/// says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// A result without `isError`.
    Result,
    /// A result with `isError: true`.
    ToolError,
    /// A JSON-RPC error, or a call that could not be sent.
    Error,
    /// No answer came, and it may have run.
    DeliveryUnknown,
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Result => "result",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::Error => "error",
            CallOutcome::DeliveryUnknown => "delivery_unknown",
        }
    }
}

/// Where a gateway's metrics go: its own Prometheus recorder, or nowhere
/// (the default: nothing is recorded, and `GET /metrics` answers 404).
/// Cloned into whatever records (the audit log's sync thread, a shared
/// state backend): every clone records into the one recorder.
#[derive(Clone, Debug, Default)]
pub(crate) struct Metrics {
    recorder: Option<Arc<PrometheusRecorder>>,
}

impl Metrics {
    /// Records nothing.
    pub(crate) fn off() -> Metrics {
        Metrics::default()
    }

    /// A Prometheus recorder of its own, every metric described (`# HELP`)
    /// and the durations rendered as histograms with the buckets above.
    pub(crate) fn prometheus() -> Metrics {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full(UPSTREAM_CALL_DURATION.to_owned()),
                CALL_BUCKETS,
            )
            .and_then(|builder| {
                builder.set_buckets_for_metric(
                    Matcher::Full(AUDIT_SYNC_DURATION.to_owned()),
                    SYNC_BUCKETS,
                )
            });
        let builder = match builder {
            Ok(builder) => builder,
            // Only empty buckets are refused, and the consts are not.
            Err(_) => unreachable!("the bucket lists are not empty"),
        };
        let metrics = Metrics {
            recorder: Some(Arc::new(builder.build_recorder())),
        };
        metrics.record(|| {
            describe_counter!(
                DECISIONS,
                "Decided audit entries written, by the rule that decided and the decision."
            );
            describe_histogram!(
                UPSTREAM_CALL_DURATION,
                Unit::Seconds,
                "Forwarded calls through the replay-safe client, resends included, by upstream \
                 and outcome."
            );
            describe_counter!(RESENDS, "Attempts after the first, of forwarded calls.");
            describe_counter!(
                DELIVERY_UNKNOWN,
                "Forwarded calls whose delivery stayed unknown."
            );
            describe_counter!(
                REDACTED_RESULTS,
                "Completed results a redact rule matched, by upstream and what became of them \
                 (masked or withheld)."
            );
            describe_gauge!(
                PARKED_CALLS,
                "Calls this gateway holds for an approver now."
            );
            describe_histogram!(
                AUDIT_SYNC_DURATION,
                Unit::Seconds,
                "Syncs of the audit log to disk."
            );
            describe_counter!(STATE_ERRORS, "Failed requests to the shared state.");
            // Shown from the start: an idle gateway holds no call.
            gauge!(PARKED_CALLS).set(0.0);
        });
        metrics
    }

    /// Whether it records (built by [`prometheus`](Self::prometheus)).
    pub(crate) fn enabled(&self) -> bool {
        self.recorder.is_some()
    }

    /// Everything recorded so far, in Prometheus' text format (0.0.4);
    /// `None` when it records nothing.
    pub(crate) fn render(&self) -> Option<String> {
        self.recorder
            .as_ref()
            .map(|recorder| recorder.handle().render())
    }

    /// The exporter's upkeep (its histograms' samples drained into their
    /// buckets), which [`render`](Self::render) does too: run now and then
    /// so that a gateway nobody scrapes does not keep every sample.
    pub(crate) fn upkeep(&self) {
        if let Some(recorder) = &self.recorder {
            recorder.handle().run_upkeep();
        }
    }

    /// Runs `record` with this gateway's recorder as the current one, on
    /// this thread; does nothing when it records nothing.
    fn record(&self, record: impl FnOnce()) {
        if let Some(recorder) = &self.recorder {
            ::metrics::with_local_recorder(recorder.as_ref(), record);
        }
    }

    /// A `decided` entry with `decision` under `rule` (the audit entry's
    /// text, `rule[N] (...)`, or `None`) was written: counted under
    /// `rule[N]`, `default` or `none`.
    pub(crate) fn decision(&self, rule: Option<&str>, decision: Decision) {
        let rule = match rule {
            Some(text) => text.split_once(' ').map_or(text, |(index, _)| index),
            None if matches!(decision, Decision::Allow | Decision::Deny) => "default",
            None => "none",
        };
        let rule = rule.to_owned();
        self.record(|| {
            counter!(DECISIONS, "rule" => rule, "decision" => decision.as_str()).increment(1);
        });
    }

    /// A call forwarded to `upstream` ended as `outcome` after `elapsed`
    /// and `attempts` sends: its duration, its resends, and whether its
    /// delivery stayed unknown.
    pub(crate) fn upstream_call(
        &self,
        upstream: &str,
        outcome: CallOutcome,
        elapsed: Duration,
        attempts: u32,
    ) {
        let name = upstream.to_owned();
        self.record(|| {
            histogram!(
                UPSTREAM_CALL_DURATION,
                "upstream" => name.clone(),
                "outcome" => outcome.as_str()
            )
            .record(elapsed.as_secs_f64());
            if attempts > 1 {
                counter!(RESENDS, "upstream" => name.clone()).increment(u64::from(attempts - 1));
            }
            if outcome == CallOutcome::DeliveryUnknown {
                counter!(DELIVERY_UNKNOWN, "upstream" => name).increment(1);
            }
        });
    }

    /// A result of `upstream` that `[[redact]]` matched was passed on
    /// masked, or withheld (`withheld`).
    pub(crate) fn redacted_result(&self, upstream: &str, withheld: bool) {
        let name = upstream.to_owned();
        let action = if withheld { "withheld" } else { "masked" };
        self.record(|| {
            counter!(REDACTED_RESULTS, "upstream" => name, "action" => action).increment(1);
        });
    }

    /// One call held for an approver from now until the guard is dropped
    /// (however the wait ends, the future dropped included).
    pub(crate) fn parked(&self) -> ParkedGuard {
        self.record(|| gauge!(PARKED_CALLS).increment(1.0));
        ParkedGuard {
            metrics: self.clone(),
        }
    }

    /// One sync of the audit log took `elapsed`.
    pub(crate) fn audit_sync(&self, elapsed: Duration) {
        self.record(|| histogram!(AUDIT_SYNC_DURATION).record(elapsed.as_secs_f64()));
    }

    /// One request to the shared state failed: counted in
    /// [`STATE_ERRORS`] under `backend` (`redis`, ...). The place for a
    /// backend's failures, counted once each where the backend sees them
    /// (a clone of the gateway's [`Metrics`] handed to it when it is
    /// opened), not where a caller meets the error again.
    pub(crate) fn state_error(&self, backend: &'static str) {
        self.record(|| counter!(STATE_ERRORS, "backend" => backend).increment(1));
    }
}

/// A call held for an approver, counted in [`PARKED_CALLS`] while it
/// lives.
#[must_use = "the call counts as parked only while the guard lives"]
pub(crate) struct ParkedGuard {
    metrics: Metrics,
}

impl Drop for ParkedGuard {
    fn drop(&mut self) {
        self.metrics.record(|| gauge!(PARKED_CALLS).decrement(1.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample lines of `text` (no `#` lines), each `NAME{LABELS} VALUE`.
    fn samples(text: &str) -> Vec<&str> {
        text.lines().filter(|line| !line.starts_with('#')).collect()
    }

    #[test]
    fn nothing_is_recorded_or_rendered_when_off() {
        let metrics = Metrics::off();
        metrics.decision(None, Decision::Allow);
        assert!(!metrics.enabled());
        assert_eq!(metrics.render(), None);
    }

    #[test]
    fn decisions_are_counted_by_rule_index_default_or_none() {
        let metrics = Metrics::prometheus();
        metrics.decision(
            Some("rule[2] (deny delete_* when destructive)"),
            Decision::Deny,
        );
        metrics.decision(
            Some("rule[2] (deny delete_* when destructive)"),
            Decision::Deny,
        );
        metrics.decision(None, Decision::Allow);
        metrics.decision(None, Decision::Drift);
        let text = metrics.render().unwrap();
        let samples = samples(&text);
        assert!(
            samples.contains(
                &r#"mcp_hints_gateway_decisions_total{rule="rule[2]",decision="deny"} 2"#
            ),
            "{text}"
        );
        assert!(
            samples.contains(
                &r#"mcp_hints_gateway_decisions_total{rule="default",decision="allow"} 1"#
            ),
            "{text}"
        );
        assert!(
            samples
                .contains(&r#"mcp_hints_gateway_decisions_total{rule="none",decision="drift"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("# TYPE mcp_hints_gateway_decisions_total counter"),
            "{text}"
        );
    }

    #[test]
    fn an_upstream_call_is_timed_with_its_resends_and_lost_delivery() {
        let metrics = Metrics::prometheus();
        metrics.upstream_call(
            "fx",
            CallOutcome::DeliveryUnknown,
            Duration::from_millis(30),
            3,
        );
        metrics.upstream_call("fx", CallOutcome::Result, Duration::from_millis(2), 1);
        let text = metrics.render().unwrap();
        let samples = samples(&text);
        for expected in [
            r#"mcp_hints_gateway_resends_total{upstream="fx"} 2"#,
            r#"mcp_hints_gateway_delivery_unknown_total{upstream="fx"} 1"#,
            r#"mcp_hints_gateway_upstream_call_duration_seconds_count{upstream="fx",outcome="delivery_unknown"} 1"#,
            r#"mcp_hints_gateway_upstream_call_duration_seconds_bucket{upstream="fx",outcome="delivery_unknown",le="0.025"} 0"#,
            r#"mcp_hints_gateway_upstream_call_duration_seconds_bucket{upstream="fx",outcome="delivery_unknown",le="0.05"} 1"#,
            r#"mcp_hints_gateway_upstream_call_duration_seconds_count{upstream="fx",outcome="result"} 1"#,
        ] {
            assert!(samples.contains(&expected), "{expected} in:\n{text}");
        }
        assert!(
            text.contains("# TYPE mcp_hints_gateway_upstream_call_duration_seconds histogram"),
            "{text}"
        );
    }

    #[test]
    fn redacted_results_are_counted_by_what_became_of_them() {
        let metrics = Metrics::prometheus();
        metrics.redacted_result("fx", false);
        metrics.redacted_result("fx", false);
        metrics.redacted_result("fx", true);
        let text = metrics.render().unwrap();
        let samples = samples(&text);
        for expected in [
            r#"mcp_hints_gateway_redacted_results_total{upstream="fx",action="masked"} 2"#,
            r#"mcp_hints_gateway_redacted_results_total{upstream="fx",action="withheld"} 1"#,
        ] {
            assert!(samples.contains(&expected), "{expected} in:\n{text}");
        }
    }

    #[test]
    fn parked_calls_count_while_their_guards_live() {
        let metrics = Metrics::prometheus();
        let gauge = |metrics: &Metrics| {
            let text = metrics.render().unwrap();
            samples(&text)
                .iter()
                .find_map(|line| line.strip_prefix("mcp_hints_gateway_parked_calls "))
                .map(str::to_owned)
        };
        assert_eq!(gauge(&metrics).as_deref(), Some("0"));
        let first = metrics.parked();
        let second = metrics.parked();
        assert_eq!(gauge(&metrics).as_deref(), Some("2"));
        drop(first);
        drop(second);
        assert_eq!(gauge(&metrics).as_deref(), Some("0"));
    }

    #[test]
    fn state_errors_and_syncs_are_recorded_and_two_recorders_count_apart() {
        let one = Metrics::prometheus();
        let two = Metrics::prometheus();
        one.state_error("redis");
        one.audit_sync(Duration::from_micros(300));
        let text = one.render().unwrap();
        let samples = samples(&text);
        assert!(
            samples.contains(&r#"mcp_hints_gateway_state_errors_total{backend="redis"} 1"#),
            "{text}"
        );
        assert!(
            samples.contains(&"mcp_hints_gateway_audit_sync_duration_seconds_count 1"),
            "{text}"
        );
        for (bound, count) in [("0.00025", 0), ("0.0003", 1), ("0.0005", 1)] {
            let sample = format!(
                "mcp_hints_gateway_audit_sync_duration_seconds_bucket{{le=\"{bound}\"}} {count}"
            );
            assert!(samples.contains(&sample.as_str()), "{text}");
        }
        let other = two.render().unwrap();
        assert!(!other.contains("_total{"), "{other}");
    }
}

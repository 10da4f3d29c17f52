//! Readiness: whether the gateway can serve its calls now, as `GET
//! /readyz` on the admin endpoint answers a load balancer. One [`Probe`]
//! per thing a call depends on, all asked at once, each within
//! [`defaults::READINESS_TIMEOUT`]: every upstream now; what else the
//! gateway comes to depend on (a shared-state backend) adds a probe of
//! its own to [`Gateway`](crate::front::Gateway)'s list.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::defaults;
use crate::upstream::Upstream;

/// One thing the gateway's calls depend on, asked whether it serves.
#[async_trait]
pub(crate) trait Probe: Send + Sync {
    /// What it checks, as `/readyz` names it: a kind (`upstream`) and the
    /// thing's name (the upstream's).
    fn subject(&self) -> (&'static str, String);

    /// `Ok` while it serves; else why not, in words that read after "not
    /// ready: " (peer text in it is escaped by [`unready`], not here).
    /// Should answer quickly: a probe that takes longer than
    /// [`defaults::READINESS_TIMEOUT`] counts as not ready.
    async fn check(&self) -> Result<(), String>;
}

/// An upstream is ready while its calls can be sent: not unavailable (at
/// start, after a call could not be sent, or stopping).
#[async_trait]
impl Probe for Upstream {
    fn subject(&self) -> (&'static str, String) {
        ("upstream", self.name.clone())
    }

    async fn check(&self) -> Result<(), String> {
        match self.unavailable() {
            None => Ok(()),
            Some(reason) => Err(reason),
        }
    }
}

/// Asks every probe at once, each bounded by
/// [`defaults::READINESS_TIMEOUT`]; the ones that are not ready, in the
/// probes' order, each as `{"kind": KIND, "name": NAME, "reason":
/// REASON}`, the name escaped and cut as [`mcp_hints_core::escape::shown`]
/// does, the reason escaped to one line. Empty: ready.
pub(crate) async fn unready(probes: &[Arc<dyn Probe>]) -> Vec<Value> {
    let checks = probes.iter().map(|probe| async move {
        let answer = tokio::time::timeout(defaults::READINESS_TIMEOUT, probe.check()).await;
        let reason = match answer {
            Ok(Ok(())) => return None,
            Ok(Err(reason)) => reason,
            Err(_) => format!(
                "no answer within {} ms",
                defaults::READINESS_TIMEOUT.as_millis()
            ),
        };
        let (kind, name) = probe.subject();
        Some(json!({
            "kind": kind,
            "name": mcp_hints_core::escape::shown(&name),
            "reason": mcp_hints_core::escape::one_line(&reason),
        }))
    });
    futures_util::future::join_all(checks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed {
        name: &'static str,
        answer: Option<&'static str>,
        hangs: bool,
    }

    #[async_trait]
    impl Probe for Fixed {
        fn subject(&self) -> (&'static str, String) {
            ("test", self.name.to_owned())
        }

        async fn check(&self) -> Result<(), String> {
            if self.hangs {
                std::future::pending::<()>().await;
            }
            self.answer.map_or(Ok(()), |reason| Err(reason.to_owned()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_probes_not_ready_are_named_escaped_and_a_silent_one_times_out() {
        let probes: Vec<Arc<dyn Probe>> = vec![
            Arc::new(Fixed {
                name: "up",
                answer: None,
                hangs: false,
            }),
            Arc::new(Fixed {
                name: "down\u{1b}[2J",
                answer: Some("cannot start\nit"),
                hangs: false,
            }),
            Arc::new(Fixed {
                name: "silent",
                answer: None,
                hangs: true,
            }),
        ];
        let unready = unready(&probes).await;
        assert_eq!(
            unready,
            [
                json!({"kind": "test", "name": "down\\u{1b}[2J", "reason": "cannot start\\nit"}),
                json!({"kind": "test", "name": "silent", "reason": "no answer within 2000 ms"}),
            ]
        );
        assert!(super::unready(&probes[..1]).await.is_empty());
    }
}

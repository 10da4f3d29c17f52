//! A backend counted: every [`StateError`] of the backend it wraps goes
//! into `mcp_hints_gateway_state_errors_total{backend}`, and `/readyz`
//! asks it whether it answers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_hints::fingerprint::PinnedTool;
use tokio::sync::broadcast;

use super::{BudgetUse, Counted, SharedState, StateError, Window};
use crate::approval::{Parked, Resolution};
use crate::metrics::Metrics;
use crate::readiness::Probe;
use crate::session::{History, HistoryEvent, HistoryLimits};

/// `inner`, its errors counted in `metrics`.
#[derive(Debug)]
pub(crate) struct Metered {
    inner: Arc<dyn SharedState>,
    metrics: Metrics,
}

impl Metered {
    pub(crate) fn new(inner: Arc<dyn SharedState>, metrics: Metrics) -> Metered {
        Metered { inner, metrics }
    }

    fn counted<T>(&self, answer: Result<T, StateError>) -> Result<T, StateError> {
        if answer.is_err() {
            self.metrics.state_error(self.inner.backend());
        }
        answer
    }
}

#[async_trait]
impl SharedState for Metered {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn count(&self, principal: &str, windows: &[Window<'_>]) -> Result<Counted, StateError> {
        self.counted(self.inner.count(principal, windows).await)
    }

    async fn park(&self, call: &Parked) -> Result<(), StateError> {
        self.counted(self.inner.park(call).await)
    }

    async fn resolve(&self, id: &str, resolution: &Resolution) -> Result<bool, StateError> {
        self.counted(self.inner.resolve(id, resolution).await)
    }

    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StateError> {
        self.counted(self.inner.resolution(id).await)
    }

    async fn pending(&self) -> Result<Vec<Parked>, StateError> {
        self.counted(self.inner.pending().await)
    }

    fn resolved(&self) -> broadcast::Receiver<String> {
        self.inner.resolved()
    }

    fn newly_parked(&self) -> broadcast::Receiver<String> {
        self.inner.newly_parked()
    }

    async fn approved_tool(&self, namespaced: &str) -> Result<Option<PinnedTool>, StateError> {
        self.counted(self.inner.approved_tool(namespaced).await)
    }

    async fn approve_tool(&self, namespaced: &str, tool: &PinnedTool) -> Result<(), StateError> {
        self.counted(self.inner.approve_tool(namespaced, tool).await)
    }

    async fn retry_budget(
        &self,
        budget: &str,
        used: BudgetUse,
        window: Duration,
    ) -> Result<BudgetUse, StateError> {
        self.counted(self.inner.retry_budget(budget, used, window).await)
    }

    fn shares_sessions(&self) -> bool {
        self.inner.shares_sessions()
    }

    async fn open_session(
        &self,
        id: &str,
        principal: &str,
        replica: &str,
    ) -> Result<(), StateError> {
        self.counted(self.inner.open_session(id, principal, replica).await)
    }

    async fn session_opener(
        &self,
        id: &str,
        principal: &str,
    ) -> Result<Option<String>, StateError> {
        self.counted(self.inner.session_opener(id, principal).await)
    }

    async fn end_session(&self, id: &str) -> Result<(), StateError> {
        self.counted(self.inner.end_session(id).await)
    }

    async fn record_history(
        &self,
        session: &str,
        event: &HistoryEvent,
        limits: HistoryLimits,
    ) -> Result<(), StateError> {
        self.counted(self.inner.record_history(session, event, limits).await)
    }

    async fn history(&self, session: &str) -> Result<History, StateError> {
        self.counted(self.inner.history(session).await)
    }

    async fn ready(&self) -> Result<(), StateError> {
        self.counted(self.inner.ready().await)
    }
}

/// The shared state is ready while it answers; `/readyz` names it `state`
/// with its backend's name.
#[async_trait]
impl Probe for Metered {
    fn subject(&self) -> (&'static str, String) {
        ("state", self.inner.backend().to_owned())
    }

    async fn check(&self) -> Result<(), String> {
        self.ready().await.map_err(|error| error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{InProcess, RedisState};

    // `RedisState::open` spawns its subscriber, hence the runtime; what is
    // asked here needs no Redis.
    #[tokio::test]
    async fn only_a_backend_that_records_sessions_says_it_shares_them_and_metered_says_alike() {
        let in_process: Arc<dyn SharedState> = Arc::new(InProcess::new(None));
        let redis: Arc<dyn SharedState> =
            Arc::new(RedisState::open("redis://127.0.0.1:1", "shares", None).unwrap());
        assert!(!in_process.shares_sessions());
        assert!(redis.shares_sessions());
        assert!(!Metered::new(in_process, Metrics::off()).shares_sessions());
        assert!(Metered::new(redis, Metrics::off()).shares_sessions());
    }
}

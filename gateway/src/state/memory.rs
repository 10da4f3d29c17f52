//! The in-process backend: one gateway's state in its own memory, and the
//! drift lock's approvals in the lock file.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcp_hints::fingerprint::PinnedTool;
use tokio::sync::broadcast;

use super::{BudgetUse, Counted, SharedState, StateError, Window};
use crate::approval::{DriftLock, Parked, Resolution};

/// How long a resolution stays readable after the call was resolved: long
/// enough for any waiting call's poll to find it.
pub(super) const RESOLVED_RETENTION: Duration = Duration::from_secs(300);

/// One gateway's state, in its memory (the default backend).
#[derive(Debug)]
pub struct InProcess {
    /// Per (rule key, principal): the instants of the calls counted in the
    /// current window, oldest first, at most `limit` of them.
    ///
    /// A sliding log rather than `governor`: governor's GCRA spreads the
    /// quota (one call per window/N after a burst of N), so a window can
    /// see up to 2N-1 calls; "N calls per window" is exactly this log,
    /// which stays small because it never holds more than `limit`
    /// entries. Keys are bounded by rules x principals, both from the
    /// config (plus `local`).
    windows: Mutex<HashMap<(String, String), VecDeque<Instant>>>,
    parked: Mutex<HashMap<String, Parked>>,
    /// Resolutions by id, pruned past [`RESOLVED_RETENTION`] as new ones
    /// come.
    resolutions: Mutex<Resolutions>,
    resolved: broadcast::Sender<String>,
    /// The id of each call parked, as it is.
    newly_parked: broadcast::Sender<String>,
    /// The drift lock (`[lock]` with `deny_drift`), when there is one.
    drift: Option<tokio::sync::Mutex<DriftLock>>,
    /// Per retry budget: its use in each second (of `epoch`) that has any,
    /// oldest first, pruned past the window asked. Keys are bounded by
    /// upstreams x principals, both from the config.
    budgets: Mutex<HashMap<String, VecDeque<(u64, BudgetUse)>>>,
    /// What the seconds of `budgets` count from.
    epoch: Instant,
}

/// The kept resolutions, and their ids oldest first: pruning takes from
/// the front, so a resolve costs the same however many are kept.
#[derive(Debug, Default)]
struct Resolutions {
    by_id: HashMap<String, Resolution>,
    by_age: VecDeque<(Instant, String)>,
}

impl Resolutions {
    fn keep(&mut self, id: &str, resolution: Resolution, now: Instant) {
        while let Some((at, _)) = self.by_age.front()
            && now.saturating_duration_since(*at) >= RESOLVED_RETENTION
        {
            if let Some((_, old)) = self.by_age.pop_front() {
                self.by_id.remove(&old);
            }
        }
        self.by_id.insert(id.to_owned(), resolution);
        self.by_age.push_back((now, id.to_owned()));
    }
}

/// Locks `mutex`, using it though poisoned: each map is consistent between
/// statements, so a panic elsewhere cannot leave one half-written.
fn held<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl InProcess {
    /// Nothing counted, nothing parked; approvals of drifted tools go into
    /// `drift` (none: there is no drift check, and none is approved).
    pub fn new(drift: Option<DriftLock>) -> InProcess {
        InProcess {
            windows: Mutex::new(HashMap::new()),
            parked: Mutex::new(HashMap::new()),
            resolutions: Mutex::default(),
            resolved: broadcast::channel(64).0,
            newly_parked: broadcast::channel(64).0,
            drift: drift.map(tokio::sync::Mutex::new),
            budgets: Mutex::default(),
            epoch: Instant::now(),
        }
    }

    /// [`SharedState::retry_budget`] at `now` (tests pass their own
    /// instants).
    pub(crate) fn retry_budget_at(
        &self,
        budget: &str,
        used: BudgetUse,
        window: Duration,
        now: Instant,
    ) -> BudgetUse {
        let second = now.saturating_duration_since(self.epoch).as_secs();
        let mut budgets = held(&self.budgets);
        let seconds = budgets.entry(budget.to_owned()).or_default();
        // Whole seconds, as Redis counts them: the current one and the
        // `window - 1` before it.
        while seconds
            .front()
            .is_some_and(|(at, _)| at + window.as_secs().max(1) <= second)
        {
            seconds.pop_front();
        }
        if !used.is_empty() {
            match seconds.back_mut() {
                Some((at, sum)) if *at == second => *sum = *sum + used,
                _ => seconds.push_back((second, used)),
            }
        }
        seconds
            .iter()
            .fold(BudgetUse::default(), |total, (_, sum)| total + *sum)
    }

    /// [`SharedState::count`] at `now` (tests pass their own instants).
    pub(crate) fn count_at(
        &self,
        principal: &str,
        windows: &[Window<'_>],
        now: Instant,
    ) -> Counted {
        let mut counted = held(&self.windows);
        let mut full: Option<(usize, Duration)> = None;
        for window in windows {
            let calls = counted
                .entry((window.key.to_owned(), principal.to_owned()))
                .or_default();
            // A call leaves the window `window` after it was counted.
            while calls
                .front()
                .is_some_and(|oldest| now.saturating_duration_since(*oldest) >= window.window)
            {
                calls.pop_front();
            }
            if calls.len() >= window.limit as usize {
                let oldest = calls.front().copied().unwrap_or(now);
                let retry_after = window
                    .window
                    .saturating_sub(now.saturating_duration_since(oldest));
                if full.is_none_or(|(_, worst)| retry_after > worst) {
                    full = Some((window.rule, retry_after));
                }
            }
        }
        if let Some((rule, retry_after)) = full {
            return Counted::Full { rule, retry_after };
        }
        for window in windows {
            counted
                .entry((window.key.to_owned(), principal.to_owned()))
                .or_default()
                .push_back(now);
        }
        Counted::Allowed
    }
}

#[async_trait]
impl SharedState for InProcess {
    fn backend(&self) -> &'static str {
        "in-process"
    }

    async fn count(&self, principal: &str, windows: &[Window<'_>]) -> Result<Counted, StateError> {
        Ok(self.count_at(principal, windows, Instant::now()))
    }

    async fn park(&self, call: &Parked) -> Result<(), StateError> {
        held(&self.parked).insert(call.id.clone(), call.clone());
        // Nobody listening is fine: no page is open.
        let _ = self.newly_parked.send(call.id.clone());
        Ok(())
    }

    async fn resolve(&self, id: &str, resolution: &Resolution) -> Result<bool, StateError> {
        if held(&self.parked).remove(id).is_none() {
            return Ok(false);
        }
        held(&self.resolutions).keep(id, resolution.clone(), Instant::now());
        // Nobody listening is fine: the waiting call polls.
        let _ = self.resolved.send(id.to_owned());
        Ok(true)
    }

    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StateError> {
        Ok(held(&self.resolutions).by_id.get(id).cloned())
    }

    async fn pending(&self) -> Result<Vec<Parked>, StateError> {
        Ok(held(&self.parked).values().cloned().collect())
    }

    fn resolved(&self) -> broadcast::Receiver<String> {
        self.resolved.subscribe()
    }

    fn newly_parked(&self) -> broadcast::Receiver<String> {
        self.newly_parked.subscribe()
    }

    async fn approved_tool(&self, namespaced: &str) -> Result<Option<PinnedTool>, StateError> {
        Ok(match &self.drift {
            Some(lock) => lock.lock().await.lock().tools.get(namespaced).cloned(),
            None => None,
        })
    }

    async fn approve_tool(&self, namespaced: &str, tool: &PinnedTool) -> Result<(), StateError> {
        let Some(lock) = &self.drift else {
            return Err(StateError::new(
                self.backend(),
                "no drift lock is configured (`[lock]` with `deny_drift`)",
            ));
        };
        lock.lock()
            .await
            .approve(namespaced, tool.clone())
            .await
            .map_err(|error| StateError::new(self.backend(), error))
    }

    async fn retry_budget(
        &self,
        budget: &str,
        used: BudgetUse,
        window: Duration,
    ) -> Result<BudgetUse, StateError> {
        Ok(self.retry_budget_at(budget, used, window, Instant::now()))
    }

    // One gateway: the sessions it serves are the sessions it knows, in
    // its session-ownership layer; there is no other replica to name.
    async fn open_session(&self, _: &str, _: &str, _: &str) -> Result<(), StateError> {
        Ok(())
    }

    async fn session_opener(&self, _: &str, _: &str) -> Result<Option<String>, StateError> {
        Ok(None)
    }

    async fn end_session(&self, _: &str) -> Result<(), StateError> {
        Ok(())
    }

    async fn ready(&self) -> Result<(), StateError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_are_kept_for_their_retention_then_pruned_oldest_first() {
        let start = Instant::now();
        let mut kept = Resolutions::default();
        kept.keep("a", Resolution::Abandoned, start);
        kept.keep("b", Resolution::Abandoned, start + Duration::from_secs(10));
        assert_eq!(kept.by_id.len(), 2);
        kept.keep("c", Resolution::Abandoned, start + RESOLVED_RETENTION);
        assert!(!kept.by_id.contains_key("a"));
        assert!(kept.by_id.contains_key("b") && kept.by_id.contains_key("c"));
        assert_eq!(kept.by_age.len(), 2);
    }

    #[test]
    fn a_retry_budgets_use_is_summed_over_its_window_of_whole_seconds() {
        let state = InProcess::new(None);
        let at = |seconds: u64| state.epoch + Duration::from_secs(seconds);
        let window = Duration::from_secs(10);
        let used = |deposits, withdrawals| BudgetUse {
            deposits,
            withdrawals,
        };
        assert_eq!(
            state.retry_budget_at("up:a", used(3, 1), window, at(0)),
            used(3, 1)
        );
        assert_eq!(
            state.retry_budget_at("up:a", used(2, 0), window, at(9)),
            used(5, 1)
        );
        // Another budget is apart.
        assert_eq!(
            state.retry_budget_at("up:b", used(0, 0), window, at(9)),
            used(0, 0)
        );
        // Second 0 has left the window; second 9 is still in it.
        assert_eq!(
            state.retry_budget_at("up:a", used(0, 0), window, at(10)),
            used(2, 0)
        );
        assert_eq!(
            state.retry_budget_at("up:a", used(0, 0), window, at(19)),
            used(0, 0)
        );
        assert!(held(&state.budgets)["up:a"].is_empty());
    }
}

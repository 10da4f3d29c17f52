//! The in-process backend: one gateway's state in its own memory, and the
//! drift lock's approvals in the lock file.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use mcp_hints::fingerprint::PinnedTool;
use tokio::sync::broadcast;

use super::{BudgetUse, Counted, SharedState, StateError, Window};
use crate::approval::{DriftLock, Parked, Resolution};
use crate::session::{History, HistoryEvent, HistoryLimits};

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
    /// Each session's history by its key. Every record sweeps out, at
    /// most once per [`HISTORY_SWEEP`], the histories idle past their
    /// time, so the map holds about the sessions active within
    /// `[session] idle_secs`.
    histories: Mutex<Histories>,
}

/// How often recording a history also sweeps out the idle ones.
const HISTORY_SWEEP: Duration = Duration::from_secs(10);

/// The sessions' histories, and when they were last swept.
#[derive(Debug)]
struct Histories {
    by_session: HashMap<String, SessionLog>,
    swept: Instant,
}

/// One session's events, each with its time in ms since the Unix epoch,
/// oldest first, and when it is forgotten.
#[derive(Debug)]
struct SessionLog {
    events: VecDeque<(u64, HistoryEvent)>,
    expires: Instant,
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
            histories: Mutex::new(Histories {
                by_session: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// [`SharedState::record_history`] at `now`, `at_ms` its time since
    /// the Unix epoch (tests pass their own).
    pub(crate) fn record_history_at(
        &self,
        session: &str,
        event: &HistoryEvent,
        limits: HistoryLimits,
        now: Instant,
        at_ms: u64,
    ) {
        let mut histories = held(&self.histories);
        if now.saturating_duration_since(histories.swept) >= HISTORY_SWEEP {
            histories.by_session.retain(|_, log| log.expires > now);
            histories.swept = now;
        }
        let log = histories
            .by_session
            .entry(session.to_owned())
            .or_insert_with(|| SessionLog {
                events: VecDeque::new(),
                expires: now,
            });
        if log.expires <= now {
            // Idle past its time, not yet swept: a new history.
            log.events.clear();
        }
        log.events.push_back((at_ms, event.clone()));
        while log.events.len() > limits.max_events() {
            log.events.pop_front();
        }
        log.expires = now + limits.idle;
    }

    /// [`SharedState::history`] at `now`, `now_ms` its time since the
    /// Unix epoch.
    pub(crate) fn history_at(&self, session: &str, now: Instant, now_ms: u64) -> History {
        let histories = held(&self.histories);
        match histories.by_session.get(session) {
            Some(log) if log.expires > now => History::fold(now_ms, log.events.iter().cloned()),
            _ => History {
                now_ms,
                calls: Vec::new(),
            },
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
    fn shares_sessions(&self) -> bool {
        false
    }

    async fn open_session(&self, _: &str, _: &str, _: &str) -> Result<(), StateError> {
        Ok(())
    }

    async fn session_opener(&self, _: &str, _: &str) -> Result<Option<String>, StateError> {
        Ok(None)
    }

    async fn end_session(&self, _: &str) -> Result<(), StateError> {
        Ok(())
    }

    async fn record_history(
        &self,
        session: &str,
        event: &HistoryEvent,
        limits: HistoryLimits,
    ) -> Result<(), StateError> {
        self.record_history_at(session, event, limits, Instant::now(), unix_ms());
        Ok(())
    }

    async fn history(&self, session: &str) -> Result<History, StateError> {
        Ok(self.history_at(session, Instant::now(), unix_ms()))
    }

    async fn ready(&self) -> Result<(), StateError> {
        Ok(())
    }
}

/// Milliseconds since the Unix epoch by this process's clock (0 before
/// it).
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
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

    fn called(id: &str) -> HistoryEvent {
        HistoryEvent::Called {
            id: id.to_owned(),
            upstream: "notes".to_owned(),
            tool: "append".to_owned(),
            hints: crate::session::HeldHints([false, true, false, false]),
        }
    }

    #[test]
    fn a_history_keeps_its_last_calls_until_it_is_idle_past_its_time() {
        let state = InProcess::new(None);
        let start = Instant::now();
        let limits = HistoryLimits {
            max_calls: 2,
            idle: Duration::from_secs(60),
        };
        for (index, id) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            let at = start + Duration::from_secs(index as u64);
            state.record_history_at("s1", &called(id), limits, at, 1_000 + index as u64);
        }
        let history = state.history_at("s1", start + Duration::from_secs(5), 9_000);
        assert_eq!(history.now_ms, 9_000);
        // Four events are kept: the last four calls (no `Finished` here).
        let ids: Vec<&str> = history.calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["b", "c", "d", "e"]);
        assert_eq!(history.calls[0].at_ms, 1_001);
        // Another session shares nothing.
        assert!(state.history_at("s2", start, 0).calls.is_empty());
        // 60 s after its last event it is gone, and a record then starts
        // afresh.
        let idle = start + Duration::from_secs(4 + 60);
        assert!(state.history_at("s1", idle, 0).calls.is_empty());
        state.record_history_at("s1", &called("f"), limits, idle, 2_000);
        let ids: Vec<String> = state
            .history_at("s1", idle, 2_000)
            .calls
            .into_iter()
            .map(|call| call.id)
            .collect();
        assert_eq!(ids, ["f"]);
    }

    #[test]
    fn recording_sweeps_out_idle_histories() {
        let state = InProcess::new(None);
        let start = Instant::now();
        let limits = HistoryLimits {
            max_calls: 4,
            idle: Duration::from_secs(1),
        };
        state.record_history_at("old", &called("a"), limits, start, 0);
        let later = start + HISTORY_SWEEP + Duration::from_secs(1);
        state.record_history_at("new", &called("b"), limits, later, 0);
        let histories = held(&state.histories);
        assert!(!histories.by_session.contains_key("old"));
        assert!(histories.by_session.contains_key("new"));
    }
}

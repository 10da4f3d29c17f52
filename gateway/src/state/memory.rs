//! The in-process backend: one gateway's state in its own memory, and the
//! drift lock's approvals in the lock file.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcp_hints::fingerprint::PinnedTool;
use tokio::sync::broadcast;

use super::{Counted, SharedState, StateError, Window};
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
    /// Resolutions by id, with when they were made, pruned past
    /// [`RESOLVED_RETENTION`] as new ones come.
    resolutions: Mutex<HashMap<String, (Instant, Resolution)>>,
    resolved: broadcast::Sender<String>,
    /// The drift lock (`[lock]` with `deny_drift`), when there is one.
    drift: Option<tokio::sync::Mutex<DriftLock>>,
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
            resolutions: Mutex::new(HashMap::new()),
            resolved: broadcast::channel(64).0,
            drift: drift.map(tokio::sync::Mutex::new),
        }
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
        Ok(())
    }

    async fn resolve(&self, id: &str, resolution: &Resolution) -> Result<bool, StateError> {
        if held(&self.parked).remove(id).is_none() {
            return Ok(false);
        }
        let now = Instant::now();
        let mut resolutions = held(&self.resolutions);
        resolutions.retain(|_, (at, _)| now.saturating_duration_since(*at) < RESOLVED_RETENTION);
        resolutions.insert(id.to_owned(), (now, resolution.clone()));
        drop(resolutions);
        // Nobody listening is fine: the waiting call polls.
        let _ = self.resolved.send(id.to_owned());
        Ok(true)
    }

    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StateError> {
        Ok(held(&self.resolutions)
            .get(id)
            .map(|(_, resolution)| resolution.clone()))
    }

    async fn pending(&self) -> Result<Vec<Parked>, StateError> {
        Ok(held(&self.parked).values().cloned().collect())
    }

    fn resolved(&self) -> broadcast::Receiver<String> {
        self.resolved.subscribe()
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

    async fn ready(&self) -> Result<(), StateError> {
        Ok(())
    }
}

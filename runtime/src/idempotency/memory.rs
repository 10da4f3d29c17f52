//! The in-memory store, the default: records in one process's memory,
//! within a capacity bound. A full store makes room by dropping records
//! past their retention; it never evicts one in progress, and by default
//! none within its retention either, since a resend of an evicted key
//! would run again.
//!
//! A cache crate such as moka evicts by its own policy, which may pick an
//! entry in progress and let a second call run while the first still
//! does; so this is a plain map under a mutex, with the completed records
//! also kept in order of completion for eviction.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::defaults;
use super::store::{
    Claim, IdempotencyStore, Record, RecordKey, RecordState, RecordedResult, Reservation, Standing,
    StoreError,
};

/// Records kept in this process's memory; they are gone when it exits.
///
/// At most [`capacity`](Self::capacity) records are kept (default
/// [`defaults::MEMORY_CAPACITY`]). When a new key finds the store full,
/// records past their retention are dropped, oldest first. When none is,
/// the new key is refused with [`StoreError::Full`] (the call does not run,
/// and the client is told to retry later), because evicting a record still
/// within its retention would let a resend of its key run a second time.
/// [`evict_unexpired_when_full`](Self::evict_unexpired_when_full) trades
/// that guarantee for availability. Records in progress are never evicted.
///
/// Size the capacity to the keyed calls the server takes in one retention
/// window (24 hours by default), or use a persistent store. The records
/// are gone when the process exits: a client that restarts the server must
/// not count on them (see `ReplaySafeClientBuilder::keys_survive_restarts`).
///
/// ```
/// use mcp_hints::idempotency::{Idempotency, MemoryStore};
///
/// let idempotency = Idempotency::builder()
///     .store(MemoryStore::with_capacity(1_000))
///     .build();
/// # let _ = idempotency;
/// ```
#[derive(Debug)]
pub struct MemoryStore {
    capacity: usize,
    evict_unexpired: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    records: HashMap<RecordKey, Record, foldhash::fast::RandomState>,
    /// (completed at, key) of every completed record, oldest first.
    completed: BTreeSet<(u64, RecordKey)>,
}

impl State {
    fn remove(&mut self, key: &RecordKey) -> Option<Record> {
        let record = self.records.remove(key)?;
        if let RecordState::Completed { completed_ms, .. } = &record.state {
            self.completed.remove(&(*completed_ms, key.clone()));
        }
        Some(record)
    }

    /// Makes room for one more record: drops records past `retention`
    /// at `now_ms`, oldest first, and, when `evict_unexpired`, the oldest
    /// completed ones still within it. False when no room could be made.
    fn make_room(
        &mut self,
        capacity: usize,
        now_ms: u64,
        retention: Duration,
        evict_unexpired: bool,
    ) -> bool {
        while self.records.len() >= capacity {
            let Some((_, oldest)) = self.completed.first() else {
                return false;
            };
            let expired = self
                .records
                .get(oldest)
                .is_none_or(|record| record.standing(now_ms, retention) == Standing::Expired);
            if !expired && !evict_unexpired {
                return false;
            }
            let (_, oldest) = self.completed.pop_first().expect("just read");
            if !expired {
                tracing::warn!(record = %oldest, "idempotency record evicted within its retention: the store is full, and a resend of this key will run again");
            }
            self.records.remove(&oldest);
        }
        true
    }
}

impl MemoryStore {
    /// A store of at most [`defaults::MEMORY_CAPACITY`] records.
    pub fn new() -> MemoryStore {
        MemoryStore::with_capacity(defaults::MEMORY_CAPACITY)
    }

    /// A store of at most `capacity` records (0 refuses every key).
    pub fn with_capacity(capacity: usize) -> MemoryStore {
        MemoryStore {
            capacity,
            evict_unexpired: false,
            state: Mutex::new(State::default()),
        }
    }

    /// When full, evicts the record that completed first even while it is
    /// within its retention, instead of refusing the new key. The store
    /// then always takes new keys, and a resend of an evicted key runs
    /// again: a write may land twice. Each such eviction is logged.
    #[must_use]
    pub fn evict_unexpired_when_full(mut self) -> MemoryStore {
        self.evict_unexpired = true;
        self
    }

    /// The most records this store keeps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many records it keeps now, in progress and completed.
    pub fn len(&self) -> usize {
        self.state().records.len()
    }

    /// Whether it keeps no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change below is made whole before the lock is released, so
        // a panic elsewhere cannot leave a half-made change behind.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The record under `key`, changed in place by `change`, when it is in
    /// progress under `token`.
    fn with_lease(
        &self,
        key: &RecordKey,
        token: &str,
        change: impl FnOnce(&mut Record) -> Option<u64>,
    ) -> bool {
        let mut state = self.state();
        let Some(record) = state.records.get_mut(key) else {
            return false;
        };
        if record.token() != Some(token) {
            return false;
        }
        // A record that completes joins the eviction order.
        if let Some(completed_ms) = change(record) {
            state.completed.insert((completed_ms, key.clone()));
        }
        true
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

#[async_trait]
impl IdempotencyStore for MemoryStore {
    async fn reserve(&self, key: &RecordKey, claim: &Claim) -> Result<Reservation, StoreError> {
        let mut state = self.state();
        let answer = match state.records.get(key) {
            None => Reservation::Reserved,
            Some(record) => match record.standing(claim.now_ms, claim.retention) {
                Standing::Holds => return Ok(Reservation::Held(record.clone())),
                Standing::Expired => {
                    state.remove(key);
                    Reservation::Reserved
                }
                Standing::LeaseOver => Reservation::TookOver {
                    previous: state.remove(key).expect("the record was just read"),
                },
            },
        };
        if !state.make_room(
            self.capacity,
            claim.now_ms,
            claim.retention,
            self.evict_unexpired,
        ) {
            return Err(StoreError::Full {
                capacity: self.capacity,
            });
        }
        state.records.insert(key.clone(), claim.record());
        Ok(answer)
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: &str,
        _now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError> {
        Ok(self.with_lease(key, token, |record| {
            if let RecordState::InProgress {
                lease_until_ms: until,
                ..
            } = &mut record.state
            {
                *until = lease_until_ms;
            }
            None
        }))
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: &str,
        result: RecordedResult,
        now_ms: u64,
        _retention: Duration,
    ) -> Result<bool, StoreError> {
        // Retention is checked on every read (`Record::standing`), and
        // capacity evicts the oldest: nothing to schedule here.
        Ok(self.with_lease(key, token, |record| {
            record.state = RecordState::Completed {
                result,
                completed_ms: now_ms,
            };
            Some(now_ms)
        }))
    }

    async fn release(&self, key: &RecordKey, token: &str) -> Result<bool, StoreError> {
        let mut state = self.state();
        let held = state
            .records
            .get(key)
            .is_some_and(|record| record.token() == Some(token));
        if held {
            // In progress: it is in no eviction order.
            state.records.remove(key);
        }
        Ok(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(token: &str, now_ms: u64) -> Claim {
        Claim {
            arguments: "sha256:args".to_owned(),
            token: token.to_owned(),
            now_ms,
            lease_until_ms: now_ms + 1_000,
            retention: Duration::from_secs(60),
        }
    }

    fn key(name: &str) -> RecordKey {
        RecordKey::new("tool", None, name)
    }

    /// Fills a store of 2 with the completed keys "a" (at 1) and "b" (at 2).
    async fn two_completed(store: MemoryStore) -> MemoryStore {
        for (name, at) in [("a", 1), ("b", 2)] {
            store.reserve(&key(name), &claim(name, at)).await.unwrap();
            assert!(
                store
                    .complete(&key(name), name, json!({}).into(), at, Duration::ZERO)
                    .await
                    .unwrap()
            );
        }
        store
    }

    #[tokio::test]
    async fn full_of_records_within_their_retention_refuses_a_new_key() {
        let store = two_completed(MemoryStore::with_capacity(2)).await;
        assert!(matches!(
            store.reserve(&key("c"), &claim("c", 3)).await,
            Err(StoreError::Full { capacity: 2 })
        ));
        // Both keys still hold: a resend of either is not run again.
        for name in ["a", "b"] {
            assert!(matches!(
                store.reserve(&key(name), &claim("again", 4)).await.unwrap(),
                Reservation::Held(_)
            ));
        }
    }

    #[tokio::test]
    async fn a_full_store_drops_records_past_their_retention_first() {
        let store = two_completed(MemoryStore::with_capacity(2)).await;
        // 60 s after "a" completed it is past its retention; "b" is not.
        let late = claim("c", 60_001);
        assert_eq!(
            store.reserve(&key("c"), &late).await.unwrap(),
            Reservation::Reserved
        );
        assert_eq!(store.len(), 2);
        assert!(matches!(
            store
                .reserve(&key("b"), &claim("b2", 60_001))
                .await
                .unwrap(),
            Reservation::Held(_)
        ));
    }

    #[tokio::test]
    async fn evicting_when_full_drops_the_oldest_completed_record() {
        let store = two_completed(MemoryStore::with_capacity(2).evict_unexpired_when_full()).await;
        assert_eq!(
            store.reserve(&key("c"), &claim("c", 3)).await.unwrap(),
            Reservation::Reserved
        );
        assert_eq!(store.len(), 2);
        // "a" completed first and is gone; "b" still holds its key.
        assert_eq!(
            store.reserve(&key("a"), &claim("a2", 4)).await.unwrap(),
            Reservation::Reserved
        );
        assert!(matches!(
            store.reserve(&key("b"), &claim("b2", 5)).await,
            Err(StoreError::Full { capacity: 2 })
        ));
    }

    #[tokio::test]
    async fn records_in_progress_are_never_evicted() {
        let store = MemoryStore::with_capacity(1);
        store.reserve(&key("a"), &claim("a", 1)).await.unwrap();
        assert!(matches!(
            store.reserve(&key("b"), &claim("b", 2)).await,
            Err(StoreError::Full { capacity: 1 })
        ));
        // The refused key left nothing behind; the one in progress stands.
        assert_eq!(store.len(), 1);
        assert!(matches!(
            store.reserve(&key("a"), &claim("a2", 3)).await.unwrap(),
            Reservation::Held(_)
        ));
    }

    #[tokio::test]
    async fn only_the_token_holder_changes_a_record() {
        let store = MemoryStore::new();
        store.reserve(&key("a"), &claim("mine", 1)).await.unwrap();
        assert!(!store.release(&key("a"), "theirs").await.unwrap());
        assert!(!store.renew(&key("a"), "theirs", 2, 99).await.unwrap());
        assert!(
            !store
                .complete(&key("a"), "theirs", json!({}).into(), 2, Duration::ZERO)
                .await
                .unwrap()
        );
        assert!(store.release(&key("a"), "mine").await.unwrap());
        assert!(store.is_empty());
    }
}

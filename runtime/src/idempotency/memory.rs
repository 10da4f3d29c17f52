//! The in-memory store, the default: records in one process's memory,
//! within a capacity bound. A full store makes room by dropping records
//! past their retention; it never evicts one in progress, and by default
//! none within its retention either, since a resend of an evicted key
//! would run again.
//!
//! A cache crate such as moka evicts by its own policy, which may pick an
//! entry in progress and let a second call run while the first still
//! does; so this is a plain hash table under a mutex, with the completed
//! records also kept in order of completion for eviction.
//!
//! Every keyed call leaves a record here for its retention (a day by
//! default), so a record takes no allocation of its own: a small
//! allocation kept for each call, among the many a call makes and frees,
//! fragments the allocator's heap, and the calls that follow pay for it
//! (they find fewer freed blocks of their sizes: sampled over 60,000
//! keyed calls, glibc's `_int_malloc` and `malloc_consolidate` took 7.6%
//! of the time with an allocation kept per record, 1.4% without, and
//! 1.9% of unkeyed calls'). A record's key and result are copied, one
//! after the other, into pages of texts written in order of completion,
//! and the digest of its arguments is kept as its 32 bytes; records leave
//! mostly in the order they came (oldest first), so pages are freed whole.

use std::collections::VecDeque;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use hashbrown::HashTable;
use mcp_hints_core::escape;

use super::defaults;
use super::store::{
    Claim, IdempotencyStore, Record, RecordKey, RecordState, RecordedResult, Reservation, Standing,
    StoreError,
};
use crate::canonical::{sha256_bytes, sha256_text};

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
pub struct MemoryStore {
    capacity: usize,
    evict_unexpired: bool,
    state: Mutex<State>,
}

/// The records shown by their number, not their texts.
impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("capacity", &self.capacity)
            .field("evict_unexpired", &self.evict_unexpired)
            .field("records", &self.len())
            .finish()
    }
}

#[derive(Default)]
struct State {
    /// The records, found by the hash of their key's text.
    records: HashTable<Slot>,
    hasher: foldhash::fast::RandomState,
    texts: Texts,
    completed: Order,
    /// The number of the next record.
    next_id: u64,
}

/// A [`Record`] as this store keeps it.
struct Slot {
    /// The hash of its key's text.
    hash: u64,
    /// Names it in the order of completion; never given twice.
    id: u64,
    arguments: Digest,
    created_ms: u64,
    state: SlotState,
}

enum SlotState {
    /// The key is the running call's own, shared with it until it
    /// completes.
    InProgress {
        key: RecordKey,
        token: Arc<str>,
        lease_until_ms: u64,
    },
    /// The key and result are in [`Texts`].
    Completed { texts: Span, completed_ms: u64 },
}

/// [`Record::arguments`]: the bytes of a SHA-256 digest, the form
/// `arguments_digest` writes, or any other text as it came.
enum Digest {
    Sha256([u8; 32]),
    Text(Box<str>),
}

impl Digest {
    fn of(text: &str) -> Digest {
        sha256_bytes(text).map_or_else(|| Digest::Text(text.into()), Digest::Sha256)
    }

    fn text(&self) -> String {
        match self {
            Digest::Sha256(bytes) => sha256_text(bytes),
            Digest::Text(text) => text.to_string(),
        }
    }
}

/// A [`Claim`] as the store reads it, borrowed: a keyed call that asks
/// the store directly ([`MemoryStore::reserve_now`]) gives its digest as
/// the bytes it already has, and copies nothing.
#[derive(Clone, Copy)]
pub(crate) struct Ask<'a> {
    pub(crate) arguments: Arguments<'a>,
    pub(crate) token: Token<'a>,
    pub(crate) now_ms: u64,
    pub(crate) lease_until_ms: u64,
    pub(crate) retention: Duration,
}

/// [`Claim::arguments`]: the bytes of a SHA-256 digest, or the text.
#[derive(Clone, Copy)]
pub(crate) enum Arguments<'a> {
    Sha256(&'a [u8; 32]),
    Text(&'a str),
}

/// [`Claim::token`]: shared with the call, or the text.
#[derive(Clone, Copy)]
pub(crate) enum Token<'a> {
    Shared(&'a Arc<str>),
    Text(&'a str),
}

impl<'a> Ask<'a> {
    fn of(claim: &'a Claim) -> Ask<'a> {
        Ask {
            arguments: Arguments::Text(&claim.arguments),
            token: Token::Text(&claim.token),
            now_ms: claim.now_ms,
            lease_until_ms: claim.lease_until_ms,
            retention: claim.retention,
        }
    }
}

impl Slot {
    fn key<'a>(&'a self, texts: &'a Texts) -> &'a [u8] {
        match &self.state {
            SlotState::InProgress { key, .. } => key.as_str().as_bytes(),
            SlotState::Completed { texts: span, .. } => texts.key(*span),
        }
    }

    fn standing(&self, now_ms: u64, retention: Duration) -> Standing {
        match self.state {
            SlotState::InProgress { lease_until_ms, .. } => {
                Standing::of_in_progress(self.created_ms, lease_until_ms, now_ms, retention)
            }
            SlotState::Completed { completed_ms, .. } => {
                Standing::of_completed(completed_ms, now_ms, retention)
            }
        }
    }

    fn token(&self) -> Option<&str> {
        match &self.state {
            SlotState::InProgress { token, .. } => Some(token),
            SlotState::Completed { .. } => None,
        }
    }

    /// The record as [`Record`] has it: the texts copied out.
    fn record(&self, texts: &Texts) -> Result<Record, StoreError> {
        let state = match &self.state {
            SlotState::InProgress {
                token,
                lease_until_ms,
                ..
            } => RecordState::InProgress {
                token: token.to_string(),
                lease_until_ms: *lease_until_ms,
            },
            SlotState::Completed {
                texts: span,
                completed_ms,
            } => {
                // Copied in from `str`s, so UTF-8 unless the pages are wrong.
                let result = std::str::from_utf8(texts.result(*span)).map_err(|error| {
                    StoreError::Corrupt {
                        key: escape::one_line(&String::from_utf8_lossy(texts.key(*span)))
                            .into_owned(),
                        detail: error.to_string(),
                    }
                })?;
                RecordState::Completed {
                    result: RecordedResult::from_text(result),
                    completed_ms: *completed_ms,
                }
            }
        };
        Ok(Record {
            arguments: self.arguments.text(),
            created_ms: self.created_ms,
            state,
        })
    }
}

/// The texts of completed records: each record's key and then its result,
/// appended in order of completion to pages of [`Texts::PAGE`] bytes (a
/// text too long for a quarter of one gets a page of its own). A page is
/// freed when its last record leaves; if records leave so far out of order
/// that the pages hold more than twice the texts still kept, the texts are
/// written anew, in order.
#[derive(Default)]
struct Texts {
    pages: VecDeque<Page>,
    /// The number of `pages[0]`; pages are numbered from 0 in the order
    /// they were made.
    first: u64,
    /// The bytes of the texts kept, and of the pages holding them.
    kept: usize,
    held: usize,
    /// Pages freed behind a page still in use: their places in `pages`
    /// stay, so that the pages after them keep their numbers.
    freed: usize,
}

struct Page {
    text: Vec<u8>,
    /// How many records have their texts here.
    records: usize,
}

/// Where a completed record's texts are: its key at `start`, its result
/// right after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    page: u64,
    start: usize,
    key: usize,
    result: usize,
}

impl Texts {
    const PAGE: usize = 64 * 1024;

    /// Appends `key` and `result`, and says where.
    fn add(&mut self, key: &[u8], result: &[u8]) -> Span {
        let len = key.len() + result.len();
        let fits = self
            .pages
            .back()
            .is_some_and(|page| page.text.capacity() - page.text.len() >= len);
        if !fits {
            // A last page that no record has texts in any more is not kept
            // behind the new one.
            if self.pages.back().is_some_and(|page| page.records == 0) {
                let unused = self.pages.pop_back().expect("just read");
                self.held = self.held.saturating_sub(unused.text.capacity());
            }
            let capacity = if len > Self::PAGE / 4 {
                len
            } else {
                Self::PAGE
            };
            let page = Page {
                text: Vec::with_capacity(capacity),
                records: 0,
            };
            self.held += page.text.capacity();
            self.pages.push_back(page);
        }
        let number = self.first + self.pages.len() as u64 - 1;
        let page = self.pages.back_mut().expect("a page was just made");
        let start = page.text.len();
        page.text.extend_from_slice(key);
        page.text.extend_from_slice(result);
        page.records += 1;
        self.kept += len;
        Span {
            page: number,
            start,
            key: key.len(),
            result: result.len(),
        }
    }

    fn page(&self, span: Span) -> Option<&Page> {
        let at = span.page.checked_sub(self.first)?;
        self.pages.get(usize::try_from(at).ok()?)
    }

    fn bytes(&self, span: Span, start: usize, len: usize) -> &[u8] {
        self.page(span)
            .and_then(|page| page.text.get(start..start + len))
            .unwrap_or_default()
    }

    fn key(&self, span: Span) -> &[u8] {
        self.bytes(span, span.start, span.key)
    }

    fn result(&self, span: Span) -> &[u8] {
        self.bytes(span, span.start + span.key, span.result)
    }

    /// Lets go of a record's texts: its page is freed once no record has
    /// texts there, and pages at the front once every one before is freed.
    fn remove(&mut self, span: Span) {
        self.kept = self.kept.saturating_sub(span.key + span.result);
        let Some(at) = span
            .page
            .checked_sub(self.first)
            .and_then(|at| usize::try_from(at).ok())
        else {
            return;
        };
        let written_to = at + 1 == self.pages.len();
        let Some(page) = self.pages.get_mut(at) else {
            return;
        };
        page.records = page.records.saturating_sub(1);
        if page.records == 0 {
            if written_to {
                // Kept, and written from its start again.
                page.text.clear();
            } else {
                self.held = self.held.saturating_sub(page.text.capacity());
                page.text = Vec::new();
                self.freed += 1;
            }
        }
        // A page with no records before the last is a freed one (`add`
        // drops an unused last page before it makes another).
        while self.pages.len() > 1 && self.pages.front().is_some_and(|page| page.records == 0) {
            self.pages.pop_front();
            self.first += 1;
            self.freed = self.freed.saturating_sub(1);
        }
    }

    /// Whether the pages hold more than twice the texts kept (and a few
    /// pages more), or more than half the places in `pages` are of freed
    /// pages (and more than a few): records have left out of order, or one
    /// kept long holds the first page while the pages after it come and go.
    fn wasteful(&self) -> bool {
        self.held > 2 * self.kept + 4 * Self::PAGE
            || (self.freed > 64 && self.freed > self.pages.len() / 2)
    }
}

/// The completed records, oldest first; ties in the order they completed.
#[derive(Default)]
struct Order(VecDeque<Done>);

#[derive(Clone, Copy)]
struct Done {
    completed_ms: u64,
    /// The record's hash and number ([`Slot`]).
    hash: u64,
    id: u64,
}

impl Order {
    /// Puts `done` in its place.
    fn push(&mut self, done: Done) {
        // One clock gives growing times, so a record joins at the back; a
        // clock set back (or several clocks sharing this store) puts it in
        // its place among the others.
        if self
            .0
            .back()
            .is_none_or(|last| last.completed_ms <= done.completed_ms)
        {
            self.0.push_back(done);
        } else {
            let at = self
                .0
                .partition_point(|other| other.completed_ms <= done.completed_ms);
            self.0.insert(at, done);
        }
    }

    /// Takes out record `id`, completed at `completed_ms`.
    fn forget(&mut self, completed_ms: u64, id: u64) {
        let from = self
            .0
            .partition_point(|other| other.completed_ms < completed_ms);
        let found = self
            .0
            .range(from..)
            .take_while(|other| other.completed_ms == completed_ms)
            .position(|other| other.id == id);
        if let Some(offset) = found {
            self.0.remove(from + offset);
        }
    }
}

impl State {
    fn hash(&self, key: &RecordKey) -> u64 {
        self.hasher.hash_one(key.as_str().as_bytes())
    }

    /// The in-progress record `ask` stores ([`Claim::record`]) under
    /// `key`, numbered from `next_id`.
    fn slot(next_id: &mut u64, hash: u64, key: &RecordKey, ask: Ask<'_>) -> Slot {
        let id = *next_id;
        *next_id += 1;
        Slot {
            hash,
            id,
            arguments: match ask.arguments {
                Arguments::Sha256(bytes) => Digest::Sha256(*bytes),
                Arguments::Text(text) => Digest::of(text),
            },
            created_ms: ask.now_ms,
            state: SlotState::InProgress {
                key: key.clone(),
                token: match ask.token {
                    Token::Shared(token) => token.clone(),
                    Token::Text(token) => token.into(),
                },
                lease_until_ms: ask.lease_until_ms,
            },
        }
    }

    /// The record under `key`, whose text hashes to `hash`, when there is
    /// one.
    fn find<'a>(
        records: &'a mut HashTable<Slot>,
        texts: &Texts,
        hash: u64,
        key: &RecordKey,
    ) -> Option<&'a mut Slot> {
        records.find_mut(hash, |slot| {
            slot.hash == hash && slot.key(texts) == key.as_str().as_bytes()
        })
    }

    /// Lets go of what a record that is gone kept: its texts and its place
    /// in the order of completion.
    fn forget(&mut self, gone: &Slot) {
        if let SlotState::Completed {
            texts,
            completed_ms,
        } = gone.state
        {
            self.texts.remove(texts);
            self.completed.forget(completed_ms, gone.id);
            if self.texts.wasteful() {
                self.rewrite_texts();
            }
        }
    }

    /// Writes the texts of the completed records anew, oldest first, into
    /// as few pages as they need.
    fn rewrite_texts(&mut self) {
        let old = std::mem::take(&mut self.texts);
        for done in &self.completed.0 {
            let found = self.records.find_mut(done.hash, |slot| slot.id == done.id);
            if let Some(Slot {
                state: SlotState::Completed { texts: span, .. },
                ..
            }) = found
            {
                *span = self.texts.add(old.key(*span), old.result(*span));
            }
        }
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
            let Some(&oldest) = self.completed.0.front() else {
                return false;
            };
            let found = self
                .records
                .find_entry(oldest.hash, |slot| slot.id == oldest.id);
            let expired = found.as_ref().map_or(true, |slot| {
                slot.get().standing(now_ms, retention) == Standing::Expired
            });
            if !expired && !evict_unexpired {
                return false;
            }
            let Ok(found) = found else {
                self.completed.0.pop_front();
                continue;
            };
            let (gone, _) = found.remove();
            if !expired {
                tracing::warn!(record = %escape::one_line(&String::from_utf8_lossy(gone.key(&self.texts))), "idempotency record evicted within its retention: the store is full, and a resend of this key will run again");
            }
            self.forget(&gone);
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

    /// [`IdempotencyStore::reserve`] of `ask`, answered at once.
    pub(crate) fn reserve_now(
        &self,
        key: &RecordKey,
        ask: Ask<'_>,
    ) -> Result<Reservation, StoreError> {
        let mut state = self.state();
        let state = &mut *state;
        let hash = state.hash(key);
        let State {
            records,
            texts,
            next_id,
            ..
        } = state;
        if let Some(found) = State::find(records, texts, hash, key) {
            let standing = found.standing(ask.now_ms, ask.retention);
            if standing == Standing::Holds {
                return Ok(Reservation::Held(found.record(texts)?));
            }
            // A record that no longer holds its key is replaced in its
            // place: the store keeps as many records as before.
            let gone = std::mem::replace(found, State::slot(next_id, hash, key, ask));
            let answer = match standing {
                Standing::LeaseOver => Reservation::TookOver {
                    previous: gone.record(texts)?,
                },
                _ => Reservation::Reserved,
            };
            state.forget(&gone);
            return Ok(answer);
        }
        if !state.make_room(
            self.capacity,
            ask.now_ms,
            ask.retention,
            self.evict_unexpired,
        ) {
            return Err(StoreError::Full {
                capacity: self.capacity,
            });
        }
        let slot = State::slot(&mut state.next_id, hash, key, ask);
        state.records.insert_unique(hash, slot, |slot| slot.hash);
        Ok(Reservation::Reserved)
    }

    /// [`IdempotencyStore::complete`] of `result` serialized, answered at
    /// once: its text goes from the buffer it is written into straight
    /// into the store's pages.
    ///
    /// # Errors
    ///
    /// serde_json's error when `result` does not serialize to JSON; then
    /// nothing is changed.
    pub(crate) fn complete_serialized<T: serde::Serialize + ?Sized>(
        &self,
        key: &RecordKey,
        token: &str,
        result: &T,
        now_ms: u64,
    ) -> Result<bool, serde_json::Error> {
        crate::scratch::with(|text| {
            serde_json::to_writer(&mut *text, result)?;
            Ok(self.complete_text(key, token, text, now_ms))
        })
    }

    /// Records `result`, a `tools/call` result's JSON text, under `key` when
    /// it is in progress under `token`; whether it was.
    fn complete_text(&self, key: &RecordKey, token: &str, result: &[u8], now_ms: u64) -> bool {
        // Retention is checked on every read (`Slot::standing`), and
        // capacity evicts the oldest: nothing to schedule here.
        let mut state = self.state();
        let state = &mut *state;
        let hash = state.hash(key);
        let found = State::find(&mut state.records, &state.texts, hash, key);
        let Some(found) = found.filter(|slot| slot.token() == Some(token)) else {
            return false;
        };
        let span = state.texts.add(key.as_str().as_bytes(), result);
        found.state = SlotState::Completed {
            texts: span,
            completed_ms: now_ms,
        };
        state.completed.push(Done {
            completed_ms: now_ms,
            hash,
            id: found.id,
        });
        true
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every change below is made whole before the lock is released, so
        // a panic elsewhere cannot leave a half-made change behind.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
        self.reserve_now(key, Ask::of(claim))
    }

    async fn renew(
        &self,
        key: &RecordKey,
        token: &str,
        _now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut state = self.state();
        let state = &mut *state;
        let hash = state.hash(key);
        let Some(found) = State::find(&mut state.records, &state.texts, hash, key) else {
            return Ok(false);
        };
        match &mut found.state {
            SlotState::InProgress {
                token: held,
                lease_until_ms: until,
                ..
            } if **held == *token => {
                *until = lease_until_ms;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn complete(
        &self,
        key: &RecordKey,
        token: &str,
        result: RecordedResult,
        now_ms: u64,
        _retention: Duration,
    ) -> Result<bool, StoreError> {
        Ok(self.complete_text(key, token, result.as_str().as_bytes(), now_ms))
    }

    async fn release(&self, key: &RecordKey, token: &str) -> Result<bool, StoreError> {
        let mut state = self.state();
        let state = &mut *state;
        let hash = state.hash(key);
        let texts = &state.texts;
        let found = state.records.find_entry(hash, |slot| {
            slot.hash == hash && slot.key(texts) == key.as_str().as_bytes()
        });
        match found {
            // In progress: it has no texts and is in no order.
            Ok(found) if found.get().token() == Some(token) => {
                found.remove();
                Ok(true)
            }
            _ => Ok(false),
        }
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

    /// The record `store` holds under `name`, read by a claim at `now_ms`.
    async fn held(store: &MemoryStore, name: &str, now_ms: u64) -> Record {
        match store.reserve(&key(name), &claim("read", now_ms)).await {
            Ok(Reservation::Held(record)) => record,
            other => panic!("expected {name} held, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_digest_kept_as_bytes_reads_back_as_its_text() {
        let store = MemoryStore::new();
        let digest = crate::canonical::arguments_digest(None, None);
        let texts = [
            digest.clone(),
            // Not the digest `arguments_digest` writes: kept as it came.
            digest.to_uppercase().replace("SHA256", "sha256"),
            format!("{digest}0"),
            "sha256:\"quoted\"/é".to_owned(),
            String::new(),
        ];
        for (n, text) in texts.iter().enumerate() {
            let name = n.to_string();
            let claim = Claim {
                arguments: text.clone(),
                ..claim(&name, 1)
            };
            store.reserve(&key(&name), &claim).await.unwrap();
            assert_eq!(&held(&store, &name, 2).await.arguments, text);
        }
    }

    #[tokio::test]
    async fn pages_behind_a_record_kept_long_do_not_pile_up() {
        let store = MemoryStore::new();
        store.reserve(&key("old"), &claim("old", 1)).await.unwrap();
        store
            .complete(&key("old"), "old", json!({}).into(), 1, Duration::ZERO)
            .await
            .unwrap();
        // Two keys reused past a retention of 1 ms, each result a sixteenth
        // of a page: a page filled every 16 calls, emptied soon after,
        // behind the first page, which "old" holds.
        let text = "x".repeat(4_000);
        let mut now = 2;
        for round in 0..20_000_u64 {
            now += 10;
            let token = round.to_string();
            let claim = Claim {
                retention: Duration::from_millis(1),
                ..claim(&token, now)
            };
            let name = if round % 2 == 0 { "b" } else { "c" };
            assert_eq!(
                store.reserve(&key(name), &claim).await.unwrap(),
                Reservation::Reserved
            );
            let result = RecordedResult::from(json!({ "content": text }));
            assert!(
                store
                    .complete(&key(name), &token, result, now, Duration::ZERO)
                    .await
                    .unwrap()
            );
        }
        assert_eq!(store.len(), 3);
        let pages = store.state().texts.pages.len();
        assert!(pages <= 200, "{pages} pages for 3 records");
        // "old" is still kept, whole.
        let read = Claim {
            retention: Duration::from_secs(3_600),
            ..claim("read", now)
        };
        let Reservation::Held(old) = store.reserve(&key("old"), &read).await.unwrap() else {
            panic!("\"old\" is kept");
        };
        assert!(
            matches!(old.state, RecordState::Completed { result, .. } if result.as_str() == "{}")
        );
    }

    #[tokio::test]
    async fn completed_records_keep_their_key_and_result_exactly() {
        let store = MemoryStore::new();
        let long = "é".repeat(Texts::PAGE);
        for (name, text) in [("a", "short"), ("b", long.as_str()), ("c", "after")] {
            store.reserve(&key(name), &claim(name, 1)).await.unwrap();
            let result = RecordedResult::from(json!({ "content": text }));
            assert!(
                store
                    .complete(&key(name), name, result, 2, Duration::ZERO)
                    .await
                    .unwrap()
            );
        }
        for (name, text) in [("a", "short"), ("b", long.as_str()), ("c", "after")] {
            let RecordState::Completed {
                result,
                completed_ms,
            } = held(&store, name, 3).await.state
            else {
                panic!("completed");
            };
            assert_eq!(completed_ms, 2);
            assert_eq!(result.as_str(), json!({ "content": text }).to_string());
        }
        // The long result has a page of its own, between the two others.
        assert_eq!(store.state().texts.pages.len(), 3);
    }

    #[tokio::test]
    async fn a_key_used_again_past_its_retention_leaves_the_new_record_in_place() {
        let store = MemoryStore::with_capacity(2);
        for (name, at) in [("a", 1), ("b", 2)] {
            store.reserve(&key(name), &claim(name, at)).await.unwrap();
            store
                .complete(&key(name), name, json!({}).into(), at, Duration::ZERO)
                .await
                .unwrap();
        }
        // 60 s after "a" completed it is past its retention: taken anew, in
        // progress, and so never evicted by the full store.
        assert_eq!(
            store
                .reserve(&key("a"), &claim("a2", 60_001))
                .await
                .unwrap(),
            Reservation::Reserved
        );
        // "b" is the only completed record left, and within its retention.
        assert!(matches!(
            store.reserve(&key("c"), &claim("c", 60_001)).await,
            Err(StoreError::Full { capacity: 2 })
        ));
        // Past the retention of "b" too, it makes room; "a" still runs.
        assert_eq!(
            store.reserve(&key("c"), &claim("c", 60_002)).await.unwrap(),
            Reservation::Reserved
        );
        assert!(matches!(
            held(&store, "a", 60_003).await.state,
            RecordState::InProgress { .. }
        ));
    }

    #[tokio::test]
    async fn records_completed_by_a_clock_set_back_are_evicted_oldest_first() {
        let store = MemoryStore::with_capacity(3).evict_unexpired_when_full();
        for (name, at) in [("a", 30), ("b", 10), ("c", 20)] {
            store.reserve(&key(name), &claim(name, at)).await.unwrap();
            store
                .complete(&key(name), name, json!({}).into(), at, Duration::ZERO)
                .await
                .unwrap();
        }
        // Each new key evicts the record that completed first: b, then c.
        for (new, gone, kept) in [("d", "b", ["a", "c"]), ("e", "c", ["a", "d"])] {
            store.reserve(&key(new), &claim(new, 40)).await.unwrap();
            store
                .complete(&key(new), new, json!({}).into(), 40, Duration::ZERO)
                .await
                .unwrap();
            for name in kept {
                held(&store, name, 41).await;
            }
            assert_eq!(
                store
                    .reserve(&key(gone), &claim("again", 41))
                    .await
                    .unwrap(),
                Reservation::Reserved
            );
            store.release(&key(gone), "again").await.unwrap();
        }
    }

    #[tokio::test]
    async fn texts_of_records_gone_out_of_order_are_written_anew() {
        let store = MemoryStore::new();
        let text = "x".repeat(1_000);
        // Pages of 64 texts each; then every record but one per page goes,
        // as records of a short retention would among long-kept ones.
        let names: Vec<String> = (0..64 * 12).map(|n| n.to_string()).collect();
        for name in &names {
            store.reserve(&key(name), &claim(name, 1)).await.unwrap();
            let result = RecordedResult::from(json!({ "content": text }));
            store
                .complete(&key(name), name, result, 1, Duration::ZERO)
                .await
                .unwrap();
        }
        let pages = store.state().texts.pages.len();
        for (n, name) in names.iter().enumerate().filter(|(n, _)| n % 64 != 0) {
            let mut state = store.state();
            let state = &mut *state;
            let hash = state.hash(&key(name));
            let found = state
                .records
                .find_entry(hash, |slot| {
                    slot.key(&state.texts) == key(name).as_str().as_bytes()
                })
                .unwrap_or_else(|_| panic!("record {n}"));
            let (gone, _) = found.remove();
            state.forget(&gone);
        }
        {
            let state = store.state();
            assert!(state.texts.held <= 2 * state.texts.kept + 4 * Texts::PAGE);
            assert!(
                state.texts.pages.len() < pages / 4,
                "{} pages",
                state.texts.pages.len()
            );
        }
        for name in names.iter().step_by(64) {
            let RecordState::Completed { result, .. } = held(&store, name, 2).await.state else {
                panic!("completed");
            };
            assert_eq!(result.as_str(), json!({ "content": text }).to_string());
        }
    }
}

//! The store behind idempotency keys: one async trait whose methods name
//! the state change they make (`reserve`, `renew`, `complete`, `release`),
//! each atomic in every implementation, and the record they keep.
//!
//! A record lives under a [`RecordKey`] (tool, caller scope, key) and is in
//! one of two states:
//!
//! ```text
//!            reserve                 complete
//!   (none) ----------> in progress ----------> completed
//!     ^                 |   ^  |                   |
//!     |     release     |   |  | renew             | retention over
//!     +-----------------+   +--+                   v
//!     ^                 | lease over: the next     (none)
//!     |                 | reserve takes it over
//! ```
//!
//! Whether a record still holds its key is decided by one function,
//! [`Record::standing`], so that every store applies the same rule; the
//! Redis store's scripts restate it in Lua.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_hints_core::escape;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Where a record lives: the tool, the caller scope and the key, as the
/// JSON text of `[tool, caller, key]` (`caller` is `null` when the server
/// gives no caller scope). The JSON form keeps the three apart whatever
/// characters they hold, and reads well in a store's own tools
/// (`redis-cli`, a redb dump). Cloning it counts a reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKey(Arc<str>);

impl RecordKey {
    /// The record key of `key` for `tool`, within `caller`'s scope.
    pub fn new(tool: &str, caller: Option<&str>, key: &str) -> RecordKey {
        use crate::canonical::write_string;
        // The text `serde_json::to_string(&(tool, caller, key))` makes,
        // written piece by piece into a buffer that is not kept, so that the
        // key costs one allocation, its own.
        crate::scratch::with(|text| {
            text.push(b'[');
            write_string(tool, text);
            text.push(b',');
            match caller {
                Some(caller) => write_string(caller, text),
                None => text.extend_from_slice(b"null"),
            }
            text.push(b',');
            write_string(key, text);
            text.push(b']');
            // Strings and ASCII only: UTF-8.
            RecordKey(std::str::from_utf8(text).map(Arc::from).unwrap_or_default())
        })
    }

    /// The key as stored: JSON text such as `["append_note",null,"k-1"]`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The key for people: its JSON text with every character
/// [`escape::escaped`] escaped (`\u{202e}`), since it holds what callers
/// sent and ends up in logs and messages. Not cut: a key is at most 255
/// characters, and its parts are what tell two records apart.
impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape::one_line(&self.0))
    }
}

/// What a store keeps under a [`RecordKey`]. Times are milliseconds since
/// the Unix epoch, read from the [`Clock`](super::Clock) of the
/// [`Idempotency`](super::Idempotency) that wrote them.
///
/// Serialized as JSON (`{"arguments": "sha256:...", "createdMs": ...,
/// "state": "in_progress", "token": ..., "leaseUntilMs": ...}` or `"state":
/// "completed"` with `"result"` and `"completedMs"`), the form every store
/// writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The digest of the arguments the key was first used with (see
    /// [`arguments_digest`](super::arguments_digest)).
    pub arguments: String,
    /// When the key was reserved.
    pub created_ms: u64,
    /// In progress or completed.
    #[serde(flatten)]
    pub state: RecordState,
}

/// The state of a [`Record`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RecordState {
    /// A call holds the key and is running.
    #[serde(rename_all = "camelCase")]
    InProgress {
        /// Names the call that holds the lease; only it may renew,
        /// complete or release the record.
        token: String,
        /// Until when the lease holds. A call that is still running renews
        /// it; once it has passed (the process died), the next reserve
        /// takes the record over.
        lease_until_ms: u64,
    },
    /// The call finished with a result (a tool error included), which
    /// every later call with the same key and arguments receives.
    #[serde(rename_all = "camelCase")]
    Completed {
        /// The `tools/call` result (`content`, `structuredContent`,
        /// `isError`, `_meta`), as JSON text.
        result: RecordedResult,
        /// When the call finished; the retention window counts from here.
        completed_ms: u64,
    },
}

/// A recorded `tools/call` result (MCP's `CallToolResult`, spec section
/// Server Features › Tools › Tool Result): its JSON text, written once when
/// the call completes and shared (cloning it counts a reference), so that
/// no store re-encodes it: the in-memory store copies the text into its
/// own pages, and one sending it elsewhere (Redis) sends the text as it is.
///
/// In a [`Record`]'s JSON it is the result object itself, not a string:
/// `"result": {"content": [...]}`. Two are equal when their JSON is, member
/// order aside.
#[derive(Clone)]
pub struct RecordedResult(Arc<str>);

impl RecordedResult {
    /// The JSON text of `result` (a `CallToolResult`, or any value that
    /// serializes to a JSON object).
    ///
    /// # Errors
    ///
    /// serde_json's error when `result` does not serialize to JSON (a map
    /// with non-string keys, a failing `Serialize` impl).
    pub fn of<T: Serialize + ?Sized>(result: &T) -> Result<RecordedResult, serde_json::Error> {
        // Written into a buffer that is not kept, so that the text costs one
        // allocation, the one it is kept in.
        crate::scratch::with(|text| {
            serde_json::to_writer(&mut *text, result)?;
            // serde_json writes UTF-8 only.
            Ok(RecordedResult(
                std::str::from_utf8(text).map(Arc::from).unwrap_or_default(),
            ))
        })
    }

    /// The recorded result whose JSON text is `text`, as a store read it
    /// back.
    pub(crate) fn from_text(text: &str) -> RecordedResult {
        RecordedResult(text.into())
    }

    /// The result's JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The result read back as `T` (a `CallToolResult`).
    ///
    /// # Errors
    ///
    /// serde_json's error when the text is not a `T`.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

/// The text of a JSON value.
impl From<Value> for RecordedResult {
    fn from(value: Value) -> Self {
        RecordedResult(value.to_string().into())
    }
}

impl fmt::Debug for RecordedResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RecordedResult").field(&&*self.0).finish()
    }
}

impl PartialEq for RecordedResult {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
            || matches!(
                (self.parse::<Value>(), other.parse::<Value>()),
                (Ok(mine), Ok(theirs)) if mine == theirs
            )
    }
}

impl Serialize for RecordedResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Embedded as JSON, not as a string holding JSON. Only redb writes
        // whole completed records; the copy is small beside its commit.
        let raw = serde_json::value::RawValue::from_string(self.0.to_string())
            .map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RecordedResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through a `Value`: a `RawValue` cannot be read from inside the
        // flattened, tagged state (serde buffers it first).
        Value::deserialize(deserializer).map(RecordedResult::from)
    }
}

/// Whether a record still holds its key at some moment: what
/// [`Record::standing`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The record holds its key: a reserve returns it.
    Holds,
    /// Older than the retention window: the key counts as new.
    Expired,
    /// In progress under a lease that has passed: the call that held it is
    /// gone, and the next reserve takes the record over.
    LeaseOver,
}

impl Record {
    /// Whether this record holds its key at `now_ms` under a retention
    /// window of `retention`: a completed record for `retention` after it
    /// completed; one in progress while its lease lasts, however old (a call
    /// still running must never run twice), and after that, for
    /// `retention` after it was created, only until another call takes it
    /// over. The one rule every store applies.
    pub fn standing(&self, now_ms: u64, retention: Duration) -> Standing {
        match &self.state {
            RecordState::Completed { completed_ms, .. } => {
                Standing::of_completed(*completed_ms, now_ms, retention)
            }
            RecordState::InProgress { lease_until_ms, .. } => {
                Standing::of_in_progress(self.created_ms, *lease_until_ms, now_ms, retention)
            }
        }
    }

    /// The token of the call holding the lease, when in progress.
    pub fn token(&self) -> Option<&str> {
        match &self.state {
            RecordState::InProgress { token, .. } => Some(token),
            RecordState::Completed { .. } => None,
        }
    }
}

impl Standing {
    /// [`Record::standing`] of a record completed at `completed_ms`, for a
    /// store that keeps its records in a form of its own.
    pub(crate) fn of_completed(completed_ms: u64, now_ms: u64, retention: Duration) -> Standing {
        if now_ms >= completed_ms.saturating_add(millis(retention)) {
            Standing::Expired
        } else {
            Standing::Holds
        }
    }

    /// [`Record::standing`] of a record created at `created_ms` and in
    /// progress under a lease until `lease_until_ms`.
    pub(crate) fn of_in_progress(
        created_ms: u64,
        lease_until_ms: u64,
        now_ms: u64,
        retention: Duration,
    ) -> Standing {
        if now_ms < lease_until_ms {
            Standing::Holds
        } else if now_ms >= created_ms.saturating_add(millis(retention)) {
            Standing::Expired
        } else {
            Standing::LeaseOver
        }
    }
}

/// `duration` in whole milliseconds, saturating.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// What a call asks of [`IdempotencyStore::reserve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The digest of the call's arguments, without the key.
    pub arguments: String,
    /// A token unique to this call (a random UUID).
    pub token: String,
    /// The time of the claim.
    pub now_ms: u64,
    /// Until when the lease is to hold.
    pub lease_until_ms: u64,
    /// How long records are kept: the store's own expiry for the record
    /// (but never before the lease ends), and the window
    /// [`Record::standing`] checks on every read.
    pub retention: Duration,
}

impl Claim {
    /// The in-progress record this claim stores when it succeeds.
    pub fn record(&self) -> Record {
        Record {
            arguments: self.arguments.clone(),
            created_ms: self.now_ms,
            state: RecordState::InProgress {
                token: self.token.clone(),
                lease_until_ms: self.lease_until_ms,
            },
        }
    }
}

/// The answer of [`IdempotencyStore::reserve`].
#[derive(Clone, Debug, PartialEq)]
pub enum Reservation {
    /// The key was free (no record, or one past retention): the claim's
    /// record is stored and the call may run.
    Reserved,
    /// The key was held by a call whose lease has passed: the claim's
    /// record replaced it, and the call may run. `previous` is the record
    /// taken over.
    TookOver {
        /// The in-progress record whose lease had passed.
        previous: Record,
    },
    /// A record holds the key (completed, or in progress under a live
    /// lease); nothing was changed.
    Held(Record),
}

/// Why a store could not answer. Every method fails closed: when the store
/// cannot say, the call does not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached or failed (a dead Redis, an I/O error of
    /// the database file).
    #[error("the idempotency store failed: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A record could not be read back (not the JSON a store writes).
    #[error("the idempotency record under {key} is unreadable: {detail}")]
    Corrupt {
        /// The record's key.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The in-memory store is full: its records are in progress or within
    /// their retention, and evicting one would let a call run twice.
    #[error(
        "the in-memory idempotency store is full ({capacity} records, each in progress or within \
         its retention, and evicting one would let a resend run twice): raise its capacity, \
         shorten the retention, or use a persistent store"
    )]
    Full {
        /// The store's capacity, in records.
        capacity: usize,
    },
}

impl StoreError {
    /// [`StoreError::Unavailable`] from any error.
    pub fn unavailable(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
        StoreError::Unavailable(error.into())
    }
}

/// A place to keep idempotency records. Implementations: [`MemoryStore`]
/// (the default), `RedbStore` (feature `redb`: a file that survives a
/// restart) and `RedisStore` (feature `redis`: shared by several server
/// replicas).
///
/// Each method is atomic: two calls racing on one key, in one process or in
/// several sharing the store, see one order of the state changes. Methods
/// that take a `token` change a record only while it is in progress under
/// that token, and say whether they did.
///
/// [`MemoryStore`]: super::MemoryStore
#[async_trait]
pub trait IdempotencyStore: Send + Sync + fmt::Debug + 'static {
    /// Claims `key` for a new call, atomically: stores `claim.record()`
    /// when no record holds the key ([`Reservation::Reserved`]: none, or
    /// one [`Standing::Expired`]) or when the record's lease is over
    /// ([`Reservation::TookOver`]); otherwise returns the record that holds
    /// it, unchanged ([`Reservation::Held`]).
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the store fails,
    /// [`StoreError::Corrupt`] for a record it cannot read,
    /// [`StoreError::Full`] when a bounded store has no room.
    async fn reserve(&self, key: &RecordKey, claim: &Claim) -> Result<Reservation, StoreError>;

    /// Extends the lease of the call holding `token` to `lease_until_ms`,
    /// at `now_ms`; a store that expires records by itself keeps this one
    /// at least until the lease ends, even past its retention. Returns
    /// false, changing nothing, when the record is not in progress under
    /// `token` (it was taken over or released).
    ///
    /// # Errors
    ///
    /// As [`reserve`](Self::reserve), but never [`StoreError::Full`].
    async fn renew(
        &self,
        key: &RecordKey,
        token: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError>;

    /// Records the call's `result` (a `tools/call` result's JSON text,
    /// shared: every attempt offers the same text) as completed at
    /// `now_ms`, kept for `retention`. Returns false, changing
    /// nothing, when the record is not in progress under `token`.
    ///
    /// # Errors
    ///
    /// As [`renew`](Self::renew).
    async fn complete(
        &self,
        key: &RecordKey,
        token: &str,
        result: RecordedResult,
        now_ms: u64,
        retention: Duration,
    ) -> Result<bool, StoreError>;

    /// Deletes the record, freeing the key, when it is in progress under
    /// `token` (the call failed before it did anything, panicked or was
    /// dropped). Returns whether it did.
    ///
    /// # Errors
    ///
    /// As [`renew`](Self::renew).
    async fn release(&self, key: &RecordKey, token: &str) -> Result<bool, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn in_progress(created_ms: u64, lease_until_ms: u64) -> Record {
        Record {
            arguments: "sha256:00".to_owned(),
            created_ms,
            state: RecordState::InProgress {
                token: "t".to_owned(),
                lease_until_ms,
            },
        }
    }

    #[test]
    fn record_keys_keep_their_parts_apart() {
        assert_eq!(
            RecordKey::new("append", None, "k").as_str(),
            r#"["append",null,"k"]"#
        );
        assert_ne!(
            RecordKey::new("a", Some("b"), "c"),
            RecordKey::new("a", None, "b\",\"c")
        );
    }

    #[test]
    fn record_keys_are_the_json_of_their_parts() {
        // The text is what persistent stores are keyed by: it must stay
        // serde_json's, byte for byte, for records written before.
        let awkward = [
            "",
            "plain",
            "quo\"te",
            "back\\slash",
            "\u{0}\u{1f}\u{7f}\u{80}\n\t\r\u{8}\u{c}",
            "\u{202e}é🦀\u{2028}\u{fffd}",
            "/<script>",
        ];
        for tool in awkward {
            for key in awkward {
                for caller in [None, Some("who"), Some("\"\\\u{0}")] {
                    assert_eq!(
                        RecordKey::new(tool, caller, key).as_str(),
                        serde_json::to_string(&(tool, caller, key)).unwrap(),
                        "{tool:?} {caller:?} {key:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn recorded_results_embed_their_json_and_compare_as_json() {
        let recorded = RecordedResult::of(&json!({"isError": false, "content": []})).unwrap();
        let record = Record {
            arguments: "sha256:00".to_owned(),
            created_ms: 1,
            state: RecordState::Completed {
                result: recorded.clone(),
                completed_ms: 2,
            },
        };
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains(r#""result":{"#), "{text}");
        let read: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(read, record);
        let RecordState::Completed { result, .. } = read.state else {
            panic!("completed")
        };
        assert_eq!(
            result.parse::<Value>().unwrap(),
            json!({"content": [], "isError": false})
        );
        // Member order aside, equal; other JSON, not.
        let reordered = RecordedResult::from(json!({"content": [], "isError": false}));
        assert_eq!(reordered, recorded);
        assert_ne!(RecordedResult::from(json!({"content": [1]})), recorded);
    }

    #[test]
    fn record_keys_show_escaped() {
        let key = RecordKey::new("append", None, "k\u{202e}\u{1b}[2J\n");
        assert_eq!(key.as_str(), "[\"append\",null,\"k\u{202e}\\u001b[2J\\n\"]");
        assert_eq!(key.to_string(), r#"["append",null,"k\u{202e}\u001b[2J\n"]"#);
    }

    #[test]
    fn records_serialize_as_documented() {
        let record = in_progress(5, 10);
        assert_eq!(
            serde_json::to_value(&record).unwrap(),
            json!({"arguments": "sha256:00", "createdMs": 5, "state": "in_progress",
                   "token": "t", "leaseUntilMs": 10})
        );
        let completed = Record {
            state: RecordState::Completed {
                result: json!({"content": []}).into(),
                completed_ms: 7,
            },
            ..record
        };
        let text = serde_json::to_string(&completed).unwrap();
        assert_eq!(
            text,
            r#"{"arguments":"sha256:00","createdMs":5,"state":"completed","result":{"content":[]},"completedMs":7}"#
        );
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), completed);
    }

    #[test]
    fn standing_follows_retention_and_lease() {
        let retention = Duration::from_millis(100);
        let running = in_progress(0, 30);
        assert_eq!(running.standing(29, retention), Standing::Holds);
        assert_eq!(running.standing(30, retention), Standing::LeaseOver);
        assert_eq!(running.standing(100, retention), Standing::Expired);
        // A live lease holds past the retention window.
        let long = in_progress(0, 500);
        assert_eq!(long.standing(499, retention), Standing::Holds);
        assert_eq!(long.standing(500, retention), Standing::Expired);
        let done = Record {
            state: RecordState::Completed {
                result: json!({}).into(),
                completed_ms: 50,
            },
            ..running
        };
        assert_eq!(done.standing(149, retention), Standing::Holds);
        assert_eq!(done.standing(150, retention), Standing::Expired);
    }
}

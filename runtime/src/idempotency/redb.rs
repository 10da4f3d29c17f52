//! The embedded persistent store (feature `redb`): idempotency records in
//! one redb file, which survive a restart of the process.
//!
//! Each trait method is one redb write transaction, run on tokio's blocking
//! pool. redb lets one write transaction run at a time, so each method is
//! atomic against every other in the process; the file is locked against
//! other processes while it is open.
//!
//! Two tables:
//!
//! - `idempotency_records`: record key ([`RecordKey::as_str`]) to
//!   (expires at, the record's JSON), the JSON as every store writes it.
//! - `idempotency_expiry`: (expires at, record key) to nothing, the same
//!   records in order of expiry, so that each reserve can delete the few
//!   oldest expired ones without a scan.
//!
//! "Expires at" is the store's own expiry, in milliseconds since the Unix
//! epoch: the record's creation (in progress) or completion (completed)
//! plus the retention given when it was written. Whether a record holds its
//! key is still decided on every read by [`Record::standing`], with the
//! retention of the call that reads it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redb::{Database, ReadableTable, Table, TableDefinition, WriteTransaction};

use super::store::{
    Claim, IdempotencyStore, Record, RecordKey, RecordState, RecordedResult, Reservation, Standing,
    StoreError, millis,
};

/// Record key to (expires at in ms since the Unix epoch, record JSON).
const RECORDS: TableDefinition<&str, (u64, &[u8])> = TableDefinition::new("idempotency_records");

/// (expires at in ms since the Unix epoch, record key), oldest first.
const EXPIRY: TableDefinition<(u64, &str), ()> = TableDefinition::new("idempotency_expiry");

/// Records kept in one redb file, which outlive the process: after a
/// restart (or a crash: redb commits are crash-safe) every completed call
/// is still replayed, and a call that was in progress is taken over once
/// its lease is over.
///
/// One process opens the file at a time. Records expire at the retention
/// given when they were written; each [`reserve`](IdempotencyStore::reserve)
/// deletes up to [`PURGE_PER_RESERVE`](Self::PURGE_PER_RESERVE) expired
/// records, so the file does not grow without bound while keys keep coming.
///
/// ```no_run
/// use mcp_hints::idempotency::{Idempotency, RedbStore};
///
/// let store = RedbStore::open("/var/lib/my-server/idempotency.redb")?;
/// let idempotency = Idempotency::builder().store(store).build();
/// # let _ = idempotency;
/// # Ok::<(), mcp_hints::idempotency::StoreError>(())
/// ```
///
/// # Errors
///
/// Every method returns [`StoreError::Unavailable`] when redb fails (an
/// I/O error of the file, a full disk) and [`StoreError::Corrupt`] for a
/// record that is not the JSON of a [`Record`]; never
/// [`StoreError::Full`].
#[derive(Clone)]
pub struct RedbStore {
    db: Arc<Database>,
    path: PathBuf,
}

impl fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RedbStore {
    /// How many expired records one reserve deletes at most: 16. Bounded,
    /// so that a reserve never pays for a long backlog at once; more than
    /// one, so that the backlog shrinks while keys keep coming.
    pub const PURGE_PER_RESERVE: usize = 16;

    /// Opens the store in the redb file at `path`, creating the file (not
    /// its directory) when there is none. This is blocking file I/O: call
    /// it at startup, or inside `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the file cannot be created or
    /// opened: its directory is missing, it is not a redb file, or it is
    /// open already (in this process or another).
    pub fn open(path: impl AsRef<Path>) -> Result<RedbStore, StoreError> {
        let path = path.as_ref().to_owned();
        let db = Database::create(&path).map_err(StoreError::unavailable)?;
        // Create both tables now, so that a file of the wrong shape is
        // refused here rather than at the first call.
        let txn = db.begin_write().map_err(StoreError::unavailable)?;
        Tables::open(&txn)?;
        txn.commit().map_err(StoreError::unavailable)?;
        Ok(RedbStore {
            db: Arc::new(db),
            path,
        })
    }

    /// The file the store keeps its records in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `change` in one write transaction on the blocking pool and
    /// commits it; an error aborts it.
    async fn write<T: Send + 'static>(
        &self,
        change: impl FnOnce(&mut Tables<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || {
            let txn = db.begin_write().map_err(StoreError::unavailable)?;
            let answer = {
                let mut tables = Tables::open(&txn)?;
                change(&mut tables)?
            };
            txn.commit().map_err(StoreError::unavailable)?;
            Ok(answer)
        })
        .await
        .map_err(StoreError::unavailable)?
    }
}

/// Both tables, open in one write transaction, kept consistent: every
/// record has exactly one expiry entry.
struct Tables<'txn> {
    records: Table<'txn, &'static str, (u64, &'static [u8])>,
    expiry: Table<'txn, (u64, &'static str), ()>,
}

impl<'txn> Tables<'txn> {
    fn open(txn: &'txn WriteTransaction) -> Result<Tables<'txn>, StoreError> {
        Ok(Tables {
            records: txn.open_table(RECORDS).map_err(StoreError::unavailable)?,
            expiry: txn.open_table(EXPIRY).map_err(StoreError::unavailable)?,
        })
    }

    /// The record under `key` and when it expires.
    fn get(&self, key: &RecordKey) -> Result<Option<(u64, Record)>, StoreError> {
        let Some(entry) = self
            .records
            .get(key.as_str())
            .map_err(StoreError::unavailable)?
        else {
            return Ok(None);
        };
        let (expires_at, json) = entry.value();
        let record = serde_json::from_slice(json).map_err(|error| StoreError::Corrupt {
            key: key.to_string(),
            detail: error.to_string(),
        })?;
        Ok(Some((expires_at, record)))
    }

    /// The record under `key` when it is in progress under `token`.
    fn leased(&self, key: &RecordKey, token: &str) -> Result<Option<(u64, Record)>, StoreError> {
        Ok(self
            .get(key)?
            .filter(|(_, record)| record.token() == Some(token)))
    }

    /// Stores `record` under `key`, expiring at `expires_at`, in place of
    /// any record there.
    fn put(&mut self, key: &RecordKey, expires_at: u64, record: &Record) -> Result<(), StoreError> {
        let json = serde_json::to_vec(record).map_err(|error| StoreError::Corrupt {
            key: key.to_string(),
            detail: format!("the record cannot be written as JSON: {error}"),
        })?;
        let replaced = self
            .records
            .insert(key.as_str(), (expires_at, json.as_slice()))
            .map_err(StoreError::unavailable)?
            .map(|old| old.value().0);
        if let Some(old_expires_at) = replaced {
            self.expiry
                .remove((old_expires_at, key.as_str()))
                .map_err(StoreError::unavailable)?;
        }
        self.expiry
            .insert((expires_at, key.as_str()), ())
            .map_err(StoreError::unavailable)?;
        Ok(())
    }

    /// Deletes the record under `key`, if any.
    fn remove(&mut self, key: &str) -> Result<(), StoreError> {
        let removed = self
            .records
            .remove(key)
            .map_err(StoreError::unavailable)?
            .map(|old| old.value().0);
        if let Some(expires_at) = removed {
            self.expiry
                .remove((expires_at, key))
                .map_err(StoreError::unavailable)?;
        }
        Ok(())
    }

    /// Deletes up to `limit` records that expired at or before `now_ms`,
    /// oldest first; returns how many.
    fn purge(&mut self, now_ms: u64, limit: usize) -> Result<usize, StoreError> {
        let mut expired = Vec::new();
        for entry in self.expiry.iter().map_err(StoreError::unavailable)? {
            let (entry, _) = entry.map_err(StoreError::unavailable)?;
            let (expires_at, key) = entry.value();
            if expires_at > now_ms || expired.len() == limit {
                break;
            }
            expired.push(key.to_owned());
        }
        for key in &expired {
            self.remove(key)?;
        }
        Ok(expired.len())
    }
}

#[async_trait]
impl IdempotencyStore for RedbStore {
    /// As the trait says, in one write transaction that first deletes up
    /// to [`PURGE_PER_RESERVE`](Self::PURGE_PER_RESERVE) records expired at
    /// `claim.now_ms`. The claim's record expires at `claim.now_ms +
    /// claim.retention`.
    async fn reserve(&self, key: &RecordKey, claim: &Claim) -> Result<Reservation, StoreError> {
        let (key, claim) = (key.clone(), claim.clone());
        self.write(move |tables| {
            let purged = tables.purge(claim.now_ms, RedbStore::PURGE_PER_RESERVE)?;
            if purged > 0 {
                tracing::debug!(
                    purged,
                    "expired idempotency records deleted from the redb store"
                );
            }
            let answer = match tables.get(&key)? {
                None => Reservation::Reserved,
                Some((_, record)) => match record.standing(claim.now_ms, claim.retention) {
                    Standing::Holds => return Ok(Reservation::Held(record)),
                    Standing::Expired => Reservation::Reserved,
                    Standing::LeaseOver => Reservation::TookOver { previous: record },
                },
            };
            let expires_at = claim
                .now_ms
                .saturating_add(millis(claim.retention))
                .max(claim.lease_until_ms);
            tables.put(&key, expires_at, &claim.record())?;
            Ok(answer)
        })
        .await
    }

    /// As the trait says; the record keeps its expiry.
    async fn renew(
        &self,
        key: &RecordKey,
        token: &str,
        _now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError> {
        let (key, token) = (key.clone(), token.to_owned());
        self.write(move |tables| {
            let Some((expires_at, mut record)) = tables.leased(&key, &token)? else {
                return Ok(false);
            };
            if let RecordState::InProgress {
                lease_until_ms: until,
                ..
            } = &mut record.state
            {
                *until = lease_until_ms;
            }
            // A call still running keeps its record past its retention.
            tables.put(&key, expires_at.max(lease_until_ms), &record)?;
            Ok(true)
        })
        .await
    }

    /// As the trait says; the completed record expires at `now_ms +
    /// retention`.
    async fn complete(
        &self,
        key: &RecordKey,
        token: &str,
        result: RecordedResult,
        now_ms: u64,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        let (key, token) = (key.clone(), token.to_owned());
        self.write(move |tables| {
            let Some((_, mut record)) = tables.leased(&key, &token)? else {
                return Ok(false);
            };
            record.state = RecordState::Completed {
                result,
                completed_ms: now_ms,
            };
            tables.put(&key, now_ms.saturating_add(millis(retention)), &record)?;
            Ok(true)
        })
        .await
    }

    async fn release(&self, key: &RecordKey, token: &str) -> Result<bool, StoreError> {
        let (key, token) = (key.clone(), token.to_owned());
        self.write(move |tables| {
            if tables.leased(&key, &token)?.is_none() {
                return Ok(false);
            }
            tables.remove(key.as_str())?;
            Ok(true)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(token: &str, now_ms: u64, retention_ms: u64) -> Claim {
        Claim {
            arguments: "sha256:args".to_owned(),
            token: token.to_owned(),
            now_ms,
            // Shorter than any retention here, so records expire by it.
            lease_until_ms: now_ms + 10,
            retention: Duration::from_millis(retention_ms),
        }
    }

    fn temp_store(name: &str) -> (RedbStore, PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "mcp-hints-redb-unit-{name}-{}",
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        (RedbStore::open(dir.join("store.redb")).unwrap(), dir)
    }

    fn stored(store: &RedbStore) -> (Vec<String>, Vec<(u64, String)>) {
        let txn = store.db.begin_write().unwrap();
        let tables = Tables::open(&txn).unwrap();
        let records = tables
            .records
            .iter()
            .unwrap()
            .map(|entry| entry.unwrap().0.value().to_owned())
            .collect();
        let expiry = tables
            .expiry
            .iter()
            .unwrap()
            .map(|entry| {
                let (entry, _) = entry.unwrap();
                let (at, key) = entry.value();
                (at, key.to_owned())
            })
            .collect();
        (records, expiry)
    }

    #[tokio::test]
    async fn each_reserve_purges_a_bounded_batch_of_expired_records() {
        let (store, dir) = temp_store("purge");
        // 20 records that expire at 100 (created at 0, retention 100), one
        // of them completed (at 50, retention 50: it expires at 100 too).
        for n in 0..20 {
            let key = RecordKey::new("tool", None, &format!("old-{n:02}"));
            store
                .reserve(&key, &claim(&format!("t{n}"), 0, 100))
                .await
                .unwrap();
        }
        let done = RecordKey::new("tool", None, "old-00");
        assert!(
            store
                .complete(&done, "t0", json!({}).into(), 50, Duration::from_millis(50))
                .await
                .unwrap()
        );
        let (records, expiry) = stored(&store);
        assert_eq!((records.len(), expiry.len()), (20, 20));
        assert!(expiry.iter().all(|(at, _)| *at == 100));

        // Not yet expired at 99: nothing goes.
        let fresh = RecordKey::new("tool", None, "fresh-1");
        store
            .reserve(&fresh, &claim("f1", 99, 1_000))
            .await
            .unwrap();
        assert_eq!(stored(&store).0.len(), 21);

        // At 100, one reserve deletes 16 and the next the other 4.
        let fresh = RecordKey::new("tool", None, "fresh-2");
        store
            .reserve(&fresh, &claim("f2", 100, 1_000))
            .await
            .unwrap();
        assert_eq!(stored(&store).0.len(), 22 - 16);
        let fresh = RecordKey::new("tool", None, "fresh-3");
        store
            .reserve(&fresh, &claim("f3", 100, 1_000))
            .await
            .unwrap();
        let (records, expiry) = stored(&store);
        assert_eq!(
            records,
            [
                r#"["tool",null,"fresh-1"]"#,
                r#"["tool",null,"fresh-2"]"#,
                r#"["tool",null,"fresh-3"]"#
            ]
        );
        assert_eq!(
            expiry,
            [
                (1_099, r#"["tool",null,"fresh-1"]"#.to_owned()),
                (1_100, r#"["tool",null,"fresh-2"]"#.to_owned()),
                (1_100, r#"["tool",null,"fresh-3"]"#.to_owned()),
            ]
        );
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn the_expiry_index_follows_each_change() {
        let (store, dir) = temp_store("index");
        let key = RecordKey::new("tool", None, "k");
        store.reserve(&key, &claim("a", 10, 1_000)).await.unwrap();
        assert!(store.renew(&key, "a", 0, 500).await.unwrap());
        assert_eq!(stored(&store).1, [(1_010, key.to_string())]);
        assert!(
            store
                .complete(
                    &key,
                    "a",
                    json!({}).into(),
                    20,
                    Duration::from_millis(5_000)
                )
                .await
                .unwrap()
        );
        assert_eq!(stored(&store).1, [(5_020, key.to_string())]);
        // At 6_000 the completed record is past the claim's retention (1 s
        // after 20): it is replaced, with the claim's expiry.
        store
            .reserve(&key, &claim("b", 6_000, 1_000))
            .await
            .unwrap();
        assert_eq!(stored(&store).1, [(7_000, key.to_string())]);
        assert!(store.release(&key, "b").await.unwrap());
        assert_eq!(stored(&store), (vec![], vec![]));
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

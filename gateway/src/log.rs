//! The gateway's audit log: one JSON object per line (JSON Lines), one line
//! per decision, appended and made durable before the call it records goes
//! on (or, for a call that changes nothing, before its answer goes back),
//! and [`entries`], which reads it back (for `mcp-hints gateway log`,
//! which filters it).
//!
//! Durability is the point: a call's `decided` entry is on disk
//! (`File::sync_data`, [`Durability::Synced`]) before the call goes on, and
//! an entry that cannot be written is an error the caller turns into a
//! refused call, so a decision is never taken without its record. A call
//! that cannot change anything (a read-only, closed-world tool of a trusted
//! upstream, as it declared or the operator asserted) goes on once its
//! entry is written, while the sync thread syncs it
//! ([`AuditLog::record_syncing`]), and its answer goes back only once the
//! entry is on disk: nothing changed that a crash could leave unrecorded,
//! and no answer ever goes back without its record. Its
//! `finished` entry is written before the answer goes back
//! ([`Durability::Written`]) and synced soon after, with the next call's
//! sync or at most [`IDLE_SYNC`] later: the call already ran, and waiting
//! for the disk a second time would only delay its answer. Secrets never reach the
//! log: an [`Entry`] has no field for a token or a header, and arguments are
//! kept as a digest ([`arguments_digest`]) unless the operator asks for them
//! raw (`[log] raw_arguments = true`).
//!
//! Each line is a link of a hash chain ([`crate::chain`]): it carries the
//! SHA-256 of the line before it, computed under the lock that orders the
//! lines, so the chain is exact however many calls write at once. At
//! open the writer reads the log's last lines (not the whole file) to go
//! on from where it ended; it writes checkpoints every
//! [`LogOptions::checkpoint_every`] entries and at [`AuditLog::checkpoint`],
//! and with [`LogOptions::max_bytes`] it rotates the file.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::chain::{self, CheckpointKind, Head, SigningKey};
use crate::metrics::Metrics;

/// The words of an audit entry's fixed fields: an enum whose variants are
/// written as their `snake_case` names, every name in `NAMES` in the order
/// of the variants, and `FromStr` of those names (what `gateway log`'s
/// filters accept).
macro_rules! entry_word {
    ($(#[$meta:meta])* $name:ident { $($(#[$variant_meta:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$variant_meta])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            /// Every variant, in order.
            pub const ALL: &[$name] = &[$($name::$variant),+];
            /// Every variant's name as written in the log, in order.
            pub const NAMES: &[&str] = &[$($word),+];

            /// The name written in the log.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;

            /// A name from `NAMES`; any other text is an error listing them.
            fn from_str(text: &str) -> Result<$name, String> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|word| word.as_str() == text)
                    .ok_or_else(|| {
                        format!(
                            "`{}` is not one of {}",
                            mcp_hints_core::escape::shown(text),
                            $name::NAMES.join(", ")
                        )
                    })
            }
        }
    };
}

entry_word! {
    /// What the gateway decided about a call: an [`Entry`]'s `decision`
    /// (and what `gateway log --decision` accepts).
    Decision {
        /// A rule, or `policy.default`, allows it.
        Allow = "allow",
        /// A rule, or `policy.default`, refuses it.
        Deny = "deny",
        /// A rule parks it for an approver.
        RequireApproval = "require_approval",
        /// A rate limit refuses it.
        RateLimited = "rate_limited",
        /// A parked call an approver approved.
        Approved = "approved",
        /// A parked call an approver denied.
        Denied = "denied",
        /// A parked call nobody decided in time.
        Expired = "expired",
        /// A tool changed since the lock's approval, parked for one.
        Drift = "drift",
        /// A call to an upstream never reached: its tools, and so their
        /// hints, are unknown (`hints` is `null`).
        Unavailable = "unavailable",
        /// A parked call its client withdrew (cancelled, timed out, gone).
        Abandoned = "abandoned",
    }
}

entry_word! {
    /// How a call ended: a `finished` [`Entry`]'s `outcome` (and what
    /// `gateway log --outcome` accepts).
    Outcome {
        /// The upstream answered with a result.
        Completed = "completed",
        /// The upstream answered with an error, or a result with
        /// `isError`.
        ToolError = "tool_error",
        /// No answer came, and it may have run: read back before calling
        /// again.
        DeliveryUnknown = "delivery_unknown",
        /// The gateway did not forward it.
        Refused = "refused",
        /// Its upstream could not be reached.
        Unavailable = "unavailable",
        /// It ran, but its result was withheld from the client: a
        /// `deny_result` `[[redact]]` matched it, it was too big to scan
        /// (`[redaction] max_scan_bytes`), or its `decided` entry, synced
        /// while it ran (a call that changes nothing), could not be synced.
        Withheld = "withheld",
    }
}

entry_word! {
    /// Which of a call's entries an [`Entry`] is.
    Phase {
        /// Written (and synced) before the call goes upstream or is
        /// refused; for a call that changes nothing, written before and
        /// synced before its answer goes back.
        Decided = "decided",
        /// Written after, with the outcome.
        Finished = "finished",
    }
}

/// One line of the audit log: one decision about one `tools/call`.
///
/// Every call has two entries with the same `id`: `phase` `"decided"`,
/// written before the call goes upstream (or is refused), and
/// `"finished"`, with its `outcome` (and `attempts`, for a call that was
/// sent). A parked call has a third, its resolution, between the two.
/// Absent optional fields are left out of the line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Its place in the log's hash chain ([`crate::chain`]): 1 for the
    /// first line, one more for each line after it. Set by
    /// [`AuditLog::record`], whatever the entry given holds; `None` only
    /// in entries read from a log written before the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The SHA-256 of the line before it, 64 lowercase hex digits
    /// ([`chain::GENESIS`] for the first). Set by
    /// [`AuditLog::record`], as `seq` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<String>,
    /// When the decision was taken: RFC 3339 in UTC with milliseconds,
    /// `2026-03-16T09:30:00.123Z` (see [`now`]).
    pub time: String,
    /// The replica that wrote it, `[gateway] replica`
    /// ([`GatewayConfig::replica`](crate::config::GatewayConfig::replica)):
    /// every entry the gateway writes has it; `None` (and left out of the
    /// line) only in entries read from a log written before replicas had
    /// names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The call's id (a v4 UUID), shared by its entries and by its parked
    /// call, if any.
    pub id: String,
    /// The principal the client's token maps to (`local` over stdio).
    pub principal: String,
    /// The upstream's name from the config.
    pub upstream: String,
    /// The tool's name as the upstream serves it (not namespaced).
    pub tool: String,
    /// What was decided: `allow`, `deny`, `require_approval`,
    /// `rate_limited`, and for a parked call `approved`, `denied`,
    /// `expired`; `drift`, `unavailable`, `abandoned` ([`Decision`]).
    pub decision: Decision,
    /// The rule that fired, described by the policy (`rule[2] (deny
    /// delete_* when destructive)`); absent when the default decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The effective hints and their sources, as the policy serialises
    /// them: `{"readOnlyHint": {"value": true, "source": "declared"}, ...}`.
    #[serde(default)]
    pub hints: Value,
    /// [`arguments_digest`] of the call's arguments: 64 lowercase hex
    /// digits.
    pub arguments_sha256: String,
    /// The raw arguments, only with `[log] raw_arguments = true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// How it ended: `completed`, `tool_error`, `delivery_unknown`,
    /// `refused`, `unavailable` or `withheld` ([`Outcome`]); absent on a `decided`
    /// entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// How many times the call was sent upstream (resends included), on a
    /// `finished` entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Why the decision was taken without the shared state (`[state]`),
    /// which could not be reached: `the gateway's shared state (redis) is
    /// unavailable: WHY; rate limits fail closed`. Absent when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<String>,
    /// Who approved or denied a parked call, on the `decided` entry of
    /// its resolution (decision `approved` or `denied`) and a denied
    /// call's `finished` entry: the name `approve --by` gave
    /// (`admin` without one), or the approver signed in to the approvals
    /// page (the name typed with the admin token, or the principal of the
    /// identity provider's token). Absent on every other entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The earlier calls of the session that made a rule that looks back
    /// (`after`, `count`) fire, on that rule's `decided` entry: their ids,
    /// upstreams and tools, oldest first, at most
    /// [`MAX_EARLIER`](crate::session::MAX_EARLIER). Absent on every other
    /// entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<Vec<crate::session::EarlierCall>>,
    /// The call's session as the history keys it
    /// ([`SessionKey`](crate::session::SessionKey): 64 hex digits, a
    /// digest that names no client text), on every entry of a call made
    /// while some rule looks back, so that the calls of one session can be
    /// read together. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// On a `finished` entry, what the `[[redact]]` rules found in the
    /// result, per rule that matched: never the matched text. Absent
    /// when nothing matched (and in logs written before redaction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<Vec<Redacted>>,
    /// On the `finished` entry of a withheld result (outcome `withheld`),
    /// why: the `deny_result` rule that matched (`redact[1] (detectors
    /// private_key)`), `over [redaction] max_scan_bytes: 250000 bytes
    /// of text, the limit 200000` for a result too big to scan, or `its
    /// decided entry could not be synced: ...` for a call that changes
    /// nothing whose entry's sync failed while it ran. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
    /// `decided` (written before forwarding) or `finished` (after).
    pub phase: Phase,
}

/// What one `[[redact]]` found in a result: an [`Entry`]'s `redacted`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redacted {
    /// The rule: `redact[0] (detectors aws_access_key, private_key)` or
    /// `redact[1] (pattern)`.
    pub rule: String,
    /// How many matches it masked (or found, for a withheld result).
    pub matches: u64,
    /// Where, each place once, in the order scanned: `content[0].text`,
    /// `content[1].resource.text`, `structuredContent.notes[2].text`.
    pub places: Vec<String>,
}

/// The current time as an [`Entry::time`]: RFC 3339, UTC, milliseconds.
pub fn now() -> String {
    rfc3339::format(SystemTime::now())
}

/// The SHA-256 of `arguments`' canonical JSON (RFC 8785: keys sorted, no
/// whitespace, numbers in their shortest form, so `{"b":1.0,"a":2}` and
/// `{"a":2,"b":1}` have one digest; but integers no double holds keep their
/// digits, so `9007199254740993` and `9007199254740992` have two), as 64
/// lowercase hex digits.
///
/// [`mcp_hints::canonical::arguments_digest`] without its `sha256:` prefix
/// (the field's name says it): the digest keyed calls are compared by.
pub fn arguments_digest(arguments: &Map<String, Value>) -> String {
    let digest = mcp_hints::canonical::arguments_digest(Some(arguments), None);
    match digest.strip_prefix("sha256:") {
        Some(hex) => hex.to_owned(),
        None => digest,
    }
}

/// Why an entry could not be written: the log's path, what was being done
/// and the system's cause. The caller fails the call closed.
///
/// The message holds the cause's text, so the cause is a field, not a
/// [`source`](std::error::Error::source) (as in [`crate::Error`]).
#[derive(Debug, thiserror::Error)]
#[error("audit log {}: cannot {action}: {error}", path.display())]
pub struct LogError {
    /// The log file.
    pub path: PathBuf,
    /// What failed: `open it`, `append to it`, `sync it to disk`, ...
    pub action: &'static str,
    /// The cause (for a log removed since it was opened, `NotFound`).
    pub error: std::io::Error,
}

/// The entries of the audit log at `path`, read back in the chain's
/// order: its rotated files first, oldest first ([`chain::files`]; `path`
/// alone when its directory cannot be listed), then `path` itself. Each
/// comes with where it is ([`chain::At`]: the file, and the line's number
/// there from 1). Checkpoints ([`chain::Checkpoint`]) record no call and
/// are passed over, as are blank lines.
///
/// The files are listed now and read as the iterator is advanced, one line
/// at a time: a long log is never held whole. A log being written may be
/// read; a line the writer has not finished yet is
/// [`ReadError::NotAnEntry`] with `torn` set.
///
/// # Errors
///
/// An item is `Err` with a [`ReadError`]:
///
/// - [`ReadError::Open`] for a file that cannot be opened (the log
///   missing, a directory, no permission), and [`ReadError::Line`] for a
///   line that cannot be read (an I/O error, bytes that are not UTF-8):
///   the iterator ends after either.
/// - [`ReadError::NotAnEntry`] for a line that is neither an [`Entry`] nor
///   a checkpoint (`torn` when it is the start of a JSON object cut short,
///   by a crash or by a read while it is being written): the iterator goes
///   on with the next line.
pub fn entries(path: &Path) -> Entries {
    let files = chain::files(path).unwrap_or_else(|_| vec![path.to_owned()]);
    Entries {
        files: files.into_iter(),
        reading: None,
        ended: false,
    }
}

/// The iterator [`entries`] returns: `Ok((where, entry))` for each entry
/// of the log, `Err` for a line that is not one or a file that cannot be
/// read (see [`entries`]' errors).
#[derive(Debug)]
pub struct Entries {
    /// The files not opened yet, in order.
    files: std::vec::IntoIter<PathBuf>,
    /// The file being read, its lines, and how many were read.
    reading: Option<(PathBuf, std::io::Lines<BufReader<File>>, usize)>,
    /// Set after an error that ends the reading.
    ended: bool,
}

impl Iterator for Entries {
    type Item = Result<(chain::At, Entry), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            let Some((file, lines, number)) = &mut self.reading else {
                let path = self.files.next()?;
                match File::open(&path) {
                    Ok(file) => self.reading = Some((path, BufReader::new(file).lines(), 0)),
                    Err(error) => {
                        self.ended = true;
                        return Some(Err(ReadError::Open { path, error }));
                    }
                }
                continue;
            };
            let Some(line) = lines.next() else {
                self.reading = None;
                continue;
            };
            *number += 1;
            let at = chain::At {
                file: file.clone(),
                line: *number,
            };
            let line = match line {
                Ok(line) => line,
                Err(error) => {
                    self.ended = true;
                    return Some(Err(ReadError::Line { at, error }));
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Entry>(&line) {
                Ok(entry) => return Some(Ok((at, entry))),
                Err(_) if serde_json::from_str::<chain::Checkpoint>(&line).is_ok() => {}
                Err(error) => {
                    return Some(Err(ReadError::NotAnEntry {
                        torn: error.is_eof() && line.starts_with('{'),
                        at,
                        error,
                    }));
                }
            }
        }
        None
    }
}

impl std::iter::FusedIterator for Entries {}

/// Why [`entries`] could not give an entry: which file, and for a line,
/// its number there (from 1), with the cause.
///
/// The message holds the cause's text, so the cause is a field, not a
/// [`source`](std::error::Error::source) (as in [`LogError`]).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file of the log cannot be opened: the log missing, a directory,
    /// no permission. The reading ends.
    #[error("audit log {}: cannot read it: {error}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The system's cause.
        error: std::io::Error,
    },
    /// A line cannot be read: an I/O error, or bytes that are not UTF-8
    /// (`InvalidData`). The reading ends.
    #[error("{}:{}: {error}", at.file.display(), at.line)]
    Line {
        /// Where.
        at: chain::At,
        /// The system's cause.
        error: std::io::Error,
    },
    /// A line that is neither an [`Entry`] nor a checkpoint. The reading
    /// goes on with the next line.
    #[error("{}:{}: not an audit log entry: {error}", at.file.display(), at.line)]
    NotAnEntry {
        /// Where.
        at: chain::At,
        /// Whether it is the start of a JSON object cut short: a line a
        /// crash tore (the writer ends it when it opens the log again), or
        /// one being written while it was read.
        torn: bool,
        /// Why it is not an entry, as serde_json says reading it as one.
        error: serde_json::Error,
    },
}

/// How durable a line must be before [`AuditLog::record`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// On disk (`fdatasync`): a `decided` entry, before its call goes on
    /// (or, for a call that changes nothing, before its answer goes back:
    /// [`AuditLog::record_syncing`]).
    Synced,
    /// Written to the file (the kernel has it, so a crash of the gateway
    /// cannot lose it), and synced with the next synced line or at most
    /// [`IDLE_SYNC`] after it was written: a `finished` entry, whose
    /// call already went on, so that waiting for the disk would only delay
    /// the answer.
    Written,
}

/// How long a line that was only [`Durability::Written`] may wait for a
/// sync at most: 50 ms.
pub const IDLE_SYNC: std::time::Duration = std::time::Duration::from_millis(50);

/// How many entries a checkpoint follows by default
/// ([`LogOptions::checkpoint_every`]): 1000.
pub const CHECKPOINT_EVERY: u64 = 1000;

/// How the log is kept, besides its path: `[log]`'s `max_bytes`,
/// `checkpoint_every` and `signing_key`, and the replica named in
/// checkpoints.
#[derive(Clone, Debug)]
pub struct LogOptions {
    /// Rotate the file before a line would take it past this many bytes
    /// (`None`: never). A line longer than this still gets a file of its
    /// own. The file is renamed to [`chain::rotated_path`]
    /// (`PATH.000001`, ...), and a new one started whose first line
    /// chains to the last line of the one before.
    pub max_bytes: Option<u64>,
    /// Write a checkpoint after this many entries since the last one (at
    /// least 1; default [`CHECKPOINT_EVERY`]).
    pub checkpoint_every: u64,
    /// Sign each checkpoint with this key (Ed25519); unsigned without.
    pub signing_key: Option<SigningKey>,
    /// The replica named in checkpoints (`[gateway] replica`).
    pub replica: String,
}

impl Default for LogOptions {
    /// No rotation, a checkpoint every [`CHECKPOINT_EVERY`] entries,
    /// unsigned, replica `gateway`.
    fn default() -> LogOptions {
        LogOptions {
            max_bytes: None,
            checkpoint_every: CHECKPOINT_EVERY,
            signing_key: None,
            replica: "gateway".to_owned(),
        }
    }
}

/// At most this many queued requests share one sync.
const MAX_BATCH: usize = 1024;

/// The audit log, open for appending. Cloning shares the one file.
///
/// [`record`](AuditLog::record) appends its line itself, with one `write`
/// on a file opened with `O_APPEND`, under a lock: lines never interleave,
/// and the line is in the kernel when the call goes on, without a hand-off
/// to another thread (each costs a wake-up on both sides, which on a busy
/// or virtual machine is tens of microseconds). Only syncs go to the log's
/// sync thread, which syncs once for every line written meanwhile (group
/// commit): concurrent calls share a sync instead of queueing for one
/// each, and the async runtime does not wait on the disk, except for the
/// one call running alone ([`call_started`](AuditLog::call_started)), which
/// has nothing to share its sync with and syncs without the hand-off.
#[derive(Clone, Debug)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

/// A call running whose entries an [`AuditLog`] records, from
/// [`AuditLog::call_started`] until it is dropped.
#[derive(Debug)]
#[must_use = "the call counts as running only while the guard is held"]
pub struct CallInFlight {
    inner: Arc<Inner>,
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        self.inner.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A line's sync, asked of the sync thread by
/// [`AuditLog::record_syncing`] and not yet waited for.
#[derive(Debug)]
#[must_use = "the line is on disk only once `synced` has returned Ok"]
pub struct Syncing {
    how: Pending,
    inner: Arc<Inner>,
}

/// Where a [`Syncing`] line's sync is.
#[derive(Debug)]
enum Pending {
    /// Asked of the sync thread, which answers here.
    Handed(tokio::sync::oneshot::Receiver<Result<(), LogError>>),
    /// Left to the caller, the one call running: the first `upto` lines,
    /// synced on its thread by [`Syncing::synced`].
    Caller(u64),
    /// Synced already.
    Done,
}

impl Syncing {
    /// Whether the sync is the caller's own, made on its thread by
    /// [`synced`](Self::synced) (the call was running alone): it waits on
    /// the disk there, so a caller starts the upstream's work first.
    pub fn is_callers(&self) -> bool {
        matches!(self.how, Pending::Caller(_))
    }

    /// Waits until the line is on disk: for the sync thread's answer, or,
    /// when [`is_callers`](Self::is_callers), syncing on this thread.
    ///
    /// # Errors
    ///
    /// [`LogError`] (action `sync it to disk`) when the sync failed or the
    /// sync thread stopped before it: withhold the answer of the call the
    /// line records.
    pub async fn synced(mut self) -> Result<(), LogError> {
        let inner = &self.inner;
        match std::mem::replace(&mut self.how, Pending::Done) {
            Pending::Handed(answer) => answer
                .await
                .map_err(|_| inner.error("sync it to disk", sync_thread_gone()))?,
            Pending::Caller(upto) => {
                #[cfg(test)]
                inner.own_syncs.fetch_add(1, Ordering::SeqCst);
                inner.sync_upto(upto)
            }
            Pending::Done => Ok(()),
        }
    }
}

impl Drop for Syncing {
    /// A caller's sync never waited for (its call was dropped, say, when
    /// its client went away) is handed to the sync thread, so that the
    /// line is synced at once all the same.
    fn drop(&mut self) {
        if let Pending::Caller(upto) = self.how {
            let (reply, _) = tokio::sync::oneshot::channel();
            // A stopped sync thread leaves it to the next sync.
            let _ = self.inner.syncs.send(SyncRequest::Sync { upto, reply });
        }
    }
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    /// The file lines go to now, shared with the sync thread (`fdatasync`
    /// needs no lock); replaced when the log rotates.
    current: Arc<RwLock<Arc<File>>>,
    appender: Mutex<Appender>,
    options: LogOptions,
    /// How many lines were appended; a sync covers every line counted
    /// before it starts.
    written: AtomicU64,
    /// Set while the sync thread has an idle sync due, so that
    /// [`Durability::Written`] lines tell it once per [`IDLE_SYNC`], not
    /// once per line.
    armed: AtomicBool,
    /// How many lines the last sync that succeeded covered.
    synced: AtomicU64,
    /// How many calls said they are running ([`AuditLog::call_started`]).
    in_flight: AtomicUsize,
    /// Whether the last sync failed (the log's health, readable without
    /// its lock).
    sync_failing: AtomicBool,
    /// How many times a written line armed the idle sync.
    #[cfg(test)]
    arms: AtomicU64,
    /// How many syncs a call running alone made itself.
    #[cfg(test)]
    own_syncs: AtomicU64,
    syncs: std::sync::mpsc::Sender<SyncRequest>,
    /// Where a written `decided` entry is counted.
    metrics: Metrics,
}

/// What the sync thread is asked.
#[derive(Debug)]
enum SyncRequest {
    /// Sync the first `upto` lines (at least), then answer.
    Sync {
        upto: u64,
        reply: tokio::sync::oneshot::Sender<Result<(), LogError>>,
    },
    /// Lines were written that no sync covers: sync them [`IDLE_SYNC`]
    /// from now, unless a sync that covers them came first.
    Arm,
}

/// The appending side: which file the path named at open, and what the
/// operator has been told.
#[derive(Debug)]
struct Appender {
    /// The file appended to (the one in [`Inner::current`]).
    file: Arc<File>,
    /// The open file's device and inode, to tell whether the path still
    /// names it.
    identity: (u64, u64),
    /// Its length as this writer left it: what rotation compares with
    /// `max_bytes`.
    length: u64,
    /// The chain's last line.
    head: Head,
    /// Entries written since the last checkpoint.
    since_checkpoint: u64,
    /// The number the next rotation names the file with.
    next_rotation: u64,
    health: Health,
}

/// Whether appends and syncs are failing, said as an event once per change
/// (every call is refused while they fail, and the operator must know
/// why), not once per call.
#[derive(Debug, Default)]
struct Health {
    append_failing: bool,
    sync_failing: bool,
}

impl Health {
    /// Records how an append (`sync` false) or a sync went, and says so
    /// when the log starts failing or is written again.
    fn note(&mut self, path: &Path, sync: bool, failure: Option<&LogError>) {
        let before = self.append_failing || self.sync_failing;
        if sync {
            self.sync_failing = failure.is_some();
        } else {
            self.append_failing = failure.is_some();
        }
        match (failure, before) {
            (Some(error), false) => {
                let error = mcp_hints_core::escape::one_line(&error.to_string()).into_owned();
                tracing::error!(
                    path = %mcp_hints_core::escape::one_line(&path.display().to_string()),
                    %error,
                    "{error}; calls are refused until it can be written"
                );
            }
            (None, true) if !(self.append_failing || self.sync_failing) => {
                let path =
                    mcp_hints_core::escape::one_line(&path.display().to_string()).into_owned();
                tracing::info!(%path, "audit log {path} is written again");
            }
            _ => {}
        }
    }
}

impl AuditLog {
    /// Whether [`open`](Self::open) could open the log at `path`, without
    /// creating or writing it (for `gateway check`): an existing file is
    /// opened for appending and closed; for a missing one, a file of a
    /// name of its own is created in its directory and removed at once
    /// (a directory can look writable and refuse a new file: `/proc`, a
    /// read-only mount, a quota).
    ///
    /// # Errors
    ///
    /// [`LogError`] (action `open it for appending`) for a missing
    /// directory, a directory at `path`, or a directory that refuses a
    /// new file (no permission, a read-only or special file system).
    pub fn check(path: &Path) -> Result<(), LogError> {
        let error = |source| LogError {
            path: path.to_owned(),
            action: "open it for appending",
            error: source,
        };
        if path.exists() {
            // Opened, not created, and nothing written: the same error
            // `open` would meet (a directory, no permission).
            OpenOptions::new()
                .append(true)
                .open(path)
                .map(drop)
                .map_err(error)
        } else {
            let dir = match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            match std::fs::metadata(dir) {
                Ok(metadata) if metadata.is_dir() => {
                    let probe = dir.join(format!(".mcp-hints-check-{}", std::process::id()));
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&probe)
                        .map_err(error)?;
                    // Removed, or left empty under a name nothing reads.
                    let _ = std::fs::remove_file(&probe);
                    Ok(())
                }
                Ok(_) => Err(error(std::io::Error::new(
                    std::io::ErrorKind::NotADirectory,
                    format!("{} is not a directory", dir.display()),
                ))),
                Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
                    Err(error(missing_directory(dir)))
                }
                Err(source) => Err(error(source)),
            }
        }
    }

    /// Opens (creating it, mode 0600 on Unix) the log at `path` for
    /// appending, and starts its sync thread (which ends when the last
    /// clone is dropped, syncing what was written).
    ///
    /// # Errors
    ///
    /// [`LogError`] when the file cannot be opened for appending (a
    /// missing directory, a directory at `path`, no permission), or the
    /// sync thread cannot be started.
    pub fn open(path: &Path) -> Result<AuditLog, LogError> {
        AuditLog::open_with(path, LogOptions::default())
    }

    /// [`open`](Self::open) with `options`: rotation, checkpoints and
    /// their key. The chain goes on from the log's last whole line that is
    /// a JSON object (its newest rotated file's, for an empty one), read
    /// from the end ([`chain`]).
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open); also [`LogError`] (action `read its last
    /// lines`) when the log's end cannot be read, and (action `go on with
    /// its chain`) when the copy of its last checkpoint
    /// ([`chain::checkpoint_path`]) says the log was cut short or its last
    /// line edited since: going on would bury the break.
    pub fn open_with(path: &Path, options: LogOptions) -> Result<AuditLog, LogError> {
        AuditLog::open_measured(path, options, Metrics::off())
    }

    /// [`open_with`](Self::open_with), counting each `decided` entry
    /// written in `metrics`' decisions and timing each sync.
    ///
    /// # Errors
    ///
    /// As [`open_with`](Self::open_with).
    pub(crate) fn open_measured(
        path: &Path,
        log_options: LogOptions,
        metrics: Metrics,
    ) -> Result<AuditLog, LogError> {
        let error = |action, source| LogError {
            path: path.to_owned(),
            action,
            error: source,
        };
        let existed = path.exists();
        let mut options = OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // The log may hold raw arguments: readable by its owner only.
            options.mode(0o600);
        }
        let file = options.open(path).map_err(|source| {
            let dir = match path.parent() {
                Some(dir) if !dir.as_os_str().is_empty() => dir,
                _ => Path::new("."),
            };
            if source.kind() == std::io::ErrorKind::NotFound && !dir.exists() {
                error("open it for appending", missing_directory(dir))
            } else {
                error("open it for appending", source)
            }
        })?;
        if !existed {
            // A new file's name is durable only once its directory is.
            sync_directory(path).map_err(|source| error("sync its directory", source))?;
        }
        let opened = file
            .metadata()
            .map_err(|source| error("read its length", source))?;
        let mut torn = None;
        if ends_torn(path, opened.len()).map_err(|source| error("read its last byte", source))? {
            // A crash cut the last line short: end it, so that the next
            // entry starts a line of its own (the torn one stays, to be
            // seen, and `gateway log` skips it saying so), and name it in
            // that entry, so that `--verify` tells it from a fragment put
            // in by hand.
            torn = chain::torn_tail(path)
                .map_err(|source| error("read its last line", source))?
                .map(|bytes| chain::line_hash(&bytes));
            (&file)
                .write_all(b"\n")
                .map_err(|source| error("end its last line", source))?;
        }
        let mut head =
            chain::resume(path).map_err(|source| error("read its last lines", source))?;
        head.torn = torn;
        chain::check_resume(path, &head)
            .map_err(|why| error("go on with its chain", std::io::Error::other(why)))?;
        let next_rotation = chain::rotated(path)
            .map_err(|source| error("list its rotated files", source))?
            .last()
            .map_or(1, |(number, _)| number + 1);
        let length = file
            .metadata()
            .map_err(|source| error("read its length", source))?
            .len();
        let file = Arc::new(file);
        let (syncs, requests) = std::sync::mpsc::channel();
        let current = Arc::new(RwLock::new(file.clone()));
        let inner = Arc::new(Inner {
            path: path.to_owned(),
            current: current.clone(),
            appender: Mutex::new(Appender {
                file,
                identity: identity(&opened),
                length,
                head,
                since_checkpoint: 0,
                next_rotation,
                health: Health::default(),
            }),
            options: log_options,
            written: AtomicU64::new(0),
            armed: AtomicBool::new(false),
            synced: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            sync_failing: AtomicBool::new(false),
            #[cfg(test)]
            arms: AtomicU64::new(0),
            #[cfg(test)]
            own_syncs: AtomicU64::new(0),
            syncs,
            metrics: metrics.clone(),
        });
        let syncer = Syncer {
            inner: Arc::downgrade(&inner),
            path: path.to_owned(),
            current,
        };
        std::thread::Builder::new()
            .name("audit-log".to_owned())
            .spawn(move || syncer.run(&requests))
            .map_err(|source| error("start its sync thread", source))?;
        Ok(AuditLog { inner })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Appends `entry` as one line and waits until it is as `durability`
    /// asks.
    ///
    /// The line is written before the first await: a future polled once
    /// and dropped has written it (whole, or cut off again), and a
    /// [`Durability::Synced`] one has asked for its sync.
    ///
    /// # Errors
    ///
    /// [`LogError`] when the line cannot be written or synced (a full disk,
    /// an I/O error), or when the file was removed or replaced since it was
    /// opened (a line written then would be lost with the old file). A
    /// line that was written in part is cut off again, so the log stays
    /// parseable. On an error, refuse the call.
    pub async fn record(&self, entry: &Entry, durability: Durability) -> Result<(), LogError> {
        let inner = &self.inner;
        let upto = inner.write(entry)?;
        let gone = || inner.error("sync it to disk", sync_thread_gone());
        match durability {
            Durability::Written => {
                if !inner.armed.swap(true, Ordering::SeqCst) {
                    #[cfg(test)]
                    inner.arms.fetch_add(1, Ordering::SeqCst);
                    // Nobody waits on the idle sync; a stopped thread is
                    // the next synced line's error.
                    let _ = inner.syncs.send(SyncRequest::Arm);
                }
                Ok(())
            }
            Durability::Synced if inner.in_flight.load(Ordering::SeqCst) == 1 => {
                // The one call running: nothing to batch with, and a
                // hand-off to the sync thread would cost more than it
                // saves (see `call_started`).
                #[cfg(test)]
                inner.own_syncs.fetch_add(1, Ordering::SeqCst);
                inner.sync_upto(upto)
            }
            Durability::Synced => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                inner
                    .syncs
                    .send(SyncRequest::Sync { upto, reply })
                    .map_err(|_| gone())?;
                answer.await.map_err(|_| gone())?
            }
        }
    }

    /// Appends `entry` as one line, as [`record`](Self::record) does, and
    /// returns without waiting for its sync: the [`Syncing`] returned is
    /// awaited for it. For a `decided` entry whose call changes nothing (a
    /// read-only, closed-world tool of a trusted upstream), so that the
    /// disk's sync runs beside the upstream's work instead of before it:
    /// the line is in the kernel before the call goes on (a crash of the
    /// gateway cannot lose it) and on disk before its answer goes back.
    /// The sync is the sync thread's, asked for now, except for a call
    /// running alone ([`call_started`](Self::call_started)), whose own
    /// thread syncs in [`Syncing::synced`] ([`Syncing::is_callers`]): the
    /// caller starts the upstream's work first, then syncs. While the
    /// log's last sync failed, it waits for this one before returning, as
    /// `record` with [`Durability::Synced`] does: an outage lets at most
    /// the call that found it go on before its line is on disk.
    ///
    /// # Errors
    ///
    /// [`LogError`] when the line cannot be written (as for `record`), the
    /// sync thread has stopped, or, while syncs are failing, this sync
    /// fails too; a sync that fails after it returned is
    /// [`Syncing::synced`]'s error.
    pub async fn record_syncing(&self, entry: &Entry) -> Result<Syncing, LogError> {
        let inner = &self.inner;
        // Read before this line's own sync is asked for, which may fail
        // before the check below.
        let failing = inner.sync_failing.load(Ordering::SeqCst);
        let upto = inner.write(entry)?;
        if !failing && inner.in_flight.load(Ordering::SeqCst) == 1 {
            // The one call running: its own thread syncs, once the call
            // has started upstream (see `call_started`).
            return Ok(Syncing {
                how: Pending::Caller(upto),
                inner: self.inner.clone(),
            });
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        inner
            .syncs
            .send(SyncRequest::Sync { upto, reply })
            .map_err(|_| inner.error("sync it to disk", sync_thread_gone()))?;
        let syncing = Syncing {
            how: Pending::Handed(answer),
            inner: self.inner.clone(),
        };
        if failing {
            // The last sync failed: this one must succeed before the call
            // goes on, as for a call that may change something, so that an
            // outage lets at most one call go upstream ahead of its sync.
            syncing.synced().await?;
            return Ok(Syncing {
                how: Pending::Done,
                inner: self.inner.clone(),
            });
        }
        Ok(syncing)
    }

    /// Says that a call has started whose entries this log records, until
    /// the returned guard is dropped. While it is the only such call, its
    /// [`Durability::Synced`] lines are synced in [`record`](Self::record)
    /// itself, on the caller's thread: handing a sync to the sync thread and
    /// back costs a wake-up of each (tens of microseconds on a virtual
    /// machine, as much as a fast disk's whole sync), and with no other call
    /// running there is nothing for the sync to be shared with. While more
    /// than one runs, syncs go to the sync thread and share its batches, so
    /// that the async runtime's threads never wait on the disk while other
    /// calls could run. Lines recorded without any call started always go
    /// to the sync thread.
    pub fn call_started(&self) -> CallInFlight {
        self.inner.in_flight.fetch_add(1, Ordering::SeqCst);
        CallInFlight {
            inner: self.inner.clone(),
        }
    }

    /// Writes a checkpoint of kind [`CheckpointKind::Shutdown`] (signed
    /// with [`LogOptions::signing_key`], if set), syncs the log and copies
    /// the checkpoint beside it ([`chain::checkpoint_path`]): when the
    /// gateway stops, so that a log cut short afterwards is found. Nothing
    /// is written when the log is empty or its last line is a checkpoint
    /// already. It waits for the disk on the caller's thread.
    ///
    /// # Errors
    ///
    /// [`LogError`] when the checkpoint cannot be written, the log synced
    /// or the copy written.
    pub fn checkpoint(&self) -> Result<(), LogError> {
        let inner = &self.inner;
        let mut appender = inner
            .appender
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if appender.head.seq == 0 || appender.head.at_checkpoint {
            return Ok(());
        }
        inner
            .still_in_place(appender.identity)
            .map_err(|source| inner.error("append to it", source))?;
        inner.write_checkpoint(&mut appender, CheckpointKind::Shutdown)
    }

    /// Waits until every line written before this call is synced: before
    /// the gateway exits, since the sync thread does not outlive the
    /// process.
    ///
    /// # Errors
    ///
    /// [`LogError`] when the sync fails.
    pub async fn flush(&self) -> Result<(), LogError> {
        let inner = &self.inner;
        let gone = || inner.error("flush it", sync_thread_gone());
        let (reply, answer) = tokio::sync::oneshot::channel();
        let upto = inner.written.load(Ordering::SeqCst);
        inner
            .syncs
            .send(SyncRequest::Sync { upto, reply })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

fn sync_thread_gone() -> std::io::Error {
    std::io::Error::other("its sync thread has stopped")
}

#[cfg(unix)]
fn identity(metadata: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (metadata.dev(), metadata.ino())
}

#[cfg(not(unix))]
fn identity(_metadata: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

impl Inner {
    /// Appends `entry` (its `seq` and `prev` set here, under the lock) and
    /// counts a `decided` one in the metrics; how many lines are written
    /// now, this one included.
    fn write(&self, entry: &Entry) -> Result<u64, LogError> {
        let unlinked;
        let entry = if entry.seq.is_some() || entry.prev.is_some() {
            unlinked = Entry {
                seq: None,
                prev: None,
                ..entry.clone()
            };
            &unlinked
        } else {
            entry
        };
        let body = serde_json::to_vec(entry)
            .map_err(|source| self.error("serialise the entry", source.into()))?;
        let upto = self.append(&body)?;
        if entry.phase == Phase::Decided {
            // Counted once the line is in the file: the counter agrees
            // with the log's `decided` entries, a sync that fails after
            // this included.
            self.metrics.decision(entry.rule.as_deref(), entry.decision);
        }
        Ok(upto)
    }

    /// Syncs every line written so far, on this thread, timed in the
    /// metrics and its outcome noted in the log's health.
    fn sync(&self) -> Result<(), LogError> {
        // Counted before the file is taken: a line counted here went to
        // this file, or to one a rotation synced before handing it on.
        let covered = self.written.load(Ordering::SeqCst);
        let file = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let started = Instant::now();
        let synced = file
            .sync_data()
            .map_err(|source| self.error("sync it to disk", source));
        self.metrics.audit_sync(started.elapsed());
        // A sync that went well while none is failing changes nothing in
        // the health, so it does not take the lock every append waits on.
        // Otherwise the flag and the health change together, under it.
        if synced.is_err() || self.sync_failing.load(Ordering::SeqCst) {
            let mut appender = self.appender.lock().unwrap_or_else(PoisonError::into_inner);
            self.sync_failing.store(synced.is_err(), Ordering::SeqCst);
            appender
                .health
                .note(&self.path, true, synced.as_ref().err());
        }
        if synced.is_ok() {
            self.synced.fetch_max(covered, Ordering::SeqCst);
        }
        synced
    }

    /// Syncs the first `upto` lines on this thread, unless a sync already
    /// covered them.
    fn sync_upto(&self, upto: u64) -> Result<(), LogError> {
        if upto <= self.synced.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.sync()
    }

    /// Links `body` (an entry serialised, without `seq` and `prev`) to the
    /// chain and appends it as one line with one `write` (more only if the
    /// kernel takes it in parts), under the lock, rotating the file first
    /// when the line would take it past `max_bytes`, and writing a
    /// checkpoint after it when one is due; how many lines are written
    /// now, this one included.
    fn append(&self, body: &[u8]) -> Result<u64, LogError> {
        // The path is looked up before the lock is taken: the lookup is
        // the slowest part of an append, and every call waits on the lock.
        // The file it found is checked under the lock; one that is not the
        // open file (a rotation in between) is looked up again there.
        let seen = std::fs::metadata(&self.path).map(|on_disk| identity(&on_disk));
        let mut appender = self.appender.lock().unwrap_or_else(PoisonError::into_inner);
        let line = appender.head.link(body);
        let in_place = match seen {
            Ok(seen) if seen == appender.identity => Ok(()),
            _ => self.still_in_place(appender.identity),
        };
        let appended = match in_place {
            Ok(()) => self.write_linked(&mut appender, &line, false),
            Err(source) => Err(self.error("append to it", source)),
        };
        appender
            .health
            .note(&self.path, false, appended.as_ref().err());
        let upto = appended?;
        appender.since_checkpoint += 1;
        if appender.since_checkpoint >= self.options.checkpoint_every.max(1)
            && let Err(error) = self.write_checkpoint(&mut appender, CheckpointKind::Periodic)
        {
            // The entry is written; the checkpoint is tried again with
            // the next entry, and the operator is told.
            let error = mcp_hints_core::escape::one_line(&error.to_string()).into_owned();
            tracing::error!(%error, "{error}; the checkpoint is tried again with the next entry");
        }
        Ok(upto)
    }

    /// Writes `line`, the next link of the chain (with its newline),
    /// rotating first if it would take the file past `max_bytes`, and moves
    /// the chain's head past it; how many lines are written now.
    fn write_linked(
        &self,
        appender: &mut Appender,
        line: &[u8],
        checkpoint: bool,
    ) -> Result<u64, LogError> {
        let length = line.len() as u64;
        if let Some(max) = self.options.max_bytes
            && appender.length > 0
            && appender.length.saturating_add(length) > max
        {
            self.rotate(appender)?;
        }
        self.write_line(&appender.file, line)?;
        appender.length += length;
        appender.head = appender.head.after(line, checkpoint);
        Ok(self.written.fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Writes a checkpoint of `kind` after the chain's head, syncs the
    /// file, then copies the checkpoint beside the log (only once it is
    /// on disk in the log: a copy must never name a line a crash could
    /// take back).
    fn write_checkpoint(
        &self,
        appender: &mut Appender,
        kind: CheckpointKind,
    ) -> Result<(), LogError> {
        let line = chain::checkpoint_line(
            &appender.head,
            kind,
            now(),
            &self.options.replica,
            self.options.signing_key.as_ref(),
        );
        let written = self.write_linked(appender, &line, true)?;
        appender.since_checkpoint = 0;
        appender
            .file
            .sync_data()
            .map_err(|source| self.error("sync it to disk", source))?;
        self.synced.fetch_max(written, Ordering::SeqCst);
        chain::write_copy(&self.path, &line)
            .map_err(|source| self.error("copy its checkpoint", source))
    }

    /// Renames the full file to its rotated name ([`chain::rotated_path`])
    /// and starts a new one at the log's path. The old file is synced
    /// first, so every line counted as written before is on disk, and
    /// the sync thread is handed the new file before any line goes to it.
    fn rotate(&self, appender: &mut Appender) -> Result<(), LogError> {
        let error = |action, source| self.error(action, source);
        appender
            .file
            .sync_data()
            .map_err(|source| error("sync it to disk", source))?;
        self.synced
            .fetch_max(self.written.load(Ordering::SeqCst), Ordering::SeqCst);
        let rotated = chain::rotated_path(&self.path, appender.next_rotation);
        if rotated.exists() {
            return Err(error(
                "rotate it",
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} exists already", rotated.display()),
                ),
            ));
        }
        std::fs::rename(&self.path, &rotated).map_err(|source| error("rotate it", source))?;
        let mut options = OpenOptions::new();
        options.append(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(&self.path)
            .map_err(|source| error("open it for appending", source))?;
        sync_directory(&self.path).map_err(|source| error("sync its directory", source))?;
        let opened = file
            .metadata()
            .map_err(|source| error("read its length", source))?;
        let file = Arc::new(file);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = file.clone();
        appender.file = file;
        appender.identity = identity(&opened);
        appender.length = 0;
        appender.next_rotation += 1;
        let path = mcp_hints_core::escape::one_line(&self.path.display().to_string()).into_owned();
        let to = mcp_hints_core::escape::one_line(&rotated.display().to_string()).into_owned();
        tracing::info!(%path, rotated = %to, "audit log {path} rotated to {to}");
        Ok(())
    }

    fn write_line(&self, file: &File, line: &[u8]) -> Result<(), LogError> {
        let mut file = file;
        let mut written = 0;
        while written < line.len() {
            match file.write(&line[written..]) {
                Ok(0) => {
                    let source = std::io::Error::from(std::io::ErrorKind::WriteZero);
                    return Err(self.cut(file, written, source));
                }
                Ok(more) => written += more,
                Err(source) if source.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => return Err(self.cut(file, written, source)),
            }
        }
        Ok(())
    }

    /// Cuts the `written` bytes of a line that failed off the file's end,
    /// so the next entry starts a line of its own; the failure as a
    /// [`LogError`].
    fn cut(&self, file: &File, written: usize, source: std::io::Error) -> LogError {
        if written > 0
            && let Ok(metadata) = file.metadata()
        {
            // The length now, not one remembered: the file may have been
            // truncated in place since it was opened (copytruncate).
            let _ = file.set_len(metadata.len().saturating_sub(written as u64));
        }
        self.error("append to it", source)
    }

    fn error(&self, action: &'static str, source: std::io::Error) -> LogError {
        LogError {
            path: self.path.clone(),
            action,
            error: source,
        }
    }

    /// An error when the path no longer names the open file: a write to
    /// an unlinked file succeeds, and is lost.
    fn still_in_place(&self, opened: (u64, u64)) -> std::io::Result<()> {
        let gone = || {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the file was removed or replaced since the gateway opened it",
            )
        };
        let on_disk = std::fs::metadata(&self.path).map_err(|_| gone())?;
        if cfg!(unix) && identity(&on_disk) != opened {
            return Err(gone());
        }
        Ok(())
    }
}

/// The sync thread's side.
struct Syncer {
    /// The log, while any [`AuditLog`] holds it: its line count and its
    /// health. Weak, so that the last clone dropped ends the thread.
    inner: std::sync::Weak<Inner>,
    path: PathBuf,
    /// The file lines go to now (replaced on rotation, which syncs the
    /// old one itself).
    current: Arc<RwLock<Arc<File>>>,
}

impl Syncer {
    /// Answers sync requests, a batch of them with one sync, until every
    /// [`AuditLog`] clone is gone; syncs lines that were only written when
    /// their idle sync is due, and at the end.
    fn run(self, requests: &std::sync::mpsc::Receiver<SyncRequest>) {
        use std::sync::mpsc::RecvTimeoutError;
        let mut idle_sync: Option<Instant> = None;
        loop {
            let first = match idle_sync {
                Some(due) => {
                    match requests.recv_timeout(due.saturating_duration_since(Instant::now())) {
                        Ok(request) => request,
                        Err(RecvTimeoutError::Timeout) => {
                            // Nobody waits on it; the operator is told.
                            self.idle_sync(&mut idle_sync);
                            continue;
                        }
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                None => match requests.recv() {
                    Ok(request) => request,
                    Err(_) => break,
                },
            };
            let mut waiting = Vec::new();
            let mut request = Some(first);
            while let Some(next) = request.take() {
                match next {
                    SyncRequest::Arm => {
                        idle_sync.get_or_insert_with(|| Instant::now() + IDLE_SYNC);
                    }
                    SyncRequest::Sync { upto, reply } => waiting.push((upto, reply)),
                }
                if waiting.len() < MAX_BATCH {
                    request = requests.try_recv().ok();
                }
            }
            if waiting.is_empty() {
                continue;
            }
            // Lines an earlier sync covered need no other.
            let synced = self
                .inner
                .upgrade()
                .map_or(0, |inner| inner.synced.load(Ordering::SeqCst));
            let outcome = if waiting.iter().all(|(upto, _)| *upto <= synced) {
                Ok(())
            } else {
                self.sync()
            };
            for (_, reply) in waiting {
                let answer = match &outcome {
                    Ok(()) => Ok(()),
                    Err(error) => Err(LogError {
                        path: error.path.clone(),
                        action: error.action,
                        error: copy(&error.error),
                    }),
                };
                // A caller that went away needs no answer.
                let _ = reply.send(answer);
            }
        }
        // Every clone is gone: nothing is appended any more.
        let _ = self.file().sync_data();
    }

    /// The file lines go to now.
    fn file(&self) -> Arc<File> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Syncs every line written so far.
    fn sync(&self) -> Result<(), LogError> {
        match self.inner.upgrade() {
            Some(inner) => inner.sync(),
            None => self.file().sync_data().map_err(|source| LogError {
                path: self.path.clone(),
                action: "sync it to disk",
                error: source,
            }),
        }
    }

    /// The idle sync, once it is due: syncs the lines only written since
    /// the last sync, if any, and disarms, so that the next such line arms
    /// it again. Calls' own syncs leave it armed: at one call at a time,
    /// each call's sync covers the previous call's `finished` line, and
    /// re-arming after each would cost a wake-up of this thread per call.
    fn idle_sync(&self, due: &mut Option<Instant>) {
        *due = None;
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        // Disarmed before the count is read: a line counted after this
        // store arms the thread anew, one counted before it is seen here.
        inner.armed.store(false, Ordering::SeqCst);
        if inner.written.load(Ordering::SeqCst) <= inner.synced.load(Ordering::SeqCst) {
            return;
        }
        drop(inner);
        if self.sync().is_err() {
            // Tried again later; the operator has been told.
            if let Some(inner) = self.inner.upgrade() {
                inner.armed.store(true, Ordering::SeqCst);
            }
            *due = Some(Instant::now() + IDLE_SYNC);
        }
    }
}

/// Whether the file at `path`, `length` bytes long, has a last line
/// without its newline.
fn ends_torn(path: &Path, length: u64) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    if length == 0 {
        return Ok(false);
    }
    let mut reader = File::open(path)?;
    reader.seek(SeekFrom::Start(length - 1))?;
    let mut last = [0u8];
    reader.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// `error` again, for each caller of a batch that shares it.
fn copy(error: &std::io::Error) -> std::io::Error {
    // The OS's code kept, so that each waiter can tell ENOSPC from EIO.
    match error.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(error.kind(), error.to_string()),
    }
}

/// The error for a log whose directory does not exist, naming that
/// directory as an absolute path with `.` and `..` taken out: a relative
/// `[log] path` is relative to the config's directory, which is not where
/// the operator stands.
fn missing_directory(dir: &Path) -> std::io::Error {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned());
    let mut shown = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                shown.pop();
            }
            other => shown.push(other),
        }
    }
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("its directory {} does not exist", shown.display()),
    )
}

#[cfg(unix)]
fn sync_directory(path: &Path) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(directory)?.sync_all()
}

/// Directories cannot be opened as files elsewhere; the entry itself is
/// still synced.
#[cfg(not(unix))]
fn sync_directory(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// RFC 3339 times: written in UTC with milliseconds
/// (`2026-03-16T09:30:00.123Z`), read with any offset and fraction, by
/// chrono.
pub mod rfc3339 {
    use std::time::{SystemTime, UNIX_EPOCH};

    use chrono::{DateTime, SecondsFormat, Utc};

    /// `time` in UTC with milliseconds; times before 1970 are written as
    /// 1970-01-01T00:00:00.000Z.
    pub fn format(time: SystemTime) -> String {
        let millis = time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        i64::try_from(millis)
            .ok()
            .and_then(DateTime::from_timestamp_millis)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    }

    /// Reads `YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)` (`t`, `z`
    /// and a space for `T` accepted, as RFC 3339 allows). A leap second
    /// (`:60`) counts as the next second's start.
    ///
    /// # Errors
    ///
    /// [`Error::Time`](crate::Error::Time), saying what is wrong, for text
    /// of another shape or a field out of range.
    pub fn parse(text: &str) -> Result<SystemTime, crate::Error> {
        DateTime::parse_from_rfc3339(text)
            .map(SystemTime::from)
            .map_err(|error| crate::Error::Time {
                text: text.to_owned(),
                error,
            })
    }

    /// `#[serde(with = "rfc3339")]` for a `SystemTime` field written as
    /// [`format()`] and read by [`parse`].
    pub fn serialize<S: serde::Serializer>(
        time: &SystemTime,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(*time))
    }

    /// See [`serialize`].
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SystemTime, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(deserializer)?;
        parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use serde_json::json;

    use super::*;
    use crate::scratch::Scratch;

    fn entry(n: u32, principal: &str, tool: &str, decision: &str, time: &str) -> Entry {
        Entry {
            seq: None,
            prev: None,
            time: time.to_owned(),
            replica: Some("gw-1".to_owned()),
            id: format!("call-{n}"),
            principal: principal.to_owned(),
            upstream: "memory".to_owned(),
            tool: tool.to_owned(),
            decision: decision.parse().unwrap(),
            rule: None,
            hints: json!({
                "readOnlyHint": {"value": false, "source": "defaulted"},
                "destructiveHint": {"value": true, "source": "asserted"},
            }),
            arguments_sha256: arguments_digest(&Map::new()),
            arguments: None,
            outcome: None,
            attempts: None,
            degraded: None,
            by: None,
            earlier: None,
            session: None,
            redacted: None,
            withheld: None,
            phase: Phase::Decided,
        }
    }

    #[test]
    fn redacted_is_written_only_when_something_matched() {
        let plain = entry(1, "alice", "read", "allow", "2026-03-16T09:30:00.000Z");
        let line = serde_json::to_string(&plain).unwrap();
        assert!(!line.contains("redacted"), "{line}");
        // A line of a log written before the field reads as before.
        assert_eq!(serde_json::from_str::<Entry>(&line).unwrap(), plain);
        let mut finished = plain;
        finished.phase = Phase::Finished;
        finished.outcome = Some(Outcome::Withheld);
        finished.redacted = Some(vec![Redacted {
            rule: "redact[0] (detectors aws_access_key)".to_owned(),
            matches: 2,
            places: vec!["content[0].text".to_owned()],
        }]);
        let value = serde_json::to_value(&finished).unwrap();
        assert_eq!(value["outcome"], "withheld");
        assert_eq!(
            value["redacted"],
            json!([{
                "rule": "redact[0] (detectors aws_access_key)",
                "matches": 2,
                "places": ["content[0].text"],
            }])
        );
        assert_eq!(serde_json::from_value::<Entry>(value).unwrap(), finished);
    }

    #[tokio::test]
    async fn entries_reads_the_rotated_files_in_order_and_passes_over_checkpoints() {
        let scratch = Scratch::new("entries");
        let path = scratch.0.join("audit.jsonl");
        let options = LogOptions {
            max_bytes: Some(1500),
            checkpoint_every: 3,
            ..LogOptions::default()
        };
        let log = AuditLog::open_with(&path, options).unwrap();
        for n in 0..10 {
            log.record(&entry(n, "alice", "t", "allow", &now()), Durability::Synced)
                .await
                .unwrap();
        }
        log.checkpoint().unwrap();
        drop(log);
        let report = crate::chain::verify(&path, None).unwrap();
        assert_eq!((report.entries, report.checkpoints), (10, 4));
        assert!(report.files.len() > 2, "{:?}", report.files);

        let read: Vec<(chain::At, Entry)> = entries(&path).map(Result::unwrap).collect();
        let ids: Vec<&str> = read.iter().map(|(_, entry)| entry.id.as_str()).collect();
        let expected: Vec<String> = (0..10).map(|n| format!("call-{n}")).collect();
        assert_eq!(ids, expected);
        let seqs: Vec<u64> = read.iter().map(|(_, entry)| entry.seq.unwrap()).collect();
        assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
        assert_eq!(read[0].0.file, chain::rotated_path(&path, 1));
        assert_eq!(read[9].0.file, path);
        // Each says where it is: that line of that file is the entry.
        for (at, entry) in &read {
            let text = std::fs::read_to_string(&at.file).unwrap();
            let line = text.lines().nth(at.line - 1).unwrap();
            assert_eq!(&serde_json::from_str::<Entry>(line).unwrap(), entry, "{at}");
        }
    }

    #[test]
    fn entries_names_the_file_and_line_of_a_line_that_is_not_an_entry() {
        let scratch = Scratch::new("entries-bad");
        let path = scratch.0.join("audit.jsonl");
        let line = |n| serde_json::to_string(&entry(n, "a", "t", "allow", &now())).unwrap();
        let cut = &line(3)[..40];
        std::fs::write(
            &path,
            format!("{}\n\n{{\"time\": 1}}\n{}\n{cut}", line(1), line(2)),
        )
        .unwrap();
        let read: Vec<_> = entries(&path).collect();
        assert_eq!(read.len(), 4, "{read:?}");
        let (at, first) = read[0].as_ref().unwrap();
        assert_eq!((at.line, first.id.as_str()), (1, "call-1"));
        // The blank line is passed over, the bad one named: the next read.
        match &read[1] {
            Err(error @ ReadError::NotAnEntry { at, torn, .. }) => {
                assert_eq!((&at.file, at.line, *torn), (&path, 3, false));
                assert!(
                    error
                        .to_string()
                        .starts_with(&format!("{}:3: not an audit log entry: ", path.display())),
                    "{error}"
                );
            }
            other => panic!("{other:?}"),
        }
        let (at, second) = read[2].as_ref().unwrap();
        assert_eq!((at.line, second.id.as_str()), (4, "call-2"));
        // A line cut short (a crash, or a read while it is written).
        match &read[3] {
            Err(ReadError::NotAnEntry { at, torn, .. }) => assert_eq!((at.line, *torn), (5, true)),
            other => panic!("{other:?}"),
        }

        // Bytes that are not UTF-8 end the reading, named by line.
        let mut bytes = format!("{}\n", line(1)).into_bytes();
        bytes.extend(b"{\"id\": \"\xff\"}\n");
        bytes.extend(format!("{}\n", line(2)).as_bytes());
        std::fs::write(&path, bytes).unwrap();
        let mut read = entries(&path);
        assert!(read.next().unwrap().is_ok());
        match read.next() {
            Some(Err(ReadError::Line { at, error })) => {
                assert_eq!(at.line, 2);
                assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
            }
            other => panic!("{other:?}"),
        }
        assert!(read.next().is_none());

        // A missing log: one error naming it, and the end.
        let missing = scratch.0.join("missing.jsonl");
        let mut read = entries(&missing);
        let error = read.next().unwrap().unwrap_err();
        assert!(matches!(&error, ReadError::Open { path, .. } if *path == missing));
        assert!(
            error.to_string().starts_with(&format!(
                "audit log {}: cannot read it: ",
                missing.display()
            )),
            "{error}"
        );
        assert!(read.next().is_none());
    }

    // The 50 records append at once and share the sync thread's batches;
    // on the current-thread runtime the tasks interleave at every await.
    #[tokio::test]
    async fn concurrent_records_are_all_written_whole() {
        let scratch = Scratch::new("concurrent");
        let path = scratch.0.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let tasks: Vec<_> = (0..50)
            .map(|n| {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut entry = entry(n, "alice", "create_entities", "allow", &now());
                    // Long lines make an interleaving write visible.
                    entry.arguments = Some(json!({ "text": "x".repeat(10_000 + n as usize) }));
                    // Both kinds share batches: each is answered as it asked.
                    let durability = if n % 2 == 0 {
                        Durability::Synced
                    } else {
                        Durability::Written
                    };
                    log.record(&entry, durability).await
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut ids: Vec<String> = text
            .lines()
            .map(|line| serde_json::from_str::<Entry>(line).unwrap().id)
            .collect();
        ids.sort();
        let mut expected: Vec<String> = (0..50).map(|n| format!("call-{n}")).collect();
        expected.sort();
        assert_eq!(ids, expected);
        assert!(text.ends_with('\n'));
        // Linked under the lock: the chain holds whatever the interleaving.
        let report = crate::chain::verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!(report.entries, 50);
    }

    #[tokio::test]
    async fn concurrent_records_keep_the_chain_across_checkpoints_and_rotations() {
        let scratch = Scratch::new("concurrent-chain");
        let path = scratch.0.join("audit.jsonl");
        let options = LogOptions {
            max_bytes: Some(4096),
            checkpoint_every: 7,
            ..LogOptions::default()
        };
        let log = AuditLog::open_with(&path, options).unwrap();
        let tasks: Vec<_> = (0..60)
            .map(|n| {
                let log = log.clone();
                tokio::spawn(async move {
                    log.record(&entry(n, "alice", "t", "allow", &now()), Durability::Synced)
                        .await
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        log.checkpoint().unwrap();
        let report = crate::chain::verify(&path, None).unwrap();
        assert_eq!(report.tampering, None);
        assert_eq!((report.entries, report.checkpoints), (60, 9));
        assert!(report.files.len() > 2, "{:?}", report.files);
        assert_eq!(report.copy_matched, Some(69));
    }

    #[tokio::test]
    async fn a_call_running_alone_syncs_itself_and_calls_running_together_share_the_thread() {
        let scratch = Scratch::new("alone");
        let path = scratch.0.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let own = |log: &AuditLog| log.inner.own_syncs.load(Ordering::SeqCst);
        let synced = |log: &AuditLog| log.inner.synced.load(Ordering::SeqCst);
        let alone = log.call_started();
        log.record(&entry(1, "alice", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap();
        assert_eq!((own(&log), synced(&log)), (1, 1));
        let other = log.call_started();
        log.record(&entry(2, "alice", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap();
        assert_eq!(
            (own(&log), synced(&log)),
            (1, 2),
            "two calls: the sync thread's"
        );
        drop(other);
        log.record(&entry(3, "alice", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap();
        assert_eq!((own(&log), synced(&log)), (2, 3), "alone again");
        drop(alone);
        log.record(&entry(4, "alice", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap();
        assert_eq!((own(&log), synced(&log)), (2, 4), "no call said it runs");
        assert_eq!(log.inner.in_flight.load(Ordering::SeqCst), 0);
        assert_eq!(crate::chain::verify(&path, None).unwrap().entries, 4);
    }

    #[tokio::test]
    async fn written_lines_arm_the_idle_sync_once_per_period_and_are_synced_by_it() {
        let scratch = Scratch::new("idle-sync");
        let log = AuditLog::open(&scratch.0.join("audit.jsonl")).unwrap();
        let started = Instant::now();
        // One call at a time: each call's sync covers the line the call
        // before only wrote.
        for n in 0..40 {
            let decided = entry(n, "alice", "t", "allow", &now());
            log.record(&decided, Durability::Synced).await.unwrap();
            let finished = Entry {
                phase: Phase::Finished,
                outcome: Some(Outcome::Completed),
                ..decided
            };
            log.record(&finished, Durability::Written).await.unwrap();
        }
        let periods = started.elapsed().as_millis() / IDLE_SYNC.as_millis() + 1;
        let arms = u128::from(log.inner.arms.load(Ordering::SeqCst));
        assert!(
            arms <= periods + 1,
            "{arms} arms of the idle sync in {:?}: one per line, not per period",
            started.elapsed()
        );
        // The last line, only written, is synced with nobody asking.
        let deadline = Instant::now() + Duration::from_secs(10);
        while log.inner.synced.load(Ordering::SeqCst) < 80 {
            assert!(
                Instant::now() < deadline,
                "the idle sync never came: {} of 80 lines synced",
                log.inner.synced.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_log_that_cannot_be_written_is_an_error_naming_it() {
        let scratch = Scratch::new("unwritable");
        // A directory where the file should be: cannot be opened.
        let error = AuditLog::open(&scratch.0).unwrap_err();
        assert_eq!(error.path, scratch.0);
        assert!(
            error.to_string().starts_with(&format!(
                "audit log {}: cannot open it for appending: ",
                scratch.0.display()
            )),
            "{error}"
        );
        // A missing directory, named whole (as `gateway check` names it
        // too), without the `..` a config-relative path has.
        let missing = scratch.0.join("no/such/../such/dir/audit.jsonl");
        let expected = format!(
            "audit log {}: cannot open it for appending: its directory {} does not exist",
            missing.display(),
            scratch.0.join("no/such/dir").display()
        );
        assert_eq!(AuditLog::open(&missing).unwrap_err().to_string(), expected);
        assert_eq!(AuditLog::check(&missing).unwrap_err().to_string(), expected);

        // Removed after it was opened: the entry would be lost with it.
        let path = scratch.0.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        log.record(&entry(1, "a", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let error = log
            .record(&entry(2, "a", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap_err();
        assert_eq!(error.path, path);
        assert_eq!(error.error.kind(), std::io::ErrorKind::NotFound);
        assert!(error.to_string().contains("removed or replaced"), "{error}");

        // A finished entry is refused alike.
        let error = log
            .record(&entry(2, "a", "t", "allow", &now()), Durability::Written)
            .await
            .unwrap_err();
        assert_eq!(error.error.kind(), std::io::ErrorKind::NotFound);

        // Replaced by another file of the same name: still refused.
        std::fs::write(&path, "").unwrap();
        assert!(
            log.record(&entry(3, "a", "t", "allow", &now()), Durability::Synced)
                .await
                .is_err()
        );
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_full_disk_is_an_error() {
        // /dev/full accepts the open and refuses every write with ENOSPC.
        let log = AuditLog::open(Path::new("/dev/full")).unwrap();
        let error = log
            .record(&entry(1, "a", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap_err();
        assert_eq!(error.action, "append to it");
        assert_eq!(error.error.raw_os_error(), Some(28), "{error}"); // ENOSPC
    }

    #[tokio::test]
    async fn a_written_line_is_in_the_file_when_record_returns() {
        let scratch = Scratch::new("written");
        let path = scratch.0.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        for n in 0..20 {
            log.record(&entry(n, "a", "t", "allow", &now()), Durability::Written)
                .await
                .unwrap();
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            assert_eq!(lines, n as usize + 1);
        }
    }

    #[tokio::test]
    async fn a_synced_line_is_synced_when_record_returns() {
        let scratch = Scratch::new("synced");
        let log = AuditLog::open(&scratch.0.join("audit.jsonl")).unwrap();
        for n in 0..20 {
            // A line only written before it: the sync covers both.
            log.record(
                &entry(2 * n, "a", "t", "allow", &now()),
                Durability::Written,
            )
            .await
            .unwrap();
            log.record(
                &entry(2 * n + 1, "a", "t", "allow", &now()),
                Durability::Synced,
            )
            .await
            .unwrap();
            let (written, synced) = (
                log.inner.written.load(Ordering::SeqCst),
                log.inner.synced.load(Ordering::SeqCst),
            );
            assert_eq!(written, 2 * u64::from(n) + 2);
            assert!(synced >= written, "{synced} of {written} lines synced");
        }
    }

    #[tokio::test]
    async fn a_line_syncing_beside_its_call_is_written_at_once_and_synced_when_waited_for() {
        let scratch = Scratch::new("syncing");
        let path = scratch.0.join("audit.jsonl");
        let log = AuditLog::open(&path).unwrap();
        let synced = |log: &AuditLog| log.inner.synced.load(Ordering::SeqCst);
        let own = |log: &AuditLog| log.inner.own_syncs.load(Ordering::SeqCst);
        // Alone: written now, synced by the caller's `synced`.
        let alone = log.call_started();
        let syncing = log
            .record_syncing(&entry(1, "alice", "t", "allow", &now()))
            .await
            .unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(written.lines().count(), 1, "{written}");
        assert!(written.contains(r#""phase":"decided""#), "{written}");
        assert!(syncing.is_callers());
        assert_eq!(synced(&log), 0, "synced before the caller asked");
        syncing.synced().await.unwrap();
        assert_eq!((synced(&log), own(&log)), (1, 1));
        // Two calls: the sync thread's, asked for at once.
        let other = log.call_started();
        let syncing = log
            .record_syncing(&entry(2, "alice", "t", "allow", &now()))
            .await
            .unwrap();
        assert!(!syncing.is_callers());
        syncing.synced().await.unwrap();
        assert_eq!((synced(&log), own(&log)), (2, 1));
        drop(other);
        // Alone, and dropped unwaited (its client went away): the sync
        // thread syncs it.
        let dropped = log
            .record_syncing(&entry(3, "alice", "t", "allow", &now()))
            .await
            .unwrap();
        assert!(dropped.is_callers());
        drop(dropped);
        let deadline = Instant::now() + Duration::from_secs(10);
        while synced(&log) < 3 {
            assert!(
                Instant::now() < deadline,
                "the dropped line was never synced"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(own(&log), 1);
        drop(alone);
        assert_eq!(crate::chain::verify(&path, None).unwrap().entries, 3);
    }

    #[tokio::test]
    async fn a_sync_that_succeeds_after_a_failing_one_clears_the_health() {
        let scratch = Scratch::new("recovered");
        let log = AuditLog::open(&scratch.0.join("audit.jsonl")).unwrap();
        // As a failed sync leaves them.
        log.inner.sync_failing.store(true, Ordering::SeqCst);
        log.inner.appender.lock().unwrap().health.sync_failing = true;
        log.record(&entry(1, "alice", "t", "allow", &now()), Durability::Synced)
            .await
            .unwrap();
        assert!(!log.inner.sync_failing.load(Ordering::SeqCst));
        assert!(!log.inner.appender.lock().unwrap().health.sync_failing);
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_sync_that_fails_beside_its_call_is_the_waiters_error_and_the_next_ones_at_once() {
        // /dev/null takes every write and refuses every sync (EINVAL).
        let log = AuditLog::open(Path::new("/dev/null")).unwrap();
        let syncing = log
            .record_syncing(&entry(1, "alice", "t", "allow", &now()))
            .await
            .unwrap();
        let error = syncing.synced().await.unwrap_err();
        assert_eq!(error.action, "sync it to disk", "{error}");
        assert_eq!(error.error.raw_os_error(), Some(22), "{error}");
        assert!(log.inner.appender.lock().unwrap().health.sync_failing);
        // Syncs are failing now: the next line's sync is waited for before
        // its call could go on.
        let error = log
            .record_syncing(&entry(2, "alice", "t", "allow", &now()))
            .await
            .unwrap_err();
        assert_eq!(error.error.raw_os_error(), Some(22), "{error}");
    }

    #[test]
    fn entry_words_are_written_read_and_parsed_by_the_same_names() {
        fn check<T>(all: &[T], names: &[&str])
        where
            T: Copy + PartialEq + std::fmt::Debug + Serialize + std::str::FromStr<Err = String>,
            T: for<'de> Deserialize<'de> + std::fmt::Display,
        {
            assert_eq!(all.len(), names.len());
            for (word, name) in all.iter().zip(names) {
                assert_eq!(serde_json::to_value(word).unwrap(), json!(name));
                assert_eq!(serde_json::from_value::<T>(json!(name)).unwrap(), *word);
                assert_eq!(name.parse::<T>().unwrap(), *word);
                assert_eq!(word.to_string(), *name);
            }
            let error = "maybe\u{1b}[2J".parse::<T>().unwrap_err();
            assert!(
                error.starts_with("`maybe\\u{1b}[2J` is not one of "),
                "{error}"
            );
        }
        check(Decision::ALL, Decision::NAMES);
        check(Outcome::ALL, Outcome::NAMES);
        check(Phase::ALL, Phase::NAMES);
        assert_eq!(Decision::NAMES.len(), 10);
        assert!(serde_json::from_value::<Decision>(json!("maybe")).is_err());
    }

    #[test]
    fn the_digest_ignores_key_order_and_number_spelling() {
        let a: Map<String, Value> =
            serde_json::from_str(r#"{"b": 1.0, "a": {"y": [1, 2.50], "x": "s"}}"#).unwrap();
        let b: Map<String, Value> =
            serde_json::from_str(r#"{"a": {"x": "s", "y": [1.0, 2.5]}, "b": 1}"#).unwrap();
        assert_eq!(arguments_digest(&a), arguments_digest(&b));
        let c: Map<String, Value> =
            serde_json::from_str(r#"{"b": 2, "a": {"x": "s", "y": [1, 2.5]}}"#).unwrap();
        assert_ne!(arguments_digest(&a), arguments_digest(&c));
        // A double would round these two together; their digits differ.
        let big = |n: &str| serde_json::from_str::<Map<String, Value>>(&format!(r#"{{"n":{n}}}"#));
        assert_ne!(
            arguments_digest(&big("9007199254740993").unwrap()),
            arguments_digest(&big("9007199254740992").unwrap())
        );
        // `printf '{}' | sha256sum`.
        assert_eq!(
            arguments_digest(&Map::new()),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        // `printf '{"a":1}' | sha256sum`.
        let one: Map<String, Value> = serde_json::from_str(r#"{ "a" : 1.0 }"#).unwrap();
        assert_eq!(
            arguments_digest(&one),
            "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"
        );
    }

    #[test]
    fn times_are_rfc_3339_utc_with_milliseconds() {
        let time = UNIX_EPOCH + Duration::from_millis(1_773_653_400_123);
        assert_eq!(rfc3339::format(time), "2026-03-16T09:30:00.123Z");
        assert_eq!(rfc3339::format(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339::format(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(rfc3339::parse("2026-03-16T09:30:00.123Z").unwrap(), time);
        assert_eq!(
            rfc3339::parse("2026-03-16T11:30:00.123+02:00").unwrap(),
            time
        );
        assert_eq!(
            rfc3339::parse("2026-03-16 08:00:00.123456789-01:30").unwrap(),
            time + Duration::from_nanos(456_789)
        );
        assert_eq!(
            rfc3339::parse("1969-12-31T23:59:59Z").unwrap(),
            UNIX_EPOCH - Duration::from_secs(1)
        );
        for bad in [
            "2026-03-16",
            "2026-02-30T00:00:00Z",
            "2026-03-16T24:00:00Z",
            "2026-03-16T09:30:00",
            "2026-03-16T09:30:00.Z",
            "2026-03-16T09:30:00+2:00",
            "２026-03-16T09:30:00Z",
        ] {
            assert!(rfc3339::parse(bad).is_err(), "{bad}");
        }
        // Lower-case separators, and a leap second as the next one's start.
        assert_eq!(rfc3339::parse("2026-03-16t09:30:00.123z").unwrap(), time);
        assert_eq!(
            rfc3339::parse("2016-12-31T23:59:60Z").unwrap(),
            rfc3339::parse("2017-01-01T00:00:00Z").unwrap()
        );
        // Round trip over many days, leap years included.
        for day in (0..200_000).step_by(997) {
            let time = UNIX_EPOCH + Duration::from_secs(day * 86_400 + 3_723);
            assert_eq!(rfc3339::parse(&rfc3339::format(time)).unwrap(), time);
        }
    }
}

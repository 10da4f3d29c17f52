//! Calls held for an approver, and the lock of approved tool fingerprints
//! (DESIGN.md, "Gateway words": parked call, drift).
//!
//! - [`Approvals`]: a `require_approval` rule (or a drifted tool) parks the
//!   call with its exact arguments; `mcp-hints gateway approve|deny ID`
//!   resolves it through the admin endpoint, or its rule's timeout does, by
//!   the rule's `on_expiry`; a client that withdraws it first abandons it,
//!   and it is never forwarded.
//! - [`DriftLock`]: the approved fingerprints, in the `mcp-hints pin`
//!   format ([`mcp_hints::fingerprint::Lock`]), by namespaced tool name. A
//!   tool that is new or changed since approval is not callable until an
//!   approver approves it; the refusal names what changed, in the words of
//!   `mcp-hints audit --pinned`.
//!
//! The admin endpoint that decides them is [`crate::front::serve_admin`];
//! its client, behind `mcp-hints gateway approve|deny|pending`, is the
//! command's.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use mcp_hints::collect::{ListedTool, ToolList};
use mcp_hints::fingerprint::{Fingerprint, LOCK_VERSION, Lock, PinnedTool};
use mcp_hints::{Hint, ToolHints};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::Error;
use super::log::{Decision, rfc3339};

use super::config::LockConfig;
use super::policy::Expiry;
#[cfg(test)]
use super::state::InProcess;
use super::state::{SharedState, StateError};
use super::webhook::Webhook;
use mcp_hints_core::escape::one_line;

/// A call held for an approver: who asked for what, with the exact
/// arguments that will be sent if it is approved. Serialised (for the
/// admin endpoint's `GET /pending`) with its times in RFC 3339.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parked {
    /// The call's id (a v4 UUID), the one its audit entries carry; what
    /// `mcp-hints gateway approve ID` names.
    pub id: String,
    /// The principal that made the call.
    pub principal: String,
    /// The upstream's name.
    pub upstream: String,
    /// The tool's name as the upstream serves it.
    pub tool: String,
    /// The arguments, exactly as they will be forwarded.
    pub arguments: Map<String, Value>,
    /// When it was parked.
    #[serde(with = "rfc3339")]
    pub parked_at: SystemTime,
    /// When it expires: set when it is parked to `parked_at` plus the
    /// timeout.
    #[serde(with = "rfc3339")]
    pub expires_at: SystemTime,
    /// Why it waits, for the approver: the rule that fired, or what drifted.
    pub reason: String,
    /// The hints the gateway acted on, each with its source, as the audit
    /// log's `hints` has them: `{"readOnlyHint": {"value": false,
    /// "source": "asserted"}, ...}` (sources `asserted`, `declared`,
    /// `defaulted`). `null` in a record parked by a gateway that did not
    /// keep them.
    #[serde(default)]
    pub hints: Value,
    /// For a call of a drifted tool: how its definition differs from the
    /// approved fingerprint. `None` for a call a rule parked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftDiff>,
}

/// How a drifted tool's definition differs from the fingerprint approved
/// for it (the drift lock keeps a digest of each part and the annotations
/// themselves, so a changed part is shown with its value now, and a
/// changed annotation with both values). Serialised for `GET /pending`
/// and the approvals page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriftDiff {
    /// Whether nothing was approved for the tool: every part is new.
    pub new: bool,
    /// What changed, in the words of `mcp-hints audit --pinned`
    /// (`"description"`, `"readOnlyHint false -> true"`); empty for a new
    /// tool.
    pub what: Vec<String>,
    /// Each part of the definition whose digest differs, by wire name
    /// (`"description"`, `"inputSchema"`, ...), in name order.
    pub parts: Vec<PartChange>,
    /// Each annotation whose value differs (`null` counts as absent), in
    /// name order.
    pub annotations: Vec<AnnotationChange>,
}

/// One part of a drifted tool's definition that changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PartChange {
    /// Its wire name.
    pub part: String,
    /// Its SHA-256 digest as approved (hex); `None`: it was absent.
    pub approved: Option<String>,
    /// Its digest now; `None`: it is gone.
    pub now: Option<String>,
    /// Its value now, as the upstream serves it; `None` when it is gone.
    pub value: Option<Value>,
}

/// One annotation of a drifted tool that changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnnotationChange {
    /// Its name (`"readOnlyHint"`, `"title"`, ...).
    pub name: String,
    /// Its value as approved; `None`: absent.
    pub approved: Option<Value>,
    /// Its value now; `None`: absent.
    pub now: Option<Value>,
}

impl DriftDiff {
    /// The difference between the `approved` fingerprint (`None`: nothing
    /// approved) and the tool as served now: `now`, the [`PinnedTool`] of
    /// its `definition`; `what` is [`Drift::Changed`]'s words.
    pub(crate) fn between(
        approved: Option<&PinnedTool>,
        now: &PinnedTool,
        definition: &Map<String, Value>,
        what: Vec<String>,
    ) -> DriftDiff {
        let no_parts = BTreeMap::new();
        let then = approved.map_or(&no_parts, |tool| &tool.fingerprint.parts);
        let names: std::collections::BTreeSet<&String> =
            then.keys().chain(now.fingerprint.parts.keys()).collect();
        let parts = names
            .into_iter()
            .filter(|name| then.get(*name) != now.fingerprint.parts.get(*name))
            .map(|name| PartChange {
                part: name.clone(),
                approved: then.get(name).cloned(),
                now: now.fingerprint.parts.get(name).cloned(),
                value: definition
                    .get(name)
                    .filter(|value| !value.is_null())
                    .cloned(),
            })
            .collect();
        let members = |annotations: Option<&Value>| -> BTreeMap<String, Value> {
            match annotations {
                Some(Value::Object(members)) => members
                    .iter()
                    .filter(|(_, value)| !value.is_null())
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect(),
                _ => BTreeMap::new(),
            }
        };
        let before = members(approved.and_then(|tool| tool.annotations.as_ref()));
        let after = members(now.annotations.as_ref());
        let names: std::collections::BTreeSet<&String> =
            before.keys().chain(after.keys()).collect();
        let annotations = names
            .into_iter()
            .filter(|name| before.get(*name) != after.get(*name))
            .map(|name| AnnotationChange {
                name: name.clone(),
                approved: before.get(name).cloned(),
                now: after.get(name).cloned(),
            })
            .collect();
        DriftDiff {
            new: approved.is_none(),
            what,
            parts,
            annotations,
        }
    }
}

/// Who denied the calls still parked when the gateway stopped, in
/// [`Resolution::Denied`].
pub(crate) const STOPPING: &str = "the gateway (stopping)";

/// How a parked call ended. Serialised (for a shared state backend) as
/// `{"resolution": "approved", "by": "carol"}`, `{"resolution": "expired",
/// "decision": "deny"}`, `{"resolution": "abandoned"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "resolution", rename_all = "lowercase")]
#[non_exhaustive]
pub enum Resolution {
    /// An approver approved it: the call goes on.
    Approved {
        /// Who, as the admin request said.
        by: String,
    },
    /// An approver denied it: the call is refused.
    Denied {
        /// Who, as the admin request said (`gateway` when the gateway
        /// itself refused: a duplicate id; `the gateway (stopping)` when it
        /// stopped).
        by: String,
    },
    /// Nobody answered in time; `decision` is the rule's `on_expiry`.
    Expired {
        /// What the call became.
        decision: Expiry,
    },
    /// The shared state could not be reached when the call was parked, or
    /// when its end had to be recorded: it is refused (approval fails
    /// closed), logged as `denied` with `degraded` saying why.
    Unavailable {
        /// The shared state's error, on one line.
        reason: String,
    },
    /// Its client withdrew it before anyone decided
    /// (`notifications/cancelled`, its session or connection ended, or its
    /// request's future was dropped): it is not forwarded, whatever an
    /// approver would have said.
    Abandoned,
}

impl Resolution {
    /// Whether the call goes on: approved, or expired with `on_expiry =
    /// "approve"`.
    pub fn proceeds(&self) -> bool {
        matches!(
            self,
            Resolution::Approved { .. }
                | Resolution::Expired {
                    decision: Expiry::Approve
                }
        )
    }

    /// The audit log's `decision` for it: `approved`, `denied`, `expired`
    /// or `abandoned`.
    pub fn decision(&self) -> Decision {
        match self {
            Resolution::Approved { .. } => Decision::Approved,
            Resolution::Denied { .. } | Resolution::Unavailable { .. } => Decision::Denied,
            Resolution::Expired { .. } => Decision::Expired,
            Resolution::Abandoned => Decision::Abandoned,
        }
    }
}

/// Why an approver's decision was not taken.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// No call with this id is parked: never parked, decided already,
    /// expired, or its client went away. The admin endpoint answers 404.
    #[error("no parked call `{id}`: it was never parked, or was decided, expired or abandoned")]
    UnknownId {
        /// The id asked for.
        id: String,
    },
    /// The shared state could not be reached, so nothing was decided. The
    /// admin endpoint answers 503.
    #[error("the call `{id}` was not decided: {reason}")]
    Unavailable {
        /// The id asked for.
        id: String,
        /// The [`StateError`]'s text.
        reason: String,
    },
}

/// How often a parked call asks the shared state whether it was resolved,
/// beside the backend's notice of each resolution (which a subscriber
/// reconnecting may miss).
const RESOLUTION_POLL: Duration = Duration::from_secs(1);

/// The parked calls: the ledger every replica shares (in a
/// [`SharedState`]), and the calls waiting in this one. Cloning shares
/// them (one set per gateway).
///
/// Each call waiting here waits on a oneshot channel whose sender sits in
/// a map under a mutex that is never held across an await. What ends a
/// call (an approver's decision at any replica, its timeout, its client
/// withdrawing it, or its future being dropped) first resolves it in the
/// shared state, which takes it once: the one that did has its way, every
/// other learns the resolution from the shared state, so a call is
/// resolved once, and the id of a resolved call is unknown from then on.
/// A decision made here reaches the waiting call at once; one made at
/// another replica, through the backend's notice or, at the latest,
/// a second later.
#[derive(Clone)]
pub struct Approvals {
    waiting: Arc<Mutex<HashMap<String, oneshot::Sender<Resolution>>>>,
    shared: Arc<dyn SharedState>,
    /// Told of each call parked here (`[approval] webhook`).
    webhook: Option<Webhook>,
}

impl fmt::Debug for Approvals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approvals")
            .field("waiting", &self.map().len())
            .field("shared", &self.shared)
            .finish()
    }
}

/// The one guard of a parked call: when `park`'s future is dropped while
/// the call waits, takes it out of the calls waiting here and resolves it
/// as abandoned in the shared state, so a call whose client went away is
/// not left for an approver, and runs `dropped`, where the caller records
/// it as abandoned. Disarmed once `park` has its resolution, which the
/// caller records itself.
struct Unpark<'a, F: FnOnce()> {
    approvals: &'a Approvals,
    id: &'a str,
    dropped: Option<F>,
}

impl<F: FnOnce()> Unpark<'_, F> {
    /// `park` returns `resolution`: the call has it, and nothing is to run
    /// on drop.
    fn disarm(mut self, resolution: Resolution) -> Resolution {
        self.dropped = None;
        resolution
    }
}

impl<F: FnOnce()> Drop for Unpark<'_, F> {
    fn drop(&mut self) {
        self.approvals.map().remove(self.id);
        if let Some(dropped) = self.dropped.take() {
            // Nothing can wait here: the shared state learns it in a task
            // (and a backend that cannot be reached lets the record
            // expire with the call).
            let (shared, id) = (self.approvals.shared.clone(), self.id.to_owned());
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = shared.resolve(&id, &Resolution::Abandoned).await;
                });
            }
            dropped();
        }
    }
}

impl Approvals {
    /// No call waiting here; the ledger is `shared`'s, and each call
    /// parked here is announced to `webhook`, when there is one. A task of
    /// its own (within the current tokio runtime) delivers the resolutions
    /// the backend announces to the calls waiting here; it ends with the
    /// last clone of these approvals.
    pub(crate) fn new(shared: Arc<dyn SharedState>, webhook: Option<Webhook>) -> Approvals {
        let approvals = Approvals {
            waiting: Arc::default(),
            shared,
            webhook,
        };
        tokio::spawn(deliver(
            approvals.shared.resolved(),
            Arc::downgrade(&approvals.waiting),
            Arc::downgrade(&approvals.shared),
        ));
        approvals
    }

    /// A gateway's own approvals, on an [`InProcess`] ledger.
    #[cfg(test)]
    pub(crate) fn in_process() -> Approvals {
        Approvals::new(Arc::new(InProcess::new(None)), None)
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, oneshot::Sender<Resolution>>> {
        // The map is consistent between statements: a panic elsewhere
        // while holding it leaves nothing half done.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Parks `call` and waits until an approver approves or denies it (at
    /// any replica), `timeout` passes (on tokio's clock: then it is
    /// [`Resolution::Expired`] with `on_expiry`), or `withdrawn` completes
    /// (the client cancelled the request or went away: then it is
    /// [`Resolution::Abandoned`]). Sets `call.expires_at` to
    /// `call.parked_at + timeout`.
    ///
    /// When two of these come at once, the one the shared state took first
    /// wins; a decision already delivered here is taken before a withdrawal
    /// or an expiry noticed in the same turn. A call that ended is out of
    /// [`pending`](Approvals::pending), and deciding it then is
    /// [`ApprovalError::UnknownId`]. A call whose id is parked already is
    /// [`Resolution::Denied`] by `gateway` at once: ids are fresh UUIDs, so
    /// that is a bug, and refusing is the safe side of it.
    ///
    /// The shared state failing fails closed: a call it cannot park, or
    /// whose expiry as approved it cannot record (so an approver's denial
    /// elsewhere might be lost), is [`Resolution::Unavailable`].
    ///
    /// `dropped` runs if the future is dropped while the call waits
    /// (before it has its resolution): the caller's record of a call
    /// abandoned that way, kept in the one guard that also takes the call
    /// out of the parked calls.
    pub(crate) async fn park_or_drop(
        &self,
        mut call: Parked,
        timeout: Duration,
        on_expiry: Expiry,
        withdrawn: impl Future<Output = ()>,
        dropped: impl FnOnce(),
    ) -> Resolution {
        call.expires_at = call.parked_at + timeout;
        let id = call.id.clone();
        let (resolve, mut resolved) = oneshot::channel();
        {
            let mut map = self.map();
            if map.contains_key(&id) {
                return Resolution::Denied {
                    by: "gateway (a call with this id is parked already)".to_owned(),
                };
            }
            map.insert(id.clone(), resolve);
        }
        let unpark = Unpark {
            approvals: self,
            id: &id,
            dropped: Some(dropped),
        };
        if let Err(error) = self.shared.park(&call).await {
            return unpark.disarm(Resolution::Unavailable {
                reason: one_line(&error.to_string()).into_owned(),
            });
        }
        if let Some(webhook) = &self.webhook {
            webhook.announce(&call);
        }
        let mut withdrawn = std::pin::pin!(withdrawn);
        let expiry = tokio::time::sleep(timeout);
        let mut expiry = std::pin::pin!(expiry);
        let mut poll = tokio::time::interval_at(
            tokio::time::Instant::now() + RESOLUTION_POLL,
            RESOLUTION_POLL,
        );
        let resolution = loop {
            tokio::select! {
                // A decision already delivered is taken before a
                // withdrawal or an expiry noticed in the same turn: the
                // approver was told it was taken.
                biased;
                received = &mut resolved => break match received {
                    Ok(resolution) => resolution,
                    // The sender is only dropped unsent when the call
                    // leaves the map without a decision, which only
                    // `Unpark` does: refuse.
                    Err(_) => Resolution::Denied {
                        by: "gateway (the parked call was dropped)".to_owned(),
                    },
                },
                () = &mut withdrawn => {
                    break self.settle(&id, &mut resolved, Resolution::Abandoned).await;
                }
                () = &mut expiry => {
                    let ending = Resolution::Expired { decision: on_expiry };
                    break self.settle(&id, &mut resolved, ending).await;
                }
                _ = poll.tick() => {
                    if let Ok(Some(resolution)) = self.shared.resolution(&id).await {
                        self.map().remove(&id);
                        break resolution;
                    }
                }
            }
        };
        unpark.disarm(resolution)
    }

    /// [`park_or_drop`](Approvals::park_or_drop) with nothing to record
    /// when dropped.
    #[cfg(test)]
    pub(crate) async fn park(
        &self,
        call: Parked,
        timeout: Duration,
        on_expiry: Expiry,
        withdrawn: impl Future<Output = ()>,
    ) -> Resolution {
        self.park_or_drop(call, timeout, on_expiry, withdrawn, || {})
            .await
    }

    /// Ends the parked call `id` as `ending` when the shared state still
    /// holds it parked; when it does not, another end took it first (an
    /// approver, here or at another replica): that is the resolution.
    async fn settle(
        &self,
        id: &str,
        resolved: &mut oneshot::Receiver<Resolution>,
        ending: Resolution,
    ) -> Resolution {
        let taken = self.shared.resolve(id, &ending).await;
        self.map().remove(id);
        match taken {
            Ok(true) => ending,
            Ok(false) => {
                if let Ok(resolution) = resolved.try_recv() {
                    return resolution;
                }
                match self.shared.resolution(id).await {
                    Ok(Some(resolution)) => resolution,
                    _ => fail_closed(ending, "its resolution cannot be read"),
                }
            }
            Err(error) => fail_closed(ending, &one_line(&error.to_string())),
        }
    }

    /// Approves the parked call `id`, parked here or at any replica
    /// sharing this state: the call goes on, its approval logged as by
    /// `by`.
    ///
    /// # Errors
    ///
    /// [`ApprovalError::UnknownId`] when no call `id` is parked (decided
    /// already, expired, abandoned, or never parked);
    /// [`ApprovalError::Unavailable`] when the shared state cannot be
    /// reached.
    pub async fn approve(&self, id: &str, by: &str) -> Result<(), ApprovalError> {
        self.resolve(id, Resolution::Approved { by: by.to_owned() })
            .await
    }

    /// Denies the parked call `id`: it is refused, not forwarded, its
    /// denial logged as by `by`.
    ///
    /// # Errors
    ///
    /// As [`approve`](Approvals::approve).
    pub async fn deny(&self, id: &str, by: &str) -> Result<(), ApprovalError> {
        self.resolve(id, Resolution::Denied { by: by.to_owned() })
            .await
    }

    async fn resolve(&self, id: &str, resolution: Resolution) -> Result<(), ApprovalError> {
        match self.shared.resolve(id, &resolution).await {
            Ok(true) => {
                // Parked here: it has the decision at once. A receiver
                // already gone is a client gone (its guard records it).
                if let Some(waiting) = self.map().remove(id) {
                    let _ = waiting.send(resolution);
                }
                Ok(())
            }
            Ok(false) => Err(ApprovalError::UnknownId { id: id.to_owned() }),
            Err(error) => Err(ApprovalError::Unavailable {
                id: id.to_owned(),
                reason: one_line(&error.to_string()).into_owned(),
            }),
        }
    }

    /// Ends every call parked here denied by `the gateway (stopping)`, as
    /// its audit entry says: this replica is stopping, so nobody will
    /// decide them, and it was the gateway, not their clients, that gave
    /// them up (a call the shared state says was decided just before keeps
    /// that decision). How many there were.
    pub async fn deny_all_stopping(&self) -> usize {
        let ids: Vec<String> = self.map().keys().cloned().collect();
        let stopping = Resolution::Denied {
            by: STOPPING.to_owned(),
        };
        let mut count = 0;
        for id in ids {
            let resolution = match self.shared.resolve(&id, &stopping).await {
                Ok(false) => match self.shared.resolution(&id).await {
                    Ok(Some(resolution)) => resolution,
                    _ => stopping.clone(),
                },
                Ok(true) | Err(_) => stopping.clone(),
            };
            if let Some(waiting) = self.map().remove(&id) {
                count += 1;
                let _ = waiting.send(resolution);
            }
        }
        count
    }

    /// The calls parked at every replica sharing this state, oldest first
    /// (then by id).
    ///
    /// # Errors
    ///
    /// [`StateError`] when the shared state cannot be reached.
    pub async fn pending(&self) -> Result<Vec<Parked>, StateError> {
        let mut calls = self.shared.pending().await?;
        calls.sort_by(|a, b| (a.parked_at, &a.id).cmp(&(b.parked_at, &b.id)));
        Ok(calls)
    }
}

/// `ending` when nothing can overrule it, else [`Resolution::Unavailable`]:
/// a call whose end the shared state could not take may have been denied
/// elsewhere, so only an end that forwards nothing stands.
fn fail_closed(ending: Resolution, why: &str) -> Resolution {
    if ending.proceeds() {
        Resolution::Unavailable {
            reason: why.to_owned(),
        }
    } else {
        ending
    }
}

/// Delivers each resolution `shared` announces to the call waiting here
/// with its id, until the approvals or the state are gone.
async fn deliver(
    mut resolved: tokio::sync::broadcast::Receiver<String>,
    waiting: std::sync::Weak<Mutex<HashMap<String, oneshot::Sender<Resolution>>>>,
    shared: std::sync::Weak<dyn SharedState>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let id = match resolved.recv().await {
            Ok(id) => id,
            // Missed ones are found by the waiting calls' polls.
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let (Some(waiting), Some(shared)) = (waiting.upgrade(), shared.upgrade()) else {
            return;
        };
        let here = waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&id);
        if !here {
            continue;
        }
        if let Ok(Some(resolution)) = shared.resolution(&id).await {
            let sender = waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            if let Some(sender) = sender {
                let _ = sender.send(resolution);
            }
        }
    }
}

/// How a tool stands against the [`DriftLock`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Drift {
    /// Its fingerprint is the approved one.
    Approved,
    /// The lock has no tool of this name.
    New,
    /// Its definition differs from the approved one.
    Changed {
        /// What changed, in the words of `mcp-hints audit --pinned`: each
        /// part by wire name (`"description"`, `"annotations"`; just
        /// `"definition"` when no part can be named), then each hint whose
        /// value changed (`"readOnlyHint false -> true"`).
        what: Vec<String>,
    },
}

impl fmt::Display for Drift {
    /// `approved`, `new since the lock was approved`, or `changed since
    /// approval (description, annotations; readOnlyHint false -> true)`,
    /// the parts and hints as `audit --pinned` joins them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Drift::Approved => f.write_str("approved"),
            Drift::New => f.write_str("new since the lock was approved"),
            Drift::Changed { what } => {
                // A part is a wire name; only a hint's item has an arrow.
                let (hints, parts): (Vec<&String>, Vec<&String>) =
                    what.iter().partition(|item| item.contains(" -> "));
                let join = |items: Vec<&String>| {
                    items
                        .iter()
                        .map(|item| item.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                write!(f, "changed since approval ({}", join(parts))?;
                if !hints.is_empty() {
                    write!(f, "; {}", join(hints))?;
                }
                f.write_str(")")
            }
        }
    }
}

/// The approved tool fingerprints, kept in a file in the `mcp-hints pin`
/// format ([`Lock`]), keyed by namespaced tool name (`UPSTREAM__TOOL`), so
/// `mcp-hints audit --pinned` reads it too.
#[derive(Clone, Debug)]
pub struct DriftLock {
    path: PathBuf,
    lock: Lock,
}

impl DriftLock {
    /// Reads the lock at `config.path`; a file that does not exist is an
    /// empty lock (nothing approved yet).
    ///
    /// # Errors
    ///
    /// [`Error::LockRead`] for a file that cannot be read,
    /// [`Error::LockInvalid`] for one that is not a lock or is of another
    /// version of the format; both name the file.
    pub fn load(config: &LockConfig) -> Result<DriftLock, Error> {
        let path = &config.path;
        let lock = match std::fs::read_to_string(path) {
            Ok(text) => Lock::from_json(&text).map_err(|error| Error::LockInvalid {
                path: path.clone(),
                error,
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Lock {
                version: LOCK_VERSION,
                tools: BTreeMap::new(),
            },
            Err(error) => {
                return Err(Error::LockRead {
                    path: path.clone(),
                    error,
                });
            }
        };
        Ok(DriftLock {
            path: path.clone(),
            lock,
        })
    }

    /// The lock as held (and, after each approval, as on disk).
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// The [`PinnedTool`] of one tool definition from an upstream's
    /// `tools/list` (its fingerprint, and its annotations as served), for
    /// [`check`](DriftLock::check) and [`approve`](DriftLock::approve).
    pub(crate) fn pinned(definition: &Map<String, Value>) -> PinnedTool {
        PinnedTool {
            fingerprint: Fingerprint::of_definition(definition),
            annotations: definition
                .get("annotations")
                .filter(|annotations| !annotations.is_null())
                .cloned(),
        }
    }

    /// How the tool served as `namespaced`, now `tool`, stands against
    /// its `approved` fingerprint (from [`SharedState::approved_tool`]).
    pub(crate) fn check(
        namespaced: &str,
        approved: Option<&PinnedTool>,
        tool: &PinnedTool,
    ) -> Drift {
        let Some(approved) = approved else {
            return Drift::New;
        };
        if approved.fingerprint.definition == tool.fingerprint.definition {
            return Drift::Approved;
        }
        Drift::Changed {
            what: what_changed(namespaced, approved, tool),
        }
    }

    /// Approves `tool` as `namespaced`: the lock file is written with it
    /// (to a temporary file in the same directory, synced, then renamed
    /// over the lock, so a reader or a crash sees the old lock or the new
    /// one, never part of one), and only then is the lock held here
    /// changed. The file is written on tokio's blocking pool
    /// (`spawn_blocking`), so that the syncs do not hold up the runtime's
    /// other tasks; this resolves once it is on disk.
    ///
    /// Dropped before it resolves, the write may still complete while the
    /// lock held here stays unchanged: the tool stays unapproved here, and
    /// the next approval writes the file from the lock held here.
    ///
    /// # Errors
    ///
    /// [`Error::LockWrite`], naming the file, when it cannot be written
    /// (`PATH: cannot write the lock: REASON`); the lock held here is
    /// unchanged.
    pub(crate) async fn approve(
        &mut self,
        namespaced: &str,
        tool: PinnedTool,
    ) -> Result<(), Error> {
        let mut next = self.lock.clone();
        next.tools.insert(namespaced.to_owned(), tool);
        let (path, bytes) = (self.path.clone(), next.to_json());
        let written =
            tokio::task::spawn_blocking(move || write_atomically(&path, bytes.as_bytes()))
                .await
                .unwrap_or_else(|error| Err(std::io::Error::other(error)));
        written.map_err(|error| Error::LockWrite {
            path: self.path.clone(),
            error,
        })?;
        self.lock = next;
        Ok(())
    }
}

/// What changed between the approved and the current tool, found by the
/// library's own lock comparison ([`Lock::diff`], the one behind `audit
/// --pinned`) on a list of this one tool, and worded as `audit --pinned`
/// words it (`audit::what_changed`, which keeps the parts and hints joined
/// in one string; the two can share one function once it returns the
/// items).
fn what_changed(namespaced: &str, approved: &PinnedTool, now: &PinnedTool) -> Vec<String> {
    let then = Lock {
        version: LOCK_VERSION,
        tools: BTreeMap::from([(namespaced.to_owned(), approved.clone())]),
    };
    let parts_only = || {
        approved
            .fingerprint
            .changed_parts(&now.fingerprint)
            .iter()
            .map(|part| part.wire_name().to_owned())
            .collect::<Vec<_>>()
    };
    // Reading absent annotations cannot fail; the fallback names the parts.
    let Ok(hints) = ToolHints::from_json(None, None) else {
        return or_definition(parts_only());
    };
    let mut definition = Map::new();
    if let Some(annotations) = &now.annotations {
        definition.insert("annotations".to_owned(), annotations.clone());
    }
    let list = ToolList {
        tools: vec![ListedTool {
            name: namespaced.to_owned(),
            page: 1,
            title: None,
            hints,
            fingerprint: Some(now.fingerprint.clone()),
            definition: Some(definition),
            idempotency_key: None,
        }],
        pages: 1,
        page_fields: Vec::new(),
    };
    let Some(changed) = then
        .diff(&list)
        .ok()
        .and_then(|drift| drift.changed.into_iter().next())
    else {
        return or_definition(parts_only());
    };
    let mut what: Vec<String> = changed
        .parts
        .iter()
        .map(|part| part.wire_name().to_owned())
        .collect();
    what = or_definition(what);
    what.extend(
        changed
            .hints
            .iter()
            .map(|(hint, then, now): &(Hint, bool, bool)| {
                format!("{} {then} -> {now}", hint.wire_name())
            }),
    );
    what
}

/// `parts`, or `["definition"]` when none could be named (as `audit
/// --pinned` says).
fn or_definition(parts: Vec<String>) -> Vec<String> {
    if parts.is_empty() {
        vec!["definition".to_owned()]
    } else {
        parts
    }
}

/// Writes `bytes` to `path` by way of a temporary file beside it, synced
/// and renamed over `path`, then syncs the directory so the rename itself
/// survives a crash. The temporary file is removed on failure.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(name);
    temporary_name.push(format!(".{}.tmp", unique_suffix()));
    let temporary = directory.join(temporary_name);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
        return written;
    }
    #[cfg(unix)]
    std::fs::File::open(directory)?.sync_all()?;
    Ok(())
}

/// A name part no other writer picks, in this process or another, with no
/// counter kept per process: the process id and a random UUID. Two
/// gateways sharing one lock file would still race on its contents, which
/// is why one lock belongs to one gateway.
fn unique_suffix() -> String {
    format!("{}-{}", std::process::id(), uuid::Uuid::new_v4().simple())
}

/// The body of `POST /approve/{id}` and `POST /deny/{id}`: `{"by":
/// "NAME"}`, the approver's login name as the client knows it (`$USER`).
/// The admin token is what authenticates; `by` is only recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecideRequest {
    /// Who decided, for the log; absent means `admin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// How the gateway's stderr says to reach its admin endpoint in a
/// command it prints (`mcp-hints gateway approve ID FLAG`): `--config
/// PATH` (absolute, so it works from any directory) when the config's
/// `listen.admin_http` names the port bound at `bound`, else `--admin
/// http://BOUND` (port 0 in the config: only the gateway knows the port).
pub(crate) fn admin_flag(
    config: &Path,
    configured: std::net::SocketAddr,
    bound: std::net::SocketAddr,
) -> String {
    if configured.port() == 0 || configured.port() != bound.port() {
        return format!("--admin http://{bound}");
    }
    let path = std::path::absolute(config).unwrap_or_else(|_| config.to_owned());
    format!(
        "--config {}",
        mcp_hints_core::escape::shell_word(&path.to_string_lossy())
    )
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use serde_json::json;

    use super::*;
    use crate::scratch::Scratch;

    fn call(id: &str, parked_at: u64) -> Parked {
        Parked {
            id: id.to_owned(),
            principal: "alice".to_owned(),
            upstream: "memory".to_owned(),
            tool: "delete_entities".to_owned(),
            arguments: json!({ "entityNames": ["a", "b"] })
                .as_object()
                .unwrap()
                .clone(),
            parked_at: UNIX_EPOCH + Duration::from_secs(parked_at),
            expires_at: UNIX_EPOCH,
            reason: "rule[1] (require_approval *delete*)".to_owned(),
            hints: Value::Null,
            drift: None,
        }
    }

    /// A withdrawal that never comes: the client stays.
    fn never() -> std::future::Pending<()> {
        std::future::pending()
    }

    /// Waits (on tokio's clock, without advancing it much) until `id` is
    /// parked.
    async fn parked(approvals: &Approvals, id: &str) {
        while !approvals
            .pending()
            .await
            .unwrap()
            .iter()
            .any(|call| call.id == id)
        {
            tokio::task::yield_now().await;
        }
    }

    /// Parks `call` in a task of its own, as a client's request would be;
    /// returns once it is parked.
    async fn park_in_task(
        approvals: &Approvals,
        call: Parked,
        timeout: Duration,
        on_expiry: Expiry,
        withdrawn: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<Resolution> {
        let id = call.id.clone();
        let waiting = tokio::spawn({
            let approvals = approvals.clone();
            async move { approvals.park(call, timeout, on_expiry, withdrawn).await }
        });
        parked(approvals, &id).await;
        waiting
    }

    #[tokio::test(start_paused = true)]
    async fn an_approved_call_proceeds_and_its_id_is_then_unknown() {
        let approvals = Approvals::in_process();
        let waiting = park_in_task(
            &approvals,
            call("c1", 100),
            Duration::from_secs(300),
            Expiry::Deny,
            never(),
        )
        .await;
        let pending = approvals.pending().await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].expires_at, UNIX_EPOCH + Duration::from_secs(400));
        approvals.approve("c1", "carol").await.unwrap();
        let resolution = waiting.await.unwrap();
        assert_eq!(resolution, Resolution::Approved { by: "carol".into() });
        assert!(resolution.proceeds());
        assert_eq!(resolution.decision(), Decision::Approved);
        assert!(approvals.pending().await.unwrap().is_empty());
        assert_eq!(
            approvals.approve("c1", "carol").await,
            Err(ApprovalError::UnknownId { id: "c1".into() })
        );
        assert_eq!(
            approvals.deny("c1", "carol").await,
            Err(ApprovalError::UnknownId { id: "c1".into() })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_denied_call_is_refused() {
        let approvals = Approvals::in_process();
        let waiting = park_in_task(
            &approvals,
            call("c2", 0),
            Duration::from_secs(60),
            Expiry::Approve,
            never(),
        )
        .await;
        approvals.deny("c2", "dave").await.unwrap();
        let resolution = waiting.await.unwrap();
        assert_eq!(resolution, Resolution::Denied { by: "dave".into() });
        assert!(!resolution.proceeds());
        assert_eq!(resolution.decision(), Decision::Denied);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_call_expires_by_its_rule() {
        let approvals = Approvals::in_process();
        let started = tokio::time::Instant::now();
        let denied = approvals
            .park(
                call("c3", 0),
                Duration::from_secs(300),
                Expiry::Deny,
                never(),
            )
            .await;
        assert_eq!(
            denied,
            Resolution::Expired {
                decision: Expiry::Deny
            }
        );
        assert!(!denied.proceeds());
        assert_eq!(started.elapsed(), Duration::from_secs(300));
        let approved = approvals
            .park(
                call("c4", 0),
                Duration::from_secs(5),
                Expiry::Approve,
                never(),
            )
            .await;
        assert!(approved.proceeds());
        assert_eq!(approved.decision(), Decision::Expired);
        assert!(approvals.pending().await.unwrap().is_empty());
        assert!(matches!(
            approvals.approve("c3", "late").await,
            Err(ApprovalError::UnknownId { .. })
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn unknown_ids_and_abandoned_calls_cannot_be_decided() {
        let approvals = Approvals::in_process();
        assert_eq!(
            approvals
                .approve("nope", "x")
                .await
                .unwrap_err()
                .to_string(),
            "no parked call `nope`: it was never parked, or was decided, expired or abandoned"
        );
        let waiting = park_in_task(
            &approvals,
            call("gone", 0),
            Duration::from_secs(300),
            Expiry::Approve,
            never(),
        )
        .await;
        // The client went away: its request's future is dropped.
        waiting.abort();
        assert!(waiting.await.unwrap_err().is_cancelled());
        assert!(approvals.pending().await.unwrap().is_empty());
        assert!(approvals.approve("gone", "x").await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_its_client_withdraws_is_abandoned_and_cannot_be_decided() {
        let approvals = Approvals::in_process();
        let (withdraw, withdrawn) = oneshot::channel::<()>();
        // Abandoned even where expiry would approve.
        let waiting = park_in_task(
            &approvals,
            call("w", 0),
            Duration::from_secs(300),
            Expiry::Approve,
            async move {
                let _ = withdrawn.await;
            },
        )
        .await;
        withdraw.send(()).unwrap();
        let resolution = waiting.await.unwrap();
        assert_eq!(resolution, Resolution::Abandoned);
        assert!(!resolution.proceeds());
        assert_eq!(resolution.decision(), Decision::Abandoned);
        assert!(approvals.pending().await.unwrap().is_empty());
        assert!(matches!(
            approvals.approve("w", "late").await,
            Err(ApprovalError::UnknownId { .. })
        ));

        // A decision sent before the withdrawal is noticed stands.
        let waiting = park_in_task(
            &approvals,
            call("d", 0),
            Duration::from_secs(300),
            Expiry::Deny,
            tokio::time::sleep(Duration::from_secs(1)),
        )
        .await;
        approvals.approve("d", "carol").await.unwrap();
        assert_eq!(
            waiting.await.unwrap(),
            Resolution::Approved { by: "carol".into() }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn pending_lists_every_parked_call_oldest_first_with_its_arguments() {
        let approvals = Approvals::in_process();
        let mut tasks = Vec::new();
        for (id, at) in [("b", 20), ("a", 30), ("c", 10)] {
            let approvals = approvals.clone();
            tasks.push(tokio::spawn(async move {
                approvals
                    .park(call(id, at), Duration::from_secs(60), Expiry::Deny, never())
                    .await
            }));
        }
        for id in ["a", "b", "c"] {
            parked(&approvals, id).await;
        }
        let pending = approvals.pending().await.unwrap();
        let ids: Vec<&str> = pending.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["c", "b", "a"]);
        assert_eq!(
            Value::Object(pending[0].arguments.clone()),
            json!({ "entityNames": ["a", "b"] })
        );
        // A duplicate id is refused at once, and the first call stays.
        let duplicate = approvals
            .park(
                call("a", 0),
                Duration::from_secs(60),
                Expiry::Approve,
                never(),
            )
            .await;
        assert!(!duplicate.proceeds());
        assert_eq!(approvals.pending().await.unwrap().len(), 3);
        // The admin endpoint's JSON, and its table.
        let wire = serde_json::to_value(&pending[0]).unwrap();
        assert_eq!(wire["parked_at"], "1970-01-01T00:00:10.000Z");
        assert_eq!(wire["expires_at"], "1970-01-01T00:01:10.000Z");
        let back: Parked = serde_json::from_value(wire).unwrap();
        assert_eq!(back, pending[0]);
        for task in tasks {
            task.abort();
        }
    }

    fn definition(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn drift_new_changed_and_approved_with_the_lock_written_atomically() {
        let scratch = Scratch::new("drift");
        let config = LockConfig {
            path: scratch.0.join("gateway.lock"),
            deny_drift: true,
        };
        // No file yet: nothing is approved.
        let mut lock = DriftLock::load(&config).unwrap();
        assert!(lock.lock().tools.is_empty());
        let v1 = DriftLock::pinned(&definition(json!({
            "name": "delete_entities", "description": "Delete entities",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": false, "destructiveHint": true},
        })));
        assert_eq!(
            DriftLock::check(
                "memory__delete_entities",
                lock.lock().tools.get("memory__delete_entities"),
                &v1
            ),
            Drift::New
        );
        lock.approve("memory__delete_entities", v1.clone())
            .await
            .unwrap();
        assert_eq!(
            DriftLock::check(
                "memory__delete_entities",
                lock.lock().tools.get("memory__delete_entities"),
                &v1
            ),
            Drift::Approved
        );

        // On disk: the pin format, read by the library's own parser, and no
        // temporary file left beside it.
        let text = std::fs::read_to_string(&config.path).unwrap();
        let on_disk = Lock::from_json(&text).unwrap();
        assert_eq!(&on_disk, lock.lock());
        assert_eq!(text, on_disk.to_json());
        assert_eq!(
            on_disk.tools["memory__delete_entities"].annotations,
            Some(json!({"readOnlyHint": false, "destructiveHint": true}))
        );
        let names: Vec<_> = std::fs::read_dir(&scratch.0)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["gateway.lock"]);

        // Read back by a new gateway.
        let lock = DriftLock::load(&config).unwrap();
        assert_eq!(
            DriftLock::check(
                "memory__delete_entities",
                lock.lock().tools.get("memory__delete_entities"),
                &v1
            ),
            Drift::Approved
        );

        // A changed description and hint are named as `audit --pinned`
        // names them.
        let v2 = DriftLock::pinned(&definition(json!({
            "name": "delete_entities", "description": "Delete entities, quietly",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true, "destructiveHint": true},
        })));
        let drift = DriftLock::check(
            "memory__delete_entities",
            lock.lock().tools.get("memory__delete_entities"),
            &v2,
        );
        assert_eq!(
            drift,
            Drift::Changed {
                what: vec![
                    "description".into(),
                    "annotations".into(),
                    "readOnlyHint false -> true".into()
                ]
            }
        );
        assert_eq!(
            drift.to_string(),
            "changed since approval (description, annotations; readOnlyHint false -> true)"
        );
        // Key order and `null` annotations change nothing.
        let same = DriftLock::pinned(&definition(json!({
            "annotations": {"destructiveHint": true, "readOnlyHint": false, "title": null},
            "inputSchema": {"type": "object"},
            "description": "Delete entities", "name": "delete_entities",
        })));
        assert_eq!(
            DriftLock::check(
                "memory__delete_entities",
                lock.lock().tools.get("memory__delete_entities"),
                &same
            ),
            Drift::Approved
        );
    }

    #[tokio::test]
    async fn a_lock_that_cannot_be_written_or_read_is_an_error_naming_it() {
        let scratch = Scratch::new("lock-errors");
        let config = LockConfig {
            path: scratch.0.join("missing-dir/gateway.lock"),
            deny_drift: true,
        };
        let mut lock = DriftLock::load(&config).unwrap();
        let tool = DriftLock::pinned(&definition(json!({"name": "t"})));
        let error = lock
            .approve("u__t", tool.clone())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("missing-dir/gateway.lock: cannot write the lock"),
            "{error}"
        );
        // Nothing approved that is not on disk.
        assert_eq!(
            DriftLock::check("u__t", lock.lock().tools.get("u__t"), &tool),
            Drift::New
        );

        let bad = LockConfig {
            path: scratch.0.join("bad.lock"),
            deny_drift: true,
        };
        std::fs::write(&bad.path, "{\"mcpHintsLock\": 7, \"tools\": {}}").unwrap();
        let error = DriftLock::load(&bad).unwrap_err().to_string();
        assert!(
            error.ends_with("bad.lock: lock version 7 is not supported (this version reads 1)"),
            "{error}"
        );
    }
}

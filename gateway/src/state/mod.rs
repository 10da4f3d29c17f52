//! The state a gateway's replicas must agree on (DESIGN.md, "Shared state
//! and failure"): rate-limit windows, parked calls and their decisions, and
//! the drift lock's approvals, behind one trait, [`SharedState`], with two
//! backends: [`InProcess`] (one gateway; the default) and [`RedisState`]
//! (`[state] redis = "redis://..."`, any number of replicas, timed by
//! Redis's clock).
//!
//! A replica keeps nothing of its own across requests but what waits in
//! it: the task of a call it parked, which any replica's decision wakes
//! (published by the backend, with a bounded poll behind it).
//!
//! A backend that cannot be reached answers [`StateError`]; the gateway
//! then refuses what a rule guards (approval, drift) and, by
//! `[state] rate_limit_fallback`, refuses or counts a rate limit in this
//! replica alone, saying so in the audit log.
//!
//! Left in each replica, and why: session owners (an `initialize`-era
//! session lives in the memory of the replica that created it, so its
//! owner does too; another replica answers 404 for it), and the retry
//! budgets per principal (tower's `Budget` is synchronous, called inside
//! the replay-safe client's resend loop; a budget is a bound on
//! amplification, which per replica stays bounded by the replica count).

mod memory;
mod metered;
mod redis;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use mcp_hints::fingerprint::PinnedTool;
use tokio::sync::broadcast;

pub use self::memory::InProcess;
pub(crate) use self::metered::Metered;
pub use self::redis::RedisState;
use crate::approval::{Parked, Resolution};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One rate-limit window a call must have room in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window<'a> {
    /// The rule's index in [`Config::rules`](crate::config::Config::rules).
    pub rule: usize,
    /// The rule's identity across replicas: its text
    /// ([`Policy::describe`](crate::policy::Policy::describe)), so that
    /// replicas whose configs order rules differently still count one
    /// window per rule.
    pub key: &'a str,
    /// At most this many calls...
    pub limit: u32,
    /// ...in any span this long.
    pub window: Duration,
}

/// What counting a call against its windows found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// Every window had room: the call counts against all of them.
    Allowed,
    /// A window is full: the call counts against none. Of several full
    /// ones, the one that frees up last.
    Full {
        /// Its rule's index.
        rule: usize,
        /// When it has room again: its oldest counted call leaves it.
        retry_after: Duration,
    },
}

/// The shared state could not be read or written: `the gateway's shared
/// state (redis) is unavailable: WHY`.
#[derive(Debug, thiserror::Error)]
#[error("the gateway's shared state ({backend}) is unavailable: {source}")]
pub struct StateError {
    backend: &'static str,
    #[source]
    source: BoxError,
}

impl StateError {
    /// An error of `backend` (its [`SharedState::backend`] name).
    pub fn new(backend: &'static str, source: impl Into<BoxError>) -> StateError {
        StateError {
            backend,
            source: source.into(),
        }
    }
}

/// What a gateway's replicas share. Every method is atomic against every
/// replica of the same backend: two replicas counting at once never both
/// take the last place in a window, and a parked call is resolved once.
#[async_trait]
pub trait SharedState: Send + Sync + fmt::Debug + 'static {
    /// The backend's name, for messages and the audit log: `in-process`,
    /// `redis`.
    fn backend(&self) -> &'static str;

    /// Counts a call of `principal` against every one of `windows` when
    /// each has room, else against none ([`Counted::Full`]). A call leaves
    /// a window `window` after it was counted, by the backend's clock.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached; nothing was
    /// counted, as far as this replica can know.
    async fn count(&self, principal: &str, windows: &[Window<'_>]) -> Result<Counted, StateError>;

    /// Adds `call` to the parked calls every replica lists, until
    /// [`resolve`](SharedState::resolve) takes it out or `call.expires_at`
    /// passes (a replica that died with it parked leaves nothing behind).
    ///
    /// # Errors
    ///
    /// [`StateError`]: the call is not parked; the gateway refuses it.
    async fn park(&self, call: &Parked) -> Result<(), StateError>;

    /// Resolves the parked call `id` as `resolution` when it is still
    /// parked: `true` when this did (it is out of
    /// [`pending`](SharedState::pending), its resolution kept for a while
    /// for [`resolution`](SharedState::resolution), and every replica told
    /// through [`resolved`](SharedState::resolved)); `false` when it is
    /// not parked (never was, or resolved already).
    ///
    /// # Errors
    ///
    /// [`StateError`]: nothing was resolved, as far as this replica can
    /// know.
    async fn resolve(&self, id: &str, resolution: &Resolution) -> Result<bool, StateError>;

    /// How the parked call `id` was resolved, by whichever replica: `None`
    /// while it waits (or long after).
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached.
    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StateError>;

    /// Every call parked at any replica, in no order.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached.
    async fn pending(&self) -> Result<Vec<Parked>, StateError>;

    /// The ids of calls resolved from now on, at any replica, as each is.
    /// Best effort (a lagging or reconnecting subscriber misses some):
    /// a waiting call also polls [`resolution`](SharedState::resolution).
    fn resolved(&self) -> broadcast::Receiver<String>;

    /// The ids of calls parked from now on, at any replica, as each is,
    /// for the approvals page. Best effort, as
    /// [`resolved`](SharedState::resolved): the page also reads
    /// [`pending`](SharedState::pending) at a bounded interval. The
    /// default, for a backend that announces nothing, is a receiver that
    /// is closed at once (the page then relies on that interval alone).
    fn newly_parked(&self) -> broadcast::Receiver<String> {
        broadcast::channel(1).1
    }

    /// The fingerprint approved for the tool served as `namespaced`
    /// (`UPSTREAM__TOOL`): the last approval given at any replica, else
    /// the lock file's; `None` when nothing approved it.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached: the drift check
    /// refuses the call.
    async fn approved_tool(&self, namespaced: &str) -> Result<Option<PinnedTool>, StateError>;

    /// Approves `tool` as `namespaced` for every replica; resolves once it
    /// is stored durably (the in-process backend: the lock file written).
    ///
    /// # Errors
    ///
    /// [`StateError`] when it could not be stored; the tool stays
    /// unapproved.
    async fn approve_tool(&self, namespaced: &str, tool: &PinnedTool) -> Result<(), StateError>;

    /// Whether the backend answers now, for `/readyz`.
    ///
    /// # Errors
    ///
    /// [`StateError`] when it does not.
    async fn ready(&self) -> Result<(), StateError>;
}

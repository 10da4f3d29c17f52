//! The state a gateway's replicas must agree on (DESIGN.md, "Shared state
//! and failure"): rate-limit windows, parked calls and their decisions, and
//! the drift lock's approvals, the retry budgets per principal, behind one
//! trait, [`SharedState`], with two
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
//! A retry budget is asked synchronously, inside the replay-safe client's
//! resend loop, so a replica decides a resend on what it last learnt of
//! every replica's use ([`SharedState::retry_budget`], asked every
//! [`BUDGET_REPORT_INTERVAL`]) and its own use since.
//!
//! A session's history ([`crate::session`]) is kept here too, so that a
//! rule that looks back sees the calls every replica forwarded in it,
//! each stamped by the backend's clock.
//!
//! An `initialize`-era session lives in the memory of the replica that
//! opened it, and only that replica serves it; the shared state records
//! which replica that is, so that another answers a request for it with a
//! 404 that names the replica to route it to.

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
use crate::session::{History, HistoryEvent, HistoryLimits};

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

/// How often a replica reports its use of each retry budget and learns
/// every replica's: what bounds how stale its view of the others is.
pub const BUDGET_REPORT_INTERVAL: Duration = Duration::from_millis(250);

/// How long a shared record of which replica opened a session lasts at
/// most (ended sessions are forgotten at once; one that idled out is
/// forgotten when next named, or after this): 24 hours.
pub const SESSION_RECORD_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A retry budget's use: the calls that paid into it and the resends that
/// drew on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetUse {
    /// Calls made (each deposits).
    pub deposits: u64,
    /// Resends made (each withdraws).
    pub withdrawals: u64,
}

impl BudgetUse {
    /// Whether nothing was used.
    pub fn is_empty(self) -> bool {
        self.deposits == 0 && self.withdrawals == 0
    }
}

impl std::ops::Add for BudgetUse {
    type Output = BudgetUse;

    fn add(self, other: BudgetUse) -> BudgetUse {
        BudgetUse {
            deposits: self.deposits.saturating_add(other.deposits),
            withdrawals: self.withdrawals.saturating_add(other.withdrawals),
        }
    }
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

    /// Adds `used`, this replica's use of the retry budget `budget` (an
    /// upstream's name and a principal: `UPSTREAM:PRINCIPAL`) since its
    /// last report, to the current second, and answers the budget's use at
    /// every replica over the last `window` (whole seconds, by the
    /// backend's clock), `used` included.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached; `used` may or
    /// may not have been added.
    async fn retry_budget(
        &self,
        budget: &str,
        used: BudgetUse,
        window: Duration,
    ) -> Result<BudgetUse, StateError>;

    /// Whether the backend records sessions for other replicas to read:
    /// `false` when [`open_session`](SharedState::open_session) and
    /// [`end_session`](SharedState::end_session) record nothing and
    /// [`session_opener`](SharedState::session_opener) always answers
    /// `None`, so that a caller may skip them (the in-process backend: one
    /// gateway knows its own sessions). The default, `true`, is right for
    /// every backend that records them (Redis).
    fn shares_sessions(&self) -> bool {
        true
    }

    /// Records that `replica` opened the streamable-HTTP session `id` for
    /// `principal`, for [`SESSION_RECORD_TTL`] at most. The in-process
    /// backend records nothing: one gateway knows its own sessions.
    ///
    /// # Errors
    ///
    /// [`StateError`] when it could not be recorded (the session serves
    /// anyway; another replica answers it as unknown).
    async fn open_session(
        &self,
        id: &str,
        principal: &str,
        replica: &str,
    ) -> Result<(), StateError>;

    /// The replica that opened session `id` for `principal`: `None` when
    /// none did for this principal (another's session is not named), or
    /// it ended, or its record expired.
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached.
    async fn session_opener(&self, id: &str, principal: &str)
    -> Result<Option<String>, StateError>;

    /// Forgets session `id` (it ended, or idled out).
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached; its record
    /// expires by itself.
    async fn end_session(&self, id: &str) -> Result<(), StateError>;

    /// Appends `event` to the history of the session keyed `session` (a
    /// [`SessionKey`](crate::session::SessionKey)'s text), stamped with
    /// the backend's clock, keeping its last
    /// [`max_events`](HistoryLimits::max_events) and the whole history for
    /// `limits.idle` after this event.
    ///
    /// # Errors
    ///
    /// [`StateError`] when it could not be stored; it may or may not have
    /// been.
    async fn record_history(
        &self,
        session: &str,
        event: &HistoryEvent,
        limits: HistoryLimits,
    ) -> Result<(), StateError>;

    /// The history of the session keyed `session`, as every replica
    /// recorded it, with the backend's clock now: empty when there is none
    /// (never, or idle past its `limits.idle`).
    ///
    /// # Errors
    ///
    /// [`StateError`] when the backend cannot be reached, or holds a
    /// history this gateway cannot read.
    async fn history(&self, session: &str) -> Result<History, StateError>;

    /// Whether the backend answers now, for `/readyz`.
    ///
    /// # Errors
    ///
    /// [`StateError`] when it does not.
    async fn ready(&self) -> Result<(), StateError>;
}

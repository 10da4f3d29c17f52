//! Idempotency keys for `tools/call`: a tool that takes a caller-chosen key
//! among its arguments runs once per key, and every resend of the same
//! call gets the first call's recorded result instead of a second run.
//!
//! No MCP spec revision has an idempotency field (SEP-3182 proposed one and
//! was closed unmerged), so the key travels in the tool's arguments, named
//! in the tool's `_meta` under [`KEY_META_KEY`] so that clients can fill it.
//! The rules follow SEP-3182, Stripe's idempotent requests and the IETF
//! `Idempotency-Key` draft:
//!
//! | the key was seen | with | the call |
//! |---|---|---|
//! | never, or longer ago than the retention window | | runs, and its result is recorded |
//! | and the first call finished | the same arguments | does not run: the recorded result (success or `isError`) is returned, marked under [`REPLAYED_META_KEY`] |
//! | and the first call finished or runs | other arguments | is refused: [`codes::KEY_CONFLICT`] |
//! | and the first call still runs | the same arguments | is refused, "retry later": [`codes::KEY_IN_PROGRESS`] (or waits, see [`InProgress`]) |
//! | and the first call's process died | the same arguments | takes the record over once the first call's lease is over, and runs |
//!
//! A handler that answers with a JSON-RPC error (it refused before doing
//! anything), panics, or whose future is dropped leaves no record: the key
//! is free again. So do arguments that do not deserialize into the tool's
//! argument struct: the handler never ran, though rmcp reports them to the
//! client as a tool error (`isError`). `notifications/cancelled` does not
//! stop a keyed call: rmcp lets the handler run on, and its result is
//! recorded, so the resend that follows a client's timeout receives it
//! rather than a second run.
//!
//! A record lasts as long as its store: the in-memory default forgets every
//! key when the process exits, so a server that may be restarted while a
//! client waits for an answer keeps its records in `RedbStore` or
//! `RedisStore` (and the client is told so:
//! `ReplaySafeClientBuilder::keys_survive_restarts`).
//!
//! Arguments are compared by [`arguments_digest`]: SHA-256 of their RFC
//! 8785 canonical JSON without the key, so key order and `1` against `1.0`
//! do not matter, except that integers no double holds keep their digits
//! ([`canonical`](crate::canonical)). A number that may be an integer beyond
//! 64 bits, which the JSON parser rounded to a double (`1e20` may have been
//! sent as `100000000000000000001`), is refused with -32602 (Invalid
//! params). Keys are 1 to [`defaults::MAX_KEY_CHARS`] characters.
//! Records are scoped by tool, key and an optional caller scope the server
//! supplies ([`IdempotencyBuilder::caller_scope`]).
//!
//! Declare a keyed tool with `#[tool(idempotency_key = "request_id")]`
//! (its argument struct holds `request_id: String`) and give the server an
//! [`Idempotency`] through [`IdempotentServer`]:
//!
//! ```
//! use mcp_hints::idempotency::{Idempotency, IdempotentServer};
//! use mcp_hints::rmcp::handler::server::wrapper::Parameters;
//! use mcp_hints::{tool, tool_router};
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Default)]
//! struct Ledger {
//!     idempotency: Idempotency,
//! }
//!
//! impl IdempotentServer for Ledger {
//!     fn idempotency(&self) -> &Idempotency {
//!         &self.idempotency
//!     }
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Payment {
//!     /// Names this payment: send the same one when you resend it.
//!     request_id: String,
//!     cents: u64,
//! }
//!
//! #[tool_router(closed_world)]
//! impl Ledger {
//!     /// Pay once per `request_id`.
//!     #[tool(additive, idempotency_key = "request_id")]
//!     async fn pay(&self, Parameters(payment): Parameters<Payment>) -> String {
//!         format!("paid {} cents", payment.cents)
//!     }
//! }
//! # let tool = Ledger::tool_router().get("pay").cloned().unwrap();
//! # assert_eq!(tool.annotations.unwrap().idempotent_hint, Some(true));
//! ```

mod clock;
mod memory;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "redis")]
mod redis;
pub mod store;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mcp_hints_core::escape;
use rmcp::model::{CallToolResponse, CallToolResult, ErrorCode, JsonObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

#[cfg(feature = "redb")]
#[cfg_attr(docsrs, doc(cfg(feature = "redb")))]
pub use self::redb::RedbStore;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use self::redis::RedisStore;
pub use clock::{Clock, SystemClock, TokioClock};
pub use memory::MemoryStore;
pub use store::{
    Claim, IdempotencyStore, Record, RecordKey, RecordState, RecordedResult, Reservation, Standing,
    StoreError,
};

use clock::after;
use memory::{Arguments, Ask, Token};

/// The `_meta` key of a keyed tool's definition naming the argument that
/// carries its idempotency key: `"_meta": {"mcp-hints/idempotencyKey":
/// "request_id"}`.
pub const KEY_META_KEY: &str = "mcp-hints/idempotencyKey";

/// The `_meta` key of a `tools/call` result that was recorded earlier and
/// replayed, not produced by running the handler again: `{"key": "...",
/// "recordedMs": <ms since the Unix epoch>}`.
pub const REPLAYED_META_KEY: &str = "mcp-hints/replayed";

/// Every limit and duration of the idempotency layer, in one place.
pub mod defaults {
    use std::time::Duration;

    /// How long records are kept: 24 hours.
    pub const RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
    /// How long a call in progress holds its key without renewing it: 30
    /// seconds. A running call renews it every third of this; after a
    /// process died, its keys are free once this has passed.
    pub const LEASE: Duration = Duration::from_secs(30);
    /// The most records the in-memory store keeps: 100,000 (a keyed call
    /// a second for a day of retention).
    pub const MEMORY_CAPACITY: usize = 100_000;
    /// The longest key, in characters (Unicode scalar values): 255.
    pub const MAX_KEY_CHARS: usize = 255;
    /// The first pause between looks at a key in progress, when waiting
    /// for it ([`InProgress::Wait`](super::InProgress::Wait)): 10 ms,
    /// doubling to [`WAIT_POLL_MAX`].
    pub const WAIT_POLL_MIN: Duration = Duration::from_millis(10);
    /// The longest pause between looks at a key in progress: 250 ms.
    pub const WAIT_POLL_MAX: Duration = Duration::from_millis(250);
    /// How often a completed result is offered to a failing store before
    /// the record is left to its lease: 3 times.
    pub const COMPLETE_ATTEMPTS: u32 = 3;
}

/// The JSON-RPC error codes of refused keyed calls, in the range JSON-RPC
/// 2.0 leaves to implementations (-32000 to -32099). A call refused with
/// any of them did not run. A missing or malformed key is -32602 (Invalid
/// params). Each error's `data` carries `"tool"`, `"idempotencyKey"` and
/// `"reason"` (`"conflict"`, `"in_progress"` or `"store"`).
pub mod codes {
    pub use mcp_hints_core::jsonrpc::{KEY_CONFLICT, KEY_IN_PROGRESS, STORE_FAILED};
}

/// What a keyed call does when the same key is still running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InProgress {
    /// Refuse at once with [`codes::KEY_IN_PROGRESS`] (the default).
    #[default]
    Refuse,
    /// Wait up to this long for the first call to finish and return its
    /// recorded result; refuse as [`Refuse`](Self::Refuse) does after that.
    Wait(Duration),
}

/// A function from a request to the caller scope of its keys (for example
/// the authenticated principal of an HTTP request), or `None` for none.
pub type CallerScope = Arc<dyn Fn(&RequestContext<RoleServer>) -> Option<String> + Send + Sync>;

/// The idempotency layer of a server: a store and its rules. Cheap to
/// clone (one `Arc`); clones share the store.
///
/// `Idempotency::default()` keeps records in a [`MemoryStore`], for 24
/// hours ([`defaults`]), refuses a key in progress, and has no caller
/// scope. [`Idempotency::builder`] sets each of these.
#[derive(Clone)]
pub struct Idempotency {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn IdempotencyStore>,
    /// `store`, when it is a [`MemoryStore`]: it answers at once, so a call
    /// asks it directly rather than through a boxed future.
    memory: Option<Arc<MemoryStore>>,
    retention: Duration,
    lease: Duration,
    in_progress: InProgress,
    caller_scope: Option<CallerScope>,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Idempotency")
            .field("store", &self.inner.store)
            .field("retention", &self.inner.retention)
            .field("lease", &self.inner.lease)
            .field("in_progress", &self.inner.in_progress)
            .field("caller_scope", &self.inner.caller_scope.is_some())
            .field("clock", &self.inner.clock)
            .finish()
    }
}

impl Default for Idempotency {
    fn default() -> Self {
        Idempotency::builder().build()
    }
}

/// Builds an [`Idempotency`]; every option has the default of
/// [`defaults`].
#[must_use]
pub struct IdempotencyBuilder {
    store: Option<Arc<dyn IdempotencyStore>>,
    memory: Option<Arc<MemoryStore>>,
    retention: Duration,
    lease: Duration,
    in_progress: InProgress,
    caller_scope: Option<CallerScope>,
    clock: Option<Arc<dyn Clock>>,
}

impl IdempotencyBuilder {
    /// Keeps records in `store` (default: a new [`MemoryStore`]).
    pub fn store(mut self, store: impl IdempotencyStore) -> Self {
        let store = Arc::new(store);
        let any: Arc<dyn std::any::Any + Send + Sync> = store.clone();
        self.memory = any.downcast().ok();
        self.store = Some(store);
        self
    }

    /// Keeps records in a store shared with other layers or servers.
    pub fn shared_store(mut self, store: Arc<dyn IdempotencyStore>) -> Self {
        self.store = Some(store);
        self.memory = None;
        self
    }

    /// Keeps records this long after their call completed (default
    /// [`defaults::RETENTION`]); a key older than this counts as new.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// How long a call holds its key without renewing it (default
    /// [`defaults::LEASE`]; at least 3 ms, since a running call renews it
    /// every third). After a process dies mid-call, its key is taken over
    /// once this has passed; a shorter lease frees it sooner and costs more
    /// renewals.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(3));
        self
    }

    /// What a call does when its key is still running (default
    /// [`InProgress::Refuse`]).
    pub fn in_progress(mut self, in_progress: InProgress) -> Self {
        self.in_progress = in_progress;
        self
    }

    /// Scopes keys by what `scope` returns for each request, so that two
    /// callers using one key never see each other's records. Over
    /// streamable HTTP, rmcp puts the request's `http::request::Parts` in
    /// `context.extensions`. The scope is stored in plain text in record
    /// keys: return an identity (a principal's id), never a secret such as
    /// a bearer token.
    pub fn caller_scope(
        mut self,
        scope: impl Fn(&RequestContext<RoleServer>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.caller_scope = Some(Arc::new(scope));
        self
    }

    /// Reads time from `clock` (default: a [`TokioClock`]).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The configured layer.
    pub fn build(self) -> Idempotency {
        let (store, memory) = match self.store {
            Some(store) => (store, self.memory),
            None => {
                let memory = Arc::new(MemoryStore::new());
                (memory.clone() as Arc<dyn IdempotencyStore>, Some(memory))
            }
        };
        Idempotency {
            inner: Arc::new(Inner {
                store,
                memory,
                retention: self.retention,
                lease: self.lease,
                in_progress: self.in_progress,
                caller_scope: self.caller_scope,
                clock: self.clock.unwrap_or_else(|| Arc::new(TokioClock::new())),
            }),
        }
    }
}

/// A server whose tools take idempotency keys: it says where its
/// [`Idempotency`] lives. Every server type with a
/// `#[tool(idempotency_key = ...)]` tool implements it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` serves a tool with `idempotency_key` but has no idempotency store",
    label = "keyed tools need `{Self}: IdempotentServer`",
    note = "implement `mcp_hints::idempotency::IdempotentServer` for `{Self}`: keep an \
            `Idempotency` in the server (`Idempotency::default()` keeps records in memory) and \
            return it from `fn idempotency(&self) -> &Idempotency`"
)]
pub trait IdempotentServer {
    /// The idempotency layer the server's keyed tools use.
    fn idempotency(&self) -> &Idempotency;
}

/// The digest a keyed call's arguments are compared by: SHA-256 of the
/// canonical JSON of `arguments` without the member `key_field` (see
/// [`canonical`](crate::canonical)), written `sha256:` and 64 hex digits.
/// No arguments is `{}`.
///
/// The canonical JSON is RFC 8785's, so key order and `1` against `1.0` do
/// not matter, except that an integer no double holds keeps its digits:
/// `9007199254740993` and `9007199254740992`, two account numbers a double
/// would round together, have two digests. Two argument sets share a digest
/// only when they are equal but for member order and how a number is
/// written. An integer beyond 64 bits reaches it as the double the parser
/// read it as; [`Idempotency::prepare`] refuses those.
pub fn arguments_digest(arguments: Option<&JsonObject>, key_field: &str) -> String {
    crate::canonical::arguments_digest(arguments, Some(key_field))
}

/// The first argument (its name and the number) holding a number that
/// `serde_json`, and so rmcp, keeps only as a double of 2^63 or more in
/// magnitude: it may have been an integer beyond 64 bits, rounded
/// (`100000000000000000001` reads as `1e20`), and no digest can tell it
/// from the other integers rounded to the same double.
fn rounded_number<'a>(
    arguments: &'a JsonObject,
    key_field: &str,
) -> Option<(&'a str, &'a serde_json::Number)> {
    fn find(value: &Value) -> Option<&serde_json::Number> {
        match value {
            Value::Number(number) => crate::canonical::may_be_rounded(number).then_some(number),
            Value::Array(items) => items.iter().find_map(find),
            Value::Object(members) => members.values().find_map(find),
            _ => None,
        }
    }
    arguments
        .iter()
        .filter(|(name, _)| name.as_str() != key_field)
        .find_map(|(name, value)| find(value).map(|number| (name.as_str(), number)))
}

/// A token unique to one call: this process's random UUID and a count, so
/// that no two calls anywhere share one, without a system call per call.
/// Shared by the call and the in-memory store's record of it.
fn lease_token() -> Arc<str> {
    static PROCESS: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| uuid::Uuid::new_v4().to_string());
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(call);
    // Written on the stack (a UUID, a dash and at most 20 digits), so that
    // the token costs one allocation, its own.
    let mut token = [0; 64];
    let parts = [PROCESS.as_bytes(), b"-", digits.as_bytes()];
    let mut len = 0;
    for part in parts {
        token[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    // A UUID's text and digits: ASCII.
    Arc::from(std::str::from_utf8(&token[..len]).unwrap_or_default())
}

/// A keyed call, checked and ready to be run by [`Idempotency::run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedCall {
    /// The tool's name, the key and the digest of the arguments, one after
    /// the other: one allocation for the three.
    text: String,
    key_at: usize,
    arguments_at: usize,
    /// The digest's bytes, which the in-memory store keeps.
    digest: [u8; 32],
    record: RecordKey,
}

impl KeyedCall {
    /// The tool called.
    pub fn tool(&self) -> &str {
        &self.text[..self.key_at]
    }

    /// The call's idempotency key.
    pub fn key(&self) -> &str {
        &self.text[self.key_at..self.arguments_at]
    }

    /// Where its record lives.
    pub fn record_key(&self) -> &RecordKey {
        &self.record
    }

    /// The digest of its arguments without the key.
    pub fn arguments_digest(&self) -> &str {
        &self.text[self.arguments_at..]
    }
}

impl Idempotency {
    /// A builder with every option at its default.
    pub fn builder() -> IdempotencyBuilder {
        IdempotencyBuilder {
            store: None,
            memory: None,
            retention: defaults::RETENTION,
            lease: defaults::LEASE,
            in_progress: InProgress::default(),
            caller_scope: None,
            clock: None,
        }
    }

    /// The store records are kept in.
    pub fn store(&self) -> &Arc<dyn IdempotencyStore> {
        &self.inner.store
    }

    /// The caller scope of `context`'s keys, from
    /// [`IdempotencyBuilder::caller_scope`]; `None` without one.
    pub fn caller_scope_of(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        self.inner
            .caller_scope
            .as_ref()
            .and_then(|scope| scope(context))
    }

    /// Checks a call of `tool` keyed by the argument `key_field`.
    ///
    /// # Errors
    ///
    /// JSON-RPC -32602 (Invalid params) when `arguments` lacks `key_field`,
    /// or it is not a string of 1 to [`defaults::MAX_KEY_CHARS`]
    /// characters; and when another argument holds a number that is not a
    /// 64-bit integer and is 2^63 or more in magnitude (`1e20`,
    /// `100000000000000000001`): the parser keeps it only as a double,
    /// which many integers round to, so no digest could tell a resend with
    /// other digits from this call (`data.argument` names it). The message
    /// says what to send.
    pub fn prepare(
        &self,
        tool: &str,
        key_field: &str,
        arguments: Option<&JsonObject>,
        caller: Option<&str>,
    ) -> Result<KeyedCall, ErrorData> {
        let problem = match arguments.and_then(|arguments| arguments.get(key_field)) {
            Some(Value::String(key)) => match key.chars().count() {
                0 => "is empty",
                1..=defaults::MAX_KEY_CHARS => {
                    if let Some((name, number)) =
                        arguments.and_then(|arguments| rounded_number(arguments, key_field))
                    {
                        return Err(rounded_refused(tool, key_field, name, number));
                    }
                    let mut text = String::with_capacity(
                        tool.len() + key.len() + crate::canonical::SHA256_TEXT_LEN,
                    );
                    text.push_str(tool);
                    text.push_str(key);
                    let digest = crate::canonical::push_arguments_digest(
                        arguments,
                        Some(key_field),
                        &mut text,
                    );
                    return Ok(KeyedCall {
                        key_at: tool.len(),
                        arguments_at: tool.len() + key.len(),
                        text,
                        digest,
                        record: RecordKey::new(tool, caller, key),
                    });
                }
                _ => "is longer than 255 characters",
            },
            None | Some(Value::Null) => "is missing",
            Some(_) => "is not a string",
        };
        Err(key_refused(tool, key_field, problem))
    }

    /// Runs `handler` for `call` at most once per key: reserves the key,
    /// polls `handler` while renewing the lease, and records its result;
    /// or returns the recorded result of an earlier call without polling
    /// `handler` at all.
    ///
    /// A [`CallToolResponse::Complete`] result (a tool error included) is
    /// recorded. A JSON-RPC error, an MRTR `InputRequired` or a task (the
    /// call has not finished), a panic, or dropping the returned future
    /// release the key instead.
    ///
    /// # Errors
    ///
    /// The handler's own error, or, without running it, a JSON-RPC error
    /// with [`codes::KEY_CONFLICT`], [`codes::KEY_IN_PROGRESS`] or
    /// [`codes::STORE_FAILED`].
    pub async fn run<F>(&self, call: &KeyedCall, handler: F) -> Result<CallToolResponse, ErrorData>
    where
        F: Future<Output = Result<CallToolResponse, ErrorData>>,
    {
        let inner = &*self.inner;
        let clock = &inner.clock;
        let started_ms = clock.now_ms();
        let mut pause = defaults::WAIT_POLL_MIN;
        let token = lease_token();
        // Scoped: nothing of the reservation but the token is kept while the
        // call runs.
        {
            let mut now_ms = started_ms;
            // Made once, for a store other than the in-memory one (a wait for
            // a key in progress only moves its times), and boxed, so that the
            // future of a call to the in-memory store does not carry it.
            let mut claim: Option<Box<Claim>> = None;
            loop {
                let lease_until_ms = after(now_ms, inner.lease);
                let reservation = match &inner.memory {
                    Some(memory) => memory.reserve_now(
                        &call.record,
                        Ask {
                            arguments: Arguments::Sha256(&call.digest),
                            token: Token::Shared(&token),
                            now_ms,
                            lease_until_ms,
                            retention: inner.retention,
                        },
                    ),
                    None => {
                        let claim = claim.get_or_insert_with(|| {
                            Box::new(Claim {
                                arguments: call.arguments_digest().to_owned(),
                                token: token.to_string(),
                                now_ms,
                                lease_until_ms,
                                retention: inner.retention,
                            })
                        });
                        claim.now_ms = now_ms;
                        claim.lease_until_ms = lease_until_ms;
                        inner.store.reserve(&call.record, claim).await
                    }
                }
                .map_err(|error| store_failed(call, &error))?;
                let record = match reservation {
                    Reservation::Reserved => {
                        tracing::debug!(tool = %call.tool(), key = %escape::quoted(call.key()), "idempotency key reserved: the call runs");
                        break;
                    }
                    Reservation::TookOver { previous } => {
                        took_over(call, &previous);
                        break;
                    }
                    Reservation::Held(record) => record,
                };
                let waited = Duration::from_millis(now_ms.saturating_sub(started_ms));
                if let Some(answer) = self.held(call, record, now_ms, waited) {
                    return answer;
                }
                // Boxed: only a call that waits needs a timer, and the future
                // of every call would carry one otherwise.
                Box::pin(tokio::time::sleep(pause)).await;
                pause = (pause * 2).min(defaults::WAIT_POLL_MAX);
                now_ms = clock.now_ms();
            }
        }
        self.run_reserved(call, token, handler).await
    }

    /// The answer to a call whose key `record` holds at `now_ms`, after
    /// waiting `waited` for it: the recorded result, or a refusal; `None`
    /// to wait on. Kept out of [`run`](Self::run), whose future every call
    /// polls, for the calls that find their key taken.
    #[inline(never)]
    fn held(
        &self,
        call: &KeyedCall,
        record: Record,
        now_ms: u64,
        waited: Duration,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        if record.arguments != call.arguments_digest() {
            tracing::info!(tool = %call.tool(), key = %escape::quoted(call.key()), "keyed call refused: the key was first used with other arguments");
            return Some(Err(refusal(
                call,
                codes::KEY_CONFLICT,
                "conflict",
                format!(
                    "the idempotency key {} of `{}` was first used with other arguments: a \
                     key names one operation, so use a new key for new arguments",
                    escape::quoted(call.key()),
                    escape::shown(call.tool())
                ),
                None,
            )));
        }
        match record.state {
            RecordState::Completed {
                result,
                completed_ms,
            } => {
                tracing::debug!(tool = %call.tool(), key = %escape::quoted(call.key()), "keyed call replayed: the recorded result is returned and the handler does not run");
                Some(replay(call, result, completed_ms))
            }
            RecordState::InProgress { lease_until_ms, .. } => {
                let wait_more = match self.inner.in_progress {
                    InProgress::Wait(limit) => waited < limit,
                    InProgress::Refuse => false,
                };
                if wait_more {
                    return None;
                }
                tracing::info!(tool = %call.tool(), key = %escape::quoted(call.key()), "keyed call refused: a call with the same key is still running");
                let retry_after = lease_until_ms.saturating_sub(now_ms).clamp(1, 1_000);
                Some(Err(refusal(
                    call,
                    codes::KEY_IN_PROGRESS,
                    "in_progress",
                    format!(
                        "a call of `{}` with the idempotency key {} is still running; retry \
                         later with the same key and arguments",
                        escape::shown(call.tool()),
                        escape::quoted(call.key())
                    ),
                    Some(retry_after),
                )))
            }
        }
    }

    async fn run_reserved<F>(
        &self,
        call: &KeyedCall,
        token: Arc<str>,
        handler: F,
    ) -> Result<CallToolResponse, ErrorData>
    where
        F: Future<Output = Result<CallToolResponse, ErrorData>>,
    {
        let inner = &*self.inner;
        let mut lease = Lease {
            store: &inner.store,
            record: &call.record,
            token,
            held: true,
        };
        let outcome = {
            let handler = std::pin::pin!(handler);
            self.renewing(call, &lease, handler).await
        };
        match outcome {
            Ok(CallToolResponse::Complete(result)) => {
                self.record(call, &mut lease, &result).await;
                Ok(CallToolResponse::Complete(result))
            }
            Ok(unfinished) => {
                tracing::debug!(tool = %call.tool(), key = %escape::quoted(call.key()), "idempotency key released: the call asked for input or became a task, so it has not finished");
                lease.release().await;
                Ok(unfinished)
            }
            Err(error) => {
                tracing::debug!(tool = %call.tool(), key = %escape::quoted(call.key()), code = error.code.0, "idempotency key released: the handler answered with a JSON-RPC error, so nothing was done");
                lease.release().await;
                Err(error)
            }
        }
    }

    /// Polls `handler` to its end, renewing the lease every third of it.
    async fn renewing<F>(
        &self,
        call: &KeyedCall,
        lease: &Lease<'_>,
        mut handler: std::pin::Pin<&mut F>,
    ) -> Result<CallToolResponse, ErrorData>
    where
        F: Future<Output = Result<CallToolResponse, ErrorData>>,
    {
        // Most handlers finish on their first poll: they need no timer, and
        // the future of every call would carry one if the loop that renews
        // were not boxed.
        if let std::task::Poll::Ready(outcome) =
            std::future::poll_fn(|cx| std::task::Poll::Ready(handler.as_mut().poll(cx))).await
        {
            return outcome;
        }
        Box::pin(self.renew_until_done(call, lease, handler)).await
    }

    /// [`renewing`](Self::renewing) of a handler that did not finish at
    /// once.
    async fn renew_until_done<F>(
        &self,
        call: &KeyedCall,
        lease: &Lease<'_>,
        mut handler: std::pin::Pin<&mut F>,
    ) -> Result<CallToolResponse, ErrorData>
    where
        F: Future<Output = Result<CallToolResponse, ErrorData>>,
    {
        let inner = &*self.inner;
        let period = inner.lease / 3;
        loop {
            tokio::select! {
                biased;
                outcome = &mut handler => return outcome,
                () = tokio::time::sleep(period) => {
                    let now_ms = inner.clock.now_ms();
                    let until = after(now_ms, inner.lease);
                    match inner.store.renew(lease.record, &lease.token, now_ms, until).await {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(tool = %call.tool(), key = %escape::quoted(call.key()), "idempotency lease lost: another call took the key over while this one still runs"),
                        Err(error) => tracing::warn!(tool = %call.tool(), key = %escape::quoted(call.key()), %error, "idempotency lease not renewed: the store failed"),
                    }
                }
            }
        }
    }

    /// Records a completed result. A store that keeps failing leaves the
    /// record in progress: the key is then free once the lease is over, and
    /// the result still reaches this caller.
    async fn record(&self, call: &KeyedCall, lease: &mut Lease<'_>, result: &CallToolResult) {
        let inner = &*self.inner;
        match &inner.memory {
            // The text goes from the buffer it is written into straight into
            // the store, which answers at once and never fails.
            Some(memory) => {
                let now_ms = inner.clock.now_ms();
                match memory.complete_serialized(lease.record, &lease.token, result, now_ms) {
                    Ok(recorded) => log_recorded(call, recorded, 1),
                    Err(error) => not_json(call, &error),
                }
            }
            None => self.record_in_store(call, lease, result).await,
        }
        // Whatever happened, the key must not be released now: the call ran.
        lease.held = false;
    }

    /// [`record`](Self::record) in a store other than the in-memory one.
    async fn record_in_store(&self, call: &KeyedCall, lease: &Lease<'_>, result: &CallToolResult) {
        // Written once; each attempt shares the text.
        let recorded = match RecordedResult::of(result) {
            Ok(recorded) => recorded,
            Err(error) => return not_json(call, &error),
        };
        let first = self.complete_in_store(lease, &recorded).await;
        if let Err(error) = completed(call, first, 1) {
            // Boxed: only a failing store needs the retries and their timer,
            // and the future of every call would carry them otherwise.
            Box::pin(self.record_again(call, lease, recorded, error)).await;
        }
    }

    /// The attempts of [`record`](Self::record) after the first failed with
    /// `error`.
    async fn record_again(
        &self,
        call: &KeyedCall,
        lease: &Lease<'_>,
        recorded: RecordedResult,
        mut error: StoreError,
    ) {
        for attempt in 2..=defaults::COMPLETE_ATTEMPTS {
            tracing::warn!(tool = %call.tool(), key = %escape::quoted(call.key()), %error, attempt = attempt - 1, "recording a keyed call's result failed; trying again");
            tokio::time::sleep(defaults::WAIT_POLL_MIN * (attempt - 1)).await;
            let outcome = self.complete_in_store(lease, &recorded).await;
            match completed(call, outcome, attempt) {
                Ok(()) => return,
                Err(again) => error = again,
            }
        }
        tracing::error!(tool = %call.tool(), key = %escape::quoted(call.key()), %error, "keyed call completed but not recorded: the store failed; a resend after the lease is over will run it again");
    }

    /// One attempt to record `recorded` under `lease` in the store, now.
    async fn complete_in_store(
        &self,
        lease: &Lease<'_>,
        recorded: &RecordedResult,
    ) -> Result<bool, StoreError> {
        let inner = &*self.inner;
        let now_ms = inner.clock.now_ms();
        inner
            .store
            .complete(
                lease.record,
                &lease.token,
                recorded.clone(),
                now_ms,
                inner.retention,
            )
            .await
    }
}

/// Logs a result that cannot be recorded.
#[cold]
fn not_json(call: &KeyedCall, error: &serde_json::Error) {
    tracing::error!(tool = %call.tool(), key = %escape::quoted(call.key()), %error, "keyed call's result cannot be recorded: it is not JSON");
}

/// Logs a key taken over from a call whose lease is over.
#[cold]
fn took_over(call: &KeyedCall, previous: &Record) {
    tracing::info!(
        tool = %call.tool(), key = %escape::quoted(call.key()), created_ms = previous.created_ms,
        "idempotency key taken over: the call that held it stopped renewing its lease (its process died), so this call runs"
    );
}

/// Logs whether attempt `attempt` at recording a keyed call's result did
/// (false: the call's lease was taken over meanwhile).
fn log_recorded(call: &KeyedCall, recorded: bool, attempt: u32) {
    if recorded {
        tracing::debug!(tool = %call.tool(), key = %escape::quoted(call.key()), attempt, "keyed call completed and recorded");
    } else {
        tracing::warn!(tool = %call.tool(), key = %escape::quoted(call.key()), "keyed call completed but not recorded: its lease was taken over meanwhile");
    }
}

/// [`log_recorded`] of what the store answered to attempt `attempt`; its
/// error, when it failed.
fn completed(
    call: &KeyedCall,
    outcome: Result<bool, StoreError>,
    attempt: u32,
) -> Result<(), StoreError> {
    log_recorded(call, outcome?, attempt);
    Ok(())
}

/// The reservation of a running call. Dropped while still held (the
/// handler panicked, or the call's future was dropped), it releases the
/// key in a task of its own.
struct Lease<'a> {
    store: &'a Arc<dyn IdempotencyStore>,
    record: &'a RecordKey,
    token: Arc<str>,
    held: bool,
}

impl Lease<'_> {
    async fn release(&mut self) {
        self.held = false;
        if let Err(error) = self.store.release(self.record, &self.token).await {
            tracing::warn!(record = %self.record, %error, "idempotency key not released: the store failed; it is free once the lease is over");
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = self.store.clone();
        let record = self.record.clone();
        let token = std::mem::take(&mut self.token);
        tracing::debug!(record = %record, "idempotency key released: the call stopped before it finished (panic or dropped)");
        runtime.spawn(async move {
            if let Err(error) = store.release(&record, &token).await {
                tracing::warn!(record = %record, %error, "idempotency key not released: the store failed; it is free once the lease is over");
            }
        });
    }
}

/// The refusal of a keyed call whose key `problem` says what is wrong
/// with.
#[cold]
fn key_refused(tool: &str, key_field: &str, problem: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "the idempotency key `{key_field}` of `{tool}` {problem}: send a string of 1 to {} \
             characters that names this operation, and the same one on every resend",
            defaults::MAX_KEY_CHARS
        ),
        Some(json!({ "tool": tool, "idempotencyKeyField": key_field })),
    )
}

/// The refusal of a keyed call whose argument `name` holds `number`, a
/// double that may stand for many integers.
#[cold]
fn rounded_refused(
    tool: &str,
    key_field: &str,
    name: &str,
    number: &serde_json::Number,
) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "the argument `{}` of the keyed tool `{tool}` holds the number {number}, 2^63 or \
             more in magnitude and not a 64-bit integer: it is read as a double, which cannot \
             say which integer was sent, so a resend with other digits would get this call's \
             result; send such a number as a string",
            escape::shown(name)
        ),
        Some(json!({ "tool": tool, "idempotencyKeyField": key_field, "argument": name })),
    )
}

/// The recorded result, marked as replayed.
fn replay(
    call: &KeyedCall,
    result: RecordedResult,
    completed_ms: u64,
) -> Result<CallToolResponse, ErrorData> {
    let mut result: CallToolResult = result.parse().map_err(|error| {
        store_failed(
            call,
            &StoreError::Corrupt {
                key: call.record.to_string(),
                detail: error.to_string(),
            },
        )
    })?;
    let mut meta = result.meta.take().unwrap_or_default();
    meta.0.insert(
        REPLAYED_META_KEY.to_owned(),
        json!({ "key": call.key(), "recordedMs": completed_ms }),
    );
    result.meta = Some(meta);
    Ok(CallToolResponse::Complete(result))
}

fn refusal(
    call: &KeyedCall,
    code: i32,
    reason: &str,
    message: String,
    retry_after_ms: Option<u64>,
) -> ErrorData {
    let mut data = json!({ "tool": call.tool(), "idempotencyKey": call.key(), "reason": reason });
    if let Some(retry_after_ms) = retry_after_ms {
        data["retryAfterMs"] = retry_after_ms.into();
    }
    ErrorData::new(ErrorCode(code), message, Some(data))
}

#[cold]
fn store_failed(call: &KeyedCall, error: &StoreError) -> ErrorData {
    tracing::warn!(tool = %call.tool(), key = %escape::quoted(call.key()), %error, "keyed call refused: the store cannot say whether the key was used, so the call does not run");
    refusal(
        call,
        codes::STORE_FAILED,
        "store",
        format!("{error}, so `{}` was not run; retry later", call.tool()),
        None,
    )
}

#[cfg(test)]
mod tests;

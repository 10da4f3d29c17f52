//! The Redis backend: the state every replica configured with one Redis
//! and one `[state] prefix` shares. Each change is one command or one Lua
//! script, which Redis runs alone, so every method is atomic against every
//! replica, and every time is Redis's own (`TIME`), never a replica's
//! clock.
//!
//! Keys, under the prefix `P`:
//!
//! - `P:rate:LEN:RULE:PRINCIPAL`: a sorted set of the calls counted in one
//!   rule's window for one principal, scored by the microsecond they were
//!   counted (`LEN` is the rule text's length in bytes, so that no rule
//!   and principal pair can spell another's key);
//! - `P:parked:ID`: a parked call's JSON, expiring a little after the call
//!   does, and `P:parked`, the set of their ids;
//! - `P:resolution:ID`: how a resolved call ended, kept for
//!   [`RESOLVED_RETENTION`];
//! - `P:drift`: a hash of approved fingerprints by namespaced tool name;
//! - `P:budget:UPSTREAM:PRINCIPAL`: a hash of one retry budget's use by
//!   second, fields `d:SECOND` (calls) and `w:SECOND` (resends), pruned
//!   past its window (an upstream's name has no `:`);
//! - `P:session:ID`: which replica opened a streamable-HTTP session, for
//!   which principal (`{"principal", "replica"}`), for
//!   [`SESSION_RECORD_TTL`] at most;
//! - `P:history:SESSION`: a list of one session's history events, each
//!   `MS EVENT` (the Redis time of it in ms since the Unix epoch, a space,
//!   [`HistoryEvent::to_line`]), oldest first, trimmed to its last events and expiring
//!   `[session] idle_secs` after the last (`SESSION` is a
//!   [`SessionKey`](crate::session::SessionKey): hex digits);
//! - the channel `P:resolved`, on which each resolved call's id is
//!   published, and `P:newly-parked`, on which each parked call's id is.
//!
//! The keys of one call are not spread over a Redis Cluster's slots: the
//! backend wants one Redis (with replicas of its own, or Sentinel), not a
//! cluster.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use mcp_hints::fingerprint::PinnedTool;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands as _, Script};
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::memory::RESOLVED_RETENTION;
use super::{BudgetUse, Counted, SESSION_RECORD_TTL, SharedState, StateError, Window};
use crate::approval::{DriftLock, Parked, Resolution};
use crate::session::{History, HistoryEvent, HistoryLimits};

const BACKEND: &str = "redis";

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one command may take: past it the call is decided as though
/// Redis were unreachable, rather than held.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a parked call's record outlives its expiry, so that the
/// replica that parked it resolves it (as expired) before it vanishes.
const PARKED_GRACE: Duration = Duration::from_secs(30);

/// How long the subscriber waits before subscribing again after its
/// connection failed.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(500);

/// Checks every window (`KEYS[i]`, `ARGV[2i-1]` its limit, `ARGV[2i]` its
/// span in µs) and, when each has room, counts the call (member `ARGV[2n+1]`)
/// in all. Returns `{0, 0}` when counted, else `{i, retry_after_µs}` of
/// the full window that frees up last.
static COUNT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local worst, worst_at = -1, 0
for i = 1, n do
  local limit = tonumber(ARGV[2 * i - 1])
  local span = tonumber(ARGV[2 * i])
  -- A call leaves the window `span` after it was counted.
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - span)
  if redis.call('ZCARD', KEYS[i]) >= limit then
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    local retry = span - (now - tonumber(oldest[2]))
    if retry > worst then
      worst, worst_at = retry, i
    end
  end
end
if worst_at > 0 then
  return {worst_at, worst}
end
for i = 1, n do
  redis.call('ZADD', KEYS[i], now, ARGV[2 * n + 1])
  redis.call('PEXPIRE', KEYS[i], math.ceil(tonumber(ARGV[2 * i]) / 1000) + 1000)
end
return {0, 0}
"#,
    )
});

/// Resolves the parked call `KEYS[1]` (index `KEYS[2]`, resolution key
/// `KEYS[3]`) as `ARGV[2]` when it is still parked: 1, and `ARGV[1]` (its
/// id) published on `ARGV[4]`; else 0. `ARGV[3]`: the resolution's
/// retention in ms.
static RESOLVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('DEL', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[1])
  return 0
end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 1
"#,
    )
});

/// Adds `ARGV[1]` calls and `ARGV[2]` resends to the current second of
/// the retry budget `KEYS[1]`, drops the seconds older than the window
/// (`ARGV[3]` seconds), and returns `{calls, resends}` over the window.
static BUDGET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local now = tonumber(redis.call('TIME')[1])
local span = tonumber(ARGV[3])
if tonumber(ARGV[1]) > 0 then
  redis.call('HINCRBY', KEYS[1], 'd:' .. now, ARGV[1])
end
if tonumber(ARGV[2]) > 0 then
  redis.call('HINCRBY', KEYS[1], 'w:' .. now, ARGV[2])
end
local fields = redis.call('HGETALL', KEYS[1])
local calls, resends, old = 0, 0, {}
for i = 1, #fields, 2 do
  local kind, second = string.match(fields[i], '^(%a):(%d+)$')
  second = tonumber(second)
  if second == nil or second + span <= now then
    table.insert(old, fields[i])
  elseif kind == 'd' then
    calls = calls + tonumber(fields[i + 1])
  else
    resends = resends + tonumber(fields[i + 1])
  end
end
if #old > 0 then
  redis.call('HDEL', KEYS[1], unpack(old))
end
redis.call('EXPIRE', KEYS[1], span + 1)
return {calls, resends}
"#,
    )
});

/// Appends `ARGV[1]`, stamped `MS ` with Redis's time in ms, to the
/// history `KEYS[1]`, keeps its last `ARGV[2]` events, and makes it expire
/// `ARGV[3]` ms from now.
static RECORD_HISTORY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('RPUSH', KEYS[1], ms .. ' ' .. ARGV[1])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return ms
"#,
    )
});

/// A shared record of a session: who it is for and where it is served.
#[derive(serde::Serialize, serde::Deserialize)]
struct SessionRecord {
    principal: String,
    replica: String,
}

/// The state of every replica sharing one Redis and one prefix.
#[derive(Clone)]
pub struct RedisState {
    connection: ConnectionManager,
    prefix: String,
    resolved: broadcast::Sender<String>,
    newly_parked: broadcast::Sender<String>,
    /// The lock file's approvals, under those made through Redis.
    baseline: Option<Arc<DriftLock>>,
    /// Ends the subscriber's task with the last clone.
    _subscriber: Arc<DropGuard>,
}

impl std::fmt::Debug for RedisState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisState")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn unavailable(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StateError {
    StateError::new(BACKEND, error)
}

/// Runs the read `command` and, when it failed on a connection Redis had
/// dropped (a restart: the connection manager reconnects for the next
/// command), once more. Only reads: a write whose reply was lost may have
/// been done.
async fn read<T, F: Future<Output = redis::RedisResult<T>>>(
    command: impl Fn() -> F,
) -> Result<T, StateError> {
    match command().await {
        Err(error) if error.is_connection_dropped() || error.is_io_error() => {
            command().await.map_err(unavailable)
        }
        done => done.map_err(unavailable),
    }
}

/// Milliseconds, at least 1 (Redis refuses `PX 0`).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

impl RedisState {
    /// The state in the Redis at `url` under `prefix`, the lock file's
    /// approvals (`baseline`) under the ones made through it. Connects on
    /// first use and again after every failure, so a Redis that is down
    /// now (or later) is used once it is back, without a restart; a task
    /// of its own follows the `resolved` channel from now on. Call within
    /// a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`StateError`] when `url` is not a Redis URL.
    pub fn open(
        url: &str,
        prefix: &str,
        baseline: Option<DriftLock>,
    ) -> Result<RedisState, StateError> {
        let client = redis::Client::open(url).map_err(unavailable)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connection =
            ConnectionManager::new_lazy_with_config(client.clone(), config).map_err(unavailable)?;
        let (resolved, _) = broadcast::channel(256);
        let (newly_parked, _) = broadcast::channel(256);
        let ended = CancellationToken::new();
        let state = RedisState {
            connection,
            prefix: prefix.to_owned(),
            resolved,
            newly_parked,
            baseline: baseline.map(Arc::new),
            _subscriber: Arc::new(ended.clone().drop_guard()),
        };
        let subscriber = subscribe(
            client,
            [
                (state.channel(), state.resolved.downgrade()),
                (state.parked_channel(), state.newly_parked.downgrade()),
            ],
        );
        tokio::spawn(async move {
            tokio::select! {
                () = subscriber => {}
                () = ended.cancelled() => {}
            }
        });
        Ok(state)
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = self.prefix.clone();
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        key
    }

    fn channel(&self) -> String {
        self.key(&["resolved"])
    }

    fn parked_channel(&self) -> String {
        self.key(&["newly-parked"])
    }
}

/// Follows each channel, passing its messages to its sender, while
/// anyone holds one of the senders, subscribing again after every failure.
async fn subscribe(client: redis::Client, channels: [(String, broadcast::WeakSender<String>); 2]) {
    use futures_util::StreamExt as _;
    let names: Vec<String> = channels.iter().map(|(name, _)| name.clone()).collect();
    let live = || {
        channels
            .iter()
            .any(|(_, sender)| sender.upgrade().is_some())
    };
    loop {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&names).await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        // Down or refusing: the waiting calls poll meanwhile.
        if let Ok(Ok(mut messages)) = tokio::time::timeout(CONNECT_TIMEOUT, subscribed).await {
            while let Some(message) = messages.next().await {
                if !live() {
                    return;
                }
                let sender = channels
                    .iter()
                    .find(|(name, _)| name.as_str() == message.get_channel_name())
                    .and_then(|(_, sender)| sender.upgrade());
                if let (Some(sender), Ok(id)) = (sender, message.get_payload::<String>()) {
                    let _ = sender.send(id);
                }
            }
        }
        if !live() {
            return;
        }
        tokio::time::sleep(RESUBSCRIBE_DELAY).await;
    }
}

#[async_trait]
impl SharedState for RedisState {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn count(&self, principal: &str, windows: &[Window<'_>]) -> Result<Counted, StateError> {
        let mut invocation = COUNT.prepare_invoke();
        for window in windows {
            let length = window.key.len().to_string();
            invocation.key(self.key(&["rate", &length, window.key, principal]));
        }
        for window in windows {
            let span = u64::try_from(window.window.as_micros()).unwrap_or(u64::MAX);
            invocation.arg(window.limit).arg(span);
        }
        invocation.arg(uuid::Uuid::new_v4().to_string());
        let reply: (usize, i64) = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(match reply {
            (0, _) => Counted::Allowed,
            (at, retry) => {
                let window = windows.get(at - 1).ok_or_else(|| {
                    unavailable(format!(
                        "the count script named window {at} of {}",
                        windows.len()
                    ))
                })?;
                Counted::Full {
                    rule: window.rule,
                    retry_after: Duration::from_micros(retry.max(0).unsigned_abs()),
                }
            }
        })
    }

    async fn park(&self, call: &Parked) -> Result<(), StateError> {
        let json = serde_json::to_string(call).map_err(unavailable)?;
        let left = call
            .expires_at
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(self.key(&["parked", &call.id]))
            .arg(json)
            .arg("PX")
            .arg(millis(left + PARKED_GRACE))
            .ignore()
            .sadd(self.key(&["parked"]), &call.id)
            .ignore()
            .publish(self.parked_channel(), &call.id)
            .ignore()
            .exec_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn resolve(&self, id: &str, resolution: &Resolution) -> Result<bool, StateError> {
        let json = serde_json::to_string(resolution).map_err(unavailable)?;
        let resolved: u8 = RESOLVE
            .key(self.key(&["parked", id]))
            .key(self.key(&["parked"]))
            .key(self.key(&["resolution", id]))
            .arg(id)
            .arg(json)
            .arg(millis(RESOLVED_RETENTION))
            .arg(self.channel())
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(resolved == 1)
    }

    async fn resolution(&self, id: &str) -> Result<Option<Resolution>, StateError> {
        let key = self.key(&["resolution", id]);
        let json: Option<String> = read(|| {
            let (mut connection, key) = (self.connection.clone(), key.clone());
            async move { connection.get(key).await }
        })
        .await?;
        json.map(|json| serde_json::from_str(&json).map_err(unavailable))
            .transpose()
    }

    async fn pending(&self) -> Result<Vec<Parked>, StateError> {
        let index = self.key(&["parked"]);
        let ids: Vec<String> = read(|| {
            let (mut connection, index) = (self.connection.clone(), index.clone());
            async move { connection.smembers(index).await }
        })
        .await?;
        let mut connection = self.connection.clone();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| self.key(&["parked", id])).collect();
        let calls: Vec<Option<String>> = connection.mget(&keys).await.map_err(unavailable)?;
        let mut pending = Vec::new();
        let mut gone = Vec::new();
        for (id, call) in ids.iter().zip(calls) {
            match call {
                Some(json) => pending.push(serde_json::from_str(&json).map_err(unavailable)?),
                // Expired with a replica that died holding it.
                None => gone.push(id.clone()),
            }
        }
        if !gone.is_empty() {
            let _: usize = connection
                .srem(self.key(&["parked"]), gone)
                .await
                .map_err(unavailable)?;
        }
        Ok(pending)
    }

    fn resolved(&self) -> broadcast::Receiver<String> {
        self.resolved.subscribe()
    }

    fn newly_parked(&self) -> broadcast::Receiver<String> {
        self.newly_parked.subscribe()
    }

    async fn approved_tool(&self, namespaced: &str) -> Result<Option<PinnedTool>, StateError> {
        let drift = self.key(&["drift"]);
        let json: Option<String> = read(|| {
            let (mut connection, drift) = (self.connection.clone(), drift.clone());
            async move { connection.hget(drift, namespaced).await }
        })
        .await?;
        match json {
            Some(json) => serde_json::from_str(&json).map(Some).map_err(unavailable),
            None => Ok(self
                .baseline
                .as_ref()
                .and_then(|lock| lock.lock().tools.get(namespaced).cloned())),
        }
    }

    async fn approve_tool(&self, namespaced: &str, tool: &PinnedTool) -> Result<(), StateError> {
        let json = serde_json::to_string(tool).map_err(unavailable)?;
        let _: usize = self
            .connection
            .clone()
            .hset(self.key(&["drift"]), namespaced, json)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn retry_budget(
        &self,
        budget: &str,
        used: BudgetUse,
        window: Duration,
    ) -> Result<BudgetUse, StateError> {
        let (deposits, withdrawals): (u64, u64) = BUDGET
            .key(self.key(&["budget", budget]))
            .arg(used.deposits)
            .arg(used.withdrawals)
            .arg(window.as_secs().max(1))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(BudgetUse {
            deposits,
            withdrawals,
        })
    }

    async fn open_session(
        &self,
        id: &str,
        principal: &str,
        replica: &str,
    ) -> Result<(), StateError> {
        let record = serde_json::to_string(&SessionRecord {
            principal: principal.to_owned(),
            replica: replica.to_owned(),
        })
        .map_err(unavailable)?;
        let () = self
            .connection
            .clone()
            .pset_ex(
                self.key(&["session", id]),
                record,
                millis(SESSION_RECORD_TTL),
            )
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn session_opener(
        &self,
        id: &str,
        principal: &str,
    ) -> Result<Option<String>, StateError> {
        let key = self.key(&["session", id]);
        let record: Option<String> = read(|| {
            let (mut connection, key) = (self.connection.clone(), key.clone());
            async move { connection.get(key).await }
        })
        .await?;
        let Some(record) = record else {
            return Ok(None);
        };
        let record: SessionRecord = serde_json::from_str(&record).map_err(unavailable)?;
        Ok((record.principal == principal).then_some(record.replica))
    }

    async fn end_session(&self, id: &str) -> Result<(), StateError> {
        let _: usize = self
            .connection
            .clone()
            .del(self.key(&["session", id]))
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn record_history(
        &self,
        session: &str,
        event: &HistoryEvent,
        limits: HistoryLimits,
    ) -> Result<(), StateError> {
        let _: u64 = RECORD_HISTORY
            .key(self.key(&["history", session]))
            .arg(event.to_line())
            .arg(limits.max_events().max(1))
            .arg(millis(limits.idle))
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn history(&self, session: &str) -> Result<History, StateError> {
        let key = self.key(&["history", session]);
        // One round trip, and no script: a script would copy the whole
        // list into a Lua table first.
        let ((seconds, micros), lines): ((u64, u64), Vec<String>) = read(|| {
            let (mut connection, key) = (self.connection.clone(), key.clone());
            async move {
                redis::pipe()
                    .cmd("TIME")
                    .cmd("LRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut connection)
                    .await
            }
        })
        .await?;
        let now_ms = seconds.saturating_mul(1_000).saturating_add(micros / 1_000);
        let mut events = Vec::with_capacity(lines.len());
        for line in &lines {
            let parsed = line.split_once(' ').and_then(|(ms, event)| {
                Some((ms.parse::<u64>().ok()?, HistoryEvent::from_line(event)?))
            });
            // A line this gateway cannot read (another version's, or not
            // the gateway's at all) makes the history unknown, not
            // shorter: rules that look back then fail closed.
            let Some(event) = parsed else {
                return Err(unavailable(format!(
                    "session history `{key}` holds an event this gateway cannot read"
                )));
            };
            events.push(event);
        }
        Ok(History::fold(now_ms, events))
    }

    async fn ready(&self) -> Result<(), StateError> {
        read(|| {
            let mut connection = self.connection.clone();
            async move { redis::cmd("PING").exec_async(&mut connection).await }
        })
        .await
    }
}

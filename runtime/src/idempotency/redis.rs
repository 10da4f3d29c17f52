//! The shared store (feature `redis`): idempotency records in Redis, so that
//! several replicas of a server see one record per key.
//!
//! Each record is one Redis string, the record's JSON, under the store's
//! prefix followed by [`RecordKey::as_str`], with a Redis expiry (`PX`) of
//! the retention given when it was written. Every change is one command or
//! one Lua script, which Redis runs alone, so each trait method is atomic
//! against every replica:
//!
//! - reserve: `SET key <record> NX PX <retention>`, the fast path for a new
//!   key; when a record is there, [`RESERVE`] decides on it as
//!   [`Record::standing`] does and takes it over or returns it.
//! - renew, complete and release: [`RENEW`], [`COMPLETE`] and [`RELEASE`]
//!   change the record only when it is in progress under the caller's
//!   token.
//!
//! The scripts run with `EVALSHA` and are loaded again when Redis lost them
//! (a restart). Lua numbers are doubles, so times are exact up to 2^53 ms
//! after the Unix epoch (about the year 287,000).

use std::fmt;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::store::{
    Claim, IdempotencyStore, Record, RecordKey, RecordedResult, Reservation, StoreError, millis,
};

/// Functions every script shares: reading the record under `KEYS[1]`, and
/// the rule of [`Record::standing`].
const PRELUDE: &str = r#"
-- Reads the record under KEYS[1]. Returns the record (a table) and its JSON
-- text; nil when there is none; false and the reason when it is not a
-- record this store writes.
local function load()
  local raw = redis.pcall('GET', KEYS[1])
  if type(raw) == 'table' and raw.err then
    return false, raw.err
  end
  if not raw then
    return nil
  end
  local ok, record = pcall(cjson.decode, raw)
  if not ok then
    return false, 'not JSON: ' .. tostring(record)
  end
  local function count(n)
    return type(n) == 'number' and n >= 0 and n == math.floor(n)
  end
  if type(record) ~= 'table' or type(record.arguments) ~= 'string' or not count(record.createdMs) then
    return false, 'not a record: "arguments" or "createdMs" is missing or wrong'
  end
  if record.state == 'in_progress' then
    if type(record.token) ~= 'string' or not count(record.leaseUntilMs) then
      return false, 'not a record: "token" or "leaseUntilMs" is missing or wrong'
    end
  elseif record.state == 'completed' then
    if record.result == nil or not count(record.completedMs) then
      return false, 'not a record: "result" or "completedMs" is missing or wrong'
    end
  else
    return false, 'not a record: "state" is neither "in_progress" nor "completed"'
  end
  return record, raw
end

-- Mirrors Record::standing (runtime/src/idempotency/store.rs): whether the
-- record holds its key at `now` under a retention window of `retention`,
-- both in ms. Change the two together.
local function standing(record, now, retention)
  if record.state == 'completed' then
    if now >= record.completedMs + retention then
      return 'expired'
    end
    return 'holds'
  end
  if now < record.leaseUntilMs then
    return 'holds'
  elseif now >= record.createdMs + retention then
    return 'expired'
  end
  return 'lease_over'
end

-- An integral count of ms as JSON digits.
local function ms(n)
  return string.format('%.0f', n)
end

-- The members every state of `record` keeps, as the start of its JSON: the
-- record is rebuilt as text so that a result's JSON is never decoded and
-- encoded again by cjson.
local function head(record)
  return '{"arguments":' .. cjson.encode(record.arguments)
    .. ',"createdMs":' .. ms(record.createdMs)
end

-- The record under KEYS[1] when it is in progress under `token`; or the
-- reply to give (`not_held`, or `corrupt` and the reason).
local function leased(token)
  local record, raw = load()
  if record == false then
    return nil, {'corrupt', raw}
  end
  if not record or record.state ~= 'in_progress' or record.token ~= token then
    return nil, {'not_held'}
  end
  return record
end
"#;

/// Claims the key when `SET NX` found a record there.
///
/// `KEYS[1]`: the record's key. `ARGV`: the claim's record JSON, the claim's
/// time (ms), the retention [`Record::standing`] is checked with (ms), the
/// Redis expiry to set (ms).
///
/// Replies `{'reserved'}` (no record, or one expired: the claim's record is
/// set), `{'took_over', <previous JSON>}` (the lease was over: the claim's
/// record is set), `{'held', <JSON>}` (unchanged) or `{'corrupt',
/// <reason>}` (unchanged).
static RESERVE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local record, raw = load()
if record == false then
  return {'corrupt', raw}
end
local answer = {'reserved'}
if record then
  local now = standing(record, tonumber(ARGV[2]), tonumber(ARGV[3]))
  if now == 'holds' then
    return {'held', raw}
  elseif now == 'lease_over' then
    answer = {'took_over', raw}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
return answer
"#,
    )
});

/// Moves the lease of the record in progress under a token, keeping the
/// record's Redis expiry (`KEEPTTL`) unless the lease now ends later.
///
/// `KEYS[1]`: the record's key. `ARGV`: the token, the new lease end (ms),
/// the lease's length from now (ms, at least 1).
/// Replies `{'done'}`, `{'not_held'}` or `{'corrupt', <reason>}`.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local record, reply = leased(ARGV[1])
if not record then
  return reply
end
redis.call('SET', KEYS[1], head(record)
  .. ',"state":"in_progress","token":' .. cjson.encode(record.token)
  .. ',"leaseUntilMs":' .. ARGV[2] .. '}', 'KEEPTTL')
-- A call still running keeps its record at least until its lease ends.
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {'done'}
"#,
    )
});

/// Completes the record in progress under a token. The result's JSON is
/// stored as given, never decoded and encoded again by Lua.
///
/// `KEYS[1]`: the record's key. `ARGV`: the token, the result JSON, the
/// completion time (ms), the Redis expiry to set (ms). Replies `{'done'}`,
/// `{'not_held'}` or `{'corrupt', <reason>}`.
static COMPLETE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local record, reply = leased(ARGV[1])
if not record then
  return reply
end
redis.call('SET', KEYS[1], head(record)
  .. ',"state":"completed","result":' .. ARGV[2]
  .. ',"completedMs":' .. ARGV[3] .. '}', 'PX', ARGV[4])
return {'done'}
"#,
    )
});

/// Deletes the record in progress under a token.
///
/// `KEYS[1]`: the record's key. `ARGV`: the token. Replies `{'done'}`,
/// `{'not_held'}` or `{'corrupt', <reason>}`.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local record, reply = leased(ARGV[1])
if not record then
  return reply
end
redis.call('DEL', KEYS[1])
return {'done'}
"#,
    )
});

fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}\n{body}"))
}

/// Records kept in Redis, shared by every server replica that connects to
/// it with the same prefix: a key reserved by one replica is held for all.
///
/// Connects through a [`ConnectionManager`], which reconnects by itself
/// after Redis restarts or the connection drops. A call made while Redis
/// cannot be reached fails within a few seconds (at most
/// [`CONNECT_TIMEOUT`](Self::CONNECT_TIMEOUT) per connection attempt, two
/// attempts, then [`RESPONSE_TIMEOUT`](Self::RESPONSE_TIMEOUT) for the
/// answer) with [`StoreError::Unavailable`], and the keyed call does not
/// run.
///
/// Records expire in Redis at the retention given when they were written
/// (`PX`); [`Record::standing`] is checked on every reserve as well, with
/// the retention of the call that reserves. Replicas should agree on time:
/// each reads its own [`Clock`](super::Clock).
///
/// The records are only as durable as Redis keeps them: a Redis that
/// restarts without persistence, or fails over to a replica that had not
/// received the write, has forgotten keys, and their resends run again.
/// For that guarantee, run Redis with the append-only file
/// (`appendonly yes`, `appendfsync everysec` loses at most a second of
/// keys, `always` none) and fail over only to replicas that acknowledged
/// (`WAIT`, `min-replicas-to-write`).
///
/// ```no_run
/// use mcp_hints::idempotency::{Idempotency, RedisStore};
///
/// # async fn example() -> Result<(), mcp_hints::idempotency::StoreError> {
/// let store = RedisStore::connect("redis://127.0.0.1:6379/")
///     .await?
///     .with_prefix("billing:idempotency:");
/// let idempotency = Idempotency::builder().store(store).build();
/// # let _ = idempotency;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// Every method returns [`StoreError::Unavailable`] when Redis cannot be
/// reached, does not answer in time or answers with an error, and
/// [`StoreError::Corrupt`] when the key holds something other than the
/// JSON of a [`Record`] (another program's value, or another Redis type);
/// never [`StoreError::Full`]: Redis's own `maxmemory` policy bounds it
/// (use `volatile-ttl` or `noeviction`, so that records in progress are not
/// evicted first).
#[derive(Clone)]
pub struct RedisStore {
    connection: ConnectionManager,
    prefix: String,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The connection's URL may hold a password: not shown.
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The prefix of every key the store writes, unless
    /// [`with_prefix`](Self::with_prefix) sets another:
    /// `mcp-hints:idempotency:`.
    pub const DEFAULT_PREFIX: &'static str = "mcp-hints:idempotency:";

    /// How long one attempt to connect to Redis may take: 2 seconds.
    pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

    /// How long Redis may take to answer one command or script: 2 seconds.
    pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

    /// The longest Redis expiry the store sets, in ms: 2^53 (Lua's doubles
    /// are exact up to there, and Redis refuses expiries near `i64::MAX`).
    /// A longer retention is cut to this.
    const MAX_EXPIRY_MS: u64 = 1 << 53;

    /// Connects to the Redis at `url` (`redis://[user:password@]host:port/db`,
    /// or `rediss://` where the redis crate is built with TLS), with the
    /// timeouts above, a single reconnection attempt per failed call, and
    /// the [`DEFAULT_PREFIX`](Self::DEFAULT_PREFIX).
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when `url` is not a Redis URL or Redis
    /// cannot be reached now.
    pub async fn connect(url: &str) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url).map_err(StoreError::unavailable)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Self::CONNECT_TIMEOUT))
            .set_response_timeout(Some(Self::RESPONSE_TIMEOUT))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(StoreError::unavailable)?;
        Ok(RedisStore::from_connection_manager(connection))
    }

    /// A store on a connection manager configured elsewhere (TLS, other
    /// timeouts), with the [`DEFAULT_PREFIX`](Self::DEFAULT_PREFIX). Give
    /// it a response timeout: without one, a Redis that stops answering
    /// stops every keyed call with it.
    pub fn from_connection_manager(connection: ConnectionManager) -> RedisStore {
        RedisStore {
            connection,
            prefix: Self::DEFAULT_PREFIX.to_owned(),
        }
    }

    /// The same store, writing its keys under `prefix` (for example one per
    /// application sharing a Redis). Replicas that share records must use
    /// the same prefix.
    #[must_use]
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> RedisStore {
        self.prefix = prefix.into();
        self
    }

    /// The prefix of every key the store writes.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The Redis key of `key`: the prefix, then [`RecordKey::as_str`].
    pub fn redis_key(&self, key: &RecordKey) -> String {
        format!("{}{}", self.prefix, key.as_str())
    }

    /// `retention` as a Redis expiry in ms: at least 1 (Redis refuses 0),
    /// at most [`MAX_EXPIRY_MS`](Self::MAX_EXPIRY_MS).
    fn expiry_ms(retention: Duration) -> u64 {
        millis(retention).clamp(1, Self::MAX_EXPIRY_MS)
    }

    /// Runs one of the token-checking scripts.
    async fn leased(
        &self,
        script: &Script,
        key: &RecordKey,
        args: &[&str],
    ) -> Result<bool, StoreError> {
        let mut invocation = script.key(self.redis_key(key));
        for arg in args {
            invocation.arg(*arg);
        }
        let reply: Vec<String> = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(StoreError::unavailable)?;
        match reply.as_slice() {
            [done] if done == "done" => Ok(true),
            [not_held] if not_held == "not_held" => Ok(false),
            [corrupt, detail] if corrupt == "corrupt" => Err(corrupt_record(key, detail)),
            _ => Err(unexpected(&reply)),
        }
    }
}

fn corrupt_record(key: &RecordKey, detail: &str) -> StoreError {
    StoreError::Corrupt {
        key: key.to_string(),
        detail: detail.to_owned(),
    }
}

fn parse(key: &RecordKey, json: &str) -> Result<Record, StoreError> {
    serde_json::from_str(json).map_err(|error| corrupt_record(key, &error.to_string()))
}

fn unexpected(reply: &[String]) -> StoreError {
    StoreError::unavailable(format!(
        "the idempotency script gave an unexpected reply: {reply:?}"
    ))
}

#[async_trait]
impl IdempotencyStore for RedisStore {
    /// As the trait says: `SET NX` when the key is free, else one Lua
    /// script that applies [`Record::standing`]. The claim's record expires in Redis after
    /// `claim.retention`.
    async fn reserve(&self, key: &RecordKey, claim: &Claim) -> Result<Reservation, StoreError> {
        let redis_key = self.redis_key(key);
        let record = serde_json::to_string(&claim.record()).map_err(StoreError::unavailable)?;
        // Never before the lease ends: a call still running keeps its key.
        let expiry_ms = Self::expiry_ms(claim.retention)
            .max(claim.lease_until_ms.saturating_sub(claim.now_ms))
            .min(Self::MAX_EXPIRY_MS);
        let set: redis::Value = redis::cmd("SET")
            .arg(&redis_key)
            .arg(&record)
            .arg("NX")
            .arg("PX")
            .arg(expiry_ms)
            .query_async(&mut self.connection.clone())
            .await
            .map_err(StoreError::unavailable)?;
        match set {
            redis::Value::Okay => return Ok(Reservation::Reserved),
            redis::Value::Nil => {}
            other => {
                return Err(StoreError::unavailable(format!(
                    "SET NX gave an unexpected reply: {other:?}"
                )));
            }
        }
        let reply: Vec<String> = RESERVE
            .key(&redis_key)
            .arg(&record)
            .arg(claim.now_ms)
            .arg(millis(claim.retention))
            .arg(expiry_ms)
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(StoreError::unavailable)?;
        match reply.as_slice() {
            [reserved] if reserved == "reserved" => Ok(Reservation::Reserved),
            [took_over, previous] if took_over == "took_over" => Ok(Reservation::TookOver {
                previous: parse(key, previous)?,
            }),
            [held, record] if held == "held" => Ok(Reservation::Held(parse(key, record)?)),
            [corrupt, detail] if corrupt == "corrupt" => Err(corrupt_record(key, detail)),
            _ => Err(unexpected(&reply)),
        }
    }

    /// As the trait says, in one Lua script; the record keeps its Redis
    /// expiry, extended to the lease's end when that is later.
    async fn renew(
        &self,
        key: &RecordKey,
        token: &str,
        now_ms: u64,
        lease_until_ms: u64,
    ) -> Result<bool, StoreError> {
        let lease_ms = lease_until_ms
            .saturating_sub(now_ms)
            .clamp(1, Self::MAX_EXPIRY_MS);
        self.leased(
            &RENEW,
            key,
            &[token, &lease_until_ms.to_string(), &lease_ms.to_string()],
        )
        .await
    }

    /// As the trait says, in one Lua script; the completed record
    /// expires in Redis after `retention`.
    async fn complete(
        &self,
        key: &RecordKey,
        token: &str,
        result: RecordedResult,
        now_ms: u64,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        self.leased(
            &COMPLETE,
            key,
            &[
                token,
                result.as_str(),
                &now_ms.to_string(),
                &Self::expiry_ms(retention).to_string(),
            ],
        )
        .await
    }

    /// As the trait says, in one Lua script.
    async fn release(&self, key: &RecordKey, token: &str) -> Result<bool, StoreError> {
        self.leased(&RELEASE, key, &[token]).await
    }
}

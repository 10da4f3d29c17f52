//! The config's tables as serde reads them, before any check: every key a
//! check needs to point at is `Spanned`, a key that does not belong is
//! refused by `deny_unknown_fields`, and a whole-number key is a
//! [`Whole`], whose message for anything else says the key's range.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use toml::Spanned;

use super::{DefaultAction, RateLimitFallback, SessionPer, defaults};
use crate::policy::Expiry;

/// What a whole-number key takes, for the message of a value that is not
/// such a number: "a whole number of `UNIT` from `MIN` to `MAX`". The
/// check that reads the key refuses a number outside that range itself,
/// saying why.
pub(super) trait Takes {
    /// What the number counts, plural: `seconds`.
    const UNIT: &'static str;
    /// The least the key takes.
    const MIN: u64;
    /// The most the key takes.
    const MAX: u64;
    /// [`MAX`](Self::MAX) in words, when the number alone would not say
    /// much: `31622400 (366 days)`, or `2^63 - 1` where only the type
    /// bounds the key.
    fn max_said() -> String {
        Self::MAX.to_string()
    }
}

/// A whole-number key's value, read as `T` (`u32`, `u64` or `i64`), for a
/// key that takes what `R` says. Anything else (a string, a float, a
/// negative for an unsigned `T`, a number too large for `T`) is refused
/// with serde's words for what it found and, after "expected", `R`'s
/// range in words, never a Rust type's name: `invalid value: integer
/// -1, expected a whole number of seconds from 1 to 31622400 (366 days)`.
pub(super) struct Whole<T, R>(T, PhantomData<R>);

impl<T: Copy, R> Whole<T, R> {
    /// The number.
    pub(super) fn get(&self) -> T {
        self.0
    }
}

impl<'de, T: TryFrom<i128>, R: Takes> Deserialize<'de> for Whole<T, R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Reads any integer TOML holds; serde's defaults refuse the rest,
        /// with [`Visitor::expecting`]'s words.
        struct Number<T, R>(PhantomData<(T, R)>);

        impl<T: TryFrom<i128>, R: Takes> Visitor<'_> for Number<T, R> {
            type Value = Whole<T, R>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "a whole number of {} from {} to {}",
                    R::UNIT,
                    R::MIN,
                    R::max_said()
                )
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
                self.visit_i128(i128::from(value))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
                self.visit_i128(i128::from(value))
            }

            fn visit_i128<E: de::Error>(self, value: i128) -> Result<Self::Value, E> {
                match T::try_from(value) {
                    Ok(number) => Ok(Whole(number, PhantomData)),
                    Err(_) => Err(E::invalid_value(
                        Unexpected::Other(&format!("integer `{value}`")),
                        &self,
                    )),
                }
            }

            fn visit_u128<E: de::Error>(self, value: u128) -> Result<Self::Value, E> {
                match i128::try_from(value) {
                    Ok(value) => self.visit_i128(value),
                    Err(_) => Err(E::invalid_value(
                        Unexpected::Other(&format!("integer `{value}`")),
                        &self,
                    )),
                }
            }
        }

        deserializer.deserialize_i128(Number(PhantomData))
    }
}

/// A key that takes a list (`command`, `detectors`, `when`, ...): a TOML
/// array, whose message for anything else says so in words (`invalid
/// type: string "x", expected a list in brackets, as ["a", "b"]`) rather
/// than serde's "a sequence". It reads as the `Vec` it holds.
#[derive(Debug)]
pub(super) struct List<T>(pub(super) Vec<T>);

impl<T> Default for List<T> {
    fn default() -> List<T> {
        List(Vec::new())
    }
}

impl<'a, T> IntoIterator for &'a List<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<T> std::ops::Deref for List<T> {
    type Target = Vec<T>;

    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> IntoIterator for List<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Items<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<T> {
            type Value = List<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a list in brackets, as ["a", "b"]"#)
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<List<T>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(List(items))
            }
        }

        deserializer.deserialize_seq(Items(PhantomData))
    }
}

/// A key that takes a table of names to values (`env`, `headers`): a TOML
/// table, whose message for anything else says so in words (`invalid
/// type: sequence, expected a table of names to values, as { NAME =
/// "value" }`) rather than serde's "a map". It reads as the `BTreeMap` it
/// holds; a name given twice is TOML's error before it is ours.
#[derive(Debug)]
pub(super) struct Table<V>(pub(super) BTreeMap<String, V>);

impl<V> Default for Table<V> {
    fn default() -> Table<V> {
        Table(BTreeMap::new())
    }
}

impl<V> IntoIterator for Table<V> {
    type Item = (String, V);
    type IntoIter = std::collections::btree_map::IntoIter<String, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Table<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = Table<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a table of names to values, as { NAME = "value" }"#)
            }

            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Table<V>, A::Error> {
                let mut entries = BTreeMap::new();
                while let Some((name, value)) = map.next_entry()? {
                    entries.insert(name, value);
                }
                Ok(Table(entries))
            }
        }

        deserializer.deserialize_map(Entries(PhantomData))
    }
}

/// A `*_secs` key: 1 s to [`defaults::MAX_SECS`].
pub(super) struct Seconds;

impl Takes for Seconds {
    const UNIT: &'static str = "seconds";
    const MIN: u64 = 1;
    const MAX: u64 = defaults::MAX_SECS;

    fn max_said() -> String {
        format!("{} (366 days)", Self::MAX)
    }
}

/// `[auth] clock_skew_secs`: 0 s to [`defaults::MAX_CLOCK_SKEW`].
pub(super) struct SkewSeconds;

impl Takes for SkewSeconds {
    const UNIT: &'static str = "seconds";
    const MIN: u64 = 0;
    const MAX: u64 = defaults::MAX_CLOCK_SKEW.as_secs();
}

/// A size in bytes (`[log] max_bytes`, `[redaction] max_scan_bytes`):
/// from 1 byte, read as an `i64`.
pub(super) struct Bytes;

impl Takes for Bytes {
    const UNIT: &'static str = "bytes";
    const MIN: u64 = 1;
    const MAX: u64 = i64::MAX.unsigned_abs();

    fn max_said() -> String {
        "2^63 - 1".to_owned()
    }
}

/// `[log] checkpoint_every`: from 1 entry, read as an `i64`.
pub(super) struct Entries;

impl Takes for Entries {
    const UNIT: &'static str = "entries";
    const MIN: u64 = 1;
    const MAX: u64 = i64::MAX.unsigned_abs();

    fn max_said() -> String {
        "2^63 - 1".to_owned()
    }
}

/// `[session] max_calls`: 1 to [`defaults::MAX_SESSION_MAX_CALLS`].
pub(super) struct KeptCalls;

impl Takes for KeptCalls {
    const UNIT: &'static str = "calls";
    const MIN: u64 = 1;
    const MAX: u64 = defaults::MAX_SESSION_MAX_CALLS as u64;
}

/// A rule's `count.more_than`: 1 to [`defaults::MAX_COUNT`] (and less
/// than `[session] max_calls`, which the check says).
pub(super) struct EarlierCalls;

impl Takes for EarlierCalls {
    const UNIT: &'static str = "earlier calls";
    const MIN: u64 = 1;
    const MAX: u64 = defaults::MAX_COUNT as u64;
}

/// A `rate_limit` rule's `limit`: from 1 call per window, read as a `u32`.
pub(super) struct WindowCalls;

impl Takes for WindowCalls {
    const UNIT: &'static str = "calls per window";
    const MIN: u64 = 1;
    const MAX: u64 = u32::MAX as u64;

    fn max_said() -> String {
        "2^32 - 1".to_owned()
    }
}

/// `[gateway]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGateway {
    pub(super) replica: Option<Spanned<String>>,
}

/// `[listen]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawListen {
    pub(super) http: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) public: bool,
    #[serde(default)]
    pub(super) allow_origins: List<Spanned<String>>,
    pub(super) admin_http: Option<Spanned<String>>,
}

/// `[admin]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    pub(super) token: Option<Spanned<String>>,
    pub(super) token_env: Option<Spanned<String>>,
    pub(super) secure_cookie: Option<bool>,
}

/// `[approval]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApproval {
    pub(super) webhook: Option<Spanned<String>>,
    pub(super) approver_scope: Option<Spanned<String>>,
    pub(super) client_id: Option<Spanned<String>>,
    pub(super) client_secret_env: Option<Spanned<String>>,
    pub(super) redirect_uri: Option<Spanned<String>>,
    pub(super) page_url: Option<Spanned<String>>,
}

/// One `[[client]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    pub(super) principal: Spanned<String>,
    pub(super) token: Option<Spanned<String>>,
    pub(super) token_env: Option<Spanned<String>>,
}

/// `[auth]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    pub(super) issuer: Spanned<String>,
    pub(super) audience: Spanned<String>,
    pub(super) principal_claim: Option<Spanned<String>>,
    pub(super) clock_skew_secs: Option<Spanned<Whole<u64, SkewSeconds>>>,
    pub(super) scopes: Option<List<Spanned<String>>>,
    pub(super) jwks_max_age_secs: Option<Spanned<Whole<u64, Seconds>>>,
    pub(super) jwks_min_refresh_secs: Option<Spanned<Whole<u64, Seconds>>>,
}

/// `[log]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    pub(super) path: Spanned<String>,
    #[serde(default)]
    pub(super) raw_arguments: bool,
    pub(super) max_bytes: Option<Spanned<Whole<i64, Bytes>>>,
    pub(super) checkpoint_every: Option<Spanned<Whole<i64, Entries>>>,
    pub(super) signing_key: Option<Spanned<String>>,
}

/// `[lock]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLock {
    pub(super) path: Spanned<String>,
    pub(super) deny_drift: Option<bool>,
}

/// `[state]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    pub(super) redis: Option<Spanned<String>>,
    pub(super) prefix: Option<Spanned<String>>,
    pub(super) rate_limit_fallback: Option<Spanned<RateLimitFallback>>,
}

/// `[session]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSession {
    pub(super) idle_secs: Option<Spanned<Whole<u64, Seconds>>>,
    pub(super) max_calls: Option<Spanned<Whole<u32, KeptCalls>>>,
    pub(super) per: Option<Spanned<SessionPer>>,
}

/// A rule's `count`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an inline table `{ of = \"CONDITION\", more_than = N, within_secs = N }`"
)]
pub(super) struct RawCount {
    pub(super) of: Option<Spanned<String>>,
    pub(super) more_than: Spanned<Whole<u32, EarlierCalls>>,
    pub(super) within_secs: Spanned<Whole<u64, Seconds>>,
}

/// `[policy]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) default: Option<DefaultAction>,
}

/// One `[[upstream]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub(super) name: Spanned<String>,
    pub(super) command: Option<Spanned<List<Spanned<String>>>>,
    pub(super) url: Option<Spanned<String>>,
    pub(super) env: Option<Spanned<Table<Spanned<String>>>>,
    pub(super) headers: Option<Spanned<Table<Spanned<String>>>>,
    #[serde(default)]
    pub(super) trusted: bool,
    pub(super) call_timeout_secs: Option<Spanned<Whole<u64, Seconds>>>,
    pub(super) exclude_tools: Option<Spanned<List<Spanned<String>>>>,
}

/// One `[[assert]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAssert {
    pub(super) upstream: Option<Spanned<String>>,
    pub(super) tool: Option<Spanned<String>>,
    #[serde(rename = "readOnlyHint")]
    pub(super) read_only: Option<bool>,
    #[serde(rename = "destructiveHint")]
    pub(super) destructive: Option<bool>,
    #[serde(rename = "idempotentHint")]
    pub(super) idempotent: Option<bool>,
    #[serde(rename = "openWorldHint")]
    pub(super) open_world: Option<bool>,
}

/// A rule's `action`, before the keys each one takes are read.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawAction {
    Deny,
    RequireApproval,
    RateLimit,
    Allow,
}

impl RawAction {
    /// The action's name in the config, for messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            RawAction::Deny => "deny",
            RawAction::RequireApproval => "require_approval",
            RawAction::RateLimit => "rate_limit",
            RawAction::Allow => "allow",
        }
    }
}

/// One `[[rule]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    pub(super) action: Spanned<RawAction>,
    pub(super) upstream: Option<Spanned<String>>,
    pub(super) tool: Option<Spanned<String>>,
    pub(super) principal: Option<Spanned<String>>,
    pub(super) scope: Option<Spanned<String>>,
    pub(super) when: Option<List<Spanned<String>>>,
    pub(super) timeout_secs: Option<Spanned<Whole<u64, Seconds>>>,
    pub(super) on_expiry: Option<Spanned<Expiry>>,
    pub(super) limit: Option<Spanned<Whole<u32, WindowCalls>>>,
    pub(super) window_secs: Option<Spanned<Whole<u64, Seconds>>>,
    pub(super) after: Option<List<Spanned<String>>>,
    pub(super) count: Option<Spanned<RawCount>>,
}

/// `[redaction]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedaction {
    pub(super) max_scan_bytes: Option<Spanned<Whole<i64, Bytes>>>,
}

/// A `[[redact]]`'s `action`.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawRedactAction {
    Mask,
    DenyResult,
}

/// One `[[redact]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedact {
    pub(super) upstream: Option<Spanned<String>>,
    pub(super) tool: Option<Spanned<String>>,
    pub(super) pattern: Option<Spanned<String>>,
    pub(super) detectors: Option<Spanned<List<Spanned<String>>>>,
    pub(super) action: Option<Spanned<RawRedactAction>>,
    pub(super) replacement: Option<Spanned<String>>,
}

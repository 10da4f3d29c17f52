//! The config's tables as serde reads them, before any check: every key a
//! check needs to point at is `Spanned`, and a key that does not belong is
//! refused by `deny_unknown_fields`.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{DefaultAction, RateLimitFallback, SessionPer};
use crate::policy::Expiry;

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
    pub(super) allow_origins: Vec<Spanned<String>>,
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
    pub(super) clock_skew_secs: Option<Spanned<u64>>,
    pub(super) scopes: Option<Vec<Spanned<String>>>,
    pub(super) jwks_max_age_secs: Option<Spanned<u64>>,
    pub(super) jwks_min_refresh_secs: Option<Spanned<u64>>,
}

/// `[log]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    pub(super) path: Spanned<String>,
    #[serde(default)]
    pub(super) raw_arguments: bool,
    pub(super) max_bytes: Option<Spanned<i64>>,
    pub(super) checkpoint_every: Option<Spanned<i64>>,
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
    pub(super) idle_secs: Option<Spanned<u64>>,
    pub(super) max_calls: Option<Spanned<u32>>,
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
    pub(super) more_than: Spanned<u32>,
    pub(super) within_secs: Spanned<u64>,
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
    pub(super) command: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) url: Option<Spanned<String>>,
    pub(super) env: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    pub(super) headers: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    #[serde(default)]
    pub(super) trusted: bool,
    pub(super) call_timeout_secs: Option<Spanned<u64>>,
    pub(super) exclude_tools: Option<Spanned<Vec<Spanned<String>>>>,
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
    pub(super) when: Option<Vec<Spanned<String>>>,
    pub(super) timeout_secs: Option<Spanned<u64>>,
    pub(super) on_expiry: Option<Spanned<Expiry>>,
    pub(super) limit: Option<Spanned<u32>>,
    pub(super) window_secs: Option<Spanned<u64>>,
    pub(super) after: Option<Vec<Spanned<String>>>,
    pub(super) count: Option<Spanned<RawCount>>,
}

/// `[redaction]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedaction {
    pub(super) max_scan_bytes: Option<Spanned<i64>>,
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
    pub(super) detectors: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) action: Option<Spanned<RawRedactAction>>,
    pub(super) replacement: Option<Spanned<String>>,
}

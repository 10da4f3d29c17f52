//! The gateway's config file (TOML): its types, [`load`] and [`parse`].
//!
//! The format is the one in the README's "Gateway" section: `[gateway]`,
//! `[listen]`, `[admin]`, `[approval]`, `[[client]]`, `[auth]`, `[log]`,
//! `[lock]`, `[policy]`, `[state]`, `[session]`, `[[upstream]]`, `[[assert]]`, `[[rule]]`,
//! `[redaction]` and `[[redact]]`. Everything a running gateway could trip over
//! later is checked here, at start, and each problem is named with the file,
//! line and column and the key path (`rule[2].limit`, indices from 0, as in
//! the audit log's rule names), so an operator fixes the file once instead
//! of meeting a refused call hours later.
//!
//! Tables are read one at a time (one `[[rule]]`, one `[listen]`) with
//! serde, so every broken table is reported, not only the first; within one
//! table serde stops at its first problem. Checks that span tables
//! (duplicate upstream names, a rule's upstream glob that matches none) run
//! once every table read.
//!
//! The tables as serde reads them are in `raw`; the checks that turn them
//! into these types are in `validate`; where in the file a problem is
//! (line, column, key path) is worked out in `span`.

mod raw;
mod span;
#[cfg(test)]
mod tests;
mod validate;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use glob::Pattern;
use mcp_hints::Hint;
use serde::Deserialize;

use self::span::position;
pub(crate) use self::validate::is_loopback_host;
use super::policy::Expiry;

/// The defaults of the config file, in one place.
pub mod defaults {
    use std::time::Duration;

    /// `upstream.call_timeout_secs` when not given: the replay-safe
    /// client's own default (30 s).
    pub const CALL_TIMEOUT: Duration = mcp_hints::client::defaults::CALL_TIMEOUT;
    /// A `require_approval` rule's `timeout_secs` when not given: 5 minutes.
    pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);
    /// A token shorter than this is warned of at start: 16 characters.
    pub const MIN_TOKEN_CHARS: usize = 16;
    /// The longest duration any `*_secs` key takes: 366 days. Longer ones
    /// are refused, because a parked call's expiry time must stay
    /// representable (`SystemTime + timeout` panics on overflow).
    pub const MAX_SECS: u64 = 366 * 24 * 60 * 60;
    /// `[redaction] max_scan_bytes` when absent: 1 MiB.
    pub const MAX_SCAN_BYTES: u64 = 1 << 20;
    /// The most characters of an upstream name: 32.
    pub const MAX_UPSTREAM_NAME: usize = 32;
    /// The most characters of a replica name (`[gateway] replica`): 32,
    /// as of an upstream name.
    pub const MAX_REPLICA_NAME: usize = 32;
    /// The replica name when `[gateway] replica` is not given and the host
    /// name gives none (it cannot be read, or has no character of a name
    /// before its first `.`): `gateway`.
    pub const REPLICA: &str = "gateway";
    /// The principal of the stdio client; no `[[client]]` may take it, so
    /// a rule for `local` means the local agent only.
    pub const LOCAL_PRINCIPAL: &str = "local";

    /// How long a parked call's webhook (`[approval] webhook`) may take,
    /// connecting included, before it is given up: 5 seconds.
    pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(5);

    /// `[state] prefix` when absent.
    pub const STATE_PREFIX: &str = "mcp-hints-gateway";

    /// `[auth] principal_claim` when absent: `sub`, the subject (RFC 9068
    /// §2.2).
    pub const PRINCIPAL_CLAIM: &str = "sub";
    /// `[auth] clock_skew_secs` when absent: 60 s, how far the gateway's
    /// clock may be from the issuer's before `exp` and `nbf` (RFC 7519
    /// §4.1.4, §4.1.5) refuse a token.
    pub const CLOCK_SKEW: Duration = Duration::from_secs(60);
    /// The largest `[auth] clock_skew_secs`: 600 s. A larger one would
    /// keep an expired token alive for longer than clocks drift.
    pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(600);
    /// `[auth] jwks_max_age_secs` when absent: 5 minutes, how long the
    /// issuer's keys are used before they are fetched again (so a key the
    /// issuer retired stops verifying within it).
    pub const JWKS_MAX_AGE: Duration = Duration::from_secs(300);
    /// `[session] idle_secs` when absent: 30 minutes, how long a
    /// session's history lasts after its last call (and, for a client
    /// that names no session under 2026-07-28, how long a pause ends its
    /// principal's session).
    pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
    /// `[session] max_calls` when absent: 256, the most calls a session's
    /// history keeps (the oldest go first).
    pub const SESSION_MAX_CALLS: u32 = 256;
    /// The largest `[session] max_calls`: 10,000.
    pub const MAX_SESSION_MAX_CALLS: u32 = 10_000;
    /// The largest `count.more_than` of a rule: one less than the most
    /// calls a history can keep, or the count could never be reached.
    pub const MAX_COUNT: u32 = MAX_SESSION_MAX_CALLS - 1;

    /// `[auth] jwks_min_refresh_secs` when absent: 30 s, the least time
    /// between two fetches of the keys, so that tokens naming unknown keys
    /// cannot make the gateway hammer the issuer.
    pub const JWKS_MIN_REFRESH: Duration = Duration::from_secs(30);
}

/// The whole config file, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `[gateway]`: this gateway among its replicas (all defaults when
    /// absent).
    pub gateway: GatewayConfig,
    /// `[listen]`: where the gateway serves (all defaults when absent).
    pub listen: Listen,
    /// `[admin]`: the admin endpoint's token; `None` when absent.
    pub admin: Option<Admin>,
    /// `[approval]`: who else hears of a parked call (all defaults when
    /// absent).
    pub approval: ApprovalConfig,
    /// `[[client]]`: bearer tokens and the principals they map to, in file
    /// order. Empty: no HTTP client is let in (stdio is principal `local`).
    pub clients: Vec<Client>,
    /// `[auth]`: OAuth 2.1 access tokens from one issuer, beside the
    /// `[[client]]` tokens; `None` when absent (only `[[client]]` tokens).
    pub auth: Option<AuthConfig>,
    /// `[log]`: the audit log (required).
    pub log: LogConfig,
    /// `[lock]`: the drift lock; `None` when absent (no drift check).
    pub lock: Option<LockConfig>,
    /// `[policy]`: what happens when no rule matches.
    pub policy: PolicyConfig,
    /// `[state]`: where the state replicas share lives (in this process
    /// when absent).
    pub state: StateConfig,
    /// `[session]`: how long and how much of each session's history is
    /// kept, for the rules that look back.
    pub session: SessionConfig,
    /// `[[upstream]]`, in file order; names are unique.
    pub upstreams: Vec<UpstreamConfig>,
    /// `[[assert]]`, in file order (a later assert outranks an earlier one).
    pub asserts: Vec<Assert>,
    /// `[[rule]]`, in file order; a rule's index here is its name in
    /// messages and the audit log (`rule[0]`).
    pub rules: Vec<RuleConfig>,
    /// `[redaction]`: limits of the result checks (all defaults when
    /// absent).
    pub redaction: RedactionConfig,
    /// `[[redact]]`, in file order: the checks of results on their way
    /// back ([`crate::redact`]); a rule's index here is its name
    /// (`redact[0]`) in errors and the audit log's `redacted`.
    pub redacts: Vec<RedactConfig>,
    /// The config file, as given to [`load`] or [`parse`].
    pub path: PathBuf,
}

impl Config {
    /// What is valid but probably not what the operator meant, one message
    /// each, to say as an event at start: a `require_approval` rule with no
    /// admin endpoint (its calls can only expire), an HTTP endpoint with no
    /// `[[client]]` (nobody can be let in), a token shorter than
    /// [`defaults::MIN_TOKEN_CHARS`] (guessable), raw arguments logged
    /// beside `[[redact]]` rules (which check results, not arguments), and
    /// a rule's `count.within_secs` longer than `[session] idle_secs` (a
    /// pause of `idle_secs` ends the history, so the window never reaches
    /// back past one).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let tokens = self
            .clients
            .iter()
            .map(|client| (format!("client `{}`", client.principal), &client.token))
            .chain(
                self.admin
                    .iter()
                    .map(|admin| ("the admin".to_owned(), &admin.token)),
            );
        for (whose, token) in tokens {
            let length = token.expose().chars().count();
            if length < defaults::MIN_TOKEN_CHARS {
                warnings.push(format!(
                    "{whose}'s token is shorter than {min} characters ({length}): use at least \
                     {min} random ones (`openssl rand -hex 16`)",
                    min = defaults::MIN_TOKEN_CHARS
                ));
            }
        }
        if self.listen.admin_http.is_none() {
            for (index, rule) in self.rules.iter().enumerate() {
                if let RuleAction::RequireApproval { on_expiry, .. } = rule.action {
                    let then = match on_expiry {
                        Expiry::Deny => "denied",
                        Expiry::Approve => "approved",
                    };
                    warnings.push(format!(
                        "rule[{index}] requires approval, but `listen.admin_http` is not set: \
                         nobody can approve, so its calls wait until they expire, then are {then}"
                    ));
                }
            }
        }
        if self.listen.http.is_some() && self.clients.is_empty() && self.auth.is_none() {
            warnings.push(
                "`listen.http` is set but there is neither a `[[client]]` nor `[auth]`: every HTTP \
                 request gets 401"
                    .to_owned(),
            );
        }
        for (index, rule) in self.rules.iter().enumerate() {
            if let Some(count) = &rule.count
                && count.within > self.session.idle
            {
                warnings.push(format!(
                    "rule[{index}].count.within_secs ({within}) is longer than `[session] \
                     idle_secs` ({idle}): a history ends after {idle} s without a call, so \
                     calls before such a pause are not counted",
                    within = count.within.as_secs(),
                    idle = self.session.idle.as_secs(),
                ));
            }
        }
        if self.log.raw_arguments && !self.redacts.is_empty() {
            warnings.push(
                "`[log] raw_arguments` writes every call's arguments to the audit log as sent, \
                 and `[[redact]]` checks results only: a secret a client sends reaches the log"
                    .to_owned(),
            );
        }
        warnings
    }
}

/// `[gateway]`: which of several gateways serving one config this one is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayConfig {
    /// `replica`: this gateway's name in every audit entry it writes
    /// (`"replica": NAME`), so that the logs of several replicas can be
    /// read together (`mcp-hints gateway log --log A --log B`) and each
    /// entry still says where it was decided. 1 to
    /// [`defaults::MAX_REPLICA_NAME`] of `A-Z a-z 0-9 -`, as an upstream
    /// name. Default: the host name's first label (before any `.`), each
    /// other character made `-` and cut to the length, else
    /// [`defaults::REPLICA`]; two replicas on one host need names given.
    pub replica: String,
}

impl GatewayConfig {
    /// The `[gateway]` of a config that does not give one: the replica
    /// named after the host (see [`replica`](Self::replica)).
    pub fn for_this_host() -> GatewayConfig {
        let host = hostname::get().ok();
        let name = host
            .as_deref()
            .and_then(|host| replica_of_host(&host.to_string_lossy()));
        GatewayConfig {
            replica: name.unwrap_or_else(|| defaults::REPLICA.to_owned()),
        }
    }
}

/// Whether `name` is a name of the config's rule for upstreams and
/// replicas: 1 to `max` of `A-Z a-z 0-9 -`.
pub(crate) fn is_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.chars().count() <= max
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// The replica name of the host named `host`: its first label (a fully
/// qualified name's first label names the machine), every character
/// outside `A-Z a-z 0-9 -` made `-`, without `-` at either end, cut to
/// [`defaults::MAX_REPLICA_NAME`]; `None` when nothing is left.
pub(crate) fn replica_of_host(host: &str) -> Option<String> {
    let label = host.split('.').next().unwrap_or_default();
    let sanitised: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let cut: String = sanitised
        .trim_matches('-')
        .chars()
        .take(defaults::MAX_REPLICA_NAME)
        .collect();
    let name = cut.trim_end_matches('-');
    (!name.is_empty()).then(|| name.to_owned())
}

/// `[listen]`: the gateway's own endpoints.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Listen {
    /// `http`: the streamable HTTP endpoint, served at `http://ADDR/mcp`.
    /// Loopback unless [`public`](Self::public).
    pub http: Option<SocketAddr>,
    /// `public` (default false): lets `http` and `admin_http` be
    /// non-loopback addresses.
    pub public: bool,
    /// `allow_origins` (default none): browser Origins allowed besides the
    /// gateway's own (`scheme://host[:port]`, checked here as
    /// `mcp_hints::wire::HttpGuard::allow_origin` reads them).
    pub allow_origins: Vec<String>,
    /// `admin_http`: the admin endpoint (`/pending`, `/approve/{id}`,
    /// `/deny/{id}`), a listener of its own. Loopback unless
    /// [`public`](Self::public); it requires `[admin]`.
    pub admin_http: Option<SocketAddr>,
}

/// `[admin]`: who may approve and deny parked calls.
#[derive(Clone, Debug, PartialEq)]
pub struct Admin {
    /// From `token`, or the environment variable `token_env` names. Never
    /// the same as a client's token.
    pub token: Secret,
    /// `secure_cookie`: whether the approvals page's session cookie is
    /// `Secure` (sent only over HTTPS). `None` (absent): `Secure` unless
    /// `listen.admin_http` is a loopback address, which the gateway serves
    /// as plain HTTP, where a browser would not keep a `Secure` cookie; a
    /// non-loopback admin endpoint is meant to be reached through a proxy
    /// that speaks TLS. See [`Admin::cookie_is_secure`].
    pub secure_cookie: Option<bool>,
}

impl Admin {
    /// Whether the page's session cookie is `Secure` for an admin
    /// endpoint at `address`: `secure_cookie` when given, else whether
    /// `address` is not loopback.
    pub fn cookie_is_secure(&self, address: SocketAddr) -> bool {
        self.secure_cookie
            .unwrap_or_else(|| !address.ip().is_loopback())
    }
}

/// `[approval]`: parked calls beyond the admin endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalConfig {
    /// `webhook` (an `http://` or `https://` URL): each call parked here is
    /// POSTed there as JSON (`{"id", "tool", "upstream", "principal",
    /// "reason", "expires_at", "page"}`), in the background, within
    /// [`defaults::WEBHOOK_TIMEOUT`]; a webhook that fails is said as an
    /// event and changes nothing. `None` (the default): nobody is told.
    pub webhook: Option<String>,
    /// `page_url` (an `http://` or `https://` URL without a fragment): the
    /// approvals page as approvers reach it, behind a proxy say, which the
    /// webhook links to (with `#call-ID`). `None` (the default): the
    /// admin endpoint's own address, `http://ADMIN/approvals`.
    pub page_url: Option<String>,
    /// `approver_scope` and the page's OAuth client (`client_id`,
    /// `client_secret_env`, `redirect_uri`): approvers may sign in to the
    /// approvals page through the `[auth]` issuer. `None` (the default):
    /// only with the admin token.
    pub sign_in: Option<ApproverSignIn>,
}

/// `[approval]`'s sign-in through the `[auth]` issuer: the approvals page
/// as an OAuth 2.1 client of it (the authorization code grant with PKCE,
/// OAuth 2.1 §4.1), asking for tokens for the `[auth] audience` (RFC
/// 8707) that carry the approver scope. It requires `[auth]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApproverSignIn {
    /// `approver_scope` (required): the scope asked for at the issuer and
    /// required in the access token it gives; one RFC 6749 §3.3 scope
    /// token (`mcp:approve`).
    pub scope: String,
    /// `client_id` (required): the page's client id, registered with the
    /// issuer beforehand with the redirect URI [`redirect_uri`] gives.
    ///
    /// [`redirect_uri`]: Self::redirect_uri
    pub client_id: String,
    /// From the environment variable `client_secret_env` names: the
    /// client's secret, sent with HTTP Basic authentication (RFC 6749
    /// §2.3.1) to the token endpoint. `None`: a public client, which sends
    /// its `client_id` alone (PKCE protects its code).
    pub client_secret: Option<Secret>,
    /// `redirect_uri`: where the issuer sends the approver back, the
    /// admin endpoint's `/sign-in/callback` as the browser reaches it:
    /// `https`, or `http` on a loopback host, without a fragment. `None`
    /// (the default): `http://ADDR/sign-in/callback`, `ADDR` the admin
    /// endpoint's bound address; give it when a proxy stands in front.
    pub redirect_uri: Option<String>,
}

/// `[[client]]`: one bearer token and the principal it maps to.
#[derive(Clone, Debug, PartialEq)]
pub struct Client {
    /// `principal`: the identity rules match (`principal = "alice"`); never
    /// empty, never `local`.
    pub principal: String,
    /// From `token`, or the environment variable `token_env` names; unique
    /// among clients.
    pub token: Secret,
}

/// `[auth]`: the gateway as an OAuth 2.1 resource server (MCP
/// authorization; RFC 9728 for its metadata, RFC 8414 for the issuer's,
/// RFC 9068 for the tokens): an HTTP request whose bearer token is no
/// `[[client]]`'s is let in when it is a JWT the issuer signed for this
/// gateway, its principal read from a claim and its scopes kept for the
/// rules that name one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    /// `issuer` (required): the authorization server's issuer identifier
    /// (RFC 8414 §2), an `https` URL without query or fragment; `http`
    /// only for a loopback host (`127.0.0.1`, `[::1]`, `localhost`), for
    /// tests. Tokens must carry it as `iss`; its metadata must name it.
    pub issuer: String,
    /// `audience` (required): the gateway's resource identifier, the
    /// canonical URL of its MCP endpoint as clients reach it
    /// (`https://gateway.example.com/mcp`): `resource` in its Protected
    /// Resource Metadata, the RFC 8707 `resource` clients ask tokens for,
    /// and the `aud` every token must carry. `https`, or `http` for a
    /// loopback host; no query or fragment.
    pub audience: String,
    /// `principal_claim` (default [`defaults::PRINCIPAL_CLAIM`]): the claim
    /// whose string value is the caller's principal.
    pub principal_claim: String,
    /// `clock_skew_secs` (default [`defaults::CLOCK_SKEW`], at most
    /// [`defaults::MAX_CLOCK_SKEW`]; 0 allowed): the leeway for `exp` and
    /// `nbf`.
    pub clock_skew: Duration,
    /// `scopes` (default none): scopes every token must hold to reach the
    /// endpoint at all; a token without one of them gets 403
    /// `insufficient_scope` (RFC 6750 §3.1).
    pub scopes: Vec<String>,
    /// `jwks_max_age_secs` (default [`defaults::JWKS_MAX_AGE`]): how long
    /// fetched keys are used before they are fetched again.
    pub jwks_max_age: Duration,
    /// `jwks_min_refresh_secs` (default [`defaults::JWKS_MIN_REFRESH`]):
    /// the least time between two fetches of the keys.
    pub jwks_min_refresh: Duration,
}

/// A secret: a token or a header value. Its `Debug` and `Display` print
/// `***`, so it cannot reach a log or an error by accident; [`expose`]
/// gives the value to the one place that sends it.
///
/// [`expose`]: Secret::expose
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for sending it (a header, a comparison elsewhere).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is this secret, in time that does not depend on
    /// where they first differ (`subtle`'s constant-time comparison), so a
    /// client cannot guess a token byte by byte from response times. Only
    /// the length may leak.
    pub fn matches(&self, candidate: &str) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(self.0.as_bytes().ct_eq(candidate.as_bytes()))
    }
}

/// Compares in constant time, as [`Secret::matches`].
impl PartialEq for Secret {
    fn eq(&self, other: &Secret) -> bool {
        self.matches(&other.0)
    }
}

impl Eq for Secret {}

/// Prints `***`, never the value.
impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Prints `***`, never the value.
impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// `[log]`: the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// `path` (required), resolved against the config file's directory.
    pub path: PathBuf,
    /// `raw_arguments` (default false): raw arguments in the log, else only
    /// their SHA-256 digest.
    pub raw_arguments: bool,
    /// `max_bytes` (default none: never rotated): the file is rotated
    /// before a line would take it past this many bytes, 1 to 2^63 - 1
    /// ([`LogOptions::max_bytes`](crate::log::LogOptions::max_bytes)).
    pub max_bytes: Option<u64>,
    /// `checkpoint_every` (default
    /// [`CHECKPOINT_EVERY`](crate::log::CHECKPOINT_EVERY), 1000): a
    /// checkpoint after this many entries, 1 to 2^63 - 1.
    pub checkpoint_every: u64,
    /// `signing_key` (default none: checkpoints unsigned), an Ed25519
    /// private key in PKCS#8 PEM, read when the config is, its path
    /// resolved against the config file's directory.
    pub signing_key: Option<crate::chain::SigningKey>,
}

impl LogConfig {
    /// The writer's options for this table, checkpoints naming `replica`.
    pub fn options(&self, replica: &str) -> crate::log::LogOptions {
        crate::log::LogOptions {
            max_bytes: self.max_bytes,
            checkpoint_every: self.checkpoint_every,
            signing_key: self.signing_key.clone(),
            replica: replica.to_owned(),
        }
    }
}

/// `[lock]`: the approved tool fingerprints (the `mcp-hints pin` format).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockConfig {
    /// `path` (required), resolved against the config file's directory.
    pub path: PathBuf,
    /// `deny_drift` (default true): a tool added or changed since approval
    /// cannot be called until approved.
    pub deny_drift: bool,
}

/// `[state]`: where the gateway keeps what its replicas must agree on
/// (rate-limit windows, parked calls and their decisions, the drift lock's
/// approvals; DESIGN.md, "Shared state and failure").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateConfig {
    /// `redis` (a `redis://` or `rediss://` URL): the state lives in that
    /// Redis, shared by every gateway configured with it and the same
    /// `prefix`. `None` (the default): in this process, for one gateway.
    pub redis: Option<String>,
    /// `prefix` (default [`defaults::STATE_PREFIX`]): the start of every key
    /// the gateway writes, so that several gateways can share one Redis
    /// without sharing state.
    pub prefix: String,
    /// `rate_limit_fallback` (default `deny`): what a rate limit, and a
    /// retry budget, do while Redis cannot be reached.
    pub rate_limit_fallback: RateLimitFallback,
}

/// `[session]`: the history the gateway keeps of each session when a
/// rule looks back (`after`, `count`; [`crate::session`] says what a
/// session is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionConfig {
    /// `idle_secs` (default [`defaults::SESSION_IDLE`]): how long a
    /// session's history lasts after its last call; a principal that names
    /// no session (under 2026-07-28) starts a new one after this long
    /// without a call.
    pub idle: Duration,
    /// `max_calls` (default [`defaults::SESSION_MAX_CALLS`], at most
    /// [`defaults::MAX_SESSION_MAX_CALLS`]): the most calls kept per
    /// session; the oldest go first.
    pub max_calls: u32,
    /// `per` (default `session`): what one history is.
    pub per: SessionPer,
}

/// `[session] per`: what one history covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionPer {
    /// `"session"` (the default): each session its own
    /// ([`crate::session`]: the transport's, else the one the client
    /// names, else the principal's calls within `idle_secs`). A client
    /// that opens, or names, a new session for each call starts each with
    /// no history: this trusts clients to keep their sessions as they are.
    #[default]
    Session,
    /// `"principal"`: every call of a principal, whatever its session, is
    /// one history within `idle_secs`; no client can step out of it.
    Principal,
}

impl Default for SessionConfig {
    fn default() -> SessionConfig {
        SessionConfig {
            idle: defaults::SESSION_IDLE,
            max_calls: defaults::SESSION_MAX_CALLS,
            per: SessionPer::Session,
        }
    }
}

impl SessionConfig {
    /// What a backend keeps of one session.
    pub fn limits(&self) -> crate::session::HistoryLimits {
        crate::session::HistoryLimits {
            max_calls: self.max_calls,
            idle: self.idle,
        }
    }
}

/// `[state] rate_limit_fallback`: a rate limit's decision while the shared
/// state cannot be reached. Either way the audit entry says the decision
/// was degraded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateLimitFallback {
    /// `"deny"` (the default): the call is refused, as rate limited; a
    /// lost response is not resent (the client is told delivery is
    /// unknown).
    #[default]
    Deny,
    /// `"local"`: the limit is counted in this replica alone (so across
    /// N replicas up to N times the limit passes), and a resend drawn on
    /// this replica's own budget, until Redis is back.
    Local,
}

/// `[policy]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyConfig {
    /// `default` (default `allow`): the verdict when no rule matches.
    pub default: DefaultAction,
}

impl Default for PolicyConfig {
    fn default() -> PolicyConfig {
        PolicyConfig {
            default: DefaultAction::Allow,
        }
    }
}

/// `policy.default`: `"allow"` or `"deny"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum DefaultAction {
    /// `"allow"`: a call no rule matches goes on.
    Allow,
    /// `"deny"`: a call no rule matches is refused.
    Deny,
}

/// `[[upstream]]`: one server the gateway forwards to.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamConfig {
    /// `name` (required): `[A-Za-z0-9-]{1,32}`, unique; its tools are
    /// exposed as `NAME__TOOL`.
    pub name: String,
    /// `command` or `url` (exactly one).
    pub transport: UpstreamTransport,
    /// `trusted` (default false): whether its hints may make a lost call
    /// replay-safe (`mcp_hints::policy::Trust`), and let a read-only,
    /// closed-world tool's call go on while its `decided` entry syncs.
    pub trusted: bool,
    /// `call_timeout_secs` (default [`defaults::CALL_TIMEOUT`]), at least
    /// 1 s.
    pub call_timeout: Duration,
    /// `exclude_tools` (default none): globs of the upstream's own tool
    /// names not to serve. A tool matching one is neither listed nor
    /// callable, as if the upstream did not have it: a name that collides
    /// with another of the same upstream's once a client normalises it, a
    /// name too long once namespaced, a tool nobody should call.
    pub exclude_tools: Vec<glob::Pattern>,
}

/// How an upstream is reached.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum UpstreamTransport {
    /// `command = ["PROGRAM", "ARG", ...]` with optional `env`: a stdio
    /// server the gateway starts. A relative `PROGRAM` with a `/` in it is
    /// resolved against the config file's directory; a bare name is looked
    /// up on `PATH` when started.
    Command {
        /// The program, `command[0]`.
        program: String,
        /// `command[1..]`.
        args: Vec<String>,
        /// `env`: variables set for the server, on top of the gateway's own.
        env: BTreeMap<String, String>,
        /// The directory a relative `PROGRAM` (one with a `/`) was resolved
        /// against, made absolute: the config file's directory. `None` for
        /// an absolute program or a bare name. For messages: a program
        /// that is not there is named with it.
        resolved_against: Option<PathBuf>,
    },
    /// `url = "http(s)://..."` with optional `headers`: a streamable HTTP
    /// server.
    Url {
        /// The endpoint, an `http` or `https` URL.
        url: String,
        /// `headers`: sent with every request; values are secrets.
        headers: BTreeMap<String, Secret>,
    },
}

/// `[[assert]]`: hints the operator sets for a tool glob; they outrank the
/// server's.
#[derive(Clone, Debug, PartialEq)]
pub struct Assert {
    /// `upstream` (default `*`): a glob over upstream names.
    pub upstream: Pattern,
    /// `tool` (default `*`): a glob over tool names, the upstream's own or
    /// as clients see them (`UPSTREAM__TOOL`); either matches.
    pub tool: Pattern,
    /// The asserted value of each hint, indexed by `Hint as usize`; `None`
    /// where this assert says nothing. At least one is `Some`.
    pub hints: [Option<bool>; 4],
}

/// `[[rule]]`: a scope and an action.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleConfig {
    /// `action` and the keys only it takes.
    pub action: RuleAction,
    /// `upstream` (default `*`): a glob over upstream names; it matches at
    /// least one configured upstream.
    pub upstream: Pattern,
    /// `tool` (default `*`): a glob over tool names, the upstream's own
    /// (`delete_*`) or as clients see them (`notes__delete_*`); either
    /// matches ([`policy::tool_matches`](super::policy::tool_matches)).
    pub tool: Pattern,
    /// `principal` (default `*`): a glob over principals; without
    /// `[auth]` it matches at least one client's principal or `local`
    /// (with it, a token's principal can be any name).
    pub principal: Pattern,
    /// `scope` (default none): the rule matches only calls whose OAuth
    /// token (`[auth]`) holds this scope. `[[client]]` tokens and stdio
    /// hold no scopes, so a scoped rule never matches them.
    pub scope: Option<String>,
    /// `when` (default none): predicates over the effective hints; all must
    /// hold.
    pub when: Vec<Predicate>,
    /// `after` (default none): conditions on the session's earlier calls;
    /// each must hold of at least one of them
    /// ([`Condition`](crate::session::Condition): `"open_world"`,
    /// `"upstream:web and not read_only"`, `"tool:fetch*"`, `"tainted"`).
    pub after: Vec<crate::session::Condition>,
    /// `count` (default none): `{ of = "destructive", more_than = 3,
    /// within_secs = 60 }`, which holds when the session already made
    /// `more_than` calls meeting `of` in the last `within_secs`.
    pub count: Option<crate::session::CountCondition>,
}

impl RuleConfig {
    /// Whether the rule reads the session's history (`after` or `count`).
    pub fn looks_back(&self) -> bool {
        !self.after.is_empty() || self.count.is_some()
    }
}

/// A rule's action, with the keys each one takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleAction {
    /// `action = "deny"`.
    Deny,
    /// `action = "require_approval"`: the call is parked for an approver.
    RequireApproval {
        /// `timeout_secs` (default [`defaults::APPROVAL_TIMEOUT`]).
        timeout: Duration,
        /// `on_expiry` (default `deny`).
        on_expiry: Expiry,
    },
    /// `action = "rate_limit"`: at most `limit` calls per `window`, per
    /// principal.
    RateLimit {
        /// `limit` (required, at least 1).
        limit: u32,
        /// `window_secs` (required, at least 1).
        window: Duration,
    },
    /// `action = "allow"`.
    Allow,
}

impl RuleAction {
    /// The action's name in the config: `deny`, `require_approval`,
    /// `rate_limit`, `allow`.
    pub fn name(&self) -> &'static str {
        match self {
            RuleAction::Deny => "deny",
            RuleAction::RequireApproval { .. } => "require_approval",
            RuleAction::RateLimit { .. } => "rate_limit",
            RuleAction::Allow => "allow",
        }
    }
}

/// `[redaction]`: what every `[[redact]]` shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedactionConfig {
    /// `max_scan_bytes` (default [`defaults::MAX_SCAN_BYTES`], at least
    /// 1): the most bytes of text a result may hold (its text blocks,
    /// embedded text resources and `structuredContent` strings, summed)
    /// to be scanned. A bigger result of a tool some `[[redact]]` applies
    /// to is withheld, not passed on unscanned (the check fails closed).
    pub max_scan_bytes: u64,
}

impl Default for RedactionConfig {
    fn default() -> RedactionConfig {
        RedactionConfig {
            max_scan_bytes: defaults::MAX_SCAN_BYTES,
        }
    }
}

/// `[[redact]]`: a scope, what to look for in its tools' results, and
/// what to do when it is found ([`crate::redact`] says what is scanned).
#[derive(Clone, Debug, PartialEq)]
pub struct RedactConfig {
    /// `upstream` (default `*`): a glob over upstream names; it matches at
    /// least one configured upstream.
    pub upstream: Pattern,
    /// `tool` (default `*`): a glob over tool names, the upstream's own
    /// (`read*`) or as clients see them (`notes__read*`), as a rule's.
    pub tool: Pattern,
    /// `pattern` or `detectors` (exactly one).
    pub matcher: RedactMatcher,
    /// `action` (default `mask`) and `replacement`.
    pub action: RedactAction,
}

/// What a `[[redact]]` looks for.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RedactMatcher {
    /// `pattern = "REGEX"`: the `regex` crate's syntax (no look-around or
    /// back-references; linear time), at most
    /// [`PATTERN_SIZE_LIMIT`](crate::redact::PATTERN_SIZE_LIMIT) compiled,
    /// not matching the empty string. A group named `secret`, when it has
    /// one, is what is masked.
    Pattern(crate::redact::RedactPattern),
    /// `detectors = ["aws_access_key", ...]`: built-in detectors (at least
    /// one; `secrets` is all of them), in the order given, without
    /// repeats.
    Detectors(Vec<crate::redact::Detector>),
}

/// What a `[[redact]]` does with a result it matched.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedactAction {
    /// `action = "mask"` (the default): each match is replaced, in the
    /// result the client gets, by `replacement` (taken literally) when
    /// given, else `[redacted:NAME]`, NAME the detector's name or
    /// `pattern`.
    Mask {
        /// `replacement`, when given.
        replacement: Option<String>,
    },
    /// `action = "deny_result"`: the result is withheld; the client gets
    /// a tool error saying which rule matched, how often and where.
    DenyResult,
}

/// One `when` predicate: `"destructive"` or `"not read_only"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Predicate {
    /// The hint it reads.
    pub hint: Hint,
    /// The value that makes it hold: false after `not `.
    pub holds: bool,
}

impl Predicate {
    /// The predicate names, in the order of the spec's schema: each
    /// hint's `#[tool]` flag for true (`read_only`, `destructive`, ...).
    pub(crate) const NAMES: [(&'static str, Hint); 4] = [
        Predicate::named(Hint::ReadOnly),
        Predicate::named(Hint::Destructive),
        Predicate::named(Hint::Idempotent),
        Predicate::named(Hint::OpenWorld),
    ];

    const fn named(hint: Hint) -> (&'static str, Hint) {
        match hint.flag(true) {
            Some(flag) => (flag, hint),
            None => panic!("every hint has a flag for true"),
        }
    }

    /// The name of `hint` as a predicate (`read_only`).
    pub(crate) fn name_of(hint: Hint) -> &'static str {
        Predicate::NAMES[hint as usize].0
    }
}

/// `destructive`, `not read_only`: as written in the config.
impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let not = if self.holds { "" } else { "not " };
        write!(f, "{not}{}", Predicate::name_of(self.hint))
    }
}

/// Why a config could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        /// The config file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The file was read but is not a valid config: every problem found,
    /// in file order (at least one).
    Invalid {
        /// The problems.
        problems: Vec<Problem>,
    },
}

/// One line per problem, `gateway.toml:14:1: rule[2].limit: only a
/// rate_limit rule takes a limit`; for an unreadable file, `PATH: cannot
/// read the config: WHY`.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, error } => {
                write!(f, "{}: cannot read the config: {error}", path.display())
            }
            ConfigError::Invalid { problems } => {
                for (index, problem) in problems.iter().enumerate() {
                    if index > 0 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{problem}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// One problem in a config file, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The config file, as given.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The key path, `rule[2].limit` (indices from 0); empty for a TOML
    /// syntax error or a file that is not UTF-8.
    pub key: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// `file:line:col: key: message` (no `key: ` when the key is empty).
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

/// Reads and validates the config at `path`; relative paths in it resolve
/// against `path`'s directory, and `token_env` variables are read from the
/// process environment.
///
/// # Errors
///
/// [`ConfigError::Read`] when the file cannot be read;
/// [`ConfigError::Invalid`] as [`parse`], and with one problem at the first
/// byte that is not UTF-8 (TOML 1.0: "A TOML file must be a valid UTF-8
/// encoded Unicode document"), naming its line, column and byte offset.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let bytes = std::fs::read(path).map_err(|error| ConfigError::Read {
        path: path.to_owned(),
        error,
    })?;
    let text = String::from_utf8(bytes).map_err(|error| not_utf8(path, &error))?;
    parse(&text, path)
}

/// The problem of a config that is not UTF-8: where its first invalid
/// byte is.
fn not_utf8(path: &Path, error: &std::string::FromUtf8Error) -> ConfigError {
    let bytes = error.as_bytes();
    let offset = error.utf8_error().valid_up_to();
    let before = std::str::from_utf8(&bytes[..offset]).unwrap_or_default();
    let (line, column) = position(before, offset);
    let what = match error.utf8_error().error_len() {
        Some(_) => format!("byte 0x{:02X} at byte offset {offset}", bytes[offset]),
        None => format!("the file ends inside a character, at byte offset {offset}"),
    };
    ConfigError::Invalid {
        problems: vec![Problem {
            file: path.to_owned(),
            line,
            column,
            key: String::new(),
            message: format!("not UTF-8 ({what}): a TOML config must be UTF-8 text"),
        }],
    }
}

/// Validates the config `text`, read from `path` (used in messages and to
/// resolve relative paths); `token_env` variables are read from the
/// process environment.
///
/// # Errors
///
/// [`ConfigError::Invalid`] with every problem found: TOML syntax, unknown
/// keys, wrong types, missing required keys, both or neither of `token` /
/// `token_env` and of `command` / `url`, bad globs, unknown `when`
/// predicates, keys that do not fit a rule's action, duplicate or malformed
/// upstream names, a `token_env` variable that is unset, a non-loopback
/// `listen.http` or `listen.admin_http` without `public = true`, zero
/// limits, windows and timeouts, and a `[[redact]]` with both or neither
/// of `pattern` / `detectors`, a pattern that does not compile (the
/// `regex` crate's message on one line), is too big or matches the empty
/// string, an unknown detector (the known ones listed), or an empty
/// `replacement`.
pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
    parse_with_env(text, path, &|name| std::env::var_os(name))
}

/// [`parse`], with the environment given: `env(NAME)` is the variable's
/// value, `None` when unset. Tests use it instead of changing the
/// process's environment, which other threads read.
pub fn parse_with_env(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Config, ConfigError> {
    validate::read(text, path, env).map_err(|problems| ConfigError::Invalid { problems })
}

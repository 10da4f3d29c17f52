//! The gateway's config file (TOML): its types, [`load`] and [`parse`].
//!
//! The format is the one in the README's "Gateway" section: `[listen]`,
//! `[admin]`, `[[client]]`, `[log]`, `[lock]`, `[policy]`, `[[upstream]]`,
//! `[[assert]]` and `[[rule]]`. Everything a running gateway could trip over
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

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use glob::Pattern;
use mcp_hints::Hint;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

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
    /// The most characters of an upstream name: 32.
    pub const MAX_UPSTREAM_NAME: usize = 32;
    /// The principal of the stdio client; no `[[client]]` may take it, so
    /// a rule for `local` means the local agent only.
    pub const LOCAL_PRINCIPAL: &str = "local";
}

/// The whole config file, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `[listen]`: where the gateway serves (all defaults when absent).
    pub listen: Listen,
    /// `[admin]`: the admin endpoint's token; `None` when absent.
    pub admin: Option<Admin>,
    /// `[[client]]`: bearer tokens and the principals they map to, in file
    /// order. Empty: no HTTP client is let in (stdio is principal `local`).
    pub clients: Vec<Client>,
    /// `[log]`: the audit log (required).
    pub log: LogConfig,
    /// `[lock]`: the drift lock; `None` when absent (no drift check).
    pub lock: Option<LockConfig>,
    /// `[policy]`: what happens when no rule matches.
    pub policy: PolicyConfig,
    /// `[[upstream]]`, in file order; names are unique.
    pub upstreams: Vec<UpstreamConfig>,
    /// `[[assert]]`, in file order (a later assert outranks an earlier one).
    pub asserts: Vec<Assert>,
    /// `[[rule]]`, in file order; a rule's index here is its name in
    /// messages and the audit log (`rule[0]`).
    pub rules: Vec<RuleConfig>,
    /// The config file, as given to [`load`] or [`parse`].
    pub path: PathBuf,
}

impl Config {
    /// What is valid but probably not what the operator meant, one message
    /// each, to say on stderr at start: a `require_approval` rule with no
    /// admin endpoint (its calls can only expire), an HTTP endpoint with no
    /// `[[client]]` (nobody can be let in), and a token shorter than
    /// [`defaults::MIN_TOKEN_CHARS`] (guessable).
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
        if self.listen.http.is_some() && self.clients.is_empty() {
            warnings.push(
                "`listen.http` is set but there is no `[[client]]`: every HTTP request gets 401"
                    .to_owned(),
            );
        }
        warnings
    }
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
    /// replay-safe (`mcp_hints::policy::Trust`).
    pub trusted: bool,
    /// `call_timeout_secs` (default [`defaults::CALL_TIMEOUT`]), at least
    /// 1 s.
    pub call_timeout: Duration,
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
    /// `principal` (default `*`): a glob over principals; it matches at
    /// least one client's principal or `local`.
    pub principal: Pattern,
    /// `when` (default none): predicates over the effective hints; all must
    /// hold.
    pub when: Vec<Predicate>,
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
    pub const NAMES: [(&'static str, Hint); 4] = [
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
    pub fn name_of(hint: Hint) -> &'static str {
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
/// `listen.http` or `listen.admin_http` without `public = true`, and zero
/// limits, windows and timeouts.
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
    let mut reader = Reader {
        text,
        file: path.to_owned(),
        dir: path.parent().unwrap_or(Path::new("")).to_owned(),
        env,
        problems: Vec::new(),
    };
    let config = reader.config(path);
    reader
        .problems
        .sort_by_key(|problem| (problem.line, problem.column));
    match config {
        Some(config) if reader.problems.is_empty() => Ok(config),
        _ => Err(ConfigError::Invalid {
            problems: reader.problems,
        }),
    }
}

// The raw tables, as serde reads them: every key a check needs to point at
// is `Spanned`, and a key that does not belong is refused by
// `deny_unknown_fields`.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawListen {
    http: Option<Spanned<String>>,
    #[serde(default)]
    public: bool,
    #[serde(default)]
    allow_origins: Vec<Spanned<String>>,
    admin_http: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdmin {
    token: Option<Spanned<String>>,
    token_env: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    principal: Spanned<String>,
    token: Option<Spanned<String>>,
    token_env: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLog {
    path: Spanned<String>,
    #[serde(default)]
    raw_arguments: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    path: Spanned<String>,
    deny_drift: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    default: Option<DefaultAction>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    name: Spanned<String>,
    command: Option<Spanned<Vec<Spanned<String>>>>,
    url: Option<Spanned<String>>,
    env: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    headers: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    #[serde(default)]
    trusted: bool,
    call_timeout_secs: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAssert {
    upstream: Option<Spanned<String>>,
    tool: Option<Spanned<String>>,
    #[serde(rename = "readOnlyHint")]
    read_only: Option<bool>,
    #[serde(rename = "destructiveHint")]
    destructive: Option<bool>,
    #[serde(rename = "idempotentHint")]
    idempotent: Option<bool>,
    #[serde(rename = "openWorldHint")]
    open_world: Option<bool>,
}

#[derive(Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RawAction {
    Deny,
    RequireApproval,
    RateLimit,
    Allow,
}

impl RawAction {
    fn name(self) -> &'static str {
        match self {
            RawAction::Deny => "deny",
            RawAction::RequireApproval => "require_approval",
            RawAction::RateLimit => "rate_limit",
            RawAction::Allow => "allow",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    action: Spanned<RawAction>,
    upstream: Option<Spanned<String>>,
    tool: Option<Spanned<String>>,
    principal: Option<Spanned<String>>,
    when: Option<Vec<Spanned<String>>>,
    timeout_secs: Option<Spanned<u64>>,
    on_expiry: Option<Spanned<Expiry>>,
    limit: Option<Spanned<u32>>,
    window_secs: Option<Spanned<u64>>,
}

/// The top-level tables: (key, an array of tables?).
const SECTIONS: [(&str, bool); 9] = [
    ("listen", false),
    ("admin", false),
    ("client", true),
    ("log", false),
    ("lock", false),
    ("policy", false),
    ("upstream", true),
    ("assert", true),
    ("rule", true),
];

/// Reads one config, collecting problems.
struct Reader<'a> {
    text: &'a str,
    file: PathBuf,
    dir: PathBuf,
    env: &'a dyn Fn(&str) -> Option<OsString>,
    problems: Vec<Problem>,
}

impl Reader<'_> {
    /// Records a problem at `span` (byte offsets into the text).
    fn at(&mut self, span: Range<usize>, key: impl Into<String>, message: impl Into<String>) {
        let (line, column) = position(self.text, span.start);
        self.problems.push(Problem {
            file: self.file.clone(),
            line,
            column,
            key: key.into(),
            message: message.into(),
        });
    }

    fn config(&mut self, path: &Path) -> Option<Config> {
        let root = match DeTable::parse(self.text) {
            Ok(root) => root,
            Err(error) => {
                let span = error.span().unwrap_or(0..0);
                let message = format!("invalid TOML: {}", error.message().trim_end());
                self.at(span, "", message);
                return None;
            }
        };
        let root_span = root.span();
        let root = root.into_inner();
        for (key, _) in root.iter() {
            let name = key.get_ref().as_ref();
            if !SECTIONS.iter().any(|(section, _)| *section == name) {
                let known: Vec<&str> = SECTIONS.iter().map(|(section, _)| *section).collect();
                let message = format!("unknown table `{name}`{}", suggestion(name, &known));
                self.at(key.span(), name, message);
            }
        }
        let section = |name: &str| {
            root.iter()
                .find(|(key, _)| key.get_ref().as_ref() == name)
                .map(|(_, value)| value)
        };

        let listen = match section("listen") {
            Some(value) => self.table::<RawListen>("listen", value),
            None => Some((
                RawListen {
                    http: None,
                    public: false,
                    allow_origins: Vec::new(),
                    admin_http: None,
                },
                0..0,
            )),
        };
        let admin = section("admin").map(|value| self.table::<RawAdmin>("admin", value));
        let clients = self.array::<RawClient>("client", section("client"));
        let log = match section("log") {
            Some(value) => self.table::<RawLog>("log", value),
            None => {
                self.at(
                    root_span.start..root_span.start,
                    "log",
                    "required, but missing: add a `[log]` table with the audit log's `path`",
                );
                None
            }
        };
        let lock = section("lock").map(|value| self.table::<RawLock>("lock", value));
        let policy = section("policy").map(|value| self.table::<RawPolicy>("policy", value));
        let upstreams = self.array::<RawUpstream>("upstream", section("upstream"));
        let asserts = self.array::<RawAssert>("assert", section("assert"));
        let rules = self.array::<RawRule>("rule", section("rule"));

        let listen = listen.map(|(raw, _)| self.listen(raw));
        let admin = admin.map(|raw| raw.and_then(|(raw, span)| self.admin(raw, span)));
        let clients: Vec<Option<Client>> = clients
            .into_iter()
            .enumerate()
            .map(|(index, raw)| raw.and_then(|(raw, span)| self.client(index, raw, span)))
            .collect();
        let log = log.map(|(raw, _)| LogConfig {
            path: self.resolve(raw.path.get_ref()),
            raw_arguments: raw.raw_arguments,
        });
        let lock = lock.map(|raw| {
            raw.map(|(raw, _)| LockConfig {
                path: self.resolve(raw.path.get_ref()),
                deny_drift: raw.deny_drift.unwrap_or(true),
            })
        });
        let policy = policy.map(|raw| {
            raw.map(|(raw, _)| PolicyConfig {
                default: raw.default.unwrap_or(DefaultAction::Allow),
            })
        });
        // Every name that was read, valid or not: a rule naming an upstream
        // whose own table is broken gets no second, misleading problem.
        let names: Vec<String> = upstreams
            .iter()
            .flatten()
            .map(|(raw, _)| raw.name.get_ref().clone())
            .collect();
        let upstreams: Vec<Option<UpstreamConfig>> = upstreams
            .into_iter()
            .enumerate()
            .map(|(index, raw)| raw.and_then(|(raw, span)| self.upstream(index, raw, span)))
            .collect();
        self.duplicate_upstreams(section("upstream"), &upstreams);
        let asserts: Vec<Option<Assert>> = asserts
            .into_iter()
            .enumerate()
            .map(|(index, raw)| raw.and_then(|(raw, span)| self.assert(index, raw, span, &names)))
            .collect();
        // The clients' principals, and stdio's.
        let principals: Vec<String> = clients
            .iter()
            .flatten()
            .map(|client| client.principal.clone())
            .chain([defaults::LOCAL_PRINCIPAL.to_owned()])
            .collect();
        let rules: Vec<Option<RuleConfig>> = rules
            .into_iter()
            .enumerate()
            .map(|(index, raw)| raw.and_then(|(raw, _)| self.rule(index, raw, &names, &principals)))
            .collect();
        if let (Some(Some((_, Some(span)))), None) = (&listen, &admin) {
            self.at(
                span.clone(),
                "listen.admin_http",
                "the admin endpoint needs an `[admin]` table with its token (`token_env` or \
                 `token`)",
            );
        }
        self.separate_tokens(section("client"), admin.as_ref(), &clients);

        // Every check has run: now any invalid part makes the whole None.
        let (listen, _) = listen??;
        Some(Config {
            listen,
            admin: present(admin)?,
            clients: clients.into_iter().collect::<Option<_>>()?,
            log: log?,
            lock: present(lock)?,
            policy: present(policy)?.unwrap_or_default(),
            upstreams: upstreams.into_iter().collect::<Option<_>>()?,
            asserts: asserts.into_iter().collect::<Option<_>>()?,
            rules: rules.into_iter().collect::<Option<_>>()?,
            path: path.to_owned(),
        })
    }

    /// Reads the table `key` (`[listen]`) with serde: the raw table and the
    /// span of its header, or `None` (a problem recorded).
    fn table<T: DeserializeOwned>(
        &mut self,
        key: &str,
        value: &Spanned<DeValue<'_>>,
    ) -> Option<(T, Range<usize>)> {
        let DeValue::Table(table) = value.get_ref() else {
            let message = format!(
                "expected a table (`[{key}]`), found {}",
                type_name(value.get_ref())
            );
            self.at(value.span(), key, message);
            return None;
        };
        let span = value.span();
        let de = toml::de::Deserializer::from(Spanned::new(span.clone(), table.clone()));
        match T::deserialize(de) {
            Ok(raw) => Some((raw, span)),
            Err(error) => {
                self.serde_problem(key, value, &error);
                None
            }
        }
    }

    /// Reads the array of tables `key` (`[[rule]]`), one table at a time,
    /// so every broken one is reported; an absent array is empty.
    fn array<T: DeserializeOwned>(
        &mut self,
        key: &str,
        value: Option<&Spanned<DeValue<'_>>>,
    ) -> Vec<Option<(T, Range<usize>)>> {
        let Some(value) = value else {
            return Vec::new();
        };
        let DeValue::Array(items) = value.get_ref() else {
            let message = format!(
                "expected an array of tables (`[[{key}]]`), found {}",
                type_name(value.get_ref())
            );
            self.at(value.span(), key, message);
            return vec![None];
        };
        items
            .iter()
            .enumerate()
            .map(|(index, item)| self.table(&format!("{key}[{index}]"), item))
            .collect()
    }

    /// Turns serde's error inside the table at `path` into a problem at the
    /// key it is about.
    fn serde_problem(&mut self, path: &str, value: &Spanned<DeValue<'_>>, error: &toml::de::Error) {
        let span = error.span().unwrap_or(value.span());
        let inner = find_key(value, span.start).unwrap_or_default();
        let key = format!("{path}{inner}");
        let message = error.message().trim_end();
        let (key, message) = if let Some(field) = backticked(message, "missing field ") {
            (format!("{key}.{field}"), "required, but missing".to_owned())
        } else if let Some(field) = backticked(message, "unknown field ") {
            let (listed, suggested) = expected(message, &field);
            (
                key,
                format!("unknown key `{field}`{suggested}; this table takes {listed}"),
            )
        } else if let Some(variant) = backticked(message, "unknown variant ") {
            let (listed, suggested) = expected(message, &variant);
            (
                key,
                format!("unknown value `{variant}`{suggested}; expected one of {listed}"),
            )
        } else {
            (key, message.to_owned())
        };
        self.at(span, key, message);
    }

    /// A path in the config, resolved against the config file's directory.
    fn resolve(&self, path: &str) -> PathBuf {
        self.dir.join(path)
    }

    fn listen(&mut self, raw: RawListen) -> Option<(Listen, Option<Range<usize>>)> {
        let mut ok = true;
        let mut address = |reader: &mut Reader<'_>, key: &str, value: &Spanned<String>| {
            let text = value.get_ref();
            match text.parse::<SocketAddr>() {
                Ok(address) if !address.ip().is_loopback() && !raw.public => {
                    reader.at(
                        value.span(),
                        key,
                        format!(
                            "`{text}` is not a loopback address: set `listen.public = true` to \
                             serve other hosts, or listen on 127.0.0.1"
                        ),
                    );
                    ok = false;
                    None
                }
                Ok(address) => Some(address),
                Err(_) => {
                    reader.at(
                        value.span(),
                        key,
                        format!(
                            "`{text}` is not an IP address and port: write it like \
                             `127.0.0.1:8787` or `[::1]:8787`"
                        ),
                    );
                    ok = false;
                    None
                }
            }
        };
        let http = raw
            .http
            .as_ref()
            .and_then(|value| address(self, "listen.http", value));
        let admin_http = raw
            .admin_http
            .as_ref()
            .and_then(|value| address(self, "listen.admin_http", value));
        if let (Some(http), Some(admin), Some(value)) = (http, admin_http, &raw.admin_http)
            && http == admin
            && http.port() != 0
        {
            self.at(
                value.span(),
                "listen.admin_http",
                format!(
                    "`{http}` is `listen.http` too: the admin endpoint needs a port of its own"
                ),
            );
            ok = false;
        }
        // Checked as the HTTP guard reads them, so a bad one stops the
        // gateway here, named, not when it starts serving.
        let guard = mcp_hints::wire::HttpGuard::for_address(SocketAddr::from(([127, 0, 0, 1], 0)));
        for (index, origin) in raw.allow_origins.iter().enumerate() {
            if guard.clone().allow_origin(origin.get_ref()).is_err() {
                self.at(
                    origin.span(),
                    format!("listen.allow_origins[{index}]"),
                    format!(
                        "`{}` is not an origin: write `scheme://host` or `scheme://host:port`, \
                         without a path",
                        origin.get_ref()
                    ),
                );
                ok = false;
            }
        }
        ok.then(|| {
            (
                Listen {
                    http,
                    public: raw.public,
                    allow_origins: raw
                        .allow_origins
                        .into_iter()
                        .map(Spanned::into_inner)
                        .collect(),
                    admin_http,
                },
                raw.admin_http.map(|value| value.span()),
            )
        })
    }

    /// `token` or `token_env` (exactly one) of the table at `path`.
    fn token(
        &mut self,
        path: &str,
        span: Range<usize>,
        token: Option<Spanned<String>>,
        token_env: Option<Spanned<String>>,
    ) -> Option<Secret> {
        match (token, token_env) {
            (Some(_), Some(env)) => {
                self.at(
                    env.span(),
                    format!("{path}.token_env"),
                    "give either `token` or `token_env`, not both",
                );
                None
            }
            (None, None) => {
                self.at(
                    span,
                    path,
                    "needs a token: give `token_env` (the environment variable that holds it) \
                     or `token`",
                );
                None
            }
            (Some(token), None) if token.get_ref().is_empty() => {
                self.at(token.span(), format!("{path}.token"), "the token is empty");
                None
            }
            (Some(token), None) => match unsendable(token.get_ref()) {
                Some(why) => {
                    self.at(
                        token.span(),
                        format!("{path}.token"),
                        format!("the token {why}"),
                    );
                    None
                }
                None => Some(Secret(token.into_inner())),
            },
            (None, Some(env)) => {
                let name = env.get_ref();
                let key = format!("{path}.token_env");
                match (self.env)(name).map(OsString::into_string) {
                    None => {
                        self.at(
                            env.span(),
                            key,
                            format!("the environment variable `{name}` is not set: export it with the token"),
                        );
                        None
                    }
                    Some(Err(_)) => {
                        self.at(
                            env.span(),
                            key,
                            format!("the environment variable `{name}` is not valid UTF-8"),
                        );
                        None
                    }
                    Some(Ok(value)) if value.is_empty() => {
                        self.at(
                            env.span(),
                            key,
                            format!("the environment variable `{name}` is empty"),
                        );
                        None
                    }
                    Some(Ok(value)) => match unsendable(&value) {
                        Some(why) => {
                            self.at(
                                env.span(),
                                key,
                                format!("the token in the environment variable `{name}` {why}"),
                            );
                            None
                        }
                        None => Some(Secret(value)),
                    },
                }
            }
        }
    }

    fn admin(&mut self, raw: RawAdmin, span: Range<usize>) -> Option<Admin> {
        let token = self.token("admin", span, raw.token, raw.token_env)?;
        Some(Admin { token })
    }

    fn client(&mut self, index: usize, raw: RawClient, span: Range<usize>) -> Option<Client> {
        let path = format!("client[{index}]");
        let principal = raw.principal.get_ref();
        let good = if principal.is_empty() {
            self.at(
                raw.principal.span(),
                format!("{path}.principal"),
                "the principal is empty",
            );
            false
        } else if principal == defaults::LOCAL_PRINCIPAL {
            self.at(
                raw.principal.span(),
                format!("{path}.principal"),
                "`local` is the stdio client's principal: give HTTP clients another name",
            );
            false
        } else {
            true
        };
        let token = self.token(&path, span, raw.token, raw.token_env);
        Some(Client {
            principal: good.then(|| raw.principal.into_inner())?,
            token: token?,
        })
    }

    /// No two clients share a token, and the admin's is none of theirs: a
    /// token names one identity.
    fn separate_tokens(
        &mut self,
        section: Option<&Spanned<DeValue<'_>>>,
        admin: Option<&Option<Admin>>,
        clients: &[Option<Client>],
    ) {
        for (index, client) in clients.iter().enumerate() {
            let Some(client) = client else { continue };
            let span = element_span(section, index);
            let earlier = clients[..index]
                .iter()
                .position(|other| other.as_ref().is_some_and(|o| o.token == client.token));
            if let Some(earlier) = earlier {
                self.at(
                    span.clone(),
                    format!("client[{index}]"),
                    format!(
                        "the same token as client[{earlier}]: each client needs a token of its own"
                    ),
                );
            }
            if let Some(Some(admin)) = admin
                && admin.token == client.token
            {
                self.at(
                    span,
                    format!("client[{index}]"),
                    "the same token as `[admin]`: clients and the admin need separate tokens",
                );
            }
        }
    }

    fn upstream(
        &mut self,
        index: usize,
        raw: RawUpstream,
        span: Range<usize>,
    ) -> Option<UpstreamConfig> {
        let path = format!("upstream[{index}]");
        let mut ok = true;
        let name = raw.name.get_ref();
        let valid_name = !name.is_empty()
            && name.chars().count() <= defaults::MAX_UPSTREAM_NAME
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !valid_name {
            self.at(
                raw.name.span(),
                format!("{path}.name"),
                format!(
                    "`{name}` is not an upstream name: use 1 to 32 of A-Z, a-z, 0-9 and `-` \
                     (tools are exposed as NAME__TOOL, so `_` is not allowed)"
                ),
            );
            ok = false;
        }
        let call_timeout = match &raw.call_timeout_secs {
            Some(secs) => self.seconds(&format!("{path}.call_timeout_secs"), secs),
            None => Some(defaults::CALL_TIMEOUT),
        };
        let transport = match (raw.command, raw.url) {
            (Some(_), Some(url)) => {
                self.at(
                    url.span(),
                    format!("{path}.url"),
                    "give either `command` (a stdio server) or `url` (an HTTP server), not both",
                );
                None
            }
            (None, None) => {
                self.at(
                    span,
                    path.clone(),
                    "needs `command` (a stdio server, `[\"program\", \"arg\"]`) or `url` (a \
                     streamable HTTP server)",
                );
                None
            }
            (Some(command), None) => {
                if let Some(headers) = &raw.headers {
                    self.at(
                        headers.span(),
                        format!("{path}.headers"),
                        "only a `url` upstream takes headers; give a stdio server `env`",
                    );
                    ok = false;
                }
                self.command(&path, command, raw.env)
            }
            (None, Some(url)) => {
                if let Some(env) = &raw.env {
                    self.at(
                        env.span(),
                        format!("{path}.env"),
                        "only a `command` upstream takes env; give an HTTP server `headers`",
                    );
                    ok = false;
                }
                self.url(&path, url, raw.headers)
            }
        };
        let (transport, call_timeout) = (transport?, call_timeout?);
        ok.then(|| UpstreamConfig {
            name: raw.name.into_inner(),
            transport,
            trusted: raw.trusted,
            call_timeout,
        })
    }

    fn command(
        &mut self,
        path: &str,
        command: Spanned<Vec<Spanned<String>>>,
        env: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    ) -> Option<UpstreamTransport> {
        let span = command.span();
        let mut words = command.into_inner().into_iter().map(Spanned::into_inner);
        let program = match words.next() {
            Some(program) if !program.is_empty() => program,
            _ => {
                self.at(
                    span,
                    format!("{path}.command"),
                    "the command is empty: give the program and its arguments, \
                     `[\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]`",
                );
                return None;
            }
        };
        // A bare name is for PATH; a relative path is the operator's file
        // next to the config.
        let (program, resolved_against) =
            if program.contains('/') && Path::new(&program).is_relative() {
                // A config named without a directory: the working one.
                let against = if self.dir.as_os_str().is_empty() {
                    std::env::current_dir().unwrap_or_default()
                } else {
                    std::path::absolute(&self.dir).unwrap_or_else(|_| self.dir.clone())
                };
                (
                    self.resolve(&program).to_string_lossy().into_owned(),
                    Some(against),
                )
            } else {
                (program, None)
            };
        let mut ok = true;
        let mut vars = BTreeMap::new();
        for (name, value) in env.map(Spanned::into_inner).unwrap_or_default() {
            if name.is_empty() || name.contains(['=', '\0']) || value.get_ref().contains('\0') {
                self.at(
                    value.span(),
                    format!("{path}.env.{name}"),
                    "an environment variable's name must be non-empty without `=`, and \
                     neither name nor value may hold a NUL",
                );
                ok = false;
            }
            vars.insert(name, value.into_inner());
        }
        ok.then_some(UpstreamTransport::Command {
            program,
            args: words.collect(),
            env: vars,
            resolved_against,
        })
    }

    fn url(
        &mut self,
        path: &str,
        url: Spanned<String>,
        headers: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    ) -> Option<UpstreamTransport> {
        let mut ok = true;
        match reqwest::Url::parse(url.get_ref()) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => {}
            _ => {
                self.at(
                    url.span(),
                    format!("{path}.url"),
                    format!(
                        "`{}` is not an http or https URL: write it like \
                         `http://127.0.0.1:9000/mcp`",
                        url.get_ref()
                    ),
                );
                ok = false;
            }
        }
        let mut secrets = BTreeMap::new();
        for (name, value) in headers.map(Spanned::into_inner).unwrap_or_default() {
            // RFC 9110: a field name is a token; a value has no control
            // characters but tab. The value is a secret: never quoted.
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !token {
                self.at(
                    value.span(),
                    format!("{path}.headers.{name}"),
                    format!("`{name}` is not a header name: use letters, digits and `-`"),
                );
                ok = false;
            } else if value.get_ref().chars().any(|c| c.is_control() && c != '\t') {
                self.at(
                    value.span(),
                    format!("{path}.headers.{name}"),
                    "the header's value holds a control character (a line break?)",
                );
                ok = false;
            }
            secrets.insert(name, Secret(value.into_inner()));
        }
        ok.then(|| UpstreamTransport::Url {
            url: url.into_inner(),
            headers: secrets,
        })
    }

    /// Upstream names are unique: `NAME__TOOL` must say which server.
    fn duplicate_upstreams(
        &mut self,
        section: Option<&Spanned<DeValue<'_>>>,
        upstreams: &[Option<UpstreamConfig>],
    ) {
        for (index, upstream) in upstreams.iter().enumerate() {
            let Some(upstream) = upstream else { continue };
            let earlier = upstreams[..index]
                .iter()
                .position(|other| other.as_ref().is_some_and(|o| o.name == upstream.name));
            if let Some(earlier) = earlier {
                let span = name_span(section, index).unwrap_or(element_span(section, index));
                self.at(
                    span,
                    format!("upstream[{index}].name"),
                    format!(
                        "`{}` is upstream[{earlier}]'s name too: each upstream needs a name of \
                         its own",
                        upstream.name
                    ),
                );
            }
        }
    }

    /// The glob at `key` (`*` when absent). With `names`, (a noun and the
    /// names it must match at least one of: the upstreams, the
    /// principals), a glob that matches none is an error too: a rule for
    /// nobody never fires, and a `deny` that never fires lets everything
    /// through.
    fn glob(
        &mut self,
        key: &str,
        value: Option<&Spanned<String>>,
        names: Option<(&str, &[String])>,
    ) -> Option<Pattern> {
        let Some(value) = value else {
            return Some(Pattern::new("*").expect("`*` is a glob"));
        };
        match Pattern::new(value.get_ref()) {
            Err(error) => {
                self.at(
                    value.span(),
                    key,
                    format!(
                        "`{}` is not a glob: {} (at character {})",
                        value.get_ref(),
                        error.msg,
                        error.pos
                    ),
                );
                None
            }
            Ok(pattern) => {
                if let Some((noun, names)) = names
                    && !names.is_empty()
                    && !names.iter().any(|name| pattern.matches(name))
                {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    let listed = names
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    self.at(
                        value.span(),
                        key,
                        format!(
                            "`{}` matches no {noun}{}; the {noun}s are {listed}",
                            value.get_ref(),
                            suggestion(value.get_ref(), &names)
                        ),
                    );
                    return None;
                }
                Some(pattern)
            }
        }
    }

    fn assert(
        &mut self,
        index: usize,
        raw: RawAssert,
        span: Range<usize>,
        upstreams: &[String],
    ) -> Option<Assert> {
        let path = format!("assert[{index}]");
        let upstream = self.glob(
            &format!("{path}.upstream"),
            raw.upstream.as_ref(),
            Some(("upstream", upstreams)),
        );
        let tool = self.glob(&format!("{path}.tool"), raw.tool.as_ref(), None);
        let hints = [
            raw.read_only,
            raw.destructive,
            raw.idempotent,
            raw.open_world,
        ];
        if hints.iter().all(Option::is_none) {
            self.at(
                span,
                path,
                "asserts no hint: give at least one of `readOnlyHint`, `destructiveHint`, \
                 `idempotentHint`, `openWorldHint`",
            );
            return None;
        }
        Some(Assert {
            upstream: upstream?,
            tool: tool?,
            hints,
        })
    }

    /// A `*_secs` key: 1 s to [`defaults::MAX_SECS`].
    fn seconds(&mut self, key: &str, secs: &Spanned<u64>) -> Option<Duration> {
        let value = *secs.get_ref();
        if value == 0 {
            self.at(secs.span(), key, "must be at least 1 (seconds)");
            None
        } else if value > defaults::MAX_SECS {
            self.at(
                secs.span(),
                key,
                format!("must be at most {} (366 days)", defaults::MAX_SECS),
            );
            None
        } else {
            Some(Duration::from_secs(value))
        }
    }

    fn rule(
        &mut self,
        index: usize,
        raw: RawRule,
        upstreams: &[String],
        principals: &[String],
    ) -> Option<RuleConfig> {
        let path = format!("rule[{index}]");
        let action = *raw.action.get_ref();
        let mut ok = true;
        // Keys that only one action takes, with the words for the message.
        let only: [(&str, RawAction, &str, Option<Range<usize>>); 4] = [
            (
                "timeout_secs",
                RawAction::RequireApproval,
                "a timeout",
                raw.timeout_secs.as_ref().map(Spanned::span),
            ),
            (
                "on_expiry",
                RawAction::RequireApproval,
                "an expiry decision",
                raw.on_expiry.as_ref().map(Spanned::span),
            ),
            (
                "limit",
                RawAction::RateLimit,
                "a limit",
                raw.limit.as_ref().map(Spanned::span),
            ),
            (
                "window_secs",
                RawAction::RateLimit,
                "a window",
                raw.window_secs.as_ref().map(Spanned::span),
            ),
        ];
        for (key, owner, noun, span) in only {
            if let Some(span) = span
                && owner != action
            {
                self.at(
                    span,
                    format!("{path}.{key}"),
                    format!("only a {} rule takes {noun}", owner.name()),
                );
                ok = false;
            }
        }
        let upstream = self.glob(
            &format!("{path}.upstream"),
            raw.upstream.as_ref(),
            Some(("upstream", upstreams)),
        );
        let tool = self.glob(&format!("{path}.tool"), raw.tool.as_ref(), None);
        let principal = self.glob(
            &format!("{path}.principal"),
            raw.principal.as_ref(),
            Some(("principal", principals)),
        );
        let mut when = Vec::new();
        for (position, text) in raw.when.iter().flatten().enumerate() {
            match predicate(text.get_ref()) {
                Ok(predicate) => when.push(predicate),
                Err(message) => {
                    self.at(text.span(), format!("{path}.when[{position}]"), message);
                    ok = false;
                }
            }
        }
        let action_span = raw.action.span();
        let action = match action {
            RawAction::Deny => Some(RuleAction::Deny),
            RawAction::Allow => Some(RuleAction::Allow),
            RawAction::RequireApproval => {
                let timeout = match &raw.timeout_secs {
                    Some(secs) => self.seconds(&format!("{path}.timeout_secs"), secs),
                    None => Some(defaults::APPROVAL_TIMEOUT),
                };
                timeout.map(|timeout| RuleAction::RequireApproval {
                    timeout,
                    on_expiry: raw
                        .on_expiry
                        .map_or(Expiry::Deny, |expiry| *expiry.get_ref()),
                })
            }
            RawAction::RateLimit => {
                let limit = match &raw.limit {
                    Some(limit) if *limit.get_ref() == 0 => {
                        self.at(
                            limit.span(),
                            format!("{path}.limit"),
                            "must be at least 1 (calls per window); to refuse every call, use \
                             `action = \"deny\"`",
                        );
                        None
                    }
                    Some(limit) => Some(*limit.get_ref()),
                    None => {
                        self.at(
                            action_span.clone(),
                            format!("{path}.limit"),
                            "a rate_limit rule needs a limit (calls per window)",
                        );
                        None
                    }
                };
                let window = match &raw.window_secs {
                    Some(secs) => self.seconds(&format!("{path}.window_secs"), secs),
                    None => {
                        self.at(
                            action_span,
                            format!("{path}.window_secs"),
                            "a rate_limit rule needs a window (`window_secs`)",
                        );
                        None
                    }
                };
                limit
                    .zip(window)
                    .map(|(limit, window)| RuleAction::RateLimit { limit, window })
            }
        };
        let rule = RuleConfig {
            action: action?,
            upstream: upstream?,
            tool: tool?,
            principal: principal?,
            when,
        };
        ok.then_some(rule)
    }
}

/// An optional table: absent (`None`) is `Some(None)`; present and valid
/// is `Some(Some(_))`; present but invalid (a problem recorded) is `None`.
fn present<T>(table: Option<Option<T>>) -> Option<Option<T>> {
    table.map_or(Some(None), |valid| valid.map(Some))
}

/// A `when` predicate: a name from [`Predicate::NAMES`], optionally after
/// `not `.
fn predicate(text: &str) -> Result<Predicate, String> {
    let (holds, name) = match text.strip_prefix("not ") {
        Some(rest) => (false, rest),
        None => (true, text),
    };
    let names: Vec<&str> = Predicate::NAMES.iter().map(|(name, _)| *name).collect();
    match Predicate::NAMES.iter().find(|(known, _)| *known == name) {
        Some((_, hint)) => Ok(Predicate { hint: *hint, holds }),
        None => Err(format!(
            "unknown predicate `{text}`{}; the predicates are `read_only`, `destructive`, \
             `idempotent` and `open_world`, each may follow `not `",
            suggestion(name, &names)
        )),
    }
}

/// ` (did you mean `X`?)` when one of `known` is close to `given`.
fn suggestion(given: &str, known: &[&str]) -> String {
    mcp_hints_core::suggest::closest(given, known.iter().copied())
        .map(|name| format!(" (did you mean `{name}`?)"))
        .unwrap_or_default()
}

/// The first backticked word of `message` after `prefix`, if it starts so.
fn backticked(message: &str, prefix: &str) -> Option<String> {
    let rest = message.strip_prefix(prefix)?.strip_prefix('`')?;
    rest.split_once('`').map(|(word, _)| word.to_owned())
}

/// Every backticked word of `text`.
fn backticked_all(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The key path below `value` (`.limit`, `[1]`) of the deepest key or
/// value whose span holds `offset`; `Some("")` when only `value` itself
/// does. Spans of `[[table]]` elements cover their header only, so every
/// child is searched, not only those inside the parent's span.
fn find_key(value: &Spanned<DeValue<'_>>, offset: usize) -> Option<String> {
    let children: Option<String> = match value.get_ref() {
        DeValue::Table(table) => table.iter().find_map(|(key, child)| {
            let name = key.get_ref().as_ref();
            match find_key(child, offset) {
                Some(rest) => Some(format!(".{name}{rest}")),
                None if key.span().contains(&offset) => Some(format!(".{name}")),
                None => None,
            }
        }),
        DeValue::Array(items) => items.iter().enumerate().find_map(|(index, child)| {
            find_key(child, offset).map(|rest| format!("[{index}]{rest}"))
        }),
        _ => None,
    };
    let span = value.span();
    children.or_else(|| {
        (span.contains(&offset) || (span.is_empty() && span.start == offset)).then(String::new)
    })
}

/// The span of element `index` of an array of tables (its header).
fn element_span(section: Option<&Spanned<DeValue<'_>>>, index: usize) -> Range<usize> {
    section
        .and_then(|value| match value.get_ref() {
            DeValue::Array(items) => items.get(index).map(Spanned::span),
            _ => None,
        })
        .unwrap_or(0..0)
}

/// The span of `name` in element `index` of an array of tables.
fn name_span(section: Option<&Spanned<DeValue<'_>>>, index: usize) -> Option<Range<usize>> {
    match section?.get_ref() {
        DeValue::Array(items) => match items.get(index)?.get_ref() {
            DeValue::Table(table) => table
                .iter()
                .find(|(key, _)| key.get_ref().as_ref() == "name")
                .map(|(_, value)| value.span()),
            _ => None,
        },
        _ => None,
    }
}

/// `a string`, `an integer`: a TOML value's type for messages.
fn type_name(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Why no request can carry `token` as `Authorization: Bearer TOKEN`, as
/// the end of a sentence ("has a space at character 1: ..."); `None` when
/// it is a `b64token` (RFC 6750 §2.1): one or more of
/// `A-Z a-z 0-9 - . _ ~ + /`, then `=` only. A space around it is cut off
/// on the way (RFC 9110 §5.5), a byte that is not visible ASCII cannot be
/// read as header text, and clients and proxies may refuse or change any
/// other character. The token's characters are never quoted: it is a
/// secret.
fn unsendable(token: &str) -> Option<String> {
    let padding = token.len() - token.trim_end_matches('=').len();
    let body = token.len() - padding;
    if body == 0 {
        return Some("is only `=`: a bearer token needs a character before its padding".to_owned());
    }
    let (at, character) = token
        .char_indices()
        .enumerate()
        .find(|&(_, (offset, character))| {
            let allowed = character.is_ascii_alphanumeric() || "-._~+/".contains(character);
            offset < body && !allowed
        })
        .map(|(index, (_, character))| (index + 1, character))?;
    let what = match character {
        ' ' | '\t' => "a space",
        '=' => "`=` before its end",
        character if character.is_ascii_control() => "a control character",
        character if !character.is_ascii() => "a character that is not ASCII",
        _ => "a punctuation character outside `- . _ ~ + /`",
    };
    Some(format!(
        "has {what} at character {at}: a bearer token is A-Z, a-z, 0-9 and `- . _ ~ + /`, \
         then `=` only at its end (RFC 6750 §2.1), or no request can carry it"
    ))
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |newline| newline + 1);
    (line, before[start..].chars().count() + 1)
}

/// What serde's `message` lists after "expected", as `` `a`, `b` ``, and
/// a " (did you mean `a`?)" for `got` among them (or nothing).
fn expected(message: &str, got: &str) -> (String, String) {
    let names = backticked_all(message.split_once("expected").map_or("", |(_, e)| e));
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let listed = names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    (listed, suggestion(got, &names))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "[log]\npath = \"audit.jsonl\"\n";

    fn env(name: &str) -> Option<OsString> {
        match name {
            "ALICE_TOKEN" => Some("alice-secret".into()),
            "BOB_TOKEN" => Some("bob-secret".into()),
            "ADMIN_TOKEN" => Some("admin-secret".into()),
            "EMPTY" => Some(OsString::new()),
            "PADDED_TOKEN" => Some(" padded-secret-token\n".into()),
            _ => None,
        }
    }

    fn read(text: &str) -> Result<Config, ConfigError> {
        parse_with_env(text, Path::new("/etc/gw/gateway.toml"), &env)
    }

    /// The problems of `text`, one string each.
    fn problems(text: &str) -> Vec<String> {
        match read(text) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(ConfigError::Invalid { problems }) => {
                problems.iter().map(ToString::to_string).collect()
            }
            Err(other) => panic!("{other}"),
        }
    }

    /// The one problem of `text`.
    fn problem(text: &str) -> String {
        let mut all = problems(text);
        assert_eq!(all.len(), 1, "{all:#?}");
        all.remove(0)
    }

    const UPSTREAMS: &str = "[[upstream]]\nname = \"memory\"\ncommand = [\"npx\", \"-y\", \"m\"]\n\n\
                             [[upstream]]\nname = \"web\"\nurl = \"http://127.0.0.1:9000/mcp\"\n";

    #[test]
    fn the_spec_example_reads_whole() {
        let text = r#"
[listen]
http = "127.0.0.1:8787"
public = false
allow_origins = ["https://app.example.com"]
admin_http = "127.0.0.1:8788"

[admin]
token_env = "ADMIN_TOKEN"

[[client]]
principal = "alice"
token_env = "ALICE_TOKEN"

[[client]]
principal = "bob"
token = "literal-bob"

[log]
path = "gateway-audit.jsonl"
raw_arguments = true

[lock]
path = "gateway.lock"

[policy]
default = "deny"

[[upstream]]
name = "memory"
command = ["npx", "-y", "@modelcontextprotocol/server-memory"]
env = { MEMORY_FILE_PATH = "/tmp/m.jsonl" }
trusted = true
call_timeout_secs = 10

[[upstream]]
name = "web"
url = "http://127.0.0.1:9000/mcp"
headers = { Authorization = "Bearer x" }

[[assert]]
upstream = "memory"
tool = "*delete*"
destructiveHint = true
readOnlyHint = false

[[rule]]
action = "deny"
tool = "delete_*"
when = ["destructive", "not read_only"]
principal = "bob"

[[rule]]
action = "require_approval"
timeout_secs = 60
on_expiry = "approve"

[[rule]]
action = "rate_limit"
upstream = "w*"
limit = 10
window_secs = 60

[[rule]]
action = "allow"
"#;
        let config = read(text).unwrap();
        assert_eq!(
            config.listen,
            Listen {
                http: Some("127.0.0.1:8787".parse().unwrap()),
                public: false,
                allow_origins: vec!["https://app.example.com".to_owned()],
                admin_http: Some("127.0.0.1:8788".parse().unwrap()),
            }
        );
        assert_eq!(config.admin.unwrap().token.expose(), "admin-secret");
        assert_eq!(config.clients.len(), 2);
        assert_eq!(config.clients[0].principal, "alice");
        assert_eq!(config.clients[0].token.expose(), "alice-secret");
        assert_eq!(config.clients[1].token.expose(), "literal-bob");
        assert_eq!(
            config.log,
            LogConfig {
                path: PathBuf::from("/etc/gw/gateway-audit.jsonl"),
                raw_arguments: true
            }
        );
        assert_eq!(
            config.lock,
            Some(LockConfig {
                path: PathBuf::from("/etc/gw/gateway.lock"),
                deny_drift: true
            })
        );
        assert_eq!(config.policy.default, DefaultAction::Deny);
        assert_eq!(
            config.upstreams[0],
            UpstreamConfig {
                name: "memory".to_owned(),
                transport: UpstreamTransport::Command {
                    program: "npx".to_owned(),
                    args: vec![
                        "-y".to_owned(),
                        "@modelcontextprotocol/server-memory".to_owned()
                    ],
                    env: BTreeMap::from([(
                        "MEMORY_FILE_PATH".to_owned(),
                        "/tmp/m.jsonl".to_owned()
                    )]),
                    resolved_against: None,
                },
                trusted: true,
                call_timeout: Duration::from_secs(10),
            }
        );
        let UpstreamTransport::Url { url, headers } = &config.upstreams[1].transport else {
            panic!("{:?}", config.upstreams[1]);
        };
        assert_eq!(url, "http://127.0.0.1:9000/mcp");
        assert_eq!(headers["Authorization"].expose(), "Bearer x");
        assert!(!config.upstreams[1].trusted);
        assert_eq!(config.upstreams[1].call_timeout, defaults::CALL_TIMEOUT);
        assert_eq!(config.asserts[0].upstream.as_str(), "memory");
        assert_eq!(config.asserts[0].tool.as_str(), "*delete*");
        assert_eq!(
            config.asserts[0].hints,
            [Some(false), Some(true), None, None]
        );
        let rules = &config.rules;
        assert_eq!(rules[0].action, RuleAction::Deny);
        assert_eq!(rules[0].upstream.as_str(), "*");
        assert_eq!(rules[0].tool.as_str(), "delete_*");
        assert_eq!(rules[0].principal.as_str(), "bob");
        assert_eq!(
            rules[0].when,
            vec![
                Predicate {
                    hint: Hint::Destructive,
                    holds: true
                },
                Predicate {
                    hint: Hint::ReadOnly,
                    holds: false
                },
            ]
        );
        assert_eq!(
            rules[1].action,
            RuleAction::RequireApproval {
                timeout: Duration::from_secs(60),
                on_expiry: Expiry::Approve
            }
        );
        assert_eq!(
            rules[2].action,
            RuleAction::RateLimit {
                limit: 10,
                window: Duration::from_secs(60)
            }
        );
        assert_eq!(rules[3].action, RuleAction::Allow);
        assert_eq!(config.path, PathBuf::from("/etc/gw/gateway.toml"));
    }

    #[test]
    fn defaults_when_nothing_else_is_given() {
        let config = read(&format!(
            "{LOG}[[rule]]\naction = \"require_approval\"\n[lock]\npath = \"l\"\ndeny_drift = false\n"
        ))
        .unwrap();
        assert_eq!(config.listen, Listen::default());
        assert_eq!(config.admin, None);
        assert!(config.clients.is_empty() && config.upstreams.is_empty());
        assert!(!config.log.raw_arguments);
        assert!(!config.lock.unwrap().deny_drift);
        assert_eq!(config.policy.default, DefaultAction::Allow);
        assert_eq!(
            config.rules[0].action,
            RuleAction::RequireApproval {
                timeout: defaults::APPROVAL_TIMEOUT,
                on_expiry: Expiry::Deny
            }
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_config_directory() {
        let text = format!(
            "{LOG}[lock]\npath = \"../locks/g.lock\"\n[[upstream]]\nname = \"a\"\n\
             command = [\"./bin/server\", \"./data\"]\n[[upstream]]\nname = \"b\"\n\
             command = [\"/usr/bin/python3\"]\n[[upstream]]\nname = \"c\"\ncommand = [\"python3\"]\n"
        );
        let config = read(&text).unwrap();
        assert_eq!(config.log.path, PathBuf::from("/etc/gw/audit.jsonl"));
        assert_eq!(
            config.lock.unwrap().path,
            PathBuf::from("/etc/gw/../locks/g.lock")
        );
        let programs: Vec<(&str, &[String])> = config
            .upstreams
            .iter()
            .map(|upstream| match &upstream.transport {
                UpstreamTransport::Command { program, args, .. } => {
                    (program.as_str(), args.as_slice())
                }
                other => panic!("{other:?}"),
            })
            .collect();
        // Arguments are the server's business: left as written.
        assert_eq!(
            programs[0],
            ("/etc/gw/./bin/server", &["./data".to_owned()][..])
        );
        assert_eq!(programs[1].0, "/usr/bin/python3");
        assert_eq!(programs[2].0, "python3");
        // A config named without a directory keeps paths relative to the
        // working directory.
        let config = parse_with_env(LOG, Path::new("gateway.toml"), &env).unwrap();
        assert_eq!(config.log.path, PathBuf::from("audit.jsonl"));
    }

    #[test]
    fn toml_syntax_errors_name_line_and_column() {
        assert_eq!(
            problem("[log]\npath = \"x\n"),
            "/etc/gw/gateway.toml:2:10: invalid TOML: invalid basic string, expected `\"`"
        );
    }

    #[test]
    fn unknown_keys_are_named_with_a_suggestion() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"deny\"\n\n[[rule]]\naction = \"deny\"\ntol = \"x\"\n"
            )),
            "/etc/gw/gateway.toml:8:1: rule[1].tol: unknown key `tol` (did you mean `tool`?); \
             this table takes `action`, `upstream`, `tool`, `principal`, `when`, `timeout_secs`, \
             `on_expiry`, `limit`, `window_secs`"
        );
        assert_eq!(
            problem(
                "[listen]\nhttp = \"127.0.0.1:0\"\nbogus = 1\n\n[log]\npath = \"audit.jsonl\"\n"
            ),
            "/etc/gw/gateway.toml:3:1: listen.bogus: unknown key `bogus`; this table takes \
             `http`, `public`, `allow_origins`, `admin_http`"
        );
        assert_eq!(
            problem(&format!("{LOG}[[rules]]\naction = \"deny\"\n")),
            "/etc/gw/gateway.toml:3:3: rules: unknown table `rules` (did you mean `rule`?)"
        );
    }

    #[test]
    fn every_broken_table_is_reported() {
        assert_eq!(
            problems(&format!(
                "{LOG}[[rule]]\naction = \"deny\"\nlimit = 3\n\n[[rule]]\naction = \"dney\"\n\n\
                 [[upstream]]\nname = \"a_b\"\ncommand = [\"x\"]\n"
            )),
            [
                "/etc/gw/gateway.toml:5:9: rule[0].limit: only a rate_limit rule takes a limit",
                "/etc/gw/gateway.toml:8:10: rule[1].action: unknown value `dney` (did you mean \
                 `deny`?); expected one of `deny`, `require_approval`, `rate_limit`, `allow`",
                "/etc/gw/gateway.toml:11:8: upstream[0].name: `a_b` is not an upstream name: use 1 \
                 to 32 of A-Z, a-z, 0-9 and `-` (tools are exposed as NAME__TOOL, so `_` is not \
                 allowed)",
            ]
        );
    }

    #[test]
    fn wrong_types_are_named() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"rate_limit\"\nlimit = \"3\"\nwindow_secs = 1\n"
            )),
            "/etc/gw/gateway.toml:5:9: rule[0].limit: invalid type: string \"3\", expected u32"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"allow\"\nwhen = [\"destructive\", 3]\n"
            )),
            "/etc/gw/gateway.toml:5:24: rule[0].when[1]: invalid type: integer `3`, expected a string"
        );
        assert_eq!(
            problem(&format!("rule = 3\n{LOG}")),
            "/etc/gw/gateway.toml:1:8: rule: expected an array of tables (`[[rule]]`), found an integer"
        );
        assert_eq!(
            problem("[[log]]\npath = \"x\"\n"),
            "/etc/gw/gateway.toml:1:1: log: expected a table (`[log]`), found an array"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"rate_limit\"\nlimit = -1\nwindow_secs = 1\n"
            )),
            "/etc/gw/gateway.toml:5:9: rule[0].limit: invalid value: integer `-1`, expected u32"
        );
    }

    #[test]
    fn missing_required_keys_are_named() {
        assert_eq!(
            problem("[listen]\n"),
            "/etc/gw/gateway.toml:1:1: log: required, but missing: add a `[log]` table with the \
             audit log's `path`"
        );
        assert_eq!(
            problem("[log]\nraw_arguments = true\n"),
            "/etc/gw/gateway.toml:1:1: log.path: required, but missing"
        );
        assert_eq!(
            problem(&format!("{LOG}\n[[rule]]\ntool = \"x\"\n")),
            "/etc/gw/gateway.toml:4:1: rule[0].action: required, but missing"
        );
        assert_eq!(
            problems(&format!("{LOG}[[rule]]\naction = \"rate_limit\"\n")),
            [
                "/etc/gw/gateway.toml:4:10: rule[0].limit: a rate_limit rule needs a limit (calls \
                 per window)",
                "/etc/gw/gateway.toml:4:10: rule[0].window_secs: a rate_limit rule needs a window \
                 (`window_secs`)",
            ]
        );
        assert_eq!(
            problem(&format!("{LOG}[[upstream]]\ncommand = [\"x\"]\n")),
            "/etc/gw/gateway.toml:3:1: upstream[0].name: required, but missing"
        );
        assert_eq!(
            problem(&format!("{LOG}[[client]]\ntoken = \"t\"\n")),
            "/etc/gw/gateway.toml:3:1: client[0].principal: required, but missing"
        );
    }

    #[test]
    fn tokens_need_exactly_one_of_token_and_token_env() {
        assert_eq!(
            problem(&format!(
                "{LOG}[admin]\ntoken = \"t\"\ntoken_env = \"ADMIN_TOKEN\"\n"
            )),
            "/etc/gw/gateway.toml:5:13: admin.token_env: give either `token` or `token_env`, not both"
        );
        assert_eq!(
            problem(&format!("{LOG}[[client]]\nprincipal = \"alice\"\n")),
            "/etc/gw/gateway.toml:3:1: client[0]: needs a token: give `token_env` (the \
             environment variable that holds it) or `token`"
        );
        assert_eq!(
            problem(&format!("{LOG}[admin]\ntoken = \"\"\n")),
            "/etc/gw/gateway.toml:4:9: admin.token: the token is empty"
        );
    }

    #[test]
    fn a_token_no_request_can_carry_is_refused_without_quoting_it() {
        let rule = "a bearer token is A-Z, a-z, 0-9 and `- . _ ~ + /`, then `=` only at its \
                    end (RFC 6750 §2.1), or no request can carry it";
        let client = |token: &str| {
            problem(&format!(
                "{LOG}[[client]]\nprincipal = \"alice\"\ntoken = \"{token}\"\n"
            ))
        };
        for (token, what) in [
            (" alice-secret-token", "a space at character 1"),
            ("alice-secret-token ", "a space at character 19"),
            ("alice\\tsecret", "a space at character 6"),
            (
                "naïve-secret-token",
                "a character that is not ASCII at character 3",
            ),
            ("alice\\u0001secret", "a control character at character 6"),
            ("alice=secret", "`=` before its end at character 6"),
            (
                "alice:secret",
                "a punctuation character outside `- . _ ~ + /` at character 6",
            ),
            (
                "\\\"alice\\\"",
                "a punctuation character outside `- . _ ~ + /` at character 1",
            ),
        ] {
            let shown = client(token);
            assert_eq!(
                shown,
                format!("/etc/gw/gateway.toml:5:9: client[0].token: the token has {what}: {rule}"),
                "{token}"
            );
            assert!(!shown.contains("secret"), "{shown}");
        }
        assert_eq!(
            client("=="),
            "/etc/gw/gateway.toml:5:9: client[0].token: the token is only `=`: a bearer token \
             needs a character before its padding"
        );
        // The admin's, and one from the environment, alike.
        assert_eq!(
            problem(&format!("{LOG}[admin]\ntoken_env = \"PADDED_TOKEN\"\n")),
            format!(
                "/etc/gw/gateway.toml:4:13: admin.token_env: the token in the environment \
                 variable `PADDED_TOKEN` has a space at character 1: {rule}"
            )
        );
        // Every character RFC 6750 allows, and padding.
        let config = read(&format!(
            "{LOG}[[client]]\nprincipal = \"alice\"\ntoken = \"Az09-._~+/alice-secret==\"\n"
        ))
        .unwrap();
        assert_eq!(config.clients[0].token.expose(), "Az09-._~+/alice-secret==");
    }

    #[test]
    fn a_config_that_is_not_utf8_names_the_first_bad_byte() {
        let path = Path::new("/etc/gw/gateway.toml");
        let shown = |bytes: &[u8]| {
            not_utf8(path, &String::from_utf8(bytes.to_vec()).unwrap_err()).to_string()
        };
        assert_eq!(
            shown(b"[log]\npath = \"audit.jsonl\"\n# caf\xe9 \xff\n"),
            "/etc/gw/gateway.toml:3:6: not UTF-8 (byte 0xE9 at byte offset 32): a TOML config \
             must be UTF-8 text"
        );
        // Columns count characters: `é` before the bad byte is one.
        assert_eq!(
            shown(
                "# é"
                    .as_bytes()
                    .iter()
                    .chain(b"\x80")
                    .copied()
                    .collect::<Vec<_>>()
                    .as_slice()
            ),
            "/etc/gw/gateway.toml:1:4: not UTF-8 (byte 0x80 at byte offset 4): a TOML config \
             must be UTF-8 text"
        );
        assert_eq!(
            shown(b"[log]\n\xe2\x82"),
            "/etc/gw/gateway.toml:2:1: not UTF-8 (the file ends inside a character, at byte \
             offset 6): a TOML config must be UTF-8 text"
        );
    }

    #[test]
    fn an_unset_token_env_names_the_variable_never_a_token() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[client]]\nprincipal = \"alice\"\ntoken_env = \"CAROL_TOKEN\"\n"
            )),
            "/etc/gw/gateway.toml:5:13: client[0].token_env: the environment variable \
             `CAROL_TOKEN` is not set: export it with the token"
        );
        assert_eq!(
            problem(&format!("{LOG}[admin]\ntoken_env = \"EMPTY\"\n")),
            "/etc/gw/gateway.toml:4:13: admin.token_env: the environment variable `EMPTY` is empty"
        );
        // A client whose token is the admin's, or another client's: the
        // message names the tables, not the secret.
        let shared = problems(&format!(
            "{LOG}[admin]\ntoken_env = \"ADMIN_TOKEN\"\n[[client]]\nprincipal = \"a\"\n\
             token = \"admin-secret\"\n[[client]]\nprincipal = \"b\"\ntoken_env = \"ADMIN_TOKEN\"\n"
        ));
        assert_eq!(
            shared,
            [
                "/etc/gw/gateway.toml:5:1: client[0]: the same token as `[admin]`: clients and the \
                 admin need separate tokens",
                "/etc/gw/gateway.toml:8:1: client[1]: the same token as client[0]: each client \
                 needs a token of its own",
                "/etc/gw/gateway.toml:8:1: client[1]: the same token as `[admin]`: clients and the \
                 admin need separate tokens",
            ]
        );
        assert!(shared.iter().all(|line| !line.contains("admin-secret")));
    }

    #[test]
    fn principals_are_named_and_not_local() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[client]]\nprincipal = \"local\"\ntoken = \"t\"\n"
            )),
            "/etc/gw/gateway.toml:4:13: client[0].principal: `local` is the stdio client's \
             principal: give HTTP clients another name"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[client]]\nprincipal = \"\"\ntoken = \"t\"\n"
            )),
            "/etc/gw/gateway.toml:4:13: client[0].principal: the principal is empty"
        );
    }

    #[test]
    fn secrets_print_as_stars_and_compare_in_full() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret} {secret:?}"), "*** ***");
        assert!(secret.matches("hunter2"));
        assert!(!secret.matches("hunter3"));
        assert!(!secret.matches("hunter"));
        assert!(!secret.matches("hunter22"));
        assert!(!secret.matches(""));
        // A whole config's Debug holds no token or header value.
        let config = read(&format!(
            "{LOG}[admin]\ntoken = \"adm1n\"\n[[upstream]]\nname = \"w\"\nurl = \"https://x/mcp\"\n\
             headers = {{ Authorization = \"Bearer s3cr3t\" }}\n"
        ))
        .unwrap();
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("adm1n") && !debug.contains("s3cr3t"),
            "{debug}"
        );
    }

    #[test]
    fn upstreams_need_exactly_one_of_command_and_url() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\nurl = \"http://h/mcp\"\n"
            )),
            "/etc/gw/gateway.toml:6:7: upstream[0].url: give either `command` (a stdio server) or \
             `url` (an HTTP server), not both"
        );
        assert_eq!(
            problem(&format!("{LOG}[[upstream]]\nname = \"a\"\n")),
            "/etc/gw/gateway.toml:3:1: upstream[0]: needs `command` (a stdio server, \
             `[\"program\", \"arg\"]`) or `url` (a streamable HTTP server)"
        );
        assert_eq!(
            problem(&format!("{LOG}[[upstream]]\nname = \"a\"\ncommand = []\n")),
            "/etc/gw/gateway.toml:5:11: upstream[0].command: the command is empty: give the program \
             and its arguments, `[\"npx\", \"-y\", \"@modelcontextprotocol/server-memory\"]`"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"a\"\nurl = \"ftp://h/mcp\"\n"
            )),
            "/etc/gw/gateway.toml:5:7: upstream[0].url: `ftp://h/mcp` is not an http or https URL: \
             write it like `http://127.0.0.1:9000/mcp`"
        );
    }

    #[test]
    fn transport_keys_fit_their_transport() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\nheaders = {{ A = \"b\" }}\n"
            )),
            "/etc/gw/gateway.toml:6:11: upstream[0].headers: only a `url` upstream takes headers; \
             give a stdio server `env`"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\nenv = {{ A = \"b\" }}\n"
            )),
            "/etc/gw/gateway.toml:6:7: upstream[0].env: only a `command` upstream takes env; give \
             an HTTP server `headers`"
        );
        // A header value is a secret: a bad one is not quoted.
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\nheaders = {{ X = \"s3cr3t\\n\" }}\n"
            )),
            "/etc/gw/gateway.toml:6:17: upstream[0].headers.X: the header's value holds a control \
             character (a line break?)"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\nheaders = {{ \"A B\" = \"v\" }}\n"
            )),
            "/etc/gw/gateway.toml:6:21: upstream[0].headers.A B: `A B` is not a header name: use \
             letters, digits and `-`"
        );
    }

    #[test]
    fn upstream_names_are_checked_and_unique() {
        let long = "a".repeat(33);
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"{long}\"\ncommand = [\"x\"]\n"
            )),
            format!(
                "/etc/gw/gateway.toml:4:8: upstream[0].name: `{long}` is not an upstream name: use 1 \
                 to 32 of A-Z, a-z, 0-9 and `-` (tools are exposed as NAME__TOOL, so `_` is not \
                 allowed)"
            )
        );
        assert!(
            read(&format!(
                "{LOG}[[upstream]]\nname = \"{}\"\ncommand = [\"x\"]\n",
                "a-Z9".repeat(8)
            ))
            .is_ok()
        );
        assert_eq!(
            problem(&format!(
                "{LOG}{UPSTREAMS}\n[[upstream]]\nname = \"memory\"\ncommand = [\"y\"]\n"
            )),
            "/etc/gw/gateway.toml:12:8: upstream[2].name: `memory` is upstream[0]'s name too: each \
             upstream needs a name of its own"
        );
    }

    #[test]
    fn bad_globs_are_named() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"deny\"\ntool = \"[delete\"\n"
            )),
            "/etc/gw/gateway.toml:5:8: rule[0].tool: `[delete` is not a glob: invalid range \
             pattern (at character 0)"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[assert]]\ntool = \"***\"\nreadOnlyHint = true\n"
            )),
            "/etc/gw/gateway.toml:4:8: assert[0].tool: `***` is not a glob: wildcards are either \
             regular `*` or recursive `**` (at character 2)"
        );
    }

    #[test]
    fn likely_mistakes_are_warned_of() {
        let text = format!(
            "{LOG}{UPSTREAMS}[listen]\nhttp = \"127.0.0.1:0\"\n\
             [[rule]]\naction = \"require_approval\"\ntool = \"x\"\n"
        );
        assert_eq!(
            read(&text).unwrap().warnings(),
            [
                "rule[0] requires approval, but `listen.admin_http` is not set: nobody can \
                 approve, so its calls wait until they expire, then are denied",
                "`listen.http` is set but there is no `[[client]]`: every HTTP request gets 401",
            ]
        );
        assert!(
            read(&format!("{LOG}{UPSTREAMS}"))
                .unwrap()
                .warnings()
                .is_empty()
        );
        let short = format!("{LOG}{UPSTREAMS}[[client]]\nprincipal = \"bob\"\ntoken = \"x\"\n");
        assert_eq!(
            read(&short).unwrap().warnings(),
            [
                "client `bob`'s token is shorter than 16 characters (1): use at least 16 random \
                 ones (`openssl rand -hex 16`)"
            ]
        );
    }

    #[test]
    fn principal_globs_must_match_a_principal() {
        let clients = "[[client]]\nprincipal = \"alice\"\ntoken = \"alice-token-0123456789\"\n";
        let text = format!(
            "{LOG}{UPSTREAMS}{clients}[[rule]]\naction = \"deny\"\nprincipal = \"mallory\"\n"
        );
        let problem = problem(&text);
        assert!(
            problem.ends_with(
                "rule[0].principal: `mallory` matches no principal; the principals are `alice`, \
                 `local`"
            ),
            "{problem}"
        );
        for principal in ["alice", "local", "*"] {
            let text = format!(
                "{LOG}{UPSTREAMS}{clients}[[rule]]\naction = \"deny\"\nprincipal = \"{principal}\"\n"
            );
            assert!(read(&text).is_ok(), "{principal}");
        }
    }

    #[test]
    fn upstream_globs_must_match_an_upstream() {
        assert_eq!(
            problem(&format!(
                "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nupstream = \"memroy\"\n"
            )),
            "/etc/gw/gateway.toml:12:12: rule[0].upstream: `memroy` matches no upstream (did you \
             mean `memory`?); the upstreams are `memory`, `web`"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}{UPSTREAMS}[[assert]]\nupstream = \"x*\"\nreadOnlyHint = true\n"
            )),
            "/etc/gw/gateway.toml:11:12: assert[0].upstream: `x*` matches no upstream; the \
             upstreams are `memory`, `web`"
        );
        assert!(
            read(&format!(
                "{LOG}{UPSTREAMS}[[rule]]\naction = \"deny\"\nupstream = \"*e*\"\n"
            ))
            .is_ok()
        );
        // An upstream whose own table is broken is still a name rules may
        // use: one problem, not two.
        assert_eq!(
            problem(&format!(
                "{LOG}[[upstream]]\nname = \"memory\"\n[[rule]]\naction = \"deny\"\n\
                 upstream = \"memory\"\n"
            )),
            "/etc/gw/gateway.toml:3:1: upstream[0]: needs `command` (a stdio server, \
             `[\"program\", \"arg\"]`) or `url` (a streamable HTTP server)"
        );
    }

    #[test]
    fn asserts_assert_something() {
        assert_eq!(
            problem(&format!("{LOG}[[assert]]\ntool = \"x\"\n")),
            "/etc/gw/gateway.toml:3:1: assert[0]: asserts no hint: give at least one of \
             `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`"
        );
        assert_eq!(
            problem(&format!("{LOG}[[assert]]\nread_only = true\n")),
            "/etc/gw/gateway.toml:4:1: assert[0].read_only: unknown key `read_only` (did you mean `readOnlyHint`?); this table \
             takes `upstream`, `tool`, `readOnlyHint`, `destructiveHint`, `idempotentHint`, \
             `openWorldHint`"
        );
    }

    #[test]
    fn unknown_predicates_are_named() {
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"deny\"\nwhen = [\"destructive\", \"not readonly\"]\n"
            )),
            "/etc/gw/gateway.toml:5:24: rule[0].when[1]: unknown predicate `not readonly` (did you \
             mean `read_only`?); the predicates are `read_only`, `destructive`, `idempotent` and \
             `open_world`, each may follow `not `"
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"deny\"\nwhen = [\"!destructive\"]\n"
            )),
            "/etc/gw/gateway.toml:5:9: rule[0].when[0]: unknown predicate `!destructive` (did you \
             mean `destructive`?); the predicates are `read_only`, `destructive`, `idempotent` and \
             `open_world`, each may follow `not `"
        );
    }

    #[test]
    fn keys_must_fit_the_rule_action() {
        assert_eq!(
            problems(&format!(
                "{LOG}[[rule]]\naction = \"deny\"\nlimit = 1\nwindow_secs = 1\n\
                 [[rule]]\naction = \"rate_limit\"\nlimit = 1\nwindow_secs = 1\ntimeout_secs = 5\n\
                 on_expiry = \"deny\"\n"
            )),
            [
                "/etc/gw/gateway.toml:5:9: rule[0].limit: only a rate_limit rule takes a limit",
                "/etc/gw/gateway.toml:6:15: rule[0].window_secs: only a rate_limit rule takes a window",
                "/etc/gw/gateway.toml:11:16: rule[1].timeout_secs: only a require_approval rule takes \
                 a timeout",
                "/etc/gw/gateway.toml:12:13: rule[1].on_expiry: only a require_approval rule takes an \
                 expiry decision",
            ]
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"require_approval\"\non_expiry = \"allow\"\n"
            )),
            "/etc/gw/gateway.toml:5:13: rule[0].on_expiry: unknown value `allow`; expected one of `deny`, `approve`"
        );
    }

    #[test]
    fn zero_limits_windows_and_timeouts_are_refused() {
        assert_eq!(
            problems(&format!(
                "{LOG}[[rule]]\naction = \"rate_limit\"\nlimit = 0\nwindow_secs = 0\n\
                 [[rule]]\naction = \"require_approval\"\ntimeout_secs = 0\n\
                 [[upstream]]\nname = \"a\"\ncommand = [\"x\"]\ncall_timeout_secs = 0\n"
            )),
            [
                "/etc/gw/gateway.toml:5:9: rule[0].limit: must be at least 1 (calls per window); to \
                 refuse every call, use `action = \"deny\"`",
                "/etc/gw/gateway.toml:6:15: rule[0].window_secs: must be at least 1 (seconds)",
                "/etc/gw/gateway.toml:9:16: rule[1].timeout_secs: must be at least 1 (seconds)",
                "/etc/gw/gateway.toml:13:21: upstream[0].call_timeout_secs: must be at least 1 (seconds)",
            ]
        );
        assert_eq!(
            problem(&format!(
                "{LOG}[[rule]]\naction = \"require_approval\"\ntimeout_secs = 31622401\n"
            )),
            "/etc/gw/gateway.toml:5:16: rule[0].timeout_secs: must be at most 31622400 (366 days)"
        );
    }

    #[test]
    fn listen_addresses_are_loopback_unless_public() {
        assert_eq!(
            problem(&format!("[listen]\nhttp = \"0.0.0.0:8787\"\n{LOG}")),
            "/etc/gw/gateway.toml:2:8: listen.http: `0.0.0.0:8787` is not a loopback address: set \
             `listen.public = true` to serve other hosts, or listen on 127.0.0.1"
        );
        let public = read(&format!(
            "[listen]\nhttp = \"0.0.0.0:8787\"\npublic = true\n{LOG}"
        ))
        .unwrap();
        assert_eq!(public.listen.http, Some("0.0.0.0:8787".parse().unwrap()));
        assert!(read(&format!("[listen]\nhttp = \"[::1]:0\"\n{LOG}")).is_ok());
        assert_eq!(
            problem(&format!("[listen]\nhttp = \"localhost:8787\"\n{LOG}")),
            "/etc/gw/gateway.toml:2:8: listen.http: `localhost:8787` is not an IP address and port: \
             write it like `127.0.0.1:8787` or `[::1]:8787`"
        );
        assert_eq!(
            problem(&format!(
                "[listen]\nadmin_http = \"10.0.0.1:8788\"\n[admin]\ntoken = \"t\"\n{LOG}"
            )),
            "/etc/gw/gateway.toml:2:14: listen.admin_http: `10.0.0.1:8788` is not a loopback \
             address: set `listen.public = true` to serve other hosts, or listen on 127.0.0.1"
        );
    }

    #[test]
    fn the_admin_endpoint_needs_an_admin_token_and_its_own_port() {
        assert_eq!(
            problem(&format!("[listen]\nadmin_http = \"127.0.0.1:8788\"\n{LOG}")),
            "/etc/gw/gateway.toml:2:14: listen.admin_http: the admin endpoint needs an `[admin]` \
             table with its token (`token_env` or `token`)"
        );
        assert_eq!(
            problem(&format!(
                "[listen]\nhttp = \"127.0.0.1:8788\"\nadmin_http = \"127.0.0.1:8788\"\n\
                 [admin]\ntoken = \"t\"\n{LOG}"
            )),
            "/etc/gw/gateway.toml:3:14: listen.admin_http: `127.0.0.1:8788` is `listen.http` too: \
             the admin endpoint needs a port of its own"
        );
    }

    #[test]
    fn allowed_origins_are_origins() {
        assert_eq!(
            problem(&format!(
                "[listen]\nallow_origins = [\"https://ok.example\", \"https://x/path\"]\n{LOG}"
            )),
            "/etc/gw/gateway.toml:2:40: listen.allow_origins[1]: `https://x/path` is not an origin: \
             write `scheme://host` or `scheme://host:port`, without a path"
        );
    }

    #[test]
    fn an_unreadable_file_is_named() {
        let error = load(Path::new("/nonexistent/gateway.toml")).unwrap_err();
        assert!(matches!(error, ConfigError::Read { .. }));
        assert!(
            error
                .to_string()
                .starts_with("/nonexistent/gateway.toml: cannot read the config: "),
            "{error}"
        );
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(position("ab\né = 1", 6), (2, 3));
        assert_eq!(position("", 0), (1, 1));
        assert_eq!(position("x\n", 99), (2, 1));
    }

    #[test]
    fn predicates_print_as_written() {
        assert_eq!(
            predicate("not open_world").unwrap().to_string(),
            "not open_world"
        );
        assert_eq!(predicate("idempotent").unwrap().to_string(), "idempotent");
    }
}

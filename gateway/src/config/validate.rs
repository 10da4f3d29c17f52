//! The checks of a config: a `Reader` reads each table with serde, checks
//! it and turns it into the public types, recording every problem where it
//! is, then runs the checks that span tables.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use glob::Pattern;
use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::raw::{
    List, RawAction, RawAdmin, RawApproval, RawAssert, RawAuth, RawClient, RawCount, RawGateway,
    RawListen, RawLock, RawLog, RawPolicy, RawRedact, RawRedactAction, RawRedaction, RawRule,
    RawSession, RawState, RawUpstream, Seconds, Table, Whole,
};
use super::span::{element_span, find_key, name_span, position};
use super::{
    Admin, ApprovalConfig, ApproverSignIn, Assert, AuthConfig, Client, Config, DefaultAction,
    GatewayConfig, Listen, LockConfig, LogConfig, PolicyConfig, Predicate, Problem, RedactAction,
    RedactConfig, RedactMatcher, RedactionConfig, RuleAction, RuleConfig, Secret, SessionConfig,
    StateConfig, UpstreamConfig, UpstreamTransport, defaults, is_name,
};
use crate::policy::Expiry;
use crate::redact::{Detector, RedactPattern};
use crate::session::{Condition, CountCondition, Term};

/// A whole-number key's value and span, when it is given.
fn whole<T: Copy, R>(value: &Option<Spanned<Whole<T, R>>>) -> Option<(T, Range<usize>)> {
    value
        .as_ref()
        .map(|value| (value.get_ref().get(), value.span()))
}

/// Reads and checks the config `text`, read from `path`, with `env` for
/// `token_env` variables: the config, or every problem found, in file
/// order (at least one).
pub(super) fn read(
    text: &str,
    path: &Path,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Config, Vec<Problem>> {
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
        _ => Err(reader.problems),
    }
}

/// The top-level tables: (key, an array of tables?).
const SECTIONS: [(&str, bool); 16] = [
    ("gateway", false),
    ("listen", false),
    ("admin", false),
    ("approval", false),
    ("client", true),
    ("auth", false),
    ("log", false),
    ("lock", false),
    ("session", false),
    ("policy", false),
    ("state", false),
    ("upstream", true),
    ("assert", true),
    ("rule", true),
    ("redaction", false),
    ("redact", true),
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

    /// The whole file: every table read and checked, then the checks
    /// across tables; `None` when any part is invalid.
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
        self.unknown_tables(&root);
        let section = |name: &str| {
            root.iter()
                .find(|(key, _)| key.get_ref().as_ref() == name)
                .map(|(_, value)| value)
        };

        let gateway = section("gateway").map(|value| self.table::<RawGateway>("gateway", value));
        let listen = match section("listen") {
            Some(value) => self.table::<RawListen>("listen", value),
            None => Some((
                RawListen {
                    http: None,
                    public: false,
                    allow_origins: List::default(),
                    admin_http: None,
                },
                0..0,
            )),
        };
        let admin = section("admin").map(|value| self.table::<RawAdmin>("admin", value));
        let approval =
            section("approval").map(|value| self.table::<RawApproval>("approval", value));
        let clients = self.array::<RawClient>("client", section("client"));
        let auth = section("auth").map(|value| self.table::<RawAuth>("auth", value));
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
        let state = section("state").map(|value| self.table::<RawState>("state", value));
        let session = section("session").map(|value| self.table::<RawSession>("session", value));
        let upstreams = self.array::<RawUpstream>("upstream", section("upstream"));
        let asserts = self.array::<RawAssert>("assert", section("assert"));
        let rules = self.array::<RawRule>("rule", section("rule"));
        let redaction =
            section("redaction").map(|value| self.table::<RawRedaction>("redaction", value));
        let redacts = self.array::<RawRedact>("redact", section("redact"));

        let gateway = gateway.map(|raw| raw.and_then(|(raw, _)| self.gateway(raw)));
        let listen = listen.map(|(raw, _)| self.listen(raw));
        let admin = admin.map(|raw| raw.and_then(|(raw, span)| self.admin(raw, span)));
        let with_auth = section("auth").is_some();
        let approval = approval.map(|raw| raw.and_then(|(raw, _)| self.approval(raw, with_auth)));
        let clients: Vec<Option<Client>> = clients
            .into_iter()
            .enumerate()
            .map(|(index, raw)| raw.and_then(|(raw, span)| self.client(index, raw, span)))
            .collect();
        let auth = auth.map(|raw| raw.and_then(|(raw, _)| self.auth(raw)));
        let log = log.and_then(|(raw, _)| self.log(raw));
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
        let state = state.map(|raw| raw.and_then(|(raw, _)| self.state(raw)));
        let session = session.map(|raw| raw.and_then(|(raw, _)| self.session(raw)));
        // A broken `[session]` is reported there; counts are held to the
        // default meanwhile.
        let max_calls = match &session {
            Some(Some(session)) => session.max_calls,
            _ => defaults::SESSION_MAX_CALLS,
        };
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
        // With `[auth]` a token's principal can be any name: a principal
        // glob is then not held to the configured ones.
        let rules: Vec<Option<RuleConfig>> = rules
            .into_iter()
            .enumerate()
            .map(|(index, raw)| {
                raw.and_then(|(raw, _)| {
                    self.rule(index, raw, &names, &principals, with_auth, max_calls)
                })
            })
            .collect();
        let redaction = redaction.map(|raw| raw.and_then(|(raw, _)| self.redaction(&raw)));
        let redacts: Vec<Option<RedactConfig>> = redacts
            .into_iter()
            .enumerate()
            .map(|(index, raw)| raw.and_then(|(raw, span)| self.redact(index, raw, span, &names)))
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
            gateway: present(gateway)?.unwrap_or_else(GatewayConfig::for_this_host),
            listen,
            admin: present(admin)?,
            approval: present(approval)?.unwrap_or_default(),
            clients: clients.into_iter().collect::<Option<_>>()?,
            auth: present(auth)?,
            log: log?,
            lock: present(lock)?,
            policy: present(policy)?.unwrap_or_default(),
            state: present(state)?.unwrap_or_default(),
            session: present(session)?.unwrap_or_default(),
            upstreams: upstreams.into_iter().collect::<Option<_>>()?,
            asserts: asserts.into_iter().collect::<Option<_>>()?,
            rules: rules.into_iter().collect::<Option<_>>()?,
            redaction: present(redaction)?.unwrap_or_default(),
            redacts: redacts.into_iter().collect::<Option<_>>()?,
            path: path.to_owned(),
        })
    }

    /// Every top-level table is one of [`SECTIONS`].
    fn unknown_tables(&mut self, root: &DeTable<'_>) {
        for (key, _) in root.iter() {
            let name = key.get_ref().as_ref();
            if !SECTIONS.iter().any(|(section, _)| *section == name) {
                let known: Vec<&str> = SECTIONS.iter().map(|(section, _)| *section).collect();
                let message = format!("unknown table `{name}`{}", suggestion(name, &known));
                self.at(key.span(), name, message);
            }
        }
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

    /// `[log]`: `max_bytes` and `checkpoint_every` are positive counts;
    /// `signing_key` is read now, so a key that cannot be used stops the
    /// gateway here, named.
    fn log(&mut self, raw: RawLog) -> Option<LogConfig> {
        let mut valid = true;
        let mut count =
            |reader: &mut Reader<'_>, key: &str, value: Option<(i64, Range<usize>)>, unit| {
                let (value, span) = value?;
                match u64::try_from(value) {
                    Ok(count) if count >= 1 => Some(count),
                    _ => {
                        reader.at(span, key, format!("must be at least 1 ({unit})"));
                        valid = false;
                        None
                    }
                }
            };
        let max_bytes = count(self, "log.max_bytes", whole(&raw.max_bytes), "bytes");
        let checkpoint_every = count(
            self,
            "log.checkpoint_every",
            whole(&raw.checkpoint_every),
            "entries",
        );
        let signing_key = raw.signing_key.as_ref().and_then(|path| {
            match crate::chain::SigningKey::load(&self.resolve(path.get_ref())) {
                Ok(key) => Some(key),
                Err(why) => {
                    self.at(
                        path.span(),
                        "log.signing_key",
                        format!("`{}`: {why}", mcp_hints_core::escape::shown(path.get_ref())),
                    );
                    valid = false;
                    None
                }
            }
        });
        valid.then(|| LogConfig {
            path: self.resolve(raw.path.get_ref()),
            raw_arguments: raw.raw_arguments,
            max_bytes,
            checkpoint_every: checkpoint_every.unwrap_or(crate::log::CHECKPOINT_EVERY),
            signing_key,
        })
    }

    /// `[gateway]`: a `replica` given is a name of the upstreams' rule;
    /// absent, the host's ([`GatewayConfig::for_this_host`]).
    fn gateway(&mut self, raw: RawGateway) -> Option<GatewayConfig> {
        let Some(replica) = raw.replica else {
            return Some(GatewayConfig::for_this_host());
        };
        if !is_name(replica.get_ref(), defaults::MAX_REPLICA_NAME) {
            self.at(
                replica.span(),
                "gateway.replica",
                format!(
                    "`{}` is not a replica name: use 1 to {} of A-Z, a-z, 0-9 and `-`",
                    mcp_hints_core::escape::shown(replica.get_ref()),
                    defaults::MAX_REPLICA_NAME
                ),
            );
            return None;
        }
        Some(GatewayConfig {
            replica: replica.into_inner(),
        })
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
                self.secret_env(format!("{path}.token_env"), &env, "the token", |value| {
                    if value.is_empty() {
                        return Some(format!("the environment variable `{name}` is empty"));
                    }
                    unsendable(value)
                        .map(|why| format!("the token in the environment variable `{name}` {why}"))
                })
            }
        }
    }

    /// The secret in the environment variable that `env` (the value of
    /// the key `key`) names: a variable that is set, valid UTF-8, and that
    /// `check` accepts; `check` gets the value (empty included) and gives
    /// the message for one it refuses. `what` is what to export, in the
    /// message for a variable that is not set (`the token`). `None` when
    /// any of these fails, the problem recorded at `env`.
    fn secret_env(
        &mut self,
        key: impl Into<String>,
        env: &Spanned<String>,
        what: &str,
        check: impl FnOnce(&str) -> Option<String>,
    ) -> Option<Secret> {
        let name = env.get_ref();
        let problem = match (self.env)(name).map(OsString::into_string) {
            None => format!("the environment variable `{name}` is not set: export it with {what}"),
            Some(Err(_)) => format!("the environment variable `{name}` is not valid UTF-8"),
            Some(Ok(value)) => match check(&value) {
                None => return Some(Secret(value)),
                Some(problem) => problem,
            },
        };
        self.at(env.span(), key, problem);
        None
    }

    /// `[state]`: a `redis` that is a Redis URL, a `prefix` that is not
    /// empty and holds no `{`, `}` or whitespace (it starts Redis keys).
    fn state(&mut self, raw: RawState) -> Option<StateConfig> {
        let mut valid = true;
        if let Some(url) = &raw.redis {
            let text = url.get_ref();
            let scheme_ok = text.starts_with("redis://") || text.starts_with("rediss://");
            let parsed = reqwest::Url::parse(text);
            let why = match (&parsed, scheme_ok) {
                (Err(error), _) => Some(format!("not a URL: {error}")),
                (Ok(_), false) => Some("the scheme must be `redis://` or `rediss://`".to_owned()),
                (Ok(parsed), true) if parsed.host_str().is_none_or(str::is_empty) => {
                    Some("it names no host".to_owned())
                }
                _ => None,
            };
            if let Some(why) = why {
                self.at(
                    url.span(),
                    "state.redis",
                    // Not quoted: a Redis URL may carry a password.
                    format!("not a Redis URL ({why}): write it like `redis://127.0.0.1:6379`"),
                );
                valid = false;
            }
        }
        let prefix = match &raw.prefix {
            Some(prefix) => {
                let text = prefix.get_ref();
                if text.is_empty()
                    || text
                        .chars()
                        .any(|c| c.is_whitespace() || c.is_control() || c == '{' || c == '}')
                {
                    self.at(
                        prefix.span(),
                        "state.prefix",
                        "must be non-empty, without whitespace, control characters, `{` or `}`",
                    );
                    valid = false;
                }
                text.clone()
            }
            None => defaults::STATE_PREFIX.to_owned(),
        };
        valid.then(|| StateConfig {
            redis: raw.redis.map(Spanned::into_inner),
            prefix,
            rate_limit_fallback: raw
                .rate_limit_fallback
                .map(Spanned::into_inner)
                .unwrap_or_default(),
        })
    }

    /// `[session]`: an idle time in seconds, and a `max_calls` from 1 to
    /// [`defaults::MAX_SESSION_MAX_CALLS`].
    fn session(&mut self, raw: RawSession) -> Option<SessionConfig> {
        let idle = match &raw.idle_secs {
            Some(secs) => self.seconds("session.idle_secs", secs),
            None => Some(defaults::SESSION_IDLE),
        };
        let max_calls = match &raw.max_calls {
            Some(max) if !(1..=defaults::MAX_SESSION_MAX_CALLS).contains(&max.get_ref().get()) => {
                self.at(
                    max.span(),
                    "session.max_calls",
                    format!(
                        "must be from 1 to {} (calls kept per session)",
                        defaults::MAX_SESSION_MAX_CALLS
                    ),
                );
                None
            }
            Some(max) => Some(max.get_ref().get()),
            None => Some(defaults::SESSION_MAX_CALLS),
        };
        Some(SessionConfig {
            idle: idle?,
            max_calls: max_calls?,
            per: raw.per.map(Spanned::into_inner).unwrap_or_default(),
        })
    }

    /// `[auth]`: an issuer and an audience that are URLs of the kinds
    /// [`AuthConfig`] names, a principal claim that is not empty, a clock
    /// skew up to [`defaults::MAX_CLOCK_SKEW`], scopes that are RFC 6749
    /// scope tokens, and key timings from 1 s.
    fn auth(&mut self, raw: RawAuth) -> Option<AuthConfig> {
        let issuer = self.auth_url("auth.issuer", &raw.issuer, true);
        let audience = self.auth_url("auth.audience", &raw.audience, false);
        let principal_claim = match raw.principal_claim {
            Some(claim) if claim.get_ref().is_empty() => {
                self.at(
                    claim.span(),
                    "auth.principal_claim",
                    "the claim's name is empty: give the claim that names the caller, like `sub`",
                );
                None
            }
            Some(claim) => Some(claim.into_inner()),
            None => Some(defaults::PRINCIPAL_CLAIM.to_owned()),
        };
        let clock_skew = match raw.clock_skew_secs {
            Some(secs) if Duration::from_secs(secs.get_ref().get()) > defaults::MAX_CLOCK_SKEW => {
                self.at(
                    secs.span(),
                    "auth.clock_skew_secs",
                    format!(
                        "must be at most {} (seconds): a larger skew keeps expired tokens alive",
                        defaults::MAX_CLOCK_SKEW.as_secs()
                    ),
                );
                None
            }
            Some(secs) => Some(Duration::from_secs(secs.get_ref().get())),
            None => Some(defaults::CLOCK_SKEW),
        };
        let mut scopes = Some(Vec::new());
        for (index, scope) in raw.scopes.into_iter().flatten().enumerate() {
            let key = format!("auth.scopes[{index}]");
            if self.scope(&key, &scope) {
                if let Some(scopes) = &mut scopes {
                    scopes.push(scope.into_inner());
                }
            } else {
                scopes = None;
            }
        }
        let jwks_max_age = match &raw.jwks_max_age_secs {
            Some(secs) => self.seconds("auth.jwks_max_age_secs", secs),
            None => Some(defaults::JWKS_MAX_AGE),
        };
        let jwks_min_refresh = match &raw.jwks_min_refresh_secs {
            Some(secs) => self.seconds("auth.jwks_min_refresh_secs", secs),
            None => Some(defaults::JWKS_MIN_REFRESH),
        };
        Some(AuthConfig {
            issuer: issuer?,
            audience: audience?,
            principal_claim: principal_claim?,
            clock_skew: clock_skew?,
            scopes: scopes?,
            jwks_max_age: jwks_max_age?,
            jwks_min_refresh: jwks_min_refresh?,
        })
    }

    /// An `[auth]` URL at `key`: `https`, or `http` with a loopback host;
    /// no query or fragment (RFC 8414 §2 for an issuer; an audience is
    /// the base of the gateway's metadata URL, RFC 9728 §3.1).
    fn auth_url(&mut self, key: &str, value: &Spanned<String>, issuer: bool) -> Option<String> {
        let text = value.get_ref();
        let why = match reqwest::Url::parse(text) {
            Err(error) => Some(format!("not a URL ({error})")),
            Ok(url) => match url.scheme() {
                "https" => None,
                "http" if is_loopback_host(&url) => None,
                "http" => Some(
                    "`http` is only for a loopback host (127.0.0.1, [::1], localhost): use \
                     `https`"
                        .to_owned(),
                ),
                _ => Some("the scheme must be `https`".to_owned()),
            }
            .or_else(|| {
                if url.host_str().is_none_or(str::is_empty) {
                    Some("it names no host".to_owned())
                } else if url.fragment().is_some() {
                    Some("it has a fragment (`#...`), which this URL may not".to_owned())
                } else if url.query().is_some() {
                    Some("it has a query (`?...`), which this URL may not".to_owned())
                } else {
                    None
                }
            }),
        };
        match why {
            Some(why) => {
                let like = if issuer {
                    "`https://issuer.example.com`"
                } else {
                    "`https://gateway.example.com/mcp`"
                };
                self.at(
                    value.span(),
                    key,
                    format!(
                        "`{}` is not usable: {why}; write it like {like}",
                        mcp_hints_core::escape::shown(text)
                    ),
                );
                None
            }
            None => Some(text.clone()),
        }
    }

    /// Whether `scope` at `key` is one RFC 6749 §3.3 scope token (visible
    /// ASCII but `"` and `\\`, no space); a problem recorded when not.
    fn scope(&mut self, key: &str, scope: &Spanned<String>) -> bool {
        let text = scope.get_ref();
        let ok = !text.is_empty()
            && text
                .bytes()
                .all(|b| b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b));
        if !ok {
            self.at(
                scope.span(),
                key,
                format!(
                    "`{}` is not a scope: one or more visible ASCII characters, without spaces, \
                     `\"` or `\\` (RFC 6749 §3.3)",
                    mcp_hints_core::escape::shown(text)
                ),
            );
        }
        ok
    }

    fn admin(&mut self, raw: RawAdmin, span: Range<usize>) -> Option<Admin> {
        let token = self.token("admin", span, raw.token, raw.token_env)?;
        Some(Admin {
            token,
            secure_cookie: raw.secure_cookie,
        })
    }

    /// `[approval]`: a `webhook` that is an `http://` or `https://` URL
    /// naming a host, without a fragment (not quoted in a problem: it may
    /// carry a secret); and the sign-in through the issuer
    /// ([`Reader::approver_sign_in`]).
    fn approval(&mut self, raw: RawApproval, with_auth: bool) -> Option<ApprovalConfig> {
        let sign_in = self.approver_sign_in(&raw, with_auth);
        if let Some(url) = &raw.webhook {
            let why = web_url_problem(url.get_ref(), "a fragment is never sent: leave it out");
            if let Some(why) = why {
                self.at(
                    url.span(),
                    "approval.webhook",
                    format!(
                        "not a webhook URL ({why}): write it like \
                         `http://127.0.0.1:9000/parked`"
                    ),
                );
                return None;
            }
        }
        if let Some(url) = &raw.page_url {
            let why = web_url_problem(
                url.get_ref(),
                "the webhook adds the call's own `#call-ID`: leave the fragment out",
            );
            if let Some(why) = why {
                self.at(
                    url.span(),
                    "approval.page_url",
                    format!(
                        "`{}` is not the page's URL ({why}): write it like \
                         `https://gateway.example.com/approvals`",
                        url.get_ref()
                    ),
                );
                return None;
            }
        }
        Some(ApprovalConfig {
            page_url: raw.page_url.map(Spanned::into_inner),
            webhook: raw.webhook.map(Spanned::into_inner),
            sign_in: sign_in?,
        })
    }

    /// `[approval]`'s sign-in through the `[auth]` issuer: `approver_scope`
    /// and `client_id` given together or not at all, with `[auth]`; the
    /// scope one RFC 6749 §3.3 scope token; the client id visible ASCII
    /// (RFC 6749 §2.2's VSCHAR, no space); the secret read from the
    /// environment variable `client_secret_env` names; a `redirect_uri`
    /// that is `https`, or `http` on a loopback host, without a fragment.
    /// `Some(None)` when not configured; `None` when invalid (problems
    /// recorded).
    fn approver_sign_in(
        &mut self,
        raw: &RawApproval,
        with_auth: bool,
    ) -> Option<Option<ApproverSignIn>> {
        let (scope, client_id) = match (&raw.approver_scope, &raw.client_id) {
            (None, None) => {
                for (key, value) in [
                    ("approval.client_secret_env", &raw.client_secret_env),
                    ("approval.redirect_uri", &raw.redirect_uri),
                ] {
                    if let Some(value) = value {
                        self.at(
                            value.span(),
                            key,
                            "only the sign-in through the issuer takes this: give \
                             `approver_scope` and `client_id` too",
                        );
                    }
                }
                return (raw.client_secret_env.is_none() && raw.redirect_uri.is_none())
                    .then_some(None);
            }
            (Some(scope), None) => {
                self.at(
                    scope.span(),
                    "approval.approver_scope",
                    "the sign-in through the issuer needs `client_id` too: the page's client \
                     id, registered with the `[auth]` issuer",
                );
                return None;
            }
            (None, Some(client_id)) => {
                self.at(
                    client_id.span(),
                    "approval.client_id",
                    "the sign-in through the issuer needs `approver_scope` too: the scope an \
                     approver's token carries, like `mcp:approve`",
                );
                return None;
            }
            (Some(scope), Some(client_id)) => (scope, client_id),
        };
        let mut valid = true;
        if !with_auth {
            self.at(
                scope.span(),
                "approval.approver_scope",
                "the sign-in through the issuer needs `[auth]`: approvers sign in at its \
                 `issuer`, and their tokens are verified as its access tokens are",
            );
            valid = false;
        }
        valid &= self.scope("approval.approver_scope", scope);
        let id = client_id.get_ref();
        if id.is_empty() || !id.bytes().all(|b| (0x21..=0x7E).contains(&b)) {
            self.at(
                client_id.span(),
                "approval.client_id",
                format!(
                    "`{}` is not a client id: one or more visible ASCII characters, without \
                     spaces (RFC 6749 §2.2)",
                    mcp_hints_core::escape::shown(id)
                ),
            );
            valid = false;
        }
        let client_secret = match &raw.client_secret_env {
            None => Some(None),
            Some(env) => {
                let name = env.get_ref();
                let secret = self.secret_env(
                    "approval.client_secret_env",
                    env,
                    "the client's secret",
                    |value| {
                        (value.is_empty() || !value.bytes().all(|b| (0x20..=0x7E).contains(&b)))
                            .then(|| {
                                format!(
                                    "the client's secret in the environment variable `{name}` \
                                     is empty or holds a character outside visible ASCII and \
                                     space (RFC 6749 Appendix A.2)"
                                )
                            })
                    },
                );
                secret.map(Some)
            }
        };
        let redirect_uri = match &raw.redirect_uri {
            None => Some(None),
            Some(uri) => {
                let text = uri.get_ref();
                let why = match reqwest::Url::parse(text) {
                    Err(error) => Some(format!("not a URL ({error})")),
                    Ok(url) if url.host_str().is_none_or(str::is_empty) => {
                        Some("it names no host".to_owned())
                    }
                    Ok(url) if url.fragment().is_some() => {
                        Some("it has a fragment (`#...`), which a redirect URI may not".to_owned())
                    }
                    Ok(url) => match url.scheme() {
                        "https" => None,
                        "http" if is_loopback_host(&url) => None,
                        "http" => Some(
                            "`http` is only for a loopback host (OAuth 2.1 §2.3.1): use `https`"
                                .to_owned(),
                        ),
                        _ => Some("the scheme must be `https`".to_owned()),
                    },
                };
                match why {
                    Some(why) => {
                        self.at(
                            uri.span(),
                            "approval.redirect_uri",
                            format!(
                                "`{}` is not usable: {why}; write it like \
                                 `https://approvals.example.com/sign-in/callback`",
                                mcp_hints_core::escape::shown(text)
                            ),
                        );
                        None
                    }
                    None => Some(Some(text.clone())),
                }
            }
        };
        let (client_secret, redirect_uri) = (client_secret?, redirect_uri?);
        valid.then(|| {
            Some(ApproverSignIn {
                scope: scope.get_ref().clone(),
                client_id: id.clone(),
                client_secret,
                redirect_uri,
            })
        })
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
        if !is_name(name, defaults::MAX_UPSTREAM_NAME) {
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
        let mut exclude_tools = Vec::new();
        for (at, glob) in raw
            .exclude_tools
            .iter()
            .flat_map(|globs| globs.get_ref().iter().enumerate())
        {
            match self.glob(&format!("{path}.exclude_tools[{at}]"), Some(glob), None) {
                Some(pattern) => exclude_tools.push(pattern),
                None => ok = false,
            }
        }
        let (transport, call_timeout) = (transport?, call_timeout?);
        ok.then(|| UpstreamConfig {
            name: raw.name.into_inner(),
            transport,
            trusted: raw.trusted,
            call_timeout,
            exclude_tools,
        })
    }

    fn command(
        &mut self,
        path: &str,
        command: Spanned<List<Spanned<String>>>,
        env: Option<Spanned<Table<Spanned<String>>>>,
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
        headers: Option<Spanned<Table<Spanned<String>>>>,
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
    fn seconds(&mut self, key: &str, secs: &Spanned<Whole<u64, Seconds>>) -> Option<Duration> {
        let value = secs.get_ref().get();
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
        with_auth: bool,
        max_calls: u32,
    ) -> Option<RuleConfig> {
        let path = format!("rule[{index}]");
        let mut ok = self.keys_fit_action(&path, &raw);
        let scope = match raw.scope.clone() {
            Some(scope) if !with_auth => {
                self.at(
                    scope.span(),
                    format!("{path}.scope"),
                    "only OAuth tokens carry scopes: add an `[auth]` table, or the rule never \
                     matches",
                );
                None
            }
            Some(scope) if !self.scope(&format!("{path}.scope"), &scope) => None,
            Some(scope) => Some(Some(scope.into_inner())),
            None => Some(None),
        };
        let upstream = self.glob(
            &format!("{path}.upstream"),
            raw.upstream.as_ref(),
            Some(("upstream", upstreams)),
        );
        let tool = self.glob(&format!("{path}.tool"), raw.tool.as_ref(), None);
        let principal = self.glob(
            &format!("{path}.principal"),
            raw.principal.as_ref(),
            (!with_auth).then_some(("principal", principals)),
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
        let mut after = Vec::new();
        for (position, text) in raw.after.iter().flatten().enumerate() {
            match condition(text.get_ref(), upstreams) {
                Ok(condition) => after.push(condition),
                Err(message) => {
                    self.at(text.span(), format!("{path}.after[{position}]"), message);
                    ok = false;
                }
            }
        }
        let count = match &raw.count {
            Some(count) => self.count(&path, count, upstreams, max_calls).map(Some),
            None => Some(None),
        };
        let action = self.rule_action(&path, &raw);
        let rule = RuleConfig {
            action: action?,
            upstream: upstream?,
            tool: tool?,
            principal: principal?,
            scope: scope?,
            when,
            after,
            count: count?,
        };
        ok.then_some(rule)
    }

    /// A rule's `count`: `of` a condition (default `*`), `more_than` from
    /// 1 to one less than `[session] max_calls` (a history never holds
    /// more), `within_secs` as any `*_secs`.
    fn count(
        &mut self,
        path: &str,
        raw: &Spanned<RawCount>,
        upstreams: &[String],
        max_calls: u32,
    ) -> Option<CountCondition> {
        let raw_count = raw.get_ref();
        let of = match &raw_count.of {
            Some(text) => match condition(text.get_ref(), upstreams) {
                Ok(of) => Some(of),
                Err(message) => {
                    self.at(text.span(), format!("{path}.count.of"), message);
                    None
                }
            },
            None => Some(Condition {
                terms: vec![Term::Any],
            }),
        };
        let more_than = raw_count.more_than.get_ref().get();
        let more_than = if more_than == 0 {
            self.at(
                raw_count.more_than.span(),
                format!("{path}.count.more_than"),
                "must be at least 1 (earlier calls); a rule without `count` matches from the \
                 first call",
            );
            None
        } else if more_than >= max_calls {
            self.at(
                raw_count.more_than.span(),
                format!("{path}.count.more_than"),
                format!(
                    "must be less than `[session] max_calls` ({max_calls}): a session's history \
                     keeps no more calls, so the count would never be reached"
                ),
            );
            None
        } else {
            Some(more_than)
        };
        let within = self.seconds(&format!("{path}.count.within_secs"), &raw_count.within_secs);
        Some(CountCondition {
            of: of?,
            more_than: more_than?,
            within: within?,
        })
    }

    /// `[redaction]`: `max_scan_bytes` is a positive count.
    fn redaction(&mut self, raw: &RawRedaction) -> Option<RedactionConfig> {
        let Some(value) = &raw.max_scan_bytes else {
            return Some(RedactionConfig::default());
        };
        match u64::try_from(value.get_ref().get()) {
            Ok(bytes) if bytes >= 1 => Some(RedactionConfig {
                max_scan_bytes: bytes,
            }),
            _ => {
                self.at(
                    value.span(),
                    "redaction.max_scan_bytes",
                    "must be at least 1 (bytes)",
                );
                None
            }
        }
    }

    /// One `[[redact]]`: exactly one of `pattern` (compiled now) and
    /// `detectors` (known names); `replacement` only with `mask`, and not
    /// empty.
    fn redact(
        &mut self,
        index: usize,
        raw: RawRedact,
        span: Range<usize>,
        upstreams: &[String],
    ) -> Option<RedactConfig> {
        let path = format!("redact[{index}]");
        let upstream = self.glob(
            &format!("{path}.upstream"),
            raw.upstream.as_ref(),
            Some(("upstream", upstreams)),
        );
        let tool = self.glob(&format!("{path}.tool"), raw.tool.as_ref(), None);
        let matcher = match (&raw.pattern, &raw.detectors) {
            (Some(pattern), None) => self.redact_pattern(&format!("{path}.pattern"), pattern),
            (None, Some(detectors)) => self.detectors(&format!("{path}.detectors"), detectors),
            (Some(pattern), Some(_)) => {
                self.at(
                    pattern.span(),
                    path.clone(),
                    "give `pattern` or `detectors`, not both: use two `[[redact]]` tables",
                );
                None
            }
            (None, None) => {
                self.at(
                    span,
                    path.clone(),
                    "says nothing to look for: give `pattern = \"REGEX\"` or `detectors = \
                     [\"secrets\"]`",
                );
                None
            }
        };
        let deny = raw
            .action
            .as_ref()
            .is_some_and(|action| *action.get_ref() == RawRedactAction::DenyResult);
        let action = match (&raw.replacement, deny) {
            (Some(replacement), true) => {
                self.at(
                    replacement.span(),
                    format!("{path}.replacement"),
                    "only a mask rule takes a replacement: a deny_result rule shows nothing",
                );
                None
            }
            (Some(replacement), false) if replacement.get_ref().is_empty() => {
                self.at(
                    replacement.span(),
                    format!("{path}.replacement"),
                    "is empty: the client could not tell text was masked; leave it out for \
                     `[redacted:NAME]`",
                );
                None
            }
            (replacement, false) => Some(RedactAction::Mask {
                replacement: replacement.as_ref().map(|text| text.get_ref().clone()),
            }),
            (None, true) => Some(RedactAction::DenyResult),
        };
        Some(RedactConfig {
            upstream: upstream?,
            tool: tool?,
            matcher: matcher?,
            action: action?,
        })
    }

    /// A `[[redact]]`'s `pattern`, compiled.
    fn redact_pattern(&mut self, key: &str, pattern: &Spanned<String>) -> Option<RedactMatcher> {
        if pattern.get_ref().is_empty() {
            self.at(pattern.span(), key, "is empty: give a regular expression");
            return None;
        }
        match RedactPattern::new(pattern.get_ref()) {
            Ok(compiled) => Some(RedactMatcher::Pattern(compiled)),
            Err(why) => {
                self.at(
                    pattern.span(),
                    key,
                    format!("not a usable regular expression: {why}"),
                );
                None
            }
        }
    }

    /// A `[[redact]]`'s `detectors`: known names, at least one.
    fn detectors(
        &mut self,
        key: &str,
        names: &Spanned<List<Spanned<String>>>,
    ) -> Option<RedactMatcher> {
        let known: Vec<&str> = Detector::ALL
            .iter()
            .map(|detector| detector.name())
            .chain([Detector::ALL_NAME])
            .collect();
        let listed = known
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if names.get_ref().is_empty() {
            self.at(
                names.span(),
                key,
                format!("is empty: name at least one detector, of {listed}"),
            );
            return None;
        }
        let mut detectors: Vec<Detector> = Vec::new();
        let mut ok = true;
        for (at, name) in names.get_ref().iter().enumerate() {
            match Detector::named(name.get_ref()) {
                Some(named) => {
                    for detector in named {
                        if !detectors.contains(&detector) {
                            detectors.push(detector);
                        }
                    }
                }
                None => {
                    self.at(
                        name.span(),
                        format!("{key}[{at}]"),
                        format!(
                            "unknown detector `{}`{}; the detectors are {listed}",
                            mcp_hints_core::escape::shown(name.get_ref()),
                            detector_suggestion(name.get_ref(), &known)
                        ),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(RedactMatcher::Detectors(detectors))
    }

    /// Whether every key of the rule at `path` belongs to its action (a
    /// problem recorded for each that does not).
    fn keys_fit_action(&mut self, path: &str, raw: &RawRule) -> bool {
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
        ok
    }

    /// The action of the rule at `path`, from `action` and the keys only it
    /// takes: defaults filled in, zero limits and out-of-range seconds
    /// refused.
    fn rule_action(&mut self, path: &str, raw: &RawRule) -> Option<RuleAction> {
        let action_span = raw.action.span();
        match *raw.action.get_ref() {
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
                        .as_ref()
                        .map_or(Expiry::Deny, |expiry| *expiry.get_ref()),
                })
            }
            RawAction::RateLimit => {
                let limit = match &raw.limit {
                    Some(limit) if limit.get_ref().get() == 0 => {
                        self.at(
                            limit.span(),
                            format!("{path}.limit"),
                            "must be at least 1 (calls per window); to refuse every call, use \
                             `action = \"deny\"`",
                        );
                        None
                    }
                    Some(limit) => Some(limit.get_ref().get()),
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
        }
    }
}

/// Whether `url`'s host is loopback: `localhost`, or an address in
/// 127.0.0.0/8 or `::1`.
pub(crate) fn is_loopback_host(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// An optional table: absent (`None`) is `Some(None)`; present and valid
/// is `Some(Some(_))`; present but invalid (a problem recorded) is `None`.
fn present<T>(table: Option<Option<T>>) -> Option<Option<T>> {
    table.map_or(Some(None), |valid| valid.map(Some))
}

/// A `when` predicate: a name from [`Predicate::NAMES`], optionally after
/// `not `.
pub(super) fn predicate(text: &str) -> Result<Predicate, String> {
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

/// A look-back condition (`after`, `count.of`): terms joined by ` and `,
/// each a hint predicate, `tool:GLOB`, `upstream:GLOB` (matching a
/// configured upstream, when any were read), `tainted` or `*`.
pub(super) fn condition(text: &str, upstreams: &[String]) -> Result<Condition, String> {
    const TERMS: &str = "a term is a hint predicate (`open_world`, `not read_only`, ...), \
                         `tool:GLOB`, `upstream:GLOB`, `tainted` or `*`, and terms are joined \
                         by ` and `";
    if text.trim().is_empty() {
        return Err(format!("is empty; {TERMS}"));
    }
    let mut terms = Vec::new();
    for term in text.split(" and ").map(str::trim) {
        let glob = |kind: &str, glob: &str| {
            if glob.is_empty() {
                return Err(format!(
                    "`{kind}:` names no glob: write `{kind}:GLOB`, `{kind}:*` for any"
                ));
            }
            Pattern::new(glob).map_err(|error| {
                format!(
                    "`{kind}:{glob}` is not a glob: {} (at character {})",
                    error.msg, error.pos
                )
            })
        };
        let parsed = if term == "*" {
            Term::Any
        } else if term == "tainted" {
            Term::Tainted
        } else if let Some(tool) = term.strip_prefix("tool:") {
            Term::Tool(glob("tool", tool)?)
        } else if let Some(upstream) = term.strip_prefix("upstream:") {
            let pattern = glob("upstream", upstream)?;
            if !upstreams.is_empty() && !upstreams.iter().any(|name| pattern.matches(name)) {
                let names: Vec<&str> = upstreams.iter().map(String::as_str).collect();
                let listed = names
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(format!(
                    "`upstream:{upstream}` matches no upstream{}; the upstreams are {listed}",
                    suggestion(upstream, &names)
                ));
            }
            Term::Upstream(pattern)
        } else {
            match predicate(term) {
                Ok(predicate) => Term::Hint(predicate),
                Err(_) => {
                    let (_, name) = term.split_once("not ").unwrap_or(("", term));
                    let mut known: Vec<&str> =
                        Predicate::NAMES.iter().map(|(name, _)| *name).collect();
                    known.push("tainted");
                    return Err(format!(
                        "unknown term `{}`{}; {TERMS}",
                        mcp_hints_core::escape::one_line(term),
                        suggestion(name, &known)
                    ));
                }
            }
        };
        terms.push(parsed);
    }
    Ok(Condition { terms })
}

/// ` (did you mean `X`?)` when one of `known` is close to `given`.
fn suggestion(given: &str, known: &[&str]) -> String {
    mcp_hints_core::suggest::closest(given, known.iter().copied())
        .map(|name| format!(" (did you mean `{name}`?)"))
        .unwrap_or_default()
}

/// [`suggestion`] for a detector's name; `all`, `any` and `*`, the words
/// other tools use for every detector, are pointed at
/// [`Detector::ALL_NAME`].
fn detector_suggestion(given: &str, known: &[&str]) -> String {
    if ["all", "any", "*"].contains(&given.trim().to_ascii_lowercase().as_str()) {
        return format!(" (did you mean `{}`, all of them?)", Detector::ALL_NAME);
    }
    suggestion(given, known)
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

/// What keeps `text` from being an `http://` or `https://` URL naming a
/// host without a fragment (`fragment`: why a fragment is refused there);
/// `None` when it is one.
fn web_url_problem(text: &str, fragment: &str) -> Option<String> {
    match reqwest::Url::parse(text) {
        Err(error) => Some(format!("not a URL: {error}")),
        Ok(parsed) if !matches!(parsed.scheme(), "http" | "https") => {
            Some("the scheme must be `http://` or `https://`".to_owned())
        }
        Ok(parsed) if parsed.host_str().is_none_or(str::is_empty) => {
            Some("it names no host".to_owned())
        }
        Ok(parsed) if parsed.fragment().is_some() => Some(fragment.to_owned()),
        Ok(_) => None,
    }
}

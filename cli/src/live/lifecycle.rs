//! Which MCP revision a session speaks, and how it was agreed.
//!
//! Two lifecycles (see the project's design notes, "Protocol revisions"):
//!
//! - **discover** (2026-07-28): no handshake and no session. `server/discover`
//!   returns the server's supported versions, capabilities and identity, and
//!   every request carries `_meta` with `io.modelcontextprotocol/protocolVersion`,
//!   `io.modelcontextprotocol/clientCapabilities` and
//!   `io.modelcontextprotocol/clientInfo`. Over HTTP each POST carries
//!   `MCP-Protocol-Version`, `Mcp-Method` (and `Mcp-Name`), and no
//!   `Mcp-Session-Id`.
//! - **initialize** (2025-11-25 and earlier): `initialize`, then
//!   `notifications/initialized`; over HTTP the server may assign an
//!   `Mcp-Session-Id`.
//!
//! Without a revision asked for, [`Session::connect`] probes with
//! `server/discover` at 2026-07-28 and falls back to `initialize` as the
//! 2026-07-28 transports say: on any JSON-RPC error other than the modern
//! ones (-32020 header mismatch, -32021 missing capability, -32022
//! unsupported version), on an HTTP 4xx without an MCP error, on no answer
//! within [`PROBE_TIMEOUT`] over stdio, or, over stdio, when the server
//! exits on the probe (it is started again). A -32022 error, or a
//! `server/discover` result, that lists a revision this client speaks
//! selects it; one that lists none fails with
//! [`LiveErrorKind::ProtocolRefused`]. An `initialize` refused with a
//! `data.supported` list is sent once more, at the newest revision listed
//! that this client speaks; an `initialize` answer naming a revision this
//! client does not speak fails with [`LiveErrorKind::UnknownRevision`].
//! HTTP silence, a 401/403 or a 5xx is an error, not a sign of age.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rmcp::model::ErrorCode;
use serde_json::{Value, json};

use super::error::{LiveError, LiveErrorKind, quoted};
use super::{Session, Transport};

/// How long, at most, a stdio server gets to answer the `server/discover`
/// probe before it is taken for one that predates 2026-07-28 (some never
/// answer a request before `initialize`). Capped by
/// [`LiveOptions::timeout`](super::LiveOptions::timeout). Over HTTP the
/// probe has the whole timeout, and silence is an error.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a server's error `code` is the spec's `spec` (rmcp's
/// `ErrorCode`; a server's code is read as any JSON-RPC integer).
fn is(code: i64, spec: ErrorCode) -> bool {
    code == i64::from(spec.0)
}

/// An MCP revision this client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2024-11-05 (`initialize`).
    V2024_11_05,
    /// 2025-03-26 (`initialize`).
    V2025_03_26,
    /// 2025-06-18 (`initialize`).
    V2025_06_18,
    /// 2025-11-25 (`initialize`).
    V2025_11_25,
    /// 2026-07-28 (`server/discover`, per-request `_meta`).
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every revision this client speaks, newest first.
    pub const ALL: [ProtocolVersion; 5] = [
        ProtocolVersion::V2026_07_28,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2024_11_05,
    ];

    /// The newest revision, tried first when none is asked for.
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2026_07_28;

    /// The newest revision with an `initialize` handshake, asked for when
    /// falling back.
    pub const LATEST_WITH_INITIALIZE: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// `2026-07-28`, …
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// How a session of this revision opens.
    pub fn lifecycle(self) -> Lifecycle {
        match self {
            ProtocolVersion::V2026_07_28 => Lifecycle::Discover,
            _ => Lifecycle::Initialize,
        }
    }

    /// The revision named `text`, if this client speaks it.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        ProtocolVersion::ALL
            .into_iter()
            .find(|version| version.as_str() == text)
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProtocolVersion {
    type Err = String;

    /// The error names the revisions this client speaks.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ProtocolVersion::parse(text).ok_or_else(|| {
            format!(
                "`{}` is not an MCP revision mcp-hints speaks: {}",
                crate::text::shown(text),
                known_list()
            )
        })
    }
}

fn known_list() -> String {
    ProtocolVersion::ALL
        .iter()
        .map(|version| version.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a session opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Lifecycle {
    /// 2026-07-28: `server/discover`, then requests that each carry the
    /// revision and the client's capabilities in `_meta`.
    Discover,
    /// `initialize` and `notifications/initialized`.
    Initialize,
}

impl Lifecycle {
    /// `discover` or `initialize`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Discover => "discover",
            Lifecycle::Initialize => "initialize",
        }
    }

    /// The request that opens it: `server/discover` or `initialize`.
    pub fn request(self) -> &'static str {
        match self {
            Lifecycle::Discover => "server/discover",
            Lifecycle::Initialize => "initialize",
        }
    }
}

/// The revision a session speaks, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiation {
    /// The revision, as the server named it: one this client speaks (an
    /// `initialize` answer naming another is refused).
    pub version: String,
    /// How the session opened.
    pub lifecycle: Lifecycle,
    /// Whether [`LiveOptions::protocol_version`](super::LiveOptions::protocol_version)
    /// asked for this revision (then nothing else would do).
    pub forced: bool,
    /// Why this revision, for people: what the probe found. Server text in
    /// it is escaped and cut (see [`crate::text::shown`]).
    pub why: String,
    /// The revisions the server said it supports (`server/discover`'s
    /// `supportedVersions`, or an unsupported-version error's
    /// `data.supported`), as sent; empty when it did not say.
    pub server_versions: Vec<String>,
}

/// What the `server/discover` probe says about a server that did not
/// answer it with a result.
enum Probe {
    /// It speaks 2026-07-28 or later but not the revision asked for: these
    /// are the ones it lists (-32022).
    Unsupported(Vec<String>),
    /// It predates 2026-07-28: fall back to `initialize`; why, for people.
    Legacy(String),
    /// It predates 2026-07-28 and did not answer in time (stdio): fall back,
    /// but a refusal of `initialize` may still show it is modern.
    Silent(String),
    /// It exited on the probe (stdio): start it again and fall back.
    Exited(String),
    /// A -32022 whose `data.supported` is not a list of strings: why.
    Malformed(String),
    /// Anything else: the error stands.
    Failed,
}

impl Session {
    /// Agrees on a revision: the one asked for, or the newest the server
    /// speaks (see the module's documentation).
    pub(super) async fn open(&mut self, asked: Option<ProtocolVersion>) -> Result<(), LiveError> {
        match asked {
            Some(version) if version.lifecycle() == Lifecycle::Discover => {
                let stdio = matches!(self.transport, Transport::Stdio(_));
                let result = match self.discover(version, self.timeout).await {
                    Ok(result) => result,
                    Err(error) => {
                        return Err(match probe_outcome(&error, stdio, self.timeout) {
                            Probe::Unsupported(supported) => {
                                let answer = format!(
                                    "it answered `server/discover` with {}",
                                    rpc_summary(error.kind())
                                );
                                self.refused(Some(version), answer, supported)
                            }
                            Probe::Legacy(_) => {
                                let answer = format!(
                                    "it answered `server/discover` with {}, as servers that \
                                     predate 2026-07-28 do",
                                    rpc_summary(error.kind())
                                );
                                self.refused(Some(version), answer, Vec::new())
                            }
                            Probe::Malformed(reason) => self.invalid("server/discover", reason),
                            _ => error,
                        });
                    }
                };
                self.take_discovery(result, version, true, "asked for with --protocol-version")
                    .await
            }
            Some(version) => {
                self.initialize(
                    version,
                    true,
                    "asked for with --protocol-version".to_owned(),
                )
                .await
            }
            None => self.negotiate().await,
        }
    }

    async fn negotiate(&mut self) -> Result<(), LiveError> {
        let latest = ProtocolVersion::LATEST;
        let stdio = matches!(self.transport, Transport::Stdio(_));
        let probe_timeout = if stdio {
            self.timeout.min(PROBE_TIMEOUT)
        } else {
            self.timeout
        };
        let error = match self.discover(latest, probe_timeout).await {
            Ok(result) => {
                return self
                    .take_discovery(result, latest, false, "the newest revision")
                    .await;
            }
            Err(error) => error,
        };
        match probe_outcome(&error, stdio, probe_timeout) {
            Probe::Unsupported(supported) => {
                let why = format!(
                    "server/discover was refused with {} (unsupported protocol version); the \
                     server lists {}",
                    ErrorCode::UNSUPPORTED_PROTOCOL_VERSION.0,
                    list(&supported)
                );
                self.fall_back(&supported, why, &error).await
            }
            Probe::Legacy(why) => {
                self.initialize_or_retry(ProtocolVersion::LATEST_WITH_INITIALIZE, why)
                    .await
            }
            Probe::Exited(why) => {
                self.restart()?;
                self.initialize_or_retry(ProtocolVersion::LATEST_WITH_INITIALIZE, why)
                    .await
            }
            Probe::Silent(why) => {
                let asked = ProtocolVersion::LATEST_WITH_INITIALIZE;
                match self.initialize(asked, false, why.clone()).await {
                    Err(refusal) if is_refusal(&refusal) => {
                        let supported = self.listed(&refusal)?;
                        if !supported.iter().any(|listed| listed == latest.as_str()) {
                            return self.retry(refusal, &supported, asked, why).await;
                        }
                        // Slow, not old: the refusal of `initialize` says it
                        // speaks 2026-07-28 (a server that saw the probe
                        // first may have settled on it). Ask again, with the
                        // whole timeout this time.
                        let result = self.discover(latest, self.timeout).await?;
                        let why = format!(
                            "{why}, but initialize was refused with {} listing {latest}: asked \
                             again",
                            rpc_summary(refusal.kind())
                        );
                        self.take_discovery(result, latest, false, &why).await
                    }
                    other => other,
                }
            }
            Probe::Malformed(reason) => Err(self.invalid("server/discover", reason)),
            Probe::Failed => Err(error),
        }
    }

    /// Sends `server/discover` for `version`, waiting `timeout` at most;
    /// from now on requests carry `_meta` for it.
    async fn discover(
        &mut self,
        version: ProtocolVersion,
        timeout: Duration,
    ) -> Result<Value, LiveError> {
        self.meta = Some(json!({
            "io.modelcontextprotocol/protocolVersion": version.as_str(),
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": client_info(),
        }));
        self.set_stateless(Some(version.as_str()));
        let params = self.params(None);
        let response = self
            .exchange("server/discover", params, None, timeout)
            .await?;
        let raw = self.result_of("server/discover", response)?;
        serde_json::from_str(raw.get()).map_err(|error| self.invalid("server/discover", error))
    }

    /// Opens the session with a `server/discover` result, or falls back when
    /// it does not list `version`.
    async fn take_discovery(
        &mut self,
        result: Value,
        version: ProtocolVersion,
        forced: bool,
        reason: &str,
    ) -> Result<(), LiveError> {
        let supported = match result.get("supportedVersions") {
            Some(Value::Array(list)) => strings(list, "\"supportedVersions\"")
                .map_err(|reason| self.invalid("server/discover", reason))?,
            None => {
                return Err(
                    self.invalid("server/discover", "the result has no \"supportedVersions\"")
                );
            }
            Some(other) => {
                return Err(self.invalid(
                    "server/discover",
                    format!(
                        "\"supportedVersions\" is {}, expected an array of strings",
                        super::jsonrpc::kind(other)
                    ),
                ));
            }
        };
        let listed = list(&supported);
        if supported.iter().any(|listed| listed == version.as_str()) {
            self.negotiation = Negotiation {
                version: version.as_str().to_owned(),
                lifecycle: Lifecycle::Discover,
                forced,
                why: format!("{reason}; server/discover lists {listed}"),
                server_versions: supported,
            };
            self.opening = result;
            return Ok(());
        }
        let answer = format!("server/discover lists {listed}");
        if forced {
            return Err(self.refused(Some(version), answer, supported));
        }
        let error = self.refused(None, answer.clone(), supported.clone());
        self.fall_back(&supported, format!("{answer}, not {version}"), &error)
            .await
    }

    /// Opens with `initialize` at the newest revision in `supported` that
    /// this client speaks, saying `why`; a refusal built from `error` when
    /// there is none.
    async fn fall_back(
        &mut self,
        supported: &[String],
        why: String,
        error: &LiveError,
    ) -> Result<(), LiveError> {
        let choice = ProtocolVersion::ALL.into_iter().find(|version| {
            version.lifecycle() == Lifecycle::Initialize
                && supported.iter().any(|listed| listed == version.as_str())
        });
        let Some(choice) = choice else {
            let answer = match error.kind() {
                LiveErrorKind::ProtocolRefused { answer, .. } => answer.clone(),
                other => format!("it answered `server/discover` with {}", rpc_summary(other)),
            };
            return Err(self.refused(None, answer, supported.to_vec()));
        };
        self.initialize_or_retry(choice, why).await?;
        if self.negotiation.server_versions.is_empty() {
            self.negotiation.server_versions = supported.to_vec();
        }
        Ok(())
    }

    /// `initialize` at `version`, not forced; refused with a list of the
    /// revisions the server supports, once more at the newest of them that
    /// this client speaks with `initialize`.
    async fn initialize_or_retry(
        &mut self,
        version: ProtocolVersion,
        why: String,
    ) -> Result<(), LiveError> {
        match self.initialize(version, false, why.clone()).await {
            Err(refusal) if is_refusal(&refusal) => {
                let supported = self.listed(&refusal)?;
                self.retry(refusal, &supported, version, why).await
            }
            other => other,
        }
    }

    /// After `initialize` at `asked` was refused (`refusal`, listing
    /// `supported`): `initialize` at the newest other revision both sides
    /// speak, saying so in the `why`; the refusal when there is none.
    async fn retry(
        &mut self,
        refusal: LiveError,
        supported: &[String],
        asked: ProtocolVersion,
        why: String,
    ) -> Result<(), LiveError> {
        let choice = ProtocolVersion::ALL.into_iter().find(|version| {
            *version != asked
                && version.lifecycle() == Lifecycle::Initialize
                && supported.iter().any(|listed| listed == version.as_str())
        });
        let Some(choice) = choice else {
            return Err(refusal);
        };
        let why = format!(
            "{why}; initialize at {asked} was refused with {}, the server lists {}: asked again \
             at {choice}",
            rpc_summary(refusal.kind()),
            list(supported)
        );
        // Once: a second refusal stands.
        self.initialize(choice, false, why).await?;
        self.negotiation.server_versions = supported.to_vec();
        Ok(())
    }

    /// The revisions a refusal lists in `data.supported`, or the error for a
    /// list that is not of strings.
    fn listed(&self, refusal: &LiveError) -> Result<Vec<String>, LiveError> {
        let request = match refusal.kind() {
            LiveErrorKind::Rpc { request, .. } => request.as_str(),
            _ => "initialize",
        };
        unsupported(refusal).map_err(|reason| self.invalid(request, reason))
    }

    /// `initialize` at `version`, then `notifications/initialized`.
    /// Forced, any other revision in the answer is a refusal.
    async fn initialize(
        &mut self,
        version: ProtocolVersion,
        forced: bool,
        why: String,
    ) -> Result<(), LiveError> {
        self.meta = None;
        self.set_stateless(None);
        let params = json!({
            "protocolVersion": version.as_str(),
            "capabilities": self.capabilities,
            "clientInfo": client_info(),
        });
        let result = match self.request("initialize", Some(params)).await {
            Ok(result) => result,
            Err(error) if forced && is_refusal(&error) => {
                let supported = self.listed(&error)?;
                let answer = format!(
                    "it answered `initialize` with {}",
                    rpc_summary(error.kind())
                );
                return Err(self.refused(Some(version), answer, supported));
            }
            Err(error) => return Err(error),
        };
        let Some(answered) = result.get("protocolVersion").and_then(Value::as_str) else {
            return Err(LiveErrorKind::InvalidResponse {
                reason: match result.get("protocolVersion") {
                    None => "the result has no \"protocolVersion\"".to_owned(),
                    Some(other) => format!(
                        "\"protocolVersion\" is {}, expected a string",
                        super::jsonrpc::kind(other)
                    ),
                },
                target: self.target.clone(),
                request: "initialize".to_owned(),
                stderr_tail: self.stderr_tail(),
            }
            .into());
        };
        let answered = answered.to_owned();
        if forced && answered != version.as_str() {
            let answer = format!(
                "it answered `initialize` with protocol version {}",
                quoted(&answered)
            );
            return Err(self.refused(Some(version), answer, Vec::new()));
        }
        if ProtocolVersion::parse(&answered).is_none() {
            // `tools/list` might read the same in it, or not: no guess.
            return Err(LiveErrorKind::UnknownRevision {
                target: self.target.clone(),
                asked: version.as_str().to_owned(),
                answered,
            }
            .into());
        }
        let why = if answered == version.as_str() {
            why
        } else {
            format!(
                "{why}; initialize asked for {version}, the server chose {}",
                crate::text::shown(&answered)
            )
        };
        if let Transport::Http(http) = &mut self.transport {
            http.set_protocol(Some(&answered), false);
        }
        self.negotiation = Negotiation {
            version: answered,
            lifecycle: Lifecycle::Initialize,
            forced,
            why,
            server_versions: Vec::new(),
        };
        self.opening = result;
        self.notify("notifications/initialized", None).await
    }

    /// 2026-07-28's rules on the transport (`version` given), or the
    /// `initialize` revisions' (`None`).
    fn set_stateless(&mut self, version: Option<&str>) {
        match &mut self.transport {
            Transport::Http(http) => {
                http.forget_session();
                http.set_protocol(version, version.is_some());
            }
            Transport::Stdio(stdio) => stdio.answer_requests = version.is_none(),
        }
    }

    fn refused(
        &self,
        version: Option<ProtocolVersion>,
        answer: String,
        supported: Vec<String>,
    ) -> LiveError {
        LiveErrorKind::ProtocolRefused {
            target: self.target.clone(),
            version: version.map(|version| version.as_str().to_owned()),
            answer,
            supported,
        }
        .into()
    }
}

/// `{"name": "mcp-hints", "version": …}`.
fn client_info() -> Value {
    json!({ "name": "mcp-hints", "version": env!("CARGO_PKG_VERSION") })
}

/// What a failed probe says about the server (see [`Probe`]).
fn probe_outcome(error: &LiveError, stdio: bool, probe_timeout: Duration) -> Probe {
    let old = "the server predates 2026-07-28";
    match error.kind() {
        LiveErrorKind::Rpc { code, .. } if is(*code, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION) => {
            match unsupported(error) {
                Ok(supported) => Probe::Unsupported(supported),
                Err(reason) => Probe::Malformed(reason),
            }
        }
        LiveErrorKind::Rpc { code, .. }
            // The codes of 2026-07-28 that a server answers only if it
            // speaks 2026-07-28 or later.
            if is(*code, ErrorCode::HEADER_MISMATCH)
                || is(*code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY) =>
        {
            Probe::Failed
        }
        LiveErrorKind::Rpc { .. } => Probe::Legacy(format!(
            "server/discover was refused with {}: {old}",
            rpc_summary(error.kind())
        )),
        LiveErrorKind::HttpStatus { status, .. }
            if (400..500).contains(status) && !matches!(status, 401 | 403) =>
        {
            Probe::Legacy(format!(
                "server/discover was refused with HTTP {status} and no MCP error: {old}"
            ))
        }
        LiveErrorKind::Timeout { .. } if stdio => Probe::Silent(format!(
            "server/discover had no answer within {probe_timeout:?}: taken as a server that \
             predates 2026-07-28"
        )),
        LiveErrorKind::ServerExited { status, .. } if stdio => Probe::Exited(format!(
            "the server {} on server/discover: taken as one that predates 2026-07-28, and \
             started again",
            match status {
                Some(status) => format!("exited ({status})"),
                None => "closed its stdout".to_owned(),
            }
        )),
        _ => Probe::Failed,
    }
}

/// `JSON-RPC error -32601 "Method not found"` (with ` (HTTP 404)`), the
/// server's text escaped.
fn rpc_summary(kind: &LiveErrorKind) -> String {
    match kind {
        LiveErrorKind::Rpc {
            code,
            message,
            http_status,
            ..
        } => {
            let status = http_status.map_or(String::new(), |status| format!(" (HTTP {status})"));
            format!("JSON-RPC error {code}{status} {}", quoted(message))
        }
        other => crate::text::one_line(&other.to_string()).into_owned(),
    }
}

/// An error that says the server does not speak the revision asked for:
/// -32022, or an error with a `data.supported` list (the `initialize`
/// revisions answer an unsupported version with -32602 and that data).
fn is_refusal(error: &LiveError) -> bool {
    match error.kind() {
        LiveErrorKind::Rpc { code, data, .. } => {
            is(*code, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION)
                || data
                    .as_ref()
                    .and_then(|data| data.get("supported"))
                    .is_some_and(Value::is_array)
        }
        _ => false,
    }
}

/// The strings of an error's `data.supported` (none when it has no such
/// array), or why they are not all strings.
fn unsupported(error: &LiveError) -> Result<Vec<String>, String> {
    let LiveErrorKind::Rpc {
        code,
        data: Some(data),
        ..
    } = error.kind()
    else {
        return Ok(Vec::new());
    };
    match data.get("supported") {
        Some(Value::Array(list)) => strings(
            list,
            &format!("\"data.supported\" in its JSON-RPC error {code}"),
        ),
        _ => Ok(Vec::new()),
    }
}

/// The elements of `list`, all strings, or which is not: `element 1 of
/// NAME is a number, expected a string naming a revision`.
fn strings(list: &[Value], name: &str) -> Result<Vec<String>, String> {
    list.iter()
        .enumerate()
        .map(|(index, version)| match version {
            Value::String(version) => Ok(version.clone()),
            other => Err(format!(
                "element {index} of {name} is {}, expected a string naming a revision",
                super::jsonrpc::kind(other)
            )),
        })
        .collect()
}

/// `2026-07-28, 2025-11-25` (escaped), or `nothing`.
fn list(versions: &[String]) -> String {
    if versions.is_empty() {
        return "nothing".to_owned();
    }
    versions
        .iter()
        .map(|version| crate::text::shown(version).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_parse_and_say_how_they_open() {
        for version in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::parse(version.as_str()), Some(version));
            assert_eq!(version.as_str().parse::<ProtocolVersion>(), Ok(version));
        }
        assert_eq!(ProtocolVersion::LATEST.lifecycle(), Lifecycle::Discover);
        assert_eq!(
            ProtocolVersion::LATEST_WITH_INITIALIZE.lifecycle(),
            Lifecycle::Initialize
        );
        assert!(
            ProtocolVersion::ALL
                .windows(2)
                .all(|pair| pair[0] > pair[1])
        );
        assert_eq!(
            "2027-01-01\n".parse::<ProtocolVersion>(),
            Err(
                "`2027-01-01\\n` is not an MCP revision mcp-hints speaks: 2026-07-28, \
                 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
                    .to_owned()
            )
        );
    }
}

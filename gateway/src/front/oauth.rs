//! The gateway as an OAuth 2.1 resource server (`[auth]`; MCP
//! authorization): its Protected Resource Metadata (RFC 9728), the
//! issuer's metadata (RFC 8414, else OpenID Connect Discovery) and keys
//! (its JWKS, RFC 7517) fetched and kept, and each access token (a JWT,
//! RFC 9068) verified against them, with the answers RFC 6750 §3 gives a
//! request whose token is missing, invalid or short of a scope.
//!
//! Keys are fetched when first needed, again once older than
//! `jwks_max_age_secs`, and again when a token names a key the set does
//! not hold (the issuer rotated): never more often than once per
//! `jwks_min_refresh_secs`, whatever the tokens name, so a flood of made-up
//! key ids costs the issuer one fetch per interval. A fetch that fails
//! keeps the keys fetched before.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::auth::Principal;
use crate::config::{AuthConfig, Config, defaults as config_defaults};

/// How long one request to the issuer (metadata or keys) may take: 5 s.
const ISSUER_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest metadata or JWKS document read from the issuer: 1 MiB.
const MAX_ISSUER_BODY: usize = 1 << 20;

/// The most keys kept from one JWKS: 64. A token without `kid` is tried
/// against each key that allows its algorithm, so this bounds that work.
const MAX_KEYS: usize = 64;

/// The `User-Agent` of requests to the issuer (RFC 9110 §10.1.5), so its
/// logs tell the gateway's metadata and key fetches from a client's
/// sign-in: `mcp-hints-gateway/VERSION`.
const ISSUER_USER_AGENT: &str = concat!("mcp-hints-gateway/", env!("CARGO_PKG_VERSION"));

/// The path of the Protected Resource Metadata (RFC 9728 §3).
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The `[auth]` resource server of one gateway: its metadata, and the
/// issuer's keys as last fetched.
pub(crate) struct ResourceServer {
    config: AuthConfig,
    /// The scopes the metadata lists: `[auth] scopes` and every rule's.
    scopes_supported: Vec<String>,
    /// The URL of the gateway's metadata, as `WWW-Authenticate` names it.
    metadata_url: String,
    http: reqwest::Client,
    keys: RwLock<Arc<KeySet>>,
    /// Held while the keys are fetched, so that requests waiting for the
    /// same refresh make one fetch.
    refresh: tokio::sync::Mutex<Refresh>,
    /// The issuer's metadata, once read (set under `refresh`).
    issuer_metadata: std::sync::OnceLock<Arc<IssuerMetadata>>,
}

/// The issuer's keys as last fetched.
#[derive(Default)]
struct KeySet {
    keys: Vec<Key>,
    /// When they were fetched; `None` before the first fetch succeeded.
    fetched: Option<Instant>,
}

/// One verification key of the issuer's JWKS.
struct Key {
    kid: Option<String>,
    /// The algorithms it verifies: its `alg` alone when the JWK names one,
    /// else every asymmetric algorithm of its type and curve.
    algorithms: Vec<Algorithm>,
    decoding: DecodingKey,
}

/// What the refresh remembers between fetches.
#[derive(Default)]
struct Refresh {
    /// When keys were last asked for, whether or not that worked.
    attempted: Option<Instant>,
}

/// What the gateway uses of the issuer's metadata (RFC 8414 §2).
#[derive(Debug)]
pub(crate) struct IssuerMetadata {
    /// `jwks_uri`: where its keys are.
    jwks_uri: String,
    /// `authorization_endpoint`, or why it cannot be used (absent, or
    /// neither `https` nor `http` on loopback).
    pub(crate) authorization_endpoint: Result<String, String>,
    /// `token_endpoint`, or why it cannot be used.
    pub(crate) token_endpoint: Result<String, String>,
    /// `authorization_response_iss_parameter_supported` (RFC 9207 §3):
    /// its authorization responses carry `iss`, so one without it is
    /// refused.
    pub(crate) iss_parameter_supported: bool,
}

/// An access token verified for the approvals page: its principal (every
/// scope it holds, `[auth] scopes` not required) and when it expires
/// (`exp`).
#[derive(Clone, Debug)]
pub(crate) struct Verified {
    pub(crate) principal: Principal,
    pub(crate) expires_at: SystemTime,
}

/// Why a request is not let in: RFC 6750 §3's answers, and one for an
/// issuer that cannot be asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No token at all (RFC 6750 §3.1: no error code).
    Missing,
    /// `invalid_token`, with its description.
    Invalid(&'static str),
    /// `insufficient_scope`: the token lacks these of `[auth] scopes`.
    InsufficientScope(Vec<String>),
    /// The issuer's keys could not be had: nothing can be verified now.
    Unavailable(String),
}

impl ResourceServer {
    /// The resource server of `config`'s `[auth]`; `None` without one.
    pub(crate) fn new(config: &Config) -> Option<Arc<ResourceServer>> {
        let auth = config.auth.clone()?;
        let scopes_supported: BTreeSet<String> = auth
            .scopes
            .iter()
            .cloned()
            .chain(config.rules.iter().filter_map(|rule| rule.scope.clone()))
            .collect();
        // reqwest is built without a default crypto provider (see
        // src/live/http.rs); an error means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(ISSUER_TIMEOUT)
            .user_agent(ISSUER_USER_AGENT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .unwrap_or_default();
        Some(Arc::new(ResourceServer {
            metadata_url: metadata_url(&auth.audience),
            scopes_supported: scopes_supported.into_iter().collect(),
            config: auth,
            http,
            keys: RwLock::default(),
            refresh: tokio::sync::Mutex::default(),
            issuer_metadata: std::sync::OnceLock::new(),
        }))
    }

    /// The Protected Resource Metadata (RFC 9728 §2): `resource` (the
    /// audience), `authorization_servers` (the issuer),
    /// `bearer_methods_supported` (`header` only: RFC 6750 §2.1), and
    /// `scopes_supported` when any scope is configured.
    pub(crate) fn metadata(&self) -> Value {
        let mut document = json!({
            "resource": self.config.audience,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-hints-gateway",
        });
        if !self.scopes_supported.is_empty() {
            document["scopes_supported"] = json!(self.scopes_supported);
        }
        document
    }

    /// The metadata as served: 200, `application/json`.
    pub(crate) fn metadata_response(&self) -> Response {
        (StatusCode::OK, json_body(self.metadata())).into_response()
    }

    /// The paths the metadata is served at: [`METADATA_PATH`], and that
    /// with the audience's path after it (RFC 9728 §3.1's well-known URL
    /// of a resource with a path, `/.well-known/oauth-protected-resource/mcp`)
    /// when the audience has one.
    pub(crate) fn metadata_paths(&self) -> Vec<String> {
        let mut paths = vec![METADATA_PATH.to_owned()];
        if let Some(path) = audience_path(&self.config.audience) {
            paths.push(format!("{METADATA_PATH}{path}"));
        }
        paths
    }

    /// The principal of an access token `token`: its signature checked
    /// with the issuer's key it names (fetching the keys once when it
    /// names one not held), `iss`, `aud`, `exp` and `nbf` checked (within
    /// the clock skew), its principal from the configured claim and its
    /// scopes from `scope` (space-separated, RFC 9068 §2.2.3) or `scp`
    /// (an array), holding every `[auth] scopes`.
    ///
    /// # Errors
    ///
    /// [`Refusal::Invalid`] for a token that fails any check,
    /// [`Refusal::InsufficientScope`] for one short of a required scope,
    /// [`Refusal::Unavailable`] when no keys could ever be fetched.
    pub(crate) async fn verify(&self, token: &str) -> Result<Principal, Refusal> {
        let claims = self.verified_claims(token).await?;
        self.principal(&claims, &self.config.scopes)
    }

    /// An access token `token` checked as [`verify`](Self::verify) checks
    /// it, but without requiring `[auth] scopes` (the approvals page
    /// requires its own scope instead): its principal and its `exp`.
    ///
    /// # Errors
    ///
    /// As [`verify`](Self::verify)'s, but never
    /// [`Refusal::InsufficientScope`].
    pub(crate) async fn verify_any_scope(&self, token: &str) -> Result<Verified, Refusal> {
        let claims = self.verified_claims(token).await?;
        let principal = self.principal(&claims, &[])?;
        let exp = claims
            .get("exp")
            .and_then(Value::as_u64)
            .ok_or(Refusal::Invalid(
                "the token's exp is not a whole number of seconds",
            ))?;
        Ok(Verified {
            principal,
            expires_at: UNIX_EPOCH + Duration::from_secs(exp),
        })
    }

    /// The `[auth]` this resource server checks tokens against.
    pub(crate) fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// The claims of `token` once its signature, `iss`, `aud`, `exp` and
    /// `nbf` are checked.
    async fn verified_claims(&self, token: &str) -> Result<Map<String, Value>, Refusal> {
        // `alg: none`, and any name the crate does not know, fail here:
        // its header type has no variant for them.
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            Refusal::Invalid(
                "the token is not a JWT signed with a supported algorithm (alg none is refused)",
            )
        })?;
        let mut keys = self.keys(false).await?;
        if !keys.holds(header.kid.as_deref()) {
            keys = self.keys(true).await?;
        }
        if !keys.holds(header.kid.as_deref()) {
            return Err(Refusal::Invalid(
                "the token names a signing key the issuer does not list",
            ));
        }
        let candidates: Vec<&Key> = keys
            .keys
            .iter()
            .filter(|key| header.kid.is_none() || key.kid == header.kid)
            .filter(|key| key.algorithms.contains(&header.alg))
            .collect();
        if candidates.is_empty() {
            return Err(Refusal::Invalid(
                "the token's algorithm is not one its signing key allows",
            ));
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.config.clock_skew.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let mut refused = None;
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(error) => {
                    let why = described(error.kind());
                    // A signature another key may verify; any other
                    // failure is the token's own.
                    if *error.kind() != ErrorKind::InvalidSignature {
                        return Err(Refusal::Invalid(why));
                    }
                    refused = Some(why);
                }
            }
        }
        Err(Refusal::Invalid(
            refused.unwrap_or("the token's signature does not verify"),
        ))
    }

    /// The principal and scopes of verified `claims`, which must hold
    /// every scope of `required`.
    fn principal(
        &self,
        claims: &Map<String, Value>,
        required: &[String],
    ) -> Result<Principal, Refusal> {
        let name = claims
            .get(&self.config.principal_claim)
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .ok_or(Refusal::Invalid(
                "the token has no principal: its principal claim is missing, empty or not a string",
            ))?;
        if name == config_defaults::LOCAL_PRINCIPAL {
            return Err(Refusal::Invalid(
                "the token's principal is local, the name of the gateway's stdio client",
            ));
        }
        let scopes: Vec<String> = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(scope)), _) => scope
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            (None, Some(Value::Array(scp))) => scp
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            (None, None) => Vec::new(),
            _ => {
                return Err(Refusal::Invalid(
                    "the token's scope claim is neither a string nor an array of strings",
                ));
            }
        };
        let missing: Vec<String> = required
            .iter()
            .filter(|required| !scopes.contains(required))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::InsufficientScope(missing));
        }
        Ok(Principal {
            name: Arc::from(name),
            scopes: Arc::from(scopes),
        })
    }

    /// The keys to verify with: those held, unless there are none yet,
    /// they are older than `jwks_max_age`, or `unknown` (a token named a
    /// key they do not hold); then fetched again, at most once per
    /// `jwks_min_refresh` (else those held are used as they are).
    ///
    /// # Errors
    ///
    /// [`Refusal::Unavailable`] when there are no keys and none could be
    /// fetched.
    async fn keys(&self, unknown: bool) -> Result<Arc<KeySet>, Refusal> {
        let held = self.held();
        let fresh = held
            .fetched
            .is_some_and(|at| at.elapsed() < self.config.jwks_max_age);
        if fresh && !unknown {
            return Ok(held);
        }
        let mut refresh = self.refresh.lock().await;
        // Another request refreshed while this one waited: use its keys.
        let now_held = self.held();
        if now_held.fetched != held.fetched {
            return Ok(now_held);
        }
        let too_soon = refresh
            .attempted
            .is_some_and(|at| at.elapsed() < self.config.jwks_min_refresh);
        if !too_soon {
            refresh.attempted = Some(Instant::now());
            match self.fetch(&mut refresh).await {
                Ok(keys) => {
                    let set = Arc::new(KeySet {
                        keys,
                        fetched: Some(Instant::now()),
                    });
                    *self.keys.write().unwrap_or_else(PoisonError::into_inner) = set.clone();
                    return Ok(set);
                }
                Err(why) => {
                    let why = mcp_hints_core::escape::one_line(&why).into_owned();
                    tracing::warn!(
                        issuer = %mcp_hints_core::escape::one_line(&self.config.issuer),
                        error = %why,
                        "the OAuth issuer's keys could not be fetched: {why}"
                    );
                    if now_held.fetched.is_none() {
                        return Err(Refusal::Unavailable(why));
                    }
                }
            }
        }
        if now_held.fetched.is_none() {
            return Err(Refusal::Unavailable(
                "the issuer's keys could not be fetched yet".to_owned(),
            ));
        }
        Ok(now_held)
    }

    fn held(&self) -> Arc<KeySet> {
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The issuer's keys: its metadata read first when its `jwks_uri` is
    /// not known yet (RFC 8414 §3, then OpenID Connect Discovery 1.0 §4,
    /// in the order the MCP authorization spec gives), then the JWKS.
    async fn fetch(&self, refresh: &mut Refresh) -> Result<Vec<Key>, String> {
        let jwks_uri = self.metadata_in(refresh).await?.jwks_uri.clone();
        let document = self.get(&jwks_uri).await?;
        let set: JwkSet = serde_json::from_value(document)
            .map_err(|error| format!("{jwks_uri} is not a JWK set: {error}"))?;
        let keys: Vec<Key> = set.keys.iter().filter_map(key_of).take(MAX_KEYS).collect();
        if keys.is_empty() {
            return Err(format!(
                "{jwks_uri} lists no public signing key (RSA, EC P-256/P-384 or Ed25519)"
            ));
        }
        Ok(keys)
    }

    /// The issuer's metadata: as read before, else read now (RFC 8414 §3,
    /// then OpenID Connect Discovery 1.0 §4) and kept.
    ///
    /// # Errors
    ///
    /// Why no metadata could be read, in words (its URLs and what they
    /// answered).
    pub(crate) async fn issuer_metadata(&self) -> Result<Arc<IssuerMetadata>, String> {
        let mut refresh = self.refresh.lock().await;
        self.metadata_in(&mut refresh).await
    }

    /// The issuer's metadata if it was read already, without waiting.
    pub(crate) fn known_issuer_metadata(&self) -> Option<Arc<IssuerMetadata>> {
        self.issuer_metadata.get().cloned()
    }

    // `_refresh` is held: one discovery at a time.
    async fn metadata_in(&self, _refresh: &mut Refresh) -> Result<Arc<IssuerMetadata>, String> {
        if let Some(metadata) = self.issuer_metadata.get() {
            return Ok(metadata.clone());
        }
        let metadata = Arc::new(self.discover().await?);
        Ok(self.issuer_metadata.get_or_init(|| metadata).clone())
    }

    /// The issuer's metadata, from the first of its metadata URLs that
    /// answers with a document naming the issuer exactly (RFC 8414 §3.3).
    async fn discover(&self) -> Result<IssuerMetadata, String> {
        let issuer = &self.config.issuer;
        let usable = |uri: &str| {
            reqwest::Url::parse(uri).is_ok_and(|parsed| {
                parsed.scheme() == "https"
                    || (parsed.scheme() == "http" && crate::config::is_loopback_host(&parsed))
            })
        };
        let mut tried = Vec::new();
        for url in discovery_urls(issuer) {
            let document = match self.get(&url).await {
                Ok(document) => document,
                Err(why) => {
                    tried.push(why);
                    continue;
                }
            };
            if document["issuer"].as_str() != Some(issuer.as_str()) {
                return Err(format!(
                    "{url} names another issuer than `{issuer}` (RFC 8414 §3.3 requires the same)"
                ));
            }
            let endpoint = |name: &str| match document[name].as_str() {
                None => Err(format!("{url} names no `{name}`")),
                Some(uri) if usable(uri) => Ok(uri.to_owned()),
                Some(_) => Err(format!(
                    "{url}'s `{name}` is not an https URL (http only on loopback)"
                )),
            };
            return Ok(IssuerMetadata {
                jwks_uri: endpoint("jwks_uri")?,
                authorization_endpoint: endpoint("authorization_endpoint"),
                token_endpoint: endpoint("token_endpoint"),
                iss_parameter_supported: document["authorization_response_iss_parameter_supported"]
                    == Value::Bool(true),
            });
        }
        Err(format!("no metadata of the issuer: {}", tried.join("; ")))
    }

    /// The JSON document at `url`, within [`ISSUER_TIMEOUT`] and
    /// [`MAX_ISSUER_BODY`].
    async fn get(&self, url: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(url)
            .header(header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| format!("{url}: {error}"))?;
        if !response.status().is_success() {
            return Err(format!("{url} answered {}", response.status()));
        }
        read_json(url, response).await
    }

    /// POSTs `form` (`application/x-www-form-urlencoded`) to the issuer's
    /// `url`, authenticated as `basic` (a client id and secret, RFC 6749
    /// §2.3.1: each form-urlencoded, then HTTP Basic) when given: the
    /// status and the JSON body, within [`ISSUER_TIMEOUT`] and
    /// [`MAX_ISSUER_BODY`], with the gateway's `User-Agent`.
    ///
    /// # Errors
    ///
    /// Why no JSON answer came (the request failed, too big a body, not
    /// JSON), in words.
    pub(crate) async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        basic: Option<(&str, &str)>,
    ) -> Result<(StatusCode, Value), String> {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut request = self
            .http
            .post(url)
            .header(header::ACCEPT, "application/json")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body);
        if let Some((id, secret)) = basic {
            let encode =
                |text: &str| form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
            request = request.basic_auth(encode(id), Some(encode(secret)));
        }
        let response = request
            .send()
            .await
            .map_err(|error| format!("{url}: {error}"))?;
        let status = response.status();
        Ok((status, read_json(url, response).await?))
    }
}

/// The JSON body of `response` (from `url`), at most [`MAX_ISSUER_BODY`].
async fn read_json(url: &str, mut response: reqwest::Response) -> Result<Value, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| format!("{url}: {error}"))?
    {
        if body.len() + chunk.len() > MAX_ISSUER_BODY {
            return Err(format!("{url} sent more than {MAX_ISSUER_BODY} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|error| format!("{url} is not JSON: {error}"))
}

impl ResourceServer {
    /// The answer to a request refused for `refusal` (RFC 6750 §3): 401
    /// (403 for a missing scope) with `WWW-Authenticate: Bearer
    /// realm="mcp", resource_metadata="URL"` (RFC 9728 §5.1), `error` and
    /// `error_description` for a bad token, `scope` for the scopes wanted;
    /// 503 when the issuer's keys cannot be had. The body is JSON,
    /// `{"error": CODE, "error_description": TEXT}`.
    pub(crate) fn refused(&self, refusal: &Refusal) -> Response {
        let mut challenge = format!(
            "Bearer realm=\"mcp\", resource_metadata=\"{}\"",
            self.metadata_url
        );
        let (status, code, description) = match refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                "invalid_request",
                "the gateway needs `Authorization: Bearer TOKEN`: an access token of the issuer \
                 its resource metadata names, or a token of a [[client]]"
                    .to_owned(),
            ),
            Refusal::Invalid(why) => {
                challenge.push_str(&format!(
                    ", error=\"invalid_token\", error_description=\"{}\"",
                    quotable(why)
                ));
                (StatusCode::UNAUTHORIZED, "invalid_token", (*why).to_owned())
            }
            Refusal::InsufficientScope(missing) => {
                let why = format!("the token lacks the scope {}", missing.join(", "));
                challenge.push_str(&format!(
                    ", error=\"insufficient_scope\", scope=\"{}\", error_description=\"{}\"",
                    self.config.scopes.join(" "),
                    quotable(&why)
                ));
                (StatusCode::FORBIDDEN, "insufficient_scope", why)
            }
            Refusal::Unavailable(why) => {
                let body = json!({
                    "error": "temporarily_unavailable",
                    "error_description": format!("the OAuth issuer's keys cannot be fetched: {why}"),
                });
                return (StatusCode::SERVICE_UNAVAILABLE, json_body(body)).into_response();
            }
        };
        if matches!(refusal, Refusal::Missing) && !self.config.scopes.is_empty() {
            challenge.push_str(&format!(", scope=\"{}\"", self.config.scopes.join(" ")));
        }
        let body = json!({ "error": code, "error_description": description });
        let mut response = (status, json_body(body)).into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

impl KeySet {
    /// Whether a token naming `kid` has a key here to be tried: one with
    /// that id, or for a token naming none, any key.
    fn holds(&self, kid: Option<&str>) -> bool {
        match kid {
            Some(kid) => self.keys.iter().any(|key| key.kid.as_deref() == Some(kid)),
            None => !self.keys.is_empty(),
        }
    }
}

/// A JSON body with its `Content-Type`.
fn json_body(body: Value) -> ([(header::HeaderName, &'static str); 1], String) {
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}

/// The verification key of `jwk`, when it is a public signing key of a
/// kind the gateway verifies with; `None` for a symmetric key (a JWKS
/// never publishes one: taking it would let anyone who read the JWKS sign),
/// a key for encryption (`use: enc`), an unknown kind, or a key whose
/// `alg` is not one of its kind.
fn key_of(jwk: &Jwk) -> Option<Key> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|used| *used != PublicKeyUse::Signature)
    {
        return None;
    }
    let of_kind: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => of_kind,
        Some(named) => {
            let named = algorithm_of(named)?;
            if !of_kind.contains(&named) {
                return None;
            }
            vec![named]
        }
    };
    Some(Key {
        kid: jwk.common.key_id.clone(),
        algorithms,
        decoding: DecodingKey::from_jwk(jwk).ok()?,
    })
}

/// The signing algorithm a JWK's `alg` names; `None` for an encryption
/// algorithm or one the gateway does not verify.
fn algorithm_of(named: KeyAlgorithm) -> Option<Algorithm> {
    Some(match named {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    })
}

/// The `error_description` of a token the crate refused for `kind`.
fn described(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
        ErrorKind::InvalidIssuer => "the token was issued by another issuer",
        ErrorKind::InvalidAudience => "the token is not for this resource (aud)",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim (exp, iss or aud)",
        ErrorKind::InvalidAlgorithm => "the token's algorithm is not one its signing key allows",
        _ => "the token is malformed",
    }
}

/// `text` with every character an RFC 6750 §3 quoted attribute may not
/// hold (`"`, `\`, anything outside visible ASCII and space) made `?`.
fn quotable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == ' ' || (c.is_ascii_graphic() && c != '"' && c != '\\') {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// The audience's path, when it has one other than `/`.
fn audience_path(audience: &str) -> Option<String> {
    let url = reqwest::Url::parse(audience).ok()?;
    let path = url.path().trim_end_matches('/');
    (!path.is_empty()).then(|| path.to_owned())
}

/// The URL of the metadata of the resource `audience` (RFC 9728 §3.1):
/// the well-known path inserted between its host and its path.
fn metadata_url(audience: &str) -> String {
    let Ok(url) = reqwest::Url::parse(audience) else {
        return METADATA_PATH.to_owned();
    };
    let origin = url.origin().ascii_serialization();
    format!(
        "{origin}{METADATA_PATH}{}",
        audience_path(audience).unwrap_or_default()
    )
}

/// Where the metadata of `issuer` is looked for, in order: RFC 8414 §3.1's
/// well-known URL (inserted before the issuer's path), OpenID Connect's
/// inserted so too, and OpenID Connect Discovery 1.0 §4's (appended to
/// the issuer); without a path, the first two coincide with their root
/// forms.
fn discovery_urls(issuer: &str) -> Vec<String> {
    let Ok(url) = reqwest::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut urls = vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        urls.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    urls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_insert_the_well_known_path_before_the_resource_path() {
        assert_eq!(
            metadata_url("https://gw.example.com/mcp"),
            "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8787/"),
            "http://127.0.0.1:8787/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn issuer_metadata_is_looked_for_as_rfc_8414_then_openid_connect() {
        assert_eq!(
            discovery_urls("https://as.example.com"),
            [
                "https://as.example.com/.well-known/oauth-authorization-server",
                "https://as.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            discovery_urls("https://as.example.com/tenant/1"),
            [
                "https://as.example.com/.well-known/oauth-authorization-server/tenant/1",
                "https://as.example.com/.well-known/openid-configuration/tenant/1",
                "https://as.example.com/tenant/1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn a_jwks_key_verifies_only_the_algorithms_of_its_kind() {
        let rsa: Jwk = serde_json::from_value(json!({
            "kty": "RSA", "kid": "r", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw",
            "e": "AQAB",
        }))
        .unwrap();
        let key = key_of(&rsa).unwrap();
        assert!(key.algorithms.contains(&Algorithm::RS256));
        assert!(!key.algorithms.contains(&Algorithm::HS256));
        // Named `alg`: that one alone; a mismatched one: the key is left out.
        let mut named = rsa.clone();
        named.common.key_algorithm = Some(KeyAlgorithm::PS256);
        assert_eq!(key_of(&named).unwrap().algorithms, [Algorithm::PS256]);
        named.common.key_algorithm = Some(KeyAlgorithm::HS256);
        assert!(key_of(&named).is_none());
        // A symmetric key in a JWKS is never taken.
        let oct: Jwk =
            serde_json::from_value(json!({ "kty": "oct", "kid": "s", "k": "c2VjcmV0" })).unwrap();
        assert!(key_of(&oct).is_none());
        // Nor one for encryption.
        let mut encrypting = rsa;
        encrypting.common.public_key_use = Some(PublicKeyUse::Encryption);
        assert!(key_of(&encrypting).is_none());
    }

    #[test]
    fn descriptions_fit_a_quoted_header_attribute() {
        assert_eq!(quotable("a \"b\" \\ é"), "a ?b? ? ?");
    }
}

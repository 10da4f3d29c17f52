//! `mcp-hints gateway serve` with `[auth]`, an OAuth 2.1 resource server,
//! against an authorization server on loopback (tests/fixtures/oauth_issuer.py,
//! PyJWT and `cryptography` in the venv tests/peers installs): its
//! Protected Resource Metadata, a token from the issuer's token endpoint
//! used by the official MCP Python SDK's client, the SDK signing in by
//! itself with its own OAuth support (discovery, registration, PKCE,
//! `resource`, refresh), every kind of bad token refused with its RFC 6750
//! answer, the issuer's keys followed through a rotation, and no token
//! ever sent on to an upstream.

mod peers;
mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use peers::{HttpPeer, free_port, installed};
use serde_json::{Value, json};
use support::{SETTLE, ServedGateway, notes_server, wait_for};

/// A `[[client]]` token beside `[auth]`.
const STATIC_TOKEN: &str = "static-client-token-8d21";

/// A scratch directory of its own for each test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("gateway-oauth")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One HTTP/1.1 exchange with 127.0.0.1:`port` (`Connection: close`):
/// the status, the headers (names lowercase) and the body.
fn exchange(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, BTreeMap<String, String>, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

/// The fixture issuer, serving at http://127.0.0.1:PORT.
struct Issuer {
    _peer: HttpPeer,
    port: u16,
}

impl Issuer {
    fn start(args: &[&str]) -> Issuer {
        let port = free_port();
        let peer = HttpPeer::start(
            Command::new(installed().python())
                .arg(peers::fixture("oauth_issuer.py"))
                .arg(port.to_string())
                .args(args),
            port,
        );
        Issuer { _peer: peer, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn post(&self, path: &str, body: &str, kind: &str) -> Value {
        let (status, _, body) = exchange(self.port, "POST", path, &[("Content-Type", kind)], body);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// A token as `/mint` makes it (see the fixture's docs).
    fn mint(&self, asked: Value) -> String {
        self.post("/mint", &asked.to_string(), "application/json")["token"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// How often its JWKS was fetched.
    fn jwks_fetches(&self) -> u64 {
        let (_, _, body) = exchange(self.port, "GET", "/stats", &[], "");
        serde_json::from_str::<Value>(&body).unwrap()["jwks_fetches"]
            .as_u64()
            .unwrap()
    }

    /// The requests it has served, in order (see the fixture's docs).
    fn requests(&self) -> Vec<Value> {
        let (_, _, body) = exchange(self.port, "GET", "/requests", &[], "");
        serde_json::from_str::<Value>(&body).unwrap()["requests"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn metadata_fetches(&self) -> u64 {
        let (_, _, body) = exchange(self.port, "GET", "/stats", &[], "");
        serde_json::from_str::<Value>(&body).unwrap()["metadata_fetches"]
            .as_u64()
            .unwrap()
    }
}

/// A running gateway on 127.0.0.1:`port` ([`ServedGateway`]).
struct Gateway {
    served: ServedGateway,
    port: u16,
}

impl std::ops::Deref for Gateway {
    type Target = ServedGateway;

    fn deref(&self) -> &ServedGateway {
        &self.served
    }
}

impl Gateway {
    /// Writes `config` to DIR/gateway.toml and serves it; waits (90 s at
    /// most) until it says where it serves.
    fn start(dir: &Path, port: u16, config: &str) -> Gateway {
        let path = dir.join("gateway.toml");
        std::fs::write(&path, config).unwrap();
        Gateway {
            served: ServedGateway::serve(&path, &[]),
            port,
        }
    }

    /// The status and `WWW-Authenticate` of a POST to `/mcp` with `token`
    /// (none when empty): an `initialize`, so a token let in gets 200.
    fn initialize(&self, token: &str) -> (u16, Option<String>) {
        let authorization = format!("Bearer {token}");
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if !token.is_empty() {
            headers.push(("Authorization", &authorization));
        }
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "gateway-oauth-test", "version": "0" },
            },
        });
        let (status, headers, _) = exchange(self.port, "POST", "/mcp", &headers, &body.to_string());
        (status, headers.get("www-authenticate").cloned())
    }

    /// Runs the Python SDK client (tests/fixtures/gateway_client.py) with
    /// `token` and `ops` on one session.
    fn python(&self, token: &str, ops: &Value) -> Value {
        let output = Command::new(installed().python())
            .arg(peers::fixture("gateway_client.py"))
            .args([&self.url, token, "auto", &ops.to_string()])
            .output()
            .expect("python runs");
        assert!(
            output.status.success(),
            "the Python client failed ({}):\n{}\n--- gateway stderr ---\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            self.stderr.lock().unwrap().join("\n")
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// Runs tests/fixtures/oauth_client.py: the Python SDK signs in by
    /// itself, with `redirect_uri`, and runs `ops` on one session.
    fn python_signing_in(&self, redirect_uri: &str, ops: &Value) -> Value {
        let output = Command::new(installed().python())
            .arg(peers::fixture("oauth_client.py"))
            .args([&self.url, redirect_uri, &ops.to_string()])
            .output()
            .expect("python runs");
        assert!(
            output.status.success(),
            "the Python client failed ({}):\n{}\n--- gateway stderr ---\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            self.stderr.lock().unwrap().join("\n")
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "op": "call", "name": name, "arguments": arguments })
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// `Bearer realm="mcp", resource_metadata="..."` and `rest` after it: the
/// challenge of a gateway at `port`.
fn challenge(port: u16, rest: &str) -> String {
    format!(
        "Bearer realm=\"mcp\", resource_metadata=\"http://127.0.0.1:{port}/.well-known/\
         oauth-protected-resource/mcp\"{rest}"
    )
}

fn invalid(port: u16, why: &str) -> (u16, Option<String>) {
    (
        401,
        Some(challenge(
            port,
            &format!(", error=\"invalid_token\", error_description=\"{why}\""),
        )),
    )
}

#[test]
fn issuer_tokens_reach_tools_scopes_pick_rules_and_bad_tokens_are_refused_by_kind() {
    let dir = scratch("tokens");
    let issuer = Issuer::start(&[]);
    let upstream_port = free_port();
    let headers_seen = dir.join("upstream-headers.jsonl");
    let _upstream = HttpPeer::start(
        Command::new(installed().python())
            .arg(peers::fixture("python_sdk_server.py"))
            .args(["http", &upstream_port.to_string(), "--record-headers"])
            .arg(&headers_seen),
        upstream_port,
    );
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let config = format!(
        r#"[listen]
http = "127.0.0.1:{port}"

[[client]]
principal = "alice"
token = "{STATIC_TOKEN}"

[auth]
issuer = "{issuer}"
audience = "{audience}"
scopes = ["notes:read"]
jwks_min_refresh_secs = 1

[log]
path = "audit.jsonl"

[policy]
default = "deny"

[[upstream]]
name = "py"
url = "http://127.0.0.1:{upstream_port}/mcp"
trusted = true

[[rule]]
action = "allow"
tool = "lookup"

[[rule]]
action = "allow"
tool = "append"
scope = "notes:write"
"#,
        issuer = issuer.url(),
    );
    let gateway = Gateway::start(&dir, port, &config);

    // The Protected Resource Metadata, at the root and path-suffixed.
    let document = json!({
        "resource": audience,
        "authorization_servers": [issuer.url()],
        "bearer_methods_supported": ["header"],
        "resource_name": "mcp-hints-gateway",
        "scopes_supported": ["notes:read", "notes:write"],
    });
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let (status, headers, body) = exchange(port, "GET", path, &[], "");
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), document);
    }

    // No token: 401 naming the metadata and the scope wanted, no error code.
    assert_eq!(
        gateway.initialize(""),
        (401, Some(challenge(port, ", scope=\"notes:read\"")))
    );

    // A token from the issuer's token endpoint (client credentials, RFC
    // 8707 resource), used by the Python SDK's client.
    let granted = |client: &str, scope: &str| {
        let form = format!(
            "grant_type=client_credentials&client_id={client}&scope={}&resource={}",
            scope.replace(' ', "%20"),
            audience.replace(':', "%3A").replace('/', "%2F")
        );
        issuer.post("/token", &form, "application/x-www-form-urlencoded")["access_token"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let writer = granted("carol", "notes:read notes:write");
    let session = gateway.python(
        &writer,
        &json!([
            { "op": "list" },
            call("py__lookup", json!({ "name": "a" })),
            call("py__append", json!({ "name": "a", "line": "x" })),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    let names: Vec<&str> = results[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["py__append", "py__lookup"]);
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(text(&results[1]), "note a");
    assert_eq!(results[2]["isError"], false, "{}", results[2]);
    assert_eq!(text(&results[2]), "appended to a");

    // Without `notes:write` the scoped allow does not match: the default
    // denies. A `[[client]]` token holds no scopes: the same.
    let reader = granted("dave", "notes:read");
    for token in [reader.as_str(), STATIC_TOKEN] {
        let session = gateway.python(
            token,
            &json!([
                call("py__lookup", json!({ "name": "b" })),
                call("py__append", json!({ "name": "b", "line": "y" })),
            ]),
        );
        let results = session["results"].as_array().unwrap();
        assert_eq!(results[0]["isError"], false, "{}", results[0]);
        assert_eq!(results[1]["isError"], true, "{}", results[1]);
        assert!(
            text(&results[1]).contains("policy.default"),
            "{}",
            results[1]
        );
    }
    let log = wait_for(
        SETTLE,
        || std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default(),
        |log| log.lines().count() >= 8,
    );
    let principals: Vec<(String, String, String)> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|entry| entry["phase"] == "decided")
        .map(|entry| {
            (
                entry["principal"].as_str().unwrap().to_owned(),
                entry["tool"].as_str().unwrap().to_owned(),
                entry["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("carol", "lookup", "allow"),
        ("carol", "append", "allow"),
        ("dave", "lookup", "allow"),
        ("dave", "append", "deny"),
        ("alice", "lookup", "allow"),
        ("alice", "append", "deny"),
    ]
    .map(|(p, t, d)| (p.to_owned(), t.to_owned(), d.to_owned()));
    assert_eq!(principals, expected);

    // Every bad token, with the claims it would otherwise pass with.
    let good = json!({ "aud": audience, "scope": "notes:read" });
    let with = |overrides: Value| {
        let mut claims = good.clone();
        for (name, value) in overrides.as_object().unwrap() {
            claims[name] = value.clone();
        }
        claims
    };
    let t = now();
    let cases = [
        (
            "expired",
            json!({ "claims": with(json!({ "iat": t - 7200, "nbf": t - 7200, "exp": t - 3600 })) }),
            invalid(port, "the token has expired"),
        ),
        (
            "not yet valid",
            json!({ "claims": with(json!({ "nbf": t + 3600 })) }),
            invalid(port, "the token is not valid yet (nbf)"),
        ),
        (
            "wrong audience",
            json!({ "claims": with(json!({ "aud": "http://127.0.0.1:1/other" })) }),
            invalid(port, "the token is not for this resource (aud)"),
        ),
        (
            "no audience",
            json!({ "claims": with(json!({ "aud": null })) }),
            invalid(port, "the token lacks a required claim (exp, iss or aud)"),
        ),
        (
            "wrong issuer",
            json!({ "claims": with(json!({ "iss": "http://127.0.0.1:1" })) }),
            invalid(port, "the token was issued by another issuer"),
        ),
        (
            "bad signature",
            json!({ "claims": good, "key": "stranger", "kid": "key-1" }),
            invalid(port, "the token's signature does not verify"),
        ),
        (
            "alg none",
            json!({ "claims": good, "alg": "none" }),
            invalid(
                port,
                "the token is not a JWT signed with a supported algorithm (alg none is refused)",
            ),
        ),
        (
            "HS256 keyed with the RSA public key",
            json!({ "claims": good, "alg": "HS256" }),
            invalid(
                port,
                "the token's algorithm is not one its signing key allows",
            ),
        ),
    ];
    for (what, asked, expected) in cases {
        let token = issuer.mint(asked);
        assert_eq!(gateway.initialize(&token), expected, "{what}");
    }
    assert_eq!(
        gateway.initialize("not-a-jwt-and-no-clients-token"),
        invalid(
            port,
            "the token is not a JWT signed with a supported algorithm (alg none is refused)"
        ),
        "a token that is neither"
    );
    // Short of the required scope: 403.
    let token = issuer.mint(json!({ "claims": with(json!({ "scope": "notes:write" })) }));
    assert_eq!(
        gateway.initialize(&token),
        (
            403,
            Some(challenge(
                port,
                ", error=\"insufficient_scope\", scope=\"notes:read\", \
                 error_description=\"the token lacks the scope notes:read\""
            ))
        )
    );

    // An unknown key id: one JWKS fetch more (past the minimum interval),
    // then 401; more of them within the interval fetch nothing.
    std::thread::sleep(Duration::from_millis(1200));
    let before = issuer.jwks_fetches();
    let unknown = issuer.mint(json!({ "claims": good, "key": "stranger", "kid": "key-404" }));
    let refused = invalid(
        port,
        "the token names a signing key the issuer does not list",
    );
    assert_eq!(gateway.initialize(&unknown), refused);
    assert_eq!(issuer.jwks_fetches(), before + 1);
    for _ in 0..5 {
        assert_eq!(gateway.initialize(&unknown), refused);
    }
    assert_eq!(issuer.jwks_fetches(), before + 1, "a flood of unknown kids");

    // No token reached the upstream: it saw requests, none authorised.
    let seen = std::fs::read_to_string(&headers_seen).unwrap();
    let requests: Vec<Value> = seen
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(requests.len() >= 6, "{seen}");
    for request in &requests {
        assert_eq!(request["authorization"], Value::Null, "{request}");
        assert!(
            !request["headers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|name| name == "authorization"),
            "{request}"
        );
    }
    assert!(!seen.contains(&writer) && !seen.contains(STATIC_TOKEN));
}

#[test]
fn a_rotated_key_is_followed_and_a_retired_one_refused() {
    let dir = scratch("rotation");
    // An issuer with OpenID Connect discovery only: the gateway falls back
    // to it.
    let issuer = Issuer::start(&["--openid-only"]);
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let notes = notes_server().to_string_lossy().into_owned();
    let config = format!(
        r#"[listen]
http = "127.0.0.1:{port}"

[auth]
issuer = "{issuer}"
audience = "{audience}"
jwks_max_age_secs = 2
jwks_min_refresh_secs = 1

[log]
path = "audit.jsonl"

[[upstream]]
name = "notes"
command = [{notes:?}]
"#,
        issuer = issuer.url(),
    );
    let gateway = Gateway::start(&dir, port, &config);
    let claims = json!({ "aud": audience });
    let first = issuer.mint(json!({ "claims": claims }));
    assert_eq!(gateway.initialize(&first), (200, None));
    assert_eq!(issuer.metadata_fetches(), 1);
    assert_eq!(issuer.jwks_fetches(), 1);

    // A new key signs: the gateway fetches the keys once and takes it;
    // the old key, still listed, verifies too.
    std::thread::sleep(Duration::from_millis(1200));
    issuer.post("/rotate", "", "application/json");
    let second = issuer.mint(json!({ "claims": claims }));
    assert_eq!(gateway.initialize(&second), (200, None));
    assert_eq!(issuer.jwks_fetches(), 2);
    assert_eq!(gateway.initialize(&first), (200, None));

    // The old key is retired: once the keys are older than their max age,
    // they are fetched again and a token of the old key is refused.
    issuer.post("/retire", "", "application/json");
    let retired = issuer.mint(json!({ "claims": claims, "key": "retired" }));
    std::thread::sleep(Duration::from_millis(2200));
    assert_eq!(
        gateway.initialize(&retired),
        invalid(
            port,
            "the token names a signing key the issuer does not list"
        )
    );
    assert_eq!(issuer.jwks_fetches(), 3);
    assert_eq!(gateway.initialize(&second), (200, None));
    // Discovery ran once: the JWKS URL is kept.
    assert_eq!(issuer.metadata_fetches(), 1);
}

/// `(method, url, status)` of each request the SDK client made.
fn exchanges(session: &Value) -> Vec<(String, String, u64)> {
    session["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|request| {
            (
                request["method"].as_str().unwrap().to_owned(),
                request["url"].as_str().unwrap().to_owned(),
                request["status"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The query of a `Location` as name-value pairs.
fn query_of(location: &str) -> BTreeMap<String, String> {
    let (_, query) = location.split_once('?').unwrap_or((location, ""));
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| {
            (
                name.to_owned(),
                value.replace("%3A", ":").replace("%2F", "/"),
            )
        })
        .collect()
}

#[test]
fn the_python_sdk_signs_in_through_the_issuer_by_itself_and_refreshes() {
    let dir = scratch("sign-in");
    let port = free_port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    // Tokens live 5 s: the client refreshes after its pause.
    let issuer = Issuer::start(&["--audience", &audience, "--user", "erin", "--lifetime", "5"]);
    let upstream_port = free_port();
    let _upstream = HttpPeer::start(
        Command::new(installed().python())
            .arg(peers::fixture("python_sdk_server.py"))
            .args(["http", &upstream_port.to_string()]),
        upstream_port,
    );
    // No `[auth] scopes`: the challenge names none, so the client asks for
    // every scope the metadata lists, the rules' among them.
    let config = format!(
        r#"[listen]
http = "127.0.0.1:{port}"

[auth]
issuer = "{issuer}"
audience = "{audience}"

[log]
path = "audit.jsonl"

[policy]
default = "deny"

[[upstream]]
name = "py"
url = "http://127.0.0.1:{upstream_port}/mcp"
trusted = true

[[rule]]
action = "allow"
tool = "lookup"
scope = "notes:read"

[[rule]]
action = "allow"
tool = "append"
scope = "notes:write"
"#,
        issuer = issuer.url(),
    );
    let gateway = Gateway::start(&dir, port, &config);
    let prm = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
    assert_eq!(gateway.initialize(""), (401, Some(challenge(port, ""))));

    // Nothing listens at the redirect URI: the client's redirect handler
    // reads the code from the issuer's 302 itself.
    let redirect_uri = format!("http://127.0.0.1:{}/callback", free_port());
    let session = gateway.python_signing_in(
        &redirect_uri,
        &json!([
            { "op": "list" },
            call("py__lookup", json!({ "name": "a" })),
            { "op": "sleep", "seconds": 6 },
            call("py__append", json!({ "name": "a", "line": "x" })),
        ]),
    );
    let results = session["results"].as_array().unwrap();
    assert_eq!(results[0]["tools"], json!(["py__append", "py__lookup"]));
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(text(&results[1]), "note a");
    assert_eq!(results[3]["isError"], false, "{}", results[3]);
    assert_eq!(text(&results[3]), "appended to a");

    // What the client did, in order: refused, then the resource metadata
    // the challenge named, the issuer's metadata, registration, the
    // authorization request, the code exchanged, the request retried; and
    // after the pause a refresh. The gateway refused it once, at first.
    let seen = exchanges(&session);
    let mcp = |status| ("POST".to_owned(), audience.clone(), status);
    let at = |method: &str, url: String, status| (method.to_owned(), url, status);
    let iss = issuer.url();
    assert_eq!(seen[0], mcp(401), "{seen:?}");
    assert_eq!(
        seen[1..7],
        [
            at("GET", prm.clone(), 200),
            at(
                "GET",
                format!("{iss}/.well-known/oauth-authorization-server"),
                200
            ),
            at("POST", format!("{iss}/register"), 201),
            at("GET", format!("{iss}/authorize"), 302),
            at("POST", format!("{iss}/token"), 200),
            mcp(200),
        ],
        "{seen:?}"
    );
    let rest: Vec<_> = seen[7..]
        .iter()
        .filter(|request| **request != mcp(200))
        .collect();
    assert_eq!(rest, [&at("POST", format!("{iss}/token"), 200)], "{seen:?}");
    assert_eq!(seen.iter().filter(|(_, _, s)| *s == 401).count(), 1);

    // The authorization request: PKCE S256, the resource (RFC 8707) the
    // metadata names, the scopes it lists, a state; the redirect brought
    // the code, the state and the issuer (RFC 9207).
    let asked = &session["authorization"]["params"];
    assert_eq!(asked["response_type"], "code");
    assert_eq!(asked["code_challenge_method"], "S256");
    assert_eq!(asked["code_challenge"].as_str().unwrap().len(), 43);
    assert_eq!(asked["resource"], audience.as_str());
    assert_eq!(asked["scope"], "notes:read notes:write");
    assert_eq!(asked["redirect_uri"], redirect_uri.as_str());
    assert!(asked["state"].as_str().unwrap().len() >= 32, "{asked}");
    assert_eq!(
        session["callback"]["params"],
        json!(["code", "iss", "state"])
    );
    // Registered as RFC 7591 defaults it (a secret, sent as HTTP Basic).
    assert_eq!(
        session["client"],
        json!({ "token_endpoint_auth_method": "client_secret_basic", "has_secret": true })
    );
    assert_eq!(
        session["token"],
        json!({ "scope": "notes:read notes:write", "has_refresh_token": true })
    );

    // The issuer saw the same steps, and the gateway's own fetches (its
    // metadata and keys, to verify the first token) apart from them.
    let served = issuer.requests();
    let (by_gateway, by_client): (Vec<&Value>, Vec<&Value>) = served.iter().partition(|request| {
        request["agent"]
            .as_str()
            .is_some_and(|agent| agent.starts_with("mcp-hints-gateway/"))
    });
    let steps = |requests: &[&Value]| -> Vec<String> {
        requests
            .iter()
            .map(|request| {
                let step = format!(
                    "{} {}",
                    request["method"].as_str().unwrap(),
                    request["path"].as_str().unwrap()
                );
                match request["grant_type"].as_str() {
                    Some(grant) => format!(
                        "{step} {grant} for {}",
                        request["resource"].as_str().unwrap_or("-")
                    ),
                    None => step,
                }
            })
            .collect()
    };
    assert_eq!(
        steps(&by_client),
        [
            "GET /.well-known/oauth-authorization-server".to_owned(),
            "POST /register".to_owned(),
            "GET /authorize".to_owned(),
            format!("POST /token authorization_code for {audience}"),
            format!("POST /token refresh_token for {audience}"),
        ]
    );
    assert_eq!(
        steps(&by_gateway),
        ["GET /.well-known/oauth-authorization-server", "GET /jwks"]
    );
    assert_eq!(by_client[1]["redirect_uris"], json!([redirect_uri]));
    assert_eq!(&by_client[2]["params"], asked);

    // The audit log names the principal from the token's `sub`; the scoped
    // rules matched the scopes the client asked for.
    let log = wait_for(
        SETTLE,
        || std::fs::read_to_string(dir.join("audit.jsonl")).unwrap_or_default(),
        |log| log.lines().count() >= 4,
    );
    let decided: Vec<(String, String, String)> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|entry| entry["phase"] == "decided")
        .map(|entry| {
            (
                entry["principal"].as_str().unwrap().to_owned(),
                entry["tool"].as_str().unwrap().to_owned(),
                entry["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        decided,
        [("erin", "lookup", "allow"), ("erin", "append", "allow")].map(|(p, t, d)| (
            p.to_owned(),
            t.to_owned(),
            d.to_owned()
        ))
    );

    // The issuer is strict, so the client did each step right: another
    // resource, or no PKCE, is refused at the authorization endpoint; a
    // wrong code_verifier at the token endpoint; a token for another
    // resource is never issued.
    let registration =
        json!({ "redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none" });
    let (status, _, body) = exchange(
        issuer.port,
        "POST",
        "/register",
        &[("Content-Type", "application/json")],
        &registration.to_string(),
    );
    assert_eq!(status, 201, "{body}");
    let client_id = serde_json::from_str::<Value>(&body).unwrap()["client_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let encoded = |url: &str| url.replace(':', "%3A").replace('/', "%2F");
    let authorize = |resource: &str, pkce: bool| {
        let mut path = format!(
            "/authorize?response_type=code&client_id={client_id}&redirect_uri={}&state=s1&resource={}",
            encoded(&redirect_uri),
            encoded(resource)
        );
        if pkce {
            path.push_str("&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256");
        }
        let (status, headers, body) = exchange(issuer.port, "GET", &path, &[], "");
        assert_eq!(status, 302, "{path}: {body}");
        let location = &headers["location"];
        assert!(location.starts_with(&redirect_uri), "{location}");
        query_of(location)
    };
    let other = authorize("http://127.0.0.1:1/other", true);
    assert_eq!(other["error"], "invalid_target", "{other:?}");
    assert_eq!(other["state"], "s1");
    assert_eq!(authorize(&audience, false)["error"], "invalid_request");
    let granted = authorize(&audience, true);
    assert_eq!(granted["state"], "s1");
    let form = format!(
        "grant_type=authorization_code&client_id={client_id}&code={}&redirect_uri={}&code_verifier={}",
        granted["code"],
        encoded(&redirect_uri),
        "x".repeat(43)
    );
    let kind = [("Content-Type", "application/x-www-form-urlencoded")];
    let (status, _, body) = exchange(issuer.port, "POST", "/token", &kind, &form);
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "invalid_grant"
    );
    let form = format!(
        "grant_type=client_credentials&client_id=c&resource={}",
        encoded("http://127.0.0.1:1/other")
    );
    let (status, _, body) = exchange(issuer.port, "POST", "/token", &kind, &form);
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "invalid_target"
    );
}

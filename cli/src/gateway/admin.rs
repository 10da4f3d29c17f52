//! `mcp-hints gateway approve ID`, `deny ID` and `pending`: the client of
//! the gateway's admin endpoint ([`mcp_hints_gateway::front::serve_admin`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_hints_gateway::approval::{DecideRequest, Parked};
use mcp_hints_gateway::log::rfc3339;
use serde_json::{Value, json};

use crate::table::{Cell, render};
use crate::text::shown;

/// What `mcp-hints gateway approve|deny|pending` asks the admin endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decide {
    /// `POST /approve/{id}`.
    Approve,
    /// `POST /deny/{id}`.
    Deny,
    /// `GET /pending`.
    Pending,
}

/// The environment variable `approve`, `deny` and `pending` read the admin
/// token from.
pub const ADMIN_TOKEN_ENV: &str = "MCP_GATEWAY_ADMIN_TOKEN";

/// The most bytes of an admin endpoint's answer that are read.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// How long the admin client waits for the endpoint: 30 seconds.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The environment variable `approve`, `deny` and `pending` read the admin
/// endpoint's base URL from when neither `--admin` nor `--config` is given.
pub const ADMIN_URL_ENV: &str = "MCP_GATEWAY_ADMIN_URL";

/// `mcp-hints gateway approve ID`, `deny ID` and `pending`: sends the
/// request to the gateway's admin endpoint (its base URL, e.g.
/// `http://127.0.0.1:8788`: `--admin`, else `listen.admin_http` of
/// `--config`, else `$MCP_GATEWAY_ADMIN_URL`) with `Authorization: Bearer`
/// and the token from `$MCP_GATEWAY_ADMIN_TOKEN` (else the `[admin]` token
/// of `--config`), and prints the result: `approved ID`, `denied ID`, or a
/// table of the parked calls with their arguments. Returns exit status 0.
///
/// The endpoint's side: `GET /pending` answers 200 with `{"pending":
/// [Parked, ...]}` ([`Parked`] serialised; a bare array is read too);
/// `POST /approve/{id}` and `POST /deny/{id}` take a [`DecideRequest`] and
/// answer 200 (any JSON body), 404 for an [`ApprovalError::UnknownId`](mcp_hints_gateway::approval::ApprovalError::UnknownId), and
/// every route 401 without the admin token.
///
/// # Errors
///
/// A message (exit status 2): no endpoint given anywhere, a config that
/// cannot be read or names none, no token, no or a bad `ID` for approve
/// and deny, a URL that is not http(s), an endpoint that cannot be
/// reached, 401 (a wrong token), 404 (no such parked call, or no admin
/// endpoint at the URL), any other status, or an answer that is not the
/// shape above.
pub async fn run_decide(
    action: Decide,
    id: Option<&str>,
    by: Option<&str>,
    endpoint: &crate::args::AdminArgs,
) -> Result<u8, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let (admin_url, token) = admin_endpoint(endpoint, &env)?;
    let by = by.map(str::to_owned).or_else(|| env("USER"));
    let out = decide(action, id, &admin_url, &token, by).await?;
    crate::print(&out).map(|()| 0)
}

/// The admin endpoint's base URL and token for `endpoint`'s flags, with
/// the environment given (`env(NAME)`: the variable's non-empty value).
fn admin_endpoint(
    endpoint: &crate::args::AdminArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, String), String> {
    let admin = match &endpoint.config {
        Some(path) => Some(AdminOfConfig::read(path, env)?),
        None => None,
    };
    let url = match (&endpoint.admin, &admin) {
        (Some(url), _) => url.clone(),
        (None, Some(admin)) => admin.url.clone().ok_or_else(|| {
            format!(
                "{}: `listen.admin_http` is not set, so the gateway has no admin endpoint",
                admin.path.display()
            )
        })?,
        (None, None) => env(ADMIN_URL_ENV).ok_or_else(|| {
            format!(
                "give the admin endpoint: --config FILE (the gateway's config), --admin URL, \
                 or {ADMIN_URL_ENV}"
            )
        })?,
    };
    let token = env(ADMIN_TOKEN_ENV)
        .or_else(|| admin.and_then(|admin| admin.token))
        .ok_or_else(|| {
            format!("set {ADMIN_TOKEN_ENV} to the gateway's admin token (its `[admin]` token)")
        })?;
    Ok((url, token))
}

/// What `--config` says of the admin endpoint. Only `listen.admin_http`
/// and `[admin]` are read: an approver needs none of the clients' tokens.
struct AdminOfConfig {
    path: PathBuf,
    /// `http://` and `listen.admin_http`, an unspecified address (`0.0.0.0`,
    /// `::`) reached at loopback.
    url: Option<String>,
    /// `[admin] token`, or the value of the variable `token_env` names.
    token: Option<String>,
}

impl AdminOfConfig {
    fn read(path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<AdminOfConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        let table: toml::Table =
            toml::from_str(&text).map_err(|error| format!("{}: {error}", path.display()))?;
        let string = |section: &str, key: &str| -> Result<Option<String>, String> {
            match table.get(section).and_then(|value| value.get(key)) {
                None => Ok(None),
                Some(toml::Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(format!(
                    "{}: {section}.{key}: expected a string",
                    path.display()
                )),
            }
        };
        let url = match string("listen", "admin_http")? {
            None => None,
            Some(address) => {
                let mut address: std::net::SocketAddr = address.parse().map_err(|_| {
                    format!(
                        "{}: listen.admin_http: `{}` is not IP:PORT",
                        path.display(),
                        shown(&address)
                    )
                })?;
                if address.port() == 0 {
                    return Err(format!(
                        "{}: listen.admin_http has port 0, so only the gateway knows its port: \
                         give --admin with the address its stderr says (`gateway: admin endpoint \
                         at ...`)",
                        path.display()
                    ));
                }
                if address.ip().is_unspecified() {
                    address.set_ip(match address {
                        std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                        std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                    });
                }
                Some(format!("http://{address}"))
            }
        };
        let token = match string("admin", "token")? {
            Some(token) => Some(token),
            None => string("admin", "token_env")?.and_then(|name| env(&name)),
        };
        Ok(AdminOfConfig {
            path: path.to_owned(),
            url,
            token,
        })
    }
}

/// [`run_decide`] with its token and approver given: the text to print.
async fn decide(
    action: Decide,
    id: Option<&str>,
    admin_url: &str,
    token: &str,
    by: Option<String>,
) -> Result<String, String> {
    let base = reqwest::Url::parse(admin_url)
        .map_err(|error| format!("--admin `{}`: not a URL: {error}", shown(admin_url)))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(format!(
            "--admin `{}`: the scheme is `{}`, expected http or https",
            shown(admin_url),
            shown(base.scheme())
        ));
    }
    let id = match (action, id) {
        (Decide::Pending, _) => None,
        (_, None) => return Err("give the ID of the parked call (see `pending`)".to_owned()),
        (_, Some(id)) if valid_id(id) => Some(id),
        (_, Some(id)) => {
            return Err(format!(
                "`{}` is not a call id: ids are letters, digits and `-` (see `pending`)",
                shown(id)
            ));
        }
    };
    let route = match (action, id) {
        (Decide::Approve, Some(id)) => format!("approve/{id}"),
        (Decide::Deny, Some(id)) => format!("deny/{id}"),
        _ => "pending".to_owned(),
    };
    let mut url = base.clone();
    // The routes sit under the URL's path: `http://h/admin` gives
    // `http://h/admin/pending`.
    let path = format!("{}/{route}", base.path().trim_end_matches('/'));
    url.set_path(&path);

    // reqwest is built without a default crypto provider (see
    // src/live/http.rs); install ring's unless one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .user_agent(concat!("mcp-hints/", env!("CARGO_PKG_VERSION")))
        .timeout(ADMIN_TIMEOUT)
        // A redirect would take the admin token to whatever host it names.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| format!("cannot set up an HTTP client: {error}"))?;
    let request = match action {
        Decide::Pending => client.get(url.clone()),
        Decide::Approve | Decide::Deny => client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(json!(DecideRequest { by }).to_string()),
    };
    let mut response = request.bearer_auth(token).send().await.map_err(|error| {
        // reqwest's own text ("error sending request for url") leaves out
        // why: a refused connection, a timeout.
        format!(
            "cannot reach the admin endpoint {url}: {}",
            crate::live::error_chain(&error)
        )
    })?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| format!("{url}: the answer broke off: {error}"))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!(
                "{url}: the answer is over {MAX_ANSWER_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    match status.as_u16() {
        200..=299 => {}
        401 => {
            return Err(format!(
                "{url}: 401 Unauthorized: the admin endpoint refused the token in \
                 {ADMIN_TOKEN_ENV}"
            ));
        }
        404 => {
            return Err(match id {
                Some(id) => format!(
                    "{url}: 404: no parked call `{id}`: it was decided, expired or abandoned \
                     already, or never parked (see `pending`)"
                ),
                None => format!("{url}: 404: no admin endpoint here"),
            });
        }
        _ => {
            return Err(format!(
                "{url}: {status}: {}",
                shown(String::from_utf8_lossy(&body).trim())
            ));
        }
    }
    match (action, id) {
        (Decide::Approve, Some(id)) => Ok(format!("approved {id}\n")),
        (Decide::Deny, Some(id)) => Ok(format!("denied {id}\n")),
        _ => {
            let answer: Value = serde_json::from_slice(&body)
                .map_err(|error| format!("{url}: the answer is not JSON: {error}"))?;
            let list = match answer {
                Value::Object(mut object) => object.remove("pending").unwrap_or(Value::Null),
                other => other,
            };
            let calls: Vec<Parked> = serde_json::from_value(list)
                .map_err(|error| format!("{url}: not a list of parked calls: {error}"))?;
            Ok(pending_text(&calls))
        }
    }
}

/// A call id as the gateway makes them (a UUID), kept to what is safe in a
/// URL path.
fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The parked calls as a table, every field escaped and cut (by [`Cell`]).
fn pending_text(calls: &[Parked]) -> String {
    if calls.is_empty() {
        return "no parked calls\n".to_owned();
    }
    let rows: Vec<Vec<Cell>> = calls
        .iter()
        .map(|call| {
            vec![
                Cell::plain(&call.id),
                Cell::plain(&call.principal),
                Cell::plain(&call.upstream),
                Cell::plain(&call.tool),
                Cell::plain(&rfc3339::format(call.expires_at)),
                Cell::plain(&call.reason),
                Cell::plain(&Value::Object(call.arguments.clone()).to_string()),
            ]
        })
        .collect();
    let mut out = render(
        &[
            "ID",
            "PRINCIPAL",
            "UPSTREAM",
            "TOOL",
            "EXPIRES",
            "REASON",
            "ARGUMENTS",
        ],
        &rows,
    );
    out.push_str(&format!(
        "{} parked\n",
        crate::text::count(calls.len(), "call", "calls")
    ));
    out
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A parked call of `id` as `GET /pending` answers it, parked
    /// `parked_at` seconds after the epoch for a minute.
    fn call(id: &str, parked_at: u64) -> Parked {
        serde_json::from_value(json!({
            "id": id,
            "principal": "alice",
            "upstream": "memory",
            "tool": "delete_entities",
            "arguments": { "entityNames": ["a", "b"] },
            "parked_at": rfc3339::format(UNIX_EPOCH + Duration::from_secs(parked_at)),
            "expires_at": rfc3339::format(UNIX_EPOCH + Duration::from_secs(parked_at + 60)),
            "reason": "rule[1] (require_approval *delete*)",
        }))
        .unwrap()
    }

    #[test]
    fn pending_lists_every_parked_call_oldest_first_with_its_arguments() {
        let pending = [call("c", 10), call("b", 20), call("a", 30)];
        let text = pending_text(&pending);
        assert!(text.lines().nth(1).unwrap().starts_with("c  "), "{text}");
        assert!(text.contains(r#"{"entityNames":["a","b"]}"#), "{text}");
        assert!(text.ends_with("3 calls parked\n"), "{text}");
    }

    /// Serves one HTTP request on a local port with `status` and `body`,
    /// and hands back the request's text.
    async fn one_answer(status: &str, body: &str) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        let served = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buffer = [0; 4096];
            // Headers, then the body its content-length announces.
            loop {
                let n = stream.read(&mut buffer).await.unwrap();
                request.extend_from_slice(&buffer[..n]);
                let text = String::from_utf8_lossy(&request);
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length: "))
                        .map_or(0, |n| n.trim().parse::<usize>().unwrap());
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            stream.write_all(answer.as_bytes()).await.unwrap();
            String::from_utf8(request).unwrap()
        });
        (url, served)
    }

    #[tokio::test]
    async fn the_admin_client_sends_the_token_and_prints_the_answer() {
        let (url, served) = one_answer("200 OK", "{}").await;
        let out = decide(
            Decide::Approve,
            Some("c-1"),
            &url,
            "s3cret",
            Some("carol".into()),
        )
        .await
        .unwrap();
        assert_eq!(out, "approved c-1\n");
        let request = served.await.unwrap();
        assert!(
            request.starts_with("POST /approve/c-1 HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(
            request.contains("authorization: Bearer s3cret\r\n"),
            "{request}"
        );
        assert!(request.ends_with(r#"{"by":"carol"}"#), "{request}");

        let listed = json!({ "pending": [serde_json::to_value(call("c-2", 0)).unwrap()] });
        let (url, served) = one_answer("200 OK", &listed.to_string()).await;
        let out = decide(
            Decide::Pending,
            None,
            &format!("{url}/admin/"),
            "s3cret",
            None,
        )
        .await
        .unwrap();
        assert!(
            served
                .await
                .unwrap()
                .starts_with("GET /admin/pending HTTP/1.1\r\n")
        );
        assert!(
            out.contains("c-2") && out.ends_with("1 call parked\n"),
            "{out}"
        );

        let (url, _served) = one_answer("200 OK", "[]").await;
        let out = decide(Decide::Pending, None, &url, "s3cret", None)
            .await
            .unwrap();
        assert_eq!(out, "no parked calls\n");
    }

    #[tokio::test]
    async fn the_admin_client_names_401_404_and_bad_input() {
        let (url, _served) = one_answer("401 Unauthorized", "").await;
        let error = decide(Decide::Deny, Some("c-1"), &url, "wrong", None)
            .await
            .unwrap_err();
        assert!(
            error.contains(
                "401 Unauthorized: the admin endpoint refused the token in MCP_GATEWAY_ADMIN_TOKEN"
            ),
            "{error}"
        );
        let (url, _served) = one_answer("404 Not Found", "").await;
        let error = decide(Decide::Approve, Some("c-9"), &url, "t", None)
            .await
            .unwrap_err();
        assert!(error.contains("404: no parked call `c-9`"), "{error}");
        let (url, _served) = one_answer("500 Internal Server Error", "boom\u{1b}[2J").await;
        let error = decide(Decide::Pending, None, &url, "t", None)
            .await
            .unwrap_err();
        assert!(
            error.ends_with("500 Internal Server Error: boom\\u{1b}[2J"),
            "{error}"
        );

        let error = decide(Decide::Approve, None, "http://127.0.0.1:1", "t", None)
            .await
            .unwrap_err();
        assert_eq!(error, "give the ID of the parked call (see `pending`)");
        let error = decide(
            Decide::Approve,
            Some("../pending"),
            "http://127.0.0.1:1",
            "t",
            None,
        )
        .await
        .unwrap_err();
        assert!(error.contains("is not a call id"), "{error}");
        let error = decide(Decide::Pending, None, "ftp://host", "t", None)
            .await
            .unwrap_err();
        assert!(error.contains("expected http or https"), "{error}");
    }
}

//! The approvals page of the admin endpoint, end to end: a gateway in
//! front of an in-process upstream, a `require_approval` rule, rmcp's
//! client making calls that park, and
//!
//! - over plain HTTP: the sign-in form, its cookie and CSRF tokens, the
//!   server-sent events, decisions with the cookie (and their refusal
//!   without the token), the bearer-token API beside them, and the
//!   webhook of parked calls (a receiver that answers, one that is down,
//!   one that hangs);
//! - in headless Chromium through chromedriver (WebDriver): sign in, see a
//!   call appear without a reload, its arguments shown as text, Approve
//!   (the client's call completes), Deny (the client is refused), and a
//!   forged POST from another loopback origin refused while the call
//!   stays parked. The page with a parked call is saved as a screenshot
//!   (`docs/approvals-page.png` with `MCP_HINTS_UPDATE_SCREENSHOT=1`);
//! - signing in through an OAuth issuer (the fixture issuer of
//!   cli/tests/fixtures, on loopback): in Chromium, the button, the
//!   issuer's consent, back signed in as its user, who approves a call
//!   the audit log then names them for; a forged callback and a user
//!   without the approver scope refused; over plain HTTP, every answer
//!   the callback must refuse (a wrong or spent state, another issuer,
//!   no `iss`, an error redirect, a code the issuer will not exchange, an
//!   expired token), none of them signing anyone in.

// The fixture OAuth issuer's venv, installed once for both crates' tests.
#[path = "../../cli/tests/peers/mod.rs"]
mod peers;
mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcp_hints_gateway::front::serve_admin;
use serde_json::{Value, json};
use support::{
    BOUND, Echo, Served, call, client, log_lines, scratch_dir, serve_gateway_with_env, text,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const ALICE: &str = "page-test-alice-token";
const ADMIN: &str = "page-test-admin-token";

/// What an argument carrying markup must show as: text, never elements.
const MARKUP: &str = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=1\">";

/// A loopback address no listener holds now.
fn free_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A gateway whose `up__note` calls park for an approver (rule 0), its
/// `openWorldHint` asserted, with `extra` tables, and its admin endpoint.
struct Stage {
    served: Served,
    admin: SocketAddr,
    calls: Arc<AtomicUsize>,
    _dir: PathBuf,
    stop: CancellationToken,
}

impl Stage {
    async fn start(name: &str, extra: &str) -> Stage {
        Stage::start_with(name, free_address(), extra, &|_| None).await
    }

    /// [`Stage::start`], its admin endpoint at `admin`, the `*_env` keys
    /// read from `env`.
    async fn start_with(
        name: &str,
        admin: SocketAddr,
        extra: &str,
        env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Stage {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let stop = CancellationToken::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let upstream = Echo {
            calls: calls.clone(),
            note: true,
        };
        let url = support::serve_upstream(upstream, stop.clone()).await;
        let dir = scratch_dir(name);
        let log = dir.join("audit.jsonl");
        let rules = format!(
            r#"
[admin]
token = "{ADMIN}"

[[assert]]
upstream = "up"
tool = "note"
openWorldHint = true

[[rule]]
action = "require_approval"
tool = "note"
timeout_secs = 300
{extra}"#
        );
        let config = support::alice_config(ALICE, &log, &url, &rules);
        let served = serve_gateway_with_env(&dir, name, &config, env, &stop).await;
        serve_admin(served.gateway.clone(), admin).await.unwrap();
        Stage {
            served,
            admin,
            calls,
            _dir: dir,
            stop,
        }
    }

    /// Alice calls `up__note` with `text` in a task of its own; returns
    /// once the call is parked, with its id.
    async fn park(
        &self,
        text: &str,
    ) -> (String, tokio::task::JoinHandle<rmcp::model::CallToolResult>) {
        let before: Vec<String> = self.pending().await.iter().map(id_of).collect();
        let alice = client(self.served.address, ALICE).await;
        let text = text.to_owned();
        let task = tokio::spawn(async move {
            let result = call(&alice, "up__note", &text).await;
            let _ = alice.cancel().await;
            result
        });
        let id = poll("the call to be parked", || async {
            self.pending()
                .await
                .iter()
                .map(id_of)
                .find(|id| !before.contains(id))
        })
        .await;
        (id, task)
    }

    /// `GET /pending` with the admin token.
    async fn pending(&self) -> Vec<Value> {
        let answer = http()
            .get(format!("http://{}/pending", self.admin))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        let body: Value = answer.json_value().await;
        body["pending"].as_array().cloned().unwrap_or_default()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin)
    }

    /// The audit log.
    fn log(&self) -> PathBuf {
        self._dir.join("audit.jsonl")
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

fn id_of(call: &Value) -> String {
    call["id"].as_str().unwrap_or_default().to_owned()
}

/// Reads a JSON body (reqwest is built without its `json` feature here).
trait JsonValue {
    async fn json_value(self) -> Value;
}

impl JsonValue for reqwest::Response {
    async fn json_value(self) -> Value {
        let text = self.text().await.unwrap();
        serde_json::from_str(&text).unwrap_or_else(|error| panic!("{error}: {text}"))
    }
}

/// A client that follows no redirect, so a 303 is seen as one.
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Polls `check` every 50 ms until it gives a value, for at most
/// [`BOUND`].
async fn poll<T, F: Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {BOUND:?} for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `NAME=VALUE` of a `Set-Cookie` answer, and the whole header.
fn set_cookie(answer: &reqwest::Response) -> (String, String) {
    let header = answer
        .headers()
        .get("set-cookie")
        .expect("a Set-Cookie header")
        .to_str()
        .unwrap()
        .to_owned();
    let pair = header.split(';').next().unwrap().to_owned();
    (pair, header)
}

/// The value of `<input name="csrf" value="...">` in a page.
fn csrf_in(page: &str) -> String {
    let start = page.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
    page[start..][..64].to_owned()
}

/// Reads `GET /events` with `cookie` until a `pending` event whose data
/// holds `needle`; returns that data.
async fn event_with(admin: SocketAddr, cookie: &str, needle: &str) -> String {
    let mut answer = http()
        .get(format!("http://{admin}/events"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut received = String::new();
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        // Each event ends with a blank line.
        while let Some(end) = received.find("\n\n") {
            let event: String = received.drain(..end + 2).collect();
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data: ").or(line.strip_prefix("data:")))
                .collect();
            let data = data.join("\n");
            if event.starts_with("event: pending") && data.contains(needle) {
                return data;
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let chunk = tokio::time::timeout(left, answer.chunk())
            .await
            .unwrap_or_else(|_| panic!("no `pending` event with {needle:?} within {BOUND:?}"))
            .unwrap()
            .expect("the event stream ended");
        received.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_signs_in_with_the_token_and_its_decisions_need_its_csrf_token() {
    let stage = Stage::start("page-http", "").await;

    // The sign-in form comes with an anonymous session: a random id, not
    // the token, in a cookie scripts cannot read and other sites do not
    // send (no `Secure`: a loopback endpoint is plain HTTP).
    let form = http().get(stage.url("/")).send().await.unwrap();
    assert_eq!(form.status(), 303);
    assert_eq!(form.headers()["location"], "/approvals");
    let form = http().get(stage.url("/approvals")).send().await.unwrap();
    assert_eq!(form.status(), 200);
    let csp = form.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(form.headers()["x-frame-options"], "DENY");
    let (cookie, header) = set_cookie(&form);
    assert_eq!(
        header,
        format!("{cookie}; HttpOnly; SameSite=Strict; Path=/"),
        "{header}"
    );
    let (name, id) = cookie.split_once('=').unwrap();
    assert_eq!(name, "mcp-hints-approver");
    assert_eq!(id.len(), 64);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()) && !id.contains(ADMIN));
    let page = form.text().await.unwrap();
    let csrf = csrf_in(&page);
    assert!(page.contains("name=\"token\""), "{page}");

    // The sign-in needs the form's own token, then the admin token.
    let post = |body: String, cookie: Option<String>| {
        let mut request = http()
            .post(stage.url("/sign-in"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        request.send()
    };
    let without_token = post(format!("token={ADMIN}"), Some(cookie.clone()))
        .await
        .unwrap();
    assert_eq!(without_token.status(), 403);
    let without_form = post(format!("csrf={csrf}&token={ADMIN}"), None)
        .await
        .unwrap();
    assert_eq!(without_form.status(), 403);
    let wrong = post(format!("csrf={csrf}&token=guess"), Some(cookie.clone()))
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong
            .text()
            .await
            .unwrap()
            .contains("That is not the admin token.")
    );
    let signed = post(
        format!("csrf={csrf}&token={ADMIN}&name=carol"),
        Some(cookie.clone()),
    )
    .await
    .unwrap();
    assert_eq!(signed.status(), 303);
    let (session, _) = set_cookie(&signed);
    assert_ne!(session, cookie, "a sign-in takes a new session id");
    let old = http()
        .get(stage.url("/events"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 401, "the form's session id signs nothing in");
    let page = http()
        .get(stage.url("/approvals"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Signed in as <strong>carol</strong>"),
        "{page}"
    );
    let csrf = csrf_in(&page);

    // A parked call reaches an open event stream, escaped.
    let (id, parked) = stage.park(MARKUP).await;
    let data = event_with(stage.admin, &session, &id).await;
    assert!(
        !data.contains("<script>") && !data.contains("<img"),
        "{data}"
    );
    assert!(
        data.contains("&lt;script&gt;window.__xss=1&lt;/script&gt;&lt;img src=x onerror=\\&quot;"),
        "{data}"
    );
    assert!(data.contains("source-asserted\">asserted"), "{data}");

    // With the cookie but without the session's CSRF token: refused, and
    // the call stays parked.
    let decide = |verb: &str, token: Option<&str>| {
        let mut request = http()
            .post(stage.url(&format!("/{verb}/{id}")))
            .header("cookie", &session);
        if let Some(token) = token {
            request = request.header("x-csrf-token", token);
        }
        request.send()
    };
    for token in [None, Some("0".repeat(64).as_str())] {
        let refused = decide("approve", token).await.unwrap();
        assert_eq!(refused.status(), 403);
        assert!(
            refused.json_value().await["error"]
                .as_str()
                .unwrap()
                .contains("CSRF token")
        );
    }
    let form_without = http()
        .post(stage.url(&format!("/approve/{id}")))
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(form_without.status(), 403);
    // From another origin (another port of the same host is the same site,
    // so the cookie would come along): refused before any route.
    let cross = http()
        .post(stage.url(&format!("/approve/{id}")))
        .header("cookie", &session)
        .header("x-csrf-token", &csrf)
        .header("origin", "http://127.0.0.1:1")
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    assert!(stage.pending().await.iter().any(|call| id_of(call) == id));
    assert_eq!(stage.calls.load(Ordering::SeqCst), 0);

    // With it: denied by the approver who signed in.
    let denied = decide("deny", Some(&csrf)).await.unwrap();
    assert_eq!(denied.status(), 200);
    assert_eq!(
        denied.json_value().await,
        json!({"id": id, "decision": "denied"})
    );
    let refused = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("was denied by carol"),
        "{}",
        text(&refused)
    );

    // A form without the script: back to the page.
    let (id, parked) = stage.park("by form").await;
    let by_form = http()
        .post(stage.url(&format!("/approve/{id}")))
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_form.status(), 303);
    let done = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(text(&done), "noted: by form");

    // The bearer-token API, as `mcp-hints gateway approve` sends it, needs
    // no CSRF token.
    let (id, parked) = stage.park("by token").await;
    let approved = http()
        .post(stage.url(&format!("/approve/{id}")))
        .bearer_auth(ADMIN)
        .header("content-type", "application/json")
        .body(r#"{"by": "cli"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    let done = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(text(&done), "noted: by token");
    // A wrong bearer token is not rescued by a cookie.
    let wrong = http()
        .post(stage.url("/approve/x"))
        .bearer_auth("guess")
        .header("cookie", &session)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    // Signing out needs the token too, and ends the session.
    let out = http()
        .post(stage.url("/sign-out"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 403);
    let out = http()
        .post(stage.url("/sign-out"))
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    assert!(set_cookie(&out).1.contains("Max-Age=0"));
    let gone = http()
        .get(stage.url("/events"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 401);
    assert_eq!(stage.calls.load(Ordering::SeqCst), 2);
}

/// A webhook receiver on a free loopback port: each body POSTed to
/// `/parked` is sent on the channel.
async fn receiver(stop: &CancellationToken) -> (SocketAddr, mpsc::UnboundedReceiver<Value>) {
    let (sender, received) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/parked",
        axum::routing::post(move |body: bytes::Bytes| {
            let sender = sender.clone();
            async move {
                let _ = sender.send(serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    (address, received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_parked_call_is_posted_to_the_webhook_with_a_link_to_the_page() {
    let stop = CancellationToken::new();
    let (hook, mut received) = receiver(&stop).await;
    let stage = Stage::start(
        "page-webhook",
        &format!("\n[approval]\nwebhook = \"http://{hook}/parked\"\n"),
    )
    .await;
    let (id, parked) = stage.park("hooked").await;
    let told = tokio::time::timeout(BOUND, received.recv())
        .await
        .expect("the webhook was told within the bound")
        .unwrap();
    assert_eq!(told["id"], id);
    assert_eq!(told["tool"], "up__note");
    assert_eq!(told["upstream"], "up");
    assert_eq!(told["principal"], "alice");
    assert_eq!(
        told["page"],
        format!("http://{}/approvals#call-{id}", stage.admin)
    );
    assert!(told["expires_at"].as_str().unwrap().ends_with('Z'));
    let approved = http()
        .post(stage.url(&format!("/approve/{id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    let done = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(text(&done), "noted: hooked");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_links_to_the_page_as_approvers_reach_it_behind_a_proxy() {
    let stop = CancellationToken::new();
    let (hook, mut received) = receiver(&stop).await;
    let stage = Stage::start(
        "page-webhook-proxied",
        &format!(
            "\n[approval]\nwebhook = \"http://{hook}/parked\"\n\
             page_url = \"https://gateway.example.com/approvals\"\n"
        ),
    )
    .await;
    let (id, parked) = stage.park("proxied").await;
    let told = tokio::time::timeout(BOUND, received.recv())
        .await
        .expect("the webhook was told within the bound")
        .unwrap();
    assert_eq!(
        told["page"],
        format!("https://gateway.example.com/approvals#call-{id}")
    );
    let denied = http()
        .post(stage.url(&format!("/deny/{id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 200);
    let done = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(done.is_error, Some(true));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_that_is_down_or_hangs_changes_nothing() {
    // Down: nothing listens. Hanging: accepts, reads, never answers.
    let down = free_address();
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hanging_address = hanging.local_addr().unwrap();
    let held = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let holder = held.clone();
    tokio::spawn(async move {
        while let Ok((connection, _)) = hanging.accept().await {
            holder.lock().await.push(connection);
        }
    });
    for (name, hook) in [
        ("page-hook-down", down),
        ("page-hook-hangs", hanging_address),
    ] {
        let stage = Stage::start(
            name,
            &format!("\n[approval]\nwebhook = \"http://{hook}/parked\"\n"),
        )
        .await;
        // The call parks and is listed at once, whatever the webhook does.
        let started = tokio::time::Instant::now();
        let (id, parked) = stage.park(name).await;
        let approved = http()
            .post(stage.url(&format!("/deny/{id}")))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert_eq!(approved.status(), 200, "{name}");
        let refused = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
        assert!(text(&refused).contains("was denied by admin"), "{name}");
        assert!(
            started.elapsed() < mcp_hints_gateway::config::defaults::WEBHOOK_TIMEOUT,
            "{name}: the decision waited for the webhook ({:?})",
            started.elapsed()
        );
        assert_eq!(stage.calls.load(Ordering::SeqCst), 0, "{name}");
    }
    assert!(
        !held.lock().await.is_empty(),
        "the hanging webhook was never reached"
    );
}

/// chromedriver on a free loopback port, ended when dropped.
struct Chromedriver {
    child: tokio::process::Child,
    url: String,
}

impl Chromedriver {
    /// Starts `chromedriver` (`$CHROMEDRIVER`, else the one on `PATH`) and
    /// waits, bounded, until `/status` says it is ready.
    async fn start() -> Chromedriver {
        let program = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".to_owned());
        let port = free_address().port();
        let child = tokio::process::Command::new(&program)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start `{program}` ({error}): the browser test needs chromedriver and \
                     chromium (Debian: `apt-get install chromium chromium-driver`)"
                )
            });
        let url = format!("http://127.0.0.1:{port}");
        let status = format!("{url}/status");
        poll("chromedriver to answer", || async {
            let answer = http().get(&status).send().await.ok()?;
            let body = answer.json_value().await;
            body["value"]["ready"].as_bool().filter(|ready| *ready)
        })
        .await;
        Chromedriver { child, url }
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Headless Chromium (`$CHROMIUM`, else `/usr/bin/chromium`) through
/// `driver`, its profile in `profile`.
async fn browser(driver: &Chromedriver, profile: &Path) -> fantoccini::Client {
    let binary = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": binary,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--window-size=1100,1000",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    fantoccini::ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a chromium session")
}

/// Runs `script` in the page and gives its value.
async fn run(browser: &fantoccini::Client, script: &str) -> Value {
    browser.execute(script, Vec::new()).await.unwrap()
}

/// Waits, bounded, until `script` (run in the page) gives `true`.
async fn until(browser: &fantoccini::Client, what: &str, script: &str) {
    poll(what, || async {
        (run(browser, script).await == Value::Bool(true)).then_some(())
    })
    .await;
}

/// Waits, bounded, until the browser shows the parked call `id`, then
/// presses its `verb` button (`approve` or `deny`).
async fn press(browser: &fantoccini::Client, id: &str, verb: &str) {
    let card = format!("call-{id}");
    until(
        browser,
        &format!("call {id} to appear"),
        &format!("return document.getElementById('{card}') !== null;"),
    )
    .await;
    browser
        .find(fantoccini::Locator::Css(&format!("#{card} button.{verb}")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

/// Where the screenshot goes: the repository's `docs/` with
/// `MCP_HINTS_UPDATE_SCREENSHOT=1`, else the test's scratch directory
/// under the target dir.
fn screenshot_path() -> PathBuf {
    if std::env::var("MCP_HINTS_UPDATE_SCREENSHOT").as_deref() == Ok("1") {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/approvals-page.png")
    } else {
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("approvals-page.png")
    }
}

/// Serves `page` at `/` on another loopback port: another origin.
async fn serve_foreign(page: String, stop: &CancellationToken) -> SocketAddr {
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let page = page.clone();
            async move { axum::response::Html(page) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_signs_in_decides_calls_as_they_come_and_a_forged_post_is_refused() {
    let stage = Stage::start("page-browser", "").await;
    let driver = Chromedriver::start().await;
    let profile = scratch_dir("page-browser-profile");
    let browser = browser(&driver, &profile).await;

    browser.goto(&stage.url("/approvals")).await.unwrap();
    let form = browser
        .wait()
        .at_most(BOUND)
        .for_element(fantoccini::Locator::Css("form[action='/sign-in']"))
        .await
        .unwrap();
    form.find(fantoccini::Locator::Css("input[name=token]"))
        .await
        .unwrap()
        .send_keys(ADMIN)
        .await
        .unwrap();
    form.find(fantoccini::Locator::Css("input[name=name]"))
        .await
        .unwrap()
        .send_keys("carol")
        .await
        .unwrap();
    form.find(fantoccini::Locator::Css("button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    if let Err(error) = browser
        .wait()
        .at_most(BOUND)
        .for_element(fantoccini::Locator::Css("#pending #calls"))
        .await
    {
        let url = browser.current_url().await.unwrap();
        let source = browser.source().await.unwrap();
        panic!("no list of parked calls after signing in ({error}) at {url}: {source}");
    }
    until(
        &browser,
        "the event stream to open",
        "return document.getElementById('live').textContent === 'live';",
    )
    .await;
    // Gone if the page reloads: the call must arrive without one.
    run(&browser, "window.__notReloaded = true; return null;").await;

    // A call parks; the page shows it, its arguments as text.
    let (id, parked) = stage.park(MARKUP).await;
    let card = format!("call-{id}");
    until(
        &browser,
        "the parked call to appear",
        &format!("return document.getElementById('{card}') !== null;"),
    )
    .await;
    assert_eq!(
        run(&browser, "return window.__notReloaded === true;").await,
        true
    );
    let shown = run(
        &browser,
        &format!("return document.querySelector('#{card} pre.arguments').textContent;"),
    )
    .await;
    let arguments: Value = serde_json::from_str(shown.as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({ "text": MARKUP }));
    assert_eq!(
        run(
            &browser,
            "return [window.__xss === undefined, \
             document.querySelectorAll('#pending script, #pending img').length];"
        )
        .await,
        json!([true, 0])
    );
    let facts = run(
        &browser,
        &format!("return document.querySelector('#{card} .facts').textContent;"),
    )
    .await;
    assert!(
        facts.as_str().unwrap().contains("Principalalice"),
        "{facts}"
    );
    until(
        &browser,
        "the time left to count down",
        &format!(
            "return /^[0-9]+:[0-9]{{2}} left$/.test(\
             document.querySelector('#{card} .left').textContent);"
        ),
    )
    .await;
    let png = browser.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let path = screenshot_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &png).unwrap();

    // Approve: the client's call completes, and the page lets it go.
    browser
        .find(fantoccini::Locator::Css(&format!("#{card} button.approve")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let done = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_ne!(done.is_error, Some(true), "{done:?}");
    assert_eq!(text(&done), format!("noted: {MARKUP}"));
    until(
        &browser,
        "the approved call to leave the page",
        &format!("return document.getElementById('{card}') === null;"),
    )
    .await;

    // A second call, denied: the client is refused.
    let (id, parked) = stage.park("deny me").await;
    press(&browser, &id, "deny").await;
    let refused = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("was denied by carol"),
        "{}",
        text(&refused)
    );
    assert_eq!(stage.calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        run(&browser, "return window.__notReloaded === true;").await,
        true
    );

    // A third call, and a page of another origin (another loopback port:
    // the same site, so the cookie goes along) whose form posts itself to
    // the admin endpoint in the signed-in browser: refused, the call stays
    // parked.
    let (id, parked) = stage.park("forged").await;
    let stop = CancellationToken::new();
    let target = stage.url(&format!("/approve/{id}"));
    let foreign = serve_foreign(
        format!(
            "<!doctype html><form id=\"f\" method=\"post\" action=\"{target}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"forged\"></form>\
             <script>document.getElementById('f').submit();</script>"
        ),
        &stop,
    )
    .await;
    browser.goto(&format!("http://{foreign}/")).await.unwrap();
    poll("the forged form to be posted", || async {
        let url = browser.current_url().await.ok()?;
        (url.as_str() == target).then_some(())
    })
    .await;
    let answered = run(&browser, "return document.body.textContent;").await;
    assert!(
        answered.as_str().unwrap().contains("Forbidden: Origin"),
        "{answered}"
    );
    assert!(stage.pending().await.iter().any(|call| id_of(call) == id));

    // The browser's own cookie, without the page's CSRF token: 403 too.
    let cookie = browser
        .get_named_cookie("mcp-hints-approver")
        .await
        .unwrap();
    assert_eq!(cookie.http_only(), Some(true));
    let direct = http()
        .post(&target)
        .header("cookie", format!("mcp-hints-approver={}", cookie.value()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 403);
    assert!(stage.pending().await.iter().any(|call| id_of(call) == id));
    assert_eq!(stage.calls.load(Ordering::SeqCst), 1);

    // The command line's way still decides it.
    let approved = http()
        .post(&target)
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    let done = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_eq!(text(&done), "noted: forged");
    stop.cancel();
    browser.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&profile);
}

/// The audience the fixture issuer gives the page's tokens for: the
/// `[auth] audience` of the gateways below.
const AUDIENCE: &str = "https://gateway.example.com/mcp";

/// The fixture issuer (cli/tests/fixtures/oauth_issuer.py, with PyJWT from
/// the venv cli/tests/peers installs) on a free loopback port, issuing
/// tokens for [`AUDIENCE`] to its `--user` (`erin`); killed when dropped.
struct Issuer {
    _peer: peers::HttpPeer,
    url: String,
}

impl Issuer {
    fn start(args: &[&str]) -> Issuer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = peers::free_port();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/oauth_issuer.py");
        let peer = tokio::task::block_in_place(|| {
            peers::HttpPeer::start(
                std::process::Command::new(peers::installed().python())
                    .arg(script)
                    .arg(port.to_string())
                    .args(["--audience", AUDIENCE])
                    .args(args),
                port,
            )
        });
        Issuer {
            _peer: peer,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Registers a client (RFC 7591) sending approvers back to
    /// `redirect_uri`, authenticating with `method` at the token endpoint:
    /// its id, and its secret unless `method` is `none`.
    async fn register(&self, redirect_uri: &str, method: &str) -> (String, Option<String>) {
        let asked = json!({
            "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": method,
            "client_name": "approvals page",
        });
        let answer = http()
            .post(format!("{}/register", self.url))
            .header("content-type", "application/json")
            .body(asked.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 201);
        let client = answer.json_value().await;
        (
            client["client_id"].as_str().unwrap().to_owned(),
            client["client_secret"].as_str().map(str::to_owned),
        )
    }

    /// The requests it served, in order (see the fixture's docs).
    async fn requests(&self) -> Vec<Value> {
        let answer = http()
            .get(format!("{}/requests", self.url))
            .send()
            .await
            .unwrap();
        answer.json_value().await["requests"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Stage {
    /// A [`Stage`] whose approvers may sign in at `issuer`, as a client
    /// registered there first: a confidential one (its secret in the
    /// environment variable `client_secret_env` names) when
    /// `confidential`, else a public one.
    async fn with_issuer(name: &str, issuer: &Issuer, confidential: bool) -> Stage {
        let admin = free_address();
        let method = if confidential {
            "client_secret_basic"
        } else {
            "none"
        };
        let (client_id, secret) = issuer
            .register(&format!("http://{admin}/sign-in/callback"), method)
            .await;
        let secret_env = if secret.is_some() {
            "client_secret_env = \"PAGE_CLIENT_SECRET\"\n"
        } else {
            ""
        };
        let extra = format!(
            "\n[auth]\nissuer = \"{}\"\naudience = \"{AUDIENCE}\"\n\n\
             [approval]\napprover_scope = \"mcp:approve\"\nclient_id = \"{client_id}\"\n{secret_env}",
            issuer.url
        );
        let env = move |name: &str| {
            (name == "PAGE_CLIENT_SECRET")
                .then(|| secret.clone().map(std::ffi::OsString::from))
                .flatten()
        };
        Stage::start_with(name, admin, &extra, &env).await
    }
}

/// The text of the page's first `p.error`, waited for.
async fn alert(browser: &fantoccini::Client) -> String {
    browser
        .wait()
        .at_most(BOUND)
        .for_element(fantoccini::Locator::Css("p.error"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Whether the page says who is signed in.
async fn signed_in_shown(browser: &fantoccini::Client) -> bool {
    run(browser, "return document.querySelector('.who') !== null;").await == Value::Bool(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_signs_in_through_the_identity_provider_and_approves_a_call() {
    let issuer = Issuer::start(&[]);
    let stage = Stage::with_issuer("page-issuer", &issuer, true).await;
    let (id, parked) = stage.park("approved at the issuer's word").await;
    let driver = Chromedriver::start().await;
    let profile = scratch_dir("page-issuer-profile");
    let browser = browser(&driver, &profile).await;

    // The sign-in form, then an answer this browser never asked for: a
    // forged callback is refused, and nobody is signed in.
    browser.goto(&stage.url("/approvals")).await.unwrap();
    browser
        .wait()
        .at_most(BOUND)
        .for_element(fantoccini::Locator::Css("form[action='/sign-in/issuer']"))
        .await
        .unwrap();
    browser
        .goto(&stage.url(&format!(
            "/sign-in/callback?code=forged-code&state=forged-state&iss={}",
            issuer.url
        )))
        .await
        .unwrap();
    assert_eq!(
        alert(&browser).await,
        "The answer from your identity provider does not belong to this sign-in (its state is \
         not the one this page sent): sign in again."
    );
    assert!(!signed_in_shown(&browser).await);
    assert!(
        !browser.source().await.unwrap().contains("forged-code"),
        "the code is shown back"
    );

    // The button: to the issuer, which consents for erin, and back
    // signed in.
    browser
        .find(fantoccini::Locator::Css(
            "form[action='/sign-in/issuer'] button",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let who = browser
        .wait()
        .at_most(BOUND)
        .for_element(fantoccini::Locator::Css(".who"))
        .await
        .unwrap_or_else(|error| panic!("not signed in through the issuer: {error}"));
    assert_eq!(
        who.text().await.unwrap(),
        "Signed in as erin (identity provider)"
    );
    assert!(
        browser.get_named_cookie("mcp-hints-sign-in").await.is_err(),
        "the flow's cookie outlives the sign-in"
    );

    // erin approves the parked call: the client's call completes, and the
    // audit log names erin.
    press(&browser, &id, "approve").await;
    let done = tokio::time::timeout(BOUND, parked).await.unwrap().unwrap();
    assert_ne!(done.is_error, Some(true), "{done:?}");
    assert_eq!(text(&done), "noted: approved at the issuer's word");
    let lines = log_lines(&stage.log(), 3).await;
    let approved: Vec<&Value> = lines
        .iter()
        .filter(|line| line["decision"] == "approved" && line["phase"] == "decided")
        .collect();
    assert_eq!(approved.len(), 1, "{lines:?}");
    assert_eq!(approved[0]["by"], "erin");
    assert_eq!(approved[0]["id"], id.as_str());
    assert!(
        lines
            .iter()
            .all(|line| line["by"].is_null() || line["by"] == "erin"),
        "{lines:?}"
    );

    // What the issuer was asked: the code grant with PKCE S256, the
    // approver scope, the gateway's audience as the resource, the
    // registered redirect URI; the code exchanged by the gateway itself.
    let requests = issuer.requests().await;
    let authorized: Vec<&Value> = requests
        .iter()
        .filter(|request| request["path"] == "/authorize")
        .collect();
    assert_eq!(authorized.len(), 1, "{requests:?}");
    let asked = &authorized[0]["params"];
    assert_eq!(asked["response_type"], "code");
    assert_eq!(asked["scope"], "mcp:approve");
    assert_eq!(asked["resource"], AUDIENCE);
    assert_eq!(asked["code_challenge_method"], "S256");
    assert_eq!(asked["code_challenge"].as_str().unwrap().len(), 43);
    assert_eq!(
        asked["redirect_uri"],
        format!("http://{}/sign-in/callback", stage.admin)
    );
    assert_eq!(asked["state"].as_str().unwrap().len(), 64);
    let exchanged: Vec<&Value> = requests
        .iter()
        .filter(|request| request["path"] == "/token")
        .collect();
    assert_eq!(exchanged.len(), 1, "{requests:?}");
    assert_eq!(exchanged[0]["grant_type"], "authorization_code");
    assert_eq!(exchanged[0]["resource"], AUDIENCE);
    assert!(
        exchanged[0]["agent"]
            .as_str()
            .unwrap()
            .starts_with("mcp-hints-gateway/"),
        "{:?}",
        exchanged[0]
    );
    browser.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&profile);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_the_issuer_does_not_grant_the_approver_scope_is_refused() {
    let issuer = Issuer::start(&["--withhold", "mcp:approve"]);
    let stage = Stage::with_issuer("page-issuer-unscoped", &issuer, false).await;
    let driver = Chromedriver::start().await;
    let profile = scratch_dir("page-issuer-unscoped-profile");
    let browser = browser(&driver, &profile).await;

    browser.goto(&stage.url("/approvals")).await.unwrap();
    browser
        .wait()
        .at_most(BOUND)
        .for_element(fantoccini::Locator::Css(
            "form[action='/sign-in/issuer'] button",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(
        alert(&browser).await,
        "erin signed in at your identity provider, but is not an approver: the token it gave \
         lacks the scope mcp:approve."
    );
    assert!(!signed_in_shown(&browser).await);
    // No session: the browser's cookie opens no event stream, and the
    // page is the sign-in form still.
    let cookie = browser
        .get_named_cookie("mcp-hints-approver")
        .await
        .unwrap();
    let events = http()
        .get(stage.url("/events"))
        .header("cookie", format!("mcp-hints-approver={}", cookie.value()))
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 401);
    browser.goto(&stage.url("/approvals")).await.unwrap();
    browser
        .wait()
        .at_most(BOUND)
        .for_element(fantoccini::Locator::Css("form[action='/sign-in']"))
        .await
        .unwrap();
    assert!(!signed_in_shown(&browser).await);
    browser.close().await.unwrap();
    let _ = std::fs::remove_dir_all(&profile);
}

/// The `Set-Cookie` pairs (`NAME=VALUE`) of an answer.
fn set_cookies(answer: &reqwest::Response) -> Vec<String> {
    answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|value| {
            let value = value.to_str().unwrap();
            value.split(';').next().unwrap().to_owned()
        })
        .collect()
}

/// One sign-in through the issuer over plain HTTP, as a browser would go
/// (cookies carried by hand, no redirect followed).
struct HttpSignIn<'a> {
    stage: &'a Stage,
    /// The anonymous session's cookie and its CSRF token.
    cookie: String,
    csrf: String,
}

impl<'a> HttpSignIn<'a> {
    async fn open(stage: &'a Stage) -> HttpSignIn<'a> {
        let page = http().get(stage.url("/approvals")).send().await.unwrap();
        let (cookie, _) = set_cookie(&page);
        let csrf = csrf_in(&page.text().await.unwrap());
        HttpSignIn {
            stage,
            cookie,
            csrf,
        }
    }

    /// Presses the button: the issuer's authorization URL, and the flow
    /// cookie the answer set.
    async fn begin(&self) -> (reqwest::Url, String) {
        let answer = http()
            .post(self.stage.url("/sign-in/issuer"))
            .header("cookie", &self.cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={}", self.csrf))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 303);
        let location = answer.headers()["location"].to_str().unwrap();
        let url = reqwest::Url::parse(location).unwrap();
        let cookies = set_cookies(&answer);
        assert_eq!(cookies.len(), 1, "{cookies:?}");
        let flow = cookies[0].clone();
        assert_eq!(flow, format!("mcp-hints-sign-in={}", &self.cookie[19..]));
        (url, flow)
    }

    /// The issuer's answer to the authorization request at `url`: the
    /// callback URL it redirects to.
    async fn authorize(url: &reqwest::Url) -> reqwest::Url {
        let answer = http().get(url.as_str()).send().await.unwrap();
        assert_eq!(answer.status(), 302);
        reqwest::Url::parse(answer.headers()["location"].to_str().unwrap()).unwrap()
    }

    /// The callback URL with `name` set to `value` (`None`: left out).
    fn altered(callback: &reqwest::Url, name: &str, value: Option<&str>) -> String {
        let pairs: Vec<(String, String)> = callback
            .query_pairs()
            .filter(|(key, _)| key != name)
            .map(|(key, value)| (key.into_owned(), value.into_owned()))
            .collect();
        let mut url = callback.clone();
        {
            let mut query = url.query_pairs_mut();
            query.clear();
            for (key, old) in &pairs {
                query.append_pair(key, old);
            }
            if let Some(value) = value {
                query.append_pair(name, value);
            }
        }
        url.to_string()
    }

    /// Follows `callback` with the browser's cookies (the session's and
    /// the flow's, as a browser sends them on the way back from the
    /// issuer).
    async fn back(&self, flow: &str, callback: &str) -> reqwest::Response {
        http()
            .get(callback)
            .header("cookie", format!("{}; {flow}", self.cookie))
            .send()
            .await
            .unwrap()
    }

    /// The status of `GET /events` with `cookie`.
    async fn events(&self, cookie: &str) -> u16 {
        http()
            .get(self.stage.url("/events"))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

/// Asserts `answer` is the sign-in form again with `status`, saying
/// `message`, that it signed nobody in (only the flow cookie removed),
/// and that it shows none of `secrets`.
async fn refused_with(answer: reqwest::Response, status: u16, message: &str, secrets: &[&str]) {
    assert_eq!(answer.status(), status);
    let cookies = set_cookies(&answer);
    assert_eq!(cookies, ["mcp-hints-sign-in="], "a session was set");
    let body = answer.text().await.unwrap();
    assert!(
        body.contains(&format!("<p class=\"error\" role=\"alert\">{message}</p>")),
        "{body}"
    );
    assert!(body.contains("action=\"/sign-in/issuer\""), "{body}");
    for secret in secrets {
        assert!(!body.contains(secret), "{secret} shown in {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callback_takes_only_the_answer_to_its_own_request() {
    let issuer = Issuer::start(&[]);
    let stage = Stage::with_issuer("page-issuer-http", &issuer, false).await;
    let sign_in = HttpSignIn::open(&stage).await;

    // The sign-in form may be sent on to the issuer, and only there.
    let form = http().get(stage.url("/approvals")).send().await.unwrap();
    let policy = form.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        policy.contains(&format!("; form-action 'self' {}; ", issuer.url)),
        "{policy}"
    );

    // The button's POST without the form's CSRF token: 403, no flow.
    let forged = http()
        .post(stage.url("/sign-in/issuer"))
        .header("cookie", &sign_in.cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);

    // The authorization request: the state is not the CSRF token.
    let (url, flow) = sign_in.begin().await;
    assert_eq!(
        url.as_str().split('?').next(),
        Some(format!("{}/authorize", issuer.url).as_str())
    );
    let asked: std::collections::BTreeMap<String, String> =
        url.query_pairs().into_owned().collect();
    assert_eq!(asked["scope"], "mcp:approve");
    assert_eq!(asked["resource"], AUDIENCE);
    assert_eq!(asked["code_challenge_method"], "S256");
    assert_ne!(asked["state"], sign_in.csrf);

    // A wrong state: refused; the flow is spent, so the right one is too.
    let callback = HttpSignIn::authorize(&url).await;
    let code: String = callback
        .query_pairs()
        .find(|(key, _)| key == "code")
        .unwrap()
        .1
        .into_owned();
    let wrong = HttpSignIn::altered(&callback, "state", Some("0123abcd"));
    refused_with(
        sign_in.back(&flow, &wrong).await,
        400,
        "The answer from your identity provider does not belong to this sign-in (its state is \
         not the one this page sent): sign in again.",
        &[&code],
    )
    .await;
    refused_with(
        sign_in.back(&flow, callback.as_str()).await,
        400,
        "The answer from your identity provider does not belong to this sign-in (its state is \
         not the one this page sent): sign in again.",
        &[&code],
    )
    .await;

    // Another issuer's answer (RFC 9207), and one without `iss` from an
    // issuer that promises it.
    let (url, flow) = sign_in.begin().await;
    let callback = HttpSignIn::authorize(&url).await;
    let other = HttpSignIn::altered(&callback, "iss", Some("https://evil.example.com"));
    refused_with(
        sign_in.back(&flow, &other).await,
        400,
        &format!(
            "The answer comes from another issuer (https://evil.example.com) than this \
             gateway&#39;s ({}) (RFC 9207): sign in again.",
            issuer.url
        ),
        &[],
    )
    .await;
    let (url, flow) = sign_in.begin().await;
    let callback = HttpSignIn::authorize(&url).await;
    refused_with(
        sign_in
            .back(&flow, &HttpSignIn::altered(&callback, "iss", None))
            .await,
        400,
        "The answer from your identity provider does not name its issuer (iss), which its \
         metadata promises (RFC 9207): sign in again.",
        &[],
    )
    .await;

    // An error redirect: said, escaped.
    let (url, flow) = sign_in.begin().await;
    let state: String = url
        .query_pairs()
        .find(|(key, _)| key == "state")
        .unwrap()
        .1
        .into_owned();
    let mut error = reqwest::Url::parse(&stage.url("/sign-in/callback")).unwrap();
    error
        .query_pairs_mut()
        .append_pair("error", "access_denied")
        .append_pair("error_description", "<b>no</b>")
        .append_pair("state", &state)
        .append_pair("iss", &issuer.url);
    refused_with(
        sign_in.back(&flow, error.as_str()).await,
        502,
        "Your identity provider refused the sign-in: access_denied (&lt;b&gt;no&lt;/b&gt;).",
        &["<b>"],
    )
    .await;

    // A code the issuer does not exchange.
    let (url, flow) = sign_in.begin().await;
    let callback = HttpSignIn::authorize(&url).await;
    refused_with(
        sign_in
            .back(
                &flow,
                &HttpSignIn::altered(&callback, "code", Some("forged-code")),
            )
            .await,
        502,
        "Your identity provider did not give a token for the sign-in: it answered 400 Bad \
         Request, invalid_grant (the code is unknown, spent, expired or another client&#39;s).",
        &["forged-code"],
    )
    .await;
    assert_eq!(sign_in.events(&sign_in.cookie).await, 401);

    // The real answer: signed in under a new session id, sent on to the
    // page, the flow cookie gone.
    let (url, flow) = sign_in.begin().await;
    let callback = HttpSignIn::authorize(&url).await;
    let answer = sign_in.back(&flow, callback.as_str()).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["refresh"], "0; url=/approvals");
    let cookies = set_cookies(&answer);
    assert_eq!(cookies.len(), 2, "{cookies:?}");
    assert!(
        cookies.contains(&"mcp-hints-sign-in=".to_owned()),
        "{cookies:?}"
    );
    let session = cookies
        .iter()
        .find(|cookie| cookie.starts_with("mcp-hints-approver="))
        .unwrap();
    assert_ne!(*session, sign_in.cookie);
    assert_eq!(sign_in.events(session).await, 200);
    assert_eq!(sign_in.events(&sign_in.cookie).await, 401);
    let body = answer.text().await.unwrap();
    assert!(body.contains("Signed in as erin."), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_access_token_signs_nobody_in() {
    let issuer = Issuer::start(&["--lifetime", "-120"]);
    let stage = Stage::with_issuer("page-issuer-expired", &issuer, true).await;
    let sign_in = HttpSignIn::open(&stage).await;
    let (url, flow) = sign_in.begin().await;
    let callback = HttpSignIn::authorize(&url).await;
    refused_with(
        sign_in.back(&flow, callback.as_str()).await,
        401,
        "The access token from your identity provider is not one this gateway accepts: the \
         token has expired.",
        &[],
    )
    .await;
    assert_eq!(sign_in.events(&sign_in.cookie).await, 401);
}

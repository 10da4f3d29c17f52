//! The gateway's router mounted inside another axum application, driven by
//! rmcp's streamable-HTTP client: the application's own route and the
//! gateway's `/mcp` share one listener, and a call through it is decided,
//! logged and forwarded to a real (in-process, loopback) HTTP upstream.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::serve::ListenerExt as _;
use mcp_hints_gateway::front::{Gateway, router};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use support::{BOUND, Echo, alice_config, log_lines, scratch_dir, serve_upstream};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "mounted-test-token";

/// A gateway in front of an in-process upstream, its router merged into
/// an application with a route of its own (`/health`), served on a free
/// loopback port until `stop`; the application's graceful shutdown drains
/// the gateway ([`Gateway::drain`]), as the crate README shows.
struct Mounted {
    gateway: Arc<Gateway>,
    bound: SocketAddr,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
    stop: CancellationToken,
    calls: Arc<AtomicUsize>,
    log: std::path::PathBuf,
    dir: std::path::PathBuf,
}

/// `note`: whether the upstream has its `note` tool beside `echo`;
/// `extra` goes on after the `[[upstream]]` table's keys.
async fn mount(name: &str, note: bool, extra: &str) -> Mounted {
    // The provider the gateway's HTTP upstream client installs too; the
    // test's own reqwest client is built before nothing else needs it.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = Echo {
        calls: calls.clone(),
        note,
    };
    let upstream_url = serve_upstream(upstream, stop.clone()).await;

    let dir = scratch_dir(name);
    let log = dir.join("audit.jsonl");
    let config_path = dir.join("gateway.toml");
    let text = alice_config(TOKEN, &log, &upstream_url, extra);
    std::fs::write(&config_path, &text).unwrap();
    let config = mcp_hints_gateway::config::load(&config_path).unwrap();
    let gateway = Gateway::builder(config).start().await.unwrap();

    // The application: its own route, and the gateway's `/mcp` beside it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bound: SocketAddr = listener.local_addr().unwrap();
    // An address beyond the machine needs `listen.public`.
    let unspecified: SocketAddr = ([0, 0, 0, 0], bound.port()).into();
    let refused = router(gateway.clone(), unspecified).unwrap_err();
    assert_eq!(
        refused.to_string(),
        format!(
            "the gateway's router was given {unspecified}, which is not a loopback address; set \
             `listen.public = true` in the config to serve beyond this machine (and keep its \
             tokens secret)"
        )
    );
    let app = axum::Router::new()
        .route("/health", axum::routing::get(|| async { "ok" }))
        .merge(router(gateway.clone(), bound).unwrap());
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    let (served_stop, draining) = (stop.clone(), gateway.clone());
    let served = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                served_stop.cancelled().await;
                draining.drain().await;
            })
            .await
    });
    Mounted {
        gateway,
        bound,
        served,
        stop,
        calls,
        log,
        dir,
    }
}

/// An rmcp client of the mounted gateway, with the token.
async fn client_of(bound: SocketAddr) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut transport =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{bound}/mcp"));
    transport.auth_header = Some(TOKEN.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(transport))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_mounted_in_another_app_serves_a_real_client_beside_the_apps_routes() {
    let Mounted {
        gateway,
        bound,
        served,
        stop,
        calls,
        log,
        dir,
    } = mount("mounted", false, "").await;

    let http = reqwest::Client::new();
    let health = http
        .get(format!("http://{bound}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok");

    // Without the token the gateway's endpoint answers 401, and the
    // application's route is untouched by its authentication.
    let refused = http
        .post(format!("http://{bound}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    let client = client_of(bound).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["up__echo"]);
    let hints = tools[0].annotations.as_ref().unwrap();
    assert_eq!(hints.read_only_hint, Some(true));
    assert_eq!(hints.idempotent_hint, Some(true));

    let arguments = json!({"text": "through the mounted router"});
    let Value::Object(arguments) = arguments else {
        unreachable!("the literal is an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new("up__echo").with_arguments(arguments))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let answered = result.content[0].as_text().unwrap();
    assert_eq!(answered.text, "through the mounted router");
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let entries = log_lines(&log, 2).await;
    assert_eq!(entries[0]["phase"], "decided");
    assert_eq!(entries[0]["principal"], "alice");
    assert_eq!(entries[0]["upstream"], "up");
    assert_eq!(entries[0]["tool"], "echo");
    assert_eq!(entries[0]["decision"], "allow");
    assert_eq!(entries[1]["phase"], "finished");
    assert_eq!(entries[1]["id"], entries[0]["id"]);
    assert_eq!(entries[1]["outcome"], "completed");

    client.cancel().await.unwrap();
    stop.cancel();
    tokio::time::timeout(BOUND, served)
        .await
        .expect("the application stops serving once told to")
        .unwrap()
        .unwrap();
    gateway.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_denies_a_parked_call_and_ends_the_sessions_so_the_app_can_stop() {
    let mounted = mount(
        "mounted-drain",
        false,
        "\n[[rule]]\naction = \"require_approval\"\ntool = \"echo\"\n",
    )
    .await;
    // A session with a call parked for an approver: both hold the server
    // open until the gateway is drained.
    let client = client_of(mounted.bound).await;
    let arguments = json!({"text": "parked"});
    let Value::Object(arguments) = arguments else {
        unreachable!("the literal is an object")
    };
    let parked = tokio::spawn({
        let peer = client.peer().clone();
        async move {
            peer.call_tool(CallToolRequestParams::new("up__echo").with_arguments(arguments))
                .await
        }
    });
    let deadline = tokio::time::Instant::now() + BOUND;
    while mounted
        .gateway
        .approvals()
        .pending()
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call was never parked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    mounted.stop.cancel();
    let answer = tokio::time::timeout(BOUND, parked)
        .await
        .expect("the parked call is answered once draining")
        .unwrap()
        .unwrap();
    assert_eq!(answer.is_error, Some(true), "{answer:?}");
    let said = answer.content[0].as_text().unwrap().text.clone();
    assert!(said.contains("stopping"), "{said}");
    tokio::time::timeout(BOUND, mounted.served)
        .await
        .expect("the application stops serving once drained, its session open")
        .unwrap()
        .unwrap();
    mounted.gateway.shutdown().await;
    // Shut down twice does nothing more.
    mounted.gateway.shutdown().await;
    assert_eq!(
        mounted.calls.load(Ordering::SeqCst),
        0,
        "a denied call never ran"
    );
    let entries = log_lines(&mounted.log, 3).await;
    let phases: Vec<String> = entries
        .iter()
        .map(|entry| format!("{}:{}", entry["phase"], entry["decision"]).replace('"', ""))
        .collect();
    assert_eq!(
        phases,
        [
            "decided:require_approval",
            "decided:denied",
            "finished:denied"
        ]
    );

    drop(client);
    let _ = std::fs::remove_dir_all(&mounted.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_its_upstream_excludes_is_neither_listed_nor_callable() {
    let mounted = mount("mounted-exclude", true, "exclude_tools = [\"no*\"]\n").await;
    let client = client_of(mounted.bound).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["up__echo"]);
    let arguments = json!({"text": "left out"});
    let Value::Object(arguments) = arguments else {
        unreachable!("the literal is an object")
    };
    let refused = client
        .call_tool(CallToolRequestParams::new("up__note").with_arguments(arguments))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("unknown tool `up__note`"),
        "{refused}"
    );
    assert_eq!(mounted.calls.load(Ordering::SeqCst), 0);
    client.cancel().await.unwrap();
    mounted.stop.cancel();
    let _ = tokio::time::timeout(BOUND, mounted.served).await;
    mounted.gateway.shutdown().await;
    let _ = std::fs::remove_dir_all(&mounted.dir);
}

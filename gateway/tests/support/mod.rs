//! What the gateway's integration tests share: an in-process HTTP upstream,
//! a gateway started from a config text and served on a loopback port, an
//! rmcp client of it, and a bounded wait for audit-log lines.

#![allow(dead_code, reason = "each test binary uses part of it")]

// The runtime's own real-`redis-server` helper, one file for both crates'
// tests.
#[path = "../../../runtime/tests/support/redis.rs"]
pub mod redis;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::serve::ListenerExt as _;
use mcp_hints_gateway::front::{Gateway, GatewayBuilder, router};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// How long any wait of these tests may take.
pub const BOUND: Duration = Duration::from_secs(30);

/// The upstream: a read-only tool `echo` that answers with its `text`
/// argument and, with `note`, a write `note` (not read-only, not
/// idempotent) that answers `noted: TEXT`; either answers a `text` of
/// `error CODE` with a JSON-RPC error of that code. `calls` counts the
/// calls it ran.
#[derive(Clone)]
pub struct Echo {
    pub calls: Arc<AtomicUsize>,
    pub note: bool,
}

fn object(value: Value) -> Map<String, Value> {
    let Value::Object(map) = value else {
        unreachable!("the literal is an object")
    };
    map
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = Arc::new(object(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
        })));
        let read = ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false);
        let mut tools =
            vec![Tool::new("echo", "Answers with its text.", schema.clone()).annotate(read)];
        if self.note {
            let write = ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false);
            tools.push(Tool::new("note", "Keeps a note.", schema).annotate(write));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let text = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("text"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // `error CODE`: a JSON-RPC error with that code, as a server may
        // answer.
        if let Some(code) = text
            .strip_prefix("error ")
            .and_then(|code| code.parse().ok())
        {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode(code),
                format!("upstream error {code}"),
                None,
            ));
        }
        let text = match request.name.as_ref() {
            "note" => format!("noted: {text}"),
            _ => text,
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

/// Serves `upstream` over streamable HTTP on a free loopback port until
/// `stop` is cancelled; returns its `/mcp` URL.
pub async fn serve_upstream(upstream: Echo, stop: CancellationToken) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let mut config = StreamableHttpServerConfig::default();
    config.json_response = true;
    config.cancellation_token = stop.child_token();
    let service = StreamableHttpService::new(
        move || Ok(upstream.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
            .unwrap();
    });
    format!("http://{address}/mcp")
}

/// A gateway config for these tests: HTTP on a free loopback port, one
/// client `alice` with `token`, the audit log at `log`, the trusted HTTP
/// upstream `up` at `url`, and `extra` (rules, tables) after it.
pub fn alice_config(token: &str, log: &Path, url: &str, extra: &str) -> String {
    format!(
        r#"
[listen]
http = "127.0.0.1:0"

[[client]]
principal = "alice"
token = "{token}"

[log]
path = {log:?}

[[upstream]]
name = "up"
url = "{url}"
trusted = true
{extra}
"#
    )
}

/// A directory of its own under the target directory's scratch space
/// (cargo's `CARGO_TARGET_TMPDIR`), so that what a test leaves behind goes
/// with the build, not into the system's temporary directory.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "mcp-hints-gateway-{name}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits, bounded, until the audit log at `path` holds `count` entries
/// ([`mcp_hints_gateway::log::entries`]: its lines that record a call, the
/// chain's checkpoints left out), and returns them as JSON. A log not
/// there yet holds none, and a line still being written is not read yet;
/// a line that is not an entry panics.
pub async fn log_lines(path: &Path, count: usize) -> Vec<Value> {
    use mcp_hints_gateway::log::{ReadError, entries};
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let lines: Vec<Value> = entries(path)
            .filter_map(|read| match read {
                Ok((_, entry)) => Some(serde_json::to_value(entry).unwrap()),
                Err(ReadError::Open { .. } | ReadError::NotAnEntry { torn: true, .. }) => None,
                Err(error) => panic!("{error}"),
            })
            .collect();
        if lines.len() >= count {
            return lines;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the audit log held {} of {count} lines after {BOUND:?}: {lines:?}",
            lines.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A gateway started from a config file and its router served on a
/// loopback port of its own, until `stop` is cancelled.
pub struct Served {
    pub gateway: Arc<Gateway>,
    pub address: SocketAddr,
    pub served: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Writes `text` to `dir/NAME.toml`, starts its gateway and serves its
/// router (beside nothing) on a free loopback port.
pub async fn serve_gateway(dir: &Path, name: &str, text: &str, stop: &CancellationToken) -> Served {
    serve_gateway_built(dir, name, text, stop, |builder| builder).await
}

/// [`serve_gateway`], its builder set by `build` before it starts.
pub async fn serve_gateway_built(
    dir: &Path,
    name: &str,
    text: &str,
    stop: &CancellationToken,
    build: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
) -> Served {
    let config_path = dir.join(format!("{name}.toml"));
    std::fs::write(&config_path, text).unwrap();
    let config = mcp_hints_gateway::config::load(&config_path).unwrap();
    serve_config(config, stop, build).await
}

/// [`serve_gateway`] with the environment variables `env` gives (for
/// `*_env` keys) instead of the process's.
pub async fn serve_gateway_with_env(
    dir: &Path,
    name: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    stop: &CancellationToken,
) -> Served {
    let config_path = dir.join(format!("{name}.toml"));
    std::fs::write(&config_path, text).unwrap();
    let config = mcp_hints_gateway::config::parse_with_env(text, &config_path, env).unwrap();
    serve_config(config, stop, |builder| builder).await
}

/// Starts the gateway of `config`, its builder set by `build`, and serves
/// its router on a free loopback port.
pub async fn serve_config(
    config: mcp_hints_gateway::config::Config,
    stop: &CancellationToken,
    build: impl FnOnce(GatewayBuilder) -> GatewayBuilder,
) -> Served {
    let gateway = build(Gateway::builder(config)).start().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = router(gateway.clone(), address).unwrap();
    let listener = listener.tap_io(|stream| {
        let _ = stream.set_nodelay(true);
    });
    let stop = stop.clone();
    let served = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await
    });
    Served {
        gateway,
        address,
        served,
    }
}

/// An rmcp streamable-HTTP client of the gateway at `address`, with
/// `token`.
pub async fn client(address: SocketAddr, token: &str) -> RunningService<RoleClient, ()> {
    let mut transport =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"));
    transport.auth_header = Some(token.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(transport))
        .await
        .unwrap()
}

/// Calls `tool` with `{"text": text}`.
pub async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    text: &str,
) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(object(json!({ "text": text }))),
        )
        .await
        .unwrap()
}

/// The text of a result's first content block.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|content| content.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

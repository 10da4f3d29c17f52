//! End to end over streamable HTTP: the built `notes` server runs as a child
//! process with `--http 127.0.0.1:0 --page-size 2`, announces its address on
//! stderr, and rmcp's own streamable HTTP client lists its tools page by page,
//! over the legacy `initialize` handshake and over `server/discover` at
//! 2026-07-28. Then SIGTERM must stop the server cleanly, a session still
//! open.

use std::future::Future;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rmcp::model::{
    CacheScope, ErrorCode, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ResultType,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long any one step may take before the test fails instead of hanging.
const TIMEOUT: Duration = Duration::from_secs(30);

/// What `notes` prints on stderr once it listens, before the URL.
const ANNOUNCEMENT: &str = "notes: serving MCP over streamable HTTP at ";

/// The tools of `notes` (without `lint-demo`) in pages of two, by name.
const PAGES: [&[&str]; 3] = [
    &["add_note", "append_note"],
    &["delete_note", "forecast"],
    &["list_notes", "update_note"],
];

type Client = RunningService<RoleClient, ()>;

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {TIMEOUT:?}"))
}

/// Starts `notes --http 127.0.0.1:0 --page-size 2` and returns it with the
/// URL it announced. The rest of its stderr is passed on to the test's.
async fn start_server() -> (Child, String) {
    let program = env!("CARGO_BIN_EXE_notes");
    let mut child = Command::new(program)
        .args(["--http", "127.0.0.1:0", "--page-size", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot spawn {program}: {error}"));
    let stderr = child.stderr.take().expect("piped stderr");
    let mut lines = BufReader::new(stderr).lines();
    let url = within("the address on stderr", async {
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => match line.strip_prefix(ANNOUNCEMENT) {
                    Some(url) => return url.to_owned(),
                    None => eprintln!("{line}"),
                },
                Ok(None) => panic!("notes closed stderr without announcing its address"),
                Err(error) => panic!("reading the stderr of notes: {error}"),
            }
        }
    })
    .await;
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "announced URL: {url}"
    );
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
        }
    });
    (child, url)
}

async fn connect(url: &str, mode: ClientLifecycleMode) -> Client {
    // Needed when a workspace build gives reqwest rustls without a provider
    // (see examples/Cargo.toml); an error means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    within("session start", ().serve_with_lifecycle(transport, mode))
        .await
        .unwrap_or_else(|error| panic!("session start over HTTP failed: {error}"))
}

async fn list(client: &Client, cursor: Option<&str>) -> Result<ListToolsResult, ServiceError> {
    let params =
        cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor.to_owned())));
    within("tools/list", client.list_tools(params)).await
}

fn names(page: &ListToolsResult) -> Vec<&str> {
    page.tools.iter().map(|tool| tool.name.as_ref()).collect()
}

/// Sends SIGTERM and waits for the exit.
async fn terminate(mut child: Child) -> ExitStatus {
    let pid = child.id().expect("the server still runs").to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid}: {status}");
    within("exit after SIGTERM", child.wait())
        .await
        .expect("wait for notes")
}

#[tokio::test]
async fn tools_list_over_http_comes_in_pages_and_sigterm_stops_the_server() {
    let (child, url) = start_server().await;
    let lifecycles = [
        ("initialize", ClientLifecycleMode::Initialize),
        (
            "discover",
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
    ];
    for (lifecycle, mode) in lifecycles {
        let discover = matches!(mode, ClientLifecycleMode::Discover { .. });
        let client = connect(&url, mode).await;
        let info = client.peer_info().expect("the server's info");
        assert_eq!(
            info.server_info.as_ref().map(|server| server.name.as_str()),
            Some("notes"),
            "{lifecycle}"
        );

        // Page by page: nextCursor on every page but the last.
        let mut cursor: Option<String> = None;
        for (index, expected) in PAGES.iter().enumerate() {
            let page = list(&client, cursor.as_deref())
                .await
                .unwrap_or_else(|error| panic!("{lifecycle}: page {index}: {error}"));
            assert_eq!(names(&page), *expected, "{lifecycle}: page {index}");
            let last = index + 1 == PAGES.len();
            assert_eq!(
                page.next_cursor.is_none(),
                last,
                "{lifecycle}: page {index}"
            );
            // The cache hints of a 2026-07-28 result are on every page.
            if discover {
                assert_eq!(page.result_type, Some(ResultType::COMPLETE));
                assert_eq!(page.ttl_ms, Some(0), "{lifecycle}: page {index}");
                assert_eq!(page.cache_scope, Some(CacheScope::Public));
            }
            cursor = page.next_cursor;
        }

        // rmcp's client follows the cursors itself.
        let all = within("list_all_tools", client.list_all_tools())
            .await
            .unwrap_or_else(|error| panic!("{lifecycle}: list_all_tools: {error}"));
        let all: Vec<&str> = all.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(all, PAGES.concat(), "{lifecycle}");

        // A cursor the server did not issue is -32602, naming it.
        match list(&client, Some("page-2")).await {
            Err(ServiceError::McpError(error)) => {
                assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{lifecycle}");
                assert_eq!(
                    error.message,
                    "invalid tools/list cursor \"page-2\": not a cursor this server issued; \
                     list again without a cursor",
                    "{lifecycle}"
                );
            }
            other => panic!("{lifecycle}: expected -32602, got {other:?}"),
        }
        within("shutdown", client.cancel())
            .await
            .unwrap_or_else(|error| panic!("{lifecycle}: shutdown: {error}"));
    }

    // SIGTERM ends the server even with a session open.
    let open = connect(&url, ClientLifecycleMode::Initialize).await;
    let status = terminate(child).await;
    assert!(status.success(), "notes after SIGTERM: {status}");
    drop(open);
}

#[tokio::test]
async fn an_address_that_cannot_be_bound_is_a_clear_error() {
    let output = within(
        "notes --http with a bad address",
        Command::new(env!("CARGO_BIN_EXE_notes"))
            .args(["--http", "no-such-host.invalid:99999"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("run notes");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("notes: cannot listen on no-such-host.invalid:99999: "),
        "{stderr}"
    );
}

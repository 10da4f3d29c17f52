//! When a call's `decided` entry reaches the disk: before the call goes on
//! for a call that may change something, and while it runs, but before its
//! answer goes back, for one that cannot (a read-only tool of a trusted
//! upstream). The log here is `/dev/null`, which takes every write and
//! refuses every sync (`EINVAL`), so each call shows which it was: the
//! upstream runs the read-only call and the gateway withholds its answer;
//! it never sees the others.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::RoleClient;
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use support::{Echo, alice_config, call, client, scratch_dir, serve_gateway, serve_upstream, text};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "audit-sync-test-token";

/// The gateway's decision under `_meta["mcp-hints/gateway"]`.
fn detail(result: &CallToolResult) -> serde_json::Value {
    result
        .meta
        .as_ref()
        .and_then(|meta| meta.0.get("mcp-hints/gateway"))
        .cloned()
        .unwrap_or_default()
}

/// The in-process upstream with `echo` and `note`, until `stop`: its URL
/// and its count of calls run.
async fn upstream(stop: &CancellationToken) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let echo = Echo {
        calls: calls.clone(),
        note: true,
    };
    (serve_upstream(echo, stop.clone()).await, calls)
}

/// A gateway in front of `url` (as `up`, trusted, and as `loose`,
/// untrusted: its `readOnlyHint` is only a hint), its log `/dev/null`,
/// `extra` after its upstreams; its client.
async fn unsynced_gateway(
    name: &str,
    url: &str,
    extra: &str,
    stop: &CancellationToken,
) -> RunningService<RoleClient, ()> {
    let extra =
        format!("[[upstream]]\nname = \"loose\"\nurl = \"{url}\"\ntrusted = false\n{extra}");
    let config = alice_config(TOKEN, Path::new("/dev/null"), url, &extra);
    let dir = scratch_dir(&format!("audit-sync-{name}"));
    let served = serve_gateway(&dir, "gateway", &config, stop).await;
    client(served.address, TOKEN).await
}

/// Asserts `result` is the refusal of a call whose entry could not be
/// synced, nothing forwarded.
fn assert_refused(tool: &str, result: &CallToolResult) {
    assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
    assert!(
        text(result).contains("so the call was refused and not forwarded"),
        "{tool}: {result:?}"
    );
    assert_eq!(detail(result)["reason"], "audit_log", "{tool}: {result:?}");
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_call_that_changes_nothing_runs_before_its_entry_is_on_disk() {
    let stop = CancellationToken::new();
    let (url, calls) = upstream(&stop).await;
    let client = unsynced_gateway("ran", &url, "", &stop).await;
    let read = call(&client, "up__echo", "hello").await;
    assert_eq!(read.is_error, Some(true), "{read:?}");
    assert!(
        text(&read).contains(
            "the call ran (its tool is read-only, so nothing changed) but its answer is withheld"
        ),
        "{read:?}"
    );
    assert!(
        !text(&read).contains("hello"),
        "the result went back: {read:?}"
    );
    assert_eq!(detail(&read)["reason"], "audit_log", "{read:?}");
    assert_eq!(detail(&read)["outcome"], "withheld", "{read:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the read-only call ran");
    // Syncs are failing now: the same call waits for its sync, and is
    // refused.
    let again = call(&client, "up__echo", "hello").await;
    assert_refused("up__echo", &again);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "a call ran unrecorded");
    client.cancel().await.unwrap();

    // Each first call of its gateway, before any sync failed: a write,
    // an untrusted upstream's read (asserted read-only or not), and reads
    // asserted to write or to reach the open world are synced first.
    let asserts = [
        ("write", "up__note", ""),
        ("untrusted", "loose__echo", ""),
        (
            "untrusted-asserted",
            "loose__echo",
            "[[assert]]\nupstream = \"loose\"\nreadOnlyHint = true\n",
        ),
        (
            "asserted-write",
            "up__echo",
            "[[assert]]\nupstream = \"up\"\ntool = \"echo\"\nreadOnlyHint = false\n",
        ),
        (
            "open-world",
            "up__echo",
            "[[assert]]\nupstream = \"up\"\ntool = \"echo\"\nopenWorldHint = true\n",
        ),
    ];
    for (name, tool, extra) in asserts {
        let client = unsynced_gateway(name, &url, extra, &stop).await;
        assert_refused(tool, &call(&client, tool, "hello").await);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "{name}: {tool} ran unrecorded"
        );
        client.cancel().await.unwrap();
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_changes_nothing_answers_once_its_entries_are_written() {
    let stop = CancellationToken::new();
    let (url, calls) = upstream(&stop).await;
    let dir = scratch_dir("audit-sync-synced");
    let log = dir.join("audit.jsonl");
    let served = serve_gateway(&dir, "gateway", &alice_config(TOKEN, &log, &url, ""), &stop).await;
    let client = client(served.address, TOKEN).await;
    for (tool, answer) in [("up__echo", "hello"), ("up__note", "noted: hello")] {
        let result = call(&client, tool, "hello").await;
        assert_eq!(result.is_error, Some(false), "{tool}: {result:?}");
        assert_eq!(text(&result), answer);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Each call's two entries, in order, a chain that verifies.
    let lines = support::log_lines(&log, 4).await;
    let seen: Vec<(&str, &str)> = lines
        .iter()
        .map(|entry| {
            (
                entry["tool"].as_str().unwrap_or_default(),
                entry["phase"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("echo", "decided"),
            ("echo", "finished"),
            ("note", "decided"),
            ("note", "finished")
        ]
    );
    assert_eq!(lines[1]["outcome"], "completed", "{}", lines[1]);
    assert_eq!(
        mcp_hints_gateway::chain::verify(&log, None)
            .unwrap()
            .entries,
        4
    );
    client.cancel().await.unwrap();
    stop.cancel();
}

//! `[[redact]]` end to end: the example `notes` server (a stdio upstream)
//! behind a gateway served on a loopback port, called by rmcp's
//! streamable-HTTP client. An AWS key written into a note comes back
//! masked, the audit log says where it matched and never holds it, and a
//! `deny_result` rule turns a result into the withheld tool error.

mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use support::{call, client, log_lines, scratch_dir, serve_gateway_built, text};
use tokio_util::sync::CancellationToken;

const ALICE: &str = "redaction-test-alice-token";
const KEY: &str = "AKIAIOSFODNN7EXAMPLE";

/// The example `notes` server, built once (escargot honours
/// `CARGO_TARGET_DIR`).
fn notes_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
        escargot::CargoBuild::new()
            .manifest_path(manifest)
            .package("mcp-hints-examples")
            .bin("notes")
            .run()
            .expect("build the notes example server")
            .path()
            .to_owned()
    })
    .clone()
}

/// A gateway serving `alice` over HTTP in front of `notes`, logging to
/// `log`, with `tables` (its `[[redact]]` and `[redaction]`) after.
fn config(log: &Path, tables: &str) -> String {
    let notes = serde_json::to_string(&[notes_server()]).unwrap();
    format!(
        r#"
[listen]
http = "127.0.0.1:0"

[[client]]
principal = "alice"
token = "{ALICE}"

[log]
path = {log:?}

[[upstream]]
name = "notes"
command = {notes}
trusted = true
{tables}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_results_are_masked_or_withheld_and_never_logged() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let dir = scratch_dir("redaction");
    let log = dir.join("audit.jsonl");
    let config = config(
        &log,
        r#"
[[redact]]
detectors = ["aws_access_key"]

[[redact]]
tool = "append*"
detectors = ["private_key"]
action = "deny_result"
"#,
    );
    let served = serve_gateway_built(&dir, "gateway", &config, &stop, |builder| {
        builder.metrics(true)
    })
    .await;
    let alice = client(served.address, ALICE).await;

    // Written through the gateway: the note's echo comes back masked.
    let appended = call(&alice, "notes__append_note", &format!("deploy key {KEY}")).await;
    assert_ne!(appended.is_error, Some(true), "{appended:?}");
    let shown = serde_json::to_string(&appended).unwrap();
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("[redacted:aws_access_key]"), "{shown}");

    // Read back: masked in the text block and in structuredContent.
    let listed = alice
        .call_tool(CallToolRequestParams::new("notes__list_notes"))
        .await
        .unwrap();
    assert_ne!(listed.is_error, Some(true), "{listed:?}");
    assert!(!text(&listed).contains(KEY), "{}", text(&listed));
    assert!(
        text(&listed).contains("[redacted:aws_access_key]"),
        "{}",
        text(&listed)
    );
    let structured = listed.structured_content.clone().unwrap();
    assert_eq!(
        structured["notes"][0]["text"],
        "deploy key [redacted:aws_access_key]"
    );

    // A private key in a result of `append*`: withheld, though it ran.
    let withheld = call(
        &alice,
        "notes__append_note",
        "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA\n-----END PRIVATE KEY-----",
    )
    .await;
    assert_eq!(withheld.is_error, Some(true), "{withheld:?}");
    // Matched twice: in the JSON text block and in structuredContent.
    assert_eq!(
        text(&withheld),
        "the result of `notes__append_note` was withheld by the gateway's redact[1] (detectors \
         private_key): it matched 2 times in content[0].text, structuredContent.text; the call \
         ran, its result is not shown"
    );
    let shown = serde_json::to_string(&withheld).unwrap();
    assert!(!shown.contains("MC4CAQAwBQYDK2VwBCIEIA"), "{shown}");
    let detail = &withheld.meta.as_ref().unwrap().0["mcp-hints/gateway"];
    assert_eq!(detail["outcome"], "withheld");
    assert_eq!(
        detail["redact"][0]["rule"],
        "redact[1] (detectors private_key)"
    );
    let listed = alice
        .call_tool(CallToolRequestParams::new("notes__list_notes"))
        .await
        .unwrap();
    assert_eq!(
        listed.structured_content.unwrap()["notes"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "the withheld call ran"
    );

    let entries = log_lines(&log, 8).await;
    let finished: Vec<&Value> = entries
        .iter()
        .filter(|entry| entry["phase"] == "finished")
        .collect();
    let seen: Vec<(&str, &str)> = finished
        .iter()
        .map(|entry| {
            (
                entry["tool"].as_str().unwrap(),
                entry["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("append_note", "completed"),
            ("list_notes", "completed"),
            ("append_note", "withheld"),
            ("list_notes", "completed"),
        ]
    );
    let listed = &finished[1]["redacted"];
    assert_eq!(
        listed[0]["rule"], "redact[0] (detectors aws_access_key)",
        "{listed}"
    );
    assert!(listed[0]["matches"].as_u64().unwrap() >= 1, "{listed}");
    let places: Vec<&str> = listed[0]["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|place| place.as_str().unwrap())
        .collect();
    assert!(places.contains(&"content[0].text"), "{places:?}");
    assert!(
        places.contains(&"structuredContent.notes[0].text"),
        "{places:?}"
    );
    assert_eq!(
        finished[2]["redacted"][0]["rule"],
        "redact[1] (detectors private_key)"
    );
    // Why it was withheld, on its own entry only.
    assert_eq!(finished[2]["withheld"], "redact[1] (detectors private_key)");
    assert!(
        entries
            .iter()
            .filter(|entry| entry["outcome"] != "withheld")
            .all(|entry| entry.get("withheld").is_none())
    );
    // The decided entries match nothing: no `redacted` there.
    assert!(
        entries
            .iter()
            .filter(|entry| entry["phase"] == "decided")
            .all(|entry| entry.get("redacted").is_none())
    );
    // Neither the key (argument or result) nor the private key is in the
    // log, anywhere.
    let whole = std::fs::read_to_string(&log).unwrap();
    assert!(!whole.contains(KEY), "{whole}");
    assert!(!whole.contains("MC4CAQAwBQYDK2VwBCIEIA"), "{whole}");
    assert!(json!(finished[0]).get("arguments").is_none());

    // Three results masked (the first append, both lists), one withheld.
    let metrics = served.gateway.render_metrics().unwrap();
    for expected in [
        r#"mcp_hints_gateway_redacted_results_total{upstream="notes",action="masked"} 3"#,
        r#"mcp_hints_gateway_redacted_results_total{upstream="notes",action="withheld"} 1"#,
    ] {
        assert!(
            metrics.lines().any(|line| line == expected),
            "{expected} in:\n{metrics}"
        );
    }

    drop(alice);
    stop.cancel();
    served.gateway.close();
}

/// A result whose text is over `[redaction] max_scan_bytes` is withheld
/// unscanned, and its `finished` entry says so, sizes included: with no
/// rule matched, nothing else in the log would tell why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_too_big_to_scan_is_withheld_and_its_entry_says_why() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stop = CancellationToken::new();
    let dir = scratch_dir("redaction-oversize");
    let log = dir.join("audit.jsonl");
    let config = config(
        &log,
        r#"
[redaction]
max_scan_bytes = 16

[[redact]]
detectors = ["aws_access_key"]
"#,
    );
    let served = serve_gateway_built(&dir, "gateway", &config, &stop, |builder| builder).await;
    let alice = client(served.address, ALICE).await;
    let appended = call(
        &alice,
        "notes__append_note",
        "a note longer than sixteen bytes",
    )
    .await;
    assert_eq!(appended.is_error, Some(true), "{appended:?}");
    let detail = &appended.meta.as_ref().unwrap().0["mcp-hints/gateway"];
    assert_eq!(detail["outcome"], "withheld", "{detail}");
    assert_eq!(detail["maxScanBytes"], 16, "{detail}");
    let bytes = detail["textBytes"].as_u64().unwrap();
    assert!(bytes > 16, "{detail}");

    let entries = log_lines(&log, 2).await;
    let finished = entries
        .iter()
        .find(|entry| entry["phase"] == "finished")
        .unwrap();
    assert_eq!(finished["outcome"], "withheld", "{finished}");
    assert_eq!(
        finished["withheld"],
        json!(format!(
            "over [redaction] max_scan_bytes: {bytes} bytes of text, the limit 16"
        )),
        "{finished}"
    );
    assert!(finished.get("redacted").is_none(), "{finished}");

    drop(alice);
    stop.cancel();
    served.gateway.close();
}

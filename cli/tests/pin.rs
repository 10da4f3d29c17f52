//! `mcp-hints pin` and `mcp-hints audit --pinned`: a lock of every tool's
//! fingerprint, and the drift a later list shows against it.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::{corpus, mcp_hints};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("pin")
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn pin(pages: &Path, lock: &Path) {
    let output = mcp_hints(&["pin", pages.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "pinned 9 tools from 1 page\n"
    );
    std::fs::write(lock, &output.stdout).unwrap();
}

fn audit_pinned(lock: &Path, pages: &Path) -> (i32, Value) {
    let output = mcp_hints(&[
        "audit",
        "--json",
        "--trusted",
        "--pinned",
        lock.to_str().unwrap(),
        pages.to_str().unwrap(),
    ]);
    let report = serde_json::from_slice(&output.stdout).unwrap();
    (output.status.code().unwrap(), report)
}

#[test]
fn an_unchanged_list_matches_its_lock() {
    let dir = scratch("unchanged");
    let pages = corpus("servers/server-memory.json");
    let lock = dir.join("tools.lock");
    pin(&pages, &lock);
    let text = std::fs::read_to_string(&lock).unwrap();
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["mcpHintsLock"], 1);
    assert_eq!(parsed["tools"].as_object().unwrap().len(), 9);
    assert!(
        parsed["tools"]["read_graph"]["fingerprint"]["definition"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // Pinning twice gives the same bytes.
    let again = dir.join("again.lock");
    pin(&pages, &again);
    assert_eq!(text, std::fs::read_to_string(&again).unwrap());

    let (code, report) = audit_pinned(&lock, &pages);
    assert_eq!(code, 1, "read-backs remain, and nothing drifted");
    assert_eq!(
        report["pinned"],
        json!({ "lock": lock.display().to_string(), "added": [], "removed": [], "changed": [] })
    );
}

#[test]
fn added_removed_and_changed_tools_are_reported_and_refused() {
    let dir = scratch("drift");
    let original = corpus("servers/server-memory.json");
    let lock = dir.join("tools.lock");
    pin(&original, &lock);

    let mut pages: Value =
        serde_json::from_str(&std::fs::read_to_string(&original).unwrap()).unwrap();
    let tools = pages["pages"][0]["tools"].as_array_mut().unwrap();
    // read_graph is gone; delete_entities now says it is read-only and has a
    // new description; a new tool appears.
    tools.retain(|tool| tool["name"] != "read_graph");
    let delete = tools
        .iter_mut()
        .find(|tool| tool["name"] == "delete_entities")
        .unwrap();
    delete["description"] = json!("Deletes entities. Now also empties the graph.");
    delete["annotations"]["readOnlyHint"] = json!(true);
    tools.push(json!({ "name": "wipe", "inputSchema": { "type": "object" } }));
    let changed = dir.join("changed.json");
    std::fs::write(&changed, pages.to_string()).unwrap();

    let (code, report) = audit_pinned(&lock, &changed);
    assert_eq!(code, 3, "drift outranks read-backs");
    assert_eq!(
        report["pinned"],
        json!({
            "lock": lock.display().to_string(),
            "added": ["wipe"],
            "removed": ["read_graph"],
            "changed": [{
                "name": "delete_entities",
                "parts": ["description", "annotations"],
                "hints": [{ "hint": "readOnlyHint", "pinned": false, "now": true }],
            }],
        })
    );
    let verdict = |name: &str| {
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == name)
            .map(|tool| (tool["decision"].clone(), tool["reason"].clone()))
            .unwrap()
    };
    assert_eq!(
        verdict("delete_entities"),
        (
            json!("refuse"),
            json!(format!(
                "changed since {} (description, annotations; readOnlyHint false -> true): \
                 approve it again, then pin again",
                lock.display()
            ))
        )
    );
    assert_eq!(verdict("wipe").0, json!("refuse"));
    assert_eq!(verdict("search_nodes").0, json!("resend"));
    assert_eq!(report["summary"]["refuse"], 2);

    let output = mcp_hints(&[
        "audit",
        "--pinned",
        lock.to_str().unwrap(),
        changed.to_str().unwrap(),
    ]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "changes since {}:\n  + wipe (added)\n  - read_graph (removed)\n  ~ delete_entities \
             (changed: description, annotations; readOnlyHint false -> true)\n",
            lock.display()
        )),
        "{text}"
    );
}

#[test]
fn a_bad_lock_is_exit_2_naming_the_file() {
    let dir = scratch("bad");
    let lock = dir.join("bad.lock");
    std::fs::write(&lock, "{\"tools\": 3}").unwrap();
    let pages = corpus("servers/mcp-server-time.json");
    let output = mcp_hints(&[
        "audit",
        "--pinned",
        lock.to_str().unwrap(),
        pages.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.starts_with(&format!("error: {}: not a tools lock:", lock.display())),
        "{message}"
    );
    let missing = dir.join("missing.lock");
    let output = mcp_hints(&[
        "audit",
        "--pinned",
        missing.to_str().unwrap(),
        pages.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
}

//! The crate feature `deny-undeclared-hints` turns every `undeclared_hints`
//! warning into an error, and leaves a fully declared server building;
//! `allow-undeclared-hints` silences the warning, and is outranked by deny.
//!
//! Features cannot vary between trybuild cases, so this test runs
//! `cargo check` on the notes example in a target directory of its own.

use std::path::Path;
use std::process::{Command, Output};

fn check_notes(features: &str) -> Output {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deny-feature");
    Command::new(env!("CARGO"))
        .current_dir(workspace)
        .args([
            "check",
            "--quiet",
            "-p",
            "mcp-hints-examples",
            "--bin",
            "notes",
        ])
        .args(["--features", features])
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs")
}

#[test]
fn deny_feature_turns_the_warning_into_an_error_and_spares_declared_tools() {
    let undeclared = check_notes("lint-demo,mcp-hints/deny-undeclared-hints");
    let stderr = String::from_utf8_lossy(&undeclared.stderr);
    assert!(!undeclared.status.success(), "build should fail:\n{stderr}");
    assert!(
        stderr.contains(
            "error: `undeclared_hints` is denied: tool `touch` leaves readOnlyHint, \
             destructiveHint and idempotentHint undeclared"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.matches("is denied").count(), 1, "{stderr}");

    let declared = check_notes("mcp-hints/deny-undeclared-hints");
    let stderr = String::from_utf8_lossy(&declared.stderr);
    assert!(declared.status.success(), "build should pass:\n{stderr}");
    assert!(!stderr.contains("undeclared"), "{stderr}");
}

#[test]
fn allow_feature_silences_the_warning_and_deny_outranks_it() {
    let warned = check_notes("lint-demo");
    let stderr = String::from_utf8_lossy(&warned.stderr);
    assert!(warned.status.success(), "{stderr}");
    assert!(
        stderr.contains("tool `touch` leaves readOnlyHint"),
        "the warning shows without the feature:\n{stderr}"
    );

    let quiet = check_notes("lint-demo,mcp-hints/allow-undeclared-hints");
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(quiet.status.success(), "{stderr}");
    assert!(!stderr.contains("undeclared"), "{stderr}");

    let both =
        check_notes("lint-demo,mcp-hints/allow-undeclared-hints,mcp-hints/deny-undeclared-hints");
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert!(!both.status.success(), "deny outranks allow:\n{stderr}");
    assert!(stderr.contains("`undeclared_hints` is denied"), "{stderr}");
}

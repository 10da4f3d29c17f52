//! What the command's test files share: where the corpus is, how to run the
//! `mcp-hints` binary, and the example `notes` server.

// Each test file uses some of these.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// A file of tests/corpus/.
pub fn corpus(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(file)
}

/// Runs `mcp-hints ARGS` without colour and waits for it.
pub fn mcp_hints(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("mcp-hints runs")
}

/// The example `notes` server, built once per test binary (escargot honours
/// CARGO_TARGET_DIR).
pub fn notes_server() -> PathBuf {
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

/// (name, decision) of every tool of an audit's JSON report, in list order.
pub fn decisions(report: &Value) -> Vec<(String, String)> {
    report["tools"]
        .as_array()
        .expect("the report has tools")
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap().to_owned(),
                tool["decision"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A binary of the `mcp-hints-faults` package (`fault-proxy`,
/// `counter-server`), built once per test binary and name.
pub fn faults_binary(name: &'static str) -> PathBuf {
    static PATHS: std::sync::Mutex<Vec<(&str, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut paths = PATHS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = paths.iter().find(|(built, _)| *built == name) {
        return path.clone();
    }
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let path = escargot::CargoBuild::new()
        .manifest_path(manifest)
        .package("mcp-hints-faults")
        .bin(name)
        .run()
        .unwrap_or_else(|error| panic!("build {name} of mcp-hints-faults: {error}"))
        .path()
        .to_owned();
    paths.push((name, path.clone()));
    path
}

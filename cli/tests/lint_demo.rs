//! A server with an undeclared tool still builds, with the `#[tool]` lint's
//! warning; `mcp-hints lint` then finds the same tool from the wire alone,
//! in the same words.
//!
//! Features cannot vary within one build, so the example `notes` is built
//! with `lint-demo` (which adds `touch`, a tool that declares no read/write
//! hint) by `cargo build` in a target directory of its own.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
fn an_undeclared_tool_builds_with_the_warning_and_lints_in_the_same_words() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lint-demo");
    let build = Command::new(env!("CARGO"))
        .current_dir(workspace)
        .args(["build", "-p", "mcp-hints-examples", "--bin", "notes"])
        .args(["--features", "lint-demo"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        // Plain text to search; a fresh build replays its cached warnings.
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&build.stderr);
    assert!(build.status.success(), "the build fails:\n{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let at = lines
        .iter()
        .position(|line| line.contains("tool `touch` leaves"))
        .unwrap_or_else(|| panic!("no warning about `touch`:\n{stderr}"));
    assert!(lines[at].starts_with("warning"), "{stderr}");
    let warning = lines[at];
    assert!(
        warning.contains(
            "tool `touch` leaves readOnlyHint, destructiveHint and idempotentHint undeclared, \
             so clients will assume readOnlyHint false, destructiveHint true and \
             idempotentHint false"
        ),
        "{warning}"
    );
    // One warning, for `touch` only.
    assert_eq!(stderr.matches("leaves").count(), 1, "{stderr}");

    let notes = target.join("debug").join("notes");
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["lint", "--json", "--timeout", "20", "--"])
        .arg(&notes)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let findings: Vec<(&str, &str)> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap(),
                finding["tool"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        findings,
        [("undeclared_hints", "touch"), ("missing_title", "touch")]
    );
    let undeclared = &report["findings"][0];
    assert_eq!(
        undeclared["message"],
        "tool `touch` leaves readOnlyHint, destructiveHint and idempotentHint undeclared"
    );
    // The server's `_meta` shows it was built with `#[tool]`: the help
    // names the flags to add, not the wire's fields.
    assert_eq!(
        undeclared["help"],
        "add `#[tool(read_only)]` (or `#[tool(idempotent)]`/`#[tool(non_idempotent)]` with \
         `#[tool(destructive)]`/`#[tool(additive)]`) (the server's `_meta` shows it was built \
         with mcp-hints' `#[tool]`; flags combine: `#[tool(non_idempotent, additive)]`)"
    );
    // The build's warning says what the command's finding says.
    let note = undeclared["note"].as_str().unwrap();
    let said = format!("{}, so {}", undeclared["message"].as_str().unwrap(), note);
    assert!(warning.contains(&said), "{warning}\ndoes not say\n{said}");
}

/// `scripts/demo` builds everything it runs in one `cargo build`: the
/// crates its packages share are then compiled once, with one set of
/// features. A `cargo` on `PATH` that records its arguments stands in for
/// the real one, and the binaries it would build for the programs.
#[cfg(unix)]
#[test]
fn the_demo_builds_once() {
    use std::os::unix::fs::PermissionsExt;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo-builds-once");
    let _ = std::fs::remove_dir_all(&scratch);
    let bin = scratch.join("bin");
    let debug = scratch.join("target").join("debug");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&debug).unwrap();
    let calls = scratch.join("cargo-calls");
    let executable = |path: &Path, text: &str| {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    executable(
        &bin.join("cargo"),
        &format!("#!/bin/sh\necho \"$*\" >> '{}'\n", calls.display()),
    );
    for program in [
        "notes",
        "list-tools",
        "notes-client",
        "mcp-hints",
        "fault-proxy",
    ] {
        executable(&debug.join(program), "#!/bin/sh\nexit 0\n");
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let demo = Command::new("bash")
        .arg(workspace.join("scripts").join("demo"))
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", scratch.join("target"))
        .output()
        .unwrap();
    assert!(demo.status.success(), "{demo:?}");
    let calls = std::fs::read_to_string(&calls).unwrap();
    let builds: Vec<&str> = calls
        .lines()
        .filter(|call| call.starts_with("build"))
        .collect();
    assert_eq!(builds.len(), 1, "{calls}");
    for wanted in [
        "-p mcp-hints-examples",
        "-p mcp-hints-cli",
        "-p mcp-hints-faults",
        "--bin notes ",
        "--bin list-tools",
        "--bin notes-client",
        "--bin mcp-hints ",
        "--bin fault-proxy",
        "--features mcp-hints-examples/lint-demo",
    ] {
        assert!(
            builds[0].contains(wanted),
            "`{wanted}` not in `{}`",
            builds[0]
        );
    }
}

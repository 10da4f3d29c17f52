//! Where the report goes: a closed or failing stdout is exit 2 for every
//! command, text and JSON, and for `--help` and `--version`; a reader that goes away early (`| head`) leaves
//! the status of audit and lint as it was, while pin, whose lock is the
//! whole point, is exit 2.

mod support;

use std::process::{Command, Output, Stdio};

use support::corpus;

/// Every command, as run on the same saved pages, with the status it has
/// when its output is written.
fn commands() -> Vec<(Vec<&'static str>, i32)> {
    vec![
        (vec!["audit"], 1),
        (vec!["audit", "--json"], 1),
        (vec!["lint"], 0),
        (vec!["lint", "--json"], 0),
        (vec!["pin"], 0),
    ]
}

fn pages() -> String {
    corpus("servers/mcp-server-time.json").display().to_string()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What the command writes its output to: a report, or pin's lock.
fn what(args: &[&str]) -> &'static str {
    if args[0] == "pin" { "lock" } else { "report" }
}

#[test]
fn a_closed_stdout_is_exit_2() {
    for (args, _) in commands() {
        // `exec ... >&-` starts the command with descriptor 1 closed.
        let output = Command::new("sh")
            .args([
                "-c",
                r#"exec "$0" "$@" >&-"#,
                env!("CARGO_BIN_EXE_mcp-hints"),
            ])
            .args(&args)
            .arg(pages())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            stderr(&output),
            format!(
                "error: cannot write the {}: stdout is closed (`>&-`); redirect it to a file\n",
                what(&args)
            ),
            "{args:?}"
        );
    }
}

#[test]
fn a_stdout_that_fails_is_exit_2() {
    for (args, _) in commands() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full exists (Linux)");
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(&args)
            .arg(pages())
            .env("NO_COLOR", "1")
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        let message = stderr(&output);
        assert!(
            message.starts_with(&format!("error: cannot write the {}: ", what(&args)))
                && message.contains("No space left on device"),
            "{args:?}: {message}"
        );
    }
}

#[test]
fn dev_null_is_not_a_closed_stdout() {
    for (args, code) in commands() {
        // Write-only as a shell's `> /dev/null`, and read-write as Python's
        // `subprocess.DEVNULL` and Rust's own runtime open it.
        let read_write = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap();
        for null in [Stdio::null(), Stdio::from(read_write)] {
            let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
                .args(&args)
                .arg(pages())
                .stdout(null)
                .output()
                .unwrap();
            assert_eq!(
                output.status.code(),
                Some(code),
                "{args:?}: {}",
                stderr(&output)
            );
        }
    }
}

#[test]
fn a_reader_gone_early_leaves_the_status_but_loses_no_lock_silently() {
    for (args, code) in commands() {
        // A pipe whose reading end is closed before the command writes: any
        // write fails with a broken pipe, deterministically.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(&args)
            .arg(pages())
            .env("NO_COLOR", "1")
            .stdout(writer)
            .output()
            .unwrap();
        let message = stderr(&output);
        if args[0] == "pin" {
            assert_eq!(output.status.code(), Some(2), "{message}");
            assert!(
                message.starts_with("error: cannot write the lock: Broken pipe"),
                "{message}"
            );
        } else {
            // Nothing anyone reads is lost: the status is the command's.
            assert_eq!(output.status.code(), Some(code), "{args:?}: {message}");
            assert_eq!(message, "", "{args:?}");
        }
    }
}

#[test]
fn help_and_version_fail_on_a_closed_or_failing_stdout() {
    for (args, what) in [
        (&["--help"][..], "help"),
        (&["audit", "--help"], "help"),
        (&["-h"], "help"),
        (&["--version"], "version"),
        (&["-V"], "version"),
    ] {
        let closed = Command::new("sh")
            .args([
                "-c",
                r#"exec "$0" "$@" >&-"#,
                env!("CARGO_BIN_EXE_mcp-hints"),
            ])
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(
            closed.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&closed)
        );
        assert_eq!(
            stderr(&closed),
            format!(
                "error: cannot write the {what}: stdout is closed (`>&-`); redirect it to a file\n"
            ),
            "{args:?}"
        );
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full exists (Linux)");
        let failing = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(args)
            .env("NO_COLOR", "1")
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(
            failing.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&failing)
        );
        let message = stderr(&failing);
        assert!(
            message.starts_with(&format!("error: cannot write the {what}: "))
                && message.contains("No space left on device"),
            "{args:?}: {message}"
        );
        // Written where it can be: exit 0, the text on stdout alone.
        let written = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert_eq!(
            written.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&written)
        );
        assert_eq!(stderr(&written), "", "{args:?}");
        let text = String::from_utf8_lossy(&written.stdout);
        let expected = if what == "version" { "mcp-hints " } else { "" };
        assert!(
            text.starts_with(expected) && text.ends_with('\n'),
            "{args:?}: {text}"
        );
        if what == "help" {
            assert!(text.contains("Usage: mcp-hints"), "{args:?}: {text}");
        }
    }
    // A usage error is still clap's: stderr, status 2.
    let usage = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .arg("--no-such-flag")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
    assert!(
        stderr(&usage).starts_with("error: unexpected argument '--no-such-flag'"),
        "{}",
        stderr(&usage)
    );
}

//! The command line itself: what `--help` says where it matters, the shell
//! completions, and `gateway log --columns`.

mod support;

use std::process::Command;

use support::mcp_hints;

fn help(args: &[&str]) -> String {
    let mut args = args.to_vec();
    args.push("--help");
    let output = mcp_hints(&args);
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn timeout_speaks_of_reset_only_on_verify() {
    for command in ["audit", "lint", "pin"] {
        let text = help(&[command]);
        assert!(text.contains("--timeout <SECS>"), "{command}: {text}");
        assert!(
            !text.contains("reset"),
            "{command} --help speaks of --reset:\n{text}"
        );
    }
    let verify = help(&["verify"]);
    assert!(
        verify.contains("and so does one that takes longer than --timeout"),
        "{verify}"
    );
}

#[test]
fn the_admin_commands_name_the_variables_they_read() {
    for command in ["pending", "approve", "deny"] {
        let text = help(&["gateway", command]);
        for needed in [
            "MCP_GATEWAY_ADMIN_TOKEN",
            "MCP_GATEWAY_ADMIN_URL",
            "--config <FILE>",
        ] {
            assert!(
                text.contains(needed),
                "gateway {command} --help lacks {needed}:\n{text}"
            );
        }
    }
}

#[test]
fn gateway_check_help_says_it_starts_the_upstreams() {
    let text = help(&["gateway", "check"]);
    assert!(
        text.contains("It starts every upstream to read its tools/list, then stops them"),
        "{text}"
    );
}

/// An admin endpoint nobody listens on is named with why it cannot be
/// reached, not only that a request failed.
#[test]
fn an_unreachable_admin_endpoint_is_named_with_the_cause() {
    // Bind and drop a listener: the port is then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let admin = format!("http://127.0.0.1:{port}");
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-hints"))
        .args(["gateway", "pending", "--admin", &admin])
        .env("MCP_GATEWAY_ADMIN_TOKEN", "t0ken-of-the-admin")
        .output()
        .expect("mcp-hints runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("cannot reach the admin endpoint {admin}/pending")),
        "{stderr}"
    );
    assert!(stderr.contains("Connection refused"), "{stderr}");
}

/// `mcp-hints completions SHELL`'s script, which the shell itself then
/// reads without error.
#[test]
fn completions_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let output = mcp_hints(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {output:?}");
        let script = String::from_utf8(output.stdout).unwrap();
        // Subcommands two levels down, and their flags.
        for word in ["audit", "gateway", "approve", "columns", "protocol-version"] {
            assert!(script.contains(word), "{shell}: no `{word}` in\n{script}");
        }
        let syntax = match shell {
            "bash" => Command::new("bash").args(["-n", "-c", &script]).output(),
            "zsh" => Command::new("zsh").args(["-n", "-c", &script]).output(),
            _ => Command::new("fish")
                .args(["--no-execute", "-c", &script])
                .output(),
        };
        // A shell that is not installed here checks nothing.
        if let Ok(checked) = syntax {
            assert!(
                checked.status.success(),
                "{shell} rejects its script: {checked:?}"
            );
        }
    }
    let bad = mcp_hints(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// What bash's completion function offers for the words typed so far, the
/// last one being completed.
fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    let words_quoted: Vec<String> = words.iter().map(|word| format!("'{word}'")).collect();
    let program = format!(
        "{script}\nCOMP_WORDS=({words})\nCOMP_CWORD={last}\n_mcp__hints mcp-hints '{current}' \
         '{previous}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        words = words_quoted.join(" "),
        last = words.len() - 1,
        current = words[words.len() - 1],
        previous = words[words.len() - 2],
    );
    let output = Command::new("bash")
        .args(["-c", &program])
        .output()
        .expect("bash runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_their_flags_at_every_level() {
    let output = mcp_hints(&["completions", "bash"]);
    let script = String::from_utf8(output.stdout).unwrap();
    let offered = bash_completes(&script, &["mcp-hints", "au"]);
    assert_eq!(offered, ["audit"]);
    let offered = bash_completes(&script, &["mcp-hints", "audit", "--tr"]);
    assert_eq!(offered, ["--trusted"]);
    let offered = bash_completes(&script, &["mcp-hints", "gateway", "se"]);
    assert_eq!(offered, ["serve"]);
    let offered = bash_completes(&script, &["mcp-hints", "gateway", "log", "--col"]);
    assert_eq!(offered, ["--columns"]);
}

#[test]
fn gateway_log_prints_the_columns_asked_for() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("log-columns");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("audit.jsonl");
    std::fs::write(
        &log,
        concat!(
            r#"{"time":"2026-12-01T13:46:40.894Z","id":"16189e36","principal":"alice","#,
            r#""upstream":"memory","tool":"delete_entities","decision":"deny","rule":"rule[0]","#,
            r#""hints":{},"arguments_sha256":"0123456789abcdef","phase":"decided"}"#,
            "\n"
        ),
    )
    .unwrap();
    let log = log.to_str().unwrap();
    let output = mcp_hints(&[
        "gateway",
        "log",
        "--log",
        log,
        "--columns",
        "time,tool,rule",
    ]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "TIME                      TOOL             RULE\n\
         2026-12-01T13:46:40.894Z  delete_entities  rule[0]\n\
         1 entry\n"
    );
    let bad = mcp_hints(&["gateway", "log", "--log", log, "--columns", "time,colour"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("`colour` is not a column: give time, id,"),
        "{bad:?}"
    );
}

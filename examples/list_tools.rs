//! Lists the tools of an MCP server with each hint's value and whether the
//! author declared it or left it to the spec default.
//!
//! Usage: `list-tools [--timeout SECS] COMMAND [ARGS...]` spawns the server
//! over stdio, e.g. `list-tools target/debug/notes`. Exits 2 when the server
//! cannot be started, closes the connection, or does not answer `tools/list`
//! within the timeout; the server and every process it started are killed
//! then.
//!
//! Provenance comes from `_meta["mcp-hints/provenance"]` where a server
//! built with `#[tool]` records it; for any other server a hint present on
//! the wire counts as declared.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use mcp_hints::{Hint, Provenance, ToolHints};
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::ServiceExt;
use rmcp::model::Tool;
use rmcp::transport::TokioChildProcess;

/// List an MCP server's tools with each hint's value and provenance.
#[derive(Parser)]
#[command(name = "list-tools")]
struct Args {
    /// Seconds the server has to start and answer `tools/list`.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    timeout: u64,
    /// The stdio server to run, and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let program = args.command[0].clone();
    let timeout = Duration::from_secs(args.timeout);
    let outcome = tokio::time::timeout(timeout, list(&args.command)).await;
    if !matches!(outcome, Ok(Ok(_))) {
        // A failed or timed-out listing dropped the transport, whose clean-up
        // task kills the server's process group; let it run before exiting.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match outcome {
        Ok(Ok(tools)) => {
            print!("{}", table(&tools));
            ExitCode::SUCCESS
        }
        Ok(Err(error)) => {
            eprintln!("list-tools: {program}: {error}");
            ExitCode::from(2)
        }
        Err(_) => {
            eprintln!(
                "list-tools: {program}: no answer to initialize and tools/list within {}s \
                 (the server was stopped)",
                args.timeout
            );
            ExitCode::from(2)
        }
    }
}

async fn list(command: &[String]) -> Result<Vec<Tool>, Box<dyn std::error::Error>> {
    let mut wrapped = CommandWrap::with_new(&command[0], |cmd| {
        cmd.args(&command[1..]);
    });
    // Killing the group also stops what a wrapper script (`sh -c`, `npx`)
    // started.
    wrapped.wrap(ProcessGroup::leader());
    let transport = TokioChildProcess::new(wrapped)?;
    let client = ().serve(transport).await.map_err(|error| {
        format!("no MCP server answered initialize ({error}); run the command alone to see why")
    })?;
    // `list_all_tools` follows `nextCursor` until the server omits it.
    let tools = client.list_all_tools().await?;
    client.cancel().await?;
    Ok(tools)
}

/// One row per tool: its name, then each hint as `value (provenance)`.
fn table(tools: &[Tool]) -> String {
    let mut rows = vec![
        std::iter::once("tool".to_owned())
            .chain(Hint::ALL.iter().map(|hint| hint.wire_name().to_owned()))
            .collect::<Vec<_>>(),
    ];
    for tool in tools {
        let hints = ToolHints::of(tool);
        let mut row = vec![tool.name.to_string()];
        row.extend(Hint::ALL.iter().map(|hint| {
            let value = hints.get(*hint);
            let provenance = match value.provenance {
                Provenance::Declared => "declared",
                Provenance::Defaulted => "DEFAULTED",
                other => other.as_str(),
            };
            format!("{} ({provenance})", value.value)
        }));
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

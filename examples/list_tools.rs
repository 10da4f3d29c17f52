//! Lists the tools of an MCP server with each hint's value and whether the
//! author declared it or left it to the spec default.
//!
//! Usage: `list-tools COMMAND [ARGS...]` spawns the server over stdio, e.g.
//! `list-tools target/debug/notes`. Exits 2 when the server cannot be
//! started or does not answer `tools/list` within the timeout.
//!
//! Provenance comes from `_meta["mcp-hints/provenance"]` where a server
//! built with `#[tool]` records it; for any other server a hint present on
//! the wire counts as declared.

use std::process::ExitCode;
use std::time::Duration;

use mcp_hints::{Hint, Provenance, ToolHints};
use rmcp::ServiceExt;
use rmcp::model::Tool;
use rmcp::transport::TokioChildProcess;
use tokio::process::Command;

/// How long the server has to start and answer `tools/list`.
const TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: list-tools COMMAND [ARGS...]");
        return ExitCode::from(2);
    };
    let mut command = Command::new(&program);
    command.args(args);
    match tokio::time::timeout(TIMEOUT, list(command)).await {
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
                "list-tools: {program}: no answer to tools/list within {}s",
                TIMEOUT.as_secs()
            );
            ExitCode::from(2)
        }
    }
}

async fn list(command: Command) -> Result<Vec<Tool>, Box<dyn std::error::Error>> {
    let client = ().serve(TokioChildProcess::new(command)?).await?;
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

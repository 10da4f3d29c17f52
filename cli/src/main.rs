//! `mcp-hints`: audit, lint and pin any MCP server's tools.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = mcp_hints_cli::args::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(mcp_hints_cli::EXIT_BAD_INPUT);
        }
    };
    runtime.block_on(mcp_hints_cli::run(cli))
}

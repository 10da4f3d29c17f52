//! `mcp-hints`: audit, lint, pin and verify any MCP server's tools.

use std::process::ExitCode;

/// The allocator of the whole command (see `Cargo.toml` for why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match mcp_hints_cli::command_line() {
        Ok(cli) => cli,
        Err(status) => return status,
    };
    let mut runtime = if mcp_hints_cli::serves_many_clients(&cli) {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match runtime.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(mcp_hints_cli::EXIT_BAD_INPUT);
        }
    };
    runtime.block_on(mcp_hints_cli::run(cli))
}

/// Records whether stdout is closed (`mcp-hints pin >&-`). It runs before
/// `main`, as a constructor of the executable, because before `main` Rust's
/// runtime opens /dev/null on a standard descriptor it finds closed: every
/// write would then succeed unseen, and /dev/null opened by the runtime
/// cannot be told from /dev/null opened by a caller who wants no output.
#[cfg(unix)]
extern "C" fn record_closed_stdout() {
    // SAFETY: F_GETFD reads a descriptor's flags; no memory is passed.
    if unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1 {
        mcp_hints_cli::stdout_closed_at_start();
    }
}

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly",
    target_os = "illumos",
    target_os = "solaris"
))]
#[used]
#[unsafe(link_section = ".init_array")]
static RECORD_CLOSED_STDOUT: extern "C" fn() = record_closed_stdout;

#[cfg(target_vendor = "apple")]
#[used]
#[unsafe(link_section = "__DATA,__mod_init_func")]
static RECORD_CLOSED_STDOUT: extern "C" fn() = record_closed_stdout;

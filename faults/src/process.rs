//! Killing a server (one process; a stdio server's whole process group is
//! killed by `mcp_hints::process_group`) and waiting for the signals that
//! stop the proxy itself.

use std::io;

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::signal::unix::{Signal as UnixSignal, SignalKind, signal};

/// Sends SIGKILL to process `pid`.
///
/// # Errors
///
/// `InvalidInput` for a pid below 1 (0 and negative pids name process
/// groups, our own included), and the OS error otherwise (`ESRCH` when the
/// process is already gone).
pub fn kill_process(pid: i32) -> io::Result<()> {
    if pid < 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pid} is not a process id"),
        ));
    }
    signal::kill(Pid::from_raw(pid), Signal::SIGKILL).map_err(io::Error::from)
}

/// Handlers for SIGINT and SIGTERM, installed as soon as this is made: from
/// then on neither signal ends the proxy by default (which would leave a
/// stdio server running), they wait for [`ShutdownSignals::recv`].
#[derive(Debug)]
pub struct ShutdownSignals {
    interrupt: UnixSignal,
    terminate: UnixSignal,
}

impl ShutdownSignals {
    /// Installs both handlers; needs a running tokio runtime.
    ///
    /// # Errors
    ///
    /// When a handler cannot be installed.
    pub fn install() -> io::Result<Self> {
        Ok(ShutdownSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for SIGINT or SIGTERM and returns its number (2 or 15).
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT as i32,
            Some(()) = self.terminate.recv() => Signal::SIGTERM as i32,
            else => std::future::pending().await,
        }
    }
}

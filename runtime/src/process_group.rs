//! Not public API: how the workspace's own programs that start MCP servers
//! (the `mcp-hints` command's gateway, fault-proxy, the benchmarks) signal
//! a server's whole process group when all they hold is its id.
//!
//! A server started through a wrapper (`sh -c`, `npx`, `uv run`) leads a
//! group of its own (`Command::process_group(0)`, or process-wrap's
//! `ProcessGroup::leader()`, whose child is then stopped through
//! process-wrap), so that it dies with what it started. The signals go
//! through nix's `killpg`, as process-wrap's own do.

use std::io;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Sends SIGKILL to every process in group `pgid` (its leader's pid).
///
/// # Errors
///
/// `InvalidInput` for a group id below 1 (0 and negative ids would name
/// the caller's own group, or every process), and the OS error otherwise
/// (`ESRCH` when the group is gone).
pub fn kill(pgid: i32) -> io::Result<()> {
    send(pgid, Some(Signal::SIGKILL))
}

/// Sends SIGTERM to every process in group `pgid`.
///
/// # Errors
///
/// As [`kill`].
pub fn terminate(pgid: i32) -> io::Result<()> {
    send(pgid, Some(Signal::SIGTERM))
}

/// Whether any process of group `pgid` is still alive (a group id is not
/// used again while one is).
pub fn alive(pgid: i32) -> bool {
    send(pgid, None).is_ok()
}

fn send(pgid: i32, signal: Option<Signal>) -> io::Result<()> {
    if pgid < 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pgid} is not a process group id"),
        ));
    }
    killpg(Pid::from_raw(pgid), signal).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::Command;

    #[test]
    fn a_group_dies_whole() {
        // A leader that waits on a member of its group.
        let mut leader = Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = i32::try_from(leader.id()).unwrap();
        assert!(super::alive(pgid));
        super::kill(pgid).unwrap();
        assert_eq!(leader.wait().unwrap().signal(), Some(libc::SIGKILL));
        // The member is gone too, a moment later.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while super::alive(pgid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!super::alive(pgid));
    }

    #[test]
    fn ids_that_name_no_single_group_are_refused() {
        for pgid in [0, -1] {
            let error = super::kill(pgid).unwrap_err();
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        }
    }
}

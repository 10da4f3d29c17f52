//! The stdio mode: the server runs as a child in its own process group, and
//! newline-delimited JSON-RPC is relayed line by line both ways, unchanged
//! except where a fault fires.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

use crate::inject::{Fired, Injector};
use crate::jsonrpc::{response_ids, tool_calls};
use crate::process::ShutdownSignals;
use crate::spec::Action;

/// After the client closes our stdin (and we close the server's): how long
/// the server gets to exit by itself before it is killed.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);

/// After the server exits: how long its remaining output may take to reach
/// the client (a process it left behind may hold its stdout open).
pub const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// Runs `program` with `args` as a stdio MCP server and relays the proxy's
/// stdin to it and its stdout to the proxy's stdout, applying `injector`'s
/// faults. The server's stderr is the proxy's.
///
/// Returns the exit status the proxy should end with: 0 when the proxy
/// killed the server itself (a fault, or the client closed stdin and the
/// server outlived [`EXIT_GRACE`]), the server's own status otherwise
/// (128 + signal if a signal the proxy did not send killed it), and 128 +
/// signal when SIGINT or SIGTERM stopped the proxy.
///
/// The caller should end the process soon after: the task reading the
/// proxy's stdin may still be blocked in a read.
///
/// # Errors
///
/// When the signal handlers cannot be installed, the server cannot be
/// started, or its exit status cannot be read.
pub async fn run(program: &OsStr, args: &[OsString], injector: Arc<Injector>) -> io::Result<i32> {
    // Before the server starts, so that no signal can end us and leave it.
    let mut signals = ShutdownSignals::install()?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // Its own group: killing the group stops what a wrapper started,
        // and the terminal's Ctrl-C reaches only us, so we decide.
        .process_group(0);
    let mut child = command.spawn().map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("cannot start `{}`: {error}", program.to_string_lossy()),
        )
    })?;
    let (Some(pid), Some(server_stdin), Some(server_stdout)) =
        (child.id(), child.stdin.take(), child.stdout.take())
    else {
        return Err(io::Error::other("the server's pipes are missing"));
    };
    let server = Arc::new(Server {
        pgid: i32::try_from(pid).map_err(io::Error::other)?,
        killed: AtomicBool::new(false),
        exited: AtomicBool::new(false),
    });
    let relay = Relay {
        injector,
        server: Arc::clone(&server),
        awaited: Mutex::default(),
    };
    let relay = Arc::new(relay);

    let (to_client, outgoing) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_to_client(outgoing));
    let (client_closed, mut closed) = oneshot::channel();
    tokio::spawn(Arc::clone(&relay).client_to_server(
        BufReader::new(tokio::io::stdin()),
        server_stdin,
        client_closed,
    ));
    let from_server = tokio::spawn(
        Arc::clone(&relay).server_to_client(BufReader::new(server_stdout), to_client.clone()),
    );
    let (exit_tx, mut exit) = oneshot::channel();
    let waiter = Arc::clone(&server);
    tokio::spawn(async move {
        let status = child.wait().await;
        waiter.exited.store(true, Ordering::SeqCst);
        let _ = exit_tx.send(status);
    });

    let mut stopped_by = None;
    let status: io::Result<ExitStatus> = tokio::select! {
        status = &mut exit => status.unwrap_or_else(|_| Err(io::Error::other("lost the server"))),
        Ok(()) = &mut closed => {
            match tokio::time::timeout(EXIT_GRACE, &mut exit).await {
                Ok(status) => status.unwrap_or_else(|_| Err(io::Error::other("lost the server"))),
                Err(_) => {
                    server.kill();
                    (&mut exit).await.unwrap_or_else(|_| Err(io::Error::other("lost the server")))
                }
            }
        }
        signal = signals.recv() => {
            stopped_by = Some(signal);
            server.kill();
            (&mut exit).await.unwrap_or_else(|_| Err(io::Error::other("lost the server")))
        }
    };
    let status = status?;

    // What the server wrote before it exited still reaches the client;
    // responses held by a delay do not.
    let _ = tokio::time::timeout(DRAIN_GRACE, from_server).await;
    let _ = to_client.send(Outgoing::End);
    let _ = tokio::time::timeout(DRAIN_GRACE, writer).await;

    Ok(match stopped_by {
        Some(signal) => 128 + signal,
        None if server.killed.load(Ordering::SeqCst) => 0,
        None => status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
    })
}

/// The running server, as far as killing it goes.
struct Server {
    /// The server is its group's leader, so its pid is the group's id.
    pgid: i32,
    /// The proxy killed it (the exit status is then 0).
    killed: AtomicBool,
    /// It has been waited for: its group id may be reused, so no more kills.
    exited: AtomicBool,
}

impl Server {
    fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        if self.exited.load(Ordering::SeqCst) {
            return;
        }
        // The whole group, so a server started through a wrapper dies with
        // what it started.
        if let Err(error) = mcp_hints::process_group::kill(self.pgid) {
            eprintln!(
                "fault-proxy: cannot kill the server's process group {}: {error}",
                self.pgid
            );
        }
    }
}

enum Outgoing {
    Line(Vec<u8>),
    /// Nothing more will be written: flush and stop.
    End,
}

/// What both relay directions share.
struct Relay {
    injector: Arc<Injector>,
    server: Arc<Server>,
    /// Faults waiting for the server's response, by the call's id as JSON
    /// text (a `Value` is not `Hash`; `1` and `"1"` stay apart).
    awaited: Mutex<HashMap<String, Fired>>,
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Relay {
    async fn client_to_server<R: AsyncRead + Unpin>(
        self: Arc<Self>,
        mut client: BufReader<R>,
        mut server: ChildStdin,
        client_closed: oneshot::Sender<()>,
    ) {
        let mut line = Vec::new();
        loop {
            line.clear();
            // A read error is as final as the end of input: either way the
            // client will send nothing more.
            match client.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let fired = self.injector.on_message(&tool_calls(&line));
            let mut kill_after = None;
            if let Some(fired) = fired {
                match fired.action {
                    Action::DropRequest => {
                        self.injector.record(&fired);
                        continue;
                    }
                    Action::KillServer(delay) => kill_after = Some((delay, fired)),
                    _ => {
                        // Before the line goes out, so the response cannot
                        // overtake the registration.
                        self.awaited
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(id_key(&fired.id), fired);
                    }
                }
            }
            if server.write_all(&line).await.is_err() || server.flush().await.is_err() {
                // The server is gone; `run` sees it exit.
                return;
            }
            if let Some((delay, fired)) = kill_after {
                let relay = Arc::clone(&self);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    if !relay.server.exited.load(Ordering::SeqCst) {
                        relay.injector.record(&fired);
                        relay.server.kill();
                    }
                });
            }
        }
        // Closing the server's stdin is how stdio MCP asks a server to exit.
        drop(server);
        let _ = client_closed.send(());
    }

    async fn server_to_client<R: AsyncRead + Unpin>(
        self: Arc<Self>,
        mut server: BufReader<R>,
        client: mpsc::UnboundedSender<Outgoing>,
    ) {
        loop {
            let mut line = Vec::new();
            match server.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let fired = {
                let mut awaited = self.awaited.lock().unwrap_or_else(PoisonError::into_inner);
                let mut first = None;
                // Every id of a batch response is answered, so all of them
                // stop waiting; the first fault found applies to the line.
                for id in response_ids(&line) {
                    let fired = awaited.remove(&id_key(&id));
                    first = first.or(fired);
                }
                first
            };
            let Some(fired) = fired else {
                let _ = client.send(Outgoing::Line(line));
                continue;
            };
            self.injector.record(&fired);
            match fired.action {
                Action::DelayResponse(delay) => {
                    let client = client.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        let _ = client.send(Outgoing::Line(line));
                    });
                }
                Action::KillAfterResponse => self.server.kill(),
                // Swallowed.
                _ => {}
            }
        }
    }
}

/// The only writer of the proxy's stdout, so that delayed and relayed lines
/// never interleave.
async fn write_to_client(mut lines: mpsc::UnboundedReceiver<Outgoing>) {
    let mut stdout = tokio::io::stdout();
    let mut broken = false;
    while let Some(Outgoing::Line(line)) = lines.recv().await {
        // A client that stopped reading is no reason to stop the server;
        // the end of our stdin is.
        if !broken {
            broken = stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err();
        }
    }
    let _ = stdout.flush().await;
}

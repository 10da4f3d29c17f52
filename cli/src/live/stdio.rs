//! The stdio transport: newline-delimited JSON-RPC on a child's stdin/stdout.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Ctx;
use super::error::{LiveError, LiveErrorKind};
use super::jsonrpc::{self, Accept, Response, Step};

/// How many of the server's last stderr lines are kept.
pub(crate) const STDERR_TAIL_LINES: usize = 20;
/// How much of one stderr line is read; the rest of it is skipped.
const STDERR_LINE_BYTES: usize = 64 * 1024;
/// After stdout closes: how long to wait for the exit status and the rest of
/// stderr.
const EXIT_GRACE: Duration = Duration::from_secs(1);
/// On close: how long the server gets to exit after its stdin closes.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

enum StdoutEvent {
    /// A line, its number, and whether a newline ended it (the last
    /// output of a server that died mid-message is cut short).
    Line(u64, Vec<u8>, bool),
    TooLong(u64),
    Failed(io::Error),
}

type Tail = Arc<Mutex<VecDeque<String>>>;

pub(crate) struct StdioTransport {
    /// The server, leader of its own process group.
    child: Box<dyn ChildWrapper>,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<StdoutEvent>,
    stderr: Tail,
    stdout_task: JoinHandle<()>,
    stderr_task: Option<JoinHandle<()>>,
    /// The whole group has been waited for: nothing left to kill.
    reaped: bool,
    /// The longest stdout line read, in bytes, without its newline.
    max_line: u64,
    /// Answer the server's requests (`initialize` revisions only).
    pub(crate) answer_requests: bool,
}

/// How a stdio server ended when its session was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It exited by itself once its stdin closed (or had already), with this
    /// status.
    Exited(std::process::ExitStatus),
    /// It was still running after the grace period and was killed, with
    /// what was left of its process group.
    Killed,
}

impl StdioTransport {
    /// Starts `program` with `args`; a stdout line longer than `max_line`
    /// bytes is an error.
    pub(crate) fn spawn(
        program: &OsString,
        args: &[OsString],
        max_line: usize,
    ) -> Result<Self, LiveError> {
        let mut command = CommandWrap::with_new(program, |command| {
            command
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        });
        // Killing the group also stops what a wrapper (`sh -c`, `npx`, `uv
        // run`) started.
        command.wrap(ProcessGroup::leader());
        let mut child = command.spawn().map_err(|source| {
            let program = program.to_string_lossy().into_owned();
            if source.kind() == io::ErrorKind::NotFound {
                LiveErrorKind::CommandNotFound { program }
            } else {
                LiveErrorKind::Spawn { program, source }
            }
        })?;
        let stdin = child.stdin().take();
        let stdout = child.stdout().take().expect("stdout is piped");
        let stderr = child.stderr().take().expect("stderr is piped");
        let (sender, lines) = mpsc::channel(16);
        let tail = Tail::default();
        let max_line = max_line as u64;
        Ok(StdioTransport {
            child,
            stdin,
            lines,
            stdout_task: tokio::spawn(read_stdout(stdout, sender, max_line)),
            stderr_task: Some(tokio::spawn(read_stderr(stderr, Arc::clone(&tail)))),
            stderr: tail,
            reaped: false,
            max_line,
            answer_requests: true,
        })
    }

    /// The last lines the server wrote to stderr, oldest first.
    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        self.stderr
            .lock()
            .map(|tail| tail.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Write one message as a line.
    pub(crate) async fn send(&mut self, message: &Value, ctx: &Ctx<'_>) -> Result<(), LiveError> {
        let mut line = serde_json::to_vec(message).expect("a Value serializes");
        line.push(b'\n');
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(self.exited(ctx).await);
        };
        let written = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        }
        .await;
        match written {
            Ok(()) => Ok(()),
            Err(error) if is_gone(&error) => Err(self.exited(ctx).await),
            Err(source) => Err(LiveErrorKind::Io {
                target: ctx.target.to_owned(),
                request: ctx.request.to_owned(),
                source,
            }
            .into()),
        }
    }

    /// Read messages until the response to `id`, answering the server's
    /// requests on the way. Cancel-safe: lines are read by a background task.
    pub(crate) async fn receive(
        &mut self,
        id: u64,
        ctx: &Ctx<'_>,
        accept: Option<Accept<'_>>,
    ) -> Result<Response, LiveError> {
        let mut accept = accept;
        loop {
            let Some(event) = self.lines.recv().await else {
                return Err(self.exited(ctx).await);
            };
            let (number, line, terminated) = match event {
                StdoutEvent::Line(number, line, terminated) => (number, line, terminated),
                StdoutEvent::TooLong(number) => {
                    return Err(LiveErrorKind::ResponseTooLarge {
                        target: ctx.target.to_owned(),
                        request: ctx.request.to_owned(),
                        location: format!("stdout line {number}"),
                        limit: self.max_line,
                        stderr_tail: self.stderr_tail(),
                    }
                    .into());
                }
                StdoutEvent::Failed(source) => {
                    return Err(LiveErrorKind::Io {
                        target: ctx.target.to_owned(),
                        request: ctx.request.to_owned(),
                        source,
                    }
                    .into());
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Some(accept) = accept.as_mut()
                && accept(&line)
            {
                return Ok(Response::Accepted);
            }
            if let Some(result) = jsonrpc::fast_result(&line, id) {
                return Ok(Response::Result(result));
            }
            let quote = || jsonrpc::excerpt(&String::from_utf8_lossy(&line));
            let value: Value = match serde_json::from_slice(&line) {
                Ok(value) => value,
                // Output cut short by the server's end: its exit status and
                // stderr say more than the half message.
                Err(error) if !terminated && error.is_eof() => return Err(self.exited(ctx).await),
                Err(error) => {
                    return Err(LiveErrorKind::NotJson {
                        target: ctx.target.to_owned(),
                        request: ctx.request.to_owned(),
                        location: format!("stdout line {number}"),
                        excerpt: quote(),
                        reason: error.to_string(),
                        stderr_tail: self.stderr_tail(),
                    }
                    .into());
                }
            };
            for message in jsonrpc::batch(value) {
                match jsonrpc::step(&message, id, self.answer_requests) {
                    Step::Done(response) => return Ok(Response::Message(response)),
                    Step::Reply(reply) => self.send(&reply, ctx).await?,
                    Step::Ignore => {}
                    Step::Invalid(reason) => {
                        return Err(LiveErrorKind::NotJsonRpc {
                            target: ctx.target.to_owned(),
                            request: ctx.request.to_owned(),
                            location: format!("stdout line {number}"),
                            excerpt: quote(),
                            reason,
                            stderr_tail: self.stderr_tail(),
                        }
                        .into());
                    }
                }
            }
        }
    }

    /// The error for a server whose stdout closed (or whose stdin broke):
    /// waits a moment for its exit status and the rest of its stderr.
    async fn exited(&mut self, ctx: &Ctx<'_>) -> LiveError {
        self.stdin = None;
        // Only the leader: a grandchild holding the group open must not keep
        // us waiting.
        let status = tokio::time::timeout(EXIT_GRACE, self.child.inner_mut().wait())
            .await
            .ok()
            .and_then(Result::ok);
        if let Some(task) = self.stderr_task.take() {
            let _ = tokio::time::timeout(EXIT_GRACE, task).await;
        }
        LiveErrorKind::ServerExited {
            target: ctx.target.to_owned(),
            request: ctx.request.to_owned(),
            status,
            stderr_tail: self.stderr_tail(),
        }
        .into()
    }

    /// Close stdin, give the server [`CLOSE_GRACE`] to exit, then kill what is
    /// left of its process group and reap it. Says whether the server
    /// exited by itself.
    pub(crate) async fn close(mut self) -> Ended {
        self.stdin = None;
        let exited = tokio::time::timeout(CLOSE_GRACE, self.child.inner_mut().wait())
            .await
            .ok()
            .and_then(Result::ok);
        // Whether or not the leader exited, what is left of its group (a
        // server ignoring EOF, a grandchild) goes; an error means none is left.
        let _ = self.child.start_kill();
        if tokio::time::timeout(CLOSE_GRACE, self.child.wait())
            .await
            .is_ok_and(|waited| waited.is_ok())
        {
            self.reaped = true;
        }
        // Drop kills whatever is left.
        match exited {
            Some(status) => Ended::Exited(status),
            None => Ended::Killed,
        }
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        if !self.reaped {
            // SIGKILL to the whole process group; an error means it is gone.
            let _ = self.child.start_kill();
            // The leader's zombie is reaped by tokio's orphan queue.
        }
        self.stdout_task.abort();
        if let Some(task) = &self.stderr_task {
            task.abort();
        }
    }
}

fn is_gone(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    )
}

async fn read_stdout(stdout: ChildStdout, sender: mpsc::Sender<StdoutEvent>, max_line: u64) {
    // A pipe holds 64 KiB: read it whole rather than 8 KiB at a time, since
    // a page of a big tools/list is one line of many such reads.
    let mut reader = BufReader::with_capacity(1 << 16, stdout);
    let mut number = 0;
    // Lines of one server tend to be alike in size: starting each at the
    // last one's size spares a big page the copies of a doubling buffer.
    let mut last_len = 0;
    loop {
        let mut line = Vec::with_capacity(last_len + 1);
        // One byte over the bound tells a line of exactly `max_line` bytes
        // and its newline from a longer one.
        let event = match (&mut reader)
            .take(max_line + 1)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) => return,
            Ok(_) => {
                number += 1;
                last_len = line.len();
                if line.last() == Some(&b'\n') {
                    line.pop();
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    StdoutEvent::Line(number, line, true)
                } else if line.len() as u64 > max_line {
                    StdoutEvent::TooLong(number)
                } else {
                    // The last line, without a newline.
                    StdoutEvent::Line(number, line, false)
                }
            }
            Err(error) => StdoutEvent::Failed(error),
        };
        let last = !matches!(event, StdoutEvent::Line(..));
        if sender.send(event).await.is_err() || last {
            return;
        }
    }
}

async fn read_stderr(stderr: ChildStderr, tail: Tail) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        // A server can print an endless line: keep the start of one, skip
        // the rest.
        match (&mut reader)
            .take(STDERR_LINE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n')
            && line.len() == STDERR_LINE_BYTES
            && skip_line(&mut reader).await.is_err()
        {
            return;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        // Kept cut as one value is (an error shows it escaped, not cut
        // again).
        let text = crate::text::cut(text).into_owned();
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(text);
        }
    }
}

/// Skips the rest of a line (or of the stream, if no newline comes).
async fn skip_line(reader: &mut BufReader<ChildStderr>) -> io::Result<()> {
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(());
            }
            None => {
                let length = buffer.len();
                reader.consume(length);
            }
        }
    }
}

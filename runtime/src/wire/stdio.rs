//! The line guard: an rmcp transport over any byte stream, for stdio.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, RequestId, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::check::{self, Kind, Refusal, Verdict};
use super::{CANCELLED_IDS_KEPT, DEFAULT_MAX_DEPTH, DEFAULT_MAX_LINE_BYTES};

/// Lines queued for the writer: rmcp's messages and the guard's answers.
/// When full, rmcp's sends and the guard's reads wait (a peer that stops
/// reading stops being read).
const WRITE_QUEUE: usize = 64;

/// The reader's buffer, in bytes.
const READ_BUFFER: usize = 64 * 1024;

/// The writer gathers the lines queued together into one write until it
/// holds this many bytes (a longer line still goes out whole).
const COALESCE_BYTES: usize = 256 * 1024;

/// The limits of a [`GuardedTransport`]; build one with [`LineGuard::new`],
/// or take the defaults with [`guarded`](super::guarded).
///
/// ```
/// # async fn serve(server: impl mcp_hints::rmcp::ServerHandler) -> Result<(), Box<dyn std::error::Error>> {
/// use mcp_hints::rmcp::ServiceExt;
/// use mcp_hints::wire::LineGuard;
///
/// let transport = LineGuard::new()
///     .max_line_bytes(1024 * 1024)
///     .transport(tokio::io::stdin(), tokio::io::stdout());
/// server.serve(transport).await?.waiting().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineGuard {
    max_line_bytes: usize,
    max_depth: usize,
}

impl Default for LineGuard {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

impl LineGuard {
    /// The defaults: lines of at most [`DEFAULT_MAX_LINE_BYTES`], nesting of
    /// at most [`DEFAULT_MAX_DEPTH`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The most bytes one message may have before its newline (a `\r`
    /// before the newline counts). A longer line is answered -32700 (Parse
    /// error) as soon as the limit is passed, and its remaining bytes are
    /// skipped up to the next newline without being kept. At least 1.
    pub fn max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes.max(1);
        self
    }

    /// The deepest nesting of arrays and objects a message may have, the
    /// message object itself counting 1; deeper is answered -32700 (Parse
    /// error). The parser recurses once per level: keep it in the hundreds.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth.max(1);
        self
    }

    /// A transport that reads messages from `reader` and writes rmcp's and
    /// the guard's answers to `writer`, one whole line at a time. The first
    /// send or receive spawns the writer task, so call them inside a Tokio
    /// runtime (rmcp does).
    pub fn transport<R, W>(self, reader: R, writer: W) -> GuardedTransport<R, W>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        GuardedTransport {
            reader: BufReader::with_capacity(READ_BUFFER, reader),
            line: Vec::new(),
            skipping: false,
            limits: self,
            writer: Writer::Idle(writer),
            answer: None,
            in_flight: Arc::default(),
        }
    }
}

/// rmcp's transport for a server over a byte stream (stdio, a pipe, a
/// socket), with every message checked before rmcp sees it. Made by
/// [`guarded`](super::guarded) or [`LineGuard::transport`]; the module
/// documentation says what it answers.
///
/// Implements rmcp's [`Transport`] for [`RoleServer`], so `server.serve(..)`
/// takes it. Errors are [`io::Error`]s: a send fails once the writer has
/// failed or the transport is closed.
pub struct GuardedTransport<R, W> {
    reader: BufReader<R>,
    /// The line read so far (without the bytes skipped of a long line).
    line: Vec<u8>,
    /// Skipping the rest of a line already answered as too long. Kept here,
    /// not in the read, because rmcp cancels a receive mid-line.
    skipping: bool,
    limits: LineGuard,
    writer: Writer<W>,
    /// An answer not yet handed to the writer; kept here until it is, so a
    /// cancelled receive loses nothing.
    answer: Option<Vec<u8>>,
    in_flight: Arc<Mutex<InFlight>>,
}

impl<R, W> std::fmt::Debug for GuardedTransport<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedTransport")
            .field("limits", &self.limits)
            .field("buffered_line_bytes", &self.line.len())
            .field("skipping", &self.skipping)
            .finish_non_exhaustive()
    }
}

enum Writer<W> {
    /// Not started: no send or receive yet.
    Idle(W),
    Running {
        queue: mpsc::Sender<Outgoing>,
        task: JoinHandle<()>,
    },
    Closed,
}

enum Outgoing {
    Line {
        /// One message and its newline.
        line: Vec<u8>,
        /// The request this line answers: in flight until the writer reaches
        /// this line.
        answers: Option<RequestId>,
        /// Told the outcome of the write, for rmcp's sends.
        done: Option<oneshot::Sender<io::Result<()>>>,
    },
    /// Everything before it is written; the writer stops.
    Close,
}

/// The ids of the peer's requests that rmcp has and has not answered.
#[derive(Debug, Default)]
struct InFlight {
    /// Each id in flight, and whether the peer cancelled it.
    ids: HashMap<RequestId, bool>,
    /// Cancelled ids, oldest first: rmcp never answers a cancelled request,
    /// so these are forgotten only beyond [`CANCELLED_IDS_KEPT`].
    cancelled: VecDeque<RequestId>,
}

impl InFlight {
    /// Records `id` as in flight; false when it already is.
    fn start(&mut self, id: &RequestId) -> bool {
        if self.ids.contains_key(id) {
            return false;
        }
        self.ids.insert(id.clone(), false);
        true
    }

    fn answered(&mut self, id: &RequestId) {
        self.ids.remove(id);
    }

    fn cancelled(&mut self, id: &RequestId) {
        let Some(cancelled) = self.ids.get_mut(id) else {
            return;
        };
        if *cancelled {
            return;
        }
        *cancelled = true;
        self.cancelled.push_back(id.clone());
        if self.cancelled.len() > CANCELLED_IDS_KEPT
            && let Some(oldest) = self.cancelled.pop_front()
            && self.ids.get(&oldest) == Some(&true)
        {
            tracing::debug!(id = %oldest, "forgetting a cancelled request id");
            self.ids.remove(&oldest);
        }
    }
}

fn lock(in_flight: &Mutex<InFlight>) -> MutexGuard<'_, InFlight> {
    // Every change is one insert or remove: a panic cannot leave it half
    // made.
    in_flight
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the transport is closed")
}

/// The outcome of one bounded line read.
enum Read {
    /// `line` holds one whole line, without its newline.
    Line,
    /// The line passed the limit; its start is dropped and the rest will be.
    TooLong,
    /// The peer closed the stream; `line` holds any unterminated last line.
    Eof,
    Failed(io::Error),
}

impl<R, W> GuardedTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// The writer's queue, starting the writer on first use; `None` once it
    /// stopped.
    fn queue(&mut self) -> Option<mpsc::Sender<Outgoing>> {
        if matches!(self.writer, Writer::Idle(_)) {
            let Writer::Idle(writer) = std::mem::replace(&mut self.writer, Writer::Closed) else {
                unreachable!("matched above");
            };
            let (queue, lines) = mpsc::channel(WRITE_QUEUE);
            let task = tokio::spawn(write_lines(writer, lines, self.in_flight.clone()));
            self.writer = Writer::Running { queue, task };
        }
        match &self.writer {
            Writer::Running { queue, .. } => Some(queue.clone()),
            _ => None,
        }
    }

    /// Reads one line into `self.line`, never holding more than the limit.
    /// Cancel-safe: bytes are moved from the reader's buffer to `self.line`
    /// (or skipped) with no await between, so a cancelled read resumes.
    async fn read_line(&mut self) -> Read {
        loop {
            let (consumed, outcome) = {
                let available = match self.reader.fill_buf().await {
                    Ok(available) => available,
                    Err(error) => return Read::Failed(error),
                };
                if available.is_empty() {
                    return Read::Eof;
                }
                let newline = available.iter().position(|byte| *byte == b'\n');
                let content = newline.unwrap_or(available.len());
                let consumed = newline.map_or(content, |at| at + 1);
                if self.skipping {
                    if newline.is_some() {
                        self.skipping = false;
                    }
                    (consumed, None)
                } else if self.line.len() + content > self.limits.max_line_bytes {
                    self.line.clear();
                    self.skipping = newline.is_none();
                    (consumed, Some(Read::TooLong))
                } else {
                    self.line.extend_from_slice(&available[..content]);
                    (consumed, newline.map(|_| Read::Line))
                }
            };
            self.reader.consume(consumed);
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }

    /// Decides on the line in `self.line` and clears it: the message for
    /// rmcp, or `None` after queueing an answer or dropping it.
    fn take_line(&mut self) -> Option<ClientJsonRpcMessage> {
        let verdict = {
            let line = self.line.as_slice();
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            // One leading byte order mark is ignored, as over HTTP.
            let line = check::json_text(line);
            // A blank line is no message; a line of other whitespace (a
            // form feed, NBSP) is text that is not JSON, as over HTTP.
            if line.iter().all(check::is_json_whitespace) {
                None
            } else {
                Some(check::check(line, self.limits.max_depth))
            }
        };
        self.line.clear();
        let (value, kind) = match verdict? {
            Verdict::Pass { value, kind } => (value, kind),
            verdict => {
                self.refuse_or_drop(verdict);
                return None;
            }
        };
        let message = match check::settle(check::read(&value, &kind), &kind) {
            Ok(message) => message,
            Err(verdict) => {
                self.refuse_or_drop(verdict);
                return None;
            }
        };
        let mut in_flight = lock(&self.in_flight);
        match (&kind, &message) {
            (Kind::Request { id, raw_id, .. }, _) if !in_flight.start(id) => {
                drop(in_flight);
                let shown = check::shown_raw(raw_id);
                self.refuse_or_drop(Verdict::Refuse(Refusal::invalid_request(
                    Some(raw_id.clone()),
                    format!("request id {shown} is already in use by a request in flight"),
                )));
                return None;
            }
            (Kind::Notification, ClientJsonRpcMessage::Notification(notification)) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    in_flight.cancelled(id);
                }
            }
            _ => {}
        }
        Some(message)
    }

    fn refuse_or_drop(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Refuse(refusal) => {
                tracing::debug!(code = refusal.code.0, message = %refusal.message, "refused a message");
                let mut line = refusal.to_json();
                line.push(b'\n');
                self.answer = Some(line);
            }
            Verdict::Drop(reason) => {
                tracing::debug!(%reason, "dropped a malformed message (never answered)");
            }
            Verdict::Pass { .. } => unreachable!("only refusals and drops are passed"),
        }
    }

    /// Hands the pending answer to the writer. Cancel-safe: the answer stays
    /// in `self.answer` until a place in the queue is had.
    async fn flush_answer(&mut self) -> io::Result<()> {
        if self.answer.is_none() {
            return Ok(());
        }
        let queue = self.queue().ok_or_else(closed)?;
        let place = queue.reserve().await.map_err(|_| closed())?;
        let line = self.answer.take().expect("checked above");
        place.send(Outgoing::Line {
            line,
            answers: None,
            done: None,
        });
        Ok(())
    }
}

impl<R, W> Transport<RoleServer> for GuardedTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answers = match &item {
            ServerJsonRpcMessage::Response(response) => Some(response.id.clone()),
            ServerJsonRpcMessage::Error(error) => error.id.clone(),
            _ => None,
        };
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        let queue = self.queue();
        async move {
            let line = line?;
            let queue = queue.ok_or_else(closed)?;
            let (done, written) = oneshot::channel();
            queue
                .send(Outgoing::Line {
                    line,
                    answers,
                    done: Some(done),
                })
                .await
                .map_err(|_| closed())?;
            written.await.unwrap_or_else(|_| Err(closed()))
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Err(error) = self.flush_answer().await {
                tracing::debug!(%error, "cannot answer: the writer stopped");
                return None;
            }
            match self.read_line().await {
                Read::Line => {}
                Read::TooLong => {
                    let max = self.limits.max_line_bytes;
                    self.refuse_or_drop(Verdict::Refuse(Refusal::parse_error(format!(
                        "message longer than {max} bytes"
                    ))));
                    continue;
                }
                Read::Eof if !self.line.is_empty() => {
                    // A last message without its newline: still a message.
                }
                Read::Eof => return None,
                Read::Failed(error) => {
                    tracing::error!(%error, "reading the peer's messages failed");
                    return None;
                }
            }
            if let Some(message) = self.take_line() {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let flushed = self.flush_answer().await;
        match std::mem::replace(&mut self.writer, Writer::Closed) {
            Writer::Running { queue, task } => {
                // Every line queued before is written first.
                let _ = queue.send(Outgoing::Close).await;
                drop(queue);
                let _ = task.await;
            }
            Writer::Idle(_) | Writer::Closed => {}
        }
        flushed
    }
}

/// The one writer: each line whole, in the order queued. The lines queued
/// together when it wakes (up to [`COALESCE_BYTES`]) go out in one write,
/// then a flush: with many calls in flight, one system call answers many.
/// Stops at the first failed write; every later send then fails.
async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut lines: mpsc::Receiver<Outgoing>,
    in_flight: Arc<Mutex<InFlight>>,
) {
    let mut batch = Vec::new();
    let mut told = Vec::new();
    loop {
        let mut next = lines.recv().await;
        let mut closing = next.is_none();
        {
            let mut in_flight = lock(&in_flight);
            while let Some(outgoing) = next.take() {
                let Outgoing::Line {
                    line,
                    answers,
                    done,
                } = outgoing
                else {
                    closing = true;
                    break;
                };
                // The id is free from the moment its answer goes out: before
                // the write, so a peer that reads the answer and reuses the
                // id at once is never refused (rmcp forgot the request
                // before sending).
                if let Some(id) = &answers {
                    in_flight.answered(id);
                }
                if batch.is_empty() {
                    batch = line;
                } else {
                    batch.extend_from_slice(&line);
                }
                told.push(done);
                if batch.len() < COALESCE_BYTES {
                    next = lines.try_recv().ok();
                }
            }
        }
        if batch.is_empty() {
            if closing {
                return;
            }
            continue;
        }
        let written = async {
            writer.write_all(&batch).await?;
            writer.flush().await
        }
        .await;
        batch.clear();
        if batch.capacity() > COALESCE_BYTES {
            batch = Vec::new();
        }
        for done in told.drain(..) {
            let outcome = match &written {
                Ok(()) => Ok(()),
                Err(error) => Err(io::Error::new(error.kind(), error.to_string())),
            };
            match done {
                Some(done) => {
                    let _ = done.send(outcome);
                }
                None => {
                    if let Err(error) = &outcome {
                        tracing::debug!(%error, "writing an answer failed");
                    }
                }
            }
        }
        if let Err(error) = written {
            tracing::error!(%error, "writing to the peer failed; the transport stops writing");
            return;
        }
        if closing {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

    struct Peer {
        to_server: DuplexStream,
        from_server: BufReader<DuplexStream>,
    }

    impl Peer {
        async fn write(&mut self, bytes: &[u8]) {
            self.to_server.write_all(bytes).await.unwrap();
        }

        async fn read(&mut self) -> Value {
            let mut line = String::new();
            let read = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                self.from_server.read_line(&mut line),
            )
            .await
            .expect("an answer within 10 s")
            .unwrap();
            assert!(read > 0, "the server closed its output");
            serde_json::from_str(&line).unwrap()
        }
    }

    fn pair(guard: LineGuard) -> (GuardedTransport<DuplexStream, DuplexStream>, Peer) {
        let (to_server, server_input) = tokio::io::duplex(1 << 16);
        let (server_output, from_server) = tokio::io::duplex(1 << 16);
        (
            guard.transport(server_input, server_output),
            Peer {
                to_server,
                from_server: BufReader::new(from_server),
            },
        )
    }

    fn method(message: &ClientJsonRpcMessage) -> Value {
        serde_json::to_value(message).unwrap()["method"].clone()
    }

    #[tokio::test]
    async fn a_long_line_is_answered_and_the_next_line_is_read() {
        let (mut transport, mut peer) = pair(LineGuard::new().max_line_bytes(64));
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "y".repeat(10_000)
        );
        peer.write(long.as_bytes()).await;
        peer.write(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
            .await;
        let next = transport.receive().await.expect("the next message");
        assert_eq!(serde_json::to_value(&next).unwrap()["id"], 2);
        assert_eq!(
            peer.read().await,
            json!({"jsonrpc": "2.0", "error": {"code": -32700,
                "message": "Parse error: message longer than 64 bytes"}})
        );
        // Nothing of the long line was kept.
        assert!(transport.line.is_empty() && transport.line.capacity() <= 2 * 64);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_passes() {
        let message = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
        let (mut transport, mut peer) = pair(LineGuard::new().max_line_bytes(message.len()));
        peer.write(message).await;
        peer.write(b"\n").await;
        assert!(transport.receive().await.is_some());
    }

    #[tokio::test]
    async fn a_duplicate_id_is_refused_until_the_first_is_answered() {
        let (mut transport, mut peer) = pair(LineGuard::new());
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n";
        peer.write(ping).await;
        peer.write(ping).await;
        peer.write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await;
        assert!(transport.receive().await.is_some());
        let next = transport.receive().await.expect("the notification");
        assert_eq!(method(&next), "notifications/initialized");
        assert_eq!(
            peer.read().await,
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32600,
                "message": "Invalid Request: request id 7 is already in use by a request in flight"}})
        );
        // Answered: the id is free again.
        let response: ServerJsonRpcMessage =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 7, "result": {}})).unwrap();
        transport.send(response).await.unwrap();
        assert_eq!(peer.read().await["id"], 7);
        peer.write(ping).await;
        assert!(transport.receive().await.is_some());
    }

    #[tokio::test]
    async fn a_cancelled_id_stays_in_flight() {
        let mut in_flight = InFlight::default();
        let id = RequestId::Number(3);
        assert!(in_flight.start(&id));
        in_flight.cancelled(&id);
        assert!(!in_flight.start(&id));
        for n in 0..CANCELLED_IDS_KEPT as i64 {
            let other = RequestId::Number(100 + n);
            assert!(in_flight.start(&other));
            in_flight.cancelled(&other);
        }
        // The oldest cancelled id is forgotten once more are kept.
        assert!(in_flight.start(&id));
    }

    #[tokio::test]
    async fn a_line_of_whitespace_json_does_not_know_is_a_parse_error() {
        let (mut transport, mut peer) = pair(LineGuard::new());
        // Blank lines, in JSON's whitespace, are skipped unanswered.
        peer.write(b"\n \t \r\n").await;
        for line in [&b"\x0c\x0c"[..], b"\x0b", "\u{a0}".as_bytes(), b" \x0c\t"] {
            peer.write(line).await;
            peer.write(b"\n").await;
        }
        peer.write(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await;
        let next = transport.receive().await.expect("the ping");
        assert_eq!(serde_json::to_value(&next).unwrap()["id"], 1);
        for column in [1, 1, 1, 2] {
            assert_eq!(
                peer.read().await,
                json!({"jsonrpc": "2.0", "error": {"code": -32700,
                    "message": format!("Parse error: expected value at line 1 column {column}")}})
            );
        }
    }

    #[tokio::test]
    async fn a_last_line_without_newline_is_read() {
        let (mut transport, mut peer) = pair(LineGuard::new());
        peer.write(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}")
            .await;
        drop(peer.to_server);
        assert!(transport.receive().await.is_some());
        assert!(transport.receive().await.is_none());
    }

    #[tokio::test]
    async fn answers_survive_a_cancelled_receive() {
        let (mut transport, mut peer) = pair(LineGuard::new());
        peer.write(b"not json\n").await;
        {
            // The answer is queued on the first poll; nothing more to read.
            let mut receive = Box::pin(transport.receive());
            assert!(futures_poll(&mut receive).await.is_none());
        }
        assert_eq!(peer.read().await["error"]["code"], -32700);
        peer.write(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await;
        assert!(transport.receive().await.is_some());
        transport.close().await.unwrap();
    }

    /// Records each write it is given, whole.
    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<Vec<u8>>>>);

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<io::Result<usize>> {
            self.0.lock().unwrap().push(buf.to_vec());
            std::task::Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn answers_ready_together_go_out_in_one_write() {
        let (_to_server, server_input) = tokio::io::duplex(1 << 16);
        let written = Recorder::default();
        let mut transport = LineGuard::new().transport(server_input, written.clone());
        let answer = |id: i64| -> ServerJsonRpcMessage {
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": id, "result": {}})).unwrap()
        };
        // On this one thread the three are queued before the writer runs.
        let (a, b, c) = (
            transport.send(answer(1)),
            transport.send(answer(2)),
            transport.send(answer(3)),
        );
        let (a, b, c) = tokio::join!(a, b, c);
        a.unwrap();
        b.unwrap();
        c.unwrap();
        let writes = written.0.lock().unwrap().clone();
        assert_eq!(
            writes,
            vec![
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\
                  {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\
                  {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n"
                    .to_vec()
            ]
        );
        // Later answers are written on their own once nothing else waits.
        transport.send(answer(4)).await.unwrap();
        assert_eq!(written.0.lock().unwrap().len(), 2);
    }

    /// Polls `future` once: `Some` if it finished.
    async fn futures_poll<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut *future).poll(cx) {
                std::task::Poll::Ready(output) => Some(output),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}

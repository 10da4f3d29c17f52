//! stdin and stdout for an MCP server over stdio (MCP basic/transports,
//! "stdio"), read and written without a hand-off to Tokio's blocking pool
//! for each message.
//!
//! Tokio's own [`tokio::io::stdin`] and [`tokio::io::stdout`] run every
//! read and every write on the blocking pool: one thread hand-off (and its
//! futex wake-ups) each way, per message. [`stdio`] looks at what file
//! descriptors 0 and 1 are and picks, for each:
//!
//! | what it is | how it is read or written | [`Mode`] |
//! |---|---|---|
//! | a pipe (a shell pipeline, a client's `Stdio::piped()`) | made non-blocking and registered with Tokio's reactor: [`tokio::net::unix::pipe`] | [`Mode::Pipe`] |
//! | a Unix-domain stream socket (`socketpair`) | made non-blocking and registered: [`tokio::net::UnixStream`] | [`Mode::Socket`] |
//! | stdin that is anything else (a regular file `< requests.jsonl`, a terminal, `/dev/null`, another kind of socket) | one dedicated reader thread, blocking reads of 64 KiB | [`Mode::ReaderThread`] |
//! | stdout that is anything else (a file, a terminal) | Tokio's [`tokio::io::stdout`] | [`Mode::Tokio`] |
//! | closed (`<&-`, `>&-`) | stdin reads end of input at once; stdout writes fail with [`io::ErrorKind::BrokenPipe`] | [`Mode::Closed`] |
//! | not Unix (Windows) | Tokio's stdin and stdout | [`Mode::Tokio`] |
//!
//! # The shared non-blocking flag
//!
//! `O_NONBLOCK` belongs to the open file description, not to the
//! descriptor: the parent that made the pipe, and every other process or
//! descriptor sharing it, see it too. So:
//!
//! - a descriptor that is the same file as stderr (the same device and
//!   inode, as `2>&1` makes it) is never made non-blocking: `eprintln!`
//!   and a tracing subscriber writing to stderr would otherwise fail with
//!   `EAGAIN` (`WouldBlock`) when the pipe is full. It falls back as "anything
//!   else" above (stdout: [`Mode::Tokio`]; stdin: [`Mode::ReaderThread`]);
//! - a descriptor that was blocking is made blocking again when its
//!   [`Stdin`] or [`Stdout`] is dropped (when stdin and stdout are the same
//!   socket, when both are), so what runs after the server, or beside it
//!   on the same pipe, finds it as it was. A process killed by a signal
//!   cannot restore it.
//!
//! # Which runtime
//!
//! A server over stdio has one session, so Tokio's `current_thread`
//! runtime serves it best: the reader, rmcp's service loop, the handlers
//! and the writer hand messages to one another on one thread, with no
//! cross-thread wake-up (a futex call) per message, and the writer finds
//! more answers queued together to write at once.
//! `bench/src/bin/stdio_bench.rs` measures `notes` on both runtimes side
//! by side (`notes` and `notes --multi-thread`). Choose `multi_thread`
//! only for tools that compute for long on the calling task.
//!
//! # Use
//!
//! Call [`stdio`] (or [`guarded`]) inside a Tokio runtime with I/O enabled
//! (`#[tokio::main]`, or a builder with `enable_io`/`enable_all`), since a
//! pipe or socket is registered with its reactor there; outside a runtime
//! it falls back to Tokio's stdin and stdout.
//!
//! ```no_run
//! # async fn serve(server: impl mcp_hints::rmcp::ServerHandler) -> Result<(), Box<dyn std::error::Error>> {
//! use mcp_hints::rmcp::ServiceExt;
//!
//! // Behind the wire guard:
//! server.serve(mcp_hints::stdio::guarded()).await?.waiting().await?;
//! # Ok(())
//! # }
//! # async fn plain(server: impl mcp_hints::rmcp::ServerHandler) -> Result<(), Box<dyn std::error::Error>> {
//! # use mcp_hints::rmcp::ServiceExt;
//! // Or rmcp's own stdio transport (rmcp's feature `transport-async-rw`)
//! // over the same stdin and stdout:
//! server.serve(mcp_hints::stdio::stdio()).await?.waiting().await?;
//! # Ok(())
//! # }
//! ```

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::wire::GuardedTransport;

/// How a [`Stdin`] or [`Stdout`] reaches its descriptor; the module
/// documentation's table says when each is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// A non-blocking pipe registered with Tokio's reactor.
    Pipe,
    /// A non-blocking Unix-domain stream socket registered with Tokio's
    /// reactor.
    Socket,
    /// stdin only: a dedicated thread reads 64 KiB at a time.
    ReaderThread,
    /// Tokio's own stdin or stdout (the blocking pool).
    Tokio,
    /// The descriptor is closed: stdin is at end of input, writes to
    /// stdout fail.
    Closed,
}

/// The process's stdin, as an [`AsyncRead`]; made by [`stdio`].
///
/// A read returns 0 bytes at end of input: the peer closed its end, the
/// file ended, or stdin is closed. Errors are the operating system's
/// reads' errors.
pub struct Stdin {
    inner: Input,
    #[cfg(unix)]
    _restore: Option<std::sync::Arc<unix::Restore>>,
}

/// The process's stdout, as an [`AsyncWrite`]; made by [`stdio`].
///
/// Each write is one `write(2)` of what it is given; wrap it in a
/// [`tokio::io::BufWriter`] to gather small writes (the guarded
/// transport's writer gathers whole messages itself). Errors are the
/// operating system's writes' errors; a peer that closed its end gives
/// [`io::ErrorKind::BrokenPipe`].
pub struct Stdout {
    inner: Output,
    #[cfg(unix)]
    _restore: Option<std::sync::Arc<unix::Restore>>,
}

enum Input {
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Receiver),
    #[cfg(unix)]
    Socket(tokio::net::UnixStream),
    #[cfg(unix)]
    Thread(unix::ReaderThread),
    #[allow(dead_code, reason = "the fallback off Unix and outside a runtime")]
    Tokio(tokio::io::Stdin),
    Closed,
}

enum Output {
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Sender),
    #[cfg(unix)]
    Socket(tokio::net::UnixStream),
    Tokio(tokio::io::Stdout),
    #[allow(dead_code, reason = "only Unix tells a closed stdout")]
    Closed,
}

impl Stdin {
    /// How this stdin is read.
    pub fn mode(&self) -> Mode {
        match &self.inner {
            #[cfg(unix)]
            Input::Pipe(_) => Mode::Pipe,
            #[cfg(unix)]
            Input::Socket(_) => Mode::Socket,
            #[cfg(unix)]
            Input::Thread(_) => Mode::ReaderThread,
            Input::Tokio(_) => Mode::Tokio,
            Input::Closed => Mode::Closed,
        }
    }
}

impl Stdout {
    /// How this stdout is written.
    pub fn mode(&self) -> Mode {
        match &self.inner {
            #[cfg(unix)]
            Output::Pipe(_) => Mode::Pipe,
            #[cfg(unix)]
            Output::Socket(_) => Mode::Socket,
            Output::Tokio(_) => Mode::Tokio,
            Output::Closed => Mode::Closed,
        }
    }
}

impl std::fmt::Debug for Stdin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stdin")
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Stdout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stdout")
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

/// The process's stdin and stdout, each read or written as the module
/// documentation's table says; a pair rmcp's own transport takes too
/// (`server.serve(stdio())`, rmcp's feature `transport-async-rw`).
///
/// Never fails: a descriptor that cannot be set up the fast way (its
/// `fstat` or `fcntl` fails, it is open the wrong way round) falls back to
/// Tokio's, and a closed one is [`Mode::Closed`]. Call it inside a Tokio
/// runtime with I/O enabled; outside any runtime both fall back to
/// Tokio's.
///
/// # Panics
///
/// Inside a Tokio runtime built without I/O (no `enable_io`), as
/// Tokio's reactor registration does.
pub fn stdio() -> (Stdin, Stdout) {
    #[cfg(unix)]
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            return unix::stdio();
        }
    }
    (
        Stdin {
            inner: Input::Tokio(tokio::io::stdin()),
            #[cfg(unix)]
            _restore: None,
        },
        Stdout {
            inner: Output::Tokio(tokio::io::stdout()),
            #[cfg(unix)]
            _restore: None,
        },
    )
}

/// The wire guard over [`stdio`]: `mcp_hints::wire::guarded(stdin,
/// stdout)` with the default limits of [`LineGuard`](crate::wire::LineGuard)
/// (use [`LineGuard::transport`](crate::wire::LineGuard::transport) with
/// [`stdio`] for others). The `wire` module says what it answers.
///
/// # Panics
///
/// As [`stdio`].
pub fn guarded() -> GuardedTransport<Stdin, Stdout> {
    let (stdin, stdout) = stdio();
    crate::wire::guarded(stdin, stdout)
}

impl AsyncRead for Stdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            #[cfg(unix)]
            Input::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            #[cfg(unix)]
            Input::Socket(socket) => Pin::new(socket).poll_read(cx, buf),
            #[cfg(unix)]
            Input::Thread(thread) => thread.poll_read(cx, buf),
            Input::Tokio(stdin) => Pin::new(stdin).poll_read(cx, buf),
            Input::Closed => Poll::Ready(Ok(())),
        }
    }
}

fn stdout_closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed")
}

impl AsyncWrite for Stdout {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().inner {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            #[cfg(unix)]
            Output::Socket(socket) => Pin::new(socket).poll_write(cx, buf),
            Output::Tokio(stdout) => Pin::new(stdout).poll_write(cx, buf),
            Output::Closed => Poll::Ready(Err(stdout_closed())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            #[cfg(unix)]
            Output::Socket(socket) => Pin::new(socket).poll_flush(cx),
            Output::Tokio(stdout) => Pin::new(stdout).poll_flush(cx),
            Output::Closed => Poll::Ready(Err(stdout_closed())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            // Shutting down a socket would end the peer's reading for every
            // descriptor of it, stdin's too: as for a pipe, only flush.
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            #[cfg(unix)]
            Output::Socket(socket) => Pin::new(socket).poll_flush(cx),
            Output::Tokio(stdout) => Pin::new(stdout).poll_shutdown(cx),
            Output::Closed => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(unix)]
mod unix {
    //! Descriptors 0 and 1 looked at with `fstat`, made non-blocking where
    //! that is safe, and made blocking again on drop.

    use std::fs::File;
    use std::io::{self, Read};
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;
    use tokio::sync::mpsc;

    use super::{Input, Output, Stdin, Stdout};

    /// The reader thread's reads, in bytes.
    pub(super) const READ_CHUNK: usize = 64 * 1024;

    /// Chunks the reader thread may read ahead of the transport.
    const CHUNKS_AHEAD: usize = 4;

    /// What `fstat` says of a descriptor.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) struct Identity {
        dev: u64,
        ino: u64,
        kind: Kind,
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) enum Kind {
        Fifo,
        Socket,
        Other,
    }

    /// `fd`'s identity; `None` when it is closed (or `fstat` fails).
    pub(super) fn identity(fd: BorrowedFd<'_>) -> Option<Identity> {
        let file = File::from(fd.try_clone_to_owned().ok()?);
        let metadata = file.metadata().ok()?;
        let file_type = metadata.file_type();
        let kind = if file_type.is_fifo() {
            Kind::Fifo
        } else if file_type.is_socket() && is_unix_stream_socket(fd) {
            Kind::Socket
        } else {
            Kind::Other
        };
        Some(Identity {
            dev: metadata.dev(),
            ino: metadata.ino(),
            kind,
        })
    }

    impl Identity {
        fn same_file(&self, other: &Identity) -> bool {
            self.dev == other.dev && self.ino == other.ino
        }
    }

    /// A Unix-domain socket of type `SOCK_STREAM`: what
    /// `tokio::net::UnixStream` is made for.
    fn is_unix_stream_socket(fd: BorrowedFd<'_>) -> bool {
        let mut kind: libc::c_int = 0;
        let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt(2) on an open descriptor, writing at most
        // `length` bytes into `kind`, which has that size.
        let typed = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&raw mut kind).cast(),
                &mut length,
            )
        } == 0;
        // SAFETY: an all-zero sockaddr_storage is a valid value of it.
        let mut address: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut length = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: getsockname(2) writes at most `length` bytes into
        // `address`, which has that size.
        let named =
            unsafe { libc::getsockname(fd.as_raw_fd(), (&raw mut address).cast(), &mut length) }
                == 0;
        typed
            && kind == libc::SOCK_STREAM
            && named
            && libc::c_int::from(address.ss_family) == libc::AF_UNIX
    }

    fn flags(fd: BorrowedFd<'_>) -> io::Result<libc::c_int> {
        // SAFETY: F_GETFL on an open descriptor reads its flags.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(flags)
    }

    fn set_flags(fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: F_SETFL on an open descriptor sets its status flags.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes an open file description blocking again when dropped (it was
    /// blocking before it was made non-blocking here).
    #[derive(Debug)]
    pub(super) struct Restore {
        /// A descriptor of its own on the description, so that it restores
        /// the flag whatever became of descriptors 0 and 1.
        fd: OwnedFd,
    }

    impl Drop for Restore {
        fn drop(&mut self) {
            // Only O_NONBLOCK is cleared: whatever else changed meanwhile
            // stays.
            if let Ok(now) = flags(self.fd.as_fd()) {
                let _ = set_flags(self.fd.as_fd(), now & !libc::O_NONBLOCK);
            }
        }
    }

    /// Makes `fd`'s description non-blocking; the guard that undoes it, if
    /// it was blocking.
    fn nonblocking(fd: BorrowedFd<'_>) -> io::Result<Option<Restore>> {
        let before = flags(fd)?;
        if before & libc::O_NONBLOCK != 0 {
            return Ok(None);
        }
        let restore = Restore {
            fd: fd.try_clone_to_owned()?,
        };
        set_flags(fd, before | libc::O_NONBLOCK)?;
        Ok(Some(restore))
    }

    /// Whether `fd` is open for reading (`read`) or writing.
    fn opened_for(fd: BorrowedFd<'_>, read: bool) -> bool {
        let Ok(flags) = flags(fd) else { return false };
        let mode = flags & libc::O_ACCMODE;
        mode == libc::O_RDWR || mode == if read { libc::O_RDONLY } else { libc::O_WRONLY }
    }

    pub(super) fn stdio() -> (Stdin, Stdout) {
        let stdin = io::stdin();
        let stdout = io::stdout();
        let stderr = io::stderr();
        let (stdin, stdout) = from_fds(stdin.as_fd(), stdout.as_fd(), Some(stderr.as_fd()));
        tracing::debug!(stdin = ?stdin.mode(), stdout = ?stdout.mode(), "stdio");
        (stdin, stdout)
    }

    /// The pair for any three descriptors (the process's 0, 1 and 2 in
    /// [`stdio`]; others in tests): `input` and `output` are duplicated,
    /// never closed.
    pub(super) fn from_fds(
        input: BorrowedFd<'_>,
        output: BorrowedFd<'_>,
        stderr: Option<BorrowedFd<'_>>,
    ) -> (Stdin, Stdout) {
        let stderr = stderr.and_then(identity);
        let input_id = identity(input);
        let output_id = identity(output);
        // A file that is stderr's too is left blocking (its writes would
        // see EAGAIN), and so is one shared by stdin and stdout when either
        // of them is.
        let fast = |id: Option<Identity>| {
            id.is_some_and(|id| {
                id.kind != Kind::Other && !stderr.is_some_and(|stderr| stderr.same_file(&id))
            })
        };
        let (in_fast, out_fast) = (fast(input_id), fast(output_id));
        let shared = match (input_id, output_id) {
            (Some(a), Some(b)) => a.same_file(&b),
            _ => false,
        };
        let (in_fast, out_fast) = if shared && in_fast != out_fast {
            (false, false)
        } else {
            (in_fast, out_fast)
        };
        let mut shared_restore: Option<Option<Arc<Restore>>> = None;

        let stdin = match input_id {
            None => Stdin {
                inner: Input::Closed,
                _restore: None,
            },
            Some(id) if in_fast => match fast_input(input, id.kind) {
                Ok((inner, restore)) => {
                    let restore = restore.map(Arc::new);
                    if shared {
                        shared_restore = Some(restore.clone());
                    }
                    Stdin {
                        inner,
                        _restore: restore,
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, "stdin: cannot be read non-blocking; a reader thread reads it");
                    reader_thread(input)
                }
            },
            Some(_) => reader_thread(input),
        };
        let stdout = match output_id {
            None => Stdout {
                inner: Output::Closed,
                _restore: None,
            },
            Some(id) if out_fast => match fast_output(output, id.kind, shared_restore.is_some()) {
                Ok((inner, restore)) => Stdout {
                    inner,
                    _restore: shared_restore.unwrap_or(restore.map(Arc::new)),
                },
                Err(error) => {
                    tracing::debug!(%error, "stdout: cannot be written non-blocking; Tokio's stdout writes it");
                    tokio_stdout()
                }
            },
            Some(_) => tokio_stdout(),
        };
        (stdin, stdout)
    }

    fn tokio_stdout() -> Stdout {
        Stdout {
            inner: Output::Tokio(tokio::io::stdout()),
            _restore: None,
        }
    }

    fn fast_input(fd: BorrowedFd<'_>, kind: Kind) -> io::Result<(Input, Option<Restore>)> {
        if !opened_for(fd, true) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not open for reading",
            ));
        }
        let owned = fd.try_clone_to_owned()?;
        let restore = nonblocking(fd)?;
        let inner = match kind {
            Kind::Fifo => Input::Pipe(tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(
                owned,
            )?),
            Kind::Socket => Input::Socket(tokio::net::UnixStream::from_std(
                std::os::unix::net::UnixStream::from(owned),
            )?),
            Kind::Other => unreachable!("only pipes and sockets are read non-blocking"),
        };
        Ok((inner, restore))
    }

    /// `already`: the description was made non-blocking for stdin (the
    /// same socket), which restores it.
    fn fast_output(
        fd: BorrowedFd<'_>,
        kind: Kind,
        already: bool,
    ) -> io::Result<(Output, Option<Restore>)> {
        if !opened_for(fd, false) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not open for writing",
            ));
        }
        let owned = fd.try_clone_to_owned()?;
        let restore = if already { None } else { nonblocking(fd)? };
        let inner = match kind {
            Kind::Fifo => Output::Pipe(tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(
                owned,
            )?),
            Kind::Socket => Output::Socket(tokio::net::UnixStream::from_std(
                std::os::unix::net::UnixStream::from(owned),
            )?),
            Kind::Other => unreachable!("only pipes and sockets are written non-blocking"),
        };
        Ok((inner, restore))
    }

    fn reader_thread(fd: BorrowedFd<'_>) -> Stdin {
        let inner = match fd.try_clone_to_owned() {
            Ok(owned) => match ReaderThread::spawn(File::from(owned)) {
                Ok(thread) => Input::Thread(thread),
                Err(error) => {
                    tracing::debug!(%error, "stdin: no reader thread; Tokio's stdin reads it");
                    Input::Tokio(tokio::io::stdin())
                }
            },
            Err(_) => Input::Closed,
        };
        Stdin {
            inner,
            _restore: None,
        }
    }

    /// stdin read by a thread of its own, in chunks of [`READ_CHUNK`]
    /// bytes. The thread ends at end of input, at an error, or at its next
    /// read once this is dropped (a read of a terminal that never returns
    /// keeps it until the process exits).
    pub(super) struct ReaderThread {
        chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
        chunk: Vec<u8>,
        at: usize,
    }

    impl ReaderThread {
        fn spawn(mut file: File) -> io::Result<ReaderThread> {
            let (sender, chunks) = mpsc::channel(CHUNKS_AHEAD);
            std::thread::Builder::new()
                .name("mcp-hints-stdin".to_owned())
                .spawn(move || {
                    loop {
                        let mut chunk = vec![0; READ_CHUNK];
                        let read = match file.read(&mut chunk) {
                            Ok(0) => return,
                            Ok(read) => read,
                            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                                // Someone else made it non-blocking: wait
                                // until it can be read.
                                wait_readable(file.as_fd());
                                continue;
                            }
                            Err(error) => {
                                let _ = sender.blocking_send(Err(error));
                                return;
                            }
                        };
                        chunk.truncate(read);
                        if sender.blocking_send(Ok(chunk)).is_err() {
                            return;
                        }
                    }
                })?;
            Ok(ReaderThread {
                chunks,
                chunk: Vec::new(),
                at: 0,
            })
        }

        pub(super) fn poll_read(
            &mut self,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if self.at == self.chunk.len() {
                match self.chunks.poll_recv(cx) {
                    Poll::Pending => return Poll::Pending,
                    // The thread ended: end of input.
                    Poll::Ready(None) => return Poll::Ready(Ok(())),
                    Poll::Ready(Some(Err(error))) => return Poll::Ready(Err(error)),
                    Poll::Ready(Some(Ok(chunk))) => {
                        self.chunk = chunk;
                        self.at = 0;
                    }
                }
            }
            let take = buf.remaining().min(self.chunk.len() - self.at);
            buf.put_slice(&self.chunk[self.at..self.at + take]);
            self.at += take;
            Poll::Ready(Ok(()))
        }
    }

    fn wait_readable(fd: BorrowedFd<'_>) {
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd that lives across the call.
        unsafe {
            libc::poll(&mut poll, 1, -1);
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    //! Every mode on real kernel objects (pipes, socket pairs, files),
    //! through descriptors of their own rather than the test process's 0
    //! and 1, which the test harness shares.

    use std::io::{Read, Seek, Write};
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::unix::from_fds;
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe(2) writes two new descriptors into `fds`.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both are new descriptors owned by nobody else.
        unsafe {
            use std::os::fd::FromRawFd;
            (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
        }
    }

    fn nonblocking(fd: BorrowedFd<'_>) -> bool {
        // SAFETY: F_GETFL on an open descriptor.
        let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        assert!(flags >= 0);
        flags & libc::O_NONBLOCK != 0
    }

    async fn within<F: Future>(future: F) -> F::Output {
        tokio::time::timeout(Duration::from_secs(10), future)
            .await
            .expect("within 10 s")
    }

    #[tokio::test]
    async fn pipes_are_registered_and_made_blocking_again_on_drop() {
        let (server_in, mut client_out) = {
            let (read, write) = pipe();
            (read, std::fs::File::from(write))
        };
        let (mut client_in, server_out) = {
            let (read, write) = pipe();
            (std::fs::File::from(read), write)
        };
        let (mut stdin, mut stdout) = from_fds(server_in.as_fd(), server_out.as_fd(), None);
        assert_eq!((stdin.mode(), stdout.mode()), (Mode::Pipe, Mode::Pipe));
        assert!(nonblocking(server_in.as_fd()) && nonblocking(server_out.as_fd()));

        client_out.write_all(b"hello\n").unwrap();
        let mut read = [0; 16];
        let n = within(stdin.read(&mut read)).await.unwrap();
        assert_eq!(&read[..n], b"hello\n");
        within(stdout.write_all(b"world\n")).await.unwrap();
        let mut answer = [0; 6];
        client_in.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"world\n");

        // The client closes its end: end of input.
        drop(client_out);
        assert_eq!(within(stdin.read(&mut read)).await.unwrap(), 0);

        drop((stdin, stdout));
        assert!(!nonblocking(server_in.as_fd()) && !nonblocking(server_out.as_fd()));
    }

    #[tokio::test]
    async fn a_write_to_a_closed_pipe_fails_with_broken_pipe() {
        let (server_in, _client_out) = pipe();
        let (client_in, server_out) = pipe();
        let (_stdin, mut stdout) = from_fds(server_in.as_fd(), server_out.as_fd(), None);
        drop(client_in);
        let error = within(stdout.write_all(b"lost\n")).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::BrokenPipe);
    }

    #[tokio::test]
    async fn a_socketpair_on_both_is_one_socket_restored_once_both_drop() {
        let (server, mut client) = UnixStream::pair().unwrap();
        let (mut stdin, mut stdout) = from_fds(server.as_fd(), server.as_fd(), None);
        assert_eq!((stdin.mode(), stdout.mode()), (Mode::Socket, Mode::Socket));
        client.write_all(b"ping\n").unwrap();
        let mut read = [0; 16];
        let n = within(stdin.read(&mut read)).await.unwrap();
        assert_eq!(&read[..n], b"ping\n");
        within(stdout.write_all(b"pong\n")).await.unwrap();
        let mut answer = [0; 5];
        client.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"pong\n");

        // stdout still writes after stdin is gone: the socket stays
        // non-blocking until both are dropped.
        drop(stdin);
        assert!(nonblocking(server.as_fd()));
        within(stdout.write_all(b"more\n")).await.unwrap();
        client.read_exact(&mut answer[..5]).unwrap();
        assert_eq!(&answer, b"more\n");
        drop(stdout);
        assert!(!nonblocking(server.as_fd()));

        // The peer closes: end of input.
        let (mut stdin, _stdout) = from_fds(server.as_fd(), server.as_fd(), None);
        drop(client);
        assert_eq!(within(stdin.read(&mut read)).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn stdout_that_is_also_stderr_stays_blocking() {
        let (server_in, _client_out) = pipe();
        let (_client_in, server_out) = pipe();
        let (stdin, stdout) = from_fds(
            server_in.as_fd(),
            server_out.as_fd(),
            Some(server_out.as_fd()),
        );
        assert_eq!((stdin.mode(), stdout.mode()), (Mode::Pipe, Mode::Tokio));
        assert!(!nonblocking(server_out.as_fd()));
        assert!(nonblocking(server_in.as_fd()));
    }

    #[tokio::test]
    async fn a_socket_on_both_that_is_stderr_too_stays_blocking_for_both() {
        let (server, _client) = UnixStream::pair().unwrap();
        let (stdin, stdout) = from_fds(server.as_fd(), server.as_fd(), Some(server.as_fd()));
        assert_eq!(
            (stdin.mode(), stdout.mode()),
            (Mode::ReaderThread, Mode::Tokio)
        );
        assert!(!nonblocking(server.as_fd()));
    }

    #[tokio::test]
    async fn a_regular_file_is_read_by_a_thread_to_its_end() {
        let mut file = tempfile();
        // More than one chunk, with a line across the chunk's edge.
        let mut written = Vec::new();
        for n in 0..20_000 {
            written.extend_from_slice(format!("line {n}\n").as_bytes());
        }
        assert!(written.len() > 2 * unix::READ_CHUNK);
        file.write_all(&written).unwrap();
        file.rewind().unwrap();
        let (_out_read, out_write) = pipe();
        let (stdin, _stdout) = from_fds(file.as_fd(), out_write.as_fd(), None);
        assert_eq!(stdin.mode(), Mode::ReaderThread);
        let mut lines = BufReader::new(stdin).lines();
        let mut read = Vec::new();
        while let Some(line) = within(lines.next_line()).await.unwrap() {
            read.extend_from_slice(line.as_bytes());
            read.push(b'\n');
        }
        assert_eq!(read, written);
    }

    #[tokio::test]
    async fn closed_descriptors_end_input_and_refuse_output() {
        // Numbers far above what the tests beside this one open.
        let (high_in, high_out) = (900, 901);
        // SAFETY: F_GETFD only asks; borrow_raw of a closed number is what
        // is tested: every call on it fails with EBADF.
        let (fd_in, fd_out) = unsafe {
            assert_eq!(libc::fcntl(high_in, libc::F_GETFD), -1);
            assert_eq!(libc::fcntl(high_out, libc::F_GETFD), -1);
            (
                BorrowedFd::borrow_raw(high_in),
                BorrowedFd::borrow_raw(high_out),
            )
        };
        let (mut stdin, mut stdout) = from_fds(fd_in, fd_out, None);
        assert_eq!((stdin.mode(), stdout.mode()), (Mode::Closed, Mode::Closed));
        let mut buffer = [0; 4];
        assert_eq!(stdin.read(&mut buffer).await.unwrap(), 0);
        assert_eq!(
            stdout.write_all(b"x").await.unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
    }

    /// A guarded notes-like exchange over a socket pair: a long line, then
    /// answers written together.
    #[tokio::test]
    async fn the_guard_over_a_socketpair_reads_a_long_line_and_answers() {
        use rmcp::transport::Transport;
        let (server, client) = UnixStream::pair().unwrap();
        let (stdin, stdout) = from_fds(server.as_fd(), server.as_fd(), None);
        let mut transport = crate::wire::guarded(stdin, stdout);
        let client = tokio::net::UnixStream::from_std({
            client.set_nonblocking(true).unwrap();
            client
        })
        .unwrap();
        let (client_read, mut client_write) = client.into_split();
        let big = "x".repeat(1 << 20);
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ping",
            "params": {"_meta": {"big": big}}});
        let mut line = serde_json::to_vec(&request).unwrap();
        line.push(b'\n');
        let writing = tokio::spawn(async move {
            client_write.write_all(&line).await.unwrap();
            client_write
        });
        let message = within(transport.receive()).await.expect("the long request");
        let message = serde_json::to_value(&message).unwrap();
        assert_eq!(
            message["params"]["_meta"]["big"].as_str().unwrap().len(),
            1 << 20
        );
        let _client_write = writing.await.unwrap();
        let response: rmcp::model::ServerJsonRpcMessage =
            serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "result": {}})).unwrap();
        within(transport.send(response)).await.unwrap();
        let mut answer = String::new();
        within(BufReader::new(client_read).read_line(&mut answer))
            .await
            .unwrap();
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    }

    fn tempfile() -> std::fs::File {
        let path = std::env::temp_dir().join(format!(
            "mcp-hints-stdio-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        // Unlinked at once: the descriptor keeps it alive.
        std::fs::remove_file(&path).unwrap();
        file
    }
}

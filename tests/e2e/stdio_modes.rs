//! End to end over every kind of stdin and stdout `mcp_hints::stdio` tells
//! apart: the built `notes` server runs as a child process with a regular
//! file, a pipe, a socket pair, a closed descriptor or a sequenced-packet
//! socket as its stdin and stdout, and the test checks what it answers,
//! that it ends at end of input, which descriptions it made non-blocking
//! while serving, and that it left them blocking when it exited.
//!
//! Set `MCP_HINTS_NOTES` to another build of `notes` (an older one, say) to
//! see which cases it fails.

use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// How long any one step may take before the test fails instead of hanging.
const TIMEOUT: Duration = Duration::from_secs(30);

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"stdio-modes","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn notes_program() -> String {
    std::env::var("MCP_HINTS_NOTES").unwrap_or_else(|_| env!("CARGO_BIN_EXE_notes").to_owned())
}

fn notes(stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Child {
    let program = notes_program();
    Command::new(&program)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot spawn {program}: {error}"))
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {TIMEOUT:?}"))
}

/// Waits (bounded) for the child to exit, successfully.
async fn exits(child: &mut Child) {
    let status = within("notes exiting", child.wait()).await.unwrap();
    assert!(status.success(), "notes exited with {status}");
}

fn call(id: u64, name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
    .to_string()
}

fn lines(messages: &[String]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for message in messages {
        bytes.extend_from_slice(message.as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// A pipe whose ends are closed on exec: a child of a test beside this
/// one must not hold them open.
fn pipe() -> (OwnedFd, OwnedFd) {
    let (read, write) = std::io::pipe().unwrap();
    (read.into(), write.into())
}

fn nonblocking(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: F_GETFL on an open descriptor only reads its flags.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0, "F_GETFL: {}", std::io::Error::last_os_error());
    flags & libc::O_NONBLOCK != 0
}

/// Polls `condition` until it holds, for at most [`TIMEOUT`].
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !condition() {
        assert!(Instant::now() < deadline, "{what}: not within {TIMEOUT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads JSON lines from `reader` until one answers `id`; every message
/// read, that one last.
async fn read_until<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R, id: u64) -> Vec<Value> {
    let mut messages = Vec::new();
    loop {
        let mut line = String::new();
        let read = within("a line from notes", reader.read_line(&mut line))
            .await
            .unwrap();
        assert!(read > 0, "notes closed its stdout after {messages:?}");
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|error| panic!("{error}: {line:?}"));
        let done = message["id"] == id;
        messages.push(message);
        if done {
            return messages;
        }
    }
}

fn tempfile(name: &str) -> std::fs::File {
    let path = std::env::temp_dir().join(format!("notes-stdio-{name}-{}", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    // The descriptor keeps the file; nothing is left behind.
    std::fs::remove_file(&path).unwrap();
    file
}

#[tokio::test]
async fn a_regular_file_as_stdin_is_served_to_its_end() {
    let mut requests = tempfile("requests");
    let mut messages = vec![INITIALIZE.to_owned(), INITIALIZED.to_owned()];
    for id in 1..=200 {
        messages.push(call(
            id,
            "append_note",
            json!({"text": format!("note {id}")}),
        ));
    }
    messages.push(call(201, "list_notes", json!({})));
    requests.write_all(&lines(&messages)).unwrap();
    requests.rewind().unwrap();
    let (from_notes, notes_out) = pipe();
    let mut child = notes(requests.into(), notes_out.into(), Stdio::null());
    let mut output =
        BufReader::new(tokio::net::unix::pipe::Receiver::from_owned_fd(from_notes).unwrap());
    let mut text = String::new();
    // End of input ends notes, which closes its stdout: read to the end.
    within(
        "the whole output",
        tokio::io::AsyncReadExt::read_to_string(&mut output, &mut text),
    )
    .await
    .unwrap();
    exits(&mut child).await;
    let answers: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let mut ids: Vec<u64> = answers.iter().map(|a| a["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..=201).collect::<Vec<_>>());
    for answer in &answers {
        assert!(answer.get("result").is_some(), "{answer}");
        assert_ne!(answer["result"]["isError"], true, "{answer}");
    }
}

#[tokio::test]
async fn a_socketpair_is_served_non_blocking_and_left_blocking_at_exit() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let probe = theirs.try_clone().unwrap();
    let mut child = notes(
        OwnedFd::from(theirs.try_clone().unwrap()).into(),
        OwnedFd::from(theirs).into(),
        Stdio::null(),
    );
    ours.set_nonblocking(true).unwrap();
    let ours = tokio::net::UnixStream::from_std(ours).unwrap();
    let (read, mut write) = ours.into_split();
    let mut read = BufReader::new(read);
    write
        .write_all(&lines(&[INITIALIZE.to_owned(), INITIALIZED.to_owned()]))
        .await
        .unwrap();
    read_until(&mut read, 0).await;
    eventually("the socket made non-blocking", || {
        nonblocking(probe.as_fd())
    })
    .await;
    // A line of more than 1 MiB, then a read of it.
    let text = "n".repeat(1 << 20);
    let big = lines(&[
        call(1, "append_note", json!({"text": text})),
        call(2, "list_notes", json!({})),
    ]);
    let writing = tokio::spawn(async move {
        within("writing a long line", write.write_all(&big))
            .await
            .unwrap();
        write
    });
    let answers = read_until(&mut read, 2).await;
    let listed = answers.last().unwrap();
    assert_eq!(
        listed["result"]["structuredContent"]["notes"][0]["text"]
            .as_str()
            .map(str::len),
        Some(1 << 20)
    );
    let mut write = writing.await.unwrap();
    // The client closes its end for writing: end of input.
    write.shutdown().await.unwrap();
    exits(&mut child).await;
    assert!(
        !nonblocking(probe.as_fd()),
        "notes left the socket non-blocking"
    );
}

#[tokio::test]
async fn a_pipe_stdin_is_made_blocking_again_when_notes_exits() {
    let (notes_in, to_notes) = pipe();
    let (from_notes, notes_out) = pipe();
    let probe = notes_in.try_clone().unwrap();
    let mut child = notes(notes_in.into(), notes_out.into(), Stdio::null());
    let mut to_notes = tokio::net::unix::pipe::Sender::from_owned_fd(to_notes).unwrap();
    let mut output =
        BufReader::new(tokio::net::unix::pipe::Receiver::from_owned_fd(from_notes).unwrap());
    to_notes
        .write_all(&lines(&[INITIALIZE.to_owned(), INITIALIZED.to_owned()]))
        .await
        .unwrap();
    read_until(&mut output, 0).await;
    assert!(nonblocking(probe.as_fd()), "stdin is read non-blocking");
    drop(to_notes);
    exits(&mut child).await;
    assert!(
        !nonblocking(probe.as_fd()),
        "notes left its stdin non-blocking"
    );
}

#[tokio::test]
async fn stdout_that_is_stderr_too_stays_blocking() {
    let (notes_in, to_notes) = pipe();
    let (from_notes, notes_out) = pipe();
    let probe = notes_out.try_clone().unwrap();
    let stderr = notes_out.try_clone().unwrap();
    let mut child = notes(notes_in.into(), notes_out.into(), stderr.into());
    let mut to_notes = tokio::net::unix::pipe::Sender::from_owned_fd(to_notes).unwrap();
    let mut output =
        BufReader::new(tokio::net::unix::pipe::Receiver::from_owned_fd(from_notes).unwrap());
    let mut messages = vec![INITIALIZE.to_owned(), INITIALIZED.to_owned()];
    messages.extend((1..=50).map(|id| call(id, "list_notes", json!({}))));
    to_notes.write_all(&lines(&messages)).await.unwrap();
    // Answers may come in any order: read until every call's is in.
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < 50 {
        let mut line = String::new();
        let read = within("a line from notes", output.read_line(&mut line))
            .await
            .unwrap();
        assert!(
            read > 0,
            "notes closed its stdout with {answered:?} answered"
        );
        let answer: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = answer["id"].as_u64().filter(|id| *id > 0) {
            assert!(answer.get("result").is_some(), "{answer}");
            answered.insert(id);
        }
    }
    assert!(
        !nonblocking(probe.as_fd()),
        "stdout, which is stderr too, was made non-blocking"
    );
    drop(to_notes);
    exits(&mut child).await;
}

/// stdin at its end at once (`/dev/null`, a character device: read by the
/// reader thread) ends the session: rmcp ends a session whose input ends
/// before `initialize` with an error, so notes exits with one, having
/// written nothing.
#[tokio::test]
async fn a_stdin_at_its_end_before_initialize_ends_the_server() {
    let (from_notes, notes_out) = pipe();
    let mut child = notes(Stdio::null(), notes_out.into(), Stdio::null());
    let status = within("notes exiting", child.wait()).await.unwrap();
    assert!(!status.success());
    let mut output = String::new();
    std::fs::File::from(from_notes)
        .read_to_string(&mut output)
        .unwrap();
    assert_eq!(output, "");
}

/// A sequenced-packet socket keeps each write a record of its own, so the
/// records read tell how many writes notes made.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn answers_to_requests_sent_together_share_writes() {
    let mut fds = [0; 2];
    // SAFETY: socketpair(2) writes two new descriptors into `fds`.
    assert_eq!(
        unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        },
        0
    );
    // SAFETY: both are new descriptors that nothing else owns.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let (notes_in, to_notes) = pipe();
    let mut child = notes(notes_in.into(), theirs.into(), Stdio::null());
    let mut to_notes = std::fs::File::from(to_notes);
    to_notes
        .write_all(&lines(&[INITIALIZE.to_owned(), INITIALIZED.to_owned()]))
        .unwrap();
    let calls = 64;
    let reading = std::thread::spawn(move || {
        let timeout = libc::timeval {
            tv_sec: TIMEOUT.as_secs() as libc::time_t,
            tv_usec: 0,
        };
        // SAFETY: SO_RCVTIMEO with a timeval of the size given.
        let set = unsafe {
            libc::setsockopt(
                ours.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&raw const timeout).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        assert_eq!(set, 0);
        let mut socket = std::fs::File::from(ours);
        let mut records = Vec::new();
        let mut answers = 0;
        let mut buffer = vec![0; 1 << 20];
        // The initialize answer, then every call's.
        while answers < calls + 1 {
            let read = socket
                .read(&mut buffer)
                .expect("a record within the timeout");
            assert!(read > 0, "notes closed its stdout");
            let record = String::from_utf8(buffer[..read].to_vec()).unwrap();
            answers += record.lines().count();
            records.push(record);
        }
        records
    });
    // Every call in one write.
    let messages: Vec<String> = (1..=calls as u64)
        .map(|id| call(id, "list_notes", json!({})))
        .collect();
    to_notes.write_all(&lines(&messages)).unwrap();
    let records = reading.join().unwrap();
    let call_records = records.len() - 1;
    assert!(
        call_records < calls,
        "{calls} answers took {call_records} writes: {records:?}"
    );
    drop(to_notes);
    exits(&mut child).await;
}

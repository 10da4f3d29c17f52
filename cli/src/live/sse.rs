//! Server-Sent Events (the HTML standard's "event stream" format) of a
//! streamable HTTP response, read by `sse-stream` (the parser rmcp's own
//! client reads them with), within a bound.
//!
//! It is fed the body as it arrives and hands back each complete event.
//! Neither a line nor an event may grow past the bound: a server that sends
//! an endless line, or an event of gigabytes, is stopped once the bound is
//! passed, with no more than about the bound held in memory. `sse-stream`
//! has no bound of its own, so [`Bound`] counts each chunk's lines before
//! the parser is given a byte of them: a comment line, or the lines of one
//! event (their field names included, comments not), longer than the bound
//! are refused there.
//!
//! `sse-stream` keeps the standard's rules for lines (CRLF, LF or CR, a
//! CRLF split between two chunks included), a leading byte order mark,
//! comments (`:`), one space dropped after the colon and `data` lines
//! joined with LF, and is stricter than the standard in what it refuses
//! ([`Error::Malformed`]): a line with no colon, a field other than `data`,
//! `event`, `id` and `retry`, an `event`, `id` or `retry` given twice in one
//! event, a `retry` that is not a number, text that is not UTF-8. `id` and
//! `retry` are read and ignored (2026-07-28 has no resumable streams). One
//! leniency of ours: an event whose data the stream ends without a blank
//! line after is still handed back, since a server that closes right after
//! its last `data` line meant it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use futures_core::Stream;
use http_body::{Body, Frame};
use sse_stream::{Sse, SseStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// One complete event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// Its number in the stream, counting every block of fields from 1
    /// (priming events with empty data and events of other types included).
    pub(crate) number: u64,
    /// The `event` field, if any (`None` means the default, `message`).
    pub(crate) kind: Option<String>,
    /// The `data` lines joined with LF.
    pub(crate) data: Vec<u8>,
}

/// Why the stream was given up: which event it was in.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Error {
    /// A line or an event longer than the bound.
    TooLarge {
        /// The number the event would have had.
        event: u64,
    },
    /// Text `sse-stream` refuses.
    Malformed {
        /// The number the event would have had.
        event: u64,
        /// `sse-stream`'s words for it.
        reason: String,
    },
}

/// The parser's state between chunks.
pub(crate) struct Parser {
    bound: Bound,
    /// Where chunks go to `events`; `None` once the body ended.
    chunks: Option<UnboundedSender<Bytes>>,
    events: SseStream<Chunks>,
    /// Events handed back so far.
    numbered: u64,
}

impl Parser {
    /// A parser that refuses a line, or an event, longer than `max` bytes.
    pub(crate) fn new(max: usize) -> Parser {
        let (sender, receiver) = unbounded_channel();
        Parser {
            bound: Bound::new(max),
            chunks: Some(sender),
            events: SseStream::new(Chunks(receiver)),
            numbered: 0,
        }
    }

    /// Reads `chunk`, the next bytes of the body; the events it completed,
    /// in order.
    pub(crate) fn feed(&mut self, chunk: Bytes) -> Result<Vec<Event>, Error> {
        match self.bound.passed_at(&chunk) {
            None => {
                self.send(chunk);
                Ok(self.ready()?.into_iter().map(Event::from).collect())
            }
            Some(at) => {
                // The events before the one too large, to number it.
                self.send(chunk.slice(..at));
                self.ready()?;
                Err(Error::TooLarge {
                    event: self.numbered + 1,
                })
            }
        }
    }

    /// The body ended: the event it cut short, if it has data.
    pub(crate) fn finish(&mut self) -> Result<Vec<Event>, Error> {
        // A line end and a blank line end what was cut short.
        self.send(Bytes::from_static(b"\n\n"));
        self.chunks = None;
        let events = self.ready()?;
        Ok(events
            .into_iter()
            .filter(|(_, sse)| sse.data.is_some())
            .map(Event::from)
            .collect())
    }

    fn send(&self, chunk: Bytes) {
        if let Some(chunks) = &self.chunks
            && !chunk.is_empty()
        {
            // The receiver lives in `self.events`.
            let _ = chunks.send(chunk);
        }
    }

    /// Every event the chunks sent so far complete. `sse-stream` reads a
    /// stream; this one never waits (its chunks are all there), so it is
    /// polled until it has nothing more.
    fn ready(&mut self) -> Result<Vec<(u64, Sse)>, Error> {
        let mut context = Context::from_waker(Waker::noop());
        let mut events = Vec::new();
        loop {
            match Pin::new(&mut self.events).poll_next(&mut context) {
                Poll::Ready(Some(Ok(sse))) => {
                    self.numbered += 1;
                    events.push((self.numbered, sse));
                }
                Poll::Ready(Some(Err(error))) => {
                    return Err(Error::Malformed {
                        event: self.numbered + 1,
                        reason: error.to_string(),
                    });
                }
                Poll::Ready(None) | Poll::Pending => return Ok(events),
            }
        }
    }
}

impl From<(u64, Sse)> for Event {
    fn from((number, sse): (u64, Sse)) -> Event {
        Event {
            number,
            kind: sse.event,
            data: sse.data.map(String::into_bytes).unwrap_or_default(),
        }
    }
}

/// The body's chunks as `sse-stream` reads them: an HTTP body that has what
/// was sent so far, and ends when the sender is dropped.
struct Chunks(UnboundedReceiver<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(context)
            .map(|chunk| chunk.map(|chunk| Ok(Frame::data(chunk))))
    }
}

/// The lengths of the line and the event being read, counted over chunks.
struct Bound {
    max: usize,
    /// Bytes of the line so far, without its end.
    line: usize,
    /// The line is a comment (it starts with `:`).
    comment: bool,
    /// Bytes of the event's lines so far (comments and line ends aside).
    event: usize,
    /// The last chunk ended with CR: an LF starting the next one belongs to it.
    after_cr: bool,
}

impl Bound {
    fn new(max: usize) -> Bound {
        Bound {
            max,
            line: 0,
            comment: false,
            event: 0,
            after_cr: false,
        }
    }

    /// Counts `chunk`; where in it a line or the event passes the bound,
    /// if one does.
    fn passed_at(&mut self, chunk: &[u8]) -> Option<usize> {
        for (at, &byte) in chunk.iter().enumerate() {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    // A blank line ends the event.
                    if self.line == 0 {
                        self.event = 0;
                    }
                    self.line = 0;
                    self.after_cr = byte == b'\r';
                }
                _ => {
                    if self.line == 0 {
                        self.comment = byte == b':';
                    }
                    self.line += 1;
                    if !self.comment {
                        self.event += 1;
                    }
                    if self.line > self.max || self.event > self.max {
                        return Some(at);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(number: u64, kind: Option<&str>, data: &str) -> Event {
        Event {
            number,
            kind: kind.map(str::to_owned),
            data: data.as_bytes().to_vec(),
        }
    }

    /// Every event of `body` fed in pieces of `size` bytes.
    fn parse(body: &[u8], size: usize, max: usize) -> Result<Vec<Event>, Error> {
        let mut parser = Parser::new(max);
        let mut events = Vec::new();
        for chunk in body.chunks(size) {
            events.extend(parser.feed(Bytes::copy_from_slice(chunk))?);
        }
        events.extend(parser.finish()?);
        Ok(events)
    }

    #[test]
    fn events_are_read_whatever_the_chunks() {
        let body = b"\xef\xbb\xbfid: prime\ndata:\n\n: a comment\r\nevent: message\r\ndata: {\"a\":\r\ndata:1}\r\n\r\
                     retry: 10\rdata:  two spaces\r\r\nevent: other\ndata: x\n\ndata: last";
        let expected = vec![
            event(1, None, ""),
            event(2, Some("message"), "{\"a\":\n1}"),
            event(3, None, " two spaces"),
            event(4, Some("other"), "x"),
            event(5, None, "last"),
        ];
        for size in [1, 2, 3, 7, body.len()] {
            assert_eq!(
                parse(body, size, 1024).unwrap(),
                expected,
                "chunks of {size}"
            );
        }
    }

    #[test]
    fn a_cut_event_without_data_is_dropped() {
        assert_eq!(parse(b"data: a\n\nevent: x", 4, 64).unwrap().len(), 1);
        assert_eq!(parse(b"", 4, 64).unwrap(), vec![]);
    }

    #[test]
    fn lines_and_events_are_bounded() {
        // One endless line: stopped once it passes the bound.
        let mut parser = Parser::new(100);
        assert!(parser.feed(Bytes::from_static(&[b'x'; 60])).is_ok());
        assert_eq!(
            parser.feed(Bytes::from_static(&[b'x'; 60])),
            Err(Error::TooLarge { event: 1 })
        );
        // Many short data lines that together pass it.
        let many = "data: 0123456789\n".repeat(20);
        assert_eq!(
            parse(format!("data: ok\n\n{many}\n").as_bytes(), 5, 100),
            Err(Error::TooLarge { event: 2 })
        );
        // Comments never accumulate.
        let comments = ": keep-alive\n".repeat(1000);
        assert_eq!(
            parse(format!("{comments}data: ok\n\n").as_bytes(), 64, 100).unwrap(),
            vec![event(1, None, "ok")]
        );
    }

    #[test]
    fn what_sse_stream_refuses_is_malformed_and_numbered() {
        for (body, event) in [
            (&b"data: ok\n\nnot a field\n\n"[..], 2),
            (b"data: ok\n\nevent: a\nevent: b\n\n", 2),
            (b"bogus: 1\n\n", 1),
            (b"data: \xff\n\n", 1),
        ] {
            match parse(body, 3, 100) {
                Err(Error::Malformed { event: number, .. }) => {
                    assert_eq!(number, event, "{body:?}");
                }
                other => panic!("{body:?}: {other:?}"),
            }
        }
    }
}

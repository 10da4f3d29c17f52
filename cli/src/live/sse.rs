//! A bounded parser of Server-Sent Events (the HTML standard's "event
//! stream" format), for a streamable HTTP response.
//!
//! It is fed the body as it arrives and hands back each complete event's
//! `data`. Neither a line nor an event may grow past the bound: a server that
//! sends an endless line, or an event of gigabytes, is stopped once the bound
//! is passed, with no more than about the bound held in memory.
//!
//! Rules kept from the standard: lines end with CRLF, LF or CR (a CRLF split
//! between two chunks included); a leading byte order mark is dropped; a
//! line starting with `:` is a comment; `field: value` loses one space after
//! the colon; `data` lines are joined with LF; a blank line ends an event;
//! `event` names its type; `id` and `retry` are read and ignored
//! (2026-07-28 has no resumable streams). One leniency: an event whose data
//! the stream ends without a blank line after is still handed back, since a
//! server that closes right after its last `data` line meant it.

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

/// A line or an event longer than the bound: which event it was in.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TooLarge {
    /// The number the event would have had.
    pub(crate) event: u64,
}

/// The parser's state between chunks.
pub(crate) struct Parser {
    max: usize,
    /// The line read so far, without its end.
    line: Vec<u8>,
    /// The last chunk ended with CR: an LF starting the next one belongs to it.
    after_cr: bool,
    /// No line has ended yet (a byte order mark may lead the first).
    first_line: bool,
    /// The current event's data, each line followed by LF.
    data: Vec<u8>,
    kind: Option<String>,
    /// A field of the current event has been read.
    in_event: bool,
    /// Events numbered so far.
    events: u64,
}

const BOM: &[u8] = b"\xef\xbb\xbf";

impl Parser {
    /// A parser that refuses a line, or an event's data, longer than `max`
    /// bytes.
    pub(crate) fn new(max: usize) -> Parser {
        Parser {
            max,
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            data: Vec::new(),
            kind: None,
            in_event: false,
            events: 0,
        }
    }

    /// Reads `chunk`, the next bytes of the body; the events it completed,
    /// in order.
    pub(crate) fn feed(&mut self, mut chunk: &[u8]) -> Result<Vec<Event>, TooLarge> {
        let mut events = Vec::new();
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.grow_line(&chunk[..end])?;
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut events)?;
            self.line = line;
            self.line.clear();
            let was_cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if was_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.grow_line(chunk)?;
        Ok(events)
    }

    /// The body ended: the event it cut short, if it has data.
    pub(crate) fn finish(&mut self) -> Result<Vec<Event>, TooLarge> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut events)?;
        }
        if self.in_event && !self.data.is_empty() {
            self.dispatch(&mut events);
        }
        Ok(events)
    }

    fn too_large(&self) -> TooLarge {
        TooLarge {
            event: self.events + 1,
        }
    }

    fn grow_line(&mut self, part: &[u8]) -> Result<(), TooLarge> {
        if self.line.len() + part.len() > self.max {
            return Err(self.too_large());
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], events: &mut Vec<Event>) -> Result<(), TooLarge> {
        let mut line = line;
        if std::mem::take(&mut self.first_line)
            && let Some(rest) = line.strip_prefix(BOM)
        {
            line = rest;
        }
        if line.is_empty() {
            if self.in_event {
                self.dispatch(events);
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        self.in_event = true;
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(self.too_large());
                }
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
            }
            b"event" => self.kind = Some(String::from_utf8_lossy(value).into_owned()),
            // `id`, `retry` and unknown fields change nothing here.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<Event>) {
        self.events += 1;
        self.in_event = false;
        let mut data = std::mem::take(&mut self.data);
        data.pop();
        events.push(Event {
            number: self.events,
            kind: self.kind.take(),
            data,
        });
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
    fn parse(body: &[u8], size: usize, max: usize) -> Result<Vec<Event>, TooLarge> {
        let mut parser = Parser::new(max);
        let mut events = Vec::new();
        for chunk in body.chunks(size) {
            events.extend(parser.feed(chunk)?);
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
        assert!(parser.feed(&[b'x'; 60]).is_ok());
        assert_eq!(parser.feed(&[b'x'; 60]), Err(TooLarge { event: 1 }));
        // Many short data lines that together pass it.
        let many = "data: 0123456789\n".repeat(20);
        assert_eq!(
            parse(format!("data: ok\n\n{many}\n").as_bytes(), 5, 100),
            Err(TooLarge { event: 2 })
        );
        // Comments never accumulate.
        let comments = ": keep-alive\n".repeat(1000);
        assert_eq!(
            parse(format!("{comments}data: ok\n\n").as_bytes(), 64, 100).unwrap(),
            vec![event(1, None, "ok")]
        );
    }
}

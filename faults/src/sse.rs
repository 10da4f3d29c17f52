//! Server-sent events read as they arrive, so a fault can wait for the one
//! event that carries a given response while holding back the bytes.

/// Splits a `text/event-stream` into the `data` of its events, fed in
/// chunks of any size (a line or a CRLF may be cut between two chunks).
///
/// Follows the HTML event-stream rules: lines end in CRLF, LF or CR; `data:`
/// lines of one event are joined with LF; an empty line ends an event; a line
/// starting with `:` is a comment; other fields are ignored.
#[derive(Debug, Default)]
pub struct SseScanner {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    // The previous chunk ended in CR: an LF opening this one belongs to it.
    after_cr: bool,
}

impl SseScanner {
    /// A scanner at the start of a stream.
    pub fn new() -> Self {
        SseScanner::default()
    }

    /// Feeds the next bytes; returns the `data` of every event they complete,
    /// in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        let mut events = Vec::new();
        for &byte in chunk {
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\n' => self.end_line(&mut events),
                b'\r' => {
                    self.end_line(&mut events);
                    self.after_cr = true;
                }
                byte => self.line.push(byte),
            }
        }
        events
    }

    fn end_line(&mut self, events: &mut Vec<Vec<u8>>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if std::mem::take(&mut self.has_data) {
                events.push(std::mem::take(&mut self.data));
            }
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return,
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let stream = b": comment\r\nevent: message\r\nid: 1\r\ndata: {\"a\":\r\ndata:1}\r\n\r\nretry: 5\n\ndata: two\r\rdata:x\n\n";
        for cut in 0..stream.len() {
            let mut scanner = SseScanner::new();
            let mut events = scanner.push(&stream[..cut]);
            events.extend(scanner.push(&stream[cut..]));
            assert_eq!(
                events,
                vec![b"{\"a\":\n1}".to_vec(), b"two".to_vec(), b"x".to_vec()],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn an_unfinished_event_is_not_an_event() {
        let mut scanner = SseScanner::new();
        assert_eq!(scanner.push(b"data: half"), Vec::<Vec<u8>>::new());
        assert_eq!(scanner.push(b"\n"), Vec::<Vec<u8>>::new());
        assert_eq!(scanner.push(b"\n"), vec![b"half".to_vec()]);
    }
}

//! Server-sent events read as they arrive, so a fault can wait for the one
//! event that carries a given response while holding back the bytes.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use http_body::{Body, Frame};
use sse_stream::SseStream;

/// How [`hold_until`] stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Until {
    /// An event was wanted; the rest of the body is unread.
    Wanted,
    /// The body ended first (an event it ends in the middle of is not an
    /// event).
    Ended,
    /// The body holds what `sse-stream` refuses (a line with no colon, an
    /// unknown field, text that is not UTF-8); the rest is unread, and no
    /// event of it is looked at.
    Refused,
}

/// Reads `body`, a `text/event-stream`, until the `data` of an event
/// satisfies `wanted`, keeping every byte read in `held` (whole frames: an
/// event after the wanted one in the same frame is held too).
///
/// The events are parsed by `sse-stream`, the parser rmcp's own client
/// uses: the HTML event-stream rules (lines end in CRLF, LF or CR, cut
/// between frames or not; `data:` lines of one event joined with LF; an
/// empty line ends an event; a line starting with `:` is a comment).
///
/// # Errors
///
/// The body's own error, after what it gave before.
pub async fn hold_until<B>(
    body: &mut B,
    held: &mut BytesMut,
    mut wanted: impl FnMut(&[u8]) -> bool,
) -> Result<Until, B::Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    let mut failure = None;
    let mut events = SseStream::new(Held {
        body,
        held,
        failure: &mut failure,
    });
    let until = loop {
        match std::future::poll_fn(|context| Pin::new(&mut events).poll_next(context)).await {
            Some(Ok(event)) => {
                if event.data.is_some_and(|data| wanted(data.as_bytes())) {
                    break Until::Wanted;
                }
            }
            Some(Err(_)) => break Until::Refused,
            None => break Until::Ended,
        }
    };
    drop(events);
    match failure {
        Some(error) => Err(error),
        None => Ok(until),
    }
}

/// `body` as `sse-stream` reads it, each data frame copied to `held` on the
/// way; its error is kept in `failure` (and ends the stream).
struct Held<'a, B: Body> {
    body: &'a mut B,
    held: &'a mut BytesMut,
    failure: &'a mut Option<B::Error>,
}

impl<B> Body for Held<'_, B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            let frame = match std::task::ready!(Pin::new(&mut *self.body).poll_frame(context)) {
                None => return Poll::Ready(None),
                Some(Err(error)) => {
                    *self.failure = Some(error);
                    return Poll::Ready(None);
                }
                Some(Ok(frame)) => frame,
            };
            // Trailers are dropped: SSE responses carry none.
            if let Ok(data) = frame.into_data() {
                self.held.extend_from_slice(&data);
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;

    /// A body of `chunks`, one frame each.
    struct Chunks(VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(|chunk| Ok(Frame::data(chunk))))
        }
    }

    /// The data of every event of `chunks`, and the bytes held.
    async fn events(chunks: &[&[u8]]) -> (Vec<Vec<u8>>, Vec<u8>) {
        let mut body = Chunks(chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect());
        let (mut held, mut seen) = (BytesMut::new(), Vec::new());
        let found = hold_until(&mut body, &mut held, |data| {
            seen.push(data.to_vec());
            false
        })
        .await;
        assert_eq!(found, Ok(Until::Ended));
        (seen, held.to_vec())
    }

    #[tokio::test]
    async fn events_split_across_chunks_and_line_endings() {
        let stream = b": comment\r\nevent: message\r\nid: 1\r\ndata: {\"a\":\r\ndata:1}\r\n\r\nretry: 5\n\ndata: two\r\rdata:x\n\n";
        for cut in 0..stream.len() {
            let (events, held) = events(&[&stream[..cut], &stream[cut..]]).await;
            assert_eq!(
                events,
                vec![b"{\"a\":\n1}".to_vec(), b"two".to_vec(), b"x".to_vec()],
                "cut at {cut}"
            );
            assert_eq!(held, stream, "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn an_unfinished_event_is_not_an_event() {
        assert_eq!(events(&[b"data: half"]).await.0, Vec::<Vec<u8>>::new());
        assert_eq!(
            events(&[b"data: half", b"\n"]).await.0,
            Vec::<Vec<u8>>::new()
        );
        assert_eq!(
            events(&[b"data: half", b"\n", b"\n"]).await.0,
            vec![b"half".to_vec()]
        );
    }

    #[tokio::test]
    async fn what_sse_stream_refuses_leaves_the_rest_unread() {
        let mut body = Chunks(
            [&b"data: a\n\nnot a field\n"[..], b"data: b\n\n"]
                .map(Bytes::from_static)
                .into(),
        );
        let mut held = BytesMut::new();
        let found = hold_until(&mut body, &mut held, |_| false).await;
        assert_eq!(found, Ok(Until::Refused));
        assert_eq!(&held[..], b"data: a\n\nnot a field\n");
        assert_eq!(body.0.len(), 1);
    }

    #[tokio::test]
    async fn the_rest_is_left_once_an_event_is_wanted() {
        let mut body = Chunks(
            [&b"data: a\n\ndata: b\n"[..], b"\n", b"data: c\n\n"]
                .map(Bytes::from_static)
                .into(),
        );
        let mut held = BytesMut::new();
        let found = hold_until(&mut body, &mut held, |data| data == b"b").await;
        assert_eq!(found, Ok(Until::Wanted));
        assert_eq!(&held[..], b"data: a\n\ndata: b\n\n");
        assert_eq!(body.0, [Bytes::from_static(b"data: c\n\n")]);
    }
}

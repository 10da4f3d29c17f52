//! The bodies the HTTP mode builds besides plain relays: an upstream body
//! with its first bytes (read while a fault looked for a response) put back
//! in front, and a request body that says when hyper has taken all of it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::sync::oneshot;

/// Any error a body the proxy relays can end with.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body type of every request and response the proxy sends.
pub(crate) type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// Boxes any body into a [`ProxyBody`].
pub(crate) fn boxed<B>(body: B) -> ProxyBody
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

/// An upstream body of which `prefix` has been read already; then the
/// rest, or the error that stopped the reading.
pub(crate) struct Replayed {
    prefix: Option<Bytes>,
    rest: Option<Incoming>,
    failure: Option<hyper::Error>,
}

impl Replayed {
    pub(crate) fn new(
        prefix: Bytes,
        rest: Option<Incoming>,
        failure: Option<hyper::Error>,
    ) -> Self {
        Replayed {
            prefix: Some(prefix).filter(|prefix| !prefix.is_empty()),
            rest,
            failure,
        }
    }
}

impl Body for Replayed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(prefix) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        if let Some(failure) = self.failure.take() {
            return Poll::Ready(Some(Err(failure.into())));
        }
        match self.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx).map_err(Into::into),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none()
            && self.failure.is_none()
            && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let prefix = self.prefix.as_ref().map_or(0, |prefix| prefix.len() as u64);
        match (&self.rest, &self.failure) {
            (None, None) => SizeHint::with_exact(prefix),
            (Some(rest), None) => {
                let rest = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower().saturating_add(prefix));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(prefix));
                }
                hint
            }
            (_, Some(_)) => SizeHint::new(),
        }
    }
}

/// A body that fires `sent` once hyper has taken its last frame (or has
/// dropped it, done or failed): the request is then on its way to the
/// upstream, which is when a `kill-server=MS` delay starts.
pub(crate) struct SignalWhenTaken<B> {
    inner: B,
    sent: Option<oneshot::Sender<()>>,
}

impl<B> SignalWhenTaken<B> {
    pub(crate) fn new(inner: B, sent: oneshot::Sender<()>) -> Self {
        SignalWhenTaken {
            inner,
            sent: Some(sent),
        }
    }
}

impl<B: Body + Unpin> Body for SignalWhenTaken<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        let taken = match &frame {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if taken && let Some(sent) = self.sent.take() {
            let _ = sent.send(());
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

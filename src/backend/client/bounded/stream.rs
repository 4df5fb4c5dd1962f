//! [`BoundedReplies`]: the connection stream the redis crate reads, with the
//! commands written through it read as they pass ([`super::sent`]) and the
//! replies filtered as they arrive ([`super::replies`]).

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::replies::Replies;
use super::sent::Sent;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// The first protocol violation a connection's replies made, for the client
/// to say what was wrong (the redis crate sees only a failed read).
#[derive(Clone, Debug, Default)]
pub(crate) struct Violation(Arc<OnceLock<String>>);

impl Violation {
    /// What was wrong, once a reply broke the protocol.
    pub(crate) fn get(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }
}

/// A connection stream whose replies come filtered (see the module's doc).
#[derive(Debug)]
pub(crate) struct BoundedReplies<S> {
    inner: S,
    /// The commands written, read for the plans of their replies; `None` on
    /// a subscribed connection, whose messages answer no command.
    sent: Option<Sent>,
    replies: Replies,
    violation: Violation,
    /// Filtered bytes not yet handed to the reader.
    out: Vec<u8>,
    /// Where the reader has got to in `out`.
    out_at: usize,
    chunk: Box<[u8]>,
}

impl<S> BoundedReplies<S> {
    /// Wraps a fresh connection whose replies answer the commands written
    /// through it (the wrapper must see every byte either way from the
    /// first).
    pub(crate) fn new(inner: S) -> Self {
        Self::with_sent(inner, Some(Sent::default()))
    }

    /// Wraps a fresh connection that will be subscribed: every reply and
    /// message is read plain (long strings dropped, lengths bounded).
    pub(crate) fn subscribed(inner: S) -> Self {
        Self::with_sent(inner, None)
    }

    fn with_sent(inner: S, sent: Option<Sent>) -> Self {
        BoundedReplies {
            inner,
            sent,
            replies: Replies::default(),
            violation: Violation::default(),
            out: Vec::with_capacity(READ_CHUNK),
            out_at: 0,
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }

    /// The handle through which the first protocol violation is told.
    pub(crate) fn violation(&self) -> Violation {
        self.violation.clone()
    }

    /// Reads the first `n` bytes of `bufs`, just written.
    fn written(&mut self, bufs: &[&[u8]], mut n: usize) {
        let Some(sent) = self.sent.as_mut() else {
            return;
        };
        for buf in bufs {
            if n == 0 {
                break;
            }
            let part = &buf[..n.min(buf.len())];
            sent.feed(part, &mut self.replies.plans);
            n -= part.len();
        }
        if sent.lost() {
            // Not a command the crate wrote: no plan can be trusted, and
            // every reply is read plain from now on.
            self.replies.plans.clear();
            self.sent = None;
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for BoundedReplies<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_at < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_at);
                buf.put_slice(&this.out[this.out_at..this.out_at + n]);
                this.out_at += n;
                return Poll::Ready(Ok(()));
            }
            this.out.clear();
            this.out_at = 0;
            let mut chunk = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut chunk))?;
            let read = chunk.filled();
            if read.is_empty() {
                // End of stream.
                return Poll::Ready(Ok(()));
            }
            if let Err(what) = this.replies.filter(read, &mut this.out) {
                let _ = this.violation.0.set(what.clone());
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, what)));
            }
            // All of it dropped: read on (an empty read would say the end).
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for BoundedReplies<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.written(&[buf], n);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        let slices: Vec<&[u8]> = bufs.iter().map(|b| &**b).collect();
        this.written(&slices, n);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

//! Replies read without keeping what the exporter never uses: a stream
//! wrapper that drops every bulk string longer than [`BULK_BOUND`] as its
//! bytes arrive, and hands the redis crate a null in its place.
//!
//! The redis crate buffers a whole reply and copies each bulk string into
//! its value. `XINFO STREAM` returns the stream's first and last entries
//! with their bodies, and `XRANGE` returns bodies too, though only the IDs
//! are read: a stream of 20 MiB entries would cost the exporter tens of MiB
//! at every poll. The exporter reads no string that long (names, IDs, INFO
//! sections and fields are far shorter), so a longer one is dropped before
//! it is buffered; memory per connection stays at one read buffer.
//!
//! RESP needs no nesting to be followed here: every element is a line
//! starting with its type byte, and only the length-prefixed types (`$`
//! bulk and `=` verbatim strings) carry a payload after their line.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest bulk string kept; longer ones become nulls.
pub const BULK_BOUND: usize = 64 * 1024;

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 16 * 1024;

/// A header longer than this is not a length line; it is passed on as is
/// (the redis crate then reports the protocol error).
const HEADER_MAX: usize = 24;

/// Where the filter is in the reply stream.
#[derive(Debug)]
enum State {
    /// At the type byte of the next element.
    Start,
    /// Inside a line that passes unchanged, up to its `\n`.
    Line,
    /// Reading the length line of a bulk or verbatim string (its type byte
    /// first), held back until the length is known.
    Header(Vec<u8>),
    /// Inside a payload and its `\r\n`: `remaining` bytes, kept or dropped.
    Payload { remaining: u64, keep: bool },
}

/// A connection stream whose replies come with long bulk strings dropped.
#[derive(Debug)]
pub struct BoundedReplies<S> {
    inner: S,
    state: State,
    /// Filtered bytes not yet handed to the reader.
    out: Vec<u8>,
    /// Where the reader has got to in `out`.
    out_at: usize,
    chunk: Box<[u8]>,
}

impl<S> BoundedReplies<S> {
    /// Wraps a fresh connection (the filter must see every reply from the
    /// first byte).
    pub fn new(inner: S) -> Self {
        BoundedReplies {
            inner,
            state: State::Start,
            out: Vec::with_capacity(READ_CHUNK + HEADER_MAX),
            out_at: 0,
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }
}

/// Runs `input` through the filter in `state`, appending what passes to
/// `out`.
fn filter(state: &mut State, mut input: &[u8], out: &mut Vec<u8>) {
    while !input.is_empty() {
        match state {
            State::Start => {
                let byte = input[0];
                if byte == b'$' || byte == b'=' {
                    *state = State::Header(vec![byte]);
                    input = &input[1..];
                } else {
                    *state = State::Line;
                }
            }
            State::Line => match input.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    out.extend_from_slice(&input[..=end]);
                    input = &input[end + 1..];
                    *state = State::Start;
                }
                None => {
                    out.extend_from_slice(input);
                    input = &[];
                }
            },
            State::Header(header) => {
                let byte = input[0];
                input = &input[1..];
                header.push(byte);
                if byte == b'\n' {
                    *state = header_done(header, out);
                } else if header.len() > HEADER_MAX {
                    out.extend_from_slice(header);
                    *state = State::Line;
                }
            }
            State::Payload { remaining, keep } => {
                let take = input
                    .len()
                    .min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                if *keep {
                    out.extend_from_slice(&input[..take]);
                }
                input = &input[take..];
                *remaining -= take as u64;
                if *remaining == 0 {
                    *state = State::Start;
                }
            }
        }
    }
}

/// The state after a complete length line: its payload kept when within
/// [`BULK_BOUND`], dropped (a null said instead) beyond.
fn header_done(header: &[u8], out: &mut Vec<u8>) -> State {
    let length = std::str::from_utf8(&header[1..])
        .ok()
        .and_then(|s| s.strip_suffix("\r\n"))
        .and_then(|s| s.parse::<i64>().ok());
    match length {
        Some(n) if n > BULK_BOUND as i64 => {
            out.extend_from_slice(b"$-1\r\n");
            State::Payload {
                remaining: n as u64 + 2,
                keep: false,
            }
        }
        Some(n) if n >= 0 => {
            out.extend_from_slice(header);
            State::Payload {
                remaining: n as u64 + 2,
                keep: true,
            }
        }
        // A null, or not a length: passed on as is.
        _ => {
            out.extend_from_slice(header);
            State::Start
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
            filter(&mut this.state, read, &mut this.out);
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
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The filter's output for `input` fed in pieces of `step` bytes.
    fn filtered(input: &[u8], step: usize) -> Vec<u8> {
        let mut state = State::Start;
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            filter(&mut state, piece, &mut out);
        }
        out
    }

    #[test]
    fn short_replies_pass_unchanged_in_any_pieces() {
        let reply = b"*3\r\n$5\r\nhello\r\n:42\r\n*2\r\n$-1\r\n+OK\r\n=8\r\ntxt:abcd\r\n-ERR no\r\n%1\r\n$1\r\nk\r\n_\r\n";
        for step in [1, 2, 3, 7, reply.len()] {
            assert_eq!(filtered(reply, step), reply.to_vec(), "step {step}");
        }
    }

    #[test]
    fn a_long_bulk_string_becomes_a_null_without_being_kept() {
        let body = vec![b'x'; BULK_BOUND + 1];
        let mut reply = b"*2\r\n$3\r\nabc\r\n".to_vec();
        reply.extend_from_slice(format!("${}\r\n", body.len()).as_bytes());
        reply.extend_from_slice(&body);
        reply.extend_from_slice(b"\r\n:7\r\n");
        for step in [1, 5, 4096, reply.len()] {
            assert_eq!(
                filtered(&reply, step),
                b"*2\r\n$3\r\nabc\r\n$-1\r\n:7\r\n".to_vec(),
                "step {step}"
            );
        }
        // At the bound exactly, it is kept.
        let mut at_bound = format!("${BULK_BOUND}\r\n").into_bytes();
        at_bound.extend_from_slice(&body[..BULK_BOUND]);
        at_bound.extend_from_slice(b"\r\n");
        assert_eq!(filtered(&at_bound, 1000), at_bound);
    }

    #[test]
    fn a_payload_that_looks_like_resp_is_not_parsed() {
        let payload = b"$99999999\r\n*1\r\n";
        let mut reply = format!("${}\r\n", payload.len()).into_bytes();
        reply.extend_from_slice(payload);
        reply.extend_from_slice(b"\r\n+OK\r\n");
        assert_eq!(filtered(&reply, 3), reply);
    }

    /// Through tokio's reader: the filter's output parses into the same
    /// values as the input, long strings aside.
    #[tokio::test]
    async fn reads_through_the_wrapper() {
        use tokio::io::AsyncReadExt;
        let mut input = b"*2\r\n$2\r\nid\r\n".to_vec();
        input.extend_from_slice(format!("${}\r\n", 5 * BULK_BOUND).as_bytes());
        input.extend(std::iter::repeat_n(b'y', 5 * BULK_BOUND));
        input.extend_from_slice(b"\r\n");
        let mut reader = BoundedReplies::new(&input[..]);
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"*2\r\n$2\r\nid\r\n$-1\r\n".to_vec());
    }
}

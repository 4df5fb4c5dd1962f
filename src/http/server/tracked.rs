//! What a served connection is made of: its I/O and its service, each noting
//! on the connection's record when bytes move and when a request is answered
//! and sent, which is what the edge's timeouts and its cap read.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode, header};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::conn::{Clock, ConnRecord, Phase};

/// The connection's I/O, noting when bytes move.
pub(super) struct Tracked<T> {
    pub(super) io: T,
    pub(super) conn: Arc<ConnRecord>,
    pub(super) clock: Clock,
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.read_some(self.clock.now());
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.wrote_some(self.clock.now());
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.wrote_some(self.clock.now());
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The router behind the body limit, noting when a request is answered and
/// when its response has been sent.
#[derive(Clone)]
pub(super) struct Edge {
    pub(super) router: TowerToHyperService<Router>,
    pub(super) conn: Arc<ConnRecord>,
    pub(super) clock: Clock,
    pub(super) max_body: usize,
}

type EdgeFuture = Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Edge {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = EdgeFuture;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.conn.enter(Phase::Handling, self.clock.now());
        let track = {
            let (conn, clock) = (self.conn.clone(), self.clock);
            move |response: Response<Body>| {
                conn.enter(Phase::Sending, clock.now());
                response.map(|body| TrackedBody { body, conn, clock })
            }
        };
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_body as u64) {
            let mut response = Response::new(Body::from(format!(
                "request body larger than {} bytes\n",
                self.max_body
            )));
            *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            response.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
            return Box::pin(std::future::ready(Ok(track(response))));
        }
        // A body without a declared length is cut at the same size.
        let request = request.map(|b| Body::new(http_body_util::Limited::new(b, self.max_body)));
        let answer = hyper::service::Service::call(&self.router, request);
        Box::pin(async move {
            let response = match answer.await {
                Ok(r) => r,
                Err(never) => match never {},
            };
            Ok(track(response))
        })
    }
}

/// A response body that marks the connection idle once sent (or dropped).
pub(super) struct TrackedBody {
    body: Body,
    conn: Arc<ConnRecord>,
    clock: Clock,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        self.conn.enter(Phase::Idle, self.clock.now());
    }
}

//! The HTTP connection edge: accepts TCP (and TLS) connections and serves
//! the router over HTTP/1.1 on each, within bounds, so no client behaviour
//! can exhaust the process's descriptors or stall other scrapes:
//!
//! - at most `max_connections` open at once (and at most half the process's
//!   descriptor limit). At the cap, the connection that has waited longest
//!   without a request in progress (a TLS handshake, headers not yet
//!   complete, a kept-alive connection between requests) is closed to make
//!   room, and that is logged, at most every ten seconds. A scraper sends its
//!   request at once, so held or trickling connections cannot keep it out.
//! - at most `max_tls_handshakes` handshakes in progress, each within
//!   `tls_handshake_timeout` of accept; at that cap the oldest handshake
//!   gives way.
//! - a request's headers within `header_read_timeout` (from accept on a new
//!   connection, from the first byte of the next request on a kept-alive
//!   one), a kept-alive connection's next request within `idle_timeout`, and
//!   a response that the client stops reading closed after `idle_timeout`.
//! - request heads up to `max_header_bytes` (431 beyond) and bodies up to
//!   `max_body_bytes` (413 beyond).
//!
//! On shutdown the listener is closed at once (the port is free for a new
//! process), idle connections are closed, requests in progress get a short
//! grace to finish.
//!
//! This file holds no code. The rooms: `accept` (the accept loop, [`serve`]),
//! `task` (one connection's handshake and HTTP), `registry` (what the tasks
//! share, making room, and one warning per interval), `conn` (one
//! connection's record and deadlines) and `tracked` (its I/O and service,
//! noting progress).

mod accept;
mod conn;
mod registry;
mod task;
mod tracked;

pub use accept::serve;

#[cfg(test)]
mod tests;

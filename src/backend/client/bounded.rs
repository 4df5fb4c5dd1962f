//! Replies read within bounds, without keeping what the exporter never
//! uses: a wrapper between the socket and the redis crate's parser that
//! follows the structure of every reply as its bytes arrive and hands the
//! crate a smaller, well-formed one. Memory per connection stays at one
//! read buffer and the largest reply the exporter keeps, whatever the
//! server holds or sends.
//!
//! The redis crate buffers a whole reply and copies each string into its
//! value. `XINFO STREAM` returns the stream's first and last entries with
//! their bodies, and `XRANGE`/`XREVRANGE` return bodies too, though only
//! the IDs are read anywhere: entries of 20 MiB, or thousands of entries of
//! many 60 KiB fields, would sit whole in the exporter at every poll. So:
//!
//! - **Entries become their IDs.** The wrapper reads the commands written
//!   through it ([`sent`]); replies come back in that order, so it knows
//!   which reply answers `XRANGE`, `XREVRANGE` or `XINFO STREAM`, and hands
//!   on each entry of the first two, and the `first-entry` and `last-entry`
//!   of the third, as its ID alone (a bulk string). The fields are skipped
//!   as they arrive, never buffered.
//! - **Names nobody reads are not kept.** The consumers named in
//!   `XPENDING` replies (every row of a PEL page names one) are handed on
//!   as nulls: only whether an entry has an owner is read.
//! - **Long strings become nulls.** Any bulk string longer than
//!   [`BULK_BOUND`] is dropped as it arrives and a null said instead: names,
//!   IDs and INFO sections are far shorter, and the client leaves out what a
//!   dropped name named (`reply::prune`).
//! - **Lists without a `COUNT` are cut.** `XINFO GROUPS`, `XINFO
//!   CONSUMERS` and the summary `XPENDING`'s holders have one row per group
//!   or consumer, as many as the server holds: the first [`ROWS_KEPT`] are
//!   handed on (the array's length said accordingly), the rest skipped as
//!   they arrive. The probes know each list's true length from the stream
//!   poll (`XINFO STREAM`'s `groups`, `XINFO GROUPS`' `consumers`) and say
//!   what was cut.
//! - **Everything else is bounded or refused.** Lengths are read as numbers
//!   however they are spelt (leading zeros included) and passed on in their
//!   plain form; a line longer than [`LINE_BOUND`], aggregates nested deeper
//!   than [`DEPTH_BOUND`], more entries or rows than the command's `COUNT`
//!   asked for, or bytes that are not RESP are a protocol violation: the
//!   read fails at once with what was wrong ([`Violation`]), and the client
//!   drops the connection, instead of buffering until the timeout.
//!
//! The layout: [`stream`] is the wrapper, [`sent`] reads the commands
//! written into a read plan per reply, [`replies`] filters the replies read
//! by their plans and holds the bounds.
//!
//! [`BULK_BOUND`]: replies::BULK_BOUND
//! [`LINE_BOUND`]: replies::LINE_BOUND
//! [`DEPTH_BOUND`]: replies::DEPTH_BOUND
//! [`ROWS_KEPT`]: crate::vocab::ROWS_KEPT

mod replies;
mod sent;
mod stream;
#[cfg(test)]
mod tests;

pub(crate) use stream::{BoundedReplies, Violation};

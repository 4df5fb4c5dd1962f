//! Faults between the exporter and Redis (a TCP proxy of our own, stopped and restarted
//! servers) and what survives an outage.
//!
//! One test binary of the suite (docs/development.md); each module was a binary of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failed test.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod faults;
mod outage;

//! Packaging: the Dockerfile, the systemd unit, the Debian package.
//!
//! One test binary of the suite (docs/development.md).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::too_many_lines,
    clippy::mod_module_files
)] // Test code: a panic is a failed test.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod debian_package;
mod packaging;

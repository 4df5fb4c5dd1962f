//! The HTTP edge: endpoints, `/probe`, OpenMetrics as Prometheus reads it, the web config
//! (TLS, basic auth), limits that hold whatever clients do, and TLS to Redis.
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

mod bounded_http;
mod http_endpoint;
mod openmetrics_scrape;
mod probe_endpoint;
mod redis_tls;
mod secured_http;
mod web_config;

//! Turns [`RawConfig`] into [`Config`]: defaults, parsing of durations and
//! URLs, range checks and secret resolution, collecting every problem with
//! its key path instead of stopping at the first.
//!
//! The rooms: `from_str` (text to configuration), `parse` (the TOML and its
//! errors), `overrides` (the flags), `validator` (the problems and the walk
//! of the whole file, section by section), and by section: `sections` (the
//! sections that are only values: `[log]`, `[schedule]`, `[limits]`,
//! `[metrics]`, `[status]`), `targets` (`[[targets]]`: mode, credentials,
//! watched streams), `connection` (what targets and auth modules share: the
//! URL, secrets, Redis TLS, keyspace events), `streams` (`[stream_defaults]`,
//! `[[streams]]`), `probe` (`[probe]`, `[auth_modules]`), `web` (`[web]`);
//! and the helpers `values` (durations, ranges, priorities, buckets) and
//! `suggest` (the nearest valid name).
//!
//! [`RawConfig`]: super::raw::RawConfig
//! [`Config`]: super::Config

mod connection;
mod from_str;
mod overrides;
mod parse;
mod probe;
mod sections;
mod streams;
mod suggest;
mod targets;
mod validator;
mod values;
mod web;

pub(super) use connection::parse_url;
pub use from_str::from_str;
pub use overrides::CliOverrides;

#[cfg(test)]
mod tests;

//! Configuration: the validated, read-only [`Config`] every other module
//! takes, and [`load`], the only way to build one from a file.
//!
//! Loading has two stages (the ripgrep/postgres_exporter pattern): serde reads
//! the TOML into `raw` structs that reject unknown keys, then `validate`
//! checks every value and resolves secrets, reporting each problem with the
//! file, the key path and what is wrong. Components accept only [`Config`], so
//! validation cannot be skipped. Defaults are constants beside the settings
//! they belong to, mirrored key by key in `config/example.toml`.
//!
//! This file holds no code. The rooms, the settings: `whole` (the [`Config`],
//! logging, output shaping, the status window), `target` (one deployment to
//! watch and its URL), `polling` (schedule and limits), `streams` (per-stream
//! settings and rules), `web`, `tls` and `multitarget` (`/probe` and its auth
//! modules); and the loading: `loading` (a file or text to a [`Config`], and
//! its errors), `raw` (the file as written), `suggest` (the nearest valid
//! name), `validate` (the walk of the file, section by section) and
//! `problems` (what is wrong, and the values every section reads alike).

mod loading;
mod multitarget;
mod polling;
mod problems;
mod raw;
mod streams;
mod suggest;
mod target;
mod tls;
mod validate;
mod web;
mod whole;

pub use loading::{ConfigError, from_str, load};
pub use multitarget::{
    AuthModule, AuthModules, DEFAULT_FIRST_COLLECTION_WAIT, DEFAULT_MAX_PROBED_TARGETS,
    DEFAULT_TARGET_TTL, MAX_PROBE_URL_LEN, MultiTargetRefusal, MultiTargetSettings,
};
pub use polling::{Limits, Schedule, probe_names};
pub use problems::Problem;
pub use streams::{
    ConsumerRename, DEFAULT_CONSUMER_INACTIVE_AFTER, NameFilter, Series, StreamRules,
    StreamSettings, Trimming,
};
pub use target::{
    ClientTracking, DEFAULT_MAX_GROUPS, DEFAULT_MAX_STREAMS, DEFAULT_REDIS_URL, DEFAULT_SCAN_COUNT,
    Endpoint, KeyspaceEvents, Mode, Secret, Target,
};
pub use tls::{ClientIdentity, PemFile, RedisTls};
pub use validate::CliOverrides;
pub use web::*;
pub use whole::{
    Config, DEFAULT_DATA_LOSS_HOLD, DEFAULT_MAX_LABEL_VALUE_BYTES, DEFAULT_STATUS_WINDOW, Log,
    MetricsSettings, targets_by_name,
};

/// Log output format (the logger's own type: config only chooses it).
pub use crate::telemetry::LogFormat;

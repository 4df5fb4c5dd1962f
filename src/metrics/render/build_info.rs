//! The exporter's own version as `build_info` reports it: fixed when the
//! crate is built, the same values as `--version`.

/// The exporter's own version, for `build_info` (the same values as `--version`).
#[derive(Clone, Copy, Debug)]
pub struct BuildInfo {
    /// Crate version.
    pub version: &'static str,
    /// Source revision (12 hex digits, or `unknown`).
    pub revision: &'static str,
    /// Build date, RFC 3339 UTC (`SOURCE_DATE_EPOCH` when the build set it).
    pub build_date: &'static str,
}

impl BuildInfo {
    /// This build; build.rs always sets both variables.
    pub const CURRENT: BuildInfo = BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        revision: env!("RSE_GIT_REVISION"),
        build_date: env!("RSE_BUILD_DATE"),
    };
}

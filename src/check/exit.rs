//! The exit codes of `check`: what a script running it can tell apart
//! without reading the report.

/// Exit code when no problem was found.
pub const EXIT_OK: u8 = 0;
/// Exit code when a problem was found.
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit code of a usage or configuration error.
pub const EXIT_USAGE: u8 = 2;
/// Exit code when a target could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;

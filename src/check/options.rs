//! How `check` is asked to run: the flags of the subcommand, as plain
//! data.

use std::time::Duration;

/// How to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Poll for this long; `None` (or zero): one look.
    pub watch: Option<Duration>,
}

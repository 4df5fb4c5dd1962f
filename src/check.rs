//! The `check` subcommand: the daemon's own probes, status rules, PEL scan
//! and ghost checks, run from a shell, and a report of what they found
//! (problems first, then one line per target), as a table or JSON.
//!
//! A one-shot run polls every target once (every probe in order, then the
//! stream probe again so the status sees consumer activity and pending
//! entries). What needs a window it cannot know: a group whose position or
//! oldest pending entry does not move (stalled), a lag that keeps growing, a
//! consumer that stopped (which looks exactly like a batch consumer between
//! two runs), pending entries piling up, dead letters arriving. Such a group
//! is reported `unknown`, never `ok` and never `stopped`, and the report
//! says how long to watch.
//!
//! `--watch DURATION` polls for that long: the stream probe about every
//! `schedule.stream` (so the window holds at least a few polls), the other
//! probes on their own intervals and once more at the end, and judges each
//! group over everything it watched. The status rules are the daemon's
//! ([`crate::status`]), over a window that is the watch itself; a status that
//! rests on the window ([`crate::status::Basis::Window`]) is reported only
//! when the group was watched for at least the daemon's window
//! (`status.window × schedule.stream`, 2m30s by default), else `unknown`.
//! A watch shorter than that window is warned about on stderr before it
//! starts, not only in the report at its end.
//!
//! Exit codes: 0 no problem found, 1 problems, 2 usage or configuration
//! error, 3 a target could not be reached (whatever the others show).
//!
//! The rooms: `run` (the targets watched and judged), `plan` (the options
//! and when a watch polls), `watched` (what it remembers), `judge` (what it
//! makes of it, and the default delay threshold), `report` (how it is
//! written, its durations and the exit codes) and `progress` (stderr while
//! it runs).

mod judge;
mod plan;
mod progress;
mod report;
mod run;
mod watched;

pub use judge::DEFAULT_DELAY_THRESHOLD;
pub use plan::Options;
pub use progress::Progress;
pub use report::{
    EXIT_OK, EXIT_PROBLEMS, EXIT_UNREACHABLE, EXIT_USAGE, GroupReport, Report, TargetReport,
};
pub use run::run;

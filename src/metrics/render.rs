//! Builds the exposition from snapshots: fresh families on every render, so
//! anything not in the snapshots is simply not written. Values that are
//! unknown (`None`) are skipped, never written as 0. Data series of a target
//! that is down are withheld; its self-metrics remain.
//!
//! The families are those of the catalog, in its order: each [`Section`]
//! writes the families whose [`Source`] it reads, from the catalog entry
//! alone; the [`Custom`] ones have their code in [`custom`]. Samples are
//! written straight from the snapshot, label values escaped as they are
//! written; output streams through a [`Sink`], so rendering 10 000 streams
//! needs little more memory than its compressed result.
//!
//! The rooms: `answers` (`/metrics` and `/probe` written whole), `renderer`
//! (sections filled from the catalog's sources), `section` and `inputs`
//! (the sections and what their output depends on), `out` (where a
//! section's families go and what they counted), `groups`,
//! `other_consumers`, `outer_join` and `dedupe` (what the families share),
//! `build_info`, and [`custom`].
//!
//! [`Source`]: super::catalog::Source
//! [`Custom`]: super::catalog::Custom
//! [`Sink`]: super::text::Sink

mod answers;
mod build_info;
mod custom;
mod dedupe;
mod groups;
mod inputs;
mod other_consumers;
mod out;
mod outer_join;
mod renderer;
mod section;

pub use answers::{render, render_probe_answer};
pub use build_info::BuildInfo;
pub use inputs::SectionInputs;
pub use out::SectionCounts;
pub use renderer::Renderer;
pub use section::Section;

#[cfg(test)]
mod golden;
#[cfg(test)]
mod tests;

//! The names the snapshot is keyed by: binary-safe, since Redis names are
//! bytes, and shared (`Arc`) so that consecutive snapshots copy no name.

use std::sync::Arc;

/// A binary-safe name (stream, group or consumer).
pub type Name = Arc<[u8]>;

/// A group, by stream and group name.
pub type GroupKey = (Name, Name);

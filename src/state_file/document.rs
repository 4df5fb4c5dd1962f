//! The state file's format: one JSON document, [`StateDocument`], written
//! with serde from the types that hold what the exporter learned (the
//! cadence's and the holds' hours, the status window, the loss ledger) and
//! read back into them. Version [`FORMAT_VERSION`]: a change to any type
//! written here (`cadence::Cadence`, `cadence::Holds`, `status::Window`,
//! `loss::Ledger` and what they hold, `StreamInfo`, `StreamId`) is a new
//! version, which an older file's version then tells apart; the test
//! `a_version_1_document_still_loads` holds a written document to the
//! format.
//!
//! And what a document read at start is worth ([`judge`]): nothing when it
//! is of another format or version, older than [`MAX_AGE`], saved in the
//! future, or of other targets; otherwise the state of each configured
//! target it has, matched by name and address (a partly matching file keeps
//! what matches).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::config::{Mode, Target};
use crate::probe::{GroupMemory, TargetState};
use crate::snapshot::{GroupKey, Name};
use crate::vocab::StreamId;
use crate::{cadence, lag, loss, status};

/// What the document's `format` field says.
pub const FORMAT: &str = "redis-streams-exporter state";
/// The version of the format this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// A file saved longer ago than this is ignored: the exporter was down
/// long enough for an operator to expect a fresh start, and what the
/// ledgers compare with is that old (an hour is also `data_loss_hold`'s
/// default, the longest a counted loss holds a group's status).
pub const MAX_AGE: Duration = Duration::from_secs(3600);
/// A file saved further than this in the future of the clock is ignored:
/// the clock was stepped back, and the file's age cannot be told.
pub const MAX_AHEAD: Duration = Duration::from_secs(300);

/// The whole file.
#[derive(Debug, Serialize, Deserialize)]
pub struct StateDocument {
    /// [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`].
    pub version: u32,
    /// When it was written, by the exporter's clock (ms since the epoch).
    pub saved_at_ms: u64,
    /// Each configured target's state.
    pub targets: Vec<SavedTarget>,
}

/// What is read of a document first, to tell another format or version
/// from a corrupt document.
#[derive(Debug, Deserialize)]
struct Header {
    format: String,
    version: u32,
}

/// One target's state.
#[derive(Debug, Serialize, Deserialize)]
pub struct SavedTarget {
    /// The target's name.
    pub name: String,
    /// Where it is ([`address`]): a target of the same name elsewhere is
    /// another target.
    pub address: String,
    /// Its groups.
    pub groups: Vec<SavedGroup>,
}

/// One group's state: its memory, its loss ledger, or both.
#[derive(Debug, Serialize, Deserialize)]
pub struct SavedGroup {
    stream: SavedName,
    group: SavedName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory: Option<SavedMemory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ledger: Option<loss::Ledger>,
}

/// A name from Redis: its text when it is UTF-8, else its bytes in base64.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum SavedName {
    Text(String),
    Bytes { base64: String },
}

/// What is kept of a group's memory ([`GroupMemory`]): what was learned
/// (the cadence and the holds), the status window, and the facts about
/// reads and the stream's head that the status rules read. The rest (lag
/// trails, trends, PEL scans, consumers seen holding entries) is read from
/// Redis again, as after an outage.
#[derive(Debug, Serialize, Deserialize)]
struct SavedMemory {
    window: status::Window,
    cadence: cadence::Cadence,
    holds: cadence::Holds,
    last_read_at_ms: Option<u64>,
    last_progress_at_ms: Option<u64>,
    watched_since_ms: Option<u64>,
    /// The group's position at the last poll, so that the first poll after
    /// a restart sees a read made while the exporter was down.
    position: Option<SavedPosition>,
    head: Option<StreamId>,
    head_deleted: bool,
    head_moved_at_ms: Option<u64>,
}

/// A group's position and entries-read at a poll.
#[derive(Debug, Serialize, Deserialize)]
struct SavedPosition {
    last_delivered: StreamId,
    entries_read: Option<u64>,
}

/// Where a target is, as the state file tells targets apart: its
/// canonical URL (scheme, host, port, database), its mode and, behind
/// Sentinel, the primary's name. Never credentials.
pub fn address(target: &Target) -> String {
    let url = target.endpoint.canonical_url();
    match &target.mode {
        Mode::Sentinel { master_name, .. } => format!("{url} sentinel {master_name}"),
        mode => format!("{url} {}", mode.as_str()),
    }
}

impl StateDocument {
    /// A document of `targets`, saved at `saved_at_ms`.
    pub fn new(saved_at_ms: u64, targets: Vec<SavedTarget>) -> StateDocument {
        StateDocument {
            format: FORMAT.to_string(),
            version: FORMAT_VERSION,
            saved_at_ms,
            targets,
        }
    }

    /// The groups it holds, over every target.
    pub fn groups(&self) -> usize {
        self.targets.iter().map(|t| t.groups.len()).sum()
    }
}

impl SavedTarget {
    /// What `state` holds worth keeping of `target`: each group's memory
    /// (polled, or restored and not polled yet) and loss ledger.
    pub fn of(target: &Target, state: &TargetState) -> SavedTarget {
        let mut groups: BTreeMap<&GroupKey, SavedGroup> = BTreeMap::new();
        let entry = |key: &GroupKey| SavedGroup {
            stream: SavedName::of(&key.0),
            group: SavedName::of(&key.1),
            memory: None,
            ledger: None,
        };
        for (key, memory) in state.memories() {
            let saved = groups.entry(key).or_insert_with(|| entry(key));
            saved.memory = Some(SavedMemory::of(memory));
        }
        for (key, ledger) in &state.ledgers {
            let saved = groups.entry(key).or_insert_with(|| entry(key));
            saved.ledger = Some(ledger.clone());
        }
        SavedTarget {
            name: target.name.clone(),
            address: address(target),
            groups: groups.into_values().collect(),
        }
    }
}

/// A target's state as read back: what [`TargetState::restore`] takes.
#[derive(Debug, Default)]
pub struct RestoredTarget {
    /// Each group's memory.
    pub memories: BTreeMap<GroupKey, GroupMemory>,
    /// Each group's loss ledger.
    pub ledgers: BTreeMap<GroupKey, loss::Ledger>,
}

impl RestoredTarget {
    /// The groups it holds.
    pub fn groups(&self) -> usize {
        let mut keys: std::collections::BTreeSet<&GroupKey> = self.memories.keys().collect();
        keys.extend(self.ledgers.keys());
        keys.len()
    }

    /// What a saved target holds, at most `max_groups` groups of it (a
    /// file never holds more than the target watches; one written for a
    /// larger limit is cut).
    fn of(saved: SavedTarget, max_groups: usize) -> Result<RestoredTarget, String> {
        let mut restored = RestoredTarget::default();
        for group in saved.groups.into_iter().take(max_groups) {
            let key = (group.stream.name()?, group.group.name()?);
            if let Some(memory) = group.memory {
                restored.memories.insert(key.clone(), memory.into_memory());
            }
            if let Some(ledger) = group.ledger {
                restored.ledgers.insert(key, ledger);
            }
        }
        Ok(restored)
    }
}

impl SavedName {
    fn of(name: &[u8]) -> SavedName {
        match std::str::from_utf8(name) {
            Ok(text) => SavedName::Text(text.to_string()),
            Err(_) => SavedName::Bytes {
                base64: base64::engine::general_purpose::STANDARD.encode(name),
            },
        }
    }

    fn name(&self) -> Result<Name, String> {
        match self {
            SavedName::Text(text) => Ok(Arc::from(text.as_bytes())),
            SavedName::Bytes { base64 } => base64::engine::general_purpose::STANDARD
                .decode(base64)
                .map(Arc::from)
                .map_err(|e| format!("a name in base64 does not decode: {e}")),
        }
    }
}

impl SavedMemory {
    fn of(memory: &GroupMemory) -> SavedMemory {
        SavedMemory {
            window: memory.window.clone(),
            cadence: memory.cadence.clone(),
            holds: memory.holds.clone(),
            last_read_at_ms: memory.last_read_at_ms,
            last_progress_at_ms: memory.last_progress_at_ms,
            watched_since_ms: memory.watched_since_ms,
            position: memory.lag_trail.as_ref().map(|t| SavedPosition {
                last_delivered: t.last_delivered,
                entries_read: t.entries_read,
            }),
            head: memory.head,
            head_deleted: memory.head_deleted,
            head_moved_at_ms: memory.head_moved_at_ms,
        }
    }

    /// The memory it keeps, the rest as a group's first poll finds it. The
    /// position becomes a trail that proves nothing but the position (what
    /// a lag needs of the last poll is read again), and the cadence goes on
    /// after the gap the restart left.
    fn into_memory(self) -> GroupMemory {
        let mut cadence = self.cadence;
        cadence.after_gap();
        GroupMemory {
            window: self.window,
            cadence,
            holds: self.holds,
            last_read_at_ms: self.last_read_at_ms,
            last_progress_at_ms: self.last_progress_at_ms,
            watched_since_ms: self.watched_since_ms,
            lag_trail: self.position.map(|p| lag::Trail {
                last_delivered: p.last_delivered,
                entries_read: p.entries_read,
                ..lag::Trail::default()
            }),
            head: self.head,
            head_deleted: self.head_deleted,
            head_moved_at_ms: self.head_moved_at_ms,
            ..GroupMemory::default()
        }
    }
}

/// Why a state file was ignored at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// There is none yet (the first start, or a new path).
    Missing,
    /// It could not be read.
    Unreadable(String),
    /// It does not parse as a state file of this version.
    Corrupt(String),
    /// It is a state file of another format or version.
    OtherVersion {
        /// The format it names.
        format: String,
        /// Its version.
        version: u32,
    },
    /// It was saved longer ago than [`MAX_AGE`].
    Stale {
        /// How long ago.
        age: Duration,
    },
    /// It was saved in the future of the clock, by more than [`MAX_AHEAD`].
    Ahead {
        /// By how much.
        ahead: Duration,
    },
    /// None of its targets is configured (by name and address): it was
    /// written by an exporter of other targets.
    Foreign {
        /// Its targets, as `name (address)`.
        saved: Vec<String>,
    },
}

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: &Duration| humantime::format_duration(Duration::from_secs(d.as_secs()));
        match self {
            Ignored::Missing => f.write_str("there is none yet"),
            Ignored::Unreadable(e) => write!(f, "it cannot be read: {e}"),
            Ignored::Corrupt(e) => write!(f, "it is not a state file: {e}"),
            Ignored::OtherVersion { format, version } => write!(
                f,
                "it is {format:?} version {version}, this build reads {FORMAT:?} version {FORMAT_VERSION}"
            ),
            Ignored::Stale { age } => write!(
                f,
                "it was saved {} ago, longer than {}",
                secs(age),
                secs(&MAX_AGE)
            ),
            Ignored::Ahead { ahead } => write!(
                f,
                "it was saved {} in the future of this clock",
                secs(ahead)
            ),
            Ignored::Foreign { saved } => write!(
                f,
                "it holds other targets than the configuration's ({})",
                saved.join(", ")
            ),
        }
    }
}

/// What a state file read at start gives back.
#[derive(Debug, Default)]
pub struct Restorable {
    /// When it was written (ms since the epoch).
    pub saved_at_ms: u64,
    /// The state of each configured target it has, by name.
    pub targets: BTreeMap<String, RestoredTarget>,
    /// Its targets that are not configured (by name and address), as
    /// `name (address)`: left out.
    pub left_out: Vec<String>,
}

/// What the document `bytes` is worth to an exporter of `targets`, read
/// at `now_ms` (ms since the epoch).
///
/// # Errors
/// Why it is ignored as a whole.
pub fn judge(bytes: &[u8], targets: &[Arc<Target>], now_ms: u64) -> Result<Restorable, Ignored> {
    let header: Header =
        serde_json::from_slice(bytes).map_err(|e| Ignored::Corrupt(e.to_string()))?;
    if header.format != FORMAT || header.version != FORMAT_VERSION {
        return Err(Ignored::OtherVersion {
            format: header.format,
            version: header.version,
        });
    }
    let document: StateDocument =
        serde_json::from_slice(bytes).map_err(|e| Ignored::Corrupt(e.to_string()))?;
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if document.saved_at_ms > now_ms.saturating_add(ms(MAX_AHEAD)) {
        return Err(Ignored::Ahead {
            ahead: Duration::from_millis(document.saved_at_ms - now_ms),
        });
    }
    let age = Duration::from_millis(now_ms.saturating_sub(document.saved_at_ms));
    if age > MAX_AGE {
        return Err(Ignored::Stale { age });
    }
    let mut restorable = Restorable {
        saved_at_ms: document.saved_at_ms,
        ..Restorable::default()
    };
    for saved in document.targets {
        let configured = targets
            .iter()
            .find(|t| t.name == saved.name && address(t) == saved.address);
        match configured {
            Some(target) if !restorable.targets.contains_key(&saved.name) => {
                let name = saved.name.clone();
                let restored =
                    RestoredTarget::of(saved, target.max_groups).map_err(Ignored::Corrupt)?;
                restorable.targets.insert(name, restored);
            }
            _ => restorable
                .left_out
                .push(format!("{} ({})", saved.name, saved.address)),
        }
    }
    if restorable.targets.is_empty() && !restorable.left_out.is_empty() {
        return Err(Ignored::Foreign {
            saved: restorable.left_out,
        });
    }
    Ok(restorable)
}

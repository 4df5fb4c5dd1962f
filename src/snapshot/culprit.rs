//! Who holds the entries that cannot progress: the consumers holding
//! orphaned entries (the consumers probe, under their real names) and the
//! holders of poison entries (the pending summary's look at a group's oldest
//! pending entries, which names their holders), each with the oldest such
//! entry it holds and the minimum idle time of a claim that takes them and
//! no live work. What the culprit family, the landing page and `check` name,
//! and the `XAUTOCLAIM`/`XCLAIM` line they give.

use std::time::Duration;

use super::name::Name;
use super::streams::Consumers;
use crate::safe_names::printable;
use crate::vocab::StreamId;

/// Culprits named per kind and group: the consumers holding the most
/// orphaned entries, the holders of the oldest poison entries.
pub const CULPRITS_NAMED: usize = 3;

/// A consumer holding orphaned entries, under its real name (before any
/// `consumer_names` rewrite: the name a claim or `XPENDING` takes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrphanHolder {
    /// The consumer's name in Redis.
    pub name: Name,
    /// Entries it holds.
    pub pending: u64,
    /// Milliseconds since its last successful read; `None` when it never
    /// read.
    pub silent_ms: Option<u64>,
}

/// One entry of the look at a group's oldest pending entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadEntry {
    /// The entry.
    pub id: StreamId,
    /// The consumer holding it, when its name was kept (see
    /// [`crate::vocab::PendingEntry::holder`]).
    pub holder: Option<Name>,
    /// Milliseconds since its last delivery, when read.
    pub idle_ms: u64,
    /// Times delivered.
    pub deliveries: u64,
}

/// What the pending summary's look at a group's oldest pending entries
/// (at most 10) found: the poison and the ghosts among them, and who holds
/// what.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PendingHead {
    /// Entries among them delivered at least `poison_delivery_count` times.
    pub poison: u64,
    /// Entries among them older than the stream's first entry: trimmed (or
    /// deleted) while pending, their bodies gone (ghosts), seen at once
    /// rather than at the next PEL scan.
    pub ghost: u64,
    /// The oldest poison entry of each holder, oldest first, at most
    /// [`CULPRITS_NAMED`].
    pub poisoned: Vec<HeadEntry>,
    /// Each holder's oldest entry among them, oldest first.
    pub oldest_by_holder: Vec<HeadEntry>,
}

impl PendingHead {
    /// The look's findings from its `entries` (oldest first), a poison
    /// entry being one delivered `poison_after` times or more, a ghost one
    /// below `retained_from`, where the stream's retained entries began at
    /// its last poll (`None` when unknown).
    pub fn of(
        entries: &[crate::vocab::PendingEntry],
        poison_after: u64,
        retained_from: Option<StreamId>,
    ) -> PendingHead {
        let mut head = PendingHead::default();
        for e in entries {
            if retained_from.is_some_and(|first| e.id < first) {
                head.ghost += 1;
            }
            let entry = HeadEntry {
                id: e.id,
                holder: e.holder.as_deref().map(Name::from),
                idle_ms: e.idle_ms,
                deliveries: e.deliveries,
            };
            let first_of_holder = entry.holder.is_some()
                && !head
                    .oldest_by_holder
                    .iter()
                    .any(|h| h.holder == entry.holder);
            if e.deliveries >= poison_after {
                head.poison += 1;
                let named = head.poisoned.iter().any(|p| p.holder == entry.holder);
                if !named && head.poisoned.len() < CULPRITS_NAMED {
                    head.poisoned.push(entry.clone());
                }
            }
            if first_of_holder {
                head.oldest_by_holder.push(entry);
            }
        }
        head
    }

    /// The oldest entry `consumer` holds among the look's, when it holds one.
    fn oldest_of(&self, consumer: &[u8]) -> Option<StreamId> {
        self.oldest_by_holder
            .iter()
            .find(|h| h.holder.as_deref() == Some(consumer))
            .map(|h| h.id)
    }
}

/// What a culprit holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CulpritKind {
    /// Entries held by a consumer inactive past its group's orphan limit.
    Orphaned,
    /// Entries delivered `poison_delivery_count` times or more.
    Poison,
}

impl CulpritKind {
    /// The `kind` label value.
    pub fn label(self) -> &'static str {
        match self {
            CulpritKind::Orphaned => "orphaned",
            CulpritKind::Poison => "poison",
        }
    }
}

/// A consumer holding orphaned or poison entries of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Culprit {
    /// What it holds.
    pub kind: CulpritKind,
    /// The consumer; `None` when a poison entry's holder is not known (its
    /// name too long to keep).
    pub consumer: Option<Name>,
    /// Orphaned: the entries it holds.
    pub entries: Option<u64>,
    /// Orphaned: milliseconds since it last read (`None`: never).
    pub silent_ms: Option<u64>,
    /// The oldest such entry it holds, when it is among the group's oldest
    /// pending entries.
    pub oldest: Option<StreamId>,
    /// Poison: times its oldest poison entry was delivered.
    pub deliveries: Option<u64>,
    /// The minimum idle time of a claim that takes those entries and no
    /// live work, to the second: the group's orphan limit for orphaned
    /// entries (its consumers' entries idle longer than that are not being
    /// processed), the poison entry's idle time when read (it is claimed
    /// unless someone was handed it since).
    pub min_idle: Duration,
}

/// The culprits of one group from what the consumers probe (`consumers`)
/// and the look at its oldest pending entries (`head`) found: the orphaned
/// entries' holders first, most entries first, then the poison entries'.
pub fn culprits(consumers: Option<&Consumers>, head: Option<&PendingHead>) -> Vec<Culprit> {
    let mut found = Vec::new();
    if let Some(cs) = consumers.filter(|c| c.orphaned > 0) {
        let min_idle = Duration::from_secs(cs.inactive_after.as_secs());
        for h in &cs.orphan_holders {
            found.push(Culprit {
                kind: CulpritKind::Orphaned,
                consumer: Some(h.name.clone()),
                entries: Some(h.pending),
                silent_ms: h.silent_ms,
                oldest: head.and_then(|hd| hd.oldest_of(&h.name)),
                deliveries: None,
                min_idle,
            });
        }
    }
    for p in head.map_or(&[][..], |h| &h.poisoned) {
        found.push(Culprit {
            kind: CulpritKind::Poison,
            consumer: p.holder.clone(),
            entries: None,
            silent_ms: None,
            oldest: Some(p.id),
            deliveries: Some(p.deliveries),
            min_idle: Duration::from_secs(p.idle_ms / 1000),
        });
    }
    found
}

impl Culprit {
    /// A line to paste into `redis-cli` that takes the entries away from
    /// this culprit: for orphaned entries `XAUTOCLAIM` of every entry idle
    /// past the group's orphan limit from the oldest one (for a live
    /// consumer to name), for a poison entry `XCLAIM` of that entry (for
    /// whoever dead-letters it).
    pub fn claim_line(&self, stream: &[u8], group: &[u8]) -> String {
        let ms = self.min_idle.as_millis();
        let (s, g) = (word(stream), word(group));
        match self.kind {
            CulpritKind::Orphaned => format!(
                "XAUTOCLAIM {s} {g} <live-consumer> {ms} {} COUNT 100",
                self.oldest.unwrap_or_default()
            ),
            CulpritKind::Poison => format!(
                "XCLAIM {s} {g} <dead-letter-handler> {ms} {}",
                self.oldest.unwrap_or_default()
            ),
        }
    }

    /// What it holds, in words: `worker-7f3a holds 20 entries, silent for
    /// 4m10s, the oldest 1700000000000-0`.
    pub fn describe(&self) -> String {
        let who = self.consumer.as_deref().map_or_else(
            || "a consumer not named".to_string(),
            |c| printable(c).into_owned(),
        );
        let oldest = self
            .oldest
            .map_or_else(String::new, |id| format!(", the oldest {id}"));
        match self.kind {
            CulpritKind::Orphaned => {
                let entries = self.entries.unwrap_or_default();
                let silent = match self.silent_ms {
                    Some(ms) => format!("silent for {}", duration_words(ms / 1000)),
                    None => "never read".to_string(),
                };
                format!(
                    "{who} holds {entries} {}, {silent}{oldest}",
                    if entries == 1 { "entry" } else { "entries" }
                )
            }
            CulpritKind::Poison => format!(
                "{who} holds poison{oldest} (delivered {} times)",
                self.deliveries.unwrap_or_default()
            ),
        }
    }
}

/// A name as one word of a `redis-cli` line: printable, and quoted when it
/// holds a space, a quote or a backslash.
fn word(name: &[u8]) -> String {
    let text = printable(name);
    if text.is_empty() || text.contains([' ', '"', '\'', '\\']) {
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        text.into_owned()
    }
}

/// Whole seconds as a duration a person reads: `4m10s`, `2h5m`, `45s`.
pub fn duration_words(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, _) if h >= 48 => format!("{}d", h / 24),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::PendingEntry;

    fn row(ms: u64, holder: Option<&str>, idle_ms: u64, deliveries: u64) -> PendingEntry {
        PendingEntry {
            id: StreamId::new(ms, 0),
            released: false,
            holder: holder.map(|h| h.as_bytes().to_vec()),
            idle_ms,
            deliveries,
        }
    }

    fn consumers(holders: &[(&str, u64, Option<u64>)]) -> Consumers {
        Consumers {
            orphaned: holders.iter().map(|h| h.1).sum(),
            orphan_holders: holders
                .iter()
                .map(|&(name, pending, silent_ms)| OrphanHolder {
                    name: Name::from(name.as_bytes()),
                    pending,
                    silent_ms,
                })
                .collect(),
            inactive_after: Duration::from_millis(120_500),
            ..Consumers::default()
        }
    }

    /// The crashed worker named with its oldest entry and the group's
    /// orphan limit; a poison entry with its holder and its idle time.
    #[test]
    fn culprits_name_the_holder_and_the_oldest_entry() {
        let head = PendingHead::of(
            &[
                row(100, Some("worker-dead"), 300_000, 1),
                row(101, Some("worker-dead"), 300_000, 1),
                row(150, Some("worker-live"), 2_500, 12),
                row(160, Some("worker-live"), 100, 1),
                row(170, None, 100, 1),
            ],
            10,
            Some(StreamId::new(101, 0)),
        );
        assert_eq!(head.poison, 1);
        assert_eq!(head.ghost, 1, "100-0 is below the stream's first entry");
        assert_eq!(head.oldest_by_holder.len(), 2, "one entry per holder named");
        let cs = consumers(&[("worker-dead", 2, Some(300_000))]);
        let found = culprits(Some(&cs), Some(&head));
        assert_eq!(found.len(), 2);
        let dead = &found[0];
        assert_eq!(dead.kind, CulpritKind::Orphaned);
        assert_eq!(dead.oldest, Some(StreamId::new(100, 0)));
        assert_eq!(
            dead.describe(),
            "worker-dead holds 2 entries, silent for 5m, the oldest 100-0"
        );
        assert_eq!(
            dead.claim_line(b"orders", b"billing"),
            "XAUTOCLAIM orders billing <live-consumer> 120000 100-0 COUNT 100"
        );
        let poison = &found[1];
        assert_eq!(
            poison.describe(),
            "worker-live holds poison, the oldest 150-0 (delivered 12 times)"
        );
        assert_eq!(
            poison.claim_line(b"my stream", b"g"),
            "XCLAIM \"my stream\" g <dead-letter-handler> 2000 150-0"
        );
        // Nothing orphaned, nothing poison: nobody is named.
        let fine = Consumers { orphaned: 0, ..cs };
        assert!(culprits(Some(&fine), Some(&PendingHead::of(&[], 10, None))).is_empty());
        // An orphaned holder whose entries are not among the oldest: named,
        // its oldest entry unknown, the claim from the start.
        let cs = consumers(&[("w", 1, None)]);
        let found = culprits(Some(&cs), None);
        assert_eq!(found[0].describe(), "w holds 1 entry, never read");
        assert!(found[0].claim_line(b"s", b"g").ends_with(" 0-0 COUNT 100"));
    }

    #[test]
    fn durations_read_as_durations() {
        assert_eq!(duration_words(0), "0s");
        assert_eq!(duration_words(197), "3m17s");
        assert_eq!(duration_words(240), "4m");
        assert_eq!(duration_words(3_725), "1h2m");
        assert_eq!(duration_words(7_200), "2h");
        assert_eq!(duration_words(3 * 86_400), "3d");
    }
}

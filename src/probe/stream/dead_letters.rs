//! The stream probe's last step: the configured dead-letter streams, their
//! counts (`XINFO STREAM`) and the age of their oldest entry (`XRANGE … COUNT
//! 1` after `TIME`). A dead-letter stream not created yet is the usual state:
//! no dead letters, and no error.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::decode::time_of;
use crate::backend::reply;
use crate::backend::{Command, RangeEnd, RangeStart};
use crate::probe::context::{ProbeContext, ProbeError, Problems};
use crate::probe::groups::age_seconds;
use crate::safe_names;
use crate::snapshot::{DeadLetter, Name, StreamState};
use crate::vocab::ErrorKind;

/// Reads the dead-letter streams of every stream that has one configured.
pub(super) async fn dead_letters(
    ctx: &ProbeContext,
    streams: &mut BTreeMap<Name, Arc<StreamState>>,
    problems: &mut Problems,
) -> Result<(), ProbeError> {
    let wanted: Vec<(Name, Vec<u8>)> = streams
        .iter()
        .filter_map(|(name, s)| {
            s.settings
                .dead_letter_for(name)
                .map(|dl| (name.clone(), dl))
        })
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    // On 7.0+ a missing dead-letter stream has had 0 entries added; before,
    // the counter does not exist at all.
    let counters = streams.values().any(|s| s.info.entries_added.is_some());
    let mut found: HashMap<Vec<u8>, DeadLetter> = HashMap::new();
    let by_node = ctx
        .client
        .partition(wanted.iter().map(|(_, dl)| dl.as_slice()))
        .await?;
    for (node, mine) in by_node {
        let keys: Vec<&[u8]> = mine.iter().map(|&i| wanted[i].1.as_slice()).collect();
        // XINFO STREAM for the counts, and the oldest entry for its age
        // (XRANGE answers an empty list for a missing stream), after TIME.
        let cmds: Vec<Command> = std::iter::once(Command::Time)
            .chain(keys.iter().flat_map(|k| {
                [
                    Command::XinfoStream { key: k.to_vec() },
                    Command::Xrange {
                        key: k.to_vec(),
                        start: RangeStart::Min,
                        end: RangeEnd::Max,
                        count: 1,
                    },
                ]
            }))
            .collect();
        let replies = ctx.client.execute(&node, &cmds).await?;
        let now_ms = replies.first().and_then(|r| time_of(ctx, r, problems));
        for (key, pair) in keys.into_iter().zip(replies[1..].chunks(2)) {
            let oldest_age = match pair.get(1) {
                Some(Ok(v)) => {
                    problems.answered();
                    let ids = problems.decoded(ctx, reply::range_ids(v));
                    ids.and_then(|ids| {
                        let (id, now) = (ids.first()?, now_ms?);
                        id.is_plausible_time(now).then(|| age_seconds(now, id.ms))
                    })
                }
                Some(Err(e)) => {
                    problems.refused(e);
                    None
                }
                None => None,
            };
            let dl = match &pair[0] {
                Ok(v) => {
                    let Some(info) = problems.decoded(ctx, reply::stream_info(v)) else {
                        continue;
                    };
                    problems.answered();
                    DeadLetter {
                        length: info.length,
                        entries_added: info.entries_added,
                        oldest_age,
                    }
                }
                // Not created yet (the usual state): no dead letters, and
                // no error (a missing key is not counted as one).
                Err(e) if e.kind == ErrorKind::NoSuchKey => DeadLetter {
                    length: 0,
                    entries_added: counters.then_some(0),
                    oldest_age: None,
                },
                Err(e) => {
                    problems.refused(e);
                    tracing::debug!(redis_target = %ctx.target.name, stream = %safe_names::printable(key), error = %e, "dead-letter stream skipped");
                    continue;
                }
            };
            found.insert(key.to_vec(), dl);
        }
    }
    for (name, dl_key) in wanted {
        if let Some(s) = streams.get_mut(&name) {
            Arc::make_mut(s).dead_letter = found.get(&dl_key).copied();
        }
    }
    Ok(())
}

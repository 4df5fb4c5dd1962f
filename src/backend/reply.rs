//! Decoding of raw Redis replies into plain data.
//!
//! Replies are read by field name, never by position, in both RESP2 (flat
//! field/value arrays) and RESP3 (maps), ignoring fields we do not know (newer
//! servers append them). A field Redis sends as nil, or does not send at all
//! (older servers), decodes to `None`: unknown stays unknown.

use redis::Value;

use super::command::Command;
pub use crate::vocab::{
    ConsumerInfo, GroupInfo, GroupNacks, Idempotence, PendingEntry, PendingSummary, StreamInfo,
};
use crate::vocab::{SkipKind, StreamId};

/// A reply did not have the shape we expect.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unexpected reply to {command}: {detail}")]
pub struct DecodeError {
    /// The command whose reply failed to decode.
    pub command: &'static str,
    /// What was wrong.
    pub detail: String,
}

fn bad(command: &'static str, detail: impl Into<String>) -> DecodeError {
    DecodeError {
        command,
        detail: detail.into(),
    }
}

/// One of the decoders below, as a probe passes it along: the probes hand
/// replies to the decoders without seeing what a reply is made of.
pub type Decoder<T> = fn(&Value) -> Result<T, DecodeError>;

/// The bytes of a string-like value.
pub fn as_bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes()),
        Value::Okay => Some(b"OK"),
        _ => None,
    }
}

/// An integer, also when Redis sends it as a string (XPENDING does).
pub fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

fn is_nil(v: &Value) -> bool {
    matches!(v, Value::Nil)
}

fn as_array(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) | Value::Set(a) => Some(a),
        _ => None,
    }
}

/// `v` as an array, or a decode error for `command` saying what came instead.
fn array<'a>(command: &'static str, v: &'a Value) -> Result<&'a [Value], DecodeError> {
    as_array(v).ok_or_else(|| bad(command, format!("expected an array, got {}", kind(v))))
}

/// Field/value pairs of a RESP2 flat array or a RESP3 map.
fn fields<'a>(
    command: &'static str,
    v: &'a Value,
) -> Result<Vec<(&'a [u8], &'a Value)>, DecodeError> {
    match v {
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| {
                as_bytes(k)
                    .map(|k| (k, v))
                    .ok_or_else(|| bad(command, "non-string field name"))
            })
            .collect(),
        Value::Array(a) => {
            if a.len() % 2 != 0 {
                return Err(bad(command, "odd number of elements in a field list"));
            }
            a.chunks(2)
                .map(|c| {
                    as_bytes(&c[0])
                        .map(|k| (k, &c[1]))
                        .ok_or_else(|| bad(command, "non-string field name"))
                })
                .collect()
        }
        other => Err(bad(
            command,
            format!("expected a field list, got {}", kind(other)),
        )),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Int(_) => "integer",
        Value::BulkString(_) => "bulk string",
        Value::Array(_) => "array",
        Value::SimpleString(_) => "simple string",
        Value::Okay => "OK",
        Value::Map(_) => "map",
        Value::ServerError(_) => "error",
        _ => "other",
    }
}

fn count(command: &'static str, field: &str, v: &Value) -> Result<u64, DecodeError> {
    as_int(v)
        .and_then(|i| u64::try_from(i).ok())
        .ok_or_else(|| bad(command, format!("{field} is not a non-negative integer")))
}

/// A count that may be nil (unknown).
fn nullable_count(
    command: &'static str,
    field: &str,
    v: &Value,
) -> Result<Option<u64>, DecodeError> {
    if is_nil(v) {
        return Ok(None);
    }
    count(command, field, v).map(Some)
}

fn id(command: &'static str, field: &str, v: &Value) -> Result<StreamId, DecodeError> {
    as_bytes(v)
        .and_then(StreamId::parse)
        .ok_or_else(|| bad(command, format!("{field} is not a stream ID")))
}

/// An entry, or nil → the entry's ID. The connection hands entries on as
/// their IDs alone (`client::bounded`); `[id, [field, value, ...]]`, as
/// Redis sends them, decodes the same.
fn entry_id(
    command: &'static str,
    field: &str,
    v: &Value,
) -> Result<Option<StreamId>, DecodeError> {
    if is_nil(v) {
        return Ok(None);
    }
    if as_bytes(v).is_some() {
        return id(command, field, v).map(Some);
    }
    let parts = as_array(v).ok_or_else(|| bad(command, format!("{field} is not an entry")))?;
    let first = parts
        .first()
        .ok_or_else(|| bad(command, format!("{field} is empty")))?;
    id(command, field, first).map(Some)
}

/// Decodes `XINFO STREAM`.
///
/// # Errors
/// When a required field is missing or malformed.
pub fn stream_info(v: &Value) -> Result<StreamInfo, DecodeError> {
    const C: &str = "XINFO STREAM";
    let mut info = StreamInfo::default();
    let (mut length, mut last_generated) = (None, None);
    for (k, v) in fields(C, v)? {
        match k {
            b"length" => length = Some(count(C, "length", v)?),
            b"groups" => info.groups = count(C, "groups", v)?,
            b"last-generated-id" => last_generated = Some(id(C, "last-generated-id", v)?),
            b"first-entry" => info.first_entry_id = entry_id(C, "first-entry", v)?,
            b"last-entry" => info.last_entry_id = entry_id(C, "last-entry", v)?,
            b"entries-added" => info.entries_added = nullable_count(C, "entries-added", v)?,
            b"max-deleted-entry-id" => {
                info.max_deleted_entry_id = Some(id(C, "max-deleted-entry-id", v)?)
            }
            b"recorded-first-entry-id" => {
                info.recorded_first_entry_id = Some(id(C, "recorded-first-entry-id", v)?)
            }
            b"radix-tree-keys" => info.radix_tree_keys = nullable_count(C, "radix-tree-keys", v)?,
            b"radix-tree-nodes" => {
                info.radix_tree_nodes = nullable_count(C, "radix-tree-nodes", v)?
            }
            b"pids-tracked" => info.idempotence.producers = nullable_count(C, "pids-tracked", v)?,
            b"iids-tracked" => info.idempotence.ids = nullable_count(C, "iids-tracked", v)?,
            b"iids-added" => info.idempotence.ids_added = nullable_count(C, "iids-added", v)?,
            b"iids-duplicates" => {
                info.idempotence.duplicates = nullable_count(C, "iids-duplicates", v)?
            }
            _ => {}
        }
    }
    info.length = length.ok_or_else(|| bad(C, "no length field"))?;
    info.last_generated_id = last_generated.ok_or_else(|| bad(C, "no last-generated-id field"))?;
    Ok(info)
}

/// Decodes the `nacked-count` of each group of `XINFO STREAM … FULL`
/// (Redis 8.8+): pending entries released by `XNACK`, in the PEL without
/// an owner. A group whose reply has no such field (a server without
/// `XNACK`) decodes to `None`: unknown, not 0.
///
/// # Errors
/// When the reply is not a field list, or a group has no name.
pub fn nacked_counts(v: &Value) -> Result<Vec<GroupNacks>, DecodeError> {
    const C: &str = "XINFO STREAM FULL";
    let Some((_, groups)) = fields(C, v)?.into_iter().find(|(k, _)| *k == b"groups") else {
        return Ok(Vec::new());
    };
    array(C, groups)?
        .iter()
        .filter_map(|g| {
            let mut name = None;
            let mut nacked = None;
            let fields = match fields(C, g) {
                Ok(fields) => fields,
                Err(e) => return Some(Err(e)),
            };
            for (k, v) in fields {
                match k {
                    // A name too long to keep (a null): left out, as
                    // `XINFO GROUPS` leaves it out.
                    b"name" if is_nil(v) => return None,
                    b"name" => name = as_bytes(v).map(<[u8]>::to_vec),
                    b"nacked-count" => match count(C, "nacked-count", v) {
                        Ok(n) => nacked = Some(n),
                        Err(e) => return Some(Err(e)),
                    },
                    _ => {}
                }
            }
            Some(
                name.map(|name| GroupNacks { name, nacked })
                    .ok_or_else(|| bad(C, "group without a name")),
            )
        })
        .collect()
}

/// Decodes `XINFO GROUPS`.
///
/// # Errors
/// When a group lacks a required field.
pub fn groups(v: &Value) -> Result<Vec<GroupInfo>, DecodeError> {
    const C: &str = "XINFO GROUPS";
    let list = array(C, v)?;
    list.iter()
        .map(|g| {
            let mut out = GroupInfo::default();
            let (mut name, mut ld) = (None, None);
            for (k, v) in fields(C, g)? {
                match k {
                    b"name" => {
                        name = Some(
                            as_bytes(v)
                                .ok_or_else(|| bad(C, "name is not a string"))?
                                .to_vec(),
                        )
                    }
                    b"consumers" => out.consumers = count(C, "consumers", v)?,
                    b"pending" => out.pending = count(C, "pending", v)?,
                    b"last-delivered-id" => ld = Some(id(C, "last-delivered-id", v)?),
                    b"entries-read" => out.entries_read = nullable_count(C, "entries-read", v)?,
                    // Negative lag has been seen after XGROUP CREATE ... ENTRIESREAD
                    // with a too large value (redis#14257): no sound number.
                    b"lag" => {
                        out.lag = if is_nil(v) {
                            None
                        } else {
                            as_int(v).and_then(|i| u64::try_from(i).ok())
                        }
                    }
                    _ => {}
                }
            }
            out.name = name.ok_or_else(|| bad(C, "group without a name"))?;
            out.last_delivered_id = ld.ok_or_else(|| bad(C, "group without last-delivered-id"))?;
            Ok(out)
        })
        .collect()
}

/// Decodes `XINFO CONSUMERS`.
///
/// # Errors
/// When a consumer lacks a required field.
pub fn consumers(v: &Value) -> Result<Vec<ConsumerInfo>, DecodeError> {
    const C: &str = "XINFO CONSUMERS";
    let list = array(C, v)?;
    list.iter()
        .map(|c| {
            let mut out = ConsumerInfo::default();
            let mut name = None;
            for (k, v) in fields(C, c)? {
                match k {
                    b"name" => {
                        name = Some(
                            as_bytes(v)
                                .ok_or_else(|| bad(C, "name is not a string"))?
                                .to_vec(),
                        )
                    }
                    b"pending" => out.pending = count(C, "pending", v)?,
                    // Redis clamps idle at 0, but be tolerant of clock quirks.
                    b"idle" => {
                        out.idle_ms = as_int(v)
                            .ok_or_else(|| bad(C, "idle is not an integer"))?
                            .max(0) as u64
                    }
                    b"inactive" => match as_int(v) {
                        Some(i) if i >= 0 => out.inactive_ms = Some(i as u64),
                        Some(_) => out.never_active = true,
                        None if is_nil(v) => {}
                        None => return Err(bad(C, "inactive is not an integer")),
                    },
                    _ => {}
                }
            }
            out.name = name.ok_or_else(|| bad(C, "consumer without a name"))?;
            Ok(out)
        })
        .collect()
}

/// Decodes the `XPENDING` summary form.
///
/// # Errors
/// When the reply is not the four-element summary.
pub fn pending_summary(v: &Value) -> Result<PendingSummary, DecodeError> {
    const C: &str = "XPENDING";
    let parts = as_array(v)
        .filter(|a| a.len() == 4)
        .ok_or_else(|| bad(C, "expected a 4-element summary"))?;
    let min_id = if is_nil(&parts[1]) {
        None
    } else {
        Some(id(C, "min id", &parts[1])?)
    };
    let max_id = if is_nil(&parts[2]) {
        None
    } else {
        Some(id(C, "max id", &parts[2])?)
    };
    // The names are nulls as the connection hands them on (nothing reads
    // them); each pair's count must still be one.
    let holders = match &parts[3] {
        Value::Nil => 0,
        other => {
            let pairs = as_array(other).ok_or_else(|| bad(C, "consumer list is not an array"))?;
            for pair in pairs {
                let pair = as_array(pair)
                    .filter(|p| p.len() == 2)
                    .ok_or_else(|| bad(C, "consumer entry is not a pair"))?;
                count(C, "consumer count", &pair[1])?;
            }
            pairs.len() as u64
        }
    };
    Ok(PendingSummary {
        count: count(C, "count", &parts[0])?,
        min_id,
        max_id,
        holders,
    })
}

/// Decodes the extended `XPENDING` form.
///
/// # Errors
/// When a row is not `[id, consumer, idle, count]`.
pub fn pending_entries(v: &Value) -> Result<Vec<PendingEntry>, DecodeError> {
    const C: &str = "XPENDING";
    let rows = array(C, v)?;
    rows.iter()
        .map(|row| {
            let r = as_array(row)
                .filter(|r| r.len() >= 4)
                .ok_or_else(|| bad(C, "row is not [id, consumer, idle, count]"))?;
            // The holder as the connection hands it on: a null for a
            // consumer whose name is not kept, empty when released.
            let holder = match &r[1] {
                Value::Nil => None,
                v => Some(as_bytes(v).ok_or_else(|| bad(C, "consumer is not a string"))?),
            };
            Ok(PendingEntry {
                id: id(C, "id", &r[0])?,
                released: holder.is_some_and(<[u8]>::is_empty),
                holder: holder.filter(|h| !h.is_empty()).map(<[u8]>::to_vec),
                idle_ms: as_int(&r[2])
                    .ok_or_else(|| bad(C, "idle is not an integer"))?
                    .max(0) as u64,
                deliveries: count(C, "delivery count", &r[3])?,
            })
        })
        .collect()
}

/// Decodes an `XRANGE`/`XREVRANGE` reply into the entry IDs (the only part
/// of an entry the exporter reads; the connection never keeps the rest).
///
/// # Errors
/// When an entry has no ID.
pub fn range_ids(v: &Value) -> Result<Vec<StreamId>, DecodeError> {
    const C: &str = "XRANGE";
    let rows = array(C, v)?;
    rows.iter()
        .map(|row| entry_id(C, "entry", row)?.ok_or_else(|| bad(C, "nil entry")))
        .collect()
}

/// Decodes `TIME` into milliseconds since the epoch.
///
/// # Errors
/// When the reply is not `[seconds, microseconds]`.
pub fn time_ms(v: &Value) -> Result<u64, DecodeError> {
    const C: &str = "TIME";
    let parts = as_array(v)
        .filter(|a| a.len() == 2)
        .ok_or_else(|| bad(C, "expected [seconds, microseconds]"))?;
    let secs = count(C, "seconds", &parts[0])?;
    let micros = count(C, "microseconds", &parts[1])?;
    // A garbled reply must not overflow (a panic in debug builds, a wrong
    // clock in release builds).
    secs.checked_mul(1000)
        .and_then(|ms| ms.checked_add(micros / 1000))
        .ok_or_else(|| bad(C, "seconds out of range"))
}

/// One page of `SCAN`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanPage {
    /// Cursor for the next call; 0 when the iteration is complete.
    pub cursor: u64,
    /// Keys in this page.
    pub keys: Vec<Vec<u8>>,
}

/// Decodes a `SCAN` reply.
///
/// # Errors
/// When the reply is not `[cursor, [keys]]`.
pub fn scan_page(v: &Value) -> Result<ScanPage, DecodeError> {
    const C: &str = "SCAN";
    let parts = as_array(v)
        .filter(|a| a.len() == 2)
        .ok_or_else(|| bad(C, "expected [cursor, keys]"))?;
    let cursor = count(C, "cursor", &parts[0])?;
    let keys = as_array(&parts[1])
        .ok_or_else(|| bad(C, "keys are not an array"))?
        .iter()
        // A null is a key name longer than the connection keeps (see
        // client::bounded): not one the exporter can watch.
        .filter(|k| !is_nil(k))
        .map(|k| {
            as_bytes(k)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| bad(C, "key is not a string"))
        })
        .collect::<Result<_, _>>()?;
    Ok(ScanPage { cursor, keys })
}

/// Decodes an `INFO` section into `(field, value)` pairs.
///
/// # Errors
/// When the reply is not text.
pub fn info_fields(v: &Value) -> Result<Vec<(String, String)>, DecodeError> {
    let text = as_bytes(v).ok_or_else(|| bad("INFO", format!("expected text, got {}", kind(v))))?;
    Ok(String::from_utf8_lossy(text)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect())
}

/// Why `v` cannot be the reply to `cmd`, if it cannot: the wrong type at
/// the top, or elements of the wrong type. Checked on every reply as it
/// arrives, before anything reads it, so a reply that answers another
/// command (a server that skipped or added one) is caught at once and the
/// connection dropped. An error reply answers any command.
pub(crate) fn misfit(cmd: &Command, v: &Value) -> Option<String> {
    let fits = match (cmd, v) {
        (_, Value::ServerError(_)) => true,
        (Command::Ping, v) => matches!(v, Value::SimpleString(_) | Value::BulkString(_)),
        (
            Command::ClientSetname
            | Command::ClientTracking { .. }
            | Command::Asking
            | Command::Multi,
            v,
        ) => matches!(v, Value::Okay),
        (Command::ClientId, v) => matches!(v, Value::Int(_)),
        // `EXEC`'s array holds the queued commands' replies, checked by the
        // caller that knows them (`nil` when a watched key changed).
        (Command::Exec, v) => is_nil(v) || as_array(v).is_some(),
        (Command::InfoServer | Command::InfoMemory, v) => {
            matches!(v, Value::BulkString(_) | Value::VerbatimString { .. })
        }
        (Command::Time, v) => as_array(v).is_some_and(|a| a.len() == 2),
        (Command::Scan { .. }, v) => {
            as_array(v).is_some_and(|a| a.len() == 2 && as_array(&a[1]).is_some())
        }
        (Command::XinfoStream { .. } | Command::XinfoStreamNacks { .. }, v) => is_field_list(v),
        (Command::XinfoGroups { .. } | Command::XinfoConsumers { .. }, v) => {
            as_array(v).is_some_and(|a| a.iter().all(is_field_list))
        }
        (Command::XpendingSummary { .. }, v) => {
            as_array(v).is_some_and(|a| a.len() == 4 && matches!(a[0], Value::Int(_)))
        }
        (Command::XpendingRange { .. }, v) => {
            as_array(v).is_some_and(|a| a.iter().all(|r| as_array(r).is_some()))
        }
        (Command::Xrange { .. } | Command::Xrevrange { .. }, v) => as_array(v).is_some_and(|a| {
            a.iter()
                .all(|e| as_bytes(e).is_some() || as_array(e).is_some())
        }),
        (Command::ClusterShards | Command::ClusterSlots, v) => as_array(v).is_some(),
        (Command::SentinelMasterAddr { .. }, v) => is_nil(v) || as_array(v).is_some(),
        // Sent on a subscribed connection, never in a pipeline.
        (Command::Subscribe { .. } | Command::Unsubscribe { .. }, _) => true,
    };
    (!fits).then(|| {
        format!(
            "a reply to {} that cannot answer it ({})",
            cmd.label(),
            kind(v)
        )
    })
}

/// Why `values` cannot be the replies to the pipeline `cmds`, if they
/// cannot (see [`misfit`]). Commands queued between `MULTI` and `EXEC` are
/// answered `QUEUED` (or refused at once), and `EXEC` with their replies;
/// after a `MULTI` the server refused, they ran as they came.
pub(crate) fn pipeline_misfit(cmds: &[Command], values: &[Value]) -> Option<String> {
    let mut queued: Option<Vec<&Command>> = None;
    for (cmd, v) in cmds.iter().zip(values) {
        match (cmd, queued.as_mut()) {
            (Command::Multi, _) => {
                if let Some(why) = misfit(cmd, v) {
                    return Some(why);
                }
                queued = matches!(v, Value::Okay).then(Vec::new);
            }
            (Command::Exec, Some(_)) => {
                let inside = queued.take().unwrap_or_default();
                if let Some(items) = as_array(v) {
                    if items.len() != inside.len() {
                        return Some(format!(
                            "EXEC answered {} replies for {} queued commands",
                            items.len(),
                            inside.len()
                        ));
                    }
                    if let Some(why) = inside
                        .iter()
                        .zip(items)
                        .find_map(|(c, item)| misfit(c, item))
                    {
                        return Some(why);
                    }
                } else if let Some(why) = misfit(cmd, v) {
                    return Some(why);
                }
            }
            (_, Some(inside)) => {
                let answered = matches!(v, Value::ServerError(_))
                    || matches!(v, Value::SimpleString(s) if s == "QUEUED");
                if !answered {
                    return Some(format!(
                        "a reply to {} queued in a transaction that is not QUEUED ({})",
                        cmd.label(),
                        kind(v)
                    ));
                }
                inside.push(cmd);
            }
            (_, None) => {
                if let Some(why) = misfit(cmd, v) {
                    return Some(why);
                }
            }
        }
    }
    None
}

/// A RESP2 field/value array or a RESP3 map.
fn is_field_list(v: &Value) -> bool {
    match v {
        Value::Map(_) => true,
        Value::Array(a) => a.len() % 2 == 0,
        _ => false,
    }
}

/// Leaves out of the reply to `cmd` the items whose name the connection did
/// not keep (longer than it keeps: a null in its place, see
/// `client::bounded`), and says how many of what kind: the groups of
/// `XINFO GROUPS`, the consumers of `XINFO CONSUMERS` and the keys of
/// `SCAN`. The other items of the reply stay.
pub(crate) fn prune(cmd: &Command, v: &mut Value) -> Option<(SkipKind, u64)> {
    let (kind, list) = match (cmd, v) {
        (Command::XinfoGroups { .. }, Value::Array(list)) => (SkipKind::Group, list),
        (Command::XinfoConsumers { .. }, Value::Array(list)) => (SkipKind::Consumer, list),
        (Command::Scan { .. }, Value::Array(parts)) if parts.len() == 2 => match &mut parts[1] {
            Value::Array(keys) => {
                let before = keys.len();
                keys.retain(|k| !is_nil(k));
                return skipped(SkipKind::Key, before - keys.len());
            }
            _ => return None,
        },
        _ => return None,
    };
    let before = list.len();
    list.retain(|item| {
        !fields("", item).is_ok_and(|f| f.iter().any(|(k, v)| *k == b"name" && is_nil(v)))
    });
    skipped(kind, before - list.len())
}

fn skipped(kind: SkipKind, n: usize) -> Option<(SkipKind, u64)> {
    (n > 0).then_some((kind, n as u64))
}

#[cfg(test)]
pub(crate) mod tests;

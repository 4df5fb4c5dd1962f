//! Redis Cluster key slots and the slot → primary map, decoded from
//! `CLUSTER SHARDS` (7.0+) or `CLUSTER SLOTS`.

use std::sync::Arc;

use redis::Value;

use super::reply::{DecodeError, as_bytes, as_int};

/// Slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`, honouring `{hash tags}`.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS
}

/// Which primary serves which slots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotMap {
    /// `(first, last, primary)`, sorted by `first`.
    ranges: Vec<(u16, u16, Arc<str>)>,
}

fn bad(detail: impl Into<String>) -> DecodeError {
    DecodeError {
        command: "CLUSTER",
        detail: detail.into(),
    }
}

impl SlotMap {
    /// True when no slot is assigned.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The primary serving `slot`.
    pub fn owner(&self, slot: u16) -> Option<&Arc<str>> {
        let i = self.ranges.partition_point(|(first, _, _)| *first <= slot);
        let (first, last, node) = self.ranges.get(i.checked_sub(1)?)?;
        (*first <= slot && slot <= *last).then_some(node)
    }

    /// Every primary that serves at least one slot, sorted.
    pub fn primaries(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = self.ranges.iter().map(|(_, _, n)| n.clone()).collect();
        out.sort();
        out.dedup();
        out
    }

    fn finish(mut ranges: Vec<(u16, u16, Arc<str>)>) -> Self {
        ranges.sort_by_key(|r| r.0);
        SlotMap { ranges }
    }

    /// Decodes `CLUSTER SLOTS`: `[[first, last, [ip, port, id, ...], replicas...], ...]`.
    ///
    /// # Errors
    /// When the reply has another shape.
    pub fn from_slots(v: &Value, _tls: bool) -> Result<SlotMap, DecodeError> {
        let Value::Array(rows) = v else {
            return Err(bad("CLUSTER SLOTS is not an array"));
        };
        let mut ranges = Vec::new();
        for row in rows {
            let Value::Array(parts) = row else {
                return Err(bad("slot range is not an array"));
            };
            if parts.len() < 3 {
                return Err(bad("slot range without a primary"));
            }
            let first = as_int(&parts[0]).ok_or_else(|| bad("slot is not an integer"))?;
            let last = as_int(&parts[1]).ok_or_else(|| bad("slot is not an integer"))?;
            let Value::Array(primary) = &parts[2] else {
                return Err(bad("primary is not an array"));
            };
            let host = primary
                .first()
                .and_then(as_bytes)
                .ok_or_else(|| bad("primary without a host"))?;
            let port = primary
                .get(1)
                .and_then(as_int)
                .ok_or_else(|| bad("primary without a port"))?;
            ranges.push((slot(first)?, slot(last)?, addr(host, port)));
        }
        Ok(SlotMap::finish(ranges))
    }

    /// Decodes `CLUSTER SHARDS`: a list of `{slots: [a, b, ...], nodes: [{ip,
    /// port, tls-port, role, health, ...}]}`; the healthy master of each shard
    /// serves its slots.
    ///
    /// # Errors
    /// When the reply has another shape.
    pub fn from_shards(v: &Value, tls: bool) -> Result<SlotMap, DecodeError> {
        let Value::Array(shards) = v else {
            return Err(bad("CLUSTER SHARDS is not an array"));
        };
        let mut ranges = Vec::new();
        for shard in shards {
            let fields = pairs(shard)?;
            let slots = fields.iter().find(|(k, _)| *k == b"slots").map(|(_, v)| *v);
            let nodes = fields.iter().find(|(k, _)| *k == b"nodes").map(|(_, v)| *v);
            let (Some(Value::Array(slots)), Some(Value::Array(nodes))) = (slots, nodes) else {
                return Err(bad("shard without slots or nodes"));
            };
            let mut primary = None;
            for node in nodes {
                let f = pairs(node)?;
                let get = |name: &[u8]| f.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
                let role = get(b"role").and_then(as_bytes);
                let health = get(b"health").and_then(as_bytes);
                if role == Some(b"master".as_slice()) && health != Some(b"failed".as_slice()) {
                    let host = get(b"ip").or_else(|| get(b"endpoint")).and_then(as_bytes);
                    let port = if tls { get(b"tls-port") } else { get(b"port") }.and_then(as_int);
                    if let (Some(h), Some(p)) = (host, port) {
                        primary = Some(addr(h, p));
                    }
                }
            }
            let Some(primary) = primary else { continue };
            for pair in slots.chunks(2) {
                if let [a, b] = pair {
                    let first = as_int(a).ok_or_else(|| bad("slot is not an integer"))?;
                    let last = as_int(b).ok_or_else(|| bad("slot is not an integer"))?;
                    ranges.push((slot(first)?, slot(last)?, primary.clone()));
                }
            }
        }
        Ok(SlotMap::finish(ranges))
    }
}

fn pairs(v: &Value) -> Result<Vec<(&[u8], &Value)>, DecodeError> {
    match v {
        Value::Array(a) => a
            .chunks(2)
            .map(|c| match c {
                [k, v] => as_bytes(k)
                    .map(|k| (k, v))
                    .ok_or_else(|| bad("field name is not a string")),
                _ => Err(bad("odd field list")),
            })
            .collect(),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| {
                as_bytes(k)
                    .map(|k| (k, v))
                    .ok_or_else(|| bad("field name is not a string"))
            })
            .collect(),
        _ => Err(bad("expected a field list")),
    }
}

fn slot(v: i64) -> Result<u16, DecodeError> {
    u16::try_from(v)
        .ok()
        .filter(|s| *s < SLOTS)
        .ok_or_else(|| bad(format!("slot {v} out of range")))
}

fn addr(host: &[u8], port: i64) -> Arc<str> {
    format!("{}:{port}", String::from_utf8_lossy(host)).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on a real server.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"123456789"), 0x31C3 % SLOTS);
    }

    #[test]
    fn slot_map_lookup() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let v = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                Value::Array(vec![b("127.0.0.1"), Value::Int(7000), b("id1")]),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                Value::Array(vec![b("127.0.0.1"), Value::Int(7001), b("id2")]),
            ]),
        ]);
        let map = SlotMap::from_slots(&v, false).unwrap();
        assert_eq!(map.owner(0).map(|s| &**s), Some("127.0.0.1:7000"));
        assert_eq!(map.owner(5461).map(|s| &**s), Some("127.0.0.1:7001"));
        assert_eq!(map.primaries().len(), 2);
    }
}

//! Redis Cluster key slots and the slot → primary map, decoded from
//! `CLUSTER SHARDS` (7.0+) or `CLUSTER SLOTS`.

use std::sync::Arc;

use redis::Value;

use super::reply::{DecodeError, as_bytes, as_int};

/// Slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

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
pub(crate) fn key_slot(key: &[u8]) -> u16 {
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
pub(crate) struct SlotMap {
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
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The primary serving `slot`.
    pub(crate) fn owner(&self, slot: u16) -> Option<&Arc<str>> {
        let i = self.ranges.partition_point(|(first, _, _)| *first <= slot);
        let (first, last, node) = self.ranges.get(i.checked_sub(1)?)?;
        (*first <= slot && slot <= *last).then_some(node)
    }

    /// Every primary that serves at least one slot, sorted.
    pub(crate) fn primaries(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = self.ranges.iter().map(|(_, _, n)| n.clone()).collect();
        out.sort();
        out.dedup();
        out
    }

    fn finish(mut ranges: Vec<(u16, u16, Arc<str>)>) -> Self {
        ranges.sort_by_key(|r| r.0);
        SlotMap { ranges }
    }

    /// Decodes `CLUSTER SLOTS`: `[[first, last, [endpoint, port, id,
    /// {metadata}], replicas...], ...]`. The port is the one for the
    /// connection's kind (TLS or not), as the server chose it. An endpoint
    /// of `?` or NULL (the node does not know it) falls back to the
    /// metadata's `ip`, then to `asked_host`, the host that answered.
    ///
    /// # Errors
    /// When the reply has another shape.
    pub(crate) fn from_slots(v: &Value, asked_host: &str) -> Result<SlotMap, DecodeError> {
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
            let port = primary
                .get(1)
                .and_then(as_int)
                .ok_or_else(|| bad("primary without a port"))?;
            let metadata_ip = match primary.get(3) {
                Some(meta @ (Value::Array(_) | Value::Map(_))) => pairs(meta)?
                    .into_iter()
                    .find(|(k, _)| *k == b"ip")
                    .and_then(|(_, v)| as_bytes(v)),
                _ => None,
            };
            let host = primary
                .first()
                .and_then(as_bytes)
                .filter(|h| usable(h))
                .or(metadata_ip.filter(|h| usable(h)))
                .unwrap_or(asked_host.as_bytes());
            ranges.push((slot(first)?, slot(last)?, addr(host, port)));
        }
        Ok(SlotMap::finish(ranges))
    }

    /// Decodes `CLUSTER SHARDS`: a list of `{slots: [a, b, ...], nodes: [{ip,
    /// endpoint, port, tls-port, role, health, ...}]}`; the healthy master
    /// of each shard serves its slots. The host is the preferred
    /// `endpoint` (what `MOVED` names), else `ip`, else `asked_host`; the
    /// port is `tls-port` for TLS targets.
    ///
    /// # Errors
    /// When the reply has another shape.
    pub(crate) fn from_shards(
        v: &Value,
        tls: bool,
        asked_host: &str,
    ) -> Result<SlotMap, DecodeError> {
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
                    let host = get(b"endpoint")
                        .and_then(as_bytes)
                        .filter(|h| usable(h))
                        .or_else(|| get(b"ip").and_then(as_bytes).filter(|h| usable(h)))
                        .unwrap_or(asked_host.as_bytes());
                    let port = if tls { get(b"tls-port") } else { get(b"port") }.and_then(as_int);
                    if let Some(p) = port {
                        primary = Some(addr(host, p));
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

/// An endpoint a client can connect to: not empty and not `?` (unknown).
fn usable(host: &[u8]) -> bool {
    !host.is_empty() && host != b"?"
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
        let map = SlotMap::from_slots(&v, "127.0.0.1").unwrap();
        assert_eq!(map.owner(0).map(|s| &**s), Some("127.0.0.1:7000"));
        assert_eq!(map.owner(5461).map(|s| &**s), Some("127.0.0.1:7001"));
        assert_eq!(map.primaries().len(), 2);
    }

    /// Replies captured from live loopback clusters (`CLUSTER SHARDS` and
    /// `CLUSTER SLOTS` of Redis 7.0.15 after slot 13513 moved from :27003
    /// to :27001 and a replica of :27001 joined; Redis 6.2.14, which has no
    /// `CLUSTER SHARDS`; Valkey 9.1.2), as RESP2 bytes.
    const SHARDS_70: &[u8] = b"*3\r\n*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:5460\r\n:13513\r\n:13513\r\n$5\r\n\
          nodes\r\n*2\r\n*14\r\n$2\r\nid\r\n$40\r\n039e6678cda1828afdb25211b1fffcb9c88e37c2\r\n\
          $4\r\nport\r\n:27001\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n\
          $9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n\
          :0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n*14\r\n$2\r\nid\r\n$40\r\n37c0ac8d68816d33fb8f63f5564cd532f60e59f4\r\n\
          $4\r\nport\r\n:27004\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n\
          $9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n$18\r\nreplication-offset\r\n\
          :0\r\n$6\r\nhealth\r\n$7\r\nloading\r\n*4\r\n$5\r\nslots\r\n*4\r\n:10923\r\n\
          :13512\r\n:13514\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n\
          dd801a8aff3efc17dee443fc5cff9135db595e2a\r\n$4\r\nport\r\n:27003\r\n$2\r\n\
          ip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n\
          $6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\n\
          online\r\n*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n\
          *1\r\n*14\r\n$2\r\nid\r\n$40\r\n36546309ed82c4ae0570b127a7d5716061c1f6ea\r\n\
          $4\r\nport\r\n:27002\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n\
          $9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n\
          :0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";
    const SLOTS_70: &[u8] = b"*5\r\n*3\r\n:0\r\n:5460\r\n*4\r\n$9\r\n127.0.0.1\r\n:27001\r\n$40\r\n039e6678cda1828afdb25211b1fffcb9c88e37c2\r\n\
          *0\r\n*3\r\n:5461\r\n:10922\r\n*4\r\n$9\r\n127.0.0.1\r\n:27002\r\n$40\r\n\
          36546309ed82c4ae0570b127a7d5716061c1f6ea\r\n*0\r\n*3\r\n:10923\r\n:13512\r\n\
          *4\r\n$9\r\n127.0.0.1\r\n:27003\r\n$40\r\ndd801a8aff3efc17dee443fc5cff9135db595e2a\r\n\
          *0\r\n*3\r\n:13513\r\n:13513\r\n*4\r\n$9\r\n127.0.0.1\r\n:27001\r\n$40\r\n\
          039e6678cda1828afdb25211b1fffcb9c88e37c2\r\n*0\r\n*3\r\n:13514\r\n:16383\r\n\
          *4\r\n$9\r\n127.0.0.1\r\n:27003\r\n$40\r\ndd801a8aff3efc17dee443fc5cff9135db595e2a\r\n\
          *0\r\n";
    const SHARDS_62: &[u8] =
        b"-ERR Unknown subcommand or wrong number of arguments for 'SHARDS'. Try CLUSTER HELP.\r\n";
    const SLOTS_62: &[u8] = b"*3\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:27011\r\n$40\r\na655be1ba45c55e577d376ab0c19c2402e87fa8a\r\n\
          *3\r\n:5461\r\n:10922\r\n*3\r\n$9\r\n127.0.0.1\r\n:27012\r\n$40\r\ne7ff70be299232d88e34a9e2c5b69f24b0d578fb\r\n\
          *3\r\n:10923\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:27013\r\n$40\r\nbf62eb3625dcd93ca00e3c8f31ef805265892407\r\n";
    const SHARDS_VALKEY9: &[u8] = b"*3\r\n*6\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*1\r\n\
          *14\r\n$2\r\nid\r\n$40\r\n0f9bdc525e701e92270f48cb0c451e93cd983f90\r\n$4\r\n\
          port\r\n:27022\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n\
          127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n\
          :0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n$2\r\nid\r\n$40\r\n21e928bf0607273218131e5f724b6ccf56f70d4c\r\n\
          *6\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\n\
          id\r\n$40\r\n2db0b88dd16f20dabeb4588f4cb03d268b9882dc\r\n$4\r\nport\r\n\
          :27021\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n\
          $4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\n\
          health\r\n$6\r\nonline\r\n$2\r\nid\r\n$40\r\n5bb8cb1ecd95e04d2f76287304fe4d329e73d7da\r\n\
          *6\r\n$5\r\nslots\r\n*2\r\n:10923\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*14\r\n\
          $2\r\nid\r\n$40\r\n68876b70654e96a72144b626c1e36cc70bfe5d00\r\n$4\r\nport\r\n\
          :27023\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n\
          $4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\n\
          health\r\n$6\r\nonline\r\n$2\r\nid\r\n$40\r\nb00b908a9d3dc507e0cefae9476ea67c178acf58\r\n";

    fn parse(bytes: &[u8]) -> Value {
        redis::parse_redis_value(bytes).unwrap()
    }

    fn owners(map: &SlotMap) -> Vec<(u16, u16, &str)> {
        map.ranges.iter().map(|(a, b, n)| (*a, *b, &**n)).collect()
    }

    #[test]
    fn real_redis_7_0_shards_and_slots_agree() {
        let shards = SlotMap::from_shards(&parse(SHARDS_70), false, "127.0.0.1").unwrap();
        let slots = SlotMap::from_slots(&parse(SLOTS_70), "127.0.0.1").unwrap();
        let want = vec![
            (0, 5460, "127.0.0.1:27001"),
            (5461, 10922, "127.0.0.1:27002"),
            (10923, 13512, "127.0.0.1:27003"),
            (13513, 13513, "127.0.0.1:27001"),
            (13514, 16383, "127.0.0.1:27003"),
        ];
        assert_eq!(owners(&shards), want);
        assert_eq!(shards, slots);
        // The replica (:27004) is never a primary to ask.
        assert_eq!(
            shards.primaries().iter().map(|n| &**n).collect::<Vec<_>>(),
            ["127.0.0.1:27001", "127.0.0.1:27002", "127.0.0.1:27003"]
        );
        assert_eq!(shards.owner(13513).map(|n| &**n), Some("127.0.0.1:27001"));
        assert_eq!(shards.owner(13512).map(|n| &**n), Some("127.0.0.1:27003"));
        assert_eq!(shards.owner(13514).map(|n| &**n), Some("127.0.0.1:27003"));
        // No TLS port is advertised: no primary for a TLS target.
        assert!(
            SlotMap::from_shards(&parse(SHARDS_70), true, "127.0.0.1")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn real_redis_6_2_has_only_cluster_slots() {
        assert!(matches!(parse(SHARDS_62), Value::ServerError(_)));
        let map = SlotMap::from_slots(&parse(SLOTS_62), "127.0.0.1").unwrap();
        assert_eq!(
            owners(&map),
            vec![
                (0, 5460, "127.0.0.1:27011"),
                (5461, 10922, "127.0.0.1:27012"),
                (10923, 16383, "127.0.0.1:27013"),
            ]
        );
    }

    #[test]
    fn real_valkey_9_shards() {
        // Valkey adds the shard's own `id` beside `slots` and `nodes`.
        let map = SlotMap::from_shards(&parse(SHARDS_VALKEY9), false, "127.0.0.1").unwrap();
        assert_eq!(
            owners(&map),
            vec![
                (0, 5460, "127.0.0.1:27021"),
                (5461, 10922, "127.0.0.1:27022"),
                (10923, 16383, "127.0.0.1:27023"),
            ]
        );
    }

    #[test]
    fn unknown_endpoints_fall_back() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        // CLUSTER SLOTS: `?` with the ip in the metadata; NULL (the node
        // that answered).
        let v = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(100),
                Value::Array(vec![
                    b("?"),
                    Value::Int(7000),
                    b("id1"),
                    Value::Array(vec![b("ip"), b("10.0.0.7")]),
                ]),
            ]),
            Value::Array(vec![
                Value::Int(101),
                Value::Int(16383),
                Value::Array(vec![Value::Nil, Value::Int(7001), b("id2")]),
            ]),
        ]);
        let map = SlotMap::from_slots(&v, "10.0.0.9").unwrap();
        assert_eq!(
            owners(&map),
            vec![(0, 100, "10.0.0.7:7000"), (101, 16383, "10.0.0.9:7001")]
        );
        // CLUSTER SHARDS: the endpoint (a hostname) wins over the ip, as in
        // MOVED; a failed master is skipped for the healthy one.
        let node = |endpoint: &str, port: i64, role: &str, health: &str| {
            Value::Array(vec![
                b("port"),
                Value::Int(port),
                b("ip"),
                b("10.0.0.1"),
                b("endpoint"),
                b(endpoint),
                b("role"),
                b(role),
                b("health"),
                b(health),
            ])
        };
        let v = Value::Array(vec![Value::Array(vec![
            b("slots"),
            Value::Array(vec![Value::Int(0), Value::Int(16383)]),
            b("nodes"),
            Value::Array(vec![
                node("old.example", 7000, "master", "failed"),
                node("new.example", 7001, "master", "online"),
                node("?", 7002, "replica", "online"),
            ]),
        ])]);
        let map = SlotMap::from_shards(&v, false, "10.0.0.9").unwrap();
        assert_eq!(owners(&map), vec![(0, 16383, "new.example:7001")]);
    }
}

//! The capability claims of `common::Server`, which the other tests use to
//! choose their per-server expectations, checked on each real server: if a
//! binary changes (a Debian point release, a newer wheel), this fails first
//! and says which claim no longer holds. Which commands a server has is not
//! a claim but asked of the server (`common::Capabilities`): here it is
//! checked against what the commands do, and printed.

use crate::common;

use std::collections::BTreeMap;

use common::*;

fn text(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(i) => i.to_string(),
        redis::Value::Nil => "nil".to_string(),
        other => format!("{other:?}"),
    }
}

/// A flat RESP2 field/value reply (XINFO) as a map of printed values.
fn fields(v: &redis::Value) -> BTreeMap<String, String> {
    let redis::Value::Array(items) = v else {
        panic!("not a field array: {v:?}");
    };
    items
        .chunks(2)
        .map(|kv| (text(&kv[0]), text(&kv[1])))
        .collect()
}

/// The first element of an array reply (XINFO GROUPS / CONSUMERS).
fn first(v: redis::Value) -> redis::Value {
    match v {
        redis::Value::Array(mut items) if !items.is_empty() => items.remove(0),
        other => panic!("empty reply: {other:?}"),
    }
}

/// Whether `COMMAND INFO name` knows the command (nil when it does not).
fn knows(server: &RedisServer, name: &str) -> bool {
    match server.cmd(&["COMMAND", "INFO", name]) {
        redis::Value::Array(items) => items.first().is_some_and(|i| *i != redis::Value::Nil),
        other => panic!("COMMAND INFO {name}: {other:?}"),
    }
}

fn capabilities(kind: Server) {
    let server = RedisServer::start(kind);

    // Version, as the exporter reads it from INFO server.
    let info = text(&server.cmd(&["INFO", "server"]));
    let field = if kind.server_label() == "valkey" {
        "valkey_version:"
    } else {
        "redis_version:"
    };
    let reported = info
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("{kind:?}: no {field} in INFO server"))
        .trim()
        .to_string();
    assert_eq!(reported, kind.version(), "{kind:?}");

    // Lag fields, inactive, and the lag algorithm: 10 entries, a group
    // that read 2, then a trim to 4 entries that overtakes it.
    for i in 1..=10 {
        server.cmd(&["XADD", "s", &format!("{i}-0"), "f", "v"]);
    }
    server.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    server.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    server.cmd(&["XTRIM", "s", "MAXLEN", "4"]);
    let stream = fields(&server.cmd(&["XINFO", "STREAM", "s"]));
    let group = fields(&first(server.cmd(&["XINFO", "GROUPS", "s"])));
    let consumer = fields(&first(server.cmd(&["XINFO", "CONSUMERS", "s", "g"])));
    assert_eq!(
        stream.contains_key("entries-added"),
        kind.has_lag(),
        "{kind:?} entries-added: {stream:?}"
    );
    assert_eq!(
        group.contains_key("entries-read"),
        kind.has_lag(),
        "{kind:?} entries-read: {group:?}"
    );
    assert_eq!(
        group.contains_key("lag"),
        kind.has_lag(),
        "{kind:?} lag: {group:?}"
    );
    assert_eq!(
        consumer.contains_key("inactive"),
        kind.reports_inactive(),
        "{kind:?} inactive: {consumer:?}"
    );
    if kind.has_lag() {
        assert_eq!(group["entries-read"], "2", "{kind:?}");
        let expected = if kind.old_lag_algorithm() { "8" } else { "4" };
        assert_eq!(
            group["lag"], expected,
            "{kind:?}: lag after a trim past the group (truth 4, old algorithm 8)"
        );
    } else {
        assert!(!kind.old_lag_algorithm(), "{kind:?} reports no lag at all");
    }

    // The stream commands that not every server has, as the tests ask for
    // them (common::Capabilities, asked of the server): each claim agrees
    // with what the command does.
    let caps = Capabilities::of(&server);
    println!("CAPABILITIES | {kind:?} {} | {caps:?}", kind.version());
    assert_eq!(caps, kind.capabilities(), "{kind:?}: asked twice");
    let refused = |args: &[&str]| -> Option<String> {
        let mut cmd = redis::cmd(args[0]);
        cmd.arg(&args[1..]);
        cmd.query::<redis::Value>(&mut server.conn())
            .err()
            .map(|e| e.to_string().to_lowercase())
    };
    let unknown = |e: Option<String>| e.is_some_and(|e| e.contains("unknown command"));
    // Entries 3 and 4 were trimmed: the commands, where they exist, answer
    // -1 for each and change nothing.
    let xdelex = refused(&["XDELEX", "s", "IDS", "1", "3-0"]);
    assert_eq!(caps.xdelex, xdelex.is_none(), "{kind:?} XDELEX: {xdelex:?}");
    assert!(caps.xdelex || unknown(xdelex), "{kind:?}");
    let xackdel = refused(&["XACKDEL", "s", "g", "IDS", "1", "4-0"]);
    assert_eq!(
        caps.xackdel,
        xackdel.is_none(),
        "{kind:?} XACKDEL: {xackdel:?}"
    );
    assert!(caps.xackdel || unknown(xackdel), "{kind:?}");
    assert_eq!(knows(&server, "xcfgset"), caps.idmp, "{kind:?} XCFGSET");
    let trim = refused(&["XTRIM", "s", "MAXLEN", "100", "KEEPREF"]);
    assert_eq!(
        caps.trim_refs,
        trim.is_none(),
        "{kind:?} XTRIM KEEPREF: {trim:?}"
    );
    for f in [
        "idmp-duration",
        "idmp-maxsize",
        "pids-tracked",
        "iids-tracked",
        "iids-added",
        "iids-duplicates",
    ] {
        assert_eq!(
            stream.contains_key(f),
            caps.idmp,
            "{kind:?} {f} on a stream without XCFGSET: {stream:?}"
        );
    }
    if caps.idmp {
        let a = text(&server.cmd(&["XADD", "idmp", "IDMP", "p", "i1", "*", "f", "v"]));
        let b = text(&server.cmd(&["XADD", "idmp", "IDMP", "p", "i1", "*", "f", "v"]));
        assert_eq!(a, b, "a duplicate IDMP add returns the first entry's ID");
        let idmp = fields(&server.cmd(&["XINFO", "STREAM", "idmp"]));
        assert_eq!(idmp["length"], "1", "{idmp:?}");
        assert_eq!(idmp["pids-tracked"], "1", "{idmp:?}");
        assert_eq!(idmp["iids-added"], "1", "{idmp:?}");
        assert_eq!(idmp["iids-duplicates"], "1", "{idmp:?}");
    }
    // CLAIM: another consumer takes the entries idle for 0 ms first.
    server.cmd(&["XADD", "claims", "1-0", "f", "v"]);
    server.cmd(&["XGROUP", "CREATE", "claims", "g", "0"]);
    server.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "a",
        "COUNT",
        "1",
        "STREAMS",
        "claims",
        ">",
    ]);
    let claim = redis::cmd("XREADGROUP")
        .arg(&[
            "GROUP", "g", "b", "COUNT", "1", "CLAIM", "0", "STREAMS", "claims", ">",
        ])
        .query::<redis::Value>(&mut server.conn());
    assert_eq!(
        caps.xreadgroup_claim,
        claim.is_ok(),
        "{kind:?} CLAIM: {claim:?}"
    );
    if caps.xreadgroup_claim {
        let owner = fields(&first(server.cmd(&["XINFO", "CONSUMERS", "claims", "g"])));
        assert_eq!(owner["name"], "a", "{kind:?}");
        assert_eq!(owner["pending"], "0", "{kind:?}: b claimed a's entry");
    }

    // Cluster discovery and ACL key permissions.
    assert_eq!(
        knows(&server, "cluster|shards"),
        kind.has_cluster_shards(),
        "{kind:?} CLUSTER SHARDS"
    );
    let mut c = server.conn();
    let acl: redis::RedisResult<String> = redis::cmd("ACL")
        .arg(&["SETUSER", "probe", "%R~*"])
        .query(&mut c);
    assert_eq!(
        acl.is_ok(),
        kind.has_acl_key_permissions(),
        "{kind:?} ACL %R~*: {acl:?}"
    );
}

per_server!(sync: capabilities);

/// `ALL_SERVERS` lists every variant once (a new variant fails to compile
/// here until it is listed).
#[test]
fn all_servers_lists_every_variant_once() {
    let mut seen = [false; 4];
    for kind in ALL_SERVERS {
        let i = match kind {
            Server::Redis62 => 0,
            Server::Redis70 => 1,
            Server::Valkey9 => 2,
            Server::Redis8 => 3,
        };
        assert!(!seen[i], "{kind:?} listed twice");
        seen[i] = true;
    }
    assert!(seen.iter().all(|s| *s), "{seen:?}");
}

/// The fixture never takes another process's server for the one it started:
/// a second server on a port the first holds cannot bind it, and the PING
/// the first answers is not its readiness. Every server the suite runs against.
#[test]
fn a_server_on_a_taken_port_is_never_mistaken_for_ours() {
    for kind in ALL_SERVERS {
        let first = RedisServer::start(kind);
        let _: () = redis::cmd("SET")
            .arg("owner")
            .arg("first")
            .query(&mut first.conn())
            .unwrap();
        let second = std::panic::catch_unwind(|| RedisServer::start_on(kind, first.port));
        assert!(
            second.is_err(),
            "{kind:?}: a server 'started' on port {} that the first one holds",
            first.port
        );
        let owner: String = redis::cmd("GET")
            .arg("owner")
            .query(&mut first.conn())
            .unwrap();
        assert_eq!(owner, "first", "{kind:?}");
    }
}

//! Info: `INFO server` and `INFO memory` of every primary, for the target's
//! info family ([`TARGET_INFO`](crate::metrics::catalog::TARGET_INFO)) and
//! the memory gauges, each node's lag arithmetic (from its own version), and
//! whether the server is the one the loss ledgers were kept against (its
//! `run_id`). Valkey reports `redis_version` 7.2.4 for compatibility, so its
//! own version is read from `valkey_version`.

use std::collections::BTreeMap;

use super::context::{ProbeContext, ProbeError, Problems};
use super::state::RunId;
use crate::backend::{Command, reply};
use crate::lag::Arithmetic;
use crate::loss::ReadCounter;
use crate::snapshot::ServerInfo;
use crate::vocab::ErrorKind;
use crate::vocab::ProbeKind;

/// Runs the info probe.
///
/// # Errors
/// When a primary cannot be reached.
pub async fn run(ctx: &ProbeContext) -> Result<(), ProbeError> {
    let mut problems = Problems::default();
    let mut merged: Option<ServerInfo> = None;
    let mut arithmetic_by_node = BTreeMap::new();
    let mut counter_by_node = BTreeMap::new();
    let mut run_ids = Vec::new();
    for node in ctx.client.nodes().await? {
        let replies = ctx
            .client
            .execute(&node, &[Command::InfoServer, Command::InfoMemory])
            .await?;
        let mut fields = Vec::new();
        let mut run_id = RunId::NotNow;
        for (i, r) in replies.into_iter().enumerate() {
            match r {
                Ok(v) => {
                    problems.answered();
                    if let Some(f) = problems.decoded(ctx, reply::info_fields(&v)) {
                        fields.extend(f);
                    }
                }
                Err(e) => {
                    // INFO server (the first) carries the run_id.
                    if i == 0 && e.kind == ErrorKind::NoPerm {
                        run_id = RunId::Unknowable;
                    }
                    problems.refused(&e);
                }
            }
        }
        if fields.is_empty() {
            run_ids.push((node.clone(), run_id));
            continue;
        }
        let info = parse(&fields);
        run_ids.push((
            node.clone(),
            if info.run_id.is_empty() {
                RunId::Unknowable
            } else {
                RunId::Known(info.run_id.clone())
            },
        ));
        arithmetic_by_node.insert(node.clone(), Arithmetic::of(&info.server, &info.version));
        counter_by_node.insert(node.clone(), ReadCounter::of(&info.server, &info.version));
        merged = Some(match merged {
            None => info,
            // Cluster: one server kind and policy; memory summed over primaries.
            Some(mut m) => {
                m.used_memory = m.used_memory.zip(info.used_memory).map(|(a, b)| a + b);
                m.maxmemory = m.maxmemory.zip(info.maxmemory).map(|(a, b)| a + b);
                m.run_id = match (m.run_id.is_empty(), info.run_id.is_empty()) {
                    (false, false) => format!("{},{}", m.run_id, info.run_id),
                    _ => String::new(),
                };
                m
            }
        });
    }
    {
        let mut state = ctx.state();
        state.snapshot.server = merged;
        state.arithmetic_by_node = arithmetic_by_node;
        state.read_counter_by_node = counter_by_node;
        state.verify_ledgers(&run_ids);
        state.settle_parked();
    }
    problems.finish(ProbeKind::Info)
}

/// Builds [`ServerInfo`] from INFO fields.
pub fn parse(fields: &[(String, String)]) -> ServerInfo {
    let get = |k: &str| fields.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
    let valkey = get("valkey_version");
    let server = match (&valkey, get("server_name")) {
        (Some(_), _) => "valkey".to_string(),
        (None, Some(name)) if name.eq_ignore_ascii_case("valkey") => "valkey".to_string(),
        _ => "redis".to_string(),
    };
    ServerInfo {
        server,
        version: valkey.or_else(|| get("redis_version")).unwrap_or_default(),
        mode: get("redis_mode")
            .or_else(|| get("server_mode"))
            .unwrap_or_else(|| "standalone".into()),
        maxmemory_policy: get("maxmemory_policy").unwrap_or_default(),
        maxmemory: get("maxmemory").and_then(|v| v.parse().ok()),
        used_memory: get("used_memory").and_then(|v| v.parse().ok()),
        run_id: get("run_id").unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn valkey_reports_its_own_version() {
        let i = parse(&f(&[
            ("redis_version", "7.2.4"),
            ("server_name", "valkey"),
            ("valkey_version", "9.1.2"),
            ("redis_mode", "standalone"),
        ]));
        assert_eq!((i.server.as_str(), i.version.as_str()), ("valkey", "9.1.2"));
        let r = parse(&f(&[
            ("redis_version", "7.0.15"),
            ("redis_mode", "cluster"),
            ("maxmemory", "0"),
            ("maxmemory_policy", "noeviction"),
        ]));
        assert_eq!(
            (r.server.as_str(), r.version.as_str(), r.mode.as_str()),
            ("redis", "7.0.15", "cluster")
        );
        assert_eq!(r.maxmemory, Some(0));
        assert_eq!(r.used_memory, None);
    }
}

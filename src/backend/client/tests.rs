//! The client as a whole, without a server: what it knows before its first
//! connection, and what a refused connection leaves behind (on a loopback
//! port nothing listens on).

use std::sync::Arc;

use super::*;
use crate::backend::command::Command;
use crate::backend::error::TargetError;
use crate::config::{CliOverrides, from_str};
use crate::vocab::ErrorKind;

fn client(fields: &str) -> TargetClient {
    let text = format!("[[targets]]\nname = \"t\"\n{fields}\n");
    let config =
        from_str("test.toml", &text, &CliOverrides::default()).unwrap_or_else(|e| panic!("{e}"));
    TargetClient::new(Arc::clone(&config.targets[0]), &config.limits)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    drop(listener);
    port
}

#[tokio::test]
async fn a_standalone_client_routes_every_key_to_its_server_without_connecting() {
    let port = closed_port();
    let c = client(&format!("url = \"redis://127.0.0.1:{port}/2\""));
    let addr: NodeAddr = format!("127.0.0.1:{port}").into();
    assert_eq!(c.nodes().await, Ok(vec![addr.clone()]));
    let keys: [&[u8]; 3] = [b"a", b"b", b"{a}c"];
    assert_eq!(
        c.partition(keys).await,
        Ok(std::collections::BTreeMap::from([(addr, vec![0, 1, 2])]))
    );
    assert_eq!(c.reachable(), None, "nothing was sent");
    let stats = c.stats_snapshot();
    assert!(stats.commands.is_empty() && stats.errors.is_empty());
    assert_eq!(stats.page_sizes["scan"], c.scan_page());
    assert_eq!(stats.page_sizes["xpending_range"], c.xpending_page());
}

#[tokio::test]
async fn a_refused_connection_is_one_connection_error_and_the_target_unreachable() {
    let port = closed_port();
    let c = client(&format!("url = \"redis://127.0.0.1:{port}\""));
    let node: NodeAddr = format!("127.0.0.1:{port}").into();
    let err = c
        .execute(&node, &[Command::Ping, Command::Time])
        .await
        .expect_err("nothing listens");
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
    assert!(
        matches!(&err, TargetError::Connection { node: n, auth: false, .. } if *n == *node),
        "{err:?}"
    );
    assert_eq!(c.reachable(), Some(false));
    let stats = c.stats_snapshot();
    assert_eq!(stats.errors.get("connection"), Some(&1), "{stats:?}");
    assert!(
        !stats.commands.contains_key("ping"),
        "a command that was never sent is not counted: {stats:?}"
    );
}

#[tokio::test]
async fn without_any_sentinel_there_is_no_primary_and_it_says_why() {
    let (a, b) = (closed_port(), closed_port());
    let c = client(&format!(
        "url = \"redis://127.0.0.1:{a}\"\nmode = \"sentinel\"\nmaster_name = \"m\"\nsentinels = [\"127.0.0.1:{b}\"]"
    ));
    let err = c.nodes().await.expect_err("no sentinel listens");
    assert!(
        matches!(&err, TargetError::Topology { detail, .. }
            if detail.starts_with("no sentinel gave the primary: ") && detail.contains(&format!("127.0.0.1:{b}"))),
        "the last sentinel's problem is given: {err}"
    );
    // Each sentinel's refused connection, then the missing primary.
    assert_eq!(c.stats_snapshot().errors.get("connection"), Some(&3));
}

#[tokio::test]
async fn without_any_cluster_node_the_topology_cannot_be_read() {
    let (a, b) = (closed_port(), closed_port());
    let c = client(&format!(
        "url = \"redis://127.0.0.1:{a}\"\nmode = \"cluster\"\ncluster_nodes = [\"127.0.0.1:{b}\"]"
    ));
    let err = c.nodes().await.expect_err("no node listens");
    assert!(
        matches!(&err, TargetError::Topology { detail, .. }
            if detail.starts_with("cannot read the cluster topology: ")),
        "{err}"
    );
    assert_eq!(err.kind(), ErrorKind::Cluster);
    let errors = c.stats_snapshot().errors;
    assert_eq!(
        errors.get("connection"),
        Some(&2),
        "one per node: {errors:?}"
    );
    assert_eq!(errors.get("cluster"), Some(&1), "{errors:?}");
    assert_eq!(c.reachable(), Some(false));
}

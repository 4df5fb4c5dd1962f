//! The one-shot `check` subcommand, run as a real process against a real
//! server: a readable table, and the exit code tells whether all is well.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test helpers: a panic is a failed test.

mod common;

use std::process::Command;

use common::*;

fn check(config: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_redis-streams-exporter"))
        .args([
            "--config",
            path.to_str().unwrap(),
            "--log.level",
            "error",
            "check",
        ])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn healthy_then_data_loss() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    xadd_n(&mut c, "orders", 4);
    xadd_n(&mut c, "orders:dead", 2);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("orders")
        .arg("billing")
        .arg("$")
        .query(&mut c)
        .unwrap();
    let config = format!(
        "[[targets]]\nname = \"main\"\nurl = \"{}\"\nstreams = [\"orders\"]\n\
         [[streams]]\nmatch = \"orders\"\ndead_letter = \"orders:dead\"\n",
        server.url()
    );
    let (code, out) = check(&config);
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0]
            .starts_with("TARGET  STREAM  GROUP    STATUS  LAG  LAG AGE  PENDING  OLDEST PENDING"),
        "{out}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row,
        [
            "main", "orders", "billing", "idle", "0", "0s", "0", "-", "-", "0", "0", "2", "0"
        ],
        "{out}"
    );

    // A slow group overtaken by a trim: data loss, exit 1.
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("orders")
        .arg("slow")
        .arg("0")
        .query(&mut c)
        .unwrap();
    read_group(&mut c, "orders", "slow", "c", 1);
    xadd_n(&mut c, "orders", 6);
    let _: i64 = redis::cmd("XTRIM")
        .arg("orders")
        .arg("MAXLEN")
        .arg(3)
        .query(&mut c)
        .unwrap();
    let (code, out) = check(&config);
    assert_eq!(code, 1, "{out}");
    let slow: Vec<&str> = out
        .lines()
        .find(|l| l.contains(" slow "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(slow[3], "data_loss", "{out}");
    assert_eq!(slow[4], "3", "lag is the retained length: {out}");
    // 10 added − 1 read − 3 retained = 6 lost.
    assert_eq!(slow[12], "6", "{out}");
}

#[test]
fn unreachable_target_fails() {
    let port = free_port();
    let (code, out) = check(&format!(
        "[[targets]]\nname = \"gone\"\nurl = \"redis://127.0.0.1:{port}\"\n[limits]\ncommand_timeout = \"300ms\"\n"
    ));
    assert_eq!(code, 1);
    assert!(out.contains("target gone: DOWN (no data)"), "{out}");
}

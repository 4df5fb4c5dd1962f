//! The state file across restarts of the exporter binary (`--state.file`,
//! stopped with SIGTERM, which writes it): a batch group without
//! `read_every` whose rhythm the exporter learned is judged by it from the
//! first poll after a restart, and pages nothing (without the file, the
//! same restart judges it by the window and stops it between its runs);
//! unread entries trimmed while the exporter is down are counted after its
//! restart (without the file, the restart is a new baseline and counts
//! none). Everything runs fast: stream polls every 250 ms, a window of 4
//! polls (1 s), a batch job every 2 s.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::exporter::Exporter;
use common::*;

/// A fast schedule, a window of 4 stream polls (1 s), full series (a 0
/// lost is written), and `extra`.
fn config(server: &RedisServer, extra: &str) -> String {
    format!(
        "[[targets]]\nname = \"t\"\nurl = \"{}\"\npatterns = [\"*\"]\n\
         [schedule]\nstream = \"250ms\"\ninfo = \"1s\"\nconsumers = \"250ms\"\npending_summary = \"250ms\"\n\
         [status]\nwindow = 4\n\
         [stream_defaults]\nseries = \"full\"\n{extra}",
        server.url()
    )
}

/// The exporter with `config`, and the state file `state` when given.
fn start(dir: &Path, config: &str, state: Option<&Path>) -> Exporter {
    let mut builder = Exporter::with_config(dir, config).args(&["--log.level", "info"]);
    if let Some(path) = state {
        builder = builder.arg(format!("--state.file={}", path.display()));
    }
    builder.start()
}

/// Stops it as systemd and Kubernetes do (SIGTERM): it writes the state
/// file and exits 0.
fn terminate(mut exporter: Exporter) -> String {
    let killed = Command::new("kill")
        .args(["-TERM", &exporter.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = exporter.child.try_wait().unwrap() {
            assert!(status.success(), "{status}: {}", exporter.log());
            return exporter.log();
        }
        assert!(
            Instant::now() < deadline,
            "no exit within 15 s of SIGTERM: {}",
            exporter.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn scrape(client: &reqwest::Client, exporter: &Exporter) -> Option<Metrics> {
    let r = client
        .get(format!("{}/metrics", exporter.base()))
        .send()
        .await
        .ok()?;
    Some(Metrics::parse(&r.text().await.ok()?))
}

/// Polls `/metrics` until `check` accepts it, within `limit`.
async fn until(
    client: &reqwest::Client,
    exporter: &Exporter,
    limit: Duration,
    what: &str,
    mut check: impl FnMut(&Metrics) -> bool,
) -> Metrics {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(m) = scrape(client, exporter).await
            && check(&m)
        {
            return m;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not seen within {limit:?}: {}",
            exporter.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The group's statuses over `watch`, one per scrape (every 100 ms), from
/// its first one.
async fn statuses(
    client: &reqwest::Client,
    exporter: &Exporter,
    watch: Duration,
) -> Vec<(String, String)> {
    let m = until(client, exporter, Duration::from_secs(20), "a status", |m| {
        m.status("jobs", "batch").is_some()
    })
    .await;
    let mut seen = vec![m.status("jobs", "batch").unwrap()];
    let end = Instant::now() + watch;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Some(s) = scrape(client, exporter)
            .await
            .and_then(|m| m.status("jobs", "batch"))
        {
            seen.push(s);
        }
    }
    seen
}

/// A producer adding an entry every 100 ms, and a batch job that reads
/// and acknowledges everything every 2 s, until the flag drops.
fn batch_job(server: &RedisServer, running: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let mut c = server.conn();
    std::thread::spawn(move || {
        let mut tick = 0u64;
        while running.load(Ordering::Relaxed) {
            let _: String = redis::cmd("XADD")
                .arg("jobs")
                .arg("*")
                .arg("n")
                .arg(tick)
                .query(&mut c)
                .unwrap();
            if tick % 20 == 0 {
                let ids = read_group(&mut c, "jobs", "batch", "run", 10_000);
                if !ids.is_empty() {
                    let _: u64 = redis::cmd("XACK")
                        .arg("jobs")
                        .arg("batch")
                        .arg(&ids)
                        .query(&mut c)
                        .unwrap();
                }
            }
            tick += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

#[tokio::test]
async fn a_batch_rhythm_learned_before_a_restart_pages_nothing_after_it() {
    let server = RedisServer::start(Server::Redis70);
    let mut c = server.conn();
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("jobs")
        .arg("batch")
        .arg("$")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    let running = Arc::new(AtomicBool::new(true));
    let job = batch_job(&server, running.clone());
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let config = config(&server, "");
    let client = reqwest::Client::new();

    // It learns the job's rhythm (3 waits of about 2 s): a group read in
    // runs, judged as with read_every = twice that.
    let learning = start(dir.path(), &config, Some(&state));
    until(
        &client,
        &learning,
        Duration::from_secs(30),
        "the batch rhythm learned",
        |m| {
            m.get(
                "redis_streams_group_read_every_seconds",
                &tsg("jobs", "batch"),
            )
            .is_some_and(|every| every >= 2.0)
        },
    )
    .await;
    let log = terminate(learning);
    assert!(log.contains("state file written"), "{log}");
    assert!(state.exists());

    // Without the file, a restart judges the group by the window (1 s)
    // until it learns again: stopped between its runs.
    let forgetful = start(dir.path(), &config, None);
    let without = statuses(&client, &forgetful, Duration::from_secs(5)).await;
    drop(forgetful);
    println!("without the file: {without:?}");
    assert!(
        without.iter().any(|(s, _)| s == "stopped"),
        "the restart without the file should page: {without:?}"
    );

    // With it, the first poll knows the rhythm: ok, between runs, through
    // three runs.
    let restarted = start(dir.path(), &config, Some(&state));
    let m = until(
        &client,
        &restarted,
        Duration::from_secs(20),
        "a status",
        |m| m.status("jobs", "batch").is_some(),
    )
    .await;
    assert!(
        m.get(
            "redis_streams_group_read_every_seconds",
            &tsg("jobs", "batch")
        )
        .is_some_and(|every| every >= 2.0),
        "the learned rhythm at the first poll:\n{}",
        m.text
    );
    let with = statuses(&client, &restarted, Duration::from_secs(6)).await;
    running.store(false, Ordering::Relaxed);
    job.join().unwrap();
    let log = terminate(restarted);
    println!("with the file: {with:?}");
    assert!(log.contains("state file read"), "{log}");
    assert!(
        with.iter().all(|(s, _)| s == "ok"),
        "a restart with the file pages nothing: {with:?}"
    );
    assert!(
        with.iter().any(|(_, r)| r == "between_runs"),
        "judged by its rhythm: {with:?}"
    );
}

/// 50 entries, a group that read 10, polled; the exporter stops; `XTRIM
/// MAXLEN 20` takes 20 entries the group had not read; the exporter
/// restarts.
async fn a_trim_while_the_exporter_is_down_is_counted_after_its_restart(kind: Server) {
    let server = RedisServer::start(kind);
    let mut c = server.conn();
    xadd_n(&mut c, "q", 50);
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("q")
        .arg("g")
        .arg("0")
        .query(&mut c)
        .unwrap();
    assert_eq!(read_group(&mut c, "q", "g", "w", 10).len(), 10);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    let config = config(&server, "");
    let client = reqwest::Client::new();
    let lost = |m: &Metrics| {
        m.get(
            "redis_streams_group_lost_entries_total",
            &[
                ("target", "t"),
                ("stream", "q"),
                ("group", "g"),
                ("cause", "trimmed"),
            ],
        )
    };

    let before = start(dir.path(), &config, Some(&state));
    until(&client, &before, Duration::from_secs(20), "lag 40", |m| {
        m.get("redis_streams_group_lag", &tsg("q", "g")) == Some(40.0) && lost(m) == Some(0.0)
    })
    .await;
    terminate(before);
    let _: u64 = redis::cmd("XTRIM")
        .arg("q")
        .arg("MAXLEN")
        .arg(20)
        .query(&mut c)
        .unwrap();

    // Without the file the first poll is a new baseline: nothing counted.
    let forgetful = start(dir.path(), &config, None);
    let m = until(
        &client,
        &forgetful,
        Duration::from_secs(20),
        "lag 20",
        |m| m.get("redis_streams_group_lag", &tsg("q", "g")) == Some(20.0),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let m = scrape(&client, &forgetful).await.unwrap_or(m);
    assert_eq!(lost(&m), Some(0.0), "{}", m.text);
    drop(forgetful);

    // With it, the first poll is compared with the last one before the
    // restart: 20 trimmed unread.
    let restarted = start(dir.path(), &config, Some(&state));
    let m = until(
        &client,
        &restarted,
        Duration::from_secs(20),
        "20 lost",
        |m| lost(m).is_some_and(|n| n > 0.0),
    )
    .await;
    assert_eq!(lost(&m), Some(20.0), "{}", m.text);
    let total: f64 = m
        .family("redis_streams_group_lost_entries_total")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(total, 20.0, "{}", m.text);
    assert_eq!(m.status("q", "g").map(|(s, _)| s), Some("data_loss".into()));
    terminate(restarted);
}

mod a_trim_while_the_exporter_is_down_is_counted_after_its_restart {
    use crate::common::Server;

    #[tokio::test]
    async fn redis70() {
        super::a_trim_while_the_exporter_is_down_is_counted_after_its_restart(Server::Redis70).await
    }

    #[tokio::test]
    async fn valkey9() {
        super::a_trim_while_the_exporter_is_down_is_counted_after_its_restart(Server::Valkey9).await
    }

    #[tokio::test]
    async fn redis8() {
        super::a_trim_while_the_exporter_is_down_is_counted_after_its_restart(Server::Redis8).await
    }
}

//! The state file: what it keeps comes back as it was, what it cannot
//! vouch for is ignored (missing, stale, saved in the future, corrupt, of
//! another version, of other targets) and a partly matching file keeps
//! what matches; writes are atomic; the daemon's writer writes every
//! [`SAVE_EVERY`] (paused time). A loss made while the exporter was down
//! is counted by the restored ledger, and a batch group's rhythm is known
//! at once.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::disk;
use super::document::{self, FORMAT_VERSION, Ignored, MAX_AGE, RestoredTarget};
use super::*;
use crate::cadence;
use crate::config::{self, Target};
use crate::loss::{Bounds, Ledger, Observation, ReadCounter};
use crate::probe::TargetState;
use crate::snapshot::GroupKey;
use crate::vocab::{GroupInfo, StreamId, StreamInfo};

const HOUR_MS: u64 = 3_600_000;
/// A server time (ms) the polls below happen at.
const T0: u64 = 1_800_000_000_000;

fn configured(toml: &str) -> Vec<Arc<Target>> {
    config::from_str("t.toml", toml, &Default::default())
        .unwrap()
        .targets
}

fn two_targets() -> Vec<Arc<Target>> {
    configured(
        "[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.1:6379\"\n\
         [[targets]]\nname = \"b\"\nurl = \"redis://10.0.0.2:6379/2\"\n",
    )
}

fn key(stream: &[u8], group: &[u8]) -> GroupKey {
    (Arc::from(stream), Arc::from(group))
}

/// A stream of `added` entries `1-0`… with the last `length` of them left,
/// and a group at `position` (every entry up to it read).
fn figures(added: u64, length: u64, position: u64) -> (StreamInfo, GroupInfo) {
    let id = |n: u64| StreamId::new(n, 0);
    let first = added - length + 1;
    let stream = StreamInfo {
        length,
        groups: 1,
        last_generated_id: id(added),
        first_entry_id: (length > 0).then(|| id(first)),
        last_entry_id: (length > 0).then(|| id(added)),
        entries_added: Some(added),
        max_deleted_entry_id: Some(StreamId::ZERO),
        recorded_first_entry_id: (length > 0).then(|| id(first)),
        ..StreamInfo::default()
    };
    let group = GroupInfo {
        name: b"g".to_vec(),
        consumers: 1,
        last_delivered_id: id(position),
        entries_read: Some(position),
        lag: Some(length.min(added - position)),
        ..GroupInfo::default()
    };
    (stream, group)
}

/// One poll of a ledger: the server `run_id`, then the figures.
fn poll(ledger: &mut Ledger, run_id: &str, at_ms: u64, (stream, group): (StreamInfo, GroupInfo)) {
    let undelivered = Bounds::exact(group.lag.unwrap_or_default());
    ledger.follow_server(Some(&Arc::from(run_id)));
    let o = Observation::of(
        &stream,
        &group,
        Some(at_ms),
        undelivered,
        ReadCounter::KeepsGaps,
    );
    ledger.observe(&o, None);
}

/// A target's state with one batch group that read every 4 minutes for
/// two hours (its cadence learned), and one ledger at a poll of 50 entries
/// of which the group read 10.
fn learned_state() -> TargetState {
    let mut state = TargetState::default();
    let (memory, ledger) = state.group_entries(&key(b"orders", b"batch"));
    let mut at = T0;
    while at <= T0 + 2 * HOUR_MS {
        let read = T0 + (at - T0) / 240_000 * 240_000;
        memory.cadence.observe(cadence::Seen {
            at_ms: at,
            last_read_ms: Some(read),
            last_generated_id: StreamId::new(at, 0),
            waiting: read + 15_000 <= at,
            interval_ms: 15_000,
        });
        at += 15_000;
    }
    memory.holds.record(T0 + HOUR_MS, 5_000);
    memory.last_read_at_ms = Some(T0 + 2 * HOUR_MS - 1000);
    memory.watched_since_ms = Some(T0);
    memory.lag_trail = Some(crate::lag::Trail {
        last_delivered: StreamId::new(10, 0),
        entries_read: Some(10),
        ..Default::default()
    });
    for n in 0..3 {
        memory.window.push(&crate::status::Sample {
            at_ms: T0 + 2 * HOUR_MS + n * 15_000,
            lag: Some(40),
            lag_seconds: Some(30.0),
            last_delivered_id: StreamId::new(10, 0),
            last_generated_id: StreamId::new(50 + n, 0),
            pending: 0,
            consumers: 1,
            loss_now: false,
            gone_ahead: 0,
            recent_loss: false,
            oldest_pending_id: None,
            last_read_at_ms: memory.last_read_at_ms,
            watched_since_ms: Some(T0),
            stuck: None,
            retention_margin: None,
            trimmed_recently: false,
            overtake_eta: None,
        });
    }
    poll(ledger, "run-1", T0, figures(50, 50, 10));
    state
}

fn saved_at(path: &std::path::Path, targets: &[Arc<Target>], at: SystemTime, state: TargetState) {
    let file = StateFile::open(path.to_path_buf(), targets, at);
    file.track(vec![(targets[0].clone(), Arc::new(Mutex::new(state)))]);
    file.save(at).unwrap();
}

/// What `open` gave for the target `name`, moved into a fresh state.
fn restored(file: &StateFile, target: &Target) -> TargetState {
    let state = Mutex::new(TargetState::default());
    file.restore(target, &state);
    state.into_inner().unwrap()
}

#[test]
fn what_was_learned_comes_back_and_a_loss_during_the_restart_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let targets = two_targets();
    let now = SystemTime::now();
    let before = learned_state();
    let k = key(b"orders", b"batch");
    let at = T0 + 2 * HOUR_MS;
    let learned = before.groups[&k].cadence.interval(at).expect("learned");
    assert!(
        (Duration::from_secs(220)..=Duration::from_secs(240)).contains(&learned),
        "{learned:?}"
    );
    let window_before = before.groups[&k].window.clone();
    let ledger_before = before.ledgers[&k].clone();
    saved_at(&path, &targets, now, before);

    let file = StateFile::open(path.clone(), &targets, now + Duration::from_secs(30));
    let mut state = restored(&file, &targets[0]);
    // Taken at the group's first poll, not before.
    assert!(state.groups.is_empty());
    assert_eq!(state.ledgers[&k], ledger_before);
    assert!(state.ledgers_unverified, "the ledgers wait for INFO");
    state.ledgers_unverified = false;
    let (memory, ledger) = state.group_entries(&k);
    assert_eq!(memory.cadence.interval(at), Some(learned));
    assert_eq!(
        cadence::reads_in_runs(memory.cadence.interval(at), Duration::from_secs(150)),
        Some(learned * 2),
        "a batch group, judged by its rhythm from the first poll"
    );
    assert_eq!(memory.window, window_before);
    assert_eq!(memory.last_read_at_ms, Some(T0 + 2 * HOUR_MS - 1000));
    assert_eq!(memory.watched_since_ms, Some(T0));
    // While the exporter was down, `XTRIM MAXLEN 20` took 20 entries the
    // group had not read: the first poll after the restart proves them.
    poll(ledger, "run-1", T0 + 60_000, figures(50, 20, 10));
    let lost = ledger.lost().unwrap();
    assert_eq!((lost.trimmed, lost.total()), (20, 20), "{lost:?}");
    // A second target of the configuration, absent from the file, starts
    // afresh; the file gives each target's part once.
    assert!(restored(&file, &targets[1]).ledgers.is_empty());
    assert!(restored(&file, &targets[0]).ledgers.is_empty());
}

#[test]
fn another_server_with_other_data_starts_a_new_baseline_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let targets = two_targets();
    let now = SystemTime::now();
    saved_at(&path, &targets, now, learned_state());
    let file = StateFile::open(path, &targets, now);
    let mut state = restored(&file, &targets[0]);
    let (_, ledger) = state.group_entries(&key(b"orders", b"batch"));
    // FLUSHALL and a new stream behind a restarted server: its figures do
    // not continue the last poll's.
    poll(ledger, "run-2", T0 + 60_000, figures(5, 5, 0));
    assert_eq!(ledger.lost().unwrap().total(), 0);
}

#[test]
fn a_restored_memory_outlives_an_outage_until_a_stream_poll_does_not_see_its_group() {
    let mut saved = TargetState::default();
    let k = key(b"s", b"g");
    let other = key(b"s", b"gone");
    for g in [&k, &other] {
        let (memory, _) = saved.group_entries(g);
        memory.watched_since_ms = Some(T0);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let targets = two_targets();
    let now = SystemTime::now();
    saved_at(&path, &targets, now, saved);
    let mut state = restored(&StateFile::open(path, &targets, now), &targets[0]);
    assert_eq!(state.memories().count(), 2, "kept by the next write");
    state.forget_data();
    let (memory, _) = state.group_entries(&k);
    assert_eq!(memory.watched_since_ms, Some(T0));
    // A completed stream poll that saw neither group (the stream is gone)
    // drops what is left.
    state.prune_ledgers();
    assert_eq!(state.memories().count(), 1);
}

#[test]
fn a_missing_stale_future_corrupt_or_foreign_file_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let targets = two_targets();
    let now = SystemTime::now();
    let ms = |t: SystemTime| {
        t.duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    // Missing.
    let file = StateFile::open(path.clone(), &targets, now);
    assert!(lock(&file.loaded).is_empty());
    assert_eq!(disk::read(&path).unwrap(), None);

    saved_at(&path, &targets, now, learned_state());
    let bytes = std::fs::read(&path).unwrap();
    let judge = |bytes: &[u8], targets: &[Arc<Target>], at: SystemTime| {
        document::judge(bytes, targets, ms(at)).map(|r| r.targets.len())
    };
    assert_eq!(judge(&bytes, &targets, now), Ok(1));
    // Stale: older than MAX_AGE.
    let later = now + MAX_AGE + Duration::from_secs(1);
    assert!(matches!(
        judge(&bytes, &targets, later),
        Err(Ignored::Stale { age }) if age > MAX_AGE
    ));
    assert_eq!(
        judge(&bytes, &targets, now + MAX_AGE - Duration::from_secs(1)),
        Ok(1)
    );
    let file = StateFile::open(path.clone(), &targets, later);
    assert!(lock(&file.loaded).is_empty());
    // Saved in the future of the clock (stepped back).
    assert!(matches!(
        judge(&bytes, &targets, now - Duration::from_secs(600)),
        Err(Ignored::Ahead { .. })
    ));
    // Corrupt: cut short, not JSON, not a state file.
    for bad in [&bytes[..bytes.len() / 2], b"\x00\x01garbage", b"{\"a\": 1}"] {
        assert!(
            matches!(judge(bad, &targets, now), Err(Ignored::Corrupt(_))),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // Another version of the format.
    let text = String::from_utf8(bytes.clone()).unwrap();
    let other = text.replacen(
        &format!("\"version\":{FORMAT_VERSION}"),
        &format!("\"version\":{}", FORMAT_VERSION + 1),
        1,
    );
    assert_ne!(other, text);
    assert!(matches!(
        judge(other.as_bytes(), &targets, now),
        Err(Ignored::OtherVersion { .. })
    ));
    // Foreign: another target set, or the same name at another address.
    for foreign in [
        "[[targets]]\nname = \"c\"\nurl = \"redis://10.0.0.1:6379\"\n",
        "[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.9:6379\"\n",
        "[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.1:6379/1\"\n",
        "[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.1:6379\"\nmode = \"cluster\"\n",
    ] {
        let other = configured(foreign);
        assert!(
            matches!(judge(&bytes, &other, now), Err(Ignored::Foreign { .. })),
            "{foreign}"
        );
        let file = StateFile::open(path.clone(), &other, now);
        assert!(lock(&file.loaded).is_empty());
    }
    // An unreadable file (a directory at the path) is ignored too.
    let file = StateFile::open(dir.path().to_path_buf(), &targets, now);
    assert!(lock(&file.loaded).is_empty());
}

#[test]
fn a_partly_matching_file_keeps_what_matches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let targets = two_targets();
    let now = SystemTime::now();
    let file = StateFile::open(path.clone(), &targets, now);
    file.track(
        targets
            .iter()
            .map(|t| (t.clone(), Arc::new(Mutex::new(learned_state()))))
            .collect(),
    );
    let report = file.save(now).unwrap();
    assert_eq!(
        report,
        SaveReport {
            targets: 2,
            groups: 2
        }
    );
    // `b` moved to another address, `c` is new: only `a` is restored.
    let now_configured = configured(
        "[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.1:6379\"\n\
         [[targets]]\nname = \"b\"\nurl = \"redis://10.0.0.3:6379/2\"\n\
         [[targets]]\nname = \"c\"\nurl = \"redis://10.0.0.4:6379\"\n",
    );
    let bytes = std::fs::read(&path).unwrap();
    let at = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let judged = document::judge(&bytes, &now_configured, at).unwrap();
    assert_eq!(judged.targets.keys().collect::<Vec<_>>(), ["a"]);
    assert_eq!(judged.left_out, ["b (redis://10.0.0.2:6379/2 standalone)"]);
    let file = StateFile::open(path, &now_configured, now);
    assert_eq!(restored(&file, &now_configured[0]).ledgers.len(), 1);
    assert!(restored(&file, &now_configured[1]).ledgers.is_empty());
}

#[test]
fn names_that_are_not_utf8_and_the_group_limit() {
    let mut state = TargetState::default();
    let odd = key(b"s\xff\x00", b"\xfeg");
    for n in 0..5u8 {
        let (memory, _) = state.group_entries(&key(b"s", &[b'g', n]));
        memory.watched_since_ms = Some(T0);
    }
    state.group_entries(&odd).0.watched_since_ms = Some(T0 + 1);
    let targets =
        configured("[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.1:6379\"\nmax_groups = 3\n");
    let saved = document::SavedTarget::of(&targets[0], &state);
    let text = serde_json::to_string(&saved).unwrap();
    assert!(text.contains("{\"base64\":\"c/8A\"}"), "{text}");
    let document = document::StateDocument::new(1, vec![saved]);
    let bytes = serde_json::to_vec(&document).unwrap();
    let big =
        configured("[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.1:6379\"\nmax_groups = 10\n");
    let judged = document::judge(&bytes, &big, 1).unwrap();
    let restored: &RestoredTarget = &judged.targets["a"];
    assert_eq!(restored.memories[&odd].watched_since_ms, Some(T0 + 1));
    // At most the groups the target watches.
    let judged = document::judge(&bytes, &targets, 1).unwrap();
    assert_eq!(judged.targets["a"].groups(), 3);
}

#[test]
fn writes_are_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    disk::write_atomically(&path, |w| std::io::Write::write_all(w, b"first")).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // A write that fails half-way leaves the last complete file, and no
    // temporary file.
    let failed = disk::write_atomically(&path, |w| {
        std::io::Write::write_all(w, b"half of the sec")?;
        Err(std::io::Error::other("disk full"))
    });
    let e = failed.unwrap_err().to_string();
    assert!(e.contains("cannot write") && e.contains("disk full"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    assert!(!disk::temporary(&path).exists());
    // A temporary file left by a crash is overwritten.
    std::fs::write(disk::temporary(&path), b"left over from a crash").unwrap();
    disk::write_atomically(&path, |w| std::io::Write::write_all(w, b"second")).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    assert!(!disk::temporary(&path).exists());
    // A directory that does not exist: an error naming the path, nothing
    // written.
    let nowhere = dir.path().join("missing").join("state.json");
    let e = disk::write_atomically(&nowhere, |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("missing/state.json.tmp"), "{e}");
    assert!(!nowhere.exists());
    // A file too large to be ours is refused, not read.
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(disk::MAX_FILE_BYTES + 1)
        .unwrap();
    assert!(matches!(
        disk::read(&huge),
        Err(StateFileError::TooLarge { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn the_daemon_writes_every_minute_and_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let targets = two_targets();
    let file = Arc::new(StateFile::open(path.clone(), &targets, SystemTime::now()));
    let state = Arc::new(Mutex::new(learned_state()));
    file.track(vec![(targets[0].clone(), state.clone())]);
    let stop = tokio_util::sync::CancellationToken::new();
    let writer = tokio::spawn(file.clone().keep_saving(SAVE_EVERY, stop.clone()));
    tokio::time::sleep(SAVE_EVERY - Duration::from_secs(1)).await;
    assert!(!path.exists(), "not before a minute");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The write runs on the blocking pool, in real time.
    for _ in 0..400 {
        if path.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        tokio::task::yield_now().await;
    }
    let first = std::fs::read(&path).expect("written after a minute");
    let groups = |bytes: &[u8]| {
        let doc: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        doc["targets"][0]["groups"].as_array().unwrap().len()
    };
    assert_eq!(groups(&first), 1);
    // What the poller learns after the last write is in the one at shutdown.
    lock(&state).group_entries(&key(b"orders", b"late"));
    stop.cancel();
    writer.await.unwrap();
    file.save_at_shutdown(Duration::from_secs(5)).await;
    assert_eq!(groups(&std::fs::read(&path).unwrap()), 2);
}

#[test]
fn the_file_is_a_key_of_status_and_a_flag_that_wins() {
    let load = |toml: &str, flag: Option<&str>| {
        let cli = config::CliOverrides {
            state_file: flag.map(std::path::PathBuf::from),
            ..Default::default()
        };
        config::from_str("t.toml", toml, &cli)
    };
    assert_eq!(load("", None).unwrap().state_file, None);
    let set = "[status]\nstate_file = \"/var/lib/x/state.json\"\n";
    assert_eq!(
        load(set, None).unwrap().state_file.as_deref(),
        Some(std::path::Path::new("/var/lib/x/state.json"))
    );
    assert_eq!(
        load(set, Some("/tmp/other.json"))
            .unwrap()
            .state_file
            .as_deref(),
        Some(std::path::Path::new("/tmp/other.json"))
    );
    let dir = tempfile::tempdir().unwrap();
    for (toml, flag, wanted) in [
        ("[status]\nstate_file = \"\"\n", None, "must not be empty"),
        ("", Some(dir.path().to_str().unwrap()), "is a directory"),
    ] {
        let e = load(toml, flag).unwrap_err().to_string();
        assert!(e.contains("status.state_file") && e.contains(wanted), "{e}");
    }
    // Not a change of polling: a reload keeps the pollers (the file takes effect at the next
    // start).
    let before = load("", None).unwrap();
    let after = load(set, None).unwrap();
    assert!(!before.polling_changed(&after));
}

/// A document of version 1, as this build wrote it: if it no longer loads,
/// the format changed, and `FORMAT_VERSION` must say so (then write this
/// test's document again from the new version).
#[test]
fn a_version_1_document_still_loads() {
    assert_eq!(FORMAT_VERSION, 1, "a new version: write its document here");
    let targets = configured("[[targets]]\nname = \"a\"\nurl = \"redis://10.0.0.1:6379\"\n");
    let judged = document::judge(VERSION_1.as_bytes(), &targets, 1_800_000_060_000)
        .unwrap_or_else(|why| panic!("{why}"));
    let restored = &judged.targets["a"];
    let k = key(b"orders", b"batch");
    let memory = &restored.memories[&k];
    assert_eq!(
        memory.cadence.interval(T0 + 2 * HOUR_MS),
        Some(Duration::from_secs(240))
    );
    let mut ledger = restored.ledgers[&k].clone();
    poll(&mut ledger, "run-1", T0 + 60_000, figures(50, 20, 10));
    assert_eq!(ledger.lost().unwrap().trimmed, 20);
    // And what this build writes of the same state is that document.
    let written = document::StateDocument::new(
        1_800_000_000_000,
        vec![document::SavedTarget::of(&targets[0], &learned_state())],
    );
    let reread: serde_json::Value = serde_json::from_str(VERSION_1).unwrap();
    assert_eq!(serde_json::to_value(&written).unwrap(), reread);
}

const VERSION_1: &str = r#"{
  "format": "redis-streams-exporter state",
  "version": 1,
  "saved_at_ms": 1800000000000,
  "targets": [
    {
      "name": "a",
      "address": "redis://10.0.0.1:6379 standalone",
      "groups": [
        {
          "stream": "orders",
          "group": "batch",
          "memory": {
            "window": {
              "seen": 3,
              "prev": {
                "lag": 40,
                "undelivered": true,
                "last_delivered_id": 20971520,
                "last_generated_id": 109051904,
                "oldest_pending_id": 0
              },
              "position_stuck": 3,
              "oldest_stuck": 0,
              "no_production": 1,
              "lag_not_decreasing": 3,
              "since_lag_rose": 65535,
              "since_position_moved": 65535
            },
            "cadence": {
              "waits": [
                {
                  "index": 500000,
                  "longest": 240000,
                  "second": 240000,
                  "count": 14
                },
                {
                  "index": 500001,
                  "longest": 240000,
                  "second": 240000,
                  "count": 15
                },
                {
                  "index": 500002,
                  "longest": 240000,
                  "second": 0,
                  "count": 1
                }
              ],
              "last_read_ms": 1800007200000,
              "waiting_since_ms": null,
              "prev_poll_ms": 1800007200000,
              "prev_generated": "1800007200000-0"
            },
            "holds": [
              {
                "index": 500001,
                "longest": 5000,
                "second": 0,
                "count": 1
              }
            ],
            "last_read_at_ms": 1800007199000,
            "last_progress_at_ms": null,
            "watched_since_ms": 1800000000000,
            "position": {
              "last_delivered": "10-0",
              "entries_read": 10
            },
            "head": null,
            "head_deleted": false,
            "head_moved_at_ms": null
          },
          "ledger": {
            "last": {
              "stream": {
                "length": 50,
                "groups": 1,
                "last_generated_id": "50-0",
                "first_entry_id": "1-0",
                "last_entry_id": "50-0",
                "entries_added": 50,
                "max_deleted_entry_id": "0-0",
                "recorded_first_entry_id": "1-0",
                "radix_tree_keys": null,
                "radix_tree_nodes": null,
                "idempotence": {
                  "producers": null,
                  "ids": null,
                  "ids_added": null,
                  "duplicates": null
                }
              },
              "last_delivered": "10-0",
              "entries_read": 10,
              "undelivered": {
                "lo": 40,
                "hi": 40
              },
              "rank": {
                "lo": 10,
                "hi": 10
              },
              "doubt": false,
              "gone_ahead": {
                "lo": 0,
                "hi": 0
              },
              "counters": 0,
              "counter": "KeepsGaps"
            },
            "anchor": {
              "figure": 0,
              "counted": 0,
              "removed": 0,
              "last_delivered": "10-0",
              "stream": {
                "length": 50,
                "groups": 1,
                "last_generated_id": "50-0",
                "first_entry_id": "1-0",
                "last_entry_id": "50-0",
                "entries_added": 50,
                "max_deleted_entry_id": "0-0",
                "recorded_first_entry_id": "1-0",
                "radix_tree_keys": null,
                "radix_tree_nodes": null,
                "idempotence": {
                  "producers": null,
                  "ids": null,
                  "ids_added": null,
                  "duplicates": null
                }
              }
            },
            "lost": {
              "trimmed": 0,
              "deleted": 0,
              "either": 0
            },
            "possibly_lost": {
              "trimmed": 0,
              "deleted": 0,
              "either": 0
            },
            "unproven": {
              "order_unknown": 0,
              "no_entries_read": 0,
              "no_counters": 0
            },
            "rewinds": 0,
            "rewound_at_ms": null,
            "last_loss_at_ms": null,
            "loss_times": {
              "trimmed": null,
              "deleted": null,
              "either": null
            },
            "server": "run-1",
            "server_changed": false
          }
        }
      ]
    }
  ]
}"#;

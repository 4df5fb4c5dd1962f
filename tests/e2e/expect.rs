//! What each fault of the end-to-end test must raise, on each server: the alerts that must fire in
//! Prometheus, those that may fire besides (consequences a scenario legitimately has too), the
//! alert that must be notified, and how many notifications carrying its alerts firing the fault
//! may cost (one fault, one notification). Every alert and every notification is attributed to
//! the fault it belongs to by its labels; anything that belongs to none, or that a fault does not
//! allow, fails the test.

use std::collections::BTreeMap;

use crate::common::Server;

pub type Labels = BTreeMap<String, String>;

/// When a fault begins, for the time-to-notification columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Since {
    /// The simulators start.
    Scenarios,
    /// The exporters start (the fake proxy is wrong from the first poll).
    Exporters,
    /// The `shortlived` exporter is killed.
    ExporterKilled,
    /// The Redis of target `down` is killed.
    RedisKilled,
    /// The Redis of the first of the two default-named exporters is killed.
    PairKilled,
}

/// An alert name with label values it must carry.
#[derive(Clone, Debug)]
pub struct Want {
    pub alert: &'static str,
    pub labels: Vec<(&'static str, String)>,
}

impl Want {
    pub fn accepts(&self, labels: &Labels) -> bool {
        labels.get("alertname").map(String::as_str) == Some(self.alert)
            && self
                .labels
                .iter()
                .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(v.as_str()))
    }
}

fn want(alert: &'static str) -> Want {
    Want {
        alert,
        labels: Vec::new(),
    }
}

fn want_on(alert: &'static str, labels: &[(&'static str, &str)]) -> Want {
    Want {
        alert,
        labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
    }
}

/// One fault and what it must raise.
pub struct Fault {
    /// Scenario name (the simulator's, or the infrastructure fault).
    pub scenario: String,
    /// The server it runs on (`-` for the infrastructure faults).
    pub server: String,
    /// Label values an alert must carry to belong to this fault.
    pub selector: Vec<(&'static str, String)>,
    pub must_fire: Vec<Want>,
    /// Alerts that may fire besides (by name).
    pub may_fire: Vec<&'static str>,
    /// Alerts that must reach a receiver.
    pub notified: Vec<Want>,
    /// Most notifications announcing its alerts firing (pages and tickets) the fault may send:
    /// one where it must notify, none where it must not (`recovered` says why it may send two).
    pub max_notifications: usize,
    pub since: Since,
}

impl Fault {
    pub fn owns(&self, labels: &Labels) -> bool {
        self.selector
            .iter()
            .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(v.as_str()))
    }

    pub fn allows(&self, labels: &Labels) -> bool {
        self.must_fire.iter().any(|w| w.accepts(labels))
            || self
                .may_fire
                .iter()
                .any(|a| labels.get("alertname").map(String::as_str) == Some(*a))
    }
}

/// The name of a matrix server's target in the main exporter.
pub fn target_name(kind: Server) -> &'static str {
    match kind {
        Server::Redis62 => "redis62",
        Server::Redis70 => "redis70",
        Server::Valkey9 => "valkey9",
        Server::Redis8 => "redis8",
    }
}

/// The stream a simulator scenario works on (prefix `e2e:`).
fn stream(scenario: &str) -> String {
    let suffix = match scenario {
        "crashed-consumer" => "crashed",
        "dead-letter" => "deadletter",
        "xdel-ghosts" => "xdel",
        "trim-window" => "trimwindow",
        "outpace-xdel" => "outpacexdel",
        "trim-catchup" => "trimcatchup",
        "delete-unread" => "deleteunread",
        "trim-overtake" => "trimovertake",
        "never-acks" => "neveracks",
        "noack-reader" => "noackreader",
        other => other,
    };
    format!("e2e:{suffix}")
}

/// The streams of the matrix get `max_delay = "1h"` (the exporter's `[stream_defaults]`) and
/// retain seconds: a trimmed group with anything undelivered holds a retention margin under its
/// max_delay, so this ticket may fire with the trim scenarios, never notified: ghost entries mute
/// it, and a page of the group (the loss, the stop) holds it back in the rule until its `for:`
/// has passed again after the page.
const RETENTION_MARGIN_LOW: &str = "RedisStreamsRetentionMarginLow";

/// The simulator's scenarios on one server of the matrix (`all`), with what each must raise
/// there. `has_lag` servers (7.0+) count losses; Redis 6.2 cannot (no entries-added,
/// entries-read or lag), so there a group that lost entries to a trim shows as stopped, and every
/// lag count is the exporter's (`RedisStreamsLagEstimated` may fire anywhere).
pub fn matrix(kind: Server, main_instance: &str) -> Vec<Fault> {
    let lag = kind.has_lag();
    let server = target_name(kind);
    let fault = |scenario: &str,
                 group: Option<&str>,
                 must: Vec<Want>,
                 may: &[&'static str],
                 notified: Vec<Want>,
                 max: usize| {
        let mut selector = vec![
            ("instance", main_instance.to_string()),
            ("target", server.to_string()),
            ("stream", stream(scenario)),
        ];
        if let Some(g) = group {
            selector.push(("group", g.to_string()));
        }
        let mut may_fire = may.to_vec();
        if !lag {
            may_fire.push("RedisStreamsLagEstimated");
        }
        Fault {
            scenario: match group {
                Some(g) => format!("{scenario} ({g})"),
                None => scenario.to_string(),
            },
            server: server.to_string(),
            selector,
            must_fire: must,
            may_fire,
            notified,
            max_notifications: max,
            since: Since::Scenarios,
        }
    };
    let w = want;
    let mut faults = vec![
        // The groups that must raise nothing: keeping up, a batch job between runs (read_every
        // above its period), nothing to do, a NOACK reader (nothing ever pending).
        fault("healthy", None, vec![], &[], vec![], 0),
        fault("batch", None, vec![], &[], vec![], 0),
        fault("idle", None, vec![], &[], vec![], 0),
        fault("noack-reader", None, vec![], &[], vec![], 0),
        fault(
            "crashed-consumer",
            None,
            vec![
                w("RedisStreamsOrphanedPending"),
                w("RedisStreamsOldestPendingTooOld"),
            ],
            &["RedisStreamsGroupStalled"],
            vec![w("RedisStreamsOrphanedPending")],
            1,
        ),
        fault(
            "poison",
            None,
            vec![
                w("RedisStreamsPoisonEntries"),
                w("RedisStreamsGroupStalled"),
            ],
            &["RedisStreamsOldestPendingTooOld"],
            vec![w("RedisStreamsPoisonEntries")],
            1,
        ),
        fault(
            "dead-letter",
            None,
            vec![w("RedisStreamsDeadLettersArriving")],
            &[],
            vec![w("RedisStreamsDeadLettersArriving")],
            1,
        ),
        fault(
            "trim",
            Some("workers"),
            vec![w("RedisStreamsGhostEntries")],
            &[
                "RedisStreamsGroupStalled",
                "RedisStreamsPendingGrowing",
                "RedisStreamsOldestPendingTooOld",
                RETENTION_MARGIN_LOW,
            ],
            vec![w("RedisStreamsGhostEntries")],
            1,
        ),
        fault(
            "xdel-ghosts",
            None,
            vec![w("RedisStreamsGhostEntries")],
            &[
                "RedisStreamsGroupStalled",
                "RedisStreamsPendingGrowing",
                "RedisStreamsOldestPendingTooOld",
            ],
            vec![w("RedisStreamsGhostEntries")],
            1,
        ),
        // A steady backlog at 90% of the retained window: the margin does not shrink, so nothing
        // pages; it is under the stream's max_delay, so a ticket says the retention is short.
        fault(
            "trim-window",
            None,
            vec![w("RedisStreamsRetentionMarginLow")],
            &[],
            vec![w("RedisStreamsRetentionMarginLow")],
            1,
        ),
        fault(
            "stopped",
            None,
            vec![w("RedisStreamsGroupStopped")],
            &[
                "RedisStreamsLagSecondsHigh",
                "RedisStreamsLagSecondsCritical",
                "RedisStreamsBacklogNotDraining",
                "RedisStreamsProductionOutpacingConsumption",
                "RedisStreamsProductionOutpacingConsumptionEstimated",
            ],
            vec![w("RedisStreamsGroupStopped")],
            1,
        ),
        fault(
            "never-acks",
            None,
            vec![
                w("RedisStreamsGroupStalled"),
                w("RedisStreamsPendingGrowing"),
            ],
            &["RedisStreamsOldestPendingTooOld"],
            vec![w("RedisStreamsGroupStalled")],
            1,
        ),
        // Trimming gains on a slow group: the trim-overtake ETA pages (the group is far from the
        // trimming edge by the retained window: the ETA is what fires it, checked in
        // trim_story.rs); the group then speeds up and nothing is lost. Its margin stays under
        // the matrix's max_delay while it drains, and is gone once it has caught up: the
        // retention-margin ticket, held back while the page fires, must not go out for that tail.
        fault(
            "trim-overtake",
            None,
            vec![w("RedisStreamsTrimOvertakingGroup")],
            &[],
            vec![w("RedisStreamsTrimOvertakingGroup")],
            1,
        ),
        fault(
            "rewind",
            None,
            vec![
                want_on("RedisStreamsGroupRewound", &[("group", "replay")]),
                want_on("RedisStreamsGroupAheadOfStream", &[("group", "future")]),
            ],
            &["RedisStreamsLagEstimated"],
            vec![],
            0,
        ),
    ];
    let recovered_may = [
        RETENTION_MARGIN_LOW,
        "RedisStreamsTrimOvertakingGroup",
        "RedisStreamsLagSecondsHigh",
        "RedisStreamsLagSecondsCritical",
        "RedisStreamsProductionOutpacingConsumption",
        "RedisStreamsProductionOutpacingConsumptionEstimated",
    ];
    if lag {
        faults.extend([
            fault(
                "trim",
                Some("archive"),
                vec![w("RedisStreamsTrimmedUndelivered")],
                &[
                    "RedisStreamsTrimOvertakingGroup",
                    "RedisStreamsLagEstimated",
                    RETENTION_MARGIN_LOW,
                ],
                vec![w("RedisStreamsTrimmedUndelivered")],
                1,
            ),
            // A consumer outage during which trimming overtakes the group: the outage may page
            // GroupStopped first (its consumers are silent for twice their cadence before the
            // trim reaches them), and the loss it causes is then announced in the same alert
            // group, one incident (Alertmanager's dedup key is the group's): two
            // announcements, the second saying that entries are now lost.
            fault(
                "recovered",
                None,
                vec![
                    w("RedisStreamsTrimmedUndelivered"),
                    w("RedisStreamsLagEstimated"),
                ],
                &[&recovered_may[..], &["RedisStreamsGroupStopped"]].concat(),
                vec![w("RedisStreamsTrimmedUndelivered")],
                2,
            ),
            fault(
                "outpace",
                None,
                vec![w("RedisStreamsProductionOutpacingConsumption")],
                &[],
                vec![w("RedisStreamsProductionOutpacingConsumption")],
                1,
            ),
            fault(
                "outpace-xdel",
                None,
                vec![
                    w("RedisStreamsProductionOutpacingConsumptionEstimated"),
                    w("RedisStreamsLagEstimated"),
                ],
                // The producer's XDEL of an entry the group has not read is a loss for the group
                // (counted while the lag can still be counted exactly).
                &["RedisStreamsDeletedUndelivered"],
                vec![],
                1,
            ),
            fault(
                "trim-catchup",
                None,
                vec![w("RedisStreamsTrimmedUndelivered")],
                &[],
                vec![w("RedisStreamsTrimmedUndelivered")],
                1,
            ),
            fault(
                "delete-unread",
                None,
                vec![w("RedisStreamsDeletedUndelivered")],
                &[],
                vec![w("RedisStreamsDeletedUndelivered")],
                1,
            ),
        ]);
    } else {
        faults.extend([
            fault(
                "trim",
                Some("archive"),
                vec![w("RedisStreamsGroupStopped")],
                &["RedisStreamsTrimOvertakingGroup", RETENTION_MARGIN_LOW],
                vec![w("RedisStreamsGroupStopped")],
                1,
            ),
            fault(
                "recovered",
                None,
                vec![w("RedisStreamsGroupStopped"), w("RedisStreamsLagEstimated")],
                &recovered_may,
                vec![w("RedisStreamsGroupStopped")],
                1,
            ),
            fault(
                "outpace",
                None,
                vec![
                    w("RedisStreamsProductionOutpacingConsumptionEstimated"),
                    w("RedisStreamsLagEstimated"),
                ],
                &[],
                vec![],
                0,
            ),
            fault(
                "outpace-xdel",
                None,
                vec![
                    w("RedisStreamsProductionOutpacingConsumptionEstimated"),
                    w("RedisStreamsLagEstimated"),
                ],
                &[],
                vec![],
                0,
            ),
            // A loss 6.2 cannot see.
            fault("trim-catchup", None, vec![], &[], vec![], 0),
            fault("delete-unread", None, vec![], &[], vec![], 0),
        ]);
    }
    faults
}

/// The infrastructure faults, each on its own target or exporter.
pub fn infrastructure(main: &str, shortlived: &str) -> Vec<Fault> {
    let on_target = |scenario: &str,
                     instance: &str,
                     target: &str,
                     must: Vec<Want>,
                     may: &[&'static str],
                     max: usize,
                     since: Since| Fault {
        scenario: scenario.to_string(),
        server: "-".to_string(),
        selector: vec![
            ("instance", instance.to_string()),
            ("target", target.to_string()),
        ],
        notified: must.clone(),
        must_fire: must,
        may_fire: may.to_vec(),
        max_notifications: max,
        since,
    };
    vec![
        Fault {
            scenario: "exporter process killed".to_string(),
            server: "-".to_string(),
            selector: vec![("instance", shortlived.to_string())],
            must_fire: vec![want("RedisStreamsExporterDown")],
            may_fire: vec![],
            notified: vec![want("RedisStreamsExporterDown")],
            max_notifications: 1,
            since: Since::ExporterKilled,
        },
        on_target(
            "redis-server killed",
            main,
            "down",
            vec![want("RedisStreamsTargetDown")],
            &[],
            1,
            Since::RedisKilled,
        ),
        on_target(
            "incompatible proxy (XINFO STREAM without length)",
            main,
            "proxy",
            vec![want_on("RedisStreamsProbeFailing", &[("probe", "stream")])],
            &["RedisStreamsProbeFailing"],
            1,
            Since::Exporters,
        ),
        on_target(
            "many-streams over max_streams",
            main,
            "capped",
            vec![want("RedisStreamsStreamsDropped")],
            &[],
            1,
            Since::Scenarios,
        ),
        on_target(
            "evictable (Valkey, allkeys-lru)",
            main,
            "evictable",
            vec![want_on(
                "RedisStreamsEvictablePendingEntries",
                &[("maxmemory_policy", "allkeys-lru")],
            )],
            &[],
            1,
            Since::Scenarios,
        ),
    ]
}

/// Faults on the exporters with their own tight limits (`starved`, `slowscan`).
pub fn tight(starved: &str, slowscan: &str) -> Vec<Fault> {
    vec![
        Fault {
            scenario: "many-streams + commands_per_second 2".to_string(),
            server: "-".to_string(),
            selector: vec![("instance", starved.to_string())],
            must_fire: vec![
                want_on("RedisStreamsProbeStale", &[("probe", "stream")]),
                want("RedisStreamsCommandBudgetShort"),
            ],
            // Every probe of the starved target waits on the rate limit. The probes below the
            // stream poll are stretched on purpose: their staleness must not fire at all (the
            // rule leaves them out while the commands wait; an inhibition by the budget alert
            // alone came too late, and they were notified as a second ticket).
            may_fire: vec![],
            notified: vec![want_on("RedisStreamsProbeStale", &[("probe", "stream")])],
            max_notifications: 1,
            since: Since::Scenarios,
        },
        Fault {
            scenario: "big-pel + pending_entries_per_second 10".to_string(),
            server: "-".to_string(),
            selector: vec![("instance", slowscan.to_string())],
            must_fire: vec![want_on(
                "RedisStreamsPendingScanStale",
                &[("stream", "slowscan:big"), ("group", "workers")],
            )],
            may_fire: vec![],
            notified: vec![want("RedisStreamsPendingScanStale")],
            max_notifications: 1,
            since: Since::Scenarios,
        },
    ]
}

/// The two exporters with default target names (one per Redis, no configuration file), both
/// running the `stopped` scenario under the same stream name. The first one's Redis is
/// stopped early: it pages `RedisStreamsTargetDown` and nothing else; the second pages its
/// stopped group later, while the first's target is down, unmuted.
pub fn pair(job: &str, a: (&str, &str), b: (&str, &str)) -> Vec<Fault> {
    let side = |name: &str,
                (instance, target): (&str, &str),
                alert: Want,
                may_fire: &[&'static str],
                since: Since| Fault {
        scenario: format!("default-named exporter {name}"),
        server: "redis70".to_string(),
        selector: vec![
            ("job", job.to_string()),
            ("instance", instance.to_string()),
            ("target", target.to_string()),
        ],
        must_fire: vec![alert.clone()],
        may_fire: may_fire.to_vec(),
        notified: vec![alert],
        max_notifications: 1,
        since,
    };
    vec![
        side(
            "A (its Redis stopped)",
            a,
            want("RedisStreamsTargetDown"),
            &[],
            Since::PairKilled,
        ),
        side(
            "B",
            b,
            want_on("RedisStreamsGroupStopped", &[("stream", "q:stopped")]),
            // Consequences of the stopped group, muted by its page: these exporters run the
            // default schedule scaled like the rules, so the page comes first as it does with
            // the shipped timings.
            &[
                "RedisStreamsProductionOutpacingConsumption",
                "RedisStreamsLagSecondsHigh",
            ],
            Since::Scenarios,
        ),
    ]
}

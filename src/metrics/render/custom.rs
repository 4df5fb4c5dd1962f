//! The families the renderer writes by hand ([`Custom`]): their labels go
//! beyond one series per item of a catalog source, or they are about the
//! render itself; and the outer join by which a family joins what two
//! probes know of the same groups without collecting either.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::Ordering;

use super::renderer::{
    OTHER_CONSUMERS, Renderer, consumer_sample, full_series, group_labels, group_writes, groups_of,
    writes,
};
use super::section::SectionCounts;
use crate::metrics::catalog::{Custom, Lean};
use crate::metrics::text::{Family, write_value};
use crate::snapshot::{PelScan, ScanState, TargetSnapshot};
use crate::vocab::{ErrorKind, ReconnectReason, SkipKind};

fn last_scan(scan: &ScanState) -> Option<&PelScan> {
    scan.last.as_deref()
}

impl Renderer<'_> {
    /// Writes the samples of the custom family `custom`.
    pub(super) fn custom<W: Write>(&self, f: &mut Family<'_, W>, custom: Custom) {
        match custom {
            Custom::LostEntries => self.by_cause(f, |gs| gs.lost),
            Custom::LastLoss => self.last_loss(f),
            Custom::PossiblyLost => self.by_cause(f, |gs| gs.possibly_lost),
            Custom::LossUnproven => self.loss_unproven(f),
            Custom::Status => self.status(f),
            Custom::OldestPendingAge => self.oldest_pending_age(f),
            Custom::Poison => self.poison(f),
            Custom::Nacked => {
                for t in &self.up {
                    for ((s, g), &n) in t.nacked.iter() {
                        if group_writes(t, s, g, Lean::Unless(0.0), n as f64) {
                            f.sample(&group_labels(t, s, g), n as f64);
                        }
                    }
                }
            }
            Custom::PendingByIdle => self.pending_by_idle(f),
            Custom::PendingByDeliveryCount => self.pending_by_delivery_count(f),
            Custom::ConsumerPending => self.consumer_pending(f),
            Custom::TargetInfo => self.target_info(f),
            Custom::PageSizes => self.by_command(f, |t| {
                t.stats
                    .page_sizes
                    .iter()
                    .map(|(c, n)| (*c, f64::from(*n)))
                    .collect()
            }),
            Custom::Commands => self.by_command(f, |t| {
                t.stats
                    .commands
                    .iter()
                    .map(|(c, n)| (*c, *n as f64))
                    .collect()
            }),
            Custom::Errors => self.errors(f),
            Custom::Reconnects => self.reconnects(f),
            Custom::ItemsSkipped => self.items_skipped(f),
            Custom::TargetReady => {
                for t in self.targets {
                    let ready = if t.ready { 1.0 } else { 0.0 };
                    f.sample(&[("target", t.name.as_bytes())], ready);
                }
            }
            Custom::BuildInfo => {
                let labels = [
                    ("version", self.build.version.as_bytes()),
                    ("revision", self.build.revision.as_bytes()),
                    ("build_date", self.build.build_date.as_bytes()),
                ];
                f.sample(&labels, 1.0);
            }
            Custom::LabelsShortened => f.sample(&[], self.before.borrow().shortened as f64),
            // Written by `series`, which needs the counts of the render so far.
            Custom::Series => {}
            Custom::ProbeRequests => {
                let counters = &self.exporter.multi_target;
                // Only when /probe is on (its cap is then at least 1).
                if counters.max_targets.load(Ordering::Relaxed) > 0 {
                    let requests = counters.requests.lock().unwrap_or_else(|p| p.into_inner());
                    for (result, n) in requests.iter() {
                        f.sample(&[("result", result.as_bytes())], *n as f64);
                    }
                }
            }
        }
    }

    /// One series per cause of each group's entries counted by `counts`;
    /// in lean series only the causes that counted some (a loss alert reads
    /// the last loss's time beside `increase()`, which cannot see the rise
    /// of a series that appears with its first loss).
    fn by_cause<W: Write>(
        &self,
        f: &mut Family<'_, W>,
        counts: fn(&crate::snapshot::GroupState) -> Option<crate::loss::ByCause>,
    ) {
        for (t, s, st, g, gs) in groups_of(&self.up) {
            let Some(lost) = counts(gs) else {
                continue;
            };
            let [l1, l2, l3] = group_labels(t, s, g);
            for (cause, n) in lost.by_label() {
                if writes(st, Lean::Unless(0.0), n as f64, gs.pending) {
                    f.sample(&[l1, l2, l3, ("cause", cause.as_bytes())], n as f64);
                }
            }
        }
    }

    fn last_loss<W: Write>(&self, f: &mut Family<'_, W>) {
        for (t, s, _, g, gs) in groups_of(&self.up) {
            let [l1, l2, l3] = group_labels(t, s, g);
            let times = gs.lost_at;
            for (cause, at_ms) in times.by_label() {
                if let Some(ms) = at_ms {
                    f.sample(
                        &[l1, l2, l3, ("cause", cause.as_bytes())],
                        ms as f64 / 1000.0,
                    );
                }
            }
        }
    }

    fn loss_unproven<W: Write>(&self, f: &mut Family<'_, W>) {
        for (t, s, _, g, gs) in groups_of(&self.up) {
            let [l1, l2, l3] = group_labels(t, s, g);
            for (reason, n) in gs.loss_unproven.by_reason() {
                if n > 0 {
                    f.sample(&[l1, l2, l3, ("reason", reason.as_bytes())], n as f64);
                }
            }
        }
    }

    /// One series per group: its status and the rule that decided it, as
    /// labels of a 1 (kube-state-metrics' `…_reason` families are written
    /// so). A state set would cost six series a group to say one thing.
    fn status<W: Write>(&self, f: &mut Family<'_, W>) {
        for (t, s, _, g, gs) in groups_of(&self.up) {
            let Some(current) = gs.status else {
                continue;
            };
            let reason = gs.status_reason.map_or("", |r| r.label());
            let [l1, l2, l3] = group_labels(t, s, g);
            let labels = [
                l1,
                l2,
                l3,
                ("status", current.label().as_bytes()),
                ("reason", reason.as_bytes()),
            ];
            f.sample(&labels, 1.0);
        }
    }

    fn oldest_pending_age<W: Write>(&self, f: &mut Family<'_, W>) {
        for t in &self.up {
            for key in t.oldest_pending.keys() {
                if let Some(age) = t.oldest_pending_age(key) {
                    f.sample(&group_labels(t, &key.0, &key.1), age);
                }
            }
        }
    }

    /// The larger of the last scan's count and the pending summary's count
    /// among a stuck group's oldest entries.
    fn poison<W: Write>(&self, f: &mut Family<'_, W>) {
        for t in &self.up {
            for (key, scan, head) in outer_join(&t.scans, &t.head_poison) {
                let scanned = scan.and_then(last_scan).map(|s| s.poison);
                let Some(v) = scanned.into_iter().chain(head.copied()).max() else {
                    continue;
                };
                if group_writes(t, &key.0, &key.1, Lean::Unless(0.0), v as f64) {
                    f.sample(&group_labels(t, &key.0, &key.1), v as f64);
                }
            }
        }
    }

    /// Cumulative idle buckets of each group's last PEL scan (when bounds
    /// are configured and the PEL had entries), then `+Inf` with every entry. One label buffer for
    /// the whole family: nothing allocated per group.
    fn pending_by_idle<W: Write>(&self, f: &mut Family<'_, W>) {
        let mut le = Vec::with_capacity(24);
        for t in &self.up {
            for ((s, g), sc) in t.scans.iter() {
                // The distributions are full series only.
                if !full_series(t, s) {
                    continue;
                }
                // No bounds configured, or an empty PEL (no distribution):
                // not exported.
                let Some(scan) =
                    last_scan(sc).filter(|s| !s.idle_bounds.is_empty() && s.entries > 0)
                else {
                    continue;
                };
                let [l1, l2, l3] = group_labels(t, s, g);
                for (bound, n) in scan.by_idle() {
                    le.clear();
                    write_value(&mut le, bound);
                    f.sample(&[l1, l2, l3, ("le", &le)], n as f64);
                }
                f.sample(&[l1, l2, l3, ("le", b"+Inf")], scan.entries as f64);
            }
        }
    }

    /// Cumulative delivery-count buckets, as [`Self::pending_by_idle`].
    fn pending_by_delivery_count<W: Write>(&self, f: &mut Family<'_, W>) {
        let mut le = Vec::with_capacity(24);
        for t in &self.up {
            for ((s, g), sc) in t.scans.iter() {
                if !full_series(t, s) {
                    continue;
                }
                let Some(scan) =
                    last_scan(sc).filter(|s| !s.delivery_bounds.is_empty() && s.entries > 0)
                else {
                    continue;
                };
                let [l1, l2, l3] = group_labels(t, s, g);
                for (bound, n) in scan.by_delivery_count() {
                    le.clear();
                    le.extend_from_slice(itoa::Buffer::new().format(bound).as_bytes());
                    f.sample(&[l1, l2, l3, ("le", &le)], n as f64);
                }
                f.sample(&[l1, l2, l3, ("le", b"+Inf")], scan.entries as f64);
            }
        }
    }

    /// Each consumer's entries (in lean series those of the consumers
    /// that hold some or carry a rewritten name), then what the consumers
    /// beyond the cap hold together (in lean series when they hold some).
    fn consumer_pending<W: Write>(&self, f: &mut Family<'_, W>) {
        for t in &self.up {
            for ((s, g), cs) in t.consumers.iter() {
                let labels = group_labels(t, s, g);
                let full = full_series(t, s);
                for consumer in cs.top.iter().filter(|c| full || c.in_lean()) {
                    let c = &consumer.info;
                    consumer_sample(f, labels, &c.name, c.pending as f64);
                }
                if let Some(other) = cs.other_pending.filter(|&n| full || n > 0) {
                    let consumer = Some(("consumer", OTHER_CONSUMERS));
                    f.sample_with_literal(&labels, consumer, other as f64);
                }
            }
        }
    }

    /// Each target's series in this answer: those counted so far, and its
    /// own series of this family, which every family after it would add to
    /// (it is the catalog's last per-target family).
    pub(super) fn series<W: Write>(&self, f: &mut Family<'_, W>, so_far: &SectionCounts) {
        for t in self.targets {
            let n = so_far.series.get(t.name.as_bytes()).copied().unwrap_or(0);
            f.sample(&[("target", t.name.as_bytes())], (n + 1) as f64);
        }
    }

    fn target_info<W: Write>(&self, f: &mut Family<'_, W>) {
        for t in &self.up {
            if let Some(i) = &t.server {
                let labels = [
                    ("target", t.name.as_bytes()),
                    ("server", i.server.as_bytes()),
                    ("version", i.version.as_bytes()),
                    ("mode", i.mode.as_bytes()),
                    ("maxmemory_policy", i.maxmemory_policy.as_bytes()),
                ];
                f.sample(&labels, 1.0);
            }
        }
    }

    /// One series per command of every target, from `values`.
    fn by_command<W: Write>(
        &self,
        f: &mut Family<'_, W>,
        values: impl Fn(&TargetSnapshot) -> Vec<(&'static str, f64)>,
    ) {
        for t in self.targets {
            for (command, v) in values(t) {
                let labels = [
                    ("target", t.name.as_bytes()),
                    ("command", command.as_bytes()),
                ];
                f.sample(&labels, v);
            }
        }
    }

    /// Every kind for every target, 0 included.
    fn items_skipped<W: Write>(&self, f: &mut Family<'_, W>) {
        for t in self.targets {
            for kind in SkipKind::ALL {
                let n = t.stats.skipped.get(kind.label()).copied().unwrap_or(0);
                let labels = [
                    ("target", t.name.as_bytes()),
                    ("kind", kind.label().as_bytes()),
                ];
                f.sample(&labels, n as f64);
            }
        }
    }

    /// Every reason for every target, 0 included.
    fn reconnects<W: Write>(&self, f: &mut Family<'_, W>) {
        for t in self.targets {
            for reason in ReconnectReason::ALL {
                let n = t.stats.reconnects.get(reason.label()).copied().unwrap_or(0);
                let labels = [
                    ("target", t.name.as_bytes()),
                    ("reason", reason.label().as_bytes()),
                ];
                f.sample(&labels, n as f64);
            }
        }
    }

    /// Every kind for every target, 0 included.
    fn errors<W: Write>(&self, f: &mut Family<'_, W>) {
        for t in self.targets {
            for kind in ErrorKind::ALL {
                let n = t.stats.errors.get(kind.label()).copied().unwrap_or(0);
                let labels = [
                    ("target", t.name.as_bytes()),
                    ("kind", kind.label().as_bytes()),
                ];
                f.sample(&labels, n as f64);
            }
        }
    }
}

/// The keys of two maps in order, each with the values the maps hold.
fn outer_join<'m, K: Ord, A, B>(
    a: &'m BTreeMap<K, A>,
    b: &'m BTreeMap<K, B>,
) -> impl Iterator<Item = (&'m K, Option<&'m A>, Option<&'m B>)> {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    std::iter::from_fn(move || {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (Some((ka, _)), Some((kb, _))) => ka.cmp(kb),
        };
        Some(match order {
            std::cmp::Ordering::Less => {
                let (k, v) = a.next()?;
                (k, Some(v), None)
            }
            std::cmp::Ordering::Greater => {
                let (k, v) = b.next()?;
                (k, None, Some(v))
            }
            std::cmp::Ordering::Equal => {
                let (k, va) = a.next()?;
                (k, Some(va), b.next().map(|(_, vb)| vb))
            }
        })
    })
}

//! The lag of a group from everything the probe read: settled by its
//! position, Redis's trusted count, a count of the stream's entries, or the
//! estimate clamped into the counters' bounds.

use super::position::Position;
use super::{Evidence, LagFigure, LagMethod, Reading, UndeliveredSample};

impl Reading<'_> {
    /// Computes the lag from XINFO, the sample [`Self::sample_request`]
    /// asked for, and the estimator's evidence.
    pub fn compute(
        &self,
        sample: Option<&UndeliveredSample>,
        evidence: &Evidence<'_>,
    ) -> LagFigure {
        let settled = |lag: u64, method, trimmed, gone, behind| LagFigure {
            lag: Some(lag),
            method,
            trimmed_undelivered: trimmed,
            unread_gone: gone,
            first_undelivered: None,
            behind_first_entry: behind,
            ahead_of_stream: false,
        };
        let reported_or_counted = if self.group.lag.is_some() {
            LagMethod::Reported
        } else {
            LagMethod::Counted
        };
        match self.position() {
            Position::Ahead => LagFigure {
                ahead_of_stream: true,
                ..settled(0, reported_or_counted, Some(0), None, false)
            },
            Position::Empty => {
                // Anything generated after the group's position was removed
                // before it read it.
                let gone = self.gone(0);
                settled(0, reported_or_counted, gone, gone, false)
            }
            Position::CaughtUp => settled(0, reported_or_counted, Some(0), self.gone(0), false),
            Position::Behind(first) => {
                let length = self.stream.length;
                let gone = self.gone(length);
                LagFigure {
                    first_undelivered: Some(first),
                    ..settled(length, LagMethod::TrimCorrected, gone, gone, true)
                }
            }
            Position::Inside => self.inside(sample, evidence),
        }
    }

    fn inside(&self, sample: Option<&UndeliveredSample>, evidence: &Evidence<'_>) -> LagFigure {
        // Inside the window no undelivered entry can have been trimmed
        // (trimming removes from the head).
        let figure = |lag: Option<u64>, method, first_undelivered| LagFigure {
            lag,
            method,
            trimmed_undelivered: Some(0),
            unread_gone: None,
            first_undelivered,
            behind_first_entry: false,
            ahead_of_stream: false,
        };
        let first_undelivered = sample.and_then(|s| s.ids.first().copied());
        let proof = |s: &UndeliveredSample, lag: u64| {
            if s.changed_meanwhile {
                None
            } else {
                self.gone(lag)
            }
        };
        if let Some((lag, method)) = self.trusted_report() {
            // Redis's count, taken with the counters it came with. The
            // sample read after it (one ID, for the age) may have been
            // changed meanwhile by consumers that read and delete: it never
            // overrides a count known to be right.
            let first_undelivered = first_undelivered
                .or_else(|| self.unmoved_first_undelivered())
                .filter(|_| lag > 0);
            return LagFigure {
                unread_gone: self.gone(lag),
                ..figure(Some(lag), method, first_undelivered)
            };
        }
        if let Some(s) = sample.filter(|s| s.is_complete()) {
            // The sample holds every undelivered entry: the stream itself is
            // the truth, whatever Redis counted.
            let lag = s.ids.len() as u64;
            return LagFigure {
                unread_gone: proof(s, lag),
                ..figure(Some(lag), self.counted(lag), first_undelivered)
            };
        }
        if let Some((s, lag)) = sample.and_then(|s| Some((s, s.counted_with_tail()?))) {
            return LagFigure {
                unread_gone: proof(s, lag),
                ..figure(Some(lag), self.counted(lag), first_undelivered)
            };
        }
        let Some(sample) = sample.filter(|s| !s.ids.is_empty()) else {
            return figure(None, LagMethod::Unknown, first_undelivered);
        };
        let lag = self.estimate(sample, evidence).map(|e| {
            let k = sample.ids.len() as u64;
            let (low, high) = self
                .counter_bounds()
                .map_or((k, self.stream.length), |(l, h)| (l.max(k), h.max(k)));
            (e.round() as u64).clamp(low, high.max(low))
        });
        let method = if lag.is_some() {
            LagMethod::Estimated
        } else {
            LagMethod::Unknown
        };
        figure(lag, method, first_undelivered)
    }

    /// How a lag counted in the stream is labelled: Redis's own figure when
    /// it said the same; Redis's figure re-derived when it gave one that
    /// could not be trusted (checked against the stream, so
    /// exact); the fallback's count (`lag_estimated 1`: not Redis's) when Redis
    /// gave none.
    fn counted(&self, lag: u64) -> LagMethod {
        match self.group.lag {
            Some(reported) if reported == lag => LagMethod::Reported,
            Some(_) => LagMethod::Rederived,
            None => LagMethod::Counted,
        }
    }
}

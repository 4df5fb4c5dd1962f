//! The budget's log line: what it last said about a target, and when to
//! say something new. A pure rule, table-tested.

/// What the budget log line last said about a target: a short budget is
/// logged with the `commands_per_second` that would cover every probe's
/// interval, so an operator can copy the figure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BudgetNotice {
    /// The budget covers every probe's interval.
    Covers,
    /// Too short; this budget was advised.
    Short {
        /// Commands per second that would cover the need when logged.
        advised: f64,
    },
}

impl BudgetNotice {
    /// A need that grows past the last advice by more than this fraction is
    /// logged again; smaller swings are the run-to-run noise of command
    /// counts (the first figure is logged as soon as every probe has run
    /// once, before the slow probes' runs settle).
    const GROWTH: f64 = 0.1;

    /// The notice to log now, for `needed` commands per second against
    /// `budget`, if it says something new after `last`: the budget became
    /// short, or covers again, or the need outgrew the last advice (which
    /// would then no longer cover it). A need that falls while still short
    /// keeps the higher advice: it still covers.
    pub fn next(last: Option<BudgetNotice>, needed: f64, budget: f64) -> Option<BudgetNotice> {
        let now = if needed > budget {
            BudgetNotice::Short {
                advised: needed.ceil(),
            }
        } else {
            BudgetNotice::Covers
        };
        match (last, now) {
            (Some(BudgetNotice::Short { advised }), BudgetNotice::Short { .. }) => {
                (needed > advised * (1.0 + Self::GROWTH)).then_some(now)
            }
            (Some(BudgetNotice::Covers), BudgetNotice::Covers) => None,
            _ => Some(now),
        }
    }
}

//! When the budget log line speaks: on a change of verdict, and again when the
//! need outgrows the figure it advised.

use super::BudgetNotice::{self, Covers, Short};

/// Feeds `needs` (commands per second) against a budget of 500 and returns
/// the notices that would be logged.
fn logged(needs: &[f64]) -> Vec<BudgetNotice> {
    let mut last = None;
    let mut lines = Vec::new();
    for &needed in needs {
        if let Some(notice) = BudgetNotice::next(last, needed, 500.0) {
            lines.push(notice);
            last = Some(notice);
        }
    }
    lines
}

#[test]
fn a_short_budget_is_logged_once_and_again_when_the_need_outgrows_the_advice() {
    // The benchmark at 3,000 streams: 618/s when every probe had run once,
    // 720/s once the slow probes' runs settled.
    assert_eq!(
        logged(&[618.0, 640.0, 679.0, 720.0, 719.0, 730.0]),
        [Short { advised: 618.0 }, Short { advised: 720.0 }]
    );
}

#[test]
fn a_need_that_falls_while_short_keeps_the_higher_advice() {
    assert_eq!(
        logged(&[2036.0, 900.0, 1000.0]),
        [Short { advised: 2036.0 }]
    );
}

#[test]
fn covering_again_is_logged_once_and_a_first_cover_is_a_verdict_too() {
    assert_eq!(
        logged(&[300.0, 310.0, 720.5, 400.0, 450.0, 800.0]),
        [
            Covers,
            Short { advised: 721.0 },
            Covers,
            Short { advised: 800.0 }
        ]
    );
}

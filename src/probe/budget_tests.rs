//! When the budget log line speaks: on a change of verdict, and again when the
//! need outgrows the figure it advised; and what the estimator's walks may
//! spend of the budget in one stream poll.

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

#[test]
fn the_walks_never_spend_more_than_the_rate_limit_allows_in_one_interval() {
    use super::stream::walk_budget;
    use std::time::Duration;
    let interval = Duration::from_secs(15);
    // Defaults: a tenth of 500/s over 15 s.
    assert_eq!(walk_budget(500, interval), 750);
    // A short interval still walks 200 commands when the limit allows them.
    assert_eq!(walk_budget(500, Duration::from_secs(1)), 200);
    // 10 commands a second allow 150 in 15 s: the floor of 200 gives way.
    assert_eq!(walk_budget(10, interval), 150);
    assert_eq!(walk_budget(1, Duration::from_secs(2)), 2);
}

//! When the budget log line speaks: on a change of verdict, and again when the
//! need outgrows the figure it advised; and what the estimator's walks may
//! spend of the budget in one stream poll.

use crate::probe::state::BudgetNotice::{self, Covers, Short};

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
    use crate::probe::stream::walk_budget;
    use std::time::Duration;
    let interval = Duration::from_secs(15);
    // Defaults: a tenth of 500/s over 15 s.
    assert_eq!(walk_budget(500, interval), 750);
    // A short interval still walks, up to a fifth of what it allows.
    assert_eq!(walk_budget(500, Duration::from_secs(1)), 100);
    assert_eq!(walk_budget(500, Duration::from_secs(3)), 200);
    // 10 commands a second allow 150 in 15 s: the floor of 200 gives way.
    assert_eq!(walk_budget(10, interval), 30);
    assert_eq!(walk_budget(1, Duration::from_secs(2)), 1);
}

mod group_cost {
    use crate::config::{CliOverrides, from_str};
    use crate::probe::groups::{GroupCost, GroupLine, idle_every};

    fn line(pending: u64, consumers: u64, work: bool) -> GroupLine {
        GroupLine {
            pending,
            consumers,
            work,
        }
    }

    /// At the defaults (30 s pending summary and consumers, 5 min PEL scan,
    /// pipelines of 100), what each kind of group costs per second.
    #[test]
    fn idle_groups_cost_little_or_nothing() {
        let config = from_str(
            "c.toml",
            "[[targets]]\nname = \"t\"\nurl = \"redis://127.0.0.1:6379\"\n",
            &CliOverrides::default(),
        )
        .unwrap();
        let idle: Vec<GroupLine> = (0..100).map(|_| line(0, 0, false)).collect();
        let cost = GroupCost::of(&idle, &config);
        assert_eq!((cost.nothing_to_ask, cost.per_second), (100, 0.0));
        // Asked every run as before: 100 summaries and 100 consumer lists
        // (each with 2 TIME) every 30 s, 100 pages every 5 minutes.
        let before = 102.0 / 30.0 + 102.0 / 30.0 + 100.0 / 300.0;
        assert!((cost.every_group_per_second - before).abs() < 1e-9);

        let with_consumers: Vec<GroupLine> = (0..100).map(|_| line(0, 2, false)).collect();
        let cost = GroupCost::of(&with_consumers, &config);
        assert_eq!(cost.idle_with_consumers, 100);
        // 20 lists a run, with their TIME.
        assert!((cost.per_second - 21.0 / 30.0).abs() < 1e-9, "{cost:?}");

        // Many idle groups with consumers: their reads take a twentieth of
        // the budget (25 lists a second at 500/s), each group read more
        // rarely than one run in five.
        assert_eq!(idle_every(3_750, &config), 5);
        assert_eq!(idle_every(3_751, &config), 6);
        let many: Vec<GroupLine> = (0..100_000).map(|_| line(0, 1, false)).collect();
        let cost = GroupCost::of(&many, &config);
        assert_eq!(cost.idle_every, 134);
        assert!(
            cost.per_second <= 25.5 && cost.per_second > 24.0,
            "{cost:?}"
        );

        let busy = [line(250, 1, true), line(0, 1, true), line(0, 0, true)];
        let cost = GroupCost::of(&busy, &config);
        assert_eq!((cost.with_work, cost.nothing_to_ask), (2, 1));
        let page = f64::from(config.limits.pending_page);
        let pages = (250.0 / page).ceil();
        // The pending group's summary and its oldest entries (each with its
        // TIME), two consumer lists with one TIME.
        let want = 4.0 / 30.0 + 3.0 / 30.0 + pages / 300.0;
        assert!((cost.per_second - want).abs() < 1e-9, "{cost:?}");
    }
}

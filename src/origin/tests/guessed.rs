//! Costs none declared, with fixed times: a window of tokens filled in
//! rounds, each with headroom for the stray of the costs not yet counted,
//! topped up from the server's count once answers are back.

use super::*;

/// A success to a request sent `sent_ago` before `now`, stating `tokens`
/// left of 1000 until the window's end at `until`.
fn stating(now: Duration, until: Duration, tokens: u64, sent_ago: Duration) -> Outcome {
    Outcome::Quota {
        remaining: 1000,
        reset_in: until - now,
        limit: None,
        window: None,
        sent_ago,
        tokens: Some(Statement {
            remaining: tokens,
            reset_in: until - now,
            limit: Some(1000),
            ..Statement::default()
        }),
    }
}

/// An origin whose first window (0 to 1 s) fell by 80 a request over ten
/// answers, none of its requests out: the mean is 80, learned from ten
/// costs.
fn learned() -> OriginState {
    let mut o = OriginState::new(ms(0));
    for i in 0..=10_u64 {
        let t = ms(10 * i);
        o.observe(ON, t, stating(t, ms(1000), 1000 - 80 * i, ms(1)));
    }
    assert_eq!((o.tokens.mean, o.tokens.samples), (80, 10));
    o
}

/// Asks at `now` until a task is not sent at once: how many were, and
/// what the next one was told.
fn burst(o: &mut OriginState, now: Duration) -> (usize, Admission) {
    let mut sent = 0;
    loop {
        match o.admit_costing(ON, now, LONG, 0) {
            Admission::Now | Admission::Reopened => sent += 1,
            other => return (sent, other),
        }
    }
}

#[test]
fn a_renewed_window_leaves_room_for_the_stray_of_its_costs() {
    let mut o = learned();
    // 1000 tokens at 80 a request pay for 12, but their costs are not
    // known: nine leave, and the next asks again once answers may be
    // back.
    assert_eq!(burst(&mut o, ms(1000)), (9, Admission::QueueAhead(ms(2))));
    assert_eq!(o.tokens.unanswered, 9);
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
}

#[test]
fn the_answers_top_the_window_up_from_the_servers_count() {
    let mut o = learned();
    assert_eq!(burst(&mut o, ms(1000)).0, 9);
    // They cost 50 each: the server counts 550 left, where the mean
    // counted 280.
    for i in 1..=9_u64 {
        let t = ms(1000 + i);
        o.observe(ON, t, stating(t, ms(2000), 1000 - 50 * i, ms(1)));
    }
    assert_eq!(o.tokens.quota.left, 550);
    // A second, smaller round leaves at once.
    assert_eq!(burst(&mut o, ms(1010)).0, 4);
    // While some are out, what is left counts the mean for each.
    let t = ms(1011);
    o.observe(ON, t, stating(t, ms(2000), 480, ms(1)));
    assert_eq!(o.tokens.quota.left, 480 - 3 * 80);
}

#[test]
fn with_none_out_a_window_short_of_the_headroom_is_spent() {
    let mut o = learned();
    assert_eq!(burst(&mut o, ms(1000)).0, 9);
    for i in 1..=9_u64 {
        let t = ms(1000 + i);
        o.observe(ON, t, stating(t, ms(2000), 1000 - 96 * i, ms(1)));
    }
    // 136 left: one request of 80 would leave 56, less than its stray:
    // the window is spent until its reset.
    assert_eq!(
        o.admit_costing(ON, ms(1010), LONG, 0),
        Admission::QuotaHeld(ms(990))
    );
    // The next window is whole again, and its mean the last one's fall.
    assert_eq!(burst(&mut o, ms(2000)).0, 7);
    assert_eq!((o.tokens.mean, o.tokens.samples), (96, 8));
}

#[test]
fn a_mean_read_while_answers_cross_is_not_adopted() {
    let mut o = learned();
    assert_eq!(burst(&mut o, ms(1000)).0, 9);
    // The first answers back are of the first and the sixth arrivals:
    // the count fell by five costs of 60 between them, over one answer.
    o.observe(ON, ms(1003), stating(ms(1003), ms(2000), 940, ms(3)));
    o.observe(ON, ms(1004), stating(ms(1004), ms(2000), 640, ms(4)));
    assert_eq!(o.tokens.mean, 80);
    // Seven out: the server's 640, less 80 for each.
    assert_eq!(o.tokens.quota.left, 640 - 7 * 80);
}

#[test]
fn what_was_out_of_the_last_window_is_not_out_of_the_next() {
    let mut o = learned();
    assert_eq!(burst(&mut o, ms(1000)).0, 9);
    // None of the nine is ever answered (timed out): the next window
    // renews whole, and its burst is as large.
    assert_eq!(burst(&mut o, ms(2000)).0, 9);
    // A late answer to a request of the last window frees nothing of it.
    o.observe(ON, ms(2001), stating(ms(2001), ms(3000), 920, ms(1002)));
    assert_eq!(o.tokens.unanswered, 9);
}

#[test]
fn a_rejection_stating_too_few_tokens_left_is_the_cost_quotas() {
    let mut o = learned();
    assert_eq!(burst(&mut o, ms(1000)).0, 9);
    // The last arrival is rejected first: the server counts 120 left,
    // less than a request alone needs; none other is back yet.
    o.observe(
        ON,
        ms(1003),
        Outcome::CostStated {
            sent_ago: ms(3),
            tokens: Statement {
                remaining: 120,
                reset_in: ms(997),
                limit: Some(1000),
                ..Statement::default()
            },
        },
    );
    o.observe(
        ON,
        ms(1003),
        Outcome::Pushback {
            retry_in: Some(ms(997)),
            hold_at_least: None,
        },
    );
    assert_eq!(o.tokens.unanswered, 8);
    // The token quota governs from its reset: no pace in requests.
    assert_eq!(o.admit_costing(ON, ms(2000), LONG, 0), Admission::Reopened);
    assert_eq!(o.rate(), 0.0, "{:?}", o.pace.mode);
}

#[test]
fn a_whole_window_takes_a_request_its_headroom_would_exceed() {
    // 100 tokens a window, requests of 80 learned: one and its stray do
    // not fit, but a whole window is as full as it gets.
    let mut o = OriginState::new(ms(0));
    for (i, left) in [100, 20].into_iter().enumerate() {
        let t = ms(10 * i as u64);
        let mut answer = stating(t, ms(1000), left, ms(1));
        if let Outcome::Quota {
            tokens: Some(st), ..
        } = &mut answer
        {
            st.limit = Some(100);
        }
        o.observe(ON, t, answer);
    }
    assert_eq!(o.tokens.mean, 80);
    assert_eq!(burst(&mut o, ms(1000)).0, 1);
    assert_eq!(burst(&mut o, ms(2000)).0, 1);
}

//! Seeds the simulation failed on, pinned: each reruns its whole run and
//! asserts every rule.

use super::assert_seed;

/// 12 GETs at once to an origin that answers after ~3 s: the others left
/// one `first_contact` after another, not within one.
#[test]
fn first_contact_wait_is_bounded_seed_110() {
    assert_seed(110);
}

/// A declared per-minute quota (61.2 s window) under `max_wait` 60 s:
/// tasks whose deadline allows their slot are refused with
/// `origin_gate_closed`.
#[test]
fn declared_quota_slot_within_deadline_is_waited_for_seed_55() {
    assert_seed(55);
}

/// A declared request quota of 1 a second beside a declared token quota:
/// two requests left within 3 ms.
#[test]
fn every_declared_quota_binds_seed_95() {
    assert_seed(95);
}

/// Tasks returned `deadline_exhausted` after their deadline (here behind a
/// store answering in up to 250 ms each way): a gate's wait, counted from
/// the store's answer, ended past it.
#[test]
fn no_wait_ends_past_the_deadline_seed_35() {
    assert_seed(35);
}

/// `Quota::new(n, Duration::MAX)` passes validation; the first GETs panic.
#[test]
fn an_extreme_declared_quota_does_not_panic_seed_922() {
    assert_seed(922);
}

/// express-rate-limit's draft-8 fixed window (5 a second, `t` in whole
/// seconds): sent 2 ms before the reset the window's last answer stated,
/// after the earlier one its first answer stated (the check had taken the
/// last for the server's time; the earliest is).
#[test]
fn the_earliest_reset_stated_for_a_window_is_the_servers_seed_97() {
    assert_seed(97);
}

/// GitHub-like (`x-ratelimit-reset` epoch seconds, `403` when spent): a
/// rejection by the spent quota gave its unit back, and its retry left
/// 290 ms before the reset a success had stated.
#[test]
fn a_rejection_gives_back_no_unit_of_a_spent_quota_seed_1461() {
    assert_seed(1461);
}

/// Discord-like fixed window: after an answer stated 2 left in the
/// window, 3 more went into it (a stated quota overspent).
#[test]
fn a_stated_quota_is_not_overspent_seed_361() {
    assert_seed(361);
}

/// A declared bucket (`Quota::per_second(1).refilled()`) overspent.
#[test]
#[ignore = "open: a declared quota's sends closer than its slots behind a slow store (sim/mod.rs, OPEN)"]
fn a_declared_bucket_is_not_overspent_seed_99() {
    assert_seed(99);
}

/// A declared window in units (20 per 61.2 s) overspent: 21 units.
#[test]
fn a_declared_units_window_is_not_overspent_seed_32() {
    assert_seed(32);
}

/// `Coalesced` over a store that never fails answered `store_unavailable`
/// (express-rate-limit-like server, declared quotas).
#[test]
fn a_coalesced_store_without_faults_never_fails_seed_2085() {
    assert_seed(2085);
}

/// GitHub-like GCRA (a burst of 3, one every 2 s): the spent answer's
/// reset (the next unit) was earlier than the reset a success had stated
/// (the bucket full), was dropped, and a request left 2 s before it.
#[test]
fn a_spent_buckets_earlier_reset_holds_seed_1395() {
    assert_seed(1395);
}

/// GitHub-like sliding log, answers applied out of order over a store
/// with latency: the spent answer was taken for an earlier window's, and a
/// request left 1 s before the reset.
#[test]
fn a_spent_answer_applied_late_holds_seed_1834() {
    assert_seed(1834);
}

/// A bucket (2, one every 500 ms): a success's reset (the bucket full)
/// and the spent answer's (the next unit) named the same instant, each
/// rounded up; the crate left at the earlier, after the instant (the check
/// had taken the spent answer's own).
#[test]
fn the_earliest_time_named_for_a_reset_instant_is_the_servers_seed_362() {
    assert_seed(362);
}

/// A declared window (5 per 61.2 s): a pushback's reopening restarted the
/// declared batch, and a whole new one left a second after the first.
#[test]
fn a_reopening_does_not_restart_a_declared_window_seed_1671() {
    assert_seed(1671);
}

/// A declared window (2 per 6 s) beside a stated one: the probe after the
/// stated quota's hold (capped at `max_wait`) left past the declared
/// quota.
#[test]
fn the_probe_after_a_stated_hold_keeps_the_declared_quota_seed_1908() {
    assert_seed(1908);
}

/// A declared bucket (10 a minute): when its last reservation was used,
/// the queue rewound to one interval from then and forgot the burst.
#[test]
fn a_declared_buckets_burst_stays_spent_seed_693() {
    assert_seed(693);
}

/// A declared window in units (20 per 500 ms): units spent at admission
/// for requests that left later, at one instant with another window's.
#[test]
fn declared_units_are_spent_when_the_request_leaves_seed_1335() {
    assert_seed(1335);
}

/// A declared bucket (10 a minute) raised by successes measured its
/// tolerance at the raised rate: a slot came early.
#[test]
fn a_declared_bucket_is_not_raised_seed_617() {
    assert_seed(617);
}

/// A slot handed out again after a reopening, under a declared bucket, was
/// never counted off when used: reserved after the last task.
#[test]
fn a_slot_handed_out_again_is_settled_seed_1259() {
    assert_seed(1259);
}

/// A declared bucket of one a second (a burst of 1): a success raised its
/// rate, and the queue's rewind measured an interval at it: a slot 38 ms
/// early.
#[test]
fn a_declared_bucket_of_one_is_not_raised_seed_5155() {
    assert_seed(5155);
}

/// Successes a coalescing store counted were written without the policy:
/// they raised a declared bucket of 1 per 500 ms, whose next slot then
/// came early.
#[test]
fn counted_successes_do_not_raise_a_declared_bucket_seed_9893() {
    assert_seed(9893);
}

/// Discord-like bucket (2, one every 125 ms, resets in milliseconds): two
/// spent answers 57 ms apart as received named different units' instants;
/// merged as one window's reset, the earlier held, and a request left 1 ms
/// before the later.
#[test]
fn a_buckets_next_units_in_milliseconds_are_different_instants_seed_1513() {
    assert_seed(1513);
}

/// IETF bucket (10, one every 6 s, stated as 10 per 60 s), answers ~3 s
/// late: a spent answer to a request sent before the renewal named an
/// instant after it; dropped as an earlier window's, a request left 3 s
/// before it.
#[test]
fn a_spent_answer_naming_an_instant_after_the_renewal_holds_seed_151() {
    assert_seed(151);
}

/// A declared bucket beside GitHub-like answers: a queue restarted behind
/// slots booked further ahead kept their time as counted off, and its own
/// slots, before it, stayed reserved after the last task.
#[test]
fn a_restarted_queues_slots_are_not_left_reserved_seed_426() {
    assert_seed(426);
}

// Open findings of a 100,000-seed run (in-memory store, no latency), to
// be fixed: each fails today.

/// A stated fixed window (express-rate-limit-like): told 9 left, then 10
/// went into that window.
#[test]
#[ignore = "open: a stated window overspent by one with an in-memory store"]
fn a_stated_window_is_not_overspent_seed_4957() {
    assert_seed(4957);
}

/// A stated fixed window: told 1 left, then 2 went into it.
#[test]
#[ignore = "open: a stated window overspent by one with an in-memory store"]
fn a_stated_window_is_not_overspent_seed_7306() {
    assert_seed(7306);
}

/// A send 0.2 s before a spent quota's reset another task was told 3 ms
/// earlier.
#[test]
#[ignore = "open: a send before a spent quota's reset with an in-memory store"]
fn a_spent_quotas_reset_is_not_anticipated_seed_11278() {
    assert_seed(11278);
}

/// A send at 1.025 s before a spent quota's reset of 12 s told at 83 ms.
#[test]
#[ignore = "open: a send before a spent quota's reset with an in-memory store"]
fn a_spent_quotas_reset_is_not_anticipated_seed_20126() {
    assert_seed(20126);
}

/// A declared bucket (10 per 6 s) overspent with an in-memory store.
#[test]
#[ignore = "open: a declared bucket overspent with an in-memory store"]
fn a_declared_bucket_is_not_overspent_seed_7629() {
    assert_seed(7629);
}

/// Discord: a route's first answer said its bucket was spent; the tasks
/// that had waited for the origin's first answer asked the bucket before
/// the answer's statement was recorded on it (the origin's record, which
/// woke them, came first), and sent into it.
#[test]
fn a_scope_knows_its_statement_before_the_first_contact_ends_seed_407() {
    assert_seed(407);
}

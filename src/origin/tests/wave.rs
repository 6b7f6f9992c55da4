//! The first wave, with fixed times: the tasks that waited for an
//! origin's first answer leave when it comes, and no other task leaves
//! until their answers are in (bounded by `first_contact`), so that a
//! limit no header states (GitHub's secondary limit) holds the origin
//! before any follow-up meets it.

use super::known::FIRST;
use super::*;

/// A task that waited for the first answer (`waited`), or a new one, asks.
fn ask(o: &mut OriginState, now: Duration, waited: bool) -> Admission {
    o.admit_task(FIRST, now, Within::both(LONG), crate::Cost::new(0), waited)
}

/// An origin whose first contact left at 0, with `waiting` tasks told to
/// wait for its answer at 1 ms.
fn contacted(waiting: usize) -> OriginState {
    let mut o = OriginState::new(ms(0));
    assert_eq!(ask(&mut o, ms(0), false), Admission::Now);
    for _ in 0..waiting {
        assert_eq!(ask(&mut o, ms(1), false), Admission::FirstAnswer(ms(2)));
    }
    o
}

/// GitHub's secondary limit: `retry-after: 3`, with the resource's quota
/// left (it holds the origin).
const SECONDARY: Outcome = Outcome::Held {
    retry_in: Duration::from_secs(3),
    stated_here: false,
};

#[test]
fn the_tasks_that_waited_leave_and_the_others_wait_for_their_answers() {
    let mut o = contacted(3);
    // The first answer, 20 ms after the contact left: the three go.
    o.observe(FIRST, ms(20), Outcome::Admitted);
    // A new task (a follow-up of the contact's) waits: at most until the
    // tasks that waited have had time to join (40 ms: as long as the
    // contact was out); an answer recorded meanwhile wakes it sooner.
    assert_eq!(ask(&mut o, ms(20), false), Admission::FirstWave(ms(20)));
    for _ in 0..3 {
        assert_eq!(ask(&mut o, ms(21), true), Admission::Now);
    }
    assert_eq!(ask(&mut o, ms(30), false), Admission::FirstWave(ms(10)));
    o.observe(FIRST, ms(30), Outcome::Admitted);
    o.observe(FIRST, ms(31), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(32), false), Admission::FirstWave(ms(12)));
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
    // All three answered by 35 ms: the tasks that waited had until 40 ms
    // (as long as the contact was out) to join; then everyone goes.
    o.observe(FIRST, ms(35), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(36), false), Admission::FirstWave(ms(4)));
    assert_eq!(ask(&mut o, ms(40), false), Admission::Now);
    assert_eq!(ask(&mut o, ms(40), false), Admission::Now);
}

#[test]
fn a_pushback_in_the_first_wave_holds_the_origin_before_any_follow_up() {
    // A crawl beside GitHub's secondary limit: 31 tasks waited; the first
    // answer states 49 of 50 left; two of the wave meet the secondary limit.
    let mut o = contacted(31);
    let quota = Outcome::Quota {
        remaining: 49,
        reset_in: ms(2000),
        limit: Some(50),
        window: None,
        sent_ago: ms(20),
        tokens: None,
    };
    o.observe(FIRST, ms(20), quota);
    for _ in 0..31 {
        assert_eq!(ask(&mut o, ms(21), true), Admission::Now);
    }
    // Answered 200, 29 of them ask for their next at once: they wait.
    for i in 0..29 {
        o.observe(FIRST, ms(40), Outcome::Admitted);
        let asked = ask(&mut o, ms(40), false);
        assert!(matches!(asked, Admission::FirstWave(_)), "{i}: {asked:?}");
    }
    o.observe(FIRST, ms(41), SECONDARY);
    o.observe(FIRST, ms(41), SECONDARY);
    // The origin is held until the secondary limit's time: no follow-up
    // went into the same second.
    assert_eq!(ask(&mut o, ms(41), false), Admission::GateClosed(ms(3000)));
    assert_eq!(ask(&mut o, ms(3041), false), Admission::Now);
}

#[test]
fn a_wave_whose_answers_never_come_holds_nothing_past_first_contact() {
    let mut o = contacted(2);
    o.observe(FIRST, ms(20), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(21), true), Admission::Now);
    // The other task was dropped before it asked again, and the answer
    // of this one is lost to a transport error.
    assert_eq!(ask(&mut o, ms(300), false), Admission::FirstWave(ms(50)));
    assert_eq!(ask(&mut o, ms(510), false), Admission::FirstWave(ms(10)));
    assert_eq!(ask(&mut o, ms(520), false), Admission::Now);
    // Over for good: a late answer opens nothing.
    o.observe(FIRST, ms(600), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(600), false), Admission::Now);
}

#[test]
fn a_task_that_cannot_wait_for_the_wave_goes_and_counts_in_it() {
    let mut o = contacted(1);
    o.observe(FIRST, ms(20), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(21), true), Admission::Now);
    let hurried = o.admit_task(
        FIRST,
        ms(22),
        Within::both(ms(1)),
        crate::Cost::new(0),
        false,
    );
    assert_eq!(hurried, Admission::Now);
    // One of the two answers is in: the wave is not.
    o.observe(FIRST, ms(30), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(45), false), Admission::FirstWave(ms(25)));
    o.observe(FIRST, ms(46), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(46), false), Admission::Now);
}

#[test]
fn tasks_that_left_beside_the_first_contact_count_in_its_wave() {
    let mut o = contacted(0);
    // One cannot wait, and goes beside the contact; another waits.
    let hurried = o.admit_task(
        FIRST,
        ms(1),
        Within::both(ms(1)),
        crate::Cost::new(0),
        false,
    );
    assert_eq!(hurried, Admission::Now);
    assert_eq!(ask(&mut o, ms(2), false), Admission::FirstAnswer(ms(2)));
    o.observe(FIRST, ms(20), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(21), true), Admission::Now);
    // The hurried task's answer is not the wave's last.
    o.observe(FIRST, ms(25), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(41), false), Admission::FirstWave(ms(21)));
    o.observe(FIRST, ms(42), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(42), false), Admission::Now);
}

#[test]
fn no_wave_follows_a_first_answer_nobody_waited_for() {
    // One task at a time: its next request is not held.
    let mut o = contacted(0);
    o.on_success(ms(20));
    assert_eq!(ask(&mut o, ms(20), false), Admission::Now);
    // Nor one that came after the wait was over (everyone went).
    let mut o = contacted(1);
    assert_eq!(ask(&mut o, ms(500), false), Admission::Now);
    o.observe(FIRST, ms(600), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(600), false), Admission::Now);
    // Nor with the first contact off.
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(ON, ms(0), LONG), Admission::Now);
    assert_eq!(o.admit(ON, ms(0), LONG), Admission::Now);
    o.on_success(ms(20));
    assert_eq!(o.admit(ON, ms(20), LONG), Admission::Now);
}

#[test]
fn a_slow_first_answer_lets_the_wave_join_for_longer() {
    // The contact was out 200 ms: a task of another process was told to
    // ask again within 50 ms, so the wave waits that long for it.
    let mut o = contacted(1);
    assert_eq!(ask(&mut o, ms(150), false), Admission::FirstAnswer(ms(50)));
    o.observe(FIRST, ms(200), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(240), false), Admission::FirstWave(ms(10)));
    assert_eq!(ask(&mut o, ms(250), true), Admission::Now);
    o.observe(FIRST, ms(300), Outcome::Admitted);
    assert_eq!(ask(&mut o, ms(300), false), Admission::Now);
}

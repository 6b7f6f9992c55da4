//! A deterministic simulation, the way FoundationDB and TigerBeetle test:
//! under tokio's paused clock, a simulated server as the innermost
//! middleware (no network), everything drawn from one `u64` seed: the
//! limiters and the headers that state them, the answers' lateness and
//! `Date` skew, the policy, the tasks (keys, methods, arrivals, deadlines,
//! costs, cancellations at any await point) and the store's faults. After
//! each run, `check.rs` asserts what must always hold.
//!
//! `cargo test` runs [`DEFAULT_SEEDS`] seeds; `SIM_SEEDS=100000` runs
//! more (`SIM_FROM` moves the first), `SIM_SEED=<n>` exactly one. A
//! failing seed prints itself and is pinned in `regressions.rs`.
//!
//! A run that takes more than 30 s of real time (`SIM_WATCHDOG_SECS`)
//! fails its seed: see `watchdog.rs`.
//!
//! `draw.rs` is what a seed draws, `server.rs` and `limits.rs` the
//! server, `store.rs` the faulty store, `run.rs` one run, `check.rs` and
//! `check_quota.rs` the rules.

mod check;
mod check_quota;
mod draw;
mod limits;
mod regressions;
mod run;
mod server;
mod store;
mod watchdog;

use std::collections::BTreeMap;
use std::time::Instant;

use check::{Check, Violation};

/// Seeds a plain `cargo test` runs (a few seconds on a loaded 2-core box).
const DEFAULT_SEEDS: u64 = 400;

/// Seeds that still fail on a known, open defect (each described, and
/// pinned as an ignored test in `regressions.rs`): a plain run prints
/// them and does not fail on them. Any other failing seed fails the run.
/// Empty when nothing is known open.
const OPEN: &[(u64, &str)] = &[
    (58, DECLARED_BEHIND_A_SLOW_STORE),
    (99, DECLARED_BEHIND_A_SLOW_STORE),
    (145, DECLARED_BEHIND_A_SLOW_STORE),
    (279, DECLARED_BEHIND_A_SLOW_STORE),
    (300, DECLARED_BEHIND_A_SLOW_STORE),
    (369, DECLARED_BEHIND_A_SLOW_STORE),
    (370, DECLARED_BEHIND_A_SLOW_STORE),
    (420, DECLARED_BEHIND_A_SLOW_STORE),
    (441, DECLARED_BEHIND_A_SLOW_STORE),
    (627, DECLARED_BEHIND_A_SLOW_STORE),
    (804, DECLARED_BEHIND_A_SLOW_STORE),
    (913, DECLARED_BEHIND_A_SLOW_STORE),
    (1048, DECLARED_BEHIND_A_SLOW_STORE),
    (1134, DECLARED_BEHIND_A_SLOW_STORE),
    (1595, DECLARED_BEHIND_A_SLOW_STORE),
    (1708, DECLARED_BEHIND_A_SLOW_STORE),
    (1769, DECLARED_BEHIND_A_SLOW_STORE),
    (1887, DECLARED_BEHIND_A_SLOW_STORE),
    (1913, DECLARED_BEHIND_A_SLOW_STORE),
    (1951, DECLARED_BEHIND_A_SLOW_STORE),
];

/// The one open defect the simulation knows (seeds 0–1999): behind a store
/// whose calls take 5–250 ms, a declared quota's slots are spaced, its
/// sends are not: each leaves when its confirmation's round trip ends, so
/// two sends of consecutive slots can be closer than the declared `per`
/// (seed 1951: slots 630 ms and 1.15 s, sends 756 ms and 1.222 s, under 1
/// per 500 ms). Learning the lateness at the settle fixed 2 of 20 (the
/// slots are booked before the first send); a fix needs the store's round
/// trip known when a slot is booked, or a confirmation that records the
/// send atomically.
const DECLARED_BEHIND_A_SLOW_STORE: &str =
    "a declared quota's sends closer than its slots behind a slow store";

/// What `seed` broke (a panic of the run itself included).
pub(crate) fn failures(seed: u64) -> Vec<Violation> {
    match run::run(seed) {
        Ok(run) => check::check(&run),
        Err(run::Failed::Panicked(panic)) => vec![check::violation(
            Check::Panic,
            format!("the run panicked: {panic}"),
        )],
        Err(run::Failed::Stalled(stalled)) => vec![check::violation(
            Check::Hung,
            format!(
                "the run took more than {:?} of real time (a livelock: the paused clock stood \
                 still){}",
                stalled.after,
                if stalled.stopped {
                    ""
                } else {
                    "; its thread still spins"
                }
            ),
        )],
    }
}

/// The report of a failing seed: how to rerun it, what it drew, what broke.
fn describe(seed: u64, violations: &[Violation]) -> String {
    let sc = draw::scenario(seed);
    let mut out = format!(
        "SIM_SEED={seed} failed (rerun: SIM_SEED={seed} cargo test --all-features --test all \
         sim::seeds -- --nocapture)\n  store: {:?}\n  policy: {:?}\n",
        sc.store, sc.policy
    );
    for o in &sc.origins {
        out += &format!(
            "  origin: {:?} {:?} limits {:?}\n",
            o.family, o.refusal, o.limits
        );
    }
    out += &format!("  {} tasks\n", sc.tasks.len());
    if std::env::var_os("SIM_TRACE").is_some()
        && let Ok(run) = run::run(seed)
    {
        for (i, t) in sc.tasks.iter().enumerate() {
            out += &format!("  task {i}: {t:?} -> {:?}\n", run.ended[i]);
        }
        for s in &run.log.sent {
            out += &format!("  sent {s:?}\n");
        }
        for t in &run.log.told {
            out += &format!("  told {t:?}\n");
        }
    }
    for v in violations.iter().take(8) {
        out += &format!("  {:?}: {}\n", v.check, v.detail);
    }
    out
}

/// Panics with the report unless `seed` passes every rule.
pub(crate) fn assert_seed(seed: u64) {
    let violations = failures(seed);
    assert!(violations.is_empty(), "{}", describe(seed, &violations));
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[test]
fn seeds() {
    let (from, count) = match env("SIM_SEED") {
        Some(seed) => (seed, 1),
        None => (
            env("SIM_FROM").unwrap_or(0),
            env("SIM_SEEDS").unwrap_or(DEFAULT_SEEDS),
        ),
    };
    let started = Instant::now();
    let mut by_check: BTreeMap<Check, Vec<u64>> = BTreeMap::new();
    let mut unexpected = Vec::new();
    for seed in from..from.saturating_add(count) {
        let violations = failures(seed);
        if violations.is_empty() {
            continue;
        }
        let known = OPEN
            .iter()
            .find(|(open, _)| *open == seed)
            .map(|(_, why)| *why);
        for v in &violations {
            let seeds = by_check.entry(v.check).or_default();
            if seeds.last() != Some(&seed) {
                seeds.push(seed);
            }
        }
        let report = describe(seed, &violations);
        match known {
            Some(why) => eprintln!("(known, open: {why}) {report}"),
            None => {
                eprintln!("{report}");
                unexpected.push(seed);
            }
        }
    }
    let elapsed = started.elapsed();
    eprintln!(
        "simulation: {count} seeds from {from} in {:.1} s ({:.0} seeds/s)",
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64().max(1e-9)
    );
    for (check, seeds) in &by_check {
        let first: Vec<_> = seeds.iter().take(10).collect();
        eprintln!("  {check:?}: {} seeds, first {first:?}", seeds.len());
    }
    assert!(unexpected.is_empty(), "failing seeds: {unexpected:?}");
}

/// A seed is a run: the same seed sends the same requests at the same
/// times.
#[test]
fn a_seed_is_a_run() {
    for seed in [1, 7, 42] {
        let trace = |seed| {
            let run = run::run(seed).expect("no panic");
            format!("{:?}{:?}", run.log.sent, run.ended)
        };
        assert_eq!(trace(seed), trace(seed), "seed {seed}");
    }
}

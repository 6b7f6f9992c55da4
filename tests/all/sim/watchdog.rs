//! A real-time watchdog over a run: under tokio's paused clock a livelock
//! (tasks waking each other for ever without a timer to advance to) never
//! lets the clock move, so no simulated bound ever fires and the run would
//! hang the test for ever. Each run goes on a thread of its own; past
//! [`limit`] of real time it is told to give up (its runtime is dropped,
//! and its tasks with it) and the seed fails.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use tokio::sync::oneshot;

/// Real time a seed may take by default (a seed takes milliseconds; the
/// slowest of 10,000 well under a second on a loaded 2-core box).
const DEFAULT_LIMIT: Duration = Duration::from_secs(30);

/// How long a run told to give up has to return before its thread is left
/// spinning (a single poll that never returns cannot be stopped).
const GIVE_UP_GRACE: Duration = Duration::from_secs(5);

/// The real time a seed may take: `SIM_WATCHDOG_SECS`, else
/// [`DEFAULT_LIMIT`].
pub(crate) fn limit() -> Duration {
    super::env("SIM_WATCHDOG_SECS").map_or(DEFAULT_LIMIT, Duration::from_secs)
}

/// A run the watchdog stopped.
#[derive(Debug, Clone)]
pub(crate) struct Stalled {
    /// The real time it was given.
    pub(crate) after: Duration,
    /// Whether it gave up when told (else its thread still spins).
    pub(crate) stopped: bool,
}

/// Runs `run` on a thread named `name`, handing it the signal to give up
/// (it answers `None` then); its answer, or [`Stalled`] if it took more
/// than `limit` of real time. A panic of `run` is resumed here.
pub(crate) fn watched<T: Send + 'static>(
    name: String,
    limit: Duration,
    run: impl FnOnce(oneshot::Receiver<()>) -> Option<T> + Send + 'static,
) -> Result<T, Stalled> {
    let (done, answer) = mpsc::channel();
    let (give_up, told) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _ = done.send(run(told));
        })
        .expect("a thread for the run");
    let stalled = |stopped| Stalled {
        after: limit,
        stopped,
    };
    match answer.recv_timeout(limit) {
        Ok(Some(out)) => {
            let _ = thread.join();
            Ok(out)
        }
        Ok(None) => Err(stalled(true)),
        Err(RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the run's thread ended without an answer"),
        },
        Err(RecvTimeoutError::Timeout) => {
            eprintln!("{name}: still running after {limit:?} of real time: told to give up");
            let _ = give_up.send(());
            match answer.recv_timeout(GIVE_UP_GRACE) {
                Ok(_) => {
                    let _ = thread.join();
                    Err(stalled(true))
                }
                // Left to spin: the process ends it.
                Err(_) => Err(stalled(false)),
            }
        }
    }
}

/// Two tasks waking each other for ever, beside a timer that never fires
/// (the paused clock advances only when every task is idle): the watchdog
/// stops the run, and the runtime drops its tasks.
#[test]
fn a_livelock_under_the_paused_clock_is_stopped() {
    let started = std::time::Instant::now();
    let outcome = watched("sim-livelock".into(), Duration::from_secs(1), |told| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async move {
            let ping = std::sync::Arc::new(tokio::sync::Notify::new());
            let pong = std::sync::Arc::new(tokio::sync::Notify::new());
            for (wait, wake) in [(ping.clone(), pong.clone()), (pong, ping.clone())] {
                tokio::spawn(async move {
                    loop {
                        wake.notify_one();
                        wait.notified().await;
                    }
                });
            }
            let run = tokio::time::sleep(Duration::from_secs(1));
            tokio::select! {
                _ = told => None,
                () = run => Some(()),
            }
        })
    });
    let stalled = outcome.expect_err("a livelock stopped");
    assert!(stalled.stopped, "the runtime gave up when told");
    assert!(started.elapsed() < Duration::from_secs(1) + GIVE_UP_GRACE);
}

/// A run that ends is answered as it ended.
#[test]
fn a_run_that_ends_is_answered() {
    let answer = watched("sim-quick".into(), Duration::from_secs(30), |_| Some(7));
    assert_eq!(answer.ok(), Some(7));
}

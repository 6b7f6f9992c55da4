//! The observer's events, in order, on tokio's paused clock.

use reqwest_backpressure::observe::{
    GateClosed, GateReopened, Observer, Send, Stop, Wait, WaitEnd,
};

use super::support::*;

/// Writes each event as one line, with its time since `start` in ms.
pub(super) struct Log {
    start: tokio::time::Instant,
    lines: Mutex<Vec<String>>,
}

impl Log {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Log {
            start: tokio::time::Instant::now(),
            lines: Mutex::new(Vec::new()),
        })
    }

    fn push(&self, line: String) {
        let ms = self.start.elapsed().as_millis();
        self.lines.lock().unwrap().push(format!("{ms:>5} {line}"));
    }

    pub(super) fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// ` [scope]` after the origin, for a scope's limit; nothing for the
/// origin's own.
fn scoped(scope: Option<&str>) -> String {
    scope.map(|s| format!(" [{s}]")).unwrap_or_default()
}

impl Observer for Log {
    fn on_wait(&self, w: &Wait<'_>) {
        self.push(format!(
            "wait {}{} attempt {} {} {}ms",
            w.origin,
            scoped(w.scope),
            w.attempt,
            w.reason,
            w.duration.as_millis()
        ));
    }
    fn on_wait_end(&self, e: &WaitEnd<'_>) {
        let how = if e.dropped { " dropped" } else { "" };
        self.push(format!(
            "wait_end {}{} {}{how}",
            e.origin,
            scoped(e.scope),
            e.reason
        ));
    }
    fn on_send(&self, s: &Send<'_>) {
        self.push(format!("send {} attempt {}", s.origin, s.attempt));
    }
    fn on_stop(&self, s: &Stop<'_>) {
        self.push(format!("stop {} after {} {}", s.origin, s.attempts, s.code));
    }
    fn on_gate_closed(&self, g: &GateClosed<'_>) {
        self.push(format!(
            "gate_closed {}{} {}ms",
            g.origin,
            scoped(g.scope),
            g.duration.as_millis()
        ));
    }
    fn on_gate_reopened(&self, g: &GateReopened<'_>) {
        self.push(format!("gate_reopened {}{}", g.origin, scoped(g.scope)));
    }
}

const O: &str = "http://origin.test:80";

fn observed(policy: Policy, steps: Vec<Answer>) -> (ClientWithMiddleware, Arc<Log>) {
    let log = Log::new();
    let (client, _) = offline_with(
        RetryAfterMiddleware::new(policy).with_observer(log.clone()),
        seq(steps),
    );
    (client, log)
}

#[tokio::test(start_paused = true)]
async fn a_retried_task_sends_closes_waits_reopens_in_order() {
    let (client, log) = observed(
        exact(),
        vec![push_back(429, "2"), push_back(429, "3"), answer(200)],
    );
    let r = client.get(URL).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let want = [
        format!("    0 send {O} attempt 1"),
        format!("    0 gate_closed {O} 2000ms"),
        format!("    0 wait {O} attempt 2 retry_after 2000ms"),
        format!(" 2000 wait_end {O} retry_after"),
        format!(" 2000 gate_reopened {O}"),
        format!(" 2000 send {O} attempt 2"),
        format!(" 2000 gate_closed {O} 3000ms"),
        format!(" 2000 wait {O} attempt 3 retry_after 3000ms"),
        format!(" 5000 wait_end {O} retry_after"),
        format!(" 5000 gate_reopened {O}"),
        format!(" 5000 send {O} attempt 3"),
    ];
    assert_eq!(log.lines(), want);
}

#[tokio::test(start_paused = true)]
async fn a_task_out_of_attempts_stops_with_its_code() {
    let (client, log) = observed(exact().max_attempts(2), vec![push_back(429, "1")]);
    let r = client.get(URL).send().await.unwrap();
    assert_eq!(stop_code(&r), Some("attempt_budget_exhausted"));
    let want = [
        format!("    0 send {O} attempt 1"),
        format!("    0 gate_closed {O} 1000ms"),
        format!("    0 wait {O} attempt 2 retry_after 1000ms"),
        format!(" 1000 wait_end {O} retry_after"),
        format!(" 1000 gate_reopened {O}"),
        format!(" 1000 send {O} attempt 2"),
        format!(" 1000 gate_closed {O} 1000ms"),
        format!(" 1000 stop {O} after 2 attempt_budget_exhausted"),
    ];
    assert_eq!(log.lines(), want);
}

/// B, arriving while A's pushback holds the gate, waits there; its timer
/// fires first at 1 s, so B is the probe and A's retry takes the next paced
/// slot.
#[tokio::test(start_paused = true)]
async fn a_second_task_waits_at_the_closed_gate() {
    let log = Log::new();
    let (client, _) = offline_with(
        RetryAfterMiddleware::new(exact()).with_observer(log.clone()),
        |path: &str, i| match (path, i) {
            ("/a", 0) => push_back(429, "1"),
            _ => answer(200),
        },
    );
    let a = tokio::spawn({
        let client = client.clone();
        async move { client.get("http://origin.test/a").send().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let b = client.get("http://origin.test/b").send().await.unwrap();
    assert_eq!(a.await.unwrap().status(), 200);
    assert_eq!(b.status(), 200);
    let want = [
        format!("    0 send {O} attempt 1"),
        format!("    0 gate_closed {O} 1000ms"),
        format!("    0 wait {O} attempt 2 retry_after 1000ms"),
        format!("  100 wait {O} attempt 1 gate 900ms"),
        format!(" 1000 wait_end {O} gate"),
        format!(" 1000 gate_reopened {O}"),
        format!(" 1000 send {O} attempt 1"),
        format!(" 1000 wait_end {O} retry_after"),
        format!(" 1000 wait {O} attempt 2 pace 1000ms"),
        format!(" 2000 wait_end {O} pace"),
        format!(" 2000 send {O} attempt 2"),
    ];
    assert_eq!(log.lines(), want);
}

#[tokio::test(start_paused = true)]
async fn a_task_dropped_while_waiting_ends_its_wait() {
    let (client, log) = observed(exact(), vec![push_back(429, "10")]);
    let cut = tokio::time::timeout(Duration::from_secs(3), client.get(URL).send()).await;
    assert!(cut.is_err(), "the caller gave up first");
    let want = [
        format!("    0 send {O} attempt 1"),
        format!("    0 gate_closed {O} 10000ms"),
        format!("    0 wait {O} attempt 2 retry_after 10000ms"),
        format!(" 3000 wait_end {O} retry_after dropped"),
    ];
    assert_eq!(log.lines(), want);
}

/// A pushback in a declared scope holds that scope: the events about its
/// limit carry the bare origin and the scope's name; those about the task
/// (send, stop) the origin alone.
#[tokio::test(start_paused = true)]
async fn a_scopes_limit_is_told_with_its_origin_and_its_scope() {
    let (client, log) = observed(exact(), vec![push_back(429, "2"), answer(200)]);
    let r = client
        .get(URL)
        .with_extension(reqwest_backpressure::Scope::new("tenant:7"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let want = [
        format!("    0 send {O} attempt 1"),
        format!("    0 gate_closed {O} [tenant:7] 2000ms"),
        format!("    0 wait {O} [tenant:7] attempt 2 retry_after 2000ms"),
        format!(" 2000 wait_end {O} [tenant:7] retry_after"),
        format!(" 2000 gate_reopened {O} [tenant:7]"),
        format!(" 2000 send {O} attempt 2"),
    ];
    assert_eq!(log.lines(), want);
}

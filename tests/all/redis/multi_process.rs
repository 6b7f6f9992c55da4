//! Several OS processes (this test binary re-run as workers) sharing one
//! Redis and one rate-limited server.

use super::limit_server::*;
use super::support::*;

const WORKERS: usize = 4;

const TASKS: usize = 30;

/// Task `i` of worker `w` uses key `(i + w) % KEYS`: every key is used by
/// every worker, one [`STAGGER`] apart, so a task pushed back (holding its
/// key for a second or more) meets the same key from the other processes.
/// At most `KEYS` tasks run at once across all processes.
const KEYS: usize = 20;

/// Time between two task starts within a worker.
const STAGGER: Duration = Duration::from_millis(60);

/// What one worker process reported.
#[derive(Debug, Default)]
struct WorkerResult {
    ok: usize,
    already_active: usize,
    failed: usize,
    refused_tasks: Vec<String>,
    failures: String,
}

fn parse_result(stdout: &str) -> Option<WorkerResult> {
    let line = stdout.lines().find(|l| l.starts_with("RESULT "))?;
    let mut r = WorkerResult::default();
    for field in line["RESULT ".len()..].split(' ') {
        let (name, value) = field.split_once('=')?;
        match name {
            "ok" => r.ok = value.parse().ok()?,
            "already_active" => r.already_active = value.parse().ok()?,
            "failed" => r.failed = value.parse().ok()?,
            "refused" => {
                r.refused_tasks = value
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
            }
            "failures" => r.failures = value.to_owned(),
            _ => {}
        }
    }
    Some(r)
}

/// Several OS processes (this test binary, re-run as [`worker_process`])
/// share one Redis and hit one rate-limited server with keys shared across
/// processes.
#[test]
fn processes_sharing_one_redis_share_leases_and_gates() {
    let started = Instant::now();
    let redis = RedisServer::start();
    let server = LimitServer::start();
    let prefix = format!("rbp-multi-{}:", std::process::id());

    let mut workers = Workers(Vec::new());
    let mut outputs = Vec::new();
    for w in 0..WORKERS {
        let (child, out, err) = crate::common::spawn_test_child(
            "redis::multi_process::worker_process",
            &[
                ("RBP_REDIS_URL", redis.url()),
                ("RBP_SERVER_URL", server.url()),
                ("RBP_PREFIX", prefix.clone()),
                ("RBP_WORKER", w.to_string()),
                ("RBP_TASKS", TASKS.to_string()),
                ("RBP_KEYS", KEYS.to_string()),
                ("RBP_STAGGER_MS", STAGGER.as_millis().to_string()),
            ],
        );
        outputs.push((out, err));
        workers.0.push(child);
    }

    let give_up = Instant::now() + Duration::from_secs(25);
    let mut statuses = vec![None; WORKERS];
    while statuses.iter().any(Option::is_none) {
        for (w, child) in workers.0.iter_mut().enumerate() {
            if statuses[w].is_none() {
                statuses[w] = child.try_wait().expect("try_wait");
            }
        }
        assert!(
            Instant::now() < give_up,
            "workers still running after 25 s: {statuses:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut results = Vec::new();
    for (w, (out, err)) in outputs.into_iter().enumerate() {
        let out = out.join().expect("stdout reader");
        let err = err.join().expect("stderr reader");
        let status = statuses[w].expect("exited");
        assert!(
            status.success(),
            "worker {w} failed ({status}):\n{out}\n{err}"
        );
        let r = parse_result(&out)
            .unwrap_or_else(|| panic!("worker {w} printed no RESULT line:\n{out}\n{err}"));
        results.push(r);
    }

    let log = server.log.lock().unwrap();
    let seen = &log.seen;
    let ok: usize = results.iter().map(|r| r.ok).sum();
    let refused: usize = results.iter().map(|r| r.already_active).sum();
    let failed: usize = results.iter().map(|r| r.failed).sum();
    let pushed_back: Vec<&Seen> = seen.iter().filter(|s| s.told.is_some()).collect();
    eprintln!(
        "multi-process: {ok} ok, {refused} already_active, {failed} failed; \
         server saw {} requests, {} pushed back; {:?} elapsed",
        seen.len(),
        pushed_back.len(),
        started.elapsed()
    );

    // Every task either succeeded or found its key active elsewhere.
    let failures: Vec<&str> = results.iter().map(|r| r.failures.as_str()).collect();
    assert_eq!(failed, 0, "failures: {failures:?}");
    assert_eq!(ok + refused, WORKERS * TASKS);
    assert!(ok > 0 && refused > 0, "ok {ok}, already_active {refused}");

    // Never two in flight for one key (precise: counted by the server).
    assert!(log.overlaps.is_empty(), "overlaps: {:?}", log.overlaps);
    // The same, from the intervals.
    let mut by_key: BTreeMap<&str, Vec<(Instant, Instant)>> = BTreeMap::new();
    for s in seen {
        by_key
            .entry(s.key.as_str())
            .or_default()
            .push((s.arrived, s.answered));
    }
    for (key, mut spans) in by_key {
        spans.sort();
        for pair in spans.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "two requests in flight at once for key {key}"
            );
        }
    }

    // One 200 per succeeded task; a refused task sent nothing.
    let successes = seen.iter().filter(|s| s.told.is_none()).count();
    assert_eq!(successes, ok, "a task was answered 200 twice, or lost");
    let mut per_task: HashMap<&str, usize> = HashMap::new();
    for s in seen.iter().filter(|s| s.told.is_none()) {
        *per_task.entry(s.task.as_str()).or_default() += 1;
    }
    assert!(per_task.values().all(|&n| n == 1), "a task succeeded twice");
    for r in &results {
        for t in &r.refused_tasks {
            assert!(
                !seen.iter().any(|s| &s.task == t),
                "task {t} got already_active but sent a request"
            );
        }
    }

    // 0 premature: no retry of a task before the time its own 429 gave.
    let mut premature = Vec::new();
    for (i, s) in seen.iter().enumerate() {
        if let Some(told) = s.told {
            for later in &seen[i + 1..] {
                if later.task == s.task && later.arrived < told {
                    premature.push((s.task.clone(), told - later.arrived));
                }
            }
        }
    }
    assert!(premature.is_empty(), "premature retries: {premature:?}");

    // The gate holds every process: once a 429 has had time to reach Redis,
    // no request from ANY worker arrives before its Retry-After time.
    assert!(!pushed_back.is_empty(), "the server never pushed back");
    let mut through_gate = Vec::new();
    for p in &pushed_back {
        let told = p.told.expect("429");
        for s in seen {
            if s.arrived > p.answered + PROPAGATION && s.arrived < told {
                through_gate.push(format!(
                    "worker {} arrived {:?} before the gate worker {} was given",
                    s.worker,
                    told - s.arrived,
                    p.worker
                ));
            }
        }
    }
    assert!(through_gate.is_empty(), "{through_gate:#?}");
    // ...and the others were there to be held: after the first 429, other
    // workers' requests still came (all after its gate).
    let first = pushed_back[0];
    let others_after = seen
        .iter()
        .filter(|s| s.worker != first.worker && s.arrived > first.answered)
        .count();
    assert!(others_after > 0, "no other worker sent after the first 429");

    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

/// One worker process of [`processes_sharing_one_redis_share_leases_and_gates`];
/// does nothing unless started by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a child process of processes_sharing_one_redis_share_leases_and_gates"]
async fn worker_process() {
    let Ok(redis_url) = std::env::var("RBP_REDIS_URL") else {
        return;
    };
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
    let server = var("RBP_SERVER_URL");
    let worker = var("RBP_WORKER");
    let tasks: usize = var("RBP_TASKS").parse().expect("RBP_TASKS");
    let keys: usize = var("RBP_KEYS").parse().expect("RBP_KEYS");
    let stagger = Duration::from_millis(var("RBP_STAGGER_MS").parse().expect("stagger"));
    let w: usize = worker.parse().expect("RBP_WORKER");

    // Closed: a Redis failure shows up as a failed task, never as a silently
    // unshared run.
    let store = RedisStore::connect(&redis_url)
        .await
        .expect("worker: connect to Redis")
        .prefix(var("RBP_PREFIX"))
        .fail_mode(FailMode::Closed);
    let client = client(
        store,
        Policy::default()
            .max_attempts(30)
            .max_wait(Duration::from_secs(10))
            .jitter(Duration::from_millis(50))
            .default_deadline(Duration::from_secs(20)),
    );

    let mut handles = Vec::new();
    for i in 0..tasks {
        let client = client.clone();
        let url = format!("{server}/jobs");
        let worker = worker.clone();
        handles.push(tokio::spawn(async move {
            tokio::time::sleep(stagger * u32::try_from(i).expect("small")).await;
            let task = format!("{worker}-{i}");
            let result = client
                .post(url)
                .header("x-worker", &worker)
                .header("x-task", &task)
                .with_extension(IdempotencyKey::new(format!("job-{}", (i + w) % keys)))
                .body("payload")
                .send()
                .await;
            let outcome = match &result {
                Ok(r) if r.status() == 200 => "ok".to_owned(),
                Ok(r) => format!(
                    "status_{}_{}",
                    r.status().as_u16(),
                    report(r).stop_reason().map_or("none", |s| s.code())
                ),
                Err(_) => code(&result),
            };
            (task, outcome)
        }));
    }
    let (mut ok, mut already_active, mut failures, mut refused) = (0, 0, Vec::new(), Vec::new());
    for h in handles {
        let (task, outcome) = h.await.expect("task panicked");
        match outcome.as_str() {
            "ok" => ok += 1,
            "already_active" => {
                already_active += 1;
                refused.push(task);
            }
            other => failures.push(format!("{task}:{}", other.replace(' ', "_"))),
        }
    }
    println!(
        "RESULT ok={ok} already_active={already_active} failed={} refused={} failures={}",
        failures.len(),
        refused.join(","),
        failures.join(",")
    );
}

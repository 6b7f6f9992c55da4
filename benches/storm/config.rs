//! What to run: the server shapes, the clients (rows), and the settings read
//! from `STORM_*` environment variables.

use std::sync::OnceLock;
use std::time::Duration;

use reqwest_backpressure::Quota;

use crate::server::{Denial, Shape};
use crate::vendors::Vendor;

/// The outage rows' task deadline (`Deadline::after`), as the issue sets
/// it: every task should succeed within it, after the recovery.
pub(crate) const OUTAGE_DEADLINE: Duration = Duration::from_secs(60);
/// Time a row with deadlines keeps after them before it is cut.
const AFTER_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientKind {
    NoRetry,
    ReqwestRetry,
    Backpressure,
    /// [`crate::redis_row::WORKERS`] processes sharing one `RedisStore`.
    #[cfg(feature = "redis")]
    BackpressureRedis,
}

impl ClientKind {
    /// The row's name; ours say when they declare the server's quota
    /// (`STORM_DECLARE`, one setting for the whole run).
    pub(crate) fn name(self) -> &'static str {
        let declared = declaring();
        match self {
            ClientKind::NoRetry => "no retry",
            ClientKind::ReqwestRetry => "reqwest-retry",
            ClientKind::Backpressure if declared => "reqwest-backpressure, declared",
            ClientKind::Backpressure => "reqwest-backpressure",
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis if declared => {
                "reqwest-backpressure, 4 processes over Redis, declared"
            }
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => "reqwest-backpressure, 4 processes over Redis",
        }
    }

    /// Tasks spread over several processes (timed from a shared instant).
    pub(crate) fn multi_process(self) -> bool {
        match self {
            ClientKind::NoRetry | ClientKind::ReqwestRetry | ClientKind::Backpressure => false,
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => true,
        }
    }

    /// One of reqwest-backpressure's rows (shown by `STORM_VERBOSE=1`).
    pub(crate) fn is_ours(self) -> bool {
        match self {
            ClientKind::NoRetry | ClientKind::ReqwestRetry => false,
            ClientKind::Backpressure => true,
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verbose {
    Off,
    Ours,
    All,
}

/// The steady-load scenario's settings ([`crate::steady`]).
#[derive(Debug, Clone)]
pub(crate) struct Steady {
    pub(crate) workers: u32,
    pub(crate) cap: u32,
    pub(crate) duration: Duration,
    /// Its clients: the storm's, without the Redis row.
    pub(crate) clients: Vec<ClientKind>,
    /// Its server shapes: the storm's windows (fixed, RateLimit headers,
    /// truncated) and the silent leaky bucket and counting shapes; none of
    /// the others.
    pub(crate) shapes: Vec<Shape>,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) n: u32,
    pub(crate) cap: u32,
    pub(crate) clients: Vec<ClientKind>,
    pub(crate) shapes: Vec<Shape>,
    pub(crate) verbose: Verbose,
    pub(crate) timeout: Duration,
    pub(crate) smoke: bool,
    pub(crate) steady: Steady,
    /// Run the GitHub-like crawl ([`crate::github_crawl`]).
    pub(crate) github: bool,
    /// The vendors' servers to run ([`crate::vendors`]): none by default.
    pub(crate) vendors: Vec<Vendor>,
    /// `STORM_DECLARE`: our rows declare the server's documented quota
    /// ([`crate::declared`]).
    pub(crate) declare: bool,
}

/// Whether this run's rows of ours declare the server's quota:
/// `STORM_DECLARE` set (and not `0` or `false`), read once for the whole
/// run, as the rows' names read it.
pub(crate) fn declaring() -> bool {
    static DECLARE: OnceLock<bool> = OnceLock::new();
    *DECLARE.get_or_init(|| {
        env("STORM_DECLARE").is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v != "0" && v != "false"
        })
    })
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_u32(name: &str) -> Option<u32> {
    let v = env(name)?;
    match v.trim().parse::<u32>() {
        Ok(n) if n > 0 => Some(n),
        _ => {
            eprintln!("storm: ignoring {name}={v:?} (want a positive integer)");
            None
        }
    }
}

impl Config {
    pub(crate) fn from_env() -> Config {
        // `cargo bench` passes `--bench`; anything else (criterion-style
        // filters, `--nocapture`, ...) is ignored. Without `--bench` we are
        // run as a test: keep it short.
        let smoke = !std::env::args().skip(1).any(|a| a == "--bench");
        let sized = env("STORM_N").is_some() || env("STORM_CAP").is_some();
        let (default_n, default_cap) = if smoke && !sized {
            (60, 30)
        } else {
            (500, 100)
        };
        let n = env_u32("STORM_N").unwrap_or(default_n);
        let cap = env_u32("STORM_CAP").unwrap_or(default_cap);
        let only_ours = env("STORM_ONLY").is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "backpressure" || v == "reqwest-backpressure" || v == "ours"
        });
        #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
        let mut clients = if only_ours || (smoke && !sized) {
            vec![ClientKind::Backpressure]
        } else {
            vec![
                ClientKind::NoRetry,
                ClientKind::ReqwestRetry,
                ClientKind::Backpressure,
            ]
        };
        #[cfg(feature = "redis")]
        clients.push(ClientKind::BackpressureRedis);
        let down = Duration::from_secs(env_u32("STORM_OUTAGE_SECS").map_or(20, u64::from));
        let silent = vec![
            Shape::Leaky(Denial::TooManyRequests),
            Shape::Leaky(Denial::Unavailable),
            Shape::Counting(Denial::TooManyRequests),
            Shape::Counting(Denial::Unavailable),
            Shape::Outage { down },
        ];
        let asked = env("STORM_SHAPE").map(|s| s.trim().to_ascii_lowercase());
        let github = asked
            .as_deref()
            .is_some_and(|s| s == "github" || s == "silent");
        let vendors = asked.as_deref().map_or_else(Vec::new, Vendor::asked);
        // express-rate-limit runs in the steady load only (its windows
        // are the RateLimit headers' windows, opening at a first hit).
        let express = asked.as_deref().is_none_or(|s| s.starts_with("express"));
        let shapes = match asked {
            Some(s) if s == "silent" => silent,
            Some(s) if s.starts_with("express") => Vec::new(),
            Some(s) if s == "github" || !vendors.is_empty() => Vec::new(),
            Some(s) if s == "leaky503" => vec![silent[1]],
            Some(s) if s.starts_with("leaky") => vec![silent[0]],
            Some(s) if s == "counting503" => vec![silent[3]],
            Some(s) if s.starts_with("counting") => vec![silent[2]],
            Some(s) if s == "outage" => vec![silent[4]],
            Some(s) if s.starts_with("window") || s == "fixed" => vec![Shape::Window],
            Some(s) if s.starts_with("bucket") || s == "token" => vec![Shape::Bucket],
            Some(s) if s.starts_with("ratelimit") => vec![Shape::RateLimitHeaders],
            Some(s) if s.starts_with("trunc") || s == "zero" => vec![Shape::TruncatedZero],
            Some(s) if s.starts_with("sliding") || s == "log" => vec![Shape::SlidingLog],
            Some(s) if s.starts_with("gcra") || s == "governor" => vec![Shape::Gcra],
            _ => vec![
                Shape::Window,
                Shape::Bucket,
                Shape::SlidingLog,
                Shape::Gcra,
                Shape::RateLimitHeaders,
                Shape::TruncatedZero,
            ],
        };
        let verbose = match env("STORM_VERBOSE").map(|s| s.trim().to_ascii_lowercase()) {
            Some(s) if s == "all" || s == "2" => Verbose::All,
            Some(s) if s != "0" && s != "false" => Verbose::Ours,
            _ => Verbose::Off,
        };
        let timeout = Duration::from_secs(env_u32("STORM_TIMEOUT").map_or(30, u64::from));
        let steady = Steady {
            workers: env_u32("STORM_STEADY_WORKERS").unwrap_or(if smoke { 8 } else { 40 }),
            cap: env_u32("STORM_STEADY_CAP").unwrap_or(if smoke { 10 } else { 50 }),
            duration: Duration::from_secs(
                env_u32("STORM_STEADY_SECS").map_or(if smoke { 1 } else { 8 }, u64::from),
            ),
            clients: clients
                .iter()
                .copied()
                .filter(|c| !c.multi_process())
                .collect(),
            shapes: shapes
                .iter()
                .copied()
                .filter(|&s| {
                    matches!(
                        s,
                        Shape::Window
                            | Shape::RateLimitHeaders
                            | Shape::TruncatedZero
                            | Shape::Leaky(_)
                            | Shape::Counting(_)
                    )
                })
                .chain(express.then_some(Shape::ExpressRateLimit))
                // The smoke run: the fixed window only.
                .take(if smoke { 1 } else { usize::MAX })
                .collect(),
        };
        Config {
            n,
            cap,
            clients,
            shapes,
            verbose,
            timeout,
            smoke,
            steady,
            github,
            vendors,
            declare: declaring(),
        }
    }

    /// The quota our rows declare for a `shape` server admitting `cap` a
    /// second, with `STORM_DECLARE`; `None` without it.
    pub(crate) fn declared(&self, shape: Shape, cap: u32) -> Option<Quota> {
        self.declare
            .then(|| crate::declared::documented(shape, cap))
    }

    /// A row's limit: [`timeout`](Self::timeout), or for the outage the
    /// tasks' deadline and some (partial figures after it).
    pub(crate) fn row_timeout(&self, shape: Shape) -> Duration {
        match shape {
            Shape::Outage { .. } => self.timeout.max(OUTAGE_DEADLINE + AFTER_DEADLINE),
            _ => self.timeout,
        }
    }

    /// The deadline each task of a `shape` row carries, if any.
    pub(crate) fn task_deadline(shape: Shape) -> Option<Duration> {
        matches!(shape, Shape::Outage { .. }).then_some(OUTAGE_DEADLINE)
    }

    /// The most `200`s a client can get from a fresh silent `shape` server
    /// (leaky bucket or counting rate) within the steady load, sending each
    /// request at the first instant it can be admitted, as in
    /// [`ideal`](Self::ideal): the leaky bucket's `CAP + 1` at 0 and one
    /// every `1000 / CAP` ms; the counting rate's `CAP` at 0 and `CAP` in
    /// each later period, from `⌊(k − 1)·1000 / CAP⌋ + 1` ms in. `None` for
    /// the other shapes.
    pub(crate) fn steady_most(&self, shape: Shape) -> Option<u64> {
        let cap = u64::from(self.steady.cap.max(1));
        let d = u64::try_from(self.steady.duration.as_millis()).unwrap_or(u64::MAX);
        match shape {
            Shape::Leaky(_) => Some(cap + (d * cap).div_ceil(1000)),
            Shape::Counting(_) => {
                let later = (1..d.div_ceil(1000))
                    .flat_map(|p| (1..=cap).map(move |k| p * 1000 + (k - 1) * 1000 / cap + 1))
                    .filter(|&t| t < d)
                    .count();
                Some(cap + later as u64)
            }
            _ => None,
        }
    }

    /// The last success of a perfect client against `shape`: when the
    /// server admits its `N`th request, since its first, if every request
    /// is sent at the first instant it can be admitted.
    ///
    /// - Windows of 1 s (fixed, RateLimit headers, truncated: back-to-back
    ///   windows from the first request) admit `CAP` at each window's
    ///   start: the `N`th in window `ceil(N / CAP) − 1`, at its start.
    /// - The sliding log admits `CAP` at 0, then each admission frees a slot
    ///   1 s later: the `N`th at `(ceil(N / CAP) − 1)` s too.
    /// - The token bucket and GCRA (`Quota::per_second(CAP)`, a burst of
    ///   `CAP`) admit `CAP` at 0, then one every `1 / CAP` s: the `N`th at
    ///   `(N − CAP) / CAP` s (0 if `N ≤ CAP`).
    /// - Closed every fifth second: the windows'
    ///   `m = ceil(N / CAP) − 1`th open window, window `m + m / 4`.
    ///
    /// - The leaky bucket (nginx, `burst=CAP nodelay`) admits `CAP + 1` at
    ///   0, then one every `1000 / CAP` ms: the `N`th at
    ///   `(N − CAP − 1) / CAP` s, in whole ms rounded up.
    /// - Counting denied (HAProxy's `freq_ctr`), never knocking while
    ///   denied: `CAP` at 0; then each 1 s period after a full one admits
    ///   its `k`-th request `⌊(k − 1)·1000 / CAP⌋ + 1` ms in (the previous
    ///   period still weighs on it): the `N`th, the `k`-th of period
    ///   `p = ⌈(N − CAP) / CAP⌉`, at `p` s + that. No period admits more
    ///   than `CAP`, so none can do better: `N / CAP − 1/CAP` s for `N` a
    ///   multiple of `CAP` (5.981 s for 300 at 50), about a second later
    ///   than the sliding log, whose denials do not count.
    /// - The outage: its time down, then the leaky bucket at rest.
    ///
    /// For `N` a multiple of `CAP` the windows, the log, the token bucket
    /// and GCRA are `N / CAP − 1` s.
    pub(crate) fn ideal(&self, shape: Shape) -> Duration {
        let (n, cap) = (u64::from(self.n), u64::from(self.cap.max(1)));
        let leaky = Duration::from_millis((n.saturating_sub(cap + 1) * 1000).div_ceil(cap));
        let windows = n.div_ceil(cap).saturating_sub(1);
        match shape {
            Shape::Window
            | Shape::RateLimitHeaders
            | Shape::ExpressRateLimit
            | Shape::TruncatedZero
            | Shape::SlidingLog => Duration::from_secs(windows),
            Shape::Bucket | Shape::Gcra => {
                Duration::from_secs_f64(n.saturating_sub(cap) as f64 / cap as f64)
            }
            Shape::Spells => Duration::from_secs(windows + windows / 4),
            Shape::Leaky(_) => leaky,
            Shape::Counting(_) if n <= cap => Duration::ZERO,
            Shape::Counting(_) => {
                let rest = n - cap;
                let period = rest.div_ceil(cap);
                let k = rest - (period - 1) * cap;
                Duration::from_millis(period * 1000 + (k - 1) * 1000 / cap + 1)
            }
            Shape::Outage { down } => down + leaky,
        }
    }
}

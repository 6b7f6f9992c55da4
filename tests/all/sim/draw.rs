//! What one seed draws: each origin's server (its limits, the headers it
//! states them in, how late it answers, its `Date`), the policy, the tasks
//! and the store's faults. Everything comes from one `fastrand::Rng`
//! seeded with the seed, so a seed is a run.

use std::time::Duration;

use fastrand::Rng;

/// One run: what every part of it is.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub(crate) origins: Vec<OriginPlan>,
    pub(crate) policy: PolicyPlan,
    pub(crate) tasks: Vec<TaskPlan>,
    pub(crate) store: StorePlan,
}

/// How a limit counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Shape {
    /// `count` per window; the windows are aligned on the server's start,
    /// or the first request after one ended opens the next (`anchored`).
    FixedWindow {
        count: u64,
        window: Duration,
        anchored: bool,
    },
    /// At most `count` in any span of `window`.
    SlidingLog { count: u64, window: Duration },
    /// A bucket of `capacity`, one unit back every `every`.
    Bucket { capacity: u64, every: Duration },
    /// GCRA: a burst of `burst`, then one every `every`.
    Gcra { burst: u64, every: Duration },
}

/// One limit of a server: its shape, and whether it counts requests or
/// the requests' cost units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LimitPlan {
    pub(crate) shape: Shape,
    pub(crate) units: bool,
}

/// The headers a server states its limits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    /// Refusals only: a bare `429`/`503`, maybe a `Retry-After`.
    Silent,
    /// IETF draft-10 `RateLimit` / `RateLimit-Policy`, every limit listed.
    Ietf10,
    /// express-rate-limit 8's draft-8 form (`"50-in-1sec"; q=50; w=1`).
    Express8,
    /// IETF draft-06 `RateLimit-Limit`, `-Remaining`, `-Reset`.
    Ietf6,
    /// GitHub: `x-ratelimit-*`, an epoch reset, `403` when spent.
    GitHub,
    /// OpenAI: requests and tokens, Go-duration resets.
    OpenAi,
    /// Discord: `x-ratelimit-reset-after` (decimals) and an epoch reset.
    Discord,
}

/// How a refusal names its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryAfterForm {
    None,
    Seconds,
    HttpDate,
}

/// One origin's simulated server.
#[derive(Debug, Clone)]
pub(crate) struct OriginPlan {
    pub(crate) url: String,
    pub(crate) limits: Vec<LimitPlan>,
    pub(crate) family: Family,
    /// The status of a refusal (a spent GitHub primary limit is a `403`).
    pub(crate) refusal: u16,
    pub(crate) retry_after: RetryAfterForm,
    /// Whether answers carry `Date`, and the server clock's skew (only
    /// with `Date`: without it, no client can know the skew).
    pub(crate) date: bool,
    pub(crate) skew: Duration,
    pub(crate) skew_ahead: bool,
    /// How late answers are: uniform in `[latency.0, latency.1]`.
    pub(crate) latency: (Duration, Duration),
    /// Chance in 1000 that an attempt ends in a transport error.
    pub(crate) transport_errors: u16,
}

/// A quota the caller declares for an origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DeclaredPlan {
    pub(crate) origin: usize,
    pub(crate) count: u32,
    pub(crate) per: Duration,
    pub(crate) refilled: bool,
    pub(crate) units: bool,
}

/// The policy's drawn settings (the rest are the defaults).
#[derive(Debug, Clone)]
pub(crate) struct PolicyPlan {
    pub(crate) max_attempts: u32,
    pub(crate) max_wait: Duration,
    pub(crate) fallback: Option<Duration>,
    pub(crate) jitter: Duration,
    pub(crate) origin_gate: bool,
    pub(crate) pacing: bool,
    pub(crate) proactive_gate: bool,
    pub(crate) first_contact: Duration,
    pub(crate) quotas: Vec<DeclaredPlan>,
    pub(crate) in_flight: Option<(usize, u32)>,
}

/// What the caller sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    /// A `POST` with an `IdempotencyKey`, or without one.
    Post {
        keyed: bool,
    },
}

/// One task.
#[derive(Debug, Clone)]
pub(crate) struct TaskPlan {
    pub(crate) origin: usize,
    pub(crate) method: Method,
    /// The idempotency key (`POST` with a key; some `GET`s too).
    pub(crate) key: Option<String>,
    pub(crate) arrives: Duration,
    /// `None`: the policy's default deadline.
    pub(crate) deadline: Option<Duration>,
    pub(crate) cost: u64,
    /// Dropped this long after it arrives, if it has not ended.
    pub(crate) cancel_after: Option<Duration>,
}

/// The store: the in-memory one, behind a wrapper that delays or fails
/// drawn operations, behind `Coalesced` or not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StorePlan {
    /// Each operation waits up to this long before it is applied, and as
    /// long again before its answer comes back.
    pub(crate) latency: Duration,
    /// Chance in 1000 that an operation fails (before it is applied).
    pub(crate) failures: u16,
    pub(crate) coalesced: bool,
}

impl StorePlan {
    /// Whether every operation is applied at once and none fails.
    pub(crate) fn is_clean(&self) -> bool {
        self.latency.is_zero() && self.failures == 0
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> T {
    items[rng.usize(..items.len())]
}

/// Everything a seed draws.
pub(crate) fn scenario(seed: u64) -> Scenario {
    let mut rng = Rng::with_seed(seed);
    let rng = &mut rng;
    let family = pick(
        rng,
        &[
            Family::Silent,
            Family::Ietf10,
            Family::Express8,
            Family::Ietf6,
            Family::GitHub,
            Family::OpenAi,
            Family::Discord,
        ],
    );
    let origins: Vec<OriginPlan> = (0..rng.usize(1..=2))
        .map(|i| origin(rng, i, family))
        .collect();
    let policy = policy(rng, &origins);
    let tasks = tasks(rng, &origins, &policy);
    let store = StorePlan {
        latency: pick(rng, &[ms(0), ms(0), ms(1), ms(5), ms(50), ms(250)]),
        failures: pick(rng, &[0, 0, 0, 10, 100]),
        coalesced: rng.u8(..10) < 2,
    };
    Scenario {
        origins,
        policy,
        tasks,
        store,
    }
}

fn shape(rng: &mut Rng) -> Shape {
    let count = pick(rng, &[1, 2, 3, 5, 10, 20, 50, 100]);
    let window = pick(
        rng,
        &[ms(250), ms(1000), ms(1000), ms(2000), ms(6000), ms(60_000)],
    );
    match rng.u8(..4) {
        0 => Shape::FixedWindow {
            count,
            window,
            anchored: rng.bool(),
        },
        1 => Shape::SlidingLog { count, window },
        2 => Shape::Bucket {
            capacity: count,
            every: window / u32::try_from(count).unwrap_or(1),
        },
        _ => Shape::Gcra {
            burst: count,
            every: window / u32::try_from(count).unwrap_or(1),
        },
    }
}

fn origin(rng: &mut Rng, i: usize, family: Family) -> OriginPlan {
    let mut limits = Vec::new();
    // Some origins count nothing at all.
    if rng.u8(..10) > 0 {
        limits.push(LimitPlan {
            shape: shape(rng),
            units: false,
        });
        if rng.u8(..4) == 0 {
            limits.push(LimitPlan {
                shape: shape(rng),
                units: family == Family::OpenAi || rng.u8(..3) == 0,
            });
        }
    }
    if family == Family::Express8 {
        // express-rate-limit: one fixed window aligned on its start.
        limits = vec![LimitPlan {
            shape: Shape::FixedWindow {
                count: pick(rng, &[5, 10, 50]),
                window: ms(1000),
                anchored: false,
            },
            units: false,
        }];
    }
    let refusal = match family {
        Family::GitHub => 403,
        _ => pick(rng, &[429, 429, 429, 503]),
    };
    let retry_after = match family {
        Family::GitHub => pick(
            rng,
            &[
                RetryAfterForm::None,
                RetryAfterForm::None,
                RetryAfterForm::Seconds,
            ],
        ),
        Family::Express8 => RetryAfterForm::Seconds,
        _ => pick(
            rng,
            &[
                RetryAfterForm::None,
                RetryAfterForm::Seconds,
                RetryAfterForm::Seconds,
                RetryAfterForm::HttpDate,
            ],
        ),
    };
    let date = rng.bool();
    let skew = if date {
        ms(pick(rng, &[0, 0, 300, 2_500, 30_000]))
    } else {
        ms(0)
    };
    let latency = match rng.u8(..8) {
        0 => (ms(0), ms(0)),
        1 => (ms(2_900), ms(3_100)),
        2 => (ms(100), ms(900)),
        _ => (ms(1), pick(rng, &[ms(5), ms(30), ms(120)])),
    };
    OriginPlan {
        url: format!("http://o{i}.sim.test/items"),
        limits,
        family,
        refusal,
        retry_after,
        date,
        skew,
        skew_ahead: rng.bool(),
        latency,
        transport_errors: pick(rng, &[0, 0, 0, 0, 20, 1000]),
    }
}

fn policy(rng: &mut Rng, origins: &[OriginPlan]) -> PolicyPlan {
    let mut quotas = Vec::new();
    for (o, plan) in origins.iter().enumerate() {
        if rng.u8(..10) >= 4 {
            continue;
        }
        for units in [false, true] {
            if units && rng.u8(..3) != 0 {
                continue;
            }
            // Often the server's own limit, sometimes a guess; rarely an
            // extreme span (every value the constructor takes must work).
            let own = plan
                .limits
                .iter()
                .find(|l| l.units == units)
                .map(|l| l.shape);
            let (count, per) = match own {
                Some(
                    Shape::FixedWindow { count, window, .. } | Shape::SlidingLog { count, window },
                ) if rng.bool() => (u32::try_from(count).unwrap_or(u32::MAX), window),
                _ => (
                    pick(rng, &[1, 2, 5, 10, 100]),
                    pick(rng, &[ms(1), ms(500), ms(1000), ms(61_200), ms(60_000)]),
                ),
            };
            let per = if rng.u16(..100) == 0 {
                Duration::MAX
            } else {
                per
            };
            quotas.push(DeclaredPlan {
                origin: o,
                count: if units {
                    count.saturating_mul(20)
                } else {
                    count
                },
                per,
                refilled: !units && rng.u8(..4) == 0,
                units,
            });
        }
    }
    PolicyPlan {
        max_attempts: rng.u32(1..=5),
        max_wait: pick(
            rng,
            &[ms(1000), ms(5000), ms(30_000), ms(60_000), ms(60_000)],
        ),
        fallback: pick(rng, &[Some(ms(2000)), Some(ms(2000)), Some(ms(300)), None]),
        jitter: pick(rng, &[ms(0), ms(50), ms(250)]),
        origin_gate: rng.u8(..10) > 0,
        pacing: rng.u8(..10) > 0,
        proactive_gate: rng.u8(..10) > 0,
        first_contact: pick(rng, &[ms(500), ms(500), ms(0), ms(2000)]),
        quotas,
        in_flight: (rng.u8(..6) == 0).then(|| (rng.usize(..origins.len()), rng.u32(1..=4))),
    }
}

fn tasks(rng: &mut Rng, origins: &[OriginPlan], policy: &PolicyPlan) -> Vec<TaskPlan> {
    let n = pick(rng, &[1, 3, 6, 12, 40, 40, 120]);
    let spread = pick(rng, &[ms(0), ms(0), ms(1000), ms(8000), ms(30_000)]);
    let shared_keys = rng.usize(1..=4);
    (0..n)
        .map(|_| {
            let origin = rng.usize(..origins.len());
            let method = match rng.u8(..10) {
                0..=6 => Method::Get,
                7 | 8 => Method::Post { keyed: true },
                _ => Method::Post { keyed: false },
            };
            let keyed = match method {
                Method::Post { keyed } => keyed,
                Method::Get => rng.u8(..10) == 0,
            };
            let key = keyed.then(|| {
                if rng.bool() {
                    format!("shared-{}", rng.usize(..shared_keys))
                } else {
                    format!("own-{}", rng.u64(..))
                }
            });
            // A cost within every quota in units (a costlier request
            // waits for a whole window, which is another rule).
            let units_cap =
                policy
                    .quotas
                    .iter()
                    .filter(|q| q.origin == origin && q.units)
                    .map(|q| u64::from(q.count))
                    .chain(origins[origin].limits.iter().filter(|l| l.units).map(
                        |l| match l.shape {
                            Shape::FixedWindow { count, .. }
                            | Shape::SlidingLog { count, .. }
                            | Shape::Bucket {
                                capacity: count, ..
                            }
                            | Shape::Gcra { burst: count, .. } => count,
                        },
                    ))
                    .min();
            let units = units_cap.is_some();
            TaskPlan {
                origin,
                method,
                key,
                arrives: if spread.is_zero() {
                    ms(0)
                } else {
                    ms(rng.u64(..=spread.as_millis() as u64))
                },
                deadline: match rng.u8(..10) {
                    0 => None,
                    1..=3 => Some(ms(rng.u64(50..=3000))),
                    _ => Some(ms(rng.u64(1000..=60_000))),
                },
                cost: if units || rng.u8(..4) == 0 {
                    rng.u64(1..=units_cap.unwrap_or(60).min(60))
                } else {
                    0
                },
                cancel_after: (rng.u8(..8) == 0).then(|| ms(rng.u64(..=5000))),
            }
        })
        .collect()
}

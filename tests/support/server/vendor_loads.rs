//! The workloads of issue 28's figures against the vendors' servers, one
//! module each: what the figure tests (`tests/all/scopes/`,
//! `tests/all/stripe.rs`) and the storm bench's vendor rows
//! (`STORM_SHAPE=vendors`) send, so the two measure the same thing.

/// GitHub's resources (`server/github_resources.rs`): repository reads
/// (core) and searches at once, each resource a quota of its own.
pub mod github {
    use std::time::Duration;

    use crate::server::github_resources::Resource;

    /// Core: 100 per 4 s (GitHub: 5,000 an hour, scaled down).
    pub const CORE: Resource = Resource {
        name: "core",
        quota: 100,
        window: Duration::from_secs(4),
    };
    /// Search: 10 per 3 s (GitHub: 30 a minute, scaled down).
    pub const SEARCH: Resource = Resource {
        name: "search",
        quota: 10,
        window: Duration::from_secs(3),
    };
    /// Repository reads (core).
    pub const CORE_GETS: u32 = 300;
    /// Searches beside them.
    pub const SEARCHES: u32 = 30;

    /// The path of repository read `i` (core).
    pub fn core_path(i: u32) -> String {
        format!("/repos/o/r/issues/{i}")
    }

    /// The path of search `i`.
    pub fn search_path(i: u32) -> String {
        format!("/search/issues?q={i}")
    }
}

/// Discord's buckets (`server/discord.rs`): messages round channels and
/// reads of two guilds, a bucket per channel and per guild, under the
/// global limit.
pub mod discord {
    use std::time::Duration;

    use crate::server::discord::Route;

    /// Discord's 5 messages per 5 s a channel, scaled down 4×.
    pub const WINDOW: Duration = Duration::from_millis(1250);
    /// Requests a bucket admits per window, as Discord states for messages.
    pub const LIMIT: u32 = 5;
    /// The guilds read.
    pub const GUILDS: [u64; 2] = [1_200_000_000_000_000_001, 1_200_000_000_000_000_002];
    /// Guild reads, round the guilds.
    pub const READS: u32 = 10;
    /// The documented run: messages round this many channels…
    pub const CHANNELS: u32 = 5;
    /// …this many of them (40 a channel: 8 windows, the last opening at
    /// 8.75 s; 35 requests a window in all, under the global limit).
    pub const MESSAGES: u32 = 200;

    /// The snowflake of channel `i` (each a major parameter).
    pub fn channel(i: u32) -> u64 {
        1_100_000_000_000_000_001 + u64::from(i)
    }

    /// The guild read `i` reads, round [`GUILDS`].
    pub fn guild(i: u32) -> u64 {
        GUILDS[i as usize % GUILDS.len()]
    }

    /// Sending a message, and reading a guild: a bucket each, `LIMIT` per
    /// `window`.
    pub fn routes(window: Duration) -> Vec<Route> {
        vec![
            Route {
                method: "POST",
                path: "/channels/{}/messages",
                bucket: "80c17d2f203122d936070c88c8d10f33",
                limit: LIMIT,
                window,
            },
            Route {
                method: "GET",
                path: "/guilds/{}",
                bucket: "2b3f40e1d8a9c7b6a5f4e3d2c1b0a998",
                limit: LIMIT,
                window,
            },
        ]
    }

    /// The buckets `messages` round `channels` channels and [`READS`]
    /// round the guilds fill, as `server::discord::ideal` takes them: each
    /// bucket's limit, window and the requests it takes.
    pub fn buckets(channels: u32, messages: u32, window: Duration) -> Vec<(u32, Duration, u32)> {
        let per_guild = READS / GUILDS.len() as u32;
        let mut buckets: Vec<_> = (0..channels)
            .map(|c| (LIMIT, window, (messages + channels - 1 - c) / channels))
            .collect();
        buckets.extend([(LIMIT, window, per_guild); GUILDS.len()]);
        buckets
    }
}

/// Two IETF partitions of one origin (`server/partitions.rs`).
pub mod partitions {
    use crate::server::partitions::Partition;

    /// Tenant A: 10 per 2 s, 50 requests: its fifth window opens at 8 s.
    pub const A: Partition = Partition {
        prefix: "/a",
        key: "dGVuYW50LWE=",
        quota: 10,
        window_secs: 2,
    };
    /// Tenant B: 4 a second, 24 requests: its sixth window opens at 5 s.
    pub const B: Partition = Partition {
        prefix: "/b",
        key: "dGVuYW50LWI=",
        quota: 4,
        window_secs: 1,
    };
    /// Each partition and the requests sent to it, all at once.
    pub const SENDS: [(Partition, u32); 2] = [(A, 50), (B, 24)];
    /// The one policy name both partitions state.
    pub const POLICY: &str = "peruser";

    /// The path of request `i` to partition `p`.
    pub fn path(p: &Partition, i: u32) -> String {
        format!("{}/items/{i}", p.prefix)
    }
}

/// Stripe's keyed updates (`server/stripe.rs`): a sync job's 300 updates
/// of 100 customers, 32 in flight, about 7% meeting a lock.
pub mod stripe {
    use std::time::Duration;

    /// Updates sent.
    pub const UPDATES: usize = 300;

    /// Customers updated.
    pub const CUSTOMERS: usize = 100;

    /// Updates in flight at once.
    pub const IN_FLIGHT: usize = 32;

    /// The documented test-mode rate, a second.
    pub const RATE: u32 = 25;

    /// How long an update holds its customer's lock: at 25 requests a
    /// second (one every 40 ms) the two updates before a request arrived
    /// within it, so an update meets a lock exactly when one of those two
    /// touched its customer: the follow-ups, about 7%.
    pub const LOCK: Duration = Duration::from_millis(100);

    /// The customer each update touches: in turn round [`CUSTOMERS`],
    /// except that about 7% (a fixed draw) update the customer of the
    /// update before them again.
    pub fn customers() -> Vec<String> {
        let mut x: u64 = 0x5eed_5712_1be5_0007;
        let mut out: Vec<String> = Vec::with_capacity(UPDATES);
        for i in 0..UPDATES {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let follow_up = i > 0 && (x >> 33) % 100 < 7;
            let customer = match out.last() {
                Some(before) if follow_up => before.clone(),
                _ => format!("cus_{:03}", i % CUSTOMERS),
            };
            out.push(customer);
        }
        out
    }

    /// How many updates of [`customers`] follow one of the same customer.
    pub fn follow_ups(customers: &[String]) -> usize {
        customers.windows(2).filter(|w| w[0] == w[1]).count()
    }

    /// The body of update `i`.
    pub fn body(i: usize) -> String {
        format!("metadata[step]={i}")
    }

    /// The least time from the first request to the last `200` for
    /// `sends` requests under a bucket of `rate` a second that starts
    /// full: the bucket's burst at once, then one every `1 / rate`.
    pub fn ideal(sends: usize, rate: u32) -> Duration {
        let burst = usize::try_from(rate).unwrap_or(usize::MAX);
        let after_burst = u32::try_from(sends.saturating_sub(burst)).unwrap_or(u32::MAX);
        Duration::from_secs(1) * after_burst / rate
    }
}

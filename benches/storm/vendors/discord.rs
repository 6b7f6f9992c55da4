//! Discord's buckets (`server/discord.rs`), as the test
//! `scopes::discord` runs them as documented: 200 messages round 5
//! channels and 10 reads round 2 guilds, all at once, each channel and
//! guild a bucket of 5 per 1.25 s, under the global 50 a second; ours
//! with `RateLimitHeaders::discord()`.

use std::time::{Duration, Instant};

use reqwest_backpressure::{Policy, RateLimitHeaders};

use super::{Columns, Figure, VendorRow, all_through, none, within};
use crate::config::ClientKind;
use crate::harness::run_requests;
use crate::server::discord::{Config, DiscordState, Kind, ideal, sends_in_global_wait};
use crate::server::tap::Tap;
use crate::server::vendor_loads::discord::{
    CHANNELS, LIMIT, MESSAGES, READS, WINDOW, buckets, channel, guild, routes,
};
use crate::server::wire::JudgedServer;

/// The table's heading and columns.
pub(super) fn columns() -> Columns {
    Columns {
        heading: format!(
            "Discord: {MESSAGES} messages to {CHANNELS} channels + {READS} guild reads at once \
             (a bucket per channel and guild, {LIMIT} per {} s; global 50 a second)",
            WINDOW.as_secs_f64()
        ),
        rejections: &[
            "bucket 429s",
            "bucket 429s on a bucket that had answered",
            "global 429s",
        ],
        figures: &["all"],
        extra: &[
            "sends inside a global wait heard",
            "arrivals inside an announced global wait",
        ],
        notes: "Ideal: every bucket's windows back to back under the global limit. A bucket 429 \
                on a bucket that had answered: the client had heard that bucket's state. Sends \
                inside a global wait heard: sends after the client heard a global 429, before \
                the end of the wait it announced (the client's tap); arrivals inside an \
                announced global wait: the server's count, requests already in flight \
                included.",
    }
}

/// One row: `kind`'s client against a fresh server.
pub(super) async fn row(kind: ClientKind, limit: Duration) -> VendorRow {
    let server = JudgedServer::start(DiscordState::new(Config::new(routes(WINDOW)))).await;
    let tap = Tap::default();
    let discord = Policy::default().rate_limit_headers(RateLimitHeaders::discord());
    let client = kind.with_policy(discord, Some(tap.clone()));
    let uri = &server.uri;
    let messages = (0..MESSAGES).map(|i| {
        let url = format!("{uri}/channels/{}/messages", channel(i % CHANNELS));
        client.post(url).header("x-task", i).body("{}")
    });
    let reads = (0..READS).map(|i| {
        let url = format!("{uri}/guilds/{}", guild(i));
        client.get(url).header("x-task", MESSAGES + i)
    });
    let started = Instant::now();
    let (side, timed_out) = run_requests(messages.chain(reads), started, limit, None).await;
    let seen = server.finish();
    let n = MESSAGES + READS;
    let complete = side.ok == n && timed_out.is_none();
    let figure = Figure {
        last: seen.finished(),
        ideal: ideal(&buckets(CHANNELS, MESSAGES, WINDOW), seen.config.global),
        complete,
    };
    let in_wait = sends_in_global_wait(&tap.heard(), &seen);
    let known = seen.known_bucket_429s();
    let targets = vec![
        all_through(side.ok, n as usize, complete),
        within("all", &figure, 1.15, "ideal"),
        none(in_wait, "sends inside a global wait heard"),
        none(known, "bucket 429s on a bucket that had answered"),
        none(seen.premature(), "premature sends"),
    ];
    VendorRow {
        client: kind,
        n: n as usize,
        timed_out,
        requests: seen.arrivals.len(),
        rejections: vec![seen.count(Kind::User), known, seen.count(Kind::Global)],
        premature: Some(seen.premature()),
        figures: vec![figure],
        extra: vec![in_wait.to_string(), seen.in_global_wait().to_string()],
        targets,
        side,
    }
}

//! Discord's buckets under `RateLimitHeaders::discord()`: messages to
//! channels and reads of two guilds at once run side by side, each bucket
//! at its own limit, under the documented global 50 a second, which no
//! send ignores (binding only where the buckets together allow more).

use std::time::Duration;

use reqwest_backpressure::{Policy, RateLimitHeaders};

use super::{client, get, ratio, returned};
use crate::server::discord::{Config, DiscordState, Kind, ideal, sends_in_global_wait};
use crate::server::tap::Tap;
use crate::server::vendor_loads::discord::{
    CHANNELS, MESSAGES, READS, WINDOW, buckets, channel, guild, routes,
};
use crate::server::wire::JudgedServer;

/// `messages` round `channels` channels and 10 reads round the guilds,
/// all at once, against a server with `config`; asserts the issue's
/// figures.
async fn messages_and_reads(config: Config, name: &str, channels: u32, messages: u32) {
    let window = config.routes[0].window;
    let server = JudgedServer::start(DiscordState::new(config)).await;
    let tap = Tap::default();
    let client = client(
        Policy::default().rate_limit_headers(RateLimitHeaders::discord()),
        &tap,
    );
    let mut tasks: Vec<_> = (0..messages)
        .map(|i| {
            let url = format!("{}/channels/{}/messages", server.uri, channel(i % channels));
            let client = client.clone();
            tokio::spawn(
                async move { client.post(url).header("x-task", i).body("{}").send().await },
            )
        })
        .collect();
    tasks.extend((0..READS).map(|i| {
        get(
            &client,
            &server.uri,
            format!("/guilds/{}", guild(i)),
            messages + i,
        )
    }));
    let back = returned(tasks).await;
    let seen = server.finish();
    let best = ideal(&buckets(channels, messages, window), seen.config.global);
    let took = seen.finished().unwrap_or(Duration::MAX);
    let in_wait = sends_in_global_wait(&tap.heard(), &seen);
    eprintln!(
        "discord ({name}): last success {took:.2?}, ideal {best:.2?}, {:.2}× ideal; requests {}, \
         bucket 429s {} ({} on a bucket that had answered), global 429s {}, sends inside a \
         global wait the client had heard {in_wait} (arrivals inside one: {}), premature {}; \
         returned {back:?}",
        ratio(took, best),
        seen.arrivals.len(),
        seen.count(Kind::User),
        seen.known_bucket_429s(),
        seen.count(Kind::Global),
        seen.in_global_wait(),
        seen.premature(),
    );
    let back = back.expect("the run ends");
    assert_eq!(back.with(200), (messages + READS) as usize, "{back:?}");
    assert!(
        took.as_secs_f64() <= 1.15 * best.as_secs_f64(),
        "took {took:?}, ideal {best:?}"
    );
    assert_eq!(in_wait, 0, "sends inside an announced global wait");
    assert_eq!(
        seen.known_bucket_429s(),
        0,
        "429s on a bucket that had answered"
    );
    assert_eq!(seen.premature(), 0);
}

#[tokio::test]
async fn messages_to_five_channels_and_guild_reads_run_bucket_by_bucket() {
    let config = Config::new(routes(WINDOW));
    messages_and_reads(config, "as documented", CHANNELS, MESSAGES).await;
}

#[tokio::test]
async fn buckets_on_a_server_clock_2s_ahead() {
    // What the docs leave open: the server's clock against the client's.
    // `X-RateLimit-Reset-After` says the same as ever; `X-RateLimit-Reset`
    // and `Date` run 2 s ahead.
    let mut config = Config::new(routes(WINDOW));
    config.clock_skew_ms = 2000;
    messages_and_reads(config, "server clock 2 s ahead", 5, 200).await;
}

#[tokio::test]
#[ignore = "open: 1.69× its ideal: Discord's global 50 a second is kept as a refilled bucket, which lets a first second hold up to 100 where this server counts 50 per fixed second; one global 429 then cuts the origin's pace"]
async fn buckets_allowing_more_than_the_global_limit_wait_for_it() {
    // 10 channels at 5 per 0.5 s allow 100 a second: the global 50 binds,
    // from the first request (400 messages and 10 reads: about 8 s).
    let config = Config::new(routes(Duration::from_millis(500)));
    messages_and_reads(config, "global limit binding", 10, 400).await;
}

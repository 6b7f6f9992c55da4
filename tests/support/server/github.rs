//! A GitHub-like server: GitHub's two rate limits as its REST API docs
//! describe them, and a `403` that is no rate limit.
//!
//! - The primary limit: `quota` requests per window. Every answer carries
//!   `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (Unix epoch
//!   seconds) and `-resource`; a request over the quota gets `403` (or
//!   [`Config::status`]) with `x-ratelimit-remaining: 0` and the reset, and
//!   may come back at the reset.
//! - The secondary limit: at most `burst` requests admitted in any `span`
//!   (a sliding log); a request over it gets `403` with `retry-after` (whole
//!   seconds, rounded up, at least 1) while `x-ratelimit-remaining` is
//!   above zero, and may come back that long after it arrived.
//! - `/forbidden…` paths answer a plain `403` (the rate-limit headers, quota
//!   left, no `retry-after`): the request itself is refused. Such a request
//!   counts toward both limits, as at GitHub, and meets them as any other.
//!   The one that takes the quota's last request says `remaining: 0`, which
//!   GitHub documents as the primary limit: a client cannot tell it from
//!   one ([`GitHubTask::refused_at_zero`]).
//!
//! Tasks are told apart by their `x-task` header; a send before the time
//! the task's last rate-limit answer allowed is counted as premature.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::{lock, task_of};

/// How a [`GitHubServer`] limits.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The primary quota, per window.
    pub quota: u32,
    /// The primary window, in whole seconds.
    pub window_secs: u64,
    /// The secondary limit: at most this many admissions ...
    pub burst: u32,
    /// ... in any span this long.
    pub span: Duration,
    /// The status of a rate-limit answer (GitHub sends `403` or `429`).
    pub status: u16,
}

/// What the server answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ok,
    /// A primary-limit answer (`x-ratelimit-remaining: 0`, the reset).
    Primary,
    /// A secondary-limit answer (`retry-after`, quota left).
    Secondary,
    /// A plain `403`.
    Refused,
}

/// What the server remembers of one task.
#[derive(Debug, Default, Clone)]
pub struct GitHubTask {
    /// Its last answer: the one the client returned, once it is done.
    pub last: Option<Answer>,
    pub sends: u32,
    pub oks: u32,
    /// Rate-limit answers (primary or secondary) this task got.
    pub limited: u32,
    /// Plain `403`s this task got.
    pub refused: u32,
    /// Sends after the task got a plain `403`.
    pub sends_after_refusal: u32,
    /// Its plain `403` said `x-ratelimit-remaining: 0` (it took the
    /// quota's last request): to a client, a primary-limit answer.
    pub refused_at_zero: bool,
    /// The earliest instant its last secondary-limit answer allowed.
    not_before: Option<Instant>,
    /// The reset its last primary-limit answer named (epoch seconds).
    not_before_reset: Option<u64>,
}

/// What the server counted.
#[derive(Debug, Default)]
pub struct GitHubState {
    pub requests: u64,
    pub oks: u64,
    /// Primary-limit answers (`x-ratelimit-remaining: 0`).
    pub primary: u64,
    /// Secondary-limit answers (`retry-after`, quota left).
    pub secondary: u64,
    /// Plain `403`s.
    pub refused: u64,
    /// Sends before the time the task's last rate-limit answer allowed.
    pub premature: u64,
    pub tasks: HashMap<u32, GitHubTask>,
    used: u32,
    /// The current primary window's reset, in epoch seconds.
    reset: u64,
    /// Admissions within the last `span`, oldest first.
    log: VecDeque<Instant>,
}

/// The body of a primary-limit answer, as GitHub words it.
pub(super) const PRIMARY_BODY: &str = r#"{"message":"API rate limit exceeded for user ID 1."}"#;
/// The body of a secondary-limit answer, as GitHub words it.
pub(super) const SECONDARY_BODY: &str =
    r#"{"message":"You have exceeded a secondary rate limit."}"#;
/// The body of a plain `403`: the request itself is refused.
pub(super) const REFUSED_BODY: &str = r#"{"message":"Resource not accessible by integration"}"#;

/// The fields GitHub sends on every answer: the quota (`limit`), what is
/// left of it, what was used, the window's reset (Unix epoch seconds) and
/// the resource the request counted against.
pub(super) fn rate_limit_fields(
    limit: u32,
    remaining: u32,
    reset: u64,
    resource: &str,
) -> [(&'static str, String); 5] {
    [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", remaining.to_string()),
        ("x-ratelimit-used", (limit - remaining).to_string()),
        ("x-ratelimit-reset", reset.to_string()),
        ("x-ratelimit-resource", resource.to_owned()),
    ]
}

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Whole seconds, rounded up, at least 1.
pub(super) fn ceil_secs(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

impl GitHubState {
    fn answer(&mut self, config: &Config, request: &Request) -> ResponseTemplate {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let now_secs = epoch_secs(wall);
        if now_secs >= self.reset {
            // A new primary window, ending on a whole epoch second.
            self.used = 0;
            self.reset = now_secs + config.window_secs;
        }
        self.requests += 1;
        let id = task_of(request);
        let mut scratch = GitHubTask::default();
        let task = match id {
            Some(id) => self.tasks.entry(id).or_default(),
            None => &mut scratch,
        };
        task.sends += 1;
        let early = task.not_before.is_some_and(|t| now < t)
            || task.not_before_reset.is_some_and(|r| now_secs < r);
        self.premature += u64::from(early);
        if task.refused > 0 {
            task.sends_after_refusal += 1;
        }
        let reset = self.reset;
        let headers = |answer: ResponseTemplate, remaining: u32| {
            rate_limit_fields(config.quota, remaining, reset, "core")
                .into_iter()
                .fold(answer, |a, (name, value)| {
                    a.insert_header(name, value.as_str())
                })
        };
        if self.used >= config.quota {
            task.last = Some(Answer::Primary);
            task.limited += 1;
            task.not_before_reset = Some(self.reset);
            self.primary += 1;
            return headers(ResponseTemplate::new(config.status), 0).set_body_string(PRIMARY_BODY);
        }
        while self
            .log
            .front()
            .is_some_and(|&t| now.duration_since(t) >= config.span)
        {
            self.log.pop_front();
        }
        if let Some(&oldest) = self.log.front()
            && self.log.len() >= config.burst as usize
        {
            let retry_after = ceil_secs((oldest + config.span).duration_since(now));
            task.last = Some(Answer::Secondary);
            task.limited += 1;
            task.not_before = Some(now + Duration::from_secs(retry_after));
            self.secondary += 1;
            return headers(
                ResponseTemplate::new(config.status),
                config.quota - self.used,
            )
            .insert_header("retry-after", retry_after.to_string().as_str())
            .set_body_string(SECONDARY_BODY);
        }
        // Admitted: it counts toward both limits, refused or not.
        self.log.push_back(now);
        self.used += 1;
        if request.url.path().starts_with("/forbidden") {
            task.last = Some(Answer::Refused);
            if self.used == config.quota {
                // To a client, a primary-limit answer: wait for the reset.
                task.refused_at_zero = true;
                task.not_before_reset = Some(self.reset);
            }
            task.refused += 1;
            self.refused += 1;
            return headers(ResponseTemplate::new(403), config.quota - self.used)
                .set_body_string(REFUSED_BODY);
        }
        task.last = Some(Answer::Ok);
        task.oks += 1;
        self.oks += 1;
        headers(ResponseTemplate::new(200), config.quota - self.used).set_body_string("[]")
    }
}

struct Responder(Arc<Mutex<GitHubState>>, Config);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        lock(&self.0).answer(&self.1, request)
    }
}

/// A [`GitHubState`] served on a fresh port (a new origin), any path.
pub struct GitHubServer {
    mock: MockServer,
    state: Arc<Mutex<GitHubState>>,
    pub uri: String,
}

impl GitHubServer {
    pub async fn start(config: Config) -> Self {
        let state = Arc::new(Mutex::new(GitHubState::default()));
        let mock =
            super::serve(Mock::given(any()).respond_with(Responder(state.clone(), config))).await;
        let uri = mock.uri();
        GitHubServer { mock, state, uri }
    }

    /// Stops the server and returns what it counted.
    pub fn finish(self) -> GitHubState {
        let GitHubServer { mock, state, .. } = self;
        super::stop(mock);
        std::mem::take(&mut *lock(&state))
    }
}

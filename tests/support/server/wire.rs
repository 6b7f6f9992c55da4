//! Serving a vendor-like server's state over wiremock: the state judges
//! each request at instants it is given ([`Judge`]), so its rules are
//! tested at fixed times with no socket; [`JudgedServer`] reads the
//! clocks, asks it, and sends its [`Reply`]. [`Answered`] is the log a
//! state keeps of what it answered each request; [`rfc3339`], the wall
//! clock as a reset header writes it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::{Arrivals, lock, task_of};

/// What a judge reads of a request.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// Its `x-task` header: the test's name for the task that sent it.
    pub task: Option<u32>,
    /// Its headers, names in lower case, values lossy UTF-8.
    pub headers: &'a [(&'a str, &'a str)],
}

impl Seen<'_> {
    /// The value of header `name` (the first, by case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

/// An answer: its status, headers in order, body, and how long after its
/// request arrived it leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    /// An answer with `status`, no headers and no body.
    pub fn new(status: u16) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }

    /// Leaves `delay` after its request arrived (the server's work).
    #[must_use]
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Adds the header `name: value`.
    #[must_use]
    pub fn header(mut self, name: &'static str, value: impl ToString) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }

    /// Sets the body (sent as `application/json`).
    #[must_use]
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }

    /// The value of header `name` (the first, by case-insensitive name).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The answer wiremock sends.
    pub fn template(self) -> ResponseTemplate {
        let mut t = ResponseTemplate::new(self.status);
        for (name, value) in &self.headers {
            t = t.append_header(*name, value.as_str());
        }
        if !self.delay.is_zero() {
            t = t.set_delay(self.delay);
        }
        if self.body.is_empty() {
            t
        } else {
            t.set_body_raw(self.body, "application/json")
        }
    }
}

/// A server's rules: the answer to a request arriving at `now` (the
/// monotonic clock every arrival and client record shares) and `wall`
/// (since the Unix epoch, the real system clock: what a server's `Date`
/// and epoch resets are made of).
pub trait Judge: Send + 'static {
    fn judge(&mut self, request: &Seen<'_>, now: Instant, wall: Duration) -> Reply;
}

/// The system clock, since the Unix epoch.
pub fn wall_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// `since_epoch` (the Unix epoch) as RFC 3339 UTC, with milliseconds or in
/// whole seconds rounded up.
pub fn rfc3339(since_epoch: Duration, millis: bool) -> String {
    let mut secs = since_epoch.as_secs();
    let ms = since_epoch.subsec_nanos().div_ceil(1_000_000);
    let (secs_part, frac) = if millis {
        if ms == 1000 {
            secs += 1;
            (secs, Some(0))
        } else {
            (secs, Some(ms))
        }
    } else {
        (secs + u64::from(since_epoch.subsec_nanos() > 0), None)
    };
    let days = i64::try_from(secs_part / 86_400).unwrap_or(0);
    let rest = secs_part % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (rest / 3600, rest / 60 % 60, rest % 60);
    match frac {
        Some(f) => format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{f:03}Z"),
        None => format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z"),
    }
}

/// Every request a server recorded, on its clock, and what it answered
/// each (`A`, the vendor's kinds of answer), in the same order: a state
/// holding one derefs to it.
#[derive(Debug, Clone)]
pub struct Answered<A> {
    /// Every request, in order (its path and `Idempotency-Key`).
    pub arrivals: Arrivals,
    /// What each of [`arrivals`](Self::arrivals) was answered.
    pub answers: Vec<A>,
}

impl<A> Default for Answered<A> {
    fn default() -> Self {
        Answered {
            arrivals: Arrivals::default(),
            answers: Vec::new(),
        }
    }
}

impl<A: Copy + PartialEq> Answered<A> {
    /// Records `request`, arriving at `now`, answered `answer`.
    pub fn record(&mut self, request: &Seen<'_>, now: Instant, answer: A) {
        let key = request.header("idempotency-key").map(str::to_owned);
        self.arrivals.push_at(now, request.path, key);
        self.answers.push(answer);
    }

    /// Each request's arrival since the first one, with its answer.
    pub fn log(&self) -> Vec<(Duration, A)> {
        let at = self.arrivals.all();
        let Some(&first) = at.first() else {
            return Vec::new();
        };
        at.iter()
            .map(|&t| t.duration_since(first))
            .zip(self.answers.iter().copied())
            .collect()
    }

    /// How many requests got `answer`.
    pub fn count(&self, answer: A) -> usize {
        self.answers.iter().filter(|&&a| a == answer).count()
    }

    /// From the first request to the last one answered `answer`.
    pub fn last(&self, answer: A) -> Option<Duration> {
        self.log()
            .into_iter()
            .rev()
            .find(|(_, a)| *a == answer)
            .map(|(at, _)| at)
    }
}

/// Judges each request with the shared state (none once finished).
struct Responder<S>(Arc<Mutex<Option<S>>>);

impl<S: Judge> Respond for Responder<S> {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let owned: Vec<(&str, String)> = request
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let headers: Vec<(&str, &str)> = owned.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let seen = Seen {
            method: request.method.as_str(),
            path: request.url.path(),
            task: task_of(request),
            headers: &headers,
        };
        match lock(&self.0).as_mut() {
            Some(state) => state.judge(&seen, Instant::now(), wall_now()).template(),
            // Finished: the test has taken the state.
            None => ResponseTemplate::new(503),
        }
    }
}

/// A [`Judge`] served on a fresh port (a new origin), every method and
/// path.
pub struct JudgedServer<S> {
    mock: MockServer,
    state: Arc<Mutex<Option<S>>>,
    pub uri: String,
}

impl<S: Judge> JudgedServer<S> {
    /// Serves `state` on a fresh port.
    pub async fn start(state: S) -> Self {
        let state = Arc::new(Mutex::new(Some(state)));
        let mock = super::serve(Mock::given(any()).respond_with(Responder(state.clone()))).await;
        let uri = mock.uri();
        JudgedServer { mock, state, uri }
    }

    /// What `f` reads of the state now.
    pub fn peek<T>(&self, f: impl FnOnce(&S) -> T) -> T {
        f(lock(&self.state)
            .as_ref()
            .expect("a server's state stays until finish"))
    }

    /// Stops the server and returns its state.
    pub fn finish(self) -> S {
        let JudgedServer { mock, state, .. } = self;
        super::stop(mock);
        lock(&state)
            .take()
            .expect("a server's state is taken once, by finish")
    }
}

//! Request and response extensions: what a caller attaches to a request,
//! and what the middleware attaches to the response.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::HeaderValue;
use tokio::time::Instant;

use crate::planner::{HintSource, StopReason};
use crate::util::far_future;

/// Request extension: the absolute deadline of the whole task, retries and
/// waits included. Without one, the policy's `default_deadline` applies from
/// when the middleware first sees the request.
///
/// ```
/// use std::time::Duration;
/// use reqwest_backpressure::Deadline;
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// let response = client
///     .get("http://localhost/")
///     .with_extension(Deadline::after(Duration::from_secs(10)))
///     .send()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline `budget` from now (saturating far in the future).
    #[must_use]
    pub fn after(budget: Duration) -> Self {
        let now = Instant::now();
        Deadline(now.checked_add(budget).unwrap_or_else(|| far_future(now)))
    }

    /// The deadline at `instant`.
    #[must_use]
    pub fn at(instant: Instant) -> Self {
        Deadline(instant)
    }

    /// The deadline as an instant.
    #[must_use]
    pub fn instant(&self) -> Instant {
        self.0
    }
}

/// Request extension: what the request spends of its origin's quota in
/// cost units (an LLM API's tokens). Admission reserves it before the send
/// and holds the request while the quota the origin's headers stated (or
/// one declared with [`Quota::units`](crate::Quota::units)) is short of it;
/// a request that is not sent gives it back, and the answer's stated
/// remaining reconciles it. Without one, the mean cost per request learned
/// from how the stated remaining falls stands in.
///
/// # What to declare
///
/// - **OpenAI** ([`Policy::openai`](crate::Policy::openai)): one token
///   limit counts a request's prompt and its `max_tokens` together, so
///   declare [`Cost::tokens(prompt, max_tokens)`](Self::tokens) (or
///   [`Cost::new`] of their sum: the same).
/// - **Anthropic** ([`Policy::anthropic`](crate::Policy::anthropic)):
///   input tokens and output tokens have buckets of their own. Declare
///   [`Cost::tokens(input, max_tokens)`](Self::tokens): the input part is
///   spent from the input-token bucket before the send; `max_tokens`, from
///   which Anthropic estimates a message's output when it starts, is
///   reserved from the output-token bucket. Each answer's stated counts
///   reconcile both (Anthropic adjusts the output to what was produced, so
///   the unused part of `max_tokens` comes back).
///   [`Cost::new(input + max_tokens)`](Self::new) would spend all of it
///   from the input bucket and reserve nothing of the output one.
/// - An API that counts something else: [`Cost::new`] of what it counts.
///
/// ```
/// use reqwest_backpressure::{Cost, IdempotencyKey};
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// // An Anthropic message: 1,200 input tokens, `max_tokens` 256.
/// let response = client
///     .post("http://localhost/v1/messages")
///     .with_extension(IdempotencyKey::new("message-42"))
///     .with_extension(Cost::tokens(1_200, 256))
///     .send()
///     .await?;
/// # Ok(()) }
/// ```
///
/// # Which quota it is spent from
///
/// A `Cost` is spent from the quotas in cost units of the limits the
/// request falls under: one the answers state (OpenAI's
/// `x-ratelimit-*-tokens`, Anthropic's `anthropic-ratelimit-*tokens-*`) or
/// one declared with [`Quota::units`](crate::Quota::units) (for the origin
/// with [`Policy::quota`](crate::Policy::quota), for a scope with
/// [`Policy::scope_quota`](crate::Policy::scope_quota)). A quota in
/// requests counts the request as one, whatever its cost (see "What to
/// declare" above for OpenAI's and Anthropic's). The stated remaining then
/// reconciles what was really used. Without a declared cost, the mean cost per request learned from how the
/// stated remaining falls stands in; before any fall is seen, the first
/// answer's distance from the whole window (the first contact's own cost)
/// does, so the first burst is held to what the window pays for. A
/// rejection that the token quota explains (less left than a request costs)
/// holds the origin until the reset like a spent quota and teaches no pace
/// in requests: the token quota, renewed, governs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cost {
    input: u64,
    output: u64,
}

impl Cost {
    /// A cost of `units` (0: none declared), all of it spent from the
    /// origin's token quota whatever that limit counts.
    #[must_use]
    pub const fn new(units: u64) -> Self {
        Cost {
            input: units,
            output: 0,
        }
    }

    /// An LLM message's tokens: `input` (its prompt, known before the send)
    /// and `max_output` (its `max_tokens`, the most it may produce). A
    /// limit that counts both (OpenAI's) spends their sum; a limit of
    /// input tokens only (Anthropic's) spends `input`, and a limit of
    /// output tokens apart (Anthropic's) reserves `max_output`.
    ///
    /// ```
    /// use reqwest_backpressure::Cost;
    /// let cost = Cost::tokens(1_200, 256);
    /// assert_eq!((cost.input(), cost.output(), cost.units()), (1_200, 256, 1_456));
    /// assert_eq!(Cost::new(1_456).units(), cost.units());
    /// ```
    #[must_use]
    pub const fn tokens(input: u64, max_output: u64) -> Self {
        Cost {
            input,
            output: max_output,
        }
    }

    /// The units it spends from a limit that counts everything: the input
    /// and the most output together (saturating).
    #[must_use]
    pub const fn units(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    /// Its input part: what [`new`](Self::new) was given, or the `input`
    /// of [`tokens`](Self::tokens).
    #[must_use]
    pub const fn input(&self) -> u64 {
        self.input
    }

    /// Its output part: the `max_output` of [`tokens`](Self::tokens) (0
    /// for [`new`](Self::new)).
    #[must_use]
    pub const fn output(&self) -> u64 {
        self.output
    }
}

/// Request extension: the task's idempotency key.
///
/// It authorises retrying a non-idempotent method (the server promised, by
/// supporting the key, that a repeat is applied once), it is sent on every
/// attempt as an `Idempotency-Key` header unless the request already has
/// that header, and it identifies the task: a second concurrent send with
/// the same key to the same origin fails with `already_active` and sends
/// nothing.
///
/// The header's form is the client's
/// [`Policy::idempotency_key_form`](crate::Policy::idempotency_key_form):
///
/// - [`IdempotencyKeyForm::SfString`] (the default): the IETF httpapi
///   draft's form, a Structured Field string, `Idempotency-Key: "order-42"`;
///   a server that follows the draft reads the key `order-42`.
/// - [`IdempotencyKeyForm::Raw`]: the key as it is,
///   `Idempotency-Key: order-42`, for servers that take the raw header
///   value as the key (Stripe and APIs modelled on it), which would read
///   the quoted form as another key, quotes included.
///
/// Both forms carry the same keys: one that is empty or has a control or
/// non-ASCII character fails with `invalid_idempotency_key` and sends
/// nothing (the raw form also refuses a key that starts or ends with a
/// space, which a server would trim off). The form changes only what is
/// sent: the task is keyed by the key itself, so `order-42` is one key in
/// both.
///
/// A request with an `Idempotency-Key` header and no extension is treated
/// the same way, keyed by the header's value (quoted or bare, see
/// [`from_header`](Self::from_header)); the header is sent as the caller
/// wrote it, whatever the form. With both, the header wins: it is sent as
/// written and names the key.
///
/// A [`local`](Self::local) key is never sent: for an API that defines no
/// `Idempotency-Key` (Discord, Anthropic, OpenAI's chat endpoints), whose
/// caller knows a repeat of the request is harmless.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey {
    key: Arc<str>,
    /// Whether it is sent as an `Idempotency-Key` header (not [`local`](Self::local)).
    sent: bool,
}

impl IdempotencyKey {
    /// A key; its value should be unique per logical operation.
    #[must_use]
    pub fn new(key: impl Into<String>) -> Self {
        IdempotencyKey {
            key: Arc::from(key.into()),
            sent: true,
        }
    }

    /// A key that is never sent: the caller's word that the request may be
    /// retried (a `429`ed POST to an API that defines no `Idempotency-Key`,
    /// and that refused it before doing anything), used only to run the
    /// task one attempt at a time. Everything else is as for
    /// [`new`](Self::new): the same keys are valid (an invalid one fails
    /// with `invalid_idempotency_key` and sends nothing), a second
    /// concurrent send with the same key to the same origin fails with
    /// `already_active` (`local("a")` and `new("a")` are one key there), and
    /// a shared store keeps its lease as it keeps any key's. A request
    /// without a key (local or sent) of a non-idempotent method is still
    /// never retried (`retry_not_authorized_by_contract`).
    ///
    /// ```
    /// use reqwest_backpressure::IdempotencyKey;
    /// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
    /// // Retried on a 429; no `Idempotency-Key` header reaches the server.
    /// let response = client
    ///     .post("https://api.example.com/v1/messages")
    ///     .with_extension(IdempotencyKey::local("message-42"))
    ///     .send()
    ///     .await?;
    /// # Ok(()) }
    /// assert!(IdempotencyKey::local("message-42").is_local());
    /// assert!(!IdempotencyKey::new("message-42").is_local());
    /// ```
    #[must_use]
    pub fn local(key: impl Into<String>) -> Self {
        IdempotencyKey {
            key: Arc::from(key.into()),
            sent: false,
        }
    }

    /// Whether the key is [`local`](Self::local): never sent.
    #[must_use]
    pub fn is_local(&self) -> bool {
        !self.sent
    }

    /// The key's value.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// The key as an `Idempotency-Key` header value: a Structured Field
    /// string (RFC 8941 §3.3.3), the form the IETF httpapi draft gives it,
    /// quoted, with `"` and `\` escaped. `None` when the key is empty or has
    /// a character an sf-string cannot carry (controls, non-ASCII). The same
    /// as [`header_value_in(IdempotencyKeyForm::SfString)`](Self::header_value_in).
    ///
    /// ```
    /// use reqwest_backpressure::IdempotencyKey;
    /// let v = IdempotencyKey::new(r#"order "42""#).header_value().unwrap();
    /// assert_eq!(v, r#""order \"42\"""#);
    /// assert!(IdempotencyKey::new("ключ").header_value().is_none());
    /// ```
    #[must_use]
    pub fn header_value(&self) -> Option<HeaderValue> {
        self.header_value_in(IdempotencyKeyForm::SfString)
    }

    /// The key as an `Idempotency-Key` header value in `form` (see
    /// [`IdempotencyKeyForm`]). `None` when the key cannot be carried: it is
    /// empty or has a control or non-ASCII character, in either form; in
    /// the raw form, also when it starts or ends with a space (a recipient
    /// trims those off the value, so it would read another key).
    ///
    /// ```
    /// use reqwest_backpressure::{IdempotencyKey, IdempotencyKeyForm};
    /// let key = IdempotencyKey::new("order-42");
    /// assert_eq!(key.header_value_in(IdempotencyKeyForm::SfString).unwrap(), r#""order-42""#);
    /// assert_eq!(key.header_value_in(IdempotencyKeyForm::Raw).unwrap(), "order-42");
    /// assert!(IdempotencyKey::new("line\nbreak").header_value_in(IdempotencyKeyForm::Raw).is_none());
    /// ```
    #[must_use]
    pub fn header_value_in(&self, form: IdempotencyKeyForm) -> Option<HeaderValue> {
        let key = &*self.key;
        if !self.is_valid() {
            return None;
        }
        match form {
            IdempotencyKeyForm::Raw => {
                if key.starts_with(' ') || key.ends_with(' ') {
                    return None;
                }
                HeaderValue::from_str(key).ok()
            }
            IdempotencyKeyForm::SfString => {
                let mut out = String::with_capacity(key.len() + 2);
                out.push('"');
                for c in key.chars() {
                    if matches!(c, '"' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out.push('"');
                HeaderValue::from_str(&out).ok()
            }
        }
    }

    /// Whether the key can be carried at all: not empty, and only visible
    /// ASCII and spaces.
    pub(crate) fn is_valid(&self) -> bool {
        !self.key.is_empty() && self.key.chars().all(|c| matches!(c, ' '..='~'))
    }

    /// The key an `Idempotency-Key` header value names, as the middleware
    /// reads a header the caller set: the inner value of an sf-string
    /// (`"order-42"`, with `\"` and `\\` escapes), else the value as sent (a
    /// bare key, as many APIs use). Surrounding SP/HTAB is ignored. `None`
    /// for a value that is neither: empty, a byte outside visible ASCII and
    /// SP (so two different binary values never name one key), or a
    /// malformed sf-string. [`header_value`](Self::header_value) and this
    /// are inverses.
    ///
    /// ```
    /// use http::HeaderValue;
    /// use reqwest_backpressure::IdempotencyKey;
    /// let k = IdempotencyKey::from_header(&HeaderValue::from_static(r#""a\"b""#)).unwrap();
    /// assert_eq!(k.as_str(), "a\"b");
    /// assert_eq!(IdempotencyKey::from_header(&HeaderValue::from_static("bare-42")).unwrap().as_str(), "bare-42");
    /// assert!(IdempotencyKey::from_header(&HeaderValue::from_bytes(b"k\xfe").unwrap()).is_none());
    /// ```
    #[must_use]
    pub fn from_header(value: &HeaderValue) -> Option<Self> {
        let mut raw = value.as_bytes();
        while let [b' ' | b'\t', rest @ ..] = raw {
            raw = rest;
        }
        while let [rest @ .., b' ' | b'\t'] = raw {
            raw = rest;
        }
        if raw.is_empty() || !raw.iter().all(|b| (b' '..=b'~').contains(b)) {
            return None;
        }
        let Some(quoted) = raw.strip_prefix(b"\"") else {
            return std::str::from_utf8(raw).ok().map(Self::new);
        };
        let mut key = String::with_capacity(quoted.len());
        let mut bytes = quoted.iter();
        while let Some(&b) = bytes.next() {
            match b {
                b'"' => return (bytes.next().is_none() && !key.is_empty()).then(|| Self::new(key)),
                b'\\' => match bytes.next() {
                    Some(&e @ (b'"' | b'\\')) => key.push(char::from(e)),
                    _ => return None,
                },
                _ => key.push(char::from(b)),
            }
        }
        None
    }
}

/// How an [`IdempotencyKey`] is written into the `Idempotency-Key` header,
/// chosen per client with
/// [`Policy::idempotency_key_form`](crate::Policy::idempotency_key_form).
///
/// Servers disagree on what the header's value is. The IETF httpapi draft
/// makes it a Structured Field string, so `"order-42"` names the key
/// `order-42`; Stripe and the APIs modelled on it take the value as sent,
/// so the same header names the key `"order-42"`, quotes included. Only
/// what is sent differs: both forms accept the same keys, and a task is
/// keyed by the key itself.
///
/// # Default
///
/// [`SfString`](Self::SfString), the draft's form.
///
/// ```
/// use reqwest_backpressure::{IdempotencyKey, IdempotencyKeyForm};
/// assert_eq!(IdempotencyKeyForm::default(), IdempotencyKeyForm::SfString);
/// let key = IdempotencyKey::new("order-42");
/// assert_eq!(key.header_value_in(IdempotencyKeyForm::SfString).unwrap(), r#""order-42""#);
/// assert_eq!(key.header_value_in(IdempotencyKeyForm::Raw).unwrap(), "order-42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum IdempotencyKeyForm {
    /// A Structured Field string (RFC 8941 §3.3.3), quoted, with `"` and
    /// `\` escaped: `Idempotency-Key: "order-42"`. The IETF httpapi draft's
    /// form.
    #[default]
    SfString,
    /// The key as it is: `Idempotency-Key: order-42`. For servers that take
    /// the raw header value as the key, such as Stripe's.
    Raw,
}

impl fmt::Debug for IdempotencyKey {
    /// Keys may be guessable secrets; debug output shows only their length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let local = if self.sent { "" } else { ", local" };
        write!(f, "IdempotencyKey(<{} bytes>{local})", self.key.len())
    }
}

/// Placed in the request's extensions before each attempt, so a middleware
/// after this one (tracing, metrics) can tell a first send from a resend,
/// e.g. to record OpenTelemetry's `http.request.resend_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    number: u32,
}

impl Attempt {
    pub(crate) fn new(number: u32) -> Self {
        Attempt { number }
    }

    /// 1-based number of this attempt.
    #[must_use]
    pub fn number(&self) -> u32 {
        self.number
    }

    /// How many times this request was sent before (`number - 1`): the value
    /// of OpenTelemetry's `http.request.resend_count`.
    #[must_use]
    pub fn resend_count(&self) -> u32 {
        self.number.saturating_sub(1)
    }
}

/// Inserted into the extensions of every response the middleware returns:
/// what happened to the task.
///
/// ```
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// use reqwest_backpressure::RetryReport;
/// let response = client.get("http://localhost/").send().await?;
/// if let Some(report) = response.extensions().get::<RetryReport>() {
///     println!("{} attempts, waited {:?}", report.attempts(), report.waited());
///     if let Some(reason) = report.stop_reason() {
///         println!("stopped: {}", reason.code());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryReport {
    pub(crate) attempts: u32,
    pub(crate) waited: Duration,
    pub(crate) stop_reason: Option<StopReason>,
    pub(crate) retry_at: Option<SystemTime>,
    pub(crate) hint_source: Option<HintSource>,
}

impl RetryReport {
    /// Sends this middleware made, counting the first (what
    /// [`max_attempts`](crate::Policy::max_attempts) bounds). A retry
    /// middleware placed after this one (reqwest-retry) resends inside one
    /// of these attempts: its resends are not counted here.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Time the task spent waiting: for the server's time (and jitter)
    /// between attempts, and at the origin's gate or for a paced slot,
    /// including any time queued there before the first send.
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Why the task stopped retrying a pushed-back response; `None` when the
    /// returned response is not a push-back status (e.g. a success).
    #[must_use]
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stop_reason
    }

    /// When the caller may usefully send this request again (on the local
    /// wall clock), set only when the task stopped on a pushback:
    ///
    /// - the server's earliest retry time from the last pushed-back
    ///   response, when it gave a valid one;
    /// - or later, when the origin's gate or the paced queue behind it
    ///   refused the retry: the time the origin could take it. A caller who
    ///   reschedules then neither sends before the server's time nor joins
    ///   the same queue again.
    ///
    /// `None` when the task did not stop on a pushback (a success, also
    /// after a retry: the server's earlier time no longer matters), or when
    /// the server gave no valid time.
    #[must_use]
    pub fn retry_at(&self) -> Option<SystemTime> {
        self.retry_at
    }

    /// Where the time the last pushback asked for came from: the server's
    /// `Retry-After` (`retry_after`), a rate-limit header's reset
    /// (`ratelimit`), the policy's fallback (`fallback`), or, for a
    /// pushback with no time at all, the origin's gate (`gate`: the task
    /// waited there for the hold the pushback closed it for, then for its
    /// paced slot). `None` when no pushback gave a time (a first-try
    /// success, or a stop before one).
    #[must_use]
    pub fn hint_source(&self) -> Option<HintSource> {
        self.hint_source
    }
}

//! Fuzzing the parsers against independent reference predicates.
//!
//! Every generated input goes through the crate's parser inside
//! `catch_unwind` and through a reference written from the specs
//! (`reference.rs`); the two answers are compared. Generators are
//! structured and seeded (`generators.rs`), so a run is reproducible.
//!
//! - `cargo test` runs the short version (`SHORT_N` inputs per parser).
//! - `cargo test --release --all-features --test all fuzz -- --ignored
//!   --nocapture` runs the full one: `FUZZ_N` inputs per parser (default
//!   10,000,000), seed `FUZZ_SEED` (default [`SEED`]).
//!
//! A run fails on any panic, any value the reference rejects but the crate
//! accepts, any value the reference accepts but the crate rejects, and any
//! accepted value that differs, except for the known deviations the
//! reference labels (counted and printed apart, each pinned by an
//! `#[ignore]`d test in `known_deviations.rs` stating the conforming
//! answer).

mod generators;
mod reference;

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use http::header::{HeaderName, RETRY_AFTER};
use http::{HeaderMap, HeaderValue};
use reqwest_backpressure::{
    Hint, IdempotencyKey, RateLimitHeaders, RateLimitHint, ResetFormat, RetryAfter, parse_reset,
    parse_retry_after,
};

use generators::Gen;
use reference::{Expect, Fmt, HintRef, Limit, RetryAfterRef};

/// Inputs per parser in the short run (`cargo test`).
const SHORT_N: u64 = 20_000;
/// Inputs per parser in the full run, unless `FUZZ_N` says otherwise.
const FULL_N: u64 = 10_000_000;
/// The default seed; `FUZZ_SEED` overrides it.
const SEED: u64 = 0x5eed_2026_0b5e_55ed;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How one input's answer compares with the reference's.
enum Verdict {
    Agree { accepted: bool },
    NonConformingAccepted(Option<&'static str>),
    ConformingRejected(Option<&'static str>),
    WrongValue,
    Unjudged,
}

fn judge<V: PartialEq>(expect: &Expect<V>, got: Option<V>) -> Verdict {
    match (&expect.value, got) {
        (None, None) => Verdict::Agree { accepted: false },
        (Some(e), Some(g)) if *e == g => Verdict::Agree { accepted: true },
        (Some(_), Some(_)) => Verdict::WrongValue,
        (None, Some(_)) => Verdict::NonConformingAccepted(expect.known),
        (Some(_), None) => Verdict::ConformingRejected(expect.known),
    }
}

/// The counts of one parser's run.
struct Stats {
    name: &'static str,
    inputs: u64,
    panics: u64,
    non_conforming_accepted: u64,
    conforming_rejected: u64,
    wrong_values: u64,
    accepted: u64,
    unjudged: u64,
    known: BTreeMap<&'static str, u64>,
    /// Unexplained disagreements (panics included), the first few printed.
    failures: u64,
}

impl Stats {
    fn new(name: &'static str) -> Self {
        Stats {
            name,
            inputs: 0,
            panics: 0,
            non_conforming_accepted: 0,
            conforming_rejected: 0,
            wrong_values: 0,
            accepted: 0,
            unjudged: 0,
            known: BTreeMap::new(),
            failures: 0,
        }
    }

    fn fail(&mut self, what: &str, describe: &dyn Fn() -> String) {
        self.failures += 1;
        if self.failures <= 3 {
            eprintln!("fuzz {}: {what}: {}", self.name, describe());
        }
    }

    fn record(&mut self, verdict: Verdict, describe: &dyn Fn() -> String) {
        match verdict {
            Verdict::Agree { accepted } => self.accepted += u64::from(accepted),
            Verdict::Unjudged => self.unjudged += 1,
            Verdict::WrongValue => {
                self.accepted += 1;
                self.wrong_values += 1;
                self.fail("accepted with a value other than the reference's", describe);
            }
            Verdict::NonConformingAccepted(known) => {
                self.accepted += 1;
                self.non_conforming_accepted += 1;
                match known {
                    Some(k) => *self.known.entry(k).or_default() += 1,
                    None => self.fail("non-conforming value accepted", describe),
                }
            }
            Verdict::ConformingRejected(known) => {
                self.conforming_rejected += 1;
                match known {
                    Some(k) => *self.known.entry(k).or_default() += 1,
                    None => self.fail("conforming value rejected", describe),
                }
            }
        }
    }

    /// Runs `f` inside `catch_unwind`; a panic is counted and `None`.
    fn guard<T>(&mut self, describe: &dyn Fn() -> String, f: impl FnOnce() -> T) -> Option<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Some(v),
            Err(_) => {
                self.panics += 1;
                self.fail("panic", describe);
                None
            }
        }
    }

    fn finish(self, elapsed: Duration) {
        let known: Vec<String> = self.known.iter().map(|(k, n)| format!("{k}={n}")).collect();
        println!(
            "fuzz {}: {} inputs, {} panics, {} non-conforming accepted, {} conforming rejected, \
             {} wrong values, {} accepted, {} unjudged, known deviations [{}], {:.1} s",
            self.name,
            self.inputs,
            self.panics,
            self.non_conforming_accepted,
            self.conforming_rejected,
            self.wrong_values,
            self.accepted,
            self.unjudged,
            known.join(", "),
            elapsed.as_secs_f64(),
        );
        assert_eq!(
            self.failures, 0,
            "fuzz {}: {} unexplained disagreements with the reference (first ones above)",
            self.name, self.failures
        );
        assert!(
            self.accepted > self.inputs / 50,
            "fuzz {}: too few accepted inputs; the generator is off",
            self.name
        );
    }
}

/// Runs `n` inputs of one parser, seeded from `seed` and the parser's name.
fn run(name: &'static str, n: u64, mut one: impl FnMut(&mut Gen, &mut Stats)) {
    let seed = env_u64("FUZZ_SEED", SEED)
        ^ name
            .bytes()
            .fold(0u64, |h, b| h.rotate_left(5) ^ u64::from(b));
    let mut g = Gen::new(seed);
    let mut stats = Stats::new(name);
    let start = Instant::now();
    for _ in 0..n {
        stats.inputs += 1;
        one(&mut g, &mut stats);
    }
    stats.finish(start.elapsed());
}

fn esc(v: &[u8]) -> String {
    format!("b\"{}\"", v.escape_ascii())
}

/// The bytes as a header value: bytes `http` refuses (controls but HTAB,
/// DEL) become `?`.
fn header(v: &[u8]) -> HeaderValue {
    let clean: Vec<u8> = v
        .iter()
        .map(|&b| {
            if (b >= 0x20 && b != 0x7f) || b == b'\t' {
                b
            } else {
                b'?'
            }
        })
        .collect();
    HeaderValue::from_bytes(&clean).expect("only bytes http accepts")
}

/// A receive time: the epoch, around now, anywhere up to year 3000, or the
/// last second an HTTP-date can name; with or without nanoseconds.
fn server_now(g: &mut Gen) -> SystemTime {
    let secs = match g.rng.u8(0..4) {
        0 => 0,
        1 => 1_700_000_000 + g.rng.u64(0..100_000_000),
        2 => g.rng.u64(0..32_503_680_000),
        _ => 253_402_300_799,
    };
    let nanos = if g.chance(50) {
        0
    } else {
        g.rng.u32(0..1_000_000_000)
    };
    UNIX_EPOCH + Duration::new(secs, nanos)
}

// --------------------------------------------------------- Retry-After ----

fn retry_after_one(g: &mut Gen, st: &mut Stats) {
    let raw = g.retry_after();
    // `parse_retry_after` takes text: the bytes, made UTF-8.
    let text = String::from_utf8_lossy(&raw).into_owned();
    let expect = reference::retry_after(text.as_bytes());
    let describe = || format!("parse_retry_after({:?}), reference {:?}", text, expect);
    let Some(got) = st.guard(&describe, || parse_retry_after(&text)) else {
        return;
    };
    let got = got.ok().map(|r| match r {
        RetryAfter::Delay(d) => RetryAfterRef::Delay(d),
        RetryAfter::At(t) => RetryAfterRef::At(t),
    });
    let verdict = judge(&expect, got);
    st.record(verdict, &describe);

    // `Hint::from_headers` reads the raw bytes, invalid UTF-8 included,
    // and refuses a second field line.
    let value = header(&raw);
    let lines = if g.chance(5) { 2 } else { 1 };
    let mut map = HeaderMap::new();
    for _ in 0..lines {
        map.append(RETRY_AFTER, value.clone());
    }
    let expect = if lines == 1 {
        reference::retry_after(value.as_bytes())
    } else {
        Expect::reject()
    };
    let describe = || {
        format!(
            "Hint::from_headers({lines} x {}), reference {:?}",
            esc(value.as_bytes()),
            expect
        )
    };
    let Some(got) = st.guard(&describe, || Hint::from_headers(&map)) else {
        return;
    };
    let got = match got {
        Hint::Delay(d) => Some(RetryAfterRef::Delay(d)),
        Hint::At(t) => Some(RetryAfterRef::At(t)),
        Hint::Invalid(_) => None,
        Hint::Missing => Some(RetryAfterRef::Delay(Duration::MAX)),
    };
    let verdict = judge(&expect, got);
    st.record(verdict, &describe);
}

#[test]
fn retry_after_short() {
    run(
        "parse_retry_after + Hint::from_headers",
        SHORT_N,
        retry_after_one,
    );
}

#[test]
#[ignore = "full fuzz run: cargo test --release --test all fuzz -- --ignored"]
fn retry_after_full() {
    run(
        "parse_retry_after + Hint::from_headers",
        env_u64("FUZZ_N", FULL_N),
        retry_after_one,
    );
}

// -------------------------------------------------------- reset values ----

fn crate_format(f: Fmt) -> ResetFormat {
    match f {
        Fmt::Seconds => ResetFormat::Seconds,
        Fmt::EpochSeconds => ResetFormat::EpochSeconds,
        Fmt::Millis => ResetFormat::Millis,
        Fmt::GoDuration => ResetFormat::GoDuration,
        Fmt::Rfc3339 => ResetFormat::Rfc3339,
    }
}

fn reset_one(fmt: Fmt) -> impl FnMut(&mut Gen, &mut Stats) {
    move |g, st| {
        let raw = g.reset(fmt);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let now = server_now(g);
        let expect = reference::reset(text.as_bytes(), fmt, now);
        let describe = || {
            format!(
                "parse_reset({text:?}, {fmt:?}, {:?}), reference {:?}",
                now.duration_since(UNIX_EPOCH),
                expect
            )
        };
        if let Some(got) = st.guard(&describe, || parse_reset(&text, crate_format(fmt), now)) {
            let verdict = judge(&expect, got);
            st.record(verdict, &describe);
        }
    }
}

macro_rules! reset_tests {
    ($($short:ident, $full:ident, $fmt:ident, $name:literal;)*) => {$(
        #[test]
        fn $short() {
            run($name, SHORT_N, reset_one(Fmt::$fmt));
        }

        #[test]
        #[ignore = "full fuzz run: cargo test --release --test all fuzz -- --ignored"]
        fn $full() {
            run($name, env_u64("FUZZ_N", FULL_N), reset_one(Fmt::$fmt));
        }
    )*};
}

reset_tests! {
    reset_seconds_short, reset_seconds_full, Seconds, "parse_reset(Seconds)";
    reset_epoch_short, reset_epoch_full, EpochSeconds, "parse_reset(EpochSeconds)";
    reset_millis_short, reset_millis_full, Millis, "parse_reset(Millis)";
    reset_go_short, reset_go_full, GoDuration, "parse_reset(GoDuration)";
    reset_rfc3339_short, reset_rfc3339_full, Rfc3339, "parse_reset(Rfc3339)";
}

// ------------------------------------------------ rate-limit headers ----

fn hint_ref(h: &RateLimitHint) -> HintRef {
    HintRef {
        remaining: h.remaining(),
        reset: h.reset(),
        exhausted: h.exhausted(),
        retry_in: h.retry_in(),
    }
}

/// Compares two hints; an empty hint is a rejection.
fn judge_hint(expect: HintRef, got: HintRef) -> Verdict {
    let empty = HintRef::default();
    match (expect == empty, got == empty) {
        _ if expect == got => Verdict::Agree {
            accepted: got != empty,
        },
        (true, false) => Verdict::NonConformingAccepted(None),
        (false, true) => Verdict::ConformingRejected(None),
        _ => Verdict::WrongValue,
    }
}

/// One to three field lines: the value whole, split at a comma (as a
/// proxy may), or split anywhere.
fn field_lines(g: &mut Gen, v: Vec<u8>) -> Vec<Vec<u8>> {
    match g.rng.u8(0..10) {
        0 => {
            let at = g.rng.usize(0..=v.len());
            vec![v[..at].to_vec(), v[at..].to_vec()]
        }
        1 => v.split(|&b| b == b',').map(<[u8]>::to_vec).collect(),
        _ => vec![v],
    }
}

fn append_lines(map: &mut HeaderMap, name: &'static str, lines: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let name = HeaderName::from_static(name);
    lines
        .iter()
        .map(|l| {
            let v = header(l);
            map.append(name.clone(), v.clone());
            v.as_bytes().to_vec()
        })
        .collect()
}

fn ietf_one(g: &mut Gen, st: &mut Stats) {
    let mut map = HeaderMap::new();
    let mut ratelimit = Vec::new();
    let (mut remaining, mut reset) = (Vec::new(), Vec::new());
    if g.chance(90) {
        let v = g.ratelimit();
        let lines = field_lines(g, v);
        ratelimit = append_lines(&mut map, "ratelimit", &lines);
    }
    if g.chance(25) {
        let v = g.sf_integer_field();
        remaining = append_lines(&mut map, "ratelimit-remaining", &[v]);
    }
    if g.chance(25) {
        let v = g.sf_integer_field();
        let lines = field_lines(g, v);
        reset = append_lines(&mut map, "ratelimit-reset", &lines);
    }
    let limits = reference::ietf(&ratelimit, &remaining, &reset);
    let describe = || {
        let show = |ls: &[Vec<u8>]| ls.iter().map(|l| esc(l)).collect::<Vec<_>>().join(" + ");
        format!(
            "RateLimit: {}; RateLimit-Remaining: {}; RateLimit-Reset: {}; reference {:?}",
            show(&ratelimit),
            show(&remaining),
            show(&reset),
            limits.as_ref().ok().map(|l| reference::combine(l))
        )
    };
    let now = server_now(g);
    let Some(got) = st.guard(&describe, || RateLimitHeaders::ietf().read(&map, now)) else {
        return;
    };
    let verdict = match &limits {
        Ok(limits) => judge_hint(reference::combine(limits), hint_ref(&got)),
        Err(reference::Ambiguous) => Verdict::Unjudged,
    };
    st.record(verdict, &describe);
}

#[test]
fn ietf_short() {
    run("RateLimitHeaders::ietf().read", SHORT_N, ietf_one);
}

#[test]
#[ignore = "full fuzz run: cargo test --release --test all fuzz -- --ignored"]
fn ietf_full() {
    run(
        "RateLimitHeaders::ietf().read",
        env_u64("FUZZ_N", FULL_N),
        ietf_one,
    );
}

/// One vendor limit, as the presets' docs list them: reset headers in order
/// of preference, and the count header.
type Spec = (&'static [(&'static str, Fmt)], Option<&'static str>);

const GITHUB: &[Spec] = &[(
    &[("x-ratelimit-reset", Fmt::EpochSeconds)],
    Some("x-ratelimit-remaining"),
)];
const OPENAI: &[Spec] = &[
    (
        &[("x-ratelimit-reset-requests", Fmt::GoDuration)],
        Some("x-ratelimit-remaining-requests"),
    ),
    (
        &[("x-ratelimit-reset-tokens", Fmt::GoDuration)],
        Some("x-ratelimit-remaining-tokens"),
    ),
    (&[("retry-after-ms", Fmt::Millis)], None),
];
// Anthropic's token limits are buckets read as cost quotas only
// (`RateLimitHint::tokens`): they take no part in the folded count, reset
// or exhaustion this reference models, so only the request limit is here.
const ANTHROPIC: &[Spec] = &[(
    &[("anthropic-ratelimit-requests-reset", Fmt::Rfc3339)],
    Some("anthropic-ratelimit-requests-remaining"),
)];
const DISCORD: &[Spec] = &[(
    &[
        ("x-ratelimit-reset-after", Fmt::Seconds),
        ("x-ratelimit-reset", Fmt::EpochSeconds),
    ],
    Some("x-ratelimit-remaining"),
)];

/// The only field line of `name`; `None` when absent or repeated.
fn single<'a>(fields: &'a [(&'static str, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    let mut it = fields.iter().filter(|(n, _)| *n == name);
    let first = it.next()?;
    it.next().is_none().then_some(first.1.as_slice())
}

fn presets_one(g: &mut Gen, st: &mut Stats) {
    let (preset, specs, name) = match g.rng.u8(0..4) {
        0 => (RateLimitHeaders::github(), GITHUB, "github"),
        1 => (RateLimitHeaders::openai(), OPENAI, "openai"),
        2 => (RateLimitHeaders::anthropic(), ANTHROPIC, "anthropic"),
        _ => (RateLimitHeaders::discord(), DISCORD, "discord"),
    };
    let mut fields: Vec<(&'static str, Vec<u8>)> = Vec::new();
    for (resets, remaining) in specs {
        for &(h, fmt) in *resets {
            if g.chance(70) {
                for _ in 0..if g.chance(5) { 2 } else { 1 } {
                    let v = g.reset(fmt);
                    fields.push((h, header(&v).as_bytes().to_vec()));
                }
            }
        }
        if let Some(h) = remaining
            && g.chance(70)
        {
            for _ in 0..if g.chance(5) { 2 } else { 1 } {
                let v = if g.chance(70) {
                    g.digits()
                } else {
                    g.decimal()
                };
                let v = g.finish(v.into_bytes());
                fields.push((h, header(&v).as_bytes().to_vec()));
            }
        }
    }
    let mut map = HeaderMap::new();
    for (h, v) in &fields {
        map.append(
            HeaderName::from_static(h),
            HeaderValue::from_bytes(v).expect("clean"),
        );
    }
    let now = server_now(g);
    let limits: Vec<Limit> = specs
        .iter()
        .filter_map(|(resets, remaining)| {
            let reset = resets.iter().find_map(|&(h, fmt)| {
                let v = single(&fields, h)?;
                std::str::from_utf8(v).ok()?;
                let reset = reference::reset(v, fmt, now).value?;
                Some(reset.saturating_add(reference::truncated_by(v, fmt)))
            });
            let remaining = remaining.and_then(|h| reference::count(single(&fields, h)?));
            (reset.is_some() || remaining.is_some()).then_some(Limit { remaining, reset })
        })
        .collect();
    let expect = reference::combine(&limits);
    let describe = || {
        let shown: Vec<String> = fields
            .iter()
            .map(|(h, v)| format!("{h}: {}", esc(v)))
            .collect();
        format!(
            "{name} preset, {}, now {:?}; reference {:?}",
            shown.join("; "),
            now.duration_since(UNIX_EPOCH),
            expect
        )
    };
    if let Some(got) = st.guard(&describe, || preset.read(&map, now)) {
        st.record(judge_hint(expect, hint_ref(&got)), &describe);
    }
}

#[test]
fn presets_short() {
    run(
        "RateLimitHeaders::{github,openai,anthropic,discord}().read",
        SHORT_N,
        presets_one,
    );
}

#[test]
#[ignore = "full fuzz run: cargo test --release --test all fuzz -- --ignored"]
fn presets_full() {
    run(
        "RateLimitHeaders::{github,openai,anthropic,discord}().read",
        env_u64("FUZZ_N", FULL_N),
        presets_one,
    );
}

// ----------------------------------------------------- Idempotency-Key ----

fn from_header_one(g: &mut Gen, st: &mut Stats) {
    let value = header(&g.idempotency_header());
    let expect = Expect {
        value: reference::idempotency_from_header(value.as_bytes()),
        known: None,
    };
    let describe = || {
        format!(
            "IdempotencyKey::from_header({}), reference {:?}",
            esc(value.as_bytes()),
            expect
        )
    };
    let Some(got) = st.guard(&describe, || IdempotencyKey::from_header(&value)) else {
        return;
    };
    // A key read back from its own sf-string form is the same key.
    if let Some(k) = &got {
        let back = st.guard(&describe, || {
            k.header_value()
                .and_then(|v| IdempotencyKey::from_header(&v))
        });
        if back.is_some_and(|b| b.as_ref() != Some(k)) {
            st.record(Verdict::WrongValue, &|| {
                format!("round trip of {}", describe())
            });
            return;
        }
    }
    let verdict = judge(&expect, got.map(|k| k.as_str().to_owned()));
    st.record(verdict, &describe);
}

fn header_value_one(g: &mut Gen, st: &mut Stats) {
    let key = g.key();
    let expect = Expect {
        value: reference::idempotency_header_value(&key),
        known: None,
    };
    let describe = || {
        format!(
            "IdempotencyKey::new({key:?}).header_value(), reference {:?}",
            expect
        )
    };
    let k = IdempotencyKey::new(key.clone());
    let Some(got) = st.guard(&describe, || k.header_value()) else {
        return;
    };
    // `from_header(header_value(k)) == k`.
    if let Some(v) = &got
        && IdempotencyKey::from_header(v).as_ref() != Some(&k)
    {
        st.record(Verdict::WrongValue, &|| {
            format!("round trip of {}", describe())
        });
        return;
    }
    let verdict = judge(&expect, got.map(|v| v.as_bytes().to_vec()));
    st.record(verdict, &describe);
}

#[test]
fn idempotency_from_header_short() {
    run("IdempotencyKey::from_header", SHORT_N, from_header_one);
}

#[test]
#[ignore = "full fuzz run: cargo test --release --test all fuzz -- --ignored"]
fn idempotency_from_header_full() {
    run(
        "IdempotencyKey::from_header",
        env_u64("FUZZ_N", FULL_N),
        from_header_one,
    );
}

#[test]
fn idempotency_header_value_short() {
    run("IdempotencyKey::header_value", SHORT_N, header_value_one);
}

#[test]
#[ignore = "full fuzz run: cargo test --release --test all fuzz -- --ignored"]
fn idempotency_header_value_full() {
    run(
        "IdempotencyKey::header_value",
        env_u64("FUZZ_N", FULL_N),
        header_value_one,
    );
}

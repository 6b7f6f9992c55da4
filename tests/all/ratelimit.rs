//! Rate-limit headers: the reset formats, the IETF `RateLimit` drafts, the
//! vendor presets and how their limits combine, hostile values, and
//! property tests (never panics, valid values round-trip). Times are fixed:
//! no clock, no sleep.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use proptest::prelude::*;
use reqwest_backpressure::{
    MAX_RATELIMIT_LEN, Policy, RateLimitHeaders, RateLimitHint, ResetFormat, parse_reset,
};

/// 2023-11-14T22:13:20Z.
pub(crate) const NOW_SECS: u64 = 1_700_000_000;

pub(crate) fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(NOW_SECS)
}

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

pub(crate) fn map(fields: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in fields {
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).expect("a valid name"),
            HeaderValue::from_str(value).expect("a valid value"),
        );
    }
    headers
}

/// Header lines of any bytes (those a `HeaderValue` takes) under the names
/// `names[i]`, for the property tests.
pub(crate) fn arbitrary_headers(
    names: &[&'static str],
    fields: Vec<(usize, Vec<u8>)>,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, bytes) in fields {
        if let Ok(v) = HeaderValue::from_bytes(&bytes) {
            headers.append(names[name], v);
        }
    }
    headers
}

pub(crate) fn read(preset: &RateLimitHeaders, fields: &[(&str, &str)]) -> RateLimitHint {
    preset.read(&map(fields), now())
}

pub(crate) fn ietf(fields: &[(&str, &str)]) -> RateLimitHint {
    read(&RateLimitHeaders::ietf(), fields)
}

// ------------------------------------------------------------ formats ----

#[test]
fn seconds_and_millis() {
    use ResetFormat::{Millis, Seconds};
    for (value, format, expected) in [
        ("1", Seconds, Some(secs(1))),
        ("0", Seconds, Some(Duration::ZERO)),
        ("0.25", Seconds, Some(ms(250))),
        ("30.500", Seconds, Some(ms(30_500))),
        ("1.234", Seconds, Some(ms(1_234))),
        ("0.000000001", Seconds, Some(Duration::from_nanos(1))),
        ("007", Seconds, Some(secs(7))),
        (" \t5\t ", Seconds, Some(secs(5))),
        ("250", Millis, Some(ms(250))),
        ("1.5", Millis, Some(Duration::from_micros(1_500))),
        ("0.0000001", Millis, Some(Duration::ZERO)),
        // malformed
        ("", Seconds, None),
        ("  ", Seconds, None),
        ("1.", Seconds, None),
        (".5", Seconds, None),
        ("0.0000000001", Seconds, None),
        ("+5", Seconds, None),
        ("-1", Seconds, None),
        ("1e3", Seconds, None),
        ("1 0", Seconds, None),
        ("1,5", Seconds, None),
        ("\u{661}", Seconds, None),
        ("5\u{a0}", Seconds, None),
        ("5s", Seconds, None),
        ("\n5", Seconds, None),
        ("0x10", Millis, None),
        ("250ms", Millis, None),
    ] {
        assert_eq!(
            parse_reset(value, format, now()),
            expected,
            "{value:?} {format:?}"
        );
    }
}

#[test]
fn epoch_seconds() {
    use ResetFormat::EpochSeconds;
    for (value, now_secs, expected) in [
        ("1700000042", NOW_SECS, Some(secs(42))),
        ("1700000000", NOW_SECS, Some(Duration::ZERO)),
        ("1699999000", NOW_SECS, Some(Duration::ZERO)), // past
        ("1470173023.123", 1_470_173_022, Some(ms(1_123))),
        ("0", NOW_SECS, Some(Duration::ZERO)),
        ("1700000042.", NOW_SECS, None),
        ("-1700000042", NOW_SECS, None),
        ("1.7e9", NOW_SECS, None),
    ] {
        let now = UNIX_EPOCH + secs(now_secs);
        assert_eq!(parse_reset(value, EpochSeconds, now), expected, "{value:?}");
    }
}

#[test]
fn go_durations() {
    use ResetFormat::GoDuration;
    for (value, expected) in [
        ("1s", Some(secs(1))),
        ("6m0s", Some(secs(360))),
        ("250ms", Some(ms(250))),
        ("20ms", Some(ms(20))),
        ("0s", Some(Duration::ZERO)),
        ("1h2m3.5s", Some(ms(3_723_500))),
        ("1.5h", Some(secs(5_400))),
        ("7m12.0s", Some(secs(432))),
        ("2us", Some(Duration::from_micros(2))),
        ("1.5\u{b5}s", Some(Duration::from_nanos(1_500))),
        ("3\u{3bc}s", Some(Duration::from_micros(3))),
        ("999ns", Some(Duration::from_nanos(999))),
        ("1m1m", Some(secs(120))),
        // malformed
        ("", None),
        ("1.s", None),
        (".5s", None),
        ("s", None),
        ("5", None),
        ("0", None),
        ("-1s", None),
        ("+1s", None),
        ("1d", None),
        ("1S", None),
        ("1 s", None),
        ("1s 2m", None),
        ("1sec", None),
        ("1e3s", None),
        ("1.0000000001s", None),
        ("\u{661}s", None),
    ] {
        assert_eq!(parse_reset(value, GoDuration, now()), expected, "{value:?}");
    }
}

#[test]
fn rfc3339_dates() {
    use ResetFormat::Rfc3339;
    for (value, expected) in [
        ("2023-11-14T22:13:50Z", Some(secs(30))),
        ("2023-11-14t22:13:50z", Some(secs(30))),
        ("2023-11-14T23:13:50+01:00", Some(secs(30))),
        ("2023-11-14T21:43:50-00:30", Some(secs(30))),
        ("2023-11-14T22:13:50.5Z", Some(ms(30_500))),
        (
            "2023-11-14T22:13:20.123456789Z",
            Some(Duration::from_nanos(123_456_789)),
        ),
        ("2023-11-14T22:13:59.999+00:00", Some(ms(39_999))),
        ("2023-11-14T22:13:19Z", Some(Duration::ZERO)), // past
        ("1970-01-01T00:00:00Z", Some(Duration::ZERO)),
        ("0000-01-01T00:00:00Z", Some(Duration::ZERO)),
        ("2024-02-29T00:00:00Z", Some(secs(1_709_164_800 - NOW_SECS))),
        ("2023-11-14T22:13:60Z", Some(secs(40))), // leap second
        // malformed
        ("2024-02-30T00:00:00Z", None),
        ("2023-02-29T00:00:00Z", None),
        ("1900-02-29T00:00:00Z", None),
        ("2023-04-31T00:00:00Z", None),
        ("2023-13-01T00:00:00Z", None),
        ("2023-00-01T00:00:00Z", None),
        ("2023-01-00T00:00:00Z", None),
        ("2023-01-01T24:00:00Z", None),
        ("2023-01-01T00:60:00Z", None),
        ("2023-01-01T00:00:61Z", None),
        ("2024-01-01 00:00:00Z", None),
        ("2024-01-01T00:00:00", None),
        ("2024-01-01T00:00Z", None),
        ("2024-01-01T00:00:00.Z", None),
        ("2024-01-01T00:00:00.1234567891Z", None),
        ("2024-01-01T00:00:00+0100", None),
        ("2024-01-01T00:00:00+24:00", None),
        ("2024-01-01T00:00:00+01:60", None),
        ("2024-01-01T00:00:00 Z", None),
        ("2024-01-01T00:00:00ZZ", None),
        ("24-01-01T00:00:00Z", None),
        ("+2024-01-01T00:00:00Z", None),
        ("2024-1-01T00:00:00Z", None),
        ("2024-01-01T00:00:00GMT", None),
        ("Mon, 01 Jan 2024 00:00:00 GMT", None),
        ("\u{661}024-01-01T00:00:00Z", None),
    ] {
        assert_eq!(parse_reset(value, Rfc3339, now()), expected, "{value:?}");
    }
}

#[test]
fn huge_values_saturate() {
    let thirty = "9".repeat(30);
    for format in [
        ResetFormat::Seconds,
        ResetFormat::Millis,
        ResetFormat::EpochSeconds,
    ] {
        assert_eq!(
            parse_reset(&thirty, format, now()),
            Some(Duration::MAX),
            "{format:?}"
        );
    }
    let go = format!("{thirty}h");
    assert_eq!(
        parse_reset(&go, ResetFormat::GoDuration, now()),
        Some(Duration::MAX)
    );
    let many_terms = "999999999999999h".repeat(60);
    assert_eq!(
        parse_reset(&many_terms, ResetFormat::GoDuration, now()),
        Some(Duration::MAX)
    );
    // u64::MAX seconds fits; one more does not.
    assert_eq!(
        parse_reset("18446744073709551615", ResetFormat::Seconds, now()),
        Some(Duration::from_secs(u64::MAX))
    );
    assert_eq!(
        parse_reset("18446744073709551616", ResetFormat::Seconds, now()),
        Some(Duration::MAX)
    );
    // Year 9999 is far but representable.
    let far = parse_reset("9999-12-31T23:59:59Z", ResetFormat::Rfc3339, now());
    assert_eq!(far, Some(secs(253_402_300_799 - NOW_SECS)));
}

#[test]
fn over_long_values_are_ignored() {
    let padded = format!("{}1", "0".repeat(MAX_RATELIMIT_LEN - 1));
    assert_eq!(
        parse_reset(&padded, ResetFormat::Seconds, now()),
        Some(secs(1))
    );
    let too_long = format!("0{padded}");
    assert_eq!(parse_reset(&too_long, ResetFormat::Seconds, now()), None);
    let kib4 = "1".repeat(4096);
    for format in [
        ResetFormat::Seconds,
        ResetFormat::EpochSeconds,
        ResetFormat::Millis,
        ResetFormat::GoDuration,
        ResetFormat::Rfc3339,
    ] {
        assert_eq!(parse_reset(&kib4, format, now()), None, "{format:?}");
    }
}

// --------------------------------------------------------------- IETF ----

#[test]
fn draft10_one_policy() {
    let h = ietf(&[
        (
            "ratelimit-policy",
            r#""burst";q=100;w=60, "daily";q=1000;w=86400"#,
        ),
        ("ratelimit", r#""burst";r=50;t=30"#),
    ]);
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(h.reset(), Some(secs(30)));
    assert!(!h.exhausted());
    assert_eq!(h.retry_in(), None);
}

#[test]
fn draft10_policy_field_alone_says_nothing() {
    let h = ietf(&[("ratelimit-policy", r#""burst";q=100;w=60"#)]);
    assert!(h.is_empty());
}

#[test]
fn draft10_the_tightest_policy_binds() {
    let h = ietf(&[("ratelimit", r#""burst";r=50;t=30, "daily";r=7;t=80000"#)]);
    assert_eq!(h.remaining(), Some(7));
    assert_eq!(h.reset(), Some(secs(80_000)));
    assert!(!h.exhausted());
}

#[test]
fn draft10_one_exhausted_policy_of_two() {
    let h = ietf(&[("ratelimit", r#""burst";r=0;t=30, "daily";r=900;t=80000"#)]);
    assert_eq!(h.remaining(), Some(0));
    assert!(h.exhausted());
    assert_eq!(h.reset(), Some(secs(30)));
    assert_eq!(h.retry_in(), Some(secs(30)));
    // Both exhausted: the later reset binds.
    let h = ietf(&[("ratelimit", r#""burst";r=0;t=30, "daily";r=0;t=80000"#)]);
    assert_eq!(h.retry_in(), Some(secs(80_000)));
    assert_eq!(h.reset(), Some(secs(80_000)));
}

#[test]
fn draft10_token_names_and_extra_parameters() {
    let h = ietf(&[("ratelimit", "burst;r=0;t=3;pk=:cHJvamVjdDEyMw==:, day;r=5")]);
    assert_eq!(h.remaining(), Some(0));
    assert_eq!(h.retry_in(), Some(secs(3)));
    // Without t: a count, no reset.
    let h = ietf(&[("ratelimit", r#""day";r=0"#)]);
    assert_eq!(h.remaining(), Some(0));
    assert!(!h.exhausted());
    assert_eq!(h.retry_in(), None);
}

#[test]
fn express_rate_limit_draft8() {
    let h = ietf(&[
        ("ratelimit-policy", r#""50-in-1sec"; q=50; w=1"#),
        ("ratelimit", r#""50-in-1sec"; r=0; t=1"#),
    ]);
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(secs(1)));
}

#[test]
fn draft10_field_lines_combine() {
    let h = ietf(&[
        ("ratelimit", r#""burst";r=3;t=30"#),
        ("ratelimit", r#""daily";r=0;t=600"#),
    ]);
    assert_eq!(h.remaining(), Some(0));
    assert_eq!(h.retry_in(), Some(secs(600)));
}

#[test]
fn draft10_malformed_items_are_skipped() {
    for bad in [
        r#""p";r="0";t=5"#,
        r#""p";r=?1;t=5"#,
        r#""p";r=1.5;t=5"#,
        r#""p";r=-1;t=5"#,
        r#""p";t=5"#,
        r#""p";r=0;t=-5"#,
        r#""p";r=0;t=5.0"#,
        r#""p";r=0;t="5""#,
        r#"("p");r=0;t=5"#,
        "5;r=0;t=5",
        ":cA==:;r=0;t=5",
        "?1;r=0;t=5",
    ] {
        let field = format!(r#"{bad}, "ok";r=9;t=60"#);
        let h = ietf(&[("ratelimit", &field)]);
        assert_eq!(h.remaining(), Some(9), "{bad}");
        assert_eq!(h.reset(), Some(secs(60)), "{bad}");
        assert!(!h.exhausted(), "{bad}");
    }
}

#[test]
fn ratelimit_fields_that_do_not_parse_are_ignored() {
    for bad in [
        r#""burst";r=0;t=30,"#,
        r#""burst";r=0;t=30 "daily""#,
        r#""burst";R=0;t=30"#,
        r#""burst";r=0;t=1000000000000000"#,
        r#""burst";r=0;t=30, "#,
        r#"'burst';r=0;t=30"#,
        "limit=100, remaining=0",
        "limit=100, remaining=0, reset=-1",
        "limit=100, remaining=0, reset=5.5",
        "limit=100, remaining=0, reset=\"5\"",
        "remaining=0, reset=5",
        "100, 0, 5",
    ] {
        let h = ietf(&[("ratelimit", bad)]);
        assert!(h.is_empty(), "{bad}: {h:?}");
    }
}

#[test]
fn ten_policies_are_read_twenty_are_not() {
    let list = |n: usize| {
        (0..n)
            .map(|i| format!(r#""p{i}";r={};t={}"#, 100 - i, 10 + i))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let h = ietf(&[("ratelimit", &list(10))]);
    assert_eq!(h.remaining(), Some(91));
    assert_eq!(h.reset(), Some(secs(19)));
    let h = ietf(&[("ratelimit", &list(16))]);
    assert_eq!(h.remaining(), Some(85));
    assert!(ietf(&[("ratelimit", &list(17))]).is_empty());
    assert!(ietf(&[("ratelimit", &list(20))]).is_empty());
}

#[test]
fn draft07_dictionary() {
    let h = ietf(&[("ratelimit", "limit=100, remaining=50, reset=5")]);
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(h.reset(), Some(secs(5)));
    let h = ietf(&[
        ("ratelimit", "limit=100, remaining=0, reset=5"),
        ("ratelimit-policy", "100;w=60"),
    ]);
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(secs(5)));
}

#[test]
fn draft06_separate_fields() {
    let h = ietf(&[
        ("ratelimit-limit", "100"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", "50"),
    ]);
    assert!(h.exhausted());
    assert_eq!(h.remaining(), Some(0));
    assert_eq!(h.retry_in(), Some(secs(50)));
    // One of the pair still counts.
    let h = ietf(&[("ratelimit-remaining", "7"), ("ratelimit-reset", "-3")]);
    assert_eq!(h.remaining(), Some(7));
    assert_eq!(h.reset(), None);
    // Two field lines of an Item do not combine.
    let h = ietf(&[("ratelimit-remaining", "0"), ("ratelimit-remaining", "5")]);
    assert!(h.is_empty());
}

// ------------------------------------------------------------ vendors ----

#[test]
fn github() {
    let gh = RateLimitHeaders::github();
    let declared = [StatusCode::FORBIDDEN, StatusCode::TOO_MANY_REQUESTS];
    assert_eq!(gh.pushback_statuses(), &declared);
    assert_eq!(gh.retry_after_statuses(), &declared);
    let h = read(
        &gh,
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-used", "5000"),
            ("x-ratelimit-reset", "1700000600"),
        ],
    );
    assert!(h.exhausted());
    assert_eq!(h.reset(), Some(secs(600)));
    assert_eq!(h.retry_in(), Some(secs(600)));
    let h = read(
        &gh,
        &[
            ("x-ratelimit-remaining", "4999"),
            ("x-ratelimit-reset", "1700000600"),
        ],
    );
    assert_eq!(h.remaining(), Some(4_999));
    assert_eq!(h.retry_in(), None);
    // IETF fields are not read by the GitHub preset.
    assert!(read(&gh, &[("ratelimit", r#""b";r=0;t=5"#)]).is_empty());
}

#[test]
fn openai() {
    let oa = RateLimitHeaders::openai();
    let h = read(
        &oa,
        &[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ],
    );
    assert_eq!(h.remaining(), Some(0));
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(secs(360)));
    let h = read(
        &oa,
        &[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "250ms"),
            ("x-ratelimit-remaining-tokens", "10"),
            ("x-ratelimit-reset-tokens", "1h2m3.5s"),
        ],
    );
    assert_eq!(h.retry_in(), Some(ms(250)));
    assert_eq!(h.reset(), Some(ms(250)));
    let h = read(&oa, &[("retry-after-ms", "250")]);
    assert_eq!(h.retry_in(), Some(ms(250)));
    assert_eq!(h.remaining(), None);
    assert!(!h.exhausted());
}

#[test]
fn anthropic() {
    let an = RateLimitHeaders::anthropic();
    let h = read(
        &an,
        &[
            ("anthropic-ratelimit-requests-remaining", "49"),
            ("anthropic-ratelimit-requests-reset", "2023-11-14T22:13:21Z"),
            ("anthropic-ratelimit-input-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2023-11-14T23:14:00.25+01:00",
            ),
            ("anthropic-ratelimit-output-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-output-tokens-reset",
                "2023-11-14T22:13:30Z",
            ),
            ("anthropic-ratelimit-tokens-remaining", "bogus"),
            ("anthropic-ratelimit-tokens-reset", "2023-11-14T22:20:00Z"),
        ],
    );
    // The token limits are buckets, read as cost quotas only: a spent
    // one is no exhaustion of the origin (it refills a request's tokens in
    // a share of its reset, which the cost quota computes).
    assert_eq!(h.remaining(), Some(49));
    assert!(!h.exhausted());
    assert_eq!(h.reset(), Some(secs(1)));
    assert_eq!(h.retry_in(), None);
    // The input-token limit is the one a cost spends from; its count is
    // rounded to the nearest thousand.
    let tokens = h.tokens().unwrap();
    assert_eq!(tokens.remaining(), 0);
    assert_eq!(tokens.reset(), Some(ms(40_250)));
    assert!(tokens.is_bucket() && tokens.counts_input_only());
    assert_eq!(tokens.slack(), 500);
}

#[test]
fn discord() {
    let dc = RateLimitHeaders::discord();
    let at = UNIX_EPOCH + secs(1_470_173_022);
    let fields = map(&[
        ("x-ratelimit-limit", "5"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "1470173023.123"),
        ("x-ratelimit-reset-after", "1.234"),
        ("x-ratelimit-bucket", "abcd1234"),
    ]);
    let h = dc.read(&fields, at);
    assert!(h.exhausted());
    // Read as its upper bound: a server that truncated to milliseconds
    // resets up to one later than it wrote.
    assert_eq!(h.retry_in(), Some(ms(1_235)));
    // Without reset-after (or with a bad one), the epoch reset is used.
    for after in [None, Some("soon")] {
        let mut fields = map(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1470173023.123"),
        ]);
        if let Some(v) = after {
            fields.insert("x-ratelimit-reset-after", HeaderValue::from_static(v));
        }
        assert_eq!(
            dc.read(&fields, at).retry_in(),
            Some(ms(1_124)),
            "{after:?}"
        );
    }
}

#[test]
fn vendor_headers_on_two_lines_are_ignored() {
    let h = read(
        &RateLimitHeaders::github(),
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-remaining", "10"),
            ("x-ratelimit-reset", "1700000600"),
        ],
    );
    assert_eq!(h.remaining(), None);
    assert_eq!(h.retry_in(), Some(secs(600)));
    let h = read(
        &RateLimitHeaders::openai(),
        &[("retry-after-ms", "250"), ("retry-after-ms", "250")],
    );
    assert!(h.is_empty());
}

#[test]
fn malformed_counts_are_ignored() {
    for bad in ["-1", "+1", "1.0", "1e3", "\u{661}", "1 0", "", "0x0"] {
        let h = read(
            &RateLimitHeaders::github(),
            &[
                ("x-ratelimit-remaining", bad),
                ("x-ratelimit-reset", "1700000010"),
            ],
        );
        assert_eq!(h.remaining(), None, "{bad:?}");
        assert!(!h.exhausted(), "{bad:?}");
        assert_eq!(h.retry_in(), Some(secs(10)), "{bad:?}");
    }
    let huge = "9".repeat(30);
    let h = read(
        &RateLimitHeaders::github(),
        &[("x-ratelimit-remaining", &huge)],
    );
    assert_eq!(h.remaining(), Some(u64::MAX));
}

#[test]
fn obs_text_bytes_are_ignored() {
    let mut fields = HeaderMap::new();
    let bytes: &[&[u8]] = &[b"\xff0", b"0\x80", b"1\xc2\xb5s"];
    for value in bytes {
        let v = HeaderValue::from_bytes(value).expect("obs-text is a valid value");
        fields.insert("x-ratelimit-remaining", v.clone());
        fields.insert("x-ratelimit-reset", v.clone());
        fields.insert("ratelimit", v.clone());
        fields.insert("retry-after-ms", v);
        let all = RateLimitHeaders::github()
            .and(RateLimitHeaders::openai())
            .and(RateLimitHeaders::ietf());
        assert!(all.read(&fields, now()).is_empty());
    }
    // The micro sign is the one non-ASCII a Go duration may carry.
    fields.insert(
        "x-ratelimit-reset-requests",
        HeaderValue::from_bytes(b"1\xc2\xb5s").expect("obs-text"),
    );
    let h = RateLimitHeaders::openai().read(&fields, now());
    assert_eq!(h.retry_in(), Some(Duration::from_micros(1)));
}

#[test]
fn four_kib_values_are_ignored() {
    let long = format!("{}0", " ".repeat(4095));
    let list = vec![r#""p";r=0;t=5"#; 300].join(", ");
    let h = read(
        &RateLimitHeaders::github().and(RateLimitHeaders::ietf()),
        &[
            ("x-ratelimit-remaining", &long),
            ("x-ratelimit-reset", &long),
            ("ratelimit", &list),
            ("ratelimit-remaining", &long),
        ],
    );
    assert!(h.is_empty());
}

// ---------------------------------------------------------- combining ----

#[test]
fn presets_combine_with_and() {
    let all = RateLimitHeaders::ietf()
        .and(RateLimitHeaders::github())
        .and(RateLimitHeaders::openai());
    let h = read(
        &all,
        &[
            ("ratelimit", r#""burst";r=3;t=30"#),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1700000090"),
            ("retry-after-ms", "120000"),
        ],
    );
    assert_eq!(h.remaining(), Some(0));
    assert!(h.exhausted());
    assert_eq!(h.reset(), Some(secs(90)));
    assert_eq!(h.retry_in(), Some(secs(120)));
    assert_eq!(
        all.pushback_statuses(),
        &[StatusCode::FORBIDDEN, StatusCode::TOO_MANY_REQUESTS]
    );
}

#[test]
fn a_status_declared_both_ways_keeps_the_broader_rule() {
    let narrow = RateLimitHeaders::none().pushback_status(StatusCode::FORBIDDEN);
    let broad = RateLimitHeaders::none().pushback_status_with_retry_after(StatusCode::FORBIDDEN);
    assert!(narrow.retry_after_statuses().is_empty());
    for both in [
        narrow.clone().and(broad.clone()),
        broad.clone().and(narrow.clone()),
        narrow
            .clone()
            .pushback_status_with_retry_after(StatusCode::FORBIDDEN),
        broad.clone().pushback_status(StatusCode::FORBIDDEN),
    ] {
        assert_eq!(both.pushback_statuses(), &[StatusCode::FORBIDDEN]);
        assert_eq!(both.retry_after_statuses(), &[StatusCode::FORBIDDEN]);
        assert_eq!(both, broad);
    }
}

/// The rate-limit headers read, the answer's status and fields, and
/// whether it is a pushback.
type Case<'a> = (&'a RateLimitHeaders, u16, &'a [(&'a str, &'a str)], bool);

#[test]
fn which_answers_are_pushbacks() {
    let github = RateLimitHeaders::github();
    // 502 declared for an exhausted quota only.
    let narrow = RateLimitHeaders::github().pushback_status(StatusCode::BAD_GATEWAY);
    let ietf = RateLimitHeaders::ietf();
    let exhausted = [
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "1700000060"),
    ];
    let left = [
        ("x-ratelimit-remaining", "4987"),
        ("x-ratelimit-reset", "1700000060"),
    ];
    let left_retry = [
        ("x-ratelimit-remaining", "4987"),
        ("x-ratelimit-reset", "1700000060"),
        ("retry-after", "60"),
    ];
    let date = "Sun, 06 Nov 1994 08:49:37 GMT";
    let cases: &[Case<'_>] = &[
        // GitHub: the primary limit, the secondary limit, a plain 403.
        (&github, 403, &exhausted, true),
        (&github, 403, &left_retry, true),
        (&github, 403, &[("retry-after", "0")], true),
        (&github, 403, &[("retry-after", date)], true),
        (&github, 403, &left, false),
        (&github, 403, &[], false),
        (&github, 403, &[("retry-after", "1.5")], false),
        (
            &github,
            403,
            &[("retry-after", "1"), ("retry-after", "1")],
            false,
        ),
        (&github, 429, &left, true),
        (&github, 404, &left_retry, false),
        // Declared for an exhausted quota only: `Retry-After` is not enough.
        (&narrow, 502, &left_retry, false),
        (&narrow, 502, &exhausted, true),
        // Nothing declared: the policy's statuses only.
        (&ietf, 403, &left_retry, false),
        (&ietf, 403, &exhausted, false),
        (&ietf, 503, &[], true),
    ];
    for (i, &(headers, code, fields, pushback)) in cases.iter().enumerate() {
        let policy = Policy::default().rate_limit_headers(headers.clone());
        let status = StatusCode::from_u16(code).unwrap();
        let fields = map(fields);
        let hint = headers.read(&fields, now());
        assert_eq!(
            policy.is_pushback_response(status, &hint, &fields),
            pushback,
            "case {i}: {code} {fields:?}"
        );
        // Without the answer's headers, only an exhausted quota counts.
        if !policy.is_retry_status(status) {
            assert_eq!(
                policy.is_pushback(status, hint.exhausted()),
                pushback && hint.exhausted(),
                "case {i}"
            );
        }
    }
}

#[test]
fn and_removes_duplicates() {
    let twice = RateLimitHeaders::github().and(RateLimitHeaders::github());
    assert_eq!(twice, RateLimitHeaders::github());
    let ietf = RateLimitHeaders::ietf().and(RateLimitHeaders::ietf());
    assert_eq!(ietf, RateLimitHeaders::default());
    assert_eq!(
        RateLimitHeaders::none().and(RateLimitHeaders::none()),
        RateLimitHeaders::none()
    );
}

#[test]
fn emptiness() {
    assert!(RateLimitHeaders::none().is_empty());
    assert!(
        RateLimitHeaders::none()
            .pushback_status(StatusCode::FORBIDDEN)
            .is_empty()
    );
    assert!(!RateLimitHeaders::ietf().is_empty());
    assert!(!RateLimitHeaders::discord().is_empty());
    let all = map(&[
        ("ratelimit", r#""b";r=0;t=5"#),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "1700000090"),
    ]);
    assert!(RateLimitHeaders::none().read(&all, now()).is_empty());
    assert!(RateLimitHint::default().is_empty());
    assert!(ietf(&[]).is_empty());
}

#[test]
fn custom_reset_header() {
    let custom = RateLimitHeaders::none()
        .reset_header(
            HeaderName::from_static("x-quota-reset"),
            ResetFormat::Seconds,
            Some(HeaderName::from_static("x-quota-left")),
        )
        .reset_header(
            HeaderName::from_static("x-backoff-until"),
            ResetFormat::Rfc3339,
            None,
        )
        .pushback_status(StatusCode::FORBIDDEN)
        .pushback_status(StatusCode::FORBIDDEN)
        .pushback_status(StatusCode::BAD_GATEWAY);
    assert_eq!(
        custom.pushback_statuses(),
        &[StatusCode::FORBIDDEN, StatusCode::BAD_GATEWAY]
    );
    let h = read(&custom, &[("x-quota-left", "0"), ("x-quota-reset", "12.5")]);
    assert!(h.exhausted());
    // One unit of its last digit later: the upper bound of what it wrote.
    assert_eq!(h.retry_in(), Some(ms(12_600)));
    let h = read(
        &custom,
        &[
            ("x-quota-left", "4"),
            ("x-quota-reset", "12.5"),
            ("x-backoff-until", "2023-11-14T22:14:20Z"),
        ],
    );
    assert_eq!(h.remaining(), Some(4));
    assert_eq!(h.reset(), Some(ms(12_600)));
    assert_eq!(h.retry_in(), Some(secs(60)));
}

#[test]
fn a_past_reset_is_zero() {
    let h = read(
        &RateLimitHeaders::github(),
        &[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1600000000"),
        ],
    );
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(Duration::ZERO));
}

// ---------------------------------------------------------- properties ----

fn every_format() -> impl Strategy<Value = ResetFormat> {
    prop_oneof![
        Just(ResetFormat::Seconds),
        Just(ResetFormat::EpochSeconds),
        Just(ResetFormat::Millis),
        Just(ResetFormat::GoDuration),
        Just(ResetFormat::Rfc3339),
    ]
}

fn everything() -> RateLimitHeaders {
    RateLimitHeaders::ietf()
        .and(RateLimitHeaders::github())
        .and(RateLimitHeaders::openai())
        .and(RateLimitHeaders::anthropic())
        .and(RateLimitHeaders::discord())
}

const NAMES: [&str; 10] = [
    "ratelimit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-reset-after",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-tokens",
    "retry-after-ms",
    "anthropic-ratelimit-tokens-reset",
];

proptest! {
    #[test]
    fn parse_reset_never_panics(value in any::<String>(), format in every_format(), now in any::<u64>()) {
        let now = UNIX_EPOCH.checked_add(Duration::from_secs(now)).unwrap_or(UNIX_EPOCH);
        let _ = parse_reset(&value, format, now);
    }

    #[test]
    fn parse_reset_never_panics_on_near_misses(
        value in r"[0-9.:+\-TZtzhmsuµn ]{0,40}",
        format in every_format(),
    ) {
        let _ = parse_reset(&value, format, now());
    }

    #[test]
    fn read_never_panics(
        fields in proptest::collection::vec(
            (0..NAMES.len(), proptest::collection::vec(any::<u8>(), 0..200)),
            0..8,
        ),
    ) {
        let _ = everything().read(&arbitrary_headers(&NAMES, fields), now());
    }

    #[test]
    fn read_never_panics_on_sf_like_text(
        value in r#"("[a-z]{0,3}"|[a-z]{1,3}|[0-9]{1,20})(;[rtqw]=(-?[0-9]{0,20}|\?[01]|"[0-9]*"|[0-9]+\.[0-9]+))*(, ?("[a-z]{0,3}"|[a-z]{1,3}|[a-z]+=[0-9]+)(;[rt]=-?[0-9]{0,20})*){0,20}"#,
    ) {
        let h = ietf(&[("ratelimit", &value)]);
        prop_assert!(h.remaining().is_none() || h.remaining() <= Some(999_999_999_999_999));
    }

    #[test]
    fn go_duration_round_trips(total in any::<u32>()) {
        let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
        let value = format!("{h}h{m}m{s}s");
        prop_assert_eq!(
            parse_reset(&value, ResetFormat::GoDuration, now()),
            Some(secs(u64::from(total)))
        );
    }

    #[test]
    fn go_duration_as_go_writes_it(total_ms in 1u64..10_000_000_000) {
        // Go's Duration.String(): "1h2m3.5s", "6m0s", "1.5s", "250ms".
        let d = ms(total_ms);
        let value = if total_ms < 1000 {
            format!("{total_ms}ms")
        } else {
            let whole = d.as_secs();
            let frac = format!("{:03}", d.subsec_millis());
            let frac = frac.trim_end_matches('0');
            let s = if frac.is_empty() {
                format!("{}s", whole % 60)
            } else {
                format!("{}.{frac}s", whole % 60)
            };
            let (h, m) = (whole / 3600, whole / 60 % 60);
            if h > 0 {
                format!("{h}h{m}m{s}")
            } else if m > 0 {
                format!("{m}m{s}")
            } else {
                s
            }
        };
        prop_assert_eq!(parse_reset(&value, ResetFormat::GoDuration, now()), Some(d), "{}", value);
    }

    #[test]
    fn epoch_at_or_after_now_gives_the_difference(
        ahead in 0u64..1_000_000_000_000,
        nanos in 0u32..1_000_000_000,
        now_secs in 0u64..4_000_000_000,
    ) {
        let now = UNIX_EPOCH + secs(now_secs);
        let value = format!("{}.{nanos:09}", now_secs + ahead);
        prop_assert_eq!(
            parse_reset(&value, ResetFormat::EpochSeconds, now),
            Some(secs(ahead) + Duration::from_nanos(u64::from(nanos)))
        );
        let whole = (now_secs + ahead).to_string();
        prop_assert_eq!(parse_reset(&whole, ResetFormat::EpochSeconds, now), Some(secs(ahead)));
    }

    #[test]
    fn epoch_before_now_is_zero(behind in 1u64..1_000_000) {
        let value = (NOW_SECS - behind).to_string();
        prop_assert_eq!(parse_reset(&value, ResetFormat::EpochSeconds, now()), Some(Duration::ZERO));
    }

    #[test]
    fn seconds_round_trip(whole in any::<u64>(), nanos in 0u32..1_000_000_000) {
        let value = format!("{whole}.{nanos:09}");
        prop_assert_eq!(
            parse_reset(&value, ResetFormat::Seconds, now()),
            Some(Duration::new(whole, nanos))
        );
    }

    #[test]
    fn rfc3339_agrees_with_httpdate(
        at in 86_400u64..253_402_300_799 - 86_400,
        offset_min in -1439i64..=1439,
        nanos in 0u32..1_000_000_000,
    ) {
        // The local wall time at `offset_min`, laid out by httpdate (an
        // independent civil-date conversion), then rewritten as RFC 3339.
        let local = at.checked_add_signed(offset_min * 60).expect("in range");
        let imf = httpdate::fmt_http_date(UNIX_EPOCH + secs(local));
        let parts: Vec<&str> = imf.split(' ').collect();
        let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            .iter()
            .position(|m| *m == parts[2])
            .expect("a month")
            + 1;
        let sign = if offset_min < 0 { '-' } else { '+' };
        let (oh, om) = (offset_min.abs() / 60, offset_min.abs() % 60);
        let value = format!(
            "{}-{month:02}-{}T{}.{nanos:09}{sign}{oh:02}:{om:02}",
            parts[3], parts[1], parts[4]
        );
        prop_assert_eq!(
            parse_reset(&value, ResetFormat::Rfc3339, UNIX_EPOCH),
            Some(Duration::new(at, nanos)),
            "{}", value
        );
    }

    #[test]
    fn draft10_round_trips(r in 0u64..1_000_000_000_000_000, t in 0u64..1_000_000_000_000_000) {
        let h = ietf(&[("ratelimit", &format!(r#""p";r={r};t={t}"#))]);
        prop_assert_eq!(h.remaining(), Some(r));
        prop_assert_eq!(h.reset(), Some(secs(t)));
        prop_assert_eq!(h.exhausted(), r == 0);
    }
}

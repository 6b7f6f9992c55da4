//! The strict `Retry-After` parser: table tests over RFC 9110 examples and
//! hostile values, `Hint::from_headers`, `server_date`, clock skew, and
//! property tests (never panics, never waits on garbage).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::header::{DATE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use reqwest_backpressure::planner::Pushback;
use reqwest_backpressure::{
    Hint, InvalidReason, MAX_RETRY_AFTER_LEN, RetryAfter, parse_retry_after, server_date,
};

/// `Sun, 06 Nov 1994 08:49:37 GMT`, the RFC 9110 §5.6.7 example.
const RFC_EXAMPLE_SECS: u64 = 784_111_777;
/// `Fri, 31 Dec 1999 23:59:59 GMT`, the RFC 9110 §10.2.3 example.
const RFC_RETRY_AFTER_SECS: u64 = 946_684_799;
/// The first second of year 10000: the end of what an HTTP-date can say.
const YEAR_10000_SECS: u64 = 253_402_300_800;

fn wall(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn headers(name: http::HeaderName, values: &[&[u8]]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for v in values {
        map.append(
            name.clone(),
            HeaderValue::from_bytes(v).expect("a value http accepts"),
        );
    }
    map
}

fn reason(value: &str) -> Option<InvalidReason> {
    parse_retry_after(value).err().map(|e| e.reason())
}

// ---------------------------------------------------------------- valid ----

#[test]
fn rfc_9110_examples_in_all_three_date_formats() {
    let expected = RetryAfter::At(wall(RFC_EXAMPLE_SECS));
    for value in [
        "Sun, 06 Nov 1994 08:49:37 GMT",  // IMF-fixdate
        "Sunday, 06-Nov-94 08:49:37 GMT", // obsolete RFC 850
        "Sun Nov  6 08:49:37 1994",       // ANSI C asctime()
    ] {
        assert_eq!(parse_retry_after(value), Ok(expected), "{value:?}");
    }
}

#[test]
fn rfc_9110_retry_after_examples() {
    assert_eq!(
        parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT"),
        Ok(RetryAfter::At(wall(RFC_RETRY_AFTER_SECS)))
    );
    assert_eq!(parse_retry_after("120"), Ok(RetryAfter::Delay(secs(120))));
}

#[test]
fn valid_values_table() {
    let zeros_then_7 = format!("{}7", "0".repeat(MAX_RETRY_AFTER_LEN - 1));
    assert_eq!(zeros_then_7.len(), 128);
    let thirty_nines = "9".repeat(30);
    let thirty_digits = "123456789012345678901234567890";
    let table: Vec<(&str, RetryAfter)> = vec![
        ("120", RetryAfter::Delay(secs(120))),
        ("0000120", RetryAfter::Delay(secs(120))),
        ("0", RetryAfter::Delay(Duration::ZERO)),
        ("000", RetryAfter::Delay(Duration::ZERO)),
        ("1", RetryAfter::Delay(secs(1))),
        // u64::MAX exactly, then u64::MAX + 1: saturates, no overflow.
        ("18446744073709551615", RetryAfter::Delay(secs(u64::MAX))),
        ("18446744073709551616", RetryAfter::Delay(secs(u64::MAX))),
        (thirty_digits, RetryAfter::Delay(secs(u64::MAX))),
        (&thirty_nines, RetryAfter::Delay(secs(u64::MAX))),
        (&zeros_then_7, RetryAfter::Delay(secs(7))),
        // Optional whitespace (SP / HTAB) around the value.
        (" 120\t", RetryAfter::Delay(secs(120))),
        ("\t \t0 \t ", RetryAfter::Delay(Duration::ZERO)),
        (
            "  Sun, 06 Nov 1994 08:49:37 GMT\t",
            RetryAfter::At(wall(RFC_EXAMPLE_SECS)),
        ),
        (
            "\tSun Nov  6 08:49:37 1994 ",
            RetryAfter::At(wall(RFC_EXAMPLE_SECS)),
        ),
        // asctime's day is `2DIGIT / ( SP DIGIT )`: both are valid.
        (
            "Sun Nov 06 08:49:37 1994",
            RetryAfter::At(wall(RFC_EXAMPLE_SECS)),
        ),
        // The longest RFC 850 weekday.
        (
            "Wednesday, 09-Nov-94 08:49:37 GMT",
            RetryAfter::At(wall(RFC_EXAMPLE_SECS + 3 * 86_400)),
        ),
        // The epoch and the last second an HTTP-date can express.
        ("Thu, 01 Jan 1970 00:00:00 GMT", RetryAfter::At(UNIX_EPOCH)),
        (
            "Fri, 31 Dec 9999 23:59:59 GMT",
            RetryAfter::At(wall(YEAR_10000_SECS - 1)),
        ),
        // A leap day.
        (
            "Tue, 29 Feb 2000 12:00:00 GMT",
            RetryAfter::At(wall(951_825_600)),
        ),
        // Second 60 (RFC 9110 §5.6.7 allows a leap second): the next
        // minute's :00.
        (
            "Sun, 06 Nov 1994 08:49:60 GMT",
            RetryAfter::At(wall(RFC_EXAMPLE_SECS - 37 + 60)),
        ),
    ];
    for (value, expected) in table {
        assert_eq!(parse_retry_after(value), Ok(expected), "{value:?}");
    }
}

#[test]
fn thirty_digit_delay_is_enormous_not_an_error() {
    let parsed = parse_retry_after(&"9".repeat(30)).expect("valid delay-seconds");
    let RetryAfter::Delay(d) = parsed else {
        panic!("not a delay: {parsed:?}");
    };
    assert!(d >= secs(u64::MAX));
    // Measuring it from any time neither panics nor shrinks it.
    assert_eq!(parsed.delay_from(wall(RFC_EXAMPLE_SECS)), d);
}

// -------------------------------------------------------------- invalid ----

#[test]
fn invalid_values_table() {
    use InvalidReason::{Empty, Malformed, NonAscii, TooLong};
    let too_long = "0".repeat(MAX_RETRY_AFTER_LEN + 1);
    let too_long_date = format!("{}Sun, 06 Nov 1994 08:49:37 GMT", " ".repeat(100));
    assert!(too_long_date.len() > MAX_RETRY_AFTER_LEN);
    let table: Vec<(&str, InvalidReason)> = vec![
        ("", Empty),
        ("   ", Empty),
        (" \t ", Empty),
        // Signs, fractions, exponents, inner spaces, other radixes.
        ("-1", Malformed),
        ("+1", Malformed),
        ("-0", Malformed),
        ("1.5", Malformed),
        ("1.", Malformed),
        (".5", Malformed),
        ("1e3", Malformed),
        ("1 2", Malformed),
        ("0x10", Malformed),
        ("1_000", Malformed),
        ("1,000", Malformed),
        // Unicode digits (Arabic-Indic three, full-width twelve,
        // superscript two) and other non-ASCII.
        ("٣", NonAscii),
        ("１２", NonAscii),
        ("²", NonAscii),
        ("12\u{a0}", NonAscii),
        ("\u{a0}12", NonAscii),
        ("12é", NonAscii),
        ("Sün, 06 Nov 1994 08:49:37 GMT", NonAscii),
        // Controls are not OWS.
        ("\n120", NonAscii),
        ("120\r\n", NonAscii),
        ("1\t2", NonAscii),
        ("12\0", NonAscii),
        // Longer than 128 bytes, even if it would otherwise be valid.
        (&too_long, TooLong),
        (&too_long_date, TooLong),
        // Other date formats.
        ("1994-11-06T08:49:37Z", Malformed),
        ("1994-11-06 08:49:37", Malformed),
        ("Sun, 06 Nov 1994 08:49:37 gmt", Malformed),
        ("sun, 06 nov 1994 08:49:37 GMT", Malformed),
        ("Sun, 06 Nov 1994 08:49:37 UTC", Malformed),
        ("Sun, 06 Nov 1994 08:49:37 +0000", Malformed),
        ("Sun, 6 Nov 1994 08:49:37 GMT", Malformed),
        ("Sun, 06 Nov 94 08:49:37 GMT", Malformed),
        ("Sunday, 06-Nov-1994 08:49:37 GMT", Malformed),
        ("Sun Nov 6 08:49:37 1994", Malformed),
        ("Sun Nov  6 08:49:37 1994 GMT", Malformed),
        ("06 Nov 1994 08:49:37 GMT", Malformed),
        ("784111777.0", Malformed),
        // A wrong weekday, and dates or times that do not exist.
        ("Mon, 06 Nov 1994 08:49:37 GMT", Malformed),
        ("Monday, 06-Nov-94 08:49:37 GMT", Malformed),
        ("Mon Nov  6 08:49:37 1994", Malformed),
        ("Sun, 31 Feb 1994 08:49:37 GMT", Malformed),
        ("Sun, 06 Nov 1994 24:00:00 GMT", Malformed),
        ("Sun, 06 Nov 1994 08:49:61 GMT", Malformed),
        ("Sunday, 06-Nov-94x08:49:37 GMT", Malformed),
        ("Sun, 06 Xyz 1994 08:49:37 GMT", Malformed),
        // Trailing or leading garbage.
        ("120abc", Malformed),
        ("abc120", Malformed),
        ("120s", Malformed),
        ("120 s", Malformed),
        ("Sun, 06 Nov 1994 08:49:37 GMT x", Malformed),
        ("Sun, 06 Nov 1994 08:49:37 GMT,", Malformed),
        ("\"120\"", Malformed),
        // A comma list (two values folded into one field line).
        ("120, 120", Malformed),
        ("120,120", Malformed),
        (
            "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT",
            Malformed,
        ),
        // Words.
        ("soon", Malformed),
        ("never", Malformed),
        ("Infinity", Malformed),
        ("NaN", Malformed),
    ];
    for (value, expected) in table {
        assert_eq!(reason(value), Some(expected), "{value:?}");
    }
}

#[test]
fn length_limit_is_exactly_128_bytes() {
    let ok = format!("{}1", "0".repeat(MAX_RETRY_AFTER_LEN - 1));
    assert_eq!(ok.len(), 128);
    assert_eq!(parse_retry_after(&ok), Ok(RetryAfter::Delay(secs(1))));
    let long = format!("{}1", "0".repeat(MAX_RETRY_AFTER_LEN));
    assert_eq!(long.len(), 129);
    assert_eq!(reason(&long), Some(InvalidReason::TooLong));
    assert_eq!(
        reason(&"0".repeat(MAX_RETRY_AFTER_LEN + 1)),
        Some(InvalidReason::TooLong)
    );
    // Huge garbage is refused by its length without looking further.
    assert_eq!(reason(&"x".repeat(1 << 20)), Some(InvalidReason::TooLong));
}

#[test]
fn ows_is_only_sp_and_htab() {
    assert_eq!(
        parse_retry_after(" 120\t"),
        Ok(RetryAfter::Delay(secs(120)))
    );
    assert!(parse_retry_after("\n120").is_err());
    for ws in [
        "\r", "\n", "\u{b}", "\u{c}", "\u{a0}", "\u{2003}", "\u{3000}",
    ] {
        assert!(parse_retry_after(&format!("{ws}120")).is_err(), "{ws:?}");
        assert!(parse_retry_after(&format!("120{ws}")).is_err(), "{ws:?}");
        assert!(
            parse_retry_after(&format!("{ws}Sun, 06 Nov 1994 08:49:37 GMT")).is_err(),
            "{ws:?}"
        );
    }
}

#[test]
fn pre_1970_date_is_invalid_by_contract() {
    // 1 Jan 1960 was a Friday: calendrically valid, but no server means a
    // date before the Unix epoch; httpdate refuses years < 1970 and so do we
    // (documented on `parse_retry_after`): the task stops, it never guesses.
    let parsed = parse_retry_after("Fri, 01 Jan 1960 00:00:00 GMT");
    assert_eq!(
        parsed.map_err(|e| e.reason()),
        Err(InvalidReason::Malformed)
    );
}

// ---------------------------------------------------------- delay_from ----

#[test]
fn delay_from_a_date() {
    let at = RetryAfter::At(wall(1_000));
    assert_eq!(at.delay_from(wall(2_000)), Duration::ZERO, "past date");
    assert_eq!(at.delay_from(wall(1_000)), Duration::ZERO, "now");
    assert_eq!(at.delay_from(wall(999)), secs(1));
    assert_eq!(at.delay_from(wall(40)), secs(960), "future date");
    assert_eq!(
        at.delay_from(wall(999) + Duration::from_millis(250)),
        Duration::from_millis(750)
    );
    assert_eq!(at.delay_from(UNIX_EPOCH), secs(1_000));
}

#[test]
fn delay_from_a_delay_ignores_now() {
    let d = RetryAfter::Delay(secs(120));
    for now in [
        UNIX_EPOCH,
        wall(RFC_EXAMPLE_SECS),
        wall(YEAR_10000_SECS * 2),
    ] {
        assert_eq!(d.delay_from(now), secs(120));
    }
}

#[test]
fn delay_from_the_rfc_example() {
    let at = parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT").unwrap();
    assert_eq!(
        at.delay_from(wall(RFC_RETRY_AFTER_SECS - 3_600)),
        secs(3_600)
    );
    assert_eq!(
        at.delay_from(wall(RFC_RETRY_AFTER_SECS + 1)),
        Duration::ZERO
    );
}

// --------------------------------------------------------- from_headers ----

#[test]
fn hint_missing() {
    assert_eq!(Hint::from_headers(&HeaderMap::new()), Hint::Missing);
    assert_eq!(Hint::Missing.kind(), "missing");
    // Another header does not count.
    let other = headers(DATE, &[b"Sun, 06 Nov 1994 08:49:37 GMT"]);
    assert_eq!(Hint::from_headers(&other), Hint::Missing);
}

#[test]
fn hint_valid_values() {
    let h = Hint::from_headers(&headers(RETRY_AFTER, &[b"120"]));
    assert_eq!(h, Hint::Delay(secs(120)));
    assert_eq!(h.kind(), "delay");
    let h = Hint::from_headers(&headers(RETRY_AFTER, &[b"Sun, 06 Nov 1994 08:49:37 GMT"]));
    assert_eq!(h, Hint::At(wall(RFC_EXAMPLE_SECS)));
    assert_eq!(h.kind(), "date");
    let h = Hint::from_headers(&headers(RETRY_AFTER, &[b"0000120"]));
    assert_eq!(h, Hint::Delay(secs(120)));
    // The header name is case-insensitive on the wire.
    let mut map = HeaderMap::new();
    map.insert(
        http::HeaderName::from_bytes(b"RETRY-AFTER").unwrap(),
        HeaderValue::from_static("5"),
    );
    assert_eq!(Hint::from_headers(&map), Hint::Delay(secs(5)));
}

fn invalid_reason(hint: Hint) -> Option<InvalidReason> {
    match hint {
        Hint::Invalid(e) => Some(e.reason()),
        _ => None,
    }
}

#[test]
fn hint_two_field_lines_are_invalid() {
    for values in [
        &[b"120".as_slice(), b"120".as_slice()][..],
        &[b"1", b"2"],
        &[b"Sun, 06 Nov 1994 08:49:37 GMT", b"120"],
        &[b"120", b"", b"120"],
    ] {
        let h = Hint::from_headers(&headers(RETRY_AFTER, values));
        assert_eq!(h.kind(), "invalid");
        assert_eq!(
            invalid_reason(h),
            Some(InvalidReason::MultipleFields),
            "{values:?}"
        );
    }
}

#[test]
fn hint_obs_text_is_non_ascii() {
    let h = Hint::from_headers(&headers(RETRY_AFTER, &[b"12\xff"]));
    assert_eq!(invalid_reason(h), Some(InvalidReason::NonAscii));
    let h = Hint::from_headers(&headers(RETRY_AFTER, &[b"\x80"]));
    assert_eq!(invalid_reason(h), Some(InvalidReason::NonAscii));
    // UTF-8 for an Arabic-Indic digit, as raw bytes.
    let h = Hint::from_headers(&headers(RETRY_AFTER, &["٣".as_bytes()]));
    assert_eq!(invalid_reason(h), Some(InvalidReason::NonAscii));
}

#[test]
fn hint_other_invalid_values() {
    let cases: [(&[u8], InvalidReason); 5] = [
        (b"", InvalidReason::Empty),
        (b"  ", InvalidReason::Empty),
        (b"-1", InvalidReason::Malformed),
        (b"120, 120", InvalidReason::Malformed),
        (b"1\t2", InvalidReason::NonAscii),
    ];
    for (value, expected) in cases {
        let h = Hint::from_headers(&headers(RETRY_AFTER, &[value]));
        assert_eq!(invalid_reason(h), Some(expected), "{value:?}");
    }
    let long = vec![b'0'; MAX_RETRY_AFTER_LEN + 1];
    let h = Hint::from_headers(&headers(RETRY_AFTER, &[&long]));
    assert_eq!(invalid_reason(h), Some(InvalidReason::TooLong));
}

#[test]
fn invalid_retry_after_displays_its_reason() {
    let e = parse_retry_after("1.5").unwrap_err();
    assert_eq!(e.reason(), InvalidReason::Malformed);
    let text = e.to_string();
    assert!(text.contains("Retry-After"), "{text}");
}

// ----------------------------------------------------------- server_date ----

#[test]
fn server_date_valid() {
    for value in [
        &b"Sun, 06 Nov 1994 08:49:37 GMT"[..],
        b"Sunday, 06-Nov-94 08:49:37 GMT",
        b"Sun Nov  6 08:49:37 1994",
        b" Sun, 06 Nov 1994 08:49:37 GMT ",
    ] {
        assert_eq!(
            server_date(&headers(DATE, &[value])),
            Some(wall(RFC_EXAMPLE_SECS)),
            "{value:?}"
        );
    }
}

#[test]
fn server_date_invalid_or_ambiguous() {
    assert_eq!(server_date(&HeaderMap::new()), None, "missing");
    for value in [
        &b"yesterday"[..],
        b"",
        b"120", // delay-seconds is not a date
        b"0",
        b"1994-11-06T08:49:37Z",
        b"Mon, 06 Nov 1994 08:49:37 GMT",
        b"Sun, 06 Nov 1994 08:49:37 GMT\xff",
    ] {
        assert_eq!(server_date(&headers(DATE, &[value])), None, "{value:?}");
    }
    // Two Date field lines, even equal ones: which one would be the truth?
    let two = headers(
        DATE,
        &[
            b"Sun, 06 Nov 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 08:49:37 GMT",
        ],
    );
    assert_eq!(server_date(&two), None);
    // A Retry-After alone is not a Date.
    assert_eq!(
        server_date(&headers(RETRY_AFTER, &[b"Sun, 06 Nov 1994 08:49:37 GMT"])),
        None
    );
}

#[test]
fn retry_after_date_is_measured_from_the_server_date() {
    // The server's clock is one hour behind ours; it asks for 5 s.
    let received_at = wall(RFC_EXAMPLE_SECS + 3_600);
    let mut map = HeaderMap::new();
    map.insert(
        DATE,
        HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
    );
    map.insert(
        RETRY_AFTER,
        HeaderValue::from_static("Sun, 06 Nov 1994 08:49:42 GMT"),
    );
    let date = server_date(&map).expect("a valid Date");
    assert_eq!(date, wall(RFC_EXAMPLE_SECS));
    let hint = Hint::from_headers(&map);
    assert_eq!(hint, Hint::At(date + secs(5)));

    let pushback = Pushback {
        server_now: date,
        ..Pushback::new(hint, received_at)
    };
    assert_eq!(pushback.server_delay(), Some(secs(5)));
    assert_eq!(pushback.retry_at(), Some(received_at + secs(5)));

    // Measured against our own clock instead, the date would be an hour in
    // the past: no wait at all.
    let naive = Pushback::new(hint, received_at);
    assert_eq!(naive.server_delay(), Some(Duration::ZERO));

    // Skew the other way (server an hour ahead): still 5 s.
    let received_at = wall(RFC_EXAMPLE_SECS - 3_600);
    let pushback = Pushback {
        server_now: date,
        ..Pushback::new(hint, received_at)
    };
    assert_eq!(pushback.server_delay(), Some(secs(5)));
    assert_eq!(pushback.retry_at(), Some(received_at + secs(5)));
}

#[test]
fn delay_seconds_ignore_the_server_date() {
    let received_at = wall(RFC_EXAMPLE_SECS + 3_600);
    let pushback = Pushback {
        server_now: wall(RFC_EXAMPLE_SECS),
        ..Pushback::new(Hint::Delay(secs(5)), received_at)
    };
    assert_eq!(pushback.server_delay(), Some(secs(5)));
    assert_eq!(pushback.retry_at(), Some(received_at + secs(5)));
}

// ----------------------------------------------------------- properties ----

fn trim_ows(s: &str) -> &str {
    s.trim_matches([' ', '\t'])
}

fn is_delay_seconds(s: &str) -> bool {
    let t = trim_ows(s);
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// The whole contract of the parser as a predicate: `Ok` only for
/// OWS-trimmed ASCII digits or what `httpdate` accepts, within 128 bytes,
/// without controls or obs-text.
fn check_characterisation(s: &str) -> Result<(), TestCaseError> {
    match parse_retry_after(s) {
        Ok(RetryAfter::Delay(_)) => {
            prop_assert!(is_delay_seconds(s), "{:?} taken as delay-seconds", s);
            prop_assert!(s.len() <= MAX_RETRY_AFTER_LEN);
        }
        Ok(RetryAfter::At(t)) => {
            prop_assert!(s.len() <= MAX_RETRY_AFTER_LEN);
            prop_assert_eq!(httpdate::parse_http_date(trim_ows(s)).ok(), Some(t));
            prop_assert!(
                trim_ows(s)
                    .bytes()
                    .all(|b| b == b' ' || b.is_ascii_graphic())
            );
        }
        Err(_) => {}
    }
    if !is_delay_seconds(s) && httpdate::parse_http_date(trim_ows(s)).is_err() {
        prop_assert!(parse_retry_after(s).is_err(), "{:?} accepted", s);
    }
    Ok(())
}

fn valid_date_text() -> impl Strategy<Value = String> {
    (0..YEAR_10000_SECS).prop_map(|s| httpdate::fmt_http_date(wall(s)))
}

/// A valid date or number with one random edit: the near misses a fuzzer
/// would take ages to find by chance.
fn near_miss() -> impl Strategy<Value = String> {
    let base = prop_oneof![
        valid_date_text(),
        "[0-9]{1,30}",
        Just("Sunday, 06-Nov-94 08:49:37 GMT".to_owned()),
        Just("Sun Nov  6 08:49:37 1994".to_owned()),
    ];
    let edit_char = prop_oneof![
        any::<char>(),
        prop::sample::select(vec![
            ' ', '\t', '\n', '\r', ',', '-', '+', '.', ':', '0', '9', 'G', 'g', 'Z', '\u{a0}'
        ]),
    ];
    (base, any::<prop::sample::Index>(), edit_char, 0..3u8).prop_map(|(s, at, c, op)| {
        let mut chars: Vec<char> = s.chars().collect();
        let i = at.index(chars.len() + 1);
        match op {
            0 => chars.insert(i, c),
            1 if i < chars.len() => {
                chars.remove(i);
            }
            _ if i < chars.len() => chars[i] = c,
            _ => chars.push(c),
        }
        chars.into_iter().collect()
    })
}

fn garbage_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ \t]{0,3}[-+0-9.eExX, _]{0,12}[ \t]{0,3}",
        "[ \t\r\n]{0,2}[0-9]{1,5}[ \t\r\n]{0,2}",
        "[A-Za-z0-9 ,:-]{0,40}",
        "\\PC{0,20}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn never_panics_on_any_string(s in any::<String>()) {
        let _ = parse_retry_after(&s);
    }

    #[test]
    fn never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let s = String::from_utf8_lossy(&bytes);
        let _ = parse_retry_after(&s);
        // Raw bytes through a header map too (http refuses some values).
        if let Ok(v) = HeaderValue::from_bytes(&bytes) {
            let mut map = HeaderMap::new();
            map.insert(RETRY_AFTER, v.clone());
            map.insert(DATE, v);
            let hint = Hint::from_headers(&map);
            let _ = server_date(&map);
            match (hint, parse_retry_after(&s)) {
                // Header bytes that are not ASCII are never accepted.
                (Hint::Delay(_) | Hint::At(_), _) if !bytes.is_ascii() => {
                    prop_assert!(false, "non-ASCII bytes accepted: {:?}", bytes);
                }
                (Hint::Delay(d), Ok(RetryAfter::Delay(e))) => prop_assert_eq!(d, e),
                (Hint::At(d), Ok(RetryAfter::At(e))) => prop_assert_eq!(d, e),
                (Hint::Invalid(_), Err(_)) | (Hint::Missing, _) => {}
                (hint, parsed) => prop_assert!(
                    false,
                    "header and string disagree: {:?} vs {:?}",
                    hint,
                    parsed
                ),
            }
        }
    }

    #[test]
    fn garbage_never_yields_ok_any_string(s in any::<String>()) {
        check_characterisation(&s)?;
    }

    #[test]
    fn garbage_never_yields_ok_near_misses(s in near_miss()) {
        check_characterisation(&s)?;
    }

    #[test]
    fn garbage_never_yields_ok_number_like(s in garbage_like()) {
        check_characterisation(&s)?;
    }

    #[test]
    fn every_digit_string_up_to_128_is_a_delay(digits in "[0-9]{1,128}") {
        let significant = digits.trim_start_matches('0');
        let expected = if significant.len() > 20 {
            u64::MAX
        } else if significant.is_empty() {
            0
        } else {
            let v: u128 = significant.parse().unwrap();
            u64::try_from(v).unwrap_or(u64::MAX)
        };
        prop_assert_eq!(
            parse_retry_after(&digits),
            Ok(RetryAfter::Delay(Duration::from_secs(expected)))
        );
        // With OWS around it, if it still fits.
        let padded = format!(" {digits}\t");
        if padded.len() <= MAX_RETRY_AFTER_LEN {
            prop_assert_eq!(
                parse_retry_after(&padded),
                Ok(RetryAfter::Delay(Duration::from_secs(expected)))
            );
        }
    }

    #[test]
    fn every_formatted_date_round_trips(
        s in 0..YEAR_10000_SECS,
        nanos in 0..1_000_000_000u32,
    ) {
        let t = UNIX_EPOCH + Duration::new(s, nanos);
        let truncated = RetryAfter::At(wall(s));
        let imf = httpdate::fmt_http_date(t);
        prop_assert_eq!(parse_retry_after(&imf), Ok(truncated), "{}", imf);

        // The same instant in asctime and (where the two-digit year maps
        // back to it) RFC 850 format, rebuilt from the IMF-fixdate fields.
        let wday = &imf[0..3];
        let day: u32 = imf[5..7].parse().unwrap();
        let mon = &imf[8..11];
        let year: u32 = imf[12..16].parse().unwrap();
        let time = &imf[17..25];
        let asctime = format!("{wday} {mon} {day:>2} {time} {year}");
        prop_assert_eq!(parse_retry_after(&asctime), Ok(truncated), "{}", asctime);
        if (1970..2070).contains(&year) {
            let long = match wday {
                "Mon" => "Monday",
                "Tue" => "Tuesday",
                "Wed" => "Wednesday",
                "Thu" => "Thursday",
                "Fri" => "Friday",
                "Sat" => "Saturday",
                _ => "Sunday",
            };
            let rfc850 = format!("{long}, {day:02}-{mon}-{:02} {time} GMT", year % 100);
            prop_assert_eq!(parse_retry_after(&rfc850), Ok(truncated), "{}", rfc850);
        }
    }
}

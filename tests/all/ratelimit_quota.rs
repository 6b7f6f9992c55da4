//! Rate-limit quotas: what a limit allows per window, beside what is left.
//! The IETF `RateLimit-Policy` matched to `RateLimit` by name, the draft-07
//! `limit` and draft-06 `RateLimit-Limit`, the vendor `-limit` headers, and
//! which limit's quota binds ([`RateLimitHint::limit`], `window`,
//! `concurrency`). Times are fixed: no clock, no sleep.

use std::time::Duration;

use http::HeaderName;
use proptest::prelude::*;
use reqwest_backpressure::{MAX_RATELIMIT_LEN, RateLimitHeaders, RateLimitHint, ResetFormat};

use crate::ratelimit::{arbitrary_headers, ietf, map, now, read, secs};

/// `RateLimit-Policy: policy` with `RateLimit: ratelimit`.
fn policy(policy: &str, ratelimit: &str) -> RateLimitHint {
    ietf(&[("ratelimit-policy", policy), ("ratelimit", ratelimit)])
}

/// The quota and window of the binding limit.
fn quota(h: &RateLimitHint) -> (Option<u64>, Option<Duration>) {
    (h.limit(), h.window())
}

// -------------------------------------------------- RateLimit-Policy ----

#[test]
fn policy_matches_ratelimit_by_name() {
    let h = policy(r#""burst";q=100;w=60"#, r#""burst";r=50;t=30"#);
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(h.reset(), Some(secs(30)));
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
    // A string and a token of the same text are the same name.
    let h = policy("burst;q=100;w=60", r#""burst";r=50;t=30"#);
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
    let h = policy(r#""burst";q=100;w=60"#, "burst;r=50;t=30");
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
    // Names compare exactly.
    let h = policy(r#""Burst";q=100;w=60"#, r#""burst";r=50;t=30"#);
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(quota(&h), (None, None));
    // Without `w`: a quota, no window.
    let h = policy(r#""burst";q=100"#, r#""burst";r=50;t=30"#);
    assert_eq!(quota(&h), (Some(100), None));
    // `pk` is ignored, whatever its type.
    let h = policy(
        r#""burst";q=100;w=60;pk=:cHJvamVjdDEyMw==:, "day";q=9;pk=5"#,
        r#""burst";r=50;t=30;pk=:cHJvamVjdDEyMw==:, "day";r=60"#,
    );
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
}

#[test]
fn an_item_without_its_policy_has_no_quota() {
    let h = policy(r#""daily";q=1000;w=86400"#, r#""burst";r=5;t=30"#);
    assert_eq!(h.remaining(), Some(5));
    assert_eq!(quota(&h), (None, None));
    // No RateLimit-Policy at all.
    let h = ietf(&[("ratelimit", r#""burst";r=5;t=30"#)]);
    assert_eq!(quota(&h), (None, None));
    // A requests policy alone says nothing.
    assert!(ietf(&[("ratelimit-policy", r#""burst";q=100;w=60"#)]).is_empty());
}

#[test]
fn the_tightest_policy_gives_its_quota() {
    let policies = r#""burst";q=100;w=60, "daily";q=1000;w=86400"#;
    let h = policy(policies, r#""burst";r=50;t=30, "daily";r=7;t=80000"#);
    assert_eq!(h.remaining(), Some(7));
    assert_eq!(h.reset(), Some(secs(80_000)));
    assert_eq!(quota(&h), (Some(1000), Some(secs(86_400))));
    let h = policy(policies, r#""burst";r=0;t=30, "daily";r=900;t=80000"#);
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(secs(30)));
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
    // Both spent: the smaller quota, though the later reset binds.
    let h = policy(policies, r#""burst";r=0;t=30, "daily";r=0;t=80000"#);
    assert_eq!(h.reset(), Some(secs(80_000)));
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
    // The policies' order does not matter.
    let h = policy(
        r#""daily";q=1000;w=86400, "burst";q=100;w=60"#,
        r#""daily";r=0;t=80000, "burst";r=0;t=30"#,
    );
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
    // A tie with an item whose quota is unknown: none.
    let h = policy(policies, r#""burst";r=0;t=30, "other";r=0;t=5"#);
    assert_eq!(h.remaining(), Some(0));
    assert_eq!(quota(&h), (None, None));
}

#[test]
fn policy_field_lines_combine() {
    let h = ietf(&[
        ("ratelimit-policy", r#""burst";q=100;w=60"#),
        ("ratelimit-policy", r#""daily";q=1000;w=86400"#),
        ("ratelimit", r#""burst";r=50;t=30, "daily";r=7;t=80000"#),
    ]);
    assert_eq!(quota(&h), (Some(1000), Some(secs(86_400))));
}

#[test]
fn malformed_policies_are_ignored() {
    for bad in [
        r#""p";w=60"#,
        r#""p";q="100";w=60"#,
        r#""p";q=-1;w=60"#,
        r#""p";q=1.5;w=60"#,
        r#""p";q=?1;w=60"#,
        r#""p";q=:AQ==:;w=60"#,
        r#""p";q=100;w=-60"#,
        r#""p";q=100;w=60.0"#,
        r#""p";q=100;w="60""#,
        r#""p";q=100;qu=requests"#,
        r#""p";q=100;qu=1"#,
        r#"("p");q=100;w=60"#,
        "5;q=100;w=60",
        ":cA==:;q=100;w=60",
        "?1;q=100;w=60",
    ] {
        // The policy is skipped; the others and the counts still count.
        let field = format!(r#"{bad}, "ok";q=10;w=1"#);
        let h = policy(&field, r#""p";r=5;t=30, "ok";r=9;t=1"#);
        assert_eq!(h.remaining(), Some(5), "{bad}");
        assert_eq!(h.reset(), Some(secs(30)), "{bad}");
        assert_eq!(quota(&h), (None, None), "{bad}");
        let h = policy(&field, r#""p";r=50;t=30, "ok";r=9;t=1"#);
        assert_eq!(quota(&h), (Some(10), Some(secs(1))), "{bad}");
    }
}

#[test]
fn policy_fields_that_do_not_parse_are_ignored() {
    for bad in [
        r#""p";q=100;w=60,"#,
        r#""p";q=100;w=60 "ok""#,
        r#""p";Q=100"#,
        r#""p";q=1000000000000000"#,
        r#"'p';q=100"#,
        "q=100, w=60",
    ] {
        let h = policy(bad, r#""p";r=5;t=30"#);
        assert_eq!(h.remaining(), Some(5), "{bad}");
        assert_eq!(quota(&h), (None, None), "{bad}");
    }
    // Over the length limit, the policies are ignored whole.
    let field = |len: usize| {
        let head = r#""p";q=100, ""#;
        let tail = r#"";q=1"#;
        format!("{head}{}{tail}", "a".repeat(len - head.len() - tail.len()))
    };
    let at_limit = field(MAX_RATELIMIT_LEN);
    assert_eq!(at_limit.len(), MAX_RATELIMIT_LEN);
    let h = policy(&at_limit, r#""p";r=5;t=30"#);
    assert_eq!(quota(&h), (Some(100), None));
    let h = policy(&field(MAX_RATELIMIT_LEN + 1), r#""p";r=5;t=30"#);
    assert_eq!(h.remaining(), Some(5));
    assert_eq!(quota(&h), (None, None));
}

#[test]
fn sixteen_policies_are_read_seventeen_are_not() {
    let list = |n: usize| {
        (0..n)
            .map(|i| format!(r#""p{i}";q={};w=60"#, 1000 + i))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let last = |n: usize| format!(r#""p{}";r=3;t=30"#, n - 1);
    let h = policy(&list(16), &last(16));
    assert_eq!(quota(&h), (Some(1015), Some(secs(60))));
    let h = policy(&list(17), &last(17));
    assert_eq!(h.remaining(), Some(3));
    assert_eq!(quota(&h), (None, None));
    let h = policy(&list(17), r#""p0";r=3;t=30"#);
    assert_eq!(quota(&h), (None, None));
}

#[test]
fn a_name_given_twice_has_no_quota() {
    let h = policy(r#""p";q=100;w=60, "p";q=10;w=1"#, r#""p";r=5;t=30"#);
    assert_eq!(h.remaining(), Some(5));
    assert_eq!(quota(&h), (None, None));
    // A malformed policy of the same name does not count.
    let h = policy(r#""p";q=100;w=60, "p";q=-1"#, r#""p";r=5;t=30"#);
    assert_eq!(quota(&h), (Some(100), Some(secs(60))));
}

#[test]
fn concurrent_requests_give_the_concurrency_only() {
    let policies = r#""minute";q=60;w=60, "inflight";q=4;qu="concurrent-requests""#;
    let h = policy(policies, r#""minute";r=50;t=30, "inflight";r=0;t=5"#);
    assert_eq!(h.concurrency(), Some(4));
    // The concurrency count is not a spent quota.
    assert_eq!(h.remaining(), Some(50));
    assert!(!h.exhausted());
    assert_eq!(h.reset(), Some(secs(30)));
    assert_eq!(h.retry_in(), None);
    assert_eq!(quota(&h), (Some(60), Some(secs(60))));
    // Alone in RateLimit: no count at all, and still a hint.
    let h = policy(policies, r#""inflight";r=0;t=5"#);
    assert_eq!(h.concurrency(), Some(4));
    assert_eq!(h.remaining(), None);
    assert_eq!(h.reset(), None);
    assert!(!h.is_empty());
    // Without a RateLimit item, or a RateLimit field, it still counts.
    let h = policy(policies, r#""minute";r=50;t=30"#);
    assert_eq!(h.concurrency(), Some(4));
    let h = ietf(&[("ratelimit-policy", policies)]);
    assert_eq!(h.concurrency(), Some(4));
    assert_eq!(h.remaining(), None);
    assert!(!h.is_empty());
    // Several: the smallest.
    let h = ietf(&[(
        "ratelimit-policy",
        r#""a";q=8;qu="concurrent-requests", "b";q=3;qu="concurrent-requests";w=1"#,
    )]);
    assert_eq!(h.concurrency(), Some(3));
    // Beside a draft-07 or draft-06 limit.
    let h = ietf(&[
        ("ratelimit-policy", policies),
        ("ratelimit", "limit=100, remaining=0, reset=5"),
    ]);
    assert_eq!(h.concurrency(), Some(4));
    assert!(h.exhausted());
    // Requests policies give none.
    let h = policy(r#""minute";q=60;w=60;qu="requests""#, r#""minute";r=5"#);
    assert_eq!(h.concurrency(), None);
    assert_eq!(quota(&h), (Some(60), Some(secs(60))));
}

#[test]
fn content_bytes_and_unknown_units_give_no_count() {
    for unit in ["content-bytes", "widgets", ""] {
        let policies = format!(r#""minute";q=60;w=60, "bytes";q=65536;w=60;qu="{unit}""#);
        let h = policy(&policies, r#""minute";r=50;t=30, "bytes";r=10;t=40"#);
        assert_eq!(h.remaining(), Some(50), "{unit}");
        assert_eq!(h.reset(), Some(secs(30)), "{unit}");
        assert_eq!(quota(&h), (Some(60), Some(secs(60))), "{unit}");
        assert_eq!(h.concurrency(), None, "{unit}");
        let h = policy(&policies, r#""bytes";r=10;t=40"#);
        assert!(h.is_empty(), "{unit}: {h:?}");
        // Spent, it still asks for its wait.
        let h = policy(&policies, r#""minute";r=50;t=30, "bytes";r=0;t=40"#);
        assert!(h.exhausted(), "{unit}");
        assert_eq!(h.remaining(), Some(50), "{unit}");
        assert_eq!(h.reset(), Some(secs(40)), "{unit}");
        assert_eq!(h.retry_in(), Some(secs(40)), "{unit}");
        // The reset is not the request limit's: no quota to renew then.
        assert_eq!(quota(&h), (None, None), "{unit}");
    }
}

#[test]
fn express_rate_limit_draft8_policy() {
    let h = ietf(&[
        ("ratelimit-policy", r#""50-in-1sec"; q=50; w=1"#),
        ("ratelimit", r#""50-in-1sec"; r=0; t=1"#),
    ]);
    assert!(h.exhausted());
    assert_eq!(quota(&h), (Some(50), Some(secs(1))));
}

// ------------------------------------------------- draft-07, draft-06 ----

#[test]
fn draft07_limit_is_the_quota() {
    let h = ietf(&[("ratelimit", "limit=100, remaining=50, reset=5")]);
    assert_eq!(h.remaining(), Some(50));
    assert_eq!(quota(&h), (Some(100), None));
    // Its integer RateLimit-Policy is not read.
    let h = ietf(&[
        ("ratelimit", "limit=100, remaining=0, reset=5"),
        ("ratelimit-policy", "100;w=60"),
    ]);
    assert_eq!(quota(&h), (Some(100), None));
}

#[test]
fn draft06_ratelimit_limit() {
    let with = |limit: &str| {
        ietf(&[
            ("ratelimit-limit", limit),
            ("ratelimit-remaining", "3"),
            ("ratelimit-reset", "50"),
        ])
    };
    for (limit, expected) in [
        ("100", (Some(100), None)),
        ("10;w=1", (Some(10), Some(secs(1)))),
        ("10;w=1;comment=\"x\"", (Some(10), Some(secs(1)))),
        // draft-03: the first member, with the window of its policy.
        ("10, 10;w=1, 50;w=60", (Some(10), Some(secs(1)))),
        ("50, 10;w=1, 50;w=60", (Some(50), Some(secs(60)))),
        ("10;w=5, 10;w=1", (Some(10), Some(secs(5)))),
        ("10, 50;w=60", (Some(10), None)),
        ("10, 10;w=1, 10;w=2", (Some(10), None)),
        ("10, 10;w=1, 10;w=1", (Some(10), Some(secs(1)))),
        ("10, 10;w=-1, 10;w=2", (Some(10), Some(secs(2)))),
        // Malformed: no quota.
        ("-1", (None, None)),
        ("10.0", (None, None)),
        ("\"10\"", (None, None)),
        ("10;w=-1", (None, None)),
        ("10;w=1.5", (None, None)),
        ("(10);w=1", (None, None)),
        ("ten", (None, None)),
        ("10,", (None, None)),
    ] {
        let h = with(limit);
        assert_eq!(h.remaining(), Some(3), "{limit}");
        assert_eq!(h.reset(), Some(secs(50)), "{limit}");
        assert_eq!(quota(&h), expected, "{limit}");
    }
    // A longer list than a policy list: none.
    let long = vec!["10;w=1"; 17].join(", ");
    assert_eq!(quota(&with(&long)), (None, None));
    let sixteen = vec!["10;w=1"; 16].join(", ");
    assert_eq!(quota(&with(&sixteen)), (Some(10), Some(secs(1))));
    // Field lines combine as a List.
    let h = ietf(&[
        ("ratelimit-limit", "10"),
        ("ratelimit-limit", "10;w=1"),
        ("ratelimit-remaining", "3"),
    ]);
    assert_eq!(quota(&h), (Some(10), Some(secs(1))));
    // A quota alone is no limit.
    assert!(ietf(&[("ratelimit-limit", "10;w=1")]).is_empty());
    // With only a reset, the limit has no count: it does not bind.
    let h = ietf(&[("ratelimit-limit", "10;w=1"), ("ratelimit-reset", "5")]);
    assert_eq!(h.retry_in(), Some(secs(5)));
    assert_eq!(quota(&h), (None, None));
}

// ------------------------------------------------------------ vendors ----

#[test]
fn github_limit() {
    let gh = RateLimitHeaders::github();
    let h = read(
        &gh,
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "4999"),
            ("x-ratelimit-used", "1"),
            ("x-ratelimit-reset", "1700000600"),
        ],
    );
    assert_eq!(h.remaining(), Some(4_999));
    assert_eq!(quota(&h), (Some(5000), None));
    // Padded with OWS, as the counts are.
    let h = read(
        &gh,
        &[
            ("x-ratelimit-limit", " 60\t"),
            ("x-ratelimit-remaining", "0"),
        ],
    );
    assert_eq!(h.limit(), Some(60));
    // A quota alone is no limit.
    assert!(read(&gh, &[("x-ratelimit-limit", "5000")]).is_empty());
}

#[test]
fn malformed_or_repeated_limit_headers_are_ignored() {
    for bad in ["-1", "+1", "5k", "1.0", "1e3", "\u{661}", "", "0x10"] {
        let h = read(
            &RateLimitHeaders::github(),
            &[
                ("x-ratelimit-limit", bad),
                ("x-ratelimit-remaining", "7"),
                ("x-ratelimit-reset", "1700000010"),
            ],
        );
        assert_eq!(h.remaining(), Some(7), "{bad:?}");
        assert_eq!(quota(&h), (None, None), "{bad:?}");
    }
    // Two field lines: which one is the quota is a guess.
    let h = read(
        &RateLimitHeaders::github(),
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "7"),
        ],
    );
    assert_eq!(h.remaining(), Some(7));
    assert_eq!(quota(&h), (None, None));
    let h = read(
        &RateLimitHeaders::openai(),
        &[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-limit-requests", "600"),
            ("x-ratelimit-remaining-requests", "7"),
        ],
    );
    assert_eq!(quota(&h), (None, None));
    // Huge quotas saturate, as counts do.
    let huge = "9".repeat(30);
    let h = read(
        &RateLimitHeaders::github(),
        &[("x-ratelimit-limit", &huge), ("x-ratelimit-remaining", "7")],
    );
    assert_eq!(h.limit(), Some(u64::MAX));
}

#[test]
fn openai_limits() {
    let oa = RateLimitHeaders::openai();
    let fields = |requests_left: &'static str, tokens_left: &'static str| {
        [
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", requests_left),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", tokens_left),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]
    };
    // The requests limit binds.
    let h = read(&oa, &fields("5", "149984"));
    assert_eq!(h.remaining(), Some(5));
    assert_eq!(h.reset(), Some(secs(1)));
    assert_eq!(quota(&h), (Some(60), None));
    // The tokens limit binds: its quota is no request count.
    let h = read(&oa, &fields("59", "0"));
    assert_eq!(h.remaining(), Some(0));
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(secs(360)));
    assert_eq!(quota(&h), (None, None));
    // Both spent: the smaller quota is the requests'.
    let h = read(&oa, &fields("0", "0"));
    assert_eq!(quota(&h), (Some(60), None));
    // retry-after-ms has no count and never binds.
    let h = read(&oa, &[("retry-after-ms", "250")]);
    assert_eq!(quota(&h), (None, None));
}

#[test]
fn anthropic_limits() {
    let an = RateLimitHeaders::anthropic();
    let fields = [
        ("anthropic-ratelimit-requests-limit", "50"),
        ("anthropic-ratelimit-requests-remaining", "49"),
        ("anthropic-ratelimit-requests-reset", "2023-11-14T22:13:21Z"),
        ("anthropic-ratelimit-tokens-limit", "48000"),
        ("anthropic-ratelimit-tokens-remaining", "47000"),
        ("anthropic-ratelimit-tokens-reset", "2023-11-14T22:13:25Z"),
        ("anthropic-ratelimit-input-tokens-limit", "40000"),
        ("anthropic-ratelimit-input-tokens-remaining", "39000"),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "2023-11-14T22:13:25Z",
        ),
        ("anthropic-ratelimit-output-tokens-limit", "8000"),
        ("anthropic-ratelimit-output-tokens-remaining", "7000"),
        (
            "anthropic-ratelimit-output-tokens-reset",
            "2023-11-14T22:13:30Z",
        ),
    ];
    let h = read(&an, &fields);
    assert_eq!(h.remaining(), Some(49));
    assert_eq!(h.reset(), Some(secs(1)));
    // A bucket of requests is no window renewed whole at its reset.
    assert_eq!(quota(&h), (None, None));
    // Token buckets spent: no exhaustion of the origin; the input one is
    // the cost quota's.
    let mut spent = fields;
    spent[7].1 = "0";
    spent[10].1 = "0";
    let h = read(&an, &spent);
    assert_eq!(h.remaining(), Some(49));
    assert!(!h.exhausted());
    assert_eq!(
        h.tokens().map(|t| (t.remaining(), t.limit())),
        Some((0, Some(40_000)))
    );
    // The request bucket spent: a wait for the next request's refill (a
    // 50th of the 1 s it takes to fill), not the whole refill.
    spent[1].1 = "0";
    let h = read(&an, &spent);
    assert!(h.exhausted());
    assert_eq!(h.retry_in(), Some(Duration::from_millis(20)));
}

#[test]
fn discord_limit() {
    let h = RateLimitHeaders::discord().read(
        &map(&[
            ("x-ratelimit-limit", "5"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset-after", "1.234"),
        ]),
        now(),
    );
    assert!(h.exhausted());
    assert_eq!(quota(&h), (Some(5), None));
}

#[test]
fn a_declared_limit_states_no_quota() {
    let custom = RateLimitHeaders::none().reset_header(
        HeaderName::from_static("x-ratelimit-reset"),
        ResetFormat::EpochSeconds,
        Some(HeaderName::from_static("x-ratelimit-remaining")),
    );
    let fields = [
        ("x-ratelimit-limit", "5000"),
        ("x-ratelimit-remaining", "7"),
        ("x-ratelimit-reset", "1700000600"),
    ];
    let h = read(&custom, &fields);
    assert_eq!(h.remaining(), Some(7));
    assert_eq!(quota(&h), (None, None));
    // Beside GitHub's preset, the same count with an unknown quota: none.
    let h = read(&custom.and(RateLimitHeaders::github()), &fields);
    assert_eq!(h.remaining(), Some(7));
    assert_eq!(quota(&h), (None, None));
}

#[test]
fn presets_combine_with_quotas() {
    let all = RateLimitHeaders::ietf()
        .and(RateLimitHeaders::github())
        .and(RateLimitHeaders::openai());
    let h = read(
        &all,
        &[
            ("ratelimit-policy", r#""burst";q=10;w=1"#),
            ("ratelimit", r#""burst";r=3;t=1"#),
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "900"),
            ("x-ratelimit-reset", "1700000090"),
        ],
    );
    assert_eq!(h.remaining(), Some(3));
    assert_eq!(quota(&h), (Some(10), Some(secs(1))));
    let h = read(
        &all,
        &[
            ("ratelimit-policy", r#""burst";q=10;w=1"#),
            ("ratelimit", r#""burst";r=3;t=1"#),
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "2"),
            ("x-ratelimit-reset", "1700000090"),
        ],
    );
    assert_eq!(h.remaining(), Some(2));
    assert_eq!(quota(&h), (Some(5000), None));
}

#[test]
fn hints_stay_copy_and_comparable() {
    let h = policy(r#""burst";q=100;w=60"#, r#""burst";r=50;t=30"#);
    let copy = h;
    assert_eq!(copy, h);
    assert_ne!(h, ietf(&[("ratelimit", r#""burst";r=50;t=30"#)]));
    assert!(RateLimitHint::default().limit().is_none());
    assert!(RateLimitHint::default().window().is_none());
    assert!(RateLimitHint::default().concurrency().is_none());
}

// ---------------------------------------------------------- properties ----

const NAMES: [&str; 6] = [
    "ratelimit",
    "ratelimit-policy",
    "ratelimit-limit",
    "ratelimit-remaining",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
];

proptest! {
    #[test]
    fn read_never_panics_with_quota_fields(
        fields in proptest::collection::vec(
            (0..NAMES.len(), proptest::collection::vec(any::<u8>(), 0..200)),
            0..8,
        ),
    ) {
        let all = RateLimitHeaders::ietf()
            .and(RateLimitHeaders::github())
            .and(RateLimitHeaders::discord());
        let h = all.read(&arbitrary_headers(&NAMES, fields), now());
        // A quota binds only beside a count.
        prop_assert!(h.limit().is_none() || h.remaining().is_some());
        prop_assert!(h.window().is_none() || h.limit().is_some());
    }

    #[test]
    fn read_never_panics_on_sf_like_policies(
        value in r#"("[a-z]{0,3}"|[a-z]{1,3}|[0-9]{1,20})(;(q|w|qu|pk)=(-?[0-9]{0,20}|\?[01]|"[a-z-]*"|[0-9]+\.[0-9]+))*(, ?("[a-z]{0,3}"|[a-z]{1,3})(;(q|w|qu)=(-?[0-9]{0,20}|"[a-z-]*"))*){0,20}"#,
        ratelimit in r#"("[a-z]{0,3}"|[a-z]{1,3})(;[rt]=[0-9]{1,5})*(, ?("[a-z]{0,3}"|[a-z]{1,3})(;[rt]=[0-9]{1,5})*){0,5}"#,
    ) {
        let with = policy(&value, &ratelimit);
        let without = ietf(&[("ratelimit", &ratelimit)]);
        // Policies never change whether a request limit is spent, and take
        // counts away (concurrency, other units) but never add one.
        prop_assert!(with.remaining().is_none() || with.remaining() >= without.remaining());
        prop_assert!(!with.exhausted() || without.exhausted());
    }

    #[test]
    fn policy_round_trips(q in 0u64..1_000_000_000_000_000, w in 0u64..1_000_000_000_000_000, r in 0u64..1_000) {
        let h = policy(&format!(r#""p";q={q};w={w}"#), &format!(r#""p";r={r};t=5"#));
        prop_assert_eq!(h.remaining(), Some(r));
        prop_assert_eq!(quota(&h), (Some(q), Some(secs(w))));
    }
}

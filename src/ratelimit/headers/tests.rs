//! Which vendors' scope rules a set of headers turns on.

use super::*;

#[test]
fn each_preset_turns_on_its_own_vendors_scope_rules() {
    let only = |github, discord, ietf_partitions| Scoping {
        github,
        discord,
        ietf_partitions,
        ..Scoping::default()
    };
    assert_eq!(
        RateLimitHeaders::github().scoping(),
        only(true, false, false)
    );
    assert_eq!(
        RateLimitHeaders::discord().scoping(),
        only(false, true, false)
    );
    assert_eq!(RateLimitHeaders::ietf().scoping(), only(false, false, true));
    // The default reads the IETF fields, partitions included.
    assert_eq!(
        RateLimitHeaders::default().scoping(),
        only(false, false, true)
    );
    assert_eq!(
        RateLimitHeaders::stripe().scoping(),
        Scoping {
            stripe: true,
            ..Scoping::default()
        }
    );
    for no_scopes in [
        RateLimitHeaders::none(),
        RateLimitHeaders::openai(),
        RateLimitHeaders::anthropic(),
    ] {
        assert_eq!(no_scopes.scoping(), Scoping::default());
    }
}

#[test]
fn combined_presets_keep_the_scope_rules_of_both_whatever_the_order() {
    let all = Scoping {
        github: true,
        discord: true,
        ietf_partitions: true,
        ..Scoping::default()
    };
    let a = RateLimitHeaders::github()
        .and(RateLimitHeaders::discord())
        .and(RateLimitHeaders::ietf());
    let b = RateLimitHeaders::ietf()
        .and(RateLimitHeaders::openai())
        .and(RateLimitHeaders::discord().and(RateLimitHeaders::github()));
    assert_eq!(a.scoping(), all);
    assert_eq!(b.scoping(), all);
    // A set without scope rules takes nothing away.
    assert_eq!(
        RateLimitHeaders::github()
            .and(RateLimitHeaders::none())
            .scoping(),
        RateLimitHeaders::github().scoping()
    );
}

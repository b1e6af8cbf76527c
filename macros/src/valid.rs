//! The checks of the keys against each other, in one step after every value was read
//! (like tokio's `Configuration::build`).
//!
//! The runtime's defaults stand in for the keys that were left out. Each error points at the
//! key that makes the combination impossible and says which key to change. The runtime's
//! `ConfigBuilder::build` applies the same rules; mirroring them here turns a run-time
//! fallback to the default config into a compile error (the `mirror` test below checks that
//! the two agree).

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;

use crate::args::{Args, Errors, Journal, Key, Name, Window, defaults};
use crate::duration;

/// Reports every impossible combination of keys in `args`.
pub(crate) fn check(args: &Args, errors: &mut Errors) {
    if args.key.is_none() {
        for (key, span) in [
            ("max_keys", args.max_keys.as_ref().map(|k| k.key)),
            ("idle_for", args.idle_for.as_ref().map(|k| k.key)),
        ] {
            if let Some(span) = span {
                errors.push(syn::Error::new(
                    span,
                    format!(
                        "`{key}` only matters to a keyed breaker: add `key = <expression>` \
                         (a breaker per distinct key, e.g. `key = url.host_str().unwrap_or(\"\")`), \
                         or remove `{key}`"
                    ),
                ));
            }
        }
    }
    name(args, errors);
    probe(args, errors);
    replay(args, errors);
    if let (Some(on), None) = (&args.fallback_on, &args.fallback) {
        errors.push(syn::Error::new(
            on.key,
            "`fallback_on` says when the fallback answers, but there is no fallback: add \
             `fallback = path` (or `fallback_with_reason = path`), or remove `fallback_on`",
        ));
    }
    if let (Some(_), Some(rate)) = (&args.failures, &args.failure_rate) {
        errors.push(syn::Error::new(
            rate.key,
            "`failure_rate` and `failures` choose different trip policies: keep `failures = N` \
             to trip after N consecutive failures, or `failure_rate = P` to trip when P% of \
             the window's calls fail",
        ));
    }
    if let (Some(within), Some(_)) = (&args.failures_within, &args.failure_rate) {
        errors.push(syn::Error::new(
            within.key,
            "`failures_within` only applies to the consecutive `failures` policy: remove it, \
             or give `failure_rate` a time window such as `window = \"10s\"`",
        ));
    }
    let rate_policy = args.failure_rate.is_some() || args.slow_rate.is_some();
    for (key, span) in [
        ("window", args.window.as_ref().map(|k| k.key)),
        ("min_calls", args.min_calls.as_ref().map(|k| k.key)),
    ] {
        if let Some(span) = span
            && !rate_policy
        {
            errors.push(syn::Error::new(
                span,
                format!(
                    "`{key}` only matters to a rate policy: add `failure_rate = P` (trip when \
                     P% of the window's calls fail) or `slow_rate = P`, or remove `{key}`"
                ),
            ));
        }
    }
    // The runtime shrinks the default `min_calls` to a smaller count window, but an explicit
    // `min_calls` larger than the window could never be reached.
    if let Some(min) = &args.min_calls {
        let (size, from) = match args.window.as_ref().map(|w| w.value) {
            Some(Window::Calls(size)) => (Some(size), "a window of"),
            Some(Window::Time(_)) => (None, ""),
            None => (Some(defaults::WINDOW_CALLS), "the default window of"),
        };
        if let Some(size) = size
            && min.value > size
        {
            errors.push(syn::Error::new(
                min.key,
                format!(
                    "`min_calls = {}` can never be reached by {from} {size} calls: lower \
                     `min_calls` to at most {size}, or set `window = {}` (or more)",
                    min.value, min.value
                ),
            ));
        }
    }
    if let (Some(rate), None) = (&args.slow_rate, &args.slow) {
        errors.push(syn::Error::new(
            rate.key,
            "`slow_rate` needs `slow`, the duration above which a call counts as slow: \
             add `slow = \"1s\"` (or whatever is slow for this call)",
        ));
    }
    if let Some(max) = &args.max_open_for {
        let (open_for, from) = match &args.open_for {
            Some(open_for) => (open_for.value, "`open_for`"),
            None => (defaults::OPEN_FOR_NANOS, "the default `open_for`"),
        };
        if max.value < open_for {
            errors.push(syn::Error::new(
                max.key,
                format!(
                    "`max_open_for = \"{}\"` is shorter than {from} (\"{}\"): the backoff \
                     starts at `open_for` and grows up to `max_open_for`; raise \
                     `max_open_for` to at least \"{}\"",
                    duration::display(max.value),
                    duration::display(open_for),
                    duration::display(open_for),
                ),
            ));
        }
    }
    if let Some(successes) = &args.successes {
        let (probes, from) = match &args.half_open_calls {
            Some(calls) => (calls.value, "`half_open_calls` is"),
            None => (
                defaults::HALF_OPEN_CALLS,
                "the default `half_open_calls` is",
            ),
        };
        if successes.value > probes {
            errors.push(syn::Error::new(
                successes.key,
                format!(
                    "`successes = {}` can never close the breaker: a half-open round lets \
                     through only {probes} probe call(s) ({from} {probes}); add \
                     `half_open_calls = {}` (or more), or lower `successes`",
                    successes.value, successes.value
                ),
            ));
        }
    }
}

/// `probe` and `probe_every`: a probe is called with no arguments from the registration's
/// static, so it cannot name `Self` (a static cannot) nor check one key's service.
/// The `replay_*` keys need `replay`; replay journals one breaker's calls (not a keyed
/// family's), and answers a rejected call with its `Rejected`, marked journaled (not a
/// fallback).
fn replay(args: &Args, errors: &mut Errors) {
    if args.replay.is_none() {
        for (key, span) in [
            ("replay_key", args.replay_key.as_ref().map(|k| k.key)),
            ("replay_max", args.replay_max.as_ref().map(|k| k.key)),
            ("replay_ttl", args.replay_ttl.as_ref().map(|k| k.key)),
            ("replay_rate", args.replay_rate.as_ref().map(|k| k.key)),
            (
                "replay_attempts",
                args.replay_attempts.as_ref().map(|k| k.key),
            ),
            (
                "replay_claim_after",
                args.replay_claim_after.as_ref().map(|k| k.key),
            ),
        ] {
            if let Some(span) = span {
                errors.push(syn::Error::new(
                    span,
                    format!(
                        "`{key}` only matters with `replay`: add `replay = \"memory\"`, \
                         `replay = \"disk\"` or `replay = \"fleet\"` to journal calls rejected \
                         while open, or remove `{key}`"
                    ),
                ));
            }
        }
        return;
    }
    if let (Some(claim), Some(journal)) = (&args.replay_claim_after, &args.replay)
        && journal.value != Journal::Fleet
    {
        errors.push(syn::Error::new(
            claim.key,
            "`replay_claim_after` is when the fleet's other instances take over an entry a dead \
             instance held: it only matters with `replay = \"fleet\"`; a memory or disk \
             journal is one process's, and its entries wait for it: remove \
             `replay_claim_after`, or use `replay = \"fleet\"`",
        ));
    }
    if let Some(key) = &args.key {
        errors.push(syn::Error::new(
            key.key,
            "`replay` journals the calls of one breaker, not of a keyed family: remove `key`, \
             or `replay` (a per-key journal is not supported)",
        ));
    }
    if let Some(fallback) = &args.fallback {
        errors.push(syn::Error::new(
            fallback.key,
            "with `replay`, a rejected call's arguments go to the journal and the function \
             returns its `Rejected`, whose `journaled()` says whether it was journaled (answer \
             202 from that): remove the fallback, or `replay`",
        ));
    }
}

/// `name = <expression>` is read in the registration's static, where `Self` is unknown.
fn name(args: &Args, errors: &mut Errors) {
    fn find_self(tokens: TokenStream) -> Option<proc_macro2::Ident> {
        tokens.into_iter().find_map(|token| match token {
            TokenTree::Ident(ident) if ident == "Self" => Some(ident),
            TokenTree::Group(group) => find_self(group.stream()),
            _ => None,
        })
    }
    let Some(Key {
        value: Name::Expr(expr),
        ..
    }) = &args.name
    else {
        return;
    };
    if let Some(ident) = find_self(expr.to_token_stream()) {
        errors.push(syn::Error::new(
            ident.span(),
            "`name` cannot name `Self`: the name is read in a static, where `Self` is \
             unknown; write the type's name instead (`name = MyClient::NAME`)",
        ));
    }
}

fn probe(args: &Args, errors: &mut Errors) {
    if let (Some(every), None) = (&args.probe_every, &args.probe) {
        errors.push(syn::Error::new(
            every.key,
            "`probe_every` needs `probe = path`, the health check it runs while the breaker \
             is open: add `probe = my_health_check` (a function of no arguments returning \
             `bool` or a `Result`), or remove `probe_every`",
        ));
    }
    let Some(probe) = &args.probe else { return };
    if let Some(first) = probe.value.path.segments.first()
        && probe.value.qself.is_none()
        && first.ident == "Self"
    {
        errors.push(syn::Error::new_spanned(
            &first.ident,
            "`probe` cannot name `Self`: the probe is stored in a static, where `Self` is \
             unknown; write the type's name instead (`probe = MyClient::health`)",
        ));
    }
    if args.key.is_some() {
        errors.push(syn::Error::new(
            probe.key,
            "`probe` cannot be combined with `key`: a probe takes no arguments, so it cannot \
             check one key's service; probe a keyed family's breakers from your own task \
             (`BreakerMap::get`), or remove `probe`",
        ));
    }
}

#[cfg(test)]
mod tests {
    use crate::args::{Args, Errors};
    use quote::quote;

    /// The attribute read and checked as `expand` does: the errors of both stages, in order.
    pub(super) fn checked(attr: proc_macro2::TokenStream) -> syn::Result<Args> {
        let mut errors = Errors::default();
        let args = crate::parse::parse(attr, &mut errors);
        super::check(&args, &mut errors);
        errors.finish().map(|()| args)
    }

    fn parse(attr: proc_macro2::TokenStream) -> syn::Result<Args> {
        checked(attr)
    }

    fn error(attr: proc_macro2::TokenStream) -> String {
        match checked(attr) {
            Ok(_) => panic!("expected an error"),
            Err(error) => error
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn combinations() {
        assert!(error(quote!(failures = 3, failure_rate = 50)).contains("choose different"));
        assert!(error(quote!(failure_rate = 50, failures_within = "1s")).contains("only applies"));
        assert!(
            error(quote!(failure_rate = 50, window = 10, min_calls = 11))
                .contains("never be reached")
        );
        assert!(parse(quote!(failure_rate = 50, window = 5)).is_ok());
        assert!(
            error(quote!(slow = "1s", slow_rate = 5, min_calls = 101)).contains("window = 101")
        );
        assert!(error(quote!(window = 10)).contains("only matters to a rate policy"));
        assert!(error(quote!(min_calls = 10)).contains("only matters to a rate policy"));
        assert!(error(quote!(slow_rate = 10)).contains("add `slow"));
        assert!(error(quote!(max_open_for = "10s")).contains("default `open_for`"));
        assert!(error(quote!(open_for = "2s", max_open_for = "1s")).contains("at least \"2s\""));
        assert!(error(quote!(successes = 2)).contains("half_open_calls = 2"));
        assert!(error(quote!(half_open_calls = 2, successes = 3)).contains("half_open_calls = 3"));
    }

    #[test]
    fn probe_keys() {
        assert!(parse(quote!(probe = health, probe_every = "2s")).is_ok());
        assert!(parse(quote!(probe = Client::health)).is_ok());
        assert!(error(quote!(probe_every = "2s")).contains("`probe_every` needs `probe = path`"));
        assert!(error(quote!(probe = Self::health)).contains("cannot name `Self`"));
        assert!(error(quote!(name = Self::NAME)).contains("`name` cannot name `Self`"));
        assert!(error(quote!(name = <Self as T>::NAME)).contains("`name` cannot name `Self`"));
        assert!(parse(quote!(name = Client::NAME)).is_ok());
        assert!(error(quote!(key = a, probe = health)).contains("cannot be combined with `key`"));
        assert!(error(quote!(probe = "health")).contains("without quotes"));
        assert!(error(quote!(probe = || true)).contains("not a closure"));
        assert!(error(quote!(probe = h, probe_every = 5)).contains("\"5s\""));
        assert!(error(quote!(probe = h, probe_every = "0s")).contains("is zero"));
        assert!(error(quote!(probe_evry = "1s")).contains("did you mean `probe_every`?"));
    }

    #[test]
    fn family_keys_need_a_key() {
        assert!(error(quote!(max_keys = 5)).contains("`max_keys` only matters to a keyed breaker"));
        assert!(error(quote!(idle_for = "1m")).contains("add `key = <expression>`"));
    }

    /// A bad value does not hide an impossible combination: both come in one compile.
    #[test]
    fn combinations_are_checked_beside_bad_values() {
        let message = error(quote!(failures = 0, window = 10));
        assert!(message.contains("`failures = 0`"), "{message}");
        assert!(
            message.contains("only matters to a rate policy"),
            "{message}"
        );
    }
}

/// The macro's checks against the runtime's: for random combinations of keys, the attribute
/// compiles exactly when `ConfigBuilder::build` accepts the same config. A config the macro
/// let through but the runtime refused would silently run with the default config.
#[cfg(test)]
mod mirror {
    use super::tests::checked;
    use breakerbox::{Config, ConfigBuilder, Window};
    use proc_macro2::TokenStream;
    use std::time::Duration;

    /// One key's possible values: its attribute text and its builder call.
    type Choice = (&'static str, fn(ConfigBuilder) -> ConfigBuilder);

    fn ready() -> bool {
        true
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const KEYS: &[&[Choice]] = &[
        &[
            ("failures = 0", |b| b.failures(0)),
            ("failures = 1", |b| b.failures(1)),
            ("failures = 5", |b| b.failures(5)),
        ],
        &[
            ("failure_rate = 0", |b| b.failure_rate(0)),
            ("failure_rate = 50", |b| b.failure_rate(50)),
            ("failure_rate = 100", |b| b.failure_rate(100)),
            ("failure_rate = 101", |b| b.failure_rate(101)),
        ],
        &[
            ("failures_within = \"0s\"", |b| b.failures_within(ms(0))),
            ("failures_within = \"1s\"", |b| b.failures_within(ms(1000))),
        ],
        &[
            ("window = 0", |b| b.window(Window::Calls(0))),
            ("window = 5", |b| b.window(Window::Calls(5))),
            ("window = 100", |b| b.window(Window::Calls(100))),
            ("window = 10000", |b| b.window(Window::Calls(10_000))),
            ("window = 10001", |b| b.window(Window::Calls(10_001))),
            ("window = \"9ms\"", |b| b.window(Window::Time(ms(9)))),
            ("window = \"10ms\"", |b| b.window(Window::Time(ms(10)))),
            ("window = \"30s\"", |b| b.window(Window::Time(ms(30_000)))),
        ],
        &[
            ("min_calls = 0", |b| b.min_calls(0)),
            ("min_calls = 1", |b| b.min_calls(1)),
            ("min_calls = 5", |b| b.min_calls(5)),
            ("min_calls = 100", |b| b.min_calls(100)),
            ("min_calls = 101", |b| b.min_calls(101)),
        ],
        &[
            ("slow = \"0s\"", |b| b.slow(ms(0))),
            ("slow = \"1s\"", |b| b.slow(ms(1000))),
        ],
        &[
            ("slow_rate = 0", |b| b.slow_rate(0)),
            ("slow_rate = 50", |b| b.slow_rate(50)),
            ("slow_rate = 101", |b| b.slow_rate(101)),
        ],
        &[
            ("open_for = \"0s\"", |b| b.open_for(ms(0))),
            ("open_for = \"1s\"", |b| b.open_for(ms(1000))),
            ("open_for = \"2m\"", |b| b.open_for(ms(120_000))),
        ],
        &[
            ("max_open_for = \"1s\"", |b| b.max_open_for(ms(1000))),
            ("max_open_for = \"60s\"", |b| b.max_open_for(ms(60_000))),
            ("max_open_for = \"5m\"", |b| b.max_open_for(ms(300_000))),
        ],
        &[
            ("backoff = 0.5", |b| b.backoff(0.5)),
            ("backoff = 1.0", |b| b.backoff(1.0)),
            ("backoff = 2", |b| b.backoff(2.0)),
            ("backoff = 100.0", |b| b.backoff(100.0)),
            ("backoff = 100.5", |b| b.backoff(100.5)),
        ],
        &[
            ("jitter = 0.0", |b| b.jitter(0.0)),
            ("jitter = 1.0", |b| b.jitter(1.0)),
            ("jitter = 1.5", |b| b.jitter(1.5)),
        ],
        &[
            ("half_open_calls = 0", |b| b.half_open_calls(0)),
            ("half_open_calls = 1", |b| b.half_open_calls(1)),
            ("half_open_calls = 3", |b| b.half_open_calls(3)),
            ("half_open_calls = 65535", |b| b.half_open_calls(65_535)),
            ("half_open_calls = 65536", |b| b.half_open_calls(65_536)),
        ],
        &[
            ("successes = 0", |b| b.successes(0)),
            ("successes = 1", |b| b.successes(1)),
            ("successes = 3", |b| b.successes(3)),
            ("successes = 4", |b| b.successes(4)),
        ],
        &[
            ("probe_timeout = \"0s\"", |b| b.probe_timeout(ms(0))),
            ("probe_timeout = \"5s\"", |b| b.probe_timeout(ms(5000))),
        ],
        &[
            ("probe = ready, probe_every = \"0s\"", |b| {
                b.probe(ready).probe_every(ms(0))
            }),
            ("probe = ready, probe_every = \"1s\"", |b| {
                b.probe(ready).probe_every(ms(1000))
            }),
            ("probe = ready", |b| b.probe(ready)),
        ],
        &[
            ("max_concurrent = 0", |b| b.max_concurrent(0)),
            ("max_concurrent = 1", |b| b.max_concurrent(1)),
        ],
        &[
            ("timeout = \"0s\"", |b| b.timeout(ms(0))),
            ("timeout = \"500ms\"", |b| b.timeout(ms(500))),
        ],
    ];

    #[test]
    fn macro_accepts_exactly_what_the_runtime_accepts() {
        // A fixed-seed xorshift: the same 20 000 combinations on every run.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut accepted = 0;
        for _ in 0..20_000 {
            let mut attr = Vec::new();
            let mut builder = Config::builder();
            for choices in KEYS {
                // Each key is left out two times in three.
                let pick = usize::try_from(next() % (3 * choices.len() as u64)).unwrap();
                if let Some((text, set)) = choices.get(pick) {
                    attr.push(*text);
                    builder = set(builder);
                }
            }
            let attr = attr.join(", ");
            let tokens: TokenStream = attr.parse().unwrap();
            let by_macro = checked(tokens).map(|_| ()).map_err(|e| e.to_string());
            let by_runtime = builder.build().map(|_| ()).map_err(|e| e.to_string());
            assert_eq!(
                by_macro.is_ok(),
                by_runtime.is_ok(),
                "#[circuit_breaker({attr})]: macro says {by_macro:?}, runtime says {by_runtime:?}"
            );
            accepted += usize::from(by_macro.is_ok());
        }
        assert!(
            accepted > 500,
            "too few valid combinations were tried: {accepted}"
        );
    }

    /// The attribute's keys are the runtime's config keys (the keys of a config file, an
    /// environment variable and a serialized `Config`) plus the function's own. A key added
    /// on one side only fails here.
    #[test]
    fn keys_mirror_the_runtime() {
        const FUNCTION_ONLY: &[&str] = &[
            "name",
            "key",
            "config",
            "fallback",
            "fallback_with_reason",
            "fallback_on",
            "classify",
            "probe",
            "replay",
            "replay_key",
            "replay_max",
            "replay_ttl",
            "replay_rate",
            "replay_attempts",
            "replay_claim_after",
            "crate",
        ];
        let config_keys: Vec<&str> = crate::args::KEYS
            .iter()
            .copied()
            .filter(|key| !FUNCTION_ONLY.contains(key))
            .collect();
        assert_eq!(config_keys, breakerbox::__private::CONFIG_KEYS);
        for key in FUNCTION_ONLY {
            assert!(crate::args::KEYS.contains(key), "{key}");
        }
    }
}

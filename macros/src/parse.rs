//! Parse `#[circuit_breaker(...)]` into [`Args`], the first stage of the macro.
//!
//! Every value is read with its key's check, and every error is collected and reported at
//! once: a bad value at its literal (`values`), a duplicate at the second key (`set`), an
//! unknown key with a suggestion. The keys are checked against each other afterwards, by
//! `valid` (see `expand::try_expand`, which runs the stages).

use proc_macro2::TokenStream;
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Expr, ExprPath, LitStr, Path, Token};

use crate::args::{Args, Errors, FallbackOn, Journal, KEYS, Key, Name, Window};
use crate::suggest;
use crate::values::{
    MAX_HALF_OPEN_CALLS, backoff_value, boolean, config_value, count, crate_path, duration_value,
    example, fallback_on_value, fn_path, jitter_value, name_value, percent, window_value,
};

/// One key as written: whether it was seen (for duplicates) and its value if it was valid.
struct Slot<T> {
    seen: bool,
    value: Option<Key<T>>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            seen: false,
            value: None,
        }
    }
}

/// The keys as parsed, before the cross-key checks of [`Raw::build`].
#[derive(Default)]
struct Raw {
    name: Slot<Name>,
    key: Slot<Expr>,
    config: Slot<LitStr>,
    failures: Slot<u32>,
    failures_within: Slot<u64>,
    failure_rate: Slot<u8>,
    window: Slot<Window>,
    min_calls: Slot<u32>,
    slow: Slot<u64>,
    slow_rate: Slot<u8>,
    open_for: Slot<u64>,
    max_open_for: Slot<u64>,
    backoff: Slot<f64>,
    jitter: Slot<f64>,
    half_open_calls: Slot<u32>,
    successes: Slot<u32>,
    probe_timeout: Slot<u64>,
    max_concurrent: Slot<u32>,
    probe: Slot<ExprPath>,
    probe_every: Slot<u64>,
    max_keys: Slot<u32>,
    idle_for: Slot<u64>,
    latency: Slot<bool>,
    health: Slot<bool>,
    critical: Slot<bool>,
    timeout: Slot<u64>,
    fallback: Slot<ExprPath>,
    fallback_with_reason: Slot<ExprPath>,
    fallback_on: Slot<FallbackOn>,
    classify: Slot<ExprPath>,
    replay: Slot<Journal>,
    replay_key: Slot<Expr>,
    replay_max: Slot<u32>,
    replay_ttl: Slot<u64>,
    replay_rate: Slot<u32>,
    replay_attempts: Slot<u32>,
    replay_claim_after: Slot<u64>,
    krate: Slot<Path>,
}

/// Records one key: a second occurrence is an error at the second key, whatever its value.
///
/// Every key goes through here, so the duplicate check cannot be forgotten for one of them.
fn set<T>(errors: &mut Errors, slot: &mut Slot<T>, key: &syn::Ident, value: syn::Result<Key<T>>) {
    if slot.seen {
        errors.push(syn::Error::new(
            key.span(),
            format!("duplicate key `{key}`: it is already set earlier in this attribute; remove one of them"),
        ));
        return;
    }
    slot.seen = true;
    match value {
        Ok(value) => slot.value = Some(value),
        Err(error) => errors.push(error),
    }
}

/// Reads the attribute's tokens into `Args`, reporting every bad key and value to `errors`.
///
/// The `Args` holds every valid value even when there are errors, so that `valid::check`
/// can still report the impossible combinations among them in the same compile.
pub(crate) fn parse(attr: TokenStream, errors: &mut Errors) -> Args {
    let mut raw = Raw::default();
    let parser = syn::meta::parser(|meta| {
        let key = match meta.path.get_ident() {
            Some(key) => key.clone(),
            None => {
                errors.push(syn::Error::new_spanned(
                    &meta.path,
                    format!("unknown key `{}`. {}", path_text(&meta.path), valid_keys()),
                ));
                let _ = read_value(&meta, "")?;
                return Ok(());
            }
        };
        let text = key.to_string();
        let value = read_value(&meta, &text)?;
        let key_span = key.span();
        // Each arm reads the value with the check for that key; `set` records it.
        macro_rules! key {
            ($slot:ident, $check:expr) => {{
                let value = value.and_then(|expr| {
                    let span = expr.span();
                    let check = $check;
                    check(&expr).map(|value| Key {
                        key: key_span,
                        span,
                        value,
                    })
                });
                set(errors, &mut raw.$slot, &key, value);
            }};
        }
        match text.as_str() {
            "name" => key!(name, name_value),
            "key" => key!(key, |e: &Expr| Ok::<_, syn::Error>(e.clone())),
            "config" => key!(config, config_value),
            "failures" => key!(failures, |e: &Expr| count(
                e,
                "failures",
                1,
                u32::MAX,
                "how many consecutive failures open the breaker"
            )),
            "failures_within" => key!(failures_within, |e: &Expr| duration_value(
                e,
                "failures_within"
            )),
            "failure_rate" => key!(failure_rate, |e: &Expr| percent(e, "failure_rate")),
            "window" => key!(window, window_value),
            "min_calls" => key!(min_calls, |e: &Expr| count(
                e,
                "min_calls",
                1,
                u32::MAX,
                "how many calls the window must hold before a rate can trip the breaker"
            )),
            "slow" => key!(slow, |e: &Expr| duration_value(e, "slow")),
            "slow_rate" => key!(slow_rate, |e: &Expr| percent(e, "slow_rate")),
            "open_for" => key!(open_for, |e: &Expr| duration_value(e, "open_for")),
            "max_open_for" => key!(max_open_for, |e: &Expr| duration_value(e, "max_open_for")),
            "backoff" => key!(backoff, backoff_value),
            "jitter" => key!(jitter, jitter_value),
            "half_open_calls" => key!(half_open_calls, |e: &Expr| count(
                e,
                "half_open_calls",
                1,
                MAX_HALF_OPEN_CALLS,
                "how many probe calls a half-open breaker lets through"
            )),
            "successes" => key!(successes, |e: &Expr| count(
                e,
                "successes",
                1,
                MAX_HALF_OPEN_CALLS,
                "how many successful probes close the breaker"
            )),
            "probe_timeout" => key!(probe_timeout, |e: &Expr| duration_value(e, "probe_timeout")),
            "max_concurrent" => key!(max_concurrent, |e: &Expr| count(
                e,
                "max_concurrent",
                1,
                u32::MAX,
                "how many calls may run at once"
            )),
            "probe" => key!(probe, |e: &Expr| fn_path(e, "probe")),
            "probe_every" => key!(probe_every, |e: &Expr| duration_value(e, "probe_every")),
            "max_keys" => key!(max_keys, |e: &Expr| count(
                e,
                "max_keys",
                1,
                u32::MAX,
                "about how many keys the family keeps"
            )),
            "idle_for" => key!(idle_for, |e: &Expr| duration_value(e, "idle_for")),
            "latency" => key!(latency, |e: &Expr| boolean(e, "latency")),
            "health" => key!(health, |e: &Expr| boolean(e, "health")),
            "critical" => key!(critical, |e: &Expr| boolean(e, "critical")),
            "timeout" => key!(timeout, |e: &Expr| duration_value(e, "timeout")),
            "fallback" => key!(fallback, |e: &Expr| fn_path(e, "fallback")),
            "fallback_with_reason" => key!(fallback_with_reason, |e: &Expr| fn_path(
                e,
                "fallback_with_reason"
            )),
            "fallback_on" => key!(fallback_on, fallback_on_value),
            "classify" => key!(classify, |e: &Expr| fn_path(e, "classify")),
            "replay" => key!(replay, journal_value),
            "replay_key" => key!(replay_key, |e: &Expr| Ok::<_, syn::Error>(e.clone())),
            "replay_max" => key!(replay_max, |e: &Expr| count(
                e,
                "replay_max",
                1,
                u32::MAX,
                "how many rejected calls the journal keeps"
            )),
            "replay_ttl" => key!(replay_ttl, |e: &Expr| duration_value(e, "replay_ttl")),
            "replay_rate" => key!(replay_rate, |e: &Expr| count(
                e,
                "replay_rate",
                1,
                u32::MAX,
                "how many journaled calls are replayed a second"
            )),
            "replay_attempts" => key!(replay_attempts, |e: &Expr| count(
                e,
                "replay_attempts",
                1,
                u32::MAX,
                "how many failed replays of a call make it a dead letter"
            )),
            "replay_claim_after" => key!(replay_claim_after, |e: &Expr| duration_value(
                e,
                "replay_claim_after"
            )),
            "crate" => key!(krate, crate_path),
            _ => errors.push(syn::Error::new(
                key.span(),
                format!("unknown key `{key}`{} {}", suggest(&text), valid_keys()),
            )),
        }
        Ok(())
    });
    if let Err(error) = parser.parse2(attr) {
        errors.push(error);
    }
    raw.build(errors)
}

/// Reads `= value`. The outer error is a syntax error that stops parsing; the inner one is
/// a key written without a value, reported while the other keys are still checked.
fn read_value(meta: &ParseNestedMeta, key: &str) -> syn::Result<syn::Result<Expr>> {
    if meta.input.peek(Token![=]) {
        meta.input.parse::<Token![=]>()?;
        return Ok(Ok(meta.input.parse::<Expr>()?));
    }
    let example = example(key);
    let error = if meta.input.peek(syn::token::Paren) {
        let group: proc_macro2::Group = meta.input.parse()?;
        syn::Error::new(
            group.span(),
            format!("write the value after `=`: `{example}`"),
        )
    } else {
        meta.error(format!("`{key}` needs a value: `{example}`"))
    };
    Ok(Err(error))
}

impl Raw {
    /// The valid values, with the two fallback keys made one.
    fn build(self, errors: &mut Errors) -> Args {
        // One fallback: with the reason as its last argument, or without.
        let (fallback, fallback_with_reason) =
            match (self.fallback.value, self.fallback_with_reason.value) {
                (Some(plain), Some(with_reason)) => {
                    errors.push(syn::Error::new(
                        with_reason.key,
                        "`fallback_with_reason` and `fallback` both name a fallback: keep \
                         `fallback = path` for a fallback that takes the function's arguments, \
                         or `fallback_with_reason = path` for one that also takes a \
                         `breakerbox::FallbackReason` as its last argument",
                    ));
                    (Some(plain), false)
                }
                (None, Some(with_reason)) => (Some(with_reason), true),
                (plain, None) => (plain, false),
            };
        Args {
            name: self.name.value,
            key: self.key.value,
            config: self.config.value,
            failures: self.failures.value,
            failures_within: self.failures_within.value,
            failure_rate: self.failure_rate.value,
            window: self.window.value,
            min_calls: self.min_calls.value,
            slow: self.slow.value,
            slow_rate: self.slow_rate.value,
            open_for: self.open_for.value,
            max_open_for: self.max_open_for.value,
            backoff: self.backoff.value,
            jitter: self.jitter.value,
            half_open_calls: self.half_open_calls.value,
            successes: self.successes.value,
            probe_timeout: self.probe_timeout.value,
            max_concurrent: self.max_concurrent.value,
            probe: self.probe.value,
            probe_every: self.probe_every.value,
            max_keys: self.max_keys.value,
            idle_for: self.idle_for.value,
            latency: self.latency.value,
            health: self.health.value,
            critical: self.critical.value,
            timeout: self.timeout.value,
            fallback,
            fallback_with_reason,
            fallback_on: self.fallback_on.value,
            classify: self.classify.value,
            replay: self.replay.value,
            replay_key: self.replay_key.value,
            replay_max: self.replay_max.value,
            replay_ttl: self.replay_ttl.value,
            replay_rate: self.replay_rate.value,
            replay_attempts: self.replay_attempts.value,
            replay_claim_after: self.replay_claim_after.value,
            krate: self.krate.value,
        }
    }
}

/// `replay = "memory"`, `replay = "disk"` or `replay = "fleet"`.
fn journal_value(expr: &Expr) -> syn::Result<Journal> {
    if let Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(text),
        ..
    }) = expr
    {
        let value = text.value();
        match value.as_str() {
            "memory" => return Ok(Journal::Memory),
            "disk" => return Ok(Journal::Disk),
            "fleet" => return Ok(Journal::Fleet),
            _ if value.eq_ignore_ascii_case("redis") => {
                return Err(syn::Error::new_spanned(
                    expr,
                    "a journal in Redis is the fleet's: write `replay = \"fleet\"` (the Redis of \
                     the fleet this process runs, each entry replayed by one instance; features \
                     `replay` and `redis`)",
                ));
            }
            _ => {}
        }
    }
    Err(syn::Error::new_spanned(
        expr,
        "`replay` says where rejected calls are journaled: `replay = \"memory\"` (lost with \
         the process; arguments `Clone`), `replay = \"disk\"` (a file per breaker under \
         `$BREAKERBOX_REPLAY_DIR`, kept across restarts) or `replay = \"fleet\"` (the running \
         fleet's Redis, each entry replayed by one instance; feature `redis`); arguments \
         `Serialize + DeserializeOwned` for the last two",
    ))
}

fn path_text(path: &Path) -> String {
    let mut text = String::new();
    if path.leading_colon.is_some() {
        text.push_str("::");
    }
    for (i, segment) in path.segments.iter().enumerate() {
        if i > 0 {
            text.push_str("::");
        }
        text.push_str(&segment.ident.to_string());
    }
    text
}

fn valid_keys() -> String {
    let list: Vec<String> = KEYS.iter().map(|key| format!("`{key}`")).collect();
    format!("The valid keys are: {}.", list.join(", "))
}

/// ": did you mean `failures`?" for a key close to a valid one (the runtime's files and
/// environment variables suggest with the same code, `suggest.rs`), else ".".
fn suggest(unknown: &str) -> String {
    suggest::closest(unknown, KEYS.iter().copied())
        .map_or_else(|| ".".to_owned(), |key| format!(": did you mean `{key}`?"))
}

#[cfg(test)]
mod tests {
    use crate::args::{Args, Errors, Name, Window};
    use quote::quote;

    /// The attribute's tokens read into `Args`, or every error they hold.
    fn parse(attr: proc_macro2::TokenStream) -> syn::Result<Args> {
        let mut errors = Errors::default();
        let args = super::parse(attr, &mut errors);
        errors.finish().map(|()| args)
    }

    fn error(attr: proc_macro2::TokenStream) -> String {
        match parse(attr) {
            Ok(_) => panic!("expected an error"),
            Err(error) => error
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn empty_attribute_is_all_defaults() {
        let args = parse(quote!()).unwrap();
        assert!(args.name.is_none() && args.failures.is_none() && args.fallback.is_none());
    }

    #[test]
    fn parses_every_key() {
        let args = parse(quote!(
            name = "users",
            window = "30s",
            min_calls = 5,
            slow = "1s",
            slow_rate = 50,
            open_for = "2s",
            max_open_for = "1m",
            backoff = 2,
            jitter = 0.1,
            half_open_calls = 3,
            successes = 2,
            probe_timeout = "5s",
            max_concurrent = 10,
            timeout = "500ms",
            fallback = Self::cached,
            classify = classify_http,
            crate = "my::breakerbox",
            failure_rate = 30,
        ))
        .unwrap();
        assert!(matches!(args.name.unwrap().value, Name::Literal(name) if name.value() == "users"));
        assert_eq!(args.failure_rate.unwrap().value, 30);
        assert_eq!(args.window.unwrap().value, Window::Time(30_000_000_000));
        assert_eq!(args.open_for.unwrap().value, 2_000_000_000);
        assert!((args.backoff.unwrap().value - 2.0).abs() < f64::EPSILON);
        assert_eq!(args.successes.unwrap().value, 2);
        assert_eq!(args.krate.unwrap().value.segments.len(), 2);
    }

    #[test]
    fn count_window() {
        let args = parse(quote!(failure_rate = 50, window = 20, min_calls = 20)).unwrap();
        assert_eq!(args.window.unwrap().value, Window::Calls(20));
    }

    #[test]
    fn reports_every_error_at_once() {
        let message = error(quote!(failures = 0, failure_rate = 101, bogus = 1));
        assert!(message.contains("`failures = 0`"), "{message}");
        assert!(message.contains("`failure_rate = 101`"), "{message}");
        assert!(message.contains("unknown key `bogus`"), "{message}");
    }

    #[test]
    fn duplicate_is_reported_even_after_a_bad_value() {
        let message = error(quote!(failures = 0, failures = 3));
        assert!(message.contains("duplicate key `failures`"), "{message}");
    }

    #[test]
    fn unknown_key_suggests_and_lists() {
        let message = error(quote!(failure = 3));
        assert!(
            message.contains("unknown key `failure`: did you mean `failures`?"),
            "{message}"
        );
        assert!(message.contains("`crate`"), "{message}");
    }

    #[test]
    fn value_types() {
        assert!(error(quote!(failures = "5")).contains("without quotes"));
        assert!(error(quote!(failures = 2.5)).contains("whole number"));
        assert!(error(quote!(failures = -1)).contains("negative"));
        assert!(error(quote!(open_for = 30)).contains("\"30s\""));
        assert!(error(quote!(failure_rate = 0.5)).contains("`failure_rate = 50`"));
        assert!(error(quote!(jitter = 10)).contains("0.1"));
        assert!(error(quote!(backoff = 0.5)).contains("1.0"));
        assert!(error(quote!(fallback = "cached")).contains("without quotes"));
        assert!(error(quote!(fallback = || 1)).contains("not a closure"));
        assert!(error(quote!(name = "")).contains("empty"));
        assert!(error(quote!(failures)).contains("needs a value"));
        assert!(error(quote!(failures(5))).contains("`failures = 5`"));
        assert!(error(quote!(window = 0)).contains("between 1 and 10000"));
        assert!(error(quote!(window = "5ms")).contains("at least \"10ms\""));
        assert!(error(quote!(failures = 99999999999)).contains("at most 4294967295"));
        assert!(
            error(quote!(failures = 99999999999999999999999))
                .contains("must be at most 4294967295")
        );
        assert!(error(quote!(failure_rate = 99999999999999999999999)).contains("at most 100"));
        assert!(error(quote!(window = 99999999999999999999999)).contains("at most 10000"));
        assert!(error(quote!(jitter = -0.1)).contains("from 0.0 to 1.0, like `jitter = 0.1`"));
        assert!(error(quote!(jitter = high)).contains("like `jitter = 0.1`"));
        assert!(!error(quote!(probe = client.health)).contains("Self"));
    }

    #[test]
    fn name_from_a_constant() {
        assert!(parse(quote!(name = names::USERS)).is_ok());
        assert!(parse(quote!(name = concat!("a", "b"))).is_ok());
        assert!(error(quote!(name = 5)).contains("expected a string for `name`"));
    }

    #[test]
    fn key_and_family_keys() {
        let args = parse(quote!(
            key = url.host_str().unwrap_or(""),
            max_keys = 500,
            idle_for = "2m"
        ))
        .unwrap();
        assert!(args.key.is_some());
        assert_eq!(args.max_keys.unwrap().value, 500);
        assert_eq!(args.idle_for.unwrap().value, 120_000_000_000);
        assert!(error(quote!(key = a, max_keys = 0)).contains("at least 1"));
        assert!(error(quote!(key = a, key = b)).contains("duplicate key `key`"));
        assert!(error(quote!(key)).contains("`key` needs a value"));
        assert!(error(quote!(max_key = 5)).contains("did you mean `max_keys`?"));
    }

    #[test]
    fn crate_path_quoted_or_not() {
        assert!(parse(quote!(crate = ::my::bb)).is_ok());
        assert!(parse(quote!(crate = "::my::bb")).is_ok());
        assert!(error(quote!(crate = "not a path")).contains("expected the path"));
    }
}

//! Parse and validate `#[circuit_breaker(...)]` into [`Args`], a typed config that keeps
//! the span of every key and value.
//!
//! Every value is read, then checked, and every error is collected and reported at once:
//! a bad value at its literal, a duplicate at the second key, an impossible combination at
//! the key that makes it impossible (checked in one [`Raw::build`] step, like tokio's
//! `Configuration::build`). The runtime's `ConfigBuilder::build` applies the same rules;
//! mirroring them here turns a run-time fallback to the default config into a compile error.

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::spanned::Spanned;
use syn::{Expr, ExprPath, Lit, LitStr, Path, Token};

use crate::duration;

/// Every key the attribute accepts, in the order the docs list them.
pub(crate) const KEYS: &[&str] = &[
    "name",
    "failures",
    "failures_within",
    "failure_rate",
    "window",
    "min_calls",
    "slow",
    "slow_rate",
    "open_for",
    "max_open_for",
    "backoff",
    "jitter",
    "half_open_calls",
    "successes",
    "probe_timeout",
    "max_concurrent",
    "timeout",
    "fallback",
    "classify",
    "crate",
];

/// The runtime's defaults, for checks that involve a key the user left out.
pub(crate) mod defaults {
    pub(crate) const OPEN_FOR_NANOS: u64 = 60 * 1_000_000_000;
    pub(crate) const HALF_OPEN_CALLS: u32 = 1;
    pub(crate) const WINDOW_CALLS: u32 = 100;
}

/// Largest count window the runtime accepts.
const MAX_WINDOW_CALLS: u64 = 10_000;
/// Shortest time window the runtime accepts: it is split into 10 buckets.
const MIN_WINDOW_NANOS: u64 = 10_000_000;
/// Largest `half_open_calls`: the runtime counts probes in 16 bits.
const MAX_HALF_OPEN_CALLS: u64 = 65_535;

/// A value together with the spans of its key and of the value itself.
pub(crate) struct Key<T> {
    /// The key, e.g. `failures` in `failures = 5`: where combination errors point.
    pub(crate) key: Span,
    /// The value, e.g. `5`: where value errors point.
    pub(crate) span: Span,
    pub(crate) value: T,
}

/// The sliding window of the rate policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Window {
    /// The last N calls.
    Calls(u32),
    /// The calls of the last N nanoseconds.
    Time(u64),
}

/// The validated attribute.
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) name: Option<Key<Name>>,
    pub(crate) failures: Option<Key<u32>>,
    pub(crate) failures_within: Option<Key<u64>>,
    pub(crate) failure_rate: Option<Key<u8>>,
    pub(crate) window: Option<Key<Window>>,
    pub(crate) min_calls: Option<Key<u32>>,
    pub(crate) slow: Option<Key<u64>>,
    pub(crate) slow_rate: Option<Key<u8>>,
    pub(crate) open_for: Option<Key<u64>>,
    pub(crate) max_open_for: Option<Key<u64>>,
    pub(crate) backoff: Option<Key<f64>>,
    pub(crate) jitter: Option<Key<f64>>,
    pub(crate) half_open_calls: Option<Key<u32>>,
    pub(crate) successes: Option<Key<u32>>,
    pub(crate) probe_timeout: Option<Key<u64>>,
    pub(crate) max_concurrent: Option<Key<u32>>,
    pub(crate) timeout: Option<Key<u64>>,
    pub(crate) fallback: Option<Key<ExprPath>>,
    pub(crate) classify: Option<Key<ExprPath>>,
    pub(crate) krate: Option<Key<Path>>,
}

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
    timeout: Slot<u64>,
    fallback: Slot<ExprPath>,
    classify: Slot<ExprPath>,
    krate: Slot<Path>,
}

/// Collects errors so that all of them are reported at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
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

/// Parses and validates the attribute's tokens.
pub(crate) fn parse(attr: TokenStream) -> syn::Result<Args> {
    let mut raw = Raw::default();
    let mut errors = Errors::default();
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
                set(&mut errors, &mut raw.$slot, &key, value);
            }};
        }
        match text.as_str() {
            "name" => key!(name, name_value),
            "failures" => key!(failures, |e: &Expr| count(
                e,
                "failures",
                1,
                u64::from(u32::MAX),
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
                u64::from(u32::MAX),
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
                u64::from(u32::MAX),
                "how many calls may run at once"
            )),
            "timeout" => key!(timeout, |e: &Expr| duration_value(e, "timeout")),
            "fallback" => key!(fallback, |e: &Expr| fn_path(e, "fallback")),
            "classify" => key!(classify, |e: &Expr| fn_path(e, "classify")),
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
    let args = raw.build(&mut errors);
    errors.finish()?;
    Ok(args)
}

/// Reads `= value`. The outer error is a syntax error that stops parsing; the inner one is
/// a key written without a value, reported while the other keys are still checked.
fn read_value(meta: &ParseNestedMeta, key: &str) -> syn::Result<syn::Result<Expr>> {
    if meta.input.peek(Token![=]) {
        meta.input.parse::<Token![=]>()?;
        return Ok(Ok(meta.input.parse::<Expr>()?));
    }
    let example = match key {
        "name" => "name = \"users\"",
        "failures" => "failures = 5",
        "failures_within" => "failures_within = \"10s\"",
        "failure_rate" => "failure_rate = 50",
        "window" => "window = 100",
        "min_calls" => "min_calls = 10",
        "slow" => "slow = \"1s\"",
        "slow_rate" => "slow_rate = 50",
        "open_for" => "open_for = \"30s\"",
        "max_open_for" => "max_open_for = \"5m\"",
        "backoff" => "backoff = 2.0",
        "jitter" => "jitter = 0.1",
        "half_open_calls" => "half_open_calls = 3",
        "successes" => "successes = 2",
        "probe_timeout" => "probe_timeout = \"10s\"",
        "max_concurrent" => "max_concurrent = 100",
        "timeout" => "timeout = \"500ms\"",
        "fallback" => "fallback = my_fallback",
        "classify" => "classify = my_classify",
        "crate" => "crate = \"my_crate::breakerbox\"",
        _ => "key = value",
    };
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
    /// Checks the keys against each other, with the runtime's defaults standing in for the
    /// keys that were left out. Each error points at the key that makes the combination
    /// impossible and says which key to change.
    fn build(self, errors: &mut Errors) -> Args {
        let args = Args {
            name: self.name.value,
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
            timeout: self.timeout.value,
            fallback: self.fallback.value,
            classify: self.classify.value,
            krate: self.krate.value,
        };

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
        args
    }
}

/// The value with any invisible group (from a `macro_rules!` fragment) removed.
fn peel(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(group) => peel(&group.expr),
        Expr::Paren(paren) => peel(&paren.expr),
        expr => expr,
    }
}

/// The literal the value is, if it is one.
fn literal(expr: &Expr) -> Option<&Lit> {
    match peel(expr) {
        Expr::Lit(lit) => Some(&lit.lit),
        _ => None,
    }
}

/// `-literal`: a negative number.
fn is_negative(expr: &Expr) -> bool {
    matches!(peel(expr), Expr::Unary(unary) if matches!(unary.op, syn::UnOp::Neg(_)))
}

/// A whole number in `min..=max`.
fn count(expr: &Expr, key: &str, min: u64, max: u64, what: &str) -> syn::Result<u32> {
    let n = integer(expr, key, min)?;
    let bound = if n < min {
        format!("at least {min}")
    } else if n > max {
        format!("at most {max}")
    } else {
        return u32::try_from(n)
            .map_err(|_| syn::Error::new_spanned(expr, format!("`{key}` is too large")));
    };
    Err(syn::Error::new_spanned(
        expr,
        format!("`{key} = {n}` is out of range: `{key}` is {what}, and must be {bound}"),
    ))
}

/// A whole-number literal, with messages for the near misses.
fn integer(expr: &Expr, key: &str, example: u64) -> syn::Result<u64> {
    match literal(expr) {
        Some(Lit::Int(int)) => int.base10_parse::<u64>().map_err(|_| {
            syn::Error::new(
                int.span(),
                format!("`{key}` is too large: write a number that fits in a `u32`"),
            )
        }),
        Some(Lit::Str(text)) if text.value().parse::<u64>().is_ok() => Err(syn::Error::new(
            text.span(),
            format!(
                "`{key}` is a number: write it without quotes, `{key} = {}`",
                text.value()
            ),
        )),
        Some(Lit::Float(_)) => Err(syn::Error::new_spanned(
            expr,
            format!(
                "`{key}` counts calls: write a whole number, like `{key} = {}`",
                example.max(1)
            ),
        )),
        _ if is_negative(expr) => Err(syn::Error::new_spanned(
            expr,
            format!("`{key}` cannot be negative: write a whole number of at least {example}"),
        )),
        _ => Err(syn::Error::new_spanned(
            expr,
            format!(
                "expected a whole number for `{key}`, like `{key} = {}`",
                example.max(1)
            ),
        )),
    }
}

/// A percentage, 1 to 100.
fn percent(expr: &Expr, key: &str) -> syn::Result<u8> {
    if let Some(Lit::Float(float)) = literal(expr)
        && let Ok(fraction) = float.base10_parse::<f64>()
        && fraction > 0.0
        && fraction <= 1.0
    {
        let whole = (fraction * 100.0).round();
        return Err(syn::Error::new(
            float.span(),
            format!(
                "`{key}` is a percentage from 1 to 100, not a fraction: for {whole}% write `{key} = {whole}`"
            ),
        ));
    }
    let n = integer(expr, key, 1)?;
    if !(1..=100).contains(&n) {
        let fix = if n == 0 {
            "a rate of 0% would open the breaker on every call; use at least 1"
        } else {
            "use at most 100"
        };
        return Err(syn::Error::new_spanned(
            expr,
            format!("`{key} = {n}` is out of range: `{key}` is a percentage from 1 to 100; {fix}"),
        ));
    }
    u8::try_from(n).map_err(|_| syn::Error::new_spanned(expr, "unreachable: checked above"))
}

/// A duration string, parsed at expansion time into nanoseconds.
fn duration_value(expr: &Expr, key: &str) -> syn::Result<u64> {
    match literal(expr) {
        Some(Lit::Str(text)) => {
            duration::parse(&text.value()).map_err(|why| syn::Error::new(text.span(), why))
        }
        Some(Lit::Int(int)) => Err(syn::Error::new(
            int.span(),
            format!(
                "`{key}` is a duration: write it as a string with a unit, like `{key} = \"{}s\"` or `{key} = \"{}ms\"`",
                int.base10_digits(),
                int.base10_digits()
            ),
        )),
        _ if is_negative(expr) => Err(syn::Error::new_spanned(
            expr,
            format!(
                "`{key}` is a length of time and cannot be negative: write it like `{key} = \"2s\"`"
            ),
        )),
        _ => Err(syn::Error::new_spanned(
            expr,
            format!(
                "expected a duration string for `{key}`, like `{key} = \"2s\"` or `{key} = \"250ms\"`"
            ),
        )),
    }
}

/// `window = 100` (the last 100 calls) or `window = "30s"` (the calls of the last 30s).
fn window_value(expr: &Expr) -> syn::Result<Window> {
    match literal(expr) {
        Some(Lit::Str(text)) => {
            let nanos =
                duration::parse(&text.value()).map_err(|why| syn::Error::new(text.span(), why))?;
            if nanos < MIN_WINDOW_NANOS {
                return Err(syn::Error::new(
                    text.span(),
                    format!(
                        "a time window of \"{}\" is too short: it is split into 10 buckets, so it must be at least \"10ms\"",
                        text.value()
                    ),
                ));
            }
            Ok(Window::Time(nanos))
        }
        _ => {
            let n = integer(expr, "window", 1).map_err(|_| {
                syn::Error::new_spanned(
                    expr,
                    "expected a window: a number of calls, like `window = 100`, or a duration \
                     string, like `window = \"30s\"`",
                )
            })?;
            if !(1..=MAX_WINDOW_CALLS).contains(&n) {
                return Err(syn::Error::new_spanned(
                    expr,
                    format!(
                        "`window = {n}` is out of range: a count window holds between 1 and \
                         {MAX_WINDOW_CALLS} calls; for more, use a time window like `window = \"60s\"`"
                    ),
                ));
            }
            Ok(Window::Calls(u32::try_from(n).unwrap_or(u32::MAX)))
        }
    }
}

/// A float literal, or an integer literal when `ints` allows it.
fn float(expr: &Expr, key: &str, ints: bool) -> syn::Result<f64> {
    let parsed = match literal(expr) {
        Some(Lit::Float(float)) => float.base10_parse::<f64>(),
        Some(Lit::Int(int)) if ints => int.base10_parse::<f64>(),
        Some(Lit::Int(int)) => {
            return Err(syn::Error::new(
                int.span(),
                format!(
                    "`{key}` is a fraction between 0.0 and 1.0: for {}% write `{key} = {}`",
                    int.base10_digits(),
                    int.base10_parse::<f64>().map_or(0.1, |n| n / 100.0)
                ),
            ));
        }
        _ if is_negative(expr) => {
            return Err(syn::Error::new_spanned(
                expr,
                format!("`{key}` cannot be negative"),
            ));
        }
        _ => {
            return Err(syn::Error::new_spanned(
                expr,
                format!("expected a number for `{key}`, like `{key} = 2.0`"),
            ));
        }
    };
    parsed.map_err(|error| syn::Error::new_spanned(expr, error))
}

/// The backoff multiplier: finite, 1.0 to 100.0.
fn backoff_value(expr: &Expr) -> syn::Result<f64> {
    let value = float(expr, "backoff", true)?;
    if !value.is_finite() || !(1.0..=100.0).contains(&value) {
        return Err(syn::Error::new_spanned(
            expr,
            "`backoff` multiplies the open time after each failed probe: use a number from 1.0 \
             (no backoff) to 100.0, like `backoff = 2.0`",
        ));
    }
    Ok(value)
}

/// The jitter fraction: 0.0 to 1.0.
fn jitter_value(expr: &Expr) -> syn::Result<f64> {
    let value = float(expr, "jitter", false)?;
    if !(0.0..=1.0).contains(&value) {
        return Err(syn::Error::new_spanned(
            expr,
            "`jitter` is the fraction of the open time to randomize: use a number from 0.0 to \
             1.0, like `jitter = 0.1` for ±10%",
        ));
    }
    Ok(value)
}

/// The breaker's name: a string literal, or a `&str` constant shared by several functions.
pub(crate) enum Name {
    /// `name = "users"`, checked to be non-empty.
    Literal(LitStr),
    /// `name = names::USERS` or `name = concat!(…)`: any `&'static str` expression that can
    /// be evaluated in a static's initializer; the compiler checks its type.
    Expr(Expr),
}

/// `name = "users"` (non-empty), or a path or macro call that gives a `&str`.
fn name_value(expr: &Expr) -> syn::Result<Name> {
    match peel(expr) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(text),
            ..
        }) => {
            if text.value().trim().is_empty() {
                Err(syn::Error::new(
                    text.span(),
                    "the breaker name is empty: give it a name that says what it protects, like \
                     `name = \"users\"`, or remove `name` to use the function's path",
                ))
            } else {
                Ok(Name::Literal(text.clone()))
            }
        }
        expr @ (Expr::Path(_) | Expr::Macro(_)) => Ok(Name::Expr(expr.clone())),
        _ => Err(syn::Error::new_spanned(
            expr,
            "expected a string for `name`, like `name = \"users\"`, or the path of a `&str` \
             constant, like `name = names::USERS`",
        )),
    }
}

/// `fallback = path` / `classify = path`: the path to a function, unquoted.
fn fn_path(expr: &Expr, key: &str) -> syn::Result<ExprPath> {
    match peel(expr) {
        Expr::Path(path) => Ok(path.clone()),
        Expr::Lit(lit) => match &lit.lit {
            Lit::Str(text) => Err(syn::Error::new(
                text.span(),
                format!(
                    "`{key}` takes the path of a function, without quotes: `{key} = {}`",
                    text.value()
                ),
            )),
            _ => Err(syn::Error::new_spanned(
                lit,
                format!("`{key}` takes the path of a function, like `{key} = my_{key}`"),
            )),
        },
        Expr::Closure(closure) => Err(syn::Error::new_spanned(
            closure,
            format!(
                "`{key}` takes the path of a function, not a closure: move the closure into a `fn` and write `{key} = that_fn`"
            ),
        )),
        other => Err(syn::Error::new_spanned(
            other,
            format!(
                "`{key}` takes the path of a function, like `{key} = my_{key}` or `{key} = Self::my_{key}`"
            ),
        )),
    }
}

/// `crate = "path"` (or the path unquoted, as tokio accepts).
fn crate_path(expr: &Expr) -> syn::Result<Path> {
    match peel(expr) {
        Expr::Path(path) if path.qself.is_none() => Ok(path.path.clone()),
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(text),
            ..
        }) => text.parse::<Path>().map_err(|_| {
            syn::Error::new(
                text.span(),
                "expected the path where breakerbox is, like `crate = \"my_crate::breakerbox\"`",
            )
        }),
        other => Err(syn::Error::new_spanned(
            other,
            "expected the path where breakerbox is, like `crate = \"my_crate::breakerbox\"`",
        )),
    }
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

/// ": did you mean `failures`?" for a key one or two edits away from a valid one, else ".".
fn suggest(unknown: &str) -> String {
    let aliases: &[(&str, &str)] = &[
        ("threshold", "failures"),
        ("failure_threshold", "failures"),
        ("max_failures", "failures"),
        ("reset_timeout", "open_for"),
        ("open_duration", "open_for"),
        ("wait_duration_in_open_state", "open_for"),
        ("cooldown", "open_for"),
        ("recovery_timeout", "open_for"),
        ("fallback_fn", "fallback"),
        ("on_open", "fallback"),
        ("sliding_window", "window"),
        ("minimum_calls", "min_calls"),
        ("permitted_calls_in_half_open_state", "half_open_calls"),
    ];
    if let Some((_, key)) = aliases.iter().find(|(alias, _)| *alias == unknown) {
        return format!(": did you mean `{key}`?");
    }
    KEYS.iter()
        .map(|key| (edit_distance(unknown, key), key))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map_or_else(
            || ".".to_owned(),
            |(_, key)| format!(": did you mean `{key}`?"),
        )
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::{Window, parse};
    use quote::quote;

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
        assert!(
            matches!(args.name.unwrap().value, super::Name::Literal(name) if name.value() == "users")
        );
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
        assert!(error(quote!(failures = 99999999999999999999999)).contains("too large"));
    }

    #[test]
    fn name_from_a_constant() {
        assert!(parse(quote!(name = names::USERS)).is_ok());
        assert!(parse(quote!(name = concat!("a", "b"))).is_ok());
        assert!(error(quote!(name = 5)).contains("expected a string for `name`"));
    }

    #[test]
    fn crate_path_quoted_or_not() {
        assert!(parse(quote!(crate = ::my::bb)).is_ok());
        assert!(parse(quote!(crate = "::my::bb")).is_ok());
        assert!(error(quote!(crate = "not a path")).contains("expected the path"));
    }
}

/// The macro's checks against the runtime's: for random combinations of keys, the attribute
/// compiles exactly when `ConfigBuilder::build` accepts the same config. A config the macro
/// let through but the runtime refused would silently run with the default config.
#[cfg(test)]
mod mirror {
    use super::parse;
    use breakerbox::{Config, ConfigBuilder, Window};
    use proc_macro2::TokenStream;
    use std::time::Duration;

    /// One key's possible values: its attribute text and its builder call.
    type Choice = (&'static str, fn(ConfigBuilder) -> ConfigBuilder);

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
            ("max_concurrent = 0", |b| b.max_concurrent(0)),
            ("max_concurrent = 1", |b| b.max_concurrent(1)),
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
            let by_macro = parse(tokens).map(|_| ()).map_err(|e| e.to_string());
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
}

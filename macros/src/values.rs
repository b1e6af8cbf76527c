//! Reading one key's value: each function takes the value as written and returns it typed,
//! or an error at the value that says how to write it instead.

use syn::{Expr, ExprPath, Lit, Path};

use crate::args::{FallbackOn, Name, Window};
use crate::duration;

/// Largest count window the runtime accepts.
const MAX_WINDOW_CALLS: u64 = 10_000;
/// Shortest time window the runtime accepts: it is split into 10 buckets.
const MIN_WINDOW_NANOS: u64 = 10_000_000;
/// Largest `half_open_calls`: the runtime counts probes in 16 bits.
pub(crate) const MAX_HALF_OPEN_CALLS: u32 = 65_535;

/// A typical `key = value` for `key`, for messages that show how to write a value.
pub(crate) fn example(key: &str) -> &'static str {
    match key {
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
        "probe" => "probe = my_health_check",
        "probe_every" => "probe_every = \"5s\"",
        "key" => "key = url.host_str().unwrap_or(\"\")",
        "config" => "config = \"fast\"",
        "fallback_on" => "fallback_on = \"error\"",
        "max_keys" => "max_keys = 10000",
        "idle_for" => "idle_for = \"10m\"",
        "latency" => "latency = true",
        "health" => "health = false",
        "critical" => "critical = true",
        "timeout" => "timeout = \"500ms\"",
        "fallback" => "fallback = my_fallback",
        "fallback_with_reason" => "fallback_with_reason = my_fallback",
        "classify" => "classify = my_classify",
        "replay" => "replay = \"memory\"",
        "replay_key" => "replay_key = order.id.to_string()",
        "replay_max" => "replay_max = 10000",
        "replay_ttl" => "replay_ttl = \"1h\"",
        "replay_rate" => "replay_rate = 10",
        "replay_attempts" => "replay_attempts = 5",
        "replay_claim_after" => "replay_claim_after = \"30s\"",
        "crate" => "crate = \"my_crate::breakerbox\"",
        _ => "key = value",
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
pub(crate) fn count(expr: &Expr, key: &str, min: u32, max: u32, what: &str) -> syn::Result<u32> {
    let n = integer(expr, key, min.into(), max.into())?;
    match u32::try_from(n) {
        Ok(value) if (min..=max).contains(&value) => Ok(value),
        _ => {
            let bound = if n < u64::from(min) {
                format!("at least {min}")
            } else {
                format!("at most {max}")
            };
            Err(syn::Error::new_spanned(
                expr,
                format!("`{key} = {n}` is out of range: `{key}` is {what}, and must be {bound}"),
            ))
        }
    }
}

/// A whole-number literal, with messages for the near misses. `min` and `max` are the key's
/// bounds, for the messages of a negative number and of one too large for a `u64`.
fn integer(expr: &Expr, key: &str, min: u64, max: u64) -> syn::Result<u64> {
    match literal(expr) {
        Some(Lit::Int(int)) => int.base10_parse::<u64>().map_err(|_| {
            syn::Error::new(
                int.span(),
                format!(
                    "`{key} = {}` is out of range: `{key}` must be at most {max}",
                    int.base10_digits()
                ),
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
            format!("`{key}` is a whole number, like `{}`", example(key)),
        )),
        _ if is_negative(expr) => Err(syn::Error::new_spanned(
            expr,
            format!(
                "`{key}` cannot be negative: write a whole number of at least {min}, like `{}`",
                example(key)
            ),
        )),
        _ => Err(syn::Error::new_spanned(
            expr,
            format!(
                "expected a whole number for `{key}`, like `{}`",
                example(key)
            ),
        )),
    }
}

/// A percentage, 1 to 100.
pub(crate) fn percent(expr: &Expr, key: &str) -> syn::Result<u8> {
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
    let n = integer(expr, key, 1, 100)?;
    match u8::try_from(n) {
        Ok(percent) if (1..=100).contains(&percent) => Ok(percent),
        _ => {
            let fix = if n == 0 {
                "a rate of 0% would open the breaker on every call; use at least 1"
            } else {
                "use at most 100"
            };
            Err(syn::Error::new_spanned(
                expr,
                format!(
                    "`{key} = {n}` is out of range: `{key}` is a percentage from 1 to 100; {fix}"
                ),
            ))
        }
    }
}

/// `true` or `false`.
pub(crate) fn boolean(expr: &Expr, key: &str) -> syn::Result<bool> {
    match literal(expr) {
        Some(Lit::Bool(b)) => Ok(b.value),
        Some(Lit::Str(text)) if matches!(text.value().as_str(), "true" | "false") => {
            Err(syn::Error::new(
                text.span(),
                format!(
                    "`{key}` is `true` or `false`, unquoted: write `{key} = {}`",
                    text.value()
                ),
            ))
        }
        _ => Err(syn::Error::new_spanned(
            expr,
            format!(
                "`{key}` must be `true` or `false`, as in `{}`",
                example(key)
            ),
        )),
    }
}

/// A duration string, parsed at expansion time into nanoseconds.
pub(crate) fn duration_value(expr: &Expr, key: &str) -> syn::Result<u64> {
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

/// `config = "fast"`: the name of a `[configs.<name>]` table, written as TOML writes a bare
/// key (ASCII letters, digits, `_` and `-`), so that the table needs no quotes.
pub(crate) fn config_value(expr: &Expr) -> syn::Result<syn::LitStr> {
    const WHAT: &str = "`config` names a `[configs.<name>]` table of the config file, which lies \
                        under this attribute's keys";
    let Some(Lit::Str(text)) = literal(expr) else {
        return Err(syn::Error::new_spanned(
            expr,
            format!("{WHAT}: write its name as a string, like `config = \"fast\"`"),
        ));
    };
    let name = text.value();
    if name.is_empty() {
        return Err(syn::Error::new(
            text.span(),
            "`config = \"\"` names no table: write the name of a `[configs.<name>]` table of \
             the config file, like `config = \"fast\"`",
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(syn::Error::new(
            text.span(),
            format!(
                "`config = {name:?}` cannot name a `[configs.<name>]` table: {bad:?} is not one \
                 of the ASCII letters, digits, `_` and `-` a table's name is written with; \
                 like `config = \"fast\"` or `config = \"slow-backends\"`"
            ),
        ));
    }
    Ok(text.clone())
}

/// `fallback_on = "rejected"` (the default) or `"error"`.
pub(crate) fn fallback_on_value(expr: &Expr) -> syn::Result<FallbackOn> {
    const ALLOWED: &str = "`\"rejected\"` (the default: calls the breaker rejects, and calls \
                           past `timeout`) or `\"error\"` (those, and calls that ran and \
                           failed)";
    match literal(expr) {
        Some(Lit::Str(text)) => match text.value().as_str() {
            "rejected" => Ok(FallbackOn::Rejected),
            "error" => Ok(FallbackOn::Error),
            other => Err(syn::Error::new(
                text.span(),
                format!("`fallback_on = {other:?}` is not a choice: write {ALLOWED}"),
            )),
        },
        _ => Err(syn::Error::new_spanned(
            expr,
            format!("`fallback_on` is a string: write {ALLOWED}, like `fallback_on = \"error\"`"),
        )),
    }
}

/// `window = 100` (the last 100 calls) or `window = "30s"` (the calls of the last 30s).
pub(crate) fn window_value(expr: &Expr) -> syn::Result<Window> {
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
        Some(Lit::Int(_)) => {
            let n = integer(expr, "window", 1, MAX_WINDOW_CALLS)?;
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
        _ => Err(syn::Error::new_spanned(
            expr,
            "expected a window: a number of calls, like `window = 100`, or a duration string, \
             like `window = \"30s\"`",
        )),
    }
}

/// A float literal, or an integer literal when `ints` allows it. `range` says which numbers
/// the key takes, for the messages of a negative number and of anything else.
fn float(expr: &Expr, key: &str, ints: bool, range: &str) -> syn::Result<f64> {
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
                format!(
                    "`{key}` cannot be negative: use {range}, like `{}`",
                    example(key)
                ),
            ));
        }
        _ => {
            return Err(syn::Error::new_spanned(
                expr,
                format!(
                    "expected a number for `{key}`: use {range}, like `{}`",
                    example(key)
                ),
            ));
        }
    };
    parsed.map_err(|error| syn::Error::new_spanned(expr, error))
}

/// The backoff multiplier: finite, 1.0 to 100.0.
pub(crate) fn backoff_value(expr: &Expr) -> syn::Result<f64> {
    const RANGE: &str = "a number from 1.0 (no backoff) to 100.0";
    let value = float(expr, "backoff", true, RANGE)?;
    if !value.is_finite() || !(1.0..=100.0).contains(&value) {
        return Err(syn::Error::new_spanned(
            expr,
            format!(
                "`backoff` multiplies the open time after each failed probe: use {RANGE}, like \
                 `backoff = 2.0`"
            ),
        ));
    }
    Ok(value)
}

/// The jitter fraction: 0.0 to 1.0.
pub(crate) fn jitter_value(expr: &Expr) -> syn::Result<f64> {
    const RANGE: &str = "a number from 0.0 to 1.0";
    let value = float(expr, "jitter", false, RANGE)?;
    if !(0.0..=1.0).contains(&value) {
        return Err(syn::Error::new_spanned(
            expr,
            format!(
                "`jitter` is the fraction of the open time to randomize: use {RANGE}, like \
                 `jitter = 0.1` for ±10%"
            ),
        ));
    }
    Ok(value)
}

/// `name = "users"` (non-empty), or a path or macro call that gives a `&str`.
pub(crate) fn name_value(expr: &Expr) -> syn::Result<Name> {
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
pub(crate) fn fn_path(expr: &Expr, key: &str) -> syn::Result<ExprPath> {
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
        other => {
            // A probe is called from a static, where `Self` is unknown.
            let method = if key == "probe" {
                String::new()
            } else {
                format!(" or `{key} = Self::my_{key}`")
            };
            Err(syn::Error::new_spanned(
                other,
                format!("`{key}` takes the path of a function, like `{key} = my_{key}`{method}"),
            ))
        }
    }
}

/// `crate = "path"` (or the path unquoted, as tokio accepts).
pub(crate) fn crate_path(expr: &Expr) -> syn::Result<Path> {
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

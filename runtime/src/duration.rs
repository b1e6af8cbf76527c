//! Duration text, such as `"250ms"`, `"2s"` or `"1.5m"`: the one parser and the one printer
//! of the attribute, config files, environment variables and serde.
//!
//! This file is compiled into two crates. It lives in `breakerbox-runtime` as
//! `runtime/src/duration.rs`, and `macros/src/duration.rs` is a symlink to it, so the
//! attribute accepts exactly the strings the runtime accepts, with the same messages (`cargo
//! package` copies the file behind a symlink). Keep it free of dependencies and of `crate::`
//! paths.
//!
//! The dialect: digits (with `_` separators and at most one `.`), then one unit of `ns`, `us`
//! (or `µs`), `ms`, `s`, `m`, `h`, with nothing in between. The value must be a whole number of
//! nanoseconds. A config's durations are longer than zero and at most `u64::MAX` nanoseconds
//! (about 584 years), the breaker's clock range.

// Each crate uses part of this file.
#![allow(dead_code)]

use core::fmt;
use core::time::Duration;

/// The units a duration may end with, and their length in nanoseconds.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 60 * 60 * 1_000_000_000),
];

/// Units people write that are not ours, and the length they mean, for the advice of an error.
const ALIASES: &[(&str, u128)] = &[
    ("nsec", 1),
    ("nsecs", 1),
    ("nanos", 1),
    ("nanosecond", 1),
    ("nanoseconds", 1),
    ("usec", 1_000),
    ("usecs", 1_000),
    ("micros", 1_000),
    ("microsecond", 1_000),
    ("microseconds", 1_000),
    ("msec", 1_000_000),
    ("msecs", 1_000_000),
    ("millis", 1_000_000),
    ("millisecond", 1_000_000),
    ("milliseconds", 1_000_000),
    ("sec", 1_000_000_000),
    ("secs", 1_000_000_000),
    ("second", 1_000_000_000),
    ("seconds", 1_000_000_000),
    ("min", 60 * 1_000_000_000),
    ("mins", 60 * 1_000_000_000),
    ("minute", 60 * 1_000_000_000),
    ("minutes", 60 * 1_000_000_000),
    ("hr", 3_600 * 1_000_000_000),
    ("hrs", 3_600 * 1_000_000_000),
    ("hour", 3_600 * 1_000_000_000),
    ("hours", 3_600 * 1_000_000_000),
    ("d", 86_400 * 1_000_000_000),
    ("day", 86_400 * 1_000_000_000),
    ("days", 86_400 * 1_000_000_000),
];

/// How the valid units are listed in error messages.
const UNIT_LIST: &str = "`ns`, `us`, `ms`, `s`, `m` or `h`";

/// The longest `Duration`, in nanoseconds.
const DURATION_MAX_NANOS: u128 = u64::MAX as u128 * 1_000_000_000 + 999_999_999;

/// Why a string is not a duration. Its `Display` is a full sentence that says how to write the
/// value instead; any advice it quotes (`write "2s"`) is itself a valid duration.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct DurationError(String);

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl std::error::Error for DurationError {}

/// Parses a config duration into nanoseconds: longer than zero, at most `u64::MAX`.
///
/// This is the dialect of the attribute, of config files and of environment variables.
pub(crate) fn parse(text: &str) -> Result<u64, DurationError> {
    let nanos = parse_nanos(text, u128::from(u64::MAX))?;
    if nanos == 0 {
        return Err(DurationError(format!(
            "duration {} is zero: use a length of time greater than zero, like \"1ms\"",
            shown(text)
        )));
    }
    Ok(u64::try_from(nanos).expect("bounded by u64::MAX above"))
}

/// Parses any `Duration` that [`display_duration`] writes, zero and lengths past `u64::MAX`
/// nanoseconds included: serde's form, which must read back what it wrote.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let nanos = parse_nanos(text, DURATION_MAX_NANOS)?;
    let secs = u64::try_from(nanos / 1_000_000_000).expect("bounded by Duration::MAX above");
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// `nanos` in the canonical form: the largest unit that divides it (`"90s"`, `"2m"`,
/// `"250ms"`), else a fraction of a second or of a millisecond (`"1.5s"`, `"2.5ms"`), and
/// `"0s"` for zero. [`parse`] reads every non-zero output back to the same value.
pub(crate) fn display(nanos: u64) -> String {
    display_nanos(u128::from(nanos))
}

/// [`display`] for any `Duration`; [`parse_duration`] reads it back exactly.
pub(crate) fn display_duration(d: Duration) -> String {
    display_nanos(d.as_nanos())
}

fn display_nanos(nanos: u128) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let &(unit, size) = UNITS
        .iter()
        .rev()
        .find(|(u, size)| *u != "µs" && nanos.is_multiple_of(*size))
        .expect("ns divides everything");
    let fraction = |unit: &str, size: u128| {
        let digits = size.ilog10() as usize;
        let frac = format!("{:0digits$}", nanos % size);
        format!("{}.{}{unit}", nanos / size, frac.trim_end_matches('0'))
    };
    if size < 1_000_000_000 && nanos >= 1_000_000_000 {
        fraction("s", 1_000_000_000)
    } else if size < 1_000_000 && nanos >= 1_000_000 {
        fraction("ms", 1_000_000)
    } else {
        format!("{}{unit}", nanos / size)
    }
}

/// `text` quoted for a message: in full when short, else its first 32 characters, `…` and its
/// length, so a huge value cannot make a huge message.
pub(crate) fn shown(text: &str) -> String {
    const KEEP: usize = 32;
    match text.char_indices().nth(KEEP) {
        None => format!("\"{text}\""),
        Some((end, _)) => format!("\"{}…\" ({} bytes)", &text[..end], text.len()),
    }
}

/// `text` as nanoseconds, at most `max`; zero is allowed here.
fn parse_nanos(text: &str, max: u128) -> Result<u128, DurationError> {
    let err = |message: String| Err(DurationError(message));
    let quoted = shown(text);
    if text.is_empty() {
        return err("empty duration: write a number and a unit, like \"500ms\" or \"2s\"".into());
    }
    if text.chars().any(char::is_whitespace) {
        let joined: String = text.split_whitespace().collect();
        return err(match advice(&joined, max) {
            Some(fixed) => format!(
                "unexpected space in duration {quoted}: write it without spaces, like \"{fixed}\""
            ),
            None => format!(
                "unexpected space in duration {quoted}: write a number and a unit without spaces, like \"2s\""
            ),
        });
    }
    if let Some(rest) = text.strip_prefix('-') {
        return err(match advice(rest, max) {
            Some(fixed) => format!(
                "negative duration {quoted}: a duration is a length of time, write \"{fixed}\""
            ),
            None => format!(
                "negative duration {quoted}: a duration is a length of time, a number and a unit like \"2s\""
            ),
        });
    }
    if let Some(rest) = text.strip_prefix('+') {
        return err(match advice(rest, max) {
            Some(fixed) => format!("write the duration without a sign: \"{fixed}\""),
            None => format!(
                "unexpected sign in duration {quoted}: write a number and a unit without a sign, like \"2s\""
            ),
        });
    }
    let (number, unit) = split_number(text);
    if number.is_empty() {
        return err(format!(
            "duration {quoted} has no number: write it like \"500ms\" or \"2s\""
        ));
    }
    if unit.is_empty() {
        let with = |unit: &str| format!("{number}{unit}");
        return err(
            if parse_nanos(&with("s"), max).is_ok() && parse_nanos(&with("ms"), max).is_ok() {
                format!(
                    "duration {quoted} has no unit: add one of {UNIT_LIST}, like \"{}\" or \"{}\"",
                    with("s"),
                    with("ms")
                )
            } else {
                format!("duration {quoted} has no unit: add one of {UNIT_LIST}, like \"2s\"")
            },
        );
    }
    let Some(&(_, unit_nanos)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        let power = unit.strip_prefix(['e', 'E']);
        if power.is_some_and(|p| p.starts_with(|c: char| c.is_ascii_digit())) {
            let like = exponent(number, unit, max).unwrap_or_else(|| "2s".to_owned());
            return err(format!(
                "duration {quoted} has an exponent: write the number in full, like \"{like}\""
            ));
        }
        if unit.chars().any(|c| c.is_ascii_digit()) {
            return err(match mixed(text, max) {
                Some(fixed) => format!(
                    "duration {quoted} mixes units: write a single number and unit, like \"{fixed}\""
                ),
                None => format!(
                    "duration {quoted} mixes units: write a single number and unit, like \"90s\" for a minute and a half"
                ),
            });
        }
        return err(match advice(text, max) {
            Some(fixed) => format!(
                "unknown unit `{}` in duration {quoted}: write \"{fixed}\" (units are {UNIT_LIST})",
                excerpt(unit)
            ),
            None => format!(
                "unknown unit `{}` in duration {quoted}: use one of {UNIT_LIST}",
                excerpt(unit)
            ),
        });
    };
    match parse_number(number, unit_nanos, max) {
        Ok(nanos) => Ok(nanos),
        Err(NumberError::Malformed) => err(format!(
            "malformed number `{}` in duration {quoted}: write digits with at most one `.`, like \"1.5s\"",
            excerpt(number)
        )),
        Err(NumberError::TooPrecise) => err(format!(
            "duration {quoted} is not a whole number of nanoseconds: use fewer decimals or a smaller unit"
        )),
        Err(NumberError::Overflow) => err(if max <= u128::from(u64::MAX) {
            format!(
                "duration {quoted} is too long: durations are limited to u64::MAX nanoseconds (about 584 years)"
            )
        } else {
            format!("duration {quoted} is too long: it does not fit a `Duration`")
        }),
    }
}

/// `text` for a message without quotes, cut short like [`shown`]: a key, a name, a unit.
pub(crate) fn excerpt(text: &str) -> String {
    const KEEP: usize = 32;
    match text.char_indices().nth(KEEP) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}… ({} bytes)", &text[..end], text.len()),
    }
}

/// `"250ms"` → (`"250"`, `"ms"`).
fn split_number(text: &str) -> (&str, &str) {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    text.split_at(split)
}

/// The canonical form of `text` if it is a valid duration, or a number with a unit people
/// write that is not ours (`"2sec"` → `"2s"`, `"1day"` → `"24h"`): advice that parses.
fn advice(text: &str, max: u128) -> Option<String> {
    let (number, unit) = split_number(text);
    let unit_nanos = UNITS
        .iter()
        .chain(ALIASES)
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))?
        .1;
    let nanos = parse_number(number, unit_nanos, max).ok()?;
    (nanos > 0).then(|| display_nanos(nanos))
}

/// `"1m30s"` → `"90s"`: the sum of number-and-unit pairs, in the canonical form.
fn mixed(text: &str, max: u128) -> Option<String> {
    let mut rest = text;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (number, after) = split_number(rest);
        let end = after
            .find(|c: char| c.is_ascii_digit() || c == '.' || c == '_')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(end);
        let &(_, unit_nanos) = UNITS.iter().find(|(name, _)| *name == unit)?;
        total = total.checked_add(parse_number(number, unit_nanos, max).ok()?)?;
        rest = next;
    }
    (total > 0 && total <= max).then(|| display_nanos(total))
}

/// `"1e3"`, `"s"` → `"1000s"`: a number written with an exponent, in the canonical form.
fn exponent(number: &str, unit: &str, max: u128) -> Option<String> {
    let (power, unit) = split_number(unit.strip_prefix(['e', 'E'])?);
    let scale = 10u128.checked_pow(power.parse().ok()?)?;
    let &(_, unit_nanos) = UNITS.iter().find(|(name, _)| *name == unit)?;
    let nanos = parse_number(number, unit_nanos.checked_mul(scale)?, max).ok()?;
    (nanos > 0).then(|| display_nanos(nanos))
}

/// Why a duration's number could not be turned into nanoseconds.
#[derive(Debug, PartialEq, Eq)]
enum NumberError {
    Malformed,
    TooPrecise,
    Overflow,
}

/// `number` (digits, `_` separators, at most one `.`) times `unit_nanos`, exactly, at most
/// `max`.
fn parse_number(number: &str, unit_nanos: u128, max: u128) -> Result<u128, NumberError> {
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    let digits = |part: &str| -> Result<Vec<u32>, NumberError> {
        let digits: Vec<u32> = part.chars().filter_map(|c| c.to_digit(10)).collect();
        // Both sides of the dot need a digit: "1.s" and ".5s" are typos more often than not.
        if digits.is_empty() || part.starts_with('_') || part.contains('.') {
            return Err(NumberError::Malformed);
        }
        Ok(digits)
    };
    let mut nanos: u128 = 0;
    for digit in digits(whole)? {
        nanos = nanos
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(digit)))
            .filter(|n| *n <= max)
            .ok_or(NumberError::Overflow)?;
    }
    nanos = nanos.checked_mul(unit_nanos).ok_or(NumberError::Overflow)?;
    if let Some(fraction) = fraction {
        let mut scale = unit_nanos;
        for digit in digits(fraction)? {
            let part = u128::from(digit) * scale;
            if !part.is_multiple_of(10) {
                return Err(NumberError::TooPrecise);
            }
            nanos = nanos.checked_add(part / 10).ok_or(NumberError::Overflow)?;
            scale /= 10;
        }
    }
    if nanos > max {
        return Err(NumberError::Overflow);
    }
    Ok(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_every_unit() {
        assert_eq!(parse("10ns"), Ok(10));
        assert_eq!(parse("10us"), Ok(10_000));
        assert_eq!(parse("10µs"), Ok(10_000));
        assert_eq!(parse("250ms"), Ok(250_000_000));
        assert_eq!(parse("2s"), Ok(2_000_000_000));
        assert_eq!(parse("1m"), Ok(60_000_000_000));
        assert_eq!(parse("1h"), Ok(3_600_000_000_000));
    }

    #[test]
    fn accepts_fractions_and_separators() {
        assert_eq!(parse("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse("0.25ms"), Ok(250_000));
        assert_eq!(parse("1_000ms"), Ok(1_000_000_000));
        assert_eq!(parse("1.000000001s"), Ok(1_000_000_001));
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "", "2x", "-1s", "+1s", "1.5.2s", "s", "10", "1 s", ".5s", "1.s", "0s", "0.0ms",
            "1m30s", "1.5ns", "_1s", "10sec", "1S",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn rejects_overflow() {
        assert!(parse("18446744073709551616ns").is_err());
        assert!(parse("99999999999999999999999999999999999999999h").is_err());
        assert!(parse(&format!("{}s", "9".repeat(1000))).is_err());
        assert_eq!(parse("18446744073709551615ns"), Ok(u64::MAX));
        assert!(parse("5124096h").is_err());
    }

    #[test]
    fn messages_say_how_to_fix() {
        for (text, says) in [
            (
                "",
                "empty duration: write a number and a unit, like \"500ms\" or \"2s\"",
            ),
            (
                "10",
                "duration \"10\" has no unit: add one of `ns`, `us`, `ms`, `s`, `m` or `h`, like \"10s\" or \"10ms\"",
            ),
            (
                "2x",
                "unknown unit `x` in duration \"2x\": use one of `ns`, `us`, `ms`, `s`, `m` or `h`",
            ),
            (
                "-1s",
                "negative duration \"-1s\": a duration is a length of time, write \"1s\"",
            ),
            (
                "1m30s",
                "duration \"1m30s\" mixes units: write a single number and unit, like \"90s\"",
            ),
            (
                "1e3s",
                "duration \"1e3s\" has an exponent: write the number in full, like \"1000s\"",
            ),
            (
                "2.5E2ms",
                "duration \"2.5E2ms\" has an exponent: write the number in full, like \"250ms\"",
            ),
            (
                "2 sec",
                "unexpected space in duration \"2 sec\": write it without spaces, like \"2s\"",
            ),
            (
                "2sec",
                "unknown unit `sec` in duration \"2sec\": write \"2s\" (units are `ns`, `us`, `ms`, `s`, `m` or `h`)",
            ),
            (
                "1 day",
                "unexpected space in duration \"1 day\": write it without spaces, like \"24h\"",
            ),
            (
                "0s",
                "duration \"0s\" is zero: use a length of time greater than zero, like \"1ms\"",
            ),
            (
                "6000000h",
                "duration \"6000000h\" is too long: durations are limited to u64::MAX nanoseconds (about 584 years)",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err().to_string(), says, "{text:?}");
        }
    }

    /// Every `"…"` a message advises, past the value it quotes, is a valid duration.
    #[test]
    fn advice_parses() {
        let inputs = [
            "2 sec",
            "2sec",
            "2 secs",
            "1.5 seconds",
            "3mins",
            "1 hour",
            "2Hrs",
            "10 s",
            "10S",
            "1m30s",
            "1e3s",
            "1e30s",
            "1h30m",
            "2h0.5m",
            "-1s",
            "-2 sec",
            "+5ms",
            "10",
            "1.5",
            "250 ms",
            "1 x",
            "-",
            "+",
            "1m30",
            "0s",
            "1day",
            "2 d",
            "7 millis",
        ];
        for text in inputs {
            let message = parse(text).unwrap_err().to_string();
            let quoted: Vec<&str> = message.split('"').skip(1).step_by(2).collect();
            for advice in quoted.iter().filter(|q| **q != text) {
                assert!(
                    parse(advice).is_ok(),
                    "{text:?}: the advice {advice:?} in {message:?} does not parse"
                );
            }
        }
    }

    #[test]
    fn huge_values_are_cut_short_in_messages() {
        let huge = format!("{}x", "1".repeat(10_000_000));
        let message = parse(&huge).unwrap_err().to_string();
        assert!(message.len() < 200, "{}", message.len());
        assert!(message.contains("…\" (10000001 bytes)"), "{message}");
        let spaces = format!("1 {}", "s".repeat(1_000_000));
        assert!(parse(&spaces).unwrap_err().to_string().len() < 200);
        // Cut on a character boundary.
        let wide = "µ".repeat(100);
        assert_eq!(shown(&wide), format!("\"{}…\" (200 bytes)", "µ".repeat(32)));
    }

    #[test]
    fn displays_the_largest_exact_unit_or_a_fraction() {
        for (nanos, text) in [
            (90_000_000_000, "90s"),
            (120_000_000_000, "2m"),
            (7_200_000_000_000, "2h"),
            (250_000_000, "250ms"),
            (1_500_000, "1.5ms"),
            (1_500_000_000, "1.5s"),
            (59_998_612_000, "59.998612s"),
            (1_000_000_001, "1.000000001s"),
            (250_000, "250us"),
            (7, "7ns"),
            (0, "0s"),
        ] {
            assert_eq!(display(nanos), text);
        }
    }

    #[test]
    fn what_displays_parses_back() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut samples = vec![1, 999, 1_000, 1_000_001, u64::MAX, u64::MAX - 1, 1 << 63];
        for _ in 0..10_000 {
            // xorshift
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push(x >> (x % 64));
        }
        for n in samples.into_iter().filter(|n| *n > 0) {
            assert_eq!(parse(&display(n)), Ok(n), "{n}");
        }
        for d in [
            Duration::ZERO,
            Duration::MAX,
            Duration::from_nanos(u64::MAX) + Duration::from_nanos(1),
            Duration::new(u64::MAX, 1),
        ] {
            assert_eq!(parse_duration(&display_duration(d)), Ok(d), "{d:?}");
        }
        assert!(parse_duration("18446744073709551616s").is_err());
    }
}

//! Duration strings such as `"250ms"`, parsed at expansion time.
//!
//! The parsed value is emitted as a `Duration::from_nanos` constant, so nothing is
//! parsed at run time and a typo is a compile error on the literal.

/// The units a duration string may end with, and their length in nanoseconds.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 60 * 60 * 1_000_000_000),
];

/// How the valid units are listed in error messages.
const UNIT_LIST: &str = "`ns`, `us`, `ms`, `s`, `m` or `h`";

/// Parses `"<number><unit>"` into nanoseconds.
///
/// The number is a decimal with an optional fraction (`"1.5s"`); the result must be at
/// least one nanosecond, a whole number of nanoseconds, and fit a `u64` (about 584 years).
/// The error is a complete sentence saying how to write the value instead.
pub(crate) fn parse(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err("empty duration: write a number and a unit, like \"500ms\" or \"2s\"".into());
    }
    if text.chars().any(char::is_whitespace) {
        let joined: String = text.split_whitespace().collect();
        return Err(format!(
            "unexpected space in duration \"{text}\": write it without spaces, like \"{joined}\""
        ));
    }
    if let Some(rest) = text.strip_prefix('-') {
        return Err(format!(
            "negative duration \"{text}\": a duration is a length of time, write \"{rest}\""
        ));
    }
    if let Some(rest) = text.strip_prefix('+') {
        return Err(format!("write the duration without a sign: \"{rest}\""));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "duration \"{text}\" has no number: write it like \"500ms\" or \"2s\""
        ));
    }
    if unit.is_empty() {
        return Err(format!(
            "duration \"{text}\" has no unit: add one of {UNIT_LIST}, like \"{number}s\" or \"{number}ms\""
        ));
    }
    let Some(&(_, unit_nanos)) = UNITS.iter().find(|(name, _)| *name == unit) else {
        if unit.chars().any(|c| c.is_ascii_digit()) {
            return Err(format!(
                "duration \"{text}\" mixes units: write a single number and unit, like \"90s\" for a minute and a half"
            ));
        }
        return Err(format!(
            "unknown unit `{unit}` in duration \"{text}\": use one of {UNIT_LIST}"
        ));
    };
    let nanos = parse_number(number, unit_nanos).map_err(|why| match why {
        NumberError::Malformed => format!(
            "malformed number `{number}` in duration \"{text}\": write digits with at most one `.`, like \"1.5s\""
        ),
        NumberError::TooPrecise => format!(
            "duration \"{text}\" is not a whole number of nanoseconds: use fewer decimals or a smaller unit"
        ),
        NumberError::Overflow => format!(
            "duration \"{text}\" is too long: durations are limited to u64::MAX nanoseconds (about 584 years)"
        ),
    })?;
    if nanos == 0 {
        return Err(format!(
            "duration \"{text}\" is zero: use a length of time greater than zero, like \"1ms\""
        ));
    }
    Ok(nanos)
}

/// Why a duration's number could not be turned into nanoseconds.
#[derive(Debug, PartialEq, Eq)]
enum NumberError {
    Malformed,
    TooPrecise,
    Overflow,
}

/// `number` (digits, `_` separators, at most one `.`) times `unit_nanos`, exactly.
fn parse_number(number: &str, unit_nanos: u128) -> Result<u64, NumberError> {
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
    u64::try_from(nanos).map_err(|_| NumberError::Overflow)
}

/// Formats nanoseconds back into the shortest exact duration string, for messages.
pub(crate) fn display(nanos: u64) -> String {
    for &(name, unit) in UNITS.iter().rev() {
        if name == "µs" {
            continue;
        }
        let unit = u64::try_from(unit).unwrap_or(u64::MAX);
        if nanos.is_multiple_of(unit) {
            return format!("{}{name}", nanos / unit);
        }
    }
    format!("{nanos}ns")
}

#[cfg(test)]
mod tests {
    use super::{display, parse};

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
            "1m30s", "1.5ns", "_1s",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn rejects_overflow() {
        assert!(parse("18446744073709551616ns").is_err());
        assert!(parse("99999999999999999999999999999999999999999h").is_err());
        assert_eq!(parse("18446744073709551615ns"), Ok(u64::MAX));
        assert!(parse("5124096h").is_err());
    }

    #[test]
    fn messages_say_how_to_fix() {
        assert!(parse("10").unwrap_err().contains("\"10s\""));
        assert!(parse("2x").unwrap_err().contains("`ms`"));
        assert!(parse("-1s").unwrap_err().contains("\"1s\""));
        assert!(parse("1m30s").unwrap_err().contains("\"90s\""));
    }

    #[test]
    fn displays_shortest_exact_form() {
        assert_eq!(display(60_000_000_000), "1m");
        assert_eq!(display(1_500_000_000), "1500ms");
        assert_eq!(display(7), "7ns");
    }
}

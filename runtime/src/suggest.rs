//! "did you mean …?" for a misspelt key or name.
//!
//! This file is compiled into two crates: `macros/src/suggest.rs` is a symlink to it, so the
//! attribute, config files and environment variables suggest the same key for the same typo.
//! Keep it free of dependencies and of `crate::` paths.

// Each crate uses part of this file.
#![allow(dead_code)]

/// Names other circuit breakers (Resilience4j, gobreaker, …) give our keys.
const ALIASES: &[(&str, &str)] = &[
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

/// The longest `unknown`, in characters, compared by edit distance: far above any real name
/// or key. Comparing two names costs the product of their lengths.
const LONGEST: usize = 256;

/// The candidate `unknown` most likely stands for: the one an alias names, else the nearest
/// by edit distance, if it is at most 2 edits away (a fifth of the length for long names).
///
/// Cost: linear in the candidates' total length; an `unknown` longer than 256 characters
/// is not compared at all.
pub(crate) fn closest<'a>(
    unknown: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let length = unknown.chars().take(LONGEST + 1).count();
    if length > LONGEST {
        return None;
    }
    let alias = ALIASES
        .iter()
        .find(|(alias, _)| *alias == unknown)
        .map(|(_, key)| *key);
    let limit = (length / 5).max(2);
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        if Some(candidate) == alias {
            return Some(candidate);
        }
        // Lengths further apart than the limit cannot be within it.
        if candidate
            .chars()
            .take(LONGEST + limit + 1)
            .count()
            .abs_diff(length)
            > limit
        {
            continue;
        }
        let distance = edit_distance(unknown, candidate);
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// Levenshtein distance, counting an adjacent swap (`inventroy`) as one edit.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Rows i-2, i-1 and i of the table.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut current = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let substitute = previous[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            let mut best = substitute.min(previous[j] + 1).min(current[j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        before = std::mem::replace(&mut previous, current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &[
        "failures",
        "failure_rate",
        "open_for",
        "window",
        "min_calls",
    ];

    #[test]
    fn typos_aliases_and_swaps() {
        assert_eq!(closest("failure", KEYS.iter().copied()), Some("failures"));
        assert_eq!(closest("failurs", KEYS.iter().copied()), Some("failures"));
        assert_eq!(closest("cooldown", KEYS.iter().copied()), Some("open_for"));
        assert_eq!(closest("colour", KEYS.iter().copied()), None);
        assert_eq!(
            closest("inventroy", ["inventory", "users"]),
            Some("inventory")
        );
        assert_eq!(
            closest("my_app::clinet::fetch_usr", ["my_app::client::fetch_user"]),
            Some("my_app::client::fetch_user")
        );
        // An alias of a key the caller does not accept suggests nothing.
        assert_eq!(closest("fallback_fn", KEYS.iter().copied()), None);
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn a_huge_unknown_costs_nothing() {
        let huge = "f".repeat(10_000_000);
        assert_eq!(closest(&huge, KEYS.iter().copied()), None);
    }
}

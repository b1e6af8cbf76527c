//! Each trip policy under two threads of a million mixed calls each.

use std::time::Duration;

use breakerbox_runtime::{Config, Window};

use crate::support::stress;

#[test]
fn consecutive_policy_two_threads_a_million_calls_each() {
    stress(
        Config::builder()
            .failures(4)
            .open_for(Duration::from_millis(5))
            .backoff(2.0)
            .max_open_for(Duration::from_millis(40))
            .half_open_calls(3)
            .successes(2)
            .probe_timeout(Duration::from_millis(20))
            .max_concurrent(8),
        4,
    );
}

#[test]
fn count_window_rate_policy_two_threads_a_million_calls_each() {
    stress(
        Config::builder()
            .failure_rate(40)
            .window(Window::Calls(20))
            .min_calls(10)
            .open_for(Duration::from_millis(5))
            .half_open_calls(2)
            .successes(2)
            .probe_timeout(Duration::from_millis(20)),
        20,
    );
}

#[test]
fn time_window_rate_policy_two_threads_a_million_calls_each() {
    stress(
        Config::builder()
            .failure_rate(40)
            .window(Window::Time(Duration::from_millis(20)))
            .min_calls(20)
            .open_for(Duration::from_millis(5))
            .half_open_calls(2)
            .successes(2)
            .probe_timeout(Duration::from_millis(20)),
        20,
    );
}

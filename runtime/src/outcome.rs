//! What a finished call means for the breaker.

use core::time::Duration;

/// The verdict on one finished call.
///
/// A classifier turns a call's result into one; the default is `Ok` → `Success`,
/// `Err` → `Failure`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Outcome {
    /// The service answered well.
    Success,
    /// The service failed; counts toward tripping.
    Failure,
    /// Says nothing about the service (a 404, a cancelled call): counted neither way, and a
    /// half-open probe's slot is freed.
    Ignored,
    /// Open the breaker now for this long: the service asked for a pause, such as an HTTP 503
    /// with `Retry-After`.
    TripFor(Duration),
}

impl Outcome {
    /// The default verdict: `Ok` is a success, `Err` a failure.
    ///
    /// ```
    /// use breakerbox_runtime::Outcome;
    /// assert_eq!(Outcome::of_result(&Ok::<_, ()>(1)), Outcome::Success);
    /// assert_eq!(Outcome::of_result(&Err::<(), _>("no")), Outcome::Failure);
    /// ```
    pub fn of_result<T, E>(result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }
}

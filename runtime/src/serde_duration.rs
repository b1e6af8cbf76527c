//! `#[serde(with = …)]` for durations as text (`"250ms"`, `"2s"`): what the core's
//! `Serialize`/`Deserialize` derives (`Metrics`, `Event`) and `serde_impls` write
//! durations with. Here, in the core, so that the core's derives never name `serde_impls`.

use core::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serializer};

use crate::duration as text;

/// `#[serde(with = …)]` for a `Duration` as a string like `"250ms"`: exact, any `Duration`
/// from zero to `Duration::MAX` (`"18446744073709551615.999999999s"`).
pub(crate) mod as_text {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text::display_duration(*d))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let t = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text::parse_duration(&t).map_err(de::Error::custom)
    }
}

/// `#[serde(with = …)]` for an `Option<Duration>`.
pub(crate) mod option_as_text {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&text::display_duration(*d)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = <Option<std::borrow::Cow<'de, str>>>::deserialize(d)?;
        text.map(|t| text::parse_duration(&t).map_err(de::Error::custom))
            .transpose()
    }
}

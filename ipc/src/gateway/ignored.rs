//! Params fields a method accepts and does not use, read without being kept: a client's
//! value there, however large, is skipped as it is parsed instead of built into a tree
//! nobody reads.

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A field accepted and not used (any JSON value). Serialized as `null`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ignored;

impl<'de> Deserialize<'de> for Ignored {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Ignored)
    }
}

impl Serialize for Ignored {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

/// Params of methods that take none worth reading (`{}` or anything; OpenClaw does not
/// validate them). Serialized as `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnyParams;

impl<'de> Deserialize<'de> for AnyParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| AnyParams)
    }
}

impl Serialize for AnyParams {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        s.serialize_map(Some(0))?.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anything_is_taken_and_nothing_kept() {
        for text in ["null", "{}", r#"{"a":[{"":0},{"":0}]}"#, "[1,2]", "\"x\""] {
            assert_eq!(serde_json::from_str::<Ignored>(text).ok(), Some(Ignored));
            assert_eq!(
                serde_json::from_str::<AnyParams>(text).ok(),
                Some(AnyParams)
            );
        }
        assert!(serde_json::from_str::<AnyParams>("{").is_err());
        assert_eq!(
            serde_json::to_string(&AnyParams).ok().as_deref(),
            Some("{}")
        );
        assert_eq!(
            serde_json::to_string(&Ignored).ok().as_deref(),
            Some("null")
        );
    }
}

//! Params fields read without keeping more than is used: a field a method accepts and does
//! not use is skipped as it is parsed instead of built into a tree nobody reads, and a list
//! a method reads only the start of keeps only that start.

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

/// A list of which only the first `N` items are kept; the rest are skipped as they are read
/// (`more` says some were). A client's million-item list costs `N` items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capped<T, const N: usize> {
    pub items: Vec<T>,
    /// More than `N` items were sent.
    pub more: bool,
}

impl<T, const N: usize> Default for Capped<T, N> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            more: false,
        }
    }
}

impl<T, const N: usize> From<Vec<T>> for Capped<T, N> {
    fn from(mut items: Vec<T>) -> Self {
        let more = items.len() > N;
        items.truncate(N);
        Self { items, more }
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Capped<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const N: usize>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> serde::de::Visitor<'de> for V<T, N> {
            type Value = Capped<T, N>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Self::Value, A::Error> {
                let mut c = Capped::<T, N>::default();
                while c.items.len() < N {
                    match a.next_element::<T>()? {
                        Some(item) => c.items.push(item),
                        None => return Ok(c),
                    }
                }
                while a.next_element::<IgnoredAny>()?.is_some() {
                    c.more = true;
                }
                Ok(c)
            }
        }
        d.deserialize_seq(V::<T, N>(std::marker::PhantomData))
    }
}

impl<T: Serialize, const N: usize> Serialize for Capped<T, N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(&self.items)
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

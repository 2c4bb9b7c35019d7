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

/// One JSON value looked at as it is read, keeping only what tells it apart: its kind, a
/// string's text, an integer, and whether a list was empty; the contents of a list or an
/// object are skipped, never built. What a params type reads of a field it only classifies.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Glance {
    Null,
    Bool(bool),
    Int(i128),
    Float,
    Str(String),
    List { empty: bool },
    Object,
}

impl Glance {
    /// The string it was, if it was one.
    pub(super) fn into_text(self) -> Option<String> {
        match self {
            Glance::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Glance {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Glance;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_unit<E>(self) -> Result<Glance, E> {
                Ok(Glance::Null)
            }
            fn visit_none<E>(self) -> Result<Glance, E> {
                Ok(Glance::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Glance, E> {
                Ok(Glance::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Glance, E> {
                Ok(Glance::Int(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Glance, E> {
                Ok(Glance::Int(n.into()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Glance, E> {
                Ok(Glance::Float)
            }
            fn visit_str<E>(self, s: &str) -> Result<Glance, E> {
                Ok(Glance::Str(s.to_owned()))
            }
            fn visit_string<E>(self, s: String) -> Result<Glance, E> {
                Ok(Glance::Str(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Glance, A::Error> {
                let mut empty = true;
                while a.next_element::<IgnoredAny>()?.is_some() {
                    empty = false;
                }
                Ok(Glance::List { empty })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Glance, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Glance::Object)
            }
        }
        d.deserialize_any(V)
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

    #[test]
    fn a_glance_keeps_a_kind_a_string_and_an_integer() {
        let g = |t: &str| serde_json::from_str::<Glance>(t).unwrap();
        assert_eq!(g("null"), Glance::Null);
        assert_eq!(g("false"), Glance::Bool(false));
        assert_eq!(g("-3"), Glance::Int(-3));
        assert_eq!(g("18446744073709551615"), Glance::Int(u64::MAX.into()));
        assert_eq!(g("0.5"), Glance::Float);
        assert_eq!(g(r#""a\nb""#).into_text().as_deref(), Some("a\nb"));
        assert_eq!(g("[]"), Glance::List { empty: true });
        assert_eq!(g(r#"[[{"x":1}]]"#), Glance::List { empty: false });
        assert_eq!(g(r#"{"a":[1,2]}"#), Glance::Object);
    }

    #[test]
    fn a_capped_list_keeps_its_start_and_says_more_came() {
        let c: Capped<String, 2> = serde_json::from_str(r#"["a","b",{"x":[1]},"d"]"#).unwrap();
        assert_eq!(c.items, ["a", "b"]);
        assert!(c.more);
        let c: Capped<String, 2> = serde_json::from_str(r#"["a","b"]"#).unwrap();
        assert!(!c.more);
        // The kept items are still checked.
        assert!(serde_json::from_str::<Capped<String, 2>>("[1]").is_err());
        assert_eq!(serde_json::to_string(&c).unwrap(), r#"["a","b"]"#);
    }
}

//! JSON values borrowed from the bytes they were parsed from.
//!
//! The webhook sees every DaemonSet pod creation and the updater every pod,
//! so neither builds owned trees of what it only reads: strings borrow from
//! the input and fall back to owned copies only when JSON escapes force it.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::ops::Deref;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer};

/// A JSON string borrowed from the request when it has no escapes.
///
/// `Cow<'a, str>` alone only borrows as a direct `#[serde(borrow)]` field, not
/// inside maps or sequences, so this newtype makes borrowing work everywhere.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Str<'a>(pub Cow<'a, str>);

impl Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Str<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

struct StrVisitor {
    /// Quantities may legally arrive as JSON numbers; names may not.
    numbers: bool,
}

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Str<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.numbers {
            "a string or number"
        } else {
            "a string"
        })
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Str(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Str(Cow::Owned(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.number(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.number(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.number(v)
    }
}

impl StrVisitor {
    fn number<E: de::Error, N: fmt::Display>(self, v: N) -> Result<Str<'static>, E> {
        if self.numbers {
            Ok(Str(Cow::Owned(v.to_string())))
        } else {
            Err(E::custom(format!("expected a string, found number {v}")))
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(StrVisitor { numbers: false })
    }
}

/// The raw text of a resource quantity, parsed only when the mutation needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuantityText<'a>(pub Str<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for QuantityText<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrVisitor { numbers: true })
            .map(QuantityText)
    }
}

/// A JSON object kept as its entries in document order.
///
/// Pods carry a handful of labels, annotations and resources; a vector with a
/// linear lookup parses and reads them without the node allocations of a
/// tree. Like a map built by inserting in order, a repeated key's last value
/// wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonMap<K, V>(pub Vec<(K, V)>);

impl<K: Borrow<str>, V> JsonMap<K, V> {
    /// The value of `key` (the last one if the key repeats).
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k.borrow() == key)
            .map(|(_, v)| v)
    }

    /// Entries in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// Whether the object has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for JsonMap<K, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<K, V>(std::marker::PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for Visit<K, V> {
            type Value = JsonMap<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            // serde's own word for an array is "sequence".
            fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
                Err(de::Error::invalid_type(
                    de::Unexpected::Other("array"),
                    &self,
                ))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4).min(16));
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(JsonMap(entries))
            }
        }
        d.deserialize_any(Visit(std::marker::PhantomData))
    }
}

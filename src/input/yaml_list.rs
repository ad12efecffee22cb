//! A YAML file that is one `kind: List` document, as `kubectl get -o yaml`
//! writes a whole cluster, read item by item from the file, so that the
//! document is never held whole. Anything else is declined.

use crate::manifest::{fill_item_type, ListHead};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;
use std::io::Read;

/// Calls `each` with every item of the one list document `reader` holds
/// (`kind: List` or a typed list), as it is read. `false` for anything else
/// (several documents, an object that is no list, an item without a kind
/// before the list said its own, a syntax error): what `each` got must then
/// be discarded, and the file read document by document, which words any
/// error.
pub(super) fn stream_list(
    reader: impl Read,
    options: serde_saphyr::Options,
    each: &mut dyn FnMut(Value),
) -> bool {
    let streamed =
        serde_saphyr::with_deserializer_from_reader_with_options(reader, options, |de| {
            serde::Deserializer::deserialize_map(de, Top { each })
        });
    matches!(streamed, Ok(true))
}

struct Top<'a> {
    each: &'a mut dyn FnMut(Value),
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a List")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut head = ListHead::default();
        let (mut items, mut complete) = (false, true);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "items" if !items => {
                    items = true;
                    complete &= map.next_value_seed(Items {
                        head: &head,
                        each: &mut *self.each,
                    })?;
                }
                "kind" => head.kind = map.next_value::<Value>()?.as_str().map(str::to_owned),
                "apiVersion" => {
                    head.api_version = map.next_value::<Value>()?.as_str().map(str::to_owned);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let list = head
            .kind
            .as_deref()
            .is_some_and(|k| k == "List" || (k.len() > 4 && k.ends_with("List")));
        Ok(list && items && complete)
    }
}

struct Items<'a, 'h> {
    head: &'h ListHead,
    each: &'a mut dyn FnMut(Value),
}

impl<'de> DeserializeSeed<'de> for Items<'_, '_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Items<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<bool, S::Error> {
        let mut complete = true;
        while let Some(mut item) = seq.next_element::<Value>()? {
            if item.is_null() {
                continue;
            }
            if item.get("kind").is_none() && self.head.kind.is_none() {
                complete = false;
                continue;
            }
            fill_item_type(&mut item, self.head);
            (self.each)(item);
        }
        Ok(complete)
    }
}

//! Documents from parsed values: a stream of JSON values one after
//! another (as `jq -c` prints them, and kubectl reads them), and a
//! document's objects, a List's items each.

use super::parse::{InputError, Location, SourceDocument};
use serde_json::Value;

/// The JSON documents of `text` in turn, with the line each starts on and
/// the bytes it took: one value, or several one after another (`jq -c`
/// prints one per line, and kubectl reads them so). A top-level array is
/// a `List` of its items; `null` is no document.
pub(super) fn json_values<E: From<InputError>>(
    source: &str,
    text: &str,
    mut each: impl FnMut(u64, Value, usize) -> Result<(), E>,
) -> Result<(), E> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let (mut counted, mut line) = (0, 1u64);
    loop {
        let before = stream.byte_offset();
        let Some(next) = stream.next() else {
            return Ok(());
        };
        let value = next.map_err(|e| InputError::File {
            path: source.to_owned(),
            message: format!("not valid JSON: {e}"),
        })?;
        let start = before + (text[before..].len() - text[before..].trim_start().len());
        line += text[counted..start].matches('\n').count() as u64;
        counted = start;
        let size = stream.byte_offset() - before;
        let value = match value {
            Value::Null => continue,
            Value::Array(items) => Value::Object(list_of(items)),
            other => other,
        };
        each(line, value, size)?;
    }
}

/// One document's objects into `out`: itself, or a List's items each.
pub(super) fn push_document(
    out: &mut Vec<SourceDocument>,
    location: Location,
    value: Value,
) -> Result<(), InputError> {
    match value {
        Value::Object(map) if crate::manifest::is_list(&map) => {
            let Some(items) = crate::manifest::list_items(map) else {
                return Err(InputError::document(
                    &location,
                    "a List's `items` must be a list",
                ));
            };
            out.extend(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, value)| SourceDocument {
                        location: Location {
                            item: Some(i + 1),
                            ..location.clone()
                        },
                        value,
                    }),
            );
        }
        value => out.push(SourceDocument { location, value }),
    }
    Ok(())
}

fn list_of(items: Vec<Value>) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("kind".to_owned(), Value::from("List"));
    map.insert("items".to_owned(), Value::Array(items));
    map
}

//! The same object given twice is refused, naming both places: a
//! cluster holds one object of a group, kind, namespace and name.

use super::objects::Key;
use super::parse::{InputError, Location};
use serde_json::Value;
use std::collections::HashMap;

/// The objects read so far by name, for inputs read as documents (`-f`,
/// `--params`): the same object twice is refused, naming both documents.
#[derive(Debug, Default)]
pub struct Unique {
    seen: HashMap<Key, Location>,
}

impl Unique {
    /// Refuses `value` when an object of its group, kind, namespace and
    /// name was read before.
    ///
    /// # Errors
    /// The second document, naming the first.
    pub fn check(&mut self, value: &Value, location: &Location) -> Result<(), InputError> {
        let Some(key) = Key::of(value) else {
            return Ok(());
        };
        if let Some(first) = self.seen.get(&key) {
            return Err(twice(&key, location, first));
        }
        self.seen.insert(key, location.clone());
        Ok(())
    }
}

pub(super) fn twice(key: &Key, location: &Location, first: &Location) -> InputError {
    // The same place twice: the same path was given twice, which the
    // object's message would put as "first at" where it is.
    if location.source == first.source
        && location.document == first.document
        && location.item == first.item
    {
        return InputError::File {
            path: location.source.clone(),
            message: "the same file is given twice; give it once".to_owned(),
        };
    }
    InputError::document(
        location,
        format!(
            "{} is given twice, first at {first}; a cluster holds one object of a name",
            key.words()
        ),
    )
}

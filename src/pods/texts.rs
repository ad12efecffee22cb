//! [`Texts`]: resource name to quantity text, as a pod, a template or a
//! container status lists them, in the form a controller keeps between
//! passes.
//!
//! The updater holds four of these per container of every DaemonSet pod it
//! watches (spec and actuated, requests and limits): 800,000 at 100,000
//! pods. As a vector of string pairs each list cost five allocations and
//! about 450 bytes. Here a list is one shared, packed string
//! (`cpu\0100m\0memory\0128Mi`): one allocation, and a clone (into a plan,
//! or a container status equal to its spec) is a reference count. No crate
//! offers a packed, shared list of string pairs, hence this one.

use crate::vpa::ResourceList;
use serde::Serialize;
use smallvec::SmallVec;
use std::sync::Arc;

/// Separates names and quantities. Neither a resource name (a qualified
/// name) nor a quantity can hold it; [`Texts::try_from_pairs`] refuses one
/// that does.
const SEP: char = '\0';

/// Resource name to quantity text, in name order, each name once.
/// Serialized as a JSON object.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Texts(Option<Arc<str>>);

impl Texts {
    /// Builds the list from (name, quantity) pairs: sorted by name, and a
    /// name given twice keeps its last quantity, as in a JSON object.
    ///
    /// # Errors
    /// When a name is empty, or a name or a quantity holds a NUL
    /// character, naming the entry.
    pub fn try_from_pairs<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Texts, String> {
        // Lists hold one to four entries: kept off the heap until packed.
        let mut pairs: SmallVec<[(K, V); 4]> = pairs.into_iter().collect();
        for (k, v) in &pairs {
            let (k, v) = (k.as_ref(), v.as_ref());
            if k.is_empty() {
                return Err(format!("{v:?}: a resource name cannot be empty"));
            }
            if k.contains(SEP) || v.contains(SEP) {
                return Err(format!(
                    "{k:?}: {v:?}: a resource name or quantity cannot hold a NUL character"
                ));
            }
        }
        // Stable, so that the last of equal names is last; then keep it.
        pairs.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let kept =
            |i: usize| i + 1 == pairs.len() || pairs[i + 1].0.as_ref() != pairs[i].0.as_ref();
        let mut packed = Packer::with_capacity(
            pairs
                .iter()
                .map(|(k, v)| k.as_ref().len() + v.as_ref().len() + 2)
                .sum(),
        );
        for (i, (k, v)) in pairs.iter().enumerate() {
            if kept(i) {
                packed.push(k.as_ref(), v.as_ref());
            }
        }
        Ok(packed.finish())
    }

    /// This list with each resource of `changes` set to its quantity's
    /// canonical text (as the API writes it); shares this list when
    /// nothing changes. One allocation, no sort: both lists are in name
    /// order.
    #[must_use]
    pub fn with_quantities(&self, changes: &ResourceList) -> Texts {
        let mut texts = String::new();
        let mut changed: SmallVec<[(&str, std::ops::Range<usize>); 4]> = SmallVec::new();
        for (r, q) in changes {
            let start = texts.len();
            q.write_canonical(&mut texts);
            changed.push((r, start..texts.len()));
        }
        if changed
            .iter()
            .all(|(r, at)| self.get(r) == Some(&texts[at.clone()]))
        {
            return self.clone();
        }
        let size = self.0.as_deref().map_or(0, str::len)
            + changed
                .iter()
                .map(|(r, at)| r.len() + at.len() + 2)
                .sum::<usize>();
        let mut packed = Packer::with_capacity(size);
        let mut mine = self.iter().peekable();
        let mut theirs = changed.iter().peekable();
        loop {
            match (mine.peek(), theirs.peek()) {
                (Some((a, _)), Some((b, at))) if a == b => {
                    packed.push(b, &texts[at.clone()]);
                    mine.next();
                    theirs.next();
                }
                (Some((a, v)), Some((b, _))) if a < b => {
                    packed.push(a, v);
                    mine.next();
                }
                (_, Some((b, at))) => {
                    packed.push(b, &texts[at.clone()]);
                    theirs.next();
                }
                (Some((a, v)), None) => {
                    packed.push(a, v);
                    mine.next();
                }
                (None, None) => break,
            }
        }
        packed.finish()
    }

    /// Whether every resource of `changes` already has its quantity's
    /// canonical text here (so [`Texts::with_quantities`] would change
    /// nothing). `buffer` is scratch space, reused across calls.
    #[must_use]
    pub fn holds(&self, changes: &ResourceList, buffer: &mut String) -> bool {
        // One walk: both lists are in name order.
        let mut mine = self.iter();
        changes.iter().all(|(r, q)| {
            let Some((_, text)) = mine
                .by_ref()
                .find(|(k, _)| *k >= r)
                .filter(|(k, _)| *k == r)
            else {
                return false;
            };
            buffer.clear();
            q.write_canonical(buffer);
            text == buffer.as_str()
        })
    }

    /// The quantity of `resource`.
    #[must_use]
    pub fn get(&self, resource: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == resource).map(|(_, v)| v)
    }

    /// (resource, quantity) in resource order.
    #[must_use]
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.as_deref().unwrap_or_default())
    }

    /// How many resources.
    #[must_use]
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// The entries of a [`Texts`], in name order.
#[derive(Clone, Debug)]
pub struct Iter<'t>(&'t str);

impl<'t> Iterator for Iter<'t> {
    type Item = (&'t str, &'t str);

    // Scans bytes rather than `str::split`: the parts are a few bytes long,
    // and a searcher's set-up cost more than the scan (measured in a pass
    // of the updater).
    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.0;
        if rest.is_empty() {
            return None;
        }
        let at = |s: &str| s.bytes().position(|b| b == 0).unwrap_or(s.len());
        let name_end = at(rest);
        let name = &rest[..name_end];
        let after = rest.get(name_end + 1..).unwrap_or_default();
        let value_end = at(after);
        self.0 = after.get(value_end + 1..).unwrap_or_default();
        Some((name, &after[..value_end]))
    }
}

/// Writes a packed list in one allocation of a known size.
struct Packer(String);

impl Packer {
    fn with_capacity(size: usize) -> Self {
        Packer(String::with_capacity(size))
    }

    fn push(&mut self, name: &str, quantity: &str) {
        if !self.0.is_empty() {
            self.0.push(SEP);
        }
        self.0.push_str(name);
        self.0.push(SEP);
        self.0.push_str(quantity);
    }

    fn finish(self) -> Texts {
        Texts((!self.0.is_empty()).then(|| Arc::from(self.0.as_str())))
    }
}

impl std::fmt::Debug for Texts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Texts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_sorted_and_keep_the_last_of_a_repeated_name() {
        let t = Texts::try_from_pairs([("memory", "1Gi"), ("cpu", "1"), ("memory", "2Gi")])
            .expect("texts");
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [("cpu", "1"), ("memory", "2Gi")]
        );
        assert_eq!(t.get("memory"), Some("2Gi"));
        assert_eq!(t.get("gpu"), None);
        assert_eq!(t.len(), 2);
        assert_eq!(
            serde_json::to_string(&t).expect("json"),
            r#"{"cpu":"1","memory":"2Gi"}"#
        );
    }

    #[test]
    fn an_empty_list_has_no_entries_and_serializes_as_an_empty_object() {
        let t = Texts::try_from_pairs(Vec::<(&str, &str)>::new()).expect("texts");
        assert!(t.is_empty());
        assert_eq!(t.len(), 0);
        assert_eq!(t.iter().count(), 0);
        assert_eq!(serde_json::to_string(&t).expect("json"), "{}");
    }

    #[test]
    fn an_empty_quantity_is_kept() {
        let t = Texts::try_from_pairs([("cpu", ""), ("memory", "1Gi")]).expect("texts");
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [("cpu", ""), ("memory", "1Gi")]
        );
    }

    #[test]
    fn a_nul_character_is_refused_with_the_entry() {
        let e = Texts::try_from_pairs([("cpu\0x", "1")]).expect_err("nul");
        assert_eq!(
            e,
            "\"cpu\\0x\": \"1\": a resource name or quantity cannot hold a NUL character"
        );
    }

    #[test]
    fn with_quantities_shares_the_list_when_nothing_changes_and_merges_otherwise() {
        use crate::quantity::Quantity;
        let q = |t: &str| Quantity::parse(t).expect("quantity");
        let t = Texts::try_from_pairs([("cpu", "1"), ("memory", "1Gi")]).expect("texts");
        let same: ResourceList = [("cpu", q("1000m"))].into_iter().collect();
        let kept = t.with_quantities(&same);
        assert!(Arc::ptr_eq(
            kept.0.as_ref().expect("list"),
            t.0.as_ref().expect("list")
        ));
        let mut buffer = String::new();
        assert!(t.holds(&same, &mut buffer));
        let changes: ResourceList = [("cpu", q("0.5")), ("ephemeral-storage", q("1Gi"))]
            .into_iter()
            .collect();
        assert!(!t.holds(&changes, &mut buffer));
        let changed = t.with_quantities(&changes);
        assert_eq!(
            changed.iter().collect::<Vec<_>>(),
            [
                ("cpu", "500m"),
                ("ephemeral-storage", "1Gi"),
                ("memory", "1Gi")
            ]
        );
        let first = Texts::default().with_quantities(&changes);
        assert_eq!(
            first.iter().collect::<Vec<_>>(),
            [("cpu", "500m"), ("ephemeral-storage", "1Gi")]
        );
    }
}

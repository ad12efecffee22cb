//! Resource lists: the maps of resource name to quantity that policies,
//! recommendations and LimitRanges are made of.

use smallvec::SmallVec;
use std::borrow::Cow;

use crate::quantity::Quantity;

/// A resource name; `cpu` and `memory`, which nearly every list holds, are
/// static so building a list on the request path does not allocate names.
pub type ResourceName = Cow<'static, str>;

/// `name` as a [`ResourceName`], allocating only for uncommon resources.
pub fn resource_name(name: &str) -> ResourceName {
    match name {
        "cpu" => Cow::Borrowed("cpu"),
        "memory" => Cow::Borrowed("memory"),
        other => Cow::Owned(other.to_owned()),
    }
}

/// Resource name (`cpu`, `memory`, `example.com/gpu`) to quantity, in name
/// order like the API's maps.
///
/// A sorted inline vector rather than a `BTreeMap`: lists hold one to three
/// entries, and admission builds several per container on every request, so
/// this keeps them off the heap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceList(SmallVec<[(ResourceName, Quantity); 2]>);

impl ResourceList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| (**n).cmp(name))
    }

    /// The quantity of `name`.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.position(name).ok().map(|i| &self.0[i].1)
    }

    /// The quantity of `name`, to change in place.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Quantity> {
        match self.position(name) {
            Ok(i) => Some(&mut self.0[i].1),
            Err(_) => None,
        }
    }

    /// Sets `name`, replacing an earlier value.
    pub fn insert(&mut self, name: impl Into<ResourceName>, q: Quantity) {
        let name = name.into();
        match self.position(&name) {
            Ok(i) => self.0[i].1 = q,
            Err(i) => self.0.insert(i, (name, q)),
        }
    }

    /// Entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Quantity)> {
        self.0.iter().map(|(n, q)| (&**n, q))
    }

    /// Entries in name order, values mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut Quantity)> {
        self.0.iter_mut().map(|(n, q)| (&**n, q))
    }

    /// Names in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| &**n)
    }

    /// Whether the list has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many entries the list has.
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl<N: Into<ResourceName>> FromIterator<(N, Quantity)> for ResourceList {
    fn from_iter<I: IntoIterator<Item = (N, Quantity)>>(iter: I) -> Self {
        let mut list = Self::new();
        for (name, q) in iter {
            list.insert(name, q);
        }
        list
    }
}

impl<'l> IntoIterator for &'l ResourceList {
    type Item = (&'l str, &'l Quantity);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'l, (ResourceName, Quantity)>,
        fn(&'l (ResourceName, Quantity)) -> (&'l str, &'l Quantity),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(n, q)| (&**n, q))
    }
}

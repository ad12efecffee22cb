//! `status.recommendation` and `status.recommendationGroups[]`, packed into
//! one table per VPA.

use std::collections::HashMap;
use std::sync::Arc;

use super::resources::ResourceList;
use crate::quantity::{Format, Quantity};

/// One `containerRecommendations[]` entry: the input from which a
/// [`RecommendationTable`] is built (tests and the store build tables from
/// these; admission reads the table).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerRecommendation {
    /// The container it applies to.
    pub container_name: String,
    /// What requests are set to (before capping). `lowerBound`, `upperBound`
    /// and `uncappedTarget` are not kept: admission never reads them, and at
    /// 5,000 nodes per VPA they would be most of the store's memory.
    pub target: ResourceList,
}

/// A quantity packed into one `i64`: the value in milli-units shifted left by
/// two, and the print format in the low two bits (0 = no value).
///
/// Recommendations are milli-exact in practice, so 2 containers x 2
/// resources cost 32 bytes per node instead of four maps. A value that is not
/// milli-exact or is beyond +-2^61 milli-units is kept exactly in
/// [`RecommendationTable`]'s overflow map instead: nothing is rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Packed(i64);

impl Packed {
    const ABSENT: Packed = Packed(0);
    /// Tag 0 with a non-zero value: look the cell up in the overflow map.
    const OVERFLOW: Packed = Packed(4);
    const LIMIT: i64 = 1 << 61;

    fn pack(q: &Quantity) -> Option<Packed> {
        let milli = q.milli_value();
        if !(-Self::LIMIT..Self::LIMIT).contains(&milli) {
            return None;
        }
        let tag = match q.format() {
            Format::DecimalSI => 1,
            Format::BinarySI => 2,
            Format::DecimalExponent => 3,
        };
        (Quantity::from_milli(milli, q.format()) == *q).then_some(Packed((milli << 2) | tag))
    }

    fn unpack(self) -> Option<Quantity> {
        let format = match self.0 & 3 {
            1 => Format::DecimalSI,
            2 => Format::BinarySI,
            3 => Format::DecimalExponent,
            _ => return None,
        };
        Some(Quantity::from_milli(self.0 >> 2, format))
    }
}

/// The recommendations of one VPA, for every node and the aggregate, as one
/// dense table: a row per node, a column per (container, resource) seen in
/// any group. Rows are found by node name in O(1).
///
/// This layout is what keeps 100 VPAs x 5,000 nodes within tens of MiB: per
/// node it holds one map entry and one `i64` per cell.
#[derive(Clone, Debug, Default)]
pub struct RecommendationTable {
    /// (container, resource) per column, sorted so a container's resources
    /// come out in name order like the map they came from.
    columns: Box<[(Arc<str>, Arc<str>)]>,
    rows: HashMap<Arc<str>, u32>,
    aggregate: Option<u32>,
    cells: Box<[Packed]>,
    overflow: HashMap<usize, Quantity>,
    /// (row, container, why): targets that cannot be applied (negative, or
    /// unparsable in the status). Such a container has no recommendation in
    /// that row; rare, so a list.
    unusable: Box<[Unusable]>,
}

/// A container's target in one row that cannot be applied: (row,
/// container, why).
type Unusable = (u32, Arc<str>, Box<str>);

/// One row of a [`RecommendationTable`]: the recommendation for one node (or
/// the aggregate).
#[derive(Clone, Copy, Debug)]
pub struct RecommendationRow<'t> {
    table: &'t RecommendationTable,
    row: usize,
}

impl<'t> RecommendationRow<'t> {
    /// Why `container`'s target in this row cannot be applied (a negative
    /// or unparsable quantity), if so: the one place the webhook and the
    /// updater learn that a container has no usable recommendation.
    #[must_use]
    pub fn unusable(self, container: &str) -> Option<&'t str> {
        let row = u32::try_from(self.row).ok()?;
        self.table
            .unusable
            .iter()
            .find(|(r, c, _)| *r == row && &**c == container)
            .map(|(_, _, why)| &**why)
    }

    /// The target of `container` as (resource, quantity) pairs in resource
    /// name order; empty when the group has no recommendation for it.
    pub fn target<'c>(self, container: &'c str) -> impl Iterator<Item = (&'t str, Quantity)> + 'c
    where
        't: 'c,
    {
        let table = self.table;
        let start = self.row * table.columns.len();
        table
            .columns
            .iter()
            .enumerate()
            .filter(move |(_, (c, _))| &**c == container)
            .filter_map(move |(i, (_, resource))| {
                let cell = start + i;
                let packed = *table.cells.get(cell)?;
                let q = if packed == Packed::OVERFLOW {
                    table.overflow.get(&cell).cloned()
                } else {
                    packed.unpack()
                }?;
                Some((&**resource, q))
            })
    }
}

impl RecommendationTable {
    /// A table from whole groups, read as AEP-10031's admission controller
    /// reads them (`buildGroupRecommendationLookup`, kubernetes/autoscaler
    /// PR #10012 at deed6de9c6): within a group the last entry for a
    /// container wins, a group without entries is skipped, and a later
    /// group for the same value replaces an earlier one. In the aggregate
    /// the first entry wins, as upstream's `GetRecommendationForContainer`
    /// finds the first.
    pub fn new<'a>(
        groups: impl IntoIterator<Item = (&'a str, &'a [ContainerRecommendation])>,
        aggregate: Option<&[ContainerRecommendation]>,
    ) -> Self {
        let mut builder = TableBuilder::default();
        let add = |builder: &mut TableBuilder, recs: &[ContainerRecommendation]| {
            for rec in recs {
                if builder.container(&rec.container_name) {
                    for (resource, q) in &rec.target {
                        builder.set(resource, q);
                    }
                }
            }
        };
        for (node, recs) in groups {
            builder.group(Arc::from(node));
            add(&mut builder, recs);
        }
        if let Some(recs) = aggregate {
            builder.aggregate();
            add(&mut builder, recs);
        }
        builder.finish()
    }

    /// The recommendation group whose `scopeValue` is `value`.
    pub fn group(&self, value: &str) -> Option<RecommendationRow<'_>> {
        let row = *self.rows.get(value)?;
        Some(RecommendationRow {
            table: self,
            row: row as usize,
        })
    }

    /// `status.recommendation`, the DaemonSet-wide fallback.
    pub fn aggregate(&self) -> Option<RecommendationRow<'_>> {
        Some(RecommendationRow {
            table: self,
            row: self.aggregate? as usize,
        })
    }

    /// How many groups the table holds.
    pub fn group_count(&self) -> usize {
        self.rows.len()
    }
}

/// Builds a [`RecommendationTable`] one cell at a time, so the store can fill
/// it straight from parsed JSON without building a map per container.
#[derive(Debug, Default)]
pub struct TableBuilder {
    columns: Vec<(Arc<str>, Arc<str>)>,
    rows: HashMap<Arc<str>, u32>,
    aggregate: Option<u32>,
    /// (row, column, value) in arrival order; overflow cells hold an index
    /// into `exact`.
    cells: Vec<(u32, u16, Packed)>,
    /// The group whose row starts with its first entry: upstream skips a
    /// group without entries, so it must not replace an earlier one.
    pending: Option<Arc<str>>,
    /// Whether a repeated container replaces the earlier entry (groups) or
    /// is ignored (the aggregate).
    last_wins: bool,
    exact: Vec<Quantity>,
    next_row: u32,
    /// Containers already seen in the current row, and the current one's
    /// column offset into `columns` lookups.
    row_containers: Vec<Arc<str>>,
    container: Option<Arc<str>>,
    /// As in the table, rows as numbered while building.
    unusable: Vec<Unusable>,
}

impl TableBuilder {
    /// Starts the group of `node`. It replaces an earlier group of that
    /// node once it has an entry; a group without any is skipped.
    pub fn group(&mut self, node: Arc<str>) {
        self.end_row();
        self.pending = Some(node);
        self.last_wins = true;
    }

    /// Starts the aggregate row.
    pub fn aggregate(&mut self) {
        self.end_row();
        self.aggregate = Some(self.start_row());
        self.last_wins = false;
    }

    fn end_row(&mut self) {
        self.pending = None;
        self.row_containers.clear();
        self.container = None;
    }

    fn start_row(&mut self) -> u32 {
        let row = self.next_row;
        self.next_row = self.next_row.saturating_add(1);
        self.row_containers.clear();
        self.container = None;
        row
    }

    /// Starts `container`'s entry in the current row. A repeated container
    /// replaces its earlier entry in a group; in the aggregate it is
    /// ignored, and this returns false (its values are then dropped).
    pub fn container(&mut self, name: &str) -> bool {
        if let Some(node) = self.pending.take() {
            let row = self.start_row();
            self.rows.insert(node, row);
        }
        if self.row_containers.iter().any(|c| &**c == name) {
            self.container = None;
            if !self.last_wins {
                return false;
            }
            self.forget(name);
        }
        let name: Arc<str> = self
            .columns
            .iter()
            .find(|(c, _)| &**c == name)
            .map_or_else(|| Arc::from(name), |(c, _)| c.clone());
        self.row_containers.push(name.clone());
        self.container = Some(name);
        true
    }

    /// Sets one resource of the current container. A negative quantity is
    /// not a target nodescope can apply: the container is then marked
    /// unusable in this row ([`RecommendationRow::unusable`]).
    pub fn set(&mut self, resource: &str, q: &Quantity) {
        if q.sign() < 0 {
            let mut text = String::new();
            q.write_canonical(&mut text);
            self.unparsable(resource, &text, "is negative");
            return;
        }
        let Some(container) = &self.container else {
            return;
        };
        let Some(row) = self.next_row.checked_sub(1) else {
            return;
        };
        let column = match self
            .columns
            .iter()
            .position(|(c, r)| Arc::ptr_eq(c, container) && &**r == resource)
        {
            Some(i) => i,
            None => {
                let resource = self
                    .columns
                    .iter()
                    .find(|(_, r)| &**r == resource)
                    .map_or_else(|| Arc::from(resource), |(_, r)| r.clone());
                self.columns.push((container.clone(), resource));
                self.columns.len() - 1
            }
        };
        let Ok(column) = u16::try_from(column) else {
            return; // 65,536 distinct (container, resource) pairs: not a VPA
        };
        let packed = match Packed::pack(q) {
            Some(p) => p,
            None => {
                self.exact.push(q.clone());
                Packed(i64::try_from(self.exact.len() - 1).unwrap_or(0)).with_overflow_marker()
            }
        };
        self.cells.push((row, column, packed));
    }

    /// Marks the current container unusable in the current row: its
    /// target for `resource` is `text`, which `why` says cannot be applied.
    pub fn unparsable(&mut self, resource: &str, text: &str, why: &str) {
        let (Some(container), Some(row)) = (&self.container, self.next_row.checked_sub(1)) else {
            return;
        };
        if self
            .unusable
            .iter()
            .any(|(r, c, _)| *r == row && c == container)
        {
            return;
        }
        let why = format!("its {resource} target {text:?} {why}");
        self.unusable.push((row, container.clone(), why.into()));
    }

    /// Drops what the current row holds for `container`: a later entry
    /// replaces it whole, resources it lacks included.
    fn forget(&mut self, container: &str) {
        let Some(row) = self.next_row.checked_sub(1) else {
            return;
        };
        let columns = &self.columns;
        self.cells
            .retain(|(r, col, _)| *r != row || &*columns[*col as usize].0 != container);
        self.unusable
            .retain(|(r, c, _)| *r != row || &**c != container);
        self.row_containers.retain(|c| &**c != container);
    }

    /// The dense table.
    pub fn finish(self) -> RecommendationTable {
        let mut order: Vec<usize> = (0..self.columns.len()).collect();
        order.sort_by(|&a, &b| self.columns[a].cmp(&self.columns[b]));
        let mut position = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            position[old] = new;
        }
        let width = order.len();
        // Only rows still referenced are kept (a replaced group's row is
        // dropped), renumbered densely.
        let mut live: Vec<Option<u32>> = vec![None; self.next_row as usize];
        let mut count = 0u32;
        let mut renumber = |row: u32| {
            let slot = &mut live[row as usize];
            *slot.get_or_insert_with(|| {
                count += 1;
                count - 1
            })
        };
        let rows: HashMap<Arc<str>, u32> = self
            .rows
            .into_iter()
            .map(|(node, row)| (node, renumber(row)))
            .collect();
        let aggregate = self.aggregate.map(&mut renumber);
        let mut cells = vec![Packed::ABSENT; count as usize * width].into_boxed_slice();
        let mut overflow = HashMap::new();
        for (row, column, packed) in self.cells {
            let Some(Some(row)) = live.get(row as usize) else {
                continue;
            };
            let cell = *row as usize * width + position[column as usize];
            if let Some(index) = packed.overflow_index() {
                if let Some(q) = self.exact.get(index) {
                    overflow.insert(cell, q.clone());
                    cells[cell] = Packed::OVERFLOW;
                }
            } else {
                cells[cell] = packed;
            }
        }
        let columns = order.iter().map(|&i| self.columns[i].clone()).collect();
        let unusable = self
            .unusable
            .into_iter()
            .filter_map(|(row, c, why)| Some(((*live.get(row as usize)?)?, c, why)))
            .collect();
        RecommendationTable {
            columns,
            rows,
            aggregate,
            cells,
            overflow,
            unusable,
        }
    }
}

impl Packed {
    /// Builder-only encoding of an index into `exact`: tag 0, value + 1, so
    /// it is never confused with [`Packed::ABSENT`].
    fn with_overflow_marker(self) -> Packed {
        Packed((self.0 + 1) << 2)
    }

    fn overflow_index(self) -> Option<usize> {
        (self.0 & 3 == 0 && self.0 != 0).then(|| ((self.0 >> 2) - 1) as usize)
    }
}

#[cfg(test)]
#[path = "recommendations_tests.rs"]
mod tests;

//! Tests of the recommendation table.

use super::*;

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

fn rec(container: &str, target: &[(&str, &str)]) -> ContainerRecommendation {
    ContainerRecommendation {
        container_name: container.to_owned(),
        target: target
            .iter()
            .map(|(r, v)| ((*r).to_owned(), q(v)))
            .collect(),
    }
}

fn printed(row: RecommendationRow<'_>, container: &str) -> Vec<(String, String)> {
    row.target(container)
        .map(|(r, v)| (r.to_owned(), v.to_string()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn values_come_back_exactly_with_their_format_packed_or_not() {
    // 100n and 2^62 m are not milli-exact in an i64: they take the
    // overflow path and must still print as they were written.
    let recs = [rec(
        "c",
        &[
            ("cpu", "100n"),
            ("memory", "180Mi"),
            ("example.com/big", "4611686018427387904"),
            ("example.com/exp", "12e6"),
            ("ephemeral-storage", "1.5Gi"),
        ],
    )];
    let table = RecommendationTable::new([("n1", &recs[..])], None);
    let row = table.group("n1").unwrap_or_else(|| panic!("no row"));
    assert_eq!(
        printed(row, "c"),
        pairs(&[
            ("cpu", "100n"),
            ("ephemeral-storage", "1536Mi"),
            ("example.com/big", "4611686018427387904"),
            ("example.com/exp", "12e6"),
            ("memory", "180Mi"),
        ])
    );
    assert_eq!(table.overflow.len(), 2);
}

#[test]
fn groups_may_differ_in_containers_and_the_last_entry_for_a_container_wins() {
    // Upstream's buildGroupRecommendationLookup fills a map by container
    // name, so a later entry replaces the earlier one whole: its memory
    // goes with it.
    let a = [
        rec("x", &[("cpu", "1"), ("memory", "1Gi")]),
        rec("x", &[("cpu", "2")]),
    ];
    let b = [rec("y", &[("memory", "1Gi")])];
    let table = RecommendationTable::new([("a", &a[..]), ("b", &b[..])], None);
    let row = |n: &str| table.group(n).unwrap_or_else(|| panic!("no row {n}"));
    assert_eq!(printed(row("a"), "x"), pairs(&[("cpu", "2")]));
    assert_eq!(printed(row("a"), "y"), pairs(&[]));
    assert_eq!(printed(row("b"), "y"), pairs(&[("memory", "1Gi")]));
    assert_eq!(printed(row("b"), "x"), pairs(&[]));
    assert!(table.group("c").is_none());
    assert!(table.aggregate().is_none());
}

#[test]
fn in_the_aggregate_the_first_entry_for_a_container_wins() {
    let agg = [rec("x", &[("cpu", "1")]), rec("x", &[("cpu", "2")])];
    let table = RecommendationTable::new([], Some(&agg[..]));
    let row = table.aggregate().unwrap_or_else(|| panic!("no aggregate"));
    assert_eq!(printed(row, "x"), pairs(&[("cpu", "1")]));
}

#[test]
fn a_later_empty_group_for_the_same_value_is_skipped_not_a_replacement() {
    let full = [rec("x", &[("cpu", "3")])];
    let table = RecommendationTable::new([("a", &full[..]), ("a", &[][..]), ("b", &[][..])], None);
    let row = table.group("a").unwrap_or_else(|| panic!("no row"));
    assert_eq!(printed(row, "x"), pairs(&[("cpu", "3")]));
    assert!(
        table.group("b").is_none(),
        "a group without entries is no group"
    );
    assert_eq!(table.group_count(), 1);
}

#[test]
fn a_later_entry_replaces_an_unusable_one_and_an_unusable_one_replaces_a_value() {
    let mut builder = TableBuilder::default();
    builder.group(Arc::from("a"));
    assert!(builder.container("x"));
    builder.unparsable("cpu", "lots", "does not parse");
    assert!(builder.container("x"));
    builder.set("cpu", &q("2"));
    builder.group(Arc::from("b"));
    assert!(builder.container("x"));
    builder.set("cpu", &q("2"));
    assert!(builder.container("x"));
    builder.unparsable("cpu", "lots", "does not parse");
    let table = builder.finish();
    let a = table.group("a").unwrap_or_else(|| panic!("no row a"));
    assert_eq!(
        (a.unusable("x"), printed(a, "x")),
        (None, pairs(&[("cpu", "2")]))
    );
    let b = table.group("b").unwrap_or_else(|| panic!("no row b"));
    assert_eq!(
        (b.unusable("x"), printed(b, "x")),
        (Some("its cpu target \"lots\" does not parse"), pairs(&[]))
    );
}

#[test]
fn a_later_group_for_the_same_node_replaces_the_earlier_one() {
    let old = [rec("x", &[("cpu", "1"), ("memory", "1Gi")])];
    let new = [rec("x", &[("cpu", "3")])];
    let agg = [rec("x", &[("cpu", "250m")])];
    let table = RecommendationTable::new([("a", &old[..]), ("a", &new[..])], Some(&agg));
    let row = table.group("a").unwrap_or_else(|| panic!("no row"));
    assert_eq!(printed(row, "x"), pairs(&[("cpu", "3")]));
    let aggregate = table.aggregate().unwrap_or_else(|| panic!("no aggregate"));
    assert_eq!(printed(aggregate, "x"), pairs(&[("cpu", "250m")]));
    assert_eq!(table.group_count(), 1);
    // The replaced row is dropped: one node row plus the aggregate.
    assert_eq!(table.cells.len(), 2 * table.columns.len());
}

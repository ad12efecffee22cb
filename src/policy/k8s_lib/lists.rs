//! The Kubernetes list library: `isSorted`, `sum`, `min`, `max`, `indexOf`
//! and `lastIndexOf` on lists, as in `k8s.io/apiserver/pkg/cel/library`.
//!
//! Kubernetes type-checks `list<T>` at compile time; cel has no checker, so
//! the element types are checked here at run time and a list of the wrong
//! element type fails with a no-such-overload error naming the function.

use super::take_args;
use cel::common::types::{CelInt, Kind, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use std::cmp::Ordering;

/// Registers the list functions on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

/// Kinds Kubernetes declares `isSorted`, `min` and `max` for.
const COMPARABLE: &[Kind] = &[
    Kind::Int,
    Kind::UInt,
    Kind::Double,
    Kind::Boolean,
    Kind::Duration,
    Kind::Timestamp,
    Kind::String,
    Kind::Bytes,
];

/// Kinds Kubernetes declares `sum` for.
const SUMMABLE: &[Kind] = &[Kind::Int, Kind::UInt, Kind::Double, Kind::Duration];

/// The elements of the list `list`, each checked to be of one of `kinds`
/// and all of the same type, as a `list<T>` would be after type-checking.
fn elements<'b, 'v>(
    function: &str,
    list: &'b (dyn Val + 'v),
    kinds: &[Kind],
) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let iterable = list
        .as_iterable()
        .ok_or_else(|| ExecutionError::no_such_member_overload(function, vec![type_name(list)]))?;
    let mut items = iterable.iter();
    let mut out: Vec<&'b (dyn Val + 'v)> = Vec::new();
    while let Some(item) = items.next() {
        let wrong_kind = !kinds.contains(&item.get_type().kind());
        let mixed = out.first().is_some_and(|f| f.get_type() != item.get_type());
        if wrong_kind || mixed {
            return Err(ExecutionError::function_error(
                function,
                format!("not supported on a list containing {}", type_name(item)),
            ));
        }
        out.push(item);
    }
    Ok(out)
}

fn type_name(val: &dyn Val) -> String {
    val.get_type().name().to_owned()
}

fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| ExecutionError::function_error(function, "elements are not comparable"))?
        .compare(b)
}

/// `list.isSorted()`: true when no element is greater than the next.
fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = take_args(args)?;
    let items = elements("isSorted", list.as_ref(), COMPARABLE)?;
    for pair in items.windows(2) {
        if compare("isSorted", pair[0], pair[1])? == Ordering::Greater {
            return Ok(CowVal::owned(cel::common::types::CelBool::from(false)));
        }
    }
    Ok(CowVal::owned(cel::common::types::CelBool::from(true)))
}

/// `list.sum()`: the sum of the elements, `0` for an empty list (Kubernetes
/// knows the element type statically and returns `0u`/`0.0`/`0s`; without a
/// checker an empty list has no type, so it is the int `0`).
fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = take_args(args)?;
    let items = elements("sum", list.as_ref(), SUMMABLE)?;
    let mut iter = items.into_iter();
    let Some(first) = iter.next() else {
        return Ok(CowVal::owned(CelInt::from(0)));
    };
    let mut acc: Box<dyn Val + 'v> = first.clone_as_boxed();
    for item in iter {
        let adder = acc
            .as_adder()
            .ok_or_else(|| ExecutionError::function_error("sum", "elements cannot be added"))?;
        let next = adder.add(item)?.into_owned();
        acc = next;
    }
    Ok(CowVal::Owned(acc))
}

/// `list.min()`; an error on an empty list.
fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("min", args, Ordering::Less)
}

/// `list.max()`; an error on an empty list.
fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("max", args, Ordering::Greater)
}

/// The element that compares `prefer` against every other; the first of
/// equal ones.
fn extreme<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    prefer: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list] = take_args(args)?;
    let items = elements(function, list.as_ref(), COMPARABLE)?;
    let mut best: Option<&(dyn Val + 'v)> = None;
    for item in items {
        best = match best {
            Some(current) if compare(function, item, current)? != prefer => Some(current),
            _ => Some(item),
        };
    }
    let best =
        best.ok_or_else(|| ExecutionError::function_error(function, "called on empty list"))?;
    Ok(CowVal::Owned(best.clone_as_boxed()))
}

/// `list.indexOf(x)`: the first index of an element equal to `x`, or -1.
fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("indexOf", args, false)
}

/// `list.lastIndexOf(x)`: the last index of an element equal to `x`, or -1.
fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position("lastIndexOf", args, true)
}

fn position<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, needle] = take_args(args)?;
    let iterable = list.as_iterable().ok_or_else(|| {
        ExecutionError::no_such_member_overload(function, vec![type_name(list.as_ref())])
    })?;
    let mut items = iterable.iter();
    let mut found: i64 = -1;
    let mut index: i64 = 0;
    while let Some(item) = items.next() {
        if item.equals(needle.as_ref()) {
            found = index;
            if !last {
                break;
            }
        }
        index += 1;
    }
    Ok(CowVal::owned(CelInt::from(found)))
}

#[cfg(test)]
mod tests {
    use crate::policy::k8s_lib::test_support::{assert_error, assert_true};

    #[test]
    fn is_sorted_follows_the_kubernetes_examples() {
        assert_true("[1, 2, 3].isSorted()");
        assert_true("['a', 'b', 'b', 'c'].isSorted()");
        assert_true("![2.0, 1.0].isSorted()");
        assert_true("[1].isSorted()");
        assert_true("[].isSorted()");
        assert_true("[b'a', b'b'].isSorted() && [1u, 2u].isSorted()");
    }

    #[test]
    fn sum_adds_numbers_and_durations() {
        assert_true("[1, 3].sum() == 4");
        assert_true("[1.0, 3.0].sum() == 4.0");
        assert_true("[1u, 3u].sum() == 4u");
        assert_true("[duration('1m'), duration('1s')].sum() == duration('1m1s')");
        assert_true("[].sum() == 0");
    }

    #[test]
    fn sum_rejects_strings_and_mixed_lists() {
        assert_error("['a', 'b'].sum()", "sum");
        assert_error("[1, 2.0].sum()", "sum");
    }

    #[test]
    fn min_and_max_pick_the_extreme_element() {
        assert_true("[1, 3].min() == 1");
        assert_true("[1, 3].max() == 3");
        assert_true("[1].min() == 1");
        assert_true("([0] + []).min() == 0");
        assert_true("['b', 'a', 'c'].max() == 'c'");
        assert_true("[true, false].min() == false");
    }

    #[test]
    fn min_and_max_of_an_empty_list_are_errors() {
        assert_error("[].min()", "called on empty list");
        assert_error("[].max()", "called on empty list");
    }

    #[test]
    fn index_of_and_last_index_of_find_equal_elements() {
        assert_true("[1, 2, 3].indexOf(2) == 1");
        assert_true("[1, 2, 2, 3].indexOf(2) == 1");
        assert_true("['a', 'b', 'b', 'c'].lastIndexOf('b') == 2");
        assert_true("[1.0].indexOf(1.1) == -1");
        assert_true("[].indexOf('string') == -1");
        assert_true("[b'x', b'y'].lastIndexOf(b'y') == 1");
    }

    #[test]
    fn the_string_index_of_of_the_strings_extension_still_works() {
        assert_true("'hello'.indexOf('l') == 2");
        assert_true("'hello'.lastIndexOf('l') == 3");
    }
}

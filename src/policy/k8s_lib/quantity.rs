//! The Kubernetes quantity library: `quantity(string)`,
//! `isQuantity(string)` and the `add`, `sub`, `compareTo`,
//! `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`,
//! `sign` and `isInteger` methods.
//!
//! The arithmetic is [`crate::quantity::Quantity`]'s, which is exact like
//! apimachinery's; where Go would fall back to arbitrary precision, an
//! overflowing `add`/`sub` is an evaluation error here instead of a wrong
//! number. `mul`, `div` and `divInt` (added in Kubernetes 1.33) are not
//! offered yet.

use super::{add_named_type, opaque_val};
use crate::quantity::{Format, Quantity};
use cel::common::types::{CelBool, CelDouble, CelInt, CelString, Type};
use cel::{DeclarationError, Env, ExecutionError};
use std::cmp::Ordering;

/// The CEL type of quantities, named as in Kubernetes.
pub static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

/// A quantity value in CEL. Equality is numeric: `quantity('1k') ==
/// quantity('1000')`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CelQuantity(pub Quantity);

opaque_val!(CelQuantity, &QUANTITY_TYPE);

/// Registers the quantity type and functions on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    add_named_type(env, &QUANTITY_TYPE)?;
    cel::add_overload!(env, fn quantity_from_string: (CelString) -> Result<CelQuantity>,
        name = "quantity", id = "string_to_quantity")?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool,
        name = "isQuantity", id = "is_quantity_string")?;
    cel::add_member_overload!(env, fn add: (CelQuantity, CelQuantity) -> Result<CelQuantity>,
        id = "quantity_add")?;
    cel::add_member_overload!(env, fn add_int: (CelQuantity, CelInt) -> Result<CelQuantity>,
        name = "add", id = "quantity_add_int")?;
    cel::add_member_overload!(env, fn sub: (CelQuantity, CelQuantity) -> Result<CelQuantity>,
        id = "quantity_sub")?;
    cel::add_member_overload!(env, fn sub_int: (CelQuantity, CelInt) -> Result<CelQuantity>,
        name = "sub", id = "quantity_sub_int")?;
    cel::add_member_overload!(env, fn compare_to: (CelQuantity, CelQuantity) -> CelInt,
        id = "quantity_compare_to")?;
    cel::add_member_overload!(env, fn is_greater_than: (CelQuantity, CelQuantity) -> CelBool,
        id = "quantity_is_greater_than")?;
    cel::add_member_overload!(env, fn is_less_than: (CelQuantity, CelQuantity) -> CelBool,
        id = "quantity_is_less_than")?;
    cel::add_member_overload!(env, fn as_integer: (CelQuantity) -> Result<CelInt>,
        id = "quantity_get_int")?;
    cel::add_member_overload!(env, fn as_approximate_float: (CelQuantity) -> CelDouble,
        id = "quantity_get_float")?;
    cel::add_member_overload!(env, fn is_integer: (CelQuantity) -> CelBool,
        id = "quantity_is_integer")?;
    // Kubernetes documents `q.sign()` but declares `sign(q)`; accept both
    // so policies written either way load.
    cel::add_member_overload!(env, fn sign: (CelQuantity) -> CelInt, id = "quantity_sign_member")?;
    cel::add_overload!(env, fn sign: (CelQuantity) -> CelInt, id = "quantity_sign")?;
    Ok(())
}

fn quantity_from_string(raw: &CelString<'_>) -> Result<CelQuantity, ExecutionError> {
    Quantity::parse(raw.inner())
        .map(CelQuantity)
        .map_err(|e| ExecutionError::function_error("quantity", e))
}

fn is_quantity(raw: &CelString<'_>) -> CelBool {
    CelBool::from(Quantity::parse(raw.inner()).is_ok())
}

fn overflow(function: &str, a: &Quantity, b: &Quantity) -> ExecutionError {
    ExecutionError::function_error(
        function,
        format!("{a} and {b} cannot be combined without losing precision"),
    )
}

fn add(q: &CelQuantity, other: &CelQuantity) -> Result<CelQuantity, ExecutionError> {
    q.0.checked_add(&other.0)
        .map(CelQuantity)
        .ok_or_else(|| overflow("add", &q.0, &other.0))
}

/// An int operand is a plain number, as `resource.NewQuantity(n,
/// DecimalExponent)` makes it.
fn int_quantity(n: &CelInt) -> CelQuantity {
    CelQuantity(Quantity::from_i64(*n.inner(), Format::DecimalExponent))
}

fn add_int(q: &CelQuantity, n: &CelInt) -> Result<CelQuantity, ExecutionError> {
    add(q, &int_quantity(n))
}

fn sub(q: &CelQuantity, other: &CelQuantity) -> Result<CelQuantity, ExecutionError> {
    q.0.checked_sub(&other.0)
        .map(CelQuantity)
        .ok_or_else(|| overflow("sub", &q.0, &other.0))
}

fn sub_int(q: &CelQuantity, n: &CelInt) -> Result<CelQuantity, ExecutionError> {
    sub(q, &int_quantity(n))
}

fn compare_to(q: &CelQuantity, other: &CelQuantity) -> CelInt {
    CelInt::from(match q.0.cmp(&other.0) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    })
}

fn is_greater_than(q: &CelQuantity, other: &CelQuantity) -> CelBool {
    CelBool::from(q.0 > other.0)
}

fn is_less_than(q: &CelQuantity, other: &CelQuantity) -> CelBool {
    CelBool::from(q.0 < other.0)
}

/// The exact value as an int; an error when fractional or beyond 64 bits,
/// rather than a silently rounded number.
fn as_integer(q: &CelQuantity) -> Result<CelInt, ExecutionError> {
    q.0.as_i64().map(CelInt::from).ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })
}

fn as_approximate_float(q: &CelQuantity) -> CelDouble {
    CelDouble::from(q.0.as_approximate_f64())
}

/// Whether `asInteger` would succeed (Kubernetes' definition, which also
/// requires the value to fit in 64 bits).
fn is_integer(q: &CelQuantity) -> CelBool {
    CelBool::from(q.0.as_i64().is_some())
}

fn sign(q: &CelQuantity) -> CelInt {
    CelInt::from(i64::from(q.0.sign()))
}

#[cfg(test)]
mod tests {
    use crate::policy::k8s_lib::test_support::{assert_error, assert_true};

    #[test]
    fn quantity_parses_what_kubernetes_accepts() {
        assert_true("isQuantity('1.3G') && isQuantity('1.3Gi') && isQuantity('10000k')");
        assert_true("!isQuantity('1,3G') && !isQuantity('200K')");
        assert_true("!isQuantity('Three')");
        assert_true("type(quantity('1.5G')) == kubernetes.Quantity");
        assert_error("quantity('200K')", "quantity");
    }

    /// apimachinery's `parseQuantityString` turns an empty numerator into
    /// "0" ("if we stripped all numerator positions, always return 0"), so
    /// `Mi` is the quantity zero there, and so it is here.
    #[test]
    fn a_suffix_without_a_number_is_zero_as_in_apimachinery() {
        assert_true("isQuantity('Mi')");
        assert_true("quantity('Mi').isInteger() && quantity('Mi').sign() == 0");
    }

    #[test]
    fn as_integer_and_is_integer_agree() {
        assert_true("quantity('50k').asInteger() == 50000");
        assert_true("quantity('50000000G').isInteger()");
        assert_true("quantity('50k').isInteger()");
        assert_true("!quantity('9999999999999999999999999999999999999G').isInteger()");
        assert_error(
            "quantity('9999999999999999999999999999999999999G').asInteger()",
            "cannot convert value to integer",
        );
        assert_true("!quantity('1.5').isInteger()");
        assert_error(
            "quantity('100m').asInteger()",
            "cannot convert value to integer",
        );
    }

    #[test]
    fn as_approximate_float_converts_after_arithmetic() {
        assert_true("quantity('50k').sub(20000).asApproximateFloat() == 30000.0");
        assert_true("quantity('1.5').asApproximateFloat() == 1.5");
    }

    #[test]
    fn add_and_sub_take_quantities_or_ints() {
        assert_true("quantity('50k').add(quantity('20k')) == quantity('70k')");
        assert_true("quantity('50k').add(20) == quantity('50020')");
        assert_true("quantity('50k').sub(quantity('20k')) == quantity('30k')");
        assert_true("quantity('50k').sub(20000) == quantity('30k')");
        assert_true("quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')");
    }

    #[test]
    fn comparisons_are_numeric_across_suffixes() {
        assert_true("quantity('200M').compareTo(quantity('0.2G')) == 0");
        assert_true("quantity('50M').compareTo(quantity('50Mi')) == -1");
        assert_true("quantity('50Mi').compareTo(quantity('50M')) == 1");
        assert_true("quantity('150Mi').isGreaterThan(quantity('100Mi'))");
        assert_true("!quantity('50Mi').isGreaterThan(quantity('100Mi'))");
        assert_true("quantity('50M').isLessThan(quantity('100M'))");
        assert_true("!quantity('100M').isLessThan(quantity('50M'))");
        assert_true("quantity('100Mi').isLessThan(quantity('1Gi'))");
        assert_true("quantity('1k') == quantity('1000')");
    }

    #[test]
    fn sign_works_as_a_method_and_as_a_function() {
        assert_true("quantity('50k').sign() == 1");
        assert_true("quantity('-1m').sign() == -1");
        assert_true("sign(quantity('0')) == 0");
    }
}

//! A lazy CEL view over `serde_json` values, and the cost meter it charges.
//!
//! Admission objects are large (a pod with `managedFields` is several KB) and a
//! policy reads a handful of fields, so objects are not deep-copied into CEL
//! values per request: a JSON object is wrapped in [`JsonObject`], which
//! converts a field only when an expression reads it. Strings are borrowed,
//! never copied. Arrays are converted when read, shallowly: the objects they
//! hold stay lazy views. JSON integers become CEL `int` (`uint` only above
//! `i64::MAX`), so `object.spec.replicas + 1` works.
//!
//! Every conversion charges the per-evaluation [`budget`], which is how
//! runaway expressions (nested comprehensions over large lists) are bounded:
//! cel 0.15 has no cost tracking of its own.

use super::request::{Fields, Json, Shape};
use cel::common::traits::{Container, Indexer, Iterable, Iterator as CelIterator, Sizer, Zeroer};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelNull, CelString, CelUInt, Kind, Type, MAP_TYPE,
};
use cel::common::value::{CowVal, Val};
use cel::ExecutionError;
use serde_json::Number;
use std::sync::OnceLock;

/// Converts one JSON value into a CEL value.
///
/// Scalars become built-in values (a string borrows the JSON text), objects a
/// lazy [`JsonObject`], arrays a CEL list of converted elements.
pub(crate) fn to_val(value: Json<'_>) -> Result<Box<dyn Val + '_>, ExecutionError> {
    budget::charge(1)?;
    Ok(match value.shape() {
        Shape::Invalid => {
            return Err(ExecutionError::function_error(
                "json",
                "the request body has a value that is not valid JSON text (a lone surrogate escape or an out-of-range number)",
            ))
        }
        Shape::Null => Box::new(CelNull),
        Shape::Bool(b) => Box::new(CelBool::from(b)),
        Shape::Number(n) => number(n),
        Shape::String(s) => Box::new(CelString::from(s)),
        Shape::Array(items) => {
            let list = (0..items.len())
                .filter_map(|i| items.get(i))
                .map(to_val)
                .collect::<Result<Vec<_>, _>>()?;
            Box::new(CelList::from(list))
        }
        Shape::Object(fields) => Box::new(JsonObject::new(fields)),
    })
}

/// JSON integers are CEL `int`, as in Kubernetes; only values above
/// `i64::MAX` become `uint`, and anything with a fraction `double`.
fn number(n: &Number) -> Box<dyn Val> {
    if let Some(i) = n.as_i64() {
        Box::new(CelInt::from(i))
    } else if let Some(u) = n.as_u64() {
        Box::new(CelUInt::from(u))
    } else {
        Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
    }
}

/// A CEL `map` backed by a borrowed JSON object; fields convert on access.
///
/// A field whose JSON value is `null` is treated as absent, as the apiserver
/// does for typed objects: `has(object.metadata.creationTimestamp)` is false
/// when the field is `null`.
#[derive(Debug)]
pub(crate) struct JsonObject<'v> {
    fields: Fields<'v>,
    /// The CEL `request` variable: the AdmissionRequest without the objects
    /// (they are `object`/`oldObject`) and without an empty `subResource` /
    /// `requestSubResource`, which the apiserver leaves absent.
    request: bool,
    /// The keys as CEL strings, built on the first iteration: comprehensions
    /// borrow their elements, so they must live somewhere.
    keys: OnceLock<Vec<CelString<'v>>>,
}

impl<'v> JsonObject<'v> {
    pub(crate) fn new(fields: Fields<'v>) -> Self {
        JsonObject {
            fields,
            request: false,
            keys: OnceLock::new(),
        }
    }

    /// The `request` variable over the AdmissionRequest's fields.
    pub(crate) fn request(fields: Fields<'v>) -> Self {
        JsonObject {
            request: true,
            ..JsonObject::new(fields)
        }
    }

    fn hidden(&self, key: &str, value: Json<'_>) -> bool {
        value.is_null()
            || (self.request
                && match key {
                    "object" | "oldObject" => true,
                    "subResource" | "requestSubResource" => {
                        value.as_str().is_some_and(str::is_empty)
                    }
                    _ => false,
                })
    }

    fn present(&self) -> impl std::iter::Iterator<Item = (&'v str, Json<'v>)> + '_ {
        self.fields.iter().filter(|(k, v)| !self.hidden(k, *v))
    }

    /// The field `key` as CEL sees it (absent when null or hidden), without
    /// charging the meter.
    pub(crate) fn field(&self, key: &str) -> Option<Json<'v>> {
        self.fields.get(key).filter(|v| !self.hidden(key, *v))
    }

    fn lookup(&self, idx: &dyn Val) -> Result<Option<Json<'v>>, ExecutionError> {
        let key =
            idx.downcast_ref::<CelString>()
                .ok_or_else(|| ExecutionError::UnexpectedType {
                    got: idx.get_type().name().to_owned(),
                    want: "string".to_owned(),
                })?;
        budget::charge(1)?;
        Ok(self.field(key.inner()))
    }
}

impl<'v> Val for JsonObject<'v> {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    /// Compares with any CEL map, key by key. A built-in map on the *left*
    /// (`{} == object.x`) only equals built-in maps: that is cel-rust's side.
    fn equals(&self, other: &dyn Val) -> bool {
        if other.get_type().kind() != Kind::Map {
            return false;
        }
        let (Some(sizer), Some(indexer)) = (other.as_sizer(), other.as_indexer()) else {
            return false;
        };
        if *sizer.size().inner() != self.present().count() as i64 {
            return false;
        }
        self.present().all(|(k, v)| {
            let key = CelString::from(k);
            match (indexer.get(&key), to_val(v)) {
                (Ok(theirs), Ok(mine)) => mine.equals(theirs.as_ref()),
                _ => false,
            }
        })
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(JsonObject {
            request: self.request,
            ..JsonObject::new(self.fields)
        })
    }
}

impl<'v> Indexer for JsonObject<'v> {
    fn get<'b, 'w>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        match self.lookup(idx)? {
            Some(value) => Ok(CowVal::Owned(to_val(value)?)),
            None => Err(ExecutionError::no_such_key(
                idx.downcast_ref::<CelString>()
                    .map(|s| s.inner())
                    .unwrap_or("?"),
            )),
        }
    }

    fn steal<'w>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Container for JsonObject<'_> {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(self.lookup(value)?.is_some())
    }
}

impl<'v> Iterable for JsonObject<'v> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn CelIterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        let keys = self
            .keys
            .get_or_init(|| self.present().map(|(k, _)| CelString::from(k)).collect());
        // Iterating cannot fail here; the charge is collected by the next
        // field access, which sees the exhausted meter.
        let _ = budget::charge(keys.len() as u64);
        Box::new(KeyIterator { keys, pos: 0 })
    }
}

impl Sizer for JsonObject<'_> {
    fn size(&self) -> CelInt {
        CelInt::from(self.present().count() as i64)
    }
}

impl Zeroer for JsonObject<'_> {
    fn is_zero_value(&self) -> bool {
        self.present().next().is_none()
    }
}

/// Iterates the keys of a [`JsonObject`], as map comprehensions do.
struct KeyIterator<'b, 'v> {
    keys: &'b [CelString<'v>],
    pos: usize,
}

impl<'b, 'v: 'w, 'w> CelIterator<'b, 'w> for KeyIterator<'b, 'v> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'w)> {
        let key = self.keys.get(self.pos)?;
        self.pos += 1;
        Some(key)
    }
}

/// The per-evaluation cost meter.
///
/// cel 0.15 has no cost model, so nodescope bounds evaluation by what it
/// controls: every read of request data (a field, an array element, a map key
/// iterated) costs one unit, and a wall-clock deadline is checked every
/// [`CLOCK_EVERY`] units and between expressions. A comprehension that loops
/// over input data pays per element it touches, so nested loops over large
/// lists run out of budget instead of running away. The meter is thread-local
/// because evaluation is synchronous and `Val` implementations must stay
/// `Send + Sync` without carrying a reference to it.
pub(crate) mod budget {
    use cel::ExecutionError;
    use std::cell::Cell;
    use std::time::Instant;

    /// How often (in units) the wall clock is read: reading it on every field
    /// access would cost more than the access.
    const CLOCK_EVERY: u64 = 256;

    /// Why evaluation was stopped.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Exhaustion {
        /// More data accesses than the per-evaluation budget.
        Cost,
        /// The request's deadline passed.
        Deadline,
    }

    #[derive(Clone, Copy)]
    struct Meter {
        remaining: u64,
        until_clock: u64,
        deadline: Instant,
        exhausted: Option<Exhaustion>,
    }

    thread_local! {
        static CURRENT: Cell<Option<Meter>> = const { Cell::new(None) };
    }

    /// Installs a meter for the current thread; the previous one (if any) is
    /// restored when the guard drops.
    pub(crate) struct Guard {
        previous: Option<Meter>,
    }

    impl Guard {
        pub(crate) fn install(units: u64, deadline: Instant) -> Guard {
            let meter = Meter {
                remaining: units,
                until_clock: 0,
                deadline,
                exhausted: None,
            };
            Guard {
                previous: CURRENT.with(|c| c.replace(Some(meter))),
            }
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.previous));
        }
    }

    /// Charges `units` to the current meter; without one, nothing is bounded.
    pub(crate) fn charge(units: u64) -> Result<(), ExecutionError> {
        CURRENT.with(|c| {
            let Some(mut meter) = c.get() else {
                return Ok(());
            };
            if meter.exhausted.is_none() {
                if meter.remaining < units {
                    meter.exhausted = Some(Exhaustion::Cost);
                } else {
                    meter.remaining -= units;
                    if meter.until_clock <= units {
                        meter.until_clock = CLOCK_EVERY;
                        if Instant::now() >= meter.deadline {
                            meter.exhausted = Some(Exhaustion::Deadline);
                        }
                    } else {
                        meter.until_clock -= units;
                    }
                }
            }
            c.set(Some(meter));
            match meter.exhausted {
                None => Ok(()),
                Some(_) => Err(ExecutionError::function_error(
                    "cost",
                    "evaluation budget exhausted",
                )),
            }
        })
    }

    /// The units left on the current meter (`u64::MAX` without one).
    pub(crate) fn remaining() -> u64 {
        CURRENT.with(|c| c.get().map_or(u64::MAX, |meter| meter.remaining))
    }

    /// Gives back `units` charged by work whose result was thrown away and
    /// that is done again; an exhausted meter stays exhausted.
    pub(crate) fn refund(units: u64) {
        CURRENT.with(|c| {
            if let Some(mut meter) = c.get() {
                if meter.exhausted.is_none() {
                    meter.remaining = meter.remaining.saturating_add(units);
                    c.set(Some(meter));
                }
            }
        });
    }

    /// Whether (and why) the current meter ran out, checking the deadline now.
    pub(crate) fn exhausted() -> Option<Exhaustion> {
        CURRENT.with(|c| {
            let mut meter = c.get()?;
            if meter.exhausted.is_none() && Instant::now() >= meter.deadline {
                meter.exhausted = Some(Exhaustion::Deadline);
                c.set(Some(meter));
            }
            meter.exhausted
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::{Context, Env, Value as CelValue};
    use serde_json::{json, Value};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn eval(expr: &str, object: &Value) -> Result<CelValue, ExecutionError> {
        let env = Arc::new(Env::stdlib());
        let program = env.compile(expr).expect("test expression parses");
        let mut ctx = Context::with_env(env);
        ctx.add_variable_as_val("object", to_val(Json::Value(object))?);
        program.execute(&ctx)
    }

    #[test]
    fn json_integers_are_cel_ints_so_arithmetic_works() {
        let object = json!({"spec": {"replicas": 2}});
        assert_eq!(
            eval("object.spec.replicas + 1 == 3", &object),
            Ok(CelValue::Bool(true))
        );
    }

    #[test]
    fn null_fields_are_absent_for_has() {
        let object = json!({"metadata": {"creationTimestamp": null, "name": "a"}});
        assert_eq!(
            eval(
                "!has(object.metadata.creationTimestamp) && has(object.metadata.name)",
                &object
            ),
            Ok(CelValue::Bool(true))
        );
    }

    #[test]
    fn maps_support_in_size_comprehensions_and_equality() {
        let object = json!({"labels": {"a": "1", "b": "2"}, "copy": {"a": "1", "b": "2"}});
        for expr in [
            "'a' in object.labels",
            "size(object.labels) == 2",
            "object.labels.all(k, k in ['a', 'b'])",
            "object.labels.exists(k, object.labels[k] == '2')",
            "object.labels == object.copy",
            "object.labels == {'a': '1', 'b': '2'}",
            "type(object.labels) == map",
        ] {
            assert_eq!(eval(expr, &object), Ok(CelValue::Bool(true)), "{expr}");
        }
    }

    #[test]
    fn arrays_of_objects_are_lists_of_lazy_objects() {
        let object = json!({"containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}, {"name": "b"}]});
        assert_eq!(
            eval(
                "object.containers.map(c, c.name) == ['a', 'b'] && object.containers.exists(c, has(c.resources))",
                &object
            ),
            Ok(CelValue::Bool(true))
        );
    }

    #[test]
    fn a_missing_field_is_a_no_such_key_error() {
        let object = json!({"spec": {}});
        assert_eq!(
            eval("object.spec.scope == 'node'", &object),
            Err(ExecutionError::no_such_key("scope"))
        );
    }

    #[test]
    fn the_meter_stops_nested_loops_over_large_lists() {
        let items: Vec<i64> = (0..2000).collect();
        let object = json!({ "items": items });
        let _guard = budget::Guard::install(100_000, Instant::now() + Duration::from_secs(60));
        let result = eval(
            "object.items.all(x, object.items.all(y, x + y >= 0))",
            &object,
        );
        assert!(result.is_err());
        assert_eq!(budget::exhausted(), Some(budget::Exhaustion::Cost));
    }
}

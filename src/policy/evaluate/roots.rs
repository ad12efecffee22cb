//! The request data as CEL variables (`object`, `request`, `params`, ...)
//! answered straight from the JSON, and the note of which `variables.<name>`
//! a run read. Only resolves: computing variables is [`super::Evaluation`]'s.

use crate::policy::compile::CompiledExpression;
use crate::policy::json_val::{budget, to_val, JsonObject};
use crate::policy::request::{Json, Shape};
use cel::common::types::CelNull;
use cel::common::value::{CowVal, Val};
use std::sync::atomic::{AtomicU64, Ordering};

/// The request data as CEL variables: `object`, `oldObject`, `request`,
/// `params` and `namespaceObject`, resolved by cel before its own bindings.
///
/// cel resolves `object.spec.template` by trying the longest name first:
/// `object.spec.template`, then `object.spec` (selecting `template`), then
/// `object` (selecting `spec`, then `template`). This resolver answers the
/// longest name directly by walking the JSON, charging the meter as the
/// selects would (a key read and a conversion per field). When the walk
/// does not reach a value (a missing or null field, a non-object), it
/// answers nothing and cel falls back to selecting field by field, which
/// produces the same value, error and message as without the resolver.
pub(super) struct Roots<'e> {
    pub(super) object: Option<Json<'e>>,
    pub(super) old_object: Option<Json<'e>>,
    pub(super) request: Option<Json<'e>>,
    pub(super) params: Option<Json<'e>>,
    pub(super) namespace_object: Option<Json<'e>>,
    /// `variables.<name>` is answered by the context's bindings; the
    /// resolver only notes reads of variables not computed yet.
    pub(super) variables: VariableReads<'e>,
}

impl cel::context::VariableResolver for Roots<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        let mut segments = name.split('.');
        let (root, request) = match segments.next()? {
            "object" => (self.object, false),
            "oldObject" => (self.old_object, false),
            "request" => (self.request, true),
            "params" => (self.params, false),
            "namespaceObject" => (self.namespace_object, false),
            "variables" => {
                if let (Some(variable), None) = (segments.next(), segments.next()) {
                    self.variables.note(variable);
                }
                return None;
            }
            _ => return None,
        };
        let Some(mut json) = root else {
            // Unbound (no old object, no params): null, and no fields.
            return segments
                .next()
                .is_none()
                .then(|| CowVal::Owned(Box::new(CelNull)));
        };
        let mut depth = 0u64;
        for segment in segments {
            let Shape::Object(object) = json.shape() else {
                return None;
            };
            let view = if depth == 0 && request {
                JsonObject::request(object)
            } else {
                JsonObject::new(object)
            };
            json = view.field(segment)?;
            depth += 1;
        }
        // What the selects would charge: a key read and a conversion per
        // field (`to_val` below charges the last conversion itself).
        let value: Box<dyn Val + 'b> = match json.shape() {
            Shape::Object(object) => {
                budget::charge(2 * depth).ok()?;
                if depth == 0 && request {
                    Box::new(JsonObject::request(object))
                } else {
                    Box::new(JsonObject::new(object))
                }
            }
            _ if depth == 0 => to_val(json).unwrap_or_else(|_| Box::new(CelNull)),
            _ => {
                budget::charge(2 * depth - 1).ok()?;
                to_val(json).ok()?
            }
        };
        Some(CowVal::Owned(value))
    }
}

/// What the resolver saw of `variables.<name>` during one run, as bit sets
/// over variable indices. Only policies with at most 64 variables are
/// computed on demand; larger ones compute every variable an expression may
/// read before it runs.
#[derive(Default)]
pub(super) struct VariableReads<'p> {
    /// The variables, in declaration order; empty when not on demand.
    pub(super) names: &'p [(String, CompiledExpression)],
    pub(super) computed: AtomicU64,
    pub(super) failed: AtomicU64,
    /// Read but not computed yet: the run must be repeated.
    pub(super) demanded: AtomicU64,
    /// Read after failing: the run's error is the variable's.
    pub(super) failed_read: AtomicU64,
}

impl VariableReads<'_> {
    pub(super) fn note(&self, name: &str) {
        let Some(index) = self.names.iter().position(|(n, _)| n == name) else {
            return;
        };
        let bit = 1u64 << index;
        if self.computed.load(Ordering::Relaxed) & bit != 0 {
            return;
        }
        if self.failed.load(Ordering::Relaxed) & bit != 0 {
            self.failed_read.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.demanded.fetch_or(bit, Ordering::Relaxed);
        }
    }
}

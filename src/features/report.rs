//! What components report in a Feature's `status.uses` (KEP-3920's "did the
//! client check the feature, and what did it find"): one entry per
//! instance, when one is due, which are live, and which instances have not
//! yet confirmed a state. Pure: no clock, no client; the edge
//! ([`super::reporter`], [`super::controller`]) passes `now` and writes.

use super::lifecycle::State;
use crate::json::str_at;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};
use std::time::Duration;

/// How long an entry stays live when it does not say (`expirySeconds`):
/// the reporter's default expiry.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(180);

/// The task name under which unconfirmed instances are listed in
/// `status.transitionTasks`.
pub const UNCONFIRMED_TASK: &str = "reports";

/// One entry of `status.uses`: what one instance of a component last
/// observed of the Feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `webhook`, `recommender`, `updater`, `balloon-controller`, or a third
    /// party's name.
    pub component: String,
    /// The pod name.
    pub instance: String,
    /// `status.state` as the instance last saw it; `None`: no state yet.
    pub observed_state: Option<State>,
    /// `metadata.generation` as the instance last saw it (0: unknown).
    pub observed_generation: i64,
    /// When the instance last wrote the entry.
    pub last_report_time: Option<Timestamp>,
    /// How long after `last_report_time` the entry is ignored.
    pub expiry: Option<Duration>,
    /// The entry's `enabled`, the field entries had before instances
    /// reported states; kept readable, written from the state.
    pub enabled: Option<bool>,
}

impl Report {
    /// What `component`'s `instance` reports having observed `feature` at
    /// `now`, to be dropped `expiry` after.
    #[must_use]
    pub fn observe(
        component: &str,
        instance: &str,
        feature: &Value,
        now: Timestamp,
        expiry: Duration,
    ) -> Self {
        let observed_state = state_of(str_at(feature, "/status/state"));
        Report {
            component: component.to_owned(),
            instance: instance.to_owned(),
            observed_state,
            observed_generation: feature
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            last_report_time: Some(now),
            expiry: Some(expiry),
            enabled: Some(!matches!(
                observed_state,
                Some(State::TurningOff | State::Off)
            )),
        }
    }

    /// `component/instance`, for people.
    #[must_use]
    pub fn label(&self) -> String {
        if self.instance.is_empty() {
            self.component.clone()
        } else {
            format!("{}/{}", self.component, self.instance)
        }
    }

    /// The entry as `status.uses` holds it.
    #[must_use]
    pub fn to_value(&self) -> Value {
        let mut entry = json!({
            "component": self.component,
            "instance": self.instance,
            "observedGeneration": self.observed_generation,
        });
        if let Some(state) = self.observed_state {
            entry["observedState"] = json!(state.as_str());
        }
        if let Some(time) = self.last_report_time {
            entry["lastReportTime"] = json!(time.to_string());
        }
        if let Some(expiry) = self.expiry {
            entry["expirySeconds"] = json!(expiry.as_secs());
        }
        if let Some(enabled) = self.enabled {
            entry["enabled"] = json!(enabled);
        }
        entry
    }

    /// Whether the entry is past its expiry at `now` (an entry without a
    /// report time, such as one written before instances reported, is).
    #[must_use]
    pub fn expired(&self, now: Timestamp) -> bool {
        let Some(at) = self.last_report_time else {
            return true;
        };
        let expiry = self.expiry.unwrap_or(DEFAULT_EXPIRY);
        let age = now.duration_since(at);
        !age.is_negative() && age.unsigned_abs() > expiry
    }

    /// Whether the instance has seen the Feature turning or turned off at
    /// `generation` (its current `metadata.generation`).
    #[must_use]
    pub fn confirms_off(&self, generation: i64) -> bool {
        matches!(self.observed_state, Some(State::TurningOff | State::Off))
            && self.observed_generation >= generation
    }

    fn same_key(&self, other: &Report) -> bool {
        self.component == other.component && self.instance == other.instance
    }
}

/// Every entry of `feature`'s `status.uses`, in its order; an entry without
/// a `component` is skipped (the CRD requires one).
#[must_use]
pub fn reports(feature: &Value) -> Vec<Report> {
    let Some(Value::Array(entries)) = feature.pointer("/status/uses") else {
        return Vec::new();
    };
    entries
        .iter()
        .filter(|e| !str_at(e, "/component").is_empty())
        .map(|e| Report {
            component: str_at(e, "/component").to_owned(),
            instance: str_at(e, "/instance").to_owned(),
            observed_state: state_of(str_at(e, "/observedState")),
            observed_generation: e
                .get("observedGeneration")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            last_report_time: str_at(e, "/lastReportTime").parse().ok(),
            expiry: e
                .get("expirySeconds")
                .and_then(Value::as_u64)
                .map(Duration::from_secs),
            enabled: e.get("enabled").and_then(Value::as_bool),
        })
        .collect()
}

/// `existing` with `incoming` in place of the entry of the same component
/// and instance, or appended: what server-side apply of one instance's
/// entry does to a list keyed by `component` and `instance`.
#[must_use]
pub fn merge(existing: &[Report], incoming: &Report) -> Vec<Report> {
    let mut out = existing.to_vec();
    match out.iter_mut().find(|r| r.same_key(incoming)) {
        Some(slot) => *slot = incoming.clone(),
        None => out.push(incoming.clone()),
    }
    out
}

/// Whether `instance` must write `observed` now: its entry is absent from
/// `existing`, differs in state or generation, or is `heartbeat` old.
#[must_use]
pub fn due(existing: &[Report], observed: &Report, heartbeat: Duration) -> bool {
    let Some(current) = existing.iter().find(|r| r.same_key(observed)) else {
        return true;
    };
    if current.observed_state != observed.observed_state
        || current.observed_generation != observed.observed_generation
        || current.expiry != observed.expiry
    {
        return true;
    }
    match (current.last_report_time, observed.last_report_time) {
        (Some(then), Some(now)) => {
            let age = now.duration_since(then);
            age.is_negative() || age.unsigned_abs() >= heartbeat
        }
        _ => true,
    }
}

/// The indices of the entries past their expiry at `now`.
#[must_use]
pub fn expired(reports: &[Report], now: Timestamp) -> Vec<usize> {
    reports
        .iter()
        .enumerate()
        .filter(|(_, r)| r.expired(now))
        .map(|(i, _)| i)
        .collect()
}

/// The live instances that have not yet seen the Feature turning or turned
/// off at `generation`, by label, sorted.
#[must_use]
pub fn unconfirmed(reports: &[Report], generation: i64, now: Timestamp) -> Vec<String> {
    let mut out: Vec<String> = reports
        .iter()
        .filter(|r| !r.expired(now) && !r.confirms_off(generation))
        .map(Report::label)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The JSON patch that removes the entries at `indices` from
/// `status.uses`, guarded by the `resource_version` they were read at
/// (highest index first, so that each index still names its entry).
#[must_use]
pub fn expiry_patch(resource_version: &str, indices: &[usize]) -> Value {
    let mut ops =
        vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": resource_version})];
    let mut sorted = indices.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.dedup();
    ops.extend(
        sorted
            .into_iter()
            .map(|i| json!({"op": "remove", "path": format!("/status/uses/{i}")})),
    );
    Value::Array(ops)
}

/// The server-side apply body of one instance's entry on the status
/// subresource of the Feature `namespace/name`.
#[must_use]
pub fn apply_body(namespace: &str, name: &str, report: &Report) -> Value {
    json!({
        "apiVersion": "featureflags.nodescope.dev/v1alpha1",
        "kind": "Feature",
        "metadata": {"namespace": namespace, "name": name},
        "status": {"uses": [report.to_value()]},
    })
}

/// The field manager of one instance: each owns its own entry, so that
/// replicas never overwrite each other.
#[must_use]
pub fn field_manager(component: &str, instance: &str) -> String {
    // A field manager is at most 128 characters.
    format!("nodescope-{component}-{instance}")
        .chars()
        .take(128)
        .collect()
}

fn state_of(text: &str) -> Option<State> {
    match text {
        "On" => Some(State::On),
        "Off" => Some(State::Off),
        "TurningOn" => Some(State::TurningOn),
        "TurningOff" => Some(State::TurningOff),
        _ => None,
    }
}

#[cfg(test)]
#[path = "report_tests.rs"]
mod tests;

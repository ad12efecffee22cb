//! The state machine of one Feature: from what the admin desires, the
//! recorded status and the uses found now, the next status (if any) and
//! when to look again.

use super::report::{self, Report};
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `spec.desired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Desired {
    Enabled,
    Disabled,
}

/// `status.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    On,
    Off,
    TurningOn,
    TurningOff,
}

impl State {
    /// The name the CRD's enum spells.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            State::On => "On",
            State::Off => "Off",
            State::TurningOn => "TurningOn",
            State::TurningOff => "TurningOff",
        }
    }
}

/// One entry of `status.transitionTasks`: a gating policy with uses left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransitionTask {
    /// The gating policy.
    pub name: String,
    /// How many objects it still finds.
    #[serde(default)]
    pub count: usize,
    /// The first few of them, for a person: `VerticalPodAutoscaler
    /// monitoring/node-exporter, ... and 12 more`.
    #[serde(default)]
    pub description: String,
}

/// The part of `status` the controller owns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureStatus {
    pub state: Option<State>,
    /// When `state` last changed; the settle time counts from it.
    pub last_transition_time: Option<Timestamp>,
    pub transition_tasks: Vec<TransitionTask>,
}

/// What to do about one Feature now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The status to write, when it differs from the recorded one.
    pub write: Option<FeatureStatus>,
    /// Why, for the Event on the Feature (`reason`, `note`), when the state
    /// changes.
    pub event: Option<(&'static str, String)>,
    /// Look again after this long even without a watch event (the rest of
    /// the settle time); `None` leaves it to the period.
    pub recheck_after: Option<Duration>,
}

impl Step {
    fn none() -> Self {
        Step {
            write: None,
            event: None,
            recheck_after: None,
        }
    }
}

/// The next status of a Feature.
///
/// `tasks` are the uses found by this reconcile (one task per gating policy
/// with uses left), `settle` how long `TurningOff` must last before `Off`:
/// webhook replicas whose watch lags may still admit new uses for that long,
/// and the uses are evaluated again at each reconcile, so the reconcile that
/// finds none after the settle time is the re-check that ends it.
///
/// A Feature without `desired` is its owner's: never touched.
#[must_use]
pub fn next_status(
    desired: Option<Desired>,
    recorded: &FeatureStatus,
    tasks: &[TransitionTask],
    now: Timestamp,
    settle: Duration,
) -> Step {
    let Some(desired) = desired else {
        return Step::none();
    };
    let change = |state: State, tasks: Vec<TransitionTask>, note: String| Step {
        write: Some(FeatureStatus {
            state: Some(state),
            last_transition_time: Some(now),
            transition_tasks: tasks,
        }),
        event: Some((state.as_str(), note)),
        recheck_after: None,
    };
    match (desired, recorded.state) {
        (Desired::Disabled, None | Some(State::On | State::TurningOn)) => {
            let note = if tasks.is_empty() {
                "desired is Disabled; no object uses the feature".to_owned()
            } else {
                format!(
                    "desired is Disabled; waiting for {}",
                    tasks.iter().map(task_line).collect::<Vec<_>>().join("; ")
                )
            };
            Step {
                recheck_after: Some(settle),
                ..change(State::TurningOff, tasks.to_vec(), note)
            }
        }
        (Desired::Disabled, Some(State::TurningOff)) => {
            let Some(since) = recorded.last_transition_time else {
                // Set by someone else without a time: the settle time starts now.
                return Step {
                    write: Some(FeatureStatus {
                        state: Some(State::TurningOff),
                        last_transition_time: Some(now),
                        transition_tasks: tasks.to_vec(),
                    }),
                    event: None,
                    recheck_after: Some(settle),
                };
            };
            // A clock behind the recorded time counts as no time passed.
            let elapsed = now.duration_since(since);
            let elapsed = if elapsed.is_negative() {
                Duration::ZERO
            } else {
                elapsed.unsigned_abs()
            };
            let settled = elapsed >= settle;
            if tasks.is_empty() && settled {
                return change(
                    State::Off,
                    Vec::new(),
                    format!(
                        "no object uses the feature {}s after TurningOff",
                        settle.as_secs()
                    ),
                );
            }
            let remaining = (!settled).then(|| settle - elapsed);
            Step {
                write: (recorded.transition_tasks != tasks).then(|| FeatureStatus {
                    transition_tasks: tasks.to_vec(),
                    ..recorded.clone()
                }),
                event: None,
                recheck_after: remaining,
            }
        }
        (Desired::Disabled, Some(State::Off)) => Step {
            write: (!recorded.transition_tasks.is_empty()).then(|| FeatureStatus {
                transition_tasks: Vec::new(),
                ..recorded.clone()
            }),
            event: None,
            recheck_after: None,
        },
        (Desired::Enabled, None | Some(State::Off | State::TurningOff)) => Step {
            // Turning on has no tasks today: the next reconcile ends it.
            recheck_after: Some(Duration::ZERO),
            ..change(
                State::TurningOn,
                Vec::new(),
                "desired is Enabled".to_owned(),
            )
        },
        (Desired::Enabled, Some(State::TurningOn)) => change(
            State::On,
            Vec::new(),
            "desired is Enabled; no task left".to_owned(),
        ),
        (Desired::Enabled, Some(State::On)) => Step {
            write: (!recorded.transition_tasks.is_empty()).then(|| FeatureStatus {
                transition_tasks: Vec::new(),
                ..recorded.clone()
            }),
            event: None,
            recheck_after: None,
        },
    }
}

/// [`next_status`] once the components' reports are counted: while
/// `Disabled`, every live instance in `reports` (see [`report::unconfirmed`])
/// that has not yet seen `TurningOff` or `Off` at the Feature's
/// `generation` is one more thing to wait for, listed as the task
/// [`report::UNCONFIRMED_TASK`] after the gating policies' tasks. Expired
/// entries are ignored; a Feature no instance reports on keeps the settle
/// time alone, which stays the floor either way.
#[must_use]
pub fn next_status_reported(
    desired: Option<Desired>,
    recorded: &FeatureStatus,
    tasks: &[TransitionTask],
    reports: &[Report],
    generation: i64,
    now: Timestamp,
    settle: Duration,
) -> Step {
    let mut tasks = tasks.to_vec();
    if desired == Some(Desired::Disabled) {
        let waiting = report::unconfirmed(reports, generation, now);
        if !waiting.is_empty() {
            tasks.push(TransitionTask {
                name: report::UNCONFIRMED_TASK.to_owned(),
                count: waiting.len(),
                description: format!("not yet confirmed by {}", waiting.join(", ")),
            });
        }
    }
    next_status(desired, recorded, &tasks, now, settle)
}

fn task_line(task: &TransitionTask) -> String {
    format!("{}: {}", task.name, task.description)
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;

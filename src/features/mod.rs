//! KEP-3920 feature lifecycle: turning a `Feature` off only once nothing
//! uses it and every component reporting on it has seen it turning off,
//! clearing what it declares from the objects that use it, and on again.
//!
//! Owns: the state machine ([`lifecycle`]), use discovery ([`uses`]), the
//! components' reports ([`report`]) and cleanup plans ([`cleanup`]), all
//! pure functions of a snapshot of objects so that they are tested without
//! a cluster; their edges ([`controller`], [`reporter`], [`cleaner`]). The
//! controller reads the objects the gates match in pages ([`pages`]), each
//! evaluated for every Feature and dropped ([`period`]), keeping only a
//! [`tally`] of the uses and the cleanup patches.
//! Must not: know any kind by name. What uses a feature is whatever its
//! gating policies would deny on CREATE were it `Off`; what cleanup touches
//! is what the Feature declares (`owned.yaml` declares nodescope's own).

pub mod cleaner;
pub mod cleanup;
pub mod cluster;
pub mod controller;
pub mod lifecycle;
pub mod metrics;
pub mod owned;
pub mod pages;
pub mod period;
pub mod report;
pub mod reporter;
pub mod status;
pub mod tally;
pub mod uses;
pub mod wake;

pub use lifecycle::{
    next_status, next_status_reported, Desired, FeatureStatus, State, Step, TransitionTask,
};
pub use uses::{find_uses, transition_tasks, Listed, PolicyUses, Use, UsesError};

#[cfg(test)]
mod fake_apiserver;

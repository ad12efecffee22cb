//! KEP-3920 feature lifecycle: turning a `Feature` off only once nothing
//! uses it, and on again.
//!
//! Owns: the state machine ([`lifecycle`]) and use discovery ([`uses`]),
//! both pure functions of a snapshot of objects so that they are tested
//! without a cluster. Must not: know any kind by name. What uses a feature
//! is whatever its gating policies would deny on CREATE were it `Off`.

pub mod cluster;
pub mod controller;
pub mod lifecycle;
pub mod uses;
pub mod wake;

pub use lifecycle::{next_status, Desired, FeatureStatus, State, Step, TransitionTask};
pub use uses::{find_uses, transition_tasks, Listed, PolicyUses, Use, UsesError};

//! Running pods, as the controllers that act on them read them, and the
//! in-place resize and the eviction they share (the updater brings DaemonSet pods to their
//! group; the balloon controller resizes balloons).
//!
//! A controller holds every pod of the cluster it acts on, so a pod is kept
//! as [`RunningPod`]: the few fields a decision reads, owned and compact
//! (resource lists as packed [`Texts`]), from which the webhook's
//! arithmetic gets the view it reads without a parse
//! ([`RunningPod::view`]).

mod doc;
pub mod evict;
mod read;
pub mod resize;
mod running;
mod texts;
mod watched;

pub use self::doc::PodText;
pub use self::read::{resource_texts, view_texts};
pub use self::resize::{ResizeCondition, ResizeError, ResizeStatus};
pub use self::running::{
    ContainerState, PodError, PodPhase, RunningPod, SpecContainer, BALLOON_LABEL,
};
pub use self::texts::{Iter as TextsIter, Texts};
pub use self::watched::read_watched;

//! Running pods, as the controllers that act on them read them, and the
//! in-place resize they share (the updater brings DaemonSet pods to their
//! group; the balloon controller resizes balloons).
//!
//! A controller holds every pod of the cluster it acts on, so a pod is kept
//! as [`RunningPod`]: the few fields a decision reads, owned and compact,
//! plus the part the webhook's arithmetic reads as a small JSON document,
//! so that arithmetic runs unchanged on it ([`RunningPod::view`]).

pub mod resize;
mod running;

pub use self::resize::{ResizeCondition, ResizeError, ResizeStatus};
pub use self::running::{
    resource_texts, ContainerState, PodError, PodPhase, RunningPod, Texts, BALLOON_LABEL,
};

//! What the running updater says about the pods it leaves alone.
//!
//! A pass decides every pod every `--updater-interval`, and most passes
//! decide the same for most pods, so logging each decision would bury the
//! few that matter. An operator's question is "why is this pod not at its
//! group?", so the answer is logged when it changes: a pod held back
//! (`deferred`) is logged at info the first pass it is, and again only when
//! the reason changes; a pod the pass leaves alone for another reason
//! (`none`: a change too small, a balloon, updateMode Off) at debug, the
//! same way. A pod the pass acts on is logged by the act itself.

use super::{Action, PodPlan, Reason};
use std::collections::HashMap;
use std::sync::Arc;

/// The reason last logged for each pod the updater left alone, by
/// (namespace, name): the plan's own shared names, so that a pass over
/// pods whose reason did not change allocates nothing.
#[derive(Debug, Default)]
pub struct Told {
    /// The action and a hash of the reason: comparing hashes needs no copy
    /// of the reason, which is often a string built for that pass.
    last: HashMap<(Arc<str>, Arc<str>), (Action, u64)>,
}

/// One line to log: the pod, the action (`deferred` or `none`) and why.
#[derive(Debug, PartialEq, Eq)]
pub struct Line<'p> {
    /// `namespace/name`.
    pub pod: String,
    /// What the pass decided.
    pub action: Action,
    /// Why: the plan's message, the sentence (its few words are the
    /// table's).
    pub reason: &'p str,
}

fn hash(reason: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    // A fixed hasher: the same reason hashes the same on every pass.
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(reason)
}

impl Told {
    /// The lines this pass adds: the pods left alone whose reason is not
    /// the one logged for them last. Forgets pods this pass did not leave
    /// alone, so that a pod held back again after a change is told again.
    pub fn news<'p>(&mut self, plans: &'p [PodPlan]) -> Vec<Line<'p>> {
        let mut lines = Vec::new();
        let mut seen = HashMap::with_capacity(self.last.len());
        for plan in plans {
            if plan.action.acts() || plan.reason == Reason::AtTarget {
                continue;
            }
            let key = (plan.namespace.clone(), plan.pod.clone());
            let said = (plan.action, hash(&plan.message));
            let told = self.last.remove(&key).filter(|last| *last == said);
            if told.is_none() {
                lines.push(Line {
                    pod: format!("{}/{}", plan.namespace, plan.pod),
                    action: plan.action,
                    reason: &plan.message,
                });
            }
            seen.insert(key, said);
        }
        self.last = seen;
        lines
    }

    /// Logs this pass's news: held back at info, left alone at debug.
    pub fn log(&mut self, plans: &[PodPlan]) {
        for line in self.news(plans) {
            if line.action == Action::Deferred {
                tracing::info!(pod = %line.pod, reason = line.reason, "held back");
            } else {
                tracing::debug!(pod = %line.pod, reason = line.reason, "left alone");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update::SETTLED;
    use std::borrow::Cow;

    fn plan(pod: &str, action: Action, reason: &'static str) -> PodPlan {
        PodPlan {
            namespace: "ns".into(),
            pod: pod.into(),
            action,
            reason: if reason == SETTLED {
                Reason::AtTarget
            } else {
                Reason::EvictionTolerance
            },
            message: Cow::Borrowed(reason),
            vpa: "v".into(),
            node: None,
            scope_value: None,
            containers: Vec::new(),
            ops: crate::mutate::Patch::default(),
            unboost: Vec::new(),
            resource_version: "1".into(),
            uid: "u".into(),
            unusable: 0,
        }
    }

    fn pods<'a>(lines: &[Line<'a>]) -> Vec<(String, Action, &'a str)> {
        lines
            .iter()
            .map(|l| (l.pod.clone(), l.action, l.reason))
            .collect()
    }

    #[test]
    fn a_reason_is_told_once_and_again_when_it_changes_or_comes_back() {
        let mut told = Told::default();
        let first = [
            plan("a", Action::Deferred, "held back: tolerance"),
            plan("b", Action::None, SETTLED),
            plan("c", Action::None, "a balloon pod"),
            plan("d", Action::Resize, "outside its range"),
        ];
        assert_eq!(
            pods(&told.news(&first)),
            [
                ("ns/a".to_owned(), Action::Deferred, "held back: tolerance"),
                ("ns/c".to_owned(), Action::None, "a balloon pod"),
            ]
        );
        // The same decisions: nothing new.
        assert!(told.news(&first).is_empty());
        // a's reason changes; c is unchanged.
        let second = [
            plan("a", Action::Deferred, "resize Deferred: waiting"),
            plan("c", Action::None, "a balloon pod"),
        ];
        assert_eq!(
            pods(&told.news(&second)),
            [(
                "ns/a".to_owned(),
                Action::Deferred,
                "resize Deferred: waiting"
            )]
        );
        // a is resized, then held back for the first reason again: told again.
        assert!(told
            .news(&[
                plan("a", Action::Resize, "x"),
                plan("c", Action::None, "a balloon pod")
            ])
            .is_empty());
        assert_eq!(
            pods(&told.news(&[plan("a", Action::Deferred, "resize Deferred: waiting")])),
            [(
                "ns/a".to_owned(),
                Action::Deferred,
                "resize Deferred: waiting"
            )]
        );
    }
}

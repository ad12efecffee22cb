//! Which namespaces' VPAs a controller handles: upstream's
//! `--vpa-object-namespace` and `--ignored-vpa-object-namespaces`, read
//! alike by the updater and the recommender, so that one namespace can be
//! given its own updater and recommender, or left to another pair.

use std::collections::BTreeSet;

/// The namespaces whose VPAs are handled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum VpaNamespaces {
    /// Every namespace: upstream's default.
    #[default]
    All,
    /// This one only.
    Only(String),
    /// Every namespace but these.
    Except(BTreeSet<String>),
}

impl VpaNamespaces {
    /// From the two flags' values, as upstream reads them: an empty
    /// namespace and empty entries of the list mean nothing. The flags
    /// exclude each other (clap refuses both), so `only` wins here only
    /// for a caller that skipped the parser.
    #[must_use]
    pub fn new(only: &str, ignored: &[String]) -> Self {
        if !only.is_empty() {
            return VpaNamespaces::Only(only.to_owned());
        }
        let ignored: BTreeSet<String> = ignored
            .iter()
            .map(|n| n.trim())
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        if ignored.is_empty() {
            VpaNamespaces::All
        } else {
            VpaNamespaces::Except(ignored)
        }
    }

    /// Whether a VPA in `namespace` is handled.
    #[must_use]
    pub fn handles(&self, namespace: &str) -> bool {
        match self {
            VpaNamespaces::All => true,
            VpaNamespaces::Only(only) => only == namespace,
            VpaNamespaces::Except(ignored) => !ignored.contains(namespace),
        }
    }

    /// The one namespace to list VPAs in, when there is one: listing it
    /// alone reads no other namespace's VPAs, as upstream's informers do.
    #[must_use]
    pub fn only(&self) -> Option<&str> {
        match self {
            VpaNamespaces::Only(namespace) => Some(namespace),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn empty_flags_handle_every_namespace_as_upstreams_defaults_do() {
        let all = VpaNamespaces::new("", &list(&["", " "]));
        assert_eq!(all, VpaNamespaces::All);
        assert!(all.handles("monitoring") && all.handles(""));
        assert_eq!(all.only(), None);
    }

    #[test]
    fn one_namespace_handles_only_itself() {
        let only = VpaNamespaces::new("monitoring", &[]);
        assert!(only.handles("monitoring"));
        assert!(!only.handles("kube-system"));
        assert_eq!(only.only(), Some("monitoring"));
    }

    #[test]
    fn ignored_namespaces_are_skipped_and_every_other_handled() {
        let except = VpaNamespaces::new("", &list(&["kube-system", " team-a ", ""]));
        assert!(!except.handles("kube-system"));
        assert!(!except.handles("team-a"));
        assert!(except.handles("monitoring"));
        assert_eq!(except.only(), None);
    }
}

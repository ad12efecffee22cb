//! Upstream's `--vpa-object-namespace` and
//! `--ignored-vpa-object-namespaces`, flattened into `update` and
//! `recommend` so that both read them under the same names and rules.

use crate::vpa::namespaces::VpaNamespaces;
use clap::Args;

/// Which namespaces' VPAs this controller handles.
#[derive(Debug, Args, Clone, Default)]
pub struct NamespaceFlags {
    /// Handle only the VPAs of this namespace (empty: every namespace), so
    /// that a namespace can have a controller of its own.
    // Not a clap conflict: as upstream, an empty value is no value, so a
    // chart that always passes both flags, one empty, still starts.
    #[arg(long, default_value = "")]
    pub vpa_object_namespace: String,
    /// Comma-separated namespaces whose VPAs are left alone, for a
    /// namespace another controller handles.
    #[arg(long, value_delimiter = ',')]
    pub ignored_vpa_object_namespaces: Vec<String>,
}

impl NamespaceFlags {
    /// Refuses both flags set, as upstream does: "only this namespace" and
    /// "all but these" cannot both hold.
    ///
    /// # Errors
    /// Both non-empty.
    pub fn check(&self) -> Result<(), String> {
        let ignoring = self
            .ignored_vpa_object_namespaces
            .iter()
            .any(|n| !n.trim().is_empty());
        if !self.vpa_object_namespace.is_empty() && ignoring {
            return Err(
                "--vpa-object-namespace and --ignored-vpa-object-namespaces exclude \
                        each other, as upstream's do: give one"
                    .into(),
            );
        }
        Ok(())
    }

    /// The namespaces the flags select (with both set, the one namespace:
    /// [`Self::check`] refuses that before anything runs).
    #[must_use]
    pub fn namespaces(&self) -> VpaNamespaces {
        VpaNamespaces::new(
            &self.vpa_object_namespace,
            &self.ignored_vpa_object_namespaces,
        )
    }
}

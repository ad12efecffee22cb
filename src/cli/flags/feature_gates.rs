//! `--feature-gates`, in upstream VPA's shape (`A=true,B=false`): the
//! alpha features of VPA 1.8 that nodescope implements are off unless named,
//! as upstream's are (pkg/features/versioned_features.go, 55c37cd). A
//! mistyped gate is refused rather than ignored: a feature someone believes
//! on and is not is worse than a failed start.

/// The gates and whether each is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// `PerVPAConfig` (AEP-8026): a VPA's own OOM bump, memory window and
    /// `evictAfterOOMSeconds`.
    pub per_vpa_config: bool,
    /// `CPUStartupBoost` (AEP-7862): the webhook boosts a new pod's CPU,
    /// the updater takes the boost back after `durationSeconds`.
    pub cpu_startup_boost: bool,
}

/// The gates upstream's VPA 1.8 has, with whether nodescope implements them.
const KNOWN: &[&str] = &["CPUStartupBoost", "PerVPAConfig"];

/// Parses `--feature-gates`.
///
/// # Errors
/// An unknown gate or a value other than `true` or `false`, named.
pub fn parse(text: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, value)) = part.split_once('=') else {
            return Err(format!("{part:?} is not NAME=true or NAME=false"));
        };
        let on = match value.trim() {
            "true" => true,
            "false" => false,
            other => return Err(format!("{name}={other}: a gate is true or false")),
        };
        match name.trim() {
            "PerVPAConfig" => gates.per_vpa_config = on,
            "CPUStartupBoost" => gates.cpu_startup_boost = on,
            other => {
                return Err(format!(
                    "unrecognized feature gate {other:?} (known: {})",
                    KNOWN.join(", ")
                ))
            }
        }
    }
    Ok(gates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse_as_upstream_writes_them_and_unknown_ones_are_refused() {
        assert_eq!(parse(""), Ok(FeatureGates::default()));
        assert_eq!(
            parse("PerVPAConfig=true"),
            Ok(FeatureGates {
                per_vpa_config: true,
                ..FeatureGates::default()
            })
        );
        assert_eq!(
            parse("PerVPAConfig=true,PerVPAConfig=false"),
            Ok(FeatureGates::default())
        );
        assert_eq!(
            parse("PerVpaConfig=true"),
            Err(
                "unrecognized feature gate \"PerVpaConfig\" (known: CPUStartupBoost, PerVPAConfig)"
                    .into()
            )
        );
        assert_eq!(
            parse("CPUStartupBoost=true,PerVPAConfig=false"),
            Ok(FeatureGates {
                cpu_startup_boost: true,
                ..FeatureGates::default()
            })
        );
        assert_eq!(
            parse("PerVPAConfig=yes"),
            Err("PerVPAConfig=yes: a gate is true or false".into())
        );
        assert_eq!(
            parse("PerVPAConfig"),
            Err("\"PerVPAConfig\" is not NAME=true or NAME=false".into())
        );
    }
}

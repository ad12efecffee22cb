//! `nodescope features cleanup NAME --dry-run`: the exact patches the
//! lifecycle controller sends while the Feature is `TurningOff`
//! ([`crate::features::cleanup`]), and the warning `nodescope features`
//! prints while objects hold fields that a CRD replacement would prune.

use super::{
    find_features, load_with_objects, render_reports, uses_of, write_out, FeatureNamespace, Loaded,
    Source, UsesFormat,
};
use crate::cli::dry_run::RunError;
use crate::cli::kubectl::table::table;
use crate::features::cleanup::{self, CleanupPatch};
use crate::input::InputError;
use crate::json::str_at;
use clap::Args;
use serde_json::json;
use std::process::ExitCode;

/// `nodescope features cleanup`.
#[derive(Debug, Args, Clone)]
pub struct CleanupArgs {
    /// The Feature's name.
    pub name: String,
    #[command(flatten)]
    pub namespace: FeatureNamespace,
    /// List the patches without sending them (required: the controller
    /// sends them, while the Feature is TurningOff).
    #[arg(long, required = true)]
    pub dry_run: bool,
    #[command(flatten)]
    pub source: Source,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    pub output: UsesFormat,
}

/// Runs `nodescope features cleanup`.
///
/// # Errors
/// No Feature of that name, a `spec.cleanup` that cannot be followed, or
/// bad input (exit 2); output that cannot be written (exit 3).
pub fn run_cleanup(args: &CleanupArgs) -> Result<ExitCode, RunError> {
    let loaded = load_with_objects(&args.source, "cleanup")?;
    let (mut text, mut reports, mut any) = (String::new(), Vec::new(), false);
    for feature in find_features(&loaded, &args.namespace, &args.name)? {
        let namespace = str_at(feature, "/metadata/namespace");
        let rules = cleanup::rules(feature).map_err(|e| InputError::Usage(e.to_string()))?;
        let uses = uses_of(&loaded, feature)?;
        let patches = cleanup::plan(&rules, &uses, &loaded.listed);
        any |= !patches.is_empty();
        let label = format!("{namespace}/{}", args.name);
        if args.output != UsesFormat::Table {
            reports.push(json!({
                "feature": {"namespace": namespace, "name": args.name},
                "cleanup": rules,
                "patches": patches,
            }));
            continue;
        }
        if !patches.is_empty() {
            text.push_str(&patch_table(&patches));
        }
        text.push_str(&if rules.is_empty() {
            format!(
                "Feature {label} declares no spec.cleanup: nothing is cleared, its uses must go by hand (nodescope features uses {} -n {namespace})\n",
                args.name
            )
        } else {
            format!(
                "{} patch(es) clear what Feature {label} declares in spec.cleanup\n",
                patches.len()
            )
        });
    }
    if args.output != UsesFormat::Table {
        text = render_reports(&reports, args.output)?;
    }
    write_out(&text)?;
    Ok(if !any {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn patch_table(patches: &[CleanupPatch]) -> String {
    let mut rows = vec![["OBJECT", "SUBRESOURCE", "PATCH"].map(str::to_owned)];
    rows.extend(patches.iter().map(|p| {
        [
            p.label(),
            if p.subresource.is_empty() {
                "-".to_owned()
            } else {
                p.subresource.clone()
            },
            p.patch.to_string(),
        ]
    }));
    table(&rows)
}

/// One line per field a Feature declares in `spec.cleanup` that objects
/// still hold. Such a field exists only while the API that stores it
/// defines it: replacing the CRD (nodescope's VPA CRD by upstream's, which
/// has no `spec.scope` nor `status.recommendationGroups`) prunes it from
/// every object, without the Feature's lifecycle. The declaration says
/// which fields the Feature added, so no kind is known here.
///
/// # Errors
/// A `spec.cleanup` that cannot be followed (exit 2).
pub(crate) fn prune_warnings(loaded: &Loaded) -> Result<Vec<String>, RunError> {
    let mut out = Vec::new();
    for feature in &loaded.features {
        let rules = cleanup::rules(feature).map_err(|e| InputError::Usage(e.to_string()))?;
        for (rule, count) in cleanup::held(&rules, &loaded.listed) {
            let api = if rule.group.is_empty() {
                rule.resource.clone()
            } else {
                format!("{}.{}", rule.resource, rule.group)
            };
            out.push(format!(
                "{count} object(s) of {api} hold {}, which Feature {}/{} declares in spec.cleanup: replacing the {api} CRD by one that does not define the field (upstream's) prunes it from them; turn the Feature off first (its cleanup removes the field from every object that uses it)",
                rule.json_pointer,
                str_at(feature, "/metadata/namespace"),
                str_at(feature, "/metadata/name"),
            ));
        }
    }
    Ok(out)
}

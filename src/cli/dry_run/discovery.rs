//! `dry-run --kubeconfig` (or `--context`): the kinds come from the
//! cluster's discovery rather than the built-in v1.36 table, for a cluster
//! that serves CRDs or other versions. Discovery is read once, before any
//! manifest, as kubectl reads it: `/api`, `/apis` and each group version.
//! Without either flag dry-run stays offline and reads no kubeconfig.

use super::RunError;
use crate::apiserver::kinds::{Discovered, Kinds};
use crate::cli::kubectl::cluster::{ClusterFlags, Connection, Retry};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;

/// The kinds of the run: the cluster's with `--kubeconfig` or `--context`,
/// else the built-in table.
///
/// # Errors
/// No kubeconfig, a context it lacks, or a cluster that does not answer
/// its discovery, in kubectl's words (exit 2: nothing can be checked).
pub fn kinds(flags: &ClusterFlags) -> Result<Kinds, RunError> {
    if flags.kubeconfig.is_none() && flags.context.is_none() {
        return Ok(Kinds::default());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RunError::Internal(format!("cannot start the client's runtime: {e}")))?;
    runtime.block_on(async {
        let connection = flags.connect(Retry::Off).await.map_err(RunError::Cluster)?;
        let (served, unreadable) = discover(&connection).await?;
        Ok(Kinds::served_by(&served, unreadable))
    })
}

/// Every kind at every version the cluster lists, and the group versions
/// whose list it could not give (an aggregated API that is down): those
/// are refused when a manifest uses them, the rest is checked.
async fn discover(
    connection: &Connection,
) -> Result<(Vec<Discovered>, Vec<(String, String)>), RunError> {
    let client = &connection.client;
    let failed = |e: kube::Error| RunError::Cluster(connection.error(&e));
    let mut served = Vec::new();
    let mut unreadable = Vec::new();
    let core = client.list_core_api_versions().await.map_err(failed)?;
    let mut lists = Vec::new();
    for version in &core.versions {
        lists.push((
            version.clone(),
            client.list_core_api_resources(version).await,
        ));
    }
    let groups = client.list_api_groups().await.map_err(failed)?;
    for group in &groups.groups {
        for version in &group.versions {
            let gv = &version.group_version;
            lists.push((gv.clone(), client.list_api_group_resources(gv).await));
        }
    }
    for (group_version, list) in lists {
        match list {
            Ok(list) => rows(&group_version, &list, &mut served),
            Err(error) => unreadable.push((group_version, connection.error(&error).to_string())),
        }
    }
    Ok((served, unreadable))
}

/// The top-level resources of one group version (`pods`, not `pods/log`).
fn rows(group_version: &str, list: &APIResourceList, out: &mut Vec<Discovered>) {
    for resource in &list.resources {
        if resource.name.contains('/') {
            continue;
        }
        out.push(Discovered {
            api_version: group_version.to_owned(),
            kind: resource.kind.clone(),
            resource: resource.name.clone(),
            namespaced: resource.namespaced,
        });
    }
}

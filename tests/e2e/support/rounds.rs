//! The `enforcers` step's schedule: cases in rounds, so that the cluster's
//! state changes rarely. The objects a round's UPDATEs and DELETEs act on
//! are created while no enforcer is on (an enforcer would refuse some of
//! them) and deleted after the round; within a round, cases with identical
//! params form a group, whose params are applied once.

use super::state::{self, identity, Identity, Params};
use kube::Client;
use nodescope::cli::test_suite::cases::SuiteCase;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// A round: groups of cases (indices) with identical params, deny cases
/// first in each (their answers show that the state has reached the
/// enforcer; an allow answer cannot).
pub type Round = Vec<Vec<usize>>;

/// Puts each case in the first round where its stored objects (UPDATE,
/// DELETE) can coexist with the round's: the same identity only with the
/// same content, and no identity another case of the round creates or has
/// as a param (a CREATE of an existing name is refused after admission).
pub fn schedule(cases: &[SuiteCase]) -> Vec<Round> {
    #[derive(Default)]
    struct Slot {
        stored: HashMap<Identity, Value>,
        named: BTreeSet<Identity>,
        groups: Vec<(String, Vec<usize>)>,
    }
    let mut slots: Vec<Slot> = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        let stored: Vec<(Identity, Value)> = case
            .requests
            .iter()
            .filter_map(|r| {
                let old = r.old_object.as_ref()?;
                Some((identity(old, r.namespace.as_deref())?, old.clone()))
            })
            .collect();
        let mut named: Vec<Identity> = case
            .params
            .iter()
            .filter_map(|p| identity(p, None))
            .collect();
        named.extend(
            case.requests
                .iter()
                .filter(|r| r.operation == "CREATE")
                .filter_map(|r| identity(r.object.as_ref()?, r.namespace.as_deref())),
        );
        let fits = |slot: &Slot| {
            stored.iter().all(|(id, o)| {
                slot.stored.get(id).is_none_or(|x| x == o) && !slot.named.contains(id)
            }) && named.iter().all(|id| !slot.stored.contains_key(id))
        };
        let at = match slots.iter().position(fits) {
            Some(at) => at,
            None => {
                slots.push(Slot::default());
                slots.len() - 1
            }
        };
        let slot = &mut slots[at];
        slot.stored.extend(stored);
        slot.named.extend(named);
        let key = serde_json::to_string(&case.params).unwrap_or_default();
        match slot.groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(c),
            None => slot.groups.push((key, vec![c])),
        }
    }
    slots
        .into_iter()
        .map(|slot| {
            slot.groups
                .into_iter()
                .map(|(_, mut group)| {
                    group.sort_by_key(|&c| cases[c].requests.iter().all(|r| r.verdict.allowed));
                    group
                })
                .collect()
        })
        .collect()
}

/// Creates the round's stored objects, group by group under the group's
/// params (a pod's PriorityClass must exist), while no enforcer is on.
/// Identical objects are created once. Returns `(case, request) -> name`,
/// and why each case whose objects could not be made cannot be sent.
pub async fn create_stored(
    client: &Client,
    cases: &[SuiteCase],
    round: &Round,
    params: &mut Params,
) -> (HashMap<(usize, usize), String>, HashMap<usize, String>) {
    let mut unsendable = HashMap::new();
    let mut by_content: HashMap<String, Result<String, String>> = HashMap::new();
    let mut names = HashMap::new();
    for group in round {
        let needs: Vec<(usize, usize)> = group
            .iter()
            .flat_map(|&c| {
                let requests = cases[c].requests.iter().enumerate();
                requests
                    .filter(|(_, r)| r.old_object.is_some())
                    .map(move |(r, _)| (c, r))
            })
            .collect();
        if needs.is_empty() {
            continue;
        }
        if let Err(why) = params.set(&cases[group[0]].params).await {
            for &c in group {
                unsendable.entry(c).or_insert_with(|| why.clone());
            }
            continue;
        }
        for (c, r) in needs {
            let request = &cases[c].requests[r];
            let key = serde_json::to_string(&(
                &request.resource,
                &request.namespace,
                &request.old_object,
            ))
            .unwrap_or_default();
            let created = match by_content.get(&key) {
                Some(created) => created.clone(),
                None => {
                    let created = state::create_stored(client, request).await;
                    by_content.insert(key, created.clone());
                    created
                }
            };
            match created {
                Ok(name) => {
                    names.insert((c, r), name);
                }
                Err(why) => {
                    unsendable.entry(c).or_insert(why);
                }
            }
        }
    }
    (names, unsendable)
}

pub async fn delete_stored(
    client: &Client,
    cases: &[SuiteCase],
    stored: &HashMap<(usize, usize), String>,
) {
    let mut done = BTreeSet::new();
    for (&(c, r), name) in stored {
        let request = &cases[c].requests[r];
        if done.insert((
            request.resource.clone(),
            request.namespace.clone(),
            name.clone(),
        )) {
            state::delete_stored(client, request, name).await;
        }
    }
}

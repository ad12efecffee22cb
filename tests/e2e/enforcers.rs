//! Step 2: One rule source, three enforcers. Every case of `policies/tests`
//! becomes the requests `nodescope test` evaluates
//! ([`nodescope::cli::test_suite::cases`], with all of `policies/` at once,
//! as a cluster has them), and each request is sent to the apiserver for
//! real (`dryRun=All`, as the case's user, `pods/resize` for a resize):
//! first with the bundle's bindings installed (the apiserver enforces the
//! policies natively), then with the bindings removed and nodescope's
//! `/validate` registered as the shipped webhooks. Both answers must be the
//! dry-run engine's: the same decision, code and message.
//!
//! Cases are scheduled in rounds so that state changes rarely: the objects
//! a round's UPDATEs and DELETEs act on are created while no enforcer is on
//! (an enforcer would refuse some of them), then each enforcer is switched
//! on in turn, and the round's cases run grouped by identical params.

use crate::support::admission::{self, show, Answer, Clients};
use crate::support::cluster;
use crate::support::enforcement::{Bundle, Enforcers, Mode};
use crate::support::nodescope as ns;
use crate::support::rounds;
use crate::support::state::{self, identity, Identity, Params};
use crate::support::ControlPlane;
use kube::Client;
use nodescope::cli::test_suite::cases::{self, SuiteCase};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bounds a propagation; never a measure of speed.
const LIMIT: Duration = Duration::from_secs(30);
/// An answer that is not the engine's, unchanged this long, is final.
const SETTLED: Duration = Duration::from_secs(2);

/// Each case's answers, per mode, request by request.
#[derive(Default)]
struct Outcome {
    native: Vec<Answer>,
    webhook: Vec<Answer>,
    /// Why the case could not be sent as written.
    unsendable: Option<String>,
}

pub async fn run(plane: &ControlPlane) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cases = cases::load(&root.join("policies/tests"), Some(&root.join("policies")))
        .unwrap_or_else(|e| panic!("policies/tests: {e}"));
    give_expanded_pods_an_owner_uid(&mut cases);
    let client = plane.client().await;
    let mut clients = Clients::new(plane).await;
    let bundle = Bundle::read(root);
    for object in bundle
        .crds
        .iter()
        .chain(&bundle.policies)
        .chain(&bundle.keepers)
    {
        cluster::apply(&client, object).await;
    }
    let crd = state::lift_scope_rules(&client).await;
    let displaced = state::displace(&client, &identities(&cases, &bundle.installed)).await;
    state::namespaces(&client, &namespaces(&cases)).await;
    let users: Vec<_> = cases
        .iter()
        .flat_map(|c| c.requests.iter().map(|r| r.user.clone()))
        .collect();
    let rbac = state::authorize(&mut clients, &users).await;
    let server = ns::start(plane, &[]).await;
    let enforcers = Enforcers::new(&bundle, &server);
    let removed: Vec<String> = displaced
        .iter()
        .map(|o| {
            format!(
                "{} {}",
                o["kind"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    println!(
        "  {} cases, {} requests; absent unless a case lists them (restored after): {}",
        cases.len(),
        cases.iter().map(|c| c.requests.len()).sum::<usize>(),
        if removed.is_empty() {
            "nothing".to_owned()
        } else {
            removed.join(", ")
        }
    );

    let mut outcomes: Vec<Outcome> = cases.iter().map(|_| Outcome::default()).collect();
    let mut params = Params::new(&client);
    let rounds = rounds::schedule(&cases);
    for round in &rounds {
        let (stored, unsendable) = rounds::create_stored(&client, &cases, round, &mut params).await;
        for (c, why) in unsendable {
            outcomes[c].unsendable.get_or_insert(why);
        }
        for mode in [Mode::Native, Mode::Webhook] {
            enforcers.switch(&client, mode, true).await;
            for group in round {
                if let Err(why) = params.set(&cases[group[0]].params).await {
                    for &c in group {
                        outcomes[c].unsendable.get_or_insert_with(|| why.clone());
                    }
                    continue;
                }
                let mut fresh = true;
                for &c in group {
                    if outcomes[c].unsendable.is_some() {
                        continue;
                    }
                    for (r, request) in cases[c].requests.iter().enumerate() {
                        let name = stored.get(&(c, r)).map(String::as_str);
                        let client = clients.as_user(&request.user);
                        let answer = observe(&client, request, name, fresh).await;
                        fresh = false;
                        match mode {
                            Mode::Native => outcomes[c].native.push(answer),
                            Mode::Webhook => outcomes[c].webhook.push(answer),
                        }
                    }
                }
            }
            enforcers.switch(&client, mode, false).await;
        }
        rounds::delete_stored(&client, &cases, &stored).await;
    }
    let _ = params.set(&[]).await;

    drop(server);
    cluster::delete(&client, &rbac).await;
    for object in bundle.keepers.iter().chain(&bundle.policies) {
        cluster::delete(&client, object).await;
    }
    state::restore_scope_rules(&client, crd).await;
    state::restore(&client, &displaced).await;
    report(&cases, &outcomes, rounds.len());
}

/// Sends a request until its answer is the engine's or has settled. After
/// a change of state (`fresh`), the engine's answer must come twice: an
/// answer from before the change can be the right one by chance.
async fn observe(
    client: &Client,
    request: &cases::CaseRequest,
    stored: Option<&str>,
    fresh: bool,
) -> Answer {
    let deadline = Instant::now() + LIMIT;
    let mut last: Option<(Answer, Instant)> = None;
    loop {
        let answer = admission::send(client, request, stored).await;
        let now = Instant::now();
        let since = last.as_ref().filter(|(a, _)| *a == answer).map(|(_, t)| *t);
        let right = answer.is(&request.verdict) && (!fresh || since.is_some());
        if right || since.is_some_and(|t| now - t >= SETTLED) || now > deadline {
            return answer;
        }
        if since.is_none() {
            last = Some((answer, now));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The DaemonSet controller sets its DaemonSet's uid on the pods it
/// creates, and the apiserver refuses an ownerReference without one; the
/// expansion leaves it out when the DaemonSet (never created) has none.
fn give_expanded_pods_an_owner_uid(cases: &mut [SuiteCase]) {
    let requests = cases.iter_mut().flat_map(|c| c.requests.iter_mut());
    for request in requests.filter(|r| r.node.is_some()) {
        let owners = request
            .object
            .as_mut()
            .and_then(|o| o["metadata"]["ownerReferences"].as_array_mut());
        for owner in owners.into_iter().flatten() {
            if owner.get("uid").is_none() {
                owner["uid"] = json!("e2e-daemonset-uid");
            }
        }
    }
}

/// Every named object a case writes, acts on or reads, and what the bundle
/// installs: none may exist but as a case wants it.
fn identities(cases: &[SuiteCase], installed: &[Value]) -> Vec<Identity> {
    let mut ids = BTreeSet::new();
    for case in cases {
        ids.extend(case.params.iter().filter_map(|p| identity(p, None)));
        for request in &case.requests {
            let objects = request.object.iter().chain(&request.old_object);
            ids.extend(objects.filter_map(|o| identity(o, request.namespace.as_deref())));
        }
    }
    ids.extend(installed.iter().filter_map(|o| identity(o, None)));
    ids.into_iter().collect()
}

/// The namespaces the cases' objects live in.
fn namespaces(cases: &[SuiteCase]) -> Vec<String> {
    let mut names = BTreeSet::new();
    for case in cases {
        names.extend(
            case.params
                .iter()
                .filter_map(|p| p["metadata"]["namespace"].as_str().map(str::to_owned)),
        );
        let requests = case
            .requests
            .iter()
            .filter(|r| r.resource.2 != "namespaces");
        names.extend(requests.filter_map(|r| r.namespace.clone()));
    }
    names.into_iter().collect()
}

/// Prints the counts, each case not sent and each disagreement (the case
/// and the three answers), and fails on a disagreement.
fn report(cases: &[SuiteCase], outcomes: &[Outcome], rounds: usize) {
    let (mut sent, mut native, mut webhook, mut all) = (0, 0, 0, 0);
    let mut disagreements = Vec::new();
    for (case, outcome) in cases.iter().zip(outcomes) {
        let name = format!("{}/{}", case.suite, case.name);
        let both_refused = outcome.native.iter().zip(&outcome.webhook).find(|(n, w)| {
            matches!(n, Answer::Refused { .. }) && matches!(w, Answer::Refused { .. })
        });
        let why = outcome
            .unsendable
            .clone()
            .or_else(|| both_refused.map(|(n, _)| n.to_string()));
        if let Some(why) = why {
            println!("  not sendable: {name}: {why}");
            continue;
        }
        sent += 1;
        let agrees = |answers: &[Answer]| {
            answers.len() == case.requests.len()
                && answers
                    .iter()
                    .zip(&case.requests)
                    .all(|(a, r)| a.is(&r.verdict))
        };
        let (n, w) = (agrees(&outcome.native), agrees(&outcome.webhook));
        native += usize::from(n);
        webhook += usize::from(w);
        all += usize::from(n && w);
        if !(n && w) {
            let mut text = format!("  DISAGREE {name}");
            for (i, request) in case.requests.iter().enumerate() {
                let sub = request
                    .sub_resource
                    .as_ref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default();
                let answer = |answers: &[Answer]| {
                    answers
                        .get(i)
                        .map_or("not sent".to_owned(), |a| a.to_string())
                };
                text.push_str(&format!(
                    "\n    {} {}{sub} {} as {:?}\n      dry-run: {}\n      native:  {}\n      webhook: {}",
                    request.operation, request.resource.2, request.label, request.user.username,
                    show(&request.verdict), answer(&outcome.native), answer(&outcome.webhook)
                ));
            }
            println!("{text}");
            disagreements.push(name);
        }
    }
    let total = cases.len();
    println!("  native: {native}/{sent} cases agree with dry-run");
    println!("  webhook: {webhook}/{sent} cases agree with dry-run");
    println!(
        "  enforcers: {all}/{sent} cases agree (native, webhook, dry-run); {} not sendable; {total} cases in {rounds} rounds",
        total - sent
    );
    assert!(
        disagreements.is_empty(),
        "the enforcers disagree on {disagreements:?}"
    );
}

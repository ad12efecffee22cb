//! Step 3: a node joins. Its DaemonSet pods are created at their group's
//! value (`agent`: its zone's; `exporter`: the VPA-wide one, as no group
//! exists for a node with no usage yet; `logger`: its template), and no
//! updater pass resizes them after.

use crate::scenario::{say, until, World};
use crate::steps::{labels, name, node_of, running};
use crate::workloads::{daemonset_of, pod_resources, Targets, NS};
use std::time::Duration;

pub async fn run(world: &mut World, index: usize) -> String {
    let shape = world
        .nodes
        .register(&world.admin, index, index + 1)
        .await
        .remove(0);
    let node = shape.name.clone();
    let created = std::time::Instant::now();
    let probe = node.clone();
    let pods = until(
        world,
        &format!("{node}'s pods Running"),
        Duration::from_secs(120),
        move |w| {
            let node = probe.clone();
            Box::pin(async move {
                let pods: Vec<_> = w
                    .pods(NS)
                    .await
                    .into_iter()
                    .filter(|p| node_of(p) == node && running(p))
                    .collect();
                let balloon = w
                    .pods("kube-system")
                    .await
                    .into_iter()
                    .any(|p| node_of(&p) == node && running(&p));
                if pods.len() == 3 && balloon {
                    Ok(pods)
                } else {
                    Err(format!(
                        "{} of 3 workload pods, balloon {balloon}",
                        pods.len()
                    ))
                }
            })
        },
    )
    .await;
    let targets = Targets::read(&world.admin).await;
    for pod in &pods {
        let want = targets.expected(&daemonset_of(pod), &labels(&shape));
        assert_eq!(
            pod_resources(pod),
            [want; 3],
            "{} on {node}: not its group's value at creation",
            name(pod)
        );
    }
    // Three updater passes (2 s each): none resizes them.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let book = world.ledger.book();
    for pod in &pods {
        assert_eq!(
            book.resized_pods.get(&name(pod)),
            None,
            "{} resized after creation",
            name(pod)
        );
        assert!(
            !book.deleted_pods.contains(&name(pod)),
            "{} deleted",
            name(pod)
        );
    }
    say(world.began, &format!(
        "step 3: {node} joined ({}); its 3 pods Running at their group's value {:.1} s later, no resize in 3 updater passes",
        shape.zone,
        created.elapsed().as_secs_f64()
    ));
    node
}

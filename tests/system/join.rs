//! Step 3: a node joins. Its DaemonSet pods are created at their group's
//! value (`agent`: its zone's; `exporter`: the VPA-wide one, as no group
//! exists for a node with no usage yet; `logger`: its template), and no
//! updater pass resizes them after.

use crate::scenario::{say, World};
use crate::steps::{labels, name, node_pods, untouched};
use crate::workloads::{daemonset_of, pod_resources, Targets};
use std::time::Duration;

pub async fn run(world: &mut World, index: usize) -> String {
    let shape = world.nodes.join(&world.admin, index).await;
    let node = shape.name.clone();
    let created = std::time::Instant::now();
    // Its workload pods only: the step is about their sizing at creation.
    let pods = node_pods(world, &node, false).await;
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
    untouched(&world.ledger.book(), &pods);
    say(
        world.began,
        &format!(
            "step 3: {node} joined ({}); its 3 pods Running at their group's value {:.1} s later, no resize in 3 updater passes",
            shape.zone,
            created.elapsed().as_secs_f64()
        ),
    );
    node
}

//! Fault 2: the leading updater is killed (SIGKILL) in the middle of a
//! pass. The other replica takes the Lease once it expires (within the
//! duration plus 2 s of the dead leader's last renewal) and finishes the
//! work: every pod resized exactly once for the one recommendation, never
//! more pods disrupted at once than the tolerance, across the hand-over.

use super::{agent_resized_once, at_groups, holder, recommend};
use crate::ledger::Book;
use crate::scenario::{say, until, World, TOLERANCE};
use std::time::{Duration, Instant};

pub const REPLICAS: [&str; 2] = ["nodescope-updater-a", "nodescope-updater-b"];
const LEASE: (&str, &str) = ("nodescope-system", "nodescope-updater");

pub async fn run(world: &mut World) {
    let before = holder(world, LEASE.0, LEASE.1)
        .await
        .unwrap_or_else(|| panic!("no one holds the updater's Lease"));
    assert!(
        REPLICAS.contains(&before.holder.as_str()),
        "{}",
        before.holder
    );
    let nodes = world.nodes.all().len();
    let limit = (nodes as f64 * TOLERANCE) as usize;
    world.ledger.reset();
    world.ledger.measure(true);
    recommend(world, "agent", 4, 3).await;
    // Mid-pass: some pods resized, most not.
    let done = until(
        world,
        "the leader's first resizes",
        Duration::from_secs(60),
        |w| {
            Box::pin(async move {
                let resized = Book::count(&w.ledger.book().resized, "agent");
                if resized >= 3 {
                    Ok(resized)
                } else {
                    Err(format!("{resized} resized"))
                }
            })
        },
    )
    .await;
    let leader = before.holder.clone();
    let killed_at = k8s_openapi::jiff::Timestamp::now().as_microsecond() as f64 / 1e6;
    let killed = Instant::now();
    world.component_mut(&leader).stop(true);
    let last = holder(world, LEASE.0, LEASE.1)
        .await
        .unwrap_or_else(|| panic!("the Lease is gone"));
    let probe = leader.clone();
    let after = until(
        world,
        "the other updater leads",
        Duration::from_secs(60),
        move |w| {
            let dead = probe.clone();
            Box::pin(async move {
                match holder(w, LEASE.0, LEASE.1).await {
                    Some(h) if h.holder != dead => Ok(h),
                    Some(h) => Err(format!("{} still holds it", h.holder)),
                    None => Err("no holder".to_owned()),
                }
            })
        },
    )
    .await;
    let handover = after.acquired - last.renewed;
    let from_kill = after.acquired - killed_at;
    assert!(
        handover >= last.duration && handover <= last.duration + 2.0,
        "the hand-over took {handover:.2} s from the last renewal; the Lease lasts {} s",
        last.duration
    );
    assert!(
        from_kill <= last.duration + 2.0,
        "the hand-over took {from_kill:.2} s from the kill"
    );
    let (_, pods) = at_groups(
        world,
        "every pod at its group after the hand-over",
        world.scaled(180),
    )
    .await;
    let agents = agent_resized_once(world, &pods, None, "across the hand-over");
    let book = world.ledger.book();
    assert_eq!(Book::count(&book.resized, "agent"), agents);
    let most = Book::count(&book.max_disrupted, "agent");
    assert!(
        most <= limit,
        "agent: {most} pods disrupted at once across the hand-over, above the tolerance {limit}"
    );
    world.ledger.measure(false);
    // Its Deployment would start another; here the same one comes back.
    world.component_mut(&leader).restart();
    world.follow();
    let leaders = world
        .prometheus
        .value("sum(nodescope_updater_leader)")
        .await;
    say(world.began, &format!(
        "fault 2: leader {leader} killed after {done} of {} resizes; {} led {handover:.2} s after the last renewal ({from_kill:.2} s after the kill; Lease {} s) and finished; each pod resized once, most at once {most} (tolerance {limit}), 0 evictions; all at group {:.1} s after the kill, {:.1} s after the new leader took over ({}); updater leaders now {leaders:?}",
        agents,
        after.holder,
        last.duration,
        killed.elapsed().as_secs_f64(),
        killed.elapsed().as_secs_f64() - from_kill,
        world.report.floor.beside(agents.saturating_sub(done), killed.elapsed().as_secs_f64() - from_kill),
    ));
}

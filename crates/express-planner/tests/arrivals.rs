//! Property test for DESIGN section 3 rule 8: however one target desired state arrives (objects
//! written one at a time, in any order, at any times; nodes changed, set down, added; explicit
//! prerequisites among them), no new change starts before the desired state has settled, and
//! once it has, the cluster changes in exactly the order an atomic change gives.

#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

mod support;

use express_api::DeploymentDependencies;
use express_planner::{ClusterSnapshot, DesiredMark, NodeObservation, plan};
use proptest::prelude::*;
use support::*;

const T0: i64 = 1_700_000_000_000;

/// One delivery: which nodes exist before, what each becomes, the order and the gaps.
#[derive(Clone, Debug)]
struct Delivery {
    names: Vec<String>,
    /// Absent before the delivery.
    added: Vec<bool>,
    /// Desired revision becomes NEW (else stays OLD).
    upgraded: Vec<bool>,
    /// Set down by the delivery.
    down: Vec<bool>,
    /// Explicit upgrade prerequisite on the node ranked just before (acyclic by construction).
    explicit: Vec<bool>,
    rank: Vec<usize>,
    /// Order in which the delivery writes the objects (indices into `names`).
    order: Vec<usize>,
    /// Milliseconds between two writes.
    gaps: Vec<i64>,
    /// Every object carries `express.dev/rollout-id` (r1 before, r2 after); else the window.
    barrier: bool,
    settle_seconds: u32,
}

fn arb_delivery() -> impl Strategy<Value = Delivery> {
    (1..=2usize, 1..=7usize, any::<bool>(), 1..=4u32)
        .prop_flat_map(|(backends, frontends, barrier, settle_seconds)| {
            let names = node_names(backends, frontends);
            let n = names.len();
            let settle_ms = i64::from(settle_seconds) * 1000;
            // The window is what decides without ids: gaps shorter than it. The barrier must
            // hold whatever the gaps.
            let gap_limit = if barrier { 5 * settle_ms } else { settle_ms };
            (
                Just(names),
                prop::collection::vec(prop_oneof![5 => Just(false), 1 => Just(true)], n),
                prop::collection::vec(any::<bool>(), n),
                prop::collection::vec(prop_oneof![7 => Just(false), 1 => Just(true)], n),
                prop::collection::vec(prop_oneof![3 => Just(false), 1 => Just(true)], n),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                prop::collection::vec(0..gap_limit, n),
                Just(barrier),
                Just(settle_seconds),
            )
        })
        .prop_map(
            |(names, added, upgraded, down, explicit, rank, order, gaps, barrier, settle)| {
                Delivery {
                    names,
                    added,
                    upgraded,
                    down,
                    explicit,
                    rank,
                    order,
                    gaps,
                    barrier,
                    settle_seconds: settle,
                }
            },
        )
}

impl Delivery {
    /// The node as the delivery writes it.
    fn target(&self, i: usize) -> NodeObservation {
        let mut node = node(&self.names[i], Pod::Missing);
        let revision = if self.upgraded[i] { NEW } else { OLD };
        node.desired.as_mut().unwrap().revision = revision.into();
        node.up = !self.down[i];
        if self.explicit[i] && self.rank[i] > 0 {
            let before = self
                .rank
                .iter()
                .position(|&r| r == self.rank[i] - 1)
                .unwrap();
            node.dependencies = Some(DeploymentDependencies {
                upgrade_prerequisites: Some(vec![prerequisite(&self.names[before])]),
                ..DeploymentDependencies::default()
            });
        }
        node.rollout_id = self.barrier.then(|| "r2".into());
        node
    }

    /// The node before the delivery: up, Ready on OLD, recorded long ago.
    fn before(&self, i: usize) -> NodeObservation {
        let mut node = node(&self.names[i], Pod::Old);
        node.desired.as_mut().unwrap().revision = OLD.into();
        node.rollout_id = self.barrier.then(|| "r1".into());
        node.recorded_desired = Some(DesiredMark {
            revision: Some(OLD.into()),
            up: true,
            rollout_id: node.rollout_id.clone(),
            ordering: None,
            since_ms: T0,
        });
        node
    }

    /// A pod follows the node: the target keeps the pod the node had before.
    fn with_pod(&self, i: usize, mut target: NodeObservation) -> NodeObservation {
        target.pod = (!self.added[i]).then(|| pod(OLD, true));
        target
    }

    fn snapshot(&self, nodes: Vec<NodeObservation>) -> ClusterSnapshot {
        let mut s = cluster(&[]);
        s.nodes = nodes;
        s.settings.settle_seconds = self.settle_seconds;
        s
    }

    /// The objects the delivery writes, in its order: without ids only those that change; with
    /// ids every object (its annotation changes).
    fn writes(&self) -> Vec<usize> {
        let changes = |&i: &usize| {
            let before = self.before(i);
            let target = self.with_pod(i, self.target(i));
            self.added[i]
                || self.barrier
                || before.desired != target.desired
                || before.up != target.up
                || before.dependencies != target.dependencies
        };
        let mut writes: Vec<usize> = self.order.iter().copied().filter(changes).collect();
        if self.barrier {
            // A barrier cannot wait for an object it has never seen: the delivery's last write
            // is an object that existed and stays up (as a chart's always is: it rewrites every
            // object).
            if let Some(position) = writes
                .iter()
                .rposition(|&i| !self.added[i] && !self.down[i])
            {
                let last = writes.remove(position);
                writes.push(last);
            }
        }
        writes
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn nothing_starts_before_the_desired_state_settles_and_then_the_order_is_atomic(
        d in arb_delivery()
    ) {
        let n = d.names.len();
        let writes = d.writes();
        prop_assume!(!writes.is_empty());
        let barrier_holds = d.barrier
            && writes.last().is_some_and(|&i| !d.added[i] && !d.down[i]);
        prop_assume!(!d.barrier || barrier_holds);

        // Before: every node that exists runs OLD, settled long ago.
        let mut live = d.snapshot((0..n).filter(|&i| !d.added[i]).map(|i| d.before(i)).collect());
        let settle_ms = i64::from(d.settle_seconds) * 1000;
        let mut now = T0 + 100_000;
        for (k, &i) in writes.iter().enumerate() {
            // The write lands.
            let target = d.with_pod(i, d.target(i));
            match live.nodes.iter_mut().find(|node| node.name == target.name) {
                Some(node) => {
                    let recorded = node.recorded_desired.clone();
                    *node = NodeObservation { recorded_desired: recorded, ..target };
                }
                None => live.nodes.push(target),
            }
            let last = k + 1 == writes.len();
            // Probe at the write and just before the next one (or, after the last write, just
            // before the state settles).
            let next = if last {
                if d.barrier { now } else { now + settle_ms - 1 }
            } else {
                now + d.gaps[k]
            };
            for at in [now, next.saturating_sub(1).max(now)] {
                let p = plan(&live, at);
                if !(last && d.barrier) {
                    // Nothing new starts. Without ids the window explains why; with ids the
                    // barrier does, or nothing that takes part in it has been written yet.
                    prop_assert!(
                        p.actions.is_empty(),
                        "started {:?} before the state settled (write {k} of {})",
                        p.actions.iter().map(|a| &a.name).collect::<Vec<_>>(), writes.len()
                    );
                    if !d.barrier {
                        prop_assert!(
                            !p.settle.is_settled(),
                            "settled {} ms after write {k} of {}", at - now, writes.len()
                        );
                    }
                }
                record_marks(&mut live, &p);
            }
            if !last {
                now += d.gaps[k];
            }
        }

        // Settled: from here the delivered cluster and an atomic change go the same way.
        let settled_at = if d.barrier { now } else { now + settle_ms };
        prop_assert!(plan(&live, settled_at).settle.is_settled());
        let mut delivered = Driver::new(live);
        delivered.now_ms = settled_at;
        prop_assert!(delivered.run_to_end());

        let mut atomic = d.snapshot((0..n).map(|i| d.with_pod(i, d.target(i))).collect());
        atomic.settings.settle_seconds = 0;
        let mut atomic = Driver::new(atomic);
        prop_assert!(atomic.run_to_end());
        prop_assert_eq!(delivered.started, atomic.started);
    }
}

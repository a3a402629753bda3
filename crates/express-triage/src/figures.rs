//! The fleet view as numbers, for the operator's metrics: alerts can then triage continuously
//! what `doctor` triages on demand (spread, backlog, rollouts under way).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use crate::{Symptom, Tenant};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetFigures {
    pub tenants: usize,
    /// Per symptom (every symptom, zeros included): unhealthy tenants and their namespaces.
    pub unhealthy: BTreeMap<Symptom, (usize, usize)>,
    pub rollouts_in_progress: usize,
    /// How long the oldest spec change the operator has not observed has waited (0: none).
    pub oldest_unobserved_seconds: i64,
}

pub fn fleet_figures(tenants: &[Tenant], now: Timestamp) -> FleetFigures {
    let mut unhealthy: BTreeMap<Symptom, (usize, BTreeSet<&str>)> = Symptom::ALL
        .iter()
        .map(|s| (*s, (0, BTreeSet::new())))
        .collect();
    for tenant in tenants {
        for symptom in &tenant.symptoms {
            let entry = unhealthy.entry(*symptom).or_default();
            entry.0 += 1;
            entry.1.insert(&tenant.namespace);
        }
    }
    FleetFigures {
        tenants: tenants.len(),
        unhealthy: unhealthy
            .into_iter()
            .map(|(s, (count, namespaces))| (s, (count, namespaces.len())))
            .collect(),
        rollouts_in_progress: tenants
            .iter()
            .filter(|t| t.rollout.as_ref().is_some_and(|r| r.active()))
            .count(),
        oldest_unobserved_seconds: tenants
            .iter()
            .filter(|t| t.observed_generation < Some(t.generation))
            .filter_map(|t| t.spec_changed)
            .map(|changed| (now.as_second() - changed.as_second()).max(0))
            .max()
            .unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rollout;

    #[test]
    fn counts_symptoms_namespaces_rollouts_and_the_oldest_unobserved_change() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let ago = |s: i64| Timestamp::from_second(1_800_000_000 - s).unwrap();
        let tenant = |ns: &str, symptoms: Vec<Symptom>| Tenant {
            namespace: ns.into(),
            cluster: "c".into(),
            generation: 1,
            observed_generation: Some(1),
            symptoms,
            ..Tenant::default()
        };
        let mut behind = tenant("c", Vec::new());
        behind.generation = 4;
        behind.spec_changed = Some(ago(90));
        let mut older = tenant("d", Vec::new());
        older.generation = 2;
        older.spec_changed = Some(ago(300));
        let mut rolling = tenant("e", vec![Symptom::NodesNotReady]);
        rolling.rollout = Some(Rollout {
            state: Some("Progressing".into()),
            ..Rollout::default()
        });
        let figures = fleet_figures(
            &[
                tenant("a", vec![Symptom::NodesNotReady, Symptom::Failed]),
                tenant("a", vec![Symptom::NodesNotReady]),
                tenant("b", vec![Symptom::NodesNotReady]),
                behind,
                older,
                rolling,
            ],
            now,
        );
        assert_eq!(figures.tenants, 6);
        assert_eq!(figures.unhealthy[&Symptom::NodesNotReady], (4, 3));
        assert_eq!(figures.unhealthy[&Symptom::Failed], (1, 1));
        assert_eq!(
            figures.unhealthy[&Symptom::InvalidSpec],
            (0, 0),
            "zeros too"
        );
        assert_eq!(figures.unhealthy.len(), Symptom::ALL.len());
        assert_eq!(figures.rollouts_in_progress, 1);
        assert_eq!(figures.oldest_unobserved_seconds, 300);
        assert_eq!(
            fleet_figures(&[], now),
            FleetFigures {
                unhealthy: Symptom::ALL.iter().map(|s| (*s, (0, 0))).collect(),
                ..FleetFigures::default()
            }
        );
    }
}

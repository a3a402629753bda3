//! `express.dev/v1alpha1`, the hub every version converts through: the three custom resource
//! kinds of DESIGN section 2 and their status (section 7): the node kinds, `Backend` and
//! `Frontend`, with the spec and status they share ([`node`]), and the `ExpressCluster` that
//! gives its nodes defaults and reports on them ([`cluster`]). Re-exported at the crate's root.
//!
//! `Backend` and `Frontend` share one schema, [`NodeSpec`]; each kind wraps it in a transparent
//! newtype so that kube-derive can give each its own `kind` while the rest of the code handles
//! nodes uniformly through [`NodeSpec`].

mod cluster;
mod node;

pub use cluster::*;
pub use node::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_wire_names() {
        for phase in NodePhase::ALL {
            assert_eq!(
                serde_json::to_value(phase).ok(),
                Some(phase.as_str().into())
            );
        }
        for state in [
            RolloutState::Progressing,
            RolloutState::Complete,
            RolloutState::Paused,
            RolloutState::Blocked,
            RolloutState::Failed,
            RolloutState::Aborted,
            RolloutState::RollingBack,
        ] {
            assert_eq!(
                serde_json::to_value(state).ok(),
                Some(state.as_str().into())
            );
        }
    }

    #[test]
    fn an_unknown_rollout_state_reads_as_absent() {
        let read = |state: serde_json::Value| -> RolloutStatus {
            serde_json::from_value(serde_json::json!({"state": state, "order": ["a"]}))
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(
            read("RollingBack".into()).state,
            Some(RolloutState::RollingBack)
        );
        let unknown = read("Exploded".into());
        assert_eq!((unknown.state, unknown.order), (None, vec!["a".to_owned()]));
        assert_eq!(read(serde_json::Value::Null).state, None);
    }

    /// Two operator builds share one API server while a ring runs a canary: each reads the
    /// other's ExpressCluster status. What a newer build may write (a phase, rollout state or
    /// field this build does not know, a reshaped owner) reads as unknown, never as an error.
    #[test]
    fn a_status_written_by_another_build_is_read() {
        let newer = serde_json::json!({
            "observedGeneration": 3,
            "phase": "Hibernating",
            "rollout": {"state": "Canarying", "order": ["a"], "wave": 2},
            "operator": {"ring": "canary", "version": "9.0.0", "shard": 4,
                         "released": "not a time"},
            "newField": {"anything": true},
            "message": "from the future"
        });
        let status: ExpressClusterStatus =
            serde_json::from_value(newer).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(status.phase, None);
        assert_eq!(status.rollout.as_ref().and_then(|r| r.state), None);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            status.operator,
            Some(OperatorStatus {
                ring: "canary".into(),
                version: "9.0.0".into(),
                released: None,
                adopting: false,
            })
        );

        // An owner in a shape this build cannot read is an unknown ring, never "nobody's"
        // (which would be the default ring's: two operators would act).
        let reshaped: ExpressClusterStatus =
            serde_json::from_value(serde_json::json!({"operator": {"ring": {"name": "canary"}}}))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(reshaped.operator, Some(OperatorStatus::default()));

        // And what this build writes, an older one without rings reads (it ignores `operator`).
        let ours = ExpressClusterStatus {
            operator: Some(OperatorStatus {
                ring: "default".into(),
                version: "1.0.0".into(),
                ..OperatorStatus::default()
            }),
            ..ExpressClusterStatus::default()
        };
        let written = serde_json::to_value(&ours).unwrap_or_default();
        assert_eq!(
            written["operator"],
            serde_json::json!({"ring": "default", "version": "1.0.0"})
        );
    }
}

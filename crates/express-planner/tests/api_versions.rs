//! The API's versions in one DC (DESIGN section 18): each step of a version's release as a table
//! case, and the rules as properties over any DC a build may meet: never serves a version a pod
//! behind the webhook does not know, never moves storage before every ring knows it, never trims
//! before every object is rewritten, never takes anything away, and gets there once every build
//! knows.

use express_planner::api_versions::{
    BuildCrd, Builds, CannotRead, DcCrd, Listed, Migration, Stage, Step, Waiting, cannot_read,
    dc_stage, dc_versions, next_step, next_step_at, renames_ahead, stage, versions_after,
};
use proptest::prelude::*;

const ALPHA: &str = "v1alpha1";
const BETA: &str = "v1beta1";

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

fn listed(name: &str, served: bool, storage: bool) -> Listed {
    Listed {
        name: name.to_owned(),
        served,
        storage,
    }
}

fn dc(versions: Vec<Listed>, stored: &[&str], migration: Option<Migration>) -> DcCrd {
    DcCrd {
        name: "backends.express.dev".into(),
        versions,
        stored_versions: strings(stored),
        migration,
        webhook_trusted: true,
    }
}

fn build() -> BuildCrd {
    BuildCrd {
        name: "backends.express.dev".into(),
        versions: strings(&[ALPHA, BETA]),
        storage: BETA.into(),
    }
}

fn builds(rings: &[(&str, Option<&[&str]>)], pods: &[(&str, &[&str])]) -> Builds {
    Builds {
        rings: rings
            .iter()
            .map(|(r, k)| ((*r).to_owned(), k.map(strings)))
            .collect(),
        webhook_pods: pods
            .iter()
            .map(|(p, k)| ((*p).to_owned(), strings(k)))
            .collect(),
    }
}

const BOTH: &[&str] = &[ALPHA, BETA];
const OLD: &[&str] = &[ALPHA];

fn migration(to: &str, rewritten: u64, total: Option<u64>, complete: bool) -> Migration {
    Migration {
        to: to.into(),
        rewritten,
        total,
        complete,
        storage_moved_at: None,
    }
}

#[test]
fn every_step_of_a_versions_release_as_a_table() {
    let released = builds(
        &[("default", Some(BOTH)), ("canary", Some(BOTH))],
        &[("op-a", BOTH), ("op-b", BOTH)],
    );
    let mid_release = builds(
        &[("default", Some(OLD)), ("canary", Some(BOTH))],
        &[("op-canary", BOTH)],
    );
    let alpha_only = vec![listed(ALPHA, true, true)];
    let listed_unserved = vec![listed(ALPHA, true, true), listed(BETA, false, false)];
    let served = vec![listed(ALPHA, true, true), listed(BETA, true, false)];
    let moved = vec![listed(ALPHA, true, false), listed(BETA, true, true)];
    let cases: Vec<(&str, DcCrd, Builds, Step)> = vec![
        (
            "the release starts: v1beta1 listed, not served",
            dc(alpha_only.clone(), &[ALPHA], None),
            mid_release.clone(),
            Step::List(strings(&[BETA])),
        ),
        (
            "listed; an older build's pod is still behind the webhook",
            dc(listed_unserved.clone(), &[ALPHA], None),
            builds(
                &[("canary", Some(BOTH))],
                &[("op-old", OLD), ("op-canary", BOTH)],
            ),
            Step::Wait(Waiting::WebhookPodsBehind(strings(&["op-old"]))),
        ),
        (
            "listed; nobody serves the webhook",
            dc(listed_unserved.clone(), &[ALPHA], None),
            builds(&[("canary", Some(BOTH))], &[]),
            Step::Wait(Waiting::NoWebhookPod),
        ),
        (
            "listed; only pods that know it behind the webhook: served",
            dc(listed_unserved.clone(), &[ALPHA], None),
            mid_release.clone(),
            Step::Serve(strings(&[BETA])),
        ),
        (
            "served; a ring still runs the older build: storage stays",
            dc(served.clone(), &[ALPHA], None),
            mid_release.clone(),
            Step::Wait(Waiting::RingsBehind(strings(&["default"]))),
        ),
        (
            "served; a ring does not say what its build knows: storage stays",
            dc(served.clone(), &[ALPHA], None),
            builds(
                &[("default", None), ("canary", Some(BOTH))],
                &[("op", BOTH)],
            ),
            Step::Wait(Waiting::RingsBehind(strings(&["default"]))),
        ),
        (
            "served; every ring knows it: storage moves",
            dc(served.clone(), &[ALPHA], None),
            released.clone(),
            Step::MoveStorage {
                from: ALPHA.into(),
                to: BETA.into(),
            },
        ),
        (
            "storage moved: the objects are rewritten",
            dc(moved.clone(), &[ALPHA, BETA], None),
            released.clone(),
            Step::Migrate { to: BETA.into() },
        ),
        (
            "a page rewritten, more to go",
            dc(
                moved.clone(),
                &[ALPHA, BETA],
                Some(migration(BETA, 500, Some(1200), false)),
            ),
            released.clone(),
            Step::Migrate { to: BETA.into() },
        ),
        (
            "a migration to another version does not count",
            dc(
                moved.clone(),
                &[ALPHA, BETA],
                Some(migration(ALPHA, 1200, Some(1200), true)),
            ),
            released.clone(),
            Step::Migrate { to: BETA.into() },
        ),
        (
            "every object rewritten: storedVersions trimmed",
            dc(
                moved.clone(),
                &[ALPHA, BETA],
                Some(migration(BETA, 1200, Some(1200), true)),
            ),
            released.clone(),
            Step::Trim {
                to: BETA.into(),
                drop: strings(&[ALPHA]),
            },
        ),
        (
            "trimmed: done",
            dc(
                moved.clone(),
                &[BETA],
                Some(migration(BETA, 1200, Some(1200), true)),
            ),
            released.clone(),
            Step::Done,
        ),
        (
            "a DC that lists a version this build does not know is left as it is",
            dc(
                vec![
                    listed(ALPHA, true, false),
                    listed(BETA, true, false),
                    listed("v1", true, true),
                ],
                &["v1"],
                None,
            ),
            released.clone(),
            Step::Ahead(strings(&["v1"])),
        ),
    ];
    for (name, dc, builds, expected) in cases {
        assert_eq!(next_step(&dc, &build(), &builds), expected, "{name}");
    }
}

#[test]
fn a_version_is_served_only_once_its_webhook_has_a_ca_bundle() {
    // The release applied the build's CRDs, naming the webhook by URL; the operator serving it
    // writes its authority into the caBundle on its next pass. Until then no read at v1beta1
    // could be converted, and kubectl reads at the newest version served.
    let listed_unserved = DcCrd {
        webhook_trusted: false,
        ..dc(
            vec![listed(ALPHA, true, true), listed(BETA, false, false)],
            &[ALPHA],
            None,
        )
    };
    let every_pod_knows = builds(
        &[("default", Some(&[ALPHA]))],
        &[("canary-1", &[ALPHA, BETA])],
    );
    assert_eq!(
        next_step_at(&listed_unserved, &build(), &every_pod_knows, 0),
        Step::Wait(Waiting::WebhookNotTrusted)
    );
    let trusted = DcCrd {
        webhook_trusted: true,
        ..listed_unserved
    };
    assert_eq!(
        next_step_at(&trusted, &build(), &every_pod_knows, 0),
        Step::Serve(strings(&[BETA]))
    );
    assert!(
        Waiting::WebhookNotTrusted
            .to_string()
            .contains("no caBundle")
    );
}

#[test]
fn the_rewrite_waits_a_while_after_the_storage_move_and_never_once_begun() {
    let everyone = builds(&[("default", Some(BOTH))], &[("op", BOTH)]);
    let moved_at = |rewritten: u64| {
        dc(
            vec![listed(ALPHA, true, false), listed(BETA, true, true)],
            &[ALPHA, BETA],
            Some(Migration {
                storage_moved_at: Some(1_000),
                ..migration(BETA, rewritten, None, false)
            }),
        )
    };
    assert_eq!(
        next_step_at(&moved_at(0), &build(), &everyone, 1_010),
        Step::Wait(Waiting::StorageSettling { until: 1_030 })
    );
    assert_eq!(
        next_step_at(&moved_at(0), &build(), &everyone, 1_030),
        Step::Migrate { to: BETA.into() }
    );
    // Begun already (a restart mid-way): it goes on.
    assert_eq!(
        next_step_at(&moved_at(200), &build(), &everyone, 1_010),
        Step::Migrate { to: BETA.into() }
    );
    // Any other step is next_step's.
    let served = dc(
        vec![listed(ALPHA, true, true), listed(BETA, true, false)],
        &[ALPHA],
        None,
    );
    assert_eq!(
        next_step_at(&served, &build(), &everyone, 0),
        next_step(&served, &build(), &everyone)
    );
}

#[test]
fn a_build_that_stores_at_an_older_version_leaves_a_dc_that_moved_on() {
    let older_build = BuildCrd {
        storage: ALPHA.into(),
        ..build()
    };
    let moved = dc(
        vec![listed(ALPHA, true, false), listed(BETA, true, true)],
        &[BETA],
        None,
    );
    let everyone = builds(&[("default", Some(BOTH))], &[("op", BOTH)]);
    assert_eq!(
        next_step(&moved, &older_build, &everyone),
        Step::Ahead(strings(&[BETA]))
    );
}

#[test]
fn the_stage_says_how_far_a_dc_has_come() {
    let cases = [
        (
            dc(vec![listed(ALPHA, true, true)], &[ALPHA], None),
            Stage::Behind,
            "not listed",
        ),
        (
            dc(
                vec![listed(ALPHA, true, true), listed(BETA, false, false)],
                &[ALPHA],
                None,
            ),
            Stage::Listed,
            "listed, not served",
        ),
        (
            dc(
                vec![listed(ALPHA, true, true), listed(BETA, true, false)],
                &[ALPHA],
                None,
            ),
            Stage::Served,
            "served",
        ),
        (
            dc(
                vec![listed(ALPHA, true, false), listed(BETA, true, true)],
                &[ALPHA, BETA],
                Some(migration(BETA, 500, Some(1200), false)),
            ),
            Stage::Migrating {
                rewritten: 500,
                total: Some(1200),
            },
            "storage moved, migrated 500/1200",
        ),
        (
            dc(
                vec![listed(ALPHA, true, false), listed(BETA, true, true)],
                &[BETA],
                None,
            ),
            Stage::Trimmed,
            "trimmed",
        ),
    ];
    for (dc, expected, words) in cases {
        let got = stage(&dc, &build());
        assert_eq!(got, expected);
        assert_eq!(got.to_string(), words);
    }
    // A DC: its least advanced CRD; a CRD the DC lacks is behind.
    let trimmed = dc(
        vec![listed(ALPHA, true, false), listed(BETA, true, true)],
        &[BETA],
        None,
    );
    let other = BuildCrd {
        name: "frontends.express.dev".into(),
        ..build()
    };
    assert_eq!(
        dc_stage(std::slice::from_ref(&trimmed), &[build()]),
        Stage::Trimmed
    );
    assert_eq!(dc_stage(&[trimmed], &[build(), other]), Stage::Behind);
}

#[test]
fn a_dc_says_where_its_versions_stand_from_its_crds_alone() {
    let one = dc(vec![listed(ALPHA, true, true)], &[ALPHA], None);
    assert_eq!(dc_versions(std::slice::from_ref(&one)), None);
    let served = dc(
        vec![listed(ALPHA, true, true), listed(BETA, true, false)],
        &[ALPHA],
        None,
    );
    let migrating = dc(
        vec![listed(ALPHA, true, false), listed(BETA, true, true)],
        &[ALPHA, BETA],
        Some(migration(BETA, 3, Some(7), false)),
    );
    let trimmed = dc(
        vec![listed(BETA, true, true), listed(ALPHA, true, false)],
        &[BETA],
        None,
    );
    assert_eq!(
        dc_versions(&[one.clone(), served.clone()]).as_deref(),
        Some("v1beta1: served")
    );
    assert_eq!(
        dc_versions(&[migrating.clone(), trimmed.clone()]).as_deref(),
        Some("v1beta1: storage moved, migrated 3/7"),
        "the least advanced CRD"
    );
    assert_eq!(dc_versions(&[trimmed]).as_deref(), Some("v1beta1: trimmed"));
}

#[test]
fn people_are_told_what_v1beta1_renames_while_it_is_listed_and_newly_served() {
    let step = |crd: DcCrd| dc_versions(&[crd]).unwrap_or_default();
    let listed_unserved = step(dc(
        vec![listed(ALPHA, true, true), listed(BETA, false, false)],
        &[ALPHA],
        None,
    ));
    let served = step(dc(
        vec![listed(ALPHA, true, true), listed(BETA, true, false)],
        &[ALPHA],
        None,
    ));
    let moved = step(dc(
        vec![listed(ALPHA, true, false), listed(BETA, true, true)],
        &[ALPHA, BETA],
        Some(migration(BETA, 3, Some(7), false)),
    ));
    // Before it is served: the release's event and the CLI.
    assert!(renames_ahead(&listed_unserved, false), "{listed_unserved}");
    assert!(renames_ahead(&listed_unserved, true));
    // Served: the CLI still says it, the event no longer (it would come after the fact).
    assert!(!renames_ahead(&served, false), "{served}");
    assert!(renames_ahead(&served, true));
    assert!(!renames_ahead(&moved, true), "{moved}");
    assert!(!renames_ahead("", true));
}

#[test]
fn a_build_refuses_to_lead_where_it_cannot_read_what_is_stored() {
    let moved = dc(
        vec![listed(ALPHA, true, false), listed(BETA, true, true)],
        &[BETA],
        None,
    );
    assert_eq!(
        cannot_read(std::slice::from_ref(&moved), &strings(BOTH), ALPHA),
        Vec::<CannotRead>::new()
    );
    let [problem] = <[CannotRead; 1]>::try_from(cannot_read(&[moved], &strings(OLD), ALPHA))
        .unwrap_or_else(|p| panic!("one problem expected: {p:?}"));
    assert_eq!(problem.crd, "backends.express.dev");
    assert!(problem.why.contains("stored at v1beta1"), "{}", problem.why);
    let alpha_gone = dc(
        vec![listed(ALPHA, false, false), listed(BETA, true, true)],
        &[BETA],
        None,
    );
    let problems = cannot_read(&[alpha_gone], &strings(BOTH), ALPHA);
    assert!(
        problems[0].why.contains("no longer serves v1alpha1"),
        "{problems:?}"
    );
}

// ---- properties ----

const VERSIONS: [&str; 3] = [ALPHA, BETA, "v1"];

fn a_known_set() -> impl Strategy<Value = Vec<String>> {
    // What a build knows: the versions up to some point, oldest first.
    (1usize..=3).prop_map(|n| VERSIONS[..n].iter().map(|v| (*v).to_owned()).collect())
}

fn a_dc_crd() -> impl Strategy<Value = DcCrd> {
    (
        proptest::collection::vec((0usize..3, any::<bool>()), 1..4),
        0usize..4,
        proptest::collection::vec(0usize..3, 0..3),
        proptest::option::of((
            0usize..3,
            0u64..2000,
            proptest::option::of(0u64..2000),
            any::<bool>(),
        )),
    )
        .prop_map(|(versions, storage_at, stored, migration)| {
            let mut seen = Vec::new();
            let mut listed_versions = Vec::new();
            for (i, served) in versions {
                if seen.contains(&i) {
                    continue;
                }
                seen.push(i);
                listed_versions.push(listed(VERSIONS[i], served, false));
            }
            let storage_index = storage_at % listed_versions.len().max(1);
            if let Some(v) = listed_versions.get_mut(storage_index) {
                v.storage = true;
            }
            DcCrd {
                name: "backends.express.dev".into(),
                versions: listed_versions,
                stored_versions: stored.into_iter().map(|i| VERSIONS[i].to_owned()).collect(),
                migration: migration.map(|(to, rewritten, total, complete)| Migration {
                    to: VERSIONS[to].into(),
                    rewritten,
                    total,
                    complete,
                    storage_moved_at: None,
                }),
                webhook_trusted: true,
            }
        })
}

fn some_builds() -> impl Strategy<Value = Builds> {
    (
        proptest::collection::vec(proptest::option::of(a_known_set()), 0..4),
        proptest::collection::vec(a_known_set(), 0..4),
    )
        .prop_map(|(rings, pods)| Builds {
            rings: rings
                .into_iter()
                .enumerate()
                .map(|(i, k)| (format!("ring-{i}"), k))
                .collect(),
            webhook_pods: pods
                .into_iter()
                .enumerate()
                .map(|(i, k)| (format!("pod-{i}"), k))
                .collect(),
        })
}

fn a_build() -> impl Strategy<Value = BuildCrd> {
    (a_known_set(), 0usize..3).prop_map(|(versions, storage)| BuildCrd {
        name: "backends.express.dev".into(),
        storage: versions[storage % versions.len()].clone(),
        versions,
    })
}

/// A build and a DC near it: mostly the build's versions, in any state of their release (and
/// sometimes one the build does not know), so that every step is met often.
fn a_build_and_a_dc_near_it() -> impl Strategy<Value = (BuildCrd, DcCrd)> {
    (a_build(), a_dc_crd()).prop_flat_map(|(build, random)| {
        let n = build.versions.len();
        (
            Just(build),
            Just(random),
            proptest::collection::vec((prop::bool::weighted(0.85), prop::bool::weighted(0.7)), n),
            0usize..n,
            proptest::collection::vec(0usize..n, 0..3),
            proptest::option::of((0usize..n, any::<bool>())),
            prop::bool::weighted(0.1),
            prop::bool::weighted(0.15),
        )
            .prop_map(
                |(build, random, flags, storage, stored, migration, unknown, use_random)| {
                    if use_random {
                        return (build, random);
                    }
                    let mut versions: Vec<Listed> = build
                        .versions
                        .iter()
                        .zip(&flags)
                        .enumerate()
                        .filter(|(i, (_, (included, _)))| *i == 0 || *included)
                        .map(|(_, (name, (_, served)))| listed(name, *served, false))
                        .collect();
                    let at = storage % versions.len();
                    versions[at].storage = true;
                    if unknown && build.versions.len() < 3 {
                        versions.push(listed("v9", true, false));
                    }
                    let name_of = |i: usize| build.versions[i].clone();
                    let dc = DcCrd {
                        name: build.name.clone(),
                        stored_versions: stored.into_iter().map(name_of).collect(),
                        migration: migration.map(|(to, complete)| Migration {
                            to: name_of(to),
                            rewritten: 3,
                            total: Some(3),
                            complete,
                            storage_moved_at: None,
                        }),
                        versions,
                        webhook_trusted: true,
                    };
                    (build, dc)
                },
            )
    })
}

/// The DC after a step, as the API server would hold it (a migration completes at once).
fn apply(dc: &DcCrd, step: &Step) -> DcCrd {
    let mut next = dc.clone();
    next.versions = versions_after(dc, step);
    match step {
        Step::MoveStorage { to, .. } => {
            if !next.stored_versions.contains(to) {
                next.stored_versions.push(to.clone());
            }
            next.migration = None;
        }
        Step::Migrate { to } => {
            next.migration = Some(migration(to, 10, Some(10), true));
        }
        Step::Trim { to, .. } => next.stored_versions = vec![to.clone()],
        _ => {}
    }
    next
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn never_serves_a_version_a_pod_behind_the_webhook_does_not_know(
        (build, dc) in a_build_and_a_dc_near_it(), builds in some_builds()
    ) {
        if let Step::Serve(_) = next_step(&dc, &build, &builds) {
            prop_assert!(!builds.webhook_pods.is_empty());
            for (_, known) in &builds.webhook_pods {
                for v in &dc.versions {
                    prop_assert!(known.contains(&v.name), "{} unknown to a pod", v.name);
                }
            }
        }
    }

    #[test]
    fn never_serves_a_version_through_a_webhook_nothing_could_trust(
        (build, dc) in a_build_and_a_dc_near_it(), builds in some_builds(), now in 0i64..10_000
    ) {
        let untrusted = DcCrd { webhook_trusted: false, ..dc };
        prop_assert!(!matches!(next_step_at(&untrusted, &build, &builds, now), Step::Serve(_)));
    }

    #[test]
    fn never_moves_storage_before_every_ring_knows_the_version(
        (build, dc) in a_build_and_a_dc_near_it(), builds in some_builds()
    ) {
        if let Step::MoveStorage { to, .. } = next_step(&dc, &build, &builds) {
            for (ring, known) in &builds.rings {
                prop_assert!(known.as_ref().is_some_and(|k| k.contains(&to)), "ring {ring} does not know {to}");
            }
            // And only once every version is served.
            prop_assert!(dc.versions.iter().all(|v| v.served));
        }
    }

    #[test]
    fn never_trims_before_every_object_is_rewritten_at_the_storage_version(
        (build, dc) in a_build_and_a_dc_near_it(), builds in some_builds()
    ) {
        if let Step::Trim { to, drop } = next_step(&dc, &build, &builds) {
            prop_assert_eq!(dc.storage(), Some(to.as_str()));
            let migration = dc.migration.as_ref();
            prop_assert!(migration.is_some_and(|m| m.to == to && m.complete));
            prop_assert!(!drop.contains(&to));
        }
    }

    #[test]
    fn never_takes_a_version_away_and_never_acts_on_a_dc_ahead(
        (build, dc) in a_build_and_a_dc_near_it(), builds in some_builds()
    ) {
        let step = next_step(&dc, &build, &builds);
        let after = apply(&dc, &step);
        for v in &dc.versions {
            let kept = after.versions.iter().find(|a| a.name == v.name);
            prop_assert!(kept.is_some_and(|a| a.served || !v.served), "{} lost", v.name);
        }
        if dc.versions.iter().any(|v| !build.versions.contains(&v.name)) {
            prop_assert!(matches!(step, Step::Ahead(_)));
        }
    }

    #[test]
    fn once_every_build_knows_it_a_dc_gets_there_step_by_step(
        (build, dc) in a_build_and_a_dc_near_it(), rings in 1usize..4
    ) {
        let everyone = Builds {
            rings: (0..rings).map(|i| (format!("ring-{i}"), Some(build.versions.clone()))).collect(),
            webhook_pods: vec![("pod".into(), build.versions.clone())],
        };
        let mut current = dc;
        let mut last_stage = stage(&current, &build);
        for _ in 0..8 {
            let step = next_step(&current, &build, &everyone);
            match &step {
                Step::Done | Step::Ahead(_) => break,
                Step::Wait(waiting) => prop_assert!(false, "waits although every build knows: {waiting}"),
                _ => {}
            }
            current = apply(&current, &step);
            let now = stage(&current, &build);
            // A migration's count may start again at a storage move; the stage never goes back.
            prop_assert!(stage_rank(&now) >= stage_rank(&last_stage), "{last_stage} then {now}");
            last_stage = now;
        }
        prop_assert!(matches!(next_step(&current, &build, &everyone), Step::Done | Step::Ahead(_)));
    }

    #[test]
    fn cannot_read_never_panics_and_names_only_crds_it_was_given(
        dcs in proptest::collection::vec(a_dc_crd(), 0..4), known in a_known_set()
    ) {
        for problem in cannot_read(&dcs, &known, ALPHA) {
            prop_assert!(dcs.iter().any(|d| d.name == problem.crd));
        }
    }
}

fn stage_rank(stage: &Stage) -> u8 {
    match stage {
        Stage::Behind => 0,
        Stage::Listed => 1,
        Stage::Served => 2,
        Stage::Migrating { .. } => 3,
        Stage::Trimmed => 4,
        Stage::Ahead => 5,
    }
}

//! Every case of every `health_test.yaml` under `deploy/argocd`, run under Lua 5.1 with Argo
//! CD's libraries, plus the guards a script must have.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use argocd_checks::{
    KINDS, action_tests, argocd_cm, discover, health, health_kinds, health_tests, kind_dir,
    load_object, numbers_as_floats, read, run_action,
};
use serde_json::json;

#[test]
fn every_test_case_gives_its_expected_status_and_message() {
    for kind in health_kinds() {
        let dir = kind_dir(kind);
        let script = read(&dir.join("health.lua")).unwrap();
        let cases = health_tests(&dir.join("health_test.yaml")).unwrap();
        assert!(cases.len() >= 8, "{kind}: {} cases", cases.len());
        for case in cases {
            let object = load_object(&dir.join(&case.input_path)).unwrap();
            let got = health(&script, &object)
                .unwrap_or_else(|e| panic!("{kind} {}: {e}", case.input_path));
            assert_eq!(got, case.health_status, "{kind} {}", case.input_path);
        }
    }
}

/// Argo CD keys a health script by group and kind, not version: a tenant whose Git holds its
/// objects at v1beta1 is judged by the same script, on the object as the API serves it at
/// v1beta1 (DESIGN section 18). Every case, converted, must read the same.
#[test]
fn every_test_case_reads_the_same_at_v1beta1() {
    use express_api::conversion::{ApiVersion, convert};
    let mut converted = 0;
    for kind in health_kinds() {
        let dir = kind_dir(kind);
        let script = read(&dir.join("health.lua")).unwrap();
        for case in health_tests(&dir.join("health_test.yaml")).unwrap() {
            let object = load_object(&dir.join(&case.input_path)).unwrap();
            // The release kinds stay at v1alpha1 only; a case the webhook could not convert
            // (a deliberately odd object) is not one the API server would serve at v1beta1.
            let Ok(beta) = convert(object, ApiVersion::V1beta1) else {
                continue;
            };
            assert_eq!(beta["apiVersion"], "express.dev/v1beta1");
            let got = health(&script, &beta)
                .unwrap_or_else(|e| panic!("{kind} {} at v1beta1: {e}", case.input_path));
            assert_eq!(
                got, case.health_status,
                "{kind} {} at v1beta1",
                case.input_path
            );
            converted += 1;
        }
    }
    assert!(
        converted >= 30,
        "only {converted} cases converted: the node and cluster cases should"
    );
}

#[test]
fn every_status_argo_cd_knows_is_covered() {
    for kind in health_kinds() {
        let cases = health_tests(&kind_dir(kind).join("health_test.yaml")).unwrap();
        for status in ["Healthy", "Progressing", "Degraded", "Suspended"] {
            assert!(
                cases.iter().any(|c| c.health_status.status == status),
                "{kind} has no {status} case"
            );
        }
    }
}

#[test]
fn backend_and_frontend_share_one_script() {
    let backend = read(&kind_dir("Backend").join("health.lua")).unwrap();
    let frontend = read(&kind_dir("Frontend").join("health.lua")).unwrap();
    assert_eq!(backend, frontend);
}

#[test]
fn odd_objects_never_break_a_script() {
    let odd = [
        json!({}),
        json!({"metadata": null, "status": null}),
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "conditions": null, "rollout": null}}),
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "conditions": [{}], "rollout": {"order": [], "current": ["x"]}}}),
        json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "phase": "Something new", "bounce": {}}}),
    ];
    for kind in health_kinds() {
        let script = read(&kind_dir(kind).join("health.lua")).unwrap();
        for object in &odd {
            let got = health(&script, object).unwrap_or_else(|e| panic!("{kind} {object}: {e}"));
            assert!(
                ["Healthy", "Progressing", "Degraded", "Suspended"].contains(&got.status.as_str()),
                "{kind} {object}: {got:?}"
            );
        }
    }
}

#[test]
fn the_sandbox_is_argo_cds() {
    let escape = "return {status = os.getenv('HOME')}";
    assert!(health(escape, &json!({})).is_err());
    let io = "return {status = io.read()}";
    assert!(health(io, &json!({})).is_err());
    let fine = "return {status = string.upper('healthy'), message = table.concat({'a', 'b'}, ',')}";
    let got = health(fine, &json!({})).unwrap();
    assert_eq!(
        (got.status.as_str(), got.message.as_str()),
        ("HEALTHY", "a,b")
    );
}

/// `deploy/argocd/argocd-cm.yaml` is generated from the scripts; regenerate it with
/// `ARGOCD_CM_WRITE=1 cargo test -p argocd-checks`.
#[test]
fn the_argocd_cm_snippet_is_in_sync_with_the_scripts() {
    let path = kind_dir("ExpressCluster").join("../../../argocd-cm.yaml");
    let generated = argocd_cm().unwrap();
    if std::env::var_os("ARGOCD_CM_WRITE").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is out of date: run ARGOCD_CM_WRITE=1 cargo test -p argocd-checks",
        path.display()
    );
    // The snippet is one YAML document whose values are the scripts, byte for byte.
    let parsed: serde_yaml::Value = serde_yaml::from_str(&committed).unwrap();
    for kind in health_kinds() {
        let key = format!("resource.customizations.health.express.dev_{kind}");
        let script = read(&kind_dir(kind).join("health.lua")).unwrap();
        assert_eq!(
            parsed["data"][key.as_str()].as_str(),
            Some(script.as_str()),
            "{kind}"
        );
    }
    for kind in KINDS {
        // Actions: a YAML document of their own inside the value, as Argo CD reads it.
        let key = format!("resource.customizations.actions.express.dev_{kind}");
        let actions: serde_yaml::Value =
            serde_yaml::from_str(parsed["data"][key.as_str()].as_str().unwrap()).unwrap();
        let dir = kind_dir(kind).join("actions");
        assert_eq!(
            actions["discovery.lua"].as_str(),
            Some(read(&dir.join("discovery.lua")).unwrap().as_str()),
            "{kind}"
        );
        let definitions = actions["definitions"].as_sequence().unwrap();
        assert_eq!(
            definitions.len(),
            argocd_checks::action_names(&dir).unwrap().len()
        );
        for definition in definitions {
            let name = definition["name"].as_str().unwrap();
            let script = read(&dir.join(name).join("action.lua")).unwrap();
            assert_eq!(
                definition["action.lua"].as_str(),
                Some(script.as_str()),
                "{kind} {name}"
            );
        }
    }
}

#[test]
fn every_action_case_gives_its_expected_object_and_discovery() {
    for kind in KINDS {
        let dir = kind_dir(kind).join("actions");
        let tests = action_tests(&dir.join("action_test.yaml")).unwrap();
        assert!(!tests.discovery_tests.is_empty() && !tests.action_tests.is_empty());
        let discovery = read(&dir.join("discovery.lua")).unwrap();
        for case in &tests.discovery_tests {
            let object = load_object(&dir.join(&case.input_path)).unwrap();
            let found = discover(&discovery, &object).unwrap();
            let expected: std::collections::BTreeMap<String, bool> = case
                .result
                .iter()
                .map(|a| (a.name.clone(), a.disabled))
                .collect();
            assert_eq!(found, expected, "{kind} discovery on {}", case.input_path);
        }
        for case in &tests.action_tests {
            let script = read(&dir.join(&case.action).join("action.lua")).unwrap();
            let object = load_object(&dir.join(&case.input_path)).unwrap();
            let expected = load_object(&dir.join(&case.expected_output_path)).unwrap();
            let got = run_action(&script, &object)
                .unwrap_or_else(|e| panic!("{kind} {}: {e}", case.action));
            assert_eq!(
                numbers_as_floats(&got),
                numbers_as_floats(&expected),
                "{kind} {} on {}",
                case.action,
                case.input_path
            );
        }
    }
}

#[test]
fn actions_write_the_annotations_the_api_defines() {
    use express_api::keys::{
        ANNOTATION_ABORT, ANNOTATION_ABORT_ROLLBACK, ANNOTATION_BOUNCE, ANNOTATION_RETRY,
    };
    let cluster = kind_dir("ExpressCluster").join("actions");
    for (action, keys) in [
        ("abort", vec![ANNOTATION_ABORT, ANNOTATION_ABORT_ROLLBACK]),
        (
            "abort-rollback",
            vec![ANNOTATION_ABORT, ANNOTATION_ABORT_ROLLBACK],
        ),
        ("retry", vec![ANNOTATION_RETRY]),
    ] {
        let script = read(&cluster.join(action).join("action.lua")).unwrap();
        for key in keys {
            assert!(script.contains(&format!("\"{key}\"")), "{action}: {key}");
        }
    }
    for kind in ["Backend", "Frontend"] {
        let script = read(&kind_dir(kind).join("actions/bounce/action.lua")).unwrap();
        assert!(
            script.contains(&format!("\"{ANNOTATION_BOUNCE}\"")),
            "{kind}"
        );
    }
}

//! Runs Argo CD resource customizations (the Lua health checks under `deploy/argocd`) the way
//! Argo CD does: Lua 5.1 with only the base, table and string libraries (what gopher-lua
//! offers), the object as the global `obj`, the script's returned table read as
//! `{status, message}`. Used by the tests of the scripts and by tests that feed them objects
//! from a live cluster.

use std::path::{Path, PathBuf};

use mlua::serde::SerializeOptions;
use mlua::{Lua, LuaOptions, LuaSerdeExt, StdLib, Table};
use serde::Deserialize;

/// What a health check returns.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Health {
    pub status: String,
    #[serde(default)]
    pub message: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid YAML: {source}")]
    Yaml {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("the script failed: {0}")]
    Lua(#[from] mlua::Error),
    #[error("the script returned no table with a status")]
    NoStatus,
}

/// Runs a health script on one object.
pub fn health(script: &str, object: &serde_json::Value) -> Result<Health, Error> {
    let lua = state_with(object)?;
    let result: Option<Table> = lua.load(script).eval()?;
    let table = result.ok_or(Error::NoStatus)?;
    let status: Option<String> = table.get("status")?;
    let message: Option<String> = table.get("message")?;
    Ok(Health {
        status: status.ok_or(Error::NoStatus)?,
        message: message.unwrap_or_default(),
    })
}

/// One case of an Argo CD `health_test.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthTest {
    pub health_status: Health,
    pub input_path: String,
}

#[derive(Deserialize)]
struct HealthTests {
    tests: Vec<HealthTest>,
}

/// The cases of a `health_test.yaml`.
pub fn health_tests(path: &Path) -> Result<Vec<HealthTest>, Error> {
    let text = read(path)?;
    let tests: HealthTests = serde_yaml::from_str(&text).map_err(|source| Error::Yaml {
        path: path.to_owned(),
        source,
    })?;
    Ok(tests.tests)
}

/// A YAML object (a test's input) as JSON.
pub fn load_object(path: &Path) -> Result<serde_json::Value, Error> {
    let text = read(path)?;
    serde_yaml::from_str(&text).map_err(|source| Error::Yaml {
        path: path.to_owned(),
        source,
    })
}

/// Reads a file, naming it in the error.
pub fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// The folder of the scripts of one kind of the `express.dev` group.
pub fn kind_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/argocd/resource_customizations/express.dev")
        .join(kind)
}

/// The kinds of the `express.dev` group that have a health check and actions.
pub const KINDS: [&str; 4] = ["ExpressCluster", "Backend", "Frontend", "OperatorRelease"];
/// The kinds with a health check and no actions: a FleetRelease's requests carry the instant
/// they were made, which Argo CD's Lua cannot tell (`kubectl express fleet-release` makes them).
pub const HEALTH_ONLY: [&str; 1] = ["FleetRelease"];

/// Every kind with a health check.
pub fn health_kinds() -> impl Iterator<Item = &'static str> {
    KINDS.into_iter().chain(HEALTH_ONLY)
}

/// The `argocd-cm` ConfigMap data that installs every health check, generated from the
/// scripts (`deploy/argocd/argocd-cm.yaml` is this text, checked by a test).
pub fn argocd_cm() -> Result<String, Error> {
    let mut out = String::from(
        "# Generated from deploy/argocd/resource_customizations by the argocd-checks tests;\n\
         # merge into the argocd-cm ConfigMap of the Argo CD namespace.\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n  namespace: argocd\n  \
         labels:\n    app.kubernetes.io/part-of: argocd\ndata:\n",
    );
    for kind in health_kinds() {
        let script = read(&kind_dir(kind).join("health.lua"))?;
        out.push_str(&format!(
            "  resource.customizations.health.express.dev_{kind}: |\n"
        ));
        indented(&mut out, &script, 4);
    }
    for kind in KINDS {
        let actions = kind_dir(kind).join("actions");
        out.push_str(&format!(
            "  resource.customizations.actions.express.dev_{kind}: |\n    discovery.lua: |\n"
        ));
        indented(&mut out, &read(&actions.join("discovery.lua"))?, 6);
        out.push_str("    definitions:\n");
        for name in action_names(&actions)? {
            out.push_str(&format!("      - name: {name}\n        action.lua: |\n"));
            indented(
                &mut out,
                &read(&actions.join(&name).join("action.lua"))?,
                10,
            );
        }
    }
    Ok(out)
}

/// The actions defined under an `actions` folder (each a folder with an `action.lua`), sorted.
pub fn action_names(actions: &Path) -> Result<Vec<String>, Error> {
    let entries = std::fs::read_dir(actions).map_err(|source| Error::Read {
        path: actions.to_owned(),
        source,
    })?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("action.lua").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// Appends `text` as the body of a YAML block scalar indented by `by` spaces.
fn indented(out: &mut String, text: &str, by: usize) {
    for line in text.lines() {
        if !line.is_empty() {
            out.push_str(&" ".repeat(by));
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// A Lua state as Argo CD gives a script, with `obj` set. Argo CD's Lua has no io, os or
/// package: a script that reaches for them must fail here too. JSON null becomes nil, as Argo
/// CD's conversion does, so `x == nil` guards work.
fn state_with(object: &serde_json::Value) -> Result<Lua, Error> {
    let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING, LuaOptions::new())?;
    let options = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false);
    let obj = lua.to_value_with(object, options)?;
    lua.globals().set("obj", obj)?;
    Ok(lua)
}

/// Runs an action's `discovery.lua`: each action offered, and whether it is disabled, by name.
pub fn discover(
    script: &str,
    object: &serde_json::Value,
) -> Result<std::collections::BTreeMap<String, bool>, Error> {
    let lua = state_with(object)?;
    let actions: Table = lua.load(script).eval()?;
    let mut found = std::collections::BTreeMap::new();
    for pair in actions.pairs::<String, Table>() {
        let (name, action) = pair?;
        let disabled: Option<bool> = action.get("disabled")?;
        found.insert(name, disabled.unwrap_or(false));
    }
    Ok(found)
}

/// Runs an action's `action.lua`: the object as the action leaves it.
pub fn run_action(script: &str, object: &serde_json::Value) -> Result<serde_json::Value, Error> {
    let lua = state_with(object)?;
    let result: mlua::Value = lua.load(script).eval()?;
    Ok(lua.from_value(result)?)
}

/// One discovery case of an Argo CD `action_test.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryTest {
    pub input_path: String,
    pub result: Vec<DiscoveredAction>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct DiscoveredAction {
    pub name: String,
    #[serde(default)]
    pub disabled: bool,
}

/// One action case of an Argo CD `action_test.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionTest {
    pub action: String,
    pub input_path: String,
    pub expected_output_path: String,
}

/// The cases of an Argo CD `action_test.yaml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionTests {
    #[serde(default)]
    pub discovery_tests: Vec<DiscoveryTest>,
    #[serde(default)]
    pub action_tests: Vec<ActionTest>,
}

pub fn action_tests(path: &Path) -> Result<ActionTests, Error> {
    let text = read(path)?;
    serde_yaml::from_str(&text).map_err(|source| Error::Yaml {
        path: path.to_owned(),
        source,
    })
}

/// JSON with every number as a float: Lua 5.1 has no integers, so `3` comes back as `3.0`.
pub fn numbers_as_floats(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(items) => Value::Array(items.iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), numbers_as_floats(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

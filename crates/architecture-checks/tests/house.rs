//! The house as `docs/architecture.md` draws it: the layers hold and the map names only what
//! exists.
#![allow(clippy::expect_used)] // a test fails loudly on an unreadable tree

use std::path::{Path, PathBuf};

use architecture_checks::floors::{arrows, running_back_up};
use architecture_checks::map::{Tree, list_paths, stale};
use architecture_checks::source::read_crate;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn crates() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repository().join("crates"))
        .expect("crates/ is readable")
        .filter_map(Result::ok)
        .filter(|e| e.path().join("src").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The crates whose layers the map promises, and every folder inside them.
const LAYERED: [&str; 4] = [
    "kubectl-express",
    "express-client",
    "express-operator",
    "express-planner",
];

#[test]
fn no_import_runs_back_up_a_floor() {
    let mut climbing = Vec::new();
    for name in LAYERED {
        let files = read_crate(&repository().join("crates").join(name).join("src"))
            .expect("the crate's source is readable");
        let arrows = arrows(&files);
        assert!(
            arrows.len() > 20,
            "{name}: only {} arrows were read: the reader is broken",
            arrows.len()
        );
        climbing.extend(
            running_back_up(&arrows)
                .into_iter()
                .map(|arrow| format!("{name}: {arrow}")),
        );
    }
    assert!(
        climbing.is_empty(),
        "imports that run back up a floor (each closes a circle between two rooms of one \
         folder; move what both need into a room below them):\n{}",
        climbing.join("\n")
    );
}

#[test]
fn the_map_names_only_what_exists() {
    let root = repository();
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the map");
    let mut paths = list_paths(&root).expect("the tree is readable");
    // DESIGN.md and STYLE.md sit beside the project, in `shared/`.
    if let Ok(shared) = list_paths(&root.join("../shared")) {
        paths.extend(shared.into_iter().map(|p| format!("shared/{p}")));
    }
    let tree = Tree {
        paths,
        crates: crates()
            .into_iter()
            .map(|name| {
                let files = read_crate(&root.join("crates").join(&name).join("src"))
                    .expect("the crate's source is readable");
                (name, files)
            })
            .collect(),
    };
    let stale: Vec<String> = stale(&map, &tree)
        .into_iter()
        .map(|s| format!("docs/architecture.md:{}: `{}`: {}", s.line, s.named, s.why))
        .collect();
    assert!(stale.is_empty(), "the map is stale:\n{}", stale.join("\n"));
}

#[test]
fn the_crate_table_lists_every_crate() {
    let map = std::fs::read_to_string(repository().join("docs/architecture.md")).expect("the map");
    let missing: Vec<String> = crates()
        .into_iter()
        .filter(|name| !map.contains(&format!("| `{name}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "crates without a row in the crate table of docs/architecture.md: {missing:?}"
    );
}

/// The fenced blocks that follow `heading`, up to the next heading of its level or above.
fn blocks_after(map: &str, heading: &str) -> String {
    let Some(start) = map.find(heading) else {
        return String::new();
    };
    let rest = &map[start + heading.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end]
        .split("```")
        .skip(1)
        .step_by(2)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lines of the module map that belong to `name`: its own line and the indented ones after.
fn crate_section(module_map: &str, name: &str) -> String {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in module_map.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            inside = line.split_whitespace().next() == Some(name);
        }
        if inside {
            lines.push(line);
        }
    }
    lines.join("\n")
}

#[test]
fn the_module_map_names_every_module() {
    let root = repository();
    let map = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the map");
    let module_map = blocks_after(&map, "### Module map");
    let cli = blocks_after(&map, "### The CLI crates in layers");
    let mut missing = Vec::new();
    for name in crates() {
        let section = if name == "kubectl-express" || name == "express-client" {
            cli.clone()
        } else {
            crate_section(&module_map, &name)
        };
        let words: std::collections::BTreeSet<&str> = section
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .collect();
        let files = read_crate(&root.join("crates").join(&name).join("src"))
            .expect("the crate's source is readable");
        for file in files {
            let Some(module) = file.module.last() else {
                continue;
            };
            let generated = file.path.starts_with("protobuf");
            if !generated && !words.contains(module.as_str()) {
                missing.push(format!("{name}: {}", file.path.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules the map of docs/architecture.md does not name:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_function_that_ships_is_longer_than_a_page() {
    use architecture_checks::functions::{LONGEST, functions};
    let mut long = Vec::new();
    for name in crates() {
        let files = read_crate(&repository().join("crates").join(&name).join("src"))
            .expect("the crate's source is readable");
        for file in files.iter().filter(|f| !f.path.starts_with("protobuf")) {
            long.extend(
                functions(file)
                    .into_iter()
                    .filter(|f| f.lines > LONGEST)
                    .map(|f| {
                        format!(
                            "crates/{name}/src/{}:{} {}: {} lines",
                            file.path.display(),
                            f.line,
                            f.name,
                            f.lines
                        )
                    }),
            );
        }
    }
    assert!(
        long.is_empty(),
        "functions over {LONGEST} lines (make each a table of contents of named steps):\n{}",
        long.join("\n")
    );
}

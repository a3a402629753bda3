//! Floors: inside every folder of a crate, its rooms (each file, each sub-folder, and the
//! folder's own `mod.rs` or crate root) import one another in one direction only. An import
//! that closes a circle between two rooms "runs back up a floor": a child importing what the
//! table of contents that calls it holds, or two rooms each using the other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::source::{ModulePath, SourceFile, references};

/// The folder's own file (`mod.rs`, `lib.rs`, `main.rs`) as a room.
pub const TABLE_OF_CONTENTS: &str = "(mod)";

/// An import between two rooms of one folder, with the place that writes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrow {
    /// The folder, as a module path (empty: the crate's `src`).
    pub folder: String,
    pub from: String,
    pub to: String,
    /// One place that writes it: `file:line`.
    pub at: String,
}

impl std::fmt::Display for Arrow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let folder = if self.folder.is_empty() {
            "src"
        } else {
            &self.folder
        };
        write!(
            f,
            "in {folder}: {} imports {} ({})",
            self.from, self.to, self.at
        )
    }
}

/// Every arrow between two rooms of one folder, one per pair (the first place that writes it).
pub fn arrows(files: &[SourceFile]) -> Vec<Arrow> {
    let modules: BTreeSet<ModulePath> = files.iter().map(|f| f.module.clone()).collect();
    let mut pairs: BTreeMap<(ModulePath, String, String), String> = BTreeMap::new();
    for file in files {
        for reference in references(file, &modules) {
            // Every folder that holds both the file and its target sees one arrow.
            for depth in 0..=file.module.len() {
                let folder = &file.module[..depth];
                if !reference.target.starts_with(folder) {
                    break;
                }
                let from = room(&file.module, depth, &file.path);
                let to = room(&reference.target, depth, &file.path);
                if from != to {
                    pairs
                        .entry((folder.to_vec(), from, to))
                        .or_insert_with(|| format!("{}:{}", display(&file.path), reference.line));
                }
            }
        }
    }
    pairs
        .into_iter()
        .map(|((folder, from, to), at)| Arrow {
            folder: folder.join("::"),
            from,
            to,
            at,
        })
        .collect()
}

fn display(path: &Path) -> String {
    PathBuf::from(path).to_string_lossy().replace('\\', "/")
}

/// The room of `module` in the folder `depth` deep: its next path segment, or the folder's own
/// file when `module` is the folder itself.
fn room(module: &[String], depth: usize, _path: &Path) -> String {
    module
        .get(depth)
        .cloned()
        .unwrap_or_else(|| TABLE_OF_CONTENTS.to_string())
}

/// The arrows that close a circle: each arrow `a → b` where `b` also reaches `a` inside the
/// same folder.
pub fn running_back_up(arrows: &[Arrow]) -> Vec<Arrow> {
    let mut by_folder: BTreeMap<&str, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for arrow in arrows {
        by_folder
            .entry(&arrow.folder)
            .or_default()
            .entry(&arrow.from)
            .or_default()
            .insert(&arrow.to);
    }
    arrows
        .iter()
        .filter(|arrow| {
            by_folder
                .get(arrow.folder.as_str())
                .is_some_and(|graph| reaches(graph, &arrow.to, &arrow.from))
        })
        .cloned()
        .collect()
}

fn reaches(graph: &BTreeMap<&str, BTreeSet<&str>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from];
    while let Some(room) = stack.pop() {
        if room == to {
            return true;
        }
        if seen.insert(room) {
            stack.extend(graph.get(room).into_iter().flatten().copied());
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{module_of, shipped_code};

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: PathBuf::from(path),
            module: module_of(Path::new(path)),
            code: shipped_code(text),
        }
    }

    fn climbing(files: &[SourceFile]) -> Vec<String> {
        running_back_up(&arrows(files))
            .into_iter()
            .map(|a| format!("{}: {} -> {}", a.folder, a.from, a.to))
            .collect()
    }

    #[test]
    fn a_child_importing_its_table_of_contents_climbs() {
        let files = [
            file("lib.rs", "mod controller;"),
            file(
                "controller/mod.rs",
                "mod act;\npub struct Context;\nfn run() { act::act(); }",
            ),
            file("controller/act.rs", "use super::Context;\npub fn act() {}"),
        ];
        assert_eq!(
            climbing(&files),
            ["controller: (mod) -> act", "controller: act -> (mod)"]
        );
    }

    #[test]
    fn the_shared_state_in_a_room_of_its_own_does_not_climb() {
        let files = [
            file("lib.rs", "mod controller;"),
            file(
                "controller/mod.rs",
                "mod act;\nmod context;\nuse context::Context;\nfn run() { act::act(); }",
            ),
            file("controller/context.rs", "pub struct Context;"),
            file(
                "controller/act.rs",
                "use crate::controller::context::Context;\npub fn act() {}",
            ),
        ];
        assert!(climbing(&files).is_empty(), "{:?}", climbing(&files));
    }

    #[test]
    fn two_folders_using_each_other_climb_even_through_grouped_imports() {
        let files = [
            file("main.rs", "mod read;\nmod show;"),
            file("read/mod.rs", "pub mod rings;"),
            file(
                "read/rings.rs",
                "use crate::{show::{rings::{self, survey}}};",
            ),
            file("show/mod.rs", "pub mod rings;"),
            file(
                "show/rings.rs",
                "pub fn survey() { crate::read::rings::x(); }",
            ),
        ];
        assert_eq!(climbing(&files), [": read -> show", ": show -> read"]);
    }

    #[test]
    fn tests_comments_and_strings_are_not_imports() {
        let files = [
            file("lib.rs", "mod a;\nmod b;"),
            file("a.rs", "use crate::b::x; // crate::b\npub fn y() {}"),
            file(
                "b.rs",
                "pub fn x() { let _ = \"crate::a::y\"; }\n/* crate::a::y */\n#[cfg(test)]\nmod tests { use crate::a::y; }",
            ),
        ];
        assert!(climbing(&files).is_empty(), "{:?}", climbing(&files));
    }
}

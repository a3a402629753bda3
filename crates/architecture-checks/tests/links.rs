//! The map and its decisions hold together: every file under `docs/decisions/` is linked from
//! `docs/architecture.md`, and every relative link of the map and of the decisions leads to a
//! file that exists and, with a `#anchor`, to one of its headings.
#![allow(clippy::expect_used)] // a test fails loudly on an unreadable tree

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use architecture_checks::links::{broken, links, resolve};

const MAP: &str = "docs/architecture.md";
const DECISIONS: &str = "docs/decisions";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every decision file, as a path under the repository.
fn decisions() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(repository().join(DECISIONS))
        .expect("docs/decisions/ is readable")
        .filter_map(Result::ok)
        .map(|entry| Path::new(DECISIONS).join(entry.file_name()))
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    found.sort();
    found
}

#[test]
fn every_decision_is_linked_from_the_map() {
    let map = std::fs::read_to_string(repository().join(MAP)).expect("the map");
    let linked: BTreeSet<PathBuf> = links(&map)
        .iter()
        .filter_map(|link| resolve(Path::new(MAP), &link.target))
        .collect();
    let decisions = decisions();
    assert!(
        decisions.len() > 10,
        "only {} decision files were read: the reader is broken",
        decisions.len()
    );
    let unlinked: Vec<String> = decisions
        .iter()
        .filter(|decision| !linked.contains(*decision))
        .map(|decision| decision.display().to_string())
        .collect();
    assert!(
        unlinked.is_empty(),
        "decisions the map of {MAP} does not link (add each to its \"Decisions\" list):\n{}",
        unlinked.join("\n")
    );
}

#[test]
fn every_link_of_the_map_and_the_decisions_resolves() {
    let root = repository();
    let mut leading_nowhere = Vec::new();
    for page in std::iter::once(PathBuf::from(MAP)).chain(decisions()) {
        let found = broken(&root, &page).expect("the page is readable");
        leading_nowhere.extend(
            found
                .into_iter()
                .map(|b| format!("{}:{}: ({}): {}", page.display(), b.line, b.target, b.why)),
        );
    }
    assert!(
        leading_nowhere.is_empty(),
        "links that lead nowhere (a path is relative to its page; an anchor is the heading \
         lowercased, spaces as `-`, punctuation but `-` and `_` dropped):\n{}",
        leading_nowhere.join("\n")
    );
}

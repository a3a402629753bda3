//! The map: every path (`crates/express-operator/src/controller/act.rs`, `controller/act.rs`,
//! `status/{node, cluster}.rs`, `dashboard/model/`) and every item path (`plan::record_for`,
//! `verbs::doctor::fleet_around`) that `docs/architecture.md` names in backticks exists in the
//! tree; a name that no longer does is a stale map.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::source::{ModulePath, SourceFile};

/// What the map names and the tree lacks, in the map's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    pub line: usize,
    pub named: String,
    pub why: &'static str,
}

/// The tree a map is held against: every file and folder (relative to the repository root,
/// `/`-separated) and every crate's source.
pub struct Tree {
    pub paths: BTreeSet<String>,
    /// Per crate (its folder name), its source files.
    pub crates: Vec<(String, Vec<SourceFile>)>,
}

impl Tree {
    /// Whether some file or folder ends with `tail` (whole path components).
    fn has_path(&self, tail: &str) -> bool {
        let tail = tail.trim_end_matches('/');
        self.paths
            .iter()
            .any(|p| p == tail || p.ends_with(&format!("/{tail}")))
    }

    /// Whether `item` (`a::b::name`) is a module, or an item defined in a module whose path ends
    /// with its leading segments, in some crate. `crate_name::...` names that crate.
    fn has_item(&self, item: &str) -> bool {
        let segments: Vec<&str> = item.split("::").collect();
        let Some((last, leading)) = segments.split_last() else {
            return false;
        };
        if let Some(owner) = leading.last().filter(|s| s.starts_with(char::is_uppercase)) {
            return self.has_member(owner, last);
        }
        self.crates.iter().any(|(name, files)| {
            let underscored = name.replace('-', "_");
            let (leading, within_crate) = match leading.split_first() {
                Some((first, rest)) if *first == underscored || *first == "crate" => (rest, true),
                _ => (leading, false),
            };
            let whole: Vec<&str> = leading.iter().copied().chain([*last]).collect();
            files.iter().any(|file| {
                let ends_with = |wanted: &[&str]| {
                    module_ends_with(&file.module, wanted)
                        && (!within_crate || file.module.len() == wanted.len())
                };
                ends_with(&whole) || (ends_with(leading) && defines(&file.code, last))
            })
        })
    }
}

impl Tree {
    /// `Type::member`: a type of that name is defined, and the member (a field, variant or
    /// method) is written in the file that defines it or defined as a function anywhere.
    fn has_member(&self, owner: &str, member: &str) -> bool {
        let files = || self.crates.iter().flat_map(|(_, files)| files);
        files().any(|file| defines(&file.code, owner) && names(&file.code, member))
            || files().any(|file| defines(&file.code, member))
    }
}

/// Whether `word` appears in `code` as a whole identifier.
fn names(code: &str, word: &str) -> bool {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

fn module_ends_with(module: &ModulePath, wanted: &[&str]) -> bool {
    module.len() >= wanted.len()
        && module[module.len() - wanted.len()..]
            .iter()
            .zip(wanted)
            .all(|(a, b)| a == b)
}

/// Whether `code` defines `name`: a fn, type, trait, const, static, module, enum variant-less
/// item, a macro, or a method.
fn defines(code: &str, name: &str) -> bool {
    const KINDS: [&str; 10] = [
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "const",
        "static",
        "mod",
        "union",
        "macro_rules!",
    ];
    code.lines().any(|line| {
        let reexported = line.trim_start().starts_with("pub use") && names(line, name);
        if reexported {
            return true;
        }
        let words: Vec<&str> = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
            .filter(|w| !w.is_empty())
            .collect();
        words
            .windows(2)
            .any(|pair| KINDS.contains(&pair[0]) && pair[1] == name)
    })
}

/// Reads the repository's files (not `target/`, `.git/`, `.venv/`, `node_modules/`).
pub fn list_paths(root: &Path) -> std::io::Result<BTreeSet<String>> {
    let mut paths = BTreeSet::new();
    let mut stack = vec![PathBuf::from(root)];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if matches!(name.as_str(), "target" | ".git" | ".venv" | "node_modules") {
                continue;
            }
            let path = entry.path();
            if let Ok(relative) = path.strip_prefix(root) {
                paths.insert(relative.to_string_lossy().replace('\\', "/"));
            }
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(paths)
}

/// Every name in backticks on the map that is not in the tree.
pub fn stale(map: &str, tree: &Tree) -> Vec<Stale> {
    let mut found = Vec::new();
    for (index, line) in map.lines().enumerate() {
        for quoted in backticked(line) {
            for named in expand_braces(quoted) {
                if let Some(why) = missing(&named, tree) {
                    found.push(Stale {
                        line: index + 1,
                        named,
                        why,
                    });
                }
            }
        }
    }
    found
}

fn missing(named: &str, tree: &Tree) -> Option<&'static str> {
    if looks_like_path(named) {
        return (!tree.has_path(named)).then_some("no such file or folder");
    }
    if looks_like_item(named) {
        return (!tree.has_item(named)).then_some("no such module or item");
    }
    None
}

/// The repository's top-level folders, and `shared/` beside it: a path may start with one.
const TOP_LEVEL: [&str; 9] = [
    "crates/",
    "docs/",
    "deploy/",
    "charts/",
    "scripts/",
    "tests/",
    "examples/",
    ".ci/",
    "shared/",
];

/// `a/b.rs`, `dashboard/`, `crates/x/src`: a relative path with no spaces or flags. Label
/// and annotation keys (`app.kubernetes.io/name`) and placeholders (`namespace/name`) are not.
fn looks_like_path(text: &str) -> bool {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
    let domain = text
        .split('/')
        .next()
        .is_some_and(|first| first.contains('.'));
    plain
        && !text.starts_with('/')
        && !text.contains("//")
        && (text.ends_with(".rs")
            || text.ends_with('/')
            || TOP_LEVEL.iter().any(|top| text.starts_with(top))
            || (!domain && text.ends_with(".md")))
}

/// `a::b` made of identifiers only (no generics, calls or spaces); a Kubernetes-looking path
/// such as `v1::Pod` counts too, since the project names only its own items this way.
fn looks_like_item(text: &str) -> bool {
    let segments: Vec<&str> = text.split("::").collect();
    segments.len() >= 2
        && segments.iter().all(|s| {
            !s.is_empty()
                && s.chars().all(|c| c.is_alphanumeric() || c == '_')
                && !s.starts_with(|c: char| c.is_ascii_digit())
        })
        && !matches!(
            segments[0],
            "std" | "kube" | "k8s_openapi" | "tokio" | "serde" | "axum"
        )
}

fn backticked(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// `status/{node, cluster}.rs` into `status/node.rs`, `status/cluster.rs`.
fn expand_braces(text: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (text.find('{'), text.find('}')) else {
        return vec![text.to_string()];
    };
    if close < open {
        return vec![text.to_string()];
    }
    let (head, tail) = (&text[..open], &text[close + 1..]);
    text[open + 1..close]
        .split(',')
        .flat_map(|part| expand_braces(&format!("{head}{}{tail}", part.trim())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_expand_into_each_path() {
        assert_eq!(
            expand_braces("status/{node, cluster}.rs"),
            ["status/node.rs", "status/cluster.rs"]
        );
    }

    #[test]
    fn paths_and_items_are_told_apart_from_prose_and_commands() {
        assert!(looks_like_path("controller/act.rs"));
        assert!(looks_like_path("dashboard/model/"));
        assert!(!looks_like_path("kubectl express doctor"));
        assert!(!looks_like_path("express.dev/ring"));
        assert!(!looks_like_path("app.kubernetes.io/instance"));
        assert!(!looks_like_path("namespace/name"));
        assert!(looks_like_path("crates/kubesim/src"));
        assert!(looks_like_item("plan::record_for"));
        assert!(!looks_like_item("Plan::action_on(node)"));
        assert!(!looks_like_item("std::sync::Arc"));
    }
}

//! Which kubeconfig contexts a fleet verb (`list`, `doctor`, `rings`) reads (DESIGN section 13):
//! the selection flags, the pure [`select`], and the kubeconfig merged as kubectl merges
//! `KUBECONFIG`, with a warning for a name two files define. [`super::across`] then reads each
//! selected context with its own client.
//!
//! Selection is data, as in kubectl-foreach: each `--context` value is an exact name, a
//! `/regex/`, or either behind `^` to leave it out. Names and patterns add; exclusions then
//! subtract; with exclusions alone (or `--all-contexts`) they subtract from every context.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};
use regex::Regex;

use crate::connect::ConnectArgs;

/// The flags of a verb that can read several contexts.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FleetArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, its files merged as kubectl merges
    /// them, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Contexts to read: NAME, /REGEX/, ^NAME or ^/REGEX/ (leave out); repeat or separate with
    /// commas. One plain NAME reads that context alone, as before; anything more reads each
    /// context selected and adds a CONTEXT column (default: the current context alone).
    #[arg(long = "context", value_name = "NAME|/RE/|^NAME")]
    pub contexts: Vec<String>,
    /// Every context of the kubeconfig (less any `--context ^...`).
    #[arg(long)]
    pub all_contexts: bool,
    /// Print the contexts the selection matches, one a line, and exit.
    #[arg(long)]
    pub list_contexts: bool,
    /// Read at most this many contexts at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..), value_name = "N")]
    pub max_parallel: u16,
    /// Give up on a context that has not answered within this long (e.g. 5s, 1m).
    #[arg(long, default_value = "10s", value_parser = express_api::bounce::parse_duration, value_name = "DURATION")]
    pub context_timeout: u64,
    /// Exit 4 when any selected context could not be read, whatever the others say.
    #[arg(long)]
    pub require_all: bool,
    /// Namespace (default: each context's namespace, then `default`).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
}

/// How a fleet verb runs, from its flags.
pub enum Mode {
    /// No selection, or one plain name: one context, exactly as before the fleet flags.
    Single(ConnectArgs),
    /// Several contexts (or a selection that could match several).
    Fleet(Selection),
}

impl FleetArgs {
    pub fn mode(&self) -> Result<Mode, SelectError> {
        let filters = parse_filters(&self.contexts)?;
        let single = match (self.all_contexts, filters.as_slice()) {
            (false, []) => Some(None),
            (false, [Filter::Name(name)]) => Some(Some(name.clone())),
            _ => None,
        };
        Ok(match single {
            Some(context) if !self.list_contexts => Mode::Single(ConnectArgs {
                kubeconfig: self.kubeconfig.clone(),
                context,
                namespace: self.namespace.clone(),
            }),
            _ => Mode::Fleet(Selection {
                all: self.all_contexts,
                filters,
            }),
        })
    }
}

/// One `--context` value, parsed.
#[derive(Clone, Debug)]
pub enum Filter {
    Name(String),
    Pattern(Regex),
    ExcludeName(String),
    ExcludePattern(Regex),
}

impl Filter {
    fn excludes(&self) -> bool {
        matches!(self, Filter::ExcludeName(_) | Filter::ExcludePattern(_))
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Filter::Name(n) | Filter::ExcludeName(n) => n == name,
            Filter::Pattern(re) | Filter::ExcludePattern(re) => re.is_match(name),
        }
    }
}

/// What the flags select: `--all-contexts`, and the `--context` filters.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub all: bool,
    pub filters: Vec<Filter>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("--context {0:?}: empty name")]
    Empty(String),
    #[error("--context {value:?}: not a regular expression: {why}")]
    BadPattern { value: String, why: String },
    #[error("no context named {name:?} in the kubeconfig (it has: {known})")]
    NoSuchContext { name: String, known: String },
    #[error("no context matched the selection (the kubeconfig has: {0})")]
    NothingMatched(String),
    #[error(
        "the kubeconfig names no current context: pick contexts with --context or --all-contexts"
    )]
    NoCurrentContext,
}

/// Splits each value at commas that are not inside a `/regex/`, and parses each piece.
pub fn parse_filters(values: &[String]) -> Result<Vec<Filter>, SelectError> {
    let mut filters = Vec::new();
    for value in values {
        for piece in split_outside_patterns(value) {
            filters.push(parse_filter(piece)?);
        }
    }
    Ok(filters)
}

fn split_outside_patterns(value: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let (mut start, mut in_pattern) = (0, false);
    for (i, c) in value.char_indices() {
        match c {
            '/' if in_pattern => in_pattern = false,
            // A pattern opens at the start of a piece, or just after its `^`.
            '/' if value[start..i].is_empty() || &value[start..i] == "^" => in_pattern = true,
            ',' if !in_pattern => {
                pieces.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(&value[start..]);
    pieces
}

fn parse_filter(piece: &str) -> Result<Filter, SelectError> {
    let text = piece.trim();
    let (exclude, body) = match text.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if body.is_empty() {
        return Err(SelectError::Empty(piece.to_owned()));
    }
    let pattern = body
        .strip_prefix('/')
        .and_then(|rest| rest.strip_suffix('/'))
        .filter(|_| body.len() >= 2);
    Ok(match (pattern, exclude) {
        (Some(source), _) => {
            let re = Regex::new(source).map_err(|e| SelectError::BadPattern {
                value: piece.to_owned(),
                why: e.to_string(),
            })?;
            if exclude {
                Filter::ExcludePattern(re)
            } else {
                Filter::Pattern(re)
            }
        }
        (None, true) => Filter::ExcludeName(body.to_owned()),
        (None, false) => Filter::Name(body.to_owned()),
    })
}

/// The contexts `selection` picks out of `names` (the kubeconfig's), sorted. No filter and no
/// `--all-contexts`: the current context alone. A plain name the kubeconfig does not have is an
/// error (a typo must not quietly read one DC fewer), and so is a selection that matches nothing.
pub fn select(
    names: &[String],
    current: Option<&str>,
    selection: &Selection,
) -> Result<Vec<String>, SelectError> {
    let known = || names.join(", ");
    if !selection.all && selection.filters.is_empty() {
        return match current {
            Some(current) if names.iter().any(|n| n == current) => Ok(vec![current.to_owned()]),
            Some(current) => Err(SelectError::NoSuchContext {
                name: current.to_owned(),
                known: known(),
            }),
            None => Err(SelectError::NoCurrentContext),
        };
    }
    for filter in &selection.filters {
        if let Filter::Name(name) | Filter::ExcludeName(name) = filter
            && !names.contains(name)
        {
            return Err(SelectError::NoSuchContext {
                name: name.clone(),
                known: known(),
            });
        }
    }
    let adding: Vec<&Filter> = selection.filters.iter().filter(|f| !f.excludes()).collect();
    let from_all = selection.all || adding.is_empty();
    let mut chosen: Vec<String> = names
        .iter()
        .filter(|name| from_all || adding.iter().any(|f| f.matches(name)))
        .filter(|name| {
            !selection
                .filters
                .iter()
                .any(|f| f.excludes() && f.matches(name))
        })
        .cloned()
        .collect();
    chosen.sort();
    chosen.dedup();
    if chosen.is_empty() {
        return Err(SelectError::NothingMatched(known()));
    }
    Ok(chosen)
}

/// The kubeconfig as kubectl sees it, and a warning per name two of its files define.
pub struct Loaded {
    pub kubeconfig: Kubeconfig,
    pub warnings: Vec<String>,
}

impl Loaded {
    pub fn context_names(&self) -> Vec<String> {
        self.kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    pub fn current_context(&self) -> Option<&str> {
        self.kubeconfig
            .current_context
            .as_deref()
            .filter(|c| !c.is_empty())
    }

    /// A client for `context` alone, with its own cluster and credentials, and its default
    /// namespace: a context that cannot be built is an error, never the current context.
    pub async fn client(&self, context: &str) -> Result<(kube::Client, String), String> {
        let config = crate::connect::identified(self.config(context).await?);
        let namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config)
            .map_err(|e| format!("cannot build a client for context {context:?}: {e}"))?;
        Ok((client, namespace))
    }

    /// The client configuration of `context` alone. A context naming a user no file defines is
    /// refused (kube would go on without credentials, as somebody else).
    pub async fn config(&self, context: &str) -> Result<kube::Config, String> {
        let user = self
            .kubeconfig
            .contexts
            .iter()
            .find(|c| c.name == context)
            .and_then(|c| c.context.as_ref()?.user.as_deref());
        if let Some(user) = user
            && !self.kubeconfig.auth_infos.iter().any(|u| u.name == user)
        {
            return Err(format!(
                "context {context:?} names user {user:?}, which no kubeconfig file defines"
            ));
        }
        let options = KubeConfigOptions {
            context: Some(context.to_owned()),
            ..KubeConfigOptions::default()
        };
        kube::Config::from_custom_kubeconfig(self.kubeconfig.clone(), &options)
            .await
            .map_err(|e| format!("cannot load context {context:?}: {e}"))
    }
}

/// Refuses a `--context NAME` the kubeconfig lacks, in the words a selection of several gets:
/// every verb exits 2 on it, before connecting (kube's own error would exit 1).
pub fn known_context(connect: &ConnectArgs) -> Result<(), String> {
    let Some(name) = &connect.context else {
        return Ok(());
    };
    let loaded = load(connect.kubeconfig.as_deref())?;
    let known = loaded.context_names();
    if known.contains(name) {
        return Ok(());
    }
    Err(SelectError::NoSuchContext {
        name: name.clone(),
        known: known.join(", "),
    }
    .to_string())
}

/// Reads the kubeconfig: `--kubeconfig FILE`, else the files of `KUBECONFIG` (those that exist,
/// as kubectl skips the others), else `~/.kube/config`.
pub fn load(explicit: Option<&Path>) -> Result<Loaded, String> {
    let paths: Vec<PathBuf> = match explicit {
        Some(path) => vec![path.to_owned()],
        None => match std::env::var_os("KUBECONFIG") {
            Some(value) if !value.is_empty() => std::env::split_paths(&value)
                .filter(|p| !p.as_os_str().is_empty() && p.exists())
                .collect(),
            _ => std::env::var_os("HOME")
                .map(|home| vec![PathBuf::from(home).join(".kube").join("config")])
                .unwrap_or_default(),
        },
    };
    if paths.is_empty() {
        return Err("no kubeconfig found (set KUBECONFIG or pass --kubeconfig)".into());
    }
    let mut files = Vec::new();
    for path in paths {
        let kubeconfig = Kubeconfig::read_from(&path)
            .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
        files.push((path, kubeconfig));
    }
    merge(files)
}

/// Merges the files in order, the first to define a name winning (kubectl's rule); each name a
/// later file defines again is a warning naming both files.
pub fn merge(files: Vec<(PathBuf, Kubeconfig)>) -> Result<Loaded, String> {
    let mut warnings = Vec::new();
    // (kind, name) -> the file that defined it first.
    let mut first: BTreeMap<(&'static str, String), PathBuf> = BTreeMap::new();
    let mut merged: Option<Kubeconfig> = None;
    for (path, kubeconfig) in files {
        let names = kubeconfig
            .contexts
            .iter()
            .map(|c| ("context", c.name.clone()))
            .chain(
                kubeconfig
                    .auth_infos
                    .iter()
                    .map(|u| ("user", u.name.clone())),
            )
            .chain(
                kubeconfig
                    .clusters
                    .iter()
                    .map(|c| ("cluster", c.name.clone())),
            );
        for (kind, name) in names {
            match first.get(&(kind, name.clone())) {
                Some(earlier) if earlier != &path => warnings.push(format!(
                    "warning: {kind} {name:?} is defined in {} and in {}: the first is used, as \
                     kubectl does, and the second ignored",
                    earlier.display(),
                    path.display()
                )),
                Some(_) => {}
                None => {
                    first.insert((kind, name), path.clone());
                }
            }
        }
        merged = Some(match merged {
            None => kubeconfig,
            Some(so_far) => so_far
                .merge(kubeconfig)
                .map_err(|e| format!("cannot merge kubeconfig {}: {e}", path.display()))?,
        });
    }
    Ok(Loaded {
        kubeconfig: merged.unwrap_or_default(),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn pick(all: bool, flags: &[&str]) -> Result<Vec<String>, SelectError> {
        let contexts = names(&["dc-a", "dc-b", "dc-c", "staging", "kind-dev"]);
        let selection = Selection {
            all,
            filters: parse_filters(&names(flags))?,
        };
        select(&contexts, Some("staging"), &selection)
    }

    #[test]
    fn selection_by_table() {
        type Case = (
            &'static str,
            bool,
            &'static [&'static str],
            Result<&'static [&'static str], &'static str>,
        );
        let cases: &[Case] = &[
            (
                "no flag: the current context alone",
                false,
                &[],
                Ok(&["staging"]),
            ),
            ("one name", false, &["dc-b"], Ok(&["dc-b"])),
            (
                "names repeated and comma-separated",
                false,
                &["dc-c,dc-a", "dc-b"],
                Ok(&["dc-a", "dc-b", "dc-c"]),
            ),
            (
                "the same name twice counts once",
                false,
                &["dc-a", "dc-a"],
                Ok(&["dc-a"]),
            ),
            (
                "a pattern",
                false,
                &["/^dc-/"],
                Ok(&["dc-a", "dc-b", "dc-c"]),
            ),
            (
                "a pattern is unanchored",
                false,
                &["/dev/"],
                Ok(&["kind-dev"]),
            ),
            (
                "a pattern with a comma stays whole",
                false,
                &["/^dc-[a-b]{1,2}$/"],
                Ok(&["dc-a", "dc-b"]),
            ),
            (
                "a pattern less a name",
                false,
                &["/^dc-/,^dc-b"],
                Ok(&["dc-a", "dc-c"]),
            ),
            (
                "exclusions alone subtract from all",
                false,
                &["^/^dc-/"],
                Ok(&["kind-dev", "staging"]),
            ),
            (
                "all",
                true,
                &[],
                Ok(&["dc-a", "dc-b", "dc-c", "kind-dev", "staging"]),
            ),
            (
                "all less a pattern and a name",
                true,
                &["^/dev$/", "^staging"],
                Ok(&["dc-a", "dc-b", "dc-c"]),
            ),
            (
                "all with a name adds nothing",
                true,
                &["dc-a"],
                Ok(&["dc-a", "dc-b", "dc-c", "kind-dev", "staging"]),
            ),
            (
                "a pattern matching nothing",
                false,
                &["/^prod-/"],
                Err("no context matched"),
            ),
            (
                "everything left out",
                true,
                &["^/./"],
                Err("no context matched"),
            ),
            (
                "an unknown name",
                false,
                &["dc-a,dc-z"],
                Err("no context named \"dc-z\""),
            ),
            (
                "an unknown name left out",
                true,
                &["^dc-z"],
                Err("no context named \"dc-z\""),
            ),
            (
                "a broken pattern",
                false,
                &["/dc-(/"],
                Err("not a regular expression"),
            ),
            ("an empty piece", false, &["dc-a,"], Err("empty name")),
            ("a bare caret", false, &["^"], Err("empty name")),
        ];
        for (what, all, flags, want) in cases {
            let got = pick(*all, flags);
            match (want, &got) {
                (Ok(want), Ok(got)) => assert_eq!(got, &names(want), "{what}"),
                (Err(want), Err(got)) => {
                    assert!(got.to_string().contains(want), "{what}: {got}")
                }
                _ => panic!("{what}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn no_flag_without_a_current_context_cannot_run() {
        let selection = Selection::default();
        assert_eq!(
            select(&names(&["dc-a"]), None, &selection),
            Err(SelectError::NoCurrentContext)
        );
        assert!(matches!(
            select(&names(&["dc-a"]), Some("gone"), &selection),
            Err(SelectError::NoSuchContext { .. })
        ));
    }

    #[test]
    fn one_plain_name_keeps_the_single_context_verb() {
        let mode = |flags: &[&str], all: bool, list: bool| {
            FleetArgs {
                contexts: names(flags),
                all_contexts: all,
                list_contexts: list,
                ..FleetArgs::default()
            }
            .mode()
            .unwrap()
        };
        assert!(matches!(mode(&[], false, false), Mode::Single(c) if c.context.is_none()));
        assert!(
            matches!(mode(&["dc-a"], false, false), Mode::Single(c) if c.context.as_deref() == Some("dc-a"))
        );
        for (flags, all) in [
            (&["dc-a,dc-b"][..], false),
            (&["/dc-a/"][..], false),
            (&["^dc-a"][..], false),
            (&[][..], true),
        ] {
            assert!(
                matches!(mode(flags, all, false), Mode::Fleet(_)),
                "{flags:?}"
            );
        }
        // --list-contexts always answers from the selection.
        assert!(matches!(mode(&[], false, true), Mode::Fleet(_)));
    }

    fn file(contexts: &[(&str, &str)], current: &str) -> Kubeconfig {
        let mut text = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
        for (name, _) in contexts {
            text.push_str(&format!(
                "- name: {name}\n  cluster: {{server: 'http://{name}.example:80'}}\n"
            ));
        }
        text.push_str("users:\n");
        for (_, user) in contexts {
            text.push_str(&format!(
                "- name: {user}\n  user: {{token: {user}-token}}\n"
            ));
        }
        text.push_str("contexts:\n");
        for (name, user) in contexts {
            text.push_str(&format!(
                "- name: {name}\n  context: {{cluster: {name}, user: {user}}}\n"
            ));
        }
        text.push_str(&format!("current-context: {current}\n"));
        Kubeconfig::from_yaml(&text).unwrap()
    }

    #[test]
    fn files_merge_as_kubectl_merges_them_and_duplicates_are_named() {
        let loaded = merge(vec![
            (
                PathBuf::from("one.yaml"),
                file(&[("dc-a", "ops"), ("dc-b", "ops-b")], "dc-a"),
            ),
            (
                PathBuf::from("two.yaml"),
                file(&[("dc-c", "ops"), ("dc-b", "other")], "dc-c"),
            ),
        ])
        .unwrap();
        assert_eq!(loaded.context_names(), ["dc-a", "dc-b", "dc-c"]);
        // The first file's current context wins.
        assert_eq!(loaded.current_context(), Some("dc-a"));
        // The context dc-b of the first file, with its own user.
        let dc_b = &loaded.kubeconfig.contexts[1];
        assert_eq!(
            dc_b.context.as_ref().and_then(|c| c.user.as_deref()),
            Some("ops-b")
        );
        assert_eq!(
            loaded.warnings,
            [
                "warning: context \"dc-b\" is defined in one.yaml and in two.yaml: the first is \
                 used, as kubectl does, and the second ignored",
                "warning: user \"ops\" is defined in one.yaml and in two.yaml: the first is \
                 used, as kubectl does, and the second ignored",
                "warning: cluster \"dc-b\" is defined in one.yaml and in two.yaml: the first is \
                 used, as kubectl does, and the second ignored",
            ]
        );
        // Distinct names, no warning.
        let clean = merge(vec![
            (PathBuf::from("one.yaml"), file(&[("dc-a", "a")], "dc-a")),
            (PathBuf::from("two.yaml"), file(&[("dc-c", "c")], "dc-c")),
        ])
        .unwrap();
        assert!(clean.warnings.is_empty(), "{:?}", clean.warnings);
    }

    #[tokio::test]
    async fn each_context_its_own_server_and_a_broken_one_never_falls_back() {
        let mut two = file(&[("dc-c", "c")], "dc-c");
        // dc-d names a user nobody defines.
        two.contexts.push(kube::config::NamedContext {
            name: "dc-d".into(),
            context: Some(kube::config::Context {
                cluster: "dc-c".into(),
                user: Some("missing".into()),
                ..kube::config::Context::default()
            }),
            ..kube::config::NamedContext::default()
        });
        let loaded = merge(vec![
            (PathBuf::from("one.yaml"), file(&[("dc-a", "a")], "dc-a")),
            (PathBuf::from("two.yaml"), two),
        ])
        .unwrap();
        for context in ["dc-a", "dc-c"] {
            let config = loaded.config(context).await.unwrap();
            assert_eq!(
                config.cluster_url.host(),
                Some(format!("{context}.example").as_str())
            );
            let (_client, namespace) = loaded.client(context).await.unwrap();
            assert_eq!(namespace, "default");
        }
        let broken = loaded.config("dc-d").await.unwrap_err();
        assert_eq!(
            broken,
            "context \"dc-d\" names user \"missing\", which no kubeconfig file defines"
        );
        assert!(loaded.config("nowhere").await.is_err());
    }
}

//! The comparison of revisions as text: a table, JSON, or a field-level diff of the effective
//! specs that differ.

use std::collections::BTreeMap;

use express_api::effective::REVISION_SCHEME;
use express_api::history::KeptSpec;
use serde::Serialize;

use crate::revisions::compare::{Discrepancy, LiveFacts, Row, Verdict};

#[derive(Serialize)]
struct Json<'a> {
    nodes: &'a [Row],
}

pub fn render_json(rows: &[Row]) -> String {
    serde_json::to_string_pretty(&Json { nodes: rows }).unwrap_or_default()
}

pub fn render_table(rows: &[Row], live: bool) -> String {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut header = vec!["NAMESPACE", "NODE", "KIND", "REVISION", "SOURCE"];
    if live {
        header.extend(["LIVE DESIRED", "LIVE RUNNING", "VERDICT"]);
    }
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.namespace.clone(),
                r.name.clone(),
                r.kind.to_string(),
                dash(&r.revision),
                r.source.unwrap_or("-").to_owned(),
            ];
            if live {
                cells.extend([
                    dash(&r.live_desired),
                    dash(&r.live_running),
                    r.verdict.map_or("-", Verdict::as_str).to_owned(),
                ]);
            }
            cells
        })
        .collect();
    let mut out = crate::text::table(&header, &table_rows);
    let discrepancies: Vec<&Discrepancy> = rows.iter().flat_map(|r| &r.discrepancies).collect();
    if !discrepancies.is_empty() {
        out.push('\n');
        for d in discrepancies {
            out.push_str(&format!("{}: {}\n", d.kind, d.message));
        }
    }
    for row in rows {
        if let Some(spec) = &row.spec {
            out.push_str(&format!(
                "\n{}/{} hashes ({REVISION_SCHEME}):\n{}\n",
                row.namespace,
                row.name,
                serde_json::to_string_pretty(spec).unwrap_or_default()
            ));
        }
    }
    out
}

/// `diff`: for every node that would restart, the effective spec live (kept for its desired
/// revision, else recomputed from the live objects) against local.
pub fn render_diff(rows: &[Row], facts: &BTreeMap<(String, String), LiveFacts>) -> (String, bool) {
    let mut out = String::new();
    let mut differs = false;
    for row in rows
        .iter()
        .filter(|r| r.verdict == Some(Verdict::WillRestart))
    {
        let Some(local) = &row.local_effective else {
            continue;
        };
        let kept = facts
            .get(&(row.namespace.clone(), row.name.clone()))
            .and_then(|f| f.kept.get(row.live_desired.as_deref()?).cloned());
        let (live, from) = match (kept, &row.live_effective) {
            (Some(kept), _) => (kept, "kept"),
            (None, Some(live)) => (KeptSpec::from(live), "recomputed"),
            (None, None) => continue,
        };
        differs = true;
        out.push_str(&format!(
            "--- {}/{} live ({from}, revision {})\n+++ {}/{} local (revision {})\n",
            row.namespace,
            row.name,
            row.live_desired.as_deref().unwrap_or("?"),
            row.namespace,
            row.name,
            row.revision.as_deref().unwrap_or("?"),
        ));
        out.push_str(&crate::show::history::diff(&live, &KeptSpec::from(local)));
        out.push('\n');
    }
    (out, differs)
}

//! Prometheus' text format, parsed into samples: what the benchmark reads of the operator's
//! metrics and the control plane's.

use std::collections::BTreeMap;

/// One line of Prometheus' text format.
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let value = value.parse().ok()?;
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => (name, labels.strip_suffix('}')?),
                None => (series, ""),
            };
            Some(Sample {
                name: name.to_owned(),
                labels: parse_labels(labels),
                value,
            })
        })
        .collect()
}

/// `a="x",b="y"` into its pairs (the values these metrics carry hold no quotes or commas).
fn parse_labels(labels: &str) -> BTreeMap<String, String> {
    let mut pairs = BTreeMap::new();
    let mut rest = labels;
    while let Some((name, after)) = rest.split_once("=\"") {
        let Some((value, after)) = after.split_once('"') else {
            break;
        };
        pairs.insert(name.trim_start_matches(',').to_owned(), value.to_owned());
        rest = after;
    }
    pairs
}

//! The soak's judge, DC against DC: the DCs of the stage just released against the DCs not yet
//! released, read at the same time, so that trouble everywhere (the infrastructure) is told
//! from trouble where the build went. A DC is in trouble when its doctor's verdict is not
//! `healthy` (warnings do not count: they are in the checks, not the verdict).

use express_triage::Verdict;

/// One sample's verdict and why, naming the DCs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoakVerdict {
    pub verdict: express_api::release::SampleVerdict,
    pub reason: String,
    /// The DCs of the stage in trouble (a failed sample rolls them back once the soak fails).
    pub in_trouble: Vec<String>,
}

/// Judges one sample.
/// - `stage`: each DC of the stage and its verdict (`Err`: it could not be read);
/// - `unreleased`: each DC not yet released that could be read, and its verdict;
/// - `baseline`: for the last stage (no DC left unreleased), each DC's verdict when its stage
///   started (None: not known).
///
/// Failed when a DC of the stage is in trouble while every unreleased DC is healthy (or, with
/// none left, while it was healthy when its stage started); inconclusive when an unreleased DC
/// is in trouble too, when one of the stage cannot be read, or when nothing can be compared;
/// ok otherwise.
pub fn judge(
    stage: &[(&str, Result<Verdict, &str>)],
    unreleased: &[(&str, Verdict)],
    baseline: &[(&str, Option<Verdict>)],
) -> SoakVerdict {
    use express_api::release::SampleVerdict::{Failed, Inconclusive, Ok};
    let verdict = |verdict, reason: String, in_trouble: Vec<String>| SoakVerdict {
        verdict,
        reason,
        in_trouble,
    };
    let unread: Vec<String> = stage
        .iter()
        .filter_map(|(dc, v)| v.as_ref().err().map(|why| format!("{dc} ({why})")))
        .collect();
    if !unread.is_empty() {
        return verdict(
            Inconclusive,
            format!("cannot read {}: held", unread.join(", ")),
            Vec::new(),
        );
    }
    let in_trouble: Vec<(&str, Verdict)> = stage
        .iter()
        .filter_map(|(dc, v)| match v {
            Result::Ok(v) if *v != Verdict::Healthy => Some((*dc, *v)),
            _ => None,
        })
        .collect();
    let named = |list: &[(&str, Verdict)]| {
        list.iter()
            .map(|(dc, v)| format!("{dc} {}", v.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let troubled: Vec<String> = in_trouble.iter().map(|(dc, _)| (*dc).to_owned()).collect();
    if !unreleased.is_empty() {
        let others: Vec<(&str, Verdict)> = unreleased
            .iter()
            .filter(|(_, v)| *v != Verdict::Healthy)
            .copied()
            .collect();
        return match (in_trouble.is_empty(), others.is_empty()) {
            (true, _) => verdict(
                Ok,
                format!(
                    "every DC of the stage healthy (unreleased: {} read)",
                    unreleased.len()
                ),
                Vec::new(),
            ),
            (false, true) => verdict(
                Failed,
                format!(
                    "{} in trouble while every DC not yet released is healthy",
                    named(&in_trouble)
                ),
                troubled,
            ),
            (false, false) => verdict(
                Inconclusive,
                format!(
                    "{} in trouble, and so is {} not yet released: the infrastructure, held",
                    named(&in_trouble),
                    named(&others)
                ),
                Vec::new(),
            ),
        };
    }
    if in_trouble.is_empty() {
        return verdict(Ok, "every DC of the stage healthy".into(), Vec::new());
    }
    // The last stage: each DC against itself when its stage started.
    let was = |dc: &str| {
        baseline
            .iter()
            .find(|(b, _)| *b == dc)
            .and_then(|(_, v)| *v)
    };
    let worse: Vec<(&str, Verdict)> = in_trouble
        .iter()
        .filter(|(dc, _)| was(dc) == Some(Verdict::Healthy))
        .copied()
        .collect();
    if worse.is_empty() {
        return verdict(
            Inconclusive,
            format!(
                "{} in trouble, as before its stage started (or not known then): held",
                named(&in_trouble)
            ),
            Vec::new(),
        );
    }
    verdict(
        Failed,
        format!(
            "{} in trouble, healthy when its stage started (no DC left unreleased to compare)",
            named(&worse)
        ),
        worse.iter().map(|(dc, _)| (*dc).to_owned()).collect(),
    )
}

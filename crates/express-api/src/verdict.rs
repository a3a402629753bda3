//! The doctor's verdict over a DC (DESIGN sections 11 and 14): exactly one per report, a higher
//! one outranking a lower one. `express-triage` decides it; a FleetRelease keeps each DC's in
//! its status, written as the doctor prints it (`healthy`, `tenant`, ...).

use serde::{Deserialize, Serialize};

/// Exactly one per report; a higher one outranks a lower one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Healthy,
    Tenant,
    Deployment,
    Infrastructure,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Healthy,
        Verdict::Tenant,
        Verdict::Deployment,
        Verdict::Infrastructure,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::Tenant => "tenant",
            Verdict::Deployment => "deployment",
            Verdict::Infrastructure => "infrastructure",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_written_as_the_doctor_prints_it() {
        for verdict in Verdict::ALL {
            let json = serde_json::to_string(&verdict).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", verdict.as_str()));
            assert_eq!(serde_json::from_str::<Verdict>(&json).ok(), Some(verdict));
        }
    }
}

//! The arguments several verbs share, written once: `-o text|json`, `--operator-namespace`.

/// `-o`: text for people, JSON for scripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

/// `--operator-namespace`: where the operator runs, and with it what it owns.
#[derive(clap::Args, Clone, Debug)]
pub struct OperatorNamespace {
    /// The operator's namespace: its Lease and Deployment, its releases and the operator-wide
    /// control ConfigMap (express-operator-control) live there.
    #[arg(
        id = "operator_namespace",
        long = "operator-namespace",
        default_value = super::DEFAULT_OPERATOR_NAMESPACE,
        value_name = "NS"
    )]
    pub namespace: String,
}

//! The arguments several verbs share, written once: `-o text|json`.

/// `-o`: text for people, JSON for scripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Text,
    Json,
}

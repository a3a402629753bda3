//! How every live verb reaches a cluster: `--kubeconfig`, `--context` and `-n/--namespace`,
//! honouring `KUBECONFIG` and the context's default namespace, as kubectl does.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The flags every live verb takes.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConnectArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace (default: the context's namespace, then `default`).
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
}

/// A client, and the namespace the verb works in.
pub struct Connection {
    pub client: kube::Client,
    pub namespace: String,
}

impl ConnectArgs {
    pub async fn connect(&self) -> Result<Connection, String> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path)
                    .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => kube::Config::from_kubeconfig(&options).await,
        }
        .map_err(|e| format!("cannot load the kubeconfig: {e}"))?;
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(identified(config))
            .map_err(|e| format!("cannot build a client: {e}"))?;
        Ok(Connection { client, namespace })
    }
}

/// The configuration sending `User-Agent: kubectl-express/VERSION`, so that an API server's
/// audit log (or kubesim's counters) tells the plugin's requests apart.
pub fn identified(mut config: kube::Config) -> kube::Config {
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("kubectl-express/", env!("CARGO_PKG_VERSION"))),
    ));
    config
}

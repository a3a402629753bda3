//! Runs the real `kubectl-express` binary against a test's kubesim.
#![allow(dead_code)]

use crate::support::Env;

/// Runs the plugin with `args` and `--kubeconfig` for the test's kubesim; returns the exit
/// code, stdout and stderr.
pub async fn kubectl_express(env: &Env, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = std::env::temp_dir().join(format!(
        "kubectl-express-e2e-{}-{}.yaml",
        std::process::id(),
        env.sim.url().rsplit(':').next().unwrap_or("0")
    ));
    std::fs::write(&kubeconfig, env.sim.kubeconfig()).expect("kubeconfig");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kubectl-express"))
        .args(args)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .await
        .expect("run kubectl-express");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

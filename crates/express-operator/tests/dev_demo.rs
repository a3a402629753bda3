//! `express-operator dev --demo` runs to completion and shows the ordering.
#![allow(clippy::expect_used, clippy::unwrap_used)] // tests fail loudly on unexpected values

use std::process::Command;

#[test]
fn demo_provisions_and_upgrades_in_order_and_exits_zero() {
    let dir = std::env::temp_dir().join(format!("express-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_express-operator"))
        .args(["dev", "--demo", "--startup-seconds", "0.2", "--kubeconfig"])
        .arg(dir.join("kubeconfig"))
        .output()
        .expect("run the demo");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stdout:\n{text}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let created: Vec<(&str, &str)> = text
        .lines()
        .filter(|l| l.contains("pod created"))
        .filter_map(|l| {
            let mut words = l.split(']').nth(1)?.split_whitespace();
            Some((words.next()?, words.next()?))
        })
        .collect();
    let expected = [
        ("acme-be", "provision"),
        ("acme-fe1", "provision"),
        ("acme-fe2", "provision"),
        ("acme-fe3", "provision"),
        ("acme-fe4", "provision"),
        ("acme-fe1", "upgrade"),
        ("acme-fe2", "upgrade"),
        ("acme-be", "upgrade"),
        ("acme-fe3", "upgrade"),
        ("acme-fe4", "upgrade"),
    ];
    assert_eq!(created, expected, "{text}");
    assert!(
        text.contains("waits: acme-be"),
        "the demo says why nodes wait:\n{text}"
    );
    assert!(
        text.contains("waits: waiting for the desired state to settle"),
        "the demo says that nodes wait for the delivery to complete:\n{text}"
    );
    // Nothing is upgraded before the delivery's last write.
    let last_write = text
        .find("writing ExpressCluster acme")
        .expect("the demo writes");
    let first_upgrade = text.find("upgrade   pod created").expect("an upgrade");
    assert!(last_write < first_upgrade, "{text}");
    assert!(text.contains("demo: upgrade complete"));
}

//! The benchmark cannot rot: run every scenario at a tiny size against a real gateway. It
//! reports numbers but asserts only that every turn completed (performance goals are checked
//! by the benchmark itself, not here).

use loopgate_tests::{bin, WAIT};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benchmark_smoke_run_completes_every_turn() {
    let out = tokio::time::timeout(
        WAIT * 4,
        tokio::process::Command::new(bin("loopgate-bench"))
            .args(["--spawn", "--json", "smoke"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("smoke run finishes")
    .expect("run loopgate-bench");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "loopgate-bench failed: {stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    assert_eq!(report["latency"]["completed"], report["latency"]["turns"]);
    assert_eq!(
        report["throughput"]["completed"],
        report["throughput"]["turns"]
    );
    assert_eq!(report["soak"]["turns"], 200);
    assert_eq!(report["stream"]["chunks_delivered"], 100);
    assert_eq!(report["startup"]["runs"], 2);
}

//! A reader that never answers delays neither a classification nor a recovery (R-I3, R-J6).

use super::*;
use crate::store::Reader;
use crate::test_support::spec;

#[tokio::test]
async fn a_reader_that_never_answers_delays_no_report_and_no_recovery_r_i3() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(dir.path());
    let (reader, _keep) = Reader::never_answering();
    let (ctx, mut out_rx) = crate::test_support::ctx(spec, Some(reader));
    let (done_tx, _done_rx) = mpsc::channel(8);
    let (diag_tx, _diag_rx) = mpsc::channel(8);
    let mut w = Worker::new(ctx, done_tx, diag_tx);
    // A claim no live run holds, seen 2 s ago (as a claims read would have brought it).
    let seen = Instant::now() - Duration::from_secs(2);
    w.diag
        .claims
        .insert("agent:main:s".into(), ("ghost".into(), seen));
    // The observation asks the reader for claims, which never come: it does not wait.
    w.diagnose();
    let frame = tokio::time::timeout(Duration::from_secs(5), out_rx.recv())
        .await
        .expect("the report is not held back by the reader")
        .unwrap();
    match frame {
        WorkerToControl::Diagnostic(r) => {
            assert_eq!(r.class, SessionClass::Stuck);
            assert_eq!(r.excerpt, None, "no excerpt on the frame");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        w.diag.tracker.class_of("agent:main:s").map(|c| c.0),
        Some(SessionClass::Stuck)
    );
    // The next observation starts the recovery, the excerpt for the log line still pending.
    w.diagnose();
    let frame = tokio::time::timeout(Duration::from_secs(5), out_rx.recv())
        .await
        .expect("the recovery is not held back by the reader")
        .unwrap();
    match frame {
        WorkerToControl::Recovery(r) => {
            assert_eq!(r.phase, RecoveryPhase::Requested);
            assert_eq!(r.action, RecoveryAction::ReleaseClaim);
            assert_eq!(r.run_id.as_deref(), Some("ghost"));
        }
        other => panic!("{other:?}"),
    }
    // No log level is enabled here: the session's context was never read.
    assert!(w.diag.pending.is_empty());
    // With WARN enabled, the log line waits for its excerpt (never answered); a new report
    // still goes out at once.
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::sink)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    w.diag
        .claims
        .insert("agent:main:t".into(), ("ghost-2".into(), seen));
    w.diagnose();
    let frame = tokio::time::timeout(Duration::from_secs(5), out_rx.recv())
        .await
        .expect("the report is not held back by the reader")
        .unwrap();
    assert!(
        matches!(&frame, WorkerToControl::Diagnostic(r) if r.session_key == "agent:main:t"),
        "{frame:?}"
    );
    assert_eq!(
        w.diag.pending.len(),
        1,
        "the log line waits for its excerpt"
    );
    // A reset of that session discards the pending excerpt; stopping retires the rest.
    w.diag.replaced("agent:main:t");
    assert!(w.diag.pending.is_empty());
    w.diag
        .claims
        .insert("agent:main:u".into(), ("ghost-3".into(), seen));
    w.diagnose();
    assert_eq!(w.diag.pending.len(), 1);
    w.diag.stop();
    assert!(w.diag.pending.is_empty());
    assert!(w.diag.tracker.class_of("agent:main:u").is_none());
}

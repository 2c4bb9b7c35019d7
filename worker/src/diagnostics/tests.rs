use super::*;

const WARN: u64 = 1000;

fn tracker() -> Tracker {
    Tracker::new(DiagnosticsPolicy {
        enabled: true,
        warn_ms: WARN,
        abort_min_ms: 2000,
    })
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn run(t0: Instant, activity: Activity, progress: u64, last: u64) -> Seen {
    Seen {
        session_key: "s".into(),
        generation: 1,
        run: Some(RunSeen {
            run_id: "r1".into(),
            owner_alive: true,
            activity,
            progress,
            last_progress: t0 + ms(last),
        }),
        queue_depth: 1,
        unscheduled_since: None,
        stale_claim: None,
    }
}

fn reports(steps: &[Step]) -> Vec<(SessionClass, &'static str, u32)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Report(r) => Some((r.class, r.reason, r.repeat)),
            Step::Recover(_) => None,
        })
        .collect()
}

fn recoveries(steps: &[Step]) -> Vec<RecoveryAction> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Recover(r) => Some(r.action),
            Step::Report(_) => None,
        })
        .collect()
}

#[test]
fn a_silent_model_call_is_long_running_then_stalled_at_the_abort_threshold_then_aborted_r_i1_r_i2()
{
    let t0 = Instant::now();
    let mut t = tracker();
    let seen = [run(t0, Activity::ModelCall, 1, 0)];
    assert!(t.observe(t0 + ms(999), &seen).is_empty());
    let s = t.observe(t0 + ms(1000), &seen);
    assert_eq!(
        reports(&s),
        [(
            SessionClass::LongRunning,
            "active_model_call_without_progress",
            0
        )]
    );
    // Owned silent model calls stay long-running until the abort threshold (3 x warn).
    for at in [1500, 2000, 2999] {
        let s = t.observe(t0 + ms(at), &seen);
        assert!(recoveries(&s).is_empty(), "no recovery at {at}");
        assert!(reports(&s).iter().all(|r| r.0 == SessionClass::LongRunning));
    }
    let s = t.observe(t0 + ms(3000), &seen);
    assert_eq!(
        reports(&s),
        [(SessionClass::Stalled, "active_work_without_progress", 0)]
    );
    assert!(recoveries(&s).is_empty(), "not on the observation itself");
    let s = t.observe(t0 + ms(3250), &seen);
    assert_eq!(recoveries(&s), [RecoveryAction::AbortRun]);
    // Asked once.
    assert!(recoveries(&t.observe(t0 + ms(3500), &seen)).is_empty());
}

#[test]
fn a_streaming_model_is_never_reported_r_i1() {
    let t0 = Instant::now();
    let mut t = tracker();
    for i in 0..40u64 {
        let at = i * 250;
        let seen = [run(t0, Activity::ModelCall, i, at.saturating_sub(200))];
        assert!(t.observe(t0 + ms(at), &seen).is_empty(), "at {at}");
    }
}

#[test]
fn a_run_that_progressed_after_the_observation_is_not_recovered_r_i2() {
    let t0 = Instant::now();
    let mut t = tracker();
    let quiet = [run(t0, Activity::ModelCall, 1, 0)];
    t.observe(t0 + ms(1000), &quiet);
    let s = t.observe(t0 + ms(3000), &quiet);
    assert_eq!(reports(&s)[0].0, SessionClass::Stalled);
    // Output arrived meanwhile: the session is healthy again, nothing is aborted.
    let resumed = [run(t0, Activity::ModelCall, 2, 3100)];
    assert!(t.observe(t0 + ms(3250), &resumed).is_empty());
    assert!(t.class_of("s").is_none());
    // A replaced run (a new generation) is not aborted on the old observation either.
    t.observe(t0 + ms(6200), &resumed);
    let mut replaced = resumed.clone();
    replaced[0].generation = 2;
    let s = t.observe(t0 + ms(6300), &replaced);
    assert!(recoveries(&s).is_empty());
}

#[test]
fn a_pending_approval_protects_its_run_r_i2() {
    let t0 = Instant::now();
    let mut t = tracker();
    let seen = [run(t0, Activity::Approval, 1, 0)];
    let mut all = Vec::new();
    for at in (1000..20_000).step_by(250) {
        all.extend(t.observe(t0 + ms(at), &seen));
    }
    assert!(recoveries(&all).is_empty());
    assert!(reports(&all)
        .iter()
        .all(|r| r.0 == SessionClass::LongRunning && r.1 == "human_input_wait"));
}

#[test]
fn a_silent_tool_is_stalled_and_abort_drained_past_the_abort_threshold_r_i2() {
    let t0 = Instant::now();
    let mut t = tracker();
    let seen = [run(t0, Activity::ToolCall, 1, 0)];
    let s = t.observe(t0 + ms(1000), &seen);
    assert_eq!(
        reports(&s),
        [(SessionClass::Stalled, "blocked_tool_call", 0)]
    );
    assert!(recoveries(&t.observe(t0 + ms(1500), &seen)).is_empty());
    assert_eq!(
        recoveries(&t.observe(t0 + ms(3000), &seen)),
        [RecoveryAction::AbortRun]
    );
}

#[test]
fn stale_bookkeeping_is_stuck_and_recovered_on_the_next_observation_r_i1_r_i2() {
    let t0 = Instant::now();
    let mut t = tracker();
    let claim = Seen {
        session_key: "s".into(),
        generation: 0,
        run: None,
        queue_depth: 0,
        unscheduled_since: None,
        stale_claim: Some(("ghost".into(), t0)),
    };
    assert!(t
        .observe(t0 + ms(500), std::slice::from_ref(&claim))
        .is_empty());
    let s = t.observe(t0 + ms(1000), std::slice::from_ref(&claim));
    assert_eq!(
        reports(&s),
        [(SessionClass::Stuck, "stale_session_state", 0)]
    );
    let s = t.observe(t0 + ms(1250), std::slice::from_ref(&claim));
    assert_eq!(recoveries(&s), [RecoveryAction::ReleaseClaim]);
    match &s[0] {
        Step::Recover(r) => assert_eq!(r.run_id.as_deref(), Some("ghost")),
        other => panic!("{other:?}"),
    }
    t.recovered("s", 0);
    assert!(t.class_of("s").is_none());

    let mut owner_gone = run(t0, Activity::ModelCall, 1, 0);
    owner_gone.run.as_mut().unwrap().owner_alive = false;
    t.observe(t0 + ms(1000), std::slice::from_ref(&owner_gone));
    assert_eq!(
        recoveries(&t.observe(t0 + ms(1250), &[owner_gone])),
        [RecoveryAction::ReleaseLane]
    );

    let queued = Seen {
        session_key: "q".into(),
        generation: 3,
        run: None,
        queue_depth: 2,
        unscheduled_since: Some(t0),
        stale_claim: None,
    };
    let s = t.observe(t0 + ms(1000), std::slice::from_ref(&queued));
    assert_eq!(
        reports(&s),
        [(SessionClass::Stuck, "queued_work_without_active_run", 0)]
    );
    assert_eq!(
        recoveries(&t.observe(t0 + ms(1250), &[queued])),
        [RecoveryAction::Reschedule]
    );
}

#[test]
fn repeated_stuck_reports_back_off_while_the_session_is_unchanged_r_i2() {
    let t0 = Instant::now();
    let mut t = tracker();
    let claim = Seen {
        session_key: "s".into(),
        generation: 0,
        run: None,
        queue_depth: 0,
        unscheduled_since: None,
        stale_claim: Some(("ghost".into(), t0)),
    };
    let mut reported = Vec::new();
    for at in (0..20_000).step_by(250) {
        let s = t.observe(t0 + ms(at), std::slice::from_ref(&claim));
        if !reports(&s).is_empty() {
            reported.push(at);
        }
        if !recoveries(&s).is_empty() {
            // The recovery could not act; it may be asked again later.
            t.retry_later("s");
        }
    }
    assert_eq!(reported, [1000, 2000, 4000, 8000, 16_000]);
}

#[test]
fn recovery_makes_the_state_idle_only_for_the_same_generation_r_i2() {
    let t0 = Instant::now();
    let mut t = tracker();
    let seen = [run(t0, Activity::Run, 1, 0)];
    t.observe(t0 + ms(1000), &seen);
    t.recovered("s", 7);
    assert!(t.class_of("s").is_some(), "another generation is current");
    t.recovered("s", 1);
    assert!(t.class_of("s").is_none());
}

#[test]
fn sessions_that_went_away_are_forgotten() {
    let t0 = Instant::now();
    let mut t = tracker();
    t.observe(t0 + ms(1000), &[run(t0, Activity::Run, 1, 0)]);
    assert!(t.class_of("s").is_some());
    t.observe(t0 + ms(1250), &[]);
    assert!(t.class_of("s").is_none());
}

#[test]
fn the_probe_keeps_progress_and_activity() {
    let t0 = Instant::now();
    let p = Probe::new(t0);
    assert_eq!(p.activity(), Activity::Run);
    assert_eq!(p.progress(), 0);
    p.set_activity(Activity::Approval);
    assert_eq!(p.progress(), 1, "a change of activity is progress");
    p.set_activity(Activity::Approval);
    assert_eq!(p.progress(), 1, "the same activity is not");
    // An approved tool starts with a fresh quiet time, however long the operator took.
    p.set_activity(Activity::ToolCall);
    assert_eq!(p.activity(), Activity::ToolCall);
    assert_eq!(p.progress(), 2);
    assert!(p.last_progress() >= t0);
}

//! The scheduler's own logic (issue 40): schedules ([`schedule`]), jobs as clients make and
//! change them and what their runs are ([`job`]), and the jobs in memory ([`jobs`]). The
//! firing itself (`rpc::cron`) admits each due occurrence as a run under a key made of the
//! job and the occurrence, so no restart or crash can run it twice.

pub mod job;
pub mod jobs;
pub mod schedule;

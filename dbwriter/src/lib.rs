//! One writer thread per SQLite database (the gateway db in the supervisor, each agent db in
//! its worker). Callers put commands on a bounded queue and never wait for room. The thread
//! takes whatever is queued (up to a batch limit) and runs it in one transaction, each
//! command in its own savepoint: a command that fails leaves nothing behind and does not fail
//! its neighbours. Answers are held until the commit; if the commit itself fails, every
//! caller in the batch is told so instead. [`migrate`] is the one schema-migration runner
//! both databases' ladders go through before their writer starts. [`journal`] records a
//! batch's row changes for cluster mode before it commits (and replays them into another
//! copy); `reserve` holds disk space beside a database, given back when the disk fills.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![deny(unsafe_code)]

pub mod journal;
mod migrate;
mod reserve;

pub use journal::{Journal, Refusal};
pub use migrate::{migrate, top, MigrateError, Step};
pub use reserve::Reserve;

use rusqlite::Connection;
use tokio::sync::oneshot;

/// Why a command could not be queued or answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueError {
    /// The queue is full: the database is overloaded.
    Full,
    /// The writer thread has stopped.
    Gone,
}

/// The sending side of a writer thread's queue. Cheap to clone.
///
/// The queue grows in blocks as commands arrive (tokio's bounded channel), up to its bound:
/// a std `sync_channel` writes every slot at creation, and a worker's 4096-command queue of
/// 560-byte commands was 2.2 MB resident in every idle worker.
pub struct Queue<C>(tokio::sync::mpsc::Sender<C>);

impl<C> Clone for Queue<C> {
    fn clone(&self) -> Self {
        Queue(self.0.clone())
    }
}

/// A queue of `len` commands and its receiving end, for a thread that serves them some
/// other way than [`start`] (a read-only connection, say).
/// The receiving end is read from a plain thread (`blocking_recv`, `try_recv`), never from
/// inside an async runtime.
pub fn channel<C>(len: usize) -> (Queue<C>, tokio::sync::mpsc::Receiver<C>) {
    let (tx, rx) = tokio::sync::mpsc::channel(len.max(1));
    (Queue(tx), rx)
}

impl<C> Queue<C> {
    /// Queues `cmd` without waiting.
    pub fn send(&self, cmd: C) -> Result<(), QueueError> {
        self.0.try_send(cmd).map_err(|e| match e {
            tokio::sync::mpsc::error::TrySendError::Full(_) => QueueError::Full,
            tokio::sync::mpsc::error::TrySendError::Closed(_) => QueueError::Gone,
        })
    }

    /// Queues the command `make` builds around a reply channel and waits for the answer.
    pub async fn ask<T, E: From<QueueError>>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, E>>) -> C,
    ) -> Result<T, E> {
        let (reply, rx) = oneshot::channel();
        self.send(make(reply))?;
        rx.await.map_err(|_| E::from(QueueError::Gone))?
    }
}

/// Delivers a held answer: `Some(error)` when the batch's commit failed.
type Deliver = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;

/// A command's answer, held until its batch commits.
pub struct Held(Deliver);

impl Held {
    /// Delivers `result` to `tx` after the commit; if the commit fails, `commit_failed`'s
    /// error instead.
    pub fn to<T: Send + 'static, E: Send + 'static>(
        tx: oneshot::Sender<Result<T, E>>,
        result: Result<T, E>,
        commit_failed: fn(&rusqlite::Error) -> E,
    ) -> Held {
        Held(Box::new(move |failed| {
            let _ = tx.send(match failed {
                Some(e) => Err(commit_failed(e)),
                None => result,
            });
        }))
    }

    /// Nobody waits; `lost` runs if the commit fails.
    pub fn unanswered(lost: impl FnOnce(&rusqlite::Error) + Send + 'static) -> Held {
        Held(Box::new(move |failed| {
            if let Some(e) = failed {
                lost(e);
            }
        }))
    }
}

/// Where a command runs: its work goes through [`Savepoint::run`].
pub struct Savepoint {
    /// The batch has one command: the transaction is its savepoint.
    alone: bool,
}

impl Savepoint {
    /// Runs `f`; on error its writes are undone and the rest of the batch goes on.
    pub fn run<T, E: From<rusqlite::Error>>(
        &self,
        conn: &Connection,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        if !self.alone {
            exec(conn, "SAVEPOINT cmd")?;
        }
        match f(conn) {
            Ok(v) => {
                if !self.alone {
                    exec(conn, "RELEASE cmd")?;
                }
                Ok(v)
            }
            Err(e) => {
                if self.alone {
                    // Undo this command's writes and start over for the commit.
                    exec(conn, "ROLLBACK")?;
                    exec(conn, "BEGIN")?;
                } else {
                    exec(conn, "ROLLBACK TO cmd")?;
                    exec(conn, "RELEASE cmd")?;
                }
                Err(e)
            }
        }
    }
}

/// How a database's commits survive a power cut (crashes of the process lose nothing
/// either way: WAL commits are in the OS's page cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: every commit is fsynced before it is answered.
    Full,
    /// `synchronous=NORMAL`: fsync at checkpoints only; a power cut may lose the latest
    /// commits, never corrupt the database (both databases; the gateway db's accepts are
    /// fsynced per batch through [`Options::durable`]).
    Normal,
}

/// Opens the writer's connection: WAL (readers never block it), the given durability, a 5 s
/// busy timeout and a statement cache.
pub fn open(path: &std::path::Path, durability: Durability) -> rusqlite::Result<Connection> {
    create_whole(path)?;
    refuse_empty(path)?;
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// A new database is made beside its path and renamed into place once it has a header
/// (WAL mode is written to it), so a crash while creating it never leaves an empty file at
/// the path, which [`refuse_empty`] would rightly refuse.
fn create_whole(path: &std::path::Path) -> rusqlite::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let io = |e: std::io::Error| {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(format!("cannot create {}: {e}", path.display())),
        )
    };
    let mut name = path.as_os_str().to_owned();
    name.push(".init");
    let tmp = std::path::PathBuf::from(name);
    for stale in ["", "-wal", "-shm"] {
        let mut p = tmp.as_os_str().to_owned();
        p.push(stale);
        let _ = std::fs::remove_file(std::path::PathBuf::from(p));
    }
    {
        let conn = Connection::open(&tmp)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // Closing the only connection checkpoints and removes the WAL.
        conn.close().map_err(|(_, e)| e)?;
    }
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// A database file of 0 bytes is refused, never silently made a new empty database: it was
/// truncated or replaced, and its data is gone unless the operator restores it.
fn refuse_empty(path: &std::path::Path) -> rusqlite::Result<()> {
    let empty = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0);
    let wal = path.with_extension(format!(
        "{}-wal",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    let wal_has_data = std::fs::metadata(wal).is_ok_and(|m| m.len() > 0);
    if empty && !wal_has_data {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB),
            Some(format!(
                "{} is an empty file (0 bytes), not a database: restore it from a backup, or move it aside to start with an empty one",
                path.display()
            )),
        ));
    }
    Ok(())
}

/// At a clean stop, once the writer is idle for good: moves everything in the WAL into the
/// database file and empties the WAL, so the database file alone holds all the data (a
/// copy of it is complete). `Ok(false)` if a reader kept it from finishing.
pub fn checkpoint(path: &std::path::Path) -> rusqlite::Result<bool> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
    Ok(busy == 0)
}

/// Runs a cached statement without parameters (`BEGIN`, `SAVEPOINT cmd`, ...): statement
/// preparation showed up at the top of the turn-path profile.
pub fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// How a writer thread runs besides what it does ([`start`]).
pub struct Options<C> {
    /// Most commands waiting; past it [`Queue::send`] answers [`QueueError::Full`].
    pub queue_len: usize,
    /// Most commands in one transaction.
    pub max_batch: usize,
    /// A batch holding a command this says must survive a power cut commits with
    /// `synchronous=FULL` (fsynced before any answer), every other batch with the
    /// connection's own setting: the fsync is paid only where a promise needs it.
    pub durable: fn(&C) -> bool,
    /// Every `COMMIT` is timed into it (the metrics' commit latency).
    pub stats: std::sync::Arc<CommitStats>,
    /// Released when the disk is all but full, or when a commit finds it full (that commit
    /// is then tried once more); see [`Reserve`].
    pub reserve: Option<std::sync::Arc<Reserve>>,
    /// Each transaction's changes are recorded here before it commits ([`journal`]).
    pub journal: Option<Box<dyn Journal>>,
}

impl<C> Options<C> {
    /// `queue_len` and `max_batch`; nothing durable, fresh stats, no reserve.
    pub fn new(queue_len: usize, max_batch: usize) -> Self {
        Options {
            queue_len,
            max_batch,
            durable: |_| false,
            stats: Default::default(),
            reserve: None,
            journal: None,
        }
    }
}

/// Starts the writer thread `name` over `conn`: `apply` carries out one command (its writes
/// through the given [`Savepoint`]) and returns its held answer.
pub fn start<C: Send + 'static>(
    name: &str,
    mut conn: Connection,
    options: Options<C>,
    mut apply: impl FnMut(&Connection, C, &Savepoint) -> Held + Send + 'static,
) -> std::io::Result<Queue<C>> {
    let Options {
        queue_len,
        max_batch,
        durable,
        stats,
        reserve,
        mut journal,
    } = options;
    if let Some(j) = &journal {
        journal::install(&conn, j.tables()).map_err(std::io::Error::other)?;
    }
    let (queue, mut rx) = channel::<C>(queue_len);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            while let Some(first) = rx.blocking_recv() {
                let mut batch = vec![first];
                while batch.len() < max_batch {
                    match rx.try_recv() {
                        Ok(c) => batch.push(c),
                        Err(_) => break,
                    }
                }
                if reserve.as_deref().is_some_and(Reserve::release_if_low) {
                    warn_released(&conn);
                }
                let full = batch.iter().any(durable);
                if full {
                    let _ = exec(&conn, "PRAGMA synchronous = FULL");
                }
                run_batch(
                    &mut conn,
                    batch,
                    &mut apply,
                    &stats,
                    reserve.as_deref(),
                    journal.as_deref_mut(),
                );
                if full {
                    let _ = exec(&conn, "PRAGMA synchronous = NORMAL");
                }
            }
        })?;
    Ok(queue)
}

fn run_batch<C>(
    conn: &mut Connection,
    batch: Vec<C>,
    apply: &mut impl FnMut(&Connection, C, &Savepoint) -> Held,
    stats: &CommitStats,
    reserve: Option<&Reserve>,
    journal: Option<&mut dyn Journal>,
) {
    let mut held = Vec::with_capacity(batch.len());
    let savepoint = Savepoint {
        alone: batch.len() == 1,
    };
    let outcome = (|| -> rusqlite::Result<()> {
        exec(conn, "BEGIN")?;
        for cmd in batch {
            held.push(apply(conn, cmd, &savepoint));
        }
        if let Some(j) = journal {
            journal::record(conn, j)?;
        }
        let at = std::time::Instant::now();
        let mut done = exec(conn, "COMMIT");
        if is_disk_full(&done) && reserve.is_some_and(Reserve::release) {
            warn_released(conn);
            // SQLite may have rolled the transaction back itself; if not, it commits now.
            if !conn.is_autocommit() {
                done = exec(conn, "COMMIT");
            }
        }
        stats.observe(at.elapsed());
        done
    })();
    match outcome {
        Ok(()) => held.into_iter().for_each(|h| (h.0)(None)),
        Err(e) => {
            let _ = exec(conn, "ROLLBACK");
            // Nothing in the batch is durable: every caller hears so.
            held.into_iter().for_each(|h| (h.0)(Some(&e)));
        }
    }
}

fn warn_released(conn: &Connection) {
    tracing::warn!(
        database = %conn.path().unwrap_or("?"),
        "The disk is full: released the reserve so this database keeps recording. Free space, then restart to hold the reserve again."
    );
}

fn is_disk_full(r: &rusqlite::Result<()>) -> bool {
    matches!(r, Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull))
}

/// Upper bounds of the commit latency buckets, in seconds (`+Inf` follows).
pub const COMMIT_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// How long `COMMIT`s took: a lock-free histogram over [`COMMIT_BUCKETS`].
#[derive(Debug, Default)]
pub struct CommitStats {
    /// Per bucket (not cumulative), the last one `+Inf`.
    buckets: [std::sync::atomic::AtomicU64; COMMIT_BUCKETS.len() + 1],
    sum_ns: std::sync::atomic::AtomicU64,
}

/// A [`CommitStats`] reading: cumulative counts per bucket bound (`+Inf` last), the sum in
/// seconds and the count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommitSnapshot {
    pub cumulative: Vec<u64>,
    pub sum_seconds: f64,
    pub count: u64,
}

impl CommitStats {
    pub fn observe(&self, took: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let s = took.as_secs_f64();
        let i = COMMIT_BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(COMMIT_BUCKETS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_ns
            .fetch_add(took.as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    }

    pub fn snapshot(&self) -> CommitSnapshot {
        use std::sync::atomic::Ordering::Relaxed;
        let mut total = 0;
        let cumulative = self
            .buckets
            .iter()
            .map(|b| {
                total += b.load(Relaxed);
                total
            })
            .collect();
        CommitSnapshot {
            // The count is the `+Inf` bucket's, read with the buckets (OpenMetrics wants them
            // equal; a commit landing meanwhile shows in the next reading).
            count: total,
            cumulative,
            sum_seconds: self.sum_ns.load(Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_stats_are_cumulative_buckets() {
        let s = CommitStats::default();
        s.observe(std::time::Duration::from_micros(300));
        s.observe(std::time::Duration::from_millis(3));
        s.observe(std::time::Duration::from_secs(9));
        let snap = s.snapshot();
        assert_eq!(snap.count, 3);
        assert_eq!(snap.cumulative[0], 1);
        assert_eq!(snap.cumulative[3], 2, "<= 5 ms");
        assert_eq!(snap.cumulative[COMMIT_BUCKETS.len() - 1], 2);
        assert_eq!(*snap.cumulative.last().unwrap(), 3);
        assert!((snap.sum_seconds - 9.0033).abs() < 1e-6);
    }

    #[test]
    fn an_empty_file_is_refused_and_a_checkpoint_empties_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.sqlite");
        std::fs::write(&empty, b"").unwrap();
        let e = super::open(&empty, Durability::Normal)
            .unwrap_err()
            .to_string();
        assert!(e.contains("empty file"), "{e}");
        let db = dir.path().join("db.sqlite");
        let conn = super::open(&db, Durability::Full).unwrap();
        conn.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        assert!(checkpoint(&db).unwrap());
        let wal = dir.path().join("db.sqlite-wal");
        assert_eq!(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0), 0);
        drop(conn);
        // The database file alone holds the data.
        let copy = dir.path().join("copy.sqlite");
        std::fs::copy(&db, &copy).unwrap();
        let n: i64 = Connection::open(&copy)
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    enum Cmd {
        Insert(i64, oneshot::Sender<Result<(), String>>),
    }

    fn open() -> (tempfile::TempDir, Queue<Cmd>, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t(v INTEGER PRIMARY KEY); CREATE TABLE log(v INTEGER);")
            .unwrap();
        let q = start(
            "test-writer",
            conn,
            Options::new(64, 16),
            |conn, cmd, sp| match cmd {
                Cmd::Insert(v, tx) => {
                    // Two writes: the log row must not survive when the second fails.
                    let r = sp.run(conn, |c| {
                        c.execute("INSERT INTO log(v) VALUES (?1)", [v])?;
                        c.execute("INSERT INTO t(v) VALUES (?1)", [v])?;
                        Ok::<_, rusqlite::Error>(())
                    });
                    Held::to(tx, r.map_err(|e| e.to_string()), |e| e.to_string())
                }
            },
        )
        .unwrap();
        (dir, q, path)
    }

    /// A failed command leaves nothing behind and does not fail its batch neighbours,
    /// whether it runs alone or in a batch.
    #[tokio::test]
    async fn failed_commands_are_contained() {
        let (_dir, q, path) = open();
        let mut waits = Vec::new();
        for v in [1, 2, 1, 3] {
            let (tx, rx) = oneshot::channel();
            q.send(Cmd::Insert(v, tx)).unwrap();
            waits.push(rx);
        }
        let mut results = Vec::new();
        for w in waits {
            results.push(w.await.unwrap().is_ok());
        }
        assert_eq!(results, [true, true, false, true]);
        let (tx, rx) = oneshot::channel();
        q.send(Cmd::Insert(3, tx)).unwrap();
        assert!(rx.await.unwrap().is_err(), "a lone duplicate fails too");
        let c = Connection::open(&path).unwrap();
        let logged: i64 = c
            .query_row("SELECT count(*) FROM log", [], |r| r.get(0))
            .unwrap();
        assert_eq!(logged, 3, "the failed inserts left no log rows");
        let ok: Result<(), String> = q.ask(|tx| Cmd::Insert(4, tx)).await;
        assert!(ok.is_ok());
    }

    impl From<QueueError> for String {
        fn from(e: QueueError) -> String {
            format!("{e:?}")
        }
    }
}

//! The one schema-migration runner both databases use. A database's schema is a ladder of
//! numbered steps; `PRAGMA user_version` records the last step applied. [`migrate`] applies
//! the steps above it in order, each in its own transaction together with the new
//! `user_version` (a step that fails leaves the database at the version before it), and
//! refuses a database a newer build wrote (a version past the ladder's top).

use rusqlite::Connection;

/// One step of a ladder: the SQL batches it runs, in order. Step `i` of a ladder (from 0)
/// brings a database at version `i` to version `i + 1`.
pub type Step<'a> = &'a [&'a str];

/// Why [`migrate`] did not bring a database to the ladder's top.
#[derive(Debug)]
pub enum MigrateError {
    /// The database is at version `found`, past this build's `known` top.
    TooNew { found: i64, known: i64 },
    /// Reading the version or applying a step failed.
    Sqlite(rusqlite::Error),
}

impl std::fmt::Display for MigrateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MigrateError::TooNew { found, known } => write!(
                f,
                "database schema version {found} is newer than this build's {known}"
            ),
            MigrateError::Sqlite(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for MigrateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MigrateError::TooNew { .. } => None,
            MigrateError::Sqlite(e) => Some(e),
        }
    }
}

impl From<rusqlite::Error> for MigrateError {
    fn from(e: rusqlite::Error) -> Self {
        MigrateError::Sqlite(e)
    }
}

/// The version a ladder brings a database to: its number of steps.
pub const fn top(ladder: &[Step<'_>]) -> i64 {
    ladder.len() as i64
}

/// Brings the database to the top of `ladder`: applies every step above its
/// `user_version`, one transaction each; refuses a version past the top.
pub fn migrate(conn: &Connection, ladder: &[Step<'_>]) -> Result<(), MigrateError> {
    let found: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let known = top(ladder);
    if found > known {
        return Err(MigrateError::TooNew { found, known });
    }
    let done = usize::try_from(found).unwrap_or(0);
    for (at, step) in ladder.iter().enumerate().skip(done) {
        // Rolled back when dropped uncommitted (a failed batch).
        let tx = conn.unchecked_transaction()?;
        for sql in step.iter() {
            tx.execute_batch(sql)?;
        }
        tx.pragma_update(None, "user_version", at as i64 + 1)?;
        tx.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LADDER: &[Step<'static>] = &[
        &["CREATE TABLE a(x INTEGER) STRICT;"],
        &[
            "ALTER TABLE a ADD COLUMN y TEXT;",
            "CREATE TABLE b(z TEXT);",
        ],
        &["CREATE INDEX a_y ON a(y);"],
    ];

    fn version(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    fn tables(conn: &Connection) -> Vec<String> {
        let mut s = conn
            .prepare("SELECT name FROM sqlite_master ORDER BY name")
            .unwrap();
        let names = s.query_map([], |r| r.get(0)).unwrap();
        names.collect::<Result<_, _>>().unwrap()
    }

    #[test]
    fn a_new_database_climbs_the_whole_ladder_and_stays() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(top(LADDER), 3);
        migrate(&conn, LADDER).unwrap();
        assert_eq!(version(&conn), 3);
        assert_eq!(tables(&conn), ["a", "a_y", "b"]);
        // At the top: nothing runs again (the steps are not idempotent).
        migrate(&conn, LADDER).unwrap();
        assert_eq!(version(&conn), 3);
    }

    #[test]
    fn only_the_steps_above_the_version_run() {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn, &LADDER[..1]).unwrap();
        assert_eq!(version(&conn), 1);
        conn.execute("INSERT INTO a(x) VALUES (7)", []).unwrap();
        migrate(&conn, LADDER).unwrap();
        assert_eq!(version(&conn), 3);
        let x: i64 = conn.query_row("SELECT x FROM a", [], |r| r.get(0)).unwrap();
        assert_eq!(x, 7);
    }

    #[test]
    fn a_newer_database_is_refused_untouched() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", 4).unwrap();
        let e = migrate(&conn, LADDER).unwrap_err();
        assert!(
            matches!(e, MigrateError::TooNew { found: 4, known: 3 }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "database schema version 4 is newer than this build's 3"
        );
        assert!(tables(&conn).is_empty());
    }

    #[test]
    fn a_failed_step_leaves_the_version_before_it() {
        let conn = Connection::open_in_memory().unwrap();
        let broken: &[Step<'_>] = &[LADDER[0], &["CREATE TABLE c(v);", "NOT SQL;"]];
        assert!(matches!(
            migrate(&conn, broken),
            Err(MigrateError::Sqlite(_))
        ));
        assert_eq!(version(&conn), 1);
        assert_eq!(
            tables(&conn),
            ["a"],
            "the failed step's first batch rolled back"
        );
        // The connection is usable again: no transaction was left open.
        migrate(&conn, LADDER).unwrap();
        assert_eq!(version(&conn), 3);
    }
}

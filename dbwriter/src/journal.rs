//! A journaled database: each transaction's changes go somewhere else before it commits
//! (cluster mode: the agent's journal in the engine, of which the database is a cache).
//!
//! The writer's connection gets temporary triggers on the journaled tables that log every
//! row a statement writes (its new values, or a deleted row's key) to a temporary table, so
//! a savepoint rolled back takes its log rows with it. Before `COMMIT` the log is read out as
//! one JSON array, `[{"t": table, "op": "upsert" | "delete", "row": {column: value}}]`, handed
//! to the [`Journal`] and emptied. [`replay`] applies such an array to another copy of the
//! database. Only SQL: no SQLite extension, and nothing changes for a database without a
//! journal (the triggers exist only on a journaled writer's connection).

use rusqlite::{params, Connection};

/// Where a journaled writer's transactions are recorded before they commit.
pub trait Journal: Send + 'static {
    /// The journaled tables (each with a primary key; their columns are read from the
    /// schema).
    fn tables(&self) -> &'static [&'static str];

    /// Records one transaction's `changes` before it commits. It may write its own
    /// bookkeeping through `conn` (in the same transaction, not journaled). An error rolls
    /// the whole transaction back: every command in it fails with [`Refusal`].
    fn record(&mut self, conn: &Connection, changes: String) -> Result<(), String>;
}

/// The journal refused or could not record a transaction (in the error every command of
/// that transaction is told; see [`refusal`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// Why the journal refused, if that is why a transaction failed (carried in the one
/// `rusqlite::Error` variant that holds any error without a feature).
pub fn refusal(e: &rusqlite::Error) -> Option<&str> {
    match e {
        rusqlite::Error::ToSqlConversionFailure(inner) => {
            inner.downcast_ref::<Refusal>().map(|r| r.0.as_str())
        }
        _ => None,
    }
}

/// A table's columns and primary key, from the schema.
struct Shape {
    columns: Vec<String>,
    key: Vec<String>,
}

fn shape(conn: &Connection, table: &str) -> rusqlite::Result<Shape> {
    let mut columns = Vec::new();
    let mut key: Vec<(i64, String)> = Vec::new();
    let mut q = conn.prepare("SELECT name, pk FROM pragma_table_info(?1)")?;
    let mut rows = q.query(params![table])?;
    while let Some(r) = rows.next()? {
        let (name, pk): (String, i64) = (r.get(0)?, r.get(1)?);
        if pk > 0 {
            key.push((pk, name.clone()));
        }
        columns.push(name);
    }
    if columns.is_empty() || key.is_empty() {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "journaled table {table} does not exist or has no primary key"
        )));
    }
    key.sort();
    Ok(Shape {
        columns,
        key: key.into_iter().map(|(_, n)| n).collect(),
    })
}

/// `json_object('a', R.a, 'b', R.b)` over `cols` of row `r` (`NEW` or `OLD`).
fn object(r: &str, cols: &[String]) -> String {
    let pairs: Vec<String> = cols.iter().map(|c| format!("'{c}', {r}.\"{c}\"")).collect();
    format!("json_object({})", pairs.join(", "))
}

/// Makes the log and its triggers on the writer's connection (temporary: they go with it).
pub fn install(conn: &Connection, tables: &[&str]) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS journal_log(n INTEGER PRIMARY KEY, t TEXT NOT NULL, op TEXT NOT NULL, row TEXT NOT NULL);",
    )?;
    for t in tables {
        let s = shape(conn, t)?;
        let new = object("NEW", &s.columns);
        let old = object("OLD", &s.key);
        conn.execute_batch(&format!(
            "CREATE TEMP TRIGGER IF NOT EXISTS journal_{t}_i AFTER INSERT ON main.\"{t}\" BEGIN
               INSERT INTO journal_log(t, op, row) VALUES ('{t}', 'upsert', {new}); END;
             CREATE TEMP TRIGGER IF NOT EXISTS journal_{t}_u AFTER UPDATE ON main.\"{t}\" BEGIN
               INSERT INTO journal_log(t, op, row) VALUES ('{t}', 'upsert', {new}); END;
             CREATE TEMP TRIGGER IF NOT EXISTS journal_{t}_d AFTER DELETE ON main.\"{t}\" BEGIN
               INSERT INTO journal_log(t, op, row) VALUES ('{t}', 'delete', {old}); END;"
        ))?;
    }
    Ok(())
}

/// Hands the transaction's logged changes, if any, to the journal before `COMMIT`.
pub(crate) fn record(conn: &Connection, journal: &mut dyn Journal) -> rusqlite::Result<()> {
    let changes: Option<String> = conn
        .prepare_cached(
            "SELECT json_group_array(json_object('t', t, 'op', op, 'row', json(row)))
             FROM (SELECT t, op, row FROM journal_log ORDER BY n) HAVING count(*) > 0",
        )?
        .query_row([], |r| r.get(0))
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    let Some(changes) = changes else {
        return Ok(());
    };
    conn.prepare_cached("DELETE FROM journal_log")?
        .execute([])?;
    journal
        .record(conn, changes)
        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(Refusal(e))))
}

/// Applies a journaled transaction's `changes` to `conn` (a cache being rebuilt), in
/// order: the journal is the truth, so a row the cache holds otherwise is replaced.
pub fn replay(conn: &Connection, text: &str) -> rusqlite::Result<()> {
    let items: Vec<(String, String, String)> = conn
        .prepare_cached(
            "SELECT value ->> '$.t', value ->> '$.op', value -> '$.row' FROM json_each(?1) ORDER BY key",
        )?
        .query_map(params![text], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut shapes: std::collections::HashMap<String, Shape> = Default::default();
    for (t, op, row) in items {
        if !shapes.contains_key(&t) {
            shapes.insert(t.clone(), shape(conn, &t)?);
        }
        let Some(s) = shapes.get(&t) else { continue };
        let cols = if op == "delete" { &s.key } else { &s.columns };
        let values: Vec<String> = cols.iter().map(|c| format!("?1 ->> '$.{c}'")).collect();
        let sql = match op.as_str() {
            "upsert" => format!(
                "INSERT OR REPLACE INTO main.\"{t}\"({}) VALUES ({})",
                quoted(cols),
                values.join(", ")
            ),
            "delete" => {
                let cond: Vec<String> = cols
                    .iter()
                    .zip(&values)
                    .map(|(c, v)| format!("\"{c}\" = {v}"))
                    .collect();
                format!("DELETE FROM main.\"{t}\" WHERE {}", cond.join(" AND "))
            }
            other => {
                return Err(rusqlite::Error::InvalidParameterName(format!(
                    "journal record: unknown operation {other:?} on {t}"
                )))
            }
        };
        conn.prepare_cached(&sql)?.execute(params![row])?;
    }
    Ok(())
}

fn quoted(cols: &[String]) -> String {
    cols.iter()
        .map(|c| format!("\"{c}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Keep(std::sync::Arc<std::sync::Mutex<Vec<String>>>, bool);

    impl Journal for Keep {
        fn tables(&self) -> &'static [&'static str] {
            &["t", "pair"]
        }
        fn record(&mut self, _: &Connection, changes: String) -> Result<(), String> {
            if self.1 {
                return Err("refused: a newer owner".into());
            }
            self.0.lock().unwrap().push(changes);
            Ok(())
        }
    }

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE t(k TEXT PRIMARY KEY, v TEXT, n INTEGER) STRICT;
             CREATE TABLE pair(a TEXT NOT NULL, b INTEGER NOT NULL, x TEXT, PRIMARY KEY(a, b)) STRICT;
             CREATE TABLE side(x INTEGER) STRICT;",
        )
        .unwrap();
        c
    }

    fn run(c: &Connection, j: &mut Keep, sql: &[&str]) -> rusqlite::Result<()> {
        install(c, j.tables())?;
        c.execute_batch("BEGIN")?;
        for q in sql {
            c.execute_batch(q)?;
        }
        match record(c, j) {
            Ok(()) => c.execute_batch("COMMIT"),
            Err(e) => {
                c.execute_batch("ROLLBACK")?;
                Err(e)
            }
        }
    }

    fn rows(c: &Connection) -> Vec<String> {
        c.prepare(
            "SELECT json_array(k, v, n) FROM t UNION ALL SELECT json_array(a, b, x) FROM pair ORDER BY 1",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// What a transaction left changed is recorded (not what a savepoint undid, nor other
    /// tables), and replaying the records makes a copy with the same rows, typed alike.
    #[test]
    fn the_changes_a_transaction_left_replay_into_an_identical_copy() {
        let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut j = Keep(kept.clone(), false);
        let a = db();
        run(
            &a,
            &mut j,
            &[
                "INSERT INTO t VALUES ('a', '{\"x\": \"1\"}', 7)",
                "SAVEPOINT s; INSERT INTO t VALUES ('undone', 'x', 0); ROLLBACK TO s; RELEASE s;",
                "INSERT INTO side VALUES (1)",
                "INSERT INTO pair VALUES ('p', 1, NULL), ('p', 2, 'two')",
            ],
        )
        .unwrap();
        run(
            &a,
            &mut j,
            &[
                "UPDATE t SET v = 'it''s \"2\"' WHERE k = 'a'",
                "INSERT INTO t VALUES ('b', '3', NULL)",
            ],
        )
        .unwrap();
        run(
            &a,
            &mut j,
            &[
                "DELETE FROM t WHERE k = 'b'",
                "DELETE FROM pair WHERE b = 1",
            ],
        )
        .unwrap();
        run(&a, &mut j, &["INSERT INTO side VALUES (2)"]).unwrap();
        assert_eq!(
            kept.lock().unwrap().len(),
            3,
            "the side table is not journaled"
        );

        let b = db();
        // A stale row in the cache is replaced by the journal's.
        b.execute_batch("INSERT INTO t VALUES ('a', 'stale', 1)")
            .unwrap();
        for c in kept.lock().unwrap().iter() {
            replay(&b, c).unwrap();
        }
        assert_eq!(rows(&b), rows(&a));
        assert_eq!(
            rows(&a),
            ["[\"a\",\"it's \\\"2\\\"\",7]", "[\"p\",2,\"two\"]"]
        );
        let n: String = b
            .query_row("SELECT typeof(n) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, "integer");
    }

    /// A refusal undoes the transaction and says why.
    #[test]
    fn a_refused_transaction_leaves_nothing_and_says_why() {
        let mut j = Keep(Default::default(), true);
        let a = db();
        let e = run(&a, &mut j, &["INSERT INTO t VALUES ('a', '1', 1)"]).unwrap_err();
        assert_eq!(refusal(&e), Some("refused: a newer owner"));
        assert!(rows(&a).is_empty());
    }
}

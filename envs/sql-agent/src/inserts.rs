//! Consecutive `INSERT … VALUES` statements into one table, run as one statement.
//!
//! A dump inserts row by row (`INSERT INTO "albums" VALUES(1,'Album 1',27,'1993-02-08');`
//! thousands of times), and GlueSQL checks each statement's `UNIQUE` columns by scanning every
//! stored row of the table: building a 7,400-row, nine-table database spent ~30% of its time
//! in that scan, quadratic in the table's size, and every sandboxed env instance builds its
//! databases itself. One statement of many rows scans once.
//!
//! GlueSQL checks a multi-row statement's primary keys against the stored rows but not among
//! its own new rows (a repeated key would overwrite the row before it), so
//! [`crate::engine::build`] checks that each merged statement added as many rows as it holds
//! and otherwise builds the database again statement by statement, which fails on the repeated
//! key and names it.

use gluesql::core::sqlparser::ast::{Insert, Query, SetExpr, Statement, Values};

/// The most rows one merged statement holds (its syntax tree is built in memory at once; the
/// sandboxed guest has 256 MiB for everything).
pub(crate) const MAX_ROWS: usize = 1024;

/// Statements on their way to the engine: plain `INSERT … VALUES` statements into the same
/// table with the same columns are held and merged; any other statement is handed on at once,
/// after the merged one before it.
#[derive(Debug, Default)]
pub(crate) struct Merged {
    pending: Option<(Insert, Query, Vec<Vec<gluesql::core::sqlparser::ast::Expr>>)>,
}

impl Merged {
    /// Takes `statement`; returns the statements ready to run, in order: none while it was
    /// merged into the held one, else the held one (if any) and, unless it starts a new held
    /// one, `statement` itself. A merged statement comes with the count of rows it adds.
    pub(crate) fn push(&mut self, statement: Statement) -> Vec<(Statement, Option<usize>)> {
        let mut ready = Vec::new();
        match mergeable(statement) {
            Ok((insert, query, rows)) => {
                if let Some((held, held_query, held_rows)) = &mut self.pending
                    && *held == insert
                    && *held_query == query
                    && held_rows.len() + rows.len() <= MAX_ROWS
                {
                    held_rows.extend(rows);
                    return ready;
                }
                ready.extend(self.flush().map(|(s, n)| (s, Some(n))));
                self.pending = Some((insert, query, rows));
            }
            Err(statement) => {
                ready.extend(self.flush().map(|(s, n)| (s, Some(n))));
                ready.push((*statement, None));
            }
        }
        ready
    }

    /// The held statement, if any, with every row merged into it; and how many rows it adds.
    pub(crate) fn flush(&mut self) -> Option<(Statement, usize)> {
        let (mut insert, mut query, rows) = self.pending.take()?;
        let n = rows.len();
        query.body = Box::new(SetExpr::Values(Values {
            explicit_row: false,
            rows,
        }));
        insert.source = Some(Box::new(query));
        Some((Statement::Insert(insert), n))
    }
}

/// Whether `query` is a bare `VALUES (…), …` list: no `WITH`, `ORDER BY`, `LIMIT`, `OFFSET`
/// or `VALUES ROW(…)`.
pub(crate) fn bare_values(query: &Query) -> bool {
    query.with.is_none()
        && query.order_by.is_none()
        && query.limit.is_none()
        && query.offset.is_none()
        && matches!(&*query.body, SetExpr::Values(v) if !v.explicit_row)
}

/// A plain `INSERT INTO t [(columns)] VALUES …` split into the statement without its source,
/// its query without rows, and its rows; any other statement back as it is.
#[allow(clippy::type_complexity)]
fn mergeable(
    statement: Statement,
) -> Result<(Insert, Query, Vec<Vec<gluesql::core::sqlparser::ast::Expr>>), Box<Statement>> {
    let Statement::Insert(mut insert) = statement else {
        return Err(Box::new(statement));
    };
    let plain = insert.or.is_none()
        && !insert.ignore
        && insert.on.is_none()
        && insert.returning.is_none()
        && !insert.replace_into
        && insert.source.as_deref().is_some_and(bare_values);
    if !plain {
        return Err(Box::new(Statement::Insert(insert)));
    }
    let mut query = *insert.source.take().expect("checked above");
    let SetExpr::Values(values) = std::mem::replace(
        &mut *query.body,
        SetExpr::Values(Values {
            explicit_row: false,
            rows: Vec::new(),
        }),
    ) else {
        unreachable!("checked above")
    };
    Ok((insert, query, values.rows))
}

//! Database scripts as people have them: SQLite-style DDL and dumps, loaded into GlueSQL.
//!
//! GlueSQL accepts a small set of column types (`INTEGER`, `FLOAT`, `TEXT`, `DATE`, …) and only
//! `NOT NULL`, `DEFAULT`, `UNIQUE` and `PRIMARY KEY` as column options, so the DDL of a real
//! database (`REAL`, `DOUBLE`, `NUMERIC(10,2)`, `VARCHAR(120)`, `INTEGER PRIMARY KEY
//! AUTOINCREMENT`, `REFERENCES`, `CHECK`, a dump's `BEGIN TRANSACTION` and `CREATE INDEX`) is
//! refused as it stands. [`statements`] parses a script with SQLite's dialect (falling back to
//! GlueSQL's own PostgreSQL dialect) and rewrites it into what GlueSQL runs, with the same rows:
//!
//! - a column type GlueSQL refuses gets the type of its SQLite affinity (the rules of SQLite's
//!   "Datatypes" page, section 3.1): a name containing `INT` → `INTEGER`; `CHAR`, `CLOB` or
//!   `TEXT` → `TEXT`; `BLOB` → `BYTEA`; `REAL`, `FLOA` or `DOUB` → `FLOAT`; `DATETIME` →
//!   `TEXT` (SQLite keeps such values as text); anything else (`NUMERIC(10,2)`, `DECIMAL(p,s)`)
//!   → `FLOAT`; a column with no type → `TEXT`. Types GlueSQL has keep their meaning;
//! - constraints that only guard writes (`REFERENCES`/`FOREIGN KEY`, `CHECK`, `AUTOINCREMENT`,
//!   collations, `ON CONFLICT`) are dropped: the image is read-only for the agent, and a
//!   dump may create a table before the one it references. A single-column `PRIMARY KEY (c)`
//!   or `UNIQUE (c)` becomes the column's option; a composite one is dropped;
//! - statements with no effect on the rows are skipped: transaction control, `PRAGMA`,
//!   `CREATE INDEX`, `ANALYZE`, and SQLite's own `sqlite_*` tables;
//! - a literal 0 or 1 inserted into a `BOOLEAN` column becomes `FALSE`/`TRUE` (SQLite stores
//!   booleans as integers).
//!
//! Hand-written because no crate maps one SQL dialect's DDL onto GlueSQL's; the parsing itself
//! is sqlparser's (the parser GlueSQL uses).

use std::collections::BTreeMap;

use gluesql::core::sqlparser::ast::{
    ColumnDef, ColumnOption, ColumnOptionDef, DataType, ExactNumberInfo, Expr, Ident, Insert,
    ObjectName, SetExpr, Statement, TableConstraint, Value,
};
use gluesql::core::sqlparser::dialect::{Dialect, PostgreSqlDialect, SQLiteDialect};
use gluesql::core::sqlparser::parser::Parser;
use gluesql::core::sqlparser::tokenizer::{Token, Tokenizer};

/// Parses `sql` and rewrites it into statements GlueSQL accepts (see the module docs).
///
/// The script is split at its top-level semicolons ([`split`]) and each statement parsed on
/// its own, so a `PRAGMA` (which sqlparser cannot always parse) is skipped and an error names
/// the statement.
pub fn statements(sql: &str) -> Result<Vec<Statement>, String> {
    let mut out = Vec::new();
    for_each(sql, |s| {
        out.push(s);
        Ok(())
    })?;
    Ok(out)
}

/// [`statements`], handing each statement to `f` as soon as it is parsed: a script of
/// hundreds of thousands of rows is never held as tokens or syntax trees all at once (inside
/// the sandbox that peak once passed the guest's 256 MiB for three 100,000-row tables). An
/// error from `f` stops the walk and is returned. An `INSERT … VALUES` of plain literals is
/// read without tokenizing it (its head parsed once per table and column list, see
/// `literal_inserts`), into the statement the parser would give.
pub fn for_each(
    sql: &str,
    mut f: impl FnMut(Statement) -> Result<(), String>,
) -> Result<(), String> {
    let mut tables = Tables::new();
    let mut heads = crate::literal_inserts::Heads::default();
    for (i, text) in split(sql).enumerate() {
        if let Some(statement) = heads.read(text) {
            if let Some(statement) = normalise(statement, &mut tables) {
                f(statement)?;
            }
            continue;
        }
        let tokens = Tokenizer::new(&SQLiteDialect {}, text)
            .tokenize()
            .map_err(|e| format!("statement {} does not parse: {e}", i + 1))?;
        let first = tokens.iter().find(|t| !matches!(t, Token::Whitespace(_)));
        match first {
            None => continue,
            Some(Token::Word(w)) if w.value.eq_ignore_ascii_case("pragma") => continue,
            _ => {}
        }
        let parse = |dialect: &dyn Dialect| {
            Parser::new(dialect)
                .with_tokens(tokens.clone())
                .parse_statements()
        };
        let parsed = parse(&SQLiteDialect {})
            .or_else(|sqlite| parse(&PostgreSqlDialect {}).map_err(|_| sqlite))
            .map_err(|e| format!("statement {} does not parse: {e}", i + 1))?;
        for statement in parsed {
            if let Some(statement) = normalise(statement, &mut tables) {
                f(statement)?;
            }
        }
    }
    Ok(())
}

/// The statements of a script: its text split at each `;` outside string literals, quoted
/// identifiers (`"…"`, `` `…` ``, `[…]`) and comments (`-- …`, `/* … */`), as SQLite's own
/// shell splits a script. Pieces with nothing but whitespace and comments are left to the
/// caller (they tokenize to nothing).
///
/// Hand-written because sqlparser splits only a fully tokenized script, which for a large
/// dump is the memory peak this avoids.
pub fn split(sql: &str) -> impl Iterator<Item = &str> {
    let bytes = sql.as_bytes();
    let mut start = 0;
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() {
            match bytes[i] {
                b';' => {
                    let piece = &sql[start..i];
                    i += 1;
                    start = i;
                    return Some(piece);
                }
                quote @ (b'\'' | b'"' | b'`') => {
                    i += 1;
                    while i < bytes.len() {
                        if bytes[i] == quote {
                            // A doubled quote is an escaped one.
                            if bytes.get(i + 1) == Some(&quote) {
                                i += 2;
                                continue;
                            }
                            break;
                        }
                        i += 1;
                    }
                    i += 1;
                }
                b'[' => {
                    while i < bytes.len() && bytes[i] != b']' {
                        i += 1;
                    }
                    i += 1;
                }
                b'-' if bytes.get(i + 1) == Some(&b'-') => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => {
                    i += 2;
                    while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/'))
                    {
                        i += 1;
                    }
                    i += 2;
                }
                _ => i += 1,
            }
        }
        (start < sql.len()).then(|| {
            let piece = &sql[start..];
            start = sql.len();
            piece
        })
    })
}

/// Each table's columns as created (lowercased names, types after [`affinity`]).
type Tables = BTreeMap<String, Vec<(String, DataType)>>;

/// One statement as GlueSQL runs it, or `None` when it changes no rows.
fn normalise(statement: Statement, tables: &mut Tables) -> Option<Statement> {
    match statement {
        Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. }
        | Statement::Pragma { .. }
        | Statement::CreateIndex(_)
        | Statement::Analyze { .. } => None,
        Statement::CreateTable(mut table) => {
            if internal(&table.name) {
                return None;
            }
            for constraint in std::mem::take(&mut table.constraints) {
                let (columns, primary) = match &constraint {
                    TableConstraint::PrimaryKey { columns, .. } => (columns, true),
                    TableConstraint::Unique { columns, .. } => (columns, false),
                    _ => continue,
                };
                if let [column] = columns.as_slice() {
                    mark_unique(&mut table.columns, column, primary);
                }
            }
            for column in &mut table.columns {
                column.data_type = affinity(&column.data_type);
                column.collation = None;
                column.options.retain(|o| {
                    matches!(
                        o.option,
                        ColumnOption::Null
                            | ColumnOption::NotNull
                            | ColumnOption::Default(_)
                            | ColumnOption::Unique { .. }
                            | ColumnOption::Comment(_)
                    )
                });
            }
            tables.insert(
                key(&table.name),
                table
                    .columns
                    .iter()
                    .map(|c| (c.name.value.to_lowercase(), c.data_type.clone()))
                    .collect(),
            );
            Some(Statement::CreateTable(table))
        }
        Statement::Insert(insert) if internal(&insert.table_name) => None,
        Statement::Insert(mut insert) => {
            booleans_from_numbers(&mut insert, tables);
            Some(Statement::Insert(insert))
        }
        Statement::Delete(ref delete) if delete.from.to_string().contains("sqlite_") => None,
        Statement::Drop { ref names, .. } if names.iter().all(internal) => None,
        other => Some(other),
    }
}

/// A table's name as the key of [`Tables`].
fn key(name: &ObjectName) -> String {
    name.0
        .last()
        .map(|n| n.value.to_lowercase())
        .unwrap_or_default()
}

/// SQLite keeps booleans as the integers 0 and 1 (a dump writes them so); GlueSQL's `BOOLEAN`
/// takes only `TRUE`/`FALSE`, so a literal 0 or 1 inserted into a boolean column becomes one.
fn booleans_from_numbers(insert: &mut Insert, tables: &Tables) {
    let Some(columns) = tables.get(&key(&insert.table_name)) else {
        return;
    };
    let order: Vec<&DataType> = if insert.columns.is_empty() {
        columns.iter().map(|(_, t)| t).collect()
    } else {
        let named = |n: &Ident| columns.iter().find(|(c, _)| *c == n.value.to_lowercase());
        match insert.columns.iter().map(named).collect::<Option<Vec<_>>>() {
            Some(found) => found.into_iter().map(|(_, t)| t).collect(),
            None => return,
        }
    };
    if !order.iter().any(|t| matches!(t, DataType::Boolean)) {
        return;
    }
    let Some(SetExpr::Values(values)) = insert.source.as_mut().map(|q| q.body.as_mut()) else {
        return;
    };
    for row in &mut values.rows {
        for (value, data_type) in row.iter_mut().zip(&order) {
            if !matches!(data_type, DataType::Boolean) {
                continue;
            }
            if let Expr::Value(v @ Value::Number(..)) = value {
                match v.to_string().as_str() {
                    "0" => *v = Value::Boolean(false),
                    "1" => *v = Value::Boolean(true),
                    _ => {}
                }
            }
        }
    }
}

/// Whether a table is one of SQLite's own (`sqlite_sequence`, `sqlite_stat1`, …).
fn internal(name: &ObjectName) -> bool {
    name.0
        .last()
        .is_some_and(|n| n.value.to_ascii_lowercase().starts_with("sqlite_"))
}

/// Gives `column` the `PRIMARY KEY` or `UNIQUE` option of a table constraint, unless it has one.
fn mark_unique(columns: &mut [ColumnDef], column: &Ident, primary: bool) {
    let Some(def) = columns.iter_mut().find(|c| c.name.value == column.value) else {
        return;
    };
    if def
        .options
        .iter()
        .any(|o| matches!(o.option, ColumnOption::Unique { .. }))
    {
        return;
    }
    def.options.push(ColumnOptionDef {
        name: None,
        option: ColumnOption::Unique {
            is_primary: primary,
            characteristics: None,
        },
    });
}

/// The column type GlueSQL gets for `data_type`: its own when it has one, else the type of the
/// SQLite affinity (see the module docs).
fn affinity(data_type: &DataType) -> DataType {
    if gluesql::core::translate::translate_data_type(data_type).is_ok() {
        return data_type.clone();
    }
    let name = data_type.to_string().to_ascii_uppercase();
    let has = |part: &str| name.contains(part);
    if matches!(data_type, DataType::Unspecified) || name.is_empty() {
        DataType::Text
    } else if has("INT") {
        DataType::Int(None)
    } else if has("CHAR") || has("CLOB") || has("TEXT") || has("STRING") || has("DATETIME") {
        DataType::Text
    } else if has("BLOB") || has("BINARY") {
        DataType::Bytea
    } else if matches!(
        data_type,
        DataType::Decimal(ExactNumberInfo::PrecisionAndScale(_, 0))
    ) || matches!(
        data_type,
        DataType::Numeric(ExactNumberInfo::PrecisionAndScale(_, 0))
    ) {
        DataType::Int(None)
    } else {
        DataType::Float(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(sql: &str) -> Vec<String> {
        match statements(sql).unwrap().remove(0) {
            Statement::CreateTable(t) => t.columns.iter().map(|c| c.to_string()).collect(),
            other => panic!("not a table: {other}"),
        }
    }

    #[test]
    fn scripts_split_at_semicolons_outside_quotes_and_comments() {
        let script = "CREATE TABLE \"a;b\" (x TEXT); INSERT INTO \"a;b\" VALUES ('it''s; here');\n\
            -- a comment; still one\n/* and; this */ SELECT [odd;name] FROM `t;u`;  \n";
        let pieces: Vec<&str> = split(script).collect();
        assert_eq!(pieces.len(), 4, "{pieces:?}");
        assert_eq!(pieces[0], "CREATE TABLE \"a;b\" (x TEXT)");
        assert!(pieces[1].ends_with("('it''s; here')"));
        assert!(pieces[2].trim_end().ends_with("FROM `t;u`"));
        assert!(pieces[3].trim().is_empty());
        let unterminated: Vec<&str> = split("SELECT 'no end; here").collect();
        assert_eq!(unterminated, ["SELECT 'no end; here"]);
    }

    #[test]
    fn sqlite_types_get_their_affinity() {
        let got = types(
            "CREATE TABLE t (a INTEGER PRIMARY KEY AUTOINCREMENT, b REAL, c DOUBLE PRECISION, \
             d NUMERIC(10,2), e VARCHAR(120) NOT NULL, f NVARCHAR(20) COLLATE NOCASE, g BIGINT, \
             h DATETIME, i BLOB, j, k DECIMAL(8,0), l BOOLEAN, m DATE, n TEXT CHECK (n <> ''), \
             o INTEGER REFERENCES other(id))",
        );
        assert_eq!(
            got,
            [
                "a INTEGER PRIMARY KEY",
                "b FLOAT",
                "c FLOAT",
                "d FLOAT",
                "e TEXT NOT NULL",
                "f TEXT",
                "g INT",
                "h TEXT",
                "i BYTEA",
                "j TEXT",
                "k INT",
                "l BOOLEAN",
                "m DATE",
                "n TEXT",
                "o INTEGER",
            ]
        );
    }

    #[test]
    fn table_constraints_fold_into_columns_or_go() {
        let got = types(
            "CREATE TABLE t (a INT, b INT, c INT, PRIMARY KEY (a), UNIQUE (b), \
             UNIQUE (b, c), FOREIGN KEY (c) REFERENCES u (id), CHECK (a > 0))",
        );
        assert_eq!(got, ["a INT PRIMARY KEY", "b INT UNIQUE", "c INT"]);
    }

    #[test]
    fn a_dump_keeps_only_what_changes_rows() {
        let kept = statements(
            "PRAGMA foreign_keys=OFF; BEGIN TRANSACTION; CREATE TABLE t (a INT); \
             INSERT INTO \"t\" VALUES(1); CREATE TABLE b (x BOOLEAN, y INT); \
             INSERT INTO b VALUES (1, 1), (0, 0); INSERT INTO b (y, x) VALUES (1, 0); CREATE INDEX i ON t (a); \
             DELETE FROM \"sqlite_sequence\"; INSERT INTO \"sqlite_sequence\" VALUES('t', 1); \
             COMMIT;",
        )
        .unwrap();
        let text: Vec<String> = kept.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            text,
            [
                "CREATE TABLE t (a INT)",
                "INSERT INTO \"t\" VALUES (1)",
                "CREATE TABLE b (x BOOLEAN, y INT)",
                "INSERT INTO b VALUES (true, 1), (false, 0)",
                "INSERT INTO b (y, x) VALUES (1, false)",
            ]
        );
        assert!(statements("CREATE TABLE (").is_err());
    }
}

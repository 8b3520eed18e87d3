//! `INSERT … VALUES` statements of plain literals read without the SQL parser.
//!
//! A dump is thousands of `INSERT INTO "albums" VALUES(1,'Album 1',27,'1993-02-08');` that
//! differ only in their literals. Tokenizing and parsing each one with sqlparser was ~40% of
//! building a 7,400-row database (and every sandboxed env instance builds its databases
//! itself): the parser tries a typed literal (`DATE '…'`) before every value and formats the
//! error of the failed try. Here a statement's head (`INSERT INTO "albums" VALUES`) is parsed
//! once by sqlparser and remembered; its rows are read by a scanner that knows only unsigned
//! or negated decimal numbers (with an exponent or not), `'…'` strings (`''` for a quote),
//! `NULL`, `TRUE` and `FALSE`, separated by spaces, tabs and line breaks, and builds the same
//! syntax tree the parser would. Anything else (an expression, a comment, a blob, a backslash
//! in a string, text after the last row) makes the scanner give up, and the statement goes
//! through the parser as before, which also gives every error its message.
//!
//! Hand-written because sqlparser has no entry point for a list of literals alone; the
//! equality with the parser's own tree is tested on whole dumps and on generated rows.

use std::collections::HashMap;

use gluesql::core::sqlparser::ast::{Expr, SetExpr, Statement, UnaryOperator, Value};
use gluesql::core::sqlparser::dialect::SQLiteDialect;
use gluesql::core::sqlparser::parser::Parser;

/// Distinct heads remembered before the cache is emptied (a dump has one per table and
/// column list; the bound only keeps a hostile script from growing it without end).
const MAX_HEADS: usize = 256;

/// Parsed statement heads, by their text.
#[derive(Default)]
pub(crate) struct Heads {
    parsed: HashMap<String, Statement>,
}

impl Heads {
    /// `text` as the parser would read it, when it is an `INSERT … VALUES` of literal rows;
    /// `None` for anything the scanner does not know (the caller then parses it).
    pub(crate) fn read(&mut self, text: &str) -> Option<Statement> {
        let trimmed = text.trim_start();
        if !trimmed
            .get(..6)
            .is_some_and(|w| w.eq_ignore_ascii_case("insert"))
        {
            return None;
        }
        let head_end = values_keyword_end(trimmed)?;
        let (head, rest) = trimmed.split_at(head_end);
        let rows = literal_rows(rest)?;
        if !self.parsed.contains_key(head) {
            let mut template = parse_single(&format!("{head} (NULL)"))?;
            single_null_row(&mut template)?;
            if self.parsed.len() >= MAX_HEADS {
                self.parsed.clear();
            }
            self.parsed.insert(head.to_owned(), template);
        }
        let mut statement = self.parsed[head].clone();
        *single_null_row(&mut statement)? = rows;
        Some(statement)
    }
}

/// The rows of a parsed `… VALUES (NULL)` statement, when that is what it is.
fn single_null_row(statement: &mut Statement) -> Option<&mut Vec<Vec<Expr>>> {
    let Statement::Insert(insert) = statement else {
        return None;
    };
    let query = insert
        .source
        .as_deref_mut()
        .filter(|q| crate::inserts::bare_values(q))?;
    let SetExpr::Values(values) = query.body.as_mut() else {
        return None;
    };
    let one_null = matches!(values.rows.as_slice(), [row] if matches!(row.as_slice(), [Expr::Value(Value::Null)]));
    one_null.then_some(&mut values.rows)
}

/// `text` parsed with SQLite's dialect, when it is exactly one statement.
pub(crate) fn parse_single(text: &str) -> Option<Statement> {
    let mut parsed = Parser::new(&SQLiteDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_statements())
        .ok()?;
    (parsed.len() == 1).then(|| parsed.remove(0))
}

/// Where the `VALUES` keyword of a head `INSERT [OR …] INTO name [(columns)] VALUES` ends:
/// the head may hold only words, quoted names, dots, whitespace and one parenthesised
/// column list (no string, comment or expression), so it is what the parser reads it as.
fn values_keyword_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut in_columns = false;
    while i < bytes.len() {
        match bytes[i] {
            open @ (b'"' | b'`' | b'[') => {
                let close = if open == b'[' { b']' } else { open };
                i += 1 + bytes[i + 1..].iter().position(|&b| b == close)? + 1;
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if !in_columns && text[start..i].eq_ignore_ascii_case("values") {
                    return Some(i);
                }
            }
            b'(' if !in_columns => {
                in_columns = true;
                i += 1;
            }
            b')' if in_columns => {
                in_columns = false;
                i += 1;
            }
            b',' if in_columns => i += 1,
            b'.' => i += 1,
            b if space(b) => i += 1,
            _ => return None,
        }
    }
    None
}

/// The whitespace the scanner reads between tokens (a form feed or any other is left to the
/// parser).
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// `(lit, …), (lit, …)` and nothing else but whitespace, as the parser's rows.
fn literal_rows(text: &str) -> Option<Vec<Vec<Expr>>> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        text,
        at: 0,
    };
    let mut rows = Vec::new();
    loop {
        scan.expect(b'(')?;
        let mut row = Vec::new();
        loop {
            row.push(scan.literal()?);
            match scan.next_punct()? {
                b',' => continue,
                b')' => break,
                _ => return None,
            }
        }
        rows.push(row);
        scan.skip_space();
        match scan.bytes.get(scan.at) {
            None => return Some(rows),
            Some(b',') => scan.at += 1,
            Some(_) => return None,
        }
    }
}

/// A cursor over the rows' text.
struct Scan<'a> {
    bytes: &'a [u8],
    text: &'a str,
    at: usize,
}

impl Scan<'_> {
    fn skip_space(&mut self) {
        while self.bytes.get(self.at).is_some_and(|&b| space(b)) {
            self.at += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        self.skip_space();
        (self.bytes.get(self.at) == Some(&b)).then(|| self.at += 1)
    }

    fn next_punct(&mut self) -> Option<u8> {
        self.skip_space();
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// One literal, as the parser's expression for it.
    fn literal(&mut self) -> Option<Expr> {
        self.skip_space();
        match *self.bytes.get(self.at)? {
            b'\'' => self
                .string()
                .map(|s| Expr::Value(Value::SingleQuotedString(s))),
            b'-' => {
                self.at += 1;
                if !self.bytes.get(self.at)?.is_ascii_digit() {
                    return None;
                }
                Some(Expr::UnaryOp {
                    op: UnaryOperator::Minus,
                    expr: Box::new(Expr::Value(self.number()?)),
                })
            }
            b if b.is_ascii_digit() => self.number().map(Expr::Value),
            b if b.is_ascii_alphabetic() => {
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(u8::is_ascii_alphabetic) {
                    self.at += 1;
                }
                if self
                    .bytes
                    .get(self.at)
                    .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'\'')
                {
                    return None;
                }
                let word = &self.text[start..self.at];
                [
                    ("null", Value::Null),
                    ("true", Value::Boolean(true)),
                    ("false", Value::Boolean(false)),
                ]
                .into_iter()
                .find(|(w, _)| word.eq_ignore_ascii_case(w))
                .map(|(_, v)| Expr::Value(v))
            }
            _ => None,
        }
    }

    /// Digits with at most one `.` between digits and an optional exponent (`e-01`, as
    /// SQLite dumps a float); anything else glued to it (a letter, a second dot) is not read
    /// here.
    fn number(&mut self) -> Option<Value> {
        let start = self.at;
        let digits = |s: &mut Self| {
            let from = s.at;
            while s.bytes.get(s.at).is_some_and(u8::is_ascii_digit) {
                s.at += 1;
            }
            s.at > from
        };
        digits(self);
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            if !digits(self) {
                return None;
            }
        }
        if matches!(self.bytes.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.bytes.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        if self
            .bytes
            .get(self.at)
            .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'\'')
        {
            return None;
        }
        Some(Value::Number(
            self.text[start..self.at].parse().ok()?,
            false,
        ))
    }

    /// A `'…'` string with `''` for a quote; one holding a backslash is left to the parser.
    fn string(&mut self) -> Option<String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let rel = self.bytes[self.at..]
                .iter()
                .position(|&b| b == b'\'' || b == b'\\')?;
            if self.bytes[self.at + rel] == b'\\' {
                return None;
            }
            out.push_str(&self.text[self.at..self.at + rel]);
            self.at += rel + 1;
            if self.bytes.get(self.at) == Some(&b'\'') {
                out.push('\'');
                self.at += 1;
            } else {
                return Some(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use super::parse_single as parsed;

    /// Every statement of `script` the scanner reads equals the parser's; returns how many
    /// it read.
    fn read_as_parsed(script: &str) -> usize {
        let mut heads = Heads::default();
        let mut read = 0;
        for text in crate::ddl::split(script) {
            if let Some(fast) = heads.read(text) {
                let slow = parsed(text).expect("what the scanner reads parses");
                assert_eq!(fast, slow, "{text}");
                read += 1;
            }
        }
        read
    }

    fn inserts(script: &str) -> usize {
        crate::ddl::split(script)
            .filter(|t| t.trim_start().to_ascii_lowercase().starts_with("insert"))
            .count()
    }

    #[test]
    fn whole_dumps_read_without_the_parser_give_the_parsers_statements() {
        let music = include_str!("../tests/data/music.sql");
        let films = include_str!("../tests/data/films.sql");
        let curriculum: Vec<String> = (0..6).map(|i| crate::curriculum_db(7, i).script).collect();
        let bundled: Vec<String> = crate::data::bundled().iter().map(|d| d.sql()).collect();
        let synthetic = crate::synthetic_db(500).script;
        for script in [music, films, &synthetic]
            .into_iter()
            .chain(curriculum.iter().map(String::as_str))
            .chain(bundled.iter().map(String::as_str))
        {
            // Every insert of these scripts is literal rows: all of them take the fast path.
            assert_eq!(read_as_parsed(script), inserts(script));
        }
        assert!(inserts(music) > 7000);
    }

    #[test]
    fn anything_but_literal_rows_is_left_to_the_parser() {
        let mut heads = Heads::default();
        for text in [
            "INSERT INTO t VALUES (1 + 2)",
            "INSERT INTO t VALUES (X'00')",
            "INSERT INTO t VALUES (1e)",
            "INSERT INTO t VALUES (1e5x)",
            "INSERT INTO t VALUES (1.)",
            "INSERT INTO t VALUES ('a\\'b')",
            "INSERT INTO t VALUES (1) ON CONFLICT DO NOTHING",
            "INSERT INTO t VALUES (1) -- note",
            "-- note\nINSERT INTO t VALUES (1)",
            "INSERT INTO t SELECT 1",
            "INSERT INTO t VALUES (- 1)",
            "INSERT INTO t VALUES (NULLS)",
            "INSERT INTO t VALUES (1,\x0c2)",
            "INSERT INTO t VALUES (abs(1))",
            "INSERT INTO t VALUES (DATE '2020-01-01')",
            "INSERT INTO t VALUES ((1))",
            "INSERT INTO t VALUES (1), ",
            "INSERT INTO t VALUES ('open",
            "INSERT INTO t (a, 'b') VALUES (1, 2)",
            "UPDATE t SET a = 1",
        ] {
            assert_eq!(heads.read(text), None, "{text}");
        }
    }

    #[test]
    fn a_head_that_does_not_parse_reads_nothing() {
        let mut heads = Heads::default();
        assert_eq!(heads.read("INSERT INTO VALUES (1)"), None);
        assert!(heads.parsed.is_empty());
    }

    fn literal() -> impl Strategy<Value = String> {
        prop_oneof![
            "-?[0-9]{1,12}",
            "-?[0-9]{1,6}\\.[0-9]{1,6}",
            "-?[0-9]{1,3}(\\.[0-9]{1,20})?[eE][+-]?[0-9]{1,3}",
            "[a-zA-Z0-9 'é€\n,()-]{0,12}".prop_map(|s| format!("'{}'", s.replace('\'', "''"))),
            prop::sample::select(vec![
                "NULL", "null", "Null", "TRUE", "true", "FALSE", "False"
            ])
            .prop_map(str::to_owned),
        ]
    }

    proptest! {
        #[test]
        fn generated_literal_rows_read_as_the_parser_reads_them(
            rows in prop::collection::vec(prop::collection::vec(literal(), 1..5), 1..4),
            columns in prop::option::of(prop::collection::vec("[a-z_][a-z0-9_]{0,5}", 1..5)),
            space in "[ \n\t]{0,2}",
        ) {
            let rows: Vec<String> = rows.iter().map(|r| format!("({})", r.join(&format!(",{space}")))).collect();
            let columns = columns.map(|c| format!(" (\"{}\")", c.join("\", \""))).unwrap_or_default();
            let text = format!("{space}INSERT INTO \"t\"{columns} VALUES{space}{}{space}", rows.join(&format!("{space},")));
            let mut heads = Heads::default();
            let fast = heads.read(&text);
            prop_assert!(fast.is_some(), "{}", text);
            prop_assert_eq!(fast, parsed(&text), "{}", text);
        }
    }
}

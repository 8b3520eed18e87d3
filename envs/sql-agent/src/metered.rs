//! A work budget for one query: the storage the engine reads through counts the rows it hands
//! out and refuses to hand out more than the budget.
//!
//! GlueSQL has no statement timeout, and inside the sandbox a query that runs past the guest's
//! per-call time limit ends the whole episode with a trap. Counting rows read is the engine's
//! own measure of work (a nested-loop join reads the inner table once per outer row, a hash
//! join reads each side once, a correlated subquery reads its table once per outer row), it is
//! checked *before* a table is read, and it is deterministic: the same query on the same
//! database stops at the same row natively and in WASM. A refused query becomes an
//! observation the agent can read ([`crate::engine::RunError::TooExpensive`]), not a trap.
//!
//! Hand-written because GlueSQL's `Store` traits are the only hook into its executor; every
//! method but the reads delegates to the wrapped [`MemoryStorage`].

use std::cell::Cell;

use gluesql::core::ast::{ColumnDef, IndexOperator, OrderByExpr};
use gluesql::core::data::{CustomFunction as StructCustomFunction, Key, Schema, Value};
use gluesql::core::error::{Error, Result};
use gluesql::core::store::{
    AlterTable, CustomFunction, CustomFunctionMut, Index, IndexMut, MetaIter, Metadata, Planner,
    RowIter, Store, StoreMut, Transaction,
};
use gluesql::prelude::MemoryStorage;

/// The text that marks a storage error as the budget's refusal (GlueSQL passes storage errors
/// through as `Error::StorageMsg`).
pub(crate) const REFUSED: &str = "sandgym: row budget exhausted";

/// The text of the error a write gets through a read-only [`Metered`].
pub(crate) const READ_ONLY: &str = "sandgym: read-only access";

/// How a [`Metered`] store reaches its database.
#[derive(Debug)]
pub(crate) enum Access<'a> {
    /// Reads only: every write is refused with [`READ_ONLY`] (the shared, pristine image).
    Read(&'a MemoryStorage),
    /// Reads and writes (an episode's own copy).
    Write(&'a mut MemoryStorage),
}

/// A [`MemoryStorage`] seen through a budget of rows read.
#[derive(Debug)]
pub(crate) struct Metered<'a> {
    db: Access<'a>,
    budget: u64,
    read: Cell<u64>,
}

impl<'a> Metered<'a> {
    /// `db` with at most `budget` rows read.
    pub(crate) fn new(db: Access<'a>, budget: u64) -> Self {
        Self {
            db,
            budget,
            read: Cell::new(0),
        }
    }

    fn db(&self) -> &MemoryStorage {
        match &self.db {
            Access::Read(db) => db,
            Access::Write(db) => db,
        }
    }

    fn db_mut(&mut self) -> Result<&mut MemoryStorage> {
        match &mut self.db {
            Access::Read(_) => Err(Error::StorageMsg(READ_ONLY.to_owned())),
            Access::Write(db) => Ok(db),
        }
    }

    /// Charges `rows` worth of work done outside the store (e.g. comparisons); an error once
    /// the total passes the budget.
    pub(crate) fn charge_work(&self, rows: u64) -> Result<()> {
        self.charge(usize::try_from(rows).unwrap_or(usize::MAX))
    }

    /// The rows of `table` when it names a stored table, else 0.
    pub(crate) fn rows_of(&self, table: &gluesql::core::ast::TableFactor) -> u64 {
        match table {
            gluesql::core::ast::TableFactor::Table { name, .. } => self
                .db()
                .items
                .get(name)
                .map_or(0, |item| item.rows.len() as u64),
            _ => 0,
        }
    }

    /// Counts `rows` about to be read; an error once the total passes the budget.
    fn charge(&self, rows: usize) -> Result<()> {
        let total = self.read.get().saturating_add(rows as u64);
        self.read.set(total);
        if total > self.budget {
            return Err(Error::StorageMsg(REFUSED.to_owned()));
        }
        Ok(())
    }
}

impl Store for Metered<'_> {
    fn fetch_schema(&self, table_name: &str) -> Result<Option<Schema>> {
        self.db().fetch_schema(table_name)
    }

    fn fetch_all_schemas(&self) -> Result<Vec<Schema>> {
        self.db().fetch_all_schemas()
    }

    fn fetch_data(&self, table_name: &str, key: &Key) -> Result<Option<Vec<Value>>> {
        self.charge(1)?;
        self.db().fetch_data(table_name, key)
    }

    /// Charges the whole table before the first row, then hands rows out one at a time
    /// (`MemoryStorage` itself copies the whole table into a vector first).
    fn scan_data<'b>(&'b self, table_name: &str) -> Result<RowIter<'b>> {
        let Some(item) = self.db().items.get(table_name) else {
            return Store::scan_data(self.db(), table_name);
        };
        self.charge(item.rows.len())?;
        Ok(Box::new(
            item.rows.iter().map(|(k, v)| Ok((k.clone(), v.clone()))),
        ))
    }
}

impl StoreMut for Metered<'_> {
    fn insert_schema(&mut self, schema: &Schema) -> Result<()> {
        self.db_mut()?.insert_schema(schema)
    }

    fn delete_schema(&mut self, table_name: &str) -> Result<()> {
        self.db_mut()?.delete_schema(table_name)
    }

    fn append_data(&mut self, table_name: &str, rows: Vec<Vec<Value>>) -> Result<()> {
        self.db_mut()?.append_data(table_name, rows)
    }

    fn insert_data(&mut self, table_name: &str, rows: Vec<(Key, Vec<Value>)>) -> Result<()> {
        self.db_mut()?.insert_data(table_name, rows)
    }

    fn delete_data(&mut self, table_name: &str, keys: Vec<Key>) -> Result<()> {
        self.db_mut()?.delete_data(table_name, keys)
    }
}

impl Index for Metered<'_> {
    fn scan_indexed_data<'b>(
        &'b self,
        table_name: &str,
        index_name: &str,
        asc: Option<bool>,
        cmp_value: Option<(&IndexOperator, Value)>,
    ) -> Result<RowIter<'b>> {
        self.db()
            .scan_indexed_data(table_name, index_name, asc, cmp_value)
    }
}

impl IndexMut for Metered<'_> {
    fn create_index(
        &mut self,
        table_name: &str,
        index_name: &str,
        column: &OrderByExpr,
    ) -> Result<()> {
        self.db_mut()?.create_index(table_name, index_name, column)
    }

    fn drop_index(&mut self, table_name: &str, index_name: &str) -> Result<()> {
        self.db_mut()?.drop_index(table_name, index_name)
    }
}

impl AlterTable for Metered<'_> {
    fn rename_schema(&mut self, table_name: &str, new_table_name: &str) -> Result<()> {
        self.db_mut()?.rename_schema(table_name, new_table_name)
    }

    fn rename_column(
        &mut self,
        table_name: &str,
        old_column_name: &str,
        new_column_name: &str,
    ) -> Result<()> {
        self.db_mut()?
            .rename_column(table_name, old_column_name, new_column_name)
    }

    fn add_column(&mut self, table_name: &str, column_def: &ColumnDef) -> Result<()> {
        self.db_mut()?.add_column(table_name, column_def)
    }

    fn drop_column(&mut self, table_name: &str, column_name: &str, if_exists: bool) -> Result<()> {
        self.db_mut()?
            .drop_column(table_name, column_name, if_exists)
    }
}

/// `MemoryStorage` has no transactions: a statement's implicit one (`begin(true)`) is a no-op,
/// so a read-only store answers it as `MemoryStorage` does without needing write access.
impl Transaction for Metered<'_> {
    fn begin(&mut self, autocommit: bool) -> Result<bool> {
        match &mut self.db {
            Access::Read(_) if autocommit => Ok(false),
            Access::Read(_) => Err(Error::StorageMsg(READ_ONLY.to_owned())),
            Access::Write(db) => db.begin(autocommit),
        }
    }

    fn rollback(&mut self) -> Result<()> {
        match &mut self.db {
            Access::Read(_) => Ok(()),
            Access::Write(db) => db.rollback(),
        }
    }

    fn commit(&mut self) -> Result<()> {
        match &mut self.db {
            Access::Read(_) => Ok(()),
            Access::Write(db) => db.commit(),
        }
    }
}

impl Metadata for Metered<'_> {
    fn scan_table_meta(&self) -> Result<MetaIter> {
        self.db().scan_table_meta()
    }
}

impl CustomFunction for Metered<'_> {
    fn fetch_function<'b>(&'b self, func_name: &str) -> Result<Option<&'b StructCustomFunction>> {
        self.db().fetch_function(func_name)
    }

    fn fetch_all_functions(&self) -> Result<Vec<&StructCustomFunction>> {
        self.db().fetch_all_functions()
    }
}

impl CustomFunctionMut for Metered<'_> {
    fn insert_function(&mut self, func: StructCustomFunction) -> Result<()> {
        self.db_mut()?.insert_function(func)
    }

    fn delete_function(&mut self, func_name: &str) -> Result<()> {
        self.db_mut()?.delete_function(func_name)
    }
}

impl Planner for Metered<'_> {}

//! A database of any size, with questions that join, group and nest over it: what `bench
//! envs` measures the engine on, natively and in WASM, at 1k, 10k and 100k rows.
//!
//! ```
//! let db = sandgym_env_sql::synthetic_db(1_000);
//! assert!(db.script.starts_with("CREATE TABLE customers"));
//! assert_eq!(db.tasks_jsonl.lines().count(), 1);
//! ```

use std::fmt::Write;

/// A generated database and its tasks, as an env configuration takes them.
#[derive(Clone, Debug)]
pub struct SyntheticDb {
    /// The script that builds it (`CREATE TABLE`, multi-row `INSERT`s).
    pub script: String,
    /// One task over database `synthetic` (the queries of [`SYNTHETIC_QUERIES`] are run as
    /// `run_sql` steps of its episodes).
    pub tasks_jsonl: String,
}

/// The bench's queries over [`synthetic_db`]: `(name, question, SQL)`.
pub const SYNTHETIC_QUERIES: [(&str, &str, &str); 5] = [
    (
        "one_join",
        "How many orders did customers in Lyon place?",
        "SELECT COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.id WHERE c.city = 'Lyon'",
    ),
    (
        "two_joins",
        "How many items did customers in Lyon order?",
        "SELECT SUM(i.quantity) FROM order_items i JOIN orders o ON i.order_id = o.id JOIN customers c ON o.customer_id = c.id WHERE c.city = 'Lyon'",
    ),
    (
        "group_by_join",
        "What is the total amount of orders per city?",
        "SELECT c.city, SUM(o.amount) FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY c.city",
    ),
    (
        "nested_scalar",
        "How many orders are above the average amount?",
        "SELECT COUNT(*) FROM orders WHERE amount > (SELECT AVG(amount) FROM orders)",
    ),
    (
        "nested_in",
        "How many orders come from customers in Lyon?",
        "SELECT COUNT(*) FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE city = 'Lyon')",
    ),
];

/// A correlated subquery over [`synthetic_db`]: it reads `orders` once per customer, 100,000
/// rows per customer at 100k rows, and past 1k rows the default row budget refuses it.
pub const SYNTHETIC_CORRELATED: &str = "SELECT COUNT(*) FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.amount > 990)";

const CITIES: [&str; 10] = [
    "Lyon", "Paris", "Nantes", "Lille", "Nice", "Rennes", "Dijon", "Brest", "Metz", "Tours",
];
const CATEGORIES: [&str; 5] = ["books", "garden", "kitchen", "toys", "tools"];

/// `rows` orders and `rows` order items (each naming an order), `rows / 10` customers (at
/// least 10), deterministic values: sizes of real user databases, for timing.
pub fn synthetic_db(rows: usize) -> SyntheticDb {
    let rows = rows.max(10);
    let customers = (rows / 10).max(10);
    let mut script = String::from(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT, joined DATE);\n\
         CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, amount FLOAT, placed DATE);\n\
         CREATE TABLE order_items (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, category TEXT, quantity INTEGER);\n",
    );
    let mut insert = |table: &str, n: usize, row: &dyn Fn(usize) -> String| {
        for start in (0..n).step_by(500) {
            let values: Vec<String> = (start..(start + 500).min(n)).map(row).collect();
            let _ = writeln!(script, "INSERT INTO {table} VALUES {};", values.join(", "));
        }
    };
    insert("customers", customers, &|i| {
        format!(
            "({i}, 'customer {i}', '{}', '2024-{:02}-{:02}')",
            CITIES[i % CITIES.len()],
            i % 12 + 1,
            i % 28 + 1
        )
    });
    insert("orders", rows, &|i| {
        format!(
            "({i}, {}, {}.{:02}, '2025-{:02}-{:02}')",
            (i * 7919) % customers,
            (i * 37) % 1000,
            i % 100,
            i % 12 + 1,
            i % 28 + 1
        )
    });
    insert("order_items", rows, &|i| {
        format!(
            "({i}, {}, '{}', {})",
            (i * 104_729) % rows,
            CATEGORIES[i % CATEGORIES.len()],
            i % 9 + 1
        )
    });
    let tasks_jsonl = serde_json::json!({
        "id": "synthetic-count",
        "database": "synthetic",
        "question": "How many orders are there?",
        "gold_sql": "SELECT COUNT(*) FROM orders",
        "split": "train",
    })
    .to_string();
    SyntheticDb {
        script,
        tasks_jsonl,
    }
}

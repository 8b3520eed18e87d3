//! Tasks: a question, the database it is about, and the gold query. The bundled set is
//! generated from intents × phrasings × values, with a split whose test half holds phrasings
//! and values never seen in training; users bring their own as JSONL.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::{Deserialize, Serialize};

use sandgym_env_api::{EnvError, Result, Split};

use crate::data::{self, CATEGORIES, CITIES, COURSES, DEPARTMENTS, MAJORS, PRODUCTS, TITLES};

/// One text-to-SQL task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// Unique id, e.g. `shop-count_city-2-1`.
    pub id: String,
    /// The database the question is about.
    pub database: String,
    /// The natural-language question.
    pub question: String,
    /// The gold query; an answer is right when its result equals this query's.
    pub gold_sql: String,
    /// Whether row order matters (the question asks for an order).
    #[serde(default)]
    pub ordered: bool,
    /// Train or test.
    #[serde(default)]
    pub split: Split,
    /// The intent it instantiates (for analysis), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
}

/// A task set: tasks plus the SQL that builds each database they use.
#[derive(Clone, Debug, Default)]
pub struct TaskSet {
    /// The tasks, train and test.
    pub tasks: Vec<Task>,
    /// Database name → the DDL and inserts that build it.
    pub databases: BTreeMap<String, String>,
}

impl TaskSet {
    /// The tasks of one split, in order.
    pub fn split(&self, split: Split) -> Vec<&Task> {
        self.tasks.iter().filter(|t| t.split == split).collect()
    }

    /// Loads tasks from JSONL. Each line is a [`Task`] object; a line may also carry
    /// `"schema_sql"` (DDL and inserts) to define the database it names. Every database used
    /// must be defined in the file or be one of the bundled ones (`shop`, `school`, `company`).
    ///
    /// ```
    /// let jsonl = r#"{"id": "t1", "database": "pets", "question": "How many pets?", "gold_sql": "SELECT COUNT(*) FROM pets", "schema_sql": "CREATE TABLE pets (name TEXT); INSERT INTO pets VALUES ('Rex');"}"#;
    /// let set = sandgym_env_sql::TaskSet::from_jsonl(jsonl.as_bytes())?;
    /// assert_eq!(set.tasks.len(), 1);
    /// # Ok::<(), sandgym_env_api::EnvError>(())
    /// ```
    pub fn from_jsonl(input: impl BufRead) -> Result<Self> {
        Self::from_jsonl_with(input, &BTreeMap::new())
    }

    /// Like [`from_jsonl`](Self::from_jsonl), with more databases to choose from: `databases`
    /// maps a name to the script that builds it (DDL and inserts, SQLite dumps included; see
    /// [`SqlConfig::databases`](crate::SqlConfig::databases)). A `schema_sql` in the file
    /// may not redefine one of them.
    pub fn from_jsonl_with(
        input: impl BufRead,
        databases: &BTreeMap<String, String>,
    ) -> Result<Self> {
        let mut bundled: BTreeMap<String, String> = data::bundled()
            .into_iter()
            .map(|d| (d.name.to_owned(), d.sql()))
            .collect();
        bundled.extend(databases.iter().map(|(k, v)| (k.clone(), v.clone())));
        let mut set = TaskSet::default();
        let mut ids = std::collections::BTreeSet::new();
        for (i, line) in input.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let invalid = |reason: String| EnvError::InvalidConfig {
                reason: format!("task file line {}: {reason}", i + 1),
            };
            let raw: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| invalid(format!("not JSON: {e}")))?;
            let schema_sql = raw
                .get("schema_sql")
                .and_then(|v| v.as_str())
                .map(str::to_owned);
            let mut object = raw
                .as_object()
                .cloned()
                .ok_or_else(|| invalid("not an object".into()))?;
            object.remove("schema_sql");
            let task: Task = serde_json::from_value(serde_json::Value::Object(object))
                .map_err(|e| invalid(e.to_string()))?;
            if task.question.trim().is_empty() || task.gold_sql.trim().is_empty() {
                return Err(invalid("question and gold_sql must not be empty".into()));
            }
            if !ids.insert(task.id.clone()) {
                return Err(invalid(format!("duplicate task id `{}`", task.id)));
            }
            match (schema_sql, set.databases.contains_key(&task.database)) {
                (Some(_), false) if databases.contains_key(&task.database) => {
                    return Err(invalid(format!(
                        "database `{}` is defined by the configuration's `databases` and by a `schema_sql`",
                        task.database
                    )));
                }
                (Some(sql), false) => {
                    set.databases.insert(task.database.clone(), sql);
                }
                (Some(sql), true) if set.databases[&task.database] != sql => {
                    return Err(invalid(format!(
                        "database `{}` is defined twice with different SQL",
                        task.database
                    )));
                }
                (None, false) => match bundled.get(&task.database) {
                    Some(sql) => {
                        set.databases.insert(task.database.clone(), sql.clone());
                    }
                    None => {
                        return Err(invalid(format!(
                            "database `{}` is neither bundled (shop, school, company), nor in the configuration's `databases`, nor defined by a `schema_sql` on its first line",
                            task.database
                        )));
                    }
                },
                _ => {}
            }
            set.tasks.push(task);
        }
        if set.tasks.is_empty() {
            return Err(EnvError::InvalidConfig {
                reason: "the task file holds no tasks".into(),
            });
        }
        Ok(set)
    }

    /// Writes the tasks as JSONL (without `schema_sql`).
    pub fn to_jsonl(&self) -> String {
        self.tasks
            .iter()
            .map(|t| serde_json::to_string(t).expect("a Task serialises") + "\n")
            .collect()
    }
}

/// One question template with its slot values.
struct Intent {
    id: &'static str,
    database: &'static str,
    phrasings: [&'static str; 4],
    sql: &'static str,
    ordered: bool,
    values: Vec<Vec<(&'static str, String)>>,
}

fn slot(
    key: &'static str,
    values: impl IntoIterator<Item = impl ToString>,
) -> Vec<Vec<(&'static str, String)>> {
    values
        .into_iter()
        .map(|v| vec![(key, v.to_string())])
        .collect()
}

fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = template.to_owned();
    for (k, v) in values {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

fn pairs(items: &[&[(&'static str, &str)]]) -> Vec<Vec<(&'static str, String)>> {
    items
        .iter()
        .map(|kv| kv.iter().map(|(k, v)| (*k, (*v).to_owned())).collect())
        .collect()
}

/// "How many rows has this table?" for `database`.
fn count_table(database: &'static str, values: Vec<Vec<(&'static str, String)>>) -> Intent {
    Intent {
        id: "count_table",
        database,
        phrasings: [
            "How many {noun} are there?",
            "Count the {noun}.",
            "What is the total number of {noun}?",
            "Tell me how many {noun} the database holds.",
        ],
        sql: "SELECT COUNT(*) FROM {table}",
        ordered: false,
        values,
    }
}

/// "How many rows per value of this column?" for `database`.
fn group_count(database: &'static str, values: Vec<Vec<(&'static str, String)>>) -> Intent {
    Intent {
        id: "group_count",
        database,
        phrasings: [
            "Count the {rows} for each {noun}.",
            "How many {rows} are there per {noun}?",
            "Give the number of {rows} grouped by {noun}.",
            "For every {noun}, report how many {rows} there are.",
        ],
        sql: "SELECT {col}, COUNT(*) FROM {table} GROUP BY {col}",
        ordered: false,
        values,
    }
}

fn intents() -> Vec<Intent> {
    let cities: Vec<&str> = CITIES.iter().map(|c| c.0).collect();
    vec![
        // ---- shop ----
        count_table(
            "shop",
            pairs(&[
                &[("noun", "customers"), ("table", "customers")],
                &[("noun", "products"), ("table", "products")],
                &[("noun", "orders"), ("table", "orders")],
            ]),
        ),
        Intent {
            id: "count_city",
            database: "shop",
            phrasings: [
                "How many customers live in {city}?",
                "Count the customers from {city}.",
                "What is the number of customers based in {city}?",
                "How many of our customers are located in {city}?",
            ],
            sql: "SELECT COUNT(*) FROM customers WHERE city = '{city}'",
            ordered: false,
            values: slot("city", cities.clone()),
        },
        Intent {
            id: "list_category",
            database: "shop",
            phrasings: [
                "List the names of products in the {category} category.",
                "Which products belong to the {category} category?",
                "Show the product names for category {category}.",
                "Give me every product name in {category}.",
            ],
            sql: "SELECT name FROM products WHERE category = '{category}'",
            ordered: false,
            values: slot("category", CATEGORIES),
        },
        Intent {
            id: "aggregate_products",
            database: "shop",
            phrasings: [
                "What is the {what} of any product?",
                "Find the {what} among all products.",
                "Tell me the {what} over the products.",
                "Across all products, what is the {what}?",
            ],
            sql: "SELECT {agg}({col}) FROM products",
            ordered: false,
            values: pairs(&[
                &[("what", "highest price"), ("agg", "MAX"), ("col", "price")],
                &[("what", "lowest price"), ("agg", "MIN"), ("col", "price")],
                &[("what", "average price"), ("agg", "AVG"), ("col", "price")],
                &[("what", "largest stock"), ("agg", "MAX"), ("col", "stock")],
                &[("what", "smallest stock"), ("agg", "MIN"), ("col", "stock")],
                &[("what", "average stock"), ("agg", "AVG"), ("col", "stock")],
            ]),
        },
        Intent {
            id: "price_above",
            database: "shop",
            phrasings: [
                "List the products that cost more than {n} euros.",
                "Which products are priced above {n}?",
                "Give the names of products with a price greater than {n}.",
                "Show me the products costing over {n} euros.",
            ],
            sql: "SELECT name FROM products WHERE price > {n}",
            ordered: false,
            values: slot("n", [20, 30, 50, 100, 200]),
        },
        group_count(
            "shop",
            pairs(&[
                &[
                    ("rows", "orders"),
                    ("noun", "status"),
                    ("table", "orders"),
                    ("col", "status"),
                ],
                &[
                    ("rows", "customers"),
                    ("noun", "city"),
                    ("table", "customers"),
                    ("col", "city"),
                ],
                &[
                    ("rows", "customers"),
                    ("noun", "country"),
                    ("table", "customers"),
                    ("col", "country"),
                ],
                &[
                    ("rows", "products"),
                    ("noun", "category"),
                    ("table", "products"),
                    ("col", "category"),
                ],
                &[
                    ("rows", "orders"),
                    ("noun", "order year"),
                    ("table", "orders"),
                    ("col", "order_year"),
                ],
            ]),
        ),
        Intent {
            id: "top_products",
            database: "shop",
            phrasings: [
                "What are the {k} {adj} products?",
                "List the {k} {adj} products.",
                "Name the top {k} {adj} products.",
                "Show the names of the {k} {adj} products.",
            ],
            sql: "SELECT name FROM products ORDER BY price {dir} LIMIT {k}",
            ordered: false,
            values: pairs(&[
                &[("k", "3"), ("adj", "most expensive"), ("dir", "DESC")],
                &[("k", "5"), ("adj", "most expensive"), ("dir", "DESC")],
                &[("k", "2"), ("adj", "most expensive"), ("dir", "DESC")],
                &[("k", "3"), ("adj", "cheapest"), ("dir", "ASC")],
                &[("k", "5"), ("adj", "cheapest"), ("dir", "ASC")],
            ]),
        },
        Intent {
            id: "orders_by_city",
            database: "shop",
            phrasings: [
                "How many orders were placed by customers from {city}?",
                "Count the orders of customers who live in {city}.",
                "What is the number of orders made by customers in {city}?",
                "How many orders came from {city} customers?",
            ],
            sql: "SELECT COUNT(*) FROM orders JOIN customers ON orders.customer_id = customers.id WHERE customers.city = '{city}'",
            ordered: false,
            values: slot("city", cities),
        },
        Intent {
            id: "products_above_average",
            database: "shop",
            phrasings: [
                "Which products have a {noun} above the average?",
                "List the products whose {noun} is higher than the average {noun}.",
                "Name the products with an above-average {noun}.",
                "Show every product with a {noun} over the mean.",
            ],
            sql: "SELECT name FROM products WHERE {col} > (SELECT AVG({col}) FROM products)",
            ordered: false,
            values: pairs(&[
                &[("noun", "price"), ("col", "price")],
                &[("noun", "stock"), ("col", "stock")],
            ]),
        },
        Intent {
            id: "buyers_of_product",
            database: "shop",
            phrasings: [
                "Which customers ordered the {product}?",
                "List the names of customers who bought the {product}.",
                "Who placed an order for the {product}?",
                "Give the customers that purchased the {product}.",
            ],
            sql: "SELECT DISTINCT customers.name FROM customers JOIN orders ON orders.customer_id = customers.id JOIN products ON orders.product_id = products.id WHERE products.name = '{product}'",
            ordered: false,
            values: slot("product", PRODUCTS.iter().step_by(2).map(|p| p.0)),
        },
        // ---- school ----
        count_table(
            "school",
            pairs(&[
                &[("noun", "students"), ("table", "students")],
                &[("noun", "courses"), ("table", "courses")],
                &[("noun", "enrollments"), ("table", "enrollments")],
            ]),
        ),
        Intent {
            id: "count_major",
            database: "school",
            phrasings: [
                "How many students major in {major}?",
                "Count the students whose major is {major}.",
                "What is the number of {major} students?",
                "How many students study {major}?",
            ],
            sql: "SELECT COUNT(*) FROM students WHERE major = '{major}'",
            ordered: false,
            values: slot("major", MAJORS),
        },
        Intent {
            id: "courses_of_department",
            database: "school",
            phrasings: [
                "List the titles of courses offered by the {dept} department.",
                "Which courses does the {dept} department teach?",
                "Show the course titles in {dept}.",
                "Give me every course title from the {dept} department.",
            ],
            sql: "SELECT title FROM courses WHERE department = '{dept}'",
            ordered: false,
            values: slot("dept", MAJORS),
        },
        Intent {
            id: "aggregate_students",
            database: "school",
            phrasings: [
                "What is the {what} of any student?",
                "Find the {what} among all students.",
                "Tell me the {what} over the students.",
                "Across all students, what is the {what}?",
            ],
            sql: "SELECT {agg}({col}) FROM students",
            ordered: false,
            values: pairs(&[
                &[("what", "highest gpa"), ("agg", "MAX"), ("col", "gpa")],
                &[("what", "lowest gpa"), ("agg", "MIN"), ("col", "gpa")],
                &[("what", "average gpa"), ("agg", "AVG"), ("col", "gpa")],
                &[("what", "average year"), ("agg", "AVG"), ("col", "year")],
            ]),
        },
        Intent {
            id: "gpa_above",
            database: "school",
            phrasings: [
                "List the students with a gpa above {x}.",
                "Which students have a gpa greater than {x}?",
                "Give the names of students whose gpa is over {x}.",
                "Show me the students with gpa higher than {x}.",
            ],
            sql: "SELECT name FROM students WHERE gpa > {x}",
            ordered: false,
            values: slot("x", ["3.0", "3.5", "3.8", "2.5"]),
        },
        group_count(
            "school",
            pairs(&[
                &[
                    ("rows", "students"),
                    ("noun", "major"),
                    ("table", "students"),
                    ("col", "major"),
                ],
                &[
                    ("rows", "students"),
                    ("noun", "year"),
                    ("table", "students"),
                    ("col", "year"),
                ],
                &[
                    ("rows", "courses"),
                    ("noun", "department"),
                    ("table", "courses"),
                    ("col", "department"),
                ],
                &[
                    ("rows", "enrollments"),
                    ("noun", "semester"),
                    ("table", "enrollments"),
                    ("col", "semester"),
                ],
            ]),
        ),
        Intent {
            id: "sorted_list",
            database: "school",
            phrasings: [
                "List all {noun} in {order} order.",
                "Show every {noun}, sorted in {order} order.",
                "Give me the {noun} in {order} order.",
                "Print the {noun} ordered in {order} order.",
            ],
            sql: "SELECT {col} FROM {table} ORDER BY {col} {dir}",
            ordered: true,
            values: pairs(&[
                &[
                    ("noun", "course titles"),
                    ("order", "alphabetical"),
                    ("col", "title"),
                    ("table", "courses"),
                    ("dir", "ASC"),
                ],
                &[
                    ("noun", "course titles"),
                    ("order", "reverse alphabetical"),
                    ("col", "title"),
                    ("table", "courses"),
                    ("dir", "DESC"),
                ],
                &[
                    ("noun", "student names"),
                    ("order", "alphabetical"),
                    ("col", "name"),
                    ("table", "students"),
                    ("dir", "ASC"),
                ],
            ]),
        },
        Intent {
            id: "enrolled_in_course",
            database: "school",
            phrasings: [
                "How many students are enrolled in {course}?",
                "Count the enrollments in the course {course}.",
                "What is the number of students taking {course}?",
                "How many students take {course}?",
            ],
            sql: "SELECT COUNT(*) FROM enrollments JOIN courses ON enrollments.course_id = courses.id WHERE courses.title = '{course}'",
            ordered: false,
            values: slot("course", COURSES.iter().take(8).map(|c| c.0)),
        },
        Intent {
            id: "above_average",
            database: "school",
            phrasings: [
                "Which {rows} have a {noun} above the average?",
                "List the {rows} whose {noun} is higher than the average {noun}.",
                "Name the {rows} with an above-average {noun}.",
                "Show every one of the {rows} with a {noun} over the mean.",
            ],
            sql: "SELECT {label} FROM {table} WHERE {col} > (SELECT AVG({col}) FROM {table})",
            ordered: false,
            values: pairs(&[
                &[
                    ("rows", "students"),
                    ("noun", "gpa"),
                    ("label", "name"),
                    ("table", "students"),
                    ("col", "gpa"),
                ],
                &[
                    ("rows", "courses"),
                    ("noun", "credits"),
                    ("label", "title"),
                    ("table", "courses"),
                    ("col", "credits"),
                ],
            ]),
        },
        Intent {
            id: "courses_of_major",
            database: "school",
            phrasings: [
                "Which course titles are taken by {major} students?",
                "List the courses that students majoring in {major} are enrolled in.",
                "What courses do {major} majors take?",
                "Give the titles of courses with {major} students enrolled.",
            ],
            sql: "SELECT DISTINCT courses.title FROM courses JOIN enrollments ON enrollments.course_id = courses.id JOIN students ON enrollments.student_id = students.id WHERE students.major = '{major}'",
            ordered: false,
            values: slot("major", MAJORS),
        },
        // ---- company ----
        count_table(
            "company",
            pairs(&[
                &[("noun", "employees"), ("table", "employees")],
                &[("noun", "departments"), ("table", "departments")],
                &[("noun", "projects"), ("table", "projects")],
            ]),
        ),
        Intent {
            id: "count_title",
            database: "company",
            phrasings: [
                "How many employees have the title {title}?",
                "Count the employees working as {title}.",
                "What is the number of employees whose title is {title}?",
                "How many people are employed as {title}?",
            ],
            sql: "SELECT COUNT(*) FROM employees WHERE title = '{title}'",
            ordered: false,
            values: slot("title", TITLES),
        },
        Intent {
            id: "departments_in_city",
            database: "company",
            phrasings: [
                "List the departments located in {city}.",
                "Which departments have their office in {city}?",
                "Show the names of departments based in {city}.",
                "Give me every department in {city}.",
            ],
            sql: "SELECT name FROM departments WHERE city = '{city}'",
            ordered: false,
            values: slot("city", ["Boston", "Chicago", "New York", "Austin"]),
        },
        Intent {
            id: "aggregate_company",
            database: "company",
            phrasings: [
                "What is the {what}?",
                "Find the {what}.",
                "Tell me the {what}.",
                "Report the {what}.",
            ],
            sql: "SELECT {agg}({col}) FROM {table}",
            ordered: false,
            values: pairs(&[
                &[
                    ("what", "highest salary of any employee"),
                    ("agg", "MAX"),
                    ("col", "salary"),
                    ("table", "employees"),
                ],
                &[
                    ("what", "lowest salary of any employee"),
                    ("agg", "MIN"),
                    ("col", "salary"),
                    ("table", "employees"),
                ],
                &[
                    ("what", "average salary of the employees"),
                    ("agg", "AVG"),
                    ("col", "salary"),
                    ("table", "employees"),
                ],
                &[
                    ("what", "largest budget of any project"),
                    ("agg", "MAX"),
                    ("col", "budget"),
                    ("table", "projects"),
                ],
                &[
                    ("what", "total budget of all projects"),
                    ("agg", "SUM"),
                    ("col", "budget"),
                    ("table", "projects"),
                ],
            ]),
        },
        Intent {
            id: "salary_above",
            database: "company",
            phrasings: [
                "List the employees earning more than {n} dollars.",
                "Which employees have a salary above {n}?",
                "Give the names of employees paid over {n}.",
                "Show me the employees with a salary greater than {n}.",
            ],
            sql: "SELECT name FROM employees WHERE salary > {n}",
            ordered: false,
            values: slot("n", [80000, 100000, 120000, 60000]),
        },
        group_count(
            "company",
            pairs(&[
                &[
                    ("rows", "employees"),
                    ("noun", "title"),
                    ("table", "employees"),
                    ("col", "title"),
                ],
                &[
                    ("rows", "employees"),
                    ("noun", "hire year"),
                    ("table", "employees"),
                    ("col", "hire_year"),
                ],
                &[
                    ("rows", "projects"),
                    ("noun", "status"),
                    ("table", "projects"),
                    ("col", "status"),
                ],
                &[
                    ("rows", "departments"),
                    ("noun", "city"),
                    ("table", "departments"),
                    ("col", "city"),
                ],
            ]),
        ),
        Intent {
            id: "employees_in_department",
            database: "company",
            phrasings: [
                "How many employees work in the {dept} department?",
                "Count the employees of {dept}.",
                "What is the number of people in the {dept} department?",
                "How many staff does {dept} have?",
            ],
            sql: "SELECT COUNT(*) FROM employees JOIN departments ON employees.department_id = departments.id WHERE departments.name = '{dept}'",
            ordered: false,
            values: slot("dept", DEPARTMENTS.iter().map(|d| d.0)),
        },
        Intent {
            id: "above_average",
            database: "company",
            phrasings: [
                "Which {rows} have a {noun} above the average?",
                "List the {rows} whose {noun} is higher than the average {noun}.",
                "Name the {rows} with an above-average {noun}.",
                "Show every one of the {rows} with a {noun} over the mean.",
            ],
            sql: "SELECT name FROM {table} WHERE {col} > (SELECT AVG({col}) FROM {table})",
            ordered: false,
            values: pairs(&[
                &[
                    ("rows", "employees"),
                    ("noun", "salary"),
                    ("table", "employees"),
                    ("col", "salary"),
                ],
                &[
                    ("rows", "projects"),
                    ("noun", "budget"),
                    ("table", "projects"),
                    ("col", "budget"),
                ],
            ]),
        },
        Intent {
            id: "projects_of_department",
            database: "company",
            phrasings: [
                "List the projects owned by the {dept} department.",
                "Which projects belong to {dept}?",
                "Show the names of the projects run by the {dept} department.",
                "Give me every project of {dept}.",
            ],
            sql: "SELECT projects.name FROM projects JOIN departments ON projects.department_id = departments.id WHERE departments.name = '{dept}'",
            ordered: false,
            values: slot("dept", DEPARTMENTS.iter().map(|d| d.0)),
        },
    ]
}

/// The bundled task set: 3 databases, 29 intents, 4 phrasings each. A task is in the test
/// split when it uses the held-out phrasing (the fourth) or a held-out value (every fifth value
/// of an intent, counting from the third), so the test split holds phrasings and value
/// combinations never seen in training.
pub fn bundled() -> TaskSet {
    let databases = data::bundled()
        .into_iter()
        .map(|d| (d.name.to_owned(), d.sql()))
        .collect();
    let mut tasks = Vec::new();
    for intent in intents() {
        for (v, values) in intent.values.iter().enumerate() {
            for (p, phrasing) in intent.phrasings.iter().enumerate() {
                let held_value = v % 5 == 2;
                let held_phrasing = p == 3;
                tasks.push(Task {
                    id: format!("{}-{}-{v}-{p}", intent.database, intent.id),
                    database: intent.database.to_owned(),
                    question: fill(phrasing, values),
                    gold_sql: fill(intent.sql, values),
                    ordered: intent.ordered,
                    split: if held_value || held_phrasing {
                        Split::Test
                    } else {
                        Split::Train
                    },
                    intent: Some(intent.id.to_owned()),
                });
            }
        }
    }
    TaskSet { tasks, databases }
}

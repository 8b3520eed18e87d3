//! The bundled databases: three domains with realistic, deterministically generated rows.

use sandgym_env_api::SplitMix64;

/// A column: name, SQL type and a short description shown by `describe_table`.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Column name.
    pub name: &'static str,
    /// SQL type (`INTEGER`, `FLOAT`, `TEXT`).
    pub ty: &'static str,
    /// What it holds.
    pub about: &'static str,
}

/// A table of a bundled database.
#[derive(Clone, Debug)]
pub struct Table {
    /// Table name.
    pub name: &'static str,
    /// Columns in order.
    pub columns: Vec<Column>,
    /// Rows as SQL literals, in column order.
    pub rows: Vec<Vec<String>>,
}

/// A bundled database: a name and its tables.
#[derive(Clone, Debug)]
pub struct Database {
    /// The database name used in task files (`shop`, `school`, `company`).
    pub name: &'static str,
    /// Its tables.
    pub tables: Vec<Table>,
}

impl Database {
    /// The DDL and inserts that build the database.
    pub fn sql(&self) -> String {
        let mut out = String::new();
        for t in &self.tables {
            let cols: Vec<String> = t
                .columns
                .iter()
                .map(|c| format!("{} {}", c.name, c.ty))
                .collect();
            out.push_str(&format!("CREATE TABLE {} ({});\n", t.name, cols.join(", ")));
            for chunk in t.rows.chunks(50) {
                let values: Vec<String> = chunk
                    .iter()
                    .map(|r| format!("({})", r.join(", ")))
                    .collect();
                out.push_str(&format!(
                    "INSERT INTO {} VALUES {};\n",
                    t.name,
                    values.join(", ")
                ));
            }
        }
        out
    }
}

const FIRST: [&str; 24] = [
    "Ada", "Ben", "Chloe", "Diego", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kira",
    "Liam", "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Samir", "Tara", "Umar", "Vera",
    "Wei", "Yara",
];
const LAST: [&str; 16] = [
    "Smith", "Garcia", "Chen", "Muller", "Rossi", "Kowalski", "Silva", "Tanaka", "Novak", "Dubois",
    "Jensen", "Okafor", "Haddad", "Ivanova", "Park", "Moreau",
];

fn q(s: impl AsRef<str>) -> String {
    format!("'{}'", s.as_ref().replace('\'', "''"))
}

fn person(rng: &mut SplitMix64, used: &mut Vec<String>) -> String {
    loop {
        let name = format!("{} {}", rng.choose(&FIRST), rng.choose(&LAST));
        if !used.contains(&name) {
            used.push(name.clone());
            return name;
        }
    }
}

/// Cities and their countries for the shop's customers.
pub const CITIES: [(&str, &str); 8] = [
    ("Paris", "France"),
    ("Lyon", "France"),
    ("Berlin", "Germany"),
    ("Munich", "Germany"),
    ("Madrid", "Spain"),
    ("Seville", "Spain"),
    ("Rome", "Italy"),
    ("Milan", "Italy"),
];
/// Product categories.
pub const CATEGORIES: [&str; 5] = ["books", "electronics", "garden", "kitchen", "toys"];
/// Products: name, category, price.
pub const PRODUCTS: [(&str, &str, f64); 20] = [
    ("Atlas of Rivers", "books", 24.5),
    ("Cookbook Classics", "books", 18.0),
    ("Sci-Fi Omnibus", "books", 32.0),
    ("Poetry Pocket", "books", 9.5),
    ("Noise Headphones", "electronics", 199.0),
    ("USB Charger", "electronics", 19.9),
    ("E-Reader", "electronics", 129.0),
    ("Smart Speaker", "electronics", 89.0),
    ("Garden Hose", "garden", 35.0),
    ("Pruning Shears", "garden", 22.0),
    ("Seed Kit", "garden", 12.5),
    ("Lawn Mower", "garden", 349.0),
    ("Chef Knife", "kitchen", 79.0),
    ("Espresso Maker", "kitchen", 249.0),
    ("Mixing Bowls", "kitchen", 27.0),
    ("Cast Iron Pan", "kitchen", 45.0),
    ("Puzzle Cube", "toys", 14.0),
    ("Wooden Train", "toys", 39.0),
    ("Kite", "toys", 21.0),
    ("Board Game", "toys", 34.0),
];
/// Order statuses.
pub const STATUSES: [&str; 4] = ["pending", "shipped", "delivered", "cancelled"];

fn shop() -> Database {
    let mut rng = SplitMix64::new(101);
    let mut used = Vec::new();
    let customers: Vec<Vec<String>> = (1..=40)
        .map(|id| {
            let (city, country) = *rng.choose(&CITIES);
            vec![
                id.to_string(),
                q(person(&mut rng, &mut used)),
                q(city),
                q(country),
                (2018 + rng.below(7)).to_string(),
            ]
        })
        .collect();
    let products: Vec<Vec<String>> = PRODUCTS
        .iter()
        .enumerate()
        .map(|(i, (name, cat, price))| {
            vec![
                (i + 1).to_string(),
                q(name),
                q(cat),
                format!("{price:.2}"),
                rng.below(200).to_string(),
            ]
        })
        .collect();
    let orders: Vec<Vec<String>> = (1..=150)
        .map(|id| {
            vec![
                id.to_string(),
                (1 + rng.below(40)).to_string(),
                (1 + rng.below(20)).to_string(),
                (1 + rng.below(5)).to_string(),
                (2021 + rng.below(4)).to_string(),
                q(rng.choose(&STATUSES)),
            ]
        })
        .collect();
    let c = |name, ty, about| Column { name, ty, about };
    Database {
        name: "shop",
        tables: vec![
            Table {
                name: "customers",
                columns: vec![
                    c("id", "INTEGER", "customer id"),
                    c("name", "TEXT", "full name"),
                    c("city", "TEXT", "city of residence"),
                    c("country", "TEXT", "country of residence"),
                    c("signup_year", "INTEGER", "year the account was created"),
                ],
                rows: customers,
            },
            Table {
                name: "products",
                columns: vec![
                    c("id", "INTEGER", "product id"),
                    c("name", "TEXT", "product name"),
                    c(
                        "category",
                        "TEXT",
                        "books, electronics, garden, kitchen or toys",
                    ),
                    c("price", "FLOAT", "unit price in euros"),
                    c("stock", "INTEGER", "units in stock"),
                ],
                rows: products,
            },
            Table {
                name: "orders",
                columns: vec![
                    c("id", "INTEGER", "order id"),
                    c("customer_id", "INTEGER", "customers.id of the buyer"),
                    c("product_id", "INTEGER", "products.id of the item"),
                    c("quantity", "INTEGER", "units ordered"),
                    c("order_year", "INTEGER", "year of the order"),
                    c("status", "TEXT", "pending, shipped, delivered or cancelled"),
                ],
                rows: orders,
            },
        ],
    }
}

/// Majors of the school's students.
pub const MAJORS: [&str; 6] = [
    "biology",
    "history",
    "mathematics",
    "physics",
    "economics",
    "music",
];
/// Courses: title, department, credits.
pub const COURSES: [(&str, &str, u32); 14] = [
    ("Calculus I", "mathematics", 6),
    ("Linear Algebra", "mathematics", 6),
    ("Statistics", "mathematics", 4),
    ("Mechanics", "physics", 6),
    ("Quantum Basics", "physics", 5),
    ("Cell Biology", "biology", 5),
    ("Genetics", "biology", 5),
    ("Ecology", "biology", 4),
    ("Ancient Rome", "history", 3),
    ("Modern Europe", "history", 4),
    ("Microeconomics", "economics", 5),
    ("Game Theory", "economics", 4),
    ("Harmony", "music", 3),
    ("Orchestration", "music", 4),
];
/// Semesters.
pub const SEMESTERS: [&str; 4] = ["2023-fall", "2024-spring", "2024-fall", "2025-spring"];

fn school() -> Database {
    let mut rng = SplitMix64::new(202);
    let mut used = Vec::new();
    let students: Vec<Vec<String>> = (1..=50)
        .map(|id| {
            vec![
                id.to_string(),
                q(person(&mut rng, &mut used)),
                q(rng.choose(&MAJORS)),
                (1 + rng.below(4)).to_string(),
                format!("{:.1}", 2.0 + rng.below(21) as f64 / 10.0),
            ]
        })
        .collect();
    let courses: Vec<Vec<String>> = COURSES
        .iter()
        .enumerate()
        .map(|(i, (t, d, c))| vec![(i + 1).to_string(), q(t), q(d), c.to_string()])
        .collect();
    let mut enrollments = Vec::new();
    let mut seen = Vec::new();
    while enrollments.len() < 160 {
        let (s, c) = (1 + rng.below(50), 1 + rng.below(14));
        if seen.contains(&(s, c)) {
            continue;
        }
        seen.push((s, c));
        enrollments.push(vec![
            s.to_string(),
            c.to_string(),
            (50 + rng.below(51)).to_string(),
            q(rng.choose(&SEMESTERS)),
        ]);
    }
    let c = |name, ty, about| Column { name, ty, about };
    Database {
        name: "school",
        tables: vec![
            Table {
                name: "students",
                columns: vec![
                    c("id", "INTEGER", "student id"),
                    c("name", "TEXT", "full name"),
                    c("major", "TEXT", "field of study"),
                    c("year", "INTEGER", "year of study, 1-4"),
                    c("gpa", "FLOAT", "grade point average, 2.0-4.0"),
                ],
                rows: students,
            },
            Table {
                name: "courses",
                columns: vec![
                    c("id", "INTEGER", "course id"),
                    c("title", "TEXT", "course title"),
                    c("department", "TEXT", "department teaching it"),
                    c("credits", "INTEGER", "credit points"),
                ],
                rows: courses,
            },
            Table {
                name: "enrollments",
                columns: vec![
                    c("student_id", "INTEGER", "students.id"),
                    c("course_id", "INTEGER", "courses.id"),
                    c("grade", "INTEGER", "final grade, 50-100"),
                    c("semester", "TEXT", "e.g. 2024-fall"),
                ],
                rows: enrollments,
            },
        ],
    }
}

/// Departments: name, city, budget.
pub const DEPARTMENTS: [(&str, &str, u32); 6] = [
    ("Engineering", "Boston", 900_000),
    ("Sales", "Chicago", 400_000),
    ("Marketing", "Chicago", 300_000),
    ("Finance", "New York", 350_000),
    ("Support", "Austin", 250_000),
    ("Research", "Boston", 700_000),
];
/// Job titles.
pub const TITLES: [&str; 5] = ["engineer", "manager", "analyst", "designer", "specialist"];
/// Project statuses.
pub const PROJECT_STATUSES: [&str; 3] = ["active", "completed", "paused"];

fn company() -> Database {
    let mut rng = SplitMix64::new(303);
    let mut used = Vec::new();
    let departments: Vec<Vec<String>> = DEPARTMENTS
        .iter()
        .enumerate()
        .map(|(i, (n, city, b))| vec![(i + 1).to_string(), q(n), q(city), b.to_string()])
        .collect();
    let employees: Vec<Vec<String>> = (1..=60)
        .map(|id| {
            vec![
                id.to_string(),
                q(person(&mut rng, &mut used)),
                (1 + rng.below(6)).to_string(),
                q(rng.choose(&TITLES)),
                (40_000 + 1_000 * rng.below(90)).to_string(),
                (2010 + rng.below(15)).to_string(),
            ]
        })
        .collect();
    const PROJECTS: [&str; 18] = [
        "Apollo", "Beacon", "Cascade", "Delta", "Ember", "Falcon", "Granite", "Harbor", "Iris",
        "Juniper", "Keystone", "Lumen", "Meridian", "Nova", "Orion", "Pioneer", "Quartz", "Rover",
    ];
    let projects: Vec<Vec<String>> = PROJECTS
        .iter()
        .enumerate()
        .map(|(i, n)| {
            vec![
                (i + 1).to_string(),
                q(n),
                (1 + rng.below(6)).to_string(),
                (10_000 * (5 + rng.below(60))).to_string(),
                q(rng.choose(&PROJECT_STATUSES)),
            ]
        })
        .collect();
    let c = |name, ty, about| Column { name, ty, about };
    Database {
        name: "company",
        tables: vec![
            Table {
                name: "departments",
                columns: vec![
                    c("id", "INTEGER", "department id"),
                    c("name", "TEXT", "department name"),
                    c("city", "TEXT", "office city"),
                    c("budget", "INTEGER", "yearly budget in dollars"),
                ],
                rows: departments,
            },
            Table {
                name: "employees",
                columns: vec![
                    c("id", "INTEGER", "employee id"),
                    c("name", "TEXT", "full name"),
                    c("department_id", "INTEGER", "departments.id"),
                    c("title", "TEXT", "job title"),
                    c("salary", "INTEGER", "yearly salary in dollars"),
                    c("hire_year", "INTEGER", "year hired"),
                ],
                rows: employees,
            },
            Table {
                name: "projects",
                columns: vec![
                    c("id", "INTEGER", "project id"),
                    c("name", "TEXT", "project name"),
                    c("department_id", "INTEGER", "departments.id of the owner"),
                    c("budget", "INTEGER", "project budget in dollars"),
                    c("status", "TEXT", "active, completed or paused"),
                ],
                rows: projects,
            },
        ],
    }
}

/// The three bundled databases.
pub fn bundled() -> Vec<Database> {
    vec![shop(), school(), company()]
}

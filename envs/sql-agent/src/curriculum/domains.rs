//! The curriculum's catalogue: domains of entities, each entity a table with the ways its name
//! is spelled and said, its columns and the tables it references.
//!
//! A database of the curriculum takes one domain, a subset of its entities, one spelling of
//! each name and a subset of each entity's columns ([`super::generate`]), so a few dozen
//! entities give hundreds of distinct schemas. Music (artists, albums, tracks) is left out on
//! purpose: the hand-written held-out questions are asked over a music database.

/// How a column's values are drawn.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Gen {
    /// A person's full name.
    Person,
    /// A company's name.
    Company,
    /// Two words, one from each list (`Blue Lamp`).
    Words(&'static [&'static str], &'static [&'static str]),
    /// One of a few values: a category people filter by.
    Pick(&'static [&'static str]),
    /// A whole number in a range (inclusive).
    Int(i64, i64),
    /// An amount with two decimals in a range of whole units.
    Money(i64, i64),
    /// A date in a range of years (`YYYY-MM-DD`).
    Date(i32, i32),
}

/// One column of an entity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Column {
    /// Spellings of its name, one chosen per database.
    pub names: &'static [&'static str],
    /// How people say it (the spoken form of its name when empty).
    pub said: &'static [&'static str],
    /// Its values.
    pub values: Gen,
    /// Percent of rows where it is NULL.
    pub nulls: u8,
}

/// One entity: a table of the curriculum.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entity {
    /// Its key in [`ENTITIES`] (what parents name).
    pub key: &'static str,
    /// Spellings of the table's name, `(table, singular)`: the singular names its key
    /// column where other tables reference it (`client_id`).
    pub names: &'static [(&'static str, &'static str)],
    /// How people say its rows ("people" for `customers`).
    pub said: &'static [&'static str],
    /// The name-like column, always present.
    pub label: Column,
    /// Its other columns, a subset of which each database keeps.
    pub columns: &'static [Column],
    /// Entities it references, by key (a `…_id` column for each one present).
    pub parents: &'static [&'static str],
    /// Its row count's range.
    pub rows: (u32, u32),
}

/// A domain: entities that belong together.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Domain {
    /// Its name (part of the database's name).
    pub name: &'static str,
    /// Its entities' keys, parents first.
    pub entities: &'static [&'static str],
}

const fn col(names: &'static [&'static str], values: Gen) -> Column {
    Column {
        names,
        said: &[],
        values,
        nulls: 0,
    }
}

const fn said(
    names: &'static [&'static str],
    said: &'static [&'static str],
    values: Gen,
) -> Column {
    Column {
        names,
        said,
        values,
        nulls: 0,
    }
}

const fn nullable(names: &'static [&'static str], values: Gen, nulls: u8) -> Column {
    Column {
        names,
        said: &[],
        values,
        nulls,
    }
}

const PERSON: Column = col(&["name", "full_name"], Gen::Person);
const COMPANY: Column = col(&["name", "company_name"], Gen::Company);

/// Cities values are drawn from.
pub(crate) const CITIES: &[&str] = &[
    "Lisbon",
    "Porto",
    "Madrid",
    "Seville",
    "Lyon",
    "Marseille",
    "Turin",
    "Naples",
    "Munich",
    "Hamburg",
    "Krakow",
    "Gdansk",
    "Vienna",
    "Graz",
    "Dublin",
    "Cork",
    "Oslo",
    "Bergen",
];
const COUNTRIES: &[&str] = &[
    "Portugal", "Spain", "France", "Italy", "Germany", "Poland", "Austria", "Ireland", "Norway",
    "Japan", "Brazil", "Canada",
];
/// Given names people are drawn from.
pub(crate) const FIRST: &[&str] = &[
    "Ana", "Bruno", "Clara", "David", "Elena", "Felix", "Grace", "Hugo", "Ines", "Jonas", "Karin",
    "Luis", "Maya", "Nils", "Olga", "Pedro", "Rosa", "Sven", "Tara", "Victor", "Wanda", "Yusuf",
    "Zoe", "Omar",
];
/// Family names people are drawn from.
pub(crate) const LAST: &[&str] = &[
    "Silva", "Novak", "Rossi", "Meyer", "Garcia", "Dubois", "Kowalski", "Berg", "Murphy", "Costa",
    "Weber", "Moreau", "Lund", "Ferreira", "Bianchi", "Sato", "Keller", "Horvat",
];
/// Company name suffixes.
pub(crate) const FIRM: &[&str] = &["Group", "Ltd", "Works", "Partners", "Systems", "Trading"];
const COLOURS: &[&str] = &[
    "Red", "Blue", "Green", "Silver", "Golden", "Quiet", "Swift", "Bright", "Little", "Grand",
];

/// Every entity of the catalogue.
pub(crate) const ENTITIES: &[Entity] = &[
    // Retail.
    Entity {
        key: "customer",
        names: &[
            ("customers", "customer"),
            ("clients", "client"),
            ("buyers", "buyer"),
        ],
        said: &["customers", "clients", "people who buy"],
        label: PERSON,
        columns: &[
            col(&["city", "home_city"], Gen::Pick(CITIES)),
            said(
                &["segment", "tier"],
                &["segment", "customer tier"],
                Gen::Pick(&["Retail", "Business", "Wholesale"]),
            ),
            col(&["age"], Gen::Int(18, 80)),
            nullable(
                &["email_opt_in", "newsletter"],
                Gen::Pick(&["yes", "no"]),
                20,
            ),
            col(&["joined", "signup_date"], Gen::Date(2015, 2024)),
        ],
        parents: &[],
        rows: (30, 90),
    },
    Entity {
        key: "supplier",
        names: &[("suppliers", "supplier"), ("vendors", "vendor")],
        said: &["suppliers", "vendors"],
        label: COMPANY,
        columns: &[
            col(&["country"], Gen::Pick(COUNTRIES)),
            said(&["rating", "score"], &["rating"], Gen::Int(1, 5)),
        ],
        parents: &[],
        rows: (8, 20),
    },
    Entity {
        key: "product",
        names: &[
            ("products", "product"),
            ("items", "item"),
            ("articles", "article"),
        ],
        said: &["products", "items"],
        label: col(
            &["name", "product_name", "title"],
            Gen::Words(
                COLOURS,
                &[
                    "Lamp", "Chair", "Kettle", "Desk", "Mug", "Rug", "Clock", "Vase", "Shelf",
                    "Stool",
                ],
            ),
        ),
        columns: &[
            col(
                &["category", "department"],
                Gen::Pick(&["Kitchen", "Garden", "Office", "Bedroom", "Outdoor"]),
            ),
            said(
                &["price", "unit_price", "list_price"],
                &["price", "cost"],
                Gen::Money(3, 400),
            ),
            said(
                &["stock", "quantity_in_stock"],
                &["stock", "units in stock"],
                Gen::Int(0, 250),
            ),
            nullable(&["weight_kg"], Gen::Int(1, 40), 15),
        ],
        parents: &["supplier"],
        rows: (25, 80),
    },
    Entity {
        key: "order",
        names: &[
            ("orders", "order"),
            ("purchases", "purchase"),
            ("sales", "sale"),
        ],
        said: &["orders", "purchases"],
        label: col(
            &["reference", "code"],
            Gen::Words(
                &["ORD", "PO", "REF"],
                &["A1", "B2", "C3", "D4", "E5", "F6", "G7", "H8", "J9"],
            ),
        ),
        columns: &[
            col(
                &["status", "state"],
                Gen::Pick(&["pending", "shipped", "delivered", "cancelled"]),
            ),
            said(
                &["total", "amount", "order_total"],
                &["total", "amount"],
                Gen::Money(5, 900),
            ),
            col(&["placed", "order_date"], Gen::Date(2021, 2024)),
            col(&["channel"], Gen::Pick(&["web", "store", "phone"])),
        ],
        parents: &["customer"],
        rows: (80, 300),
    },
    Entity {
        key: "order_line",
        names: &[
            ("order_items", "order_item"),
            ("order_lines", "order_line"),
            ("line_items", "line_item"),
        ],
        said: &["order lines", "line items"],
        label: col(&["note"], Gen::Pick(&["gift", "standard", "express"])),
        columns: &[
            said(
                &["quantity", "qty"],
                &["quantity", "units"],
                Gen::Int(1, 12),
            ),
            col(&["unit_price", "price_paid"], Gen::Money(3, 400)),
            col(&["discount"], Gen::Int(0, 30)),
        ],
        parents: &["order", "product"],
        rows: (150, 500),
    },
    // Health.
    Entity {
        key: "patient",
        names: &[("patients", "patient")],
        said: &["patients", "people treated"],
        label: PERSON,
        columns: &[
            col(&["city"], Gen::Pick(CITIES)),
            said(
                &["blood_type", "blood_group"],
                &["blood type"],
                Gen::Pick(&["A", "B", "AB", "O"]),
            ),
            said(
                &["birth_year", "year_of_birth"],
                &["year of birth"],
                Gen::Int(1940, 2015),
            ),
            nullable(
                &["insurer", "insurance"],
                Gen::Pick(&["Medica", "Salus", "Vita"]),
                25,
            ),
        ],
        parents: &[],
        rows: (40, 120),
    },
    Entity {
        key: "doctor",
        names: &[("doctors", "doctor"), ("physicians", "physician")],
        said: &["doctors", "physicians"],
        label: PERSON,
        columns: &[
            col(
                &["specialty", "speciality"],
                Gen::Pick(&[
                    "cardiology",
                    "oncology",
                    "pediatrics",
                    "neurology",
                    "dermatology",
                ]),
            ),
            said(
                &["years_experience", "experience_years"],
                &["years of experience", "experience"],
                Gen::Int(1, 35),
            ),
            col(&["salary"], Gen::Money(60000, 220000)),
        ],
        parents: &["ward"],
        rows: (10, 30),
    },
    Entity {
        key: "ward",
        names: &[("wards", "ward"), ("units", "unit")],
        said: &["wards", "hospital units"],
        label: col(
            &["name", "ward_name"],
            Gen::Words(
                &["North", "South", "East", "West", "Central"],
                &["Wing", "Hall", "Block"],
            ),
        ),
        columns: &[
            col(&["floor", "level"], Gen::Int(0, 9)),
            col(&["beds", "capacity"], Gen::Int(6, 60)),
        ],
        parents: &[],
        rows: (5, 15),
    },
    Entity {
        key: "appointment",
        names: &[
            ("appointments", "appointment"),
            ("visits", "visit"),
            ("consultations", "consultation"),
        ],
        said: &["appointments", "visits"],
        label: col(
            &["reason"],
            Gen::Pick(&[
                "checkup",
                "follow-up",
                "emergency",
                "vaccination",
                "referral",
            ]),
        ),
        columns: &[
            col(
                &["status"],
                Gen::Pick(&["booked", "completed", "missed", "cancelled"]),
            ),
            said(&["fee", "charge"], &["fee", "charge"], Gen::Money(20, 400)),
            col(&["visit_date", "scheduled_on"], Gen::Date(2022, 2024)),
            said(
                &["duration_minutes", "minutes"],
                &["length in minutes", "duration"],
                Gen::Int(10, 90),
            ),
        ],
        parents: &["patient", "doctor"],
        rows: (120, 400),
    },
    // Education.
    Entity {
        key: "student",
        names: &[
            ("students", "student"),
            ("pupils", "pupil"),
            ("learners", "learner"),
        ],
        said: &["students", "pupils"],
        label: PERSON,
        columns: &[
            said(
                &["grade_level", "year_group"],
                &["grade", "year group"],
                Gen::Int(7, 12),
            ),
            col(&["house"], Gen::Pick(&["Oak", "Ash", "Elm", "Pine"])),
            nullable(&["scholarship"], Gen::Pick(&["full", "partial"]), 70),
            col(&["enrolled_on"], Gen::Date(2018, 2024)),
        ],
        parents: &[],
        rows: (60, 200),
    },
    Entity {
        key: "teacher",
        names: &[
            ("teachers", "teacher"),
            ("instructors", "instructor"),
            ("faculty", "faculty"),
        ],
        said: &["teachers", "instructors"],
        label: PERSON,
        columns: &[
            col(
                &["subject", "field"],
                Gen::Pick(&["Maths", "Physics", "History", "Biology", "Art", "Music"]),
            ),
            said(
                &["salary", "annual_salary"],
                &["salary", "pay"],
                Gen::Money(30000, 90000),
            ),
            said(
                &["hired_year", "start_year"],
                &["year they started"],
                Gen::Int(1995, 2024),
            ),
        ],
        parents: &[],
        rows: (10, 30),
    },
    Entity {
        key: "course",
        names: &[
            ("courses", "course"),
            ("classes", "class"),
            ("modules", "module"),
        ],
        said: &["courses", "classes"],
        label: col(
            &["title", "name", "course_name"],
            Gen::Words(
                &["Intro to", "Advanced", "Applied", "Modern"],
                &[
                    "Algebra", "Optics", "Genetics", "Drawing", "Europe", "Harmony",
                ],
            ),
        ),
        columns: &[
            col(&["credits", "credit_points"], Gen::Int(1, 10)),
            col(
                &["level"],
                Gen::Pick(&["beginner", "intermediate", "advanced"]),
            ),
            col(
                &["room", "classroom"],
                Gen::Pick(&["R1", "R2", "R3", "Lab", "Studio"]),
            ),
        ],
        parents: &["teacher"],
        rows: (12, 40),
    },
    Entity {
        key: "enrollment",
        names: &[
            ("enrollments", "enrollment"),
            ("registrations", "registration"),
        ],
        said: &["enrollments", "registrations"],
        label: col(
            &["term", "semester"],
            Gen::Pick(&["spring", "summer", "autumn"]),
        ),
        columns: &[
            said(
                &["score", "mark", "grade_points"],
                &["score", "mark"],
                Gen::Int(35, 100),
            ),
            nullable(&["passed"], Gen::Pick(&["yes", "no"]), 10),
        ],
        parents: &["student", "course"],
        rows: (150, 500),
    },
    // Library.
    Entity {
        key: "author",
        names: &[("authors", "author"), ("writers", "writer")],
        said: &["authors", "writers"],
        label: PERSON,
        columns: &[
            col(&["country", "nationality"], Gen::Pick(COUNTRIES)),
            said(
                &["born", "birth_year"],
                &["year of birth"],
                Gen::Int(1900, 1995),
            ),
        ],
        parents: &[],
        rows: (15, 50),
    },
    Entity {
        key: "book",
        names: &[
            ("books", "book"),
            ("titles", "title"),
            ("volumes", "volume"),
        ],
        said: &["books", "titles"],
        label: col(
            &["title", "name"],
            Gen::Words(
                &[
                    "The Silent",
                    "A Distant",
                    "The Last",
                    "Under the",
                    "Beyond the",
                ],
                &["River", "Garden", "Harbour", "Forest", "City", "Winter"],
            ),
        ),
        columns: &[
            col(
                &["genre"],
                Gen::Pick(&["fiction", "history", "science", "poetry", "crime"]),
            ),
            said(
                &["pages", "page_count"],
                &["pages", "length in pages"],
                Gen::Int(90, 900),
            ),
            said(
                &["published", "year_published"],
                &["year published"],
                Gen::Int(1950, 2024),
            ),
            nullable(&["edition"], Gen::Int(1, 5), 30),
        ],
        parents: &["author"],
        rows: (40, 150),
    },
    Entity {
        key: "member",
        names: &[
            ("members", "member"),
            ("borrowers", "borrower"),
            ("patrons", "patron"),
        ],
        said: &["members", "borrowers", "people"],
        label: PERSON,
        columns: &[
            col(
                &["membership", "plan"],
                Gen::Pick(&["basic", "premium", "student"]),
            ),
            col(&["city"], Gen::Pick(CITIES)),
        ],
        parents: &[],
        rows: (30, 100),
    },
    Entity {
        key: "loan",
        names: &[
            ("loans", "loan"),
            ("checkouts", "checkout"),
            ("borrowings", "borrowing"),
        ],
        said: &["loans", "checkouts"],
        label: col(&["channel"], Gen::Pick(&["desk", "kiosk", "online"])),
        columns: &[
            said(
                &["days", "loan_days"],
                &["days kept", "length in days"],
                Gen::Int(1, 60),
            ),
            nullable(&["late_fee", "fine"], Gen::Money(1, 30), 60),
            col(&["loaned_on"], Gen::Date(2022, 2024)),
        ],
        parents: &["book", "member"],
        rows: (100, 400),
    },
    // Company.
    Entity {
        key: "department",
        names: &[
            ("departments", "department"),
            ("divisions", "division"),
            ("teams", "team"),
        ],
        said: &["departments", "divisions"],
        label: col(
            &["name", "dept_name"],
            Gen::Pick(&[
                "Sales",
                "Finance",
                "Legal",
                "Research",
                "Support",
                "Marketing",
                "Logistics",
                "Design",
            ]),
        ),
        columns: &[
            col(&["location", "city"], Gen::Pick(CITIES)),
            said(
                &["budget", "annual_budget"],
                &["budget"],
                Gen::Money(100000, 2000000),
            ),
        ],
        parents: &[],
        rows: (6, 8),
    },
    Entity {
        key: "employee",
        names: &[
            ("employees", "employee"),
            ("staff", "staff"),
            ("workers", "worker"),
        ],
        said: &["employees", "staff members", "people"],
        label: PERSON,
        columns: &[
            said(
                &["title", "job_title", "role"],
                &["job title", "role"],
                Gen::Pick(&["Analyst", "Engineer", "Manager", "Clerk", "Director"]),
            ),
            said(
                &["salary", "pay"],
                &["salary", "pay"],
                Gen::Money(28000, 160000),
            ),
            said(
                &["hire_year", "year_hired"],
                &["year hired"],
                Gen::Int(2000, 2024),
            ),
            nullable(&["bonus"], Gen::Money(500, 20000), 40),
        ],
        parents: &["department"],
        rows: (50, 200),
    },
    Entity {
        key: "project",
        names: &[("projects", "project"), ("initiatives", "initiative")],
        said: &["projects"],
        label: col(
            &["name", "project_name", "codename"],
            Gen::Words(
                &["Atlas", "Nova", "Orion", "Delta", "Echo", "Polar"],
                &["One", "Two", "Prime", "Next"],
            ),
        ),
        columns: &[
            col(
                &["status"],
                Gen::Pick(&["planned", "active", "paused", "done"]),
            ),
            col(&["budget", "cost"], Gen::Money(5000, 500000)),
            col(&["start_date", "kickoff"], Gen::Date(2019, 2024)),
        ],
        parents: &["department"],
        rows: (10, 40),
    },
    Entity {
        key: "assignment",
        names: &[("assignments", "assignment"), ("allocations", "allocation")],
        said: &["assignments"],
        label: col(
            &["role_on_project", "capacity"],
            Gen::Pick(&["lead", "member", "reviewer"]),
        ),
        columns: &[said(
            &["hours", "hours_per_week"],
            &["hours", "weekly hours"],
            Gen::Int(2, 40),
        )],
        parents: &["employee", "project"],
        rows: (80, 300),
    },
    // Travel.
    Entity {
        key: "airline",
        names: &[("airlines", "airline"), ("carriers", "carrier")],
        said: &["airlines", "carriers"],
        label: col(
            &["name"],
            Gen::Words(
                &["Sky", "Blue", "North", "Sun", "Star"],
                &["Air", "Wings", "Jet", "Lines"],
            ),
        ),
        columns: &[
            col(&["country", "home_country"], Gen::Pick(COUNTRIES)),
            said(
                &["fleet_size", "aircraft"],
                &["fleet size", "number of aircraft"],
                Gen::Int(5, 300),
            ),
        ],
        parents: &[],
        rows: (6, 15),
    },
    Entity {
        key: "flight",
        names: &[("flights", "flight"), ("routes", "route")],
        said: &["flights"],
        label: col(
            &["flight_number", "code"],
            Gen::Words(
                &["SA", "BW", "NJ", "SL"],
                &[
                    "101", "202", "303", "404", "505", "606", "707", "808", "909",
                ],
            ),
        ),
        columns: &[
            said(
                &["destination", "arrival_city"],
                &["destination"],
                Gen::Pick(CITIES),
            ),
            said(
                &["distance_km", "distance"],
                &["distance"],
                Gen::Int(200, 9000),
            ),
            said(
                &["duration_minutes", "minutes"],
                &["duration"],
                Gen::Int(45, 720),
            ),
            col(&["status"], Gen::Pick(&["on time", "delayed", "cancelled"])),
        ],
        parents: &["airline"],
        rows: (40, 150),
    },
    Entity {
        key: "passenger",
        names: &[("passengers", "passenger"), ("travellers", "traveller")],
        said: &["passengers", "travellers", "people flying"],
        label: PERSON,
        columns: &[
            col(&["nationality", "country"], Gen::Pick(COUNTRIES)),
            said(
                &["loyalty_tier", "tier"],
                &["loyalty tier", "status level"],
                Gen::Pick(&["bronze", "silver", "gold"]),
            ),
            col(&["age"], Gen::Int(1, 90)),
        ],
        parents: &[],
        rows: (60, 200),
    },
    Entity {
        key: "booking",
        names: &[
            ("bookings", "booking"),
            ("reservations", "reservation"),
            ("tickets", "ticket"),
        ],
        said: &["bookings", "reservations"],
        label: col(
            &["class", "cabin"],
            Gen::Pick(&["economy", "premium", "business", "first"]),
        ),
        columns: &[
            said(&["price", "fare"], &["price", "fare"], Gen::Money(40, 3000)),
            col(&["booked_on"], Gen::Date(2022, 2024)),
            nullable(
                &["seat"],
                Gen::Words(&["1", "2", "3", "4", "5"], &["A", "B", "C", "D"]),
                20,
            ),
        ],
        parents: &["flight", "passenger"],
        rows: (150, 500),
    },
    // Restaurants.
    Entity {
        key: "restaurant",
        names: &[
            ("restaurants", "restaurant"),
            ("venues", "venue"),
            ("eateries", "eatery"),
        ],
        said: &["restaurants", "places to eat"],
        label: col(
            &["name"],
            Gen::Words(
                &["Casa", "Chez", "Bistro", "Trattoria", "Taverna"],
                &["Luna", "Verde", "Sol", "Mar", "Roma", "Rosa"],
            ),
        ),
        columns: &[
            col(
                &["cuisine"],
                Gen::Pick(&["Italian", "Thai", "Mexican", "French", "Indian", "Japanese"]),
            ),
            col(&["city"], Gen::Pick(CITIES)),
            said(&["rating", "stars"], &["rating", "stars"], Gen::Int(1, 5)),
            said(
                &["seats", "capacity"],
                &["seats", "capacity"],
                Gen::Int(12, 160),
            ),
        ],
        parents: &[],
        rows: (15, 50),
    },
    Entity {
        key: "dish",
        names: &[
            ("dishes", "dish"),
            ("menu_items", "menu_item"),
            ("meals", "meal"),
        ],
        said: &["dishes", "menu items"],
        label: col(
            &["name", "dish_name"],
            Gen::Words(
                &["Spicy", "Grilled", "Fresh", "Baked", "Smoked"],
                &[
                    "Chicken", "Salmon", "Tofu", "Risotto", "Tart", "Soup", "Noodles",
                ],
            ),
        ),
        columns: &[
            col(&["course"], Gen::Pick(&["starter", "main", "dessert"])),
            col(&["price"], Gen::Money(4, 45)),
            said(&["calories", "kcal"], &["calories"], Gen::Int(150, 1400)),
            nullable(&["vegetarian"], Gen::Pick(&["yes", "no"]), 10),
        ],
        parents: &["restaurant"],
        rows: (60, 200),
    },
    Entity {
        key: "review",
        names: &[("reviews", "review"), ("ratings", "rating")],
        said: &["reviews"],
        label: col(&["reviewer", "author"], Gen::Person),
        columns: &[
            said(&["stars", "score"], &["stars", "score"], Gen::Int(1, 5)),
            col(&["visited_on"], Gen::Date(2022, 2024)),
            col(&["source"], Gen::Pick(&["app", "web", "paper"])),
        ],
        parents: &["restaurant"],
        rows: (80, 300),
    },
    // Banking.
    Entity {
        key: "branch",
        names: &[("branches", "branch"), ("offices", "office")],
        said: &["branches", "offices"],
        label: col(
            &["name", "branch_name"],
            Gen::Words(
                &["Main", "Harbour", "Market", "Station", "Park"],
                &["Street", "Square", "Road"],
            ),
        ),
        columns: &[
            col(&["city"], Gen::Pick(CITIES)),
            said(
                &["staff_count", "employees"],
                &["number of staff"],
                Gen::Int(3, 40),
            ),
        ],
        parents: &[],
        rows: (5, 15),
    },
    Entity {
        key: "account_holder",
        names: &[("account_holders", "account_holder"), ("holders", "holder")],
        said: &["account holders", "clients"],
        label: PERSON,
        columns: &[
            col(&["city"], Gen::Pick(CITIES)),
            said(
                &["risk", "risk_class"],
                &["risk class"],
                Gen::Pick(&["low", "medium", "high"]),
            ),
            said(&["credit_score"], &["credit score"], Gen::Int(300, 850)),
        ],
        parents: &["branch"],
        rows: (40, 150),
    },
    Entity {
        key: "account",
        names: &[("accounts", "account")],
        said: &["accounts"],
        label: col(
            &["kind", "account_type"],
            Gen::Pick(&["checking", "savings", "business"]),
        ),
        columns: &[
            said(
                &["balance"],
                &["balance", "money held"],
                Gen::Money(0, 90000),
            ),
            col(&["opened", "opened_on"], Gen::Date(2010, 2024)),
            nullable(&["overdraft_limit"], Gen::Int(100, 5000), 50),
        ],
        parents: &["account_holder"],
        rows: (60, 250),
    },
    Entity {
        key: "transfer",
        names: &[
            ("transactions", "transaction"),
            ("transfers", "transfer"),
            ("payments", "payment"),
        ],
        said: &["transactions", "payments"],
        label: col(
            &["kind", "method"],
            Gen::Pick(&["deposit", "withdrawal", "card", "transfer"]),
        ),
        columns: &[
            said(&["amount", "value"], &["amount"], Gen::Money(1, 5000)),
            col(&["made_on", "day"], Gen::Date(2023, 2024)),
        ],
        parents: &["account"],
        rows: (150, 500),
    },
    // Events.
    Entity {
        key: "venue",
        names: &[
            ("venues", "venue"),
            ("locations", "location"),
            ("halls", "hall"),
        ],
        said: &["venues", "halls"],
        label: col(
            &["name"],
            Gen::Words(
                &["Royal", "Old", "New", "City", "Riverside"],
                &["Arena", "Hall", "Theatre", "Dome"],
            ),
        ),
        columns: &[
            col(&["city"], Gen::Pick(CITIES)),
            col(&["capacity", "seats"], Gen::Int(100, 20000)),
        ],
        parents: &[],
        rows: (6, 20),
    },
    Entity {
        key: "event",
        names: &[
            ("events", "event"),
            ("shows", "show"),
            ("performances", "performance"),
        ],
        said: &["events", "shows"],
        label: col(
            &["title", "name"],
            Gen::Words(
                &["Spring", "Summer", "Night", "Winter", "Jazz"],
                &["Festival", "Gala", "Concert", "Fair", "Talk"],
            ),
        ),
        columns: &[
            col(
                &["category", "genre"],
                Gen::Pick(&["concert", "theatre", "comedy", "conference", "sport"]),
            ),
            said(
                &["ticket_price", "price"],
                &["ticket price", "price"],
                Gen::Money(5, 250),
            ),
            col(&["event_date", "held_on"], Gen::Date(2023, 2025)),
        ],
        parents: &["venue"],
        rows: (30, 120),
    },
    Entity {
        key: "attendee",
        names: &[
            ("attendees", "attendee"),
            ("guests", "guest"),
            ("visitors", "visitor"),
        ],
        said: &["attendees", "guests", "people attending"],
        label: PERSON,
        columns: &[
            col(&["age"], Gen::Int(12, 85)),
            col(&["city", "hometown"], Gen::Pick(CITIES)),
        ],
        parents: &["event"],
        rows: (100, 400),
    },
    // Logistics.
    Entity {
        key: "warehouse",
        names: &[("warehouses", "warehouse"), ("depots", "depot")],
        said: &["warehouses", "depots"],
        label: col(
            &["name", "site"],
            Gen::Words(
                &["Depot", "Hub", "Yard"],
                &["Alpha", "Beta", "Gamma", "Delta", "Omega"],
            ),
        ),
        columns: &[
            col(&["city"], Gen::Pick(CITIES)),
            said(
                &["capacity_tons", "capacity"],
                &["capacity"],
                Gen::Int(50, 5000),
            ),
        ],
        parents: &[],
        rows: (4, 12),
    },
    Entity {
        key: "vehicle",
        names: &[
            ("vehicles", "vehicle"),
            ("trucks", "truck"),
            ("vans", "van"),
        ],
        said: &["vehicles", "trucks"],
        label: col(
            &["plate", "registration"],
            Gen::Words(
                &["AB", "CD", "EF", "GH"],
                &["100", "220", "314", "456", "578", "690", "712"],
            ),
        ),
        columns: &[
            col(
                &["kind", "vehicle_type"],
                Gen::Pick(&["van", "truck", "bike", "trailer"]),
            ),
            said(
                &["payload_kg", "max_load"],
                &["payload", "maximum load"],
                Gen::Int(100, 20000),
            ),
            col(&["built", "model_year"], Gen::Int(2005, 2024)),
        ],
        parents: &["warehouse"],
        rows: (15, 60),
    },
    Entity {
        key: "driver",
        names: &[("drivers", "driver"), ("couriers", "courier")],
        said: &["drivers", "couriers"],
        label: PERSON,
        columns: &[
            said(
                &["license_class", "licence"],
                &["licence class", "license"],
                Gen::Pick(&["B", "C", "CE", "D"]),
            ),
            said(
                &["years_driving", "experience"],
                &["years of driving", "experience"],
                Gen::Int(1, 40),
            ),
        ],
        parents: &[],
        rows: (15, 60),
    },
    Entity {
        key: "delivery",
        names: &[
            ("deliveries", "delivery"),
            ("shipments", "shipment"),
            ("trips", "trip"),
        ],
        said: &["deliveries", "shipments"],
        label: col(
            &["status"],
            Gen::Pick(&["scheduled", "in transit", "delivered", "failed"]),
        ),
        columns: &[
            said(
                &["distance_km", "km"],
                &["distance", "kilometres"],
                Gen::Int(2, 900),
            ),
            said(&["weight_kg", "weight"], &["weight"], Gen::Int(1, 8000)),
            col(&["shipped_on"], Gen::Date(2023, 2024)),
        ],
        parents: &["vehicle", "driver"],
        rows: (120, 450),
    },
    // Sport.
    Entity {
        key: "team",
        names: &[("teams", "team"), ("clubs", "club"), ("squads", "squad")],
        said: &["teams", "clubs"],
        label: col(
            &["name", "team_name"],
            Gen::Words(CITIES, &["Rovers", "United", "Athletic", "City"]),
        ),
        columns: &[
            col(&["founded", "founded_year"], Gen::Int(1880, 2010)),
            col(
                &["league", "division"],
                Gen::Pick(&["Premier", "First", "Second"]),
            ),
            said(
                &["stadium_capacity", "capacity"],
                &["stadium capacity"],
                Gen::Int(2000, 80000),
            ),
        ],
        parents: &[],
        rows: (8, 24),
    },
    Entity {
        key: "player",
        names: &[("players", "player"), ("athletes", "athlete")],
        said: &["players", "athletes"],
        label: PERSON,
        columns: &[
            col(
                &["position", "role"],
                Gen::Pick(&["goalkeeper", "defender", "midfielder", "forward"]),
            ),
            col(&["age"], Gen::Int(17, 39)),
            said(&["goals", "goals_scored"], &["goals"], Gen::Int(0, 40)),
            said(
                &["wage", "weekly_wage"],
                &["wage", "pay"],
                Gen::Money(500, 90000),
            ),
        ],
        parents: &["team"],
        rows: (80, 300),
    },
    Entity {
        key: "coach",
        names: &[
            ("coaches", "coach"),
            ("managers", "manager"),
            ("trainers", "trainer"),
        ],
        said: &["coaches", "managers"],
        label: PERSON,
        columns: &[
            col(&["nationality"], Gen::Pick(COUNTRIES)),
            said(
                &["trophies", "titles_won"],
                &["trophies", "titles"],
                Gen::Int(0, 25),
            ),
        ],
        parents: &["team"],
        rows: (8, 24),
    },
    // Property.
    Entity {
        key: "agent",
        names: &[
            ("agents", "agent"),
            ("brokers", "broker"),
            ("realtors", "realtor"),
        ],
        said: &["agents", "brokers"],
        label: PERSON,
        columns: &[
            col(
                &["agency"],
                Gen::Pick(&["HomeFirst", "KeyMove", "NestWell", "Brick and Co"]),
            ),
            said(
                &["commission_pct", "commission"],
                &["commission"],
                Gen::Int(1, 6),
            ),
        ],
        parents: &[],
        rows: (8, 25),
    },
    Entity {
        key: "property",
        names: &[
            ("properties", "property"),
            ("listings", "listing"),
            ("homes", "home"),
        ],
        said: &["properties", "homes", "listings"],
        label: col(
            &["address", "street"],
            Gen::Words(
                &["12", "7", "33", "81", "150", "9"],
                &[
                    "Oak Lane",
                    "Mill Road",
                    "High Street",
                    "Park Avenue",
                    "Station Road",
                ],
            ),
        ),
        columns: &[
            col(&["city", "town"], Gen::Pick(CITIES)),
            col(
                &["kind", "property_type"],
                Gen::Pick(&["house", "flat", "studio", "cottage"]),
            ),
            said(
                &["bedrooms", "rooms"],
                &["bedrooms", "rooms"],
                Gen::Int(1, 6),
            ),
            said(
                &["asking_price", "price"],
                &["asking price", "price"],
                Gen::Money(60000, 1200000),
            ),
            nullable(&["sold_on"], Gen::Date(2020, 2024), 60),
        ],
        parents: &["agent"],
        rows: (60, 200),
    },
    Entity {
        key: "viewing",
        names: &[("viewings", "viewing"), ("visits", "visit")],
        said: &["viewings"],
        label: col(&["visitor", "client_name"], Gen::Person),
        columns: &[
            said(
                &["interest", "rating"],
                &["interest", "rating"],
                Gen::Int(1, 10),
            ),
            col(&["viewed_on"], Gen::Date(2022, 2024)),
        ],
        parents: &["property"],
        rows: (100, 350),
    },
];

/// The domains, each a set of entities with their references among them.
pub(crate) const DOMAINS: &[Domain] = &[
    Domain {
        name: "retail",
        entities: &["customer", "supplier", "product", "order", "order_line"],
    },
    Domain {
        name: "clinic",
        entities: &["ward", "patient", "doctor", "appointment"],
    },
    Domain {
        name: "school",
        entities: &["student", "teacher", "course", "enrollment"],
    },
    Domain {
        name: "library",
        entities: &["author", "book", "member", "loan"],
    },
    Domain {
        name: "company",
        entities: &["department", "employee", "project", "assignment"],
    },
    Domain {
        name: "travel",
        entities: &["airline", "flight", "passenger", "booking"],
    },
    Domain {
        name: "dining",
        entities: &["restaurant", "dish", "review"],
    },
    Domain {
        name: "bank",
        entities: &["branch", "account_holder", "account", "transfer"],
    },
    Domain {
        name: "events",
        entities: &["venue", "event", "attendee"],
    },
    Domain {
        name: "logistics",
        entities: &["warehouse", "vehicle", "driver", "delivery"],
    },
    Domain {
        name: "league",
        entities: &["team", "player", "coach"],
    },
    Domain {
        name: "property",
        entities: &["agent", "property", "viewing"],
    },
    // Mixed domains: a business and its people, up to 12 tables.
    Domain {
        name: "retail_company",
        entities: &[
            "department",
            "employee",
            "project",
            "assignment",
            "customer",
            "supplier",
            "product",
            "order",
            "order_line",
        ],
    },
    Domain {
        name: "campus",
        entities: &[
            "student",
            "teacher",
            "course",
            "enrollment",
            "author",
            "book",
            "member",
            "loan",
            "venue",
            "event",
            "attendee",
        ],
    },
    Domain {
        name: "city",
        entities: &[
            "restaurant",
            "dish",
            "review",
            "venue",
            "event",
            "attendee",
            "team",
            "player",
            "coach",
            "agent",
            "property",
            "viewing",
        ],
    },
];

/// The entity with this key (a test checks every domain's keys resolve).
pub(crate) fn entity(key: &str) -> Option<&'static Entity> {
    ENTITIES.iter().find(|e| e.key == key)
}

#!/usr/bin/env python3
"""Writes a second real-size held-out database and its hand-written questions
(envs/sql-agent/tests/data/films.sql, films_questions.jsonl, films_questions_expected.json).

A film-streaming service in seven tables and about 9,000 rows — studios, directors, films,
subscription plans, members, viewings and reviews — with names and values drawn from word
lists (not `Artist 12`-style labels), created with SQLite's own DDL and dumped as its shell's
`.dump` does. The questions below were written by hand after the task writer's shapes of
this round were fixed, in the words a user of such a service would use; none is generated
and nothing trains on them (all are test tasks). Each gold query runs in SQLite here and its
rows are written beside it, so a test can check the env's engine against SQLite.
Deterministic: rerunning it rewrites the same files.
"""
import json
import random
import sqlite3

from make_music_db import OUT, render

DDL = """
CREATE TABLE studios (studio_id INTEGER PRIMARY KEY, name TEXT NOT NULL, country CHAR(2),
  founded INTEGER);
CREATE TABLE directors (director_id INTEGER PRIMARY KEY, full_name TEXT NOT NULL,
  birth_year INTEGER, nationality TEXT);
CREATE TABLE films (film_id INTEGER PRIMARY KEY, title VARCHAR(120) NOT NULL,
  studio_id INTEGER REFERENCES studios(studio_id),
  director_id INTEGER REFERENCES directors(director_id), release_date DATE,
  runtime_min INTEGER, budget_musd REAL, age_rating VARCHAR(5), language TEXT);
CREATE TABLE plans (plan_id INTEGER PRIMARY KEY, name TEXT NOT NULL, monthly_fee NUMERIC(6,2),
  max_screens INTEGER);
CREATE TABLE members (member_id INTEGER PRIMARY KEY, username TEXT NOT NULL UNIQUE,
  email VARCHAR(80), country CHAR(2), plan_id INTEGER REFERENCES plans(plan_id), joined DATE,
  active BOOLEAN);
CREATE TABLE viewings (viewing_id INTEGER PRIMARY KEY, member_id INTEGER NOT NULL,
  film_id INTEGER NOT NULL, watched_on DATE, minutes_watched INTEGER, device TEXT,
  FOREIGN KEY (member_id) REFERENCES members (member_id),
  FOREIGN KEY (film_id) REFERENCES films (film_id));
CREATE TABLE reviews (review_id INTEGER PRIMARY KEY, member_id INTEGER NOT NULL,
  film_id INTEGER NOT NULL, stars INTEGER CHECK (stars BETWEEN 1 AND 5), created DATE);
"""

ADJ = ["Silent", "Red", "Last", "Broken", "Golden", "Hidden", "Cold", "Burning", "Lonely",
       "Midnight", "Crimson", "Distant", "Wild", "Paper", "Glass", "Northern", "Lost", "Electric",
       "Quiet", "Iron"]
NOUN = ["River", "Harbor", "Garden", "Empire", "Winter", "Echo", "Horizon", "Machine", "Orchard",
        "Signal", "Kingdom", "Lantern", "Storm", "Mirror", "Circus", "Canyon", "Island",
        "Station", "Promise", "Shadow"]
FIRST = ["Ana", "Ben", "Chloe", "David", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kira", "Luca", "Maya", "Noah", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tara"]
LAST = ["Almeida", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Hayashi",
        "Ivanova", "Jensen", "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov",
        "Rossi", "Sato", "Tanaka", "Weber"]
STUDIO_A = ["Blue", "North", "Silver", "Lighthouse", "Summit", "Falcon", "Ember", "Harbor"]
STUDIO_B = ["Pictures", "Films", "Studios", "Entertainment", "Media"]
COUNTRIES = ["US", "GB", "FR", "DE", "JP", "KR", "IN", "ES", "IT", "BR"]
NATIONALITY = {"US": "American", "GB": "British", "FR": "French", "DE": "German",
               "JP": "Japanese", "KR": "Korean", "IN": "Indian", "ES": "Spanish",
               "IT": "Italian", "BR": "Brazilian"}
LANGUAGES = ["English", "English", "English", "French", "Japanese", "Korean", "Spanish",
             "German", "Hindi", "Italian"]
RATINGS = ["G", "PG", "PG-13", "R"]
DEVICES = ["tv", "phone", "tablet", "laptop"]

# (intent, question, gold query, ordered): written by hand.
QUESTIONS = [
    ("films", "How many films are in the catalogue?", "SELECT COUNT(*) FROM films", False),
    ("studios", "How many studios do we have?", "SELECT COUNT(*) FROM studios", False),
    ("plan_names", "What subscription plans are there? Give their names.",
     "SELECT name FROM plans", False),
    ("cheapest_plan", "How much does the cheapest plan cost per month?",
     "SELECT MIN(monthly_fee) FROM plans", False),
    ("premium_fee", "What is the monthly fee of the Premium plan?",
     "SELECT monthly_fee FROM plans WHERE name = 'Premium'", False),
    ("r_rated", "How many films are rated R?",
     "SELECT COUNT(*) FROM films WHERE age_rating = 'R'", False),
    ("japanese_films", "How many films are in Japanese?",
     "SELECT COUNT(*) FROM films WHERE language = 'Japanese'", False),
    ("avg_runtime", "What is the average runtime of a film, in minutes?",
     "SELECT AVG(runtime_min) FROM films", False),
    ("longest_runtime", "What is the longest runtime of any film?",
     "SELECT MAX(runtime_min) FROM films", False),
    ("over_150", "How many films run longer than 150 minutes?",
     "SELECT COUNT(*) FROM films WHERE runtime_min > 150", False),
    ("total_budget", "What was the combined budget of all films, in millions of dollars?",
     "SELECT SUM(budget_musd) FROM films", False),
    ("no_budget", "For how many films is the budget unknown?",
     "SELECT COUNT(*) FROM films WHERE budget_musd IS NULL", False),
    ("films_per_rating", "How many films are there for each age rating?",
     "SELECT age_rating, COUNT(*) FROM films GROUP BY age_rating", False),
    ("languages", "Which languages do the films come in? List each once.",
     "SELECT DISTINCT language FROM films", False),
    ("since_2020", "How many films were released in 2020 or later?",
     "SELECT COUNT(*) FROM films WHERE release_date >= '2020-01-01'", False),
    ("before_2000", "How many films came out before 2000-01-01?",
     "SELECT COUNT(*) FROM films WHERE release_date < '2000-01-01'", False),
    ("newest_film", "What is the title of the most recently released film?",
     "SELECT title FROM films WHERE release_date = (SELECT MAX(release_date) FROM films)", False),
    ("longest_three", "Name the three longest films, longest first.",
     "SELECT title FROM films ORDER BY runtime_min DESC LIMIT 3", True),
    ("us_studios", "How many studios are based in the US?",
     "SELECT COUNT(*) FROM studios WHERE country = 'US'", False),
    ("old_studios", "Which studios were founded before 1950? Give their names.",
     "SELECT name FROM studios WHERE founded < 1950", False),
    ("studio_countries", "How many studios are there in each country?",
     "SELECT country, COUNT(*) FROM studios GROUP BY country", False),
    ("french_directors", "How many directors are French?",
     "SELECT COUNT(*) FROM directors WHERE nationality = 'French'", False),
    ("young_directors", "How many directors were born after 1980?",
     "SELECT COUNT(*) FROM directors WHERE birth_year > 1980", False),
    ("oldest_director_year", "In what year was the oldest director born?",
     "SELECT MIN(birth_year) FROM directors", False),
    ("director_films", "How many films did Maya Tanaka direct?",
     "SELECT COUNT(*) FROM films JOIN directors ON films.director_id = directors.director_id WHERE directors.full_name = 'Maya Tanaka'", False),
    ("director_titles", "List the titles of the films directed by Jonas Weber.",
     "SELECT films.title FROM films JOIN directors ON films.director_id = directors.director_id WHERE directors.full_name = 'Jonas Weber'", False),
    ("studio_film_count", "How many films has Falcon Pictures made?",
     "SELECT COUNT(*) FROM films JOIN studios ON films.studio_id = studios.studio_id WHERE studios.name = 'Falcon Pictures'", False),
    ("studio_avg_budget", "What is the average budget of films from Summit Studios?",
     "SELECT AVG(films.budget_musd) FROM films JOIN studios ON films.studio_id = studios.studio_id WHERE studios.name = 'Summit Studios'", False),
    ("films_per_studio", "Count the films per studio, by studio name.",
     "SELECT studios.name, COUNT(*) FROM films JOIN studios ON films.studio_id = studios.studio_id GROUP BY studios.name", False),
    ("japan_studio_films", "How many films were made by Japanese studios (studio country JP)?",
     "SELECT COUNT(*) FROM films JOIN studios ON films.studio_id = studios.studio_id WHERE studios.country = 'JP'", False),
    ("korean_director_films", "How many films have a Korean director?",
     "SELECT COUNT(*) FROM films JOIN directors ON films.director_id = directors.director_id WHERE directors.nationality = 'Korean'", False),
    ("film_director", "Who directed Silent River? Give the director's full name.",
     "SELECT directors.full_name FROM films JOIN directors ON films.director_id = directors.director_id WHERE films.title = 'Silent River'", False),
    ("film_42_title", "What is the title of film 42?",
     "SELECT title FROM films WHERE film_id = 42", False),
    ("film_300_runtime", "How long does film 300 run?",
     "SELECT runtime_min FROM films WHERE film_id = 300", False),
    ("members", "How many members do we have?", "SELECT COUNT(*) FROM members", False),
    ("active_members", "How many members are active?",
     "SELECT COUNT(*) FROM members WHERE active = TRUE", False),
    ("inactive_members", "How many members have cancelled (are not active)?",
     "SELECT COUNT(*) FROM members WHERE active = FALSE", False),
    ("de_members", "How many members live in DE?",
     "SELECT COUNT(*) FROM members WHERE country = 'DE'", False),
    ("members_per_country", "How many members are there per country?",
     "SELECT country, COUNT(*) FROM members GROUP BY country", False),
    ("premium_members", "How many members are on the Premium plan?",
     "SELECT COUNT(*) FROM members JOIN plans ON members.plan_id = plans.plan_id WHERE plans.name = 'Premium'", False),
    ("joined_2024", "How many members joined on or after 2024-01-01?",
     "SELECT COUNT(*) FROM members WHERE joined >= '2024-01-01'", False),
    ("member_email", "What is the email address of the member with username kira_sato7?",
     "SELECT email FROM members WHERE username = 'kira_sato7'", False),
    ("member_plan", "Which plan is member 120 on? Give the plan's name.",
     "SELECT plans.name FROM members JOIN plans ON members.plan_id = plans.plan_id WHERE members.member_id = 120", False),
    ("viewings", "How many viewings have been recorded?", "SELECT COUNT(*) FROM viewings", False),
    ("phone_viewings", "How many viewings were on a phone?",
     "SELECT COUNT(*) FROM viewings WHERE device = 'phone'", False),
    ("minutes_total", "How many minutes have members watched in total?",
     "SELECT SUM(minutes_watched) FROM viewings", False),
    ("avg_minutes_device", "What is the average number of minutes watched per viewing, for each device?",
     "SELECT device, AVG(minutes_watched) FROM viewings GROUP BY device", False),
    ("member_viewings", "How many times has member 15 watched something?",
     "SELECT COUNT(*) FROM viewings WHERE member_id = 15", False),
    ("film_views", "How many times has Golden Harbor been watched?",
     "SELECT COUNT(*) FROM viewings JOIN films ON viewings.film_id = films.film_id WHERE films.title = 'Golden Harbor'", False),
    ("french_film_views", "How many viewings were of films in French?",
     "SELECT COUNT(*) FROM viewings JOIN films ON viewings.film_id = films.film_id WHERE films.language = 'French'", False),
    ("jp_member_views", "How many viewings came from members in JP?",
     "SELECT COUNT(*) FROM viewings JOIN members ON viewings.member_id = members.member_id WHERE members.country = 'JP'", False),
    ("reviews", "How many reviews have members written?", "SELECT COUNT(*) FROM reviews", False),
    ("five_star", "How many reviews gave five stars (stars = 5)?",
     "SELECT COUNT(*) FROM reviews WHERE stars = 5", False),
    ("avg_stars", "What is the average star rating over all reviews?",
     "SELECT AVG(stars) FROM reviews", False),
    ("film_avg_stars", "What is the average number of stars Lost Island got?",
     "SELECT AVG(reviews.stars) FROM reviews JOIN films ON reviews.film_id = films.film_id WHERE films.title = 'Lost Island'", False),
    ("r_film_reviews", "How many reviews are there of R-rated films?",
     "SELECT COUNT(*) FROM reviews JOIN films ON reviews.film_id = films.film_id WHERE films.age_rating = 'R'", False),
    ("popular_languages", "Which languages have more than 150 films?",
     "SELECT language FROM films GROUP BY language HAVING COUNT(*) > 150", False),
    ("above_avg_runtime", "How many films are longer than the average film?",
     "SELECT COUNT(*) FROM films WHERE runtime_min > (SELECT AVG(runtime_min) FROM films)", False),
    ("studio_of_film", "Which studio made film 77? Give its name.",
     "SELECT studios.name FROM films JOIN studios ON films.studio_id = studios.studio_id WHERE films.film_id = 77", False),
    ("busy_studios", "Which studios have made more than 40 films? Give their names.",
     "SELECT studios.name FROM films JOIN studios ON films.studio_id = studios.studio_id GROUP BY studios.name HAVING COUNT(*) > 40", False),
    ("plan_screens", "How many screens does the Basic plan allow?",
     "SELECT max_screens FROM plans WHERE name = 'Basic'", False),
    ("fee_revenue", "How much do the active members pay per month in total?",
     "SELECT SUM(plans.monthly_fee) FROM members JOIN plans ON members.plan_id = plans.plan_id WHERE members.active = TRUE", False),
]


def main():
    rng = random.Random(11)
    db = sqlite3.connect(":memory:")
    db.executescript(DDL)
    studio_names = [f"{a} {b}" for a in STUDIO_A for b in STUDIO_B]
    rng.shuffle(studio_names)
    studio_names = studio_names[:30]
    for i, name in enumerate(studio_names, 1):
        db.execute("INSERT INTO studios VALUES (?, ?, ?, ?)",
                   (i, name, rng.choice(COUNTRIES), rng.randint(1910, 2015)))
    people = [f"{f} {l}" for f in FIRST for l in LAST]
    rng.shuffle(people)
    for i, name in enumerate(people[:160], 1):
        country = rng.choice(COUNTRIES)
        db.execute("INSERT INTO directors VALUES (?, ?, ?, ?)",
                   (i, name, rng.randint(1935, 1995), NATIONALITY[country]))
    for name in ("Maya Tanaka", "Jonas Weber"):
        if name not in people[:160]:
            db.execute("UPDATE directors SET full_name = ? WHERE director_id = ?",
                       (name, 1 if name == "Maya Tanaka" else 2))
    titles = [f"{a} {n}" for a in ADJ for n in NOUN]
    rng.shuffle(titles)
    for i in range(1, 1201):
        # Titles repeat past 400 films as "… II" and "… III" sequels.
        base = titles[(i - 1) % 400]
        title = base + ["", " II", " III"][(i - 1) // 400]
        date = f"{rng.randint(1975, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        budget = None if rng.random() < 0.12 else round(rng.uniform(0.5, 250.0), 1)
        db.execute("INSERT INTO films VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (i, title, rng.randint(1, 30), rng.randint(1, 160), date,
                    rng.randint(72, 195), budget, rng.choice(RATINGS), rng.choice(LANGUAGES)))
    for i, (name, fee, screens) in enumerate(
            [("Basic", 7.99, 1), ("Standard", 12.99, 2), ("Premium", 17.99, 4),
             ("Family", 21.99, 6)], 1):
        db.execute("INSERT INTO plans VALUES (?, ?, ?, ?)", (i, name, fee, screens))
    for i in range(1, 901):
        f, l = rng.choice(FIRST).lower(), rng.choice(LAST).lower()
        user = f"{f}_{l}{i}"
        if i == 7:
            user = "kira_sato7"
        date = f"{rng.randint(2018, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        db.execute("INSERT INTO members VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (i, user, f"{user}@mail.example", rng.choice(COUNTRIES), rng.randint(1, 4),
                    date, rng.random() < 0.75))
    for i in range(1, 5001):
        date = f"{rng.randint(2022, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        db.execute("INSERT INTO viewings VALUES (?, ?, ?, ?, ?, ?)",
                   (i, rng.randint(1, 900), rng.randint(1, 1200), date, rng.randint(1, 195),
                    rng.choice(DEVICES)))
    for i in range(1, 1501):
        date = f"{rng.randint(2022, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        db.execute("INSERT INTO reviews VALUES (?, ?, ?, ?, ?)",
                   (i, rng.randint(1, 900), rng.randint(1, 1200), rng.randint(1, 5), date))
    db.commit()
    dump = "PRAGMA foreign_keys=OFF;\n" + "\n".join(db.iterdump()) + "\n"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "films.sql").write_text(dump)
    lines, expected = [], {}
    for intent, question, gold, ordered in QUESTIONS:
        tid = f"films-h-{intent}"
        rows = [[render(v) for v in row] for row in db.execute(gold)]
        assert rows and rows != [["0"]] and rows != [["NULL"]], (tid, rows)
        expected[tid] = rows
        lines.append(json.dumps({"id": tid, "database": "films", "question": question,
                                 "gold_sql": gold, "ordered": ordered, "split": "test",
                                 "intent": f"hand-{intent}"}))
    (OUT / "films_questions.jsonl").write_text("\n".join(lines) + "\n")
    (OUT / "films_questions_expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"{len(lines)} questions, {sum(1 for _ in db.iterdump())} dump lines")


if __name__ == "__main__":
    main()

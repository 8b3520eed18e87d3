#!/usr/bin/env python3
"""Writes the real-size SQLite test database and its tasks (envs/sql-agent/tests/data/).

A music store in nine tables and about 7,000 rows, created with the DDL people have in SQLite
(REAL, DOUBLE, NUMERIC(10,2), VARCHAR(n), INTEGER PRIMARY KEY AUTOINCREMENT, REFERENCES,
FOREIGN KEY, CHECK, BOOLEAN stored as 0/1, DATETIME as text, an index) and dumped by SQLite
itself the way its shell's `.dump` does. The tasks' gold queries run in SQLite here and their
rows are written next to them, so the tests can check that the env's engine gives the same
rows. Deterministic: rerunning it rewrites the same files.
"""
import json
import random
import sqlite3
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "envs" / "sql-agent" / "tests" / "data"

DDL = """
CREATE TABLE albums (album_id INTEGER PRIMARY KEY, title NVARCHAR(160) NOT NULL,
  artist_id INTEGER NOT NULL REFERENCES artists(artist_id), released DATE);
CREATE TABLE artists (artist_id INTEGER PRIMARY KEY AUTOINCREMENT, name VARCHAR(120) NOT NULL,
  country CHAR(2));
CREATE TABLE genres (genre_id INTEGER PRIMARY KEY, name VARCHAR(40) COLLATE NOCASE);
CREATE TABLE tracks (track_id INTEGER PRIMARY KEY, name VARCHAR(200) NOT NULL, album_id INTEGER,
  genre_id INTEGER, milliseconds INTEGER NOT NULL CHECK (milliseconds > 0), bytes BIGINT,
  unit_price NUMERIC(10,2) NOT NULL DEFAULT 0.99, rating REAL,
  FOREIGN KEY (album_id) REFERENCES albums (album_id),
  FOREIGN KEY (genre_id) REFERENCES genres (genre_id));
CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, first_name TEXT NOT NULL,
  last_name TEXT NOT NULL, email VARCHAR(60) UNIQUE, city TEXT, country CHAR(2),
  support_rep_id INT);
CREATE TABLE employees (employee_id INTEGER PRIMARY KEY, name TEXT, title VARCHAR(30),
  reports_to INTEGER, hired DATETIME, salary DOUBLE);
CREATE TABLE invoices (invoice_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL,
  invoice_date DATETIME NOT NULL, total DECIMAL(10,2) NOT NULL, paid BOOLEAN);
CREATE TABLE invoice_items (invoice_id INTEGER NOT NULL, line INTEGER NOT NULL,
  track_id INTEGER NOT NULL, unit_price NUMERIC(10,2), quantity INTEGER,
  PRIMARY KEY (invoice_id, line));
CREATE TABLE playlists (playlist_id INTEGER PRIMARY KEY, name TEXT, weight DOUBLE PRECISION,
  score FLOAT);
CREATE INDEX idx_tracks_album ON tracks (album_id);
"""

TASKS = [
    ("tracks_count", "How many tracks are there?", "SELECT COUNT(*) FROM tracks", False),
    ("genre_tracks", "How many tracks does each genre have?",
     "SELECT g.name, COUNT(*) FROM tracks t JOIN genres g ON t.genre_id = g.genre_id GROUP BY g.name", False),
    ("avg_rating", "What is the average rating of the Jazz tracks?",
     "SELECT AVG(t.rating) FROM tracks t JOIN genres g ON t.genre_id = g.genre_id WHERE g.name = 'Jazz'", False),
    ("unpaid_total", "What is the total of the unpaid invoices?",
     "SELECT SUM(total) FROM invoices WHERE paid = FALSE", False),
    ("top_customers", "Which 5 customers spent the most (last name and total), highest first?",
     "SELECT c.last_name, SUM(i.total) AS spent FROM customers c JOIN invoices i ON c.customer_id = i.customer_id GROUP BY c.customer_id, c.last_name ORDER BY spent DESC, c.last_name LIMIT 5", True),
    ("unrated", "How many tracks have no rating?", "SELECT COUNT(*) FROM tracks WHERE rating IS NULL", False),
    ("may_invoices", "How many invoices were issued in May 2023?",
     "SELECT COUNT(*) FROM invoices WHERE invoice_date LIKE '2023-05%'", False),
    ("country_artists", "How many artists come from each country?",
     "SELECT country, COUNT(*) FROM artists GROUP BY country", False),
    ("old_albums", "How many albums were released before 1980?",
     "SELECT COUNT(*) FROM albums WHERE released < '1980-01-01'", False),
    ("manager_salary", "What is the highest salary of an employee?", "SELECT MAX(salary) FROM employees", False),
    ("items_revenue", "What is the revenue of all invoice items (price times quantity)?",
     "SELECT SUM(unit_price * quantity) FROM invoice_items", False),
    ("artist_albums", "Which artists have more than 3 albums?",
     "SELECT a.name FROM artists a JOIN albums b ON a.artist_id = b.artist_id GROUP BY a.artist_id, a.name HAVING COUNT(*) > 3", False),
]


def render(value):
    """A value as the env renders it: NULL, integers without a point, floats to 6 decimals."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        r = round(value * 1e6) / 1e6
        return str(int(r)) if r == int(r) and abs(r) < 1e15 else repr(r)
    return str(value)


def main():
    rng = random.Random(7)
    db = sqlite3.connect(":memory:")
    db.executescript(DDL)
    countries = ["US", "DE", "FR", "BR", "JP", "IN", "GB", "CA"]
    genres = ["Rock", "Jazz", "Metal", "Pop", "Blues", "Latin", "Classical", "Soundtrack"]
    for i in range(1, 201):
        db.execute("INSERT INTO artists (name, country) VALUES (?, ?)", (f"Artist {i}", rng.choice(countries)))
    for i in range(1, 401):
        date = f"{rng.randint(1970, 2023)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        db.execute("INSERT INTO albums VALUES (?, ?, ?, ?)", (i, f"Album {i}", rng.randint(1, 200), date))
    for i, g in enumerate(genres, 1):
        db.execute("INSERT INTO genres VALUES (?, ?)", (i, g))
    for i in range(1, 3001):
        rating = None if rng.random() < 0.1 else round(rng.random() * 5, 1)
        db.execute("INSERT INTO tracks VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (i, f"Track {i}" + (" (Live at Joe's)" if i % 50 == 0 else ""), rng.randint(1, 400),
                    rng.randint(1, 8), rng.randint(60000, 600000), rng.randint(10**6, 10**7),
                    rng.choice([0.99, 1.99]), rating))
    for i in range(1, 601):
        db.execute("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (i, f"First{i}", f"Last{i}", f"c{i}@example.com", f"City{rng.randint(1, 50)}",
                    rng.choice(countries), rng.randint(1, 8)))
    for i in range(1, 9):
        db.execute("INSERT INTO employees VALUES (?, ?, ?, ?, ?, ?)",
                   (i, f"Emp {i}", "Sales Agent" if i > 2 else "Manager", None if i == 1 else 1,
                    f"2015-0{i}-01 09:00:00", 50000.0 + i * 1250.5))
    for i in range(1, 1201):
        date = f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} 00:00:00"
        db.execute("INSERT INTO invoices VALUES (?, ?, ?, ?, ?)",
                   (i, rng.randint(1, 600), date, round(rng.random() * 20, 2), rng.random() < 0.8))
    for i in range(1, 2001):
        db.execute("INSERT INTO invoice_items VALUES (?, ?, ?, ?, ?)",
                   ((i - 1) // 2 + 1, (i - 1) % 2 + 1, rng.randint(1, 3000), 0.99, rng.randint(1, 3)))
    for i in range(1, 21):
        db.execute("INSERT INTO playlists VALUES (?, ?, ?, ?)", (i, f"List {i}", rng.random(), rng.random()))
    db.commit()
    dump = "PRAGMA foreign_keys=OFF;\n" + "\n".join(db.iterdump()) + "\n"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "music.sql").write_text(dump)
    tasks, expected = [], {}
    for n, (intent, question, gold, ordered) in enumerate(TASKS):
        task_id = f"music-{intent}"
        tasks.append({"id": task_id, "database": "music", "question": question, "gold_sql": gold,
                      "ordered": ordered, "split": "test" if n % 3 == 2 else "train", "intent": intent})
        expected[task_id] = [[render(v) for v in row] for row in db.execute(gold).fetchall()]
    (OUT / "music_tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (OUT / "music_expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    rows = sum(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for (t,) in
               db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
    print(f"{rows} rows, {len(dump)} bytes, {len(tasks)} tasks")


if __name__ == "__main__":
    main()

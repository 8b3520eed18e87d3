#!/usr/bin/env python3
"""Writes the rows SQLite gives for each hand-written question about the music fixture.

`envs/sql-agent/tests/data/music_questions.jsonl` holds questions written by hand (not by the
task generator or the curriculum) over `music.sql`, all in the test split: the held-out set
the README's "your own database" figures are measured on. Nothing trains on them. This script
runs each gold query in SQLite and writes `music_questions_expected.json`, so a test can check
that the env's engine gives SQLite's rows. Deterministic.
"""
import json
import sqlite3
from pathlib import Path

from make_music_db import OUT, render


def main():
    db = sqlite3.connect(":memory:")
    db.executescript((OUT / "music.sql").read_text())
    expected = {}
    for line in (OUT / "music_questions.jsonl").read_text().splitlines():
        task = json.loads(line)
        expected[task["id"]] = [[render(v) for v in row] for row in db.execute(task["gold_sql"])]
    (OUT / "music_questions_expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"{len(expected)} questions")


if __name__ == "__main__":
    main()

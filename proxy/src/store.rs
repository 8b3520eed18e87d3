//! The trace store: every recorded call and every rollout's reward, in SQLite (WAL).
//!
//! Each record is its own committed statement on one shared write connection; the proxy
//! answers a call only once its record is committed, so a crash of the harness, or a kill of
//! the proxy after the answer, loses nothing that was answered. (A writer thread with group
//! commit measured slower here: two thread hand-offs per call cost more than the commits
//! they batched.) Commits are
//! handed to the operating system without `fsync` (`synchronous = OFF`): they survive any
//! crash of the process, not a power cut; a sync per commit (or per WAL checkpoint) cost more
//! than a millisecond at the 99th percentile on the development machine.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::{ProxyError, Result};

/// One recorded model call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The rollout it belongs to.
    pub rollout: String,
    /// Its order within the rollout (arrival order, from 0).
    pub seq: i64,
    /// Unix time of arrival, microseconds.
    pub at_us: i64,
    /// Path called upstream.
    pub path: String,
    /// HTTP status the upstream answered (0 when it could not be reached).
    pub status: u16,
    /// The request body as sent.
    pub request: String,
    /// The response body as received.
    pub response: String,
    /// The prompt's token ids, when the upstream reported them.
    pub prompt_ids: Option<Vec<u32>>,
    /// The sampled token ids, when reported.
    pub completion_ids: Option<Vec<u32>>,
    /// The sampled tokens' log-probs, when reported.
    pub logprobs: Option<Vec<f32>>,
    /// Time spent waiting for the upstream, microseconds.
    pub upstream_us: i64,
    /// Time from arrival to the answer being ready, microseconds (recording excluded).
    pub total_us: i64,
}

impl CallRecord {
    /// Microseconds the proxy added to the call (total minus upstream).
    pub fn added_us(&self) -> i64 {
        (self.total_us - self.upstream_us).max(0)
    }
}

/// A rollout's reward as posted at its end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RewardRecord {
    /// The rollout.
    pub rollout: String,
    /// The reward.
    pub reward: f64,
    /// Free-form details (e.g. `success`).
    pub info: serde_json::Value,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = OFF;
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    rollout TEXT NOT NULL,
    seq INTEGER NOT NULL,
    at_us INTEGER NOT NULL,
    path TEXT NOT NULL,
    status INTEGER NOT NULL,
    request TEXT NOT NULL,
    response TEXT NOT NULL,
    prompt_ids TEXT,
    completion_ids TEXT,
    logprobs TEXT,
    upstream_us INTEGER NOT NULL,
    total_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_rollout ON calls (rollout, seq);
CREATE TABLE IF NOT EXISTS rewards (
    rollout TEXT PRIMARY KEY,
    reward REAL NOT NULL,
    info TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS trained (
    rollout TEXT PRIMARY KEY,
    version TEXT NOT NULL
);
";

fn store_error(path: &Path) -> impl Fn(rusqlite::Error) -> ProxyError + '_ {
    move |e| ProxyError::Store {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

/// How long a write waits for another connection's lock by default.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn open(path: &Path, busy: std::time::Duration) -> Result<Connection> {
    let conn = Connection::open(path).map_err(store_error(path))?;
    conn.busy_timeout(busy).map_err(store_error(path))?;
    conn.execute_batch(SCHEMA).map_err(store_error(path))?;
    Ok(conn)
}

/// The write side of the store, shared by the proxy's request threads.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    conn: Mutex<Connection>,
}

fn json_ids<T: Serialize>(v: &Option<Vec<T>>) -> Option<String> {
    v.as_ref()
        .map(|v| serde_json::to_string(v).expect("numbers serialise"))
}

impl TraceWriter {
    /// Opens (creating if needed) the database at `path`; a write waits up to 10 s for a lock
    /// another connection holds.
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_waiting(path, BUSY_TIMEOUT)
    }

    /// [`TraceWriter::open`] whose writes wait up to `busy` for another connection's lock.
    pub fn open_waiting(path: &Path, busy: std::time::Duration) -> Result<Self> {
        Ok(Self {
            path: path.to_owned(),
            conn: Mutex::new(open(path, busy)?),
        })
    }

    fn write(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<usize>) -> Result<()> {
        // A panic elsewhere cannot leave a half-written row: each write is one statement.
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&conn).map(drop).map_err(store_error(&self.path))
    }

    /// Records a call; returns once it is committed.
    pub fn record(&self, c: CallRecord) -> Result<()> {
        self.write(|conn| {
            conn.prepare_cached(
                "INSERT INTO calls (rollout, seq, at_us, path, status, request, response, \
                 prompt_ids, completion_ids, logprobs, upstream_us, total_us) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )?
            .execute(params![
                c.rollout,
                c.seq,
                c.at_us,
                c.path,
                c.status,
                c.request,
                c.response,
                json_ids(&c.prompt_ids),
                json_ids(&c.completion_ids),
                json_ids(&c.logprobs),
                c.upstream_us,
                c.total_us
            ])
        })
    }

    /// Records (or replaces) a rollout's reward; returns once it is committed. A rollout
    /// with no recorded call is [`ProxyError::UnknownRollout`]; one a learner has trained on
    /// is [`ProxyError::AlreadyTrained`] (its reward is part of a published update).
    pub fn reward(&self, r: RewardRecord) -> Result<()> {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let fail = store_error(&self.path);
        let trained: Option<String> = conn
            .prepare_cached("SELECT version FROM trained WHERE rollout = ?1")
            .and_then(|mut s| s.query_row([&r.rollout], |row| row.get(0)).optional())
            .map_err(&fail)?;
        if let Some(version) = trained {
            return Err(ProxyError::AlreadyTrained {
                rollout: r.rollout,
                version,
            });
        }
        let known = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM calls WHERE rollout = ?1)")
            .and_then(|mut s| s.query_row([&r.rollout], |row| row.get::<_, bool>(0)))
            .map_err(&fail)?;
        if !known {
            return Err(ProxyError::UnknownRollout(r.rollout));
        }
        conn.prepare_cached(
            "INSERT INTO rewards (rollout, reward, info) VALUES (?1, ?2, ?3) \
             ON CONFLICT (rollout) DO UPDATE SET reward = excluded.reward, info = excluded.info",
        )
        .and_then(|mut s| s.execute(params![r.rollout, r.reward, r.info.to_string()]))
        .map(drop)
        .map_err(fail)
    }

    /// Marks `rollouts` as trained on by policy `version` (in one transaction; a rollout
    /// already marked keeps its first version): their rewards can no longer change, and
    /// [`TraceStore::untrained`] no longer lists them.
    pub fn mark_trained(&self, rollouts: &[String], version: &str) -> Result<()> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let fail = store_error(&self.path);
        let tx = conn.transaction().map_err(&fail)?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT OR IGNORE INTO trained (rollout, version) VALUES (?1, ?2)")
                .map_err(&fail)?;
            for rollout in rollouts {
                stmt.execute(params![rollout, version]).map_err(&fail)?;
            }
        }
        tx.commit().map_err(fail)
    }
}

/// A rewarded rollout and the policy version that answered its first call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VersionOutcome {
    /// The reward's position in arrival order (increasing; later rewards are larger).
    pub order: i64,
    /// The rollout.
    pub rollout: String,
    /// The `policy_version` its first answer named (`None` when the upstream names none).
    pub version: Option<String>,
    /// Its reward.
    pub reward: f64,
}

/// The read side of the store.
#[derive(Debug)]
pub struct TraceStore {
    path: PathBuf,
    conn: Connection,
}

fn parse_ids<T: serde::de::DeserializeOwned>(text: Option<String>) -> Option<Vec<T>> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

impl TraceStore {
    /// Opens the database at `path` for reading (it may be written concurrently).
    pub fn open(path: &Path) -> Result<Self> {
        Ok(Self {
            path: path.to_owned(),
            conn: open(path, BUSY_TIMEOUT)?,
        })
    }

    /// Number of recorded calls.
    pub fn count(&self) -> Result<usize> {
        self.conn
            .query_row("SELECT COUNT(*) FROM calls", [], |r| r.get::<_, i64>(0))
            .map(|n| n as usize)
            .map_err(store_error(&self.path))
    }

    /// The rollouts with calls, in order of first call.
    pub fn rollouts(&self) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare("SELECT rollout FROM calls GROUP BY rollout ORDER BY MIN(id)")
            .map_err(store_error(&self.path))?;
        stmt.query_map([], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(store_error(&self.path))
    }

    /// The calls of `rollout`, in order.
    pub fn calls(&self, rollout: &str) -> Result<Vec<CallRecord>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT rollout, seq, at_us, path, status, request, response, prompt_ids, \
                 completion_ids, logprobs, upstream_us, total_us \
                 FROM calls WHERE rollout = ?1 ORDER BY seq, id",
            )
            .map_err(store_error(&self.path))?;
        stmt.query_map([rollout], |r| {
            Ok(CallRecord {
                rollout: r.get(0)?,
                seq: r.get(1)?,
                at_us: r.get(2)?,
                path: r.get(3)?,
                status: r.get(4)?,
                request: r.get(5)?,
                response: r.get(6)?,
                prompt_ids: parse_ids(r.get(7)?),
                completion_ids: parse_ids(r.get(8)?),
                logprobs: parse_ids(r.get(9)?),
                upstream_us: r.get(10)?,
                total_us: r.get(11)?,
            })
        })
        .and_then(Iterator::collect)
        .map_err(store_error(&self.path))
    }

    /// The reward posted for `rollout`, if any.
    pub fn reward(&self, rollout: &str) -> Result<Option<RewardRecord>> {
        self.conn
            .query_row(
                "SELECT reward, info FROM rewards WHERE rollout = ?1",
                [rollout],
                |r| {
                    Ok(RewardRecord {
                        rollout: rollout.to_owned(),
                        reward: r.get(0)?,
                        info: serde_json::from_str(&r.get::<_, String>(1)?)
                            .unwrap_or(serde_json::Value::Null),
                    })
                },
            )
            .optional()
            .map_err(store_error(&self.path))
    }

    /// Up to `limit` rewarded rollouts no learner has trained on yet, in the order their
    /// rewards arrived.
    pub fn untrained(&self, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT rollout FROM rewards WHERE rollout NOT IN (SELECT rollout FROM trained) \
                 ORDER BY rowid LIMIT ?1",
            )
            .map_err(store_error(&self.path))?;
        stmt.query_map([limit.min(i64::MAX as usize) as i64], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(store_error(&self.path))
    }

    /// The position of the last reward to arrive (see [`VersionOutcome::order`]; 0 with none).
    pub fn last_reward_order(&self) -> Result<i64> {
        self.conn
            .query_row("SELECT COALESCE(MAX(rowid), 0) FROM rewards", [], |r| {
                r.get(0)
            })
            .map_err(store_error(&self.path))
    }

    /// The version that trained on `rollout`, if one has.
    pub fn trained_by(&self, rollout: &str) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT version FROM trained WHERE rollout = ?1",
                [rollout],
                |r| r.get(0),
            )
            .optional()
            .map_err(store_error(&self.path))
    }

    /// Every reward that arrived after position `after` (see [`VersionOutcome::order`]),
    /// with the policy version that answered its rollout's first call, in arrival order.
    pub fn outcomes_since(&self, after: i64) -> Result<Vec<VersionOutcome>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT r.rowid, r.rollout, r.reward, \
                 (SELECT json_extract(c.response, '$.policy_version') FROM calls c \
                  WHERE c.rollout = r.rollout AND json_valid(c.response) ORDER BY c.id LIMIT 1) \
                 FROM rewards r WHERE r.rowid > ?1 ORDER BY r.rowid",
            )
            .map_err(store_error(&self.path))?;
        stmt.query_map([after], |r| {
            Ok(VersionOutcome {
                order: r.get(0)?,
                rollout: r.get(1)?,
                reward: r.get(2)?,
                version: r.get::<_, Option<String>>(3).ok().flatten(),
            })
        })
        .and_then(Iterator::collect)
        .map_err(store_error(&self.path))
    }

    /// Added latency (total minus upstream, at least 0) of every call, microseconds, sorted
    /// ascending (ready for percentiles).
    pub fn added_latencies_us(&self) -> Result<Vec<u64>> {
        let mut stmt = self
            .conn
            .prepare("SELECT MAX(total_us - upstream_us, 0) FROM calls ORDER BY 1")
            .map_err(store_error(&self.path))?;
        stmt.query_map([], |r| r.get(0))
            .and_then(Iterator::collect)
            .map_err(store_error(&self.path))
    }
}

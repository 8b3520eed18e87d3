//! Continuous batching for the policy server: requests wait in one queue, and a few
//! generating threads each decode a running batch of one policy version, admitting the
//! version's new requests between decode steps ([`Decoder`]).
//!
//! A thread that is idle takes the oldest request whose version no thread is decoding with
//! room to spare, waits the batch window for more of that version, and decodes. While it
//! runs, every step admits that version's waiting requests up to the batch size, so a short
//! request joins a long batch at its next step instead of waiting for it to end (in the
//! express lane beside it, [`crate::express`], when its budget is short and the batch's
//! long). A request of another version (a canary, a shadow) goes to an idle thread; when
//! none is idle, the running batches stop admitting until one drains, so no version waits
//! behind another forever.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crossbeam_channel::Sender;
use sandgym_policy::{Cpu, Decoder, PolicyError, RowRequest, Sampled, SeqCache, ToolCallGrammar};

use crate::deploy::Versioned;
use crate::express::{Express, Lanes, Stepped};
use crate::http::{Gone, HttpError};

/// One request to generate.
pub(crate) struct Job {
    /// The version that generates it.
    pub policy: Arc<Versioned>,
    pub prompt: Vec<u32>,
    pub grammar: Arc<ToolCallGrammar>,
    pub temperature: f32,
    pub max_tokens: usize,
    pub seed: u64,
    /// Set when the client has gone: its row stops being generated.
    pub gone: Gone,
    pub reply: Sender<Result<Sampled, HttpError>>,
}

/// The batch key of a version: the address of its shared weights.
fn version_of(job: &Job) -> usize {
    Arc::as_ptr(&job.policy) as usize
}

/// What the queue's lock guards.
#[derive(Default)]
struct Waiting {
    jobs: VecDeque<Job>,
    /// Per version: the threads decoding it that have room for more rows.
    open: HashMap<usize, usize>,
    /// Threads waiting for a first request.
    idle: usize,
    closed: bool,
}

impl Waiting {
    fn is_open(&self, version: usize) -> bool {
        self.open.get(&version).is_some_and(|&n| n > 0)
    }
}

/// The requests waiting to be generated, shared by the server and its generating threads.
#[derive(Default)]
pub(crate) struct JobQueue {
    waiting: Mutex<Waiting>,
    changed: Condvar,
}

/// A generating thread's hold on one version: whether it has told the queue it takes more
/// of that version's requests.
struct Lane {
    version: usize,
    open: bool,
}

impl JobQueue {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `job`; gives it back once the queue is closed.
    pub fn push(&self, job: Job) -> Result<(), Job> {
        let mut w = self.lock();
        if w.closed {
            return Err(job);
        }
        w.jobs.push_back(job);
        drop(w);
        self.changed.notify_all();
        Ok(())
    }

    /// Closes the queue: the generating threads end once their batches do, and what is
    /// still waiting is dropped (its clients are told the server is shutting down).
    pub fn close(&self) {
        let mut w = self.lock();
        w.closed = true;
        w.jobs.clear();
        drop(w);
        self.changed.notify_all();
    }

    /// Blocks until a request that no running batch takes is waiting, and opens a lane for
    /// its version; `None` once the queue is closed.
    fn first(&self) -> Option<(Job, Lane)> {
        let mut w = self.lock();
        w.idle += 1;
        loop {
            if w.closed {
                w.idle -= 1;
                return None;
            }
            let free = w.jobs.iter().position(|j| !w.is_open(version_of(j)));
            if let Some(job) = free.and_then(|i| w.jobs.remove(i)) {
                w.idle -= 1;
                let version = version_of(&job);
                *w.open.entry(version).or_default() += 1;
                return Some((
                    job,
                    Lane {
                        version,
                        open: true,
                    },
                ));
            }
            w = self
                .changed
                .wait(w)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Up to `room` waiting requests of `lane`'s version, oldest first, waiting for them
    /// until `until` when given. The lane stays open while it has room left. Nothing is taken
    /// while an older request of a version no one decodes waits and no thread is idle to take
    /// it: this batch drains first.
    fn more(&self, lane: &mut Lane, room: usize, until: Option<Instant>) -> Vec<Job> {
        let mut taken = Vec::new();
        let mut w = self.lock();
        loop {
            while taken.len() < room {
                let head = w.jobs.front().map(version_of);
                let starved = head.is_some_and(|v| v != lane.version && !w.is_open(v));
                if starved && w.idle == 0 {
                    break;
                }
                let mine = w.jobs.iter().position(|j| version_of(j) == lane.version);
                match mine.and_then(|i| w.jobs.remove(i)) {
                    Some(job) => taken.push(job),
                    None => break,
                }
            }
            let left = until.map(|t| t.saturating_duration_since(Instant::now()));
            match left {
                Some(left) if taken.len() < room && !left.is_zero() && !w.closed => {
                    w = self
                        .changed
                        .wait_timeout(w, left)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
                _ => break,
            }
        }
        let open = taken.len() < room;
        if open != lane.open {
            Self::set_open(&mut w, lane, open);
            drop(w);
            self.changed.notify_all();
        }
        taken
    }

    /// Closes `lane`: its thread takes no more of its version.
    fn leave(&self, lane: &mut Lane) {
        let mut w = self.lock();
        Self::set_open(&mut w, lane, false);
        drop(w);
        self.changed.notify_all();
    }

    fn set_open(w: &mut Waiting, lane: &mut Lane, open: bool) {
        if open == lane.open {
            return;
        }
        lane.open = open;
        let n = w.open.entry(lane.version).or_default();
        if open {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
            if *n == 0 {
                w.open.remove(&lane.version);
            }
        }
    }
}

/// How a generating thread batches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batching {
    /// Most rows decoded together.
    pub max_batch: usize,
    /// How long an idle thread's first request waits for others of its version.
    pub window: std::time::Duration,
    /// The end-of-turn token.
    pub end: u32,
    /// Which requests run in the express lane beside a long batch.
    pub express: Express,
}

/// What the generating threads count, for the server's reports.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// The most rows decoded together.
    pub largest: AtomicUsize,
    /// Steps of the express lane alone (the long batch waiting).
    pub express_steps: AtomicU64,
}

/// One generating thread: batches of the queue's requests until it is closed.
pub(crate) fn generate_loop(queue: &JobQueue, batching: Batching, counters: &Counters) {
    while let Some((first, mut lane)) = queue.first() {
        let policy = first.policy.clone();
        decode(queue, &mut lane, &policy, first, batching, counters);
        queue.leave(&mut lane);
    }
}

/// Decodes `first` and the requests of its version that arrive while it runs, until none is
/// left running or waiting; short requests that arrive beside long ones take the express
/// lane ([`Lanes`]).
fn decode(
    queue: &JobQueue,
    lane: &mut Lane,
    policy: &Versioned,
    first: Job,
    batching: Batching,
    counters: &Counters,
) {
    let max_batch = batching.max_batch.max(1);
    let keep = policy.prefix().is_enabled();
    let decoder = || {
        let mut d = Decoder::new(&policy.model, batching.end, &Default::default());
        d.keep_caches(keep);
        d
    };
    let mut decoder = Lanes::new(decoder(), decoder(), batching.express);
    let mut running: HashMap<usize, Job> = HashMap::new();
    let mut next_id = 0;
    let mut arriving = vec![first];
    let deadline = Instant::now() + batching.window;
    arriving.extend(queue.more(lane, max_batch - 1, Some(deadline)));
    loop {
        let requests = rows_of(arriving, &mut running, &mut next_id);
        let (continuing, fresh) = with_bases(policy, requests);
        let admitted = guarded(&mut running, || {
            decoder.admit(fresh);
            decoder.admit_continuing(continuing);
            counters
                .largest
                .fetch_max(decoder.running(), Ordering::Relaxed);
        });
        if !admitted {
            return;
        }
        // Requests that arrived while those were encoded join before the next step (a short
        // one that came during a long batch's encoding decodes in the express lane at once).
        arriving = queue.more(lane, max_batch.saturating_sub(decoder.running()), None);
        if !arriving.is_empty() {
            continue;
        }
        let stop = |id: usize| running.get(&id).is_none_or(|j| j.gone.is_set());
        let stepped =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decoder.step(&stop)));
        match stepped {
            Ok(Stepped::ExpressOnly) => {
                counters.express_steps.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Stepped::All) => {}
            Err(_) => {
                fail_all(&mut running);
                return;
            }
        }
        let kept = decoder.take_caches();
        if !kept.is_empty() {
            let mut prefix = policy.prefix();
            for (id, seq) in kept {
                if let Some(job) = running.get(&id) {
                    prefix.insert(seq, job.prompt.len());
                }
            }
        }
        for done in decoder.done() {
            if let Some(job) = running.remove(&done.id) {
                let _ = job.reply.send(done.result.map_err(http_error));
            }
        }
        let room = max_batch.saturating_sub(decoder.running());
        arriving = queue.more(lane, room, None);
        if arriving.is_empty() && decoder.is_idle() {
            return;
        }
    }
}

/// Runs `f`; a failure inside it (a panic in generation) answers every running request with
/// a 500 and leaves the server up. Whether `f` returned.
fn guarded(running: &mut HashMap<usize, Job>, f: impl FnOnce()) -> bool {
    let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_ok();
    if !ok {
        fail_all(running);
    }
    ok
}

/// Answers every running request with a 500: generation panicked.
fn fail_all(running: &mut HashMap<usize, Job>) {
    for (_, job) in running.drain() {
        let _ = job
            .reply
            .send(Err(HttpError::new(500, "generation failed: it panicked")));
    }
}

/// `requests` split into those whose prompts continue a finished generation of `policy`
/// (each with the cache of what they share) and the others.
fn with_bases(
    policy: &Versioned,
    requests: Vec<RowRequest>,
) -> (Vec<(RowRequest, SeqCache<Cpu>)>, Vec<RowRequest>) {
    let mut prefix = policy.prefix();
    if !prefix.is_enabled() {
        return (Vec::new(), requests);
    }
    let (mut continuing, mut fresh) = (Vec::new(), Vec::new());
    for request in requests {
        match prefix.lookup(&request.prompt) {
            Some(base) => continuing.push((request, base)),
            None => fresh.push(request),
        }
    }
    (continuing, fresh)
}

/// The decoder's rows for `jobs`, each with a fresh matcher of its grammar; a job whose client
/// has gone is dropped, and one whose grammar cannot start is answered with a 400.
fn rows_of(
    jobs: Vec<Job>,
    running: &mut HashMap<usize, Job>,
    next_id: &mut usize,
) -> Vec<RowRequest> {
    let mut rows = Vec::with_capacity(jobs.len());
    for job in jobs {
        if job.gone.is_set() {
            continue;
        }
        let matcher = match job.grammar.matcher() {
            Ok(m) => m,
            Err(e) => {
                let _ = job.reply.send(Err(HttpError::bad_request(format!(
                    "the tool schema cannot be decoded: {e}"
                ))));
                continue;
            }
        };
        let id = *next_id;
        *next_id += 1;
        rows.push(RowRequest {
            id,
            prompt: job.prompt.clone(),
            constraint: Some(matcher),
            temperature: job.temperature,
            top_p: 1.0,
            max_new_tokens: job.max_tokens,
            seed: job.seed,
        });
        running.insert(id, job);
    }
    rows
}

/// A row's failure as the client sees it: its tool schema at fault (a 400) or the server
/// (a 500).
fn http_error(e: PolicyError) -> HttpError {
    match e {
        PolicyError::Constraint(_) | PolicyError::Disallowed { .. } => {
            // The matcher's explanation runs on with its whole state; its first line says it.
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            HttpError::bad_request(format!("the tool schema cannot be decoded: {first}"))
        }
        other => HttpError::new(500, format!("generation failed: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandgym_policy::ActionLimits;

    fn version(name: &str) -> Arc<Versioned> {
        let (config, _) = crate::test_model::tiny();
        Arc::new(Versioned::new(
            name,
            config.init::<Cpu>(&Default::default()),
            0,
        ))
    }

    fn job(policy: &Arc<Versioned>, grammar: &Arc<ToolCallGrammar>, seed: u64) -> Job {
        Job {
            policy: policy.clone(),
            prompt: vec![1, 2, 3],
            grammar: grammar.clone(),
            temperature: 1.0,
            max_tokens: 4,
            seed,
            gone: Gone::default(),
            reply: crossbeam_channel::bounded(1).0,
        }
    }

    fn seeds(jobs: Vec<Job>) -> Vec<u64> {
        jobs.iter().map(|j| j.seed).collect()
    }

    #[test]
    fn a_lane_takes_its_versions_requests_but_never_past_an_older_one_no_thread_can_take() {
        let (_, tokenizer) = crate::test_model::tiny();
        let grammar =
            Arc::new(ToolCallGrammar::new(&tokenizer, &[], ActionLimits::default()).unwrap());
        let (a, b) = (version("a"), version("b"));
        let queue = JobQueue::default();
        for (policy, seed) in [(&a, 1), (&b, 2), (&a, 3), (&a, 4)] {
            assert!(queue.push(job(policy, &grammar, seed)).is_ok());
        }
        // One thread: it takes a's first request; b's, older than a's others, waits with no
        // idle thread to take it, so the lane admits nothing more until it drains.
        let (first, mut lane) = queue.first().unwrap();
        assert_eq!(first.seed, 1);
        assert!(queue.more(&mut lane, 8, None).is_empty());
        queue.leave(&mut lane);
        let (next, mut lane) = queue.first().unwrap();
        assert_eq!((next.policy.version.as_str(), next.seed), ("b", 2));
        queue.leave(&mut lane);
        // Nothing older of another version: a's lane takes both of a's, up to its room.
        let (next, mut lane) = queue.first().unwrap();
        assert_eq!(next.seed, 3);
        assert!(queue.push(job(&a, &grammar, 5)).is_ok());
        let more = seeds(queue.more(&mut lane, 1, None));
        assert_eq!(more, [4]);
        // Full, the lane is closed to the queue; with room again it takes the rest.
        assert!(!lane.open);
        let more = seeds(queue.more(&mut lane, 4, None));
        assert_eq!(more, [5]);
        assert!(lane.open);
        queue.leave(&mut lane);
        // Closed: a push is refused and a waiting thread ends.
        queue.close();
        assert!(queue.push(job(&a, &grammar, 6)).is_err());
        assert!(queue.first().is_none());
    }
}

//! `VecEnv`: many envs stepped in parallel on worker threads.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;

use std::sync::mpsc::{Receiver, Sender, channel as unbounded};

use crate::{Action, BoxEnv, Done, Env, EnvError, Observation, ResetOptions, Result};

/// What [`VecEnv::step`] does with an env whose episode has ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AutoReset {
    /// Nothing: stepping a finished env returns its own [`EnvError::EpisodeOver`]. The caller
    /// resets envs with [`VecEnv::reset`]. This suits LLM rollouts, where each episode is
    /// collected once and finished slots are refilled deliberately.
    #[default]
    Disabled,
    /// Gymnasium's default ("next-step" mode): the step *after* the one that ended an episode
    /// ignores its action, resets the env with the next seed of that slot (last seed + number
    /// of envs, so slots never share a seed) and returns the reset observation with
    /// [`Transition::autoreset`] set and reward 0.
    NextStep,
}

/// One env's result of a [`VecEnv::step`].
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// The observation after the step (or after the automatic reset).
    pub observation: Observation,
    /// The step's reward.
    pub reward: f64,
    /// Whether the episode is over.
    pub done: Done,
    /// True when this is an automatic reset rather than a step (see [`AutoReset::NextStep`]).
    pub autoreset: bool,
}

enum Job {
    Reset {
        index: usize,
        seed: u64,
        options: Arc<ResetOptions>,
    },
    Step {
        index: usize,
        action: Action,
    },
}

enum Reply {
    Reset(usize, Result<Observation>),
    Step(usize, Result<Transition>),
}

struct Slot {
    index: usize,
    env: BoxEnv,
    seed: Option<u64>,
    options: Arc<ResetOptions>,
    panicked: Option<String>,
}

/// A batch of envs, each owned by one of a fixed pool of worker threads and stepped in parallel.
///
/// Failures are per env: an env that returns an error or even panics fails only its own slot
/// (a panic becomes [`EnvError::Panicked`] and the slot refuses steps until it is reset), and
/// the other envs' results come back as usual.
///
/// ```
/// use sandgym_env_api::{Action, AutoReset, ResetOptions, VecEnv, toy::GuessNumber};
/// use serde_json::json;
/// let mut envs = VecEnv::new((0..4).map(|_| Box::new(GuessNumber::new()) as _).collect(), 2, AutoReset::Disabled);
/// let obs = envs.reset(&[(0, 10), (1, 11), (2, 12), (3, 13)], &ResetOptions::default());
/// assert!(obs.iter().all(|(_, o)| o.is_ok()));
/// let actions = vec![Some(Action::tool("guess", json!({"number": 50}))); 4];
/// let results = envs.step(actions);
/// assert_eq!(results.len(), 4);
/// ```
pub struct VecEnv {
    len: usize,
    jobs: Vec<Sender<Vec<Job>>>,
    replies: Receiver<Reply>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for VecEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VecEnv")
            .field("len", &self.len)
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl VecEnv {
    /// Distributes `envs` over `threads` worker threads (at least one, at most one per env).
    pub fn new(envs: Vec<BoxEnv>, threads: usize, autoreset: AutoReset) -> Self {
        let len = envs.len();
        let threads = threads.clamp(1, len.max(1));
        let mut parts: Vec<Vec<Slot>> = (0..threads).map(|_| Vec::new()).collect();
        for (index, env) in envs.into_iter().enumerate() {
            parts[index % threads].push(Slot {
                index,
                env,
                seed: None,
                options: Arc::default(),
                panicked: None,
            });
        }
        let (reply_tx, replies) = unbounded();
        let mut jobs = Vec::new();
        let mut handles = Vec::new();
        for (w, slots) in parts.into_iter().enumerate() {
            let (tx, rx) = unbounded::<Vec<Job>>();
            let reply_tx = reply_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("sandgym-vecenv-{w}"))
                .spawn(move || worker(slots, rx, reply_tx, len as u64, autoreset))
                .expect("spawning a VecEnv worker thread");
            jobs.push(tx);
            handles.push(handle);
        }
        Self {
            len,
            jobs,
            replies,
            threads: handles,
        }
    }

    /// The number of envs.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no envs.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Resets the envs named by `(index, seed)` pairs (each index at most once) in parallel.
    /// Results come back in the order asked for.
    ///
    /// # Panics
    /// If an index is out of range.
    pub fn reset(
        &mut self,
        seeds: &[(usize, u64)],
        options: &ResetOptions,
    ) -> Vec<(usize, Result<Observation>)> {
        let options = Arc::new(options.clone());
        let jobs = seeds.iter().map(|&(index, seed)| Job::Reset {
            index,
            seed,
            options: options.clone(),
        });
        self.run(jobs.collect(), seeds.iter().map(|s| s.0).collect())
            .into_iter()
            .filter_map(|(i, reply)| match reply {
                Reply::Reset(_, r) => Some((i, r)),
                Reply::Step(..) => None,
            })
            .collect()
    }

    /// Steps every env whose action is `Some` (one entry per env) in parallel; `None` leaves an
    /// env untouched and gives `None` in its place.
    ///
    /// # Panics
    /// If `actions.len()` differs from [`VecEnv::len`].
    pub fn step(&mut self, actions: Vec<Option<Action>>) -> Vec<Option<Result<Transition>>> {
        assert_eq!(actions.len(), self.len, "one action slot per env");
        let indices: Vec<usize> = actions
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.as_ref().map(|_| i))
            .collect();
        let jobs = actions
            .into_iter()
            .enumerate()
            .filter_map(|(index, a)| a.map(|action| Job::Step { index, action }))
            .collect();
        let mut out: Vec<Option<Result<Transition>>> = (0..self.len).map(|_| None).collect();
        for (i, reply) in self.run(jobs, indices) {
            if let Reply::Step(_, r) = reply {
                out[i] = Some(r);
            }
        }
        out
    }

    fn run(&mut self, jobs: Vec<Job>, order: Vec<usize>) -> Vec<(usize, Reply)> {
        let workers = self.jobs.len();
        let mut batches: Vec<Vec<Job>> = (0..workers).map(|_| Vec::new()).collect();
        for job in jobs {
            let index = match &job {
                Job::Reset { index, .. } | Job::Step { index, .. } => *index,
            };
            assert!(
                index < self.len,
                "env index {index} out of range (len {})",
                self.len
            );
            batches[index % workers].push(job);
        }
        let mut expected = 0;
        for (w, batch) in batches.into_iter().enumerate() {
            if !batch.is_empty() {
                expected += batch.len();
                self.jobs[w]
                    .send(batch)
                    .expect("VecEnv worker threads live as long as the VecEnv");
            }
        }
        let mut replies: Vec<Option<Reply>> = (0..self.len).map(|_| None).collect();
        for _ in 0..expected {
            let reply = self
                .replies
                .recv()
                .expect("VecEnv worker threads live as long as the VecEnv");
            let index = match &reply {
                Reply::Reset(i, _) | Reply::Step(i, _) => *i,
            };
            replies[index] = Some(reply);
        }
        order
            .into_iter()
            .filter_map(|i| replies[i].take().map(|r| (i, r)))
            .collect()
    }
}

impl Drop for VecEnv {
    fn drop(&mut self) {
        self.jobs.clear(); // closing the channels ends the workers
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

fn worker(
    mut slots: Vec<Slot>,
    jobs: Receiver<Vec<Job>>,
    replies: Sender<Reply>,
    stride: u64,
    autoreset: AutoReset,
) {
    for batch in jobs {
        for job in batch {
            let reply = match job {
                Job::Reset {
                    index,
                    seed,
                    options,
                } => {
                    let slot = find(&mut slots, index);
                    Reply::Reset(index, reset_slot(slot, seed, options))
                }
                Job::Step { index, action } => {
                    let slot = find(&mut slots, index);
                    Reply::Step(index, step_slot(slot, &action, stride, autoreset))
                }
            };
            if replies.send(reply).is_err() {
                return;
            }
        }
    }
}

fn find(slots: &mut [Slot], index: usize) -> &mut Slot {
    slots
        .iter_mut()
        .find(|s| s.index == index)
        .expect("jobs are routed to the worker owning the env")
}

fn guarded<T>(slot: &mut Slot, f: impl FnOnce(&mut BoxEnv) -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(|| f(&mut slot.env))) {
        Ok(result) => result,
        Err(payload) => {
            let message = crate::panic::message(&*payload);
            slot.panicked = Some(message.clone());
            Err(EnvError::Panicked { message })
        }
    }
}

fn reset_slot(slot: &mut Slot, seed: u64, options: Arc<ResetOptions>) -> Result<Observation> {
    let obs = guarded(slot, |env| env.reset(seed, &options))?;
    slot.seed = Some(seed);
    slot.options = options;
    slot.panicked = None;
    Ok(obs)
}

fn step_slot(
    slot: &mut Slot,
    action: &Action,
    stride: u64,
    autoreset: AutoReset,
) -> Result<Transition> {
    if let Some(message) = &slot.panicked {
        return Err(EnvError::Panicked {
            message: format!("{message} (earlier; reset this env to use it again)"),
        });
    }
    if autoreset == AutoReset::NextStep
        && slot.env.done().is_done()
        && let Some(seed) = slot.seed
    {
        let observation = reset_slot(slot, seed.wrapping_add(stride), slot.options.clone())?;
        return Ok(Transition {
            observation,
            reward: 0.0,
            done: Done::Running,
            autoreset: true,
        });
    }
    guarded(slot, |env| {
        let observation = env.step(action)?;
        Ok(Transition {
            observation,
            reward: env.reward(),
            done: env.done(),
            autoreset: false,
        })
    })
}

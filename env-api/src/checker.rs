//! `check_env`: verifies that an env keeps the contract of [`Env`].

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;

use crate::{
    Action, Done, Env, EnvError, ErrorKind, Observation, ResetOptions, SplitMix64, StepRecord,
};

/// How [`check_env_with`] exercises an env.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Seeds to run episodes with (at least two; the first is replayed for determinism).
    pub seeds: Vec<u64>,
    /// Reset options for every episode.
    pub reset_options: ResetOptions,
    /// The action script. `None` generates one from the tool schemas: valid calls of each tool in
    /// turn, then a final response.
    pub actions: Option<Vec<Action>>,
    /// Most turns per episode before the check stops it (and warns that it did not end).
    pub max_steps: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self {
            seeds: vec![0, 1, 2, 3],
            reset_options: ResetOptions::default(),
            actions: None,
            max_steps: 12,
        }
    }
}

/// One problem found by the checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The check that found it, e.g. `determinism`.
    pub check: &'static str,
    /// What was wrong.
    pub message: String,
}

/// The result of [`check_env`]: hard failures (the contract is broken) and soft warnings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// The env's id.
    pub env_id: String,
    /// Checks that ran.
    pub checks_run: Vec<&'static str>,
    /// Contract violations.
    pub failures: Vec<Finding>,
    /// Things that are allowed but usually mistakes.
    pub warnings: Vec<Finding>,
}

impl CheckReport {
    /// True when there are no hard failures.
    pub fn is_ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// Whether some finding (failure or warning) came from `check`.
    pub fn flagged(&self, check: &str) -> bool {
        self.failures
            .iter()
            .chain(&self.warnings)
            .any(|f| f.check == check)
    }

    fn fail(&mut self, check: &'static str, message: impl Into<String>) {
        self.failures.push(Finding {
            check,
            message: message.into(),
        });
    }

    /// Per-step problems are reported once per check: the first occurrence says it all.
    fn fail_first(&mut self, check: &'static str, message: impl Into<String>) {
        if !self.failures.iter().any(|f| f.check == check) {
            self.fail(check, message);
        }
    }

    fn warn(&mut self, check: &'static str, message: impl Into<String>) {
        self.warnings.push(Finding {
            check,
            message: message.into(),
        });
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "check_env {}: {} ({} checks, {} failures, {} warnings)",
            self.env_id,
            if self.is_ok() { "PASS" } else { "FAIL" },
            self.checks_run.len(),
            self.failures.len(),
            self.warnings.len()
        )?;
        for x in &self.failures {
            writeln!(f, "  FAIL [{}] {}", x.check, x.message)?;
        }
        for x in &self.warnings {
            writeln!(f, "  warn [{}] {}", x.check, x.message)?;
        }
        Ok(())
    }
}

/// Runs [`check_env_with`] with the default options.
///
/// ```
/// use sandgym_env_api::{check_env, toy::GuessNumber};
/// let report = check_env(&mut GuessNumber::new());
/// assert!(report.is_ok(), "{report}");
/// ```
pub fn check_env(env: &mut dyn Env) -> CheckReport {
    check_env_with(env, &CheckOptions::default())
}

/// Checks the [`Env`] contract, in the spirit of Gymnasium's `check_env`:
///
/// - **spec**: tool names unique and valid, schemas consistent, a finite reward range;
/// - **observe**: `observe()` equals what `reset`/`step` returned;
/// - **determinism**: the same seed replayed after another episode gives the same
///   observations, rewards, `done` values and errors; different seeds should differ (warning);
/// - **serialization**: every step's Agent Template record and observation round-trip through
///   JSON unchanged;
/// - **invalid actions**: an unknown tool and bad parameters give an
///   [`ErrorKind::InvalidAction`] error, never a panic or success, and leave the env unchanged
///   (the next valid step gives what it would have given);
/// - **rewards**: finite, inside the declared range, 0 after reset (warning);
/// - **termination**: a step after the end is refused; reset after the end works;
/// - **snapshot** (when supported): restoring and replaying gives the same continuation, and
///   garbage snapshots are refused without a panic.
///
/// Panics inside the env are caught and reported as failures.
pub fn check_env_with(env: &mut dyn Env, options: &CheckOptions) -> CheckReport {
    let mut report = CheckReport {
        env_id: env.spec().id.to_string(),
        ..CheckReport::default()
    };
    let script = options
        .actions
        .clone()
        .unwrap_or_else(|| generated_script(env, options.max_steps));
    let mut c = Checker {
        env,
        report: &mut report,
        options,
        script: &script,
    };
    c.spec();
    c.episodes();
    c.invalid_actions();
    c.snapshots();
    report
}

/// What happened in one turn, compared between runs.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Step {
        observation: Observation,
        reward: f64,
        done: Done,
    },
    Error {
        kind: ErrorKind,
        message: String,
    },
}

#[derive(Clone, Debug, PartialEq)]
struct Trace {
    reset: Observation,
    steps: Vec<Outcome>,
}

struct Checker<'a> {
    env: &'a mut dyn Env,
    report: &'a mut CheckReport,
    options: &'a CheckOptions,
    script: &'a [Action],
}

fn generated_script(env: &dyn Env, max_steps: usize) -> Vec<Action> {
    let mut rng = SplitMix64::new(0x5eed);
    let tools = &env.spec().tools;
    let mut actions: Vec<Action> = (0..max_steps.saturating_sub(1))
        .filter_map(|i| tools.get(i % tools.len().max(1)))
        .map(|t| {
            Action::tool(t.name.clone(), t.parameters.example(&mut rng))
                .with_thought("sandgym check")
        })
        .collect();
    if env.spec().accepts_response {
        actions.push(Action::respond("sandgym check").with_thought("done"));
    }
    actions
}

fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| crate::panic::message(&*payload))
}

impl Checker<'_> {
    fn spec(&mut self) {
        self.report.checks_run.push("spec");
        let spec = self.env.spec().clone();
        let mut seen = std::collections::BTreeSet::new();
        for tool in &spec.tools {
            if !seen.insert(tool.name.clone()) {
                self.report
                    .fail("spec", format!("tool `{}` is declared twice", tool.name));
            }
            for problem in tool.lint() {
                self.report.fail("spec", problem);
            }
        }
        let (lo, hi) = spec.reward_range;
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            self.report.fail(
                "spec",
                format!("reward_range ({lo}, {hi}) must be finite with low <= high"),
            );
        }
        if spec.tools.is_empty() {
            self.report
                .warn("spec", "the env declares no tools; agents can only respond");
        }
    }

    /// Resets with `seed` and plays the script until the episode ends. Returns `None` (after
    /// reporting) when the env panicked or could not be reset.
    fn play(&mut self, seed: u64, check_each: bool) -> Option<Trace> {
        let opts = &self.options.reset_options;
        let reset = match guarded(|| self.env.reset(seed, opts)) {
            Ok(Ok(obs)) => obs,
            Ok(Err(e)) => {
                self.report
                    .fail("reset", format!("reset(seed={seed}) failed: {e}"));
                return None;
            }
            Err(p) => {
                self.report
                    .fail("reset", format!("reset(seed={seed}) panicked: {p}"));
                return None;
            }
        };
        if check_each {
            self.after_reset(seed, &reset);
        }
        let mut steps = Vec::new();
        for (i, action) in self.script.iter().enumerate() {
            if self.env.done().is_done() {
                break;
            }
            let outcome = match guarded(|| self.env.step(action)) {
                Err(p) => {
                    self.report.fail(
                        "step",
                        format!(
                            "step {i} (seed {seed}) panicked: {p}; action: {}",
                            action.to_json()
                        ),
                    );
                    return None;
                }
                Ok(Ok(observation)) => Outcome::Step {
                    observation,
                    reward: self.env.reward(),
                    done: self.env.done(),
                },
                Ok(Err(e)) => Outcome::Error {
                    kind: e.kind(),
                    message: e.to_string(),
                },
            };
            if check_each {
                self.after_step(seed, i, action, &reset, &outcome);
            }
            let fatal =
                matches!(outcome, Outcome::Error { kind, .. } if kind != ErrorKind::InvalidAction);
            steps.push(outcome);
            if fatal {
                break;
            }
        }
        Some(Trace { reset, steps })
    }

    fn after_reset(&mut self, seed: u64, reset: &Observation) {
        let now = self.env.observe();
        if &now != reset {
            self.report.fail_first(
                "observe",
                format!(
                    "after reset(seed={seed}) observe() differs from the observation reset returned"
                ),
            );
        }
        if self.env.done() != Done::Running {
            self.report.fail_first(
                "termination",
                format!(
                    "done() is {:?} right after reset(seed={seed})",
                    self.env.done()
                ),
            );
        }
        let r = self.env.reward();
        if r != 0.0 {
            self.report.warn(
                "rewards",
                format!("reward() is {r} right after reset, expected 0"),
            );
        }
        roundtrip(self.report, "serialization", reset, "the reset observation");
        // A narrowing must parse, name only the env's tools and admit only what the spec does.
        match crate::Narrowing::from_info(&reset.info) {
            Err(e) => self
                .report
                .fail_first("narrowing", format!("reset(seed={seed}): {e}")),
            Ok(Some(narrowing)) => {
                if !self.report.checks_run.contains(&"narrowing") {
                    self.report.checks_run.push("narrowing");
                }
                for problem in narrowing.check_against(self.env.spec(), 8) {
                    self.report
                        .fail_first("narrowing", format!("reset(seed={seed}): {problem}"));
                }
            }
            Ok(None) => {}
        }
    }

    fn after_step(
        &mut self,
        seed: u64,
        i: usize,
        action: &Action,
        reset: &Observation,
        outcome: &Outcome,
    ) {
        match outcome {
            Outcome::Step {
                observation,
                reward,
                done,
            } => {
                if &self.env.observe() != observation {
                    self.report.fail_first(
                        "observe",
                        format!("after step {i} (seed {seed}) observe() differs from the observation step returned"),
                    );
                }
                let (lo, hi) = self.env.spec().reward_range;
                if !reward.is_finite() {
                    self.report.fail_first(
                        "rewards",
                        format!("step {i} (seed {seed}) returned a non-finite reward {reward}"),
                    );
                } else if *reward < lo || *reward > hi {
                    self.report.fail_first(
                        "rewards",
                        format!("step {i} (seed {seed}) reward {reward} is outside the declared range [{lo}, {hi}]"),
                    );
                }
                let mut record =
                    StepRecord::new(&reset.content, action, &observation.content, *reward);
                record.done = *done;
                if reward.is_finite() {
                    roundtrip(self.report, "serialization", &record, "a step record");
                }
                roundtrip(self.report, "serialization", observation, "an observation");
            }
            Outcome::Error { kind, message } => {
                if *kind != ErrorKind::InvalidAction {
                    self.report.fail_first(
                        "step",
                        format!(
                            "step {i} (seed {seed}) failed on a scripted action ({kind}): {message}"
                        ),
                    );
                }
            }
        }
    }

    fn episodes(&mut self) {
        for check in [
            "observe",
            "determinism",
            "serialization",
            "rewards",
            "termination",
        ] {
            self.report.checks_run.push(check);
        }
        let seeds = self.options.seeds.clone();
        let Some(&first) = seeds.first() else {
            self.report
                .warn("determinism", "no seeds given; episodes not checked");
            return;
        };
        let mut traces = Vec::new();
        for &seed in &seeds {
            let Some(trace) = self.play(seed, true) else {
                return;
            };
            // An episode ended by an env failure has been reported already; only a normal end
            // is probed for stepping past it.
            let failed = matches!(trace.steps.last(), Some(Outcome::Error { kind, .. }) if *kind != ErrorKind::InvalidAction);
            traces.push(trace);
            if !failed {
                self.termination(seed);
            }
        }
        // Replay the first seed after the others: state leaking across episodes shows up here.
        let Some(replay) = self.play(first, false) else {
            return;
        };
        if replay != traces[0] {
            let at = first_difference(&traces[0], &replay);
            self.report.fail(
                "determinism",
                format!("reset(seed={first}) replayed with the same actions gave a different episode ({at}); all randomness must come from the seed"),
            );
        }
        if traces.len() > 1 && traces.iter().all(|t| t == &traces[0]) {
            self.report.warn(
                "determinism",
                format!("seeds {seeds:?} all gave the same episode: does the env use its seed?"),
            );
        }
    }

    fn termination(&mut self, seed: u64) {
        let done = self.env.done();
        if !done.is_done() {
            self.report.warn(
                "termination",
                format!(
                    "the episode (seed {seed}) did not end within {} scripted turns",
                    self.script.len()
                ),
            );
            return;
        }
        let probe = self.script.last().expect("script is never empty");
        match guarded(|| self.env.step(probe)) {
            Err(p) => self.report.fail_first("termination", format!("step after the end panicked: {p}")),
            Ok(Ok(_)) => self.report.fail_first(
                "termination",
                format!("step after the episode ended ({done:?}) was accepted; it must return EnvError::EpisodeOver until reset"),
            ),
            Ok(Err(e)) if e.kind() != ErrorKind::Usage => self.report.fail_first(
                "termination",
                format!("step after the end returned `{e}` ({}), expected EnvError::EpisodeOver", e.kind()),
            ),
            Ok(Err(_)) => {}
        }
    }

    fn invalid_actions(&mut self) {
        self.report.checks_run.push("invalid-actions");
        let seed = self.options.seeds.first().copied().unwrap_or(0);
        let Some(reference) = self.play_prefix(seed, &[]) else {
            return;
        };
        let mut rng = SplitMix64::new(seed ^ 0xbad);
        let tools = self.env.spec().tools.clone();
        let mut bad = vec![(
            "an unknown tool".to_owned(),
            Action::tool(
                "__sandgym_unknown_tool__",
                Value::Object(Default::default()),
            ),
        )];
        for tool in &tools {
            if let Some(params) = tool.parameters.counterexample(&mut rng) {
                bad.push((
                    format!("bad parameters for `{}`", tool.name),
                    Action::tool(tool.name.clone(), params),
                ));
            }
        }
        for (what, action) in bad {
            let Some(after) = self.play_prefix(seed, &[action]) else {
                return;
            };
            match &after.0 {
                Some(Outcome::Error {
                    kind: ErrorKind::InvalidAction,
                    ..
                }) => {}
                Some(Outcome::Error { kind, message }) => self.report.fail(
                    "invalid-actions",
                    format!("{what} gave `{message}` ({kind}), expected an invalid-action error"),
                ),
                Some(Outcome::Step { .. }) => self.report.fail(
                    "invalid-actions",
                    format!(
                        "{what} was accepted; validate actions with validate_action before acting"
                    ),
                ),
                None => {}
            }
            if after.1 != reference.1 {
                self.report.fail(
                    "invalid-actions",
                    format!(
                        "after {what}, the env was not left unchanged: the next valid step differs"
                    ),
                );
            }
        }
    }

    /// Resets with `seed`, takes the first scripted step, then `extra` actions, then the second
    /// scripted step. Returns the outcome of the last `extra` action and the observation, done
    /// and outcome of the second scripted step; `None` after reporting a panic.
    #[allow(clippy::type_complexity)]
    fn play_prefix(
        &mut self,
        seed: u64,
        extra: &[Action],
    ) -> Option<(Option<Outcome>, (Observation, Done, Option<Outcome>))> {
        let opts = &self.options.reset_options;
        let script = self.script;
        let env = &mut *self.env;
        let result = guarded(|| -> Result<_, EnvError> {
            env.reset(seed, opts)?;
            if let Some(a) = script.first().filter(|a| a.tool_call().is_some()) {
                let _ = env.step(a);
            }
            let mut last = None;
            for a in extra {
                let before = (env.observe(), env.done());
                last = Some(match env.step(a) {
                    Ok(observation) => Outcome::Step {
                        observation,
                        reward: env.reward(),
                        done: env.done(),
                    },
                    Err(e) => Outcome::Error {
                        kind: e.kind(),
                        message: e.to_string(),
                    },
                });
                if matches!(last, Some(Outcome::Error { .. }))
                    && before != (env.observe(), env.done())
                {
                    last = Some(Outcome::Error {
                        kind: ErrorKind::Other,
                        message: "the error changed observe()/done()".into(),
                    });
                }
            }
            let next = script
                .get(1)
                .filter(|_| !env.done().is_done())
                .map(|a| match env.step(a) {
                    Ok(observation) => Outcome::Step {
                        observation,
                        reward: env.reward(),
                        done: env.done(),
                    },
                    Err(e) => Outcome::Error {
                        kind: e.kind(),
                        message: e.to_string(),
                    },
                });
            Ok((last, (env.observe(), env.done(), next)))
        });
        match result {
            Ok(Ok(x)) => Some(x),
            Ok(Err(e)) => {
                self.report
                    .fail("invalid-actions", format!("reset(seed={seed}) failed: {e}"));
                None
            }
            Err(p) => {
                let what = if extra.is_empty() {
                    "a scripted step"
                } else {
                    "an invalid action"
                };
                self.report.fail(
                    "invalid-actions",
                    format!("the env panicked on {what}: {p}"),
                );
                None
            }
        }
    }

    fn snapshots(&mut self) {
        let seed = self.options.seeds.first().copied().unwrap_or(0);
        let opts = &self.options.reset_options;
        let script = self.script;
        let env = &mut *self.env;
        let run = guarded(|| -> Result<Option<bool>, EnvError> {
            env.reset(seed, opts)?;
            if let Some(a) = script.first() {
                let _ = env.step(a);
            }
            let snap = match env.snapshot() {
                Err(EnvError::SnapshotUnsupported) => return Ok(None),
                other => other?,
            };
            let continue_from = |env: &mut dyn Env| -> Vec<Outcome> {
                let mut out = Vec::new();
                for a in script.iter().skip(1) {
                    if env.done().is_done() {
                        break;
                    }
                    out.push(match env.step(a) {
                        Ok(observation) => Outcome::Step {
                            observation,
                            reward: env.reward(),
                            done: env.done(),
                        },
                        Err(e) => Outcome::Error {
                            kind: e.kind(),
                            message: e.to_string(),
                        },
                    });
                }
                out
            };
            let first = continue_from(env);
            env.restore(&snap)?;
            let second = continue_from(env);
            Ok(Some(first == second))
        });
        match run {
            Ok(Ok(None)) => return,
            Ok(Ok(Some(true))) => {}
            Ok(Ok(Some(false))) => self.report.fail(
                "snapshot",
                "restoring a snapshot and replaying the same actions gave a different continuation",
            ),
            Ok(Err(e)) => self
                .report
                .fail("snapshot", format!("snapshot/restore failed: {e}")),
            Err(p) => self
                .report
                .fail("snapshot", format!("snapshot/restore panicked: {p}")),
        }
        self.report.checks_run.push("snapshot");
        let env = &mut *self.env;
        match guarded(|| env.restore(b"\xffnot a snapshot\x00")) {
            Err(p) => self.report.fail(
                "snapshot",
                format!("restore of a garbage snapshot panicked: {p}"),
            ),
            Ok(Ok(())) => self
                .report
                .warn("snapshot", "restore accepted a garbage snapshot"),
            Ok(Err(_)) => {}
        }
    }
}

fn roundtrip<T>(report: &mut CheckReport, check: &'static str, value: &T, what: &str)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq,
{
    let ok = serde_json::to_string(value)
        .ok()
        .and_then(|text| serde_json::from_str::<T>(&text).ok())
        .is_some_and(|back| &back == value);
    if !ok && !report.failures.iter().any(|f| f.check == check) {
        report.fail(
            check,
            format!("{what} does not round-trip through JSON unchanged"),
        );
    }
}

fn first_difference(a: &Trace, b: &Trace) -> String {
    if a.reset != b.reset {
        return "the reset observation differs".into();
    }
    match a.steps.iter().zip(&b.steps).position(|(x, y)| x != y) {
        Some(i) => format!(
            "first difference at step {i}: {:?} vs {:?}",
            a.steps[i], b.steps[i]
        ),
        None => format!("{} vs {} steps", a.steps.len(), b.steps.len()),
    }
}

//! The rollout engine: token-in/token-out episodes, valid actions, isolated env failures.

use sandgym_env_api::toy::GuessNumber;
use sandgym_env_api::{
    Action, BoxEnv, Done, Env, EnvError, EnvSpec, Observation, ResetOptions, Result,
};
use sandgym_policy::{ActionLimits, Cpu, sequence_logprobs};
use sandgym_trainer::{
    RolloutEngine, RolloutSettings, compile_episode_grammars, episode_grammar, eval_envs, evaluate,
};

fn settings() -> RolloutSettings {
    RolloutSettings {
        max_turns: 3,
        max_new_tokens: 100,
        max_context: 400,
        max_observation_chars: 100,
        batch_tokens: 1 << 16,
        eval_at_once: 64,
        limits: ActionLimits {
            thought_chars: 0,
            response_chars: 8,
        },
    }
}

#[test]
fn episodes_hold_exactly_what_the_policy_saw_and_sampled() {
    let tok = crate::guess_tokenizer(8);
    let device = sandgym_policy::select_device();
    let model = crate::seeded::<Cpu>(&crate::tiny(tok.vocab_size()), 5);
    let mut engine =
        RolloutEngine::new(crate::guess_envs(6, 8), 2, tok.clone(), settings()).unwrap();
    let jobs: Vec<(usize, u64)> = (0..6).map(|i| (i / 2, 100 + i as u64 / 2)).collect();
    let (episodes, stats) = engine
        .run(&model, &device, &jobs, &ResetOptions::default(), 1.0, 9)
        .unwrap();
    assert_eq!(episodes.len(), 6);
    assert!(stats.generated_tokens > 0 && stats.env_steps >= 6);
    for e in &episodes {
        assert_eq!(e.tokens.len(), e.loss_mask.len());
        assert_eq!(e.tokens.len(), e.logprobs.len());
        assert_eq!(e.tokens.len(), e.allowed.len());
        assert!(e.done.is_done(), "every episode ends");
        assert!(e.error.is_none(), "{:?}", e.error);
        // Every completed turn decodes to a valid action that the env accepted and recorded.
        for (turn, record) in e.turns.iter().zip(&e.trajectory.records) {
            let text = tok.decode(&e.tokens[turn.start..turn.end - 1]).unwrap();
            let action = Action::from_json(&text).unwrap();
            assert_eq!(Some(action), record.to_action());
            assert!(e.loss_mask[turn.start..turn.end].iter().all(|&m| m));
            assert!(
                !e.loss_mask[turn.start - 1],
                "the role token is not trainable"
            );
        }
        assert_eq!(
            e.loss_mask.iter().filter(|&&m| m).count(),
            e.turns.iter().map(|t| t.end - t.start).sum::<usize>()
        );
        // Token-in/token-out: the recorded log-probs are those of one full forward pass over
        // the same tokens under the same masks.
        let first = e.turns[0].start;
        let last = e.turns.last().unwrap().end;
        let masks = e.allowed[first..last].to_vec();
        let full = sequence_logprobs(
            &model,
            &e.tokens[..first],
            &e.tokens[first..last],
            &masks,
            1.0,
            &device,
        );
        for (j, lp) in full.iter().enumerate() {
            if e.loss_mask[first + j] {
                let got = e.logprobs[first + j];
                assert!(
                    (got - lp).abs() < 1e-3,
                    "token {j}: sampled {got} vs full {lp}"
                );
            }
        }
        // The reward in the record equals the turn's.
        let total: f64 = e.trajectory.records.iter().map(|r| r.reward).sum();
        assert_eq!(total, e.total_reward());
    }
    // Rollouts of one group share the task (seed) but sample independently.
    assert_eq!(episodes[0].seed, episodes[1].seed);
}

/// [`PickTool`](crate::PickTool) three times over: tool calls only (no final response), a
/// new colour to call after each, so every episode runs several turns.
#[derive(Debug)]
struct ThreeCalls {
    inner: crate::PickTool,
    spec: EnvSpec,
    seed: u64,
    left: u32,
}

impl ThreeCalls {
    fn boxed() -> BoxEnv {
        let inner = crate::PickTool::new();
        let mut spec = inner.spec().clone();
        spec.accepts_response = false;
        Box::new(Self {
            inner,
            spec,
            seed: 0,
            left: 0,
        })
    }
}

impl Env for ThreeCalls {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }
    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        (self.seed, self.left) = (seed, 3);
        self.inner.reset(seed, options)
    }
    fn observe(&self) -> Observation {
        self.inner.observe()
    }
    fn step(&mut self, action: &Action) -> Result<Observation> {
        self.inner.step(action)?;
        self.left -= 1;
        if self.left == 0 {
            return Ok(Observation::new("done"));
        }
        self.inner.reset(
            self.seed.wrapping_add(u64::from(self.left)),
            &ResetOptions::default(),
        )
    }
    fn reward(&self) -> f64 {
        self.inner.reward()
    }
    fn done(&self) -> Done {
        if self.left == 0 {
            Done::Terminated
        } else {
            Done::Running
        }
    }
}

#[test]
fn a_turn_past_the_batch_budget_is_generated_in_several_batches_with_the_same_episodes() {
    // Greedy decoding does not depend on the batch a row is in, nor on whether a turn
    // continues the episode's kept history: one episode per batch (a budget below any
    // context) plays exactly the episodes of one batch for all, and those of a fresh
    // encoding of each turn's whole context (checked against a full forward pass).
    let tok = crate::pick_tokenizer();
    let device = sandgym_policy::select_device();
    let model = crate::seeded::<Cpu>(&crate::tiny(tok.vocab_size()), 5);
    let jobs: Vec<(usize, u64)> = (0..6).map(|i| (i, 200 + i as u64)).collect();
    let play = |batch_tokens: usize, temperature: f32| {
        let settings = RolloutSettings {
            batch_tokens,
            ..settings()
        };
        let envs = (0..6).map(|_| ThreeCalls::boxed()).collect();
        let mut engine = RolloutEngine::new(envs, 2, tok.clone(), settings).unwrap();
        engine
            .run(
                &model,
                &device,
                &jobs,
                &ResetOptions::default(),
                temperature,
                9,
            )
            .unwrap()
            .0
    };
    let (one, many) = (play(1 << 16, 0.0), play(1, 0.0));
    for (a, b) in one.iter().zip(&many) {
        assert_eq!(a.turns.len(), 3, "{:?}", a.error);
        assert_eq!(a.tokens, b.tokens);
        assert_eq!(a.done, b.done);
        assert_eq!(a.total_reward(), b.total_reward());
    }
    // Sampled, each turn's log-probs are those of a full pass over the whole episode.
    for e in play(1 << 16, 1.0) {
        assert_eq!(e.turns.len(), 3, "{:?}", e.error);
        let first = e.turns[0].start;
        let full = sequence_logprobs(
            &model,
            &e.tokens[..first],
            &e.tokens[first..],
            &e.allowed[first..],
            1.0,
            &device,
        );
        for turn in &e.turns {
            for j in turn.start..turn.end {
                let (got, want) = (e.logprobs[j], full[j - first]);
                assert!(
                    (got - want).abs() < 1e-3,
                    "token {j}: sampled {got} vs full {want}"
                );
            }
        }
    }
}

/// Guess-number whose `step` fails on every env whose seed is odd.
struct Flaky {
    inner: GuessNumber,
    fail: bool,
}

impl Env for Flaky {
    fn spec(&self) -> &EnvSpec {
        self.inner.spec()
    }
    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        self.fail = seed % 2 == 1;
        self.inner.reset(seed, options)
    }
    fn observe(&self) -> Observation {
        self.inner.observe()
    }
    fn step(&mut self, action: &Action) -> Result<Observation> {
        if self.fail {
            return Err(EnvError::Remote {
                kind: sandgym_env_api::ErrorKind::Other,
                message: "tool backend crashed".into(),
            });
        }
        self.inner.step(action)
    }
    fn reward(&self) -> f64 {
        self.inner.reward()
    }
    fn done(&self) -> Done {
        self.inner.done()
    }
}

#[test]
fn a_failing_env_ends_only_its_own_episode() {
    let tok = crate::guess_tokenizer(8);
    let device = sandgym_policy::select_device();
    let model = crate::seeded::<Cpu>(&crate::tiny(tok.vocab_size()), 5);
    let envs: Vec<BoxEnv> = (0..4)
        .map(|_| {
            Box::new(Flaky {
                inner: GuessNumber::with_max(8),
                fail: false,
            }) as BoxEnv
        })
        .collect();
    let mut engine = RolloutEngine::new(envs, 2, tok, settings()).unwrap();
    let jobs = [(0, 10), (1, 11), (2, 12), (3, 13)];
    let (episodes, _) = engine
        .run(&model, &device, &jobs, &ResetOptions::default(), 1.0, 1)
        .unwrap();
    for e in &episodes {
        if e.seed % 2 == 1 {
            let err = e
                .error
                .as_deref()
                .unwrap_or_else(|| panic!("no error recorded: {:?} {:?}", e.turns, e.done));
            assert!(err.contains("tool backend crashed"), "{err}");
            assert_eq!(e.done, Done::Truncated);
            assert_eq!(e.turns.len(), 1);
        } else {
            assert!(e.error.is_none());
        }
    }
}

/// Guess-number whose episodes narrow `guess` to one number, `seed % 8 + 1`.
struct Narrowed {
    inner: GuessNumber,
    reset: Option<Observation>,
}

impl Env for Narrowed {
    fn spec(&self) -> &EnvSpec {
        self.inner.spec()
    }
    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let only = sandgym_env_api::Schema::integer().with_enum([seed % 8 + 1]);
        let params = sandgym_env_api::Schema::object().property("number", only, true);
        let narrowing = sandgym_env_api::Narrowing::default().tool("guess", params);
        let obs = self.inner.reset(seed, options)?.with_narrowing(&narrowing);
        self.reset = Some(obs.clone());
        Ok(obs)
    }
    fn observe(&self) -> Observation {
        self.reset.clone().unwrap_or_else(|| self.inner.observe())
    }
    fn step(&mut self, action: &Action) -> Result<Observation> {
        let obs = self.inner.step(action)?;
        self.reset = None;
        Ok(obs)
    }
    fn reward(&self) -> f64 {
        self.inner.reward()
    }
    fn done(&self) -> Done {
        self.inner.done()
    }
}

#[test]
fn an_episodes_narrowed_tool_schema_constrains_its_sampled_calls() {
    let tok = crate::guess_tokenizer(8);
    let device = sandgym_policy::select_device();
    let model = crate::seeded::<Cpu>(&crate::tiny(tok.vocab_size()), 5);
    let envs: Vec<BoxEnv> = (0..6)
        .map(|_| {
            Box::new(Narrowed {
                inner: GuessNumber::with_max(8),
                reset: None,
            }) as BoxEnv
        })
        .collect();
    let mut engine = RolloutEngine::new(envs, 2, tok, settings()).unwrap();
    let jobs: Vec<(usize, u64)> = (0..6).map(|i| (i, 20 + i as u64)).collect();
    let (episodes, _) = engine
        .run(&model, &device, &jobs, &ResetOptions::default(), 1.0, 3)
        .unwrap();
    let mut calls = 0;
    for e in &episodes {
        assert!(e.error.is_none(), "{:?}", e.error);
        for record in &e.trajectory.records {
            if let Some(call) = record.to_action().and_then(|a| a.tool_call().cloned()) {
                assert_eq!(call.parameters["number"], e.seed % 8 + 1, "seed {}", e.seed);
                calls += 1;
            }
        }
    }
    assert!(calls > 0, "no tool call was sampled");
}

#[test]
fn episode_grammars_are_compiled_once_per_distinct_narrowing() {
    let tok = crate::guess_tokenizer(8);
    let mut env = Narrowed {
        inner: GuessNumber::with_max(8),
        reset: None,
    };
    let spec = env.spec().clone();
    let limits = settings().limits;
    let default = std::sync::Arc::new(
        sandgym_policy::ToolCallGrammar::for_spec(&tok, &spec, limits).unwrap(),
    );
    // Twelve episodes, eight distinct narrowings (seed % 8), compiled together.
    let infos: Vec<_> = (0..12)
        .map(|seed| env.reset(seed, &ResetOptions::default()).unwrap().info)
        .collect();
    let mut cache = std::collections::HashMap::new();
    compile_episode_grammars(&mut cache, &default, &spec, limits, &infos);
    assert_eq!(cache.len(), 8);
    // Each episode's grammar is then the one compiled for its narrowing.
    let a = episode_grammar(&mut cache, &default, &spec, limits, &infos[1]).unwrap();
    let b = episode_grammar(&mut cache, &default, &spec, limits, &infos[9]).unwrap();
    let c = episode_grammar(&mut cache, &default, &spec, limits, &infos[2]).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert!(!std::sync::Arc::ptr_eq(&a, &c));
    assert_eq!(cache.len(), 8);
    // A second batch with nothing new compiles nothing.
    compile_episode_grammars(&mut cache, &default, &spec, limits, &infos[..4]);
    let again = episode_grammar(&mut cache, &default, &spec, limits, &infos[1]).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &again));
}

#[test]
fn an_evaluation_plays_its_episodes_in_chunks_of_eval_at_once_with_the_same_outcomes() {
    // Each live episode keeps its KV cache until it ends, so `eval_at_once` is what bounds
    // an evaluation's memory: the seeds are played a chunk at a time, each once, and greedy
    // decoding gives every episode the same tokens as when all play at once.
    let tok = crate::pick_tokenizer();
    let device = sandgym_policy::select_device();
    let model = crate::seeded::<Cpu>(&crate::tiny(tok.vocab_size()), 5);
    let seeds: Vec<u64> = (300..307).collect();
    let play = |at_once: usize| {
        let settings = RolloutSettings {
            eval_at_once: at_once,
            ..settings()
        };
        let n = eval_envs(&settings, seeds.len());
        let envs = (0..n).map(|_| ThreeCalls::boxed()).collect();
        let mut engine = RolloutEngine::new(envs, 2, tok.clone(), settings).unwrap();
        assert_eq!(engine.capacity(), n);
        evaluate(
            &mut engine,
            &model,
            &device,
            &seeds,
            &ResetOptions::default(),
            0.0,
        )
        .unwrap()
    };
    assert_eq!(
        eval_envs(
            &RolloutSettings {
                eval_at_once: 3,
                ..settings()
            },
            7
        ),
        3
    );
    assert_eq!(
        eval_envs(
            &RolloutSettings {
                eval_at_once: 64,
                ..settings()
            },
            7
        ),
        7
    );
    assert_eq!(eval_envs(&settings(), 0), 1);
    let ((all_report, all), (chunked_report, chunked)) = (play(64), play(3));
    assert_eq!(all.len(), seeds.len());
    assert_eq!(chunked.len(), seeds.len());
    for ((a, b), &seed) in all.iter().zip(&chunked).zip(&seeds) {
        assert_eq!((a.seed, b.seed), (seed, seed));
        assert_eq!(a.turns.len(), 3, "{:?}", a.error);
        assert_eq!(a.tokens, b.tokens);
        assert_eq!(a.total_reward(), b.total_reward());
    }
    assert_eq!(all_report.outcomes, chunked_report.outcomes);
    // Where the time went: the parts inside the whole, every generated token counted.
    let timing = all_report.timing.expect("evaluate times itself");
    let parts = timing.env_seconds + timing.grammar_seconds + timing.generate_seconds;
    assert!(
        timing.generate_seconds > 0.0 && parts <= timing.seconds,
        "{timing:?}"
    );
    let tokens: usize = all
        .iter()
        .map(|e| e.loss_mask.iter().filter(|&&m| m).count())
        .sum();
    assert_eq!(timing.generated_tokens, tokens);
    assert!(timing.per_episode(seeds.len()) > 0.0);
    assert_eq!(timing.per_episode(0), 0.0);
}

#[test]
fn an_engine_retargeted_to_another_model_plays_as_a_fresh_one_on_its_envs() {
    // The rows of one evaluation table play on one batch of envs: a model with another
    // tokenizer (another vocabulary, so another grammar) and other settings, after a first
    // model played on them, gives exactly the episodes a fresh engine gives it.
    let (tok_a, tok_b) = (crate::pick_tokenizer(), crate::pick_tokenizer_of(280));
    assert_ne!(tok_a.vocab_size(), tok_b.vocab_size());
    let device = sandgym_policy::select_device();
    let model_a = crate::seeded::<Cpu>(&crate::tiny(tok_a.vocab_size()), 5);
    let model_b = crate::seeded::<Cpu>(&crate::tiny(tok_b.vocab_size()), 6);
    let seeds: Vec<u64> = (400..405).collect();
    let settings_b = RolloutSettings {
        max_new_tokens: 60,
        ..settings()
    };
    let envs = || (0..seeds.len()).map(|_| ThreeCalls::boxed()).collect();
    let play = |engine: &mut RolloutEngine, model| {
        evaluate(
            engine,
            model,
            &device,
            &seeds,
            &ResetOptions::default(),
            0.0,
        )
        .unwrap()
        .1
    };
    let mut shared = RolloutEngine::new(envs(), 2, tok_a, settings()).unwrap();
    let first = play(&mut shared, &model_a);
    assert!(
        first
            .iter()
            .all(|e| e.error.is_none() && !e.turns.is_empty())
    );
    shared.retarget(tok_b.clone(), settings_b).unwrap();
    assert_eq!(shared.tokenizer().vocab_size(), tok_b.vocab_size());
    let again = play(&mut shared, &model_b);
    let fresh = play(
        &mut RolloutEngine::new(envs(), 2, tok_b, settings_b).unwrap(),
        &model_b,
    );
    assert_eq!(again.len(), seeds.len());
    for (a, f) in again.iter().zip(&fresh) {
        assert!(a.error.is_none(), "{:?}", a.error);
        assert_eq!((a.seed, &a.tokens), (f.seed, &f.tokens));
        assert_eq!(a.total_reward(), f.total_reward());
    }
}

//! The rollout engine: many envs stepped in parallel on worker threads while the policy
//! generates the next action of every live episode in one batch.

use std::time::{Duration, Instant};

use burn::tensor::backend::Backend;
use std::collections::HashMap;
use std::sync::Arc;

use sandgym_env_api::{
    Action, AutoReset, BoxEnv, Done, EnvError, EnvSpec, Narrowing, ResetOptions, SplitMix64,
    StepRecord, ToolSpec, Trajectory, VecEnv,
};
use sandgym_policy::{
    ActionLimits, PolicyModel, Rendered, SampleConfig, SeqCache, Template, Tokenizer,
    ToolCallGrammar, generate_continuing, generate_continuing_last,
};

use crate::Result;
pub use sandgym_policy::{Episode, Turn};

/// The shape of the episodes the engine plays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RolloutSettings {
    /// The most policy turns per episode.
    pub max_turns: u32,
    /// The most tokens per turn.
    pub max_new_tokens: usize,
    /// The most tokens in an episode's context.
    pub max_context: usize,
    /// Observations are cut to this many characters.
    pub max_observation_chars: usize,
    /// The most tokens (contexts plus `max_new_tokens` each) of one batched generation; a
    /// turn with more live episodes generates them in several batches.
    pub batch_tokens: usize,
    /// The most episodes an evaluation plays at once ([`eval_envs`](crate::eval_envs)).
    pub eval_at_once: usize,
    /// Limits of the free-text fields of actions.
    pub limits: ActionLimits,
}

/// Timing and volume of one [`RolloutEngine::run`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RolloutStats {
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Time spent generating.
    pub generate_time: Duration,
    /// Env steps (and resets) performed.
    pub env_steps: usize,
    /// Time spent in env steps and resets.
    pub env_time: Duration,
    /// Time spent building constraints: compiling episodes' narrowed grammars and starting a
    /// matcher per turn (outside `generate_time`).
    pub grammar_time: Duration,
    /// Every turn as the sampler produced it (what reaches training is checked against it).
    pub journal: crate::SampleJournal,
}

/// The grammar of an episode whose reset observation carries `info`: `default`, or the spec
/// as the episode narrows it ([`Narrowing`]: its own response schema, its tools' parameter
/// schemas), compiled once per distinct narrowing.
pub fn episode_grammar(
    cache: &mut HashMap<String, Arc<ToolCallGrammar>>,
    default: &Arc<ToolCallGrammar>,
    spec: &EnvSpec,
    limits: ActionLimits,
    info: &serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<Arc<ToolCallGrammar>, String> {
    let Some(narrowing) = Narrowing::from_info(info).map_err(|e| e.to_string())? else {
        return Ok(default.clone());
    };
    let key = serde_json::Value::Object(narrowing.to_info()).to_string();
    if let Some(g) = cache.get(&key) {
        return Ok(g.clone());
    }
    let spec = narrowing.apply(spec).map_err(|e| e.to_string())?;
    let g = Arc::new(
        default
            .for_spec_like(&spec, limits)
            .map_err(|e| format!("the episode's narrowed schemas do not compile: {e}"))?,
    );
    if cache.len() >= 4096 {
        cache.clear();
    }
    cache.insert(key, g.clone());
    Ok(g)
}

/// Compiles, in parallel, the narrowed grammars of the episodes whose reset observations carry
/// `infos` that `cache` does not hold yet, so that [`episode_grammar`] finds them there. Each
/// compile is independent and, for a real-size schema's query shape, takes a tenth of a
/// second or more; one after another they were a quarter of an evaluation's time on a
/// nine-table database. A narrowing that does not compile is left out (the episode's own
/// [`episode_grammar`] call reports it).
pub fn compile_episode_grammars<'a>(
    cache: &mut HashMap<String, Arc<ToolCallGrammar>>,
    default: &Arc<ToolCallGrammar>,
    spec: &EnvSpec,
    limits: ActionLimits,
    infos: impl IntoIterator<Item = &'a serde_json::Map<String, serde_json::Value>>,
) {
    use rayon::prelude::*;
    let mut todo: HashMap<String, Narrowing> = HashMap::new();
    for info in infos {
        let Ok(Some(narrowing)) = Narrowing::from_info(info) else {
            continue;
        };
        let key = serde_json::Value::Object(narrowing.to_info()).to_string();
        if !cache.contains_key(&key) {
            todo.entry(key).or_insert(narrowing);
        }
    }
    let compiled: Vec<(String, Arc<ToolCallGrammar>)> = todo
        .into_par_iter()
        .filter_map(|(key, narrowing)| {
            let spec = narrowing.apply(spec).ok()?;
            let g = default.for_spec_like(&spec, limits).ok()?;
            Some((key, Arc::new(g)))
        })
        .collect();
    if cache.len() + compiled.len() > 4096 {
        cache.clear();
    }
    cache.extend(compiled);
}

/// Plays batches of episodes: `VecEnv` workers step the envs in parallel, the policy samples
/// every live episode's next action in batched (at most `batch_tokens` each), KV-cached,
/// constrained generations; each episode's encoded history is kept from turn to turn, so a
/// turn encodes only the last action and observation.
pub struct RolloutEngine {
    envs: VecEnv,
    spec: EnvSpec,
    tools: Vec<ToolSpec>,
    grammar: Arc<ToolCallGrammar>,
    /// Grammars of per-episode narrowings ([`Narrowing`]), by their info text.
    episode_grammars: HashMap<String, Arc<ToolCallGrammar>>,
    tokenizer: Tokenizer,
    settings: RolloutSettings,
}

impl std::fmt::Debug for RolloutEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RolloutEngine")
            .field("envs", &self.envs.len())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Cuts `text` to at most `max` characters, marking the cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{} …[cut]", &text[..at]),
        None => text.to_owned(),
    }
}

/// Consecutive ranges of `prompts`, each holding at most `settings.batch_tokens` tokens
/// (prompts plus each one's `max_new_tokens`), or a single prompt that alone holds more.
fn batches_within(prompts: &[Vec<u32>], settings: RolloutSettings) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut held) = (0, 0);
    for (i, p) in prompts.iter().enumerate() {
        let need = p.len() + settings.max_new_tokens;
        if i > start && held + need > settings.batch_tokens {
            out.push(start..i);
            (start, held) = (i, 0);
        }
        held += need;
    }
    if start < prompts.len() {
        out.push(start..prompts.len());
    }
    out
}

/// A seed for turn `turn` of a batch sampled with `seed`.
fn turn_seed(seed: u64, turn: u32) -> u64 {
    SplitMix64::new(seed ^ u64::from(turn).wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

impl RolloutEngine {
    /// `envs` fresh envs of one kind (all with the same tools) on `threads` workers.
    pub fn new(
        envs: Vec<BoxEnv>,
        threads: usize,
        tokenizer: Tokenizer,
        settings: RolloutSettings,
    ) -> Result<Self> {
        let spec = envs
            .first()
            .ok_or_else(|| crate::TrainError::Config("no envs to roll out on".into()))?
            .spec()
            .clone();
        let tools = spec.tools.clone();
        let grammar = Arc::new(ToolCallGrammar::for_spec(
            &tokenizer,
            &spec,
            settings.limits,
        )?);
        Ok(Self {
            envs: VecEnv::new(envs, threads, AutoReset::Disabled),
            spec,
            tools,
            grammar,
            episode_grammars: HashMap::new(),
            tokenizer,
            settings,
        })
    }

    /// The same envs, played from now on by a model with `tokenizer` under `settings` (the
    /// tool-call grammar built again for it): the rows of one evaluation table (a
    /// pretrained model zero-shot, its SFT start, the trained policy) play their episodes on
    /// one batch of envs instead of making it again for each, which for a sandboxed env
    /// with a generated curriculum costs seconds per row. Each episode starts from its own
    /// reset, so the outcomes are those of fresh envs.
    pub fn retarget(&mut self, tokenizer: Tokenizer, settings: RolloutSettings) -> Result<()> {
        self.grammar = Arc::new(ToolCallGrammar::for_spec(
            &tokenizer,
            &self.spec,
            settings.limits,
        )?);
        self.episode_grammars.clear();
        self.tokenizer = tokenizer;
        self.settings = settings;
        Ok(())
    }

    /// The number of envs (the most episodes played at once).
    pub fn capacity(&self) -> usize {
        self.envs.len()
    }

    /// The env's tools.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// The env's spec.
    pub fn spec(&self) -> &sandgym_env_api::EnvSpec {
        &self.spec
    }

    /// The tokenizer its episodes are rendered with.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Plays one episode per `(group, seed)` job (at most [`capacity`](Self::capacity)) with
    /// `model`, sampling at `temperature` (0: greedy) from `sample_seed`.
    pub fn run<B: Backend>(
        &mut self,
        model: &PolicyModel<B>,
        device: &B::Device,
        jobs: &[(usize, u64)],
        options: &ResetOptions,
        temperature: f32,
        sample_seed: u64,
    ) -> Result<(Vec<Episode>, RolloutStats)> {
        assert!(jobs.len() <= self.envs.len(), "more jobs than envs");
        let template = Template::new(&self.tokenizer);
        let mut stats = RolloutStats::default();
        let clock = Instant::now();
        let seeds: Vec<(usize, u64)> = jobs.iter().enumerate().map(|(i, j)| (i, j.1)).collect();
        let resets = self.envs.reset(&seeds, options);
        stats.env_steps += resets.len();
        stats.env_time += clock.elapsed();
        let mut episodes: Vec<Episode> = Vec::with_capacity(jobs.len());
        let mut grammars: Vec<Arc<ToolCallGrammar>> = Vec::with_capacity(jobs.len());
        let mut instruction: Vec<String> = Vec::with_capacity(jobs.len());
        let mut live = Vec::new();
        let clock = Instant::now();
        compile_episode_grammars(
            &mut self.episode_grammars,
            &self.grammar,
            &self.spec,
            self.settings.limits,
            resets
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .map(|o| &o.info),
        );
        for ((i, reset), &(group, seed)) in resets.into_iter().zip(jobs) {
            let mut ep = Episode {
                group,
                seed,
                trajectory: Trajectory::new(format!("{group}-{seed}-{i}")),
                ..Episode::default()
            };
            let started = reset.map_err(|e| env_error_text(&e)).and_then(|obs| {
                episode_grammar(
                    &mut self.episode_grammars,
                    &self.grammar,
                    &self.spec,
                    self.settings.limits,
                    &obs.info,
                )
                .map(|g| (obs, g))
            });
            match started {
                Ok((obs, grammar)) => {
                    ep.task = obs.info.get("task").map(|t| match t {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                    let text = cut(&obs.content, self.settings.max_observation_chars * 4);
                    ep.push_context(template.prompt(&self.tools, &text)?);
                    instruction.push(obs.content);
                    grammars.push(grammar);
                    live.push(i);
                }
                Err(why) => {
                    ep.error = Some(why);
                    ep.done = Done::Truncated;
                    instruction.push(String::new());
                    grammars.push(self.grammar.clone());
                }
            }
            episodes.push(ep);
        }
        stats.grammar_time += clock.elapsed();
        let prefix_len = template.generation_prefix().len();
        // Each live episode's encoded history, continued on its next turn (dropped when it
        // ends).
        let mut kept: Vec<Option<SeqCache<B>>> = (0..episodes.len()).map(|_| None).collect();
        for turn in 0..self.settings.max_turns {
            live.retain(|&i| {
                let fits = episodes[i].tokens.len() + prefix_len + self.settings.max_new_tokens
                    <= self.settings.max_context;
                if !fits {
                    episodes[i].done = Done::Truncated;
                    episodes[i].out_of_context = true;
                    kept[i] = None;
                }
                fits
            });
            if live.is_empty() {
                break;
            }
            let prompts: Vec<Vec<u32>> = live
                .iter()
                .map(|&i| {
                    let mut p = episodes[i].tokens.clone();
                    p.extend(template.generation_prefix());
                    p
                })
                .collect();
            let clock = Instant::now();
            let mut constraints = live
                .iter()
                .map(|&i| grammars[i].matcher().map(Some))
                .collect::<sandgym_policy::Result<Vec<_>>>()?;
            stats.grammar_time += clock.elapsed();
            let clock = Instant::now();
            let mut sampled = Vec::with_capacity(live.len());
            let batches = batches_within(&prompts, self.settings);
            let last_turn = turn + 1 >= self.settings.max_turns;
            for (b, range) in batches.into_iter().enumerate() {
                let sample = SampleConfig {
                    temperature,
                    top_p: 1.0,
                    max_new_tokens: self.settings.max_new_tokens,
                    seed: turn_seed(sample_seed, turn).wrapping_add(b as u64),
                };
                let rows = &live[range.clone()];
                let bases: Vec<_> = rows.iter().map(|&i| kept[i].take()).collect();
                let (prompts, end) = (&prompts[range.clone()], self.tokenizer.end());
                if last_turn {
                    // No turn follows: no cache to keep, and decoding writes in place.
                    sampled.extend(generate_continuing_last(
                        model,
                        prompts,
                        &bases,
                        &mut constraints[range],
                        end,
                        &sample,
                        device,
                    )?);
                    continue;
                }
                let (out, caches) = generate_continuing(
                    model,
                    prompts,
                    &bases,
                    &mut constraints[range],
                    end,
                    &sample,
                    device,
                )?;
                for (&i, cache) in rows.iter().zip(caches) {
                    kept[i] = Some(cache);
                }
                sampled.extend(out);
            }
            stats.generate_time += clock.elapsed();
            let mut actions: Vec<Option<Action>> = vec![None; self.envs.len()];
            let mut stepped = Vec::new();
            for (&i, s) in live.iter().zip(sampled) {
                stats.generated_tokens += s.tokens.len();
                stats.journal.record(&s.tokens);
                let ep = &mut episodes[i];
                let prefix = template.generation_prefix();
                ep.push_context(Rendered {
                    loss_mask: vec![false; prefix.len()],
                    ids: prefix,
                });
                let start = ep.tokens.len();
                let text_ids: Vec<u32> = s
                    .tokens
                    .iter()
                    .copied()
                    .filter(|&t| t != self.tokenizer.end())
                    .collect();
                ep.tokens.extend(&s.tokens);
                ep.loss_mask
                    .extend(std::iter::repeat_n(true, s.tokens.len()));
                ep.logprobs.extend(&s.logprobs);
                ep.allowed.extend(s.allowed);
                ep.turns.push(Turn {
                    start,
                    end: ep.tokens.len(),
                    reward: 0.0,
                });
                if !s.finished {
                    // Out of tokens mid-action: the turn ends the episode with no reward.
                    ep.done = Done::Truncated;
                    continue;
                }
                let text = self.tokenizer.decode(&text_ids)?;
                match Action::from_json(&text) {
                    Ok(action) => {
                        actions[i] = Some(action);
                        stepped.push(i);
                    }
                    Err(e) => {
                        // Cannot happen under the constraint; kept as a policy failure, not a crash.
                        ep.error = Some(format!("the policy wrote an invalid action: {e}"));
                        ep.done = Done::Truncated;
                    }
                }
            }
            let clock = Instant::now();
            let mut results = self.envs.step(actions.clone());
            stats.env_time += clock.elapsed();
            stats.env_steps += stepped.len();
            for i in stepped {
                let ep = &mut episodes[i];
                let action = actions[i].take().expect("stepped envs have actions");
                match results[i].take().expect("stepped envs have results") {
                    Ok(t) => {
                        ep.turns.last_mut().expect("a turn").reward = t.reward;
                        add_breakdown(ep, &t.observation.info);
                        let mut record = StepRecord::new(
                            instruction[i].clone(),
                            &action,
                            t.observation.content.clone(),
                            t.reward,
                        )
                        .with_breakdown(&t.observation.info);
                        record.done = t.done;
                        ep.trajectory.push(record);
                        ep.done = t.done;
                        if t.done.is_done() {
                            ep.success = sandgym_env_api::episode_success(
                                &t.observation.info,
                                t.done,
                                ep.total_reward(),
                            );
                        } else {
                            let text =
                                cut(&t.observation.content, self.settings.max_observation_chars);
                            ep.push_context(template.observation(&text)?);
                        }
                    }
                    Err(e) => {
                        ep.error = Some(env_error_text(&e));
                        ep.done = Done::Truncated;
                    }
                }
            }
            live.retain(|&i| {
                let going = !episodes[i].done.is_done();
                if !going {
                    kept[i] = None;
                }
                going
            });
        }
        for &i in &live {
            episodes[i].done = Done::Truncated;
        }
        Ok((episodes, stats))
    }
}

/// The tokens a rollout would have produced for a recorded episode: the same prompt,
/// observation cuts and thought limit as [`RolloutEngine::run`], each action rendered in
/// canonical form. SFT trains on this rendering.
pub fn render_trajectory(
    tokenizer: &Tokenizer,
    tools: &[ToolSpec],
    trajectory: &Trajectory,
    settings: &RolloutSettings,
) -> Result<Rendered> {
    render_imitating(tokenizer, tools, trajectory, settings, |_| true)
}

/// [`render_trajectory`] with the loss on the actions of the records `imitate` (by index)
/// accepts only: the others are context the policy reads but does not learn to write (a
/// demonstrator's deliberate mistake before it recovers).
pub(crate) fn render_imitating(
    tokenizer: &Tokenizer,
    tools: &[ToolSpec],
    trajectory: &Trajectory,
    settings: &RolloutSettings,
    imitate: impl Fn(usize) -> bool,
) -> Result<Rendered> {
    let template = Template::new(tokenizer);
    let instruction = trajectory
        .records
        .first()
        .map_or("", |r| r.instruction.as_str());
    let mut out = template.prompt(tools, &cut(instruction, settings.max_observation_chars * 4))?;
    for (i, record) in trajectory.records.iter().enumerate() {
        let Some(mut action) = record.to_action() else {
            continue;
        };
        action.thought = action
            .thought
            .chars()
            .take(settings.limits.thought_chars as usize)
            .collect();
        let mut rendered = template.action(&action)?;
        if !imitate(i) {
            rendered.loss_mask.fill(false);
        }
        out.extend(rendered);
        if !record.done.is_done() {
            out.extend(
                template.observation(&cut(&record.observation, settings.max_observation_chars))?,
            );
        }
    }
    Ok(out)
}

fn env_error_text(e: &EnvError) -> String {
    format!("{e} ({:?})", e.kind())
}

/// Adds a step's reward breakdown (`info.reward_terms`, `info.reward_parts`) to its episode's
/// sums.
fn add_breakdown(ep: &mut Episode, info: &serde_json::Map<String, serde_json::Value>) {
    use serde_json::Value;
    if let Some(Value::Object(terms)) = info.get(sandgym_env_api::REWARD_TERMS) {
        for (name, value) in terms {
            *ep.reward_terms.entry(name.clone()).or_default() += value.as_f64().unwrap_or(0.0);
        }
    }
    if let Some(Value::Object(parts)) = info.get(sandgym_env_api::REWARD_PARTS) {
        for (term, parts) in parts {
            let Value::Object(parts) = parts else {
                continue;
            };
            for (part, value) in parts {
                *ep.reward_parts.entry(format!("{term}/{part}")).or_default() +=
                    value.as_f64().unwrap_or(0.0);
            }
        }
    }
}

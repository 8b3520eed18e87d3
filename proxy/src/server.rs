//! The policy server: the burn policy behind `/v1/chat/completions` and `/v1/models`.
//!
//! The request's tools become the decoding constraint, so every answer is a valid tool call
//! or a final message. Answers carry the prompt's token ids (`prompt_token_ids`), the sampled
//! ids (`choices[0].token_ids`) and per-token log-probs (`choices[0].logprobs`), as vLLM does
//! with `return_token_ids`. Requests are batched continuously: one that arrives while a batch
//! is decoding joins it at its next step ([`crate::batcher`]), or, when its token budget is
//! short and the batch's is long, decodes in an express lane stepped ahead of it
//! ([`Express`]).
//!
//! Every answer names the policy version that produced it (`policy_version`). Versions are
//! swapped while serving ([`PolicyServer::replace`]), or tried first as a canary or in shadow
//! ([`PolicyServer::stage`], then [`PolicyServer::promote`] or [`PolicyServer::rollback`]);
//! `GET /v1/policy` reports the versions and what each has served.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use sandgym_chat_api::ChatRequest;
use sandgym_policy::{
    ActionLimits, Cpu, PolicyModel, PrefixStats, Sampled, Tokenizer, ToolCallGrammar,
};
use serde_json::json;

use crate::Result;
use crate::batcher::{Batching, Counters, Job, JobQueue, generate_loop};
use crate::chat;
use crate::deploy::{Deployment, Trial, Versioned, rollout_key};
use crate::express::Express;
use crate::http::{self, Gone, HttpError, Request, Response, Server};

/// Most new tokens one request may ask for; more is cut to this.
const MAX_NEW_TOKENS: u32 = 4096;

/// How the policy server runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// Listen address (`127.0.0.1:0` picks a free port).
    pub listen: String,
    /// The model name it answers to and reports.
    pub model_name: String,
    /// Most requests decoded together in one batch (new ones join it between steps).
    pub max_batch: usize,
    /// How long the first request of an idle thread's batch waits for others.
    pub batch_window: Duration,
    /// Size limits of generated actions.
    pub limits: ActionLimits,
    /// Most prompt tokens accepted.
    pub max_context: usize,
    /// Most new tokens when the request names none.
    pub default_max_tokens: u32,
    /// Keep every completion's token ids in memory ([`PolicyServer::journal`]).
    pub journal: bool,
    /// Generating threads, each decoding a batch of one policy version: a candidate on trial
    /// (a canary, a shadow) decodes beside the incumbent's batch.
    pub concurrent_batches: usize,
    /// The name of the version served first (answers name it as `policy_version`).
    pub version: String,
    /// Bytes of finished generations' keys and values each version keeps, so that a
    /// conversation's next call encodes only what it added
    /// ([`PrefixCache`](sandgym_policy::PrefixCache)); 0 keeps none.
    pub prefix_cache_bytes: usize,
    /// Short requests that arrive while long ones decode run in a batch of their own, ahead
    /// of the long one ([`Express`]).
    pub express: Express,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:0".into(),
            model_name: "sandgym-policy".into(),
            max_batch: 32,
            batch_window: Duration::from_millis(2),
            limits: ActionLimits::default(),
            max_context: 4096,
            default_max_tokens: 128,
            journal: false,
            concurrent_batches: 2,
            version: "v0".into(),
            prefix_cache_bytes: 1 << 30,
            express: Express::default(),
        }
    }
}

/// One generation as the server sampled it.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// The prompt's token ids.
    pub prompt: Vec<u32>,
    /// The sampled token ids.
    pub completion: Vec<u32>,
}

/// A served answer's tokens and the reply its shadow will send.
type ShadowPair = (Vec<u32>, Receiver<Result<Sampled, HttpError>>);

struct State {
    config: ServerConfig,
    tokenizer: Tokenizer,
    deployment: RwLock<Deployment>,
    /// Answers served per version, and the shadow's record.
    served: Mutex<HashMap<String, u64>>,
    shadow: Arc<Mutex<ShadowRecord>>,
    /// Shadow requests to compare: the served answer's tokens and the shadow's reply.
    shadows: Sender<ShadowPair>,
    grammars: Mutex<HashMap<String, Arc<ToolCallGrammar>>>,
    /// Requests waiting for a generating thread; closed when the state is dropped.
    queue: Arc<JobQueue>,
    counter: AtomicU64,
    journal: Mutex<Vec<Served>>,
    generated: AtomicU64,
    /// Replacements by [`PolicyServer::set_model`].
    swaps: AtomicU64,
    /// What the generating threads count: the most rows decoded together, the express
    /// lane's steps alone.
    counters: Arc<Counters>,
    /// Message text longer than this cannot fit the context whatever it says: the context in
    /// tokens times the longest token's bytes. Checked before tokenising, so a huge prompt
    /// costs a parse, not a tokenisation.
    max_prompt_bytes: usize,
}

impl Drop for State {
    fn drop(&mut self) {
        // Ends the generating threads (they hold the queue, not the state).
        self.queue.close();
    }
}

/// What a candidate in shadow has answered so far.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ShadowRecord {
    /// Its version.
    pub version: String,
    /// Requests it answered (unseen).
    pub answered: u64,
    /// Of which with exactly the served answer's tokens.
    pub agreed: u64,
    /// Requests it failed.
    pub failed: u64,
}

/// The versions a server holds and what each has served (`GET /v1/policy`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DeploymentStatus {
    /// The incumbent's version.
    pub incumbent: String,
    /// The candidate's version and trial, if one is on trial.
    pub candidate: Option<(String, Trial)>,
    /// Answers served, per version.
    pub served: HashMap<String, u64>,
    /// The last shadow's record.
    pub shadow: ShadowRecord,
}

/// The most bytes one token of `tokenizer` stands for (an upper bound: a partial UTF-8 byte
/// decodes to a 3-byte replacement character).
fn longest_token_bytes(tokenizer: &Tokenizer) -> usize {
    (0..tokenizer.vocab_size() as u32)
        .filter_map(|id| tokenizer.decode(&[id]).ok())
        .map(|text| text.len())
        .max()
        .unwrap_or(1)
        .max(1)
}

/// A running policy server; stops when dropped.
pub struct PolicyServer {
    state: Arc<State>,
    server: Server,
}

impl std::fmt::Debug for PolicyServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyServer")
            .field("addr", &self.server.addr())
            .finish_non_exhaustive()
    }
}

impl PolicyServer {
    /// Serves `model` with `tokenizer`.
    pub fn start(
        model: PolicyModel<Cpu>,
        tokenizer: Tokenizer,
        config: ServerConfig,
    ) -> Result<Self> {
        let (shadows, shadow_rx) = crossbeam_channel::unbounded();
        let shadow = Arc::new(Mutex::new(ShadowRecord::default()));
        {
            // Ends when the state (the sender's owner) is dropped.
            let shadow = shadow.clone();
            std::thread::spawn(move || compare_shadows(&shadow, &shadow_rx));
        }
        let max_prompt_bytes = config
            .max_context
            .saturating_mul(longest_token_bytes(&tokenizer));
        let queue = Arc::new(JobQueue::default());
        let counters = Arc::new(Counters::default());
        let batching = Batching {
            max_batch: config.max_batch,
            window: config.batch_window,
            end: tokenizer.end(),
            express: config.express,
        };
        // The generating threads hold the queue, not the state: dropping the state closes
        // the queue, which ends them.
        for _ in 0..config.concurrent_batches.max(1) {
            let (queue, counters) = (queue.clone(), counters.clone());
            std::thread::spawn(move || generate_loop(&queue, batching, &counters));
        }
        let state = Arc::new(State {
            max_prompt_bytes,
            config: config.clone(),
            tokenizer,
            deployment: RwLock::new(Deployment::new(Versioned::new(
                config.version.clone(),
                model,
                config.prefix_cache_bytes,
            ))),
            served: Mutex::new(HashMap::new()),
            shadow,
            shadows,
            grammars: Mutex::new(HashMap::new()),
            queue,
            counter: AtomicU64::new(0),
            journal: Mutex::new(Vec::new()),
            generated: AtomicU64::new(0),
            swaps: AtomicU64::new(0),
            counters,
        });
        let handler_state = state.clone();
        let server = Server::start(&config.listen, move |request| {
            handle(&handler_state, &request)
        })?;
        Ok(Self { state, server })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// Its base URL (`http://addr`; the API is under `/v1`).
    pub fn url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// Replaces the served weights (e.g. after a training step), as version `v{n}` where `n`
    /// counts the replacements.
    pub fn set_model(&self, model: PolicyModel<Cpu>) {
        let n = self.state.swaps.fetch_add(1, Ordering::Relaxed) + 1;
        self.replace(model, &format!("v{n}"));
    }

    /// Serves `model` as `version` from the next request on; requests already generating
    /// finish on the version they started with.
    pub fn replace(&self, model: PolicyModel<Cpu>, version: &str) {
        self.controls().replace(model, version);
    }

    /// Puts `model` on trial as `version` (replacing any candidate): a canary answers its
    /// share of rollouts; a shadow answers every request unseen.
    pub fn stage(&self, model: PolicyModel<Cpu>, version: &str, trial: Trial) {
        self.controls().stage(model, version, trial);
    }

    /// Makes the candidate the incumbent; its version, or `None` without a candidate.
    pub fn promote(&self) -> Option<String> {
        self.controls().promote()
    }

    /// Drops the candidate; its version, or `None` without a candidate.
    pub fn rollback(&self) -> Option<String> {
        self.controls().rollback()
    }

    /// The versions held and what each has served.
    pub fn status(&self) -> DeploymentStatus {
        status(&self.state)
    }

    /// A handle that changes the served versions from another thread (e.g. a
    /// [`Follower`](crate::Follower)); it does nothing once the server has stopped.
    pub fn controls(&self) -> Controls {
        Controls {
            state: Arc::downgrade(&self.state),
        }
    }

    /// Every completion served so far, when the journal is on.
    pub fn journal(&self) -> Vec<Served> {
        self.lock_journal().clone()
    }

    /// Every completion served since the last call (the journal is emptied), when the
    /// journal is on.
    pub fn take_journal(&self) -> Vec<Served> {
        std::mem::take(&mut *self.lock_journal())
    }

    fn lock_journal(&self) -> std::sync::MutexGuard<'_, Vec<Served>> {
        self.state
            .journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tokens generated so far.
    pub fn generated_tokens(&self) -> u64 {
        self.state.generated.load(Ordering::Relaxed)
    }

    /// The most requests that one batch has decoded together so far (its express lane
    /// included).
    pub fn largest_batch(&self) -> usize {
        self.state.counters.largest.load(Ordering::Relaxed)
    }

    /// Decode steps that ran the express lane alone while a long batch waited.
    pub fn express_steps(&self) -> u64 {
        self.state.counters.express_steps.load(Ordering::Relaxed)
    }

    /// What the incumbent's cache of finished generations has saved so far: prompts looked
    /// up and tokens reused instead of encoded.
    pub fn prefix_stats(&self) -> PrefixStats {
        self.state
            .deployment
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .incumbent()
            .prefix()
            .stats()
    }
}

/// Changes a [`PolicyServer`]'s versions from elsewhere; holds the server weakly, so it never
/// keeps a stopped server alive (every call then does nothing and returns `None`).
#[derive(Clone, Debug)]
pub struct Controls {
    state: std::sync::Weak<State>,
}

impl Controls {
    fn with<T>(&self, f: impl FnOnce(&State, &mut Deployment) -> T) -> Option<T> {
        let state = self.state.upgrade()?;
        let mut d = state
            .deployment
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(f(&state, &mut d))
    }

    /// See [`PolicyServer::replace`].
    pub fn replace(&self, model: PolicyModel<Cpu>, version: &str) {
        self.with(|state, d| {
            d.replace(Versioned::new(
                version,
                model,
                state.config.prefix_cache_bytes,
            ));
        });
    }

    /// See [`PolicyServer::stage`].
    pub fn stage(&self, model: PolicyModel<Cpu>, version: &str, trial: Trial) {
        self.with(|state, d| {
            if trial == Trial::Shadow {
                *lock(&state.shadow) = ShadowRecord {
                    version: version.to_owned(),
                    ..ShadowRecord::default()
                };
            }
            d.stage(
                Versioned::new(version, model, state.config.prefix_cache_bytes),
                trial,
            );
        });
    }

    /// See [`PolicyServer::promote`].
    pub fn promote(&self) -> Option<String> {
        self.with(|_, d| d.promote()).flatten()
    }

    /// See [`PolicyServer::rollback`].
    pub fn rollback(&self) -> Option<String> {
        self.with(|_, d| d.rollback()).flatten()
    }

    /// See [`PolicyServer::status`]; `None` once the server has stopped.
    pub fn status(&self) -> Option<DeploymentStatus> {
        self.state.upgrade().map(|s| status(&s))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn status(state: &State) -> DeploymentStatus {
    let d = state
        .deployment
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    DeploymentStatus {
        incumbent: d.incumbent().version.clone(),
        candidate: d.candidate().map(|(c, t)| (c.version.clone(), *t)),
        served: lock(&state.served).clone(),
        shadow: lock(&state.shadow).clone(),
    }
}

/// Compares each shadow answer with the served one, in order, until the server is gone.
fn compare_shadows(record: &Mutex<ShadowRecord>, pairs: &Receiver<ShadowPair>) {
    for (served, reply) in pairs {
        let outcome = reply.recv();
        let mut r = lock(record);
        match outcome {
            Ok(Ok(s)) => {
                r.answered += 1;
                r.agreed += u64::from(s.tokens == served);
            }
            _ => r.failed += 1,
        }
    }
}

fn handle(state: &State, request: &Request) -> Response {
    let path = request.route();
    let result = match (request.method.as_str(), path) {
        ("GET", "/v1/models") => Ok(json!({
            "object": "list",
            "data": [{"id": state.config.model_name, "object": "model", "created": 0, "owned_by": "sandgym"}],
        })
        .to_string()
        .into_bytes()),
        ("GET", "/v1/policy") => {
            Ok(serde_json::to_vec(&status(state)).expect("the status serialises"))
        }
        ("POST", "/v1/chat/completions") => completion(state, request),
        (method, "/v1/models" | "/v1/chat/completions" | "/v1/policy") => Err(HttpError::new(
            405,
            format!("{method} is not allowed on {path}"),
        )),
        _ => Err(HttpError::new(404, format!("no route for {path}"))),
    };
    match result {
        Ok(bytes) => Response::bytes(200, bytes),
        Err(e) => e.into(),
    }
}

fn grammar(state: &State, request: &ChatRequest) -> Result<Arc<ToolCallGrammar>, HttpError> {
    let key = chat::grammar_key(request);
    if let Some(g) = state.grammars.lock().expect("grammar lock").get(&key) {
        return Ok(g.clone());
    }
    let g = chat::grammar(&state.tokenizer, request, state.config.limits)?;
    let g = Arc::new(g);
    let mut cache = state.grammars.lock().expect("grammar lock");
    if cache.len() > 256 {
        cache.clear();
    }
    cache.insert(key, g.clone());
    Ok(g)
}

fn completion(state: &State, http_request: &Request) -> Result<Vec<u8>, HttpError> {
    let gone = &http_request.gone;
    let request: ChatRequest = http::parse(&http_request.body)?;
    if request.stream == Some(true) {
        return Err(HttpError::bad_request(
            "streaming is not supported; send \"stream\": false",
        ));
    }
    if request.messages.is_empty() {
        return Err(HttpError::bad_request("`messages` must not be empty"));
    }
    if !request.model.is_empty() && request.model != state.config.model_name {
        return Err(HttpError::new(
            404,
            format!(
                "model {:?} is not served here (this server has {:?})",
                request.model, state.config.model_name
            ),
        ));
    }
    // `n` absent, null or exactly the integer 1; "3", -1 or 2.5 are refused, not read as 1.
    match request.extra.get("n") {
        None | Some(serde_json::Value::Null) => {}
        Some(n) if n.as_u64() == Some(1) => {}
        Some(n) => {
            return Err(HttpError::bad_request(format!(
                "only n = 1 is supported (got {n})"
            )));
        }
    }
    let temperature = request.temperature.unwrap_or(1.0);
    if !(0.0..=10.0).contains(&temperature) {
        return Err(HttpError::bad_request("temperature must be within [0, 10]"));
    }
    let max_tokens = request
        .max_completion_tokens
        .or(request.max_tokens)
        .unwrap_or(state.config.default_max_tokens);
    if max_tokens == 0 {
        return Err(HttpError::bad_request("max_tokens must be at least 1"));
    }
    let max_tokens = max_tokens.min(MAX_NEW_TOKENS) as usize;
    let text_bytes: usize = request.messages.iter().map(|m| m.text().len()).sum();
    if text_bytes > state.max_prompt_bytes {
        return Err(HttpError::bad_request(format!(
            "the messages hold {text_bytes} bytes, more than {} tokens of this model can hold \
             (this server's context)",
            state.config.max_context
        )));
    }
    let specs = chat::tool_specs(&request.tools)?;
    let prompt = chat::render(&state.tokenizer, &specs, &request.messages)?;
    if prompt.len() > state.config.max_context {
        return Err(HttpError::bad_request(format!(
            "the prompt has {} tokens, over this server's context of {}",
            prompt.len(),
            state.config.max_context
        )));
    }
    let grammar = grammar(state, &request)?;
    let number = state.counter.fetch_add(1, Ordering::Relaxed);
    // A rollout's calls stay on one version; other requests spread by their number.
    let route = state
        .deployment
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .route(
            http_request
                .header("x-rollout-id")
                .map_or(number, rollout_key),
        );
    let seed = request
        .seed
        .unwrap_or(number.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let (tx, rx) = crossbeam_channel::bounded(1);
    state
        .queue
        .push(Job {
            policy: route.served.clone(),
            prompt: prompt.clone(),
            grammar: grammar.clone(),
            temperature,
            max_tokens,
            seed,
            gone: gone.clone(),
            reply: tx,
        })
        .map_err(|_| HttpError::new(503, "the server is shutting down"))?;
    let sampled = rx
        .recv()
        .map_err(|_| HttpError::new(503, "the server is shutting down"))??;
    *lock(&state.served)
        .entry(route.served.version.clone())
        .or_default() += 1;
    if let Some(shadow) = route.shadow {
        // The same request, seed and all, for the candidate: compared, never served. It is
        // queued once the served answer is ready, so it never delays that answer; it does
        // take generation capacity from the requests after it.
        let (tx, rx) = crossbeam_channel::bounded(1);
        let job = Job {
            policy: shadow,
            prompt: prompt.clone(),
            grammar: grammar.clone(),
            temperature,
            max_tokens,
            seed,
            gone: Gone::default(),
            reply: tx,
        };
        if state.queue.push(job).is_ok() {
            let _ = state.shadows.send((sampled.tokens.clone(), rx));
        }
    }
    state
        .generated
        .fetch_add(sampled.tokens.len() as u64, Ordering::Relaxed);
    if state.config.journal {
        let mut journal = state
            .journal
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        journal.push(Served {
            prompt: prompt.clone(),
            completion: sampled.tokens.clone(),
        });
    }
    let end = state.tokenizer.end();
    let text_ids: Vec<u32> = sampled
        .tokens
        .iter()
        .copied()
        .filter(|&t| t != end)
        .collect();
    let text = state
        .tokenizer
        .decode(&text_ids)
        .map_err(|e| HttpError::new(500, e.to_string()))?;
    let (message, mut finish) = chat::assistant_message(&text, &format!("call_{number}"));
    if !sampled.finished {
        finish = "length";
    }
    let mut response = chat::response(
        &state.tokenizer,
        format!("chatcmpl-{number}"),
        state.config.model_name.clone(),
        prompt,
        (message, finish),
        &sampled.tokens,
        &sampled.logprobs,
    );
    response.extra.insert(
        "policy_version".to_owned(),
        serde_json::Value::String(route.served.version.clone()),
    );
    Ok(serde_json::to_vec(&response).expect("response serialises"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn tiny() -> (PolicyModel<Cpu>, Tokenizer) {
        let (config, tokenizer) = crate::test_model::tiny();
        (config.init::<Cpu>(&Default::default()), tokenizer)
    }

    fn ask(server: &PolicyServer, rollout: &str) -> serde_json::Value {
        let body = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
                          "temperature": 0.0});
        let mut resp = ureq::post(&format!("{}/v1/chat/completions", server.url()))
            .header("content-type", "application/json")
            .header("x-rollout-id", rollout)
            .send(body.to_string())
            .unwrap();
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
    }

    #[test]
    fn answers_name_their_version_and_a_shadow_answers_unseen() {
        let (model, tokenizer) = tiny();
        let server =
            PolicyServer::start(model.clone(), tokenizer, ServerConfig::default()).unwrap();
        assert_eq!(ask(&server, "a")["policy_version"], "v0");
        // The same weights in shadow: every answer is still v0's, and the shadow agrees.
        server.stage(model.clone(), "v1", Trial::Shadow);
        for r in ["a", "b", "c"] {
            assert_eq!(ask(&server, r)["policy_version"], "v0");
        }
        let started = Instant::now();
        while server.status().shadow.answered < 3 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let status = server.status();
        assert_eq!(status.shadow.version, "v1");
        assert_eq!((status.shadow.answered, status.shadow.agreed), (3, 3));
        assert_eq!(status.served["v0"], 4);
        // All of the traffic as a canary, then promoted; a hot swap names its own version.
        server.stage(model.clone(), "v2", Trial::Canary { share: 1.0 });
        assert_eq!(ask(&server, "d")["policy_version"], "v2");
        assert_eq!(server.promote().as_deref(), Some("v2"));
        assert_eq!(server.rollback(), None);
        server.replace(model, "v7");
        assert_eq!(ask(&server, "e")["policy_version"], "v7");
        let policy: serde_json::Value = serde_json::from_str(
            &ureq::get(&format!("{}/v1/policy", server.url()))
                .call()
                .unwrap()
                .body_mut()
                .read_to_string()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(policy["incumbent"], "v7");
        assert_eq!(policy["served"]["v2"], 1);
    }

    #[test]
    fn a_dropped_server_frees_its_state_and_threads() {
        let (model, tokenizer) = tiny();
        let server = PolicyServer::start(model, tokenizer, ServerConfig::default()).unwrap();
        let state = Arc::downgrade(&server.state);
        drop(server);
        // Dropping the state closes the queue, which ends the generating threads.
        let started = Instant::now();
        while state.upgrade().is_some() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(state.upgrade().is_none(), "the server's state outlived it");
    }
}

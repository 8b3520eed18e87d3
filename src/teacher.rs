//! The env's demonstrator as a chat model: an OpenAI-compatible `/v1/chat/completions` whose
//! answers are the demonstrator's actions, so that the unmodified harness, pointed at it
//! through the recording proxy, leaves traces of its own contexts (system prompts, sub-agent,
//! compressed history) answered by a teacher — the proxy approach's SFT data, the way a team
//! distils a stronger model's answers recorded at the API boundary.
//!
//! Each rollout is assigned a task before it runs ([`Teacher::assign`]): the demonstrator plays
//! that task's episode in an env of its own, and the teacher keeps the actions it took. The
//! env is deterministic given its seed and the actions, so the harness, calling the same tools
//! in the same order on its own episode, sees the same observations. A call is answered with
//! the next action when the context offers its tool (or, for the final answer, when it offers
//! every tool of the episode); a context that cannot take it (a sub-agent with fewer tools) is
//! ended with a short note saying what comes next, and the action waits for the next context.
//!
//! Answers carry token ids like the policy server's (`prompt_token_ids`, `token_ids`, zero
//! log-probs): the prompt as the policy's chat template renders it, the answer as the
//! template renders the assistant message the harness will send back, so the traces become
//! token-exact episodes ([`TraceReader`](crate::proxy::TraceReader)).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use sandgym_chat_api::ChatRequest;
use sandgym_proxy::chat;
use sandgym_proxy::http::{self, HttpError, Request, Response, Server};

use crate::env_api::{Action, ActionBody, Demonstration, Narrowing, ResetOptions};
use crate::policy::{ActionLimits, Template, Tokenizer, canonical_json};
use crate::{EnvTarget, registry};

/// The note that ends a context which cannot take the demonstrator's next action.
fn note(next: &Action) -> String {
    match &next.body {
        ActionBody::ToolCall(call) => format!("Use {} next.", call.tool_name),
        ActionBody::Response(_) => "Ready to answer.".to_owned(),
    }
}

/// The demonstrator's episode of one rollout.
#[derive(Clone, Debug)]
struct Script {
    /// The actions it took, in order.
    actions: Vec<Action>,
    /// The tools its episode offers (after the episode's narrowing).
    tools: Vec<String>,
    /// The next action to answer with.
    next: usize,
}

impl Script {
    /// The answer to a call offering `offered` tools, and whether it is a note.
    fn answer(&mut self, offered: &[&str]) -> Result<(Action, bool), HttpError> {
        let Some(action) = self.actions.get(self.next) else {
            return Err(HttpError::new(
                409,
                "the demonstrator's episode is over: it has no answer left for this rollout",
            ));
        };
        let fits = match &action.body {
            ActionBody::ToolCall(call) => offered.contains(&call.tool_name.as_str()),
            // The final answer goes to the context that has every tool: the main agent's.
            ActionBody::Response(_) => self.tools.iter().all(|t| offered.contains(&t.as_str())),
        };
        if fits {
            self.next += 1;
            Ok((action.clone(), false))
        } else {
            Ok((Action::respond(note(action)), true))
        }
    }
}

struct State {
    tokenizer: Tokenizer,
    limits: ActionLimits,
    scripts: Mutex<HashMap<String, Script>>,
    answers: AtomicUsize,
    notes: AtomicUsize,
}

/// The demonstrator behind an OpenAI-compatible server (see the module docs).
pub struct Teacher {
    server: Server,
    state: Arc<State>,
}

impl std::fmt::Debug for Teacher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teacher")
            .field("addr", &self.server.addr())
            .field("answers", &self.answers())
            .finish_non_exhaustive()
    }
}

impl Teacher {
    /// Starts the server on a free local port; `tokenizer` is the policy's, whose template
    /// the token ids of the answers follow, and `limits` the policy's action limits: a
    /// thought is cut to them as the env approach's SFT cuts it, so every answer is one the
    /// policy's constraint can produce.
    pub fn start(tokenizer: Tokenizer, limits: ActionLimits) -> anyhow::Result<Self> {
        let state = Arc::new(State {
            tokenizer,
            limits,
            scripts: Mutex::new(HashMap::new()),
            answers: AtomicUsize::new(0),
            notes: AtomicUsize::new(0),
        });
        let shared = state.clone();
        let server = Server::start("127.0.0.1:0", move |request| handle(&shared, &request))?;
        Ok(Self { server, state })
    }

    /// The base URL (without `/v1`), for a proxy's upstream.
    pub fn url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// Plays the demonstrator on each `(rollout, seed)` episode of `target` reset with
    /// `options` and keeps its actions for the rollout's calls. An env without a demonstrator
    /// is an error.
    pub fn assign(
        &self,
        target: &EnvTarget,
        options: &ResetOptions,
        rollouts: &[(String, u64)],
    ) -> anyhow::Result<()> {
        let id = target.id()?;
        let mut agent = registry::demonstrator(&id, &target.config, Demonstration::Solution)?
            .with_context(|| format!("{id} has no demonstrator to teach with"))?;
        let spec = target.spec()?;
        let played = crate::play::play_env_with(
            target.make_fastest()?,
            rollouts.iter().map(|(_, seed)| *seed),
            options,
            &mut *agent,
        )?;
        let mut scripts = lock(&self.state.scripts);
        for ((rollout, _), episode) in rollouts.iter().zip(played) {
            let tools = match Narrowing::from_info(&episode.reset_info)? {
                Some(narrowing) => narrowing.apply(spec)?,
                None => spec.clone(),
            }
            .tools
            .into_iter()
            .map(|t| t.name)
            .collect();
            let thought_chars = self.state.limits.thought_chars as usize;
            let actions = episode
                .trajectory
                .records
                .iter()
                .filter_map(|r| r.to_action())
                .map(|mut a| {
                    a.thought = a.thought.chars().take(thought_chars).collect();
                    a
                })
                .collect();
            scripts.insert(
                rollout.clone(),
                Script {
                    actions,
                    tools,
                    next: 0,
                },
            );
        }
        Ok(())
    }

    /// Calls answered (notes included).
    pub fn answers(&self) -> usize {
        self.state.answers.load(Ordering::Relaxed)
    }

    /// Of which notes that ended a context unable to take the next action.
    pub fn notes(&self) -> usize {
        self.state.notes.load(Ordering::Relaxed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn handle(state: &State, request: &Request) -> Response {
    let answer = match (request.method.as_str(), request.route()) {
        ("POST", "/v1/chat/completions") => completion(state, request),
        (_, "/v1/chat/completions") => Err(HttpError::new(405, "use POST")),
        (_, path) => Err(HttpError::new(404, format!("no route {path}"))),
    };
    answer.map_or_else(Response::from, |body| Response::bytes(200, body))
}

fn completion(state: &State, request: &Request) -> Result<Vec<u8>, HttpError> {
    let chat: ChatRequest = http::parse(&request.body)?;
    let rollout = request.header("x-rollout-id").ok_or_else(|| {
        HttpError::bad_request("the teacher answers a rollout's calls: send x-rollout-id")
    })?;
    let offered: Vec<&str> = chat
        .tools
        .iter()
        .map(|t| t.function.name.as_str())
        .collect();
    let (action, is_note) = lock(&state.scripts)
        .get_mut(rollout)
        .ok_or_else(|| HttpError::new(404, format!("no task was assigned to rollout {rollout}")))?
        .answer(&offered)?;
    let specs = chat::tool_specs(&chat.tools)?;
    let prompt = chat::render(&state.tokenizer, &specs, &chat.messages)?;
    let number = state.answers.fetch_add(1, Ordering::Relaxed);
    if is_note {
        state.notes.fetch_add(1, Ordering::Relaxed);
    }
    let (message, finish) =
        chat::assistant_message(&canonical_json(&action), &format!("call_{number}"));
    // The ids of what the harness will send back for this message, so that its next prompt
    // extends this one exactly.
    let sent = chat::assistant_actions(&message)?;
    let template = Template::new(&state.tokenizer);
    let mut ids = Vec::new();
    for a in &sent {
        let rendered = template
            .action(a)
            .map_err(|e| HttpError::new(500, e.to_string()))?;
        ids.extend(
            rendered
                .ids
                .iter()
                .zip(&rendered.loss_mask)
                .filter(|(_, trainable)| **trainable)
                .map(|(&id, _)| id),
        );
    }
    let response = chat::response(
        &state.tokenizer,
        format!("teacher-{number}"),
        chat.model.clone(),
        prompt,
        (message, finish),
        &ids,
        &vec![0.0; ids.len()],
    );
    serde_json::to_vec(&response).map_err(|e| HttpError::new(500, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(actions: Vec<Action>) -> Script {
        Script {
            actions,
            tools: vec!["list_tables".into(), "run_sql".into()],
            next: 0,
        }
    }

    /// A call the teacher cannot answer gets a typed HTTP error, not an invented answer.
    #[test]
    fn calls_it_cannot_answer_get_errors() {
        let teacher = Teacher::start(
            crate::training::default_tokenizer().unwrap(),
            ActionLimits::default(),
        )
        .unwrap();
        let url = format!("{}/v1/chat/completions", teacher.url());
        let status = |body: &str, rollout: Option<&str>| {
            let mut request = ureq::post(&url).header("content-type", "application/json");
            if let Some(id) = rollout {
                request = request.header("x-rollout-id", id);
            }
            match request.send(body) {
                Ok(r) => r.status().as_u16(),
                Err(ureq::Error::StatusCode(code)) => code,
                Err(e) => panic!("{e}"),
            }
        };
        let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#;
        assert_eq!(status("{not json", Some("r-1")), 400);
        assert_eq!(status(chat, None), 400);
        assert_eq!(status(chat, Some("r-1")), 404);
        assert_eq!(teacher.answers(), 0);
    }

    #[test]
    fn a_context_without_the_next_tool_gets_a_note_and_the_action_waits() {
        let mut s = script(vec![
            Action::tool("run_sql", serde_json::json!({"query": "SELECT 1"})),
            Action::respond("SELECT 1"),
        ]);
        // The sub-agent: only list_tables.
        let (a, is_note) = s.answer(&["list_tables"]).unwrap();
        assert!(is_note);
        assert_eq!(a, Action::respond("Use run_sql next."));
        // The main agent: every tool.
        let (a, is_note) = s.answer(&["list_tables", "run_sql"]).unwrap();
        assert!(!is_note);
        assert_eq!(a.tool_call().map(|c| c.tool_name.as_str()), Some("run_sql"));
        // The final answer only where every tool is offered.
        assert_eq!(
            s.answer(&["run_sql"]).unwrap().0,
            Action::respond("Ready to answer.")
        );
        let (a, is_note) = s.answer(&["run_sql", "list_tables"]).unwrap();
        assert!(!is_note);
        assert_eq!(a, Action::respond("SELECT 1"));
        // Past the episode's end: an error the harness run reports, not an invented answer.
        assert_eq!(
            s.answer(&["run_sql", "list_tables"]).unwrap_err().status,
            409
        );
    }
}

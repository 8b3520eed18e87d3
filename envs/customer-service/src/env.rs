//! `SupportEnv`: the customer-service environment.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use sandgym_env_api::{
    Action, ActionBody, Done, Env, EnvError, EnvId, EnvSpec, Observation, ResetOptions, Result,
    Schema, ToolCall, ToolSpec, begin_step,
};

use crate::customer;
use crate::narrowing;
use crate::tasks::{self, Task};
use crate::wordings::TrainWordings;
use crate::world::{
    Email, KNOWLEDGE_BASE, OrderStatus, POLICY, RETURN_WINDOW_DAYS, Return, World, return_window,
    returnable,
};

/// Reward settings (the `"reward"` object of the env configuration).
///
/// As in tau-bench, an episode succeeds only when the final orders and returns equal the
/// task's expected state (every required write made, no wrong write) *and* the agent's
/// messages to the customer (replies, the final response, e-mails to the customer) contain
/// every required fact. Success earns `success`; each policy violation (a write before the
/// customer's identity was verified, an e-mail to another address, a write the policy
/// forbids) costs `violation`. Intermediate steps earn 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SupportReward {
    /// Reward for success.
    pub success: f64,
    /// Penalty (negative) per policy violation.
    pub violation: f64,
}

impl Default for SupportReward {
    fn default() -> Self {
        Self {
            success: 1.0,
            violation: -0.25,
        }
    }
}

/// The env configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SupportConfig {
    /// Reward settings.
    pub reward: SupportReward,
    /// The wordings the train split says its requests in (all ten by default; the test split's
    /// is never among them).
    pub train_wordings: TrainWordings,
}

const MAX_VIOLATIONS: usize = 4;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Episode {
    task: usize,
    world: World,
    verified: Option<String>,
    messages: Vec<String>,
    violations: Vec<String>,
    last: Observation,
    reward: f64,
    done: Done,
}

/// The customer-service env (`customer-service-v0`). A clone shares the tasks and copies the
/// episode.
#[derive(Clone)]
pub struct SupportEnv {
    spec: EnvSpec,
    tasks: std::sync::Arc<Vec<Task>>,
    config: SupportConfig,
    episode: Episode,
    started: bool,
}

impl std::fmt::Debug for SupportEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupportEnv")
            .field("episode", &self.episode.task)
            .finish_non_exhaustive()
    }
}

fn order_param() -> Schema {
    Schema::string()
        .with_pattern("^O[0-9]{4}$")
        .with_length(5, 5)
}

fn spec(reward: &SupportReward) -> EnvSpec {
    let text = |max| Schema::string().with_length(1, max);
    EnvSpec::new(EnvId::new("customer-service", 0).expect("valid id"))
        .with_description("Resolve an e-commerce customer's request with order tools, following the written policy. Reward 1 when the final orders/returns match the expected state and the replies carry the required facts; -0.25 per policy violation.")
        .with_tool(ToolSpec::new("lookup_customer", "Find a customer by the e-mail on the account (the identity check); lists their orders.")
            .with_parameters(Schema::object().property("email", text(100), true)))
        .with_tool(ToolSpec::new("get_order_status", "Show an order: item, total, status, address, dates.")
            .with_parameters(Schema::object().property("order_id", order_param(), true)))
        .with_tool(ToolSpec::new("get_tracking", "Show the carrier, tracking number and estimated delivery day of a shipped order.")
            .with_parameters(Schema::object().property("order_id", order_param(), true)))
        .with_tool(ToolSpec::new("search_kb", "Search the knowledge base (policies on returns, refunds, cancellations, addresses, late deliveries, identity).")
            .with_parameters(Schema::object().property("query", text(200), true)))
        .with_tool(ToolSpec::new("cancel_order", "Cancel an order.")
            .with_parameters(Schema::object().property("order_id", order_param(), true)))
        .with_tool(ToolSpec::new("create_return", "Open a return for a delivered order.")
            .with_parameters(Schema::object().property("order_id", order_param(), true).property("reason", text(200), true)))
        .with_tool(ToolSpec::new("update_address", "Change an order's delivery address.")
            .with_parameters(Schema::object().property("order_id", order_param(), true).property("address", text(narrowing::MAX_ADDRESS_CHARS as u64), true)))
        .with_tool(ToolSpec::new("send_email", "E-mail a customer.")
            .with_parameters(Schema::object().property("to", text(100), true).property("subject", text(200), true).property("body", text(2000), true)))
        .with_tool(ToolSpec::new("reply_to_customer", "Send the customer a chat message and read their answer.")
            .with_parameters(Schema::object().property("message", text(2000), true)))
        .with_reward_range(reward.violation.min(0.0) * MAX_VIOLATIONS as f64, reward.success.max(0.0))
        .with_max_episode_steps(12)
}

impl SupportEnv {
    /// The env with default settings.
    pub fn new() -> Self {
        Self::with_config(SupportConfig::default())
    }

    /// The env with the given settings.
    pub fn with_config(config: SupportConfig) -> Self {
        // The bundled tasks are generated once per process and shared by every env; other
        // train wordings are generated for each env made with them (360 small tasks).
        static BUNDLED: std::sync::OnceLock<std::sync::Arc<Vec<Task>>> = std::sync::OnceLock::new();
        let tasks = if config.train_wordings.is_all() {
            BUNDLED
                .get_or_init(|| std::sync::Arc::new(tasks::bundled()))
                .clone()
        } else {
            std::sync::Arc::new(tasks::bundled_with(&config.train_wordings))
        };
        Self {
            spec: spec(&config.reward).with_tasks(sandgym_env_api::TaskCounts::of(
                tasks.iter().map(|t| t.split),
            )),
            tasks,
            config,
            episode: Episode::default(),
            started: false,
        }
    }

    /// Builds from a registry configuration object.
    pub fn from_config(config: &Map<String, Value>) -> Result<Self> {
        let config: SupportConfig =
            serde_json::from_value(Value::Object(config.clone())).map_err(|e| {
                EnvError::InvalidConfig {
                    reason: format!("customer-service: {e}"),
                }
            })?;
        Ok(Self::with_config(config))
    }

    /// Registers `customer-service-v0` in the process-wide registry.
    pub fn register() {
        sandgym_env_api::register(
            "customer-service-v0",
            "Resolve e-commerce support requests with order tools under a written policy.",
            |c| Ok(Box::new(SupportEnv::from_config(c)?)),
        )
        .expect("valid id");
    }

    /// The bundled tasks.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// The current task.
    pub fn task(&self) -> &Task {
        &self.tasks[self.episode.task]
    }

    fn violation(&mut self, what: String) {
        self.episode.violations.push(what);
    }

    /// Checks identity before a write on `order_id`; records a violation if it was not verified.
    fn check_identity(&mut self, order_id: &str) {
        let owner = self
            .episode
            .world
            .orders
            .get(order_id)
            .map(|o| o.customer_id.clone());
        if owner.is_none() || self.episode.verified != owner {
            self.violation(format!(
                "changed order {order_id} without verifying the customer's identity"
            ));
        }
    }

    fn run_tool(&mut self, call: &ToolCall) -> String {
        let p = |k: &str| {
            call.parameters
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_owned()
        };
        let today = self.episode.world.today;
        match call.tool_name.as_str() {
            "lookup_customer" => match self.episode.world.customer_by_email(&p("email")).cloned() {
                Some(c) => {
                    self.episode.verified = Some(c.id.clone());
                    let orders: Vec<String> = self
                        .episode
                        .world
                        .orders
                        .values()
                        .filter(|o| o.customer_id == c.id)
                        .map(|o| format!("{} ({})", o.id, o.item))
                        .collect();
                    format!(
                        "Customer {} {} <{}>; orders: {}",
                        c.id,
                        c.name,
                        c.email,
                        orders.join(", ")
                    )
                }
                None => format!("No customer with e-mail {}.", p("email")),
            },
            "get_order_status" => match self.episode.world.orders.get(&p("order_id")) {
                Some(o) => {
                    let mut text = format!(
                        "Order {}: {}, total ${}.{:02}, ordered on day {}, status {}, ship to {}.",
                        o.id,
                        o.item,
                        o.total_cents / 100,
                        o.total_cents % 100,
                        o.ordered_day,
                        o.status.as_str(),
                        o.address
                    );
                    if let Some(day) = o.delivered_day {
                        text.push_str(&format!(
                            " Delivered on day {day}; {}.",
                            return_window(day, today)
                        ));
                    }
                    text.push_str(&format!(" Today is day {today}."));
                    text
                }
                None => format!("No order {}.", p("order_id")),
            },
            "get_tracking" => match self.episode.world.orders.get(&p("order_id")) {
                Some(o) => match (&o.tracking, o.eta_day) {
                    (Some((carrier, number)), Some(eta)) => format!(
                        "Order {}: carrier {carrier}, tracking number {number}, estimated delivery day {eta} (today is day {today}).",
                        o.id
                    ),
                    _ => format!("Order {} has not shipped yet.", o.id),
                },
                None => format!("No order {}.", p("order_id")),
            },
            "search_kb" => {
                let query = p("query").to_lowercase();
                let words: Vec<&str> = query
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 2)
                    .collect();
                let best = KNOWLEDGE_BASE
                    .iter()
                    .max_by_key(|a| {
                        let hay = format!("{} {}", a.title, a.text).to_lowercase();
                        words.iter().filter(|w| hay.contains(*w)).count()
                    })
                    .expect("the knowledge base is not empty");
                format!("{}: {}", best.title, best.text)
            }
            "cancel_order" => {
                let id = p("order_id");
                let Some(status) = self.episode.world.orders.get(&id).map(|o| o.status) else {
                    return format!("No order {id}.");
                };
                self.check_identity(&id);
                match status {
                    OrderStatus::Cancelled => format!("Order {id} is already cancelled."),
                    OrderStatus::Delivered => {
                        format!("Order {id} was delivered and cannot be cancelled.")
                    }
                    OrderStatus::Processing | OrderStatus::Shipped => {
                        if status == OrderStatus::Shipped {
                            self.violation(format!(
                                "cancelled order {id}, which had already shipped"
                            ));
                        }
                        self.episode
                            .world
                            .orders
                            .get_mut(&id)
                            .expect("exists")
                            .status = OrderStatus::Cancelled;
                        format!("Order {id} cancelled.")
                    }
                }
            }
            "create_return" => {
                let id = p("order_id");
                let Some(order) = self.episode.world.orders.get(&id).cloned() else {
                    return format!("No order {id}.");
                };
                self.check_identity(&id);
                let Some(delivered) = order
                    .delivered_day
                    .filter(|_| order.status == OrderStatus::Delivered)
                else {
                    return format!(
                        "Order {id} has not been delivered; only delivered orders can be returned."
                    );
                };
                if !returnable(delivered, today) {
                    self.violation(format!(
                        "opened a return for {id}, delivered more than {RETURN_WINDOW_DAYS} days ago"
                    ));
                }
                let rid = format!("R{}", &id[1..]);
                self.episode.world.returns.insert(
                    rid.clone(),
                    Return {
                        id: rid.clone(),
                        order_id: id.clone(),
                        reason: p("reason"),
                    },
                );
                format!("Return {rid} created for order {id}.")
            }
            "update_address" => {
                let id = p("order_id");
                let Some(status) = self.episode.world.orders.get(&id).map(|o| o.status) else {
                    return format!("No order {id}.");
                };
                self.check_identity(&id);
                if status != OrderStatus::Processing {
                    self.violation(format!(
                        "changed the address of order {id}, which is {}",
                        status.as_str()
                    ));
                }
                self.episode
                    .world
                    .orders
                    .get_mut(&id)
                    .expect("exists")
                    .address = p("address");
                format!("Address of order {id} set to {}.", p("address"))
            }
            "send_email" => {
                let to = p("to").to_lowercase();
                let own = self
                    .episode
                    .verified
                    .as_ref()
                    .map(|c| self.episode.world.customers[c].email.clone());
                if own.as_deref() != Some(to.as_str()) {
                    self.violation(format!(
                        "e-mailed {to}, which is not the verified customer's address"
                    ));
                } else {
                    self.episode
                        .messages
                        .push(format!("{} {}", p("subject"), p("body")));
                }
                self.episode.world.emails.push(Email {
                    to: to.clone(),
                    subject: p("subject"),
                    body: p("body"),
                });
                format!("E-mail sent to {to}.")
            }
            _ => {
                let message = p("message");
                self.episode.messages.push(message.clone());
                let task = &self.tasks[self.episode.task];
                format!("Customer: {}", customer::reply(task, &message))
            }
        }
    }

    fn finish(&mut self, response: &str) -> Observation {
        self.episode.messages.push(response.to_owned());
        let task = &self.tasks[self.episode.task];
        let db_match = self.episode.world.state() == task.expected.state();
        let said = self.episode.messages.join("\n").to_lowercase();
        let missing: Vec<String> = task
            .facts
            .iter()
            .filter(|f| !said.contains(&f.to_lowercase()))
            .cloned()
            .collect();
        let success = db_match && missing.is_empty();
        let violations = self.episode.violations.len().min(MAX_VIOLATIONS) as f64;
        let reward = &self.config.reward;
        self.episode.reward =
            if success { reward.success } else { 0.0 } + reward.violation * violations;
        self.episode.done = Done::Terminated;
        Observation::new("The conversation is closed.")
            .with_info("success", success)
            .with_info("db_match", db_match)
            .with_info("facts_missing", missing)
            .with_info("violations", self.episode.violations.clone())
    }
}

impl Default for SupportEnv {
    fn default() -> Self {
        Self::new()
    }
}

fn instruction(task: &Task) -> String {
    format!(
        "You are the support agent of an online shop. Today is day {}. {POLICY}\nCustomer: {}",
        task.world.today, task.opening
    )
}

impl Env for SupportEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: u64, options: &ResetOptions) -> Result<Observation> {
        let task =
            options.choose_task(seed, self.tasks.iter().map(|t| (t.id.as_str(), t.split)))?;
        let t = &self.tasks[task];
        let last = Observation::new(instruction(t))
            .with_info("task", t.id.clone())
            .with_info(
                "intent",
                serde_json::to_value(t.intent).expect("serialisable"),
            )
            .with_narrowing(&narrowing::narrowing(t, order_param()));
        self.episode = Episode {
            task,
            world: t.world.clone(),
            last: last.clone(),
            ..Episode::default()
        };
        self.started = true;
        Ok(last)
    }

    fn observe(&self) -> Observation {
        self.episode.last.clone()
    }

    fn step(&mut self, action: &Action) -> Result<Observation> {
        begin_step(self.started, self.episode.done, &self.spec.tools, action)?;
        let obs = match &action.body {
            ActionBody::ToolCall(call) => {
                self.episode.reward = 0.0;
                Observation::new(self.run_tool(call))
            }
            ActionBody::Response(text) => self.finish(text),
        };
        self.episode.last = obs.clone();
        Ok(obs)
    }

    fn reward(&self) -> f64 {
        self.episode.reward
    }

    fn done(&self) -> Done {
        self.episode.done
    }

    fn snapshot(&mut self) -> Result<Vec<u8>> {
        serde_json::to_vec(&(&self.episode, self.started)).map_err(|e| EnvError::Snapshot {
            reason: e.to_string(),
        })
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<()> {
        let (episode, started): (Episode, bool) =
            serde_json::from_slice(snapshot).map_err(|e| EnvError::Snapshot {
                reason: format!("not a customer-service snapshot: {e}"),
            })?;
        if episode.task >= self.tasks.len() {
            return Err(EnvError::Snapshot {
                reason: "task index out of range".into(),
            });
        }
        self.episode = episode;
        self.started = started;
        Ok(())
    }
}

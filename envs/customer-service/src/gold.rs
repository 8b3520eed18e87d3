//! The gold demonstrator: an agent that resolves every task the way the policy says.

use std::collections::HashMap;

use sandgym_env_api::{Action, Agent, Observation};
use serde_json::{Value, json};

use crate::tasks::{Intent, Task};
use crate::world::{OrderStatus, return_window};

/// Plays each task's correct resolution, as a careful human agent following the written policy
/// would: it asks for the order number and e-mail, verifies the customer, reads the order, then
/// acts on what the customer asked and what the order shows (cancels or re-addresses only a
/// processing order, opens a return only within 30 days of delivery, with the customer's own
/// reason, gives the carrier and tracking number of a late parcel, looks up the refund policy)
/// and tells the customer the outcome. Every thought starts with the same label of the request
/// (`"Refund question: …"`) and, where the decision turns on it, states the fact it turns on,
/// so a model imitating these episodes classifies the request once, next to the customer's
/// words, and afterwards copies its own label rather than classifying again.
///
/// Its episodes are demonstrations for a supervised warm-start that cover all nine intents,
/// the refusals included — which the scripted [`SupportBaseline`](crate::SupportBaseline)
/// gets wrong for both kinds of return. It reads the task from the reset observation's `task`
/// info.
///
/// ```
/// use sandgym_env_api::{Agent, Env, ResetOptions};
/// use sandgym_env_support::{SupportEnv, SupportGold};
/// let mut env = SupportEnv::new();
/// let mut agent = SupportGold::new(env.tasks());
/// let mut obs = env.reset(4, &ResetOptions::default())?;
/// while !env.done().is_done() {
///     obs = env.step(&agent.act(&obs))?;
/// }
/// assert_eq!(obs.info["success"], true);
/// assert_eq!(env.reward(), 1.0);
/// # Ok::<(), sandgym_env_api::EnvError>(())
/// ```
#[derive(Clone, Debug)]
pub struct SupportGold {
    tasks: HashMap<String, Task>,
    task: Option<Task>,
    turn: usize,
}

/// How a thought names what the customer asked (the request, not its outcome).
fn request(intent: Intent) -> &'static str {
    match intent {
        Intent::OrderStatus => "Status request",
        Intent::LateDelivery => "Late delivery",
        Intent::Cancel | Intent::CancelShipped => "Cancellation",
        Intent::Return | Intent::ReturnExpired => "Return",
        Intent::AddressChange | Intent::AddressShipped => "Address change",
        Intent::RefundQuestion => "Refund question",
    }
}

/// The target order's status as the task starts.
fn status(task: &Task) -> &'static str {
    task.world
        .orders
        .get(&task.order_id)
        .map_or(OrderStatus::Processing, |o| o.status)
        .as_str()
}

/// The address the task expects the target order to end with.
fn new_address(task: &Task) -> String {
    task.expected
        .orders
        .get(&task.order_id)
        .map(|o| o.address.clone())
        .unwrap_or_default()
}

impl SupportGold {
    /// The demonstrator of `tasks`.
    pub fn new(tasks: &[Task]) -> Self {
        Self {
            tasks: tasks.iter().map(|t| (t.id.clone(), t.clone())).collect(),
            task: None,
            turn: 0,
        }
    }

    /// The demonstrator of the bundled tasks (the default configuration's; another
    /// `train_wordings` says the train tasks otherwise: [`SupportGold::new`] with its tasks).
    pub fn bundled() -> Self {
        Self::new(&crate::tasks::bundled())
    }
}

impl Agent for SupportGold {
    fn act(&mut self, observation: &Observation) -> Action {
        if let Some(task) = observation
            .info
            .get("task")
            .and_then(Value::as_str)
            .and_then(|id| self.tasks.get(id))
        {
            self.task = Some(task.clone());
            self.turn = 0;
        }
        self.turn += 1;
        let Some(task) = self
            .task
            .as_ref()
            .filter(|t| t.world.orders.contains_key(&t.order_id))
        else {
            return Action::respond("Sorry, I can't find your request.");
        };
        let what = request(task.intent);
        let order = task.order_id.as_str();
        match self.turn {
            1 => Action::tool(
                "reply_to_customer",
                json!({"message": "I can help with that. Could you give me your order number and the e-mail address on your account?"}),
            )
            .with_thought(format!("{what}: ask for the order number and e-mail.")),
            2 => {
                let email = task
                    .world
                    .customers
                    .get(&task.customer_id)
                    .map(|c| c.email.clone())
                    .unwrap_or_default();
                Action::tool("lookup_customer", json!({"email": email}))
                    .with_thought(format!("{what}: verify the customer by e-mail."))
            }
            3 => Action::tool("get_order_status", json!({"order_id": order}))
                .with_thought(format!("{what}: read the order.")),
            4 => decide(task),
            _ => conclude(task),
        }
    }
}

/// The step after reading the order: the write, the lookup, or the answer.
fn decide(task: &Task) -> Action {
    let order = task.order_id.as_str();
    let status = status(task);
    let what = request(task.intent);
    match task.intent {
        Intent::OrderStatus => Action::respond(format!("Your order {order} is {status}."))
            .with_thought(format!("{what}: the order is {status}.")),
        Intent::LateDelivery => Action::tool("get_tracking", json!({"order_id": order}))
            .with_thought(format!("{what}: read the tracking.")),
        Intent::Cancel => Action::tool("cancel_order", json!({"order_id": order}))
            .with_thought(format!("{what}: the order is processing, so cancel it.")),
        Intent::CancelShipped => Action::respond(format!(
            "Your order {order} has already shipped, so it can't be cancelled. You can return it after delivery."
        ))
        .with_thought(format!("{what}: the order has shipped, so it can't be cancelled.")),
        Intent::Return => {
            let reason = task
                .expected
                .returns
                .values()
                .find(|r| r.order_id == order)
                .map(|r| r.reason.clone())
                .unwrap_or_default();
            Action::tool(
                "create_return",
                json!({"order_id": order, "reason": reason}),
            )
            .with_thought(format!("{what}: {}, so open a return.", window(task)))
        }
        Intent::ReturnExpired => Action::respond(format!(
            "Your order {order} was delivered more than 30 days ago, so it can't be returned."
        ))
        .with_thought(format!("{what}: {}, so it can't be returned.", window(task))),
        Intent::AddressChange => {
            let address = new_address(task);
            Action::tool(
                "update_address",
                json!({"order_id": order, "address": address}),
            )
            .with_thought(format!("{what}: the order is processing, so update it."))
        }
        Intent::AddressShipped => Action::respond(format!(
            "Your order {order} has already shipped, so the address can't be changed."
        ))
        .with_thought(format!("{what}: the order has shipped, so it can't be changed.")),
        Intent::RefundQuestion => Action::tool("search_kb", json!({"query": "refund"}))
            .with_thought(format!("{what}: look up the refund policy.")),
    }
}

/// What the target order's record says of its return window (the fact a return's decision
/// turns on), as the order tool words it.
fn window(task: &Task) -> String {
    let day = task
        .world
        .orders
        .get(&task.order_id)
        .and_then(|o| o.delivered_day)
        .unwrap_or(task.world.today);
    return_window(day, task.world.today)
}

/// The answer after the write or the lookup.
fn conclude(task: &Task) -> Action {
    let order = task.order_id.as_str();
    let what = request(task.intent);
    match task.intent {
        Intent::LateDelivery => {
            let (carrier, number) = task
                .world
                .orders
                .get(order)
                .and_then(|o| o.tracking.clone())
                .unwrap_or_default();
            Action::respond(format!(
                    "Sorry for the delay. Your order is with {carrier}, tracking number {number}; the carrier is investigating."
                ))
                .with_thought(format!("{what}: give the carrier and tracking number."))
        }
        Intent::Cancel => Action::respond(format!("Your order {order} has been cancelled."))
            .with_thought(format!("{what}: the order is cancelled.")),
        Intent::Return => Action::respond(format!(
            "I've opened return R{} for your order {order}.",
            order.get(1..).unwrap_or(order)
        ))
        .with_thought(format!("{what}: the return is open.")),
        Intent::AddressChange => Action::respond(format!(
            "Done: your order {order} will be delivered to {}.",
            new_address(task)
        ))
        .with_thought(format!("{what}: the address is updated.")),
        Intent::RefundQuestion => {
            Action::respond("Refunds arrive 5-7 business days after we receive your return.")
                .with_thought(format!("{what}: refunds take 5-7 business days."))
        }
        // The others answered in `decide`; a further turn only closes politely.
        _ => Action::respond(format!("Your order {order} is {}.", status(task))),
    }
}

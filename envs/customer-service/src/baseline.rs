//! The scripted baseline: the rule-based logic of a typical hand-written support bot.

use sandgym_env_api::{Action, Agent, Observation};
use serde_json::json;

/// A rule-based support agent. It asks for the order number and e-mail, verifies the customer,
/// reads the order, then acts on keywords of the customer's first message ("cancel", "return",
/// "address", "late", "refund"). Like many hand-written bots it follows some of the policy and
/// misses the rest: it never checks the 30-day return window.
#[derive(Clone, Debug, Default)]
pub struct SupportBaseline {
    opening: String,
    order: Option<String>,
    email: Option<String>,
    status: Option<String>,
    stage: u8,
}

fn find_order(text: &str) -> Option<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .find(|w| w.len() == 5 && w.starts_with('O') && w[1..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
}

fn find_email(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.contains('@'))
        .map(|w| w.trim_end_matches(['.', ',']).to_owned())
}

fn after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.rfind(marker).map(|at| &text[at + marker.len()..])
}

/// The pleasantries a customer ends an address-change request with, as the bot's authors met
/// them; whatever follows the address and is not among them stays part of it.
const ADDRESS_TAILS: [&str; 8] = [
    ", please",
    " instead",
    ", thank you",
    ", if possible",
    " rather than the old address",
    " from now on",
    ". Can you change that?",
    ". Thanks!",
];

/// The new address in a customer's request: what follows the last " to ", " is " or ": ",
/// without a closing pleasantry or full stop; `None` when nothing is left.
fn new_address(opening: &str) -> Option<String> {
    let mut address = [" to ", " is ", ": "]
        .iter()
        .find_map(|marker| after(opening, marker))?
        .trim();
    loop {
        let before = address;
        address = address.trim_end_matches('.');
        for tail in ADDRESS_TAILS {
            address = address.trim_end_matches(tail);
        }
        if address == before {
            break;
        }
    }
    let address = address.trim();
    (!address.is_empty()).then(|| address.to_owned())
}

impl Agent for SupportBaseline {
    fn act(&mut self, observation: &Observation) -> Action {
        let text = &observation.content;
        if let Some(opening) = text.split_once("\nCustomer: ").map(|(_, o)| o.to_owned()) {
            *self = Self {
                opening,
                ..Self::default()
            };
            return Action::tool(
                "reply_to_customer",
                json!({"message": "I can help with that. Could you give me your order number and the e-mail address on your account?"}),
            )
            .with_thought("Ask for the details needed for the identity check.");
        }
        self.order = self.order.take().or_else(|| find_order(text));
        self.email = self.email.take().or_else(|| find_email(text));
        if text.starts_with("Order ") && text.contains(", status ") {
            self.status = text
                .split(", status ")
                .nth(1)
                .and_then(|s| s.split(',').next())
                .map(str::to_owned);
        }
        let (Some(order), Some(email)) = (self.order.clone(), self.email.clone()) else {
            return Action::respond("Sorry, I need your order number and e-mail to help.");
        };
        self.stage += 1;
        let o = self.opening.to_lowercase();
        match self.stage {
            1 => Action::tool("lookup_customer", json!({"email": email}))
                .with_thought("Verify identity."),
            2 => Action::tool("get_order_status", json!({"order_id": order}))
                .with_thought("Read the order."),
            _ => self.resolve(&o, &order, text),
        }
    }
}

impl SupportBaseline {
    fn resolve(&mut self, o: &str, order: &str, last: &str) -> Action {
        let status = self.status.clone().unwrap_or_default();
        let processing = status == "processing";
        if o.contains("refund") || o.contains("money") {
            if self.stage == 3 {
                return Action::tool("search_kb", json!({"query": "refund"}));
            }
            return Action::respond(
                "Refunds arrive 5-7 business days after we receive your return.",
            );
        }
        if o.contains("cancel") {
            if processing && self.stage == 3 {
                return Action::tool("cancel_order", json!({"order_id": order}));
            }
            if processing {
                return Action::respond(format!("Your order {order} has been cancelled."));
            }
            return Action::respond(format!(
                "Your order {order} has already {status}, so it can't be cancelled. You can return it after delivery."
            ));
        }
        if o.contains("return") || o.contains("send back") {
            if self.stage == 3 {
                return Action::tool(
                    "create_return",
                    json!({"order_id": order, "reason": "customer request"}),
                );
            }
            return Action::respond(format!(
                "I've opened return R{} for your order.",
                &order[1..]
            ));
        }
        if o.contains("address") || o.contains(" to ") {
            let Some(address) = new_address(&self.opening) else {
                // Nothing that reads as an address: ask rather than send an empty one.
                return Action::respond("What is the new delivery address?");
            };
            if processing && self.stage == 3 {
                return Action::tool(
                    "update_address",
                    json!({"order_id": order, "address": address}),
                );
            }
            if processing {
                return Action::respond(format!(
                    "Done: your order will be delivered to {address}."
                ));
            }
            return Action::respond(format!(
                "Your order has already {status}, so the address can't be changed."
            ));
        }
        if o.contains("late")
            || o.contains("still")
            || o.contains("passed")
            || o.contains("waiting")
        {
            if self.stage == 3 {
                return Action::tool("get_tracking", json!({"order_id": order}));
            }
            let tracking = last.split(": ").nth(1).unwrap_or(last);
            return Action::respond(format!("Sorry for the delay. {tracking}"));
        }
        Action::respond(format!("Your order {order} is {status}."))
    }
}

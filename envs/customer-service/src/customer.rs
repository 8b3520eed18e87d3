//! The simulated customer: deterministic replies that reveal details only when asked.

use crate::tasks::Task;

/// The customer's reply to an agent message. The order number and the e-mail address are given
/// only when the message asks for them; anything else gets a short, fixed answer.
pub fn reply(task: &Task, message: &str) -> String {
    let m = message.to_lowercase();
    let asks_order = m.contains("order")
        && (m.contains("number") || m.contains(" id") || m.contains("order id"));
    let asks_email = m.contains("email") || m.contains("e-mail");
    let email = &task.world.customers[&task.customer_id].email;
    match (asks_order, asks_email) {
        (true, true) => format!(
            "Sure, my order number is {} and my e-mail is {email}.",
            task.order_id
        ),
        (true, false) => format!("It's order {}.", task.order_id),
        (false, true) => format!("My e-mail is {email}."),
        (false, false) if m.contains('?') => {
            "I'm not sure what you need from me. Can you just sort out my request?".to_owned()
        }
        (false, false) => "Okay, thank you.".to_owned(),
    }
}

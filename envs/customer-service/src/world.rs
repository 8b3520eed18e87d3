//! The orders database and the knowledge base an episode runs against.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where an order is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Paid, not yet shipped: may be cancelled or re-addressed.
    Processing,
    /// With the carrier.
    Shipped,
    /// Delivered to the customer.
    Delivered,
    /// Cancelled.
    Cancelled,
}

impl OrderStatus {
    /// The status as a word.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Processing => "processing",
            OrderStatus::Shipped => "shipped",
            OrderStatus::Delivered => "delivered",
            OrderStatus::Cancelled => "cancelled",
        }
    }
}

/// A customer account.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Customer {
    /// Customer id, e.g. `C0042`.
    pub id: String,
    /// Full name.
    pub name: String,
    /// E-mail address, the identity check.
    pub email: String,
}

/// An order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Order {
    /// Order id, e.g. `O1234`.
    pub id: String,
    /// The buyer's customer id.
    pub customer_id: String,
    /// What was bought.
    pub item: String,
    /// Total in cents.
    pub total_cents: u32,
    /// Day the order was placed (days since the shop opened).
    pub ordered_day: u32,
    /// Status.
    pub status: OrderStatus,
    /// Delivery address.
    pub address: String,
    /// Carrier and tracking number, once shipped.
    pub tracking: Option<(String, String)>,
    /// Promised delivery day, once shipped.
    pub eta_day: Option<u32>,
    /// Day of delivery, once delivered.
    pub delivered_day: Option<u32>,
}

/// A return request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Return {
    /// Return id, `R` + the order's digits.
    pub id: String,
    /// The order returned.
    pub order_id: String,
    /// Why.
    pub reason: String,
}

/// An e-mail the agent sent.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Email {
    /// Recipient.
    pub to: String,
    /// Subject.
    pub subject: String,
    /// Body.
    pub body: String,
}

/// The orders database of one episode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct World {
    /// Today, in days since the shop opened.
    pub today: u32,
    /// Customers by id.
    pub customers: BTreeMap<String, Customer>,
    /// Orders by id.
    pub orders: BTreeMap<String, Order>,
    /// Returns by id.
    pub returns: BTreeMap<String, Return>,
    /// E-mails sent, in order.
    pub emails: Vec<Email>,
}

impl World {
    /// The state the reward compares: orders and returns (e-mails are checked by policy).
    pub fn state(&self) -> (Vec<&Order>, Vec<&Return>) {
        (
            self.orders.values().collect(),
            self.returns.values().collect(),
        )
    }

    /// The customer with this e-mail (case-insensitive).
    pub fn customer_by_email(&self, email: &str) -> Option<&Customer> {
        let email = email.trim().to_lowercase();
        self.customers.values().find(|c| c.email == email)
    }
}

/// A knowledge-base article.
#[derive(Clone, Copy, Debug)]
pub struct Article {
    /// Title.
    pub title: &'static str,
    /// Text.
    pub text: &'static str,
}

/// The knowledge base.
pub const KNOWLEDGE_BASE: [Article; 6] = [
    Article {
        title: "Returns",
        text: "Delivered items can be returned within 30 days of delivery. Create a return with the order id and the reason; the return id is R followed by the order number. Items delivered more than 30 days ago cannot be returned.",
    },
    Article {
        title: "Refunds",
        text: "Refunds are issued to the original payment method 5-7 business days after a returned item is received. Cancelled orders are refunded within 2 business days.",
    },
    Article {
        title: "Cancellations",
        text: "Orders can be cancelled only while they are processing, before they ship. Shipped orders cannot be cancelled; the customer can return them after delivery.",
    },
    Article {
        title: "Address changes",
        text: "The delivery address can be changed only while the order is processing. Once shipped, the address cannot be changed.",
    },
    Article {
        title: "Late deliveries",
        text: "If a shipped order is past its estimated delivery day, apologise, give the carrier and the tracking number, and tell the customer that the carrier is investigating.",
    },
    Article {
        title: "Identity",
        text: "Before changing an order, verify the customer's identity: look the customer up by the e-mail address on the account and make sure the order belongs to them.",
    },
];

/// How many days after delivery an item can be returned (the policy's and the knowledge base's
/// "30 days").
pub const RETURN_WINDOW_DAYS: u32 = 30;

/// Whether an item delivered on day `delivered` can still be returned on day `today`: up to
/// and including the [`RETURN_WINDOW_DAYS`]th day after delivery.
pub fn returnable(delivered: u32, today: u32) -> bool {
    today.saturating_sub(delivered) <= RETURN_WINDOW_DAYS
}

/// What a delivered order's record says of its return window on day `today`: open until its
/// last day, or closed since it. A shop's back office shows the verdict next to the dates, so
/// an agent reads whether a return is allowed rather than doing date arithmetic.
pub fn return_window(delivered: u32, today: u32) -> String {
    let last = delivered.saturating_add(RETURN_WINDOW_DAYS);
    if returnable(delivered, today) {
        format!("return window open until day {last}")
    } else {
        format!("return window closed after day {last}")
    }
}

/// The written policy, part of every instruction.
pub const POLICY: &str = "Policy: verify identity (look up the customer by e-mail, and the order must be theirs) before any change; cancel only processing orders; change addresses only of processing orders; returns only within 30 days of delivery; never share another customer's data; e-mail only the customer's own address.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_return_window_holds_its_thirtieth_day_and_closes_after_it() {
        assert!(returnable(100, 100));
        assert!(returnable(100, 130));
        assert!(!returnable(100, 131));
        assert_eq!(return_window(100, 130), "return window open until day 130");
        assert_eq!(
            return_window(100, 131),
            "return window closed after day 130"
        );
        // A delivery day after today (a hand-edited world) is within the window, not an
        // underflow.
        assert!(returnable(200, 100));
    }
}

//! Tasks generated from seeds: a world, a customer with a problem, the expected final state
//! and the facts the agent's replies must contain.

use serde::{Deserialize, Serialize};

use sandgym_env_api::{Split, SplitMix64};

use crate::world::{Customer, Order, OrderStatus, Return, World};

/// What the customer wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    /// Where is my order? (status)
    OrderStatus,
    /// My order is late (tracking).
    LateDelivery,
    /// Cancel a processing order.
    Cancel,
    /// Cancel an order that already shipped (must refuse).
    CancelShipped,
    /// Return a recently delivered item.
    Return,
    /// Return an item delivered over 30 days ago (must refuse).
    ReturnExpired,
    /// Change the address of a processing order.
    AddressChange,
    /// Change the address of a shipped order (must refuse).
    AddressShipped,
    /// When does my refund arrive? (knowledge base)
    RefundQuestion,
}

const INTENTS: [Intent; 9] = [
    Intent::OrderStatus,
    Intent::LateDelivery,
    Intent::Cancel,
    Intent::CancelShipped,
    Intent::Return,
    Intent::ReturnExpired,
    Intent::AddressChange,
    Intent::AddressShipped,
    Intent::RefundQuestion,
];

/// One support task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique id.
    pub id: String,
    /// What the customer wants.
    pub intent: Intent,
    /// Train or test.
    pub split: Split,
    /// The database at the start.
    pub world: World,
    /// The customer's id.
    pub customer_id: String,
    /// The order concerned.
    pub order_id: String,
    /// The customer's first message.
    pub opening: String,
    /// The database the episode must end with (orders and returns).
    pub expected: World,
    /// Strings the agent's messages to the customer must contain (case-insensitive).
    pub facts: Vec<String>,
}

const FIRST: [&str; 16] = [
    "Ana", "Bruno", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivan", "Julia", "Kofi",
    "Lena", "Marco", "Nadia", "Oscar", "Priya",
];
const LAST: [&str; 12] = [
    "Silva", "Meyer", "Wong", "Levi", "Novak", "Haddad", "Petrov", "Sato", "Ortiz", "Berg",
    "Mensah", "Rossi",
];
const ITEMS: [(&str, u32); 12] = [
    ("desk lamp", 3999),
    ("rain jacket", 8950),
    ("coffee grinder", 5490),
    ("yoga mat", 2500),
    ("bluetooth speaker", 6999),
    ("backpack", 4599),
    ("phone case", 1299),
    ("water bottle", 1850),
    ("running shoes", 11900),
    ("wall clock", 3250),
    ("board game", 3499),
    ("kettle", 2999),
];
const STREETS: [&str; 8] = [
    "Oak Street",
    "Harbor Road",
    "Maple Avenue",
    "Station Lane",
    "Hill Drive",
    "Park Row",
    "Mill Street",
    "River Walk",
];
const CITIES: [&str; 8] = [
    "Springfield",
    "Riverton",
    "Lakeside",
    "Fairview",
    "Greenville",
    "Brookfield",
    "Ashford",
    "Millbrook",
];
const CARRIERS: [&str; 3] = ["ParcelNow", "SwiftShip", "PostExpress"];
const REASONS: [&str; 4] = ["broken", "the wrong size", "not as described", "damaged"];

fn openings(intent: Intent) -> [&'static str; 4] {
    match intent {
        Intent::OrderStatus => [
            "Hi, can you tell me the status of my {item} order?",
            "Hello! What's happening with the {item} I ordered?",
            "I'd like an update on my order for a {item}.",
            "Could you check on my {item} order please?",
        ],
        Intent::LateDelivery => [
            "My {item} was supposed to arrive days ago and it's still not here.",
            "Where is my {item}? The delivery date has passed.",
            "The {item} I ordered is late. What's going on?",
            "I'm still waiting for my {item}, it should have been delivered already.",
        ],
        Intent::Cancel | Intent::CancelShipped => [
            "I want to cancel my order for the {item}.",
            "Please cancel the {item} I ordered.",
            "I changed my mind about the {item}, can you cancel it?",
            "Cancel my {item} order, please.",
        ],
        Intent::Return | Intent::ReturnExpired => [
            "The {item} I received is {reason}. I'd like to return it.",
            "I want to send back the {item}; it is {reason}.",
            "Can I return my {item}? It's {reason}.",
            "My {item} is {reason}, I need to return it.",
        ],
        Intent::AddressChange | Intent::AddressShipped => [
            "I need to change the delivery address of my {item} order to {address}.",
            "Please ship my {item} to {address} instead.",
            "Can you update the address for my {item} order? The new one is {address}.",
            "I moved. Send the {item} to {address}, please.",
        ],
        Intent::RefundQuestion => [
            "I returned my {item}. When will I get my refund?",
            "How long until I'm refunded for the {item} I sent back?",
            "When does the refund for my returned {item} arrive?",
            "I sent the {item} back, when is the money coming?",
        ],
    }
}

fn address(rng: &mut SplitMix64) -> String {
    format!(
        "{} {}, {}",
        1 + rng.below(200),
        rng.choose(&STREETS),
        rng.choose(&CITIES)
    )
}

fn order_id(rng: &mut SplitMix64, world: &World) -> String {
    loop {
        let id = format!("O{}", 1000 + rng.below(9000));
        if !world.orders.contains_key(&id) {
            return id;
        }
    }
}

fn random_order(rng: &mut SplitMix64, world: &World, customer: &str) -> Order {
    let (item, cents) = *rng.choose(&ITEMS);
    let today = world.today;
    let status = *rng.choose(&[
        OrderStatus::Processing,
        OrderStatus::Shipped,
        OrderStatus::Delivered,
        OrderStatus::Cancelled,
    ]);
    let mut order = Order {
        id: order_id(rng, world),
        customer_id: customer.to_owned(),
        item: item.to_owned(),
        total_cents: cents,
        ordered_day: today - 1 - rng.below(60) as u32,
        status,
        address: address(rng),
        tracking: None,
        eta_day: None,
        delivered_day: None,
    };
    set_status(rng, &mut order, status, today);
    order
}

fn set_status(rng: &mut SplitMix64, order: &mut Order, status: OrderStatus, today: u32) {
    order.status = status;
    if matches!(status, OrderStatus::Shipped | OrderStatus::Delivered) {
        order.tracking = Some((
            rng.choose(&CARRIERS).to_string(),
            format!("TRK{:08}", rng.below(100_000_000)),
        ));
        order.eta_day = Some(today + 1 + rng.below(5) as u32);
    }
    if status == OrderStatus::Delivered {
        let day = today - 1 - rng.below(20) as u32;
        order.delivered_day = Some(day);
        order.eta_day = Some(day);
    }
}

/// The write a task expects.
enum Change {
    Cancel,
    Address(String),
    Return(Return),
}

/// Generates task `index`: its intent cycles through the nine intents, its wording through
/// four templates; everything else comes from the seed. The fourth wording is held out for the
/// test split, so test tasks are phrased in ways never seen in training.
pub fn generate(index: usize) -> Task {
    let intent = INTENTS[index % INTENTS.len()];
    let wording = (index / INTENTS.len()) % 4;
    let mut rng = SplitMix64::new(0x5eed_0000 + index as u64);
    let mut world = World {
        today: 100 + rng.below(200) as u32,
        ..World::default()
    };
    // Four customers, each with orders; the first is the one who writes in.
    for c in 0..4 {
        let first = *rng.choose(&FIRST);
        let last = *rng.choose(&LAST);
        let id = format!("C{:04}", 1 + rng.below(9999));
        let customer = Customer {
            id: id.clone(),
            name: format!("{first} {last}"),
            email: format!(
                "{}.{}{}@example.com",
                first.to_lowercase(),
                last.to_lowercase(),
                c
            ),
        };
        world.customers.insert(id.clone(), customer);
        for _ in 0..(1 + rng.below(3)) {
            let order = random_order(&mut rng, &world, &id);
            world.orders.insert(order.id.clone(), order);
        }
    }
    let customer_id = world
        .customers
        .keys()
        .next()
        .expect("four customers")
        .clone();
    let mut target = random_order(&mut rng, &world, &customer_id);
    let today = world.today;
    let reason = *rng.choose(&REASONS);
    let new_address = address(&mut rng);
    let mut change: Option<Change> = None;
    let facts: Vec<String>;
    match intent {
        Intent::OrderStatus => {
            let status = *rng.choose(&[
                OrderStatus::Processing,
                OrderStatus::Shipped,
                OrderStatus::Delivered,
            ]);
            set_status(&mut rng, &mut target, status, today);
            facts = vec![status.as_str().to_owned()];
        }
        Intent::LateDelivery => {
            set_status(&mut rng, &mut target, OrderStatus::Shipped, today);
            target.eta_day = Some(today - 1 - rng.below(6) as u32);
            let (carrier, number) = target.tracking.clone().expect("shipped");
            facts = vec![carrier, number];
        }
        Intent::Cancel => {
            set_status(&mut rng, &mut target, OrderStatus::Processing, today);
            change = Some(Change::Cancel);
            facts = vec!["cancelled".into()];
        }
        Intent::CancelShipped | Intent::AddressShipped => {
            set_status(&mut rng, &mut target, OrderStatus::Shipped, today);
            facts = vec!["shipped".into()];
        }
        Intent::Return => {
            set_status(&mut rng, &mut target, OrderStatus::Delivered, today);
            target.delivered_day = Some(today - 1 - rng.below(25) as u32);
            let rid = format!("R{}", &target.id[1..]);
            change = Some(Change::Return(Return {
                id: rid.clone(),
                order_id: target.id.clone(),
                reason: reason.to_owned(),
            }));
            facts = vec![rid];
        }
        Intent::ReturnExpired => {
            set_status(&mut rng, &mut target, OrderStatus::Delivered, today);
            target.delivered_day = Some(today - 31 - rng.below(60) as u32);
            facts = vec!["30 days".into()];
        }
        Intent::AddressChange => {
            set_status(&mut rng, &mut target, OrderStatus::Processing, today);
            change = Some(Change::Address(new_address.clone()));
            facts = vec![
                new_address
                    .rsplit(", ")
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            ];
        }
        Intent::RefundQuestion => {
            set_status(&mut rng, &mut target, OrderStatus::Delivered, today);
            let rid = format!("R{}", &target.id[1..]);
            world.returns.insert(
                rid.clone(),
                Return {
                    id: rid,
                    order_id: target.id.clone(),
                    reason: reason.to_owned(),
                },
            );
            facts = vec!["5-7 business days".into()];
        }
    }
    let order_id = target.id.clone();
    let item = target.item.clone();
    world.orders.insert(order_id.clone(), target);
    let mut expected = world.clone();
    let order = expected
        .orders
        .get_mut(&order_id)
        .expect("the target order");
    match change {
        Some(Change::Cancel) => order.status = OrderStatus::Cancelled,
        Some(Change::Address(address)) => order.address = address,
        Some(Change::Return(r)) => {
            expected.returns.insert(r.id.clone(), r);
        }
        None => {}
    }
    let opening = openings(intent)[wording]
        .replace("{item}", &item)
        .replace("{reason}", reason)
        .replace("{address}", &new_address);
    Task {
        id: format!("support-{index:04}"),
        intent,
        split: if wording == 3 {
            Split::Test
        } else {
            Split::Train
        },
        world,
        customer_id,
        order_id,
        opening,
        expected,
        facts,
    }
}

/// The number of bundled tasks.
pub const BUNDLED_TASKS: usize = 360;

/// Every bundled task.
pub fn bundled() -> Vec<Task> {
    (0..BUNDLED_TASKS).map(generate).collect()
}

//! Integration tests of customer-service-v0.

use sandgym_env_api::{Action, Agent, Env, Narrowing, ResetOptions, Split, TimeLimit, check_env};
use sandgym_env_support::{Intent, SupportBaseline, SupportEnv, SupportGold};
use serde_json::json;

fn tool(name: &str, params: serde_json::Value) -> Action {
    Action::tool(name, params)
}

/// An agent that knows the task: it does exactly the right thing.
fn oracle(env: &mut SupportEnv, id: &str) -> serde_json::Value {
    env.reset(0, &ResetOptions::default().with_task(id))
        .unwrap();
    let task = env.task().clone();
    let email = task.world.customers[&task.customer_id].email.clone();
    let order = task.order_id.clone();
    let reply = env
        .step(&tool(
            "reply_to_customer",
            json!({"message": "What is your order number and e-mail?"}),
        ))
        .unwrap();
    assert!(
        reply.content.contains(&order) && reply.content.contains(&email),
        "{}",
        reply.content
    );
    env.step(&tool("lookup_customer", json!({"email": email})))
        .unwrap();
    match task.intent {
        Intent::Cancel => {
            env.step(&tool("cancel_order", json!({"order_id": order})))
                .unwrap();
        }
        Intent::Return => {
            let reason = task
                .expected
                .returns
                .values()
                .next()
                .unwrap()
                .reason
                .clone();
            env.step(&tool(
                "create_return",
                json!({"order_id": order, "reason": reason}),
            ))
            .unwrap();
        }
        Intent::AddressChange => {
            let address = task.expected.orders[&order].address.clone();
            env.step(&tool(
                "update_address",
                json!({"order_id": order, "address": address}),
            ))
            .unwrap();
        }
        _ => {}
    }
    let done = env
        .step(&Action::respond(format!(
            "Resolved: {}",
            task.facts.join(", ")
        )))
        .unwrap();
    done.info.into_iter().collect()
}

#[test]
fn every_bundled_task_is_solvable_and_the_split_holds_unseen_wordings() {
    let mut env = SupportEnv::new();
    let tasks = env.tasks().to_vec();
    assert!(tasks.len() >= 300);
    let train: std::collections::BTreeSet<String> = tasks
        .iter()
        .filter(|t| t.split == Split::Train)
        .map(|t| t.opening.split(' ').take(3).collect::<Vec<_>>().join(" "))
        .collect();
    let test: Vec<_> = tasks.iter().filter(|t| t.split == Split::Test).collect();
    assert!(test.len() >= 80);
    let unseen = test
        .iter()
        .filter(|t| !train.contains(&t.opening.split(' ').take(3).collect::<Vec<_>>().join(" ")))
        .count();
    assert!(unseen * 2 > test.len(), "{unseen}/{}", test.len());
    for task in &tasks {
        let info = oracle(&mut env, &task.id);
        assert_eq!(info["success"], json!(true), "{}: {info:?}", task.id);
        assert_eq!(env.reward(), 1.0);
    }
}

#[test]
fn the_gold_demonstrator_resolves_every_task_by_the_policy_and_names_the_request() {
    let mut env = TimeLimit::from_spec(SupportEnv::new());
    let tasks = env.inner().tasks().to_vec();
    let mut openings =
        std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for task in &tasks {
        let mut agent = SupportGold::new(&tasks);
        let mut obs = env
            .reset(0, &ResetOptions::default().with_task(task.id.clone()))
            .unwrap();
        // The episode's narrowing is a narrowing of the spec, and every gold call fits it (the
        // new address is quoted from the customer).
        let narrowing = Narrowing::from_info(&obs.info).unwrap().expect("narrowed");
        assert_eq!(
            narrowing.check_against(env.spec(), 32),
            Vec::<String>::new()
        );
        let narrowed = narrowing.apply(env.spec()).unwrap();
        let mut tools = Vec::new();
        let mut first_thought = None;
        while !env.done().is_done() {
            let action = agent.act(&obs);
            if let Some(call) = action.tool_call() {
                let schema = &narrowed.tool(&call.tool_name).unwrap().parameters;
                assert!(
                    schema
                        .validate(&serde_json::Value::Object(call.parameters.clone()))
                        .is_ok(),
                    "{}: {call:?} outside the episode's narrowing",
                    task.id
                );
            }
            // Every thought fits the customer-service preset's thought budget.
            assert!(action.thought.chars().count() <= 96, "{:?}", action.thought);
            assert!(!action.thought.is_empty(), "{}: an empty thought", task.id);
            // Every thought starts with the label the first one gave the request.
            let label = action
                .thought
                .split(':')
                .next()
                .unwrap_or_default()
                .to_owned();
            let first = first_thought.get_or_insert_with(|| label.clone());
            assert_eq!(&label, first, "{}: {:?}", task.id, action.thought);
            if let Some(call) = action.tool_call() {
                tools.push(call.tool_name.clone());
            }
            obs = env.step(&action).unwrap();
        }
        assert_eq!(obs.info["success"], json!(true), "{}: {obs:?}", task.id);
        assert_eq!(obs.info["violations"], json!([]), "{}", task.id);
        assert_eq!(env.reward(), 1.0, "{}", task.id);
        // Ask, verify, read, and only then act.
        assert_eq!(
            tools[..3],
            ["reply_to_customer", "lookup_customer", "get_order_status"],
            "{}",
            task.id
        );
        openings
            .entry(format!(
                "{:?}",
                match task.intent {
                    Intent::CancelShipped => Intent::Cancel,
                    Intent::ReturnExpired => Intent::Return,
                    Intent::AddressShipped => Intent::AddressChange,
                    other => other,
                }
            ))
            .or_default()
            .insert(first_thought.unwrap());
    }
    // One statement of the request per kind of request, and different kinds apart: six.
    assert_eq!(openings.len(), 6, "{openings:?}");
    assert!(openings.values().all(|t| t.len() == 1), "{openings:?}");
    let distinct: std::collections::BTreeSet<_> = openings.values().flatten().collect();
    assert_eq!(distinct.len(), 6);
}

#[test]
fn check_env_passes() {
    let report = check_env(&mut SupportEnv::new());
    assert!(report.is_ok(), "{report}");
}

#[test]
fn the_baseline_solves_most_but_not_all_requests() {
    let mut env = TimeLimit::from_spec(SupportEnv::new());
    let ids: Vec<String> = env
        .inner()
        .tasks()
        .iter()
        .filter(|t| t.split == Split::Test)
        .map(|t| t.id.clone())
        .collect();
    let mut wins = 0;
    for id in &ids {
        let mut agent = SupportBaseline::default();
        let mut obs = env
            .reset(0, &ResetOptions::default().with_task(id.clone()))
            .unwrap();
        while !env.done().is_done() {
            obs = env.step(&agent.act(&obs)).unwrap();
        }
        wins += usize::from(obs.info.get("success") == Some(&json!(true)));
    }
    let rate = wins as f64 / ids.len() as f64;
    eprintln!("baseline test success: {wins}/{} = {rate:.3}", ids.len());
    assert!(rate > 0.4 && rate < 0.95, "{rate}");
}

/// The baseline plays every bundled task, train and test, with actions the env accepts, and
/// reads the new address of the address changes it recognises exactly (a wording it could not
/// read once sent an empty address, which the tool's schema refuses).
#[test]
fn the_baseline_acts_validly_on_every_task_and_reads_the_addresses_it_recognises() {
    let mut env = TimeLimit::from_spec(SupportEnv::new());
    let tasks = env.inner().tasks().to_vec();
    let (mut changes, mut read) = (0, 0);
    for task in &tasks {
        let mut agent = SupportBaseline::default();
        let mut obs = env
            .reset(0, &ResetOptions::default().with_task(task.id.clone()))
            .unwrap();
        let mut addresses = Vec::new();
        while !env.done().is_done() {
            let action = agent.act(&obs);
            if let Some(call) = action.tool_call()
                && call.tool_name == "update_address"
            {
                addresses.push(call.parameters["address"].clone());
            }
            obs = env
                .step(&action)
                .unwrap_or_else(|e| panic!("{}: {e} ({:?})", task.id, task.opening));
        }
        if task.intent == Intent::AddressChange {
            // A wording without its keywords ("address", " to ") is not recognised as an
            // address change, as a keyword bot would miss it; the others are read exactly.
            changes += 1;
            let expected = &task.expected.orders[&task.order_id].address;
            if !addresses.is_empty() {
                assert_eq!(
                    addresses,
                    [json!(expected)],
                    "{}: {:?}",
                    task.id,
                    task.opening
                );
                read += 1;
            }
        }
    }
    assert!(
        read * 4 >= changes * 3,
        "{read} of {changes} address changes read"
    );
}

#[test]
fn policy_violations_cost_reward() {
    let mut env = SupportEnv::new();
    let id = env
        .tasks()
        .iter()
        .find(|t| t.intent == Intent::Cancel)
        .unwrap()
        .id
        .clone();
    env.reset(0, &ResetOptions::default().with_task(id))
        .unwrap();
    let task = env.task().clone();
    // Cancelling without the identity check, and e-mailing a stranger.
    env.step(&tool("cancel_order", json!({"order_id": task.order_id})))
        .unwrap();
    env.step(&tool(
        "send_email",
        json!({"to": "someone@else.com", "subject": "hi", "body": "cancelled"}),
    ))
    .unwrap();
    let done = env
        .step(&Action::respond("Your order is cancelled."))
        .unwrap();
    assert_eq!(done.info["db_match"], json!(true));
    assert_eq!(
        done.info["violations"].as_array().unwrap().len(),
        2,
        "{:?}",
        done.info
    );
    assert_eq!(env.reward(), 1.0 - 0.5);
}

#[test]
fn the_customer_answers_only_what_is_asked_and_bad_input_is_refused() {
    let mut env = SupportEnv::new();
    env.reset(3, &ResetOptions::default()).unwrap();
    let task = env.task().clone();
    let a = env
        .step(&tool(
            "reply_to_customer",
            json!({"message": "Hello, how are you?"}),
        ))
        .unwrap();
    assert!(!a.content.contains(&task.order_id));
    let b = env
        .step(&tool(
            "reply_to_customer",
            json!({"message": "What is your order number?"}),
        ))
        .unwrap();
    assert!(b.content.contains(&task.order_id));
    let email = &task.world.customers[&task.customer_id].email;
    assert!(!b.content.contains(email.as_str()));
    let err = env
        .step(&tool("cancel_order", json!({"order_id": "1234; DROP"})))
        .unwrap_err();
    assert!(err.is_invalid_action());
    let err = env.step(&tool("refund_everything", json!({}))).unwrap_err();
    assert!(err.to_string().contains("available tools"), "{err}");
    let missing = env
        .step(&tool("get_order_status", json!({"order_id": "O0001"})))
        .unwrap();
    assert_eq!(missing.content, "No order O0001.");
}

#[test]
fn train_wordings_pick_the_train_openings_and_the_demonstrator_follows_them() {
    use sandgym_env_api::{Demonstration, EnvError};
    use serde_json::Map;
    let config =
        |v: serde_json::Value| -> Map<String, serde_json::Value> { v.as_object().unwrap().clone() };
    for bad in [json!([]), json!([10]), json!([2, 2]), json!("all")] {
        let err = SupportEnv::from_config(&config(json!({ "train_wordings": bad }))).unwrap_err();
        assert!(
            matches!(&err, EnvError::InvalidConfig { reason } if reason.contains("train_wordings")),
            "{bad}: {err}"
        );
    }
    let some = config(json!({"train_wordings": [8]}));
    let env = SupportEnv::from_config(&some).unwrap();
    let (all, tasks) = (SupportEnv::new().tasks().to_vec(), env.tasks().to_vec());
    // One wording: the train tasks of an intent all open the same way, and otherwise than the
    // bundled ones' rotation; the test tasks keep the held-out wording.
    let refunds: std::collections::BTreeSet<String> = tasks
        .iter()
        .filter(|t| t.split == Split::Train && t.intent == Intent::RefundQuestion)
        .map(|t| t.opening.replace(&t.world.orders[&t.order_id].item, "ITEM"))
        .collect();
    assert_eq!(refunds.len(), 1, "{refunds:?}");
    let mut changed = 0;
    for (a, b) in all.iter().zip(&tasks) {
        if a.split == Split::Test {
            assert_eq!(a.opening, b.opening);
        } else {
            changed += usize::from(a.opening != b.opening);
        }
    }
    // Nine of every ten train tasks were said in another wording.
    assert_eq!(changed, 270 - 27, "{changed}");
    // The package's demonstrator plays the configured tasks and still solves them.
    let mut demo =
        (sandgym_env_support::PACKAGE.demonstrator.unwrap())(&some, Demonstration::Solution)
            .unwrap();
    let mut env = TimeLimit::from_spec(env);
    for task in tasks.iter().filter(|t| t.split == Split::Train).take(18) {
        let mut obs = env
            .reset(0, &ResetOptions::default().with_task(task.id.clone()))
            .unwrap();
        assert!(obs.content.contains(&task.opening), "{}", task.id);
        while !env.done().is_done() {
            obs = env.step(&demo.act(&obs)).unwrap();
        }
        assert_eq!(env.inner().reward(), 1.0, "{}", task.id);
    }
}

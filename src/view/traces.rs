//! The recording proxy's traces as the dashboard shows them: one entry per rollout, each call
//! with its messages and reply, and the places where a call's prompt does not extend the
//! conversation the previous calls built — the drift that splits a harness's run into several
//! training segments — marked with what changed.
//!
//! The kind of a break is read from the messages, so no tokenizer is needed: the opening
//! messages changed (a new context), a tool message changed (the harness compressed or cut an
//! observation), an assistant message changed (the harness rewrote the model's reply), or the
//! messages extend the previous ones while the token ids do not (re-tokenisation).

use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use crate::proxy::{CallRecord, TraceStore};

use super::source::Partial;

/// One rollout in the list.
#[derive(Clone, Debug, Serialize)]
pub struct RolloutSummary {
    /// The rollout id.
    pub id: String,
    /// Calls recorded.
    pub calls: usize,
    /// The reward posted for it.
    pub reward: Option<f64>,
    /// Whether the reward's info says it succeeded.
    pub success: bool,
    /// Calls whose prompt broke from the conversation before it.
    pub breaks: usize,
}

/// Why a call's prompt is not the previous call's prompt plus its reply.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Break {
    /// new_context, compressed, rewritten, retokenised or other.
    pub kind: &'static str,
    /// The message (from 0) where the conversations first differ, if they do.
    pub message: Option<usize>,
    /// Token ids the prompt shares with the previous segment.
    pub common_tokens: usize,
}

fn messages(call: &CallRecord) -> Vec<Value> {
    serde_json::from_str::<Value>(&call.request)
        .ok()
        .and_then(|r| r.get("messages").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

fn reply(call: &CallRecord) -> Option<Value> {
    serde_json::from_str::<Value>(&call.response)
        .ok()?
        .pointer("/choices/0/message")
        .cloned()
}

/// The break of each call, against the segment the calls before it built (`None`: the call
/// extends it, or is the first).
pub fn breaks(calls: &[CallRecord]) -> Vec<Option<Break>> {
    let mut out = Vec::with_capacity(calls.len());
    let mut segment: Option<Vec<u32>> = None;
    let mut conversation: Option<Vec<Value>> = None;
    for call in calls {
        let msgs = messages(call);
        let prompt = call.prompt_ids.clone().unwrap_or_default();
        let brk = match (&segment, &conversation) {
            (Some(seg), Some(conv)) if !prompt.starts_with(seg) => {
                let common = seg.iter().zip(&prompt).take_while(|(a, b)| a == b).count();
                let differ = conv
                    .iter()
                    .zip(&msgs)
                    .position(|(a, b)| !same_message(a, b));
                let kind = match differ {
                    None if msgs.len() >= conv.len() => "retokenised",
                    None => "other",
                    Some(i) if i <= 1 => "new_context",
                    Some(i) => match conv[i].get("role").and_then(Value::as_str) {
                        Some("tool") => "compressed",
                        Some("assistant") => "rewritten",
                        _ => "other",
                    },
                };
                Some(Break {
                    kind,
                    message: differ,
                    common_tokens: common,
                })
            }
            _ => None,
        };
        out.push(brk);
        let mut seg = prompt;
        seg.extend(call.completion_ids.clone().unwrap_or_default());
        segment = Some(seg);
        let mut conv = msgs;
        if let Some(r) = reply(call) {
            conv.push(r);
        }
        conversation = Some(conv);
    }
    out
}

/// Two messages are the same turn: same role and content (a reply's tool calls compared by
/// name and arguments, not by their ids).
fn same_message(a: &Value, b: &Value) -> bool {
    let calls = |m: &Value| -> Vec<(Value, Value)> {
        m.get("tool_calls")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| {
                        (
                            c.pointer("/function/name").cloned().unwrap_or(Value::Null),
                            c.pointer("/function/arguments")
                                .cloned()
                                .unwrap_or(Value::Null),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let content = |m: &Value| match m.get("content") {
        None | Some(Value::Null) => Value::String(String::new()),
        Some(c) => c.clone(),
    };
    a.get("role") == b.get("role") && content(a) == content(b) && calls(a) == calls(b)
}

/// The rollouts of the trace store at `path`.
pub fn rollouts(path: &Path) -> Partial<RolloutSummary> {
    let mut out = Partial::default();
    let store = match TraceStore::open(path) {
        Ok(s) => s,
        Err(e) => {
            out.problems.push(e.to_string());
            return out;
        }
    };
    let ids = match store.rollouts() {
        Ok(ids) => ids,
        Err(e) => {
            out.problems.push(e.to_string());
            return out;
        }
    };
    for id in ids {
        let calls = match store.calls(&id) {
            Ok(c) => c,
            Err(e) => {
                out.problems.push(format!("rollout {id}: {e}"));
                continue;
            }
        };
        let reward = store.reward(&id).ok().flatten();
        let success = reward.as_ref().is_some_and(|r| {
            crate::env_api::episode_success(
                &r.info.as_object().cloned().unwrap_or_default(),
                crate::env_api::Done::Terminated,
                r.reward,
            )
        });
        out.items.push(RolloutSummary {
            breaks: breaks(&calls).iter().flatten().count(),
            calls: calls.len(),
            reward: reward.map(|r| r.reward),
            success,
            id,
        });
    }
    out
}

/// One rollout: its calls (messages, reply, token counts, break) and its reward.
pub fn rollout(path: &Path, id: &str) -> Result<Value, String> {
    let store = TraceStore::open(path).map_err(|e| e.to_string())?;
    let calls = store.calls(id).map_err(|e| e.to_string())?;
    if calls.is_empty() {
        return Err(format!("no rollout `{id}` in the store"));
    }
    let reward = store.reward(id).map_err(|e| e.to_string())?;
    let brks = breaks(&calls);
    let calls: Vec<Value> = calls
        .iter()
        .zip(brks)
        .map(|(c, b)| {
            json!({
                "seq": c.seq,
                "status": c.status,
                "messages": messages(c),
                "reply": reply(c),
                "prompt_tokens": c.prompt_ids.as_ref().map(Vec::len),
                "completion_tokens": c.completion_ids.as_ref().map(Vec::len),
                "break": b,
                "upstream_ms": c.upstream_us as f64 / 1000.0,
                "added_ms": c.added_us() as f64 / 1000.0,
            })
        })
        .collect();
    Ok(json!({
        "id": id,
        "calls": calls,
        "reward": reward.as_ref().map(|r| r.reward),
        "info": reward.map(|r| r.info),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(seq: i64, messages: Value, prompt: Vec<u32>, completion: Vec<u32>) -> CallRecord {
        CallRecord {
            rollout: "r".into(),
            seq,
            at_us: 0,
            path: "/v1/chat/completions".into(),
            status: 200,
            request: json!({"messages": messages}).to_string(),
            response: json!({"choices": [{"message": {"role": "assistant", "content": format!("reply {seq}")}}]}).to_string(),
            prompt_ids: Some(prompt),
            completion_ids: Some(completion),
            logprobs: None,
            upstream_us: 0,
            total_us: 0,
        }
    }

    #[test]
    fn breaks_are_found_and_told_apart() {
        let sys = json!({"role": "system", "content": "s"});
        let user = json!({"role": "user", "content": "q"});
        let r0 = json!({"role": "assistant", "content": "reply 0"});
        let tool = |t: &str| json!({"role": "tool", "content": t});
        let calls = vec![
            call(0, json!([sys, user]), vec![1, 2], vec![3]),
            // Extends: prompt = previous prompt + reply + tool output.
            call(
                1,
                json!([sys, user, r0, tool("long output")]),
                vec![1, 2, 3, 4],
                vec![5],
            ),
            // The harness cut the tool output: the tokens break at the tool message.
            call(
                2,
                json!([sys, user, r0, tool("cut")]),
                vec![1, 2, 3, 9],
                vec![6],
            ),
            // Same messages extended, other ids: re-tokenised.
            call(
                3,
                json!([sys, user, r0, tool("cut"), {"role": "assistant", "content": "reply 2"}]),
                vec![1, 2, 3, 8],
                vec![7],
            ),
            // A fresh conversation.
            call(
                4,
                json!([sys, {"role": "user", "content": "summary"}]),
                vec![1, 7],
                vec![2],
            ),
        ];
        let kinds: Vec<Option<&str>> = breaks(&calls)
            .iter()
            .map(|b| b.as_ref().map(|b| b.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                None,
                None,
                Some("compressed"),
                Some("retokenised"),
                Some("new_context")
            ]
        );
        assert_eq!(breaks(&calls)[2].as_ref().unwrap().common_tokens, 3);
    }

    #[test]
    fn a_trace_store_is_listed_and_a_rollout_shows_its_calls_and_breaks() {
        let dir = std::env::temp_dir().join(format!("sandgym-view-traces-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("traces.db");
        let writer = crate::proxy::TraceWriter::open(&db).unwrap();
        let sys = json!({"role": "system", "content": "s"});
        let user = json!({"role": "user", "content": "q"});
        writer
            .record(call(0, json!([sys, user]), vec![1, 2], vec![3]))
            .unwrap();
        writer
            .record(call(
                1,
                json!([sys, {"role": "user", "content": "other"}]),
                vec![1, 5],
                vec![6],
            ))
            .unwrap();
        writer
            .reward(crate::proxy::RewardRecord {
                rollout: "r".into(),
                reward: 1.0,
                info: json!({"success": true}),
            })
            .unwrap();
        let listed = rollouts(&db);
        assert!(listed.problems.is_empty(), "{:?}", listed.problems);
        assert_eq!(listed.items.len(), 1);
        let r = &listed.items[0];
        assert_eq!(
            (r.calls, r.breaks, r.reward, r.success),
            (2, 1, Some(1.0), true)
        );
        let shown = rollout(&db, "r").unwrap();
        assert!(shown["calls"][0]["break"].is_null());
        assert_eq!(shown["calls"][1]["break"]["kind"], "new_context");
        assert!(rollout(&db, "nope").unwrap_err().contains("no rollout"));
        // Not a database: a problem, not a panic.
        let junk = dir.join("junk.db");
        std::fs::write(&junk, "not sqlite").unwrap();
        assert!(!rollouts(&junk).problems.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

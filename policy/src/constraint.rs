//! Schema-constrained tool-call decoding with llguidance: every sampled action is valid
//! Agent Template JSON for the env's tools.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use sandgym_env_api::{EnvSpec, Schema, ToolSpec};
use serde_json::{Value, json};
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenizerEnv};

use crate::{PolicyError, Result, Tokenizer};

/// Limits on the free-text fields of an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActionLimits {
    /// Longest `thought`, in characters (0 forces an empty thought).
    pub thought_chars: u32,
    /// Longest final `response`, in characters.
    pub response_chars: u32,
}

impl Default for ActionLimits {
    fn default() -> Self {
        Self {
            thought_chars: 200,
            response_chars: 400,
        }
    }
}

/// llguidance's view of our tokenizer: the token trie for masks, and the tokenizer's own
/// (canonical) BPE for the bytes the grammar forces, so forced text comes out exactly as
/// [`Tokenizer::encode`] would write it.
struct CanonicalTokEnv {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl TokenizerEnv for CanonicalTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        match std::str::from_utf8(s)
            .ok()
            .map(|t| self.tokenizer.encode(t))
        {
            Some(Ok(ids)) => ids,
            // Part of a multi-byte character, or a tokenizer failure: fall back to the trie.
            _ => self.trie.greedy_tokenize(s),
        }
    }

    fn tokenize_is_canonical(&self) -> bool {
        true
    }
}

/// The grammar of one env's actions, compiled once and instantiated per generation.
///
/// The grammar is exactly the canonical rendering of [`Template`](crate::Template):
/// `{"thought":"…","action":{"tool_name":"NAME","parameters":{…}}}` for each tool (the
/// parameters under that tool's JSON schema, properties in schema order, no whitespace) or
/// `{"thought":"…","response":"…"}`, followed by `<|end|>`. Tool names are an enumeration,
/// enums in parameters (table names, statuses) are enumerations, string patterns are enforced.
///
/// Sampling under the constraint masks disallowed tokens and renormalises; the log-probs that
/// training uses are those of that masked distribution — the one actually sampled from — not
/// of the unconstrained model (see the crate docs).
#[derive(Clone)]
pub struct ToolCallGrammar {
    factory: Arc<ParserFactory>,
    /// The grammar compiled once, before any token: every [`matcher`](Self::matcher) is a
    /// clone of it. Compiling a narrowed SQL episode's grammar (a ~300k-character query shape
    /// over a nine-table schema) takes ~0.15 s, cloning it next to nothing; clones also share its
    /// lexer's lazily built states, so one generation's masks speed up the next one's.
    compiled: Matcher,
    end: u32,
    vocab: usize,
}

impl std::fmt::Debug for ToolCallGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCallGrammar")
            .field("vocab", &self.vocab)
            .finish_non_exhaustive()
    }
}

fn constraint(e: impl std::fmt::Display) -> PolicyError {
    PolicyError::Constraint(e.to_string())
}

/// A JSON-string literal for Lark.
fn lit(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

fn json_rule(schema: &Value) -> String {
    let mut schema = schema.clone();
    unbound_patterns(&mut schema);
    if let Value::Object(map) = &mut schema {
        map.insert(
            "x-guidance".into(),
            json!({"whitespace_flexible": false, "lenient": true, "item_separator": ",", "key_separator": ":"}),
        );
    }
    format!("%json {schema}")
}

/// The length from which an anchored pattern (`^…$`) is left without its string's
/// `minLength`/`maxLength` in the decoder's grammar ([`unbound_patterns`]).
const LARGE_PATTERN: usize = 4096;

/// Drops `minLength` and `maxLength` beside every large anchored `pattern` in `schema`: the
/// decoder writes what the pattern allows, and the env still checks the length when it
/// validates the action. With both, llguidance intersects the pattern with a length automaton
/// and proves the intersection non-empty on a fixed budget, which a large pattern (an SQL
/// episode's query shape over a nine-table database: ~300k characters) exhausts, failing the
/// compile. A small or unanchored pattern (matched anywhere in the string) keeps its bounds.
fn unbound_patterns(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let large = map.get("pattern").and_then(Value::as_str).is_some_and(|p| {
                p.len() >= LARGE_PATTERN && p.starts_with('^') && p.ends_with('$')
            });
            if large {
                map.remove("minLength");
                map.remove("maxLength");
            }
            map.values_mut().for_each(unbound_patterns);
        }
        Value::Array(items) => items.iter_mut().for_each(unbound_patterns),
        _ => {}
    }
}

/// The Lark grammar of an env's actions (free-text responses).
pub fn lark_grammar(tools: &[ToolSpec], limits: ActionLimits) -> String {
    grammar(tools, None, limits, true)
}

/// The Lark grammar of a call to one of `tools`: no final response is allowed (OpenAI's
/// `tool_choice: "required"`, or a named function when `tools` holds only that one).
pub fn lark_grammar_calling(tools: &[ToolSpec], limits: ActionLimits) -> String {
    grammar(tools, None, limits, false)
}

/// The Lark grammar of `spec`'s actions: its tools, and its response schema when it declares
/// one (its `maxLength` capped by `limits.response_chars`); tool calls only for an env that
/// takes no final response ([`EnvSpec::accepts_response`]).
pub fn lark_grammar_for(spec: &EnvSpec, limits: ActionLimits) -> String {
    grammar(
        &spec.tools,
        spec.response.as_ref(),
        limits,
        spec.accepts_response,
    )
}

fn grammar(
    tools: &[ToolSpec],
    response: Option<&Schema>,
    limits: ActionLimits,
    respond: bool,
) -> String {
    let string = |max: u32| json!({"type": "string", "maxLength": max});
    let response = match response {
        Some(schema) => {
            let mut v = schema.to_value();
            let cap = u64::from(limits.response_chars);
            let max = v
                .get("maxLength")
                .and_then(Value::as_u64)
                .unwrap_or(cap)
                .min(cap);
            v["maxLength"] = json!(max);
            v
        }
        None => string(limits.response_chars),
    };
    let mut g = String::new();
    g.push_str("start: \"{\\\"thought\\\":\" thought \",\" body \"}\"\n");
    g.push_str(&format!(
        "thought: {}\n",
        json_rule(&string(limits.thought_chars))
    ));
    let mut bodies = Vec::new();
    if respond || tools.is_empty() {
        bodies.push(format!("{} response", lit("\"response\":")));
        g.push_str(&format!("response: {}\n", json_rule(&response)));
    }
    // The response's schema as its rule holds it, for a tool taking it as its one parameter.
    let shared = (respond || tools.is_empty()).then(|| {
        let mut unbound = response.clone();
        unbound_patterns(&mut unbound);
        unbound
    });
    for (i, tool) in tools.iter().enumerate() {
        let head = format!(
            "\"action\":{{\"tool_name\":{},\"parameters\":",
            lit(&tool.name)
        );
        bodies.push(format!("{} params{i} \"}}\"", lit(&head)));
        let params = tool.parameters.to_value();
        let rule = match shared
            .as_ref()
            .and_then(|r| response_as_sole_parameter(&params, r))
        {
            Some(name) => format!("{} response \"}}\"", lit(&format!("{{{}:", lit(&name)))),
            None => json_rule(&params),
        };
        g.push_str(&format!("params{i}: {rule}\n"));
    }
    g.push_str(&format!("body: {}\n", bodies.join(" | ")));
    g
}

/// The name of `params`' one property when they are an object of that property alone
/// (required, nothing else allowed) whose schema is `response` (the response's schema as the
/// decoder's grammar holds it, [`unbound_patterns`] applied): a tool that runs what the final response gives (the SQL
/// env's `run_sql(query)` and its answer, one ~375k-character query shape on a nine-table
/// database). Its rule is then `{"name":` followed by the response's own rule, so the
/// pattern is compiled once instead of twice (each compile ~0.2 s); the language is the same,
/// since such an object has exactly that one rendering.
fn response_as_sole_parameter(params: &Value, response: &Value) -> Option<String> {
    let (Some(properties), Some(required)) = (
        params.get("properties").and_then(Value::as_object),
        params.get("required").and_then(Value::as_array),
    ) else {
        return None;
    };
    let closed = params.get("additionalProperties") == Some(&Value::Bool(false));
    let (name, schema) = properties.iter().next()?;
    let sole = properties.len() == 1 && required.len() == 1 && required[0] == name.as_str();
    if params.get("type") != Some(&json!("object")) || !closed || !sole {
        return None;
    }
    let mut schema = schema.clone();
    unbound_patterns(&mut schema);
    (schema == *response).then(|| name.clone())
}

impl ToolCallGrammar {
    /// Compiles the grammar of `tools` for `tokenizer` (responses are free text).
    pub fn new(tokenizer: &Tokenizer, tools: &[ToolSpec], limits: ActionLimits) -> Result<Self> {
        Self::compile(tokenizer, lark_grammar(tools, limits))
    }

    /// Compiles the grammar of a call to one of `tools`, with no final response (see
    /// [`lark_grammar_calling`]; with no tools at all, a response is the only action left).
    pub fn calling(
        tokenizer: &Tokenizer,
        tools: &[ToolSpec],
        limits: ActionLimits,
    ) -> Result<Self> {
        Self::compile(tokenizer, lark_grammar_calling(tools, limits))
    }

    /// Compiles the grammar of an env's actions: its tools and, when it declares one, the
    /// schema of its final response.
    pub fn for_spec(tokenizer: &Tokenizer, spec: &EnvSpec, limits: ActionLimits) -> Result<Self> {
        Self::compile(tokenizer, lark_grammar_for(spec, limits))
    }

    /// The grammar of another spec's actions (an episode's narrowing of this one, say) over
    /// the same tokenizer: it shares this grammar's token trie and parser factory, which for
    /// a 49k-token vocabulary take far longer to build than the grammar itself.
    pub fn for_spec_like(&self, spec: &EnvSpec, limits: ActionLimits) -> Result<Self> {
        Self::with_factory(
            self.factory.clone(),
            lark_grammar_for(spec, limits),
            self.end,
            self.vocab,
        )
    }

    fn compile(tokenizer: &Tokenizer, lark: String) -> Result<Self> {
        let json: Value = serde_json::from_str(tokenizer.to_json()).map_err(constraint)?;
        let words = llguidance::token_bytes_from_tokenizer_json(&json).map_err(constraint)?;
        let vocab = words.len();
        let trie = TokTrie::from(&TokRxInfo::new(vocab as u32, tokenizer.eos()), &words);
        let env: TokEnv = Arc::new(CanonicalTokEnv {
            trie,
            tokenizer: tokenizer.clone(),
        });
        let mut factory = ParserFactory::new_simple(&env).map_err(constraint)?;
        // The lexer's budgets, ten times llguidance's defaults (1M and 200k, ~20 ms and ~14
        // ms): an SQL episode over a nine-table schema declares a query shape of ~300k
        // characters whose first masks exceed the defaults; a grammar that needs less spends
        // no more.
        let limits = factory.limits_mut();
        limits.initial_lexer_fuel *= 10;
        limits.step_lexer_fuel *= 10;
        Self::with_factory(Arc::new(factory), lark, tokenizer.end(), vocab)
    }

    /// Compiles `lark` with `factory` — now, so that a bad schema fails here, not
    /// mid-rollout.
    fn with_factory(
        factory: Arc<ParserFactory>,
        lark: String,
        end: u32,
        vocab: usize,
    ) -> Result<Self> {
        let parser = factory
            .create_parser(TopLevelGrammar::from_lark(lark))
            .map_err(constraint)?;
        let compiled = Matcher::new(Ok(parser));
        if let Some(e) = compiled.get_error() {
            return Err(PolicyError::Constraint(e));
        }
        Ok(Self {
            factory,
            compiled,
            end,
            vocab,
        })
    }

    /// A fresh matcher for one generation (a clone of the compiled grammar's, at its start).
    pub fn matcher(&self) -> Result<ToolCallMatcher> {
        Ok(ToolCallMatcher {
            matcher: self.compiled.clone(),
            end: self.end,
            vocab: self.vocab,
            finished: false,
        })
    }
}

/// The state of one constrained generation.
pub struct ToolCallMatcher {
    matcher: Matcher,
    end: u32,
    vocab: usize,
    finished: bool,
}

impl std::fmt::Debug for ToolCallMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCallMatcher")
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl ToolCallMatcher {
    /// The tokens allowed next, as a mask over the vocabulary. Once the JSON is complete only
    /// `<|end|>` is allowed; after `<|end|>` nothing is.
    pub fn allowed(&mut self) -> Result<Vec<bool>> {
        let mut mask = vec![false; self.vocab];
        if self.finished {
            return Ok(mask);
        }
        if self.matcher.is_stopped() {
            // The grammar's single top-level value has closed: the turn ends here.
            mask[self.end as usize] = true;
            return Ok(mask);
        }
        let vob = self.matcher.compute_mask().map_err(constraint)?;
        vob.iter_set_entries(|t| {
            if t < mask.len() {
                mask[t] = true;
            }
        });
        if self.matcher.is_accepting().unwrap_or(false) {
            mask[self.end as usize] = true;
        }
        // The eos token stands for "grammar complete"; the template ends turns with <|end|>.
        mask[0] = false;
        Ok(mask)
    }

    /// The tokens the grammar forces next (the canonical tokenisation of the only bytes it
    /// allows), possibly none. A sampler appends them without drawing: the JSON scaffolding
    /// (`{"thought":`, tool names fixed by the choice so far, `"parameters":{` …) then costs no
    /// choices and comes out in the tokenizer's own merges rather than in random byte-level
    /// splits.
    pub fn forced(&mut self) -> Vec<u32> {
        if self.finished || self.matcher.is_stopped() {
            return Vec::new();
        }
        self.matcher.compute_ff_tokens()
    }

    /// Every token forced next: [`forced`](Self::forced), or the end of the turn once the
    /// action's JSON has closed (then nothing else is allowed).
    pub fn forced_next(&mut self) -> Vec<u32> {
        if !self.finished && self.matcher.is_stopped() {
            return vec![self.end];
        }
        self.forced()
    }

    /// Advances by one sampled token.
    pub fn consume(&mut self, token: u32) -> Result<()> {
        if self.finished {
            return Err(PolicyError::Disallowed {
                token,
                reason: "the turn has ended".into(),
            });
        }
        if token == self.end {
            if self.matcher.is_stopped() || self.matcher.is_accepting().unwrap_or(false) {
                self.finished = true;
                return Ok(());
            }
            return Err(PolicyError::Disallowed {
                token,
                reason: "the action JSON is not complete".into(),
            });
        }
        self.matcher
            .consume_token(token)
            .map_err(|e| PolicyError::Disallowed {
                token,
                reason: e.to_string(),
            })
    }

    /// Whether the turn is complete (`<|end|>` consumed).
    pub fn is_finished(&self) -> bool {
        self.finished
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_large_anchored_pattern_loses_its_length_bounds() {
        let string = |pattern: String| json!({"type": "object", "properties": {"q": {"type": "string", "pattern": pattern, "maxLength": 9, "minLength": 1}}});
        let large = format!("^({})$", vec!["SELECT 1"; 600].join("|"));
        for (pattern, bounded) in [
            ("^O[0-9]{4}$".to_owned(), true),
            (large[1..large.len() - 1].to_owned(), true),
            (large, false),
        ] {
            let mut schema = string(pattern.clone());
            unbound_patterns(&mut schema);
            let q = &schema["properties"]["q"];
            assert_eq!(q.get("maxLength").is_some(), bounded, "{}", &pattern[..12]);
            assert_eq!(q.get("minLength").is_some(), bounded);
            assert_eq!(q["pattern"], json!(pattern));
        }
    }
}

//! This episode's narrowing: the new delivery address is quoted from the customer.
//!
//! A support agent does not invent an address; it copies the one the customer wrote. The reset
//! observation therefore narrows `update_address`'s `address` to the spans of the customer's
//! opening message (every run of up to [`MAX_SPAN_WORDS`] words, closing punctuation dropped),
//! so a constrained decoder cannot add a tail (", USA") or change a digit. The env still accepts
//! any address its spec allows; only decoders that read the narrowing are held to it. The
//! simulated customer gives nothing but order numbers and e-mails after the opening, so the
//! opening is every address an episode has.

use sandgym_env_api::{Narrowing, Schema};

use crate::tasks::Task;

/// The longest span, in words, offered as an address (the bundled ones have four).
pub const MAX_SPAN_WORDS: usize = 8;

/// The longest address the spec allows, in characters (`update_address`'s schema uses it too).
pub const MAX_ADDRESS_CHARS: usize = 200;

/// The narrowing of `task`'s episode: `update_address` takes an address quoted from the opening.
pub fn narrowing(task: &Task, order_id: Schema) -> Narrowing {
    let spans = quoted_spans(&task.opening, MAX_SPAN_WORDS);
    let address = Schema::string()
        .with_length(1, MAX_ADDRESS_CHARS as u64)
        .with_enum(spans);
    Narrowing::default().tool(
        "update_address",
        Schema::object()
            .property("order_id", order_id, true)
            .property("address", address, true),
    )
}

/// The distinct runs of 1 to `max_words` whitespace-separated words of `text`, in order of
/// first appearance, each without the punctuation that closes a sentence or clause at its end
/// or opens a quote at its start; none empty, none longer (in bytes) than the 200 characters
/// the spec allows an address.
pub fn quoted_spans(text: &str, max_words: usize) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut spans: Vec<String> = Vec::new();
    for start in 0..words.len() {
        for end in start + 1..=(start + max_words).min(words.len()) {
            let span = words[start..end]
                .join(" ")
                .trim_start_matches(|c: char| c.is_whitespace() || "\"'(".contains(c))
                .trim_end_matches(|c: char| c.is_whitespace() || ".,!?;:\"')".contains(c))
                .to_owned();
            if !span.is_empty() && span.len() <= MAX_ADDRESS_CHARS && !spans.contains(&span) {
                spans.push(span);
            }
        }
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_hold_the_address_without_its_closing_punctuation_and_nothing_invented() {
        let spans = quoted_spans(
            "Please ship my lamp to 12 Oak Street, Springfield. Thanks!",
            8,
        );
        assert!(spans.contains(&"12 Oak Street, Springfield".to_owned()));
        assert!(spans.contains(&"Thanks".to_owned()));
        assert!(!spans.iter().any(|s| s.ends_with('.') || s.ends_with(',')));
        assert!(!spans.iter().any(|s| s.contains("USA")));
        assert!(!spans.iter().any(|s| s.is_empty()));
        // Ten words: 10 + 9 + ... + 3 runs of up to eight words, all distinct here.
        assert_eq!(spans.len(), (3..=10).sum::<usize>());
        assert!(quoted_spans("  ", 8).is_empty());
        assert!(quoted_spans(". , !", 8).is_empty());
    }
}

//! Prompts into a KV cache with every shared prefix encoded once.
//!
//! The prompts of a batch share a lot: a group of rollouts repeats one prompt, and the
//! prompts of one env share its system turn and, often, a long part of the instruction (a
//! database schema before the question). [`prefill`] arranges the distinct prompts in a
//! radix tree and encodes it level by level: each tree edge runs through the model once, its
//! keys and values are copied to the rows below it (an edge every prompt shares is not
//! copied: the rows share it in the cache, [`KvCache::share_prefix`]), and only what differs
//! is encoded per prompt. The result is the cache a plain left-padded prefill would give (the same keys and
//! values at the same positions, padding slots masked out), at a fraction of the work.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use crate::cache::{KvCache, SeqCache};
use crate::model::PolicyModel;

/// Prompts encoded into a KV cache (see the module docs).
#[derive(Debug)]
pub struct Prefill<B: Backend> {
    /// Keys and values of every prompt, one row per prompt.
    pub cache: KvCache<B>,
    /// Per row and cached slot: whether the slot holds a prompt token (`false`: padding).
    pub valid: Vec<Vec<bool>>,
    /// Per row: the position of the token after its prompt (the prompt's length).
    pub next_pos: Vec<i64>,
    /// The logits after each prompt's last token, `[rows, vocab]`.
    pub logits: Tensor<B, 2>,
}

/// One node of the radix tree over the prompts' contexts (all their tokens but the last).
#[derive(Debug)]
struct Node {
    /// The node above it (`None` for the top level).
    parent: Option<usize>,
    /// A prompt whose context runs through this node: the edge is its tokens `start..end`.
    rep: usize,
    start: usize,
    end: usize,
    /// Depth in the tree (the level it is encoded at).
    level: usize,
}

/// Builds the tree of `contexts[ids]`, all of which share `contexts[id][..depth]`, below
/// `parent`; records for each context the deepest node it passes through in `leaf`.
fn build(
    contexts: &[&[u32]],
    ids: &[usize],
    depth: usize,
    parent: Option<usize>,
    level: usize,
    nodes: &mut Vec<Node>,
    leaf: &mut [Option<usize>],
) {
    let first = contexts[ids[0]];
    // The longest prefix every context of the set shares.
    let mut end = first.len();
    for &i in &ids[1..] {
        let c = contexts[i];
        let mut k = depth;
        while k < end && k < c.len() && c[k] == first[k] {
            k += 1;
        }
        end = k;
    }
    let (here, level_below) = if end > depth {
        nodes.push(Node {
            parent,
            rep: ids[0],
            start: depth,
            end,
            level,
        });
        (Some(nodes.len() - 1), level + 1)
    } else {
        (parent, level)
    };
    // Contexts that end here stop at this node; the others split by their next token.
    let mut rest: Vec<usize> = Vec::new();
    for &i in ids {
        if contexts[i].len() == end {
            leaf[i] = here;
        } else {
            rest.push(i);
        }
    }
    rest.sort_by_key(|&i| contexts[i][end]);
    let mut k = 0;
    while k < rest.len() {
        let token = contexts[rest[k]][end];
        let mut j = k;
        while j < rest.len() && contexts[rest[j]][end] == token {
            j += 1;
        }
        build(contexts, &rest[k..j], end, here, level_below, nodes, leaf);
        k = j;
    }
}

/// The shortest shared edge worth a level of its own: a level pads every row to its longest
/// edge, so a few shared words ("How many") cost more padding than they save. Measured on
/// the SQL env's prompts at batch 64: 6 levels held 1,508 tokens in 5,321 padded positions.
const MIN_SHARED: usize = 16;

/// Folds the internal nodes whose edge is shorter than [`MIN_SHARED`] into the edges below
/// them (a context that ended at such a node gets a leaf edge of its own) and renumbers the
/// levels.
fn prune(nodes: Vec<Node>, leaf: &mut [Option<usize>]) -> Vec<Node> {
    let n = nodes.len();
    let mut children = vec![0usize; n];
    for node in &nodes {
        if let Some(p) = node.parent {
            children[p] += 1;
        }
    }
    let mut nodes: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    // Parents come before their children (depth-first construction), so a walk from the end
    // folds the deepest nodes first.
    let mut extra: Vec<Node> = Vec::new();
    for i in (0..n).rev() {
        let node = nodes[i].as_ref().expect("not folded yet");
        if children[i] == 0 || node.end - node.start >= MIN_SHARED {
            continue;
        }
        let (parent, start, end) = (node.parent, node.start, node.end);
        for (u, l) in leaf.iter_mut().enumerate() {
            if *l == Some(i) {
                extra.push(Node {
                    parent,
                    rep: u,
                    start,
                    end,
                    level: 0,
                });
                *l = Some(n + extra.len() - 1);
            }
        }
        for node in nodes.iter_mut().flatten() {
            if node.parent == Some(i) {
                node.parent = parent;
                node.start = start;
            }
        }
        for node in &mut extra {
            if node.parent == Some(i) {
                node.parent = parent;
                node.start = start;
            }
        }
        nodes[i] = None;
    }
    // Renumber: keep the surviving nodes in order, then their levels from the top.
    let all: Vec<Option<Node>> = nodes
        .into_iter()
        .chain(extra.into_iter().map(Some))
        .collect();
    let mut index = vec![None; all.len()];
    let mut kept = Vec::new();
    for (i, node) in all.into_iter().enumerate() {
        if let Some(node) = node {
            index[i] = Some(kept.len());
            kept.push(node);
        }
    }
    for node in &mut kept {
        node.parent = node.parent.map(|p| index[p].expect("parents survive"));
    }
    for l in leaf.iter_mut() {
        *l = l.map(|i| index[i].expect("leaves survive"));
    }
    // A node's parent may now come after it (a leaf edge added above): iterate to a fixpoint.
    loop {
        let mut changed = false;
        for i in 0..kept.len() {
            let level = kept[i].parent.map_or(0, |p| kept[p].level + 1);
            if kept[i].level != level {
                kept[i].level = level;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    kept
}

/// An integer tensor of `shape` from row-major values.
pub(crate) fn ints<B: Backend>(
    values: Vec<i64>,
    shape: [usize; 2],
    device: &B::Device,
) -> Tensor<B, 2, Int> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

/// The most attention scores (`rows × queries × slots`, per head) one forward pass of a
/// prefill may hold: 2^22, 16 MiB per head in f32. A longer piece is encoded in windows
/// (chunked prefill); without the cap, 64 multi-turn episodes of ~1,400 tokens held
/// ~4.5 GiB of scores per layer at once.
pub const PREFILL_SCORES: usize = 1 << 22;

/// Appends one left-padded piece per row to `cache` (rows already gathered) and `valid`:
/// row `r` gets `pieces[r]` at positions `start[r]..`. Returns the outputs' last position.
///
/// The padded columns are encoded in windows of as many columns (at least 16) as keep each
/// pass within `max_scores`: every window is itself a left-padded piece (padding only ever comes
/// first), and its queries attend to the cached windows before it, so the cache, the
/// validity and the last logits are those of one pass over the whole piece.
fn append<B: Backend>(
    model: &PolicyModel<B>,
    cache: &mut KvCache<B>,
    valid: &mut [Vec<bool>],
    pieces: &[&[u32]],
    start: &[i64],
    max_scores: usize,
    device: &B::Device,
) -> crate::model::Output<B> {
    let rows = pieces.len().max(1);
    let width = pieces.iter().map(|p| p.len()).max().unwrap_or(0).max(1);
    let past = valid.first().map_or(0, Vec::len);
    let window = (max_scores / (rows * (past + width))).max(16).min(width);
    let mut from = 0;
    loop {
        let to = (from + window).min(width);
        let (sub, sub_start) = window_of(pieces, start, width, from, to);
        let out = append_piece(model, cache, valid, &sub, &sub_start, device);
        if to == width {
            return out;
        }
        from = to;
    }
}

/// Columns `from..to` of `pieces` left-padded to `width`: each row's tokens there and the
/// position of the first.
fn window_of<'a>(
    pieces: &[&'a [u32]],
    start: &[i64],
    width: usize,
    from: usize,
    to: usize,
) -> (Vec<&'a [u32]>, Vec<i64>) {
    pieces
        .iter()
        .zip(start)
        .map(|(p, &s)| {
            let pad = width - p.len();
            let (a, b) = (from.saturating_sub(pad), to.saturating_sub(pad));
            (&p[a..b], s + a as i64)
        })
        .unzip()
}

/// [`append`] in one forward pass.
fn append_piece<B: Backend>(
    model: &PolicyModel<B>,
    cache: &mut KvCache<B>,
    valid: &mut [Vec<bool>],
    pieces: &[&[u32]],
    start: &[i64],
    device: &B::Device,
) -> crate::model::Output<B> {
    let rows = pieces.len();
    let width = pieces.iter().map(|p| p.len()).max().unwrap_or(0).max(1);
    let (mut tokens, mut positions) = (Vec::with_capacity(rows * width), Vec::new());
    for (r, p) in pieces.iter().enumerate() {
        let pad = width - p.len();
        tokens.extend(std::iter::repeat_n(0i64, pad).chain(p.iter().map(|&t| i64::from(t))));
        positions.extend(std::iter::repeat_n(0i64, pad).chain(start[r]..start[r] + p.len() as i64));
        valid[r].extend((0..width).map(|j| j >= pad));
    }
    let lengths: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
    let packing = crate::Packing::of_lengths(&lengths, width, true, device);
    model.forward_last_packed(
        ints(tokens, [rows, width], device),
        ints(positions, [rows, width], device),
        crate::attention_bias(valid, width, device),
        Some(cache),
        packing.as_ref(),
    )
}

/// The cache's rows `rows` (one may repeat) in place of its own, with room for `slots` slots
/// in all (the longest prompt and a first stretch of decoding, reserved while the batch is
/// narrowest, so the rows are then written in place to the end). A one-row cache spread over
/// several rows becomes their shared prefix, held once ([`KvCache::share_prefix`]).
fn spread<B: Backend>(cache: &mut KvCache<B>, rows: &[usize], slots: usize) {
    if rows.len() > 1 && cache.share_prefix(rows.len(), slots) {
        return;
    }
    cache.reserve_slots(slots);
    *cache = cache.select(rows);
}

/// Encodes `prompts` (none empty) into a KV cache, each shared prefix once (see the module
/// docs), and returns the logits after each prompt's last token.
///
/// # Panics
/// When `prompts` is empty or holds an empty prompt.
pub fn prefill<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    device: &B::Device,
) -> Prefill<B> {
    prefill_within(model, prompts, PREFILL_SCORES, device)
}

/// [`prefill`] with each forward pass holding at most `max_scores` attention scores per head
/// (`rows × queries × slots`; at least 16 queries a pass): a long level of the tree is
/// encoded in windows, each attending to the ones before it, with the same result.
///
/// # Panics
/// When `prompts` is empty or holds an empty prompt.
pub fn prefill_within<B: Backend>(
    model: &PolicyModel<B>,
    prompts: &[Vec<u32>],
    max_scores: usize,
    device: &B::Device,
) -> Prefill<B> {
    assert!(!prompts.is_empty(), "no prompts to encode");
    assert!(
        prompts.iter().all(|p| !p.is_empty()),
        "prompts must not be empty"
    );
    // Distinct prompts, and each row's.
    let mut uniq: Vec<&[u32]> = Vec::new();
    let mut index = std::collections::HashMap::<&[u32], usize>::new();
    let row_of: Vec<usize> = prompts
        .iter()
        .map(|p| {
            *index.entry(p.as_slice()).or_insert_with(|| {
                uniq.push(p.as_slice());
                uniq.len() - 1
            })
        })
        .collect();
    let contexts: Vec<&[u32]> = uniq.iter().map(|p| &p[..p.len() - 1]).collect();
    let mut nodes = Vec::new();
    let mut leaf = vec![None; uniq.len()];
    let all: Vec<usize> = (0..uniq.len()).collect();
    build(&contexts, &all, 0, None, 0, &mut nodes, &mut leaf);
    let nodes = prune(nodes, &mut leaf);
    // Each prompt's node at every level (its deepest node once below it: carried along with
    // nothing to add).
    let levels = nodes.iter().map(|n| n.level + 1).max().unwrap_or(0);
    let path = |u: usize| -> Vec<Option<usize>> {
        let mut chain = Vec::new();
        let mut at = leaf[u];
        while let Some(n) = at {
            chain.push(n);
            at = nodes[n].parent;
        }
        chain.reverse();
        (0..levels)
            .map(|l| chain.get(l).or(chain.last()).copied())
            .collect()
    };
    let paths: Vec<Vec<Option<usize>>> = (0..uniq.len()).map(path).collect();
    let mut cache = KvCache::new(model.n_layers());
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    // Rows of the current level, each the prompt-path key it stands for.
    let mut keys: Vec<Option<usize>> = Vec::new();
    let mut valid: Vec<Vec<bool>> = Vec::new();
    for l in 0..levels {
        let mut level_keys: Vec<Option<usize>> = Vec::new();
        let mut parent_rows = Vec::new();
        for (u, p) in paths.iter().enumerate() {
            let key = p[l];
            if level_keys.contains(&key) {
                continue;
            }
            level_keys.push(key);
            if l > 0 {
                let up = paths[u][l - 1];
                parent_rows.push(keys.iter().position(|&k| k == up).expect("parent row"));
            }
        }
        if l > 0 {
            spread(&mut cache, &parent_rows, longest + crate::cache::ROOM);
            valid = parent_rows.iter().map(|&r| valid[r].clone()).collect();
        } else {
            valid = vec![Vec::new(); level_keys.len()];
        }
        let pieces: Vec<&[u32]> = level_keys
            .iter()
            .map(|k| match k {
                Some(n) if nodes[*n].level == l => {
                    let node = &nodes[*n];
                    &uniq[node.rep][node.start..node.end]
                }
                _ => &[],
            })
            .collect();
        let start: Vec<i64> = level_keys
            .iter()
            .map(|k| k.map_or(0, |n| nodes[n].start as i64))
            .collect();
        append(
            model, &mut cache, &mut valid, &pieces, &start, max_scores, device,
        );
        keys = level_keys;
    }
    // Last, every distinct prompt's final token, which gives its logits.
    let parent_rows: Vec<usize> = if levels == 0 {
        Vec::new()
    } else {
        paths
            .iter()
            .map(|p| {
                keys.iter()
                    .position(|&k| k == p[levels - 1])
                    .expect("leaf row")
            })
            .collect()
    };
    if levels > 0 {
        spread(&mut cache, &parent_rows, longest + crate::cache::ROOM);
        valid = parent_rows.iter().map(|&r| valid[r].clone()).collect();
    } else {
        valid = vec![Vec::new(); uniq.len()];
    }
    let last: Vec<&[u32]> = uniq.iter().map(|p| &p[p.len() - 1..]).collect();
    let start: Vec<i64> = uniq.iter().map(|p| p.len() as i64 - 1).collect();
    let out = append(
        model, &mut cache, &mut valid, &last, &start, max_scores, device,
    );
    let vocab = out.logits.dims()[2];
    let mut logits = out.logits.reshape([uniq.len(), vocab]);
    // Back to one row per prompt.
    if uniq.len() < prompts.len() {
        cache = cache.select(&row_of);
        valid = row_of.iter().map(|&u| valid[u].clone()).collect();
        let idx = Tensor::<B, 1, Int>::from_data(
            TensorData::new(row_of.iter().map(|&u| u as i64).collect(), [row_of.len()]),
            device,
        );
        logits = logits.select(0, idx);
    }
    Prefill {
        cache,
        valid,
        next_pos: prompts.iter().map(|p| p.len() as i64).collect(),
        logits,
    }
}

/// Continues each row's cached sequence `bases[r]` (which must encode a strict prefix of
/// `prompts[r]`, see [`SeqCache::continues`]) with the rest of its prompt: the bases
/// left-padded into one cache, then every row's new tokens at its own positions, in windows
/// of at most `max_scores` scores as in [`prefill_within`]. The result is the prefill of the
/// whole prompts (a multi-turn episode's next turn encodes only its last action and
/// observation).
///
/// # Panics
/// When `bases` and `prompts` differ in length, are empty, or a base does not continue.
pub fn prefill_continuing<B: Backend>(
    model: &PolicyModel<B>,
    bases: &[&SeqCache<B>],
    prompts: &[Vec<u32>],
    max_scores: usize,
    device: &B::Device,
) -> Prefill<B> {
    assert_eq!(bases.len(), prompts.len(), "one base per prompt");
    assert!(
        bases.iter().zip(prompts).all(|(b, p)| b.continues(p)),
        "every base must encode a strict prefix of its prompt"
    );
    let (mut cache, mut valid) = KvCache::stack(bases);
    let pieces: Vec<&[u32]> = bases
        .iter()
        .zip(prompts)
        .map(|(b, p)| &p[b.tokens().len()..])
        .collect();
    let start: Vec<i64> = bases.iter().map(|b| b.tokens().len() as i64).collect();
    let out = append(
        model, &mut cache, &mut valid, &pieces, &start, max_scores, device,
    );
    let vocab = out.logits.dims()[2];
    Prefill {
        cache,
        valid,
        next_pos: prompts.iter().map(|p| p.len() as i64).collect(),
        logits: out.logits.reshape([prompts.len(), vocab]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(prompts: &[&[u32]]) -> (Vec<Node>, Vec<Option<usize>>) {
        let contexts: Vec<&[u32]> = prompts.iter().map(|p| &p[..p.len() - 1]).collect();
        let mut nodes = Vec::new();
        let mut leaf = vec![None; prompts.len()];
        let all: Vec<usize> = (0..prompts.len()).collect();
        build(&contexts, &all, 0, None, 0, &mut nodes, &mut leaf);
        (nodes, leaf)
    }

    #[test]
    fn shared_prefixes_become_one_edge_each() {
        // Two "databases" under one system prefix, two questions on the first.
        let a: &[u32] = &[1, 2, 3, 10, 11, 20, 9];
        let b: &[u32] = &[1, 2, 3, 10, 11, 21, 9];
        let c: &[u32] = &[1, 2, 3, 12, 30, 9];
        let (nodes, leaf) = tree(&[a, b, c]);
        let edges: Vec<(usize, usize, usize)> =
            nodes.iter().map(|n| (n.start, n.end, n.level)).collect();
        // [1,2,3] at level 0; [10,11] and [12,30] at level 1; [20] and [21] at level 2.
        assert!(edges.contains(&(0, 3, 0)), "{edges:?}");
        assert_eq!(
            edges.iter().filter(|e| **e == (3, 5, 1)).count(),
            2,
            "{edges:?}"
        );
        assert_eq!(
            edges.iter().filter(|e| **e == (5, 6, 2)).count(),
            2,
            "{edges:?}"
        );
        assert_eq!(nodes.len(), 5);
        assert!(leaf.iter().all(Option::is_some));
    }

    #[test]
    fn a_context_that_is_a_prefix_of_another_ends_inside() {
        let a: &[u32] = &[1, 2, 3];
        let b: &[u32] = &[1, 2, 3, 4, 5];
        let (nodes, leaf) = tree(&[a, b]);
        // a's context [1, 2] is a prefix of b's [1, 2, 3, 4].
        assert_eq!(nodes.len(), 2);
        assert_eq!((nodes[0].start, nodes[0].end), (0, 2));
        assert_eq!(leaf[0], Some(0));
        assert_eq!(leaf[1], Some(1));
    }

    #[test]
    fn short_shared_edges_fold_into_the_edges_below() {
        // A 20-token system prefix; then two questions sharing 2 words, one question of their
        // own, and one whose context ends where the shared words do.
        let system: Vec<u32> = (100..120).collect();
        let with = |tail: &[u32]| -> Vec<u32> { system.iter().chain(tail).copied().collect() };
        let prompts = [
            with(&[1, 2, 3, 9]),
            with(&[1, 2, 4, 9]),
            with(&[5, 9]),
            with(&[1, 2, 9]),
        ];
        let refs: Vec<&[u32]> = prompts.iter().map(Vec::as_slice).collect();
        let (nodes, mut leaf) = tree(&refs);
        let nodes = prune(nodes, &mut leaf);
        // Kept: the system edge (20 tokens) at level 0, and one leaf edge per prompt from
        // token 20 at level 1 (the shared [1, 2] folded into them).
        assert_eq!(
            nodes.iter().filter(|n| n.level == 0).count(),
            1,
            "{nodes:?}"
        );
        let root = nodes.iter().position(|n| n.level == 0).unwrap();
        assert_eq!((nodes[root].start, nodes[root].end), (0, 20));
        let leaves: Vec<(usize, usize)> = leaf
            .iter()
            .map(|l| {
                let n = &nodes[l.unwrap()];
                assert_eq!((n.level, n.parent), (1, Some(root)), "{nodes:?}");
                (n.start, n.end)
            })
            .collect();
        assert_eq!(leaves, vec![(20, 23), (20, 23), (20, 21), (20, 22)]);
    }

    #[test]
    fn single_token_prompts_have_no_tree() {
        let (nodes, leaf) = tree(&[&[5], &[6]]);
        assert!(nodes.is_empty());
        assert_eq!(leaf, vec![None, None]);
    }
}

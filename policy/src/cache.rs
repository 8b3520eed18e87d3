//! The key/value cache for incremental decoding.

use std::sync::Arc;

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// Keys and values of one layer, `[batch, kv_heads, seq, head_dim]` each.
#[derive(Clone, Debug, Default)]
pub struct LayerCache<B: Backend> {
    kv: Option<(Tensor<B, 4>, Tensor<B, 4>)>,
}

impl<B: Backend> LayerCache<B> {
    /// Appends the new keys and values and returns the full ones.
    pub fn append(&mut self, k: Tensor<B, 4>, v: Tensor<B, 4>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let (k, v) = match self.kv.take() {
            Some((pk, pv)) => (Tensor::cat(vec![pk, k], 2), Tensor::cat(vec![pv, v], 2)),
            None => (k, v),
        };
        self.kv = Some((k.clone(), v.clone()));
        (k, v)
    }
}

/// A KV cache for every layer: the attention keys and values of all tokens seen so far, so
/// each new token costs one position of compute instead of the whole sequence.
#[derive(Clone, Debug)]
pub struct KvCache<B: Backend> {
    layers: Vec<LayerCache<B>>,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache for `layers` layers.
    pub fn new(layers: usize) -> Self {
        Self {
            layers: (0..layers).map(|_| LayerCache { kv: None }).collect(),
        }
    }

    /// One layer's cache.
    pub fn layer(&mut self, i: usize) -> &mut LayerCache<B> {
        &mut self.layers[i]
    }

    /// Tokens cached so far.
    pub fn len(&self) -> usize {
        self.layers
            .first()
            .and_then(|l| l.kv.as_ref())
            .map_or(0, |(k, _)| k.dims()[2])
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cache of batch rows `rows`, in that order (a row may repeat).
    pub fn select(&self, rows: &[usize]) -> Self {
        let layers = self
            .layers
            .iter()
            .map(|l| LayerCache {
                kv: l.kv.as_ref().map(|(k, v)| {
                    let idx = ints(rows.iter().map(|&r| r as i64).collect(), &k.device());
                    (k.clone().select(0, idx.clone()), v.clone().select(0, idx))
                }),
            })
            .collect();
        Self { layers }
    }

    /// The keys and values of each layer (`None` for a layer nothing was cached in).
    pub fn into_layers(self) -> Vec<Option<(Tensor<B, 4>, Tensor<B, 4>)>> {
        self.layers.into_iter().map(|l| l.kv).collect()
    }

    /// A cache holding these keys and values per layer.
    pub fn from_layers(layers: Vec<Option<(Tensor<B, 4>, Tensor<B, 4>)>>) -> Self {
        Self {
            layers: layers.into_iter().map(|kv| LayerCache { kv }).collect(),
        }
    }
}

/// One sequence's keys and values and the tokens they encode: a multi-turn episode's
/// history kept from one generation to the next, so that the next turn encodes only what was
/// added ([`generate_continuing`](crate::generate_continuing)).
///
/// It is a row of the batch cache it was encoded in, shared with the batch's other rows: making
/// one copies nothing (an episode that ends costs nothing), and the batch's memory is freed
/// when its last row is dropped. Only [`KvCache::stack`] copies, the valid slots alone.
#[derive(Clone, Debug)]
pub struct SeqCache<B: Backend> {
    tokens: Vec<u32>,
    batch: Arc<(KvCache<B>, Vec<Vec<bool>>)>,
    row: usize,
}

impl<B: Backend> SeqCache<B> {
    /// The tokens encoded.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Whether this cache encodes a strict prefix of `prompt` (and so can continue it).
    pub fn continues(&self, prompt: &[u32]) -> bool {
        self.tokens.len() < prompt.len() && prompt.starts_with(&self.tokens)
    }

    /// The cache of the first `len` tokens alone (at most all of them): it shares this one's
    /// memory and copies nothing.
    pub fn prefix(&self, len: usize) -> Self {
        Self {
            tokens: self.tokens[..len.min(self.tokens.len())].to_vec(),
            batch: self.batch.clone(),
            row: self.row,
        }
    }

    /// Row `row` of a batch cache, whose valid slots (`valid`) encode `tokens`, copied into a
    /// cache of its own: it keeps none of the batch's memory alive.
    ///
    /// # Panics
    /// When the count of valid slots is not the count of tokens, or a layer is empty.
    pub fn copy_row(cache: &KvCache<B>, valid: &[bool], row: usize, tokens: Vec<u32>) -> Self {
        assert_eq!(
            valid.iter().filter(|&&v| v).count(),
            tokens.len(),
            "slots and tokens"
        );
        let layers = gather(cache, row, valid, tokens.len())
            .into_iter()
            .map(Some)
            .collect();
        let len = tokens.len();
        Self {
            tokens,
            batch: Arc::new((KvCache::from_layers(layers), vec![vec![true; len]])),
            row: 0,
        }
    }

    /// The memory its tokens' keys and values take (of the batch it shares, its own slots).
    pub fn bytes(&self) -> usize {
        let (cache, _) = &*self.batch;
        let per_token: usize = cache
            .layers
            .iter()
            .filter_map(|l| l.kv.as_ref())
            .map(|(k, v)| {
                let [_, hk, _, dk] = k.dims();
                let [_, hv, _, dv] = v.dims();
                hk * dk + hv * dv
            })
            .sum();
        per_token * self.tokens.len() * std::mem::size_of::<B::FloatElem>()
    }

    /// The keys and values of its tokens in each layer, `[1, kv_heads, len, head_dim]`.
    fn compact(&self) -> Vec<(Tensor<B, 4>, Tensor<B, 4>)> {
        let (cache, valid) = &*self.batch;
        gather(cache, self.row, &valid[self.row], self.tokens.len())
    }
}

/// The keys and values of the first `len` valid slots of row `row` of `cache`, per layer,
/// `[1, kv_heads, len, head_dim]`.
fn gather<B: Backend>(
    cache: &KvCache<B>,
    row: usize,
    valid: &[bool],
    len: usize,
) -> Vec<(Tensor<B, 4>, Tensor<B, 4>)> {
    let slots: Vec<i64> = (0..valid.len())
        .filter(|&j| valid[j])
        .take(len)
        .map(|j| j as i64)
        .collect();
    cache
        .layers
        .iter()
        .map(|l| {
            let (k, v) = l.kv.as_ref().expect("a filled cache");
            let device = k.device();
            let row = ints(vec![row as i64], &device);
            let slots = ints(slots.clone(), &device);
            let take = |t: &Tensor<B, 4>| t.clone().select(0, row.clone()).select(2, slots.clone());
            (take(k), take(v))
        })
        .collect()
}

/// A 1D integer tensor of `values`.
fn ints<B: Backend>(values: Vec<i64>, device: &B::Device) -> Tensor<B, 1, burn::tensor::Int> {
    let n = values.len();
    Tensor::from_data(burn::tensor::TensorData::new(values, [n]), device)
}

impl<B: Backend> KvCache<B> {
    /// Each row of this batch cache as a [`SeqCache`] of `tokens[r]`, which must be what the
    /// row's valid slots (`valid[r]`) encode, in order. Copies nothing.
    ///
    /// # Panics
    /// When a row's count of valid slots is not its count of tokens.
    pub fn into_rows(self, valid: Vec<Vec<bool>>, tokens: &[Vec<u32>]) -> Vec<SeqCache<B>> {
        for (r, (row, tokens)) in valid.iter().zip(tokens).enumerate() {
            let slots = row.iter().filter(|&&v| v).count();
            assert_eq!(slots, tokens.len(), "row {r}: slots and tokens");
        }
        let batch = Arc::new((self, valid));
        tokens
            .iter()
            .enumerate()
            .map(|(row, tokens)| SeqCache {
                tokens: tokens.clone(),
                batch: batch.clone(),
                row,
            })
            .collect()
    }

    /// One batch of `rows` (their valid slots only), each left-padded with zero slots to the
    /// longest: the cache and each row's valid slots.
    ///
    /// # Panics
    /// When `rows` is empty or its caches come from models with different layer counts.
    pub fn stack(rows: &[&SeqCache<B>]) -> (Self, Vec<Vec<bool>>) {
        let longest = rows
            .iter()
            .map(|r| r.tokens.len())
            .max()
            .expect("rows to stack");
        let compact: Vec<_> = rows.iter().map(|r| r.compact()).collect();
        let n_layers = compact[0].len();
        assert!(
            compact.iter().all(|c| c.len() == n_layers),
            "layer counts differ"
        );
        let padded = |t: &Tensor<B, 4>| pad_left(t.clone(), longest);
        let layers = (0..n_layers)
            .map(|l| {
                let (ks, vs): (Vec<_>, Vec<_>) = compact
                    .iter()
                    .map(|c| (padded(&c[l].0), padded(&c[l].1)))
                    .unzip();
                LayerCache {
                    kv: Some((Tensor::cat(ks, 0), Tensor::cat(vs, 0))),
                }
            })
            .collect();
        let valid = rows
            .iter()
            .map(|r| {
                let pad = longest - r.tokens.len();
                (0..longest).map(|j| j >= pad).collect()
            })
            .collect();
        (Self { layers }, valid)
    }
}

impl<B: Backend> KvCache<B> {
    /// This cache's rows followed by `other`'s, each layer's shorter side left-padded with
    /// zero slots to the longer (the caller pads its rows' valid flags the same way).
    ///
    /// # Panics
    /// When the two have different layer counts or one has an empty layer.
    pub fn join(self, other: Self) -> Self {
        assert_eq!(self.layers.len(), other.layers.len(), "layer counts differ");
        let width = self.len().max(other.len());
        let layers = self
            .layers
            .into_iter()
            .zip(other.layers)
            .map(|(a, b)| {
                let ((ka, va), (kb, vb)) =
                    (a.kv.expect("a filled cache"), b.kv.expect("a filled cache"));
                let cat = |x: Tensor<B, 4>, y: Tensor<B, 4>| {
                    Tensor::cat(vec![pad_left(x, width), pad_left(y, width)], 0)
                };
                LayerCache {
                    kv: Some((cat(ka, kb), cat(va, vb))),
                }
            })
            .collect();
        Self { layers }
    }
}

/// `t` (`[rows, heads, len, dim]`) with zero slots before its own to make `width` slots.
fn pad_left<B: Backend>(t: Tensor<B, 4>, width: usize) -> Tensor<B, 4> {
    let [rows, heads, len, dim] = t.dims();
    if len == width {
        return t;
    }
    let pad = Tensor::zeros([rows, heads, width - len, dim], &t.device());
    Tensor::cat(vec![pad, t], 2)
}

/// The cache of an inference model as constants of its autodiff backend: a training forward
/// pass continues from it, and no gradient flows into it.
pub fn constant_cache<B: burn::tensor::backend::AutodiffBackend>(
    cache: KvCache<B::InnerBackend>,
) -> KvCache<B> {
    KvCache::from_layers(
        cache
            .into_layers()
            .into_iter()
            .map(|kv| kv.map(|(k, v)| (Tensor::from_inner(k), Tensor::from_inner(v))))
            .collect(),
    )
}

//! The key/value cache for incremental decoding.

use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

/// Keys and values of one layer, `[batch, kv_heads, seq, head_dim]` each.
#[derive(Debug, Default)]
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
#[derive(Debug)]
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
}

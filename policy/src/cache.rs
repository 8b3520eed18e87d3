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

    /// The cache of batch rows `rows`, in that order (a row may repeat).
    pub fn select(&self, rows: &[usize]) -> Self {
        let layers = self
            .layers
            .iter()
            .map(|l| LayerCache {
                kv: l.kv.as_ref().map(|(k, v)| {
                    let idx = Tensor::<B, 1, burn::tensor::Int>::from_data(
                        burn::tensor::TensorData::new(
                            rows.iter().map(|&r| r as i64).collect(),
                            [rows.len()],
                        ),
                        &k.device(),
                    );
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

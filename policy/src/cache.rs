//! The key/value cache for incremental decoding.

use std::sync::Arc;

use burn::backend::flex::{FlexTensor, Layout};
use burn::tensor::backend::Backend;
use burn::tensor::{Bytes, DType, Shape, Tensor};

use crate::fused::{On, back, classify, contiguous};

/// Slots a short append (a decoding step, a few forced tokens) leaves free after it when the
/// buffers must grow: the next steps write into them in place.
pub(crate) const ROOM: usize = 64;

/// Keys and values of one layer, `[batch, kv_heads, capacity, head_dim]` each, of which the
/// first `len` slots are filled.
///
/// A decoding step writes its keys and values into free slots in place (`write_slots`)
/// and attends over the whole buffer, the free slots masked by the bias
/// ([`PolicyModel`](crate::PolicyModel) pads it to [`KvCache::capacity`]). Appending by
/// concatenation copied every cached key and value at every step, for every layer: at a
/// batch of 16 and 1,400 cached tokens about 1 GB of SmolLM2's keys and values per decoding
/// step, more than its weights (0.54 GB).
///
/// A prefix every row shares (the system turn and a database schema before each question)
/// may be held once, `[1, kv_heads, prefix, head_dim]`, before the rows' own slots
/// ([`KvCache::share_prefix`]): the rows attend to it by broadcasting, each reading the one
/// copy, instead of each holding its own. A 63-row batch over a nine-table database's
/// 221-token prefix held 0.7 GB of copies, and on the 2-core machine it was measured on,
/// first writing that much fresh memory took 4-5 s.
#[derive(Clone, Debug, Default)]
pub struct LayerCache<B: Backend> {
    kv: Option<(Tensor<B, 4>, Tensor<B, 4>)>,
    len: usize,
    shared: Option<(Tensor<B, 4>, Tensor<B, 4>)>,
}

impl<B: Backend> LayerCache<B> {
    /// A cache holding exactly these keys and values.
    fn filled(kv: Option<(Tensor<B, 4>, Tensor<B, 4>)>) -> Self {
        let len = kv.as_ref().map_or(0, |(k, _)| k.dims()[2]);
        Self {
            kv,
            len,
            shared: None,
        }
    }

    /// The keys and values of the prefix every row shares (`[1, kv_heads, prefix,
    /// head_dim]`), if it holds one: they come before the rows' own slots.
    pub fn shared(&self) -> Option<(Tensor<B, 4>, Tensor<B, 4>)> {
        self.shared.clone()
    }

    /// Slots of the shared prefix.
    fn prefix_len(&self) -> usize {
        self.shared.as_ref().map_or(0, |(k, _)| k.dims()[2])
    }

    /// The same cache with the shared prefix copied into every row's buffers, before the
    /// rows' own slots (what the code that reads the buffers directly expects).
    fn unshared(mut self) -> Self {
        let Some((pk, pv)) = self.shared.take() else {
            return self;
        };
        let p = pk.dims()[2];
        let kv = match self.kv.take() {
            None => (pk, pv),
            Some((k, v)) => {
                let b = k.dims()[0];
                let before = |prefix: Tensor<B, 4>, x: Tensor<B, 4>| {
                    Tensor::cat(vec![prefix.repeat_dim(0, b), x], 2)
                };
                (before(pk, k), before(pv, v))
            }
        };
        Self {
            kv: Some(kv),
            len: p + self.len,
            shared: None,
        }
    }

    /// Slots the buffers hold, filled or not.
    fn capacity(&self) -> usize {
        self.kv.as_ref().map_or(0, |(k, _)| k.dims()[2])
    }

    /// Makes room for `t` more slots: buffers too small are copied once into larger ones, with
    /// [`ROOM`] free slots beyond them after a short append. An empty cache is left empty (its
    /// first append sets its shape).
    fn reserve(&mut self, t: usize) {
        if self.len + t > self.capacity() {
            let room = if t < ROOM { ROOM } else { 0 };
            self.grow(self.len + t + room);
        }
    }

    /// Copies the buffers into ones of `slots` slots when they hold fewer (the filled slots
    /// first, free ones after them). An empty cache is left empty.
    fn grow(&mut self, slots: usize) {
        let cap = self.capacity();
        if slots <= cap {
            return;
        }
        let Some((k, v)) = self.kv.take() else {
            return;
        };
        let grow = |x: Tensor<B, 4>| {
            let [b, h, _, d] = x.dims();
            let x = if cap == self.len {
                x
            } else {
                x.narrow(2, 0, self.len)
            };
            let free = Tensor::zeros([b, h, slots - self.len, d], &x.device());
            Tensor::cat(vec![x, free], 2)
        };
        self.kv = Some((grow(k), grow(v)));
    }

    /// Writes the new keys and values (`[batch, kv_heads, t, head_dim]`) into the next `t`
    /// slots and returns the whole buffers: `[batch, kv_heads, capacity, head_dim]`, of which
    /// the first `len` slots (now including these) are filled and the rest must be masked.
    pub fn append(&mut self, k: Tensor<B, 4>, v: Tensor<B, 4>) -> (Tensor<B, 4>, Tensor<B, 4>) {
        let t = k.dims()[2];
        self.reserve(t);
        let (k, v) = match self.kv.take() {
            Some((bk, bv)) => (write_slots(bk, self.len, k), write_slots(bv, self.len, v)),
            None => (k, v),
        };
        self.len += t;
        self.kv = Some((k.clone(), v.clone()));
        (k, v)
    }

    /// The filled slots' keys and values alone, `[batch, kv_heads, len, head_dim]` (the
    /// shared prefix's included in every row).
    fn into_filled(self) -> Option<(Tensor<B, 4>, Tensor<B, 4>)> {
        let this = self.unshared();
        let (len, cap) = (this.len, this.capacity());
        let this_kv = this.kv;
        this_kv.map(|(k, v)| {
            if len == cap {
                (k, v)
            } else {
                (k.narrow(2, 0, len), v.narrow(2, 0, len))
            }
        })
    }
}

/// `buf` (`[b, h, capacity, d]`) with slots `at..at + t` of each of its `[b, h]` rows
/// overwritten by `new` (`[b, h, t, d]`).
///
/// Written by hand for the CPU backend: burn-flex's `slice_assign` keeps a second reference
/// to the buffer while it writes, so its copy-on-write copies the whole buffer first — the
/// very copy the cache's free slots exist to avoid. Here the write goes into the buffer's own
/// memory whenever nothing else holds it (a decoding step's buffers are held by the cache
/// alone between steps). On other backends, and for the autodiff one, it is `slice_assign`.
fn write_slots<B: Backend>(buf: Tensor<B, 4>, at: usize, new: Tensor<B, 4>) -> Tensor<B, 4> {
    let [b, h, t, d] = new.dims();
    if std::any::TypeId::of::<B>() != std::any::TypeId::of::<crate::Cpu>() {
        return buf.slice_assign([0..b, 0..h, at..at + t, 0..d], new);
    }
    let cap = buf.dims()[2];
    let (On::Infer(buf), On::Infer(new)) = (classify(buf), classify(new)) else {
        unreachable!("the backend was checked")
    };
    let mut buf = contiguous(buf);
    let new = contiguous(new);
    let src = new.storage::<f32>();
    let dst = buf.storage_mut::<f32>();
    let span = t * d;
    for (r, from) in src.chunks_exact(span).take(b * h).enumerate() {
        let start = (r * cap + at) * d;
        dst[start..start + span].copy_from_slice(from);
    }
    back(buf)
}

/// Rows `keep` (ascending) of `t` (`[batch, …]`): in place where `t` alone holds its
/// contiguous CPU buffer (see [`KvCache::retain_rows`]), else by selection.
fn retain<B: Backend>(t: Tensor<B, 4>, keep: &[usize]) -> Tensor<B, 4> {
    let device = t.device();
    let by_selection = |t: Tensor<B, 4>| {
        let idx = ints(keep.iter().map(|&r| r as i64).collect(), &device);
        t.select(0, idx)
    };
    if std::any::TypeId::of::<B>() != std::any::TypeId::of::<crate::Cpu>() {
        return by_selection(t);
    }
    let On::Infer(x) = classify(t) else {
        unreachable!("the backend was checked")
    };
    match retain_in_place(x, keep) {
        Ok(x) => back(x),
        Err(x) => by_selection(back(x)),
    }
}

/// [`retain`] in the buffer's own memory: `Err` with the tensor untouched when it is not an
/// `f32` buffer held by it alone and laid out exactly as its shape.
fn retain_in_place(x: FlexTensor, keep: &[usize]) -> Result<FlexTensor, FlexTensor> {
    let dims = x.layout().shape().to_vec();
    let exact = x.dtype() == DType::F32
        && x.is_contiguous()
        && x.layout().start_offset() == 0
        && x.bytes().len() == x.layout().num_elements() * std::mem::size_of::<f32>();
    if !exact || !x.is_unique() || dims.len() != 4 || keep.last().is_some_and(|&r| r >= dims[0]) {
        return Err(x);
    }
    let layout = x.layout().clone();
    let data = x.data_arc();
    drop(x);
    let bytes = Arc::try_unwrap(data)
        .map_err(|data| FlexTensor::from_arc(data, layout.clone(), DType::F32))?;
    let mut values: Vec<f32> = bytes
        .try_into_vec::<f32>()
        .map_err(|bytes| FlexTensor::new(bytes, layout, DType::F32))?;
    let row: usize = dims[1..].iter().product();
    for (to, &from) in keep.iter().enumerate() {
        if to != from {
            values.copy_within(from * row..(from + 1) * row, to * row);
        }
    }
    values.truncate(keep.len() * row);
    let shape = Shape::new([keep.len(), dims[1], dims[2], dims[3]]);
    Ok(FlexTensor::new(
        Bytes::from_elems(values),
        Layout::contiguous(shape),
        DType::F32,
    ))
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
            layers: (0..layers).map(|_| LayerCache::filled(None)).collect(),
        }
    }

    /// One layer's cache.
    pub fn layer(&mut self, i: usize) -> &mut LayerCache<B> {
        &mut self.layers[i]
    }

    /// Tokens cached so far (the shared prefix's included).
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, |l| l.prefix_len() + l.len)
    }

    /// Slots every layer's buffers hold, filled or not (the shared prefix's first): the key
    /// slots a forward pass attends over, the free ones masked.
    pub fn capacity(&self) -> usize {
        self.layers
            .first()
            .map_or(0, |l| l.prefix_len() + l.capacity())
    }

    /// Holds the cache, one row of `prefix` tokens, as the prefix that `rows` rows share,
    /// each with buffers of its own for `slots - prefix` more slots (all free): what
    /// [`select`](Self::select) of that row `rows` times would give, without the copies (see
    /// [`LayerCache`]). A cache of another shape, or one already holding a shared prefix, is
    /// left as it is and `false` returned.
    pub fn share_prefix(&mut self, rows: usize, slots: usize) -> bool {
        let fits = self
            .layers
            .iter()
            .all(|l| l.shared.is_none() && l.kv.as_ref().is_some_and(|(k, _)| k.dims()[0] == 1));
        if !fits || rows == 0 {
            return false;
        }
        for l in &mut self.layers {
            let (k, v) = l.kv.take().expect("checked above");
            let p = l.len;
            let exact = |x: Tensor<B, 4>| {
                if x.dims()[2] == p {
                    x
                } else {
                    x.narrow(2, 0, p)
                }
            };
            let [_, h, _, d] = k.dims();
            let free = slots.saturating_sub(p).max(1);
            let device = k.device();
            l.kv = Some((
                Tensor::zeros([rows, h, free, d], &device),
                Tensor::zeros([rows, h, free, d], &device),
            ));
            l.shared = Some((exact(k), exact(v)));
            l.len = 0;
        }
        true
    }

    /// The same cache with any shared prefix copied into every row (see [`LayerCache`]).
    pub fn unshared(self) -> Self {
        Self {
            layers: self.layers.into_iter().map(LayerCache::unshared).collect(),
        }
    }

    /// Makes room in every layer for `t` more tokens (see [`LayerCache::append`]).
    pub fn reserve(&mut self, t: usize) {
        for l in &mut self.layers {
            l.reserve(t);
        }
    }

    /// Makes every layer's buffers hold at least `slots` slots, filled or free (copied once
    /// into larger ones where they hold fewer; an empty cache is left empty). Done while a
    /// batch is small — before [`select`](Self::select) repeats a shared prefix over many
    /// rows — it sizes the many rows' buffers once for everything still to come, where
    /// growing them later would copy them all again.
    pub fn reserve_slots(&mut self, slots: usize) {
        for l in &mut self.layers {
            let p = l.prefix_len();
            l.grow(slots.saturating_sub(p));
        }
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cache of batch rows `rows`, in that order (a row may repeat). All the rows in
    /// their order share this cache's buffers; any other selection copies them.
    pub fn select(&self, rows: &[usize]) -> Self {
        let batch = self
            .layers
            .iter()
            .find_map(|l| l.kv.as_ref())
            .map(|(k, _)| k.dims()[0]);
        if batch == Some(rows.len()) && rows.iter().enumerate().all(|(i, &r)| i == r) {
            return self.clone();
        }
        let layers = self
            .layers
            .iter()
            .map(|l| LayerCache {
                kv: l.kv.as_ref().map(|(k, v)| {
                    let idx = ints(rows.iter().map(|&r| r as i64).collect(), &k.device());
                    (k.clone().select(0, idx.clone()), v.clone().select(0, idx))
                }),
                len: l.len,
                shared: l.shared.clone(),
            })
            .collect();
        Self { layers }
    }

    /// Keeps batch rows `keep` (ascending, each once) and drops the others, as
    /// [`select`](Self::select) would, but in the buffers' own memory wherever nothing else
    /// holds them: the kept rows move down over the dropped ones and the buffers shrink in
    /// place. A decoder drops the rows that ended this way every few steps; a selection copied
    /// the whole cache each time into freshly faulted memory (on a nine-table database's
    /// 63-row batch, 0.7 GB and 3.3 s on the first drop). Elsewhere (a buffer another cache
    /// shares, another backend) it selects.
    ///
    /// # Panics
    /// When `keep` is not strictly ascending.
    pub fn retain_rows(&mut self, keep: &[usize]) {
        assert!(
            keep.windows(2).all(|w| w[0] < w[1]),
            "rows to keep must be ascending"
        );
        for l in &mut self.layers {
            if let Some((k, v)) = l.kv.take() {
                l.kv = Some((retain(k, keep), retain(v, keep)));
            }
        }
    }

    /// The keys and values of each layer, filled slots only (`None` for a layer nothing was
    /// cached in).
    pub fn into_layers(self) -> Vec<Option<(Tensor<B, 4>, Tensor<B, 4>)>> {
        self.layers
            .into_iter()
            .map(LayerCache::into_filled)
            .collect()
    }

    /// A cache holding these keys and values per layer.
    pub fn from_layers(layers: Vec<Option<(Tensor<B, 4>, Tensor<B, 4>)>>) -> Self {
        Self {
            layers: layers.into_iter().map(LayerCache::filled).collect(),
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
            .filter_map(|l| l.kv.as_ref().or(l.shared.as_ref()))
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
            // The row's slots after the shared prefix's, which every row holds.
            let (own, shared) = (l.kv.as_ref(), l.shared.as_ref());
            let device = own.or(shared).expect("a filled cache").0.device();
            let row = ints(vec![row as i64], &device);
            let slots = ints(slots.clone(), &device);
            let take = |own: Option<&Tensor<B, 4>>, shared: Option<&Tensor<B, 4>>| {
                let own = own.map(|t| t.clone().select(0, row.clone()));
                let whole = match (shared, own) {
                    (Some(p), Some(o)) => Tensor::cat(vec![p.clone(), o], 2),
                    (Some(p), None) => p.clone(),
                    (None, Some(o)) => o,
                    (None, None) => unreachable!("a filled cache"),
                };
                whole.select(2, slots.clone())
            };
            (
                take(own.map(|kv| &kv.0), shared.map(|kv| &kv.0)),
                take(own.map(|kv| &kv.1), shared.map(|kv| &kv.1)),
            )
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
                LayerCache::filled(Some((Tensor::cat(ks, 0), Tensor::cat(vs, 0))))
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
                let ((ka, va), (kb, vb)) = (
                    a.into_filled().expect("a filled cache"),
                    b.into_filled().expect("a filled cache"),
                );
                let cat = |x: Tensor<B, 4>, y: Tensor<B, 4>| {
                    Tensor::cat(vec![pad_left(x, width), pad_left(y, width)], 0)
                };
                LayerCache::filled(Some((cat(ka, kb), cat(va, vb))))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cpu;

    /// Where the layer's key buffer lives, and its filled keys.
    fn keys(layer: &LayerCache<Cpu>) -> (*const f32, Vec<f32>) {
        let (k, _) = layer.kv.clone().expect("a filled layer");
        let filled: Vec<f32> = k
            .clone()
            .narrow(2, 0, layer.len)
            .into_data()
            .to_vec()
            .unwrap();
        let On::Infer(k) = classify(k) else {
            unreachable!("a CPU tensor")
        };
        (k.storage::<f32>().as_ptr(), filled)
    }

    fn step(value: f32, t: usize) -> Tensor<Cpu, 4> {
        Tensor::full([2, 1, t, 3], value, &Default::default())
    }

    #[test]
    fn steps_are_written_into_free_slots_in_place_and_the_buffers_grow_once_full() {
        let mut layer = LayerCache::<Cpu>::default();
        // A prompt of 4 fills its buffers exactly; the first step grows them with room to spare.
        layer.append(step(1.0, 4), step(1.0, 4));
        assert_eq!((layer.len, layer.capacity()), (4, 4));
        let (k, v) = layer.append(step(2.0, 1), step(2.0, 1));
        assert_eq!(k.dims(), [2, 1, 5 + ROOM, 3]);
        assert_eq!(v.dims(), k.dims());
        drop((k, v));
        let (grown, _) = keys(&layer);
        // Every later step until the room is used lands in the same memory.
        for i in 0..ROOM {
            let _ = layer.append(step(3.0 + i as f32, 1), step(0.0, 1));
            assert_eq!(keys(&layer).0, grown, "step {i} copied the buffer");
        }
        assert_eq!((layer.len, layer.capacity()), (5 + ROOM, 5 + ROOM));
        // Full: the next step copies the filled slots into a larger buffer.
        let _ = layer.append(step(-1.0, 1), step(0.0, 1));
        let (moved, filled) = keys(&layer);
        assert_ne!(moved, grown);
        let expected: Vec<f32> = [1.0; 4]
            .into_iter()
            .chain([2.0])
            .chain((0..ROOM).map(|i| 3.0 + i as f32))
            .chain([-1.0])
            .flat_map(|x| [x; 3])
            .collect();
        // Both batch rows hold the same keys, slot after slot.
        assert_eq!(filled[..expected.len()], expected[..]);
        assert_eq!(filled[expected.len()..], expected[..]);
        // A shared buffer is never written under its other holder.
        let (held, _) = layer.kv.clone().unwrap();
        let before: Vec<f32> = held.clone().into_data().to_vec().unwrap();
        let _ = layer.append(step(9.0, 1), step(0.0, 1));
        assert_eq!(held.into_data().to_vec::<f32>().unwrap(), before);
    }

    #[test]
    fn reserved_slots_are_selected_once_and_written_in_place() {
        let mut cache = KvCache::<Cpu>::new(1);
        // One shared prefix of 4 slots, in a batch of one row.
        cache.layer(0).append(
            Tensor::full([1, 1, 4, 3], 1.0, &Default::default()),
            Tensor::full([1, 1, 4, 3], 1.0, &Default::default()),
        );
        assert_eq!(cache.capacity(), 4);
        cache.reserve_slots(10);
        assert_eq!((cache.len(), cache.capacity()), (4, 10));
        cache.reserve_slots(6); // never shrinks
        assert_eq!(cache.capacity(), 10);
        // Repeated over three rows with the room: the rows' appends then land in place.
        let mut rows = cache.select(&[0, 0, 0]);
        assert_eq!((rows.len(), rows.capacity()), (4, 10));
        let (before, filled) = keys(rows.layer(0));
        assert_eq!(filled, vec![1.0; 3 * 4 * 3]);
        let _ = rows.layer(0).append(step3(2.0, 6), step3(2.0, 6));
        let (after, filled) = keys(rows.layer(0));
        assert_eq!(after, before, "the reserved buffer was copied");
        let row: Vec<f32> = [1.0; 4]
            .into_iter()
            .chain([2.0; 6])
            .flat_map(|x| [x; 3])
            .collect();
        assert_eq!(filled, [row.clone(), row.clone(), row].concat());
        // Every row in its own order shares the buffers; any other selection copies them.
        let mut same = rows.select(&[0, 1, 2]);
        assert_eq!(keys(same.layer(0)).0, before);
        let mut other = rows.select(&[2, 1, 0]);
        assert_ne!(keys(other.layer(0)).0, before);
        let mut fewer = rows.select(&[0, 1]);
        assert_eq!(keys(fewer.layer(0)).1.len(), 2 * 10 * 3);
    }

    #[test]
    fn retained_rows_move_down_in_place_unless_the_buffer_is_shared() {
        // Four rows, row r's keys all r, its values all 10 + r, in buffers with free slots.
        let rows = |base: f32| {
            let data: Vec<f32> = (0..4).flat_map(|r| [base + r as f32; 2 * 3 * 2]).collect();
            Tensor::<Cpu, 4>::from_data(
                burn::tensor::TensorData::new(data, [4, 2, 3, 2]),
                &Default::default(),
            )
        };
        let mut cache = KvCache::<Cpu>::new(1);
        let _ = cache.layer(0).append(rows(0.0), rows(10.0));
        cache.reserve_slots(5);
        let (before, _) = keys(cache.layer(0));
        cache.retain_rows(&[1, 3]);
        assert_eq!((cache.len(), cache.capacity()), (3, 5));
        let (after, filled) = keys(cache.layer(0));
        assert_eq!(after, before, "the buffer was copied");
        assert_eq!(filled, [[1.0; 2 * 3 * 2], [3.0; 2 * 3 * 2]].concat());
        let (_, v) = cache.layer(0).kv.clone().unwrap();
        let v: Vec<f32> = v.narrow(2, 0, 3).into_data().to_vec().unwrap();
        assert_eq!(v, [[11.0; 2 * 3 * 2], [13.0; 2 * 3 * 2]].concat());
        // Steps still land in place after it.
        let _ = cache.layer(0).append(
            Tensor::full([2, 2, 1, 2], 7.0, &Default::default()),
            Tensor::full([2, 2, 1, 2], 7.0, &Default::default()),
        );
        assert_eq!(keys(cache.layer(0)).0, before);
        // A buffer another cache holds is left as it was: the rows are selected from it.
        let held = cache.clone();
        let before_held = keys(&held.layers[0]);
        cache.retain_rows(&[1]);
        assert_eq!(keys(&held.layers[0]), before_held);
        let (copy, filled) = keys(cache.layer(0));
        assert_ne!(copy, before);
        let head: Vec<f32> = [3.0; 6].into_iter().chain([7.0; 2]).collect();
        assert_eq!(filled, [head.clone(), head].concat());
    }

    fn step3(value: f32, t: usize) -> Tensor<Cpu, 4> {
        Tensor::full([3, 1, t, 3], value, &Default::default())
    }
}

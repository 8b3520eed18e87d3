//! The attention bias: which key slots each query may attend to, as the additive mask the
//! decoder's attention takes (`0` allowed, `-inf` masked). The one place that rule is written;
//! prefill, sampling, the trainer's batches and the benches build theirs here.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

/// The bias for `queries` new slots (the last ones of each row) over every slot of `valid`:
/// a query may attend to a valid slot at or before its own, and always to itself.
///
/// # Shapes
/// - `valid`: `rows` rows of `slots` flags (every row the same length)
/// - returns `[rows, 1, queries, slots]`
pub fn attention_bias<B: Backend>(
    valid: &[Vec<bool>],
    queries: usize,
    device: &B::Device,
) -> Tensor<B, 4> {
    let b = valid.len();
    let keys = valid.first().map_or(0, Vec::len);
    let mut data = vec![f32::NEG_INFINITY; b * queries * keys];
    for (r, row) in valid.iter().enumerate() {
        for q in 0..queries {
            let qi = keys - queries + q;
            for k in 0..=qi {
                if row[k] || k == qi {
                    data[(r * queries + q) * keys + k] = 0.0;
                }
            }
        }
    }
    Tensor::from_data(TensorData::new(data, [b, 1, queries, keys]), device)
}

/// The causal bias of one sequence of `t` tokens with nothing before them.
///
/// # Shapes
/// - returns `[1, 1, t, t]`
pub fn causal_bias<B: Backend>(t: usize, device: &B::Device) -> Tensor<B, 4> {
    attention_bias(&[vec![true; t]], t, device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_see_valid_earlier_slots_and_themselves() {
        let device = Default::default();
        let bias: Tensor<crate::Cpu, 4> =
            attention_bias(&[vec![true, false, true, true]], 2, &device);
        let v: Vec<f32> = bias.into_data().to_vec().unwrap();
        let inf = f32::NEG_INFINITY;
        // Query 0 sits at slot 2 (slot 1 is padding), query 1 at slot 3.
        assert_eq!(v, [0.0, inf, 0.0, inf, 0.0, inf, 0.0, 0.0]);
        let causal: Vec<f32> = causal_bias::<crate::Cpu>(2, &device)
            .into_data()
            .to_vec()
            .unwrap();
        assert_eq!(causal, [0.0, inf, 0.0, 0.0]);
    }
}

//! candle-nn adapters: a ParamSet from a VarMap (by name) or from Vars, a Sequential of
//! candle-nn modules and closures whose staged gradients equal one ordinary backward, and
//! the errors that name a parameter under no stage or two, a duplicate, a non-scalar loss;
//! `Tape::backward_to`, which leaves the first stages to the caller.

use candle_core::{DType, Device, Module, Tensor, Var};
use candle_nn::{linear, loss::cross_entropy, VarBuilder, VarMap};
use seam::{forward_backward, Batch, ParamSet, Sequential, StagedModel};

fn mlp(prefixes: [&str; 3]) -> seam::Result<Sequential> {
    let (varmap, dev) = (VarMap::new(), Device::Cpu);
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    let l1 = linear(6, 16, vb.pp("l1"))?;
    let l2 = linear(16, 16, vb.pp("l2"))?;
    let l3 = linear(16, 4, vb.pp("l3"))?;
    Sequential::builder(ParamSet::from_varmap(&varmap)?)
        .stage(prefixes[0], move |x: &Tensor| l1.forward(x)?.gelu())
        .stage(prefixes[1], move |x: &Tensor| l2.forward(x)?.gelu())
        .stage(prefixes[2], l3)
        .loss(|logits, b| cross_entropy(logits, &b.targets))
}

fn batch() -> Batch {
    let dev = Device::Cpu;
    let x: Vec<f32> = (0..8 * 6)
        .map(|i| ((i * 37 % 23) as f32) / 11.0 - 1.0)
        .collect();
    Batch::new(
        Tensor::from_vec(x, (8, 6), &dev).unwrap(),
        Tensor::from_vec((0..8u32).map(|i| i % 4).collect::<Vec<_>>(), 8, &dev).unwrap(),
    )
}

#[test]
fn a_varmap_gives_its_vars_ordered_by_name_and_shared() {
    let (varmap, dev) = (VarMap::new(), Device::Cpu);
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    for name in ["z", "b", "m", "a", "q", "c"] {
        linear(2, 2, vb.pp(name)).unwrap();
    }
    let p = ParamSet::from_varmap(&varmap).unwrap();
    let mut sorted = p.names().to_vec();
    sorted.sort();
    assert_eq!(p.names(), sorted, "ordered by name");
    assert_eq!(p.len(), 12);
    // Shared, not copied: setting the ParamSet's var changes the VarMap's.
    let i = p.names().iter().position(|n| n == "m.bias").unwrap();
    p.var(i)
        .set(&Tensor::new(&[5f32, 6.0], &dev).unwrap())
        .unwrap();
    let theirs = varmap.data().lock().unwrap()["m.bias"]
        .as_tensor()
        .to_vec1::<f32>();
    assert_eq!(theirs.unwrap(), vec![5.0, 6.0]);
}

#[test]
fn vars_keep_their_order_and_a_duplicate_name_is_an_error_naming_it() {
    let v = |x: f32| Var::new(&[x], &Device::Cpu).unwrap();
    let p = ParamSet::from_vars([("w".to_string(), v(1.0)), ("a".to_string(), v(2.0))]).unwrap();
    assert_eq!(p.names(), ["w", "a"]);
    let e = ParamSet::from_vars([("w".to_string(), v(1.0)), ("w".to_string(), v(2.0))])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("parameter w is listed twice"), "{e}");
}

#[test]
fn staged_gradients_of_a_candle_nn_mlp_equal_one_backward() {
    let m = mlp(["l1", "l2", "l3"]).unwrap();
    assert_eq!(m.num_stages(), 3);
    let b = batch();
    let (loss, grads) = forward_backward(&m, &b, |_, _| Ok(())).unwrap();
    let whole = m.loss_of(&m.output(&b.input).unwrap(), &b).unwrap();
    assert_eq!(
        loss.to_scalar::<f32>().unwrap(),
        whole.to_scalar::<f32>().unwrap()
    );
    let store = whole.backward().unwrap();
    for (i, v) in m.params().vars().iter().enumerate() {
        let want = store.get(v.as_tensor()).unwrap();
        let got = grads[i].as_ref().unwrap();
        let d = (want - got).unwrap().abs().unwrap().max_all().unwrap();
        let d = d.to_scalar::<f32>().unwrap();
        assert!(d < 1e-6, "{}: {d}", m.params().names()[i]);
    }
}

#[test]
fn a_parameter_under_no_stage_or_two_is_an_error_naming_it() {
    let e = mlp(["l1", "l2", "head"]).err().unwrap().to_string();
    assert!(
        e.contains("parameter l3.bias matches no stage's prefix"),
        "{e}"
    );
    let e = mlp(["l1", "l", "l3"]).err().unwrap().to_string();
    assert!(e.contains("parameter l2.bias matches no stage"), "{e}"); // "l" is not "l2."
    let e = mlp(["l1", "l1", "l3"]).err().unwrap().to_string();
    assert!(
        e.contains("parameter l1.bias matches the prefixes of stage 0 (\"l1\") and stage 1"),
        "{e}"
    );
}

#[test]
fn a_loss_that_is_not_a_scalar_is_an_error() {
    let (varmap, dev) = (VarMap::new(), Device::Cpu);
    let l = linear(
        6,
        4,
        VarBuilder::from_varmap(&varmap, DType::F32, &dev).pp("l"),
    )
    .unwrap();
    let m = Sequential::builder(ParamSet::from_varmap(&varmap).unwrap())
        .stage("l", l)
        .loss(|logits, _| logits.sqr())
        .unwrap();
    let e = forward_backward(&m, &batch(), |_, _| Ok(()))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("loss closure returned shape [8, 4]"), "{e}");
}

/// `Tape::backward_to(1)` runs every stage's backward but stage 0's and hands over
/// ∂loss/∂(stage 0's output): the later stages' gradients are the whole backward's, stage
/// 0's are missing, and stage 0's backward from that gradient gives the whole backward's.
#[test]
fn a_backward_to_stage_1_leaves_stage_0_to_the_caller_with_its_output_gradient() {
    let m = mlp(["l1", "l2", "l3"]).unwrap();
    let b = batch();
    let (_, whole) = forward_backward(&m, &b, |_, _| Ok(())).unwrap();
    let tape = seam::forward(&m, &b).unwrap();
    let (grads, up) = tape
        .backward_to(1, |_, _| Ok::<_, seam::ModelError>(()))
        .unwrap();
    let up = up.expect("stage 0's output gradient");
    let first = m.stage_params(0);
    let values = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    for (i, g) in grads.iter().enumerate() {
        match first.contains(&i) {
            true => assert!(g.is_none(), "stage 0's parameter {i} got a gradient"),
            false => assert_eq!(
                values(g.as_ref().unwrap()),
                values(whole[i].as_ref().unwrap())
            ),
        }
    }
    let out = m.forward_stage(0, None, &b).unwrap();
    let store = (out * up).unwrap().sum_all().unwrap().backward().unwrap();
    for i in first {
        let g = store.get(m.params().var(i).as_tensor()).unwrap();
        let want = values(whole[i].as_ref().unwrap());
        let d = (values(g).iter().zip(&want)).fold(0f32, |a, (x, y)| a.max((x - y).abs()));
        assert!(d < 1e-6, "stage 0's parameter {i}: {d}");
    }
}

"""Model cases: nanochat's GPT at its init plus small noise, a batch of random tokens, and nanochat's loss,
softcapped logits and gradients of the mean loss (fp32, CPU); and their recomputation for --verify."""

import numpy as np
import torch

from nanochat_goldens import fail
from nanochat_goldens.comparison import compare
from nanochat_goldens.inputs import perturb_, random_batch
from nanochat_goldens.layout import STRING, common_meta, config_attrs, config_from_file, f32, write_atomically

# Model parity cases. Sequence lengths above 128 so that the short window (nanochat rounds it up to a multiple
# of 128) really cuts; one vocabulary that nanochat pads (100 -> 128) and one it does not (64).
MODEL_CASES = [
    dict(name="model_gqa_windows",
         config=dict(sequence_len=160, vocab_size=100, n_layer=3, n_head=4, n_kv_head=2, n_embd=32,
                     window_pattern="SL"),
         batch=2, seed=1, perturb=0.1, ignored_targets=0),
    dict(name="model_mha",
         config=dict(sequence_len=144, vocab_size=64, n_layer=4, n_head=2, n_kv_head=2, n_embd=24,
                     window_pattern="SSL"),
         batch=2, seed=2, perturb=0.1, ignored_targets=8),
    # FP8 (base_train --fp8): the smallest shapes its filter converts (both sides of a Linear divisible by 16,
    # the smaller >= 128). With all heads full (c_q, c_k, c_v each converted, each with its own scales) and
    # with GQA (c_k, c_v 128 -> 64 stay in full precision beside an FP8 c_q); lm_head converted in both
    # (vocabulary 200 padded to 256).
    dict(name="model_fp8_mha",
         config=dict(sequence_len=64, vocab_size=200, n_layer=1, n_head=4, n_kv_head=4, n_embd=128,
                     window_pattern="L"),
         batch=2, seed=3, perturb=0.02, ignored_targets=4, fp8=True),
    dict(name="model_fp8_gqa",
         config=dict(sequence_len=64, vocab_size=200, n_layer=1, n_head=4, n_kv_head=2, n_embd=128,
                     window_pattern="L"),
         batch=2, seed=4, perturb=0.02, ignored_targets=0, fp8=True),
]



def model_numbers(model, idx, targets):
    """nanochat's mean loss, softcapped logits and gradients of the mean loss (fp32, CPU)."""
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        logits = model(idx)
    loss = model(idx, targets)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return loss.detach(), logits, grads


def make_model_case(nc, spec, path):
    config = nc.gpt.GPTConfig(**spec["config"])
    torch.manual_seed(spec["seed"])
    model = nc.new_model(config)
    generator = torch.Generator().manual_seed(spec["seed"])
    perturb_(model, generator, spec["perturb"])
    fp8_linears = nc.convert_to_fp8(model) if spec.get("fp8") else []
    if spec.get("fp8") and not fp8_linears:
        fail(f"{path}: --fp8 converted no Linear (each needs both sides divisible by 16, the smaller >= 128)")
    idx, targets = random_batch(generator, spec["batch"], config.sequence_len, config.vocab_size,
                                spec["ignored_targets"])
    loss, logits, grads = model_numbers(model, idx, targets)
    zero = [name for name, g in grads.items() if not torch.count_nonzero(g)]
    if zero and "name" in spec:
        fail(f"{path}: gradients that are all zero: {zero}")  # the committed cases must test every gradient
    if zero:
        print(f"note: gradients that are all zero: {zero}")
    weights = model.state_dict()

    def fill(f):
        config_attrs(f.create_group("config"), config, fp8=bool(fp8_linears))
        meta = f.create_group("meta")
        if fp8_linears:
            meta.attrs["fp8_linears"] = np.array(fp8_linears, dtype=STRING)
        common_meta(meta, nc, seed=np.int64(spec["seed"]), perturb=np.float64(spec["perturb"]),
                    ignored_targets=np.int64(spec["ignored_targets"]),
                    param_names=np.array(list(weights), dtype=STRING), **nc.model_facts(model))
        for name, w in weights.items():
            f.create_dataset(f"weights/{name}", data=f32(w))
        f.create_dataset("inputs/idx", data=idx.numpy())
        f.create_dataset("inputs/targets", data=targets.numpy())
        f.create_dataset("expected/loss", data=np.float32(loss.item()))
        f.create_dataset("expected/logits", data=f32(logits))
        for name, g in grads.items():
            f.create_dataset(f"expected/grads/{name}", data=f32(g))

    write_atomically(path, fill)
    print(f"{path}: loss {loss.item():.6f}, windows {model.window_sizes}, fp8 linears {len(fp8_linears)}, "
          f"{sum(w.numel() for w in weights.values())} parameters")


def verify_model_case(nc, f):
    config = config_from_file(nc, f)
    model = nc.new_model(config)
    if int(f["config"].attrs.get("fp8", 0)):
        nc.convert_to_fp8(model)
    names = [name for name, _ in model.named_parameters()]
    model.load_state_dict({name: torch.from_numpy(f["weights/" + name][()]) for name in names}, strict=True)
    idx = torch.from_numpy(f["inputs/idx"][()].astype(np.int64))
    targets = torch.from_numpy(f["inputs/targets"][()].astype(np.int64))
    loss, logits, grads = model_numbers(model, idx, targets)
    results = [compare("loss", loss, f["expected/loss"][()], rtol=1e-4, atol=1e-7),
               compare("logits", logits, f["expected/logits"][()], rtol=1e-4, atol=1e-7)]
    for name in names:
        results.append(compare(f"grads/{name}", grads[name], f[f"expected/grads/{name}"][()], rtol=1e-4, atol=1e-7))
    return results


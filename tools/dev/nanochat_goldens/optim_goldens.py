"""Optimizer goldens: three consecutive steps of nanochat's MuonAdamW, set up by base_train's own code, with
the gradients consumed, the weights, optimizer state and groups after each step, and base_train's schedules at
every iteration of the run; and their replay for --verify."""

import contextlib
import io

import numpy as np
import torch

from nanochat_goldens import fail
from nanochat_goldens.comparison import compare, compare_step
from nanochat_goldens.inputs import perturb_, random_batch
from nanochat_goldens.layout import STRING, common_meta, config_attrs, config_from_file, f32, write_atomically
from upgrade_h5 import text_of

# Optimizer goldens: base_train's command line for the model and the horizon; n_kv_head, when given, replaces
# base_train's n_kv_head = n_head (base_train itself never builds a GQA model).
OPTIM_GOLDENS = [
    dict(name="optim_real_init",
         cli=["--depth=2", "--aspect-ratio=12", "--head-dim=12", "--max-seq-len=160", "--window-pattern=SL",
              "--num-iterations=100"],
         vocab_size=60, n_kv_head=None, batch=2, seed=42, perturb=0.0, ortho_dtype="float32",
         iterations=[0, 1, 2]),
    dict(name="optim_perturbed",
         cli=["--depth=2", "--aspect-ratio=12", "--head-dim=6", "--max-seq-len=160", "--window-pattern=SL",
              "--num-iterations=100"],
         vocab_size=60, n_kv_head=2, batch=2, seed=3, perturb=0.05, ortho_dtype="float32",
         iterations=[0, 1, 2]),
    dict(name="optim_bf16_ortho",
         cli=["--depth=2", "--aspect-ratio=12", "--head-dim=6", "--max-seq-len=160", "--window-pattern=SL",
              "--num-iterations=100"],
         vocab_size=60, n_kv_head=2, batch=2, seed=3, perturb=0.05, ortho_dtype="bfloat16",
         iterations=[0, 1, 2]),
]

# base_train arguments that shape the model, the horizon, the optimizer or the schedules (recorded as arg_*).
RELEVANT_ARGS = {"depth", "aspect_ratio", "head_dim", "max_seq_len", "window_pattern", "num_iterations",
                 "target_flops", "target_param_data_ratio", "total_batch_size", "embedding_lr",
                 "unembedding_lr", "weight_decay", "matrix_lr", "scalar_lr", "warmup_steps", "warmdown_ratio",
                 "final_lr_frac"}


def muon_group_facts(group):
    m, n = group["params"][0].shape
    return {"shape": np.array([m, n], dtype=np.int64),
            "lr_shape_scale": np.float64(max(1.0, m / n) ** 0.5),  # as MuonAdamW._compute_muon scales lr
            "red_dim": np.int64(-1 if m >= n else -2),
            "second_moment_shape": np.array([m, 1] if m >= n else [1, n], dtype=np.int64)}


def group_attrs(h5group, group, names, applied):
    h5group.attrs["kind"] = group["kind"]
    h5group.attrs["params"] = np.array([names[id(p)] for p in group["params"]], dtype=STRING)
    h5group.attrs["initial_lr"] = np.float64(group["initial_lr"])
    h5group.attrs["lr"] = np.float64(group["lr"])
    h5group.attrs["weight_decay"] = np.float64(group["weight_decay"])
    if group["kind"] == "adamw":
        h5group.attrs["betas"] = np.array(group["betas"], dtype=np.float64)
        h5group.attrs["eps"] = np.float64(group["eps"])
    else:
        h5group.attrs["momentum"] = np.float64(group["momentum"])
        h5group.attrs["ns_steps"] = np.int64(group["ns_steps"])
        h5group.attrs["beta2"] = np.float64(group["beta2"])
        facts = muon_group_facts(group)
        for key, value in facts.items():
            h5group.attrs[key] = value
        if applied:
            h5group.attrs["lr_effective"] = np.float64(group["lr"] * facts["lr_shape_scale"])


def optimizer_state(optimizer, names):
    """Per parameter: AdamW step / exp_avg / exp_avg_sq; Muon's stacked buffers split into per-matrix rows."""
    state = {}
    for group in optimizer.param_groups:
        if group["kind"] == "adamw":
            for p in group["params"]:
                s = optimizer.state[p]
                state[names[id(p)]] = {"step": np.int64(s["step"]), "exp_avg": f32(s["exp_avg"]),
                                       "exp_avg_sq": f32(s["exp_avg_sq"])}
        else:
            s = optimizer.state[group["params"][0]]
            for i, p in enumerate(group["params"]):
                state[names[id(p)]] = {"momentum_buffer": f32(s["momentum_buffer"][i]),
                                       "second_momentum_buffer": f32(s["second_momentum_buffer"][i])}
    return state


def build_optim_model(nc, spec):
    """base_train's model for the spec's command line (n_kv_head optionally replaced), and its namespace."""
    ns = nc.base_train(spec["cli"], spec["vocab_size"])
    with contextlib.redirect_stdout(io.StringIO()):  # GPT() announces its vocabulary padding
        config = ns["build_model_meta"](ns["args"].depth).config
    if spec["n_kv_head"] is not None:
        config.n_kv_head = spec["n_kv_head"]
    torch.manual_seed(spec["seed"])  # base_train: compute_init seeds torch's global generator with 42
    model = nc.new_model(config)
    return ns, model


def run_steps(nc, ns, model, optimizer, iterations, ortho, next_grads):
    """Runs optimizer steps at `iterations`; next_grads(k) sets p.grad and returns (loss, idx, targets)."""
    names = {id(p): name for name, p in model.named_parameters()}
    steps = []
    for k, it in enumerate(iterations):
        loss, idx, targets = next_grads(k)
        grads = {name: f32(p.grad) for name, p in model.named_parameters()}
        lrm, momentum, decay = nc.apply_schedule(ns, it)
        with nc.ortho_dtype(ortho):
            optimizer.step()
        model.zero_grad(set_to_none=True)
        steps.append(dict(iteration=it, lrm=lrm, momentum=momentum, decay=decay, loss=loss, idx=idx,
                          targets=targets, grads=grads,
                          groups=[dict(g) for g in optimizer.param_groups],
                          weights_after={name: f32(p) for name, p in model.named_parameters()},
                          state=optimizer_state(optimizer, names)))
    return steps



def schedule_table(ns):
    """base_train's schedule functions at every iteration of the run, 0 through num_iterations."""
    schedule = {"lr_multiplier": [], "muon_momentum": [], "muon_weight_decay": []}
    for it in range(ns["num_iterations"] + 1):
        schedule["lr_multiplier"].append(ns["get_lr_multiplier"](it))
        schedule["muon_momentum"].append(ns["get_muon_momentum"](it))
        schedule["muon_weight_decay"].append(ns["get_weight_decay"](it))
    return schedule


def optim_config_attrs(oc, nc, spec, ns, config, steps, initial_groups, names, param_names):
    """/optim_config: base_train's command line and arguments, its horizon and set-up values, each step's
    schedule values, and the groups as set up."""
    group_of = {}
    for g, group in enumerate(initial_groups):
        for p in group["params"]:
            group_of[names[id(p)]] = g
    args = ns["args"]
    buildable = spec["n_kv_head"] is None
    oc.attrs["optimizer"] = "nanochat.optim.MuonAdamW (single process: world_size 1)"
    oc.attrs["ortho_dtype"] = spec["ortho_dtype"]
    oc.attrs["base_train_cli"] = " ".join(spec["cli"])
    oc.attrs["base_train_buildable"] = np.bool_(buildable)
    if not buildable:
        oc.attrs["n_kv_head_override"] = np.int64(spec["n_kv_head"])
    for key, value in sorted(vars(args).items()):
        if key not in RELEVANT_ARGS:
            continue
        if isinstance(value, int):
            oc.attrs[f"arg_{key}"] = np.int64(value)
        elif isinstance(value, float):
            oc.attrs[f"arg_{key}"] = np.float64(value)
        elif isinstance(value, str) and value:
            oc.attrs[f"arg_{key}"] = value
    for key in ("num_scaling_params", "target_tokens", "D_REF", "B_REF", "total_batch_size",
                "num_iterations"):
        value = ns[key]
        if float(value) != int(value):
            fail(f"{key} = {value} is not an integer")
        oc.attrs[key] = np.int64(int(value))
    for key in ("batch_lr_scale", "weight_decay_scaled"):
        oc.attrs[key] = np.float64(ns[key])
    oc.attrs["dmodel_lr_scale"] = np.float64((config.n_embd / 768) ** -0.5)  # GPT.setup_optimizer
    oc.attrs["ref12_n_embd"] = np.int64(ns["d12_ref"].config.n_embd)
    oc.attrs["setup_unembedding_lr"] = np.float64(args.unembedding_lr * ns["batch_lr_scale"])
    oc.attrs["setup_embedding_lr"] = np.float64(args.embedding_lr * ns["batch_lr_scale"])
    oc.attrs["setup_scalar_lr"] = np.float64(args.scalar_lr * ns["batch_lr_scale"])
    oc.attrs["setup_matrix_lr"] = np.float64(args.matrix_lr * ns["batch_lr_scale"])
    oc.attrs["setup_weight_decay"] = np.float64(ns["weight_decay_scaled"])
    oc.attrs["iterations"] = np.array([s["iteration"] for s in steps], dtype=np.int64)
    oc.attrs["lr_multiplier"] = np.array([s["lrm"] for s in steps], dtype=np.float64)
    oc.attrs["muon_momentum"] = np.array([s["momentum"] for s in steps], dtype=np.float64)
    oc.attrs["muon_weight_decay"] = np.array([s["decay"] for s in steps], dtype=np.float64)
    oc.attrs["polar_express_coeffs"] = np.array(nc.optim.polar_express_coeffs, dtype=np.float64)
    oc.attrs["num_groups"] = np.int64(len(initial_groups))
    oc.attrs["param_group"] = np.array([group_of[name] for name in param_names], dtype=np.int64)
    for g, group in enumerate(initial_groups):
        group_attrs(oc.create_group(f"groups/{g:02d}"), group, names, applied=False)


def steps_datasets(f, steps, names, param_names):
    """/steps/K: each step's schedule values, loss, inputs, groups as applied, gradients, weights and state."""
    for k, s in enumerate(steps):
        step = f.create_group(f"steps/{k}")
        step.attrs["iteration"] = np.int64(s["iteration"])
        step.attrs["lr_multiplier"] = np.float64(s["lrm"])
        step.attrs["muon_momentum"] = np.float64(s["momentum"])
        step.attrs["muon_weight_decay"] = np.float64(s["decay"])
        step.attrs["loss"] = np.float64(s["loss"])
        step.create_dataset("inputs/idx", data=s["idx"].numpy())
        step.create_dataset("inputs/targets", data=s["targets"].numpy())
        for g, group in enumerate(s["groups"]):
            group_attrs(step.create_group(f"groups/{g:02d}"), group, names, applied=True)
        for name in param_names:
            step.create_dataset(f"grads/{name}", data=s["grads"][name])
        for name in param_names:
            step.create_dataset(f"weights_after/{name}", data=s["weights_after"][name])
        for name in param_names:
            for key, value in s["state"][name].items():
                step.create_dataset(f"state/{name}/{key}", data=value)


def make_optim_golden(nc, spec, path):
    ns, model = build_optim_model(nc, spec)
    generator = torch.Generator().manual_seed(spec["seed"])
    perturb_(model, generator, spec["perturb"])
    optimizer = nc.setup_optimizer(ns, model)
    names = {id(p): name for name, p in model.named_parameters()}
    param_names = [name for name, _ in model.named_parameters()]
    weights_before = {name: f32(p) for name, p in model.named_parameters()}
    initial_groups = [dict(g) for g in optimizer.param_groups]
    config = model.config

    def next_grads(k):
        idx, targets = random_batch(generator, spec["batch"], config.sequence_len, config.vocab_size)
        loss = model(idx, targets)  # base_train: loss = model(x, y); (loss / grad_accum_steps).backward()
        loss.backward()
        return loss.item(), idx, targets

    steps = run_steps(nc, ns, model, optimizer, spec["iterations"], spec["ortho_dtype"], next_grads)
    schedule = schedule_table(ns)

    def fill(f):
        config_attrs(f.create_group("config"), config)
        common_meta(f.create_group("meta"), nc, seed=np.int64(spec["seed"]), perturb=np.float64(spec["perturb"]),
                    batch=np.int64(spec["batch"]), num_steps=np.int64(len(steps)),
                    ortho_dtype=spec["ortho_dtype"], param_dtype="float32", state_steps="all",
                    grads="mean cross-entropy loss of nanochat's GPT on fresh random tokens at the current weights",
                    param_names=np.array(param_names, dtype=STRING), **nc.model_facts(model))
        optim_config_attrs(f.create_group("optim_config"), nc, spec, ns, config, steps, initial_groups, names,
                           param_names)
        f.create_dataset("schedule/iteration", data=np.arange(ns["num_iterations"] + 1, dtype=np.int64))
        for key, values in schedule.items():
            f.create_dataset(f"schedule/{key}", data=np.array(values, dtype=np.float64))
        for name, w in weights_before.items():
            f.create_dataset(f"weights_before/{name}", data=w)
        steps_datasets(f, steps, names, param_names)

    write_atomically(path, fill)
    print(f"{path}: {len(initial_groups)} groups, losses {[round(s['loss'], 6) for s in steps]}, "
          f"{sum(w.size for w in weights_before.values())} parameters")


def verify_optim_golden(nc, f):
    """Replays a golden's stored gradients through nanochat's MuonAdamW, set up by base_train from the
    golden's base_train_cli, and compares weights, state, group values and the schedule table."""
    oc = f["optim_config"].attrs
    config = config_from_file(nc, f)
    cli = text_of(oc["base_train_cli"]).split()
    ns = nc.base_train(cli, config.vocab_size)
    model = nc.new_model(config)
    names = [name for name, _ in model.named_parameters()]
    model.load_state_dict({name: torch.from_numpy(f["weights_before/" + name][()]) for name in names})
    optimizer = nc.setup_optimizer(ns, model)
    ortho = text_of(oc.get("ortho_dtype", f["meta"].attrs.get("ortho_dtype", "float32")))
    params = dict(model.named_parameters())
    steps = sorted(f["steps"], key=int)

    def next_grads(k):
        for name in names:
            params[name].grad = torch.from_numpy(f[f"steps/{steps[k]}/grads/{name}"][()]).clone()
        return None, None, None

    iterations = [int(f[f"steps/{k}"].attrs["iteration"]) for k in steps]
    results = []
    for key in ("batch_lr_scale", "weight_decay_scaled"):
        results.append(compare(f"optim_config/{key}", torch.tensor(ns[key], dtype=torch.float64), oc[key],
                               rtol=1e-15, atol=0))
    for g, group in enumerate(optimizer.param_groups):
        stored = f[f"optim_config/groups/{g:02d}"].attrs
        results.append(compare(f"groups/{g:02d}/initial_lr", torch.tensor(group["initial_lr"], dtype=torch.float64),
                               stored["initial_lr"], rtol=1e-15, atol=0))
    if "schedule" in f:
        for key, fn in (("lr_multiplier", "get_lr_multiplier"), ("muon_momentum", "get_muon_momentum"),
                        ("muon_weight_decay", "get_weight_decay")):
            its = f["schedule/iteration"][()]
            got = torch.tensor([ns[fn](int(i)) for i in its], dtype=torch.float64)
            results.append(compare(f"schedule/{key}", got, f[f"schedule/{key}"][()], rtol=1e-15, atol=0))
    replay = run_steps(nc, ns, model, optimizer, iterations, ortho, next_grads)
    muon_group = {}  # parameter name -> its Muon group's key
    for g, group in enumerate(optimizer.param_groups):
        if group["kind"] == "muon":
            for p in group["params"]:
                muon_group[next(n for n in names if params[n] is p)] = f"{g:02d}"
    decay_sum = {}
    before = {name: f[f"weights_before/{name}"][()] for name in names}
    for k, s in zip(steps, replay):
        for key in set(muon_group.values()):
            attrs = f[f"steps/{k}/groups/{key}"].attrs
            decay_sum[key] = decay_sum.get(key, 0.0) + float(attrs["lr_effective"]) * float(attrs["weight_decay"])
        for name in names:
            expected = f[f"steps/{k}/weights_after/{name}"][()]
            results.append(compare_step(f"steps/{k}/weights_after/{name}", int(k), s["weights_after"][name],
                                        expected, before[name], decay_sum.get(muon_group.get(name), 0.0),
                                        bf16=ortho == "bfloat16" and name in muon_group))
            before[name] = expected
            if f"steps/{k}/state/{name}" in f:
                for key, value in s["state"][name].items():
                    results.append(compare(f"steps/{k}/state/{name}/{key}", torch.as_tensor(value),
                                           f[f"steps/{k}/state/{name}/{key}"][()],
                                           rtol=0.5 if ortho == "bfloat16" else 1e-4, atol=0))
    return results


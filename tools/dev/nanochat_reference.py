"""Independent PyTorch reference of nanochat's GPT training forward pass (CPU, fp32 or fp64).

It is the PyTorch CPU baseline for benchmarks (bench_torch_reference.py). nanoforge's parity files are not
made with it but with nanochat's own code (make_nanochat_goldens.py). It follows nanochat's GPT as
docs/model.md writes it down (the sizes, the forward pass, the sliding windows) in nanochat's CPU fp32 mode: no
bf16 rounding anywhere, plain masked softmax attention instead of flash-attention. Parameter names, shapes and
registration order are nanochat's state-dict layout, so checkpoints and case files map one to one.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

RMS_EPS = torch.finfo(torch.float32).eps  # F.rms_norm(eps=None) uses fp32 epsilon (2^-23) for fp32 input
ROTARY_BASE = 100000.0
SOFTCAP = 15.0
QK_SCALE = 1.2
SMEAR_CHANNELS = 24
VE_GATE_CHANNELS = 12


def ceil_div(a, b):
    return -(-a // b)


def padded_vocab(vocab_size):
    return ceil_div(vocab_size, 64) * 64


def has_value_embed(layer, n_layer):
    """Alternating layers carry a value embedding, always including the last one."""
    return layer % 2 == (n_layer - 1) % 2


def window_sizes(config):
    """Left attention window per layer: a query at t sees keys t-w .. t (w+1 keys)."""
    long_w = config["sequence_len"]
    short_w = ceil_div(ceil_div(long_w, 4), 128) * 128
    pattern = config["window_pattern"].upper()
    assert pattern and set(pattern) <= {"S", "L"}, "window_pattern is made of S and L"
    sizes = [long_w if pattern[i % len(pattern)] == "L" else short_w for i in range(config["n_layer"])]
    sizes[-1] = long_w
    return sizes


def rms_norm(x):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + RMS_EPS)


def rotary_tables(seq_len, head_dim):
    """cos/sin of shape (seq_len, head_dim/2), built in fp32 exactly as nanochat builds its buffers."""
    inv_freq = 1.0 / (ROTARY_BASE ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return freqs.cos(), freqs.sin()


def apply_rotary(x, cos, sin):
    """Half-split rotation on (B, T, heads, D); nanochat's sign convention (rotation by -theta)."""
    half = x.size(-1) // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos + x2 * sin, x2 * cos - x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        c = config["n_embd"]
        self.n_head, self.n_kv_head = config["n_head"], config["n_kv_head"]
        self.head_dim = c // self.n_head
        self.c_q = nn.Linear(c, self.n_head * self.head_dim, bias=False)
        self.c_k = nn.Linear(c, self.n_kv_head * self.head_dim, bias=False)
        self.c_v = nn.Linear(c, self.n_kv_head * self.head_dim, bias=False)
        self.c_proj = nn.Linear(c, c, bias=False)
        if has_value_embed(layer, config["n_layer"]):
            self.ve_gate = nn.Linear(VE_GATE_CHANNELS, self.n_kv_head, bias=False)

    def forward(self, u, ve, cos, sin, window):
        B, T, C = u.shape
        q = self.c_q(u).view(B, T, self.n_head, self.head_dim)
        k = self.c_k(u).view(B, T, self.n_kv_head, self.head_dim)
        v = self.c_v(u).view(B, T, self.n_kv_head, self.head_dim)
        if ve is not None:
            gate = 3.0 * torch.sigmoid(self.ve_gate(u[..., :VE_GATE_CHANNELS]))  # (B, T, Hkv)
            v = v + gate.unsqueeze(-1) * ve.view(B, T, self.n_kv_head, self.head_dim)
        q = rms_norm(apply_rotary(q, cos, sin)) * QK_SCALE
        k = rms_norm(apply_rotary(k, cos, sin)) * QK_SCALE

        # (B, heads, T, D); query head h reads kv head h // (n_head / n_kv_head)
        group = self.n_head // self.n_kv_head
        q = q.transpose(1, 2)
        k = k.transpose(1, 2).repeat_interleave(group, dim=1)
        v = v.transpose(1, 2).repeat_interleave(group, dim=1)
        pos = torch.arange(T, device=u.device)
        lag = pos[:, None] - pos[None, :]  # query row minus key column
        visible = (lag >= 0) & (lag <= window)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        y = (probs @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config["n_embd"]
        self.c_fc = nn.Linear(c, 4 * c, bias=False)
        self.c_proj = nn.Linear(4 * c, c, bias=False)

    def forward(self, u):
        return self.c_proj(F.relu(self.c_fc(u)).square())


class Block(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        self.attn = Attention(config, layer)
        self.mlp = MLP(config)

    def forward(self, x, ve, cos, sin, window):
        x = x + self.attn(rms_norm(x), ve, cos, sin, window)
        return x + self.mlp(rms_norm(x))


class GPT(nn.Module):
    """nanochat GPT. config: dict with sequence_len, vocab_size, n_layer, n_head, n_kv_head, n_embd,
    window_pattern. Parameters are created in fp32; call .double() for an fp64 model."""

    def __init__(self, config):
        super().__init__()
        self.config = dict(config)
        n_layer, c = config["n_layer"], config["n_embd"]
        head_dim = c // config["n_head"]
        assert c % config["n_head"] == 0 and head_dim % 2 == 0, "head_dim must be an even integer"
        assert config["n_head"] % config["n_kv_head"] == 0, "n_kv_head must divide n_head"
        assert c >= SMEAR_CHANNELS, "smear gate reads the first 24 channels"
        vp = padded_vocab(config["vocab_size"])
        kv_dim = config["n_kv_head"] * head_dim

        # Registration order is nanochat's state-dict order.
        self.resid_lambdas = nn.Parameter(torch.empty(n_layer))
        self.x0_lambdas = nn.Parameter(torch.empty(n_layer))
        self.smear_lambda = nn.Parameter(torch.empty(1))
        self.backout_lambda = nn.Parameter(torch.empty(1))
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(vp, c),
            "h": nn.ModuleList([Block(config, i) for i in range(n_layer)]),
        })
        self.lm_head = nn.Linear(c, vp, bias=False)
        self.smear_gate = nn.Linear(SMEAR_CHANNELS, 1, bias=False)
        self.value_embeds = nn.ModuleDict({
            str(i): nn.Embedding(vp, kv_dim) for i in range(n_layer) if has_value_embed(i, n_layer)
        })

        self.windows = window_sizes(config)
        self.backout_layer = n_layer // 2
        cos, sin = rotary_tables(config["sequence_len"], head_dim)
        # (1, T, 1, D/2) to broadcast over (B, T, heads, D/2); cast along with the model by .double()
        self.register_buffer("cos", cos[None, :, None, :], persistent=False)
        self.register_buffer("sin", sin[None, :, None, :], persistent=False)

    @torch.no_grad()
    def init_weights(self, seed):
        """nanochat's init distributions, drawn in fp32 in nanochat's order from a generator seeded
        with `seed`. Returns the generator so callers can keep drawing from the same stream."""
        gen = torch.Generator().manual_seed(seed)
        n_layer, c = self.config["n_layer"], self.config["n_embd"]
        bound = math.sqrt(3.0) / math.sqrt(c)

        def normal(p, std):
            p.copy_(torch.empty(p.shape).normal_(0.0, std, generator=gen))

        def uniform(p, lo, hi):
            p.copy_(torch.empty(p.shape).uniform_(lo, hi, generator=gen))

        normal(self.transformer.wte.weight, 0.8)
        normal(self.lm_head.weight, 0.001)
        for block in self.transformer.h:
            for lin in (block.attn.c_q, block.attn.c_k, block.attn.c_v):
                uniform(lin.weight, -bound, bound)
            block.attn.c_proj.weight.zero_()
            uniform(block.mlp.c_fc.weight, -0.4 * bound, 0.4 * bound)
            block.mlp.c_proj.weight.zero_()
        ramp = torch.arange(n_layer, dtype=torch.float32) / max(n_layer - 1, 1)
        self.resid_lambdas.copy_(1.15 - 0.10 * ramp)
        self.x0_lambdas.copy_(0.20 - 0.15 * ramp)
        uniform(self.smear_gate.weight, 0.0, 0.02)
        self.smear_lambda.zero_()
        self.backout_lambda.fill_(0.2)
        for i in sorted(self.value_embeds, key=int):
            uniform(self.value_embeds[i].weight, -bound, bound)
        for block in self.transformer.h:
            if hasattr(block.attn, "ve_gate"):
                uniform(block.attn.ve_gate.weight, 0.0, 0.02)
        return gen

    def forward(self, idx, targets=None):
        """idx, targets: int64 (B, T), targets may hold -1 (ignored).
        Returns (mean cross-entropy or None, softcapped logits (B, T, vocab_size)), both in the weights'
        dtype (fp32 in nanochat's CPU mode, where its final .float() is a no-op)."""
        B, T = idx.shape
        assert 1 < T <= self.config["sequence_len"]
        cos, sin = self.cos[:, :T], self.sin[:, :T]

        x = rms_norm(self.transformer.wte(idx))
        # Smear: mix the previous token's normed embedding into each position after the first.
        gate = self.smear_lambda * torch.sigmoid(self.smear_gate(x[:, 1:, :SMEAR_CHANNELS]))
        x = torch.cat([x[:, :1], x[:, 1:] + gate * x[:, :-1]], dim=1)
        x0 = x

        backout = None
        for i, block in enumerate(self.transformer.h):
            x = self.resid_lambdas[i] * x + self.x0_lambdas[i] * x0
            ve = self.value_embeds[str(i)](idx) if str(i) in self.value_embeds else None
            x = block(x, ve, cos, sin, self.windows[i])
            if i == self.backout_layer:
                backout = x
        x = rms_norm(x - self.backout_lambda * backout)

        logits = self.lm_head(x)[..., : self.config["vocab_size"]]
        logits = SOFTCAP * torch.tanh(logits / SOFTCAP)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return loss, logits

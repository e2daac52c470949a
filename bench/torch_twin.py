"""PyTorch twin of the alphast model, for benchmarks and parity only.

The AlphaSTomics network as docs/model.md §2 describes it: input
encoders, L post-norm transformer layers around an attention wrapper
(lucidrains linear attention block, or gated softmax attention with QK
RMSNorm), a dense GELU FFN or a mixture of ReLU experts (split width, noisy
top-k router, load-balance loss), output heads with masking and centring,
and the diffusion loss. state_dict names are the reference's (docs/model.md §2.10), which
alphast uses too, so either side's safetensors weights load into the other.

Padded cells behave as in the reference (docs/model.md §2.9): no mask inside the network;
only the outputs and the loss are masked. alphast matches this with
TransformerLayer_setting.honour_mask: false.

A config is the reference's config dict (the YAML's nested blocks) plus the
gene count; missing keys take the reference code defaults.
"""
import contextlib
import json
import math
import struct

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

WRAP_HIDDEN = 64  # attention-wrapper MLP width, hard-coded in the reference
POS_DIM = 3


class Dims:
    """The sizes and switches of a reference config dict (docs/model.md §1)."""

    def __init__(self, cfg, num_genes):
        tl = cfg.get("TransformerLayer_setting", {})
        self.G = num_genes
        self.Ei = cfg["mlp_in_expression_setting"]["mlp_in_expression_dims"]
        self.E = cfg["mlp_in_expression_setting"]["mlp_out_expression_dims"]
        self.Ti = cfg["mlp_in_diffusion_time_setting"]["mlp_in_diffusion_time_dims"]
        self.T = cfg["mlp_in_diffusion_time_setting"]["mlp_out_diffusion_time_dims"]
        self.P = cfg["PositionMLP_setting"]["hidden_dims"]
        self.L = tl["num_layers"]
        self.H = tl["num_heads"]
        self.F = tl["dim_ff_expression"]
        self.Ft = tl["dim_ff_diffusion_time"]
        self.p = float(tl.get("dropout", 0.1))
        self.ln_eps = float(tl.get("layer_norm_eps", 1e-6))
        self.Ho = cfg["mlp_out_expression_setting"]["hidden_dims"]
        self.Hp = cfg["mlp_out_position_norm_setting"]["hidden_dims"]
        self.gated = bool(tl.get("use_gated_attention", False))
        self.gate_type = tl.get("gate_type", "headwise")
        self.qk_norm = bool(tl.get("use_qk_norm", True))
        self.moe = bool(tl.get("use_moe", False))
        self.n_exp = int(tl.get("num_experts", 8))
        self.top_k = int(tl.get("moe_top_k", 2))
        self.w_lb = float(tl.get("moe_load_balance_loss_weight", 0.01))
        full = tl.get("expert_hidden", "split") == "full"
        self.expert_hidden = self.F if full else max(1, self.F // self.n_exp)


def mlp(*sizes, final_relu=False):
    """Linear / ReLU alternation: indices 0, 2, ... are the Linears."""
    mods = []
    for i in range(len(sizes) - 1):
        mods.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or final_relu:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def split_heads(x, heads):
    b, n, e = x.shape
    return x.view(b, n, heads, e // heads).transpose(1, 2)


def merge_heads(x):
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


# ---- lucidrains LinearAttentionTransformer, depth 1 (docs/model.md §2.5) ------------


class LinearSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = (split_heads(f(x), self.heads) for f in (self.to_q, self.to_k, self.to_v))
        dh = q.shape[-1]
        q = q.softmax(dim=-1) * dh ** -0.5
        k = k.softmax(dim=-2)
        context = torch.einsum("bhnd,bhne->bhde", k, v)
        return self.to_out(merge_heads(torch.einsum("bhnd,bhde->bhne", q, context)))


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4):
        super().__init__()
        self.w1 = nn.Linear(dim, dim * mult)
        self.w2 = nn.Linear(dim * mult, dim)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Chunk(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm that also takes the bf16 activations of CPU autocast: it normalises in float32 and
    returns the input's dtype, as PyTorch 2's mixed-dtype layer_norm does (1.13's refuses the mix).
    Float32 inputs are normalised as nn.LayerNorm does."""

    def forward(self, x):
        return super().forward(x.float()).to(x.dtype)


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.fn = fn
        self.norm = LayerNorm(dim)  # eps 1e-5, as lucidrains

    def forward(self, x):
        return self.fn(self.norm(x))


class SequentialSequence(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def forward(self, x):
        for f, g in self.layers:
            x = x + f(x)
            x = x + g(x)
        return x


class LinearAttentionTransformer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        block = nn.ModuleList([PreNorm(dim, LinearSelfAttention(dim, heads)), PreNorm(dim, Chunk(FeedForward(dim)))])
        self.layers = SequentialSequence(nn.ModuleList([block]))

    def forward(self, x):
        return self.layers(x)


# ---- gated multi-head softmax attention (docs/model.md §2.6) ----------------------


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class GatedMultiHeadAttention(nn.Module):
    def __init__(self, d, heads, gate_type, qk_norm, dropout):
        super().__init__()
        self.d, self.heads, self.gate_type, self.dropout = d, heads, gate_type, dropout
        extra = {"headwise": heads, "elementwise": d}.get(gate_type, 0)
        self.q_proj = nn.Linear(d, d + extra)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.o_proj = nn.Linear(d, d)
        if qk_norm:
            self.q_norm = RMSNorm(d // heads)
            self.k_norm = RMSNorm(d // heads)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x):
        qg = self.q_proj(x)
        q = split_heads(qg[..., : self.d], self.heads)
        k = split_heads(self.k_proj(x), self.heads)
        v = split_heads(self.v_proj(x), self.heads)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        a = F.dropout(s.softmax(dim=-1), self.dropout, self.training)
        o = a @ v
        if self.gate_type == "headwise":
            o = o * torch.sigmoid(qg[..., self.d :]).transpose(1, 2).unsqueeze(-1)
        elif self.gate_type == "elementwise":
            o = o * torch.sigmoid(split_heads(qg[..., self.d :], self.heads))
        return self.o_proj(merge_heads(o))


# ---- mixture of experts (docs/model.md §2.7) ---------------------------------------


class Expert(nn.Module):
    def __init__(self, d, hidden, dropout):
        super().__init__()
        self.w1 = nn.Linear(d, hidden)
        self.w2 = nn.Linear(hidden, d)
        self.dropout = dropout

    def forward(self, x):
        return self.w2(F.dropout(F.relu(self.w1(x)), self.dropout, self.training))


class TopKRouter(nn.Module):
    NOISE_EPS = 0.01

    def __init__(self, d, n_exp):
        super().__init__()
        self.gate = nn.Linear(d, n_exp, bias=False)
        self.w_noise = nn.Linear(d, n_exp, bias=False)

    def forward(self, x):
        logits = self.gate(x)
        if self.training:
            logits = logits + self.NOISE_EPS * torch.randn_like(logits) * F.softplus(self.w_noise(x))
        return logits


class MixtureOfExperts(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.k, self.n, self.w_lb = dims.top_k, dims.n_exp, dims.w_lb
        self.experts = nn.ModuleList([Expert(dims.E, dims.expert_hidden, dims.p) for _ in range(dims.n_exp)])
        self.router = TopKRouter(dims.E, dims.n_exp)

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        logits = self.router(flat)
        top, idx = logits.topk(self.k, dim=-1)
        w = top.softmax(dim=-1)
        # The combine adds in float32, as alphast's does (under bf16 autocast
        # the experts' outputs are bf16 and x may be too).
        out = flat.new_zeros(flat.shape, dtype=torch.float32)
        for e, expert in enumerate(self.experts):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel():
                out.index_add_(0, tok, (expert(flat[tok]) * w[tok, slot].unsqueeze(-1)).float())
        probs = logits.softmax(dim=-1).mean(0)
        frac = F.one_hot(logits.argmax(-1), self.n).float().mean(0)
        return out.view_as(x), self.w_lb * self.n * (frac * probs).sum()


class MoEFFN(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.ffn = MixtureOfExperts(dims)

    def forward(self, x):
        return self.ffn(x)


# ---- the model (docs/model.md §2) --------------------------------------------------


def vecnorm(p):
    return p.norm(dim=-1, keepdim=True)


class PositionMLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.mlp = mlp(1, hidden, 1)

    def forward(self, pos):
        r = vecnorm(pos)
        return pos * self.mlp(r) / (r + 1e-6)


class AttentionWrapper(nn.Module):
    def __init__(self, dims):
        super().__init__()
        E, T = dims.E, dims.T
        self.transform_positions_for_attn_mlp = mlp(POS_DIM + 1, WRAP_HIDDEN, POS_DIM)
        self.concatenated_features = nn.Linear(E + T + POS_DIM, E)
        self.transform_expression_for_attn_mlp = mlp(E, WRAP_HIDDEN, E)
        if dims.gated:
            self.attention = GatedMultiHeadAttention(E, dims.H, dims.gate_type, dims.qk_norm, dims.p)
        else:
            self.attention = LinearAttentionTransformer(E, dims.H)
        self.head_features_to_position = nn.Linear(E, POS_DIM)
        self.head_features_to_expression = nn.Linear(E, E)
        self.y_y = nn.Linear(T, T)

    def forward(self, x, y, pos):
        te = self.transform_expression_for_attn_mlp(x)
        r = vecnorm(pos)
        tp = self.transform_positions_for_attn_mlp(torch.cat([pos / (r + 1e-7), r], -1))
        ty = self.y_y(y)
        h = self.concatenated_features(torch.cat([te, ty.unsqueeze(1).expand(-1, x.shape[1], -1), tp], -1))
        h = self.attention(h)
        return self.head_features_to_expression(h), self.head_features_to_position(h), ty


class PositionNorm(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(1))

    def forward(self, p):
        return self.weight * p / (vecnorm(p).mean(dim=1, keepdim=True) + self.eps)


class TransformerLayer(nn.Module):
    def __init__(self, dims):
        super().__init__()
        E, T, eps = dims.E, dims.T, dims.ln_eps
        self.p = dims.p
        self.attn_model = AttentionWrapper(dims)
        if dims.moe:
            self.expression_ffn = MoEFFN(dims)
        else:
            self.lin_expression_features_1 = nn.Linear(E, dims.F)
            self.lin_expression_features_2 = nn.Linear(dims.F, E)
        self.norm_node_features_1 = LayerNorm(E, eps=eps)
        self.norm_node_features_2 = LayerNorm(E, eps=eps)
        self.norm_positions_1 = PositionNorm(eps)
        self.lin_diffusion_time_1 = nn.Linear(T, dims.Ft)
        self.lin_diffusion_time_2 = nn.Linear(dims.Ft, T)
        self.norm_diffusion_time_1 = LayerNorm(T, eps=eps)
        self.norm_diffusion_time_2 = LayerNorm(T, eps=eps)

    def drop(self, x):
        return F.dropout(x, self.p, self.training)

    def ffn(self, x):
        if hasattr(self, "expression_ffn"):
            return self.expression_ffn(x)
        return self.lin_expression_features_2(self.drop(F.gelu(self.lin_expression_features_1(x)))), None

    def forward(self, x, y, pos):
        a_x, a_pos, a_y = self.attn_model(x, y, pos)
        pos_new = self.norm_positions_1(a_pos)
        x1 = self.norm_node_features_1(x + self.drop(a_x))
        f, aux = self.ffn(x1)
        x2 = self.norm_node_features_2(x1 + self.drop(f))
        y1 = self.norm_diffusion_time_1(y + self.drop(a_y))
        g = self.lin_diffusion_time_2(self.drop(F.gelu(self.lin_diffusion_time_1(y1))))
        y2 = self.norm_diffusion_time_2(y1 + self.drop(g))
        return x2, y2, pos_new, aux


class Model(nn.Module):
    def __init__(self, cfg, num_genes):
        super().__init__()
        d = self.dims = Dims(cfg, num_genes)
        self.mlp_in_expression = mlp(d.G, d.Ei, d.E, final_relu=True)
        self.mlp_in_diffusion_time = mlp(1, d.Ti, d.T, final_relu=True)
        self.position_mlp = PositionMLP(d.P)
        self.transformer_layers = nn.ModuleList([TransformerLayer(d) for _ in range(d.L)])
        self.mlp_out_expression = mlp(d.E, d.Ho, d.G)
        self.mlp_out_pos_features = mlp(d.E, d.Hp, final_relu=True)
        self.mlp_out_position_norm = mlp(d.Hp + POS_DIM + 1, d.Hp, 1)

    def forward(self, expression, t, positions, mask=None):
        """-> (expression [B,N,G], positions [B,N,3], summed MoE aux or None)."""
        if mask is None:
            mask = expression.new_ones(expression.shape[:2])
        m = mask.unsqueeze(-1)
        x = self.mlp_in_expression(expression)
        y = self.mlp_in_diffusion_time(t)
        pos = self.position_mlp(positions)
        aux = None
        for layer in self.transformer_layers:
            x, y, pos, a = layer(x, y, pos)
            if a is not None:
                aux = a if aux is None else aux + a
        expr = self.mlp_out_expression(x) * m
        r = vecnorm(pos)
        feat = torch.cat([self.mlp_out_pos_features(x), pos, r], -1)
        p = pos * self.mlp_out_position_norm(feat) / (r + 1e-6) * m
        mu = p.sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp(min=1)
        return expr, (p - mu) * m, aux


def diffusion_loss(pred_expr, pred_pos, expr, pos, mask, aux):
    """Expression MSE + distance-matrix MSE over valid cells (+ MoE aux), docs/model.md §4.2."""
    m = mask.unsqueeze(-1)
    l_expr = (m * (pred_expr - expr) ** 2).sum() / (m.sum() * expr.shape[-1]).clamp(min=1)
    pair = mask.unsqueeze(2) * mask.unsqueeze(1)
    diff = (torch.cdist(pred_pos, pred_pos, compute_mode="donot_use_mm_for_euclid_dist")
            - torch.cdist(pos, pos, compute_mode="donot_use_mm_for_euclid_dist"))
    n = mask.sum(1)
    per_set = (pair * diff ** 2).sum((1, 2)) / n.clamp(min=1) ** 2
    ok = n >= 2
    l_pos = per_set[ok].mean() if ok.any() else per_set.new_zeros(())
    total = l_expr + l_pos
    return total + aux if aux is not None else total


class Schedule:
    """The cosine schedule of docs/model.md §3.1 for one ν, in alphast's arithmetic (float64 ĝ, float32
    running log ᾱ), as core/model/diffusion.c fills it."""

    def __init__(self, steps=1000, nu=1.0, s=0.008):
        u = torch.arange(steps + 2, dtype=torch.float64) / (steps + 1)
        f = torch.cos(math.pi / 2 * (u ** nu + s) / (1 + s)) ** 2
        g = f / f[0]
        beta = (1 - g[1:] / g[:-1]).float().clamp(0.0, 0.9999)
        self.steps = steps
        self.log_alpha_bar = torch.cumsum(torch.log(1 - beta), 0)
        self.alpha_bar = torch.exp(self.log_alpha_bar)
        self.sigma_bar = torch.sqrt(-torch.expm1(2 * self.log_alpha_bar))


def sample_grid(T, num_steps):
    """The reverse process's times (docs/model.md §6): Δ = max(1, ⌊T/num_steps⌋), s = ⌊(T−1)/Δ⌋Δ … 0."""
    delta = T // num_steps if num_steps > 0 and T // num_steps > 1 else 1
    return list(range((T - 1) // delta * delta, -1, -delta))


def centred(p, m):
    """Positions [B,N,3] centred over each set's valid cells (m [B,N,1])."""
    return (p - (p * m).sum(1, keepdim=True) / m.sum(1, keepdim=True).clamp(min=1)) * m


def reverse_step(sched, z, x0, s, t, m):
    """One posterior step z_t -> z_s of positions (docs/model.md §3.4), every set at time t."""
    ls, lt = sched.log_alpha_bar[s], sched.log_alpha_bar[t]
    a_ts, a2_ts = torch.exp(lt - ls), torch.exp(2 * lt - 2 * ls)
    r = torch.exp(torch.log(-torch.expm1(2 * ls) + 1e-8) - torch.log(-torch.expm1(2 * lt) + 1e-8))
    var_ts = sched.sigma_bar[t] ** 2 - sched.sigma_bar[s] ** 2 * a2_ts
    std = torch.sqrt(torch.clamp(var_ts * r, min=0.0))
    eps = centred(torch.randn_like(z) * m, m)
    return centred(a_ts * r * z + sched.alpha_bar[s] * (1 - a2_ts * r) * x0 + std * eps, m)


@torch.no_grad()
def sample_positions(model, sched, expr, num_steps, mask=None, pass_sets=None):
    """alphast's sampler in expr_to_pos mode (docs/model.md §6, core/eval/sample.c): from the limit
    distribution at T, predict x̂₀ in eval mode and step down the grid; returns the last x̂₀ (return
    x0). pass_sets: sets per forward pass (the sampler's PASS_CELLS chunking), default all."""
    model.eval()
    B, N, _ = expr.shape
    mask = expr.new_ones(B, N) if mask is None else mask
    m = mask.unsqueeze(-1)
    pass_sets = pass_sets or B
    z = centred(torch.randn(B, N, POS_DIM, device=expr.device) * m, m)
    t, x0 = sched.steps, None
    for s in sample_grid(sched.steps, num_steps):
        tt = torch.full((B, 1), t / sched.steps, device=expr.device)
        x0 = torch.cat([model(expr[b:b + pass_sets], tt[b:b + pass_sets], z[b:b + pass_sets], mask[b:b + pass_sets])[1]
                        for b in range(0, B, pass_sets)])
        z, t = reverse_step(sched, z, x0, s, t, m), s
    return x0


def autocast(precision, device="cpu"):
    """alphast's training.precision in PyTorch: "bf16-mixed" is autocast in bfloat16 on `device` ("cpu"
    or "cuda"), under which linear, matmul and bmm take bf16 operands (PyTorch also rounds their outputs
    to bf16, alphast keeps them float32); "32-true" is float32 as it is. Wrap the forward and the loss,
    not the backward."""
    if precision == "bf16-mixed":
        return torch.autocast(device, dtype=torch.bfloat16)
    if precision != "32-true":
        raise ValueError(f"precision {precision!r}: 32-true or bf16-mixed")
    return contextlib.nullcontext()


# ---- safetensors without the safetensors package (not in Debian 12) ------

_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """{name: float32/int torch tensor} of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        arr = np.frombuffer(raw, dtype=_DTYPES[info["dtype"]], count=(end - start) // np.dtype(_DTYPES[info["dtype"]]).itemsize,
                            offset=base + start).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def write_safetensors(path, tensors):
    """Writes {name: float32 tensor} as safetensors."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def load_weights(model, path):
    """Loads alphast (or reference) weights by state_dict name; every name must match."""
    state = read_safetensors(path)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}: missing {missing[:5]}, unexpected {unexpected[:5]}")

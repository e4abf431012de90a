"""Cross-attention encoder layers (CAELs) of JTCSE, computed with the towers' own weights.

Zong et al., "JTCSE: Joint Tensor-Modulus Constraints and Cross-Attention for Unsupervised
Contrastive Learning of Sentence Embeddings" (2025), eq. 7-9. At a CAEL ``j`` tower I's cross
stream takes its attention weights from its own queries and keys and applies them to tower II's
values::

    SA_I   = softmax(Q_I(c_I^{j-1}) K_I(c_I^{j-1})^T / sqrt(d_head) + mask)
    CACT_I = SA_I . V_II(c_II^{j-1})
    c_I^j  = FFN_I(LN_I(Dense_I(CACT_I) + c_I^{j-1}))

The rest of the layer (output dense, dropout, residual LayerNorm, feed-forward) is tower I's
layer ``j`` unchanged, so a CAEL adds no parameters. Any encoder whose layers have the BERT
layout (``attention.self.{query,key,value}``, ``attention.output``, ``intermediate``,
``output``) works: BERT, RoBERTa, MiniLM, ...
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

_LAYER_PARTS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output",
    "intermediate",
    "output",
)


def encoder_layers(hf_model: nn.Module) -> nn.ModuleList:
    """The encoder layers of a BERT-layout ``transformers`` model, checked part by part."""
    layers = getattr(getattr(hf_model, "encoder", None), "layer", None)
    name = type(hf_model).__name__
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise ValueError(
            f"{name} has no `encoder.layer` list; JTCSE towers need a BERT-layout encoder (BERT, RoBERTa, MiniLM, ...)."
        )
    for part in _LAYER_PARTS:
        try:
            layers[0].get_submodule(part)
        except AttributeError:
            raise ValueError(
                f"{name} layers have no `{part}`; JTCSE towers need the BERT layer layout "
                "(self-attention Q/K/V, attention output, intermediate, output)."
            ) from None
    return layers


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """``(batch, seq)`` 0/1 mask -> boolean ``(batch, 1, 1, seq)`` key mask for SDPA (True = attend)."""
    return attention_mask[:, None, None, :].bool()


def _heads(x: torch.Tensor, head_size: int) -> torch.Tensor:
    """(batch, seq, hidden) -> (batch, heads, seq, head_size)."""
    return x.view(*x.shape[:-1], -1, head_size).transpose(1, 2)


def cael_forward(
    layer: nn.Module,
    partner_layer: nn.Module,
    hidden: torch.Tensor,
    partner_hidden: torch.Tensor,
    key_mask: torch.Tensor,
) -> torch.Tensor:
    """One CAEL step for the tower owning ``layer``: its Q/K on ``hidden``, the partner's V on ``partner_hidden``.

    ``key_mask`` is :func:`padding_mask` of the (shared) attention mask. Attention dropout is the
    layer's own (active in training mode only), as in the ordinary forward.
    """
    attn = layer.attention.self
    head_size = attn.attention_head_size
    query = _heads(attn.query(hidden), head_size)
    key = _heads(attn.key(hidden), head_size)
    value = _heads(partner_layer.attention.self.value(partner_hidden), head_size)
    context = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=key_mask,
        dropout_p=attn.dropout.p if attn.training else 0.0,
        scale=attn.scaling,
    )
    context = context.transpose(1, 2).reshape(hidden.shape)
    attention_output = layer.attention.output(context, hidden)
    return layer.output(layer.intermediate(attention_output), attention_output)

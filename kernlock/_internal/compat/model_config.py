"""A declared model's `config.json`, read as data: bounded, never running its code or loading a
kernel it names.

What Transformers would do with a config at load time is not done here:

* `attn_implementation` naming a Hub kernel is taken out (and returned, to be locked), so
  building the model never downloads or imports that kernel;
* `auto_map` (remote code) is never followed: the model's own `.py` files are only read;
* counts that size the module tree (layers, experts) are capped, so a config asking for a
  million layers builds a handful: a model class needs one layer of each kind, not all of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from kernlock._internal.fs.bounded_read import CONFIG_LIMIT, UnreadableFile, read_bounded
from kernlock.errors import ModelError

LAYER_CAP = 16  # layers built per model: more than any hybrid's period (Jamba's attention: 8)
EXPERT_CAP = 8
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "moe_topk", "top_k")
LAYER_LIST_KEYS = ("layer_types", "layers_block_type", "block_types")
ATTENTION_KEYS = ("attn_implementation", "_attn_implementation")
JSON_DEPTH_LIMIT = 64


class ModelConfig(NamedTuple):
    """A config as read: its data (capped), where its files are, and what it names."""

    data: dict[str, Any]
    directory: Path  # holds config.json (and a remote-code model's .py files)
    attention: str | None  # the Hub kernel `attn_implementation` names, if any
    remote_code: bool  # `auto_map` names the model's own classes


def _depth(value: object, limit: int) -> bool:
    """Whether `value` nests deeper than `limit`."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _error(name: str, why: str) -> ModelError:
    return ModelError(
        f"model {name}: cannot read its config.json ({why})",
        fix="point [tool.kernlock] models at a directory holding a model's config.json, or a "
        "Hub model id",
    )


def _cap(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with the module-tree counts capped (see the module docstring)."""
    capped = dict(data)
    for key in LAYER_LIST_KEYS:
        kinds = capped.get(key)
        if isinstance(kinds, list) and len(kinds) > LAYER_CAP:
            distinct = list(dict.fromkeys(map(str, kinds)))[:LAYER_CAP]
            capped[key] = distinct
            for layers in LAYER_KEYS:
                if layers in capped:
                    capped[layers] = len(distinct)
    for key in LAYER_KEYS:
        value = capped.get(key)
        if isinstance(value, int) and value > LAYER_CAP:
            capped[key] = LAYER_CAP
    if isinstance(capped.get("first_k_dense_replace"), int):
        capped["first_k_dense_replace"] = min(capped["first_k_dense_replace"], LAYER_CAP - 1)
    for key in EXPERT_KEYS:
        if isinstance(capped.get(key), int) and capped[key] > EXPERT_CAP:
            capped[key] = EXPERT_CAP
    for key in TOP_K_KEYS:
        if isinstance(capped.get(key), int) and capped[key] > EXPERT_CAP:
            capped[key] = EXPERT_CAP
    for key, value in capped.items():  # nested text configs (vision-language models)
        if key.endswith("_config") and key != "quantization_config" and isinstance(value, dict):
            capped[key] = _cap(value)
    return capped


def read_config(name: str, config_file: Path) -> ModelConfig:
    """The config at `config_file` as data (see the module docstring); one-line `ModelError`
    otherwise."""
    try:
        raw = read_bounded(config_file, CONFIG_LIMIT)
    except UnreadableFile as error:
        raise _error(name, str(error)) from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise _error(name, f"not JSON: {str(error)[:120]}") from None
    if not isinstance(data, dict):
        raise _error(name, "not a JSON object")
    if _depth(data, JSON_DEPTH_LIMIT):
        raise _error(name, f"nested deeper than {JSON_DEPTH_LIMIT} levels")
    architectures = data.get("architectures")
    if architectures is not None and (
        not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures)
    ):
        raise _error(name, "`architectures` is not a list of class names")
    attention = None
    for key in ATTENTION_KEYS:
        value = data.pop(key, None)
        if isinstance(value, str) and ("/" in value or value.startswith("flash_attention")):
            attention = value
    return ModelConfig(
        data=_cap(data),
        directory=config_file.parent,
        attention=attention,
        remote_code=isinstance(data.get("auto_map"), dict),
    )


def build_config(name: str, config: ModelConfig) -> Any:
    """A Transformers config object of the model's own `model_type`, built from the data alone."""
    from transformers import CONFIG_MAPPING

    model_type = config.data.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        raise _error(name, f"model_type {model_type!r} is not one this Transformers knows")
    cls = CONFIG_MAPPING[model_type]
    decode = getattr(cls, "_decode_special_floats", None)  # `{"__float__": "Infinity"}` → inf
    data = decode(config.data) if callable(decode) else config.data
    try:
        return cls.from_dict(data)
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise _error(name, first[:200]) from None
